/*
 * types.c — helpers for the plain value types of types.h: GFIDs (make,
 * print, parse, map to an inode number), iatt <-> struct stat, directory
 * entry lists, and the single-name check every brick applies.
 *
 * Nothing here keeps state but the run of bfs_gfid_generate_entry (one
 * word per process) and each thread's buffer of random bytes for GFIDs.
 * The only memory owned is a bfs_dirents list: its array and the entry
 * names, released by bfs_dirents_free().
 */
#include "core/types.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

const struct bfs_gfid bfs_gfid_null = {{0}};
const struct bfs_gfid bfs_gfid_root = {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};

/* ---- GFIDs ---- */

/*
 * A random (version 4) UUID. The bytes come from getrandom() through a
 * buffer of each thread, refilled BFS_GFID_POOL bytes at a time: one system
 * call per 32 GFIDs instead of one per GFID (a mount draws one per created
 * file). The buffer is the kernel's randomness all the same, each byte
 * handed out once; a forked child starts with its buffer empty (atfork), so
 * parent and child never hand out the same bytes. getrandom() without flags
 * blocks only until the kernel's pool is initialised once after boot, so it
 * never fails in practice; should it fail anyway we abort rather than hand
 * out predictable identities, which would silently merge distinct files.
 */
#define BFS_GFID_POOL 512u

static _Thread_local struct {
    uint8_t b[BFS_GFID_POOL];
    size_t left; /* unused bytes at the end of b */
} gfid_pool;
static pthread_once_t gfid_pool_once = PTHREAD_ONCE_INIT;

static void gfid_pool_forget(void)
{
    gfid_pool.left = 0;
}

static void gfid_pool_init(void)
{
    if (pthread_atfork(NULL, NULL, gfid_pool_forget) != 0)
        abort(); /* a child could repeat its parent's GFIDs */
}

static void random_fill(uint8_t *out, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom(out + got, len - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            abort();
        }
        got += (size_t)n;
    }
}

void bfs_gfid_generate(struct bfs_gfid *out)
{
    (void)pthread_once(&gfid_pool_once, gfid_pool_init);
    if (gfid_pool.left < sizeof(out->b)) {
        random_fill(gfid_pool.b, sizeof(gfid_pool.b));
        gfid_pool.left = sizeof(gfid_pool.b);
    }
    uint8_t *src = gfid_pool.b + sizeof(gfid_pool.b) - gfid_pool.left;
    memcpy(out->b, src, sizeof(out->b));
    memset(src, 0, sizeof(out->b)); /* handed out: not kept around */
    gfid_pool.left -= sizeof(out->b);
    out->b[6] = (uint8_t)((out->b[6] & 0x0f) | 0x40); /* version 4 */
    out->b[8] = (uint8_t)((out->b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    /* With those bits set, the result can be neither null nor root. */
}

/*
 * A GFID for a new entry: random as above, except that runs of
 * BFS_GFID_RUN consecutive calls in this process share the first two
 * bytes. Those two bytes name the handle folder a brick files the entry's
 * handle under (.brickfs/AB/CD, docs/design/on-brick-format.md): with fully
 * random GFIDs a young brick makes a new folder (a directory inode, the
 * second inode allocation of the create) for almost every file, and after
 * a cache drop reads a different cold folder for every handle it touches.
 * With runs, consecutive creates of a client land in one folder: one mkdir
 * per run, and one folder read per run when they are opened or removed in
 * the same order. Over time the runs spread uniformly over the 65,536
 * folders as before. The other 14 bytes keep their 112 random bits (less
 * the version and variant bits), which is what makes GFIDs unique; nothing
 * hashes GFIDs on their first two bytes alone. Threads share the run; a
 * race at a run's end only makes one run a little shorter or longer.
 */
#define BFS_GFID_RUN 256u

void bfs_gfid_generate_entry(struct bfs_gfid *out)
{
    static _Atomic uint32_t run; /* prefix << 16 | uses; 0: no run yet */
    bfs_gfid_generate(out);
    uint32_t cur = atomic_load_explicit(&run, memory_order_relaxed), next;
    do {
        if ((cur & 0xffff) == 0 || (cur & 0xffff) >= BFS_GFID_RUN)
            next = (uint32_t)out->b[0] << 24 | (uint32_t)out->b[1] << 16 | 1u;
        else
            next = cur + 1;
    } while (!atomic_compare_exchange_weak_explicit(&run, &cur, next, memory_order_relaxed,
                                                    memory_order_relaxed));
    out->b[0] = (uint8_t)(next >> 24);
    out->b[1] = (uint8_t)(next >> 16);
}

bool bfs_gfid_is_null(const struct bfs_gfid *g)
{
    return memcmp(g, &bfs_gfid_null, sizeof(*g)) == 0;
}

bool bfs_gfid_is_root(const struct bfs_gfid *g)
{
    return memcmp(g, &bfs_gfid_root, sizeof(*g)) == 0;
}

bool bfs_gfid_eq(const struct bfs_gfid *a, const struct bfs_gfid *b)
{
    return memcmp(a, b, sizeof(*a)) == 0;
}

char *bfs_gfid_fmt(const struct bfs_gfid *g, char out[BFS_GFID_STRLEN])
{
    static const char hex[] = "0123456789abcdef";
    char *p = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        *p++ = hex[g->b[i] >> 4];
        *p++ = hex[g->b[i] & 0x0f];
    }
    *p = '\0';
    return out;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int bfs_gfid_parse(const char *s, struct bfs_gfid *out)
{
    struct bfs_gfid g;
    int bi = 0;

    if (!s)
        return -EINVAL;
    for (int i = 0; i < BFS_GFID_STRLEN - 1; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return -EINVAL;
            continue;
        }
        /* s[i] == '\0' yields -1 here, so a short string stops before overrunning. */
        int hi = hexval(s[i]);
        if (hi < 0)
            return -EINVAL;
        int lo = hexval(s[++i]);
        if (lo < 0)
            return -EINVAL;
        g.b[bi++] = (uint8_t)(hi << 4 | lo);
    }
    if (s[BFS_GFID_STRLEN - 1] != '\0')
        return -EINVAL;
    *out = g;
    return 0;
}

/*
 * Inode numbers are what stat(2) and FUSE show. The root is 1, as the kernel
 * expects for FUSE_ROOT_ID. Others fold the 128 bits into 64 by XOR of the
 * halves, which is stable across processes and hosts (same GFID, same number
 * everywhere). 0 is invalid for the kernel and 1 is the root's, so the two
 * values the fold could produce there are moved to 2 and 3: a collision that
 * is no more likely than any other 64-bit one.
 */
uint64_t bfs_gfid_to_ino(const struct bfs_gfid *g)
{
    uint64_t hi = 0, lo = 0;

    if (bfs_gfid_is_root(g))
        return 1;
    for (int i = 0; i < 8; i++) {
        hi = hi << 8 | g->b[i];
        lo = lo << 8 | g->b[8 + i];
    }
    uint64_t ino = hi ^ lo;
    if (ino < 2)
        ino += 2;
    return ino;
}

/* ---- iatt <-> stat ---- */

/* Fills every field from st except gfid, which a brick reads from its
 * xattr separately and which is left as the caller set it. */
void bfs_iatt_from_stat(struct bfs_iatt *ia, const struct stat *st)
{
    ia->ino = st->st_ino;
    ia->dev = st->st_dev;
    ia->mode = st->st_mode;
    ia->nlink = (uint32_t)st->st_nlink;
    ia->uid = st->st_uid;
    ia->gid = st->st_gid;
    ia->rdev = st->st_rdev;
    ia->size = st->st_size < 0 ? 0 : (uint64_t)st->st_size;
    ia->blocks = st->st_blocks < 0 ? 0 : (uint64_t)st->st_blocks;
    ia->blksize = st->st_blksize < 0 ? 0 : (uint32_t)st->st_blksize;
    ia->atime_sec = st->st_atim.tv_sec;
    ia->atime_nsec = (uint32_t)st->st_atim.tv_nsec;
    ia->mtime_sec = st->st_mtim.tv_sec;
    ia->mtime_nsec = (uint32_t)st->st_mtim.tv_nsec;
    ia->ctime_sec = st->st_ctim.tv_sec;
    ia->ctime_nsec = (uint32_t)st->st_ctim.tv_nsec;
}

/* A literal copy (st_ino = ia->ino); fields stat has and iatt lacks are 0. */
void bfs_iatt_to_stat(const struct bfs_iatt *ia, struct stat *st)
{
    memset(st, 0, sizeof(*st));
    st->st_ino = ia->ino;
    st->st_dev = ia->dev;
    st->st_mode = ia->mode;
    st->st_nlink = ia->nlink;
    st->st_uid = ia->uid;
    st->st_gid = ia->gid;
    st->st_rdev = ia->rdev;
    st->st_size = (off_t)ia->size;
    st->st_blocks = (blkcnt_t)ia->blocks;
    st->st_blksize = (blksize_t)ia->blksize;
    st->st_atim.tv_sec = ia->atime_sec;
    st->st_atim.tv_nsec = ia->atime_nsec;
    st->st_mtim.tv_sec = ia->mtime_sec;
    st->st_mtim.tv_nsec = ia->mtime_nsec;
    st->st_ctim.tv_sec = ia->ctime_sec;
    st->st_ctim.tv_nsec = ia->ctime_nsec;
}

/* ---- directory entry lists ---- */

static int dirents_reserve(struct bfs_dirents *l, uint32_t want)
{
    if (want <= l->cap)
        return 0;
    uint64_t cap = l->cap ? l->cap : 16;
    while (cap < want)
        cap *= 2;
    if (cap > UINT32_MAX)
        return -ENOMEM;
    struct bfs_dirent *v = realloc(l->v, cap * sizeof(*v));
    if (!v)
        return -ENOMEM;
    l->v = v;
    l->cap = (uint32_t)cap;
    return 0;
}

int bfs_dirents_add(struct bfs_dirents *l, const char *name, uint64_t d_off,
                    uint32_t d_type, uint64_t d_ino, const struct bfs_iatt *attr)
{
    if (!name)
        return -EINVAL;
    if (l->count == UINT32_MAX)
        return -ENOMEM;
    int rc = dirents_reserve(l, l->count + 1);
    if (rc < 0)
        return rc;
    char *copy = strdup(name);
    if (!copy)
        return -ENOMEM;
    struct bfs_dirent *e = &l->v[l->count++];
    memset(e, 0, sizeof(*e));
    e->name = copy;
    e->d_off = d_off;
    e->d_type = d_type;
    e->d_ino = d_ino;
    if (attr) {
        e->has_attr = true;
        e->attr = *attr;
    }
    return 0;
}

void bfs_dirents_free(struct bfs_dirents *l)
{
    if (!l)
        return;
    for (uint32_t i = 0; i < l->count; i++)
        free(l->v[i].name);
    free(l->v);
    l->v = NULL;
    l->count = 0;
    l->cap = 0;
}

/* dst is overwritten (not freed first); on failure it is left empty. */
int bfs_dirents_copy(struct bfs_dirents *dst, const struct bfs_dirents *src)
{
    struct bfs_dirents out = {0};

    if (src->count && dirents_reserve(&out, src->count) < 0)
        return -ENOMEM;
    for (uint32_t i = 0; i < src->count; i++) {
        const struct bfs_dirent *e = &src->v[i];
        if (bfs_dirents_add(&out, e->name, e->d_off, e->d_type, e->d_ino,
                            e->has_attr ? &e->attr : NULL) < 0) {
            bfs_dirents_free(&out);
            *dst = out;
            return -ENOMEM;
        }
    }
    *dst = out;
    return 0;
}

/* ---- names ---- */

int bfs_name_check(const char *name)
{
    if (!name)
        return -EINVAL;
    size_t len = strnlen(name, 256);
    if (len == 0)
        return -EINVAL;
    if (len > 255)
        return -ENAMETOOLONG;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return -EINVAL;
    if (memchr(name, '/', len))
        return -EINVAL;
    return 0;
}
