/*
 * replicate-memory.c — what replicate knew about a file's copies, kept
 * after the mount forgot the inode (option cluster.inode-memory).
 *
 * An inode context (replicate-inode.c) dies with its inode: when the
 * kernel forgets a file (its dentry cache was dropped, or it aged out),
 * the next access starts from nothing. With performance/md-cache above,
 * that access often never reaches replicate's lookup: md-cache answers
 * the kernel's LOOKUP from its own tables (keyed by GFID, not tied to the
 * inode's life), and the open that follows found an empty context — it
 * could not ask one copy for the open-prefetch, and the read refreshed
 * (a lookup on every brick) before reading from a brick: three serial
 * round trips per small-file read where a one-brick volume needs one
 * (performance-notes.md, note 28).
 *
 * So a context still fresh when its inode is forgotten is saved here, by
 * GFID: the generation it was filled in, the type, the readable masks and
 * split-brain flags. A context made later for the same GFID starts from
 * it when the generation is still the same (no child went up or down
 * since). The rules of a saved context are those of a live one
 * (replicate.md, "Reads"), with one more: an invalidation from a brick
 * about the inode (features/upcall's BFS_UPCALL_INODE: another client
 * changed it) drops it — so what is kept is never older than what
 * md-cache above may answer from. (A live context is left as it is: its
 * refresh by GFID would fail the reads of an fd whose file another client
 * unlinked or a rebalance moved, which the fd can still serve.)
 *
 * The table is direct-mapped (a GFID has one slot; a newcomer replaces
 * whoever was there), allocated on first save, sized by the option
 * (0: off), guarded by its own mutex. It lives from init (or the first
 * save) to fini; a resize empties it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "replicate.h"

struct afr_mem_slot {
    struct bfs_gfid gfid;
    uint64_t gen;                /* 0: empty */
    uint32_t type;
    uint32_t readable[AFR_NTYPES];
    bool split[AFR_NTYPES];
};

struct afr_mem {
    pthread_mutex_t lock;
    size_t size;                 /* slots wanted (the option) */
    struct afr_mem_slot *slots;  /* NULL until the first save, or size 0 */
    uint64_t saved, seeded, dropped; /* statistics */
};

static size_t slot_of(const struct afr_mem *m, const struct bfs_gfid *g)
{
    uint64_t h;
    memcpy(&h, g->b + 8, sizeof(h)); /* random in a UUID; mixed all the same */
    uint64_t l;
    memcpy(&l, g->b, sizeof(l));
    h ^= l * 0x9e3779b97f4a7c15ull;
    h ^= h >> 31;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (size_t)(h % m->size);
}

int afr_mem_init(struct afr_priv *p, size_t size)
{
    struct afr_mem *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    pthread_mutex_init(&m->lock, NULL);
    m->size = size;
    p->mem = m;
    return 0;
}

void afr_mem_fini(struct afr_priv *p)
{
    struct afr_mem *m = p->mem;
    if (!m)
        return;
    p->mem = NULL;
    pthread_mutex_destroy(&m->lock);
    free(m->slots);
    free(m);
}

void afr_mem_resize(struct afr_priv *p, size_t size)
{
    struct afr_mem *m = p->mem;
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    if (size != m->size) {
        free(m->slots);
        m->slots = NULL;
        m->size = size;
    }
    pthread_mutex_unlock(&m->lock);
}

void afr_mem_save(struct afr_priv *p, const struct bfs_gfid *g, struct afr_inode *c)
{
    struct afr_mem *m = p->mem;
    if (!m || bfs_gfid_is_null(g))
        return;
    struct afr_mem_slot s = {.gfid = *g};
    pthread_mutex_lock(&c->lock);
    s.gen = c->gen;
    s.type = c->type;
    memcpy(s.readable, c->readable, sizeof(s.readable));
    memcpy(s.split, c->split, sizeof(s.split));
    pthread_mutex_unlock(&c->lock);
    if (s.gen == 0 || s.gen != __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE))
        return; /* stale already: nothing worth keeping */
    pthread_mutex_lock(&m->lock);
    if (m->size && !m->slots)
        m->slots = calloc(m->size, sizeof(*m->slots));
    if (m->slots) {
        m->slots[slot_of(m, g)] = s;
        m->saved++;
    }
    pthread_mutex_unlock(&m->lock);
}

bool afr_mem_seed(struct afr_priv *p, const struct bfs_gfid *g, struct afr_inode *c)
{
    struct afr_mem *m = p->mem;
    if (!m || bfs_gfid_is_null(g))
        return false;
    struct afr_mem_slot s = {.gen = 0};
    pthread_mutex_lock(&m->lock);
    if (m->slots) {
        struct afr_mem_slot *e = &m->slots[slot_of(m, g)];
        if (e->gen && bfs_gfid_eq(&e->gfid, g))
            s = *e;
    }
    pthread_mutex_unlock(&m->lock);
    if (s.gen == 0 || s.gen != __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE))
        return false;
    pthread_mutex_lock(&c->lock);
    bool ok = c->gen == 0 && (!c->type || !s.type || c->type == s.type);
    if (ok) {
        c->gen = s.gen;
        if (s.type)
            c->type = s.type;
        memcpy(c->readable, s.readable, sizeof(c->readable));
        memcpy(c->split, s.split, sizeof(c->split));
    }
    pthread_mutex_unlock(&c->lock);
    if (ok) {
        pthread_mutex_lock(&m->lock);
        m->seeded++;
        pthread_mutex_unlock(&m->lock);
    }
    return ok;
}

void afr_mem_invalidate(struct afr_priv *p, const struct bfs_gfid *g)
{
    struct afr_mem *m = p->mem;
    if (!m || bfs_gfid_is_null(g))
        return;
    pthread_mutex_lock(&m->lock);
    if (m->slots) {
        struct afr_mem_slot *e = &m->slots[slot_of(m, g)];
        if (e->gen && bfs_gfid_eq(&e->gfid, g)) {
            memset(e, 0, sizeof(*e));
            m->dropped++;
        }
    }
    pthread_mutex_unlock(&m->lock);
}

void afr_mem_stats(struct afr_priv *p, uint64_t out[3])
{
    struct afr_mem *m = p->mem;
    memset(out, 0, 3 * sizeof(out[0]));
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    out[0] = m->saved;
    out[1] = m->seeded;
    out[2] = m->dropped;
    pthread_mutex_unlock(&m->lock);
}
