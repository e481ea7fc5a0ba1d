#!/usr/bin/env bash
#
# bench/disp-calls.sh BUILD [FILES] — calls per file per brick of the
# small-file phases on disperse 6 redundancy 2 (issue 6), and the count and
# latency of each fop the kernel sent: the load-independent figure behind
# the disp small-file targets (docs/PERFORMANCE.md; performance-notes.md
# 26-28). The disperse twin of bench/rep3-calls.sh.
#
# Six bricks (tests/lib/cluster.sh volfiles with features/upcall, as volgen
# writes them), one client graph written here the way volgen writes a
# mount's: protocol/client x6 -> cluster/disperse (redundancy 2) ->
# performance/md-cache (md-cache-timeout 10, volgen's for cluster volumes)
# -> debug/io-stats (named disp, so it counts what the kernel sent).
# smallfile runs create (FILES files of 4 KiB in DIRS folders), stat, read
# and delete, one phase at a time, the page cache dropped before each;
# every brick's io-stats is reset before and read after each phase through
# a one-brick mount (getxattr brickfs.io-stats.reset reaches the brick's).
# Output per phase: the timing line, then each brick's calls per file by
# fop with its average brick latency ("lookup=1.00(25us) ..."), then the
# top io-stats' count per file and average latency of every fop the kernel
# sent, and disperse's lookups (and stats) of the phase: how many were
# answered before every brick had replied, and the replies in at the
# answer on average (brickfs.graph dump; performance-notes.md 34). The
# reading mounts' own calls are 2-3 per phase and brick.
#
# Environment: BENCH_KEEP_TMP=1 keeps the scratch folder; DISP_DIRS [1];
# DISP_MDC [10] md-cache-timeout (0: no md-cache, no upcall);
# DISP_OPTS extra "K V" lines (newline-separated) for cluster/disperse;
# DISP_PHASES [create,stat,read,delete].
set -euo pipefail
BUILD=${1:?usage: bench/disp-calls.sh BUILD [FILES]}
FILES=${2:-500}
DIRS=${DISP_DIRS:-1}
MDC=${DISP_MDC:-10}
PHASES=${DISP_PHASES:-create,stat,read,delete}
N=6
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
export BFS_BUILD=$BUILD
BFS_KEEP_TMP=${BENCH_KEEP_TMP:-0}
[ "$MDC" != 0 ] && export BFS_MD_CACHE=$MDC # bricks get features/upcall
# shellcheck source=tests/lib/cluster.sh
source "$(dirname "$0")/../tests/lib/cluster.sh"
PY=${PYTHON:-python3}

ports=()
for ((b = 0; b < N; b++)); do
    write_volfiles "e$b" "$T/b$b"
    start_brick "e$b"
    ports+=("$(brick_port "e$b")")
done
vf=$T/vol/disp.client.vol
{
    subs=
    for ((b = 0; b < N; b++)); do
        printf 'volume disp-client-%d\n    type protocol/client\n    option remote-host 127.0.0.1\n' "$b"
        printf '    option remote-port %s\n    option remote-subvolume e%d\nend-volume\n\n' "${ports[$b]}" "$b"
        subs+=" disp-client-$b"
    done
    printf 'volume disp-disperse-0\n    type cluster/disperse\n    option redundancy 2\n'
    if [ -n "${DISP_OPTS:-}" ]; then
        while read -r k v; do [ -n "$k" ] && printf '    option %s %s\n' "$k" "$v"; done <<<"$DISP_OPTS"
    fi
    printf '    subvolumes%s\nend-volume\n\n' "$subs"
    top=disp-disperse-0
    if [ "$MDC" != 0 ]; then
        printf 'volume disp-md-cache\n    type performance/md-cache\n'
        printf '    option performance.md-cache-timeout %s\n    subvolumes %s\nend-volume\n\n' "$MDC" "$top"
        top=disp-md-cache
    fi
    printf 'volume disp\n    type debug/io-stats\n    subvolumes %s\nend-volume\n' "$top"
} >"$vf"
unset BFS_MD_CACHE # the one-brick reading mounts: no md-cache
for ((b = 0; b < N; b++)); do
    q=$T/vol/q$b.vol
    printf 'volume q%d\n    type protocol/client\n    option remote-host 127.0.0.1\n' "$b" >"$q"
    printf '    option remote-port %s\n    option remote-subvolume e%d\nend-volume\n' "${ports[$b]}" "$b" >>"$q"
    mount_brickfs "$q" "$T/q$b"
done
mount_brickfs "$vf" "$T/m"

stats() { getfattr -n "$1" --only-values "$2" 2>/dev/null; }
report() { # PHASE TOP.json BRICK.json...: per-file counts from the dumps
    "$PY" - "$FILES" "$@" <<'PYEOF'
import json, sys
n = int(sys.argv[1]); phase = sys.argv[2]
def per(d):
    return " ".join("%s=%.2f(%dus)" % (k, v["count"] / n, v["lat_avg_ns"] // 1000)
                    for k, v in sorted(d.get("fops", {}).items()))
for i, f in enumerate(sys.argv[4:]):
    print("%-7s brick%d: %s" % (phase, i, per(json.load(open(f)))))
print("%-7s top:    %s" % (phase, per(json.load(open(sys.argv[3])))))
PYEOF
}
ec_lookups() { # BEFORE.json AFTER.json: disperse's lookup answers in between
    "$PY" - "$@" <<'PYEOF'
import json, sys
def find(o):
    if isinstance(o, dict):
        if o.get("type") == "cluster/disperse":
            return o.get("dump", {})
        o = list(o.values())
    if isinstance(o, list):
        for v in o:
            d = find(v)
            if d is not None:
                return d
    return None
a, b = (find(json.load(open(f))) or {} for f in sys.argv[1:3])
d = {k: b.get(k, 0) - a.get(k, 0)
     for k in ("lookups", "lookups_early", "lookup_replies_waited", "lookup_tail_us")}
if d["lookups"] > 0:
    print("        disperse: lookups=%d early=%.0f%% replies-in-at-answer=%.2f"
          " answer-before-last-reply=%dus"
          % (d["lookups"], 100.0 * d["lookups_early"] / d["lookups"],
             d["lookup_replies_waited"] / d["lookups"],
             d["lookup_tail_us"] // max(d["lookups_early"], 1)))
PYEOF
}
bin=$BUILD/bin/smallfile
for phase in ${PHASES//,/ }; do
    sync; echo 3 >/proc/sys/vm/drop_caches
    for ((b = 0; b < N; b++)); do stats brickfs.io-stats.reset "$T/q$b" >/dev/null; done
    stats brickfs.io-stats.reset "$T/m" >/dev/null
    stats brickfs.graph "$T/m" >"$T/$phase.g0.json" || true
    out=$("$bin" -n "$FILES" -d "$DIRS" -s 4096 -p "$phase" "$T/m/w")
    jsons=()
    for ((b = 0; b < N; b++)); do
        stats brickfs.io-stats "$T/q$b" >"$T/$phase.b$b.json"
        jsons+=("$T/$phase.b$b.json")
    done
    stats brickfs.io-stats "$T/m" >"$T/$phase.top.json"
    echo "$phase: $out (load $(cut -d' ' -f1 /proc/loadavg))"
    report "$phase" "$T/$phase.top.json" "${jsons[@]}"
    stats brickfs.graph "$T/m" >"$T/$phase.g1.json" || true
    ec_lookups "$T/$phase.g0.json" "$T/$phase.g1.json" 2>/dev/null || true
done
