/*
 * wb-queue.c — the queue of one inode (docs/design/write-behind.md).
 *
 * Entries stay in arrival order. A write that may go behind is answered
 * (acked) as soon as the inode's window has room for it, in order: the
 * first that does not fit stops the acks after it (backpressure; the
 * caller waits). An answered write is sent down when fewer than
 * performance.write-behind-max-out are out and no write before it in the queue overlaps it
 * (overlapping writes reach the bricks in the order they were made); it
 * leaves the queue when its child answers. Any other call queued here is
 * wound when it reaches the head, that is once every write before it has
 * ended; entries after it wait for that.
 *
 * wb_run is the only place that decides (pick, under the lock) and acts
 * (answers, sends and winds, without it); one thread runs it per inode at
 * a time, and a completion arriving meanwhile (even synchronously, from
 * inside a send) only asks it to go round again, so it never recurses.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "core/fops-util.h"
#include "core/graph.h"
#include "wb.h"

static void wb_run(struct bfs_xl *xl, struct wb_inode *wi);

/* ---- contexts ---- */

struct wb_inode *bfs__wb_inode(struct bfs_xl *xl, struct bfs_inode *inode, bool make)
{
    struct wb_priv *p = xl->private;
    uint64_t v;
    if (bfs_inode_ctx_get(inode, xl, &v) == 0)
        return (struct wb_inode *)(uintptr_t)v;
    if (!make)
        return NULL;
    struct wb_inode *wi = calloc(1, sizeof(*wi));
    if (!wi)
        return NULL;
    wi->inode = inode;
    if (bfs_inode_ctx_set(inode, xl, (uint64_t)(uintptr_t)wi) < 0) {
        free(wi);
        return NULL;
    }
    wi->next = p->inodes.next;
    wi->prev = &p->inodes;
    p->inodes.next->prev = wi;
    p->inodes.next = wi;
    return wi;
}

void bfs__wb_free_inode(struct wb_priv *p, struct wb_inode *wi)
{
    wi->prev->next = wi->next;
    wi->next->prev = wi->prev;
    (void)p;
    free(wi);
}

struct wb_fd *bfs__wb_fd(struct bfs_xl *xl, struct bfs_fd *fd, bool make)
{
    uint64_t v;
    if (bfs_fd_ctx_get(fd, xl, &v) == 0)
        return (struct wb_fd *)(uintptr_t)v;
    if (!make)
        return NULL;
    struct wb_fd *wf = calloc(1, sizeof(*wf));
    if (wf && bfs_fd_ctx_set(fd, xl, (uint64_t)(uintptr_t)wf) < 0) {
        free(wf);
        wf = NULL;
    }
    return wf;
}

static int sync_err(struct bfs_xl *xl, struct bfs_fd *fd, bool clear)
{
    struct wb_priv *p = xl->private;
    int err = 0;
    pthread_mutex_lock(&p->lock);
    struct wb_fd *wf = fd ? bfs__wb_fd(xl, fd, false) : NULL;
    struct wb_inode *wi = fd && fd->inode ? bfs__wb_inode(xl, fd->inode, false) : NULL;
    if (wf && wf->err_sync)
        err = wf->err_sync;
    else if (wi && wi->err)
        err = wi->err;
    if (clear && wf)
        wf->err_sync = 0;
    if (clear && wi)
        wi->err = 0;
    if (clear && err)
        p->reported++;
    pthread_mutex_unlock(&p->lock);
    return err;
}

int bfs__wb_peek_sync_err(struct bfs_xl *xl, struct bfs_fd *fd)
{
    return sync_err(xl, fd, false);
}

int bfs__wb_take_sync_err(struct bfs_xl *xl, struct bfs_fd *fd)
{
    return sync_err(xl, fd, true);
}

/* ---- entries ---- */

static void req_free(struct wb_req *e)
{
    if (e->req) {
        bfs_fop_info[e->fop].req_clear_dup(e->req);
        free(e->req);
    }
    bfs_stack_unref(e->stack);
    free(e);
}

static void req_put(struct wb_req *e)
{
    if (__atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) == 0)
        req_free(e);
}

static struct wb_req *req_new(struct bfs_frame *frame, int fop, const void *req)
{
    struct wb_req *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->fop = fop;
    e->frame = frame;
    e->refs = 1;
    if (!(e->req = malloc(bfs_fop_info[fop].req_size)) ||
        bfs_fop_info[fop].req_copy_into(e->req, req) < 0) {
        free(e->req);
        free(e);
        return NULL;
    }
    e->stack = bfs_stack_ref(frame->stack);
    return e;
}

static void append(struct wb_priv *p, struct wb_inode *wi, struct wb_req *e)
{
    e->wi = wi;
    if (wi->tail)
        wi->tail->next = e;
    else
        wi->head = e;
    wi->tail = e;
    p->nqueued++;
}

static void unlink_req(struct wb_priv *p, struct wb_inode *wi, struct wb_req *e)
{
    struct wb_req *prev = NULL;
    for (struct wb_req *x = wi->head; x && x != e; x = x->next)
        prev = x;
    if (prev)
        prev->next = e->next;
    else
        wi->head = e->next;
    if (wi->tail == e)
        wi->tail = prev;
    e->next = NULL;
    if (--p->nqueued == 0)
        pthread_cond_broadcast(&p->idle);
}

/* ---- writes ---- */

/* A later write continuing the queue's last one, answered and not sent:
 * appended to it (its payload grows up to WB_AGGREGATE). */
static bool merge(struct wb_priv *p, struct wb_inode *wi, struct bfs_frame *frame,
                  const struct bfs_write_req *req)
{
    struct wb_req *t = wi->tail;
    size_t len = req->data.len;
    if (!t || !t->behind || !t->acked || t->state != WB_QUEUED || t->end != req->offset ||
        t->end - t->off + len > WB_AGGREGATE || wi->used + len > p->window ||
        ((struct bfs_write_req *)t->req)->fd != req->fd || t->stack->uid != frame->stack->uid ||
        t->stack->gid != frame->stack->gid)
        return false;
    struct bfs_write_req *w = t->req;
    size_t need = w->data.len + len;
    if (need > t->cap) {
        size_t cap = t->cap * 2 > need ? t->cap * 2 : need;
        if (cap > WB_AGGREGATE)
            cap = WB_AGGREGATE;
        void *d = realloc((void *)w->data.data, cap);
        if (!d)
            return false;
        w->data.data = d;
        t->cap = cap;
    }
    memcpy((char *)w->data.data + w->data.len, req->data.data, len);
    w->data.len = need;
    t->end += len;
    wi->used += len;
    p->used += len;
    p->behind++;
    p->behind_bytes += len;
    p->merged++;
    return true;
}

static void send_one(struct bfs_xl *xl, struct wb_req *e);

/* Write e (of len bytes) enters the window: answered. wb_priv.lock held. */
static void admit(struct wb_priv *p, struct wb_inode *wi, struct wb_req *e, uint64_t len)
{
    e->acked = true;
    wi->used += len;
    p->used += len;
    if (p->used > p->used_max)
        p->used_max = p->used;
    p->behind++;
    p->behind_bytes += len;
}

/* Write e goes out. wb_priv.lock held. */
static void mark_sent(struct wb_priv *p, struct wb_inode *wi, struct wb_req *e)
{
    e->state = WB_SENT;
    wi->nsent++;
    if (wi->nsent > p->sent_max)
        p->sent_max = wi->nsent;
}

/*
 * Whether write e, not queued yet, can be answered and sent at once by
 * the caller's thread, as wb_run would: everything queued is an answered
 * write already out (nothing e would pass), one more may go out, the window
 * has room and e overlaps none of them. If so e is queued, answered and
 * sent (lent). wb_priv.lock held.
 */
static bool take_now(struct wb_priv *p, struct wb_inode *wi, struct wb_req *e)
{
    uint64_t len = e->end - e->off;
    if (len < WB_LEND_MIN || wi->nsent >= p->max_out ||
        (wi->used > 0 && wi->used + len > p->window))
        return false;
    for (const struct wb_req *x = wi->head; x; x = x->next)
        if (!x->behind || !x->acked || x->state != WB_SENT || (x->off < e->end && e->off < x->end))
            return false;
    append(p, wi, e);
    admit(p, wi, e, len);
    mark_sent(p, wi, e);
    e->lent = true;
    e->frame = NULL; /* answered by bfs__wb_write, after the send */
    p->lent++;
    return true;
}

/*
 * A write that goes behind. When it can be sent at once it is sent from
 * the caller's bytes — theirs until this call returns (runtime.md), and
 * every translator below that keeps them copies them (disperse encodes
 * whole stripes before its wind returns, protocol/client copies what the
 * socket did not take) — and answered after the send: one 1 MiB copy (and
 * its cache misses) less per MiB. Otherwise we copy the payload, answer
 * at once (or when the window has room) and send it later.
 */
int bfs__wb_write(struct bfs_xl *xl, struct bfs_frame *frame, const struct bfs_write_req *req)
{
    struct wb_priv *p = xl->private;
    struct bfs_inode *inode = req->fd->inode;
    size_t len = req->data.len;
    pthread_mutex_lock(&p->lock);
    struct wb_fd *wf = bfs__wb_fd(xl, req->fd, true);
    struct wb_inode *wi = wf ? bfs__wb_inode(xl, inode, true) : NULL;
    int err = !wi ? -ENOMEM : wf->err_write;
    if (err == 0 && merge(p, wi, frame, req)) {
        pthread_mutex_unlock(&p->lock);
        struct bfs_write_rep rep = {0};
        bfs_unwind_write(frame, (int)len, &rep);
        return 0;
    }
    if (wf && wf->err_write) {
        wf->err_write = 0;
        p->reported++;
    }
    pthread_mutex_unlock(&p->lock);
    if (err)
        return err; /* an earlier write of this fd failed after we answered it */
    struct bfs_write_req shallow = *req;
    shallow.data = (struct bfs_bytes){NULL, 0}; /* the payload: below */
    struct wb_req *e = req_new(frame, BFS_FOP_WRITE, &shallow);
    if (!e)
        return -ENOMEM;
    e->behind = true;
    e->off = req->offset;
    e->end = req->offset + len;
    e->cap = len;
    struct bfs_write_req *w = e->req;
    w->data = req->data; /* the caller's, while we decide */
    pthread_mutex_lock(&p->lock);
    bool now = take_now(p, wi, e);
    pthread_mutex_unlock(&p->lock);
    if (now) {
        send_one(xl, e); /* lets go of the caller's bytes before it returns */
        struct bfs_write_rep rep = {0};
        bfs_unwind_write(frame, (int)len, &rep);
        return 0;
    }
    /* Our own copy of the payload: the caller's buffer is reused once we answer. */
    void *copy = len ? malloc(len) : NULL;
    w->data.data = copy;
    if (len && !copy) {
        req_free(e);
        return -ENOMEM;
    }
    if (len)
        memcpy(copy, req->data.data, len);
    pthread_mutex_lock(&p->lock);
    append(p, wi, e);
    p->copied++;
    pthread_mutex_unlock(&p->lock);
    wb_run(xl, wi);
    return 0;
}

struct wb_task {
    struct bfs_xl *xl;
    struct wb_inode *wi;
    struct bfs_inode *inode; /* ref'd: wi lives until the task ran */
};

static void run_task(void *arg)
{
    struct wb_task *t = arg;
    wb_run(t->xl, t->wi);
    bfs_inode_unref(t->inode);
    free(t);
}

/* Whether running the queue now could push a write's payload into the
 * sockets: a write not sent yet, behind or not. wb_priv.lock held. */
static bool payload_waits(const struct wb_inode *wi)
{
    for (const struct wb_req *e = wi->head; e; e = e->next)
        if (e->fop == BFS_FOP_WRITE && (!e->behind || e->state == WB_QUEUED))
            return true;
    return false;
}

/* After a completion, on the loop thread: what goes next (the next write's
 * payload into the sockets of every brick) is sent from a worker, so the
 * loop stays free to read the bricks' answers, as when the writers' own
 * threads sent their writes. Anything else (nothing left, or a flush,
 * fsync or stat that waited for the writes) runs here: a worker's wake-up
 * is the dearest step of a small file's close on a virtual machine
 * (performance note 35). Inline when there is no pool. Drops inode. */
static void run_elsewhere(struct bfs_xl *xl, struct wb_inode *wi, struct bfs_inode *inode)
{
    struct bfs_proc *proc = xl->graph ? xl->graph->proc : NULL;
    struct wb_priv *p = xl->private;
    struct wb_task *t = NULL;
    bool payload = false;
    if (proc && proc->workers && proc->loop && bfs_loop_on_loop_thread(proc->loop)) {
        pthread_mutex_lock(&p->lock);
        payload = payload_waits(wi);
        pthread_mutex_unlock(&p->lock);
    }
    if (payload && (t = malloc(sizeof(*t)))) {
        *t = (struct wb_task){.xl = xl, .wi = wi, .inode = inode};
        if (bfs_workers_submit(proc->workers, run_task, t) == 0)
            return;
        free(t);
    }
    wb_run(xl, wi);
    bfs_inode_unref(inode);
}

static void complete(struct bfs_xl *xl, struct wb_req *e, int rc)
{
    struct wb_priv *p = xl->private;
    struct wb_inode *wi = e->wi;
    struct bfs_write_req *w = e->req;
    uint64_t len = e->end - e->off;
    if (rc > 0 && (uint64_t)rc < len)
        rc = -EIO; /* a short write: the rest was dropped */
    pthread_mutex_lock(&p->lock);
    unlink_req(p, wi, e);
    wi->used -= len;
    p->used -= len;
    wi->nsent--;
    wi->done_seq = ++p->seq;
    if (rc < 0) {
        struct wb_fd *wf = bfs__wb_fd(xl, w->fd, false);
        if (wf && !wf->err_write)
            wf->err_write = rc;
        if (wf && !wf->err_sync)
            wf->err_sync = rc;
        if (!wi->err)
            wi->err = rc;
        p->failed++;
    }
    struct bfs_inode *inode = bfs_inode_ref(wi->inode);
    pthread_mutex_unlock(&p->lock);
    if (rc < 0) {
        char g[BFS_GFID_STRLEN];
        bfs_log(xl->name, BFS_LOG_WARNING, "write of %llu bytes at %llu of %s, answered "
                "earlier, failed: %s; the next write, fsync or close of the file reports it",
                (unsigned long long)len, (unsigned long long)e->off,
                bfs_gfid_fmt(&inode->gfid, g), strerror(-rc));
    }
    req_put(e);
    run_elsewhere(xl, wi, inode);
}

static void bg_cbk(struct bfs_frame *frame, void *cookie, int rc, const struct bfs_write_rep *rep)
{
    (void)rep;
    struct wb_req *e = cookie;
    complete(frame->top_arg, e, rc);
    bfs_frame_top_free(frame);
}

static void send_one(struct bfs_xl *xl, struct wb_req *e)
{
    struct bfs_frame *f = bfs_frame_top_new(e->stack, xl);
    __atomic_add_fetch(&e->refs, 1, __ATOMIC_RELAXED);
    int rc = f ? bfs_wind_write(f, FIRST_CHILD(xl), bg_cbk, e, e->req) : -ENOMEM;
    if (rc < 0) {
        if (f)
            bfs_frame_top_free(f);
        complete(xl, e, rc);
    }
    if (e->lent) /* the caller's bytes: not ours once the wind returned */
        ((struct bfs_write_req *)e->req)->data = (struct bfs_bytes){NULL, 0};
    req_put(e); /* the payload may go now (see struct wb_req) */
}

/* ---- other calls ---- */

int bfs__wb_wait(struct bfs_xl *xl, struct bfs_inode *inode, struct bfs_frame *frame, int fop,
                 const void *req, int stage)
{
    struct wb_priv *p = xl->private;
    pthread_mutex_lock(&p->lock);
    struct wb_inode *wi = bfs__wb_inode(xl, inode, false);
    bool wait = wi && wi->head;
    pthread_mutex_unlock(&p->lock);
    if (!wait)
        return 0;
    struct wb_req *e = req_new(frame, fop, req);
    if (!e)
        return -ENOMEM;
    e->stage = stage;
    pthread_mutex_lock(&p->lock);
    wait = wi->head != NULL; /* wi lives: the caller's request holds the inode */
    if (wait) {
        append(p, wi, e);
        p->waited_fops++;
    }
    pthread_mutex_unlock(&p->lock);
    if (!wait) {
        req_free(e);
        return 0;
    }
    wb_run(xl, wi);
    return 1;
}

static void release_one(struct bfs_xl *xl, struct wb_req *e)
{
    int rc = bfs__wb_go(xl, e->frame, e->fop, e->req, e->stage);
    if (rc < 0) {
        void *rep = calloc(1, bfs_fop_info[e->fop].rep_size);
        if (rep) {
            bfs_unwind_any(e->fop, e->frame, rc, rep);
            free(rep);
        } else {
            bfs_log(xl->name, BFS_LOG_ERROR, "out of memory answering a %s",
                    bfs_fop_name(e->fop));
        }
    }
    req_free(e);
}

/* ---- the runner ---- */

static bool overlaps_earlier(const struct wb_inode *wi, const struct wb_req *e)
{
    for (const struct wb_req *x = wi->head; x && x != e; x = x->next)
        if (x->behind && x->off < e->end && e->off < x->end)
            return true;
    return false;
}

struct wb_act {
    struct wb_req *e;
    struct bfs_frame *ack; /* answer this write with ack_len */
    size_t ack_len;
    bool send, release;
};

/* Decides, under the lock, what can go now. Fills acts (at most n). */
static size_t pick(struct wb_priv *p, struct wb_inode *wi, struct wb_act *acts, size_t n)
{
    size_t k = 0;
    for (struct wb_req *e = wi->head, *next; e && k < n; e = next) {
        next = e->next;
        if (!e->behind) {
            if (e != wi->head)
                break; /* waits for the writes before it */
            unlink_req(p, wi, e);
            acts[k++] = (struct wb_act){.e = e, .release = true};
            continue;
        }
        struct wb_act a = {.e = e};
        if (!e->acked) {
            uint64_t len = e->end - e->off;
            if (wi->used > 0 && wi->used + len > p->window) {
                if (!e->waited)
                    p->waited_window++;
                e->waited = true;
                break; /* the window is full: this caller and those after it wait */
            }
            admit(p, wi, e, len);
            a.ack = e->frame;
            a.ack_len = len;
            e->frame = NULL;
        }
        if (e->state == WB_QUEUED && wi->nsent < p->max_out && !overlaps_earlier(wi, e)) {
            mark_sent(p, wi, e);
            a.send = true;
        }
        if (a.ack || a.send)
            acts[k++] = a;
    }
    return k;
}

static void act(struct bfs_xl *xl, struct wb_act *acts, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        struct wb_act *a = &acts[i];
        if (a->ack) {
            struct bfs_write_rep rep = {0};
            bfs_unwind_write(a->ack, (int)a->ack_len, &rep);
        }
        if (a->send)
            send_one(xl, a->e); /* a->e may be gone when this returns */
        if (a->release)
            release_one(xl, a->e);
    }
}

static void wb_run(struct bfs_xl *xl, struct wb_inode *wi)
{
    struct wb_priv *p = xl->private;
    struct wb_act acts[32];
    pthread_mutex_lock(&p->lock);
    if (wi->running) {
        wi->again = true;
        pthread_mutex_unlock(&p->lock);
        return;
    }
    wi->running = true;
    struct bfs_inode *inode = bfs_inode_ref(wi->inode); /* wi lives while we run */
    do {
        wi->again = false;
        size_t k = pick(p, wi, acts, sizeof(acts) / sizeof(acts[0]));
        if (k == sizeof(acts) / sizeof(acts[0]))
            wi->again = true; /* more than one batch */
        pthread_mutex_unlock(&p->lock);
        act(xl, acts, k);
        pthread_mutex_lock(&p->lock);
    } while (wi->again);
    wi->running = false;
    pthread_mutex_unlock(&p->lock);
    bfs_inode_unref(inode);
}
