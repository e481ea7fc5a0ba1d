/*
 * dht-migrate.c — writes through an open file that the rebalance process
 * is moving or has moved (docs/design/rebalance.md, "Open descriptors
 * follow"). The rebalance marks the source with mode bits S_ISVTX|S_ISGID
 * (GlusterFS's "migration in progress") before its last copy pass, and
 * holds an inodelk (domain dht.migrate) on the destination until the file
 * has switched. A write whose reply shows those bits on a regular file
 * landed in a source that is frozen or already unlinked, so:
 *
 *   1 read the source's mark (xattr trusted.brickfs.dht.migrating =
 *      "MODE DESTINATION", through the fd: the source may be unlinked):
 *      none: the bits are the user's own, answer as is; a destination
 *      this graph lacks: EIO; a mark without a name (older rebalance):
 *      find the GFID on the other subvolumes;
 *   2 wait for the migration: inodelk dht.migrate there (then unlock);
 *   3 the file there must be a real one now (a failed migration removed
 *      it and unfroze the source: answer as is);
 *   4 open the same fd on the new subvolume (its own flags) and write the
 *      same bytes there; from now on the fd's subvolume is the new one.
 *      Through an O_APPEND fd the write appends there, after whatever other
 *      fds appended since the switch; but one that the move's last copy
 *      already carried (it ends within the size the move recorded on the
 *      source, DHT_COPIED_KEY, read through the fd) is not written again.
 *
 * The bytes come from the write itself: the request is only borrowed for
 * the wind (runtime.md), so on a volume of two subvolumes or more the
 * cookie the write is wound with (fd, offset, flags) carries a copy of its
 * payload. Reading them back from the source through the caller's fd, as
 * this file did before, fails on an O_WRONLY fd (EBADF) and the write was
 * answered from the source alone, which the move then dropped. The cookie
 * lives from the wind to the answer (the redirect op takes it over when the
 * reply shows the frozen bits). A read is wound the same way (a cookie
 * holding its request); a frozen reply restarts it through the inode
 * router, which follows like open and truncate do.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dht.h"

#define FROZEN (S_ISVTX | S_ISGID)

struct wcookie {
    struct bfs_xl *xl;
    struct bfs_fd *fd; /* ref'd */
    uint64_t offset;
    uint32_t flags;
    int s;
    bool kept;         /* data holds the write's payload (len bytes) */
    size_t len;
    char data[];
};

static void wcookie_free(struct wcookie *c)
{
    bfs_fd_unref(c->fd);
    free(c);
}

enum { W_MARK = 1, W_FIND, W_LOCKED, W_CHECKED, W_COPIED, W_OPENED, W_WRITTEN, W_UNLOCKED };

struct dht_wmig {
    struct dht_op o;
    struct wcookie *c;          /* the write's cookie, owned */
    int rc;                     /* the source write's answer */
    struct bfs_write_rep rep;   /* its reply (dup'd fields) */
    int t;                      /* the new subvolume */
    int n;
    bool locked;
    bool carried;               /* an O_APPEND write the last copy took: not repeated */
    struct bfs_iatt dst;        /* the destination's attributes, once the move ended */
    int final_rc;
    struct bfs_write_rep final;
};

static void wmig_cleanup(struct dht_op *o)
{
    struct dht_wmig *w = (struct dht_wmig *)o;
    bfs_write_rep_clear_dup(&w->rep);
    bfs_write_rep_clear_dup(&w->final);
    if (w->c)
        wcookie_free(w->c);
}

void dht__migrate_lock_req(struct bfs_inodelk_req *r, const struct bfs_gfid *g, uint32_t type)
{
    memset(r, 0, sizeof(*r));
    r->domain = DHT_MIGRATE_DOMAIN;
    r->loc.gfid = *g;
    r->cmd = type == F_UNLCK ? BFS_LK_SETLK : BFS_LK_SETLKW;
    r->lock.type = type;
    r->lock.whence = SEEK_SET;
}

static void wind_lock(struct dht_wmig *w, uint32_t type)
{
    struct bfs_inodelk_req r;
    dht__migrate_lock_req(&r, &w->c->fd->inode->gfid, type);
    dht__wind(&w->o, 0, BFS_FOP_INODELK, w->t, &r, true);
}

/* The answer: the new subvolume's write when it happened, else the source's. */
static int answer(struct dht_wmig *w)
{
    if (w->final_rc > 0)
        bfs_unwind_write(w->o.caller, w->final_rc, &w->final);
    else
        bfs_unwind_write(w->o.caller, w->rc, &w->rep);
    return BFS_OP_DONE;
}

static int after_unlock(struct dht_wmig *w)
{
    return answer(w);
}

/* The move's record of the size its last copy took (DHT_COPIED_KEY,
 * decimal); false when there is none (a rebalance older than it). */
static bool copied_size(const struct bfs_dict *xattrs, uint64_t *out)
{
    const void *v;
    size_t len;
    char txt[24];
    if (!xattrs || bfs_dict_get_bin(xattrs, DHT_COPIED_KEY, &v, &len) < 0 || len == 0 ||
        len >= sizeof(txt))
        return false;
    memcpy(txt, v, len);
    txt[len] = 0;
    char *end;
    unsigned long long n = strtoull(txt, &end, 10);
    if (*end != 0 || txt[0] < '0' || txt[0] > '9')
        return false;
    *out = n;
    return true;
}

/* 4: the caller's fd opened on the new subvolume, with its own flags (an
 * O_APPEND fd appends there from now on). */
static int open_dst(struct dht_wmig *w)
{
    w->o.op.state = W_OPENED;
    struct bfs_open_req r = {0};
    r.loc.gfid = w->c->fd->inode->gfid;
    r.fd = w->c->fd;
    r.flags = w->c->flags & ~(uint32_t)(O_CREAT | O_EXCL | O_TRUNC);
    dht__wind(&w->o, 0, BFS_FOP_OPEN, w->t, &r, false);
    return BFS_OP_WAIT;
}

static int wmig_step(struct bfs_op *op)
{
    struct dht_wmig *w = (struct dht_wmig *)op;
    struct dht_op *o = &w->o;
    const struct bfs_gfid *g = &w->c->fd->inode->gfid;
    switch (op->state) {
    case 0: { /* 1: where is it going? The source's mark names the destination */
        /* through the fd: the source may be unlinked already (moved),
         * and then a GFID no longer resolves on its brick */
        struct bfs_dict *xd = dht__xdata_internal();
        struct bfs_fgetxattr_req r = {.fd = w->c->fd, .name = DHT_MIGRATING_KEY, .xdata = xd};
        op->state = W_MARK;
        dht__wind(o, 0, BFS_FOP_FGETXATTR, w->c->s, &r, true);
        bfs_dict_unref(xd);
        return BFS_OP_WAIT;
    }
    case W_MARK: {
        const struct bfs_fgetxattr_rep *gr = DHT_REP(o, 0, bfs_fgetxattr_rep);
        w->t = dht__mark_target(o->priv, dht__rc(o, 0) >= 0 && gr ? gr->xattrs : NULL);
        if (w->t == DHT_MARK_NONE || w->t == w->c->s)
            return answer(w); /* the user's own mode bits */
        if (w->t == DHT_MARK_ELSEWHERE) {
            /* moving to a subvolume this (older) graph does not have: the
             * write cannot follow; say so rather than lose it silently */
            struct bfs_write_rep none = {0};
            bfs_unwind_write(o->caller, -EIO, &none);
            return BFS_OP_DONE;
        }
        if (w->t >= 0) {
            op->state = W_LOCKED;
            wind_lock(w, F_WRLCK); /* 2: waits while the rebalance holds it */
            return BFS_OP_WAIT;
        }
        op->state = W_FIND; /* a mark without a name (an older rebalance): ask around */
        for (int s = 0; s < w->n; s++) {
            if (s == w->c->s)
                continue;
            struct bfs_lookup_req r = {0};
            r.loc.gfid = *g;
            dht__wind(o, 1 + s, BFS_FOP_LOOKUP, s, &r, true);
        }
        return BFS_OP_WAIT;
    }
    case W_FIND:
        w->t = -1;
        for (int s = 0; s < w->n && w->t < 0; s++)
            if (s != w->c->s && dht__rc(o, 1 + s) >= 0)
                w->t = s;
        if (w->t < 0)
            return answer(w);
        op->state = W_LOCKED;
        wind_lock(w, F_WRLCK);
        return BFS_OP_WAIT;
    case W_LOCKED: {
        if (dht__rc(o, 0) < 0)
            return answer(w);
        w->locked = true;
        op->state = W_CHECKED;
        struct bfs_lookup_req r = {0};
        r.loc.gfid = *g;
        dht__wind(o, 0, BFS_FOP_LOOKUP, w->t, &r, true);
        return BFS_OP_WAIT;
    }
    case W_CHECKED: { /* 3 */
        const struct bfs_lookup_rep *lr = DHT_REP(o, 0, bfs_lookup_rep);
        if (dht__rc(o, 0) < 0 || !lr || (lr->attr.mode & 07777) == S_ISVTX) {
            op->state = W_UNLOCKED;
            wind_lock(w, F_UNLCK);
            return BFS_OP_WAIT;
        }
        if (!w->c->kept || (size_t)w->rc > w->c->len) {
            /* no copy of the bytes (cannot happen with two subvolumes or
             * more): the write is on a source the move drops; say so */
            w->final_rc = -EIO;
            op->state = W_UNLOCKED;
            wind_lock(w, F_UNLCK);
            return BFS_OP_WAIT;
        }
        w->dst = lr->attr;
        if (!(w->c->flags & O_APPEND))
            return open_dst(w);
        /* an append: did the last copy take it? The move recorded on the
         * source how much it copied (read through the fd: the source may
         * be unlinked by now) */
        op->state = W_COPIED;
        struct bfs_dict *xd = dht__xdata_internal();
        struct bfs_fgetxattr_req r = {.fd = w->c->fd, .name = DHT_COPIED_KEY, .xdata = xd};
        dht__wind(o, 0, BFS_FOP_FGETXATTR, w->c->s, &r, true);
        bfs_dict_unref(xd);
        return BFS_OP_WAIT;
    }
    case W_COPIED: {
        const struct bfs_fgetxattr_rep *gr = DHT_REP(o, 0, bfs_fgetxattr_rep);
        uint64_t copied;
        if (dht__rc(o, 0) >= 0 && gr && copied_size(gr->xattrs, &copied))
            w->carried = w->c->offset + (uint64_t)w->rc <= copied;
        return open_dst(w);
    }
    case W_OPENED: {
        int orc = dht__rc(o, 0);
        if (orc < 0) {
            /* the bytes are only on the source the move dropped: an error,
             * unless the file is gone from the destination too (unlinked
             * since its move), where nobody can find them anyway */
            if (orc != -ENOENT && orc != -ESTALE)
                w->final_rc = orc;
            op->state = W_UNLOCKED;
            wind_lock(w, F_UNLCK);
            return BFS_OP_WAIT;
        }
        dht__fd_set_subvol(o->priv->xl, w->c->fd, w->t);
        dht__cache_put(o->priv, g, DHT_KIND_FILE, w->t);
        if (w->carried) { /* its bytes are there already: answer with the file there */
            w->final_rc = w->rc;
            w->final.pre = w->dst;
            w->final.post = w->dst;
            op->state = W_UNLOCKED;
            wind_lock(w, F_UNLCK);
            return BFS_OP_WAIT;
        }
        op->state = W_WRITTEN;
        struct bfs_write_req r = {0};
        r.fd = w->c->fd;
        r.data.data = w->c->data;
        r.data.len = (size_t)w->rc; /* what landed on the source (a short write: its start) */
        r.offset = w->c->offset; /* through an O_APPEND fd: at the destination's end */
        r.flags = w->c->flags & ~(uint32_t)O_APPEND;
        dht__wind(o, 0, BFS_FOP_WRITE, w->t, &r, false);
        return BFS_OP_WAIT;
    }
    case W_WRITTEN: {
        const struct bfs_write_rep *wr = DHT_REP(o, 0, bfs_write_rep);
        w->final_rc = dht__rc(o, 0);
        if (w->final_rc >= 0 && wr) {
            struct bfs_write_rep *d = bfs_write_rep_dup(wr);
            if (d) {
                w->final = *d;
                free(d);
            }
            w->final_rc = w->rc; /* the caller asked for rc bytes: all are there now */
        } else {
            w->final_rc = w->final_rc < 0 ? w->final_rc : -EIO;
        }
        op->state = W_UNLOCKED;
        wind_lock(w, F_UNLCK);
        return BFS_OP_WAIT;
    }
    default:
        if (w->final_rc < 0) { /* the data is on a source that will be dropped */
            struct bfs_write_rep none = {0};
            bfs_unwind_write(o->caller, w->final_rc, &none);
            return BFS_OP_DONE;
        }
        return after_unlock(w);
    }
}

static bool frozen(const struct bfs_iatt *ia)
{
    return S_ISREG(ia->mode) && (ia->mode & FROZEN) == FROZEN;
}

int dht__mark_target(struct dht_priv *priv, const struct bfs_dict *xattrs)
{
    const void *v;
    size_t len;
    if (!xattrs || bfs_dict_get_bin(xattrs, DHT_MIGRATING_KEY, &v, &len) < 0)
        return DHT_MARK_NONE;
    const char *p = memchr(v, ' ', len);
    if (!p)
        return DHT_MARK_UNNAMED;
    p++;
    size_t n = len - (size_t)(p - (const char *)v);
    while (n > 0 && p[n - 1] == 0)
        n--;
    int t = dht__subvol_by_name(priv, p, n);
    return t >= 0 ? t : DHT_MARK_ELSEWHERE;
}

bool dht__follows(int fop)
{
    switch (fop) {
    case BFS_FOP_OPEN: case BFS_FOP_TRUNCATE: case BFS_FOP_FTRUNCATE: case BFS_FOP_SETATTR:
    case BFS_FOP_FSETATTR: case BFS_FOP_FALLOCATE: case BFS_FOP_DISCARD: case BFS_FOP_ZEROFILL:
    case BFS_FOP_READ: /* an old fd must not read the dropped source's copy */
        return true;
    }
    return false;
}

bool dht__frozen_reply(int fop, const void *rep, struct bfs_gfid *g)
{
    const struct bfs_iatt *ia = NULL;
    if (!rep)
        return false;
    switch (fop) {
    case BFS_FOP_OPEN: ia = &((const struct bfs_open_rep *)rep)->attr; break;
    case BFS_FOP_TRUNCATE: ia = &((const struct bfs_truncate_rep *)rep)->post; break;
    case BFS_FOP_FTRUNCATE: ia = &((const struct bfs_ftruncate_rep *)rep)->post; break;
    case BFS_FOP_SETATTR: ia = &((const struct bfs_setattr_rep *)rep)->post; break;
    case BFS_FOP_FSETATTR: ia = &((const struct bfs_fsetattr_rep *)rep)->post; break;
    case BFS_FOP_FALLOCATE: ia = &((const struct bfs_fallocate_rep *)rep)->post; break;
    case BFS_FOP_DISCARD: ia = &((const struct bfs_discard_rep *)rep)->post; break;
    case BFS_FOP_ZEROFILL: ia = &((const struct bfs_zerofill_rep *)rep)->post; break;
    case BFS_FOP_READ: ia = &((const struct bfs_read_rep *)rep)->attr; break;
    default: return false;
    }
    if (!frozen(ia) || bfs_gfid_is_null(&ia->gfid))
        return false;
    *g = ia->gfid;
    return true;
}

static void write_cbk(struct bfs_frame *frame, void *cookie, int rc, const struct bfs_write_rep *rep)
{
    struct wcookie *c = cookie;
    if (rc <= 0 || !frozen(&rep->post)) {
        bfs_unwind_write(frame, rc, rep);
        wcookie_free(c);
        return;
    }
    struct dht_priv *priv = c->xl->private;
    atomic_fetch_add(&priv->n_divert, 1);
    struct bfs_write_rep *d = c->fd->inode ? bfs_write_rep_dup(rep) : NULL;
    struct dht_wmig *w = d ? (struct dht_wmig *)dht__op_new(sizeof(*w), frame, c->xl,
                                                            1 + priv->n, wmig_step, wmig_cleanup)
                           : NULL;
    if (!w) {
        /* cannot follow: the write is on the source, which the rebalance may drop */
        struct bfs_write_rep none = {0};
        bfs_unwind_write(frame, -EIO, &none);
        wcookie_free(c);
        if (d) {
            bfs_write_rep_clear_dup(d);
            free(d);
        }
        return;
    }
    w->c = c;
    w->rc = rc;
    w->rep = *d;
    free(d);
    w->n = priv->n;
    if (w->c->flags & O_APPEND) /* where it went: the end before it */
        w->c->offset = w->rep.post.size >= (uint64_t)rc ? w->rep.post.size - (uint64_t)rc : 0;
    dht__op_start(&w->o);
}

int dht__write(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_write_req *req)
{
    int s = dht__fd_subvol(xl, req->fd);
    if (s < 0)
        return -EBADFD;
    /* a copy of the payload, to repeat it if the write lands on a frozen
     * source (top of file); one subvolume has nowhere to move a file to */
    struct dht_priv *priv = xl->private;
    bool keep = priv->n >= 2;
    size_t len = keep ? req->data.len : 0;
    struct wcookie *c = malloc(sizeof(*c) + len);
    if (!c)
        return -ENOMEM;
    c->xl = xl;
    c->fd = bfs_fd_ref(req->fd);
    c->offset = req->offset;
    c->flags = (uint32_t)req->fd->flags;
    c->s = s;
    c->kept = keep;
    c->len = len;
    if (len)
        memcpy(c->data, req->data.data, len);
    int rc = bfs_wind_write(frame, xl->children[s], write_cbk, c, req);
    if (rc < 0)
        wcookie_free(c);
    return rc;
}

/* ---- reads ----
 *
 * A read through an old fd must not read the dropped source's copy either
 * (rebalance.md), but a read is the hot path: it is wound with a small
 * cookie of its own, its reply goes up as it came (no op, no copy of the
 * data), and only a reply showing the frozen bits is thrown away and the
 * read started again through the inode router (dht-inode.c), which follows
 * the file to its destination and moves the fd. */

struct rcookie {
    struct bfs_xl *xl;
    struct bfs_read_req req; /* fd and xdata ref'd */
};

static void rcookie_free(struct rcookie *c)
{
    bfs_fd_unref(c->req.fd);
    if (c->req.xdata)
        bfs_dict_unref(c->req.xdata);
    free(c);
}

static void read_cbk(struct bfs_frame *frame, void *cookie, int rc, const struct bfs_read_rep *rep)
{
    struct rcookie *c = cookie;
    struct dht_priv *priv = c->xl->private;
    if (rc < 0 || priv->n < 2 || !frozen(&rep->attr)) {
        bfs_unwind_read(frame, rc, rep);
        rcookie_free(c);
        return;
    }
    int r = dht__generic(frame, c->xl, BFS_FOP_READ, &c->req); /* follows, then answers */
    if (r < 0) {
        struct bfs_read_rep none = {0};
        bfs_unwind_read(frame, r, &none);
    }
    rcookie_free(c);
}

int dht__read(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_read_req *req)
{
    int s = dht__fd_subvol(xl, req->fd);
    if (s < 0)
        return -EBADFD;
    struct rcookie *c = malloc(sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->xl = xl;
    c->req = *req;
    bfs_fd_ref(req->fd);
    if (req->xdata)
        bfs_dict_ref(req->xdata);
    int rc = bfs_wind_read(frame, xl->children[s], read_cbk, c, req);
    if (rc < 0)
        rcookie_free(c);
    return rc;
}
