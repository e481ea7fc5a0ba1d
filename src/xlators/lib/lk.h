/*
 * lk.h — lock sets: one cluster-internal lock (inodelk on an inode, or
 * entrylk on a name in a directory) taken on a set of children, as a stage
 * of a fan-out op (core/fanout.h).
 *
 * Locking runs in two phases, each a fan-out of the op:
 *   1. a non-blocking request to every child at once: when nobody else
 *      holds the lock, one round trip;
 *   2. if any child answered EAGAIN (contended): the granted ones are
 *      released and the set is taken again with blocking requests, one
 *      child at a time in child order, so that two clients locking the same
 *      set can never deadlock.
 * A child that fails for any other reason (ENOTCONN: down) is left out and
 * named in `failed`; the caller decides whether what was locked is enough
 * (quorum).
 *
 * Use from a step function: call bfs_lkset_lock() in a state until it
 * returns BFS_LK_DONE (it returns BFS_OP_WAIT after winding: return that
 * from the step and call it again when the op steps again). The op must
 * have at least xl->nchildren reply slots (slot i = child i) and its frame
 * must be the lock owner's (the stack's lk_owner identifies the holder on
 * the bricks): the caller sets op->frame. Unlocking is the same with
 * bfs_lkset_unlock(). The op's reply slots are reset between phases.
 *
 * Lifetime: the set owns copies of its loc, domain and basename
 * (bfs_lkset_init .. bfs_lkset_clear).
 */
#ifndef BFS_XL_LIB_LK_H
#define BFS_XL_LIB_LK_H

#include "cluster.h"
#include "core/fanout.h"

#define BFS_LK_DONE 16 /* a lock set step finished (never a BFS_OP_* value) */

enum bfs_lkset_kind { BFS_LKSET_INODE = 1, BFS_LKSET_ENTRY = 2 };

struct bfs_lkset {
    enum bfs_lkset_kind kind;
    char *domain;
    struct bfs_loc loc;      /* the inode (INODE) or the directory (ENTRY); owned */
    char *basename;          /* ENTRY: the name; NULL locks the whole directory */
    bool shared;             /* INODE: a read lock (F_RDLCK), set after init */
    uint32_t locked;         /* children holding the lock */
    uint32_t failed;         /* children that refused for another reason than contention */
    int err;                 /* the first such error */
    /* private */
    int phase;
    uint32_t todo;
    int last;
};

/* 0 or -ENOMEM. loc is copied (gfid only for the brick: the object). */
int bfs_lkset_init(struct bfs_lkset *s, enum bfs_lkset_kind kind, const char *domain,
                   const struct bfs_gfid *gfid, const char *basename);
void bfs_lkset_clear(struct bfs_lkset *s);

int bfs_lkset_lock(struct bfs_lkset *s, struct bfs_op *op, uint32_t want);
int bfs_lkset_unlock(struct bfs_lkset *s, struct bfs_op *op);

/* Fills the request of one lock call (exposed for the blocking heal code,
 * which takes the same locks with bfs_sync_*). cmd: BFS_LK_SETLK,
 * BFS_LK_SETLKW or 0 for unlock. Pointers in the request borrow from s. */
void bfs_lkset_inodelk_req(const struct bfs_lkset *s, uint64_t owner, int cmd,
                           struct bfs_inodelk_req *req);
void bfs_lkset_entrylk_req(const struct bfs_lkset *s, int cmd, struct bfs_entrylk_req *req);

/* Blocking forms for heal threads (bfs_sync_*; never on the event loop):
 * bfs_heal_stack_new() makes the identity of one heal (uid 0, a lock owner
 * of its own, never a transaction's); bfs_lkset_lock_sync() takes s on the
 * children of want one at a time in child order and returns those that
 * granted it; bfs_lkset_unlock_sync() releases them in reverse order. */
struct bfs_stack *bfs_heal_stack_new(void);
uint32_t bfs_lkset_lock_sync(const struct bfs_lkset *s, struct bfs_xl *xl,
                             struct bfs_stack *st, uint32_t want);
void bfs_lkset_unlock_sync(const struct bfs_lkset *s, struct bfs_xl *xl, struct bfs_stack *st,
                           uint32_t locked);

/* For heals: takes s on the children of want(arg). One round of
 * non-blocking requests in child order; when a child answers EAGAIN, what
 * was taken is released and, unless timeout_ms is 0, the lock is asked
 * for again with blocking requests, one child at a time in child order.
 * Queued at the bricks, they make the holder hear that someone waits (a
 * contention notice: an eager window lets go, lock-contention.md); each
 * is cancelled (an unlock of the waiting request, answered EAGAIN) once
 * timeout_ms has passed since the call or stop(arg) (may be NULL) says so,
 * so a holder that never lets go (a stopped client) costs a heal at most
 * timeout_ms and never hangs it. *locked: the children that hold it.
 * 0, -ENOTCONN (none granted) or -EAGAIN (held elsewhere: nothing held). */
int bfs_lkset_trylock_sync_stop(const struct bfs_lkset *s, struct bfs_xl *xl,
                                struct bfs_stack *st, uint32_t (*want)(void *arg),
                                bool (*stop)(void *arg), void *arg, uint64_t timeout_ms,
                                uint32_t *locked);
int bfs_lkset_trylock_sync(const struct bfs_lkset *s, struct bfs_xl *xl, struct bfs_stack *st,
                           uint32_t (*want)(void *arg), void *arg, uint64_t timeout_ms,
                           uint32_t *locked);

/* Orders two entry locks (rename): negative when (a, an) must be taken
 * before (b, bn). By GFID bytes, then name. */
int bfs_lkset_entry_cmp(const struct bfs_gfid *a, const char *an, const struct bfs_gfid *b,
                        const char *bn);

#endif
