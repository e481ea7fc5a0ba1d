/*
 * server-names.c — where the names are in a decoded request, so that
 * protocol/server refuses a bad one before it reaches the graph.
 *
 * A brick never resolves a path: a name is one component, and "", ".",
 * "..", anything with '/' and anything over 255 bytes is refused
 * (bfs_name_check). storage/posix checks again where it resolves; this is
 * the network boundary's own check, so that no translator between the
 * two can be handed such a name. A loc without a name (resolved by gfid)
 * is fine. The table lists each request member that holds a loc or a
 * basename; the generated code describes types, not members, hence the
 * table (fops.def grows rarely, and posix's check remains behind it).
 *
 * Also here: which xattr names a client may touch with "brickfs-internal"
 * (srv_internal_allowed), the one exception to stripping that key.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "server.h"

struct name_field {
    int fop;
    size_t off;
    bool is_loc; /* struct bfs_loc, else const char * */
};

#define LOC(FOP, f, m) {BFS_FOP_##FOP, offsetof(struct bfs_##f##_req, m), true}
#define STR(FOP, f, m) {BFS_FOP_##FOP, offsetof(struct bfs_##f##_req, m), false}

static const struct name_field fields[] = {
    LOC(LOOKUP, lookup, loc),        LOC(STAT, stat, loc),
    LOC(ACCESS, access, loc),        LOC(READLINK, readlink, loc),
    LOC(MKNOD, mknod, loc),          LOC(MKDIR, mkdir, loc),
    LOC(UNLINK, unlink, loc),        LOC(RMDIR, rmdir, loc),
    LOC(SYMLINK, symlink, loc),      LOC(RENAME, rename, oldloc),
    LOC(RENAME, rename, newloc),     LOC(LINK, link, oldloc),
    LOC(LINK, link, newloc),         LOC(TRUNCATE, truncate, loc),
    LOC(OPEN, open, loc),            LOC(CREATE, create, loc),
    LOC(OPENDIR, opendir, loc),      LOC(STATFS, statfs, loc),
    LOC(SETXATTR, setxattr, loc),    LOC(GETXATTR, getxattr, loc),
    LOC(REMOVEXATTR, removexattr, loc), LOC(INODELK, inodelk, loc),
    LOC(ENTRYLK, entrylk, loc),      STR(ENTRYLK, entrylk, basename),
    STR(FENTRYLK, fentrylk, basename), LOC(XATTROP, xattrop, loc),
    LOC(SETATTR, setattr, loc),      LOC(LEASE, lease, loc),
};

int srv_check_names(int fop, const void *req)
{
    const char *base = req;
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (fields[i].fop != fop)
            continue;
        const char *name;
        if (fields[i].is_loc)
            name = ((const struct bfs_loc *)(const void *)(base + fields[i].off))->name;
        else
            name = *(const char *const *)(const void *)(base + fields[i].off);
        int rc = name ? bfs_name_check(name) : 0;
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- internal xattrs a client may reach: cluster/distribute's ---- */

#define SRV_DHT_PREFIX "trusted.brickfs.dht."

static bool dht_key(const char *key)
{
    return key && strncmp(key, SRV_DHT_PREFIX, sizeof(SRV_DHT_PREFIX) - 1) == 0;
}

/* bfs_dict_foreach callback: 1 (stop) at the first key whose
 * dht-ness is *(const bool *)a. */
static int dht_key_is(const char *key, enum bfs_val_type t, const void *v, size_t len, void *a)
{
    (void)t, (void)v, (void)len;
    return dht_key(key) == *(const bool *)a;
}

static bool dht_keys_only(const struct bfs_dict *d)
{
    bool dht = false;
    return d && bfs_dict_count(d) > 0 && bfs_dict_foreach(d, dht_key_is, &dht) == 0;
}

/* A mknod whose xdata gives the new entry trusted.brickfs.dht.* keys:
 * distribute's link file with its linkto (storage/posix sets only those). */
static bool mknod_with_dht_keys(const struct bfs_mknod_req *r)
{
    bool dht = true;
    return r->xdata && bfs_dict_foreach(r->xdata, dht_key_is, &dht) == 1;
}

bool srv_internal_allowed(int fop, const void *req, const struct bfs_stack *st)
{
    if (st->uid != 0)
        return false;
    switch (fop) {
    case BFS_FOP_MKNOD: return mknod_with_dht_keys(req);
    case BFS_FOP_GETXATTR: return dht_key(((const struct bfs_getxattr_req *)req)->name);
    case BFS_FOP_FGETXATTR: return dht_key(((const struct bfs_fgetxattr_req *)req)->name);
    case BFS_FOP_REMOVEXATTR: return dht_key(((const struct bfs_removexattr_req *)req)->name);
    case BFS_FOP_FREMOVEXATTR: return dht_key(((const struct bfs_fremovexattr_req *)req)->name);
    case BFS_FOP_SETXATTR: return dht_keys_only(((const struct bfs_setxattr_req *)req)->xattrs);
    case BFS_FOP_FSETXATTR: return dht_keys_only(((const struct bfs_fsetxattr_req *)req)->xattrs);
    }
    return false;
}
