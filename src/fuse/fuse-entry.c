/*
 * fuse-entry.c — names: lookup, forget, mknod, mkdir, symlink, link,
 * unlink, rmdir, rename, readlink.
 *
 * Every location goes down as (parent GFID, name) or as the inode's own
 * GFID, with the inode pointers as hints; the brick resolves it without
 * ever seeing a path. A reply that gives the kernel a new name counts one
 * kernel lookup on its inode (bfs_fuse_reply_entry). Names a brick cannot
 * store are refused here, before any call: ENAMETOOLONG above 255 bytes.
 * The brick's internal folder ".brickfs" does not exist as far as a mount
 * can tell: looking it up finds nothing and creating it is refused.
 *
 * A request takes the inodes it names from its generation's table
 * (bfs_fuse_loc_ino, bfs_fuse_loc_name) and holds them until it ends. New
 * entries get a GFID chosen here (xdata gfid-req), as GlusterFS does.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "fuse/fuse-bridge.h"

/* For requests that create name in parent: 0, or -errno to reply. */
static int check_new_name(fuse_ino_t parent, const char *name)
{
    int rc = bfs_fuse_name_check(name);
    if (rc == 0 && bfs_fuse_hidden_entry(parent, name))
        rc = -EPERM;
    return rc;
}

/* For requests on an existing name. */
static int check_old_name(fuse_ino_t parent, const char *name)
{
    int rc = bfs_fuse_name_check(name);
    if (rc == 0 && bfs_fuse_hidden_entry(parent, name))
        rc = -ENOENT;
    return rc;
}

/* Before the reply: the kernel's next request may be the GETATTR of the
 * parent that this answers (bfs_fuse_node_dir_attr_put). c->ino is the
 * parent. */
static void parent_changed(struct bfs_fuse_call *c, int rc, const struct bfs_iatt *post)
{
    if (rc >= 0)
        bfs_fuse_node_dir_attr_put(c->fu, c->ino, post);
}

/* The location of a new entry (parent, name) and the xdata that asks for
 * the GFID chosen here (the caller unrefs it): 0, or -ENOMEM after ending
 * c. */
static int new_entry(struct bfs_fuse_call *c, fuse_ino_t parent, const char *name,
                     struct bfs_loc *loc, struct bfs_dict **xdata)
{
    struct bfs_gfid gfid;
    if (bfs_fuse_loc_name(c, loc, parent, name) < 0 || !(*xdata = bfs_fuse_gfid_req(&gfid))) {
        bfs_fuse_call_fail(c, -ENOMEM);
        return -ENOMEM;
    }
    return 0;
}

static void entry_done(struct bfs_fuse_call *c, int rc, const struct bfs_iatt *attr)
{
    if (rc < 0)
        fuse_reply_err(c->req, -rc);
    else
        bfs_fuse_reply_entry(c, attr);
    bfs_fuse_call_done(c);
}

/* ---- lookup and forget ---- */

static void lookup_cbk(struct bfs_frame *frame, void *cookie, int rc,
                       const struct bfs_lookup_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    double neg = c->fu->opts->negative_timeout;
    if (rc == -ENOENT && neg > 0) {
        /* nodeid 0: the kernel caches "no such name" for entry_timeout */
        struct fuse_entry_param e;
        memset(&e, 0, sizeof(e));
        e.entry_timeout = neg;
        fuse_reply_entry(c->req, &e);
        bfs_fuse_call_done(c);
        return;
    }
    entry_done(c, rc, &rep->attr);
}

void bfs_fuse_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    int rc = check_old_name(parent, name);
    struct bfs_fuse_call *c = bfs_fuse_call_on(req, parent, rc);
    if (!c)
        return;
    struct bfs_lookup_req r = {0};
    rc = bfs_fuse_loc_name(c, &r.loc, parent, name);
    if (rc == 0)
        rc = bfs_wind_lookup(c->frame, bfs_fuse_top(c), lookup_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

void bfs_fuse_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    bfs_fuse_node_forget(bfs_fuse_of(req), ino, nlookup);
    fuse_reply_none(req);
}

void bfs_fuse_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    for (size_t i = 0; i < count; i++)
        bfs_fuse_node_forget(fu, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

/* ---- creating names ---- */

static void mknod_cbk(struct bfs_frame *frame, void *cookie, int rc,
                      const struct bfs_mknod_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    parent_changed(c, rc, &rep->postparent);
    entry_done(c, rc, &rep->attr);
}

void bfs_fuse_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                    dev_t rdev)
{
    int rc = check_new_name(parent, name);
    struct bfs_fuse_call *c = bfs_fuse_call_on(req, parent, rc);
    if (!c)
        return;
    /* The kernel has applied the umask already (no FUSE_CAP_DONT_MASK). */
    struct bfs_mknod_req r = {.mode = mode, .rdev = rdev, .umask = 0};
    if (new_entry(c, parent, name, &r.loc, &r.xdata) < 0)
        return;
    rc = bfs_wind_mknod(c->frame, bfs_fuse_top(c), mknod_cbk, NULL, &r);
    bfs_dict_unref(r.xdata);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

static void mkdir_cbk(struct bfs_frame *frame, void *cookie, int rc,
                      const struct bfs_mkdir_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    parent_changed(c, rc, &rep->postparent);
    entry_done(c, rc, &rep->attr);
}

void bfs_fuse_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    int rc = check_new_name(parent, name);
    struct bfs_fuse_call *c = bfs_fuse_call_on(req, parent, rc);
    if (!c)
        return;
    struct bfs_mkdir_req r = {.mode = mode, .umask = 0};
    if (new_entry(c, parent, name, &r.loc, &r.xdata) < 0)
        return;
    rc = bfs_wind_mkdir(c->frame, bfs_fuse_top(c), mkdir_cbk, NULL, &r);
    bfs_dict_unref(r.xdata);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

static void symlink_cbk(struct bfs_frame *frame, void *cookie, int rc,
                        const struct bfs_symlink_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    parent_changed(c, rc, &rep->postparent);
    entry_done(c, rc, &rep->attr);
}

void bfs_fuse_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    int rc = check_new_name(parent, name);
    if (rc == 0 && strlen(link) >= PATH_MAX)
        rc = -ENAMETOOLONG;
    struct bfs_fuse_call *c = bfs_fuse_call_on(req, parent, rc);
    if (!c)
        return;
    struct bfs_symlink_req r = {.target = link, .umask = 0};
    if (new_entry(c, parent, name, &r.loc, &r.xdata) < 0)
        return;
    rc = bfs_wind_symlink(c->frame, bfs_fuse_top(c), symlink_cbk, NULL, &r);
    bfs_dict_unref(r.xdata);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

static void link_cbk(struct bfs_frame *frame, void *cookie, int rc,
                     const struct bfs_link_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    parent_changed(c, rc, &rep->postparent);
    entry_done(c, rc, &rep->attr);
}

void bfs_fuse_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    int rc = check_new_name(newparent, newname);
    struct bfs_fuse_call *c = bfs_fuse_call_on(req, newparent, rc);
    if (!c)
        return;
    struct bfs_link_req r = {0};
    rc = bfs_fuse_loc_ino(c, &r.oldloc, ino);
    if (rc == 0)
        rc = bfs_fuse_loc_name(c, &r.newloc, newparent, newname);
    if (rc == 0)
        rc = bfs_wind_link(c->frame, bfs_fuse_top(c), link_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

/* ---- removing and renaming names ---- */

static void err_done(struct bfs_fuse_call *c, int rc)
{
    fuse_reply_err(c->req, rc < 0 ? -rc : 0);
    bfs_fuse_call_done(c);
}

static void unlink_cbk(struct bfs_frame *frame, void *cookie, int rc,
                       const struct bfs_unlink_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    parent_changed(c, rc, &rep->postparent);
    err_done(c, rc);
}

void bfs_fuse_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    int rc = check_old_name(parent, name);
    struct bfs_fuse_call *c = bfs_fuse_call_on(req, parent, rc);
    if (!c)
        return;
    struct bfs_unlink_req r = {0};
    rc = bfs_fuse_loc_name(c, &r.loc, parent, name);
    if (rc == 0)
        rc = bfs_wind_unlink(c->frame, bfs_fuse_top(c), unlink_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

static void rmdir_cbk(struct bfs_frame *frame, void *cookie, int rc,
                      const struct bfs_rmdir_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    parent_changed(c, rc, &rep->postparent);
    err_done(c, rc);
}

void bfs_fuse_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    int rc = check_old_name(parent, name);
    struct bfs_fuse_call *c = bfs_fuse_call_on(req, parent, rc);
    if (!c)
        return;
    struct bfs_rmdir_req r = {0};
    rc = bfs_fuse_loc_name(c, &r.loc, parent, name);
    if (rc == 0)
        rc = bfs_wind_rmdir(c->frame, bfs_fuse_top(c), rmdir_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

static void rename_cbk(struct bfs_frame *frame, void *cookie, int rc,
                       const struct bfs_rename_rep *rep)
{
    /* Not every translator fills in the parents' attributes of a rename:
     * forget what earlier operations said of them (c->u64: the parents). */
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    bfs_fuse_node_dir_attr_drop(c->fu, (fuse_ino_t)c->u64[0]);
    bfs_fuse_node_dir_attr_drop(c->fu, (fuse_ino_t)c->u64[1]);
    err_done(c, rc);
}

/* flags (RENAME_NOREPLACE, RENAME_EXCHANGE, ...) go to the brick as they
 * are: it applies them with renameat2 and refuses what it cannot do. */
void bfs_fuse_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                     const char *newname, unsigned int flags)
{
    int rc = check_old_name(parent, name);
    if (rc == 0)
        rc = check_new_name(newparent, newname);
    struct bfs_fuse_call *c = bfs_fuse_call_on(req, parent, rc);
    if (!c)
        return;
    c->u64[0] = parent;
    c->u64[1] = newparent;
    struct bfs_rename_req r = {.flags = flags};
    rc = bfs_fuse_loc_name(c, &r.oldloc, parent, name);
    if (rc == 0)
        rc = bfs_fuse_loc_name(c, &r.newloc, newparent, newname);
    if (rc == 0)
        rc = bfs_wind_rename(c->frame, bfs_fuse_top(c), rename_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

/* ---- readlink ---- */

static void readlink_cbk(struct bfs_frame *frame, void *cookie, int rc,
                         const struct bfs_readlink_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    if (rc >= 0 && !rep->target)
        rc = -EIO;
    if (rc < 0)
        fuse_reply_err(c->req, -rc);
    else
        fuse_reply_readlink(c->req, rep->target);
    bfs_fuse_call_done(c);
}

void bfs_fuse_readlink(fuse_req_t req, fuse_ino_t ino)
{
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_readlink_req r = {.size = PATH_MAX};
    int rc = bfs_fuse_loc_ino(c, &r.loc, ino);
    if (rc == 0)
        rc = bfs_wind_readlink(c->frame, bfs_fuse_top(c), readlink_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}
