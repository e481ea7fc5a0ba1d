/*
 * layout.h — the distribute table of a volume as brickfsd changes it
 * (layout.c; docs/design/rebalance.md "Tables"). All calls work on a
 * volume in memory; the caller saves the document.
 */
#ifndef BFS_MGMT_LAYOUT_H
#define BFS_MGMT_LAYOUT_H

#include <stdint.h>

#include "mgmt/mgmt.h"
#include "xlators/cluster/distribute/dht-layout.h"

/* The table in force, over nsub subvolumes (a shorter table owns none of
 * the last ones). 0, or -1 with e filled. */
int bfs_layout_current(const struct bfs_volume *v, int nsub, struct dht_table **out,
                       struct bfs_err *e);
/* Before subvolumes are appended: write the canonical table explicitly
 * ("canonical:N") so that it keeps meaning the old N. 0 or -ENOMEM. */
int bfs_layout_pin(struct bfs_volume *v);
/* Weights of the subvolumes (bfs_volume_nsubvols entries): brick sizes
 * (smallest of a set), 1 for all when within 5%, 0 for leaving bricks. */
void bfs_layout_weights(const struct bfs_volume *v, uint64_t *w);
/* Re-targets the table to w: previous = the table in force, version+1.
 * Returns the buckets moved (0: nothing changed, nothing written), -1 with e. */
long bfs_layout_fix(struct bfs_volume *v, const uint64_t *w, struct bfs_err *e);
/* Drops subvolume positions (ascending, each owning no bucket) from the
 * table; previous cleared, version+1. 0 or -1 with e. */
int bfs_layout_drop(struct bfs_volume *v, const int *subvols, int nsub, struct bfs_err *e);
/* A migration completed: previous cleared (version+1 if it was set). */
int bfs_layout_finish(struct bfs_volume *v);

#endif
