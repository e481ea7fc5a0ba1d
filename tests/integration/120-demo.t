#!/usr/bin/env bash
#
# 120-demo.t — `make demo` and `make demo-stop` (scripts/demo.sh), in a
# folder of the test's own (DEMO_DIR):
#   - make demo builds (nothing to do here), starts brickfsd, creates and
#     starts volume "demo", mounts it, writes files and prints volume status;
#   - running it again changes nothing (same processes, one mount);
#   - make demo-stop leaves no process and no mount behind;
#   - a second make demo starts it all again, with the data;
#   - demo-stop also cleans up after a brickfsd killed with SIGKILL (its
#     bricks outlive it).
# A process is the demo's when its command line names DEMO_DIR.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"

skip_unless_mgmt
skip_unless_brickfs
[ "${BFS_SAN:-0}" = 1 ] && SKIP_ALL "make demo runs the normal build"

D=$T/demo
demo() { make -s -C "$BFS_ROOT" "$1" DEMO_DIR="$D" >"$T/logs/make-$1.out" 2>&1; }

# demo_pids: processes whose command line names $D.
demo_pids()
{
    local d
    for d in /proc/[0-9]*; do
        { tr '\0' '\n' <"$d/cmdline"; } 2>/dev/null | grep -q "^$D/" && echo "${d#/proc/}"
    done
    return 0
}
demo_mounts() { awk -v t="$D/" 'index($5 "/", t) == 1' /proc/self/mountinfo | wc -l; }
dpid() { head -n 1 "$D/state/brickfsd.lock"; }

# If the test dies half-way, the demo's own stop cleans up (by pid).
eval "bfs__t120_teardown() $(declare -f bfs_teardown | tail -n +2)"
bfs_teardown()
{
    [ -d "$D" ] && DEMO_DIR="$D" bash "$BFS_ROOT/scripts/demo.sh" stop >/dev/null 2>&1
    bfs__t120_teardown
}

TEST demo demo
EXPECT 1 demo_mounts
EXPECT 1 eval "grep -c 'mounted 127.0.0.1:[0-9]*:/demo at $D/mnt' '$T/logs/make-demo.out'"
EXPECT 1 eval "grep -c '^Status of volume: demo (started)' '$T/logs/make-demo.out'"
TEST grep -q 'make demo-stop' "$T/logs/make-demo.out"
TEST grep -q 'hello from brickfs' "$D/mnt/hello/greeting.txt"
EXPECT 1000 eval "wc -l <'$D/mnt/hello/numbers.txt'"
TEST [ "$(demo_pids | wc -l)" -ge 3 ]           # brickfsd, at least one brick, the mount
port=$(cat "$D/brickfsd.port")
EXPECT started eval "'$BRICKFS_BIN' --server 127.0.0.1:$port --json volume info demo | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"status\"])'"
before=$(demo_pids | sort | tr '\n' ' ')
d1=$(dpid)

# ---- again: harmless ----
TEST demo demo
EXPECT 1 demo_mounts
EXPECT "$d1" dpid
EXPECT "$before" eval "demo_pids | sort | tr '\n' ' '"
TEST grep -q 'already mounted' "$T/logs/make-demo.out"

# ---- stop: nothing left ----
TEST demo demo-stop
EXPECT 0 demo_mounts
EXPECT_WITHIN "$PROCESS_DOWN_TIMEOUT" "" demo_pids
EXPECT 0 eval "ls '$D/mnt' | wc -l"            # an empty mount point again
TEST demo demo-stop                             # stopping twice is harmless too

# ---- start again: everything back, data included ----
TEST demo demo
EXPECT 1 demo_mounts
EXPECT "file 1" cat "$D/mnt/hello/file1.txt"

# ---- brickfsd killed: demo-stop still stops the bricks and the mount ----
TEST kill -KILL "$(dpid)"
TEST bfs_wait_until "$PROCESS_DOWN_TIMEOUT" eval "! [ -d /proc/$(dpid) ]"
TEST [ "$(demo_pids | wc -l)" -ge 2 ]           # bricks and mount outlive it
TEST demo demo-stop
EXPECT 0 demo_mounts
EXPECT_WITHIN "$PROCESS_DOWN_TIMEOUT" "" demo_pids

done_testing
