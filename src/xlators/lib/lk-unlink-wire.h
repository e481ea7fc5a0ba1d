/*
 * lk-unlink-wire.h — xdata keys by which a client asks the brick's
 * features/locks to run an unlink under an entry lock, in one request
 * (features/locks/locks-unlink.c is the brick side; distribute uses it,
 * docs/design/distribute.md "Creating and removing names", and
 * performance-notes.md 30). Header only.
 *
 *   request (unlink xdata):
 *     BFS_LK_X_UNLINK_ENTRYLK = domain (STR) -> the caller's owner (client,
 *        stack->lk_owner) takes the write entrylk (domain, parent, name),
 *        waiting as a blocking entrylk would; under it the name is looked
 *        up, then unlinked; the lock is released once the unlink answered.
 *     BFS_LK_X_UNLINK_REFUSE = mode (INT, optional) -> when the name's
 *        looked-up mode (type and permission bits, as in struct bfs_iatt)
 *        equals it, nothing is unlinked and the answer is -EREMOTE.
 *   reply (unlink xdata, success only):
 *     BFS_LK_X_UNLINK_LOCKED = 1 -> it ran under the lock, as asked. A
 *        brick without this support leaves it out (and unlinked without
 *        lock or check): a client must only send the keys to a brick that
 *        acknowledged them before.
 * Keys are removed before the unlink goes further down.
 */
#ifndef BFS_XL_LIB_LK_UNLINK_WIRE_H
#define BFS_XL_LIB_LK_UNLINK_WIRE_H

#define BFS_LK_X_UNLINK_ENTRYLK "brickfs.lk.unlink-entrylk"
#define BFS_LK_X_UNLINK_REFUSE "brickfs.lk.unlink-refuse-mode"
#define BFS_LK_X_UNLINK_LOCKED "brickfs.lk.unlink-locked"

#endif
