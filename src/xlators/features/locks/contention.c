/*
 * contention.c — lock contention notices: when a blocking inodelk or
 * entrylk request has to wait for a lock another owner holds, the holder
 * is told (an upcall of kind BFS_UPCALL_INODELK_CONTENTION or
 * BFS_UPCALL_ENTRYLK_CONTENTION naming the domain, the GFID, for entrylk
 * the basename, and the holder's lock owner). Cluster translators keep
 * their data locks between writes (eager locking, delayed post-op); on a
 * notice they stop extending that window and release the lock as soon as
 * their transactions in flight are done (lib/txn.c). Design:
 * docs/design/lock-contention.md.
 *
 * Who gets it: the upcall goes up the brick graph with `to` = the holder's
 * stack->client; protocol/server sends it on that connection only. Calls
 * made inside the process (graph tests, stack->client NULL) get it through
 * notify: every translator above hears it, and the lock owner in it says
 * whose lock it is.
 *
 * Rate limit: each granted lock remembers when its holder was last told;
 * a lock is named again only notify-contention-delay later (a holder acts
 * on the first notice; a repeat covers a notice that reached it before it
 * knew the lock was its own, e.g. a lock granted by a create).
 *
 * Notices are found under the inode's mutex (bfs__pl_contention_scan, each
 * a malloc'd copy of what it names) and sent once it is released
 * (bfs__pl_contention_send): a translator hearing one in the same process
 * may call back into us.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "locks.h"

struct pl_notice {
    struct pl_notice *next;
    uint32_t kind;
    struct bfs_gfid gfid;
    void *client;
    uint64_t owner;
    char *domain;
    char *name;
};

static void notice_free(struct pl_notice *n)
{
    free(n->domain);
    free(n->name);
    free(n);
}

/* Notes a notice for the holder of l, unless its holder was told less
 * than delay ago. No memory: no notice (the holder's window bound ends its
 * lock anyway). */
static void note(struct pl_notices *out, uint32_t kind, const struct pl_inode *pin,
                 const struct pl_domain *d, struct pl_lock *l, uint64_t now, uint64_t delay)
{
    if (l->notified_ns && (now - l->notified_ns < delay || l->notified_ns == now))
        return; /* told recently, or already in this scan */
    struct pl_notice *n = calloc(1, sizeof(*n));
    if (!n)
        return;
    n->kind = kind;
    n->gfid = pin->gfid;
    n->client = l->owner.client;
    n->owner = l->owner.id;
    n->domain = strdup(d->name);
    n->name = l->basename ? strdup(l->basename) : NULL;
    if (!n->domain || (l->basename && !n->name)) {
        notice_free(n);
        return;
    }
    l->notified_ns = now;
    n->next = out->head;
    out->head = n;
}

/* Granted locks of `granted` that a waiter of `blocked` waits for. */
static void scan_lists(struct pl_notices *out, uint32_t kind, const struct pl_inode *pin,
                       const struct pl_domain *d, struct pl_list *granted,
                       struct pl_list *blocked, uint64_t now, uint64_t delay)
{
    bool (*conflicts)(const struct pl_lock *, const struct pl_lock *) =
        kind == BFS_UPCALL_INODELK_CONTENTION ? bfs__pl_inodelk_conflicts
                                              : bfs__pl_entrylk_conflicts;
    struct pl_list *wpos, *gpos;
    pl_foreach(wpos, blocked)
    {
        const struct pl_lock *want = pl_entry(wpos, struct pl_waiter, link)->lock;
        pl_foreach(gpos, granted)
        {
            struct pl_lock *l = pl_entry(gpos, struct pl_lock, link);
            if (conflicts(l, want))
                note(out, kind, pin, d, l, now, delay);
        }
    }
}

void bfs__pl_contention_scan(struct bfs_xl *xl, struct pl_inode *pin, struct pl_notices *out)
{
    struct pl_priv *priv = xl->private;
    if (!__atomic_load_n(&priv->notify, __ATOMIC_RELAXED))
        return;
    uint64_t delay = __atomic_load_n(&priv->notify_delay_ns, __ATOMIC_RELAXED);
    uint64_t now = 0;
    struct pl_list *pos;
    pl_foreach(pos, &pin->domains)
    {
        struct pl_domain *d = pl_entry(pos, struct pl_domain, link);
        if (pl_list_empty(&d->inodelk_blocked) && pl_list_empty(&d->entrylk_blocked))
            continue;
        if (!now)
            now = bfs_now_ns();
        scan_lists(out, BFS_UPCALL_INODELK_CONTENTION, pin, d, &d->inodelks,
                   &d->inodelk_blocked, now, delay);
        scan_lists(out, BFS_UPCALL_ENTRYLK_CONTENTION, pin, d, &d->entrylks,
                   &d->entrylk_blocked, now, delay);
    }
}

void bfs__pl_contention_send(struct bfs_xl *xl, struct pl_notices *ns)
{
    struct pl_priv *priv = xl->private;
    struct pl_notice *n = ns->head;
    ns->head = NULL;
    while (n) {
        struct pl_notice *next = n->next;
        struct bfs_upcall up = {.kind = n->kind, .gfid = n->gfid, .name = n->name,
                                .domain = n->domain, .owner = n->owner, .to = n->client};
        XL_DBG(xl, "contention: telling owner %llx of client %p that someone waits in "
                   "domain %s", (unsigned long long)n->owner, n->client, n->domain);
        __atomic_add_fetch(&priv->notices, 1, __ATOMIC_RELAXED);
        bfs_xl_notify_parents(xl, BFS_EV_UPCALL, &up);
        notice_free(n);
        n = next;
    }
}
