/*
 * mdc-table.c — md-cache's two hash tables: inode records by GFID and
 * entries by (parent GFID, name), chained, one bucket array each, all
 * under mdc_priv.lock (mdc.h). A table that reaches mdc_priv.max records
 * is emptied whole before the next insertion: a miss costs a round trip,
 * while a smarter eviction would cost code that can be wrong.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mdc.h"

static size_t gfid_hash(const struct bfs_gfid *g)
{
    uint64_t h;
    memcpy(&h, g->b + 8, sizeof(h)); /* random bits of a v4 UUID */
    return (size_t)(h ^ (h >> 29));
}

static size_t entry_hash(const struct bfs_gfid *par, const char *name)
{
    uint64_t h = 1469598103934665603ull ^ gfid_hash(par);
    for (const unsigned char *s = (const unsigned char *)name; *s; s++)
        h = (h ^ *s) * 1099511628211ull;
    return (size_t)h;
}

int bfs__mdc_table_init(struct mdc_priv *p)
{
    p->nbuckets = 1024;
    while (p->nbuckets < p->max / 2 && p->nbuckets < (1u << 20))
        p->nbuckets *= 2;
    p->ih = calloc(p->nbuckets, sizeof(*p->ih));
    p->eh = calloc(p->nbuckets, sizeof(*p->eh));
    if (!p->ih || !p->eh) {
        free(p->ih);
        free(p->eh);
        return -ENOMEM;
    }
    return 0;
}

static void flush_inodes(struct mdc_priv *p)
{
    for (size_t i = 0; i < p->nbuckets; i++) {
        for (struct mdc_inode *in = p->ih[i], *nx; in; in = nx) {
            nx = in->next;
            free(in->nname);
            free(in);
        }
        p->ih[i] = NULL;
    }
    p->ninodes = 0;
}

static void flush_entries(struct mdc_priv *p)
{
    for (size_t i = 0; i < p->nbuckets; i++) {
        for (struct mdc_entry *e = p->eh[i], *nx; e; e = nx) {
            nx = e->next;
            free(e->name);
            free(e);
        }
        p->eh[i] = NULL;
    }
    p->nentries = 0;
}

void bfs__mdc_flush(struct mdc_priv *p)
{
    /* Entries hold parents' generations: inode records go with them, or a
     * new record's gen could match an old entry's. */
    flush_entries(p);
    flush_inodes(p);
    p->seq++;
    p->flushes++;
}

void bfs__mdc_table_fini(struct mdc_priv *p)
{
    if (p->ih && p->eh) {
        flush_entries(p);
        flush_inodes(p);
    }
    free(p->ih);
    free(p->eh);
    p->ih = NULL;
    p->eh = NULL;
}

struct mdc_inode *bfs__mdc_inode_get(struct mdc_priv *p, const struct bfs_gfid *g)
{
    for (struct mdc_inode *in = p->ih[gfid_hash(g) & (p->nbuckets - 1)]; in; in = in->next)
        if (bfs_gfid_eq(&in->gfid, g))
            return in;
    return NULL;
}

struct mdc_inode *bfs__mdc_inode_make(struct mdc_priv *p, const struct bfs_gfid *g)
{
    if (bfs_gfid_is_null(g))
        return NULL;
    struct mdc_inode *in = bfs__mdc_inode_get(p, g);
    if (in)
        return in;
    if (p->ninodes >= p->max)
        bfs__mdc_flush(p);
    if (!(in = calloc(1, sizeof(*in))))
        return NULL;
    in->gfid = *g;
    size_t b = gfid_hash(g) & (p->nbuckets - 1);
    in->next = p->ih[b];
    p->ih[b] = in;
    p->ninodes++;
    return in;
}

bool bfs__mdc_attr_valid(const struct mdc_inode *in, uint64_t now)
{
    return in && in->attr_ok && now < in->attr_until;
}

bool bfs__mdc_names_valid(const struct mdc_inode *in, uint64_t now)
{
    return in && (in->attr_ok || in->names_ok) && now < in->attr_until;
}

void bfs__mdc_attr_set(struct mdc_priv *p, const struct bfs_iatt *a, uint64_t until)
{
    struct mdc_inode *in = bfs__mdc_inode_make(p, &a->gfid);
    if (!in)
        return;
    in->attr = *a;
    in->attr_ok = true;
    in->names_ok = false;
    in->attr_until = until;
    in->post_ok = false; /* learned during a post-op: which is later is unknown */
}

void bfs__mdc_attr_drop(struct mdc_priv *p, const struct bfs_gfid *g)
{
    struct mdc_inode *in = bfs__mdc_inode_get(p, g);
    if (!in)
        return;
    in->attr_ok = false;
    in->names_ok = false;
    in->complete = false;
    in->post_ok = false;
    in->gen++; /* every entry learned under it goes too */
}

void bfs__mdc_attr_stale(struct mdc_priv *p, const struct bfs_gfid *g)
{
    struct mdc_inode *in = bfs__mdc_inode_get(p, g);
    if (in) {
        in->names_ok = in->attr_ok || in->names_ok;
        in->attr_ok = false;
        in->post_ok = false;
    }
}

void bfs__mdc_complete_drop(struct mdc_priv *p, const struct bfs_gfid *dir)
{
    struct mdc_inode *in = bfs__mdc_inode_get(p, dir);
    if (in) {
        in->complete = false;
        in->post_ok = false;
    }
}

void bfs__mdc_post_void(struct mdc_priv *p, const struct bfs_gfid *g)
{
    struct mdc_inode *in = bfs__mdc_inode_get(p, g);
    if (in)
        in->post_ok = false;
}

static struct mdc_entry **entry_slot(struct mdc_priv *p, const struct bfs_gfid *par,
                                     const char *name)
{
    struct mdc_entry **pp = &p->eh[entry_hash(par, name) & (p->nbuckets - 1)];
    for (; *pp; pp = &(*pp)->next)
        if (bfs_gfid_eq(&(*pp)->par, par) && strcmp((*pp)->name, name) == 0)
            return pp;
    return pp;
}

struct mdc_entry *bfs__mdc_entry_get(struct mdc_priv *p, const struct bfs_gfid *par,
                                     const char *name)
{
    return *entry_slot(p, par, name);
}

void bfs__mdc_entry_drop(struct mdc_priv *p, const struct bfs_gfid *par, const char *name)
{
    struct mdc_entry **pp = entry_slot(p, par, name), *e = *pp;
    if (!e)
        return;
    *pp = e->next;
    free(e->name);
    free(e);
    p->nentries--;
}

void bfs__mdc_entry_set(struct mdc_priv *p, const struct bfs_gfid *par, const char *name,
                        const struct bfs_gfid *child, uint64_t until, uint32_t uid,
                        uint32_t gid)
{
    struct mdc_inode *pin = bfs__mdc_inode_get(p, par);
    if (!pin || bfs_gfid_is_null(child))
        return; /* an entry is only good under a known parent */
    struct mdc_entry *e = *entry_slot(p, par, name);
    if (!e) {
        if (p->nentries >= p->max) {
            flush_entries(p); /* inode records stay: gens keep counting */
            p->flushes++;
        }
        if (!(e = calloc(1, sizeof(*e))) || !(e->name = strdup(name))) {
            free(e);
            return;
        }
        e->par = *par;
        size_t b = entry_hash(par, name) & (p->nbuckets - 1);
        e->next = p->eh[b];
        p->eh[b] = e;
        p->nentries++;
    }
    e->child = *child;
    struct mdc_inode *cin = bfs__mdc_inode_get(p, child);
    if (cin && (!cin->nname || strcmp(cin->nname, name) != 0 || !bfs_gfid_eq(&cin->npar, par))) {
        char *n = strdup(name);
        if (n) {
            free(cin->nname);
            cin->nname = n;
            cin->npar = *par;
        }
    }
    e->pgen = pin->gen;
    e->until = until;
    e->uid = uid;
    e->gid = gid;
}
