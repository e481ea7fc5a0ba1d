/*
 * entrylk.c — entrylk/fentrylk: locks on names in a directory, per domain,
 * that cluster translators take around namespace changes (create, rename,
 * heal of an entry). A NULL basename locks the whole directory and so
 * conflicts with every name in it.
 *
 * Owner = (client, stack->lk_owner); one owner never conflicts with itself.
 * Read locks share, a write lock excludes. LOCK waits (the request is queued
 * with its frame), LOCK_NB answers EAGAIN, UNLOCK drops the owner's oldest
 * lock on that name (or cancels its waiting request, answered EAGAIN).
 * Fairness as in inodelk.c: new requests queue behind conflicting waiters
 * unless their owner already holds a lock in the domain.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "locks.h"

static bool names_overlap(const char *a, const char *b)
{
    return !a || !b || strcmp(a, b) == 0;
}

static bool same_name(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool conflicts(const struct pl_lock *a, const struct pl_lock *b)
{
    return !bfs__pl_owner_eq(&a->owner, &b->owner) && names_overlap(a->basename, b->basename) &&
           (a->type == F_WRLCK || b->type == F_WRLCK);
}

bool bfs__pl_entrylk_conflicts(const struct pl_lock *a, const struct pl_lock *b)
{
    return conflicts(a, b);
}

static bool grantable(const struct pl_domain *d, const struct pl_lock *lk,
                      const struct pl_list *upto)
{
    const struct pl_list *pos;
    bool holds = false;
    pl_foreach(pos, &d->entrylks)
    {
        const struct pl_lock *l = pl_entry(pos, struct pl_lock, link);
        if (conflicts(l, lk))
            return false;
        holds = holds || bfs__pl_owner_eq(&l->owner, &lk->owner);
    }
    if (holds)
        return true;
    pl_foreach(pos, &d->entrylk_blocked)
    {
        if (pos == upto)
            break;
        if (conflicts(pl_entry(pos, struct pl_waiter, link)->lock, lk))
            return false;
    }
    return true;
}

static void grant_waiters(struct pl_domain *d, struct pl_list *wake)
{
    struct pl_list *pos, *tmp;
    pl_foreach_safe(pos, tmp, &d->entrylk_blocked)
    {
        struct pl_waiter *w = pl_entry(pos, struct pl_waiter, link);
        if (!grantable(d, w->lock, pos))
            continue;
        w->lock->since_ns = bfs_now_ns();
        pl_list_add_tail(&d->entrylks, &w->lock->link);
        w->lock = NULL;
        pl_list_del(&w->link);
        bfs__pl_waiter_done(w, 0, wake);
    }
}

static int unlock(struct pl_domain *d, const struct pl_lock *want, struct pl_list *wake)
{
    struct pl_list *pos;
    pl_foreach(pos, &d->entrylks)
    {
        struct pl_lock *l = pl_entry(pos, struct pl_lock, link);
        if (bfs__pl_owner_eq(&l->owner, &want->owner) && same_name(l->basename, want->basename)) {
            pl_list_del(&l->link);
            bfs__pl_lock_free(l);
            grant_waiters(d, wake);
            return 0;
        }
    }
    pl_foreach(pos, &d->entrylk_blocked)
    {
        struct pl_waiter *w = pl_entry(pos, struct pl_waiter, link);
        if (bfs__pl_owner_eq(&w->lock->owner, &want->owner) &&
            same_name(w->lock->basename, want->basename)) {
            pl_list_del(&w->link);
            bfs__pl_waiter_done(w, -EAGAIN, wake);
            grant_waiters(d, wake);
            return 0;
        }
    }
    return -EINVAL;
}

struct elk_args {
    int fop;
    const char *domain;
    struct bfs_gfid gfid;
    struct bfs_fd *fd;
    const char *basename;
    uint32_t cmd, type;
};

/* Under pin->lock. Returns the answer, or 1 when the waiter was queued. */
static int elk_locked(struct pl_inode *pin, const struct elk_args *a, struct pl_lock **lk,
                      struct pl_waiter **w, struct pl_list *wake)
{
    bool unlocking = a->cmd == BFS_ENTRYLK_UNLOCK;
    struct pl_domain *d = bfs__pl_domain_get(pin, a->domain, !unlocking);
    if (!d)
        return unlocking ? -EINVAL : -ENOMEM;
    if (unlocking)
        return unlock(d, *lk, wake);
    if (grantable(d, *lk, NULL)) {
        pl_list_add_tail(&d->entrylks, &(*lk)->link);
        *lk = NULL;
        return 0;
    }
    if (a->cmd == BFS_ENTRYLK_LOCK_NB)
        return -EAGAIN;
    (*w)->lock = *lk;
    *lk = NULL;
    pl_list_add_tail(&d->entrylk_blocked, &(*w)->link);
    *w = NULL;
    return 1;
}

static struct pl_lock *elk_lock_new(struct bfs_frame *frame, const struct elk_args *a)
{
    struct pl_owner owner = {frame->stack->client, frame->stack->lk_owner};
    uint32_t type = a->type == BFS_ENTRYLK_WRLCK ? F_WRLCK : F_RDLCK;
    struct pl_lock *lk = bfs__pl_lock_new(PL_ENTRYLK, &owner, type, 0, 0, frame->stack->pid);
    if (lk && a->basename && !(lk->basename = strdup(a->basename))) {
        bfs__pl_lock_free(lk);
        return NULL;
    }
    return lk;
}

static int entrylk_common(struct bfs_frame *frame, struct bfs_xl *xl, const struct elk_args *a)
{
    if (!a->domain || !*a->domain || a->cmd < BFS_ENTRYLK_LOCK || a->cmd > BFS_ENTRYLK_UNLOCK)
        return -EINVAL;
    if (a->cmd != BFS_ENTRYLK_UNLOCK && a->type != BFS_ENTRYLK_RDLCK &&
        a->type != BFS_ENTRYLK_WRLCK)
        return -EINVAL;
    if (a->basename && bfs_name_check(a->basename) < 0)
        return -EINVAL;
    bool unlocking = a->cmd == BFS_ENTRYLK_UNLOCK;
    if (!unlocking && bfs__pl_closing(xl, frame))
        return -ENOTCONN;
    struct pl_lock *lk = elk_lock_new(frame, a);
    struct pl_waiter *w = NULL;
    if (lk && a->cmd == BFS_ENTRYLK_LOCK && !(w = bfs__pl_waiter_new(frame, a->fop, a->fd))) {
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
        return unlocking ? -EINVAL : -ENOMEM;
    }

    struct pl_list wake;
    pl_list_init(&wake);
    struct pl_notices notes = {0};
    pthread_mutex_lock(&pin->lock);
    int rc = elk_locked(pin, a, &lk, &w, &wake);
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

int bfs__pl_entrylk(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_entrylk_req *req)
{
    struct elk_args a = {.fop = BFS_FOP_ENTRYLK, .domain = req->domain,
                         .basename = req->basename, .cmd = req->cmd, .type = req->type};
    if (bfs__pl_loc_gfid(&req->loc, &a.gfid) < 0)
        return -EINVAL;
    return entrylk_common(frame, xl, &a);
}

int bfs__pl_fentrylk(struct bfs_frame *frame, struct bfs_xl *xl,
                     const struct bfs_fentrylk_req *req)
{
    if (!req->fd || !req->fd->inode)
        return -EBADF;
    struct elk_args a = {.fop = BFS_FOP_FENTRYLK, .domain = req->domain,
                         .basename = req->basename, .cmd = req->cmd, .type = req->type,
                         .gfid = req->fd->inode->gfid, .fd = req->fd};
    return entrylk_common(frame, xl, &a);
}

void bfs__pl_entrylk_client_gone(struct pl_inode *pin, void *client, struct pl_list *wake,
                             bool waiters_only)
{
    struct pl_list *dpos;
    pl_foreach(dpos, &pin->domains)
    {
        struct pl_domain *d = pl_entry(dpos, struct pl_domain, link);
        if (!waiters_only)
            bfs__pl_locks_drop(&d->entrylks, client);
        bfs__pl_waiters_drop(&d->entrylk_blocked, client, wake);
        grant_waiters(d, wake);
    }
}

/* The unlock a piggybacked post-op asks for (locks-txn.c): owner's entry
 * lock (domain, basename) in the directory gfid, as an unlock would. */
int bfs__pl_entrylk_drop(struct bfs_xl *xl, const struct pl_owner *owner, const char *domain,
                         const struct bfs_gfid *gfid, const char *basename)
{
    struct pl_lock want = {.kind = PL_ENTRYLK, .owner = *owner, .basename = (char *)basename};
    return bfs__pl_domain_drop(xl, gfid, domain, unlock, &want);
}
