/*
 * posix-xattr.c — extended attributes: get/set/remove (path and fd forms)
 * and xattrop, the atomic counter update replicate and disperse build on.
 *
 * Who may touch which key:
 *   trusted.brickfs.*   brickfs's own. Invisible to clients: getxattr of one
 *                       is -ENODATA, a listing leaves them out, setting or
 *                       removing one is -EPERM. A brick-side translator says
 *                       so with xdata "brickfs-internal" = 1 (protocol/server
 *                       strips that key from client requests) and may then
 *                       read and write them, except trusted.brickfs.gfid,
 *                       which only storage/posix itself ever writes.
 *   trusted.*, security.*  the brick thread keeps CAP_SYS_ADMIN and
 *                       CAP_SETFCAP whatever its fsuid, so the rules the
 *                       kernel applies to an unprivileged process are applied
 *                       here for callers other than uid 0: trusted.* is
 *                       invisible and unwritable, security.* unwritable.
 *   user.*, system.posix_acl_*  pass through; the kernel checks them with
 *                       the caller's identity.
 *
 * "brickfs.path" is virtual (uid 0): a directory's path from the brick root,
 * read from its handle chain (get_path).
 *
 * getxattr with a NULL (or empty) name answers every visible key with its
 * value (rc = number of keys); with a name, just that key (rc = its length),
 * -ENODATA if absent. Values are BIN. setxattr applies every key of the
 * dict in order with the flags (XATTR_CREATE, XATTR_REPLACE), stopping at
 * the first failure.
 *
 * xattrop (cluster-internal, runs as root, any key but the GFID's):
 *   ADD64 / ADD32  each value is an array of big-endian 64/32-bit integers,
 *                  added element-wise to the stored array (missing = zeros;
 *                  the result is as long as the longer of the two); the
 *                  reply carries the new values;
 *   GET_AND_SET    stores each value; the reply carries the old values (keys
 *                  that did not exist are left out).
 * Each call runs under the inode's striped mutex: concurrent xattrops on one
 * inode never lose an update. Keys are applied in order, not atomically as
 * a group.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "posix.h"
#include "rpc/codec.h"

#define PX_XATTR_MAX 65536 /* XATTR_SIZE_MAX */
#define PX_XLIST_MAX 65536 /* XATTR_LIST_MAX */
#define PX_XT_SMALL 256     /* read in one call (xt_read) */

bool bfs__px_key_internal(const char *key)
{
    return strncmp(key, PX_INTERNAL_PREFIX, sizeof(PX_INTERNAL_PREFIX) - 1) == 0;
}

/* ---- a target: a path-resolved object (O_PATH fd) or an open fd ---- */

struct xt {
    int fd;
    bool path;                  /* use proc (the O_PATH fd's magic link) */
    char proc[PX_PROC_FD_LEN];
};

static void xt_init(struct xt *t, int fd, bool path)
{
    t->fd = fd;
    t->path = path;
    bfs__px_proc_path(fd, t->proc);
}

static ssize_t xt_get(const struct xt *t, const char *key, void *buf, size_t len)
{
    return t->path ? SYS.getxattr(t->proc, key, buf, len) : SYS.fgetxattr(t->fd, key, buf, len);
}

static int xt_set(const struct xt *t, const char *key, const void *v, size_t len, int flags)
{
    int rc = t->path ? SYS.setxattr(t->proc, key, v, len, flags)
                     : SYS.fsetxattr(t->fd, key, v, len, flags);
    return rc < 0 ? -errno : 0;
}

static int xt_remove(const struct xt *t, const char *key)
{
    int rc = t->path ? SYS.removexattr(t->proc, key) : SYS.fremovexattr(t->fd, key);
    return rc < 0 ? -errno : 0;
}

static ssize_t xt_list(const struct xt *t, char *buf, size_t len)
{
    return t->path ? SYS.listxattr(t->proc, buf, len) : SYS.flistxattr(t->fd, buf, len);
}

/* A copy of the n bytes read into a malloc'd buffer (*out, *len). */
static int xt_keep(const char *v, size_t n, char **out, size_t *len)
{
    char *buf = malloc(n + 1);
    if (!buf)
        return -ENOMEM;
    memcpy(buf, v, n);
    *out = buf;
    *len = n;
    return 0;
}

/* Reads one value into a malloc'd buffer (*out, *len). -errno on failure.
 * A value that fits PX_XT_SMALL (a changelog row: 24 bytes) takes one call;
 * a bigger one is sized first (ERANGE: retried, see below). */
static int xt_read(const struct xt *t, const char *key, char **out, size_t *len)
{
    char small[PX_XT_SMALL];
    ssize_t k = xt_get(t, key, small, sizeof(small));
    if (k >= 0)
        return xt_keep(small, (size_t)k, out, len);
    if (errno != ERANGE)
        return -errno;
    for (int attempt = 0; attempt < 4; attempt++) {
        ssize_t n = xt_get(t, key, NULL, 0);
        if (n < 0)
            return -errno;
        char *buf = malloc((size_t)n + 1);
        if (!buf)
            return -ENOMEM;
        ssize_t m = xt_get(t, key, buf, (size_t)n);
        if (m >= 0) {
            *out = buf;
            *len = (size_t)m;
            return 0;
        }
        free(buf);
        if (errno != ERANGE) /* ERANGE: it grew in between, ask again */
            return -errno;
    }
    return -ERANGE;
}

/* ---- key policy ---- */

struct who {
    bool internal; /* brick-side translator (xdata brickfs-internal = 1) */
    bool root;     /* caller uid 0 */
};

static struct who who_of(struct px_job *j, const struct bfs_dict *xdata)
{
    int64_t v = 0;
    struct who w = {.root = j->frame->stack->uid == 0};
    w.internal = bfs_dict_get_int(xdata, PX_INTERNAL_KEY, &v) == 0 && v == 1;
    return w;
}

static bool may_read(const struct who *w, const char *key)
{
    if (bfs__px_key_internal(key))
        return w->internal;
    if (strncmp(key, "trusted.", 8) == 0)
        return w->internal || w->root;
    return true;
}

static int may_write(const struct who *w, const char *key)
{
    if (strcmp(key, PX_GFID_XATTR) == 0)
        return -EPERM;
    if (bfs__px_key_internal(key))
        return w->internal ? 0 : -EPERM;
    if (strncmp(key, "trusted.", 8) == 0 || strncmp(key, "security.", 9) == 0)
        return w->internal || w->root ? 0 : -EPERM;
    return 0;
}

/* ---- getxattr ---- */

static int get_all(const struct xt *t, const struct who *w, struct bfs_dict *out)
{
    char *names = malloc(PX_XLIST_MAX);
    if (!names)
        return -ENOMEM;
    ssize_t n = xt_list(t, names, PX_XLIST_MAX);
    int rc = n < 0 ? -errno : 0, count = 0;
    for (ssize_t off = 0; rc == 0 && off < n; off += (ssize_t)strlen(names + off) + 1) {
        const char *key = names + off;
        char *v;
        size_t len;
        if (!may_read(w, key))
            continue;
        int r = xt_read(t, key, &v, &len);
        if (r == -ENODATA)
            continue; /* removed since the listing */
        if (r < 0) {
            rc = r;
            break;
        }
        rc = bfs_dict_set_bin(out, key, v, len);
        free(v);
        count++;
    }
    free(names);
    return rc < 0 ? rc : count;
}

static int get_one(const struct xt *t, const struct who *w, const char *key,
                   struct bfs_dict *out)
{
    char *v;
    size_t len;
    if (!may_read(w, key))
        return -ENODATA;
    int rc = xt_read(t, key, &v, &len);
    if (rc < 0)
        return rc;
    rc = bfs_dict_set_bin(out, key, v, len);
    free(v);
    return rc < 0 ? rc : (int)len;
}

static int getx(struct px_job *j, const struct xt *t, const char *name,
                const struct bfs_dict *xdata, struct bfs_dict **out)
{
    struct who w = who_of(j, xdata);
    if (!(*out = bfs_dict_new()))
        return -ENOMEM;
    if (!name || !*name)
        return get_all(t, &w, *out);
    return get_one(t, &w, name, *out);
}

/* The virtual "brickfs.path" (uid 0): a directory's path from the brick
 * root, read from its handle chain; ENODATA for anything else (a file's
 * names are not recorded). For the self-heal daemon's heal info. */
static int get_path(struct px_job *j, const struct px_obj *o, struct bfs_dict **out)
{
    char *path = NULL;
    if (j->frame->stack->uid != 0)
        return -EPERM;
    if (!S_ISDIR(o->st.st_mode))
        return -ENODATA;
    int rc = bfs__px_dir_path(j->priv, &o->gfid, &path);
    if (rc == 0 && !(*out = bfs_dict_new()))
        rc = -ENOMEM;
    if (rc == 0)
        rc = bfs_dict_set_str(*out, PX_VKEY_PATH, path);
    int n = rc == 0 ? (int)strlen(path) : rc;
    free(path);
    return n;
}

static int do_getxattr(struct px_job *j, const struct bfs_getxattr_req *req,
                       struct bfs_getxattr_rep *rep)
{
    struct px_obj o = PX_OBJ_INIT;
    struct xt t;
    int rc = bfs__px_resolve_loc(j->priv, &req->loc, &o);
    if (rc == 0 && req->name && strcmp(req->name, PX_VKEY_PATH) == 0) {
        rc = get_path(j, &o, &rep->xattrs);
        bfs__px_obj_close(&o);
        return rc;
    }
    if (rc == 0) {
        xt_init(&t, o.fd, true);
        rc = getx(j, &t, req->name, req->xdata, &rep->xattrs);
    }
    bfs__px_obj_close(&o);
    return rc;
}
PX_FOP_DEFINE(getxattr, BFS_FOP_GETXATTR)

static int do_fgetxattr(struct px_job *j, const struct bfs_fgetxattr_req *req,
                        struct bfs_fgetxattr_rep *rep)
{
    struct px_fd *pf;
    struct xt t;
    int rc = bfs__px_fd_get(j, req->fd, &pf);
    if (rc < 0)
        return rc;
    xt_init(&t, pf->fd, false);
    return getx(j, &t, req->name, req->xdata, &rep->xattrs);
}
PX_FOP_DEFINE(fgetxattr, BFS_FOP_FGETXATTR)

/* ---- setxattr, removexattr ---- */

struct set_ctx {
    const struct xt *t;
    const struct who *w;
    int flags;
};

static int set_one(const char *key, enum bfs_val_type type, const void *val, size_t len,
                   void *arg)
{
    (void)type;
    struct set_ctx *c = arg;
    int rc = may_write(c->w, key);
    return rc < 0 ? rc : xt_set(c->t, key, val, len, c->flags);
}

static int setx(struct px_job *j, const struct xt *t, const struct bfs_dict *xattrs,
                uint32_t flags, const struct bfs_dict *xdata)
{
    struct who w = who_of(j, xdata);
    if (flags & ~(uint32_t)(XATTR_CREATE | XATTR_REPLACE))
        return -EINVAL;
    if (!xattrs || bfs_dict_count(xattrs) == 0)
        return -EINVAL;
    struct set_ctx c = {.t = t, .w = &w, .flags = (int)flags};
    return bfs_dict_foreach(xattrs, set_one, &c);
}

/* ---- xattrs given with a new entry ---- */

#define PX_DHT_PREFIX "trusted.brickfs.dht."

struct entry_ctx {
    struct set_ctx set;
    int n;
};

/* set_one for the trusted.brickfs.dht.* keys of xdata; the others are not
 * for the entry (gfid-req, brickfs-internal). */
static int entry_one(const char *key, enum bfs_val_type type, const void *val, size_t len,
                     void *arg)
{
    struct entry_ctx *c = arg;
    if (type != BFS_VAL_BIN || strncmp(key, PX_DHT_PREFIX, sizeof(PX_DHT_PREFIX) - 1) != 0)
        return 0;
    int rc = set_one(key, type, val, len, &c->set);
    c->n += rc == 0;
    return rc;
}

int bfs__px_entry_xattrs(struct px_job *j, int fd, const struct bfs_dict *xdata)
{
    if (!xdata)
        return 0;
    struct who w = who_of(j, xdata);
    struct xt t;
    xt_init(&t, fd, true);
    struct entry_ctx c = {.set = {.t = &t, .w = &w}};
    int rc = bfs_dict_foreach(xdata, entry_one, &c);
    return rc < 0 ? rc : c.n > 0;
}

static int do_setxattr(struct px_job *j, const struct bfs_setxattr_req *req,
                       struct bfs_setxattr_rep *rep)
{
    (void)rep;
    struct px_obj o = PX_OBJ_INIT;
    struct xt t;
    int rc = bfs__px_resolve_loc(j->priv, &req->loc, &o);
    if (rc == 0) {
        xt_init(&t, o.fd, true);
        rc = setx(j, &t, req->xattrs, req->flags, req->xdata);
    }
    bfs__px_obj_close(&o);
    return rc;
}
PX_FOP_DEFINE(setxattr, BFS_FOP_SETXATTR)

static int do_fsetxattr(struct px_job *j, const struct bfs_fsetxattr_req *req,
                        struct bfs_fsetxattr_rep *rep)
{
    (void)rep;
    struct px_fd *pf;
    struct xt t;
    int rc = bfs__px_fd_get(j, req->fd, &pf);
    if (rc < 0)
        return rc;
    xt_init(&t, pf->fd, false);
    return setx(j, &t, req->xattrs, req->flags, req->xdata);
}
PX_FOP_DEFINE(fsetxattr, BFS_FOP_FSETXATTR)

static int removex(struct px_job *j, const struct xt *t, const char *name,
                   const struct bfs_dict *xdata)
{
    struct who w = who_of(j, xdata);
    if (!name || !*name)
        return -EINVAL;
    if (!may_read(&w, name))
        return -EPERM;
    int rc = may_write(&w, name);
    return rc < 0 ? rc : xt_remove(t, name);
}

static int do_removexattr(struct px_job *j, const struct bfs_removexattr_req *req,
                          struct bfs_removexattr_rep *rep)
{
    (void)rep;
    struct px_obj o = PX_OBJ_INIT;
    struct xt t;
    int rc = bfs__px_resolve_loc(j->priv, &req->loc, &o);
    if (rc == 0) {
        xt_init(&t, o.fd, true);
        rc = removex(j, &t, req->name, req->xdata);
    }
    bfs__px_obj_close(&o);
    return rc;
}
PX_FOP_DEFINE(removexattr, BFS_FOP_REMOVEXATTR)

static int do_fremovexattr(struct px_job *j, const struct bfs_fremovexattr_req *req,
                           struct bfs_fremovexattr_rep *rep)
{
    (void)rep;
    struct px_fd *pf;
    struct xt t;
    int rc = bfs__px_fd_get(j, req->fd, &pf);
    if (rc < 0)
        return rc;
    xt_init(&t, pf->fd, false);
    return removex(j, &t, req->name, req->xdata);
}
PX_FOP_DEFINE(fremovexattr, BFS_FOP_FREMOVEXATTR)

/* ---- xattrop ---- */

struct op_ctx {
    const struct xt *t;
    uint32_t optype;
    struct bfs_dict *out;
};

/* Adding zeros reads a row (a pre-op's, a post-op's): a value that stays
 * as it was is not written again (the file's ctime stays too), and a key
 * absent is left absent (every reader takes it as zeros; the reply still
 * carries the zeros). */
static bool unchanged(const char *old, size_t olen, const uint8_t *res, size_t rlen)
{
    if (olen)
        return olen == rlen && memcmp(old, res, rlen) == 0;
    for (size_t i = 0; i < rlen; i++)
        if (res[i])
            return false;
    return true;
}

/* Element-wise big-endian add of `add` into the stored value of key. */
static int op_add(struct op_ctx *c, const char *key, const uint8_t *add, size_t alen)
{
    size_t es = c->optype == BFS_XATTROP_ADD64 ? 8 : 4;
    char *old = NULL;
    size_t olen = 0;
    if (alen == 0 || alen % es || alen > PX_XATTR_MAX)
        return -EINVAL;
    int rc = xt_read(c->t, key, &old, &olen);
    if (rc == -ENODATA)
        rc = 0;
    if (rc == 0 && olen % es)
        rc = -EINVAL; /* the stored value is not such an array */
    size_t rlen = olen > alen ? olen : alen;
    uint8_t *res = rc == 0 ? calloc(1, rlen) : NULL;
    if (rc == 0 && !res)
        rc = -ENOMEM;
    if (rc == 0) {
        if (olen)
            memcpy(res, old, olen);
        for (size_t i = 0; i < alen; i += es) {
            if (es == 8) {
                uint64_t a, b;
                memcpy(&a, res + i, 8);
                memcpy(&b, add + i, 8);
                a = htobe64(be64toh(a) + be64toh(b));
                memcpy(res + i, &a, 8);
            } else {
                uint32_t a, b;
                memcpy(&a, res + i, 4);
                memcpy(&b, add + i, 4);
                a = htobe32(be32toh(a) + be32toh(b));
                memcpy(res + i, &a, 4);
            }
        }
        if (!unchanged(old, olen, res, rlen))
            rc = xt_set(c->t, key, res, rlen, 0);
    }
    if (rc == 0)
        rc = bfs_dict_set_bin(c->out, key, res, rlen);
    free(res);
    free(old);
    return rc;
}

static int op_get_and_set(struct op_ctx *c, const char *key, const void *v, size_t len)
{
    char *old = NULL;
    size_t olen = 0;
    int rc = xt_read(c->t, key, &old, &olen);
    bool had = rc == 0;
    if (rc == -ENODATA)
        rc = 0;
    if (rc == 0)
        rc = xt_set(c->t, key, v, len, 0);
    if (rc == 0 && had)
        rc = bfs_dict_set_bin(c->out, key, old, olen);
    free(old);
    return rc;
}

static int op_one(const char *key, enum bfs_val_type type, const void *val, size_t len,
                  void *arg)
{
    (void)type;
    struct op_ctx *c = arg;
    if (strcmp(key, PX_GFID_XATTR) == 0)
        return -EPERM;
    if (c->optype == BFS_XATTROP_GET_AND_SET)
        return op_get_and_set(c, key, val, len);
    return op_add(c, key, val, len);
}

static int xattrop(struct px_job *j, const struct xt *t, const struct bfs_gfid *g,
                   uint32_t optype, const struct bfs_dict *xattrs, struct bfs_dict **out)
{
    if (optype != BFS_XATTROP_ADD64 && optype != BFS_XATTROP_ADD32 &&
        optype != BFS_XATTROP_GET_AND_SET)
        return -EINVAL;
    if (!xattrs)
        return -EINVAL;
    if (!(*out = bfs_dict_new()))
        return -ENOMEM;
    struct op_ctx c = {.t = t, .optype = optype, .out = *out};
    pthread_mutex_t *lk = bfs__px_ilock_for(j->priv, g);
    bfs__px_root_begin();
    pthread_mutex_lock(lk);
    int rc = bfs_dict_foreach(xattrs, op_one, &c);
    pthread_mutex_unlock(lk);
    bfs__px_root_end();
    return rc;
}

/* The object's attributes after a successful xattrop, in the reply's
 * xdata, when the request asks (BFS_XDATA_IATT_REQ: a changelog post-op,
 * whose caller tells md-cache what the file looks like now). Without them
 * (no memory, fstat failed) the xattrop still succeeded: the caller then
 * vouches for nothing. */
static void post_iatt(const struct bfs_dict *xreq, int fd, const struct bfs_gfid *g,
                      struct bfs_dict **xdata)
{
    struct bfs_iatt ia;
    if (!bfs_dict_has(xreq, BFS_XDATA_IATT_REQ) || bfs__px_fstat_iatt(fd, g, &ia) < 0)
        return;
    struct bfs_dict *d = bfs_dict_new();
    if (d && bfs_dict_set_iatt(d, BFS_XDATA_IATT, &ia) == 0)
        *xdata = d;
    else
        bfs_dict_unref(d);
}

static int do_xattrop(struct px_job *j, const struct bfs_xattrop_req *req,
                      struct bfs_xattrop_rep *rep)
{
    struct px_obj o = PX_OBJ_INIT;
    struct xt t;
    int rc = bfs__px_resolve_loc(j->priv, &req->loc, &o);
    if (rc == 0) {
        xt_init(&t, o.fd, true);
        rc = xattrop(j, &t, &o.gfid, req->optype, req->xattrs, &rep->xattrs);
        if (rc == 0)
            post_iatt(req->xdata, o.fd, &o.gfid, &rep->xdata);
    }
    bfs__px_obj_close(&o);
    return rc;
}
PX_FOP_DEFINE(xattrop, BFS_FOP_XATTROP)

static int do_fxattrop(struct px_job *j, const struct bfs_fxattrop_req *req,
                       struct bfs_fxattrop_rep *rep)
{
    struct px_fd *pf;
    struct xt t;
    int rc = bfs__px_fd_get(j, req->fd, &pf);
    if (rc < 0)
        return rc;
    xt_init(&t, pf->fd, false);
    rc = xattrop(j, &t, &pf->gfid, req->optype, req->xattrs, &rep->xattrs);
    if (rc == 0)
        post_iatt(req->xdata, pf->fd, &pf->gfid, &rep->xdata);
    return rc;
}
PX_FOP_DEFINE(fxattrop, BFS_FOP_FXATTROP)

int bfs__px_fd_add64(struct px_job *j, struct px_fd *pf, const struct bfs_dict *deltas)
{
    struct xt t;
    struct bfs_dict *out = NULL;
    xt_init(&t, pf->fd, false);
    int rc = xattrop(j, &t, &pf->gfid, BFS_XATTROP_ADD64, deltas, &out);
    bfs_dict_unref(out);
    return rc;
}
