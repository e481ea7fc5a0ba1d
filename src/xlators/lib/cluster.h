/*
 * cluster.h — what the shared cluster code (lk.c, txn.c, quorum.c) knows
 * about the translator it works for: its children, which of them are up,
 * its quorum rule, its lock domains and the changelog it keeps on bricks.
 *
 * One struct bfs_cluster per translator instance, embedded in its private
 * data, filled at init and changed by reconfigure (the fields marked
 * "atomic" are read without locks). Children are named by their index in
 * xl->children; sets of children are bitmasks (bit i = child i).
 */
#ifndef BFS_XL_LIB_CLUSTER_H
#define BFS_XL_LIB_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/xlator.h"
#include "quorum.h"

#define BFS_CLUSTER_MAX 16 /* children; masks are uint32_t */
#define BFS_BIT(i) (1u << (i))

static inline int bfs_mask_count(uint32_t m)
{
    return __builtin_popcount(m);
}

static inline bool bfs_mask_has(uint32_t m, int i)
{
    return (m >> i) & 1u;
}

/* Lowest child of m, or -1. */
static inline int bfs_mask_first(uint32_t m)
{
    return m ? __builtin_ctz(m) : -1;
}

/* Transaction types: which counter a change moves and which lock it takes. */
enum { BFS_TXN_DATA = 0, BFS_TXN_METADATA = 1, BFS_TXN_ENTRY = 2, BFS_TXN_NTYPES = 3 };

struct bfs_dict;
struct bfs_txn_lock;

/*
 * The changelog a translator keeps on bricks, as txn.c uses it. replicate:
 * the pending matrix (replicate-changelog.c); disperse will have its own.
 */
struct bfs_changelog_ops {
    /* The xattrs of one xattrop on child i for a change of `type`: dirty
     * marker moved by `dirty`, +`by` blame on every child of `blame`; with
     * read_row, +0 on every other key so that the reply carries the whole
     * row. NULL on ENOMEM. */
    struct bfs_dict *(*build)(void *arg, int type, int i, int64_t dirty, uint32_t blame,
                              int64_t by, bool read_row);
    /* After the pre-op of a data or metadata change of the lock lk: rows[i]
     * is what child i answered (NULL if it is not in `set`). 0 lets the
     * change go on with the children of *good (set on entry; the hook may
     * narrow it: the others are blamed and left out, as if they had missed
     * the pre-op), -errno refuses it (the pre-op is undone). NULL hook:
     * always 0 with every child of set. */
    int (*check)(void *arg, struct bfs_txn_lock *lk, int type, uint32_t set,
                 struct bfs_dict *const *rows, uint32_t *good);
    /* Optional: for the types of unacked_types (bit per BFS_TXN_*), a
     * change that did not reach a quorum (answered EROFS, never
     * acknowledged) yet was made on some children: the xattrs of one
     * xattrop on each such child i that mark its copy as holding that
     * change, so that it is never taken over a copy without it
     * (replicate: pending[i][i]); the children that failed it are not
     * blamed (they may hold the right copy). NULL on ENOMEM. Without the
     * hook, or for other types, the children that failed are blamed as
     * after a change that had its quorum. */
    uint32_t unacked_types;
    struct bfs_dict *(*build_unacked)(void *arg, int type, int i);
    /* Optional: what a lookup of a post-op's object answers once the
     * post-op (of a change of `type`) is in on every child: attrs[i] and
     * rows[i] are child i's attributes and changelog after it (with the
     * hook, the post-op reads the whole row, as a pre-op does, and asks
     * the bricks for the attributes). *out is assembled as the
     * translator's lookup assembles its answer; -errno when it cannot
     * vouch for it (the copies disagree, a heal is due): md-cache then
     * drops the attributes instead of keeping them (cache-invalidation.md,
     * "Messages"). */
    int (*postop_attr)(void *arg, int type, const struct bfs_iatt *attrs,
                       struct bfs_dict *const *rows, struct bfs_iatt *out);
};

struct bfs_loop;

struct bfs_cluster {
    struct bfs_xl *xl;
    int n;                                 /* xl->nchildren */
    uint32_t up;                           /* atomic: children up */
    int qtype;                             /* atomic: enum bfs_quorum_type */
    int qcount;                            /* atomic: for fixed */
    bool eager;                            /* atomic: keep data locks between writes */
    uint64_t delay_ms;                     /* atomic: delayed post-op */
    const char *domain[BFS_TXN_NTYPES];    /* lock domain per type (owned) */
    const struct bfs_changelog_ops *cl;
    void *cl_arg;
    struct bfs_loop *loop;                 /* xl->graph->proc->loop, may be NULL */
    /* Piggybacked changelog steps (txn-piggy.c): preop_in_fop lets entry
     * transactions carry their pre-op in the fop (set by the translator);
     * piggy (atomic) holds the children whose brick acknowledged a
     * piggybacked unlock since they last came up (the translator clears a
     * child's bit when it goes down). */
    bool preop_in_fop;
    uint32_t piggy;
    /* txn.c bookkeeping, under timers_lock (bfs_cluster_init_timers()):
     * delayed post-op callbacks running (forget and fini wait for them),
     * ops in flight (transactions and releases: PARENT_DOWN waits for
     * them) and the shared locks held (released at PARENT_DOWN). */
    pthread_mutex_t timers_lock;
    pthread_cond_t timers_cond;
    int timers_running;
    int live;
    struct bfs_txn_lock *held;
};

static inline void bfs_cluster_init_timers(struct bfs_cluster *c)
{
    pthread_mutex_init(&c->timers_lock, NULL);
    pthread_cond_init(&c->timers_cond, NULL);
    c->timers_running = 0;
    c->live = 0;
    c->held = NULL;
}

static inline uint32_t bfs_cluster_up(const struct bfs_cluster *c)
{
    return __atomic_load_n(&c->up, __ATOMIC_ACQUIRE);
}

static inline bool bfs_cluster_quorum(const struct bfs_cluster *c, uint32_t mask)
{
    return bfs_quorum_met(__atomic_load_n(&c->qtype, __ATOMIC_RELAXED),
                          __atomic_load_n(&c->qcount, __ATOMIC_RELAXED), c->n, mask);
}

#endif
