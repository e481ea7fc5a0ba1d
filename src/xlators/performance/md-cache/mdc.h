/*
 * mdc.h — performance/md-cache, shared between its two files:
 *   mdc-table.c  the two tables (inode records by GFID, entries by parent
 *                GFID and name) and what changes them;
 *   md-cache.c   the fops: answers from the tables, learning from replies,
 *                invalidation by upcalls; the module.
 * docs/design/cache-invalidation.md explains the rules.
 *
 * Every table function is called with mdc_priv.lock held. Records live
 * until dropped (invalidation, unlink, a flush of everything, fini).
 */
#ifndef BFS_MDC_H
#define BFS_MDC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/xlator.h"

/* Option keys, named as `volume set` knows them (gluster's names). */
#define MDC_OPT_ON "performance.md-cache"
#define MDC_OPT_TIMEOUT "performance.md-cache-timeout"
#define MDC_OPT_SIZE "performance.md-cache-size"

struct mdc_inode {
    struct mdc_inode *next;
    struct bfs_gfid gfid;
    struct bfs_iatt attr;
    bool attr_ok;
    /* attributes dropped for their times only (an atime, a changelog
     * post-op's ctime): the names under it and its completeness still
     * hold until attr_until */
    bool names_ok;
    uint64_t tseq;          /* mdc_priv.tseq at its last times-only invalidation */
    uint64_t attr_until;    /* monotonic ns */
    uint64_t gen;           /* bumped when the attributes are dropped */
    bool complete;          /* a directory whose every name we know */
    uint64_t complete_until;
    uint32_t cuid, cgid;    /* whose request made it complete */
    /* A post-op of this client in flight on it (lib/upcall-mark.h
     * bfs_upcall_postop): its name (0: none), when it was sent, and
     * whether its attributes may still be kept when it is done: nothing
     * set, dropped or changed this record since (and no change of this
     * client was in flight when it began). */
    uint64_t post_id;
    uint64_t post_sent;
    bool post_ok;
    /* the last name it was learned under (an open's hint), or NULL */
    struct bfs_gfid npar;
    char *nname;
};

struct mdc_entry {
    struct mdc_entry *next;
    struct bfs_gfid par;
    char *name;
    struct bfs_gfid child;
    uint64_t pgen;  /* the parent's gen when learned */
    uint64_t until;
    uint32_t uid, gid;
};

struct mdc_priv {
    pthread_mutex_t lock;
    uint64_t timeout_ns; /* 0: off */
    size_t max;          /* records per table */
    struct mdc_inode **ih;
    struct mdc_entry **eh;
    size_t nbuckets, ninodes, nentries;
    /* Moves on every change sent and every invalidation received: a reply
     * is learned only if it did not move while the call was out. */
    uint64_t seq;
    /* Moves on every local times-only invalidation (this client's own
     * post-op, lib/upcall-mark.h), which leaves seq alone: the inode it
     * names keeps the value (mdc_inode.tseq), and a reply wound before
     * that teaches nothing of that inode's attributes (and only of it). */
    uint64_t tseq;
    uint64_t changing; /* changes of this client in flight */
    /* counters for the dump and the tests */
    uint64_t hits, neg_hits, misses, invalidations, flushes;
    uint64_t restored; /* reads answered from an open's prefetch: attributes kept */
    uint64_t postop_kept; /* post-ops whose attributes were kept */
};

int bfs__mdc_table_init(struct mdc_priv *p);
void bfs__mdc_table_fini(struct mdc_priv *p);
void bfs__mdc_flush(struct mdc_priv *p); /* forget everything */

struct mdc_inode *bfs__mdc_inode_get(struct mdc_priv *p, const struct bfs_gfid *g);
/* Found or made (NULL: no memory, or g is null). */
struct mdc_inode *bfs__mdc_inode_make(struct mdc_priv *p, const struct bfs_gfid *g);
/* Attributes usable at now. */
bool bfs__mdc_attr_valid(const struct mdc_inode *in, uint64_t now);
/* The names under it (entries, completeness) usable at now: its attributes
 * are valid, or were dropped by bfs__mdc_attr_stale only. */
bool bfs__mdc_names_valid(const struct mdc_inode *in, uint64_t now);
void bfs__mdc_attr_set(struct mdc_priv *p, const struct bfs_iatt *a, uint64_t until);
void bfs__mdc_attr_drop(struct mdc_priv *p, const struct bfs_gfid *g);
/* Only the attributes (an atime or a ctime moved): names under it and
 * completeness stay. */
void bfs__mdc_attr_stale(struct mdc_priv *p, const struct bfs_gfid *g);

struct mdc_entry *bfs__mdc_entry_get(struct mdc_priv *p, const struct bfs_gfid *par,
                                     const char *name);
void bfs__mdc_entry_set(struct mdc_priv *p, const struct bfs_gfid *par, const char *name,
                        const struct bfs_gfid *child, uint64_t until, uint32_t uid,
                        uint32_t gid);
void bfs__mdc_entry_drop(struct mdc_priv *p, const struct bfs_gfid *par, const char *name);
void bfs__mdc_complete_drop(struct mdc_priv *p, const struct bfs_gfid *dir);
/* A change of this client to g (or to a name in g) starts: a post-op of
 * g in flight now may have reached the bricks before it, or after. */
void bfs__mdc_post_void(struct mdc_priv *p, const struct bfs_gfid *g);

#endif
