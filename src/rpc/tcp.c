/*
 * tcp.c — the TCP plumbing around bfs_conn (conn.h): a listener that
 * accepts on the event loop, and a non-blocking outgoing connect with a
 * timeout.
 *
 * Listener lifetime: bfs_listener_new() registers the listening socket and
 * bfs_listener_free() removes and frees it. bfs_loop_del_fd() waits for a
 * running handler when called from another thread, so a free from there
 * is final when it returns; a free from inside the accept callback only
 * marks the listener dead, and the handler frees it on its way out. When
 * the process runs out of descriptors (EMFILE), a spare descriptor held
 * for the purpose is released to accept and drop the pending connection,
 * so that a level-triggered listener does not spin.
 *
 * Connect lifetime: bfs_tcp_connect() resolves the name, then posts the
 * start to the loop, so every step (trying addresses, the timeout, the
 * result) runs on the loop thread and fn never runs inside the call. The
 * struct is freed just before fn is called (or when cancelled).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/event.h"
#include "core/log.h"
#include "rpc/conn.h"

#define ACCEPTS_PER_EVENT 64

const char *bfs_sockaddr_fmt(const struct sockaddr *sa, char *buf, size_t size)
{
    char ip[INET6_ADDRSTRLEN];
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
        snprintf(buf, size, "%s:%u", ip, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
        snprintf(buf, size, "[%s]:%u", ip, ntohs(in6->sin6_port));
    } else if (sa->sa_family == AF_UNIX) {
        snprintf(buf, size, "unix");
    } else {
        snprintf(buf, size, "?");
    }
    return buf;
}

/* getaddrinfo with numeric ports; returns 0 or -errno. */
static int resolve(const char *host, uint16_t port, bool passive, struct addrinfo **out)
{
    char serv[8];
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    if (passive)
        hints.ai_flags |= AI_PASSIVE;
    if (host && (!host[0] || strcmp(host, "*") == 0))
        host = NULL;
    snprintf(serv, sizeof(serv), "%u", port);
    int rc = getaddrinfo(host, serv, &hints, out);
    switch (rc) {
    case 0:
        return 0;
    case EAI_MEMORY:
        return -ENOMEM;
    case EAI_SYSTEM:
        return errno ? -errno : -EIO;
    default:
        return -EHOSTUNREACH;
    }
}

/* ---- listener ---- */

struct bfs_listener {
    struct bfs_loop *loop;
    int fd;
    int spare_fd; /* released to shed a connection on EMFILE */
    uint16_t port;
    bfs_accept_fn fn;
    void *arg;
    bool in_handler; /* loop thread only */
    bool dead;       /* freed from inside fn */
};

static void listener_destroy(struct bfs_listener *l)
{
    close(l->fd);
    if (l->spare_fd >= 0)
        close(l->spare_fd);
    free(l);
}

/* Out of descriptors: accept the oldest pending connection with the
 * spare descriptor's slot and drop it, then take the spare back. */
static void shed_one(struct bfs_listener *l)
{
    if (l->spare_fd < 0)
        return;
    close(l->spare_fd);
    int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0)
        close(fd);
    l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void listener_handler(struct bfs_loop *loop, int lfd, int events, void *arg)
{
    struct bfs_listener *l = arg;
    l->in_handler = true;
    for (int i = 0; i < ACCEPTS_PER_EVENT && !l->dead; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE) {
                bfs_log("rpc", BFS_LOG_ERROR, "listener port %u: out of descriptors; "
                        "dropping a connection", l->port);
                shed_one(l);
            } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
                bfs_log("rpc", BFS_LOG_ERROR, "listener port %u: accept: %s", l->port,
                        strerror(errno));
            }
            break;
        }
        char peer[64];
        bfs_sockaddr_fmt((struct sockaddr *)&ss, peer, sizeof(peer));
        l->fn(l, fd, peer, l->arg);
    }
    l->in_handler = false;
    if (l->dead)
        listener_destroy(l);
}

/* Creates, binds and listens on one address. Returns the fd or -errno. */
static int listen_on(const struct addrinfo *ai)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
    if (fd < 0)
        return -errno;
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ai->ai_family == AF_INET6) /* "::" serves IPv4 too */
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    return fd;
}

int bfs_listener_new(struct bfs_loop *loop, const char *host, uint16_t port, bfs_accept_fn fn,
                     void *arg, struct bfs_listener **out)
{
    struct addrinfo *res, *ai;
    int fd = -EADDRNOTAVAIL;

    *out = NULL;
    int rc = resolve(host, port, true, &res);
    if (rc < 0)
        return rc;
    for (ai = res; ai; ai = ai->ai_next)
        if ((fd = listen_on(ai)) >= 0)
            break;
    freeaddrinfo(res);
    if (fd < 0)
        return fd;

    struct bfs_listener *l = calloc(1, sizeof(*l));
    if (!l) {
        close(fd);
        return -ENOMEM;
    }
    *l = (struct bfs_listener){.loop = loop, .fd = fd, .fn = fn, .arg = arg};
    l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        l->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                 : ((struct sockaddr_in *)&ss)->sin_port);
    if ((rc = bfs_loop_add_fd(loop, fd, BFS_EV_IN, listener_handler, l)) < 0) {
        listener_destroy(l);
        return rc;
    }
    *out = l;
    return 0;
}

uint16_t bfs_listener_port(const struct bfs_listener *l)
{
    return l->port;
}

void bfs_listener_free(struct bfs_listener *l)
{
    if (!l)
        return;
    bfs_loop_del_fd(l->loop, l->fd);
    if (bfs_loop_on_loop_thread(l->loop) && l->in_handler) {
        l->dead = true; /* listener_handler frees it on its way out */
        return;
    }
    listener_destroy(l);
}

/* ---- outgoing connect ---- */

struct bfs_connect {
    struct bfs_loop *loop;
    struct addrinfo *res, *next; /* addresses, and the next one to try */
    int fd;                      /* socket of the attempt in flight, or -1 */
    int last_err;
    uint64_t timeout_ms;
    struct bfs_timer *timer;
    bool started, cancelled;
    bfs_connect_fn fn;
    void *arg;
};

static void connect_handler(struct bfs_loop *loop, int fd, int events, void *arg);

/* Drops the attempt in flight (if any). Loop thread. */
static void connect_drop_fd(struct bfs_connect *c)
{
    if (c->fd < 0)
        return;
    bfs_loop_del_fd(c->loop, c->fd);
    close(c->fd);
    c->fd = -1;
}

static void connect_free(struct bfs_connect *c)
{
    connect_drop_fd(c);
    if (c->timer)
        bfs_timer_cancel(c->loop, c->timer);
    freeaddrinfo(c->res);
    free(c);
}

/* Ends the connect with rc (a connected fd, now the callee's, or -errno). */
static void connect_finish(struct bfs_connect *c, int rc)
{
    bfs_connect_fn fn = c->fn;
    void *arg = c->arg;
    if (rc >= 0) {
        bfs_loop_del_fd(c->loop, c->fd);
        c->fd = -1; /* handed over */
    }
    connect_free(c);
    fn(rc, arg);
}

/* Starts connecting to the next address that accepts a connect() call.
 * 0 when an attempt is in flight, else the last error. */
static int connect_next(struct bfs_connect *c)
{
    for (; c->next; c->next = c->next->ai_next) {
        const struct addrinfo *ai = c->next;
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        ai->ai_protocol);
        if (fd < 0) {
            c->last_err = -errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
            c->last_err = -errno;
            close(fd);
            continue;
        }
        /* Done or in progress: either way writability reports the outcome. */
        int rc = bfs_loop_add_fd(c->loop, fd, BFS_EV_OUT, connect_handler, c);
        if (rc < 0) {
            c->last_err = rc;
            close(fd);
            continue;
        }
        c->fd = fd;
        c->next = ai->ai_next;
        return 0;
    }
    return c->last_err ? c->last_err : -EHOSTUNREACH;
}

static void connect_handler(struct bfs_loop *loop, int fd, int events, void *arg)
{
    struct bfs_connect *c = arg;
    int err = 0;
    socklen_t sl = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0)
        err = errno;
    if (err == 0) {
        connect_finish(c, fd);
        return;
    }
    c->last_err = -err;
    connect_drop_fd(c);
    int rc = connect_next(c);
    if (rc < 0)
        connect_finish(c, rc);
}

static void connect_timeout(void *arg)
{
    struct bfs_connect *c = arg;
    c->timer = NULL; /* fired: the loop frees it */
    connect_finish(c, -ETIMEDOUT);
}

static void connect_start(void *arg)
{
    struct bfs_connect *c = arg;
    if (c->cancelled) {
        connect_free(c);
        return;
    }
    c->started = true;
    if (c->timeout_ms && !(c->timer = bfs_timer_add(c->loop, c->timeout_ms, connect_timeout, c))) {
        connect_finish(c, -ENOMEM);
        return;
    }
    int rc = connect_next(c);
    if (rc < 0)
        connect_finish(c, rc);
}

int bfs_tcp_connect(struct bfs_loop *loop, const char *host, uint16_t port, uint64_t timeout_ms,
                    bfs_connect_fn fn, void *arg, struct bfs_connect **out)
{
    if (out)
        *out = NULL;
    if (!host || !host[0])
        return -EINVAL;
    struct bfs_connect *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    int rc = resolve(host, port, false, &c->res);
    if (rc < 0) {
        free(c);
        return rc;
    }
    c->loop = loop;
    c->next = c->res;
    c->fd = -1;
    c->timeout_ms = timeout_ms;
    c->fn = fn;
    c->arg = arg;
    if ((rc = bfs_loop_post(loop, connect_start, c)) < 0) {
        connect_free(c);
        return rc;
    }
    if (out)
        *out = c;
    return 0;
}

void bfs_connect_cancel(struct bfs_connect *c)
{
    if (!c->started) {
        c->cancelled = true; /* connect_start frees it */
        return;
    }
    connect_free(c);
}
