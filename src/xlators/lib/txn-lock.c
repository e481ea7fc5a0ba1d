/*
 * txn-lock.c — lock objects of transactions (txn.h): the holder identity,
 * the delayed post-op timer, the release op (post-op and unlock of a shared
 * lock going idle), bfs_txn_lock_flush() and bfs_txn_quiesce(), and the
 * stage helpers every transaction uses (changelog xattrops, lock sets).
 *
 * Concurrency: lk->m guards the lock object and is never held across a
 * wind or an answer; cl->timers_lock guards the cluster's bookkeeping
 * (timer callbacks running, ops in flight, held locks) and is taken after
 * lk->m when both are. Ops are woken by posting them to the event loop,
 * never run from inside another op's step.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fops-util.h"
#include "txn-priv.h"

enum { R_POSTOP = 1, R_POSTOP_DONE, R_UNLOCK };

struct txn_release {
    struct bfs_op op; /* first */
    struct bfs_txn_lock *lk;
    int sub;
    /* the holder identity, moved out of lk when it became FREE */
    struct bfs_stack *stack;
    struct bfs_frame *top;
    struct bfs_fd *fd;
    struct bfs_inode *inode;
};

static uint64_t owner_seq;

uint64_t bfs_txn_owner_new(const void *salt)
{
    return __atomic_add_fetch(&owner_seq, 1, __ATOMIC_RELAXED) ^ ((uint64_t)(uintptr_t)salt << 16);
}

uint32_t bfs__txn_all(const struct bfs_cluster *cl)
{
    return cl->n >= 32 ? ~0u : (1u << cl->n) - 1;
}

/* ---- ops in flight, held locks ---- */

void bfs__txn_live_add(struct bfs_cluster *cl, int d)
{
    pthread_mutex_lock(&cl->timers_lock);
    cl->live += d;
    if (cl->live == 0)
        pthread_cond_broadcast(&cl->timers_cond);
    pthread_mutex_unlock(&cl->timers_lock);
}

static void held_add(struct bfs_txn_lock *lk)
{
    struct bfs_cluster *cl = lk->cl;
    pthread_mutex_lock(&cl->timers_lock);
    lk->held_next = cl->held;
    cl->held = lk;
    pthread_mutex_unlock(&cl->timers_lock);
}

static void held_del(struct bfs_txn_lock *lk)
{
    struct bfs_cluster *cl = lk->cl;
    pthread_mutex_lock(&cl->timers_lock);
    for (struct bfs_txn_lock **p = &cl->held; *p; p = &(*p)->held_next) {
        if (*p == lk) {
            *p = lk->held_next;
            break;
        }
    }
    lk->held_next = NULL;
    pthread_mutex_unlock(&cl->timers_lock);
}

/* ---- posting ---- */

static void post(struct bfs_cluster *cl, bfs_task_fn fn, void *arg)
{
    if (!cl->loop || bfs_loop_post(cl->loop, fn, arg) < 0)
        fn(arg); /* no loop (or ENOMEM): run here rather than never */
}


static void admit_task(void *arg)
{
    bfs__txn_admit(arg);
}

void bfs__txn_post_list(struct bfs_cluster *cl, struct bfs_txn *list)
{
    while (list) {
        struct bfs_txn *next = list->next;
        list->next = NULL;
        post(cl, admit_task, list);
        list = next;
    }
}

void bfs__txn_post_after(struct bfs_cluster *cl, struct bfs_txn_after *a)
{
    while (a) {
        struct bfs_txn_after *next = a->next;
        post(cl, a->fn, a->arg);
        free(a);
        a = next;
    }
}

/* ---- the lock object ---- */

void bfs_txn_lock_init(struct bfs_txn_lock *lk, struct bfs_cluster *cl, int type, bool shared)
{
    memset(lk, 0, sizeof(*lk));
    pthread_mutex_init(&lk->m, NULL);
    lk->cl = cl;
    lk->type = type;
    lk->shared = shared;
}

enum bfs_txn_lock_state bfs_txn_lock_state(struct bfs_txn_lock *lk)
{
    pthread_mutex_lock(&lk->m);
    enum bfs_txn_lock_state s = lk->state;
    pthread_mutex_unlock(&lk->m);
    return s;
}

/* Takes the holder identity for t's target. lk->m held. */
int bfs__txn_holder_setup(struct bfs_txn_lock *lk, const struct bfs_txn *t)
{
    const struct bfs_txn_target *tg = &t->target;
    struct bfs_cluster *cl = lk->cl;
    lk->stack = bfs_stack_new();
    lk->top = lk->stack ? bfs_frame_top_new(lk->stack, NULL) : NULL;
    if (!lk->top)
        goto nomem;
    lk->stack->lk_owner = bfs_txn_owner_new(lk);
    lk->nsets = 0;
    for (int s = 0; s < tg->nsets; s++) {
        const char *dom = cl->domain[t->type];
        if (bfs_lkset_init(&lk->sets[s], tg->lk[s].kind, dom, &tg->lk[s].gfid,
                           tg->lk[s].name) < 0)
            goto nomem;
        lk->sets[s].shared = t->readonly && tg->lk[s].kind == BFS_LKSET_INODE;
        lk->nsets++;
    }
    lk->nobj = tg->nobj;
    memcpy(lk->obj, tg->obj, sizeof(lk->obj));
    lk->fd = tg->fd ? bfs_fd_ref(tg->fd) : NULL;
    lk->fd_open = tg->fd ? tg->fd_open : 0;
    lk->inode = tg->inode ? bfs_inode_ref(tg->inode) : NULL;
    lk->set = lk->dirtied = 0;
    lk->keep_dirty = false;
    lk->ro_window = t->readonly;
    lk->window++;
    lk->since_ms = bfs_now_ms();
    __atomic_store_n(&lk->owner, lk->stack->lk_owner, __ATOMIC_RELAXED);
    if (lk->shared && lk->inode)
        held_add(lk);
    return 0;
nomem:
    for (int s = 0; s < lk->nsets; s++)
        bfs_lkset_clear(&lk->sets[s]);
    lk->nsets = 0;
    bfs_frame_top_free(lk->top);
    bfs_stack_unref(lk->stack);
    lk->top = NULL;
    lk->stack = NULL;
    return -ENOMEM;
}

/* Moves the holder identity out (for freeing once no call uses it) and
 * makes lk FREE. Returns the waiting list and after callbacks. lk->m held. */
void bfs__txn_holder_drop(struct bfs_txn_lock *lk, struct bfs_stack **stack,
                          struct bfs_frame **top, struct bfs_fd **fd, struct bfs_inode **inode,
                          struct bfs_txn **waiting, struct bfs_txn_after **after)
{
    if (lk->shared && lk->inode)
        held_del(lk); /* before the inode reference can go */
    __atomic_store_n(&lk->owner, 0, __ATOMIC_RELAXED);
    *stack = lk->stack;
    *top = lk->top;
    *fd = lk->fd;
    *inode = lk->inode;
    for (int s = 0; s < lk->nsets; s++)
        bfs_lkset_clear(&lk->sets[s]);
    lk->nsets = 0;
    lk->stack = NULL;
    lk->top = NULL;
    lk->fd = NULL;
    lk->inode = NULL;
    lk->set = lk->dirtied = lk->fd_open = 0;
    lk->keep_dirty = lk->release_now = lk->ro_window = false;
    lk->state = BFS_TXL_FREE;
    *waiting = lk->waiting;
    lk->waiting = NULL;
    /* those waiting for the release to start run with those waiting for
     * its end (a failed acquisition frees the lock without a release) */
    struct bfs_txn_after **tail = &lk->started;
    while (*tail)
        tail = &(*tail)->next;
    *tail = lk->after;
    *after = lk->started;
    lk->after = lk->started = NULL;
}

/* ---- delayed post-op timer ---- */

static void release_task(void *arg)
{
    bfs__txn_start_release(arg);
}

static void timer_fire(void *arg)
{
    struct bfs_txn_timer *tm = arg;
    struct bfs_txn_lock *lk = tm->lk;
    struct bfs_cluster *cl = lk->cl;
    pthread_mutex_lock(&cl->timers_lock);
    if (tm->cancelled) {
        pthread_mutex_unlock(&cl->timers_lock);
        free(tm);
        return;
    }
    cl->timers_running++;
    pthread_mutex_unlock(&cl->timers_lock);

    bool release = false;
    pthread_mutex_lock(&lk->m);
    if (lk->timer == tm) {
        lk->timer = NULL;
        if (lk->state == BFS_TXL_HELD && !lk->active) {
            lk->state = BFS_TXL_RELEASING;
            release = true;
        }
    }
    pthread_mutex_unlock(&lk->m);
    /* the release runs on its own task, not inside this callback: if its
     * calls answer at once and it drops the last reference of the inode,
     * forget runs bfs_txn_lock_fini, which waits for timer callbacks to end
     * (this one). The RELEASING lock keeps its inode meanwhile. */
    if (release)
        post(cl, release_task, lk);
    free(tm);
    pthread_mutex_lock(&cl->timers_lock);
    cl->timers_running--;
    pthread_cond_broadcast(&cl->timers_cond);
    pthread_mutex_unlock(&cl->timers_lock);
}

/* lk->m held. false if no timer could be armed. */
bool bfs__txn_timer_arm(struct bfs_txn_lock *lk, uint64_t ms)
{
    struct bfs_txn_timer *tm = calloc(1, sizeof(*tm));
    if (!tm || !lk->cl->loop) {
        free(tm);
        return false;
    }
    tm->lk = lk;
    lk->timer = tm;
    tm->h = bfs_timer_add(lk->cl->loop, ms, timer_fire, tm);
    if (!tm->h) {
        lk->timer = NULL;
        free(tm);
        return false;
    }
    return true;
}

/* lk->m held. A callback already firing sees lk->timer changed (or the
 * cancelled flag) and does nothing. */
void bfs__txn_timer_disarm(struct bfs_txn_lock *lk)
{
    struct bfs_txn_timer *tm = lk->timer;
    struct bfs_cluster *cl = lk->cl;
    if (!tm)
        return;
    lk->timer = NULL;
    pthread_mutex_lock(&cl->timers_lock);
    tm->cancelled = true;
    pthread_mutex_unlock(&cl->timers_lock);
    if (bfs_timer_cancel(cl->loop, tm->h) == 1)
        free(tm);
}

void bfs_txn_timers_quiesce(struct bfs_cluster *cl)
{
    pthread_mutex_lock(&cl->timers_lock);
    while (cl->timers_running > 0)
        pthread_cond_wait(&cl->timers_cond, &cl->timers_lock);
    pthread_mutex_unlock(&cl->timers_lock);
}

void bfs_txn_lock_fini(struct bfs_txn_lock *lk)
{
    struct bfs_stack *stack;
    struct bfs_frame *top;
    struct bfs_fd *fd;
    struct bfs_inode *inode;
    struct bfs_txn *waiting;
    struct bfs_txn_after *after;
    pthread_mutex_lock(&lk->m);
    bfs__txn_timer_disarm(lk);
    bool held = lk->state != BFS_TXL_FREE;
    bfs__txn_holder_drop(lk, &stack, &top, &fd, &inode, &waiting, &after);
    pthread_mutex_unlock(&lk->m);
    bfs_txn_timers_quiesce(lk->cl);
    if (held)
        XL_WARN(lk->cl->xl, "an eager lock was still held at teardown");
    while (after) {
        struct bfs_txn_after *next = after->next;
        free(after);
        after = next;
    }
    bfs_frame_top_free(top);
    bfs_stack_unref(stack);
    /* fd and inode: a forgotten inode's lock holds none (its ref would have
     * kept it); at teardown they are going away with the tables. */
    (void)fd;
    (void)inode;
    (void)waiting;
    pthread_mutex_destroy(&lk->m);
}

/* ---- stage helpers: changelog xattrops ---- */

/* What one changelog stage sends to child i about object o. */
struct cl_stage {
    int64_t dirty, by;
    uint32_t blame;
    bool read_row;
    bool unacked; /* build_unacked instead of build */
};

static struct bfs_dict *stage_xattrs(const struct bfs_txn_lock *lk, const struct cl_stage *g,
                                     int o, int i)
{
    struct bfs_cluster *cl = lk->cl;
    if (g->unacked)
        return cl->cl->build_unacked(cl->cl_arg, lk->type, i);
    return cl->cl->build(cl->cl_arg, lk->type, i, g->dirty, g->blame, g->by,
                         g->read_row && o == 0);
}

/* One xattrop per (child of mask, object) as g says, xdata (may be NULL)
 * on every call. */
static void wind_stage_x(struct bfs_txn_lock *lk, struct bfs_op *op, uint32_t mask,
                         const struct cl_stage *g, struct bfs_dict *xdata)
{
    struct bfs_cluster *cl = lk->cl;
    struct bfs_dict *x[2][BFS_CLUSTER_MAX] = {{0}};
    int count = 0;
    bfs_op_reset_replies(op);
    for (int o = 0; o < lk->nobj; o++) {
        for (int i = 0; i < cl->n; i++) {
            if (!bfs_mask_has(mask, i))
                continue;
            x[o][i] = stage_xattrs(lk, g, o, i);
            if (x[o][i]) {
                count++;
            } else {
                struct bfs_op_reply *r = &op->replies[o * cl->n + i];
                r->valid = true;
                r->rc = -ENOMEM;
                r->fop = BFS_FOP_XATTROP;
            }
        }
    }
    bfs_op_expect(op, count);
    for (int o = 0; o < lk->nobj; o++) {
        for (int i = 0; i < cl->n; i++) {
            if (!x[o][i])
                continue;
            struct bfs_xl *child = cl->xl->children[i];
            if (o == 0 && lk->fd && bfs_mask_has(lk->fd_open, i)) {
                struct bfs_fxattrop_req req = {.fd = lk->fd, .optype = BFS_XATTROP_ADD64,
                                               .xattrs = x[o][i], .xdata = xdata};
                bfs_op_wind(op, o * cl->n + i, BFS_FOP_FXATTROP, child, &req);
            } else {
                struct bfs_xattrop_req req = {.optype = BFS_XATTROP_ADD64, .xattrs = x[o][i],
                                              .xdata = xdata};
                req.loc.gfid = lk->obj[o];
                bfs_op_wind(op, o * cl->n + i, BFS_FOP_XATTROP, child, &req);
            }
            bfs_dict_unref(x[o][i]);
        }
    }
}

static void wind_stage(struct bfs_txn_lock *lk, struct bfs_op *op, uint32_t mask,
                       const struct cl_stage *g)
{
    wind_stage_x(lk, op, mask, g, NULL);
}

void bfs__txn_wind_changelog_x(struct bfs_txn_lock *lk, struct bfs_op *op, uint32_t mask,
                               int64_t dirty, uint32_t blame, int64_t by, bool read_row,
                               struct bfs_dict *xdata)
{
    struct cl_stage g = {.dirty = dirty, .by = by, .blame = blame, .read_row = read_row};
    wind_stage_x(lk, op, mask, &g, xdata);
}

void bfs__txn_wind_changelog(struct bfs_txn_lock *lk, struct bfs_op *op, uint32_t mask,
                           int64_t dirty, uint32_t blame, int64_t by, bool read_row)
{
    bfs__txn_wind_changelog_x(lk, op, mask, dirty, blame, by, read_row, NULL);
}

bool bfs__txn_marks_unacked(const struct bfs_txn_lock *lk)
{
    const struct bfs_changelog_ops *ops = lk->cl->cl;
    return ops->build_unacked && (ops->unacked_types & BFS_BIT(lk->type));
}

void bfs__txn_wind_unacked(struct bfs_txn_lock *lk, struct bfs_op *op, uint32_t mask)
{
    struct cl_stage g = {.unacked = true};
    wind_stage(lk, op, mask, &g);
}

/* Children of mask whose xattrop succeeded on every object. */
uint32_t bfs__txn_changelog_ok(const struct bfs_txn_lock *lk, const struct bfs_op *op,
                             uint32_t mask)
{
    uint32_t ok = 0;
    int n = lk->cl->n;
    for (int i = 0; i < n; i++) {
        if (!bfs_mask_has(mask, i))
            continue;
        bool all = true;
        for (int o = 0; o < lk->nobj; o++) {
            const struct bfs_op_reply *r = &op->replies[o * n + i];
            all = all && r->valid && r->rc >= 0;
        }
        if (all)
            ok |= BFS_BIT(i);
    }
    return ok;
}

int bfs__txn_locks_step(struct bfs_txn_lock *lk, struct bfs_op *op, int *sub, bool lock)
{
    while (*sub < lk->nsets) {
        int s = lock ? *sub : lk->nsets - 1 - *sub;
        uint32_t want = s == 0 ? bfs_cluster_up(lk->cl) : lk->sets[s - 1].locked;
        int r = lock ? bfs_lkset_lock(&lk->sets[s], op, want)
                     : bfs_lkset_unlock(&lk->sets[s], op);
        if (r != BFS_LK_DONE)
            return r;
        (*sub)++;
    }
    *sub = 0;
    return BFS_LK_DONE;
}

uint32_t bfs__txn_locked_all(const struct bfs_txn_lock *lk)
{
    uint32_t m = lk->nsets ? ~0u : 0;
    for (int s = 0; s < lk->nsets; s++)
        m &= lk->sets[s].locked;
    return m;
}

/* ---- the release op (shared locks) ---- */

static void release_destroy(struct bfs_op *op)
{
    struct txn_release *r = (struct txn_release *)op;
    bfs_frame_top_free(r->top);
    bfs_stack_unref(r->stack);
    if (r->fd)
        bfs_fd_unref(r->fd);
    struct bfs_inode *inode = r->inode;
    struct bfs_cluster *cl = r->lk->cl;
    free(r);
    if (inode)
        bfs_inode_unref(inode); /* may free the context the lock lives in */
    bfs__txn_live_add(cl, -1);
}

static int release_step(struct bfs_op *op)
{
    struct txn_release *r = (struct txn_release *)op;
    struct bfs_txn_lock *lk = r->lk;
    switch (op->state) {
    case R_POSTOP: {
        uint32_t clear = lk->keep_dirty ? 0 : lk->set & lk->dirtied;
        op->state = R_POSTOP_DONE;
        if (clear) {
            bfs__txn_wind_postop(lk, op, clear);
            return BFS_OP_WAIT;
        }
        bfs_op_reset_replies(op);
        return BFS_OP_CONTINUE;
    }
    case R_POSTOP_DONE:
        bfs__txn_postop_unlocked(lk, op); /* those need no unlock of their own */
        bfs__txn_postop_announce(lk, op);
        bfs_op_reset_replies(op); /* a failed post-op leaves a dirty mark: healed later */
        op->state = R_UNLOCK;
        return BFS_OP_CONTINUE;
    case R_UNLOCK: {
        int rc = bfs__txn_locks_step(lk, op, &r->sub, false);
        if (rc != BFS_LK_DONE)
            return rc;
        struct bfs_txn *waiting;
        struct bfs_txn_after *after;
        pthread_mutex_lock(&lk->m);
        bfs__txn_holder_drop(lk, &r->stack, &r->top, &r->fd, &r->inode, &waiting, &after);
        pthread_mutex_unlock(&lk->m);
        bfs__txn_post_list(lk->cl, waiting);
        bfs__txn_post_after(lk->cl, after);
        return BFS_OP_DONE;
    }
    }
    return BFS_OP_DONE;
}

static void release_retry(void *arg)
{
    bfs__txn_start_release(arg);
}

/* lk is RELEASING: post-op and unlock on an op of its own. */
void bfs__txn_start_release(struct bfs_txn_lock *lk)
{
    struct bfs_cluster *cl = lk->cl;
    struct txn_release *r = calloc(1, sizeof(*r));
    if (!r || bfs_op_init(&r->op, lk->top, cl->xl, cl->n * 2, release_step,
                          release_destroy) < 0) {
        free(r);
        XL_WARN(cl->xl, "no memory to release a lock; trying again");
        pthread_mutex_lock(&lk->m);
        bool armed = false;
        if (cl->loop) {
            struct bfs_timer *h = bfs_timer_add(cl->loop, 100, release_retry, lk);
            armed = h != NULL;
        }
        pthread_mutex_unlock(&lk->m);
        if (!armed)
            XL_ERR(cl->xl, "cannot release a lock: it stays held");
        return;
    }
    r->lk = lk;
    r->op.state = R_POSTOP;
    bfs__txn_live_add(cl, 1);
    pthread_mutex_lock(&lk->m);
    struct bfs_txn_after *started = lk->started;
    lk->started = NULL;
    pthread_mutex_unlock(&lk->m);
    bfs__txn_post_after(cl, started); /* posted: they run after the post-op is wound */
    bfs_op_run(&r->op);
}

/* bfs_txn_lock_flush (started false: fn when FREE) and
 * bfs_txn_lock_flush_started (fn when the release has started). */
static int lock_flush(struct bfs_txn_lock *lk, bfs_task_fn fn, void *arg, bool started)
{
    struct bfs_txn_after *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->fn = fn;
    a->arg = arg;
    pthread_mutex_lock(&lk->m);
    if (lk->state == BFS_TXL_FREE || (started && lk->state == BFS_TXL_RELEASING)) {
        pthread_mutex_unlock(&lk->m);
        free(a);
        return 0;
    }
    lk->release_now = true;
    bool idle = lk->state == BFS_TXL_HELD && !lk->active;
    if (idle) {
        bfs__txn_timer_disarm(lk);
        lk->state = BFS_TXL_RELEASING;
    }
    /* a readers' window has nothing to post-op: released soon, not waited
     * for; one that starts its release here has started it on return */
    bool now = lk->ro_window || (started && idle);
    if (!now) {
        struct bfs_txn_after **list = started ? &lk->started : &lk->after;
        a->next = *list;
        *list = a;
    }
    pthread_mutex_unlock(&lk->m);
    if (idle)
        bfs__txn_start_release(lk);
    if (now)
        free(a);
    return now ? 0 : 1;
}

int bfs_txn_lock_flush(struct bfs_txn_lock *lk, bfs_task_fn fn, void *arg)
{
    return lock_flush(lk, fn, arg, false);
}

int bfs_txn_lock_flush_started(struct bfs_txn_lock *lk, bfs_task_fn fn, void *arg)
{
    return lock_flush(lk, fn, arg, true);
}

static void noop_task(void *arg)
{
    (void)arg;
}

struct bfs__txn_held *bfs__txn_held_refs(struct bfs_cluster *cl, size_t *np)
{
    struct bfs__txn_held *v = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&cl->timers_lock);
    for (struct bfs_txn_lock *lk = cl->held; lk; lk = lk->held_next) {
        if (n == cap) {
            struct bfs__txn_held *nv = realloc(v, (cap = cap ? 2 * cap : 16) * sizeof(*v));
            if (!nv)
                break;
            v = nv;
        }
        v[n].lk = lk;
        v[n++].inode = bfs_inode_ref(lk->inode); /* keeps lk's context alive */
    }
    pthread_mutex_unlock(&cl->timers_lock);
    *np = n;
    return v;
}

int bfs_txn_quiesce(struct bfs_cluster *cl, uint64_t timeout_ms)
{
    size_t n;
    struct bfs__txn_held *v = bfs__txn_held_refs(cl, &n);
    for (size_t i = 0; i < n; i++) {
        (void)bfs_txn_lock_flush(v[i].lk, noop_task, NULL);
        bfs_inode_unref(v[i].inode);
    }
    free(v);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(timeout_ms / 1000);
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    int rc = 0;
    pthread_mutex_lock(&cl->timers_lock);
    while (cl->live > 0 && rc == 0)
        rc = pthread_cond_timedwait(&cl->timers_cond, &cl->timers_lock, &until);
    int left = cl->live;
    pthread_mutex_unlock(&cl->timers_lock);
    if (left)
        XL_WARN(cl->xl, "%d transactions still in flight after %llu ms", left,
                (unsigned long long)timeout_ms);
    return left ? -ETIMEDOUT : 0;
}
