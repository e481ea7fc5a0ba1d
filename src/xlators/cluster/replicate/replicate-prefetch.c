/*
 * replicate-prefetch.c — an O_RDONLY open goes to every copy (so reads can
 * fall back), but protocol/client's open-prefetch (the whole small file
 * read back with the open) is only useful on the copy that will serve the
 * reads: the others are asked for no prefetch (xdata "open-prefetch" = 0),
 * which saves two disk reads and two transfers of the file per small-file
 * read on replica 3. The copy is predicted with the read policy, for the
 * policies whose choice is stable (first-up, gfid-hash); a read that ends
 * up elsewhere just goes to its brick, as without prefetch. When no copy
 * is known good as the open is sent (no fresh context), no copy is asked:
 * the reads would have to skip those bytes anyway (struct
 * afr_fd.prefetch_ok). Nothing here outlives a call.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "replicate.h"

#define AFR_PREFETCH_KEY "open-prefetch" /* protocol/client, client-prefetch.c */

int afr_open_reader(struct afr_priv *p, const struct bfs_open_req *q, uint32_t good)
{
    int policy = __atomic_load_n(&p->read_policy, __ATOMIC_RELAXED);
    if ((q->flags & (O_ACCMODE | O_TRUNC)) != O_RDONLY)
        return -1;
    if (!afr_data_mask(p, good))
        return AFR_NO_READER;
    if (policy == AFR_READ_LEAST_LOADED)
        return -1;
    struct bfs_gfid g = q->loc.gfid;
    struct bfs_inode *inode = q->fd && q->fd->inode ? bfs_inode_ref(q->fd->inode)
                                                    : afr_inode_of_loc(p->xl, &q->loc);
    if (inode && bfs_gfid_is_null(&g))
        g = inode->gfid;
    uint32_t cand = afr_up(p);
    struct afr_inode *c = inode ? afr_ictx(p->xl, inode) : NULL;
    uint32_t type = 0;
    if (c) {
        bool split = false;
        cand &= afr_ictx_readable(c, AFR_DATA, &split, &type);
        if (split)
            cand = 0;
    }
    if (inode)
        bfs_inode_unref(inode);
    if (type != 0 && type != S_IFREG)
        return -1;
    cand = afr_data_mask(p, cand);
    if (!cand || bfs_gfid_is_null(&g))
        return -1;
    int reader = afr_pick_read(cand, policy, &g, p->load, p->n);
    return reader >= 0 && !bfs_mask_has(good, reader) ? AFR_NO_READER : reader;
}

void afr_open_wind(struct bfs_op *op, int i, const struct bfs_open_req *q, int reader)
{
    struct bfs_xl *child = op->xl->children[i];
    if (reader == -1 || i == reader) {
        bfs_op_wind(op, i, BFS_FOP_OPEN, child, q);
        return;
    }
    struct bfs_open_req copy = *q;
    copy.xdata = q->xdata ? bfs_dict_copy(q->xdata) : bfs_dict_new();
    if (!copy.xdata || bfs_dict_set_int(copy.xdata, AFR_PREFETCH_KEY, 0) < 0) {
        bfs_dict_unref(copy.xdata);
        bfs_op_wind(op, i, BFS_FOP_OPEN, child, q); /* a prefetch too many, nothing worse */
        return;
    }
    bfs_op_wind(op, i, BFS_FOP_OPEN, child, &copy);
    bfs_dict_unref(copy.xdata);
}
