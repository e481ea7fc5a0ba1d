/*
 * pool.c — brickfsd in a pool (docs/design/pool.md): opens the local store
 * (the node's identity) and the pool store, creates the pool in an empty
 * etcd (importing the local volumes in the same txn), keeps the node's
 * alive/UUID key under a lease, and implements peer probe, detach, status
 * and pool list.
 *
 * Lifetime: struct bfs_pool is allocated by bfs_pool_open() and freed by
 * bfs_pool_close(); it owns the local store handle and, with a pool, the
 * etcd one (m->store), which is closed first so its lease is revoked.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "core/body.h"
#include "core/log.h"
#include "mgmt/pool.h"
#include "mgmt/store.h"

struct bfs_pool {
    struct bfs_store *local;
    char *spec;           /* the pool store, NULL without a pool */
    char name[256];
    char address[300];    /* HOST:PORT others reach this brickfsd at */
    char pool_id[40];
};

/* The process's brickfsd, for bfs_pool_known_host (bricks.c has no m). */
static struct bfs_mgmt *the_m;

bool bfs_pool_enabled(const struct bfs_mgmt *m)
{
    return m->pool && m->pool->spec;
}

int bfs_pool_store_fail(struct bfs_err *e, int rc, const char *what)
{
    if (rc == -EHOSTUNREACH)
        return bfs_fail(e, 503, "%s: %s; volumes keep serving I/O; retry when etcd is back",
                        what, bfs_store_errmsg());
    if (rc == -EIO && bfs_store_errmsg()[0])
        return bfs_fail(e, 500, "%s: %s", what, bfs_store_errmsg());
    return bfs_fail(e, 500, "%s: %s", what, strerror(-rc));
}

/* ---- opening ---- */

static int local_uuid(struct bfs_mgmt *m, char *err, size_t errlen)
{
    struct bfs_store_kv kv;
    struct bfs_store *l = m->pool->local;
    int rc = bfs_store_get(l, "node/uuid", &kv);
    if (rc == 0) {
        snprintf(m->node_uuid, sizeof(m->node_uuid), "%s", kv.value);
        bfs_store_kv_clear(&kv);
        return 0;
    }
    if (rc == -ENOENT) {
        bfs_uuid_generate(m->node_uuid);
        rc = bfs_store_cas(l, "node/uuid", m->node_uuid, strlen(m->node_uuid), 0, NULL);
    }
    if (rc < 0)
        snprintf(err, errlen, "cannot read or write node/uuid in the local store: %s",
                 strerror(-rc));
    return rc;
}

static char *node_record(struct bfs_mgmt *m)
{
    struct json_object *j = json_object_new_object();
    json_object_object_add(j, "uuid", json_object_new_string(m->node_uuid));
    json_object_object_add(j, "name", json_object_new_string(m->pool->name));
    json_object_object_add(j, "address", json_object_new_string(m->pool->address));
    json_object_object_add(j, "joined", json_object_new_int64((int64_t)time(NULL)));
    char *s = strdup(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
    json_object_put(j);
    return s;
}

/* A local volume document with every brick owned by this node. */
static char *owned_copy(struct bfs_mgmt *m, const char *doc)
{
    struct json_object *j = json_tokener_parse(doc), *arr;
    if (!j)
        return NULL;
    if (json_object_object_get_ex(j, "bricks", &arr) &&
        json_object_is_type(arr, json_type_array))
        for (size_t i = 0; i < json_object_array_length(arr); i++) {
            struct json_object *b = json_object_array_get_idx(arr, i), *o;
            if (!json_object_object_get_ex(b, "node", &o))
                json_object_object_add(b, "node", json_object_new_string(m->node_uuid));
        }
    char *s = strdup(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
    json_object_put(j);
    return s;
}

/* Creates the pool: pool/id, nodes/ME and every local volume, one txn. */
static int bootstrap(struct bfs_mgmt *m, char *err, size_t errlen)
{
    struct bfs_pool *p = m->pool;
    struct bfs_store_kv *vols = NULL;
    size_t nv = 0;
    int rc = bfs_store_list(p->local, "volumes/", &vols, &nv);
    if (rc < 0) {
        snprintf(err, errlen, "cannot list the local store: %s", strerror(-rc));
        return rc;
    }
    struct bfs_store_kv *kvs = calloc(nv + 2, sizeof(*kvs));
    char id[40];
    bfs_uuid_generate(id);
    rc = kvs ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < nv; i++) {
        kvs[i].key = vols[i].key;
        kvs[i].value = owned_copy(m, vols[i].value);
        kvs[i].len = kvs[i].value ? strlen(kvs[i].value) : 0;
        if (!kvs[i].value)
            rc = -EINVAL;
    }
    if (rc == 0) {
        kvs[nv].key = (char *)"pool/id";
        kvs[nv].value = id;
        kvs[nv].len = strlen(id);
        kvs[nv + 1].key = (char *)"nodes/";
        char key[64];
        snprintf(key, sizeof(key), "nodes/%s", m->node_uuid);
        kvs[nv + 1].key = key;
        kvs[nv + 1].value = node_record(m);
        kvs[nv + 1].len = kvs[nv + 1].value ? strlen(kvs[nv + 1].value) : 0;
        rc = bfs_store_put_all(m->store, kvs, nv + 2, "pool/id", NULL);
        free(kvs[nv + 1].value);
        if (rc == 0) {
            snprintf(p->pool_id, sizeof(p->pool_id), "%s", id);
            bfs_log(MGMT_LOG, BFS_LOG_INFO, "created pool %s in %s, importing %zu volume(s) "
                    "of the local store", id, p->spec, nv);
        } else if (rc != -ESTALE) {
            snprintf(err, errlen, "cannot create the pool in %s: %s", p->spec,
                     rc == -EHOSTUNREACH ? bfs_store_errmsg() : strerror(-rc));
        }
    } else {
        snprintf(err, errlen, "cannot import the local store: a volume document is damaged");
    }
    for (size_t i = 0; kvs && i < nv; i++)
        free(kvs[i].value);
    free(kvs);
    bfs_store_kvs_free(vols, nv);
    return rc;
}

/* The pool exists: this node is a member, or a candidate with no volumes. */
static int join_check(struct bfs_mgmt *m, bool remembered, char *err, size_t errlen)
{
    struct bfs_pool *p = m->pool;
    struct bfs_store_kv kv, *vols = NULL;
    size_t nv = 0;
    char key[64];
    snprintf(key, sizeof(key), "nodes/%s", m->node_uuid);
    int rc = bfs_store_get(m->store, key, &kv);
    bfs_store_kv_clear(&kv);
    if (rc == 0 || remembered)
        return rc == -ENOENT ? 0 : rc;
    if (rc != -ENOENT)
        return rc;
    bfs_store_list(p->local, "volumes/", &vols, &nv);
    bfs_store_kvs_free(vols, nv);
    if (nv > 0) {
        snprintf(err, errlen, "%s already holds pool %s and this node has %zu volume(s) in "
                 "its local store: a node with volumes cannot join another pool (start it "
                 "without --store, or against an empty etcd to move its volumes there)",
                 p->spec, p->pool_id, nv);
        return -EEXIST;
    }
    bfs_log(MGMT_LOG, BFS_LOG_INFO, "not a member of pool %s yet: waiting for a peer probe",
            p->pool_id);
    return 0;
}

static int open_etcd(struct bfs_mgmt *m, bool remembered, char *err, size_t errlen)
{
    struct bfs_pool *p = m->pool;
    int rc = bfs_store_open(p->spec, &m->store, err, errlen);
    if (rc < 0)
        return rc;
    struct bfs_store_kv kv;
    for (int tries = 0; tries < 2; tries++) {
        rc = bfs_store_get(m->store, "pool/id", &kv);
        if (rc == 0) {
            snprintf(p->pool_id, sizeof(p->pool_id), "%s", kv.value);
            bfs_store_kv_clear(&kv);
            rc = join_check(m, remembered, err, errlen);
            break;
        }
        if (rc != -ENOENT)
            break;
        rc = bootstrap(m, err, errlen);
        if (rc != -ESTALE) /* ESTALE: another node created it meanwhile */
            break;
    }
    if (rc < 0 && !err[0])
        snprintf(err, errlen, "pool store %s: %s", p->spec,
                 rc == -EHOSTUNREACH ? bfs_store_errmsg() : strerror(-rc));
    if (rc == 0 && !remembered) {
        rc = bfs_store_put(p->local, "pool/store", p->spec, strlen(p->spec), NULL);
        if (rc < 0)
            snprintf(err, errlen, "cannot remember the pool store locally: %s", strerror(-rc));
    }
    if (rc == 0) {
        char key[64], val[600];
        snprintf(key, sizeof(key), "alive/%s", m->node_uuid);
        snprintf(val, sizeof(val), "{\"pid\": %d, \"since\": %lld, \"address\": \"%s\"}",
                 (int)getpid(), (long long)time(NULL), p->address);
        rc = bfs_store_put_lease(m->store, key, val, strlen(val), NULL);
        if (rc < 0)
            snprintf(err, errlen, "cannot publish this node's liveness in %s: %s", p->spec,
                     bfs_store_errmsg());
    }
    return rc;
}

int bfs_pool_open(struct bfs_mgmt *m, const struct bfs_pool_cfg *cfg, char *err, size_t errlen)
{
    char spec[4200];
    struct bfs_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    m->pool = p;
    the_m = m;
    if (cfg->name && *cfg->name)
        snprintf(p->name, sizeof(p->name), "%s", cfg->name);
    else if (gethostname(p->name, sizeof(p->name) - 1) < 0)
        snprintf(p->name, sizeof(p->name), "localhost");
    snprintf(p->address, sizeof(p->address), "%s",
             cfg->advertise && *cfg->advertise ? cfg->advertise : m->listen);
    snprintf(spec, sizeof(spec), "local:%s/store", m->state_dir);
    int rc = bfs_store_open(spec, &p->local, err, errlen);
    if (rc < 0 || (rc = local_uuid(m, err, errlen)) < 0)
        return rc;
    struct bfs_store_kv kv;
    char *remembered = NULL;
    if (bfs_store_get(p->local, "pool/store", &kv) == 0) {
        remembered = strdup(kv.value);
        bfs_store_kv_clear(&kv);
    }
    const char *want = cfg->store && *cfg->store ? cfg->store : remembered;
    if (want && remembered && strcmp(want, remembered) != 0) {
        snprintf(err, errlen, "this node belongs to the pool in %s (%s/store/pool%%2Fstore.kv); "
                 "start it with that --store, or remove that file to leave the pool",
                 remembered, m->state_dir);
        free(remembered);
        return -EINVAL;
    }
    if (!want || strcmp(want, "local") == 0) {
        free(remembered);
        m->store = p->local;
        return 0;
    }
    if (strncmp(want, "etcd:", 5) != 0) {
        snprintf(err, errlen, "--store '%s' is neither 'local' nor etcd:http://HOST:PORT[,...]",
                 want);
        free(remembered);
        return -EINVAL;
    }
    p->spec = strdup(want);
    rc = p->spec ? open_etcd(m, remembered != NULL, err, errlen) : -ENOMEM;
    free(remembered);
    if (rc == 0)
        bfs_log(MGMT_LOG, BFS_LOG_INFO, "pool store %s, pool %s, node %s (%s at %s)", p->spec,
                p->pool_id, m->node_uuid, p->name, p->address);
    return rc;
}

void bfs_pool_close(struct bfs_mgmt *m)
{
    struct bfs_pool *p = m->pool;
    if (!p)
        return;
    if (m->store && m->store != p->local)
        bfs_store_close(m->store);
    bfs_store_close(p->local);
    m->store = NULL;
    free(p->spec);
    free(p);
    m->pool = NULL;
    the_m = NULL;
}

/* ---- nodes ---- */

struct node {
    char uuid[40], name[256], address[300];
    bool alive;
    uint64_t rev;
};

/* Every member, with liveness. */
static int list_nodes(struct bfs_mgmt *m, struct node **out, int *n)
{
    struct bfs_store_kv *kvs = NULL, *alive = NULL;
    size_t nk = 0, na = 0;
    int rc = bfs_store_list(m->store, "nodes/", &kvs, &nk);
    if (rc == 0)
        rc = bfs_store_list(m->store, "alive/", &alive, &na);
    struct node *v = rc == 0 ? calloc(nk + 1, sizeof(*v)) : NULL;
    if (rc == 0 && !v)
        rc = -ENOMEM;
    int cnt = 0;
    for (size_t i = 0; rc == 0 && i < nk; i++) {
        struct json_object *j = json_tokener_parse(kvs[i].value), *o;
        struct node *d = &v[cnt];
        snprintf(d->uuid, sizeof(d->uuid), "%s", kvs[i].key + strlen("nodes/"));
        if (j && json_object_object_get_ex(j, "name", &o))
            snprintf(d->name, sizeof(d->name), "%s", json_object_get_string(o));
        if (j && json_object_object_get_ex(j, "address", &o))
            snprintf(d->address, sizeof(d->address), "%s", json_object_get_string(o));
        json_object_put(j);
        d->rev = kvs[i].rev;
        for (size_t k = 0; k < na; k++)
            if (strcmp(alive[k].key + strlen("alive/"), d->uuid) == 0)
                d->alive = true;
        cnt++;
    }
    bfs_store_kvs_free(kvs, nk);
    bfs_store_kvs_free(alive, na);
    if (rc < 0) {
        free(v);
        return rc;
    }
    *out = v;
    *n = cnt;
    return 0;
}

/* HOST of HOST:PORT into buf. */
static void host_of(const char *addr, char *buf, size_t len)
{
    snprintf(buf, len, "%s", addr);
    char *c = strrchr(buf, ':');
    if (c)
        *c = 0;
}

static bool node_matches(const struct node *d, const char *host)
{
    return strcmp(d->name, host) == 0 || strcmp(d->address, host) == 0 ||
           strcmp(d->uuid, host) == 0;
}

bool bfs_pool_brick_is_mine(const struct bfs_mgmt *m, const struct bfs_volume *v, int idx)
{
    const char *n = v->bricks[idx].node;
    /* No owner: this node's on a single node; in a pool nobody's, so that
     * a brick added by a path that does not set owners (a bug) is never
     * run by every node at once. */
    if (!n[0])
        return !bfs_pool_enabled(m);
    return strcmp(n, m->node_uuid) == 0;
}

bool bfs_pool_owns_bricks(const struct bfs_mgmt *m, const struct bfs_volume *v)
{
    for (int i = 0; i < v->nbricks; i++)
        if (bfs_pool_brick_is_mine(m, v, i))
            return true;
    return false;
}

struct bfs_pool_nodes {
    struct node *v;
    int n;
};

int bfs_pool_nodes_get(struct bfs_mgmt *m, struct bfs_pool_nodes **out)
{
    struct bfs_pool_nodes *ns = calloc(1, sizeof(*ns));
    if (!ns)
        return -ENOMEM;
    int rc = bfs_pool_enabled(m) ? list_nodes(m, &ns->v, &ns->n) : 0;
    if (rc < 0) {
        free(ns);
        return rc;
    }
    *out = ns;
    return 0;
}

void bfs_pool_nodes_free(struct bfs_pool_nodes *ns)
{
    if (ns)
        free(ns->v);
    free(ns);
}

int bfs_pool_resolve_in(const struct bfs_pool_nodes *ns, const char *host, char uuid[40],
                        char *addr, size_t addrlen)
{
    for (int i = 0; i < ns->n; i++)
        if (strcmp(ns->v[i].name, host) == 0 || strcmp(ns->v[i].uuid, host) == 0) {
            snprintf(uuid, 40, "%s", ns->v[i].uuid);
            host_of(ns->v[i].address, addr, addrlen);
            return 0;
        }
    return -ENOENT;
}

bool bfs_pool_known_host(const char *host)
{
    struct bfs_mgmt *m = the_m;
    if (!m || !bfs_pool_enabled(m))
        return false;
    struct node *nodes;
    int n;
    bool found = false;
    if (list_nodes(m, &nodes, &n) < 0)
        return false;
    for (int i = 0; i < n && !found; i++) {
        char h[300];
        host_of(nodes[i].address, h, sizeof(h));
        found = strcmp(h, host) == 0;
    }
    free(nodes);
    return found;
}

static struct json_object *node_json(const struct node *d, bool self)
{
    struct json_object *j = json_object_new_object();
    json_object_object_add(j, "uuid", json_object_new_string(d->uuid));
    json_object_object_add(j, "name", json_object_new_string(d->name));
    json_object_object_add(j, "address", json_object_new_string(d->address));
    json_object_object_add(j, "state", json_object_new_string(d->alive ? "Connected"
                                                                        : "Disconnected"));
    json_object_object_add(j, "self", json_object_new_boolean(self));
    return j;
}

int bfs_op_node(struct bfs_mgmt *m, struct json_object **out, struct bfs_err *e)
{
    struct bfs_pool *p = m->pool;
    struct json_object *j = json_object_new_object();
    json_object_object_add(j, "uuid", json_object_new_string(m->node_uuid));
    json_object_object_add(j, "name", json_object_new_string(p->name));
    json_object_object_add(j, "address", json_object_new_string(p->address));
    json_object_object_add(j, "store", json_object_new_string(bfs_store_scheme(m->store)));
    json_object_object_add(j, "pool", p->spec ? json_object_new_string(p->pool_id) : NULL);
    bool member = false;
    if (p->spec) {
        char key[64];
        struct bfs_store_kv kv;
        snprintf(key, sizeof(key), "nodes/%s", m->node_uuid);
        int rc = bfs_store_get(m->store, key, &kv);
        bfs_store_kv_clear(&kv);
        if (rc < 0 && rc != -ENOENT) {
            json_object_put(j);
            return bfs_pool_store_fail(e, rc, "cannot read this node's membership");
        }
        member = rc == 0;
    }
    json_object_object_add(j, "member", json_object_new_boolean(member));
    *out = j;
    return 0;
}

int bfs_op_pool_list(struct bfs_mgmt *m, bool peers_only, struct json_object **out,
                     struct bfs_err *e)
{
    struct json_object *arr = json_object_new_array();
    if (!bfs_pool_enabled(m)) {
        if (!peers_only) { /* a single node on its local store */
            struct node self = {.alive = true};
            snprintf(self.uuid, sizeof(self.uuid), "%s", m->node_uuid);
            snprintf(self.name, sizeof(self.name), "%s", m->pool->name);
            snprintf(self.address, sizeof(self.address), "%s", m->pool->address);
            json_object_array_add(arr, node_json(&self, true));
        }
    } else {
        struct node *nodes;
        int n, rc = list_nodes(m, &nodes, &n);
        if (rc < 0) {
            json_object_put(arr);
            return bfs_pool_store_fail(e, rc, "cannot list the pool's nodes");
        }
        for (int i = 0; i < n; i++) {
            bool self = strcmp(nodes[i].uuid, m->node_uuid) == 0;
            if (!(peers_only && self))
                json_object_array_add(arr, node_json(&nodes[i], self));
        }
        free(nodes);
    }
    *out = json_object_new_object();
    json_object_object_add(*out, peers_only ? "peers" : "nodes", arr);
    return 0;
}

/* ---- probe ---- */

/* GET /v1/node answers a few hundred bytes (uuid, name, address, pool). */
#define NODE_ANSWER_MAX ((size_t)64 << 10)

/* GET http://addr/v1/node -> parsed JSON, or fills e. */
static int fetch_node(const char *addr, struct json_object **out, struct bfs_err *e)
{
    char url[400], cap[32];
    struct bfs_body b;
    bfs_body_init(&b, NODE_ANSWER_MAX);
    snprintf(url, sizeof(url), "http://%s/v1/node", addr);
    CURL *c = curl_easy_init();
    if (!c)
        return bfs_fail(e, 500, "out of memory");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, bfs_body_curl_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    CURLcode cc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    struct json_object *j = cc == CURLE_OK && code == 200 && b.p ? json_tokener_parse(b.p) : NULL;
    bool over = b.over;
    bfs_body_free(&b);
    if (over)
        return bfs_fail(e, 502, "%s answered more than %s to GET /v1/node: not a brickfsd of "
                        "this version", addr, bfs_body_cap_str(NODE_ANSWER_MAX, cap, sizeof(cap)));
    if (cc != CURLE_OK)
        return bfs_fail(e, 502, "cannot reach brickfsd at %s: %s", addr, curl_easy_strerror(cc));
    if (!j)
        return bfs_fail(e, 502, "%s answered HTTP %ld to GET /v1/node: not a brickfsd of this "
                        "version", addr, code);
    *out = j;
    return 0;
}

static const char *jstr(struct json_object *j, const char *k)
{
    struct json_object *o;
    return json_object_object_get_ex(j, k, &o) && json_object_is_type(o, json_type_string)
               ? json_object_get_string(o) : NULL;
}

static int probe_locked(struct bfs_mgmt *m, const char *host, struct json_object **out,
                        struct bfs_err *e)
{
    struct bfs_pool *p = m->pool;
    char addr[300];
    if (!host || !*host || strlen(host) > 255 || strpbrk(host, "/ ?#@"))
        return bfs_fail(e, 400, "peer probe needs HOST[:PORT], got '%s'", host ? host : "");
    if (strchr(host, ':'))
        snprintf(addr, sizeof(addr), "%s", host);
    else
        snprintf(addr, sizeof(addr), "%s:%d", host, BFS_MGMT_DEFAULT_PORT);
    if (!bfs_pool_enabled(m))
        return bfs_fail(e, 409, "this node runs on its local store, not in a pool: start "
                        "brickfsd with --store etcd:http://HOST:2379 to form one "
                        "(docs/design/pool.md)");
    struct json_object *j = NULL, *mine = NULL;
    if (bfs_op_node(m, &mine, e) < 0)
        return -1;
    bool member = json_object_get_boolean(json_object_object_get(mine, "member"));
    json_object_put(mine);
    if (!member)
        return bfs_fail(e, 409, "this node is not a member of pool %s yet: probe it from a "
                        "member", p->pool_id);
    if (fetch_node(addr, &j, e) < 0)
        return -1;
    const char *uuid = jstr(j, "uuid"), *pool = jstr(j, "pool"), *store = jstr(j, "store");
    const char *name = jstr(j, "name"), *address = jstr(j, "address");
    int rc = 0;
    if (!uuid || !name || !address) {
        rc = bfs_fail(e, 502, "%s answered GET /v1/node without uuid, name and address", addr);
    } else if (strcmp(uuid, m->node_uuid) == 0) {
        *out = json_object_new_object();
        json_object_object_add(*out, "message", json_object_new_string(
                               "probe on this node itself is not needed"));
    } else if (!pool || strcmp(pool, p->pool_id) != 0) {
        rc = bfs_fail(e, 409, "%s (%s) is %s: start it with --store %s to join this pool",
                      addr, name, pool ? "in another pool" : (store && strcmp(store, "local") == 0
                                                                  ? "on its local store"
                                                                  : "not in a pool"),
                      p->spec);
    } else {
        char key[64];
        snprintf(key, sizeof(key), "nodes/%s", uuid);
        struct json_object *rec = json_object_new_object();
        json_object_object_add(rec, "uuid", json_object_new_string(uuid));
        json_object_object_add(rec, "name", json_object_new_string(name));
        json_object_object_add(rec, "address", json_object_new_string(address));
        json_object_object_add(rec, "joined", json_object_new_int64((int64_t)time(NULL)));
        const char *s = json_object_to_json_string_ext(rec, JSON_C_TO_STRING_PLAIN);
        int w = bfs_store_cas(m->store, key, s, strlen(s), 0, NULL);
        json_object_put(rec);
        if (w < 0 && w != -ESTALE) {
            rc = bfs_pool_store_fail(e, w, "cannot add the node");
        } else {
            *out = json_object_new_object();
            json_object_object_add(*out, "uuid", json_object_new_string(uuid));
            json_object_object_add(*out, "name", json_object_new_string(name));
            json_object_object_add(*out, "message", json_object_new_string(
                                   w == -ESTALE ? "already in the pool" : "added to the pool"));
            bfs_log(MGMT_LOG, BFS_LOG_INFO, "peer probe %s: node %s (%s) %s", addr, uuid, name,
                    w == -ESTALE ? "already in the pool" : "added");
        }
    }
    json_object_put(j);
    return rc;
}

int bfs_op_peer_probe(struct bfs_mgmt *m, const char *host, struct json_object **out,
                      struct bfs_err *e)
{
    pthread_mutex_lock(&m->oplock);
    int rc = probe_locked(m, host, out, e);
    pthread_mutex_unlock(&m->oplock);
    return rc;
}

/* ---- detach ---- */

static int bricks_on(struct bfs_mgmt *m, const char *uuid, char *vol, size_t vlen,
                     struct bfs_err *e)
{
    struct bfs_volume **vols;
    int n, count = 0;
    pthread_mutex_lock(&m->lock);
    int rc = bfs_volume_list(m, &vols, &n);
    pthread_mutex_unlock(&m->lock);
    if (rc < 0)
        return bfs_pool_store_fail(e, rc, "cannot list volumes");
    for (int i = 0; i < n; i++)
        for (int b = 0; b < vols[i]->nbricks; b++)
            if (strcmp(vols[i]->bricks[b].node, uuid) == 0 && count++ == 0)
                snprintf(vol, vlen, "%s", vols[i]->name);
    bfs_volume_list_free(vols, n);
    return count;
}

static int detach_locked(struct bfs_mgmt *m, const char *host, bool force,
                         struct json_object **out, struct bfs_err *e)
{
    if (!bfs_pool_enabled(m))
        return bfs_fail(e, 409, "this node runs on its local store: it has no peers");
    struct node *nodes, *d = NULL;
    int n, rc = list_nodes(m, &nodes, &n);
    if (rc < 0)
        return bfs_pool_store_fail(e, rc, "cannot list the pool's nodes");
    for (int i = 0; i < n && !d; i++)
        if (node_matches(&nodes[i], host))
            d = &nodes[i];
    char vol[BFS_VOLNAME_MAX + 1] = "";
    /* The node is removed only if no volume changed since its bricks were
     * counted (one txn below): a volume given a brick on it meanwhile, from
     * any node, makes the detach fail instead of leaving that brick to a
     * node outside the pool. */
    uint64_t since = d ? bfs_store_revision(m->store) : 0;
    if (!d) {
        rc = bfs_fail(e, 404, "%s is not a node of this pool (brickfs pool list)", host);
    } else if (strcmp(d->uuid, m->node_uuid) == 0) {
        rc = bfs_fail(e, 409, "%s is this node: detach it from another node", host);
    } else if ((rc = bricks_on(m, d->uuid, vol, sizeof(vol), e)) != 0) {
        if (rc > 0)
            rc = bfs_fail(e, 409, "%s (%s) has %d brick(s) of volume(s) (%s, ...): delete "
                          "them first", host, d->name, rc, vol);
    } else if (!d->alive && !force) {
        rc = bfs_fail(e, 409, "%s (%s) is disconnected; 'peer detach %s force' removes it "
                      "anyway", host, d->name, host);
    } else if (since == 0) {
        rc = bfs_pool_store_fail(e, -EHOSTUNREACH, "cannot read the store's revision");
    } else {
        char key[64];
        struct bfs_store_cond unchanged = {.key = "volumes/", .prefix = true, .max_rev = since};
        snprintf(key, sizeof(key), "nodes/%s", d->uuid);
        bfs__test_pause("detach");
        int w = bfs_store_write_if(m->store, key, NULL, 0, d->rev, &unchanged, 1, NULL);
        if (w < 0)
            rc = w == -ESTALE || w == -ENOENT
                     ? bfs_fail(e, 409, "%s or the volumes changed meanwhile (a brick on it "
                                "may have been added); try again", host)
                     : bfs_pool_store_fail(e, w, "cannot remove the node");
        else {
            *out = json_object_new_object();
            json_object_object_add(*out, "uuid", json_object_new_string(d->uuid));
            json_object_object_add(*out, "name", json_object_new_string(d->name));
            bfs_log(MGMT_LOG, BFS_LOG_INFO, "peer detach: node %s (%s) removed", d->uuid,
                    d->name);
        }
    }
    free(nodes);
    return rc;
}

int bfs_op_peer_detach(struct bfs_mgmt *m, const char *host, bool force,
                       struct json_object **out, struct bfs_err *e)
{
    pthread_mutex_lock(&m->oplock);
    int rc = detach_locked(m, host, force, out, e);
    pthread_mutex_unlock(&m->oplock);
    return rc;
}
