/*
 * txn.c — the transaction state machine (txn.h; the protocol is in
 * docs/design/replicate.md, "Transactions"): admission to a lock object
 * (acquire, join, or wait), lock + pre-op + check for the acquirer, the
 * fop through the translator's hooks, blame before the answer, then leaving
 * a shared lock or, for a one-shot lock, post-op and unlock behind the
 * answer. Lock objects and the stage helpers are in txn-lock.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/fops-util.h"
#include "txn-priv.h"

enum {
    T_EARLY_FAIL = 1, /* answer t->rc, nothing was locked */
    T_LOCK,           /* taking the lock sets, in order */
    T_PREOP_DONE,     /* the pre-op answered: check, blame what missed it */
    T_UNDO_DONE,      /* pre-op undone after a refusal */
    T_ACQ_UNLOCK,     /* releasing a failed acquisition */
    T_FOP,
    T_FOP_DONE,
    T_BLAME_DONE,
    T_ANSWER,
    T_POSTOP,         /* one-shot locks: post-op, then unlock */
    T_POSTOP_DONE,
    T_UNLOCK,
};

struct bfs_dict *bfs__txn_row(const struct bfs_op *op, int i)
{
    const struct bfs_op_reply *r = &op->replies[i];
    if (!r->valid || r->rc < 0 || !r->rep)
        return NULL;
    if (r->fop == BFS_FOP_XATTROP)
        return ((const struct bfs_xattrop_rep *)r->rep)->xattrs;
    if (r->fop == BFS_FOP_FXATTROP)
        return ((const struct bfs_fxattrop_rep *)r->rep)->xattrs;
    return NULL;
}

/* Why nothing could be locked: a real refusal, else ENOTCONN. */
static int locks_error(const struct bfs_txn_lock *lk)
{
    for (int s = 0; s < lk->nsets; s++)
        if (lk->sets[s].err && lk->sets[s].err != -ENOTCONN)
            return lk->sets[s].err;
    return -ENOTCONN;
}

/* ---- admission and leaving ---- */

static bool overlap(const struct bfs_txn *a, const struct bfs_txn *b)
{
    return !(a->readonly && b->readonly) && a->start < b->end && b->start < a->end;
}

static bool __overlaps_active(const struct bfs_txn_lock *lk, const struct bfs_txn *t)
{
    for (const struct bfs_txn *a = lk->active; a; a = a->next)
        if (overlap(a, t))
            return true;
    return false;
}

static void __enqueue(struct bfs_txn_lock *lk, struct bfs_txn *t)
{
    struct bfs_txn **p = &lk->waiting;
    while (*p)
        p = &(*p)->next;
    t->next = NULL;
    *p = t;
}

static void __unlink_active(struct bfs_txn_lock *lk, struct bfs_txn *t)
{
    for (struct bfs_txn **p = &lk->active; *p; p = &(*p)->next) {
        if (*p == t) {
            *p = t->next;
            t->next = NULL;
            return;
        }
    }
}

/* How long one window may go on admitting newcomers. Bricks tell the
 * holder when another client's blocking lock waits (txn-contend.c), and
 * the window ends at once; this bound is the fallback when no notice comes
 * (a brick without them, a notice lost with its connection): a window that
 * keeps being joined (a reader or writer that never pauses for the post-op
 * delay) would otherwise starve the other client for good. Past this age
 * newcomers queue, the window drains and is released, the other client's
 * queued lock is granted, and ours is asked for again behind it. */
#define TXN_WINDOW_MAX_MS 1000

static bool window_aged(const struct bfs_txn_lock *lk)
{
    return bfs_now_ms() - lk->since_ms > TXN_WINDOW_MAX_MS;
}

/* An entry window (txn-entry.c) that no longer reaches every child up: a
 * child failed a change under it, or was left out when it was acquired
 * and answers again without having been announced down and up (a brick
 * failing calls while its connection stays). Changes do not join it: it
 * ends, and the next acquisition locks every child up again (as a
 * one-shot entry lock would for each change), so that changes never go
 * to fewer children than one-shot locks would reach. Data windows keep
 * their set for as long as they last (writes through one fd). */
static bool window_narrow(const struct bfs_txn_lock *lk)
{
    return lk->type == BFS_TXN_ENTRY && (bfs_cluster_up(lk->cl) & ~lk->set) != 0;
}

/* Decides where t starts: acquire, join, or wait (queued, not run). */
void bfs__txn_admit(struct bfs_txn *t)
{
    struct bfs_txn_lock *lk = t->lk;
    if (!bfs_cluster_quorum(t->cl, bfs_cluster_up(t->cl))) {
        t->rc = -EROFS;
        t->op.state = T_EARLY_FAIL;
        bfs_op_run(&t->op);
        return;
    }
    pthread_mutex_lock(&lk->m);
    if (lk->state == BFS_TXL_FREE) {
        if (bfs__txn_holder_setup(lk, t) < 0) {
            pthread_mutex_unlock(&lk->m);
            t->rc = -ENOMEM;
            t->op.state = T_EARLY_FAIL;
            bfs_op_run(&t->op);
            return;
        }
        lk->state = BFS_TXL_ACQUIRING;
        t->acquirer = true;
        t->op.state = T_LOCK;
    } else if (lk->state == BFS_TXL_HELD && !lk->release_now && !__overlaps_active(lk, t) &&
               (t->readonly || !lk->ro_window) && !window_aged(lk) && !window_narrow(lk)) {
        bfs__txn_timer_disarm(lk);
        lk->joined++;
        t->op.state = T_FOP;
    } else {
        bool release = false;
        bool aged = lk->state == BFS_TXL_HELD && (window_aged(lk) || window_narrow(lk));
        if ((aged || (!t->readonly && lk->ro_window)) && lk->state != BFS_TXL_RELEASING) {
            /* a change waits for the readers' window to end; an old window
             * ends to let other clients in */
            lk->release_now = true;
            if (lk->state == BFS_TXL_HELD && !lk->active) {
                bfs__txn_timer_disarm(lk);
                lk->state = BFS_TXL_RELEASING;
                release = true;
            }
        }
        __enqueue(lk, t);
        pthread_mutex_unlock(&lk->m);
        if (release)
            bfs__txn_start_release(lk);
        return;
    }
    t->next = lk->active;
    lk->active = t;
    pthread_mutex_unlock(&lk->m);
    bfs_op_run(&t->op);
}

void bfs_txn_start(struct bfs_txn *t)
{
    bfs__txn_admit(t);
}

/* A shared lock's transaction is done with it. */
static void leave(struct bfs_txn *t)
{
    struct bfs_txn_lock *lk = t->lk;
    struct bfs_cluster *cl = t->cl;
    struct bfs_txn *wake = NULL;
    bool release = false;
    pthread_mutex_lock(&lk->m);
    __unlink_active(lk, t);
    if (!t->fd_based)
        lk->release_now = true; /* a truncate by path: do not hold the file */
    if (lk->waiting && !lk->release_now) {
        wake = lk->waiting; /* joiners (overlapping ones queue again) */
        lk->waiting = NULL;
    } else if (!lk->active) {
        uint64_t delay = __atomic_load_n(&cl->delay_ms, __ATOMIC_RELAXED);
        bool eager = __atomic_load_n(&cl->eager, __ATOMIC_RELAXED);
        /* sequential reads keep a readers' window; a change waiting for
         * it set release_now */
        if (lk->release_now || !eager || !delay || !bfs__txn_timer_arm(lk, delay)) {
            lk->state = BFS_TXL_RELEASING;
            release = true;
        }
    }
    pthread_mutex_unlock(&lk->m);
    if (release)
        bfs__txn_start_release(lk);
    bfs__txn_post_list(cl, wake);
}

/* ---- the transaction ---- */

static void txn_destroy(struct bfs_op *op)
{
    struct bfs_txn *t = (struct bfs_txn *)op;
    struct bfs_cluster *cl = t->cl;
    if (t->kept) { /* the op's own array was freed by the driver */
        for (int i = 0; i < op->n; i++)
            if (t->kept[i].rep) {
                bfs_fop_info[t->kept[i].fop].rep_clear_dup(t->kept[i].rep);
                free(t->kept[i].rep);
            }
        free(t->kept);
    }
    bfs_frame_top_free(t->old_top);
    bfs_stack_unref(t->old_stack);
    if (t->own_lock) {
        struct bfs_txn_lock *lk = t->lk;
        bfs_frame_top_free(lk->top);
        bfs_stack_unref(lk->stack);
        for (int s = 0; s < lk->nsets; s++)
            bfs_lkset_clear(&lk->sets[s]);
        if (lk->fd)
            bfs_fd_unref(lk->fd);
        if (lk->inode)
            bfs_inode_unref(lk->inode);
        pthread_mutex_destroy(&lk->m);
        free(lk);
    }
    t->fop->destroy(t);
    bfs__txn_live_add(cl, -1);
}

/* After a failed acquisition: the lock is FREE again, waiters retry. */
static void acquisition_failed(struct bfs_txn *t)
{
    struct bfs_txn_lock *lk = t->lk;
    struct bfs_fd *fd;
    struct bfs_inode *inode;
    struct bfs_txn *waiting;
    struct bfs_txn_after *after;
    pthread_mutex_lock(&lk->m);
    __unlink_active(lk, t);
    bfs__txn_holder_drop(lk, &t->old_stack, &t->old_top, &fd, &inode, &waiting, &after);
    pthread_mutex_unlock(&lk->m);
    t->op.frame = t->caller;
    if (fd)
        bfs_fd_unref(fd);
    bfs__txn_post_list(t->cl, waiting);
    bfs__txn_post_after(t->cl, after);
    if (inode)
        bfs_inode_unref(inode); /* t's own target keeps it alive */
}

/* Pre-op answered: keep the children that took it, check, go on. */
static int preop_done(struct bfs_txn *t)
{
    struct bfs_txn_lock *lk = t->lk;
    struct bfs_cluster *cl = t->cl;
    struct bfs_op *op = &t->op;
    uint32_t locked = bfs__txn_locked_all(lk);
    uint32_t ok = bfs__txn_changelog_ok(lk, op, locked);
    uint32_t locked_good = ok; /* the children the check lets take the change */
    int rc = 0;
    if (!ok)
        rc = -ENOTCONN;
    else if (!bfs_cluster_quorum(cl, ok))
        rc = -EROFS;
    else if (cl->cl->check && t->type != BFS_TXN_ENTRY) {
        struct bfs_dict *rows[BFS_CLUSTER_MAX] = {0};
        uint32_t good = ok;
        for (int i = 0; i < cl->n; i++)
            if (bfs_mask_has(ok, i))
                rows[i] = bfs__txn_row(op, i);
        rc = cl->cl->check(cl->cl_arg, lk, t->type, ok, rows, &good);
        if (rc == 0)
            locked_good = good & ok;
    }
    pthread_mutex_lock(&lk->m);
    lk->set = lk->dirtied = ok;
    pthread_mutex_unlock(&lk->m);
    if (rc < 0) {
        if (rc == -EIO)
            XL_WARN(cl->xl, "the copies locked for a change blame each other: EIO");
        t->rc = rc;
        op->state = T_UNDO_DONE;
        if (ok) {
            bfs__txn_wind_changelog(lk, op, ok, -1, t->absent, -1, false);
            return BFS_OP_WAIT;
        }
        return BFS_OP_CONTINUE;
    }
    uint32_t missed = locked & ~locked_good; /* locked but not marked (or refused by the
                                             * check): blame them now */
    if (missed) {
        t->blame = missed;
        t->after_blame = T_FOP;
        op->state = T_BLAME_DONE;
        bfs__txn_wind_changelog(lk, op, ok & ~missed, 0, missed, 1, false);
        return BFS_OP_WAIT;
    }
    op->state = T_FOP;
    return BFS_OP_CONTINUE;
}

/* The lock is ours: HELD, and whoever waited may join. */
static void granted(struct bfs_txn *t)
{
    struct bfs_txn_lock *lk = t->lk;
    pthread_mutex_lock(&lk->m);
    lk->state = BFS_TXL_HELD;
    struct bfs_txn *wake = lk->release_now ? NULL : lk->waiting;
    if (wake)
        lk->waiting = NULL;
    pthread_mutex_unlock(&lk->m);
    t->acquirer = false;
    bfs__txn_post_list(t->cl, wake);
}

static int fop_start(struct bfs_txn *t)
{
    struct bfs_txn_lock *lk = t->lk;
    struct bfs_op *op = &t->op;
    if (t->acquirer)
        granted(t);
    op->frame = t->caller;
    pthread_mutex_lock(&lk->m);
    uint32_t set = lk->set;
    pthread_mutex_unlock(&lk->m);
    uint32_t usable = t->fop->usable ? t->fop->usable(t, set) : set;
    t->run = set & usable;
    t->failed = set & ~usable;
    bfs_op_reset_replies(op);
    op->state = T_FOP_DONE;
    uint32_t skipped = t->fop->wind(t, t->run);
    t->ok = skipped & t->run; /* provisional: only if a real call succeeds */
    return BFS_OP_WAIT;
}

/* Do all failed children share one error? (then nothing changed anywhere) */
static bool same_error(const struct bfs_op *op, uint32_t mask)
{
    int rc = 0;
    for (int i = 0; i < op->xl->nchildren; i++) {
        if (!bfs_mask_has(mask, i) || !op->replies[i].valid)
            continue;
        if (rc && op->replies[i].rc != rc)
            return false;
        rc = op->replies[i].rc;
    }
    return true;
}

static int fop_done(struct bfs_txn *t)
{
    struct bfs_op *op = &t->op;
    if (t->fop->next && t->fop->next(t) == BFS_OP_WAIT)
        return BFS_OP_WAIT; /* another stage of the fop was wound */
    if (t->readonly) { /* a read: nothing changed, nobody to blame */
        t->ok = t->run;
        t->rc = t->fop->combine(t);
        op->state = T_ANSWER;
        return BFS_OP_CONTINUE;
    }
    uint32_t skipped = t->ok, wound_ok = 0, wound_failed = 0;
    for (int i = 0; i < t->cl->n; i++) {
        if (!bfs_mask_has(t->run & ~skipped, i))
            continue;
        if (op->replies[i].valid && op->replies[i].rc >= 0)
            wound_ok |= BFS_BIT(i);
        else
            wound_failed |= BFS_BIT(i);
    }
    t->failed |= wound_failed;
    t->ok = wound_ok ? wound_ok | skipped : 0;
    if (t->piggy) { /* the pre-op was applied exactly where the fop succeeded */
        pthread_mutex_lock(&t->lk->m);
        t->lk->dirtied = wound_ok;
        pthread_mutex_unlock(&t->lk->m);
    }
    if (!t->ok) {
        t->failed |= t->run;
        if (!same_error(op, wound_failed)) {
            pthread_mutex_lock(&t->lk->m);
            t->lk->keep_dirty = true;
            pthread_mutex_unlock(&t->lk->m);
        }
        t->rc = t->fop->combine(t);
        if (t->rc >= 0)
            t->rc = -EIO;
        int c = bfs_mask_first(t->run);
        if (t->rc == -EIO)
            XL_WARN(t->cl->xl, "%s failed on every copy it went to (%s): EIO",
                    c >= 0 && op->replies[c].valid ? bfs_fop_name(op->replies[c].fop)
                                                   : "a change",
                    same_error(op, wound_failed) ? "one error" : "different errors");
        op->state = T_ANSWER;
        return BFS_OP_CONTINUE;
    }
    t->rc = t->fop->combine(t);
    /* Made on too few copies to be acknowledged: with build_unacked, the
     * copies that took it mark themselves instead of blaming the others
     * (which may well hold the right copy: the change never happened as
     * far as the caller knows). */
    bool unacked = !bfs_cluster_quorum(t->cl, t->ok);
    if (unacked && t->rc >= 0)
        t->rc = -EROFS;
    unacked = unacked && bfs__txn_marks_unacked(t->lk);
    if (t->failed || unacked) {
        t->blame = t->failed;
        t->after_blame = T_ANSWER;
        op->frame = t->lk->top;
        op->state = T_BLAME_DONE;
        /* the answer is made from the fop's replies: keep them aside while
         * the blame stage uses the slots (no call is in flight now) */
        struct bfs_op_reply *fresh = calloc((size_t)op->n, sizeof(*fresh));
        if (fresh) {
            t->kept = op->replies;
            op->replies = fresh;
        }
        if (unacked)
            bfs__txn_wind_unacked(t->lk, op, t->ok);
        else
            bfs__txn_wind_changelog(t->lk, op, t->ok, 0, t->failed, 1, false);
        return BFS_OP_WAIT;
    }
    op->state = T_ANSWER;
    return BFS_OP_CONTINUE;
}

/* The fop's replies kept aside during a blame stage go back in place. */
static void restore_kept(struct bfs_txn *t)
{
    if (!t->kept)
        return;
    bfs_op_reset_replies(&t->op);
    free(t->op.replies);
    t->op.replies = t->kept;
    t->kept = NULL;
}

/* A blame stage answered: the blamed children leave the set. */
static int blame_done(struct bfs_txn *t)
{
    struct bfs_txn_lock *lk = t->lk;
    pthread_mutex_lock(&lk->m);
    uint32_t from = lk->set & ~t->blame;
    uint32_t recorded = bfs__txn_changelog_ok(lk, &t->op, from);
    lk->set &= ~t->blame;
    lk->dirtied &= ~t->blame;
    pthread_mutex_unlock(&lk->m);
    bfs_op_reset_replies(&t->op);
    restore_kept(t);
    if (!recorded && t->after_blame == T_ANSWER && t->rc >= 0) {
        XL_WARN(t->cl->xl, "no copy recorded the blame of copies that failed a change: EIO");
        t->rc = -EIO; /* nobody recorded the blame: do not acknowledge */
    }
    t->op.state = t->after_blame;
    return BFS_OP_CONTINUE;
}

static int txn_lock_stage(struct bfs_txn *t)
{
    struct bfs_txn_lock *lk = t->lk;
    struct bfs_op *op = &t->op;
    op->frame = lk->top;
    int r = bfs__txn_locks_step(lk, op, &t->sub, true);
    if (r != BFS_LK_DONE)
        return r;
    uint32_t locked = bfs__txn_locked_all(lk);
    if (!locked || !bfs_cluster_quorum(t->cl, locked)) {
        t->rc = locked ? -EROFS : locks_error(lk);
        op->state = T_ACQ_UNLOCK;
        return BFS_OP_CONTINUE;
    }
    t->absent = bfs__txn_all(t->cl) & ~locked;
    if (t->readonly) { /* a readers' window: no pre-op, nothing to undo */
        pthread_mutex_lock(&lk->m);
        lk->set = locked;
        lk->dirtied = 0;
        pthread_mutex_unlock(&lk->m);
        op->state = T_FOP;
        return BFS_OP_CONTINUE;
    }
    if (bfs__txn_piggy_preop(t, locked)) {
        op->state = T_FOP; /* the pre-op goes with the fop */
        return BFS_OP_CONTINUE;
    }
    op->state = T_PREOP_DONE;
    bfs__txn_wind_changelog(lk, op, locked, 1, t->absent, 1, true);
    return BFS_OP_WAIT;
}

static int txn_step(struct bfs_op *op)
{
    struct bfs_txn *t = (struct bfs_txn *)op;
    struct bfs_txn_lock *lk = t->lk;
    int r;
    switch (op->state) {
    case T_EARLY_FAIL:
        t->fop->answer(t, t->rc);
        return BFS_OP_DONE;
    case T_LOCK:
        return txn_lock_stage(t);
    case T_PREOP_DONE:
        return preop_done(t);
    case T_UNDO_DONE:
        bfs_op_reset_replies(op);
        op->state = T_ACQ_UNLOCK;
        return BFS_OP_CONTINUE;
    case T_ACQ_UNLOCK:
        op->frame = lk->top;
        r = bfs__txn_locks_step(lk, op, &t->sub, false);
        if (r != BFS_LK_DONE)
            return r;
        if (!t->own_lock)
            acquisition_failed(t);
        t->fop->answer(t, t->rc);
        return BFS_OP_DONE;
    case T_FOP:
        return fop_start(t);
    case T_FOP_DONE:
        return fop_done(t);
    case T_BLAME_DONE:
        return blame_done(t);
    case T_ANSWER:
        op->frame = lk->top;
        t->fop->answer(t, t->rc);
        if (!t->own_lock) {
            leave(t);
            return BFS_OP_DONE;
        }
        op->state = T_POSTOP;
        return BFS_OP_CONTINUE;
    case T_POSTOP: {
        uint32_t clear = lk->keep_dirty ? 0 : lk->set & lk->dirtied;
        op->state = T_POSTOP_DONE;
        if (!clear) {
            bfs_op_reset_replies(op); /* no post-op replies to read */
            return BFS_OP_CONTINUE;
        }
        bfs__txn_wind_postop(lk, op, clear);
        return BFS_OP_WAIT;
    }
    case T_POSTOP_DONE:
        bfs__txn_postop_unlocked(lk, op);
        bfs__txn_postop_announce(lk, op);
        bfs_op_reset_replies(op);
        op->state = T_UNLOCK;
        return BFS_OP_CONTINUE;
    case T_UNLOCK:
        r = bfs__txn_locks_step(lk, op, &t->sub, false);
        return r == BFS_LK_DONE ? BFS_OP_DONE : r;
    }
    return BFS_OP_DONE;
}

int bfs_txn_init(struct bfs_txn *t, struct bfs_cluster *cl, const struct bfs_txn_fop *fop,
                 struct bfs_frame *caller, int type, struct bfs_txn_lock *lk,
                 const struct bfs_txn_target *target)
{
    t->cl = cl;
    t->fop = fop;
    t->caller = caller;
    t->type = type;
    t->target = *target;
    t->end = t->end ? t->end : UINT64_MAX;
    if (!lk) {
        lk = calloc(1, sizeof(*lk));
        if (!lk)
            return -ENOMEM;
        bfs_txn_lock_init(lk, cl, type, false);
        t->own_lock = true;
    }
    t->lk = lk;
    /* slots: obj * n + child for the changelog (two objects at most); the fop
     * stage may use up to BFS_TXN_FOP_SLOTS per child (txn.h) */
    if (bfs_op_init(&t->op, caller, cl->xl, cl->n * BFS_TXN_FOP_SLOTS, txn_step, txn_destroy) < 0) {
        if (t->own_lock) {
            pthread_mutex_destroy(&lk->m);
            free(lk);
        }
        return -ENOMEM;
    }
    bfs__txn_live_add(cl, 1);
    return 0;
}

