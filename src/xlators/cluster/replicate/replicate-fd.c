/*
 * replicate-fd.c — fops that go to every copy without a transaction: open,
 * opendir, flush, fsync, fsyncdir, statfs, POSIX locks (lk), and the
 * cluster-internal fops a translator above may send (inodelk, entrylk,
 * xattrop and their fd forms).
 *
 * One generic "fan" op winds the fop to every up child (where the fd is
 * open, for fd fops) and combines by kind:
 *   FAN_OPEN    success if any child opened it; the fd remembers where
 *               (open with O_TRUNC goes on as an ftruncate transaction);
 *   FAN_ANY     success if any child succeeded (flush, fsync);
 *   FAN_ALL     success only if every child that is reachable succeeded
 *               (xattrop: callers count on all copies);
 *   FAN_STATFS  the answer with the least space available;
 *   FAN_LK      locks (lk, inodelk, entrylk and fd forms): likewise, and a
 *               lock granted on some copies but refused on others is
 *               released again on those that granted it (second stage).
 *               A blocking request is never sent to every copy at once:
 *               two lockers could each win a different copy first and
 *               wait for each other for ever. It is tried non-blocking on
 *               every copy in parallel (uncontended: one round trip); if
 *               a copy is held elsewhere, what was granted is released
 *               and the blocking request goes to one copy at a time, in
 *               child order (lib/lk.c does the same for our own locks);
 *   FAN_REOPEN  "fix-open": an open fd opened on the children it missed;
 *               answers nobody, runs a continuation (afr_fix_open).
 * flush first waits for the release of the file's eager lock to start
 * (not for its post-op: afr_flush says why that is safe).
 *
 * Lazy open (cluster.lazy-open): an O_RDONLY open whose reading copy is
 * known good (replicate-prefetch.c) goes to that copy only; the fd is then
 * open there alone, as if the others had been down at open time, and is
 * opened on them ("fix-open") when it needs them: a read that must fail
 * over (replicate-read.c), a lock, xattrop or fsync through it (here), a
 * change through it (replicate-write.c). Saves two opens and two releases
 * per small-file read on replica 3 (performance-notes.md, note 28). A lazy
 * open that its copy fails with a fault (the connection lost before we
 * heard it go down) is sent again to the other copies, as a whole open;
 * its close once that copy is down has nothing to flush (flush_nowhere).
 *
 * Lifetime: struct afr_fan lives from the fop call to its answer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "replicate.h"
#include "xlators/lib/upcall-mark.h"

enum { FAN_OPEN = 1, FAN_ANY, FAN_ALL, FAN_STATFS, FAN_LK, FAN_REOPEN };
enum { F_WIND = 1, F_DONE, F_UNDONE, F_NB_DONE, F_NB_UNDONE, F_SERIAL, F_FIX, F_FIXED };

struct afr_fan {
    struct bfs_op op; /* first */
    struct afr_priv *p;
    int fop;
    int kind;
    void *req;               /* our copy */
    struct bfs_fd *fd;       /* fd fops: the fd (in req); open/opendir: the new fd */
    bool new_fd;             /* open, opendir: the fd is being opened */
    bool trunc;              /* open with O_TRUNC (sent without it) */
    uint32_t asked;
    int rc;
    int chosen;
    uint32_t todo;           /* FAN_LK, serial: children still to lock */
    bfs_task_fn then;        /* FAN_REOPEN: continuation */
    void *then_arg;
    uint32_t prefetch_ok;    /* open: copies known good when it was sent */
    bool lazy;               /* open: sent to the reading copy only (cluster.lazy-open) */
    uint32_t skip;           /* open: children not to ask again (a lazy open's copy faulted) */
};

static void fan_destroy(struct bfs_op *op)
{
    struct afr_fan *f = (struct afr_fan *)op;
    bfs_fop_info[f->fop].req_clear_dup(f->req);
    free(f->req);
    free(f);
}

static int fan_answer(struct afr_fan *f, int rc, int child)
{
    const void *rep = rc >= 0 && child >= 0 ? f->op.replies[child].rep : NULL;
    bfs_unwind_any(f->fop, f->op.frame, rc, rep);
    return BFS_OP_DONE;
}

/* First child of mask that succeeded, a data copy if there is one. */
static int first_ok(const struct afr_fan *f, uint32_t mask)
{
    int any = -1;
    for (int i = 0; i < f->p->n; i++) {
        const struct bfs_op_reply *r = &f->op.replies[i];
        if (!bfs_mask_has(mask, i) || !r->valid || r->rc < 0)
            continue;
        if (i != f->p->arbiter)
            return i;
        any = i;
    }
    return any;
}

/* The error to report: the first that is not "down", else ENOTCONN. */
static int fan_error(const struct afr_fan *f)
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

static uint32_t ok_mask(const struct afr_fan *f)
{
    uint32_t ok = 0;
    for (int i = 0; i < f->p->n; i++)
        if (bfs_mask_has(f->asked, i) && f->op.replies[i].valid && f->op.replies[i].rc >= 0)
            ok |= BFS_BIT(i);
    return ok;
}

static int statfs_pick(const struct afr_fan *f, uint32_t ok)
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
    return best;
}

/* Is this lock request an unlock, or a query (nothing to roll back)? */
static bool lock_is_release(const struct afr_fan *f)
{
    switch (f->fop) {
    case BFS_FOP_LK: {
        const struct bfs_lk_req *q = f->req;
        return q->lock.type == F_UNLCK || (q->cmd & ~BFS_LK_FLOCK) == BFS_LK_GETLK;
    }
    case BFS_FOP_INODELK: {
        const struct bfs_inodelk_req *q = f->req;
        return q->lock.type == F_UNLCK || q->cmd == BFS_LK_GETLK;
    }
    case BFS_FOP_FINODELK: {
        const struct bfs_finodelk_req *q = f->req;
        return q->lock.type == F_UNLCK || q->cmd == BFS_LK_GETLK;
    }
    case BFS_FOP_ENTRYLK:
        return ((const struct bfs_entrylk_req *)f->req)->cmd == BFS_ENTRYLK_UNLOCK;
    case BFS_FOP_FENTRYLK:
        return ((const struct bfs_fentrylk_req *)f->req)->cmd == BFS_ENTRYLK_UNLOCK;
    }
    return true;
}

/* The request that releases what f's request took (in a union big enough
 * for any of them). */
union lock_req {
    struct bfs_lk_req lk;
    struct bfs_inodelk_req inodelk;
    struct bfs_finodelk_req finodelk;
    struct bfs_entrylk_req entrylk;
    struct bfs_fentrylk_req fentrylk;
};

static void release_req(const struct afr_fan *f, union lock_req *u)
{
    switch (f->fop) {
    case BFS_FOP_LK:
        u->lk = *(const struct bfs_lk_req *)f->req;
        u->lk.cmd = BFS_LK_SETLK | (u->lk.cmd & BFS_LK_FLOCK);
        u->lk.lock.type = F_UNLCK;
        break;
    case BFS_FOP_INODELK:
        u->inodelk = *(const struct bfs_inodelk_req *)f->req;
        u->inodelk.cmd = BFS_LK_SETLK;
        u->inodelk.lock.type = F_UNLCK;
        break;
    case BFS_FOP_FINODELK:
        u->finodelk = *(const struct bfs_finodelk_req *)f->req;
        u->finodelk.cmd = BFS_LK_SETLK;
        u->finodelk.lock.type = F_UNLCK;
        break;
    case BFS_FOP_ENTRYLK:
        u->entrylk = *(const struct bfs_entrylk_req *)f->req;
        u->entrylk.cmd = BFS_ENTRYLK_UNLOCK;
        break;
    case BFS_FOP_FENTRYLK:
        u->fentrylk = *(const struct bfs_fentrylk_req *)f->req;
        u->fentrylk.cmd = BFS_ENTRYLK_UNLOCK;
        break;
    }
}

static int fan_done(struct afr_fan *f);
static uint32_t refused(const struct afr_fan *f);

/* A blocking lock request? */
static bool lock_blocks(const struct afr_fan *f)
{
    switch (f->fop) {
    case BFS_FOP_LK:
        return (((const struct bfs_lk_req *)f->req)->cmd & ~BFS_LK_FLOCK) == BFS_LK_SETLKW;
    case BFS_FOP_INODELK:
        return ((const struct bfs_inodelk_req *)f->req)->cmd == BFS_LK_SETLKW;
    case BFS_FOP_FINODELK:
        return ((const struct bfs_finodelk_req *)f->req)->cmd == BFS_LK_SETLKW;
    case BFS_FOP_ENTRYLK:
        return ((const struct bfs_entrylk_req *)f->req)->cmd == BFS_ENTRYLK_LOCK;
    case BFS_FOP_FENTRYLK:
        return ((const struct bfs_fentrylk_req *)f->req)->cmd == BFS_ENTRYLK_LOCK;
    }
    return false;
}

/* The same request, non-blocking. */
static void nonblocking_req(const struct afr_fan *f, union lock_req *u)
{
    switch (f->fop) {
    case BFS_FOP_LK:
        u->lk = *(const struct bfs_lk_req *)f->req;
        u->lk.cmd = BFS_LK_SETLK | (u->lk.cmd & BFS_LK_FLOCK);
        break;
    case BFS_FOP_INODELK:
        u->inodelk = *(const struct bfs_inodelk_req *)f->req;
        u->inodelk.cmd = BFS_LK_SETLK;
        break;
    case BFS_FOP_FINODELK:
        u->finodelk = *(const struct bfs_finodelk_req *)f->req;
        u->finodelk.cmd = BFS_LK_SETLK;
        break;
    case BFS_FOP_ENTRYLK:
        u->entrylk = *(const struct bfs_entrylk_req *)f->req;
        u->entrylk.cmd = BFS_ENTRYLK_LOCK_NB;
        break;
    case BFS_FOP_FENTRYLK:
        u->fentrylk = *(const struct bfs_fentrylk_req *)f->req;
        u->fentrylk.cmd = BFS_ENTRYLK_LOCK_NB;
        break;
    }
}

/* After the non-blocking round of a blocking request: done unless a copy
 * is held elsewhere; then release what was granted and go serial. */
static int nb_done(struct afr_fan *f)
{
    uint32_t ok = ok_mask(f), contended = 0;
    for (int i = 0; i < f->p->n; i++) {
        const struct bfs_op_reply *r = &f->op.replies[i];
        if (bfs_mask_has(f->asked, i) && r->valid && r->rc == -EAGAIN)
            contended |= BFS_BIT(i);
    }
    if (!contended)
        return fan_done(f);
    f->todo = f->asked;
    bfs_op_reset_replies(&f->op);
    if (!ok) {
        f->op.state = F_SERIAL;
        return BFS_OP_CONTINUE;
    }
    union lock_req u;
    release_req(f, &u);
    bfs_op_expect(&f->op, bfs_mask_count(ok));
    f->op.state = F_NB_UNDONE;
    for (int i = 0; i < f->p->n; i++)
        if (bfs_mask_has(ok, i))
            bfs_op_wind(&f->op, i, f->fop, f->p->xl->children[i], &u);
    return BFS_OP_WAIT;
}

/* The blocking request to one child at a time, in child order; replies
 * stay in their slots for fan_done. A refusal (not "down") stops it. */
static int serial(struct afr_fan *f)
{
    int i = bfs_mask_first(f->todo);
    if (i < 0 || (refused(f) & ~f->todo))
        return fan_done(f);
    f->todo &= ~BFS_BIT(i);
    bfs_op_expect(&f->op, 1);
    bfs_op_wind(&f->op, i, f->fop, f->p->xl->children[i], f->req);
    return BFS_OP_WAIT;
}

/* A lock granted on some copies only: release it there, answer the error. */
static int lock_undo(struct afr_fan *f, uint32_t ok)
{
    union lock_req u;
    release_req(f, &u);
    f->rc = fan_error(f);
    bfs_op_reset_replies(&f->op);
    bfs_op_expect(&f->op, bfs_mask_count(ok));
    f->op.state = F_UNDONE;
    for (int i = 0; i < f->p->n; i++)
        if (bfs_mask_has(ok, i))
            bfs_op_wind(&f->op, i, f->fop, f->p->xl->children[i], &u);
    return BFS_OP_WAIT;
}

/* Children that failed for another reason than being unreachable. */
static uint32_t refused(const struct afr_fan *f)
{
    uint32_t m = 0;
    for (int i = 0; i < f->p->n; i++) {
        const struct bfs_op_reply *r = &f->op.replies[i];
        if (bfs_mask_has(f->asked, i) && r->valid && r->rc < 0 && r->rc != -ENOTCONN)
            m |= BFS_BIT(i);
    }
    return m;
}

/* The GFID of what open/opendir opened (from the request or a reply). */
static const struct bfs_gfid *opened_gfid(const struct afr_fan *f, uint32_t ok)
{
    if (f->fop == BFS_FOP_OPENDIR)
        return &((const struct bfs_opendir_req *)f->req)->loc.gfid;
    int c = first_ok(f, ok);
    const struct bfs_open_rep *rep = c >= 0 ? f->op.replies[c].rep : NULL;
    return rep ? &rep->attr.gfid : &((const struct bfs_open_req *)f->req)->loc.gfid;
}

static void post_then(struct afr_fan *f)
{
    struct bfs_loop *loop = f->p->cl.loop;
    if (!loop || bfs_loop_post(loop, f->then, f->then_arg) < 0)
        f->then(f->then_arg);
}

static int reopened(struct afr_fan *f, uint32_t ok)
{
    struct afr_fd *c = afr_fdctx(f->p->xl, f->fd, false);
    struct afr_fix_wait *w = NULL;
    if (c) {
        pthread_mutex_lock(&c->lock);
        c->opened |= ok;
        c->reopening = false;
        w = c->fix_waiting;
        c->fix_waiting = NULL;
        pthread_mutex_unlock(&c->lock);
    }
    if (ok)
        XL_INFO(f->p->xl, "fd re-opened on %d child(ren) that missed its open",
                bfs_mask_count(ok));
    post_then(f);
    struct bfs_loop *loop = f->p->cl.loop;
    while (w) { /* those who asked while it was in flight */
        struct afr_fix_wait *next = w->next;
        if (!loop || bfs_loop_post(loop, w->fn, w->arg) < 0)
            w->fn(w->arg);
        free(w);
        w = next;
    }
    return BFS_OP_DONE;
}

/* A lazy open whose copy faulted (its connection lost before we heard it
 * go down: a brick stopped, replaced) is sent again to the other copies,
 * as an ordinary open, rather than failing while they are there. */
static int open_elsewhere(struct afr_fan *f)
{
    f->skip |= f->asked;
    f->lazy = false;
    bfs_op_reset_replies(&f->op);
    f->op.state = F_WIND;
    return BFS_OP_CONTINUE;
}

static int fan_done(struct afr_fan *f)
{
    uint32_t ok = ok_mask(f);
    switch (f->kind) {
    case FAN_OPEN:
        if (!ok && f->lazy && afr_child_fault(fan_error(f)))
            return open_elsewhere(f);
        if (!ok)
            return fan_answer(f, fan_error(f), -1);
        afr_fd_set_opened(f->p->xl, f->fd, ok, opened_gfid(f, ok),
                          f->fop == BFS_FOP_OPEN ? ((const struct bfs_open_req *)f->req)->flags
                                                 : 0);
        afr_fd_set_prefetch_ok(f->p->xl, f->fd, f->prefetch_ok & ok);
        if (f->lazy)
            afr_fd_set_lazy(f->p->xl, f->fd);
        if (f->trunc) {
            int c = first_ok(f, ok);
            int rc = afr_open_trunc(f->op.frame, f->p->xl, f->fd, f->op.replies[c].rep);
            if (rc == 0)
                return BFS_OP_DONE; /* the transaction answers */
            return fan_answer(f, rc, -1);
        }
        if (f->lazy || f->fop != BFS_FOP_OPEN)
            return fan_answer(f, 0, first_ok(f, ok)); /* lazy: the copy known good */
        /* any copy that opened it, maybe one not known good: its attributes
         * are not the file's for md-cache (lib/upcall-mark.h) */
        bfs_unwind_open_unmarked(f->op.frame, 0, f->op.replies[first_ok(f, ok)].rep);
        return BFS_OP_DONE;
    case FAN_ANY:
        return ok ? fan_answer(f, 0, first_ok(f, ok)) : fan_answer(f, fan_error(f), -1);
    case FAN_ALL:
        return ok && !refused(f) ? fan_answer(f, 0, first_ok(f, ok))
                                 : fan_answer(f, fan_error(f), -1);
    case FAN_STATFS:
        return ok ? fan_answer(f, 0, statfs_pick(f, ok)) : fan_answer(f, fan_error(f), -1);
    case FAN_REOPEN:
        return reopened(f, ok);
    case FAN_LK:
        if (ok && (!refused(f) || lock_is_release(f)))
            return fan_answer(f, 0, first_ok(f, ok));
        if (!ok)
            return fan_answer(f, fan_error(f), -1);
        return lock_undo(f, ok);
    }
    return fan_answer(f, -EINVAL, -1);
}

static void fix_done(void *arg)
{
    struct afr_fan *f = arg;
    bfs_op_answer(&f->op, 0, BFS_FOP_OPEN, 0);
}

/* An O_RDONLY open that may go to the reading copy alone? */
static bool open_lazily(const struct afr_fan *f, int reader)
{
    return f->kind == FAN_OPEN && f->fop == BFS_FOP_OPEN && reader >= 0 &&
           bfs_mask_has(f->asked, reader) && bfs_mask_has(f->prefetch_ok, reader) &&
           __atomic_load_n(&f->p->lazy_open, __ATOMIC_RELAXED);
}

/* A flush of an fd open on no copy that is up, while others are (a lazy
 * open's copy went down): there is nothing to flush. The bricks where it
 * was open dropped its locks with the connection; those up never had it
 * open, so hold nothing of it; its writes were answered one by one. */
static int flush_nowhere(struct afr_fan *f)
{
    struct bfs_flush_rep rep = {0};
    bfs_unwind_any(f->fop, f->op.frame, 0, &rep);
    return BFS_OP_DONE;
}

static int fan_step(struct bfs_op *op)
{
    struct afr_fan *f = (struct afr_fan *)op;
    struct afr_priv *p = f->p;
    switch (op->state) {
    case F_FIX: /* the fd opened on the copies it is not open on yet (lazy open) */
        bfs_op_expect(op, 1);
        op->state = F_FIXED;
        if (afr_fix_open(op->frame, p->xl, f->fd, fix_done, f) != 1)
            bfs_op_answer(op, 0, BFS_FOP_OPEN, 0);
        return BFS_OP_WAIT;
    case F_FIXED:
        bfs_op_reset_replies(op);
        op->state = F_WIND;
        return BFS_OP_CONTINUE;
    case F_WIND:
        f->asked = afr_up(p) & ~f->skip;
        if (f->kind == FAN_REOPEN)
            f->asked &= f->chosen; /* the children it missed (set by afr_fix_open) */
        else if (f->fd && !f->new_fd)
            f->asked &= afr_fd_opened(p->xl, f->fd);
        if (f->fop == BFS_FOP_LK && (((const struct bfs_lk_req *)f->req)->cmd & ~BFS_LK_FLOCK) ==
                                        BFS_LK_GETLK)
            f->asked = afr_data_mask(p, f->asked) & -afr_data_mask(p, f->asked); /* one copy */
        if (!f->asked && f->fop == BFS_FOP_FLUSH && afr_up(p))
            return flush_nowhere(f);
        if (!f->asked)
            return f->kind == FAN_REOPEN ? reopened(f, 0) : fan_answer(f, -ENOTCONN, -1);
        int reader = f->kind == FAN_OPEN && f->fop == BFS_FOP_OPEN
                         ? afr_open_reader(p, f->req, f->prefetch_ok) : -1; /* -prefetch.c */
        if (open_lazily(f, reader)) {
            f->asked = BFS_BIT(reader);
            f->lazy = true;
        }
        bfs_op_expect(op, bfs_mask_count(f->asked));
        op->state = F_DONE;
        if (f->kind == FAN_LK && lock_blocks(f) && bfs_mask_count(f->asked) > 1) {
            union lock_req u;
            nonblocking_req(f, &u);
            op->state = F_NB_DONE;
            for (int i = 0; i < p->n; i++)
                if (bfs_mask_has(f->asked, i))
                    bfs_op_wind(op, i, f->fop, p->xl->children[i], &u);
            return BFS_OP_WAIT;
        }
        for (int i = 0; i < p->n; i++) {
            if (!bfs_mask_has(f->asked, i))
                continue;
            if (reader == AFR_NO_READER || (reader >= 0 && bfs_mask_has(f->asked, reader)))
                afr_open_wind(op, i, f->req, reader);
            else
                bfs_op_wind(op, i, f->fop, p->xl->children[i], f->req);
        }
        return BFS_OP_WAIT;
    case F_DONE:
        return fan_done(f);
    case F_NB_DONE:
        return nb_done(f);
    case F_NB_UNDONE:
        bfs_op_reset_replies(op); /* an unlock that fails frees nothing we hold */
        op->state = F_SERIAL;
        return BFS_OP_CONTINUE;
    case F_SERIAL:
        return serial(f);
    case F_UNDONE:
        return fan_answer(f, f->rc, -1);
    }
    return BFS_OP_DONE;
}

static struct afr_fan *fan_new(struct bfs_frame *frame, struct bfs_xl *xl, int fop, int kind,
                               const void *req, struct bfs_fd *fd)
{
    struct afr_priv *p = afr_priv(xl);
    const struct bfs_fop_info *fi = &bfs_fop_info[fop];
    struct afr_fan *f = calloc(1, sizeof(*f));
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
    struct afr_fan *f = fan_new(frame, xl, fop, kind, req, fd);
    if (!f)
        return -ENOMEM;
    if (fd && (kind == FAN_LK || kind == FAN_ALL || fop == BFS_FOP_FSYNC))
        f->op.state = F_FIX; /* every copy must hear it: open where it is not yet */
    bfs_op_run(&f->op);
    return 0;
}

/* The data copies of the file known good now (readable in a context no
 * child event has made stale), for struct afr_fd.prefetch_ok: a copy a
 * lookup found good stays so (close-to-open), one that was not may be
 * healed by another process between this open and a read, after its
 * client fetched the old bytes with the open. */
static uint32_t good_copies(struct bfs_xl *xl, const struct bfs_loc *loc)
{
    struct afr_priv *p = afr_priv(xl);
    struct bfs_inode *inode = afr_inode_of_loc(xl, loc);
    struct afr_inode *c = inode ? afr_ictx(xl, inode) : NULL;
    uint32_t good = 0;
    bool split = false;
    if (c && afr_ictx_fresh(p, c)) {
        good = afr_ictx_readable(c, AFR_DATA, &split, NULL);
        if (split)
            good = 0;
    }
    if (inode)
        bfs_inode_unref(inode);
    return good;
}

int afr_open(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_open_req *req)
{
    struct afr_fan *f = fan_new(frame, xl, BFS_FOP_OPEN, FAN_OPEN, req, req->fd);
    if (!f)
        return -ENOMEM;
    struct bfs_open_req *q = f->req;
    f->new_fd = true;
    f->prefetch_ok = good_copies(xl, &q->loc);
    if ((q->flags & O_TRUNC) && (q->flags & O_ACCMODE) != O_RDONLY) {
        f->trunc = true; /* a change of data: done as a transaction after the open */
        q->flags &= ~(uint32_t)O_TRUNC;
    }
    bfs_op_run(&f->op);
    return 0;
}

int afr_opendir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_opendir_req *req)
{
    struct afr_fan *f = fan_new(frame, xl, BFS_FOP_OPENDIR, FAN_OPEN, req, req->fd);
    if (!f)
        return -ENOMEM;
    f->new_fd = true;
    bfs_op_run(&f->op);
    return 0;
}

int afr_fix_open(struct bfs_frame *frame, struct bfs_xl *xl, struct bfs_fd *fd,
                 bfs_task_fn then, void *arg)
{
    struct afr_priv *p = afr_priv(xl);
    struct afr_fd *c = afr_fdctx(xl, fd, false);
    if (!c || fd->is_dir)
        return 0;
    uint64_t gen = __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE);
    pthread_mutex_lock(&c->lock);
    uint32_t missing = afr_up(p) & ~c->opened;
    struct bfs_open_req req = {.fd = fd, .flags = c->flags};
    req.loc.gfid = c->gfid;
    if (missing && c->reopening) { /* one in flight: wait for it */
        struct afr_fix_wait *w = malloc(sizeof(*w));
        if (w) {
            *w = (struct afr_fix_wait){.fn = then, .arg = arg, .next = c->fix_waiting};
            c->fix_waiting = w;
        }
        pthread_mutex_unlock(&c->lock);
        return w ? 1 : 0;
    }
    bool go = missing && c->reopen_gen != gen && !bfs_gfid_is_null(&c->gfid);
    if (go) {
        c->reopening = true;
        c->reopen_gen = gen; /* one attempt per child event */
    }
    pthread_mutex_unlock(&c->lock);
    if (!go)
        return 0;
    struct afr_fan *f = fan_new(frame, xl, BFS_FOP_OPEN, FAN_REOPEN, &req, fd);
    if (!f) {
        pthread_mutex_lock(&c->lock);
        c->reopening = false;
        struct afr_fix_wait *w = c->fix_waiting;
        c->fix_waiting = NULL;
        pthread_mutex_unlock(&c->lock);
        while (w) { /* they go on without it, as this caller does */
            struct afr_fix_wait *next = w->next;
            w->fn(w->arg);
            free(w);
            w = next;
        }
        return 0;
    }
    f->new_fd = true; /* re-opens the same fd object on other children */
    f->chosen = (int)missing;
    f->then = then;
    f->then_arg = arg;
    bfs_op_run(&f->op);
    return 1;
}

static void flush_resume(void *arg)
{
    struct afr_fan *f = arg;
    bfs_op_run(&f->op);
}

/* close(): the file's eager lock is released (post-op + unlock), and the
 * flush goes on as soon as that release has started, without waiting for
 * its replies. The release starts only once every transaction of the
 * window has answered, so every write the close covers has been answered
 * (a failed one reported, a copy that failed one blamed first); what the
 * post-op adds is the end of the dirty mark: a copy lost before it keeps
 * "dirty, no blame", healed from any copy. The release op holds its own
 * refs on the fd (its release waits) and the inode; PARENT_DOWN waits for
 * it. Another client's lock waits for the unlock as it waited for our
 * close before. fsync waits for the bricks' fsync only, as before. */
int afr_flush(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_flush_req *req)
{
    struct afr_fan *f = fan_new(frame, xl, BFS_FOP_FLUSH, FAN_ANY, req, req->fd);
    if (!f)
        return -ENOMEM;
    struct bfs_inode *inode = afr_inode_of_fd(xl, req->fd);
    uint64_t v;
    int later = 0;
    if (inode && bfs_inode_ctx_get(inode, xl, &v) == 0 && v)
        later = bfs_txn_lock_flush_started(&((struct afr_inode *)(uintptr_t)v)->dlock,
                                           flush_resume, f);
    if (inode)
        bfs_inode_unref(inode);
    if (later != 1)
        bfs_op_run(&f->op);
    return 0;
}

int afr_fsync(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_fsync_req *req)
{
    return fan(frame, xl, BFS_FOP_FSYNC, FAN_ANY, req, req->fd);
}

int afr_fsyncdir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_fsyncdir_req *req)
{
    return fan(frame, xl, BFS_FOP_FSYNCDIR, FAN_ANY, req, req->fd);
}

int afr_statfs(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_statfs_req *req)
{
    return fan(frame, xl, BFS_FOP_STATFS, FAN_STATFS, req, NULL);
}

int afr_lk(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_lk_req *req)
{
    return fan(frame, xl, BFS_FOP_LK, FAN_LK, req, req->fd);
}

int afr_inodelk(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_inodelk_req *req)
{
    return fan(frame, xl, BFS_FOP_INODELK, FAN_LK, req, NULL);
}

int afr_finodelk(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_finodelk_req *req)
{
    return fan(frame, xl, BFS_FOP_FINODELK, FAN_LK, req, req->fd);
}

int afr_entrylk(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_entrylk_req *req)
{
    return fan(frame, xl, BFS_FOP_ENTRYLK, FAN_LK, req, NULL);
}

int afr_fentrylk(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_fentrylk_req *req)
{
    return fan(frame, xl, BFS_FOP_FENTRYLK, FAN_LK, req, req->fd);
}

int afr_xattrop(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_xattrop_req *req)
{
    return fan(frame, xl, BFS_FOP_XATTROP, FAN_ALL, req, NULL);
}

int afr_fxattrop(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_fxattrop_req *req)
{
    return fan(frame, xl, BFS_FOP_FXATTROP, FAN_ALL, req, req->fd);
}

/* Leases over several copies need a protocol of their own: not offered. */
int afr_lease(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_lease_req *req)
{
    (void)frame;
    (void)xl;
    (void)req;
    return -EOPNOTSUPP;
}

/* Each copy would copy from its own (possibly stale) source: refused, so
 * the kernel falls back to read + write, which go through transactions. */
int afr_copy_file_range(struct bfs_frame *frame, struct bfs_xl *xl,
                        const struct bfs_copy_file_range_req *req)
{
    (void)frame;
    (void)xl;
    (void)req;
    return -EOPNOTSUPP;
}
