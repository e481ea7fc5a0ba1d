#!/usr/bin/env bash
#
# bench/rebalance.sh — rebalance rate of brickfs and of GlusterFS on the
# same data set after the same add-brick (docs/PERFORMANCE.md,
# "Rebalance"). Run as root after `make`:
#
#   bash bench/rebalance.sh [NFILES [KIB]]      default 2000 files of 64 KiB
#
# For each system: a distribute volume of 3 bricks (folders under one
# scratch folder, one file system), NFILES files of KIB KiB in 20 folders
# written through a FUSE mount, one brick added, the rebalance started at
# full speed (brickfs: cluster.rebal-throttle aggressive; GlusterFS:
# cluster.rebal-throttle aggressive) and polled until completed. Printed:
# files moved, bytes moved, wall time from start to completed, files/s,
# MB/s. GlusterFS runs on a private glusterd bound to BENCH_GLUSTER_HOST
# (default 127.1.1.2, port 24007; skipped when that cannot be bound).
# TAP output (tests/lib/test.sh); the figures are '#' lines.

. "$(dirname "$0")/../tests/lib/test.sh"
. "$(dirname "$0")/../tests/lib/mgmt.sh"
. "$(dirname "$0")/../tests/lib/dht.sh"
. "$(dirname "$0")/../tests/lib/rebal.sh"

NFILES=${1:-2000}
KIB=${2:-64}
GL_HOST=${BENCH_GLUSTER_HOST:-127.1.1.2}
skip_unless_mgmt
skip_unless_brickfs

populate()
{
    python3 - "$1" "$NFILES" "$KIB" <<'PY'
import os, sys
root, n, kib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for d in range(20):
    os.makedirs(os.path.join(root, "d%d" % d), exist_ok=True)
for i in range(n):
    with open(os.path.join(root, "d%d" % (i % 20), "f%d" % i), "wb") as f:
        f.write(os.urandom(kib * 1024))
PY
}

now_s() { python3 -c 'import time; print("%.3f" % time.monotonic())'; }
report()
{
    python3 -c 'import sys
who, files, nbytes, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
print("# %-8s moved %6d files, %8.1f MiB in %6.1f s: %7.1f files/s, %6.1f MB/s" % (who, files, nbytes / 1048576, secs, files / secs, nbytes / 1e6 / secs))' "$@"
}

# ---- brickfs ----
TEST start_brickfsd
TEST dht_volume v 3
TEST mount_vol v "$T/m"
TEST populate "$T/m"
mkdir -p "$T/bricks/v/b3"
TEST cli volume add-brick v "127.0.0.1:$T/bricks/v/b3" force
TEST cli volume set v cluster.rebal-throttle aggressive
sync
echo 3 >/proc/sys/vm/drop_caches
t0=$(now_s)
TEST cli volume rebalance v start
EXPECT_WITHIN 1800 completed rebal_state v
t1=$(now_s)
secs=$(python3 -c "print($t1 - $t0)")
report brickfs "$(rebal_field v files_moved)" "$(rebal_field v bytes_moved)" "$secs"

# ---- GlusterFS ----
GLD=$T/glusterd
gl() { gluster --glusterd-sock="$GLD/glusterd.socket" --log-file="$GLD/log/cli.log" --mode=script "$@"; }
gl_pids()
{
    local p
    for p in /proc/[0-9]*; do
        { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF "$GLD/" && echo "${p#/proc/}"
    done
}
gl_teardown()
{
    [ -d "$GLD" ] || return 0
    gl volume stop gv >/dev/null 2>&1
    umount -l "$T/gm" 2>/dev/null
    local p
    for p in $(gl_pids); do kill "$p" 2>/dev/null; done
}
bfs_exit_hook() { gl_teardown; }

if ! command -v glusterd >/dev/null ||
    ! python3 -c 'import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 24007))' "$GL_HOST" 2>/dev/null; then
    SKIP "GlusterFS: not installed, or $GL_HOST:24007 cannot be bound"
    done_testing
    exit 0
fi
mkdir -p "$GLD/wd" "$GLD/run" "$GLD/log"
cat >"$GLD/glusterd.vol" <<GLV
volume management
    type mgmt/glusterd
    option working-directory $GLD/wd
    option run-directory $GLD/run
    option glusterd-sockfile $GLD/glusterd.socket
    option cluster-test-mode $GLD/log
    option transport-type socket
    option transport.socket.bind-address $GL_HOST
    option transport.socket.listen-port 24007
    option ping-timeout 0
    option event-threads 1
    option max-port 60999
end-volume
GLV
bfs_spawn glusterd glusterd -N -f "$GLD/glusterd.vol" -p "$GLD/run/glusterd.pid" -l "$GLD/log/glusterd.log"
TEST bfs_wait_until 30 gl volume list
gb=()
for i in 0 1 2; do mkdir -p "$T/gbricks/b$i"; gb+=("$GL_HOST:$T/gbricks/b$i"); done
TEST gl volume create gv "${gb[@]}" force
TEST gl volume start gv
mkdir -p "$T/gm"
bfs_spawn gmount glusterfs -N --volfile-server="$GL_HOST" --volfile-id=gv -l "$T/logs/gl-mount.log" "$T/gm"
TEST bfs_wait_until 30 mountpoint -q "$T/gm"
TEST populate "$T/gm"
mkdir -p "$T/gbricks/b3"
TEST gl volume add-brick gv "$GL_HOST:$T/gbricks/b3" force
TEST gl volume set gv cluster.rebal-throttle aggressive
sync
echo 3 >/proc/sys/vm/drop_caches
gl_status() { gl volume rebalance gv status --xml 2>/dev/null; }
gl_field()
{
    gl_status | python3 -c '
import sys, xml.etree.ElementTree as E
t = E.parse(sys.stdin).getroot()
agg = t.find(".//aggregate")
print(agg.find(sys.argv[1]).text)' "$1"
}
t0=$(now_s)
TEST gl volume rebalance gv start
# statusStr: 3 = completed
EXPECT_WITHIN 1800 3 gl_field status
t1=$(now_s)
secs=$(python3 -c "print($t1 - $t0)")
report GlusterFS "$(gl_field files)" "$(gl_field size)" "$secs"
echo "# GlusterFS's own run time: $(gl_field runtime) s (its crawl, without the start-up)"
done_testing
