/*
 * dht-linkfile.c — link files: a zero-byte regular file with mode exactly
 * S_ISVTX, the GFID of the data file, and the xattr
 * trusted.brickfs.dht.linkto naming the subvolume that holds the data.
 *
 * Making one (dht__lf_step, a sub-procedure of the calling op, all as root):
 *   mknod (P, N) mode S_ISVTX, gfid-req G, and linkto in its xdata (internal):
 *     a brick sets it on the new entry and says so in the reply
 *     (BFS_XDATA_ENTRY_XATTRS): done in one round trip.
 *     EEXIST: either the name exists, or this brick already has an object
 *     with GFID G: the link file of another name of the same (hard-linked)
 *     file. A lookup of (P, N) tells which: the name exists -> EEXIST;
 *     else hard-link the existing link file (by GFID) to (P, N).
 *   setxattr linkto = the target's volfile name (internal key), when the
 *   mknod's reply did not say it was set (an older brick, a subvolume that
 *   drops reply xdata) or after the hard link
 *     failure: the new name is unlinked again and the failure answered.
 * When the caller knows the file has other names, the brick is first asked
 * for the GFID (a lookup by GFID) and, when it has it, the hard link is
 * made directly.
 * A lookup that meets the file between mknod and setxattr sees a link file
 * without linkto and finds the data by GFID (dht-lookup.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dht.h"

enum { LF_START, LF_PROBED, LF_MADE, LF_CHECKED, LF_LINKED, LF_SET, LF_UNDONE };

void dht__lf_init(struct dht_lf *lf, const struct bfs_loc *loc, const struct bfs_gfid *g,
                  int subvol, int target, int slot)
{
    memset(lf, 0, sizeof(*lf));
    lf->loc.pargfid = loc->pargfid;
    lf->loc.name = loc->name;
    lf->gfid = *g;
    lf->subvol = subvol;
    lf->target = target;
    lf->slot = slot;
    lf->phase = LF_START;
}

static void lf_mknod(struct dht_op *o, struct dht_lf *lf)
{
    const char *target = o->priv->xl->children[lf->target]->name;
    struct bfs_dict *xd = dht__xdata_gfid(&lf->gfid);
    if (xd && (bfs_dict_set_int(xd, DHT_INTERNAL_KEY, 1) < 0 ||
               bfs_dict_set_bin(xd, DHT_LINKTO_KEY, target, strlen(target)) < 0)) {
        bfs_dict_unref(xd); /* the plain mknod then, and setxattr after it */
        xd = dht__xdata_gfid(&lf->gfid);
    }
    struct bfs_mknod_req r = {.loc = lf->loc, .mode = DHT_LINK_MODE, .umask = 0, .xdata = xd};
    dht__wind(o, lf->slot, BFS_FOP_MKNOD, lf->subvol, &r, true);
    bfs_dict_unref(xd);
}

static void lf_setxattr(struct dht_op *o, struct dht_lf *lf)
{
    const char *target = o->priv->xl->children[lf->target]->name;
    struct bfs_dict *xa = bfs_dict_new(), *xd = dht__xdata_internal();
    if (xa)
        bfs_dict_set_bin(xa, DHT_LINKTO_KEY, target, strlen(target));
    struct bfs_setxattr_req r = {.loc = lf->loc, .xattrs = xa, .xdata = xd};
    /* by GFID too: an inode change through replicate needs the inode's
     * GFID (a name alone is EINVAL there); bricks resolve the GFID first */
    r.loc.gfid = lf->gfid;
    dht__wind(o, lf->slot, BFS_FOP_SETXATTR, lf->subvol, &r, true);
    bfs_dict_unref(xa);
    bfs_dict_unref(xd);
}

/* Whether the mknod's brick set the linkto it carried. */
static bool lf_linkto_set(const struct dht_op *o, const struct dht_lf *lf)
{
    const struct bfs_mknod_rep *r = DHT_REP(o, lf->slot, bfs_mknod_rep);
    int64_t v = 0;
    return r && bfs_dict_get_int(r->xdata, BFS_XDATA_ENTRY_XATTRS, &v) == 0 && v == 1;
}

static int lf_made(struct dht_op *o, struct dht_lf *lf)
{
    int rc = dht__rc(o, lf->slot);
    if (rc >= 0 && lf_linkto_set(o, lf))
        return 0;
    if (rc >= 0) {
        lf->phase = LF_SET;
        lf_setxattr(o, lf);
        return DHT_WAIT;
    }
    if (rc != -EEXIST)
        return rc;
    struct bfs_lookup_req r = {.loc = lf->loc};
    lf->phase = LF_CHECKED;
    dht__wind(o, lf->slot, BFS_FOP_LOOKUP, lf->subvol, &r, true);
    return DHT_WAIT;
}

static int lf_link(struct dht_op *o, struct dht_lf *lf)
{
    struct bfs_link_req r = {.newloc = lf->loc};
    r.oldloc.gfid = lf->gfid;
    lf->phase = LF_LINKED;
    dht__wind(o, lf->slot, BFS_FOP_LINK, lf->subvol, &r, true);
    return DHT_WAIT;
}

static int lf_checked(struct dht_op *o, struct dht_lf *lf)
{
    int rc = dht__rc(o, lf->slot);
    if (rc >= 0)
        return -EEXIST; /* the name is taken */
    if (rc != -ENOENT)
        return rc;
    return lf_link(o, lf); /* the GFID is: another name's link file of the same file */
}

static int lf_probe(struct dht_op *o, struct dht_lf *lf)
{
    struct bfs_lookup_req r = {0};
    r.loc.gfid = lf->gfid;
    lf->phase = LF_PROBED;
    dht__wind(o, lf->slot, BFS_FOP_LOOKUP, lf->subvol, &r, true);
    return DHT_WAIT;
}

int dht__lf_step(struct dht_op *o, struct dht_lf *lf)
{
    int rc;
    switch (lf->phase) {
    case LF_START:
        if (lf->shared)
            return lf_probe(o, lf);
        lf->phase = LF_MADE;
        lf_mknod(o, lf);
        return DHT_WAIT;
    case LF_PROBED:
        if (dht__rc(o, lf->slot) >= 0)
            return lf_link(o, lf);
        lf->phase = LF_MADE;
        lf_mknod(o, lf);
        return DHT_WAIT;
    case LF_MADE:
        return lf_made(o, lf);
    case LF_CHECKED:
        return lf_checked(o, lf);
    case LF_LINKED:
        rc = dht__rc(o, lf->slot);
        if (rc < 0)
            return rc;
        lf->phase = LF_SET; /* the shared inode may point elsewhere: say where */
        lf_setxattr(o, lf);
        return DHT_WAIT;
    case LF_SET:
        rc = dht__rc(o, lf->slot);
        if (rc >= 0)
            return 0;
        lf->rc = rc;
        lf->phase = LF_UNDONE;
        dht__unlink_wind(o, lf->slot, lf->subvol, &lf->loc, true);
        return DHT_WAIT;
    default:
        return lf->rc;
    }
}

void dht__linkto_wind(struct dht_op *o, int slot, int s, const struct bfs_loc *loc)
{
    struct bfs_dict *xd = dht__xdata_internal();
    struct bfs_getxattr_req r = {.name = DHT_LINKTO_KEY, .xdata = xd};
    r.loc.pargfid = loc->pargfid;
    r.loc.name = loc->name;
    r.loc.gfid = loc->name ? bfs_gfid_null : loc->gfid;
    dht__wind(o, slot, BFS_FOP_GETXATTR, s, &r, true);
    bfs_dict_unref(xd);
}

int dht__linkto_read(const struct dht_op *o, int slot)
{
    const struct bfs_getxattr_rep *r = DHT_REP(o, slot, bfs_getxattr_rep);
    const void *v;
    size_t len;
    if (dht__rc(o, slot) < 0 || !r || bfs_dict_get_bin(r->xattrs, DHT_LINKTO_KEY, &v, &len) < 0)
        return -1;
    return dht__subvol_by_name(o->priv, v, len);
}

void dht__unlink_wind(struct dht_op *o, int slot, int s, const struct bfs_loc *loc, bool as_root)
{
    struct bfs_unlink_req r = {0};
    r.loc.pargfid = loc->pargfid;
    r.loc.name = loc->name;
    dht__wind(o, slot, BFS_FOP_UNLINK, s, &r, as_root);
}
