#!/usr/bin/env bash
#
# bench/rep3-calls.sh BUILD [FILES] — calls per file per brick of the
# small-file phases on replica 3, and the latency of each FUSE-level fop seen
# at the top of the client graph: the load-independent figure behind the
# rep3 small-file targets (docs/PERFORMANCE.md; performance-notes.md 24-25).
#
# Three bricks (tests/lib/cluster.sh volfiles: storage/posix -> index ->
# locks -> debug/io-stats -> protocol/server), one client graph written
# here: protocol/client x3 -> cluster/replicate -> debug/io-stats (named
# rep3). smallfile runs create (FILES files of 4 KiB in one folder), stat,
# read and delete, one phase at a time; before and after each phase every
# brick's io-stats is read through a one-brick mount without a client
# io-stats (getxattr brickfs.io-stats.reset reaches the brick's). Output per
# phase: each brick's calls per file by fop ("lookup=1.00 entrylk=1.00 ..."),
# then the top io-stats' count per file and average latency (µs) of every
# fop the kernel sent. The reading mount's own calls (a lookup and the
# getxattr) are a constant 2-3 per phase, less than 0.01 per file at 500.
#
# REP3_VOLGEN=1: the graph the bench mounts instead — a volume made by
# brickfsd (`volume create V replica 3 ... force`, tests/lib/mgmt.sh), with
# volgen's translators (features/upcall on the bricks, performance/md-cache
# on the client), mounted with brickfs-mount; the bricks' own io-stats are
# read the same way. REP3_DIRS spreads the files over that many folders
# (default 1; the bench uses 50).
#
# Environment: BENCH_KEEP_TMP=1 keeps the scratch folder; REP3_OPTS extra
# "option K V" lines for cluster/replicate (newline-separated "K V"; with
# REP3_VOLGEN=1, `volume set` of each K V).
set -euo pipefail
BUILD=${1:?usage: bench/rep3-calls.sh BUILD [FILES]}
FILES=${2:-500}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
export BFS_BUILD=$BUILD
BFS_KEEP_TMP=${BENCH_KEEP_TMP:-0}
# shellcheck source=tests/lib/cluster.sh
source "$(dirname "$0")/../tests/lib/cluster.sh"
PY=${PYTHON:-python3}
bfs_exit_hook() { set +e; } # the teardown (cluster.sh's EXIT trap) must not stop at a failing step

if [ "${REP3_VOLGEN:-0}" = 1 ]; then
    # shellcheck source=tests/lib/mgmt.sh
    source "$(dirname "$0")/../tests/lib/mgmt.sh"
    start_brickfsd >/dev/null
    cli volume create rep3 replica 3 127.0.0.1:"$T"/bricks/b0 127.0.0.1:"$T"/bricks/b1 \
        127.0.0.1:"$T"/bricks/b2 force >/dev/null
    if [ -n "${REP3_OPTS:-}" ]; then
        while read -r k v; do [ -n "$k" ] && cli volume set rep3 "$k" "$v" >/dev/null; done <<<"$REP3_OPTS"
    fi
    cli volume start rep3 >/dev/null
    for b in 0 1 2; do
        pf=$(brickfsd_run)/bricks/rep3-brick-$b.port
        for _ in $(seq 100); do [ -s "$pf" ] && break; sleep 0.1; done
        q=$T/vol/q$b.vol
        mkdir -p "$T/vol"
        printf 'volume q%d\n    type protocol/client\n    option remote-host 127.0.0.1\n' "$b" >"$q"
        printf '    option remote-port %s\n    option remote-subvolume rep3-brick-%d\nend-volume\n' \
            "$(cat "$pf")" "$b" >>"$q"
        mount_brickfs "$q" "$T/q$b"
    done
    mount_vol rep3 "$T/m"
else
    ports=()
    for b in 0 1 2; do
        write_volfiles "r$b" "$T/b$b"
        start_brick "r$b"
        ports+=("$(brick_port "r$b")")
    done
    vf=$T/vol/rep3.client.vol
    {
        for b in 0 1 2; do
            printf 'volume rep3-client-%d\n    type protocol/client\n    option remote-host 127.0.0.1\n' "$b"
            printf '    option remote-port %s\n    option remote-subvolume r%d\nend-volume\n\n' "${ports[$b]}" "$b"
        done
        printf 'volume rep3-replicate-0\n    type cluster/replicate\n'
        if [ -n "${REP3_OPTS:-}" ]; then
            while read -r k v; do [ -n "$k" ] && printf '    option %s %s\n' "$k" "$v"; done <<<"$REP3_OPTS"
        fi
        c0=rep3-client-0 top=rep3-replicate-0
        if [ -n "${REP3_TRACE:-}" ]; then # trace over child 0 and over replicate
            c0=rep3-trace-c0 top=rep3-trace-top
        fi
        printf '    subvolumes %s rep3-client-1 rep3-client-2\nend-volume\n\n' "$c0"
        if [ -n "${REP3_TRACE:-}" ]; then
            printf 'volume rep3-trace-c0\n    type debug/trace\n    subvolumes rep3-client-0\nend-volume\n\n'
            printf 'volume rep3-trace-top\n    type debug/trace\n    subvolumes rep3-replicate-0\nend-volume\n\n'
        fi
        printf 'volume rep3\n    type debug/io-stats\n    subvolumes %s\nend-volume\n' "$top"
    } >"$vf"
    for b in 0 1 2; do
        q=$T/vol/q$b.vol
        printf 'volume q%d\n    type protocol/client\n    option remote-host 127.0.0.1\n' "$b" >"$q"
        printf '    option remote-port %s\n    option remote-subvolume r%d\nend-volume\n' "${ports[$b]}" "$b" >>"$q"
        mount_brickfs "$q" "$T/q$b"
    done
    mount_brickfs "$vf" "$T/m"
    [ -n "${REP3_TRACE:-}" ] && echo "trace: $T/logs/mount-m.log"
fi
stats() { getfattr -n "$1" --only-values "$2" 2>/dev/null; }
report() { # PHASE FILE...: per-file counts from the JSON dumps given
    "$PY" - "$FILES" "$@" <<'PYEOF'
import json, sys
n = int(sys.argv[1]); phase = sys.argv[2]
def per(d, lat=False):
    out = []
    for k, v in sorted(d.get("fops", {}).items()):
        s = "%s=%.2f" % (k, v["count"] / n)
        if lat:
            s += "(%dus)" % (v["lat_avg_ns"] // 1000)
        out.append(s)
    return " ".join(out)
for i, f in enumerate(sys.argv[3:6]):
    print("%-7s brick%d: %s" % (phase, i, per(json.load(open(f)), True)))
print("%-7s top:    %s" % (phase, per(json.load(open(sys.argv[6])), True)))
PYEOF
}
bin=$BUILD/bin/smallfile
for phase in create stat read delete; do
    sync; echo 3 >/proc/sys/vm/drop_caches
    for b in 0 1 2; do stats brickfs.io-stats.reset "$T/q$b" >/dev/null; done
    stats brickfs.io-stats.reset "$T/m" >/dev/null
    out=$("$bin" -n "$FILES" -d "${REP3_DIRS:-1}" -s 4096 -p "$phase" "$T/m/w")
    for b in 0 1 2; do stats brickfs.io-stats "$T/q$b" >"$T/$phase.b$b.json"; done
    stats brickfs.io-stats "$T/m" >"$T/$phase.top.json"
    echo "$phase: $out (load $(cut -d' ' -f1 /proc/loadavg))"
    report "$phase" "$T/$phase".b{0,1,2}.json "$T/$phase.top.json"
done
