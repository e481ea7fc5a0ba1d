/*
 * fanout.h — the one driver for cluster translators' fan-out/gather.
 *
 * A cluster fop is a small state machine (struct bfs_op embedded first in the
 * translator's typed op struct). Its step function runs one stage and says
 * what comes next:
 *
 *   static int rep_write_step(struct bfs_op *op) {
 *       switch (op->state) {
 *       case DISPATCH:
 *           bfs_op_expect(op, n);                     // before the first wind
 *           for (i...) bfs_op_wind(op, i, BFS_FOP_WRITE, child[i], &req);
 *           op->state = COMBINE;
 *           return BFS_OP_WAIT;                       // step again when all answered
 *       case COMBINE: ... pure function over op->replies ...; return BFS_OP_DONE;
 *       }
 *   }
 *
 * Guarantees: the step never runs on two threads at once and is never
 * re-entered: a child that answers synchronously (inside bfs_op_wind) only
 * records its reply; the driver notices when the step returns. Each
 * outstanding child call holds a reference, so an op that finishes early
 * (BFS_OP_DONE with calls in flight) is freed only after the last answer;
 * its step never runs again.
 *
 * Early answers (opt-in, bfs_op_early before the first wind): a step may
 * return BFS_OP_WAIT_ANY to run again as soon as any further answer has
 * arrived, not only when all have (e.g. a lookup answering on a quorum of
 * agreeing replies while the others are in flight). Such an op's answers
 * are staged as they arrive and moved into op->replies by the driver just
 * before each step, so a step always reads a stable set of slots: a slot
 * is either not valid yet or complete, and does not change under the step.
 * Ops that do not opt in behave as before (their answers land in
 * op->replies directly; a WAIT_ANY of theirs is taken as WAIT).
 */
#ifndef BFS_CORE_FANOUT_H
#define BFS_CORE_FANOUT_H

#include <pthread.h>
#include <stdbool.h>

#include "core/xlator.h"

enum { BFS_OP_WAIT = 0, BFS_OP_CONTINUE = 1, BFS_OP_DONE = 2, BFS_OP_WAIT_ANY = 3 };

struct bfs_op_reply {
    bool valid;  /* an answer (or a wind error) was recorded this stage */
    int rc;
    int fop;
    void *rep;   /* deep copy of the reply (bfs_fop_info[fop].rep_size), or NULL */
};

struct bfs_op;
typedef int (*bfs_op_step_fn)(struct bfs_op *op);

struct bfs_op {
    int state;                    /* the translator's own state enum */
    int n;                        /* number of reply slots */
    struct bfs_op_reply *replies; /* [n] */
    struct bfs_frame *frame;      /* the frame this op will unwind */
    struct bfs_xl *xl;
    bfs_op_step_fn step;
    void (*destroy)(struct bfs_op *op); /* frees the embedding struct */
    /* private */
    pthread_mutex_t lock;
    int refs;
    int pending;
    bool running;
    bool finished;                /* the step returned BFS_OP_DONE */
    bool any;                     /* the step returned BFS_OP_WAIT_ANY: resume on any answer */
    unsigned arrived;             /* answers so far (all stages) */
    struct bfs_op_reply *staged;  /* [n], bfs_op_early only: answers not yet handed over */
    bool *ready;                  /* [n]: staged[i] is complete (under lock) */
};

/* One reference for the caller. 0 or -ENOMEM. */
int bfs_op_init(struct bfs_op *op, struct bfs_frame *frame, struct bfs_xl *xl, int n,
                bfs_op_step_fn step, void (*destroy)(struct bfs_op *op));
void bfs_op_ref(struct bfs_op *op);
void bfs_op_unref(struct bfs_op *op);

/* Runs steps until one waits or the op is done. Consumes the caller's
 * reference when the op reaches BFS_OP_DONE. */
void bfs_op_run(struct bfs_op *op);

/* Opts op into early answers (see the top of this file): call before the
 * first wind. 0 or -ENOMEM. */
int bfs_op_early(struct bfs_op *op);

/* Number of child calls the current stage will make; call before winding. */
void bfs_op_expect(struct bfs_op *op, int count);
/* Winds fop to child for slot i; the answer lands in op->replies[i]. A wind
 * that fails records its rc as the answer. */
void bfs_op_wind(struct bfs_op *op, int i, int fop, struct bfs_xl *child, const void *req);
/* Records rc as the answer of slot i, counted as one of the calls the
 * stage expected (bfs_op_expect), for an answer that does not come from a
 * child call (e.g. a sub-op of the translator's own). No reply struct. */
void bfs_op_answer(struct bfs_op *op, int i, int fop, int rc);
/* Clears all reply slots (between stages, with no call of the op in flight). */
void bfs_op_reset_replies(struct bfs_op *op);

/* Helpers for combine steps. */
int bfs_op_count_ok(const struct bfs_op *op);          /* valid && rc >= 0 */
int bfs_op_first_ok(const struct bfs_op *op);          /* index or -1 */
int bfs_op_first_error(const struct bfs_op *op);       /* rc of first failure, or 0 */

#endif
