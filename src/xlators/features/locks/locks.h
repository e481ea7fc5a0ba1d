/*
 * locks.h — internal interface of features/locks, the server-side lock
 * manager that sits above storage/posix on a brick.
 *
 * Four independent lock spaces live on every inode (keyed by GFID):
 *   - POSIX byte-range locks (lk), split and merged like fcntl(2), owner =
 *     (client connection, lock owner);
 *   - BSD flock locks (lk with BFS_LK_FLOCK), whole file, owner = (client, fd);
 *   - inodelk: byte-range locks in named domains for cluster translators,
 *     owner = (client, stack->lk_owner), never merged;
 *   - entrylk: name locks in a directory per domain (NULL name = the whole
 *     directory);
 * plus leases. Nothing is ever blocked on a thread: a blocking request
 * (SETLKW, entrylk LOCK) is queued with its frame and answered when granted.
 *
 * Lifetime: a struct pl_inode is created on the first lock request for a
 * GFID and is refcounted by the requests in flight (bfs__pl_inode_get/put);
 * it is freed on the last put once it holds no lock, waiter or lease.
 * Concurrency: the table mutex guards the hash and refs; each inode's mutex
 * guards its lists. Lock order: table, then inode. Frames are never answered
 * with a mutex held: grants are collected on a "wake" list under the inode
 * mutex and answered by bfs__pl_wake_all() after it is released.
 */
#ifndef BFS_XL_LOCKS_H
#define BFS_XL_LOCKS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/fops-util.h"
#include "core/xlator.h"
#include "pl-list.h"

struct json_object;

enum pl_kind { PL_POSIX = 1, PL_FLOCK, PL_INODELK, PL_ENTRYLK };

/* Who holds a lock: the client connection and an id within it (the lock
 * owner for POSIX/inodelk/entrylk, the fd pointer for flock). */
struct pl_owner {
    void *client;
    uint64_t id;
};

/* A granted lock, or the lock a waiter wants. */
struct pl_lock {
    struct pl_list link;
    enum pl_kind kind;
    struct pl_owner owner;
    uint32_t type;          /* F_RDLCK or F_WRLCK (F_UNLCK only transiently) */
    uint64_t start, end;    /* inclusive; end UINT64_MAX means "to end of file" */
    uint32_t pid;
    char *basename;         /* entrylk: the name; NULL = the whole directory */
    const struct bfs_fd *fd;/* POSIX/flock: the fd it came through (identity, no ref) */
    uint64_t since_ns;      /* granted at (or queued at, while waiting) */
    uint64_t notified_ns;   /* inodelk/entrylk: last contention notice to the holder */
};

/* A blocked request. It owns its lock until the grant moves it into a
 * granted list; it is answered exactly once (granted or cancelled). */
struct pl_waiter {
    struct pl_list link;
    struct pl_lock *lock;
    struct pl_lock *spare;   /* POSIX: a piece for the split a grant may need */
    struct bfs_frame *frame;
    int fop;                 /* BFS_FOP_LK, _INODELK, _FINODELK, _ENTRYLK, _FENTRYLK */
    struct bfs_flock reply;  /* lk: the lock the reply carries */
    struct bfs_fd *fd;       /* ref'd while waiting, NULL for loc-based fops */
    int rc;                  /* the answer, once on a wake list */
};

/* A named domain of inodelk and entrylk locks on one inode. */
struct pl_domain {
    struct pl_list link;
    char *name;
    struct pl_list inodelks, inodelk_blocked;
    struct pl_list entrylks, entrylk_blocked;
};

struct pl_lease {
    struct pl_list link;
    void *client;
    uint8_t id[16];
    uint32_t type; /* F_RDLCK / F_WRLCK */
    uint64_t since_ns;
};

struct pl_inode {
    struct pl_inode *hnext;
    struct bfs_gfid gfid;
    int refs;                  /* table mutex */
    pthread_mutex_t lock;      /* guards everything below */
    struct pl_list posix;      /* granted POSIX locks, sorted by start */
    struct pl_list flocks;     /* granted flock locks */
    struct pl_list lk_blocked; /* waiting POSIX and flock requests, FIFO */
    struct pl_list domains;    /* struct pl_domain */
    struct pl_list leases;
};

struct pl_priv {
    pthread_mutex_t lock;
    struct pl_inode **buckets;
    size_t nbuckets;
    size_t count;
    /* contention.c; atomic (reconfigure changes them) */
    bool notify;               /* notify-contention */
    uint64_t notify_delay_ns;  /* notify-contention-delay */
    uint64_t notices;          /* statistics: contention notices sent */
    /* clients between CLIENT_CLOSING and CLIENT_GONE (locks.c), under
     * lock; nclosing (atomic) lets a lock request skip the list when 0 */
    struct pl_closing *closing;
    unsigned nclosing;
};

/* ---- locks.c: inode table, owners, waiters ---- */
struct pl_inode *bfs__pl_inode_get(struct bfs_xl *xl, const struct bfs_gfid *g, bool create);
void bfs__pl_inode_put(struct bfs_xl *xl, struct pl_inode *pin);
/* Every inode of the table, each ref'd (put them). *n set; NULL when none or ENOMEM. */
struct pl_inode **bfs__pl_inode_all(struct bfs_xl *xl, size_t *n);
/* Finds (or with create, makes) a domain; pin->lock held. NULL if absent / ENOMEM. */
struct pl_domain *bfs__pl_domain_get(struct pl_inode *pin, const char *name, bool create);
/* Runs unlock(domain, want, wake) on gfid's domain under its lock, then
 * answers whoever it woke; -EINVAL when there is no such inode or domain. */
int bfs__pl_domain_drop(struct bfs_xl *xl, const struct bfs_gfid *gfid, const char *domain,
                        int (*unlock)(struct pl_domain *, const struct pl_lock *,
                                      struct pl_list *),
                        const struct pl_lock *want);

/* Is the client of frame closing (CLIENT_CLOSING heard, CLIENT_GONE not
 * yet)? Its lock requests are refused (-ENOTCONN): one queued now could
 * wait for ever for a lock of its own client, which CLIENT_GONE alone
 * releases, and CLIENT_GONE waits for the client's calls to end. */
bool bfs__pl_closing(struct bfs_xl *xl, const struct bfs_frame *frame);
/* pin->lock held: client's locks of list `granted` freed (true if any). */
bool bfs__pl_locks_drop(struct pl_list *granted, void *client);
/* pin->lock held: client's waiters of list `blocked` answered -ENOTCONN
 * (put on wake). */
void bfs__pl_waiters_drop(struct pl_list *blocked, void *client, struct pl_list *wake);

bool bfs__pl_owner_eq(const struct pl_owner *a, const struct pl_owner *b);
/* flock range -> inclusive [start, end]; -EINVAL on overflow. */
int bfs__pl_range(const struct bfs_flock *fl, uint64_t *start, uint64_t *end);
/* The GFID a loc names (loc.gfid, else loc.inode's); -EINVAL if none. */
int bfs__pl_loc_gfid(const struct bfs_loc *loc, struct bfs_gfid *out);

struct pl_lock *bfs__pl_lock_new(enum pl_kind kind, const struct pl_owner *owner, uint32_t type,
                                 uint64_t start, uint64_t end, uint32_t pid);
void bfs__pl_lock_free(struct pl_lock *lk);
struct pl_waiter *bfs__pl_waiter_new(struct bfs_frame *frame, int fop, struct bfs_fd *fd);
/* Moves w (already unlinked) to the wake list with answer rc. */
void bfs__pl_waiter_done(struct pl_waiter *w, int rc, struct pl_list *wake);
/* Answers and frees every waiter on wake. No mutex may be held. */
void bfs__pl_wake_all(struct pl_list *wake);

/* ---- posix.c: lk (POSIX and flock), flush, fd release ---- */
int bfs__pl_lk(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_lk_req *req);
int bfs__pl_flush(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_flush_req *req);
void bfs__pl_release(struct bfs_xl *xl, struct bfs_fd *fd);
/* pin->lock held: drop client's POSIX/flock waiters and (unless
 * waiters_only: the client is only closing) its locks, grant others. The
 * same for inodelks and entrylks below. */
void bfs__pl_posix_client_gone(struct pl_inode *pin, void *client, struct pl_list *wake,
                             bool waiters_only);

/* ---- inodelk.c ---- */
int bfs__pl_inodelk(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_inodelk_req *req);
int bfs__pl_finodelk(struct bfs_frame *frame, struct bfs_xl *xl,
                     const struct bfs_finodelk_req *req);
void bfs__pl_inodelk_client_gone(struct pl_inode *pin, void *client, struct pl_list *wake,
                             bool waiters_only);
/* Grants owner a whole-file write lock in domain on gfid at once (a create
 * asking for its new file's data lock): 0, -EAGAIN, -ENOMEM. */
int bfs__pl_inodelk_grant(struct bfs_xl *xl, const struct pl_owner *owner, const char *domain,
                          const struct bfs_gfid *gfid);
/* Releases owner's whole-file lock in domain on gfid (a piggybacked unlock). */
int bfs__pl_inodelk_drop(struct bfs_xl *xl, const struct pl_owner *owner, const char *domain,
                         const struct bfs_gfid *gfid);

/* ---- entrylk.c ---- */
int bfs__pl_entrylk(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_entrylk_req *req);
int bfs__pl_fentrylk(struct bfs_frame *frame, struct bfs_xl *xl,
                     const struct bfs_fentrylk_req *req);
void bfs__pl_entrylk_client_gone(struct pl_inode *pin, void *client, struct pl_list *wake,
                             bool waiters_only);
/* Releases owner's entry lock (domain, basename) in directory gfid. */
int bfs__pl_entrylk_drop(struct bfs_xl *xl, const struct pl_owner *owner, const char *domain,
                         const struct bfs_gfid *gfid, const char *basename);

/* ---- locks-txn.c: changelog steps piggybacked on other calls ---- */
int bfs__pl_xattrop(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_xattrop_req *req);
int bfs__pl_fxattrop(struct bfs_frame *frame, struct bfs_xl *xl,
                     const struct bfs_fxattrop_req *req);
int bfs__pl_create(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_create_req *req);
int bfs__pl_mknod(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_mknod_req *req);
int bfs__pl_mkdir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_mkdir_req *req);
int bfs__pl_symlink(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_symlink_req *req);
int bfs__pl_link(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_link_req *req);
int bfs__pl_unlink(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_unlink_req *req);
int bfs__pl_rmdir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_rmdir_req *req);

/* ---- locks-unlink.c: an unlink under an entry lock taken here ---- */
/* The unlink fop: with lib/lk-unlink-wire.h's keys, lock, check, unlink,
 * unlock; else bfs__pl_unlink. */
int bfs__pl_unlink_locked(struct bfs_frame *frame, struct bfs_xl *xl,
                          const struct bfs_unlink_req *req);

/* ---- contention.c: telling a holder that someone waits for its lock ---- */
/* Notices found under pin->lock, sent after it is released. */
struct pl_notice;
struct pl_notices {
    struct pl_notice *head;
};
/* pin->lock held: for every blocked inodelk/entrylk request, a notice to
 * the holder of each granted lock it waits for (at most one per lock per
 * notify-contention-delay). */
void bfs__pl_contention_scan(struct bfs_xl *xl, struct pl_inode *pin, struct pl_notices *out);
/* No mutex held: sends the notices up the graph (to protocol/server, which
 * delivers each to the holder's connection only) and frees them. */
void bfs__pl_contention_send(struct bfs_xl *xl, struct pl_notices *n);
/* Whether a and b conflict (inodelk.c, entrylk.c). */
bool bfs__pl_inodelk_conflicts(const struct pl_lock *a, const struct pl_lock *b);
bool bfs__pl_entrylk_conflicts(const struct pl_lock *a, const struct pl_lock *b);

/* ---- lease.c ---- */
int bfs__pl_lease(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_lease_req *req);
void bfs__pl_lease_client_gone(struct pl_inode *pin, void *client);

/* ---- dump.c ---- */
char *bfs__pl_dump(struct bfs_xl *xl);

#endif
