/*
 * locks-txn.c — changelog steps of cluster transactions piggybacked on
 * other calls (lib/txn-wire.h; docs/design/replicate.md, "Piggybacked
 * changelog steps"), so that a transaction pays fewer round trips:
 *
 *   - post-op + unlock: an xattrop/fxattrop whose xdata names a lock of
 *     the caller goes down first; when it has answered (whatever it
 *     answered) that lock is released here and the reply says so;
 *   - pre-op + entry fop: an entry fop whose xdata carries pre-op rows
 *     first applies them to the parent directory as an xattrop through the
 *     translators below (features/index sees it as any xattrop), then runs
 *     the fop; a failed fop has its pre-op undone before its error goes up;
 *   - lock on create: a create asking for the new file's data lock gets it
 *     granted before it runs and, once it succeeded, the data pre-op rows
 *     added to the new file; the reply acknowledges both (else the lock is
 *     dropped again).
 *
 * On one brick the order is what the separate calls would give: the mark
 * is on disk before the change, and the unlock after the post-op. Calls
 * without these keys pass straight through.
 *
 * Lifetime: a struct txn_call lives from the call until its answer has gone
 * up; it holds a deep copy of the entry fop's request (without the keys).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "locks.h"
#include "xlators/lib/txn-wire.h"

/* ---- post-op + unlock ---- */

struct unlock_after {
    struct bfs_xl *xl;
    struct pl_owner owner;
    struct bfs_gfid gfid;
    bool entry;
    char *domain, *name;
};

static void unlock_after_free(struct unlock_after *u)
{
    free(u->domain);
    free(u->name);
    free(u);
}

/* The lock an xattrop's xdata asks to release afterwards; NULL if none (or
 * no memory: then nothing is acknowledged and the client unlocks itself). */
static struct unlock_after *unlock_after_new(struct bfs_frame *frame, struct bfs_xl *xl,
                                             const struct bfs_dict *xdata,
                                             const struct bfs_gfid *gfid)
{
    const char *dom = NULL, *name = NULL;
    bool entry = false;
    if (!xdata || !gfid)
        return NULL;
    if (bfs_dict_get_str(xdata, BFS_TXN_X_UNLOCK_ENTRY, &dom) == 0 && dom) {
        entry = true;
        if (bfs_dict_get_str(xdata, BFS_TXN_X_UNLOCK_NAME, &name) < 0 || !name)
            return NULL;
    } else if (bfs_dict_get_str(xdata, BFS_TXN_X_UNLOCK_INODE, &dom) < 0 || !dom) {
        return NULL;
    }
    struct unlock_after *u = calloc(1, sizeof(*u));
    if (!u)
        return NULL;
    u->xl = xl;
    u->owner.client = frame->stack->client;
    u->owner.id = frame->stack->lk_owner;
    u->gfid = *gfid;
    u->entry = entry;
    u->domain = strdup(dom);
    u->name = name ? strdup(name) : NULL;
    if (!u->domain || (name && !u->name)) {
        unlock_after_free(u);
        return NULL;
    }
    return u;
}

/* Releases the lock; the reply's xdata (a new dict, or NULL on ENOMEM)
 * acknowledges it. */
static struct bfs_dict *unlock_now(struct unlock_after *u, const struct bfs_dict *xdata)
{
    if (u->entry)
        (void)bfs__pl_entrylk_drop(u->xl, &u->owner, u->domain, &u->gfid, u->name);
    else
        (void)bfs__pl_inodelk_drop(u->xl, &u->owner, u->domain, &u->gfid);
    struct bfs_dict *d = xdata ? bfs_dict_copy(xdata) : bfs_dict_new();
    if (d && bfs_dict_set_int(d, BFS_TXN_X_UNLOCKED, 1) < 0) {
        bfs_dict_unref(d);
        d = NULL;
    }
    return d;
}

static void xattrop_cbk(struct bfs_frame *frame, void *cookie, int rc,
                        const struct bfs_xattrop_rep *rep)
{
    struct unlock_after *u = cookie;
    struct bfs_xattrop_rep r = *rep;
    r.xdata = unlock_now(u, rep->xdata);
    unlock_after_free(u);
    bfs_unwind_xattrop(frame, rc, &r);
    bfs_dict_unref(r.xdata);
}

static void fxattrop_cbk(struct bfs_frame *frame, void *cookie, int rc,
                         const struct bfs_fxattrop_rep *rep)
{
    struct unlock_after *u = cookie;
    struct bfs_fxattrop_rep r = *rep;
    r.xdata = unlock_now(u, rep->xdata);
    unlock_after_free(u);
    bfs_unwind_fxattrop(frame, rc, &r);
    bfs_dict_unref(r.xdata);
}

int bfs__pl_xattrop(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_xattrop_req *req)
{
    struct bfs_gfid g;
    bool have = bfs__pl_loc_gfid(&req->loc, &g) == 0;
    struct unlock_after *u = have ? unlock_after_new(frame, xl, req->xdata, &g) : NULL;
    if (!u)
        return bfs_pass_xattrop(frame, FIRST_CHILD(xl), req);
    int rc = bfs_wind_xattrop(frame, FIRST_CHILD(xl), xattrop_cbk, u, req);
    if (rc < 0)
        unlock_after_free(u); /* not wound: the caller answers, the client unlocks */
    return rc;
}

int bfs__pl_fxattrop(struct bfs_frame *frame, struct bfs_xl *xl,
                     const struct bfs_fxattrop_req *req)
{
    const struct bfs_gfid *g = req->fd && req->fd->inode ? &req->fd->inode->gfid : NULL;
    struct unlock_after *u = unlock_after_new(frame, xl, req->xdata, g);
    if (!u)
        return bfs_pass_fxattrop(frame, FIRST_CHILD(xl), req);
    int rc = bfs_wind_fxattrop(frame, FIRST_CHILD(xl), fxattrop_cbk, u, req);
    if (rc < 0)
        unlock_after_free(u);
    return rc;
}

/* ---- pre-op + entry fop, lock on create ---- */

struct txn_call {
    struct bfs_xl *xl;
    int fop;
    void *req;               /* deep copy, our keys removed */
    struct bfs_dict *rows;   /* the pre-op on the parent: xattr -> 24-byte row */
    struct bfs_gfid parent;
    int rc;                  /* the fop's error, while its pre-op is undone */
    /* lock on create */
    bool newlock;            /* granted before the create */
    struct pl_owner owner;
    char *domain;
    struct bfs_gfid gfid;    /* the new file's */
    struct bfs_dict *newrows;/* added to the new file after the create */
    void *rep;               /* the create's reply, while they are added */
};

struct collect {
    const char *prefix;
    size_t len;
    struct bfs_dict *out;
};

static int collect_row(const char *key, enum bfs_val_type type, const void *val, size_t len,
                       void *arg)
{
    struct collect *c = arg;
    if (type != BFS_VAL_BIN || strncmp(key, c->prefix, c->len) != 0)
        return 0;
    return bfs_dict_set_bin(c->out, key + c->len, val, len);
}

static bool ours(const char *key)
{
    return strncmp(key, BFS_TXN_X_PREOP, BFS_TXN_X_PREOP_LEN) == 0 ||
           strncmp(key, BFS_TXN_X_NEWROW, BFS_TXN_X_NEWROW_LEN) == 0 ||
           strcmp(key, BFS_TXN_X_NEWLOCK) == 0 || strcmp(key, BFS_TXN_X_NEWLOCK_OWNER) == 0;
}

struct keep_arg {
    const struct bfs_dict *src;
    struct bfs_dict *out;
};

/* Copies every key but ours (the fop below does not see them). */
static int keep_other(const char *key, enum bfs_val_type type, const void *val, size_t len,
                      void *arg)
{
    struct keep_arg *k = arg;
    const char *str;
    int64_t i;
    if (ours(key))
        return 0;
    if (type == BFS_VAL_STR)
        return bfs_dict_get_str(k->src, key, &str) == 0 ? bfs_dict_set_str(k->out, key, str) : 0;
    if (type == BFS_VAL_INT)
        return bfs_dict_get_int(k->src, key, &i) == 0 ? bfs_dict_set_int(k->out, key, i) : 0;
    return bfs_dict_set_bin(k->out, key, val, len);
}

static void txn_call_free(struct txn_call *c)
{
    if (c->req) {
        bfs_fop_info[c->fop].req_clear_dup(c->req);
        free(c->req);
    }
    if (c->rep) {
        bfs_fop_info[c->fop].rep_clear_dup(c->rep);
        free(c->rep);
    }
    bfs_dict_unref(c->rows);
    bfs_dict_unref(c->newrows);
    free(c->domain);
    free(c);
}

/* Negates every 8-byte big-endian counter of every row (the undo). */
static int negate_row(const char *key, enum bfs_val_type type, const void *val, size_t len,
                      void *arg)
{
    if (type != BFS_VAL_BIN || len % 8)
        return -EINVAL;
    uint8_t buf[64];
    if (len > sizeof(buf))
        return -EINVAL;
    for (size_t o = 0; o < len; o += 8) {
        uint64_t v = 0;
        for (int b = 0; b < 8; b++)
            v = v << 8 | ((const uint8_t *)val)[o + b];
        v = (uint64_t)-(int64_t)v;
        for (int b = 7; b >= 0; b--) {
            buf[o + b] = (uint8_t)v;
            v >>= 8;
        }
    }
    return bfs_dict_set_bin(arg, key, buf, len);
}

static void drop_newlock(struct txn_call *c)
{
    if (c->newlock)
        (void)bfs__pl_inodelk_drop(c->xl, &c->owner, c->domain, &c->gfid);
    c->newlock = false;
}

static void answer_error(struct bfs_frame *frame, struct txn_call *c, int rc)
{
    int fop = c->fop;
    drop_newlock(c);
    txn_call_free(c);
    bfs_unwind_any(fop, frame, rc, NULL);
}

static void undo_cbk(struct bfs_frame *frame, void *cookie, int rc,
                     const struct bfs_xattrop_rep *rep)
{
    (void)rep;
    struct txn_call *c = cookie;
    if (rc < 0)
        XL_WARN(c->xl, "undoing the pre-op of a failed %s: %s (a dirty mark stays)",
                bfs_fop_name(c->fop), strerror(-rc));
    answer_error(frame, c, c->rc);
}

/* The new file's rows were added (or not): answer the create. */
static void newrow_done(struct bfs_frame *frame, struct txn_call *c, int rc)
{
    struct bfs_create_rep *cr = c->rep;
    struct bfs_dict *x = NULL;
    if (rc >= 0) {
        x = cr->xdata ? bfs_dict_copy(cr->xdata) : bfs_dict_new();
        if (x && bfs_dict_set_int(x, BFS_TXN_X_NEWLOCKED, 1) < 0) {
            bfs_dict_unref(x);
            x = NULL;
        }
    }
    if (!x) /* no acknowledgement: the client does not think it holds the lock */
        drop_newlock(c);
    struct bfs_create_rep r = *cr;
    if (x)
        r.xdata = x;
    bfs_unwind_create(frame, 0, &r);
    bfs_dict_unref(x);
    txn_call_free(c);
}

static void newrow_cbk(struct bfs_frame *frame, void *cookie, int rc,
                       const struct bfs_xattrop_rep *rep)
{
    (void)rep;
    newrow_done(frame, cookie, rc);
}

static void newrow_fcbk(struct bfs_frame *frame, void *cookie, int rc,
                        const struct bfs_fxattrop_rep *rep)
{
    (void)rep;
    newrow_done(frame, cookie, rc);
}

/* Adds the new file's rows (c->rep holds the create's reply). Through the
 * fd the create opened when it made the file the lock names: the brick
 * then uses that fd, where a GFID would cost a trip through the handle
 * store and the xattr calls a path each (performance note 48). A create
 * that opened some other file (its GFID is not the one asked) goes by GFID
 * and fails there, as it always did: the rows never land on another file. */
static int add_newrows(struct bfs_frame *frame, struct txn_call *c)
{
    const struct bfs_create_req *cq = c->req;
    const struct bfs_create_rep *cr = c->rep;
    if (cq->fd && bfs_gfid_eq(&cr->attr.gfid, &c->gfid)) {
        struct bfs_fxattrop_req f = {.fd = cq->fd, .optype = BFS_XATTROP_ADD64,
                                     .xattrs = c->newrows};
        return bfs_wind_fxattrop(frame, FIRST_CHILD(c->xl), newrow_fcbk, c, &f);
    }
    struct bfs_xattrop_req x = {.optype = BFS_XATTROP_ADD64, .xattrs = c->newrows};
    x.loc.gfid = c->gfid;
    return bfs_wind_xattrop(frame, FIRST_CHILD(c->xl), newrow_cbk, c, &x);
}

static void fop_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    struct txn_call *c = cookie;
    if (rc >= 0 && c->newlock) {
        const struct bfs_fop_info *fi = &bfs_fop_info[fop];
        c->rep = calloc(1, fi->rep_size);
        if (c->rep && fi->rep_copy_into(c->rep, rep) < 0) {
            free(c->rep);
            c->rep = NULL;
        }
        if (c->rep && add_newrows(frame, c) == 0)
            return;
        drop_newlock(c); /* answer the create without the lock */
    }
    if (rc >= 0) {
        txn_call_free(c);
        bfs_unwind_any(fop, frame, rc, rep);
        return;
    }
    drop_newlock(c);
    if (!bfs_dict_count(c->rows)) {
        answer_error(frame, c, rc);
        return;
    }
    /* nothing changed: take the mark back, so that only changes leave one */
    struct bfs_dict *neg = bfs_dict_new();
    c->rc = rc;
    if (neg && bfs_dict_foreach(c->rows, negate_row, neg) == 0) {
        struct bfs_xattrop_req x = {.optype = BFS_XATTROP_ADD64, .xattrs = neg};
        x.loc.gfid = c->parent;
        if (bfs_wind_xattrop(frame, FIRST_CHILD(c->xl), undo_cbk, c, &x) == 0) {
            bfs_dict_unref(neg);
            return;
        }
    }
    bfs_dict_unref(neg);
    XL_WARN(c->xl, "cannot undo the pre-op of a failed %s (a dirty mark stays)",
            bfs_fop_name(fop));
    answer_error(frame, c, rc);
}

static void preop_cbk(struct bfs_frame *frame, void *cookie, int rc,
                      const struct bfs_xattrop_rep *rep)
{
    (void)rep;
    struct txn_call *c = cookie;
    if (rc >= 0)
        rc = bfs_wind_any(c->fop, frame, FIRST_CHILD(c->xl), fop_cbk, c, c->req);
    if (rc < 0) /* the pre-op failed (nothing done), or the fop could not go */
        answer_error(frame, c, rc);
}

/* The lock a create asks for on the file it makes (false: none asked). */
static bool newlock_request(struct txn_call *c, struct bfs_frame *frame,
                            const struct bfs_dict *xd)
{
    const char *dom;
    int64_t owner;
    const void *g;
    size_t glen;
    if (c->fop != BFS_FOP_CREATE || bfs_dict_get_str(xd, BFS_TXN_X_NEWLOCK, &dom) < 0 ||
        bfs_dict_get_int(xd, BFS_TXN_X_NEWLOCK_OWNER, &owner) < 0 ||
        bfs_dict_get_bin(xd, BFS_TXN_X_GFID_REQ, &g, &glen) < 0 || glen != sizeof(c->gfid.b))
        return false;
    struct collect nw = {BFS_TXN_X_NEWROW, BFS_TXN_X_NEWROW_LEN, bfs_dict_new()};
    c->domain = strdup(dom);
    if (!nw.out || !c->domain || bfs_dict_foreach(xd, collect_row, &nw) < 0 ||
        !bfs_dict_count(nw.out)) {
        bfs_dict_unref(nw.out);
        return false;
    }
    c->newrows = nw.out;
    memcpy(c->gfid.b, g, glen);
    c->owner.client = frame->stack->client;
    c->owner.id = (uint64_t)owner;
    return bfs__pl_inodelk_grant(c->xl, &c->owner, c->domain, &c->gfid) == 0;
}

/* An entry fop with pre-op rows (pre-op, then the fop) or a create asking
 * for its file's lock. 1 when it has neither (the caller passes it down). */
static int entry_fop(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req)
{
    const struct bfs_loc *ploc;
    struct bfs_dict **xd = bfs_txn_entry_xdata(fop, (void *)req, &ploc);
    struct collect pre = {BFS_TXN_X_PREOP, BFS_TXN_X_PREOP_LEN, bfs_dict_new()};
    if (!pre.out || bfs_dict_foreach(*xd, collect_row, &pre) < 0) {
        bfs_dict_unref(pre.out);
        return -ENOMEM;
    }
    bool asks_lock = fop == BFS_FOP_CREATE && bfs_dict_has(*xd, BFS_TXN_X_NEWLOCK);
    if (!bfs_dict_count(pre.out) && !asks_lock) {
        bfs_dict_unref(pre.out);
        return 1;
    }
    if (bfs_dict_count(pre.out) && bfs_gfid_is_null(&ploc->pargfid)) {
        bfs_dict_unref(pre.out);
        return -EINVAL; /* a pre-op with no parent to put it on: refuse, never skip it */
    }
    const struct bfs_fop_info *fi = &bfs_fop_info[fop];
    struct txn_call *c = calloc(1, sizeof(*c));
    void *copy = calloc(1, fi->req_size);
    if (!c || !copy || fi->req_copy_into(copy, req) < 0) {
        free(copy);
        free(c);
        bfs_dict_unref(pre.out);
        return -ENOMEM;
    }
    c->xl = xl;
    c->fop = fop;
    c->req = copy;
    c->rows = pre.out;
    c->parent = ploc->pargfid;
    struct bfs_dict **cxd = bfs_txn_entry_xdata(fop, copy, &ploc);
    struct keep_arg k = {.src = *cxd, .out = bfs_dict_new()};
    if (!k.out || bfs_dict_foreach(*cxd, keep_other, &k) < 0) {
        bfs_dict_unref(k.out);
        txn_call_free(c);
        return -ENOMEM;
    }
    bfs_dict_unref(*cxd);
    *cxd = k.out;
    c->newlock = asks_lock && newlock_request(c, frame, *xd);
    int rc;
    if (bfs_dict_count(c->rows)) {
        struct bfs_xattrop_req x = {.optype = BFS_XATTROP_ADD64, .xattrs = c->rows};
        x.loc.gfid = c->parent;
        rc = bfs_wind_xattrop(frame, FIRST_CHILD(xl), preop_cbk, c, &x);
    } else {
        rc = bfs_wind_any(fop, frame, FIRST_CHILD(xl), fop_cbk, c, c->req);
    }
    if (rc < 0) {
        drop_newlock(c);
        txn_call_free(c);
    }
    return rc;
}

#define PL_ENTRY_FOP(fop, FOP)                                                               \
    int bfs__pl_##fop(struct bfs_frame *frame, struct bfs_xl *xl,                           \
                      const struct bfs_##fop##_req *req)                                     \
    {                                                                                        \
        int rc_ = req->xdata ? entry_fop(frame, xl, FOP, req) : 1;                           \
        return rc_ == 1 ? bfs_pass_##fop(frame, FIRST_CHILD(xl), req) : rc_;                 \
    }

PL_ENTRY_FOP(create, BFS_FOP_CREATE)
PL_ENTRY_FOP(mknod, BFS_FOP_MKNOD)
PL_ENTRY_FOP(mkdir, BFS_FOP_MKDIR)
PL_ENTRY_FOP(symlink, BFS_FOP_SYMLINK)
PL_ENTRY_FOP(link, BFS_FOP_LINK)
PL_ENTRY_FOP(unlink, BFS_FOP_UNLINK)
PL_ENTRY_FOP(rmdir, BFS_FOP_RMDIR)
