#!/usr/bin/env bash
#
# bench/volume-wakeups.sh BUILD replica|dist [FILES] — wake-ups (voluntary
# context switches) and CPU per created file of the mount and of the bricks
# of a 3-brick volume made by brickfsd (volgen's translators, as the bench's
# dist3 and rep3 sections mount), by thread group: the load-independent
# half of bench/create-budget.sh for more than one brick (performance note
# 34). smallfile makes FILES files of 4 KiB (default 1,000) in FILES/100
# folders after a warm-up of 200; page cache dropped before the measured
# phase. Output: files/s with the load average, then "mount" and "brick"
# (the three bricks together): CPU µs and wake-ups per file, and per
# thread group (bfs-loop, bfs-work, brickfs-mount = the FUSE threads);
# with replica, also "shd": the volume's self-heal daemon (a client of
# every brick, performance note 38).
set -euo pipefail
BUILD=${1:?usage: bench/volume-wakeups.sh BUILD replica|dist [FILES]}
KIND=${2:?usage: bench/volume-wakeups.sh BUILD replica|dist [FILES]}
FILES=${3:-1000}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
case $KIND in replica) layout="replica 3" ;; dist) layout="" ;;
*) echo "volume-wakeups: replica or dist, not '$KIND'" >&2; exit 2 ;; esac
export BFS_BUILD=$BUILD
# shellcheck source=tests/lib/cluster.sh
source "$(dirname "$0")/../tests/lib/cluster.sh"
# shellcheck source=tests/lib/mgmt.sh
source "$(dirname "$0")/../tests/lib/mgmt.sh"
bfs_exit_hook() { set +e; }
start_brickfsd >/dev/null
# shellcheck disable=SC2086
cli volume create v $layout 127.0.0.1:"$T"/bricks/b0 127.0.0.1:"$T"/bricks/b1 \
    127.0.0.1:"$T"/bricks/b2 force >/dev/null
cli volume start v >/dev/null
for b in 0 1 2; do
    pf=$(brickfsd_run)/bricks/v-brick-$b.pid
    bfs_wait_until 10 test -s "$pf"
done
mount_vol v "$T/m"
mpid=$(mount_pid "$T/m")
pids="$mpid $(mgmt_brick_pid v 0) $(mgmt_brick_pid v 1) $(mgmt_brick_pid v 2)"
spid=
if [ "$KIND" = replica ]; then
    bfs_wait_until 10 test -s "$(brickfsd_run)/shd/v.pid"
    spid=$(cat "$(brickfsd_run)/shd/v.pid")
    pids="$pids $spid"
fi
# snap: one line per thread: "pid comm run_ns voluntary_switches"
snap() {
    local p t
    for p in $pids; do
        for t in /proc/"$p"/task/*; do
            printf '%s %s %s %s\n' "$p" "$(tr ' ' _ <"$t/comm")" "$(cut -d' ' -f1 "$t/schedstat")" \
                "$(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status")"
        done
    done 2>/dev/null
}
"$BUILD/bin/smallfile" -n 200 -d 2 -s 4096 -p create "$T/m/warm" >/dev/null
sync; echo 3 >/proc/sys/vm/drop_caches
snap >"$T/s0"
out=$("$BUILD/bin/smallfile" -n "$FILES" -d $(((FILES + 99) / 100)) -s 4096 -p create "$T/m/w")
snap >"$T/s1"
echo "$KIND create: $out (load $(cut -d' ' -f1-3 /proc/loadavg))"
"${PYTHON:-python3}" - "$FILES" "$mpid" "$T/s0" "$T/s1" "$spid" <<'PYEOF'
import collections, re, sys
n, mpid, spid = int(sys.argv[1]), sys.argv[2], sys.argv[5]
def load(path):
    per = {}
    for line in open(path):
        pid, comm, ns, sw = line.split()
        key = (pid, comm)
        while key in per: # same name twice in one process
            key = (key[0], key[1] + "'")
        per[key] = (int(ns), int(sw))
    return per
a, b = load(sys.argv[3]), load(sys.argv[4])
agg = collections.defaultdict(lambda: [0, 0])
for k, v in b.items():
    o = a.get(k, (0, 0))
    who = "mount" if k[0] == mpid else "shd" if k[0] == spid else "brick"
    g = re.sub(r"-[0-9]+'*$", "", k[1].rstrip("'"))
    agg[(who, g)][0] += v[0] - o[0]
    agg[(who, g)][1] += v[1] - o[1]
for who in ("mount", "brick", "shd") if spid else ("mount", "brick"):
    cpu = sum(v[0] for k, v in agg.items() if k[0] == who) / n / 1000
    sw = sum(v[1] for k, v in agg.items() if k[0] == who) / n
    parts = ", ".join("%s %.1fus/%.2f" % (k[1], v[0] / n / 1000, v[1] / n)
                      for k, v in sorted(agg.items()) if k[0] == who and v[1] / n >= 0.05)
    print("  %-5s cpu %.1f us/file, %.2f wake-ups/file  [%s]" % (who, cpu, sw, parts))
PYEOF
