/*
 * heal-status.h — the answer a cluster translator gives the self-heal
 * daemon about one inode ("brickfs.heal.status" / "brickfs.heal.now",
 * docs/design/self-heal-daemon.md): the same keys and the same one-line
 * summary whatever the kind of set. The translator fills a struct
 * bfs_heal_status from its own view; bfs_heal_status_dict() makes the
 * reply. Nothing here outlives a call but the returned dict.
 */
#ifndef BFS_XL_LIB_HEAL_STATUS_H
#define BFS_XL_LIB_HEAL_STATUS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/xlator.h"
#include "txn.h"

#define BFS_HEAL_VKEY_PREFIX "brickfs.heal."

struct bfs_heal_status {
    bool found;                        /* some child answered with the object */
    uint32_t mode;                     /* its mode (S_IFMT matters) */
    uint32_t types;                    /* bit per BFS_TXN_* type that applies */
    uint32_t pending, split;           /* bit per type */
    uint32_t sources[BFS_TXN_NTYPES];  /* child masks per type */
    uint32_t sinks[BFS_TXN_NTYPES];
    uint32_t missing, down;            /* children: ENOENT/ESTALE; down or failing */
};

/* "regular", "directory", "symlink", "other", or "none" when !found. */
const char *bfs_heal_ftype(const struct bfs_heal_status *hs);
/* The reply of a status: brickfs.heal.{status,pending,split-brain,missing,
 * down,file-type,sources.T,sinks.T} (xl's children named). NULL: ENOMEM. */
struct bfs_dict *bfs_heal_status_dict(const struct bfs_xl *xl, const struct bfs_heal_status *hs);

#endif
