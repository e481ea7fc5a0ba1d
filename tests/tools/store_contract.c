/*
 * store_contract.c — runs the store contract (tests/lib/store-contract.h)
 * against the store named on the command line, plus what only a networked
 * backend has: leases, endpoint failover, and failing fast when nothing
 * answers. Driven by tests/integration/105-store-etcd.t, which starts etcd.
 *
 *   store_contract SPEC [DEAD-URL]
 *
 * DEAD-URL: an http:// endpoint where nothing listens.
 *
 * It includes the backends' sources, so the compaction test can start a
 * watch from a revision of its choice (watch_from) and compact etcd.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt/store-etcd.c"
#include "mgmt/store-local.c"
#include "mgmt/store.c"
#include "store-contract.h"
#include "tap.h"

static const char *spec;

static struct bfs_store *open_store(void)
{
    char err[512] = "";
    struct bfs_store *s = NULL;
    if (bfs_store_open(spec, &s, err, sizeof(err)) < 0)
        printf("# open %s: %s\n", spec, err);
    return s;
}

static void test_lease(void)
{
    struct bfs_store *a = open_store(), *b = open_store();
    struct bfs_store_kv kv;
    if (!a || !b)
        return;
    is_int(bfs_store_put_lease(a, "alive/n1", "up", 2, NULL), 0, "put under a lease");
    is_int(bfs_store_get(b, "alive/n1", &kv), 0, "visible to another handle");
    bfs_store_kv_clear(&kv);
    is_int(bfs_store_put_lease(a, "alive/n2", "up", 2, NULL), 0, "a second lease key");
    bfs_store_close(a); /* revokes the lease */
    is_int(bfs_store_get(b, "alive/n1", &kv), -ENOENT, "gone once its owner closed the store");
    is_int(bfs_store_get(b, "alive/n2", &kv), -ENOENT, "both of them");
    bfs_store_close(b);
}

static void test_put_all(void)
{
    struct bfs_store *s = open_store();
    struct bfs_store_kv kv, kvs[2] = {{.key = (char *)"imp/a", .value = (char *)"1", .len = 1},
                                      {.key = (char *)"imp/b", .value = (char *)"2", .len = 1}};
    if (!s)
        return;
    is_int(bfs_store_put_all(s, kvs, 2, "imp/guard", NULL), 0, "put_all with an absent guard");
    is_int(bfs_store_get(s, "imp/b", &kv), 0, "wrote every key");
    bfs_store_kv_clear(&kv);
    bfs_store_put(s, "imp/guard", "g", 1, NULL);
    kvs[0].key = (char *)"imp/c";
    is_int(bfs_store_put_all(s, kvs, 2, "imp/guard", NULL), -ESTALE, "guard present: ESTALE");
    is_int(bfs_store_get(s, "imp/c", &kv), -ENOENT, "and nothing was written");
    bfs_store_close(s);
}

static void test_endpoints(const char *dead)
{
    char sp[1024], err[512] = "";
    struct bfs_store *s = NULL;
    const char *good = spec + strlen("etcd:");
    snprintf(sp, sizeof(sp), "etcd:%s,%s;timeout=1000", dead, good);
    is_int(bfs_store_open(sp, &s, err, sizeof(err)), 0, "a dead endpoint first: open works %s",
           err);
    if (s) {
        uint64_t r;
        is_int(bfs_store_put(s, "fo/k", "v", 1, &r), 0, "and writes go to the live one");
        bfs_store_close(s);
    }
    snprintf(sp, sizeof(sp), "etcd:%s;timeout=500", dead);
    s = NULL;
    is_int(bfs_store_open(sp, &s, err, sizeof(err)), -EHOSTUNREACH, "nothing answers: open fails");
    ok(strstr(err, "unreachable") && strstr(err, dead), "naming the endpoint: %s", err);
    s = NULL;
    is_int(bfs_store_open("etcd:ftp://x", &s, err, sizeof(err)), -EINVAL, "bad URL refused");
    is_int(bfs_store_open("etcd:http://x:1;bogus=1", &s, err, sizeof(err)), -EINVAL,
           "bad option refused: %s", err);
}

/* Polls until w's last event is key (10 s at most). */
static bool wait_key(struct seen *w, const char *key)
{
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&w->lock);
        bool same = strcmp(w->key, key) == 0;
        pthread_mutex_unlock(&w->lock);
        if (same)
            return true;
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

static int lost; /* key NULL calls of on_lost */

static void on_lost(const char *key, const char *val, size_t len, uint64_t rev, void *arg)
{
    if (!key)
        __atomic_add_fetch(&lost, 1, __ATOMIC_SEQ_CST);
    on_change(key, val, len, rev, arg);
}

/* A watch that resumes from a revision etcd compacted away meanwhile (its
 * node was cut off while the history was compacted): its watcher is told
 * that changes were lost (key NULL: re-read everything), and it goes on
 * seeing every write after that. etcd answers such a watch with
 * "canceled" and then keeps the stream open and silent. */
static void test_compaction(void)
{
    struct bfs_store *s = open_store();
    if (!s)
        return;
    struct etcd *e = s->be;
    uint64_t r0 = 0, r = 0, rb = 0;
    bfs_store_put(s, "cw/a", "1", 1, &r0);
    for (int i = 0; i < 3; i++)
        bfs_store_put(s, "cw/a", "2", 1, &r);
    struct json_object *req = json_object_new_object(), *ans = NULL;
    json_object_object_add(req, "revision", json_object_new_int64((int64_t)r));
    is_int(call(e, "/v3/kv/compaction", req, &ans), 0, "history compacted up to %llu",
           (unsigned long long)r);
    json_object_put(req);
    json_object_put(ans);
    struct seen w = {.lock = PTHREAD_MUTEX_INITIALIZER};
    void *h = NULL;
    is_int(watch_from(e, "cw/", r0 + 1, on_lost, &w, &h), 0,
           "a watch from revision %llu, compacted", (unsigned long long)(r0 + 1));
    if (!h) {
        bfs_store_close(s);
        return;
    }
    ok(wait_seen(&w, 1) >= 1, "its watcher is called");
    is_int(__atomic_load_n(&lost, __ATOMIC_SEQ_CST), 1, "once told that changes were lost "
           "(key NULL: re-read everything)");
    bfs_store_put(s, "cw/b", "3", 1, &rb);
    ok(wait_key(&w, "cw/b"), "a write after the resync is seen");
    is_int(w.rev, rb, "with its revision");
    bfs_store_delete(s, "cw/a", BFS_STORE_ANY, NULL);
    ok(wait_key(&w, "cw/a") && w.deleted, "and the next one");
    etcd_unwatch(e, h);
    bfs_store_close(s);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: store_contract SPEC [DEAD-URL]\n");
        return 2;
    }
    spec = argv[1];
    plan_lazy();
    store_contract();
    if (strncmp(spec, "etcd:", 5) == 0) {
        test_lease();
        test_put_all();
        test_compaction();
        if (argc > 2)
            test_endpoints(argv[2]);
    }
    return done_testing();
}
