/*
 * posix-inode.c — fops on an inode's attributes: stat, fstat, setattr,
 * fsetattr, truncate, ftruncate, access, readlink, statfs.
 *
 * Path-based forms resolve the loc to an O_PATH fd (never a followed
 * symlink) and act on that fd: fchownat/utimensat/faccessat2 with
 * AT_EMPTY_PATH, chmod and truncate through /proc/self/fd/N (the magic link
 * lands on that very inode, and the open for truncate checks write
 * permission as the caller). fd-based forms use the fd opened by
 * open/create. Everything runs with the caller's identity, so the kernel
 * decides who may chmod, chown, set times or truncate.
 *
 * setattr applies owner, then mode (chown may clear set-id bits), then
 * times. BFS_SET_CTIME is not applicable (the kernel sets ctime itself) and
 * is ignored. A mode change on a symlink is -EOPNOTSUPP, as lchmod.
 *
 * A file the rebalance froze for a move (mode bits S_ISVTX|S_ISGID and
 * distribute's migrating mark, docs/design/rebalance.md) keeps those bits
 * through a client's chmod or chown, and through a write or truncate by a
 * caller outside its group, which makes the kernel clear S_ISGID of a
 * group-executable file (bfs__px_keep_frozen, also after posix-io.c's data
 * changes): only a brick-side request (xdata brickfs-internal, the
 * rebalance itself) clears them.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "posix.h"

/* ---- stat ---- */

static int do_stat(struct px_job *j, const struct bfs_stat_req *req, struct bfs_stat_rep *rep)
{
    struct px_obj o = PX_OBJ_INIT;
    int rc = bfs__px_resolve_loc(j->priv, &req->loc, &o);
    if (rc == 0)
        bfs__px_iatt(&o.st, &o.gfid, &rep->attr);
    bfs__px_obj_close(&o);
    return rc;
}
PX_FOP_DEFINE(stat, BFS_FOP_STAT)

static int do_fstat(struct px_job *j, const struct bfs_fstat_req *req, struct bfs_fstat_rep *rep)
{
    struct px_fd *pf;
    int rc = bfs__px_fd_get(j, req->fd, &pf);
    return rc < 0 ? rc : bfs__px_fstat_iatt(pf->fd, &pf->gfid, &rep->attr);
}
PX_FOP_DEFINE(fstat, BFS_FOP_FSTAT)

/* ---- setattr ---- */

static void set_times(const struct bfs_iatt *a, uint32_t valid, struct timespec ts[2])
{
    ts[0].tv_sec = a->atime_sec;
    ts[0].tv_nsec = a->atime_nsec;
    ts[1].tv_sec = a->mtime_sec;
    ts[1].tv_nsec = a->mtime_nsec;
    if (!(valid & BFS_SET_ATIME))
        ts[0].tv_nsec = UTIME_OMIT;
    if (!(valid & BFS_SET_MTIME))
        ts[1].tv_nsec = UTIME_OMIT;
    if (valid & BFS_SET_ATIME_NOW)
        ts[0].tv_nsec = UTIME_NOW;
    if (valid & BFS_SET_MTIME_NOW)
        ts[1].tv_nsec = UTIME_NOW;
}

#define PX_SET_TIMES (BFS_SET_ATIME | BFS_SET_MTIME | BFS_SET_ATIME_NOW | BFS_SET_MTIME_NOW)

/* Does a setattr of the file (mode as before it, fd as apply_attrs's) keep
 * the rebalance's frozen bits? Its reply then shows them, so distribute
 * repeats the chmod or chown where the file is going, and the writes after
 * it land on a source that still says it is frozen; without this a chmod
 * in the move's last round trips (after its last check, before it drops
 * the source), or a chown that clears S_ISGID, was lost with the writes
 * after it. Costs a getxattr only on a file with both bits. */
static bool has_mark(int fd, bool path_fd)
{
    char path[PX_PROC_FD_LEN];
    bfs__px_proc_path(fd, path);
    bfs__px_root_begin();
    ssize_t n = path_fd ? SYS.getxattr(path, PX_MIGRATING_XATTR, NULL, 0)
                        : SYS.fgetxattr(fd, PX_MIGRATING_XATTR, NULL, 0);
    bfs__px_root_end();
    return n >= 0;
}

static bool keeps_frozen(int fd, bool path_fd, mode_t mode, const struct bfs_dict *xdata,
                         uint32_t valid)
{
    int64_t v = 0;
    if (!S_ISREG(mode) || (mode & PX_FROZEN_BITS) != PX_FROZEN_BITS ||
        !(valid & (BFS_SET_MODE | BFS_SET_UID | BFS_SET_GID)) ||
        (bfs_dict_get_int(xdata, PX_INTERNAL_KEY, &v) == 0 && v == 1))
        return false;
    return has_mark(fd, path_fd);
}

/* After the caller's chmod or chown of a frozen file: the bits back if the
 * kernel cleared them (chown of a group-executable file; chmod by a caller
 * outside the file's group), as root, which keeps S_ISGID. */
static void refreeze(int fd, bool path_fd)
{
    char path[PX_PROC_FD_LEN];
    struct stat st;
    bfs__px_proc_path(fd, path);
    if (SYS.fstat(fd, &st) < 0 || (st.st_mode & PX_FROZEN_BITS) == PX_FROZEN_BITS)
        return;
    mode_t mode = (st.st_mode & 07777) | PX_FROZEN_BITS;
    bfs__px_root_begin();
    (void)(path_fd ? SYS.fchmodat(AT_FDCWD, path, mode, 0) : SYS.fchmod(fd, mode));
    bfs__px_root_end();
}

void bfs__px_keep_frozen(int fd, const struct bfs_iatt *pre, struct bfs_iatt *post)
{
    if (!S_ISREG(pre->mode) || (pre->mode & PX_FROZEN_BITS) != PX_FROZEN_BITS ||
        (post->mode & PX_FROZEN_BITS) == PX_FROZEN_BITS || !has_mark(fd, false))
        return;
    refreeze(fd, false);
    post->mode |= PX_FROZEN_BITS;
}

/* Before a write by a caller without CAP_FSETID, the kernel clears the
 * file's set-user-ID bit (and set-group-ID with group execute) with a chmod
 * as that caller, who need not own the file: the FUSE mount forwards it
 * (default_permissions has checked it). A local file system lets any writer
 * drop them, so a chmod refused that only drops those bits goes through for
 * a caller who may write the file: nothing a write would not do. */
static bool drops_privs_only(int fd, mode_t cur, mode_t want)
{
    const mode_t privs = S_ISUID | S_ISGID;
    if (!S_ISREG(cur))
        return false;
    cur &= 07777;
    want &= 07777;
    if (want == cur || (want & ~privs) != (cur & ~privs) || (want & ~cur))
        return false;
    return SYS.faccessat2(fd, "", W_OK, AT_EACCESS | AT_EMPTY_PATH) == 0;
}

static int chmod_fd(int fd, bool path_fd, mode_t mode)
{
    char path[PX_PROC_FD_LEN];
    bfs__px_proc_path(fd, path);
    int rc = path_fd ? SYS.fchmodat(AT_FDCWD, path, mode, 0) : SYS.fchmod(fd, mode);
    return rc < 0 ? -errno : 0;
}

static int apply_mode(int fd, bool path_fd, mode_t cur, mode_t mode)
{
    int rc = chmod_fd(fd, path_fd, mode);
    if (rc != -EPERM || !drops_privs_only(fd, cur, mode))
        return rc;
    bfs__px_root_begin();
    rc = chmod_fd(fd, path_fd, mode);
    bfs__px_root_end();
    return rc;
}

/* The owner, then the mode; a frozen file's new mode keeps the bits.
 * cur: the file's mode before. */
static int apply_owner_mode(int fd, bool path_fd, mode_t cur, const struct bfs_iatt *a,
                            uint32_t valid, bool frozen)
{
    mode_t type = cur & S_IFMT;
    if (valid & (BFS_SET_UID | BFS_SET_GID)) {
        uid_t uid = (valid & BFS_SET_UID) ? (uid_t)a->uid : (uid_t)-1;
        gid_t gid = (valid & BFS_SET_GID) ? (gid_t)a->gid : (gid_t)-1;
        int rc = path_fd ? SYS.fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)
                         : SYS.fchown(fd, uid, gid);
        if (rc < 0)
            return -errno;
    }
    if (valid & BFS_SET_MODE) {
        if (type == S_IFLNK)
            return -EOPNOTSUPP;
        return apply_mode(fd, path_fd, cur, (a->mode & 07777) | (frozen ? PX_FROZEN_BITS : 0));
    }
    return 0;
}

/* fd is an O_PATH fd (path_fd) or a real open fd; cur its mode before;
 * frozen: keeps_frozen. */
static int apply_attrs(int fd, bool path_fd, mode_t cur, const struct bfs_iatt *a,
                       uint32_t valid, bool frozen)
{
    int rc = apply_owner_mode(fd, path_fd, cur, a, valid, frozen);
    if (frozen)
        refreeze(fd, path_fd); /* even after a failure: a chown may have cleared them */
    if (rc < 0 || !(valid & PX_SET_TIMES))
        return rc;
    struct timespec ts[2];
    set_times(a, valid, ts);
    rc = path_fd ? SYS.utimensat(fd, "", ts, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)
                 : SYS.futimens(fd, ts);
    return rc < 0 ? -errno : 0;
}

static int do_setattr(struct px_job *j, const struct bfs_setattr_req *req,
                      struct bfs_setattr_rep *rep)
{
    struct px_obj o = PX_OBJ_INIT;
    int rc = bfs__px_resolve_loc(j->priv, &req->loc, &o);
    if (rc == 0) {
        bfs__px_iatt(&o.st, &o.gfid, &rep->pre);
        bool frozen = keeps_frozen(o.fd, true, o.st.st_mode, req->xdata, req->valid);
        rc = apply_attrs(o.fd, true, o.st.st_mode, &req->attr, req->valid, frozen);
    }
    if (rc == 0)
        rc = bfs__px_fstat_iatt(o.fd, &o.gfid, &rep->post);
    bfs__px_obj_close(&o);
    return rc;
}
PX_FOP_DEFINE(setattr, BFS_FOP_SETATTR)

static int do_fsetattr(struct px_job *j, const struct bfs_fsetattr_req *req,
                       struct bfs_fsetattr_rep *rep)
{
    struct px_fd *pf;
    int rc = bfs__px_fd_get(j, req->fd, &pf);
    if (rc == 0)
        rc = bfs__px_fstat_iatt(pf->fd, &pf->gfid, &rep->pre);
    if (rc == 0)
        rc = apply_attrs(pf->fd, false, rep->pre.mode, &req->attr, req->valid,
                         keeps_frozen(pf->fd, false, rep->pre.mode, req->xdata, req->valid));
    if (rc == 0)
        rc = bfs__px_fstat_iatt(pf->fd, &pf->gfid, &rep->post);
    return rc;
}
PX_FOP_DEFINE(fsetattr, BFS_FOP_FSETATTR)

/* ---- truncate ---- */

static int do_truncate(struct px_job *j, const struct bfs_truncate_req *req,
                       struct bfs_truncate_rep *rep)
{
    struct px_obj o = PX_OBJ_INIT;
    int fd = -1;
    if (req->offset > (uint64_t)INT64_MAX)
        return -EINVAL;
    int rc = bfs__px_resolve_loc(j->priv, &req->loc, &o);
    if (rc == 0 && S_ISDIR(o.st.st_mode))
        rc = -EISDIR;
    else if (rc == 0 && !S_ISREG(o.st.st_mode))
        rc = -EINVAL;
    if (rc == 0)
        rc = fd = bfs__px_reopen(o.fd, O_WRONLY);
    if (rc >= 0) {
        rc = bfs__px_fstat_iatt(fd, &o.gfid, &rep->pre);
        if (rc == 0 && SYS.ftruncate(fd, (off_t)req->offset) < 0)
            rc = -errno;
        if (rc == 0)
            rc = bfs__px_fstat_iatt(fd, &o.gfid, &rep->post);
        if (rc == 0)
            bfs__px_keep_frozen(fd, &rep->pre, &rep->post);
        SYS.close(fd);
    }
    bfs__px_obj_close(&o);
    return rc;
}
PX_FOP_DEFINE(truncate, BFS_FOP_TRUNCATE)

static int do_ftruncate(struct px_job *j, const struct bfs_ftruncate_req *req,
                        struct bfs_ftruncate_rep *rep)
{
    struct px_fd *pf;
    if (req->offset > (uint64_t)INT64_MAX)
        return -EINVAL;
    int rc = bfs__px_fd_get(j, req->fd, &pf);
    if (rc == 0)
        rc = bfs__px_fstat_iatt(pf->fd, &pf->gfid, &rep->pre);
    if (rc == 0 && SYS.ftruncate(pf->fd, (off_t)req->offset) < 0)
        rc = -errno;
    if (rc == 0)
        rc = bfs__px_fstat_iatt(pf->fd, &pf->gfid, &rep->post);
    if (rc == 0)
        bfs__px_keep_frozen(pf->fd, &rep->pre, &rep->post);
    return rc;
}
PX_FOP_DEFINE(ftruncate, BFS_FOP_FTRUNCATE)

/* ---- access, readlink ---- */

static int do_access(struct px_job *j, const struct bfs_access_req *req,
                     struct bfs_access_rep *rep)
{
    (void)rep;
    struct px_obj o = PX_OBJ_INIT;
    if (req->mask & ~(uint32_t)(R_OK | W_OK | X_OK))
        return -EINVAL;
    int rc = bfs__px_resolve_loc(j->priv, &req->loc, &o);
    /* AT_EACCESS: the thread's fs identity (the caller's), not the real uid. */
    if (rc == 0 && req->mask &&
        SYS.faccessat2(o.fd, "", (int)req->mask, AT_EACCESS | AT_EMPTY_PATH) < 0)
        rc = -errno;
    bfs__px_obj_close(&o);
    return rc;
}
PX_FOP_DEFINE(access, BFS_FOP_ACCESS)

static int do_readlink(struct px_job *j, const struct bfs_readlink_req *req,
                       struct bfs_readlink_rep *rep)
{
    struct px_obj o = PX_OBJ_INIT;
    char buf[PATH_MAX + 1];
    int rc = bfs__px_resolve_loc(j->priv, &req->loc, &o);
    if (rc == 0 && !S_ISLNK(o.st.st_mode))
        rc = -EINVAL;
    if (rc == 0) {
        ssize_t n = SYS.readlinkat(o.fd, "", buf, sizeof(buf) - 1);
        if (n < 0) {
            rc = -errno;
        } else {
            if (req->size && (size_t)n > req->size) /* readlink(2) truncates too */
                n = (ssize_t)req->size;
            if (!(rep->target = strndup(buf, (size_t)n)))
                rc = -ENOMEM;
            else
                rc = (int)n;
        }
    }
    if (rc >= 0)
        bfs__px_iatt(&o.st, &o.gfid, &rep->attr);
    bfs__px_obj_close(&o);
    return rc;
}
PX_FOP_DEFINE(readlink, BFS_FOP_READLINK)

/* ---- statfs ---- */

/* Of the whole brick, whatever loc names (a brick is one file system). */
static int do_statfs(struct px_job *j, const struct bfs_statfs_req *req,
                     struct bfs_statfs_rep *rep)
{
    (void)req;
    struct statvfs sv;
    if (SYS.fstatvfs(j->priv->root_fd, &sv) < 0)
        return -errno;
    rep->buf.bsize = sv.f_bsize;
    rep->buf.frsize = sv.f_frsize;
    rep->buf.blocks = sv.f_blocks;
    rep->buf.bfree = sv.f_bfree;
    rep->buf.bavail = sv.f_bavail;
    rep->buf.files = sv.f_files;
    rep->buf.ffree = sv.f_ffree;
    rep->buf.favail = sv.f_favail;
    rep->buf.fsid = sv.f_fsid;
    rep->buf.flag = sv.f_flag;
    rep->buf.namemax = sv.f_namemax;
    return 0;
}
PX_FOP_DEFINE(statfs, BFS_FOP_STATFS)
