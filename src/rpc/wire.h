/*
 * wire.h — the frame format of the brickfs wire protocol.
 *
 * Every message on a connection is one frame: a fixed 32-byte header
 * followed by `len` bytes of body. All integers are little-endian.
 *
 *   off size field
 *    0   4   magic     0x53465242 ("BRFS" as bytes 'B','R','F','S')
 *    4   1   version   BFS_WIRE_VERSION (1)
 *    5   1   type      enum bfs_wire_type
 *    6   2   flags     free for the protocol layer (not interpreted here)
 *    8   8   id        request id; a REPLY carries the id of its CALL
 *   16   4   proc      procedure (fop number, handshake, ...)
 *   20   4   status    REPLY: rc (>= 0, or -errno >= -4095); other types: 0
 *   24   4   len       body length, at most BFS_WIRE_MAX_BODY
 *   28   4   reserved  must be 0
 *
 * The decoder checks every field before anything is allocated from it, and
 * each kind of violation has its own negative code (BFS_WIRE_E*, all of
 * them -errno values) so that logs say what was wrong.
 * Headers are plain values; nothing here allocates.
 */
#ifndef BFS_RPC_WIRE_H
#define BFS_RPC_WIRE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define BFS_WIRE_MAGIC 0x53465242u
#define BFS_WIRE_VERSION 1
#define BFS_WIRE_HDR_LEN 32
#define BFS_WIRE_MAX_BODY (32u << 20) /* 32 MiB */
#define BFS_WIRE_MIN_STATUS (-4095)   /* most negative -errno a REPLY may carry */

enum bfs_wire_type {
    BFS_WIRE_CALL = 1,
    BFS_WIRE_REPLY = 2,
    BFS_WIRE_UPCALL = 3,
    BFS_WIRE_PING = 4,
    BFS_WIRE_PONG = 5,
};

/* Decoder errors: distinct -errno values, one per violation. */
#define BFS_WIRE_ESHORT (-ENODATA)           /* fewer than 32 bytes given */
#define BFS_WIRE_EMAGIC (-EPROTO)            /* magic is not "BRFS" */
#define BFS_WIRE_EVERSION (-EPROTONOSUPPORT) /* version we do not speak */
#define BFS_WIRE_ETYPE (-ENOMSG)             /* unknown frame type */
#define BFS_WIRE_ERESERVED (-EBADMSG)        /* reserved field not 0 */
#define BFS_WIRE_ESIZE (-EMSGSIZE)           /* len > BFS_WIRE_MAX_BODY */
#define BFS_WIRE_ESTATUS (-ERANGE)           /* status out of range for the type */

/* A decoded header (the magic and reserved fields are implied). */
struct bfs_wire_hdr {
    uint8_t version;
    uint8_t type;   /* enum bfs_wire_type */
    uint16_t flags;
    uint64_t id;
    uint32_t proc;
    int32_t status;
    uint32_t len;   /* body length */
};

/* Writes h as 32 bytes (magic and reserved filled in). Does not validate. */
void bfs_wire_hdr_encode(const struct bfs_wire_hdr *h, uint8_t out[BFS_WIRE_HDR_LEN]);

/* Decodes and validates the first 32 bytes of buf (avail bytes readable).
 * Returns 0, or one of BFS_WIRE_E*; *out is zeroed on error. */
int bfs_wire_hdr_decode(const uint8_t *buf, size_t avail, struct bfs_wire_hdr *out);

/* Validates a header about to be encoded (same rules as the decoder). */
int bfs_wire_hdr_check(const struct bfs_wire_hdr *h);

/* A short text for any code returned by bfs_wire_hdr_decode (or another
 * -errno, via strerror); never NULL, static storage. */
const char *bfs_wire_strerror(int rc);

/* "CALL", "REPLY", ...; "?" for an unknown type. */
const char *bfs_wire_type_name(int type);

/* Little-endian load/store helpers shared by the codec. */
static inline void bfs_le16_put(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void bfs_le32_put(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void bfs_le64_put(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t bfs_le16_get(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t bfs_le32_get(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static inline uint64_t bfs_le64_get(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

#endif
