/*
 * conn.h — framed TCP connections over the event loop, a listener and an
 * outgoing connect.
 *
 * A bfs_conn wraps a connected, non-blocking socket. It reads frames
 * (wire.h) on its loop's thread and hands each complete one to on_frame;
 * it sends frames from any thread.
 *
 * Lifetime:
 *   bfs_conn_new()   wraps an fd (taking it) and returns one reference.
 *                    Nothing happens on the socket yet, so the caller can
 *                    store the pointer before any callback can see it.
 *   bfs_conn_start() registers with the loop; from then on on_frame runs
 *                    on the loop thread, and on_close runs exactly once.
 *   bfs_conn_close() from any thread, any number of times: the first
 *                    reason wins. The socket is closed and on_close runs
 *                    later on the loop thread, never inside the call to
 *                    bfs_conn_close itself (so it may be called with the
 *                    caller's locks held).
 *   A started connection also closes by itself on EOF (reason 0), a socket
 *   error (-errno) or a bad frame (a BFS_WIRE_E* code; logged with the
 *   peer's address).
 *   bfs_conn_unref() drops a reference; the memory goes when the last one
 *   does. While started and not yet closed, the loop holds its own
 *   reference, so a conn never disappears under a callback. A conn that is
 *   never started gets no on_close; its fd is closed at the last unref.
 *   Close every started connection and wait for its on_close before
 *   stopping or freeing the loop: the loop's reference is dropped there.
 *
 * Sending: bfs_conn_send() gathers the body from an iovec: written from the
 * caller's memory when nothing is queued and the socket takes it all,
 * copied (what is left of it) otherwise; either way the caller's memory is
 * free again when it returns. bfs_conn_send_buf() takes a malloc'd body and
 * frees it when written or dropped, including when it fails. Both fill
 * h->len and h->version from
 * the arguments. Frames leave in the order they were accepted. The sending
 * thread writes directly while the socket takes the data; whatever is
 * left waits in a queue that the loop flushes on EPOLLOUT (requested only
 * while the queue is non-empty). Success means "queued": a frame still
 * queued when the connection closes is dropped, and the owner learns of
 * it from on_close. They return -ENOTCONN once the connection is closing.
 */
#ifndef BFS_RPC_CONN_H
#define BFS_RPC_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "rpc/wire.h"

struct bfs_loop;
struct bfs_conn;

struct bfs_conn_cbs {
    /* A complete frame, on the loop thread. body is malloc'd (NULL when
     * len is 0) and now belongs to the callee, which free()s it. */
    void (*on_frame)(struct bfs_conn *c, const struct bfs_wire_hdr *h, void *body, size_t len,
                     void *arg);
    /* Once per started connection, on the loop thread, after the socket
     * is closed. reason: 0 for EOF from the peer, else -errno. */
    void (*on_close)(struct bfs_conn *c, int reason, void *arg);
};

/* Takes fd (a connected stream socket; made non-blocking, TCP_NODELAY).
 * Returns NULL on ENOMEM, in which case fd is closed. */
struct bfs_conn *bfs_conn_new(struct bfs_loop *loop, int fd, const struct bfs_conn_cbs *cbs,
                              void *arg);
/* 0, -ENOTCONN if already closed, or the loop's error. */
int bfs_conn_start(struct bfs_conn *c);
void bfs_conn_close(struct bfs_conn *c, int reason);
struct bfs_conn *bfs_conn_ref(struct bfs_conn *c);
void bfs_conn_unref(struct bfs_conn *c); /* NULL-safe */

/* 0, -ENOTCONN, -EMSGSIZE (body over BFS_WIRE_MAX_BODY), -EINVAL (bad
 * type/status in h) or -ENOMEM. */
int bfs_conn_send(struct bfs_conn *c, const struct bfs_wire_hdr *h, const struct iovec *iov,
                  int iovcnt);
int bfs_conn_send_buf(struct bfs_conn *c, const struct bfs_wire_hdr *h, void *body,
                      size_t len);
/* bfs_conn_send for a frame nobody waits for: sent with MSG_MORE, so TCP
 * holds it until the next frame (without MSG_MORE) leaves, and the peer
 * reads both with one wake-up. Frames that must go at once never use it. */
int bfs_conn_send_more(struct bfs_conn *c, const struct bfs_wire_hdr *h, const struct iovec *iov,
                       int iovcnt);

/* Reads of the socket that brought bytes so far: about the wake-ups the
 * peer's frames cost (frames sent together are read together). */
uint64_t bfs_conn_reads(struct bfs_conn *c);

const char *bfs_conn_peer(const struct bfs_conn *c); /* "1.2.3.4:5678", "[::1]:5678" */
void *bfs_conn_arg(const struct bfs_conn *c);
struct bfs_loop *bfs_conn_loop(const struct bfs_conn *c);
size_t bfs_conn_queued_bytes(struct bfs_conn *c); /* written by nobody yet */

/* ---- listener (tcp.c) ---- */

struct bfs_listener;

/* A new connection: fd is non-blocking, close-on-exec, and now the
 * callee's (typically handed to bfs_conn_new). Runs on the loop thread. */
typedef void (*bfs_accept_fn)(struct bfs_listener *l, int fd, const char *peer, void *arg);

/* Listens on host:port. host NULL, "" or "*" means every address; port 0
 * picks a free port (see bfs_listener_port). 0 or -errno (-EADDRINUSE,
 * -EHOSTUNREACH when host does not resolve, ...). Accepting starts at once. */
int bfs_listener_new(struct bfs_loop *loop, const char *host, uint16_t port, bfs_accept_fn fn,
                     void *arg, struct bfs_listener **out);
uint16_t bfs_listener_port(const struct bfs_listener *l);
/* Stops accepting and frees; once it returns fn is not called again. May
 * be called from any thread, including from inside fn; from another thread
 * it waits for a running fn, so do not hold a lock that fn takes. */
void bfs_listener_free(struct bfs_listener *l);

/* ---- outgoing connect (tcp.c) ---- */

struct bfs_connect;

/* Result of a connect: rc >= 0 is the connected socket (non-blocking,
 * now the callee's); rc < 0 is -errno (-ETIMEDOUT, -ECONNREFUSED, ...). */
typedef void (*bfs_connect_fn)(int rc, void *arg);

/*
 * Connects to host:port, trying each address host resolves to in turn,
 * within timeout_ms overall (0: no limit). Name resolution runs inside
 * this call (getaddrinfo), so loop-thread callers should pass numeric
 * addresses. Returns 0 and then calls fn exactly once on the loop thread
 * (never inside this call), or returns -errno and never calls fn.
 * *out (may be NULL) is a handle valid until fn is called.
 */
int bfs_tcp_connect(struct bfs_loop *loop, const char *host, uint16_t port, uint64_t timeout_ms,
                    bfs_connect_fn fn, void *arg, struct bfs_connect **out);
/* Abandons a pending connect; fn will not be called. Loop thread only
 * (use bfs_loop_post from elsewhere), and only before fn has run. */
void bfs_connect_cancel(struct bfs_connect *c);

/* "1.2.3.4:5678" / "[::1]:5678" for a socket address, into buf. */
struct sockaddr;
const char *bfs_sockaddr_fmt(const struct sockaddr *sa, char *buf, size_t size);

#endif
