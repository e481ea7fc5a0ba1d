/*
 * disperse.h — private to cluster/disperse: N children, redundancy R, k =
 * N - R data fragments per stripe of k * chunk bytes, Reed-Solomon parity
 * (src/ec), versions/dirty/size xattrs on every brick, transactions of the
 * shared cluster library (docs/design/disperse.md).
 *
 * Objects and lifetimes:
 *   struct ec_priv    one per translator instance (xl->private), init..fini.
 *   struct ec_inode   per inode (ctx slot): good children per type, the
 *                     file size, the shared data lock object (and, for a
 *                     directory, the shared entry lock). Made on first
 *                     need, freed at forget (a held lock keeps the inode).
 *   struct ec_fd      per fd (ctx slot): where it is open, readdir child.
 *   struct ec_wtxn    one data change (disperse-write.c); struct ec_mtxn
 *                     one metadata or entry change (disperse-meta.c).
 *   struct ec_rd      one read (disperse-read.c); struct ec_lookup
 *                     (disperse-lookup.c); struct ec_fan (disperse-fd.c).
 *   heal jobs         disperse-heal.c, on the shared heal queue (lib/healq).
 */
#ifndef BFS_XL_DISPERSE_H
#define BFS_XL_DISPERSE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/fanout.h"
#include "core/fops-util.h"
#include "core/xlator.h"
#include "ec/ec-codec.h"
#include "xlators/lib/cluster.h"
#include "xlators/lib/healq.h"
#include "xlators/lib/listing.h"
#include "xlators/lib/txn.h"

#define EC_MAX BFS_CLUSTER_MAX
#define EC_KEY_PREFIX "trusted.brickfs.ec."
#define EC_KEY_VERSION EC_KEY_PREFIX "version"
#define EC_KEY_DIRTY EC_KEY_PREFIX "dirty"
#define EC_KEY_SIZE EC_KEY_PREFIX "size"
#define EC_XATTR_REQ "xattr-req" /* lookup xdata: comma-separated xattr names */
#define EC_GFID_REQ "gfid-req"   /* xdata BIN[16]: GFID of a new entry */
#define EC_NTYPES BFS_TXN_NTYPES
#define EC_ROW_LEN (8 * EC_NTYPES)
#define EC_DATA BFS_TXN_DATA
#define EC_META BFS_TXN_METADATA
#define EC_ENTRY BFS_TXN_ENTRY

struct ec_priv {
    struct bfs_cluster cl;       /* the shared library's view */
    struct bfs_xl *xl;
    int n, k, r;
    uint64_t chunk;              /* C: bytes of one fragment of one stripe */
    uint64_t stripe;             /* k * C */
    struct bfs_ec *codec;
    /* options (atomics; reconfigure) */
    int heal_count;              /* background heals queued at most; 0: foreground */
    uint64_t heal_lock_ms;       /* cluster.heal-lock-timeout: a busy heal lock retried so long */
    bool eager_entry;            /* disperse.other-eager-lock: a directory's entry lock is kept
                                  * between its entry changes (disperse-meta.c) */
    bool heal_on[EC_NTYPES];
    /* notify */
    pthread_mutex_t lock;        /* reported/announced, ctx creation */
    uint32_t reported;
    bool announced_up;
    uint64_t gen;                /* atomic: bumped by every child event */
    uint64_t dseq;               /* atomic: bumped by every data change (sizes in motion) */
    uint32_t wadd;               /* atomic: children whose brick acknowledged a write carrying
                                  * the size delta (lib/wadd-wire.h) since they last came up */
    struct bfs_healq *healq;
    /* statistics (atomic) */
    uint64_t n_txn, n_rmw, n_decode, n_heal_ok, n_heal_fail;
    uint64_t n_wlent, n_wcopied; /* writes encoded from the caller's bytes / copied */
    uint64_t n_lookup, n_lookup_early; /* lookups/stats answered; of them before every reply */
    uint64_t n_lookup_waited;          /* replies in when they were answered (sum) */
    uint64_t n_lookup_tail_ns;         /* early answers: from the answer to the last reply (sum) */
};

/* What the children said about one inode (lookup, refresh, heal). */
struct ec_state {
    uint32_t valid;                      /* answered with the object */
    struct bfs_iatt attr[EC_MAX];
    int64_t version[EC_MAX][EC_NTYPES];
    int64_t dirty[EC_MAX][EC_NTYPES];
    uint64_t size[EC_MAX];
};

/* The combination (ec_combine): pure. */
struct ec_view {
    int rc;                      /* 0, or -errno when no child has it */
    int child;                   /* a good child whose attributes answer */
    uint32_t good[EC_NTYPES];    /* highest version (data: and the common size) */
    uint32_t present;            /* answered with the chosen GFID */
    uint64_t size;               /* regular files: the good size */
    uint32_t heal;               /* bit per type a lookup should heal (lag, or dirty with
                                  * every child present) */
    uint32_t lag;                /* bit per type with a present child not good (stale) */
    uint32_t dirty;              /* bit per type with dirty marks on good children */
    bool entry_mismatch;         /* missing (or another GFID) on some children */
};

struct ec_inode {
    pthread_mutex_t lock;        /* guards the fields below but dlock */
    uint64_t gen;                /* priv->gen when filled; 0: never */
    uint32_t type;               /* S_IFMT, 0 unknown */
    uint32_t good[EC_NTYPES];
    uint64_t size;               /* regular files: the size (authoritative while we hold dlock) */
    struct bfs_txn_lock dlock;   /* shared (eager) data lock */
    struct bfs_txn_lock elock;   /* directories: shared (eager) entry lock, whole directory */
    uint64_t win;                /* dlock.window in which size and good were read */
    uint64_t cseq;               /* bumped when a change, a heal or a locked refresh sets the
                                  * good children: a lookup answered early (disperse-lookup.c)
                                  * does not write its older view over theirs */
    /* size changes that failed on every child while a later one had moved
     * the size past them already (disperse-write.c, undo_size): rolled
     * back too if that later one fails as well; forgotten when one succeeds */
    int nundone;
    struct ec_undone {
        uint64_t old_size, new_size;
        uint32_t moved;          /* children whose size counter took it */
    } undone[4];
};

struct ec_fd {
    pthread_mutex_t lock;
    uint32_t opened;             /* children where open/create/opendir succeeded */
    struct bfs_listing listing;  /* readdir's child and the listing's end (lib/listing.h) */
    struct bfs_gfid gfid;
    uint32_t flags;              /* the caller's open flags */
};

/* ---- disperse.c ---- */
static inline struct ec_priv *ec_priv(const struct bfs_xl *xl)
{
    return xl->private;
}
uint32_t ec_up(const struct ec_priv *p);
uint32_t ec_all(const struct ec_priv *p);
/* Quorum of a change (disperse.quorum-count, default k). */
int ec_quorum(const struct ec_priv *p);
/* Child faults a read may fail over from. */
bool ec_child_fault(int rc);

/* ---- disperse-changelog.c ---- */
extern const struct bfs_changelog_ops ec_changelog_ops;
void ec_row_encode(const int64_t row[EC_NTYPES], uint8_t out[EC_ROW_LEN]);
/* Reads child i's version, dirty and size from x into s (marks i valid). */
void ec_state_add(struct ec_state *s, int i, const struct bfs_iatt *attr,
                  const struct bfs_dict *x);
/* A copy of xdata (may be NULL) asking lookups for our keys too. NULL: ENOMEM. */
struct bfs_dict *ec_lookup_xdata(const struct bfs_dict *xdata);
/* A copy of a reply's xdata without our keys (NULL stays NULL). */
struct bfs_dict *ec_xdata_strip(const struct bfs_dict *xdata);
/* Combines what the children of `asked` said (rc[i] their answers). */
void ec_combine(const struct ec_priv *p, const struct ec_state *s, uint32_t asked,
                const int *rc, struct ec_view *v);
/* Fragment bytes a file of `size` has on each child. */
uint64_t ec_frag_size(const struct ec_priv *p, uint64_t size);
/* The file's attributes from child i's: size, blocks. */
void ec_fix_iatt(const struct ec_priv *p, struct bfs_iatt *a, uint64_t size);

/* ---- disperse-inode.c ---- */
struct bfs_inode *ec_inode_of_loc(struct bfs_xl *xl, const struct bfs_loc *loc);
struct bfs_inode *ec_inode_of_gfid(struct bfs_xl *xl, const struct bfs_gfid *g, uint32_t type);
struct bfs_inode *ec_inode_of_fd(struct bfs_xl *xl, struct bfs_fd *fd);
struct ec_inode *ec_ictx(struct bfs_xl *xl, struct bfs_inode *inode);
/* The context of an inode already known (no creation), or NULL. */
struct ec_inode *ec_ictx_peek(struct bfs_xl *xl, struct bfs_inode *inode);
bool ec_ictx_fresh(const struct ec_priv *p, struct ec_inode *c);
/* After a lookup or refresh wound when priv->dseq was `seq`: the size and
 * the good data children are taken only if no data change started or
 * ended since (else what the children said may predate it). */
void ec_ictx_update(const struct ec_priv *p, struct ec_inode *c, uint32_t mode,
                    const struct ec_view *v, uint64_t seq);
/* The same, only if c->cseq is still cseq (nothing newer set the good
 * children since it was read). */
void ec_ictx_update_if(const struct ec_priv *p, struct ec_inode *c, uint32_t mode,
                       const struct ec_view *v, uint64_t seq, uint64_t cseq);
/* c->cseq now (0 for no context). */
uint64_t ec_ictx_cseq(struct ec_inode *c);
static inline uint64_t ec_dseq(const struct ec_priv *p)
{
    return __atomic_load_n(&p->dseq, __ATOMIC_ACQUIRE);
}
/* What a refresh read inside lock window `win` (no change can race it):
 * taken whole, and the window remembered. */
void ec_ictx_window(const struct ec_priv *p, struct ec_inode *c, uint32_t mode,
                    const struct ec_view *v, uint64_t win);
/* Was the context read inside window win? */
bool ec_ictx_in_window(struct ec_inode *c, uint64_t win);
/* Children that failed a change of type t are no longer good. */
void ec_ictx_failed(struct ec_inode *c, int t, uint32_t failed);
uint32_t ec_ictx_good(struct ec_inode *c, int t, uint32_t *type, uint64_t *size);
void ec_forget(struct bfs_xl *xl, struct bfs_inode *inode);
struct ec_fd *ec_fdctx(struct bfs_xl *xl, struct bfs_fd *fd, bool create);
uint32_t ec_fd_opened(struct bfs_xl *xl, struct bfs_fd *fd);
void ec_fd_set_opened(struct bfs_xl *xl, struct bfs_fd *fd, uint32_t opened,
                      const struct bfs_gfid *gfid, uint32_t flags);
void ec_release(struct bfs_xl *xl, struct bfs_fd *fd);

/* ---- disperse-lookup.c ---- */
int ec_lookup(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_lookup_req *req);
void ec_lookup_resume(struct bfs_xl *xl, struct bfs_frame *frame, struct bfs_lookup_req *req);
int ec_stat(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_stat_req *req);
int ec_fstat(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fstat_req *req);
/* Refresh helpers shared with reads: lookups by GFID with our keys to mask
 * (expect included), and their gathering. */
int ec_refresh_wind(struct bfs_op *op, const struct ec_priv *p, const struct bfs_gfid *g,
                    uint32_t mask);
void ec_refresh_gather(const struct ec_priv *p, const struct bfs_op *op, uint32_t asked,
                       struct ec_state *s, int *rc);

/* ---- disperse-read.c ---- */
int ec_read(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_read_req *req);
int ec_access(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_access_req *req);
int ec_readlink(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_readlink_req *req);
int ec_getxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_getxattr_req *req);
int ec_fgetxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fgetxattr_req *req);
int ec_seek(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_seek_req *req);
int ec_readdir(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_readdir_req *req);
/* Chooses k children of cand to read from: the data children when all are
 * there, else data children first. 0 if cand has fewer than k. */
uint32_t ec_pick_k(const struct ec_priv *p, uint32_t cand);
/* Decodes nstripes stripes from the fragments of `have` (frag[i] each
 * nstripes * C bytes) into out. 0 or -errno. */
int ec_decode(struct ec_priv *p, uint8_t *const *frag, uint32_t have, uint64_t nstripes,
              uint8_t *out);

/* ---- disperse-write.c ---- */
int ec_write(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_write_req *req);
int ec_truncate(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_truncate_req *req);
int ec_ftruncate(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_ftruncate_req *req);
int ec_fallocate(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fallocate_req *req);
int ec_discard(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_discard_req *req);
int ec_zerofill(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_zerofill_req *req);
/* open with O_TRUNC: ftruncate to 0 through fd, answered as open with rep. */
int ec_open_trunc(struct bfs_frame *frame, struct bfs_xl *xl, struct bfs_fd *fd,
                  const struct bfs_open_rep *rep);

/* ---- disperse-meta.c: metadata and entry transactions ---- */
int ec_setattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_setattr_req *req);
int ec_fsetattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fsetattr_req *req);
int ec_setxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_setxattr_req *req);
int ec_fsetxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fsetxattr_req *req);
int ec_removexattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_removexattr_req *req);
int ec_fremovexattr(struct bfs_frame *f, struct bfs_xl *xl,
                    const struct bfs_fremovexattr_req *req);
int ec_create(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_create_req *req);
int ec_mknod(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_mknod_req *req);
int ec_mkdir(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_mkdir_req *req);
int ec_symlink(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_symlink_req *req);
int ec_link(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_link_req *req);
int ec_unlink(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_unlink_req *req);
int ec_rmdir(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_rmdir_req *req);
int ec_rename(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_rename_req *req);

/* ---- disperse-fd.c ---- */
int ec_open(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_open_req *req);
int ec_opendir(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_opendir_req *req);
int ec_flush(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_flush_req *req);
int ec_fsync(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fsync_req *req);
int ec_fsyncdir(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fsyncdir_req *req);
int ec_statfs(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_statfs_req *req);
int ec_lk(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_lk_req *req);
int ec_inodelk(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_inodelk_req *req);
int ec_finodelk(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_finodelk_req *req);
int ec_entrylk(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_entrylk_req *req);
int ec_fentrylk(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fentrylk_req *req);
int ec_xattrop(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_xattrop_req *req);
int ec_fxattrop(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fxattrop_req *req);
int ec_lease(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_lease_req *req);
int ec_copy_file_range(struct bfs_frame *f, struct bfs_xl *xl,
                       const struct bfs_copy_file_range_req *req);
/* Opens fd (O_RDWR) on every up child, then posts then(arg, rc) to the loop
 * (or runs it). For truncate by path. 0, or -ENOMEM (then is not called). */
int ec_open_internal(struct bfs_frame *frame, struct bfs_xl *xl, struct bfs_fd *fd,
                     const struct bfs_gfid *g, void (*then)(void *arg, int rc), void *arg);

/* ---- disperse-heal.c ---- */
struct ec_heal_req {
    struct bfs_gfid gfid;        /* the inode (null: only the parent) */
    uint32_t types;
    struct bfs_gfid pargfid;     /* a directory whose entries to heal first (null: none) */
    struct bfs_frame *frame;     /* foreground: answered by a lookup afterwards ... */
    struct bfs_lookup_req *req;  /* ... of this request (taken) */
    int vop;                     /* EC_VOP_*: a self-heal daemon's question (frame: getxattr) */
    bool once;                   /* its locks tried once (dirty marks only: often a window) */
};

enum { EC_VOP_NONE = 0, EC_VOP_STATUS, EC_VOP_HEAL };
int ec_heal_start(struct ec_priv *p);
void ec_heal_stop(struct ec_priv *p);
int ec_heal_request(struct ec_priv *p, const struct ec_heal_req *r);
/* The heals themselves (blocking; on the heal thread). once: the locks are
 * tried one round only (-EAGAIN when busy). 0 or -errno. */
int ec_heal_data(struct ec_priv *p, const struct bfs_gfid *g, bool once);
int ec_heal_meta(struct ec_priv *p, const struct bfs_gfid *g, bool once);
int ec_heal_entry(struct ec_priv *p, const struct bfs_gfid *g, bool once);

/* ---- disperse-heal-api.c: the self-heal daemon's virtual xattrs ---- */
#define EC_VKEY_PREFIX "brickfs.heal."
/* getxattr of a "brickfs.heal.*" name: answered here (true), else false. */
bool ec_vop_getxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_getxattr_req *req);
/* On the heal thread: answers r->frame. */
void ec_vop_run(struct ec_priv *p, struct ec_heal_req *r);

#endif
