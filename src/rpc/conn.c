/*
 * conn.c — a framed TCP connection on the event loop (see conn.h for the
 * API and its lifetime rules).
 *
 * Threads: the read side (ibuf, the frame being assembled) is touched only
 * by the loop thread. The write side (the out queue, want_out) and the
 * socket's life (fd, closing) are guarded by c->lock, which is held across
 * sendmsg() so that a sender on another thread never writes into an fd
 * number that was just closed and reused. The fd is closed only in
 * teardown(), on the loop thread, under the lock.
 *
 * Closing: every path ends in teardown() on the loop thread, which removes
 * the fd from the loop, closes it, drops the queue, calls on_close and
 * drops the loop's reference. Errors found by the loop thread tear down
 * directly; bfs_conn_close() marks the conn closing and posts teardown to
 * the loop (if even that allocation fails, it shuts the socket down, which
 * wakes the handler, which sees `closing` and tears down).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/event.h"
#include "core/log.h"
#include "rpc/conn.h"

#define IBUF_SIZE (64u * 1024)
#define DIRECT_READ_MIN (16u * 1024) /* read a body straight into place above this */
#define LOWAT_MAX (4u << 20)         /* SO_RCVLOWAT cap (the kernel caps it too) */
#define READS_PER_EVENT 16           /* fairness between connections of one loop */
#define IOV_BATCH 64

struct out_frame {
    struct out_frame *next;
    size_t sent;   /* bytes of hdr + body already written */
    size_t len;    /* body length */
    uint8_t *body; /* owned; may point into this allocation (copying send) */
    bool body_inline;
    uint8_t hdr[BFS_WIRE_HDR_LEN];
    uint8_t inline_body[]; /* copying send: the body lives here */
};

struct bfs_conn {
    struct bfs_loop *loop;
    struct bfs_conn_cbs cbs;
    void *arg;
    atomic_int refs;
    char peer[64];

    pthread_mutex_t lock;
    int fd;                /* -1 once closed */
    bool started;
    atomic_bool closing;   /* set once, under lock */
    int reason;            /* first close reason */
    bool want_out;         /* EPOLLOUT requested: the loop owns flushing */
    atomic_uint_fast64_t reads; /* reads that brought bytes: the loop's wake-ups for c */
    struct out_frame *oq_head, *oq_tail;
    size_t oq_bytes;

    /* loop thread only */
    bool torn_down;
    uint8_t *ibuf;
    size_t ibeg, iend;
    bool have_hdr;
    struct bfs_wire_hdr cur;
    uint8_t *body;
    size_t body_have;
    int lowat;             /* SO_RCVLOWAT we set (1: the default) */
};

static void conn_handler(struct bfs_loop *loop, int fd, int events, void *arg);

/* ---- creation and references ---- */

struct bfs_conn *bfs_conn_new(struct bfs_loop *loop, int fd, const struct bfs_conn_cbs *cbs,
                              void *arg)
{
    struct bfs_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        close(fd);
        return NULL;
    }
    c->loop = loop;
    c->cbs = *cbs;
    c->arg = arg;
    atomic_init(&c->refs, 1);
    atomic_init(&c->closing, false);
    c->fd = fd;
    c->lowat = 1;
    pthread_mutex_init(&c->lock, NULL);

    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && !(fl & O_NONBLOCK))
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* fails harmlessly off TCP */

    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
        bfs_sockaddr_fmt((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
    else
        strcpy(c->peer, "?");
    return c;
}

struct bfs_conn *bfs_conn_ref(struct bfs_conn *c)
{
    atomic_fetch_add(&c->refs, 1);
    return c;
}

static void oq_free_all(struct bfs_conn *c)
{
    struct out_frame *f = c->oq_head;
    while (f) {
        struct out_frame *next = f->next;
        if (!f->body_inline)
            free(f->body);
        free(f);
        f = next;
    }
    c->oq_head = c->oq_tail = NULL;
    c->oq_bytes = 0;
}

void bfs_conn_unref(struct bfs_conn *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    oq_free_all(c);
    if (c->fd >= 0)
        close(c->fd);
    free(c->ibuf);
    free(c->body);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

const char *bfs_conn_peer(const struct bfs_conn *c)
{
    return c->peer;
}

void *bfs_conn_arg(const struct bfs_conn *c)
{
    return c->arg;
}

struct bfs_loop *bfs_conn_loop(const struct bfs_conn *c)
{
    return c->loop;
}

size_t bfs_conn_queued_bytes(struct bfs_conn *c)
{
    pthread_mutex_lock(&c->lock);
    size_t n = c->oq_bytes;
    pthread_mutex_unlock(&c->lock);
    return n;
}

int bfs_conn_start(struct bfs_conn *c)
{
    pthread_mutex_lock(&c->lock);
    if (atomic_load(&c->closing) || c->started) {
        pthread_mutex_unlock(&c->lock);
        return c->started ? -EALREADY : -ENOTCONN;
    }
    c->ibuf = malloc(IBUF_SIZE);
    if (!c->ibuf) {
        pthread_mutex_unlock(&c->lock);
        return -ENOMEM;
    }
    bfs_conn_ref(c); /* the loop's reference, dropped by teardown */
    c->started = true;
    int rc = bfs_loop_add_fd(c->loop, c->fd, BFS_EV_IN | (c->want_out ? BFS_EV_OUT : 0),
                             conn_handler, c);
    if (rc < 0) {
        c->started = false;
        atomic_fetch_sub(&c->refs, 1); /* cannot be the last: the caller holds one */
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* ---- closing ---- */

/* Loop thread only. Ends the connection; idempotent. */
static void teardown(struct bfs_conn *c, int reason)
{
    if (c->torn_down)
        return;
    c->torn_down = true;
    bfs_loop_del_fd(c->loop, c->fd);

    pthread_mutex_lock(&c->lock);
    if (!atomic_load(&c->closing)) {
        c->reason = reason;
        atomic_store(&c->closing, true);
    }
    close(c->fd);
    c->fd = -1;
    oq_free_all(c);
    reason = c->reason;
    pthread_mutex_unlock(&c->lock);

    free(c->ibuf);
    c->ibuf = NULL;
    free(c->body);
    c->body = NULL;
    c->have_hdr = false;

    if (c->cbs.on_close)
        c->cbs.on_close(c, reason, c->arg);
    bfs_conn_unref(c); /* the loop's reference */
}

static void close_task(void *arg)
{
    struct bfs_conn *c = arg;
    teardown(c, 0 /* reason already recorded */);
    bfs_conn_unref(c); /* the task's reference */
}

void bfs_conn_close(struct bfs_conn *c, int reason)
{
    pthread_mutex_lock(&c->lock);
    if (atomic_load(&c->closing)) {
        pthread_mutex_unlock(&c->lock);
        return;
    }
    c->reason = reason;
    atomic_store(&c->closing, true);
    bool started = c->started;
    pthread_mutex_unlock(&c->lock);
    if (!started)
        return; /* never registered: the last unref closes the fd */

    bfs_conn_ref(c);
    if (bfs_loop_post(c->loop, close_task, c) == 0)
        return;
    bfs_conn_unref(c);
    /* No memory for the task: make the socket report HUP instead, the
     * handler sees `closing` and tears down. */
    pthread_mutex_lock(&c->lock);
    if (c->fd >= 0)
        shutdown(c->fd, SHUT_RDWR);
    pthread_mutex_unlock(&c->lock);
}

/* ---- writing ---- */

/*
 * Writes as much of the queue as the socket takes. c->lock held.
 * Returns 1 when the queue is empty, 0 when the socket is full, -errno on
 * a socket error.
 */
static int flush_locked(struct bfs_conn *c)
{
    while (c->oq_head) {
        struct iovec iov[IOV_BATCH];
        int n = 0;
        for (struct out_frame *f = c->oq_head; f && n + 2 <= IOV_BATCH; f = f->next) {
            size_t off = f->sent;
            if (off < BFS_WIRE_HDR_LEN) {
                iov[n++] = (struct iovec){f->hdr + off, BFS_WIRE_HDR_LEN - off};
                off = BFS_WIRE_HDR_LEN;
            }
            if (f->len > off - BFS_WIRE_HDR_LEN)
                iov[n++] = (struct iovec){f->body + (off - BFS_WIRE_HDR_LEN),
                                          f->len - (off - BFS_WIRE_HDR_LEN)};
        }
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -errno;
        }
        size_t left = (size_t)w;
        c->oq_bytes -= left;
        while (left) {
            struct out_frame *f = c->oq_head;
            size_t rest = BFS_WIRE_HDR_LEN + f->len - f->sent;
            if (left < rest) {
                f->sent += left;
                break;
            }
            left -= rest;
            c->oq_head = f->next;
            if (!c->oq_head)
                c->oq_tail = NULL;
            if (!f->body_inline)
                free(f->body);
            free(f);
        }
    }
    return 1;
}

/* Queues f and writes what the socket takes; f belongs to the queue. */
static int conn_enqueue(struct bfs_conn *c, struct out_frame *f)
{
    int err = 0;
    pthread_mutex_lock(&c->lock);
    if (atomic_load(&c->closing)) {
        pthread_mutex_unlock(&c->lock);
        if (!f->body_inline)
            free(f->body);
        free(f);
        return -ENOTCONN;
    }
    f->next = NULL;
    if (c->oq_tail)
        c->oq_tail->next = f;
    else
        c->oq_head = f;
    c->oq_tail = f;
    c->oq_bytes += BFS_WIRE_HDR_LEN + f->len;
    /* When want_out is set the socket was full and the loop will flush;
     * writing here too would only find it full again. */
    if (!c->want_out) {
        int rc = flush_locked(c);
        if (rc == 0) {
            c->want_out = true;
            if (c->started)
                bfs_loop_mod_fd(c->loop, c->fd, BFS_EV_IN | BFS_EV_OUT);
        } else if (rc < 0) {
            err = rc;
        }
    }
    pthread_mutex_unlock(&c->lock);
    if (err)
        bfs_conn_close(c, err); /* reported through on_close */
    return 0;
}

static int frame_prepare(struct out_frame *f, const struct bfs_wire_hdr *h, size_t len)
{
    struct bfs_wire_hdr hh = *h;
    hh.version = BFS_WIRE_VERSION;
    hh.len = (uint32_t)len;
    int rc = bfs_wire_hdr_check(&hh);
    if (rc == BFS_WIRE_ESIZE)
        return -EMSGSIZE;
    if (rc < 0)
        return -EINVAL;
    bfs_wire_hdr_encode(&hh, f->hdr);
    f->sent = 0;
    f->len = len;
    return 0;
}

/*
 * Writes header and iov straight from the caller's memory while nothing is
 * queued (c->lock held): a big body (a 1 MiB write) then costs no copy
 * here. Returns the bytes written (0 when the socket is full), or -errno.
 */
static ssize_t send_direct(struct bfs_conn *c, const uint8_t *hdr, const struct iovec *iov,
                           int iovcnt, int more)
{
    if (c->oq_head || c->want_out || c->fd < 0 || iovcnt + 1 > IOV_BATCH)
        return 0;
    struct iovec v[IOV_BATCH];
    v[0] = (struct iovec){(void *)hdr, BFS_WIRE_HDR_LEN};
    for (int i = 0; i < iovcnt; i++)
        v[i + 1] = iov[i];
    struct msghdr msg = {.msg_iov = v, .msg_iovlen = (size_t)iovcnt + 1};
    for (;;) {
        ssize_t w = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT | more);
        if (w >= 0)
            return w;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    }
}

static int conn_send(struct bfs_conn *c, const struct bfs_wire_hdr *h, const struct iovec *iov,
                     int iovcnt, int more);

int bfs_conn_send(struct bfs_conn *c, const struct bfs_wire_hdr *h, const struct iovec *iov,
                  int iovcnt)
{
    return conn_send(c, h, iov, iovcnt, 0);
}

int bfs_conn_send_more(struct bfs_conn *c, const struct bfs_wire_hdr *h, const struct iovec *iov,
                       int iovcnt)
{
    return conn_send(c, h, iov, iovcnt, MSG_MORE);
}

static int conn_send(struct bfs_conn *c, const struct bfs_wire_hdr *h, const struct iovec *iov,
                     int iovcnt, int more)
{
    size_t len = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len > BFS_WIRE_MAX_BODY - len)
            return -EMSGSIZE;
        len += iov[i].iov_len;
    }
    struct out_frame hf; /* the encoded header, before any allocation */
    int rc = frame_prepare(&hf, h, len);
    if (rc < 0)
        return rc;

    pthread_mutex_lock(&c->lock);
    if (atomic_load(&c->closing)) {
        pthread_mutex_unlock(&c->lock);
        return -ENOTCONN;
    }
    ssize_t sent = send_direct(c, hf.hdr, iov, iovcnt, more);
    if (sent < 0) {
        pthread_mutex_unlock(&c->lock);
        bfs_conn_close(c, (int)sent); /* reported through on_close */
        return 0;
    }
    if ((size_t)sent == BFS_WIRE_HDR_LEN + len) {
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    /* What the socket did not take is copied and queued, still under the
     * lock: no other frame may come between the two parts. */
    struct out_frame *f = malloc(sizeof(*f) + len);
    if (!f) {
        pthread_mutex_unlock(&c->lock);
        if (sent > 0)
            bfs_conn_close(c, -ENOMEM); /* half a frame is on the wire */
        return sent > 0 ? 0 : -ENOMEM;
    }
    memcpy(f->hdr, hf.hdr, BFS_WIRE_HDR_LEN);
    f->len = len;
    f->sent = (size_t)sent;
    f->body = f->inline_body;
    f->body_inline = true;
    size_t off = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len)
            memcpy(f->body + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    f->next = NULL;
    if (c->oq_tail)
        c->oq_tail->next = f;
    else
        c->oq_head = f;
    c->oq_tail = f;
    c->oq_bytes += BFS_WIRE_HDR_LEN + len - (size_t)sent;
    int err = 0;
    if (!c->want_out) {
        int frc = flush_locked(c); /* the socket may have room again */
        if (frc == 0) {
            c->want_out = true;
            if (c->started)
                bfs_loop_mod_fd(c->loop, c->fd, BFS_EV_IN | BFS_EV_OUT);
        } else if (frc < 0) {
            err = frc;
        }
    }
    pthread_mutex_unlock(&c->lock);
    if (err)
        bfs_conn_close(c, err);
    return 0;
}

int bfs_conn_send_buf(struct bfs_conn *c, const struct bfs_wire_hdr *h, void *body, size_t len)
{
    struct out_frame *f = len <= BFS_WIRE_MAX_BODY ? malloc(sizeof(*f)) : NULL;
    int rc = f ? frame_prepare(f, h, len) : len > BFS_WIRE_MAX_BODY ? -EMSGSIZE : -ENOMEM;
    if (rc < 0) {
        free(f);
        free(body);
        return rc;
    }
    f->body = body;
    f->body_inline = false;
    return conn_enqueue(c, f);
}

uint64_t bfs_conn_reads(struct bfs_conn *c)
{
    return atomic_load_explicit(&c->reads, memory_order_relaxed);
}

/* EPOLLOUT on the loop thread. Returns 0 or -errno (caller tears down). */
static int on_writable(struct bfs_conn *c)
{
    int rc = 0;
    pthread_mutex_lock(&c->lock);
    if (c->fd >= 0 && c->want_out) {
        rc = flush_locked(c);
        if (rc == 1) {
            c->want_out = false;
            bfs_loop_mod_fd(c->loop, c->fd, BFS_EV_IN);
        }
    }
    pthread_mutex_unlock(&c->lock);
    return rc < 0 ? rc : 0;
}

/* ---- reading (loop thread only) ---- */

static bool stopped(struct bfs_conn *c)
{
    return c->torn_down || atomic_load(&c->closing);
}

/*
 * Waking up costs more than reading: a big body (a 1 MiB write or read)
 * arrives over loopback in pieces, and each epoll wake-up of the loop
 * thread is a context switch (tens of microseconds on a virtual machine).
 * While a body is incomplete, SO_RCVLOWAT asks the kernel to report the
 * socket readable only once the rest of it is there; EOF and errors are
 * still reported at once. Back to 1 when the frame is complete.
 */
static void set_lowat(struct bfs_conn *c, size_t want)
{
    int v = want > LOWAT_MAX ? (int)LOWAT_MAX : want < 1 ? 1 : (int)want;
    if (v == c->lowat)
        return;
    if (setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) == 0)
        c->lowat = v;
}

static void deliver(struct bfs_conn *c)
{
    struct bfs_wire_hdr h = c->cur;
    if (c->lowat != 1)
        set_lowat(c, 1);
    void *body = c->body;
    c->body = NULL;
    c->have_hdr = false;
    c->body_have = 0;
    if (c->cbs.on_frame)
        c->cbs.on_frame(c, &h, body, h.len, c->arg);
    else
        free(body);
}

/* Starts a frame from the 32 header bytes at ibuf+ibeg. 0 or -errno. */
static int begin_frame(struct bfs_conn *c)
{
    int rc = bfs_wire_hdr_decode(c->ibuf + c->ibeg, c->iend - c->ibeg, &c->cur);
    if (rc < 0) {
        bfs_log("rpc", BFS_LOG_ERROR, "peer %s: bad frame header: %s; closing", c->peer,
                bfs_wire_strerror(rc));
        return rc;
    }
    c->ibeg += BFS_WIRE_HDR_LEN;
    c->have_hdr = true;
    c->body_have = 0;
    if (c->cur.len && !(c->body = malloc(c->cur.len))) {
        bfs_log("rpc", BFS_LOG_ERROR, "peer %s: no memory for a %u-byte frame; closing",
                c->peer, c->cur.len);
        return -ENOMEM;
    }
    return 0;
}

/* Turns buffered bytes into frames. 0, or -errno after which to tear down. */
static int parse_input(struct bfs_conn *c)
{
    while (!stopped(c)) {
        if (!c->have_hdr) {
            if (c->iend - c->ibeg < BFS_WIRE_HDR_LEN)
                break;
            int rc = begin_frame(c);
            if (rc < 0)
                return rc;
        }
        size_t n = c->iend - c->ibeg;
        if (n > c->cur.len - c->body_have)
            n = c->cur.len - c->body_have;
        if (n) {
            memcpy(c->body + c->body_have, c->ibuf + c->ibeg, n);
            c->body_have += n;
            c->ibeg += n;
        }
        if (c->body_have < c->cur.len)
            break;
        deliver(c);
    }
    if (c->ibuf && c->ibeg == c->iend)
        c->ibeg = c->iend = 0;
    return 0;
}

/* Reads what the socket has, within a budget. Returns false when the
 * connection must end, with *reason 0 (EOF) or -errno. */
static bool do_read(struct bfs_conn *c, int *reason)
{
    for (int i = 0; i < READS_PER_EVENT && !stopped(c); i++) {
        ssize_t n;
        size_t want = c->have_hdr ? c->cur.len - c->body_have : 0;
        if (c->have_hdr && c->ibeg == c->iend && want >= DIRECT_READ_MIN) {
            n = recv(c->fd, c->body + c->body_have, want, 0);
            if (n > 0) {
                atomic_fetch_add_explicit(&c->reads, 1, memory_order_relaxed);
                c->body_have += (size_t)n;
                if (c->body_have == c->cur.len) {
                    deliver(c);
                    continue;
                }
                /* short: the socket is empty (see below); the rest later */
                set_lowat(c, c->cur.len - c->body_have);
                return true;
            }
        } else {
            if (c->ibeg > 0 && IBUF_SIZE - c->iend < BFS_WIRE_HDR_LEN) {
                memmove(c->ibuf, c->ibuf + c->ibeg, c->iend - c->ibeg);
                c->iend -= c->ibeg;
                c->ibeg = 0;
            }
            size_t room = IBUF_SIZE - c->iend;
            n = recv(c->fd, c->ibuf + c->iend, room, 0);
            if (n > 0) {
                atomic_fetch_add_explicit(&c->reads, 1, memory_order_relaxed);
                c->iend += (size_t)n;
                int rc = parse_input(c);
                if (rc < 0) {
                    *reason = rc;
                    return false;
                }
                /* A short read emptied the socket: asking again would only
                 * say EAGAIN (a system call per message); epoll is
                 * level-triggered and reports what arrives next. */
                if ((size_t)n < room) {
                    if (c->have_hdr && c->cur.len - c->body_have >= DIRECT_READ_MIN)
                        set_lowat(c, c->cur.len - c->body_have);
                    return true;
                }
                continue;
            }
        }
        if (n == 0) {
            *reason = 0; /* EOF */
            return false;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (c->have_hdr && c->cur.len - c->body_have >= DIRECT_READ_MIN)
                set_lowat(c, c->cur.len - c->body_have);
            return true;
        }
        *reason = -errno;
        if (errno != ECONNRESET)
            bfs_log("rpc", BFS_LOG_WARNING, "peer %s: read failed: %s", c->peer, strerror(errno));
        return false;
    }
    return true;
}

static void conn_handler(struct bfs_loop *loop, int fd, int events, void *arg)
{
    struct bfs_conn *c = arg;
    int reason = 0;

    if (c->torn_down)
        return;
    bfs_conn_ref(c); /* callbacks below may drop every other reference */
    if (atomic_load(&c->closing)) {
        teardown(c, 0);
        goto out;
    }
    if ((events & (BFS_EV_IN | BFS_EV_ERR)) && !do_read(c, &reason)) {
        if (reason == 0 && (c->have_hdr || c->iend > c->ibeg)) {
            bfs_log("rpc", BFS_LOG_ERROR, "peer %s: connection closed inside a frame", c->peer);
            reason = -ECONNRESET; /* truncated frame */
        }
        teardown(c, reason);
        goto out;
    }
    if (!c->torn_down && (events & BFS_EV_OUT) && (reason = on_writable(c)) < 0)
        teardown(c, reason);
    else if (!c->torn_down && atomic_load(&c->closing))
        teardown(c, 0);
out:
    bfs_conn_unref(c);
}
