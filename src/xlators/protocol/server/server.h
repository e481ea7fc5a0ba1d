/*
 * server.h — private state of protocol/server, the top of a brick graph.
 *
 * Objects and their lives:
 *   struct srv_priv   one per translator instance (xl->private), from init
 *                     to fini. Owns the listener and the list of connections.
 *   struct srv_conn   one per accepted TCP connection. Refcounted: one
 *                     reference for "the socket is open" (dropped by
 *                     on_close) and one per request in flight. It stays in
 *                     priv->conns until the last reference goes, so a
 *                     shutdown can wait for every request to be answered.
 *                     Its address is the stack->client value of its calls.
 *   struct srv_fd     an open fd in a connection's table, under the id the
 *                     client chose; holds one fd reference.
 *   struct srv_req    one request in flight (server-fop.c).
 *
 * Threads: frames arrive and are decoded and wound on the event-loop
 * thread; answers come back on any thread (posix answers from its
 * workers) and are encoded and sent there. priv->lock guards the list of
 * connections and the auth lists; sc->lock guards a connection's fd table
 * and counters. Lock order: priv->lock before sc->lock.
 */
#ifndef BFS_PROTOCOL_SERVER_H
#define BFS_PROTOCOL_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/xlator.h"
#include "rpc/conn.h"
#include "rpc/idmap.h"

/* Caps that protect the brick from one client. */
#define SRV_MAX_FDS_PER_CONN (1u << 20)

struct srv_conn;

struct srv_priv {
    struct bfs_xl *xl;
    struct bfs_loop *loop;
    struct bfs_listener *listener;
    uint16_t port;
    const char *listen_addr;  /* option value, owned by xl->options */
    char *port_file;          /* written by us, removed at shutdown */
    int64_t max_conns;
    uint64_t hs_timeout_ms;
    int ka_time, ka_interval, ka_count, user_timeout_ms; /* dead clients, see srv_accept */

    pthread_mutex_t lock;
    pthread_cond_t drained;   /* a connection left priv->conns */
    struct srv_conn *conns;   /* every connection not yet freed */
    int nconns;
    char *auth_allow;         /* NULL = nobody (never: the default is "*") */
    char *auth_reject;        /* NULL = nobody rejected */
    bool stopped;             /* shutdown ran: accept nothing more */
    uint64_t accepted, refused;
};

struct srv_conn {
    struct srv_priv *priv;
    struct bfs_conn *conn;
    struct srv_conn *prev, *next; /* priv->conns, under priv->lock */
    char peer[64];
    char ip[64];                  /* peer address without the port */
    atomic_int refs;

    pthread_mutex_t lock;
    struct bfs_idmap fds;         /* id -> struct srv_fd */
    bool handshaken;
    bool contention;              /* takes lock contention upcalls (handshake xdata) */
    bool no_inval;                /* asked for no invalidations (handshake xdata) */
    bool closed;                  /* socket gone: no new fds */
    char *uuid, *client_name;     /* from the handshake */
    uint64_t inflight, requests;
    uint64_t connected_ms;

    struct bfs_timer *hs_timer;   /* loop thread only */
};

struct srv_fd {
    struct bfs_idmap_node node;   /* node.id: the client's fd id */
    struct bfs_fd *fd;
};

/* server-conn.c */
void srv_accept(struct bfs_listener *l, int fd, const char *peer, void *arg);
struct srv_conn *srv_conn_ref(struct srv_conn *sc);
void srv_conn_unref(struct srv_conn *sc);
/* Protocol violation: log with the peer and close the connection. */
void srv_conn_fail(struct srv_conn *sc, int reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sends a REPLY (body may be NULL; a malloc'd body is taken). */
void srv_send_reply(struct srv_conn *sc, uint64_t id, uint32_t proc, int rc, void *body,
                    size_t len);
/* The fd with this id, ref'd, or NULL. */
struct bfs_fd *srv_fd_get(struct srv_conn *sc, uint64_t id);
/* Adds fd (ref taken) under id: 0, -EBADF (id in use), -ENOTCONN, -EMFILE, -ENOMEM. */
int srv_fd_insert(struct srv_conn *sc, uint64_t id, struct bfs_fd *fd);
/* Closes every connection and waits until all are gone (not on the loop thread). */
void srv_close_all(struct srv_priv *priv);
/* Sends an upcall to every handshaken client. */
/* An invalidation to every handshaken client but up->except and those that
 * asked for none; a lock contention notice to up->to only, if it asked for
 * them. */
void srv_broadcast_upcall(struct srv_priv *priv, const struct bfs_upcall *up);

/* server-fop.c: a CALL whose proc is a fop; takes body. */
void srv_handle_fop(struct srv_conn *sc, const struct bfs_wire_hdr *h, void *body, size_t len);

/* server-names.c: 0, or -EINVAL/-ENAMETOOLONG for a name in a request. */
int srv_check_names(int fop, const void *req);
/* server-names.c: whether a request may keep xdata "brickfs-internal": only
 * a root caller's get/set/removexattr (path or fd) naming nothing but
 * trusted.brickfs.dht.* keys (cluster/distribute's link files, which it
 * keeps from the client side). Everything else loses the key. */
bool srv_internal_allowed(int fop, const void *req, const struct bfs_stack *st);

/* server-auth.c */
/* "1.2.3.4:5678" / "[::1]:5678" -> "1.2.3.4" / "::1" (IPv4-mapped IPv6 as IPv4). */
void srv_peer_ip(const char *peer, char *ip, size_t size);
/* 0 when ip may connect under allow/reject (reject wins), else -EACCES. */
int srv_auth_check(const char *allow, const char *reject, const char *ip);

/* server-dump.c */
char *srv_dump(struct bfs_xl *xl);

#endif
