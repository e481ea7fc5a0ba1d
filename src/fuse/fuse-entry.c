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
 * Requests borrow their inodes: the kernel holds every inode a request
 * names until the request is answered, so no reference is taken. New
 * entries get a GFID chosen here (xdata gfid-req), as GlusterFS does.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "fuse/fuse-bridge.h"

/* For requests that create name in parent: 0, or -errno to reply. */
static int check_new_name(struct bfs_fuse *fu, struct bfs_inode *parent, const char *name)
{
    int rc = bfs_fuse_name_check(name);
    if (rc == 0 && bfs_fuse_hidden_entry(fu, parent, name))
        rc = -EPERM;
    return rc;
}

/* For requests on an existing name. */
static int check_old_name(struct bfs_fuse *fu, struct bfs_inode *parent, const char *name)
{
    int rc = bfs_fuse_name_check(name);
    if (rc == 0 && bfs_fuse_hidden_entry(fu, parent, name))
        rc = -ENOENT;
    return rc;
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
    struct bfs_fuse *fu = bfs_fuse_of(req);
    struct bfs_inode *dir = bfs_fuse_inode(fu, parent);
    int rc = check_old_name(fu, dir, name);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_lookup_req r = {0};
    bfs_fuse_loc_entry(&r.loc, dir, name);
    rc = bfs_wind_lookup(c->frame, fu->graph->top, lookup_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

void bfs_fuse_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    bfs_inode_forget(bfs_fuse_inode(fu, ino), nlookup);
    fuse_reply_none(req);
}

void bfs_fuse_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    for (size_t i = 0; i < count; i++)
        bfs_inode_forget(bfs_fuse_inode(fu, forgets[i].ino), forgets[i].nlookup);
    fuse_reply_none(req);
}

/* ---- creating names ---- */

static void mknod_cbk(struct bfs_frame *frame, void *cookie, int rc,
                      const struct bfs_mknod_rep *rep)
{
    entry_done(bfs_fuse_call_of(frame), rc, &rep->attr);
}

void bfs_fuse_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                    dev_t rdev)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    struct bfs_inode *dir = bfs_fuse_inode(fu, parent);
    int rc = check_new_name(fu, dir, name);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    /* The kernel has applied the umask already (no FUSE_CAP_DONT_MASK). */
    struct bfs_mknod_req r = {.mode = mode, .rdev = rdev, .umask = 0};
    bfs_fuse_loc_entry(&r.loc, dir, name);
    struct bfs_gfid gfid;
    if (!(r.xdata = bfs_fuse_gfid_req(&gfid))) {
        bfs_fuse_call_fail(c, -ENOMEM);
        return;
    }
    rc = bfs_wind_mknod(c->frame, fu->graph->top, mknod_cbk, NULL, &r);
    bfs_dict_unref(r.xdata);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

static void mkdir_cbk(struct bfs_frame *frame, void *cookie, int rc,
                      const struct bfs_mkdir_rep *rep)
{
    entry_done(bfs_fuse_call_of(frame), rc, &rep->attr);
}

void bfs_fuse_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    struct bfs_inode *dir = bfs_fuse_inode(fu, parent);
    int rc = check_new_name(fu, dir, name);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_mkdir_req r = {.mode = mode, .umask = 0};
    bfs_fuse_loc_entry(&r.loc, dir, name);
    struct bfs_gfid gfid;
    if (!(r.xdata = bfs_fuse_gfid_req(&gfid))) {
        bfs_fuse_call_fail(c, -ENOMEM);
        return;
    }
    rc = bfs_wind_mkdir(c->frame, fu->graph->top, mkdir_cbk, NULL, &r);
    bfs_dict_unref(r.xdata);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

static void symlink_cbk(struct bfs_frame *frame, void *cookie, int rc,
                        const struct bfs_symlink_rep *rep)
{
    entry_done(bfs_fuse_call_of(frame), rc, &rep->attr);
}

void bfs_fuse_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    struct bfs_inode *dir = bfs_fuse_inode(fu, parent);
    int rc = check_new_name(fu, dir, name);
    if (rc == 0 && strlen(link) >= PATH_MAX)
        rc = -ENAMETOOLONG;
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_symlink_req r = {.target = link, .umask = 0};
    bfs_fuse_loc_entry(&r.loc, dir, name);
    struct bfs_gfid gfid;
    if (!(r.xdata = bfs_fuse_gfid_req(&gfid))) {
        bfs_fuse_call_fail(c, -ENOMEM);
        return;
    }
    rc = bfs_wind_symlink(c->frame, fu->graph->top, symlink_cbk, NULL, &r);
    bfs_dict_unref(r.xdata);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

static void link_cbk(struct bfs_frame *frame, void *cookie, int rc,
                     const struct bfs_link_rep *rep)
{
    entry_done(bfs_fuse_call_of(frame), rc, &rep->attr);
}

void bfs_fuse_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    struct bfs_inode *dir = bfs_fuse_inode(fu, newparent);
    int rc = check_new_name(fu, dir, newname);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_link_req r = {0};
    bfs_fuse_loc_inode(&r.oldloc, bfs_fuse_inode(fu, ino));
    bfs_fuse_loc_entry(&r.newloc, dir, newname);
    rc = bfs_wind_link(c->frame, fu->graph->top, link_cbk, NULL, &r);
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
    err_done(bfs_fuse_call_of(frame), rc);
}

void bfs_fuse_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    struct bfs_inode *dir = bfs_fuse_inode(fu, parent);
    int rc = check_old_name(fu, dir, name);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_unlink_req r = {0};
    bfs_fuse_loc_entry(&r.loc, dir, name);
    rc = bfs_wind_unlink(c->frame, fu->graph->top, unlink_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

static void rmdir_cbk(struct bfs_frame *frame, void *cookie, int rc,
                      const struct bfs_rmdir_rep *rep)
{
    err_done(bfs_fuse_call_of(frame), rc);
}

void bfs_fuse_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    struct bfs_inode *dir = bfs_fuse_inode(fu, parent);
    int rc = check_old_name(fu, dir, name);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_rmdir_req r = {0};
    bfs_fuse_loc_entry(&r.loc, dir, name);
    rc = bfs_wind_rmdir(c->frame, fu->graph->top, rmdir_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

static void rename_cbk(struct bfs_frame *frame, void *cookie, int rc,
                       const struct bfs_rename_rep *rep)
{
    err_done(bfs_fuse_call_of(frame), rc);
}

/* flags (RENAME_NOREPLACE, RENAME_EXCHANGE, ...) go to the brick as they
 * are: it applies them with renameat2 and refuses what it cannot do. */
void bfs_fuse_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                     const char *newname, unsigned int flags)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    struct bfs_inode *dir = bfs_fuse_inode(fu, parent);
    struct bfs_inode *newdir = bfs_fuse_inode(fu, newparent);
    int rc = check_old_name(fu, dir, name);
    if (rc == 0)
        rc = check_new_name(fu, newdir, newname);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_rename_req r = {.flags = flags};
    bfs_fuse_loc_entry(&r.oldloc, dir, name);
    bfs_fuse_loc_entry(&r.newloc, newdir, newname);
    rc = bfs_wind_rename(c->frame, fu->graph->top, rename_cbk, NULL, &r);
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
    struct bfs_fuse *fu = bfs_fuse_of(req);
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_readlink_req r = {.size = PATH_MAX};
    bfs_fuse_loc_inode(&r.loc, bfs_fuse_inode(fu, ino));
    int rc = bfs_wind_readlink(c->frame, fu->graph->top, readlink_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}
