/*
 * index-known.c — what features/index knows of an inode's watched counters
 * without reading them (index.h).
 *
 * Why: the reply of a post-op carries only the keys it changed (replicate's
 * `dirty -= 1`), so deciding that every watched counter of the inode is
 * zero takes a read of all its xattrs. Once such a full read has been made,
 * every later change to a watched key comes through the index (xattrop,
 * one call at a time per GFID) with its new value in the reply, so the set
 * of non-zero watched keys can be kept exact in memory and the next
 * post-ops decide from it.
 *
 * The set is forgotten when a call fails (keys may have been applied in
 * part), when the inode is gone, when it has more than IX_KNOWN_KEYS
 * non-zero keys, and all sets are forgotten when the table holds
 * IX_KNOWN_MAX inodes (the next post-op of each simply reads again). A
 * brick restart starts empty. What the index cannot see: a watched xattr
 * changed on the brick by hand — a purge (which always reads) corrects it.
 *
 * Lifetimes: the table from init to fini; an entry from a full read to its
 * forgetting. One mutex guards the table (held for a lookup or an update).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"

#define IX_KNOWN_BUCKETS 4096
#define IX_KNOWN_MAX 65536
#define IX_KNOWN_KEYS 8

struct ix_known {
    struct ix_known *next;
    struct bfs_gfid gfid;
    int n;
    char *keys[IX_KNOWN_KEYS];   /* the non-zero watched keys */
};

struct ix_known_table {
    pthread_mutex_t lock;
    struct ix_known *b[IX_KNOWN_BUCKETS];
    size_t count;
};

static unsigned hash(const struct bfs_gfid *g)
{
    unsigned h = 0;
    for (int i = 0; i < 16; i++)
        h = h * 31 + g->b[i];
    return h % IX_KNOWN_BUCKETS;
}

static void known_free(struct ix_known *k)
{
    for (int i = 0; i < k->n; i++)
        free(k->keys[i]);
    free(k);
}

static void clear_all(struct ix_known_table *t)
{
    for (int i = 0; i < IX_KNOWN_BUCKETS; i++)
        while (t->b[i]) {
            struct ix_known *k = t->b[i];
            t->b[i] = k->next;
            known_free(k);
        }
    t->count = 0;
}

int ix_known_init(struct ix_priv *p)
{
    struct ix_known_table *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    pthread_mutex_init(&t->lock, NULL);
    p->known = t;
    return 0;
}

void ix_known_fini(struct ix_priv *p)
{
    struct ix_known_table *t = p->known;
    if (!t)
        return;
    clear_all(t);
    pthread_mutex_destroy(&t->lock);
    free(t);
    p->known = NULL;
}

/* Unlinks and returns g's entry (NULL if none). Lock held. */
static struct ix_known *take(struct ix_known_table *t, const struct bfs_gfid *g)
{
    struct ix_known **pp = &t->b[hash(g)], *k;
    while ((k = *pp) && !bfs_gfid_eq(&k->gfid, g))
        pp = &k->next;
    if (k) {
        *pp = k->next;
        t->count--;
    }
    return k;
}

static void put(struct ix_known_table *t, struct ix_known *k)
{
    if (t->count >= IX_KNOWN_MAX)
        clear_all(t);
    unsigned h = hash(&k->gfid);
    k->next = t->b[h];
    t->b[h] = k;
    t->count++;
}

static bool nonzero(const void *val, size_t len)
{
    const uint8_t *b = val;
    for (size_t i = 0; i < len; i++)
        if (b[i])
            return true;
    return false;
}

/* Sets key's state in k. false: k cannot hold it (too many keys, ENOMEM). */
static bool update(struct ix_known *k, const char *key, bool nz)
{
    int i = 0;
    while (i < k->n && strcmp(k->keys[i], key) != 0)
        i++;
    if (i < k->n && !nz) {
        free(k->keys[i]);
        k->keys[i] = k->keys[--k->n];
    } else if (i == k->n && nz) {
        if (k->n == IX_KNOWN_KEYS || !(k->keys[k->n] = strdup(key)))
            return false;
        k->n++;
    }
    return true;
}

struct walk {
    const struct ix_priv *p;
    struct ix_known *k;
    bool ok;
};

static int walk_one(const char *key, enum bfs_val_type type, const void *val, size_t len,
                    void *arg)
{
    (void)type;
    struct walk *w = arg;
    if (w->ok && ix_watched(w->p, key))
        w->ok = update(w->k, key, nonzero(val, len));
    return 0;
}

void ix_known_set(struct ix_priv *p, const struct bfs_gfid *g, const struct bfs_dict *all)
{
    struct ix_known_table *t = p->known;
    struct ix_known *k = calloc(1, sizeof(*k));
    if (k) {
        k->gfid = *g;
        struct walk w = {.p = p, .k = k, .ok = true};
        if (all)
            (void)bfs_dict_foreach(all, walk_one, &w);
        if (!w.ok) {
            known_free(k);
            k = NULL;
        }
    }
    pthread_mutex_lock(&t->lock);
    struct ix_known *old = take(t, g);
    if (k)
        put(t, k);
    pthread_mutex_unlock(&t->lock);
    if (old)
        known_free(old);
}

void ix_known_forget(struct ix_priv *p, const struct bfs_gfid *g)
{
    struct ix_known_table *t = p->known;
    pthread_mutex_lock(&t->lock);
    struct ix_known *old = take(t, g);
    pthread_mutex_unlock(&t->lock);
    if (old)
        known_free(old);
}

int ix_known_apply(struct ix_priv *p, const struct bfs_gfid *g, const struct bfs_dict *vals)
{
    struct ix_known_table *t = p->known;
    pthread_mutex_lock(&t->lock);
    struct ix_known *k = take(t, g);
    int rc = -1;
    if (k) {
        struct walk w = {.p = p, .k = k, .ok = true};
        if (vals)
            (void)bfs_dict_foreach(vals, walk_one, &w);
        if (w.ok) {
            rc = k->n > 0;
            put(t, k);
            k = NULL;
        }
    }
    pthread_mutex_unlock(&t->lock);
    if (k)
        known_free(k); /* it could not follow: unknown from now on */
    return rc;
}
