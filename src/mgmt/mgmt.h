/*
 * mgmt.h — what the parts of brickfsd share: the daemon's settings and
 * state (struct bfs_mgmt), the volume model, errors meant for people, and
 * the entry points of each part. docs/design/management.md is the design.
 *
 * Locking: m->lock guards the volumes and the brick process table. API
 * handlers take it for a whole operation; waits for a process (start,
 * stop) use m->cond, which releases it, so operations that change state
 * also hold m->oplock throughout (one change at a time). The supervisor
 * thread takes m->lock for each round of its loop.
 */
#ifndef BFS_MGMT_MGMT_H
#define BFS_MGMT_MGMT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;
struct bfs_store;
struct bfs_sup;
struct bfs_catalog;
struct bfs_pool;
struct bfs_rebal;

#define BFS_MGMT_DEFAULT_PORT 24100
#define BFS_VOLNAME_MAX 64
/* Bricks per disperse set at most: the erasure code's k + m <= 32 (src/ec/ec-codec.h). */
#define BFS_DISPERSE_MAX 32

struct bfs_mgmt {
    char *state_dir, *log_dir, *run_dir;
    char *listen;            /* HOST:PORT as given */
    int port_lo, port_hi;    /* brick port range */
    char *brick_bin;
    char *shd_bin;           /* brickfs-shd: self-heal daemon and heal one-shots */
    int heal_timeout_ms;     /* limit of a brickfs-shd --info / --resolve run */
    int stop_timeout_ms;     /* SIGTERM -> SIGKILL */
    int start_timeout_ms;    /* a brick must write its port file within this */
    struct bfs_store *store;
    char node_uuid[40];
    pthread_mutex_t lock;
    pthread_cond_t cond;     /* broadcast on every brick process change */
    /* Held for a whole changing operation, waits included (which release
     * m->lock): changes never interleave, while reads stay answered. */
    pthread_mutex_t oplock;
    struct bfs_sup *sup;
    struct bfs_catalog *catalog;
    struct bfs_pool *pool;   /* pool.c: local store, pool store, peers */
    struct bfs_rebal *rebal;  /* rebalance processes (rebal-ops.c) */
};

/* ---- errors meant for people: an HTTP status and one line ---- */
struct bfs_err {
    int status;
    char msg[1024];
};
/* Fills e and returns -1, so callers can `return bfs_fail(e, 409, ...)`. */
int bfs_fail(struct bfs_err *e, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- the volume model (volume.c) ---- */
enum bfs_vol_status { BFS_VOL_CREATED = 0, BFS_VOL_STARTED, BFS_VOL_STOPPED };

struct bfs_vbrick {
    int id;      /* stable: names VOL-brick-ID, VOL-client-ID (docs/design/rebalance.md) */
    char *host;
    char *path;  /* absolute, normalised */
    int port;
    char node[40];  /* UUID of the node that runs it ("" = this node) */
};

struct bfs_vopt {
    char *key;
    char *value;
};

struct bfs_volume {
    char *name;
    char id[40];
    /* "distribute", "replicate", "distributed-replicate", "disperse" or
     * "distributed-disperse" */
    char *type;
    /* Bricks per replica set (0 = not replicated); sets are consecutive
     * runs of that many bricks. arbiter 1: the last brick of each set is
     * an arbiter (replica 3 only). */
    int replica, arbiter;
    /* Bricks per disperse set (0 = not dispersed) and how many of them a
     * set may lose (redundancy R: N - R data fragments); sets are
     * consecutive runs of `disperse` bricks. */
    int disperse, redundancy;
    enum bfs_vol_status status;
    struct bfs_vbrick *bricks;
    int nbricks;
    struct bfs_vopt *opts;
    int nopts;
    int64_t created;
    uint64_t rev;  /* store revision of this document (0 = not stored) */
    int next_brick_id;
    /* Distribute's table (docs/design/rebalance.md): text forms of
     * dht-layout.h ("" = canonical), previous = "" when none pending. */
    char *layout_table, *layout_prev;
    int64_t layout_version;
    int *remove_ids;  /* bricks being drained by remove-brick start */
    int nremove;
    struct bfs_vrebal {
        char id[40];     /* "" = never started */
        char kind[16];   /* migrate, fix-layout, remove */
        char state[16];  /* desired: running, paused, stopped, completed, failed */
        int64_t started, layout_version;
        char node[40];   /* the node that runs it ("" = this one: no pool) */
    } rebal;
};

const char *bfs_vol_status_name(enum bfs_vol_status s);
void bfs_volume_free(struct bfs_volume *v);
int bfs_volname_check(const char *name, struct bfs_err *e);
/* "VOL-brick-ID" of brick idx (its stable id) into buf. */
void bfs_brick_name(const struct bfs_volume *v, int idx, char *buf, size_t len);
/* Position of the brick called name (VOL-brick-ID), or -1. */
int bfs_volume_brick_index(const struct bfs_volume *v, const char *name);
/* Number of distribute subvolumes (bricks, or replica or disperse sets). */
int bfs_volume_nsubvols(const struct bfs_volume *v);
/* Volfile name of distribute subvolume s (VOL-client-ID / VOL-replicate-SETID / VOL-disperse-SETID). */
void bfs_subvol_name(const struct bfs_volume *v, int s, char *buf, size_t len);
const char *bfs_volume_opt(const struct bfs_volume *v, const char *key); /* NULL = unset */
int bfs_volume_opt_set(struct bfs_volume *v, const char *key, const char *value);
int bfs_volume_opt_unset(struct bfs_volume *v, const char *key); /* 0 or -ENOENT */

struct json_object *bfs_volume_to_json(const struct bfs_volume *v);
int bfs_volume_from_json(struct json_object *j, struct bfs_volume **out);

/* Store access. load: 0, -ENOENT, other -errno. save does a CAS on v->rev
 * (0 = must not exist) and updates v->rev. */
int bfs_volume_load(struct bfs_mgmt *m, const char *name, struct bfs_volume **out);
int bfs_volume_save(struct bfs_mgmt *m, struct bfs_volume *v);
/* The reason of a bfs_volume_save failure, for people: -ENXIO is a brick
 * owner that left the pool meanwhile. */
const char *bfs_volume_save_strerror(int rc);
int bfs_volume_remove(struct bfs_mgmt *m, struct bfs_volume *v);
int bfs_volume_list(struct bfs_mgmt *m, struct bfs_volume ***out, int *n);
void bfs_volume_list_free(struct bfs_volume **v, int n);
/* Loads NAME into *out or fills e (404 / 500). */
int bfs_volume_get(struct bfs_mgmt *m, const char *name, struct bfs_volume **out,
                   struct bfs_err *e);

/* ---- brick checks (bricks.c) ---- */
#define BFS_BRICK_XATTR "trusted.brickfs.volume-id"
/* "HOST:/DIR" -> host and normalised path (malloc'd). */
int bfs_brick_parse(const char *spec, char **host, char **path, struct bfs_err *e);
/* Every check of docs/design/management.md "Create", for the new bricks of
 * a volume against each other and every existing volume. */
int bfs_bricks_check(struct bfs_mgmt *m, struct bfs_vbrick *b, int n, bool force,
                     struct bfs_err *e);
/* Creates the folders and sets the marker; undoes its own work on failure. */
int bfs_bricks_mark(const struct bfs_volume *v, struct bfs_err *e);
void bfs_bricks_unmark(const struct bfs_volume *v);
/* Sets a missing marker (startup reconciliation). */
void bfs_bricks_remark(const struct bfs_volume *v);

/* ---- option catalogue (catalog.c) ---- */
/* MGMT: an option of brickfsd itself (the self-heal daemon's), in no volfile. */
enum { BFS_SIDE_CLIENT = 1, BFS_SIDE_BRICK = 2, BFS_SIDE_MGMT = 4 };
struct bfs_option_desc;
struct bfs_catalog_entry {
    const struct bfs_option_desc *d;
    const char *xlators[8];  /* types that declare it */
    int nxlators;
    unsigned sides;
};
int bfs_catalog_load(struct bfs_mgmt *m);
void bfs_catalog_free(struct bfs_catalog *c);
bool bfs_catalog_has_xlator(const struct bfs_catalog *c, const char *type);
/* Settable options, sorted by key. */
const struct bfs_catalog_entry *bfs_catalog_entries(const struct bfs_catalog *c, int *n);
const struct bfs_catalog_entry *bfs_catalog_find(const struct bfs_catalog *c, const char *key);
/* The descriptor of key in translator type (settable or not), or NULL. */
const struct bfs_option_desc *bfs_catalog_xlator_opt(const struct bfs_catalog *c,
                                                     const char *type, const char *key);
struct json_object *bfs_catalog_entry_json(const struct bfs_catalog_entry *ce);

/* ---- volfiles (volgen.c) ---- */
char *bfs_volgen_brick(struct bfs_mgmt *m, const struct bfs_volume *v, int idx);
/* The client volfile. Each protocol/client names no port: it asks
 * mgmt_addr (HOST:PORT of this brickfsd as the client reaches it; NULL =
 * --listen) where its brick listens (docs/design/graph-switch.md). mount:
 * the graph a mount or libbrickfs fetches, with performance/md-cache;
 * false for brickfsd's own daemons (self-heal, rebalance): no cache. */
char *bfs_volgen_client(struct bfs_mgmt *m, const struct bfs_volume *v, const char *mgmt_addr,
                        bool mount);
/* Writes v's client volfile (mgmt-server: --listen) to path atomically. */
int bfs_volgen_write_client(struct bfs_mgmt *m, const struct bfs_volume *v, const char *path,
                            struct bfs_err *e);
/* The self-heal daemon's graph (shd.vol): the client graph whose bricks send
 * it no invalidations and whose replicate keeps no inode memory (volgen.c). */
char *bfs_volgen_shd(struct bfs_mgmt *m, const struct bfs_volume *v);
int bfs_volgen_write_shd(struct bfs_mgmt *m, const struct bfs_volume *v, const char *path,
                         struct bfs_err *e);
/* STATE/volfiles/VOL/BRICK.vol into buf. */
void bfs_volgen_brick_path(struct bfs_mgmt *m, const struct bfs_volume *v, int idx, char *buf,
                           size_t len);
/* Writes the volfiles of v under STATE/volfiles/VOL/ atomically. */
int bfs_volgen_write(struct bfs_mgmt *m, const struct bfs_volume *v, struct bfs_err *e);
void bfs_volgen_remove(struct bfs_mgmt *m, const char *volname);

/* ---- ports (portmap.c) ---- */
/* True if a brick of host could bind port now. */
bool bfs_port_free(const char *host, int port);
/* Gives each brick of v with port 0 a port not used by any volume. */
int bfs_ports_assign(struct bfs_mgmt *m, struct bfs_volume *v, struct bfs_err *e);
/* Listen address of a brick host: 127.0.0.1 for loopback hosts, else "*". */
const char *bfs_brick_listen_addr(const char *host);

/* ---- brick processes (supervisor.c); all with m->lock held ---- */
int bfs_sup_init(struct bfs_mgmt *m);
void bfs_sup_shutdown(struct bfs_mgmt *m); /* stops the thread; bricks keep running */
/* Starts every brick of v that is not running and waits until each is
 * online; on failure stops those it started and fills e. */
int bfs_sup_start_volume(struct bfs_mgmt *m, struct bfs_volume *v, struct bfs_err *e);
/* Stops every brick of v (TERM, then KILL). */
int bfs_sup_stop_volume(struct bfs_mgmt *m, const struct bfs_volume *v, struct bfs_err *e);
struct bfs_brick_state {
    int pid;        /* 0 = not running */
    bool online;
    int restarts;
};
void bfs_sup_brick_state(struct bfs_mgmt *m, const struct bfs_volume *v, int idx,
                         struct bfs_brick_state *out);
/* Startup: adopt running bricks, start missing ones of started volumes,
 * stop strays of stopped ones. */
void bfs_sup_reconcile(struct bfs_mgmt *m);
/* Drops the process entries of a deleted (stopped) volume. */
void bfs_sup_forget(struct bfs_mgmt *m, const char *vol);
/* Pools: stops this node's brick processes of v that v no longer gives
 * this node (removed, replaced, moved to another node, or given a new
 * port by replace-brick: those are started again by the caller). */
void bfs_sup_stop_unowned(struct bfs_mgmt *m, const struct bfs_volume *v);

/* ---- the self-heal daemon of a volume (sup-shd.c); all with m->lock held ---- */
#define BFS_OPT_SHD "cluster.self-heal-daemon"
#define BFS_OPT_HEAL_INTERVAL "cluster.heal-timeout"
/* Started, replicated and cluster.self-heal-daemon on. */
bool bfs_shd_wanted(const struct bfs_volume *v);
/* bfs_shd_wanted and, in a pool, this node owns bricks of v: a daemon
 * runs on each node that owns bricks of the volume (docs/design/pool.md). */
bool bfs_shd_wanted_here(struct bfs_mgmt *m, const struct bfs_volume *v);
/* cluster.heal-timeout: seconds between the daemon's crawls. */
int bfs_shd_interval(const struct bfs_volume *v);
/* STATE/volfiles/VOL/shd.vol, STATE/shd/VOL.json, LOG/shd/VOL.log, RUN/shd/VOL.pid
 * (each buffer len bytes). */
void bfs_shd_paths(struct bfs_mgmt *m, const char *vol, char *volfile, char *statefile,
                   char *logfile, char *pidfile, size_t len);
/* Makes v's daemon match bfs_shd_wanted_here(v): starts, stops, or restarts it
 * (a changed interval). Errors are logged: a daemon that cannot start is
 * retried with backoff, the volume works on without it. */
void bfs_sup_shd_sync(struct bfs_mgmt *m, const struct bfs_volume *v);
/* Startup: adopt a running daemon of v, or start or stop one. */
void bfs_sup_shd_reconcile(struct bfs_mgmt *m, const struct bfs_volume *v);
struct bfs_shd_state {
    bool enabled;  /* bfs_shd_wanted */
    int pid;       /* 0 = not running */
    bool online;
    int restarts;
};
void bfs_sup_shd_state(struct bfs_mgmt *m, const struct bfs_volume *v, struct bfs_shd_state *out);
/* SIGUSR1 to v's daemon (crawl now); -ESRCH if it does not run. */
int bfs_sup_shd_kick(struct bfs_mgmt *m, const struct bfs_volume *v);

/* ---- operations (volume-ops.c): take m->lock themselves ---- */
struct bfs_volcreate_req {
    const char *name;
    const char *type;     /* NULL = distribute */
    int replica, arbiter, disperse, redundancy;
    int disperse_data;    /* gluster's "disperse-data D": disperse = D + redundancy */
    const char **bricks;  /* "HOST:/DIR" */
    const char **nodes;   /* NULL, or per brick the UUID of its node (pool.c) */
    int nbricks;
    bool force;
};
int bfs_op_create(struct bfs_mgmt *m, const struct bfs_volcreate_req *r, struct json_object **out,
                  struct bfs_err *e);
int bfs_op_start(struct bfs_mgmt *m, const char *name, bool force, struct json_object **out,
                 struct bfs_err *e);
int bfs_op_stop(struct bfs_mgmt *m, const char *name, struct json_object **out,
                struct bfs_err *e);
int bfs_op_delete(struct bfs_mgmt *m, const char *name, struct json_object **out,
                  struct bfs_err *e);
int bfs_op_info(struct bfs_mgmt *m, const char *name, struct json_object **out,
                struct bfs_err *e);
int bfs_op_list(struct bfs_mgmt *m, struct json_object **out, struct bfs_err *e);
int bfs_op_status(struct bfs_mgmt *m, const char *name, struct json_object **out,
                  struct bfs_err *e);
int bfs_op_set(struct bfs_mgmt *m, const char *name, struct json_object *opts,
               struct json_object **out, struct bfs_err *e);
int bfs_op_get(struct bfs_mgmt *m, const char *name, const char *key, struct json_object **out,
               struct bfs_err *e);
int bfs_op_reset(struct bfs_mgmt *m, const char *name, const char *key,
                 struct json_object **out, struct bfs_err *e);
int bfs_op_options_help(struct bfs_mgmt *m, struct json_object **out, struct bfs_err *e);
/* The client volfile text and its revision (mgmt_addr: see bfs_volgen_client). */
int bfs_op_client_volfile(struct bfs_mgmt *m, const char *name, const char *mgmt_addr,
                          char **text, uint64_t *rev, struct bfs_err *e);
/* One brick's entry of the port map (volume status), by brick name. */
int bfs_op_brick_status(struct bfs_mgmt *m, const char *name, const char *brick,
                        struct json_object **out, struct bfs_err *e);

/* ---- heal (heal-ops.c): take m->lock themselves; never hold it while
 * brickfs-shd runs ---- */
int bfs_op_heal(struct bfs_mgmt *m, const char *name, struct json_object **out,
                struct bfs_err *e);
/* mode: NULL (every pending entry), "summary" or "split-brain". */
int bfs_op_heal_info(struct bfs_mgmt *m, const char *name, const char *mode,
                     struct json_object **out, struct bfs_err *e);
int bfs_op_heal_stats(struct bfs_mgmt *m, const char *name, struct json_object **out,
                      struct bfs_err *e);
/* policy: bigger-file, latest-mtime or source-brick; file NULL (only with
 * source-brick: every file in split-brain); brick "HOST:/DIR" or NULL. */
int bfs_op_heal_resolve(struct bfs_mgmt *m, const char *name, const char *policy,
                        const char *file, const char *brick, struct json_object **out,
                        struct bfs_err *e);

/* ---- running brickfs-shd once (shd-run.c) ---- */
struct bfs_run_result {
    int status;     /* exit status; -1 = killed (timeout or signal) */
    bool timed_out;
    char *out;      /* standard output (malloc'd, NUL-terminated) */
    char *err;      /* standard error, same */
};
/* Runs argv (argv[0] the program) with no stdin, collecting its outputs,
 * killing it after timeout_ms. 0, or -errno if it could not be run. */
int bfs_run_capture(char *const argv[], int timeout_ms, struct bfs_run_result *r);
void bfs_run_result_free(struct bfs_run_result *r);

/* ---- elastic volumes (brick-ops.c, rebal-ops.c; docs/design/rebalance.md) ---- */
int bfs_op_add_brick(struct bfs_mgmt *m, const char *name, const char **bricks, int n,
                     int replica, bool force, struct json_object **out, struct bfs_err *e);
/* action: start, status, stop, commit */
int bfs_op_remove_brick(struct bfs_mgmt *m, const char *name, const char **bricks, int n,
                        const char *action, struct json_object **out, struct bfs_err *e);
int bfs_op_replace_brick(struct bfs_mgmt *m, const char *name, const char *old_brick,
                         const char *new_brick, bool force, struct json_object **out,
                         struct bfs_err *e);
/* action: fix-layout, start, stop, pause, resume */
int bfs_op_rebalance(struct bfs_mgmt *m, const char *name, const char *action,
                     struct json_object **out, struct bfs_err *e);
int bfs_op_rebalance_status(struct bfs_mgmt *m, const char *name, struct json_object **out,
                            struct bfs_err *e);
int bfs_rebal_init(struct bfs_mgmt *m);
/* Startup: adopt or restart the rebalances the documents want running. */
void bfs_rebal_reconcile(struct bfs_mgmt *m);
/* Pools: v's rebalance process on this node to match the document (started
 * when it runs here and is wanted, stopped otherwise). m->lock held. */
void bfs_rebal_sync(struct bfs_mgmt *m, const struct bfs_volume *v);
/* With m->lock held: */
struct json_object *bfs_rebal_status_json(struct bfs_mgmt *m, const struct bfs_volume *v);
/* New rebalance of kind for v (saves v, starts the process). */
int bfs__rebal_begin(struct bfs_mgmt *m, struct bfs_volume *v, const char *kind,
                     struct bfs_err *e);
/* SIGTERM to v's rebalance process and wait for its exit. */
void bfs__rebal_stop(struct bfs_mgmt *m, const char *vol);
/* A deleted volume: its rebalance checkpoint and status files go. */
void bfs__rebal_forget(struct bfs_mgmt *m, const char *vol);

/* ---- HTTP (http.c, api.c) ---- */
struct bfs_http_reply {
    int status;
    char *body;            /* malloc'd */
    const char *ctype;     /* "application/json" or "text/plain" */
    char etag[32];         /* empty = none */
};
struct bfs_http;
int bfs_http_start(struct bfs_mgmt *m, struct bfs_http **out, char *err, size_t errlen);
void bfs_http_stop(struct bfs_http *h);
/* Routes one request; body may be NULL. if_none_match and host (NULL when
 * absent) from the headers. */
void bfs_api_dispatch(struct bfs_mgmt *m, const char *method, const char *url,
                      const char *body, size_t len, const char *if_none_match,
                      const char *host, struct bfs_http_reply *r);

/* ---- small file helpers (util.c) ---- */
/* Writes text to path through path.tmp + fsync + rename + fsync(dir). */
int bfs_write_file_atomic(const char *path, const char *text, size_t len);
int bfs_mkdir_p(const char *path, int mode);
/* Reads a small text file (NUL-terminated, malloc'd). */
int bfs_read_small(const char *path, char **out);
void bfs_uuid_generate(char out[40]);
/* Tests of races: sleeps MS when BRICKFSD_TEST_PAUSE names point as
 * "POINT=MS[,POINT=MS...]" (brickfsd(8), ENVIRONMENT); nothing otherwise. */
void bfs__test_pause(const char *point);

#define MGMT_LOG "brickfsd"

#endif
