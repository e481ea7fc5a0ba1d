/*
 * replicate-write.c — data and metadata changes as transactions, and the
 * translator's half of every transaction (struct bfs_txn_fop, also used by
 * replicate-entry.c).
 *
 *   data       write, truncate, ftruncate, fallocate, discard, zerofill
 *              (and open with O_TRUNC, as ftruncate to 0): the inode's
 *              shared lock object (eager locking, delayed post-op); never
 *              sent to the arbiter, which counts as done;
 *   metadata   setattr, fsetattr, setxattr, fsetxattr, removexattr,
 *              fremovexattr: a one-shot lock in the metadata domain.
 *
 * The request is copied once into struct afr_txn and wound as is to every
 * child of the set; the answer comes from a data copy that succeeded.
 * Lifetime: struct afr_txn from the fop call until the transaction op is
 * over (after its answer, and for one-shot locks after post-op and unlock).
 *
 * A write's payload is not copied (struct afr_wtxn, "lent payload"): the
 * caller's bytes are valid until afr_write returns, and a write that joins
 * the file's held eager lock is wound to every child before that (bfs_txn_start
 * runs the fop stage on the caller's stack). Only a write whose wind is
 * still to come when afr_write returns (first write of a lock window, a
 * queued one, a re-open first) copies its payload then; w->m orders that
 * decision against a wind running on another thread meanwhile.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "replicate.h"
#include "xlators/lib/txn-wire.h"

/* ---- the translator's half of a transaction ---- */

struct afr_txn *afr_txn_new(struct bfs_xl *xl, int fop, const void *req, size_t size)
{
    const struct bfs_fop_info *fi = &bfs_fop_info[fop];
    struct afr_txn *a = calloc(1, size);
    void *copy = calloc(1, fi->req_size);
    if (!a || !copy || fi->req_copy_into(copy, req) < 0) {
        free(copy);
        free(a);
        return NULL;
    }
    a->p = afr_priv(xl);
    a->fop = fop;
    a->req = copy;
    a->chosen = -1;
    return a;
}

void afr_txn_free(struct afr_txn *a)
{
    bfs_fop_info[a->fop].req_clear_dup(a->req);
    free(a->req);
    if (a->inode)
        bfs_inode_unref(a->inode);
    if (a->open_rep)
        bfs_open_rep_free(a->open_rep);
    free(a);
}

static uint32_t tx_usable(struct bfs_txn *t, uint32_t set)
{
    struct afr_txn *a = (struct afr_txn *)t;
    return a->fd ? set & afr_fd_opened(a->p->xl, a->fd) : set;
}

/* An entry fop whose pre-op rides in it (lib/txn-piggy.c); a create asks
 * for its file's data lock too, also under its parent's entry window
 * (pre-op'd when the window was acquired). false: wind the request as is. */
static bool afr_wind_piggy(struct bfs_txn *t, int i, int fop, const void *req)
{
    struct afr_txn *a = (struct afr_txn *)t;
    uint64_t owner =
        (t->piggy || a->eager) && fop == BFS_FOP_CREATE && afr_newlock_wanted(a) ? a->nl_owner : 0;
    return bfs_txn_wind_entry(t, i, fop, req, owner);
}

static uint32_t tx_wind(struct bfs_txn *t, uint32_t run)
{
    struct afr_txn *a = (struct afr_txn *)t;
    struct afr_priv *p = a->p;
    uint32_t skip = a->data && p->arbiter >= 0 ? run & BFS_BIT(p->arbiter) : 0;
    uint32_t go = run & ~skip;
    bfs_op_expect(&t->op, bfs_mask_count(go));
    for (int i = 0; i < p->n; i++)
        if (bfs_mask_has(go, i) && !afr_wind_piggy(t, i, a->fop, a->req))
            bfs_op_wind(&t->op, i, a->fop, p->xl->children[i], a->req);
    return skip;
}

/* ---- writes with a lent payload ---- */

struct afr_wtxn {
    struct afr_txn a;  /* first */
    pthread_mutex_t m; /* lent/wound/lost against afr_write's check */
    const void *lent;  /* the caller's payload, until afr_write returns */
    bool wound;        /* the fop stage has wound (or answered) every child */
    bool lost;         /* the payload could not be kept: answer ENOMEM */
};

/* The write's fop stage: winds the payload while it is still the caller's
 * or already ours, under w->m so that afr_write does not return meanwhile.
 * The request's data pointer is the caller's only during the wind (a
 * request freed on any path must never free the caller's bytes). */
static uint32_t tx_wind_lent(struct bfs_txn *t, uint32_t run)
{
    struct afr_wtxn *w = (struct afr_wtxn *)t;
    struct bfs_write_req *q = w->a.req;
    uint32_t skip = 0;
    pthread_mutex_lock(&w->m);
    if (w->lost) {
        struct afr_priv *p = w->a.p;
        uint32_t go = run & ~(p->arbiter >= 0 ? BFS_BIT(p->arbiter) : 0);
        skip = run & ~go;
        bfs_op_expect(&t->op, bfs_mask_count(go));
        for (int i = 0; i < p->n; i++)
            if (bfs_mask_has(go, i))
                bfs_op_answer(&t->op, i, BFS_FOP_WRITE, -ENOMEM);
    } else if (!q->data.data) {
        q->data.data = w->lent;
        skip = tx_wind(t, run);
        q->data.data = NULL;
    } else {
        skip = tx_wind(t, run); /* our copy (lend_end) */
    }
    w->wound = true;
    pthread_mutex_unlock(&w->m);
    return skip;
}

/* Called by afr_write after the transaction started (the caller holds a
 * reference on the op): if the write is not wound yet, its payload becomes
 * a copy of ours; either way the caller's bytes are no longer used. */
static void lend_end(struct afr_wtxn *w)
{
    struct bfs_write_req *q = w->a.req;
    pthread_mutex_lock(&w->m);
    __atomic_add_fetch(w->wound ? &w->a.p->n_write_lent : &w->a.p->n_write_copied, 1,
                       __ATOMIC_RELAXED);
    if (!w->wound) {
        void *copy = malloc(q->data.len);
        if (copy)
            memcpy(copy, w->lent, q->data.len);
        else
            w->lost = true;
        q->data.data = copy; /* freed with the request (req_clear_dup) */
    }
    w->lent = NULL;
    pthread_mutex_unlock(&w->m);
}

static void tx_destroy_lent(struct bfs_txn *t)
{
    pthread_mutex_destroy(&((struct afr_wtxn *)t)->m);
    afr_txn_free((struct afr_txn *)t);
}

static int tx_combine(struct bfs_txn *t)
{
    struct afr_txn *a = (struct afr_txn *)t;
    struct afr_priv *p = a->p;
    int err = 0;
    a->chosen = -1;
    for (int i = 0; i < p->n; i++) {
        const struct bfs_op_reply *r = &t->op.replies[i];
        if (!r->valid)
            continue;
        if (r->rc >= 0 && bfs_mask_has(t->ok, i) && (a->chosen < 0 || a->chosen == p->arbiter))
            a->chosen = i;
        if (r->rc < 0 && (!err || err == -ENOTCONN))
            err = r->rc;
    }
    int rc = a->chosen >= 0 ? t->op.replies[a->chosen].rc : (err ? err : -ENOTCONN);
    __atomic_add_fetch(&p->n_txn, 1, __ATOMIC_RELAXED);
    if (a->done)
        a->done(a, rc);
    return rc;
}

static void tx_answer(struct bfs_txn *t, int rc)
{
    struct afr_txn *a = (struct afr_txn *)t;
    if (a->open_rep) {
        bfs_unwind_open(t->caller, rc, rc >= 0 ? a->open_rep : NULL);
        return;
    }
    const void *rep = rc >= 0 && a->chosen >= 0 ? t->op.replies[a->chosen].rep : NULL;
    bfs_unwind_any(a->fop, t->caller, rc, rep);
}

static void tx_destroy(struct bfs_txn *t)
{
    afr_txn_free((struct afr_txn *)t);
}

const struct bfs_txn_fop afr_txn_fop = {.usable = tx_usable, .wind = tx_wind,
                                        .combine = tx_combine, .answer = tx_answer,
                                        .destroy = tx_destroy};

static const struct bfs_txn_fop afr_wtxn_fop = {.usable = tx_usable, .wind = tx_wind_lent,
                                                .combine = tx_combine, .answer = tx_answer,
                                                .destroy = tx_destroy_lent};

/* Children that failed a change of the inode are no longer readable; nor
 * are those that made a change without quorum (it was not acknowledged:
 * their copy is marked, replicate-changelog.c, and only a read after a
 * refresh decides what may serve). */
static void inode_done(struct afr_txn *a, int rc)
{
    (void)rc;
    uint64_t v;
    uint32_t out = a->t.failed;
    if (!bfs_cluster_quorum(a->t.cl, a->t.ok))
        out |= a->t.ok;
    if (a->inode && bfs_inode_ctx_get(a->inode, a->p->xl, &v) == 0 && v)
        afr_ictx_failed((struct afr_inode *)(uintptr_t)v, a->t.type, out);
}

/* ---- starting data and metadata transactions ---- */

static void start_task(void *arg)
{
    bfs_txn_start(arg);
}

/* a->req is set; inode from fd or loc. Prepares the transaction; on an
 * error a is freed. */
static int inode_txn_init(struct afr_txn *a, struct bfs_frame *frame, int type,
                          const struct bfs_loc *loc, struct bfs_fd *fd,
                          const struct bfs_txn_fop *ops)
{
    struct bfs_xl *xl = a->p->xl;
    a->fd = fd;
    a->inode = fd ? afr_inode_of_fd(xl, fd) : afr_inode_of_loc(xl, loc);
    struct afr_inode *c = afr_ictx(xl, a->inode);
    if (!a->inode || !c) {
        int rc = a->inode ? -ENOMEM : -EINVAL; /* a change needs the inode's GFID */
        afr_txn_free(a);
        return rc;
    }
    a->data = type == BFS_TXN_DATA;
    a->done = inode_done;
    struct bfs_txn_target tg = {.nsets = 1, .nobj = 1, .inode = a->inode, .fd = fd};
    tg.lk[0].kind = BFS_LKSET_INODE;
    tg.lk[0].gfid = a->inode->gfid;
    tg.obj[0] = a->inode->gfid;
    tg.fd_open = fd ? afr_fd_opened(xl, fd) : 0;
    if (bfs_txn_init(&a->t, &a->p->cl, ops, frame, type,
                     type == BFS_TXN_DATA ? &c->dlock : NULL, &tg) < 0) {
        afr_txn_free(a);
        return -ENOMEM;
    }
    return 0;
}

/* Starts it (after re-opening the fd on children that missed its open). */
static void inode_txn_run(struct afr_txn *a, struct bfs_frame *frame)
{
    if (!a->fd || afr_fix_open(frame, a->p->xl, a->fd, start_task, &a->t) != 1)
        bfs_txn_start(&a->t);
}

static int inode_txn(struct afr_txn *a, struct bfs_frame *frame, int type,
                     const struct bfs_loc *loc, struct bfs_fd *fd)
{
    int rc = inode_txn_init(a, frame, type, loc, fd, &afr_txn_fop);
    if (rc == 0)
        inode_txn_run(a, frame);
    return rc;
}

static int data_txn(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req,
                    const struct bfs_loc *loc, struct bfs_fd *fd, uint64_t start, uint64_t end)
{
    struct afr_txn *a = afr_txn_new(xl, fop, req, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->t.start = start;
    a->t.end = end;
    a->t.fd_based = fd != NULL;
    return inode_txn(a, frame, BFS_TXN_DATA, loc, fd);
}

static int meta_txn(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req,
                    const struct bfs_loc *loc, struct bfs_fd *fd)
{
    struct afr_txn *a = afr_txn_new(xl, fop, req, sizeof(*a));
    if (!a)
        return -ENOMEM;
    return inode_txn(a, frame, BFS_TXN_METADATA, loc, fd);
}

static uint64_t end_of(uint64_t off, uint64_t len)
{
    return len && off + len > off ? off + len : UINT64_MAX;
}

int afr_write(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_write_req *req)
{
    bool append = req->fd && (req->fd->flags & O_APPEND); /* lands at each copy's end */
    uint64_t start = append ? 0 : req->offset;
    uint64_t end = append ? UINT64_MAX : end_of(req->offset, req->data.len);
    if (!req->data.data || !req->data.len || !req->fd)
        return data_txn(f, xl, BFS_FOP_WRITE, req, NULL, req->fd, start, end);
    struct bfs_write_req shallow = *req;
    shallow.data.data = NULL; /* the request is copied without its payload */
    struct afr_wtxn *w = (struct afr_wtxn *)afr_txn_new(xl, BFS_FOP_WRITE, &shallow, sizeof(*w));
    if (!w)
        return -ENOMEM;
    pthread_mutex_init(&w->m, NULL);
    w->lent = req->data.data;
    w->a.t.start = start;
    w->a.t.end = end;
    w->a.t.fd_based = true;
    int rc = inode_txn_init(&w->a, f, BFS_TXN_DATA, NULL, req->fd, &afr_wtxn_fop);
    if (rc < 0)
        return rc;
    struct bfs_op *op = &w->a.t.op;
    bfs_op_ref(op); /* w lives until lend_end is done */
    inode_txn_run(&w->a, f);
    lend_end(w);
    bfs_op_unref(op);
    return 0;
}

int afr_truncate(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_truncate_req *req)
{
    return data_txn(f, xl, BFS_FOP_TRUNCATE, req, &req->loc, NULL, req->offset, UINT64_MAX);
}

int afr_ftruncate(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_ftruncate_req *req)
{
    return data_txn(f, xl, BFS_FOP_FTRUNCATE, req, NULL, req->fd, req->offset, UINT64_MAX);
}

int afr_fallocate(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fallocate_req *req)
{
    return data_txn(f, xl, BFS_FOP_FALLOCATE, req, NULL, req->fd, req->offset, UINT64_MAX);
}

int afr_discard(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_discard_req *req)
{
    return data_txn(f, xl, BFS_FOP_DISCARD, req, NULL, req->fd, req->offset,
                    end_of(req->offset, req->len));
}

int afr_zerofill(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_zerofill_req *req)
{
    return data_txn(f, xl, BFS_FOP_ZEROFILL, req, NULL, req->fd, req->offset,
                    end_of(req->offset, req->len));
}

int afr_open_trunc(struct bfs_frame *frame, struct bfs_xl *xl, struct bfs_fd *fd,
                   const struct bfs_open_rep *rep)
{
    struct bfs_ftruncate_req req = {.fd = fd, .offset = 0};
    struct afr_txn *a = afr_txn_new(xl, BFS_FOP_FTRUNCATE, &req, sizeof(*a));
    if (!a)
        return -ENOMEM;
    if (!(a->open_rep = bfs_open_rep_dup(rep))) {
        afr_txn_free(a);
        return -ENOMEM;
    }
    a->open_rep->attr.size = 0;
    a->open_rep->attr.blocks = 0;
    a->t.start = 0;
    a->t.end = UINT64_MAX;
    a->t.fd_based = true;
    return inode_txn(a, frame, BFS_TXN_DATA, NULL, fd);
}

int afr_setattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_setattr_req *req)
{
    return meta_txn(f, xl, BFS_FOP_SETATTR, req, &req->loc, NULL);
}

int afr_fsetattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fsetattr_req *req)
{
    return meta_txn(f, xl, BFS_FOP_FSETATTR, req, NULL, req->fd);
}

int afr_setxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_setxattr_req *req)
{
    if (afr_vop_setxattr(f, xl, req))
        return 0;
    return meta_txn(f, xl, BFS_FOP_SETXATTR, req, &req->loc, NULL);
}

int afr_fsetxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fsetxattr_req *req)
{
    return meta_txn(f, xl, BFS_FOP_FSETXATTR, req, NULL, req->fd);
}

int afr_removexattr(struct bfs_frame *f, struct bfs_xl *xl,
                    const struct bfs_removexattr_req *req)
{
    return meta_txn(f, xl, BFS_FOP_REMOVEXATTR, req, &req->loc, NULL);
}

int afr_fremovexattr(struct bfs_frame *f, struct bfs_xl *xl,
                     const struct bfs_fremovexattr_req *req)
{
    return meta_txn(f, xl, BFS_FOP_FREMOVEXATTR, req, NULL, req->fd);
}
