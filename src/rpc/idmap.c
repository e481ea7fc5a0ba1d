/*
 * idmap.c — intrusive u64 -> node hash map (idmap.h). Chained buckets that
 * double when the load passes 1; never shrinks (tables of one connection
 * die with it).
 */
#include "rpc/idmap.h"

#include <errno.h>
#include <stdlib.h>

#define IDMAP_MIN_BUCKETS 64

static size_t slot(const struct bfs_idmap *m, uint64_t id)
{
    uint64_t h = id * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ (h >> 32)) & (m->nbuckets - 1);
}

static int grow(struct bfs_idmap *m)
{
    size_t nb = m->nbuckets ? m->nbuckets * 2 : IDMAP_MIN_BUCKETS;
    struct bfs_idmap_node **b = calloc(nb, sizeof(*b));
    if (!b)
        return -ENOMEM;
    struct bfs_idmap old = *m;
    m->buckets = b;
    m->nbuckets = nb;
    for (size_t i = 0; i < old.nbuckets; i++) {
        struct bfs_idmap_node *n = old.buckets[i], *next;
        for (; n; n = next) {
            next = n->next;
            size_t s = slot(m, n->id);
            n->next = m->buckets[s];
            m->buckets[s] = n;
        }
    }
    free(old.buckets);
    return 0;
}

void bfs_idmap_destroy(struct bfs_idmap *m)
{
    free(m->buckets);
    m->buckets = NULL;
    m->nbuckets = m->count = 0;
}

struct bfs_idmap_node *bfs_idmap_get(const struct bfs_idmap *m, uint64_t id)
{
    if (!m->nbuckets)
        return NULL;
    for (struct bfs_idmap_node *n = m->buckets[slot(m, id)]; n; n = n->next)
        if (n->id == id)
            return n;
    return NULL;
}

int bfs_idmap_put(struct bfs_idmap *m, struct bfs_idmap_node *n)
{
    if (bfs_idmap_get(m, n->id))
        return -EEXIST;
    if (m->count >= m->nbuckets && grow(m) < 0 && !m->nbuckets)
        return -ENOMEM; /* a failed grow of a non-empty table only costs speed */
    size_t s = slot(m, n->id);
    n->next = m->buckets[s];
    m->buckets[s] = n;
    m->count++;
    return 0;
}

struct bfs_idmap_node *bfs_idmap_del(struct bfs_idmap *m, uint64_t id)
{
    if (!m->nbuckets)
        return NULL;
    for (struct bfs_idmap_node **pp = &m->buckets[slot(m, id)]; *pp; pp = &(*pp)->next) {
        struct bfs_idmap_node *n = *pp;
        if (n->id == id) {
            *pp = n->next;
            n->next = NULL;
            m->count--;
            return n;
        }
    }
    return NULL;
}

struct bfs_idmap_node *bfs_idmap_take_all(struct bfs_idmap *m)
{
    struct bfs_idmap_node *all = NULL;
    for (size_t i = 0; i < m->nbuckets; i++) {
        struct bfs_idmap_node *n = m->buckets[i], *next;
        for (; n; n = next) {
            next = n->next;
            n->next = all;
            all = n;
        }
        m->buckets[i] = NULL;
    }
    m->count = 0;
    return all;
}

void bfs_idmap_foreach(const struct bfs_idmap *m, void (*fn)(struct bfs_idmap_node *n, void *arg),
                       void *arg)
{
    for (size_t i = 0; i < m->nbuckets; i++)
        for (struct bfs_idmap_node *n = m->buckets[i]; n; n = n->next)
            fn(n, arg);
}
