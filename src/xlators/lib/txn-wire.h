/*
 * txn-wire.h — xdata keys by which a transaction asks the brick's
 * features/locks to do a changelog step inside another call, saving a
 * round trip (docs/design/replicate.md, "Piggybacked changelog steps").
 * Header only: shared by lib/txn (client side) and features/locks (brick).
 *
 *   post-op + unlock: an xattrop/fxattrop whose xdata has
 *     BFS_TXN_X_UNLOCK_INODE = domain  -> after the xattrop, the caller's
 *        whole-file inodelk of that domain on the xattrop's inode is released;
 *     BFS_TXN_X_UNLOCK_ENTRY = domain and BFS_TXN_X_UNLOCK_NAME = name
 *        -> the caller's entrylk (domain, name) in that directory is.
 *     The unlock happens whatever the xattrop answered; the reply's xdata
 *     then carries BFS_TXN_X_UNLOCKED (a brick without this support leaves
 *     it out, and the client unlocks with a call of its own).
 *   pre-op: an entry fop (create, mknod, mkdir, symlink, link, unlink,
 *     rmdir) whose xdata has keys BFS_TXN_X_PREOP "<xattr>" (24-byte rows)
 *     -> features/locks first applies them as one ADD64 xattrop to the
 *     parent directory, then runs the fop; if the fop fails, the xattrop is
 *     undone before the error is answered. The fop fails with the
 *     xattrop's error if the xattrop fails. Clients send it only to bricks
 *     that acknowledged BFS_TXN_X_UNLOCKED (so the brick understands it).
 *   lock on create: a create whose xdata has BFS_TXN_X_NEWLOCK = domain,
 *     BFS_TXN_X_NEWLOCK_OWNER = lock owner (INT), gfid-req, and rows
 *     BFS_TXN_X_NEWROW "<xattr>" -> features/locks grants that owner (on
 *     this connection) the whole-file inodelk of the domain on gfid-req
 *     before the create runs, and after it succeeded adds the rows to the
 *     new file (ADD64): the data pre-op of an eager lock, taken with the
 *     create. The reply's xdata then carries BFS_TXN_X_NEWLOCKED; without
 *     it (lock refused, rows not added, create failed) the brick holds no
 *     such lock.
 */
#ifndef BFS_XL_LIB_TXN_WIRE_H
#define BFS_XL_LIB_TXN_WIRE_H

#define BFS_TXN_X_UNLOCK_INODE "brickfs.txn.unlock-inode"
#define BFS_TXN_X_UNLOCK_ENTRY "brickfs.txn.unlock-entry"
#define BFS_TXN_X_UNLOCK_NAME "brickfs.txn.unlock-name"
#define BFS_TXN_X_UNLOCKED "brickfs.txn.unlocked"
#define BFS_TXN_X_PREOP "brickfs.txn.preop:"
#define BFS_TXN_X_PREOP_LEN (sizeof(BFS_TXN_X_PREOP) - 1)
#define BFS_TXN_X_NEWLOCK "brickfs.txn.newlock"
#define BFS_TXN_X_NEWLOCK_OWNER "brickfs.txn.newlock-owner"
#define BFS_TXN_X_NEWLOCKED "brickfs.txn.newlocked"
#define BFS_TXN_X_NEWROW "brickfs.txn.newrow:"
#define BFS_TXN_X_NEWROW_LEN (sizeof(BFS_TXN_X_NEWROW) - 1)
#define BFS_TXN_X_GFID_REQ "gfid-req"

#include "core/fops-util.h"

/* The xdata field of an entry fop's request that can carry a pre-op, and
 * (parent) the name it changes: NULL for any other fop. */
static inline struct bfs_dict **bfs_txn_entry_xdata(int fop, void *req,
                                                    const struct bfs_loc **parent)
{
    switch (fop) {
#define BFS__TXN_X(FOP, type, locf)                                                          \
    case FOP:                                                                                \
        *parent = &((struct type *)req)->locf;                                               \
        return &((struct type *)req)->xdata;
        BFS__TXN_X(BFS_FOP_CREATE, bfs_create_req, loc)
        BFS__TXN_X(BFS_FOP_MKNOD, bfs_mknod_req, loc)
        BFS__TXN_X(BFS_FOP_MKDIR, bfs_mkdir_req, loc)
        BFS__TXN_X(BFS_FOP_SYMLINK, bfs_symlink_req, loc)
        BFS__TXN_X(BFS_FOP_LINK, bfs_link_req, newloc)
        BFS__TXN_X(BFS_FOP_UNLINK, bfs_unlink_req, loc)
        BFS__TXN_X(BFS_FOP_RMDIR, bfs_rmdir_req, loc)
#undef BFS__TXN_X
    }
    *parent = NULL;
    return NULL;
}

#endif
