#!/usr/bin/env bash
#
# 213-replicate-sigstop.t — replica 3 under the self-checking workload
# (tests/lib/replica-workload.py), one brick SIGSTOPped mid-workload: it
# hangs with its connections open, so only network.ping-timeout (2 s here)
# tells the client it is gone. The workload must not hang longer than that
# (its slowest operation is bounded), goes on with 2 of 3 without a failed
# call, and after SIGCONT the brick is back; then every acknowledged
# operation is visible, heal converges to identical bricks
# (tests/lib/brick-compare.py) and the mount still shows the acknowledged
# state.

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
# the slowest operation allowed: one call waits out the ping timeout, the
# rest of the operation runs on the two other bricks
MAX_OP_MS=$((REP_PING * 1500 + 3000 * BFS_TIMEOUT_SCALE))

TEST start_brickfsd
TEST rep_volume r3 3 "$B/r"
TEST mount_vol r3 "$M" entry-timeout=0,attr-timeout=0,negative-timeout=0
TEST wl_start "$M" "$W" 4
EXPECT_WITHIN 30 1 wl_ge ops 60

pid1=$(mgmt_brick_pid r3 1)
TEST signal_mgmt_brick r3 1 STOP
ops=$(wl ops)
EXPECT_WITHIN 30 1 wl_ge ops $((ops + 150))     # goes on with 2 of 3
TEST grep -q "declaring it down" "$T/logs/mount-m.log"
TEST signal_mgmt_brick r3 1 CONT
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" 1 eval "grep -c 'child r3-client-1 is up' '$T/logs/mount-m.log' | awk '{print (\$1 >= 2)}'"
ops=$(wl ops)
EXPECT_WITHIN 30 1 wl_ge ops $((ops + 60))
TEST test "$(mgmt_brick_pid r3 1)" = "$pid1"      # the same process, resumed
TEST wl_stop "$W"
echo "# $(wlc summary "$W"), slowest operation $(wl max_ms) ms (limit $MAX_OP_MS)"
EXPECT "" wlc errnos "$W"
# a failed call: say why, from the mount's log (replicate logs its EIO causes)
[ -z "$(wlc errnos "$W")" ] || grep -E "EIO|W \[r3-replicate" "$T/logs/mount-m.log" | sed 's/^/# /' | head -n 10
TEST test "$(wl max_ms)" -le "$MAX_OP_MS"
EXPECT 0 wl violations
# the self-heal daemon (run by brickfsd) empties every brick's pending
# index with no client access, and the copies agree
EXPECT_WITHIN "$HEAL_TIMEOUT" identical daemon_settle r3 "$B/r0" "$B/r1" "$B/r2"
EXPECT 0 heal_pending r3
EXPECT ok wlc verify "$M" "$W"
EXPECT_WITHIN "$HEAL_TIMEOUT" identical heal_settle "$M" "$B/r0" "$B/r1" "$B/r2"
EXPECT ok wlc verify "$M" "$W"
TEST umount_fuse "$M"

done_testing
