/*
 * codec.h — bounds-checked encoding primitives for frame bodies.
 *
 * The generated per-fop codec (build/gen/core/fops-gen.c) is a flat list of
 * bfs_put_T / bfs_get_T calls, one per field. Both buffers use a sticky
 * error: after the first failure every later call is a no-op, so a codec
 * checks w->err / r->err once at the end.
 *
 *   struct bfs_wbuf: growable output. Puts never fail visibly; an
 *     allocation failure sets err = -ENOMEM. The caller owns p
 *     (bfs_wbuf_free, or take it and free() it later).
 *   struct bfs_rbuf: a view of a received body. Gets never read past len;
 *     any overrun or malformed value sets err = -EBADMSG (drop the peer). A
 *     well-framed but unacceptable value sets a different code: -EINVAL for
 *     a string with an embedded NUL, whatever the fd mapping returns for an
 *     fd (typically -EBADF) — a server answers those with an error reply.
 *
 * Wire encodings (all integers little-endian):
 *   u8/bool   1 byte (bool must be 0 or 1)   u32 4   u64/i64 8
 *   bytes     u32 len, len bytes
 *   str       u32 len (0xFFFFFFFF = NULL), len bytes, a NUL byte
 *   gfid      16 bytes
 *   iatt      gfid ino dev mode nlink uid gid rdev size blocks blksize
 *             atime mtime ctime (i64 sec each) atime mtime ctime (u32 nsec) = 112 bytes
 *   loc       gfid pargfid name:str   (inode, parent, path are not sent)
 *   flock     type whence start:u64 len:u64 pid owner:u64
 *   lease     cmd type id[16]
 *   statvfs   11 x u64 in struct order
 *   dict      u32 count (0xFFFFFFFF = NULL dict); per entry key:str (1..255
 *             bytes), type:u8 (enum bfs_val_type), value:bytes (STR without
 *             its NUL, INT as 8 bytes); at most BFS_CODEC_MAX_DICT entries
 *   dirents   u32 count (<= BFS_CODEC_MAX_DIRENTS); per entry name:str d_off:u64
 *             d_type:u32 d_ino:u64 has_attr:bool [iatt]
 *   fd        u64 id, mapped by struct bfs_codec_fds
 *   stack     uid gid pid lk_owner:u64 ngroups (<= BFS_MAX_GROUPS) groups[]:u32
 *
 * Lifetimes of decoded values: str, bytes and loc.name point into the
 * rbuf's memory (zero-copy) and live as long as it does. A decoded dict is
 * a new reference and dirents are owned copies (the caller frees them). On
 * failure a getter leaves its output zeroed/NULL/empty, so a partially
 * decoded struct can always be released the same way as a complete one.
 */
#ifndef BFS_RPC_CODEC_H
#define BFS_RPC_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "core/dict.h"
#include "core/types.h"

#define BFS_CODEC_STR_NULL 0xFFFFFFFFu
#define BFS_CODEC_DICT_NULL 0xFFFFFFFFu
#define BFS_CODEC_MAX_DICT 4096
#define BFS_CODEC_MAX_KEY 255
#define BFS_CODEC_MAX_DIRENTS 1000000u
#define BFS_CODEC_IATT_LEN 112

struct bfs_fd;
struct bfs_stack;

struct bfs_wbuf {
    uint8_t *p;
    size_t len, cap;
    int err; /* 0 or the first error (sticky) */
};

struct bfs_rbuf {
    const uint8_t *p;
    size_t len, off;
    int err; /* 0 or the first error (sticky) */
};

/* How fds travel: as a u64 id, translated by the protocol layer.
 * fd_to_id: the id for fd (may assign one). id_to_fd: the fd for id, a new
 * one when is_new (the fop opens it); *out is returned ref'd. Both return 0
 * or -errno, which becomes the buffer's sticky error. */
struct bfs_codec_fds {
    void *arg;
    int (*fd_to_id)(void *arg, struct bfs_fd *fd, uint64_t *id);
    int (*id_to_fd)(void *arg, uint64_t id, int is_new, struct bfs_fd **out);
};

/* No body is near this; a larger reserve is treated as -ENOMEM. */
#define BFS_WBUF_MAX ((size_t)1 << 30)

void bfs_wbuf_init(struct bfs_wbuf *w);
void bfs_wbuf_free(struct bfs_wbuf *w); /* frees p; w is re-initialized */
/* Makes room for n more bytes. 0, or -ENOMEM (also made sticky). */
int bfs_wbuf_reserve(struct bfs_wbuf *w, size_t n);
/* Appends n raw bytes (no length prefix). */
void bfs_wbuf_append(struct bfs_wbuf *w, const void *data, size_t n);
/* Hands p over to the caller (free() it) and re-initializes w. */
uint8_t *bfs_wbuf_take(struct bfs_wbuf *w, size_t *len);
/* Sending a big byte field without copying it: w holds an encoding made
 * with that field empty (bytes of length 0), whose u32 length is at offset
 * `at`. Sets that length to b->len and fills iov with the three pieces of
 * the real encoding: w up to the length, b's bytes, the rest of w. */
void bfs_wbuf_gather_bytes(struct bfs_wbuf *w, size_t at, const struct bfs_bytes *b,
                           struct iovec iov[3]);

void bfs_rbuf_init(struct bfs_rbuf *r, const void *p, size_t len);
static inline size_t bfs_rbuf_left(const struct bfs_rbuf *r)
{
    return r->len - r->off;
}
/* r->err, or -EBADMSG when unread bytes remain (a body must be consumed). */
int bfs_rbuf_end(struct bfs_rbuf *r);
/* Sets the sticky error unless one is set already; returns r->err. */
int bfs_rbuf_fail(struct bfs_rbuf *r, int err);
int bfs_wbuf_fail(struct bfs_wbuf *w, int err);
/* Returns a pointer to the next n bytes and advances, or NULL (-EBADMSG). */
const uint8_t *bfs_rbuf_take(struct bfs_rbuf *r, size_t n);

/* Scalars. Gets return the buffer's error (0 on success). */
void bfs_put_u8(struct bfs_wbuf *w, uint8_t v);
void bfs_put_u32(struct bfs_wbuf *w, uint32_t v);
void bfs_put_u64(struct bfs_wbuf *w, uint64_t v);
void bfs_put_i64(struct bfs_wbuf *w, int64_t v);
void bfs_put_bool(struct bfs_wbuf *w, bool v);
int bfs_get_u8(struct bfs_rbuf *r, uint8_t *v);
int bfs_get_u32(struct bfs_rbuf *r, uint32_t *v);
int bfs_get_u64(struct bfs_rbuf *r, uint64_t *v);
int bfs_get_i64(struct bfs_rbuf *r, int64_t *v);
int bfs_get_bool(struct bfs_rbuf *r, bool *v);

/* Byte strings and strings (zero-copy on decode; see the top comment). */
void bfs_put_bytes(struct bfs_wbuf *w, const struct bfs_bytes *b);
int bfs_get_bytes(struct bfs_rbuf *r, struct bfs_bytes *b);
void bfs_put_str(struct bfs_wbuf *w, const char *s); /* s may be NULL */
int bfs_get_str(struct bfs_rbuf *r, const char **s);

/* Fixed-layout values. */
void bfs_put_gfid(struct bfs_wbuf *w, const struct bfs_gfid *g);
int bfs_get_gfid(struct bfs_rbuf *r, struct bfs_gfid *g);
void bfs_put_iatt(struct bfs_wbuf *w, const struct bfs_iatt *ia);
int bfs_get_iatt(struct bfs_rbuf *r, struct bfs_iatt *ia);
/* An iatt as a binary dict value, in the wire's encoding (for xdata:
 * BFS_XDATA_IATT). set: 0 or -ENOMEM; get: 0, -ENOENT (no such key) or
 * -EBADMSG (not an iatt). */
int bfs_dict_set_iatt(struct bfs_dict *d, const char *key, const struct bfs_iatt *ia);
int bfs_dict_get_iatt(const struct bfs_dict *d, const char *key, struct bfs_iatt *ia);
void bfs_put_loc(struct bfs_wbuf *w, const struct bfs_loc *loc);
int bfs_get_loc(struct bfs_rbuf *r, struct bfs_loc *loc);
void bfs_put_flock(struct bfs_wbuf *w, const struct bfs_flock *fl);
int bfs_get_flock(struct bfs_rbuf *r, struct bfs_flock *fl);
void bfs_put_lease(struct bfs_wbuf *w, const struct bfs_lease *l);
int bfs_get_lease(struct bfs_rbuf *r, struct bfs_lease *l);
void bfs_put_statvfs(struct bfs_wbuf *w, const struct bfs_statvfs *s);
int bfs_get_statvfs(struct bfs_rbuf *r, struct bfs_statvfs *s);

/* Containers. A put of an over-limit dict (too many entries, key empty or
 * longer than 255 bytes) fails with -E2BIG / -EINVAL on the wbuf. */
void bfs_put_dict(struct bfs_wbuf *w, const struct bfs_dict *d); /* d may be NULL */
int bfs_get_dict(struct bfs_rbuf *r, struct bfs_dict **d);       /* new ref or NULL */
void bfs_put_dirents(struct bfs_wbuf *w, const struct bfs_dirents *l);
/* Fills *l (zeroed first) with owned entries; release with bfs_dirents_free. */
int bfs_get_dirents(struct bfs_rbuf *r, struct bfs_dirents *l);

/* fds, through the mapping. They return the buffer's error: the generated
 * code stops at the first failed fd so it never holds an unmapped one. */
int bfs_put_fd(struct bfs_wbuf *w, struct bfs_fd *fd, const struct bfs_codec_fds *fds);
int bfs_get_fd(struct bfs_rbuf *r, struct bfs_fd **out, int is_new,
               const struct bfs_codec_fds *fds);
/* The names the generator emits (same functions). */
int bfs__enc_fd(struct bfs_wbuf *w, struct bfs_fd *fd, const struct bfs_codec_fds *fds);
int bfs__dec_fd(struct bfs_rbuf *r, struct bfs_fd **out, int is_new,
                const struct bfs_codec_fds *fds);

/* Caller identity at the start of every CALL body. get fills only uid,
 * gid, pid, lk_owner, ngroups and groups; the other fields of *st are left
 * alone (refs, client, unique belong to the receiver). */
void bfs_put_stack(struct bfs_wbuf *w, const struct bfs_stack *st);
int bfs_get_stack(struct bfs_rbuf *r, struct bfs_stack *st);

#endif
