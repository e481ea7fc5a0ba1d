/*
 * dht-op.c — what every distribute call is made of: the op (fan-out driver
 * plus internal frames), winding into a subvolume as the caller or as root,
 * entry locks, hashing against the op's layout, the location cache, small
 * xdata and iatt helpers, and the min-free-disk view.
 *
 * Internal frames. Every op winds from top frames of its own rather than
 * from the caller's frame: `user` carries the caller's identity, `root`
 * uid 0 (link files, heal, internal xattrs), and both carry a lock owner
 * unique to the op, so that features/locks on the bricks tells two
 * concurrent operations of one client apart (stack->lk_owner is the
 * owner). They are freed with the op, after the last child answered.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/event.h"
#include "dht.h"

/* ---- layout references ---- */

struct dht_layout *dht__layout_get(struct dht_priv *priv)
{
    pthread_mutex_lock(&priv->lock);
    struct dht_layout *l = priv->layout;
    atomic_fetch_add(&l->refs, 1);
    pthread_mutex_unlock(&priv->lock);
    return l;
}

void dht__layout_put(struct dht_layout *l)
{
    if (l && atomic_fetch_sub(&l->refs, 1) == 1) {
        dht_table_free(l->cur);
        dht_table_free(l->prev);
        free(l);
    }
}

/* ---- ops ---- */

static struct bfs_frame *top_frame(const struct bfs_stack *like, uint64_t owner, bool root)
{
    struct bfs_stack *st = bfs_stack_new();
    if (!st)
        return NULL;
    if (like && !root) {
        st->uid = like->uid;
        st->gid = like->gid;
        st->ngroups = like->ngroups;
        memcpy(st->groups, like->groups, sizeof(st->groups[0]) * like->ngroups);
    }
    if (like) {
        st->pid = like->pid;
        st->unique = like->unique;
        st->client = like->client;
    }
    st->lk_owner = owner;
    struct bfs_frame *f = bfs_frame_top_new(st, NULL);
    bfs_stack_unref(st);
    return f;
}

static void op_destroy(struct bfs_op *op)
{
    struct dht_op *o = (struct dht_op *)op;
    if (o->cleanup)
        o->cleanup(o);
    bfs_frame_top_free(o->user);
    bfs_frame_top_free(o->root);
    dht__layout_put(o->layout);
    free(o);
}

struct dht_op *dht__op_new(size_t size, struct bfs_frame *frame, struct bfs_xl *xl, int nslots,
                           bfs_op_step_fn step, void (*cleanup)(struct dht_op *))
{
    struct dht_priv *priv = xl->private;
    struct dht_op *o = calloc(1, size);
    if (!o)
        return NULL;
    const struct bfs_stack *like = frame ? frame->stack : NULL;
    uint64_t owner = atomic_fetch_add(&priv->owner_seq, 1);
    o->user = top_frame(like, owner, false);
    o->root = top_frame(like, owner, true);
    if (!o->user || !o->root ||
        bfs_op_init(&o->op, o->user, xl, nslots, step, op_destroy) < 0) {
        bfs_frame_top_free(o->user);
        bfs_frame_top_free(o->root);
        free(o);
        return NULL;
    }
    o->priv = priv;
    o->caller = frame;
    o->layout = dht__layout_get(priv);
    o->cleanup = cleanup;
    return o;
}

void dht__op_start(struct dht_op *o)
{
    bfs_op_run(&o->op);
}

void dht__wind(struct dht_op *o, int slot, int fop, int s, const void *req, bool as_root)
{
    /* bfs_op_wind reads op->frame only while it winds; the driver never
     * runs two steps at once, so switching identities here is safe. */
    o->op.frame = as_root ? o->root : o->user;
    bfs_op_expect(&o->op, 1);
    bfs_op_wind(&o->op, slot, fop, o->priv->xl->children[s], req);
    o->op.frame = o->user;
}

void dht__wind_self(struct dht_op *o, int slot, int fop, const void *req)
{
    o->op.frame = o->user;
    bfs_op_expect(&o->op, 1);
    bfs_op_wind(&o->op, slot, fop, o->priv->xl, req);
}

void dht__info_wind(struct dht_op *o, int slot, const struct bfs_loc *loc, bool named)
{
    struct bfs_lookup_req r;
    dht__info_req(&r, loc, named);
    dht__wind_self(o, slot, BFS_FOP_LOOKUP, &r);
    bfs_dict_unref(r.xdata);
}

int dht__rc(const struct dht_op *o, int slot)
{
    const struct bfs_op_reply *r = &o->op.replies[slot];
    return r->valid ? r->rc : -EIO;
}

const void *dht__rep(const struct dht_op *o, int slot)
{
    const struct bfs_op_reply *r = &o->op.replies[slot];
    return r->valid ? r->rep : NULL;
}

/* ---- entry locks ---- */

static int lock_cmp(const struct dht_lock *a, const struct dht_lock *b)
{
    if (a->subvol != b->subvol)
        return a->subvol < b->subvol ? -1 : 1;
    int c = memcmp(a->pargfid.b, b->pargfid.b, sizeof(a->pargfid.b));
    return c ? c : strcmp(a->name, b->name);
}

void dht__locks_sort(struct dht_op *o)
{
    if (o->nlocks == 2) {
        int c = lock_cmp(&o->locks[0], &o->locks[1]);
        if (c > 0) {
            struct dht_lock t = o->locks[0];
            o->locks[0] = o->locks[1];
            o->locks[1] = t;
        } else if (c == 0) {
            o->nlocks = 1; /* one name twice (rename onto itself) */
        }
    }
    o->nheld = 0;
    o->lock_wound = false;
    o->lock_nb = o->nlocks == 2 ? 1 : 0;
    o->lock_err = 0;
}

static void entrylk_wind(struct dht_op *o, const struct dht_lock *l, uint32_t cmd)
{
    struct bfs_entrylk_req r = {.domain = DHT_LOCK_DOMAIN, .basename = l->name, .cmd = cmd,
                                .type = BFS_ENTRYLK_WRLCK};
    r.loc.gfid = l->pargfid;
    dht__wind(o, o->lock_slot, BFS_FOP_ENTRYLK, l->subvol, &r, false);
}

/* One lock's answer: 0 (held, or no features/locks there: proceed
 * unlocked, as the design allows) or -errno. */
static int lock_answer(struct dht_op *o, struct dht_lock *l, int rc)
{
    if (rc == -ENOSYS) {
        if (!o->priv->warned_nolocks)
            XL_WARN(o->priv->xl, "subvolume %s has no features/locks: namespace "
                    "changes proceed without entry locks", o->priv->xl->children[l->subvol]->name);
        o->priv->warned_nolocks = true;
        return 0;
    }
    if (rc >= 0)
        l->held = true;
    return rc < 0 ? rc : 0;
}

/* Two locks (rename): both asked at once without waiting (LOCK_NB), one
 * round trip instead of two when nobody holds either. Not waiting is what
 * keeps this free of deadlocks: when one is busy (EAGAIN), what was granted
 * is released and the locks are taken one after the other in the fixed
 * order, waiting, as before. */
#define LOCK_ORDERED 2 /* lock_pair: take them the ordered way */

static int lock_pair(struct dht_op *o)
{
    int slot = o->lock_slot;
    if (o->lock_nb == 1) {
        o->lock_nb = 2;
        for (int i = 0; i < 2; i++) {
            o->lock_slot = slot + i;
            entrylk_wind(o, &o->locks[i], BFS_ENTRYLK_LOCK_NB);
        }
        o->lock_slot = slot;
        return DHT_WAIT;
    }
    if (o->lock_nb == 2) {
        int err = 0, busy = 0;
        for (int i = 0; i < 2; i++) {
            int rc = dht__rc(o, slot + i);
            if (rc == -EAGAIN)
                busy++;
            else if ((rc = lock_answer(o, &o->locks[i], rc)) < 0 && !err)
                err = rc;
        }
        if (!busy && !err) {
            o->nheld = 2;
            o->lock_nb = 0;
            return 0;
        }
        o->lock_nb = 3; /* release what was granted, then the ordered way */
        bool any = false;
        for (int i = 0; i < 2; i++) {
            if (!o->locks[i].held)
                continue;
            o->locks[i].held = false;
            o->lock_slot = slot + i;
            entrylk_wind(o, &o->locks[i], BFS_ENTRYLK_UNLOCK);
            any = true;
        }
        o->lock_slot = slot;
        o->lock_err = err;
        if (any)
            return DHT_WAIT;
    }
    o->lock_nb = 0; /* 3: the releases answered */
    return o->lock_err ? o->lock_err : LOCK_ORDERED;
}

int dht__lock_step(struct dht_op *o)
{
    if (o->lock_nb) {
        int rc = lock_pair(o);
        if (rc != LOCK_ORDERED)
            return rc;
    }
    if (o->lock_wound) {
        o->lock_wound = false;
        int rc = lock_answer(o, &o->locks[o->nheld], dht__rc(o, o->lock_slot));
        if (rc < 0)
            return rc;
        o->nheld++;
    }
    if (o->nheld == o->nlocks)
        return 0;
    o->lock_wound = true;
    entrylk_wind(o, &o->locks[o->nheld], BFS_ENTRYLK_LOCK);
    return DHT_WAIT;
}

int dht__unlock_step(struct dht_op *o)
{
    if (o->lock_wound) {
        o->lock_wound = false;
        return 0; /* an unlock that fails leaves nothing we could do */
    }
    bool any = false;
    int slot = o->lock_slot;
    for (int i = 0; i < o->nlocks; i++) {
        if (!o->locks[i].held)
            continue;
        o->locks[i].held = false;
        o->lock_slot = slot + i; /* the op reserves two lock slots */
        entrylk_wind(o, &o->locks[i], BFS_ENTRYLK_UNLOCK);
        any = true;
    }
    o->lock_slot = slot;
    o->nheld = 0;
    if (!any)
        return 0;
    o->lock_wound = true;
    return DHT_WAIT;
}

/* ---- hashing ---- */

int dht__hashed(const struct dht_op *o, const struct bfs_gfid *pargfid, const char *name)
{
    return dht_table_subvol(o->layout->cur, pargfid->b, name);
}

int dht__prev_hashed(const struct dht_op *o, const struct bfs_gfid *pargfid, const char *name)
{
    const struct dht_table *t = o->layout->prev;
    if (!t)
        return -1;
    int s = dht_table_subvol(t, pargfid->b, name);
    return s < o->priv->n ? s : -1;
}

int dht__subvol_by_name(const struct dht_priv *priv, const char *name, size_t len)
{
    for (int i = 0; i < priv->n; i++) {
        const char *c = priv->xl->children[i]->name;
        if (strlen(c) == len && memcmp(c, name, len) == 0)
            return i;
    }
    return -1;
}

/* ---- location cache: direct-mapped, striped locks ---- */

static uint32_t cache_slot(const struct bfs_gfid *g)
{
    uint32_t v;
    memcpy(&v, g->b + 12, sizeof(v)); /* GFIDs are random: any bytes do */
    return v % DHT_CACHE_SIZE;
}

void dht__cache_put(struct dht_priv *priv, const struct bfs_gfid *g, int kind, int subvol)
{
    if (bfs_gfid_is_null(g))
        return;
    uint32_t i = cache_slot(g);
    pthread_mutex_t *lk = &priv->cache_locks[i % DHT_CACHE_LOCKS];
    pthread_mutex_lock(lk);
    priv->cache[i].gfid = *g;
    priv->cache[i].kind = (uint8_t)kind;
    priv->cache[i].subvol = (int16_t)subvol;
    pthread_mutex_unlock(lk);
}

int dht__cache_get(struct dht_priv *priv, const struct bfs_gfid *g, int *subvol)
{
    uint32_t i = cache_slot(g);
    int kind = DHT_KIND_NONE;
    pthread_mutex_t *lk = &priv->cache_locks[i % DHT_CACHE_LOCKS];
    pthread_mutex_lock(lk);
    if (priv->cache[i].kind && bfs_gfid_eq(&priv->cache[i].gfid, g)) {
        kind = priv->cache[i].kind;
        *subvol = priv->cache[i].subvol;
    }
    pthread_mutex_unlock(lk);
    return kind;
}

void dht__cache_drop(struct dht_priv *priv, const struct bfs_gfid *g)
{
    uint32_t i = cache_slot(g);
    pthread_mutex_t *lk = &priv->cache_locks[i % DHT_CACHE_LOCKS];
    pthread_mutex_lock(lk);
    if (bfs_gfid_eq(&priv->cache[i].gfid, g))
        priv->cache[i].kind = DHT_KIND_NONE;
    pthread_mutex_unlock(lk);
}

/* ---- xdata ---- */

struct bfs_dict *dht__xdata_internal(void)
{
    struct bfs_dict *d = bfs_dict_new();
    if (d && bfs_dict_set_int(d, DHT_INTERNAL_KEY, 1) < 0) {
        bfs_dict_unref(d);
        return NULL;
    }
    return d;
}

struct bfs_dict *dht__xdata_gfid(const struct bfs_gfid *g)
{
    struct bfs_dict *d = bfs_dict_new();
    if (d && bfs_dict_set_bin(d, DHT_GFID_REQ_KEY, g->b, sizeof(g->b)) < 0) {
        bfs_dict_unref(d);
        return NULL;
    }
    return d;
}

bool dht__xdata_gfid_req(const struct bfs_dict *xd, struct bfs_gfid *out)
{
    const void *v;
    size_t len;
    if (!xd || bfs_dict_get_bin(xd, DHT_GFID_REQ_KEY, &v, &len) < 0 || len != sizeof(out->b))
        return false;
    memcpy(out->b, v, sizeof(out->b));
    return !bfs_gfid_is_null(out);
}

/* ---- iatt ---- */

bool dht__is_suspicious(const struct bfs_iatt *ia)
{
    /* any size: a rebalance fills its destination while it still has the
     * link-file shape and a linkto naming the source (rebalance.md) */
    return ia->mode == DHT_LINK_MODE;
}

static void later(int64_t *s, uint32_t *ns, int64_t os, uint32_t ons)
{
    if (os > *s || (os == *s && ons > *ns)) {
        *s = os;
        *ns = ons;
    }
}

void dht__iatt_merge_dir(struct bfs_iatt *into, const struct bfs_iatt *other)
{
    later(&into->mtime_sec, &into->mtime_nsec, other->mtime_sec, other->mtime_nsec);
    later(&into->ctime_sec, &into->ctime_nsec, other->ctime_sec, other->ctime_nsec);
    later(&into->atime_sec, &into->atime_nsec, other->atime_sec, other->atime_nsec);
}

/* ---- free space ---- */

void dht__free_note(struct dht_priv *priv, int s, const struct bfs_statvfs *sv)
{
    int pct = sv->blocks ? (int)(sv->bavail * 100 / sv->blocks) : -1;
    pthread_mutex_lock(&priv->lock);
    priv->free_pct[s] = pct;
    pthread_mutex_unlock(&priv->lock);
}

int dht__free_pick(struct dht_priv *priv, int h)
{
    uint64_t now = bfs_now_ms();
    int best = h;
    bool refresh = false;
    pthread_mutex_lock(&priv->lock);
    if (!priv->free_refreshing && now - priv->free_at_ms >= DHT_FREE_REFRESH_MS) {
        priv->free_refreshing = true;
        priv->free_at_ms = now;
        refresh = true;
    }
    int min = priv->min_free_pct;
    if (min > 0 && priv->free_pct[h] >= 0 && priv->free_pct[h] < min) {
        for (int s = 0; s < priv->n; s++)
            if (priv->child[s] >= 0 && priv->free_pct[s] >= min &&
                (best == h || priv->free_pct[s] > priv->free_pct[best]))
                best = s;
    }
    pthread_mutex_unlock(&priv->lock);
    if (refresh)
        dht__free_refresh(priv->xl);
    return best;
}
