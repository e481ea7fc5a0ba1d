/*
 * index.c — features/index: the brick's index of inodes with pending heal
 * counters, so that the self-heal daemon never has to crawl a brick
 * (docs/design/self-heal-daemon.md).
 *
 * Stacked right above storage/posix in every brick graph. It watches the
 * xattrop/fxattrop calls that cluster translators make to move their
 * counters (replicate's trusted.brickfs.afr.*, disperse's dirty counter:
 * the option `watch`), and keeps one entry per inode whose watched counters
 * are not all zero:
 *
 *   <brick>/.brickfs/indices/pending/<gfid>     a hard link to an empty base
 *                                               file (index-base.c)
 *
 * - before an xattrop that adds a positive amount to a watched key is sent
 *   down, the entry is created (linkat, EEXIST is fine): the pre-op of a
 *   transaction is on the index before it is on the inode, so a crash
 *   between pre-op and post-op leaves the entry;
 * - a reply with a watched value non-zero creates the entry too (an
 *   entry lost by hand; for GET_AND_SET the new values are the request's);
 * - a reply whose watched values are all zero, for an inode with an entry,
 *   makes the index read every xattr of the inode (getxattr, internal): if
 *   no watched key is non-zero any more, the entry is removed. After one
 *   such read the non-zero watched keys of the inode are known and kept
 *   current from the replies (index-known.c): later post-ops decide
 *   without reading. A new inode (mkdir, mknod, symlink, and create when
 *   storage/posix says it made the file) is known at once: no counters.
 * xattrops on one GFID go through the index one at a time (a queue per
 * busy GFID), so a removal decided on one reply can never overtake the
 * entry made for a later one. An fxattrop on an fd without inode (made by
 * create) learns its GFID from an fstat first. An xattrop on a loc without
 * GFID (by name only) passes unindexed; replicate and disperse always name
 * the GFID.
 *
 * Enumeration (clients, uid 0 only; anything else: EPERM): getxattr of the
 * virtual name "brickfs.index.pending" on any loc, xdata "index-offset"
 * (INT, 0 = start) and "index-count" (INT, default 1024, at most 65536).
 * The reply's xattrs hold "brickfs.index.pending" (BIN: 16 bytes per GFID),
 * "brickfs.index.offset" (INT: the continuation for the next call) and
 * "brickfs.index.eof" (INT 1 when the listing is complete); rc is the
 * number of GFIDs. The continuation is a directory offset (telldir), valid
 * across calls and brick restarts; entries added or removed meanwhile may
 * or may not be seen (readdir semantics), which a crawl that repeats does
 * not mind. Listing runs on the worker pool.
 *
 * Purge (uid 0): setxattr "brickfs.index.purge" (any value) on loc{gfid}
 * removes a stale entry: that of an inode gone from this brick (a file
 * unlinked while it had pending counters), or whose watched counters are
 * all zero (a pre-op whose xattrop never happened). It is checked like a
 * reply with zeros (getxattr of every xattr, in the GFID's queue); EBUSY
 * when a counter is set, 0 when there was no entry.
 *
 * Lifetimes: priv from init to fini. A struct ix_call lives from the
 * xattrop's (or purge's) arrival to its answer; a struct ix_busy while calls on its
 * GFID are in the index.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/event.h"
#include "core/fops-util.h"
#include "core/graph.h"
#include "index.h"

/* ---- watched keys and values ---- */

bool ix_watched(const struct ix_priv *p, const char *key)
{
    for (int i = 0; i < p->nwatch; i++) {
        size_t n = strlen(p->watch[i]);
        if (n && p->watch[i][n - 1] == '*') {
            if (strncmp(key, p->watch[i], n - 1) == 0)
                return true;
        } else if (strcmp(key, p->watch[i]) == 0) {
            return true;
        }
    }
    return false;
}

struct scan {
    const struct ix_priv *p;
    bool any;                   /* a watched key was seen */
    bool nonzero;               /* a watched value (or increment) is not all zeros */
    bool positive;              /* a watched increment has a positive element */
    uint32_t optype;
};

static int scan_one(const char *key, enum bfs_val_type type, const void *val, size_t len,
                    void *arg)
{
    (void)type;
    struct scan *s = arg;
    if (!ix_watched(s->p, key))
        return 0;
    s->any = true;
    const uint8_t *b = val;
    for (size_t i = 0; i < len; i++)
        if (b[i])
            s->nonzero = true;
    /* an increment: big-endian elements of 8 (ADD64) or 4 bytes */
    size_t es = s->optype == BFS_XATTROP_ADD32 ? 4 : 8;
    if (s->optype == BFS_XATTROP_GET_AND_SET) {
        s->positive = s->positive || s->nonzero;
        return 0;
    }
    for (size_t i = 0; i + es <= len; i += es) {
        bool zero = true;
        for (size_t k = 0; k < es; k++)
            zero = zero && !b[i + k];
        if (!zero && !(b[i] & 0x80))
            s->positive = true;
    }
    return 0;
}

static struct scan scan_dict(const struct ix_priv *p, const struct bfs_dict *d, uint32_t optype)
{
    struct scan s = {.p = p, .optype = optype};
    if (d)
        (void)bfs_dict_foreach(d, scan_one, &s);
    return s;
}

/* ---- the entries ---- */

static int entry_add(struct bfs_xl *xl, const struct bfs_gfid *g)
{
    struct ix_priv *p = xl->private;
    char name[BFS_GFID_STRLEN];
    bfs_gfid_fmt(g, name);
    int rc = ix_entry_make(xl, p, name);
    if (rc < 0) {
        if (rc == -EEXIST)
            return 0;
        XL_ERR(xl, "cannot add %s to the pending index: %s", name, strerror(-rc));
        return rc;
    }
    __atomic_add_fetch(&p->n_added, 1, __ATOMIC_RELAXED);
    return 0;
}

static bool entry_exists(struct bfs_xl *xl, const struct bfs_gfid *g)
{
    struct ix_priv *p = xl->private;
    char name[BFS_GFID_STRLEN];
    struct stat st;
    bfs_gfid_fmt(g, name);
    return fstatat(p->pending_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void entry_del(struct bfs_xl *xl, const struct bfs_gfid *g)
{
    struct ix_priv *p = xl->private;
    char name[BFS_GFID_STRLEN];
    bfs_gfid_fmt(g, name);
    if (unlinkat(p->pending_fd, name, 0) == 0)
        __atomic_add_fetch(&p->n_removed, 1, __ATOMIC_RELAXED);
    else if (errno != ENOENT)
        XL_WARN(xl, "cannot remove %s from the pending index: %s", name, strerror(errno));
}

/* ---- one GFID at a time ---- */

static struct ix_busy **bucket(struct ix_priv *p, const struct bfs_gfid *g)
{
    return &p->busy[(g->b[15] ^ g->b[7]) % IX_BUCKETS];
}

/* Makes c's GFID busy (true: c may run now) or queues c behind it. */
static bool admit(struct ix_priv *p, struct ix_call *c)
{
    pthread_mutex_lock(&p->lock);
    struct ix_busy **bk = bucket(p, &c->gfid), *b;
    for (b = *bk; b; b = b->next)
        if (bfs_gfid_eq(&b->gfid, &c->gfid))
            break;
    if (b) {
        if (b->tail)
            b->tail->next = c;
        else
            b->head = c;
        b->tail = c;
        pthread_mutex_unlock(&p->lock);
        return false;
    }
    b = calloc(1, sizeof(*b));
    if (b) { /* without memory the call runs unserialized: rare and logged */
        b->gfid = c->gfid;
        b->next = *bk;
        *bk = b;
    } else {
        XL_WARN(c->xl, "out of memory: an xattrop runs unserialized");
    }
    pthread_mutex_unlock(&p->lock);
    return true;
}

/* The next call waiting on g, or NULL (then g is no longer busy). */
static struct ix_call *next_of(struct ix_priv *p, const struct bfs_gfid *g)
{
    pthread_mutex_lock(&p->lock);
    struct ix_busy **pp = bucket(p, g), *b;
    while ((b = *pp) && !bfs_gfid_eq(&b->gfid, g))
        pp = &b->next;
    struct ix_call *c = NULL;
    if (b && b->head) {
        c = b->head;
        b->head = c->next;
        if (!b->head)
            b->tail = NULL;
        c->next = NULL;
    } else if (b) {
        *pp = b->next;
        free(b);
    }
    pthread_mutex_unlock(&p->lock);
    return c;
}

/* ---- an xattrop through the index ---- */

static void call_start(struct ix_call *c);

static void call_free(struct ix_call *c)
{
    const struct bfs_fop_info *fi = &bfs_fop_info[c->fop];
    fi->req_clear_dup(c->req);
    free(c->req);
    if (c->rep) {
        fi->rep_clear_dup(c->rep);
        free(c->rep);
    }
    free(c);
}

static void run_next(void *arg)
{
    call_start(arg);
}

/* Answers c and lets the next call on its GFID run. */
static void call_finish(struct ix_call *c, int rc, const void *rep)
{
    struct ix_priv *p = c->xl->private;
    struct bfs_xl *xl = c->xl;
    struct bfs_gfid g = c->gfid;
    /* a reply is never NULL: a zeroed one stands for "no reply" (the reply
     * structs of xattrop, fxattrop and setxattr are a few pointers) */
    static const uint8_t zero_rep[256];
    _Static_assert(sizeof(struct bfs_xattrop_rep) <= sizeof(zero_rep) &&
                       sizeof(struct bfs_fxattrop_rep) <= sizeof(zero_rep) &&
                       sizeof(struct bfs_setxattr_rep) <= sizeof(zero_rep),
                   "zero_rep too small");
    bfs_unwind_any(c->fop, c->frame, rc, rep ? rep : (const void *)zero_rep);
    call_free(c);
    struct ix_call *n = next_of(p, &g);
    if (!n)
        return;
    /* not from this stack: a long queue must not become a deep recursion */
    struct bfs_loop *loop = xl->graph && xl->graph->proc ? xl->graph->proc->loop : NULL;
    if (!loop || bfs_loop_post(loop, run_next, n) < 0)
        call_start(n);
}

static const struct bfs_dict *req_xattrs(const struct ix_call *c)
{
    return c->fop == BFS_FOP_XATTROP ? ((const struct bfs_xattrop_req *)c->req)->xattrs
                                     : ((const struct bfs_fxattrop_req *)c->req)->xattrs;
}

static uint32_t req_optype(const struct ix_call *c)
{
    return c->fop == BFS_FOP_XATTROP ? ((const struct bfs_xattrop_req *)c->req)->optype
                                     : ((const struct bfs_fxattrop_req *)c->req)->optype;
}

static const struct bfs_dict *rep_xattrs(int fop, const void *rep)
{
    return fop == BFS_FOP_XATTROP ? ((const struct bfs_xattrop_rep *)rep)->xattrs
                                  : ((const struct bfs_fxattrop_rep *)rep)->xattrs;
}

static void check_cbk(struct bfs_frame *frame, void *cookie, int rc,
                      const struct bfs_getxattr_rep *rep)
{
    (void)frame;
    struct ix_call *c = cookie;
    struct ix_priv *p = c->xl->private;
    bool gone = rc == -ENOENT || rc == -ESTALE;
    bool zero = rc >= 0 && !scan_dict(p, rep->xattrs, BFS_XATTROP_ADD64).nonzero;
    if (rc >= 0)
        ix_known_set(p, &c->gfid, rep->xattrs); /* every xattr of the inode: exact */
    else
        ix_known_forget(p, &c->gfid);
    if (zero || (gone && c->fop == BFS_FOP_SETXATTR))
        entry_del(c->xl, &c->gfid);
    if (c->fop == BFS_FOP_SETXATTR) /* a purge: EBUSY while a counter is set */
        c->rc = zero || gone ? 0 : rc < 0 ? rc : -EBUSY;
    call_finish(c, c->rc, c->rep);
}

/* All watched values in the reply are zero: are the others too? */
static void check_all(struct ix_call *c)
{
    struct bfs_getxattr_req req = {.name = NULL, .xdata = bfs_dict_new()};
    req.loc.gfid = c->gfid;
    int rc = -ENOMEM;
    __atomic_add_fetch(&((struct ix_priv *)c->xl->private)->n_checks, 1, __ATOMIC_RELAXED);
    if (req.xdata && bfs_dict_set_int(req.xdata, IX_INTERNAL_KEY, 1) == 0)
        rc = bfs_wind_getxattr(c->frame, FIRST_CHILD(c->xl), check_cbk, c, &req);
    bfs_dict_unref(req.xdata);
    if (rc < 0)
        call_finish(c, c->rc, c->rep); /* the entry stays: harmless */
}

static void op_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    (void)frame;
    struct ix_call *c = cookie;
    struct ix_priv *p = c->xl->private;
    const struct bfs_fop_info *fi = &bfs_fop_info[fop];
    if (rc < 0) { /* keys may have been applied in part */
        ix_known_forget(p, &c->gfid);
        call_finish(c, rc, rep);
        return;
    }
    /* the new values: ADD's reply has them; GET_AND_SET's has the old ones,
     * the new ones are what it was asked to store */
    const struct bfs_dict *now = req_optype(c) == BFS_XATTROP_GET_AND_SET ? req_xattrs(c)
                                                                          : rep_xattrs(fop, rep);
    struct scan s = scan_dict(p, now, BFS_XATTROP_ADD64);
    int known = ix_known_apply(p, &c->gfid, now); /* 1 some non-zero, 0 none, -1 unknown */
    if (s.nonzero || !s.any || known == 1) {
        if (s.nonzero && !c->added)
            (void)entry_add(c->xl, &c->gfid);
        call_finish(c, rc, rep);
        return;
    }
    if (known == 0) { /* every watched counter is zero, without a read: unlinking
                       * an entry that is not there costs what a stat would */
        entry_del(c->xl, &c->gfid);
        call_finish(c, rc, rep);
        return;
    }
    if (!entry_exists(c->xl, &c->gfid)) {
        call_finish(c, rc, rep);
        return;
    }
    c->rc = rc;
    c->rep = calloc(1, fi->rep_size);
    if (!c->rep || fi->rep_copy_into(c->rep, rep) < 0) {
        free(c->rep);
        c->rep = NULL;
        call_finish(c, rc, rep);
        return;
    }
    check_all(c);
}

static void call_start(struct ix_call *c)
{
    if (c->fop == BFS_FOP_SETXATTR) { /* a purge: the check alone */
        c->rc = 0;
        check_all(c);
        return;
    }
    if (scan_dict(c->xl->private, req_xattrs(c), req_optype(c)).positive) {
        int rc = entry_add(c->xl, &c->gfid);
        if (rc < 0) {
            call_finish(c, rc, NULL);
            return;
        }
        c->added = true;
    }
    int rc = bfs_wind_any(c->fop, c->frame, FIRST_CHILD(c->xl), op_cbk, c, c->req);
    if (rc < 0)
        call_finish(c, rc, NULL);
}

/* Queues (or starts) call fop on GFID g through the index. */
static int index_op(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req,
                    const struct bfs_gfid *g)
{
    struct ix_priv *p = xl->private;
    const struct bfs_fop_info *fi = &bfs_fop_info[fop];
    struct ix_call *c = calloc(1, sizeof(*c));
    void *copy = calloc(1, fi->req_size);
    if (!c || !copy || fi->req_copy_into(copy, req) < 0) {
        free(copy);
        free(c);
        return -ENOMEM;
    }
    c->frame = frame;
    c->xl = xl;
    c->fop = fop;
    c->req = copy;
    c->gfid = *g;
    if (admit(p, c))
        call_start(c);
    return 0;
}

static int index_xattrop(struct bfs_frame *frame, struct bfs_xl *xl,
                         const struct bfs_xattrop_req *req)
{
    struct ix_priv *p = xl->private;
    if (bfs_gfid_is_null(&req->loc.gfid) || !scan_dict(p, req->xattrs, req->optype).any)
        return bfs_pass_xattrop(frame, FIRST_CHILD(xl), req);
    return index_op(frame, xl, BFS_FOP_XATTROP, req, &req->loc.gfid);
}

/* An fd without an inode (one made by create, before its GFID was known):
 * the GFID comes from an fstat first. */
struct ix_fstat {
    struct bfs_fxattrop_req *req; /* our copy */
};

static void fstat_cbk(struct bfs_frame *frame, void *cookie, int rc,
                      const struct bfs_fstat_rep *rep)
{
    struct ix_fstat *w = cookie;
    struct bfs_xl *xl = frame->xl;
    if (rc >= 0 && !bfs_gfid_is_null(&rep->attr.gfid))
        rc = index_op(frame, xl, BFS_FOP_FXATTROP, w->req, &rep->attr.gfid);
    else
        rc = bfs_pass_fxattrop(frame, FIRST_CHILD(xl), w->req);
    if (rc < 0)
        bfs_unwind_fxattrop(frame, rc, &(struct bfs_fxattrop_rep){0});
    bfs_fxattrop_req_free(w->req);
    free(w);
}

static int index_fxattrop(struct bfs_frame *frame, struct bfs_xl *xl,
                          const struct bfs_fxattrop_req *req)
{
    struct ix_priv *p = xl->private;
    if (!req->fd || !scan_dict(p, req->xattrs, req->optype).any)
        return bfs_pass_fxattrop(frame, FIRST_CHILD(xl), req);
    if (req->fd->inode && !bfs_gfid_is_null(&req->fd->inode->gfid))
        return index_op(frame, xl, BFS_FOP_FXATTROP, req, &req->fd->inode->gfid);
    struct ix_fstat *w = calloc(1, sizeof(*w));
    if (!w || !(w->req = bfs_fxattrop_req_dup(req))) {
        free(w);
        return -ENOMEM;
    }
    struct bfs_fstat_req sreq = {.fd = req->fd};
    int rc = bfs_wind_fstat(frame, FIRST_CHILD(xl), fstat_cbk, w, &sreq);
    if (rc < 0) {
        bfs_fxattrop_req_free(w->req);
        free(w);
    }
    return rc;
}

/* ---- new inodes: nothing to read at their first post-op ---- */

static void new_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    (void)cookie;
    struct bfs_xl *xl = frame->xl;
    const struct bfs_iatt *a = NULL;
    int64_t created = 0;
    switch (fop) {
    case BFS_FOP_CREATE: /* may have opened an existing file: posix says */
        if (bfs_dict_get_int(((const struct bfs_create_rep *)rep)->xdata, IX_CREATED_KEY,
                             &created) == 0 && created == 1)
            a = &((const struct bfs_create_rep *)rep)->attr;
        break;
    case BFS_FOP_MKDIR: a = &((const struct bfs_mkdir_rep *)rep)->attr; break;
    case BFS_FOP_MKNOD: a = &((const struct bfs_mknod_rep *)rep)->attr; break;
    case BFS_FOP_SYMLINK: a = &((const struct bfs_symlink_rep *)rep)->attr; break;
    }
    if (rc >= 0 && a && !bfs_gfid_is_null(&a->gfid))
        ix_known_set(xl->private, &a->gfid, NULL);
    bfs_unwind_any(fop, frame, rc, rep);
}

static int index_create(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_create_req *r)
{
    return bfs_wind_any(BFS_FOP_CREATE, f, FIRST_CHILD(xl), new_cbk, NULL, r);
}

static int index_mkdir(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_mkdir_req *r)
{
    return bfs_wind_any(BFS_FOP_MKDIR, f, FIRST_CHILD(xl), new_cbk, NULL, r);
}

static int index_mknod(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_mknod_req *r)
{
    return bfs_wind_any(BFS_FOP_MKNOD, f, FIRST_CHILD(xl), new_cbk, NULL, r);
}

static int index_symlink(struct bfs_frame *f, struct bfs_xl *xl,
                         const struct bfs_symlink_req *r)
{
    return bfs_wind_any(BFS_FOP_SYMLINK, f, FIRST_CHILD(xl), new_cbk, NULL, r);
}

/* ---- enumeration ---- */

struct ix_list {
    struct bfs_frame *frame;
    struct bfs_xl *xl;
    int64_t offset, count;
};

/* Reads up to l->count GFIDs from l->offset into out. rc: how many, or -errno. */
static int list_entries(struct ix_priv *p, struct ix_list *l, struct bfs_dict *out)
{
    int dfd = openat(p->pending_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    DIR *d = fdopendir(dfd);
    if (!d) {
        int rc = -errno;
        close(dfd);
        return rc;
    }
    if (l->offset > 0)
        seekdir(d, (long)l->offset);
    struct bfs_gfid *v = malloc((size_t)l->count * sizeof(*v));
    int n = 0, rc = 0;
    bool eof = false;
    long pos = l->offset;
    while (v && n < l->count) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno)
                rc = -errno;
            eof = true;
            break;
        }
        pos = telldir(d);
        if (de->d_name[0] != '.' && bfs_gfid_parse(de->d_name, &v[n]) == 0)
            n++;
    }
    if (!v)
        rc = -ENOMEM;
    if (rc == 0 && !eof) { /* full batch: is anything left? */
        errno = 0;
        if (!readdir(d) && !errno)
            eof = true;
    }
    closedir(d);
    if (rc == 0)
        rc = bfs_dict_set_bin(out, IX_VKEY_PENDING, v, (size_t)n * sizeof(*v));
    if (rc == 0)
        rc = bfs_dict_set_int(out, IX_VKEY_OFFSET, pos);
    if (rc == 0)
        rc = bfs_dict_set_int(out, IX_VKEY_EOF, eof ? 1 : 0);
    free(v);
    return rc < 0 ? rc : n;
}

static void list_run(void *arg)
{
    struct ix_list *l = arg;
    struct ix_priv *p = l->xl->private;
    struct bfs_getxattr_rep rep = {.xattrs = bfs_dict_new()};
    int rc = rep.xattrs ? list_entries(p, l, rep.xattrs) : -ENOMEM;
    if (rc > 0)
        __atomic_add_fetch(&p->n_listed, (uint64_t)rc, __ATOMIC_RELAXED);
    if (rc < 0) {
        bfs_dict_unref(rep.xattrs);
        rep.xattrs = NULL;
    }
    bfs_unwind_getxattr(l->frame, rc, &rep);
    bfs_dict_unref(rep.xattrs);
    free(l);
}

static int index_getxattr(struct bfs_frame *frame, struct bfs_xl *xl,
                          const struct bfs_getxattr_req *req)
{
    if (!req->name || strncmp(req->name, IX_VPREFIX, sizeof(IX_VPREFIX) - 1) != 0)
        return bfs_pass_getxattr(frame, FIRST_CHILD(xl), req);
    if (strcmp(req->name, IX_VKEY_PENDING) != 0) {
        bfs_unwind_getxattr(frame, -ENODATA, &(struct bfs_getxattr_rep){0});
        return 0;
    }
    if (frame->stack->uid != 0) {
        bfs_unwind_getxattr(frame, -EPERM, &(struct bfs_getxattr_rep){0});
        return 0;
    }
    struct ix_list *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->frame = frame;
    l->xl = xl;
    l->count = IX_COUNT_DEF;
    (void)bfs_dict_get_int(req->xdata, IX_X_OFFSET, &l->offset);
    (void)bfs_dict_get_int(req->xdata, IX_X_COUNT, &l->count);
    if (l->offset < 0 || l->count <= 0 || l->count > IX_COUNT_MAX) {
        free(l);
        bfs_unwind_getxattr(frame, -EINVAL, &(struct bfs_getxattr_rep){0});
        return 0;
    }
    struct bfs_workers *w = xl->graph && xl->graph->proc ? xl->graph->proc->workers : NULL;
    if (!w || bfs_workers_submit(w, list_run, l) < 0)
        list_run(l);
    return 0;
}

/* ---- purge: drop a stale entry ---- */

static int index_setxattr(struct bfs_frame *frame, struct bfs_xl *xl,
                          const struct bfs_setxattr_req *req)
{
    if (!req->xattrs || !bfs_dict_has(req->xattrs, IX_VKEY_PURGE))
        return bfs_pass_setxattr(frame, FIRST_CHILD(xl), req);
    if (frame->stack->uid != 0 || bfs_dict_count(req->xattrs) != 1 ||
        bfs_gfid_is_null(&req->loc.gfid)) {
        bfs_unwind_setxattr(frame, frame->stack->uid ? -EPERM : -EINVAL,
                            &(struct bfs_setxattr_rep){0});
        return 0;
    }
    if (!entry_exists(xl, &req->loc.gfid)) {
        bfs_unwind_setxattr(frame, 0, &(struct bfs_setxattr_rep){0});
        return 0;
    }
    return index_op(frame, xl, BFS_FOP_SETXATTR, req, &req->loc.gfid);
}

/* ---- module ---- */

static int mkdir_p(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return -ENAMETOOLONG;
    for (char *s = buf + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(buf, 0700) < 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    if (mkdir(buf, 0700) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static int parse_watch(struct bfs_xl *xl, struct ix_priv *p, const char *list)
{
    char *copy = strdup(list), *save = NULL;
    if (!copy)
        return -ENOMEM;
    for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        if (p->nwatch == IX_MAX_WATCH) {
            XL_ERR(xl, "option watch: at most %d names", IX_MAX_WATCH);
            free(copy);
            return -EINVAL;
        }
        if (!(p->watch[p->nwatch++] = strdup(t))) {
            free(copy);
            return -ENOMEM;
        }
    }
    free(copy);
    return p->nwatch ? 0 : -EINVAL;
}

static void index_fini(struct bfs_xl *xl)
{
    struct ix_priv *p = xl->private;
    if (!p)
        return;
    if (p->pending_fd >= 0)
        close(p->pending_fd);
    ix_base_fini(p);
    for (int i = 0; i < p->nwatch; i++)
        free(p->watch[i]);
    for (int i = 0; i < IX_BUCKETS; i++)
        while (p->busy[i]) {
            struct ix_busy *b = p->busy[i];
            p->busy[i] = b->next;
            free(b);
        }
    ix_known_fini(p);
    pthread_mutex_destroy(&p->lock);
    free(p->dir);
    free(p);
    xl->private = NULL;
}

static int index_init(struct bfs_xl *xl)
{
    struct ix_priv *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->pending_fd = -1;
    p->base_dfd = -1;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->base_lock, NULL);
    xl->private = p;
    if (ix_known_init(p) < 0) {
        index_fini(xl);
        return -ENOMEM;
    }
    const char *dir = bfs_xl_opt_str(xl, "index-directory");
    const char *brick = NULL;
    if (!dir && strcmp(FIRST_CHILD(xl)->type, "storage/posix") == 0)
        (void)bfs_dict_get_str(FIRST_CHILD(xl)->options, "directory", &brick);
    int rc;
    if (dir)
        p->dir = strdup(dir);
    else if (brick && asprintf(&p->dir, "%s/.brickfs/indices", brick) < 0)
        p->dir = NULL;
    if (!dir && !brick) {
        XL_ERR(xl, "no index-directory, and the child is not storage/posix with a directory");
        index_fini(xl);
        return -EINVAL;
    }
    char pend[4200];
    if (!p->dir || (rc = parse_watch(xl, p, bfs_xl_opt_str(xl, "watch"))) < 0) {
        index_fini(xl);
        return p && p->dir ? -EINVAL : -ENOMEM;
    }
    snprintf(pend, sizeof(pend), "%s/pending", p->dir);
    if ((rc = mkdir_p(pend)) < 0 ||
        (p->pending_fd = open(pend, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        rc = rc < 0 ? rc : -errno;
        XL_ERR(xl, "cannot prepare the index directory %s: %s", pend, strerror(-rc));
        index_fini(xl);
        return rc;
    }
    snprintf(pend, sizeof(pend), "%s/base", p->dir);
    if ((rc = ix_base_init(xl, p, pend)) < 0)
        XL_WARN(xl, "no base file in %s (%s): index entries will be plain files", pend,
                strerror(-rc));
    return 0;
}

static char *index_dump(struct bfs_xl *xl)
{
    struct ix_priv *p = xl->private;
    char *out = NULL, base[IX_BASE_NAMELEN];
    pthread_mutex_lock(&p->base_lock);
    memcpy(base, p->base_name, sizeof(base));
    pthread_mutex_unlock(&p->base_lock);
    if (asprintf(&out,
                 "{\"directory\":\"%s\",\"added\":%llu,\"removed\":%llu,\"listed\":%llu,"
                 "\"checks\":%llu,\"bases\":%llu,\"base\":\"%s\"}",
                 p->dir, (unsigned long long)__atomic_load_n(&p->n_added, __ATOMIC_RELAXED),
                 (unsigned long long)__atomic_load_n(&p->n_removed, __ATOMIC_RELAXED),
                 (unsigned long long)__atomic_load_n(&p->n_listed, __ATOMIC_RELAXED),
                 (unsigned long long)__atomic_load_n(&p->n_checks, __ATOMIC_RELAXED),
                 (unsigned long long)__atomic_load_n(&p->n_bases, __ATOMIC_RELAXED),
                 base) < 0)
        return NULL;
    return out;
}

static const struct bfs_option_desc index_options[] = {
    {.key = "index-directory", .type = BFS_OPT_PATH,
     .description = "where the index lives (default: <brick directory>/.brickfs/indices)"},
    {.key = "watch", .type = BFS_OPT_STR,
     .def = "trusted.brickfs.afr.*,trusted.brickfs.ec.dirty",
     .description = "xattrs whose non-zero value puts an inode on the pending index "
                    "(comma-separated; a trailing * matches a prefix)"},
    {.key = "link-max", .type = BFS_OPT_INT, .def = "0", .min = 0, .max = 1000000000,
     .description = "for tests: a base file of the index is full after that many entries "
                    "were linked to it through this process (0: when the file system says "
                    "EMLINK)"},
    {.key = NULL},
};

static const struct bfs_fops index_fops = {
    .xattrop = index_xattrop,
    .fxattrop = index_fxattrop,
    .getxattr = index_getxattr,
    .setxattr = index_setxattr,
    .create = index_create,
    .mkdir = index_mkdir,
    .mknod = index_mknod,
    .symlink = index_symlink,
};

BFS_XL_MODULE(.type = "features/index", .fops = &index_fops, .options = index_options,
              .init = index_init, .fini = index_fini, .dump = index_dump, .min_children = 1,
              .max_children = 1);
