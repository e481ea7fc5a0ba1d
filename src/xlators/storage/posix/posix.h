/*
 * posix.h — private to storage/posix: the brick translator that implements
 * every fop over a local directory.
 *
 * On-brick format (see docs at the top of posix-handle.c):
 *   every entry carries its GFID in the xattr trusted.brickfs.gfid;
 *   <brick>/.brickfs/ab/cd/<gfid> is its handle: a hard link for files,
 *   symlinks and special files, a symlink "../../PP/QQ/<pgfid>/<name>" for
 *   directories (GlusterFS's scheme).
 *
 * Threads: every fop is a job (bfs__px_submit, posix.c): cheap ones called
 * on the event-loop thread run inline there, the others are copied
 * (bfs_FOP_req_dup) and run on the process's worker pool, answering from
 * the worker. While a job runs, its thread carries the caller's
 * fsuid/fsgid/groups (posix-creds.c); handle maintenance switches back to
 * root for a moment.
 *
 * Objects and lifetimes:
 *   struct px_priv  one per translator instance (xl->private), init..fini.
 *   struct px_fd    one per open fd (bfs_fd ctx slot), open..release.
 *   struct px_job   one per fop call, submit..answer (on the stack when inline).
 *   struct px_obj   what a fop resolved: an O_PATH fd, its stat and GFID;
 *                   on the worker's stack, closed before the job answers.
 */
#ifndef BFS_XL_STORAGE_POSIX_H
#define BFS_XL_STORAGE_POSIX_H

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/event.h"
#include "core/xlator.h"

#define PX_GFID_XATTR "trusted.brickfs.gfid"
#define PX_INTERNAL_PREFIX "trusted.brickfs."
#define PX_INTERNAL_KEY "brickfs-internal" /* xdata INT 1: a brick-side translator */
/* distribute's mark on a source the rebalance froze for a move, with mode
 * bits PX_FROZEN_BITS (docs/design/rebalance.md; posix-inode.c keeps them) */
#define PX_MIGRATING_XATTR "trusted.brickfs.dht.migrating"
#define PX_FROZEN_BITS (S_ISVTX | S_ISGID)
/* xdata INT N on an O_RDONLY open: a file of at most N bytes (N <= PX_PREFETCH_MAX)
 * comes back whole in the reply's xdata as a BIN of the same key
 * (protocol/client, client-prefetch.c). */
#define PX_OPEN_PREFETCH_KEY "open-prefetch"
#define PX_PREFETCH_MAX (128 * 1024)
#define PX_GFID_REQ_KEY "gfid-req"         /* xdata BIN[16]: GFID for a new entry */
#define PX_CREATED_KEY "brickfs-created"   /* create reply xdata INT 1: a new file */
#define PX_HIDDEN ".brickfs"
#define PX_DEFER_FILE "unlink-pending" /* in PX_HIDDEN: handles being removed (posix-defer.c) */
#define PX_DEFER_SLOTS 64
#define PX_VKEY_PATH "brickfs.path"     /* virtual getxattr: a directory's path */
#define PX_NLOCKS 256              /* striped per-GFID mutexes */
#define PX_HPATH_LEN 48            /* "ab/cd/<36 chars>" + NUL, with room */
#define PX_PROC_FD_LEN 40          /* "/proc/self/fd/<int>" + NUL */
#define PX_READ_MAX (32u << 20)    /* longest single read; a longer one is short */

/* ---- instance ---- */

/* A write or read of at least min bytes (0: never) goes with RWF_DONTCACHE
 * until the kernel refuses the flag once (off, atomic); done counts them
 * (relaxed atomics, for dump). */
struct px_uncached {
    uint64_t min;
    bool off;
    uint64_t done;
};

/* Big reads straight from the disk into the reply buffer (posix-direct.c,
 * docs/design/uncached-io.md "Direct reads"): want is the option
 * storage.direct-read; off: the file system refused O_DIRECT once (atomic);
 * done and cached count the big reads that went direct and those left to
 * the page cache because it held all of the range or some of it was dirty
 * (relaxed atomics). */
struct px_direct {
    bool want;
    bool off;
    uint64_t done;
    uint64_t cached;
};
#define PX_DIO_ALIGN 4096u /* offset, length and buffer of a direct read */

struct px_priv {
    char *dir;                  /* the brick directory, as configured */
    const char *brick;          /* brick-name, else dir: for log lines */
    int root_fd;                /* O_RDONLY|O_DIRECTORY on the brick root */
    int handles_fd;             /* O_RDONLY|O_DIRECTORY on <brick>/.brickfs */
    dev_t dev;                  /* st_dev of the brick root */
    struct bfs_workers *workers; /* borrowed: xl->graph->proc->workers */
    struct bfs_loop *loop;      /* borrowed: xl->graph->proc->loop (may be NULL) */
    struct px_cache *cache;     /* GFID -> checked handle, recent O_PATH fds; NULL: off */
    bool inline_fops;           /* option inline-fops: cheap fops on the loop (posix.c) */
    /* Streaming writes and reads (posix-io.c write_at and read_at,
     * docs/design/uncached-io.md). */
    struct px_uncached uc_write, uc_read;
    struct px_direct direct;
    /* Handle folders .brickfs/ab/cd known to exist, one bit each (index
     * ab * 256 + cd; relaxed atomics): a new handle skips their mkdir. */
    uint64_t hdir_known[65536 / 64];
    /* Striped mutexes. Entry locks (by parent GFID) make "resolve a name,
     * change it, fix the handles" atomic among fops on one directory, as the
     * kernel's directory lock does for one syscall; inode locks (by GFID)
     * guard a file's name count and xattrop. Order: at most two entry
     * locks, then at most two inode locks, each pair in address order. */
    pthread_mutex_t elocks[PX_NLOCKS];
    pthread_mutex_t ilocks[PX_NLOCKS];
    /* Handles removed after the unlink answered (posix-defer.c). */
    int defer_fd;               /* .brickfs/unlink-pending, -1: not deferring */
    bool defer_init;            /* bfs__px_defer_init ran (fini undoes it) */
    pthread_mutex_t defer_lock;
    pthread_cond_t defer_idle;  /* defer_busy became 0 */
    uint64_t defer_busy;        /* slots in use, one bit each (PX_DEFER_SLOTS) */
    /* Group commit of the journal: a worker syncs it before removing a
     * handle, unless a sync that started after its slot's write is done. */
    pthread_mutex_t defer_sync_lock;
    uint64_t defer_written;     /* slot writes done (atomic), numbered from 1 */
    uint64_t defer_synced;      /* writes up to this number are on disk (atomic) */
    /* Orphan handles left by a crash, removed after start (posix-orphan.c). */
    pthread_t scan_thread;
    bool scan_started;          /* scan_thread runs or ran (fini joins it) */
    bool scan_stop;             /* fini asks it to stop (atomic) */
    bool scan_done;             /* it finished its pass (atomic) */
    uint64_t scan_removed;      /* orphan handles it removed (atomic) */
    uint64_t calls[BFS_FOP_COUNT];  /* statistics for dump (relaxed atomics) */
    uint64_t errors[BFS_FOP_COUNT];
};

/* ---- fds (bfs_fd ctx slot) ---- */

struct px_fd {
    int fd;                     /* the real kernel fd (a directory's: dirfd(dir)) */
    DIR *dir;                   /* opendir only */
    struct bfs_gfid gfid;       /* null when the file has none */
    bool is_root;               /* directory fd on the brick root: hide .brickfs */
    pthread_mutex_t lock;       /* readdir position */
    uint64_t pos;               /* d_off after the last entry returned */
    int dfd;                    /* its O_DIRECT twin for big reads, or PX_DFD_* (atomic) */
};
#define PX_DFD_NONE (-1)        /* not opened yet */
#define PX_DFD_NEVER (-2)       /* cannot be (write-only, refused): plain reads */

/* ---- jobs ---- */

struct px_job;
typedef int (*px_work_fn)(struct px_job *j, const void *req, void *rep);

struct px_job {
    struct bfs_frame *frame;
    struct bfs_xl *xl;
    struct px_priv *priv;
    int fop;
    px_work_fn fn;
    void *req;                  /* worker job: our deep copy (bfs_fop_info[fop].req_copy_into);
                                 * inline job: the caller's request */
    bool internal;              /* xdata carries brickfs-internal = 1 */
    bool inline_run;            /* running on the event loop, not on a worker */
};

/* What a fop running inline (j->inline_run) returns when it finds that the
 * rest may block for long (a create that would truncate an existing file):
 * it must not have changed anything yet; the job is then handed to the
 * workers, which run the fop again from the start. Never seen by callers. */
#define PX_EWORKER 4097

/* Copies req and queues fn on the worker pool. 0, or -ENOMEM (nothing done). */
int bfs__px_submit(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req,
                   px_work_fn fn);

/* Defines the fop entry bfs__px_FOP (calling thread: queue only) over a
 * worker function `static int do_FOP(struct px_job *, const REQ *, REP *)`. */
#define PX_FOP_DEFINE(fop, FOP_ENUM)                                                         \
    static int px_work_##fop(struct px_job *j, const void *req, void *rep)                   \
    {                                                                                        \
        return do_##fop(j, req, rep);                                                        \
    }                                                                                        \
    int bfs__px_##fop(struct bfs_frame *frame, struct bfs_xl *xl,                            \
                      const struct bfs_##fop##_req *req)                                     \
    {                                                                                        \
        return bfs__px_submit(frame, xl, FOP_ENUM, req, px_work_##fop);                      \
    }

/* Every fop this translator implements (lk, inodelk, entrylk and lease are
 * features/locks' business: left out, they answer -ENOSYS). */
#define PX_FOPS(X)                                                                           \
    X(lookup) X(stat) X(fstat) X(access) X(readlink) X(mknod) X(mkdir) X(unlink) X(rmdir)    \
    X(symlink) X(rename) X(link) X(truncate) X(ftruncate) X(open) X(create) X(read)          \
    X(write) X(flush) X(fsync) X(opendir) X(readdir) X(fsyncdir) X(statfs) X(setxattr)       \
    X(fsetxattr) X(getxattr) X(fgetxattr) X(removexattr) X(fremovexattr) X(xattrop)          \
    X(fxattrop) X(setattr) X(fsetattr) X(fallocate) X(discard) X(zerofill) X(seek)           \
    X(copy_file_range) X(rchecksum)

#define PX_DECLARE_FOP(fop)                                                                  \
    int bfs__px_##fop(struct bfs_frame *frame, struct bfs_xl *xl,                            \
                      const struct bfs_##fop##_req *req);
PX_FOPS(PX_DECLARE_FOP)
#undef PX_DECLARE_FOP

/* ---- the syscall table (posix-sys.c) ----
 * Every system call that touches the brick goes through bfs__px_sys, so a
 * test can replace one (fault injection, SQLite's aSyscall idea) with
 * bfs_posix_sys_override(). Same signatures and errno convention as libc. */
#define PX_SYSCALLS(X)                                                                       \
    X(openat, int, (int, const char *, int, mode_t))                                         \
    X(close, int, (int))                                                                     \
    X(fstat, int, (int, struct stat *))                                                      \
    X(fstatat, int, (int, const char *, struct stat *, int))                                 \
    X(mkdirat, int, (int, const char *, mode_t))                                             \
    X(mknodat, int, (int, const char *, mode_t, dev_t))                                      \
    X(symlinkat, int, (const char *, int, const char *))                                     \
    X(linkat, int, (int, const char *, int, const char *, int))                              \
    X(unlinkat, int, (int, const char *, int))                                               \
    X(renameat2, int, (int, const char *, int, const char *, unsigned))                      \
    X(readlinkat, ssize_t, (int, const char *, char *, size_t))                              \
    X(openat_beneath, int, (int, const char *, int))                                         \
    X(pread, ssize_t, (int, void *, size_t, off_t))                                          \
    X(pwrite, ssize_t, (int, const void *, size_t, off_t))                                   \
    X(pwritev2, ssize_t, (int, const struct iovec *, int, off_t, int))                       \
    X(preadv2, ssize_t, (int, const struct iovec *, int, off_t, int))                        \
    X(cachestat, int, (int, const struct px_cachestat_range *, struct px_cachestat *,         \
                       unsigned))                                                            \
    X(ftruncate, int, (int, off_t))                                                          \
    X(fallocate, int, (int, int, off_t, off_t))                                              \
    X(fsync, int, (int))                                                                     \
    X(fdatasync, int, (int))                                                                 \
    X(lseek, off_t, (int, off_t, int))                                                       \
    X(copy_file_range, ssize_t, (int, off_t *, int, off_t *, size_t, unsigned))              \
    X(fstatvfs, int, (int, struct statvfs *))                                                \
    X(fchmod, int, (int, mode_t))                                                            \
    X(fchmodat, int, (int, const char *, mode_t, int))                                       \
    X(fchown, int, (int, uid_t, gid_t))                                                      \
    X(fchownat, int, (int, const char *, uid_t, gid_t, int))                                 \
    X(futimens, int, (int, const struct timespec *))                                         \
    X(utimensat, int, (int, const char *, const struct timespec *, int))                     \
    X(faccessat2, int, (int, const char *, int, int))                                        \
    X(getxattr, ssize_t, (const char *, const char *, void *, size_t))                       \
    X(setxattr, int, (const char *, const char *, const void *, size_t, int))                \
    X(listxattr, ssize_t, (const char *, char *, size_t))                                    \
    X(removexattr, int, (const char *, const char *))                                        \
    X(fgetxattr, ssize_t, (int, const char *, void *, size_t))                               \
    X(fsetxattr, int, (int, const char *, const void *, size_t, int))                        \
    X(flistxattr, ssize_t, (int, char *, size_t))                                            \
    X(fremovexattr, int, (int, const char *))

struct iovec;
struct statvfs;
struct timespec;
/* cachestat(2), Linux 6.5 (Debian 12's headers predate it). */
struct px_cachestat_range {
    uint64_t off, len;
};
struct px_cachestat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
#define PX_SYS_FIELD(name, ret, args) ret(*name) args;
struct px_sys {
    PX_SYSCALLS(PX_SYS_FIELD)
};
#undef PX_SYS_FIELD
extern struct px_sys bfs__px_sys;
#define SYS bfs__px_sys

/* Exported for tests (dlsym on the module): replaces the named system call;
 * fn NULL restores libc's. *old (may be NULL) receives the previous one.
 * 0 or -ENOENT (no such name). Not thread-safe: call while no fop runs. */
__attribute__((visibility("default"))) int bfs_posix_sys_override(const char *name, void *fn,
                                                                  void **old);

/* ---- xattrs of a new entry (posix-xattr.c) ---- */

/* Sets on a new entry (fd: its O_PATH fd) every trusted.brickfs.dht.* key
 * of xdata, as setxattr would for the same caller (so only for a request
 * with brickfs-internal = 1): 1 when some were set, 0 when xdata has none,
 * or -errno (keys before the failing one stay set). */
int bfs__px_entry_xattrs(struct px_job *j, int fd, const struct bfs_dict *xdata);

/* ---- big reads with O_DIRECT (posix-direct.c) ---- */

/* Whether big reads may go direct now (option on, uncached reads on, not
 * refused by the file system). */
bool bfs__px_direct_on(struct px_priv *p);
/* A buffer for a read of size bytes: aligned for a direct read when one
 * may be (freed with free()); *room receives its usable size (>= size). */
void *bfs__px_read_buf(struct px_priv *p, size_t size, size_t *room);
/* Reads len bytes at off into buf (room bytes usable) with O_DIRECT when
 * the read is big, aligned and not in the brick's page cache: 1 with the
 * bytes read in *n (at most len), 0 when it did not (read it otherwise),
 * or -errno. */
int bfs__px_direct_read(struct px_job *j, struct px_fd *pf, void *buf, size_t len, size_t room,
                        off_t off, size_t *n);
/* Closes pf's O_DIRECT twin, if any. */
void bfs__px_direct_close(struct px_fd *pf);

/* ---- credentials (posix-creds.c) ---- */

void bfs__px_creds_init(void);                      /* once per process */
void bfs__px_creds_enter(const struct bfs_stack *st); /* job start: become the caller */
void bfs__px_creds_leave(void);                      /* job end: back to root */
void bfs__px_root_begin(void);                       /* nestable: act as root */
void bfs__px_root_end(void);
/* Per-thread umask for creating calls (the thread gets its own fs_struct
 * once, so the process umask is never touched). Returns the old one, or
 * (mode_t)-1 after applying um to *mode itself when that is impossible. */
mode_t bfs__px_umask_push(mode_t um, mode_t *mode);
void bfs__px_umask_pop(mode_t old);

/* ---- handles, GFIDs and resolution (posix-handle.c) ---- */

struct px_obj {
    int fd;                 /* O_PATH (a folder found by its cached path: O_RDONLY),
                             * opened without following symlinks; -1 if none */
    bool io;                /* fd is open for I/O instead (create's): f*xattr work on it */
    struct stat st;
    struct bfs_gfid gfid;   /* null if the entry carries none */
};
#define PX_OBJ_INIT {.fd = -1}

void bfs__px_obj_close(struct px_obj *o);
void bfs__px_proc_path(int fd, char out[PX_PROC_FD_LEN]);
void bfs__px_handle_path(const struct bfs_gfid *g, char out[PX_HPATH_LEN]);
pthread_mutex_t *bfs__px_elock_for(struct px_priv *p, const struct bfs_gfid *pargfid);
pthread_mutex_t *bfs__px_ilock_for(struct px_priv *p, const struct bfs_gfid *g);
/* Locks a and b (either may be NULL, or both the same) in address order. */
void bfs__px_lock2(pthread_mutex_t *a, pthread_mutex_t *b);
void bfs__px_unlock2(pthread_mutex_t *a, pthread_mutex_t *b);

int bfs__px_gfid_get(int fd, struct bfs_gfid *out);   /* any fd incl. O_PATH; -ENODATA */
/* GFID for a new entry: xdata gfid-req if present (16-byte BIN), else random. */
int bfs__px_gfid_for_new(const struct bfs_dict *xdata, struct bfs_gfid *out, bool *requested);

/* Resolution. Every result is opened relative to the brick root without
 * following any symlink; a GFID goes through its handle. */
int bfs__px_resolve_gfid(struct px_priv *p, const struct bfs_gfid *g, struct px_obj *o);
/* The path of directory g from the brick root ("/a/b"; "/" for the root),
 * from its handle chain (malloc'd into *out). -ESTALE if the chain is broken. */
int bfs__px_dir_path(struct px_priv *p, const struct bfs_gfid *g, char **out);
int bfs__px_resolve_entry(struct px_priv *p, const struct px_obj *par, const char *name,
                          struct px_obj *o);
/* By loc.gfid when set, else by (loc.pargfid, loc.name). */
int bfs__px_resolve_loc(struct px_priv *p, const struct bfs_loc *loc, struct px_obj *o);
/* The parent directory of an entry operation, after checking loc.name.
 * creating: a name that would create .brickfs at the root is -EPERM,
 * otherwise touching it is -ENOENT (it does not exist for clients). */
int bfs__px_resolve_parent(struct px_priv *p, const struct bfs_loc *loc, bool creating,
                           struct px_obj *par);

/* Gives a new (or GFID-less) entry its GFID and handle. dir: symlink
 * handle to (pargfid, name), else hard link of o->fd. */
int bfs__px_assign(struct px_priv *p, struct px_obj *o, const struct bfs_gfid *g,
                   const struct bfs_gfid *pargfid, const char *name);
/* Makes a directory's handle point at (pargfid, name), replacing it. */
int bfs__px_handle_dir_move(struct px_priv *p, const struct bfs_gfid *g,
                            const struct bfs_gfid *pargfid, const char *name);
/* Drops the handle of a file whose last name went (o->fd still open on it)
 * or of a removed directory. */
void bfs__px_handle_drop(struct px_priv *p, const struct px_obj *o);
/* posix-defer.c: the last name of the regular file o is gone; hands its
 * handle's removal (and o->fd, set to -1) to a worker after journaling it.
 * false: not deferred (other names, no slot, no journal): call handle_drop. */
bool bfs__px_handle_defer(struct px_priv *p, struct px_obj *o);
/* Whether an unlink now would find the journal usable and a slot free (a
 * hint: a slot may be taken in between, the unlink then drops the handle
 * itself). */
bool bfs__px_defer_ready(struct px_priv *p);
/* Replays the journal (orphaned handles of a crash go) and opens it. */
int bfs__px_defer_init(struct px_priv *p);
/* How many handle removals are handed off and not done yet. */
int bfs__px_defer_pending(struct px_priv *p);
/* Waits for every deferred removal, closes the journal. */
void bfs__px_defer_fini(struct px_priv *p);

/* posix-orphan.c: starts the background pass over the handle store that
 * removes orphan handles (a file's handle left without a name by a crash);
 * stop: asks it to stop and waits. */
void bfs__px_orphan_scan_start(struct px_priv *p);
void bfs__px_orphan_scan_stop(struct px_priv *p);
/* Lookup-time check and repair of the handle of o, found at (pargfid,
 * name): ok is a cheap check without locks; heal (under the parent's entry
 * lock) recreates a missing or stale handle. */
bool bfs__px_handle_ok(struct px_priv *p, const struct px_obj *o, const struct bfs_gfid *pargfid,
                       const char *name);
void bfs__px_handle_heal(struct px_priv *p, struct px_obj *o, const struct bfs_gfid *pargfid,
                         const char *name);
int bfs__px_handles_init(struct px_priv *p); /* .brickfs, root GFID and root handle */

/* ---- what the brick remembers about recent GFIDs (posix-cache.c) ----
 * Every function accepts a NULL cache (disabled) and then does nothing. */
struct px_cache;
#define PX_DPATH_MAX 256 /* longest directory path the cache keeps, with its NUL */
struct px_cache_stats {
    uint64_t entries, cap, fds, fdcap, hits, misses;
};
/* cap entries, fdcap of them with an O_PATH fd (fewer if RLIMIT_NOFILE is
 * low). NULL when cap is 0 or memory is short. */
struct px_cache *bfs__px_cache_new(size_t cap, size_t fdcap);
void bfs__px_cache_free(struct px_cache *c);
/* A live object by GFID (o gets a dup'd fd, its stat and g): 0, or
 * -ENOENT when the caller must take the handle path. */
int bfs__px_cache_get(struct px_cache *c, const struct bfs_gfid *g, struct px_obj *o);
/* o's handle is good: remember it, with a dup of its (O_PATH) fd. */
void bfs__px_cache_put(struct px_cache *c, const struct px_obj *o);
/* g's handle names the inode of st: remember that, without an fd. */
void bfs__px_cache_note(struct px_cache *c, const struct bfs_gfid *g, const struct stat *st);
/* Forget g (its handle was dropped). */
void bfs__px_cache_drop(struct px_cache *c, const struct bfs_gfid *g);
/* Whether g is known to have a good handle naming the inode of st. */
bool bfs__px_cache_knows(struct px_cache *c, const struct bfs_gfid *g, const struct stat *st);
/* Whether g is known as a directory (a hint: the walk still checks). */
bool bfs__px_cache_is_dir(struct px_cache *c, const struct bfs_gfid *g);
/* Directory g (stat st), whose handle names parent pg, was just reached by
 * walking its handle chain, along path (relative to the brick root):
 * remember that. */
void bfs__px_cache_note_dir(struct px_cache *c, const struct bfs_gfid *g, const struct stat *st,
                            const struct bfs_gfid *pg, const char *path);
/* The path the last walk of directory g took, copied into buf, and the
 * parent its handle named then (a hint: the caller checks the handle still
 * says so, opens the path beneath the root without symlinks and checks the
 * GFID found). 0, or -ENOENT (unknown, or longer than len - 1). */
int bfs__px_cache_dir_path(struct px_cache *c, const struct bfs_gfid *g, char *buf, size_t len,
                           struct bfs_gfid *pg);
void bfs__px_cache_stats(struct px_cache *c, struct px_cache_stats *s);

/* iatt of an object as clients see it (GFID, inode number from the GFID,
 * link count without the handle). */
void bfs__px_iatt(const struct stat *st, const struct bfs_gfid *g, struct bfs_iatt *ia);
int bfs__px_fstat_iatt(int fd, const struct bfs_gfid *g, struct bfs_iatt *ia);
/* After a client's change of a file's data (pre/post: its stats around it,
 * fd an open fd): a source the rebalance froze whose S_ISGID the kernel
 * cleared (a caller outside its group) gets the bits back, as root, and
 * *post shows them, so distribute repeats the change where the file is
 * going (posix-inode.c, docs/design/rebalance.md). */
void bfs__px_keep_frozen(int fd, const struct bfs_iatt *pre, struct bfs_iatt *post);

/* ---- fds (posix.c) ---- */

int bfs__px_fd_get(struct px_job *j, struct bfs_fd *fd, struct px_fd **out); /* -EBADF */
/* fxattrop ADD64 of deltas on pf's file (posix-xattr.c; a write's
 * counters, lib/wadd-wire.h). 0 or -errno. */
int bfs__px_fd_add64(struct px_job *j, struct px_fd *pf, const struct bfs_dict *deltas);
int bfs__px_fd_install(struct px_job *j, struct bfs_fd *fd, int realfd, DIR *dir,
                       const struct bfs_gfid *g);
/* Opens the object behind an O_PATH fd again with real flags, as the
 * current (caller's) identity: permissions are checked on the inode. */
int bfs__px_reopen(int pathfd, int flags);

/* ---- xattr helpers shared by entry and xattr code (posix-xattr.c) ---- */
bool bfs__px_key_internal(const char *key);

#endif
