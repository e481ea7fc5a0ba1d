/*
 * dht-graph.h — graph tests of cluster/distribute over real bricks in one
 * process (dht-graph.c): test_distribute.c and test_distribute_migrate.c.
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

#endif
