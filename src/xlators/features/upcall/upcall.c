/*
 * upcall.c — features/upcall: after every successful change a client makes
 * through this brick, tell every other client what it changed, so that
 * their caches (performance/md-cache, the kernel's through the FUSE bridge)
 * drop it. docs/design/cache-invalidation.md has the protocol.
 *
 * Every fop comes through the generic handler. Changes (write, setattr,
 * entry operations...) are wound with a small note of what they touch
 * (GFIDs and names copied from the request: the request is the caller's
 * and may be gone by the answer); on success the note becomes upcalls,
 * sent upward (protocol/server delivers them to every handshaken client
 * except the one that made the change, stack->client). The note is freed
 * in the callback. Replies md-cache learns from get the xdata key
 * BFS_XDATA_UPCALL, the proof that invalidations flow from this brick.
 *
 * No state outlives a call: nothing is kept per inode or per client.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "core/fops-util.h"
#include "core/xlator.h"

struct up_priv {
    bool on; /* option features.cache-invalidation */
};

/* What a change touched: inodes (kind 1) and names (kind 2). */
struct up_note {
    int ninodes, nnames;
    struct bfs_gfid inodes[4];
    struct {
        struct bfs_gfid par;
        char *name;
    } names[2];
};

static void note_free(struct up_note *n)
{
    if (!n)
        return;
    for (int i = 0; i < n->nnames; i++)
        free(n->names[i].name);
    free(n);
}

static void note_inode(struct up_note *n, const struct bfs_gfid *g)
{
    if (g && !bfs_gfid_is_null(g) && n->ninodes < 4)
        n->inodes[n->ninodes++] = *g;
}

static int note_name(struct up_note *n, const struct bfs_loc *loc)
{
    if (!loc->name || bfs_gfid_is_null(&loc->pargfid) || n->nnames >= 2)
        return 0;
    char *s = strdup(loc->name);
    if (!s)
        return -ENOMEM;
    n->names[n->nnames].par = loc->pargfid;
    n->names[n->nnames].name = s;
    n->nnames++;
    note_inode(n, &loc->pargfid); /* the directory's mtime, ctime, size */
    return 0;
}

/* The inode a loc names: its GFID, else the (parent, name) it has. */
static int note_loc(struct up_note *n, const struct bfs_loc *loc)
{
    if (!bfs_gfid_is_null(&loc->gfid)) {
        note_inode(n, &loc->gfid);
        return 0;
    }
    if (loc->inode && !bfs_gfid_is_null(&loc->inode->gfid)) {
        note_inode(n, &loc->inode->gfid);
        return 0;
    }
    /* Only a name: an entry invalidation makes md-cache drop what it
     * points to; the parent's attributes did not change. */
    int rc = note_name(n, loc);
    if (rc == 0 && n->ninodes > 0)
        n->ninodes--;
    return rc;
}

static void note_fd(struct up_note *n, const struct bfs_fd *fd)
{
    if (fd && fd->inode)
        note_inode(n, &fd->inode->gfid);
}

/* Builds the note of a change, or returns NULL with *rc = 0 for a fop
 * that changes nothing a client caches. */
static struct up_note *note_of(int fop, const void *req, int *rc)
{
    *rc = 0;
    switch (fop) {
    case BFS_FOP_OPEN:
        if (!(((const struct bfs_open_req *)req)->flags & O_TRUNC))
            return NULL;
        break;
    case BFS_FOP_WRITE: case BFS_FOP_TRUNCATE: case BFS_FOP_FTRUNCATE: case BFS_FOP_SETATTR:
    case BFS_FOP_FSETATTR: case BFS_FOP_FALLOCATE: case BFS_FOP_DISCARD: case BFS_FOP_ZEROFILL:
    case BFS_FOP_SETXATTR: case BFS_FOP_FSETXATTR: case BFS_FOP_REMOVEXATTR:
    case BFS_FOP_FREMOVEXATTR: case BFS_FOP_COPY_FILE_RANGE: case BFS_FOP_CREATE:
    case BFS_FOP_MKNOD: case BFS_FOP_MKDIR: case BFS_FOP_SYMLINK: case BFS_FOP_LINK:
    case BFS_FOP_UNLINK: case BFS_FOP_RMDIR: case BFS_FOP_RENAME:
    case BFS_FOP_XATTROP: case BFS_FOP_FXATTROP: /* the changelog: its ctime */
        break;
    default:
        return NULL;
    }
    struct up_note *n = calloc(1, sizeof(*n));
    if (!n) {
        *rc = -ENOMEM;
        return NULL;
    }
    switch (fop) {
    case BFS_FOP_OPEN: *rc = note_loc(n, &((const struct bfs_open_req *)req)->loc); break;
    case BFS_FOP_TRUNCATE: *rc = note_loc(n, &((const struct bfs_truncate_req *)req)->loc); break;
    case BFS_FOP_SETATTR: *rc = note_loc(n, &((const struct bfs_setattr_req *)req)->loc); break;
    case BFS_FOP_SETXATTR: *rc = note_loc(n, &((const struct bfs_setxattr_req *)req)->loc); break;
    case BFS_FOP_REMOVEXATTR:
        *rc = note_loc(n, &((const struct bfs_removexattr_req *)req)->loc);
        break;
    case BFS_FOP_XATTROP: *rc = note_loc(n, &((const struct bfs_xattrop_req *)req)->loc); break;
    case BFS_FOP_FXATTROP: note_fd(n, ((const struct bfs_fxattrop_req *)req)->fd); break;
    case BFS_FOP_WRITE: note_fd(n, ((const struct bfs_write_req *)req)->fd); break;
    case BFS_FOP_FTRUNCATE: note_fd(n, ((const struct bfs_ftruncate_req *)req)->fd); break;
    case BFS_FOP_FSETATTR: note_fd(n, ((const struct bfs_fsetattr_req *)req)->fd); break;
    case BFS_FOP_FALLOCATE: note_fd(n, ((const struct bfs_fallocate_req *)req)->fd); break;
    case BFS_FOP_DISCARD: note_fd(n, ((const struct bfs_discard_req *)req)->fd); break;
    case BFS_FOP_ZEROFILL: note_fd(n, ((const struct bfs_zerofill_req *)req)->fd); break;
    case BFS_FOP_FSETXATTR: note_fd(n, ((const struct bfs_fsetxattr_req *)req)->fd); break;
    case BFS_FOP_FREMOVEXATTR: note_fd(n, ((const struct bfs_fremovexattr_req *)req)->fd); break;
    case BFS_FOP_COPY_FILE_RANGE:
        note_fd(n, ((const struct bfs_copy_file_range_req *)req)->fd_out);
        break;
    case BFS_FOP_CREATE: *rc = note_name(n, &((const struct bfs_create_req *)req)->loc); break;
    case BFS_FOP_MKNOD: *rc = note_name(n, &((const struct bfs_mknod_req *)req)->loc); break;
    case BFS_FOP_MKDIR: *rc = note_name(n, &((const struct bfs_mkdir_req *)req)->loc); break;
    case BFS_FOP_SYMLINK: *rc = note_name(n, &((const struct bfs_symlink_req *)req)->loc); break;
    case BFS_FOP_UNLINK: {
        const struct bfs_loc *l = &((const struct bfs_unlink_req *)req)->loc;
        *rc = note_name(n, l);
        note_inode(n, &l->gfid); /* its link count */
        break;
    }
    case BFS_FOP_RMDIR: *rc = note_name(n, &((const struct bfs_rmdir_req *)req)->loc); break;
    case BFS_FOP_LINK: {
        const struct bfs_link_req *r = req;
        *rc = note_name(n, &r->newloc);
        note_inode(n, &r->oldloc.gfid);
        break;
    }
    case BFS_FOP_RENAME: {
        const struct bfs_rename_req *r = req;
        *rc = note_name(n, &r->oldloc);
        if (*rc == 0)
            *rc = note_name(n, &r->newloc);
        note_inode(n, &r->newloc.gfid); /* the file it replaced, if known */
        break;
    }
    default: break;
    }
    if (*rc < 0) {
        note_free(n);
        return NULL;
    }
    return n;
}

/* The reply's own GFIDs complete the note (a rename's or a link's inode,
 * a write whose fd had no inode). */
static void note_from_reply(struct up_note *n, int fop, const void *rep)
{
    switch (fop) {
    case BFS_FOP_WRITE: note_inode(n, &((const struct bfs_write_rep *)rep)->post.gfid); break;
    case BFS_FOP_RENAME: note_inode(n, &((const struct bfs_rename_rep *)rep)->attr.gfid); break;
    case BFS_FOP_LINK: note_inode(n, &((const struct bfs_link_rep *)rep)->attr.gfid); break;
    default: break;
    }
}

static void send_note(struct bfs_xl *xl, const struct up_note *n, void *client)
{
    for (int i = 0; i < n->nnames; i++) {
        struct bfs_upcall up = {.kind = 2, .pargfid = n->names[i].par,
                                .name = n->names[i].name, .except = client};
        bfs_xl_notify_parents(xl, BFS_EV_UPCALL, &up);
    }
    for (int i = 0; i < n->ninodes; i++) {
        bool dup = false;
        for (int j = 0; j < i; j++)
            dup = dup || bfs_gfid_eq(&n->inodes[i], &n->inodes[j]);
        if (dup)
            continue;
        struct bfs_upcall up = {.kind = 1, .gfid = n->inodes[i], .except = client};
        bfs_xl_notify_parents(xl, BFS_EV_UPCALL, &up);
    }
}

/* xdata with the mark added, or NULL (no memory: the reply goes unmarked,
 * so nobody caches it). */
static struct bfs_dict *marked(const struct bfs_dict *xdata)
{
    struct bfs_dict *d = xdata ? bfs_dict_copy(xdata) : bfs_dict_new();
    if (d && bfs_dict_set_int(d, BFS_XDATA_UPCALL, 1) < 0) {
        bfs_dict_unref(d);
        d = NULL;
    }
    return d;
}

#define MARK_CASE(FOP, UP)                                                                 \
    case BFS_FOP_##UP: {                                                                   \
        struct bfs_##FOP##_rep r = *(const struct bfs_##FOP##_rep *)rep;                   \
        struct bfs_dict *d = marked(r.xdata);                                              \
        if (d)                                                                             \
            r.xdata = d;                                                                   \
        bfs_unwind_##FOP(frame, rc, &r);                                                   \
        bfs_dict_unref(d);                                                                 \
        return;                                                                            \
    }

/* Unwinds rep, marked if md-cache may learn from it. */
static void unwind_marked(struct bfs_frame *frame, int fop, int rc, const void *rep)
{
    if (rc >= 0) {
        switch (fop) {
            MARK_CASE(lookup, LOOKUP)
            MARK_CASE(stat, STAT)
            MARK_CASE(fstat, FSTAT)
            MARK_CASE(read, READ)
            MARK_CASE(open, OPEN) /* its attr: after the open's prefetch read */
            MARK_CASE(create, CREATE)
            MARK_CASE(mknod, MKNOD)
            MARK_CASE(mkdir, MKDIR)
            MARK_CASE(symlink, SYMLINK)
            MARK_CASE(unlink, UNLINK)
            MARK_CASE(rmdir, RMDIR)
            MARK_CASE(write, WRITE)
            MARK_CASE(truncate, TRUNCATE)
            MARK_CASE(ftruncate, FTRUNCATE)
            MARK_CASE(setattr, SETATTR)
            MARK_CASE(fsetattr, FSETATTR)
            MARK_CASE(fallocate, FALLOCATE)
            MARK_CASE(discard, DISCARD)
            MARK_CASE(zerofill, ZEROFILL)
        default: break;
        }
    }
    bfs_unwind_any(fop, frame, rc, rep);
}

static void up_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    struct up_note *n = cookie;
    if (n && rc >= 0) {
        note_from_reply(n, fop, rep);
        send_note(frame->xl, n, frame->stack->client);
    }
    note_free(n);
    unwind_marked(frame, fop, rc, rep);
}

static void pass_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    (void)cookie;
    bfs_unwind_any(fop, frame, rc, rep);
}

static int up_generic(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req)
{
    struct up_priv *p = xl->private;
    if (!p->on)
        return bfs_wind_any(fop, frame, FIRST_CHILD(xl), pass_cbk, NULL, req);
    int rc;
    struct up_note *n = note_of(fop, req, &rc);
    if (rc < 0)
        return rc;
    rc = bfs_wind_any(fop, frame, FIRST_CHILD(xl), up_cbk, n, req);
    if (rc < 0)
        note_free(n);
    return rc;
}

static int up_init(struct bfs_xl *xl)
{
    struct up_priv *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->on = bfs_xl_opt_bool(xl, "features.cache-invalidation");
    xl->private = p;
    return 0;
}

static void up_fini(struct bfs_xl *xl)
{
    free(xl->private);
    xl->private = NULL;
}

static const struct bfs_option_desc up_options[] = {
    {.key = "features.cache-invalidation", .type = BFS_OPT_BOOL, .def = "on",
     .description = "send other clients an invalidation after every change (off: no upcalls, "
                    "and clients' md-cache caches nothing); applied at the brick's next start",
     .flags = BFS_OPT_F_SETTABLE},
    {.key = NULL},
};

BFS_XL_MODULE(.type = "features/upcall", .options = up_options, .init = up_init,
              .fini = up_fini, .generic_fop = up_generic,
              .min_children = 1, .max_children = 1);
