#!/usr/bin/env bash
#
# 215-replicate-split-brain.t — split-brain provoked on purpose and resolved
# by cluster.favorite-child-policy (docs/design/replicate.md, "Split-brain
# and the favorite child"), and an arbiter that refuses to split:
#
#   replica 2, quorum none: files written with brick 0 down, then written
#   again with brick 1 down — each copy blames the other. With policy none
#   every read answers EIO (never one side's data). Then, one file each:
#     size   resolves to the bigger copy (brick 1's, 20 bytes),
#     mtime  to the one modified last (brick 0's),
#     ctime  to the one changed last (brick 0's),
#   and the two bricks end identical;
#   replica 3, quorum none: brick 0 misses an append, then bricks 1 and 2
#   miss an overwrite on brick 0: majority resolves to the size bricks 1
#   and 2 share;
#   replica 3 arbiter 1: a write with data brick 0 down, then a write with
#   data brick 1 down is refused (ENOTCONN: the good copy is away) instead
#   of splitting; with brick 1 back every copy holds the first write.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/replica.sh"

skip_unless_mgmt
skip_unless_brickfs
for xl in cluster/replicate protocol/client protocol/server storage/posix; do
    [ -f "$BFS_BUILD/lib/brickfs/xlators/$xl.so" ] || SKIP_ALL "$xl is not built"
done

B=$T/bricks

# down VOL IDX...: bricks killed with brickfsd down (so they stay down)
down()
{
    local vol=$1 i
    shift
    kill_brickfsd || return 1
    for i in "$@"; do kill_mgmt_brick "$vol" "$i" || return 1; done
}
# back VOL N MNT IDX...: brickfsd restarts them; until the mount has them
back()
{
    local vol=$1 n=$2 m=$3 i
    shift 3
    local -A before
    for i in "$@"; do before[$i]=$(child_ups "$m" "$vol" "$i"); done
    start_brickfsd && bfs_wait_until "$PROCESS_UP_TIMEOUT" rep_all_online "$vol" "$n" || return 1
    for i in "$@"; do wait_child_up "$m" "$vol" "$i" "${before[$i]}" || return 1; done
}

TEST start_brickfsd

# ---- replica 2: size, mtime, ctime ----
M=$T/m2
TEST rep_volume r2 2 "$B/s" cluster.quorum-type=none
TEST mount_vol r2 "$M" entry-timeout=0,attr-timeout=0,negative-timeout=0
for f in size mtime ctime; do TEST eval "printf 0123456789 >'$M/$f'"; done
TEST down r2 0
EXPECT_WITHIN "$PING_TIMEOUT" OK try_write "$M/size" BBBBBBBBBB   # brick 1: 20 bytes
TEST pwrite_at "$M/mtime" 0 BBB
TEST pwrite_at "$M/ctime" 0 BBB
TEST back r2 2 "$M" 0
TEST down r2 1
EXPECT_WITHIN "$PING_TIMEOUT" OK pwrite_at "$M/size" 0 AAA      # brick 0: 10 bytes
TEST pwrite_at "$M/mtime" 0 AAA
TEST pwrite_at "$M/ctime" 0 AAA
TEST back r2 2 "$M" 1
for f in size mtime ctime; do
    EXPECT EIO try_read "$M/$f"                 # split-brain: EIO, not one side's data
done
TEST cli volume set r2 cluster.favorite-child-policy size
EXPECT_WITHIN 20 size graph_opt "$M" r2-replicate-0 cluster.favorite-child-policy
EXPECT_WITHIN 20 0123456789BBBBBBBBBB eval "cat '$M/size' 2>/dev/null"
EXPECT EIO try_read "$M/mtime"                  # size cannot decide: equal sizes
TEST cli volume set r2 cluster.favorite-child-policy mtime
EXPECT_WITHIN 20 AAA3456789 eval "cat '$M/mtime' 2>/dev/null"
TEST cli volume set r2 cluster.favorite-child-policy ctime
EXPECT_WITHIN 20 AAA3456789 eval "cat '$M/ctime' 2>/dev/null"
EXPECT_WITHIN "$HEAL_TIMEOUT" identical heal_settle "$M" "$B/s0" "$B/s1"
TEST umount_fuse "$M"

# ---- replica 3: majority ----
M=$T/m3
TEST rep_volume r3 3 "$B/t" cluster.quorum-type=none
TEST mount_vol r3 "$M" entry-timeout=0,attr-timeout=0,negative-timeout=0
TEST eval "printf 0123456789 >'$M/maj'"
TEST down r3 0
EXPECT_WITHIN "$PING_TIMEOUT" OK try_write "$M/maj" BBBBB          # bricks 1, 2: 15 bytes
TEST back r3 3 "$M" 0
TEST down r3 1 2
EXPECT_WITHIN "$PING_TIMEOUT" OK pwrite_at "$M/maj" 0 AAA       # brick 0
TEST back r3 3 "$M" 1 2
EXPECT EIO try_read "$M/maj"
TEST cli volume set r3 cluster.favorite-child-policy majority
EXPECT_WITHIN 20 0123456789BBBBB eval "cat '$M/maj' 2>/dev/null"
EXPECT_WITHIN "$HEAL_TIMEOUT" identical heal_settle "$M" "$B/t0" "$B/t1" "$B/t2"
TEST umount_fuse "$M"

# ---- replica 3 arbiter 1: the second write is refused ----
M=$T/ma
TEST rep_volume ra 3 arbiter "$B/a"
TEST mount_vol ra "$M" entry-timeout=0,attr-timeout=0,negative-timeout=0
TEST eval "printf 0123456789 >'$M/arb'"
TEST down ra 0
EXPECT_WITHIN "$PING_TIMEOUT" OK pwrite_at "$M/arb" 0 BBB       # brick 1 + arbiter
TEST back ra 3 "$M" 0
TEST down ra 1
EXPECT_WITHIN "$PING_TIMEOUT" ENOTCONN pwrite_at "$M/arb" 0 AAA
TEST back ra 3 "$M" 1
EXPECT BBB3456789 cat "$M/arb"
EXPECT_WITHIN "$HEAL_TIMEOUT" identical heal_settle "$M" --arbiter "$B/a2" "$B/a0" "$B/a1" "$B/a2"
EXPECT BBB3456789 cat "$B/a0/arb"
EXPECT 0 stat -c %s "$B/a2/arb"
TEST umount_fuse "$M"

done_testing
