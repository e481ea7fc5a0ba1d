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

void bfs_op_unref(struct bfs_op *op)
{
    pthread_mutex_lock(&op->lock);
    int left = --op->refs;
    pthread_mutex_unlock(&op->lock);
    if (left)
        return;
    bfs_op_reset_replies(op);
    free(op->replies);
    pthread_mutex_destroy(&op->lock);
    if (op->destroy)
        op->destroy(op);
}

void bfs_op_run(struct bfs_op *op)
{
    pthread_mutex_lock(&op->lock);
    if (op->running) { /* the active driver will see pending == 0 */
        pthread_mutex_unlock(&op->lock);
        return;
    }
    op->running = true;
    pthread_mutex_unlock(&op->lock);
    for (;;) {
        int next = op->step(op);
        if (next == BFS_OP_CONTINUE)
            continue;
        pthread_mutex_lock(&op->lock);
        if (next == BFS_OP_WAIT && op->pending == 0) {
            pthread_mutex_unlock(&op->lock); /* everyone answered during the step */
            continue;
        }
        op->running = false;
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

static void child_done(struct bfs_op *op)
{
    pthread_mutex_lock(&op->lock);
    bool resume = --op->pending == 0 && !op->running;
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
    struct bfs_op_reply *r = &c->op->replies[c->slot];
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
    free(c);
    child_done(o);
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
        struct bfs_op_reply *r = &op->replies[i];
        clear_reply(r);
        r->valid = true;
        r->rc = rc;
        r->fop = fop;
        child_done(op);
    }
}

void bfs_op_answer(struct bfs_op *op, int i, int fop, int rc)
{
    struct bfs_op_reply *r = &op->replies[i];
    clear_reply(r);
    r->valid = true;
    r->rc = rc;
    r->fop = fop;
    child_done(op);
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
