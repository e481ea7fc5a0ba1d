/*
 * client-portmap.c — asking brickfsd where our brick listens
 * (docs/design/graph-switch.md, "The port map").
 *
 * With option mgmt-server HOST:PORT (and mgmt-volume VOL), every connect
 * attempt starts with GET /v1/volumes/VOL/bricks/BRICK on brickfsd; its
 * "port" is where we connect. The question is blocking HTTP, so it runs as
 * a task on the process's worker pool, never on the event loop; the answer
 * comes back to the loop as a posted task (cli_pm_answer) that records the
 * port and starts the TCP connect. When brickfsd cannot answer, the last
 * known port (or remote-port) is used: a mount keeps working while brickfsd
 * restarts.
 *
 * Objects and their lives: a struct pm_query is made per question by the
 * loop thread (cli_pm_ask), owned by the worker task while it runs, then by
 * the posted answer task, which frees it. priv->pm points to the question
 * in flight; a stop (cli_pm_cancel, loop thread) only marks it cancelled,
 * so the answer is dropped. priv->pm_outstanding counts questions not yet
 * answered on the loop: fini waits for zero, because the worker's and the
 * answer's code live in this module, which fini's caller unloads.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <json-c/json.h>

#include "client.h"

#include "core/event.h"

#define PM_CONNECT_MS 2000  /* brickfsd is near, or down */
#define PM_TOTAL_MS 5000    /* the whole question, answer included */
#define PM_MAX_ANSWER 65536

struct pm_query {
    struct cli_priv *priv;  /* valid until the answer task ends (fini waits) */
    bool cancelled;         /* loop thread only */
    char host[256];
    char port[8];
    char path[600];
    int result;             /* the port, or -errno */
    char why[600];          /* a failure, for the log */
};

int cli_pm_parse_server(const char *spec, char *host, size_t hostlen, uint16_t *port)
{
    const char *colon = strrchr(spec, ':');
    char *end;
    if (!colon || colon == spec || (size_t)(colon - spec) >= hostlen)
        return -EINVAL;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 1 || p > 65535)
        return -EINVAL;
    const char *h = spec;
    size_t n = (size_t)(colon - spec);
    if (h[0] == '[' && n >= 2 && h[n - 1] == ']') { /* [v6]:port */
        h++;
        n -= 2;
    }
    memcpy(host, h, n);
    host[n] = 0;
    *port = (uint16_t)p;
    return 0;
}

/* ---- blocking HTTP/1.0 GET, on a worker ---- */

static int wait_fd(int fd, short events, uint64_t deadline_ms)
{
    for (;;) {
        uint64_t now = bfs_now_ms();
        if (now >= deadline_ms)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, (int)(deadline_ms - now));
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

static int connect_to(const char *host, const char *port, uint64_t deadline_ms)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai, *a;
    if (getaddrinfo(host, port, &hints, &ai) != 0)
        return -EHOSTUNREACH;
    int rc = -ECONNREFUSED;
    for (a = ai; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            rc = -errno;
            continue;
        }
        uint64_t cdl = bfs_now_ms() + PM_CONNECT_MS;
        if (cdl > deadline_ms)
            cdl = deadline_ms;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS) {
            int err = 0;
            socklen_t len = sizeof(err);
            rc = wait_fd(fd, POLLOUT, cdl);
            if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
                freeaddrinfo(ai);
                return fd;
            }
            if (rc == 0)
                rc = -(err ? err : ECONNREFUSED);
        } else {
            rc = -errno;
        }
        close(fd);
    }
    freeaddrinfo(ai);
    return rc;
}

/* GET path; the body (NUL-terminated, malloc'd) and the HTTP status. */
static int http_get(const struct pm_query *q, int *status, char **body)
{
    uint64_t deadline = bfs_now_ms() + PM_TOTAL_MS;
    int fd = connect_to(q->host, q->port, deadline);
    if (fd < 0)
        return fd;
    char req[1024];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: %s:%s\r\n"
                     "Accept: application/json\r\nConnection: close\r\n\r\n", q->path, q->host,
                     q->port);
    int rc = 0;
    for (int off = 0; off < n && rc == 0;) {
        ssize_t w = send(fd, req + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w > 0)
            off += (int)w;
        else if (w < 0 && errno == EAGAIN)
            rc = wait_fd(fd, POLLOUT, deadline);
        else if (w < 0 && errno != EINTR)
            rc = -errno;
    }
    char *buf = malloc(PM_MAX_ANSWER + 1);
    size_t len = 0;
    if (!buf)
        rc = -ENOMEM;
    while (rc == 0 && len < PM_MAX_ANSWER) {
        ssize_t r = recv(fd, buf + len, PM_MAX_ANSWER - len, 0);
        if (r > 0)
            len += (size_t)r;
        else if (r == 0)
            break;
        else if (errno == EAGAIN)
            rc = wait_fd(fd, POLLIN, deadline);
        else if (errno != EINTR)
            rc = -errno;
    }
    close(fd);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[len] = 0;
    char *sep = strstr(buf, "\r\n\r\n");
    if (sscanf(buf, "HTTP/%*d.%*d %d", status) != 1 || !sep) {
        free(buf);
        return -EPROTO;
    }
    memmove(buf, sep + 4, len - (size_t)(sep + 4 - buf) + 1);
    *body = buf;
    return 0;
}

static void ask_task(void *arg)
{
    struct pm_query *q = arg;
    int status = 0;
    char *body = NULL;
    int rc = http_get(q, &status, &body);
    if (rc < 0) {
        snprintf(q->why, sizeof(q->why), "brickfsd at %s:%s: %s", q->host, q->port,
                 strerror(-rc));
    } else {
        json_object *j = json_tokener_parse(body);
        json_object *p = NULL, *err = NULL;
        if (status == 200 && j && json_object_object_get_ex(j, "port", &p) &&
            json_object_get_int(p) > 0 && json_object_get_int(p) <= 65535) {
            rc = json_object_get_int(p);
        } else {
            rc = status == 404 ? -ENOENT : -EPROTO;
            if (j && json_object_object_get_ex(j, "error", &err))
                snprintf(q->why, sizeof(q->why), "brickfsd at %s:%s: %s", q->host, q->port,
                         json_object_get_string(err));
            else
                snprintf(q->why, sizeof(q->why), "brickfsd at %s:%s answered %d", q->host,
                         q->port, status);
        }
        json_object_put(j);
        free(body);
    }
    q->result = rc;
    /* The loop must hear the answer: it is what starts the connect, and what
     * lets fini go on. A post fails only without memory; try again. */
    while (bfs_loop_post(q->priv->loop, cli_pm_answer, q) < 0)
        usleep(100 * 1000);
}

/* ---- the loop's side ---- */

int cli_pm_ask(struct cli_priv *priv)
{
    struct pm_query *q = calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    q->priv = priv;
    snprintf(q->host, sizeof(q->host), "%s", priv->mgmt_host);
    snprintf(q->port, sizeof(q->port), "%u", priv->mgmt_port);
    snprintf(q->path, sizeof(q->path), "/v1/volumes/%s/bricks/%s", priv->mgmt_volume,
             priv->subvol);
    pthread_mutex_lock(&priv->lock);
    priv->pm_outstanding++;
    pthread_mutex_unlock(&priv->lock);
    int rc = bfs_workers_submit(priv->workers, ask_task, q);
    if (rc < 0) {
        pthread_mutex_lock(&priv->lock);
        priv->pm_outstanding--;
        pthread_mutex_unlock(&priv->lock);
        free(q);
        return rc;
    }
    priv->pm = q;
    return 0;
}

void cli_pm_answer(void *arg)
{
    struct pm_query *q = arg;
    struct cli_priv *priv = q->priv;
    if (!q->cancelled) {
        priv->pm = NULL;
        pthread_mutex_lock(&priv->lock);
        uint16_t old = priv->port;
        if (q->result > 0)
            priv->port = (uint16_t)q->result;
        priv->pm_answers += q->result > 0;
        priv->pm_failures += q->result < 0;
        pthread_mutex_unlock(&priv->lock);
        if (q->result > 0 && old != q->result) {
            char was[32] = "";
            if (old)
                snprintf(was, sizeof(was), "; was port %u", old);
            XL_INFO(priv->xl, "brick %s listens on %s:%d (port map of %s:%u%s)", priv->subvol,
                    priv->host, q->result, priv->mgmt_host, priv->mgmt_port, was);
            priv->pm_logged = false;
        } else if (q->result > 0) {
            priv->pm_logged = false;
        } else if (!priv->pm_logged) {
            XL_WARN(priv->xl, "cannot ask where brick %s listens: %s; %s", priv->subvol, q->why,
                    old ? "trying the last known port" : "retrying");
            priv->pm_logged = true;
        }
        cli_pm_connect(priv, q->result);
    }
    free(q);
    /* Last: fini may free priv once it sees no question outstanding. */
    pthread_mutex_lock(&priv->lock);
    priv->pm_outstanding--;
    pthread_cond_broadcast(&priv->cond);
    pthread_mutex_unlock(&priv->lock);
}

void cli_pm_cancel(struct cli_priv *priv)
{
    if (priv->pm)
        priv->pm->cancelled = true;
    priv->pm = NULL;
}
