/*
 * client-reopen.c — protocol/client's fds across connections: their
 * context (struct cli_fd), release, the POSIX locks held through them, and
 * the re-open and re-lock after a reconnect.
 *
 * After a successful handshake (state REOPENING) every fd that is still
 * ours is opened again on the brick, by gfid (by parent gfid and name if
 * that is all we ever knew), under the same fd id, without O_CREAT,
 * O_EXCL or O_TRUNC, as root (the caller's credentials were checked when
 * the fd was first opened). Then every POSIX lock recorded on it is taken
 * again with a non-blocking SETLK under its original owner and pid. When
 * the last of these answers arrives the connection is UP and parents hear
 * CHILD_UP. What cannot be restored is logged: an fd whose re-open fails
 * is "lost" (its fops fail with EBADFD until it is released), and a lock
 * that another client took meanwhile is dropped from the record.
 *
 * Lock records follow fcntl semantics per owner: a granted lock or unlock
 * of [start, end] first removes that range from the owner's records
 * (trimming or splitting them), then a lock adds it. Records of one owner
 * never overlap, so a re-lock takes exactly what was held.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

#include "rpc/proto.h"

void cli_fd_free(struct cli_fd *cf)
{
    struct cli_lock *l = cf->locks, *next;
    for (; l; l = next) {
        next = l->next;
        free(l);
    }
    free(cf->name);
    free(cf->pf_data);
    free(cf);
}

void cli_fd_unref(struct cli_priv *priv, struct cli_fd *cf)
{
    (void)priv;
    if (--cf->refs == 0)
        cli_fd_free(cf);
}

static void fd_unlink(struct cli_priv *priv, struct cli_fd *cf)
{
    if (cf->released)
        return;
    cf->released = true;
    if (cf->prev)
        cf->prev->next = cf->next;
    else
        priv->fds = cf->next;
    if (cf->next)
        cf->next->prev = cf->prev;
    cf->prev = cf->next = NULL;
}

/* ---- locks ---- */

int cli_lock_apply(struct cli_fd *cf, const struct cli_lock *lk, uint64_t len)
{
    uint64_t start = lk->start;
    uint64_t end = (len == 0 || len - 1 > UINT64_MAX - start) ? UINT64_MAX : start + len - 1;
    struct cli_lock *spare = malloc(sizeof(*spare));
    struct cli_lock *add = lk->type != F_UNLCK ? malloc(sizeof(*add)) : NULL;
    if (!spare || (lk->type != F_UNLCK && !add)) {
        free(spare);
        free(add);
        return -ENOMEM;
    }
    for (struct cli_lock **pp = &cf->locks; *pp;) {
        struct cli_lock *l = *pp;
        if (l->owner != lk->owner || l->flock != lk->flock || l->end < start || l->start > end) {
            pp = &l->next;
        } else if (l->start < start && l->end > end) { /* inside l: split it */
            *spare = *l;
            spare->start = end + 1;
            l->end = start - 1;
            l->next = spare;
            spare = NULL;
            pp = &l->next->next;
        } else if (l->start < start) {
            l->end = start - 1;
            pp = &l->next;
        } else if (l->end > end) {
            l->start = end + 1;
            pp = &l->next;
        } else {
            *pp = l->next; /* covered entirely */
            free(l);
        }
    }
    if (add) {
        *add = *lk;
        add->start = start;
        add->end = end;
        add->next = cf->locks;
        cf->locks = add;
    }
    free(spare);
    return 0;
}

/* ---- release ---- */

static void send_release(struct bfs_conn *conn, uint64_t req_id, uint64_t fd_id, bool is_dir,
                         bool locked)
{
    uint8_t body[8];
    bfs_le64_put(body, fd_id);
    struct bfs_wire_hdr h = {.type = BFS_WIRE_CALL, .id = req_id,
                             .proc = is_dir ? BFS_PROC_RELEASEDIR : BFS_PROC_RELEASE};
    struct iovec iov = {body, sizeof(body)};
    /* The answer is not awaited. Unless the fd holds locks (flock locks
     * go with it, and someone may wait for them), nothing waits for the
     * brick to act on it either: it leaves with the next request, or
     * after TCP's cork limit (200 ms) when none comes, and the brick reads
     * both with one wake-up instead of one each for every file opened. */
    if (locked)
        (void)bfs_conn_send(conn, &h, &iov, 1);
    else
        (void)bfs_conn_send_more(conn, &h, &iov, 1);
}

void cli_release(struct bfs_xl *xl, struct bfs_fd *fd)
{
    struct cli_priv *priv = xl->private;
    uint64_t v;
    if (!priv || bfs_fd_ctx_del(fd, xl, &v) < 0)
        return;
    struct cli_fd *cf = (struct cli_fd *)(uintptr_t)v;
    pthread_mutex_lock(&priv->lock);
    fd_unlink(priv, cf);
    cf->fd = NULL;
    bool tell = cf->open_remote && priv->conn &&
                (priv->state == CLI_UP || priv->state == CLI_REOPENING);
    struct bfs_conn *conn = tell ? bfs_conn_ref(priv->conn) : NULL;
    uint64_t req_id = ++priv->next_id, fd_id = cf->id;
    bool is_dir = cf->is_dir, locked = cf->locks != NULL;
    cf->open_remote = false;
    cli_fd_unref(priv, cf);
    pthread_mutex_unlock(&priv->lock);
    if (conn) {
        send_release(conn, req_id, fd_id, is_dir, locked);
        bfs_conn_unref(conn);
    }
}

void cli_detach_fds(struct cli_priv *priv)
{
    pthread_mutex_lock(&priv->lock);
    struct cli_fd *cf = priv->fds, *next;
    priv->fds = NULL;
    pthread_mutex_unlock(&priv->lock);
    for (; cf; cf = next) {
        next = cf->next;
        XL_WARN(priv->xl, "fd %llu still open at fini", (unsigned long long)cf->id);
        if (cf->fd)
            bfs_fd_ctx_del(cf->fd, priv->xl, NULL);
        cli_fd_free(cf);
    }
}

/* ---- re-open and re-lock ---- */

static int reopen_fd_to_id(void *arg, struct bfs_fd *fd, uint64_t *id)
{
    struct cli_call *call = arg;
    (void)fd;
    *id = call->cfd->id;
    return 0;
}

/* One re-open or re-lock answered (or not sent): UP after the last. */
static void reopen_done_one(struct cli_priv *priv)
{
    pthread_mutex_lock(&priv->lock);
    bool last = --priv->reopen_left == 0;
    pthread_mutex_unlock(&priv->lock);
    if (last)
        cli_set_up(priv);
}

/* Sends call (kind, fop, cfd set; cfd referenced) with req as root or as
 * the lock's owner. Counts it in reopen_left; on failure undoes both. */
static void send_restore(struct cli_priv *priv, struct cli_call *call, const void *req,
                         const struct bfs_stack *st)
{
    const struct bfs_codec_fds fds = {.arg = call, .fd_to_id = reopen_fd_to_id};
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    bfs_put_stack(&w, st);
    int rc = w.err ? w.err : bfs_fop_info[call->fop].enc_req(&w, req, &fds);
    pthread_mutex_lock(&priv->lock);
    priv->reopen_left++;
    pthread_mutex_unlock(&priv->lock);
    if (rc == 0) {
        size_t len;
        void *body = bfs_wbuf_take(&w, &len);
        rc = cli_submit(priv, call, body, len, false);
    }
    if (rc < 0) {
        bfs_wbuf_free(&w);
        pthread_mutex_lock(&priv->lock);
        priv->reopen_left--;
        cli_fd_unref(priv, call->cfd);
        pthread_mutex_unlock(&priv->lock);
        free(call);
    }
}

static void send_reopen(struct cli_priv *priv, struct cli_fd *cf)
{
    struct cli_call *call = calloc(1, sizeof(*call));
    struct bfs_stack *st = calloc(1, sizeof(*st)); /* root */
    if (!call || !st) {
        free(call);
        free(st);
        pthread_mutex_lock(&priv->lock);
        cf->lost = true;
        cli_fd_unref(priv, cf);
        pthread_mutex_unlock(&priv->lock);
        return;
    }
    *call = (struct cli_call){.priv = priv, .kind = CALL_REOPEN, .cfd = cf,
                              .fop = cf->is_dir ? BFS_FOP_OPENDIR : BFS_FOP_OPEN};
    struct bfs_loc loc = {.gfid = cf->gfid, .pargfid = cf->pargfid};
    if (bfs_gfid_is_null(&cf->gfid))
        loc.name = cf->name;
    if (cf->is_dir) {
        struct bfs_opendir_req q = {.loc = loc};
        send_restore(priv, call, &q, st);
    } else {
        struct bfs_open_req q = {.loc = loc, .flags = cf->flags};
        send_restore(priv, call, &q, st);
    }
    free(st);
}

static void send_relock(struct cli_priv *priv, struct cli_fd *cf, const struct cli_lock *lk)
{
    struct cli_call *call = calloc(1, sizeof(*call));
    struct bfs_stack *st = calloc(1, sizeof(*st));
    if (!call || !st) {
        free(call);
        free(st);
        XL_WARN(priv->xl, "out of memory re-taking a lock on fd %llu", (unsigned long long)cf->id);
        return;
    }
    pthread_mutex_lock(&priv->lock);
    cf->refs++;
    pthread_mutex_unlock(&priv->lock);
    uint64_t len = lk->end == UINT64_MAX ? 0 : lk->end - lk->start + 1;
    *call = (struct cli_call){.priv = priv, .kind = CALL_RELOCK, .cfd = cf, .fop = BFS_FOP_LK,
                              .lk = *lk, .lk_len = len};
    st->lk_owner = lk->owner;
    st->pid = lk->pid;
    struct bfs_lk_req q = {
        .cmd = BFS_LK_SETLK | (lk->flock ? BFS_LK_FLOCK : 0),
        .lock = {.type = lk->type, .whence = SEEK_SET, .start = lk->start, .len = len,
                 .pid = lk->pid, .owner = lk->owner},
    };
    send_restore(priv, call, &q, st);
    free(st);
}

void cli_reopen_all(struct cli_priv *priv)
{
    pthread_mutex_lock(&priv->lock);
    if (priv->state != CLI_HANDSHAKE) {
        pthread_mutex_unlock(&priv->lock);
        return;
    }
    priv->state = CLI_REOPENING;
    priv->reopen_left = 1; /* ours, dropped below: UP cannot come in the middle */
    size_t n = 0;
    for (struct cli_fd *cf = priv->fds; cf; cf = cf->next)
        n += !cf->lost;
    struct cli_fd **todo = n ? calloc(n, sizeof(*todo)) : NULL;
    size_t k = 0;
    for (struct cli_fd *cf = priv->fds; cf && todo; cf = cf->next) {
        if (!cf->lost) {
            cf->refs++;
            todo[k++] = cf;
        }
    }
    struct bfs_conn *conn = n && !todo && priv->conn ? bfs_conn_ref(priv->conn) : NULL;
    pthread_mutex_unlock(&priv->lock);
    if (conn) { /* cannot even list what to re-open: try again later */
        XL_ERR(priv->xl, "out of memory re-opening %zu fds; reconnecting", n);
        bfs_conn_close(conn, -ENOMEM);
        bfs_conn_unref(conn);
        return;
    }
    if (k)
        XL_INFO(priv->xl, "re-opening %zu fds on brick %s", k, priv->subvol);
    for (size_t i = 0; i < k; i++)
        send_reopen(priv, todo[i]);
    free(todo);
    reopen_done_one(priv);
}

/* A re-open succeeded: take its locks again (or release it if it went). */
static void reopened(struct cli_priv *priv, struct cli_fd *cf)
{
    pthread_mutex_lock(&priv->lock);
    bool gone = cf->released;
    size_t n = 0;
    for (struct cli_lock *l = cf->locks; l && !gone; l = l->next)
        n++;
    struct cli_lock *snap = n ? calloc(n, sizeof(*snap)) : NULL;
    size_t k = 0;
    for (struct cli_lock *l = cf->locks; l && snap; l = l->next)
        snap[k++] = *l;
    if (!gone) {
        cf->open_remote = true;
        cf->lost = false;
    }
    struct bfs_conn *conn = gone && priv->conn ? bfs_conn_ref(priv->conn) : NULL;
    uint64_t req_id = ++priv->next_id;
    pthread_mutex_unlock(&priv->lock);
    if (conn) { /* released while the re-open was in flight */
        send_release(conn, req_id, cf->id, cf->is_dir, true);
        bfs_conn_unref(conn);
    }
    if (n && !snap)
        XL_WARN(priv->xl, "out of memory: the locks of fd %llu are not re-taken",
                (unsigned long long)cf->id);
    for (size_t i = 0; i < k; i++)
        send_relock(priv, cf, &snap[i]);
    free(snap);
}

void cli_reopen_reply(struct cli_priv *priv, struct cli_call *call, int rc)
{
    struct cli_fd *cf = call->cfd;
    char g[BFS_GFID_STRLEN];
    if (call->kind == CALL_REOPEN && rc >= 0) {
        reopened(priv, cf);
    } else if (call->kind == CALL_REOPEN) {
        XL_WARN(priv->xl, "cannot re-open fd %llu (gfid %s) on brick %s: %s; it is lost",
                (unsigned long long)cf->id, bfs_gfid_fmt(&cf->gfid, g), priv->subvol,
                strerror(-rc));
        pthread_mutex_lock(&priv->lock);
        cf->lost = true;
        pthread_mutex_unlock(&priv->lock);
    } else if (rc < 0) {
        XL_WARN(priv->xl, "lock [%llu, %llu] of owner %llx on fd %llu (gfid %s) was not "
                "re-taken after the reconnect: %s", (unsigned long long)call->lk.start,
                (unsigned long long)call->lk.end, (unsigned long long)call->lk.owner,
                (unsigned long long)cf->id, bfs_gfid_fmt(&cf->gfid, g), strerror(-rc));
        struct cli_lock un = call->lk;
        un.type = F_UNLCK;
        pthread_mutex_lock(&priv->lock);
        (void)cli_lock_apply(cf, &un, call->lk_len); /* unlock needs no memory but spare */
        pthread_mutex_unlock(&priv->lock);
    }
    pthread_mutex_lock(&priv->lock);
    cli_fd_unref(priv, cf);
    pthread_mutex_unlock(&priv->lock);
    free(call);
    reopen_done_one(priv);
}
