#!/usr/bin/env bash
#
# bench/create-budget.sh BUILD [FILES] — what one small-file operation costs
# on issue 2's one-brick setup, in figures that do not depend on the load:
# requests per file at the top of the client graph and at the brick, the
# latency of each there (the difference is the transport), CPU time per file
# of the mount and of the brick, voluntary context switches (wake-ups) per
# file of each thread group, and with BUDGET_STRACE=1 the brick's system
# calls per file (strace -c -f on every brick thread, a separate pass since
# strace slows everything down).
#
# The graphs are the bench's 1brick ones (tests/lib/volfile.sh with
# BFS_MD_CACHE=60: storage/posix -> index -> locks -> upcall -> io-stats ->
# protocol/server; protocol/client -> io-stats -> md-cache -> write-behind)
# with one more debug/io-stats on top, so the top one sees every fop the
# kernel sends (BUDGET_WRITE_BEHIND=0: without write-behind, as before
# session 6; the bench's 1brick graph has it). The brick's io-stats is read through a second mount whose graph is
# protocol/client alone, mounted only to reset and read it: while mounted it
# is a second client, to which features/upcall sends invalidations. smallfile runs create (FILES files of 4 KiB in
# FILES/100 folders), stat, read and delete, one phase at a time, page cache
# dropped before each.
#
# Output per phase: files/s and the load average; "top:" and "brick:" fops
# per file with their average latency in µs; CPU µs per file (run time from
# /proc/PID/task/*/schedstat, ns exact) and voluntary switches per file of
# the mount and of the brick, in total and by thread name.
#
# Environment: BENCH_KEEP_TMP=1 keeps the scratch folder; BUDGET_STRACE=1
# adds the strace pass; BUDGET_SMALLFILE_OPTS more options of smallfile
# (-T: creates with O_TRUNC instead of O_EXCL) (BUDGET_STRACE_OPTS more strace options, e.g. -w;
# BUDGET_STRACE_RAW=1 prints strace's table); BUDGET_PASSTHROUGH=1 runs the
# phases on bench/passthrough.c too (its process's CPU and wake-ups, on the
# "mount" line); BUDGET_PHASES (default create,stat,read,delete).
set -euo pipefail
BUILD=${1:?usage: bench/create-budget.sh BUILD [FILES]}
FILES=${2:-2000}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
export BFS_BUILD=$BUILD
BFS_KEEP_TMP=${BENCH_KEEP_TMP:-0}
# shellcheck source=tests/lib/cluster.sh
source "$(dirname "$0")/../tests/lib/cluster.sh"
PY=${PYTHON:-python3}
PHASES=${BUDGET_PHASES:-create,stat,read,delete}
DIRS=$(((FILES + 99) / 100))
SFOPTS=${BUDGET_SMALLFILE_OPTS:-} # more smallfile options, e.g. -T

WB=${BUDGET_WRITE_BEHIND:-1}
top_under=b1-md-cache
[ "$WB" = 1 ] && top_under=b1-write-behind
BFS_WRITE_BEHIND=$([ "$WB" = 1 ] && echo 1) BFS_MD_CACHE=60 write_volfiles b1 "$T/b1"
start_brick b1
bpid=$(brick_pid b1)
vf=$T/vol/top.vol
{
    cat "$(client_volfile b1)"
    printf '\nvolume top\n    type debug/io-stats\n    subvolumes %s\nend-volume\n' "$top_under"
} >"$vf"
grep -q "volume $top_under" "$vf" || { echo "create-budget: no $top_under volume in $vf" >&2; exit 1; }
q=$T/vol/q.vol
printf 'volume q\n    type protocol/client\n    option remote-host 127.0.0.1\n' >"$q"
printf '    option remote-port %s\n    option remote-subvolume b1\nend-volume\n' "$(brick_port b1)" >>"$q"
mount_brickfs "$vf" "$T/m"
mpid=$(awk -v d="$T/m" '$1 == d { p = $2 } END { print p }' "$T/.run/mounts")

stats() { getfattr -n "$1" --only-values "$2" 2>/dev/null; }
# snap PID: one line per thread: "comm run_ns voluntary_switches"
snap() {
    local t
    for t in /proc/"$1"/task/*; do
        printf '%s %s %s\n' "$(tr ' ' _ <"$t/comm")" "$(cut -d' ' -f1 "$t/schedstat")" \
            "$(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status")"
    done 2>/dev/null
}
report() { # PHASE DIR
    "$PY" - "$FILES" "$1" "$2" <<'PYEOF'
import json, sys, collections, re
n = int(sys.argv[1]); phase = sys.argv[2]; d = sys.argv[3]
def fops(path):
    out = []
    for k, v in sorted(json.load(open(path)).get("fops", {}).items()):
        out.append("%s=%.2f(%dus)" % (k, v["count"] / n, v["lat_avg_ns"] // 1000))
    return " ".join(out)
print("  top:   " + fops(d + "/top.json"))
print("  brick: " + fops(d + "/brick.json"))
def load(path):
    per = collections.defaultdict(lambda: [0, 0])
    for line in open(path):
        c, ns, sw = line.split()
        c = re.sub(r"-[0-9]+$", "", c) # the threads of a pool together
        per[c][0] += int(ns); per[c][1] += int(sw)
    return per
for who in ("mount", "brick"):
    a, b = load("%s/%s.0" % (d, who)), load("%s/%s.1" % (d, who))
    cpu = sum(b[k][0] - a.get(k, [0, 0])[0] for k in b) / n / 1000
    sw = sum(b[k][1] - a.get(k, [0, 0])[1] for k in b) / n
    parts = []
    for k in sorted(b):
        dsw = (b[k][1] - a.get(k, [0, 0])[1]) / n
        dcpu = (b[k][0] - a.get(k, [0, 0])[0]) / n / 1000
        if dsw >= 0.05 or dcpu >= 1:
            parts.append("%s %.1fus/%.2f" % (k, dcpu, dsw))
    print("  %-5s cpu %.1f us/file, %.2f wake-ups/file  [%s]" % (who, cpu, sw, ", ".join(parts)))
PYEOF
}
bin=$BUILD/bin/smallfile
IFS=, read -ra phases <<<"$PHASES"
for phase in "${phases[@]}"; do
    d=$T/$phase
    mkdir -p "$d"
    sync; echo 3 >/proc/sys/vm/drop_caches
    mount_brickfs "$q" "$T/q"; stats brickfs.io-stats.reset "$T/q" >/dev/null; umount_brickfs "$T/q"
    stats brickfs.io-stats.reset "$T/m" >/dev/null
    snap "$mpid" >"$d/mount.0"; snap "$bpid" >"$d/brick.0"
    "$bin" $SFOPTS -n "$FILES" -d "$DIRS" -s 4096 -p "$phase" "$T/m/w" >"$d/out"
    snap "$mpid" >"$d/mount.1"; snap "$bpid" >"$d/brick.1"
    mount_brickfs "$q" "$T/q"; stats brickfs.io-stats "$T/q" >"$d/brick.json"; umount_brickfs "$T/q"
    stats brickfs.io-stats "$T/m" >"$d/top.json"
    echo "$phase: $(cat "$d/out") (load $(cut -d' ' -f1-3 /proc/loadavg))"
    report "$phase" "$d"
done

if [ "${BUDGET_PASSTHROUGH:-0}" = 1 ]; then
    echo "passthrough (bench/passthrough.c over a folder of the same file system):"
    mkdir -p "$T/pt-src"
    mount_fuse pt "$T/pt" "$BUILD/bin/passthrough" "$T/pt-src" "$T/pt" -f -o default_permissions
    ppid=$(awk -v d="$T/pt" '$1 == d { p = $2 } END { print p }' "$T/.run/mounts")
    for phase in "${phases[@]}"; do
        d=$T/pt-$phase
        mkdir -p "$d"
        sync; echo 3 >/proc/sys/vm/drop_caches
        snap "$ppid" >"$d/mount.0"; snap "$ppid" >"$d/brick.0"
        "$bin" $SFOPTS -n "$FILES" -d "$DIRS" -s 4096 -p "$phase" "$T/pt/w" >"$d/out"
        snap "$ppid" >"$d/mount.1"; cp "$d/mount.0" "$d/brick.1"
        echo '{}' >"$d/top.json"; echo '{}' >"$d/brick.json"
        echo "$phase: $(cat "$d/out") (load $(cut -d' ' -f1-3 /proc/loadavg))"
        report "$phase" "$d" | grep '^  mount'
    done
    umount_fuse "$T/pt"
fi

if [ "${BUDGET_STRACE:-0}" = 1 ]; then
    echo "strace pass (brick system calls per file, $FILES files):"
    for phase in "${phases[@]}"; do
        [ "$phase" = create ] && rm -rf "$T/m/w"
        sync; echo 3 >/proc/sys/vm/drop_caches
        strace -q -c ${BUDGET_STRACE_OPTS:-} -f -p "$bpid" -o "$T/strace.$phase" 2>/dev/null &
        spid=$!
        bfs_wait_until 10 eval "grep -qs '^TracerPid:[[:space:]]*$spid' /proc/$bpid/status"
        "$bin" $SFOPTS -n "$FILES" -d "$DIRS" -s 4096 -p "$phase" "$T/m/w" >/dev/null
        kill -INT "$spid"; wait "$spid" || true
        "$PY" - "$FILES" "$phase" "$T/strace.$phase" <<'PYEOF'
import sys
n = int(sys.argv[1]); rows = []
for line in open(sys.argv[3]):
    f = line.split()
    if len(f) >= 5 and f[0][0].isdigit() and f[-1] not in ("total",):
        calls = int(f[3]); rows.append((calls, f[-1]))
tot = sum(c for c, _ in rows)
print("  %-7s %.1f syscalls/file: %s" % (sys.argv[2], tot / n,
      " ".join("%s=%.2f" % (s, c / n) for c, s in sorted(rows, reverse=True) if c / n >= 0.05)))
PYEOF
        [ "${BUDGET_STRACE_RAW:-0}" = 1 ] && head -25 "$T/strace.$phase"
    done
fi
