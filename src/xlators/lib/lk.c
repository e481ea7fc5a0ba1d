/*
 * lk.c — lock sets (see lk.h): inodelk/entrylk on several children with a
 * non-blocking parallel attempt and an ordered blocking fallback.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/event.h"
#include "core/fops-util.h"
#include "lk.h"

enum {
    PH_IDLE = 0,
    PH_NB,        /* non-blocking requests in flight */
    PH_NB_UNDO,   /* releasing what the non-blocking round got */
    PH_SERIAL,    /* blocking requests, one child at a time */
    PH_UNLOCKING,
};

int bfs_lkset_init(struct bfs_lkset *s, enum bfs_lkset_kind kind, const char *domain,
                   const struct bfs_gfid *gfid, const char *basename)
{
    memset(s, 0, sizeof(*s));
    s->kind = kind;
    s->loc.gfid = *gfid;
    s->last = -1;
    s->domain = strdup(domain);
    if (basename)
        s->basename = strdup(basename);
    if (!s->domain || (basename && !s->basename)) {
        bfs_lkset_clear(s);
        return -ENOMEM;
    }
    return 0;
}

void bfs_lkset_clear(struct bfs_lkset *s)
{
    free(s->domain);
    free(s->basename);
    s->domain = s->basename = NULL;
}

void bfs_lkset_inodelk_req(const struct bfs_lkset *s, uint64_t owner, int cmd,
                           struct bfs_inodelk_req *req)
{
    memset(req, 0, sizeof(*req));
    req->domain = s->domain;
    req->loc.gfid = s->loc.gfid;
    req->cmd = (uint32_t)(cmd ? cmd : BFS_LK_SETLK);
    req->lock.type = !cmd ? F_UNLCK : s->shared ? F_RDLCK : F_WRLCK;
    req->lock.whence = SEEK_SET;
    req->lock.start = 0;
    req->lock.len = 0; /* whole file */
    req->lock.owner = owner;
}

void bfs_lkset_entrylk_req(const struct bfs_lkset *s, int cmd, struct bfs_entrylk_req *req)
{
    memset(req, 0, sizeof(*req));
    req->domain = s->domain;
    req->loc.gfid = s->loc.gfid;
    req->basename = s->basename;
    req->cmd = (uint32_t)(cmd == BFS_LK_SETLK    ? BFS_ENTRYLK_LOCK_NB
                          : cmd == BFS_LK_SETLKW ? BFS_ENTRYLK_LOCK
                                                 : BFS_ENTRYLK_UNLOCK);
    req->type = BFS_ENTRYLK_WRLCK;
}

int bfs_lkset_entry_cmp(const struct bfs_gfid *a, const char *an, const struct bfs_gfid *b,
                        const char *bn)
{
    int c = memcmp(a->b, b->b, sizeof(a->b));
    if (c)
        return c;
    return strcmp(an ? an : "", bn ? bn : "");
}

/* Winds one lock call (cmd as in bfs_lkset_inodelk_req) to child i. */
static void wind_one(struct bfs_lkset *s, struct bfs_op *op, int i, int cmd)
{
    struct bfs_xl *child = op->xl->children[i];
    if (s->kind == BFS_LKSET_INODE) {
        struct bfs_inodelk_req req;
        bfs_lkset_inodelk_req(s, op->frame->stack->lk_owner, cmd, &req);
        bfs_op_wind(op, i, BFS_FOP_INODELK, child, &req);
    } else {
        struct bfs_entrylk_req req;
        bfs_lkset_entrylk_req(s, cmd, &req);
        bfs_op_wind(op, i, BFS_FOP_ENTRYLK, child, &req);
    }
}

static void wind_all(struct bfs_lkset *s, struct bfs_op *op, uint32_t mask, int cmd)
{
    bfs_op_reset_replies(op);
    bfs_op_expect(op, bfs_mask_count(mask));
    for (int i = 0; i < op->xl->nchildren; i++)
        if (bfs_mask_has(mask, i))
            wind_one(s, op, i, cmd);
}

static void note_failure(struct bfs_lkset *s, int i, int rc)
{
    s->failed |= BFS_BIT(i);
    if (!s->err)
        s->err = rc;
}

/* After the non-blocking round: granted, contended and failed children. */
static int after_nb(struct bfs_lkset *s, struct bfs_op *op)
{
    uint32_t granted = 0, contended = 0;
    for (int i = 0; i < op->xl->nchildren; i++) {
        const struct bfs_op_reply *r = &op->replies[i];
        if (!bfs_mask_has(s->todo, i) || !r->valid)
            continue;
        if (r->rc >= 0)
            granted |= BFS_BIT(i);
        else if (r->rc == -EAGAIN)
            contended |= BFS_BIT(i);
        else
            note_failure(s, i, r->rc);
    }
    bfs_op_reset_replies(op);
    if (!contended) {
        s->locked = granted;
        s->phase = PH_IDLE;
        return BFS_LK_DONE;
    }
    s->todo = granted | contended;
    if (granted) {
        s->phase = PH_NB_UNDO;
        wind_all(s, op, granted, 0);
        return BFS_OP_WAIT;
    }
    s->phase = PH_SERIAL;
    return BFS_OP_CONTINUE;
}

/* One blocking request at a time, in child order. */
static int serial(struct bfs_lkset *s, struct bfs_op *op)
{
    if (s->last >= 0) {
        const struct bfs_op_reply *r = &op->replies[s->last];
        if (r->valid && r->rc >= 0)
            s->locked |= BFS_BIT(s->last);
        else
            note_failure(s, s->last, r->valid ? r->rc : -EIO);
        bfs_op_reset_replies(op);
        s->last = -1;
    }
    int i = bfs_mask_first(s->todo);
    if (i < 0) {
        s->phase = PH_IDLE;
        return BFS_LK_DONE;
    }
    s->todo &= ~BFS_BIT(i);
    s->last = i;
    bfs_op_expect(op, 1);
    wind_one(s, op, i, BFS_LK_SETLKW);
    return BFS_OP_WAIT;
}

int bfs_lkset_lock(struct bfs_lkset *s, struct bfs_op *op, uint32_t want)
{
    for (;;) {
        int r;
        switch (s->phase) {
        case PH_IDLE:
            s->locked = s->failed = 0;
            s->err = 0;
            s->todo = want;
            s->last = -1;
            if (!want)
                return BFS_LK_DONE;
            s->phase = PH_NB;
            wind_all(s, op, want, BFS_LK_SETLK);
            return BFS_OP_WAIT;
        case PH_NB:
            r = after_nb(s, op);
            if (r != BFS_OP_CONTINUE)
                return r;
            break;
        case PH_NB_UNDO:
            bfs_op_reset_replies(op); /* an unlock that fails frees nothing we hold */
            s->phase = PH_SERIAL;
            break;
        case PH_SERIAL:
            return serial(s, op);
        default:
            return BFS_LK_DONE;
        }
    }
}

int bfs_lkset_unlock(struct bfs_lkset *s, struct bfs_op *op)
{
    if (s->phase == PH_UNLOCKING) {
        bfs_op_reset_replies(op); /* a child that fails the unlock lost the lock anyway */
        s->phase = PH_IDLE;
        s->locked = 0;
        return BFS_LK_DONE;
    }
    if (!s->locked)
        return BFS_LK_DONE;
    s->phase = PH_UNLOCKING;
    wind_all(s, op, s->locked, 0);
    return BFS_OP_WAIT;
}

/* ---- blocking forms (heal threads) ---- */

static uint64_t heal_owner_seq;

struct bfs_stack *bfs_heal_stack_new(void)
{
    struct bfs_stack *st = bfs_stack_new();
    if (st)
        st->lk_owner = __atomic_add_fetch(&heal_owner_seq, 1, __ATOMIC_RELAXED) |
                       (1ull << 63); /* never equal to a transaction's */
    return st;
}

/* cmd: BFS_LK_SETLKW (waits), BFS_LK_SETLK (EAGAIN when held elsewhere), 0 (unlock). */
static int lock_cmd_sync(const struct bfs_lkset *s, struct bfs_xl *child, struct bfs_stack *st,
                         int cmd)
{
    if (s->kind == BFS_LKSET_INODE) {
        struct bfs_inodelk_req req;
        bfs_lkset_inodelk_req(s, st->lk_owner, cmd, &req);
        return bfs_sync_any(BFS_FOP_INODELK, child, st, &req, NULL);
    }
    struct bfs_entrylk_req req;
    bfs_lkset_entrylk_req(s, cmd, &req);
    return bfs_sync_any(BFS_FOP_ENTRYLK, child, st, &req, NULL);
}

static int lock_one_sync(const struct bfs_lkset *s, struct bfs_xl *child, struct bfs_stack *st,
                         bool lock)
{
    return lock_cmd_sync(s, child, st, lock ? BFS_LK_SETLKW : 0);
}

uint32_t bfs_lkset_lock_sync(const struct bfs_lkset *s, struct bfs_xl *xl,
                             struct bfs_stack *st, uint32_t want)
{
    uint32_t locked = 0;
    for (int i = 0; i < xl->nchildren; i++) /* blocking, in child order: no deadlock */
        if (bfs_mask_has(want, i) && lock_one_sync(s, xl->children[i], st, true) == 0)
            locked |= BFS_BIT(i);
    return locked;
}

void bfs_lkset_unlock_sync(const struct bfs_lkset *s, struct bfs_xl *xl, struct bfs_stack *st,
                           uint32_t locked)
{
    for (int i = xl->nchildren - 1; i >= 0; i--)
        if (bfs_mask_has(locked, i))
            (void)lock_one_sync(s, xl->children[i], st, false);
}

/* One lock request that may wait (SETLKW / LOCK), answered or cancelled. */
struct lk_wait {
    pthread_mutex_t m;
    pthread_cond_t c;
    bool done;
    int rc;
};

static void lk_wait_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    struct lk_wait *w = cookie;
    (void)frame, (void)fop, (void)rep;
    pthread_mutex_lock(&w->m);
    w->rc = rc;
    w->done = true;
    pthread_cond_signal(&w->c);
    pthread_mutex_unlock(&w->m);
}

static void wait_slice(struct lk_wait *w, uint64_t until_ns)
{
    uint64_t now = bfs_now_ns(), slice = 100 * 1000000ull; /* stop() and re-cancels */
    uint64_t ns = until_ns > now && until_ns - now < slice ? until_ns - now : slice;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ns / 1000000000ull);
    ts.tv_nsec += (long)(ns % 1000000000ull);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    (void)pthread_cond_timedwait(&w->c, &w->m, &ts);
}

/* A blocking request on child, queued at the brick (so that the holder is
 * told someone waits: features/locks sends it a contention notice, and an
 * eager window lets go, lock-contention.md), but waited for only until
 * deadline_ns or stop(arg): then it is cancelled with an unlock of the same
 * owner and range, which features/locks answers by failing the waiting
 * request with EAGAIN (or, granted meanwhile, by releasing it). The
 * cancel is sent again every slice until the request has answered (it may
 * have overtaken the request). 0 (held), -EAGAIN (cancelled: not held) or
 * the child's error. */
static int lock_bounded(const struct bfs_lkset *s, struct bfs_xl *child, struct bfs_stack *st,
                        uint64_t deadline_ns, bool (*stop)(void *arg), void *arg)
{
    struct lk_wait w = {.m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER};
    struct bfs_frame *top = bfs_frame_top_new(st, NULL);
    if (!top)
        return -ENOMEM;
    int fop, rc;
    if (s->kind == BFS_LKSET_INODE) {
        struct bfs_inodelk_req req;
        bfs_lkset_inodelk_req(s, st->lk_owner, BFS_LK_SETLKW, &req);
        fop = BFS_FOP_INODELK;
        rc = bfs_wind_any(fop, top, child, lk_wait_cbk, &w, &req);
    } else {
        struct bfs_entrylk_req req;
        bfs_lkset_entrylk_req(s, BFS_LK_SETLKW, &req);
        fop = BFS_FOP_ENTRYLK;
        rc = bfs_wind_any(fop, top, child, lk_wait_cbk, &w, &req);
    }
    if (rc < 0) {
        bfs_frame_top_free(top);
        return rc;
    }
    bool cancelled = false;
    pthread_mutex_lock(&w.m);
    while (!w.done) {
        if (cancelled || bfs_now_ns() >= deadline_ns || (stop && stop(arg))) {
            pthread_mutex_unlock(&w.m);
            (void)lock_cmd_sync(s, child, st, 0);
            cancelled = true;
            pthread_mutex_lock(&w.m);
            if (w.done)
                break;
        }
        wait_slice(&w, deadline_ns);
    }
    pthread_mutex_unlock(&w.m);
    bfs_frame_top_free(top);
    pthread_mutex_destroy(&w.m);
    pthread_cond_destroy(&w.c);
    if (cancelled && w.rc == 0) /* granted before a cancel that overtook it: let go */
        (void)lock_cmd_sync(s, child, st, 0);
    return cancelled && w.rc >= 0 ? -EAGAIN : w.rc;
}

int bfs_lkset_trylock_sync_stop(const struct bfs_lkset *s, struct bfs_xl *xl,
                                struct bfs_stack *st, uint32_t (*want)(void *arg),
                                bool (*stop)(void *arg), void *arg, uint64_t timeout_ms,
                                uint32_t *locked)
{
    uint64_t deadline = bfs_now_ns() + timeout_ms * 1000000ull;
    *locked = 0;
    uint32_t w = want(arg);
    bool busy = false;
    for (int i = 0; i < xl->nchildren && !busy; i++) {
        if (!bfs_mask_has(w, i))
            continue;
        int rc = lock_cmd_sync(s, xl->children[i], st, BFS_LK_SETLK);
        if (rc == 0)
            *locked |= BFS_BIT(i);
        else if (rc == -EAGAIN)
            busy = true;
    }
    if (!busy)
        return *locked ? 0 : -ENOTCONN;
    bfs_lkset_unlock_sync(s, xl, st, *locked);
    *locked = 0;
    if (!timeout_ms)
        return -EAGAIN;
    /* held elsewhere: queue, in child order as every lock set's blocking
     * phase does (no deadlock), each request bounded by the deadline */
    w = want(arg);
    for (int i = 0; i < xl->nchildren; i++) {
        if (!bfs_mask_has(w, i))
            continue;
        int rc = lock_bounded(s, xl->children[i], st, deadline, stop, arg);
        if (rc == 0) {
            *locked |= BFS_BIT(i);
        } else if (rc == -EAGAIN) {
            bfs_lkset_unlock_sync(s, xl, st, *locked);
            *locked = 0;
            return -EAGAIN;
        }
    }
    return *locked ? 0 : -ENOTCONN;
}

int bfs_lkset_trylock_sync(const struct bfs_lkset *s, struct bfs_xl *xl, struct bfs_stack *st,
                           uint32_t (*want)(void *arg), void *arg, uint64_t timeout_ms,
                           uint32_t *locked)
{
    return bfs_lkset_trylock_sync_stop(s, xl, st, want, NULL, arg, timeout_ms, locked);
}
