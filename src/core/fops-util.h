/*
 * fops-util.h — small helpers the generated fop code (build/gen) calls:
 * deep copies of locations and byte ranges, frame bookkeeping, and the
 * generic blocking call behind every bfs_sync_FOP.
 */
#ifndef BFS_CORE_FOPS_UTIL_H
#define BFS_CORE_FOPS_UTIL_H

#include "core/xlator.h"

int bfs__loc_copy(struct bfs_loc *dst, const struct bfs_loc *src); /* 0 / -ENOMEM */
void bfs__loc_clear(struct bfs_loc *loc);
int bfs__bytes_copy(struct bfs_bytes *dst, const struct bfs_bytes *src);

/* Called by bfs_unwind_FOP just before the callback. */
void bfs__frame_unwinding(struct bfs_frame *frame, int rc);
/* Called by bfs_pass_FOP: the same frame continues in child. */
void bfs__frame_pass(struct bfs_frame *frame, struct bfs_xl *child);

/*
 * Winds fop into xl from a fresh top frame and waits for the answer.
 * out (may be NULL) receives a deep copy of the reply (release with
 * bfs_fop_info[fop].rep_clear_dup / bfs_FOP_rep_clear_dup), on success and
 * on error alike. Returns the reply's rc. Must not be called on a thread the
 * answer depends on (the event loop thread).
 */
int bfs_sync_any(int fop, struct bfs_xl *xl, struct bfs_stack *st, const void *req, void *out);

/* Generic forms over bfs_fop_info[]. */
int bfs_wind_any(int fop, struct bfs_frame *frame, struct bfs_xl *child, bfs_any_cbk_t cbk,
                 void *cookie, const void *req);
void bfs_unwind_any(int fop, struct bfs_frame *frame, int rc, const void *rep);

#endif
