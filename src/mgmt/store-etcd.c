/*
 * store-etcd.c — the pool store backend: etcd v3 through its JSON gateway
 * (docs/design/pool.md, "The store spec and the etcd backend").
 *
 *   spec: URL[,URL...][;timeout=MS][;prefix=P][;ttl=S]
 *
 * Each call is one HTTP POST (libcurl, a fresh easy handle: calls come
 * from any thread) tried on each endpoint in turn, starting with the last
 * one that answered. Keys are P + the store key, base64 on the wire, as are
 * values. get/list are ranges, put is a put, cas and conditional deletes
 * are txns comparing mod_revision, so each change is atomic in etcd.
 *
 * Watches: a thread per watch holds a /v3/watch stream and calls back for
 * each event; after a break it reconnects from the last revision seen + 1.
 * When etcd cancels the watch (that revision was compacted away), the
 * stream stays open but silent, so the thread drops it, tells the caller
 * to re-read everything (key NULL) and watches again from the compaction
 * revision.
 * Leases: the first put_lease grants a lease (TTL ttl s) and starts a
 * keep-alive thread; if the lease is lost (etcd down longer than the TTL)
 * it grants a new one and writes the lease keys again.
 *
 * Lifetime: open() allocates a struct etcd; close() stops the keep-alive
 * thread, revokes the lease and frees it (watches are stopped by store.c
 * before close). A struct ewatch lives from watch() to unwatch(), which
 * stops and joins its thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "core/body.h"
#include "core/log.h"
#include "mgmt/store.h"

#define MAX_EPS 8
#define DEF_TIMEOUT_MS 2000
#define DEF_TTL_S 10
#define DEF_PREFIX "brickfs/"
/* The most one answer (or one watch message) may hold. The largest answer
 * is a list of every key under a prefix (the whole pool's definitions):
 * values travel base64 (4/3 of their size) in JSON, and etcd refuses any
 * single request over 1.5 MiB by default, so a pool of a thousand volumes
 * of a few KiB each answers in a few MiB. 64 MiB is ten times that and
 * still a bound on what a wrong or hostile endpoint can make brickfsd
 * allocate. An answer over it fails the call with -EIO (message "etcd ...
 * answered more than 64 MiB"), not trying the other endpoints: they hold
 * the same data. A watch message over it ends the stream, which is then
 * retried as after a break (every 2 s at most, each time logged). */
#define ANSWER_MAX ((size_t)64 << 20)

struct lkey {
    char *key, *val;
    size_t len;
    struct lkey *next;
};

struct etcd {
    char *eps[MAX_EPS];
    int neps;
    pthread_mutex_t eplock;  /* cur */
    int cur;                 /* endpoint that answered last */
    long timeout_ms;
    int ttl;
    char *prefix;
    pthread_mutex_t lock;    /* lease, lkeys, stopping (held across lease calls) */
    pthread_cond_t cond;
    int64_t lease;           /* 0 = none yet */
    struct lkey *lkeys;      /* keys written under the lease */
    pthread_t ka;
    bool ka_running, stopping;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- base64 ---- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_enc(const void *data, size_t len)
{
    const unsigned char *p = data;
    char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < len ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < len ? p[i + 2] : 0);
        *o++ = b64[v >> 18 & 63];
        *o++ = b64[v >> 12 & 63];
        *o++ = i + 1 < len ? b64[v >> 6 & 63] : '=';
        *o++ = i + 2 < len ? b64[v & 63] : '=';
    }
    *o = 0;
    return out;
}

static int b64_val(char c)
{
    const char *p = c ? strchr(b64, c) : NULL;
    return p ? (int)(p - b64) : -1;
}

/* NUL-terminated after *len bytes; NULL on bad input. */
static char *b64_dec(const char *s, size_t *len)
{
    size_t n = strlen(s), o = 0;
    char *out = malloc(n / 4 * 3 + 4);
    unsigned acc = 0;
    int bits = 0;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n && s[i] != '='; i++) {
        int v = b64_val(s[i]);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = acc << 6 | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)(acc >> bits & 0xff);
        }
    }
    out[o] = 0;
    *len = o;
    return out;
}

/* ---- HTTP ---- */

/* POSTs body to PATH on the endpoints; *out is the parsed answer.
 * -EHOSTUNREACH when no endpoint answered (or all said 5xx), -EIO when etcd
 * refused the request or answered more than ANSWER_MAX; bfs_store_errmsg()
 * tells why. */
static int call(struct etcd *e, const char *path, struct json_object *req,
                struct json_object **out)
{
    const char *body = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
    char why[400] = "";
    pthread_mutex_lock(&e->eplock);
    int first = e->cur;
    pthread_mutex_unlock(&e->eplock);
    for (int k = 0; k < e->neps; k++) {
        int i = (first + k) % e->neps;
        char url[512];
        struct bfs_body b;
        bfs_body_init(&b, ANSWER_MAX);
        snprintf(url, sizeof(url), "%s%s", e->eps[i], path);
        CURL *c = curl_easy_init();
        if (!c)
            return -ENOMEM;
        struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, e->timeout_ms);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, e->timeout_ms);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, bfs_body_curl_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        CURLcode cc = curl_easy_perform(c);
        long code = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        if (b.over) {
            char cap[32];
            bfs_store_set_errmsg("etcd %s%s answered more than %s: refused", e->eps[i], path,
                                 bfs_body_cap_str(b.cap, cap, sizeof(cap)));
            bfs_body_free(&b);
            return -EIO;
        }
        if (cc != CURLE_OK || code >= 500) {
            if (cc != CURLE_OK)
                snprintf(why, sizeof(why), "%s: %s", e->eps[i], curl_easy_strerror(cc));
            else
                snprintf(why, sizeof(why), "%s: HTTP %ld %.200s", e->eps[i], code,
                         b.p ? b.p : "");
            bfs_body_free(&b);
            continue;
        }
        pthread_mutex_lock(&e->eplock);
        e->cur = i;
        pthread_mutex_unlock(&e->eplock);
        struct json_object *j = b.p ? json_tokener_parse(b.p) : NULL;
        if (code != 200 || !j) {
            bfs_store_set_errmsg("etcd %s%s answered HTTP %ld: %.200s", e->eps[i], path, code,
                                 b.p ? b.p : "");
            bfs_body_free(&b);
            json_object_put(j);
            return -EIO;
        }
        bfs_body_free(&b);
        *out = j;
        return 0;
    }
    bfs_store_set_errmsg("etcd is unreachable (%s)", why);
    return -EHOSTUNREACH;
}

/* ---- JSON helpers ---- */

static struct json_object *jget(struct json_object *o, const char *k)
{
    struct json_object *v = NULL;
    return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

/* int64 fields come as strings from the gateway; absent = 0. */
static uint64_t jnum(struct json_object *o, const char *k)
{
    struct json_object *v = jget(o, k);
    if (!v)
        return 0;
    if (json_object_is_type(v, json_type_string))
        return strtoull(json_object_get_string(v), NULL, 10);
    return (uint64_t)json_object_get_int64(v);
}

static uint64_t header_rev(struct json_object *ans)
{
    return jnum(jget(ans, "header"), "revision");
}

static void add_b64(struct json_object *o, const char *k, const void *data, size_t len)
{
    char *s = b64_enc(data, len);
    json_object_object_add(o, k, json_object_new_string(s ? s : ""));
    free(s);
}

static char *full_key(struct etcd *e, const char *key)
{
    size_t n = strlen(e->prefix) + strlen(key) + 1;
    char *k = malloc(n);
    if (k)
        snprintf(k, n, "%s%s", e->prefix, key);
    return k;
}

/* The smallest key greater than every key starting with p (etcd's
 * "range_end" for a prefix). Keys are printable ASCII, so the last byte can
 * always be incremented. */
static void add_prefix_range(struct json_object *o, const char *p)
{
    size_t n = strlen(p);
    char *end = strdup(p);
    if (!end)
        return;
    add_b64(o, "key", p, n);
    if (n == 0) {
        add_b64(o, "range_end", "\0", 1);
    } else {
        end[n - 1]++;
        add_b64(o, "range_end", end, n);
    }
    free(end);
}

/* kv JSON -> store kv (key without the prefix). */
static int kv_from_json(struct etcd *e, struct json_object *j, struct bfs_store_kv *out)
{
    size_t kl, vl = 0;
    struct json_object *v = jget(j, "value");
    char *k = b64_dec(json_object_get_string(jget(j, "key")), &kl);
    char *val = v ? b64_dec(json_object_get_string(v), &vl) : strdup("");
    size_t pl = strlen(e->prefix);
    if (!k || !val || kl < pl) {
        free(k);
        free(val);
        return -EIO;
    }
    memmove(k, k + pl, kl - pl + 1);
    out->key = k;
    out->value = val;
    out->len = vl;
    out->rev = jnum(j, "mod_revision");
    return 0;
}

/* ---- open / close ---- */

static int parse_spec(struct etcd *e, const char *arg, char *err, size_t errlen)
{
    char *copy = strdup(arg), *save = NULL;
    int rc = 0;
    if (!copy)
        return -ENOMEM;
    char *urls = strtok_r(copy, ";", &save), *opt;
    while (rc == 0 && (opt = strtok_r(NULL, ";", &save))) {
        if (strncmp(opt, "timeout=", 8) == 0 && atol(opt + 8) > 0)
            e->timeout_ms = atol(opt + 8);
        else if (strncmp(opt, "ttl=", 4) == 0 && atoi(opt + 4) > 0)
            e->ttl = atoi(opt + 4);
        else if (strncmp(opt, "prefix=", 7) == 0 && bfs_store_key_valid(opt + 7))
            free(e->prefix), e->prefix = strdup(opt + 7);
        else
            rc = -EINVAL, snprintf(err, errlen, "etcd store: bad option '%s' (timeout=MS, "
                                   "ttl=S, prefix=P)", opt);
    }
    char *s2 = NULL, *u;
    for (u = urls ? strtok_r(urls, ",", &s2) : NULL; rc == 0 && u; u = strtok_r(NULL, ",", &s2)) {
        size_t n = strlen(u);
        while (n && u[n - 1] == '/')
            u[--n] = 0;
        if (strncmp(u, "http://", 7) != 0 || n <= 7 || e->neps == MAX_EPS) {
            rc = -EINVAL;
            snprintf(err, errlen, "etcd store: '%s' is not an http://HOST:PORT endpoint (at "
                     "most %d)", u, MAX_EPS);
        } else {
            e->eps[e->neps++] = strdup(u);
        }
    }
    if (rc == 0 && e->neps == 0) {
        rc = -EINVAL;
        snprintf(err, errlen, "etcd store: no endpoint in '%s' (etcd:http://HOST:2379[,...])",
                 arg);
    }
    free(copy);
    return rc;
}

static void etcd_free(struct etcd *e)
{
    for (int i = 0; i < e->neps; i++)
        free(e->eps[i]);
    while (e->lkeys) {
        struct lkey *l = e->lkeys;
        e->lkeys = l->next;
        free(l->key);
        free(l->val);
        free(l);
    }
    free(e->prefix);
    pthread_mutex_destroy(&e->lock);
    pthread_mutex_destroy(&e->eplock);
    pthread_cond_destroy(&e->cond);
    free(e);
}

static int etcd_open(const char *arg, void **be, char *err, size_t errlen)
{
    pthread_once(&curl_once, curl_init);
    struct etcd *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->timeout_ms = DEF_TIMEOUT_MS;
    e->ttl = DEF_TTL_S;
    e->prefix = strdup(DEF_PREFIX);
    pthread_mutex_init(&e->lock, NULL);
    pthread_mutex_init(&e->eplock, NULL);
    pthread_cond_init(&e->cond, NULL);
    int rc = parse_spec(e, arg ? arg : "", err, errlen);
    if (rc == 0) {
        /* one round trip now, so a wrong URL fails at start, not later */
        struct json_object *req = json_object_new_object(), *ans = NULL;
        add_b64(req, "key", e->prefix, strlen(e->prefix));
        json_object_object_add(req, "count_only", json_object_new_boolean(1));
        rc = call(e, "/v3/kv/range", req, &ans);
        json_object_put(req);
        json_object_put(ans);
        if (rc < 0)
            snprintf(err, errlen, "etcd store: %s", bfs_store_errmsg());
    }
    if (rc < 0) {
        etcd_free(e);
        return rc;
    }
    *be = e;
    return 0;
}

static void etcd_close(void *be)
{
    struct etcd *e = be;
    pthread_mutex_lock(&e->lock);
    e->stopping = true;
    pthread_cond_broadcast(&e->cond);
    bool ka = e->ka_running;
    int64_t lease = e->lease;
    pthread_mutex_unlock(&e->lock);
    if (ka)
        pthread_join(e->ka, NULL);
    if (lease) { /* so our live keys vanish now rather than after the TTL */
        struct json_object *req = json_object_new_object(), *ans = NULL;
        json_object_object_add(req, "ID", json_object_new_int64(lease));
        if (call(e, "/v3/lease/revoke", req, &ans) == 0)
            json_object_put(ans);
        json_object_put(req);
    }
    etcd_free(e);
}

/* ---- reads ---- */

static int etcd_get(void *be, const char *key, struct bfs_store_kv *out)
{
    struct etcd *e = be;
    char *k = full_key(e, key);
    if (!k)
        return -ENOMEM;
    struct json_object *req = json_object_new_object(), *ans = NULL;
    add_b64(req, "key", k, strlen(k));
    free(k);
    int rc = call(e, "/v3/kv/range", req, &ans);
    json_object_put(req);
    if (rc < 0)
        return rc;
    struct json_object *kvs = jget(ans, "kvs");
    free(out->key);
    out->key = NULL;
    if (!kvs || json_object_array_length(kvs) == 0)
        rc = -ENOENT;
    else
        rc = kv_from_json(e, json_object_array_get_idx(kvs, 0), out);
    json_object_put(ans);
    return rc;
}

static int etcd_list(void *be, const char *prefix, struct bfs_store_kv **out, size_t *n)
{
    struct etcd *e = be;
    char *k = full_key(e, prefix);
    if (!k)
        return -ENOMEM;
    struct json_object *req = json_object_new_object(), *ans = NULL;
    add_prefix_range(req, k);
    free(k);
    int rc = call(e, "/v3/kv/range", req, &ans);
    json_object_put(req);
    if (rc < 0)
        return rc;
    struct json_object *kvs = jget(ans, "kvs");
    size_t cnt = kvs ? json_object_array_length(kvs) : 0;
    struct bfs_store_kv *v = cnt ? calloc(cnt, sizeof(*v)) : NULL;
    if (cnt && !v)
        rc = -ENOMEM;
    for (size_t i = 0; rc == 0 && i < cnt; i++)
        rc = kv_from_json(e, json_object_array_get_idx(kvs, i), &v[i]);
    json_object_put(ans);
    if (rc < 0) {
        bfs_store_kvs_free(v, cnt);
        return rc;
    }
    *out = v;
    *n = cnt;
    return 0;
}

static uint64_t etcd_revision(void *be)
{
    struct etcd *e = be;
    struct json_object *req = json_object_new_object(), *ans = NULL;
    add_b64(req, "key", e->prefix, strlen(e->prefix));
    json_object_object_add(req, "count_only", json_object_new_boolean(1));
    uint64_t r = call(e, "/v3/kv/range", req, &ans) == 0 ? header_rev(ans) : 0;
    json_object_put(req);
    json_object_put(ans);
    return r;
}

/* ---- writes ---- */

static struct json_object *put_req(const char *k, const void *val, size_t len, int64_t lease)
{
    struct json_object *p = json_object_new_object();
    add_b64(p, "key", k, strlen(k));
    add_b64(p, "value", val, len);
    if (lease)
        json_object_object_add(p, "lease", json_object_new_int64(lease));
    return p;
}

/* One txn compare per condition: a key that must exist (its version is
 * above 0), or keys (a prefix: a range) last written at or before a
 * revision (mod_revision below it + 1). */
static int add_conds(struct etcd *e, struct json_object *arr, const struct bfs_store_cond *c,
                     size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *k = full_key(e, c[i].key);
        if (!k)
            return -ENOMEM;
        struct json_object *cmp = json_object_new_object();
        if (c[i].prefix)
            add_prefix_range(cmp, k);
        else
            add_b64(cmp, "key", k, strlen(k));
        free(k);
        bool exists = c[i].max_rev == BFS_STORE_ANY;
        json_object_object_add(cmp, "target", json_object_new_string(exists ? "VERSION" : "MOD"));
        json_object_object_add(cmp, "result", json_object_new_string(exists ? "GREATER" : "LESS"));
        if (exists)
            json_object_object_add(cmp, "version", json_object_new_int64(0));
        else
            json_object_object_add(cmp, "mod_revision",
                                   json_object_new_int64((int64_t)c[i].max_rev + 1));
        json_object_array_add(arr, cmp);
    }
    return 0;
}

static int etcd_write_if(void *be, const char *key, const void *val, size_t len,
                         uint64_t expect, const struct bfs_store_cond *conds, size_t nconds,
                         uint64_t *rev)
{
    struct etcd *e = be;
    char *k = full_key(e, key);
    if (!k)
        return -ENOMEM;
    struct json_object *ans = NULL, *req, *op;
    if (val) {
        op = put_req(k, val, len, 0);
    } else {
        op = json_object_new_object();
        add_b64(op, "key", k, strlen(k));
    }
    /* Always a txn: a delete needs the deleted count, a CAS its compare. */
    req = json_object_new_object();
    struct json_object *arr = json_object_new_array();
    if (expect != BFS_STORE_ANY) {
        struct json_object *cmp = json_object_new_object();
        add_b64(cmp, "key", k, strlen(k));
        json_object_object_add(cmp, "target", json_object_new_string("MOD"));
        json_object_object_add(cmp, "result", json_object_new_string("EQUAL"));
        json_object_object_add(cmp, "mod_revision", json_object_new_int64((int64_t)expect));
        json_object_array_add(arr, cmp);
    }
    if (add_conds(e, arr, conds, nconds) < 0) {
        json_object_put(arr);
        json_object_put(req);
        json_object_put(op);
        free(k);
        return -ENOMEM;
    }
    if (json_object_array_length(arr) > 0)
        json_object_object_add(req, "compare", arr);
    else
        json_object_put(arr);
    struct json_object *succ = json_object_new_array(), *wrap = json_object_new_object();
    json_object_object_add(wrap, val ? "request_put" : "request_delete_range", op);
    json_object_array_add(succ, wrap);
    json_object_object_add(req, "success", succ);
    free(k);
    int rc = call(e, "/v3/kv/txn", req, &ans);
    json_object_put(req);
    if (rc == -EHOSTUNREACH && strstr(bfs_store_errmsg(), "imed out"))
        bfs_store_set_errmsg("%s; the change may or may not have been applied",
                             bfs_store_errmsg());
    if (rc < 0)
        return rc;
    struct json_object *s = jget(ans, "succeeded");
    if (!s || !json_object_get_boolean(s)) {
        rc = -ESTALE;
    } else if (!val) {
        struct json_object *r0 = json_object_array_get_idx(jget(ans, "responses"), 0);
        if (jnum(jget(r0, "response_delete_range"), "deleted") == 0)
            rc = -ENOENT;
    }
    if (rc == 0)
        *rev = header_rev(ans);
    json_object_put(ans);
    if (rc == 0 && !val) { /* a deleted lease key must not come back with a new lease */
        pthread_mutex_lock(&e->lock);
        for (struct lkey **l = &e->lkeys; *l; l = &(*l)->next)
            if (strcmp((*l)->key, key) == 0) {
                struct lkey *dead = *l;
                *l = dead->next;
                free(dead->key);
                free(dead->val);
                free(dead);
                break;
            }
        pthread_mutex_unlock(&e->lock);
    }
    if (rc == -ESTALE && !val) { /* local answers ENOENT for a missing key first */
        struct bfs_store_kv kv = {0};
        if (etcd_get(be, key, &kv) == -ENOENT)
            rc = -ENOENT;
        bfs_store_kv_clear(&kv);
    }
    return rc;
}

static int etcd_write(void *be, const char *key, const void *val, size_t len, uint64_t expect,
                      uint64_t *rev)
{
    return etcd_write_if(be, key, val, len, expect, NULL, 0, rev);
}

static int etcd_put_all(void *be, const struct bfs_store_kv *kvs, size_t n, const char *guard,
                        uint64_t *rev)
{
    struct etcd *e = be;
    char *g = full_key(e, guard);
    if (!g)
        return -ENOMEM;
    struct json_object *req = json_object_new_object(), *ans = NULL;
    struct json_object *cmp = json_object_new_object(), *arr = json_object_new_array();
    add_b64(cmp, "key", g, strlen(g));
    free(g);
    json_object_object_add(cmp, "target", json_object_new_string("MOD"));
    json_object_object_add(cmp, "result", json_object_new_string("EQUAL"));
    json_object_object_add(cmp, "mod_revision", json_object_new_int64(0));
    json_object_array_add(arr, cmp);
    json_object_object_add(req, "compare", arr);
    struct json_object *succ = json_object_new_array();
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char *k = full_key(e, kvs[i].key);
        if (!k) {
            rc = -ENOMEM;
            break;
        }
        struct json_object *wrap = json_object_new_object();
        json_object_object_add(wrap, "request_put", put_req(k, kvs[i].value, kvs[i].len, 0));
        json_object_array_add(succ, wrap);
        free(k);
    }
    json_object_object_add(req, "success", succ);
    if (rc == 0)
        rc = call(e, "/v3/kv/txn", req, &ans);
    json_object_put(req);
    if (rc < 0)
        return rc;
    struct json_object *ok = jget(ans, "succeeded");
    rc = ok && json_object_get_boolean(ok) ? 0 : -ESTALE;
    if (rc == 0 && rev)
        *rev = header_rev(ans);
    json_object_put(ans);
    return rc;
}

/* ---- leases ---- */

static int grant(struct etcd *e, int64_t *id)
{
    struct json_object *req = json_object_new_object(), *ans = NULL;
    json_object_object_add(req, "TTL", json_object_new_int64(e->ttl));
    int rc = call(e, "/v3/lease/grant", req, &ans);
    json_object_put(req);
    if (rc == 0) {
        *id = (int64_t)jnum(ans, "ID");
        if (*id == 0)
            rc = -EIO;
    }
    json_object_put(ans);
    return rc;
}

static int put_plain(struct etcd *e, const char *key, const void *val, size_t len, int64_t lease,
                     uint64_t *rev)
{
    char *k = full_key(e, key);
    if (!k)
        return -ENOMEM;
    struct json_object *req = put_req(k, val, len, lease), *ans = NULL;
    free(k);
    int rc = call(e, "/v3/kv/put", req, &ans);
    json_object_put(req);
    if (rc == 0 && rev)
        *rev = header_rev(ans);
    json_object_put(ans);
    return rc;
}

/* Keep-alive: renew every ttl/3 s; a lost lease is replaced and every
 * lease key written again. Failures just wait for the next round. */
static void *keepalive(void *arg)
{
    struct etcd *e = arg;
    pthread_mutex_lock(&e->lock);
    while (!e->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += e->ttl / 3 > 0 ? e->ttl / 3 : 1;
        pthread_cond_timedwait(&e->cond, &e->lock, &ts);
        if (e->stopping)
            break;
        int64_t id = e->lease;
        pthread_mutex_unlock(&e->lock);
        struct json_object *req = json_object_new_object(), *ans = NULL;
        json_object_object_add(req, "ID", json_object_new_int64(id));
        int rc = call(e, "/v3/lease/keepalive", req, &ans);
        json_object_put(req);
        bool lost = rc == 0 && jnum(jget(ans, "result"), "TTL") == 0;
        json_object_put(ans);
        int64_t nid = 0;
        if (lost && grant(e, &nid) == 0) {
            pthread_mutex_lock(&e->lock);
            e->lease = nid;
            for (struct lkey *l = e->lkeys; l; l = l->next)
                put_plain(e, l->key, l->val, l->len, nid, NULL);
            pthread_mutex_unlock(&e->lock);
        }
        pthread_mutex_lock(&e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

static int remember(struct etcd *e, const char *key, const void *val, size_t len)
{
    struct lkey *l;
    for (l = e->lkeys; l && strcmp(l->key, key) != 0; l = l->next)
        ;
    if (!l) {
        if (!(l = calloc(1, sizeof(*l))) || !(l->key = strdup(key))) {
            free(l);
            return -ENOMEM;
        }
        l->next = e->lkeys;
        e->lkeys = l;
    }
    char *v = malloc(len + 1);
    if (!v)
        return -ENOMEM;
    memcpy(v, val, len);
    free(l->val);
    l->val = v;
    l->len = len;
    return 0;
}

static int etcd_put_lease(void *be, const char *key, const void *val, size_t len, uint64_t *rev)
{
    struct etcd *e = be;
    pthread_mutex_lock(&e->lock);
    int rc = 0;
    if (!e->lease)
        rc = grant(e, &e->lease);
    if (rc == 0 && !e->ka_running) {
        rc = -pthread_create(&e->ka, NULL, keepalive, e);
        e->ka_running = rc == 0;
    }
    if (rc == 0)
        rc = remember(e, key, val, len);
    int64_t id = e->lease;
    if (rc == 0)
        rc = put_plain(e, key, val, len, id, rev);
    pthread_mutex_unlock(&e->lock);
    return rc;
}

/* ---- watches ---- */

struct ewatch {
    struct etcd *e;
    char *key;               /* prefix with e->prefix */
    void (*fn)(const char *, const char *, size_t, uint64_t, void *);
    void *arg;
    uint64_t next_rev;       /* first revision not yet delivered */
    pthread_t thr;
    volatile int stop;
    bool canceled;           /* etcd canceled the watch: drop the stream */
    unsigned resyncs;        /* compactions seen (for tests) */
    struct bfs_body line;    /* partial stream message (at most ANSWER_MAX) */
};

static void deliver(struct ewatch *w, struct json_object *msg)
{
    struct json_object *res = jget(msg, "result");
    if (!res)
        return;
    uint64_t compact = jnum(res, "compact_revision");
    struct json_object *cancel = jget(res, "canceled");
    if (cancel && json_object_get_boolean(cancel))
        w->canceled = true; /* no event comes on this stream any more */
    if (compact) { /* we asked for history etcd no longer has */
        w->next_rev = compact > w->next_rev ? compact : w->next_rev;
        w->resyncs++;
        w->fn(NULL, NULL, 0, compact, w->arg);
        return;
    }
    struct json_object *evs = jget(res, "events");
    size_t n = evs ? json_object_array_length(evs) : 0;
    for (size_t i = 0; i < n; i++) {
        struct json_object *ev = json_object_array_get_idx(evs, i);
        struct json_object *t = jget(ev, "type");
        bool del = t && strcmp(json_object_get_string(t), "DELETE") == 0;
        struct bfs_store_kv kv = {0};
        if (kv_from_json(w->e, jget(ev, "kv"), &kv) < 0)
            continue;
        if (kv.rev >= w->next_rev) {
            w->next_rev = kv.rev + 1;
            w->fn(kv.key, del ? NULL : kv.value, del ? 0 : kv.len, kv.rev, w->arg);
        }
        bfs_store_kv_clear(&kv);
    }
}

/* The stream is one JSON message per line. */
static size_t on_stream(char *d, size_t sz, size_t nm, void *arg)
{
    struct ewatch *w = arg;
    size_t n = sz * nm;
    if (bfs_body_curl_write(d, sz, nm, &w->line) != n)
        return 0;
    char *nl;
    while ((nl = memchr(w->line.p, '\n', w->line.len))) {
        *nl = 0;
        struct json_object *j = json_tokener_parse(w->line.p);
        if (j)
            deliver(w, j);
        json_object_put(j);
        if (w->canceled)
            return 0; /* curl ends the transfer; the thread watches again */
        bfs_body_consume(&w->line, (size_t)(nl + 1 - w->line.p));
    }
    return n;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    return ((struct ewatch *)arg)->stop;
}

static void *watch_thread(void *arg)
{
    struct ewatch *w = arg;
    struct etcd *e = w->e;
    pthread_mutex_lock(&e->eplock);
    int ep = e->cur;
    pthread_mutex_unlock(&e->eplock);
    long delay_ms = 100;
    while (!w->stop) {
        struct json_object *req = json_object_new_object(), *cr = json_object_new_object();
        add_prefix_range(cr, w->key);
        json_object_object_add(cr, "start_revision", json_object_new_int64((int64_t)w->next_rev));
        json_object_object_add(req, "create_request", cr);
        char url[512];
        snprintf(url, sizeof(url), "%s/v3/watch", e->eps[ep % e->neps]);
        CURL *c = curl_easy_init();
        struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS,
                         json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN));
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, e->timeout_ms);
        /* a silent stream is normal; a dead peer is noticed by TCP keepalive */
        curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 2L);
        curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 1L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, w);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, w);
        uint64_t before = w->next_rev;
        w->canceled = false;
        curl_easy_perform(c);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        json_object_put(req);
        if (w->line.over) {
            char cap[32];
            bfs_log("store-etcd", BFS_LOG_ERROR, "etcd watch of %s on %s: a message larger "
                    "than %s, stream dropped; watching again", w->key, url,
                    bfs_body_cap_str(w->line.cap, cap, sizeof(cap)));
        }
        bfs_body_free(&w->line);
        if (w->stop)
            break;
        if (w->canceled && w->next_rev != before) { /* resync: at once, same endpoint */
            delay_ms = 100;
            continue;
        }
        /* the stream broke: next endpoint, after a pause growing to 2 s */
        if (w->next_rev != before)
            delay_ms = 100;
        ep++;
        for (long t = 0; t < delay_ms && !w->stop; t += 20)
            usleep(20000);
        delay_ms = delay_ms * 2 > 2000 ? 2000 : delay_ms * 2;
    }
    return NULL;
}

typedef void (*watch_fn)(const char *, const char *, size_t, uint64_t, void *);

/* A watch of prefix from revision rev on. */
static int watch_from(struct etcd *e, const char *prefix, uint64_t rev, watch_fn fn, void *arg,
                      void **handle)
{
    struct ewatch *w = calloc(1, sizeof(*w));
    if (!w || !(w->key = full_key(e, prefix))) {
        free(w);
        return -ENOMEM;
    }
    w->e = e;
    w->fn = fn;
    w->arg = arg;
    w->next_rev = rev;
    bfs_body_init(&w->line, ANSWER_MAX);
    int rc = -pthread_create(&w->thr, NULL, watch_thread, w);
    if (rc < 0) {
        free(w->key);
        free(w);
        return rc;
    }
    *handle = w;
    return 0;
}

static int etcd_watch(void *be, const char *prefix, watch_fn fn, void *arg, void **handle)
{
    struct etcd *e = be;
    /* Changes after this call must be seen: start right after the current
     * revision, which must therefore be known now. */
    struct json_object *req = json_object_new_object(), *ans = NULL;
    add_b64(req, "key", e->prefix, strlen(e->prefix));
    json_object_object_add(req, "count_only", json_object_new_boolean(1));
    int rc = call(e, "/v3/kv/range", req, &ans);
    json_object_put(req);
    if (rc < 0)
        return rc;
    uint64_t rev = header_rev(ans);
    json_object_put(ans);
    return watch_from(e, prefix, rev + 1, fn, arg, handle);
}

static void etcd_unwatch(void *be, void *handle)
{
    struct ewatch *w = handle;
    (void)be;
    w->stop = 1;
    pthread_join(w->thr, NULL);
    bfs_body_free(&w->line);
    free(w->key);
    free(w);
}

const struct bfs_store_ops bfs_store_etcd_ops = {
    .scheme = "etcd",
    .open = etcd_open,
    .close = etcd_close,
    .get = etcd_get,
    .write = etcd_write,
    .write_if = etcd_write_if,
    .list = etcd_list,
    .revision = etcd_revision,
    .watch = etcd_watch,
    .unwatch = etcd_unwatch,
    .put_lease = etcd_put_lease,
    .put_all = etcd_put_all,
};
