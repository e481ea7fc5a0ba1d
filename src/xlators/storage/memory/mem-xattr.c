/*
 * mem-xattr.c — extended attributes in storage/memory: set/get/remove (by
 * loc and by fd), xattrop, and the xattrs a lookup asks for in its xdata.
 *
 * Values are kept as raw bytes, as a disk would keep them: a STR value is
 * stored without its NUL, an INT as its 8 little-endian bytes, and every
 * value is answered as BIN.
 *
 * xattrop (GlusterFS's convention): ADD64 / ADD32 treat old and given
 * values as arrays of big-endian 64- / 32-bit integers, add them element by
 * element (a missing attribute counts as zeros) and answer the new values;
 * GET_AND_SET stores the given value and answers the old one (absent keys
 * are left out of the answer). All keys change together or none does.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "mem.h"

struct set_ctx {
    struct mem_inode *mi;
    uint32_t flags;
    int pass; /* 0: check, 1: apply */
};

static int set_one(const char *key, enum bfs_val_type type, const void *val, size_t len,
                   void *arg)
{
    struct set_ctx *c = arg;
    (void)type;
    if (c->pass == 0) {
        bool exists = bfs_dict_has(c->mi->xattrs, key);
        if ((c->flags & XATTR_CREATE) && exists)
            return -EEXIST;
        if ((c->flags & XATTR_REPLACE) && !exists)
            return -ENODATA;
        return *key ? 0 : -EINVAL;
    }
    return bfs_dict_set_bin(c->mi->xattrs, key, val, len);
}

static int do_setxattr(struct mem_inode *mi, const struct bfs_dict *xattrs, uint32_t flags)
{
    struct set_ctx c = {mi, flags, 0};
    if (!xattrs || bfs_dict_count(xattrs) == 0)
        return -EINVAL;
    if (!mi->xattrs && !(mi->xattrs = bfs_dict_new()))
        return -ENOMEM;
    int rc = bfs_dict_foreach(xattrs, set_one, &c);
    if (rc == 0) {
        c.pass = 1;
        rc = bfs_dict_foreach(xattrs, set_one, &c);
    }
    if (rc == 0)
        bfs__mem_touch(mi, false, false, true);
    return rc;
}

static int copy_one(const char *key, enum bfs_val_type type, const void *val, size_t len,
                    void *arg)
{
    (void)type;
    return bfs_dict_set_bin(arg, key, val, len);
}

/* name NULL: every xattr; else just that one (-ENODATA if absent). */
static int do_getxattr(const struct mem_inode *mi, const char *name, struct bfs_dict **out)
{
    const void *val;
    size_t len;
    if (name && bfs_dict_get_raw(mi->xattrs, name, NULL, &val, &len) < 0)
        return -ENODATA;
    struct bfs_dict *d = bfs_dict_new();
    if (!d)
        return -ENOMEM;
    int rc = name ? bfs_dict_set_bin(d, name, val, len)
                  : bfs_dict_foreach(mi->xattrs, copy_one, d);
    if (rc < 0) {
        bfs_dict_unref(d);
        return rc;
    }
    *out = d;
    return 0;
}

struct want_ctx {
    const struct mem_inode *mi;
    struct bfs_dict *out;
};

static int want_one(const char *key, enum bfs_val_type type, const void *val, size_t len,
                    void *arg)
{
    struct want_ctx *c = arg;
    const void *v;
    size_t l;
    (void)type;
    (void)val;
    (void)len;
    if (bfs_dict_get_raw(c->mi->xattrs, key, NULL, &v, &l) < 0)
        return 0;
    if (!c->out && !(c->out = bfs_dict_new()))
        return -ENOMEM;
    return bfs_dict_set_bin(c->out, key, v, l);
}

int bfs__mem_xattrs_wanted(const struct mem_inode *mi, const struct bfs_dict *want,
                           struct bfs_dict **out)
{
    struct want_ctx c = {mi, NULL};
    int rc = bfs_dict_foreach(want, want_one, &c);
    if (rc < 0) {
        bfs_dict_unref(c.out);
        return rc;
    }
    *out = c.out;
    return 0;
}

static int do_removexattr(struct mem_inode *mi, const char *name)
{
    if (!name || bfs_dict_del(mi->xattrs, name) < 0)
        return -ENODATA;
    bfs__mem_touch(mi, false, false, true);
    return 0;
}

/* ---- xattrop ---- */

struct op_ctx {
    const struct mem_inode *mi;
    uint32_t optype;
    struct bfs_dict *next;  /* values to store */
    struct bfs_dict *reply; /* values to answer */
};

static int add_arrays(const uint8_t *old, size_t oldlen, const uint8_t *add, size_t len,
                      size_t width, uint8_t *out)
{
    if (len % width || (old && oldlen != len))
        return -EINVAL;
    for (size_t i = 0; i < len; i += width) {
        if (width == 8) {
            uint64_t a = 0, b;
            if (old)
                memcpy(&a, old + i, 8);
            memcpy(&b, add + i, 8);
            uint64_t s = htobe64(be64toh(a) + be64toh(b));
            memcpy(out + i, &s, 8);
        } else {
            uint32_t a = 0, b;
            if (old)
                memcpy(&a, old + i, 4);
            memcpy(&b, add + i, 4);
            uint32_t s = htobe32(be32toh(a) + be32toh(b));
            memcpy(out + i, &s, 4);
        }
    }
    return 0;
}

static int op_one(const char *key, enum bfs_val_type type, const void *val, size_t len,
                  void *arg)
{
    struct op_ctx *c = arg;
    const void *old = NULL;
    size_t oldlen = 0;
    (void)type;
    (void)bfs_dict_get_raw(c->mi->xattrs, key, NULL, &old, &oldlen);
    if (c->optype == BFS_XATTROP_GET_AND_SET) {
        int rc = bfs_dict_set_bin(c->next, key, val, len);
        if (rc == 0 && old)
            rc = bfs_dict_set_bin(c->reply, key, old, oldlen);
        return rc;
    }
    size_t width = c->optype == BFS_XATTROP_ADD64 ? 8 : 4;
    uint8_t *sum = malloc(len ? len : 1);
    if (!sum)
        return -ENOMEM;
    int rc = add_arrays(old, oldlen, val, len, width, sum);
    if (rc == 0)
        rc = bfs_dict_set_bin(c->next, key, sum, len);
    if (rc == 0)
        rc = bfs_dict_set_bin(c->reply, key, sum, len);
    free(sum);
    return rc;
}

static int do_xattrop(struct mem_inode *mi, uint32_t optype, const struct bfs_dict *xattrs,
                      struct bfs_dict **out)
{
    if (optype < BFS_XATTROP_ADD64 || optype > BFS_XATTROP_GET_AND_SET || !xattrs)
        return -EINVAL;
    struct op_ctx c = {mi, optype, bfs_dict_new(), bfs_dict_new()};
    int rc = c.next && c.reply ? bfs_dict_foreach(xattrs, op_one, &c) : -ENOMEM;
    if (rc == 0 && !mi->xattrs && !(mi->xattrs = bfs_dict_new()))
        rc = -ENOMEM;
    if (rc == 0)
        rc = bfs_dict_foreach(c.next, copy_one, mi->xattrs);
    bfs_dict_unref(c.next);
    if (rc < 0) {
        bfs_dict_unref(c.reply);
        return rc;
    }
    *out = c.reply;
    return 0;
}

/* ---- the fops: resolve, do, answer ---- */

static struct mem_inode *resolve_any(struct bfs_xl *xl, const struct bfs_loc *loc,
                                     struct bfs_fd *fd, int *rc)
{
    struct mem_inode *mi = NULL;
    if (loc)
        *rc = bfs__mem_resolve(xl->private, loc, &mi, NULL);
    else
        *rc = (mi = bfs__mem_fd_inode(xl, fd)) ? 0 : -EBADF;
    return mi;
}

static int setxattr_common(struct bfs_frame *frame, struct bfs_xl *xl, int fop,
                           const struct bfs_loc *loc, struct bfs_fd *fd,
                           const struct bfs_dict *xattrs, uint32_t flags)
{
    struct mem_priv *priv = xl->private;
    int rc;
    LOCKED(priv)
    {
        struct mem_inode *mi = resolve_any(xl, loc, fd, &rc);
        if (mi)
            rc = do_setxattr(mi, xattrs, flags);
    }
    bfs__mem_reply(xl, frame, fop, rc, NULL);
    return 0;
}

int bfs__mem_setxattr(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_setxattr_req *req)
{
    return setxattr_common(frame, xl, BFS_FOP_SETXATTR, &req->loc, NULL, req->xattrs, req->flags);
}

int bfs__mem_fsetxattr(struct bfs_frame *frame, struct bfs_xl *xl,
                       const struct bfs_fsetxattr_req *req)
{
    return setxattr_common(frame, xl, BFS_FOP_FSETXATTR, NULL, req->fd, req->xattrs, req->flags);
}

/* getxattr and fgetxattr replies share one layout: { xattrs, xdata }. */
static int getxattr_common(struct bfs_frame *frame, struct bfs_xl *xl, int fop,
                           const struct bfs_loc *loc, struct bfs_fd *fd, const char *name)
{
    struct mem_priv *priv = xl->private;
    struct bfs_getxattr_rep rep = {0};
    int rc;
    LOCKED(priv)
    {
        struct mem_inode *mi = resolve_any(xl, loc, fd, &rc);
        if (mi)
            rc = do_getxattr(mi, name, &rep.xattrs);
    }
    if (fop == BFS_FOP_GETXATTR) {
        bfs__mem_reply(xl, frame, fop, rc, &rep);
    } else {
        struct bfs_fgetxattr_rep frep = {.xattrs = rep.xattrs};
        bfs__mem_reply(xl, frame, fop, rc, &frep);
    }
    bfs_dict_unref(rep.xattrs);
    return 0;
}

int bfs__mem_getxattr(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_getxattr_req *req)
{
    return getxattr_common(frame, xl, BFS_FOP_GETXATTR, &req->loc, NULL, req->name);
}

int bfs__mem_fgetxattr(struct bfs_frame *frame, struct bfs_xl *xl,
                       const struct bfs_fgetxattr_req *req)
{
    return getxattr_common(frame, xl, BFS_FOP_FGETXATTR, NULL, req->fd, req->name);
}

static int removexattr_common(struct bfs_frame *frame, struct bfs_xl *xl, int fop,
                              const struct bfs_loc *loc, struct bfs_fd *fd, const char *name)
{
    struct mem_priv *priv = xl->private;
    int rc;
    LOCKED(priv)
    {
        struct mem_inode *mi = resolve_any(xl, loc, fd, &rc);
        if (mi)
            rc = do_removexattr(mi, name);
    }
    bfs__mem_reply(xl, frame, fop, rc, NULL);
    return 0;
}

int bfs__mem_removexattr(struct bfs_frame *frame, struct bfs_xl *xl,
                         const struct bfs_removexattr_req *req)
{
    return removexattr_common(frame, xl, BFS_FOP_REMOVEXATTR, &req->loc, NULL, req->name);
}

int bfs__mem_fremovexattr(struct bfs_frame *frame, struct bfs_xl *xl,
                          const struct bfs_fremovexattr_req *req)
{
    return removexattr_common(frame, xl, BFS_FOP_FREMOVEXATTR, NULL, req->fd, req->name);
}

static int xattrop_common(struct bfs_frame *frame, struct bfs_xl *xl, int fop,
                          const struct bfs_loc *loc, struct bfs_fd *fd, uint32_t optype,
                          const struct bfs_dict *xattrs)
{
    struct mem_priv *priv = xl->private;
    struct bfs_dict *out = NULL;
    int rc;
    LOCKED(priv)
    {
        struct mem_inode *mi = resolve_any(xl, loc, fd, &rc);
        if (mi)
            rc = do_xattrop(mi, optype, xattrs, &out);
    }
    if (fop == BFS_FOP_XATTROP) {
        struct bfs_xattrop_rep rep = {.xattrs = out};
        bfs__mem_reply(xl, frame, fop, rc, &rep);
    } else {
        struct bfs_fxattrop_rep rep = {.xattrs = out};
        bfs__mem_reply(xl, frame, fop, rc, &rep);
    }
    bfs_dict_unref(out);
    return 0;
}

int bfs__mem_xattrop(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_xattrop_req *req)
{
    return xattrop_common(frame, xl, BFS_FOP_XATTROP, &req->loc, NULL, req->optype, req->xattrs);
}

int bfs__mem_fxattrop(struct bfs_frame *frame, struct bfs_xl *xl,
                      const struct bfs_fxattrop_req *req)
{
    return xattrop_common(frame, xl, BFS_FOP_FXATTROP, NULL, req->fd, req->optype, req->xattrs);
}
