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
 * release callbacks run) before the graph goes away, and so a graph switch
 * finds them to move them (fuse-switch.c). A handle is refcounted under
 * fu->lock: the kernel's reference, plus one while a switch moves it; its
 * generation counts it (gr->fds) until its fd has been released.
 *
 * Requests through a handle take its fd with bfs_fuse_call_fd, which binds
 * the call to the fd's generation and holds the fd until the call ends: a
 * switch may replace the handle's fd at any time.
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

struct bfs_fuse_fh *bfs_fuse_fh_new(struct bfs_fuse_call *c, struct bfs_inode *inode, int flags,
                                    int is_dir)
{
    struct bfs_fuse *fu = c->fu;
    struct bfs_fuse_fh *fh = calloc(1, sizeof(*fh));
    if (!fh)
        return NULL;
    /* The fd remembers how the file is open; creation flags were a
     * one-time request (a reopen after a reconnect must not truncate). */
    fh->fd = bfs_fd_new(c->gr->g, inode, flags & ~(O_CREAT | O_EXCL | O_TRUNC), is_dir);
    if (!fh->fd) {
        free(fh);
        return NULL;
    }
    fh->refs = 1;
    pthread_mutex_lock(&fu->lock);
    fh->gr = c->gr;
    fh->gr->fds++;
    pthread_mutex_unlock(&fu->lock);
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

void bfs_fuse_fh_unref(struct bfs_fuse *fu, struct bfs_fuse_fh *fh)
{
    pthread_mutex_lock(&fu->lock);
    bool last = --fh->refs == 0;
    pthread_mutex_unlock(&fu->lock);
    if (!last)
        return;
    struct bfs_fuse_graph *gr = fh->gr;
    bfs_fd_unref(fh->fd); /* the last ref runs the translators' release */
    free(fh);
    /* Last: once it stops counting, gr may be freed (a retired generation). */
    pthread_mutex_lock(&fu->lock);
    if (--gr->fds == 0)
        pthread_cond_broadcast(&fu->cond);
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
    fh->released = true;
    if (fh->pinned)
        fu->pinned--;
    pthread_mutex_unlock(&fu->lock);
    bfs_fuse_fh_unref(fu, fh);
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

struct bfs_fd *bfs_fuse_fd_of_inode(struct bfs_fuse *fu, struct bfs_fuse_graph *gr,
                                    const struct bfs_gfid *g)
{
    struct bfs_fd *fd = NULL;
    pthread_mutex_lock(&fu->lock);
    for (struct bfs_fuse_fh *fh = fu->fhs.next; fh != &fu->fhs; fh = fh->next) {
        if (fh->gr == gr && !fh->fd->is_dir && fh->fd->inode &&
            bfs_gfid_eq(&fh->fd->inode->gfid, g)) {
            fd = bfs_fd_ref(fh->fd);
            break;
        }
    }
    pthread_mutex_unlock(&fu->lock);
    return fd;
}

/*
 * Whether the kernel bypasses its page cache for this open (direct-io=;
 * docs/design/fuse-direct-writes.md). By default a write-only open does:
 * its data then goes from the writer's buffer to us in one copy, with no
 * page cache pages to fill and reclaim (a streaming write ~2x faster), and
 * such a file cannot be mapped or read through that open anyway. Not for a
 * file with a privilege bit a write must clear: the kernel clears it only
 * on writes through its page cache (the brick would clear it behind the
 * kernel's and md-cache's back); nor with the capability option, for the
 * same reason (security.capability). mode: the file's, from the reply.
 */
static bool wants_direct_io(const struct bfs_fuse_call *c, uint32_t mode)
{
    const struct bfs_fuse_opts *o = c->fu->opts;
    const uint32_t sgid_x = S_ISGID | S_IXGRP;
    if (o->direct_io != BFS_FUSE_DIO_AUTO)
        return o->direct_io == BFS_FUSE_DIO_ON;
    if ((c->fi.flags & O_ACCMODE) != O_WRONLY || o->capability || !S_ISREG(mode))
        return false;
    return !(mode & S_ISUID) && (mode & sgid_x) != sgid_x;
}

/* Replies open/create for c's handle (a file of this mode); on success
 * the kernel owns it. */
static int hand_over(struct bfs_fuse_call *c, const struct fuse_entry_param *e, uint32_t mode)
{
    struct bfs_fuse_fh *fh = c->fh;
    c->fi.fh = (uint64_t)(uintptr_t)fh;
    c->fi.direct_io = wants_direct_io(c, mode);
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
    rc = bfs_fuse_by_inode_rc(c, rc);
    if (rc < 0)
        fuse_reply_err(c->req, -rc);
    else
        (void)hand_over(c, NULL, rep->attr.mode);
    bfs_fuse_call_done(c);
}

void bfs_fuse_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    bfs_fuse_readahead_apply(bfs_fuse_of(req));
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_inode *inode = bfs_fuse_inode(c, ino);
    c->fi = *fi;
    if (!inode || !(c->fh = bfs_fuse_fh_new(c, inode, fi->flags, 0))) {
        bfs_fuse_call_fail(c, -ENOMEM);
        return;
    }
    struct bfs_open_req r = {.fd = c->fh->fd, .flags = brick_flags(fi->flags)};
    bfs_fuse_loc_inode(&r.loc, inode);
    int rc = bfs_wind_open(c->frame, bfs_fuse_top(c), open_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

static void create_cbk(struct bfs_frame *frame, void *cookie, int rc,
                       const struct bfs_create_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    struct fuse_entry_param e;
    struct bfs_fuse_node *n = rc < 0 ? NULL : bfs_fuse_entry(c->fu, &rep->attr, &e);
    struct bfs_fd *fd = c->fh->fd;
    struct bfs_inode *i = NULL;
    if (rc >= 0 && !n)
        rc = errno ? -errno : -EIO;
    /* Without O_EXCL the name may have appeared since the kernel looked:
     * the brick then opened that file, whose GFID is not the one we picked. */
    if (rc >= 0 && !bfs_gfid_eq(&fd->inode->gfid, &rep->attr.gfid) &&
        !(i = bfs_inode_get(c->gr->g->itable, &rep->attr.gfid, S_IFREG))) {
        bfs_fuse_node_unlookup(c->fu, n, 1);
        rc = -ENOMEM;
    }
    if (rc < 0) {
        fuse_reply_err(c->req, -rc);
        bfs_fuse_call_done(c);
        return;
    }
    if (i) {
        struct bfs_inode *old = fd->inode;
        fd->inode = i;
        bfs_inode_unref(old);
    }
    bfs_fuse_node_dir_attr_put(c->fu, c->ino, &rep->postparent); /* c->ino: the parent */
    if (hand_over(c, &e, rep->attr.mode) < 0)
        bfs_fuse_node_unlookup(c->fu, n, 1); /* interrupted: the kernel never saw it */
    bfs_fuse_call_done(c);
}

void bfs_fuse_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                     struct fuse_file_info *fi)
{
    bfs_fuse_readahead_apply(bfs_fuse_of(req));
    int rc = bfs_fuse_name_check(name);
    if (rc == 0 && bfs_fuse_hidden_entry(parent, name))
        rc = -EPERM;
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    c->fi = *fi;
    c->ino = parent;
    /* The new file's identity is ours to pick, so its fd has an inode
     * from the start (the brick may need it before it answers). */
    struct bfs_gfid gfid;
    struct bfs_create_req r = {.xdata = bfs_fuse_gfid_req(&gfid), .flags = brick_flags(fi->flags),
                               .mode = mode, .umask = 0};
    if (r.xdata && bfs_fuse_loc_name(c, &r.loc, parent, name) == 0)
        c->inode = bfs_inode_get(c->gr->g->itable, &gfid, S_IFREG);
    if (c->inode)
        c->fh = bfs_fuse_fh_new(c, c->inode, fi->flags, 0);
    if (!c->fh) {
        bfs_dict_unref(r.xdata);
        bfs_fuse_call_fail(c, -ENOMEM);
        return;
    }
    r.fd = c->fh->fd;
    r.loc.inode = c->inode;
    rc = bfs_wind_create(c->frame, bfs_fuse_top(c), create_cbk, NULL, &r);
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
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    if (size > BFS_FUSE_MAX_IO)
        size = BFS_FUSE_MAX_IO;
    struct bfs_read_req r = {.fd = bfs_fuse_call_fd(c, fi, false), .size = (uint32_t)size,
                             .offset = (uint64_t)off};
    int rc = bfs_wind_read(c->frame, bfs_fuse_top(c), read_cbk, NULL, &r);
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
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_write_req r = {.fd = bfs_fuse_call_fd(c, fi, false), .data = {buf, size},
                              .offset = (uint64_t)off};
    int rc = bfs_wind_write(c->frame, bfs_fuse_top(c), write_cbk, NULL, &r);
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
    struct bfs_fuse_call *c = bfs_fuse_call_new_lk(req, fi->lock_owner);
    if (!c)
        return;
    struct bfs_flush_req r = {.fd = bfs_fuse_call_fd(c, fi, false)};
    int rc = bfs_wind_flush(c->frame, bfs_fuse_top(c), flush_cbk, NULL, &r);
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
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_fsync_req r = {.fd = bfs_fuse_call_fd(c, fi, false), .datasync = datasync ? 1 : 0};
    int rc = bfs_wind_fsync(c->frame, bfs_fuse_top(c), fsync_cbk, NULL, &r);
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
    if (offset < 0 || length <= 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_fd *fd = bfs_fuse_call_fd(c, fi, false);
    struct bfs_xl *top = bfs_fuse_top(c);
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
    struct bfs_seek_req r = {.fd = bfs_fuse_call_fd(c, fi, false), .offset = (uint64_t)off,
                             .what = (uint32_t)whence};
    int rc = bfs_wind_seek(c->frame, bfs_fuse_top(c), seek_cbk, NULL, &r);
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
    if (off_in < 0 || off_out < 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_copy_file_range_req r = {
        .fd_in = bfs_fuse_call_fd(c, fi_in, false), .off_in = (uint64_t)off_in,
        .fd_out = bfs_fuse_call_fd(c, fi_out, false), .off_out = (uint64_t)off_out,
        .len = len, .flags = (uint32_t)flags,
    };
    /* the two files in different generations (one pinned by a lock): the
     * caller copies by read and write instead */
    int rc = r.fd_in && r.fd_out ? 0 : -EXDEV;
    if (rc == 0)
        rc = bfs_wind_copy_file_range(c->frame, bfs_fuse_top(c), cfr_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}
