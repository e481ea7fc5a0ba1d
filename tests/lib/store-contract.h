/*
 * store-contract.h — the store contract (src/mgmt/store.h) as TAP checks,
 * shared by every backend's test: test_store_local (local) and
 * tests/tools/store_contract.c (etcd, driven by 105-store-etcd.t).
 *
 * Revisions are checked relative to each other, never as absolute numbers:
 * etcd's revision is its cluster's and starts at 1. Watch callbacks may
 * come on any thread and later than the write (etcd), so checks on them
 * poll for up to 10 s. The includer provides open_store(), which opens the
 * same store again on each call (reopen checks persistence).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "mgmt/store.h"
#include "tap.h"

static struct bfs_store *open_store(void);

static void contract_basics(void)
{
    struct bfs_store *s = open_store();
    ok(s != NULL, "the store opens");
    if (!s)
        return;
    uint64_t r0 = bfs_store_revision(s);
    struct bfs_store_kv kv;
    is_int(bfs_store_get(s, "volumes/a", &kv), -ENOENT, "missing key: ENOENT");
    uint64_t r1 = 0, r2 = 0, r3 = 0;
    is_int(bfs_store_put(s, "volumes/a", "one", 3, &r1), 0, "put");
    ok(r1 > r0, "a put makes the revision larger (%llu > %llu)", (unsigned long long)r1,
       (unsigned long long)r0);
    is_int(bfs_store_revision(s), r1, "the store is at the revision of the last write");
    is_int(bfs_store_get(s, "volumes/a", &kv), 0, "get after put");
    is_str(kv.value, "one", "value read back");
    is_int(kv.len, 3, "length read back");
    is_int(kv.rev, r1, "key carries its revision");
    bfs_store_kv_clear(&kv);

    is_int(bfs_store_put(s, "volumes/b", "two\0bin", 7, &r2), 0, "put binary value");
    ok(r2 > r1, "revisions increase");
    is_int(bfs_store_get(s, "volumes/b", &kv), 0, "get binary value");
    ok(kv.len == 7 && memcmp(kv.value, "two\0bin", 7) == 0, "binary value intact");
    bfs_store_kv_clear(&kv);
    is_int(bfs_store_put(s, "volumes/e", "", 0, NULL), 0, "put an empty value");
    is_int(bfs_store_get(s, "volumes/e", &kv), 0, "get an empty value");
    ok(kv.len == 0 && kv.value && kv.value[0] == 0, "empty value read back as \"\"");
    bfs_store_kv_clear(&kv);
    bfs_store_delete(s, "volumes/e", BFS_STORE_ANY, NULL);

    /* CAS */
    is_int(bfs_store_cas(s, "volumes/a", "x", 1, 0, NULL), -ESTALE,
           "CAS 'must not exist' on an existing key conflicts");
    is_int(bfs_store_cas(s, "volumes/a", "x", 1, r2, NULL), -ESTALE, "CAS on a stale revision");
    is_int(bfs_store_cas(s, "volumes/a", "uno", 3, r1, &r3), 0, "CAS on the current revision");
    ok(r3 > r2, "CAS made a larger revision");
    is_int(bfs_store_cas(s, "volumes/a", "again", 5, r1, NULL), -ESTALE,
           "a second CAS from the same read conflicts");
    is_int(bfs_store_cas(s, "volumes/c", "new", 3, 0, NULL), 0, "CAS create of a new key");
    is_int(bfs_store_cas(s, "volumes/nope", "x", 1, r1, NULL), -ESTALE,
           "CAS on a revision of a missing key conflicts");
    is_int(bfs_store_get(s, "volumes/a", &kv), 0, "get after CAS");
    is_str(kv.value, "uno", "CAS wrote its value");
    is_int(kv.rev, r3, "with the CAS's revision");
    bfs_store_kv_clear(&kv);

    /* keys */
    is_int(bfs_store_put(s, "", "x", 1, NULL), -EINVAL, "empty key refused");
    is_int(bfs_store_put(s, "/abs", "x", 1, NULL), -EINVAL, "key with leading / refused");
    is_int(bfs_store_put(s, "sp ace", "x", 1, NULL), -EINVAL, "key with a space refused");
    is_int(bfs_store_put(s, "odd/%key:x~", "v", 1, NULL), 0, "key with %% : ~ is stored");
    is_int(bfs_store_get(s, "odd/%key:x~", &kv), 0, "and read back");
    bfs_store_kv_clear(&kv);

    /* list */
    struct bfs_store_kv *kvs;
    size_t n;
    is_int(bfs_store_put(s, "volumez", "z", 1, NULL), 0, "a key just after the prefix range");
    is_int(bfs_store_list(s, "volumes/", &kvs, &n), 0, "list by prefix");
    is_int(n, 3, "three volumes");
    ok(n == 3 && strcmp(kvs[0].key, "volumes/a") == 0 && strcmp(kvs[2].key, "volumes/c") == 0,
       "sorted by key, prefix kept in keys");
    ok(n == 3 && strcmp(kvs[0].value, "uno") == 0 && kvs[0].rev == r3, "with values and revisions");
    bfs_store_kvs_free(kvs, n);
    is_int(bfs_store_list(s, "nothing/", &kvs, &n), 0, "list of an empty prefix");
    is_int(n, 0, "is empty");
    bfs_store_kvs_free(kvs, n);

    /* delete */
    uint64_t before = bfs_store_revision(s), rd = 0;
    is_int(bfs_store_delete(s, "volumes/b", r1, NULL), -ESTALE, "conditional delete, stale");
    is_int(bfs_store_delete(s, "volumes/b", r2, &rd), 0, "conditional delete, current");
    ok(rd > before, "delete advances the revision");
    is_int(bfs_store_delete(s, "volumes/b", BFS_STORE_ANY, NULL), -ENOENT,
           "delete of a missing key: ENOENT");
    is_int(bfs_store_delete(s, "volumes/b", r2, NULL), -ENOENT,
           "conditional delete of a missing key: ENOENT");
    is_int(bfs_store_get(s, "volumes/b", &kv), -ENOENT, "deleted key is gone");
    is_int(bfs_store_delete(s, "volumez", BFS_STORE_ANY, NULL), 0, "unconditional delete");
    uint64_t last = bfs_store_revision(s);
    bfs_store_close(s);

    /* reopen */
    s = open_store();
    ok(s != NULL, "reopen");
    if (!s)
        return;
    ok(bfs_store_revision(s) >= last, "revision does not go back across reopen");
    is_int(bfs_store_get(s, "volumes/a", &kv), 0, "value survives reopen");
    is_str(kv.value, "uno", "same value");
    is_int(kv.rev, r3, "same key revision");
    bfs_store_kv_clear(&kv);
    is_int(bfs_store_get(s, "volumes/b", &kv), -ENOENT, "delete survives reopen");
    bfs_store_close(s);
}

struct seen {
    pthread_mutex_t lock;
    int n;
    char key[64];
    int deleted;
    uint64_t rev;
    char val[16];
};

static void on_change(const char *key, const char *val, size_t len, uint64_t rev, void *arg)
{
    struct seen *w = arg;
    pthread_mutex_lock(&w->lock);
    w->n++;
    snprintf(w->key, sizeof(w->key), "%s", key ? key : "(lost)");
    snprintf(w->val, sizeof(w->val), "%.*s", val ? (int)len : 0, val ? val : "");
    w->deleted = val == NULL;
    w->rev = rev;
    pthread_mutex_unlock(&w->lock);
}

static int seen_count(struct seen *w)
{
    pthread_mutex_lock(&w->lock);
    int n = w->n;
    pthread_mutex_unlock(&w->lock);
    return n;
}

/* Polls until w has seen want events (10 s at most); returns the count. */
static int wait_seen(struct seen *w, int want)
{
    for (int i = 0; i < 1000 && seen_count(w) < want; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return seen_count(w);
}

static void contract_watch(void)
{
    struct bfs_store *s = open_store();
    if (!s)
        return;
    struct seen w = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct bfs_store_watch *h;
    uint64_t r, r2;
    is_int(bfs_store_watch(s, "volumes/", on_change, &w, &h), 0, "watch a prefix");
    bfs_store_put(s, "node/uuid", "u", 1, NULL);
    bfs_store_put(s, "volumes/w", "1", 1, &r);
    is_int(wait_seen(&w, 1), 1, "a write under the prefix is seen");
    is_str(w.key, "volumes/w", "with its key");
    is_str(w.val, "1", "its value");
    is_int(w.rev, r, "and its revision (the write outside the prefix was not seen)");
    bfs_store_cas(s, "volumes/w", "2", 1, 1, NULL); /* stale: no event */
    bfs_store_put(s, "volumes/x", "3", 1, &r2);
    is_int(wait_seen(&w, 2), 2, "the next write is seen");
    is_str(w.key, "volumes/x", "and it is the next one: a failed CAS is not seen");
    bfs_store_delete(s, "volumes/w", BFS_STORE_ANY, NULL);
    is_int(wait_seen(&w, 3), 3, "a delete is seen");
    ok(w.deleted && strcmp(w.key, "volumes/w") == 0, "as a delete of its key");

    /* a second handle on the same store sees the first one's writes: for
     * etcd these are other nodes' writes */
    struct bfs_store *s2 = open_store();
    struct seen w2 = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct bfs_store_watch *h2;
    if (s2 && strcmp(bfs_store_scheme(s2), "local") != 0) {
        is_int(bfs_store_watch(s2, "volumes/", on_change, &w2, &h2), 0, "watch on a 2nd handle");
        bfs_store_put(s, "volumes/y", "4", 1, &r);
        is_int(wait_seen(&w2, 1), 1, "a write through the other handle is seen");
        is_int(w2.rev, r, "with its revision");
        bfs_store_unwatch(s2, h2);
    }
    bfs_store_close(s2);

    bfs_store_unwatch(s, h);
    int n = seen_count(&w);
    bfs_store_put(s, "volumes/w", "5", 1, NULL);
    bfs_store_put(s, "volumes/sync", "6", 1, NULL);
    /* a fresh watch sees the last write, so the unwatched one had its chance */
    struct seen w3 = {.lock = PTHREAD_MUTEX_INITIALIZER};
    bfs_store_watch(s, "volumes/sync", on_change, &w3, &h);
    bfs_store_put(s, "volumes/sync", "7", 1, NULL);
    wait_seen(&w3, 1);
    is_int(seen_count(&w), n, "nothing after unwatch");
    bfs_store_close(s); /* closes the watch still registered */
}

/* bfs_store_write_if: a write that also needs keys to exist, or a prefix
 * to be unchanged since a revision (peer detach, volume saves in a pool). */
static void contract_write_if(void)
{
    struct bfs_store *s = open_store();
    struct bfs_store_kv kv;
    uint64_t r1 = 0, r2 = 0, r3 = 0;
    if (!s)
        return;
    bfs_store_put(s, "wi/vols/a", "1", 1, &r1);
    struct bfs_store_cond unchanged = {.key = "wi/vols/", .prefix = true, .max_rev = r1};
    is_int(bfs_store_write_if(s, "wi/k", "x", 1, 0, &unchanged, 1, &r2), 0,
           "write_if: prefix unchanged since r1: written");
    ok(r2 > r1, "with a new revision");
    bfs_store_put(s, "wi/vols/b", "2", 1, NULL);
    is_int(bfs_store_write_if(s, "wi/k2", "y", 1, 0, &unchanged, 1, NULL), -ESTALE,
           "a key under the prefix written since: ESTALE");
    is_int(bfs_store_get(s, "wi/k2", &kv), -ENOENT, "and nothing written");
    struct bfs_store_cond exists = {.key = "wi/node", .max_rev = BFS_STORE_ANY};
    is_int(bfs_store_write_if(s, "wi/k3", "z", 1, BFS_STORE_ANY, &exists, 1, NULL), -ESTALE,
           "a key that must exist does not: ESTALE");
    bfs_store_put(s, "wi/node", "n", 1, NULL);
    is_int(bfs_store_write_if(s, "wi/k3", "z", 1, BFS_STORE_ANY, &exists, 1, &r3), 0,
           "it exists: written");
    is_int(bfs_store_get(s, "wi/k3", &kv), 0, "readable");
    is_int(kv.rev, r3, "at its revision");
    bfs_store_kv_clear(&kv);
    struct bfs_store_cond both[2] = {exists, {.key = "wi/vols/", .prefix = true, .max_rev = r3}};
    is_int(bfs_store_write_if(s, "wi/k", NULL, 0, r2, both, 2, NULL), 0,
           "a delete with its revision and two conditions that hold");
    is_int(bfs_store_get(s, "wi/k", &kv), -ENOENT, "deleted");
    both[1].max_rev = r1;
    is_int(bfs_store_write_if(s, "wi/k3", NULL, 0, r3, both, 2, NULL), -ESTALE,
           "a delete whose second condition fails: ESTALE");
    is_int(bfs_store_get(s, "wi/k3", &kv), 0, "not deleted");
    bfs_store_kv_clear(&kv);
    struct bfs_store_cond bad = {.key = "wi/", .prefix = true, .max_rev = BFS_STORE_ANY};
    is_int(bfs_store_write_if(s, "wi/k4", "v", 1, 0, &bad, 1, NULL), -EINVAL,
           "a prefix condition needs a revision");
    bfs_store_close(s);
}

static void store_contract(void)
{
    contract_basics();
    contract_watch();
    contract_write_if();
}
