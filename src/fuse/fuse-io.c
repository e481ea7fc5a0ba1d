/*
 * fuse-io.c — open files: open, create, read, write, flush, release, fsync,
 * fallocate, lseek (SEEK_DATA/SEEK_HOLE), copy_file_range; and the list of
 * open handles.
 *
 * A handle (struct bfs_fuse_fh) is made before the open or create is wound,
 * so its fd can go down with the call. The call owns it until the kernel
 * has accepted the reply; from then on the kernel does, until release.
 * Every handle handed to the kernel is on fu->fhs, so handles a forced
 * unmount never released are still dropped (and their translators'
 * release callbacks run) before the graph goes away.
 *
 * POSIX locks die with close(2): the kernel sends flush with the closing
 * process's lock owner, which we put on the stack (features/locks drops that
 * owner's locks on flush). flock locks belong to the open file and go with
 * its release.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuse/fuse-bridge.h"

/* ---- handles ---- */

struct bfs_fuse_fh *bfs_fuse_fh_new(struct bfs_fuse *fu, struct bfs_inode *inode, int flags,
                                    int is_dir)
{
    struct bfs_fuse_fh *fh = calloc(1, sizeof(*fh));
    if (!fh)
        return NULL;
    /* The fd remembers how the file is open; creation flags were a
     * one-time request (a reopen after a reconnect must not truncate). */
    fh->fd = bfs_fd_new(fu->graph, inode, flags & ~(O_CREAT | O_EXCL | O_TRUNC), is_dir);
    if (!fh->fd) {
        free(fh);
        return NULL;
    }
    return fh;
}

void bfs_fuse_fh_publish(struct bfs_fuse *fu, struct bfs_fuse_fh *fh)
{
    pthread_mutex_lock(&fu->lock);
    fh->next = fu->fhs.next;
    fh->prev = &fu->fhs;
    fu->fhs.next->prev = fh;
    fu->fhs.next = fh;
    pthread_mutex_unlock(&fu->lock);
}

void bfs_fuse_fh_free(struct bfs_fuse *fu, struct bfs_fuse_fh *fh)
{
    pthread_mutex_lock(&fu->lock);
    if (fh->next) {
        fh->prev->next = fh->next;
        fh->next->prev = fh->prev;
        fh->next = fh->prev = NULL;
    }
    pthread_mutex_unlock(&fu->lock);
    bfs_fd_unref(fh->fd); /* the last ref runs the translators' release */
    free(fh);
}

void bfs_fuse_fh_drop_all(struct bfs_fuse *fu)
{
    for (;;) {
        pthread_mutex_lock(&fu->lock);
        struct bfs_fuse_fh *fh = fu->fhs.next != &fu->fhs ? fu->fhs.next : NULL;
        pthread_mutex_unlock(&fu->lock);
        if (!fh)
            return;
        bfs_fuse_fh_free(fu, fh);
    }
}

struct bfs_fd *bfs_fuse_fd_of_inode(struct bfs_fuse *fu, struct bfs_inode *inode)
{
    struct bfs_fd *fd = NULL;
    pthread_mutex_lock(&fu->lock);
    for (struct bfs_fuse_fh *fh = fu->fhs.next; fh != &fu->fhs; fh = fh->next) {
        if (fh->fd->inode == inode && !fh->fd->is_dir) {
            fd = bfs_fd_ref(fh->fd);
            break;
        }
    }
    pthread_mutex_unlock(&fu->lock);
    return fd;
}

/* Replies open/create for c's handle; on success the kernel owns it. */
static int hand_over(struct bfs_fuse_call *c, const struct fuse_entry_param *e)
{
    struct bfs_fuse_fh *fh = c->fh;
    c->fi.fh = (uint64_t)(uintptr_t)fh;
    c->fi.direct_io = c->fu->opts->direct_io;
    c->fi.keep_cache = 0; /* other clients may have changed the file */
    bfs_fuse_fh_publish(c->fu, fh);
    int rc = e ? fuse_reply_create(c->req, e, &c->fi) : fuse_reply_open(c->req, &c->fi);
    if (rc == 0)
        c->fh = NULL; /* the kernel will release it */
    return rc;
}

/* Flags the brick opens with. O_DIRECT stays here: the kernel already
 * bypasses its page cache for it, and the brick's buffers are not aligned
 * for the local file system's O_DIRECT rules. */
static uint32_t brick_flags(int flags)
{
    return (uint32_t)(flags & ~O_DIRECT);
}

/* ---- open and create ---- */

static void open_cbk(struct bfs_frame *frame, void *cookie, int rc, const struct bfs_open_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    if (rc < 0)
        fuse_reply_err(c->req, -rc);
    else
        (void)hand_over(c, NULL);
    bfs_fuse_call_done(c);
}

void bfs_fuse_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_inode *inode = bfs_fuse_inode(fu, ino);
    c->fi = *fi;
    if (!(c->fh = bfs_fuse_fh_new(fu, inode, fi->flags, 0))) {
        bfs_fuse_call_fail(c, -ENOMEM);
        return;
    }
    struct bfs_open_req r = {.fd = c->fh->fd, .flags = brick_flags(fi->flags)};
    bfs_fuse_loc_inode(&r.loc, inode);
    int rc = bfs_wind_open(c->frame, fu->graph->top, open_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

static void create_cbk(struct bfs_frame *frame, void *cookie, int rc,
                       const struct bfs_create_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    struct fuse_entry_param e;
    struct bfs_inode *i = rc < 0 ? NULL : bfs_fuse_entry(c->fu, &rep->attr, &e);
    if (rc >= 0 && !i)
        rc = errno ? -errno : -EIO;
    if (rc < 0) {
        fuse_reply_err(c->req, -rc);
        bfs_fuse_call_done(c);
        return;
    }
    /* Without O_EXCL the name may have appeared since the kernel looked:
     * the brick then opened that file, whose GFID is not the one we picked. */
    struct bfs_fd *fd = c->fh->fd;
    if (fd->inode != i) {
        struct bfs_inode *old = fd->inode;
        fd->inode = bfs_inode_ref(i);
        bfs_inode_unref(old);
    }
    if (hand_over(c, &e) < 0)
        bfs_inode_forget(i, 1); /* interrupted: the kernel never saw it */
    bfs_fuse_call_done(c);
}

void bfs_fuse_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                     struct fuse_file_info *fi)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    struct bfs_inode *dir = bfs_fuse_inode(fu, parent);
    int rc = bfs_fuse_name_check(name);
    if (rc == 0 && bfs_fuse_hidden_entry(fu, dir, name))
        rc = -EPERM;
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    c->fi = *fi;
    /* The new file's identity is ours to pick, so its fd has an inode
     * from the start (the brick may need it before it answers). */
    struct bfs_gfid gfid;
    struct bfs_create_req r = {.xdata = bfs_fuse_gfid_req(&gfid), .flags = brick_flags(fi->flags),
                               .mode = mode, .umask = 0};
    if (r.xdata)
        c->inode = bfs_inode_get(fu->graph->itable, &gfid, S_IFREG);
    if (c->inode)
        c->fh = bfs_fuse_fh_new(fu, c->inode, fi->flags, 0);
    if (!c->fh) {
        bfs_dict_unref(r.xdata);
        bfs_fuse_call_fail(c, -ENOMEM);
        return;
    }
    r.fd = c->fh->fd;
    bfs_fuse_loc_entry(&r.loc, dir, name);
    r.loc.inode = c->inode;
    rc = bfs_wind_create(c->frame, fu->graph->top, create_cbk, NULL, &r);
    bfs_dict_unref(r.xdata);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

/* ---- read and write ---- */

static void read_cbk(struct bfs_frame *frame, void *cookie, int rc, const struct bfs_read_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    if (rc < 0)
        fuse_reply_err(c->req, -rc);
    else
        fuse_reply_buf(c->req, rep->data.data, rep->data.len); /* short at end of file */
    bfs_fuse_call_done(c);
}

void bfs_fuse_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   struct fuse_file_info *fi)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    if (size > BFS_FUSE_MAX_IO)
        size = BFS_FUSE_MAX_IO;
    struct bfs_read_req r = {.fd = bfs_fuse_fh(fi)->fd, .size = (uint32_t)size,
                             .offset = (uint64_t)off};
    int rc = bfs_wind_read(c->frame, fu->graph->top, read_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

static void write_cbk(struct bfs_frame *frame, void *cookie, int rc,
                      const struct bfs_write_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    if (rc < 0)
        fuse_reply_err(c->req, -rc);
    else
        fuse_reply_write(c->req, (size_t)rc); /* rc: bytes written */
    bfs_fuse_call_done(c);
}

/* buf belongs to libfuse and is reused once we return: whoever keeps the
 * request past the wind copies it (the contract of every fop). */
void bfs_fuse_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_write_req r = {.fd = bfs_fuse_fh(fi)->fd, .data = {buf, size},
                              .offset = (uint64_t)off};
    int rc = bfs_wind_write(c->frame, fu->graph->top, write_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

/* ---- flush, release, fsync ---- */

static void flush_cbk(struct bfs_frame *frame, void *cookie, int rc,
                      const struct bfs_flush_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    fuse_reply_err(c->req, rc < 0 ? -rc : 0);
    bfs_fuse_call_done(c);
}

void bfs_fuse_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    struct bfs_fuse_call *c = bfs_fuse_call_new_lk(req, fi->lock_owner);
    if (!c)
        return;
    struct bfs_flush_req r = {.fd = bfs_fuse_fh(fi)->fd};
    int rc = bfs_wind_flush(c->frame, fu->graph->top, flush_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

void bfs_fuse_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    bfs_fuse_fh_free(bfs_fuse_of(req), bfs_fuse_fh(fi));
    fuse_reply_err(req, 0);
}

static void fsync_cbk(struct bfs_frame *frame, void *cookie, int rc,
                      const struct bfs_fsync_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    fuse_reply_err(c->req, rc < 0 ? -rc : 0);
    bfs_fuse_call_done(c);
}

void bfs_fuse_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_fsync_req r = {.fd = bfs_fuse_fh(fi)->fd, .datasync = datasync ? 1 : 0};
    int rc = bfs_wind_fsync(c->frame, fu->graph->top, fsync_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

/* ---- fallocate ----
 * Punching a hole is discard, zeroing a range that may grow the file is
 * zerofill (the fops cluster translators know how to spread); everything
 * else (plain preallocation, KEEP_SIZE, zeroing inside the size) goes down
 * as fallocate with the mode bits, for the brick to apply or refuse
 * (EOPNOTSUPP). The kernel refuses modes FUSE does not carry. */

static void falloc_done(struct bfs_fuse_call *c, int rc)
{
    fuse_reply_err(c->req, rc < 0 ? -rc : 0);
    bfs_fuse_call_done(c);
}

static void fallocate_cbk(struct bfs_frame *frame, void *cookie, int rc,
                          const struct bfs_fallocate_rep *rep)
{
    falloc_done(bfs_fuse_call_of(frame), rc);
}

static void discard_cbk(struct bfs_frame *frame, void *cookie, int rc,
                        const struct bfs_discard_rep *rep)
{
    falloc_done(bfs_fuse_call_of(frame), rc);
}

static void zerofill_cbk(struct bfs_frame *frame, void *cookie, int rc,
                         const struct bfs_zerofill_rep *rep)
{
    falloc_done(bfs_fuse_call_of(frame), rc);
}

void bfs_fuse_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                        struct fuse_file_info *fi)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    if (offset < 0 || length <= 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_fd *fd = bfs_fuse_fh(fi)->fd;
    struct bfs_xl *top = fu->graph->top;
    uint64_t off = (uint64_t)offset, len = (uint64_t)length;
    int rc;
    if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) {
        struct bfs_discard_req r = {.fd = fd, .offset = off, .len = len};
        rc = bfs_wind_discard(c->frame, top, discard_cbk, NULL, &r);
    } else if (mode == FALLOC_FL_ZERO_RANGE) {
        struct bfs_zerofill_req r = {.fd = fd, .offset = off, .len = len};
        rc = bfs_wind_zerofill(c->frame, top, zerofill_cbk, NULL, &r);
    } else {
        struct bfs_fallocate_req r = {.fd = fd, .mode = (uint32_t)mode, .offset = off,
                                      .len = len};
        rc = bfs_wind_fallocate(c->frame, top, fallocate_cbk, NULL, &r);
    }
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

/* ---- lseek ---- */

static void seek_cbk(struct bfs_frame *frame, void *cookie, int rc, const struct bfs_seek_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    if (rc < 0)
        fuse_reply_err(c->req, -rc);
    else
        fuse_reply_lseek(c->req, (off_t)rep->offset);
    bfs_fuse_call_done(c);
}

/* Only SEEK_DATA and SEEK_HOLE reach us; the kernel does the others. */
void bfs_fuse_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
                    struct fuse_file_info *fi)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    if (whence != SEEK_DATA && whence != SEEK_HOLE) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    if (off < 0) {
        fuse_reply_err(req, ENXIO);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_seek_req r = {.fd = bfs_fuse_fh(fi)->fd, .offset = (uint64_t)off,
                             .what = (uint32_t)whence};
    int rc = bfs_wind_seek(c->frame, fu->graph->top, seek_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

/* ---- copy_file_range ---- */

static void cfr_cbk(struct bfs_frame *frame, void *cookie, int rc,
                    const struct bfs_copy_file_range_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    if (rc < 0)
        fuse_reply_err(c->req, -rc);
    else
        fuse_reply_write(c->req, (size_t)rep->count);
    bfs_fuse_call_done(c);
}

void bfs_fuse_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
                              struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
                              struct fuse_file_info *fi_out, size_t len, int flags)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    if (off_in < 0 || off_out < 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_copy_file_range_req r = {
        .fd_in = bfs_fuse_fh(fi_in)->fd, .off_in = (uint64_t)off_in,
        .fd_out = bfs_fuse_fh(fi_out)->fd, .off_out = (uint64_t)off_out,
        .len = len, .flags = (uint32_t)flags,
    };
    int rc = bfs_wind_copy_file_range(c->frame, fu->graph->top, cfr_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}
