/*
 * api-dir.c — directory streams: opendir, readdir, readdirplus, telldir,
 * seekdir, rewinddir, closedir.
 *
 * A stream owns a directory handle (struct brickfs_fd, opened with the
 * opendir fop) and a buffer with the entries of the last readdir fop. Each
 * entry carries d_off, the cookie to continue after it; the next fop asks
 * from the d_off of the last buffered entry, so telldir/seekdir are just
 * "the d_off of the last entry returned" and "drop the buffer, continue
 * from there". The stream is freed with its handle (closedir, or
 * brickfs_fini for a stream left open).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/api.h"

struct brickfs_dir {
    struct brickfs_fd *fd;
    struct bfs_gfid gfid;      /* the directory */
    struct bfs_gfid pargfid;   /* its parent, for ".." in readdirplus */
    struct bfs_dirents buf;
    uint32_t pos;              /* next entry of buf to return */
    uint64_t next_off;         /* where the next readdir fop starts */
    bool eod;                  /* the bricks said there is no more */
    long tell;                 /* d_off of the last entry returned */
    struct dirent de;          /* what readdir returns */
};

void bfs__api_stream_free(struct brickfs_dir *dir)
{
    bfs_dirents_free(&dir->buf);
    free(dir);
}

static int do_opendir(brickfs_t *fs, const char *path, struct brickfs_dir **out)
{
    struct bfs_stack *st;
    struct api_res res;
    int rc = bfs__api_path_begin(fs, path, RES_FOLLOW, &st, &res);
    if (rc < 0)
        return rc;
    struct brickfs_dir *dir = NULL;
    struct brickfs_fd *fd = NULL;
    if (!S_ISDIR(res.attr.mode))
        rc = -ENOTDIR;
    else if (!(dir = calloc(1, sizeof(*dir))))
        rc = -ENOMEM;
    else
        rc = bfs__api_open_resolved(fs, st, &res, O_RDONLY | O_DIRECTORY, path, &fd);
    if (rc == 0) {
        dir->fd = fd;
        dir->gfid = res.attr.gfid;
        dir->pargfid = res.pargfid;
        fd->stream = dir;
        *out = dir;
    } else {
        free(dir);
    }
    bfs__api_path_end(st, &res);
    return rc;
}

brickfs_dir_t *brickfs_opendir(brickfs_t *fs, const char *path)
{
    struct brickfs_dir *dir = NULL;
    int rc = do_opendir(fs, path, &dir);
    if (rc < 0) {
        errno = -rc;
        return NULL;
    }
    return dir;
}

/* Refills the buffer from next_off. 0, or -errno. */
static int fill(struct brickfs_dir *dir, bool plus)
{
    struct brickfs_fd *fd = dir->fd;
    struct bfs_stack *st = bfs__api_fd_stack(fd);
    if (!st)
        return -ENOMEM;
    struct bfs_readdir_req req = {0};
    struct bfs_readdir_rep rep;
    req.fd = fd->fd;
    req.size = API_READDIR_SIZE;
    req.offset = dir->next_off;
    req.plus = plus;
    int rc = bfs_sync_readdir(fd->fs->graph->top, st, &req, &rep);
    bfs_stack_unref(st);
    if (rc >= 0) {
        bfs_dirents_free(&dir->buf);
        dir->buf = rep.entries; /* take the copy's entries */
        memset(&rep.entries, 0, sizeof(rep.entries));
        dir->pos = 0;
        /* no entries and no eod would loop forever: treat as the end */
        dir->eod = rep.eod || dir->buf.count == 0;
        if (dir->buf.count)
            dir->next_off = dir->buf.v[dir->buf.count - 1].d_off;
    }
    bfs_readdir_rep_clear_dup(&rep);
    return rc < 0 ? rc : 0;
}

/* The next buffered entry, fetching when needed; NULL at the end (*rc 0)
 * or on error (*rc < 0). */
static struct bfs_dirent *next_entry(struct brickfs_dir *dir, bool plus, int *rc)
{
    *rc = 0;
    if (dir->pos == dir->buf.count) {
        if (dir->eod)
            return NULL;
        if ((*rc = fill(dir, plus)) < 0 || dir->buf.count == 0)
            return NULL;
    }
    return &dir->buf.v[dir->pos++];
}

static struct dirent *to_dirent(struct brickfs_dir *dir, const struct bfs_dirent *e)
{
    struct dirent *de = &dir->de;
    memset(de, 0, sizeof(*de));
    de->d_ino = (ino_t)e->d_ino;
    de->d_off = (off_t)e->d_off;
    de->d_type = (unsigned char)e->d_type;
    de->d_reclen = sizeof(*de);
    snprintf(de->d_name, sizeof(de->d_name), "%s", e->name);
    dir->tell = (long)e->d_off;
    return de;
}

/* Attributes of an entry the bricks sent without them. */
static int entry_attr(struct brickfs_dir *dir, const struct bfs_dirent *e, struct bfs_iatt *out)
{
    struct brickfs_fd *fd = dir->fd;
    struct bfs_stack *st = bfs__api_fd_stack(fd);
    if (!st)
        return -ENOMEM;
    struct bfs_lookup_req req = {0};
    struct bfs_lookup_rep rep;
    if (strcmp(e->name, ".") == 0)
        req.loc.gfid = dir->gfid;
    else if (strcmp(e->name, "..") == 0)
        req.loc.gfid = dir->pargfid;
    else {
        req.loc.pargfid = dir->gfid;
        req.loc.name = e->name;
    }
    int rc = bfs_sync_lookup(fd->fs->graph->top, st, &req, &rep);
    if (rc >= 0)
        *out = rep.attr;
    bfs_lookup_rep_clear_dup(&rep);
    bfs_stack_unref(st);
    return rc < 0 ? rc : 0;
}

static struct dirent *do_readdir(struct brickfs_dir *dir, bool plus, struct stat *sb)
{
    if (!dir) {
        errno = EBADF;
        return NULL;
    }
    int rc;
    for (;;) {
        struct bfs_dirent *e = next_entry(dir, plus, &rc);
        if (!e) {
            if (rc < 0)
                errno = -rc;
            return NULL;
        }
        if (!plus || !sb)
            return to_dirent(dir, e);
        struct bfs_iatt attr = e->attr;
        rc = e->has_attr ? 0 : entry_attr(dir, e, &attr);
        if (rc == -ENOENT)
            continue; /* removed since the listing: skip it */
        if (rc < 0) {
            errno = -rc;
            return NULL;
        }
        bfs_iatt_to_stat(&attr, sb);
        return to_dirent(dir, e);
    }
}

struct dirent *brickfs_readdir(brickfs_dir_t *dir)
{
    return do_readdir(dir, false, NULL);
}

struct dirent *brickfs_readdirplus(brickfs_dir_t *dir, struct stat *st)
{
    return do_readdir(dir, true, st);
}

long brickfs_telldir(brickfs_dir_t *dir)
{
    if (!dir)
        return (long)bfs__api_ret(-EBADF);
    return dir->tell;
}

void brickfs_seekdir(brickfs_dir_t *dir, long loc)
{
    if (!dir)
        return;
    bfs_dirents_free(&dir->buf);
    dir->pos = 0;
    dir->next_off = (uint64_t)loc;
    dir->eod = false;
    dir->tell = loc;
}

void brickfs_rewinddir(brickfs_dir_t *dir)
{
    brickfs_seekdir(dir, 0);
}

int brickfs_closedir(brickfs_dir_t *dir)
{
    if (!dir)
        return (int)bfs__api_ret(-EBADF);
    struct brickfs_fd *fd = dir->fd;
    bfs__api_untrack(fd->fs, fd);
    bfs__api_fd_free(fd); /* frees dir too */
    return 0;
}
