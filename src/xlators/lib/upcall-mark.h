/*
 * upcall-mark.h — for cluster translators that answer an open with one
 * child's reply: features/upcall marks open replies (BFS_XDATA_UPCALL) and
 * performance/md-cache keeps the attributes of a marked read-only open
 * (docs/design/cache-invalidation.md). A translator may pass the mark only
 * if the reply's attributes are the file's as the volume sees it; one that
 * cannot vouch for them (a fragment's attributes, a copy not known good)
 * answers with the mark taken out. Nothing here outlives the call.
 */
#ifndef BFS_XL_LIB_UPCALL_MARK_H
#define BFS_XL_LIB_UPCALL_MARK_H

#include "core/xlator.h"

/* Unwinds rep (an open's reply) without the mark; without memory for the
 * copy of its xdata, with no xdata at all (still unmarked). */
static inline void bfs_unwind_open_unmarked(struct bfs_frame *frame, int rc,
                                            const struct bfs_open_rep *rep)
{
    if (rc < 0 || !rep || !bfs_dict_has(rep->xdata, BFS_XDATA_UPCALL)) {
        bfs_unwind_open(frame, rc, rep);
        return;
    }
    struct bfs_open_rep r = *rep;
    r.xdata = bfs_dict_copy(rep->xdata);
    if (r.xdata)
        (void)bfs_dict_del(r.xdata, BFS_XDATA_UPCALL);
    bfs_unwind_open(frame, rc, &r);
    bfs_dict_unref(r.xdata);
}

/* Tells the translators above xl (performance/md-cache) that this client
 * changed g below them without a fop they saw: a changelog xattrop moved
 * its ctime (times_only), or a heal ran on it. The bricks' upcall tells
 * every other client; this one is the origin and is left out, so its
 * invalidation goes up here, with no message (docs/design/
 * cache-invalidation.md, "Messages"). Call it once the change is on the
 * bricks (their replies are in). */
static inline void bfs_upcall_local(struct bfs_xl *xl, const struct bfs_gfid *g, bool times_only)
{
    struct bfs_upcall up = {.kind = BFS_UPCALL_INODE, .gfid = *g, .local = true,
                            .times_only = times_only};
    if (!bfs_gfid_is_null(g))
        bfs_xl_notify_parents(xl, BFS_EV_UPCALL, &up);
}

/* A changelog post-op of g by this client (named by id, nonzero), for
 * md-cache above: begin before it is wound, then done once its replies
 * are in, with attr (what a lookup of g answers now) when the cluster
 * translator vouches for it, else NULL (then it is a times-only
 * invalidation, as bfs_upcall_local's). Every begin is followed by its
 * done (cache-invalidation.md, "Messages"). */
static inline void bfs_upcall_postop(struct bfs_xl *xl, const struct bfs_gfid *g, uint64_t id,
                                     bool begin, const struct bfs_iatt *attr)
{
    struct bfs_upcall up = {.kind = BFS_UPCALL_INODE, .gfid = *g, .local = true,
                            .times_only = true, .postop = id, .postop_begin = begin,
                            .attr = attr};
    if (!bfs_gfid_is_null(g))
        bfs_xl_notify_parents(xl, BFS_EV_UPCALL, &up);
}

#endif
