/*
 * store.h — the key/value store behind brickfsd's state (DESIGN.md,
 * "Management"): get, put, compare-and-swap, delete, list by prefix and
 * watch, with revisions as etcd has them.
 *
 * Every successful write makes the store's revision larger (it may skip
 * numbers after a crash, it never goes back) and stamps the written key
 * with it. A CAS names the revision the caller read: 0 means "the key must
 * not exist". Values are bytes; the store adds a NUL after each value it
 * returns so that text can be used as a C string.
 *
 * Backends are chosen by a spec "SCHEME:ARG": "local:DIR" (store-local.c)
 * or "etcd:URL[,URL...][;timeout=MS][;prefix=P][;ttl=S]" (store-etcd.c,
 * docs/design/pool.md), with the same calls. Errors are -errno: -ENOENT (no
 * key), -ESTALE (CAS conflict), -EINVAL (bad key or spec), -EHOSTUNREACH
 * (etcd did not answer in time: bfs_store_errmsg() says which and why), -EIO
 * and others from the system.
 *
 * Thread-safe. Watch callbacks run on the thread of the write that caused
 * them (local) or on a backend thread (etcd), after the write is durable,
 * with no store lock released in between for local: a callback must not
 * call back into the same store. Lifetime: bfs_store_open() -> handle,
 * bfs_store_close() frees it and every watch still registered.
 */
#ifndef BFS_MGMT_STORE_H
#define BFS_MGMT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BFS_STORE_ANY UINT64_MAX /* delete/cas: no revision condition */
#define BFS_STORE_KEY_MAX 512

struct bfs_store;
struct bfs_store_watch;

/* A condition of bfs_store_write_if (one etcd txn compare). */
struct bfs_store_cond {
    const char *key;
    bool prefix;          /* the condition holds for every key starting with key */
    uint64_t max_rev;     /* every such key was last written at or before max_rev;
                           * BFS_STORE_ANY (key only): the key exists */
};

struct bfs_store_kv {
    char *key;
    char *value;   /* malloc'd, NUL-terminated after len bytes */
    size_t len;
    uint64_t rev;  /* revision of the write that made this value */
};

/* What a backend provides. be is the backend's own handle. */
struct bfs_store_ops {
    const char *scheme;
    int (*open)(const char *arg, void **be, char *err, size_t errlen);
    void (*close)(void *be);
    int (*get)(void *be, const char *key, struct bfs_store_kv *out);
    /* val NULL = delete. expect: BFS_STORE_ANY, 0 (must not exist) or a
     * revision the key must have. On success *rev is the new revision. */
    int (*write)(void *be, const char *key, const void *val, size_t len, uint64_t expect,
                 uint64_t *rev);
    /* Sorted by key. */
    int (*list)(void *be, const char *prefix, struct bfs_store_kv **out, size_t *n);
    uint64_t (*revision)(void *be);
    /* Optional (NULL: store.c fires watches itself after each write of
     * this process). A backend that sees other writers (etcd) delivers
     * every change, its own included, from its own threads. */
    int (*watch)(void *be, const char *prefix, void (*fn)(const char *, const char *, size_t,
                                                           uint64_t, void *),
                 void *arg, void **handle);
    void (*unwatch)(void *be, void *handle);
    /* Optional: a put tied to this process's liveness (etcd lease): the key
     * disappears when the process stops renewing it. */
    int (*put_lease)(void *be, const char *key, const void *val, size_t len, uint64_t *rev);
    /* Optional: write() only if every condition holds too, in one atomic
     * step (-ESTALE otherwise). NULL: store.c checks the conditions with
     * get/list under its lock, right for a backend only this process
     * writes (local). */
    int (*write_if)(void *be, const char *key, const void *val, size_t len, uint64_t expect,
                    const struct bfs_store_cond *conds, size_t nconds, uint64_t *rev);
    /* Optional: every kv written in one atomic step, only if guard does not
     * exist (-ESTALE otherwise). */
    int (*put_all)(void *be, const struct bfs_store_kv *kvs, size_t n, const char *guard,
                   uint64_t *rev);
};

extern const struct bfs_store_ops bfs_store_local_ops;
extern const struct bfs_store_ops bfs_store_etcd_ops;

/* The reason of the last failure of a store call on this thread ("" if
 * none was recorded): names the etcd endpoint and what went wrong. */
const char *bfs_store_errmsg(void);
void bfs_store_set_errmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Keys: 1..BFS_STORE_KEY_MAX bytes, printable ASCII, no leading '/'. */
int bfs_store_key_valid(const char *key);

int bfs_store_open(const char *spec, struct bfs_store **out, char *err, size_t errlen);
void bfs_store_close(struct bfs_store *s);

int bfs_store_get(struct bfs_store *s, const char *key, struct bfs_store_kv *out);
int bfs_store_put(struct bfs_store *s, const char *key, const void *val, size_t len,
                  uint64_t *rev);
int bfs_store_cas(struct bfs_store *s, const char *key, const void *val, size_t len,
                  uint64_t expect, uint64_t *rev);
int bfs_store_delete(struct bfs_store *s, const char *key, uint64_t expect, uint64_t *rev);
/* A put (val non-NULL) or delete (val NULL) of key with expect as for a
 * CAS, done only if every condition holds as well, all in one atomic step:
 * -ESTALE when the revision or any condition does not match. Closes races
 * between a check and the write it allows (peer detach against a volume
 * created on that node meanwhile, docs/design/pool.md). */
int bfs_store_write_if(struct bfs_store *s, const char *key, const void *val, size_t len,
                       uint64_t expect, const struct bfs_store_cond *conds, size_t nconds,
                       uint64_t *rev);
int bfs_store_list(struct bfs_store *s, const char *prefix, struct bfs_store_kv **out,
                   size_t *n);
uint64_t bfs_store_revision(struct bfs_store *s);

void bfs_store_kv_clear(struct bfs_store_kv *kv);
void bfs_store_kvs_free(struct bfs_store_kv *kvs, size_t n);

/* fn(key, value or NULL for a delete, len, rev, arg) for every later write
 * to a key starting with prefix. key NULL (etcd only): changes were lost
 * (compaction, or a gap the backend could not fill): re-read everything. */
typedef void (*bfs_store_watch_fn)(const char *key, const char *val, size_t len, uint64_t rev,
                                   void *arg);
int bfs_store_watch(struct bfs_store *s, const char *prefix, bfs_store_watch_fn fn, void *arg,
                    struct bfs_store_watch **out);
void bfs_store_unwatch(struct bfs_store *s, struct bfs_store_watch *w);

/* A put that lives as long as this process keeps the store open and
 * reachable (etcd lease); -ENOTSUP on a backend without leases (local). */
int bfs_store_put_lease(struct bfs_store *s, const char *key, const void *val, size_t len,
                        uint64_t *rev);
/* Writes every kvs[i] (key, value, len) in one atomic step if the key guard
 * does not exist: all or nothing. -ESTALE when guard exists, -ENOTSUP on a
 * backend without transactions (local). Watches see each key. */
int bfs_store_put_all(struct bfs_store *s, const struct bfs_store_kv *kvs, size_t n,
                      const char *guard, uint64_t *rev);
/* The scheme of the backend in use ("local", "etcd"). */
const char *bfs_store_scheme(const struct bfs_store *s);

#endif
