/*
 * fuse-bridge.h — brickfs-mount: the FUSE low-level bridge between the
 * kernel and the top of a client graph.
 *
 * One struct bfs_fuse per process holds the FUSE session, the mount options
 * and the graph generations: the active one, which new requests go to, and
 * retired ones still finishing what was started on them after a live graph
 * switch (docs/design/graph-switch.md; fuse-graph.c, fuse-switch.c). Every
 * FUSE request becomes one struct bfs_fuse_call: it carries the caller's
 * credentials in a fresh struct bfs_stack, owns a top frame
 * (bfs_frame_top_new), is bound to one generation (counted there, so it is
 * never freed under the call) and is wound into that generation's top with
 * one of the bfs_wind_FOP helpers. The fop callback (on an event or worker
 * thread, or synchronously inside the wind) replies to the kernel with
 * fuse_reply_* and ends the call with bfs_fuse_call_done(), which frees the
 * top frame and drops whatever the call held. No FUSE thread ever waits for
 * a reply.
 *
 * Identities. FUSE nodeids name the bridge's own inode objects, nodes
 * (fuse-node.c): the GFID, the type and the kernel's lookup count, which
 * survive graph switches; FUSE_ROOT_ID is the root node. A call asks for the
 * inode of a nodeid in its own generation (bfs_fuse_inode) and holds it
 * until it ends. Every reply that hands the kernel a nodeid (lookup, create,
 * mkdir, mknod, symlink, link, readdirplus entries) counts one kernel lookup
 * on the node (bfs_fuse_entry), and forget/forget_multi give them back, so
 * a node lives exactly as long as the kernel may name it. st_ino is derived
 * from the GFID, so hard links share it.
 *
 * Open files and directories: open/create/opendir make a struct bfs_fd
 * wrapped in a struct bfs_fuse_fh whose address is fi->fh; release and
 * releasedir unref the fd, which runs the translators' release callbacks.
 * A graph switch moves a handle's fd to the new generation unless the
 * handle is pinned (it holds locks). Handles the kernel never released (a
 * forced unmount) are dropped at exit.
 */
#ifndef BFS_FUSE_BRIDGE_H
#define BFS_FUSE_BRIDGE_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/graph.h"
#include "core/xlator.h"

#define BFS_FUSE_MAX_IO (1u << 20)   /* max read/write/readahead: 1 MiB */
#define BFS_FUSE_READ_AHEAD (2u << 20) /* default read-ahead window: two 1 MiB reads */
#define BFS_FUSE_HIDDEN_DIR ".brickfs"
#define BFS_FUSE_HIDDEN_XATTR "trusted.brickfs."
/* xdata key (16-byte BIN) asking the brick to give a new entry this GFID:
 * the client picks the identity of what it creates (GlusterFS's gfid-req),
 * so a create's fd has its inode before the reply and replicas agree. */
#define BFS_FUSE_GFID_REQ_KEY "gfid-req"

#define BFS_FUSE_MGMT_PORT 24100     /* brickfsd's default port */
#define BFS_FUSE_MAX_SERVERS 16

/* A brickfsd to fetch the volfile from. */
struct bfs_fuse_server {
    char host[256];
    uint16_t port;
};

/* direct-io=: which opens bypass the kernel's page cache (fi->direct_io;
 * docs/design/fuse-direct-writes.md). */
enum {
    BFS_FUSE_DIO_OFF,
    BFS_FUSE_DIO_AUTO, /* write-only opens (the default) */
    BFS_FUSE_DIO_ON,
};

/* What the command line asked for (fuse-opts.c). */
struct bfs_fuse_opts {
    char *volfile;          /* --volfile: absolute; NULL when mounting HOST:/VOLUME */
    char *volname;          /* HOST[:PORT]:/VOLUME: the volume */
    char *spec;             /* HOST[:PORT]:/VOLUME as given */
    struct bfs_fuse_server servers[BFS_FUSE_MAX_SERVERS]; /* the mount's, then backups */
    int nservers;
    char *backup_servers;   /* the option as given */
    int volfile_poll_ms;    /* between volfile checks; 0: never (no live switch) */
    char *mountpoint;       /* absolute */
    bool foreground;
    double attr_timeout;    /* seconds the kernel may cache attributes */
    double entry_timeout;   /* seconds the kernel may cache names */
    double negative_timeout; /* seconds the kernel may cache "no such name" */
    int direct_io;          /* BFS_FUSE_DIO_*: which opens bypass the page cache */
    bool capability;        /* pass security.capability through (fuse-xattr.c) */
    bool acl;               /* pass system.posix_acl_* through (fuse-xattr.c) */
    bool selinux;           /* pass security.selinux through (fuse-xattr.c) */
    uint64_t read_ahead;    /* bytes of kernel read-ahead for the mount; 0: the kernel's */
    bool allow_other;
    bool ro;
    char *log_file;         /* NULL: stderr in the foreground, a default file otherwise */
    char *log_level;        /* NULL: info */
    char *fsname;           /* what df shows as the source */
    char *mount_flags;      /* standard flags handed to libfuse ("nosuid,noatime") */
    int up_timeout;         /* seconds to wait for the volume before giving up */
};

struct bfs_fuse;

/* One graph generation (fuse-graph.c). The counters are under fu->lock. */
struct bfs_fuse_graph {
    struct bfs_fuse *fu;
    struct bfs_graph *g;          /* g->owner is this */
    uint64_t gen;                 /* 1, 2, ... in build order */
    char rev[64];                 /* volfile revision (brickfsd's ETag); "" from a file */
    int up;                       /* its last event was CHILD_UP */
    uint64_t inflight;            /* calls bound to it */
    uint64_t fds;                 /* handles whose fd is in it */
    struct bfs_fuse_graph *next;  /* fu->retired */
};

/* An open file or directory as the kernel holds it: fi->fh. fd and gr
 * change together, under fu->lock, when a switch moves the handle. */
struct bfs_fuse_fh {
    struct bfs_fd *fd;
    struct bfs_fuse_graph *gr;    /* the generation of fd */
    int refs;                     /* the kernel's (until release), a switch moving it, calls */
    bool released;                /* the kernel released it */
    bool pinned;                  /* holds or asked for a lock: stays in gr */
    bool draining;                /* a switch waits for its writes: calls wait */
    /* A directory whose listing is under way: the last readdir reply ended
     * on an entry, so the kernel's next offset is one only gr understands
     * (distribute names a subvolume by its index in gr's graph, a brick
     * hands out its own cookies). A switch leaves it in gr until a reply
     * ends the listing (fuse-dir.c, fuse-switch.c). */
    bool listing;
    int users;                    /* calls holding fd (bfs_fuse_call_fd) */
    struct bfs_fuse_fh *prev, *next; /* fu->fhs: every handle still open */
};

struct bfs_fuse_notify; /* fuse-notify.c */
struct bfs_fuse_nodes;  /* fuse-node.c */
struct bfs_fuse_watch;  /* fuse-switch.c */

struct bfs_fuse {
    struct bfs_fuse_opts *opts;
    struct bfs_proc *proc;
    struct fuse_session *se;     /* NULL until the session exists */
    struct bfs_fuse_notify *notify;
    struct bfs_fuse_nodes *nodes;
    struct bfs_fuse_watch *watch; /* NULL without a volfile server */
    int server;                  /* index of the volfile server that answered last */
    int report_fd;               /* daemon: pipe to the waiting parent, else -1 */

    pthread_mutex_t lock;        /* guards everything below */
    pthread_cond_t cond;
    /* New calls go here. Written under nodes' lock and this one, by
     * bfs_fuse_nodes_new/switch only. */
    struct bfs_fuse_graph *active;
    struct bfs_fuse_graph *retired; /* list; freed by the watcher once idle */
    uint64_t generations;        /* built so far */
    uint64_t switches, failed_switches, migrated, pinned;
    uint64_t inflight;           /* calls wound and not yet done, every generation */
    bool stopping;               /* unmounting: waits for a new graph give up */
    char bdi[32];                /* the mount's backing device ("0:NN"), "" if unknown */
    int ra_pending;              /* read-ahead still to set (atomic; fuse-session.c) */
    struct bfs_fuse_fh fhs;      /* list head of open handles */
};

/* One FUSE request travelling through the graph. Only the fields a given
 * operation needs are used. */
#define BFS_FUSE_CALL_HELD 4

struct bfs_fuse_call {
    fuse_req_t req;
    struct bfs_fuse *fu;
    struct bfs_fuse_graph *gr;   /* the generation it runs on (counted there) */
    struct bfs_frame *frame;     /* top frame; frame->top_arg == this call */
    struct bfs_inode *inode;     /* ref'd when set */
    struct bfs_inode *held[BFS_FUSE_CALL_HELD]; /* bfs_fuse_inode's, ref'd */
    int nheld;
    struct bfs_fd *fds[2];       /* bfs_fuse_call_fd's, ref'd */
    struct bfs_fuse_fh *fhs[2];  /* ... the handles they came from (fh->users) */
    int nfds;
    struct bfs_fuse_fh *fh;      /* open/create/opendir: the handle being made */
    struct bfs_fd *fd;           /* the open file the request came through (held) */
    struct fuse_file_info fi;    /* open/create: copy to reply with */
    fuse_ino_t ino;
    uint64_t u64[2];             /* per-op scratch (sizes, flags) */
    struct bfs_iatt attr;        /* setattr: the values to apply */
    uint32_t valid;              /* setattr: BFS_SET_* still to apply */
    char *name;                  /* owned copy when the op needs one later */
    /* lock requests (fuse-lock.c) */
    struct bfs_fd *fd_ref;       /* ref'd: outlives the kernel's handle */
    struct bfs_flock lk;         /* the lock asked for */
    uint32_t lk_cmd;
    bool waiting;                /* on the interruptible list */
    struct bfs_fuse_call *wprev, *wnext;
};

/* ---- calls (fuse-call.c) ---- */

/* Starts a call for req with the caller's credentials. On failure replies
 * ENOMEM itself and returns NULL. */
struct bfs_fuse_call *bfs_fuse_call_new(fuse_req_t req);
/* For a request on ino (an inode, or the parent of a name) whose checks
 * gave rc: rc < 0 replies -rc and returns NULL; else bfs_fuse_call_new
 * with c->ino = ino. */
struct bfs_fuse_call *bfs_fuse_call_on(fuse_req_t req, fuse_ino_t ino, int rc);
/* Like bfs_fuse_call_new for lock operations: stack->lk_owner = owner. */
struct bfs_fuse_call *bfs_fuse_call_new_lk(fuse_req_t req, uint64_t owner);
/* A call of our own on generation gr, with no request to answer, on
 * behalf of the caller of like (same credentials and lock owner). NULL on
 * ENOMEM. */
struct bfs_fuse_call *bfs_fuse_call_new_internal(struct bfs_fuse *fu, struct bfs_fuse_graph *gr,
                                                 const struct bfs_stack *like);
/* Ends a call whose reply has been sent. */
void bfs_fuse_call_done(struct bfs_fuse_call *c);
/* Replies -rc (rc < 0) and ends the call: for a wind that returned < 0. */
void bfs_fuse_call_fail(struct bfs_fuse_call *c, int rc);
/* The call a fop callback belongs to. */
static inline struct bfs_fuse_call *bfs_fuse_call_of(struct bfs_frame *frame)
{
    return (struct bfs_fuse_call *)frame->top_arg;
}

/*
 * A call made by inode (no open file) whose GFID no longer resolves — the
 * name was replaced or removed by another client — answers ESTALE, not
 * ENOENT: the kernel then looks the path up again (LOOKUP_REVAL) and finds
 * the new file instead of failing for the length of the entry timeout.
 */
static inline int bfs_fuse_by_inode_rc(const struct bfs_fuse_call *c, int rc)
{
    return rc == -ENOENT && !c->fd ? -ESTALE : rc;
}

/* The bridge of a request. */
struct bfs_fuse *bfs_fuse_of(fuse_req_t req);
/* The top translator of c's generation. */
static inline struct bfs_xl *bfs_fuse_top(const struct bfs_fuse_call *c)
{
    return c->gr->g->top;
}

/* The fd of the open file fi, held by c until it ends; sets c->fd. Binds c
 * to the generation of that fd, so call it before bfs_fuse_inode. pin: the
 * request takes a lock, so the file must stay in its generation from now
 * on. NULL (EXDEV) when c already holds an fd of another generation. */
struct bfs_fd *bfs_fuse_call_fd(struct bfs_fuse_call *c, const struct fuse_file_info *fi,
                                bool pin);
/* The inode of nodeid ino in c's generation, held by c until it ends. NULL
 * on ENOMEM (or more than BFS_FUSE_CALL_HELD inodes). */
struct bfs_inode *bfs_fuse_inode(struct bfs_fuse_call *c, fuse_ino_t ino);
/* loc of nodeid ino itself (by GFID) / of name in directory parent, with
 * the inodes held by c. 0 or -ENOMEM. */
int bfs_fuse_loc_ino(struct bfs_fuse_call *c, struct bfs_loc *loc, fuse_ino_t ino);
int bfs_fuse_loc_name(struct bfs_fuse_call *c, struct bfs_loc *loc, fuse_ino_t parent,
                      const char *name);
void bfs_fuse_loc_inode(struct bfs_loc *loc, struct bfs_inode *inode);
/* 0, or -ENAMETOOLONG / -EINVAL for a name no brick accepts. */
int bfs_fuse_name_check(const char *name);
/* name is ".brickfs" in the root directory (nodeid parent / inode dir):
 * never visible through a mount. */
bool bfs_fuse_hidden_entry(fuse_ino_t parent, const char *name);
bool bfs_fuse_hidden_dirent(const struct bfs_inode *dir, const char *name);
bool bfs_fuse_hidden_xattr(const char *name);
/* Extended attributes the mount answers itself instead of the bricks
 * (fuse-xattr.c): 0 when name goes to the graph, else the errno to reply
 * to a get (BFS_FUSE_XGET), set or remove of it. */
enum { BFS_FUSE_XGET, BFS_FUSE_XSET, BFS_FUSE_XREMOVE };
int bfs_fuse_xattr_local(const struct bfs_fuse *fu, const char *name, int op);

/* A fresh GFID for a new entry in *g (bfs_gfid_generate_entry: runs share a
 * brick handle folder) and an xdata carrying it as gfid-req (NULL on ENOMEM). */
struct bfs_dict *bfs_fuse_gfid_req(struct bfs_gfid *g);
/* iatt -> struct stat, with st_ino derived from the GFID. */
void bfs_fuse_stat(const struct bfs_iatt *ia, struct stat *st);
/* Counts one kernel lookup on the node of the GFID attr names (made if
 * new) and fills e. Returns the node or NULL with errno set. */
struct bfs_fuse_node *bfs_fuse_entry(struct bfs_fuse *fu, const struct bfs_iatt *attr,
                                     struct fuse_entry_param *e);
/* Replies an entry for attr (lookup, mknod, mkdir, symlink, link). */
void bfs_fuse_reply_entry(struct bfs_fuse_call *c, const struct bfs_iatt *attr);
void bfs_fuse_reply_attr(struct bfs_fuse_call *c, const struct bfs_iatt *attr);

/* Handles (fuse-io.c, fuse-dir.c). A new handle's fd is in c's generation. */
struct bfs_fuse_fh *bfs_fuse_fh_new(struct bfs_fuse_call *c, struct bfs_inode *inode, int flags,
                                    int is_dir);
/* The kernel released fh (or never got it): drops its reference. */
void bfs_fuse_fh_free(struct bfs_fuse *fu, struct bfs_fuse_fh *fh);
void bfs_fuse_fh_unref(struct bfs_fuse *fu, struct bfs_fuse_fh *fh);
static inline struct bfs_fuse_fh *bfs_fuse_fh(const struct fuse_file_info *fi)
{
    return (struct bfs_fuse_fh *)(uintptr_t)fi->fh;
}
/* Puts fh on the list of open handles, just before it is handed to the
 * kernel; bfs_fuse_fh_free takes it off again. */
void bfs_fuse_fh_publish(struct bfs_fuse *fu, struct bfs_fuse_fh *fh);
void bfs_fuse_fh_drop_all(struct bfs_fuse *fu);
/* An open file of GFID g in generation gr (ref'd), or NULL: a linear
 * search, for the rare case of an inode that no longer has a name
 * (unlinked while open). */
struct bfs_fd *bfs_fuse_fd_of_inode(struct bfs_fuse *fu, struct bfs_fuse_graph *gr,
                                    const struct bfs_gfid *g);

/* Attribute invalidation after an operation whose reply carries no
 * attributes (see fuse-attr.c). */
void bfs_fuse_inval_attr(struct bfs_fuse *fu, fuse_ino_t ino);

/* ---- operations, one file per concern ---- */
/* fuse-entry.c */
void bfs_fuse_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void bfs_fuse_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void bfs_fuse_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void bfs_fuse_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                    dev_t rdev);
void bfs_fuse_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void bfs_fuse_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void bfs_fuse_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void bfs_fuse_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void bfs_fuse_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void bfs_fuse_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                     const char *newname, unsigned int flags);
void bfs_fuse_readlink(fuse_req_t req, fuse_ino_t ino);
/* fuse-attr.c */
void bfs_fuse_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void bfs_fuse_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                      struct fuse_file_info *fi);
void bfs_fuse_statfs(fuse_req_t req, fuse_ino_t ino);
void bfs_fuse_access(fuse_req_t req, fuse_ino_t ino, int mask);
/* fuse-io.c */
void bfs_fuse_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void bfs_fuse_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                     struct fuse_file_info *fi);
void bfs_fuse_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   struct fuse_file_info *fi);
void bfs_fuse_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                    struct fuse_file_info *fi);
void bfs_fuse_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void bfs_fuse_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void bfs_fuse_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void bfs_fuse_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                        struct fuse_file_info *fi);
void bfs_fuse_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
                    struct fuse_file_info *fi);
void bfs_fuse_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
                              struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
                              struct fuse_file_info *fi_out, size_t len, int flags);
/* fuse-dir.c */
void bfs_fuse_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void bfs_fuse_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      struct fuse_file_info *fi);
void bfs_fuse_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                          struct fuse_file_info *fi);
void bfs_fuse_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void bfs_fuse_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
/* fuse-xattr.c */
void bfs_fuse_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                       size_t size, int flags);
void bfs_fuse_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void bfs_fuse_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void bfs_fuse_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
/* fuse-lock.c */
void bfs_fuse_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
                    struct flock *lock);
void bfs_fuse_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
                    struct flock *lock, int sleep);
void bfs_fuse_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op);

/* ---- session (fuse-session.c) ---- */
/* Runs the mount until it is unmounted or signalled. Reports the mount's
 * outcome through fu->report_fd when daemonized. Returns the exit code. */
int bfs_fuse_run(struct bfs_fuse_opts *opts, int report_fd);

/* ---- the process (fuse-main.c) ---- */
/* Tells whoever waits for the mount how it went: the parent of a daemon
 * through *fd (then closed and set to -1), else stderr. code 0 = mounted. */
/* Sets the mount's read-ahead window on the first call after the kernel
 * took our INIT reply (fuse-session.c); open and create call it. */
void bfs_fuse_readahead_apply(struct bfs_fuse *fu);
void bfs_fuse_report(int *fd, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- upcalls (fuse-notify.c) ---- */
/* A thread that turns graph upcalls into kernel cache invalidations: the
 * kernel may block an invalidation on a lock held by a request we have yet
 * to answer, so they never run on a graph thread. */
struct bfs_fuse_notify *bfs_fuse_notify_start(struct bfs_fuse *fu);
void bfs_fuse_notify_stop(struct bfs_fuse_notify *n);
void bfs_fuse_notify_post(struct bfs_fuse_notify *n, const struct bfs_upcall *up);

/* ---- nodes (fuse-node.c) ---- */
struct bfs_fuse_node;
/* The node table, its root bound to gr, which becomes fu->active. */
int bfs_fuse_nodes_new(struct bfs_fuse *fu, struct bfs_fuse_graph *gr);
void bfs_fuse_nodes_free(struct bfs_fuse *fu);
/* Counts one kernel lookup on g's node, made if new. NULL on ENOMEM. */
struct bfs_fuse_node *bfs_fuse_node_lookup(struct bfs_fuse *fu, const struct bfs_gfid *g,
                                           uint32_t type);
fuse_ino_t bfs_fuse_node_ino(struct bfs_fuse *fu, const struct bfs_fuse_node *n);
/* Gives back count kernel lookups (forget; a reply the kernel never got). */
void bfs_fuse_node_unlookup(struct bfs_fuse *fu, struct bfs_fuse_node *n, uint64_t count);
void bfs_fuse_node_forget(struct bfs_fuse *fu, fuse_ino_t ino, uint64_t count);
/* The inode of nodeid ino in generation gr, ref'd; NULL on ENOMEM. */
struct bfs_inode *bfs_fuse_node_inode(struct bfs_fuse *fu, fuse_ino_t ino,
                                      struct bfs_fuse_graph *gr);
const struct bfs_gfid *bfs_fuse_node_gfid(struct bfs_fuse *fu, fuse_ino_t ino);
/* The nodeid of GFID g if the kernel may know it, else 0. */
fuse_ino_t bfs_fuse_node_find(struct bfs_fuse *fu, const struct bfs_gfid *g);
uint64_t bfs_fuse_nodes_count(struct bfs_fuse *fu);
/*
 * Directory attributes learnt from this mount's own entry operations
 * (create, mknod, mkdir, symlink, link, unlink, rmdir): the parent's
 * attributes after the operation, as the brick replied them. The kernel
 * drops its cached attributes of a directory after each of these and,
 * with default_permissions, asks for them again (GETATTR) before the next
 * name in that directory can be resolved: one round trip per file created
 * or removed. put keeps the latest state (by ctime; only a directory's,
 * only with attr-timeout > 0); take hands it out once, if it is younger
 * than attr-timeout, and forgets it; drop forgets it (setattr, xattrs,
 * invalidations: changes whose replies say nothing of it).
 */
void bfs_fuse_node_dir_attr_put(struct bfs_fuse *fu, fuse_ino_t ino, const struct bfs_iatt *post);
bool bfs_fuse_node_dir_attr_take(struct bfs_fuse *fu, fuse_ino_t ino, struct bfs_iatt *out);
void bfs_fuse_node_dir_attr_drop(struct bfs_fuse *fu, fuse_ino_t ino);
/* The same for the node of GFID g, if there is one (upcalls). */
void bfs_fuse_node_dir_attr_drop_gfid(struct bfs_fuse *fu, const struct bfs_gfid *g);
/* Makes gr the active generation and moves every node's inode to it.
 * -ENOMEM if some could not move (they stay; call again later). */
int bfs_fuse_nodes_switch(struct bfs_fuse *fu, struct bfs_fuse_graph *gr);
/* Some node still holds an inode of gr. */
bool bfs_fuse_nodes_in(struct bfs_fuse *fu, const struct bfs_fuse_graph *gr);

/* ---- graph generations (fuse-graph.c) ---- */
/* Builds, initialises and activates a generation from volfile text (its
 * clients start connecting). On failure err says why. */
int bfs_fuse_graph_new(struct bfs_fuse *fu, const char *text, size_t len, const char *source,
                       const char *rev, struct bfs_fuse_graph **out, char *err, size_t errlen);
/* Waits until gr's last event is CHILD_UP: 0, or -ETIMEDOUT after secs. */
int bfs_fuse_graph_wait_up(struct bfs_fuse_graph *gr, int secs);
/* A nameless lookup of the root through gr, as root (blocking; on the
 * mount's start-up or watcher thread): the translators' per-graph root work,
 * e.g. distribute's layout-version stamp. 0 or -errno (logged; not fatal). */
int bfs_fuse_graph_first_lookup(struct bfs_fuse_graph *gr);
/* No call and no handle in it (fu->lock held). */
bool bfs_fuse_graph_idle(const struct bfs_fuse_graph *gr);
/* Deactivates and frees gr (no call may use it any more). */
void bfs_fuse_graph_free(struct bfs_fuse_graph *gr);
/* The brickfs.graph virtual xattr: JSON of the active generation. */
char *bfs_fuse_graph_dump(struct bfs_fuse *fu);
#define BFS_FUSE_GRAPH_XATTR "brickfs.graph"

/* ---- the volfile from brickfsd (fuse-volfile.c) ---- */
struct bfs_fuse_volfile {
    char *text;              /* malloc'd, NUL-terminated */
    size_t len;
    char etag[64];           /* its revision */
    char source[300];        /* HOST:PORT of the server that answered */
};
/* GET the client volfile, going round the servers from the one that
 * answered last. etag: the revision we have ("" for none). Returns 200
 * (out filled), 304 (unchanged), or -errno with err set: -ENOENT no such
 * volume, -EHOSTUNREACH no server answered. */
int bfs_fuse_volfile_fetch(struct bfs_fuse *fu, const char *etag, struct bfs_fuse_volfile *out,
                           char *err, size_t errlen);
void bfs_fuse_server_fmt(const struct bfs_fuse_server *s, char *buf, size_t len);

/* ---- live graph switches (fuse-switch.c) ---- */
/* Starts the thread that polls brickfsd and switches graphs (mounts from
 * brickfsd with volfile-poll > 0). 0 or -errno. */
int bfs_fuse_watch_start(struct bfs_fuse *fu);
void bfs_fuse_watch_stop(struct bfs_fuse *fu);

/* ---- options (fuse-opts.c) ---- */
/* Parses argv. Returns 0 to run, 1 when --help was printed, 2 on a usage
 * error (message printed). */
int bfs_fuse_opts_parse(int argc, char **argv, struct bfs_fuse_opts *o);
void bfs_fuse_opts_free(struct bfs_fuse_opts *o);
/* The -o string handed to libfuse. malloc'd. */
char *bfs_fuse_opts_libfuse(const struct bfs_fuse_opts *o, const char *fsname);

#endif
