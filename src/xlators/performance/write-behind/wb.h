/*
 * wb.h — performance/write-behind, shared between its two files:
 *   wb-queue.c      the per-inode queue: admission into the window (the
 *                   early answer), sending in the background, ordering,
 *                   completion and the errors it leaves behind;
 *   write-behind.c  the fops (which wait for the queue, which go behind),
 *                   lookup and readdirplus answers that must not carry a
 *                   size older than an answered write, the module.
 * docs/design/write-behind.md explains the rules.
 *
 * Lifetime. A wb_inode is the inode's context (made by the first write
 * that goes behind, freed by forget). Its queue holds wb_reqs in arrival
 * order; each holds a deep copy of its request (payload, fd reference; a
 * write sent at once from the caller's bytes holds them only while it is
 * sent: wb_req.lent), so
 * the fd, and through it the inode, lives until the entry is gone: a file
 * closed with writes still queued is released only after they ended. A
 * wb_fd is the fd's context (the errors to report through it), freed by
 * release. Everything is under wb_priv.lock; calls down and answers up are
 * made with it released.
 */
#ifndef BFS_WB_H
#define BFS_WB_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/xlator.h"

#define WB_OPT_ON "performance.write-behind"
#define WB_OPT_WINDOW "performance.write-behind-window-size"
/* Writes of one inode sent down and not yet answered, at most. Beyond it,
 * answered writes wait here, where a contiguous one can still grow. */
#define WB_OPT_MAX_OUT "performance.write-behind-max-out"

/* A queued write grows by contiguous later writes up to this size. */
#define WB_AGGREGATE (128 * 1024)
/* A write from this size up that can be sent at once is sent from the
 * caller's bytes, without our copy, and answered after the send
 * (wb-queue.c, bfs__wb_write); a smaller one is copied: that copy costs
 * little, and it is answered before its send. */
#define WB_LEND_MIN (64 * 1024)

struct wb_fd {
    int err_write; /* first background failure, for the next write */
    int err_sync;  /* ... and for the next fsync or flush */
};

enum wb_state { WB_QUEUED, WB_SENT };

struct wb_req {
    struct wb_req *next;
    struct wb_inode *wi;
    int fop;
    void *req;                /* deep copy (bfs_fop_info[fop].req_copy_into) */
    struct bfs_frame *frame;  /* the caller's, until answered */
    struct bfs_stack *stack;  /* ref'd: whose write goes down in the background */
    enum wb_state state;
    bool behind;              /* a write answered before it is done */
    bool acked;
    bool waited;              /* counted once in waited_window */
    bool lent;                /* the payload is the caller's, only during send_one */
    uint64_t off, end;        /* behind writes: the byte range */
    size_t cap;               /* bytes allocated for the payload (aggregation) */
    int stage;                /* fops naming two inodes: the targets already waited on */
    int err;                  /* fsync, flush: the error to report instead of success */
    struct wb_req *act_next;  /* on an action list of wb_run */
    /* 1, and 2 while send_one is in the child's wind: the reply can come
     * (and complete the write) on another thread before protocol/client's
     * gathered send has stopped reading the payload. The last one frees. */
    int refs;
};

struct wb_inode {
    struct wb_inode *next, *prev; /* wb_priv.inodes */
    struct bfs_inode *inode;      /* not ref'd: we are its context */
    struct wb_req *head, *tail;
    uint64_t used;                /* bytes answered and not yet done */
    uint32_t nsent;
    uint64_t done_seq;            /* wb_priv.seq when its last write ended */
    int err;                      /* a failure for fsync/flush through any fd */
    bool running, again;          /* wb_run */
};

struct wb_priv {
    pthread_mutex_t lock;
    pthread_cond_t idle;          /* nqueued reached 0 */
    bool on;
    uint64_t window;
    uint32_t max_out;
    uint64_t seq;                 /* moves when a write ends */
    uint64_t nqueued;             /* entries in every queue */
    uint64_t used;                /* bytes answered and not done, all inodes */
    struct wb_inode inodes;       /* list head */
    /* counters for the dump and the tests */
    uint64_t behind, behind_bytes, merged, sync_writes, waited_window, waited_fops;
    uint64_t failed, reported, lookups_redone, readdirp_cleared;
    uint64_t sent_max, used_max;  /* most writes of one inode out at once; most bytes */
    uint64_t lent, copied;        /* writes that went behind sent from the caller's bytes /
                                   * from our copy */
};

/* wb-queue.c */
struct wb_inode *bfs__wb_inode(struct bfs_xl *xl, struct bfs_inode *inode, bool make);
struct wb_fd *bfs__wb_fd(struct bfs_xl *xl, struct bfs_fd *fd, bool make);
/* Queues a write that may go behind; answers it now or later (0), or
 * refuses it (< 0: a remembered failure, no memory). */
int bfs__wb_write(struct bfs_xl *xl, struct bfs_frame *frame, const struct bfs_write_req *req);
/* Queues any other call behind the writes queued on inode; it goes on
 * (bfs__wb_go from stage) once they are done: 1. Nothing to wait for: 0.
 * Or -ENOMEM. */
int bfs__wb_wait(struct bfs_xl *xl, struct bfs_inode *inode, struct bfs_frame *frame, int fop,
                 const void *req, int stage);
/* Waits for the inodes a call names from stage on, one after the other,
 * then winds it: 0, or < 0 with nothing done (the error contract). */
int bfs__wb_go(struct bfs_xl *xl, struct bfs_frame *frame, int fop, const void *req,
                int stage);
/* The remembered failure fsync or flush through fd must report (cleared). */
int bfs__wb_take_sync_err(struct bfs_xl *xl, struct bfs_fd *fd);
/* The same, left in place (a graph switch's drain, BFS_XDATA_WB_DRAIN). */
int bfs__wb_peek_sync_err(struct bfs_xl *xl, struct bfs_fd *fd);
void bfs__wb_free_inode(struct wb_priv *p, struct wb_inode *wi);

#endif
