#!/usr/bin/env bash
#
# 212-replicate-two-down.t — replica 3 (quorum auto) under the
# self-checking workload (tests/lib/replica-workload.py), two bricks killed
# at different moments:
#
#   1. brick 0 killed (brickfsd down, so nothing restarts it): the workload
#      goes on without a failed call (2 of 3 is a quorum);
#   2. brick 2 killed too: 1 of 3, no quorum: changes fail with EROFS (the
#      documented errno; ENOTCONN for a call caught by the kill itself),
#      reads go on (the workload reads back every faulted operation and
#      finds it either done or not done, never half done). A write that
#      brick 1 took alone when brick 2 died under it was not acknowledged:
#      brick 1 marks its copy and that file is not read (ENOTCONN, the
#      workload waits) until brick 2 is back; heal then undoes it (the
#      kernel cuts a write at a page boundary — FUSE splitting it, or a
#      brick killed inside its pwrite: the first part alone,
#      kept, showed up as a half-done append — docs/design/replicate.md);
#   3. brick 2 started again by hand (the same command line): 2 of 3, the
#      work goes on;
#   4. brickfsd started again: it adopts brick 2 and restarts brick 0;
#   then the workload stops: every acknowledged operation is visible, heal
#   converges to three identical bricks (tests/lib/brick-compare.py), and
#   the mount still shows the acknowledged state.

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

# ---- 1. brick 0 down ----
TEST kill_brickfsd
TEST kill_mgmt_brick r3 0
ops=$(wl ops)
EXPECT_WITHIN 30 1 wl_ge ops $((ops + 80))
EXPECT 0 wl failed

# ---- 2. brick 2 down too: no quorum ----
pid2=$(mgmt_brick_pid r3 2)
TEST test -n "$pid2"
mapfile -d '' argv2 <"/proc/$pid2/cmdline"
t_lost=$(bfs_now_us)
TEST kill_mgmt_brick r3 2
failed=$(wl failed)
EXPECT_WITHIN 30 1 wl_ge failed $((failed + 8))
errs=$(wlc errnos "$W" "$t_lost" "$(bfs_now_us)")
echo "# without quorum the workload saw: $errs"
TEST in_set "$errs" EROFS ENOTCONN
TEST eval "case ' $errs ' in *' EROFS '*) true ;; *) false ;; esac"
TEST test -z "$(ls "$B/r1/w0" | grep -v "^[fdr][0-9]*\$")"   # nothing odd made
EXPECT 0 wl violations                                     # faulted ops: done or not, never half

# ---- 3. brick 2 back (by hand, brickfsd still down): work goes on ----
TEST bfs_spawn brick2-again "${argv2[@]}"
t_back=$(bfs_now_us)
ops=$(wl ops)
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" 1 wl_ge ops $((ops + 60))
failed=$(wl failed)
ops=$(wl ops)
EXPECT_WITHIN 30 1 wl_ge ops $((ops + 60))
EXPECT "$failed" wl failed                                 # quorum again: no failure

# ---- 4. brickfsd back: adopts brick 2, restarts brick 0 ----
TEST start_brickfsd
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 0 eval "rep_all_online r3 3; echo \$?"
ops=$(wl ops)
EXPECT_WITHIN 30 1 wl_ge ops $((ops + 40))
TEST wl_stop "$W"
echo "# $(wlc summary "$W")"
EXPECT 0 wl violations
# the self-heal daemon (run by brickfsd) empties every brick's pending
# index with no client access, and the copies agree
EXPECT_WITHIN "$HEAL_TIMEOUT" identical daemon_settle r3 "$B/r0" "$B/r1" "$B/r2"
EXPECT 0 heal_pending r3
# a heal that did not converge says what is left, brick by brick
[ "$(heal_pending r3)" = 0 ] || rep_heal_dump "$B/r0" "$B/r1" "$B/r2"
EXPECT ok wlc verify "$M" "$W"
EXPECT_WITHIN "$HEAL_TIMEOUT" identical heal_settle "$M" "$B/r0" "$B/r1" "$B/r2"
EXPECT ok wlc verify "$M" "$W"
TEST umount_fuse "$M"

done_testing
