#!/usr/bin/env bash
#
# 023-fuse-read-ahead.t — brickfs-mount's read-ahead window (option
# read-ahead, src/fuse/fuse-session.c). The kernel gives a FUSE mount its
# default 128 KiB window, so sequential reads reached the brick as 128 KiB
# requests; the mount sets its backing device's read_ahead_kb itself on the
# first open after INIT. What this checks: the default (2 MiB) is in force
# once a file was opened, read-ahead=SIZE sets SIZE, read-ahead=0 leaves the
# kernel's value, a bad size is refused; and a file read through the big
# window comes back intact.
# tags: sanitizer

. "$(dirname "$0")/../lib/test.sh"

[ -x "$MOUNT_BIN" ] || SKIP_ALL "$MOUNT_BIN is not built"
[ -x "$BRICK_BIN" ] || SKIP_ALL "$BRICK_BIN is not built"
require_fuse
require_root

# ra MOUNT: the read_ahead_kb of the mount's backing device
ra() { cat "/sys/class/bdi/$(mountpoint -d "$1")/read_ahead_kb"; }

TEST write_volfiles b1 "$T/bricks/b1"
TEST start_brick b1
BRICK=$(brick_dir b1)
TEST dd if=/dev/urandom of="$BRICK/data" bs=1M count=8 status=none

M=$T/mnt
TEST mount_brickfs "$(client_volfile b1)" "$M"
TEST cmp "$M/data" "$BRICK/data"
EXPECT 2048 ra "$M"
TEST sync
TEST eval "echo 3 >/proc/sys/vm/drop_caches"
TEST cmp "$M/data" "$BRICK/data"
TEST umount_brickfs "$M"

M1=$T/mnt1
TEST mount_brickfs "$(client_volfile b1)" "$M1" -o read-ahead=512KiB
TEST eval "cat '$M1/data' >/dev/null"
EXPECT 512 ra "$M1"
TEST umount_brickfs "$M1"

M0=$T/mnt0
TEST mount_brickfs "$(client_volfile b1)" "$M0" -o read-ahead=0
ra0=$(ra "$M0")
TEST eval "cat '$M0/data' >/dev/null"
EXPECT "$ra0" ra "$M0"
TEST [ "$ra0" -ne 2048 ]
TEST umount_brickfs "$M0"

TEST ! "$MOUNT_BIN" -f -o read-ahead=lots --volfile "$(client_volfile b1)" "$T/nowhere"

done_testing
