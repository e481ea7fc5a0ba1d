/*
 * disperse-meta.c — metadata and entry changes as one-shot transactions of
 * the shared library: the caller's request goes as is to every child of
 * the set (metadata and names are full copies on every child).
 *
 *   metadata  setattr, fsetattr, setxattr, fsetxattr, removexattr,
 *             fremovexattr: inodelk in the metadata domain, versions on the
 *             inode (the check leaves stale children out);
 *   entry     create, mknod, mkdir, symlink, link, unlink, rmdir, rename:
 *             entrylk on the name(s) in the parent(s), versions on the
 *             parent(s). New entries carry gfid-req (one GFID everywhere);
 *             create opens the new file O_RDWR without O_APPEND/O_TRUNC on
 *             the children (fragments are read and placed by us), and the
 *             new inode starts with the children that made it as good.
 * Success needs the quorum (k by default) of children; below it EIO.
 *
 * Lifetime: struct ec_mtxn from the fop call until the transaction op is
 * over (after post-op and unlock, behind the answer).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "disperse.h"

struct ec_mtxn {
    struct bfs_txn t; /* first */
    struct ec_priv *p;
    int fop;
    void *req;                /* our copy */
    struct bfs_inode *inode;  /* ref: the inode changed, or the parent */
    struct bfs_fd *fd;        /* fd-based fops */
    int chosen;
    uint64_t nl_owner;        /* create: owner of the new file's data lock (0: not asked) */
    bool nl_asked;            /* nl_owner chosen */
    bool eager;               /* under the parent's shared entry lock (a window) */
    struct bfs_frame *caller; /* rmdir: answered by rmdir_go after a window's release */
};

static void mtxn_free(struct ec_mtxn *m)
{
    bfs_fop_info[m->fop].req_clear_dup(m->req);
    free(m->req);
    if (m->inode)
        bfs_inode_unref(m->inode);
    free(m);
}

static struct ec_mtxn *mtxn_new(struct bfs_xl *xl, int fop, const void *req)
{
    const struct bfs_fop_info *fi = &bfs_fop_info[fop];
    struct ec_mtxn *m = calloc(1, sizeof(*m));
    void *copy = calloc(1, fi->req_size);
    if (!m || !copy || fi->req_copy_into(copy, req) < 0) {
        free(copy);
        free(m);
        return NULL;
    }
    m->p = ec_priv(xl);
    m->fop = fop;
    m->req = copy;
    m->chosen = -1;
    return m;
}

static uint32_t mt_usable(struct bfs_txn *t, uint32_t set)
{
    struct ec_mtxn *m = (struct ec_mtxn *)t;
    return m->fd ? set & ec_fd_opened(m->p->xl, m->fd) : set;
}

/* An entry change whose pre-op rides in it (lib/txn-piggy.c) carries it
 * to each child; a create asks for its new file's data lock as well, so
 * that the first write joins a window (no inodelk, no pre-op of its own),
 * also under the parent's entry window (pre-op'd when it was acquired). */
static uint32_t mt_wind(struct bfs_txn *t, uint32_t run)
{
    struct ec_mtxn *m = (struct ec_mtxn *)t;
    struct ec_priv *p = m->p;
    if ((t->piggy || m->eager) && m->fop == BFS_FOP_CREATE && !m->nl_asked) {
        m->nl_owner = bfs_txn_newlock_owner(&p->cl, m);
        m->nl_asked = true;
    }
    bfs_op_expect(&t->op, bfs_mask_count(run));
    for (int i = 0; i < p->n; i++)
        if (bfs_mask_has(run, i) && !bfs_txn_wind_entry(t, i, m->fop, m->req, m->nl_owner))
            bfs_op_wind(&t->op, i, m->fop, p->xl->children[i], m->req);
    return 0;
}

/* The new file's data lock, granted by the bricks with the create (ok: the
 * create is acknowledged): made the inode's eager window, as if a write had
 * just acquired it with the file's size (0) and good children (those that
 * made it) read under it; else what the bricks granted is released. */
static void newlock_install(struct ec_mtxn *m, const struct bfs_iatt *attr, bool ok)
{
    uint32_t held = m->nl_owner ? bfs_txn_newlock_acked(&m->t) : 0;
    if (!held)
        return;
    struct ec_priv *p = m->p;
    const struct bfs_create_rep *cr = m->t.op.replies[bfs_mask_first(held)].rep;
    struct bfs_gfid g = attr ? attr->gfid : cr->attr.gfid;
    struct bfs_inode *inode = ec_inode_of_gfid(p->xl, &g, S_IFREG);
    struct ec_inode *c = ok ? ec_ictx(p->xl, inode) : NULL;
    struct bfs_txn_target tg = {.nsets = 1, .nobj = 1, .inode = inode,
                                .fd = ((struct bfs_create_req *)m->req)->fd,
                                .fd_open = m->t.ok};
    tg.lk[0].kind = BFS_LKSET_INODE;
    tg.lk[0].gfid = g;
    tg.obj[0] = g;
    bfs_txn_lock_install(&p->cl, c ? &c->dlock : NULL, &tg, m->nl_owner, held,
                         ok ? m->t.ok : 0);
    if (c) {
        pthread_mutex_lock(&c->dlock.m);
        uint64_t win = c->dlock.state == BFS_TXL_HELD ? c->dlock.window : 0;
        pthread_mutex_unlock(&c->dlock.m);
        /* size and good children known under this window. Set here, not
         * only by remember_new: the inode that got them there may have
         * been freed with its context since (nobody held it yet), and a
         * context made afresh for the lock would else say "no good data
         * child" for as long as the window lasts. */
        struct ec_view v = {.child = -1, .size = 0};
        for (int t = 0; t < EC_NTYPES; t++)
            v.good[t] = m->t.ok;
        if (win)
            ec_ictx_window(p, c, S_IFREG, &v, win);
    }
    if (inode)
        bfs_inode_unref(inode);
}

/* The attributes of a new entry in the reply of child i (NULL if none). */
static const struct bfs_iatt *new_attr(const struct ec_mtxn *m, int i)
{
    const struct bfs_op_reply *r = i >= 0 ? &m->t.op.replies[i] : NULL;
    if (!r || !r->valid || r->rc < 0 || !r->rep)
        return NULL;
    switch (m->fop) {
    case BFS_FOP_CREATE: return &((const struct bfs_create_rep *)r->rep)->attr;
    case BFS_FOP_MKNOD: return &((const struct bfs_mknod_rep *)r->rep)->attr;
    case BFS_FOP_MKDIR: return &((const struct bfs_mkdir_rep *)r->rep)->attr;
    case BFS_FOP_SYMLINK: return &((const struct bfs_symlink_rep *)r->rep)->attr;
    }
    return NULL;
}

/* A new inode: the children that made it are its good ones, size 0. */
static void remember_new(struct ec_mtxn *m)
{
    const struct bfs_iatt *attr = new_attr(m, m->chosen);
    if (!attr)
        return;
    struct ec_priv *p = m->p;
    struct bfs_inode *inode = ec_inode_of_gfid(p->xl, &attr->gfid, attr->mode & S_IFMT);
    struct ec_inode *c = ec_ictx(p->xl, inode);
    if (c) {
        struct ec_view v = {.child = m->chosen, .size = 0};
        for (int t = 0; t < EC_NTYPES; t++)
            v.good[t] = m->t.ok;
        ec_ictx_update(p, c, attr->mode, &v, ec_dseq(p));
    }
    if (inode)
        bfs_inode_unref(inode);
    if (m->fop == BFS_FOP_CREATE) {
        const struct bfs_create_req *q = m->req;
        ec_fd_set_opened(p->xl, q->fd, m->t.ok, &attr->gfid, q->fd->flags);
    }
}

static int mt_combine(struct bfs_txn *t)
{
    struct ec_mtxn *m = (struct ec_mtxn *)t;
    struct ec_priv *p = m->p;
    int err = 0;
    m->chosen = -1;
    for (int i = 0; i < p->n; i++) {
        const struct bfs_op_reply *r = &t->op.replies[i];
        if (!r->valid)
            continue;
        if (r->rc >= 0 && bfs_mask_has(t->ok, i) && m->chosen < 0)
            m->chosen = i;
        if (r->rc < 0 && (!err || err == -ENOTCONN))
            err = r->rc;
    }
    __atomic_add_fetch(&p->n_txn, 1, __ATOMIC_RELAXED);
    ec_ictx_failed(ec_ictx_peek(p->xl, m->inode), t->type, t->failed);
    if (m->chosen < 0) {
        newlock_install(m, NULL, false);
        return err ? err : -EIO;
    }
    if (bfs_mask_count(t->ok) < ec_quorum(p)) {
        XL_WARN(p->xl, "a %s change reached %d child(ren), %d needed: EIO",
                t->type == EC_ENTRY ? "name" : "metadata", bfs_mask_count(t->ok),
                ec_quorum(p));
        newlock_install(m, NULL, false);
        return -EIO;
    }
    if (t->type == EC_ENTRY)
        remember_new(m);
    if (m->fop == BFS_FOP_CREATE)
        newlock_install(m, new_attr(m, m->chosen), true);
    return t->op.replies[m->chosen].rc;
}

static void mt_answer(struct bfs_txn *t, int rc)
{
    struct ec_mtxn *m = (struct ec_mtxn *)t;
    if (rc < 0 && rc != -EEXIST && rc != -ENOENT && rc != -ENOTEMPTY && rc != -ENODATA)
        XL_WARN(m->p->xl, "%s failed: %s (ran on %#x, ok %#x, failed %#x)",
                bfs_fop_info[m->fop].name, strerror(-rc), t->run, t->ok, t->failed);
    if (rc == -EROFS)
        rc = -EIO;
    const void *rep = rc >= 0 && m->chosen >= 0 ? t->op.replies[m->chosen].rep : NULL;
    if (rc >= 0 && rep && m->fop == BFS_FOP_FSETATTR) {
        struct bfs_fsetattr_rep r = *(const struct bfs_fsetattr_rep *)rep;
        uint64_t size = 0;
        struct ec_inode *c = ec_ictx_peek(m->p->xl, m->inode);
        if (c)
            (void)ec_ictx_good(c, EC_DATA, NULL, &size);
        ec_fix_iatt(m->p, &r.pre, size);
        ec_fix_iatt(m->p, &r.post, size);
        bfs_unwind_fsetattr(t->caller, rc, &r);
        return;
    }
    if (rc >= 0 && rep && m->fop == BFS_FOP_SETATTR) {
        struct bfs_setattr_rep r = *(const struct bfs_setattr_rep *)rep;
        uint64_t size = 0;
        struct ec_inode *c = ec_ictx_peek(m->p->xl, m->inode);
        if (c)
            (void)ec_ictx_good(c, EC_DATA, NULL, &size);
        ec_fix_iatt(m->p, &r.pre, size);
        ec_fix_iatt(m->p, &r.post, size);
        bfs_unwind_setattr(t->caller, rc, &r);
        return;
    }
    bfs_unwind_any(m->fop, t->caller, rc, rep);
}

static void mt_destroy(struct bfs_txn *t)
{
    mtxn_free((struct ec_mtxn *)t);
}

static const struct bfs_txn_fop ec_meta_fop = {.usable = mt_usable, .wind = mt_wind,
                                               .combine = mt_combine, .answer = mt_answer,
                                               .destroy = mt_destroy};

/* ---- metadata ---- */

static int meta_txn(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req,
                    const struct bfs_loc *loc, struct bfs_fd *fd)
{
    struct ec_mtxn *m = mtxn_new(xl, fop, req);
    if (!m)
        return -ENOMEM;
    m->fd = fd;
    m->inode = fd ? ec_inode_of_fd(xl, fd) : ec_inode_of_loc(xl, loc);
    if (!m->inode || !ec_ictx(xl, m->inode)) {
        int rc = m->inode ? -ENOMEM : -EINVAL;
        mtxn_free(m);
        return rc;
    }
    struct bfs_txn_target tg = {.nsets = 1, .nobj = 1, .inode = m->inode, .fd = fd};
    tg.lk[0].kind = BFS_LKSET_INODE;
    tg.lk[0].gfid = m->inode->gfid;
    tg.obj[0] = m->inode->gfid;
    tg.fd_open = fd ? ec_fd_opened(xl, fd) : 0;
    if (bfs_txn_init(&m->t, &m->p->cl, &ec_meta_fop, frame, BFS_TXN_METADATA, NULL, &tg) < 0) {
        mtxn_free(m);
        return -ENOMEM;
    }
    bfs_txn_start(&m->t);
    return 0;
}

int ec_setattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_setattr_req *req)
{
    return meta_txn(f, xl, BFS_FOP_SETATTR, req, &req->loc, NULL);
}

int ec_fsetattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fsetattr_req *req)
{
    return meta_txn(f, xl, BFS_FOP_FSETATTR, req, NULL, req->fd);
}

int ec_setxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_setxattr_req *req)
{
    const void *v;
    size_t len;
    /* a split-brain resolution (brickfs-shd --resolve): a disperse set has
     * none (versions always name a source); never a real xattr */
    if (req->xattrs && bfs_dict_get_raw(req->xattrs, EC_VKEY_PREFIX "resolve", NULL, &v, &len) == 0)
        return -EALREADY;
    return meta_txn(f, xl, BFS_FOP_SETXATTR, req, &req->loc, NULL);
}

int ec_fsetxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fsetxattr_req *req)
{
    return meta_txn(f, xl, BFS_FOP_FSETXATTR, req, NULL, req->fd);
}

int ec_removexattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_removexattr_req *req)
{
    return meta_txn(f, xl, BFS_FOP_REMOVEXATTR, req, &req->loc, NULL);
}

int ec_fremovexattr(struct bfs_frame *f, struct bfs_xl *xl,
                    const struct bfs_fremovexattr_req *req)
{
    return meta_txn(f, xl, BFS_FOP_FREMOVEXATTR, req, NULL, req->fd);
}

/* ---- entries ---- */

static int with_gfid_req(struct bfs_dict **xdata)
{
    const void *v;
    size_t len;
    if (*xdata && bfs_dict_get_bin(*xdata, EC_GFID_REQ, &v, &len) == 0 && len == 16)
        return 0;
    struct bfs_dict *d = *xdata ? bfs_dict_copy(*xdata) : bfs_dict_new();
    struct bfs_gfid g;
    bfs_gfid_generate_entry(&g);
    if (!d || bfs_dict_set_bin(d, EC_GFID_REQ, g.b, sizeof(g.b)) < 0) {
        bfs_dict_unref(d);
        return -ENOMEM;
    }
    bfs_dict_unref(*xdata);
    *xdata = d;
    return 0;
}

/* The eager entry lock of directory `parent` (disperse.other-eager-lock
 * with cluster.eager-lock and a post-op delay), else NULL: one-shot.
 *
 * An entry change of one parent takes the whole directory's entrylk and
 * the parent's pre-op once, then the next changes in that directory join
 * the window (only their fop crosses to the bricks); the window ends like
 * a data window (lib/txn.h): cluster.post-op-delay-ms after the last
 * change, at once when a brick says another owner waits for the directory
 * (a contention notice: another client's entry change, heal, or a rename
 * of ours, which keeps per-name locks), and after TXN_WINDOW_MAX_MS at
 * most. Changes of different names in a window run side by side (their
 * ranges are a hash of the name; one name's changes queue). */
static struct bfs_txn_lock *entry_window(struct ec_priv *p, struct bfs_inode *parent)
{
    if (!parent ||
        !bfs_txn_entry_window_on(&p->cl, __atomic_load_n(&p->eager_entry, __ATOMIC_RELAXED)))
        return NULL;
    struct ec_inode *c = ec_ictx(p->xl, parent);
    return c ? &c->elock : NULL;
}

static int entry_txn(struct ec_mtxn *m, struct bfs_frame *frame, const struct bfs_loc *l1,
                     const struct bfs_loc *l2)
{
    struct ec_priv *p = m->p;
    if (!l1->name || bfs_gfid_is_null(&l1->pargfid) ||
        (l2 && (!l2->name || bfs_gfid_is_null(&l2->pargfid)))) {
        mtxn_free(m);
        return -EINVAL;
    }
    m->inode = ec_inode_of_gfid(p->xl, &l1->pargfid, S_IFDIR);
    struct bfs_txn_lock *win = l2 ? NULL : entry_window(p, m->inode);
    int rc;
    if (win) {
        m->eager = true;
        rc = bfs_txn_init_entry_window(&m->t, &p->cl, &ec_meta_fop, frame, win, m->inode, l1);
    } else {
        struct bfs_txn_target tg;
        bfs_txn_entry_target(&tg, l1, l2);
        rc = bfs_txn_init(&m->t, &p->cl, &ec_meta_fop, frame, BFS_TXN_ENTRY, NULL, &tg);
    }
    if (rc < 0) {
        mtxn_free(m);
        return -ENOMEM;
    }
    bfs_txn_start(&m->t);
    return 0;
}

int ec_create(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_create_req *req)
{
    struct ec_mtxn *m = mtxn_new(xl, BFS_FOP_CREATE, req);
    if (!m)
        return -ENOMEM;
    struct bfs_create_req *q = m->req;
    /* the children read fragments for RMW and place them themselves */
    q->flags = (q->flags & ~(uint32_t)(O_ACCMODE | O_APPEND | O_TRUNC)) | O_RDWR;
    if (with_gfid_req(&q->xdata) < 0) {
        mtxn_free(m);
        return -ENOMEM;
    }
    return entry_txn(m, f, &q->loc, NULL);
}

#define ENTRY_NEW(fop, FOP)                                                                 \
    int ec_##fop(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_##fop##_req *req)  \
    {                                                                                       \
        struct ec_mtxn *m = mtxn_new(xl, FOP, req);                                         \
        if (!m)                                                                             \
            return -ENOMEM;                                                                 \
        struct bfs_##fop##_req *q = m->req;                                                 \
        if (with_gfid_req(&q->xdata) < 0) {                                                 \
            mtxn_free(m);                                                                   \
            return -ENOMEM;                                                                 \
        }                                                                                   \
        return entry_txn(m, f, &q->loc, NULL);                                              \
    }

ENTRY_NEW(mknod, BFS_FOP_MKNOD)
ENTRY_NEW(mkdir, BFS_FOP_MKDIR)
ENTRY_NEW(symlink, BFS_FOP_SYMLINK)

int ec_link(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_link_req *req)
{
    struct ec_mtxn *m = mtxn_new(xl, BFS_FOP_LINK, req);
    if (!m)
        return -ENOMEM;
    return entry_txn(m, f, &((struct bfs_link_req *)m->req)->newloc, NULL);
}

int ec_unlink(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_unlink_req *req)
{
    struct ec_mtxn *m = mtxn_new(xl, BFS_FOP_UNLINK, req);
    if (!m)
        return -ENOMEM;
    return entry_txn(m, f, &((struct bfs_unlink_req *)m->req)->loc, NULL);
}

static void rmdir_go(void *arg)
{
    struct ec_mtxn *m = arg;
    struct bfs_frame *f = m->caller;
    int rc = entry_txn(m, f, &((struct bfs_rmdir_req *)m->req)->loc, NULL);
    if (rc < 0)
        bfs_unwind_rmdir(f, rc, NULL);
}

/* A directory we keep an entry window on is removed once that window is
 * over (its post-op would find the directory gone). */
int ec_rmdir(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_rmdir_req *req)
{
    struct ec_mtxn *m = mtxn_new(xl, BFS_FOP_RMDIR, req);
    if (!m)
        return -ENOMEM;
    struct bfs_rmdir_req *q = m->req;
    struct bfs_inode *dir = ec_inode_of_loc(xl, &q->loc);
    struct ec_inode *c = ec_ictx_peek(xl, dir);
    int rc = 0;
    m->caller = f;
    if (c)
        rc = bfs_txn_lock_flush(&c->elock, rmdir_go, m);
    if (dir)
        bfs_inode_unref(dir);
    if (rc == 1)
        return 0; /* rmdir_go runs once the window is released */
    if (rc < 0) {
        mtxn_free(m);
        return rc;
    }
    return entry_txn(m, f, &q->loc, NULL);
}

int ec_rename(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_rename_req *req)
{
    struct ec_mtxn *m = mtxn_new(xl, BFS_FOP_RENAME, req);
    if (!m)
        return -ENOMEM;
    struct bfs_rename_req *q = m->req;
    return entry_txn(m, f, &q->oldloc, &q->newloc);
}
