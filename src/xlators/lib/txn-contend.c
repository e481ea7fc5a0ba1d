/*
 * txn-contend.c — lock contention notices (docs/design/lock-contention.md):
 * a brick tells the holder of an inodelk or entrylk that another owner's
 * blocking request waits for it (features/locks/contention.c). A shared
 * lock of ours (an eager data lock, txn.h) that it names stops being a
 * window: no newcomer joins it (they queue and acquire again behind the
 * other client), no delayed post-op keeps it, and it is released as soon
 * as the transactions in flight are done. Without notices (an old brick,
 * a lost upcall) the window's age bound in txn.c ends it instead.
 *
 * Matching: the notice carries the lock owner the brick saw; every window
 * takes a new owner (bfs_txn_owner_new at each acquisition), so a notice
 * that arrives after its window ended names nothing and is dropped. The
 * domain and GFID must match too (a defence against a foreign owner).
 *
 * bfs_txn_end_windows ends every window of one type the same way (a
 * translator's choice on a child's coming or going).
 *
 * Concurrency: the held list is walked under cl->timers_lock, comparing
 * lk->owner (atomic) only; a match is pinned by taking its lk->m there
 * (find_locked), then checked and changed. The release is posted to the
 * event loop: a notice may come from inside a call of ours (a brick in the
 * same process), which must not wind more.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "core/fops-util.h"
#include "txn-priv.h"

/* Does lock set s name what the notice names? */
static bool set_matches(const struct bfs_lkset *s, const struct bfs_upcall *up)
{
    bool entry = up->kind == BFS_UPCALL_ENTRYLK_CONTENTION;
    if ((s->kind == BFS_LKSET_ENTRY) != entry || !up->domain || !s->domain ||
        strcmp(s->domain, up->domain) != 0 || !bfs_gfid_eq(&s->loc.gfid, &up->gfid))
        return false;
    if (!entry)
        return true;
    return (!s->basename && !up->name) ||
           (s->basename && up->name && strcmp(s->basename, up->name) == 0);
}

static void release_task(void *arg)
{
    bfs__txn_start_release(arg);
}

/* lk->m held: ends the window. True when the caller must start the
 * release (lk is idle and now RELEASING). */
static bool __end_now(struct bfs_txn_lock *lk)
{
    if (lk->state != BFS_TXL_ACQUIRING && lk->state != BFS_TXL_HELD)
        return false;
    lk->release_now = true; /* no joiner, no delayed post-op (leave() releases) */
    if (lk->state == BFS_TXL_HELD && !lk->active) {
        bfs__txn_timer_disarm(lk);
        lk->state = BFS_TXL_RELEASING;
        return true;
    }
    return false;
}

/* lk->m held, lk's owner is the notice's: ends the window if the notice
 * names one of its lock sets. */
static bool __end_window(struct bfs_txn_lock *lk, const struct bfs_upcall *up)
{
    bool named = false;
    for (int s = 0; s < lk->nsets && !named; s++)
        named = set_matches(&lk->sets[s], up);
    return named && __end_now(lk);
}

/* The shared lock of cl whose owner is `owner`, with lk->m held, or NULL.
 * Found under cl->timers_lock, where lk->m may only be tried (the lock
 * order is lk->m, then timers_lock): a lock in the held list whose mutex we
 * hold cannot become FREE (that takes lk->m) nor be freed. Busy: look
 * again; still busy after many tries, give the notice up (the window bound
 * covers it). */
static struct bfs_txn_lock *find_locked(struct bfs_cluster *cl, uint64_t owner)
{
    for (int tries = 0; tries < 1000; tries++) {
        struct bfs_txn_lock *found = NULL;
        bool busy = false;
        pthread_mutex_lock(&cl->timers_lock);
        for (struct bfs_txn_lock *l = cl->held; l; l = l->held_next) {
            if (__atomic_load_n(&l->owner, __ATOMIC_RELAXED) == owner) {
                if (pthread_mutex_trylock(&l->m) == 0)
                    found = l;
                else
                    busy = true;
                break;
            }
        }
        pthread_mutex_unlock(&cl->timers_lock);
        if (found || !busy)
            return found;
        sched_yield();
    }
    XL_DBG(cl->xl, "contention notice for lock owner %llx: its lock stayed busy",
           (unsigned long long)owner);
    return NULL;
}

bool bfs_txn_contention(struct bfs_cluster *cl, const struct bfs_upcall *up)
{
    if (!bfs_upcall_is_contention(up->kind))
        return false;
    struct bfs_txn_lock *lk = up->owner ? find_locked(cl, up->owner) : NULL;
    if (!lk)
        return true; /* not ours, or that window is over already */
    bool release = lk->stack && lk->stack->lk_owner == up->owner && __end_window(lk, up);
    pthread_mutex_unlock(&lk->m);
    XL_DBG(cl->xl, "contention notice for lock owner %llx: %s",
           (unsigned long long)up->owner, release ? "releasing now" : "released when idle");
    /* a RELEASING lock keeps its inode (and so itself) until the release
     * is over */
    if (release && (!cl->loop || bfs_loop_post(cl->loop, release_task, lk) < 0))
        bfs__txn_start_release(lk); /* no loop: here rather than never */
    return true;
}

void bfs_txn_end_windows(struct bfs_cluster *cl, int type)
{
    size_t n;
    struct bfs__txn_held *v = bfs__txn_held_refs(cl, &n);
    for (size_t i = 0; i < n; i++) {
        struct bfs_txn_lock *lk = v[i].lk;
        pthread_mutex_lock(&lk->m);
        bool release = lk->type == type && __end_now(lk);
        pthread_mutex_unlock(&lk->m);
        /* RELEASING, lk keeps its inode until the release is over */
        if (release && (!cl->loop || bfs_loop_post(cl->loop, release_task, lk) < 0))
            bfs__txn_start_release(lk);
        bfs_inode_unref(v[i].inode);
    }
    free(v);
}

size_t bfs_txn_held_objects(struct bfs_cluster *cl, int type, struct bfs_gfid *out, size_t max)
{
    size_t n, k = 0;
    struct bfs__txn_held *v = bfs__txn_held_refs(cl, &n);
    for (size_t i = 0; i < n; i++) {
        struct bfs_txn_lock *lk = v[i].lk;
        pthread_mutex_lock(&lk->m);
        if (k < max && lk->type == type && lk->state != BFS_TXL_FREE && lk->nobj > 0)
            out[k++] = lk->obj[0];
        pthread_mutex_unlock(&lk->m);
        bfs_inode_unref(v[i].inode);
    }
    free(v);
    return k;
}
