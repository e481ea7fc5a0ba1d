/*
 * api.c — the REST routes of brickfsd (docs/API.md): parses the URL and
 * the JSON body, calls the operation (volume-ops.c, option-ops.c) and
 * turns its result or error into a reply. Errors are {"error": "..."}.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "mgmt/mgmt.h"
#include "mgmt/pool.h"
#include "mgmt/store.h"

#define MAX_SEGS 8

static void reply_json(struct bfs_http_reply *r, int status, struct json_object *j)
{
    const char *s = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY |
                                                          JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t n = strlen(s);
    r->status = status;
    r->ctype = "application/json";
    r->body = malloc(n + 2);
    if (r->body) {
        memcpy(r->body, s, n);
        r->body[n] = '\n';
        r->body[n + 1] = 0;
    }
    json_object_put(j);
}

static void reply_error(struct bfs_http_reply *r, int status, const char *msg)
{
    struct json_object *j = json_object_new_object();
    json_object_object_add(j, "error", json_object_new_string(msg));
    reply_json(r, status, j);
}

static void reply_op(struct bfs_http_reply *r, int rc, int ok_status, struct json_object *out,
                     const struct bfs_err *e)
{
    /* A store failure deep inside an operation: say that etcd is the cause
     * (503) rather than a bare errno (docs/design/pool.md). */
    if (rc < 0 && (e->status == 500 || !e->status) && strstr(bfs_store_errmsg(), "unreachable") &&
        !strstr(e->msg, "unreachable")) {
        char msg[1400], what[1100];
        snprintf(what, sizeof(what), "%s", e->msg[0] ? e->msg : "failed");
        /* "...: No route to host" is the errno of it; the reason follows */
        char *tail = strstr(what, ": No route to host");
        if (tail)
            *tail = 0;
        snprintf(msg, sizeof(msg), "%s: %s; volumes keep serving I/O; retry when etcd is "
                 "back", what, bfs_store_errmsg());
        return reply_error(r, 503, msg);
    }
    if (rc < 0)
        reply_error(r, e->status ? e->status : 500, e->msg[0] ? e->msg : "internal error");
    else
        reply_json(r, ok_status, out);
}

static int split(const char *url, char segs[MAX_SEGS][256])
{
    int n = 0;
    const char *p = url;
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *s = p;
        while (*p && *p != '/')
            p++;
        if (n == MAX_SEGS || (size_t)(p - s) >= 256)
            return -1;
        memcpy(segs[n], s, (size_t)(p - s));
        segs[n][p - s] = 0;
        n++;
    }
    return n;
}

static int int_field(struct json_object *b, const char *key)
{
    struct json_object *o;
    return json_object_object_get_ex(b, key, &o) ? json_object_get_int(o) : 0;
}

static bool bool_field(struct json_object *b, const char *key)
{
    struct json_object *o;
    return b && json_object_object_get_ex(b, key, &o) && json_object_get_boolean(o);
}

static void do_create(struct bfs_mgmt *m, struct json_object *b, struct bfs_http_reply *r)
{
    struct bfs_volcreate_req req = {0};
    struct json_object *o, *arr, *out = NULL;
    struct bfs_err e = {0};
    if (!b || !json_object_is_type(b, json_type_object))
        return reply_error(r, 400, "the body must be a JSON object: {\"name\": ..., "
                           "\"bricks\": [\"HOST:/DIR\", ...]}");
    req.name = json_object_object_get_ex(b, "name", &o) ? json_object_get_string(o) : NULL;
    req.type = json_object_object_get_ex(b, "type", &o) ? json_object_get_string(o) : NULL;
    req.replica = int_field(b, "replica");
    req.arbiter = int_field(b, "arbiter");
    req.disperse = int_field(b, "disperse");
    req.redundancy = int_field(b, "redundancy");
    req.disperse_data = int_field(b, "disperse-data");
    req.force = bool_field(b, "force");
    if (json_object_object_get_ex(b, "bricks", &arr)) {
        if (!json_object_is_type(arr, json_type_array))
            return reply_error(r, 400, "\"bricks\" must be an array of \"HOST:/DIR\"");
        req.nbricks = (int)json_object_array_length(arr);
        req.bricks = calloc((size_t)req.nbricks + 1, sizeof(*req.bricks));
        if (!req.bricks)
            return reply_error(r, 500, "out of memory");
        for (int i = 0; i < req.nbricks; i++) {
            struct json_object *s = json_object_array_get_idx(arr, (size_t)i);
            req.bricks[i] = json_object_is_type(s, json_type_string) ? json_object_get_string(s)
                                                                      : "";
        }
    }
    /* in a pool, a brick HOST may name another node: it owns that brick */
    char **specs = NULL, **nodes = NULL;
    int rc = 0;
    if (bfs_pool_enabled(m) && req.nbricks > 0) {
        rc = bfs_pool_owners(m, req.bricks, req.nbricks, &specs, &nodes, &e);
        if (rc == 0) {
            for (int i = 0; i < req.nbricks; i++)
                req.bricks[i] = specs[i];
            req.nodes = (const char **)nodes;
        }
    }
    if (rc == 0)
        rc = bfs_op_create(m, &req, &out, &e);
    bfs_pool_owners_free(specs, nodes, req.nbricks);
    free(req.bricks);
    reply_op(r, rc, 201, out, &e);
}

/* A Host header that can go into a volfile as mgmt-server: HOST:PORT with
 * HOST a name or IPv4 address, or [IPv6]:PORT. Anything else (no port, odd
 * characters) is not used. */
static bool host_port_ok(const char *h)
{
    if (!h)
        return false;
    const char *colon = strrchr(h, ':');
    if (!colon || colon == h || strlen(colon + 1) < 1 || strlen(colon + 1) > 5)
        return false;
    for (const char *p = colon + 1; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    bool v6 = h[0] == '[';
    if (v6 && colon[-1] != ']')
        return false;
    for (const char *p = h + v6; p < colon - v6; p++) {
        bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                  (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' || (v6 && *p == ':');
        if (!ok)
            return false;
    }
    return colon - h < 256;
}

static void volfile(struct bfs_mgmt *m, const char *name, const char *inm, const char *host,
                    struct bfs_http_reply *r)
{
    char *text = NULL;
    uint64_t rev = 0;
    struct bfs_err e = {0};
    if (bfs_op_client_volfile(m, name, host_port_ok(host) ? host : NULL, &text, &rev, &e) < 0)
        return reply_error(r, e.status, e.msg);
    snprintf(r->etag, sizeof(r->etag), "%llu", (unsigned long long)rev);
    char quoted[40];
    snprintf(quoted, sizeof(quoted), "\"%s\"", r->etag);
    r->ctype = "text/plain";
    if (inm && (strcmp(inm, quoted) == 0 || strcmp(inm, r->etag) == 0)) {
        free(text);
        r->status = 304;
        r->body = strdup("");
        return;
    }
    r->status = 200;
    r->body = text;
}

/* In a pool, start and stop return once every node acted on its bricks
 * (docs/design/pool.md): *out becomes the status at that moment. */
static int pool_wait(struct bfs_mgmt *m, const char *name, bool start, int rc,
                     struct json_object **out, struct bfs_err *e)
{
    if (rc < 0 || !bfs_pool_enabled(m))
        return rc;
    rc = bfs_pool_wait_bricks(m, name, start, m->start_timeout_ms + 5000, e);
    json_object_put(*out);
    *out = NULL;
    return rc < 0 ? rc : bfs_op_status(m, name, out, e);
}

static const char *str_field(struct json_object *b, const char *key)
{
    struct json_object *o;
    if (!b || !json_object_object_get_ex(b, key, &o) || !json_object_is_type(o, json_type_string))
        return NULL;
    return json_object_get_string(o);
}

/* /v1/volumes/NAME/heal[/...] */
static void heal_routes(struct bfs_mgmt *m, const char *method, char segs[][256], int n,
                        struct json_object *b, struct bfs_http_reply *r)
{
    const char *name = segs[2], *what = n > 4 ? segs[4] : NULL;
    struct json_object *out = NULL;
    struct bfs_err e = {0};
    bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    int rc;
    if (!what && post)
        rc = bfs_op_heal(m, name, &out, &e);
    else if (what && strcmp(what, "info") == 0 && n <= 6 && get)
        rc = bfs_op_heal_info(m, name, n == 6 ? segs[5] : NULL, &out, &e);
    else if (what && n == 5 && (strcmp(what, "statistics") == 0 || strcmp(what, "progress") == 0)
             && get)
        rc = bfs_op_heal_stats(m, name, &out, &e);
    else if (what && n == 5 && strcmp(what, "split-brain") == 0 && post) {
        if (b && !json_object_is_type(b, json_type_object))
            return reply_error(r, 400, "the body must be a JSON object: {\"policy\": ..., "
                               "\"file\": ..., \"source_brick\": ...}");
        rc = bfs_op_heal_resolve(m, name, str_field(b, "policy"), str_field(b, "file"),
                                 str_field(b, "source_brick"), &out, &e);
    } else if (!what || (n == 5 && (strcmp(what, "statistics") == 0 ||
                                    strcmp(what, "progress") == 0 ||
                                    strcmp(what, "split-brain") == 0)) ||
               (strcmp(what, "info") == 0 && n <= 6))
        return reply_error(r, 405, "method not allowed on this route (docs/API.md)");
    else
        return reply_error(r, 404, "no such API route (docs/API.md lists them)");
    reply_op(r, rc, 200, out, &e);
}

/* "bricks": [...] of b as a NULL-terminated array (malloc'd; the strings
 * are b's). -1 when present but not an array of strings. */
static int brick_list(struct json_object *b, const char ***out, int *n)
{
    struct json_object *arr;
    *n = 0;
    *out = NULL;
    if (!b || !json_object_object_get_ex(b, "bricks", &arr))
        return (*out = calloc(1, sizeof(**out))) ? 0 : -1;
    if (!json_object_is_type(arr, json_type_array))
        return -1;
    *n = (int)json_object_array_length(arr);
    *out = calloc((size_t)*n + 1, sizeof(**out));
    if (!*out)
        return -1;
    for (int i = 0; i < *n; i++) {
        struct json_object *s = json_object_array_get_idx(arr, (size_t)i);
        if (!json_object_is_type(s, json_type_string)) {
            free(*out);
            return -1;
        }
        (*out)[i] = json_object_get_string(s);
    }
    return 0;
}

/* add-brick, remove-brick, replace-brick, rebalance (docs/design/rebalance.md). */
static bool elastic_routes(struct bfs_mgmt *m, const char *method, const char *name,
                           const char *sub, struct json_object *b, struct bfs_http_reply *r)
{
    struct json_object *out = NULL;
    struct bfs_err e = {0};
    bool post = strcmp(method, "POST") == 0, get = strcmp(method, "GET") == 0;
    const char **bricks;
    int n, rc;
    if (strcmp(sub, "rebalance") == 0 && get) {
        rc = bfs_op_rebalance_status(m, name, &out, &e);
    } else if (strcmp(sub, "rebalance") == 0 && post) {
        const char *a = str_field(b, "action");
        if (a && strcmp(a, "status") == 0)
            rc = bfs_op_rebalance_status(m, name, &out, &e);
        else
            rc = bfs_op_rebalance(m, name, a, &out, &e);
    } else if (strcmp(sub, "replace-brick") == 0 && post) {
        const char *o = str_field(b, "old"), *nw = str_field(b, "new");
        if (!o || !nw) {
            reply_error(r, 400, "replace-brick needs {\"old\": \"HOST:/DIR\", \"new\": "
                        "\"HOST:/DIR\"}");
            return true;
        }
        rc = bfs_op_replace_brick(m, name, o, nw, bool_field(b, "force"), &out, &e);
    } else if ((strcmp(sub, "add-brick") == 0 || strcmp(sub, "remove-brick") == 0) && post) {
        if (brick_list(b, &bricks, &n) < 0) {
            reply_error(r, 400, "\"bricks\" must be an array of \"HOST:/DIR\"");
            return true;
        }
        if (sub[0] == 'a')
            rc = bfs_op_add_brick(m, name, bricks, n, b ? int_field(b, "replica") : 0,
                                  bool_field(b, "force"), &out, &e);
        else
            rc = bfs_op_remove_brick(m, name, bricks, n, str_field(b, "action"), &out, &e);
        free(bricks);
    } else if (strcmp(sub, "rebalance") == 0 || strcmp(sub, "add-brick") == 0 ||
               strcmp(sub, "remove-brick") == 0 || strcmp(sub, "replace-brick") == 0) {
        reply_error(r, 405, "method not allowed on this route (docs/API.md)");
        return true;
    } else {
        return false;
    }
    reply_op(r, rc, 200, out, &e);
    return true;
}

/* /v1/volumes/NAME[/...] */
static void volume_routes(struct bfs_mgmt *m, const char *method, char segs[][256], int n,
                          struct json_object *b, const char *inm, const char *host,
                          struct bfs_http_reply *r)
{
    const char *name = segs[2], *sub = n > 3 ? segs[3] : NULL;
    const char *key = n > 4 ? segs[4] : NULL;
    struct json_object *out = NULL;
    struct bfs_err e = {0};
    bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    bool del = strcmp(method, "DELETE") == 0;
    int rc;
    if (sub && strcmp(sub, "heal") == 0)
        return heal_routes(m, method, segs, n, b, r);
    if (sub && n == 4 && elastic_routes(m, method, name, sub, b, r))
        return;
    if (!sub && get)
        rc = bfs_op_info(m, name, &out, &e);
    else if (!sub && del)
        rc = bfs_op_delete(m, name, &out, &e);
    else if (sub && n == 4 && strcmp(sub, "start") == 0 && post)
        rc = pool_wait(m, name, true, bfs_op_start(m, name, bool_field(b, "force"), &out, &e),
                       &out, &e);
    else if (sub && n == 4 && strcmp(sub, "stop") == 0 && post)
        rc = pool_wait(m, name, false, bfs_op_stop(m, name, &out, &e), &out, &e);
    else if (sub && n == 4 && (strcmp(sub, "status") == 0 || strcmp(sub, "bricks") == 0) && get)
        rc = bfs_op_status(m, name, &out, &e);
    else if (sub && n == 5 && strcmp(sub, "bricks") == 0 && get)
        rc = bfs_op_brick_status(m, name, key, &out, &e); /* the port map, one brick */
    else if (sub && strcmp(sub, "options") == 0 && n <= 5 && get)
        rc = bfs_op_get(m, name, key, &out, &e);
    else if (sub && strcmp(sub, "options") == 0 && n == 4 && post) {
        struct json_object *opts = NULL;
        if (b)
            json_object_object_get_ex(b, "options", &opts);
        rc = bfs_op_set(m, name, opts, &out, &e);
    } else if (sub && strcmp(sub, "options") == 0 && n <= 5 && del)
        rc = bfs_op_reset(m, name, key, &out, &e);
    else if (sub && n == 5 && strcmp(sub, "volfile") == 0 && strcmp(key, "client") == 0 && get)
        return volfile(m, name, inm, host, r);
    else if (n > 5 || (sub && strcmp(sub, "start") && strcmp(sub, "stop") &&
                       strcmp(sub, "status") && strcmp(sub, "bricks") &&
                       strcmp(sub, "options") && strcmp(sub, "volfile")))
        return reply_error(r, 404, "no such API route (docs/API.md lists them)");
    else
        return reply_error(r, 405, "method not allowed on this route (docs/API.md)");
    reply_op(r, rc, 200, out, &e);
}

/* /v1/node, /v1/pool, /v1/peers[/HOST] */
static void pool_routes(struct bfs_mgmt *m, const char *method, char segs[][256], int n,
                        struct json_object *b, struct bfs_http_reply *r)
{
    struct json_object *out = NULL, *o;
    struct bfs_err e = {0};
    bool get = strcmp(method, "GET") == 0;
    int rc;
    if (n == 2 && strcmp(segs[1], "node") == 0 && get)
        rc = bfs_op_node(m, &out, &e);
    else if (n == 2 && strcmp(segs[1], "pool") == 0 && get)
        rc = bfs_op_pool_list(m, false, &out, &e);
    else if (n == 2 && strcmp(segs[1], "peers") == 0 && get)
        rc = bfs_op_pool_list(m, true, &out, &e);
    else if (n == 2 && strcmp(segs[1], "peers") == 0 && strcmp(method, "POST") == 0)
        rc = bfs_op_peer_probe(m, b && json_object_object_get_ex(b, "host", &o)
                                      ? json_object_get_string(o) : NULL, &out, &e);
    else if (n == 3 && strcmp(segs[1], "peers") == 0 && strcmp(method, "DELETE") == 0)
        rc = bfs_op_peer_detach(m, segs[2], bool_field(b, "force"), &out, &e);
    else if (n > 3 || (n == 3 && strcmp(segs[1], "peers") != 0))
        return reply_error(r, 404, "no such API route (docs/API.md lists them)");
    else
        return reply_error(r, 405, "method not allowed on this route (docs/API.md)");
    reply_op(r, rc, 200, out, &e);
}

void bfs_api_dispatch(struct bfs_mgmt *m, const char *method, const char *url,
                      const char *body, size_t len, const char *inm, const char *host,
                      struct bfs_http_reply *r)
{
    char segs[MAX_SEGS][256];
    int n = split(url, segs);
    struct json_object *b = NULL, *out = NULL;
    struct bfs_err e = {0};
    if (n < 2 || strcmp(segs[0], "v1") != 0)
        return reply_error(r, 404, "no such API route (the API lives under /v1; docs/API.md)");
    bfs_store_set_errmsg("%s", ""); /* this thread's last store failure is this request's */
    if (body && len) {
        struct json_tokener *tok = json_tokener_new();
        b = json_tokener_parse_ex(tok, body, (int)len);
        enum json_tokener_error je = json_tokener_get_error(tok);
        json_tokener_free(tok);
        if (!b || je != json_tokener_success) {
            json_object_put(b);
            char msg[256];
            snprintf(msg, sizeof(msg), "the request body is not JSON: %s",
                     json_tokener_error_desc(je));
            return reply_error(r, 400, msg);
        }
    }
    bool get = strcmp(method, "GET") == 0;
    if (n == 2 && strcmp(segs[1], "health") == 0 && get) {
        out = json_object_new_object();
        json_object_object_add(out, "status", json_object_new_string("ok"));
        json_object_object_add(out, "node", json_object_new_string(m->node_uuid));
        reply_json(r, 200, out);
    } else if (n == 2 && strcmp(segs[1], "options") == 0 && get) {
        int rc = bfs_op_options_help(m, &out, &e);
        reply_op(r, rc, 200, out, &e);
    } else if (n == 2 && strcmp(segs[1], "status") == 0 && get) {
        int rc = bfs_op_status(m, NULL, &out, &e);
        reply_op(r, rc, 200, out, &e);
    } else if (n == 2 && strcmp(segs[1], "volumes") == 0 && get) {
        int rc = bfs_op_list(m, &out, &e);
        reply_op(r, rc, 200, out, &e);
    } else if (n == 2 && strcmp(segs[1], "volumes") == 0 && strcmp(method, "POST") == 0) {
        do_create(m, b, r);
    } else if (n >= 3 && strcmp(segs[1], "volumes") == 0) {
        volume_routes(m, method, segs, n, b, inm, host, r);
    } else if (strcmp(segs[1], "node") == 0 || strcmp(segs[1], "pool") == 0 ||
               strcmp(segs[1], "peers") == 0) {
        pool_routes(m, method, segs, n, b, r);
    } else if (n == 2 && (strcmp(segs[1], "volumes") == 0 || strcmp(segs[1], "health") == 0 ||
                          strcmp(segs[1], "options") == 0 || strcmp(segs[1], "status") == 0)) {
        reply_error(r, 405, "method not allowed on this route (docs/API.md)");
    } else {
        reply_error(r, 404, "no such API route (docs/API.md lists them)");
    }
    json_object_put(b);
}
