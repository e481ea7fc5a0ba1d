/*
 * replicate-heal.c — when and where heals run, and what every heal does
 * around its own work: lock, inspect the pending matrix under the lock,
 * decide, and afterwards reset the counters, update the inode context and
 * unlock (docs/design/replicate.md, "Heal").
 *
 * Heals are the cold path: they run on the shared heal queue's thread
 * (lib/healq.c, also disperse's) as straight-line code over the blocking
 * bfs_sync_* wrappers (the self-heal
 * daemon will call afr_heal_{data,meta,entry} the same way). A lookup asks
 * for a heal with afr_heal_request():
 *   background  queued (at most cluster.background-self-heal-count, same
 *               inode merged); the lookup has answered already;
 *   foreground  the job carries the lookup's frame and request and answers
 *               it with a fresh lookup once the heal is done.
 *
 * Lifetimes: a job from request to the end of its run (or to fini, where a
 * foreground job's frame is answered ENOTCONN). A struct afr_hctx lives on
 * the heal thread's stack for one heal of one type on one inode; its stack
 * (uid 0, its own lock owner) is freed by afr_heal_end().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/event.h"
#include "core/graph.h"
#include "replicate.h"
#include "xlators/lib/upcall-mark.h"

/* ---- building blocks ---- */

int afr_hsync(struct afr_hctx *h, int i, int fop, const void *req, void *rep)
{
    return bfs_sync_any(fop, h->p->xl->children[i], h->st, req, rep);
}

/* cmd: BFS_LK_SETLK (never waits: EAGAIN when held elsewhere) or 0 (unlock). */
static int lock_one(struct afr_hctx *h, int i, int cmd)
{
    if (h->lk.kind == BFS_LKSET_INODE) {
        struct bfs_inodelk_req req;
        bfs_lkset_inodelk_req(&h->lk, h->st->lk_owner, cmd, &req);
        return afr_hsync(h, i, BFS_FOP_INODELK, &req, NULL);
    }
    struct bfs_entrylk_req req;
    bfs_lkset_entrylk_req(&h->lk, cmd, &req);
    return afr_hsync(h, i, BFS_FOP_ENTRYLK, &req, NULL);
}

static void unlock_all(struct afr_hctx *h)
{
    for (int i = h->p->n - 1; i >= 0; i--)
        if (bfs_mask_has(h->locked, i))
            (void)lock_one(h, i, 0);
    h->locked = 0;
}

static bool healer_stopping(const struct afr_priv *p);

static uint32_t up_of(void *arg)
{
    return afr_up(arg);
}

static bool stopping_of(void *arg)
{
    return healer_stopping(arg);
}

/*
 * Takes the heal's lock on every up child (lib/lk.c,
 * bfs_lkset_trylock_sync_stop): one round of non-blocking requests; if a
 * child answers EAGAIN, what was taken is released and the lock asked for
 * again with blocking requests in child order, so that the holder hears
 * someone waits (a writer's eager window then lets go: without that, a
 * foreground heal of a file another client kept writing waited out the
 * whole cluster.heal-lock-timeout), each cancelled once
 * cluster.heal-lock-timeout has passed or the healer stops. Unbounded, a
 * blocking request would wait for as long as the holder keeps the lock: a
 * client stopped while holding it (its connection stays open), or a lock a
 * brick kept because the unlock never reached it; the heal thread is one
 * per translator and a foreground heal holds a lookup's answer, so one
 * such lock would stop every heal and hang that lookup for good. Giving
 * up costs nothing: the counters stay, the next access heals. The
 * self-heal daemon's heals (heal_try) give up after the first busy round:
 * the daemon comes back to the entry on its next pass.
 * 0, -ENOTCONN (nothing up) or -EAGAIN (still held elsewhere).
 */
static int lock_all(struct afr_hctx *h)
{
    struct afr_priv *p = h->p;
    uint64_t ms = p->heal_try ? 0 : __atomic_load_n(&p->heal_lock_ms, __ATOMIC_RELAXED);
    return bfs_lkset_trylock_sync_stop(&h->lk, p->xl, h->st, up_of, stopping_of, p, ms,
                                       &h->locked);
}

static void hctx_free(struct afr_hctx *h)
{
    bfs_lkset_clear(&h->lk);
    bfs_stack_unref(h->st);
    h->st = NULL;
}

/* Looks the inode up on every locked child, counters included. */
static void inspect(struct afr_hctx *h)
{
    struct afr_priv *p = h->p;
    struct bfs_lookup_req req = {.xdata = afr_lookup_xdata(p, NULL)};
    req.loc.gfid = h->gfid;
    memset(&h->s, 0, sizeof(h->s));
    h->s.n = p->n;
    h->s.arbiter = p->arbiter;
    for (int i = 0; i < p->n; i++) {
        h->rc[i] = -ENOTCONN;
        if (!bfs_mask_has(h->locked, i) || !req.xdata)
            continue;
        struct bfs_lookup_rep rep;
        h->rc[i] = afr_hsync(h, i, BFS_FOP_LOOKUP, &req, &rep);
        if (h->rc[i] >= 0) {
            h->s.attr[i] = rep.attr;
            afr_state_add_row(p, &h->s, i, rep.xdata);
        }
        bfs_lookup_rep_clear_dup(&rep);
    }
    bfs_dict_unref(req.xdata);
}

int afr_heal_begin(struct afr_hctx *h, struct afr_priv *p, const struct bfs_gfid *g, int t,
                   int force)
{
    memset(h, 0, sizeof(*h));
    h->p = p;
    h->gfid = *g;
    h->type = t;
    if (!(h->st = bfs_heal_stack_new()))
        return -ENOMEM;
    if (bfs_lkset_init(&h->lk, t == AFR_ENTRY ? BFS_LKSET_ENTRY : BFS_LKSET_INODE,
                       p->cl.domain[t], g, NULL) < 0) {
        bfs_stack_unref(h->st);
        return -ENOMEM;
    }
    int rc = lock_all(h);
    if (rc < 0) {
        char gs[BFS_GFID_STRLEN];
        if (rc == -EAGAIN)
            XL_INFO(p->xl, "heal: the %s lock of %s is held elsewhere; heal deferred",
                    t == AFR_DATA ? "data" : t == AFR_METADATA ? "metadata" : "entry",
                    bfs_gfid_fmt(g, gs));
        hctx_free(h);
        return rc;
    }
    inspect(h);
    if (!h->s.valid) {
        unlock_all(h);
        hctx_free(h);
        return -ENOENT;
    }
    afr_decide(&h->s, t, __atomic_load_n(&p->fav_policy, __ATOMIC_RELAXED), force, &h->d);
    return 0;
}

/* Subtracts, on child i, the counters read under the lock that concern
 * the children of `good`. */
static void reset_row(struct afr_hctx *h, int i, uint32_t good)
{
    struct afr_priv *p = h->p;
    int t = h->type;
    struct bfs_dict *d = bfs_dict_new();
    if (!d)
        return;
    for (int j = 0; j < p->n; j++) {
        int64_t v = h->s.pending[i][j][t];
        if (!v || !bfs_mask_has(good, j))
            continue;
        int64_t row[AFR_NTYPES] = {0};
        row[t] = -v;
        (void)afr_dict_add_row(p, d, j, row);
    }
    if (h->s.dirty[i][t] && bfs_mask_has(good, i)) {
        int64_t row[AFR_NTYPES] = {0};
        row[t] = -h->s.dirty[i][t];
        (void)afr_dict_add_row(p, d, -1, row);
    }
    if (bfs_dict_count(d)) {
        struct bfs_xattrop_req req = {.optype = BFS_XATTROP_ADD64, .xattrs = d};
        req.loc.gfid = h->gfid;
        int rc = afr_hsync(h, i, BFS_FOP_XATTROP, &req, NULL);
        if (rc < 0)
            XL_WARN(p->xl, "heal: cannot reset the counters on %s: %s",
                    p->xl->children[i]->name, strerror(-rc));
    }
    bfs_dict_unref(d);
}

void afr_heal_end(struct afr_hctx *h, uint32_t healed, bool split)
{
    struct afr_priv *p = h->p;
    struct bfs_xl *xl = p->xl;
    if (!split && healed)
        for (int i = 0; i < p->n; i++)
            if (bfs_mask_has(h->s.valid, i))
                reset_row(h, i, healed);
    struct bfs_inode *inode =
        xl->graph && xl->graph->itable ? bfs_inode_find(xl->graph->itable, &h->gfid) : NULL;
    uint64_t v;
    if (inode && bfs_inode_ctx_get(inode, xl, &v) == 0 && v) {
        uint32_t readable = h->type == AFR_DATA ? afr_data_mask(p, healed) : healed;
        /* An entry heal with nothing to do under the lock (the change
         * whose dirty mark started it was over) changed nothing: the
         * copies its decision found readable still are (none left the
         * folder's listings failing ENOTCONN until its next lookup; most
         * entry heals under another client's entry window end so). Only
         * entries: data and metadata heals keep their rule. */
        if (!healed && !split && h->type == AFR_ENTRY && !h->d.needs_heal)
            readable = h->d.readable;
        afr_ictx_healed(p, (struct afr_inode *)(uintptr_t)v, h->type, readable, split);
    }
    if (inode)
        bfs_inode_unref(inode);
    unlock_all(h);
    bfs_upcall_local(xl, &h->gfid, false); /* the heal changed copies below md-cache */
    hctx_free(h);
    if (split)
        __atomic_add_fetch(&p->n_split, 1, __ATOMIC_RELAXED);
}

int afr_heal_mark_new(struct afr_hctx *h, int src, const struct bfs_gfid *g, uint32_t mode,
                      uint32_t sinks)
{
    struct afr_priv *p = h->p;
    struct bfs_dict *d = bfs_dict_new();
    if (!d)
        return -ENOMEM;
    for (int j = 0; j < p->n; j++) {
        if (!bfs_mask_has(sinks, j))
            continue;
        int64_t row[AFR_NTYPES] = {0};
        row[AFR_DATA] = S_ISREG(mode) && j != p->arbiter;
        row[AFR_METADATA] = 1;
        row[AFR_ENTRY] = S_ISDIR(mode);
        (void)afr_dict_add_row(p, d, j, row);
    }
    struct bfs_xattrop_req req = {.optype = BFS_XATTROP_ADD64, .xattrs = d};
    req.loc.gfid = *g;
    int rc = afr_hsync(h, src, BFS_FOP_XATTROP, &req, NULL);
    bfs_dict_unref(d);
    return rc;
}

/* ---- the heal queue (lib/healq.c) ---- */

static void run_job(void *owner, void *job)
{
    struct afr_priv *p = owner;
    struct afr_heal_req *r = job;
    if (r->vop) {
        afr_vop_run(p, r);
        return;
    }
    int rc = 0;
    if (!bfs_gfid_is_null(&r->pargfid))
        rc = afr_heal_entry(p, &r->pargfid);
    if (r->types & BFS_BIT(AFR_ENTRY))
        rc = afr_heal_entry(p, &r->gfid) < 0 ? -1 : rc;
    if (r->types & BFS_BIT(AFR_METADATA))
        rc = afr_heal_meta(p, &r->gfid, -1) < 0 ? -1 : rc;
    if (r->types & BFS_BIT(AFR_DATA))
        rc = afr_heal_data(p, &r->gfid, -1) < 0 ? -1 : rc;
    __atomic_add_fetch(rc < 0 ? &p->n_heal_fail : &p->n_heal_ok, 1, __ATOMIC_RELAXED);
    if (r->frame)
        afr_lookup_resume(p->xl, r->frame, r->req);
}

/* A foreground job that will never run: its lookup is answered. */
static void drop_job(void *owner, void *job)
{
    (void)owner;
    struct afr_heal_req *r = job;
    if (r->vop) {
        afr_vop_cancel(r);
    } else if (r->frame) {
        bfs_unwind_lookup(r->frame, -ENOTCONN, NULL);
        bfs_lookup_req_free(r->req);
    }
}

/* A background job for the same inode and parent already waiting? */
static bool merge_job(void *queued, const void *job)
{
    struct afr_heal_req *q = queued;
    const struct afr_heal_req *j = job;
    if (q->vop || j->vop || !bfs_gfid_eq(&q->gfid, &j->gfid) ||
        !bfs_gfid_eq(&q->pargfid, &j->pargfid))
        return false;
    q->types |= j->types;
    return true;
}

static const struct bfs_healq_ops heal_ops = {.run = run_job, .drop = drop_job,
                                              .merge = merge_job};

static bool healer_stopping(const struct afr_priv *p)
{
    return bfs_healq_stopping(p->healq);
}

int afr_heal_start(struct afr_priv *p)
{
    return bfs_healq_start(&p->healq, p, sizeof(struct afr_heal_req), &heal_ops);
}

void afr_heal_stop(struct afr_priv *p)
{
    bfs_healq_stop(p->healq);
    p->healq = NULL;
}

int afr_heal_request(struct afr_priv *p, const struct afr_heal_req *r)
{
    size_t limit = (size_t)__atomic_load_n(&p->heal_count, __ATOMIC_RELAXED);
    /* A daemon's request (vop) waits for an answer like a lookup: never refused. */
    return bfs_healq_push(p->healq, r, r->frame != NULL || r->vop, limit);
}

void afr_heal_left(struct afr_priv *p, const struct bfs_gfid *g)
{
    if (!p->healq || !__atomic_load_n(&p->heal_on[AFR_ENTRY], __ATOMIC_RELAXED))
        return;
    struct afr_heal_req r = {.gfid = *g, .types = BFS_BIT(AFR_ENTRY)};
    size_t limit = (size_t)__atomic_load_n(&p->heal_count, __ATOMIC_RELAXED);
    (void)bfs_healq_push(p->healq, &r, false, limit < AFR_LEFT ? AFR_LEFT : limit);
}

size_t afr_heal_queued(struct afr_priv *p)
{
    return bfs_healq_queued(p->healq);
}
