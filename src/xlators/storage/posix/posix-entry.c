/*
 * posix-entry.c — fops on names: lookup, mknod, mkdir, symlink, unlink,
 * rmdir, rename, link.
 *
 * Each one resolves the parent directory by GFID (posix-handle.c), checks
 * the name, then works with *at() calls on the parent's fd, as the caller
 * (the kernel checks write/search permission and the sticky bit), and
 * keeps the handle store in step:
 *   create-like   the new entry gets its GFID (xdata "gfid-req" or a random
 *                 one) and its handle; on failure the entry is removed again;
 *   unlink        drops a file's handle when its last name went (an fd open
 *                 on it keeps the inode alive: reads and writes continue);
 *                 for a regular file after answering (posix-defer.c);
 *   rmdir         drops the directory's handle;
 *   rename        re-points a moved directory's handle, drops the handle of
 *                 a replaced victim when that was its last name;
 *   lookup        adopts an entry that has no GFID yet (made behind our back)
 *                 and repairs a missing or stale handle; with xdata
 *                 "xattr-req" (STR, comma-separated xattr names) it also
 *                 answers each of those xattrs that is present, in the reply
 *                 xdata (BIN under its own name): the keys the caller could
 *                 getxattr, plus trusted.brickfs.afr.* and .ec.* for anyone (cluster
 *                 counters that xattrop already lets clients read and
 *                 change; replicate reads them with every lookup).
 * Locking (striped mutexes, posix.h): an entry fop holds the entry lock of
 * its parent directory (both, for rename) from resolving the name until the
 * handles are fixed, so the object it resolved is the one its syscall
 * changed; name-count changes of one file (unlink, link, rename over it)
 * also hold the file's inode lock so "was that the last name?" is answered
 * right. Changes made on the brick behind brickfs's back are not covered;
 * lookup repairs what they break.
 *
 * .brickfs at the root: lookup, unlink, rmdir and rename from it answer
 * -ENOENT (it does not exist for clients); creating it (mknod, mkdir,
 * symlink, link or rename onto it) is refused with -EPERM.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "posix.h"

/* ---- lookup ---- */

#define PX_XATTR_REQ "xattr-req"
#define PX_CLUSTER_PREFIX "trusted.brickfs.afr."
#define PX_EC_PREFIX "trusted.brickfs.ec." /* disperse: versions, dirty, size */

/* May a lookup answer this xattr? As getxattr would (posix-xattr.c), plus
 * the cluster counters, which are no secret to a client (xattrop). */
static bool lookup_may_read(const char *key, bool internal, bool root)
{
    if (strncmp(key, PX_CLUSTER_PREFIX, sizeof(PX_CLUSTER_PREFIX) - 1) == 0 ||
        strncmp(key, PX_EC_PREFIX, sizeof(PX_EC_PREFIX) - 1) == 0)
        return true;
    if (bfs__px_key_internal(key))
        return internal;
    if (strncmp(key, "trusted.", 8) == 0)
        return internal || root;
    return true;
}

/* Adds the xattrs named by xdata "xattr-req" that o carries to rep->xdata.
 * Failures to read one are not the lookup's failures: the key is left out. */
static void lookup_xattrs(struct px_job *j, const struct bfs_lookup_req *req, int fd,
                          struct bfs_lookup_rep *rep)
{
    const char *list;
    int64_t v = 0;
    if (bfs_dict_get_str(req->xdata, PX_XATTR_REQ, &list) < 0 || !list)
        return;
    bool internal = bfs_dict_get_int(req->xdata, PX_INTERNAL_KEY, &v) == 0 && v == 1;
    bool root = j->frame->stack->uid == 0;
    char path[PX_PROC_FD_LEN], *copy = strdup(list), *save = NULL;
    char *buf = malloc(65536);
    bfs__px_proc_path(fd, path);
    for (char *k = copy && buf ? strtok_r(copy, ",", &save) : NULL; k;
         k = strtok_r(NULL, ",", &save)) {
        if (!*k || !lookup_may_read(k, internal, root))
            continue;
        ssize_t n = SYS.getxattr(path, k, buf, 65536);
        if (n < 0)
            continue;
        if (!rep->xdata && !(rep->xdata = bfs_dict_new()))
            break;
        if (bfs_dict_set_bin(rep->xdata, k, buf, (size_t)n) < 0)
            break;
    }
    free(buf);
    free(copy);
}

static int adopt(struct px_job *j, const struct bfs_lookup_req *req, struct px_obj *o)
{
    const struct bfs_loc *loc = &req->loc;
    struct bfs_gfid g;
    bool requested;
    int rc = bfs__px_gfid_for_new(req->xdata, &g, &requested);
    if (rc == 0)
        rc = bfs__px_assign(j->priv, o, &g, &loc->pargfid, loc->name);
    if (rc == 0 && SYS.fstat(o->fd, &o->st) < 0)
        rc = -errno;
    if (rc < 0)
        XL_WARN(j->xl, "lookup %s: cannot give it a GFID: %s", loc->name, strerror(-rc));
    return rc;
}

/* A named entry without a GFID gets one (gfid-req or new); one with a GFID
 * gets its handle repaired. Only when the cheap check says so, then again
 * under the parent's entry lock with the entry resolved afresh. */
static int adopt_or_heal(struct px_job *j, const struct bfs_lookup_req *req,
                         const struct px_obj *par, struct px_obj *o)
{
    const struct bfs_loc *loc = &req->loc;
    if (bfs_gfid_is_null(&o->gfid))
        ; /* adopt it below */
    else if (!S_ISDIR(o->st.st_mode) && o->st.st_nlink > 1 &&
             bfs__px_cache_knows(j->priv->cache, &o->gfid, &o->st))
        return 0; /* checked before, and the link count still counts a handle */
    else if (bfs__px_handle_ok(j->priv, o, &loc->pargfid, loc->name))
        return 0;
    pthread_mutex_t *el = bfs__px_elock_for(j->priv, &loc->pargfid);
    pthread_mutex_lock(el);
    bfs__px_obj_close(o);
    int rc = bfs__px_resolve_entry(j->priv, par, loc->name, o);
    if (rc == 0 && !bfs_gfid_is_null(&o->gfid))
        bfs__px_handle_heal(j->priv, o, &loc->pargfid, loc->name);
    else if (rc == 0)
        rc = adopt(j, req, o);
    pthread_mutex_unlock(el);
    return rc;
}

static int do_lookup(struct px_job *j, const struct bfs_lookup_req *req,
                     struct bfs_lookup_rep *rep)
{
    struct px_priv *p = j->priv;
    const struct bfs_loc *loc = &req->loc;
    struct px_obj o = PX_OBJ_INIT, par = PX_OBJ_INIT;
    int rc;

    if (loc->name && !bfs_gfid_is_null(&loc->pargfid)) {
        rc = bfs__px_resolve_parent(p, loc, false, &par);
        if (rc == 0)
            rc = bfs__px_resolve_entry(p, &par, loc->name, &o);
        if (rc == 0)
            rc = adopt_or_heal(j, req, &par, &o);
        if (rc == 0)
            bfs__px_cache_put(p->cache, &o); /* an open by GFID often follows */
        if (rc == 0)
            rc = bfs__px_fstat_iatt(par.fd, &loc->pargfid, &rep->parent);
    } else if (!bfs_gfid_is_null(&loc->gfid)) {
        rc = bfs__px_resolve_gfid(p, &loc->gfid, &o);
    } else {
        rc = -EINVAL;
    }
    if (rc == 0)
        bfs__px_iatt(&o.st, &o.gfid, &rep->attr);
    if (rc == 0 && req->xdata)
        lookup_xattrs(j, req, o.fd, rep);
    bfs__px_obj_close(&o);
    bfs__px_obj_close(&par);
    return rc;
}
PX_FOP_DEFINE(lookup, BFS_FOP_LOOKUP)

/* ---- mknod, mkdir, symlink ---- */

struct px_mk {
    mode_t type;        /* S_IFDIR, S_IFLNK, or a mknod type */
    mode_t mode;
    mode_t umask;
    dev_t rdev;
    const char *target; /* symlink */
    struct bfs_dict **rep_xdata; /* mknod: the reply's, for BFS_XDATA_ENTRY_XATTRS */
};

static int mk_syscall(int pfd, const char *name, const struct px_mk *mk)
{
    mode_t mode = mk->mode;
    int rc;
    if (mk->type == S_IFLNK)
        return SYS.symlinkat(mk->target, pfd, name) < 0 ? -errno : 0;
    mode_t old = bfs__px_umask_push(mk->umask, &mode);
    if (mk->type == S_IFDIR)
        rc = SYS.mkdirat(pfd, name, mode & 07777);
    else
        rc = SYS.mknodat(pfd, name, mk->type | (mode & 07777), mk->rdev);
    rc = rc < 0 ? -errno : 0;
    bfs__px_umask_pop(old);
    return rc;
}

/* The entry just made under (par, name): open it, check it is the one we
 * made, give it its GFID and handle. Undoes the creation on failure. */
static int mk_finish(struct px_job *j, struct px_obj *par, const struct bfs_loc *loc,
                     const struct px_mk *mk, const struct bfs_gfid *g, struct px_obj *o)
{
    int rc = bfs__px_resolve_entry(j->priv, par, loc->name, o);
    if (rc < 0)
        return rc; /* gone already: someone else's business now */
    if ((o->st.st_mode & S_IFMT) != mk->type || !bfs_gfid_is_null(&o->gfid))
        return -EEXIST; /* replaced under us; not ours to undo */
    rc = bfs__px_assign(j->priv, o, g, &loc->pargfid, loc->name);
    if (rc < 0) {
        XL_WARN(j->xl, "%s: cannot give the new entry its GFID: %s", loc->name, strerror(-rc));
        bfs__px_root_begin();
        (void)SYS.unlinkat(par->fd, loc->name, mk->type == S_IFDIR ? AT_REMOVEDIR : 0);
        bfs__px_root_end();
    }
    return rc;
}

/* A mknod's trusted.brickfs.dht.* keys set on the new entry, said in the
 * reply. A failure is not the mknod's: the caller, not told, sets them
 * itself (and fails there if it must). */
static void entry_xattrs(struct px_job *j, const struct px_obj *o, const struct bfs_dict *xdata,
                         struct bfs_dict **rep)
{
    int rc = bfs__px_entry_xattrs(j, o->fd, xdata);
    if (rc < 0)
        XL_DBG(j->xl, "cannot set the xattrs given with a new entry: %s", strerror(-rc));
    if (rc > 0 && (*rep || (*rep = bfs_dict_new())))
        (void)bfs_dict_set_int(*rep, BFS_XDATA_ENTRY_XATTRS, 1);
}

static int make_entry(struct px_job *j, const struct bfs_loc *loc, const struct bfs_dict *xdata,
                      const struct px_mk *mk, struct bfs_iatt *attr, struct bfs_iatt *pre,
                      struct bfs_iatt *post)
{
    struct px_obj par = PX_OBJ_INIT, o = PX_OBJ_INIT;
    struct bfs_gfid g;
    bool requested;
    int rc = bfs__px_gfid_for_new(xdata, &g, &requested);
    if (rc == 0)
        rc = bfs__px_resolve_parent(j->priv, loc, true, &par);
    if (rc == 0)
        rc = bfs__px_fstat_iatt(par.fd, &loc->pargfid, pre);
    if (rc == 0) {
        pthread_mutex_t *el = bfs__px_elock_for(j->priv, &loc->pargfid);
        pthread_mutex_lock(el);
        rc = mk_syscall(par.fd, loc->name, mk);
        if (rc == 0)
            rc = mk_finish(j, &par, loc, mk, &g, &o);
        if (rc == 0 && mk->rep_xdata)
            entry_xattrs(j, &o, xdata, mk->rep_xdata);
        pthread_mutex_unlock(el);
    }
    if (rc == 0)
        bfs__px_cache_put(j->priv->cache, &o); /* remembered as checked */
    if (rc == 0)
        rc = bfs__px_fstat_iatt(o.fd, &o.gfid, attr);
    if (rc == 0)
        rc = bfs__px_fstat_iatt(par.fd, &loc->pargfid, post);
    bfs__px_obj_close(&o);
    bfs__px_obj_close(&par);
    return rc;
}

static int do_mknod(struct px_job *j, const struct bfs_mknod_req *req, struct bfs_mknod_rep *rep)
{
    struct px_mk mk = {.type = req->mode & S_IFMT, .mode = req->mode & 07777,
                       .umask = req->umask, .rdev = (dev_t)req->rdev,
                       .rep_xdata = &rep->xdata};
    if (mk.type == 0)
        mk.type = S_IFREG;
    if (mk.type != S_IFREG && mk.type != S_IFIFO && mk.type != S_IFSOCK &&
        mk.type != S_IFCHR && mk.type != S_IFBLK)
        return -EINVAL;
    return make_entry(j, &req->loc, req->xdata, &mk, &rep->attr, &rep->preparent,
                      &rep->postparent);
}
PX_FOP_DEFINE(mknod, BFS_FOP_MKNOD)

static int do_mkdir(struct px_job *j, const struct bfs_mkdir_req *req, struct bfs_mkdir_rep *rep)
{
    struct px_mk mk = {.type = S_IFDIR, .mode = req->mode & 07777, .umask = req->umask};
    return make_entry(j, &req->loc, req->xdata, &mk, &rep->attr, &rep->preparent,
                      &rep->postparent);
}
PX_FOP_DEFINE(mkdir, BFS_FOP_MKDIR)

static int do_symlink(struct px_job *j, const struct bfs_symlink_req *req,
                      struct bfs_symlink_rep *rep)
{
    /* The target is stored, never interpreted or followed by the brick. */
    struct px_mk mk = {.type = S_IFLNK, .target = req->target};
    if (!req->target)
        return -EINVAL;
    return make_entry(j, &req->loc, req->xdata, &mk, &rep->attr, &rep->preparent,
                      &rep->postparent);
}
PX_FOP_DEFINE(symlink, BFS_FOP_SYMLINK)

/* ---- unlink, rmdir ---- */

static int remove_entry(struct px_job *j, const struct bfs_loc *loc, bool dir,
                        struct bfs_iatt *pre, struct bfs_iatt *post)
{
    struct px_obj par = PX_OBJ_INIT, o = PX_OBJ_INIT;
    int rc = bfs__px_resolve_parent(j->priv, loc, false, &par);
    if (rc == 0)
        rc = bfs__px_fstat_iatt(par.fd, &loc->pargfid, pre);
    if (rc == 0) {
        pthread_mutex_t *el = bfs__px_elock_for(j->priv, &loc->pargfid), *il = NULL;
        pthread_mutex_lock(el);
        rc = bfs__px_resolve_entry(j->priv, &par, loc->name, &o);
        if (rc == 0 && (S_ISDIR(o.st.st_mode) != 0) != dir)
            rc = dir ? -ENOTDIR : -EISDIR;
        if (rc == 0 && j->inline_run && !dir && S_ISREG(o.st.st_mode) &&
            (o.st.st_nlink < 2 || (o.st.st_nlink == 2 && !bfs__px_defer_ready(j->priv))))
            rc = -PX_EWORKER; /* the blocks would be freed on this thread */
        if (rc == 0) {
            il = bfs__px_ilock_for(j->priv, &o.gfid);
            pthread_mutex_lock(il);
            if (SYS.unlinkat(par.fd, loc->name, dir ? AT_REMOVEDIR : 0) < 0)
                rc = -errno;
            else if (dir || !bfs__px_handle_defer(j->priv, &o))
                bfs__px_handle_drop(j->priv, &o);
        }
        bfs__px_unlock2(il, el);
    }
    if (rc == 0)
        rc = bfs__px_fstat_iatt(par.fd, &loc->pargfid, post);
    bfs__px_obj_close(&o);
    bfs__px_obj_close(&par);
    return rc;
}

static int do_unlink(struct px_job *j, const struct bfs_unlink_req *req,
                     struct bfs_unlink_rep *rep)
{
    return remove_entry(j, &req->loc, false, &rep->preparent, &rep->postparent);
}
PX_FOP_DEFINE(unlink, BFS_FOP_UNLINK)

/* flags (e.g. a recursive request) are not acted on: a non-empty directory
 * answers -ENOTEMPTY as rmdir(2) does. */
static int do_rmdir(struct px_job *j, const struct bfs_rmdir_req *req, struct bfs_rmdir_rep *rep)
{
    return remove_entry(j, &req->loc, true, &rep->preparent, &rep->postparent);
}
PX_FOP_DEFINE(rmdir, BFS_FOP_RMDIR)

/* ---- rename ---- */

struct px_rename {
    struct px_obj opar, npar, src, dst; /* dst.fd < 0: the new name is free */
};

static void rename_close(struct px_rename *r)
{
    bfs__px_obj_close(&r->opar);
    bfs__px_obj_close(&r->npar);
    bfs__px_obj_close(&r->src);
    bfs__px_obj_close(&r->dst);
}

/* Handle store after a successful renameat2. */
static void rename_handles(struct px_job *j, const struct bfs_rename_req *req,
                           struct px_rename *r)
{
    struct px_priv *p = j->priv;
    bool same = r->dst.fd >= 0 && r->dst.st.st_ino == r->src.st.st_ino &&
                r->dst.st.st_dev == r->src.st.st_dev; /* links of one file: a no-op */
    if (S_ISDIR(r->src.st.st_mode) && !bfs_gfid_is_null(&r->src.gfid) && !same)
        (void)bfs__px_handle_dir_move(p, &r->src.gfid, &req->newloc.pargfid, req->newloc.name);
    if (r->dst.fd < 0 || same)
        return;
    if (req->flags & RENAME_EXCHANGE) {
        if (S_ISDIR(r->dst.st.st_mode) && !bfs_gfid_is_null(&r->dst.gfid))
            (void)bfs__px_handle_dir_move(p, &r->dst.gfid, &req->oldloc.pargfid,
                                          req->oldloc.name);
    } else {
        bfs__px_handle_drop(p, &r->dst); /* the victim lost this name */
    }
}

/* The two names; under both parents' entry locks. */
static int rename_resolve(struct px_job *j, const struct bfs_rename_req *req,
                          struct px_rename *r)
{
    int rc = bfs__px_resolve_entry(j->priv, &r->opar, req->oldloc.name, &r->src);
    if (rc == 0) {
        rc = bfs__px_resolve_entry(j->priv, &r->npar, req->newloc.name, &r->dst);
        if (rc == -ENOENT)
            rc = 0;
    }
    return rc;
}

/* Under both parents' entry locks: the rename itself, under the inode locks
 * of the moved object and of the victim. */
static int rename_locked(struct px_job *j, const struct bfs_rename_req *req, struct px_rename *r)
{
    int rc = rename_resolve(j, req, r);
    if (rc < 0)
        return rc;
    pthread_mutex_t *a = bfs__px_ilock_for(j->priv, &r->src.gfid);
    pthread_mutex_t *b = r->dst.fd >= 0 ? bfs__px_ilock_for(j->priv, &r->dst.gfid) : NULL;
    bfs__px_lock2(a, b);
    if (SYS.renameat2(r->opar.fd, req->oldloc.name, r->npar.fd, req->newloc.name,
                      req->flags) < 0)
        rc = -errno;
    else
        rename_handles(j, req, r);
    bfs__px_unlock2(a, b);
    return rc;
}

static int do_rename(struct px_job *j, const struct bfs_rename_req *req,
                     struct bfs_rename_rep *rep)
{
    struct px_rename r = {.opar = PX_OBJ_INIT, .npar = PX_OBJ_INIT, .src = PX_OBJ_INIT,
                          .dst = PX_OBJ_INIT};
    if (req->flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE))
        return -EINVAL;
    int rc = bfs__px_resolve_parent(j->priv, &req->oldloc, false, &r.opar);
    if (rc == 0)
        rc = bfs__px_resolve_parent(j->priv, &req->newloc, true, &r.npar);
    if (rc == 0)
        rc = bfs__px_fstat_iatt(r.opar.fd, &req->oldloc.pargfid, &rep->preoldparent);
    if (rc == 0)
        rc = bfs__px_fstat_iatt(r.npar.fd, &req->newloc.pargfid, &rep->prenewparent);
    if (rc == 0) {
        pthread_mutex_t *a = bfs__px_elock_for(j->priv, &req->oldloc.pargfid);
        pthread_mutex_t *b = bfs__px_elock_for(j->priv, &req->newloc.pargfid);
        bfs__px_lock2(a, b);
        rc = rename_locked(j, req, &r);
        bfs__px_unlock2(a, b);
    }
    if (rc == 0)
        rc = bfs__px_fstat_iatt(r.src.fd, &r.src.gfid, &rep->attr);
    if (rc == 0)
        rc = bfs__px_fstat_iatt(r.opar.fd, &req->oldloc.pargfid, &rep->postoldparent);
    if (rc == 0)
        rc = bfs__px_fstat_iatt(r.npar.fd, &req->newloc.pargfid, &rep->postnewparent);
    rename_close(&r);
    return rc;
}
PX_FOP_DEFINE(rename, BFS_FOP_RENAME)

/* ---- link ---- */

static int do_link(struct px_job *j, const struct bfs_link_req *req, struct bfs_link_rep *rep)
{
    struct px_obj src = PX_OBJ_INIT, npar = PX_OBJ_INIT;
    int rc = bfs__px_resolve_loc(j->priv, &req->oldloc, &src);
    if (rc == 0 && S_ISDIR(src.st.st_mode))
        rc = -EPERM;
    if (rc == 0)
        rc = bfs__px_resolve_parent(j->priv, &req->newloc, true, &npar);
    if (rc == 0)
        rc = bfs__px_fstat_iatt(npar.fd, &req->newloc.pargfid, &rep->preparent);
    if (rc == 0) {
        /* Through the magic link, as the caller: protected_hardlinks and the
         * new parent's permissions apply as for a local link(2). */
        char path[PX_PROC_FD_LEN];
        bfs__px_proc_path(src.fd, path);
        pthread_mutex_t *el = bfs__px_elock_for(j->priv, &req->newloc.pargfid);
        pthread_mutex_t *il = bfs__px_ilock_for(j->priv, &src.gfid);
        pthread_mutex_lock(el);
        pthread_mutex_lock(il);
        if (SYS.linkat(AT_FDCWD, path, npar.fd, req->newloc.name, AT_SYMLINK_FOLLOW) < 0)
            rc = -errno;
        bfs__px_unlock2(il, el);
    }
    if (rc == 0)
        rc = bfs__px_fstat_iatt(src.fd, &src.gfid, &rep->attr);
    if (rc == 0)
        rc = bfs__px_fstat_iatt(npar.fd, &req->newloc.pargfid, &rep->postparent);
    bfs__px_obj_close(&src);
    bfs__px_obj_close(&npar);
    return rc;
}
PX_FOP_DEFINE(link, BFS_FOP_LINK)
