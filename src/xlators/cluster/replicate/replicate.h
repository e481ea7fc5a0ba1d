/*
 * replicate.h — private to cluster/replicate: N full copies of every file
 * and directory, kept consistent by transactions with a pending matrix on
 * the bricks, read from one good copy, healed on access
 * (docs/design/replicate.md).
 *
 * Objects and lifetimes:
 *   struct afr_priv    one per translator instance (xl->private), init..fini.
 *   struct afr_inode   per inode (inode ctx slot): readable masks, split-brain
 *                      flags, the shared data lock object (and, for a
 *                      directory, the shared entry lock). Made on first
 *                      need, freed at forget (a held lock keeps the inode).
 *   struct afr_fd      per fd (fd ctx slot): where it is open, the readdir
 *                      child. open/create/opendir .. release(dir).
 *   struct afr_txn     one modifying fop (replicate-write.c, -entry.c),
 *                      embedding the shared struct bfs_txn.
 *   struct afr_read    one read fop (replicate-read.c); struct afr_lookup
 *                      (replicate-lookup.c); struct afr_fan (replicate-fd.c).
 *   heal jobs          replicate-heal.c: queued, run on the heal thread.
 */
#ifndef BFS_XL_REPLICATE_H
#define BFS_XL_REPLICATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/fanout.h"
#include "core/fops-util.h"
#include "core/xlator.h"
#include "replicate-decide.h"
#include "xlators/lib/cluster.h"
#include "xlators/lib/healq.h"
#include "xlators/lib/listing.h"
#include "xlators/lib/txn.h"

#define AFR_KEY_PREFIX "trusted.brickfs.afr."
#define AFR_DIRTY_KEY AFR_KEY_PREFIX "dirty"
#define AFR_XATTR_REQ "xattr-req" /* lookup xdata: comma-separated xattr names */
#define AFR_GFID_REQ "gfid-req"   /* xdata BIN[16]: GFID of a new entry */
/* read xdata (INT 1): protocol/client must not answer this read from the
 * data it fetched with the open (client-prefetch.c): that copy was not
 * known good when the open was sent (replicate-read.c) */
#define AFR_PREFETCH_SKIP "open-prefetch-skip"


#define AFR_RECENT 64
#define AFR_LEFT 64 /* directories remembered per child whose window's marks it kept */

struct afr_priv {
    struct bfs_cluster cl;       /* the shared library's view */
    struct bfs_xl *xl;
    int n;
    int arbiter;                 /* child index, or -1 */
    char *keys[AFR_MAX];         /* trusted.brickfs.afr.<child name> */
    char *xattr_req;             /* every key, comma-separated, for lookups */
    /* options (atomics; reconfigure) */
    int read_policy;             /* enum afr_read_policy */
    int fav_policy;              /* enum afr_fav */
    int heal_count;              /* background heals queued at most; 0: foreground */
    bool heal_on[AFR_NTYPES];
    bool heal_diff;
    uint64_t heal_lock_ms;       /* a heal waits this long for its lock at most */
    bool quorum_reads;           /* reads need quorum too */
    bool lazy_open;              /* cluster.lazy-open (replicate-fd.c) */
    bool eager_entry;            /* cluster.entry-eager-lock: a directory's entry lock is
                                  * kept between its entry changes (replicate-entry.c) */
    /* notify */
    pthread_mutex_t lock;        /* reported/announced, inode ctx creation */
    uint32_t reported;           /* children that sent an event */
    bool announced_up;
    uint64_t gen;                /* atomic: bumped by every child event */
    uint32_t been_down;          /* atomic: children that went down since init: their
                                  * copies may miss changes (replicate-read.c, readdir) */
    uint64_t load[AFR_MAX];      /* atomic: read calls in flight per child */
    struct bfs_healq *healq;     /* heal jobs and their thread (lib/healq.c) */
    bool heal_try;               /* heal thread only: heals take their locks without
                                  * waiting and give up (EAGAIN) on a busy inode
                                  * (the self-heal daemon's heals) */
    /* The inodes of the last AFR_RECENT lookups, ref'd (p->lock): a
     * lookup's answer fills the context of an inode nobody holds yet (the
     * mount takes it once the answer is back), which would be freed with
     * what it learnt; kept here, the open and the reads that follow find
     * it fresh (no refresh, open-prefetch usable). Dropped at PARENT_DOWN. */
    struct bfs_inode *recent[AFR_RECENT];
    unsigned recent_next;
    bool recent_off;             /* after PARENT_DOWN: keep nothing */
    struct afr_mem *mem;         /* contexts kept after forget (replicate-memory.c) */
    /* Directories whose entry window was held when child i went down: its
     * pre-op's dirty mark stays on that brick (the post-op cannot reach
     * it); when i comes back, an entry heal of each clears it (p->lock).
     * Beyond AFR_LEFT, lookups and the self-heal daemon find them. */
    struct bfs_gfid left[AFR_MAX][AFR_LEFT];
    int nleft[AFR_MAX];
    /* statistics (atomic) */
    uint64_t n_txn, n_read_failover, n_heal_ok, n_heal_fail, n_split;
    uint64_t n_heal_blocks;      /* data heal: blocks written to sinks */
    uint64_t n_heal_sum_blocks;  /* data heal: blocks compared by checksum */
    uint64_t n_write_lent;       /* writes wound from the caller's bytes (no copy) */
    uint64_t n_write_copied;     /* writes whose payload had to be copied */
};

struct afr_inode {
    pthread_mutex_t lock;        /* guards the fields below but dlock */
    uint64_t gen;                /* priv->gen when filled; 0: never */
    uint32_t type;               /* S_IFMT, 0 unknown */
    uint32_t readable[AFR_NTYPES];
    bool split[AFR_NTYPES];
    struct bfs_txn_lock dlock;   /* shared (eager) data lock */
    struct bfs_txn_lock elock;   /* directories: shared (eager) entry lock, whole directory
                                  * (the entry window, replicate-entry.c) */
};

struct afr_fix_wait {             /* replicate-fd.c, afr_fix_open */
    bfs_task_fn fn;
    void *arg;
    struct afr_fix_wait *next;
};

struct afr_fd {
    pthread_mutex_t lock;
    uint32_t opened;             /* children where open/create/opendir succeeded */
    struct bfs_listing listing;  /* readdir's child and the listing's end (lib/listing.h) */
    struct bfs_gfid gfid;        /* of the file (for fds made without an inode) */
    uint32_t flags;              /* open flags, for re-opening on a child */
    uint64_t reopen_gen;         /* priv->gen at the last open or re-open attempt */
    bool reopening;
    struct afr_fix_wait *fix_waiting; /* afr_fix_open callers while reopening */
    /* Children whose data copy was known good (readable, fresh context)
     * when the open was sent: only their protocol/client may answer a
     * read from the bytes it fetched with the open. Another copy's bytes
     * may predate a heal made since by another process (the self-heal
     * daemon) and become readable after it. */
    uint32_t prefetch_ok;
};

/* ---- replicate.c ---- */
static inline struct afr_priv *afr_priv(const struct bfs_xl *xl)
{
    return xl->private;
}
uint32_t afr_up(const struct afr_priv *p);
uint32_t afr_all(const struct afr_priv *p);
/* Data copies among mask (the arbiter removed). */
uint32_t afr_data_mask(const struct afr_priv *p, uint32_t mask);

/* ---- replicate-changelog.c ---- */
extern const struct bfs_changelog_ops afr_changelog_ops;
/* Reads child i's row (pending keys and dirty) from dict into s. */
void afr_state_add_row(const struct afr_priv *p, struct afr_state *s, int i,
                       const struct bfs_dict *x);
/* A copy of xdata (may be NULL) asking lookups for our keys too. NULL: ENOMEM. */
struct bfs_dict *afr_lookup_xdata(const struct afr_priv *p, const struct bfs_dict *xdata);
/* A copy of a reply's xdata without our keys (NULL stays NULL). */
struct bfs_dict *afr_xdata_strip(const struct afr_priv *p, const struct bfs_dict *xdata);
/* xattrs adding `row` to child j's key on one brick (j < 0: the dirty key). */
int afr_dict_add_row(const struct afr_priv *p, struct bfs_dict *d, int j,
                     const int64_t row[AFR_NTYPES]);

/* ---- replicate-inode.c ---- */
int afr_ctx_init(struct afr_priv *p); /* at init */
/* The inode a loc or fd names, ref'd (NULL when no GFID is known). */
struct bfs_inode *afr_inode_of_loc(struct bfs_xl *xl, const struct bfs_loc *loc);
struct bfs_inode *afr_inode_of_gfid(struct bfs_xl *xl, const struct bfs_gfid *g, uint32_t type);
struct bfs_inode *afr_inode_of_fd(struct bfs_xl *xl, struct bfs_fd *fd);
/* The context of inode (made on first use). NULL only on ENOMEM. */
struct afr_inode *afr_ictx(struct bfs_xl *xl, struct bfs_inode *inode);
bool afr_ictx_fresh(const struct afr_priv *p, struct afr_inode *c);
/* Keeps a ref on inode (a lookup just filled its context) among the
 * last AFR_RECENT; afr_recent_drop lets them all go (on=false: keep no
 * more until afr_recent_drop(p, true)). */
void afr_recent_keep(struct afr_priv *p, struct bfs_inode *inode);
void afr_recent_drop(struct afr_priv *p, bool on);
/* After a lookup or refresh. */
void afr_ictx_update(const struct afr_priv *p, struct afr_inode *c, uint32_t type,
                     const struct afr_lookup_out *o);
/* Children that failed a change of type t are no longer readable. */
void afr_ictx_failed(struct afr_inode *c, int t, uint32_t failed);
/* Readable children for a read of type t: *split set on split-brain. */
uint32_t afr_ictx_readable(struct afr_inode *c, int t, bool *split, uint32_t *type);
/* After a heal of type t: readable (or split-brain). */
void afr_ictx_healed(const struct afr_priv *p, struct afr_inode *c, int t, uint32_t readable,
                     bool split);
void afr_forget(struct bfs_xl *xl, struct bfs_inode *inode);

struct afr_fd *afr_fdctx(struct bfs_xl *xl, struct bfs_fd *fd, bool create);
/* Children an fd is open on (every child when it has no context). */
uint32_t afr_fd_opened(struct bfs_xl *xl, struct bfs_fd *fd);
void afr_fd_set_opened(struct bfs_xl *xl, struct bfs_fd *fd, uint32_t opened,
                       const struct bfs_gfid *gfid, uint32_t flags);
/* struct afr_fd.prefetch_ok: set by open; read before each read. */
void afr_fd_set_prefetch_ok(struct bfs_xl *xl, struct bfs_fd *fd, uint32_t ok);
uint32_t afr_fd_prefetch_ok(struct bfs_xl *xl, struct bfs_fd *fd);
/* The fd was opened on one copy on purpose (lazy open): the first fix-open
 * (afr_fix_open) opens it on the others whatever the generation. */
void afr_fd_set_lazy(struct bfs_xl *xl, struct bfs_fd *fd);
void afr_release(struct bfs_xl *xl, struct bfs_fd *fd);

/* ---- replicate-memory.c: contexts kept by GFID after their inode is forgotten ---- */
struct afr_mem;
int afr_mem_init(struct afr_priv *p, size_t size); /* -ENOMEM */
void afr_mem_fini(struct afr_priv *p);
void afr_mem_resize(struct afr_priv *p, size_t size); /* a new size empties it; 0: off */
/* At forget: keeps c (if fresh) under g. */
void afr_mem_save(struct afr_priv *p, const struct bfs_gfid *g, struct afr_inode *c);
/* A new, empty context c of g starts from what was kept, if it is still
 * of this generation. true if it did. */
bool afr_mem_seed(struct afr_priv *p, const struct bfs_gfid *g, struct afr_inode *c);
/* A brick's invalidation of g (another client changed it): forgets what
 * is kept of g (a live context is left alone). */
void afr_mem_invalidate(struct afr_priv *p, const struct bfs_gfid *g);
void afr_mem_stats(struct afr_priv *p, uint64_t out[3]); /* saved, seeded, dropped */

/* ---- replicate-lookup.c ---- */
int afr_lookup(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_lookup_req *req);
/* Starts a lookup that answers frame and triggers no heal (after a
 * foreground heal). Takes req. */
void afr_lookup_resume(struct bfs_xl *xl, struct bfs_frame *frame, struct bfs_lookup_req *req);
/* Refresh helpers shared with reads: wind lookups by GFID with our keys to
 * mask (expect included); gather them into s/rc. */
int afr_refresh_wind(struct bfs_op *op, const struct afr_priv *p, const struct bfs_gfid *g,
                     uint32_t mask);
void afr_refresh_gather(const struct afr_priv *p, const struct bfs_op *op, uint32_t asked,
                        struct afr_state *s, int *rc);

/* ---- replicate-read.c ---- */
int afr_stat(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_stat_req *req);
int afr_fstat(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fstat_req *req);
int afr_access(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_access_req *req);
int afr_readlink(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_readlink_req *req);
int afr_read(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_read_req *req);
int afr_getxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_getxattr_req *req);
int afr_fgetxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fgetxattr_req *req);
int afr_seek(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_seek_req *req);
int afr_readdir(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_readdir_req *req);

/* ---- replicate-fd.c ---- */
int afr_open(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_open_req *req);
int afr_opendir(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_opendir_req *req);
int afr_flush(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_flush_req *req);
int afr_fsync(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fsync_req *req);
int afr_fsyncdir(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fsyncdir_req *req);
int afr_statfs(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_statfs_req *req);
int afr_lk(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_lk_req *req);
int afr_inodelk(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_inodelk_req *req);
int afr_finodelk(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_finodelk_req *req);
int afr_entrylk(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_entrylk_req *req);
int afr_fentrylk(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fentrylk_req *req);
int afr_xattrop(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_xattrop_req *req);
int afr_fxattrop(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fxattrop_req *req);
int afr_lease(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_lease_req *req);
int afr_copy_file_range(struct bfs_frame *f, struct bfs_xl *xl,
                        const struct bfs_copy_file_range_req *req);
/* "fix-open": opens fd on the up children it is not open on (they were
 * down at open time, or a lazy open left them out), at most once per child
 * event, as the caller of frame. Returns 1 if it did, or if such a fix-open
 * is in flight: then(arg) is posted to the event loop when it is done,
 * whatever the outcome; 0 if there is nothing to do. */
int afr_fix_open(struct bfs_frame *frame, struct bfs_xl *xl, struct bfs_fd *fd,
                 bfs_task_fn then, void *arg);

/* ---- replicate-write.c: data and metadata transactions ---- */
struct afr_txn {
    struct bfs_txn t;            /* first */
    struct afr_priv *p;
    int fop;
    void *req;                   /* our copy (bfs_fop_info[fop]) */
    struct bfs_inode *inode;     /* ref: the inode changed, or the parent */
    struct bfs_fd *fd;           /* fd of fd-based fops (in req) */
    bool data;                   /* not sent to the arbiter */
    int chosen;                  /* child whose reply answers, -1 */
    struct bfs_open_rep *open_rep; /* open with O_TRUNC: answered as open */
    void (*done)(struct afr_txn *a, int rc); /* family hook after combine */
    int newlock;                 /* create: 1 asks for the file's data lock, -1 not, 0 undecided */
    uint64_t nl_owner;           /* the lock owner it asks for */
    bool eager;                  /* entry change under its parent's entry window */
};
/* replicate-prefetch.c: the copy that will serve the reads of an O_RDONLY
 * open (-1: unknown, or not such an open; AFR_NO_READER: no copy whose
 * prefetched bytes a read could use, `good` being the copies known good as
 * the open is sent), and the open's wind to child i asking for no
 * open-prefetch unless i is that copy. */
#define AFR_NO_READER (-2)
int afr_open_reader(struct afr_priv *p, const struct bfs_open_req *q, uint32_t good);
void afr_open_wind(struct bfs_op *op, int i, const struct bfs_open_req *q, int reader);
/* replicate-entry.c: lock on create (docs/design/replicate.md): does this
 * create ask for its file's data lock? Decided once per transaction. */
bool afr_newlock_wanted(struct afr_txn *a);
/* Allocates an afr_txn (size >= sizeof) with a copy of req. NULL: ENOMEM. */
struct afr_txn *afr_txn_new(struct bfs_xl *xl, int fop, const void *req, size_t size);
void afr_txn_free(struct afr_txn *a);
extern const struct bfs_txn_fop afr_txn_fop;
/* ftruncate to 0 through fd, answering frame as open with rep (O_TRUNC). */
int afr_open_trunc(struct bfs_frame *frame, struct bfs_xl *xl, struct bfs_fd *fd,
                   const struct bfs_open_rep *rep);

int afr_write(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_write_req *req);
int afr_truncate(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_truncate_req *req);
int afr_ftruncate(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_ftruncate_req *req);
int afr_fallocate(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fallocate_req *req);
int afr_discard(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_discard_req *req);
int afr_zerofill(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_zerofill_req *req);
int afr_setattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_setattr_req *req);
int afr_fsetattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fsetattr_req *req);
int afr_setxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_setxattr_req *req);
int afr_fsetxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fsetxattr_req *req);
int afr_removexattr(struct bfs_frame *f, struct bfs_xl *xl,
                    const struct bfs_removexattr_req *req);
int afr_fremovexattr(struct bfs_frame *f, struct bfs_xl *xl,
                     const struct bfs_fremovexattr_req *req);

/* ---- replicate-entry.c ---- */
int afr_create(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_create_req *req);
int afr_mknod(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_mknod_req *req);
int afr_mkdir(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_mkdir_req *req);
int afr_symlink(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_symlink_req *req);
int afr_link(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_link_req *req);
int afr_unlink(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_unlink_req *req);
int afr_rmdir(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_rmdir_req *req);
int afr_rename(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_rename_req *req);

/* ---- replicate-heal.c ---- */
struct afr_heal_req {
    struct bfs_gfid gfid;        /* the inode (null: only the parent) */
    uint32_t types;              /* bit per type to heal on it */
    struct bfs_gfid pargfid;     /* a directory whose entries to heal first (null: none) */
    struct bfs_frame *frame;     /* foreground: answered by a lookup afterwards ... */
    struct bfs_lookup_req *req;  /* ... of this request (taken) */
    int vop;                     /* enum afr_vop: a daemon request (frame: its getxattr
                                  * or setxattr), replicate-heal-api.c */
    char *arg;                   /* its argument (malloc'd, taken) */
};
int afr_heal_start(struct afr_priv *p);
void afr_heal_stop(struct afr_priv *p);
/* Queues a heal. Foreground (frame set): 0, the frame will be answered;
 * -errno: nothing taken. Background: 0 queued, -EBUSY queue full (dropped). */
int afr_heal_request(struct afr_priv *p, const struct afr_heal_req *r);
size_t afr_heal_queued(struct afr_priv *p);
/* Queues an entry heal of directory g in the background (even with
 * cluster.background-self-heal-count 0): a child is back that kept our
 * entry window's dirty mark on it (struct afr_priv.left). */
void afr_heal_left(struct afr_priv *p, const struct bfs_gfid *g);

/* Heal building blocks (replicate-heal.c), used by the three heals on the
 * heal thread with blocking calls. */
struct afr_hctx {
    struct afr_priv *p;
    struct bfs_stack *st;        /* uid 0, a lock owner of its own */
    struct bfs_gfid gfid;
    int type;
    struct bfs_lkset lk;
    uint32_t locked;             /* children holding the heal lock */
    struct afr_state s;          /* what they said, under the lock */
    int rc[AFR_MAX];
    struct afr_decision d;
};
/* Locks and inspects gfid for type t, decides (force >= 0: that child is the
 * only source, manual split-brain resolution). 0 (then afr_heal_end), or -errno. */
int afr_heal_begin(struct afr_hctx *h, struct afr_priv *p, const struct bfs_gfid *g, int t,
                   int force);
/* Resets the counters about `healed` (sources and healed sinks), updates the
 * inode context, unlocks. */
void afr_heal_end(struct afr_hctx *h, uint32_t healed, bool split);
/* One blocking fop on child i with the heal's identity. */
int afr_hsync(struct afr_hctx *h, int i, int fop, const void *req, void *rep);
/* Marks a new entry on `src`: pending[sink] += the types it needs. */
int afr_heal_mark_new(struct afr_hctx *h, int src, const struct bfs_gfid *g, uint32_t mode,
                      uint32_t sinks);

/* force: -1, or the only source (manual split-brain resolution). */
/* ---- replicate-heal-api.c: what the self-heal daemon asks (virtual xattrs) ---- */
enum afr_vop { AFR_VOP_NONE = 0, AFR_VOP_STATUS, AFR_VOP_HEAL, AFR_VOP_RESOLVE };
#define AFR_VKEY_PREFIX "brickfs.heal."
/* getxattr on loc{gfid}: true when it is one of ours (then answered). */
bool afr_vop_getxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_getxattr_req *req);
/* setxattr on loc{gfid}: true when it is one of ours (then answered). */
bool afr_vop_setxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_setxattr_req *req);
/* On the heal thread: runs the request and answers its frame; frees r->arg. */
void afr_vop_run(struct afr_priv *p, struct afr_heal_req *r);
/* At fini: answers the frame ENOTCONN. */
void afr_vop_cancel(struct afr_heal_req *r);

int afr_heal_data(struct afr_priv *p, const struct bfs_gfid *g, int force); /* -heal-data.c */
int afr_heal_meta(struct afr_priv *p, const struct bfs_gfid *g, int force); /* -heal-meta.c */
int afr_heal_entry(struct afr_priv *p, const struct bfs_gfid *g);    /* -heal-entry.c */

#endif
