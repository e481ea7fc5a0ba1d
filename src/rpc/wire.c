/*
 * wire.c — encoding and validation of the 32-byte frame header (wire.h).
 *
 * The decoder is the first thing untrusted bytes meet: it reads only the
 * 32 bytes it was given and rejects anything it does not fully understand,
 * so the connection layer can size the body allocation from `len` safely.
 */
#include <string.h>

#include "rpc/wire.h"

void bfs_wire_hdr_encode(const struct bfs_wire_hdr *h, uint8_t out[BFS_WIRE_HDR_LEN])
{
    bfs_le32_put(out + 0, BFS_WIRE_MAGIC);
    out[4] = h->version;
    out[5] = h->type;
    bfs_le16_put(out + 6, h->flags);
    bfs_le64_put(out + 8, h->id);
    bfs_le32_put(out + 16, h->proc);
    bfs_le32_put(out + 20, (uint32_t)h->status);
    bfs_le32_put(out + 24, h->len);
    bfs_le32_put(out + 28, 0);
}

/* The checks shared by the decoder and bfs_wire_hdr_check, in the order a
 * reader would want them reported (the most basic mismatch first). */
static int hdr_validate(const struct bfs_wire_hdr *h)
{
    if (h->version != BFS_WIRE_VERSION)
        return BFS_WIRE_EVERSION;
    if (h->type < BFS_WIRE_CALL || h->type > BFS_WIRE_PONG)
        return BFS_WIRE_ETYPE;
    if (h->len > BFS_WIRE_MAX_BODY)
        return BFS_WIRE_ESIZE;
    if (h->type == BFS_WIRE_REPLY ? h->status < BFS_WIRE_MIN_STATUS : h->status != 0)
        return BFS_WIRE_ESTATUS;
    return 0;
}

int bfs_wire_hdr_decode(const uint8_t *buf, size_t avail, struct bfs_wire_hdr *out)
{
    int rc;

    memset(out, 0, sizeof(*out));
    if (avail < BFS_WIRE_HDR_LEN)
        return BFS_WIRE_ESHORT;
    if (bfs_le32_get(buf) != BFS_WIRE_MAGIC)
        return BFS_WIRE_EMAGIC;

    struct bfs_wire_hdr h = {
        .version = buf[4],
        .type = buf[5],
        .flags = bfs_le16_get(buf + 6),
        .id = bfs_le64_get(buf + 8),
        .proc = bfs_le32_get(buf + 16),
        .status = (int32_t)bfs_le32_get(buf + 20),
        .len = bfs_le32_get(buf + 24),
    };
    if ((rc = hdr_validate(&h)) < 0)
        return rc;
    if (bfs_le32_get(buf + 28) != 0)
        return BFS_WIRE_ERESERVED;
    *out = h;
    return 0;
}

int bfs_wire_hdr_check(const struct bfs_wire_hdr *h)
{
    return hdr_validate(h);
}

const char *bfs_wire_strerror(int rc)
{
    switch (rc) {
    case 0:
        return "ok";
    case BFS_WIRE_ESHORT:
        return "truncated frame header";
    case BFS_WIRE_EMAGIC:
        return "bad magic (not a brickfs peer)";
    case BFS_WIRE_EVERSION:
        return "unsupported protocol version";
    case BFS_WIRE_ETYPE:
        return "unknown frame type";
    case BFS_WIRE_ERESERVED:
        return "reserved header field not zero";
    case BFS_WIRE_ESIZE:
        return "frame body larger than the 32 MiB limit";
    case BFS_WIRE_ESTATUS:
        return "status field out of range for the frame type";
    default:
        return rc < 0 ? strerror(-rc) : "unknown error";
    }
}

const char *bfs_wire_type_name(int type)
{
    static const char *const names[] = {
        [BFS_WIRE_CALL] = "CALL",     [BFS_WIRE_REPLY] = "REPLY", [BFS_WIRE_UPCALL] = "UPCALL",
        [BFS_WIRE_PING] = "PING",     [BFS_WIRE_PONG] = "PONG",
    };
    if (type < BFS_WIRE_CALL || type > BFS_WIRE_PONG)
        return "?";
    return names[type];
}
