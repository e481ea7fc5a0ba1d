#!/usr/bin/env bash
#
# 026-fuse-direct-writes.t — which opens of a brickfs FUSE mount bypass the
# kernel's page cache (option direct-io, src/fuse/fuse-io.c,
# docs/design/fuse-direct-writes.md). By default (auto) a write-only open
# does: what it writes leaves no pages in the mount's page cache, while an
# open for reading and writing keeps them (the write-through cache), and so
# does a write-only open of a set-user-ID file (the kernel must clear the
# bit through its cache), and so does any open on a mount with the
# capability option. A reader that had the file open sees what a
# write-only open wrote over its cached pages or appended. direct-io=off:
# every open through the cache; direct-io=on: none (no shared mappings); a
# bad value is refused.
# tags: sanitizer

. "$(dirname "$0")/../lib/test.sh"

[ -x "$MOUNT_BIN" ] || SKIP_ALL "$MOUNT_BIN is not built"
[ -x "$BRICK_BIN" ] || SKIP_ALL "$BRICK_BIN is not built"
require_fuse
require_root

dio() { python3 "$BFS_ROOT/tests/lib/fuse-dio.py" "$@"; }
# fresh NAME: an empty file NAME on the mount $M
fresh() { rm -f "$M/$1" && : >"$M/$1"; }

TEST write_volfiles b1 "$T/bricks/b1"
TEST start_brick b1
VOL=$(client_volfile b1)

M=$T/mnt
TEST mount_brickfs "$VOL" "$M"
TEST fresh w
EXPECT "0 same" dio resident "$M/w" wronly
TEST fresh rw
EXPECT "256 same" dio resident "$M/rw" rdwr
TEST cmp "$M/w" "$M/rw"
TEST cmp "$M/w" "$(brick_dir b1)/w"
TEST fresh suid
TEST chmod 4755 "$M/suid"
EXPECT "256 same" dio resident "$M/suid" wronly
TEST eval "head -c 8192 /dev/zero | tr '\\0' a >'$M/over'"
EXPECT seen dio overwrite "$M/over"
TEST eval "head -c 100 /dev/zero | tr '\\0' x >'$M/tail'"
EXPECT seen dio tail "$M/tail"
EXPECT 150 stat -c %s "$M/tail"
TEST umount_brickfs "$M"

M=$T/mnt-off
TEST mount_brickfs "$VOL" "$M" -o direct-io=off
TEST fresh w
EXPECT "256 same" dio resident "$M/w" wronly
EXPECT ok dio mapshared "$M/w"
TEST umount_brickfs "$M"

# With file capabilities passed through, every open keeps the cache (the
# kernel removes security.capability only on cached writes).
M=$T/mnt-cap
TEST mount_brickfs "$VOL" "$M" -o capability
TEST fresh w
EXPECT "256 same" dio resident "$M/w" wronly
TEST umount_brickfs "$M"

M=$T/mnt-on
TEST mount_brickfs "$VOL" "$M" -o direct-io=on
TEST eval "echo x >'$M/rw'"
EXPECT ENODEV dio mapshared "$M/rw"
TEST umount_brickfs "$M"

TEST ! "$MOUNT_BIN" -f -o direct-io=sometimes --volfile "$VOL" "$T/nowhere"

done_testing
