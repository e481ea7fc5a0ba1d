/*
 * healq.h — the heal queue of a cluster translator: one thread that runs
 * heal jobs one at a time as straight-line code over blocking calls (the
 * heal is the cold path), fed by lookups.
 *
 *   background  a job is queued (at most `limit`; a job for the same
 *               object merges into a waiting one) and the caller goes on;
 *   foreground  the job carries whatever it must answer when done (a
 *               lookup frame); it is never refused for being over limit.
 *
 * Jobs are fixed-size structs of the translator's own type, copied in.
 * Lifetimes: the queue from bfs_healq_start() to bfs_healq_stop(), which
 * joins the thread and hands every job never run to `drop` (which must
 * answer a foreground job's frame).
 */
#ifndef BFS_XL_LIB_HEALQ_H
#define BFS_XL_LIB_HEALQ_H

#include <stdbool.h>
#include <stddef.h>

struct bfs_healq;

struct bfs_healq_ops {
    void (*run)(void *owner, void *job);  /* on the heal thread */
    void (*drop)(void *owner, void *job); /* a job that will never run */
    /* Merges `job` into the waiting background job `queued` if they are
     * about the same object (then true). NULL: never merges. */
    bool (*merge)(void *queued, const void *job);
};

/* 0, or -errno (no thread). */
int bfs_healq_start(struct bfs_healq **out, void *owner, size_t job_size,
                    const struct bfs_healq_ops *ops);
void bfs_healq_stop(struct bfs_healq *q);
/* Queues a copy of job. 0 queued or merged; -EBUSY: a background job over
 * limit (dropped: the next access asks again); -ENOMEM, -ENOTCONN (stopping). */
int bfs_healq_push(struct bfs_healq *q, const void *job, bool foreground, size_t limit);
size_t bfs_healq_queued(struct bfs_healq *q);
/* True once bfs_healq_stop() began: a running job should give up waiting. */
bool bfs_healq_stopping(struct bfs_healq *q);

#endif
