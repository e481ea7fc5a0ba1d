/*
 * mem-entry.c — namespace fops of storage/memory: lookup, create, mknod,
 * mkdir, symlink, readlink, link, unlink, rmdir, rename. Each runs under
 * priv->lock and answers through bfs__mem_reply with the lock released.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mem.h"

/* Creates the entry loc names; parent pre/post attributes into pre/post. */
static int make_entry(struct mem_priv *priv, struct bfs_frame *frame, const struct bfs_loc *loc,
                      struct bfs_dict *xdata, uint32_t mode, struct mem_inode **out,
                      struct bfs_iatt *pre, struct bfs_iatt *post)
{
    struct mem_inode *dir, *mi;
    int rc = bfs__mem_resolve_parent(priv, loc, &dir);
    if (rc < 0)
        return rc;
    if (bfs__mem_dir_find(dir, loc->name))
        return -EEXIST;
    bfs__mem_stat(dir, pre);
    if ((rc = bfs__mem_new(priv, frame, xdata, mode, &mi)) < 0)
        return rc;
    if ((rc = bfs__mem_dir_add(dir, loc->name, &mi->attr.gfid)) < 0) {
        bfs__mem_unlinked(priv, mi);
        return rc;
    }
    mi->attr.nlink = S_ISDIR(mode) ? 2 : 1;
    if (S_ISDIR(mode)) {
        mi->parent = dir->attr.gfid;
        dir->attr.nlink++;
    }
    bfs__mem_stat(dir, post);
    *out = mi;
    return 0;
}

int bfs__mem_lookup(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_lookup_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_lookup_rep rep = {0};
    struct mem_inode *mi, *parent;
    int rc;
    LOCKED(priv)
    {
        rc = bfs__mem_resolve(priv, &req->loc, &mi, &parent);
        if (rc == 0 && !parent && !bfs_gfid_is_null(&req->loc.pargfid))
            parent = bfs__mem_find(priv, &req->loc.pargfid); /* gfid + parent given */
        if (rc == 0) {
            bfs__mem_stat(mi, &rep.attr);
            if (parent)
                bfs__mem_stat(parent, &rep.parent);
            if (req->xdata)
                rc = bfs__mem_xattrs_wanted(mi, req->xdata, &rep.xdata);
        }
    }
    bfs__mem_reply(xl, frame, BFS_FOP_LOOKUP, rc == -ESTALE ? -ENOENT : rc, &rep);
    bfs_dict_unref(rep.xdata);
    return 0;
}

int bfs__mem_mknod(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_mknod_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_mknod_rep rep = {0};
    struct mem_inode *mi;
    uint32_t mode = req->mode & ~req->umask & 07777;
    mode |= (req->mode & S_IFMT) ? (req->mode & S_IFMT) : S_IFREG;
    int rc;
    if (S_ISDIR(mode) || S_ISLNK(mode))
        return -EINVAL;
    LOCKED(priv)
    {
        rc = make_entry(priv, frame, &req->loc, req->xdata, mode, &mi, &rep.preparent,
                        &rep.postparent);
        if (rc == 0) {
            mi->attr.rdev = req->rdev;
            bfs__mem_stat(mi, &rep.attr);
        }
    }
    bfs__mem_reply(xl, frame, BFS_FOP_MKNOD, rc, &rep);
    return 0;
}

int bfs__mem_mkdir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_mkdir_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_mkdir_rep rep = {0};
    struct mem_inode *mi;
    int rc;
    LOCKED(priv)
    {
        rc = make_entry(priv, frame, &req->loc, req->xdata,
                        S_IFDIR | (req->mode & ~req->umask & 07777), &mi, &rep.preparent,
                        &rep.postparent);
        if (rc == 0)
            bfs__mem_stat(mi, &rep.attr);
    }
    bfs__mem_reply(xl, frame, BFS_FOP_MKDIR, rc, &rep);
    return 0;
}

int bfs__mem_symlink(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_symlink_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_symlink_rep rep = {0};
    struct mem_inode *mi;
    int rc;
    char *target = req->target && *req->target ? strdup(req->target) : NULL;
    if (!target)
        return req->target && *req->target ? -ENOMEM : -EINVAL;
    LOCKED(priv)
    {
        rc = make_entry(priv, frame, &req->loc, req->xdata, S_IFLNK | 0777, &mi,
                        &rep.preparent, &rep.postparent);
        if (rc == 0) {
            mi->target = target;
            target = NULL;
            bfs__mem_stat(mi, &rep.attr);
        }
    }
    free(target);
    bfs__mem_reply(xl, frame, BFS_FOP_SYMLINK, rc, &rep);
    return 0;
}

int bfs__mem_readlink(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_readlink_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_readlink_rep rep = {0};
    struct mem_inode *mi;
    char *target = NULL;
    int rc;
    LOCKED(priv)
    {
        rc = bfs__mem_resolve(priv, &req->loc, &mi, NULL);
        if (rc == 0 && (!S_ISLNK(mi->attr.mode) || !mi->target))
            rc = -EINVAL;
        if (rc == 0 && !(target = strdup(mi->target)))
            rc = -ENOMEM;
        if (rc == 0) {
            bfs__mem_stat(mi, &rep.attr);
            rc = (int)strlen(target);
        }
    }
    rep.target = target;
    bfs__mem_reply(xl, frame, BFS_FOP_READLINK, rc, &rep);
    free(target);
    return 0;
}

int bfs__mem_create(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_create_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_create_rep rep = {0};
    struct mem_inode *dir, *mi = NULL;
    int rc;
    if (!req->fd)
        return -EINVAL;
    LOCKED(priv)
    {
        rc = bfs__mem_resolve_parent(priv, &req->loc, &dir);
        struct mem_dirent *e = rc == 0 ? bfs__mem_dir_find(dir, req->loc.name) : NULL;
        if (e) {
            /* open(O_CREAT) of an existing name opens it unless O_EXCL */
            mi = bfs__mem_find(priv, &e->gfid);
            if (req->flags & O_EXCL)
                rc = -EEXIST;
            else if (!mi)
                rc = -ENOENT;
            else if (S_ISDIR(mi->attr.mode))
                rc = -EISDIR;
            else if (req->flags & O_TRUNC)
                rc = bfs__mem_resize(priv, mi, 0);
            if (rc == 0) {
                bfs__mem_stat(dir, &rep.preparent);
                rep.postparent = rep.preparent;
            }
        } else if (rc == 0) {
            rc = make_entry(priv, frame, &req->loc, req->xdata,
                            S_IFREG | (req->mode & ~req->umask & 07777), &mi, &rep.preparent,
                            &rep.postparent);
        }
        if (rc == 0) {
            bfs__mem_fd_bind(xl, req->fd, mi);
            bfs__mem_stat(mi, &rep.attr);
        }
    }
    bfs__mem_reply(xl, frame, BFS_FOP_CREATE, rc, &rep);
    return 0;
}

int bfs__mem_link(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_link_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_link_rep rep = {0};
    struct mem_inode *mi, *dir;
    int rc;
    LOCKED(priv)
    {
        rc = bfs__mem_resolve(priv, &req->oldloc, &mi, NULL);
        if (rc == 0)
            rc = bfs__mem_resolve_parent(priv, &req->newloc, &dir);
        if (rc == 0 && S_ISDIR(mi->attr.mode))
            rc = -EPERM;
        if (rc == 0 && bfs__mem_dir_find(dir, req->newloc.name))
            rc = -EEXIST;
        if (rc == 0) {
            bfs__mem_stat(dir, &rep.preparent);
            rc = bfs__mem_dir_add(dir, req->newloc.name, &mi->attr.gfid);
        }
        if (rc == 0) {
            mi->attr.nlink++;
            bfs__mem_touch(mi, false, false, true);
            bfs__mem_stat(mi, &rep.attr);
            bfs__mem_stat(dir, &rep.postparent);
        }
    }
    bfs__mem_reply(xl, frame, BFS_FOP_LINK, rc, &rep);
    return 0;
}

/* Removes the entry loc names; want_dir selects rmdir's rules. */
static int remove_entry(struct mem_priv *priv, const struct bfs_loc *loc, bool want_dir,
                        struct bfs_iatt *pre, struct bfs_iatt *post)
{
    struct mem_inode *dir;
    int rc = bfs__mem_resolve_parent(priv, loc, &dir);
    if (rc < 0)
        return rc;
    struct mem_dirent *e = bfs__mem_dir_find(dir, loc->name);
    struct mem_inode *mi = e ? bfs__mem_find(priv, &e->gfid) : NULL;
    if (!mi)
        return -ENOENT;
    if (!bfs_gfid_is_null(&loc->gfid) && !bfs_gfid_eq(&loc->gfid, &mi->attr.gfid))
        return -ESTALE; /* the name now points elsewhere */
    if (want_dir && !S_ISDIR(mi->attr.mode))
        return -ENOTDIR;
    if (!want_dir && S_ISDIR(mi->attr.mode))
        return -EISDIR;
    if (want_dir && mi->nents)
        return -ENOTEMPTY;
    if (want_dir && bfs_gfid_is_root(&mi->attr.gfid))
        return -EBUSY;
    bfs__mem_stat(dir, pre);
    bfs__mem_dir_del(dir, e);
    if (want_dir) {
        dir->attr.nlink--;
        mi->attr.nlink = 0;
    } else {
        mi->attr.nlink--;
        bfs__mem_touch(mi, false, false, true);
    }
    bfs__mem_stat(dir, post);
    if (mi->attr.nlink == 0)
        bfs__mem_unlinked(priv, mi);
    return 0;
}

int bfs__mem_unlink(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_unlink_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_unlink_rep rep = {0};
    int rc;
    LOCKED(priv)
    {
        rc = remove_entry(priv, &req->loc, false, &rep.preparent, &rep.postparent);
    }
    bfs__mem_reply(xl, frame, BFS_FOP_UNLINK, rc, &rep);
    return 0;
}

int bfs__mem_rmdir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_rmdir_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_rmdir_rep rep = {0};
    int rc;
    LOCKED(priv)
    {
        rc = remove_entry(priv, &req->loc, true, &rep.preparent, &rep.postparent);
    }
    bfs__mem_reply(xl, frame, BFS_FOP_RMDIR, rc, &rep);
    return 0;
}

/* Is dir inside (or equal to) the directory tree rooted at top? */
static bool in_subtree(struct mem_priv *priv, struct mem_inode *dir, const struct mem_inode *top)
{
    for (int depth = 0; dir && depth < 4096; depth++) {
        if (dir == top)
            return true;
        if (bfs_gfid_is_root(&dir->attr.gfid))
            return false;
        dir = bfs__mem_find(priv, &dir->parent);
    }
    return false;
}

/* Checks whether src may replace dst (which may be NULL). */
static int rename_check(struct mem_priv *priv, struct mem_inode *src, struct mem_inode *dst,
                        struct mem_inode *newdir, uint32_t flags)
{
    if (flags & ~(uint32_t)RENAME_NOREPLACE)
        return -EINVAL;
    if (dst && (flags & RENAME_NOREPLACE))
        return -EEXIST;
    if (S_ISDIR(src->attr.mode) && in_subtree(priv, newdir, src))
        return -EINVAL;
    if (!dst)
        return 0;
    if (S_ISDIR(src->attr.mode) && !S_ISDIR(dst->attr.mode))
        return -ENOTDIR;
    if (!S_ISDIR(src->attr.mode) && S_ISDIR(dst->attr.mode))
        return -EISDIR;
    if (S_ISDIR(dst->attr.mode) && dst->nents)
        return -ENOTEMPTY;
    return 0;
}

static int do_rename(struct mem_priv *priv, const struct bfs_rename_req *req,
                     struct bfs_rename_rep *rep)
{
    struct mem_inode *olddir, *newdir;
    int rc = bfs__mem_resolve_parent(priv, &req->oldloc, &olddir);
    if (rc == 0)
        rc = bfs__mem_resolve_parent(priv, &req->newloc, &newdir);
    if (rc < 0)
        return rc;
    struct mem_dirent *se = bfs__mem_dir_find(olddir, req->oldloc.name);
    struct mem_inode *src = se ? bfs__mem_find(priv, &se->gfid) : NULL;
    if (!src)
        return -ENOENT;
    struct mem_dirent *de = bfs__mem_dir_find(newdir, req->newloc.name);
    struct mem_inode *dst = de ? bfs__mem_find(priv, &de->gfid) : NULL;
    if ((rc = rename_check(priv, src, dst, newdir, req->flags)) < 0)
        return rc;
    bfs__mem_stat(olddir, &rep->preoldparent);
    bfs__mem_stat(newdir, &rep->prenewparent);
    bfs__mem_stat(src, &rep->attr);
    if (dst == src)
        goto done; /* two names of one inode: nothing to do */
    if (dst) {
        /* the name stays (and keeps its readdir offset); it now means src */
        de->gfid = src->attr.gfid;
        bfs__mem_touch(newdir, false, true, true);
        if (S_ISDIR(dst->attr.mode)) {
            newdir->attr.nlink--;
            dst->attr.nlink = 0;
        } else {
            dst->attr.nlink--;
        }
        if (dst->attr.nlink == 0)
            bfs__mem_unlinked(priv, dst);
    } else if ((rc = bfs__mem_dir_add(newdir, req->newloc.name, &src->attr.gfid)) < 0) {
        return rc;
    }
    bfs__mem_dir_del(olddir, bfs__mem_dir_find(olddir, req->oldloc.name));
    if (S_ISDIR(src->attr.mode)) {
        olddir->attr.nlink--;
        newdir->attr.nlink++;
        src->parent = newdir->attr.gfid;
    }
    bfs__mem_touch(src, false, false, true);
    bfs__mem_stat(src, &rep->attr);
done:
    bfs__mem_stat(olddir, &rep->postoldparent);
    bfs__mem_stat(newdir, &rep->postnewparent);
    return 0;
}

int bfs__mem_rename(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_rename_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_rename_rep rep = {0};
    int rc;
    LOCKED(priv)
    {
        rc = do_rename(priv, req, &rep);
    }
    bfs__mem_reply(xl, frame, BFS_FOP_RENAME, rc, &rep);
    return 0;
}
