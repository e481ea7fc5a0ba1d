/*
 * write-behind.c — performance/write-behind: answers a write at once and
 * sends it down in the background, so a sequential writer keeps several
 * writes on their way to the bricks instead of one round trip each
 * (docs/design/write-behind.md; the queue is wb-queue.c).
 *
 * What goes behind: a write through an fd opened without O_APPEND, O_SYNC,
 * O_DSYNC or O_DIRECT, with no xdata and no flags. Every other call that
 * names an inode (by fd, or by a location whose inode or GFID we know)
 * waits until the writes queued on it before it have ended — reads, stat,
 * truncate, setattr, fallocate, locks, xattrs, open, rename, unlink,
 * fsync, flush, and the writes that do not go behind. fsync and flush then
 * report a background failure of the file instead of success.
 *
 * Two answers name a file by what they find rather than by what they were
 * asked: a lookup by name and readdirplus. If the file they found had
 * answered writes still out, or that ended while they were out, their
 * attributes may show a size older than a write the caller already saw
 * answered: the lookup is made again once those writes are done, and the
 * readdirplus entry loses its attributes (the kernel then looks it up).
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "core/fops-util.h"
#include "core/graph.h"
#include "wb.h"

#define WB_SYNC_FLAGS (O_APPEND | O_SYNC | O_DSYNC | O_DIRECT)
#define WB_PARENT_DOWN_WAIT_S 60

/* ---- which inodes a call names ---- */

struct wb_targets {
    struct bfs_inode *in[2];
    bool found[2]; /* ref'd by us (found by GFID) */
    int n;
};

static void add_fd(struct wb_targets *t, const struct bfs_fd *fd)
{
    if (fd && fd->inode && !fd->is_dir)
        t->in[t->n++] = fd->inode;
}

static void add_loc(struct bfs_xl *xl, struct wb_targets *t, const struct bfs_loc *l)
{
    if (l->inode) {
        t->in[t->n++] = l->inode;
    } else if (!bfs_gfid_is_null(&l->gfid) && xl->graph && xl->graph->itable) {
        struct bfs_inode *i = bfs_inode_find(xl->graph->itable, &l->gfid);
        if (i) {
            t->found[t->n] = true;
            t->in[t->n++] = i;
        }
    }
}

static void targets_put(struct wb_targets *t)
{
    for (int i = 0; i < t->n; i++)
        if (t->found[i])
            bfs_inode_unref(t->in[i]);
}

static void targets(struct bfs_xl *xl, int fop, const void *req, struct wb_targets *t)
{
    memset(t, 0, sizeof(*t));
#define FD(UP, FOP, F)                                                                     \
    case BFS_FOP_##UP: add_fd(t, ((const struct bfs_##FOP##_req *)req)->F); break;
#define LOC(UP, FOP, F)                                                                    \
    case BFS_FOP_##UP: add_loc(xl, t, &((const struct bfs_##FOP##_req *)req)->F); break;
    switch (fop) {
        FD(FSTAT, fstat, fd) FD(FTRUNCATE, ftruncate, fd) FD(READ, read, fd)
        FD(WRITE, write, fd) FD(FLUSH, flush, fd) FD(FSYNC, fsync, fd)
        FD(FSETXATTR, fsetxattr, fd) FD(FGETXATTR, fgetxattr, fd)
        FD(FREMOVEXATTR, fremovexattr, fd) FD(LK, lk, fd) FD(FINODELK, finodelk, fd)
        FD(FXATTROP, fxattrop, fd) FD(FSETATTR, fsetattr, fd) FD(FALLOCATE, fallocate, fd)
        FD(DISCARD, discard, fd) FD(ZEROFILL, zerofill, fd) FD(SEEK, seek, fd)
        FD(RCHECKSUM, rchecksum, fd)
        LOC(STAT, stat, loc) LOC(ACCESS, access, loc) LOC(TRUNCATE, truncate, loc)
        LOC(OPEN, open, loc) LOC(SETXATTR, setxattr, loc) LOC(GETXATTR, getxattr, loc)
        LOC(REMOVEXATTR, removexattr, loc) LOC(XATTROP, xattrop, loc)
        LOC(SETATTR, setattr, loc) LOC(INODELK, inodelk, loc) LOC(UNLINK, unlink, loc)
        LOC(LINK, link, oldloc) LOC(LEASE, lease, loc)
    case BFS_FOP_RENAME:
        add_loc(xl, t, &((const struct bfs_rename_req *)req)->oldloc);
        add_loc(xl, t, &((const struct bfs_rename_req *)req)->newloc);
        break;
    case BFS_FOP_COPY_FILE_RANGE:
        add_fd(t, ((const struct bfs_copy_file_range_req *)req)->fd_in);
        add_fd(t, ((const struct bfs_copy_file_range_req *)req)->fd_out);
        break;
    default:
        break;
    }
#undef FD
#undef LOC
}

/* ---- winding ---- */

static void pass_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    (void)cookie;
    bfs_unwind_any(fop, frame, rc, rep);
}

/* fsync, flush: a failure of a write we answered comes first. */
static void sync_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    int err = (int)(intptr_t)cookie;
    bfs_unwind_any(fop, frame, err ? err : rc, rep);
}

/* A graph switch's fsync (BFS_XDATA_WB_DRAIN): answered here, once the
 * writes before it are done (bfs__wb_go waited for them). */
static bool is_drain(const struct bfs_fsync_req *r)
{
    int64_t v;
    return r->xdata && bfs_dict_get_int(r->xdata, BFS_XDATA_WB_DRAIN, &v) == 0 && v == 1;
}

static int wind_now(struct bfs_xl *xl, struct bfs_frame *frame, int fop, const void *req)
{
    if (fop != BFS_FOP_FSYNC && fop != BFS_FOP_FLUSH)
        return bfs_wind_any(fop, frame, FIRST_CHILD(xl), pass_cbk, NULL, req);
    /* flush always goes down (features/locks drops the owner's locks on it) */
    const struct bfs_fd *fd = fop == BFS_FOP_FSYNC ? ((const struct bfs_fsync_req *)req)->fd
                                                   : ((const struct bfs_flush_req *)req)->fd;
    if (fop == BFS_FOP_FSYNC && is_drain((const struct bfs_fsync_req *)req)) {
        struct bfs_fsync_rep rep = {0};
        bfs_unwind_fsync(frame, bfs__wb_peek_sync_err(xl, (struct bfs_fd *)fd), &rep);
        return 0;
    }
    int err = bfs__wb_take_sync_err(xl, (struct bfs_fd *)fd);
    int rc = bfs_wind_any(fop, frame, FIRST_CHILD(xl), sync_cbk, (void *)(intptr_t)err, req);
    return rc < 0 && err ? err : rc;
}

int bfs__wb_go(struct bfs_xl *xl, struct bfs_frame *frame, int fop, const void *req, int stage)
{
    struct wb_targets t;
    targets(xl, fop, req, &t);
    for (int i = stage; i < t.n; i++) {
        int rc = bfs__wb_wait(xl, t.in[i], frame, fop, req, i + 1);
        if (rc != 0) {
            targets_put(&t);
            return rc < 0 ? rc : 0; /* queued: goes on from i + 1 when released */
        }
    }
    targets_put(&t);
    return wind_now(xl, frame, fop, req);
}

/* ---- lookup and readdirplus: answers about what they found ---- */

struct wb_seen {
    uint64_t seq; /* wb_priv.seq when wound */
    struct bfs_lookup_req *lookup; /* to make it again */
};

/* Might an answer about inode g, wound at seq, show it older than a write
 * we answered before it was wound? Takes p->lock (the inode reference is
 * dropped outside it: a last reference runs our forget, which takes it). */
static bool stale(struct bfs_xl *xl, const struct bfs_gfid *g, uint64_t seq)
{
    struct wb_priv *p = xl->private;
    if (bfs_gfid_is_null(g) || !xl->graph || !xl->graph->itable)
        return false;
    struct bfs_inode *i = bfs_inode_find(xl->graph->itable, g);
    if (!i)
        return false;
    pthread_mutex_lock(&p->lock);
    struct wb_inode *wi = bfs__wb_inode(xl, i, false);
    bool s = wi && (wi->head || wi->done_seq > seq);
    pthread_mutex_unlock(&p->lock);
    bfs_inode_unref(i);
    return s;
}

static void seen_free(struct wb_seen *s)
{
    if (s) {
        bfs_lookup_req_free(s->lookup);
        free(s);
    }
}

/* NULL when nothing is queued anywhere: an answer cannot be older than a
 * write answered before the call was wound, as there is none. */
static struct wb_seen *seen_new(struct wb_priv *p, int fop, const void *req, bool *oom)
{
    *oom = false;
    pthread_mutex_lock(&p->lock);
    uint64_t seq = p->seq, queued = p->nqueued;
    pthread_mutex_unlock(&p->lock);
    if (queued == 0)
        return NULL;
    struct wb_seen *s = calloc(1, sizeof(*s));
    if (s && fop == BFS_FOP_LOOKUP && !(s->lookup = bfs_lookup_req_dup(req))) {
        free(s);
        s = NULL;
    }
    *oom = s == NULL;
    if (s)
        s->seq = seq;
    return s;
}

static void lookup_cbk(struct bfs_frame *frame, void *cookie, int rc,
                       const struct bfs_lookup_rep *rep)
{
    struct bfs_xl *xl = frame->xl;
    struct wb_priv *p = xl->private;
    struct wb_seen *s = cookie;
    bool again = rc >= 0 && stale(xl, &rep->attr.gfid, s->seq);
    if (again) {
        pthread_mutex_lock(&p->lock);
        p->lookups_redone++;
        pthread_mutex_unlock(&p->lock);
    }
    if (!again) {
        seen_free(s);
        bfs_unwind_lookup(frame, rc, rep);
        return;
    }
    /* Again, once the file's writes are done: queued behind them. */
    struct bfs_inode *i = bfs_inode_find(xl->graph->itable, &rep->attr.gfid);
    int w = i ? bfs__wb_wait(xl, i, frame, BFS_FOP_LOOKUP, s->lookup, 0) : 0;
    bfs_inode_unref(i);
    if (w == 0)
        w = bfs_wind_any(BFS_FOP_LOOKUP, frame, FIRST_CHILD(xl), pass_cbk, NULL, s->lookup);
    seen_free(s);
    if (w < 0) {
        struct bfs_lookup_rep none = {0};
        bfs_unwind_lookup(frame, w, &none);
    }
}

static void readdir_cbk(struct bfs_frame *frame, void *cookie, int rc,
                        const struct bfs_readdir_rep *rep)
{
    struct bfs_xl *xl = frame->xl;
    struct wb_priv *p = xl->private;
    struct wb_seen *s = cookie;
    struct bfs_readdir_rep copy;
    bool copied = false;
    uint64_t cleared = 0;
    for (uint32_t k = 0; rc >= 0 && k < rep->entries.count; k++) {
        const struct bfs_dirent *d = &rep->entries.v[k];
        if (!d->has_attr || !stale(xl, &d->attr.gfid, s->seq))
            continue;
        if (!copied && bfs_readdir_rep_copy_into(&copy, rep) < 0) {
            rc = -ENOMEM; /* cannot strip: fail rather than show an old size */
            break;
        }
        copied = true;
        copy.entries.v[k].has_attr = false;
        memset(&copy.entries.v[k].attr, 0, sizeof(copy.entries.v[k].attr));
        cleared++;
    }
    pthread_mutex_lock(&p->lock);
    p->readdirp_cleared += cleared;
    pthread_mutex_unlock(&p->lock);
    free(s);
    if (rc < 0 && !copied) {
        struct bfs_readdir_rep none = {0};
        bfs_unwind_readdir(frame, rc, rc == -ENOMEM ? &none : rep);
    } else if (copied) {
        bfs_unwind_readdir(frame, rc, &copy);
        bfs_readdir_rep_clear_dup(&copy);
    } else {
        bfs_unwind_readdir(frame, rc, rep);
    }
}

/* ---- the generic handler ---- */

static bool goes_behind(const struct bfs_write_req *w)
{
    return w->fd && w->fd->inode && !w->fd->is_dir && !(w->fd->flags & WB_SYNC_FLAGS) &&
           !w->xdata && !w->flags && w->data.len > 0 && w->data.len <= INT32_MAX;
}

/* A write that does not go behind still reports an earlier failure of its fd. */
static int sync_write_err(struct bfs_xl *xl, const struct bfs_write_req *w)
{
    struct wb_priv *p = xl->private;
    int err = 0;
    pthread_mutex_lock(&p->lock);
    struct wb_fd *wf = w->fd ? bfs__wb_fd(xl, w->fd, false) : NULL;
    if (wf && wf->err_write) {
        err = wf->err_write;
        wf->err_write = 0;
        p->reported++;
    }
    if (!err)
        p->sync_writes++;
    pthread_mutex_unlock(&p->lock);
    return err;
}

static int wb_generic(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req)
{
    struct wb_priv *p = xl->private;
    if (!p->on)
        return bfs_wind_any(fop, frame, FIRST_CHILD(xl), pass_cbk, NULL, req);
    if (fop == BFS_FOP_WRITE) {
        if (goes_behind(req))
            return bfs__wb_write(xl, frame, req);
        int err = sync_write_err(xl, req);
        if (err)
            return err;
    }
    bool oom;
    if (fop == BFS_FOP_LOOKUP ||
        (fop == BFS_FOP_READDIR && ((const struct bfs_readdir_req *)req)->plus)) {
        struct wb_seen *s = seen_new(p, fop, req, &oom);
        if (oom)
            return -ENOMEM;
        if (!s)
            return bfs_wind_any(fop, frame, FIRST_CHILD(xl), pass_cbk, NULL, req);
        int rc = fop == BFS_FOP_LOOKUP
                     ? bfs_wind_lookup(frame, FIRST_CHILD(xl), lookup_cbk, s, req)
                     : bfs_wind_readdir(frame, FIRST_CHILD(xl), readdir_cbk, s, req);
        if (rc < 0)
            seen_free(s);
        return rc;
    }
    return bfs__wb_go(xl, frame, fop, req, 0);
}

/* ---- module ---- */

/* The graph is going away (unmount, or a retired generation after a live
 * switch): what we answered must still reach the bricks before the
 * connections below close. Bounded, and never on the loop thread, whose
 * callbacks the wait needs. */
static void drain_all(struct bfs_xl *xl)
{
    struct wb_priv *p = xl->private;
    struct bfs_proc *proc = xl->graph ? xl->graph->proc : NULL;
    if (proc && proc->loop && bfs_loop_on_loop_thread(proc->loop))
        return;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += WB_PARENT_DOWN_WAIT_S;
    pthread_mutex_lock(&p->lock);
    int rc = 0;
    while (p->nqueued > 0 && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&p->idle, &p->lock, &until);
    uint64_t left = p->nqueued, bytes = p->used;
    pthread_mutex_unlock(&p->lock);
    if (left)
        XL_ERR(xl, "graph going away with %llu call(s) still queued (%llu bytes of answered "
               "writes) after %d s", (unsigned long long)left, (unsigned long long)bytes,
               WB_PARENT_DOWN_WAIT_S);
}

static int wb_notify(struct bfs_xl *xl, enum bfs_event ev, struct bfs_xl *from, void *data)
{
    if (ev == BFS_EV_PARENT_DOWN && xl->private)
        drain_all(xl);
    return bfs_xl_notify_default(xl, ev, from, data);
}

static void wb_release(struct bfs_xl *xl, struct bfs_fd *fd)
{
    uint64_t v;
    if (bfs_fd_ctx_del(fd, xl, &v) == 0)
        free((void *)(uintptr_t)v);
}

static void wb_forget(struct bfs_xl *xl, struct bfs_inode *inode)
{
    struct wb_priv *p = xl->private;
    uint64_t v;
    if (bfs_inode_ctx_del(inode, xl, &v) < 0)
        return;
    struct wb_inode *wi = (struct wb_inode *)(uintptr_t)v;
    pthread_mutex_lock(&p->lock);
    if (wi->head) /* entries hold the inode through their fd: cannot happen */
        XL_ERR(xl, "forget of an inode with queued calls: kept");
    else
        bfs__wb_free_inode(p, wi);
    pthread_mutex_unlock(&p->lock);
}

static char *wb_dump(struct bfs_xl *xl)
{
    struct wb_priv *p = xl->private;
    json_object *o = json_object_new_object();
    pthread_mutex_lock(&p->lock);
#define N(K, V) json_object_object_add(o, K, json_object_new_uint64(V))
    N("window", p->window);
    N("queued", p->nqueued);
    N("answered_bytes_out", p->used);
    N("answered_bytes_out_max", p->used_max);
    N("sent_max", p->sent_max);
    N("writes_lent", p->lent);
    N("writes_copied", p->copied);
    N("behind", p->behind);
    N("behind_bytes", p->behind_bytes);
    N("merged", p->merged);
    N("sync_writes", p->sync_writes);
    N("waited_window", p->waited_window);
    N("waited_calls", p->waited_fops);
    N("failed", p->failed);
    N("reported", p->reported);
    N("lookups_redone", p->lookups_redone);
    N("readdirp_cleared", p->readdirp_cleared);
#undef N
    pthread_mutex_unlock(&p->lock);
    char *text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
    return text;
}

static int wb_init(struct bfs_xl *xl)
{
    struct wb_priv *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->on = bfs_xl_opt_bool(xl, WB_OPT_ON);
    p->window = bfs_xl_opt_size(xl, WB_OPT_WINDOW);
    p->max_out = (uint32_t)bfs_xl_opt_int(xl, WB_OPT_MAX_OUT);
    p->inodes.next = p->inodes.prev = &p->inodes;
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->idle, &ca);
    pthread_condattr_destroy(&ca);
    xl->private = p;
    return 0;
}

static void wb_fini(struct bfs_xl *xl)
{
    struct wb_priv *p = xl->private;
    if (!p)
        return;
    /* forget ran for every inode before fini; what is left had calls queued */
    while (p->inodes.next != &p->inodes) {
        struct wb_inode *wi = p->inodes.next;
        if (wi->head)
            XL_ERR(xl, "fini with calls still queued");
        bfs__wb_free_inode(p, wi);
    }
    pthread_cond_destroy(&p->idle);
    pthread_mutex_destroy(&p->lock);
    free(p);
    xl->private = NULL;
}

/* Volume options (`volume set`): volgen places write-behind in a mount's
 * client graph, under md-cache, unless performance.write-behind is off
 * (src/mgmt/volgen.c, docs/design/write-behind.md). */
static const struct bfs_option_desc wb_options[] = {
    {.key = WB_OPT_ON, .type = BFS_OPT_BOOL, .def = "on",
     .description = "answer writes at once and send them to the bricks in the background "
                    "(a failure is reported by the next write, fsync or close of the file); "
                    "off: volgen leaves write-behind out of the client graph",
     .flags = BFS_OPT_F_CLIENT | BFS_OPT_F_SETTABLE},
    {.key = WB_OPT_WINDOW, .type = BFS_OPT_SIZE, .def = "4MB", .min = 64 * 1024,
     .max = 1024 * 1024 * 1024,
     .description = "bytes of answered writes per file that may be on their way to the "
                    "bricks; a write that does not fit waits",
     .flags = BFS_OPT_F_CLIENT | BFS_OPT_F_SETTABLE},
    {.key = WB_OPT_MAX_OUT, .type = BFS_OPT_INT, .def = "2", .min = 1, .max = 64,
     .description = "writes of one file sent to the bricks and not yet answered, at most "
                    "(the others wait in the window, contiguous ones merged up to 128 KiB); "
                    "2 overlaps a write's round trip with the next one's sends (replica 3 "
                    "sequential write about twice as fast as with 1, no more CPU per MiB); "
                    "more queues megabytes in the sockets for no measured gain",
     .flags = BFS_OPT_F_CLIENT | BFS_OPT_F_SETTABLE},
    {.key = NULL},
};

BFS_XL_MODULE(.type = "performance/write-behind", .options = wb_options, .init = wb_init,
              .fini = wb_fini, .notify = wb_notify, .release = wb_release,
              .forget = wb_forget, .dump = wb_dump, .generic_fop = wb_generic,
              .min_children = 1, .max_children = 1);
