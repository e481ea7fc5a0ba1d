/*
 * workers.c — a fixed pool of threads for blocking work (event.h).
 *
 * Tasks go into one FIFO queue guarded by a mutex; idle threads sleep on a
 * condition variable. Tasks are started in submission order; with several
 * threads they may of course finish in any order.
 *
 * Lifetime: bfs_workers_free() sets `stopping` and wakes every thread; a
 * thread exits only when it finds the queue empty, so every task queued
 * before (or by a task during) the drain still runs. free then joins the
 * threads, so it must not be called from a task of the same pool.
 */
#include "core/event.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define WORKERS_MAX 1024

struct task {
    bfs_task_fn fn;
    void *arg;
    struct task *next;
};

struct bfs_workers {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct task *head, *tail;
    bool stopping;
    int nthreads;
    pthread_t *threads;
};

static void *worker_main(void *arg)
{
    struct bfs_workers *w = arg;

    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->head && !w->stopping)
            pthread_cond_wait(&w->cond, &w->lock);
        struct task *t = w->head;
        if (!t)
            break; /* stopping and drained */
        w->head = t->next;
        if (!w->head)
            w->tail = NULL;
        pthread_mutex_unlock(&w->lock);
        t->fn(t->arg);
        free(t);
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

struct bfs_workers *bfs_workers_new(int nthreads, const char *name)
{
    if (nthreads < 1)
        nthreads = 1;
    if (nthreads > WORKERS_MAX)
        nthreads = WORKERS_MAX;
    struct bfs_workers *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->threads = calloc((size_t)nthreads, sizeof(*w->threads));
    if (!w->threads) {
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&w->threads[i], NULL, worker_main, w) != 0) {
            if (i == 0) {
                pthread_cond_destroy(&w->cond);
                pthread_mutex_destroy(&w->lock);
                free(w->threads);
                free(w);
                return NULL;
            }
            break; /* run with the threads we got */
        }
        w->nthreads++;
        if (name) {
            char tname[16];
            snprintf(tname, sizeof(tname), "%.10s-%d", name, i);
            pthread_setname_np(w->threads[i], tname);
        }
    }
    return w;
}

int bfs_workers_submit(struct bfs_workers *w, bfs_task_fn fn, void *arg)
{
    struct task *t = malloc(sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->fn = fn;
    t->arg = arg;
    t->next = NULL;
    pthread_mutex_lock(&w->lock);
    if (w->tail)
        w->tail->next = t;
    else
        w->head = t;
    w->tail = t;
    pthread_mutex_unlock(&w->lock);
    /* After unlocking: a worker woken under the lock would only block on it
     * again (one more context switch per task). The task is queued, so a
     * worker that is not woken by this signal finds it before sleeping. */
    pthread_cond_signal(&w->cond);
    return 0;
}

void bfs_workers_free(struct bfs_workers *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    for (int i = 0; i < w->nthreads; i++)
        pthread_join(w->threads[i], NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w->threads);
    free(w);
}
