/*
 * client-fop.c — one generic path for every fop: encode the caller's
 * identity and the request (bfs_fop_info[fop].enc_req), send it as a CALL,
 * and when its REPLY comes back decode it (dec_rep) and unwind.
 *
 * The error contract: a fop that cannot be sent (not connected, encoding
 * failed) returns -errno and its callback never runs; once sent, the
 * callback runs exactly once — with the brick's answer, or with ENOTCONN
 * when the connection ends first (cli_on_close).
 *
 * flush without a round trip: close(2) sends flush so that features/locks
 * on the brick drops the closing owner's POSIX locks (nothing else on a
 * brick acts on it: storage/posix buffers nothing). When no lk has ever
 * gone out through this client for the file, the brick holds no lock of
 * ours on it, and the flush is answered here (flush_is_noop). Every lk
 * marks the inode (context CLI_INODE_LOCKED) before it is sent, so a flush
 * that starts after a lock request always goes to the brick. A flush with
 * xdata (a translator above talking to the brick) is always sent.
 *
 * A big write (CLI_GATHER_MIN and more) is not copied into the encoded
 * body: the body is encoded around an empty payload and sent as three
 * pieces (before, the caller's bytes, after), which bfs_conn_send writes
 * without a copy when the socket takes them at once (write_gathered). That
 * relies on the wire layout of a write request (fd, then the payload as
 * u32 length and bytes); gather_layout_ok() checks it once against the
 * generated encoder and falls back to copying if it ever changes.
 *
 * Small files read with their open (client-prefetch.c): an O_RDONLY open
 * asks the brick for the file's bytes, and reads inside them are answered
 * here (cli_pf_read) while no change of file data went through us since.
 *
 * fds travel as ids (the codec asks cli_fd_to_id). An fd we opened carries
 * a struct cli_fd in its context; a fop that opens one (open, create,
 * opendir) gets a fresh id when it is encoded, and the context is attached
 * only when the brick says yes, before the caller's callback runs. Granted
 * POSIX locks (lk SETLK/SETLKW, including unlocks) are recorded on the
 * cli_fd so that a reconnect can take them again (client-reopen.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

#include "core/fops-util.h"
#include "rpc/proto.h"

static struct cli_fd *fd_ctx(struct cli_priv *priv, struct bfs_fd *fd)
{
    uint64_t v;
    if (bfs_fd_ctx_get(fd, priv->xl, &v) < 0)
        return NULL;
    return (struct cli_fd *)(uintptr_t)v;
}

static int cli_fd_to_id(void *arg, struct bfs_fd *fd, uint64_t *id)
{
    struct cli_call *call = arg;
    struct cli_priv *priv = call->priv;
    if (!fd)
        return -EBADF;
    if (bfs_fop_info[call->fop].opens_fd) {
        if (call->newfd || fd_ctx(priv, fd))
            return -EBADFD; /* already open through this brick */
        struct cli_fd *cf = calloc(1, sizeof(*cf));
        if (!cf)
            return -ENOMEM;
        cf->fd = fd;
        cf->refs = 1;
        cf->is_dir = call->fop == BFS_FOP_OPENDIR;
        pthread_mutex_lock(&priv->lock);
        cf->id = priv->next_fd_id++;
        pthread_mutex_unlock(&priv->lock);
        call->newfd = cf;
        *id = cf->id;
        return 0;
    }
    struct cli_fd *cf = fd_ctx(priv, fd);
    if (!cf)
        return -EBADF; /* not opened through this brick */
    pthread_mutex_lock(&priv->lock);
    int rc = cf->lost ? -EBADFD : cf->open_remote ? 0 : -ENOTCONN;
    *id = cf->id;
    pthread_mutex_unlock(&priv->lock);
    if (rc == 0 && !call->cfd)
        call->cfd = cf;
    return rc;
}

static int cli_id_to_fd(void *arg, uint64_t id, int is_new, struct bfs_fd **out)
{
    (void)arg;
    (void)id;
    (void)is_new;
    (void)out;
    return -EINVAL; /* replies carry no fds */
}

/* What a re-open of the new fd needs, from the request. */
static int newfd_note(struct cli_call *call, const void *req)
{
    struct cli_fd *cf = call->newfd;
    const struct bfs_loc *loc = NULL;
    switch (call->fop) {
    case BFS_FOP_OPEN:
        loc = &((const struct bfs_open_req *)req)->loc;
        cf->flags = ((const struct bfs_open_req *)req)->flags;
        break;
    case BFS_FOP_CREATE:
        loc = &((const struct bfs_create_req *)req)->loc;
        cf->flags = ((const struct bfs_create_req *)req)->flags;
        break;
    case BFS_FOP_OPENDIR:
        loc = &((const struct bfs_opendir_req *)req)->loc;
        break;
    }
    /* a re-open must neither create nor truncate */
    cf->flags &= ~(uint32_t)(O_CREAT | O_EXCL | O_TRUNC);
    if (!loc)
        return 0;
    cf->gfid = loc->gfid;
    cf->pargfid = loc->pargfid;
    if (bfs_gfid_is_null(&cf->gfid) && loc->name && !(cf->name = strdup(loc->name)))
        return -ENOMEM;
    return 0;
}

#define CLI_INODE_LOCKED 1u

/* Marks the file as locked through us, before the lk is sent. 0 / -errno:
 * without the mark, a later flush would skip the brick. */
static int lk_mark_inode(struct cli_priv *priv, const struct bfs_lk_req *q)
{
    if (!q->fd || !q->fd->inode)
        return 0; /* no inode to find again: flush_is_noop never skips then */
    return bfs_inode_ctx_set(q->fd->inode, priv->xl, CLI_INODE_LOCKED);
}

/* Whether a flush can be answered without asking the brick (see the top). */
static bool flush_is_noop(struct cli_priv *priv, const struct bfs_flush_req *q)
{
    uint64_t v = 0;
    if (q->xdata || !q->fd || !q->fd->inode)
        return false;
    if (bfs_inode_ctx_get(q->fd->inode, priv->xl, &v) == 0 && (v & CLI_INODE_LOCKED))
        return false;
    struct cli_fd *cf = fd_ctx(priv, q->fd);
    if (!cf)
        return false; /* not ours: let the usual path answer EBADF */
    pthread_mutex_lock(&priv->lock);
    bool noop = priv->state == CLI_UP && cf->open_remote && !cf->lost && !cf->locks;
    pthread_mutex_unlock(&priv->lock);
    return noop;
}

static void lk_note(struct cli_call *call, const void *req)
{
    const struct bfs_lk_req *q = req;
    /* as features/locks does: the lock's owner, else the caller's */
    uint64_t owner = q->lock.owner ? q->lock.owner : call->frame->stack->lk_owner;
    uint32_t base = q->cmd & ~(uint32_t)BFS_LK_FLOCK;
    if (base != BFS_LK_SETLK && base != BFS_LK_SETLKW)
        return;
    call->lk_record = true;
    call->lk = (struct cli_lock){.owner = owner, .pid = q->lock.pid,
                                 .type = q->lock.type, .start = q->lock.start,
                                 .flock = (q->cmd & BFS_LK_FLOCK) != 0};
    call->lk_len = q->lock.len;
}

/* ---- big writes without a copy of the payload ---- */

#define CLI_GATHER_MIN (64u * 1024)
#define CLI_FD_WIRE_LEN 8 /* an fd id: u64 */

static int gather_fd_to_id(void *arg, struct bfs_fd *fd, uint64_t *id)
{
    (void)arg;
    (void)fd;
    *id = 0x1122334455667788ull;
    return 0;
}

static bool gather_ok;
static pthread_once_t gather_once = PTHREAD_ONCE_INIT;

/* Encodes a sample write both ways and compares the bytes. */
static void gather_check(void)
{
    const struct bfs_codec_fds fds = {.fd_to_id = gather_fd_to_id};
    struct bfs_write_req q = {.fd = (struct bfs_fd *)&fds, .data = {"abc", 3}, .offset = 5,
                              .flags = 7};
    struct bfs_wbuf a, b;
    bfs_wbuf_init(&a);
    bfs_wbuf_init(&b);
    int rc = bfs_fop_info[BFS_FOP_WRITE].enc_req(&a, &q, &fds);
    q.data = (struct bfs_bytes){"", 0};
    if (rc == 0)
        rc = bfs_fop_info[BFS_FOP_WRITE].enc_req(&b, &q, &fds);
    if (rc == 0 && b.len >= CLI_FD_WIRE_LEN + 4 && a.len == b.len + 3) {
        struct iovec iov[3];
        struct bfs_bytes payload = {"abc", 3};
        bfs_wbuf_gather_bytes(&b, CLI_FD_WIRE_LEN, &payload, iov);
        size_t off = 0;
        bool same = true;
        for (int i = 0; i < 3 && same; i++) {
            same = memcmp(a.p + off, iov[i].iov_base, iov[i].iov_len) == 0;
            off += iov[i].iov_len;
        }
        gather_ok = same && off == a.len;
    }
    bfs_wbuf_free(&a);
    bfs_wbuf_free(&b);
}

static bool gather_layout_ok(void)
{
    pthread_once(&gather_once, gather_check);
    return gather_ok;
}

/* Encodes write q (after the stack already in w) around an empty payload
 * and submits the three pieces. rc as cli_submit; w stays the caller's. */
static int write_gathered(struct cli_priv *priv, struct cli_call *call, struct bfs_wbuf *w,
                          const struct bfs_write_req *q, const struct bfs_codec_fds *f)
{
    size_t at = w->len + CLI_FD_WIRE_LEN;
    struct bfs_write_req empty = *q;
    empty.data = (struct bfs_bytes){"", 0};
    int rc = bfs_fop_info[BFS_FOP_WRITE].enc_req(w, &empty, f);
    if (rc < 0)
        return rc;
    if (q->data.len > BFS_WIRE_MAX_BODY - w->len)
        return -EMSGSIZE;
    struct iovec iov[3];
    bfs_wbuf_gather_bytes(w, at, &q->data, iov);
    return cli_submit_iov(priv, call, iov, 3, true);
}

int cli_generic_fop(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req)
{
    struct cli_priv *priv = xl->private;
    const struct bfs_codec_fds fds = {.fd_to_id = cli_fd_to_id, .id_to_fd = cli_id_to_fd};
    pthread_mutex_lock(&priv->lock);
    bool up = priv->state == CLI_UP;
    pthread_mutex_unlock(&priv->lock);
    if (!up)
        return -ENOTCONN;
    if (fop == BFS_FOP_FLUSH && flush_is_noop(priv, req)) {
        bfs_unwind_flush(frame, 0, NULL);
        return 0;
    }
    if (fop == BFS_FOP_LK) {
        int rc = lk_mark_inode(priv, req);
        if (rc < 0)
            return rc;
    }
    if (fop == BFS_FOP_READ) {
        struct cli_fd *cf = ((const struct bfs_read_req *)req)->fd
                                ? fd_ctx(priv, ((const struct bfs_read_req *)req)->fd)
                                : NULL;
        if (cf && cli_pf_read(priv, cf, frame, req))
            return 0;
    }
    if (cli_pf_changes_data(fop))
        cli_pf_bump(priv); /* and again when answered: client-prefetch.c */

    struct cli_call *call = calloc(1, sizeof(*call));
    if (!call)
        return -ENOMEM;
    *call = (struct cli_call){.priv = priv, .kind = CALL_FOP, .fop = fop, .frame = frame};
    struct bfs_codec_fds f = fds;
    f.arg = call;
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    bfs_put_stack(&w, frame->stack);
    if (fop == BFS_FOP_WRITE && !w.err &&
        ((const struct bfs_write_req *)req)->data.len >= CLI_GATHER_MIN && gather_layout_ok()) {
        int rc = write_gathered(priv, call, &w, req, &f);
        bfs_wbuf_free(&w);
        if (rc < 0)
            free(call);
        return rc;
    }
    struct bfs_open_req pf_req;
    bool pf = fop == BFS_FOP_OPEN && !w.err && cli_pf_open_req(priv, call, req, &pf_req);
    int rc = w.err ? w.err : bfs_fop_info[fop].enc_req(&w, pf ? &pf_req : req, &f);
    if (pf)
        bfs_dict_unref(pf_req.xdata);
    if (rc == 0 && call->newfd)
        rc = newfd_note(call, req);
    if (rc == 0 && fop == BFS_FOP_LK)
        lk_note(call, req);
    if (rc == 0) {
        size_t len;
        void *body = bfs_wbuf_take(&w, &len);
        rc = cli_submit(priv, call, body, len, true);
        if (rc == 0)
            return 0;
    }
    bfs_wbuf_free(&w);
    if (call->newfd)
        cli_fd_free(call->newfd);
    free(call);
    return rc;
}

/* The brick opened the new fd: attach our context. 0 or -errno. */
static int newfd_attach(struct cli_priv *priv, struct cli_call *call, const void *rep)
{
    struct cli_fd *cf = call->newfd;
    call->newfd = NULL;
    const struct bfs_iatt *attr = NULL;
    if (call->fop == BFS_FOP_OPEN)
        attr = &((const struct bfs_open_rep *)rep)->attr;
    else if (call->fop == BFS_FOP_CREATE)
        attr = &((const struct bfs_create_rep *)rep)->attr;
    if (bfs_gfid_is_null(&cf->gfid) && attr && !bfs_gfid_is_null(&attr->gfid)) {
        cf->gfid = attr->gfid;
        free(cf->name);
        cf->name = NULL;
    }
    int rc = bfs_fd_ctx_set(cf->fd, priv->xl, (uint64_t)(uintptr_t)cf);
    if (rc < 0) {
        XL_ERR(priv->xl, "cannot attach context to a new fd: %s", strerror(-rc));
        cli_fd_free(cf); /* the brick keeps it open until the connection ends */
        return -EIO;
    }
    pthread_mutex_lock(&priv->lock);
    cf->open_remote = true;
    cf->next = priv->fds;
    if (priv->fds)
        priv->fds->prev = cf;
    priv->fds = cf;
    pthread_mutex_unlock(&priv->lock);
    return 0;
}

void cli_fop_reply(struct cli_priv *priv, struct bfs_conn *c, struct cli_call *call,
                   const struct bfs_wire_hdr *h, void *body, size_t len)
{
    const struct bfs_fop_info *fi = &bfs_fop_info[call->fop];
    void *rep = calloc(1, fi->rep_size);
    int rc = h->status;
    if (!rep) {
        rc = -ENOMEM;
    } else if (len > 0 || rc >= 0) {
        struct bfs_rbuf rd;
        bfs_rbuf_init(&rd, body, len);
        int drc = bfs_proto_dec_end(&rd, fi->dec_rep(&rd, rep));
        if (drc < 0) {
            XL_ERR(priv->xl, "brick at %s:%u sent a malformed %s reply: %s; closing",
                   priv->host, priv->port, fi->name, strerror(-drc));
            fi->rep_clear_decoded(rep);
            memset(rep, 0, fi->rep_size);
            rc = -EIO;
            bfs_conn_close(c, -EPROTO);
        }
    }
    struct cli_fd *opened = call->newfd;
    if (call->newfd) {
        if (rc >= 0 && rep)
            rc = newfd_attach(priv, call, rep);
        else
            cli_fd_free(call->newfd);
        call->newfd = NULL;
    }
    if (call->pf && rep)
        cli_pf_open_reply(priv, call, rc >= 0 ? opened : NULL, rep);
    if (cli_pf_changes_data(call->fop))
        cli_pf_bump(priv);
    if (rc >= 0 && call->lk_record && call->cfd) {
        pthread_mutex_lock(&priv->lock);
        int err = cli_lock_apply(call->cfd, &call->lk, call->lk_len);
        pthread_mutex_unlock(&priv->lock);
        if (err < 0)
            XL_WARN(priv->xl, "out of memory recording a lock: it will not survive a reconnect");
    }
    bfs_unwind_any(call->fop, call->frame, rc, rep);
    if (rep)
        fi->rep_clear_decoded(rep);
    free(rep);
    free(body);
    free(call);
}

void cli_call_fail(struct cli_priv *priv, struct cli_call *call, int rc)
{
    switch (call->kind) {
    case CALL_FOP:
        if (call->newfd)
            cli_fd_free(call->newfd);
        if (cli_pf_changes_data(call->fop))
            cli_pf_bump(priv); /* it may have been done all the same */
        bfs_unwind_any(call->fop, call->frame, rc, NULL);
        break;
    case CALL_SETVOLUME:
        break;
    case CALL_REOPEN:
    case CALL_RELOCK:
        pthread_mutex_lock(&priv->lock);
        cli_fd_unref(priv, call->cfd);
        pthread_mutex_unlock(&priv->lock);
        break;
    }
    free(call);
}
