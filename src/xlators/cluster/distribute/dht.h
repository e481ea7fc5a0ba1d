/*
 * dht.h — private to cluster/distribute (see docs/design/distribute.md).
 *
 * Objects and lifetimes:
 *   struct dht_priv    one per instance (xl->private), init..fini.
 *   struct dht_layout  the tables in force, refcounted: priv holds one
 *                      reference, every op another for its whole life, so a
 *                      reconfigure swaps tables without disturbing calls.
 *   struct dht_op      one per call that needs more than a plain pass-down:
 *                      the fan-out driver's struct bfs_op, the caller's
 *                      frame, and two internal top frames (the caller's
 *                      identity and root, both with a lock owner unique to
 *                      the op). Each fop family embeds it first in its own
 *                      struct; freed when the driver drops the last ref.
 *   struct dht_dirfd   per open directory (fd ctx), opendir..releasedir.
 *   file fds           fd ctx = subvolume index + 1, no allocation.
 *
 * Sub-procedures shared by several families (entry locks, link-file
 * creation, internal lookups through ourselves) are "steps within a step":
 * a family's state calls them repeatedly; they answer DHT_WAIT (a call is
 * in flight), 0 (finished) or -errno.
 */
#ifndef BFS_XL_DHT_H
#define BFS_XL_DHT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/fanout.h"
#include "core/fops-util.h"
#include "core/xlator.h"
#include "dht-layout.h"

#define DHT_LINKTO_KEY "trusted.brickfs.dht.linkto"
/* on a source the rebalance froze: its original mode (docs/design/rebalance.md) */
#define DHT_MIGRATING_KEY "trusted.brickfs.dht.migrating"
/* on a moved source: the size its last copy took (decimal; rebalance.md) */
#define DHT_COPIED_KEY "trusted.brickfs.dht.copied"
#define DHT_VERSION_KEY "trusted.brickfs.dht.layout-version"
#define DHT_XATTR_PREFIX "trusted.brickfs."
#define DHT_INTERNAL_KEY "brickfs-internal" /* xdata INT 1, see the design note */
#define DHT_GFID_REQ_KEY "gfid-req"
#define DHT_LOCK_DOMAIN "dht"
#define DHT_LINK_MODE (S_IFREG | S_ISVTX)
#define DHT_TMP_PREFIX ".dht-rename-"

/* Internal lookups through ourselves: request xdata DHT_INFO_KEY = 1 makes
 * the reply xdata carry where the data is and where a link file is. */
#define DHT_INFO_KEY "dht-info"
#define DHT_INFO_CACHED "dht-info-cached" /* INT subvolume of the data, -1 for a dir */
#define DHT_INFO_LINK "dht-info-link"     /* INT subvolume of the link file, or -1 */
#define DHT_INFO_DOWN "dht-info-down"     /* INT count of subvolumes that were down */

struct dht_priv;

/* Internal namespace calls into ourselves made while holding the name's
 * entry lock (rename removing the directory it replaces): xdata INT 1. */
#define DHT_NOLOCK_KEY "dht-nolock"

#define DHT_WAIT 1 /* a sub-procedure has a call in flight */
#define DHT_FREE_REFRESH_MS 5000

/* ---- the layout in force ---- */

struct dht_layout {
    atomic_int refs;
    int64_t version;
    struct dht_table *cur;
    struct dht_table *prev; /* NULL when no rebalance is pending */
};

struct dht_layout *dht__layout_get(struct dht_priv *priv);
void dht__layout_put(struct dht_layout *l);

/* ---- the location cache ---- */

enum { DHT_KIND_NONE = 0, DHT_KIND_FILE = 1, DHT_KIND_DIR = 2 };

struct dht_cache_ent {
    struct bfs_gfid gfid;
    int16_t subvol; /* file: where the data is; dir: hashed subvolume of its name, or -1 */
    uint8_t kind;
};

#define DHT_CACHE_SIZE 65536
#define DHT_CACHE_LOCKS 64

/* ---- instance ---- */

struct dht_priv {
    struct bfs_xl *xl;
    int n;                      /* number of subvolumes */
    pthread_mutex_t lock;       /* guards layout, options, free space, child states */
    struct dht_layout *layout;
    struct bfs_dict *opts;      /* option text changed by reconfigure, in force */
    int min_free_pct;
    bool lookup_unhashed;
    atomic_bool stale_layout;   /* a brick has a newer layout-version */
    atomic_bool version_checked;
    int *free_pct;              /* [n], -1 unknown */
    uint64_t free_at_ms;
    bool free_refreshing;
    int8_t *child;              /* [n]: 0 unknown, 1 up, -1 down */
    bool *single;               /* [n]: the subvolume is one brick (no cluster translator) */
    atomic_bool *unlink_lk;     /* [n]: its brick ran an unlink under the entry lock it was
                                 * asked to take (lib/lk-unlink-wire.h) since it came up */
    bool announced_up;
    bool warned_nolocks;
    atomic_uint_fast64_t owner_seq;
    struct dht_cache_ent *cache; /* [DHT_CACHE_SIZE] */
    pthread_mutex_t cache_locks[DHT_CACHE_LOCKS];
    atomic_uint_fast64_t n_linkfollow, n_heal, n_divert, n_stale, n_unlink_fast;
};

/* ---- ops (dht-op.c) ---- */

struct dht_lock {
    struct bfs_gfid pargfid;
    const char *name;   /* borrowed from the op's request copy */
    int subvol;
    bool held;
};

struct dht_op;
typedef int (*dht_step_fn)(struct dht_op *o);

struct dht_op {
    struct bfs_op op;           /* first: the fan-out driver */
    struct dht_priv *priv;
    struct bfs_frame *caller;   /* answered once, by the family */
    struct bfs_frame *user;     /* internal top frame: caller's identity */
    struct bfs_frame *root;     /* internal top frame: uid 0 */
    struct dht_layout *layout;
    void (*cleanup)(struct dht_op *o); /* frees the family's fields */
    /* entry locks (dht_lock_step / dht_unlock_step) */
    struct dht_lock locks[2];
    int nlocks, nheld;
    bool lock_wound;
    int lock_slot;              /* two reply slots reserved for locks */
    int lock_nb;                /* two locks: 1 ask both at once (LOCK_NB), 2 asked,
                                 * 3 releasing after a busy one; 0 the ordered way */
    int lock_err;
};

/* Allocates size bytes (a family struct with struct dht_op first), nslots
 * reply slots, internal frames. NULL on ENOMEM (nothing to undo). */
struct dht_op *dht__op_new(size_t size, struct bfs_frame *frame, struct bfs_xl *xl, int nslots,
                           bfs_op_step_fn step, void (*cleanup)(struct dht_op *));
/* Starts the driver (the fop answers through its callback). */
void dht__op_start(struct dht_op *o);
/* Winds fop to subvolume s for slot i, as the caller or as root. */
void dht__wind(struct dht_op *o, int slot, int fop, int s, const void *req, bool as_root);
/* Winds fop into this translator itself (internal lookups), as the caller. */
void dht__wind_self(struct dht_op *o, int slot, int fop, const void *req);
/* An internal lookup of loc (by name, or by GFID) into slot; read it with
 * dht__info_get. */
void dht__info_wind(struct dht_op *o, int slot, const struct bfs_loc *loc, bool named);
/* The reply in slot i: its rc (-EIO when no answer was recorded) and typed body. */
int dht__rc(const struct dht_op *o, int slot);
const void *dht__rep(const struct dht_op *o, int slot);
#define DHT_REP(o, slot, T) ((const struct T *)dht__rep((o), (slot)))

/* Entry locks: set o->locks[]/nlocks (sorted by dht__locks_sort), then
 * call from one state until it answers 0 (all held) or -errno. */
void dht__locks_sort(struct dht_op *o);
int dht__lock_step(struct dht_op *o);
int dht__unlock_step(struct dht_op *o);

/* Hashing against the op's layout. */
int dht__hashed(const struct dht_op *o, const struct bfs_gfid *pargfid, const char *name);
int dht__prev_hashed(const struct dht_op *o, const struct bfs_gfid *pargfid, const char *name);
int dht__subvol_by_name(const struct dht_priv *priv, const char *name, size_t len);

/* Location cache. */
void dht__cache_put(struct dht_priv *priv, const struct bfs_gfid *g, int kind, int subvol);
int dht__cache_get(struct dht_priv *priv, const struct bfs_gfid *g, int *subvol); /* kind */
void dht__cache_drop(struct dht_priv *priv, const struct bfs_gfid *g);

/* xdata helpers: a new dict with brickfs-internal = 1 (and gfid-req). */
struct bfs_dict *dht__xdata_internal(void);
struct bfs_dict *dht__xdata_gfid(const struct bfs_gfid *g);
/* The GFID a caller asked for in xdata gfid-req, if any. */
bool dht__xdata_gfid_req(const struct bfs_dict *xd, struct bfs_gfid *out);

/* iatt helpers. */
bool dht__is_suspicious(const struct bfs_iatt *ia); /* link-file shape */
void dht__iatt_merge_dir(struct bfs_iatt *into, const struct bfs_iatt *other);

/* Free space (min-free-disk): records one subvolume's statfs answer, and
 * picks a subvolume for a new file hashing to h (h itself when it has room
 * or nothing better is known). Starts a background refresh when old. */
void dht__free_note(struct dht_priv *priv, int s, const struct bfs_statvfs *sv);
int dht__free_pick(struct dht_priv *priv, int h);
void dht__free_refresh(struct bfs_xl *xl); /* dht-inode.c: statfs of every subvolume */

/* ---- fops ---- */

/* dht-lookup.c */
int dht__lookup(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_lookup_req *req);
/* Builds an internal lookup request of loc (named, or by GFID when name is
 * NULL) with DHT_INFO_KEY; the caller frees xdata. */
void dht__info_req(struct bfs_lookup_req *req, const struct bfs_loc *loc, bool named);
/* Reads an internal lookup's answer. */
struct dht_info {
    int rc;
    struct bfs_iatt attr;
    struct bfs_iatt parent;
    int cached; /* data subvolume, -1 for directories or unknown */
    int link;   /* link-file subvolume or -1 */
    int down;   /* subvolumes that were down */
};
void dht__info_get(const struct dht_op *o, int slot, struct dht_info *out);

/* dht-heal.c: directory self-heal and the root's layout-version, as
 * sub-procedures of the lookup op (struct dht_lookup_op is in dht-lookup.c;
 * the heal state lives in struct dht_heal embedded in it). */
struct dht_heal {
    int phase;
    struct bfs_gfid gfid;
    struct bfs_iatt auth;      /* attributes of the authority */
    int auth_s;                /* authority subvolume (the name's hashed one, if it has it) */
    int lock_s;                /* the name's hashed subvolume: where its entry lock is */
    uint8_t *missing;          /* [n] 1: mkdir there */
    uint8_t *differ;           /* [n] 1: setattr there */
    struct bfs_dict *xattrs;   /* user xattrs of the authority, for new copies */
    struct bfs_loc loc;        /* the directory's name (borrowed) */
    int slot0;                 /* first reply slot the heal may use (n of them + 1) */
    int rc;                    /* the heal's outcome, answered after unlocking */
};
/* From the lookup replies in slots [slot_base, slot_base + n): which
 * subvolumes lack the directory or differ from h->auth_s; true if any. */
bool dht__heal_needed(struct dht_op *o, struct dht_heal *h, int slot_base);
int dht__heal_step(struct dht_op *o, struct dht_heal *h);
void dht__heal_free(struct dht_heal *h);
int dht__version_step(struct dht_op *o, int *phase, int slot0);

/* dht-linkfile.c: make a link file (pargfid, name) on subvolume s, GFID g,
 * pointing to subvolume target. Embed struct dht_lf and call the step. */
struct dht_lf {
    int phase;
    bool shared;         /* the brick may already hold a link file with this GFID */
    struct bfs_loc loc;  /* borrowed */
    struct bfs_gfid gfid;
    int subvol, target;
    int slot;
    int rc;              /* a failure being undone */
};
void dht__lf_init(struct dht_lf *lf, const struct bfs_loc *loc, const struct bfs_gfid *g,
                  int subvol, int target, int slot);
/* The file has other names (hard links): ask the brick for the GFID first
 * instead of learning it from a refused mknod. */
static inline void dht__lf_shared(struct dht_lf *lf, bool shared)
{
    lf->shared = shared;
}
int dht__lf_step(struct dht_op *o, struct dht_lf *lf);
/* Winds the getxattr of a link file's linkto on s (as root) into slot. */
void dht__linkto_wind(struct dht_op *o, int slot, int s, const struct bfs_loc *loc);
/* From that getxattr's answer: the target subvolume, or -1. */
int dht__linkto_read(const struct dht_op *o, int slot);
/* Winds unlink of (loc) on s as root into slot. */
void dht__unlink_wind(struct dht_op *o, int slot, int s, const struct bfs_loc *loc, bool as_root);

/* dht-entry.c */
/* The subvolume is a single brick: no translator with several children
 * or of class cluster/ on the way down (dht.c, at init). */
bool dht__single_brick(const struct bfs_xl *x);
int dht__create(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_create_req *req);
int dht__mknod(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_mknod_req *req);
int dht__symlink(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_symlink_req *req);
int dht__link(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_link_req *req);
int dht__unlink(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_unlink_req *req);

/* dht-dir.c */
int dht__mkdir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_mkdir_req *req);
int dht__rmdir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_rmdir_req *req);

/* dht-rename.c */
int dht__rename(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_rename_req *req);

/* dht-readdir.c */
int dht__opendir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_opendir_req *req);
int dht__readdir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_readdir_req *req);
void dht__releasedir(struct bfs_xl *xl, struct bfs_fd *fd);
struct dht_dirfd {
    struct bfs_gfid gfid; /* the directory */
    int lister;           /* the lowest subvolume where opendir succeeded */
    int n;
    uint8_t open[]; /* [n] */
};
struct dht_dirfd *dht__dirfd(struct bfs_xl *xl, struct bfs_fd *fd);

/* dht-migrate.c: writes that follow a file the rebalance moved */
int dht__write(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_write_req *req);
/* Reads: passed down with a cookie; a frozen reply goes through dht__generic. */
int dht__read(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_read_req *req);
#define DHT_MIGRATE_DOMAIN "dht.migrate" /* the rebalance's inodelk on the destination */
/* Other fops that change a file's data or attributes (open, truncate,
 * setattr, fallocate...): true when fop is one of them. dht-inode.c routes
 * them through an op and repeats them where the file went when their
 * reply shows the frozen bits (dht__frozen_reply; *g gets the GFID). */
bool dht__follows(int fop);
bool dht__frozen_reply(int fop, const void *rep, struct bfs_gfid *g);
/* The destination named by a source's migrating mark (xattrs of a
 * getxattr of DHT_MIGRATING_KEY, "MODE SUBVOLUME"): its index, or one of: */
#define DHT_MARK_NONE (-1)      /* no mark: the mode bits are the user's own */
#define DHT_MARK_UNNAMED (-2)   /* a mark without a destination: search by GFID */
#define DHT_MARK_ELSEWHERE (-3) /* a destination this graph does not have */
int dht__mark_target(struct dht_priv *priv, const struct bfs_dict *xattrs);
/* The request of the inodelk that waits for a migration of g to end. */
void dht__migrate_lock_req(struct bfs_inodelk_req *r, const struct bfs_gfid *g, uint32_t type);

/* dht-inode.c */
int dht__generic(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req);
int dht__statfs(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_statfs_req *req);
/* The subvolume recorded on a file fd, or -1. */
int dht__fd_subvol(struct bfs_xl *xl, struct bfs_fd *fd);
void dht__fd_set_subvol(struct bfs_xl *xl, struct bfs_fd *fd, int s);

#endif
