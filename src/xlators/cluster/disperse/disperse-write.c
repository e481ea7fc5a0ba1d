/*
 * disperse-write.c — data changes as transactions of the shared library
 * (eager lock, delayed post-op; lib/txn.h) with a fop stage of up to three
 * steps (struct bfs_txn_fop.next):
 *
 *   plan    under the lock (the window's size is known): which stripes the
 *           change rewrites, which of them are partial and hold data (to be
 *           read), the size after it;
 *   read    the partial stripes from k good children, decoded (RMW);
 *   write   every child of the set in parallel: its fragments of the
 *           rewritten stripes (one write per piece), the brick operation
 *           of the change (ftruncate, fallocate, zerofill or discard of
 *           whole stripes), and `size += delta` (fxattrop) when the size
 *           moves. A child counts as done only if all of its calls were.
 *
 * Kinds: write (a piece [a, b) of stripes), truncate and ftruncate (cut each
 * child to the fragment size; a partial last stripe below the old size is
 * rewritten with zeros past the new size, keeping "bytes past the size are
 * zeros"), zerofill and discard (whole stripes by the brick op, partial
 * head and tail stripes rewritten), fallocate (the covered stripes). Byte
 * ranges given to the lock are widened to whole stripes (two RMWs of one
 * stripe never run at once); appends, truncates and fallocate take the
 * whole file. truncate by path first opens an internal fd on the children.
 *
 * Lifetime: struct ec_wtxn from the fop call until the transaction op is
 * over; its buffers are freed with it.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/graph.h"
#include "disperse.h"
#include "xlators/lib/wadd-wire.h"

enum { W_WRITE = 1, W_TRUNC, W_ZERO, W_DISCARD, W_FALLOC };
enum { WS_PLAN = 0, WS_READ, WS_WRITE, WS_UNDO, WS_DONE };

/* Every data fop's reply is (pre, post, xdata). */
struct ec_prepost {
    struct bfs_iatt pre, post;
    struct bfs_dict *xdata;
};
_Static_assert(offsetof(struct bfs_write_rep, post) == offsetof(struct ec_prepost, post) &&
                   offsetof(struct bfs_ftruncate_rep, post) ==
                       offsetof(struct ec_prepost, post) &&
                   sizeof(struct bfs_zerofill_rep) == sizeof(struct ec_prepost),
               "data fop replies share one layout");

struct ec_piece {
    uint64_t a, b;        /* stripes [a, b) rewritten */
    uint8_t *buf;         /* (b - a) stripes of data, then the fragments (frags) */
    uint8_t *frags;       /* n fragments of (b - a) * C; in buf, after the data if any */
};

struct ec_wtxn {
    struct bfs_txn t; /* first */
    struct ec_priv *p;
    int fop;                  /* the caller's fop (the answer's type) */
    void *req;                /* our copy of it */
    int kind;
    struct bfs_fd *fd;        /* where the children's calls go */
    bool own_fd;              /* internal fd (truncate by path) */
    struct bfs_inode *inode;  /* ref */
    uint64_t off, len;        /* the range; truncate: off = the new size */
    const uint8_t *data;      /* write: the payload (in req; the caller's while
                                 ec_write encodes whole stripes, then NULL) */
    uint32_t fmode;           /* fallocate mode */
    bool append;
    int stage;
    uint64_t old_size, new_size;
    int64_t delta;
    int64_t rs[2];            /* stripes to read first (-1: none) */
    uint8_t *rbuf;            /* their decoded contents (2 stripes) */
    uint32_t rd_failed, readers;
    int npieces;
    struct ec_piece pc[2];
    int main_fop;             /* the brick op in slot i (-1: piece 0's write) */
    uint64_t m_off, m_len;    /* its range on the bricks */
    int chosen;
    struct bfs_open_rep *open_rep; /* open with O_TRUNC: answered as open */
    int saved_rc[EC_MAX];     /* the fop's answers, kept across an undo stage */
    uint32_t wadd;            /* children whose size delta rode in the fragment write */
};

static void wtxn_free(struct ec_wtxn *w)
{
    if (w->req) {
        bfs_fop_info[w->fop].req_clear_dup(w->req);
        free(w->req);
    }
    for (int j = 0; j < 2; j++)
        free(w->pc[j].buf);
    free(w->rbuf);
    if (w->own_fd && w->fd)
        bfs_fd_unref(w->fd);
    if (w->inode)
        bfs_inode_unref(w->inode);
    if (w->open_rep)
        bfs_open_rep_free(w->open_rep);
    free(w);
}

static uint64_t stripe_of(const struct ec_priv *p, uint64_t off)
{
    return off / p->stripe;
}

static uint64_t stripe_up(const struct ec_priv *p, uint64_t off)
{
    return (off + p->stripe - 1) / p->stripe;
}

static uint32_t tx_usable(struct bfs_txn *t, uint32_t set)
{
    struct ec_wtxn *w = (struct ec_wtxn *)t;
    return set & ec_fd_opened(w->p->xl, w->fd);
}

/* Records rc as the answer of every child of mask (no call made). */
static void fail_all(struct ec_wtxn *w, uint32_t mask, int rc)
{
    for (int i = 0; i < w->p->n; i++) {
        if (!bfs_mask_has(mask, i))
            continue;
        struct bfs_op_reply *r = &w->t.op.replies[i];
        r->valid = true;
        r->rc = rc;
        r->fop = BFS_FOP_WRITE;
    }
}

/* ---- plan ---- */

static void add_read(struct ec_wtxn *w, uint64_t s)
{
    if (s * w->p->stripe >= w->old_size)
        return; /* past the size: zeros, nothing to read */
    for (int r = 0; r < 2; r++)
        if (w->rs[r] == (int64_t)s)
            return;
    w->rs[w->rs[0] < 0 ? 0 : 1] = (int64_t)s;
}

/* A piece over [a, b) whose partial edges (the change does not cover the
 * whole stripe) are read first. */
static void add_piece(struct ec_wtxn *w, uint64_t a, uint64_t b, uint64_t lo, uint64_t hi)
{
    struct ec_priv *p = w->p;
    w->pc[w->npieces].a = a;
    w->pc[w->npieces].b = b;
    w->npieces++;
    if (lo > a * p->stripe || (b == a + 1 && hi < b * p->stripe))
        add_read(w, a);
    if (hi < b * p->stripe)
        add_read(w, b - 1);
}

static void plan(struct ec_wtxn *w)
{
    struct ec_priv *p = w->p;
    struct ec_inode *c = ec_ictx(p->xl, w->inode);
    pthread_mutex_lock(&c->lock);
    w->old_size = c->size;
    pthread_mutex_unlock(&c->lock);
    w->rs[0] = w->rs[1] = -1;
    w->main_fop = -1;
    if (w->append)
        w->off = w->old_size;
    uint64_t lo = w->off, hi = w->off + w->len;
    switch (w->kind) {
    case W_WRITE:
        if (w->len)
            add_piece(w, stripe_of(p, lo), stripe_up(p, hi), lo, hi);
        break;
    case W_TRUNC:
        w->main_fop = BFS_FOP_FTRUNCATE;
        w->m_off = ec_frag_size(p, w->off);
        if (w->off < w->old_size && w->off % p->stripe)
            add_piece(w, stripe_of(p, w->off), stripe_of(p, w->off) + 1, 0, w->off);
        break;
    case W_FALLOC:
        w->main_fop = BFS_FOP_FALLOCATE;
        w->m_off = stripe_of(p, lo) * p->chunk;
        w->m_len = stripe_up(p, hi) * p->chunk - w->m_off;
        break;
    case W_ZERO:
    case W_DISCARD: {
        if (w->kind == W_DISCARD && hi > w->old_size)
            hi = w->old_size > lo ? w->old_size : lo; /* nothing to punch past the end */
        if (lo >= hi)
            break;
        uint64_t a = stripe_up(p, lo), b = stripe_of(p, hi); /* whole stripes [a, b) */
        if (a < b) {
            w->main_fop = w->kind == W_ZERO ? BFS_FOP_ZEROFILL : BFS_FOP_DISCARD;
            w->m_off = a * p->chunk;
            w->m_len = (b - a) * p->chunk;
        }
        bool head = lo % p->stripe, tail = hi % p->stripe;
        if (head)
            add_piece(w, stripe_of(p, lo), stripe_of(p, lo) + 1, lo, hi);
        if (tail && (!head || stripe_of(p, hi) != stripe_of(p, lo)))
            add_piece(w, stripe_of(p, hi), stripe_of(p, hi) + 1, lo, hi);
        break;
    }
    }
}

/* ---- read (RMW) ---- */

static int wind_reads(struct ec_wtxn *w)
{
    struct ec_priv *p = w->p;
    struct bfs_txn *t = &w->t;
    w->readers = ec_pick_k(p, t->run & ~w->rd_failed);
    bfs_op_reset_replies(&t->op);
    if (!w->readers) {
        XL_WARN(p->xl, "read-modify-write: fewer than %d good fragments: EIO", p->k);
        fail_all(w, t->run, -EIO); /* fewer than k good fragments: nothing is changed */
        w->stage = WS_DONE;
        return BFS_OP_CONTINUE;
    }
    int nr = w->rs[1] >= 0 ? 2 : 1;
    bfs_op_expect(&t->op, nr * bfs_mask_count(w->readers));
    w->stage = WS_READ;
    for (int r = 0; r < nr; r++) {
        struct bfs_read_req req = {.fd = w->fd, .size = (uint32_t)p->chunk,
                                   .offset = (uint64_t)w->rs[r] * p->chunk};
        for (int i = 0; i < p->n; i++)
            if (bfs_mask_has(w->readers, i))
                bfs_op_wind(&t->op, r * p->n + i, BFS_FOP_READ, p->xl->children[i], &req);
    }
    return BFS_OP_WAIT;
}

/* The reads answered: decode, or read again from other children. */
static int reads_done(struct ec_wtxn *w)
{
    struct ec_priv *p = w->p;
    struct bfs_op *op = &w->t.op;
    int nr = w->rs[1] >= 0 ? 2 : 1;
    uint32_t failed = 0;
    for (int r = 0; r < nr; r++)
        for (int i = 0; i < p->n; i++)
            if (bfs_mask_has(w->readers, i) &&
                (!op->replies[r * p->n + i].valid || op->replies[r * p->n + i].rc < 0))
                failed |= BFS_BIT(i);
    if (failed) {
        w->rd_failed |= failed;
        return wind_reads(w);
    }
    uint8_t *frag[EC_MAX] = {0};
    uint8_t *tmp = malloc((size_t)(p->n * p->chunk));
    if (!w->rbuf)
        w->rbuf = malloc(2 * p->stripe);
    if (!tmp || !w->rbuf) {
        free(tmp);
        bfs_op_reset_replies(op);
        fail_all(w, w->t.run, -ENOMEM);
        w->stage = WS_DONE;
        return BFS_OP_CONTINUE;
    }
    int rc = 0;
    for (int r = 0; r < nr && rc == 0; r++) {
        for (int i = 0; i < p->n; i++) {
            if (!bfs_mask_has(w->readers, i))
                continue;
            const struct bfs_read_rep *rr = op->replies[r * p->n + i].rep;
            size_t got = rr->data.len < p->chunk ? rr->data.len : p->chunk;
            frag[i] = tmp + (size_t)i * p->chunk;
            memcpy(frag[i], rr->data.data, got);
            memset(frag[i] + got, 0, p->chunk - got);
        }
        rc = ec_decode(p, frag, w->readers, 1, w->rbuf + r * p->stripe);
    }
    free(tmp);
    bfs_op_reset_replies(op);
    if (rc < 0) {
        fail_all(w, w->t.run, rc);
        w->stage = WS_DONE;
        return BFS_OP_CONTINUE;
    }
    __atomic_add_fetch(&p->n_rmw, 1, __ATOMIC_RELAXED);
    return -1; /* go on to the write */
}

/* ---- write ---- */

/* The old contents of stripe s (zeros when it was not read). */
static const uint8_t *old_stripe(const struct ec_wtxn *w, uint64_t s)
{
    for (int r = 0; r < 2; r++)
        if (w->rs[r] == (int64_t)s)
            return w->rbuf + r * w->p->stripe;
    return NULL;
}

/* Encodes data (the piece's stripes in file order) into its fragments. */
static int encode_piece(struct ec_priv *p, struct ec_piece *pc, const uint8_t *data)
{
    uint64_t ns = pc->b - pc->a;
    uint8_t *frags[EC_MAX] = {0};
    for (int i = 0; i < p->n; i++)
        frags[i] = pc->frags + (uint64_t)i * ns * p->chunk;
    return bfs_ec_encode_stripes(p->codec, data, ns, p->chunk, frags);
}

/* A piece the write's own bytes cover whole: nothing old, nothing zero in
 * its stripes, so it is encoded straight from them (no data area). */
static bool piece_covered(const struct ec_wtxn *w, const struct ec_piece *pc)
{
    return w->kind == W_WRITE && pc->a * w->p->stripe >= w->off &&
           pc->b * w->p->stripe <= w->off + w->len;
}

/* Fills piece j's data (old stripes, then the change) and encodes it. */
static int build_piece(struct ec_wtxn *w, int j)
{
    struct ec_priv *p = w->p;
    struct ec_piece *pc = &w->pc[j];
    uint64_t ns = pc->b - pc->a, base = pc->a * p->stripe;
    if (piece_covered(w, pc)) {
        pc->buf = malloc((size_t)(ns * p->chunk * (uint64_t)p->n));
        pc->frags = pc->buf;
        return pc->buf ? encode_piece(p, pc, w->data + (base - w->off)) : -ENOMEM;
    }
    pc->buf = calloc(1, (size_t)(ns * p->stripe + ns * p->chunk * (uint64_t)p->n));
    if (!pc->buf)
        return -ENOMEM;
    pc->frags = pc->buf + ns * p->stripe;
    const uint8_t *h = old_stripe(w, pc->a), *t = old_stripe(w, pc->b - 1);
    if (h)
        memcpy(pc->buf, h, p->stripe);
    if (t && pc->b - 1 != pc->a)
        memcpy(pc->buf + (ns - 1) * p->stripe, t, p->stripe);
    uint64_t lo = w->off > base ? w->off : base;
    uint64_t hi = w->off + w->len;
    if (hi > base + ns * p->stripe)
        hi = base + ns * p->stripe;
    if (w->kind == W_WRITE)
        memcpy(pc->buf + (lo - base), w->data + (lo - w->off), hi - lo);
    else if (w->kind == W_TRUNC)
        memset(pc->buf + (w->off - base), 0, base + p->stripe - w->off);
    else if (lo < hi)
        memset(pc->buf + (lo - base), 0, hi - lo);
    return encode_piece(p, pc, pc->buf);
}

/* The size after the change, in wind order (concurrent deltas add up). */
static void move_size(struct ec_wtxn *w)
{
    __atomic_add_fetch(&w->p->dseq, 1, __ATOMIC_ACQ_REL);
    struct ec_inode *c = ec_ictx(w->p->xl, w->inode);
    pthread_mutex_lock(&c->lock);
    uint64_t cur = c->size, end = w->off + w->len;
    uint64_t next = cur;
    if (w->kind == W_TRUNC)
        next = w->off;
    else if ((w->kind == W_WRITE || w->kind == W_ZERO ||
              (w->kind == W_FALLOC && !(w->fmode & FALLOC_FL_KEEP_SIZE))) && end > cur)
        next = end;
    c->size = next;
    pthread_mutex_unlock(&c->lock);
    w->old_size = cur;
    w->new_size = next;
    w->delta = (int64_t)(next - cur);
}

static void wind_main(struct ec_wtxn *w, int i, struct bfs_xl *child)
{
    struct bfs_op *op = &w->t.op;
    switch (w->main_fop) {
    case BFS_FOP_FTRUNCATE: {
        struct bfs_ftruncate_req req = {.fd = w->fd, .offset = w->m_off};
        bfs_op_wind(op, i, BFS_FOP_FTRUNCATE, child, &req);
        break;
    }
    case BFS_FOP_FALLOCATE: {
        struct bfs_fallocate_req req = {.fd = w->fd, .mode = w->fmode, .offset = w->m_off,
                                        .len = w->m_len};
        bfs_op_wind(op, i, BFS_FOP_FALLOCATE, child, &req);
        break;
    }
    case BFS_FOP_ZEROFILL: {
        struct bfs_zerofill_req req = {.fd = w->fd, .offset = w->m_off, .len = w->m_len};
        bfs_op_wind(op, i, BFS_FOP_ZEROFILL, child, &req);
        break;
    }
    case BFS_FOP_DISCARD: {
        struct bfs_discard_req req = {.fd = w->fd, .offset = w->m_off, .len = w->m_len};
        bfs_op_wind(op, i, BFS_FOP_DISCARD, child, &req);
        break;
    }
    }
}

/* xdata: NULL, or the size delta riding in the write (lib/wadd-wire.h). */
static void wind_piece(struct ec_wtxn *w, int j, int slot, int i, struct bfs_xl *child,
                       struct bfs_dict *xdata)
{
    struct ec_priv *p = w->p;
    struct ec_piece *pc = &w->pc[j];
    uint64_t ns = pc->b - pc->a;
    struct bfs_write_req req = {.fd = w->fd, .offset = pc->a * p->chunk, .xdata = xdata};
    req.data.data = pc->frags + (uint64_t)i * ns * p->chunk;
    req.data.len = ns * p->chunk;
    bfs_op_wind(&w->t.op, slot, BFS_FOP_WRITE, child, &req);
}

/*
 * The size delta of a write rides in its fragment write (no fxattrop beside
 * it) on bricks that acknowledged such a write since they came up; the
 * others get the fxattrop and a probe in the write, which teaches us that
 * their brick understands. Only for a plain write (one piece in slot i, no
 * other call to fold): its one answer says whether the delta was added.
 * Two dicts: [0] with the delta, [1] the probe; NULL when not to be used.
 */
static void wadd_dicts(struct ec_wtxn *w, uint64_t be, struct bfs_dict *d[2])
{
    d[0] = d[1] = NULL;
    if (w->kind != W_WRITE || w->npieces != 1 || w->main_fop >= 0 || !w->delta)
        return;
    d[0] = bfs_dict_new();
    d[1] = bfs_dict_new();
    if (d[0] && bfs_dict_set_bin(d[0], BFS_WADD EC_KEY_SIZE, &be, 8) < 0) {
        bfs_dict_unref(d[0]);
        d[0] = NULL;
    }
    if (d[1] && bfs_dict_set_int(d[1], BFS_WADD_PROBE, 1) < 0) {
        bfs_dict_unref(d[1]);
        d[1] = NULL;
    }
}

/* Bricks that acknowledged a write carrying a delta or a probe. */
static void wadd_learn(struct ec_wtxn *w)
{
    struct ec_priv *p = w->p;
    uint32_t acked = 0;
    for (int i = 0; i < p->n; i++) {
        const struct bfs_op_reply *r = &w->t.op.replies[i];
        int64_t v = 0;
        if (bfs_mask_has(w->t.run, i) && r->valid && r->rc >= 0 && r->rep &&
            r->fop == BFS_FOP_WRITE &&
            bfs_dict_get_int(((const struct bfs_write_rep *)r->rep)->xdata, BFS_WADDED, &v) == 0 &&
            v == 1)
            acked |= BFS_BIT(i);
    }
    if (acked & ~__atomic_load_n(&p->wadd, __ATOMIC_ACQUIRE))
        __atomic_or_fetch(&p->wadd, acked, __ATOMIC_ACQ_REL);
}

static int wind_writes(struct ec_wtxn *w)
{
    struct ec_priv *p = w->p;
    struct bfs_txn *t = &w->t;
    for (int j = 0; j < w->npieces; j++) {
        int rc = w->pc[j].buf ? 0 : build_piece(w, j); /* else encoded by ec_write */
        if (rc < 0) {
            fail_all(w, t->run, rc);
            w->stage = WS_DONE;
            return BFS_OP_CONTINUE;
        }
    }
    move_size(w);
    int per = (w->main_fop >= 0) + w->npieces + (w->delta != 0);
    w->stage = WS_WRITE;
    if (per == 0) {
        fail_all(w, t->run, 0); /* nothing to do on the bricks (an empty write) */
        w->stage = WS_DONE;
        return BFS_OP_CONTINUE;
    }
    uint64_t be = htobe64((uint64_t)w->delta);
    struct bfs_dict *wd[2];
    wadd_dicts(w, be, wd);
    uint32_t known = __atomic_load_n(&p->wadd, __ATOMIC_ACQUIRE);
    w->wadd = wd[0] ? t->run & known : 0;
    bfs_op_expect(&t->op, per * bfs_mask_count(t->run) - bfs_mask_count(w->wadd));
    for (int i = 0; i < p->n; i++) {
        if (!bfs_mask_has(t->run, i))
            continue;
        struct bfs_xl *child = p->xl->children[i];
        bool rides = bfs_mask_has(w->wadd, i);
        int extra = 2; /* slots 2n+i, 3n+i for pieces not in slot i */
        if (w->main_fop >= 0)
            wind_main(w, i, child);
        for (int j = 0; j < w->npieces; j++)
            wind_piece(w, j, (w->main_fop < 0 && j == 0) ? i : (extra++) * p->n + i, i, child,
                       j ? NULL : wd[rides ? 0 : 1]);
        if (w->delta && !rides) {
            struct bfs_fxattrop_req req = {.fd = w->fd, .optype = BFS_XATTROP_ADD64,
                                           .xattrs = bfs_dict_new()};
            if (req.xattrs && bfs_dict_set_bin(req.xattrs, EC_KEY_SIZE, &be, 8) == 0) {
                bfs_op_wind(&t->op, p->n + i, BFS_FOP_FXATTROP, child, &req);
            } else {
                struct bfs_op_reply *r = &t->op.replies[p->n + i];
                r->valid = true;
                r->rc = -ENOMEM;
                r->fop = BFS_FOP_FXATTROP;
                bfs_op_expect(&t->op, -1);
            }
            bfs_dict_unref(req.xattrs);
        }
    }
    bfs_dict_unref(wd[0]);
    bfs_dict_unref(wd[1]);
    return BFS_OP_WAIT;
}

/* A child is done only if all of its calls were: fold into slot i. */
static void fold(struct ec_wtxn *w)
{
    struct ec_priv *p = w->p;
    struct bfs_op *op = &w->t.op;
    for (int i = 0; i < p->n; i++) {
        if (!bfs_mask_has(w->t.run, i))
            continue;
        for (int s = 1; s < BFS_TXN_FOP_SLOTS; s++) {
            struct bfs_op_reply *x = &op->replies[s * p->n + i];
            if (x->valid && x->rc < 0 && op->replies[i].valid && op->replies[i].rc >= 0)
                op->replies[i].rc = x->rc;
        }
    }
}

/* ---- the txn hooks ---- */

static uint32_t tx_wind(struct bfs_txn *t, uint32_t run)
{
    struct ec_wtxn *w = (struct ec_wtxn *)t;
    w->stage = WS_PLAN;
    if (bfs_mask_count(run) < ec_quorum(w->p)) {
        XL_WARN(w->p->xl, "a data change would reach %d child(ren), %d needed: EIO",
                bfs_mask_count(run), ec_quorum(w->p));
        fail_all(w, run, -EIO); /* too few fragments would be written */
        w->stage = WS_DONE;
        return 0;
    }
    plan(w);
    if (w->rs[0] >= 0) {
        if (wind_reads(w) == BFS_OP_WAIT)
            return 0;
        return 0; /* failed: every child answered EIO */
    }
    (void)wind_writes(w);
    return 0;
}

/*
 * The size counter moves by an xattrop sent beside the fragment writes (no
 * extra round trip). When the change then failed on every child, nothing
 * else changed and the counter must not have moved either: the children
 * whose counter took the delta get it back (one more xattrop each, on this
 * failure path only). Deltas are taken in wind order, so this is exact only
 * if no later change moved the size on from ours: then the size goes back,
 * and so do earlier failed changes that later one had built on (ctx
 * "undone" list); else the later change's delta already counts from our end
 * and is right if it succeeds (the range we failed to write reads as a
 * hole, as after any write past the end), so ours is only recorded.
 * Returns BFS_OP_WAIT after winding the undo.
 */
static int undo_size(struct ec_wtxn *w)
{
    struct ec_priv *p = w->p;
    struct bfs_op *op = &w->t.op;
    uint32_t moved = 0;
    for (int i = 0; i < p->n; i++) {
        if (!bfs_mask_has(w->t.run, i))
            continue;
        if (op->replies[i].valid && op->replies[i].rc >= 0)
            return BFS_OP_CONTINUE; /* took it somewhere: the size is right */
        const struct bfs_op_reply *x = &op->replies[p->n + i];
        if (w->delta && x->valid && x->rc >= 0 && x->fop == BFS_FOP_FXATTROP)
            moved |= BFS_BIT(i);
        /* riding in the write, the delta moved only if the write succeeded:
         * not here (it failed), so nothing to take back on i */
    }
    struct ec_inode *c = ec_ictx_peek(p->xl, w->inode);
    if (!c || !w->delta)
        return BFS_OP_CONTINUE;
    int64_t back[EC_MAX] = {0};
    pthread_mutex_lock(&c->lock);
    if (c->size != w->new_size) {
        if (c->nundone == (int)(sizeof(c->undone) / sizeof(c->undone[0])))
            memmove(c->undone, c->undone + 1, sizeof(c->undone) - sizeof(c->undone[0]));
        else
            c->nundone++;
        c->undone[c->nundone - 1] = (struct ec_undone){w->old_size, w->new_size, moved};
    } else {
        c->size = w->old_size;
        for (int i = 0; i < p->n; i++)
            back[i] = bfs_mask_has(moved, i) ? -w->delta : 0;
        for (int j = c->nundone - 1; j >= 0; j--) {
            struct ec_undone *u = &c->undone[j];
            if (u->new_size != c->size)
                continue;
            for (int i = 0; i < p->n; i++)
                if (bfs_mask_has(u->moved, i))
                    back[i] -= (int64_t)(u->new_size - u->old_size);
            c->size = u->old_size;
            memmove(u, u + 1, (size_t)(c->nundone - 1 - j) * sizeof(*u));
            c->nundone--;
            j = c->nundone; /* an older one may continue the chain */
        }
    }
    pthread_mutex_unlock(&c->lock);
    w->delta = 0; /* tx_combine: the context's size is right already */
    int count = 0;
    for (int i = 0; i < p->n; i++)
        count += back[i] != 0;
    if (!count)
        return BFS_OP_CONTINUE;
    for (int i = 0; i < p->n; i++)
        w->saved_rc[i] = op->replies[i].valid ? op->replies[i].rc : -EIO;
    bfs_op_reset_replies(op);
    bfs_op_expect(op, count);
    for (int i = 0; i < p->n; i++) {
        if (!back[i])
            continue;
        uint64_t be = htobe64((uint64_t)back[i]);
        struct bfs_fxattrop_req req = {.fd = w->fd, .optype = BFS_XATTROP_ADD64,
                                       .xattrs = bfs_dict_new()};
        if (req.xattrs && bfs_dict_set_bin(req.xattrs, EC_KEY_SIZE, &be, 8) == 0) {
            bfs_op_wind(op, p->n + i, BFS_FOP_FXATTROP, p->xl->children[i], &req);
        } else {
            bfs_op_expect(op, -1);
        }
        bfs_dict_unref(req.xattrs);
    }
    w->stage = WS_UNDO;
    return BFS_OP_WAIT;
}

/* After the undo: the fop's answers back in slots 0..n-1. */
static void undo_done(struct ec_wtxn *w)
{
    struct ec_priv *p = w->p;
    struct bfs_op *op = &w->t.op;
    for (int i = 0; i < p->n; i++) {
        const struct bfs_op_reply *x = &op->replies[p->n + i];
        if (x->valid && x->rc < 0)
            XL_WARN(p->xl, "cannot take back the size moved by a failed change on %s: %s",
                    p->xl->children[i]->name, strerror(-x->rc));
    }
    bfs_op_reset_replies(op);
    for (int i = 0; i < p->n; i++) {
        if (!bfs_mask_has(w->t.run, i))
            continue;
        op->replies[i].valid = true;
        op->replies[i].rc = w->saved_rc[i];
        op->replies[i].fop = BFS_FOP_WRITE;
    }
}

static int tx_next(struct bfs_txn *t)
{
    struct ec_wtxn *w = (struct ec_wtxn *)t;
    switch (w->stage) {
    case WS_READ: {
        int r = reads_done(w);
        if (r != -1)
            return r == BFS_OP_WAIT ? BFS_OP_WAIT : BFS_OP_CONTINUE;
        if (wind_writes(w) == BFS_OP_WAIT)
            return BFS_OP_WAIT;
        return BFS_OP_CONTINUE;
    }
    case WS_WRITE:
        wadd_learn(w);
        fold(w);
        w->stage = WS_DONE;
        return undo_size(w);
    case WS_UNDO:
        undo_done(w);
        w->stage = WS_DONE;
        return BFS_OP_CONTINUE;
    }
    return BFS_OP_CONTINUE;
}

static int tx_combine(struct bfs_txn *t)
{
    struct ec_wtxn *w = (struct ec_wtxn *)t;
    struct ec_priv *p = w->p;
    int err = 0;
    w->chosen = -1;
    for (int i = 0; i < p->n; i++) {
        const struct bfs_op_reply *r = &t->op.replies[i];
        if (!r->valid)
            continue;
        if (r->rc >= 0 && bfs_mask_has(t->ok, i) && w->chosen < 0)
            w->chosen = i;
        if (r->rc < 0 && (!err || err == -ENOTCONN))
            err = r->rc;
    }
    __atomic_add_fetch(&p->n_txn, 1, __ATOMIC_RELAXED);
    if (w->chosen >= 0 && bfs_mask_count(t->ok) < ec_quorum(p)) {
        XL_WARN(p->xl, "a data change reached %d child(ren), %d needed: EIO",
                bfs_mask_count(t->ok), ec_quorum(p));
        return -EIO; /* written, but to too few children to be read back */
    }
    struct ec_inode *c = ec_ictx_peek(p->xl, w->inode);
    if (w->chosen < 0) {
        if (c && w->delta) { /* failed before the writes: the size did not move */
            pthread_mutex_lock(&c->lock);
            if (c->size == w->new_size)
                c->size = w->old_size;
            pthread_mutex_unlock(&c->lock);
        }
        return err ? err : -EIO;
    }
    if (c && w->delta) { /* the size moved: earlier failures are settled */
        pthread_mutex_lock(&c->lock);
        c->nundone = 0;
        pthread_mutex_unlock(&c->lock);
    }
    ec_ictx_failed(ec_ictx_peek(p->xl, w->inode), EC_DATA, t->failed);
    return w->kind == W_WRITE ? (int)w->len : 0;
}

static void tx_answer(struct bfs_txn *t, int rc)
{
    struct ec_wtxn *w = (struct ec_wtxn *)t;
    __atomic_add_fetch(&w->p->dseq, 1, __ATOMIC_ACQ_REL); /* lookups in flight predate it */
    if (rc < 0)
        XL_WARN(w->p->xl, "%s failed: %s (set %#x, ran on %#x, ok %#x, failed %#x)",
                bfs_fop_info[w->fop].name, strerror(-rc), t->lk->set, t->run, t->ok,
                t->failed);
    if (rc == -EROFS)
        rc = -EIO; /* below quorum: for disperse the data is not there */
    if (w->open_rep) {
        bfs_unwind_open(t->caller, rc, rc >= 0 ? w->open_rep : NULL);
        return;
    }
    struct ec_prepost rep = {0};
    const struct bfs_op_reply *r = w->chosen >= 0 ? &t->op.replies[w->chosen] : NULL;
    if (rc >= 0 && r && r->rep && r->fop != BFS_FOP_FXATTROP)
        rep = *(const struct ec_prepost *)r->rep;
    rep.xdata = NULL;
    ec_fix_iatt(w->p, &rep.pre, w->old_size);
    ec_fix_iatt(w->p, &rep.post, w->new_size);
    bfs_unwind_any(w->fop, t->caller, rc, rc >= 0 ? &rep : NULL);
}

static void tx_destroy(struct bfs_txn *t)
{
    wtxn_free((struct ec_wtxn *)t);
}

static const struct bfs_txn_fop ec_data_fop = {.usable = tx_usable, .wind = tx_wind,
                                               .next = tx_next, .combine = tx_combine,
                                               .answer = tx_answer, .destroy = tx_destroy};

/* ---- starting data transactions ---- */

static struct ec_wtxn *wtxn_new(struct bfs_xl *xl, int fop, const void *req, int kind)
{
    const struct bfs_fop_info *fi = &bfs_fop_info[fop];
    struct ec_wtxn *w = calloc(1, sizeof(*w));
    void *copy = calloc(1, fi->req_size);
    if (!w || !copy || fi->req_copy_into(copy, req) < 0) {
        free(copy);
        free(w);
        return NULL;
    }
    w->p = ec_priv(xl);
    w->fop = fop;
    w->req = copy;
    w->kind = kind;
    w->chosen = -1;
    return w;
}

/* w is set up (fd, range); starts its transaction. */
static int start(struct ec_wtxn *w, struct bfs_frame *frame, bool whole, bool fd_based)
{
    struct ec_priv *p = w->p;
    struct bfs_xl *xl = p->xl;
    if (!w->inode)
        w->inode = ec_inode_of_fd(xl, w->fd);
    struct ec_inode *c = ec_ictx(xl, w->inode);
    if (!w->inode || !c) {
        int rc = w->inode ? -ENOMEM : -EINVAL;
        wtxn_free(w);
        return rc;
    }
    w->t.start = whole ? 0 : stripe_of(p, w->off) * p->stripe;
    w->t.end = whole ? UINT64_MAX : stripe_up(p, w->off + w->len) * p->stripe;
    if (w->t.end <= w->t.start)
        w->t.end = w->t.start + p->stripe;
    w->t.fd_based = fd_based;
    struct bfs_txn_target tg = {.nsets = 1, .nobj = 1, .inode = w->inode, .fd = w->fd};
    tg.lk[0].kind = BFS_LKSET_INODE;
    tg.lk[0].gfid = w->inode->gfid;
    tg.obj[0] = w->inode->gfid;
    tg.fd_open = ec_fd_opened(xl, w->fd);
    if (bfs_txn_init(&w->t, &p->cl, &ec_data_fop, frame, BFS_TXN_DATA, &c->dlock, &tg) < 0) {
        wtxn_free(w);
        return -ENOMEM;
    }
    bfs_txn_start(&w->t);
    return 0;
}

/*
 * A write of whole stripes at a known place (no O_APPEND) reads nothing and
 * its fragments do not depend on the file: they are encoded here, from the
 * caller's bytes (valid until this call returns, runtime.md), and the
 * request is copied without its payload — a sequential write's 1 MiB copy
 * and the piece's data area less per MiB. Other writes copy the payload:
 * their piece is built under the lock, maybe after this call returned.
 */
static bool whole_stripes(const struct ec_priv *p, const struct bfs_write_req *req)
{
    return !(req->fd->flags & O_APPEND) && req->data.data && req->data.len &&
           req->offset % p->stripe == 0 && req->data.len % p->stripe == 0 &&
           req->offset + req->data.len > req->offset;
}

static int encode_early(struct ec_wtxn *w, const struct bfs_write_req *req)
{
    struct ec_priv *p = w->p;
    w->pc[0].a = stripe_of(p, w->off);
    w->pc[0].b = stripe_of(p, w->off + w->len);
    w->data = req->data.data;
    int rc = build_piece(w, 0);
    w->data = NULL;
    return rc;
}

int ec_write(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_write_req *req)
{
    if ((req->fd->flags & O_ACCMODE) == O_RDONLY)
        return -EBADF;
    struct ec_priv *p = ec_priv(xl);
    bool early = whole_stripes(p, req);
    struct bfs_write_req shallow = *req;
    shallow.data.data = NULL; /* copied without its payload: encoded below */
    struct ec_wtxn *w = wtxn_new(xl, BFS_FOP_WRITE, early ? &shallow : req, W_WRITE);
    if (!w)
        return -ENOMEM;
    const struct bfs_write_req *q = w->req;
    w->fd = q->fd;
    w->off = q->offset;
    w->len = q->data.len;
    w->data = q->data.data;
    w->append = (q->fd->flags & O_APPEND) != 0;
    if (early) {
        int rc = encode_early(w, req);
        if (rc < 0) {
            wtxn_free(w);
            return rc;
        }
    }
    __atomic_add_fetch(early ? &p->n_wlent : &p->n_wcopied, 1, __ATOMIC_RELAXED);
    return start(w, f, w->append, true);
}

int ec_ftruncate(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_ftruncate_req *req)
{
    struct ec_wtxn *w = wtxn_new(xl, BFS_FOP_FTRUNCATE, req, W_TRUNC);
    if (!w)
        return -ENOMEM;
    w->fd = req->fd;
    w->off = req->offset;
    return start(w, f, true, true);
}

struct trunc_ctx {
    struct ec_wtxn *w;
    struct bfs_frame *frame;
};

static void trunc_opened(void *arg, int rc)
{
    struct trunc_ctx *tc = arg;
    struct ec_wtxn *w = tc->w;
    struct bfs_frame *frame = tc->frame;
    free(tc);
    if (rc >= 0) {
        rc = start(w, frame, true, false);
    } else {
        XL_WARN(w->p->xl, "truncate: the file opened on too few children: %s", strerror(-rc));
        wtxn_free(w);
    }
    if (rc < 0)
        bfs_unwind_truncate(frame, rc, NULL);
}

/* By path: an internal fd is opened on the children first (RMW reads and
 * writes go through fds). */
int ec_truncate(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_truncate_req *req)
{
    struct bfs_inode *inode = ec_inode_of_loc(xl, &req->loc);
    if (!inode)
        return -EINVAL;
    struct ec_wtxn *w = wtxn_new(xl, BFS_FOP_TRUNCATE, req, W_TRUNC);
    struct trunc_ctx *tc = calloc(1, sizeof(*tc));
    struct bfs_fd *fd = w && tc ? bfs_fd_new(xl->graph, inode, O_RDWR, 0) : NULL;
    if (!fd) {
        free(tc);
        if (w)
            wtxn_free(w);
        bfs_inode_unref(inode);
        return -ENOMEM;
    }
    w->inode = inode;
    w->fd = fd;
    w->own_fd = true;
    w->off = req->offset;
    tc->w = w;
    tc->frame = f;
    int rc = ec_open_internal(f, xl, fd, &inode->gfid, trunc_opened, tc);
    if (rc < 0) {
        free(tc);
        wtxn_free(w);
    }
    return rc;
}

int ec_open_trunc(struct bfs_frame *frame, struct bfs_xl *xl, struct bfs_fd *fd,
                  const struct bfs_open_rep *rep)
{
    struct bfs_ftruncate_req req = {.fd = fd, .offset = 0};
    struct ec_wtxn *w = wtxn_new(xl, BFS_FOP_FTRUNCATE, &req, W_TRUNC);
    if (!w)
        return -ENOMEM;
    if (!(w->open_rep = bfs_open_rep_dup(rep))) {
        wtxn_free(w);
        return -ENOMEM;
    }
    w->open_rep->attr.size = 0;
    w->open_rep->attr.blocks = 0;
    w->fd = fd;
    w->inode = ec_inode_of_fd(xl, fd);
    return start(w, frame, true, true);
}

int ec_fallocate(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fallocate_req *req)
{
    if (req->mode & FALLOC_FL_PUNCH_HOLE) {
        struct ec_wtxn *w = wtxn_new(xl, BFS_FOP_FALLOCATE, req, W_DISCARD);
        if (!w)
            return -ENOMEM;
        w->fd = req->fd;
        w->off = req->offset;
        w->len = req->len;
        return start(w, f, false, true);
    }
    if (req->mode & ~(uint32_t)(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE))
        return -EOPNOTSUPP;
    struct ec_wtxn *w = wtxn_new(xl, BFS_FOP_FALLOCATE, req, W_FALLOC);
    if (!w)
        return -ENOMEM;
    w->fd = req->fd;
    w->off = req->offset;
    w->len = req->len;
    w->fmode = req->mode;
    return start(w, f, true, true);
}

int ec_discard(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_discard_req *req)
{
    struct ec_wtxn *w = wtxn_new(xl, BFS_FOP_DISCARD, req, W_DISCARD);
    if (!w)
        return -ENOMEM;
    w->fd = req->fd;
    w->off = req->offset;
    w->len = req->len;
    return start(w, f, false, true);
}

int ec_zerofill(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_zerofill_req *req)
{
    struct ec_wtxn *w = wtxn_new(xl, BFS_FOP_ZEROFILL, req, W_ZERO);
    if (!w)
        return -ENOMEM;
    w->fd = req->fd;
    w->off = req->offset;
    w->len = req->len;
    return start(w, f, false, true);
}
