/*
 * idmap.h — an intrusive hash map from 64-bit ids to objects, for the
 * tables of the protocol layer: requests in flight by request id (client),
 * open fds by client-chosen fd id (server).
 *
 * The caller embeds a struct bfs_idmap_node in its object and owns the
 * object's memory; the map only links nodes. Not thread-safe: the owner
 * guards it with its own lock. Ids are spread with a multiplicative hash,
 * so sequential ids (the common case) and chosen ids alike distribute.
 */
#ifndef BFS_RPC_IDMAP_H
#define BFS_RPC_IDMAP_H

#include <stddef.h>
#include <stdint.h>

struct bfs_idmap_node {
    uint64_t id;
    struct bfs_idmap_node *next;
};

struct bfs_idmap {
    struct bfs_idmap_node **buckets;
    size_t nbuckets; /* power of two, 0 before the first insert */
    size_t count;
};

#define BFS_IDMAP_INIT {NULL, 0, 0}

/* Frees the bucket array only; nodes still linked are the owner's. */
void bfs_idmap_destroy(struct bfs_idmap *m);
/* Links n under n->id. 0, -EEXIST (id taken; nothing changed) or -ENOMEM. */
int bfs_idmap_put(struct bfs_idmap *m, struct bfs_idmap_node *n);
struct bfs_idmap_node *bfs_idmap_get(const struct bfs_idmap *m, uint64_t id);
/* Unlinks and returns the node of id, or NULL. */
struct bfs_idmap_node *bfs_idmap_del(struct bfs_idmap *m, uint64_t id);
/* Unlinks every node and returns them as a list chained by ->next. */
struct bfs_idmap_node *bfs_idmap_take_all(struct bfs_idmap *m);
/* Calls fn on each node (which fn must not unlink). */
void bfs_idmap_foreach(const struct bfs_idmap *m, void (*fn)(struct bfs_idmap_node *n, void *arg),
                       void *arg);

#endif
