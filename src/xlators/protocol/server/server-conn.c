/*
 * server-conn.c — protocol/server's connections: accept, the handshake
 * (SETVOLUME), the per-connection fd table and RELEASE(DIR), pings, frame
 * dispatch, and the end of a connection.
 *
 * A connection's life (see server.h for the references):
 *   accept      refused when stopping or over server.max-connections;
 *               otherwise linked into priv->conns with one reference, and a
 *               timer closes it unless it completes SETVOLUME in time.
 *   handshake   version, the brick name asked for, auth by peer address; the
 *               xdata says which upcalls the client takes (contention
 *               notices; invalidations unless BFS_SETVOLUME_NO_INVAL). A
 *               failed handshake is answered with an error; the connection
 *               stays un-handshaken until the client or the timer closes it.
 *   frames      CALLs are served (server-fop.c); PING gets a PONG; anything
 *               malformed (bad body, unknown procedure, a fop before the
 *               handshake, a frame type a client must not send) is logged
 *               with the peer's address and closes the connection.
 *   close       on_close releases every fd of the table and sends
 *               BFS_EV_CLIENT_CLOSING down the graph: features/locks fails
 *               the client's queued lock requests (and refuses new ones)
 *               but keeps its granted locks, since requests of it may
 *               still run in the brick's workers (a transaction's post-op
 *               xattrop under its lock: had another client taken the lock
 *               first, that late decrement broke its counters — 212).
 *               BFS_EV_CLIENT_GONE, which releases the client's locks,
 *               follows when the last of its requests is answered, just
 *               before the connection's memory (its stack->client value)
 *               is freed: at once when none was in flight.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

#include "core/event.h"
#include "rpc/proto.h"

static void srv_on_frame(struct bfs_conn *c, const struct bfs_wire_hdr *h, void *body,
                         size_t len, void *arg);
static void srv_on_close(struct bfs_conn *c, int reason, void *arg);

static const struct bfs_conn_cbs srv_conn_cbs = {.on_frame = srv_on_frame,
                                                 .on_close = srv_on_close};

/* ---- references ---- */

struct srv_conn *srv_conn_ref(struct srv_conn *sc)
{
    atomic_fetch_add(&sc->refs, 1);
    return sc;
}

/* ev (CLIENT_CLOSING, CLIENT_GONE) about sc down the graph. */
static void notify_client(struct srv_conn *sc, enum bfs_event ev)
{
    struct bfs_xl *xl = sc->priv->xl;
    struct bfs_xl *child = FIRST_CHILD(xl);
    if (child->mod->notify)
        child->mod->notify(child, ev, xl, sc);
    else
        bfs_xl_notify_default(child, ev, xl, sc);
}

void srv_conn_unref(struct srv_conn *sc)
{
    if (atomic_fetch_sub(&sc->refs, 1) != 1)
        return;
    struct srv_priv *priv = sc->priv;
    if (sc->closed) /* its requests all answered: nothing of it runs below */
        notify_client(sc, BFS_EV_CLIENT_GONE);
    pthread_mutex_lock(&priv->lock);
    if (sc->prev)
        sc->prev->next = sc->next;
    else
        priv->conns = sc->next;
    if (sc->next)
        sc->next->prev = sc->prev;
    priv->nconns--;
    pthread_cond_broadcast(&priv->drained);
    pthread_mutex_unlock(&priv->lock);

    bfs_conn_unref(sc->conn);
    bfs_idmap_destroy(&sc->fds);
    pthread_mutex_destroy(&sc->lock);
    free(sc->uuid);
    free(sc->client_name);
    free(sc);
}

/* ---- accept ---- */

static void hs_timeout(void *arg)
{
    struct srv_conn *sc = arg;
    sc->hs_timer = NULL;
    pthread_mutex_lock(&sc->lock);
    bool done = sc->handshaken;
    pthread_mutex_unlock(&sc->lock);
    if (!done)
        srv_conn_fail(sc, -ETIMEDOUT, "no handshake within %llu s",
                      (unsigned long long)(sc->priv->hs_timeout_ms / 1000));
}

/* A client whose machine died never closes its connection, and its locks
 * would be held for ever: TCP keepalive finds an idle dead peer, and
 * TCP_USER_TIMEOUT one that stopped acknowledging our replies. Failures
 * only cost that detection, so they are ignored. */
static void set_keepalive(struct srv_priv *priv, int fd)
{
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &priv->ka_time, sizeof(int));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &priv->ka_interval, sizeof(int));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &priv->ka_count, sizeof(int));
    if (priv->user_timeout_ms > 0)
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &priv->user_timeout_ms, sizeof(int));
}

void srv_accept(struct bfs_listener *l, int fd, const char *peer, void *arg)
{
    struct srv_priv *priv = arg;
    struct srv_conn *sc = calloc(1, sizeof(*sc));
    (void)l;
    if (!sc) {
        close(fd);
        return;
    }
    pthread_mutex_lock(&priv->lock);
    bool refuse = priv->stopped || priv->nconns >= priv->max_conns;
    if (refuse)
        priv->refused++;
    pthread_mutex_unlock(&priv->lock);
    if (refuse) {
        XL_WARN(priv->xl, "refusing connection from %s: %s", peer,
                priv->stopped ? "shutting down" : "server.max-connections reached");
        close(fd);
        free(sc);
        return;
    }
    sc->priv = priv;
    snprintf(sc->peer, sizeof(sc->peer), "%s", peer);
    srv_peer_ip(peer, sc->ip, sizeof(sc->ip));
    atomic_init(&sc->refs, 1); /* the open socket's reference, dropped by on_close */
    pthread_mutex_init(&sc->lock, NULL);
    sc->connected_ms = bfs_now_ms();
    set_keepalive(priv, fd);
    if (!(sc->conn = bfs_conn_new(priv->loop, fd, &srv_conn_cbs, sc))) {
        pthread_mutex_destroy(&sc->lock);
        free(sc);
        return;
    }
    pthread_mutex_lock(&priv->lock);
    sc->next = priv->conns;
    if (priv->conns)
        priv->conns->prev = sc;
    priv->conns = sc;
    priv->nconns++;
    priv->accepted++;
    pthread_mutex_unlock(&priv->lock);

    XL_DBG(priv->xl, "connection from %s", peer);
    /* We are on the loop thread, so the timer cannot fire before it is stored. */
    sc->hs_timer = bfs_timer_add(priv->loop, priv->hs_timeout_ms, hs_timeout, sc);
    if (bfs_conn_start(sc->conn) < 0) {
        XL_ERR(priv->xl, "cannot serve connection from %s", peer);
        if (sc->hs_timer)
            bfs_timer_cancel(priv->loop, sc->hs_timer);
        sc->hs_timer = NULL;
        srv_conn_unref(sc); /* never started: no on_close will come */
    }
}

void srv_conn_fail(struct srv_conn *sc, int reason, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    XL_ERR(sc->priv->xl, "peer %s: %s; closing the connection", sc->peer, msg);
    bfs_conn_close(sc->conn, reason);
}

/* ---- sending ---- */

void srv_send_reply(struct srv_conn *sc, uint64_t id, uint32_t proc, int rc, void *body,
                    size_t len)
{
    if (rc < BFS_WIRE_MIN_STATUS)
        rc = -EIO;
    struct bfs_wire_hdr h = {.type = BFS_WIRE_REPLY, .id = id, .proc = proc, .status = rc};
    int err = bfs_conn_send_buf(sc->conn, &h, body, len);
    if (err == -EMSGSIZE) {
        XL_WARN(sc->priv->xl, "peer %s: reply to request %llu is over the frame limit",
                sc->peer, (unsigned long long)id);
        h.status = -EMSGSIZE;
        err = bfs_conn_send_buf(sc->conn, &h, NULL, 0);
    }
    if (err < 0 && err != -ENOTCONN)
        XL_WARN(sc->priv->xl, "peer %s: cannot send a reply: %s", sc->peer, strerror(-err));
}

void srv_broadcast_upcall(struct srv_priv *priv, const struct bfs_upcall *up)
{
    /* up->to is only compared, never followed: a connection gone since the
     * notice was made matches nothing (or a new one at the same address,
     * whose owners differ: it ignores the notice) */
    bool contention = bfs_upcall_is_contention(up->kind);
    if (contention && !up->to) /* a lock of a caller inside this process */
        return;
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    if (bfs_enc_upcall(&w, up) < 0) {
        bfs_wbuf_free(&w);
        return;
    }
    struct bfs_wire_hdr h = {.type = BFS_WIRE_UPCALL};
    struct iovec iov = {w.p, w.len};
    pthread_mutex_lock(&priv->lock);
    for (struct srv_conn *sc = priv->conns; sc; sc = sc->next) {
        pthread_mutex_lock(&sc->lock);
        bool to = sc->handshaken && !sc->closed &&
                  (contention ? (void *)sc == up->to && sc->contention
                              : (void *)sc != up->except && !sc->no_inval);
        pthread_mutex_unlock(&sc->lock);
        if (!to)
            continue;
        int rc = bfs_conn_send(sc->conn, &h, &iov, 1); /* never calls back */
        if (rc < 0 && rc != -ENOTCONN && !contention) {
            /* A lost invalidation could leave that client's cache stale:
             * dropping the connection makes it empty its cache. */
            XL_WARN(priv->xl, "peer %s: cannot send an upcall (%s): closing", sc->peer,
                    strerror(-rc));
            bfs_conn_close(sc->conn, rc);
        } else if (rc < 0 && rc != -ENOTCONN) {
            /* a lost contention notice only delays the other client: the
             * holder's window bound ends its lock anyway */
            XL_DBG(priv->xl, "peer %s: cannot send a contention notice (%s)", sc->peer,
                   strerror(-rc));
        }
    }
    pthread_mutex_unlock(&priv->lock);
    bfs_wbuf_free(&w);
}

/* ---- the fd table ---- */

struct bfs_fd *srv_fd_get(struct srv_conn *sc, uint64_t id)
{
    struct bfs_fd *fd = NULL;
    pthread_mutex_lock(&sc->lock);
    struct bfs_idmap_node *n = bfs_idmap_get(&sc->fds, id);
    if (n)
        fd = bfs_fd_ref(((struct srv_fd *)n)->fd);
    pthread_mutex_unlock(&sc->lock);
    return fd;
}

int srv_fd_insert(struct srv_conn *sc, uint64_t id, struct bfs_fd *fd)
{
    struct srv_fd *sf = malloc(sizeof(*sf));
    if (!sf)
        return -ENOMEM;
    sf->node.id = id;
    sf->fd = fd;
    int rc;
    pthread_mutex_lock(&sc->lock);
    if (sc->closed)
        rc = -ENOTCONN;
    else if (sc->fds.count >= SRV_MAX_FDS_PER_CONN)
        rc = -EMFILE;
    else
        rc = bfs_idmap_put(&sc->fds, &sf->node);
    if (rc == 0)
        bfs_fd_ref(fd);
    pthread_mutex_unlock(&sc->lock);
    if (rc < 0)
        free(sf);
    return rc == -EEXIST ? -EBADF : rc;
}

/* RELEASE / RELEASEDIR: body is the u64 fd id. */
static void srv_release(struct srv_conn *sc, const struct bfs_wire_hdr *h, void *body,
                        size_t len)
{
    struct bfs_rbuf rd;
    uint64_t id = 0;
    bfs_rbuf_init(&rd, body, len);
    bfs_get_u64(&rd, &id);
    int rc = bfs_rbuf_end(&rd);
    free(body);
    if (rc < 0) {
        srv_conn_fail(sc, -EPROTO, "malformed %s", h->proc == BFS_PROC_RELEASE ? "RELEASE"
                                                                            : "RELEASEDIR");
        return;
    }
    pthread_mutex_lock(&sc->lock);
    struct srv_fd *sf = (struct srv_fd *)bfs_idmap_get(&sc->fds, id);
    bool is_dir = h->proc == BFS_PROC_RELEASEDIR;
    if (sf && (sf->fd->is_dir != 0) == is_dir)
        bfs_idmap_del(&sc->fds, id);
    else
        sf = NULL;
    pthread_mutex_unlock(&sc->lock);
    if (sf) {
        bfs_fd_unref(sf->fd); /* release reaches the translators once in-flight calls end */
        free(sf);
    }
    /* Clients do not wait for this answer: it leaves with the next reply
     * (MSG_MORE), so the client's event loop wakes once for both. */
    struct bfs_wire_hdr rh = {.type = BFS_WIRE_REPLY, .id = h->id, .proc = h->proc,
                              .status = sf ? 0 : -EBADF};
    (void)bfs_conn_send_more(sc->conn, &rh, NULL, 0);
}

/* ---- the handshake ---- */

static int handshake_check(struct srv_conn *sc, const struct bfs_setvolume_req *req, char *msg,
                           size_t msglen)
{
    struct srv_priv *priv = sc->priv;
    const char *brick = FIRST_CHILD(priv->xl)->name;
    if (sc->handshaken) {
        snprintf(msg, msglen, "already handshaken");
        return -EALREADY;
    }
    if (req->version != BFS_PROTO_VERSION) {
        snprintf(msg, msglen, "protocol version %u not supported (this brick speaks %u)",
                 req->version, BFS_PROTO_VERSION);
        return -EPROTONOSUPPORT;
    }
    if (!req->subvol || strcmp(req->subvol, brick) != 0) {
        snprintf(msg, msglen, "no subvolume '%s' here (this brick exports '%s')",
                 req->subvol ? req->subvol : "", brick);
        return -ENOENT;
    }
    pthread_mutex_lock(&priv->lock);
    int rc = srv_auth_check(priv->auth_allow, priv->auth_reject, sc->ip);
    pthread_mutex_unlock(&priv->lock);
    if (rc < 0) {
        snprintf(msg, msglen, "address %s is not allowed by auth.allow/auth.reject", sc->ip);
        return rc;
    }
    return 0;
}

static void srv_handshake(struct srv_conn *sc, const struct bfs_wire_hdr *h, void *body,
                          size_t len)
{
    struct srv_priv *priv = sc->priv;
    struct bfs_setvolume_req req;
    struct bfs_rbuf rd;
    char msg[256] = "";

    bfs_rbuf_init(&rd, body, len);
    int rc = bfs_dec_setvolume_req(&rd, &req);
    if (rc < 0) {
        bfs_dict_unref(req.xdata);
        free(body);
        srv_conn_fail(sc, -EPROTO, "malformed SETVOLUME: %s", strerror(-rc));
        return;
    }
    rc = handshake_check(sc, &req, msg, sizeof(msg));
    if (rc == 0) {
        char *uuid = strdup(req.uuid ? req.uuid : "");
        char *name = strdup(req.name ? req.name : "");
        int64_t contention = 0, no_inval = 0;
        (void)bfs_dict_get_int(req.xdata, BFS_SETVOLUME_CONTENTION, &contention);
        (void)bfs_dict_get_int(req.xdata, BFS_SETVOLUME_NO_INVAL, &no_inval);
        pthread_mutex_lock(&sc->lock);
        sc->handshaken = true;
        sc->contention = contention != 0;
        sc->no_inval = no_inval != 0;
        sc->uuid = uuid;
        sc->client_name = name;
        pthread_mutex_unlock(&sc->lock);
        if (sc->hs_timer)
            bfs_timer_cancel(priv->loop, sc->hs_timer);
        sc->hs_timer = NULL;
        XL_INFO(priv->xl, "client %s (uuid %s, %s) connected to %s%s", sc->peer,
                uuid ? uuid : "?", name && *name ? name : "unnamed", FIRST_CHILD(priv->xl)->name,
                no_inval ? " (no invalidations)" : "");
    } else {
        XL_WARN(priv->xl, "peer %s: handshake refused: %s", sc->peer, msg);
    }
    bfs_dict_unref(req.xdata);
    free(body); /* req's strings pointed into it */

    struct bfs_setvolume_rep rep = {.version = BFS_PROTO_VERSION,
                                    .brick = FIRST_CHILD(priv->xl)->name,
                                    .msg = msg[0] ? msg : NULL};
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    if (bfs_enc_setvolume_rep(&w, &rep) < 0) {
        bfs_wbuf_free(&w);
        srv_send_reply(sc, h->id, h->proc, -ENOMEM, NULL, 0);
        return;
    }
    size_t blen;
    void *out = bfs_wbuf_take(&w, &blen);
    srv_send_reply(sc, h->id, h->proc, rc, out, blen);
}

/* ---- dispatch ---- */

static void srv_on_frame(struct bfs_conn *c, const struct bfs_wire_hdr *h, void *body,
                         size_t len, void *arg)
{
    struct srv_conn *sc = arg;
    (void)c;
    if (h->type == BFS_WIRE_PING || h->type == BFS_WIRE_PONG) {
        free(body);
        if (h->type == BFS_WIRE_PING) {
            struct bfs_wire_hdr pong = {.type = BFS_WIRE_PONG, .id = h->id};
            (void)bfs_conn_send_buf(sc->conn, &pong, NULL, 0);
        }
        return;
    }
    if (h->type != BFS_WIRE_CALL) {
        free(body);
        srv_conn_fail(sc, -EPROTO, "unexpected %s frame", bfs_wire_type_name(h->type));
        return;
    }
    if (h->proc == BFS_PROC_SETVOLUME) {
        srv_handshake(sc, h, body, len);
        return;
    }
    pthread_mutex_lock(&sc->lock);
    bool ok = sc->handshaken;
    pthread_mutex_unlock(&sc->lock);
    if (!ok) {
        free(body);
        srv_conn_fail(sc, -EPROTO, "procedure %u before the handshake", h->proc);
    } else if (h->proc == BFS_PROC_RELEASE || h->proc == BFS_PROC_RELEASEDIR) {
        srv_release(sc, h, body, len);
    } else if (h->proc < BFS_FOP_COUNT) {
        srv_handle_fop(sc, h, body, len);
    } else {
        free(body);
        srv_conn_fail(sc, -EPROTO, "unknown procedure %u", h->proc);
    }
}

static void srv_on_close(struct bfs_conn *c, int reason, void *arg)
{
    struct srv_conn *sc = arg;
    struct srv_priv *priv = sc->priv;
    (void)c;
    if (sc->hs_timer)
        bfs_timer_cancel(priv->loop, sc->hs_timer);
    sc->hs_timer = NULL;

    pthread_mutex_lock(&sc->lock);
    sc->closed = true;
    struct bfs_idmap_node *all = bfs_idmap_take_all(&sc->fds);
    bool was_client = sc->handshaken;
    pthread_mutex_unlock(&sc->lock);

    int nfds = 0;
    while (all) {
        struct srv_fd *sf = (struct srv_fd *)all;
        all = all->next;
        bfs_fd_unref(sf->fd);
        free(sf);
        nfds++;
    }
    if (was_client)
        XL_INFO(priv->xl, "client %s disconnected (%s); released %d fds", sc->peer,
                reason ? strerror(-reason) : "closed", nfds);
    else
        XL_DBG(priv->xl, "connection from %s closed before a handshake", sc->peer);
    notify_client(sc, BFS_EV_CLIENT_CLOSING);
    srv_conn_unref(sc); /* the open socket's reference; the last: CLIENT_GONE */
}

void srv_close_all(struct srv_priv *priv)
{
    pthread_mutex_lock(&priv->lock);
    for (struct srv_conn *sc = priv->conns; sc; sc = sc->next)
        bfs_conn_close(sc->conn, 0); /* on_close runs later, on the loop thread */
    if (bfs_loop_on_loop_thread(priv->loop)) {
        if (priv->nconns)
            XL_ERR(priv->xl, "shutdown on the event-loop thread cannot wait for %d "
                   "connections", priv->nconns);
        pthread_mutex_unlock(&priv->lock);
        return;
    }
    uint64_t deadline = bfs_now_ms() + 30000;
    while (priv->nconns > 0 && bfs_now_ms() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&priv->drained, &priv->lock, &ts);
    }
    if (priv->nconns > 0)
        XL_ERR(priv->xl, "%d connections still have requests in flight after 30 s; "
               "leaving them", priv->nconns);
    pthread_mutex_unlock(&priv->lock);
}
