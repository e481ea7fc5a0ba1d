/*
 * dict.h — a small refcounted key -> value map.
 *
 * Used for xdata on every fop, for xattrs (getxattr replies, setxattr
 * requests) and for translator options. Keys are NUL-terminated strings;
 * values are typed: a string, a signed 64-bit integer or raw bytes.
 * A dict is not thread-safe for writers: build it, then share it read-only.
 * Lifetime: bfs_dict_new() returns one reference; bfs_dict_unref() frees at 0.
 */
#ifndef BFS_CORE_DICT_H
#define BFS_CORE_DICT_H

#include <stddef.h>
#include <stdint.h>

enum bfs_val_type { BFS_VAL_STR = 1, BFS_VAL_INT = 2, BFS_VAL_BIN = 3 };

struct bfs_dict;

struct bfs_dict *bfs_dict_new(void);
struct bfs_dict *bfs_dict_ref(struct bfs_dict *d);   /* NULL-safe */
void bfs_dict_unref(struct bfs_dict *d);             /* NULL-safe */
struct bfs_dict *bfs_dict_copy(const struct bfs_dict *d); /* deep; NULL->NULL */

/* Setters replace an existing key. They return 0 or -ENOMEM. */
int bfs_dict_set_str(struct bfs_dict *d, const char *key, const char *val);
int bfs_dict_set_int(struct bfs_dict *d, const char *key, int64_t val);
int bfs_dict_set_bin(struct bfs_dict *d, const char *key, const void *val, size_t len);

/* Getters return 0, -ENOENT (no key) or -EINVAL (other type).
 * Returned pointers stay valid until the key is changed or the dict freed.
 * A BIN value is always followed by a hidden NUL byte. */
int bfs_dict_get_str(const struct bfs_dict *d, const char *key, const char **val);
int bfs_dict_get_int(const struct bfs_dict *d, const char *key, int64_t *val);
int bfs_dict_get_bin(const struct bfs_dict *d, const char *key, const void **val, size_t *len);
/* Any type as bytes (STR without its NUL, INT as 8 little-endian bytes). */
int bfs_dict_get_raw(const struct bfs_dict *d, const char *key,
                     enum bfs_val_type *type, const void **val, size_t *len);

int bfs_dict_has(const struct bfs_dict *d, const char *key); /* 1 or 0; NULL-safe */
int bfs_dict_del(struct bfs_dict *d, const char *key);       /* 0 or -ENOENT */
size_t bfs_dict_count(const struct bfs_dict *d);             /* NULL-safe */

/* Calls fn for each entry in insertion order; stops at the first non-zero
 * return and returns it. */
typedef int (*bfs_dict_iter_fn)(const char *key, enum bfs_val_type type,
                                const void *val, size_t len, void *arg);
int bfs_dict_foreach(const struct bfs_dict *d, bfs_dict_iter_fn fn, void *arg);

#endif
