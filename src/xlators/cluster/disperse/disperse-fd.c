/*
 * disperse-fd.c — fops that go to every child without a transaction: open,
 * opendir, flush, fsync, fsyncdir, statfs, POSIX locks (lk), and the
 * cluster-internal fops a translator above may send (inodelk, entrylk,
 * xattrop and their fd forms); lease and copy_file_range are refused.
 *
 * One "fan" op winds the fop to every up child (where the fd is open, for
 * fd fops) and combines by kind:
 *   FAN_OPEN    open/opendir: success if the quorum of children opened it
 *               (a file needs k fragments); the fd remembers where. A file
 *               is opened O_RDWR without O_APPEND on the children (RMW reads
 *               through write-only fds; we place appends), O_TRUNC goes on
 *               as an ftruncate transaction;
 *   FAN_INTERNAL an fd of our own (truncate by path): a continuation runs;
 *   FAN_ANY     success if the quorum succeeded (flush, fsync);
 *   FAN_ALL     every reachable child must succeed (xattrop);
 *   FAN_STATFS  the child with the least space, scaled by k;
 *   FAN_LK      every reachable child; a lock granted on some children but
 *               refused on another is released again where granted.
 * flush answers once the file's eager lock is released (post-op and unlock)
 * and the children's flushes are done; both go out at once (a brick's
 * flush drops the caller's POSIX locks, unrelated to the cluster lock, whose
 * owner is the lock object's own), so close() costs one round trip more
 * than the write, not two.
 *
 * Lifetime: struct ec_fan from the fop call to its answer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "disperse.h"
#include "xlators/lib/upcall-mark.h"

enum { FAN_OPEN = 1, FAN_INTERNAL, FAN_ANY, FAN_ALL, FAN_STATFS, FAN_LK };
enum { F_WIND = 1, F_DONE, F_UNDONE };

struct ec_fan {
    struct bfs_op op; /* first */
    struct ec_priv *p;
    int fop;
    int kind;
    void *req;               /* our copy */
    struct bfs_fd *fd;
    bool new_fd;
    bool trunc;
    uint32_t user_flags;     /* open: the caller's flags */
    uint32_t asked;
    int rc;
    void (*then)(void *arg, int rc); /* FAN_INTERNAL */
    void *then_arg;
    /* flush: answered once both the children's flushes and the release of
     * the file's eager lock are done (atomic count of the two; 0: only the
     * flushes); the flushes' result waits here for the release */
    int join;
    int join_rc;
};

static void fan_destroy(struct bfs_op *op)
{
    struct ec_fan *f = (struct ec_fan *)op;
    bfs_fop_info[f->fop].req_clear_dup(f->req);
    free(f->req);
    free(f);
}

static int fan_answer(struct ec_fan *f, int rc, int child)
{
    const void *rep = rc >= 0 && child >= 0 ? f->op.replies[child].rep : NULL;
    bfs_unwind_any(f->fop, f->op.frame, rc, rep);
    return BFS_OP_DONE;
}

static uint32_t ok_mask(const struct ec_fan *f)
{
    uint32_t ok = 0;
    for (int i = 0; i < f->p->n; i++)
        if (bfs_mask_has(f->asked, i) && f->op.replies[i].valid && f->op.replies[i].rc >= 0)
            ok |= BFS_BIT(i);
    return ok;
}

static int fan_error(const struct ec_fan *f)
{
    int err = 0;
    for (int i = 0; i < f->p->n; i++) {
        const struct bfs_op_reply *r = &f->op.replies[i];
        if (!bfs_mask_has(f->asked, i) || !r->valid || r->rc >= 0)
            continue;
        if (!err || err == -ENOTCONN)
            err = r->rc;
    }
    return err ? err : -ENOTCONN;
}

static uint32_t refused(const struct ec_fan *f)
{
    uint32_t m = 0;
    for (int i = 0; i < f->p->n; i++) {
        const struct bfs_op_reply *r = &f->op.replies[i];
        if (bfs_mask_has(f->asked, i) && r->valid && r->rc < 0 && r->rc != -ENOTCONN)
            m |= BFS_BIT(i);
    }
    return m;
}

static bool enough(const struct ec_fan *f, uint32_t ok)
{
    bool dir = f->fop == BFS_FOP_OPENDIR || f->fop == BFS_FOP_FSYNCDIR;
    return ok && (dir || bfs_mask_count(ok) >= f->p->k);
}

static int statfs_answer(struct ec_fan *f, uint32_t ok)
{
    int best = -1;
    for (int i = 0; i < f->p->n; i++) {
        if (!bfs_mask_has(ok, i) || !f->op.replies[i].rep)
            continue;
        const struct bfs_statfs_rep *r = f->op.replies[i].rep;
        const struct bfs_statfs_rep *b = best >= 0 ? f->op.replies[best].rep : NULL;
        if (!b || r->buf.bavail * r->buf.frsize < b->buf.bavail * b->buf.frsize)
            best = i;
    }
    if (best < 0)
        return fan_answer(f, fan_error(f), -1);
    struct bfs_statfs_rep rep = *(const struct bfs_statfs_rep *)f->op.replies[best].rep;
    rep.buf.blocks *= (uint64_t)f->p->k; /* k bricks' worth of space holds data */
    rep.buf.bfree *= (uint64_t)f->p->k;
    rep.buf.bavail *= (uint64_t)f->p->k;
    rep.xdata = NULL;
    bfs_unwind_statfs(f->op.frame, 0, &rep);
    return BFS_OP_DONE;
}

static bool lock_is_release(const struct ec_fan *f)
{
    switch (f->fop) {
    case BFS_FOP_LK: {
        const struct bfs_lk_req *q = f->req;
        return q->lock.type == F_UNLCK || (q->cmd & ~BFS_LK_FLOCK) == BFS_LK_GETLK;
    }
    case BFS_FOP_INODELK:
        return ((const struct bfs_inodelk_req *)f->req)->lock.type == F_UNLCK;
    case BFS_FOP_FINODELK:
        return ((const struct bfs_finodelk_req *)f->req)->lock.type == F_UNLCK;
    case BFS_FOP_ENTRYLK:
        return ((const struct bfs_entrylk_req *)f->req)->cmd == BFS_ENTRYLK_UNLOCK;
    case BFS_FOP_FENTRYLK:
        return ((const struct bfs_fentrylk_req *)f->req)->cmd == BFS_ENTRYLK_UNLOCK;
    }
    return true;
}

/* A lock granted on some children only: released there, the error answered. */
static int lock_undo(struct ec_fan *f, uint32_t ok)
{
    union {
        struct bfs_lk_req lk;
        struct bfs_inodelk_req inodelk;
        struct bfs_finodelk_req finodelk;
        struct bfs_entrylk_req entrylk;
        struct bfs_fentrylk_req fentrylk;
    } u;
    switch (f->fop) {
    case BFS_FOP_LK:
        u.lk = *(const struct bfs_lk_req *)f->req;
        u.lk.cmd = BFS_LK_SETLK | (u.lk.cmd & BFS_LK_FLOCK);
        u.lk.lock.type = F_UNLCK;
        break;
    case BFS_FOP_INODELK:
        u.inodelk = *(const struct bfs_inodelk_req *)f->req;
        u.inodelk.cmd = BFS_LK_SETLK;
        u.inodelk.lock.type = F_UNLCK;
        break;
    case BFS_FOP_FINODELK:
        u.finodelk = *(const struct bfs_finodelk_req *)f->req;
        u.finodelk.cmd = BFS_LK_SETLK;
        u.finodelk.lock.type = F_UNLCK;
        break;
    case BFS_FOP_ENTRYLK:
        u.entrylk = *(const struct bfs_entrylk_req *)f->req;
        u.entrylk.cmd = BFS_ENTRYLK_UNLOCK;
        break;
    case BFS_FOP_FENTRYLK:
        u.fentrylk = *(const struct bfs_fentrylk_req *)f->req;
        u.fentrylk.cmd = BFS_ENTRYLK_UNLOCK;
        break;
    }
    f->rc = fan_error(f);
    bfs_op_reset_replies(&f->op);
    bfs_op_expect(&f->op, bfs_mask_count(ok));
    f->op.state = F_UNDONE;
    for (int i = 0; i < f->p->n; i++)
        if (bfs_mask_has(ok, i))
            bfs_op_wind(&f->op, i, f->fop, f->p->xl->children[i], &u);
    return BFS_OP_WAIT;
}

static void then_task(void *arg)
{
    struct ec_fan *f = arg;
    f->then(f->then_arg, f->rc);
    bfs_op_unref(&f->op);
}

static int internal_done(struct ec_fan *f, uint32_t ok)
{
    f->rc = bfs_mask_count(ok) >= f->p->k ? 0 : fan_error(f);
    if (f->rc == 0)
        ec_fd_set_opened(f->p->xl, f->fd, ok, &((const struct bfs_open_req *)f->req)->loc.gfid,
                         O_RDWR);
    bfs_op_ref(&f->op);
    if (!f->p->cl.loop || bfs_loop_post(f->p->cl.loop, then_task, f) < 0)
        then_task(f);
    return BFS_OP_DONE;
}

static int first_ok(const struct ec_fan *f, uint32_t ok)
{
    (void)f;
    return bfs_mask_first(ok);
}

static int fan_done(struct ec_fan *f)
{
    uint32_t ok = ok_mask(f);
    switch (f->kind) {
    case FAN_OPEN: {
        if (!enough(f, ok)) {
            XL_WARN(f->p->xl, "open succeeded on %d child(ren) of %d asked: %s",
                    bfs_mask_count(ok), bfs_mask_count(f->asked), ok ? "EIO" : "failed");
            return fan_answer(f, ok ? -EIO : fan_error(f), -1);
        }
        const struct bfs_gfid *g = &((const struct bfs_opendir_req *)f->req)->loc.gfid;
        if (f->fop == BFS_FOP_OPEN) {
            const struct bfs_open_rep *rep = f->op.replies[first_ok(f, ok)].rep;
            g = rep && !bfs_gfid_is_null(&rep->attr.gfid)
                    ? &rep->attr.gfid
                    : &((const struct bfs_open_req *)f->req)->loc.gfid;
        }
        ec_fd_set_opened(f->p->xl, f->fd, ok, g, f->user_flags);
        if (f->trunc) {
            int rc = ec_open_trunc(f->op.frame, f->p->xl, f->fd,
                                   f->op.replies[first_ok(f, ok)].rep);
            return rc == 0 ? BFS_OP_DONE : fan_answer(f, rc, -1);
        }
        if (f->fop != BFS_FOP_OPEN)
            return fan_answer(f, 0, first_ok(f, ok));
        /* a fragment's attributes: not the file's for md-cache (lib/upcall-mark.h) */
        bfs_unwind_open_unmarked(f->op.frame, 0, f->op.replies[first_ok(f, ok)].rep);
        return BFS_OP_DONE;
    }
    case FAN_INTERNAL:
        return internal_done(f, ok);
    case FAN_ANY:
        if (f->join) { /* a flush: the lock's release may still be going */
            f->join_rc = enough(f, ok) ? 0 : ok ? -EIO : fan_error(f);
            if (__atomic_sub_fetch(&f->join, 1, __ATOMIC_ACQ_REL) > 0)
                return BFS_OP_DONE; /* flush_released answers (it holds a reference) */
            return fan_answer(f, f->join_rc, -1);
        }
        return enough(f, ok) ? fan_answer(f, 0, first_ok(f, ok))
                             : fan_answer(f, ok ? -EIO : fan_error(f), -1);
    case FAN_ALL:
        return ok && !refused(f) ? fan_answer(f, 0, first_ok(f, ok))
                                 : fan_answer(f, fan_error(f), -1);
    case FAN_STATFS:
        return statfs_answer(f, ok);
    case FAN_LK:
        if (ok && (!refused(f) || lock_is_release(f)))
            return fan_answer(f, 0, first_ok(f, ok));
        if (!ok)
            return fan_answer(f, fan_error(f), -1);
        return lock_undo(f, ok);
    }
    return fan_answer(f, -EINVAL, -1);
}

static int fan_step(struct bfs_op *op)
{
    struct ec_fan *f = (struct ec_fan *)op;
    struct ec_priv *p = f->p;
    switch (op->state) {
    case F_WIND:
        f->asked = ec_up(p);
        if (f->fd && !f->new_fd)
            f->asked &= ec_fd_opened(p->xl, f->fd);
        if (!f->asked) {
            if (f->kind == FAN_INTERNAL)
                return internal_done(f, 0);
            return fan_answer(f, -ENOTCONN, -1);
        }
        bfs_op_expect(op, bfs_mask_count(f->asked));
        op->state = F_DONE;
        for (int i = 0; i < p->n; i++)
            if (bfs_mask_has(f->asked, i))
                bfs_op_wind(op, i, f->fop, p->xl->children[i], f->req);
        return BFS_OP_WAIT;
    case F_DONE:
        return fan_done(f);
    case F_UNDONE:
        return fan_answer(f, f->rc, -1);
    }
    return BFS_OP_DONE;
}

static struct ec_fan *fan_new(struct bfs_frame *frame, struct bfs_xl *xl, int fop, int kind,
                              const void *req, struct bfs_fd *fd)
{
    struct ec_priv *p = ec_priv(xl);
    const struct bfs_fop_info *fi = &bfs_fop_info[fop];
    struct ec_fan *f = calloc(1, sizeof(*f));
    void *copy = calloc(1, fi->req_size);
    if (!f || !copy || fi->req_copy_into(copy, req) < 0) {
        free(copy);
        free(f);
        return NULL;
    }
    if (bfs_op_init(&f->op, frame, xl, p->n, fan_step, fan_destroy) < 0) {
        fi->req_clear_dup(copy);
        free(copy);
        free(f);
        return NULL;
    }
    f->p = p;
    f->fop = fop;
    f->kind = kind;
    f->req = copy;
    f->fd = fd;
    f->op.state = F_WIND;
    return f;
}

static int fan(struct bfs_frame *frame, struct bfs_xl *xl, int fop, int kind, const void *req,
               struct bfs_fd *fd)
{
    struct ec_fan *f = fan_new(frame, xl, fop, kind, req, fd);
    if (!f)
        return -ENOMEM;
    bfs_op_run(&f->op);
    return 0;
}

int ec_open(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_open_req *req)
{
    struct ec_fan *f = fan_new(frame, xl, BFS_FOP_OPEN, FAN_OPEN, req, req->fd);
    if (!f)
        return -ENOMEM;
    struct bfs_open_req *q = f->req;
    f->new_fd = true;
    f->user_flags = q->flags;
    if ((q->flags & O_TRUNC) && (q->flags & O_ACCMODE) != O_RDONLY)
        f->trunc = true; /* a change of data: a transaction after the open */
    q->flags &= ~(uint32_t)(O_TRUNC | O_APPEND);
    if ((q->flags & O_ACCMODE) == O_WRONLY)
        q->flags = (q->flags & ~(uint32_t)O_ACCMODE) | O_RDWR; /* RMW reads through it */
    bfs_op_run(&f->op);
    return 0;
}

int ec_open_internal(struct bfs_frame *frame, struct bfs_xl *xl, struct bfs_fd *fd,
                     const struct bfs_gfid *g, void (*then)(void *arg, int rc), void *arg)
{
    struct bfs_open_req req = {.fd = fd, .flags = O_RDWR};
    req.loc.gfid = *g;
    struct ec_fan *f = fan_new(frame, xl, BFS_FOP_OPEN, FAN_INTERNAL, &req, fd);
    if (!f)
        return -ENOMEM;
    f->new_fd = true;
    f->then = then;
    f->then_arg = arg;
    bfs_op_run(&f->op);
    return 0;
}

int ec_opendir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_opendir_req *req)
{
    struct ec_fan *f = fan_new(frame, xl, BFS_FOP_OPENDIR, FAN_OPEN, req, req->fd);
    if (!f)
        return -ENOMEM;
    f->new_fd = true;
    bfs_op_run(&f->op);
    return 0;
}

/* The release of the file's eager lock has started: answer if the
 * flushes are done. */
static void flush_released(void *arg)
{
    struct ec_fan *f = arg;
    if (__atomic_sub_fetch(&f->join, 1, __ATOMIC_ACQ_REL) == 0)
        (void)fan_answer(f, f->join_rc, -1);
    bfs_op_unref(&f->op);
}

int ec_flush(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_flush_req *req)
{
    struct ec_fan *f = fan_new(frame, xl, BFS_FOP_FLUSH, FAN_ANY, req, req->fd);
    if (!f)
        return -ENOMEM;
    struct bfs_inode *inode = ec_inode_of_fd(xl, req->fd);
    struct ec_inode *c = ec_ictx_peek(xl, inode);
    /* set before asking: the release may be done (posted) at once */
    f->join = 2;
    bfs_op_ref(&f->op);
    int later = c ? bfs_txn_lock_flush_started(&c->dlock, flush_released, f) : 0;
    if (inode)
        bfs_inode_unref(inode);
    if (later != 1) { /* FREE already (or no memory to wait: as before, go on) */
        f->join = 0;
        bfs_op_unref(&f->op);
    }
    bfs_op_run(&f->op);
    return 0;
}

int ec_fsync(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_fsync_req *req)
{
    return fan(frame, xl, BFS_FOP_FSYNC, FAN_ANY, req, req->fd);
}

int ec_fsyncdir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_fsyncdir_req *req)
{
    return fan(frame, xl, BFS_FOP_FSYNCDIR, FAN_ANY, req, req->fd);
}

int ec_statfs(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_statfs_req *req)
{
    return fan(frame, xl, BFS_FOP_STATFS, FAN_STATFS, req, NULL);
}

int ec_lk(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_lk_req *req)
{
    return fan(frame, xl, BFS_FOP_LK, FAN_LK, req, req->fd);
}

int ec_inodelk(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_inodelk_req *req)
{
    return fan(frame, xl, BFS_FOP_INODELK, FAN_LK, req, NULL);
}

int ec_finodelk(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_finodelk_req *req)
{
    return fan(frame, xl, BFS_FOP_FINODELK, FAN_LK, req, req->fd);
}

int ec_entrylk(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_entrylk_req *req)
{
    return fan(frame, xl, BFS_FOP_ENTRYLK, FAN_LK, req, NULL);
}

int ec_fentrylk(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_fentrylk_req *req)
{
    return fan(frame, xl, BFS_FOP_FENTRYLK, FAN_LK, req, req->fd);
}

int ec_xattrop(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_xattrop_req *req)
{
    return fan(frame, xl, BFS_FOP_XATTROP, FAN_ALL, req, NULL);
}

int ec_fxattrop(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_fxattrop_req *req)
{
    return fan(frame, xl, BFS_FOP_FXATTROP, FAN_ALL, req, req->fd);
}

/* Leases over several children need a protocol of their own: not offered. */
int ec_lease(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_lease_req *req)
{
    (void)frame;
    (void)xl;
    (void)req;
    return -EOPNOTSUPP;
}

/* Each child would copy its own fragments at offsets that are not the
 * file's: refused, the kernel falls back to read + write. */
int ec_copy_file_range(struct bfs_frame *frame, struct bfs_xl *xl,
                       const struct bfs_copy_file_range_req *req)
{
    (void)frame;
    (void)xl;
    (void)req;
    return -EOPNOTSUPP;
}
