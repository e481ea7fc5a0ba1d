/*
 * fuzz_frame.c — libFuzzer target for the untrusted side of the wire: the
 * input is a byte stream read as consecutive frames (src/rpc/wire.h), as a
 * connection would. Each header goes through bfs_wire_hdr_decode; the
 * stream ends at the first bad header or truncated body, like a closed
 * connection. Each body is read with the codec getters (src/rpc/codec.h)
 * in an order taken from the header's id and proc fields (5 bits per
 * step), repeated until the body is consumed or a getter fails.
 *
 * Besides "no crash, no leak, no read past the body" (ASan), it checks
 * that every value decoded re-encodes to exactly the bytes it came from
 * (the encodings are canonical), except dicts, whose duplicate keys
 * legitimately collapse.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/xlator.h"
#include "rpc/codec.h"
#include "rpc/wire.h"

#define NFAKE 16
static struct bfs_fd fake_fds[NFAKE];

static int fz_fd_to_id(void *arg, struct bfs_fd *fd, uint64_t *id)
{
    if (fd < fake_fds || fd >= fake_fds + NFAKE)
        return -EBADF;
    *id = (uint64_t)(fd - fake_fds);
    return 0;
}

static int fz_id_to_fd(void *arg, uint64_t id, int is_new, struct bfs_fd **out)
{
    if (id >= NFAKE)
        return -EBADF;
    *out = &fake_fds[id];
    return 0;
}

static const struct bfs_codec_fds fz_fds = {NULL, fz_fd_to_id, fz_id_to_fd};

enum {
    OP_U8, OP_U32, OP_U64, OP_I64, OP_BOOL, OP_BYTES, OP_STR, OP_GFID, OP_IATT, OP_LOC,
    OP_FLOCK, OP_LEASE, OP_STATVFS, OP_DICT, OP_DIRENTS, OP_FD, OP_NEWFD, OP_STACK, OP_COUNT
};

/* Decodes one value of type op from r and, when it decodes, re-encodes it
 * into w. Returns 1 if the re-encoding must equal the consumed bytes. */
static int step(int op, struct bfs_rbuf *r, struct bfs_wbuf *w)
{
    static struct bfs_stack st; /* big (groups[]): not on the stack */
    union {
        uint8_t u8;
        uint32_t u32;
        uint64_t u64;
        int64_t i64;
        bool b;
        struct bfs_bytes by;
        const char *s;
        struct bfs_gfid g;
        struct bfs_iatt ia;
        struct bfs_loc loc;
        struct bfs_flock fl;
        struct bfs_lease le;
        struct bfs_statvfs sv;
        struct bfs_dict *d;
        struct bfs_dirents de;
        struct bfs_fd *fd;
    } v;
    int canonical = 1;
    memset(&v, 0, sizeof(v));

#define CASE(OP, T, field, ...)                                                              \
    case OP:                                                                                 \
        if (bfs_get_##T(r, &v.field) == 0)                                                   \
            bfs_put_##T(w, __VA_ARGS__);                                                     \
        break;
    switch (op) {
        CASE(OP_U8, u8, u8, v.u8)
        CASE(OP_U32, u32, u32, v.u32)
        CASE(OP_U64, u64, u64, v.u64)
        CASE(OP_I64, i64, i64, v.i64)
        CASE(OP_BOOL, bool, b, v.b)
        CASE(OP_BYTES, bytes, by, &v.by)
        CASE(OP_STR, str, s, v.s)
        CASE(OP_GFID, gfid, g, &v.g)
        CASE(OP_IATT, iatt, ia, &v.ia)
        CASE(OP_LOC, loc, loc, &v.loc)
        CASE(OP_FLOCK, flock, fl, &v.fl)
        CASE(OP_LEASE, lease, le, &v.le)
        CASE(OP_STATVFS, statvfs, sv, &v.sv)
    case OP_DICT:
        if (bfs_get_dict(r, &v.d) == 0)
            bfs_put_dict(w, v.d);
        bfs_dict_unref(v.d);
        canonical = 0;
        break;
    case OP_DIRENTS:
        if (bfs_get_dirents(r, &v.de) == 0)
            bfs_put_dirents(w, &v.de);
        bfs_dirents_free(&v.de);
        break;
    case OP_FD:
    case OP_NEWFD:
        if (bfs_get_fd(r, &v.fd, op == OP_NEWFD, &fz_fds) == 0)
            bfs_put_fd(w, v.fd, &fz_fds);
        break;
    case OP_STACK:
        if (bfs_get_stack(r, &st) == 0)
            bfs_put_stack(w, &st);
        break;
    }
#undef CASE
    return canonical;
}

/* Reads one body with the op sequence seeded by the header. */
static void read_body(const struct bfs_wire_hdr *h, const uint8_t *body, size_t len)
{
    /* an exact-size copy so that ASan sees any read past the end */
    uint8_t *copy = malloc(len ? len : 1);
    if (len)
        memcpy(copy, body, len);
    struct bfs_rbuf r;
    struct bfs_wbuf w;
    bfs_rbuf_init(&r, copy, len);
    bfs_wbuf_init(&w);

    uint64_t seed[2] = {h->id, (uint64_t)h->proc << 16 | h->flags};
    for (int i = 0; i < 4096 && !r.err && r.off < r.len; i++) {
        int k = i % 24, op = (int)((seed[k / 12] >> (5 * (k % 12))) & 31) % OP_COUNT;
        size_t start = r.off;
        w.len = 0;
        int canonical = step(op, &r, &w);
        if (r.err)
            break;
        if (w.err && w.err != -ENOMEM)
            abort(); /* a decoded value the encoder refuses */
        if (canonical && !w.err &&
            (w.len != r.off - start || memcmp(w.p, copy + start, w.len) != 0))
            abort(); /* decode and encode disagree */
    }
    /* the only errors a getter may report */
    if (r.err && r.err != -EBADMSG && r.err != -EINVAL && r.err != -EBADF && r.err != -ENOMEM)
        abort();
    bfs_rbuf_end(&r);
    bfs_wbuf_free(&w);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    while (off < size) {
        struct bfs_wire_hdr h;
        int rc = bfs_wire_hdr_decode(data + off, size - off, &h);
        if (rc < 0) {
            if (!bfs_wire_strerror(rc)[0])
                abort();
            return 0; /* the connection would be closed here */
        }
        if (h.len > BFS_WIRE_MAX_BODY)
            abort(); /* the decoder must have refused it */
        off += BFS_WIRE_HDR_LEN;
        if (h.len > size - off)
            return 0; /* truncated body: wait for more / EOF */
        read_body(&h, data + off, h.len);
        off += h.len;
    }
    return 0;
}
