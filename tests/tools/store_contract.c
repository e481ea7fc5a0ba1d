/*
 * store_contract.c — runs the store contract (tests/lib/store-contract.h)
 * against the store named on the command line, plus what only a networked
 * backend has: leases, endpoint failover, and failing fast when nothing
 * answers. Driven by tests/integration/105-store-etcd.t, which starts etcd.
 *
 *   store_contract SPEC [DEAD-URL]
 *
 * DEAD-URL: an http:// endpoint where nothing listens.
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
        if (argc > 2)
            test_endpoints(argv[2]);
    }
    return done_testing();
}
