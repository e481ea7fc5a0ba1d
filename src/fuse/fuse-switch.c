/*
 * fuse-switch.c — live graph switches (docs/design/graph-switch.md).
 *
 * One watcher thread per mount from brickfsd. Every volfile-poll seconds it
 * asks brickfsd whether the client volfile changed (If-None-Match with the
 * active generation's revision; 304 while nothing did). A new text becomes
 * a new generation: built, initialised, activated, and — once its CHILD_UP
 * came — made the active one: every node moves to it (fuse-node.c), then
 * every open file that holds no lock is re-opened in it and its handle's
 * fd swapped. The old generation is retired. Each round, handles that
 * appeared in a retired generation since (an open that was on its way
 * during the switch) are moved too, and retired generations that are idle
 * (no call in flight, no handle) are freed.
 *
 * Everything blocking (HTTP, graph init, waiting for CHILD_UP, the
 * re-opens, which are syncops) happens on this thread, never on a FUSE or
 * graph thread. The thread is created with SIGINT, SIGTERM and SIGHUP
 * blocked (they belong to libfuse's loop) and stopped first at unmount.
 *
 * Lifetime: struct bfs_fuse_watch from bfs_fuse_watch_start to
 * bfs_fuse_watch_stop; nothing of it outlives the thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/event.h"
#include "fuse/fuse-bridge.h"

#define RETRY_FAILED_MS 30000 /* a revision that did not build or come up: next try */

struct bfs_fuse_watch {
    struct bfs_fuse *fu;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
    bool logged_unreachable;    /* failures to reach brickfsd: logged once per outage */
    char failed_rev[64];        /* the revision whose switch failed last */
    uint64_t retry_at_ms;
};

/* ---- moving open files ---- */

/* fd's file opened again in gr (same GFID, same flags; creation flags
 * were dropped at the first open). As root: the kernel checked the caller
 * at the first open. NULL if that fails. */
static struct bfs_fd *reopen(struct bfs_fuse_graph *gr, struct bfs_fd *old)
{
    if (!old->inode)
        return NULL;
    struct bfs_inode *i = bfs_gfid_is_root(&old->inode->gfid)
                              ? bfs_itable_root(gr->g->itable)
                              : bfs_inode_get(gr->g->itable, &old->inode->gfid, old->inode->type);
    struct bfs_fd *fd = i ? bfs_fd_new(gr->g, i, old->flags, old->is_dir) : NULL;
    struct bfs_stack *st = bfs_stack_new();
    int rc = fd && st ? 0 : -ENOMEM;
    if (rc == 0 && old->is_dir) {
        struct bfs_opendir_req r = {.fd = fd};
        struct bfs_opendir_rep out = {0};
        bfs_fuse_loc_inode(&r.loc, i);
        rc = bfs_sync_opendir(gr->g->top, st, &r, &out);
        if (rc >= 0)
            bfs_opendir_rep_clear_dup(&out);
    } else if (rc == 0) {
        struct bfs_open_req r = {.fd = fd, .flags = (uint32_t)(old->flags & ~O_DIRECT)};
        struct bfs_open_rep out = {0};
        bfs_fuse_loc_inode(&r.loc, i);
        rc = bfs_sync_open(gr->g->top, st, &r, &out);
        if (rc >= 0)
            bfs_open_rep_clear_dup(&out);
    }
    if (st)
        bfs_stack_unref(st);
    if (i)
        bfs_inode_unref(i); /* the fd holds its own */
    if (rc < 0 && fd) {
        char g[BFS_GFID_STRLEN];
        bfs_log("fuse", BFS_LOG_WARNING, "cannot re-open %s in graph generation %llu: %s; it "
                "stays in its generation until closed", bfs_gfid_fmt(&old->inode->gfid, g),
                (unsigned long long)gr->gen, strerror(-rc));
        bfs_fd_unref(fd);
        fd = NULL;
    }
    return fd;
}

/* Waits until the writes performance/write-behind answered through old
 * (in its generation's graph) are done: 0, or the first failure among them,
 * which then stays with old, to be reported by the next write, fsync or
 * close through it (BFS_XDATA_WB_DRAIN). Read-only fds have none. */
static int drain_writes(struct bfs_fuse_graph *gr, struct bfs_fd *old)
{
    if (old->is_dir || (old->flags & O_ACCMODE) == O_RDONLY)
        return 0;
    struct bfs_stack *st = bfs_stack_new();
    struct bfs_dict *x = bfs_dict_new();
    int rc = st && x ? bfs_dict_set_int(x, BFS_XDATA_WB_DRAIN, 1) : -ENOMEM;
    if (rc >= 0) {
        struct bfs_fsync_req r = {.fd = old, .datasync = 1, .xdata = x};
        struct bfs_fsync_rep out = {0};
        rc = bfs_sync_fsync(gr->g->top, st, &r, &out);
        if (rc >= 0)
            bfs_fsync_rep_clear_dup(&out);
    }
    if (x)
        bfs_dict_unref(x);
    if (st)
        bfs_stack_unref(st);
    return rc;
}

/* The next handle to move to gr (ref'd), or NULL. fu->lock held. */
static struct bfs_fuse_fh *next_to_move(struct bfs_fuse *fu, struct bfs_fuse_graph *gr)
{
    for (struct bfs_fuse_fh *fh = fu->fhs.next; fh != &fu->fhs; fh = fh->next) {
        if (fh->gr != gr && !fh->pinned && !fh->released && !fh->listing) {
            fh->refs++;
            return fh;
        }
    }
    return NULL;
}

/* Moves every handle that holds no lock to gr. Each ends in gr or pinned,
 * so this ends. While a handle moves, new calls through it wait
 * (fh->draining); the calls already holding its old fd finish first, then
 * the writes write-behind answered through it are waited for: a write must
 * not overtake an earlier one through the other generation, and a failure
 * of one must be reported through the handle. A handle whose writes failed
 * stays pinned in its generation, where its next write, fsync or close
 * reports the failure. */
static void move_handles(struct bfs_fuse *fu, struct bfs_fuse_graph *gr)
{
    for (;;) {
        pthread_mutex_lock(&fu->lock);
        struct bfs_fuse_fh *fh = next_to_move(fu, gr);
        if (fh) {
            fh->draining = true;
            while (fh->users > 0)
                pthread_cond_wait(&fu->cond, &fu->lock);
            if (fh->listing) { /* a readdir that was running left offsets of fh->gr */
                fh->draining = false;
                pthread_cond_broadcast(&fu->cond);
                pthread_mutex_unlock(&fu->lock);
                bfs_fuse_fh_unref(fu, fh);
                continue; /* a later round moves it, once its listing ended */
            }
        }
        struct bfs_fd *old = fh ? bfs_fd_ref(fh->fd) : NULL;
        struct bfs_fuse_graph *old_gr = fh ? fh->gr : NULL;
        pthread_mutex_unlock(&fu->lock);
        if (!fh)
            return;
        int drained = drain_writes(old_gr, old);
        if (drained < 0) {
            char g[BFS_GFID_STRLEN];
            bfs_log("fuse", BFS_LOG_WARNING, "%s stays in graph generation %llu: a write "
                    "answered before the switch failed (%s); its next write, fsync or close "
                    "reports it", old->inode ? bfs_gfid_fmt(&old->inode->gfid, g) : "a file",
                    (unsigned long long)old_gr->gen, strerror(-drained));
        }
        struct bfs_fd *fd = drained < 0 ? NULL : reopen(gr, old);
        pthread_mutex_lock(&fu->lock);
        fh->draining = false;
        pthread_cond_broadcast(&fu->cond);
        /* pinned meanwhile: a lock request went through the old fd */
        bool moved = fd && !fh->released && !fh->pinned && fh->fd == old;
        if (moved) {
            fh->fd = fd;
            fh->gr = gr;
            gr->fds++;
            fu->migrated++;
        } else if (!fd && !fh->pinned && !fh->released) {
            fh->pinned = true;
            fu->pinned++;
        }
        pthread_mutex_unlock(&fu->lock);
        if (moved)
            bfs_fd_unref(old); /* the handle's reference: release runs in old_gr */
        else if (fd)
            bfs_fd_unref(fd);
        bfs_fd_unref(old);
        if (moved) {
            pthread_mutex_lock(&fu->lock);
            if (--old_gr->fds == 0)
                pthread_cond_broadcast(&fu->cond);
            pthread_mutex_unlock(&fu->lock);
        }
        bfs_fuse_fh_unref(fu, fh);
    }
}

/* ---- switching ---- */

static bool text_unchanged(struct bfs_fuse *fu, const struct bfs_fuse_volfile *vf)
{
    const char *cur = fu->active->g->volfile_text; /* the active one changes only here */
    return cur && strlen(cur) == vf->len && memcmp(cur, vf->text, vf->len) == 0;
}

static void switch_failed(struct bfs_fuse_watch *w, const char *rev)
{
    struct bfs_fuse *fu = w->fu;
    snprintf(w->failed_rev, sizeof(w->failed_rev), "%s", rev);
    w->retry_at_ms = bfs_now_ms() + RETRY_FAILED_MS;
    pthread_mutex_lock(&fu->lock);
    fu->failed_switches++;
    pthread_mutex_unlock(&fu->lock);
}

static void do_switch(struct bfs_fuse_watch *w, const struct bfs_fuse_volfile *vf)
{
    struct bfs_fuse *fu = w->fu;
    char source[600], err[1024];
    struct bfs_fuse_graph *gr, *old = fu->active;
    snprintf(source, sizeof(source), "%s:/%s", vf->source, fu->opts->volname);
    bfs_log("fuse", BFS_LOG_INFO, "volfile revision %s (was %s): building graph generation "
            "%llu", vf->etag, old->rev, (unsigned long long)fu->generations + 1);
    if (bfs_fuse_graph_new(fu, vf->text, vf->len, source, vf->etag, &gr, err, sizeof(err)) < 0) {
        bfs_log("fuse", BFS_LOG_ERROR, "volfile revision %s: %s; keeping graph generation "
                "%llu", vf->etag, err, (unsigned long long)old->gen);
        switch_failed(w, vf->etag);
        return;
    }
    if (bfs_fuse_graph_wait_up(gr, fu->opts->up_timeout) < 0) {
        bfs_log("fuse", BFS_LOG_ERROR, "graph generation %llu (volfile revision %s) did not "
                "come up within %d s; keeping generation %llu", (unsigned long long)gr->gen,
                vf->etag, fu->opts->up_timeout, (unsigned long long)old->gen);
        bfs_fuse_graph_free(gr); /* nothing ever ran on it */
        switch_failed(w, vf->etag);
        return;
    }
    (void)bfs_fuse_graph_first_lookup(gr); /* e.g. stamps a new layout-version */
    if (bfs_fuse_nodes_switch(fu, gr) < 0)
        bfs_log("fuse", BFS_LOG_WARNING, "out of memory moving inodes to the new graph; "
                "retrying later");
    pthread_mutex_lock(&fu->lock);
    old->next = fu->retired;
    fu->retired = old;
    fu->switches++;
    uint64_t calls = old->inflight, files = old->fds;
    pthread_mutex_unlock(&fu->lock);
    move_handles(fu, gr);
    pthread_mutex_lock(&fu->lock);
    uint64_t left = old->fds;
    pthread_mutex_unlock(&fu->lock);
    bfs_log("fuse", BFS_LOG_INFO, "switched to graph generation %llu (volfile revision %s); "
            "generation %llu retired with %llu call(s) in flight and %llu open file(s), %llu "
            "of them staying (locked, or a listing under way)", (unsigned long long)gr->gen, gr->rev,
            (unsigned long long)old->gen, (unsigned long long)calls, (unsigned long long)files,
            (unsigned long long)left);
}

/* One poll of brickfsd. */
static void check(struct bfs_fuse_watch *w)
{
    struct bfs_fuse *fu = w->fu;
    struct bfs_fuse_volfile vf;
    char err[1024], rev[64];
    pthread_mutex_lock(&fu->lock);
    snprintf(rev, sizeof(rev), "%s", fu->active->rev);
    pthread_mutex_unlock(&fu->lock);
    int rc = bfs_fuse_volfile_fetch(fu, rev, &vf, err, sizeof(err));
    if (rc < 0) {
        if (!w->logged_unreachable)
            bfs_log("fuse", BFS_LOG_WARNING, "cannot check the volfile of %s: %s; keeping "
                    "the current graph", fu->opts->volname, err);
        w->logged_unreachable = true;
        return;
    }
    if (w->logged_unreachable)
        bfs_log("fuse", BFS_LOG_INFO, "volfile server %s answers again", vf.source);
    w->logged_unreachable = false;
    if (rc == 304)
        return;
    if (text_unchanged(fu, &vf)) {
        /* a brick moved port, the volume was restarted: same graph */
        bfs_log("fuse", BFS_LOG_DEBUG, "volfile revision %s: same text, same graph", vf.etag);
        pthread_mutex_lock(&fu->lock);
        snprintf(fu->active->rev, sizeof(fu->active->rev), "%s", vf.etag);
        pthread_mutex_unlock(&fu->lock);
    } else if (strcmp(vf.etag, w->failed_rev) != 0 || bfs_now_ms() >= w->retry_at_ms) {
        do_switch(w, &vf);
    }
    free(vf.text);
}

/* Frees retired generations nothing uses any more. */
static void reap(struct bfs_fuse *fu)
{
    for (;;) {
        struct bfs_fuse_graph *r = NULL;
        pthread_mutex_lock(&fu->lock);
        for (struct bfs_fuse_graph **pp = &fu->retired; *pp; pp = &(*pp)->next) {
            if (bfs_fuse_graph_idle(*pp)) {
                r = *pp;
                *pp = r->next;
                break;
            }
        }
        pthread_mutex_unlock(&fu->lock);
        if (!r)
            return;
        if (bfs_fuse_nodes_in(fu, r)) { /* a move failed for lack of memory: again */
            (void)bfs_fuse_nodes_switch(fu, fu->active);
            pthread_mutex_lock(&fu->lock);
            r->next = fu->retired;
            fu->retired = r;
            pthread_mutex_unlock(&fu->lock);
            return;
        }
        bfs_log("fuse", BFS_LOG_INFO, "graph generation %llu is idle: freed",
                (unsigned long long)r->gen);
        bfs_fuse_graph_free(r);
    }
}

static void *watch_main(void *arg)
{
    struct bfs_fuse_watch *w = arg;
    struct bfs_fuse *fu = w->fu;
    pthread_mutex_lock(&w->lock);
    while (!w->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += (long)fu->opts->volfile_poll_ms % 1000 * 1000000;
        ts.tv_sec += fu->opts->volfile_poll_ms / 1000 + ts.tv_nsec / 1000000000;
        ts.tv_nsec %= 1000000000;
        while (!w->stop && pthread_cond_timedwait(&w->cond, &w->lock, &ts) != ETIMEDOUT)
            ;
        if (w->stop)
            break;
        pthread_mutex_unlock(&w->lock);
        check(w);
        /* files whose open was still on its way during a switch: published
         * since, in a retired generation */
        move_handles(fu, fu->active);
        reap(fu);
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

int bfs_fuse_watch_start(struct bfs_fuse *fu)
{
    struct bfs_fuse_watch *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->fu = fu;
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&w->thread, NULL, watch_main, w);
    if (rc) {
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->cond);
        free(w);
        return -rc;
    }
    fu->watch = w;
    return 0;
}

void bfs_fuse_watch_stop(struct bfs_fuse *fu)
{
    struct bfs_fuse_watch *w = fu->watch;
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    /* a switch waiting for CHILD_UP gives up at once */
    pthread_mutex_lock(&fu->lock);
    fu->stopping = true;
    pthread_cond_broadcast(&fu->cond);
    pthread_mutex_unlock(&fu->lock);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    free(w);
    fu->watch = NULL;
}
