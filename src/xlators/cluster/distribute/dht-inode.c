/*
 * dht-inode.c — every fop that is about one file or directory rather than
 * a name: the module's generic_fop handler (stat, setattr, open, read,
 * write, xattrs, locks, ...), statfs, and the background statfs that keeps
 * the min-free-disk view fresh.
 *
 * Files. An fd fop goes straight down the caller's frame to the subvolume
 * recorded in the fd (no allocation). A loc fop goes to the subvolume the
 * location cache names; a miss resolves it first with an internal lookup
 * (by name when the loc has one, else by GFID); an ENOENT/ESTALE from a
 * cached location drops the entry, resolves again and retries once.
 *
 * Directories (present on every subvolume):
 *   ALL    setattr, setxattr, removexattr (and their fd forms), fsyncdir:
 *          the name's hashed subvolume first when known (its failure is the
 *          answer), then the others; a down one is left to heal;
 *   MERGE  stat, fstat: every subvolume, latest times;
 *   ONE    anything else: locks on subvolume 0 (the same for every
 *          client), the rest on the first subvolume that answers.
 *
 * Keys under trusted.brickfs. are refused to callers above us (EPERM on
 * set/remove); reads of them come back ENODATA from the bricks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/event.h"
#include "dht.h"

enum { P_FILE, P_ALL, P_MERGE, P_ONE, P_LOCK };

enum {
    RT_START, RT_RESOLVE, RT_RESOLVED, RT_FILE, RT_ONE, RT_MDS, RT_ALL, RT_MERGE,
    RT_F_MARK, RT_F_FIND, RT_F_LOCKED, RT_F_CHECKED, RT_F_OPENED, RT_F_REDONE, RT_F_UNLOCKED,
};

struct dht_route_op {
    struct dht_op o;
    int fop, n;
    void *req;                  /* our copy */
    const struct bfs_loc *loc;  /* in req, or NULL for fd fops */
    struct bfs_fd *fd;          /* in req, or NULL */
    const struct dht_dirfd *df; /* directory fds */
    struct bfs_fd *ffd;         /* file fds: the fd of an fd fop, or the one open opens */
    /* following a file the rebalance is moving (RT_F_*): its GFID, where
     * it went, the slot of the answer, whether we hold the migrate lock */
    struct bfs_gfid fgfid;
    int t, fans;
    bool flocked;
    int kind;                   /* DHT_KIND_FILE / _DIR */
    int s;                      /* file: its subvolume; ONE: the one asked */
    int mds;                    /* directory: its name's hashed subvolume, or -1 */
    bool from_cache, retried, by_gfid;
};

/* ---- where the loc and the fd are in a request ---- */

static const struct bfs_loc *req_loc(int fop, const void *req)
{
    switch (fop) {
    case BFS_FOP_INODELK:
        return &((const struct bfs_inodelk_req *)req)->loc;
    case BFS_FOP_ENTRYLK:
        return &((const struct bfs_entrylk_req *)req)->loc;
    }
    return bfs_fop_info[fop].has_fd ? NULL : (const struct bfs_loc *)req; /* first member */
}

static struct bfs_fd *req_fd(int fop, const void *req)
{
    switch (fop) {
    case BFS_FOP_FINODELK:
        return ((const struct bfs_finodelk_req *)req)->fd;
    case BFS_FOP_FENTRYLK:
        return ((const struct bfs_fentrylk_req *)req)->fd;
    case BFS_FOP_OPEN:
        return ((const struct bfs_open_req *)req)->fd;
    }
    return bfs_fop_info[fop].has_fd ? *(struct bfs_fd *const *)req : NULL;
}

static int dir_policy(int fop)
{
    switch (fop) {
    case BFS_FOP_SETATTR: case BFS_FOP_FSETATTR: case BFS_FOP_SETXATTR: case BFS_FOP_FSETXATTR:
    case BFS_FOP_REMOVEXATTR: case BFS_FOP_FREMOVEXATTR: case BFS_FOP_FSYNCDIR:
        return P_ALL;
    case BFS_FOP_STAT: case BFS_FOP_FSTAT:
        return P_MERGE;
    case BFS_FOP_INODELK: case BFS_FOP_FINODELK: case BFS_FOP_ENTRYLK: case BFS_FOP_FENTRYLK:
    case BFS_FOP_LK: case BFS_FOP_LEASE:
        return P_LOCK;
    }
    return P_ONE;
}

static int key_internal(const char *key, enum bfs_val_type t, const void *v, size_t l, void *a)
{
    (void)t, (void)v, (void)l, (void)a;
    return strncmp(key, DHT_XATTR_PREFIX, sizeof(DHT_XATTR_PREFIX) - 1) == 0 ? -EPERM : 0;
}

/* Callers above us may not set or remove brickfs's own xattrs. */
static int xattr_guard(int fop, const void *req)
{
    const struct bfs_dict *d = NULL;
    const char *name = NULL;
    switch (fop) {
    case BFS_FOP_SETXATTR: d = ((const struct bfs_setxattr_req *)req)->xattrs; break;
    case BFS_FOP_FSETXATTR: d = ((const struct bfs_fsetxattr_req *)req)->xattrs; break;
    case BFS_FOP_REMOVEXATTR: name = ((const struct bfs_removexattr_req *)req)->name; break;
    case BFS_FOP_FREMOVEXATTR: name = ((const struct bfs_fremovexattr_req *)req)->name; break;
    default: return 0;
    }
    if (name)
        return key_internal(name, BFS_VAL_STR, NULL, 0, NULL);
    return d ? bfs_dict_foreach(d, key_internal, NULL) : 0;
}

/* ---- fd contexts of files ---- */

int dht__fd_subvol(struct bfs_xl *xl, struct bfs_fd *fd)
{
    uint64_t v;
    if (!fd || fd->is_dir || bfs_fd_ctx_get(fd, xl, &v) < 0 || v == 0)
        return -1;
    return (int)v - 1;
}

void dht__fd_set_subvol(struct bfs_xl *xl, struct bfs_fd *fd, int s)
{
    if (fd && s >= 0)
        bfs_fd_ctx_set(fd, xl, (uint64_t)s + 1);
}

/* ---- answering ---- */

static void route_cleanup(struct dht_op *o)
{
    struct dht_route_op *r = (struct dht_route_op *)o;
    if (r->req) {
        bfs_fop_info[r->fop].req_clear_dup(r->req);
        free(r->req);
    }
}

static int answer_slot(struct dht_route_op *r, int slot)
{
    int rc = dht__rc(&r->o, slot);
    const void *rep = rc >= 0 ? dht__rep(&r->o, slot) : NULL;
    if (rc >= 0 && r->fop == BFS_FOP_OPEN)
        dht__fd_set_subvol(r->o.priv->xl, r->fd, slot);
    bfs_unwind_any(r->fop, r->o.caller, rc, rep);
    return BFS_OP_DONE;
}

static int answer_rc(struct dht_route_op *r, int rc)
{
    bfs_unwind_any(r->fop, r->o.caller, rc, NULL);
    return BFS_OP_DONE;
}

/* stat/fstat of a directory: the authority's answer, latest times. */
static int answer_merge(struct dht_route_op *r)
{
    int best = -1, err = 0;
    for (int s = 0; s < r->n; s++) {
        int rc = dht__rc(&r->o, s);
        if (rc >= 0 && (best < 0 || s == r->mds))
            best = s;
        else if (rc < 0 && rc != -ENOTCONN && !err && r->o.op.replies[s].valid)
            err = rc;
    }
    if (best < 0)
        return answer_rc(r, err ? err : -ENOTCONN);
    /* bfs_stat_rep and bfs_fstat_rep are both {attr, xdata} */
    struct bfs_stat_rep rep = *DHT_REP(&r->o, best, bfs_stat_rep);
    for (int s = 0; s < r->n; s++)
        if (dht__rc(&r->o, s) >= 0 && S_ISDIR(DHT_REP(&r->o, s, bfs_stat_rep)->attr.mode))
            dht__iatt_merge_dir(&rep.attr, &DHT_REP(&r->o, s, bfs_stat_rep)->attr);
    bfs_unwind_any(r->fop, r->o.caller, 0, &rep);
    return BFS_OP_DONE;
}

static int answer_all(struct dht_route_op *r)
{
    int best = -1, err = 0;
    for (int s = 0; s < r->n; s++) {
        if (!r->o.op.replies[s].valid)
            continue;
        int rc = dht__rc(&r->o, s);
        if (rc >= 0 && (best < 0 || s == r->mds))
            best = s;
        else if (rc < 0 && rc != -ENOTCONN && rc != -ENOENT)
            err = err ? err : rc;
    }
    if (err && best >= 0)
        XL_WARN(r->o.priv->xl, "%s on a directory: some subvolumes failed (%s); heal on lookup",
                bfs_fop_name(r->fop), strerror(-err));
    if (best < 0)
        return answer_rc(r, err ? err : dht__rc(&r->o, r->mds >= 0 ? r->mds : 0));
    return answer_slot(r, best);
}

/* ---- dispatch ---- */

static bool is_open(const struct dht_route_op *r, int s)
{
    return !r->df || r->df->open[s];
}

static int next_one(const struct dht_route_op *r, int from)
{
    for (int s = from; s < r->n; s++)
        if (is_open(r, s))
            return s;
    return -1;
}

static int dispatch(struct dht_route_op *r)
{
    int policy = r->kind == DHT_KIND_FILE ? P_FILE : dir_policy(r->fop);
    switch (policy) {
    case P_FILE:
        r->o.op.state = RT_FILE;
        dht__wind(&r->o, r->s, r->fop, r->s, r->req, false);
        return BFS_OP_WAIT;
    case P_LOCK: case P_ONE:
        r->s = next_one(r, 0);
        if (r->s < 0)
            return answer_rc(r, -ENOTCONN);
        r->o.op.state = policy == P_LOCK ? RT_FILE : RT_ONE;
        dht__wind(&r->o, r->s, r->fop, r->s, r->req, false);
        return BFS_OP_WAIT;
    case P_ALL:
        if (r->mds >= 0 && is_open(r, r->mds)) {
            r->o.op.state = RT_MDS;
            dht__wind(&r->o, r->mds, r->fop, r->mds, r->req, false);
            return BFS_OP_WAIT;
        }
        /* fall through */
    default:
        for (int s = 0; s < r->n; s++)
            if (is_open(r, s) && s != r->mds)
                dht__wind(&r->o, s, r->fop, s, r->req, false);
        r->o.op.state = policy == P_MERGE ? RT_MERGE : RT_ALL;
        return BFS_OP_WAIT;
    }
}

static int start(struct dht_route_op *r)
{
    if (!r->loc && r->ffd) { /* a file fd fop that may have to follow a migration */
        r->kind = DHT_KIND_FILE;
        r->s = dht__fd_subvol(r->o.priv->xl, r->ffd);
        return r->s < 0 ? answer_rc(r, -EBADFD) : dispatch(r);
    }
    if (!r->loc) { /* a directory fd */
        r->kind = DHT_KIND_DIR;
        r->mds = -1;
        if (r->fd->inode)
            (void)dht__cache_get(r->o.priv, &r->fd->inode->gfid, &r->mds);
        return dispatch(r);
    }
    const struct bfs_loc *loc = r->loc;
    int s = -1;
    r->kind = bfs_gfid_is_null(&loc->gfid) ? DHT_KIND_NONE
                                           : dht__cache_get(r->o.priv, &loc->gfid, &s);
    if (bfs_gfid_is_root(&loc->gfid)) {
        r->kind = DHT_KIND_DIR;
        s = -1;
    }
    if (r->kind == DHT_KIND_FILE && s >= 0 && s < r->n) {
        r->s = s;
        r->from_cache = true;
        return dispatch(r);
    }
    if (r->kind == DHT_KIND_DIR) {
        r->mds = s >= 0 && s < r->n ? s : -1;
        return dispatch(r);
    }
    r->o.op.state = RT_RESOLVE;
    return BFS_OP_CONTINUE;
}

static int resolve(struct dht_route_op *r)
{
    const struct bfs_loc *loc = r->loc;
    bool named = loc->name && !bfs_gfid_is_null(&loc->pargfid) && !r->by_gfid;
    if (!named && bfs_gfid_is_null(&loc->gfid))
        return answer_rc(r, -EINVAL);
    r->o.op.state = RT_RESOLVED;
    dht__info_wind(&r->o, 0, loc, named);
    return BFS_OP_WAIT;
}

static int resolved(struct dht_route_op *r)
{
    struct dht_info info;
    dht__info_get(&r->o, 0, &info);
    if (info.rc < 0)
        return answer_rc(r, info.rc);
    bool named = r->loc->name && !r->by_gfid && !bfs_gfid_is_null(&r->loc->pargfid);
    if (named && !bfs_gfid_is_null(&r->loc->gfid) && !bfs_gfid_eq(&info.attr.gfid, &r->loc->gfid)) {
        r->by_gfid = true; /* the name is another file now: find ours by GFID */
        r->o.op.state = RT_RESOLVE;
        return BFS_OP_CONTINUE;
    }
    bfs_op_reset_replies(&r->o.op);
    if (S_ISDIR(info.attr.mode)) {
        r->kind = DHT_KIND_DIR;
        r->mds = named ? dht__hashed(&r->o, &r->loc->pargfid, r->loc->name) : -1;
    } else {
        r->kind = DHT_KIND_FILE;
        r->s = info.cached;
    }
    return dispatch(r);
}

/* ---- following a file the rebalance is moving ----
 *
 * docs/design/rebalance.md, "Open descriptors follow". An open, truncate,
 * setattr, fallocate, discard or zerofill whose reply shows the frozen
 * bits landed on a source the rebalance froze (and will drop): read the
 * destination from the source's mark (else find the GFID elsewhere), wait
 * for the migration (its inodelk on the destination), and if the file is
 * real there now, repeat the fop there (an fd fop opens its fd there
 * first) and move the fd; the answer is the repeated fop's.
 * Nowhere else, or the migration failed (still link-shaped): the first
 * answer stands. Slots: [0, n) lookups, n the lock, n + 1 the rest. */

static int f_answer(struct dht_route_op *r, int slot)
{
    int rc = dht__rc(&r->o, slot);
    const void *rep = rc >= 0 ? dht__rep(&r->o, slot) : NULL;
    if (rc >= 0 && r->fop == BFS_FOP_OPEN)
        dht__fd_set_subvol(r->o.priv->xl, r->ffd, slot == r->s ? r->s : r->t);
    bfs_unwind_any(r->fop, r->o.caller, rc, rep);
    return BFS_OP_DONE;
}

static int f_unlock(struct dht_route_op *r, int ans)
{
    r->fans = ans;
    r->o.op.state = RT_F_UNLOCKED;
    if (!r->flocked)
        return BFS_OP_CONTINUE;
    struct bfs_inodelk_req q;
    dht__migrate_lock_req(&q, &r->fgfid, F_UNLCK);
    dht__wind(&r->o, r->n, BFS_FOP_INODELK, r->t, &q, true);
    r->flocked = false;
    return BFS_OP_WAIT;
}

/* The fop again on r->t: loc fops by GFID alone (the name on t is the
 * migration's destination anyway), fd fops through the fd opened there. */
static int f_redo(struct dht_route_op *r)
{
    r->o.op.state = RT_F_REDONE;
    if (r->loc) /* our copy of the request: bricks resolve a GFID before a name */
        ((struct bfs_loc *)r->loc)->gfid = r->fgfid;
    dht__wind(&r->o, r->n + 1, r->fop, r->t, r->req, false);
    return BFS_OP_WAIT;
}

static int f_lock(struct dht_route_op *r)
{
    struct bfs_inodelk_req q;
    r->o.op.state = RT_F_LOCKED;
    dht__migrate_lock_req(&q, &r->fgfid, F_WRLCK);
    dht__wind(&r->o, r->n, BFS_FOP_INODELK, r->t, &q, true);
    return BFS_OP_WAIT;
}

/* The source's mark names the destination (through the fd when there is
 * one: the source may be unlinked already). */
static int f_mark(struct dht_route_op *r)
{
    struct bfs_dict *xd = dht__xdata_internal();
    r->o.op.state = RT_F_MARK;
    if (r->ffd) {
        struct bfs_fgetxattr_req q = {.fd = r->ffd, .name = DHT_MIGRATING_KEY, .xdata = xd};
        dht__wind(&r->o, r->n + 1, BFS_FOP_FGETXATTR, r->s, &q, true);
    } else {
        struct bfs_getxattr_req q = {.name = DHT_MIGRATING_KEY, .xdata = xd};
        q.loc.gfid = r->fgfid;
        dht__wind(&r->o, r->n + 1, BFS_FOP_GETXATTR, r->s, &q, true);
    }
    bfs_dict_unref(xd);
    return BFS_OP_WAIT;
}

static int follow_step(struct dht_route_op *r)
{
    switch (r->o.op.state) {
    case RT_F_MARK: {
        /* bfs_getxattr_rep and bfs_fgetxattr_rep are both {xattrs, xdata} */
        const struct bfs_getxattr_rep *gr = DHT_REP(&r->o, r->n + 1, bfs_getxattr_rep);
        r->t = dht__mark_target(r->o.priv, dht__rc(&r->o, r->n + 1) >= 0 && gr ? gr->xattrs
                                                                                 : NULL);
        if (r->t == DHT_MARK_NONE || r->t == r->s)
            return f_answer(r, r->s); /* the user's own mode bits */
        if (r->t == DHT_MARK_ELSEWHERE) /* this (older) graph cannot follow: say so */
            return answer_rc(r, -EIO);
        if (r->t >= 0)
            return f_lock(r);
        for (int s = 0; s < r->n; s++) { /* a mark without a name: ask around */
            if (s == r->s)
                continue;
            struct bfs_lookup_req l = {0};
            l.loc.gfid = r->fgfid;
            dht__wind(&r->o, s, BFS_FOP_LOOKUP, s, &l, true);
        }
        r->o.op.state = RT_F_FIND;
        return BFS_OP_WAIT;
    }
    case RT_F_FIND:
        r->t = -1;
        for (int s = 0; s < r->n && r->t < 0; s++) {
            const struct bfs_lookup_rep *lr = DHT_REP(&r->o, s, bfs_lookup_rep);
            if (s != r->s && dht__rc(&r->o, s) >= 0 && lr && S_ISREG(lr->attr.mode))
                r->t = s;
        }
        if (r->t < 0)
            return f_answer(r, r->s);
        return f_lock(r);
    case RT_F_LOCKED: {
        if (dht__rc(&r->o, r->n) < 0)
            return f_answer(r, r->s);
        r->flocked = true;
        struct bfs_lookup_req l = {0};
        l.loc.gfid = r->fgfid;
        r->o.op.state = RT_F_CHECKED;
        dht__wind(&r->o, r->n + 1, BFS_FOP_LOOKUP, r->t, &l, true);
        return BFS_OP_WAIT;
    }
    case RT_F_CHECKED: {
        const struct bfs_lookup_rep *lr = DHT_REP(&r->o, r->n + 1, bfs_lookup_rep);
        if (dht__rc(&r->o, r->n + 1) < 0 || !lr || dht__is_suspicious(&lr->attr))
            return f_unlock(r, r->s); /* not moved (failed, undone): the source is the file */
        dht__cache_put(r->o.priv, &r->fgfid, DHT_KIND_FILE, r->t);
        if (r->loc || r->fop == BFS_FOP_OPEN)
            return f_redo(r);
        struct bfs_open_req o = {0};
        o.loc.gfid = r->fgfid;
        o.fd = r->ffd;
        o.flags = (uint32_t)r->ffd->flags & ~(uint32_t)(O_CREAT | O_EXCL | O_TRUNC);
        r->o.op.state = RT_F_OPENED;
        dht__wind(&r->o, r->n + 1, BFS_FOP_OPEN, r->t, &o, false);
        return BFS_OP_WAIT;
    }
    case RT_F_OPENED:
        if (dht__rc(&r->o, r->n + 1) < 0)
            return f_unlock(r, r->n + 1); /* its data would be dropped with the source */
        dht__fd_set_subvol(r->o.priv->xl, r->ffd, r->t);
        return f_redo(r);
    case RT_F_REDONE:
        return f_unlock(r, r->n + 1);
    default: /* RT_F_UNLOCKED */
        return f_answer(r, r->fans);
    }
}

static int on_file(struct dht_route_op *r)
{
    int rc = dht__rc(&r->o, r->s);
    if (rc >= 0 && r->n > 1 && dht__follows(r->fop) &&
        dht__frozen_reply(r->fop, dht__rep(&r->o, r->s), &r->fgfid)) {
        atomic_fetch_add(&r->o.priv->n_divert, 1);
        return f_mark(r);
    }
    if ((rc == -ENOENT || rc == -ESTALE) && r->from_cache && !r->retried && r->loc) {
        r->retried = true; /* moved since we cached it */
        r->from_cache = false;
        dht__cache_drop(r->o.priv, &r->loc->gfid);
        r->o.op.state = RT_RESOLVE;
        return BFS_OP_CONTINUE;
    }
    return answer_slot(r, r->s);
}

static int route_step(struct bfs_op *op)
{
    struct dht_route_op *r = (struct dht_route_op *)op;
    int rc, s;
    switch (op->state) {
    case RT_START: return start(r);
    case RT_RESOLVE: return resolve(r);
    case RT_RESOLVED: return resolved(r);
    case RT_FILE: return on_file(r);
    case RT_ONE:
        rc = dht__rc(&r->o, r->s);
        s = rc == -ENOTCONN ? next_one(r, r->s + 1) : -1;
        if (s < 0)
            return answer_slot(r, r->s);
        r->s = s;
        dht__wind(&r->o, s, r->fop, s, r->req, false);
        return BFS_OP_WAIT;
    case RT_MDS:
        if (dht__rc(&r->o, r->mds) < 0) /* the authority refused: so do we */
            return answer_slot(r, r->mds);
        for (s = 0; s < r->n; s++)
            if (is_open(r, s) && s != r->mds)
                dht__wind(&r->o, s, r->fop, s, r->req, false);
        op->state = RT_ALL;
        return r->n > 1 ? BFS_OP_WAIT : BFS_OP_CONTINUE;
    case RT_ALL: return answer_all(r);
    case RT_MERGE: return answer_merge(r);
    default: return follow_step(r);
    }
}

static int route_new(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req,
                     struct bfs_fd *fd)
{
    struct dht_priv *priv = xl->private;
    struct dht_route_op *r = (struct dht_route_op *)dht__op_new(
        sizeof(*r), frame, xl, priv->n + 2, route_step, route_cleanup);
    if (!r)
        return -ENOMEM;
    r->fop = fop;
    r->n = priv->n;
    r->mds = -1;
    r->req = malloc(bfs_fop_info[fop].req_size);
    if (!r->req || bfs_fop_info[fop].req_copy_into(r->req, req) < 0) {
        free(r->req);
        r->req = NULL;
        bfs_op_unref(&r->o.op);
        return -ENOMEM;
    }
    const struct bfs_loc *loc = req_loc(fop, req);
    if (loc) /* the same member of our copy */
        r->loc = (const struct bfs_loc *)((const char *)r->req +
                                         ((const char *)loc - (const char *)req));
    r->fd = fd && fd->is_dir && !loc ? fd : NULL;
    if (fop == BFS_FOP_OPEN)
        r->fd = ((const struct bfs_open_req *)req)->fd; /* where open records its subvolume */
    struct bfs_fd *own = req_fd(fop, r->req); /* the fd of our copy */
    if (own && !own->is_dir)
        r->ffd = own;
    if (r->fd && r->fd->is_dir && !loc)
        r->df = dht__dirfd(xl, r->fd);
    dht__op_start(&r->o);
    return 0;
}

int dht__generic(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req)
{
    int rc = xattr_guard(fop, req);
    if (rc < 0)
        return rc;
    struct bfs_fd *fd = req_fd(fop, req);
    if (fd && fop != BFS_FOP_OPEN) {
        if (fd->is_dir) {
            if (!dht__dirfd(xl, fd))
                return -EBADFD;
            return route_new(frame, xl, fop, req, fd);
        }
        if (dht__follows(fop))
            return route_new(frame, xl, fop, req, fd);
        int s = dht__fd_subvol(xl, fd);
        if (s < 0)
            return -EBADFD;
        if (fop == BFS_FOP_COPY_FILE_RANGE &&
            dht__fd_subvol(xl, ((const struct bfs_copy_file_range_req *)req)->fd_out) != s)
            return -EXDEV; /* two subvolumes: the caller copies */
        struct bfs_xl *child = xl->children[s];
        bfs__frame_pass(frame, child); /* the hot path: no state of ours */
        return bfs_fop_info[fop].call(frame, child, req);
    }
    if (!req_loc(fop, req))
        return -ENOSYS;
    return route_new(frame, xl, fop, req, NULL);
}

/* ---- statfs ---- */

struct dht_statfs_op {
    struct dht_op o;
    struct bfs_statfs_req req;
    int n;
};

static int statfs_step(struct bfs_op *op)
{
    struct dht_statfs_op *f = (struct dht_statfs_op *)op;
    struct dht_priv *priv = f->o.priv;
    if (op->state == 0) {
        op->state = 1;
        for (int s = 0; s < f->n; s++)
            dht__wind(&f->o, s, BFS_FOP_STATFS, s, &f->req, f->o.caller == NULL);
        return BFS_OP_WAIT;
    }
    struct bfs_statfs_rep rep = {0};
    int got = 0, err = 0;
    for (int s = 0; s < f->n; s++) {
        const struct bfs_statfs_rep *r = DHT_REP(&f->o, s, bfs_statfs_rep);
        if (dht__rc(&f->o, s) < 0) {
            err = err ? err : dht__rc(&f->o, s);
            continue;
        }
        dht__free_note(priv, s, &r->buf);
        struct bfs_statvfs *b = &rep.buf;
        if (!got++) {
            *b = r->buf;
            continue;
        }
        uint64_t fr = r->buf.frsize ? r->buf.frsize : 1, base = b->frsize ? b->frsize : 1;
        b->blocks += r->buf.blocks * fr / base;
        b->bfree += r->buf.bfree * fr / base;
        b->bavail += r->buf.bavail * fr / base;
        b->files += r->buf.files;
        b->ffree += r->buf.ffree;
        b->favail += r->buf.favail;
    }
    if (!f->o.caller) { /* the background refresh */
        pthread_mutex_lock(&priv->lock);
        priv->free_refreshing = false;
        priv->free_at_ms = bfs_now_ms();
        pthread_mutex_unlock(&priv->lock);
        return BFS_OP_DONE;
    }
    bfs_unwind_statfs(f->o.caller, got ? 0 : err, &rep);
    return BFS_OP_DONE;
}

static int statfs_new(struct bfs_frame *frame, struct bfs_xl *xl)
{
    struct dht_priv *priv = xl->private;
    struct dht_statfs_op *f = (struct dht_statfs_op *)dht__op_new(
        sizeof(*f), frame, xl, priv->n, statfs_step, NULL);
    if (!f)
        return -ENOMEM;
    f->n = priv->n;
    f->req.loc.gfid = bfs_gfid_root;
    dht__op_start(&f->o);
    return 0;
}

int dht__statfs(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_statfs_req *req)
{
    (void)req; /* every subvolume's whole file system: the volume's */
    return statfs_new(frame, xl);
}

void dht__free_refresh(struct bfs_xl *xl)
{
    struct dht_priv *priv = xl->private;
    if (statfs_new(NULL, xl) < 0) {
        pthread_mutex_lock(&priv->lock);
        priv->free_refreshing = false;
        pthread_mutex_unlock(&priv->lock);
    }
}
