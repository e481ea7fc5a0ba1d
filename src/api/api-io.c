/*
 * api-io.c — data calls on an open handle: read/write (at the handle's
 * offset, held under the handle's mutex for the whole call, so concurrent
 * read/write on one handle never share a range), pread/pwrite, lseek
 * (SEEK_DATA/SEEK_HOLE through the seek fop), fsync, ftruncate,
 * fallocate/discard/zerofill and byte-range locks.
 *
 * Transfers larger than API_IO_CHUNK are split into several fops; a read
 * stops at the first short chunk or eof, a write reports what was written
 * before an error (POSIX partial-transfer rules).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"

static int fd_check(struct brickfs_fd *fd)
{
    if (!fd || !fd->fd)
        return -EBADF;
    return 0;
}

static bool fd_readable(const struct brickfs_fd *fd)
{
    return (fd->flags & O_ACCMODE) != O_WRONLY;
}

static bool fd_writable(const struct brickfs_fd *fd)
{
    int acc = fd->flags & O_ACCMODE;
    return acc == O_WRONLY || acc == O_RDWR;
}

static struct bfs_xl *top_of(struct brickfs_fd *fd)
{
    return fd->fs->graph->top;
}

static ssize_t do_pread(struct brickfs_fd *fd, struct bfs_stack *st, void *buf, size_t count,
                        off_t offset)
{
    if (fd->is_dir)
        return -EISDIR;
    if (!fd_readable(fd))
        return -EBADF;
    if (offset < 0)
        return -EINVAL;
    if (count > SSIZE_MAX)
        count = SSIZE_MAX;
    size_t done = 0;
    while (done < count) {
        uint32_t want = (uint32_t)(count - done < API_IO_CHUNK ? count - done : API_IO_CHUNK);
        struct bfs_read_req req = {0};
        struct bfs_read_rep rep;
        req.fd = fd->fd;
        req.size = want;
        req.offset = (uint64_t)offset + done;
        int rc = bfs_sync_read(top_of(fd), st, &req, &rep);
        if (rc < 0) {
            bfs_read_rep_clear_dup(&rep);
            return done ? (ssize_t)done : rc;
        }
        size_t n = rep.data.len < want ? rep.data.len : want;
        if (n)
            memcpy((char *)buf + done, rep.data.data, n);
        bool eof = rep.eof;
        bfs_read_rep_clear_dup(&rep);
        done += n;
        if (n < want || eof)
            break;
    }
    return (ssize_t)done;
}

/* Writes; *end receives the file size after the last chunk (for O_APPEND). */
static ssize_t do_pwrite(struct brickfs_fd *fd, struct bfs_stack *st, const void *buf,
                         size_t count, off_t offset, uint64_t *end)
{
    if (fd->is_dir)
        return -EISDIR;
    if (!fd_writable(fd))
        return -EBADF;
    if (offset < 0)
        return -EINVAL;
    if (count > SSIZE_MAX)
        count = SSIZE_MAX;
    if ((uint64_t)offset + count > (uint64_t)INT64_MAX)
        return -EFBIG;
    size_t done = 0;
    while (done < count) {
        size_t want = count - done < API_IO_CHUNK ? count - done : API_IO_CHUNK;
        struct bfs_write_req req = {0};
        struct bfs_write_rep rep;
        req.fd = fd->fd;
        req.data.data = (const char *)buf + done;
        req.data.len = want;
        req.offset = (uint64_t)offset + done;
        int rc = bfs_sync_write(top_of(fd), st, &req, &rep);
        if (end)
            *end = rep.post.size;
        bfs_write_rep_clear_dup(&rep);
        if (rc < 0)
            return done ? (ssize_t)done : rc;
        /* rc > 0 is the count written (a short one ends the transfer);
         * a translator answering 0 for "all of it" is taken at its word */
        size_t n = rc > 0 && (size_t)rc < want ? (size_t)rc : want;
        done += n;
        if (n < want)
            break;
    }
    return (ssize_t)done;
}

ssize_t brickfs_pread(brickfs_fd_t *fd, void *buf, size_t count, off_t offset)
{
    int rc = fd_check(fd);
    if (rc < 0)
        return bfs__api_ret(rc);
    if (count == 0)
        return 0;
    struct bfs_stack *st = bfs__api_fd_stack(fd);
    if (!st)
        return bfs__api_ret(-ENOMEM);
    ssize_t n = do_pread(fd, st, buf, count, offset);
    bfs_stack_unref(st);
    return bfs__api_ret(n);
}

ssize_t brickfs_pwrite(brickfs_fd_t *fd, const void *buf, size_t count, off_t offset)
{
    int rc = fd_check(fd);
    if (rc < 0)
        return bfs__api_ret(rc);
    if (count == 0)
        return fd->is_dir ? bfs__api_ret(-EISDIR) : 0;
    struct bfs_stack *st = bfs__api_fd_stack(fd);
    if (!st)
        return bfs__api_ret(-ENOMEM);
    ssize_t n = do_pwrite(fd, st, buf, count, offset, NULL);
    bfs_stack_unref(st);
    return bfs__api_ret(n);
}

ssize_t brickfs_read(brickfs_fd_t *fd, void *buf, size_t count)
{
    int rc = fd_check(fd);
    if (rc < 0)
        return bfs__api_ret(rc);
    struct bfs_stack *st = bfs__api_fd_stack(fd);
    if (!st)
        return bfs__api_ret(-ENOMEM);
    pthread_mutex_lock(&fd->lock);
    ssize_t n = count ? do_pread(fd, st, buf, count, fd->offset) : 0;
    if (n > 0)
        fd->offset += n;
    pthread_mutex_unlock(&fd->lock);
    bfs_stack_unref(st);
    return bfs__api_ret(n);
}

ssize_t brickfs_write(brickfs_fd_t *fd, const void *buf, size_t count)
{
    int rc = fd_check(fd);
    if (rc < 0)
        return bfs__api_ret(rc);
    if (count == 0)
        return 0;
    struct bfs_stack *st = bfs__api_fd_stack(fd);
    if (!st)
        return bfs__api_ret(-ENOMEM);
    pthread_mutex_lock(&fd->lock);
    uint64_t end = 0;
    ssize_t n = do_pwrite(fd, st, buf, count, fd->offset, &end);
    if (n > 0) {
        /* the brick appended for an O_APPEND handle: we are at its end */
        if ((fd->flags & O_APPEND) && end > 0)
            fd->offset = (off_t)end;
        else
            fd->offset += n;
    }
    pthread_mutex_unlock(&fd->lock);
    bfs_stack_unref(st);
    return bfs__api_ret(n);
}

static int do_fstat_size(struct brickfs_fd *fd, struct bfs_stack *st, uint64_t *size)
{
    struct bfs_fstat_req req = {0};
    struct bfs_fstat_rep rep;
    req.fd = fd->fd;
    int rc = bfs_sync_fstat(top_of(fd), st, &req, &rep);
    *size = rep.attr.size;
    bfs_fstat_rep_clear_dup(&rep);
    return rc < 0 ? rc : 0;
}

static off_t do_seek_data(struct brickfs_fd *fd, struct bfs_stack *st, off_t offset, int what)
{
    if (offset < 0)
        return -ENXIO;
    struct bfs_seek_req req = {0};
    struct bfs_seek_rep rep;
    req.fd = fd->fd;
    req.offset = (uint64_t)offset;
    req.what = (uint32_t)what;
    int rc = bfs_sync_seek(top_of(fd), st, &req, &rep);
    uint64_t where = rep.offset;
    bfs_seek_rep_clear_dup(&rep);
    if (rc < 0)
        return rc;
    return where > (uint64_t)INT64_MAX ? -EOVERFLOW : (off_t)where;
}

off_t brickfs_lseek(brickfs_fd_t *fd, off_t offset, int whence)
{
    int rc = fd_check(fd);
    if (rc < 0)
        return bfs__api_ret(rc);
    struct bfs_stack *st = bfs__api_fd_stack(fd);
    if (!st)
        return bfs__api_ret(-ENOMEM);
    pthread_mutex_lock(&fd->lock);
    off_t base = 0, res;
    uint64_t size;
    switch (whence) {
    case SEEK_SET:
        break;
    case SEEK_CUR:
        base = fd->offset;
        break;
    case SEEK_END:
        rc = do_fstat_size(fd, st, &size);
        base = (off_t)size;
        break;
    case SEEK_DATA:
    case SEEK_HOLE:
        rc = fd->is_dir ? -EINVAL : 0;
        break;
    default:
        rc = -EINVAL;
    }
    if (rc < 0)
        res = rc;
    else if (whence == SEEK_DATA || whence == SEEK_HOLE)
        res = do_seek_data(fd, st, offset, whence);
    else if ((offset > 0 && base > INT64_MAX - offset))
        res = -EOVERFLOW;
    else if (base + offset < 0)
        res = -EINVAL;
    else
        res = base + offset;
    if (res >= 0)
        fd->offset = res;
    pthread_mutex_unlock(&fd->lock);
    bfs_stack_unref(st);
    return (off_t)bfs__api_ret(res);
}

static int do_fsync(struct brickfs_fd *fd, uint32_t datasync)
{
    int rc = fd_check(fd);
    if (rc < 0)
        return (int)bfs__api_ret(rc);
    struct bfs_stack *st = bfs__api_fd_stack(fd);
    if (!st)
        return (int)bfs__api_ret(-ENOMEM);
    if (fd->is_dir) {
        struct bfs_fsyncdir_req req = {0};
        req.fd = fd->fd;
        req.datasync = datasync;
        rc = bfs_sync_fsyncdir(top_of(fd), st, &req, NULL);
    } else {
        struct bfs_fsync_req req = {0};
        req.fd = fd->fd;
        req.datasync = datasync;
        rc = bfs_sync_fsync(top_of(fd), st, &req, NULL);
    }
    bfs_stack_unref(st);
    return (int)bfs__api_ret(rc < 0 ? rc : 0);
}

int brickfs_fsync(brickfs_fd_t *fd)
{
    return do_fsync(fd, 0);
}

int brickfs_fdatasync(brickfs_fd_t *fd)
{
    return do_fsync(fd, 1);
}

int brickfs_ftruncate(brickfs_fd_t *fd, off_t length)
{
    int rc = fd_check(fd);
    if (rc < 0)
        return (int)bfs__api_ret(rc);
    /* like Linux: a handle not open for writing, or a directory, is EINVAL */
    if (length < 0 || fd->is_dir || !fd_writable(fd))
        return (int)bfs__api_ret(-EINVAL);
    struct bfs_stack *st = bfs__api_fd_stack(fd);
    if (!st)
        return (int)bfs__api_ret(-ENOMEM);
    struct bfs_ftruncate_req req = {0};
    req.fd = fd->fd;
    req.offset = (uint64_t)length;
    rc = bfs_sync_ftruncate(top_of(fd), st, &req, NULL);
    bfs_stack_unref(st);
    return (int)bfs__api_ret(rc < 0 ? rc : 0);
}

/* fallocate (mode >= 0), discard (-1), zerofill (-2). */
static int do_alloc(struct brickfs_fd *fd, int mode, off_t offset, off_t len)
{
    int rc = fd_check(fd);
    if (rc < 0)
        return rc;
    if (offset < 0 || len <= 0 || offset > INT64_MAX - len)
        return offset > 0 && len > 0 ? -EFBIG : -EINVAL;
    if (fd->is_dir)
        return -EISDIR;
    if (!fd_writable(fd))
        return -EBADF;
    struct bfs_stack *st = bfs__api_fd_stack(fd);
    if (!st)
        return -ENOMEM;
    if (mode >= 0) {
        struct bfs_fallocate_req req = {0};
        req.fd = fd->fd;
        req.mode = (uint32_t)mode;
        req.offset = (uint64_t)offset;
        req.len = (uint64_t)len;
        rc = bfs_sync_fallocate(top_of(fd), st, &req, NULL);
    } else if (mode == -1) {
        struct bfs_discard_req req = {0};
        req.fd = fd->fd;
        req.offset = (uint64_t)offset;
        req.len = (uint64_t)len;
        rc = bfs_sync_discard(top_of(fd), st, &req, NULL);
    } else {
        struct bfs_zerofill_req req = {0};
        req.fd = fd->fd;
        req.offset = (uint64_t)offset;
        req.len = (uint64_t)len;
        rc = bfs_sync_zerofill(top_of(fd), st, &req, NULL);
    }
    bfs_stack_unref(st);
    return rc < 0 ? rc : 0;
}

int brickfs_fallocate(brickfs_fd_t *fd, int mode, off_t offset, off_t len)
{
    if (mode < 0)
        return (int)bfs__api_ret(-EINVAL);
    return (int)bfs__api_ret(do_alloc(fd, mode, offset, len));
}

int brickfs_discard(brickfs_fd_t *fd, off_t offset, off_t len)
{
    return (int)bfs__api_ret(do_alloc(fd, -1, offset, len));
}

int brickfs_zerofill(brickfs_fd_t *fd, off_t offset, off_t len)
{
    return (int)bfs__api_ret(do_alloc(fd, -2, offset, len));
}

/* struct flock (any whence, negative length) -> absolute [start, start+len). */
static int lock_range(struct brickfs_fd *fd, struct bfs_stack *st, const struct flock *fl,
                      uint64_t *start, uint64_t *len)
{
    int64_t base = 0;
    uint64_t size;
    int rc;
    switch (fl->l_whence) {
    case SEEK_SET:
        break;
    case SEEK_CUR:
        pthread_mutex_lock(&fd->lock);
        base = fd->offset;
        pthread_mutex_unlock(&fd->lock);
        break;
    case SEEK_END:
        if ((rc = do_fstat_size(fd, st, &size)) < 0)
            return rc;
        base = (int64_t)size;
        break;
    default:
        return -EINVAL;
    }
    int64_t s = base + (int64_t)fl->l_start, l = (int64_t)fl->l_len;
    if (l < 0) {
        s += l;
        l = -l;
    }
    if (s < 0)
        return -EINVAL;
    *start = (uint64_t)s;
    *len = (uint64_t)l;
    return 0;
}

static int lock_cmd(int cmd)
{
    switch (cmd) {
    case F_GETLK:
#ifdef F_OFD_GETLK
    case F_OFD_GETLK:
#endif
        return BFS_LK_GETLK;
    case F_SETLK:
#ifdef F_OFD_SETLK
    case F_OFD_SETLK:
#endif
        return BFS_LK_SETLK;
    case F_SETLKW:
#ifdef F_OFD_SETLKW
    case F_OFD_SETLKW:
#endif
        return BFS_LK_SETLKW;
    }
    return -EINVAL;
}

static int do_lock(struct brickfs_fd *fd, int cmd, struct flock *fl)
{
    int rc = fd_check(fd);
    if (rc < 0)
        return rc;
    int lk = lock_cmd(cmd);
    if (lk < 0 || !fl)
        return -EINVAL;
    if (fl->l_type != F_RDLCK && fl->l_type != F_WRLCK &&
        (fl->l_type != F_UNLCK || lk == BFS_LK_GETLK))
        return -EINVAL;
    if (lk != BFS_LK_GETLK && ((fl->l_type == F_RDLCK && !fd_readable(fd)) ||
                               (fl->l_type == F_WRLCK && !fd_writable(fd))))
        return -EBADF;
    struct bfs_stack *st = bfs__api_fd_stack(fd);
    if (!st)
        return -ENOMEM;
    struct bfs_lk_req req = {0};
    struct bfs_lk_rep rep = {0};
    req.fd = fd->fd;
    req.cmd = (uint32_t)lk;
    req.lock.type = (uint32_t)fl->l_type;
    req.lock.whence = SEEK_SET;
    req.lock.pid = st->pid;
    req.lock.owner = fd->lk_owner;
    rc = lock_range(fd, st, fl, &req.lock.start, &req.lock.len);
    if (rc == 0)
        rc = bfs_sync_lk(top_of(fd), st, &req, &rep);
    if (rc >= 0 && lk == BFS_LK_GETLK) {
        fl->l_type = (short)rep.lock.type;
        if (rep.lock.type != F_UNLCK) {
            fl->l_whence = SEEK_SET;
            fl->l_start = (off_t)rep.lock.start;
            fl->l_len = (off_t)rep.lock.len;
            fl->l_pid = (pid_t)rep.lock.pid;
        }
    }
    bfs_lk_rep_clear_dup(&rep);
    bfs_stack_unref(st);
    return rc < 0 ? rc : 0;
}

int brickfs_posix_lock(brickfs_fd_t *fd, int cmd, struct flock *lock)
{
    return (int)bfs__api_ret(do_lock(fd, cmd, lock));
}
