/*
 * mem-store.c — the inode store of storage/memory: a GFID hash of
 * struct mem_inode, name resolution, directory entry lists, attributes.
 * Everything here runs with priv->lock held (see mem.h for lifetimes).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "mem.h"

#define MEM_MIN_BUCKETS 256

static size_t gfid_hash(const struct bfs_gfid *g)
{
    uint64_t a, b;
    memcpy(&a, g->b, 8);
    memcpy(&b, g->b + 8, 8);
    uint64_t h = a ^ (b * 0x9e3779b97f4a7c15ull);
    return (size_t)(h ^ (h >> 29));
}

static void mem_inode_free(struct mem_inode *mi)
{
    for (size_t i = 0; i < mi->nents; i++)
        free(mi->ents[i].name);
    free(mi->ents);
    free(mi->data);
    free(mi->target);
    bfs_dict_unref(mi->xattrs);
    free(mi);
}

int bfs__mem_store_init(struct mem_priv *priv)
{
    priv->nbuckets = MEM_MIN_BUCKETS;
    priv->buckets = calloc(priv->nbuckets, sizeof(*priv->buckets));
    return priv->buckets ? 0 : -ENOMEM;
}

void bfs__mem_store_fini(struct mem_priv *priv)
{
    for (size_t b = 0; b < priv->nbuckets; b++) {
        struct mem_inode *mi = priv->buckets[b];
        while (mi) {
            struct mem_inode *next = mi->hnext;
            mem_inode_free(mi);
            mi = next;
        }
    }
    free(priv->buckets);
    priv->buckets = NULL;
}

struct mem_inode *bfs__mem_find(struct mem_priv *priv, const struct bfs_gfid *g)
{
    struct mem_inode *mi = priv->buckets[gfid_hash(g) & (priv->nbuckets - 1)];
    while (mi && !bfs_gfid_eq(&mi->attr.gfid, g))
        mi = mi->hnext;
    return mi;
}

static void rehash(struct mem_priv *priv)
{
    size_t n = priv->nbuckets * 2;
    struct mem_inode **nb = calloc(n, sizeof(*nb));
    if (!nb)
        return; /* keep the old table: longer chains, still correct */
    for (size_t b = 0; b < priv->nbuckets; b++) {
        struct mem_inode *mi = priv->buckets[b];
        while (mi) {
            struct mem_inode *next = mi->hnext;
            size_t k = gfid_hash(&mi->attr.gfid) & (n - 1);
            mi->hnext = nb[k];
            nb[k] = mi;
            mi = next;
        }
    }
    free(priv->buckets);
    priv->buckets = nb;
    priv->nbuckets = n;
}

static void hash_in(struct mem_priv *priv, struct mem_inode *mi)
{
    if (priv->count + 1 > priv->nbuckets * 2)
        rehash(priv);
    size_t k = gfid_hash(&mi->attr.gfid) & (priv->nbuckets - 1);
    mi->hnext = priv->buckets[k];
    priv->buckets[k] = mi;
    mi->hashed = true;
    priv->count++;
}

static void hash_out(struct mem_priv *priv, struct mem_inode *mi)
{
    struct mem_inode **pp = &priv->buckets[gfid_hash(&mi->attr.gfid) & (priv->nbuckets - 1)];
    while (*pp && *pp != mi)
        pp = &(*pp)->hnext;
    if (*pp) {
        *pp = mi->hnext;
        priv->count--;
    }
    mi->hashed = false;
    mi->hnext = NULL;
}

int bfs__mem_new(struct mem_priv *priv, struct bfs_frame *frame, struct bfs_dict *xdata,
                 uint32_t mode, struct mem_inode **out)
{
    struct bfs_gfid g;
    const void *req = NULL;
    size_t len = 0;
    if (bfs_dict_get_bin(xdata, MEM_GFID_REQ_KEY, &req, &len) == 0 && len == sizeof(g.b)) {
        memcpy(g.b, req, sizeof(g.b));
        if (bfs_gfid_is_null(&g))
            return -EINVAL;
        if (bfs__mem_find(priv, &g))
            return -EEXIST;
    } else {
        do
            bfs_gfid_generate(&g);
        while (bfs__mem_find(priv, &g));
    }
    struct mem_inode *mi = calloc(1, sizeof(*mi));
    if (!mi)
        return -ENOMEM;
    mi->attr.gfid = g;
    mi->attr.ino = bfs_gfid_to_ino(&g);
    mi->attr.dev = 0xb0f5;
    mi->attr.mode = mode;
    mi->attr.uid = frame ? frame->stack->uid : 0;
    mi->attr.gid = frame ? frame->stack->gid : 0;
    mi->attr.blksize = 4096;
    mi->next_off = 3; /* 1 and 2 are "." and ".." */
    bfs__mem_touch(mi, true, true, true);
    hash_in(priv, mi);
    *out = mi;
    return 0;
}

void bfs__mem_unlinked(struct mem_priv *priv, struct mem_inode *mi)
{
    if (mi->hashed)
        hash_out(priv, mi);
    if (mi->opens == 0)
        mem_inode_free(mi);
}

void bfs__mem_put_open(struct mem_priv *priv, struct mem_inode *mi)
{
    if (mi->opens > 0)
        mi->opens--;
    if (mi->opens == 0 && !mi->hashed)
        mem_inode_free(mi);
}

int bfs__mem_resolve(struct mem_priv *priv, const struct bfs_loc *loc, struct mem_inode **out,
                     struct mem_inode **parent)
{
    if (parent)
        *parent = NULL;
    if (!bfs_gfid_is_null(&loc->gfid)) {
        *out = bfs__mem_find(priv, &loc->gfid);
        return *out ? 0 : -ESTALE;
    }
    struct mem_inode *dir;
    int rc = bfs__mem_resolve_parent(priv, loc, &dir);
    if (rc < 0)
        return rc;
    struct mem_dirent *e = bfs__mem_dir_find(dir, loc->name);
    if (!e || !(*out = bfs__mem_find(priv, &e->gfid)))
        return -ENOENT;
    if (parent)
        *parent = dir;
    return 0;
}

int bfs__mem_resolve_parent(struct mem_priv *priv, const struct bfs_loc *loc,
                            struct mem_inode **parent)
{
    if (!loc->name)
        return -EINVAL;
    int rc = bfs_name_check(loc->name);
    if (rc < 0)
        return rc;
    if (bfs_gfid_is_null(&loc->pargfid))
        return -EINVAL;
    struct mem_inode *dir = bfs__mem_find(priv, &loc->pargfid);
    if (!dir)
        return -ESTALE;
    if (!S_ISDIR(dir->attr.mode))
        return -ENOTDIR;
    *parent = dir;
    return 0;
}

struct mem_inode *bfs__mem_fd_inode(struct bfs_xl *xl, struct bfs_fd *fd)
{
    uint64_t v;
    if (!fd)
        return NULL;
    if (fd->graph == xl->graph && bfs_fd_ctx_get(fd, xl, &v) == 0 && v)
        return (struct mem_inode *)(uintptr_t)v;
    if (!fd->inode)
        return NULL;
    return bfs__mem_find(xl->private, &fd->inode->gfid);
}

struct mem_dirent *bfs__mem_dir_find(struct mem_inode *dir, const char *name)
{
    for (size_t i = 0; i < dir->nents; i++)
        if (strcmp(dir->ents[i].name, name) == 0)
            return &dir->ents[i];
    return NULL;
}

int bfs__mem_dir_add(struct mem_inode *dir, const char *name, const struct bfs_gfid *g)
{
    if (dir->nents == dir->capents) {
        size_t cap = dir->capents ? dir->capents * 2 : 8;
        struct mem_dirent *n = realloc(dir->ents, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        dir->ents = n;
        dir->capents = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return -ENOMEM;
    dir->ents[dir->nents++] = (struct mem_dirent){copy, *g, dir->next_off++};
    bfs__mem_touch(dir, false, true, true);
    return 0;
}

/* Keeps list order (and so increasing offsets) for readdir continuation. */
void bfs__mem_dir_del(struct mem_inode *dir, struct mem_dirent *e)
{
    size_t i = (size_t)(e - dir->ents);
    free(e->name);
    memmove(&dir->ents[i], &dir->ents[i + 1], (dir->nents - i - 1) * sizeof(*e));
    dir->nents--;
    bfs__mem_touch(dir, false, true, true);
}

void bfs__mem_touch(struct mem_inode *mi, bool a, bool m, bool c)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (a) {
        mi->attr.atime_sec = ts.tv_sec;
        mi->attr.atime_nsec = (uint32_t)ts.tv_nsec;
    }
    if (m) {
        mi->attr.mtime_sec = ts.tv_sec;
        mi->attr.mtime_nsec = (uint32_t)ts.tv_nsec;
    }
    if (c) {
        mi->attr.ctime_sec = ts.tv_sec;
        mi->attr.ctime_nsec = (uint32_t)ts.tv_nsec;
    }
}

void bfs__mem_stat(const struct mem_inode *mi, struct bfs_iatt *out)
{
    *out = mi->attr;
    out->blocks = (mi->attr.size + 511) / 512;
    if (S_ISDIR(mi->attr.mode))
        out->size = 4096;
    else if (S_ISLNK(mi->attr.mode) && mi->target)
        out->size = strlen(mi->target);
}

int bfs__mem_resize(struct mem_priv *priv, struct mem_inode *mi, uint64_t size)
{
    if (size > priv->max_file_size)
        return -EFBIG;
    if (size > mi->cap) {
        size_t cap = mi->cap ? mi->cap : 4096;
        while (cap < size)
            cap *= 2;
        char *n = realloc(mi->data, cap);
        if (!n)
            return -ENOMEM;
        memset(n + mi->cap, 0, cap - mi->cap);
        mi->data = n;
        mi->cap = cap;
    }
    if (size < mi->attr.size && mi->data)
        memset(mi->data + size, 0, mi->attr.size - size); /* a later grow reads zeros */
    mi->attr.size = size;
    return 0;
}
