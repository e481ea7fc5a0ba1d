/*
 * fuse-node.c — FUSE nodeids: the bridge's own inode objects, which outlive
 * graph switches (docs/design/graph-switch.md, "Nodeids across
 * generations").
 *
 * A node is what the kernel names with a nodeid: a GFID, its file type and
 * the kernel's lookup count. The nodeid is the node's address; FUSE_ROOT_ID
 * is the root node, which lives as long as the table. Each node holds one
 * reference to the inode of its GFID in the active generation's inode
 * table, so that translators' per-inode context lives as long as the
 * kernel knows the file.
 *
 * Life of a node: made by the first reply that hands the kernel its GFID
 * (bfs_fuse_node_lookup), freed when the kernel's count drops to zero
 * (forget), or with the table at unmount.
 *
 * Locking: nodes->lock guards the hash, every node's count and inode, and
 * which generation is active as far as nodes go (fu->active is written only
 * by bfs_fuse_nodes_switch, under this lock and fu->lock). Inode references
 * of nodes are dropped under it too: a switch therefore never retires a
 * generation while a node still points into it. Lock order: nodes->lock,
 * then fu->lock or an inode table's locks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fuse/fuse-bridge.h"

#define NODE_BUCKETS_MIN 1024

struct bfs_fuse_node {
    struct bfs_gfid gfid;
    uint32_t type;
    uint64_t nlookup;              /* the kernel's count */
    struct bfs_fuse_graph *gr;     /* generation of inode */
    struct bfs_inode *inode;       /* ref'd */
    struct bfs_fuse_node *hnext;
    /* A directory's attributes as this mount's last entry operation in it
     * left them (bfs_fuse_node_dir_attr_put); NULL when none is kept. */
    struct bfs_iatt *dattr;
    uint64_t dattr_ns;             /* when it arrived (CLOCK_MONOTONIC) */
};

struct bfs_fuse_nodes {
    pthread_mutex_t lock;
    struct bfs_fuse_node **buckets;
    size_t nbuckets, count;
    struct bfs_fuse_node root;
};

static size_t bucket_of(const struct bfs_fuse_nodes *t, const struct bfs_gfid *g)
{
    return (size_t)(bfs_gfid_to_ino(g) * 0x9e3779b97f4a7c15ull >> 17) % t->nbuckets;
}

static struct bfs_fuse_node *node_of(struct bfs_fuse *fu, fuse_ino_t ino)
{
    return ino == FUSE_ROOT_ID ? &fu->nodes->root : (struct bfs_fuse_node *)(uintptr_t)ino;
}

fuse_ino_t bfs_fuse_node_ino(struct bfs_fuse *fu, const struct bfs_fuse_node *n)
{
    return n == &fu->nodes->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)n;
}

/* The inode of n's GFID in gr, ref'd (lock held). */
static struct bfs_inode *inode_in(const struct bfs_fuse_node *n, struct bfs_fuse_graph *gr)
{
    if (bfs_gfid_is_root(&n->gfid))
        return bfs_itable_root(gr->g->itable);
    return bfs_inode_get(gr->g->itable, &n->gfid, n->type);
}

int bfs_fuse_nodes_new(struct bfs_fuse *fu, struct bfs_fuse_graph *gr)
{
    struct bfs_fuse_nodes *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->nbuckets = NODE_BUCKETS_MIN;
    t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
    if (!t->buckets) {
        free(t);
        return -ENOMEM;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->root.gfid = bfs_gfid_root;
    t->root.type = S_IFDIR;
    t->root.nlookup = 1; /* never forgotten */
    t->root.gr = gr;
    t->root.inode = bfs_itable_root(gr->g->itable);
    fu->nodes = t;
    pthread_mutex_lock(&fu->lock);
    fu->active = gr;
    pthread_mutex_unlock(&fu->lock);
    return 0;
}

void bfs_fuse_nodes_free(struct bfs_fuse *fu)
{
    struct bfs_fuse_nodes *t = fu->nodes;
    if (!t)
        return;
    for (size_t b = 0; b < t->nbuckets; b++) {
        while (t->buckets[b]) {
            struct bfs_fuse_node *n = t->buckets[b];
            t->buckets[b] = n->hnext;
            bfs_inode_unref(n->inode);
            free(n->dattr);
            free(n);
        }
    }
    if (t->root.inode)
        bfs_inode_unref(t->root.inode);
    free(t->root.dattr);
    free(t->buckets);
    pthread_mutex_destroy(&t->lock);
    free(t);
    fu->nodes = NULL;
}

/* Doubles the hash when it gets crowded (lock held; on ENOMEM it stays). */
static void grow(struct bfs_fuse_nodes *t)
{
    size_t nb = t->nbuckets * 2;
    struct bfs_fuse_node **nbk = calloc(nb, sizeof(*nbk));
    if (!nbk)
        return;
    size_t old = t->nbuckets;
    struct bfs_fuse_node **obk = t->buckets;
    t->buckets = nbk;
    t->nbuckets = nb;
    for (size_t b = 0; b < old; b++) {
        while (obk[b]) {
            struct bfs_fuse_node *n = obk[b];
            obk[b] = n->hnext;
            size_t k = bucket_of(t, &n->gfid);
            n->hnext = nbk[k];
            nbk[k] = n;
        }
    }
    free(obk);
}

static struct bfs_fuse_node *find(struct bfs_fuse_nodes *t, const struct bfs_gfid *g)
{
    if (bfs_gfid_is_root(g))
        return &t->root;
    for (struct bfs_fuse_node *n = t->buckets[bucket_of(t, g)]; n; n = n->hnext)
        if (bfs_gfid_eq(&n->gfid, g))
            return n;
    return NULL;
}

struct bfs_fuse_node *bfs_fuse_node_lookup(struct bfs_fuse *fu, const struct bfs_gfid *g,
                                           uint32_t type)
{
    struct bfs_fuse_nodes *t = fu->nodes;
    pthread_mutex_lock(&t->lock);
    struct bfs_fuse_node *n = find(t, g);
    if (!n) {
        n = calloc(1, sizeof(*n));
        if (n) {
            n->gfid = *g;
            n->type = type & S_IFMT;
            n->gr = fu->active; /* stable under t->lock */
            n->inode = inode_in(n, n->gr);
            if (!n->inode) {
                free(n);
                n = NULL;
            }
        }
        if (n) {
            if (t->count + 1 > t->nbuckets * 2)
                grow(t);
            size_t k = bucket_of(t, g);
            n->hnext = t->buckets[k];
            t->buckets[k] = n;
            t->count++;
        }
    } else if (!n->type) {
        n->type = type & S_IFMT;
    }
    if (n)
        n->nlookup++;
    pthread_mutex_unlock(&t->lock);
    if (!n)
        errno = ENOMEM;
    return n;
}

void bfs_fuse_node_unlookup(struct bfs_fuse *fu, struct bfs_fuse_node *n, uint64_t count)
{
    struct bfs_fuse_nodes *t = fu->nodes;
    if (n == &t->root)
        return;
    pthread_mutex_lock(&t->lock);
    n->nlookup = count >= n->nlookup ? 0 : n->nlookup - count;
    if (n->nlookup == 0) {
        struct bfs_fuse_node **pp = &t->buckets[bucket_of(t, &n->gfid)];
        while (*pp && *pp != n)
            pp = &(*pp)->hnext;
        if (*pp)
            *pp = n->hnext;
        t->count--;
        /* under the lock: a switch must not retire n->gr before this */
        bfs_inode_unref(n->inode);
        free(n->dattr);
        free(n);
    }
    pthread_mutex_unlock(&t->lock);
}

void bfs_fuse_node_forget(struct bfs_fuse *fu, fuse_ino_t ino, uint64_t count)
{
    bfs_fuse_node_unlookup(fu, node_of(fu, ino), count);
}

struct bfs_inode *bfs_fuse_node_inode(struct bfs_fuse *fu, fuse_ino_t ino,
                                      struct bfs_fuse_graph *gr)
{
    struct bfs_fuse_nodes *t = fu->nodes;
    struct bfs_fuse_node *n = node_of(fu, ino);
    pthread_mutex_lock(&t->lock);
    struct bfs_inode *i = n->gr == gr ? bfs_inode_ref(n->inode) : inode_in(n, gr);
    pthread_mutex_unlock(&t->lock);
    return i;
}

const struct bfs_gfid *bfs_fuse_node_gfid(struct bfs_fuse *fu, fuse_ino_t ino)
{
    return &node_of(fu, ino)->gfid; /* never changes */
}

fuse_ino_t bfs_fuse_node_find(struct bfs_fuse *fu, const struct bfs_gfid *g)
{
    struct bfs_fuse_nodes *t = fu->nodes;
    pthread_mutex_lock(&t->lock);
    struct bfs_fuse_node *n = find(t, g);
    fuse_ino_t ino = n ? bfs_fuse_node_ino(fu, n) : 0;
    pthread_mutex_unlock(&t->lock);
    return ino;
}

uint64_t bfs_fuse_nodes_count(struct bfs_fuse *fu)
{
    pthread_mutex_lock(&fu->nodes->lock);
    uint64_t n = fu->nodes->count;
    pthread_mutex_unlock(&fu->nodes->lock);
    return n;
}

/* ---- directory attributes from our own entry operations ---- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool ctime_before(const struct bfs_iatt *a, const struct bfs_iatt *b)
{
    return a->ctime_sec < b->ctime_sec ||
           (a->ctime_sec == b->ctime_sec && a->ctime_nsec < b->ctime_nsec);
}

void bfs_fuse_node_dir_attr_put(struct bfs_fuse *fu, fuse_ino_t ino, const struct bfs_iatt *post)
{
    double secs = fu->opts->attr_timeout;
    struct bfs_fuse_nodes *t = fu->nodes;
    struct bfs_fuse_node *n = node_of(fu, ino);
    if (secs <= 0 || (post->mode & S_IFMT) != S_IFDIR)
        return;
    pthread_mutex_lock(&t->lock);
    /* A reply without the parent's attributes (a translator that does not
     * fill them) or about another directory is no use. */
    if (bfs_gfid_eq(&post->gfid, &n->gfid)) {
        if (!n->dattr)
            n->dattr = malloc(sizeof(*n->dattr));
        /* Replies of concurrent operations may arrive out of order: keep
         * the latest state the brick reported. */
        else if (ctime_before(post, n->dattr))
            post = NULL;
        if (n->dattr && post) {
            *n->dattr = *post;
            n->dattr_ns = now_ns();
        }
    }
    pthread_mutex_unlock(&t->lock);
}

bool bfs_fuse_node_dir_attr_take(struct bfs_fuse *fu, fuse_ino_t ino, struct bfs_iatt *out)
{
    struct bfs_fuse_nodes *t = fu->nodes;
    struct bfs_fuse_node *n = node_of(fu, ino);
    uint64_t max_age = (uint64_t)(fu->opts->attr_timeout * 1e9);
    bool ok = false;
    pthread_mutex_lock(&t->lock);
    if (n->dattr) {
        ok = now_ns() - n->dattr_ns < max_age;
        if (ok)
            *out = *n->dattr;
        free(n->dattr);
        n->dattr = NULL;
    }
    pthread_mutex_unlock(&t->lock);
    return ok;
}

void bfs_fuse_node_dir_attr_drop(struct bfs_fuse *fu, fuse_ino_t ino)
{
    struct bfs_fuse_nodes *t = fu->nodes;
    struct bfs_fuse_node *n = node_of(fu, ino);
    pthread_mutex_lock(&t->lock);
    free(n->dattr);
    n->dattr = NULL;
    pthread_mutex_unlock(&t->lock);
}

void bfs_fuse_node_dir_attr_drop_gfid(struct bfs_fuse *fu, const struct bfs_gfid *g)
{
    struct bfs_fuse_nodes *t = fu->nodes;
    pthread_mutex_lock(&t->lock);
    struct bfs_fuse_node *n = find(t, g);
    if (n) {
        free(n->dattr);
        n->dattr = NULL;
    }
    pthread_mutex_unlock(&t->lock);
}

/* Moves n to gr (lock held). On ENOMEM n stays where it is and the switch
 * reports failure; the caller retries later. */
static int move(struct bfs_fuse_node *n, struct bfs_fuse_graph *gr)
{
    if (n->gr == gr)
        return 0;
    struct bfs_inode *i = inode_in(n, gr);
    if (!i)
        return -ENOMEM;
    bfs_inode_unref(n->inode);
    n->inode = i;
    n->gr = gr;
    return 0;
}

int bfs_fuse_nodes_switch(struct bfs_fuse *fu, struct bfs_fuse_graph *gr)
{
    struct bfs_fuse_nodes *t = fu->nodes;
    int rc = 0;
    pthread_mutex_lock(&t->lock);
    pthread_mutex_lock(&fu->lock);
    fu->active = gr;
    pthread_mutex_unlock(&fu->lock);
    rc = move(&t->root, gr);
    for (size_t b = 0; b < t->nbuckets && rc == 0; b++)
        for (struct bfs_fuse_node *n = t->buckets[b]; n && rc == 0; n = n->hnext)
            rc = move(n, gr);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

bool bfs_fuse_nodes_in(struct bfs_fuse *fu, const struct bfs_fuse_graph *gr)
{
    struct bfs_fuse_nodes *t = fu->nodes;
    bool found = false;
    pthread_mutex_lock(&t->lock);
    found = t->root.gr == gr;
    for (size_t b = 0; b < t->nbuckets && !found; b++)
        for (struct bfs_fuse_node *n = t->buckets[b]; n && !found; n = n->hnext)
            found = n->gr == gr;
    pthread_mutex_unlock(&t->lock);
    return found;
}
