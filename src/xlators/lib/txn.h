/*
 * txn.h — transactions of cluster translators: every change to a file is
 * made under a cluster lock with a changelog on the bricks around it
 * (docs/design/replicate.md, "Transactions"):
 *
 *   lock -> pre-op (dirty += 1, blame children left out, read the rows)
 *        -> check -> fop -> blame children that failed -> answer
 *        -> post-op (dirty -= 1) -> unlock
 *
 * A transaction is a fan-out op (core/fanout.h) whose fop stage belongs to
 * the translator (struct bfs_txn_fop hooks: which children can take it,
 * wind it, combine the answers, answer the caller); the locking and the
 * changelog (through the cluster's struct bfs_changelog_ops) are here.
 *
 * The lock object. Lock, pre-op, post-op and unlock belong to a struct
 * bfs_txn_lock, not to one transaction:
 *   - one-shot (entry and metadata changes): made for one transaction and
 *     freed with it;
 *   - shared (data changes): one per inode (in the translator's inode
 *     context). It goes FREE -> ACQUIRING (the first transaction locks and
 *     pre-ops) -> HELD (later transactions join at once: eager locking)
 *     -> RELEASING (post-op and unlock, by a release op of its own) -> FREE.
 *     After the last fd-based transaction leaves, a HELD lock stays for
 *     cluster delay_ms (delayed post-op) unless bfs_txn_lock_flush() or a
 *     non-fd transaction asks for it sooner.
 * Joining transactions whose byte ranges overlap one in flight wait for it.
 *
 * Readers (t->readonly, set before bfs_txn_start; disperse's reads, so that
 * a read never sees a stripe half written by another client): a read
 * joins a held window like any transaction (reads do not wait for each
 * other) and is never blamed (the fop stage's answer is the read's own);
 * finding the lock FREE, it acquires a read-only window: a shared inodelk
 * (F_RDLCK, so that readers of several clients share it) and no pre-op,
 * nothing on the bricks to undo. A change never joins a read-only window:
 * it waits, and the window is released as soon as its reads are done (no
 * delay; bfs_txn_lock_flush does not wait for one either). Then the
 * change acquires a window of its own.
 * A transaction waits only before its op first runs: it is queued on the
 * lock and, when woken, posted to the event loop and admitted again.
 *
 * Identity: the lock's calls (inodelk, entrylk, xattrop) go out from a top
 * frame on the lock's own stack (uid 0, a lock owner unique to the lock);
 * the fop itself keeps the caller's frame, stack and credentials.
 *
 * Lifetimes: a shared lock object holds a reference on its inode from
 * acquisition to FREE, and on the fd it locked through. A transaction holds
 * nothing of the lock's; the embedding struct is freed by the fop's
 * destroy hook once the op is over (after the answer and, for one-shot
 * locks, after the unlock).
 */
#ifndef BFS_XL_LIB_TXN_H
#define BFS_XL_LIB_TXN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster.h"
#include "core/event.h"
#include "core/fanout.h"
#include "lk.h"

struct bfs_txn;

/* Reply slots of a transaction's op per child: the fop stage may use slot
 * i + j * n (j < BFS_TXN_FOP_SLOTS) for several calls to child i; only
 * slots 0..n-1 decide success. */
#define BFS_TXN_FOP_SLOTS 4

/* The translator's part of a transaction. */
struct bfs_txn_fop {
    /* Children among `set` that can take the fop (e.g. where the fd is
     * open); the others count as failed. NULL: all. */
    uint32_t (*usable)(struct bfs_txn *t, uint32_t set);
    /* Winds the fop to the children of run (bfs_op_expect first, slot i =
     * child i). Returns the children of run it did not wind to but that
     * count as having succeeded when another one did (an arbiter). */
    uint32_t (*wind)(struct bfs_txn *t, uint32_t run);
    /* The result for the caller, from t->op.replies, t->ok and t->failed. */
    int (*combine)(struct bfs_txn *t);
    /* Answers the caller (unwinds t->caller) with rc. Called once. */
    void (*answer)(struct bfs_txn *t, int rc);
    /* Optional, for fops of several stages (read-modify-write): called
     * when the stage wound by wind (or by an earlier call) has answered.
     * Returns BFS_OP_WAIT after winding another stage into t->op
     * (bfs_op_reset_replies, bfs_op_expect first), or BFS_OP_CONTINUE when
     * slots 0..n-1 hold the fop's final answer per child of run (a slot
     * left invalid counts as failed). NULL: one stage. */
    int (*next)(struct bfs_txn *t);
    /* Frees the struct embedding t, when the op is over. */
    void (*destroy)(struct bfs_txn *t);
};

/* What a transaction locks and where it keeps its changelog. Borrowed
 * pointers must live as long as the transaction. */
struct bfs_txn_target {
    int nsets;
    struct {
        enum bfs_lkset_kind kind;
        struct bfs_gfid gfid;  /* the inode, or the directory */
        const char *name;      /* entry: the name */
    } lk[2];
    int nobj;
    struct bfs_gfid obj[2];    /* inodes that carry the changelog */
    struct bfs_fd *fd;         /* xattrop through it where open (fd_open); may be NULL */
    uint32_t fd_open;
    struct bfs_inode *inode;   /* shared locks: the inode the lock lives in */
};

enum bfs_txn_lock_state { BFS_TXL_FREE = 0, BFS_TXL_ACQUIRING, BFS_TXL_HELD, BFS_TXL_RELEASING };

struct bfs_txn_timer;
struct bfs_txn_after;

struct bfs_txn_lock {
    pthread_mutex_t m;            /* guards everything below */
    struct bfs_cluster *cl;
    int type;                     /* BFS_TXN_DATA, ... */
    bool shared;
    enum bfs_txn_lock_state state;
    /* the holder: set when acquiring, dropped when FREE again */
    struct bfs_stack *stack;
    struct bfs_frame *top;
    int nsets;
    struct bfs_lkset sets[2];
    int nobj;
    struct bfs_gfid obj[2];
    struct bfs_fd *fd;            /* ref */
    uint32_t fd_open;
    struct bfs_inode *inode;      /* ref */
    /* the window */
    uint32_t set;                 /* locked and pre-op'd, not failed since: fops go here */
    uint32_t dirtied;             /* children whose dirty mark the post-op clears */
    bool keep_dirty;              /* a fop failed everywhere, differently: leave the marks */
    bool release_now;             /* release as soon as idle (flush, non-fd change) */
    bool ro_window;               /* acquired by a reader: shared lock, no pre-op */
    uint64_t window;              /* bumped at each acquisition: names the window */
    uint64_t since_ms;            /* when the window was acquired (bfs_now_ms) */
    uint64_t owner;               /* atomic: the holder's lock owner, 0 when FREE (for
                                   * contention notices, read under cl->timers_lock) */
    uint64_t postop;              /* the post-op in flight, as md-cache knows it (0: none;
                                   * txn-piggy.c: only the releasing op touches it) */
    uint64_t joined;              /* statistics: transactions that found the lock held */
    struct bfs_txn *active;       /* transactions past admission, not yet left */
    struct bfs_txn *waiting;      /* FIFO of transactions not admitted yet */
    struct bfs_txn_after *after;  /* callbacks for when the lock is FREE again */
    struct bfs_txn_after *started; /* callbacks for when its release has started
                                    * (or it is FREE again) */
    struct bfs_txn_timer *timer;  /* delayed post-op */
    struct bfs_txn_lock *held_next; /* cl->held, while a shared lock is not FREE */
};

struct bfs_txn {
    struct bfs_op op;             /* first: the fan-out driver */
    struct bfs_cluster *cl;
    const struct bfs_txn_fop *fop;
    struct bfs_txn_lock *lk;
    bool own_lock;                /* one-shot: lk is ours */
    struct bfs_txn_target target;
    struct bfs_frame *caller;     /* the frame the fop answers */
    int type;
    uint64_t start, end;          /* byte range [start, end); end UINT64_MAX: to the end */
    bool fd_based;                /* keeps a shared lock held when it leaves */
    bool readonly;                /* a reader (see above): no changelog, never blamed */
    bool piggy;                   /* the pre-op rides in the fop (txn-piggy.c) */
    /* fop stage results, for the hooks */
    uint32_t run;                 /* children the fop went to (or was skipped on) */
    uint32_t ok, failed;          /* after the fop */
    int rc;
    /* private */
    bool acquirer;
    int sub;                      /* lock set being worked on */
    int after_blame;              /* state after a blame stage */
    uint32_t blame;               /* children a blame stage records */
    uint32_t absent;              /* children blamed at pre-op */
    struct bfs_stack *old_stack;  /* identity of a failed acquisition, freed with t */
    struct bfs_frame *old_top;
    struct bfs_op_reply *kept;    /* the fop's replies, set aside during a blame stage */
    struct bfs_txn *next;
};

void bfs_txn_lock_init(struct bfs_txn_lock *lk, struct bfs_cluster *cl, int type, bool shared);
/* At inode forget (or teardown): cancels a delayed post-op (without
 * running it: a lock still held on bricks is dropped when the connection
 * goes) and frees what the lock holds. */
void bfs_txn_lock_fini(struct bfs_txn_lock *lk);

/*
 * Prepares t (embedded first in the translator's struct, zeroed). lk:
 * a shared lock, or NULL for a one-shot lock made here. 0 or -ENOMEM.
 * Then bfs_txn_start() runs it: the caller is answered exactly once
 * through fop->answer, and fop->destroy is called at the end.
 */
int bfs_txn_init(struct bfs_txn *t, struct bfs_cluster *cl, const struct bfs_txn_fop *fop,
                 struct bfs_frame *caller, int type, struct bfs_txn_lock *lk,
                 const struct bfs_txn_target *target);
void bfs_txn_start(struct bfs_txn *t);

/* Asks a shared lock to be released as soon as no transaction uses it.
 * Returns 0 if it is FREE already (fn is not called), 1 if fn(arg) will
 * run (posted to the event loop) once it is FREE, -ENOMEM. */
int bfs_txn_lock_flush(struct bfs_txn_lock *lk, bfs_task_fn fn, void *arg);
/* The same request, but fn(arg) runs as soon as the release has started
 * (every transaction of the window has answered its caller; the post-op
 * and the unlock are on their way) rather than when it is over. Returns 0
 * if the lock is FREE or its release has started already (fn is not
 * called), 1 if fn(arg) will run (posted), -ENOMEM. For close(): the
 * writes are acknowledged, what the post-op adds is the end of the dirty
 * mark (replicate-fd.c, afr_flush). */
int bfs_txn_lock_flush_started(struct bfs_txn_lock *lk, bfs_task_fn fn, void *arg);

/* For the fop hook's wind to child i: NULL when the transaction's pre-op
 * does not ride in the fop, else a new dict (unref it) = xdata plus the
 * pre-op rows for child i (lib/txn-wire.h); *err = -ENOMEM when it should
 * have been made but could not (then do not wind to i). */
struct bfs_dict *bfs_txn_fop_xdata(struct bfs_txn *t, int i, const struct bfs_dict *xdata,
                                   int *err);

/* For the fop hook's wind to child i of an entry transaction (fop, req:
 * the request as the caller gave it): when t's pre-op rides in the fop,
 * winds to child i a copy of req whose xdata carries child i's pre-op and,
 * for a create with newlock_owner != 0, the request for the new file's data
 * lock (bfs_txn_newlock_xdata); when that xdata cannot be made, child i
 * counts as failed (never the change without its pre-op). A create with
 * newlock_owner != 0 whose pre-op does not ride (a shared entry lock,
 * pre-op'd at acquisition) carries the lock request alone. Returns false
 * when there is nothing to add: wind req as is. */
bool bfs_txn_wind_entry(struct bfs_txn *t, int i, int fop, const void *req,
                        uint64_t newlock_owner);

/* Entry transactions (txn-entry.c). Is an entry window to be kept (the
 * translator's option on, with cluster eager locking and a post-op
 * delay)? */
bool bfs_txn_entry_window_on(struct bfs_cluster *cl, bool option);
/* The one-shot locks of a change of l1's name (and l2's: rename): entrylk
 * on the name(s) in a global order, changelog on the parent(s). l1, l2
 * must outlive the transaction (tg borrows their names). */
void bfs_txn_entry_target(struct bfs_txn_target *tg, const struct bfs_loc *l1,
                          const struct bfs_loc *l2);
/* bfs_txn_init of a change of loc's name under win, the shared entry lock
 * of directory `parent` (loc->pargfid): the whole directory's entrylk,
 * kept between changes; changes of different names do not wait for each
 * other. 0 or -ENOMEM. */
int bfs_txn_init_entry_window(struct bfs_txn *t, struct bfs_cluster *cl,
                              const struct bfs_txn_fop *fop, struct bfs_frame *caller,
                              struct bfs_txn_lock *win, struct bfs_inode *parent,
                              const struct bfs_loc *loc);

/* A lock owner no other lock object uses (salt: any address of ours). */
uint64_t bfs_txn_owner_new(const void *salt);

/* Lock on create (txn-piggy.c, txn-wire.h): adds to out, the xdata of a
 * create to child i, the request that the brick grant `owner` the data
 * lock of the new file and add the data pre-op of an eager lock to it
 * (blaming the children outside t->run). 0 or -ENOMEM. */
int bfs_txn_newlock_xdata(struct bfs_txn *t, int i, uint64_t owner, struct bfs_dict *out);
/* After such a create: the children of `held` acknowledged (BFS_TXN_X_
 * NEWLOCKED), ok are those where the create succeeded. Makes the shared
 * lock lk HELD by owner on held, as if a write had just acquired it (the
 * next write joins it; a delayed post-op or flush releases it); if held
 * is not all of ok, or lk is NULL or not FREE, what the bricks granted is
 * released at once instead. */
void bfs_txn_lock_install(struct bfs_cluster *cl, struct bfs_txn_lock *lk,
                          const struct bfs_txn_target *tg, uint64_t owner, uint32_t held,
                          uint32_t ok);

/* A lock contention upcall (BFS_EV_UPCALL from a child; core/xlator.h):
 * if it names a shared lock this cluster holds (its lock owner, domain and
 * GFID), that window admits no newcomer, skips the delayed post-op and is
 * released as soon as its transactions in flight are done. Returns true
 * for every contention notice (the translator consumes it: nothing above
 * acts on one, and md-cache would count it as an invalidation), false for
 * other upcalls (pass them on). */
struct bfs_upcall;
bool bfs_txn_contention(struct bfs_cluster *cl, const struct bfs_upcall *up);
/* Every shared lock of `type` (BFS_TXN_ENTRY, ...) this cluster holds is
 * treated as if a contention notice had named it: no newcomer joins, and
 * it is released as soon as its transactions in flight are done (the
 * release is posted to the event loop). For a child's coming or going: a
 * window's set is fixed when it is acquired, so a window would otherwise
 * keep leaving a returning child out (or keep trying a lost one) until it
 * ends. Any thread. */
void bfs_txn_end_windows(struct bfs_cluster *cl, int type);
/* The objects (first changelog object: the inode, or the directory) of
 * the shared locks of `type` not FREE, up to max of them into out: where
 * a window's pre-op may have left dirty marks that a child going down now
 * will keep (its post-op cannot reach it). Any thread. */
size_t bfs_txn_held_objects(struct bfs_cluster *cl, int type, struct bfs_gfid *out, size_t max);

/* A lock owner for a create's data lock (salt: any address of ours), or 0
 * when the cluster keeps no eager window (no write would join it). */
uint64_t bfs_txn_newlock_owner(struct bfs_cluster *cl, const void *salt);
/* The children whose brick granted a create's data lock: the reply of
 * slot i acknowledges it (BFS_TXN_X_NEWLOCKED). */
uint32_t bfs_txn_newlock_acked(const struct bfs_txn *t);

/* The lock's state, for dumps and tests. */
enum bfs_txn_lock_state bfs_txn_lock_state(struct bfs_txn_lock *lk);

/* For fini of the cluster: waits until no delayed post-op timer callback
 * is running. */
void bfs_txn_timers_quiesce(struct bfs_cluster *cl);

/* For PARENT_DOWN: releases every held shared lock (post-op, unlock) and
 * waits up to timeout_ms until no transaction or release is in flight
 * (one-shot transactions finish their post-op behind their answer).
 * 0, or -ETIMEDOUT. Not on the event loop thread (wake-ups go through it). */
int bfs_txn_quiesce(struct bfs_cluster *cl, uint64_t timeout_ms);

#endif
