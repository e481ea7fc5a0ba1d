/*
 * test_conn.c — framed TCP connections (src/rpc/conn.h) on 127.0.0.1 in
 * one process over a bfs_loop running on its own thread: pipelined frames
 * both ways arrive intact and in order, a peer sending garbage or a
 * truncated frame is closed, empty bodies, close racing with senders on
 * other threads, connect errors and timeouts, listener and connect
 * lifetimes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/event.h"
#include "core/log.h"
#include "rpc/conn.h"
#include "../lib/tap.h"

#define NFRAMES 1000
#define WAIT_MS 30000

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct bfs_loop *loop;

/* Waits (up to ms) until cond holds; evaluated under mu. */
#define WAIT_FOR(cond, ms)                                                                   \
    ({                                                                                       \
        struct timespec dl__;                                                                \
        clock_gettime(CLOCK_REALTIME, &dl__);                                                \
        dl__.tv_sec += (ms) / 1000;                                                          \
        dl__.tv_nsec += ((ms) % 1000) * 1000000L;                                            \
        if (dl__.tv_nsec >= 1000000000L) {                                                   \
            dl__.tv_sec++;                                                                   \
            dl__.tv_nsec -= 1000000000L;                                                     \
        }                                                                                    \
        pthread_mutex_lock(&mu);                                                             \
        int r__ = 0;                                                                         \
        while (!(r__ = (cond)))                                                              \
            if (pthread_cond_timedwait(&cv, &mu, &dl__) == ETIMEDOUT) {                      \
                r__ = (cond);                                                                \
                break;                                                                       \
            }                                                                                \
        pthread_mutex_unlock(&mu);                                                           \
        r__;                                                                                 \
    })

static void signal_all(void)
{
    pthread_cond_broadcast(&cv);
}

/* ---- per-connection test state ---- */

struct side {
    const char *name;
    struct bfs_conn *conn;
    int frames;         /* received */
    uint64_t next_id;   /* expected id of the next frame */
    int bad;            /* frames out of order or corrupted */
    int closes;         /* on_close calls */
    int reason;
    int zero_len_null;  /* 0-length frames that came with body NULL */
    int check_content;  /* verify the pattern of each frame */
};

static size_t frame_size(uint64_t id)
{
    if (id == 500)
        return 2u << 20; /* big: read straight into the body buffer */
    if (id % 10 == 0)
        return 16000 + (id * 37) % 50000;
    if (id % 7 == 0)
        return 0;
    return id % 200;
}

static uint8_t pattern(uint64_t id, size_t i)
{
    return (uint8_t)(id * 31 + i * 7);
}

static void fill(uint8_t *p, uint64_t id, size_t len)
{
    for (size_t i = 0; i < len; i++)
        p[i] = pattern(id, i);
}

static void on_frame(struct bfs_conn *c, const struct bfs_wire_hdr *h, void *body, size_t len,
                     void *arg)
{
    struct side *s = arg;
    int good = 1;
    if (s->check_content) {
        good = h->id == s->next_id && h->proc == (uint32_t)(h->id ^ 0x55) &&
               h->type == BFS_WIRE_CALL && len == frame_size(h->id) && h->len == len;
        for (size_t i = 0; good && i < len; i++)
            good = ((uint8_t *)body)[i] == pattern(h->id, i);
    }
    pthread_mutex_lock(&mu);
    if (!good && s->bad++ < 3)
        printf("# %s: bad frame id %llu (expected %llu) len %zu\n", s->name,
               (unsigned long long)h->id, (unsigned long long)s->next_id, len);
    if (len == 0 && body == NULL)
        s->zero_len_null++;
    s->next_id = h->id + 1;
    s->frames++;
    signal_all();
    pthread_mutex_unlock(&mu);
    free(body);
}

static void on_close(struct bfs_conn *c, int reason, void *arg)
{
    struct side *s = arg;
    pthread_mutex_lock(&mu);
    s->closes++;
    s->reason = reason;
    signal_all();
    pthread_mutex_unlock(&mu);
}

static const struct bfs_conn_cbs cbs = {on_frame, on_close};

/* ---- listener: each accepted connection gets the next server side ---- */

static struct side servers[16];
static int naccepted;

static void on_accept(struct bfs_listener *l, int fd, const char *peer, void *arg)
{
    pthread_mutex_lock(&mu);
    struct side *s = &servers[naccepted];
    pthread_mutex_unlock(&mu);
    s->name = "server";
    s->check_content = 1;
    s->conn = bfs_conn_new(loop, fd, &cbs, s);
    if (!s->conn || bfs_conn_start(s->conn) < 0)
        printf("# accept: could not start the server side\n");
    pthread_mutex_lock(&mu);
    naccepted++;
    signal_all();
    pthread_mutex_unlock(&mu);
}

/* ---- connect helper ---- */

struct conn_result {
    int done;
    int rc;
};

static void on_connect(int rc, void *arg)
{
    struct conn_result *r = arg;
    pthread_mutex_lock(&mu);
    r->rc = rc;
    r->done++;
    signal_all();
    pthread_mutex_unlock(&mu);
}

/* Connects a client side to port and waits for the server to accept it. */
static int connect_side(uint16_t port, struct side *cl)
{
    struct conn_result r = {0};
    int before = naccepted;
    if (bfs_tcp_connect(loop, "127.0.0.1", port, 5000, on_connect, &r, NULL) < 0)
        return -1;
    if (!WAIT_FOR(r.done, WAIT_MS) || r.rc < 0)
        return -1;
    cl->name = "client";
    cl->check_content = 1;
    cl->conn = bfs_conn_new(loop, r.rc, &cbs, cl);
    if (!cl->conn || bfs_conn_start(cl->conn) < 0)
        return -1;
    return WAIT_FOR(naccepted > before, WAIT_MS) ? 0 : -1;
}

/* Sends frames first..first+n-1; even ids copy from two iovecs, odd ids
 * hand over a malloc'd body. Returns the number of failed sends. */
static int send_frames(struct bfs_conn *c, uint64_t first, int n)
{
    int failed = 0;
    for (uint64_t id = first; id < first + (uint64_t)n; id++) {
        size_t len = frame_size(id);
        uint8_t *body = malloc(len ? len : 1);
        fill(body, id, len);
        struct bfs_wire_hdr h = {.type = BFS_WIRE_CALL, .id = id, .proc = (uint32_t)(id ^ 0x55)};
        int rc;
        if (id % 2 == 0) {
            struct iovec iov[2] = {{body, len / 3}, {body + len / 3, len - len / 3}};
            rc = bfs_conn_send(c, &h, iov, 2);
            free(body);
        } else {
            rc = bfs_conn_send_buf(c, &h, body, len);
        }
        failed += rc != 0;
    }
    return failed;
}

struct sender {
    struct bfs_conn *c;
    uint64_t first;
    int n;
    int failed;
};

static void *sender_thread(void *arg)
{
    struct sender *s = arg;
    s->failed = send_frames(s->c, s->first, s->n);
    return NULL;
}

/* ---- tests ---- */

static void test_pipeline(uint16_t port)
{
    struct side cl = {0};
    ok(connect_side(port, &cl) == 0, "client connected and accepted");
    struct side *sv = &servers[naccepted - 1];

    /* both directions at once, from two threads other than the loop's */
    struct sender a = {cl.conn, 0, NFRAMES, 0}, b = {sv->conn, 0, NFRAMES, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, sender_thread, &a);
    pthread_create(&tb, NULL, sender_thread, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    is_int(a.failed + b.failed, 0, "%d sends each way accepted", NFRAMES);
    int arrived = WAIT_FOR(sv->frames == NFRAMES && cl.frames == NFRAMES, WAIT_MS);
    ok(arrived, "all frames arrived both ways (server %d, client %d)", sv->frames, cl.frames);
    is_int(sv->bad + cl.bad, 0, "every frame intact and in order");
    ok(sv->zero_len_null > 0, "0-length bodies arrive as (NULL, 0)");
    is_int(bfs_conn_queued_bytes(cl.conn), 0, "client queue drained");

    /* an explicit empty frame, both APIs */
    int before = sv->frames;
    sv->check_content = 0;
    struct bfs_wire_hdr h = {.type = BFS_WIRE_PING, .id = 7};
    is_int(bfs_conn_send(cl.conn, &h, NULL, 0), 0, "empty frame via send");
    is_int(bfs_conn_send_buf(cl.conn, &h, NULL, 0), 0, "empty frame via send_buf");
    ok(WAIT_FOR(sv->frames == before + 2, WAIT_MS), "both empty frames delivered");

    /* refused sends */
    struct bfs_wire_hdr bad = {.type = 42};
    is_int(bfs_conn_send(cl.conn, &bad, NULL, 0), -EINVAL, "unknown type refused");
    h.type = BFS_WIRE_CALL;
    h.status = -5;
    is_int(bfs_conn_send(cl.conn, &h, NULL, 0), -EINVAL, "CALL with a status refused");
    h.status = 0;
    struct iovec huge = {NULL, (size_t)BFS_WIRE_MAX_BODY + 1};
    is_int(bfs_conn_send(cl.conn, &h, &huge, 1), -EMSGSIZE, "body over 32 MiB refused");
    is_int(bfs_conn_send_buf(cl.conn, &h, malloc(1), (size_t)BFS_WIRE_MAX_BODY + 1), -EMSGSIZE,
           "send_buf over 32 MiB refused (and frees the body)");

    /* closing the client: both sides get exactly one on_close */
    bfs_conn_close(cl.conn, -ECANCELED);
    bfs_conn_close(cl.conn, -EIO); /* second close: no effect */
    ok(WAIT_FOR(cl.closes == 1 && sv->closes == 1, WAIT_MS), "both sides closed");
    is_int(cl.reason, -ECANCELED, "local close reports the first reason");
    is_int(sv->reason, 0, "peer sees EOF (reason 0)");
    is_int(bfs_conn_send(cl.conn, &h, NULL, 0), -ENOTCONN, "send after close refused");
    usleep(50000);
    is_int(cl.closes + sv->closes, 2, "on_close ran exactly once per side");
    bfs_conn_unref(cl.conn);
    bfs_conn_unref(sv->conn);
}

/* Connects a raw blocking socket to port; waits for the accept. */
static int raw_connect(uint16_t port)
{
    int before = naccepted;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || !WAIT_FOR(naccepted > before, WAIT_MS)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads until EOF; 1 if the peer closed within the wait. */
static int raw_sees_eof(int fd)
{
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[256];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        ;
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

static void test_bad_peers(uint16_t port)
{
    struct {
        const char *what;
        int want;
        uint8_t hdr[BFS_WIRE_HDR_LEN];
        size_t n;
    } cases[] = {
        {"garbage (an HTTP request)", BFS_WIRE_EMAGIC, "GET / HTTP/1.1\r\nHost: x\r\n\r\nxxxx", 32},
        {"oversize body", BFS_WIRE_ESIZE, {0}, 32},
        {"reserved field set", BFS_WIRE_ERESERVED, {0}, 32},
        {"truncated frame then EOF", -ECONNRESET, {0}, 32},
        {"half a header then EOF", -ECONNRESET, {0}, 10},
    };
    struct bfs_wire_hdr h = {.version = 1, .type = BFS_WIRE_CALL, .len = BFS_WIRE_MAX_BODY + 1};
    bfs_wire_hdr_encode(&h, cases[1].hdr);
    h.len = 100;
    bfs_wire_hdr_encode(&h, cases[2].hdr);
    cases[2].hdr[31] = 1;
    bfs_wire_hdr_encode(&h, cases[3].hdr); /* promises 100 bytes, sends 0 */
    bfs_wire_hdr_encode(&h, cases[4].hdr);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int fd = raw_connect(port);
        struct side *sv = &servers[naccepted - 1];
        ok(fd >= 0, "%s: connected", cases[i].what);
        if (fd < 0)
            continue;
        sv->check_content = 0;
        ssize_t w = write(fd, cases[i].hdr, cases[i].n);
        (void)w;
        if (cases[i].want == -ECONNRESET)
            shutdown(fd, SHUT_WR);
        ok(WAIT_FOR(sv->closes == 1, WAIT_MS), "%s: server closed the connection",
           cases[i].what);
        is_int(sv->reason, cases[i].want, "%s: reason", cases[i].what);
        is_int(sv->frames, 0, "%s: no frame delivered", cases[i].what);
        ok(raw_sees_eof(fd), "%s: peer sees the connection closed", cases[i].what);
        close(fd);
        bfs_conn_unref(sv->conn);
    }
}

/* A peer that does not read: frames wait in the queue, then EPOLLOUT
 * drains it in order once the peer reads. */
static bool all_bytes(const uint8_t *p, size_t n, uint8_t v)
{
    for (size_t k = 0; k < n; k++)
        if (p[k] != v)
            return false;
    return true;
}

/* A peer that reads nothing for a while. gather: the frames go through
 * bfs_conn_send from one buffer rewritten after every call (so whatever
 * the socket did not take must have been copied), else bfs_conn_send_buf. */
static void test_backpressure(uint16_t port, bool gather)
{
    enum { N = 24, LEN = 1 << 20 };
    const char *what = gather ? "backpressure, gathered sends" : "backpressure";
    int fd = raw_connect(port);
    if (!ok(fd >= 0, "%s: raw peer connected", what))
        return;
    struct side *sv = &servers[naccepted - 1];
    int failed = 0;
    uint8_t *scratch = gather ? malloc(LEN) : NULL;
    for (int i = 0; i < N; i++) {
        struct bfs_wire_hdr h = {.type = BFS_WIRE_UPCALL, .id = (uint64_t)i};
        if (gather) {
            memset(scratch, i, LEN);
            struct iovec iov[3] = {{scratch, 100}, {scratch + 100, LEN / 2},
                                   {scratch + 100 + LEN / 2, LEN - 100 - LEN / 2}};
            failed += bfs_conn_send(sv->conn, &h, iov, 3) != 0;
            memset(scratch, 0xEE, LEN); /* the caller's memory is its own again */
            continue;
        }
        uint8_t *body = malloc(LEN);
        memset(body, i, LEN);
        failed += bfs_conn_send_buf(sv->conn, &h, body, LEN) != 0;
    }
    free(scratch);
    is_int(failed, 0, "%s: %d MiB accepted", what, N);
    size_t queued = bfs_conn_queued_bytes(sv->conn);
    ok(queued > 0, "%s: the unread part waits in the queue (%zu bytes)", what, queued);

    /* now read it all and check every frame */
    uint8_t *buf = malloc(BFS_WIRE_HDR_LEN + LEN);
    int good = 0;
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    for (int i = 0; i < N; i++) {
        size_t got = 0;
        while (got < BFS_WIRE_HDR_LEN + (size_t)LEN) {
            ssize_t n = read(fd, buf + got, BFS_WIRE_HDR_LEN + LEN - got);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        struct bfs_wire_hdr h;
        if (got == BFS_WIRE_HDR_LEN + (size_t)LEN &&
            bfs_wire_hdr_decode(buf, got, &h) == 0 && h.id == (uint64_t)i && h.len == LEN &&
            all_bytes(buf + BFS_WIRE_HDR_LEN, LEN, (uint8_t)i))
            good++;
    }
    is_int(good, N, "%s: every frame arrives whole and in order", what);
    ok(WAIT_FOR(bfs_conn_queued_bytes(sv->conn) == 0, WAIT_MS), "%s: queue drained", what);
    free(buf);
    close(fd);
    ok(WAIT_FOR(sv->closes == 1, WAIT_MS), "%s: EOF closes the server side", what);
    bfs_conn_unref(sv->conn);
}

struct racer {
    struct bfs_conn *c;
    atomic_int stop;
    int sent;
    atomic_int refused;
};

static void *race_sender(void *arg)
{
    struct racer *r = arg;
    static uint8_t body[65536];
    struct bfs_wire_hdr h = {.type = BFS_WIRE_CALL};
    struct iovec iov = {body, sizeof(body)};
    while (!atomic_load(&r->stop)) {
        if (bfs_conn_queued_bytes(r->c) > (4u << 20)) {
            usleep(500); /* the caller's job: bound what waits in the queue */
            continue;
        }
        h.id++;
        if (bfs_conn_send(r->c, &h, &iov, 1) == 0)
            r->sent++;
        else if (atomic_fetch_add(&r->refused, 1) >= 100)
            break; /* closed: sends keep failing cleanly */
    }
    return NULL;
}

static void test_close_race(uint16_t port)
{
    for (int round = 0; round < 3; round++) {
        struct side cl = {0};
        if (!ok(connect_side(port, &cl) == 0, "race %d: connected", round))
            return;
        struct side *sv = &servers[naccepted - 1];
        sv->check_content = cl.check_content = 0;
        struct racer r[3];
        pthread_t t[3];
        for (int i = 0; i < 3; i++) {
            r[i] = (struct racer){.c = (round == 1 ? sv->conn : cl.conn)};
            bfs_conn_ref(r[i].c); /* the sender's own reference */
            pthread_create(&t[i], NULL, race_sender, &r[i]);
        }
        usleep(20000 * (round + 1));
        /* round 0 closes the sending side, round 1 the sending server,
         * round 2 the receiving side (the senders see the reset) */
        bfs_conn_close(round == 2 ? sv->conn : r[0].c, -ECANCELED);
        ok(WAIT_FOR(cl.closes == 1 && sv->closes == 1, WAIT_MS), "race %d: both sides closed",
           round);
        /* every sender must see the close as a refused send */
        for (int ms = 0; ms < WAIT_MS; ms++) {
            if (atomic_load(&r[0].refused) && atomic_load(&r[1].refused) &&
                atomic_load(&r[2].refused))
                break;
            usleep(1000);
        }
        int sent = 0, refused = 0;
        for (int i = 0; i < 3; i++) {
            atomic_store(&r[i].stop, 1);
            pthread_join(t[i], NULL);
            sent += r[i].sent;
            refused += atomic_load(&r[i].refused) > 0;
            bfs_conn_unref(r[i].c);
        }
        ok(sent > 0 && refused == 3, "race %d: %d sends succeeded, then all %d senders were refused",
           round, sent, refused);
        is_int(cl.closes + sv->closes, 2, "race %d: one on_close per side", round);
        bfs_conn_unref(cl.conn);
        bfs_conn_unref(sv->conn);
    }
}

static struct bfs_connect *to_cancel;
static struct conn_result cancel_result;
static uint16_t cancel_port;

/* On the loop thread: optionally start the connect here (so the cancel
 * comes before the loop has run its start), then cancel it. */
static void cancel_task(void *arg)
{
    if (arg && bfs_tcp_connect(loop, "127.0.0.1", cancel_port, 5000, on_connect,
                               &cancel_result, &to_cancel) < 0)
        to_cancel = NULL;
    if (to_cancel)
        bfs_connect_cancel(to_cancel);
    pthread_mutex_lock(&mu);
    cancel_result.done += 100; /* marks that the cancel ran */
    signal_all();
    pthread_mutex_unlock(&mu);
}

static void test_connect_cancel(uint16_t port)
{
    cancel_port = port;
    cancel_result = (struct conn_result){0};
    to_cancel = NULL;
    bfs_loop_post(loop, cancel_task, &cancel_result);
    WAIT_FOR(cancel_result.done >= 100, WAIT_MS);
    usleep(100000);
    ok(to_cancel != NULL, "connect started on the loop thread");
    is_int(cancel_result.done, 100, "connect cancelled before it started never calls back");
    is_int(naccepted, 0, "and never reached the listener");
}

static void test_connect_errors(void)
{
    /* a port nobody listens on: bind one, note it, close it */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    uint16_t dead_port = ntohs(sa.sin_port);
    close(fd);

    struct conn_result r = {0};
    is_int(bfs_tcp_connect(loop, "127.0.0.1", dead_port, 5000, on_connect, &r, NULL), 0,
           "connect to a closed port starts");
    ok(WAIT_FOR(r.done, WAIT_MS), "and completes");
    is_int(r.rc, -ECONNREFUSED, "with ECONNREFUSED");

    is_int(bfs_tcp_connect(loop, "no-such-host.invalid", 1, 100, on_connect, &r, NULL),
           -EHOSTUNREACH, "unresolvable name fails at once");
    is_int(bfs_tcp_connect(loop, "", 1, 100, on_connect, &r, NULL), -EINVAL, "empty host refused");

    /* timeout: a listener with a full accept queue drops further SYNs */
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    sa.sin_port = 0;
    bind(lfd, (struct sockaddr *)&sa, sizeof(sa));
    listen(lfd, 0);
    sl = sizeof(sa);
    getsockname(lfd, (struct sockaddr *)&sa, &sl);
    int held[6], nheld = 0, timed_out = 0;
    for (int i = 0; i < 6 && !timed_out; i++) {
        struct conn_result t = {0};
        bfs_tcp_connect(loop, "127.0.0.1", ntohs(sa.sin_port), 300, on_connect, &t, NULL);
        WAIT_FOR(t.done, WAIT_MS);
        if (t.rc >= 0)
            held[nheld++] = t.rc;
        else
            timed_out = t.rc == -ETIMEDOUT;
    }
    ok(timed_out, "connect to a saturated listener times out (ETIMEDOUT)");

    /* a connect stuck in SYN_SENT there, cancelled from the loop thread */
    cancel_result = (struct conn_result){0};
    to_cancel = NULL;
    is_int(bfs_tcp_connect(loop, "127.0.0.1", ntohs(sa.sin_port), 5000, on_connect,
                           &cancel_result, &to_cancel), 0, "connect to cancel in flight started");
    usleep(50000);
    bfs_loop_post(loop, cancel_task, NULL);
    WAIT_FOR(cancel_result.done >= 100, WAIT_MS);
    usleep(100000);
    is_int(cancel_result.done, 100, "connect cancelled in flight never calls back");
    while (nheld)
        close(held[--nheld]);
    close(lfd);
}

int main(void)
{
    plan_lazy();
    bfs_log_set_level(BFS_LOG_NONE); /* bad peers are expected here */
    loop = bfs_loop_new();
    ok(loop && bfs_loop_start(loop, "test-loop") == 0, "loop running");

    struct bfs_listener *l = NULL;
    is_int(bfs_listener_new(loop, "127.0.0.1", 0, on_accept, NULL, &l), 0, "listener bound");
    uint16_t port = l ? bfs_listener_port(l) : 0;
    ok(port != 0, "ephemeral port reported (%u)", port);
    struct bfs_listener *l2 = NULL;
    is_int(bfs_listener_new(loop, "127.0.0.1", port, on_accept, NULL, &l2), -EADDRINUSE,
           "second bind of the port fails");

    test_pipeline(port);
    naccepted = 0;
    memset(servers, 0, sizeof(servers));
    test_bad_peers(port);
    test_backpressure(port, false);
    test_backpressure(port, true);
    naccepted = 0;
    memset(servers, 0, sizeof(servers));
    test_close_race(port);
    naccepted = 0;
    memset(servers, 0, sizeof(servers));
    test_connect_errors();
    test_connect_cancel(port);

    bfs_listener_free(l);
    struct conn_result r = {0};
    bfs_tcp_connect(loop, "127.0.0.1", port, 2000, on_connect, &r, NULL);
    WAIT_FOR(r.done, WAIT_MS);
    is_int(r.rc, -ECONNREFUSED, "freed listener no longer accepts");
    is_int(naccepted, 0, "and its callback is not called");

    bfs_loop_free(loop);
    return done_testing();
}
