/*
 * codec.c — the write/read buffers and the fixed-layout primitives of the
 * body codec (codec.h): integers, bytes, strings, gfid, iatt, loc, flock,
 * lease, statvfs, fds and the caller identity. Dicts and dirents, which
 * allocate on decode, are in codec_containers.c.
 *
 * Every getter first asks bfs_rbuf_take() for the exact number of bytes it
 * is about to read, so no code path here can read past r->len; the sticky
 * error makes a failed field turn every later get into a no-op.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/xlator.h"
#include "rpc/codec.h"
#include "rpc/wire.h"

/* ---- buffers ---- */

void bfs_wbuf_init(struct bfs_wbuf *w)
{
    memset(w, 0, sizeof(*w));
}

void bfs_wbuf_free(struct bfs_wbuf *w)
{
    free(w->p);
    bfs_wbuf_init(w);
}

int bfs_wbuf_fail(struct bfs_wbuf *w, int err)
{
    if (!w->err)
        w->err = err;
    return w->err;
}

int bfs_wbuf_reserve(struct bfs_wbuf *w, size_t n)
{
    if (w->err)
        return w->err;
    if (n <= w->cap - w->len)
        return 0;
    if (n > BFS_WBUF_MAX || w->len + n > BFS_WBUF_MAX)
        return bfs_wbuf_fail(w, -ENOMEM);
    size_t need = w->len + n, cap = w->cap ? w->cap : 256;
    while (cap < need)
        cap *= 2; /* cannot overflow: need <= BFS_WBUF_MAX */
    uint8_t *p = realloc(w->p, cap);
    if (!p)
        return bfs_wbuf_fail(w, -ENOMEM);
    w->p = p;
    w->cap = cap;
    return 0;
}

void bfs_wbuf_append(struct bfs_wbuf *w, const void *data, size_t n)
{
    if (n == 0 || bfs_wbuf_reserve(w, n) < 0)
        return;
    memcpy(w->p + w->len, data, n);
    w->len += n;
}

uint8_t *bfs_wbuf_take(struct bfs_wbuf *w, size_t *len)
{
    uint8_t *p = w->p;
    if (len)
        *len = w->len;
    bfs_wbuf_init(w);
    return p;
}

void bfs_wbuf_gather_bytes(struct bfs_wbuf *w, size_t at, const struct bfs_bytes *b,
                           struct iovec iov[3])
{
    uint32_t n = (uint32_t)b->len;
    for (int k = 0; k < 4; k++) /* little-endian, as bfs_put_u32 */
        w->p[at + (size_t)k] = (uint8_t)(n >> (8 * k));
    iov[0] = (struct iovec){w->p, at + 4};
    iov[1] = (struct iovec){(void *)b->data, b->len};
    iov[2] = (struct iovec){w->p + at + 4, w->len - at - 4};
}

void bfs_rbuf_init(struct bfs_rbuf *r, const void *p, size_t len)
{
    r->p = p;
    r->len = p ? len : 0;
    r->off = 0;
    r->err = 0;
}

int bfs_rbuf_fail(struct bfs_rbuf *r, int err)
{
    if (!r->err)
        r->err = err;
    return r->err;
}

int bfs_rbuf_end(struct bfs_rbuf *r)
{
    if (!r->err && r->off != r->len)
        return bfs_rbuf_fail(r, -EBADMSG);
    return r->err;
}

const uint8_t *bfs_rbuf_take(struct bfs_rbuf *r, size_t n)
{
    if (r->err)
        return NULL;
    if (n > r->len - r->off) {
        bfs_rbuf_fail(r, -EBADMSG);
        return NULL;
    }
    const uint8_t *p = r->p + r->off;
    r->off += n;
    return p;
}

/* ---- scalars ---- */

/* Reserves n bytes at the end of w and returns them, or NULL on error. */
static uint8_t *wbuf_grab(struct bfs_wbuf *w, size_t n)
{
    if (bfs_wbuf_reserve(w, n) < 0)
        return NULL;
    uint8_t *p = w->p + w->len;
    w->len += n;
    return p;
}

void bfs_put_u8(struct bfs_wbuf *w, uint8_t v)
{
    uint8_t *p = wbuf_grab(w, 1);
    if (p)
        *p = v;
}

void bfs_put_u32(struct bfs_wbuf *w, uint32_t v)
{
    uint8_t *p = wbuf_grab(w, 4);
    if (p)
        bfs_le32_put(p, v);
}

void bfs_put_u64(struct bfs_wbuf *w, uint64_t v)
{
    uint8_t *p = wbuf_grab(w, 8);
    if (p)
        bfs_le64_put(p, v);
}

void bfs_put_i64(struct bfs_wbuf *w, int64_t v)
{
    bfs_put_u64(w, (uint64_t)v);
}

void bfs_put_bool(struct bfs_wbuf *w, bool v)
{
    bfs_put_u8(w, v ? 1 : 0);
}

int bfs_get_u8(struct bfs_rbuf *r, uint8_t *v)
{
    const uint8_t *p = bfs_rbuf_take(r, 1);
    *v = p ? *p : 0;
    return r->err;
}

int bfs_get_u32(struct bfs_rbuf *r, uint32_t *v)
{
    const uint8_t *p = bfs_rbuf_take(r, 4);
    *v = p ? bfs_le32_get(p) : 0;
    return r->err;
}

int bfs_get_u64(struct bfs_rbuf *r, uint64_t *v)
{
    const uint8_t *p = bfs_rbuf_take(r, 8);
    *v = p ? bfs_le64_get(p) : 0;
    return r->err;
}

int bfs_get_i64(struct bfs_rbuf *r, int64_t *v)
{
    uint64_t u;
    bfs_get_u64(r, &u);
    *v = (int64_t)u;
    return r->err;
}

int bfs_get_bool(struct bfs_rbuf *r, bool *v)
{
    uint8_t b;
    *v = false;
    if (bfs_get_u8(r, &b) < 0)
        return r->err;
    if (b > 1)
        return bfs_rbuf_fail(r, -EBADMSG);
    *v = b;
    return 0;
}

/* ---- bytes and strings ---- */

void bfs_put_bytes(struct bfs_wbuf *w, const struct bfs_bytes *b)
{
    if (b->len > UINT32_MAX) {
        bfs_wbuf_fail(w, -EMSGSIZE);
        return;
    }
    if (bfs_wbuf_reserve(w, 4 + b->len) < 0)
        return;
    bfs_put_u32(w, (uint32_t)b->len);
    bfs_wbuf_append(w, b->data, b->len);
}

int bfs_get_bytes(struct bfs_rbuf *r, struct bfs_bytes *b)
{
    uint32_t n;
    b->data = NULL;
    b->len = 0;
    if (bfs_get_u32(r, &n) < 0)
        return r->err;
    const uint8_t *p = bfs_rbuf_take(r, n);
    if (!p)
        return r->err;
    b->data = p;
    b->len = n;
    return 0;
}

void bfs_put_str(struct bfs_wbuf *w, const char *s)
{
    if (!s) {
        bfs_put_u32(w, BFS_CODEC_STR_NULL);
        return;
    }
    size_t n = strlen(s);
    if (n >= BFS_CODEC_STR_NULL) {
        bfs_wbuf_fail(w, -EMSGSIZE);
        return;
    }
    if (bfs_wbuf_reserve(w, 4 + n + 1) < 0)
        return;
    bfs_put_u32(w, (uint32_t)n);
    bfs_wbuf_append(w, s, n + 1); /* with its NUL */
}

int bfs_get_str(struct bfs_rbuf *r, const char **s)
{
    uint32_t n;
    *s = NULL;
    if (bfs_get_u32(r, &n) < 0 || n == BFS_CODEC_STR_NULL)
        return r->err;
    const uint8_t *p = bfs_rbuf_take(r, (size_t)n + 1);
    if (!p)
        return r->err;
    if (p[n] != 0)
        return bfs_rbuf_fail(r, -EBADMSG); /* framing broken: no terminator */
    if (memchr(p, 0, n))
        return bfs_rbuf_fail(r, -EINVAL); /* well framed, but not a C string */
    *s = (const char *)p;
    return 0;
}

/* ---- fixed layouts ---- */

void bfs_put_gfid(struct bfs_wbuf *w, const struct bfs_gfid *g)
{
    bfs_wbuf_append(w, g->b, sizeof(g->b));
}

int bfs_get_gfid(struct bfs_rbuf *r, struct bfs_gfid *g)
{
    const uint8_t *p = bfs_rbuf_take(r, sizeof(g->b));
    if (p)
        memcpy(g->b, p, sizeof(g->b));
    else
        memset(g->b, 0, sizeof(g->b));
    return r->err;
}

void bfs_put_iatt(struct bfs_wbuf *w, const struct bfs_iatt *ia)
{
    if (bfs_wbuf_reserve(w, BFS_CODEC_IATT_LEN) < 0)
        return;
    bfs_put_gfid(w, &ia->gfid);
    bfs_put_u64(w, ia->ino);
    bfs_put_u64(w, ia->dev);
    bfs_put_u32(w, ia->mode);
    bfs_put_u32(w, ia->nlink);
    bfs_put_u32(w, ia->uid);
    bfs_put_u32(w, ia->gid);
    bfs_put_u64(w, ia->rdev);
    bfs_put_u64(w, ia->size);
    bfs_put_u64(w, ia->blocks);
    bfs_put_u32(w, ia->blksize);
    bfs_put_i64(w, ia->atime_sec);
    bfs_put_i64(w, ia->mtime_sec);
    bfs_put_i64(w, ia->ctime_sec);
    bfs_put_u32(w, ia->atime_nsec);
    bfs_put_u32(w, ia->mtime_nsec);
    bfs_put_u32(w, ia->ctime_nsec);
}

int bfs_get_iatt(struct bfs_rbuf *r, struct bfs_iatt *ia)
{
    memset(ia, 0, sizeof(*ia));
    if (r->err)
        return r->err;
    if (bfs_rbuf_left(r) < BFS_CODEC_IATT_LEN)
        return bfs_rbuf_fail(r, -EBADMSG); /* all or nothing */
    bfs_get_gfid(r, &ia->gfid);
    bfs_get_u64(r, &ia->ino);
    bfs_get_u64(r, &ia->dev);
    bfs_get_u32(r, &ia->mode);
    bfs_get_u32(r, &ia->nlink);
    bfs_get_u32(r, &ia->uid);
    bfs_get_u32(r, &ia->gid);
    bfs_get_u64(r, &ia->rdev);
    bfs_get_u64(r, &ia->size);
    bfs_get_u64(r, &ia->blocks);
    bfs_get_u32(r, &ia->blksize);
    bfs_get_i64(r, &ia->atime_sec);
    bfs_get_i64(r, &ia->mtime_sec);
    bfs_get_i64(r, &ia->ctime_sec);
    bfs_get_u32(r, &ia->atime_nsec);
    bfs_get_u32(r, &ia->mtime_nsec);
    bfs_get_u32(r, &ia->ctime_nsec);
    return r->err;
}

int bfs_dict_set_iatt(struct bfs_dict *d, const char *key, const struct bfs_iatt *ia)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    bfs_put_iatt(&w, ia);
    int rc = w.err ? w.err : bfs_dict_set_bin(d, key, w.p, w.len);
    bfs_wbuf_free(&w);
    return rc;
}

int bfs_dict_get_iatt(const struct bfs_dict *d, const char *key, struct bfs_iatt *ia)
{
    const void *v;
    size_t len;
    if (!d || bfs_dict_get_bin(d, key, &v, &len) < 0)
        return -ENOENT;
    struct bfs_rbuf r;
    bfs_rbuf_init(&r, v, len);
    int rc = bfs_get_iatt(&r, ia);
    return rc == 0 && bfs_rbuf_left(&r) != 0 ? -EBADMSG : rc;
}

void bfs_put_loc(struct bfs_wbuf *w, const struct bfs_loc *loc)
{
    bfs_put_gfid(w, &loc->gfid);
    bfs_put_gfid(w, &loc->pargfid);
    bfs_put_str(w, loc->name);
}

int bfs_get_loc(struct bfs_rbuf *r, struct bfs_loc *loc)
{
    memset(loc, 0, sizeof(*loc));
    bfs_get_gfid(r, &loc->gfid);
    bfs_get_gfid(r, &loc->pargfid);
    bfs_get_str(r, &loc->name);
    if (r->err)
        memset(loc, 0, sizeof(*loc));
    return r->err;
}

void bfs_put_flock(struct bfs_wbuf *w, const struct bfs_flock *fl)
{
    bfs_put_u32(w, fl->type);
    bfs_put_u32(w, fl->whence);
    bfs_put_u64(w, fl->start);
    bfs_put_u64(w, fl->len);
    bfs_put_u32(w, fl->pid);
    bfs_put_u64(w, fl->owner);
}

int bfs_get_flock(struct bfs_rbuf *r, struct bfs_flock *fl)
{
    memset(fl, 0, sizeof(*fl));
    bfs_get_u32(r, &fl->type);
    bfs_get_u32(r, &fl->whence);
    bfs_get_u64(r, &fl->start);
    bfs_get_u64(r, &fl->len);
    bfs_get_u32(r, &fl->pid);
    bfs_get_u64(r, &fl->owner);
    if (r->err)
        memset(fl, 0, sizeof(*fl));
    return r->err;
}

void bfs_put_lease(struct bfs_wbuf *w, const struct bfs_lease *l)
{
    bfs_put_u32(w, l->cmd);
    bfs_put_u32(w, l->type);
    bfs_wbuf_append(w, l->id, sizeof(l->id));
}

int bfs_get_lease(struct bfs_rbuf *r, struct bfs_lease *l)
{
    memset(l, 0, sizeof(*l));
    bfs_get_u32(r, &l->cmd);
    bfs_get_u32(r, &l->type);
    const uint8_t *p = bfs_rbuf_take(r, sizeof(l->id));
    if (p)
        memcpy(l->id, p, sizeof(l->id));
    if (r->err)
        memset(l, 0, sizeof(*l));
    return r->err;
}

void bfs_put_statvfs(struct bfs_wbuf *w, const struct bfs_statvfs *s)
{
    const uint64_t v[] = {s->bsize, s->frsize, s->blocks, s->bfree, s->bavail, s->files,
                          s->ffree, s->favail, s->fsid,   s->flag,  s->namemax};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        bfs_put_u64(w, v[i]);
}

int bfs_get_statvfs(struct bfs_rbuf *r, struct bfs_statvfs *s)
{
    uint64_t *const v[] = {&s->bsize, &s->frsize, &s->blocks, &s->bfree, &s->bavail, &s->files,
                           &s->ffree, &s->favail, &s->fsid,   &s->flag,  &s->namemax};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        bfs_get_u64(r, v[i]);
    if (r->err)
        memset(s, 0, sizeof(*s));
    return r->err;
}

/* ---- fds ---- */

int bfs_put_fd(struct bfs_wbuf *w, struct bfs_fd *fd, const struct bfs_codec_fds *fds)
{
    uint64_t id = 0;
    if (w->err)
        return w->err;
    if (!fds || !fds->fd_to_id)
        return bfs_wbuf_fail(w, -EINVAL);
    int rc = fds->fd_to_id(fds->arg, fd, &id);
    if (rc < 0)
        return bfs_wbuf_fail(w, rc);
    bfs_put_u64(w, id);
    return w->err;
}

int bfs_get_fd(struct bfs_rbuf *r, struct bfs_fd **out, int is_new,
               const struct bfs_codec_fds *fds)
{
    uint64_t id;
    struct bfs_fd *fd = NULL;
    *out = NULL;
    if (bfs_get_u64(r, &id) < 0)
        return r->err;
    if (!fds || !fds->id_to_fd)
        return bfs_rbuf_fail(r, -EINVAL);
    int rc = fds->id_to_fd(fds->arg, id, is_new, &fd);
    if (rc < 0)
        return bfs_rbuf_fail(r, rc);
    *out = fd;
    return 0;
}

int bfs__enc_fd(struct bfs_wbuf *w, struct bfs_fd *fd, const struct bfs_codec_fds *fds)
{
    return bfs_put_fd(w, fd, fds);
}

int bfs__dec_fd(struct bfs_rbuf *r, struct bfs_fd **out, int is_new,
                const struct bfs_codec_fds *fds)
{
    return bfs_get_fd(r, out, is_new, fds);
}

/* ---- caller identity ---- */

void bfs_put_stack(struct bfs_wbuf *w, const struct bfs_stack *st)
{
    if (st->ngroups > BFS_MAX_GROUPS) {
        bfs_wbuf_fail(w, -EINVAL);
        return;
    }
    bfs_put_u32(w, st->uid);
    bfs_put_u32(w, st->gid);
    bfs_put_u32(w, st->pid);
    bfs_put_u64(w, st->lk_owner);
    bfs_put_u32(w, st->ngroups);
    for (uint32_t i = 0; i < st->ngroups; i++)
        bfs_put_u32(w, st->groups[i]);
}

int bfs_get_stack(struct bfs_rbuf *r, struct bfs_stack *st)
{
    uint32_t uid, gid, pid, ngroups;
    uint64_t lk_owner;

    bfs_get_u32(r, &uid);
    bfs_get_u32(r, &gid);
    bfs_get_u32(r, &pid);
    bfs_get_u64(r, &lk_owner);
    if (bfs_get_u32(r, &ngroups) < 0)
        return r->err;
    /* check the count and the bytes behind it before touching st */
    if (ngroups > BFS_MAX_GROUPS || (size_t)ngroups * 4 > bfs_rbuf_left(r))
        return bfs_rbuf_fail(r, -EBADMSG);
    for (uint32_t i = 0; i < ngroups; i++)
        bfs_get_u32(r, &st->groups[i]);
    st->uid = uid;
    st->gid = gid;
    st->pid = pid;
    st->lk_owner = lk_owner;
    st->ngroups = ngroups;
    return r->err;
}
