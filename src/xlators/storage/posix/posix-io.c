/*
 * posix-io.c — fops on file data: open, create, read, write, flush, fsync,
 * fallocate, discard, zerofill, seek, copy_file_range.
 *
 * open and create attach a struct px_fd (the real kernel fd) to the
 * caller's bfs_fd; every other fop here works on that kernel fd, so a file
 * unlinked while open stays readable and writable, as locally.
 *
 * open reopens the resolved O_PATH fd through /proc/self/fd/N as the caller:
 * permissions are checked on the inode, O_TRUNC truncates as the caller. Only
 * regular files and directories (read-only) are opened: a FIFO, socket or
 * device on a brick is never opened by the server (-ENXIO; a client's
 * kernel handles special files itself), a symlink never (-ELOOP).
 * Open flags kept: access mode, O_APPEND, O_TRUNC, O_SYNC, O_DSYNC,
 * O_NOATIME; others (O_DIRECT included, whose alignment rules a network
 * buffer cannot promise) are dropped.
 *
 * A write of at least storage.uncached-write-min bytes goes with
 * RWF_DONTCACHE (write_at; docs/design/uncached-io.md): the kernel
 * starts its writeback at once and drops its pages when it is done. A read
 * of at least storage.uncached-read-min bytes too (read_at): what it brings
 * into the page cache is dropped once copied out; such a read of a range
 * not in the page cache goes with O_DIRECT instead (posix-direct.c).
 *
 * A write may carry deltas of counter xattrs to add once it is written
 * (lib/wadd-wire.h: disperse's size counter rides in its fragment write).
 *
 * Return values: read, write and copy_file_range answer rc = bytes done
 * (read also fills data and eof; a read longer than PX_READ_MAX is short).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "posix.h"
#include "xlators/lib/wadd-wire.h"

#define PX_OPEN_FLAGS (O_ACCMODE | O_APPEND | O_TRUNC | O_SYNC | O_DSYNC | O_NOATIME)
#define PX_FALLOC_OK (FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)
#define PX_ZERO_CHUNK (1u << 20)

static bool range_ok(uint64_t off, uint64_t len)
{
    return off <= (uint64_t)INT64_MAX && len <= (uint64_t)INT64_MAX - off;
}

/* Opens an existing object (O_PATH fd) for I/O as the caller. */
static int open_existing(const struct px_obj *o, int flags)
{
    switch (o->st.st_mode & S_IFMT) {
    case S_IFREG:
        break;
    case S_IFDIR:
        if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
            return -EISDIR;
        flags |= O_DIRECTORY;
        break;
    case S_IFLNK:
        return -ELOOP;
    default:
        return -ENXIO;
    }
    return bfs__px_reopen(o->fd, flags);
}

/* open's xdata PX_OPEN_PREFETCH_KEY: the whole file, if it is small enough,
 * read as the caller through the fd just opened, into rep->xdata. Failing
 * to is not the open's failure: the client then reads as usual. After a
 * read, rep->attr is taken again: the reply's attributes are the file's as
 * the reads answered from these bytes leave it (its atime moved), which
 * md-cache keeps (cache-invalidation.md, "open"). */
static void open_prefetch(const struct bfs_open_req *req, int fd, const struct bfs_gfid *gfid,
                          struct bfs_open_rep *rep)
{
    int64_t max = 0;
    if ((req->flags & (O_ACCMODE | O_TRUNC)) != O_RDONLY ||
        bfs_dict_get_int(req->xdata, PX_OPEN_PREFETCH_KEY, &max) < 0 || max <= 0 ||
        max > PX_PREFETCH_MAX || (rep->attr.mode & S_IFMT) != S_IFREG ||
        rep->attr.size > (uint64_t)max)
        return;
    char *buf = malloc((size_t)max + 1);
    ssize_t n = buf ? SYS.pread(fd, buf, (size_t)max + 1, 0) : -1;
    /* n > max: it grew since the fstat; the client reads it the usual way */
    if (n >= 0 && n <= max && (rep->xdata || (rep->xdata = bfs_dict_new())))
        (void)bfs_dict_set_bin(rep->xdata, PX_OPEN_PREFETCH_KEY, buf, (size_t)n);
    free(buf);
    struct bfs_iatt after;
    if (n >= 0 && bfs__px_fstat_iatt(fd, gfid, &after) >= 0)
        rep->attr = after; /* else the open's own: only the atime may be older */
}

static int do_open(struct px_job *j, const struct bfs_open_req *req, struct bfs_open_rep *rep)
{
    struct px_obj o = PX_OBJ_INIT;
    if (!req->fd)
        return -EINVAL;
    int rc = bfs__px_resolve_loc(j->priv, &req->loc, &o);
    int fd = -1;
    if (rc == 0)
        rc = fd = open_existing(&o, (int)(req->flags & PX_OPEN_FLAGS));
    if (rc >= 0)
        rc = bfs__px_fstat_iatt(fd, &o.gfid, &rep->attr);
    if (rc >= 0)
        rc = bfs__px_fd_install(j, req->fd, fd, NULL, &o.gfid);
    else if (fd >= 0)
        SYS.close(fd);
    if (rc >= 0 && req->xdata)
        open_prefetch(req, fd, &o.gfid, rep); /* fd now belongs to req->fd, still open */
    bfs__px_obj_close(&o);
    return rc;
}
PX_FOP_DEFINE(open, BFS_FOP_OPEN)

/* ---- create ---- */

/* O_CREAT|O_EXCL first, so we know whether the file is new; without
 * O_EXCL from the client an existing file is opened instead (looping if
 * it vanishes in between), by a worker if O_TRUNC would truncate it. Returns the fd, *created says which. An
 * existing symlink at the name is not followed: -ELOOP. */
static int create_open(struct px_job *j, const struct bfs_create_req *req,
                       const struct px_obj *par, struct px_obj *o, bool *created)
{
    int flags = (int)(req->flags & PX_OPEN_FLAGS);
    for (int attempt = 0; attempt < 4; attempt++) {
        mode_t mode = req->mode & 07777;
        mode_t old = bfs__px_umask_push(req->umask, &mode);
        int fd = SYS.openat(par->fd, req->loc.name,
                            flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        int err = errno;
        bfs__px_umask_pop(old);
        if (fd >= 0) {
            /* a regular file, attributes unknown (st_ino 0): bfs__px_assign
             * takes them once its handle is made, as the answer's */
            *created = true;
            o->fd = fd;
            o->st = (struct stat){.st_mode = S_IFREG};
            return fd;
        }
        if (err != EEXIST || (req->flags & O_EXCL))
            return -err;
        if ((flags & O_TRUNC) && j->inline_run)
            return -PX_EWORKER; /* truncating may free many blocks */
        int rc = bfs__px_resolve_entry(j->priv, par, req->loc.name, o);
        if (rc == -ENOENT)
            continue;
        if (rc < 0)
            return rc;
        *created = false;
        rc = S_ISDIR(o->st.st_mode) ? -EISDIR : open_existing(o, flags);
        return rc;
    }
    return -ESTALE;
}

/* The file create_open gave: a new one gets its GFID and handle (removed
 * again on failure); an existing one must have the requested GFID. */
static int create_identity(struct px_job *j, const struct bfs_create_req *req,
                           const struct px_obj *par, struct px_obj *o, int fd, bool created)
{
    struct bfs_gfid g;
    bool requested;
    int rc = bfs__px_gfid_for_new(req->xdata, &g, &requested);
    if (rc < 0)
        return rc;
    if (!created && !bfs_gfid_is_null(&o->gfid))
        return requested && !bfs_gfid_eq(&o->gfid, &g) ? -EEXIST : 0;
    /* new, or existing without a GFID (adopted): assign on the open fd */
    struct px_obj tmp = {.fd = fd, .io = true, .st = o->st};
    rc = bfs__px_assign(j->priv, &tmp, &g, &req->loc.pargfid, req->loc.name);
    if (rc == 0) {
        o->gfid = g;
        o->st = tmp.st;
    } else if (created) {
        bfs__px_root_begin();
        (void)SYS.unlinkat(par->fd, req->loc.name, 0);
        bfs__px_root_end();
    }
    return rc;
}

static int do_create(struct px_job *j, const struct bfs_create_req *req,
                     struct bfs_create_rep *rep)
{
    struct px_obj par = PX_OBJ_INIT, o = PX_OBJ_INIT;
    bool created = false;
    int fd = -1;
    if (!req->fd)
        return -EINVAL;
    int rc = bfs__px_resolve_parent(j->priv, &req->loc, true, &par);
    if (rc == 0) {
        /* the resolution's own fstat, just made, is the pre-op state */
        bfs__px_iatt(&par.st, &req->loc.pargfid, &rep->preparent);
        pthread_mutex_t *el = bfs__px_elock_for(j->priv, &req->loc.pargfid);
        pthread_mutex_lock(el);
        rc = fd = create_open(j, req, &par, &o, &created);
        if (created && o.fd == fd)
            o.fd = -1; /* the O_EXCL fd is the file's one fd: fd owns it */
        if (rc >= 0)
            rc = create_identity(j, req, &par, &o, fd, created);
        pthread_mutex_unlock(el);
    }
    /* a new file's attributes were taken after its handle (bfs__px_assign) */
    if (rc >= 0 && created && o.st.st_ino != 0)
        bfs__px_iatt(&o.st, &o.gfid, &rep->attr);
    else if (rc >= 0)
        rc = bfs__px_fstat_iatt(fd, &o.gfid, &rep->attr);
    if (rc >= 0)
        rc = bfs__px_fstat_iatt(par.fd, &req->loc.pargfid, &rep->postparent);
    if (rc >= 0)
        rc = bfs__px_fd_install(j, req->fd, fd, NULL, &o.gfid);
    else if (fd >= 0)
        SYS.close(fd);
    /* features/index: a new inode has no counters to read */
    if (rc >= 0 && created && (rep->xdata = bfs_dict_new()))
        (void)bfs_dict_set_int(rep->xdata, PX_CREATED_KEY, 1);
    bfs__px_obj_close(&o);
    bfs__px_obj_close(&par);
    return rc;
}
PX_FOP_DEFINE(create, BFS_FOP_CREATE)

/* ---- read, write ---- */

#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x00000080 /* Linux 6.14 uapi; Debian 12's headers predate it */
#endif

/* Whether an I/O of len bytes goes with RWF_DONTCACHE (u: the brick's rule
 * for that direction). */
static bool uncached(struct px_uncached *u, size_t len)
{
    return u->min && len >= u->min && !__atomic_load_n(&u->off, __ATOMIC_RELAXED);
}

/* The kernel or file system refused the flag (EOPNOTSUPP, before Linux
 * 6.14): said once, plain calls from then on. */
static void uncached_refused(struct px_job *j, struct px_uncached *u, const char *what,
                             const char *option)
{
    if (!__atomic_exchange_n(&u->off, true, __ATOMIC_RELAXED))
        XL_WARN(j->xl, "%s: the kernel or file system does not take uncached %s "
                "(RWF_DONTCACHE: Linux 6.14 or later on ext4, XFS or btrfs); big %s "
                "go through the page cache, %s 0 says so",
                j->priv->brick, what, what, option);
}

/* One pread at off. A streaming read (at least uc_read.min bytes) goes with
 * RWF_DONTCACHE: what is cached already is read from the cache and stays,
 * what the read brings in is dropped once copied out, so a brick streaming
 * a big file to a client (which caches it itself) reuses a few pages instead
 * of taking fresh ones for every MiB and evicting its hot small files. */
static ssize_t read_at(struct px_job *j, int fd, void *buf, size_t len, off_t off)
{
    struct px_uncached *u = &j->priv->uc_read;
    if (uncached(u, len)) {
        struct iovec iov = {.iov_base = buf, .iov_len = len};
        ssize_t n = SYS.preadv2(fd, &iov, 1, off, RWF_DONTCACHE);
        if (n >= 0)
            __atomic_add_fetch(&u->done, 1, __ATOMIC_RELAXED);
        if (n >= 0 || errno != EOPNOTSUPP)
            return n;
        uncached_refused(j, u, "reads", "storage.uncached-read-min");
    }
    return SYS.pread(fd, buf, len, off);
}

/* One pwrite at off. A streaming write (at least uc_write.min bytes) goes
 * with RWF_DONTCACHE: the data lands in the page cache as usual (no
 * alignment rules, reads see it, fsync works as always), but writeback of
 * the range starts at once and its pages are freed when it is done, so a
 * brick receiving a big file does not fill the page cache with data nobody
 * will read from there (its clients cache what they read) and reuses the
 * same few pages instead of taking fresh ones for every MiB. */
static ssize_t write_at(struct px_job *j, int fd, const void *buf, size_t len, off_t off)
{
    struct px_uncached *u = &j->priv->uc_write;
    if (uncached(u, len)) {
        struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
        ssize_t n = SYS.pwritev2(fd, &iov, 1, off, RWF_DONTCACHE);
        if (n >= 0)
            __atomic_add_fetch(&u->done, 1, __ATOMIC_RELAXED);
        if (n >= 0 || errno != EOPNOTSUPP)
            return n;
        uncached_refused(j, u, "writes", "storage.uncached-write-min");
    }
    return SYS.pwrite(fd, buf, len, off);
}

static int do_read(struct px_job *j, const struct bfs_read_req *req, struct bfs_read_rep *rep)
{
    struct px_fd *pf;
    size_t size = req->size < PX_READ_MAX ? req->size : PX_READ_MAX, done = 0;
    if (!range_ok(req->offset, size))
        return -EINVAL;
    int rc = bfs__px_fd_get(j, req->fd, &pf);
    if (rc < 0)
        return rc;
    size_t room;
    char *buf = bfs__px_read_buf(j->priv, size, &room);
    if (!buf)
        return -ENOMEM;
    rep->data.data = buf; /* freed by the job with the reply */
    while (done < size) {
        size_t got = 0;
        off_t at = (off_t)(req->offset + done);
        rc = bfs__px_direct_read(j, pf, buf + done, size - done, room - done, at, &got);
        if (rc < 0)
            return rc;
        ssize_t n = rc ? (ssize_t)got : read_at(j, pf->fd, buf + done, size - done, at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        done += (size_t)n;
    }
    rep->data.len = done;
    rc = bfs__px_fstat_iatt(pf->fd, &pf->gfid, &rep->attr);
    if (rc < 0)
        return rc;
    rep->eof = done < size || req->offset + done >= rep->attr.size;
    return (int)done;
}
PX_FOP_DEFINE(read, BFS_FOP_READ)

struct wadd_arg {
    struct bfs_dict *deltas;
    bool asked;
};

static int wadd_collect(const char *key, enum bfs_val_type type, const void *val, size_t len,
                        void *arg)
{
    struct wadd_arg *a = arg;
    if (strcmp(key, BFS_WADD_PROBE) == 0)
        a->asked = true;
    if (strncmp(key, BFS_WADD, BFS_WADD_LEN) != 0)
        return 0;
    a->asked = true;
    if (type != BFS_VAL_BIN || !key[BFS_WADD_LEN])
        return -EINVAL;
    if (!a->deltas && !(a->deltas = bfs_dict_new()))
        return -ENOMEM;
    return bfs_dict_set_bin(a->deltas, key + BFS_WADD_LEN, val, len);
}

/* After a write: the counters its xdata moves with it (lib/wadd-wire.h),
 * and the acknowledgement in the reply. 0 or -errno. */
static int write_adds(struct px_job *j, struct px_fd *pf, const struct bfs_dict *xdata,
                      struct bfs_write_rep *rep)
{
    struct wadd_arg a = {0};
    int rc = bfs_dict_foreach(xdata, wadd_collect, &a);
    if (rc == 0 && a.deltas)
        rc = bfs__px_fd_add64(j, pf, a.deltas);
    bfs_dict_unref(a.deltas);
    if (rc == 0 && a.asked && (rep->xdata = bfs_dict_new()))
        (void)bfs_dict_set_int(rep->xdata, BFS_WADDED, 1);
    return rc;
}

static int do_write(struct px_job *j, const struct bfs_write_req *req, struct bfs_write_rep *rep)
{
    struct px_fd *pf;
    size_t len = req->data.len, done = 0;
    if (len > INT_MAX || !range_ok(req->offset, len) || (len && !req->data.data))
        return -EINVAL;
    int rc = bfs__px_fd_get(j, req->fd, &pf);
    if (rc == 0)
        rc = bfs__px_fstat_iatt(pf->fd, &pf->gfid, &rep->pre);
    while (rc == 0 && done < len) {
        ssize_t n = write_at(j, pf->fd, (const char *)req->data.data + done, len - done,
                             (off_t)(req->offset + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && done == 0)
            rc = -errno;
        if (n <= 0)
            break; /* a partial write is reported as such */
        done += (size_t)n;
    }
    if (rc == 0)
        rc = bfs__px_fstat_iatt(pf->fd, &pf->gfid, &rep->post);
    if (rc == 0)
        bfs__px_keep_frozen(pf->fd, &rep->pre, &rep->post);
    if (rc == 0 && done && req->xdata)
        rc = write_adds(j, pf, req->xdata, rep);
    return rc < 0 ? rc : (int)done;
}
PX_FOP_DEFINE(write, BFS_FOP_WRITE)

/* Nothing is buffered here: answered at once, on the calling thread. */
int bfs__px_flush(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_flush_req *req)
{
    uint64_t v;
    int rc = req->fd && bfs_fd_ctx_get(req->fd, xl, &v) == 0 ? 0 : -EBADF;
    bfs_unwind_flush(frame, rc, NULL);
    return 0;
}

static int do_fsync(struct px_job *j, const struct bfs_fsync_req *req, struct bfs_fsync_rep *rep)
{
    struct px_fd *pf;
    int rc = bfs__px_fd_get(j, req->fd, &pf);
    if (rc == 0)
        rc = bfs__px_fstat_iatt(pf->fd, &pf->gfid, &rep->pre);
    if (rc == 0 && (req->datasync ? SYS.fdatasync(pf->fd) : SYS.fsync(pf->fd)) < 0)
        rc = -errno;
    if (rc == 0)
        rc = bfs__px_fstat_iatt(pf->fd, &pf->gfid, &rep->post);
    return rc;
}
PX_FOP_DEFINE(fsync, BFS_FOP_FSYNC)

/* ---- fallocate, discard, zerofill ---- */

/* Zeroes by writing, where the file system has no FALLOC_FL_ZERO_RANGE. */
static int write_zeros(int fd, uint64_t off, uint64_t len)
{
    char *z = calloc(1, PX_ZERO_CHUNK);
    if (!z)
        return -ENOMEM;
    int rc = 0;
    while (len > 0) {
        size_t n = len < PX_ZERO_CHUNK ? (size_t)len : PX_ZERO_CHUNK;
        ssize_t w = SYS.pwrite(fd, z, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            rc = w < 0 ? -errno : -EIO;
            break;
        }
        off += (uint64_t)w;
        len -= (uint64_t)w;
    }
    free(z);
    return rc;
}

/* fallocate(2) on the fd between a pre and a post stat; zero_fallback:
 * write zeros if the file system lacks ZERO_RANGE. */
static int falloc(struct px_job *j, struct bfs_fd *fd, int mode, uint64_t off, uint64_t len,
                  bool zero_fallback, struct bfs_iatt *pre, struct bfs_iatt *post)
{
    struct px_fd *pf;
    if (!range_ok(off, len) || len == 0)
        return -EINVAL;
    int rc = bfs__px_fd_get(j, fd, &pf);
    if (rc == 0)
        rc = bfs__px_fstat_iatt(pf->fd, &pf->gfid, pre);
    if (rc == 0 && SYS.fallocate(pf->fd, mode, (off_t)off, (off_t)len) < 0) {
        rc = -errno;
        if (zero_fallback && (rc == -EOPNOTSUPP || rc == -ENOSYS))
            rc = write_zeros(pf->fd, off, len);
    }
    if (rc == 0)
        rc = bfs__px_fstat_iatt(pf->fd, &pf->gfid, post);
    if (rc == 0)
        bfs__px_keep_frozen(pf->fd, pre, post);
    return rc;
}

/* mode: FALLOC_FL_KEEP_SIZE, PUNCH_HOLE (with KEEP_SIZE), ZERO_RANGE;
 * any other bit is -EOPNOTSUPP. */
static int do_fallocate(struct px_job *j, const struct bfs_fallocate_req *req,
                        struct bfs_fallocate_rep *rep)
{
    if (req->mode & ~(uint32_t)PX_FALLOC_OK)
        return -EOPNOTSUPP;
    return falloc(j, req->fd, (int)req->mode, req->offset, req->len, false, &rep->pre,
                  &rep->post);
}
PX_FOP_DEFINE(fallocate, BFS_FOP_FALLOCATE)

static int do_discard(struct px_job *j, const struct bfs_discard_req *req,
                      struct bfs_discard_rep *rep)
{
    return falloc(j, req->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, req->offset,
                  req->len, false, &rep->pre, &rep->post);
}
PX_FOP_DEFINE(discard, BFS_FOP_DISCARD)

/* The range reads back as zeros afterwards (and extends the file if it
 * goes past the end, as ZERO_RANGE without KEEP_SIZE does). */
static int do_zerofill(struct px_job *j, const struct bfs_zerofill_req *req,
                       struct bfs_zerofill_rep *rep)
{
    return falloc(j, req->fd, FALLOC_FL_ZERO_RANGE, req->offset, req->len, true, &rep->pre,
                  &rep->post);
}
PX_FOP_DEFINE(zerofill, BFS_FOP_ZEROFILL)

/* ---- seek, copy_file_range ---- */

/* what: SEEK_DATA or SEEK_HOLE (Linux values); past the end is -ENXIO. */
static int do_seek(struct px_job *j, const struct bfs_seek_req *req, struct bfs_seek_rep *rep)
{
    struct px_fd *pf;
    if (req->what != SEEK_DATA && req->what != SEEK_HOLE)
        return -EINVAL;
    if (req->offset > (uint64_t)INT64_MAX)
        return -ENXIO;
    int rc = bfs__px_fd_get(j, req->fd, &pf);
    if (rc < 0)
        return rc;
    off_t off = SYS.lseek(pf->fd, (off_t)req->offset, (int)req->what);
    if (off < 0)
        return -errno;
    rep->offset = (uint64_t)off;
    return 0;
}
PX_FOP_DEFINE(seek, BFS_FOP_SEEK)

static int do_copy_file_range(struct px_job *j, const struct bfs_copy_file_range_req *req,
                              struct bfs_copy_file_range_rep *rep)
{
    struct px_fd *in, *out;
    if (!range_ok(req->off_in, req->len) || !range_ok(req->off_out, req->len))
        return -EINVAL;
    int rc = bfs__px_fd_get(j, req->fd_in, &in);
    if (rc == 0)
        rc = bfs__px_fd_get(j, req->fd_out, &out);
    if (rc == 0)
        rc = bfs__px_fstat_iatt(out->fd, &out->gfid, &rep->pre_out);
    if (rc < 0)
        return rc;
    off_t oin = (off_t)req->off_in, oout = (off_t)req->off_out;
    size_t len = req->len > (uint64_t)INT_MAX ? (size_t)INT_MAX : (size_t)req->len;
    ssize_t n = SYS.copy_file_range(in->fd, &oin, out->fd, &oout, len, req->flags);
    if (n < 0)
        return -errno;
    rep->count = (uint64_t)n;
    rc = bfs__px_fstat_iatt(in->fd, &in->gfid, &rep->attr_in);
    if (rc == 0)
        rc = bfs__px_fstat_iatt(out->fd, &out->gfid, &rep->post_out);
    return rc < 0 ? rc : (int)n;
}
PX_FOP_DEFINE(copy_file_range, BFS_FOP_COPY_FILE_RANGE)
