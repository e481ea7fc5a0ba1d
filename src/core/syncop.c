/*
 * syncop.c — blocking wrappers over asynchronous fops, for daemons, tests
 * and libbrickfs. A call winds from a private top frame and waits on a
 * condition variable until the callback (on whatever thread answers, or
 * inline when the answer is synchronous) has copied the reply.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "core/fops-util.h"

struct sync_wait {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    int rc;
    void *out;
};

static void sync_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    struct sync_wait *w = cookie;
    (void)frame;
    if (w->out && bfs_fop_info[fop].rep_copy_into(w->out, rep) < 0 && rc >= 0)
        rc = -ENOMEM;
    pthread_mutex_lock(&w->lock);
    w->rc = rc;
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

int bfs_sync_any(int fop, struct bfs_xl *xl, struct bfs_stack *st, const void *req, void *out)
{
    struct sync_wait w = {.lock = PTHREAD_MUTEX_INITIALIZER,
                          .cond = PTHREAD_COND_INITIALIZER,
                          .out = out};
    if (fop < 0 || fop >= BFS_FOP_COUNT)
        return -EINVAL;
    if (out)
        memset(out, 0, bfs_fop_info[fop].rep_size);
    struct bfs_frame *top = bfs_frame_top_new(st, NULL);
    if (!top)
        return -ENOMEM;
    int rc = bfs_wind_any(fop, top, xl, sync_cbk, &w, req);
    if (rc < 0) {
        bfs_frame_top_free(top);
        return rc;
    }
    pthread_mutex_lock(&w.lock);
    while (!w.done)
        pthread_cond_wait(&w.cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
    bfs_frame_top_free(top);
    pthread_mutex_destroy(&w.lock);
    pthread_cond_destroy(&w.cond);
    return w.rc;
}
