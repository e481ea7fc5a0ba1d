/*
 * replicate-entry.c — changes of names as transactions: create, mknod,
 * mkdir, symlink, link, unlink, rmdir, rename.
 *
 * Each keeps its changelog (the entry counter) on the parent(s) and
 * answers as soon as the change is made and blame is recorded. Under the
 * parent's entry window (cluster.entry-eager-lock, the default; see
 * entry_window below and lib/txn-entry.c) every change but rename joins
 * the directory's shared entry lock: lock, pre-op, post-op and unlock are
 * paid once per run of changes. Otherwise, and for rename, it is a
 * one-shot transaction (lib/txn.c) that locks the name(s) with entrylk in
 * the parent (rename: both names, in a global order so two renames cannot
 * deadlock) and post-ops and unlocks behind the answer. rmdir first ends
 * the window kept on the directory it removes. New
 * entries carry gfid-req so that every copy gets the same GFID; the new
 * inode's context starts out with the children that made it as its good
 * copies.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "replicate.h"
#include "xlators/lib/txn-wire.h"

/* Gives a new entry's request a GFID (the caller's, or a fresh one). */
static int with_gfid_req(struct bfs_dict **xdata)
{
    const void *v;
    size_t len;
    if (bfs_dict_get_bin(*xdata, AFR_GFID_REQ, &v, &len) == 0 && len == 16)
        return 0;
    struct bfs_dict *d = *xdata ? bfs_dict_copy(*xdata) : bfs_dict_new();
    struct bfs_gfid g;
    bfs_gfid_generate_entry(&g);
    if (!d || bfs_dict_set_bin(d, AFR_GFID_REQ, g.b, sizeof(g.b)) < 0) {
        bfs_dict_unref(d);
        return -ENOMEM;
    }
    bfs_dict_unref(*xdata);
    *xdata = d;
    return 0;
}

/* The attributes of a new entry in the reply of child i (NULL if none). */
static const struct bfs_iatt *new_attr(const struct afr_txn *a, int i)
{
    const struct bfs_op_reply *r = &a->t.op.replies[i];
    if (i < 0 || !r->valid || r->rc < 0 || !r->rep)
        return NULL;
    switch (a->fop) {
    case BFS_FOP_CREATE: return &((const struct bfs_create_rep *)r->rep)->attr;
    case BFS_FOP_MKNOD: return &((const struct bfs_mknod_rep *)r->rep)->attr;
    case BFS_FOP_MKDIR: return &((const struct bfs_mkdir_rep *)r->rep)->attr;
    case BFS_FOP_SYMLINK: return &((const struct bfs_symlink_rep *)r->rep)->attr;
    }
    return NULL;
}

/* The new inode starts with the copies that made it as its good ones. */
static void remember_new(struct afr_txn *a)
{
    const struct bfs_iatt *attr = new_attr(a, a->chosen);
    if (!attr)
        return;
    struct afr_priv *p = a->p;
    struct bfs_inode *inode = afr_inode_of_gfid(p->xl, &attr->gfid, attr->mode & S_IFMT);
    struct afr_inode *c = afr_ictx(p->xl, inode);
    if (c) {
        struct afr_lookup_out o = {.child = a->chosen};
        uint32_t types = afr_types_of(attr->mode);
        for (int t = 0; t < AFR_NTYPES; t++)
            if (types & BFS_BIT(t))
                o.readable[t] = t == AFR_DATA ? afr_data_mask(p, a->t.ok) : a->t.ok;
        afr_ictx_update(p, c, attr->mode, &o);
    }
    if (inode)
        bfs_inode_unref(inode);
}

bool afr_newlock_wanted(struct afr_txn *a)
{
    if (!a->newlock) {
        a->nl_owner = bfs_txn_newlock_owner(&a->p->cl, a);
        a->newlock = a->nl_owner ? 1 : -1;
    }
    return a->newlock > 0;
}

/* The created file's data lock, taken with the create: the first write
 * joins it (no inodelk, no pre-op of its own). A create that is not
 * acknowledged (rc < 0) gives back what its bricks granted. */
static void newlock_install(struct afr_txn *a, int rc, const struct bfs_iatt *attr)
{
    uint32_t held = a->newlock > 0 ? bfs_txn_newlock_acked(&a->t) : 0;
    if (!held)
        return;
    struct afr_priv *p = a->p;
    const struct bfs_create_rep *cr = a->t.op.replies[bfs_mask_first(held)].rep;
    struct bfs_gfid g = attr ? attr->gfid : cr->attr.gfid;
    struct bfs_inode *inode = afr_inode_of_gfid(p->xl, &g, S_IFREG);
    struct afr_inode *c = rc >= 0 ? afr_ictx(p->xl, inode) : NULL;
    struct bfs_txn_target tg = {.nsets = 1, .nobj = 1, .inode = inode,
                                .fd = ((struct bfs_create_req *)a->req)->fd,
                                .fd_open = a->t.ok};
    tg.lk[0].kind = BFS_LKSET_INODE;
    tg.lk[0].gfid = g;
    tg.obj[0] = g;
    bfs_txn_lock_install(&p->cl, c ? &c->dlock : NULL, &tg, a->nl_owner, held, a->t.ok);
    if (inode)
        bfs_inode_unref(inode);
}

static void entry_done(struct afr_txn *a, int rc)
{
    uint64_t v;
    /* a change that failed on every copy (EEXIST, ENOENT: nothing changed
     * anywhere) leaves every copy as readable as it was; narrowing to none
     * made the directory's listing fail (ENOTCONN) until its next lookup */
    uint32_t failed = a->t.ok ? a->t.failed : 0;
    if (a->inode && bfs_inode_ctx_get(a->inode, a->p->xl, &v) == 0 && v)
        afr_ictx_failed((struct afr_inode *)(uintptr_t)v, AFR_ENTRY, failed);
    if (a->fop == BFS_FOP_CREATE && rc < 0)
        newlock_install(a, rc, NULL);
    if (rc < 0)
        return;
    remember_new(a);
    const struct bfs_iatt *attr = new_attr(a, a->chosen);
    if (a->fop == BFS_FOP_CREATE) {
        afr_fd_set_opened(a->p->xl, ((struct bfs_create_req *)a->req)->fd, a->t.ok,
                          attr ? &attr->gfid : NULL, ((struct bfs_create_req *)a->req)->flags);
        newlock_install(a, rc, attr);
    }
}

/* The entry window of directory `parent` (cluster.entry-eager-lock, with
 * cluster.eager-lock and a post-op delay), else NULL: one-shot locks.
 *
 * The first change of a name in a directory takes the whole directory's
 * entrylk and the parent's pre-op; the next ones join (only their fop
 * crosses to the bricks: a create, an unlink or a mkdir is one call per
 * brick); post-op and unlock come once, cluster.post-op-delay-ms after
 * the last change, at once when a brick says another owner waits for the
 * directory (a contention notice: another client's change, a heal, a
 * rename of ours), or after 1 s at most (lib/txn-entry.c). What makes an
 * acknowledged change survive a brick's loss is unchanged: it is answered
 * once made on the children of the window's set, and a child that fails
 * it is blamed on the others before the answer (lib/txn.c). */
static struct bfs_txn_lock *entry_window(struct afr_priv *p, struct bfs_inode *parent)
{
    if (!parent ||
        !bfs_txn_entry_window_on(&p->cl, __atomic_load_n(&p->eager_entry, __ATOMIC_RELAXED)))
        return NULL;
    struct afr_inode *c = afr_ictx(p->xl, parent);
    return c ? &c->elock : NULL;
}

/* a->req is set; l1 (and l2 for rename) point into it. */
static int entry_txn(struct afr_txn *a, struct bfs_frame *frame, const struct bfs_loc *l1,
                     const struct bfs_loc *l2)
{
    struct afr_priv *p = a->p;
    if (!l1->name || bfs_gfid_is_null(&l1->pargfid) ||
        (l2 && (!l2->name || bfs_gfid_is_null(&l2->pargfid)))) {
        afr_txn_free(a);
        return -EINVAL; /* names are changed by (parent GFID, name) */
    }
    a->inode = afr_inode_of_gfid(p->xl, &l1->pargfid, S_IFDIR);
    a->done = entry_done;
    /* rename keeps per-name locks (two parents, two names) */
    struct bfs_txn_lock *win = l2 ? NULL : entry_window(p, a->inode);
    int rc;
    if (win) {
        a->eager = true;
        rc = bfs_txn_init_entry_window(&a->t, &p->cl, &afr_txn_fop, frame, win, a->inode, l1);
    } else {
        struct bfs_txn_target tg;
        bfs_txn_entry_target(&tg, l1, l2);
        rc = bfs_txn_init(&a->t, &p->cl, &afr_txn_fop, frame, BFS_TXN_ENTRY, NULL, &tg);
    }
    if (rc < 0) {
        afr_txn_free(a);
        return -ENOMEM;
    }
    bfs_txn_start(&a->t);
    return 0;
}

#define ENTRY_NEW(fop, FOP)                                                                  \
    int afr_##fop(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_##fop##_req *req)  \
    {                                                                                        \
        struct afr_txn *a = afr_txn_new(xl, FOP, req, sizeof(*a));                           \
        if (!a)                                                                              \
            return -ENOMEM;                                                                  \
        struct bfs_##fop##_req *q = a->req;                                                  \
        if (with_gfid_req(&q->xdata) < 0) {                                                  \
            afr_txn_free(a);                                                                 \
            return -ENOMEM;                                                                  \
        }                                                                                    \
        return entry_txn(a, f, &q->loc, NULL);                                               \
    }

ENTRY_NEW(create, BFS_FOP_CREATE)
ENTRY_NEW(mknod, BFS_FOP_MKNOD)
ENTRY_NEW(mkdir, BFS_FOP_MKDIR)
ENTRY_NEW(symlink, BFS_FOP_SYMLINK)

int afr_link(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_link_req *req)
{
    struct afr_txn *a = afr_txn_new(xl, BFS_FOP_LINK, req, sizeof(*a));
    if (!a)
        return -ENOMEM;
    struct bfs_link_req *q = a->req;
    return entry_txn(a, f, &q->newloc, NULL);
}

int afr_unlink(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_unlink_req *req)
{
    struct afr_txn *a = afr_txn_new(xl, BFS_FOP_UNLINK, req, sizeof(*a));
    if (!a)
        return -ENOMEM;
    struct bfs_unlink_req *q = a->req;
    return entry_txn(a, f, &q->loc, NULL);
}

struct afr_rmdir_wait {
    struct afr_txn *a;
    struct bfs_frame *frame;
};

static void rmdir_go(void *arg)
{
    struct afr_rmdir_wait *w = arg;
    struct bfs_frame *f = w->frame;
    struct afr_txn *a = w->a;
    free(w);
    int rc = entry_txn(a, f, &((struct bfs_rmdir_req *)a->req)->loc, NULL);
    if (rc < 0)
        bfs_unwind_rmdir(f, rc, NULL);
}

/* A directory we keep an entry window on is removed once that window is
 * over (its post-op and unlock would find the directory gone). */
int afr_rmdir(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_rmdir_req *req)
{
    struct afr_txn *a = afr_txn_new(xl, BFS_FOP_RMDIR, req, sizeof(*a));
    if (!a)
        return -ENOMEM;
    struct bfs_rmdir_req *q = a->req;
    struct bfs_inode *dir = afr_inode_of_loc(xl, &q->loc);
    uint64_t v = 0;
    int rc = 0;
    if (dir && bfs_inode_ctx_get(dir, xl, &v) == 0 && v) {
        struct afr_rmdir_wait *w = malloc(sizeof(*w));
        rc = w ? 0 : -ENOMEM;
        if (w) {
            *w = (struct afr_rmdir_wait){.a = a, .frame = f};
            rc = bfs_txn_lock_flush(&((struct afr_inode *)(uintptr_t)v)->elock, rmdir_go, w);
            if (rc != 1)
                free(w);
        }
    }
    if (dir)
        bfs_inode_unref(dir);
    if (rc == 1)
        return 0; /* rmdir_go runs once the window is released */
    if (rc < 0) {
        afr_txn_free(a);
        return rc;
    }
    return entry_txn(a, f, &q->loc, NULL);
}

int afr_rename(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_rename_req *req)
{
    struct afr_txn *a = afr_txn_new(xl, BFS_FOP_RENAME, req, sizeof(*a));
    if (!a)
        return -ENOMEM;
    struct bfs_rename_req *q = a->req;
    return entry_txn(a, f, &q->oldloc, &q->newloc);
}
