/*
 * rawclient.c — speaks the brickfs wire protocol to a brick directly, with
 * frames built by hand, to check what a brick does with input no honest
 * client sends. Used by tests/integration/010-brick-bad-input.t.
 *
 *   rawclient names   HOST PORT SUBVOL   bad names in lookup, create, mkdir
 *                                        and rename (as the new name), fd ids
 *                                        misused; prints "OP LABEL RESULT"
 *                                        per request (RESULT: OK or an errno
 *                                        name such as EINVAL)
 *   rawclient garbage HOST PORT SUBVOL   malformed traffic, each case on a new
 *                                        connection; prints "CASE closed" when
 *                                        the brick hung up on it, then checks
 *                                        the brick still serves a new client
 *   rawclient ping    HOST PORT SUBVOL   handshake + lookup of the root
 *
 * Exit status: 0 when every exchange happened (names: all answered;
 * garbage: every bad connection closed by the brick and the brick still
 * alive; ping: the lookup succeeded), 1 otherwise, 2 for usage errors.
 * Blocking sockets with a 5 s receive timeout; nothing here is clever.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/xlator.h"
#include "rpc/codec.h"
#include "rpc/proto.h"
#include "rpc/wire.h"

static const char *host, *subvol;
static int port;
static uint64_t next_id = 1;

/* ---- sockets and frames ---- */

static int dial(void)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
    char serv[16];
    snprintf(serv, sizeof(serv), "%d", port);
    if (getaddrinfo(host, serv, &hints, &res) != 0)
        return -1;
    int fd = socket(res->ai_family, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) < 0) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        struct timeval tv = {.tv_sec = 5};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
    return fd;
}

static int send_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static int recv_all(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n) {
        ssize_t r = recv(fd, b, n, 0);
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

/* A header as the brick expects it, with any length we like. */
static void raw_hdr(uint8_t out[BFS_WIRE_HDR_LEN], int type, uint64_t id, uint32_t proc,
                    uint32_t len)
{
    struct bfs_wire_hdr h = {.version = BFS_WIRE_VERSION, .type = (uint8_t)type, .id = id,
                             .proc = proc, .len = len};
    bfs_wire_hdr_encode(&h, out);
}

static int send_frame(int fd, int type, uint64_t id, uint32_t proc, const void *body, size_t len)
{
    uint8_t h[BFS_WIRE_HDR_LEN];
    raw_hdr(h, type, id, proc, (uint32_t)len);
    return send_all(fd, h, sizeof(h)) || (len && send_all(fd, body, len)) ? -1 : 0;
}

/* Reads the next REPLY (answering pings); its body is malloc'd. */
static int recv_reply(int fd, struct bfs_wire_hdr *h, uint8_t **body)
{
    for (;;) {
        uint8_t raw[BFS_WIRE_HDR_LEN];
        if (recv_all(fd, raw, sizeof(raw)) < 0 || bfs_wire_hdr_decode(raw, sizeof(raw), h) < 0)
            return -1;
        *body = malloc(h->len ? h->len : 1);
        if (!*body || (h->len && recv_all(fd, *body, h->len) < 0)) {
            free(*body);
            return -1;
        }
        if (h->type == BFS_WIRE_REPLY)
            return 0;
        if (h->type == BFS_WIRE_PING)
            send_frame(fd, BFS_WIRE_PONG, h->id, 0, NULL, 0);
        free(*body);
    }
}

/* One CALL and its REPLY. Returns the status, or 1 when the brick did not answer. */
static int call(int fd, uint32_t proc, struct bfs_wbuf *w, uint8_t **body_out, size_t *len_out)
{
    struct bfs_wire_hdr h;
    uint8_t *body;
    uint64_t id = next_id++;
    int rc = w->err ? 1 : send_frame(fd, BFS_WIRE_CALL, id, proc, w->p, w->len);
    bfs_wbuf_free(w);
    if (rc || recv_reply(fd, &h, &body) < 0)
        return 1;
    if (h.id != id) {
        free(body);
        return 1;
    }
    if (body_out) {
        *body_out = body;
        *len_out = h.len;
    } else {
        free(body);
    }
    return h.status;
}

static int handshake(int fd)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    struct bfs_setvolume_req req = {.version = BFS_PROTO_VERSION, .subvol = subvol,
                                    .uuid = "rawclient", .name = "rawclient"};
    bfs_enc_setvolume_req(&w, &req);
    return call(fd, BFS_PROC_SETVOLUME, &w, NULL, NULL);
}

/* ---- request bodies, field by field as in src/core/fops.def ---- */

static void put_root_stack(struct bfs_wbuf *w)
{
    struct bfs_stack st = {0};
    bfs_put_stack(w, &st);
}

/* A string of len bytes exactly as given (embedded NULs included). */
static void put_raw_str(struct bfs_wbuf *w, const char *s, uint32_t len)
{
    bfs_put_u32(w, len);
    bfs_wbuf_append(w, s, len);
    bfs_put_u8(w, 0);
}

static void put_loc(struct bfs_wbuf *w, const struct bfs_gfid *gfid, const struct bfs_gfid *par,
                    const char *name, uint32_t len)
{
    bfs_put_gfid(w, gfid ? gfid : &bfs_gfid_null);
    bfs_put_gfid(w, par ? par : &bfs_gfid_null);
    if (name)
        put_raw_str(w, name, len);
    else
        bfs_put_str(w, NULL);
}

static const char *result(int rc)
{
    static char buf[32];
    if (rc == 1)
        return "NOANSWER";
    if (rc >= 0)
        return "OK";
    const char *n = strerrorname_np(-rc);
    if (n)
        return n;
    snprintf(buf, sizeof(buf), "E%d", -rc);
    return buf;
}

static int op_lookup(int fd, const struct bfs_gfid *gfid, const char *name, uint32_t len,
                     struct bfs_gfid *out)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    put_root_stack(&w);
    put_loc(&w, gfid, gfid ? NULL : &bfs_gfid_root, name, len);
    bfs_put_dict(&w, NULL);
    uint8_t *body = NULL;
    size_t blen = 0;
    int rc = call(fd, BFS_FOP_LOOKUP, &w, &body, &blen);
    if (rc >= 0 && out && blen >= 16)
        memcpy(out->b, body, 16); /* the reply's attr starts with the gfid */
    free(body);
    return rc;
}

static int op_create(int fd, const char *name, uint32_t len, uint64_t fd_id)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    put_root_stack(&w);
    put_loc(&w, NULL, &bfs_gfid_root, name, len);
    bfs_put_u64(&w, fd_id);
    bfs_put_u32(&w, O_RDWR | O_CREAT);
    bfs_put_u32(&w, 0644);
    bfs_put_u32(&w, 022);
    bfs_put_dict(&w, NULL);
    return call(fd, BFS_FOP_CREATE, &w, NULL, NULL);
}

static int op_mkdir(int fd, const char *name, uint32_t len)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    put_root_stack(&w);
    put_loc(&w, NULL, &bfs_gfid_root, name, len);
    bfs_put_u32(&w, 0755);
    bfs_put_u32(&w, 022);
    bfs_put_dict(&w, NULL);
    return call(fd, BFS_FOP_MKDIR, &w, NULL, NULL);
}

static int op_rename(int fd, const char *from, const char *name, uint32_t len)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    put_root_stack(&w);
    put_loc(&w, NULL, &bfs_gfid_root, from, (uint32_t)strlen(from));
    put_loc(&w, NULL, &bfs_gfid_root, name, len);
    bfs_put_u32(&w, 0);
    bfs_put_dict(&w, NULL);
    return call(fd, BFS_FOP_RENAME, &w, NULL, NULL);
}

static int op_open(int fd, const struct bfs_gfid *gfid, uint64_t fd_id)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    put_root_stack(&w);
    put_loc(&w, gfid, NULL, NULL, 0);
    bfs_put_u64(&w, fd_id);
    bfs_put_u32(&w, O_RDONLY);
    bfs_put_dict(&w, NULL);
    return call(fd, BFS_FOP_OPEN, &w, NULL, NULL);
}

static int op_fstat(int fd, uint64_t fd_id)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    put_root_stack(&w);
    bfs_put_u64(&w, fd_id);
    bfs_put_dict(&w, NULL);
    return call(fd, BFS_FOP_FSTAT, &w, NULL, NULL);
}

/* ---- modes ---- */

static int mode_names(void)
{
    static char longname[257];
    memset(longname, 'n', 256);
    const struct {
        const char *label, *name;
        uint32_t len;
    } bad[] = {
        {"slash", "a/b", 3}, {"dotdot", "..", 2}, {"dot", ".", 1},        {"empty", "", 0},
        {"nul", "x\0y", 3},  {"hidden", ".brickfs", 8}, {"long", longname, 256},
    };
    int fd = dial();
    if (fd < 0 || handshake(fd) != 0) {
        fprintf(stderr, "rawclient: cannot connect and handshake\n");
        return 1;
    }
    int answered = 1;
    struct bfs_gfid good;
    int rc = op_lookup(fd, &bfs_gfid_root, NULL, 0, NULL);
    printf("lookup root %s\n", result(rc));
    rc = op_create(fd, "good", 4, 1);
    printf("create good %s\n", result(rc));
    answered &= rc != 1;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int r[4] = {
            op_lookup(fd, NULL, bad[i].name, bad[i].len, NULL),
            op_create(fd, bad[i].name, bad[i].len, 100 + i),
            op_mkdir(fd, bad[i].name, bad[i].len),
            op_rename(fd, "good", bad[i].name, bad[i].len),
        };
        const char *ops[4] = {"lookup", "create", "mkdir", "rename"};
        for (int k = 0; k < 4; k++) {
            printf("%s %s %s\n", ops[k], bad[i].label, result(r[k]));
            answered &= r[k] != 1;
        }
    }
    /* fd ids: one in use, one never opened */
    rc = op_lookup(fd, NULL, "good", 4, &good);
    printf("lookup good %s\n", result(rc));
    rc = op_open(fd, &good, 1);
    printf("open dup-fd-id %s\n", result(rc));
    rc = op_fstat(fd, 4242);
    printf("fstat unknown-fd-id %s\n", result(rc));
    rc = op_fstat(fd, 1);
    printf("fstat fd-id %s\n", result(rc));
    rc = op_lookup(fd, &bfs_gfid_root, NULL, 0, NULL);
    printf("lookup root-again %s\n", result(rc));
    answered &= rc == 0;
    close(fd);
    return answered ? 0 : 1;
}

/* 1 when the brick closed the connection (EOF or reset) within the timeout. */
static int brick_hung_up(int fd)
{
    uint8_t buf[4096];
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof(buf), 0);
        if (r == 0 || (r < 0 && errno == ECONNRESET))
            return 1;
        if (r < 0)
            return 0; /* timeout */
    }
}

static int alive(void)
{
    int fd = dial();
    int ok = fd >= 0 && handshake(fd) == 0 && op_lookup(fd, &bfs_gfid_root, NULL, 0, NULL) >= 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

static void case_truncated(int fd)
{
    uint8_t h[BFS_WIRE_HDR_LEN];
    raw_hdr(h, BFS_WIRE_CALL, next_id++, BFS_FOP_LOOKUP, 100);
    send_all(fd, h, sizeof(h));
    send_all(fd, "0123456789", 10);
    shutdown(fd, SHUT_WR); /* the rest never comes */
}

static void case_oversized(int fd)
{
    uint8_t h[BFS_WIRE_HDR_LEN];
    raw_hdr(h, BFS_WIRE_CALL, next_id++, BFS_FOP_LOOKUP, 64u << 20);
    send_all(fd, h, sizeof(h));
}

static void case_unknown_proc(int fd)
{
    handshake(fd);
    send_frame(fd, BFS_WIRE_CALL, next_id++, 999, "x", 1);
}

static void case_before_handshake(int fd)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    put_root_stack(&w);
    put_loc(&w, &bfs_gfid_root, NULL, NULL, 0);
    bfs_put_dict(&w, NULL);
    send_frame(fd, BFS_WIRE_CALL, next_id++, BFS_FOP_LOOKUP, w.p, w.len);
    bfs_wbuf_free(&w);
}

static void case_short_body(int fd)
{
    handshake(fd);
    uint8_t body[20] = {0}; /* a stack cut in the middle */
    send_frame(fd, BFS_WIRE_CALL, next_id++, BFS_FOP_LOOKUP, body, sizeof(body));
}

static void case_trailing_bytes(int fd)
{
    handshake(fd);
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    put_root_stack(&w);
    put_loc(&w, &bfs_gfid_root, NULL, NULL, 0);
    bfs_put_dict(&w, NULL);
    bfs_put_u64(&w, 0xdeadbeef);
    send_frame(fd, BFS_WIRE_CALL, next_id++, BFS_FOP_LOOKUP, w.p, w.len);
    bfs_wbuf_free(&w);
}

static void case_reply_from_client(int fd)
{
    handshake(fd);
    send_frame(fd, BFS_WIRE_REPLY, 7, BFS_FOP_LOOKUP, NULL, 0);
}

static void case_random(int fd)
{
    uint8_t junk[4096];
    srand(42);
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)rand();
    send_all(fd, junk, sizeof(junk));
}

static int mode_garbage(void)
{
    const struct {
        const char *name;
        void (*fn)(int fd);
    } cases[] = {
        {"truncated-frame", case_truncated},   {"oversized-length", case_oversized},
        {"unknown-procedure", case_unknown_proc}, {"fop-before-handshake", case_before_handshake},
        {"short-body", case_short_body},       {"trailing-bytes", case_trailing_bytes},
        {"reply-from-client", case_reply_from_client}, {"random-bytes", case_random},
    };
    int good = 1;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int fd = dial();
        if (fd < 0) {
            printf("%s cannot-connect\n", cases[i].name);
            good = 0;
            continue;
        }
        cases[i].fn(fd);
        int closed = brick_hung_up(fd);
        close(fd);
        int ok = alive();
        printf("%s %s %s\n", cases[i].name, closed ? "closed" : "NOT-closed",
               ok ? "alive" : "DEAD");
        good &= closed && ok;
    }
    return good ? 0 : 1;
}

static int mode_ping(void)
{
    int ok = alive();
    printf("%s\n", ok ? "alive" : "DEAD");
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: rawclient names|garbage|ping HOST PORT SUBVOL\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    host = argv[2];
    port = atoi(argv[3]);
    subvol = argv[4];
    if (strcmp(argv[1], "names") == 0)
        return mode_names();
    if (strcmp(argv[1], "garbage") == 0)
        return mode_garbage();
    if (strcmp(argv[1], "ping") == 0)
        return mode_ping();
    fprintf(stderr, "rawclient: unknown mode '%s'\n", argv[1]);
    return 2;
}
