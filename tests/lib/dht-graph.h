/*
 * dht-graph.h — graph tests of cluster/distribute over real bricks in one
 * process (dht-graph.c): test_distribute.c, test_distribute_network.c,
 * test_distribute_migrate.c and the diagnostics tool tests/tools/dht_calls.c.
 * Link: every C file of tests/lib is linked into every test program
 * (Makefile, TESTLIB_OBJS). The process and the scratch root are
 * cluster-graph.c's (cg_init_threads, cg_root, cg_fini).
 *
 * Needs root for the trusted xattrs the tests read on the bricks.
 */
#ifndef BFS_TESTS_DHT_GRAPH_H
#define BFS_TESTS_DHT_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster-graph.h"
#include "core/graph.h"
#include "xlators/cluster/distribute/dht-layout.h"

#define DG_MAXB 6

/* Distribute ("dht") over bricks b<i>: each posix (or memory) -> features/locks
 * -> debug/error-gen named b<i> (failure 0, error-no ENOTCONN). */
struct dg_vol {
    struct bfs_graph *g;
    struct bfs_xl *top;
    int n;
    char dir[DG_MAXB][128];        /* brick folders */
    struct dht_table *table;       /* canonical(n): where names hash */
};

/* The stack every call of the helpers (and of the tests) goes out on. */
extern struct bfs_stack *dg_st;

/* Once per program: cg_init_threads(name, 4), the log level of
 * DHT_TEST_LOG (default error), dg_st. 0 or -errno. */
int dg_init(const char *name);
void dg_fini(void);

/* Bricks under distribute: types[i] 'p' (storage/posix in a folder
 * cg_root()/TAG-b<i>) or 'm' (storage/memory); extra: more option lines
 * for distribute. */
bool dg_vol_start_types(struct dg_vol *v, const char *types, const char *tag, const char *extra);
/* n (3 or 6) posix bricks. */
bool dg_vol_start(struct dg_vol *v, int n, const char *tag, const char *extra);
/* Frees the graph and empties the brick folders. */
void dg_vol_stop(struct dg_vol *v);
/* Reconfigures one key of xl; its answer. */
int dg_reconf(struct bfs_xl *xl, const char *key, const char *val);

/* The subvolume (par, name) hashes to. */
int dg_hashed(struct dg_vol *v, const struct bfs_gfid *par, const char *name);
/* A name "prefix-K" that hashes to subvolume want (in buf). */
const char *dg_name_on(struct dg_vol *v, const struct bfs_gfid *par, const char *prefix,
                       int want, char *buf, size_t len);

/* A location by GFID alone (cg_L: by parent and name). */
struct bfs_loc dg_LG(const struct bfs_gfid *g);
/* create + write + close through distribute; the file's GFID in *out. */
int dg_put(struct dg_vol *v, const struct bfs_gfid *par, const char *name, const char *data,
           struct bfs_gfid *out);
/* Brick b's path of rel (one of 4 rotating buffers). */
const char *dg_on_disk(struct dg_vol *v, int b, const char *rel);

/* ---- calls through distribute (on dg_st; rc >= 0 or -errno) ---- */
/* attr (may be NULL): the reply's attributes. */
int dg_lookup(struct dg_vol *v, const struct bfs_gfid *par, const char *name,
              struct bfs_iatt *attr);
/* out (may be NULL): the new directory's GFID. */
int dg_mkdir(struct dg_vol *v, const struct bfs_gfid *par, const char *name,
             struct bfs_gfid *out);
int dg_rmdir(struct dg_vol *v, const struct bfs_gfid *par, const char *name);
int dg_unlink(struct dg_vol *v, const struct bfs_gfid *par, const char *name);
int dg_rename(struct dg_vol *v, const struct bfs_gfid *op, const char *on,
              const struct bfs_gfid *np, const char *nn);
/* lookup + open + read into buf (NUL-terminated); the file's GFID in *g. 0 or -errno. */
int dg_get(struct dg_vol *v, const struct bfs_gfid *par, const char *name, char *buf,
           size_t len, struct bfs_gfid *g);
/* Every name of directory g, read with readdir of `size` bytes at a time;
 * calls fn for each. Returns the number of entries or -errno. */
int dg_list(struct dg_vol *v, const struct bfs_gfid *g, uint32_t size, bool plus,
            void (*fn)(const struct bfs_dirent *e, void *arg), void *arg);

/* Counts names PREFIX<index> of a listing (dg_tally_fn as dg_list's fn). */
struct dg_tally {
    int *count; /* per index */
    int n;
    int bad;    /* names outside the expected set */
    int noattr; /* plus entries without attributes or with a d_ino not from the GFID */
    bool plus;
    const char *prefix; /* names are PREFIX<index> */
};
void dg_tally_fn(const struct bfs_dirent *e, void *arg);

/* ---- what is on the bricks ---- */
#define DG_LINKTO "trusted.brickfs.dht.linkto"
enum dg_kind { DG_ABSENT, DG_DATA, DG_LINKF, DG_DIR };
/* What brick b has at rel, and (link files, to may be NULL) which brick it points to. */
enum dg_kind dg_disk_kind(struct dg_vol *v, int b, const char *rel, int *to);
/* Counts of each kind of rel across the bricks. */
void dg_census(struct dg_vol *v, const char *rel, int *data, int *links, int *dirs);
/* On the bricks, rel is: data on brick `data` (or -1: no data anywhere) and
 * a link file on brick `link` pointing to `data` (or -1: no link file). */
bool dg_placed(struct dg_vol *v, const char *rel, int data, int link);
/* No brick's folder rel holds a rename's temporary name (.dht-rename-*). */
bool dg_no_tmp_names(struct dg_vol *v, const char *rel);
/* Calls seen by brick b's error-gen (volume b<b>) so far, -1 if unknown. */
long dg_eg_calls(struct dg_vol *v, int b);

/* ---- concurrent namespace changes ---- */
#define DG_CC_NAMES 12
/* What dg_run_cc found. */
struct dg_cc {
    int mkdir_rc;   /* of directory dname */
    int iters;      /* operations per thread (DHT_TEST_ITER, default 250) */
    int consistent; /* names either nowhere or one file with exactly its link file */
    int exist;      /* names a lookup finds */
    bool no_tmp;    /* no temporary rename names left on the bricks */
    bool listed;    /* readdir lists exactly the names that exist */
};
/* Four threads create, rename and unlink names c-0..c-11 of a new
 * directory dname at random (seed DHT_TEST_SEED, default 1000), alternating
 * between volumes a and b (two clients of the same bricks, or one twice);
 * then the bricks are checked through a: true when every name holds, no
 * temporary name is left and readdir lists exactly the names that exist;
 * what did not hold as TAP comments. */
bool dg_run_cc(struct dg_vol *a, struct dg_vol *b, const char *dname, struct dg_cc *r);

#endif
