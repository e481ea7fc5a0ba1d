/*
 * xlator.h — the translator contract.
 *
 * A translator (xl) is an instance of a module (a shared object exporting
 * `const struct bfs_xl_module bfs_xl_module`). Instances form a graph built
 * from a volfile. Each fop goes down the graph as a call and its answer comes
 * back up through a typed callback:
 *
 *   int  bfs_wind_FOP(frame, child, cbk, cookie, req)   call a child
 *   void bfs_unwind_FOP(frame, rc, rep)                 answer the caller
 *   int  bfs_pass_FOP(frame, child, req)                forward, same frame
 *
 * The error contract (libuv's): if a fop implementation or bfs_wind_FOP
 * returns rc < 0 (-errno), the callback is never called and nothing was
 * done. If it returns 0, the callback is called exactly once, possibly
 * before wind returns (synchronous answer). A reply is (rc, rep): rc >= 0
 * success, rc < 0 is -errno; rep is never NULL (zeroed on error).
 *
 * Memory: req and rep are borrowed. A callee that needs req after it
 * returns (queues work, fans out later) copies it with bfs_FOP_req_dup();
 * a caller that needs rep after the callback returns copies it with
 * bfs_FOP_rep_dup(). The generated code lives in build/gen/core/fops-gen.h.
 */
#ifndef BFS_CORE_XLATOR_H
#define BFS_CORE_XLATOR_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/dict.h"
#include "core/inode.h"
#include "core/log.h"
#include "core/options.h"
#include "core/types.h"

#define BFS_XL_ABI 1
#define BFS_MAX_GROUPS 256

struct bfs_xl;
struct bfs_frame;
struct bfs_graph;
struct bfs_proc;

/* Who is calling: one per system call, shared by every frame of it. */
struct bfs_stack {
    uint32_t uid, gid, pid;
    uint32_t ngroups;
    uint32_t groups[BFS_MAX_GROUPS];
    uint64_t lk_owner;
    uint64_t unique;      /* request id for logs */
    void *client;         /* server side: the connection (protocol/server) */
    /* private */
    int refs;
};

/* One hop of a call. Created by wind, destroyed after its unwind. */
struct bfs_frame {
    struct bfs_stack *stack;
    struct bfs_xl *xl;        /* translator executing this frame */
    struct bfs_frame *parent; /* caller's frame (NULL at the top) */
    void (*cbk)(void);        /* typed callback (cast back by unwind) */
    bool cbk_any;             /* cbk is a bfs_any_cbk_t */
    void *cookie;
    int fop;                  /* enum bfs_fop */
    uint64_t wound_ns;        /* time of wind, for io-stats */
    /* Per-call state of xl; local_free runs after the callback returns. */
    void *local;
    void (*local_free)(void *local);
    /* top-of-graph frames: called instead of a parent callback */
    void *top_arg;
    /* graph whose in-flight count this frame holds (NULL for top frames) */
    struct bfs_graph *graph;
};

#include "core/fops-gen.h" /* generated: enum bfs_fop, req/rep structs, helpers */

/* Events flowing upward through notify. */
enum bfs_event {
    BFS_EV_CHILD_UP = 1,
    BFS_EV_CHILD_DOWN,
    BFS_EV_CHILD_CONNECTING,
    BFS_EV_PARENT_UP,   /* flows downward: graph is ready, connect */
    BFS_EV_PARENT_DOWN, /* flows downward: graph going away */
    BFS_EV_UPCALL,      /* data: struct bfs_upcall */
    /* flows downward from protocol/server: a client connection is gone;
     * data is the stack->client value its calls carried. Server-side
     * translators drop that client's state (locks). */
    BFS_EV_CLIENT_GONE,
    /* flows downward from protocol/server, before CLIENT_GONE: that client
     * connection closed, but calls it made may still be running below
     * (CLIENT_GONE follows once the last of them answered); data as for
     * CLIENT_GONE. features/locks answers the client's queued lock
     * requests and refuses new ones, and keeps its granted locks until
     * CLIENT_GONE: a late post-op of the client's transaction must not
     * land after another client took the lock. */
    BFS_EV_CLIENT_CLOSING,
    /* flows upward from protocol/client, through every translator (cluster
     * translators pass it on even when they keep a child's CHILD_UP/DOWN to
     * themselves): that brick's connection went down or came back, so
     * upcalls from it may have been lost; caches above (performance/
     * md-cache) forget what they learned. */
    BFS_EV_CACHE_STALE,
};

/* CLIENT_GONE data for the calls made inside this process (stack->client
 * NULL): graph tests send it under a child they take "down" to model what
 * a brick does when the connection closes (it drops that client's locks). */
#define BFS_CLIENT_LOCAL ((void *)(uintptr_t)1)

/* Server-to-client message (cache invalidation, lock contention). */
enum bfs_upcall_kind {
    BFS_UPCALL_INODE = 1,              /* invalidate gfid's attributes */
    BFS_UPCALL_ENTRY = 2,              /* invalidate name in pargfid */
    BFS_UPCALL_INODELK_CONTENTION = 3, /* someone waits for owner's inodelk on gfid */
    BFS_UPCALL_ENTRYLK_CONTENTION = 4, /* someone waits for owner's entrylk (gfid, name) */
};

static inline bool bfs_upcall_is_contention(uint32_t kind)
{
    return kind == BFS_UPCALL_INODELK_CONTENTION || kind == BFS_UPCALL_ENTRYLK_CONTENTION;
}

struct bfs_upcall {
    uint32_t kind; /* enum bfs_upcall_kind */
    struct bfs_gfid gfid;
    struct bfs_gfid pargfid;
    const char *name;
    /* Contention only (on the wire after name): the lock domain and the
     * lock owner (stack->lk_owner) holding the contended lock. */
    const char *domain;
    uint64_t owner;
    /* Not on the wire: the stack->client of the change that caused it;
     * protocol/server sends an invalidation to every client but that one. */
    void *except;
    /* Not on the wire, contention only: the stack->client holding the lock
     * (NULL: a caller inside the brick's process); protocol/server sends a
     * contention notice to that client only. */
    void *to;
    /* Not on the wire, invalidations only: raised inside this client by a
     * cluster translator for a change it made itself below the caches
     * (changelog post-op, heal on access; lib/upcall-mark.h). md-cache
     * drops what it names; the FUSE bridge leaves the kernel's caches
     * alone (its own attribute timeout covers such times). */
    bool local;
    /* local only: the change moved times only (a post-op's xattrop), the
     * names in a directory did not change: md-cache keeps them. */
    bool times_only;
    /* local only: a changelog post-op of this client (lib/upcall-mark.h),
     * named by postop (nonzero, unique in the process). postop_begin: it
     * is about to be wound (md-cache notes what happens to gfid from now
     * on). Else it is done (times_only set): attr, when not NULL, is what
     * a lookup of gfid answers now (the cluster translator assembled it
     * from the post-op's replies); md-cache keeps it if nothing told it of
     * gfid since the begin. Borrowed for the call. */
    uint64_t postop;
    bool postop_begin;
    const struct bfs_iatt *attr;
};

/* xdata key features/upcall adds to replies: the brick that answered sends
 * invalidations, so performance/md-cache may keep what the reply says. */
#define BFS_XDATA_UPCALL "brickfs.upcall"

/* xdata key of an xattrop or fxattrop request (any value): storage/posix
 * answers the object's attributes after the operation in the reply's
 * xdata, under BFS_XDATA_IATT (bfs_dict_set_iatt, rpc/codec.h). Replicate
 * and disperse ask it of their post-op (cache-invalidation.md, "Messages"). */
#define BFS_XDATA_IATT_REQ "brickfs.iatt-req"
#define BFS_XDATA_IATT "brickfs.iatt"

/* xdata key (int 1) of a read reply protocol/client answered from the
 * bytes its open prefetched (client-prefetch.c): no brick saw the read, so
 * nothing on a brick changed by it (performance/md-cache keeps what it knew
 * of the file's attributes; cache-invalidation.md). A translator that
 * answers a read from several children passes it only if all of theirs
 * carry it. */
#define BFS_XDATA_PREFETCHED "brickfs.prefetched"

/* xdata key (int 1) of a mknod reply: storage/posix set on the new entry
 * every trusted.brickfs.dht.* key the request's xdata carried (a request
 * with brickfs-internal = 1: cluster/distribute's link file, made with its
 * linkto in one round trip; distribute.md, "Link files"). Without it the
 * caller sets them itself. */
#define BFS_XDATA_ENTRY_XATTRS "brickfs.entry-xattrs-set"

/* xdata key (int 1) of an fsync a FUSE graph switch sends through an fd it
 * is about to move to a new generation: performance/write-behind answers it
 * itself, once the writes it answered through that file are done, with the
 * first of their failures (not cleared: the fd stays where it can report
 * it). Without write-behind in the graph it is a plain fsync. */
#define BFS_XDATA_WB_DRAIN "brickfs.write-behind.drain"

/* What a translator's .so exports as `bfs_xl_module`. */
struct bfs_xl_module {
    uint32_t abi;                             /* BFS_XL_ABI */
    const char *type;                         /* "storage/posix" */
    const struct bfs_fops *fops;              /* sparse; NULL slots pass through */
    const struct bfs_option_desc *options;    /* NULL-key terminated, may be NULL */
    int (*init)(struct bfs_xl *xl);           /* 0 or -errno (logged) */
    void (*fini)(struct bfs_xl *xl);
    int (*reconfigure)(struct bfs_xl *xl, struct bfs_dict *options);
    int (*notify)(struct bfs_xl *xl, enum bfs_event ev, struct bfs_xl *from, void *data);
    void (*release)(struct bfs_xl *xl, struct bfs_fd *fd);     /* fd ctx set by xl */
    void (*releasedir)(struct bfs_xl *xl, struct bfs_fd *fd);
    void (*forget)(struct bfs_xl *xl, struct bfs_inode *inode); /* inode ctx set */
    /* Statedump as JSON text (malloc'd), for /proc-like introspection. */
    char *(*dump)(struct bfs_xl *xl);
    /* min/max number of subvolumes (max 0 = any) */
    int min_children, max_children;
    /* Optional: one handler for every fop not in .fops (protocol, io-stats,
     * trace): req points to the fop's struct bfs_FOP_req. */
    int (*generic_fop)(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req);
};

#define BFS_XL_MODULE(...)                                                                   \
    __attribute__((visibility("default"))) const struct bfs_xl_module bfs_xl_module = {     \
        .abi = BFS_XL_ABI, __VA_ARGS__}

/* A translator instance. */
struct bfs_xl {
    char *name;
    char *type;
    const struct bfs_xl_module *mod;
    struct bfs_fops fops;           /* resolved: defaults filled in */
    struct bfs_xl **children;
    int nchildren;
    struct bfs_xl **parents;
    int nparents;
    struct bfs_dict *options;       /* validated, defaults filled in */
    void *private;
    struct bfs_graph *graph;
    int index;                      /* slot for inode/fd ctx */
    bool initialized;
    void *dlhandle;
};

#define FIRST_CHILD(xl) ((xl)->children[0])

/* Process-wide resources shared by the graphs of one process. */
struct bfs_proc {
    struct bfs_loop *loop;
    struct bfs_workers *workers;
    int nworkers;
    const char *program;
};

/* Typed option getters: the key must be declared by the module; values
 * were validated at graph build, so these cannot fail. */
const char *bfs_xl_opt_str(const struct bfs_xl *xl, const char *key); /* NULL if unset */
int64_t bfs_xl_opt_int(const struct bfs_xl *xl, const char *key);
uint64_t bfs_xl_opt_size(const struct bfs_xl *xl, const char *key);
bool bfs_xl_opt_bool(const struct bfs_xl *xl, const char *key);

/* Default notify: child events go to every parent, parent events to every
 * child. A module's notify may call it to keep propagation. */
int bfs_xl_notify_default(struct bfs_xl *xl, enum bfs_event ev, struct bfs_xl *from,
                          void *data);
/* Sends ev from xl to each of its parents (upward). */
void bfs_xl_notify_parents(struct bfs_xl *xl, enum bfs_event ev, void *data);

/* Stacks and frames. */
struct bfs_stack *bfs_stack_new(void);           /* uid/gid 0, refs 1 */
struct bfs_stack *bfs_stack_ref(struct bfs_stack *s);
void bfs_stack_unref(struct bfs_stack *s);

/*
 * Calls from outside a graph (FUSE, libbrickfs, protocol/server) start with a
 * top frame. The callback of a wind from a top frame receives that frame;
 * the caller frees it with bfs_frame_top_free() when done (typically in the
 * callback). The top frame keeps a reference on the stack.
 */
struct bfs_frame *bfs_frame_top_new(struct bfs_stack *stack, void *arg);
void bfs_frame_top_free(struct bfs_frame *f);

/* Internal, used by generated code. */
struct bfs_frame *bfs__frame_new(struct bfs_frame *parent, struct bfs_xl *child, int fop,
                                 void (*cbk)(void), bool cbk_any, void *cookie);
void bfs__frame_destroy(struct bfs_frame *f);

#endif
