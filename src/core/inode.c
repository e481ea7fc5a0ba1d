/*
 * inode.c — the inode table and fds of a graph (inode.h).
 *
 * Inodes. A table is a chained hash of inodes keyed by GFID, guarded by one
 * table mutex that also guards every inode's refs, nlookup, type and hash
 * link: "find" and "the last unref removes it" must be atomic with respect
 * to each other, or a lookup could resurrect an inode being destroyed.
 * An inode stays in the table while refs > 0 or nlookup > 0 (FUSE's count of
 * kernel references). When both reach 0 it is unlinked under the lock, then,
 * with no lock held, every translator of the graph that set context on it
 * gets forget(), and it is freed. The root inode (GFID ...01) is created
 * with the table and only dies with it; bfs_itable_free() forgets every
 * inode, referenced or not.
 *
 * Context slots: one uint64_t per translator (xl->index), guarded by the
 * inode's own mutex. Whether a slot is set is a bit in a bitmap stored
 * right after the values, in the same allocation (ctx[nslots + i / 64]),
 * because 0 is a perfectly good context value.
 *
 * Fds: refcounted under fd->lock. The last unref calls release (or
 * releasedir) on every translator of fd->graph whose slot is set, without
 * locks, then drops the fd's inode reference and frees.
 *
 * No callback into a translator ever runs with a lock of this file held.
 */
#include "core/inode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/graph.h"
#include "core/xlator.h"

#define ITABLE_MIN_BUCKETS 1024

struct bfs_itable {
    struct bfs_graph *graph;
    int nslots;
    pthread_mutex_t lock;
    struct bfs_inode **buckets;
    size_t nbuckets; /* power of two */
    size_t count;
    struct bfs_inode *root;
};

/* GFIDs are random, so any 8 bytes hash well; fold all 16 for odd ones. */
static size_t gfid_hash(const struct bfs_gfid *g)
{
    uint64_t a, b;
    memcpy(&a, g->b, 8);
    memcpy(&b, g->b + 8, 8);
    uint64_t h = (a ^ (b * 0x9e3779b97f4a7c15ull));
    return (size_t)(h ^ (h >> 29));
}

static size_t ctx_words(int nslots)
{
    return (size_t)nslots + ((size_t)nslots + 63) / 64;
}

/* ---- table internals (t->lock held: the __ prefix) ---- */

static struct bfs_inode *__find(struct bfs_itable *t, const struct bfs_gfid *g)
{
    struct bfs_inode *i = t->buckets[gfid_hash(g) & (t->nbuckets - 1)];
    for (; i; i = i->hnext)
        if (bfs_gfid_eq(&i->gfid, g))
            return i;
    return NULL;
}

static void __link(struct bfs_itable *t, struct bfs_inode *i)
{
    size_t b = gfid_hash(&i->gfid) & (t->nbuckets - 1);
    i->hnext = t->buckets[b];
    t->buckets[b] = i;
    i->linked = 1;
    t->count++;
}

static void __unlink(struct bfs_itable *t, struct bfs_inode *i)
{
    struct bfs_inode **pp = &t->buckets[gfid_hash(&i->gfid) & (t->nbuckets - 1)];
    while (*pp != i)
        pp = &(*pp)->hnext;
    *pp = i->hnext;
    i->hnext = NULL;
    i->linked = 0;
    t->count--;
}

/* Doubles the bucket array when the table gets crowded; on ENOMEM chains
 * just get longer. */
static void __maybe_grow(struct bfs_itable *t)
{
    if (t->count < t->nbuckets)
        return;
    size_t n = t->nbuckets * 2;
    struct bfs_inode **nb = calloc(n, sizeof(*nb));
    if (!nb)
        return;
    for (size_t b = 0; b < t->nbuckets; b++) {
        struct bfs_inode *i = t->buckets[b], *next;
        for (; i; i = next) {
            next = i->hnext;
            size_t nbk = gfid_hash(&i->gfid) & (n - 1);
            i->hnext = nb[nbk];
            nb[nbk] = i;
        }
    }
    free(t->buckets);
    t->buckets = nb;
    t->nbuckets = n;
}

static struct bfs_inode *inode_alloc(struct bfs_itable *t, const struct bfs_gfid *g,
                                     uint32_t type)
{
    struct bfs_inode *i = calloc(1, sizeof(*i));
    if (!i)
        return NULL;
    if (t->nslots > 0) {
        i->ctx = calloc(ctx_words(t->nslots), sizeof(uint64_t));
        if (!i->ctx) {
            free(i);
            return NULL;
        }
    }
    i->gfid = *g;
    i->type = type;
    i->table = t;
    pthread_mutex_init(&i->lock, NULL);
    return i;
}

/* i is unreachable (unlinked, or the table is going away): forget, free. */
static void inode_destroy(struct bfs_inode *i)
{
    struct bfs_itable *t = i->table;
    struct bfs_graph *g = t->graph;

    for (int k = 0; g && k < g->nxls; k++) {
        struct bfs_xl *xl = g->xls[k];
        if (!xl || xl->index < 0 || xl->index >= t->nslots)
            continue;
        uint64_t bit = 1ull << (xl->index % 64);
        if (!(i->ctx[t->nslots + xl->index / 64] & bit))
            continue;
        if (xl->mod && xl->mod->forget)
            xl->mod->forget(xl, i);
    }
    pthread_mutex_destroy(&i->lock);
    free(i->ctx);
    free(i);
}

/* ---- table ---- */

struct bfs_itable *bfs_itable_new(struct bfs_graph *graph, int nslots)
{
    struct bfs_itable *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->graph = graph;
    /* 0 slots with a graph can only be an oversight: give each xl one. */
    t->nslots = nslots > 0 ? nslots : (graph ? graph->nxls : 0);
    t->nbuckets = ITABLE_MIN_BUCKETS;
    t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
    t->root = t->buckets ? inode_alloc(t, &bfs_gfid_root, S_IFDIR) : NULL;
    if (!t->root) {
        free(t->buckets);
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    __link(t, t->root);
    return t;
}

void bfs_itable_free(struct bfs_itable *t)
{
    if (!t)
        return;
    struct bfs_inode *all = NULL;
    pthread_mutex_lock(&t->lock);
    for (size_t b = 0; b < t->nbuckets; b++) {
        struct bfs_inode *i = t->buckets[b], *next;
        for (; i; i = next) {
            next = i->hnext;
            i->hnext = all;
            all = i;
            i->linked = 0;
        }
        t->buckets[b] = NULL;
    }
    t->count = 0;
    pthread_mutex_unlock(&t->lock);

    while (all) {
        struct bfs_inode *next = all->hnext;
        inode_destroy(all);
        all = next;
    }
    pthread_mutex_destroy(&t->lock);
    free(t->buckets);
    free(t);
}

struct bfs_inode *bfs_itable_root(struct bfs_itable *t)
{
    return bfs_inode_ref(t->root);
}

struct bfs_inode *bfs_inode_find(struct bfs_itable *t, const struct bfs_gfid *g)
{
    pthread_mutex_lock(&t->lock);
    struct bfs_inode *i = __find(t, g);
    if (i)
        i->refs++;
    pthread_mutex_unlock(&t->lock);
    return i;
}

struct bfs_inode *bfs_inode_get(struct bfs_itable *t, const struct bfs_gfid *g, uint32_t type)
{
    if (bfs_gfid_is_null(g)) {
        errno = EINVAL;
        return NULL;
    }
    pthread_mutex_lock(&t->lock);
    struct bfs_inode *i = __find(t, g);
    if (!i) {
        /* Allocating under the lock keeps get atomic; it is a small calloc. */
        i = inode_alloc(t, g, type & S_IFMT);
        if (!i) {
            pthread_mutex_unlock(&t->lock);
            errno = ENOMEM;
            return NULL;
        }
        __link(t, i);
        __maybe_grow(t);
    } else if (i->type == 0) {
        i->type = type & S_IFMT;
    }
    i->refs++;
    pthread_mutex_unlock(&t->lock);
    return i;
}

/* t->lock held. Unlinks i if nothing holds it any more; returns whether the
 * caller must now destroy it (outside the lock). */
static int __release_if_unused(struct bfs_itable *t, struct bfs_inode *i)
{
    if (i->refs || i->nlookup || i == t->root || !i->linked)
        return 0;
    __unlink(t, i);
    return 1;
}

struct bfs_inode *bfs_inode_ref(struct bfs_inode *i)
{
    if (!i)
        return NULL;
    pthread_mutex_lock(&i->table->lock);
    i->refs++;
    pthread_mutex_unlock(&i->table->lock);
    return i;
}

void bfs_inode_unref(struct bfs_inode *i)
{
    if (!i)
        return;
    struct bfs_itable *t = i->table;
    pthread_mutex_lock(&t->lock);
    if (i->refs > 0)
        i->refs--;
    int dead = __release_if_unused(t, i);
    pthread_mutex_unlock(&t->lock);
    if (dead)
        inode_destroy(i);
}

void bfs_inode_lookup(struct bfs_inode *i)
{
    pthread_mutex_lock(&i->table->lock);
    i->nlookup++;
    pthread_mutex_unlock(&i->table->lock);
}

void bfs_inode_forget(struct bfs_inode *i, uint64_t n)
{
    struct bfs_itable *t = i->table;
    pthread_mutex_lock(&t->lock);
    i->nlookup = n >= i->nlookup ? 0 : i->nlookup - n;
    int dead = __release_if_unused(t, i);
    pthread_mutex_unlock(&t->lock);
    if (dead)
        inode_destroy(i);
}

/* ---- inode context ---- */

static int inode_slot(const struct bfs_inode *i, const struct bfs_xl *xl)
{
    if (!i || !xl || xl->index < 0 || xl->index >= i->table->nslots)
        return -EINVAL;
    return xl->index;
}

int bfs_inode_ctx_get(struct bfs_inode *i, const struct bfs_xl *xl, uint64_t *val)
{
    int s = inode_slot(i, xl);
    if (s < 0)
        return s;
    int n = i->table->nslots, rc = -ENOENT;
    pthread_mutex_lock(&i->lock);
    if (i->ctx[n + s / 64] & (1ull << (s % 64))) {
        if (val)
            *val = i->ctx[s];
        rc = 0;
    }
    pthread_mutex_unlock(&i->lock);
    return rc;
}

int bfs_inode_ctx_set(struct bfs_inode *i, const struct bfs_xl *xl, uint64_t val)
{
    int s = inode_slot(i, xl);
    if (s < 0)
        return s;
    int n = i->table->nslots;
    pthread_mutex_lock(&i->lock);
    i->ctx[s] = val;
    i->ctx[n + s / 64] |= 1ull << (s % 64);
    pthread_mutex_unlock(&i->lock);
    return 0;
}

int bfs_inode_ctx_del(struct bfs_inode *i, const struct bfs_xl *xl, uint64_t *old)
{
    int s = inode_slot(i, xl);
    if (s < 0)
        return s;
    int n = i->table->nslots, rc = -ENOENT;
    pthread_mutex_lock(&i->lock);
    if (i->ctx[n + s / 64] & (1ull << (s % 64))) {
        if (old)
            *old = i->ctx[s];
        i->ctx[s] = 0;
        i->ctx[n + s / 64] &= ~(1ull << (s % 64));
        rc = 0;
    }
    pthread_mutex_unlock(&i->lock);
    return rc;
}

/* ---- fds ---- */

/* Enough slots for every translator of the graph (indexes are normally
 * 0..nxls-1, but nothing here relies on that) and of the inode's table. */
static int fd_nslots(struct bfs_graph *graph, struct bfs_inode *inode)
{
    int n = inode ? inode->table->nslots : 0;
    for (int k = 0; graph && k < graph->nxls; k++)
        if (graph->xls[k] && graph->xls[k]->index >= n)
            n = graph->xls[k]->index + 1;
    return n;
}

struct bfs_fd *bfs_fd_new(struct bfs_graph *graph, struct bfs_inode *inode, int32_t flags,
                          int is_dir)
{
    struct bfs_fd *fd = calloc(1, sizeof(*fd));
    if (!fd)
        return NULL;
    fd->nslots = fd_nslots(graph, inode);
    if (fd->nslots > 0) {
        fd->ctx = calloc((size_t)fd->nslots, sizeof(*fd->ctx));
        fd->ctx_set = calloc((size_t)fd->nslots, sizeof(*fd->ctx_set));
        if (!fd->ctx || !fd->ctx_set) {
            free(fd->ctx);
            free(fd->ctx_set);
            free(fd);
            return NULL;
        }
    }
    fd->inode = bfs_inode_ref(inode);
    fd->flags = flags;
    fd->is_dir = is_dir;
    fd->graph = graph;
    fd->refs = 1;
    pthread_mutex_init(&fd->lock, NULL);
    return fd;
}

struct bfs_fd *bfs_fd_ref(struct bfs_fd *fd)
{
    if (!fd)
        return NULL;
    pthread_mutex_lock(&fd->lock);
    fd->refs++;
    pthread_mutex_unlock(&fd->lock);
    return fd;
}

/* Last reference gone: nobody else can reach fd, so no lock is needed. */
static void fd_destroy(struct bfs_fd *fd)
{
    struct bfs_graph *g = fd->graph;

    for (int k = 0; g && k < g->nxls; k++) {
        struct bfs_xl *xl = g->xls[k];
        if (!xl || xl->index < 0 || xl->index >= fd->nslots || !fd->ctx_set[xl->index])
            continue;
        void (*rel)(struct bfs_xl *, struct bfs_fd *) = NULL;
        if (xl->mod)
            rel = fd->is_dir ? xl->mod->releasedir : xl->mod->release;
        if (rel)
            rel(xl, fd);
    }
    bfs_inode_unref(fd->inode);
    pthread_mutex_destroy(&fd->lock);
    free(fd->ctx);
    free(fd->ctx_set);
    free(fd);
}

void bfs_fd_unref(struct bfs_fd *fd)
{
    if (!fd)
        return;
    pthread_mutex_lock(&fd->lock);
    uint64_t left = fd->refs > 0 ? --fd->refs : 0;
    pthread_mutex_unlock(&fd->lock);
    if (left == 0)
        fd_destroy(fd);
}

static int fd_slot(const struct bfs_fd *fd, const struct bfs_xl *xl)
{
    if (!fd || !xl || xl->index < 0 || xl->index >= fd->nslots)
        return -EINVAL;
    return xl->index;
}

int bfs_fd_ctx_get(struct bfs_fd *fd, const struct bfs_xl *xl, uint64_t *val)
{
    int s = fd_slot(fd, xl), rc = -ENOENT;
    if (s < 0)
        return s;
    pthread_mutex_lock(&fd->lock);
    if (fd->ctx_set[s]) {
        if (val)
            *val = fd->ctx[s];
        rc = 0;
    }
    pthread_mutex_unlock(&fd->lock);
    return rc;
}

int bfs_fd_ctx_set(struct bfs_fd *fd, const struct bfs_xl *xl, uint64_t val)
{
    int s = fd_slot(fd, xl);
    if (s < 0)
        return s;
    pthread_mutex_lock(&fd->lock);
    fd->ctx[s] = val;
    fd->ctx_set[s] = 1;
    pthread_mutex_unlock(&fd->lock);
    return 0;
}

int bfs_fd_ctx_del(struct bfs_fd *fd, const struct bfs_xl *xl, uint64_t *old)
{
    int s = fd_slot(fd, xl), rc = -ENOENT;
    if (s < 0)
        return s;
    pthread_mutex_lock(&fd->lock);
    if (fd->ctx_set[s]) {
        if (old)
            *old = fd->ctx[s];
        fd->ctx[s] = 0;
        fd->ctx_set[s] = 0;
        rc = 0;
    }
    pthread_mutex_unlock(&fd->lock);
    return rc;
}
