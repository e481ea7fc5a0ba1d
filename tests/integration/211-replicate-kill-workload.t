#!/usr/bin/env bash
#
# 211-replicate-kill-workload.t — replica 3 from brickfsd under a workload
# that checks its own data (tests/lib/replica-workload.py: random writes,
# appends, truncates, renames, mkdir/rmdir/unlink by 4 workers):
#
#   kill -9 of one brick mid-workload (brickfsd down so that it stays
#   down), the workload goes on without a single failed call (2 of 3 is a
#   quorum), brickfsd started again restarts the brick, the workload goes
#   on; then the workload stops and
#     - every acknowledged operation is visible through the mount;
#     - heal converges: the three bricks are identical (names, types,
#       sizes, contents, mode, owner, xattrs; no pending counter left) —
#       tests/lib/brick-compare.py;
#     - the mount still shows exactly the acknowledged state.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/replica.sh"

skip_unless_mgmt
skip_unless_brickfs
for xl in cluster/replicate protocol/client protocol/server storage/posix; do
    [ -f "$BFS_BUILD/lib/brickfs/xlators/$xl.so" ] || SKIP_ALL "$xl is not built"
done

B=$T/bricks
M=$T/m
W=$T/wl

TEST start_brickfsd
TEST rep_volume r3 3 "$B/r"
TEST mount_vol r3 "$M" entry-timeout=0,attr-timeout=0,negative-timeout=0
TEST wl_start "$M" "$W" 4
EXPECT_WITHIN 30 1 wl_ge ops 60
EXPECT 0 wl failed

# ---- brick 1 killed mid-workload; brickfsd down so nothing restarts it ----
TEST kill_brickfsd
TEST kill_mgmt_brick r3 1
t_kill=$(bfs_now_us)
ops=$(wl ops)
EXPECT_WITHIN 30 1 wl_ge ops $((ops + 100))         # work goes on with 2 of 3
TEST ! brick_compare "$B/r0" "$B/r1" "$B/r2"          # r1 missed it, r0 and r2 blame r1
TEST start_brickfsd
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 0 eval "rep_all_online r3 3; echo \$?"
ops=$(wl ops)
EXPECT_WITHIN 30 1 wl_ge ops $((ops + 60))          # and after the restart
TEST wl_stop "$W"
echo "# $(wlc summary "$W")"
EXPECT "" wlc errnos "$W"                           # not one call failed
EXPECT 0 wl violations
# the self-heal daemon (run by brickfsd) empties every brick's pending
# index with no client access, and the copies agree
EXPECT_WITHIN "$HEAL_TIMEOUT" identical daemon_settle r3 "$B/r0" "$B/r1" "$B/r2"
EXPECT 0 heal_pending r3
EXPECT ok wlc verify "$M" "$W"

# ---- heal converges to identical copies; nothing acknowledged lost ----
EXPECT_WITHIN "$HEAL_TIMEOUT" identical heal_settle "$M" "$B/r0" "$B/r1" "$B/r2"
EXPECT ok wlc verify "$M" "$W"
TEST umount_fuse "$M"

done_testing
