/*
 * pool.h — brickfsd as a member of a pool (docs/design/pool.md): the local
 * store that holds the node's identity, the pool store (etcd) when there is
 * one, the bootstrap and import of a local store into an empty etcd, the
 * node's liveness key, and the peer operations.
 *
 * Lifetime: bfs_pool_open() at startup (before the supervisor), which sets
 * m->store (the pool store, or the local store without a pool) and
 * m->node_uuid; bfs_pool_close() at shutdown closes both stores.
 */
#ifndef BFS_MGMT_POOL_H
#define BFS_MGMT_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "mgmt/mgmt.h"

struct bfs_pool_cfg {
    const char *store;     /* --store: NULL (remembered or local), "local", "etcd:..." */
    const char *name;      /* --node-name: NULL = host name */
    const char *advertise; /* --advertise HOST:PORT: NULL = --listen */
};

int bfs_pool_open(struct bfs_mgmt *m, const struct bfs_pool_cfg *cfg, char *err, size_t errlen);
void bfs_pool_close(struct bfs_mgmt *m);
/* True when the pool store is etcd (several nodes possible). */
bool bfs_pool_enabled(const struct bfs_mgmt *m);

/* Brick ownership: the node that must run brick idx of v (its "node"
 * field; empty = this node on a single node, no node in a pool: every
 * path that adds bricks in a pool must set it, see bfs_pool_owners). */
bool bfs_pool_brick_is_mine(const struct bfs_mgmt *m, const struct bfs_volume *v, int idx);
/* True when this node runs some brick of v (always on a single node). */
bool bfs_pool_owns_bricks(const struct bfs_mgmt *m, const struct bfs_volume *v);
/* HOST of a brick spec -> owner node UUID and the address host the brick
 * listens on, against a snapshot of the members (one read of the nodes for
 * all the bricks of a command; no members without a pool). 0, or -ENOENT
 * when HOST names no member (then the brick must be local: bricks.c
 * checks that). */
struct bfs_pool_nodes;
int bfs_pool_nodes_get(struct bfs_mgmt *m, struct bfs_pool_nodes **out);
int bfs_pool_resolve_in(const struct bfs_pool_nodes *ns, const char *host, char uuid[40],
                        char *addr, size_t addrlen);
void bfs_pool_nodes_free(struct bfs_pool_nodes *ns);

/* ---- pool-sync.c: each node acting on the shared store ---- */
/* Starts the thread that watches volumes/ and starts or stops this node's
 * bricks to match, and publishes their state (bricks/VOL/BRICK, under the
 * node's lease). No-op without a pool. */
int bfs_pool_sync_start(struct bfs_mgmt *m);
void bfs_pool_sync_stop(struct bfs_mgmt *m);
/* Another node's brick as it published it: 0, or -ENOENT (zeros) when
 * its node publishes nothing for it (down, or cut off from etcd). */
int bfs_pool_brick_state(struct bfs_mgmt *m, const struct bfs_volume *v, int idx,
                         struct bfs_brick_state *out);
/* Waits until every brick of volume name is online (want true) or not
 * running (false), whatever its node; fills e naming those that are not. */
int bfs_pool_wait_bricks(struct bfs_mgmt *m, const char *name, bool want, int timeout_ms,
                         struct bfs_err *e);
/* Brick specs of a create request -> specs with each member's address and
 * the owner's UUID (a host naming no member is this node's). The arrays are
 * malloc'd (free with bfs_pool_owners_free). */
int bfs_pool_owners(struct bfs_mgmt *m, const char **bricks, int n, char ***specs,
                    char ***nodes, struct bfs_err *e);
void bfs_pool_owners_free(char **specs, char **nodes, int n);

/* True when host is the address host of a member of the pool (bricks.c:
 * such a brick belongs to that node). False without a pool. */
bool bfs_pool_known_host(const char *host);

/* REST operations (docs/API.md, "Pool"). */
int bfs_op_node(struct bfs_mgmt *m, struct json_object **out, struct bfs_err *e);
int bfs_op_pool_list(struct bfs_mgmt *m, bool peers_only, struct json_object **out,
                     struct bfs_err *e);
int bfs_op_peer_probe(struct bfs_mgmt *m, const char *host, struct json_object **out,
                      struct bfs_err *e);
int bfs_op_peer_detach(struct bfs_mgmt *m, const char *host, bool force,
                       struct json_object **out, struct bfs_err *e);

/* A failed store call as an error for people: 503 with the reason when
 * etcd is unreachable, else 500 naming what. Returns -1. */
int bfs_pool_store_fail(struct bfs_err *e, int rc, const char *what);

#endif
