/*
 * fuse-attr.c — attributes: getattr, setattr, statfs, access, and how the
 * kernel's attribute cache is kept honest about our own changes.
 *
 * The kernel caches attributes for attr-timeout seconds. Changes made
 * through this mount must still show at once:
 *   - setattr (chmod, chown, truncate, utimens) replies with the brick's
 *     post-operation attributes, which replace the cached ones;
 *   - write, fallocate and copy_file_range cannot reply attributes, but the
 *     kernel marks size, mtime and ctime stale itself after each of them and
 *     bumps the inode's attribute version, so a getattr that raced with the
 *     write cannot cache pre-write values; nothing to do here, and nothing to
 *     pay per write;
 *   - create, mkdir, unlink, rename, link: the kernel invalidates the
 *     attributes of the directories and of the inodes involved (the link
 *     count of a file replaced by a rename, for instance); the GETATTR of
 *     the directory that follows is answered from the parent's attributes
 *     in that operation's reply (fuse-node.c, bfs_fuse_node_dir_attr_*),
 *     which setattr here keeps up to date;
 *   - setxattr and removexattr change ctime, which some kernels only update
 *     from their own clock: we invalidate the inode's attributes explicitly
 *     (bfs_fuse_inval_attr, one notification, attributes only, no page
 *     cache), so the next stat shows the brick's ctime.
 *
 * setattr is one or two fops: a size change is a truncate (ftruncate when
 * the kernel names the open file), then the remaining changes are one
 * setattr (fsetattr). Times set to "now" are the brick's now.
 *
 * fstat(2) and fchmod(2) reach FUSE without the file they were made on, so
 * they go by GFID, which no longer resolves once the file's last name is
 * gone. When that happens (ESTALE or ENOENT) and this mount still has the
 * file open, the call is made once more through that open file, as
 * GlusterFS does: an unlinked file stays fully usable while it is open.
 */
#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>

#include "fuse/fuse-bridge.h"

void bfs_fuse_inval_attr(struct bfs_fuse *fu, fuse_ino_t ino)
{
    if (fu->se)
        (void)fuse_lowlevel_notify_inval_inode(fu->se, ino, -1, 0);
}

/* ---- getattr ---- */

static void wind_stat(struct bfs_fuse_call *c);
static void wind_setattr(struct bfs_fuse_call *c);

/* The name is gone but the file may be open here: true if c was wound
 * again through an open file. */
static bool retry_by_fd(struct bfs_fuse_call *c, int rc, void (*again)(struct bfs_fuse_call *))
{
    if ((rc != -ESTALE && rc != -ENOENT) || c->fd)
        return false;
    c->fd_ref = bfs_fuse_fd_of_inode(c->fu, c->gr, bfs_fuse_node_gfid(c->fu, c->ino));
    if (!c->fd_ref)
        return false;
    c->fd = c->fd_ref;
    again(c);
    return true;
}

static void attr_done(struct bfs_fuse_call *c, int rc, const struct bfs_iatt *attr)
{
    rc = bfs_fuse_by_inode_rc(c, rc);
    if (rc < 0)
        fuse_reply_err(c->req, -rc);
    else
        bfs_fuse_reply_attr(c, attr);
    bfs_fuse_call_done(c);
}

static void stat_cbk(struct bfs_frame *frame, void *cookie, int rc, const struct bfs_stat_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    if (!retry_by_fd(c, rc, wind_stat))
        attr_done(c, rc, &rep->attr);
}

static void fstat_cbk(struct bfs_frame *frame, void *cookie, int rc,
                      const struct bfs_fstat_rep *rep)
{
    attr_done(bfs_fuse_call_of(frame), rc, &rep->attr);
}

/* stat c->ino, through c->fd when there is one. Ends c on a wind error. */
static void wind_stat(struct bfs_fuse_call *c)
{
    struct bfs_xl *top = bfs_fuse_top(c);
    int rc;
    if (c->fd) {
        struct bfs_fstat_req r = {.fd = c->fd};
        rc = bfs_wind_fstat(c->frame, top, fstat_cbk, NULL, &r);
    } else {
        struct bfs_stat_req r = {0};
        rc = bfs_fuse_loc_ino(c, &r.loc, c->ino);
        if (rc == 0)
            rc = bfs_wind_stat(c->frame, top, stat_cbk, NULL, &r);
    }
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

void bfs_fuse_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct bfs_iatt dattr;
    if (bfs_fuse_node_dir_attr_take(bfs_fuse_of(req), ino, &dattr)) {
        /* a directory right after our own create/unlink/... in it */
        struct stat st;
        bfs_fuse_stat(&dattr, &st);
        fuse_reply_attr(req, &st, bfs_fuse_of(req)->opts->attr_timeout);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    c->ino = ino;
    if (fi)
        (void)bfs_fuse_call_fd(c, fi, false); /* sets c->fd */
    wind_stat(c);
}

/* ---- setattr ---- */

static void setattr_cbk(struct bfs_frame *frame, void *cookie, int rc,
                        const struct bfs_setattr_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    if (retry_by_fd(c, rc, wind_setattr))
        return;
    if (rc >= 0) /* newer than what an entry operation left (fuse-node.c) */
        bfs_fuse_node_dir_attr_put(c->fu, c->ino, &rep->post);
    attr_done(c, rc, &rep->post);
}

static void fsetattr_cbk(struct bfs_frame *frame, void *cookie, int rc,
                         const struct bfs_fsetattr_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    if (rc >= 0)
        bfs_fuse_node_dir_attr_put(c->fu, c->ino, &rep->post);
    attr_done(c, rc, &rep->post);
}

/* The non-size part of a setattr; with nothing left to set, a stat. */
static void wind_setattr(struct bfs_fuse_call *c)
{
    struct bfs_xl *top = bfs_fuse_top(c);
    int rc;
    if (!c->valid) {
        wind_stat(c);
        return;
    }
    if (c->fd) {
        struct bfs_fsetattr_req r = {.fd = c->fd, .attr = c->attr, .valid = c->valid};
        rc = bfs_wind_fsetattr(c->frame, top, fsetattr_cbk, NULL, &r);
    } else {
        struct bfs_setattr_req r = {.attr = c->attr, .valid = c->valid};
        rc = bfs_fuse_loc_ino(c, &r.loc, c->ino);
        if (rc == 0)
            rc = bfs_wind_setattr(c->frame, top, setattr_cbk, NULL, &r);
    }
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

static void truncated(struct bfs_fuse_call *c, int rc, const struct bfs_iatt *post)
{
    if (rc < 0 || !c->valid)
        attr_done(c, rc, post);
    else
        wind_setattr(c); /* a callback may wind again: the frame is still ours */
}

static void wind_truncate(struct bfs_fuse_call *c);

static void truncate_cbk(struct bfs_frame *frame, void *cookie, int rc,
                         const struct bfs_truncate_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    if (!retry_by_fd(c, rc, wind_truncate))
        truncated(c, rc, &rep->post);
}

static void ftruncate_cbk(struct bfs_frame *frame, void *cookie, int rc,
                          const struct bfs_ftruncate_rep *rep)
{
    truncated(bfs_fuse_call_of(frame), rc, &rep->post);
}

/* FUSE_SET_ATTR_* -> the iatt and BFS_SET_* bits of a setattr fop. */
static uint32_t setattr_bits(const struct stat *st, int to_set, struct bfs_iatt *ia)
{
    uint32_t v = 0;
    memset(ia, 0, sizeof(*ia));
    if (to_set & FUSE_SET_ATTR_MODE) {
        v |= BFS_SET_MODE;
        ia->mode = st->st_mode;
    }
    if (to_set & FUSE_SET_ATTR_UID) {
        v |= BFS_SET_UID;
        ia->uid = st->st_uid;
    }
    if (to_set & FUSE_SET_ATTR_GID) {
        v |= BFS_SET_GID;
        ia->gid = st->st_gid;
    }
    if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
        v |= BFS_SET_ATIME_NOW;
    } else if (to_set & FUSE_SET_ATTR_ATIME) {
        v |= BFS_SET_ATIME;
        ia->atime_sec = st->st_atim.tv_sec;
        ia->atime_nsec = (uint32_t)st->st_atim.tv_nsec;
    }
    if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
        v |= BFS_SET_MTIME_NOW;
    } else if (to_set & FUSE_SET_ATTR_MTIME) {
        v |= BFS_SET_MTIME;
        ia->mtime_sec = st->st_mtim.tv_sec;
        ia->mtime_nsec = (uint32_t)st->st_mtim.tv_nsec;
    }
    /* FUSE_SET_ATTR_CTIME only comes with the writeback cache, which we do
     * not enable; the brick sets ctime itself on every change. */
    return v;
}

void bfs_fuse_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                      struct fuse_file_info *fi)
{
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    c->ino = ino;
    if (fi)
        (void)bfs_fuse_call_fd(c, fi, false); /* sets c->fd */
    c->valid = setattr_bits(attr, to_set, &c->attr);
    if (!(to_set & FUSE_SET_ATTR_SIZE)) {
        wind_setattr(c);
        return;
    }
    if (attr->st_size < 0) {
        bfs_fuse_call_fail(c, -EINVAL);
        return;
    }
    c->u64[0] = (uint64_t)attr->st_size;
    wind_truncate(c);
}

/* The size part of a setattr: to c->u64[0]. */
static void wind_truncate(struct bfs_fuse_call *c)
{
    struct bfs_xl *top = bfs_fuse_top(c);
    int rc;
    if (c->fd) {
        struct bfs_ftruncate_req r = {.fd = c->fd, .offset = c->u64[0]};
        rc = bfs_wind_ftruncate(c->frame, top, ftruncate_cbk, NULL, &r);
    } else {
        struct bfs_truncate_req r = {.offset = c->u64[0]};
        rc = bfs_fuse_loc_ino(c, &r.loc, c->ino);
        if (rc == 0)
            rc = bfs_wind_truncate(c->frame, top, truncate_cbk, NULL, &r);
    }
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

/* ---- statfs ---- */

static void statfs_cbk(struct bfs_frame *frame, void *cookie, int rc,
                       const struct bfs_statfs_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    if (rc < 0) {
        fuse_reply_err(c->req, -rc);
    } else {
        const struct bfs_statvfs *b = &rep->buf;
        struct statvfs sv = {
            .f_bsize = b->bsize, .f_frsize = b->frsize,
            .f_blocks = b->blocks, .f_bfree = b->bfree, .f_bavail = b->bavail,
            .f_files = b->files, .f_ffree = b->ffree, .f_favail = b->favail,
            .f_fsid = b->fsid, .f_flag = b->flag,
            .f_namemax = b->namemax ? b->namemax : 255,
        };
        fuse_reply_statfs(c->req, &sv);
    }
    bfs_fuse_call_done(c);
}

void bfs_fuse_statfs(fuse_req_t req, fuse_ino_t ino)
{
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_statfs_req r = {0};
    int rc = bfs_fuse_loc_ino(c, &r.loc, ino ? ino : FUSE_ROOT_ID);
    if (rc == 0)
        rc = bfs_wind_statfs(c->frame, bfs_fuse_top(c), statfs_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

/* ---- access ----
 * With default_permissions the kernel answers access(2) itself and never
 * sends this; it is here for completeness of the operation table. */

static void access_cbk(struct bfs_frame *frame, void *cookie, int rc,
                       const struct bfs_access_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    fuse_reply_err(c->req, rc < 0 ? -rc : 0);
    bfs_fuse_call_done(c);
}

void bfs_fuse_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_access_req r = {.mask = (uint32_t)mask};
    int rc = bfs_fuse_loc_ino(c, &r.loc, ino);
    if (rc == 0)
        rc = bfs_wind_access(c->frame, bfs_fuse_top(c), access_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}
