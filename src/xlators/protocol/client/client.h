/*
 * client.h — private state of protocol/client, a leaf of client graphs
 * that stands for one brick across the network.
 *
 * Objects and their lives:
 *   struct cli_priv  one per translator instance (xl->private), init to fini.
 *   struct cli_call  one request in flight, in priv->pending under its
 *                    request id from send until its REPLY arrives or the
 *                    connection ends (then it fails with ENOTCONN). Calls
 *                    are fops wound into us, the handshake, and the re-opens
 *                    and re-locks that follow a reconnect.
 *   struct cli_fd    our context on an open fd (bfs_fd_ctx): the remote fd
 *                    id (the same on every connection: a re-open reuses it),
 *                    what is needed to re-open it (gfid, flags) and the POSIX
 *                    locks held through it. Refcounted: one reference for
 *                    the fd's context (dropped by release/releasedir), one
 *                    per re-open or re-lock call in flight.
 *
 * Connection states (priv->state), all transitions on the loop thread
 * except STOPPED:
 *   IDLE -> CONNECTING -> HANDSHAKE -> REOPENING -> UP
 *   any connected state -> (socket closed, ping timeout) -> WAIT -> CONNECTING
 *   any -> STOPPED (PARENT_DOWN, fini)
 * Fops are sent only in UP; in any other state they return -ENOTCONN.
 * Parents hear CHILD_UP on entering UP and CHILD_DOWN when a connection
 * that was up ends (or the first attempt fails), never twice in a row.
 *
 * Threads: fops arrive on any thread and are encoded there; frames are
 * read, replies decoded and callbacks called on the loop thread.
 * priv->lock guards the state, the connection pointer, the pending table,
 * the fd list and every cli_fd's fields; no callback into another
 * translator runs with it held.
 */
#ifndef BFS_PROTOCOL_CLIENT_H
#define BFS_PROTOCOL_CLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/xlator.h"
#include "rpc/codec.h"
#include "rpc/conn.h"
#include "rpc/idmap.h"

enum cli_state {
    CLI_IDLE,
    CLI_CONNECTING,
    CLI_HANDSHAKE,
    CLI_REOPENING,
    CLI_UP,
    CLI_WAIT,
    CLI_STOPPED,
};

enum cli_announced { CLI_ANN_NONE, CLI_ANN_UP, CLI_ANN_DOWN };

/* A POSIX lock held through an fd, kept to take it again after a reconnect.
 * Ranges of one owner never overlap; end is inclusive. */
struct cli_lock {
    struct cli_lock *next;
    uint64_t owner;
    uint32_t pid;
    uint32_t type;  /* F_RDLCK / F_WRLCK */
    uint64_t start, end;
    bool flock;     /* taken with BFS_LK_FLOCK */
};

struct cli_fd {
    struct cli_fd *prev, *next; /* priv->fds */
    int refs;                   /* under priv->lock */
    struct bfs_fd *fd;          /* not a reference: the fd holds us */
    uint64_t id;                /* remote fd id */
    struct bfs_gfid gfid;       /* to re-open by; null if only a name is known */
    struct bfs_gfid pargfid;
    char *name;
    uint32_t flags;
    bool is_dir;
    bool open_remote;           /* open on the current connection */
    bool lost;                  /* a re-open failed: fops get EBADFD */
    bool released;              /* release ran; unlinked from priv->fds */
    struct cli_lock *locks;
    /* client-prefetch.c, under priv->lock: the file as the open found it */
    void *pf_data;              /* NULL: none */
    size_t pf_len;
    uint64_t pf_gen;            /* priv->pf_gen when the open was sent */
    struct bfs_iatt pf_attr;
};

enum cli_call_kind { CALL_FOP, CALL_SETVOLUME, CALL_REOPEN, CALL_RELOCK };

struct cli_call {
    struct bfs_idmap_node node; /* request id */
    struct cli_priv *priv;
    enum cli_call_kind kind;
    int fop;
    struct bfs_frame *frame;    /* CALL_FOP */
    struct cli_fd *newfd;       /* fop that opens an fd: its context, not yet attached */
    struct cli_fd *cfd;         /* first fd the request names (lk: the locked one);
                                 * CALL_REOPEN/RELOCK: referenced */
    /* CALL_FOP lk SETLK/SETLKW, CALL_RELOCK: the lock to record on success */
    bool lk_record;
    struct cli_lock lk;
    uint64_t lk_len;
    /* CALL_FOP open that asked for the file's bytes (client-prefetch.c) */
    bool pf;
    uint64_t pf_gen;
};

struct pm_query;

struct cli_priv {
    struct bfs_xl *xl;
    struct bfs_loop *loop;
    struct bfs_workers *workers;
    const char *host, *subvol; /* option values, owned by xl->options */
    uint16_t port;              /* under lock; 0 = not known yet (port map) */
    /* port map (client-portmap.c): empty mgmt_host = the port is fixed */
    char mgmt_host[256];
    uint16_t mgmt_port;
    const char *mgmt_volume;
    char uuid[40];
    uint64_t ping_timeout_ms, connect_timeout_ms;
    uint64_t backoff_min_ms, backoff_max_ms, backoff_ms;

    pthread_mutex_t lock;
    pthread_cond_t cond;        /* the connection is gone (fini waits) */
    enum cli_state state;
    enum cli_announced announced;
    bool activated;
    struct bfs_conn *conn;      /* from connect until on_close */
    bool in_close;              /* on_close is running (fini waits for it) */
    uint64_t next_id;
    uint64_t next_fd_id;
    uint64_t pf_max;            /* performance.open-prefetch; 0: off */
    uint64_t pf_gen;            /* bumped by every change of file data (client-prefetch.c) */
    bool no_inval;              /* client.invalidations off: asks the brick for none */
    struct bfs_idmap pending;   /* id -> struct cli_call */
    struct cli_fd *fds;
    int reopen_left;            /* re-open/re-lock replies awaited before UP */
    uint64_t connects, disconnects, failures;
    int last_error;
    int pm_outstanding;         /* port map questions not yet answered on the loop */
    uint64_t pm_answers, pm_failures;

    /* loop thread only */
    struct bfs_connect *connecting;
    struct bfs_timer *ping_timer, *retry_timer;
    uint64_t last_rx_ms;
    uint64_t ping_seq;
    bool logged_failure;        /* connect failures are logged once per outage */
    struct pm_query *pm;        /* the port map question in flight */
    bool pm_logged;             /* port map failures are logged once per outage */
};

/* client-conn.c */
void cli_start_task(void *arg);   /* loop thread: first connect */
void cli_stop_task(void *arg);    /* loop thread: cancel everything, close */
void cli_on_frame(struct bfs_conn *c, const struct bfs_wire_hdr *h, void *body, size_t len,
                  void *arg);
void cli_on_close(struct bfs_conn *c, int reason, void *arg);
/* Queues call (its node.id is assigned here) with body on the current
 * connection. 0, or -ENOTCONN / -errno with call not queued (body freed).
 * If sending fails after the call became visible, the call is failed by
 * whoever owns it (on_close), and 0 is returned. requires_up: only in UP. */
int cli_submit(struct cli_priv *priv, struct cli_call *call, void *body, size_t len,
               bool requires_up);
/* The same with a body gathered from iov, which is not used once this
 * returns (bfs_conn_send: no copy when the socket takes it at once). */
int cli_submit_iov(struct cli_priv *priv, struct cli_call *call, const struct iovec *iov,
                   int iovcnt, bool requires_up);
/* Back to UP after the handshake and re-opens: announces CHILD_UP. */
void cli_set_up(struct cli_priv *priv);
const char *cli_state_name(enum cli_state s);

/* client-fop.c */
int cli_generic_fop(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req);
void cli_fop_reply(struct cli_priv *priv, struct bfs_conn *c, struct cli_call *call,
                   const struct bfs_wire_hdr *h, void *body, size_t len);
/* Fails a call that never got an answer; takes call. */
void cli_call_fail(struct cli_priv *priv, struct cli_call *call, int rc);

/* client-prefetch.c */
/* fop changes file data: bump pf_gen when it is sent and answered. */
bool cli_pf_changes_data(int fop);
void cli_pf_bump(struct cli_priv *priv);
/* An open that may ask for the file's bytes: 1 with *copy the request to
 * send instead (the caller unrefs copy->xdata after encoding), else 0. */
int cli_pf_open_req(struct cli_priv *priv, struct cli_call *call, const struct bfs_open_req *q,
                    struct bfs_open_req *copy);
/* Keeps the bytes of a successful open's reply on cf; removes them from
 * rep->xdata either way. */
void cli_pf_open_reply(struct cli_priv *priv, struct cli_call *call, struct cli_fd *cf,
                       struct bfs_open_rep *rep);
/* Answers read q of cf from its bytes (unwinding frame): true, or false to
 * send it. */
bool cli_pf_read(struct cli_priv *priv, struct cli_fd *cf, struct bfs_frame *frame,
                 const struct bfs_read_req *q);

/* client-reopen.c */
void cli_reopen_all(struct cli_priv *priv);  /* after the handshake, loop thread */
void cli_reopen_reply(struct cli_priv *priv, struct cli_call *call, int rc);
void cli_fd_unref(struct cli_priv *priv, struct cli_fd *cf); /* priv->lock held */
void cli_fd_free(struct cli_fd *cf); /* one never attached to an fd */
void cli_release(struct bfs_xl *xl, struct bfs_fd *fd);
/* Records the effect of a granted SETLK/SETLKW (priv->lock held). 0 / -ENOMEM. */
int cli_lock_apply(struct cli_fd *cf, const struct cli_lock *lk, uint64_t len);
void cli_detach_fds(struct cli_priv *priv); /* fini */

/* client-portmap.c */
/* "HOST:PORT" or "[V6]:PORT" of option mgmt-server. 0 / -EINVAL. */
int cli_pm_parse_server(const char *spec, char *host, size_t hostlen, uint16_t *port);
/* Loop thread: asks brickfsd for our brick's port on a worker; its answer
 * (cli_pm_answer, on the loop) calls cli_pm_connect. 0 or -ENOMEM. */
int cli_pm_ask(struct cli_priv *priv);
void cli_pm_answer(void *arg);
void cli_pm_cancel(struct cli_priv *priv); /* loop thread: the answer is dropped */
/* client-conn.c: connects to priv->port after a port map answer (result:
 * the port, or why there is none). */
void cli_pm_connect(struct cli_priv *priv, int result);

/* client-dump.c */
char *cli_dump(struct bfs_xl *xl);

#endif
