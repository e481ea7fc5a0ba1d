/*
 * wadd-wire.h — xdata keys of a write that moves counter xattrs of its
 * file with it, saving the separate fxattrop a cluster translator would
 * send beside it (disperse's size counter: docs/design/disperse.md,
 * "Writes"). Header only: shared by cluster/disperse (client side) and
 * storage/posix (brick side).
 *
 *   A write whose xdata has keys BFS_WADD "<xattr>" (BIN, 8-byte
 *   big-endian deltas) -> storage/posix, once the data is written, adds
 *   each delta to that xattr of the file exactly as an fxattrop ADD64 on
 *   the same fd would (under the same lock); if that fails, the write
 *   answers its error (the data may be written: the caller counts the
 *   brick as failed, as it would for a failed fxattrop). A write that fails
 *   adds nothing.
 *   The reply's xdata carries BFS_WADDED = 1 when the brick understood the
 *   keys (and added what was asked). BFS_WADD_PROBE = 1 in a write's xdata
 *   asks only for that acknowledgement: a client sends the deltas in the
 *   write only to bricks that acknowledged (an older brick would ignore
 *   them and the counter would not move), and learns that with a probe.
 */
#ifndef BFS_XL_LIB_WADD_WIRE_H
#define BFS_XL_LIB_WADD_WIRE_H

#define BFS_WADD "brickfs.wadd:"
#define BFS_WADD_LEN (sizeof(BFS_WADD) - 1)
#define BFS_WADD_PROBE "brickfs.wadd-probe"
#define BFS_WADDED "brickfs.wadded"

#endif
