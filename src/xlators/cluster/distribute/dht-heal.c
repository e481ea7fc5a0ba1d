/*
 * dht-heal.c — directory self-heal and the root's layout-version stamp,
 * both run inside a lookup op (dht-lookup.c) as sub-procedures.
 *
 * Heal of a directory (P, N) with GFID G whose authority is N's hashed
 * subvolume A (the root's: the lowest subvolume that answered):
 *   lock      write entrylk (P, N) on A, so an rmdir or rename of N that is
 *             running finishes first (they hold the same lock);
 *   recheck   look N up on A again: gone (or another object) means the
 *             lookup answers that, and nothing is healed;
 *   fix       mkdir (P, N) with gfid-req G and A's mode where it is
 *             missing; setattr mode/uid/gid where they differ;
 *   owner     on the new copies: uid, gid and mode (mkdir made them as
 *             root, under the brick's umask rules);
 *   xattrs    on the new copies: the xattrs A shows root (user.*, ACLs,
 *             trusted.* other than brickfs's own);
 *   unlock.
 * All of it runs as root. The root directory has no name: no lock, no
 * recheck, attributes only (bricks always have their root).
 *
 * struct dht_heal lives in the lookup op; missing/differ/xattrs are freed
 * by dht__heal_free with it.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dht.h"

enum { HP_LOCK, HP_RECHECK, HP_FIX, HP_OWNER, HP_XATTR, HP_UNLOCK, HP_DONE };

void dht__heal_free(struct dht_heal *h)
{
    free(h->missing);
    free(h->differ);
    bfs_dict_unref(h->xattrs);
    h->missing = h->differ = NULL;
    h->xattrs = NULL;
}

static bool attrs_differ(const struct bfs_iatt *a, const struct bfs_iatt *b)
{
    return (a->mode & 07777) != (b->mode & 07777) || a->uid != b->uid || a->gid != b->gid;
}

bool dht__heal_needed(struct dht_op *o, struct dht_heal *h, int slot_base)
{
    int n = o->priv->n;
    bool any = false;
    h->missing = calloc((size_t)n, 1);
    h->differ = calloc((size_t)n, 1);
    if (!h->missing || !h->differ)
        return false; /* no memory: answer without healing */
    const struct bfs_iatt *auth = &DHT_REP(o, slot_base + h->auth_s, bfs_lookup_rep)->attr;
    for (int s = 0; s < n; s++) {
        int rc = dht__rc(o, slot_base + s);
        const struct bfs_lookup_rep *r = DHT_REP(o, slot_base + s, bfs_lookup_rep);
        if (rc == -ENOENT && h->loc.name)
            h->missing[s] = 1;
        else if (rc >= 0 && r && S_ISDIR(r->attr.mode) && bfs_gfid_eq(&r->attr.gfid, &h->gfid) &&
                 attrs_differ(&r->attr, auth))
            h->differ[s] = 1;
        any = any || h->missing[s] || h->differ[s];
    }
    h->phase = HP_LOCK;
    h->rc = 0;
    return any;
}

/* ---- the phases ---- */

static int heal_lock(struct dht_op *o, struct dht_heal *h)
{
    if (o->nlocks == 0) {
        o->locks[0] = (struct dht_lock){.pargfid = h->loc.pargfid, .name = h->loc.name,
                                        .subvol = h->lock_s};
        o->nlocks = 1;
        dht__locks_sort(o);
    }
    int rc = dht__lock_step(o);
    if (rc == DHT_WAIT)
        return rc;
    if (rc < 0) {
        h->rc = rc;
        h->phase = HP_UNLOCK;
        return 0;
    }
    struct bfs_lookup_req r = {0};
    r.loc.pargfid = h->loc.pargfid;
    r.loc.name = h->loc.name;
    h->phase = HP_RECHECK;
    dht__wind(o, h->slot0, BFS_FOP_LOOKUP, h->auth_s, &r, true);
    return DHT_WAIT;
}

static void heal_recheck(struct dht_op *o, struct dht_heal *h)
{
    const struct bfs_lookup_rep *r = DHT_REP(o, h->slot0, bfs_lookup_rep);
    int rc = dht__rc(o, h->slot0);
    if (rc < 0 || !r || !S_ISDIR(r->attr.mode) || !bfs_gfid_eq(&r->attr.gfid, &h->gfid)) {
        h->rc = rc < 0 ? rc : -ESTALE; /* removed or replaced while we waited */
        h->phase = HP_UNLOCK;
        return;
    }
    h->auth.mode = r->attr.mode;
    h->auth.uid = r->attr.uid;
    h->auth.gid = r->attr.gid;
    h->phase = HP_FIX;
}

static void wind_setattr(struct dht_op *o, struct dht_heal *h, int s)
{
    struct bfs_setattr_req r = {.attr = h->auth,
                                .valid = BFS_SET_MODE | BFS_SET_UID | BFS_SET_GID};
    r.loc.gfid = h->gfid;
    dht__wind(o, h->slot0 + 1 + s, BFS_FOP_SETATTR, s, &r, true);
}

static bool heal_fix(struct dht_op *o, struct dht_heal *h)
{
    bool any = false, missing = false;
    struct bfs_dict *xd = dht__xdata_gfid(&h->gfid);
    for (int s = 0; s < o->priv->n; s++) {
        if (h->missing[s]) {
            struct bfs_mkdir_req r = {.mode = h->auth.mode & 07777, .umask = 0, .xdata = xd};
            r.loc.pargfid = h->loc.pargfid;
            r.loc.name = h->loc.name;
            XL_INFO(o->priv->xl, "heal: creating directory %s on %s", h->loc.name,
                    o->priv->xl->children[s]->name);
            dht__wind(o, h->slot0 + 1 + s, BFS_FOP_MKDIR, s, &r, true);
            any = missing = true;
        } else if (h->differ[s]) {
            wind_setattr(o, h, s);
            any = true;
        }
    }
    bfs_dict_unref(xd);
    if (missing) {
        struct bfs_getxattr_req r = {.name = NULL};
        r.loc.gfid = h->gfid;
        dht__wind(o, h->slot0, BFS_FOP_GETXATTR, h->auth_s, &r, true);
    }
    h->phase = missing ? HP_OWNER : HP_UNLOCK;
    return any;
}

static bool heal_owner(struct dht_op *o, struct dht_heal *h)
{
    bool any = false;
    const struct bfs_getxattr_rep *x = DHT_REP(o, h->slot0, bfs_getxattr_rep);
    if (dht__rc(o, h->slot0) > 0 && x && bfs_dict_count(x->xattrs) > 0)
        h->xattrs = bfs_dict_ref(x->xattrs);
    for (int s = 0; s < o->priv->n; s++) {
        if (!h->missing[s])
            continue;
        int rc = dht__rc(o, h->slot0 + 1 + s);
        if (rc < 0 && rc != -EEXIST) {
            XL_WARN(o->priv->xl, "heal: directory %s on %s: %s", h->loc.name,
                    o->priv->xl->children[s]->name, strerror(-rc));
            h->missing[s] = 0;
            continue;
        }
        wind_setattr(o, h, s);
        any = true;
    }
    h->phase = HP_XATTR;
    return any;
}

static bool heal_xattrs(struct dht_op *o, struct dht_heal *h)
{
    bool any = false;
    for (int s = 0; h->xattrs && s < o->priv->n; s++) {
        if (!h->missing[s] || dht__rc(o, h->slot0 + 1 + s) < 0)
            continue;
        struct bfs_setxattr_req r = {.xattrs = h->xattrs};
        r.loc.gfid = h->gfid;
        dht__wind(o, h->slot0 + 1 + s, BFS_FOP_SETXATTR, s, &r, true);
        any = true;
    }
    h->phase = HP_UNLOCK;
    return any;
}

int dht__heal_step(struct dht_op *o, struct dht_heal *h)
{
    for (;;) {
        switch (h->phase) {
        case HP_LOCK:
            if (!h->loc.name) {
                h->phase = HP_FIX;
                break;
            }
            if (heal_lock(o, h) == DHT_WAIT)
                return DHT_WAIT;
            break;
        case HP_RECHECK:
            heal_recheck(o, h);
            break;
        case HP_FIX:
            if (heal_fix(o, h))
                return DHT_WAIT;
            break;
        case HP_OWNER:
            if (heal_owner(o, h))
                return DHT_WAIT;
            break;
        case HP_XATTR:
            if (heal_xattrs(o, h))
                return DHT_WAIT;
            break;
        case HP_UNLOCK:
            if (dht__unlock_step(o) == DHT_WAIT)
                return DHT_WAIT;
            h->phase = HP_DONE;
            break;
        default:
            return h->rc;
        }
    }
}

/* ---- the root's layout-version ---- */

static void version_get_all(struct dht_op *o, int slot0)
{
    struct bfs_dict *xd = dht__xdata_internal();
    for (int s = 0; s < o->priv->n; s++) {
        struct bfs_getxattr_req r = {.name = DHT_VERSION_KEY, .xdata = xd};
        r.loc.gfid = bfs_gfid_root;
        dht__wind(o, slot0 + s, BFS_FOP_GETXATTR, s, &r, true);
    }
    bfs_dict_unref(xd);
}

static int64_t version_read(const struct dht_op *o, int slot)
{
    const struct bfs_getxattr_rep *r = DHT_REP(o, slot, bfs_getxattr_rep);
    const void *v;
    size_t len;
    uint64_t be;
    if (dht__rc(o, slot) == -ENODATA)
        return 0;
    if (dht__rc(o, slot) < 0 || !r || bfs_dict_get_bin(r->xattrs, DHT_VERSION_KEY, &v, &len) < 0 ||
        len != sizeof(be))
        return -1;
    memcpy(&be, v, sizeof(be));
    return (int64_t)be64toh(be);
}

/* Writes our version where a brick has an older one; notes a newer one. */
static bool version_compare(struct dht_op *o, int slot0)
{
    struct dht_priv *priv = o->priv;
    int64_t ours = o->layout->version;
    uint64_t be = htobe64((uint64_t)ours);
    struct bfs_dict *xd = dht__xdata_internal(), *xa = bfs_dict_new();
    bool any = false, complete = true;
    if (xa)
        bfs_dict_set_bin(xa, DHT_VERSION_KEY, &be, sizeof(be));
    for (int s = 0; s < priv->n; s++) {
        int64_t v = version_read(o, slot0 + s);
        if (v < 0) {
            complete = complete && dht__rc(o, slot0 + s) != -ENOTCONN;
            continue;
        }
        if (v > ours && !atomic_exchange(&priv->stale_layout, true))
            XL_WARN(priv->xl, "subvolume %s has layout-version %lld, this client %lld: "
                    "stale volfile; lookups that miss will search every subvolume",
                    priv->xl->children[s]->name, (long long)v, (long long)ours);
        if (v < ours && xa) {
            struct bfs_setxattr_req r = {.xattrs = xa, .xdata = xd};
            r.loc.gfid = bfs_gfid_root;
            dht__wind(o, slot0 + s, BFS_FOP_SETXATTR, s, &r, true);
            any = true;
        }
    }
    bfs_dict_unref(xd);
    bfs_dict_unref(xa);
    if (complete)
        atomic_store(&priv->version_checked, true);
    return any;
}

int dht__version_step(struct dht_op *o, int *phase, int slot0)
{
    switch (*phase) {
    case 0:
        *phase = 1;
        version_get_all(o, slot0);
        return DHT_WAIT;
    case 1:
        *phase = 2;
        if (version_compare(o, slot0))
            return DHT_WAIT;
        return 0;
    default:
        for (int s = 0; s < o->priv->n; s++) {
            int rc = dht__rc(o, slot0 + s);
            if (o->op.replies[slot0 + s].fop == BFS_FOP_SETXATTR && rc < 0)
                XL_WARN(o->priv->xl, "cannot record layout-version on %s: %s",
                        o->priv->xl->children[s]->name, strerror(-rc));
        }
        return 0;
    }
}
