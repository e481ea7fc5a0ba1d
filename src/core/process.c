/*
 * process.c — the resources one process shares among its graphs: an event
 * loop running on its own thread and a pool of workers for blocking work.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/event.h"
#include "core/graph.h"

/*
 * Big buffers come and go at every write: write-behind's copy of a 1 MiB
 * write, disperse's 1.5 MiB of fragments, a brick's 1 MiB reply. With
 * glibc's defaults each is either a fresh mmap (at first) or heap memory
 * that free() hands back to the kernel once 2 x the largest such buffer
 * lies free at the top of an arena, so the next one is faulted in again, a
 * zeroed 4 KiB page at a time: 30-120 page faults and 0.1-0.7 ms of the
 * mount's CPU per MiB of a disperse write (performance-notes.md note 47).
 * Here buffers under BFS_HEAP_MMAP_MAX always come from the heap, and an
 * arena keeps up to BFS_HEAP_TRIM free before it gives memory back: the
 * process's resident size stays near its peak use instead.
 */
#define BFS_HEAP_MMAP_MAX (8 << 20)
#define BFS_HEAP_TRIM (64 << 20)

int bfs_proc_keep_heap(void)
{
    if (!mallopt(M_MMAP_THRESHOLD, BFS_HEAP_MMAP_MAX) || !mallopt(M_TRIM_THRESHOLD, BFS_HEAP_TRIM))
        return -EINVAL;
    return 0;
}

struct bfs_proc *bfs_proc_new(const char *program, int nworkers)
{
    struct bfs_proc *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->program = program;
    p->loop = bfs_loop_new();
    if (!p->loop || bfs_loop_start(p->loop, "bfs-loop") < 0)
        goto fail;
    p->nworkers = nworkers;
    if (nworkers > 0 && !(p->workers = bfs_workers_new(nworkers, "bfs-work")))
        goto fail;
    return p;
fail:
    bfs_log(program, BFS_LOG_ERROR, "cannot start the event loop or worker pool");
    bfs_proc_free(p);
    return NULL;
}

void bfs_proc_free(struct bfs_proc *p)
{
    if (!p)
        return;
    if (p->workers)
        bfs_workers_free(p->workers);
    if (p->loop)
        bfs_loop_free(p->loop);
    free(p);
}

struct barrier {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int arrived, want;
    int left; /* tasks done with b: the waiter may free b only when all left */
};

static void barrier_task(void *arg)
{
    struct barrier *b = arg;
    pthread_mutex_lock(&b->lock);
    b->arrived++;
    pthread_cond_broadcast(&b->cond);
    /* hold this worker until every worker is here: then no earlier task
     * can still be running anywhere in the pool */
    while (b->arrived < b->want)
        pthread_cond_wait(&b->cond, &b->lock);
    b->left++;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

/* Returns once every task has left barrier_task: b lives on the caller's
 * stack, and a task still waking up in pthread_cond_wait would touch it. */
static void barrier_wait(struct barrier *b)
{
    pthread_mutex_lock(&b->lock);
    while (b->left < b->want)
        pthread_cond_wait(&b->cond, &b->lock);
    pthread_mutex_unlock(&b->lock);
}

void bfs_proc_quiesce(struct bfs_proc *p)
{
    if (!p)
        return;
    if (p->loop && !bfs_loop_on_loop_thread(p->loop)) {
        struct barrier b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 1, 0};
        if (bfs_loop_post(p->loop, barrier_task, &b) == 0)
            barrier_wait(&b);
    }
    if (p->workers && p->nworkers > 0) {
        struct barrier b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0,
                            p->nworkers, 0};
        int queued = 0;
        for (int i = 0; i < p->nworkers; i++)
            queued += bfs_workers_submit(p->workers, barrier_task, &b) == 0;
        if (queued == p->nworkers)
            barrier_wait(&b);
        /* a failed submit (ENOMEM) leaves us unable to wait safely: give up
         * on the barrier rather than hang */
        else {
            pthread_mutex_lock(&b.lock);
            b.want = queued;
            pthread_cond_broadcast(&b.cond);
            pthread_mutex_unlock(&b.lock);
            barrier_wait(&b);
        }
    }
}
