/*
 * fuse-xattr.c — extended attributes: setxattr, getxattr, listxattr,
 * removexattr.
 *
 * getxattr and listxattr both ask the graph with a getxattr fop (a NULL
 * name asks for every attribute) and answer the kernel's two-step protocol
 * here: size 0 asks how big the answer is, a buffer too small is ERANGE.
 *
 * trusted.brickfs.* is the brick's internal state. Bricks already refuse to
 * show or change it; this layer refuses as well, so that no translator
 * below can leak it by accident: such a name never appears in a list, reads
 * as absent (ENODATA) and cannot be set (EPERM).
 *
 * security.capability: before every write(2) the kernel asks whether the
 * file carries file capabilities (to drop them), and FUSE has no cache for
 * the answer, so each write would cost a second round trip to the brick.
 * Unless the mount has the capability option, the answer is given here:
 * none (ENODATA), and setting one is EOPNOTSUPP — the mount does not
 * support file capabilities, which its default nosuid flag makes the
 * kernel ignore at exec anyway. GlusterFS's FUSE client does the same.
 * The kernel still asks before every write (a FUSE round trip, no brick):
 * only FUSE_HANDLE_KILLPRIV_V2 would stop it, which libfuse 3.14 cannot
 * ask for and which would make clearing set-user-ID bits ours (note 50).
 *
 * POSIX ACLs and SELinux labels: `ls -l` asks for system.posix_acl_access
 * and security.selinux of every entry it lists, which would be two round
 * trips to a brick per entry (`ls -l` of 10,000 files spent 25 of its 27 s
 * there). The kernel does not enforce ACLs on this mount (no FUSE_POSIX_ACL:
 * default_permissions checks the mode bits only), so unless the mount has
 * the acl option it does not claim to support them: get, set and remove of
 * system.posix_acl_access/_default answer EOPNOTSUPP. Unless it has the
 * selinux option, the same for security.selinux: the mount has no labels
 * (the client's kernel labels a FUSE mount as a whole, if at all). ls(1)
 * remembers EOPNOTSUPP for the whole file system after the first entry
 * (coreutils' file_has_acl_cache and getfilecon_cache), so `ls -l` then
 * asks nothing more per entry; an ENODATA would cost one FUSE round trip
 * per entry. GlusterFS's FUSE client answers ACLs the same way (and
 * security.selinux with ENODATA). Listings leave out every name the mount
 * answers itself.
 *
 * brickfs.graph is the mount's own virtual attribute: a JSON view of its
 * active graph (docs/design/graph-switch.md), answered without a brick.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/fuse-bridge.h"

/* ---- answered by the mount ---- */

static bool is_acl_key(const char *name)
{
    return strcmp(name, "system.posix_acl_access") == 0 ||
           strcmp(name, "system.posix_acl_default") == 0;
}

int bfs_fuse_xattr_local(const struct bfs_fuse *fu, const char *name, int op)
{
    if (bfs_fuse_hidden_xattr(name))
        return op == BFS_FUSE_XSET ? EPERM : ENODATA;
    if ((!fu->opts->acl && is_acl_key(name)) ||
        (!fu->opts->selinux && strcmp(name, "security.selinux") == 0))
        return EOPNOTSUPP;
    if (!fu->opts->capability && strcmp(name, "security.capability") == 0)
        return op == BFS_FUSE_XSET ? EOPNOTSUPP : ENODATA;
    return 0;
}

/* ---- set and remove ---- */

static void changed(struct bfs_fuse_call *c, int rc)
{
    /* ctime moved on the brick: drop the kernel's cached copy first, so no
     * stat after our reply can see the old one */
    if (rc >= 0) {
        bfs_fuse_node_dir_attr_drop(c->fu, c->ino);
        bfs_fuse_inval_attr(c->fu, c->ino);
    }
    fuse_reply_err(c->req, rc < 0 ? -rc : 0);
    bfs_fuse_call_done(c);
}

static void setxattr_cbk(struct bfs_frame *frame, void *cookie, int rc,
                         const struct bfs_setxattr_rep *rep)
{
    changed(bfs_fuse_call_of(frame), rc);
}

void bfs_fuse_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                       size_t size, int flags)
{
    int local = bfs_fuse_xattr_local(bfs_fuse_of(req), name, BFS_FUSE_XSET);
    struct bfs_fuse_call *c = bfs_fuse_call_on(req, ino, -local);
    if (!c)
        return;
    struct bfs_setxattr_req r = {.xattrs = bfs_dict_new(), .flags = (uint32_t)flags};
    if (!r.xattrs || bfs_dict_set_bin(r.xattrs, name, value, size) < 0) {
        bfs_dict_unref(r.xattrs);
        bfs_fuse_call_fail(c, -ENOMEM);
        return;
    }
    int rc = bfs_fuse_loc_ino(c, &r.loc, ino);
    if (rc == 0)
        rc = bfs_wind_setxattr(c->frame, bfs_fuse_top(c), setxattr_cbk, NULL, &r);
    bfs_dict_unref(r.xattrs);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

static void removexattr_cbk(struct bfs_frame *frame, void *cookie, int rc,
                            const struct bfs_removexattr_rep *rep)
{
    changed(bfs_fuse_call_of(frame), rc);
}

void bfs_fuse_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    int local = bfs_fuse_xattr_local(bfs_fuse_of(req), name, BFS_FUSE_XREMOVE);
    struct bfs_fuse_call *c = bfs_fuse_call_on(req, ino, -local);
    if (!c)
        return;
    struct bfs_removexattr_req r = {.name = name};
    int rc = bfs_fuse_loc_ino(c, &r.loc, ino);
    if (rc == 0)
        rc = bfs_wind_removexattr(c->frame, bfs_fuse_top(c), removexattr_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

/* ---- get and list ---- */

/* Answers a value or list of len bytes under the size-probe protocol. */
static void reply_sized(struct bfs_fuse_call *c, const void *data, size_t len)
{
    size_t size = c->u64[0];
    if (size == 0)
        fuse_reply_xattr(c->req, len);
    else if (len > size)
        fuse_reply_err(c->req, ERANGE);
    else
        fuse_reply_buf(c->req, data, len);
}

static void getxattr_cbk(struct bfs_frame *frame, void *cookie, int rc,
                         const struct bfs_getxattr_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    enum bfs_val_type type;
    const void *val = NULL;
    size_t len = 0;
    if (rc >= 0 && bfs_dict_get_raw(rep->xattrs, c->name, &type, &val, &len) < 0)
        rc = -ENODATA;
    if (rc < 0)
        fuse_reply_err(c->req, -rc);
    else
        reply_sized(c, val, len);
    bfs_fuse_call_done(c);
}

/* brickfs.graph: the mount's own state, answered here (fuse-graph.c). */
static void graph_xattr(fuse_req_t req, size_t size)
{
    char *text = bfs_fuse_graph_dump(bfs_fuse_of(req));
    size_t len = text ? strlen(text) : 0;
    if (!text)
        fuse_reply_err(req, ENOMEM);
    else if (size == 0)
        fuse_reply_xattr(req, len);
    else if (len > size)
        fuse_reply_err(req, ERANGE);
    else
        fuse_reply_buf(req, text, len);
    free(text);
}

void bfs_fuse_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    int local = bfs_fuse_xattr_local(bfs_fuse_of(req), name, BFS_FUSE_XGET);
    if (local) {
        fuse_reply_err(req, local);
        return;
    }
    if (strcmp(name, BFS_FUSE_GRAPH_XATTR) == 0) {
        graph_xattr(req, size);
        return;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    c->u64[0] = size;
    if (!(c->name = strdup(name))) {
        bfs_fuse_call_fail(c, -ENOMEM);
        return;
    }
    struct bfs_getxattr_req r = {.name = name};
    int rc = bfs_fuse_loc_ino(c, &r.loc, ino);
    if (rc == 0)
        rc = bfs_wind_getxattr(c->frame, bfs_fuse_top(c), getxattr_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

struct name_list {
    const struct bfs_fuse *fu;
    char *buf;   /* NULL: only count */
    size_t len;
};

static int add_name(const char *key, enum bfs_val_type type, const void *val, size_t len,
                    void *arg)
{
    struct name_list *l = arg;
    if (bfs_fuse_xattr_local(l->fu, key, BFS_FUSE_XGET))
        return 0;
    size_t n = strlen(key) + 1;
    if (l->buf)
        memcpy(l->buf + l->len, key, n);
    l->len += n;
    return 0;
}

static void listxattr_cbk(struct bfs_frame *frame, void *cookie, int rc,
                          const struct bfs_getxattr_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    struct name_list l = {c->fu, NULL, 0};
    size_t size = c->u64[0];
    if (rc >= 0)
        bfs_dict_foreach(rep->xattrs, add_name, &l); /* count */
    if (rc < 0) {
        fuse_reply_err(c->req, -rc);
    } else if (size == 0 || l.len > size) {
        reply_sized(c, NULL, l.len);
    } else if (!(l.buf = malloc(l.len ? l.len : 1))) {
        fuse_reply_err(c->req, ENOMEM);
    } else {
        l.len = 0;
        bfs_dict_foreach(rep->xattrs, add_name, &l);
        fuse_reply_buf(c->req, l.buf, l.len);
    }
    free(l.buf);
    bfs_fuse_call_done(c);
}

void bfs_fuse_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    c->u64[0] = size;
    struct bfs_getxattr_req r = {.name = NULL};
    int rc = bfs_fuse_loc_ino(c, &r.loc, ino);
    if (rc == 0)
        rc = bfs_wind_getxattr(c->frame, bfs_fuse_top(c), listxattr_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}
