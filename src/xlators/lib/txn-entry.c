/*
 * txn-entry.c — what entry transactions (changes of names: create, mknod,
 * mkdir, symlink, link, unlink, rmdir, rename) of cluster translators
 * have in common: the locks they take and the entry window.
 *
 *   one-shot   entrylk on the name(s) changed (rename: both, in the global
 *              order of bfs_lkset_entry_cmp so two renames cannot
 *              deadlock), changelog on the parent(s);
 *   window     the eager entry lock of a directory (a shared struct
 *              bfs_txn_lock of type BFS_TXN_ENTRY in the translator's
 *              inode context): an entrylk on the whole directory and the
 *              parent's pre-op, taken by the first change and kept for the
 *              next ones (only their fop crosses to the bricks), released
 *              like a data window (txn.h): cl->delay_ms after the last
 *              change, at once on a contention notice (another owner waits
 *              for the directory: another client, a heal, a rename of
 *              ours, which keeps per-name locks), after TXN_WINDOW_MAX_MS
 *              at most, and at PARENT_DOWN. Changes of different names run
 *              side by side under it: their byte range is a hash of the
 *              name (one name's changes queue behind each other).
 *
 * Used by cluster/replicate (replicate-entry.c, cluster.entry-eager-lock)
 * and cluster/disperse (disperse-meta.c, disperse.other-eager-lock).
 *
 * Nothing here allocates or outlives the call.
 */
#include <string.h>

#include "txn.h"

bool bfs_txn_entry_window_on(struct bfs_cluster *cl, bool option)
{
    return option && __atomic_load_n(&cl->eager, __ATOMIC_RELAXED) &&
           __atomic_load_n(&cl->delay_ms, __ATOMIC_RELAXED) != 0;
}

void bfs_txn_entry_target(struct bfs_txn_target *tg, const struct bfs_loc *l1,
                          const struct bfs_loc *l2)
{
    const struct bfs_loc *first = l1, *second = l2;
    memset(tg, 0, sizeof(*tg));
    if (l2 && bfs_lkset_entry_cmp(&l2->pargfid, l2->name, &l1->pargfid, l1->name) < 0) {
        first = l2;
        second = l1;
    }
    tg->nsets = 1;
    tg->nobj = 1;
    tg->lk[0].kind = BFS_LKSET_ENTRY;
    tg->lk[0].gfid = first->pargfid;
    tg->lk[0].name = first->name;
    tg->obj[0] = l1->pargfid;
    if (second) {
        tg->nsets = 2;
        tg->lk[1].kind = BFS_LKSET_ENTRY;
        tg->lk[1].gfid = second->pargfid;
        tg->lk[1].name = second->name;
        if (!bfs_gfid_eq(&l1->pargfid, &l2->pargfid))
            tg->obj[tg->nobj++] = l2->pargfid;
    }
}

/* A range per name for the overlap rule of a shared lock: FNV-1a. */
static void name_range(struct bfs_txn *t, const char *name)
{
    uint64_t h = 14695981039346656037ull;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        h = (h ^ *c) * 1099511628211ull;
    t->start = h >> 1;
    t->end = t->start + 1;
}

int bfs_txn_init_entry_window(struct bfs_txn *t, struct bfs_cluster *cl,
                              const struct bfs_txn_fop *fop, struct bfs_frame *caller,
                              struct bfs_txn_lock *win, struct bfs_inode *parent,
                              const struct bfs_loc *loc)
{
    struct bfs_txn_target tg = {.nsets = 1, .nobj = 1, .inode = parent};
    tg.lk[0].kind = BFS_LKSET_ENTRY; /* no name: the whole directory */
    tg.lk[0].gfid = loc->pargfid;
    tg.obj[0] = loc->pargfid;
    name_range(t, loc->name);
    t->fd_based = true; /* the window stays for the next change */
    return bfs_txn_init(t, cl, fop, caller, BFS_TXN_ENTRY, win, &tg);
}
