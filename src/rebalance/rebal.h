/*
 * rebal.h — brickfs-rebalance, the per-node process that moves files whose
 * place changed after a layout change (docs/design/rebalance.md, "The
 * rebalance process"). Shared by main.c (arguments, graph, status file),
 * crawl.c (the walk of each subvolume and its checkpoint) and migrate.c
 * (moving one file).
 *
 * One struct rb lives for the whole run; the process is single-threaded
 * (blocking fops into the graph's event loop) apart from libbrickfs's own
 * threads.
 */
#ifndef BFS_REBALANCE_REBAL_H
#define BFS_REBALANCE_REBAL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/graph.h"
#include "core/xlator.h"
#include "xlators/cluster/distribute/dht-layout.h"

#define RB_LINKTO_KEY "trusted.brickfs.dht.linkto"
#define RB_MIGRATING_KEY "trusted.brickfs.dht.migrating"
#define RB_COPIED_KEY "trusted.brickfs.dht.copied" /* the last copy's size */
#define RB_INTERNAL_KEY "brickfs-internal"
#define RB_GFID_REQ_KEY "gfid-req"
#define RB_LOCK_DOMAIN "dht.migrate"
#define RB_ENTRY_DOMAIN "dht" /* distribute's entry locks on names */
#define RB_FROZEN_BITS (S_ISVTX | S_ISGID)
#define RB_CHUNK (1u << 20)

struct rb_counters {
    int64_t scanned, moved, skipped, failed, bytes, dirs_done, runs;
};

struct rb {
    const char *volume, *volfile, *state_dir, *status_path, *id, *kind;
    long long layout_version;
    long long settle_until;   /* no move before this time (epoch s): mounts switch tables */
    struct bfs_graph *graph;
    struct bfs_xl *dht;
    struct bfs_xl **sub;   /* dht's children, in position order */
    int nsub;
    struct dht_table *table;
    struct dht_table *prev;   /* layout-previous, or NULL */
    struct rb_counters c;
    double start_time;      /* monotonic seconds, this run */
    int64_t scanned_at_start;
    uint64_t total_estimate;  /* entries on the subvolumes (statfs inodes in use) */
    double max_bps;           /* copy rate limit in bytes/s; 0 = none */
    double throttle_t0;
    uint64_t throttle_bytes;
    FILE *checkpoint;         /* append: "SUBVOL GFID" per finished directory */
    int moves_fd;             /* append: "GFID SIZE FROM TO" per moved file */
    char **done;              /* finished directories (hash set of "S GFID") */
    size_t done_cap, done_n;
    double last_status;
    uint64_t lock_owner;
    bool rewalk;              /* a drain's repeated walk: no checkpoint skipping or writing */
    int64_t raced;            /* files that were renamed or unlinked before we could move them */
};

extern volatile sig_atomic_t bfs_rb_stop;

/* main.c */
double bfs_rb_now(void);
/* Writes the status file (at most every 0.5 s unless force). */
void bfs_rb_status(struct rb *rb, const char *state, bool force);
struct bfs_stack *bfs_rb_stack(void);
struct bfs_dict *bfs_rb_xdata_internal(void);

/* crawl.c: loads the checkpoint (or starts one), walks every subvolume. 0
 * when every directory was finished, -EINTR when asked to stop, other
 * -errno when a subvolume could not be walked. */
int bfs_rb_checkpoint_open(struct rb *rb);
void bfs_rb_checkpoint_close(struct rb *rb);
int bfs_rb_crawl(struct rb *rb);

/* migrate.c: moves (P, N) from subvolume s to h; attr is the entry's. 1
 * moved, 0 skipped (busy, hard links), <0 failed. */
int bfs_rb_migrate(struct rb *rb, int s, int h, const struct bfs_gfid *pargfid,
                   const char *name, const struct bfs_iatt *attr);
/* Sleeps as the throttle says after n bytes were copied. */
void bfs_rb_throttle(struct rb *rb, uint64_t n);

#endif
