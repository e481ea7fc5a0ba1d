/*
 * cluster-graph.h — graph tests of a cluster translator (replicate) over
 * real bricks in one process (cluster-graph.c); its process, scratch root and
 * cg_graph_start also serve distribute's (dht-graph.h) and other graph
 * tests. Link: every C file of tests/lib
 * is linked into every test program (Makefile, TESTLIB_OBJS).
 *
 * Needs root for the trusted xattrs the helpers read on the bricks.
 */
#ifndef BFS_TESTS_CLUSTER_GRAPH_H
#define BFS_TESTS_CLUSTER_GRAPH_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/graph.h"

#define CG_MAX 8

struct cg_vol {
    struct bfs_graph *g;
    struct bfs_xl *top;            /* the cluster translator, volume "rep" */
    int n;
    char brick[CG_MAX][PATH_MAX];  /* brick folders */
    struct bfs_stack *st;          /* the stack calls go out on */
};

/* The graph's CHILD_UP / CHILD_DOWN events to the program, counted. */
extern int cg_events_up, cg_events_down;

/* Not root: prints the TAP plan that skips the program ("1..0 # SKIP")
 * and returns false. */
bool cg_can_run(void);
/* Runs the scenarios of tests, or only the one named by environment
 * variable `only_env` when it is set. */
struct cg_test {
    const char *name;
    void (*fn)(void);
};
void cg_run(const struct cg_test *tests, size_t n, const char *only_env);
/* A scenario program's main: false when not root (the plan that skips is
 * printed: return 0); else a 300 s alarm, cg_init(name) (a failure bails
 * the program out: TAP "Bail out!", exit 1), cg_run, cg_fini; true (then
 * done_testing()). */
bool cg_main(const char *name, const struct cg_test *tests, size_t n, const char *only_env);

/* Once per program: the process (2 threads) and a scratch root
 * /tmp/bfs-NAME-XXXXXX; logs at error level. 0 or -errno. */
int cg_init(const char *name);
/* The same with `threads` threads in the process. */
int cg_init_threads(const char *name, int threads);
/* Frees the process and removes the scratch root. */
void cg_fini(void);
struct bfs_proc *cg_proc(void);
/* The scratch root of cg_init (removed by cg_fini). */
const char *cg_root(void);
/* A graph from volfile text in process p (NULL: cg_init's), initialised
 * and active; NULL on error (the parser's complaint as a TAP comment). */
struct bfs_graph *cg_graph_start(const char *text, struct bfs_proc *p);
/* The port protocol/server wrote to its transport.port-file path; -1 when
 * the file is missing or holds no number. */
int cg_read_port(const char *path);
/* Sends PARENT_DOWN to the top and frees g (NULL: nothing). */
void cg_graph_stop(struct bfs_graph *g);

/*
 * n bricks (at most CG_MAX): b<i> storage/posix on a new folder, then each
 * layer of `layers` (NULL-terminated, "TYPE PREFIX", bottom-up: volume
 * PREFIX<i>), then c<i> debug/error-gen (error-no ENOTCONN); over them
 * volume "rep" whose lines are `top` (" type ...\n option ...\n"). 0 / -1.
 */
int cg_vol_open(struct cg_vol *v, int n, const char *const *layers, const char *top);
/* The same with the volumes of `above` (volfile text, NULL: none) over
 * "rep": the last of them is the top calls go through (v->top). */
int cg_vol_open_above(struct cg_vol *v, int n, const char *const *layers, const char *top,
                      const char *above);
/* replicate over posix, features/locks (l<i>), debug/io-stats (s<i>):
 * foreground heal and a 100 ms post-op delay unless `options` sets them,
 * `arbiter`: arbiter-count 1. */
int cg_rep_open(struct cg_vol *v, int n, bool arbiter, const char *options);
void cg_vol_close(struct cg_vol *v);

/* ---- the graph ---- */
struct bfs_xl *cg_child(struct cg_vol *v, int i);                         /* c<i> */
void cg_reconf(struct cg_vol *v, int i, const char *key, const char *val); /* of c<i> */
/* Child i's connection is gone: every call fails with ENOTCONN and the
 * brick drops our locks (l<i> hears CLIENT_GONE), as protocol/server does
 * when a connection closes. `tell`: the cluster hears CHILD_DOWN. */
void cg_down(struct cg_vol *v, int i, bool tell);
void cg_up(struct cg_vol *v, int i, bool tell);
/* Child i fails every call of fops (error-gen's "enable": "read", "write",
 * "all", ...) with err ("EIO"); cg_reconf(v, i, "failure", "0") ends it. */
void cg_fault(struct cg_vol *v, int i, const char *err, const char *fops);
void cg_top_set(struct cg_vol *v, const char *key, const char *val);       /* reconfigure */

/* ---- calls through the cluster translator ---- */
struct bfs_loc cg_L(const struct bfs_gfid *par, const char *name);
/* name NULL: by GFID (par). */
int cg_lookup(struct cg_vol *v, const struct bfs_gfid *par, const char *name,
              struct bfs_iatt *attr);
int cg_create(struct cg_vol *v, const struct bfs_gfid *par, const char *name,
              struct bfs_fd **fdp, struct bfs_iatt *attr);
/* An fd on the inode (as FUSE and protocol/server make them). */
int cg_open(struct cg_vol *v, const struct bfs_gfid *g, int flags, struct bfs_fd **fdp);
int cg_write(struct cg_vol *v, struct bfs_fd *fd, uint64_t off, const char *s, size_t len);
/* Reads from offset 0; the bytes read, or -errno. */
int cg_read(struct cg_vol *v, struct bfs_fd *fd, char *buf, size_t size);
int cg_flush_close(struct cg_vol *v, struct bfs_fd *fd);
int cg_mkdir(struct cg_vol *v, const struct bfs_gfid *par, const char *name,
             struct bfs_iatt *attr);
int cg_unlink(struct cg_vol *v, const struct bfs_gfid *par, const char *name);
int cg_rmdir(struct cg_vol *v, const struct bfs_gfid *par, const char *name);
/* Writes whole content to a new file and closes it. */
int cg_put(struct cg_vol *v, const struct bfs_gfid *par, const char *name, const char *s,
           struct bfs_iatt *attr);
/* cg_put, then (when par is the root) until the copies' counters are
 * clean: close() does not wait for the post-op that ends the file's eager
 * lock (replicate-fd.c, afr_flush), so a brick taken down right after a
 * put would keep the put's dirty mark until a heal. Scenarios about
 * something else start from clean copies. */
int cg_put_settled(struct cg_vol *v, const struct bfs_gfid *par, const char *name, const char *s,
                   struct bfs_iatt *attr);
/* A file in the root whose copies are clean and whose context replicate
 * knows (put, counters clean, looked up; attr: the lookup's). True when
 * all three held; what did not as a TAP comment. */
bool cg_put_known(struct cg_vol *v, const char *name, const char *s, struct bfs_iatt *attr);
/* Writes s at offset 0 of file g through a new O_RDWR fd while child i
 * fails writes with ENOSPC (the others take it), then closes the fd and
 * ends the fault. The write's answer (bytes) or the open's error. */
int cg_write_fails_on(struct cg_vol *v, int i, const struct bfs_gfid *g, const char *s);
/* A lookup that must answer within ms; one that does not bails the whole
 * test out (TAP "Bail out!"), since a hang would stop it anyway. */
int cg_lookup_within(struct cg_vol *v, const struct bfs_gfid *par, const char *name, int ms,
                     const char *what);
/* A new folder `dir` of the root holding n files e0, e1, ... (d: its
 * attributes), and an fd opened on it through the cluster translator
 * (NULL if the opendir failed). */
struct bfs_fd *cg_dir_of_names(struct cg_vol *v, const char *dir, int n, struct bfs_iatt *d);
/* One readdir of dfd at off with size bytes: the entries it gave or
 * -errno; *eod (the end, or no entry) and *next (where to continue: off
 * when it gave no entry). */
int cg_readdir_at(struct cg_vol *v, struct bfs_fd *dfd, uint64_t off, size_t size, bool *eod,
                  uint64_t *next);
/* dfd listed from offset 0 to its end (at most 10 readdirs of size
 * bytes): the entries they gave; *eod (the end was reached), *mid (where
 * the first call said to continue), *end (the listing's end offset). */
int cg_list_to_end(struct cg_vol *v, struct bfs_fd *dfd, size_t size, bool *eod, uint64_t *mid,
                   uint64_t *end);
/* Takes (lock) or drops an entry lock on (dir, name) directly on child i,
 * as another client would (its own lock owner), in replicate's domain. */
int cg_entrylk_on(struct cg_vol *v, int i, const struct bfs_gfid *dir, const char *name,
                  bool lock, uint64_t owner);

/* ---- the bricks underneath ---- */
/* Brick i's path of rel (one of 8 rotating buffers). */
const char *cg_on(struct cg_vol *v, int i, const char *rel);
/* Counter of type t in trusted.brickfs.afr.<key> on brick i (0 if absent). */
long long cg_counter(struct cg_vol *v, int i, const char *rel, const char *key, int t);
/* Every pending and dirty counter of rel on every brick is 0 (now / within
 * 2 s: post-op and unlock of entry and metadata changes run behind the
 * answer). */
bool cg_all_clean(struct cg_vol *v, const char *rel);
bool cg_clean_soon(struct cg_vol *v, const char *rel);
/* No brick's features/locks (l<i>) holds an inode lock (within 5 s): the
 * release of a window that close() did not wait for (post-op, unlock) is
 * over. For a test about to take a brick down or heal on a lookup, which
 * a lock still held would make skip the heal. */
bool cg_unlocked_soon(struct cg_vol *v);
/* The same for a graph of n bricks whose features/locks are l0..l<n-1>. */
bool cg_graph_unlocked_soon(struct bfs_graph *g, int n);
/* Brick i's features/locks (l<i>) holds an inode lock now. */
bool cg_brick_locked(struct cg_vol *v, int i);
ssize_t cg_slurp(const char *path, char *buf, size_t size);
/* Content of rel on brick i equals s. */
bool cg_content_is(struct cg_vol *v, int i, const char *rel, const char *s);
bool cg_same_gfid(struct cg_vol *v, const char *rel, uint32_t mask);
/* rel is the same on every brick of mask: type, mode, owner, GFID, user
 * xattrs and (regular files; not on the arbiter) content. */
bool cg_same_everywhere(struct cg_vol *v, const char *rel, uint32_t mask, int arbiter);
bool cg_exists(struct cg_vol *v, int i, const char *rel);
/* 0 when each child c<i> of v (protocol/client to a brick, say) answered
 * a stat of the root asked now, else the first error. */
int cg_children_answer(struct cg_vol *v);
/* Calls that reached child i (its error-gen's dump). */
uint64_t cg_calls_of(struct cg_vol *v, int i);
/* The counter key ("lookups_early", ...) of the volume's top translator's
 * own dump (0 when absent). */
uint64_t cg_top_stat(struct cg_vol *v, const char *key);
/* Winds a write of len bytes of src at off on the volume's top, from a
 * buffer of its own that it scribbles over ('X') as soon as the wind
 * returns (the call contract gives the caller its bytes back then); waits
 * for the answer and returns it. *early (may be NULL): whether the write
 * had been answered before the wind returned. */
int cg_scribbled_write(struct cg_vol *v, struct bfs_fd *fd, uint64_t off, const void *src,
                       size_t len, bool *early);
/* A counter of brick i's io-stats dump ("bytes_written", "bytes_read"). */
uint64_t cg_brick_stat(struct cg_vol *v, int i, const char *key);
/* Calls of fop that reached brick i (its io-stats s<i>: "lookup", "xattrop"). */
uint64_t cg_fop_calls(struct cg_vol *v, int i, const char *fop);
/* cg_fop_calls of every brick: out[i] for i < v->n. */
void cg_fop_counts(struct cg_vol *v, const char *fop, uint64_t *out);
/* Brick files rel on i and j have the same bytes (any size). */
bool cg_same_bytes(struct cg_vol *v, int i, int j, const char *rel);
/* storage/posix's handle of g in brick folder dir (.brickfs/AB/CD/<gfid>),
 * and whether it exists (lstat). */
void cg_handle_of(const char *dir, const struct bfs_gfid *g, char *out, size_t len);
bool cg_handle_present(const char *dir, const struct bfs_gfid *g);
/* Polls (up to 30 s) until storage/posix xl's start-up scan of orphan
 * handles (posix-orphan.c, its dump's "orphan_scan") is done: the orphans it
 * removed, or -1. */
long cg_orphan_scan_finished(struct bfs_xl *xl);
/* What brick i keeps of rel when killed in the middle of its create: the
 * name (a new empty file, 0644), with GFID g when not NULL, no handle. */
void cg_half_create(struct cg_vol *v, int i, const char *rel, const struct bfs_gfid *g);
/* The same for a mkdir: an empty directory (0755), with GFID g when not
 * NULL, no handle. */
void cg_half_mkdir(struct cg_vol *v, int i, const char *rel, const struct bfs_gfid *g);
/* rel on brick i has GFID g (trusted.brickfs.gfid). */
bool cg_gfid_on(struct cg_vol *v, int i, const char *rel, const struct bfs_gfid *g);

#endif
