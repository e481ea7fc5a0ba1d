/*
 * disperse-read.c — fops that read: read (k fragments, decoded when a data
 * child is missing), seek (from the size), and the fops one full copy
 * answers: access, readlink, getxattr, fgetxattr, readdir.
 *
 * One op serves them all: make sure the inode context is fresh (else
 * refresh it: a lookup by GFID on every up child, as disperse-lookup.c
 * does), then
 *   read     pick k good children (the data children when they are all
 *            good: nothing to decode), read the covering stripes' fragments
 *            from each, retry with other good children when one fails;
 *            fewer than k: EIO, never a guess;
 *   others   one good child, the next one on a child fault; readdir sticks
 *            to the child of its first call (offsets are that brick's) and
 *            drops the attributes of regular files (fragment sizes); the
 *            readdir that only confirms a listing's end is answered empty
 *            with end-of-directory when that child is gone (the listing
 *            is complete).
 *
 * A read runs inside a window of the file's shared data lock (lib/txn.h,
 * "Readers"): it joins our own writers' window, or takes a readers' window
 * (a shared inodelk on every up child, no pre-op), so that no other
 * client's change is half applied to the stripes it reads (a read racing
 * a write could otherwise decode fragments of two versions), and reads
 * only from children of the window. The window's transaction (struct
 * ec_rtxn) starts the read op as its fop stage and is told its result
 * when the read has answered.
 *
 * A read's answer carries features/upcall's mark (BFS_XDATA_UPCALL) when
 * disperse vouches for the attributes it assembled as the file's, so that
 * performance/md-cache keeps them (the LOOKUP before a delete of a file
 * just read is then answered on the client; docs/design/
 * cache-invalidation.md): the size is the context's, read under the
 * window's lock, and the rest is either
 *   - the first fragment's as its brick took them after reading, when
 *     every child read marked its reply (invalidations flow from each)
 *     and that child's metadata is good; or
 *   - when no brick saw the read (protocol/client answered every fragment
 *     from its open's prefetch: those attributes are the open's, maybe
 *     older than an invalidation md-cache heard since), the ones this
 *     read's refresh took under the lock, from a marked reply of a good
 *     child (keep_fresh): nothing read the file after them.
 * Anything else is answered unmarked, as before (md-cache forgets).
 *
 * Lifetime: struct ec_rd from the fop call to its answer; struct ec_rtxn
 * until its transaction is over.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disperse.h"

enum { RD_START = 1, RD_REFRESHED, RD_PICK, RD_ANSWERED };

struct ec_rd {
    struct bfs_op op; /* first */
    struct ec_priv *p;
    int fop;
    void *req;                 /* our copy */
    struct bfs_gfid gfid;
    struct bfs_inode *inode;   /* ref, may be NULL */
    struct ec_inode *c;        /* NULL: no context (read blind) */
    struct bfs_fd *fd;
    int type;
    uint32_t tried;            /* children that failed */
    uint32_t using;            /* children of the current attempt */
    int child;                 /* one-child fops */
    int last_rc;
    bool refreshed;
    uint64_t readdir_offset;
    uint64_t size;             /* read: the file size the attempt was planned with */
    uint64_t seq;              /* priv->dseq when the refresh was wound */
    struct bfs_txn *txn;       /* read: the window's transaction, told at the answer */
    uint32_t window;           /* read: the children of the window (0: any) */
    uint64_t win;              /* read: the window's name (lock's window count), 0: none */
    bool ro;                   /* read: a readers' window (no change of ours in flight) */
    bool kept;                 /* read: fresh holds what the refresh vouches for */
    struct bfs_iatt fresh;     /* read: the file's attributes from the refresh (keep_fresh) */
};

struct ec_rtxn {
    struct bfs_txn t; /* first */
    struct ec_rd *r;  /* until started (the read op owns itself then) */
    struct bfs_inode *inode; /* ref */
};

static void rd_destroy(struct bfs_op *op)
{
    struct ec_rd *r = (struct ec_rd *)op;
    bfs_fop_info[r->fop].req_clear_dup(r->req);
    free(r->req);
    if (r->inode)
        bfs_inode_unref(r->inode);
    free(r);
}

static int answer(struct ec_rd *r, int rc, const void *rep)
{
    bfs_unwind_any(r->fop, r->op.frame, rc, rc >= 0 ? rep : NULL);
    if (r->txn) { /* the window may go now */
        struct bfs_txn *t = r->txn;
        r->txn = NULL;
        bfs_op_answer(&t->op, 0, BFS_FOP_READ, rc);
    }
    return BFS_OP_DONE;
}

uint32_t ec_pick_k(const struct ec_priv *p, uint32_t cand)
{
    uint32_t data = (1u << p->k) - 1;
    uint32_t pick = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < p->n && bfs_mask_count(pick) < p->k; i++)
            if (bfs_mask_has(cand, i) && bfs_mask_has(pass ? ~data : data, i))
                pick |= BFS_BIT(i);
    return bfs_mask_count(pick) == p->k ? pick : 0;
}

int ec_decode(struct ec_priv *p, uint8_t *const *frag, uint32_t have, uint64_t nstripes,
              uint8_t *out)
{
    const uint8_t *f[EC_MAX] = {0};
    for (int i = 0; i < p->n; i++)
        if (bfs_mask_has(have, i))
            f[i] = frag[i];
    if ((have & ((1u << p->k) - 1)) != (1u << p->k) - 1)
        __atomic_add_fetch(&p->n_decode, 1, __ATOMIC_RELAXED);
    return bfs_ec_decode_stripes(p->codec, f, nstripes, p->chunk, out);
}

static int start(struct ec_rd *r)
{
    struct ec_priv *p = r->p;
    /* in a window whose size and good children nobody read under its lock
     * yet (a readers' window; our writers' check reads them), read them:
     * what we knew may predate another client's changes */
    bool want = r->c && !r->refreshed &&
                (!ec_ictx_fresh(p, r->c) || r->last_rc == 1 ||
                 (r->win && !ec_ictx_in_window(r->c, r->win)));
    if (!want) {
        r->op.state = RD_PICK;
        return BFS_OP_CONTINUE;
    }
    uint32_t up = ec_up(p);
    if (!up)
        return answer(r, -ENOTCONN, NULL);
    if (ec_refresh_wind(&r->op, p, &r->gfid, up) < 0)
        return answer(r, -ENOMEM, NULL);
    r->using = up;
    r->seq = ec_dseq(p);
    r->refreshed = true;
    r->last_rc = 0;
    r->op.state = RD_REFRESHED;
    return BFS_OP_WAIT;
}

static bool is_marked(const struct bfs_dict *x)
{
    int64_t v;
    return x && bfs_dict_get_int(x, BFS_XDATA_UPCALL, &v) == 0 && v == 1;
}

/* A refresh in a readers' window (no change of ours in flight; size and
 * good children read under the lock): keeps the good child's attributes
 * with the file's size, if its brick marked the reply. */
static void keep_fresh(struct ec_rd *r, const struct ec_state *s, const struct ec_view *v)
{
    const struct bfs_op_reply *rep = &r->op.replies[v->child];
    r->kept = false;
    if (!r->ro || (s->attr[v->child].mode & S_IFMT) != S_IFREG || !rep->valid || !rep->rep ||
        !is_marked(((const struct bfs_lookup_rep *)rep->rep)->xdata))
        return;
    r->fresh = s->attr[v->child];
    ec_fix_iatt(r->p, &r->fresh, v->size);
    r->kept = true;
}

static int after_refresh(struct ec_rd *r)
{
    struct ec_priv *p = r->p;
    struct ec_state *s = malloc(sizeof(*s));
    int rc[EC_MAX];
    struct ec_view v;
    if (!s)
        return answer(r, -ENOMEM, NULL);
    ec_refresh_gather(p, &r->op, r->using, s, rc);
    ec_combine(p, s, r->using, rc, &v);
    uint32_t mode = v.rc == 0 ? s->attr[v.child].mode : 0;
    if (v.rc == 0)
        keep_fresh(r, s, &v);
    free(s);
    bfs_op_reset_replies(&r->op);
    r->using = 0;
    if (v.rc < 0)
        return answer(r, v.rc, NULL);
    if (r->ro)
        ec_ictx_window(p, r->c, mode, &v, r->win);
    else
        ec_ictx_update(p, r->c, mode, &v, r->seq);
    r->op.state = RD_PICK;
    return BFS_OP_CONTINUE;
}

/* Good, up children this fop may use now. */
static uint32_t candidates(struct ec_rd *r, uint32_t *type, uint64_t *size)
{
    struct ec_priv *p = r->p;
    uint32_t cand = ec_up(p) & ~r->tried;
    *type = 0;
    *size = 0;
    if (r->c) {
        int t = r->type;
        uint32_t good = ec_ictx_good(r->c, t, type, size);
        if (t == EC_DATA && *type && *type != S_IFREG)
            good = ec_ictx_good(r->c, EC_META, type, size);
        cand &= good;
    }
    if (r->fd)
        cand &= ec_fd_opened(p->xl, r->fd);
    if (r->window)
        cand &= r->window;
    return cand;
}

/* ---- read ---- */

static int read_pick(struct ec_rd *r)
{
    struct ec_priv *p = r->p;
    const struct bfs_read_req *q = r->req;
    uint32_t type;
    uint64_t size;
    uint32_t cand = candidates(r, &type, &size);
    if (r->fd && (r->fd->flags & O_ACCMODE) == O_WRONLY)
        return answer(r, -EBADF, NULL);
    if (type == S_IFREG && q->offset >= size) {
        struct bfs_read_rep rep = {.eof = true};
        rep.attr.size = size;
        return answer(r, 0, &rep);
    }
    r->size = size;
    r->using = ec_pick_k(p, cand);
    if (!r->using) {
        if (!r->refreshed && r->c) {
            r->last_rc = 1; /* what we knew leaves too few children: ask them */
            r->op.state = RD_START;
            return BFS_OP_CONTINUE;
        }
        XL_WARN(p->xl, "read: %d good fragment(s) reachable, %d needed: EIO",
                bfs_mask_count(cand), p->k);
        return answer(r, -EIO, NULL);
    }
    uint64_t len = q->size;
    if (len > size - q->offset)
        len = size - q->offset;
    uint64_t s0 = q->offset / p->stripe, s1 = (q->offset + len + p->stripe - 1) / p->stripe;
    struct bfs_read_req req = {.fd = q->fd, .size = (uint32_t)((s1 - s0) * p->chunk),
                               .offset = s0 * p->chunk, .xdata = q->xdata};
    bfs_op_reset_replies(&r->op);
    bfs_op_expect(&r->op, bfs_mask_count(r->using));
    r->op.state = RD_ANSWERED;
    for (int i = 0; i < p->n; i++)
        if (bfs_mask_has(r->using, i))
            bfs_op_wind(&r->op, i, BFS_FOP_READ, p->xl->children[i], &req);
    return BFS_OP_WAIT;
}

/* The attributes the read answers with (*a: the first fragment's, size
 * fixed), and whether disperse vouches for them (see the top). */
static bool fresh_attr_for(struct ec_rd *r, int first, struct bfs_iatt *a)
{
    int marked = 0, prefetched = 0, n = bfs_mask_count(r->using);
    for (int i = 0; i < r->p->n; i++) {
        if (!bfs_mask_has(r->using, i))
            continue;
        const struct bfs_dict *x = ((const struct bfs_read_rep *)r->op.replies[i].rep)->xdata;
        int64_t v;
        marked += is_marked(x);
        prefetched += x && bfs_dict_get_int(x, BFS_XDATA_PREFETCHED, &v) == 0 && v == 1;
    }
    if (prefetched == n && r->kept && bfs_gfid_eq(&r->fresh.gfid, &a->gfid)) {
        *a = r->fresh;
        return true;
    }
    return marked == n && r->c && bfs_mask_has(ec_ictx_good(r->c, EC_META, NULL, NULL), first);
}

/* Answers rep, marked when vouched for. */
static void answer_read(struct ec_rd *r, int rc, struct bfs_read_rep *rep, bool vouched)
{
    struct bfs_dict *x = vouched ? bfs_dict_new() : NULL;
    if (x && bfs_dict_set_int(x, BFS_XDATA_UPCALL, 1) < 0) {
        bfs_dict_unref(x); /* unmarked: md-cache forgets, only a cost */
        x = NULL;
    }
    rep->xdata = x;
    answer(r, rc, rep);
    bfs_dict_unref(x);
}

static int read_done(struct ec_rd *r)
{
    struct ec_priv *p = r->p;
    const struct bfs_read_req *q = r->req;
    uint32_t failed = 0;
    int first = -1;
    for (int i = 0; i < p->n; i++) {
        if (!bfs_mask_has(r->using, i))
            continue;
        const struct bfs_op_reply *rep = &r->op.replies[i];
        if (!rep->valid || rep->rc < 0) {
            failed |= BFS_BIT(i);
            int rc = rep->valid ? rep->rc : -EIO;
            if (!ec_child_fault(rc))
                return answer(r, rc, NULL);
            r->last_rc = rc;
        } else if (first < 0) {
            first = i;
        }
    }
    if (failed) {
        r->tried |= failed;
        if (r->c)
            ec_ictx_failed(r->c, EC_DATA, failed);
        r->op.state = RD_PICK;
        return BFS_OP_CONTINUE;
    }
    uint64_t size = r->size;
    uint64_t len = q->size;
    if (len > size - q->offset)
        len = size - q->offset;
    uint64_t s0 = q->offset / p->stripe, s1 = (q->offset + len + p->stripe - 1) / p->stripe;
    uint64_t flen = (s1 - s0) * p->chunk;
    uint8_t *buf = malloc((s1 - s0) * p->stripe + flen * (uint64_t)p->n);
    if (!buf)
        return answer(r, -ENOMEM, NULL);
    uint8_t *frag[EC_MAX] = {0};
    for (int i = 0; i < p->n; i++) {
        if (!bfs_mask_has(r->using, i))
            continue;
        const struct bfs_read_rep *rr = r->op.replies[i].rep;
        frag[i] = buf + (s1 - s0) * p->stripe + flen * (uint64_t)i;
        size_t got = rr->data.len < flen ? rr->data.len : flen;
        memcpy(frag[i], rr->data.data, got);
        memset(frag[i] + got, 0, flen - got); /* past a fragment file's end: zeros */
    }
    int rc = ec_decode(p, frag, r->using, s1 - s0, buf);
    if (rc < 0) {
        free(buf);
        return answer(r, rc, NULL);
    }
    struct bfs_read_rep rep = *(const struct bfs_read_rep *)r->op.replies[first].rep;
    rep.data.data = buf + (q->offset - s0 * p->stripe);
    rep.data.len = len;
    rep.eof = q->offset + len >= size;
    ec_fix_iatt(p, &rep.attr, size);
    answer_read(r, (int)len, &rep, fresh_attr_for(r, first, &rep.attr));
    free(buf);
    return BFS_OP_DONE;
}

/* ---- one-child fops ---- */

static void strip_file_attrs(struct bfs_readdir_rep *rep)
{
    for (uint32_t e = 0; e < rep->entries.count; e++)
        if (rep->entries.v[e].d_type == DT_REG || !rep->entries.v[e].has_attr ||
            S_ISREG(rep->entries.v[e].attr.mode))
            rep->entries.v[e].has_attr = false;
}

/* A readdir at the offset where its listing already ended (the kernel
 * asks once more to confirm the end)? It needs no child: the one that
 * served the listing may be gone by now (stopped, replaced). */
static bool at_listing_end(struct ec_rd *r)
{
    struct ec_fd *f = r->fop == BFS_FOP_READDIR ? ec_fdctx(r->p->xl, r->fd, false) : NULL;
    return f && bfs_listing_at_end(&f->lock, &f->listing, r->readdir_offset);
}

/* What a listing's reply tells its fd: the child it sticks to (from its
 * first call) and whether (and where) it ended. */
static void note_listing(struct ec_rd *r, const struct bfs_readdir_rep *rep)
{
    struct ec_fd *f = ec_fdctx(r->p->xl, r->fd, true);
    if (f)
        bfs_listing_note(&f->lock, &f->listing, r->child, r->readdir_offset, rep);
}

static int one_pick(struct ec_rd *r)
{
    struct ec_priv *p = r->p;
    uint32_t type;
    uint64_t size;
    uint32_t cand = candidates(r, &type, &size);
    if (r->fop == BFS_FOP_SEEK) {
        const struct bfs_seek_req *q = r->req;
        if (q->offset >= size)
            return answer(r, -ENXIO, NULL);
        struct bfs_seek_rep rep = {.offset = q->what == SEEK_HOLE ? size : q->offset};
        return answer(r, 0, &rep);
    }
    if (r->fop == BFS_FOP_READDIR && r->readdir_offset != 0) {
        struct ec_fd *f = ec_fdctx(p->xl, r->fd, true);
        int sticky = -1;
        if (f) {
            pthread_mutex_lock(&f->lock);
            sticky = f->listing.child;
            pthread_mutex_unlock(&f->lock);
        }
        if (sticky >= 0)
            cand &= BFS_BIT(sticky);
    }
    r->child = bfs_mask_first(cand);
    if (r->child < 0 && !r->refreshed && r->c && r->fop != BFS_FOP_READDIR) {
        r->last_rc = 1;
        r->op.state = RD_START;
        return BFS_OP_CONTINUE;
    }
    if (r->child < 0 && at_listing_end(r)) {
        struct bfs_readdir_rep end = {.eod = true};
        return answer(r, 0, &end);
    }
    if (r->child < 0)
        return answer(r, r->last_rc < 0 ? r->last_rc : -ENOTCONN, NULL);
    bfs_op_reset_replies(&r->op);
    bfs_op_expect(&r->op, 1);
    r->op.state = RD_ANSWERED;
    bfs_op_wind(&r->op, r->child, r->fop, p->xl->children[r->child], r->req);
    return BFS_OP_WAIT;
}

static int one_done(struct ec_rd *r)
{
    struct bfs_op_reply *rep = &r->op.replies[r->child];
    int rc = rep->valid ? rep->rc : -EIO;
    if (rc < 0 && ec_child_fault(rc)) {
        r->tried |= BFS_BIT(r->child);
        r->last_rc = rc;
        r->op.state = RD_PICK;
        return BFS_OP_CONTINUE;
    }
    if (rc >= 0 && r->fop == BFS_FOP_READDIR) {
        note_listing(r, rep->rep);
        strip_file_attrs(rep->rep);
    }
    return answer(r, rc, rep->rep);
}

static int rd_step(struct bfs_op *op)
{
    struct ec_rd *r = (struct ec_rd *)op;
    switch (op->state) {
    case RD_START:
        return start(r);
    case RD_REFRESHED:
        return after_refresh(r);
    case RD_PICK:
        return r->fop == BFS_FOP_READ ? read_pick(r) : one_pick(r);
    case RD_ANSWERED:
        return r->fop == BFS_FOP_READ ? read_done(r) : one_done(r);
    }
    return BFS_OP_DONE;
}

/* The op of one fop, not started yet; NULL and *err. */
static struct ec_rd *rd_new(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req,
                            const struct bfs_loc *loc, struct bfs_fd *fd, int type, uint64_t off,
                            int *err)
{
    struct ec_priv *p = ec_priv(xl);
    const struct bfs_fop_info *fi = &bfs_fop_info[fop];
    struct ec_rd *r = calloc(1, sizeof(*r));
    void *copy = calloc(1, fi->req_size);
    *err = -ENOMEM;
    if (!r || !copy || fi->req_copy_into(copy, req) < 0) {
        free(copy);
        free(r);
        return NULL;
    }
    if (bfs_op_init(&r->op, frame, xl, p->n, rd_step, rd_destroy) < 0) {
        fi->req_clear_dup(copy);
        free(copy);
        free(r);
        return NULL;
    }
    r->p = p;
    r->fop = fop;
    r->req = copy;
    r->fd = fd;
    r->type = type;
    r->readdir_offset = off;
    r->inode = fd ? ec_inode_of_fd(xl, fd) : ec_inode_of_loc(xl, loc);
    if (r->inode) {
        r->gfid = r->inode->gfid;
        r->c = ec_ictx(xl, r->inode);
    }
    if ((fop == BFS_FOP_READ || fop == BFS_FOP_SEEK) && !r->c) {
        bfs_op_unref(&r->op);
        *err = -EINVAL; /* a read of fragments needs the file's size */
        return NULL;
    }
    r->op.state = RD_START;
    return r;
}

static int rd_start(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req,
                    const struct bfs_loc *loc, struct bfs_fd *fd, int type, uint64_t off)
{
    int err;
    struct ec_rd *r = rd_new(frame, xl, fop, req, loc, fd, type, off, &err);
    if (!r)
        return err;
    bfs_op_run(&r->op);
    return 0;
}

/* ---- the read's window (struct bfs_txn_fop of a reader) ---- */

static uint32_t rt_wind(struct bfs_txn *t, uint32_t run)
{
    struct ec_rtxn *x = (struct ec_rtxn *)t;
    struct ec_rd *r = x->r;
    x->r = NULL;
    r->txn = t;
    r->window = run ? run : ~0u;
    pthread_mutex_lock(&t->lk->m);
    r->win = t->lk->window;
    r->ro = t->lk->ro_window;
    pthread_mutex_unlock(&t->lk->m);
    bfs_op_expect(&t->op, 1); /* answered by the read (answer()) */
    bfs_op_run(&r->op);
    return 0;
}

static int rt_combine(struct bfs_txn *t)
{
    const struct bfs_op_reply *rep = &t->op.replies[0];
    return rep->valid ? rep->rc : -EIO;
}

static void rt_answer(struct bfs_txn *t, int rc)
{
    struct ec_rtxn *x = (struct ec_rtxn *)t;
    if (!x->r)
        return; /* the read ran and answered */
    /* no window (too few children locked): the read did not run */
    bfs_unwind_read(t->caller, rc == -EROFS ? -EIO : rc < 0 ? rc : -EIO, NULL);
    bfs_op_unref(&x->r->op);
    x->r = NULL;
}

static void rt_destroy(struct bfs_txn *t)
{
    struct ec_rtxn *x = (struct ec_rtxn *)t;
    if (x->r)
        bfs_op_unref(&x->r->op);
    if (x->inode)
        bfs_inode_unref(x->inode);
    free(x);
}

static const struct bfs_txn_fop ec_read_fop = {.wind = rt_wind, .combine = rt_combine,
                                               .answer = rt_answer, .destroy = rt_destroy};

int ec_read(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_read_req *req)
{
    struct ec_priv *p = ec_priv(xl);
    int err;
    struct ec_rd *r = rd_new(f, xl, BFS_FOP_READ, req, NULL, req->fd, EC_DATA, 0, &err);
    if (!r)
        return err;
    struct ec_rtxn *x = calloc(1, sizeof(*x));
    if (!x) {
        bfs_op_unref(&r->op);
        return -ENOMEM;
    }
    x->r = r;
    x->inode = bfs_inode_ref(r->inode);
    uint64_t end = req->offset + req->size;
    x->t.readonly = true;
    x->t.fd_based = true;
    x->t.start = req->offset / p->stripe * p->stripe;
    x->t.end = end > req->offset ? (end + p->stripe - 1) / p->stripe * p->stripe
                                 : x->t.start + p->stripe;
    struct bfs_txn_target tg = {.nsets = 1, .nobj = 1, .inode = x->inode, .fd = req->fd};
    tg.lk[0].kind = BFS_LKSET_INODE;
    tg.lk[0].gfid = x->inode->gfid;
    tg.obj[0] = x->inode->gfid;
    tg.fd_open = ec_fd_opened(xl, req->fd);
    if (bfs_txn_init(&x->t, &p->cl, &ec_read_fop, f, BFS_TXN_DATA, &r->c->dlock, &tg) < 0) {
        rt_destroy(&x->t);
        return -ENOMEM;
    }
    bfs_txn_start(&x->t);
    return 0;
}

int ec_seek(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_seek_req *req)
{
    if (req->what != SEEK_DATA && req->what != SEEK_HOLE)
        return -EINVAL;
    return rd_start(f, xl, BFS_FOP_SEEK, req, NULL, req->fd, EC_DATA, 0);
}

int ec_access(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_access_req *req)
{
    return rd_start(f, xl, BFS_FOP_ACCESS, req, &req->loc, NULL, EC_META, 0);
}

int ec_readlink(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_readlink_req *req)
{
    return rd_start(f, xl, BFS_FOP_READLINK, req, &req->loc, NULL, EC_META, 0);
}

int ec_getxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_getxattr_req *req)
{
    if (ec_vop_getxattr(f, xl, req))
        return 0;
    return rd_start(f, xl, BFS_FOP_GETXATTR, req, &req->loc, NULL, EC_META, 0);
}

int ec_fgetxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fgetxattr_req *req)
{
    return rd_start(f, xl, BFS_FOP_FGETXATTR, req, NULL, req->fd, EC_META, 0);
}

int ec_readdir(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_readdir_req *req)
{
    return rd_start(f, xl, BFS_FOP_READDIR, req, NULL, req->fd, EC_ENTRY, req->offset);
}
