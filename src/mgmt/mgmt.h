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

#define BFS_MGMT_DEFAULT_PORT 24100
#define BFS_VOLNAME_MAX 64

struct bfs_mgmt {
    char *state_dir, *log_dir, *run_dir;
    char *listen;            /* HOST:PORT as given */
    int port_lo, port_hi;    /* brick port range */
    char *brick_bin;
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
    char *type;  /* "distribute", "replicate" or "distributed-replicate" */
    /* Bricks per replica set (0 = not replicated); sets are consecutive
     * runs of that many bricks. arbiter 1: the last brick of each set is
     * an arbiter (replica 3 only). */
    int replica, arbiter;
    enum bfs_vol_status status;
    struct bfs_vbrick *bricks;
    int nbricks;
    struct bfs_vopt *opts;
    int nopts;
    int64_t created;
    uint64_t rev;  /* store revision of this document (0 = not stored) */
};

const char *bfs_vol_status_name(enum bfs_vol_status s);
void bfs_volume_free(struct bfs_volume *v);
int bfs_volname_check(const char *name, struct bfs_err *e);
/* "VOL-brick-N" into buf. */
void bfs_brick_name(const struct bfs_volume *v, int idx, char *buf, size_t len);
const char *bfs_volume_opt(const struct bfs_volume *v, const char *key); /* NULL = unset */
int bfs_volume_opt_set(struct bfs_volume *v, const char *key, const char *value);
int bfs_volume_opt_unset(struct bfs_volume *v, const char *key); /* 0 or -ENOENT */

struct json_object *bfs_volume_to_json(const struct bfs_volume *v);
int bfs_volume_from_json(struct json_object *j, struct bfs_volume **out);

/* Store access. load: 0, -ENOENT, other -errno. save does a CAS on v->rev
 * (0 = must not exist) and updates v->rev. */
int bfs_volume_load(struct bfs_mgmt *m, const char *name, struct bfs_volume **out);
int bfs_volume_save(struct bfs_mgmt *m, struct bfs_volume *v);
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
enum { BFS_SIDE_CLIENT = 1, BFS_SIDE_BRICK = 2 };
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
 * --listen) where its brick listens (docs/design/graph-switch.md). */
char *bfs_volgen_client(struct bfs_mgmt *m, const struct bfs_volume *v, const char *mgmt_addr);
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

/* ---- operations (volume-ops.c): take m->lock themselves ---- */
struct bfs_volcreate_req {
    const char *name;
    const char *type;     /* NULL = distribute */
    int replica, arbiter, disperse, redundancy;
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

#define MGMT_LOG "brickfsd"

#endif
