/*
 * replicate-lookup.c — lookup: ask every up child (with our pending keys in
 * xattr-req), combine the answers (afr_lookup_combine), remember which
 * copies are good in the inode context, and start a heal when the counters
 * or the copies disagree. With cluster.background-self-heal-count 0 the
 * heal runs first and the caller is answered by a fresh lookup afterwards
 * (the heal job takes the frame); otherwise the heal is queued and the
 * lookup answers at once from a good copy.
 *
 * The same wind/gather pair serves reads that must refresh a stale inode
 * context (replicate-read.c).
 *
 * Lifetime: struct afr_lookup lives from the fop call to its answer (or to
 * the hand-over of the frame to a heal job).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/graph.h"
#include "replicate.h"

enum { L_WIND = 1, L_DONE };

struct afr_lookup {
    struct bfs_op op; /* first */
    struct afr_priv *p;
    struct bfs_lookup_req *req; /* the caller's request (our copy) */
    struct bfs_dict *xdata;     /* what we send: theirs plus xattr-req */
    bool no_heal;
    uint32_t asked;
};

/* ---- shared with reads ---- */

int afr_refresh_wind(struct bfs_op *op, const struct afr_priv *p, const struct bfs_gfid *g,
                     uint32_t mask)
{
    struct bfs_lookup_req req = {.xdata = afr_lookup_xdata(p, NULL)};
    if (!req.xdata)
        return -ENOMEM;
    req.loc.gfid = *g;
    bfs_op_reset_replies(op);
    bfs_op_expect(op, bfs_mask_count(mask));
    for (int i = 0; i < p->n; i++)
        if (bfs_mask_has(mask, i))
            bfs_op_wind(op, i, BFS_FOP_LOOKUP, p->xl->children[i], &req);
    bfs_dict_unref(req.xdata);
    return 0;
}

void afr_refresh_gather(const struct afr_priv *p, const struct bfs_op *op, uint32_t asked,
                        struct afr_state *s, int *rc)
{
    memset(s, 0, sizeof(*s));
    s->n = p->n;
    s->arbiter = p->arbiter;
    for (int i = 0; i < p->n; i++) {
        rc[i] = -ENOTCONN;
        if (!bfs_mask_has(asked, i))
            continue;
        const struct bfs_op_reply *r = &op->replies[i];
        rc[i] = r->valid ? r->rc : -ENOTCONN;
        if (rc[i] < 0 || !r->rep)
            continue;
        const struct bfs_lookup_rep *rep = r->rep;
        s->attr[i] = rep->attr;
        afr_state_add_row(p, s, i, rep->xdata);
    }
}

/* ---- the op ---- */

static void lookup_destroy(struct bfs_op *op)
{
    struct afr_lookup *l = (struct afr_lookup *)op;
    bfs_lookup_req_free(l->req);
    bfs_dict_unref(l->xdata);
    free(l);
}

/* The parent's entry sources, if its context is fresh (0: unknown). */
static uint32_t parent_readable(struct afr_lookup *l)
{
    const struct bfs_loc *loc = &l->req->loc;
    struct bfs_xl *xl = l->op.xl;
    if (!loc->name || bfs_gfid_is_null(&loc->pargfid) || !xl->graph || !xl->graph->itable)
        return 0;
    struct bfs_inode *par = bfs_inode_find(xl->graph->itable, &loc->pargfid);
    uint32_t r = 0;
    uint64_t v;
    if (par && bfs_inode_ctx_get(par, xl, &v) == 0) {
        struct afr_inode *c = (struct afr_inode *)(uintptr_t)v;
        bool split;
        if (afr_ictx_fresh(l->p, c))
            r = afr_ictx_readable(c, AFR_ENTRY, &split, NULL);
    }
    if (par)
        bfs_inode_unref(par);
    return r;
}

/* Updates the inode context; returns the types whose dirty marks and
 * counters our own windows explain (they are in motion): data when our
 * writer holds the file's data lock, entry when we hold the directory's
 * entry window. */
static uint32_t remember(struct afr_lookup *l, const struct bfs_iatt *attr,
                         const struct afr_lookup_out *o)
{
    struct bfs_inode *inode = afr_inode_of_gfid(l->op.xl, &attr->gfid, attr->mode & S_IFMT);
    struct afr_inode *c = afr_ictx(l->op.xl, inode);
    uint32_t ours = 0;
    if (c) {
        afr_ictx_update(l->p, c, attr->mode, o);
        if (bfs_txn_lock_state(&c->dlock) != BFS_TXL_FREE)
            ours |= BFS_BIT(AFR_DATA);
        if (bfs_txn_lock_state(&c->elock) != BFS_TXL_FREE)
            ours |= BFS_BIT(AFR_ENTRY);
        afr_recent_keep(l->p, inode);
    }
    if (inode)
        bfs_inode_unref(inode);
    return ours;
}

static void noop_task(void *arg)
{
    (void)arg;
}

/* Does a copy among those that answered blame another for entries? */
static bool entry_blamed(const struct afr_state *s)
{
    for (int i = 0; i < s->n; i++)
        for (int j = 0; j < s->n && bfs_mask_has(s->valid, i); j++)
            if (j != i && s->pending[i][j][AFR_ENTRY] != 0)
                return true;
    return false;
}

/* A directory under our entry window whose entries need a heal: dirty
 * marks alone are the window's own (no heal); a copy blamed or left out
 * (not readable among those that answered), or a split-brain, needs the
 * heal, which needs the directory's lock: the window ends now rather than
 * by the heal's contention notice (or, for the self-heal daemon's try
 * locks, which send none, by the window's age). */
static void entry_window_heal(struct afr_lookup *l, const struct bfs_iatt *attr,
                              const struct afr_state *s, struct afr_lookup_out *o)
{
    if (!(o->heal & BFS_BIT(AFR_ENTRY)))
        return;
    if (!entry_blamed(s) && !o->split[AFR_ENTRY] && (s->valid & ~o->readable[AFR_ENTRY]) == 0) {
        o->heal &= ~BFS_BIT(AFR_ENTRY);
        return;
    }
    struct bfs_inode *inode = afr_inode_of_gfid(l->op.xl, &attr->gfid, S_IFDIR);
    uint64_t v = 0;
    if (inode && bfs_inode_ctx_get(inode, l->op.xl, &v) == 0 && v)
        (void)bfs_txn_lock_flush(&((struct afr_inode *)(uintptr_t)v)->elock, noop_task, NULL);
    if (inode)
        bfs_inode_unref(inode);
}

/* Starts the heal the answers call for. true: the heal job took the frame. */
static bool heal(struct afr_lookup *l, const struct afr_lookup_out *o,
                 const struct bfs_gfid *gfid)
{
    struct afr_priv *p = l->p;
    struct afr_heal_req hr = {0};
    for (int t = 0; t < AFR_NTYPES; t++)
        if ((o->heal & BFS_BIT(t)) && __atomic_load_n(&p->heal_on[t], __ATOMIC_RELAXED))
            hr.types |= BFS_BIT(t);
    if (hr.types && o->rc == 0)
        hr.gfid = *gfid;
    else
        hr.types = 0;
    const struct bfs_loc *loc = &l->req->loc;
    if (o->entry_mismatch && loc->name && !bfs_gfid_is_null(&loc->pargfid) &&
        __atomic_load_n(&p->heal_on[AFR_ENTRY], __ATOMIC_RELAXED))
        hr.pargfid = loc->pargfid;
    if (!hr.types && bfs_gfid_is_null(&hr.pargfid))
        return false;
    if (__atomic_load_n(&p->heal_count, __ATOMIC_RELAXED) == 0) {
        hr.frame = l->op.frame;
        hr.req = l->req;
        if (afr_heal_request(p, &hr) == 0) {
            l->req = NULL; /* taken by the heal job */
            return true;
        }
        return false;
    }
    (void)afr_heal_request(p, &hr); /* -EBUSY: the next access tries again */
    return false;
}

static int lookup_done(struct afr_lookup *l)
{
    struct afr_priv *p = l->p;
    struct bfs_op *op = &l->op;
    struct afr_state *s = malloc(sizeof(*s));
    int rc[AFR_MAX];
    struct afr_lookup_out o;
    if (!s) {
        bfs_unwind_lookup(op->frame, -ENOMEM, NULL);
        return BFS_OP_DONE;
    }
    afr_refresh_gather(p, op, l->asked, s, rc);
    afr_lookup_combine(s, l->asked, rc, __atomic_load_n(&p->fav_policy, __ATOMIC_RELAXED),
                       parent_readable(l), &o);
    struct bfs_lookup_rep rep = {0};
    if (o.child >= 0)
        rep = *(const struct bfs_lookup_rep *)op->replies[o.child].rep;
    uint32_t ours = o.rc == 0 ? remember(l, &rep.attr, &o) : 0;
    o.heal &= ~(ours & BFS_BIT(AFR_DATA));
    if (ours & BFS_BIT(AFR_ENTRY))
        entry_window_heal(l, &rep.attr, s, &o);
    bool taken = !l->no_heal && heal(l, &o, &rep.attr.gfid);
    free(s);
    if (taken)
        return BFS_OP_DONE;
    rep.xdata = o.rc == 0 ? afr_xdata_strip(p, rep.xdata) : NULL;
    bfs_unwind_lookup(op->frame, o.rc, o.rc == 0 ? &rep : NULL);
    bfs_dict_unref(rep.xdata);
    return BFS_OP_DONE;
}

static int lookup_step(struct bfs_op *op)
{
    struct afr_lookup *l = (struct afr_lookup *)op;
    struct afr_priv *p = l->p;
    switch (op->state) {
    case L_WIND: {
        l->asked = afr_up(p);
        if (!l->asked) {
            bfs_unwind_lookup(op->frame, -ENOTCONN, NULL);
            return BFS_OP_DONE;
        }
        struct bfs_lookup_req req = *l->req;
        req.xdata = l->xdata;
        bfs_op_expect(op, bfs_mask_count(l->asked));
        for (int i = 0; i < p->n; i++)
            if (bfs_mask_has(l->asked, i))
                bfs_op_wind(op, i, BFS_FOP_LOOKUP, p->xl->children[i], &req);
        op->state = L_DONE;
        return BFS_OP_WAIT;
    }
    case L_DONE:
        return lookup_done(l);
    }
    return BFS_OP_DONE;
}

/* Runs a lookup op over req (taken). On failure the frame is not answered. */
static int lookup_start(struct bfs_xl *xl, struct bfs_frame *frame, struct bfs_lookup_req *req,
                        bool no_heal)
{
    struct afr_priv *p = afr_priv(xl);
    struct afr_lookup *l = calloc(1, sizeof(*l));
    if (!l || !(l->xdata = afr_lookup_xdata(p, req->xdata)) ||
        bfs_op_init(&l->op, frame, xl, p->n, lookup_step, lookup_destroy) < 0) {
        if (l)
            bfs_dict_unref(l->xdata);
        free(l);
        bfs_lookup_req_free(req);
        return -ENOMEM;
    }
    l->p = p;
    l->req = req;
    l->no_heal = no_heal;
    l->op.state = L_WIND;
    bfs_op_run(&l->op);
    return 0;
}

int afr_lookup(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_lookup_req *req)
{
    struct bfs_lookup_req *copy = bfs_lookup_req_dup(req);
    if (!copy)
        return -ENOMEM;
    return lookup_start(xl, frame, copy, false);
}

void afr_lookup_resume(struct bfs_xl *xl, struct bfs_frame *frame, struct bfs_lookup_req *req)
{
    if (lookup_start(xl, frame, req, true) < 0)
        bfs_unwind_lookup(frame, -ENOMEM, NULL);
}
