/*
 * disperse-lookup.c — lookup, stat and fstat: ask every up child (with our
 * keys in xattr-req), combine (ec_combine: good children by version, the
 * size from the size xattr), remember the result in the inode context, and
 * for lookups start a heal when children disagree. With
 * cluster.background-self-heal-count 0 the heal runs first and the caller
 * is answered by a fresh lookup afterwards (the heal job takes the frame).
 *
 * stat and fstat are the same op by GFID: a brick's size is a fragment
 * size, the file's is in the size xattr.
 *
 * Early answers (performance-notes.md 34): the caller is answered as soon
 * as enough replies agree (early_pick) that no acknowledged change can be
 * missing from them; the op then waits for the others and does the full
 * combine behind the answer (inode context, heal), exactly as when it
 * answers last. The answer is the one the full combine gives when the late
 * replies agree: the attributes come from the same child (the first asked).
 *
 * Lifetime: struct ec_lookup from the fop call to its answer (or to the
 * hand-over of the frame to a heal job); after an early answer, until the
 * last reply is in (op->frame is NULL then).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/graph.h"
#include "disperse.h"

enum { L_WIND = 1, L_GATHER, L_DONE };

struct ec_lookup {
    struct bfs_op op; /* first */
    struct ec_priv *p;
    int fop;                    /* LOOKUP, STAT or FSTAT */
    struct bfs_lookup_req *req; /* the lookup to make (our copy) */
    struct bfs_dict *xdata;     /* what we send: theirs plus xattr-req */
    bool no_heal;
    bool early;                 /* may answer before every reply is in */
    bool answered;              /* answered early: the combine runs for its effects */
    uint64_t answered_ns;       /* when (statistics: the wait saved) */
    uint64_t cseq;              /* the inode context's cseq when answered early */
    uint32_t asked;
    uint64_t seq;               /* priv->dseq when wound */
};

int ec_refresh_wind(struct bfs_op *op, const struct ec_priv *p, const struct bfs_gfid *g,
                    uint32_t mask)
{
    struct bfs_lookup_req req = {.xdata = ec_lookup_xdata(NULL)};
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

void ec_refresh_gather(const struct ec_priv *p, const struct bfs_op *op, uint32_t asked,
                       struct ec_state *s, int *rc)
{
    memset(s, 0, sizeof(*s));
    for (int i = 0; i < p->n; i++) {
        rc[i] = -ENOTCONN;
        if (!bfs_mask_has(asked, i))
            continue;
        const struct bfs_op_reply *r = &op->replies[i];
        rc[i] = r->valid ? r->rc : -ENOTCONN;
        if (rc[i] < 0 || !r->rep)
            continue;
        const struct bfs_lookup_rep *rep = r->rep;
        ec_state_add(s, i, &rep->attr, rep->xdata);
    }
}

static void lookup_destroy(struct bfs_op *op)
{
    struct ec_lookup *l = (struct ec_lookup *)op;
    bfs_lookup_req_free(l->req);
    bfs_dict_unref(l->xdata);
    free(l);
}

/* Updates the inode context; returns the types whose heal our own windows
 * explain: data when our writer holds the file's data lock, entry when we
 * hold the directory's entry window (their dirty marks are the window's
 * own). */
static uint32_t remember(struct ec_lookup *l, const struct bfs_iatt *attr,
                         const struct ec_view *v)
{
    struct bfs_inode *inode = ec_inode_of_gfid(l->op.xl, &attr->gfid, attr->mode & S_IFMT);
    struct ec_inode *c = ec_ictx(l->op.xl, inode);
    uint32_t ours = 0;
    if (c) {
        /* answered early: a change the caller made since may have set the
         * good children already, and this view is older than that */
        if (l->answered)
            ec_ictx_update_if(l->p, c, attr->mode, v, l->seq, l->cseq);
        else
            ec_ictx_update(l->p, c, attr->mode, v, l->seq);
        if (bfs_txn_lock_state(&c->dlock) != BFS_TXL_FREE)
            ours |= BFS_BIT(EC_DATA);
        if (bfs_txn_lock_state(&c->elock) != BFS_TXL_FREE)
            ours |= BFS_BIT(EC_ENTRY);
    }
    if (inode)
        bfs_inode_unref(inode);
    return ours;
}

static void noop_task(void *arg)
{
    (void)arg;
}

/* Releases our entry window on the directory now (its heal needs the
 * directory's lock; the heal retries until it gets it). */
static void end_entry_window(struct ec_lookup *l, const struct bfs_iatt *attr)
{
    struct bfs_inode *inode = ec_inode_of_gfid(l->op.xl, &attr->gfid, S_IFDIR);
    struct ec_inode *c = ec_ictx_peek(l->op.xl, inode);
    if (c)
        (void)bfs_txn_lock_flush(&c->elock, noop_task, NULL);
    if (inode)
        bfs_inode_unref(inode);
}

/* Starts the heal the answers call for. true: the heal job took the frame. */
static bool heal(struct ec_lookup *l, const struct ec_view *v, const struct bfs_iatt *attr)
{
    struct ec_priv *p = l->p;
    struct ec_heal_req hr = {0};
    for (int t = 0; t < EC_NTYPES; t++)
        if ((v->heal & BFS_BIT(t)) && __atomic_load_n(&p->heal_on[t], __ATOMIC_RELAXED))
            hr.types |= BFS_BIT(t);
    const struct bfs_loc *loc = &l->req->loc;
    if (v->entry_mismatch && v->rc == 0 && loc->name && !bfs_gfid_is_null(&loc->pargfid) &&
        __atomic_load_n(&p->heal_on[EC_ENTRY], __ATOMIC_RELAXED)) {
        hr.pargfid = loc->pargfid;
        /* the copies the entry heal makes are empty: heal what they hold next */
        hr.types |= BFS_BIT(EC_META) | (S_ISREG(attr->mode) ? BFS_BIT(EC_DATA) : 0) |
                    (S_ISDIR(attr->mode) ? BFS_BIT(EC_ENTRY) : 0);
    }
    /* dirty marks alone are most often another client's open window: its
     * lock is tried once, not waited for */
    hr.once = !(hr.types & v->lag) && !v->entry_mismatch;
    if (hr.types && v->rc == 0)
        hr.gfid = attr->gfid;
    else
        hr.types = 0;
    if (!hr.types && bfs_gfid_is_null(&hr.pargfid))
        return false;
    if (__atomic_load_n(&p->heal_count, __ATOMIC_RELAXED) == 0 && !l->answered) {
        hr.frame = l->op.frame;
        hr.req = l->req;
        if (ec_heal_request(p, &hr) == 0) {
            l->req = NULL; /* taken by the heal job */
            return true;
        }
        return false;
    }
    (void)ec_heal_request(p, &hr); /* -EBUSY: the next access tries again */
    return false;
}

/* Statistics of an answer given with `got` replies in. */
static void count_answer(struct ec_lookup *l, int got, bool early)
{
    struct ec_priv *p = l->p;
    __atomic_add_fetch(&p->n_lookup, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&p->n_lookup_waited, (uint64_t)got, __ATOMIC_RELAXED);
    if (early)
        __atomic_add_fetch(&p->n_lookup_early, 1, __ATOMIC_RELAXED);
}

static int replies_in(const struct ec_lookup *l)
{
    int got = 0;
    for (int i = 0; i < l->p->n; i++)
        got += bfs_mask_has(l->asked, i) && l->op.replies[i].valid;
    return got;
}

static void unwind_stat(struct bfs_frame *frame, int fop, int rc, const struct bfs_iatt *attr)
{
    if (fop == BFS_FOP_STAT) {
        struct bfs_stat_rep rep = {0};
        if (rc >= 0)
            rep.attr = *attr;
        bfs_unwind_stat(frame, rc, rc >= 0 ? &rep : NULL);
    } else {
        struct bfs_fstat_rep rep = {0};
        if (rc >= 0)
            rep.attr = *attr;
        bfs_unwind_fstat(frame, rc, rc >= 0 ? &rep : NULL);
    }
}

static int answer_stat(struct ec_lookup *l, int rc, const struct bfs_iatt *attr)
{
    unwind_stat(l->op.frame, l->fop, rc, attr);
    return BFS_OP_DONE;
}

static int lookup_done(struct ec_lookup *l)
{
    struct ec_priv *p = l->p;
    struct bfs_op *op = &l->op;
    struct ec_state *s = malloc(sizeof(*s));
    int rc[EC_MAX];
    struct ec_view v;
    if (!s) {
        if (l->answered)
            return BFS_OP_DONE;
        if (l->fop != BFS_FOP_LOOKUP)
            return answer_stat(l, -ENOMEM, NULL);
        bfs_unwind_lookup(op->frame, -ENOMEM, NULL);
        return BFS_OP_DONE;
    }
    ec_refresh_gather(p, op, l->asked, s, rc);
    ec_combine(p, s, l->asked, rc, &v);
    free(s);
    struct bfs_lookup_rep rep = {0};
    if (v.rc == 0)
        rep = *(const struct bfs_lookup_rep *)op->replies[v.child].rep;
    uint32_t ours = 0;
    if (v.rc == 0) {
        ours = remember(l, &rep.attr, &v);
        struct ec_inode *c = NULL;
        struct bfs_inode *inode = ec_inode_of_gfid(op->xl, &rep.attr.gfid, 0);
        if (inode && (c = ec_ictx_peek(op->xl, inode)) && (rep.attr.mode & S_IFMT) == S_IFREG)
            (void)ec_ictx_good(c, EC_DATA, NULL, &v.size); /* ours, if a change raced */
        if (inode)
            bfs_inode_unref(inode);
        ec_fix_iatt(p, &rep.attr, v.size);
    }
    if ((ours & v.lag & BFS_BIT(EC_ENTRY)) && (v.heal & BFS_BIT(EC_ENTRY)))
        end_entry_window(l, &rep.attr); /* a stale child: the heal needs the directory */
    else
        v.heal &= ~(ours & BFS_BIT(EC_ENTRY)); /* our window's own dirty marks */
    v.heal &= ~(ours & BFS_BIT(EC_DATA));
    if (l->answered) {
        __atomic_add_fetch(&p->n_lookup_tail_ns, bfs_now_ns() - l->answered_ns, __ATOMIC_RELAXED);
        if (!l->no_heal)
            (void)heal(l, &v, &rep.attr); /* in the background: the frame is answered */
        return BFS_OP_DONE;
    }
    count_answer(l, replies_in(l), false);
    if (l->fop != BFS_FOP_LOOKUP)
        return answer_stat(l, v.rc, &rep.attr);
    if (!l->no_heal && heal(l, &v, &rep.attr))
        return BFS_OP_DONE;
    rep.xdata = v.rc == 0 ? ec_xdata_strip(rep.xdata) : NULL;
    bfs_unwind_lookup(op->frame, v.rc, v.rc == 0 ? &rep : NULL);
    bfs_dict_unref(rep.xdata);
    return BFS_OP_DONE;
}

/* Replies that must agree before an answer: k (the data needs k
 * fragments), and enough that they share a child with every set of
 * quorum children an acknowledged change reached (q + quorum > n). */
static int early_need(const struct ec_priv *p)
{
    int need = p->n - ec_quorum(p) + 1;
    return need > p->k ? need : p->k;
}

/* Can the replies in so far answer for all? 1: yes, from child *pick; 0:
 * not yet; -1: no, wait for all (a failure, a disagreement, a dirty mark,
 * or a data change of ours since the wind, whose size the context has).
 * Agreeing means the same GFID, type, versions and size, no dirty mark:
 * at least one of them took part in every acknowledged change, so none is
 * missing, and the late replies can only add heal work. */
static int early_pick(struct ec_lookup *l, struct ec_state *s, int *pick)
{
    struct ec_priv *p = l->p;
    const struct bfs_op *op = &l->op;
    int ref = -1, count = 0;
    memset(s, 0, sizeof(*s));
    for (int i = 0; i < p->n; i++) {
        const struct bfs_op_reply *r = &op->replies[i];
        if (!bfs_mask_has(l->asked, i) || !r->valid)
            continue;
        if (r->rc < 0 || !r->rep)
            return -1;
        const struct bfs_lookup_rep *rep = r->rep;
        ec_state_add(s, i, &rep->attr, rep->xdata);
        for (int t = 0; t < EC_NTYPES; t++)
            if (s->dirty[i][t] != 0)
                return -1;
        if (ref < 0) {
            ref = i;
        } else if (!bfs_gfid_eq(&s->attr[i].gfid, &s->attr[ref].gfid) ||
                   (s->attr[i].mode & S_IFMT) != (s->attr[ref].mode & S_IFMT) ||
                   memcmp(s->version[i], s->version[ref], sizeof(s->version[i])) != 0 ||
                   s->size[i] != s->size[ref]) {
            return -1;
        }
        count++;
    }
    if (ec_dseq(p) != l->seq)
        return -1;
    int first = bfs_mask_first(l->asked);
    if (count < early_need(p) || !op->replies[first].valid)
        return 0;
    *pick = first;
    return 1;
}

/* L_GATHER: answers now if early_pick allows; the combine follows when
 * all are in. */
static int lookup_gather(struct ec_lookup *l)
{
    struct bfs_op *op = &l->op;
    int pick = -1, got = replies_in(l);
    if (got == bfs_mask_count(l->asked))
        return lookup_done(l);
    if (got < early_need(l->p) || !op->replies[bfs_mask_first(l->asked)].valid)
        return BFS_OP_WAIT_ANY; /* too few to look at (a failure waits as well) */
    struct ec_state *s = malloc(sizeof(*s));
    int can = s ? early_pick(l, s, &pick) : -1;
    uint64_t size = s && pick >= 0 ? s->size[pick] : 0;
    free(s);
    if (can == 0)
        return BFS_OP_WAIT_ANY;
    op->state = L_DONE;
    if (can < 0)
        return BFS_OP_WAIT;
    struct bfs_lookup_rep rep = *(const struct bfs_lookup_rep *)op->replies[pick].rep;
    ec_fix_iatt(l->p, &rep.attr, size);
    struct bfs_frame *frame = op->frame;
    count_answer(l, got, true);
    l->answered = true;
    l->answered_ns = bfs_now_ns();
    struct bfs_inode *inode = ec_inode_of_gfid(op->xl, &rep.attr.gfid, 0);
    l->cseq = ec_ictx_cseq(ec_ictx_peek(op->xl, inode));
    if (inode)
        bfs_inode_unref(inode);
    op->frame = NULL; /* answered: nothing below may use it */
    if (l->fop != BFS_FOP_LOOKUP) {
        unwind_stat(frame, l->fop, 0, &rep.attr);
        return BFS_OP_WAIT;
    }
    rep.xdata = ec_xdata_strip(rep.xdata);
    bfs_unwind_lookup(frame, 0, &rep);
    bfs_dict_unref(rep.xdata);
    return BFS_OP_WAIT;
}

static int lookup_step(struct bfs_op *op)
{
    struct ec_lookup *l = (struct ec_lookup *)op;
    struct ec_priv *p = l->p;
    switch (op->state) {
    case L_WIND: {
        l->asked = ec_up(p);
        l->seq = ec_dseq(p);
        if (!l->asked) {
            if (l->fop != BFS_FOP_LOOKUP)
                return answer_stat(l, -ENOTCONN, NULL);
            bfs_unwind_lookup(op->frame, -ENOTCONN, NULL);
            return BFS_OP_DONE;
        }
        struct bfs_lookup_req req = *l->req;
        req.xdata = l->xdata;
        bfs_op_expect(op, bfs_mask_count(l->asked));
        for (int i = 0; i < p->n; i++)
            if (bfs_mask_has(l->asked, i))
                bfs_op_wind(op, i, BFS_FOP_LOOKUP, p->xl->children[i], &req);
        op->state = l->early ? L_GATHER : L_DONE;
        return l->early ? BFS_OP_WAIT_ANY : BFS_OP_WAIT;
    }
    case L_GATHER:
        return lookup_gather(l);
    case L_DONE:
        return lookup_done(l);
    }
    return BFS_OP_DONE;
}

/* Runs a lookup op over req (taken). On failure the frame is not answered. */
static int lookup_start(struct bfs_xl *xl, struct bfs_frame *frame, int fop,
                        struct bfs_lookup_req *req, bool no_heal)
{
    struct ec_priv *p = ec_priv(xl);
    struct ec_lookup *l = calloc(1, sizeof(*l));
    if (!l || !(l->xdata = ec_lookup_xdata(req->xdata)) ||
        bfs_op_init(&l->op, frame, xl, p->n, lookup_step, lookup_destroy) < 0) {
        if (l)
            bfs_dict_unref(l->xdata);
        free(l);
        bfs_lookup_req_free(req);
        return -ENOMEM;
    }
    l->p = p;
    l->fop = fop;
    l->req = req;
    l->no_heal = no_heal;
    /* a foreground heal (background count 0) answers after healing: no early answer */
    l->early = (no_heal || __atomic_load_n(&p->heal_count, __ATOMIC_RELAXED) > 0) &&
               bfs_mask_count(ec_up(p)) > early_need(p) && bfs_op_early(&l->op) == 0;
    l->op.state = L_WIND;
    bfs_op_run(&l->op);
    return 0;
}

int ec_lookup(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_lookup_req *req)
{
    struct bfs_lookup_req *copy = bfs_lookup_req_dup(req);
    if (!copy)
        return -ENOMEM;
    return lookup_start(xl, frame, BFS_FOP_LOOKUP, copy, false);
}

void ec_lookup_resume(struct bfs_xl *xl, struct bfs_frame *frame, struct bfs_lookup_req *req)
{
    if (lookup_start(xl, frame, BFS_FOP_LOOKUP, req, true) < 0)
        bfs_unwind_lookup(frame, -ENOMEM, NULL);
}

static int stat_by_gfid(struct bfs_frame *frame, struct bfs_xl *xl, int fop,
                        struct bfs_inode *inode, const struct bfs_gfid *g)
{
    struct bfs_gfid gfid = inode ? inode->gfid : (g ? *g : (struct bfs_gfid){0});
    if (inode)
        bfs_inode_unref(inode);
    if (bfs_gfid_is_null(&gfid))
        return -EINVAL;
    struct bfs_lookup_req *req = calloc(1, sizeof(*req));
    if (!req)
        return -ENOMEM;
    req->loc.gfid = gfid;
    return lookup_start(xl, frame, fop, req, true);
}

int ec_stat(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_stat_req *req)
{
    return stat_by_gfid(f, xl, BFS_FOP_STAT, ec_inode_of_loc(xl, &req->loc), &req->loc.gfid);
}

int ec_fstat(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fstat_req *req)
{
    return stat_by_gfid(f, xl, BFS_FOP_FSTAT, ec_inode_of_fd(xl, req->fd), NULL);
}
