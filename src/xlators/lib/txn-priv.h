/*
 * txn-priv.h — what the two halves of the transaction code share
 * (txn-lock.c: lock objects, delayed post-op, the release op, the changelog
 * and lock stages; txn.c: admission and the transaction state machine).
 * Not for translators: they use txn.h. A "locked" comment means the caller
 * holds lk->m.
 */
#ifndef BFS_XL_LIB_TXN_PRIV_H
#define BFS_XL_LIB_TXN_PRIV_H

#include "txn.h"

struct bfs_txn_timer {
    struct bfs_txn_lock *lk;
    struct bfs_timer *h;
    bool cancelled; /* cl->timers_lock */
};

struct bfs_txn_after {
    bfs_task_fn fn;
    void *arg;
    struct bfs_txn_after *next;
};

/* Every child of the cluster. */
uint32_t bfs__txn_all(const struct bfs_cluster *cl);
/* Transactions and releases in flight (for bfs_txn_quiesce). */
void bfs__txn_live_add(struct bfs_cluster *cl, int d);
/* Admits each waiting transaction again, from the event loop. */
void bfs__txn_post_list(struct bfs_cluster *cl, struct bfs_txn *list);
/* Runs and frees the after-release callbacks, from the event loop. */
void bfs__txn_post_after(struct bfs_cluster *cl, struct bfs_txn_after *a);
/* The shared locks not FREE, each with a reference on its inode (which
 * keeps the lock object alive: unref each when done), in a malloc'd array
 * (free it); *n of them. On ENOMEM, those gathered so far. */
struct bfs__txn_held {
    struct bfs_txn_lock *lk;
    struct bfs_inode *inode;
};
struct bfs__txn_held *bfs__txn_held_refs(struct bfs_cluster *cl, size_t *n);
/* Decides where t starts: acquire, join, or wait (queued, not run). txn.c */
void bfs__txn_admit(struct bfs_txn *t);

/* locked: takes the holder identity for t's target; 0 or -ENOMEM. */
int bfs__txn_holder_setup(struct bfs_txn_lock *lk, const struct bfs_txn *t);
/* locked: moves the holder identity out (to free once no call uses it),
 * makes lk FREE, hands over the waiting list and after callbacks. */
void bfs__txn_holder_drop(struct bfs_txn_lock *lk, struct bfs_stack **stack,
                          struct bfs_frame **top, struct bfs_fd **fd, struct bfs_inode **inode,
                          struct bfs_txn **waiting, struct bfs_txn_after **after);
/* locked: arms the delayed post-op (false if no timer could be armed) /
 * cancels it (a callback already firing finds it gone and does nothing). */
bool bfs__txn_timer_arm(struct bfs_txn_lock *lk, uint64_t ms);
void bfs__txn_timer_disarm(struct bfs_txn_lock *lk);
/* lk is RELEASING: post-op and unlock on an op of its own. */
void bfs__txn_start_release(struct bfs_txn_lock *lk);

/* Stages, from an op step (op->frame: the lock's top frame; slots
 * obj * n + child). One xattrop per (child of mask, object): dirty moved
 * by `dirty`, +`by` on the children of `blame`, whole row with read_row. */
void bfs__txn_wind_changelog(struct bfs_txn_lock *lk, struct bfs_op *op, uint32_t mask,
                             int64_t dirty, uint32_t blame, int64_t by, bool read_row);
/* Does the cluster mark the copies that took a change without quorum
 * (struct bfs_changelog_ops.build_unacked) for lk's type? */
bool bfs__txn_marks_unacked(const struct bfs_txn_lock *lk);
/* A stage of one xattrop per (child of mask, object) marking that child's
 * copy as holding a change that was not acknowledged. */
void bfs__txn_wind_unacked(struct bfs_txn_lock *lk, struct bfs_op *op, uint32_t mask);
/* The same with xdata (may be NULL) on every call. */
void bfs__txn_wind_changelog_x(struct bfs_txn_lock *lk, struct bfs_op *op, uint32_t mask,
                               int64_t dirty, uint32_t blame, int64_t by, bool read_row,
                               struct bfs_dict *xdata);

/* txn-piggy.c: changelog steps that ride in other calls (txn-wire.h).
 * Post-op (dirty -= 1) on mask, asking each brick to release the lock
 * after it when the lock allows it (one lock set, on the object itself). */
void bfs__txn_wind_postop(struct bfs_txn_lock *lk, struct bfs_op *op, uint32_t mask);
/* After that post-op: children whose brick released the lock leave the
 * lock set's locked mask (and are remembered as able to piggyback). */
void bfs__txn_postop_unlocked(struct bfs_txn_lock *lk, const struct bfs_op *op);
/* After that post-op: the objects it reached on some brick changed (their
 * ctime moved after every answer of the window): md-cache above is told
 * (lib/upcall-mark.h), with the first object's attributes after it when
 * the cluster vouches for them (struct bfs_changelog_ops.postop_attr). */
void bfs__txn_postop_announce(struct bfs_txn_lock *lk, const struct bfs_op *op);
/* Right after locking: true when t's pre-op goes in its fop (t->piggy set,
 * lk->set = locked, lk->dirtied filled in after the fop). */
bool bfs__txn_piggy_preop(struct bfs_txn *t, uint32_t locked);

/* The changelog row child i answered to the stage in op (first object:
 * slot i), NULL if it failed or said none. txn.c */
struct bfs_dict *bfs__txn_row(const struct bfs_op *op, int i);
/* Children of mask whose xattrop succeeded on every object. */
uint32_t bfs__txn_changelog_ok(const struct bfs_txn_lock *lk, const struct bfs_op *op,
                               uint32_t mask);
/* Lock sets in order (lock) or reverse order (unlock); *sub tracks which.
 * BFS_LK_DONE when all are done. */
int bfs__txn_locks_step(struct bfs_txn_lock *lk, struct bfs_op *op, int *sub, bool lock);
/* Children holding every lock set. */
uint32_t bfs__txn_locked_all(const struct bfs_txn_lock *lk);

#endif
