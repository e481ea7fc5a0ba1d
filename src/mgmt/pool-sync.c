/*
 * pool-sync.c — how each brickfsd acts on the shared store
 * (docs/design/pool.md, "Each brickfsd's loop"): a thread that
 *   - on every change under volumes/ (an etcd watch), re-reads the volumes
 *     that changed (every volume at start, after a failure and when the
 *     watch lost changes) and, for each, starts this node's bricks of
 *     started volumes and stops those of other volumes, as
 *     startup reconciliation does, stops those the volume no longer gives
 *     it (remove-brick, replace-brick), and makes its self-heal daemon and
 *     rebalance process of each volume match the document;
 *   - every second publishes the state of this node's bricks
 *     (bricks/VOL/BRICK, under the node's lease, written only when it
 *     changed), so volume status and the port map on any node show them;
 *     it uses the volumes as the last reconcile read them, so an idle
 *     node sends etcd nothing but its lease keep-alives.
 * Also the readers of that state and the create-time owner resolution.
 *
 * Lifetime: one sync per process (static): bfs_pool_sync_start() after
 * startup reconciliation, bfs_pool_sync_stop() before the supervisor
 * stops. The watch callback only sets a flag: it runs on the store's
 * thread and must not take m->lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "core/log.h"
#include "mgmt/pool.h"
#include "mgmt/store.h"

struct pub {
    char key[300];
    char *val;
    struct pub *next;
};

#define MAX_CHANGED 32 /* more distinct volumes changed at once: re-read all */

static struct {
    pthread_t thr;
    bool running, quit, dirty;
    bool full;                            /* re-read every volume */
    char changed[MAX_CHANGED][BFS_VOLNAME_MAX + 1]; /* else these */
    int nchanged;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct bfs_store_watch *watch;
    struct pub *pubs; /* what was published last, per key (thread only) */
    /* The volumes as the last reconcile read them (thread only): publish
     * uses them, so an idle node asks etcd nothing but its keep-alives. */
    struct bfs_volume **vols;
    int nvols;
} sync_ = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

/* The watch: which volumes changed (key NULL: changes were lost). Only
 * the names are kept; the thread reads the documents, so it always acts
 * on the latest one. */
static void on_volumes(const char *key, const char *val, size_t len, uint64_t rev, void *arg)
{
    (void)val, (void)len, (void)rev, (void)arg;
    const char *name = key ? key + strlen("volumes/") : NULL;
    pthread_mutex_lock(&sync_.lock);
    sync_.dirty = true;
    if (!name || strlen(name) > BFS_VOLNAME_MAX) {
        sync_.full = true;
    } else if (!sync_.full) {
        int i = 0;
        while (i < sync_.nchanged && strcmp(sync_.changed[i], name) != 0)
            i++;
        if (i == MAX_CHANGED)
            sync_.full = true;
        else if (i == sync_.nchanged)
            snprintf(sync_.changed[sync_.nchanged++], BFS_VOLNAME_MAX + 1, "%s", name);
    }
    pthread_cond_signal(&sync_.cond);
    pthread_mutex_unlock(&sync_.lock);
}

/* This node's bricks, self-heal daemon and rebalance to match v's desired
 * state (m->oplock and m->lock held). */
static void act_on(struct bfs_mgmt *m, struct bfs_volume *v)
{
    bool want = v->status == BFS_VOL_STARTED, act = false;
    bfs_sup_stop_unowned(m, v); /* removed, replaced or moved away */
    bfs_rebal_sync(m, v);
    if (!bfs_pool_owns_bricks(m, v)) {
        bfs_sup_shd_sync(m, v); /* none here: stops one left from before */
        return;
    }
    for (int b = 0; b < v->nbricks && !act; b++) {
        struct bfs_brick_state st;
        if (!bfs_pool_brick_is_mine(m, v, b))
            continue;
        bfs_sup_brick_state(m, v, b, &st);
        act = want ? st.pid == 0 : st.pid != 0;
    }
    if (!act) {
        bfs_sup_shd_sync(m, v);
        return;
    }
    struct bfs_err e = {0};
    bfs_log(MGMT_LOG, BFS_LOG_INFO, "pool: volume %s is %s: %s this node's bricks", v->name,
            bfs_vol_status_name(v->status), want ? "starting" : "stopping");
    int rc = want ? bfs_sup_start_volume(m, v, &e) : bfs_sup_stop_volume(m, v, &e);
    if (rc < 0)
        bfs_log(MGMT_LOG, BFS_LOG_ERROR, "pool: volume %s: %s", v->name, e.msg);
    bfs_sup_shd_sync(m, v); /* after the bricks: it connects to them */
}

/* Every volume read and acted on; the cache replaced. False when the
 * store could not be read (the caller retries a second later). */
static bool reconcile_all(struct bfs_mgmt *m)
{
    struct bfs_volume **vols;
    int n;
    pthread_mutex_lock(&m->oplock);
    pthread_mutex_lock(&m->lock);
    if (bfs_volume_list(m, &vols, &n) < 0) {
        pthread_mutex_unlock(&m->lock);
        pthread_mutex_unlock(&m->oplock);
        bfs_log(MGMT_LOG, BFS_LOG_WARNING, "pool: cannot list volumes (%s); will retry",
                bfs_store_errmsg());
        return false;
    }
    for (int i = 0; i < n; i++)
        act_on(m, vols[i]);
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_unlock(&m->oplock);
    bfs_volume_list_free(sync_.vols, sync_.nvols);
    sync_.vols = vols;
    sync_.nvols = n;
    return true;
}

/* The cache entry of volume name replaced by v (NULL: removed); v is the
 * cache's from now on. */
static void cache_set(const char *name, struct bfs_volume *v)
{
    int i = 0;
    while (i < sync_.nvols && strcmp(sync_.vols[i]->name, name) != 0)
        i++;
    if (i < sync_.nvols) {
        bfs_volume_free(sync_.vols[i]);
        if (v) {
            sync_.vols[i] = v;
        } else {
            sync_.vols[i] = sync_.vols[sync_.nvols - 1];
            sync_.nvols--;
        }
        return;
    }
    if (!v)
        return;
    struct bfs_volume **nv = realloc(sync_.vols, (size_t)(sync_.nvols + 1) * sizeof(*nv));
    if (!nv) {
        bfs_volume_free(v);
        return;
    }
    sync_.vols = nv;
    sync_.vols[sync_.nvols++] = v;
}

/* Only the volumes named changed: one read of one document each, rather
 * than every node listing every volume on every change (what grew with
 * nodes x volumes; docs/performance-history.md, "Pool scale (issue 8)"). */
static bool reconcile_some(struct bfs_mgmt *m, char (*names)[BFS_VOLNAME_MAX + 1], int n)
{
    bool ok = true;
    pthread_mutex_lock(&m->oplock);
    pthread_mutex_lock(&m->lock);
    for (int i = 0; i < n && ok; i++) {
        struct bfs_volume *v = NULL;
        int rc = bfs_volume_load(m, names[i], &v);
        if (rc == 0)
            act_on(m, v);
        if (rc == 0 || rc == -ENOENT) { /* deleted: it was stopped first */
            cache_set(names[i], v);
            continue;
        }
        bfs_log(MGMT_LOG, BFS_LOG_WARNING, "pool: cannot read volume %s (%s); will retry",
                names[i], bfs_store_errmsg());
        ok = false;
    }
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_unlock(&m->oplock);
    return ok;
}

static struct pub *pub_find(const char *key)
{
    for (struct pub *p = sync_.pubs; p; p = p->next)
        if (strcmp(p->key, key) == 0)
            return p;
    return NULL;
}

/* Publishes this node's bricks whose state changed since last time. */
static void publish(struct bfs_mgmt *m)
{
    struct bfs_volume **vols = sync_.vols;
    int n = sync_.nvols;
    pthread_mutex_lock(&m->lock);
    struct { char key[300]; char val[400]; } *out = calloc(256, sizeof(*out));
    int k = 0;
    for (int i = 0; out && i < n; i++)
        for (int b = 0; b < vols[i]->nbricks && k < 256; b++) {
            if (!bfs_pool_brick_is_mine(m, vols[i], b))
                continue;
            struct bfs_brick_state st;
            char bn[160];
            bfs_sup_brick_state(m, vols[i], b, &st);
            bfs_brick_name(vols[i], b, bn, sizeof(bn));
            snprintf(out[k].key, sizeof(out[k].key), "bricks/%s/%s", vols[i]->name, bn);
            snprintf(out[k].val, sizeof(out[k].val),
                     "{\"node\": \"%s\", \"port\": %d, \"pid\": %d, \"online\": %s, "
                     "\"restarts\": %d}", m->node_uuid, vols[i]->bricks[b].port, st.pid,
                     st.online ? "true" : "false", st.restarts);
            k++;
        }
    pthread_mutex_unlock(&m->lock);
    for (int i = 0; out && i < k; i++) {
        struct pub *p = pub_find(out[i].key);
        if (p && strcmp(p->val, out[i].val) == 0)
            continue;
        if (bfs_store_put_lease(m->store, out[i].key, out[i].val, strlen(out[i].val), NULL) < 0)
            continue; /* etcd away: next round */
        if (!p && (p = calloc(1, sizeof(*p)))) {
            snprintf(p->key, sizeof(p->key), "%s", out[i].key);
            p->next = sync_.pubs;
            sync_.pubs = p;
        }
        if (p) {
            free(p->val);
            p->val = strdup(out[i].val);
        }
    }
    free(out);
}

static void *sync_thread(void *arg)
{
    struct bfs_mgmt *m = arg;
    bool pending = false; /* a reconcile failed: all again after the pause */
    char (*names)[BFS_VOLNAME_MAX + 1] = calloc(MAX_CHANGED, sizeof(*names));
    pthread_mutex_lock(&sync_.lock);
    while (!sync_.quit) {
        bool dirty = sync_.dirty || pending, full = sync_.full || pending || !names;
        int n = sync_.nchanged;
        if (names)
            memcpy(names, sync_.changed, (size_t)n * sizeof(*names));
        sync_.dirty = sync_.full = false;
        sync_.nchanged = 0;
        pthread_mutex_unlock(&sync_.lock);
        if (dirty)
            pending = full ? !reconcile_all(m) : !reconcile_some(m, names, n);
        publish(m);
        pthread_mutex_lock(&sync_.lock);
        if (sync_.quit || sync_.dirty)
            continue;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&sync_.cond, &sync_.lock, &ts);
    }
    pthread_mutex_unlock(&sync_.lock);
    free(names);
    return NULL;
}

int bfs_pool_sync_start(struct bfs_mgmt *m)
{
    if (!bfs_pool_enabled(m))
        return 0;
    int rc = bfs_store_watch(m->store, "volumes/", on_volumes, m, &sync_.watch);
    if (rc < 0)
        return rc;
    sync_.dirty = sync_.full = true; /* catch up once at start */
    rc = -pthread_create(&sync_.thr, NULL, sync_thread, m);
    sync_.running = rc == 0;
    return rc;
}

void bfs_pool_sync_stop(struct bfs_mgmt *m)
{
    if (!sync_.running)
        return;
    pthread_mutex_lock(&sync_.lock);
    sync_.quit = true;
    pthread_cond_signal(&sync_.cond);
    pthread_mutex_unlock(&sync_.lock);
    pthread_join(sync_.thr, NULL);
    bfs_store_unwatch(m->store, sync_.watch);
    bfs_volume_list_free(sync_.vols, sync_.nvols);
    sync_.vols = NULL;
    sync_.nvols = 0;
    while (sync_.pubs) {
        struct pub *p = sync_.pubs;
        sync_.pubs = p->next;
        free(p->val);
        free(p);
    }
    sync_.running = false;
}

int bfs_pool_brick_state(struct bfs_mgmt *m, const struct bfs_volume *v, int idx,
                         struct bfs_brick_state *out)
{
    char key[300], bn[160];
    struct bfs_store_kv kv;
    memset(out, 0, sizeof(*out));
    bfs_brick_name(v, idx, bn, sizeof(bn));
    snprintf(key, sizeof(key), "bricks/%s/%s", v->name, bn);
    int rc = bfs_store_get(m->store, key, &kv);
    if (rc < 0)
        return rc;
    struct json_object *j = json_tokener_parse(kv.value), *o;
    bfs_store_kv_clear(&kv);
    if (!j)
        return -EIO;
    if (json_object_object_get_ex(j, "node", &o) &&
        strcmp(json_object_get_string(o), v->bricks[idx].node) == 0) {
        if (json_object_object_get_ex(j, "pid", &o))
            out->pid = json_object_get_int(o);
        if (json_object_object_get_ex(j, "online", &o))
            out->online = json_object_get_boolean(o);
        if (json_object_object_get_ex(j, "restarts", &o))
            out->restarts = json_object_get_int(o);
    } else {
        rc = -ENOENT; /* another node's old entry */
    }
    json_object_put(j);
    return rc;
}

/* Bricks of v not in the wanted state, listed into buf; their count. */
static int lagging(struct bfs_mgmt *m, const struct bfs_volume *v, bool want, char *buf,
                   size_t len)
{
    int bad = 0;
    buf[0] = 0;
    for (int i = 0; i < v->nbricks; i++) {
        struct bfs_brick_state st;
        int known = 0;
        if (bfs_pool_brick_is_mine(m, v, i))
            bfs_sup_brick_state(m, v, i, &st);
        else
            known = bfs_pool_brick_state(m, v, i, &st);
        /* no entry: its node is not publishing (down, or cut off from etcd):
         * nobody can say the brick stopped */
        if (want ? st.online : st.pid == 0 && known == 0)
            continue;
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, "%s%s:%s (node %.8s%s)", bad ? ", " : "", v->bricks[i].host,
                 v->bricks[i].path, v->bricks[i].node[0] ? v->bricks[i].node : m->node_uuid,
                 known < 0 ? ", not reporting: disconnected?" : "");
        bad++;
    }
    return bad;
}

int bfs_pool_wait_bricks(struct bfs_mgmt *m, const char *name, bool want, int timeout_ms,
                         struct bfs_err *e)
{
    char which[900];
    int bad = 0;
    for (int waited = 0;; waited += 200) {
        struct bfs_volume *v;
        pthread_mutex_lock(&m->lock);
        int rc = bfs_volume_get(m, name, &v, e);
        if (rc == 0)
            bad = lagging(m, v, want, which, sizeof(which));
        pthread_mutex_unlock(&m->lock);
        bfs_volume_free(v);
        if (rc < 0)
            return rc;
        if (bad == 0)
            return 0;
        if (waited >= timeout_ms)
            break;
        usleep(200 * 1000);
    }
    return bfs_fail(e, 500, "volume %s is %s, but after %d s %d brick(s) are %s: %s; their "
                    "nodes act on it when they can (brickfs volume status %s)", name,
                    want ? "started" : "stopped", timeout_ms / 1000, bad,
                    want ? "not online" : "not known to be stopped", which, name);
}

int bfs_pool_owners(struct bfs_mgmt *m, const char **bricks, int n, char ***specs,
                    char ***nodes, struct bfs_err *e)
{
    char **s = calloc((size_t)n + 1, sizeof(*s)), **d = calloc((size_t)n + 1, sizeof(*d));
    struct bfs_pool_nodes *ns = NULL;
    int rc = s && d ? 0 : bfs_fail(e, 500, "out of memory");
    /* one read of the members for every brick (it is O(nodes) bytes) */
    int r = rc == 0 ? bfs_pool_nodes_get(m, &ns) : 0;
    if (r < 0)
        rc = bfs_pool_store_fail(e, r, "cannot read the pool's nodes");
    for (int i = 0; rc == 0 && i < n; i++) {
        const char *b = bricks[i] ? bricks[i] : "", *colon = strchr(b, ':');
        char host[256], uuid[40], addr[300];
        snprintf(host, sizeof(host), "%.*s", colon ? (int)(colon - b) : 0, b);
        r = colon ? bfs_pool_resolve_in(ns, host, uuid, addr, sizeof(addr)) : -ENOENT;
        if (r == 0) {
            size_t l = strlen(addr) + strlen(colon) + 1;
            if ((s[i] = malloc(l)))
                snprintf(s[i], l, "%s%s", addr, colon);
        } else {
            s[i] = strdup(b);
            snprintf(uuid, sizeof(uuid), "%s", m->node_uuid);
        }
        d[i] = strdup(uuid);
        if (!s[i] || !d[i])
            rc = bfs_fail(e, 500, "out of memory");
    }
    bfs_pool_nodes_free(ns);
    if (rc < 0) {
        bfs_pool_owners_free(s, d, n);
        return rc;
    }
    *specs = s;
    *nodes = d;
    return 0;
}

void bfs_pool_owners_free(char **specs, char **nodes, int n)
{
    for (int i = 0; i < n; i++) {
        if (specs)
            free(specs[i]);
        if (nodes)
            free(nodes[i]);
    }
    free(specs);
    free(nodes);
}
