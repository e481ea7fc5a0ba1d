/*
 * fuse-bridge.h — brickfs-mount: the FUSE low-level bridge between the
 * kernel and the top of a client graph.
 *
 * One struct bfs_fuse per process holds the graph, the FUSE session and the
 * mount options. Every FUSE request becomes one struct bfs_fuse_call: it
 * carries the caller's credentials in a fresh struct bfs_stack, owns a top
 * frame (bfs_frame_top_new) and is wound into graph->top with one of the
 * bfs_wind_FOP helpers. The fop callback (on an event or worker thread, or
 * synchronously inside the wind) replies to the kernel with fuse_reply_* and
 * ends the call with bfs_fuse_call_done(), which frees the top frame and
 * drops whatever the call held. No FUSE thread ever waits for a reply.
 *
 * Identities. The FUSE nodeid of every inode except the root is the address
 * of its struct bfs_inode in graph->itable; FUSE_ROOT_ID maps to the table's
 * root. Every reply that hands the kernel a nodeid (lookup, create, mkdir,
 * mknod, symlink, link, readdirplus entries) first counts one kernel lookup
 * on the inode (bfs_inode_lookup), and forget/forget_multi give them back
 * (bfs_inode_forget), so an inode lives exactly as long as the kernel may
 * name it. st_ino is derived from the GFID, so hard links share it.
 *
 * Open files and directories: open/create/opendir make a struct bfs_fd
 * wrapped in a struct bfs_fuse_fh whose address is fi->fh; release and
 * releasedir unref the fd, which runs the translators' release callbacks.
 * Handles the kernel never released (a forced unmount) are dropped at exit.
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
#define BFS_FUSE_HIDDEN_DIR ".brickfs"
#define BFS_FUSE_HIDDEN_XATTR "trusted.brickfs."
/* xdata key (16-byte BIN) asking the brick to give a new entry this GFID:
 * the client picks the identity of what it creates (GlusterFS's gfid-req),
 * so a create's fd has its inode before the reply and replicas agree. */
#define BFS_FUSE_GFID_REQ_KEY "gfid-req"

/* What the command line asked for (fuse-opts.c). */
struct bfs_fuse_opts {
    char *volfile;          /* absolute */
    char *mountpoint;       /* absolute */
    bool foreground;
    double attr_timeout;    /* seconds the kernel may cache attributes */
    double entry_timeout;   /* seconds the kernel may cache names */
    double negative_timeout; /* seconds the kernel may cache "no such name" */
    bool direct_io;         /* bypass the page cache (fi->direct_io) */
    bool capability;        /* pass security.capability through (fuse-xattr.c) */
    bool allow_other;
    bool ro;
    char *log_file;         /* NULL: stderr in the foreground, a default file otherwise */
    char *log_level;        /* NULL: info */
    char *fsname;           /* what df shows as the source */
    char *mount_flags;      /* standard flags handed to libfuse ("nosuid,noatime") */
    int up_timeout;         /* seconds to wait for the volume before giving up */
};

/* An open file or directory as the kernel holds it: fi->fh. */
struct bfs_fuse_fh {
    struct bfs_fd *fd;
    struct bfs_fuse_fh *prev, *next; /* fu->fhs: every handle still open */
};

struct bfs_fuse_notify; /* fuse-notify.c */

struct bfs_fuse {
    struct bfs_fuse_opts *opts;
    struct bfs_proc *proc;
    struct bfs_graph *graph;
    struct bfs_inode *root;
    struct fuse_session *se;     /* NULL until the session exists */
    struct bfs_fuse_notify *notify;
    int report_fd;               /* daemon: pipe to the waiting parent, else -1 */

    pthread_mutex_t lock;        /* guards everything below */
    pthread_cond_t cond;
    int up;                      /* the graph's last event was CHILD_UP */
    uint64_t inflight;           /* calls wound and not yet done */
    struct bfs_fuse_fh fhs;      /* list head of open handles */
};

/* One FUSE request travelling through the graph. Only the fields a given
 * operation needs are used. */
struct bfs_fuse_call {
    fuse_req_t req;
    struct bfs_fuse *fu;
    struct bfs_frame *frame;     /* top frame; frame->top_arg == this call */
    struct bfs_inode *inode;     /* ref'd when set */
    struct bfs_fuse_fh *fh;      /* open/create/opendir: the handle being made */
    struct bfs_fd *fd;           /* borrowed: the open file the request came through */
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
/* Like bfs_fuse_call_new for lock operations: stack->lk_owner = owner. */
struct bfs_fuse_call *bfs_fuse_call_new_lk(fuse_req_t req, uint64_t owner);
/* A call of our own, with no request to answer, on behalf of the caller
 * of like (same credentials and lock owner). NULL on ENOMEM. */
struct bfs_fuse_call *bfs_fuse_call_new_internal(struct bfs_fuse *fu,
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

/* The bridge of a request. */
struct bfs_fuse *bfs_fuse_of(fuse_req_t req);

/* Inode of a nodeid (borrowed: the kernel's lookup count keeps it alive). */
struct bfs_inode *bfs_fuse_inode(struct bfs_fuse *fu, fuse_ino_t ino);
/* Nodeid of a linked inode. */
fuse_ino_t bfs_fuse_ino(struct bfs_fuse *fu, struct bfs_inode *inode);
/* loc of an inode itself (by GFID) / of name in directory parent. */
void bfs_fuse_loc_inode(struct bfs_loc *loc, struct bfs_inode *inode);
void bfs_fuse_loc_entry(struct bfs_loc *loc, struct bfs_inode *parent, const char *name);
/* 0, or -ENAMETOOLONG / -EINVAL for a name no brick accepts. */
int bfs_fuse_name_check(const char *name);
/* name is ".brickfs" in the root directory: never visible through a mount. */
bool bfs_fuse_hidden_entry(struct bfs_fuse *fu, struct bfs_inode *parent, const char *name);
bool bfs_fuse_hidden_xattr(const char *name);
/* security.capability on a mount without the capability option. */
bool bfs_fuse_capability_xattr(const struct bfs_fuse *fu, const char *name);

/* A fresh GFID in *g and an xdata carrying it as gfid-req (NULL on ENOMEM). */
struct bfs_dict *bfs_fuse_gfid_req(struct bfs_gfid *g);
/* iatt -> struct stat, with st_ino derived from the GFID. */
void bfs_fuse_stat(const struct bfs_iatt *ia, struct stat *st);
/* Links the inode that attr names, counts one kernel lookup on it and
 * fills e. Returns the inode (borrowed) or NULL with errno set. */
struct bfs_inode *bfs_fuse_entry(struct bfs_fuse *fu, const struct bfs_iatt *attr,
                                 struct fuse_entry_param *e);
/* Replies an entry for attr (lookup, mknod, mkdir, symlink, link). */
void bfs_fuse_reply_entry(struct bfs_fuse_call *c, const struct bfs_iatt *attr);
void bfs_fuse_reply_attr(struct bfs_fuse_call *c, const struct bfs_iatt *attr);

/* Handles (fuse-io.c, fuse-dir.c). */
struct bfs_fuse_fh *bfs_fuse_fh_new(struct bfs_fuse *fu, struct bfs_inode *inode, int flags,
                                    int is_dir);
void bfs_fuse_fh_free(struct bfs_fuse *fu, struct bfs_fuse_fh *fh);
static inline struct bfs_fuse_fh *bfs_fuse_fh(const struct fuse_file_info *fi)
{
    return (struct bfs_fuse_fh *)(uintptr_t)fi->fh;
}
/* Puts fh on the list of open handles, just before it is handed to the
 * kernel; bfs_fuse_fh_free takes it off again. */
void bfs_fuse_fh_publish(struct bfs_fuse *fu, struct bfs_fuse_fh *fh);
void bfs_fuse_fh_drop_all(struct bfs_fuse *fu);
/* An open file of inode (ref'd), or NULL: a linear search, for the rare
 * case of an inode that no longer has a name (unlinked while open). */
struct bfs_fd *bfs_fuse_fd_of_inode(struct bfs_fuse *fu, struct bfs_inode *inode);

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
void bfs_fuse_report(int *fd, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- upcalls (fuse-notify.c) ---- */
/* A thread that turns graph upcalls into kernel cache invalidations: the
 * kernel may block an invalidation on a lock held by a request we have yet
 * to answer, so they never run on a graph thread. */
struct bfs_fuse_notify *bfs_fuse_notify_start(struct bfs_fuse *fu);
void bfs_fuse_notify_stop(struct bfs_fuse_notify *n);
void bfs_fuse_notify_post(struct bfs_fuse_notify *n, const struct bfs_upcall *up);

/* ---- options (fuse-opts.c) ---- */
/* Parses argv. Returns 0 to run, 1 when --help was printed, 2 on a usage
 * error (message printed). */
int bfs_fuse_opts_parse(int argc, char **argv, struct bfs_fuse_opts *o);
void bfs_fuse_opts_free(struct bfs_fuse_opts *o);
/* The -o string handed to libfuse. malloc'd. */
char *bfs_fuse_opts_libfuse(const struct bfs_fuse_opts *o, const char *fsname);

#endif
