/*
 * http.c — the HTTP server of the REST API (libmicrohttpd, a thread per
 * connection). It gathers a request body (at most 64 KiB), hands the
 * request to bfs_api_dispatch() (api.c) and sends what that answers.
 *
 * Lifetime: one struct conn per request, freed by MHD's completion
 * callback; the daemon lives from bfs_http_start() to bfs_http_stop().
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "core/body.h"
#include "core/log.h"
#include "mgmt/mgmt.h"

#define MAX_BODY (64 * 1024)

struct bfs_http {
    struct MHD_Daemon *d;
    struct bfs_mgmt *m;
};

struct conn {
    struct bfs_body body;  /* at most MAX_BODY; over: answered 413 */
};

static enum MHD_Result send_reply(struct MHD_Connection *c, struct bfs_http_reply *r)
{
    if (!r->body)
        r->body = strdup("{\"error\": \"out of memory\"}\n");
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(r->body), r->body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(r->body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", r->ctype ? r->ctype : "application/json");
    if (r->etag[0]) {
        char tag[48];
        snprintf(tag, sizeof(tag), "\"%s\"", r->etag);
        MHD_add_response_header(resp, "ETag", tag);
        MHD_add_response_header(resp, "X-Brickfs-Volfile-Revision", r->etag);
    }
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls)
{
    struct bfs_http *h = cls;
    struct conn *cc = *con_cls;
    (void)version;
    if (!cc) {
        cc = calloc(1, sizeof(*cc));
        if (!cc)
            return MHD_NO;
        bfs_body_init(&cc->body, MAX_BODY);
        *con_cls = cc;
        return MHD_YES;
    }
    if (*upload_size) {
        /* past the cap the rest is read and dropped, to answer 413 */
        if (bfs_body_append(&cc->body, upload, *upload_size) == -ENOMEM)
            return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    struct bfs_http_reply r = {0};
    if (cc->body.over) {
        r.status = 413;
        r.body = strdup("{\"error\": \"request body larger than 64 KiB\"}\n");
    } else {
        const char *inm = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "If-None-Match");
        const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
        bfs_api_dispatch(h->m, method, url, cc->body.p, cc->body.len, inm, host, &r);
    }
    bfs_log(MGMT_LOG, BFS_LOG_DEBUG, "%s %s -> %d", method, url, r.status);
    return send_reply(c, &r);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
    struct conn *cc = *con_cls;
    (void)cls;
    (void)c;
    (void)toe;
    if (cc) {
        bfs_body_free(&cc->body);
        free(cc);
        *con_cls = NULL;
    }
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    (void)cls;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    msg[strcspn(msg, "\n")] = 0;
    bfs_log(MGMT_LOG, BFS_LOG_WARNING, "http: %s", msg);
}

int bfs_http_start(struct bfs_mgmt *m, struct bfs_http **out, char *err, size_t errlen)
{
    char host[256];
    const char *colon = strrchr(m->listen, ':');
    if (!colon || colon == m->listen || (size_t)(colon - m->listen) >= sizeof(host) ||
        atoi(colon + 1) <= 0 || atoi(colon + 1) > 65535) {
        snprintf(err, errlen, "--listen '%s' is not HOST:PORT", m->listen);
        return -EINVAL;
    }
    memcpy(host, m->listen, (size_t)(colon - m->listen));
    host[colon - m->listen] = 0;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
    int g = getaddrinfo(host, colon + 1, &hints, &ai);
    if (g != 0) {
        snprintf(err, errlen, "--listen '%s': %s", m->listen, gai_strerror(g));
        return -EINVAL;
    }
    struct bfs_http *h = calloc(1, sizeof(*h));
    if (!h) {
        freeaddrinfo(ai);
        return -ENOMEM;
    }
    h->m = m;
    h->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                MHD_USE_ERROR_LOG,
                            0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
                            h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_done, h,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        snprintf(err, errlen, "cannot listen on %s (in use, or not an address of this "
                 "node?)", m->listen);
        free(h);
        return -EADDRINUSE;
    }
    *out = h;
    return 0;
}

void bfs_http_stop(struct bfs_http *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->d);
    free(h);
}
