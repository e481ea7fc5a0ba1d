/*
 * healq.c — the heal queue and its thread (see healq.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "healq.h"

struct hq_job {
    struct hq_job *next;
    bool foreground;
    _Alignas(16) unsigned char body[];
};

struct bfs_healq {
    void *owner;
    size_t job_size;
    struct bfs_healq_ops ops;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct hq_job *head, *tail;
    size_t queued;
    bool stop;
};

static void *hq_main(void *arg)
{
    struct bfs_healq *q = arg;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        while (!q->head && !q->stop)
            pthread_cond_wait(&q->cond, &q->lock);
        if (q->stop)
            break;
        struct hq_job *j = q->head;
        q->head = j->next;
        if (!q->head)
            q->tail = NULL;
        pthread_mutex_unlock(&q->lock);
        q->ops.run(q->owner, j->body);
        free(j);
        pthread_mutex_lock(&q->lock);
        q->queued--;
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

int bfs_healq_start(struct bfs_healq **out, void *owner, size_t job_size,
                    const struct bfs_healq_ops *ops)
{
    struct bfs_healq *q = calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    q->owner = owner;
    q->job_size = job_size;
    q->ops = *ops;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->cond, NULL);
    int rc = pthread_create(&q->thread, NULL, hq_main, q);
    if (rc) {
        pthread_mutex_destroy(&q->lock);
        pthread_cond_destroy(&q->cond);
        free(q);
        return -rc;
    }
    *out = q;
    return 0;
}

void bfs_healq_stop(struct bfs_healq *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    __atomic_store_n(&q->stop, true, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
    pthread_join(q->thread, NULL);
    while (q->head) {
        struct hq_job *j = q->head;
        q->head = j->next;
        q->ops.drop(q->owner, j->body);
        free(j);
    }
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->cond);
    free(q);
}

int bfs_healq_push(struct bfs_healq *q, const void *job, bool foreground, size_t limit)
{
    if (!q)
        return -ENOTCONN;
    pthread_mutex_lock(&q->lock);
    if (q->stop) {
        pthread_mutex_unlock(&q->lock);
        return -ENOTCONN;
    }
    if (!foreground && q->ops.merge) {
        for (struct hq_job *j = q->head; j; j = j->next) {
            if (!j->foreground && q->ops.merge(j->body, job)) {
                pthread_mutex_unlock(&q->lock);
                return 0;
            }
        }
    }
    if (!foreground && q->queued >= limit) {
        pthread_mutex_unlock(&q->lock);
        return -EBUSY;
    }
    struct hq_job *j = calloc(1, sizeof(*j) + q->job_size);
    if (!j) {
        pthread_mutex_unlock(&q->lock);
        return -ENOMEM;
    }
    j->foreground = foreground;
    memcpy(j->body, job, q->job_size);
    if (q->tail)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
    q->queued++;
    pthread_cond_signal(&q->cond);
    pthread_mutex_unlock(&q->lock);
    return 0;
}

size_t bfs_healq_queued(struct bfs_healq *q)
{
    if (!q)
        return 0;
    pthread_mutex_lock(&q->lock);
    size_t n = q->queued;
    pthread_mutex_unlock(&q->lock);
    return n;
}

bool bfs_healq_stopping(struct bfs_healq *q)
{
    return q && __atomic_load_n(&q->stop, __ATOMIC_RELAXED);
}
