/*
 * mem-dir.c — reading directories in storage/memory: opendir, readdir(plus),
 * fsyncdir.
 *
 * Offsets: "." has d_off 1, ".." 2, and each entry the cookie it got when
 * it was added (increasing in list order, never reused), so a listing
 * continued after an offset neither repeats nor skips entries that stayed
 * while others were added or removed. `size` bounds the reply roughly as a
 * kernel buffer would (name + fixed cost per entry); at least one entry is
 * always returned.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mem.h"

int bfs__mem_opendir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_opendir_req *req)
{
    struct mem_priv *priv = xl->private;
    struct mem_inode *mi;
    int rc;
    if (!req->fd)
        return -EINVAL;
    LOCKED(priv)
    {
        rc = bfs__mem_resolve(priv, &req->loc, &mi, NULL);
        if (rc == 0 && !S_ISDIR(mi->attr.mode))
            rc = -ENOTDIR;
        if (rc == 0)
            bfs__mem_fd_bind(xl, req->fd, mi);
    }
    bfs__mem_reply(xl, frame, BFS_FOP_OPENDIR, rc, NULL);
    return 0;
}

static uint32_t dtype(uint32_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFDIR: return DT_DIR;
    case S_IFREG: return DT_REG;
    case S_IFLNK: return DT_LNK;
    case S_IFCHR: return DT_CHR;
    case S_IFBLK: return DT_BLK;
    case S_IFIFO: return DT_FIFO;
    case S_IFSOCK: return DT_SOCK;
    }
    return DT_UNKNOWN;
}

struct listing {
    struct bfs_dirents *out;
    size_t budget, used;
    bool plus;
};

/* Adds one entry if it fits; returns 1 if it did not (listing is full). */
static int emit(struct listing *l, const char *name, uint64_t off, const struct mem_inode *mi)
{
    size_t cost = 24 + strlen(name) + (l->plus ? sizeof(struct bfs_iatt) : 0);
    if (l->out->count > 0 && l->used + cost > l->budget)
        return 1;
    struct bfs_iatt ia;
    bfs__mem_stat(mi, &ia);
    int rc = bfs_dirents_add(l->out, name, off, dtype(mi->attr.mode), ia.ino,
                             l->plus ? &ia : NULL);
    if (rc < 0)
        return rc;
    l->used += cost;
    return 0;
}

/* Fills l from dir after offset; returns 1 at end of directory. */
static int list_dir(struct mem_priv *priv, struct mem_inode *dir, uint64_t offset,
                    struct listing *l)
{
    int rc = 0;
    if (offset < 1 && (rc = emit(l, ".", 1, dir)) != 0)
        return rc < 0 ? rc : 0;
    if (offset < 2) {
        struct mem_inode *up = bfs__mem_find(priv, &dir->parent);
        if ((rc = emit(l, "..", 2, up ? up : dir)) != 0)
            return rc < 0 ? rc : 0;
    }
    for (size_t i = 0; i < dir->nents; i++) {
        const struct mem_dirent *e = &dir->ents[i];
        struct mem_inode *mi;
        if (e->off <= offset || !(mi = bfs__mem_find(priv, &e->gfid)))
            continue;
        if ((rc = emit(l, e->name, e->off, mi)) != 0)
            return rc < 0 ? rc : 0;
    }
    return 1;
}

int bfs__mem_readdir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_readdir_req *req)
{
    struct mem_priv *priv = xl->private;
    struct bfs_readdir_rep rep = {0};
    struct listing l = {.out = &rep.entries, .budget = req->size ? req->size : 4096,
                        .plus = req->plus};
    int rc;
    LOCKED(priv)
    {
        struct mem_inode *dir = bfs__mem_fd_inode(xl, req->fd);
        if (!dir)
            rc = -EBADF;
        else if (!S_ISDIR(dir->attr.mode))
            rc = -ENOTDIR;
        else
            rc = list_dir(priv, dir, req->offset, &l);
    }
    if (rc >= 0) {
        rep.eod = rc == 1;
        rc = (int)rep.entries.count;
    }
    bfs__mem_reply(xl, frame, BFS_FOP_READDIR, rc, &rep);
    bfs_dirents_free(&rep.entries);
    return 0;
}

int bfs__mem_fsyncdir(struct bfs_frame *frame, struct bfs_xl *xl,
                      const struct bfs_fsyncdir_req *req)
{
    struct mem_priv *priv = xl->private;
    int rc;
    LOCKED(priv)
    {
        rc = bfs__mem_fd_inode(xl, req->fd) ? 0 : -EBADF;
    }
    bfs__mem_reply(xl, frame, BFS_FOP_FSYNCDIR, rc, NULL);
    return 0;
}
