/*
 * quorum.h — client quorum: may a change go on with this set of children?
 * Pure functions (no runtime), shared by replicate and disperse and unit
 * tested in tests/unit/test_afr_decide.c.
 *
 *   none   any child is enough (mask non-empty);
 *   auto   more than half of the children; exactly half only with the
 *          first child among them (the tie-break GlusterFS uses);
 *   fixed  at least `count` children (count is capped to n).
 */
#ifndef BFS_XL_LIB_QUORUM_H
#define BFS_XL_LIB_QUORUM_H

#include <stdbool.h>
#include <stdint.h>

enum bfs_quorum_type { BFS_QUORUM_NONE = 0, BFS_QUORUM_AUTO = 1, BFS_QUORUM_FIXED = 2 };

/* "none", "auto", "fixed"; -EINVAL otherwise. */
int bfs_quorum_parse(const char *s, enum bfs_quorum_type *out);
const char *bfs_quorum_name(enum bfs_quorum_type t);
bool bfs_quorum_met(int type, int count, int n, uint32_t mask);

#endif
