/*
 * inodelk.c — inodelk/finodelk: the byte-range locks cluster translators
 * (replicate, disperse) take on a brick to serialise their transactions.
 *
 * Unlike POSIX locks they live in named domains (independent of each other
 * and of POSIX locks), are owned by (client, stack->lk_owner) and are never
 * merged or split: each lock is an entity, and an unlock names one by its
 * exact range. An unlock that matches no granted lock but a waiting request
 * of the same owner cancels that request (answered EAGAIN).
 *
 * Fairness: a new request also waits behind a conflicting waiter of another
 * owner (a stream of readers cannot starve a writer), unless its owner
 * already holds a lock in the domain, which could otherwise deadlock.
 * GETLK answers 0 if the lock could be granted now, EAGAIN if not.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/event.h"
#include "locks.h"

static bool conflicts(const struct pl_lock *a, const struct pl_lock *b)
{
    return !bfs__pl_owner_eq(&a->owner, &b->owner) && a->start <= b->end &&
           b->start <= a->end && (a->type == F_WRLCK || b->type == F_WRLCK);
}

bool bfs__pl_inodelk_conflicts(const struct pl_lock *a, const struct pl_lock *b)
{
    return conflicts(a, b);
}

static bool conflicts_granted(const struct pl_domain *d, const struct pl_lock *lk)
{
    const struct pl_list *pos;
    pl_foreach(pos, &d->inodelks)
    {
        if (conflicts(pl_entry(pos, struct pl_lock, link), lk))
            return true;
    }
    return false;
}

static bool owner_holds(const struct pl_domain *d, const struct pl_owner *o)
{
    const struct pl_list *pos;
    pl_foreach(pos, &d->inodelks)
    {
        if (bfs__pl_owner_eq(&pl_entry(pos, struct pl_lock, link)->owner, o))
            return true;
    }
    return false;
}

/* Does lk conflict with a waiter queued before `upto` (NULL = all)? */
static bool conflicts_blocked(const struct pl_domain *d, const struct pl_lock *lk,
                              const struct pl_list *upto)
{
    const struct pl_list *pos;
    pl_foreach(pos, &d->inodelk_blocked)
    {
        if (pos == upto)
            break;
        if (conflicts(pl_entry(pos, struct pl_waiter, link)->lock, lk))
            return true;
    }
    return false;
}

static bool grantable(const struct pl_domain *d, const struct pl_lock *lk,
                      const struct pl_list *upto)
{
    if (conflicts_granted(d, lk))
        return false;
    return owner_holds(d, &lk->owner) || !conflicts_blocked(d, lk, upto);
}

static void grant_waiters(struct pl_domain *d, struct pl_list *wake)
{
    struct pl_list *pos, *tmp;
    pl_foreach_safe(pos, tmp, &d->inodelk_blocked)
    {
        struct pl_waiter *w = pl_entry(pos, struct pl_waiter, link);
        if (!grantable(d, w->lock, pos))
            continue;
        w->lock->since_ns = bfs_now_ns();
        pl_list_add_tail(&d->inodelks, &w->lock->link);
        w->lock = NULL;
        pl_list_del(&w->link);
        bfs__pl_waiter_done(w, 0, wake);
    }
}

/* Unlock: the granted lock with this owner and range, else a waiter's. */
static int unlock(struct pl_domain *d, const struct pl_lock *want, struct pl_list *wake)
{
    struct pl_list *pos;
    pl_foreach(pos, &d->inodelks)
    {
        struct pl_lock *l = pl_entry(pos, struct pl_lock, link);
        if (bfs__pl_owner_eq(&l->owner, &want->owner) && l->start == want->start &&
            l->end == want->end) {
            pl_list_del(&l->link);
            bfs__pl_lock_free(l);
            grant_waiters(d, wake);
            return 0;
        }
    }
    pl_foreach(pos, &d->inodelk_blocked)
    {
        struct pl_waiter *w = pl_entry(pos, struct pl_waiter, link);
        if (bfs__pl_owner_eq(&w->lock->owner, &want->owner) && w->lock->start == want->start &&
            w->lock->end == want->end) {
            pl_list_del(&w->link);
            bfs__pl_waiter_done(w, -EAGAIN, wake);
            grant_waiters(d, wake); /* later waiters may no longer queue behind it */
            return 0;
        }
    }
    return -EINVAL;
}

struct ilk_args {
    int fop;
    const char *domain;
    struct bfs_gfid gfid;
    struct bfs_fd *fd;
    uint32_t cmd;
    const struct bfs_flock *fl;
};

/* Under pin->lock. Returns the answer, or 1 when the waiter was queued. */
static int ilk_locked(struct pl_inode *pin, const struct ilk_args *a, struct pl_lock **lk,
                      struct pl_waiter **w, struct pl_list *wake)
{
    struct pl_domain *d = bfs__pl_domain_get(pin, a->domain, a->fl->type != F_UNLCK);
    if (!d)
        return a->fl->type == F_UNLCK ? -EINVAL : -ENOMEM;
    if (a->fl->type == F_UNLCK)
        return unlock(d, *lk, wake);
    bool ok = grantable(d, *lk, NULL);
    if (a->cmd == BFS_LK_GETLK)
        return ok ? 0 : -EAGAIN;
    if (ok) {
        pl_list_add_tail(&d->inodelks, &(*lk)->link);
        *lk = NULL;
        return 0;
    }
    if (a->cmd == BFS_LK_SETLK)
        return -EAGAIN;
    (*w)->lock = *lk;
    *lk = NULL;
    pl_list_add_tail(&d->inodelk_blocked, &(*w)->link);
    *w = NULL;
    return 1;
}

static int inodelk_common(struct bfs_frame *frame, struct bfs_xl *xl, const struct ilk_args *a)
{
    const struct bfs_flock *fl = a->fl;
    uint64_t start, end;
    if (!a->domain || !*a->domain || a->cmd < BFS_LK_GETLK || a->cmd > BFS_LK_SETLKW)
        return -EINVAL;
    if ((fl->type != F_RDLCK && fl->type != F_WRLCK && fl->type != F_UNLCK) ||
        fl->whence != SEEK_SET || bfs__pl_range(fl, &start, &end) < 0)
        return -EINVAL;

    struct pl_owner owner = {frame->stack->client, frame->stack->lk_owner};
    bool unlocking = fl->type == F_UNLCK;
    if (!unlocking && bfs__pl_closing(xl, frame))
        return -ENOTCONN;
    struct pl_lock *lk = bfs__pl_lock_new(PL_INODELK, &owner, fl->type, start, end, fl->pid);
    struct pl_waiter *w = NULL;
    if (lk && a->cmd == BFS_LK_SETLKW && !unlocking &&
        !(w = bfs__pl_waiter_new(frame, a->fop, a->fd))) {
        bfs__pl_lock_free(lk);
        lk = NULL;
    }
    if (!lk)
        return -ENOMEM;
    struct pl_inode *pin = bfs__pl_inode_get(xl, &a->gfid, !unlocking);
    if (!pin) {
        bfs__pl_lock_free(lk);
        if (w) {
            bfs_fd_unref(w->fd);
            free(w);
        }
        return unlocking ? -EINVAL : -ENOMEM; /* unlocking what was never locked */
    }

    struct pl_list wake;
    pl_list_init(&wake);
    struct pl_notices notes = {0};
    pthread_mutex_lock(&pin->lock);
    int rc = ilk_locked(pin, a, &lk, &w, &wake);
    if (rc == 1 || unlocking) /* queued, or waiters may now wait for another holder */
        bfs__pl_contention_scan(xl, pin, &notes);
    pthread_mutex_unlock(&pin->lock);

    bfs__pl_lock_free(lk);
    if (w) {
        bfs_fd_unref(w->fd);
        free(w);
    }
    if (rc <= 0)
        bfs_unwind_any(a->fop, frame, rc, NULL);
    bfs__pl_wake_all(&wake);
    bfs__pl_contention_send(xl, &notes);
    bfs__pl_inode_put(xl, pin);
    return 0;
}

int bfs__pl_inodelk(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_inodelk_req *req)
{
    struct ilk_args a = {.fop = BFS_FOP_INODELK, .domain = req->domain, .cmd = req->cmd,
                         .fl = &req->lock};
    if (bfs__pl_loc_gfid(&req->loc, &a.gfid) < 0)
        return -EINVAL;
    return inodelk_common(frame, xl, &a);
}

int bfs__pl_finodelk(struct bfs_frame *frame, struct bfs_xl *xl,
                     const struct bfs_finodelk_req *req)
{
    if (!req->fd || !req->fd->inode)
        return -EBADF;
    struct ilk_args a = {.fop = BFS_FOP_FINODELK, .domain = req->domain, .cmd = req->cmd,
                         .fl = &req->lock, .gfid = req->fd->inode->gfid, .fd = req->fd};
    return inodelk_common(frame, xl, &a);
}

void bfs__pl_inodelk_client_gone(struct pl_inode *pin, void *client, struct pl_list *wake,
                             bool waiters_only)
{
    struct pl_list *dpos;
    pl_foreach(dpos, &pin->domains)
    {
        struct pl_domain *d = pl_entry(dpos, struct pl_domain, link);
        if (!waiters_only)
            bfs__pl_locks_drop(&d->inodelks, client);
        bfs__pl_waiters_drop(&d->inodelk_blocked, client, wake);
        grant_waiters(d, wake);
    }
}

/* The unlock a piggybacked post-op asks for (locks-txn.c): owner's
 * whole-file lock in domain on gfid, as an unlock request would. */
int bfs__pl_inodelk_drop(struct bfs_xl *xl, const struct pl_owner *owner, const char *domain,
                         const struct bfs_gfid *gfid)
{
    struct pl_lock want = {.kind = PL_INODELK, .owner = *owner, .start = 0, .end = UINT64_MAX};
    return bfs__pl_domain_drop(xl, gfid, domain, unlock, &want);
}

/* A lock granted without a request (locks-txn.c: a create that asks for the
 * data lock of the file it makes): owner's whole-file write lock in domain
 * on gfid, if nobody holds or waits for a conflicting one. 0, -EAGAIN,
 * -ENOMEM. */
int bfs__pl_inodelk_grant(struct bfs_xl *xl, const struct pl_owner *owner, const char *domain,
                          const struct bfs_gfid *gfid)
{
    struct pl_lock *lk = bfs__pl_lock_new(PL_INODELK, owner, F_WRLCK, 0, UINT64_MAX, 0);
    struct pl_inode *pin = lk ? bfs__pl_inode_get(xl, gfid, true) : NULL;
    if (!pin) {
        bfs__pl_lock_free(lk);
        return -ENOMEM;
    }
    int rc = -ENOMEM;
    pthread_mutex_lock(&pin->lock);
    struct pl_domain *d = bfs__pl_domain_get(pin, domain, true);
    if (d && grantable(d, lk, NULL)) {
        pl_list_add_tail(&d->inodelks, &lk->link);
        lk = NULL;
        rc = 0;
    } else if (d) {
        rc = -EAGAIN;
    }
    pthread_mutex_unlock(&pin->lock);
    bfs__pl_lock_free(lk);
    bfs__pl_inode_put(xl, pin);
    return rc;
}
