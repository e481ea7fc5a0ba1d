/*
 * shd.h — brickfs-shd, the self-heal daemon (docs/design/self-heal-daemon.md,
 * docs/man/brickfs-shd.md).
 *
 * It loads a volume's ordinary client volfile, finds every cluster/replicate
 * translator of the graph and talks to each directly (below distribute):
 * it lists the pending index of every brick of the set through the brick's
 * features/index (virtual getxattr "brickfs.index.pending" sent to the
 * protocol/client child), and asks the replicate translator to heal or
 * describe one GFID ("brickfs.heal.now", "brickfs.heal.status") or to
 * resolve a split-brain ("brickfs.heal.resolve").
 *
 * Objects and lifetimes: one struct shd per process (main.c), holding the
 * graph from start to exit; struct shd_set per replicate translator, made
 * when the graph is loaded. Crawls run on one crawler thread (shd-crawl.c);
 * the one-shot modes (--info, --resolve) run on the main thread.
 */
#ifndef BFS_SHD_H
#define BFS_SHD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/graph.h"
#include "core/xlator.h"

#define SHD_PROG "brickfs-shd"
#define SHD_MAX_CHILDREN 16
#define SHD_PAGE 4096 /* GFIDs asked of one index listing call */

struct shd_set {
    struct bfs_xl *afr;                       /* cluster/replicate or cluster/disperse */
    int n;
    struct bfs_xl *child[SHD_MAX_CHILDREN];   /* protocol/client (usually) */
};

/* Progress, as written to the state file. */
struct shd_stats {
    bool crawling;
    uint64_t crawls;
    int64_t last_start, last_end;             /* epoch seconds, 0 = never */
    uint64_t healed, failed, bytes;           /* cumulative */
    uint64_t split_brain, remaining;          /* as of the last (or current) crawl */
    double rate_files, rate_bytes;            /* of the last finished crawl */
};

struct shd {
    const char *volfile;
    const char *state_file;                   /* NULL: none */
    struct bfs_proc *proc;
    struct bfs_graph *g;
    const char *volume;                       /* the top translator's name */
    struct shd_set *sets;
    int nsets;
    struct bfs_stack *st;                     /* uid 0 */

    pthread_mutex_t lock;                     /* stats, wake, stop */
    pthread_cond_t cond;
    struct shd_stats stats;
    bool wake, stop;
};

/* ---- shd-graph.c ---- */
/* Builds, inits and activates the client graph of s->volfile and finds the
 * replicate sets. 0, or -errno after printing why on stderr. */
int shd_graph_open(struct shd *s);
void shd_graph_close(struct shd *s);
/* Bit i: child i of set is up as replicate sees it. */
uint32_t shd_set_up(const struct shd_set *set);
/* Waits until every child of every set is up, at most timeout_ms. */
void shd_wait_children(struct shd *s, int timeout_ms);
/* Option of a child (remote-host, remote-subvolume), or "". */
const char *shd_child_opt(const struct bfs_xl *child, const char *key);

/* ---- shd-crawl.c ---- */
/* Every GFID on the index of one brick: *out (malloc'd), *n. 0 or -errno. */
int shd_list_index(struct shd *s, struct bfs_xl *child, struct bfs_gfid **out, size_t *n);

/* What replicate said about one GFID. */
struct shd_status {
    int rc;                                   /* of the getxattr */
    char pending[64];                         /* "data,metadata" */
    char split[64];
    char ftype[16];                           /* regular|directory|symlink|other|none */
    char missing[512];
    int64_t bytes;                            /* after a heal */
};
/* getxattr name ("brickfs.heal.status" or "brickfs.heal.now") on set's
 * replicate for g. */
void shd_status(struct shd *s, struct shd_set *set, const struct bfs_gfid *g, const char *name,
                struct shd_status *out);
/* One crawl of every set (the daemon's work). */
void shd_crawl(struct shd *s);
/* Writes the state file (tmp + rename); no-op without one. */
void shd_write_state(struct shd *s);
/* The crawler thread: crawls whenever woken until stop. */
void *shd_crawler_main(void *arg);
void shd_wake(struct shd *s);

/* ---- shd-info.c ---- */
int shd_info(struct shd *s, const char *what, bool json);
int shd_resolve(struct shd *s, const char *policy, const char *file, const char *source,
                bool json);

#endif
