/*
 * posix.c — the lk fop of features/locks: POSIX byte-range locks with
 * fcntl(2) semantics and BSD flock locks, plus what closing a file does to
 * them (flush drops the owner's POSIX locks, release drops what was taken
 * through the fd).
 *
 * POSIX locks of one owner never overlap each other: setting a lock first
 * cuts the owner's differently-typed locks out of the range (splitting one
 * that strictly contains it) and absorbs same-typed ones that overlap or
 * touch it; unlocking is the same cut without an insert. Owners are
 * (client connection, lock owner), so two clients never share locks.
 *
 * flock locks are whole-file, one per (client, fd); converting a held lock
 * drops it first, as Linux does, so two upgraders cannot deadlock.
 *
 * Waiters (SETLKW) wait on pin->lk_blocked in arrival order; after every
 * release each one that no longer conflicts is granted.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/event.h"
#include "locks.h"

/* ---- range algebra (pin->lock held) ---- */

static bool overlap(uint64_t s1, uint64_t e1, uint64_t s2, uint64_t e2)
{
    return s1 <= e2 && s2 <= e1;
}

static bool adjacent(uint64_t s1, uint64_t e1, uint64_t s2, uint64_t e2)
{
    return (e1 != UINT64_MAX && e1 + 1 == s2) || (e2 != UINT64_MAX && e2 + 1 == s1);
}

static bool types_conflict(uint32_t a, uint32_t b)
{
    return a == F_WRLCK || b == F_WRLCK;
}

static struct pl_lock *posix_conflict(struct pl_list *granted, const struct pl_lock *want)
{
    struct pl_list *pos;
    pl_foreach(pos, granted)
    {
        struct pl_lock *l = pl_entry(pos, struct pl_lock, link);
        if (!bfs__pl_owner_eq(&l->owner, &want->owner) &&
            overlap(l->start, l->end, want->start, want->end) &&
            types_conflict(l->type, want->type))
            return l;
    }
    return NULL;
}

static void insert_sorted(struct pl_list *granted, struct pl_lock *lk)
{
    struct pl_list *pos;
    pl_foreach(pos, granted)
    {
        if (pl_entry(pos, struct pl_lock, link)->start > lk->start)
            break;
    }
    pl_list_insert_before(pos, &lk->link);
}

/*
 * Applies lk (its owner's new state over [start, end]) to granted. lk is
 * inserted, possibly widened by merging, unless it is F_UNLCK, in which case
 * it is freed. *spare is consumed if a held lock must be split in two.
 */
static void posix_apply(struct pl_list *granted, struct pl_lock *lk, struct pl_lock **spare)
{
    struct pl_list *pos, *tmp;
    pl_foreach_safe(pos, tmp, granted)
    {
        struct pl_lock *l = pl_entry(pos, struct pl_lock, link);
        if (!bfs__pl_owner_eq(&l->owner, &lk->owner))
            continue;
        if (lk->type != F_UNLCK && l->type == lk->type &&
            (overlap(l->start, l->end, lk->start, lk->end) ||
             adjacent(l->start, l->end, lk->start, lk->end))) {
            lk->start = l->start < lk->start ? l->start : lk->start;
            lk->end = l->end > lk->end ? l->end : lk->end;
            pl_list_del(&l->link);
            bfs__pl_lock_free(l);
            continue;
        }
        if (!overlap(l->start, l->end, lk->start, lk->end))
            continue;
        if (l->start < lk->start && l->end > lk->end) {
            /* split: l keeps the left piece, the spare takes the right */
            struct pl_lock *r = *spare;
            *spare = NULL;
            *r = *l;
            pl_list_init(&r->link);
            r->basename = NULL;
            r->start = lk->end + 1;
            l->end = lk->start - 1;
            pl_list_insert_before(l->link.next, &r->link);
        } else if (l->start < lk->start) {
            l->end = lk->start - 1;
        } else if (l->end > lk->end) {
            l->start = lk->end + 1;
        } else {
            pl_list_del(&l->link);
            bfs__pl_lock_free(l);
        }
    }
    if (lk->type == F_UNLCK) {
        bfs__pl_lock_free(lk);
        return;
    }
    lk->since_ns = bfs_now_ns();
    insert_sorted(granted, lk);
}

static struct pl_lock *flock_conflict(struct pl_list *granted, const struct pl_lock *want)
{
    struct pl_list *pos;
    pl_foreach(pos, granted)
    {
        struct pl_lock *l = pl_entry(pos, struct pl_lock, link);
        if (!bfs__pl_owner_eq(&l->owner, &want->owner) && types_conflict(l->type, want->type))
            return l;
    }
    return NULL;
}

/* Removes owner's flock lock; returns its type or F_UNLCK if none. */
static uint32_t flock_drop(struct pl_list *granted, const struct pl_owner *owner)
{
    struct pl_list *pos, *tmp;
    pl_foreach_safe(pos, tmp, granted)
    {
        struct pl_lock *l = pl_entry(pos, struct pl_lock, link);
        if (bfs__pl_owner_eq(&l->owner, owner)) {
            uint32_t type = l->type;
            pl_list_del(&l->link);
            bfs__pl_lock_free(l);
            return type;
        }
    }
    return F_UNLCK;
}

/* Grants every waiter that fits now, in arrival order. */
static void grant_waiters(struct pl_inode *pin, struct pl_list *wake)
{
    struct pl_list *pos, *tmp;
    pl_foreach_safe(pos, tmp, &pin->lk_blocked)
    {
        struct pl_waiter *w = pl_entry(pos, struct pl_waiter, link);
        struct pl_lock *lk = w->lock;
        if (lk->kind == PL_POSIX) {
            if (posix_conflict(&pin->posix, lk))
                continue;
            posix_apply(&pin->posix, lk, &w->spare);
        } else {
            if (flock_conflict(&pin->flocks, lk))
                continue;
            lk->since_ns = bfs_now_ns();
            pl_list_add_tail(&pin->flocks, &lk->link);
        }
        w->lock = NULL;
        pl_list_del(&w->link);
        bfs__pl_waiter_done(w, 0, wake);
    }
}

/* ---- the lk fop ---- */

struct lk_call {
    struct bfs_frame *frame;
    struct bfs_xl *xl;
    const struct bfs_lk_req *req;
    struct pl_inode *pin;
    uint32_t cmd;
    struct pl_lock *lk;   /* the request as a lock */
    struct pl_waiter *w;  /* preallocated for SETLKW */
    struct pl_lock *spare;
};

static void reply_lk(struct bfs_frame *frame, int rc, const struct bfs_flock *fl)
{
    struct bfs_lk_rep rep = {0};
    if (rc >= 0 && fl)
        rep.lock = *fl;
    bfs_unwind_lk(frame, rc, &rep);
}

static void lk_getlk(struct lk_call *c)
{
    struct bfs_flock out = c->req->lock;
    pthread_mutex_lock(&c->pin->lock);
    struct pl_lock *l = posix_conflict(&c->pin->posix, c->lk);
    if (l) {
        out.type = l->type;
        out.whence = SEEK_SET;
        out.start = l->start;
        out.len = l->end == UINT64_MAX ? 0 : l->end - l->start + 1;
        out.pid = l->pid;
        out.owner = l->owner.id;
    } else {
        out.type = F_UNLCK;
    }
    pthread_mutex_unlock(&c->pin->lock);
    reply_lk(c->frame, 0, &out);
}

/* Sets (or unlocks) a POSIX or flock lock; the answer may come later. */
static void lk_setlk(struct lk_call *c)
{
    struct pl_inode *pin = c->pin;
    struct pl_list wake;
    bool is_flock = c->lk->kind == PL_FLOCK, released = false;
    int rc = 0;

    pl_list_init(&wake);
    pthread_mutex_lock(&pin->lock);
    if (is_flock) {
        /* converting (or unlocking) drops the held lock first */
        uint32_t held = flock_drop(&pin->flocks, &c->lk->owner);
        released = held != F_UNLCK;
        if (c->lk->type == F_UNLCK) {
            bfs__pl_lock_free(c->lk);
        } else if (!flock_conflict(&pin->flocks, c->lk)) {
            pl_list_add_tail(&pin->flocks, &c->lk->link);
        } else {
            rc = c->cmd == BFS_LK_SETLKW ? 1 : -EAGAIN;
        }
    } else if (c->lk->type == F_UNLCK) {
        posix_apply(&pin->posix, c->lk, &c->spare);
        released = true;
    } else if (!posix_conflict(&pin->posix, c->lk)) {
        /* a lock over our own may shrink or retype it: others may fit now */
        posix_apply(&pin->posix, c->lk, &c->spare);
        released = true;
    } else {
        rc = c->cmd == BFS_LK_SETLKW ? 1 : -EAGAIN;
    }
    if (rc == 1) {
        c->w->lock = c->lk;
        c->w->spare = c->spare;
        c->w->lock->since_ns = bfs_now_ns();
        c->spare = NULL;
        pl_list_add_tail(&pin->lk_blocked, &c->w->link);
        c->w = NULL;
    } else if (rc < 0) {
        bfs__pl_lock_free(c->lk);
    }
    c->lk = NULL;
    if (released)
        grant_waiters(pin, &wake);
    pthread_mutex_unlock(&pin->lock);

    if (rc <= 0)
        reply_lk(c->frame, rc, &c->req->lock);
    bfs__pl_wake_all(&wake);
}

static int lk_prepare(struct lk_call *c, struct bfs_fd *fd)
{
    const struct bfs_lk_req *req = c->req;
    const struct bfs_flock *fl = &req->lock;
    bool is_flock = (req->cmd & BFS_LK_FLOCK) != 0;
    uint64_t start = 0, end = UINT64_MAX;

    if (c->cmd < BFS_LK_GETLK || c->cmd > BFS_LK_SETLKW || (is_flock && c->cmd == BFS_LK_GETLK))
        return -EINVAL;
    if (fl->type != F_RDLCK && fl->type != F_WRLCK && fl->type != F_UNLCK)
        return -EINVAL;
    if (fl->whence != SEEK_SET || (!is_flock && bfs__pl_range(fl, &start, &end) < 0))
        return -EINVAL;
    if (fl->type != F_UNLCK && c->cmd != BFS_LK_GETLK && bfs__pl_closing(c->xl, c->frame))
        return -ENOTCONN;
    struct pl_owner owner = {.client = c->frame->stack->client};
    if (is_flock)
        owner.id = (uint64_t)(uintptr_t)fd;
    else
        owner.id = fl->owner ? fl->owner : c->frame->stack->lk_owner;
    c->lk = bfs__pl_lock_new(is_flock ? PL_FLOCK : PL_POSIX, &owner, fl->type, start, end,
                             fl->pid);
    c->spare = bfs__pl_lock_new(PL_POSIX, &owner, F_UNLCK, 0, 0, 0);
    if (c->cmd == BFS_LK_SETLKW && fl->type != F_UNLCK)
        c->w = bfs__pl_waiter_new(c->frame, BFS_FOP_LK, fd);
    if (!c->lk || !c->spare || (c->cmd == BFS_LK_SETLKW && fl->type != F_UNLCK && !c->w))
        return -ENOMEM;
    c->lk->fd = fd;
    if (c->w)
        c->w->reply = *fl;
    return 0;
}

static void lk_call_clear(struct lk_call *c)
{
    bfs__pl_lock_free(c->lk);
    bfs__pl_lock_free(c->spare);
    if (c->w) {
        if (c->w->fd)
            bfs_fd_unref(c->w->fd);
        free(c->w);
    }
}

int bfs__pl_lk(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_lk_req *req)
{
    struct bfs_fd *fd = req->fd;
    if (!fd || !fd->inode)
        return -EBADF;
    struct lk_call c = {.frame = frame, .xl = xl, .req = req,
                        .cmd = req->cmd & ~(uint32_t)BFS_LK_FLOCK};
    int rc = lk_prepare(&c, fd);
    if (rc == 0 && !(c.pin = bfs__pl_inode_get(xl, &fd->inode->gfid, true)))
        rc = -ENOMEM;
    if (rc < 0) {
        lk_call_clear(&c);
        return rc;
    }
    /* have release() called for this fd, to drop what it leaves behind
     * (context slots are per graph: only an fd of our graph has ours) */
    if (c.cmd != BFS_LK_GETLK && fd->graph == xl->graph)
        (void)bfs_fd_ctx_set(fd, xl, 1);
    if (c.cmd == BFS_LK_GETLK)
        lk_getlk(&c);
    else
        lk_setlk(&c);
    lk_call_clear(&c);
    bfs__pl_inode_put(xl, c.pin);
    return 0;
}

/* ---- what closing does ---- */

/* Drops POSIX locks matching (owner or fd) and flock locks of fd. */
static bool drop_matching(struct pl_inode *pin, const struct pl_owner *owner,
                          const struct bfs_fd *fd)
{
    bool dropped = false;
    struct pl_list *pos, *tmp;
    pl_foreach_safe(pos, tmp, &pin->posix)
    {
        struct pl_lock *l = pl_entry(pos, struct pl_lock, link);
        if ((owner && bfs__pl_owner_eq(&l->owner, owner)) || (fd && l->fd == fd)) {
            pl_list_del(&l->link);
            bfs__pl_lock_free(l);
            dropped = true;
        }
    }
    pl_foreach_safe(pos, tmp, &pin->flocks)
    {
        struct pl_lock *l = pl_entry(pos, struct pl_lock, link);
        if (fd && l->fd == fd) {
            pl_list_del(&l->link);
            bfs__pl_lock_free(l);
            dropped = true;
        }
    }
    return dropped;
}

int bfs__pl_flush(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_flush_req *req)
{
    struct bfs_fd *fd = req->fd;
    struct pl_inode *pin = fd && fd->inode ? bfs__pl_inode_get(xl, &fd->inode->gfid, false)
                                           : NULL;
    if (pin) {
        /* close(2): every POSIX lock of this owner on the file goes */
        struct pl_owner owner = {frame->stack->client, frame->stack->lk_owner};
        struct pl_list wake;
        pl_list_init(&wake);
        pthread_mutex_lock(&pin->lock);
        if (drop_matching(pin, &owner, NULL))
            grant_waiters(pin, &wake);
        pthread_mutex_unlock(&pin->lock);
        bfs__pl_wake_all(&wake);
        bfs__pl_inode_put(xl, pin);
    }
    return bfs_pass_flush(frame, FIRST_CHILD(xl), req);
}

void bfs__pl_release(struct bfs_xl *xl, struct bfs_fd *fd)
{
    (void)bfs_fd_ctx_del(fd, xl, NULL);
    if (!fd->inode)
        return;
    struct pl_inode *pin = bfs__pl_inode_get(xl, &fd->inode->gfid, false);
    if (!pin)
        return;
    struct pl_list wake;
    pl_list_init(&wake);
    pthread_mutex_lock(&pin->lock);
    if (drop_matching(pin, NULL, fd))
        grant_waiters(pin, &wake);
    pthread_mutex_unlock(&pin->lock);
    bfs__pl_wake_all(&wake);
    bfs__pl_inode_put(xl, pin);
}

void bfs__pl_posix_client_gone(struct pl_inode *pin, void *client, struct pl_list *wake,
                               bool waiters_only)
{
    bool dropped = false;
    if (!waiters_only) {
        dropped = bfs__pl_locks_drop(&pin->posix, client);
        dropped = bfs__pl_locks_drop(&pin->flocks, client) || dropped;
    }
    bfs__pl_waiters_drop(&pin->lk_blocked, client, wake);
    if (dropped)
        grant_waiters(pin, wake);
}
