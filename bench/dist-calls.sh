#!/usr/bin/env bash
#
# bench/dist-calls.sh BUILD [FILES] [BRICKS] — calls per file per brick of
# the small-file phases on a volume made by brickfsd (the graphs `make
# bench` measures: md-cache on the mount, upcall on the bricks), with
# BRICKS bricks (default 3: distribute; 1: the one-brick volume to compare
# with). The load-independent figure behind the dist3 small-file targets
# (docs/PERFORMANCE.md; performance-notes.md 30).
#
# smallfile runs create (FILES files of 4 KiB in 5 folders), stat, read and
# delete, one phase at a time, the page cache dropped before each (as the
# bench does). Before and after each phase every brick's io-stats is read
# through a mount whose graph is one protocol/client to that brick
# (getxattr brickfs.io-stats.reset reaches the brick's io-stats). Output per
# phase:
#   - each brick's calls per file by fop, with the brick's average latency;
#   - the sum over the bricks ("all"): one brick's line compares with it;
#   - the mount's top io-stats: calls per file of each fop the kernel sent
#     that got past nothing (md-cache answers some below it: those show in
#     the top figure but not on a brick), with the latency seen there;
#   - CPU time (user + system, /proc/PID/stat) and context switches (every
#     thread's, /proc/PID/task/*/status) per file of the bricks together
#     and of the mount: less dependent on the load than wall-clock time;
#   - with perf, the FUSE requests the phase made (tracepoint
#     fuse:fuse_request_send, counted in smallfile's own context, so other
#     mounts on the machine do not count; RELEASE and FORGET, sent from
#     other contexts, are mostly missing).
# The reading mounts' own calls (a lookup and the getxattr) are a constant
# 2-3 per phase and brick, under 0.01 per file at 500 files.
#
# Environment: BENCH_KEEP_TMP=1 keeps the scratch folder; DIST_OPTS "K V"
# lines (newline-separated) passed to `volume set` before the mount;
# DIST_GAP=SECONDS waits that long before each phase after the first (in
# `make bench` the other targets' steps run in between: what md-cache kept
# from the previous phase may have expired by then).
set -euo pipefail
BUILD=${1:?usage: bench/dist-calls.sh BUILD [FILES] [BRICKS]}
FILES=${2:-500}
NB=${3:-3}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
export BFS_BUILD=$BUILD
BFS_KEEP_TMP=${BENCH_KEEP_TMP:-0}
# shellcheck source=tests/lib/cluster.sh
source "$(dirname "$0")/../tests/lib/cluster.sh"
# shellcheck source=tests/lib/mgmt.sh
source "$(dirname "$0")/../tests/lib/mgmt.sh"
PY=${PYTHON:-python3}
# No errexit from here: the exit trap's teardown (which stops the bricks
# brickfsd started) must run to its end; failures are checked by hand.
set +e
die() { echo "dist-calls: $*" >&2; exit 1; }

start_brickfsd >/dev/null || die "brickfsd did not start"
bricks=()
for ((b = 0; b < NB; b++)); do mkdir -p "$T/b$b"; bricks+=("127.0.0.1:$T/b$b"); done
cli volume create dc "${bricks[@]}" force >/dev/null || die "volume create failed"
if [ -n "${DIST_OPTS:-}" ]; then
    while read -r k v; do
        [ -z "$k" ] || cli volume set dc "$k" "$v" >/dev/null || die "volume set $k $v failed"
    done <<<"$DIST_OPTS"
fi
cli volume start dc >/dev/null || die "volume start failed"
for ((b = 0; b < NB; b++)); do
    port=$(vol_brick_field dc "$b" port) || die "no port for brick $b"
    q=$T/q$b.vol
    printf 'volume q%d\n    type protocol/client\n    option remote-host 127.0.0.1\n' "$b" >"$q"
    printf '    option remote-port %s\n    option remote-subvolume dc-brick-%d\nend-volume\n' \
        "$port" "$b" >>"$q"
    mount_brickfs "$q" "$T/q$b" || die "mount of brick $b failed"
done
mount_vol dc "$T/m" || die "the volume's mount failed"

stats() { getfattr -n "$1" --only-values "$2" 2>/dev/null; }
report() { # PHASE NB FILE... (NB brick dumps, then the top's): per-file counts
    "$PY" - "$FILES" "$@" <<'PYEOF'
import json, sys
n = int(sys.argv[1]); phase = sys.argv[2]; nb = int(sys.argv[3]); files = sys.argv[4:]
def per(fops, lat=True):
    out = []
    for k, v in sorted(fops.items()):
        if v["count"] == 0:
            continue
        s = "%s=%.2f" % (k, v["count"] / n)
        if lat:
            s += "(%dus)" % (v["lat_avg_ns"] // 1000)
        out.append(s)
    return " ".join(out)
tot = {}
for i in range(nb):
    fops = json.load(open(files[i])).get("fops", {})
    print("%-7s brick%d: %s" % (phase, i, per(fops)))
    for k, v in fops.items():
        t = tot.setdefault(k, {"count": 0, "lat_avg_ns": 0})
        t["count"] += v["count"]
if nb > 1:
    print("%-7s all:    %s (%.2f calls per file)" % (phase, per(tot, False),
          sum(v["count"] for v in tot.values()) / n))
print("%-7s top:    %s" % (phase, per(json.load(open(files[nb])).get("fops", {}))))
PYEOF
}
fuse_count() { # PERFDATA: FUSE requests per file by opcode
    perf script -i "$1" 2>/dev/null | "$PY" -c '
import re, sys, collections
n = int(sys.argv[1]); c = collections.Counter()
for line in sys.stdin:
    m = re.search(r"\((FUSE_\w+)\)", line)
    if m:
        c[m.group(1)[5:].lower()] += 1
print(" ".join("%s=%.2f" % (k, v / n) for k, v in sorted(c.items())))' "$FILES"
}
pids=()
for ((b = 0; b < NB; b++)); do pids+=("$(mgmt_brick_pid dc "$b")"); done
mpid=$(mount_pid "$T/m")
cpu() { # PID...: CPU ticks and context switches, summed
    local p t=0 c=0 x
    for p in "$@"; do
        x=$(awk '{print $14 + $15}' "/proc/$p/stat")
        t=$((t + x))
        x=$(cat /proc/"$p"/task/*/status | awk '/ctxt_switches/ {s += $2} END {print s}')
        c=$((c + x))
    done
    echo "$t $c"
}
cpu_report() { # PHASE WHO BEFORE AFTER
    local hz
    hz=$(getconf CLK_TCK)
    # shellcheck disable=SC2086
    set -- "$1" "$2" $3 $4
    "$PY" -c 'import sys
n, hz = int(sys.argv[1]), int(sys.argv[2]); t0, c0, t1, c1 = map(int, sys.argv[5:9])
print("%-7s cpu %-6s %.0f us, %.1f switches per file" % (sys.argv[3], sys.argv[4] + ":", (t1 - t0) * 1e6 / hz / n, (c1 - c0) / n))' \
        "$FILES" "$hz" "$1" "$2" "$3" "$4" "$5" "$6"
}
bin=$BUILD/bin/smallfile
for phase in create stat read delete; do
    [ "$phase" != create ] && sleep "${DIST_GAP:-0}"
    sync; echo 3 >/proc/sys/vm/drop_caches
    for ((b = 0; b < NB; b++)); do stats brickfs.io-stats.reset "$T/q$b" >/dev/null; done
    stats brickfs.io-stats.reset "$T/m" >/dev/null
    cmd=("$bin" -n "$FILES" -d 5 -s 4096 -p "$phase" "$T/m/w")
    cb=$(cpu "${pids[@]}")
    cm=$(cpu "$mpid")
    if command -v perf >/dev/null; then
        out=$(perf record -q -e fuse:fuse_request_send -o "$T/$phase.perf" -- "${cmd[@]}" 2>/dev/null)
    else
        out=$("${cmd[@]}")
    fi
    ca=$(cpu "${pids[@]}")
    cn=$(cpu "$mpid")
    files=()
    for ((b = 0; b < NB; b++)); do
        stats brickfs.io-stats "$T/q$b" >"$T/$phase.b$b.json"
        files+=("$T/$phase.b$b.json")
    done
    stats brickfs.io-stats "$T/m" >"$T/$phase.top.json"
    echo "$phase: $out (load $(cut -d' ' -f1 /proc/loadavg))"
    report "$phase" "$NB" "${files[@]}" "$T/$phase.top.json"
    cpu_report "$phase" bricks "$cb" "$ca"
    cpu_report "$phase" mount "$cm" "$cn"
    [ -f "$T/$phase.perf" ] && echo "$phase  fuse:   $(fuse_count "$T/$phase.perf")"
done
