/*
 * posix-cache.c — what the brick remembers about recently used GFIDs:
 * that their handle is good (the inode it names), and for the most recent
 * files an O_PATH fd, so that resolving a GFID is a dup() and an fstat()
 * instead of a trip through the handle store.
 *
 * Why: a file's handle lives in one of 65,536 folders of .brickfs: checking
 * it at lookup, or opening the file by GFID, reads one of those folders,
 * which after the page cache is dropped is a disk read the local file
 * system would not have made (the bench's stat and read phases: one per
 * file).
 *
 * Two bounds, one table:
 *   - `cap` entries (GFID -> device, inode and type its handle names).
 *     Only memory; tells a lookup by name that the handle of the file it
 *     found was already checked (bfs__px_cache_knows), and a resolution
 *     that a GFID is a directory, whose handle it may walk at once without
 *     first probing what kind of handle it is (bfs__px_cache_is_dir).
 *   - at most `fdcap` of them also hold an O_PATH fd (the most recently
 *     used ones). An fd pins the inode in the kernel's cache (drop_caches
 *     cannot evict it) and counts against RLIMIT_NOFILE, hence the smaller
 *     bound; the soft limit is raised to the hard one at start.
 * Only files, symlinks and special files get an fd: their handle is a hard
 * link, the very inode the fd holds, so a cached fd names exactly what the
 * handle would. A directory's handle is a path (parent GFID and name) that
 * is walked from the brick root without following symlinks; an fd would
 * keep naming the directory after it was moved behind our back, even out of
 * the brick, so directories get no fd. They get the path their last walk
 * took instead (at most PX_DPATH_MAX - 1 bytes, malloc'd: with every entry
 * a directory, cap x that in the worst case, a few hundred KB for the
 * usual tens of folders) and the parent its handle named. The next
 * resolution checks that the handle still names that parent and the
 * path's last name, opens the path in one openat2 beneath the brick root
 * without following symlinks or leaving the file system, and checks the
 * GFID of what it found: a stale path (a rename) fails one of those, and
 * the full walk runs and notes the new one (posix-handle.c, walk_dir;
 * performance note 35).
 *
 * Correctness rules:
 *   - an entry is made only for an object whose handle is known good (just
 *     resolved through it, just created with it, just checked or healed by
 *     a lookup), and removed when this translator drops the handle
 *     (bfs__px_handle_drop: a file's last name, a removed directory);
 *   - an fd is used only while its file still has a name and a handle
 *     (st_nlink > 1). Otherwise (changed behind our back, or a race with an
 *     unlink) the entry is dropped and the caller takes the handle path, so
 *     the answer is the one the handle store gives (ESTALE for a gone file);
 *   - a lookup skips its handle check only when the link count still counts
 *     a handle (st_nlink > 1), so a handle deleted behind brickfs's back
 *     from a file with one name is repaired by the next lookup, as without
 *     the cache. Other changes behind our back (a handle replaced by another
 *     file's) are seen once the entry ages out.
 *
 * Objects and lives: struct px_cache hangs off px_priv from init to fini;
 * a struct pc_ent lives from its first note until evicted (least recently
 * used first), dropped or fini, and owns its fd (-1 when it holds none).
 * Every operation takes the cache mutex for a hash lookup and list moves;
 * fds are closed after the mutex is released (the last close of an
 * unlinked file frees its blocks). Callers get a dup(), never the cached fd.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "posix.h"

struct pc_list {
    struct pc_ent *prev, *next;
};

struct pc_ent {
    struct bfs_gfid gfid;
    dev_t dev;
    ino_t ino;
    bool dir;
    char *path;                   /* directories: the path of the last walk, owned; or NULL */
    struct bfs_gfid parent;       /* ... and the parent its handle named then */
    int fd;                       /* O_PATH, owned; -1: none */
    struct pc_ent *hnext;         /* hash chain */
    struct pc_list all;           /* every entry, most recent first */
    struct pc_list fds;           /* entries holding an fd, most recent first */
};

struct px_cache {
    pthread_mutex_t lock;
    size_t n, cap;
    size_t nfd, fdcap;
    size_t mask;                  /* buckets - 1 */
    struct pc_ent **buckets;
    struct pc_ent head;           /* list heads (all, fds) */
    uint64_t hits, misses;        /* fd lookups (under lock) */
};

static size_t pc_hash(const struct px_cache *c, const struct bfs_gfid *g)
{
    uint64_t h;
    memcpy(&h, g->b + 8, sizeof(h)); /* random bits of a v4 UUID */
    return (size_t)(h ^ (h >> 29)) & c->mask;
}

static struct pc_ent **pc_slot(struct px_cache *c, const struct bfs_gfid *g)
{
    struct pc_ent **pp = &c->buckets[pc_hash(c, g)];
    while (*pp && !bfs_gfid_eq(&(*pp)->gfid, g))
        pp = &(*pp)->hnext;
    return pp;
}

/* The two lists are threaded through the same entries; `off` picks one. */
static struct pc_list *pc_link(struct pc_ent *e, size_t off)
{
    return (struct pc_list *)(void *)((char *)e + off);
}

static void list_unlink(struct pc_ent *e, size_t off)
{
    struct pc_list *l = pc_link(e, off);
    pc_link(l->prev, off)->next = l->next;
    pc_link(l->next, off)->prev = l->prev;
}

static void list_push(struct px_cache *c, struct pc_ent *e, size_t off)
{
    struct pc_list *l = pc_link(e, off), *h = pc_link(&c->head, off);
    l->next = h->next;
    l->prev = &c->head;
    pc_link(h->next, off)->prev = e;
    h->next = e;
}

#define OFF_ALL offsetof(struct pc_ent, all)
#define OFF_FDS offsetof(struct pc_ent, fds)

static void pc_touch(struct px_cache *c, struct pc_ent *e)
{
    list_unlink(e, OFF_ALL);
    list_push(c, e, OFF_ALL);
    if (e->fd >= 0) {
        list_unlink(e, OFF_FDS);
        list_push(c, e, OFF_FDS);
    }
}

/* Takes e's fd away (returned, for the caller to close after unlocking). */
static int pc_take_fd(struct px_cache *c, struct pc_ent *e)
{
    int fd = e->fd;
    if (fd >= 0) {
        list_unlink(e, OFF_FDS);
        c->nfd--;
        e->fd = -1;
    }
    return fd;
}

/* Unlinks the entry at *pp; returns its fd (or -1) for the caller to close. */
static int pc_remove(struct px_cache *c, struct pc_ent **pp)
{
    struct pc_ent *e = *pp;
    int fd = pc_take_fd(c, e);
    *pp = e->hnext;
    list_unlink(e, OFF_ALL);
    c->n--;
    free(e->path);
    free(e);
    return fd;
}

/* How many fds the limit allows: half of what is left after a reserve for
 * the brick's own fds, once the soft limit is raised to the hard one. */
static size_t pc_fdcap_for_limit(size_t want)
{
    struct rlimit rl;
    if (want == 0 || getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 0;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit up = {rl.rlim_max, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl = up;
    }
    if (rl.rlim_cur == RLIM_INFINITY)
        return want;
    size_t room = rl.rlim_cur > 1024 ? (size_t)(rl.rlim_cur - 1024) / 2 : 0;
    return want < room ? want : room;
}

struct px_cache *bfs__px_cache_new(size_t cap, size_t fdcap)
{
    if (cap == 0)
        return NULL; /* disabled: every resolution and check takes the handle path */
    struct px_cache *c = calloc(1, sizeof(*c));
    size_t nb = 64;
    while (nb < cap)
        nb <<= 1;
    if (!c || !(c->buckets = calloc(nb, sizeof(*c->buckets)))) {
        free(c);
        return NULL;
    }
    c->mask = nb - 1;
    c->cap = cap;
    fdcap = pc_fdcap_for_limit(fdcap);
    c->fdcap = fdcap < cap ? fdcap : cap;
    c->head.all.next = c->head.all.prev = &c->head;
    c->head.fds.next = c->head.fds.prev = &c->head;
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

void bfs__px_cache_free(struct px_cache *c)
{
    if (!c)
        return;
    while (c->head.all.next != &c->head) {
        int fd = pc_remove(c, pc_slot(c, &c->head.all.next->gfid));
        if (fd >= 0)
            close(fd);
    }
    pthread_mutex_destroy(&c->lock);
    free(c->buckets);
    free(c);
}

/* A name and the handle (directories never hold an fd here). */
static bool pc_alive(const struct stat *st)
{
    return !S_ISDIR(st->st_mode) && st->st_nlink > 1;
}

int bfs__px_cache_get(struct px_cache *c, const struct bfs_gfid *g, struct px_obj *o)
{
    if (!c)
        return -ENOENT;
    int fd = -1;
    pthread_mutex_lock(&c->lock);
    struct pc_ent *e = *pc_slot(c, g);
    if (e && e->fd >= 0) {
        fd = fcntl(e->fd, F_DUPFD_CLOEXEC, 0);
        pc_touch(c, e);
    }
    if (fd >= 0)
        c->hits++;
    else
        c->misses++;
    pthread_mutex_unlock(&c->lock);
    if (fd < 0)
        return -ENOENT;
    if (SYS.fstat(fd, &o->st) < 0 || !pc_alive(&o->st)) {
        close(fd);
        bfs__px_cache_drop(c, g);
        return -ENOENT;
    }
    o->fd = fd;
    o->gfid = *g;
    return 0;
}

/* Records g -> st; with keep_fd, also a dup of fd (an O_PATH fd); with
 * path (a directory's), that path. */
static void pc_put(struct px_cache *c, const struct bfs_gfid *g, const struct stat *st, int fd,
                   bool keep_fd, const struct bfs_gfid *pg, const char *path)
{
    if (!c || bfs_gfid_is_null(g) || bfs_gfid_is_root(g))
        return;
    int close1 = -1, close2 = -1, dup = -1;
    char *pcopy = path && S_ISDIR(st->st_mode) && strlen(path) < PX_DPATH_MAX ? strdup(path)
                                                                               : NULL;
    if (keep_fd && fd >= 0 && c->fdcap > 0 && !S_ISDIR(st->st_mode))
        dup = fcntl(fd, F_DUPFD_CLOEXEC, 0); /* before locking: a system call */
    pthread_mutex_lock(&c->lock);
    struct pc_ent **pp = pc_slot(c, g), *e = *pp;
    if (e && (e->ino != st->st_ino || e->dev != st->st_dev)) {
        close1 = pc_remove(c, pp); /* the GFID now names another inode */
        e = NULL;
    }
    if (!e && (e = calloc(1, sizeof(*e)))) {
        e->gfid = *g;
        e->dev = st->st_dev;
        e->ino = st->st_ino;
        e->dir = S_ISDIR(st->st_mode);
        e->fd = -1;
        *pc_slot(c, g) = e; /* the end of its chain */
        list_push(c, e, OFF_ALL);
        c->n++;
    }
    if (e) {
        pc_touch(c, e);
        if (pcopy && e->dir) {
            free(e->path);
            e->path = pcopy;
            e->parent = *pg;
            pcopy = NULL;
        }
        if (dup >= 0 && e->fd < 0) {
            e->fd = dup;
            dup = -1;
            list_push(c, e, OFF_FDS);
            if (++c->nfd > c->fdcap)
                close2 = pc_take_fd(c, c->head.fds.prev);
        }
        if (c->n > c->cap) {
            int fd3 = pc_remove(c, pc_slot(c, &c->head.all.prev->gfid));
            if (fd3 >= 0) {
                if (close2 >= 0)
                    close(close2); /* rare: both bounds hit at once */
                close2 = fd3;
            }
        }
    }
    pthread_mutex_unlock(&c->lock);
    free(pcopy);
    if (close1 >= 0)
        close(close1);
    if (close2 >= 0)
        close(close2);
    if (dup >= 0)
        close(dup);
}

void bfs__px_cache_put(struct px_cache *c, const struct px_obj *o)
{
    pc_put(c, &o->gfid, &o->st, o->fd, true, NULL, NULL);
}

void bfs__px_cache_note(struct px_cache *c, const struct bfs_gfid *g, const struct stat *st)
{
    pc_put(c, g, st, -1, false, NULL, NULL);
}

void bfs__px_cache_note_dir(struct px_cache *c, const struct bfs_gfid *g, const struct stat *st,
                            const struct bfs_gfid *pg, const char *path)
{
    pc_put(c, g, st, -1, false, pg, path);
}

int bfs__px_cache_dir_path(struct px_cache *c, const struct bfs_gfid *g, char *buf, size_t len,
                           struct bfs_gfid *pg)
{
    if (!c)
        return -ENOENT;
    int rc = -ENOENT;
    pthread_mutex_lock(&c->lock);
    struct pc_ent *e = *pc_slot(c, g);
    if (e && e->dir && e->path && strlen(e->path) < len) {
        strcpy(buf, e->path);
        *pg = e->parent;
        rc = 0;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

void bfs__px_cache_drop(struct px_cache *c, const struct bfs_gfid *g)
{
    if (!c)
        return;
    int fd = -1;
    pthread_mutex_lock(&c->lock);
    struct pc_ent **pp = pc_slot(c, g);
    if (*pp)
        fd = pc_remove(c, pp);
    pthread_mutex_unlock(&c->lock);
    if (fd >= 0)
        close(fd);
}

bool bfs__px_cache_knows(struct px_cache *c, const struct bfs_gfid *g, const struct stat *st)
{
    if (!c)
        return false;
    pthread_mutex_lock(&c->lock);
    struct pc_ent *e = *pc_slot(c, g);
    bool known = e && e->ino == st->st_ino && e->dev == st->st_dev;
    if (known)
        pc_touch(c, e);
    pthread_mutex_unlock(&c->lock);
    return known;
}

bool bfs__px_cache_is_dir(struct px_cache *c, const struct bfs_gfid *g)
{
    if (!c)
        return false;
    pthread_mutex_lock(&c->lock);
    struct pc_ent *e = *pc_slot(c, g);
    bool dir = e && e->dir;
    pthread_mutex_unlock(&c->lock);
    return dir;
}

void bfs__px_cache_stats(struct px_cache *c, struct px_cache_stats *s)
{
    memset(s, 0, sizeof(*s));
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    s->entries = c->n;
    s->cap = c->cap;
    s->fds = c->nfd;
    s->fdcap = c->fdcap;
    s->hits = c->hits;
    s->misses = c->misses;
    pthread_mutex_unlock(&c->lock);
}
