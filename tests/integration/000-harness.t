#!/usr/bin/env bash
#
# 000-harness.t — tests the integration-test harness (tests/lib/*.sh) itself,
# without any brickfs program: TAP verdicts and line numbers, polling, the
# volfile writers, brick process control (against a fake brick that only
# listens on its port), refusal to signal processes the test did not start,
# cleanup of the scratch folder, processes and FUSE mounts on a normal exit
# and on SIGTERM, and as_user. The FUSE parts use bench's passthrough
# ($BFS_BUILD/bin/passthrough) and are skipped when it is not built; in a
# sanitizer build that passthrough is sanitized too, which exercises the
# collection of sanitizer reports.
# tags: sanitizer

. "$(dirname "$0")/../lib/test.sh"

# ---- the scratch folder ----
TEST test -d "$T"
TEST test -d "$T/logs"
EXPECT 755 stat -c %a "$T"

# ---- TEST and EXPECT ----
TEST true
TEST ! false
x=0
TEST eval 'x=5'               # TEST runs in this shell: the assignment stays
EXPECT 5 echo "$x"
EXPECT "a  b" echo "a  b"

# ---- EXPECT_WITHIN returns as soon as the condition holds ----
bfs_spawn flagger bash -c "sleep 1; echo ready >'$T/flag'"
t0=$(bfs_now_us)
EXPECT_WITHIN 15 ready cat "$T/flag"
took_ms=$((($(bfs_now_us) - t0) / 1000))
TEST [ "$took_ms" -ge 500 ]
TEST [ "$took_ms" -lt 5000 ]

# ---- free ports ----
p1=$(free_port)
p2=$(free_port)
TEST [ -n "$p1" ]
TEST [ "$p1" != "$p2" ]
TEST ! bfs_port_listening "$p1"

# ---- bfs_kill signals only what this test started ----
sleep 60 </dev/null >/dev/null 2>&1 &
stranger=$!
disown $stranger
TEST ! bfs_kill "$stranger"
TEST bfs_pid_alive "$stranger"
kill "$stranger"
bfs_spawn reused sleep 60
reused=$BFS_PID
# same pid, other start time: what a recycled pid looks like
sed -i "s/^$reused [0-9]* /$reused 1 /" "$T/.run/pids"
TEST ! bfs_kill "$reused"
TEST bfs_pid_alive "$reused"
kill "$reused"

# ---- volfiles ----
TEST write_volfiles b1 "$T/bricks/b1"
bv=$(brick_volfile b1)
cv=$(client_volfile b1)
TEST test -d "$T/bricks/b1"
TEST grep -qx "    option directory $T/bricks/b1" "$bv"
TEST grep -qx "    option transport.listen-port $(brick_port b1)" "$bv"
TEST grep -qx "    option auth.allow 127.0.0.1" "$bv"
EXPECT "storage/posix features/index features/locks debug/io-stats protocol/server" \
    eval "awk '\$1 == \"type\" { printf \"%s%s\", s, \$2; s = \" \" }' '$bv'"
EXPECT "$(brick_port b1)" bfs_volfile_port "$bv"
TEST grep -qx "    option remote-port $(brick_port b1)" "$cv"
TEST grep -qx "    option remote-subvolume b1" "$cv"
EXPECT "protocol/client debug/io-stats" \
    eval "awk '\$1 == \"type\" { printf \"%s%s\", s, \$2; s = \" \" }' '$cv'"
TEST write_volfiles c1 "$T/bricks/c1" auto network.ping-timeout=$NETWORK_PING_TIMEOUT
TEST grep -qx "    option network.ping-timeout $NETWORK_PING_TIMEOUT" "$(client_volfile c1)"
TEST ! write_volfiles c2 "$T/bricks/c2" auto not-a-pair

# ---- bricks, against a fake brick that only listens ----
cat >"$T/fake-brick" <<'EOF'
#!/usr/bin/env python3
import socket, sys
args, vol, log = sys.argv[1:], None, None
for i, a in enumerate(args):
    if a == "--volfile": vol = args[i + 1]
    if a == "--log-file": log = args[i + 1]
port = None
for line in open(vol):
    w = line.split()
    if w[:2] == ["option", "transport.listen-port"]: port = int(w[2])
if port is None: sys.exit("fake-brick: no transport.listen-port in " + vol)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(16)
with open(log, "a") as f: f.write("fake brick listening on %d\n" % port)
while True:
    s.accept()[0].close()
EOF
chmod +x "$T/fake-brick"
BRICK_BIN=$T/fake-brick

TEST start_brick b1
EXPECT 1 brick_up b1
TEST grep -q "listening on $(brick_port b1)" "$(brick_log b1)"
pid1=$(brick_pid b1)
TEST kill_brick b1
EXPECT 0 brick_up b1
TEST ! bfs_pid_alive "$pid1"
TEST restart_brick b1
EXPECT 1 brick_up b1
TEST [ "$(brick_pid b1)" != "$pid1" ]
TEST restart_brick b1           # while it runs: kill, then start again
EXPECT 1 brick_up b1
TEST stop_brick b1
EXPECT 0 brick_up b1
TEST start_brick b1             # left running: the cleanup stops it
# a second brick on a taken port is refused
TEST write_volfiles b2 "$T/bricks/b2" "$(brick_port b1)"
TEST ! start_brick b2
# a brick that exits during start fails at once, not after the timeout
TEST write_volfiles b3 "$T/bricks/b3"
echo "volume broken" >"$(brick_volfile b3)"
t0=$(bfs_now_us)
TEST ! start_brick b3
TEST [ $((($(bfs_now_us) - t0) / 1000000)) -lt 10 ]
TEST grep -q "no transport.listen-port" "$T/logs/brick-b3.out"

# ---- FUSE mounts (bench's passthrough stands in for brickfs-mount) ----
PT=$BFS_BIN/passthrough
fuse_ok=0
if [ -x "$PT" ] && [ -c /dev/fuse ] && [ -w /dev/fuse ] && command -v fusermount3 >/dev/null; then
    fuse_ok=1
fi
if [ $fuse_ok = 1 ]; then
    mkdir -p "$T/src"
    TEST mount_fuse pt "$T/mnt" "$PT" "$T/src" "$T/mnt" -f
    TEST bfs_is_mounted "$T/mnt"
    TEST mountpoint -q "$T/mnt"
    TEST eval "echo through >'$T/mnt/f'"
    EXPECT through cat "$T/src/f"
    TEST ! mount_fuse pt2 "$T/mnt" "$PT" "$T/src" "$T/mnt" -f   # already mounted
    ptpid=$(bfs_pid_of pt)
    TEST umount_fuse "$T/mnt"
    TEST ! bfs_is_mounted "$T/mnt"
    TEST ! bfs_pid_alive "$ptpid"
    TEST umount_fuse "$T/mnt"   # unmounting twice is harmless
    # a FUSE program that dies during start is reported at once
    t0=$(bfs_now_us)
    TEST ! mount_fuse bad "$T/mnt" "$PT" "$T/no-such-dir" "$T/mnt" -f
    TEST [ $((($(bfs_now_us) - t0) / 1000000)) -lt 10 ]
else
    for i in 1 2 3 4 5 6 7 8 9 10 11 12; do SKIP "no passthrough or no usable /dev/fuse"; done
fi

# ---- cleanup: a child test that fails, leaving a process and a mount ----
# (children run with BFS_SAN=0: they test the harness, and their plans are
# exact)
export BFS_ROOT PT fuse_ok
mkdir -p "$T/children"
cat >"$T/child-fail.t" <<'EOF'
. "$BFS_ROOT/tests/lib/test.sh"
echo "# child-T $T"
TEST true
TEST false
EXPECT yes echo no
EXPECT_WITHIN 1 yes echo no
bfs_spawn sleeper sleep 120
echo "# child-pid $BFS_PID"
if [ "$fuse_ok" = 1 ]; then
    mkdir "$T/src"
    mount_fuse pt "$T/mnt" "$PT" "$T/src" "$T/mnt" -f
    echo "# child-mount $(bfs_is_mounted "$T/mnt" && echo yes)"
fi
done_testing
EOF
BFS_SAN=0 BFS_TMPDIR=$T/children prove -v -e bash "$T/child-fail.t" >"$T/child-fail.out" 2>&1
rc=$?
TEST [ $rc -ne 0 ]
TEST grep -q "^ok 1 - line 3: true$" "$T/child-fail.out"
TEST grep -q "^not ok 2 - line 4: false$" "$T/child-fail.out"
TEST grep -q "^not ok 3 - line 5: EXPECT 'yes' echo no$" "$T/child-fail.out"
TEST grep -q "got 'no', want 'yes'" "$T/child-fail.out"
TEST grep -q "^not ok 4 - line 6: EXPECT_WITHIN 1 'yes' echo no$" "$T/child-fail.out"
TEST grep -q "^1..4$" "$T/child-fail.out"
TEST grep -q "Failed 3/4 subtests" "$T/child-fail.out"
child_t=$(awk '$2 == "child-T" { print $3 }' "$T/child-fail.out")
child_pid=$(awk '$2 == "child-pid" { print $3 }' "$T/child-fail.out")
TEST [ -n "$child_t" ]
TEST [ ! -e "$child_t" ]
TEST ! bfs_pid_alive "$child_pid"
if [ $fuse_ok = 1 ]; then
    TEST grep -q "child-mount yes" "$T/child-fail.out"
    TEST ! bfs_is_mounted "$child_t/mnt"
else
    SKIP "no passthrough or no usable /dev/fuse"
    SKIP "no passthrough or no usable /dev/fuse"
fi

# ---- cleanup: a child test that passes ----
cat >"$T/child-pass.t" <<'EOF'
. "$BFS_ROOT/tests/lib/test.sh"
plan 2
TEST true
EXPECT_WITHIN 5 1 echo 1
done_testing
EOF
BFS_SAN=0 BFS_TMPDIR=$T/children prove -e bash "$T/child-pass.t" >"$T/child-pass.out" 2>&1
TEST [ $? -eq 0 ]
TEST grep -q "All tests successful" "$T/child-pass.out"

# ---- cleanup: a child test stopped by SIGTERM in the middle ----
cat >"$T/child-term.t" <<'EOF'
. "$BFS_ROOT/tests/lib/test.sh"
bfs_spawn sleeper sleep 120
sleeper=$BFS_PID
if [ "$fuse_ok" = 1 ]; then
    mkdir "$T/src"
    mount_fuse pt "$T/mnt" "$PT" "$T/src" "$T/mnt" -f
fi
echo "$T $sleeper" >"$CHILD_REPORT.tmp" && mv "$CHILD_REPORT.tmp" "$CHILD_REPORT"
while :; do sleep 0.1; done
EOF
bfs_spawn child-term env BFS_SAN=0 CHILD_REPORT="$T/child-term.report" BFS_TMPDIR="$T/children" \
    bash "$T/child-term.t"
term_pid=$BFS_PID
EXPECT_WITHIN $PROCESS_UP_TIMEOUT yes eval "test -s '$T/child-term.report' && echo yes"
read -r term_t term_sleeper <"$T/child-term.report"
TEST [ -d "$term_t" ]
TEST bfs_pid_alive "$term_sleeper"
TEST bfs_kill "$term_pid" TERM
EXPECT_WITHIN $PROCESS_DOWN_TIMEOUT gone eval "bfs_pid_alive $term_pid || echo gone"
TEST [ ! -e "$term_t" ]
TEST ! bfs_pid_alive "$term_sleeper"
TEST ! bfs_is_mounted "$term_t/mnt"
TEST grep -q "caught signal, cleaning up" "$T/logs/child-term.out"

# ---- cleanup under `set -euo pipefail` (bench scripts), with mgmt.sh ----
# Bricks brickfsd starts outlive it by design; mgmt.sh's teardown stops
# every process whose command line names a volfile of the test. A script
# running with `set -e` must get there too (a teardown step that ended with
# a failed test used to end the EXIT trap before the bricks were stopped).
cat >"$T/child-sete.t" <<'EOF2'
set -euo pipefail
. "$BFS_ROOT/tests/lib/cluster.sh"
. "$BFS_ROOT/tests/lib/mgmt.sh"
mkdir -p "$T/mgmt/d1"
setsid python3 -c 'import time; time.sleep(120)' --volfile "$T/mgmt/d1/fake.vol" \
    </dev/null >/dev/null 2>&1 &
echo "$T $!" >"$CHILD_REPORT"
EOF2
BFS_SAN=0 CHILD_REPORT="$T/child-sete.report" BFS_TMPDIR="$T/children" bash "$T/child-sete.t"
TEST [ $? -eq 0 ]
read -r sete_t sete_brick <"$T/child-sete.report"
EXPECT_WITHIN $PROCESS_DOWN_TIMEOUT gone eval "bfs_pid_alive $sete_brick || echo gone"
TEST [ ! -e "$sete_t" ]
bfs_pid_alive "$sete_brick" && kill -KILL "$sete_brick"

# ---- a process whose leader is a zombie but whose threads still run ----
# (a multithreaded daemon killed with SIGKILL, for a moment: its files and
# locks stay until its last thread is gone, so it is not gone yet)
zl=$BFS_BUILD/tests/tools/zombie_leader
if [ -x "$zl" ]; then
    bfs_spawn zleader "$zl" "$T/zl.lock" 3
    zpid=$BFS_PID
    zstate() { local s; s=$(cat "/proc/$zpid/stat" 2>/dev/null) && s=${s##*) } && echo "${s%% *}"; }
    EXPECT_WITHIN $PROCESS_UP_TIMEOUT Z zstate
    TEST ! flock -n "$T/zl.lock" true                 # the thread left holds the lock
    TEST bfs_pid_alive "$zpid"
    TEST ! bfs_wait_gone "$zpid" 1
    TEST bfs_wait_gone "$zpid" "$PROCESS_DOWN_TIMEOUT"
    TEST flock -n "$T/zl.lock" true                   # gone: the lock is free
else
    for i in 1 2 3 4 5 6; do SKIP "zombie_leader is not built"; done
fi

# ---- as_user ----
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    EXPECT "65534 65534 65534" as_user 65534 65534 sh -c 'echo "$(id -u) $(id -g) $(id -G)"'
    TEST ! as_user 65534 65534 touch "$T/logs/not-mine"
    TEST as_user 65534 65534 test -x "$T"
else
    SKIP "as_user needs root and setpriv"
    SKIP "as_user needs root and setpriv"
    SKIP "as_user needs root and setpriv"
fi

done_testing
