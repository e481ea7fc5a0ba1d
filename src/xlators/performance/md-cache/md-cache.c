/*
 * md-cache.c — performance/md-cache: answers lookup, stat and fstat from
 * attributes and names learned from earlier replies, kept valid by the
 * invalidations features/upcall sends from the bricks.
 * docs/design/cache-invalidation.md has the rules; mdc-table.c the tables.
 *
 * Every fop comes through the generic handler and falls in one class:
 *   lookup, stat, fstat  answered from the tables or wound and learned;
 *   read-only            passed (locks, getxattr, readlink...);
 *   atime                read, readdir, and an O_RDONLY open (storage/posix
 *                        may read the file for the open-prefetch): the
 *                        inode's attributes are dropped (the brick's file
 *                        system may move its atime, as FUSE's own attribute
 *                        cache assumes), names kept; a read's or open's
 *                        reply then stores the attributes the brick took
 *                        after reading (as GlusterFS's mdc_readv_cbk),
 *                        under the rules of any change; a read answered by
 *                        protocol/client from its open's prefetch reached
 *                        no brick: what was known before it is put back;
 *   inode change         attributes dropped, then the reply's post stored;
 *   new name / gone name create, mknod, mkdir, symlink / unlink, rmdir;
 *   anything else        (rename, link, fops added later) empties the cache.
 * A reply is learned only if it carries features/upcall's mark, if no
 * change of this client was in flight when it was wound, and if nothing
 * (change wound, invalidation, flush) happened while it was out: then it
 * is not older than anything the tables were told. Calls that learn carry
 * a struct mdc_call as cookie, freed in their callback.
 *
 * Invalidations come from the bricks (features/upcall: another client's
 * change) and from the cluster translators below (local: this client's own
 * post-op or heal, lib/upcall-mark.h); a post-op's moves times only, so it
 * drops only the attributes, and only of its inode (tseq, not seq).
 *
 * setxattr of "brickfs.md-cache.flush" (any value) on any file empties the
 * cache without going down (setfattr -n brickfs.md-cache.flush -v 1 MOUNT).
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "core/fops-util.h"
#include "mdc.h"

#define MDC_XATTR_FLUSH "brickfs.md-cache.flush"

enum mdc_class { MDC_PASS, MDC_LEARN, MDC_ATIME, MDC_INODE, MDC_NEW, MDC_GONE, MDC_FLUSH };

struct mdc_call {
    enum mdc_class cls;
    uint64_t seq;   /* p->seq when wound (after our own bump for changes) */
    uint64_t tseq;  /* p->tseq when wound */
    bool alone;     /* no change was in flight when wound */
    uint64_t until; /* what we learn is good until then */
    uint32_t uid, gid;
    struct bfs_gfid par, gfid;
    char *name;
    /* a read: the attributes it dropped when wound (had: they were valid),
     * put back if no brick saw the read (restore_prefetched) */
    bool had;
    struct bfs_iatt prev;
    uint64_t prev_until;
};


static void call_free(struct mdc_call *c)
{
    if (c) {
        free(c->name);
        free(c);
    }
}

static bool is_marked(const struct bfs_dict *x)
{
    int64_t v;
    return x && bfs_dict_get_int(x, BFS_XDATA_UPCALL, &v) == 0 && v == 1;
}

static bool is_prefetched(const struct bfs_dict *x)
{
    int64_t v;
    return x && bfs_dict_get_int(x, BFS_XDATA_PREFETCHED, &v) == 0 && v == 1;
}

static void loc_gfid(const struct bfs_loc *l, struct bfs_gfid *out)
{
    *out = !bfs_gfid_is_null(&l->gfid) ? l->gfid
           : l->inode                  ? l->inode->gfid
                                       : bfs_gfid_null;
}

static void fd_gfid(const struct bfs_fd *fd, struct bfs_gfid *out)
{
    *out = fd && fd->inode ? fd->inode->gfid : bfs_gfid_null;
}

static enum mdc_class class_of(int fop, const void *req)
{
    switch (fop) {
    case BFS_FOP_LOOKUP: case BFS_FOP_STAT: case BFS_FOP_FSTAT:
        return MDC_LEARN;
    case BFS_FOP_READ: case BFS_FOP_READDIR:
        return MDC_ATIME;
    case BFS_FOP_ACCESS: case BFS_FOP_READLINK: case BFS_FOP_FLUSH:
    case BFS_FOP_FSYNC: case BFS_FOP_OPENDIR: case BFS_FOP_FSYNCDIR:
    case BFS_FOP_STATFS: case BFS_FOP_GETXATTR: case BFS_FOP_FGETXATTR: case BFS_FOP_LK:
    case BFS_FOP_INODELK: case BFS_FOP_FINODELK: case BFS_FOP_ENTRYLK: case BFS_FOP_FENTRYLK:
    case BFS_FOP_SEEK: case BFS_FOP_LEASE: case BFS_FOP_RCHECKSUM:
        return MDC_PASS;
    case BFS_FOP_OPEN: {
        uint32_t fl = ((const struct bfs_open_req *)req)->flags;
        if (fl & O_TRUNC)
            return MDC_INODE;
        /* only a read-only open may read the file (protocol/client's
         * open-prefetch): its atime moves, its reply has the new one */
        return (fl & O_ACCMODE) == O_RDONLY ? MDC_ATIME : MDC_PASS;
    }
    case BFS_FOP_WRITE: case BFS_FOP_TRUNCATE: case BFS_FOP_FTRUNCATE: case BFS_FOP_SETATTR:
    case BFS_FOP_FSETATTR: case BFS_FOP_FALLOCATE: case BFS_FOP_DISCARD: case BFS_FOP_ZEROFILL:
    case BFS_FOP_SETXATTR: case BFS_FOP_FSETXATTR: case BFS_FOP_REMOVEXATTR:
    case BFS_FOP_FREMOVEXATTR: case BFS_FOP_XATTROP: case BFS_FOP_FXATTROP:
        return MDC_INODE;
    case BFS_FOP_CREATE: case BFS_FOP_MKNOD: case BFS_FOP_MKDIR: case BFS_FOP_SYMLINK:
        return MDC_NEW;
    case BFS_FOP_UNLINK: case BFS_FOP_RMDIR:
        return MDC_GONE;
    default:
        return MDC_FLUSH;
    }
}

/* The location of a request of the classes that have one: the inode it
 * changes or asks about (gfid), or the name it makes or removes. */
static void req_target(int fop, const void *req, struct bfs_gfid *gfid,
                       const struct bfs_loc **named)
{
    *gfid = bfs_gfid_null;
    *named = NULL;
    switch (fop) {
    case BFS_FOP_LOOKUP: *named = &((const struct bfs_lookup_req *)req)->loc; break;
    case BFS_FOP_STAT: loc_gfid(&((const struct bfs_stat_req *)req)->loc, gfid); break;
    case BFS_FOP_FSTAT: fd_gfid(((const struct bfs_fstat_req *)req)->fd, gfid); break;
    case BFS_FOP_READ: fd_gfid(((const struct bfs_read_req *)req)->fd, gfid); break;
    case BFS_FOP_READDIR: fd_gfid(((const struct bfs_readdir_req *)req)->fd, gfid); break;
    case BFS_FOP_OPEN: loc_gfid(&((const struct bfs_open_req *)req)->loc, gfid); break;
    case BFS_FOP_TRUNCATE: loc_gfid(&((const struct bfs_truncate_req *)req)->loc, gfid); break;
    case BFS_FOP_SETATTR: loc_gfid(&((const struct bfs_setattr_req *)req)->loc, gfid); break;
    case BFS_FOP_SETXATTR: loc_gfid(&((const struct bfs_setxattr_req *)req)->loc, gfid); break;
    case BFS_FOP_REMOVEXATTR:
        loc_gfid(&((const struct bfs_removexattr_req *)req)->loc, gfid);
        break;
    case BFS_FOP_XATTROP: loc_gfid(&((const struct bfs_xattrop_req *)req)->loc, gfid); break;
    case BFS_FOP_WRITE: fd_gfid(((const struct bfs_write_req *)req)->fd, gfid); break;
    case BFS_FOP_FTRUNCATE: fd_gfid(((const struct bfs_ftruncate_req *)req)->fd, gfid); break;
    case BFS_FOP_FSETATTR: fd_gfid(((const struct bfs_fsetattr_req *)req)->fd, gfid); break;
    case BFS_FOP_FALLOCATE: fd_gfid(((const struct bfs_fallocate_req *)req)->fd, gfid); break;
    case BFS_FOP_DISCARD: fd_gfid(((const struct bfs_discard_req *)req)->fd, gfid); break;
    case BFS_FOP_ZEROFILL: fd_gfid(((const struct bfs_zerofill_req *)req)->fd, gfid); break;
    case BFS_FOP_FSETXATTR: fd_gfid(((const struct bfs_fsetxattr_req *)req)->fd, gfid); break;
    case BFS_FOP_FREMOVEXATTR:
        fd_gfid(((const struct bfs_fremovexattr_req *)req)->fd, gfid);
        break;
    case BFS_FOP_FXATTROP: fd_gfid(((const struct bfs_fxattrop_req *)req)->fd, gfid); break;
    case BFS_FOP_CREATE: *named = &((const struct bfs_create_req *)req)->loc; break;
    case BFS_FOP_MKNOD: *named = &((const struct bfs_mknod_req *)req)->loc; break;
    case BFS_FOP_MKDIR: *named = &((const struct bfs_mkdir_req *)req)->loc; break;
    case BFS_FOP_SYMLINK: *named = &((const struct bfs_symlink_req *)req)->loc; break;
    case BFS_FOP_UNLINK: *named = &((const struct bfs_unlink_req *)req)->loc; break;
    case BFS_FOP_RMDIR: *named = &((const struct bfs_rmdir_req *)req)->loc; break;
    default: break;
    }
    if (*named && (!(*named)->name || bfs_gfid_is_null(&(*named)->pargfid))) {
        loc_gfid(*named, gfid); /* addressed by GFID only */
        *named = NULL;
    }
}

/* ---- answers from the tables (p->lock held) ---- */

static bool answer_lookup(struct mdc_priv *p, struct bfs_frame *frame, const struct bfs_loc *l,
                          uint64_t now, struct bfs_lookup_rep *rep, int *rc)
{
    uint32_t uid = frame->stack->uid, gid = frame->stack->gid;
    struct mdc_inode *pin = bfs__mdc_inode_get(p, &l->pargfid);
    if (!bfs__mdc_names_valid(pin, now))
        return false;
    /* the parent's own attributes, when its times are unknown: none (the
     * bridges above read only the child's) */
    struct bfs_iatt parent = pin->attr_ok ? pin->attr : (struct bfs_iatt){0};
    struct mdc_entry *e = bfs__mdc_entry_get(p, &l->pargfid, l->name);
    if (e) {
        struct mdc_inode *in = bfs__mdc_inode_get(p, &e->child);
        if (now >= e->until || e->uid != uid || e->gid != gid || e->pgen != pin->gen ||
            !bfs__mdc_attr_valid(in, now) ||
            (!bfs_gfid_is_null(&l->gfid) && !bfs_gfid_eq(&l->gfid, &e->child)))
            return false;
        rep->attr = in->attr;
        rep->parent = parent;
        *rc = 0;
        p->hits++;
        return true;
    }
    if (pin->complete && now < pin->complete_until && pin->cuid == uid && pin->cgid == gid &&
        bfs_gfid_is_null(&l->gfid)) {
        rep->parent = parent;
        *rc = -ENOENT;
        p->neg_hits++;
        return true;
    }
    return false;
}

/* 0 and *done when answered here. */
static int try_answer(struct bfs_xl *xl, struct bfs_frame *frame, int fop, const void *req,
                      uint64_t now, bool *done)
{
    struct mdc_priv *p = xl->private;
    struct bfs_gfid g;
    const struct bfs_loc *named;
    req_target(fop, req, &g, &named);
    *done = false;
    if (fop == BFS_FOP_LOOKUP) {
        struct bfs_lookup_rep rep = {0};
        int rc = 0;
        if (!named || ((const struct bfs_lookup_req *)req)->xdata)
            return 0; /* by GFID, or asking for more than attributes */
        pthread_mutex_lock(&p->lock);
        *done = answer_lookup(p, frame, named, now, &rep, &rc);
        pthread_mutex_unlock(&p->lock);
        if (*done)
            bfs_unwind_lookup(frame, rc, &rep);
        return 0;
    }
    pthread_mutex_lock(&p->lock);
    struct mdc_inode *in = bfs_gfid_is_null(&g) ? NULL : bfs__mdc_inode_get(p, &g);
    struct bfs_iatt attr;
    if (bfs__mdc_attr_valid(in, now)) {
        attr = in->attr;
        p->hits++;
        *done = true;
    }
    pthread_mutex_unlock(&p->lock);
    if (!*done)
        return 0;
    if (fop == BFS_FOP_STAT) {
        struct bfs_stat_rep rep = {.attr = attr};
        bfs_unwind_stat(frame, 0, &rep);
    } else {
        struct bfs_fstat_rep rep = {.attr = attr};
        bfs_unwind_fstat(frame, 0, &rep);
    }
    return 0;
}

/* ---- learning from replies (p->lock held) ---- */

/* The reply's xdata and the post-operation attributes it reports. */
static const struct bfs_dict *rep_xdata(int fop, const void *rep, const struct bfs_iatt **post)
{
    *post = NULL;
#define X(FOP, UP, FIELD)                                                                  \
    case BFS_FOP_##UP: {                                                                   \
        const struct bfs_##FOP##_rep *r = rep;                                             \
        *post = FIELD;                                                                     \
        return r->xdata;                                                                   \
    }
    switch (fop) {
        X(lookup, LOOKUP, &r->attr)
        X(stat, STAT, &r->attr)
        X(fstat, FSTAT, &r->attr)
        X(read, READ, &r->attr)
        X(open, OPEN, &r->attr)
        X(create, CREATE, &r->attr)
        X(mknod, MKNOD, &r->attr)
        X(mkdir, MKDIR, &r->attr)
        X(symlink, SYMLINK, &r->attr)
        X(unlink, UNLINK, NULL)
        X(rmdir, RMDIR, NULL)
        X(write, WRITE, &r->post)
        X(truncate, TRUNCATE, &r->post)
        X(ftruncate, FTRUNCATE, &r->post)
        X(setattr, SETATTR, &r->post)
        X(fsetattr, FSETATTR, &r->post)
        X(fallocate, FALLOCATE, &r->post)
        X(discard, DISCARD, &r->post)
        X(zerofill, ZEROFILL, &r->post)
    default: return NULL;
    }
#undef X
}

/* The parent's attributes after an entry operation. */
static const struct bfs_iatt *postparent(int fop, const void *rep)
{
    switch (fop) {
    case BFS_FOP_LOOKUP: return &((const struct bfs_lookup_rep *)rep)->parent;
    case BFS_FOP_CREATE: return &((const struct bfs_create_rep *)rep)->postparent;
    case BFS_FOP_MKNOD: return &((const struct bfs_mknod_rep *)rep)->postparent;
    case BFS_FOP_MKDIR: return &((const struct bfs_mkdir_rep *)rep)->postparent;
    case BFS_FOP_SYMLINK: return &((const struct bfs_symlink_rep *)rep)->postparent;
    case BFS_FOP_UNLINK: return &((const struct bfs_unlink_rep *)rep)->postparent;
    case BFS_FOP_RMDIR: return &((const struct bfs_rmdir_rep *)rep)->postparent;
    default: return NULL;
    }
}

/* Attributes a's inode had when c was wound: not if our own post-op moved
 * its times since (the reply may predate it). */
static void learn_attr(struct mdc_priv *p, const struct mdc_call *c, const struct bfs_iatt *a)
{
    struct mdc_inode *in = bfs__mdc_inode_get(p, &a->gfid);
    if (!in || in->tseq <= c->tseq)
        bfs__mdc_attr_set(p, a, c->until);
}

static void learn_ok(struct mdc_priv *p, const struct mdc_call *c, int fop, const void *rep)
{
    const struct bfs_iatt *post, *pp = postparent(fop, rep);
    (void)rep_xdata(fop, rep, &post);
    if (pp && bfs_gfid_eq(&pp->gfid, &c->par))
        learn_attr(p, c, pp);
    if (post && bfs_gfid_is_null(&post->gfid))
        post = NULL;
    if (post && c->cls == MDC_ATIME && !bfs_gfid_eq(&post->gfid, &c->gfid))
        post = NULL; /* not the file read: its attributes stay stale */
    if (fop == BFS_FOP_OPEN && c->cls != MDC_ATIME)
        post = NULL; /* O_TRUNC: cluster translators answer the open's pre-truncate times */
    if (post)
        learn_attr(p, c, post);
    if (c->name && c->cls == MDC_GONE)
        bfs__mdc_entry_drop(p, &c->par, c->name);
    else if (c->name && post)
        bfs__mdc_entry_set(p, &c->par, c->name, &post->gfid, c->until, c->uid, c->gid);
    if (fop == BFS_FOP_MKDIR && post) {
        struct mdc_inode *in = bfs__mdc_inode_get(p, &post->gfid);
        if (in) {
            in->complete = true; /* we made it: it is empty, and we hear of every name */
            in->complete_until = c->until;
            in->cuid = c->uid;
            in->cgid = c->gid;
        }
    }
}

/* The attributes of the inode c changes; names under it stay for an atime. */
static void drop(struct mdc_priv *p, const struct mdc_call *c)
{
    if (c->cls == MDC_ATIME)
        bfs__mdc_attr_stale(p, &c->gfid);
    else
        bfs__mdc_attr_drop(p, &c->gfid);
}

/* A change whose result cannot be learned: what it touched is unknown. */
static void learn_not(struct mdc_priv *p, const struct mdc_call *c, int rc)
{
    if (c->name) {
        bfs__mdc_entry_drop(p, &c->par, c->name);
        bfs__mdc_complete_drop(p, &c->par);
        if (rc >= 0)
            bfs__mdc_attr_drop(p, &c->par); /* its times moved */
    }
    if (!bfs_gfid_is_null(&c->gfid))
        drop(p, c);
}

/* A read that reached no brick (protocol/client answered it from the bytes
 * its open prefetched) changed nothing there: what the tables held when it
 * was wound (learned from a marked reply, the open's if it was this fd's)
 * is as good as it was, if nothing moved meanwhile (fresh). */
static bool restore_prefetched(struct mdc_priv *p, const struct mdc_call *c)
{
    struct mdc_inode *in = bfs__mdc_inode_get(p, &c->gfid);
    if (!c->had || !in || in->attr_ok || !bfs_gfid_eq(&c->prev.gfid, &c->gfid) ||
        in->tseq > c->tseq)
        return false;
    in->attr = c->prev;
    in->attr_ok = true;
    in->attr_until = c->prev_until;
    p->restored++;
    return true;
}

static void mdc_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    struct mdc_priv *p = frame->xl->private;
    struct mdc_call *c = cookie;
    const struct bfs_iatt *post;
    const struct bfs_dict *xd = rc >= 0 ? rep_xdata(fop, rep, &post) : NULL;
    bool marked = is_marked(xd);
    bool local = fop == BFS_FOP_READ && is_prefetched(xd);
    pthread_mutex_lock(&p->lock);
    bool change = c->cls != MDC_LEARN;
    if (change)
        p->changing--;
    bool fresh = c->alone && p->seq == c->seq;
    if (local && fresh && restore_prefetched(p, c)) {
        /* as before the read */
    } else if (rc >= 0 && marked && fresh)
        learn_ok(p, c, fop, rep);
    else if (change)
        learn_not(p, c, rc);
    else if (c->cls == MDC_LEARN && c->name && rc == -ENOENT)
        bfs__mdc_entry_drop(p, &c->par, c->name);
    pthread_mutex_unlock(&p->lock);
    call_free(c);
    bfs_unwind_any(fop, frame, rc, rep);
}

static void pass_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    struct mdc_priv *p = frame->xl->private;
    if (cookie) { /* a flushing change */
        pthread_mutex_lock(&p->lock);
        p->changing--;
        pthread_mutex_unlock(&p->lock);
    }
    bfs_unwind_any(fop, frame, rc, rep);
}

/* ---- the generic handler ---- */

static struct mdc_call *call_new(struct bfs_frame *frame, enum mdc_class cls, int fop,
                                 const void *req, uint64_t until)
{
    struct mdc_call *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    const struct bfs_loc *named;
    req_target(fop, req, &c->gfid, &named);
    if (named) {
        c->par = named->pargfid;
        if (!(c->name = strdup(named->name))) {
            free(c);
            return NULL;
        }
    }
    c->cls = cls;
    c->until = until;
    c->uid = frame->stack->uid;
    c->gid = frame->stack->gid;
    return c;
}

/* Before a change goes: nothing learned before it, or during it, counts. */
static void change_starts(struct mdc_priv *p, struct mdc_call *c)
{
    c->alone = p->changing == 0;
    p->changing++;
    p->seq++;
    c->seq = p->seq;
    if (c->cls == MDC_GONE && c->name) {
        struct mdc_entry *e = bfs__mdc_entry_get(p, &c->par, c->name);
        if (e)
            bfs__mdc_attr_drop(p, &e->child); /* its link count */
    }
    if (c->cls == MDC_NEW && c->name)
        bfs__mdc_entry_drop(p, &c->par, c->name);
    if (c->name)
        bfs__mdc_post_void(p, &c->par); /* its times will move */
    if (c->cls == MDC_ATIME && !bfs_gfid_is_null(&c->gfid)) {
        struct mdc_inode *in = bfs__mdc_inode_get(p, &c->gfid);
        if ((c->had = in && in->attr_ok)) {
            c->prev = in->attr;
            c->prev_until = in->attr_until;
        }
    }
    if (!bfs_gfid_is_null(&c->gfid))
        drop(p, c);
}

/* setxattr of the virtual name MDC_XATTR_FLUSH empties the cache, answered
 * here: what a benchmark uses to start a step cold on the client too. */
static bool flush_request(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req)
{
    if (fop != BFS_FOP_SETXATTR ||
        !bfs_dict_has(((const struct bfs_setxattr_req *)req)->xattrs, MDC_XATTR_FLUSH))
        return false;
    struct mdc_priv *p = xl->private;
    pthread_mutex_lock(&p->lock);
    bfs__mdc_flush(p);
    pthread_mutex_unlock(&p->lock);
    struct bfs_setxattr_rep rep = {0};
    bfs_unwind_setxattr(frame, 0, &rep);
    return true;
}

/* An open by GFID alone gets the name we know the file by, if that name
 * still leads to it here: storage/posix then reaches the file through its
 * folder instead of its handle (and checks the GFID). *name is the copy
 * the request points to, freed by the caller after the wind. */
static const void *open_hint(struct mdc_priv *p, const struct bfs_open_req *r,
                             struct bfs_open_req *out, char **name)
{
    *name = NULL;
    if (r->loc.name || bfs_gfid_is_null(&r->loc.gfid))
        return r;
    pthread_mutex_lock(&p->lock);
    struct mdc_inode *in = bfs__mdc_inode_get(p, &r->loc.gfid);
    struct mdc_entry *e = in && in->nname ? bfs__mdc_entry_get(p, &in->npar, in->nname) : NULL;
    if (e && bfs_gfid_eq(&e->child, &r->loc.gfid) && (*name = strdup(in->nname))) {
        *out = *r;
        out->loc.pargfid = in->npar;
        out->loc.name = *name;
    }
    pthread_mutex_unlock(&p->lock);
    return *name ? out : r;
}

static int mdc_dispatch(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req);

static int mdc_generic(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req)
{
    if (fop != BFS_FOP_OPEN)
        return mdc_dispatch(frame, xl, fop, req);
    struct bfs_open_req hinted;
    char *name;
    int rc = mdc_dispatch(frame, xl, fop, open_hint(xl->private, req, &hinted, &name));
    free(name);
    return rc;
}

static int mdc_dispatch(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req)
{
    struct mdc_priv *p = xl->private;
    if (flush_request(frame, xl, fop, req))
        return 0;
    enum mdc_class cls = p->timeout_ns ? class_of(fop, req) : MDC_PASS;
    if (cls == MDC_PASS)
        return bfs_wind_any(fop, frame, FIRST_CHILD(xl), pass_cbk, NULL, req);
    if (cls == MDC_FLUSH) {
        pthread_mutex_lock(&p->lock);
        bfs__mdc_flush(p);
        p->changing++;
        pthread_mutex_unlock(&p->lock);
        int rc = bfs_wind_any(fop, frame, FIRST_CHILD(xl), pass_cbk, p, req);
        if (rc < 0) {
            pthread_mutex_lock(&p->lock);
            p->changing--;
            pthread_mutex_unlock(&p->lock);
        }
        return rc;
    }
    uint64_t now = bfs_now_ns();
    if (cls == MDC_LEARN) {
        bool done;
        int rc = try_answer(xl, frame, fop, req, now, &done);
        if (done || rc < 0)
            return rc;
    }
    struct mdc_call *c = call_new(frame, cls, fop, req, now + p->timeout_ns);
    if (!c)
        return -ENOMEM;
    pthread_mutex_lock(&p->lock);
    c->tseq = p->tseq;
    if (cls == MDC_LEARN) {
        c->alone = p->changing == 0;
        c->seq = p->seq;
        p->misses++;
    } else {
        change_starts(p, c);
    }
    pthread_mutex_unlock(&p->lock);
    int rc = bfs_wind_any(fop, frame, FIRST_CHILD(xl), mdc_cbk, c, req);
    if (rc < 0) {
        pthread_mutex_lock(&p->lock);
        if (cls != MDC_LEARN) {
            p->changing--;
            learn_not(p, c, rc);
        }
        pthread_mutex_unlock(&p->lock);
        call_free(c);
    }
    return rc;
}

/* ---- invalidations ---- */

/* Our own post-op moved g's times (no name changed): its attributes go,
 * names under it stay, and replies in flight teach nothing of g's
 * attributes (tseq) but the rest of what they say is good. */
static void times_moved(struct mdc_priv *p, const struct bfs_gfid *g)
{
    struct mdc_inode *in = bfs__mdc_inode_make(p, g);
    p->tseq++;
    if (in) {
        in->tseq = p->tseq;
        bfs__mdc_attr_stale(p, g);
    } else {
        p->seq++; /* no record to say it: nothing in flight counts */
    }
}

/* Our own post-op of g is about to be wound: from now on, whatever md-cache
 * hears of g (a change of ours, an invalidation, a reply it learns, a
 * flush) means the post-op's attributes may be older than what it knows.
 * A change of ours already in flight may reach the bricks after the
 * post-op, and its reply may come after it: none may be. Two post-ops of
 * g at once (its data and metadata locks): neither is kept. */
static void postop_begins(struct mdc_priv *p, const struct bfs_upcall *up)
{
    struct mdc_inode *in = bfs__mdc_inode_make(p, &up->gfid);
    if (!in)
        return;
    in->post_ok = in->post_id == 0 && p->changing == 0;
    in->post_id = up->postop;
    in->post_sent = bfs_now_ns();
}

/* Its replies are in: its times moved (times_moved), and when the cluster
 * translator sent what a lookup answers now and nothing happened to g
 * since the post-op began, that is kept, as if a lookup wound at the
 * post-op's start had answered it (replies wound before now still teach
 * nothing of g: tseq). */
static void postop_done(struct mdc_priv *p, const struct bfs_upcall *up)
{
    struct mdc_inode *in = bfs__mdc_inode_get(p, &up->gfid);
    bool mine = in && up->postop && in->post_id == up->postop;
    bool keep = mine && in->post_ok && up->attr && bfs_gfid_eq(&up->attr->gfid, &up->gfid);
    uint64_t sent = mine ? in->post_sent : 0;
    if (mine)
        in->post_id = 0;
    times_moved(p, &up->gfid);
    if (keep) {
        bfs__mdc_attr_set(p, up->attr, sent + p->timeout_ns);
        p->postop_kept++;
    }
}

static void invalidate(struct mdc_priv *p, const struct bfs_upcall *up)
{
    pthread_mutex_lock(&p->lock);
    if (up->local && up->postop_begin) {
        postop_begins(p, up);
        pthread_mutex_unlock(&p->lock);
        return;
    }
    p->invalidations++;
    if (up->kind == 1 && up->local && up->times_only) {
        postop_done(p, up); /* without a post-op (attr NULL): times_moved */
        pthread_mutex_unlock(&p->lock);
        return;
    }
    p->seq++;
    if (up->kind == 1) {
        bfs__mdc_attr_drop(p, &up->gfid);
    } else if (up->kind == 2 && up->name) {
        struct mdc_entry *e = bfs__mdc_entry_get(p, &up->pargfid, up->name);
        if (e)
            bfs__mdc_attr_drop(p, &e->child);
        bfs__mdc_entry_drop(p, &up->pargfid, up->name);
        bfs__mdc_complete_drop(p, &up->pargfid);
    }
    pthread_mutex_unlock(&p->lock);
}

static int mdc_notify(struct bfs_xl *xl, enum bfs_event ev, struct bfs_xl *from, void *data)
{
    struct mdc_priv *p = xl->private;
    switch (ev) {
    case BFS_EV_UPCALL:
        if (data)
            invalidate(p, data);
        break;
    case BFS_EV_CHILD_UP: case BFS_EV_CHILD_DOWN: case BFS_EV_CHILD_CONNECTING:
    case BFS_EV_CACHE_STALE:
        /* invalidations may have been lost while a connection was down */
        pthread_mutex_lock(&p->lock);
        bfs__mdc_flush(p);
        pthread_mutex_unlock(&p->lock);
        break;
    default:
        break;
    }
    return bfs_xl_notify_default(xl, ev, from, data);
}

/* ---- module ---- */

static char *mdc_dump(struct bfs_xl *xl)
{
    struct mdc_priv *p = xl->private;
    json_object *o = json_object_new_object();
    pthread_mutex_lock(&p->lock);
    json_object_object_add(o, "inodes", json_object_new_uint64(p->ninodes));
    json_object_object_add(o, "entries", json_object_new_uint64(p->nentries));
    json_object_object_add(o, "hits", json_object_new_uint64(p->hits));
    json_object_object_add(o, "negative_hits", json_object_new_uint64(p->neg_hits));
    json_object_object_add(o, "misses", json_object_new_uint64(p->misses));
    json_object_object_add(o, "invalidations", json_object_new_uint64(p->invalidations));
    json_object_object_add(o, "restored", json_object_new_uint64(p->restored));
    json_object_object_add(o, "postop_kept", json_object_new_uint64(p->postop_kept));
    json_object_object_add(o, "flushes", json_object_new_uint64(p->flushes));
    pthread_mutex_unlock(&p->lock);
    char *text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
    return text;
}

static int mdc_init(struct bfs_xl *xl)
{
    struct mdc_priv *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->timeout_ns = bfs_xl_opt_bool(xl, MDC_OPT_ON)
                        ? (uint64_t)bfs_xl_opt_int(xl, MDC_OPT_TIMEOUT) * 1000000000ull
                        : 0;
    p->max = (size_t)bfs_xl_opt_int(xl, MDC_OPT_SIZE);
    int rc = bfs__mdc_table_init(p);
    if (rc < 0) {
        free(p);
        return rc;
    }
    pthread_mutex_init(&p->lock, NULL);
    xl->private = p;
    return 0;
}

static void mdc_fini(struct bfs_xl *xl)
{
    struct mdc_priv *p = xl->private;
    if (!p)
        return;
    bfs__mdc_table_fini(p);
    pthread_mutex_destroy(&p->lock);
    free(p);
    xl->private = NULL;
}

/* Volume options (`volume set`): volgen places md-cache in a mount's
 * client graph unless performance.md-cache is off, with the default
 * timeout unless one is set (src/mgmt/volgen.c,
 * docs/design/cache-invalidation.md "Defaults"). */
static const struct bfs_option_desc mdc_options[] = {
    {.key = MDC_OPT_ON, .type = BFS_OPT_BOOL, .def = "on",
     .description = "cache attributes and names on the client, kept valid by the bricks' "
                    "invalidations (features.cache-invalidation); off: volgen leaves md-cache "
                    "out of the client graph, and an md-cache told off passes everything",
     .flags = BFS_OPT_F_CLIENT | BFS_OPT_F_SETTABLE},
    {.key = MDC_OPT_TIMEOUT, .type = BFS_OPT_TIME, .def = "600", .min = 0, .max = 3600,
     .description = "seconds a cached attribute or name may be used after it was fetched "
                    "(0 = off); only replies of bricks running features/upcall are cached; "
                    "it bounds staleness only when a brick's connection is dead but not yet "
                    "noticed (every change is invalidated otherwise)",
     .flags = BFS_OPT_F_CLIENT | BFS_OPT_F_SETTABLE},
    {.key = MDC_OPT_SIZE, .type = BFS_OPT_INT, .def = "65536", .min = 1024, .max = 16777216,
     .description = "most inode records and most names kept (each table is emptied when full)",
     .flags = BFS_OPT_F_CLIENT | BFS_OPT_F_SETTABLE},
    {.key = NULL},
};

BFS_XL_MODULE(.type = "performance/md-cache", .options = mdc_options, .init = mdc_init,
              .fini = mdc_fini, .notify = mdc_notify, .dump = mdc_dump,
              .generic_fop = mdc_generic, .min_children = 1, .max_children = 1);
