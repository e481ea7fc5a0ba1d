/*
 * txn-piggy.c — changelog steps of a transaction that ride in another call
 * instead of costing a round trip of their own (txn-wire.h is the wire
 * side, features/locks/locks-txn.c the brick side; the protocol and its
 * failure cases are in docs/design/replicate.md, "Piggybacked changelog
 * steps"):
 *
 *   - post-op + unlock: the post-op xattrop asks the brick to release the
 *     lock right after it; bricks that did so answer BFS_TXN_X_UNLOCKED
 *     and get no unlock call. Used by one-shot transactions and by the
 *     release of shared (eager) locks, when the lock is one lock set on the
 *     object that carries the changelog.
 *   - pre-op in the fop: an entry transaction (one parent) sends its pre-op
 *     rows in the fop's xdata; the brick applies them to the parent before
 *     the change and takes them back if the change fails. Only to children
 *     whose brick acknowledged a piggybacked unlock since it last came up
 *     (cl->piggy), so an older brick is never asked; the first entry
 *     transaction on a fresh connection takes the long way.
 *
 * Nothing here outlives a call; the dicts made are unref'd by the caller.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/fops-util.h"
#include "txn-priv.h"
#include "txn-wire.h"
#include "upcall-mark.h"
#include "rpc/codec.h"

/* Can the lock be released by the post-op's brick? One lock set, on the
 * very object the changelog is kept on. */
static bool unlock_rides(const struct bfs_txn_lock *lk)
{
    return lk->nsets == 1 && lk->nobj == 1 && bfs_gfid_eq(&lk->sets[0].loc.gfid, &lk->obj[0]);
}

/* The xdata asking for the release of lk's lock; NULL when it cannot ride. */
static struct bfs_dict *unlock_xdata(const struct bfs_txn_lock *lk)
{
    if (!unlock_rides(lk))
        return NULL;
    const struct bfs_lkset *s = &lk->sets[0];
    struct bfs_dict *d = bfs_dict_new();
    int rc = d ? 0 : -ENOMEM;
    if (rc == 0 && s->kind == BFS_LKSET_INODE) {
        rc = bfs_dict_set_str(d, BFS_TXN_X_UNLOCK_INODE, s->domain);
    } else if (rc == 0) {
        if (!s->basename)
            rc = -EINVAL; /* a whole-directory lock: not a transaction's */
        else if ((rc = bfs_dict_set_str(d, BFS_TXN_X_UNLOCK_ENTRY, s->domain)) == 0)
            rc = bfs_dict_set_str(d, BFS_TXN_X_UNLOCK_NAME, s->basename);
    }
    if (rc < 0) {
        bfs_dict_unref(d);
        return NULL; /* the plain unlock follows */
    }
    return d;
}

/* Post-ops md-cache is told of (upcall-mark.h): names unique in the process. */
static uint64_t postop_seq;

/* With the cluster's postop_attr hook, the post-op asks every brick for
 * the object's attributes after it (BFS_XDATA_IATT_REQ) and reads the
 * whole row, and md-cache hears it begin; x: the xdata so far (may be
 * NULL), returned with the request added (NULL without memory: then it
 * goes without, and md-cache hears nothing until the replies). */
static struct bfs_dict *postop_begin(struct bfs_txn_lock *lk, struct bfs_dict *x, bool *row)
{
    *row = false;
    lk->postop = 0;
    if (!lk->cl->cl->postop_attr)
        return x;
    struct bfs_dict *d = x ? x : bfs_dict_new();
    if (!d || bfs_dict_set_int(d, BFS_XDATA_IATT_REQ, 1) < 0)
        return d; /* x as it was, or NULL */
    *row = true;
    lk->postop = __atomic_add_fetch(&postop_seq, 1, __ATOMIC_RELAXED);
    bfs_upcall_postop(lk->cl->xl, &lk->obj[0], lk->postop, true, NULL);
    return d;
}

void bfs__txn_wind_postop(struct bfs_txn_lock *lk, struct bfs_op *op, uint32_t mask)
{
    bool row;
    struct bfs_dict *x = postop_begin(lk, unlock_xdata(lk), &row);
    bfs__txn_wind_changelog_x(lk, op, mask, -1, 0, 0, row, x);
    bfs_dict_unref(x);
}

static const struct bfs_dict *reply_xdata(const struct bfs_op_reply *r)
{
    if (!r->valid || !r->rep)
        return NULL;
    if (r->fop == BFS_FOP_XATTROP)
        return ((const struct bfs_xattrop_rep *)r->rep)->xdata;
    if (r->fop == BFS_FOP_FXATTROP)
        return ((const struct bfs_fxattrop_rep *)r->rep)->xdata;
    return NULL;
}

/* What a lookup of the post-op's object (the first) answers now: 0 when
 * every child of the cluster answered the post-op with its attributes and
 * the translator vouches for what they make together. */
static int postop_attr(const struct bfs_txn_lock *lk, const struct bfs_op *op,
                       struct bfs_iatt *out)
{
    struct bfs_cluster *cl = lk->cl;
    struct bfs_iatt attrs[BFS_CLUSTER_MAX];
    struct bfs_dict *rows[BFS_CLUSTER_MAX];
    for (int i = 0; i < cl->n; i++) {
        rows[i] = bfs__txn_row(op, i);
        if (!rows[i] ||
            bfs_dict_get_iatt(reply_xdata(&op->replies[i]), BFS_XDATA_IATT, &attrs[i]) < 0 ||
            !bfs_gfid_eq(&attrs[i].gfid, &lk->obj[0]))
            return -EAGAIN; /* a child missed it, failed it, or said nothing of it */
    }
    return cl->cl->postop_attr(cl->cl_arg, lk->type, attrs, rows, out);
}

void bfs__txn_postop_announce(struct bfs_txn_lock *lk, const struct bfs_op *op)
{
    int n = lk->cl->n;
    for (int o = 0; o < lk->nobj; o++) {
        bool sent = false; /* a failed reply may still have reached the brick */
        for (int i = 0; i < n && !sent; i++)
            sent = op->replies[o * n + i].valid;
        struct bfs_iatt attr;
        if (o == 0 && lk->postop) /* ends what postop_begin began */
            bfs_upcall_postop(lk->cl->xl, &lk->obj[0], lk->postop, false,
                              postop_attr(lk, op, &attr) == 0 ? &attr : NULL);
        else if (sent)
            bfs_upcall_local(lk->cl->xl, &lk->obj[o], true);
    }
    lk->postop = 0;
}

void bfs__txn_postop_unlocked(struct bfs_txn_lock *lk, const struct bfs_op *op)
{
    if (!unlock_rides(lk))
        return;
    struct bfs_lkset *s = &lk->sets[0];
    uint32_t done = 0;
    for (int i = 0; i < lk->cl->n; i++) {
        int64_t v = 0;
        const struct bfs_dict *x = reply_xdata(&op->replies[i]);
        if (bfs_mask_has(s->locked, i) && x && bfs_dict_get_int(x, BFS_TXN_X_UNLOCKED, &v) == 0 &&
            v == 1)
            done |= BFS_BIT(i);
    }
    s->locked &= ~done; /* the unlock stage releases the others */
    if (done) /* a reply of a live connection: its going down clears the bit after */
        __atomic_or_fetch(&lk->cl->piggy, done, __ATOMIC_ACQ_REL);
}

bool bfs__txn_piggy_preop(struct bfs_txn *t, uint32_t locked)
{
    struct bfs_txn_lock *lk = t->lk;
    struct bfs_cluster *cl = t->cl;
    uint32_t piggy = __atomic_load_n(&cl->piggy, __ATOMIC_ACQUIRE);
    if (!cl->preop_in_fop || t->type != BFS_TXN_ENTRY || lk->shared || lk->nobj != 1 ||
        lk->nsets != 1 ||
        (locked & ~piggy) != 0)
        return false;
    t->piggy = true;
    pthread_mutex_lock(&lk->m);
    lk->set = locked;
    lk->dirtied = 0; /* known after the fop: where it succeeded */
    pthread_mutex_unlock(&lk->m);
    return true;
}

struct add_arg {
    struct bfs_dict *out;
    const char *prefix; /* each key goes in as prefix + key */
    size_t len;
};

static int add_row(const char *key, enum bfs_val_type type, const void *val, size_t len,
                   void *arg)
{
    struct add_arg *a = arg;
    char k[64 + 256];
    if (type != BFS_VAL_BIN || strlen(key) >= 256 || a->len >= 64)
        return -EINVAL;
    memcpy(k, a->prefix, a->len);
    strcpy(k + a->len, key);
    return bfs_dict_set_bin(a->out, k, val, len);
}

struct bfs_dict *bfs_txn_fop_xdata(struct bfs_txn *t, int i, const struct bfs_dict *xdata,
                                   int *err)
{
    *err = 0;
    if (!t->piggy)
        return NULL;
    struct bfs_cluster *cl = t->cl;
    /* what the separate pre-op would have added on child i: dirty + 1, and
     * blame of the children left out of the lock */
    struct bfs_dict *rows = cl->cl->build(cl->cl_arg, t->type, i, 1, t->absent, 1, false);
    struct add_arg a = {.out = xdata ? bfs_dict_copy(xdata) : bfs_dict_new(),
                        .prefix = BFS_TXN_X_PREOP, .len = BFS_TXN_X_PREOP_LEN};
    if (!rows || !a.out || bfs_dict_foreach(rows, add_row, &a) < 0) {
        bfs_dict_unref(rows);
        bfs_dict_unref(a.out);
        *err = -ENOMEM;
        return NULL;
    }
    bfs_dict_unref(rows);
    return a.out;
}

bool bfs_txn_wind_entry(struct bfs_txn *t, int i, int fop, const void *req,
                        uint64_t newlock_owner)
{
    const struct bfs_fop_info *fi = &bfs_fop_info[fop];
    const struct bfs_loc *ploc;
    bool newlock = fop == BFS_FOP_CREATE && newlock_owner;
    if (!t->piggy && !newlock)
        return false;
    union {
        struct bfs_create_req c;
        struct bfs_mknod_req mn;
        struct bfs_mkdir_req md;
        struct bfs_symlink_req s;
        struct bfs_link_req l;
        struct bfs_unlink_req u;
        struct bfs_rmdir_req r;
    } copy;
    struct bfs_dict **xd = NULL;
    int err = -EINVAL;
    struct bfs_dict *x = NULL;
    if (fi->req_size <= sizeof(copy)) {
        memcpy(&copy, req, fi->req_size); /* shallow: lives for the wind only */
        xd = bfs_txn_entry_xdata(fop, &copy, &ploc);
    }
    if (xd && t->piggy) {
        x = bfs_txn_fop_xdata(t, i, *xd, &err);
    } else if (xd) { /* a create under a window already pre-op'd: the lock request only */
        x = *xd ? bfs_dict_copy(*xd) : bfs_dict_new();
        err = x ? 0 : -ENOMEM;
    }
    if (x && newlock &&
        bfs_txn_newlock_xdata(t, i, newlock_owner, x) < 0) {
        bfs_dict_unref(x); /* all or nothing: the create goes nowhere without it */
        x = NULL;
        err = -ENOMEM;
    }
    if (!x) { /* never the change without its pre-op: count child i as failed */
        struct bfs_op_reply *rp = &t->op.replies[i];
        rp->valid = true;
        rp->rc = err < 0 ? err : -EINVAL;
        rp->fop = fop;
        bfs_op_expect(&t->op, -1);
        return true;
    }
    *xd = x;
    bfs_op_wind(&t->op, i, fop, t->op.xl->children[i], &copy);
    bfs_dict_unref(x);
    return true;
}

/* ---- lock on create ---- */

int bfs_txn_newlock_xdata(struct bfs_txn *t, int i, uint64_t owner, struct bfs_dict *out)
{
    struct bfs_cluster *cl = t->cl;
    /* what a write's acquisition would add on child i: dirty + 1, blame of
     * the children the file's create left out (those the lock missed, and
     * under a window joined later, those no longer in its set) */
    uint32_t left = t->absent | (bfs__txn_all(cl) & ~t->run);
    struct bfs_dict *rows = cl->cl->build(cl->cl_arg, BFS_TXN_DATA, i, 1, left, 1, false);
    int rc = rows ? 0 : -ENOMEM;
    if (rc == 0)
        rc = bfs_dict_set_str(out, BFS_TXN_X_NEWLOCK, cl->domain[BFS_TXN_DATA]);
    if (rc == 0)
        rc = bfs_dict_set_int(out, BFS_TXN_X_NEWLOCK_OWNER, (int64_t)owner);
    struct add_arg a = {.out = out, .prefix = BFS_TXN_X_NEWROW, .len = BFS_TXN_X_NEWROW_LEN};
    if (rc == 0)
        rc = bfs_dict_foreach(rows, add_row, &a);
    bfs_dict_unref(rows);
    return rc;
}

uint64_t bfs_txn_newlock_owner(struct bfs_cluster *cl, const void *salt)
{
    /* the brick grants it only if nobody holds that GFID's lock, and
     * bfs_txn_lock_install gives it back if our lock object is busy */
    if (!__atomic_load_n(&cl->eager, __ATOMIC_RELAXED) ||
        !__atomic_load_n(&cl->delay_ms, __ATOMIC_RELAXED))
        return 0;
    return bfs_txn_owner_new(salt);
}

uint32_t bfs_txn_newlock_acked(const struct bfs_txn *t)
{
    uint32_t m = 0;
    for (int i = 0; i < t->cl->n; i++) {
        const struct bfs_op_reply *r = &t->op.replies[i];
        int64_t v = 0;
        if (r->valid && r->rc >= 0 && r->rep && r->fop == BFS_FOP_CREATE &&
            bfs_dict_get_int(((const struct bfs_create_rep *)r->rep)->xdata, BFS_TXN_X_NEWLOCKED,
                             &v) == 0 && v == 1)
            m |= BFS_BIT(i);
    }
    return m;
}

static void free_detached(void *arg)
{
    struct bfs_txn_lock *lk = arg;
    bfs_txn_lock_fini(lk);
    free(lk);
}

/* lk->m held, lk FREE: takes the holder identity of owner on held. */
static int install_locked(struct bfs_txn_lock *lk, const struct bfs_txn_target *tg,
                          uint64_t owner, uint32_t held)
{
    struct bfs_txn tmp;
    memset(&tmp, 0, sizeof(tmp));
    tmp.type = BFS_TXN_DATA;
    tmp.target = *tg;
    if (bfs__txn_holder_setup(lk, &tmp) < 0)
        return -ENOMEM;
    lk->stack->lk_owner = owner;
    __atomic_store_n(&lk->owner, owner, __ATOMIC_RELAXED);
    lk->sets[0].locked = held;
    lk->set = lk->dirtied = held;
    lk->state = BFS_TXL_HELD;
    return 0;
}

void bfs_txn_lock_install(struct bfs_cluster *cl, struct bfs_txn_lock *lk,
                          const struct bfs_txn_target *tg, uint64_t owner, uint32_t held,
                          uint32_t ok)
{
    bool release = false;
    if (lk)
        pthread_mutex_lock(&lk->m);
    if (lk && lk->state == BFS_TXL_FREE && install_locked(lk, tg, owner, held) == 0) {
        uint64_t delay = __atomic_load_n(&cl->delay_ms, __ATOMIC_RELAXED);
        bool eager = __atomic_load_n(&cl->eager, __ATOMIC_RELAXED);
        if (held != ok || !eager || !delay || !bfs__txn_timer_arm(lk, delay)) {
            lk->state = BFS_TXL_RELEASING;
            release = true;
        }
        pthread_mutex_unlock(&lk->m);
        if (release)
            bfs__txn_start_release(lk);
        return;
    }
    if (lk)
        pthread_mutex_unlock(&lk->m);
    /* cannot be the inode's lock: release what the bricks granted through a
     * lock object of its own, freed once it is FREE again */
    struct bfs_txn_lock *d = calloc(1, sizeof(*d));
    struct bfs_txn_after *a = calloc(1, sizeof(*a));
    if (d)
        bfs_txn_lock_init(d, cl, BFS_TXN_DATA, true);
    if (!d || !a || install_locked(d, tg, owner, held) < 0) {
        XL_ERR(cl->xl, "no memory to release the lock a create took: it stays held until "
                       "the connection closes");
        if (d)
            pthread_mutex_destroy(&d->m);
        free(d);
        free(a);
        return;
    }
    a->fn = free_detached;
    a->arg = d;
    d->after = a;
    d->state = BFS_TXL_RELEASING;
    bfs__txn_start_release(d);
}
