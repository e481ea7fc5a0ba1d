/*
 * fuse-lock.c — file locks: getlk, setlk (POSIX byte ranges, blocking or
 * not) and flock, all as the lk fop.
 *
 * The lock owner is the kernel's (fi->lock_owner): it goes both on the
 * stack and in the lock, so features/locks can tell the owners of one
 * client apart. A blocking request simply stays in the graph until granted;
 * no FUSE thread waits for it.
 *
 * Interrupts. A process blocked in F_SETLKW or flock() that gets a signal
 * must return EINTR (and one that gets SIGKILL must die): the kernel sends
 * FUSE_INTERRUPT and then waits for our answer. A blocking call is on
 * `waiting` (under wait_lock) from before it is wound until it is answered;
 * whichever of the interrupt handler and the fop callback takes it off the
 * list answers the kernel — EINTR or the lock's outcome. The graph has no
 * way to withdraw a queued lock request, so a lock granted after its
 * requester was interrupted is released again at once, as its owner never
 * learns it had it. (The one imperfection: an owner converting a lock it
 * already held loses that range too if interrupted and then granted.)
 *
 * The interrupt handler never dereferences its data pointer before finding
 * it on the list with the same request: a call that was already answered
 * and freed is simply not found.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>

#include "fuse/fuse-bridge.h"

static pthread_mutex_t wait_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bfs_fuse_call *waiting; /* blocking lock calls not yet answered */

static void wait_add(struct bfs_fuse_call *c)
{
    pthread_mutex_lock(&wait_lock);
    c->wprev = NULL;
    c->wnext = waiting;
    if (waiting)
        waiting->wprev = c;
    waiting = c;
    c->waiting = true;
    pthread_mutex_unlock(&wait_lock);
}

/* wait_lock held. */
static void __wait_del(struct bfs_fuse_call *c)
{
    if (c->wprev)
        c->wprev->wnext = c->wnext;
    else
        waiting = c->wnext;
    if (c->wnext)
        c->wnext->wprev = c->wprev;
    c->wprev = c->wnext = NULL;
    c->waiting = false;
}

/* Takes c off the list; true if it was still there (we answer the kernel),
 * false if the interrupt handler answered already. Calls that never
 * waited are always ours to answer. */
static bool wait_claim(struct bfs_fuse_call *c)
{
    if (!(c->lk_cmd == BFS_LK_SETLKW || c->lk_cmd == (BFS_LK_SETLKW | BFS_LK_FLOCK)))
        return true;
    pthread_mutex_lock(&wait_lock);
    bool mine = c->waiting;
    if (mine)
        __wait_del(c);
    pthread_mutex_unlock(&wait_lock);
    return mine;
}

static void on_interrupt(fuse_req_t req, void *data)
{
    struct bfs_fuse_call *found = NULL;
    pthread_mutex_lock(&wait_lock);
    for (struct bfs_fuse_call *c = waiting; c; c = c->wnext) {
        if (c == data && c->req == req) {
            __wait_del(c);
            found = c;
            break;
        }
    }
    pthread_mutex_unlock(&wait_lock);
    if (found)
        fuse_reply_err(req, EINTR); /* req stays valid while libfuse runs us */
}

/* ---- releasing a lock nobody knows it holds ---- */

static void unlock_cbk(struct bfs_frame *frame, void *cookie, int rc,
                       const struct bfs_lk_rep *rep)
{
    bfs_fuse_call_done(bfs_fuse_call_of(frame));
}

static void late_unlock(struct bfs_fuse_call *w)
{
    struct bfs_fuse_call *c = bfs_fuse_call_new_internal(w->fu, w->gr, w->frame->stack);
    if (!c) {
        bfs_log("fuse", BFS_LOG_ERROR, "out of memory releasing a lock granted after its "
                                       "requester was interrupted");
        return;
    }
    c->fd_ref = bfs_fd_ref(w->fd_ref);
    struct bfs_lk_req r = {.fd = c->fd_ref, .cmd = BFS_LK_SETLK | (w->lk_cmd & BFS_LK_FLOCK),
                           .lock = w->lk};
    r.lock.type = F_UNLCK;
    int rc = bfs_wind_lk(c->frame, bfs_fuse_top(c), unlock_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_done(c);
}

/* ---- the lk fop ---- */

static void lk_cbk(struct bfs_frame *frame, void *cookie, int rc, const struct bfs_lk_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    if (!wait_claim(c)) {
        if (rc >= 0 && c->lk.type != F_UNLCK)
            late_unlock(c);
    } else if (rc < 0) {
        fuse_reply_err(c->req, -rc);
    } else if (c->lk_cmd == BFS_LK_GETLK) {
        struct flock fl = {
            .l_type = (short)rep->lock.type, .l_whence = SEEK_SET,
            .l_start = (off_t)rep->lock.start, .l_len = (off_t)rep->lock.len,
            .l_pid = (pid_t)rep->lock.pid,
        };
        fuse_reply_lock(c->req, &fl);
    } else {
        fuse_reply_err(c->req, 0);
    }
    bfs_fuse_call_done(c);
}

/* Winds c's lock request; answers and ends c on failure. A request that
 * may take a lock pins the file to its graph generation: a brick's lock
 * belongs to the connection it was taken on (docs/design/graph-switch.md). */
static void wind_lk(struct bfs_fuse_call *c, struct fuse_file_info *fi)
{
    bool pin = c->lk_cmd != BFS_LK_GETLK && c->lk.type != F_UNLCK;
    c->fd_ref = bfs_fd_ref(bfs_fuse_call_fd(c, fi, pin));
    c->lk.whence = SEEK_SET;
    c->lk.owner = fi->lock_owner;
    if (c->lk_cmd == BFS_LK_SETLKW || c->lk_cmd == (BFS_LK_SETLKW | BFS_LK_FLOCK)) {
        wait_add(c);
        fuse_req_interrupt_func(c->req, on_interrupt, c); /* may run it at once */
    }
    struct bfs_lk_req r = {.fd = c->fd_ref, .cmd = c->lk_cmd, .lock = c->lk};
    int rc = bfs_wind_lk(c->frame, bfs_fuse_top(c), lk_cbk, NULL, &r);
    if (rc < 0) {
        if (wait_claim(c))
            fuse_reply_err(c->req, -rc);
        bfs_fuse_call_done(c);
    }
}

static int lock_range(struct bfs_fuse_call *c, const struct flock *fl)
{
    if (fl->l_start < 0 || fl->l_len < 0)
        return -EINVAL; /* the kernel normalises ranges; be strict anyway */
    c->lk.type = (uint32_t)fl->l_type;
    c->lk.start = (uint64_t)fl->l_start;
    c->lk.len = (uint64_t)fl->l_len; /* 0: to end of file */
    c->lk.pid = (uint32_t)fl->l_pid;
    return 0;
}

void bfs_fuse_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
                    struct flock *lock)
{
    struct bfs_fuse_call *c = bfs_fuse_call_new_lk(req, fi->lock_owner);
    if (!c)
        return;
    int rc = lock_range(c, lock);
    if (rc < 0) {
        bfs_fuse_call_fail(c, rc);
        return;
    }
    c->lk_cmd = BFS_LK_GETLK;
    wind_lk(c, fi);
}

void bfs_fuse_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
                    struct flock *lock, int sleep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_new_lk(req, fi->lock_owner);
    if (!c)
        return;
    int rc = lock_range(c, lock);
    if (rc < 0) {
        bfs_fuse_call_fail(c, rc);
        return;
    }
    c->lk_cmd = sleep && lock->l_type != F_UNLCK ? BFS_LK_SETLKW : BFS_LK_SETLK;
    wind_lk(c, fi);
}

void bfs_fuse_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op)
{
    struct bfs_fuse_call *c = bfs_fuse_call_new_lk(req, fi->lock_owner);
    if (!c)
        return;
    switch (op & ~LOCK_NB) {
    case LOCK_SH:
        c->lk.type = F_RDLCK;
        break;
    case LOCK_EX:
        c->lk.type = F_WRLCK;
        break;
    case LOCK_UN:
        c->lk.type = F_UNLCK;
        break;
    default:
        bfs_fuse_call_fail(c, -EINVAL);
        return;
    }
    bool block = !(op & LOCK_NB) && c->lk.type != F_UNLCK;
    c->lk_cmd = (block ? BFS_LK_SETLKW : BFS_LK_SETLK) | BFS_LK_FLOCK;
    c->lk.pid = (uint32_t)fuse_req_ctx(req)->pid;
    wind_lk(c, fi); /* whole file: start 0, len 0 */
}
