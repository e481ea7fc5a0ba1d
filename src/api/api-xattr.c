/*
 * api-xattr.c — extended attributes by path (following a final link or
 * not) and by handle, with setxattr(2)'s size rules: a size-0 get or list
 * only reports the size; a buffer too small is ERANGE.
 *
 * On the wire a value travels in a dict keyed by its name: setxattr sends
 * {name: bytes}, getxattr(name) answers {name: bytes}, and getxattr with no
 * name answers every attribute, whose keys make the list. Internal names
 * (trusted.brickfs.*) are the bricks' to hide; they are dropped here too
 * should one ever come back.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "api/api.h"

#define XATTR_NAME_MAX_ 255
#define XATTR_SIZE_MAX_ (64u << 10)
#define INTERNAL_PREFIX "trusted.brickfs."

static int name_check(const char *name)
{
    if (!name)
        return -EFAULT;
    size_t len = strnlen(name, XATTR_NAME_MAX_ + 1);
    if (len == 0 || len > XATTR_NAME_MAX_)
        return -ERANGE;
    return 0;
}

/* Where a call applies: a resolved path or a handle. */
struct target {
    struct brickfs *fs;
    struct bfs_stack *st;
    struct api_res res;
    struct brickfs_fd *fd;
    const char *path;
};

static int target_path(struct target *t, brickfs_t *fs, const char *path, int flags)
{
    memset(t, 0, sizeof(*t));
    t->fs = fs;
    t->path = path;
    return bfs__api_path_begin(fs, path, flags, &t->st, &t->res);
}

static int target_fd(struct target *t, struct brickfs_fd *fd)
{
    memset(t, 0, sizeof(*t));
    if (!fd || !fd->fd)
        return -EBADF;
    t->fs = fd->fs;
    t->fd = fd;
    t->st = bfs__api_fd_stack(fd);
    return t->st ? 0 : -ENOMEM;
}

static void target_end(struct target *t)
{
    if (t->fd)
        bfs_stack_unref(t->st);
    else
        bfs__api_path_end(t->st, &t->res);
}

static int t_set(struct target *t, const char *name, const void *value, size_t size, int flags)
{
    struct bfs_dict *d = bfs_dict_new();
    if (!d || bfs_dict_set_bin(d, name, value, size) < 0) {
        bfs_dict_unref(d);
        return -ENOMEM;
    }
    int rc;
    struct bfs_xl *top = t->fs->graph->top;
    if (t->fd) {
        struct bfs_fsetxattr_req req = {0};
        req.fd = t->fd->fd;
        req.xattrs = d;
        req.flags = (uint32_t)flags;
        rc = bfs_sync_fsetxattr(top, t->st, &req, NULL);
    } else {
        struct bfs_setxattr_req req = {0};
        bfs__api_res_loc(&t->res, &req.loc, t->path);
        req.xattrs = d;
        req.flags = (uint32_t)flags;
        rc = bfs_sync_setxattr(top, t->st, &req, NULL);
    }
    bfs_dict_unref(d);
    return rc < 0 ? rc : 0;
}

/* getxattr(name) or, name NULL, every attribute: *out is a ref'd dict. */
static int t_get(struct target *t, const char *name, struct bfs_dict **out)
{
    int rc;
    struct bfs_xl *top = t->fs->graph->top;
    *out = NULL;
    if (t->fd) {
        struct bfs_fgetxattr_req req = {0};
        struct bfs_fgetxattr_rep rep;
        req.fd = t->fd->fd;
        req.name = name;
        rc = bfs_sync_fgetxattr(top, t->st, &req, &rep);
        if (rc >= 0)
            *out = bfs_dict_ref(rep.xattrs);
        bfs_fgetxattr_rep_clear_dup(&rep);
    } else {
        struct bfs_getxattr_req req = {0};
        struct bfs_getxattr_rep rep;
        bfs__api_res_loc(&t->res, &req.loc, t->path);
        req.name = name;
        rc = bfs_sync_getxattr(top, t->st, &req, &rep);
        if (rc >= 0)
            *out = bfs_dict_ref(rep.xattrs);
        bfs_getxattr_rep_clear_dup(&rep);
    }
    return rc < 0 ? rc : 0;
}

static int t_remove(struct target *t, const char *name)
{
    int rc;
    struct bfs_xl *top = t->fs->graph->top;
    if (t->fd) {
        struct bfs_fremovexattr_req req = {0};
        req.fd = t->fd->fd;
        req.name = name;
        rc = bfs_sync_fremovexattr(top, t->st, &req, NULL);
    } else {
        struct bfs_removexattr_req req = {0};
        bfs__api_res_loc(&t->res, &req.loc, t->path);
        req.name = name;
        rc = bfs_sync_removexattr(top, t->st, &req, NULL);
    }
    return rc < 0 ? rc : 0;
}

/* Copies len bytes out with the size-0 probe and ERANGE rules. */
static ssize_t copy_out(void *buf, size_t size, const void *val, size_t len)
{
    if (size == 0)
        return (ssize_t)len;
    if (len > size)
        return -ERANGE;
    if (len)
        memcpy(buf, val, len);
    return (ssize_t)len;
}

static ssize_t t_getvalue(struct target *t, const char *name, void *value, size_t size)
{
    struct bfs_dict *d;
    int rc = t_get(t, name, &d);
    if (rc < 0)
        return rc;
    const void *val;
    size_t len;
    enum bfs_val_type type;
    ssize_t n = -ENODATA;
    if (bfs_dict_get_raw(d, name, &type, &val, &len) == 0)
        n = copy_out(value, size, val, len);
    bfs_dict_unref(d);
    return n;
}

struct list_buf {
    char *p;
    size_t len;
};

static int list_add(const char *key, enum bfs_val_type type, const void *val, size_t len,
                    void *arg)
{
    struct list_buf *b = arg;
    (void)type, (void)val, (void)len;
    if (strncmp(key, INTERNAL_PREFIX, sizeof(INTERNAL_PREFIX) - 1) == 0)
        return 0;
    size_t klen = strlen(key) + 1;
    char *np = realloc(b->p, b->len + klen);
    if (!np)
        return -ENOMEM;
    memcpy(np + b->len, key, klen);
    b->p = np;
    b->len += klen;
    return 0;
}

static ssize_t t_list(struct target *t, char *list, size_t size)
{
    struct bfs_dict *d;
    int rc = t_get(t, NULL, &d);
    if (rc < 0)
        return rc;
    struct list_buf b = {0};
    rc = bfs_dict_foreach(d, list_add, &b);
    bfs_dict_unref(d);
    ssize_t n = rc < 0 ? rc : copy_out(list, size, b.p, b.len);
    free(b.p);
    return n;
}

/* ---- the twelve entry points ---- */

static int set_path(brickfs_t *fs, const char *path, int follow, const char *name,
                    const void *value, size_t size, int flags)
{
    int rc = name_check(name);
    if (rc < 0)
        return rc;
    if (size > XATTR_SIZE_MAX_)
        return -E2BIG;
    if (size && !value)
        return -EFAULT;
    if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
        return -EINVAL;
    struct target t;
    if ((rc = target_path(&t, fs, path, follow)) < 0)
        return rc;
    rc = t_set(&t, name, value, size, flags);
    target_end(&t);
    return rc;
}

int brickfs_setxattr(brickfs_t *fs, const char *path, const char *name, const void *value,
                     size_t size, int flags)
{
    return (int)bfs__api_ret(set_path(fs, path, RES_FOLLOW, name, value, size, flags));
}

int brickfs_lsetxattr(brickfs_t *fs, const char *path, const char *name, const void *value,
                      size_t size, int flags)
{
    return (int)bfs__api_ret(set_path(fs, path, 0, name, value, size, flags));
}

int brickfs_fsetxattr(brickfs_fd_t *fd, const char *name, const void *value, size_t size,
                      int flags)
{
    int rc = name_check(name);
    if (rc == 0 && size > XATTR_SIZE_MAX_)
        rc = -E2BIG;
    if (rc == 0 && ((size && !value) || (flags & ~(XATTR_CREATE | XATTR_REPLACE))))
        rc = size && !value ? -EFAULT : -EINVAL;
    struct target t;
    if (rc == 0 && (rc = target_fd(&t, fd)) == 0) {
        rc = t_set(&t, name, value, size, flags);
        target_end(&t);
    }
    return (int)bfs__api_ret(rc);
}

static ssize_t get_path(brickfs_t *fs, const char *path, int follow, const char *name,
                        void *value, size_t size)
{
    int rc = name_check(name);
    if (rc < 0)
        return rc;
    struct target t;
    if ((rc = target_path(&t, fs, path, follow)) < 0)
        return rc;
    ssize_t n = t_getvalue(&t, name, value, size);
    target_end(&t);
    return n;
}

ssize_t brickfs_getxattr(brickfs_t *fs, const char *path, const char *name, void *value,
                         size_t size)
{
    return bfs__api_ret(get_path(fs, path, RES_FOLLOW, name, value, size));
}

ssize_t brickfs_lgetxattr(brickfs_t *fs, const char *path, const char *name, void *value,
                          size_t size)
{
    return bfs__api_ret(get_path(fs, path, 0, name, value, size));
}

ssize_t brickfs_fgetxattr(brickfs_fd_t *fd, const char *name, void *value, size_t size)
{
    ssize_t n = name_check(name);
    struct target t;
    if (n == 0 && (n = target_fd(&t, fd)) == 0) {
        n = t_getvalue(&t, name, value, size);
        target_end(&t);
    }
    return bfs__api_ret(n);
}

static ssize_t list_path(brickfs_t *fs, const char *path, int follow, char *list, size_t size)
{
    struct target t;
    int rc = target_path(&t, fs, path, follow);
    if (rc < 0)
        return rc;
    ssize_t n = t_list(&t, list, size);
    target_end(&t);
    return n;
}

ssize_t brickfs_listxattr(brickfs_t *fs, const char *path, char *list, size_t size)
{
    return bfs__api_ret(list_path(fs, path, RES_FOLLOW, list, size));
}

ssize_t brickfs_llistxattr(brickfs_t *fs, const char *path, char *list, size_t size)
{
    return bfs__api_ret(list_path(fs, path, 0, list, size));
}

ssize_t brickfs_flistxattr(brickfs_fd_t *fd, char *list, size_t size)
{
    struct target t;
    ssize_t n = target_fd(&t, fd);
    if (n == 0) {
        n = t_list(&t, list, size);
        target_end(&t);
    }
    return bfs__api_ret(n);
}

static int remove_path(brickfs_t *fs, const char *path, int follow, const char *name)
{
    int rc = name_check(name);
    if (rc < 0)
        return rc;
    struct target t;
    if ((rc = target_path(&t, fs, path, follow)) < 0)
        return rc;
    rc = t_remove(&t, name);
    target_end(&t);
    return rc;
}

int brickfs_removexattr(brickfs_t *fs, const char *path, const char *name)
{
    return (int)bfs__api_ret(remove_path(fs, path, RES_FOLLOW, name));
}

int brickfs_lremovexattr(brickfs_t *fs, const char *path, const char *name)
{
    return (int)bfs__api_ret(remove_path(fs, path, 0, name));
}

int brickfs_fremovexattr(brickfs_fd_t *fd, const char *name)
{
    int rc = name_check(name);
    struct target t;
    if (rc == 0 && (rc = target_fd(&t, fd)) == 0) {
        rc = t_remove(&t, name);
        target_end(&t);
    }
    return (int)bfs__api_ret(rc);
}
