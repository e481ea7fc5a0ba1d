/*
 * api-attr.c — attributes by path and by handle: stat/lstat/fstat,
 * access, truncate, chmod/chown/lchown/utimens/lutimens and their handle
 * forms (setattr / fsetattr with "valid" bits), statvfs.
 *
 * A path call resolves the path (which already yields the target's
 * attributes: stat costs no more than the walk) and, for changes, winds
 * one fop on the resolved location.
 */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"

static int do_stat(brickfs_t *fs, const char *path, struct stat *sb, int flags)
{
    if (!sb)
        return -EFAULT;
    struct bfs_stack *st;
    struct api_res res;
    int rc = bfs__api_path_begin(fs, path, flags, &st, &res);
    if (rc < 0)
        return rc;
    bfs_iatt_to_stat(&res.attr, sb);
    bfs__api_path_end(st, &res);
    return 0;
}

int brickfs_stat(brickfs_t *fs, const char *path, struct stat *st)
{
    return (int)bfs__api_ret(do_stat(fs, path, st, RES_FOLLOW));
}

int brickfs_lstat(brickfs_t *fs, const char *path, struct stat *st)
{
    return (int)bfs__api_ret(do_stat(fs, path, st, 0));
}

int brickfs_fstat(brickfs_fd_t *fd, struct stat *sb)
{
    if (!fd || !fd->fd)
        return (int)bfs__api_ret(-EBADF);
    if (!sb)
        return (int)bfs__api_ret(-EFAULT);
    struct bfs_stack *st = bfs__api_fd_stack(fd);
    if (!st)
        return (int)bfs__api_ret(-ENOMEM);
    struct bfs_fstat_req req = {0};
    struct bfs_fstat_rep rep;
    req.fd = fd->fd;
    int rc = bfs_sync_fstat(fd->fs->graph->top, st, &req, &rep);
    if (rc >= 0)
        bfs_iatt_to_stat(&rep.attr, sb);
    bfs_fstat_rep_clear_dup(&rep);
    bfs_stack_unref(st);
    return (int)bfs__api_ret(rc < 0 ? rc : 0);
}

static int do_access(brickfs_t *fs, const char *path, int mode)
{
    if (mode & ~(R_OK | W_OK | X_OK))
        return -EINVAL;
    struct bfs_stack *st = NULL;
    struct api_res res;
    int rc = bfs__api_path_begin(fs, path, RES_FOLLOW, &st, &res);
    if (rc < 0 || mode == F_OK)
        goto out;
    struct bfs_access_req req = {0};
    bfs__api_res_loc(&res, &req.loc, path);
    req.mask = (uint32_t)mode;
    rc = bfs_sync_access(fs->graph->top, st, &req, NULL);
out:
    if (st)
        bfs__api_path_end(st, &res);
    return rc < 0 ? rc : 0;
}

int brickfs_access(brickfs_t *fs, const char *path, int mode)
{
    return (int)bfs__api_ret(do_access(fs, path, mode));
}

static int do_truncate(brickfs_t *fs, const char *path, off_t length)
{
    if (length < 0)
        return -EINVAL;
    struct bfs_stack *st;
    struct api_res res;
    int rc = bfs__api_path_begin(fs, path, RES_FOLLOW, &st, &res);
    if (rc < 0)
        return rc;
    if (S_ISDIR(res.attr.mode)) {
        rc = -EISDIR;
    } else if (!S_ISREG(res.attr.mode)) {
        rc = -EINVAL;
    } else {
        struct bfs_truncate_req req = {0};
        bfs__api_res_loc(&res, &req.loc, path);
        req.offset = (uint64_t)length;
        rc = bfs_sync_truncate(fs->graph->top, st, &req, NULL);
    }
    bfs__api_path_end(st, &res);
    return rc < 0 ? rc : 0;
}

int brickfs_truncate(brickfs_t *fs, const char *path, off_t length)
{
    return (int)bfs__api_ret(do_truncate(fs, path, length));
}

/* ---- setattr ---- */

static int check_time(const struct timespec *ts)
{
    if (ts->tv_nsec == UTIME_NOW || ts->tv_nsec == UTIME_OMIT)
        return 0;
    return ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000 ? 0 : -EINVAL;
}

void bfs__api_times_to_iatt(const struct timespec *times, struct bfs_iatt *ia,
                            uint32_t *valid)
{
    if (!times) {
        *valid |= BFS_SET_ATIME_NOW | BFS_SET_MTIME_NOW;
        return;
    }
    if (times[0].tv_nsec == UTIME_NOW) {
        *valid |= BFS_SET_ATIME_NOW;
    } else if (times[0].tv_nsec != UTIME_OMIT) {
        *valid |= BFS_SET_ATIME;
        ia->atime_sec = times[0].tv_sec;
        ia->atime_nsec = (uint32_t)times[0].tv_nsec;
    }
    if (times[1].tv_nsec == UTIME_NOW) {
        *valid |= BFS_SET_MTIME_NOW;
    } else if (times[1].tv_nsec != UTIME_OMIT) {
        *valid |= BFS_SET_MTIME;
        ia->mtime_sec = times[1].tv_sec;
        ia->mtime_nsec = (uint32_t)times[1].tv_nsec;
    }
}

/* What to change: one of mode / owner / times. */
struct change {
    uint32_t valid;
    struct bfs_iatt attr;
};

static int change_mode(struct change *c, mode_t mode)
{
    c->valid = BFS_SET_MODE;
    c->attr.mode = (uint32_t)(mode & 07777);
    return 0;
}

static int change_owner(struct change *c, uid_t uid, gid_t gid)
{
    if (uid != (uid_t)-1) {
        c->valid |= BFS_SET_UID;
        c->attr.uid = (uint32_t)uid;
    }
    if (gid != (gid_t)-1) {
        c->valid |= BFS_SET_GID;
        c->attr.gid = (uint32_t)gid;
    }
    return 0;
}

static int change_times(struct change *c, const struct timespec *times)
{
    if (times && (check_time(&times[0]) < 0 || check_time(&times[1]) < 0))
        return -EINVAL;
    bfs__api_times_to_iatt(times, &c->attr, &c->valid);
    return 0;
}

static int path_setattr(brickfs_t *fs, const char *path, int flags, const struct change *c)
{
    struct bfs_stack *st;
    struct api_res res;
    int rc = bfs__api_path_begin(fs, path, flags, &st, &res);
    if (rc < 0)
        return rc;
    if (c->valid) { /* chown(-1, -1) changes nothing, but the path must exist */
        struct bfs_setattr_req req = {0};
        bfs__api_res_loc(&res, &req.loc, path);
        req.attr = c->attr;
        req.valid = c->valid;
        rc = bfs_sync_setattr(fs->graph->top, st, &req, NULL);
    }
    bfs__api_path_end(st, &res);
    return rc < 0 ? rc : 0;
}

static int fd_setattr(struct brickfs_fd *fd, const struct change *c)
{
    if (!fd || !fd->fd)
        return -EBADF;
    if (!c->valid)
        return 0;
    struct bfs_stack *st = bfs__api_fd_stack(fd);
    if (!st)
        return -ENOMEM;
    struct bfs_fsetattr_req req = {0};
    req.fd = fd->fd;
    req.attr = c->attr;
    req.valid = c->valid;
    int rc = bfs_sync_fsetattr(fd->fs->graph->top, st, &req, NULL);
    bfs_stack_unref(st);
    return rc < 0 ? rc : 0;
}

int brickfs_chmod(brickfs_t *fs, const char *path, mode_t mode)
{
    struct change c = {0};
    change_mode(&c, mode);
    return (int)bfs__api_ret(path_setattr(fs, path, RES_FOLLOW, &c));
}

int brickfs_chown(brickfs_t *fs, const char *path, uid_t uid, gid_t gid)
{
    struct change c = {0};
    change_owner(&c, uid, gid);
    return (int)bfs__api_ret(path_setattr(fs, path, RES_FOLLOW, &c));
}

int brickfs_lchown(brickfs_t *fs, const char *path, uid_t uid, gid_t gid)
{
    struct change c = {0};
    change_owner(&c, uid, gid);
    return (int)bfs__api_ret(path_setattr(fs, path, 0, &c));
}

int brickfs_utimens(brickfs_t *fs, const char *path, const struct timespec *times)
{
    struct change c = {0};
    int rc = change_times(&c, times);
    return (int)bfs__api_ret(rc < 0 ? rc : path_setattr(fs, path, RES_FOLLOW, &c));
}

int brickfs_lutimens(brickfs_t *fs, const char *path, const struct timespec *times)
{
    struct change c = {0};
    int rc = change_times(&c, times);
    return (int)bfs__api_ret(rc < 0 ? rc : path_setattr(fs, path, 0, &c));
}

int brickfs_fchmod(brickfs_fd_t *fd, mode_t mode)
{
    struct change c = {0};
    change_mode(&c, mode);
    return (int)bfs__api_ret(fd_setattr(fd, &c));
}

int brickfs_fchown(brickfs_fd_t *fd, uid_t uid, gid_t gid)
{
    struct change c = {0};
    change_owner(&c, uid, gid);
    return (int)bfs__api_ret(fd_setattr(fd, &c));
}

int brickfs_futimens(brickfs_fd_t *fd, const struct timespec *times)
{
    struct change c = {0};
    int rc = change_times(&c, times);
    return (int)bfs__api_ret(rc < 0 ? rc : fd_setattr(fd, &c));
}

/* ---- statvfs ---- */

static int do_statvfs(brickfs_t *fs, const char *path, struct statvfs *buf)
{
    if (!buf)
        return -EFAULT;
    struct bfs_stack *st;
    struct api_res res;
    int rc = bfs__api_path_begin(fs, path, RES_FOLLOW, &st, &res);
    if (rc < 0)
        return rc;
    struct bfs_statfs_req req = {0};
    struct bfs_statfs_rep rep;
    bfs__api_res_loc(&res, &req.loc, path);
    rc = bfs_sync_statfs(fs->graph->top, st, &req, &rep);
    if (rc >= 0) {
        memset(buf, 0, sizeof(*buf));
        buf->f_bsize = rep.buf.bsize;
        buf->f_frsize = rep.buf.frsize;
        buf->f_blocks = rep.buf.blocks;
        buf->f_bfree = rep.buf.bfree;
        buf->f_bavail = rep.buf.bavail;
        buf->f_files = rep.buf.files;
        buf->f_ffree = rep.buf.ffree;
        buf->f_favail = rep.buf.favail;
        buf->f_fsid = rep.buf.fsid;
        buf->f_flag = rep.buf.flag;
        buf->f_namemax = rep.buf.namemax;
    }
    bfs_statfs_rep_clear_dup(&rep);
    bfs__api_path_end(st, &res);
    return rc < 0 ? rc : 0;
}

int brickfs_statvfs(brickfs_t *fs, const char *path, struct statvfs *buf)
{
    return (int)bfs__api_ret(do_statvfs(fs, path, buf));
}
