/*
 * fuse-volfile.c — the client volfile from brickfsd:
 * GET /v1/volumes/VOLUME/volfile/client (docs/API.md), with fail-over over
 * the server list (the mount's HOST[:PORT] first, then
 * backup-volfile-servers), over libcurl.
 *
 * A fetch starts with the server that answered last and goes round the
 * list once. A server that cannot be reached or answers 5xx is a failure
 * (next server); any other answer — 200, 304 unchanged, 404 no such
 * volume — is the answer. Blocking: called at startup and from the watcher
 * thread (fuse-switch.c), never from a FUSE or graph thread.
 *
 * Each fetch has its own curl handle (cheap at one poll every few seconds,
 * and no state to guard); curl_global_init runs once in main().
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "core/body.h"
#include "fuse/fuse-bridge.h"

#define VOLFILE_MAX (4u << 20)
#define CONNECT_TIMEOUT_MS 3000L
#define TOTAL_TIMEOUT_MS 10000L

struct answer {
    struct bfs_body body;  /* at most VOLFILE_MAX: curl stops with a write error */
    char etag[64];
};

/* ETag: "REV" -> REV */
static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    struct answer *a = arg;
    size_t len = size * n;
    if (len > 5 && strncasecmp(p, "ETag:", 5) == 0) {
        size_t i = 5, k = 0;
        while (i < len && (p[i] == ' ' || p[i] == '"'))
            i++;
        while (i < len && p[i] != '"' && p[i] != '\r' && p[i] != '\n' &&
               k + 1 < sizeof(a->etag))
            a->etag[k++] = p[i++];
        a->etag[k] = 0;
    }
    return len;
}

void bfs_fuse_server_fmt(const struct bfs_fuse_server *s, char *buf, size_t len)
{
    bool v6 = strchr(s->host, ':') != NULL;
    snprintf(buf, len, "%s%s%s:%u", v6 ? "[" : "", s->host, v6 ? "]" : "", s->port);
}

/* One request to server s. Returns the HTTP status, or -1 with err set when
 * the server could not be asked. */
static long ask(const struct bfs_fuse_server *s, const char *vol, const char *etag,
                struct answer *a, char *err, size_t errlen)
{
    char addr[300], url[600], inm[96];
    bfs_fuse_server_fmt(s, addr, sizeof(addr));
    snprintf(url, sizeof(url), "http://%s/v1/volumes/%s/volfile/client", addr, vol);
    CURL *h = curl_easy_init();
    if (!h) {
        snprintf(err, errlen, "%s: cannot start an HTTP request", addr);
        return -1;
    }
    struct curl_slist *hdrs = NULL;
    if (etag && *etag) {
        snprintf(inm, sizeof(inm), "If-None-Match: \"%s\"", etag);
        hdrs = curl_slist_append(hdrs, inm);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");      /* brickfsd is never behind a proxy */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);      /* threads: no SIGALRM for DNS */
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, TOTAL_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, bfs_body_curl_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &a->body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, a);
    CURLcode cc = curl_easy_perform(h);
    long status = -1;
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    else if (a->body.over)
        snprintf(err, errlen, "%s: the volfile is larger than %u bytes", addr, VOLFILE_MAX);
    else
        snprintf(err, errlen, "%s: %s", addr, curl_easy_strerror(cc));
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return status;
}

/* The "error" of a JSON error answer, else the status. */
static void answer_error(const struct bfs_fuse_server *s, long status, const struct answer *a,
                         char *err, size_t errlen)
{
    char addr[300];
    bfs_fuse_server_fmt(s, addr, sizeof(addr));
    const char *m = a->body.p ? strstr(a->body.p, "\"error\"") : NULL;
    if (m && (m = strchr(m + 7, '"'))) {
        const char *end = strchr(m + 1, '"');
        if (end) {
            snprintf(err, errlen, "%s: %.*s", addr, (int)(end - m - 1), m + 1);
            return;
        }
    }
    snprintf(err, errlen, "%s answered HTTP %ld", addr, status);
}

int bfs_fuse_volfile_fetch(struct bfs_fuse *fu, const char *etag, struct bfs_fuse_volfile *out,
                           char *err, size_t errlen)
{
    const struct bfs_fuse_opts *o = fu->opts;
    memset(out, 0, sizeof(*out));
    err[0] = 0;
    int n = o->nservers;
    for (int k = 0; k < n; k++) {
        int idx = (fu->server + k) % n;
        const struct bfs_fuse_server *s = &o->servers[idx];
        struct answer a = {0};
        bfs_body_init(&a.body, VOLFILE_MAX);
        char why[512] = "";
        long status = ask(s, o->volname, etag, &a, why, sizeof(why));
        if (status < 0 || status >= 500) {
            if (status >= 500)
                answer_error(s, status, &a, why, sizeof(why));
            bfs_log("fuse", BFS_LOG_DEBUG, "volfile server %s", why);
            if (!err[0]) /* the first server's reason: the one people name */
                snprintf(err, errlen, "%s", why);
            bfs_body_free(&a.body);
            continue;
        }
        if (idx != fu->server) {
            char addr[300];
            bfs_fuse_server_fmt(s, addr, sizeof(addr));
            bfs_log("fuse", BFS_LOG_INFO, "volfile server is now %s", addr);
        }
        fu->server = idx;
        bfs_fuse_server_fmt(s, out->source, sizeof(out->source));
        if (status == 304) {
            bfs_body_free(&a.body); /* a 304 has no body; a stray one is dropped */
            return 304;
        }
        if (status != 200) {
            answer_error(s, status, &a, err, errlen);
            bfs_body_free(&a.body);
            return status == 404 ? -ENOENT : -EPROTO;
        }
        out->len = a.body.len;
        out->text = bfs_body_take(&a.body);
        if (!out->text) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        snprintf(out->etag, sizeof(out->etag), "%s", a.etag);
        return 200;
    }
    if (n > 1) {
        size_t used = strlen(err);
        snprintf(err + used, errlen - used, " (and %d backup server%s)", n - 1,
                 n > 2 ? "s" : "");
    }
    return -EHOSTUNREACH;
}
