/*
 * store.c — the backend-independent half of the store: picks a backend from
 * the spec, checks keys, serialises writes with their watch callbacks, and
 * keeps the watch list. See store.h for the contract.
 *
 * Lifetime: a struct bfs_store owns its backend handle and its watches;
 * bfs_store_close() closes the first and frees the second.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt/store.h"

struct bfs_store_watch {
    void *be_handle; /* the backend's watch, when it has its own */
    char *prefix;
    bfs_store_watch_fn fn;
    void *arg;
    struct bfs_store_watch *next;
};

struct bfs_store {
    const struct bfs_store_ops *ops;
    void *be;
    /* Held across a write and its callbacks, so callbacks see writes in
     * revision order. */
    pthread_mutex_t lock;
    struct bfs_store_watch *watches;
};

static const struct bfs_store_ops *const backends[] = {&bfs_store_local_ops,
                                                       &bfs_store_etcd_ops};

static __thread char errmsg[512];

const char *bfs_store_errmsg(void)
{
    return errmsg;
}

void bfs_store_set_errmsg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errmsg, sizeof(errmsg), fmt, ap);
    va_end(ap);
}

int bfs_store_key_valid(const char *key)
{
    size_t n = key ? strlen(key) : 0;
    if (n == 0 || n > BFS_STORE_KEY_MAX || key[0] == '/')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (key[i] < 0x21 || key[i] > 0x7e)
            return 0;
    return 1;
}

int bfs_store_open(const char *spec, struct bfs_store **out, char *err, size_t errlen)
{
    const char *colon = spec ? strchr(spec, ':') : NULL;
    *out = NULL;
    if (!colon) {
        snprintf(err, errlen, "store spec '%s' is not SCHEME:ARG (for example local:/var/lib/"
                 "brickfs/store)", spec ? spec : "");
        return -EINVAL;
    }
    const struct bfs_store_ops *ops = NULL;
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
        if (strlen(backends[i]->scheme) == (size_t)(colon - spec) &&
            strncmp(backends[i]->scheme, spec, (size_t)(colon - spec)) == 0)
            ops = backends[i];
    if (!ops) {
        snprintf(err, errlen, "store backend '%.*s' is not available (this build has: local, "
                 "etcd)",
                 (int)(colon - spec), spec);
        return -ENOTSUP;
    }
    struct bfs_store *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->ops = ops;
    pthread_mutex_init(&s->lock, NULL);
    int rc = ops->open(colon + 1, &s->be, err, errlen);
    if (rc < 0) {
        pthread_mutex_destroy(&s->lock);
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void bfs_store_close(struct bfs_store *s)
{
    if (!s)
        return;
    while (s->watches) {
        struct bfs_store_watch *w = s->watches;
        s->watches = w->next;
        if (w->be_handle)
            s->ops->unwatch(s->be, w->be_handle);
        free(w->prefix);
        free(w);
    }
    s->ops->close(s->be);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int bfs_store_get(struct bfs_store *s, const char *key, struct bfs_store_kv *out)
{
    memset(out, 0, sizeof(*out));
    if (!bfs_store_key_valid(key))
        return -EINVAL;
    return s->ops->get(s->be, key, out);
}

/* Each condition checked with get/list (s->lock held): for a backend that
 * only this process writes. 0, -ESTALE, or another error. */
static int check_conds(struct bfs_store *s, const struct bfs_store_cond *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct bfs_store_kv kv = {0}, *kvs = NULL;
        size_t nk = 0;
        int rc;
        if (!c[i].prefix) {
            rc = s->ops->get(s->be, c[i].key, &kv);
            if (rc == 0 && c[i].max_rev != BFS_STORE_ANY && kv.rev > c[i].max_rev)
                rc = -ESTALE;
            bfs_store_kv_clear(&kv);
            if (rc < 0)
                return rc == -ENOENT ? (c[i].max_rev == BFS_STORE_ANY ? -ESTALE : 0) : rc;
            continue;
        }
        if ((rc = s->ops->list(s->be, c[i].key, &kvs, &nk)) < 0)
            return rc;
        for (size_t k = 0; k < nk && rc == 0; k++)
            if (kvs[k].rev > c[i].max_rev)
                rc = -ESTALE;
        bfs_store_kvs_free(kvs, nk);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int do_write(struct bfs_store *s, const char *key, const void *val, size_t len,
                    uint64_t expect, const struct bfs_store_cond *conds, size_t nconds,
                    uint64_t *rev)
{
    uint64_t r = 0;
    int rc = 0;
    if (!bfs_store_key_valid(key))
        return -EINVAL;
    for (size_t i = 0; i < nconds; i++)
        if (!bfs_store_key_valid(conds[i].key) ||
            (conds[i].prefix && conds[i].max_rev == BFS_STORE_ANY))
            return -EINVAL;
    pthread_mutex_lock(&s->lock);
    if (nconds && s->ops->write_if)
        rc = s->ops->write_if(s->be, key, val, len, expect, conds, nconds, &r);
    else if ((rc = check_conds(s, conds, nconds)) == 0)
        rc = s->ops->write(s->be, key, val, len, expect, &r);
    if (rc == 0 && !s->ops->watch) {
        for (struct bfs_store_watch *w = s->watches; w; w = w->next)
            if (strncmp(key, w->prefix, strlen(w->prefix)) == 0)
                w->fn(key, val, val ? len : 0, r, w->arg);
    }
    pthread_mutex_unlock(&s->lock);
    if (rc == 0 && rev)
        *rev = r;
    return rc;
}

int bfs_store_put(struct bfs_store *s, const char *key, const void *val, size_t len,
                  uint64_t *rev)
{
    if (!val)
        return -EINVAL;
    return do_write(s, key, val, len, BFS_STORE_ANY, NULL, 0, rev);
}

int bfs_store_cas(struct bfs_store *s, const char *key, const void *val, size_t len,
                  uint64_t expect, uint64_t *rev)
{
    if (!val)
        return -EINVAL;
    return do_write(s, key, val, len, expect, NULL, 0, rev);
}

int bfs_store_delete(struct bfs_store *s, const char *key, uint64_t expect, uint64_t *rev)
{
    return do_write(s, key, NULL, 0, expect, NULL, 0, rev);
}

int bfs_store_write_if(struct bfs_store *s, const char *key, const void *val, size_t len,
                       uint64_t expect, const struct bfs_store_cond *conds, size_t nconds,
                       uint64_t *rev)
{
    return do_write(s, key, val, len, expect, conds, nconds, rev);
}

int bfs_store_list(struct bfs_store *s, const char *prefix, struct bfs_store_kv **out,
                   size_t *n)
{
    *out = NULL;
    *n = 0;
    return s->ops->list(s->be, prefix ? prefix : "", out, n);
}

uint64_t bfs_store_revision(struct bfs_store *s)
{
    return s->ops->revision(s->be);
}

void bfs_store_kv_clear(struct bfs_store_kv *kv)
{
    if (!kv)
        return;
    free(kv->key);
    free(kv->value);
    memset(kv, 0, sizeof(*kv));
}

void bfs_store_kvs_free(struct bfs_store_kv *kvs, size_t n)
{
    for (size_t i = 0; kvs && i < n; i++)
        bfs_store_kv_clear(&kvs[i]);
    free(kvs);
}

int bfs_store_watch(struct bfs_store *s, const char *prefix, bfs_store_watch_fn fn, void *arg,
                    struct bfs_store_watch **out)
{
    struct bfs_store_watch *w = calloc(1, sizeof(*w));
    if (!w || !(w->prefix = strdup(prefix ? prefix : ""))) {
        free(w);
        return -ENOMEM;
    }
    w->fn = fn;
    w->arg = arg;
    if (s->ops->watch) {
        int rc = s->ops->watch(s->be, w->prefix, fn, arg, &w->be_handle);
        if (rc < 0) {
            free(w->prefix);
            free(w);
            return rc;
        }
    }
    pthread_mutex_lock(&s->lock);
    w->next = s->watches;
    s->watches = w;
    pthread_mutex_unlock(&s->lock);
    if (out)
        *out = w;
    return 0;
}

void bfs_store_unwatch(struct bfs_store *s, struct bfs_store_watch *w)
{
    pthread_mutex_lock(&s->lock);
    for (struct bfs_store_watch **p = &s->watches; *p; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            if (w->be_handle)
                s->ops->unwatch(s->be, w->be_handle);
            free(w->prefix);
            free(w);
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
}

int bfs_store_put_lease(struct bfs_store *s, const char *key, const void *val, size_t len,
                        uint64_t *rev)
{
    if (!bfs_store_key_valid(key) || !val)
        return -EINVAL;
    if (!s->ops->put_lease)
        return -ENOTSUP;
    return s->ops->put_lease(s->be, key, val, len, rev);
}

int bfs_store_put_all(struct bfs_store *s, const struct bfs_store_kv *kvs, size_t n,
                      const char *guard, uint64_t *rev)
{
    for (size_t i = 0; i < n; i++)
        if (!bfs_store_key_valid(kvs[i].key) || !kvs[i].value)
            return -EINVAL;
    if (!bfs_store_key_valid(guard))
        return -EINVAL;
    if (!s->ops->put_all)
        return -ENOTSUP;
    return s->ops->put_all(s->be, kvs, n, guard, rev);
}

const char *bfs_store_scheme(const struct bfs_store *s)
{
    return s->ops->scheme;
}
