/*
 * client-conn.c — protocol/client's connection: connect, handshake,
 * pings, the end of a connection and the reconnect that follows.
 *
 * Everything here runs on the loop thread (timers, connect results, frames,
 * on_close), except cli_submit which any sending thread calls. One
 * connection exists at a time (priv->conn, from a successful connect to
 * its on_close). Its end is handled in one place, cli_on_close, whatever
 * ended it: the brick closed it, a socket error, a ping timeout (we close
 * it ourselves), a protocol error, a refused handshake, or a stop.
 * cli_on_close fails every call in flight with ENOTCONN, marks every fd as
 * needing a re-open, tells the parents CHILD_DOWN and arms the reconnect.
 *
 * Liveness: every frame from the brick counts as a sign of life. A ping
 * goes out every network.ping-timeout / 4; a brick silent for the whole
 * ping timeout (even with pings outstanding) is declared down. The brick
 * answers pings on its event thread, so slow disk work does not trip it.
 *
 * Backoff: the delay before reconnecting starts at
 * transport.reconnect-delay-min and doubles per failed attempt up to
 * transport.reconnect-delay-max; it goes back to the minimum once a
 * connection is fully up again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"

#include "core/event.h"
#include "rpc/proto.h"

static const struct bfs_conn_cbs cli_cbs = {.on_frame = cli_on_frame, .on_close = cli_on_close};

static void connect_start(struct cli_priv *priv);

const char *cli_state_name(enum cli_state s)
{
    static const char *const names[] = {
        [CLI_IDLE] = "idle",           [CLI_CONNECTING] = "connecting",
        [CLI_HANDSHAKE] = "handshake", [CLI_REOPENING] = "reopening",
        [CLI_UP] = "up",               [CLI_WAIT] = "waiting",
        [CLI_STOPPED] = "stopped",
    };
    return s <= CLI_STOPPED ? names[s] : "?";
}

/* Tells the parents ev unless they heard it last. No lock held. */
static void announce(struct cli_priv *priv, enum bfs_event ev)
{
    enum cli_announced want = ev == BFS_EV_CHILD_UP ? CLI_ANN_UP : CLI_ANN_DOWN;
    pthread_mutex_lock(&priv->lock);
    bool tell = priv->announced != want && priv->state != CLI_STOPPED;
    priv->announced = want;
    pthread_mutex_unlock(&priv->lock);
    if (tell) {
        bfs_xl_notify_parents(priv->xl, ev, NULL);
        /* reaches md-cache over cluster translators, which keep one
         * child's ups and downs to themselves */
        bfs_xl_notify_parents(priv->xl, BFS_EV_CACHE_STALE, NULL);
    }
}

/* ---- sending ---- */

/* Registers call under a fresh id (set in *h) and returns a reference on
 * the connection to send it on; NULL with *rc set when it cannot go. */
static struct bfs_conn *submit_register(struct cli_priv *priv, struct cli_call *call,
                                        bool requires_up, struct bfs_wire_hdr *h, int *rc)
{
    uint32_t proc = call->kind == CALL_SETVOLUME ? BFS_PROC_SETVOLUME : (uint32_t)call->fop;
    pthread_mutex_lock(&priv->lock);
    if (!priv->conn || priv->state == CLI_STOPPED || (requires_up && priv->state != CLI_UP)) {
        pthread_mutex_unlock(&priv->lock);
        *rc = -ENOTCONN;
        return NULL;
    }
    uint64_t id = call->node.id = ++priv->next_id;
    *rc = bfs_idmap_put(&priv->pending, &call->node);
    struct bfs_conn *conn = *rc == 0 ? bfs_conn_ref(priv->conn) : NULL;
    pthread_mutex_unlock(&priv->lock);
    *h = (struct bfs_wire_hdr){.type = BFS_WIRE_CALL, .id = id, .proc = proc};
    return conn;
}

/* After a failed send: the call is the caller's again unless on_close took
 * it first (then 0: on_close fails it). */
static int submit_failed(struct cli_priv *priv, uint64_t id, int rc)
{
    pthread_mutex_lock(&priv->lock);
    bool mine = bfs_idmap_del(&priv->pending, id) != NULL;
    pthread_mutex_unlock(&priv->lock);
    if (mine)
        return rc == -EMSGSIZE || rc == -ENOMEM ? rc : -ENOTCONN;
    return 0;
}

int cli_submit(struct cli_priv *priv, struct cli_call *call, void *body, size_t len,
               bool requires_up)
{
    struct bfs_wire_hdr h;
    int rc;
    struct bfs_conn *conn = submit_register(priv, call, requires_up, &h, &rc);
    if (!conn) {
        free(body);
        return rc;
    }
    /* From here the call is visible: a reply or on_close may take it. */
    rc = bfs_conn_send_buf(conn, &h, body, len);
    bfs_conn_unref(conn);
    return rc < 0 ? submit_failed(priv, h.id, rc) : 0;
}

int cli_submit_iov(struct cli_priv *priv, struct cli_call *call, const struct iovec *iov,
                   int iovcnt, bool requires_up)
{
    struct bfs_wire_hdr h;
    int rc;
    struct bfs_conn *conn = submit_register(priv, call, requires_up, &h, &rc);
    if (!conn)
        return rc;
    rc = bfs_conn_send(conn, &h, iov, iovcnt);
    bfs_conn_unref(conn);
    return rc < 0 ? submit_failed(priv, h.id, rc) : 0;
}

/* ---- pings ---- */

static void ping_tick(void *arg);

static void arm_ping(struct cli_priv *priv, uint64_t timeout_ms)
{
    uint64_t interval = timeout_ms / 4;
    if (interval < 100)
        interval = 100;
    priv->ping_timer = bfs_timer_add(priv->loop, interval, ping_tick, priv);
}

static void ping_tick(void *arg)
{
    struct cli_priv *priv = arg;
    priv->ping_timer = NULL;
    pthread_mutex_lock(&priv->lock);
    struct bfs_conn *conn = priv->conn ? bfs_conn_ref(priv->conn) : NULL;
    uint64_t timeout = priv->ping_timeout_ms;
    pthread_mutex_unlock(&priv->lock);
    if (!conn)
        return;
    uint64_t silent = bfs_now_ms() - priv->last_rx_ms;
    if (silent >= timeout) {
        XL_ERR(priv->xl, "brick %s at %s:%u silent for %llu ms (network.ping-timeout %llu s): "
               "declaring it down", priv->subvol, priv->host, priv->port,
               (unsigned long long)silent, (unsigned long long)(timeout / 1000));
        bfs_conn_close(conn, -ETIMEDOUT);
    } else {
        struct bfs_wire_hdr h = {.type = BFS_WIRE_PING, .id = ++priv->ping_seq};
        (void)bfs_conn_send_buf(conn, &h, NULL, 0);
        arm_ping(priv, timeout);
    }
    bfs_conn_unref(conn);
}

/* ---- reconnecting ---- */

static void retry_tick(void *arg)
{
    struct cli_priv *priv = arg;
    priv->retry_timer = NULL;
    connect_start(priv);
}

static void schedule_retry(struct cli_priv *priv)
{
    pthread_mutex_lock(&priv->lock);
    if (priv->state == CLI_STOPPED) {
        pthread_mutex_unlock(&priv->lock);
        return;
    }
    priv->state = CLI_WAIT;
    uint64_t delay = priv->backoff_ms;
    priv->backoff_ms = delay * 2 > priv->backoff_max_ms ? priv->backoff_max_ms : delay * 2;
    pthread_mutex_unlock(&priv->lock);
    priv->retry_timer = bfs_timer_add(priv->loop, delay, retry_tick, priv);
    if (!priv->retry_timer)
        XL_ERR(priv->xl, "cannot arm the reconnect timer: out of memory");
}

static void connect_failed(struct cli_priv *priv, int rc)
{
    pthread_mutex_lock(&priv->lock);
    priv->failures++;
    priv->last_error = rc;
    pthread_mutex_unlock(&priv->lock);
    if (!priv->logged_failure) {
        XL_WARN(priv->xl, "cannot connect to brick %s at %s:%u: %s; retrying", priv->subvol,
                priv->host, priv->port, strerror(-rc));
        priv->logged_failure = true;
    } else {
        XL_DBG(priv->xl, "connect to %s:%u: %s", priv->host, priv->port, strerror(-rc));
    }
    announce(priv, BFS_EV_CHILD_DOWN);
    schedule_retry(priv);
}

static void send_setvolume(struct cli_priv *priv, struct bfs_conn *conn)
{
    /* xdata: we take lock contention upcalls (cluster translators above
     * end their eager locks on them); with client.invalidations off, no
     * invalidations (rpc/proto.h) */
    struct bfs_dict *x = bfs_dict_new();
    struct bfs_setvolume_req req = {.version = BFS_PROTO_VERSION, .subvol = priv->subvol,
                                    .uuid = priv->uuid, .name = priv->xl->name, .xdata = x};
    struct cli_call *call = calloc(1, sizeof(*call));
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    int rc = call && x ? bfs_dict_set_int(x, BFS_SETVOLUME_CONTENTION, 1) : -ENOMEM;
    if (rc == 0 && priv->no_inval)
        rc = bfs_dict_set_int(x, BFS_SETVOLUME_NO_INVAL, 1);
    if (rc == 0)
        rc = bfs_enc_setvolume_req(&w, &req);
    bfs_dict_unref(x);
    if (rc == 0) {
        call->priv = priv;
        call->kind = CALL_SETVOLUME;
        size_t len;
        void *body = bfs_wbuf_take(&w, &len);
        rc = cli_submit(priv, call, body, len, false);
    }
    if (rc < 0) {
        bfs_wbuf_free(&w);
        free(call);
        bfs_conn_close(conn, rc);
    }
}

static void connect_done(int rc, void *arg)
{
    struct cli_priv *priv = arg;
    priv->connecting = NULL;
    if (rc < 0) {
        connect_failed(priv, rc);
        return;
    }
    struct bfs_conn *c = bfs_conn_new(priv->loop, rc, &cli_cbs, priv);
    if (!c) {
        connect_failed(priv, -ENOMEM);
        return;
    }
    pthread_mutex_lock(&priv->lock);
    bool stopped = priv->state == CLI_STOPPED;
    if (!stopped) {
        priv->conn = c;
        priv->state = CLI_HANDSHAKE;
        priv->connects++;
    }
    uint64_t timeout = priv->ping_timeout_ms;
    pthread_mutex_unlock(&priv->lock);
    if (stopped) {
        bfs_conn_unref(c); /* never started: closes the socket */
        return;
    }
    priv->last_rx_ms = bfs_now_ms();
    if (bfs_conn_start(c) < 0) {
        pthread_mutex_lock(&priv->lock);
        priv->conn = NULL;
        pthread_mutex_unlock(&priv->lock);
        bfs_conn_unref(c);
        connect_failed(priv, -ENOMEM);
        return;
    }
    arm_ping(priv, timeout); /* also bounds the handshake and the re-opens */
    send_setvolume(priv, c);
}

static void tcp_connect(struct cli_priv *priv)
{
    pthread_mutex_lock(&priv->lock);
    uint16_t port = priv->port;
    pthread_mutex_unlock(&priv->lock);
    int rc = bfs_tcp_connect(priv->loop, priv->host, port, priv->connect_timeout_ms,
                             connect_done, priv, &priv->connecting);
    if (rc < 0) {
        priv->connecting = NULL;
        connect_failed(priv, rc);
    }
}

/* With a port map, every attempt first asks brickfsd where the brick
 * listens now (client-portmap.c); cli_pm_connect goes on from there. */
static void connect_start(struct cli_priv *priv)
{
    pthread_mutex_lock(&priv->lock);
    bool stopped = priv->state == CLI_STOPPED;
    if (!stopped)
        priv->state = CLI_CONNECTING;
    pthread_mutex_unlock(&priv->lock);
    if (stopped)
        return;
    if (priv->mgmt_host[0] && cli_pm_ask(priv) == 0)
        return;
    tcp_connect(priv); /* no port map, or no memory to ask: the port we know */
}

void cli_pm_connect(struct cli_priv *priv, int result)
{
    pthread_mutex_lock(&priv->lock);
    bool stopped = priv->state == CLI_STOPPED;
    bool known = priv->port != 0;
    pthread_mutex_unlock(&priv->lock);
    if (stopped)
        return;
    if (!known)
        connect_failed(priv, result < 0 ? result : -EHOSTUNREACH);
    else
        tcp_connect(priv);
}

void cli_start_task(void *arg)
{
    connect_start(arg);
}

void cli_stop_task(void *arg)
{
    struct cli_priv *priv = arg;
    pthread_mutex_lock(&priv->lock);
    priv->state = CLI_STOPPED;
    struct bfs_conn *conn = priv->conn ? bfs_conn_ref(priv->conn) : NULL;
    pthread_mutex_unlock(&priv->lock);
    if (priv->connecting)
        bfs_connect_cancel(priv->connecting);
    priv->connecting = NULL;
    cli_pm_cancel(priv);
    if (priv->retry_timer)
        bfs_timer_cancel(priv->loop, priv->retry_timer);
    priv->retry_timer = NULL;
    if (priv->ping_timer)
        bfs_timer_cancel(priv->loop, priv->ping_timer);
    priv->ping_timer = NULL;
    if (conn) {
        bfs_conn_close(conn, 0);
        bfs_conn_unref(conn);
    }
}

void cli_set_up(struct cli_priv *priv)
{
    pthread_mutex_lock(&priv->lock);
    bool up = priv->state == CLI_REOPENING;
    if (up) {
        priv->state = CLI_UP;
        priv->backoff_ms = priv->backoff_min_ms;
    }
    pthread_mutex_unlock(&priv->lock);
    if (up) {
        XL_INFO(priv->xl, "brick %s at %s:%u is up", priv->subvol, priv->host, priv->port);
        announce(priv, BFS_EV_CHILD_UP);
    }
}

/* ---- incoming frames ---- */

static void handshake_reply(struct cli_priv *priv, struct bfs_conn *c, struct cli_call *call,
                            const struct bfs_wire_hdr *h, void *body, size_t len)
{
    struct bfs_setvolume_rep rep = {0};
    struct bfs_rbuf rd;
    int rc = h->status;
    bfs_rbuf_init(&rd, body, len);
    if ((len || rc >= 0) && bfs_dec_setvolume_rep(&rd, &rep) < 0) {
        XL_ERR(priv->xl, "brick at %s:%u sent a malformed handshake reply", priv->host,
               priv->port);
        rc = -EPROTO;
    }
    if (rc < 0) {
        /* once per outage at error level: the refusal repeats every backoff */
        bfs_log(priv->xl->name, priv->logged_failure ? BFS_LOG_DEBUG : BFS_LOG_ERROR,
                "brick %s at %s:%u refused the handshake: %s%s%s", priv->subvol, priv->host,
                priv->port, strerror(-rc), rep.msg ? ": " : "", rep.msg ? rep.msg : "");
        priv->logged_failure = true;
        pthread_mutex_lock(&priv->lock);
        priv->last_error = rc;
        pthread_mutex_unlock(&priv->lock);
        bfs_conn_close(c, rc);
    } else {
        XL_INFO(priv->xl, "connected to brick %s at %s:%u", rep.brick ? rep.brick : "?",
                priv->host, priv->port);
        priv->logged_failure = false;
        cli_reopen_all(priv);
    }
    bfs_dict_unref(rep.xdata);
    free(body);
    free(call);
}

static void handle_reply(struct cli_priv *priv, struct bfs_conn *c, const struct bfs_wire_hdr *h,
                         void *body, size_t len)
{
    pthread_mutex_lock(&priv->lock);
    struct cli_call *call = (struct cli_call *)bfs_idmap_del(&priv->pending, h->id);
    pthread_mutex_unlock(&priv->lock);
    if (!call) {
        free(body); /* RELEASE(DIR) answers are not awaited */
        return;
    }
    uint32_t proc = call->kind == CALL_SETVOLUME ? BFS_PROC_SETVOLUME : (uint32_t)call->fop;
    if (h->proc != proc) {
        XL_ERR(priv->xl, "brick at %s:%u answered request %llu with procedure %u, not %u",
               priv->host, priv->port, (unsigned long long)h->id, h->proc, proc);
        free(body);
        cli_call_fail(priv, call, -EIO);
        bfs_conn_close(c, -EPROTO);
        return;
    }
    switch (call->kind) {
    case CALL_FOP:
        cli_fop_reply(priv, c, call, h, body, len);
        break;
    case CALL_SETVOLUME:
        handshake_reply(priv, c, call, h, body, len);
        break;
    case CALL_REOPEN:
    case CALL_RELOCK:
        free(body);
        cli_reopen_reply(priv, call, h->status);
        break;
    }
}

static void handle_upcall(struct cli_priv *priv, struct bfs_conn *c, void *body, size_t len)
{
    struct bfs_upcall up;
    struct bfs_rbuf rd;
    bfs_rbuf_init(&rd, body, len);
    if (bfs_dec_upcall(&rd, &up) < 0) {
        XL_ERR(priv->xl, "brick at %s:%u sent a malformed upcall", priv->host, priv->port);
        bfs_conn_close(c, -EPROTO);
    } else {
        bfs_xl_notify_parents(priv->xl, BFS_EV_UPCALL, &up);
    }
    free(body);
}

void cli_on_frame(struct bfs_conn *c, const struct bfs_wire_hdr *h, void *body, size_t len,
                  void *arg)
{
    struct cli_priv *priv = arg;
    priv->last_rx_ms = bfs_now_ms();
    switch (h->type) {
    case BFS_WIRE_REPLY:
        handle_reply(priv, c, h, body, len);
        return;
    case BFS_WIRE_UPCALL:
        handle_upcall(priv, c, body, len);
        return;
    case BFS_WIRE_PING: {
        free(body);
        struct bfs_wire_hdr pong = {.type = BFS_WIRE_PONG, .id = h->id};
        (void)bfs_conn_send_buf(c, &pong, NULL, 0);
        return;
    }
    case BFS_WIRE_PONG:
        free(body);
        return;
    default:
        free(body);
        XL_ERR(priv->xl, "brick at %s:%u sent an unexpected %s frame; closing", priv->host,
               priv->port, bfs_wire_type_name(h->type));
        bfs_conn_close(c, -EPROTO);
    }
}

void cli_on_close(struct bfs_conn *c, int reason, void *arg)
{
    struct cli_priv *priv = arg;
    pthread_mutex_lock(&priv->lock);
    if (priv->conn == c)
        priv->conn = NULL;
    priv->in_close = true;
    struct bfs_idmap_node *calls = bfs_idmap_take_all(&priv->pending);
    for (struct cli_fd *cf = priv->fds; cf; cf = cf->next)
        cf->open_remote = false;
    bool stopped = priv->state == CLI_STOPPED;
    bool was_up = priv->announced == CLI_ANN_UP;
    priv->disconnects++;
    priv->pf_gen++; /* the brick may change unseen until we are back (client-prefetch.c) */
    if (reason)
        priv->last_error = reason;
    pthread_mutex_unlock(&priv->lock);

    if (priv->ping_timer)
        bfs_timer_cancel(priv->loop, priv->ping_timer);
    priv->ping_timer = NULL;
    bfs_conn_unref(c);
    if (was_up && !stopped)
        XL_WARN(priv->xl, "disconnected from brick %s at %s:%u: %s", priv->subvol, priv->host,
                priv->port, reason ? strerror(-reason) : "closed by the brick");
    else
        XL_DBG(priv->xl, "connection to %s:%u ended: %s", priv->host, priv->port,
               reason ? strerror(-reason) : "closed");
    while (calls) {
        struct cli_call *call = (struct cli_call *)calls;
        calls = calls->next;
        cli_call_fail(priv, call, -ENOTCONN);
    }
    if (!stopped) {
        announce(priv, BFS_EV_CHILD_DOWN);
        schedule_retry(priv);
    }
    /* Last: fini may free priv as soon as it sees this. */
    pthread_mutex_lock(&priv->lock);
    priv->in_close = false;
    pthread_cond_broadcast(&priv->cond);
    pthread_mutex_unlock(&priv->lock);
}
