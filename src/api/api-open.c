/*
 * api-open.c — brickfs_open/creat/close and the life of a brickfs_fd_t.
 *
 * A handle wraps one struct bfs_fd of the graph: open (or opendir for a
 * directory, or create for a new name) is wound with that fd as its newfd;
 * translators hang their per-fd state on it. Closing winds flush (which
 * also drops the handle's POSIX locks on the bricks), then drops the last
 * reference, and the runtime calls each translator's release. Every handle
 * is on fs->fds so that brickfs_fini can release what was left open.
 *
 * Each handle has its own lock owner (fs-unique), so byte-range locks
 * belong to the handle: open file description semantics.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/api.h"

/* Flags that mean something to a brick's open; the rest are the client's
 * (O_CREAT, O_EXCL, O_DIRECTORY, O_NOFOLLOW...) or meaningless remotely. */
#define OPEN_PASS_FLAGS (O_ACCMODE | O_APPEND | O_TRUNC | O_SYNC | O_DSYNC)

struct bfs_stack *bfs__api_fd_stack(struct brickfs_fd *fd)
{
    struct bfs_stack *st = bfs__api_stack(fd->fs);
    if (st)
        st->lk_owner = fd->lk_owner;
    return st;
}

static struct brickfs_fd *handle_new(struct brickfs *fs, struct bfs_fd *bfd, int flags,
                                     bool is_dir, const struct bfs_gfid *gfid)
{
    struct brickfs_fd *fd = calloc(1, sizeof(*fd));
    if (!fd)
        return NULL;
    fd->fs = fs;
    fd->fd = bfd;
    fd->flags = flags;
    fd->is_dir = is_dir;
    fd->gfid = *gfid;
    fd->lk_owner = __atomic_add_fetch(&fs->next_owner, 1, __ATOMIC_RELAXED) | (fs->id << 40);
    pthread_mutex_init(&fd->lock, NULL);
    bfs__api_track(fs, fd);
    return fd;
}

void bfs__api_fd_free(struct brickfs_fd *fd)
{
    if (fd->stream)
        bfs__api_stream_free(fd->stream);
    bfs_fd_unref(fd->fd);
    pthread_mutex_destroy(&fd->lock);
    free(fd);
}

static int open_dir(struct brickfs *fs, struct bfs_stack *st, struct api_res *res, int flags,
                    const char *path, struct brickfs_fd **out)
{
    struct bfs_fd *bfd = bfs_fd_new(fs->graph, res->inode, flags, 1);
    if (!bfd)
        return -ENOMEM;
    struct bfs_opendir_req req = {0};
    struct bfs_opendir_rep rep;
    bfs__api_res_loc(res, &req.loc, path);
    req.fd = bfd;
    int rc = bfs_sync_opendir(fs->graph->top, st, &req, &rep);
    bfs_opendir_rep_clear_dup(&rep);
    if (rc >= 0 && !(*out = handle_new(fs, bfd, flags, true, &res->attr.gfid)))
        rc = -ENOMEM;
    if (rc < 0)
        bfs_fd_unref(bfd);
    return rc < 0 ? rc : 0;
}

static int open_file(struct brickfs *fs, struct bfs_stack *st, struct api_res *res, int flags,
                     const char *path, struct brickfs_fd **out)
{
    struct bfs_fd *bfd = bfs_fd_new(fs->graph, res->inode, flags, 0);
    if (!bfd)
        return -ENOMEM;
    struct bfs_open_req req = {0};
    struct bfs_open_rep rep;
    bfs__api_res_loc(res, &req.loc, path);
    req.fd = bfd;
    req.flags = (uint32_t)(flags & OPEN_PASS_FLAGS);
    int rc = bfs_sync_open(fs->graph->top, st, &req, &rep);
    bfs_open_rep_clear_dup(&rep);
    if (rc >= 0 && !(*out = handle_new(fs, bfd, flags, false, &res->attr.gfid)))
        rc = -ENOMEM;
    if (rc < 0)
        bfs_fd_unref(bfd);
    return rc < 0 ? rc : 0;
}

int bfs__api_open_resolved(struct brickfs *fs, struct bfs_stack *st, struct api_res *res,
                           int flags, const char *path, struct brickfs_fd **out)
{
    mode_t type = res->attr.mode & S_IFMT;
    if (S_ISLNK(type))
        return -ELOOP; /* O_NOFOLLOW on a link */
    if ((flags & O_DIRECTORY) && !S_ISDIR(type))
        return -ENOTDIR;
    if (S_ISDIR(type)) {
        if ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_TRUNC | O_CREAT)))
            return -EISDIR;
        return open_dir(fs, st, res, flags, path, out);
    }
    /* A device or fifo would be opened on the brick's machine: refuse. */
    if (!S_ISREG(type))
        return -ENXIO;
    return open_file(fs, st, res, flags, path, out);
}

static int create_file(struct brickfs *fs, struct bfs_stack *st, struct api_res *res,
                       int flags, mode_t mode, const char *path, struct brickfs_fd **out)
{
    struct bfs_fd *bfd = bfs_fd_new(fs->graph, NULL, flags, 0);
    if (!bfd)
        return -ENOMEM;
    mode_t um = __atomic_load_n(&fs->umask, __ATOMIC_RELAXED);
    struct bfs_create_req req = {0};
    struct bfs_create_rep rep;
    bfs__api_res_newloc(res, &req.loc, path);
    req.fd = bfd;
    req.flags = (uint32_t)((flags & OPEN_PASS_FLAGS) | O_CREAT | O_EXCL);
    req.mode = (uint32_t)(S_IFREG | (mode & 07777 & ~um));
    req.umask = (uint32_t)um;
    int rc = bfs_sync_create(fs->graph->top, st, &req, &rep);
    if (rc >= 0) {
        /* now that its identity is known, the fd gets its inode */
        struct bfs_inode *inode = bfs__api_inode(fs, &rep.attr, &rc);
        if (inode) {
            struct bfs_inode *old = bfd->inode;
            bfd->inode = inode;
            bfs_inode_unref(old);
        }
    }
    if (rc >= 0 && !(*out = handle_new(fs, bfd, flags, false, &rep.attr.gfid)))
        rc = -ENOMEM;
    bfs_create_rep_clear_dup(&rep);
    if (rc < 0)
        bfs_fd_unref(bfd);
    return rc < 0 ? rc : 0;
}

static int api_open(struct brickfs *fs, const char *path, int flags, mode_t mode,
                    struct brickfs_fd **out)
{
    int rc = bfs__api_ready(fs);
    if (rc < 0)
        return rc;
    struct bfs_stack *st = bfs__api_stack(fs);
    if (!st)
        return -ENOMEM;
    bool excl = (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL);
    int rflags = (flags & O_CREAT) ? RES_MAY_MISS : 0;
    if (!(flags & O_NOFOLLOW) && !excl)
        rflags |= RES_FOLLOW;
    /* Between our lookup and our create another client may create the
     * name; without O_EXCL we then open what it made. */
    for (int attempt = 0; attempt < 5; attempt++) {
        struct api_res res;
        rc = bfs__api_resolve(fs, st, path, rflags, &res);
        if (rc < 0)
            break;
        if (!res.exists)
            rc = res.trailing_slash ? -EISDIR
                                    : create_file(fs, st, &res, flags, mode, path, out);
        else if (excl)
            rc = -EEXIST;
        else
            rc = bfs__api_open_resolved(fs, st, &res, flags, path, out);
        bool retry = rc == -EEXIST && !res.exists && !excl;
        bfs__api_res_clear(&res);
        if (!retry)
            break;
    }
    bfs_stack_unref(st);
    return rc;
}

brickfs_fd_t *brickfs_open(brickfs_t *fs, const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & O_CREAT) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    struct brickfs_fd *fd = NULL;
    int rc = api_open(fs, path, flags, mode, &fd);
    if (rc < 0) {
        errno = -rc;
        return NULL;
    }
    return fd;
}

brickfs_fd_t *brickfs_creat(brickfs_t *fs, const char *path, mode_t mode)
{
    return brickfs_open(fs, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

int brickfs_close(brickfs_fd_t *fd)
{
    if (!fd)
        return (int)bfs__api_ret(-EBADF);
    if (fd->stream)
        return brickfs_closedir(fd->stream);
    struct brickfs *fs = fd->fs;
    int rc = 0;
    /* a directory opened with brickfs_open has nothing to flush */
    struct bfs_stack *st = fd->is_dir ? NULL : bfs__api_fd_stack(fd);
    if (st) {
        struct bfs_flush_req req = {0};
        req.fd = fd->fd;
        rc = bfs_sync_flush(fs->graph->top, st, &req, NULL);
        bfs_stack_unref(st);
    }
    bfs__api_untrack(fs, fd);
    bfs__api_fd_free(fd);
    return (int)bfs__api_ret(rc < 0 ? rc : 0);
}
