/*
 * fuse-notify.c — server upcalls to kernel cache invalidations.
 *
 * Upcalls arrive through graph->on_event on a graph thread. Telling the
 * kernel to forget a name takes the directory's lock in the kernel, which a
 * request waiting for an answer from that very graph thread may hold, so
 * invalidations are queued here and sent from a thread of their own.
 *
 * Lifetime: started after the graph is built, stopped (queue drained and
 * dropped) before the session is destroyed. Each queued item owns a copy of
 * the upcall's name.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/fuse-bridge.h"

struct item {
    struct item *next;
    struct bfs_upcall up;
    char *name;
};

struct bfs_fuse_notify {
    struct bfs_fuse *fu;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct item *head, **tail;
    bool stop;
};

/* The kernel only knows the nodes it holds a lookup on (fuse-node.c).
 * Upcalls name GFIDs, the same in every graph generation, so one from a
 * retired generation is as good as one from the active one. A node the
 * kernel forgets meanwhile makes it answer ENOENT: harmless. */
static void deliver(struct bfs_fuse *fu, const struct item *it)
{
    struct fuse_session *se = fu->se;
    if (!se)
        return;
    /* Another client changed the inode, or a name in the directory: what
     * our own last entry operation there said of it is out of date. */
    bfs_fuse_node_dir_attr_drop_gfid(fu, it->up.kind == 1 ? &it->up.gfid : &it->up.pargfid);
    if (it->up.kind == 1) {
        fuse_ino_t ino = bfs_fuse_node_find(fu, &it->up.gfid);
        if (ino)
            (void)fuse_lowlevel_notify_inval_inode(se, ino, 0, 0);
    } else if (it->up.kind == 2 && it->name) {
        fuse_ino_t pino = bfs_fuse_node_find(fu, &it->up.pargfid);
        if (pino)
            (void)fuse_lowlevel_notify_inval_entry(se, pino, it->name, strlen(it->name));
    }
}

static void *notify_main(void *arg)
{
    struct bfs_fuse_notify *n = arg;
    pthread_mutex_lock(&n->lock);
    for (;;) {
        while (!n->head && !n->stop)
            pthread_cond_wait(&n->cond, &n->lock);
        struct item *it = n->head;
        if (!it)
            break; /* stop, and nothing left */
        n->head = it->next;
        if (!n->head)
            n->tail = &n->head;
        pthread_mutex_unlock(&n->lock);
        if (!n->stop)
            deliver(n->fu, it);
        free(it->name);
        free(it);
        pthread_mutex_lock(&n->lock);
    }
    pthread_mutex_unlock(&n->lock);
    return NULL;
}

struct bfs_fuse_notify *bfs_fuse_notify_start(struct bfs_fuse *fu)
{
    struct bfs_fuse_notify *n = calloc(1, sizeof(*n));
    if (!n)
        return NULL;
    n->fu = fu;
    n->tail = &n->head;
    pthread_mutex_init(&n->lock, NULL);
    pthread_cond_init(&n->cond, NULL);
    if (pthread_create(&n->thread, NULL, notify_main, n) != 0) {
        pthread_mutex_destroy(&n->lock);
        pthread_cond_destroy(&n->cond);
        free(n);
        return NULL;
    }
    return n;
}

void bfs_fuse_notify_stop(struct bfs_fuse_notify *n)
{
    if (!n)
        return;
    pthread_mutex_lock(&n->lock);
    n->stop = true;
    pthread_cond_signal(&n->cond);
    pthread_mutex_unlock(&n->lock);
    pthread_join(n->thread, NULL);
    pthread_mutex_destroy(&n->lock);
    pthread_cond_destroy(&n->cond);
    free(n);
}

void bfs_fuse_notify_post(struct bfs_fuse_notify *n, const struct bfs_upcall *up)
{
    if (!n || (up->kind != 1 && up->kind != 2))
        return; /* lock contention (3) needs no kernel action */
    struct item *it = calloc(1, sizeof(*it));
    if (!it)
        return; /* a lost invalidation costs at most attr/entry-timeout */
    it->up = *up;
    it->up.name = NULL;
    if (up->name && !(it->name = strdup(up->name))) {
        free(it);
        return;
    }
    pthread_mutex_lock(&n->lock);
    if (n->stop) {
        pthread_mutex_unlock(&n->lock);
        free(it->name);
        free(it);
        return;
    }
    *n->tail = it;
    n->tail = &it->next;
    pthread_cond_signal(&n->cond);
    pthread_mutex_unlock(&n->lock);
}
