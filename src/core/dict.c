/*
 * dict.c — the refcounted key -> typed value map of dict.h.
 *
 * Storage: entries live in an array of pointers kept in insertion order
 * (iteration order is part of the contract: xattr listings and option dumps
 * come out as they were put in). Each entry is one allocation holding its
 * key, so pointers handed out by the getters stay put when the array grows.
 * Once a dict passes DICT_INDEX_MIN keys, an open-addressing hash index
 * (slot -> position + 1, linear probing, load <= 1/2) makes lookups O(1);
 * smaller dicts (nearly all xdata) are searched linearly, which is faster
 * at that size and costs no memory. Deleting shifts the array and rebuilds
 * the index: O(n), fine because deletes are rare.
 *
 * Lifetime: bfs_dict_new() returns one reference; the refcount is atomic so
 * a built dict can be shared between threads; bfs_dict_unref() frees at 0.
 * Writers are not synchronised (see dict.h).
 */
#include "core/dict.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define DICT_INDEX_MIN 16

struct dict_entry {
    uint32_t hash;
    enum bfs_val_type type;
    size_t len;       /* STR: strlen, BIN: byte count, INT: 8 */
    void *data;       /* STR/BIN: malloc'd, NUL-terminated; INT: points at le */
    int64_t ival;
    uint8_t le[8];    /* INT as little-endian bytes, for bfs_dict_get_raw */
    char key[];
};

struct bfs_dict {
    int refs;                 /* atomic */
    struct dict_entry **ents; /* insertion order */
    size_t n, cap;
    uint32_t *index;          /* NULL below DICT_INDEX_MIN; else [icap], 0 = empty */
    size_t icap;              /* power of two */
};

/* FNV-1a: short keys, no adversarial input worth a keyed hash here. */
static uint32_t key_hash(const char *k)
{
    uint32_t h = 2166136261u;
    for (; *k; k++)
        h = (h ^ (uint8_t)*k) * 16777619u;
    return h;
}

struct bfs_dict *bfs_dict_new(void)
{
    struct bfs_dict *d = calloc(1, sizeof(*d));
    if (d)
        d->refs = 1;
    return d;
}

struct bfs_dict *bfs_dict_ref(struct bfs_dict *d)
{
    if (d)
        __atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED);
    return d;
}

static void entry_free(struct dict_entry *e)
{
    if (e->type != BFS_VAL_INT)
        free(e->data);
    free(e);
}

void bfs_dict_unref(struct bfs_dict *d)
{
    if (!d || __atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    for (size_t i = 0; i < d->n; i++)
        entry_free(d->ents[i]);
    free(d->ents);
    free(d->index);
    free(d);
}

/* ---- lookup and index ---- */

static long find_pos(const struct bfs_dict *d, const char *key, uint32_t h)
{
    if (!d->index) {
        for (size_t i = 0; i < d->n; i++)
            if (d->ents[i]->hash == h && strcmp(d->ents[i]->key, key) == 0)
                return (long)i;
        return -1;
    }
    size_t mask = d->icap - 1;
    for (size_t s = h & mask;; s = (s + 1) & mask) {
        uint32_t v = d->index[s];
        if (v == 0)
            return -1;
        const struct dict_entry *e = d->ents[v - 1];
        if (e->hash == h && strcmp(e->key, key) == 0)
            return (long)(v - 1);
    }
}

static void index_put(struct bfs_dict *d, size_t pos)
{
    size_t mask = d->icap - 1;
    size_t s = d->ents[pos]->hash & mask;
    while (d->index[s])
        s = (s + 1) & mask;
    d->index[s] = (uint32_t)(pos + 1);
}

/* (Re)builds the index for the current entries, sized for `want` entries. */
static int index_rebuild(struct bfs_dict *d, size_t want)
{
    if (want < DICT_INDEX_MIN) {
        free(d->index);
        d->index = NULL;
        d->icap = 0;
        return 0;
    }
    size_t icap = 64;
    while (icap < want * 2)
        icap *= 2;
    uint32_t *idx = calloc(icap, sizeof(*idx));
    if (!idx)
        return -ENOMEM;
    free(d->index);
    d->index = idx;
    d->icap = icap;
    for (size_t i = 0; i < d->n; i++)
        index_put(d, i);
    return 0;
}

/* ---- setters ---- */

/* Installs a fully built entry, replacing any entry with the same key in
 * its position (so replacing keeps the original insertion order). */
static int put_entry(struct bfs_dict *d, struct dict_entry *e)
{
    long pos = find_pos(d, e->key, e->hash);
    if (pos >= 0) {
        entry_free(d->ents[pos]);
        d->ents[pos] = e;
        return 0;
    }
    if (d->n >= UINT32_MAX - 1)
        return -ENOMEM;
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        struct dict_entry **v = realloc(d->ents, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        d->ents = v;
        d->cap = cap;
    }
    if ((d->n + 1) * 2 > d->icap && d->n + 1 >= DICT_INDEX_MIN) {
        /* Grow (or create) the index before adding, so failure leaves d as it was. */
        if (index_rebuild(d, (d->n + 1) * 2) < 0)
            return -ENOMEM;
    }
    d->ents[d->n] = e;
    if (d->index)
        index_put(d, d->n);
    d->n++;
    return 0;
}

static struct dict_entry *entry_new(const char *key, enum bfs_val_type type)
{
    size_t klen = strlen(key);
    struct dict_entry *e = calloc(1, sizeof(*e) + klen + 1);
    if (!e)
        return NULL;
    memcpy(e->key, key, klen + 1);
    e->hash = key_hash(key);
    e->type = type;
    return e;
}

static int set_bytes(struct bfs_dict *d, const char *key, enum bfs_val_type type,
                     const void *val, size_t len)
{
    if (!d || !key || (!val && len))
        return -EINVAL;
    if (len == SIZE_MAX)
        return -ENOMEM;
    struct dict_entry *e = entry_new(key, type);
    if (!e)
        return -ENOMEM;
    e->data = malloc(len + 1);
    if (!e->data) {
        free(e);
        return -ENOMEM;
    }
    if (len)
        memcpy(e->data, val, len);
    ((char *)e->data)[len] = '\0'; /* the hidden NUL promised for BIN */
    e->len = len;
    int rc = put_entry(d, e);
    if (rc < 0)
        entry_free(e);
    return rc;
}

int bfs_dict_set_str(struct bfs_dict *d, const char *key, const char *val)
{
    if (!val)
        return -EINVAL;
    return set_bytes(d, key, BFS_VAL_STR, val, strlen(val));
}

int bfs_dict_set_bin(struct bfs_dict *d, const char *key, const void *val, size_t len)
{
    return set_bytes(d, key, BFS_VAL_BIN, val, len);
}

int bfs_dict_set_int(struct bfs_dict *d, const char *key, int64_t val)
{
    if (!d || !key)
        return -EINVAL;
    struct dict_entry *e = entry_new(key, BFS_VAL_INT);
    if (!e)
        return -ENOMEM;
    e->ival = val;
    uint64_t u = (uint64_t)val;
    for (int i = 0; i < 8; i++)
        e->le[i] = (uint8_t)(u >> (8 * i));
    e->data = e->le;
    e->len = 8;
    int rc = put_entry(d, e);
    if (rc < 0)
        entry_free(e);
    return rc;
}

/* ---- getters ---- */

static const struct dict_entry *get_entry(const struct bfs_dict *d, const char *key)
{
    if (!d || !key)
        return NULL;
    long pos = find_pos(d, key, key_hash(key));
    return pos < 0 ? NULL : d->ents[pos];
}

int bfs_dict_get_str(const struct bfs_dict *d, const char *key, const char **val)
{
    const struct dict_entry *e = get_entry(d, key);
    if (!e)
        return -ENOENT;
    if (e->type != BFS_VAL_STR)
        return -EINVAL;
    if (val)
        *val = e->data;
    return 0;
}

int bfs_dict_get_int(const struct bfs_dict *d, const char *key, int64_t *val)
{
    const struct dict_entry *e = get_entry(d, key);
    if (!e)
        return -ENOENT;
    if (e->type != BFS_VAL_INT)
        return -EINVAL;
    if (val)
        *val = e->ival;
    return 0;
}

int bfs_dict_get_bin(const struct bfs_dict *d, const char *key, const void **val, size_t *len)
{
    const struct dict_entry *e = get_entry(d, key);
    if (!e)
        return -ENOENT;
    if (e->type != BFS_VAL_BIN)
        return -EINVAL;
    if (val)
        *val = e->data;
    if (len)
        *len = e->len;
    return 0;
}

int bfs_dict_get_raw(const struct bfs_dict *d, const char *key, enum bfs_val_type *type,
                     const void **val, size_t *len)
{
    const struct dict_entry *e = get_entry(d, key);
    if (!e)
        return -ENOENT;
    if (type)
        *type = e->type;
    if (val)
        *val = e->data;
    if (len)
        *len = e->len;
    return 0;
}

int bfs_dict_has(const struct bfs_dict *d, const char *key)
{
    return get_entry(d, key) != NULL;
}

size_t bfs_dict_count(const struct bfs_dict *d)
{
    return d ? d->n : 0;
}

int bfs_dict_del(struct bfs_dict *d, const char *key)
{
    if (!d || !key)
        return -ENOENT;
    long pos = find_pos(d, key, key_hash(key));
    if (pos < 0)
        return -ENOENT;
    entry_free(d->ents[pos]);
    memmove(&d->ents[pos], &d->ents[pos + 1], (d->n - (size_t)pos - 1) * sizeof(d->ents[0]));
    d->n--;
    if (d->index) {
        /* Positions after pos shifted, so the index must be rebuilt. If that
         * allocation fails, drop the index: linear search is still correct. */
        if (index_rebuild(d, d->n * 2) < 0) {
            free(d->index);
            d->index = NULL;
            d->icap = 0;
        }
    }
    return 0;
}

int bfs_dict_foreach(const struct bfs_dict *d, bfs_dict_iter_fn fn, void *arg)
{
    if (!d)
        return 0;
    for (size_t i = 0; i < d->n; i++) {
        const struct dict_entry *e = d->ents[i];
        int rc = fn(e->key, e->type, e->data, e->len, arg);
        if (rc)
            return rc;
    }
    return 0;
}

struct bfs_dict *bfs_dict_copy(const struct bfs_dict *d)
{
    if (!d)
        return NULL;
    struct bfs_dict *c = bfs_dict_new();
    if (!c)
        return NULL;
    for (size_t i = 0; i < d->n; i++) {
        const struct dict_entry *e = d->ents[i];
        int rc = e->type == BFS_VAL_INT ? bfs_dict_set_int(c, e->key, e->ival)
                                        : set_bytes(c, e->key, e->type, e->data, e->len);
        if (rc < 0) {
            bfs_dict_unref(c);
            return NULL;
        }
    }
    return c;
}
