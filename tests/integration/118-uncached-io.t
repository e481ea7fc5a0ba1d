#!/usr/bin/env bash
#
# 118-uncached-io.t — storage/posix's streaming writes and reads on real
# bricks (docs/design/uncached-io.md), through a real FUSE mount of a
# replica 3 volume made by brickfsd:
#   - a 32 MiB file written with dd (1 MiB writes) reads back identical on
#     the mount and on every brick, and after its fsync the bricks' page
#     cache holds almost none of it (RWF_DONTCACHE dropped the pages once
#     written back): without the flag a freshly written file stays cached;
#   - a small file (one 64 KiB write: under the 128 KiB default) stays in
#     the bricks' page cache;
#   - both evicted from the bricks' page cache and read through a fresh
#     mount: the big file reads back identical and is not left in the page
#     cache of the brick that served it (reads of 128 KiB or more of a
#     range not cached there go with O_DIRECT: while the reader holds the
#     file open, the brick holds an O_DIRECT fd, and none once it closed),
#     the small one is;
#   - `volume set storage.uncached-write-min 0` and `storage.uncached-read-min
#     0` (brick options: the answer says a restart is needed), the volume
#     restarted: the next streamed file stays cached on the bricks, and so
#     does a big file read cold, with no O_DIRECT fd on any brick.
# Skips on a kernel or file system without RWF_DONTCACHE (before Linux 6.14).

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/replica.sh"

skip_unless_mgmt
skip_unless_brickfs
require_fuse

B=$T/bricks
M=$T/m
mkdir -p "$B"

# RWF_DONTCACHE (0x80) on the file system the bricks live on?
python3 - "$B/probe" <<'PY' || SKIP_ALL "no RWF_DONTCACHE here (Linux 6.14+ on ext4, XFS or btrfs)"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)
try:
    os.pwritev(fd, [b"x" * 4096], 0, 0x80)
except OSError:
    sys.exit(1)
finally:
    os.close(fd)
    os.unlink(sys.argv[1])
PY

# resident FILE: percent of FILE's pages in the page cache (mincore(2))
resident() { python3 "$BFS_ROOT/tests/lib/pagecache.py" "$1"; }
# bricks_resident FILE OP PCT: 1 when every brick's copy is cached
# [ percent OP PCT ] (OP: -le, -ge)
bricks_resident()
{
    local i r
    for i in 0 1 2; do
        r=$(resident "$B/r$i/$1") || { echo 0; return; }
        [ "$r" "$2" "$3" ] || { echo 0; return; }
    done
    echo 1
}

# evict FILE: the bricks' copies of FILE leave their page cache
evict()
{
    local i
    for i in 0 1 2; do
        python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)' "$B/r$i/$1" || return 1
    done
}
# some_brick_resident FILE PCT: 1 when some brick holds >= PCT% of FILE
some_brick_resident()
{
    local i r
    for i in 0 1 2; do
        r=$(resident "$B/r$i/$1") || continue
        [ "$r" -ge "$2" ] && { echo 1; return; }
    done
    echo 0
}
# direct_fds: fds the volume's bricks hold open with O_DIRECT
direct_fds()
{
    local i pid f flags n=0
    for i in 0 1 2; do
        pid=$(mgmt_brick_pid uv $i) || continue
        for f in /proc/"$pid"/fdinfo/*; do
            flags=$(awk '/^flags:/ { print $2 }' "$f" 2>/dev/null) || continue
            [ -n "$flags" ] && (( 8#$flags & 8#40000 )) && n=$((n + 1))
        done
    done
    echo "$n"
}
# read_held FILE: reads FILE's first 8 MiB on fd 7, left open until
# close_held
read_held()
{
    exec 7<"$1" && head -c 8M <&7 >/dev/null
}
close_held() { exec 7<&-; }
remount()
{
    umount "$M" && mount_vol uv "$M" >/dev/null
}

TEST start_brickfsd
TEST rep_volume uv 3 "$B/r"
TEST mount_vol uv "$M"

# ---- a streamed file leaves the bricks' page cache ----
TEST dd if=/dev/urandom of="$T/src" bs=1M count=32 status=none
TEST dd if="$T/src" of="$M/big" bs=1M conv=fsync status=none
TEST cmp "$T/src" "$M/big"
for i in 0 1 2; do TEST cmp "$T/src" "$B/r$i/big"; done
# the cmp above read the bricks' copies: write again, then look
TEST dd if="$T/src" of="$M/big2" bs=1M conv=fsync status=none
EXPECT_WITHIN 10 1 bricks_resident big2 -le 25

# ---- small writes stay cached ----
TEST dd if="$T/src" of="$M/small" bs=64k count=1 conv=fsync status=none
EXPECT 1 bricks_resident small -ge 90

# ---- streamed reads leave the bricks' page cache, small ones stay ----
TEST evict big
TEST evict small
EXPECT 1 bricks_resident big -le 5
TEST remount
TEST cmp "$T/src" "$M/big"
EXPECT 1 bricks_resident big -le 25
TEST cmp <(head -c 65536 "$T/src") "$M/small"
EXPECT 1 some_brick_resident small 90
# the serving brick read big with a second, O_DIRECT fd, kept with the file's
TEST evict big
TEST remount
EXPECT 0 direct_fds
TEST read_held "$M/big"
EXPECT 1 direct_fds
TEST close_held
EXPECT_WITHIN 10 0 direct_fds

# ---- off: brick options, applied at the bricks' next start ----
EXPECT 1 eval "cli --json volume set uv storage.uncached-write-min 0 | grep -c '\"restart_needed\": *true'"
EXPECT 1 eval "cli --json volume set uv storage.uncached-read-min 0 | grep -c '\"restart_needed\": *true'"
TEST umount "$M"
TEST cli volume stop uv
TEST cli volume start uv
TEST bfs_wait_until "$PROCESS_UP_TIMEOUT" rep_all_online uv 3
TEST mount_vol uv "$M"
TEST dd if="$T/src" of="$M/big3" bs=1M conv=fsync status=none
EXPECT 1 bricks_resident big3 -ge 75
for i in 0 1 2; do TEST cmp "$T/src" "$B/r$i/big3"; done
TEST evict big
TEST remount
TEST read_held "$M/big"
EXPECT 0 direct_fds
TEST close_held
TEST cmp "$T/src" "$M/big"
EXPECT 1 some_brick_resident big 75

TEST umount "$M"
done_testing
