/*
 * inode.h — the inode and fd tables of a graph (client side, and the
 * server side of a brick).
 *
 * An inode is keyed by GFID. It is refcounted (bfs_inode_ref/unref) and
 * additionally carries an nlookup count for FUSE (how many lookups the
 * kernel holds); it stays in the table while either is non-zero, then
 * forget is called on every translator with context and it is freed.
 * Each translator has one 64-bit context slot per inode and per fd,
 * indexed by xl->index.
 *
 * An fd is an open file or directory: refcounted; when the last ref goes,
 * release (files) or releasedir (directories) runs on each translator that
 * set context on it.
 */
#ifndef BFS_CORE_INODE_H
#define BFS_CORE_INODE_H

#include <pthread.h>
#include <stdint.h>

#include "core/types.h"

struct bfs_graph;
struct bfs_xl;
struct bfs_itable;

struct bfs_inode {
    struct bfs_gfid gfid;
    uint32_t type;     /* S_IFMT bits once known, 0 before */
    struct bfs_itable *table;
    /* private to inode.c */
    pthread_mutex_t lock;
    uint64_t refs;
    uint64_t nlookup;
    uint64_t *ctx;     /* [table->nslots] */
    struct bfs_inode *hnext;
    int linked;
};

struct bfs_itable *bfs_itable_new(struct bfs_graph *graph, int nslots);
void bfs_itable_free(struct bfs_itable *t); /* forgets every inode */
struct bfs_inode *bfs_itable_root(struct bfs_itable *t); /* ref'd */

/* Finds a linked inode by GFID; ref'd or NULL. */
struct bfs_inode *bfs_inode_find(struct bfs_itable *t, const struct bfs_gfid *g);
/* Finds or creates (and links) the inode for g; ref'd. NULL on ENOMEM. */
struct bfs_inode *bfs_inode_get(struct bfs_itable *t, const struct bfs_gfid *g, uint32_t type);
struct bfs_inode *bfs_inode_ref(struct bfs_inode *i);
void bfs_inode_unref(struct bfs_inode *i);
void bfs_inode_lookup(struct bfs_inode *i);              /* nlookup++ */
void bfs_inode_forget(struct bfs_inode *i, uint64_t n);  /* nlookup -= n */

int bfs_inode_ctx_get(struct bfs_inode *i, const struct bfs_xl *xl, uint64_t *val); /* -ENOENT */
int bfs_inode_ctx_set(struct bfs_inode *i, const struct bfs_xl *xl, uint64_t val);
int bfs_inode_ctx_del(struct bfs_inode *i, const struct bfs_xl *xl, uint64_t *old);

struct bfs_fd {
    struct bfs_inode *inode; /* ref'd; may be NULL for anonymous fds */
    int32_t flags;           /* open flags */
    int is_dir;
    struct bfs_graph *graph; /* whose translators get release() */
    /* private to inode.c */
    pthread_mutex_t lock;
    uint64_t refs;
    int nslots;
    uint64_t *ctx;
    uint8_t *ctx_set;
};

struct bfs_fd *bfs_fd_new(struct bfs_graph *graph, struct bfs_inode *inode, int32_t flags,
                          int is_dir);
struct bfs_fd *bfs_fd_ref(struct bfs_fd *fd);
void bfs_fd_unref(struct bfs_fd *fd);
int bfs_fd_ctx_get(struct bfs_fd *fd, const struct bfs_xl *xl, uint64_t *val); /* -ENOENT */
int bfs_fd_ctx_set(struct bfs_fd *fd, const struct bfs_xl *xl, uint64_t val);
int bfs_fd_ctx_del(struct bfs_fd *fd, const struct bfs_xl *xl, uint64_t *old);

#endif
