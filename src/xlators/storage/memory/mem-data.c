/*
 * mem-data.c — file data and attribute fops of storage/memory: open, read,
 * write, truncate, flush/fsync, stat, access, setattr, statfs.
 *
 * read copies the bytes out under the lock, so a concurrent write that
 * grows (reallocates) the file cannot pull them away during the answer.
 * write answers rc = bytes written, read rc = bytes read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mem.h"

int bfs__mem_stat_fop(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_stat_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_stat_rep rep = {0};
    struct mem_inode *mi;
    int rc;
    LOCKED(priv)
    {
        if ((rc = bfs__mem_resolve(priv, &req->loc, &mi, NULL)) == 0)
            bfs__mem_stat(mi, &rep.attr);
    }
    bfs__mem_reply(xl, frame, BFS_FOP_STAT, rc, &rep);
    return 0;
}

int bfs__mem_fstat(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_fstat_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_fstat_rep rep = {0};
    int rc = 0;
    LOCKED(priv)
    {
        struct mem_inode *mi = bfs__mem_fd_inode(xl, req->fd);
        if (mi)
            bfs__mem_stat(mi, &rep.attr);
        else
            rc = -EBADF;
    }
    bfs__mem_reply(xl, frame, BFS_FOP_FSTAT, rc, &rep);
    return 0;
}

/* No permission model: the namespace is the test's own. Existence only. */
int bfs__mem_access(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_access_req *req)
{
    struct mem_priv *priv = xl->private;
    struct mem_inode *mi;
    int rc;
    LOCKED(priv)
    {
        rc = bfs__mem_resolve(priv, &req->loc, &mi, NULL);
    }
    bfs__mem_reply(xl, frame, BFS_FOP_ACCESS, rc, NULL);
    return 0;
}

int bfs__mem_open(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_open_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_open_rep rep = {0};
    struct mem_inode *mi;
    int rc;
    if (!req->fd)
        return -EINVAL;
    LOCKED(priv)
    {
        rc = bfs__mem_resolve(priv, &req->loc, &mi, NULL);
        if (rc == 0 && S_ISDIR(mi->attr.mode) && (req->flags & O_ACCMODE) != O_RDONLY)
            rc = -EISDIR;
        if (rc == 0 && S_ISLNK(mi->attr.mode))
            rc = -ELOOP;
        if (rc == 0 && (req->flags & O_TRUNC) && S_ISREG(mi->attr.mode) &&
            (req->flags & O_ACCMODE) != O_RDONLY && (rc = bfs__mem_resize(priv, mi, 0)) == 0)
            bfs__mem_touch(mi, false, true, true);
        if (rc == 0) {
            bfs__mem_fd_bind(xl, req->fd, mi);
            bfs__mem_stat(mi, &rep.attr);
        }
    }
    bfs__mem_reply(xl, frame, BFS_FOP_OPEN, rc, &rep);
    return 0;
}

int bfs__mem_read(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_read_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_read_rep rep = {0};
    char *buf = NULL;
    int rc = 0;
    LOCKED(priv)
    {
        struct mem_inode *mi = bfs__mem_fd_inode(xl, req->fd);
        if (!mi)
            rc = -EBADF;
        else if (S_ISDIR(mi->attr.mode))
            rc = -EISDIR;
        if (rc == 0) {
            uint64_t size = mi->attr.size;
            size_t n = req->offset >= size ? 0 : (size_t)(size - req->offset);
            if (n > req->size)
                n = req->size;
            if (n && !(buf = malloc(n)))
                rc = -ENOMEM;
            if (rc == 0) {
                if (n)
                    memcpy(buf, mi->data + req->offset, n);
                rep.data.data = buf;
                rep.data.len = n;
                rep.eof = req->offset + n >= size;
                bfs__mem_touch(mi, true, false, false);
                bfs__mem_stat(mi, &rep.attr);
                rc = (int)n;
            }
        }
    }
    bfs__mem_reply(xl, frame, BFS_FOP_READ, rc, &rep);
    free(buf);
    return 0;
}

int bfs__mem_write(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_write_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_write_rep rep = {0};
    int rc = 0;
    if (req->data.len > INT32_MAX)
        return -EINVAL;
    LOCKED(priv)
    {
        struct mem_inode *mi = bfs__mem_fd_inode(xl, req->fd);
        uint64_t off = req->offset;
        if (!mi)
            rc = -EBADF;
        else if (!S_ISREG(mi->attr.mode))
            rc = S_ISDIR(mi->attr.mode) ? -EISDIR : -EINVAL;
        if (rc == 0) {
            bfs__mem_stat(mi, &rep.pre);
            if (req->fd->flags & O_APPEND)
                off = mi->attr.size;
            if (off > UINT64_MAX - req->data.len)
                rc = -EFBIG;
            else if (off + req->data.len > mi->attr.size)
                rc = bfs__mem_resize(priv, mi, off + req->data.len);
        }
        if (rc == 0) {
            if (req->data.len)
                memcpy(mi->data + off, req->data.data, req->data.len);
            bfs__mem_touch(mi, false, true, true);
            bfs__mem_stat(mi, &rep.post);
            rc = (int)req->data.len;
        }
    }
    bfs__mem_reply(xl, frame, BFS_FOP_WRITE, rc, &rep);
    return 0;
}

static int do_truncate(struct mem_priv *priv, struct mem_inode *mi, uint64_t size,
                       struct bfs_iatt *pre, struct bfs_iatt *post)
{
    if (S_ISDIR(mi->attr.mode))
        return -EISDIR;
    if (!S_ISREG(mi->attr.mode))
        return -EINVAL;
    bfs__mem_stat(mi, pre);
    int rc = bfs__mem_resize(priv, mi, size);
    if (rc < 0)
        return rc;
    bfs__mem_touch(mi, false, true, true);
    bfs__mem_stat(mi, post);
    return 0;
}

int bfs__mem_truncate(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_truncate_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_truncate_rep rep = {0};
    struct mem_inode *mi;
    int rc;
    LOCKED(priv)
    {
        if ((rc = bfs__mem_resolve(priv, &req->loc, &mi, NULL)) == 0)
            rc = do_truncate(priv, mi, req->offset, &rep.pre, &rep.post);
    }
    bfs__mem_reply(xl, frame, BFS_FOP_TRUNCATE, rc, &rep);
    return 0;
}

int bfs__mem_ftruncate(struct bfs_frame *frame, struct bfs_xl *xl,
                       const struct bfs_ftruncate_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_ftruncate_rep rep = {0};
    int rc;
    LOCKED(priv)
    {
        struct mem_inode *mi = bfs__mem_fd_inode(xl, req->fd);
        rc = mi ? do_truncate(priv, mi, req->offset, &rep.pre, &rep.post) : -EBADF;
    }
    bfs__mem_reply(xl, frame, BFS_FOP_FTRUNCATE, rc, &rep);
    return 0;
}

int bfs__mem_flush(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_flush_req *req)
{
    struct mem_priv *priv = xl->private;
    int rc;
    LOCKED(priv)
    {
        rc = bfs__mem_fd_inode(xl, req->fd) ? 0 : -EBADF;
    }
    bfs__mem_reply(xl, frame, BFS_FOP_FLUSH, rc, NULL);
    return 0;
}

int bfs__mem_fsync(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_fsync_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_fsync_rep rep = {0};
    int rc = 0;
    LOCKED(priv)
    {
        struct mem_inode *mi = bfs__mem_fd_inode(xl, req->fd);
        if (mi) {
            bfs__mem_stat(mi, &rep.pre);
            rep.post = rep.pre;
        } else {
            rc = -EBADF;
        }
    }
    bfs__mem_reply(xl, frame, BFS_FOP_FSYNC, rc, &rep);
    return 0;
}

static void apply_setattr(struct mem_inode *mi, const struct bfs_iatt *a, uint32_t valid)
{
    if (valid & BFS_SET_MODE)
        mi->attr.mode = (mi->attr.mode & S_IFMT) | (a->mode & 07777);
    if (valid & BFS_SET_UID)
        mi->attr.uid = a->uid;
    if (valid & BFS_SET_GID)
        mi->attr.gid = a->gid;
    bfs__mem_touch(mi, valid & BFS_SET_ATIME_NOW, valid & BFS_SET_MTIME_NOW, true);
    if (valid & BFS_SET_ATIME) {
        mi->attr.atime_sec = a->atime_sec;
        mi->attr.atime_nsec = a->atime_nsec;
    }
    if (valid & BFS_SET_MTIME) {
        mi->attr.mtime_sec = a->mtime_sec;
        mi->attr.mtime_nsec = a->mtime_nsec;
    }
    if (valid & BFS_SET_CTIME) {
        mi->attr.ctime_sec = a->ctime_sec;
        mi->attr.ctime_nsec = a->ctime_nsec;
    }
}

int bfs__mem_setattr(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_setattr_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_setattr_rep rep = {0};
    struct mem_inode *mi;
    int rc;
    LOCKED(priv)
    {
        if ((rc = bfs__mem_resolve(priv, &req->loc, &mi, NULL)) == 0) {
            bfs__mem_stat(mi, &rep.pre);
            apply_setattr(mi, &req->attr, req->valid);
            bfs__mem_stat(mi, &rep.post);
        }
    }
    bfs__mem_reply(xl, frame, BFS_FOP_SETATTR, rc, &rep);
    return 0;
}

int bfs__mem_fsetattr(struct bfs_frame *frame, struct bfs_xl *xl,
                      const struct bfs_fsetattr_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_fsetattr_rep rep = {0};
    int rc = 0;
    LOCKED(priv)
    {
        struct mem_inode *mi = bfs__mem_fd_inode(xl, req->fd);
        if (mi) {
            bfs__mem_stat(mi, &rep.pre);
            apply_setattr(mi, &req->attr, req->valid);
            bfs__mem_stat(mi, &rep.post);
        } else {
            rc = -EBADF;
        }
    }
    bfs__mem_reply(xl, frame, BFS_FOP_FSETATTR, rc, &rep);
    return 0;
}

/* A nominal 64 GiB device with a million inodes, less what is in use. */
int bfs__mem_statfs(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_statfs_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_statfs_rep rep = {0};
    const uint64_t blocks = (64ull << 30) / 4096, files = 1u << 20;
    uint64_t used = 0, count;
    LOCKED(priv)
    {
        count = priv->count;
        for (size_t b = 0; b < priv->nbuckets; b++)
            for (struct mem_inode *mi = priv->buckets[b]; mi; mi = mi->hnext)
                used += (mi->attr.size + 4095) / 4096;
    }
    rep.buf.bsize = rep.buf.frsize = 4096;
    rep.buf.blocks = blocks;
    rep.buf.bfree = rep.buf.bavail = used < blocks ? blocks - used : 0;
    rep.buf.files = files;
    rep.buf.ffree = rep.buf.favail = count < files ? files - count : 0;
    rep.buf.namemax = 255;
    rep.buf.fsid = 0xb0f5;
    bfs__mem_reply(xl, frame, BFS_FOP_STATFS, 0, &rep);
    return 0;
}
