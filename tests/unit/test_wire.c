/*
 * test_wire.c — the 32-byte frame header (src/rpc/wire.h): exact byte
 * layout, round trips, and one distinct error per kind of bad header.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rpc/wire.h"
#include "../lib/tap.h"

static void encode(uint8_t buf[BFS_WIRE_HDR_LEN], uint8_t type, int32_t status, uint32_t len)
{
    struct bfs_wire_hdr h = {.version = BFS_WIRE_VERSION, .type = type, .flags = 0x1234,
                             .id = 0x1122334455667788ull, .proc = 0xA0B0C0D0u,
                             .status = status, .len = len};
    bfs_wire_hdr_encode(&h, buf);
}

static void test_layout(void)
{
    uint8_t b[BFS_WIRE_HDR_LEN];
    encode(b, BFS_WIRE_REPLY, -2, 0x01020304);
    ok(memcmp(b, "BRFS", 4) == 0, "magic reads \"BRFS\" on the wire");
    ok(b[4] == 1 && b[5] == 2, "version and type bytes");
    ok(b[6] == 0x34 && b[7] == 0x12, "flags little-endian");
    ok(b[8] == 0x88 && b[15] == 0x11, "id little-endian");
    ok(b[16] == 0xD0 && b[19] == 0xA0, "proc little-endian");
    ok(b[20] == 0xFE && b[21] == 0xFF && b[22] == 0xFF && b[23] == 0xFF, "status -2 as i32");
    ok(b[24] == 0x04 && b[27] == 0x01, "len little-endian");
    ok(b[28] == 0 && b[29] == 0 && b[30] == 0 && b[31] == 0, "reserved zero");

    struct bfs_wire_hdr h;
    is_int(bfs_wire_hdr_decode(b, sizeof(b), &h), 0, "valid header decodes");
    ok(h.version == 1 && h.type == BFS_WIRE_REPLY && h.flags == 0x1234 &&
           h.id == 0x1122334455667788ull && h.proc == 0xA0B0C0D0u && h.status == -2 &&
           h.len == 0x01020304,
       "every field round-trips");
}

static void test_types(void)
{
    uint8_t b[BFS_WIRE_HDR_LEN];
    struct bfs_wire_hdr h;
    for (int t = BFS_WIRE_CALL; t <= BFS_WIRE_PONG; t++) {
        encode(b, (uint8_t)t, 0, 0);
        is_int(bfs_wire_hdr_decode(b, sizeof(b), &h), 0, "type %s accepted",
               bfs_wire_type_name(t));
    }
    int bad_types[] = {0, 6, 255};
    for (int i = 0; i < 3; i++) {
        encode(b, (uint8_t)bad_types[i], 0, 0);
        is_int(bfs_wire_hdr_decode(b, sizeof(b), &h), BFS_WIRE_ETYPE, "type %d refused",
               bad_types[i]);
    }
    is_str(bfs_wire_type_name(BFS_WIRE_UPCALL), "UPCALL", "type names");
    is_str(bfs_wire_type_name(9), "?", "unknown type name");
}

static void test_errors(void)
{
    uint8_t b[BFS_WIRE_HDR_LEN];
    struct bfs_wire_hdr h;

    encode(b, BFS_WIRE_CALL, 0, 10);
    int wrong = 0;
    for (size_t n = 0; n < BFS_WIRE_HDR_LEN; n++)
        wrong += bfs_wire_hdr_decode(b, n, &h) != BFS_WIRE_ESHORT;
    is_int(wrong, 0, "every length below 32 is ESHORT");

    for (int i = 0; i < 4; i++) {
        encode(b, BFS_WIRE_CALL, 0, 10);
        b[i] ^= 0x20;
        is_int(bfs_wire_hdr_decode(b, sizeof(b), &h), BFS_WIRE_EMAGIC, "magic byte %d flipped", i);
    }
    encode(b, BFS_WIRE_CALL, 0, 10);
    b[4] = 0;
    is_int(bfs_wire_hdr_decode(b, sizeof(b), &h), BFS_WIRE_EVERSION, "version 0 refused");
    b[4] = 2;
    is_int(bfs_wire_hdr_decode(b, sizeof(b), &h), BFS_WIRE_EVERSION, "version 2 refused");

    for (int i = 28; i < 32; i++) {
        encode(b, BFS_WIRE_CALL, 0, 10);
        b[i] = 1;
        is_int(bfs_wire_hdr_decode(b, sizeof(b), &h), BFS_WIRE_ERESERVED,
               "reserved byte %d set refused", i);
    }

    encode(b, BFS_WIRE_CALL, 0, BFS_WIRE_MAX_BODY);
    is_int(bfs_wire_hdr_decode(b, sizeof(b), &h), 0, "body of exactly 32 MiB accepted");
    is_int(h.len, BFS_WIRE_MAX_BODY, "len decoded");
    encode(b, BFS_WIRE_CALL, 0, BFS_WIRE_MAX_BODY + 1);
    h.id = 99;
    is_int(bfs_wire_hdr_decode(b, sizeof(b), &h), BFS_WIRE_ESIZE, "32 MiB + 1 refused");
    ok(h.id == 0 && h.len == 0, "output zeroed on error");
    encode(b, BFS_WIRE_CALL, 0, 0xFFFFFFFFu);
    is_int(bfs_wire_hdr_decode(b, sizeof(b), &h), BFS_WIRE_ESIZE, "4 GiB refused");

    encode(b, BFS_WIRE_CALL, 5, 0);
    is_int(bfs_wire_hdr_decode(b, sizeof(b), &h), BFS_WIRE_ESTATUS, "CALL with status refused");
    encode(b, BFS_WIRE_PING, -1, 0);
    is_int(bfs_wire_hdr_decode(b, sizeof(b), &h), BFS_WIRE_ESTATUS, "PING with status refused");
    encode(b, BFS_WIRE_REPLY, -4095, 0);
    is_int(bfs_wire_hdr_decode(b, sizeof(b), &h), 0, "REPLY with -4095 accepted");
    encode(b, BFS_WIRE_REPLY, 7, 0);
    is_int(bfs_wire_hdr_decode(b, sizeof(b), &h), 0, "REPLY with positive rc accepted");
    encode(b, BFS_WIRE_REPLY, -4096, 0);
    is_int(bfs_wire_hdr_decode(b, sizeof(b), &h), BFS_WIRE_ESTATUS, "REPLY with -4096 refused");
    encode(b, BFS_WIRE_REPLY, INT32_MIN, 0);
    is_int(bfs_wire_hdr_decode(b, sizeof(b), &h), BFS_WIRE_ESTATUS, "REPLY with INT32_MIN refused");

    /* extra bytes after the header are not the decoder's business */
    uint8_t two[2 * BFS_WIRE_HDR_LEN];
    encode(two, BFS_WIRE_CALL, 0, 3);
    memset(two + BFS_WIRE_HDR_LEN, 0xFF, BFS_WIRE_HDR_LEN);
    is_int(bfs_wire_hdr_decode(two, sizeof(two), &h), 0, "decoder reads only 32 bytes");
}

static void test_codes(void)
{
    int codes[] = {BFS_WIRE_ESHORT,    BFS_WIRE_EMAGIC, BFS_WIRE_EVERSION, BFS_WIRE_ETYPE,
                   BFS_WIRE_ERESERVED, BFS_WIRE_ESIZE,  BFS_WIRE_ESTATUS};
    int n = sizeof(codes) / sizeof(codes[0]), distinct = 1;
    for (int i = 0; i < n; i++) {
        ok(codes[i] < 0, "code %d is negative", codes[i]);
        for (int j = 0; j < i; j++)
            if (codes[i] == codes[j] ||
                strcmp(bfs_wire_strerror(codes[i]), bfs_wire_strerror(codes[j])) == 0)
                distinct = 0;
    }
    ok(distinct, "codes and their messages are distinct");
    is_str(bfs_wire_strerror(BFS_WIRE_EMAGIC), "bad magic (not a brickfs peer)", "message text");
    ok(strlen(bfs_wire_strerror(-ENOMEM)) > 0, "other errno values get strerror text");

    struct bfs_wire_hdr h = {.version = 1, .type = BFS_WIRE_CALL, .len = 1};
    is_int(bfs_wire_hdr_check(&h), 0, "check accepts a good header");
    h.type = 9;
    is_int(bfs_wire_hdr_check(&h), BFS_WIRE_ETYPE, "check refuses a bad type");
}

int main(void)
{
    plan_lazy();
    test_layout();
    test_types();
    test_errors();
    test_codes();
    return done_testing();
}
