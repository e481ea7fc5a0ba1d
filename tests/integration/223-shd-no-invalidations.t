#!/usr/bin/env bash
#
# 223-shd-no-invalidations.t — the self-heal daemon takes no cache
# invalidations (docs/design/performance-notes.md note 38,
# docs/design/cache-invalidation.md "The self-heal daemon"), with real
# bricks, the daemon brickfsd runs and a FUSE mount:
#
#   1. the daemon's shd.vol has client.invalidations off on every
#      protocol/client and cluster.inode-memory 0 on replicate, whatever the
#      volume sets (cluster.inode-memory 4096 goes to client.vol and the
#      mount's graph only); the mount's graph and client.vol ask for
#      invalidations; every brick logs the daemon's connection as one with
#      "no invalidations", and the mount's without;
#   2. 300 files created through the mount: the daemon's event loops wake
#      far fewer times than once per file (they woke six times per file when
#      every brick sent it the invalidations of every create);
#   3. heal stays right when the mount changes a file the daemon looked at
#      (and, without invalidations, was never told about): a file written
#      with brick 2 down is healed by the daemon; written again with brick 0
#      down, the daemon heals brick 0 from the new copies; once more with
#      brick 1 down. Each time the three copies end equal to what the mount
#      wrote last.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"

skip_unless_mgmt
skip_unless_brickfs
[ -x "$BFS_BIN/brickfs-shd" ] || SKIP_ALL "brickfs-shd is not built"
for xl in cluster/replicate features/index features/upcall protocol/client protocol/server \
    storage/posix; do
    [ -f "$BFS_BUILD/lib/brickfs/xlators/$xl.so" ] || SKIP_ALL "$xl is not built"
done

B=$T/bricks
M=$T/m
VF=$T/mgmt/d1/state/volfiles/r3

online()
{
    local i s=""
    for ((i = 0; i < 3; i++)); do s="$s${s:+ }$(vol_brick_field r3 "$i" online)"; done
    echo "$s"
}
shd_pid() { cat "$(brickfsd_run)/shd/r3.pid" 2>/dev/null || echo 0; }
# loop_wakeups PID: voluntary context switches of the process's event-loop threads
loop_wakeups()
{
    local t n=0
    for t in /proc/"$1"/task/*; do
        grep -q '^bfs-loop' "$t/comm" 2>/dev/null || continue
        n=$((n + $(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status")))
    done
    echo "$n"
}
# pending_total: heal entries still pending, from the daemon's view
pending_total()
{
    cli --json volume heal r3 info summary |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["total_pending"])'
}
# copies FILE: "1" when the three bricks hold FILE with the content of $T/want
copies()
{
    local b
    for b in 0 1 2; do cmp -s "$B/r$b/$1" "$T/want" || { echo "0 (brick $b)"; return; }; done
    echo 1
}
# write_with_down IDX: writes new random content to f through the mount while brick IDX is down
write_with_down()
{
    kill_brickfsd                                   # nothing restarts the brick meanwhile
    kill_mgmt_brick r3 "$1"
    head -c 50000 /dev/urandom >"$T/want"
    cp "$T/want" "$M/f"
    start_brickfsd >/dev/null                       # restarts it
}

# ---- 1. the graphs ----
TEST start_brickfsd
TEST cli volume create r3 replica 3 "127.0.0.1:$B/r0" "127.0.0.1:$B/r1" "127.0.0.1:$B/r2" force
TEST cli volume set r3 network.ping-timeout "$NETWORK_PING_TIMEOUT"
TEST cli volume set r3 cluster.inode-memory 4096
TEST cli volume start r3
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1 1" online
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 eval "[ \$(shd_pid) -gt 0 ] && echo 1"
EXPECT 3 grep -c '^ *option client.invalidations off$' "$VF/shd.vol"
EXPECT 1 grep -c '^ *option cluster.inode-memory' "$VF/shd.vol"
EXPECT 1 grep -c '^ *option cluster.inode-memory 0$' "$VF/shd.vol"
EXPECT 0 grep -c 'client.invalidations' "$VF/client.vol"
EXPECT 1 grep -c '^ *option cluster.inode-memory 4096$' "$VF/client.vol"
TEST mount_vol r3 "$M" entry-timeout=0,attr-timeout=0,negative-timeout=0
EXPECT 4096 graph_opt "$M" r3-replicate-0 cluster.inode-memory
EXPECT on graph_opt "$M" r3-client-0 client.invalidations
EXPECT 1 eval "graph_info '$M' xlators | grep -c md-cache"
for b in 0 1 2; do
    log=$(brickfsd_logs)/bricks/r3-brick-$b.log
    EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 eval "grep -c 'r3-client-$b) connected to r3-brick-$b (no invalidations)\$' '$log' | sed 's/[1-9][0-9]*/1/'"
    # the mount's connection takes them
    TEST eval "grep -q 'r3-client-$b) connected to r3-brick-$b\$' '$log'"
done

# ---- 2. no wake-ups for the mount's creates ----
TEST mkdir "$M/d"
spid=$(shd_pid)
w0=$(loop_wakeups "$spid")
made=0
for i in $(seq 1 300); do printf 'x%d\n' "$i" >"$M/d/f$i" && made=$((made + 1)); done
EXPECT 300 echo "$made"
w1=$(loop_wakeups "$spid")
echo "# the daemon's event loops woke $((w1 - w0)) times for 300 creates"
TEST test $((w1 - w0)) -lt 150
EXPECT "$spid" shd_pid                                  # the same daemon all along

# ---- 3. heals of a file the daemon has looked at ----
TEST eval "head -c 30000 /dev/urandom >'$M/f'"
for down in 2 0 1; do
    TEST write_with_down "$down"
    EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1 1" online
    TEST cli volume heal r3                             # crawl now
    EXPECT_WITHIN "$HEAL_TIMEOUT" 0 pending_total
    EXPECT 1 copies f
    TEST cmp "$M/f" "$T/want"
done

TEST umount_fuse "$M"
TEST cli --yes volume stop r3
done_testing
