/*
 * posix-dir.c — directory fds: opendir, readdir(plus), fsyncdir.
 *
 * opendir reopens the directory as the caller (read permission) and keeps
 * a DIR* in the fd's struct px_fd; releasedir closes it (posix.c).
 *
 * readdir offsets are the underlying file system's own directory cookies
 * (telldir/d_off): entry i's d_off is where to continue after it, offset 0
 * is the start. They are stable across calls and fds as far as the local
 * file system makes them so (ext4 and xfs: hash-based, stable). One DIR per
 * fd, guarded by the fd's mutex; a call whose offset is not where the DIR
 * stands seeks first.
 *
 * A reply holds as many entries as fit in req->size bytes, counted as FUSE
 * would encode them: 24 bytes + the name rounded up to 8, plus 128 for
 * readdirplus (struct fuse_entry_out). At least one entry is returned when
 * any is left. eod is set when the end was reached in this call.
 *
 * Never returned: ".", ".." (a client adds them if it wants them) and, in
 * the brick root, .brickfs. readdirplus gives each entry's iatt with its
 * GFID; an entry that cannot be stat'ed (no search permission) or that has
 * no GFID yet comes without attributes (has_attr false): a lookup fixes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "posix.h"

#define PX_DIRENT_COST 24
#define PX_DIRENT_PLUS_COST 128
#define PX_READDIR_DEFAULT 4096

static int do_opendir(struct px_job *j, const struct bfs_opendir_req *req,
                      struct bfs_opendir_rep *rep)
{
    (void)rep;
    struct px_obj o = PX_OBJ_INIT;
    if (!req->fd)
        return -EINVAL;
    int rc = bfs__px_resolve_loc(j->priv, &req->loc, &o);
    if (rc == 0 && !S_ISDIR(o.st.st_mode))
        rc = -ENOTDIR;
    int fd = rc == 0 ? bfs__px_reopen(o.fd, O_RDONLY | O_DIRECTORY) : rc;
    if (fd >= 0) {
        DIR *dir = fdopendir(fd);
        if (!dir) {
            rc = -errno;
            SYS.close(fd);
        } else {
            rc = bfs__px_fd_install(j, req->fd, fd, dir, &o.gfid);
        }
    } else {
        rc = fd;
    }
    bfs__px_obj_close(&o);
    return rc;
}
PX_FOP_DEFINE(opendir, BFS_FOP_OPENDIR)

static bool hidden(const struct px_fd *pf, const char *name)
{
    if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0')))
        return true;
    return pf->is_root && strcmp(name, PX_HIDDEN) == 0;
}

static size_t entry_cost(const char *name, bool plus)
{
    size_t c = PX_DIRENT_COST + ((strlen(name) + 7) & ~(size_t)7);
    return plus ? c + PX_DIRENT_PLUS_COST : c;
}

/* readdirplus attributes of one entry, without following it; as the caller. */
static bool plus_attr(int dfd, const char *name, struct bfs_iatt *ia)
{
    int fd = SYS.openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct stat st;
    struct bfs_gfid g;
    bool ok = SYS.fstat(fd, &st) == 0 && bfs__px_gfid_get(fd, &g) == 0;
    if (ok)
        bfs__px_iatt(&st, &g, ia);
    SYS.close(fd);
    return ok;
}

/* Fills rep from where pf->dir stands. pf->lock held. */
static int __fill(struct px_fd *pf, size_t size, bool plus, struct bfs_readdir_rep *rep)
{
    size_t used = 0;
    for (;;) {
        long before = telldir(pf->dir);
        errno = 0;
        struct dirent *e = readdir(pf->dir);
        if (!e) {
            if (errno)
                return -errno;
            rep->eod = true;
            return 0;
        }
        if (hidden(pf, e->d_name)) {
            pf->pos = (uint64_t)e->d_off;
            continue;
        }
        size_t cost = entry_cost(e->d_name, plus);
        if (rep->entries.count > 0 && used + cost > size) {
            seekdir(pf->dir, before); /* not consumed: the next call starts here */
            return 0;
        }
        struct bfs_iatt ia;
        bool has = plus && plus_attr(dirfd(pf->dir), e->d_name, &ia);
        int rc = bfs_dirents_add(&rep->entries, e->d_name, (uint64_t)e->d_off, e->d_type,
                                 e->d_ino, has ? &ia : NULL);
        if (rc < 0)
            return rc;
        used += cost;
        pf->pos = (uint64_t)e->d_off;
    }
}

static int do_readdir(struct px_job *j, const struct bfs_readdir_req *req,
                      struct bfs_readdir_rep *rep)
{
    struct px_fd *pf;
    int rc = bfs__px_fd_get(j, req->fd, &pf);
    if (rc < 0)
        return rc;
    if (!pf->dir)
        return -ENOTDIR;
    pthread_mutex_lock(&pf->lock);
    if (req->offset != pf->pos) {
        if (req->offset == 0)
            rewinddir(pf->dir);
        else
            seekdir(pf->dir, (long)req->offset);
        pf->pos = req->offset;
    }
    rc = __fill(pf, req->size ? req->size : PX_READDIR_DEFAULT, req->plus, rep);
    pthread_mutex_unlock(&pf->lock);
    return rc < 0 ? rc : (int)rep->entries.count;
}
PX_FOP_DEFINE(readdir, BFS_FOP_READDIR)

static int do_fsyncdir(struct px_job *j, const struct bfs_fsyncdir_req *req,
                       struct bfs_fsyncdir_rep *rep)
{
    (void)rep;
    struct px_fd *pf;
    int rc = bfs__px_fd_get(j, req->fd, &pf);
    if (rc == 0 && (req->datasync ? SYS.fdatasync(pf->fd) : SYS.fsync(pf->fd)) < 0)
        rc = -errno;
    return rc;
}
PX_FOP_DEFINE(fsyncdir, BFS_FOP_FSYNCDIR)
