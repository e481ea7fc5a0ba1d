/*
 * fanout.c — the fan-out/gather driver (see fanout.h for the contract).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/fanout.h"
#include "core/fops-util.h"

int bfs_op_init(struct bfs_op *op, struct bfs_frame *frame, struct bfs_xl *xl, int n,
                bfs_op_step_fn step, void (*destroy)(struct bfs_op *op))
{
    op->replies = calloc(n > 0 ? n : 1, sizeof(*op->replies));
    if (!op->replies)
        return -ENOMEM;
    op->n = n;
    op->frame = frame;
    op->xl = xl;
    op->step = step;
    op->destroy = destroy;
    op->refs = 1;
    op->pending = 0;
    op->running = false;
    op->finished = false;
    op->any = false;
    op->arrived = 0;
    op->staged = NULL;
    op->ready = NULL;
    pthread_mutex_init(&op->lock, NULL);
    return 0;
}

void bfs_op_ref(struct bfs_op *op)
{
    pthread_mutex_lock(&op->lock);
    op->refs++;
    pthread_mutex_unlock(&op->lock);
}

static void clear_reply(struct bfs_op_reply *r)
{
    if (r->rep) {
        bfs_fop_info[r->fop].rep_clear_dup(r->rep);
        free(r->rep);
    }
    memset(r, 0, sizeof(*r));
}

void bfs_op_reset_replies(struct bfs_op *op)
{
    for (int i = 0; i < op->n; i++)
        clear_reply(&op->replies[i]);
}

int bfs_op_early(struct bfs_op *op)
{
    int n = op->n > 0 ? op->n : 1;
    op->staged = calloc(n, sizeof(*op->staged));
    op->ready = calloc(n, sizeof(*op->ready));
    if (!op->staged || !op->ready) {
        free(op->staged);
        free(op->ready);
        op->staged = NULL;
        op->ready = NULL;
        return -ENOMEM;
    }
    return 0;
}

/* Under op->lock: hands the complete staged answers over to op->replies. */
static void take_staged(struct bfs_op *op)
{
    for (int i = 0; i < op->n; i++) {
        if (!op->ready[i])
            continue;
        clear_reply(&op->replies[i]);
        op->replies[i] = op->staged[i];
        memset(&op->staged[i], 0, sizeof(op->staged[i]));
        op->ready[i] = false;
    }
}

void bfs_op_unref(struct bfs_op *op)
{
    pthread_mutex_lock(&op->lock);
    int left = --op->refs;
    pthread_mutex_unlock(&op->lock);
    if (left)
        return;
    bfs_op_reset_replies(op);
    free(op->replies);
    if (op->staged) { /* answers that came after the op was done */
        for (int i = 0; i < op->n; i++)
            clear_reply(&op->staged[i]);
        free(op->staged);
        free(op->ready);
    }
    pthread_mutex_destroy(&op->lock);
    if (op->destroy)
        op->destroy(op);
}

void bfs_op_run(struct bfs_op *op)
{
    pthread_mutex_lock(&op->lock);
    if (op->running || op->finished) { /* the active driver will see the answer */
        pthread_mutex_unlock(&op->lock);
        return;
    }
    op->running = true;
    op->any = false;
    pthread_mutex_unlock(&op->lock);
    for (;;) {
        unsigned seen = 0;
        if (op->staged) { /* set before the first wind, never changed */
            pthread_mutex_lock(&op->lock);
            take_staged(op);
            seen = op->arrived;
            pthread_mutex_unlock(&op->lock);
        }
        int next = op->step(op);
        if (next == BFS_OP_CONTINUE)
            continue;
        if (next == BFS_OP_WAIT_ANY && !op->staged)
            next = BFS_OP_WAIT; /* answers land in place: the step must wait for all */
        pthread_mutex_lock(&op->lock);
        if ((next == BFS_OP_WAIT || next == BFS_OP_WAIT_ANY) && op->pending == 0) {
            pthread_mutex_unlock(&op->lock); /* everyone answered during the step */
            continue;
        }
        if (next == BFS_OP_WAIT_ANY && op->arrived != seen) {
            pthread_mutex_unlock(&op->lock); /* someone answered during the step */
            continue;
        }
        op->running = false;
        op->any = next == BFS_OP_WAIT_ANY;
        op->finished = next == BFS_OP_DONE;
        pthread_mutex_unlock(&op->lock);
        if (next == BFS_OP_DONE)
            bfs_op_unref(op);
        return;
    }
}

void bfs_op_expect(struct bfs_op *op, int count)
{
    pthread_mutex_lock(&op->lock);
    op->pending += count;
    op->refs += count; /* one per outstanding child call */
    pthread_mutex_unlock(&op->lock);
}

/* slot: the staged answer now complete, or -1 (answer written in place). */
static void child_done(struct bfs_op *op, int slot)
{
    pthread_mutex_lock(&op->lock);
    if (slot >= 0)
        op->ready[slot] = true;
    op->arrived++;
    bool resume = (--op->pending == 0 || op->any) && !op->running && !op->finished;
    if (resume)
        op->any = false; /* one resumer: the others find it running */
    pthread_mutex_unlock(&op->lock);
    if (resume)
        bfs_op_run(op); /* our reference keeps op alive meanwhile */
    bfs_op_unref(op);   /* the child call's reference */
}

struct wind_cookie {
    struct bfs_op *op;
    int slot;
};

static void op_child_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc,
                         const void *rep)
{
    (void)frame;
    struct wind_cookie *c = cookie;
    struct bfs_op_reply *r = c->op->staged ? &c->op->staged[c->slot] : &c->op->replies[c->slot];
    clear_reply(r);
    r->valid = true;
    r->rc = rc;
    r->fop = fop;
    r->rep = malloc(bfs_fop_info[fop].rep_size);
    if (r->rep && bfs_fop_info[fop].rep_copy_into(r->rep, rep) < 0) {
        free(r->rep);
        r->rep = NULL;
    }
    if (!r->rep && rc >= 0)
        r->rc = -ENOMEM;
    struct bfs_op *o = c->op;
    int staged = o->staged ? c->slot : -1;
    free(c);
    child_done(o, staged);
}

void bfs_op_wind(struct bfs_op *op, int i, int fop, struct bfs_xl *child, const void *req)
{
    struct wind_cookie *c = malloc(sizeof(*c));
    int rc = -ENOMEM;
    if (c) {
        c->op = op;
        c->slot = i;
        rc = bfs_wind_any(fop, op->frame, child, op_child_cbk, c, req);
    }
    if (rc < 0) {
        free(c);
        bfs_op_answer(op, i, fop, rc);
    }
}

void bfs_op_answer(struct bfs_op *op, int i, int fop, int rc)
{
    struct bfs_op_reply *r = op->staged ? &op->staged[i] : &op->replies[i];
    clear_reply(r);
    r->valid = true;
    r->rc = rc;
    r->fop = fop;
    child_done(op, op->staged ? i : -1);
}

int bfs_op_count_ok(const struct bfs_op *op)
{
    int n = 0;
    for (int i = 0; i < op->n; i++)
        n += op->replies[i].valid && op->replies[i].rc >= 0;
    return n;
}

int bfs_op_first_ok(const struct bfs_op *op)
{
    for (int i = 0; i < op->n; i++)
        if (op->replies[i].valid && op->replies[i].rc >= 0)
            return i;
    return -1;
}

int bfs_op_first_error(const struct bfs_op *op)
{
    for (int i = 0; i < op->n; i++)
        if (op->replies[i].valid && op->replies[i].rc < 0)
            return op->replies[i].rc;
    return 0;
}
