/*
 * api-entry.c — calls that add, remove or move names: mkdir, mknod, rmdir,
 * unlink, rename, link, symlink, and readlink.
 *
 * Each resolves its path(s) without following a final symbolic link (the
 * link itself is the entry acted on), applies the POSIX checks a caller
 * relies on for its error codes (EEXIST, ENOTDIR, EISDIR, EINVAL for a
 * directory moved under itself, EBUSY for the root...), then winds one fop
 * naming (parent GFID, name). The bricks check permissions and decide
 * races; the checks here only give the answer POSIX gives when the brick
 * would give a less precise one or none.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/api.h"

static mode_t fs_umask(struct brickfs *fs)
{
    return __atomic_load_n(&fs->umask, __ATOMIC_RELAXED);
}

/* The name a creating call makes must not exist yet. */
static int new_name_check(const struct api_res *res, bool dir)
{
    if (res->exists)
        return -EEXIST;
    if (res->trailing_slash && !dir)
        return -ENOENT;
    return 0;
}

static int do_mkdir(brickfs_t *fs, const char *path, mode_t mode)
{
    struct bfs_stack *st;
    struct api_res res;
    int rc = bfs__api_path_begin(fs, path, RES_MAY_MISS, &st, &res);
    if (rc < 0)
        return rc;
    rc = new_name_check(&res, true);
    if (rc == 0) {
        mode_t um = fs_umask(fs);
        struct bfs_mkdir_req req = {0};
        bfs__api_res_newloc(&res, &req.loc, path);
        req.mode = (uint32_t)(S_IFDIR | (mode & 07777 & ~um));
        req.umask = (uint32_t)um;
        rc = bfs_sync_mkdir(fs->graph->top, st, &req, NULL);
    }
    bfs__api_path_end(st, &res);
    return rc < 0 ? rc : 0;
}

int brickfs_mkdir(brickfs_t *fs, const char *path, mode_t mode)
{
    return (int)bfs__api_ret(do_mkdir(fs, path, mode));
}

static int do_mknod(brickfs_t *fs, const char *path, mode_t mode, dev_t dev)
{
    mode_t type = mode & S_IFMT;
    if (type == 0)
        type = S_IFREG;
    if (type != S_IFREG && type != S_IFIFO && type != S_IFCHR && type != S_IFBLK &&
        type != S_IFSOCK)
        return -EINVAL;
    struct bfs_stack *st;
    struct api_res res;
    int rc = bfs__api_path_begin(fs, path, RES_MAY_MISS, &st, &res);
    if (rc < 0)
        return rc;
    rc = new_name_check(&res, false);
    if (rc == 0) {
        mode_t um = fs_umask(fs);
        struct bfs_mknod_req req = {0};
        bfs__api_res_newloc(&res, &req.loc, path);
        req.mode = (uint32_t)(type | (mode & 07777 & ~um));
        req.rdev = (uint64_t)dev;
        req.umask = (uint32_t)um;
        rc = bfs_sync_mknod(fs->graph->top, st, &req, NULL);
    }
    bfs__api_path_end(st, &res);
    return rc < 0 ? rc : 0;
}

int brickfs_mknod(brickfs_t *fs, const char *path, mode_t mode, dev_t dev)
{
    return (int)bfs__api_ret(do_mknod(fs, path, mode, dev));
}

static int do_rmdir(brickfs_t *fs, const char *path)
{
    struct bfs_stack *st;
    struct api_res res;
    int rc = bfs__api_path_begin(fs, path, 0, &st, &res);
    if (rc < 0)
        return rc;
    if (!res.name[0])
        rc = strcmp(res.dotname, ".") == 0 ? -EINVAL
             : strcmp(res.dotname, "..") == 0 ? -ENOTEMPTY
                                              : -EBUSY;
    else if (!S_ISDIR(res.attr.mode))
        rc = -ENOTDIR;
    if (rc == 0) {
        struct bfs_rmdir_req req = {0};
        bfs__api_res_loc(&res, &req.loc, path);
        rc = bfs_sync_rmdir(fs->graph->top, st, &req, NULL);
    }
    bfs__api_path_end(st, &res);
    return rc < 0 ? rc : 0;
}

int brickfs_rmdir(brickfs_t *fs, const char *path)
{
    return (int)bfs__api_ret(do_rmdir(fs, path));
}

static int do_unlink(brickfs_t *fs, const char *path)
{
    struct bfs_stack *st;
    struct api_res res;
    int rc = bfs__api_path_begin(fs, path, 0, &st, &res);
    if (rc < 0)
        return rc;
    if (!res.name[0] || S_ISDIR(res.attr.mode))
        rc = -EISDIR;
    if (rc == 0) {
        struct bfs_unlink_req req = {0};
        bfs__api_res_loc(&res, &req.loc, path);
        rc = bfs_sync_unlink(fs->graph->top, st, &req, NULL);
    }
    bfs__api_path_end(st, &res);
    return rc < 0 ? rc : 0;
}

int brickfs_unlink(brickfs_t *fs, const char *path)
{
    return (int)bfs__api_ret(do_unlink(fs, path));
}

/* POSIX's answers for rename(old, new) that a brick may not give. */
static int rename_check(const struct api_res *o, const struct api_res *n)
{
    if (!o->name[0] || !n->name[0])
        return -EBUSY;
    bool odir = S_ISDIR(o->attr.mode);
    if (n->trailing_slash && !odir)
        return -ENOTDIR;
    if (odir) { /* not into itself or below */
        for (int i = 0; i < n->nanc; i++)
            if (bfs_gfid_eq(&n->anc[i], &o->attr.gfid))
                return -EINVAL;
    }
    if (!n->exists)
        return 0;
    if (bfs_gfid_eq(&o->attr.gfid, &n->attr.gfid))
        return 1; /* the same file: nothing to do */
    bool ndir = S_ISDIR(n->attr.mode);
    if (odir && !ndir)
        return -ENOTDIR;
    if (!odir && ndir)
        return -EISDIR;
    return 0;
}

static int do_rename(brickfs_t *fs, const char *oldpath, const char *newpath)
{
    struct bfs_stack *st;
    struct api_res o, n;
    int rc = bfs__api_path_begin(fs, oldpath, 0, &st, &o);
    if (rc < 0)
        return rc;
    rc = bfs__api_resolve(fs, st, newpath, RES_MAY_MISS | RES_ANCESTORS, &n);
    if (rc < 0) {
        bfs__api_path_end(st, &o);
        return rc;
    }
    rc = rename_check(&o, &n);
    if (rc == 0) {
        struct bfs_rename_req req = {0};
        bfs__api_res_loc(&o, &req.oldloc, oldpath);
        if (n.exists)
            bfs__api_res_loc(&n, &req.newloc, newpath);
        else
            bfs__api_res_newloc(&n, &req.newloc, newpath);
        rc = bfs_sync_rename(fs->graph->top, st, &req, NULL);
    }
    bfs__api_res_clear(&n);
    bfs__api_path_end(st, &o);
    return rc < 0 ? rc : 0;
}

int brickfs_rename(brickfs_t *fs, const char *oldpath, const char *newpath)
{
    return (int)bfs__api_ret(do_rename(fs, oldpath, newpath));
}

static int do_link(brickfs_t *fs, const char *oldpath, const char *newpath)
{
    struct bfs_stack *st;
    struct api_res o, n;
    int rc = bfs__api_path_begin(fs, oldpath, 0, &st, &o);
    if (rc < 0)
        return rc;
    rc = bfs__api_resolve(fs, st, newpath, RES_MAY_MISS, &n);
    if (rc < 0) {
        bfs__api_path_end(st, &o);
        return rc;
    }
    if (!o.name[0] || S_ISDIR(o.attr.mode))
        rc = -EPERM; /* no hard links to directories */
    else
        rc = new_name_check(&n, false);
    if (rc == 0) {
        struct bfs_link_req req = {0};
        bfs__api_res_loc(&o, &req.oldloc, oldpath);
        bfs__api_res_newloc(&n, &req.newloc, newpath);
        rc = bfs_sync_link(fs->graph->top, st, &req, NULL);
    }
    bfs__api_res_clear(&n);
    bfs__api_path_end(st, &o);
    return rc < 0 ? rc : 0;
}

int brickfs_link(brickfs_t *fs, const char *oldpath, const char *newpath)
{
    return (int)bfs__api_ret(do_link(fs, oldpath, newpath));
}

static int do_symlink(brickfs_t *fs, const char *target, const char *linkpath)
{
    if (!target)
        return -EINVAL;
    size_t tlen = strnlen(target, API_PATH_MAX);
    if (tlen == 0)
        return -ENOENT;
    if (tlen >= API_PATH_MAX)
        return -ENAMETOOLONG;
    struct bfs_stack *st;
    struct api_res res;
    int rc = bfs__api_path_begin(fs, linkpath, RES_MAY_MISS, &st, &res);
    if (rc < 0)
        return rc;
    rc = new_name_check(&res, false);
    if (rc == 0) {
        struct bfs_symlink_req req = {0};
        req.target = target;
        bfs__api_res_newloc(&res, &req.loc, linkpath);
        req.umask = (uint32_t)fs_umask(fs);
        rc = bfs_sync_symlink(fs->graph->top, st, &req, NULL);
    }
    bfs__api_path_end(st, &res);
    return rc < 0 ? rc : 0;
}

int brickfs_symlink(brickfs_t *fs, const char *target, const char *linkpath)
{
    return (int)bfs__api_ret(do_symlink(fs, target, linkpath));
}

static ssize_t do_readlink(brickfs_t *fs, const char *path, char *buf, size_t size)
{
    if (size == 0)
        return -EINVAL;
    if (!buf)
        return -EFAULT;
    struct bfs_stack *st;
    struct api_res res;
    int rc = bfs__api_path_begin(fs, path, 0, &st, &res);
    if (rc < 0)
        return rc;
    ssize_t n = -EINVAL;
    if (S_ISLNK(res.attr.mode)) {
        struct bfs_readlink_req req = {0};
        struct bfs_readlink_rep rep;
        bfs__api_res_loc(&res, &req.loc, path);
        req.size = API_PATH_MAX;
        rc = bfs_sync_readlink(fs->graph->top, st, &req, &rep);
        if (rc < 0) {
            n = rc;
        } else {
            size_t len = rep.target ? strlen(rep.target) : 0;
            n = (ssize_t)(len < size ? len : size);
            memcpy(buf, rep.target ? rep.target : "", (size_t)n);
        }
        bfs_readlink_rep_clear_dup(&rep);
    }
    bfs__api_path_end(st, &res);
    return n;
}

ssize_t brickfs_readlink(brickfs_t *fs, const char *path, char *buf, size_t size)
{
    return bfs__api_ret(do_readlink(fs, path, buf, size));
}
