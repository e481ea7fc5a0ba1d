/*
 * codec_containers.c — dicts and directory listings on the wire (codec.h).
 *
 * These are the two decoders that allocate, so they are the ones a lying
 * peer would aim at: each checks its count against a hard cap and against
 * the bytes actually left in the body (every entry has a minimum encoded
 * size) before allocating anything, and frees everything it built when a
 * later entry turns out to be malformed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/codec.h"
#include "rpc/wire.h"

/* Smallest possible encodings, used to bound counts by the bytes left. */
#define DICT_ENTRY_MIN (4 + 1 + 1 + 1 + 4) /* key "x" + NUL, type, empty value */
#define DIRENT_MIN (4 + 1 + 8 + 4 + 8 + 1) /* empty name + NUL, no attr */

/* ---- dict ---- */

struct dict_enc {
    struct bfs_wbuf *w;
    const struct bfs_dict *d;
};

static int dict_put_entry(const char *key, enum bfs_val_type type, const void *val, size_t len,
                          void *arg)
{
    struct dict_enc *e = arg;
    struct bfs_wbuf *w = e->w;
    size_t klen = strlen(key);
    uint8_t le[8];
    int64_t iv;

    if (klen == 0 || klen > BFS_CODEC_MAX_KEY)
        return bfs_wbuf_fail(w, -EINVAL);
    bfs_put_str(w, key);
    bfs_put_u8(w, (uint8_t)type);
    switch (type) {
    case BFS_VAL_STR: /* the text without its NUL, whatever len counted */
        bfs_put_bytes(w, &(struct bfs_bytes){val, val ? strnlen(val, len) : 0});
        break;
    case BFS_VAL_INT: /* fetched typed, so the byte order is ours to choose */
        if (bfs_dict_get_int(e->d, key, &iv) < 0)
            return bfs_wbuf_fail(w, -EINVAL);
        bfs_le64_put(le, (uint64_t)iv);
        bfs_put_bytes(w, &(struct bfs_bytes){le, sizeof(le)});
        break;
    case BFS_VAL_BIN:
        bfs_put_bytes(w, &(struct bfs_bytes){val, len});
        break;
    default:
        return bfs_wbuf_fail(w, -EINVAL);
    }
    return w->err;
}

void bfs_put_dict(struct bfs_wbuf *w, const struct bfs_dict *d)
{
    if (w->err)
        return;
    if (!d) {
        bfs_put_u32(w, BFS_CODEC_DICT_NULL);
        return;
    }
    size_t n = bfs_dict_count(d);
    if (n > BFS_CODEC_MAX_DICT) {
        bfs_wbuf_fail(w, -E2BIG);
        return;
    }
    bfs_put_u32(w, (uint32_t)n);
    struct dict_enc e = {w, d};
    bfs_dict_foreach(d, dict_put_entry, &e);
}

/* Stores a STR value, which arrives without a terminator. */
static int dict_set_str_n(struct bfs_dict *d, const char *key, const void *val, size_t len)
{
    char small[256];
    char *s = len < sizeof(small) ? small : malloc(len + 1);
    if (!s)
        return -ENOMEM;
    memcpy(s, val, len);
    s[len] = 0;
    int rc = bfs_dict_set_str(d, key, s);
    if (s != small)
        free(s);
    return rc;
}

/* Decodes one entry into d; returns r->err. */
static int dict_get_entry(struct bfs_rbuf *r, struct bfs_dict *d)
{
    const char *key;
    uint8_t type;
    struct bfs_bytes v;
    int rc = 0;

    bfs_get_str(r, &key);
    bfs_get_u8(r, &type);
    if (bfs_get_bytes(r, &v) < 0)
        return r->err;
    if (!key || !key[0] || strlen(key) > BFS_CODEC_MAX_KEY)
        return bfs_rbuf_fail(r, -EBADMSG);
    switch (type) {
    case BFS_VAL_STR:
        if (memchr(v.data, 0, v.len))
            return bfs_rbuf_fail(r, -EINVAL); /* same rule as bfs_get_str */
        rc = dict_set_str_n(d, key, v.data, v.len);
        break;
    case BFS_VAL_INT:
        if (v.len != 8)
            return bfs_rbuf_fail(r, -EBADMSG);
        rc = bfs_dict_set_int(d, key, (int64_t)bfs_le64_get(v.data));
        break;
    case BFS_VAL_BIN:
        rc = bfs_dict_set_bin(d, key, v.data, v.len);
        break;
    default:
        return bfs_rbuf_fail(r, -EBADMSG);
    }
    return rc < 0 ? bfs_rbuf_fail(r, rc) : 0;
}

int bfs_get_dict(struct bfs_rbuf *r, struct bfs_dict **out)
{
    uint32_t n;
    *out = NULL;
    if (bfs_get_u32(r, &n) < 0 || n == BFS_CODEC_DICT_NULL)
        return r->err;
    if (n > BFS_CODEC_MAX_DICT || (size_t)n * DICT_ENTRY_MIN > bfs_rbuf_left(r))
        return bfs_rbuf_fail(r, -EBADMSG);
    struct bfs_dict *d = bfs_dict_new();
    if (!d)
        return bfs_rbuf_fail(r, -ENOMEM);
    for (uint32_t i = 0; i < n; i++) {
        if (dict_get_entry(r, d) < 0) {
            bfs_dict_unref(d);
            return r->err;
        }
    }
    *out = d;
    return 0;
}

/* ---- dirents ---- */

void bfs_put_dirents(struct bfs_wbuf *w, const struct bfs_dirents *l)
{
    if (l->count > BFS_CODEC_MAX_DIRENTS) {
        bfs_wbuf_fail(w, -E2BIG);
        return;
    }
    bfs_put_u32(w, l->count);
    for (uint32_t i = 0; i < l->count && !w->err; i++) {
        const struct bfs_dirent *e = &l->v[i];
        if (!e->name) {
            bfs_wbuf_fail(w, -EINVAL);
            return;
        }
        bfs_put_str(w, e->name);
        bfs_put_u64(w, e->d_off);
        bfs_put_u32(w, e->d_type);
        bfs_put_u64(w, e->d_ino);
        bfs_put_bool(w, e->has_attr);
        if (e->has_attr)
            bfs_put_iatt(w, &e->attr);
    }
}

/* Decodes one entry and appends it to l; returns r->err. */
static int dirent_get(struct bfs_rbuf *r, struct bfs_dirents *l)
{
    const char *name;
    uint64_t d_off, d_ino;
    uint32_t d_type;
    bool has_attr;
    struct bfs_iatt attr;

    bfs_get_str(r, &name);
    bfs_get_u64(r, &d_off);
    bfs_get_u32(r, &d_type);
    bfs_get_u64(r, &d_ino);
    bfs_get_bool(r, &has_attr);
    if (has_attr)
        bfs_get_iatt(r, &attr);
    if (r->err)
        return r->err;
    if (!name)
        return bfs_rbuf_fail(r, -EBADMSG);
    int rc = bfs_dirents_add(l, name, d_off, d_type, d_ino, has_attr ? &attr : NULL);
    return rc < 0 ? bfs_rbuf_fail(r, rc) : 0;
}

int bfs_get_dirents(struct bfs_rbuf *r, struct bfs_dirents *l)
{
    uint32_t n;
    memset(l, 0, sizeof(*l));
    if (bfs_get_u32(r, &n) < 0)
        return r->err;
    if (n > BFS_CODEC_MAX_DIRENTS || (size_t)n * DIRENT_MIN > bfs_rbuf_left(r))
        return bfs_rbuf_fail(r, -EBADMSG);
    for (uint32_t i = 0; i < n; i++) {
        if (dirent_get(r, l) < 0) {
            bfs_dirents_free(l);
            memset(l, 0, sizeof(*l));
            return r->err;
        }
    }
    return 0;
}
