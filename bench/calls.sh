#!/usr/bin/env bash
#
# bench/calls.sh LAYOUT BUILD [FILES] [BRICKS] — calls per file per brick of
# the small-file phases, and the count and latency of each fop the kernel
# sent: the load-independent figures behind the small-file targets
# (docs/PERFORMANCE.md; performance-notes.md 24-28, 30). LAYOUT:
#
#   rep3  replica 3: three bricks (tests/lib/cluster.sh volfiles:
#         storage/posix -> index -> locks -> debug/io-stats ->
#         protocol/server), a client graph written here: protocol/client x3
#         -> cluster/replicate -> debug/io-stats (named rep3; no md-cache).
#         CALLS_VOLGEN=1: the graph the bench mounts instead, a volume made
#         by brickfsd (`volume create rep3 replica 3 ... force`), with
#         volgen's translators (features/upcall on the bricks,
#         performance/md-cache on the mount), mounted with brickfs-mount.
#         CALLS_TRACE=1 (hand-written graph): debug/trace over child 0 and
#         over replicate, in the mount's log.
#   dist  a volume made by brickfsd of BRICKS bricks (default 3: distribute;
#         1: the one-brick volume to compare with), the graphs `make bench`
#         measures (md-cache on the mount, upcall on the bricks).
#   disp  disperse 6 redundancy 2 (issue 6): six bricks (cluster.sh volfiles
#         with features/upcall, as volgen writes them), a client graph
#         written the way volgen writes a mount's: protocol/client x6 ->
#         cluster/disperse -> performance/md-cache (CALLS_MDC) ->
#         debug/io-stats (named disp). CALLS_VOLGEN=1: a volume made by
#         brickfsd instead (`volume create disp disperse 6 redundancy 2 ...
#         force`: volgen's graphs, the md-cache timeout volgen writes, or
#         CALLS_OPTS' performance.md-cache-timeout; CALLS_MDC then unused).
#
# smallfile runs create (FILES files of 4 KiB, default 500, in CALLS_DIRS
# folders), stat, read and delete, one phase at a time, the page cache
# dropped before each (as the bench does). Every brick's io-stats is reset
# before and read after each phase through a mount whose graph is one
# protocol/client to that brick (getxattr brickfs.io-stats.reset reaches the
# brick's io-stats). Output per phase:
#   - the timing line of smallfile, with the load average;
#   - each brick's calls per file by fop, with the brick's average latency
#     ("lookup=1.00(25us) ...");
#   - the sum over the bricks ("all"): one brick's line compares with it;
#   - the mount's top io-stats: calls per file of each fop the kernel sent
#     (md-cache answers some below it: those show in the top figure but not
#     on a brick), with the latency seen there;
#   - CPU time (user + system, /proc/PID/stat) and context switches (every
#     thread's, /proc/PID/task/*/status) per file of the bricks together
#     and of the mount: less dependent on the load than wall-clock time;
#   - with perf and CALLS_PERF=1 (the default on dist), the FUSE requests
#     the phase made (tracepoint fuse:fuse_request_send, counted in
#     smallfile's own context, so other mounts on the machine do not count;
#     RELEASE and FORGET, sent from other contexts, are mostly missing);
#   - disp: disperse's lookups (and stats) of the phase, how many were
#     answered before every brick had replied, and the replies in at the
#     answer on average (brickfs.graph dump; performance-notes.md 34).
#     Recording slows the phase, which changes a few counts (on disp, 0.03
#     more entry locks per created file at 100 files): compare runs made
#     the same way.
# The reading mounts' own calls (a lookup and the getxattr) are a constant
# 2-3 per phase and brick, under 0.01 per file at 500 files.
#
# Environment: BENCH_KEEP_TMP=1 keeps the scratch folder;
# CALLS_DIRS folders (default: rep3 1, dist 5, disp 1; the bench uses 50 on
# rep3); CALLS_PHASES [create,stat,read,delete]; CALLS_OPTS "K V" lines
# (newline-separated): options of cluster/replicate or cluster/disperse in a
# hand-written graph, `volume set` of each on a brickfsd volume;
# CALLS_GAP=SECONDS waits that long before each phase after the first (in
# `make bench` the other targets' steps run in between: what md-cache kept
# from the previous phase may have expired by then); CALLS_MDC [10] disp's
# md-cache-timeout (0: no md-cache, no upcall); CALLS_PERF 0/1 (above).
set -euo pipefail
usage="usage: bench/calls.sh rep3|dist|disp BUILD [FILES] [BRICKS (dist)]"
LAYOUT=${1:?$usage}
BUILD=${2:?$usage}
FILES=${3:-500}
case $LAYOUT in
rep3) NB=3 DIRS=${CALLS_DIRS:-1} VOLGEN=${CALLS_VOLGEN:-0} VOL=rep3 PERF=${CALLS_PERF:-0} ;;
dist) NB=${4:-3} DIRS=${CALLS_DIRS:-5} VOLGEN=1 VOL=dc PERF=${CALLS_PERF:-1} ;;
disp) NB=6 DIRS=${CALLS_DIRS:-1} VOLGEN=${CALLS_VOLGEN:-0} VOL=disp PERF=${CALLS_PERF:-0} ;;
*) echo "$usage" >&2; exit 2 ;;
esac
PHASES=${CALLS_PHASES:-create,stat,read,delete}
MDC=${CALLS_MDC:-10}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
export BFS_BUILD=$BUILD
BFS_KEEP_TMP=${BENCH_KEEP_TMP:-0}
[ "$LAYOUT" = disp ] && [ "$VOLGEN" = 0 ] && [ "$MDC" != 0 ] && export BFS_MD_CACHE=$MDC # bricks get features/upcall
# shellcheck source=tests/lib/cluster.sh
source "$(dirname "$0")/../tests/lib/cluster.sh"
# shellcheck source=tests/lib/mgmt.sh
source "$(dirname "$0")/../tests/lib/mgmt.sh"
PY=${PYTHON:-python3}
# No errexit from here: the exit trap's teardown (which stops the bricks
# brickfsd started) must run to its end; failures are checked by hand.
set +e
die() { echo "calls: $*" >&2; exit 1; }

pids=() # the bricks' processes
# reading_mount B PORT SUBVOL: mount $T/q<B>, one protocol/client to a brick
reading_mount()
{
    local q=$T/vol/q$1.vol
    mkdir -p "$T/vol"
    printf 'volume q%d\n    type protocol/client\n    option remote-host 127.0.0.1\n' "$1" >"$q"
    printf '    option remote-port %s\n    option remote-subvolume %s\nend-volume\n' "$2" "$3" >>"$q"
    mount_brickfs "$q" "$T/q$1" || die "mount of brick $1 failed"
}

# volgen_volume ARG...: a brickfsd volume $VOL of NB bricks (ARG: its
# layout words before the bricks, as "replica 3"), CALLS_OPTS set; mounted
# at $T/m, each brick at $T/q<b>.
volgen_volume()
{
    local bricks=() b port
    start_brickfsd >/dev/null || die "brickfsd did not start"
    for ((b = 0; b < NB; b++)); do mkdir -p "$T/b$b"; bricks+=("127.0.0.1:$T/b$b"); done
    cli volume create "$VOL" "$@" "${bricks[@]}" force >/dev/null || die "volume create failed"
    if [ -n "${CALLS_OPTS:-}" ]; then
        while read -r k v; do
            [ -z "$k" ] || cli volume set "$VOL" "$k" "$v" >/dev/null || die "volume set $k $v failed"
        done <<<"$CALLS_OPTS"
    fi
    cli volume start "$VOL" >/dev/null || die "volume start failed"
    for ((b = 0; b < NB; b++)); do
        port=$(vol_brick_field "$VOL" "$b" port) || die "no port for brick $b"
        reading_mount "$b" "$port" "$VOL-brick-$b"
        pids+=("$(mgmt_brick_pid "$VOL" "$b")")
    done
    mount_vol "$VOL" "$T/m" || die "the volume's mount failed"
}

# hand_graph: NB bricks from cluster.sh volfiles (x<b>), the client graph
# of $LAYOUT written here, mounted at $T/m; each brick at $T/q<b>.
hand_graph()
{
    local ports=() b vf=$T/vol/$VOL.client.vol subs='' top
    for ((b = 0; b < NB; b++)); do
        write_volfiles "x$b" "$T/b$b"
        start_brick "x$b" || die "brick $b did not start"
        ports+=("$(brick_port "x$b")")
        pids+=("$(brick_pid "x$b")")
    done
    {
        for ((b = 0; b < NB; b++)); do
            printf 'volume %s-client-%d\n    type protocol/client\n    option remote-host 127.0.0.1\n' "$VOL" "$b"
            printf '    option remote-port %s\n    option remote-subvolume x%d\nend-volume\n\n' "${ports[$b]}" "$b"
            subs+=" $VOL-client-$b"
        done
        if [ "$LAYOUT" = rep3 ]; then
            printf 'volume rep3-replicate-0\n    type cluster/replicate\n'
            top=rep3-replicate-0
        else
            printf 'volume disp-disperse-0\n    type cluster/disperse\n    option redundancy 2\n'
            top=disp-disperse-0
        fi
        if [ -n "${CALLS_OPTS:-}" ]; then
            while read -r k v; do [ -n "$k" ] && printf '    option %s %s\n' "$k" "$v"; done <<<"$CALLS_OPTS"
        fi
        if [ -n "${CALLS_TRACE:-}" ]; then # trace over child 0 and over the cluster translator
            subs=${subs/ $VOL-client-0/ $VOL-trace-c0}
            printf '    subvolumes%s\nend-volume\n\n' "$subs"
            printf 'volume %s-trace-c0\n    type debug/trace\n    subvolumes %s-client-0\nend-volume\n\n' "$VOL" "$VOL"
            printf 'volume %s-trace-top\n    type debug/trace\n    subvolumes %s\nend-volume\n\n' "$VOL" "$top"
            top=$VOL-trace-top
        else
            printf '    subvolumes%s\nend-volume\n\n' "$subs"
        fi
        if [ "$LAYOUT" = disp ] && [ "$MDC" != 0 ]; then
            printf 'volume disp-md-cache\n    type performance/md-cache\n'
            printf '    option performance.md-cache-timeout %s\n    subvolumes %s\nend-volume\n\n' "$MDC" "$top"
            top=disp-md-cache
        fi
        printf 'volume %s\n    type debug/io-stats\n    subvolumes %s\nend-volume\n' "$VOL" "$top"
    } >"$vf"
    unset BFS_MD_CACHE # the one-brick reading mounts: no md-cache
    for ((b = 0; b < NB; b++)); do reading_mount "$b" "${ports[$b]}" "x$b"; done
    mount_brickfs "$vf" "$T/m" || die "the volume's mount failed"
    [ -z "${CALLS_TRACE:-}" ] || echo "trace: $T/logs/mount-m.log"
}

case $LAYOUT in
rep3) if [ "$VOLGEN" = 1 ]; then volgen_volume replica 3; else hand_graph; fi ;;
dist) volgen_volume ;;
disp) if [ "$VOLGEN" = 1 ]; then volgen_volume disperse 6 redundancy 2; else hand_graph; fi ;;
esac

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
first=1
for phase in ${PHASES//,/ }; do
    [ "$first" = 1 ] || sleep "${CALLS_GAP:-0}"
    first=0
    sync; echo 3 >/proc/sys/vm/drop_caches
    for ((b = 0; b < NB; b++)); do stats brickfs.io-stats.reset "$T/q$b" >/dev/null; done
    stats brickfs.io-stats.reset "$T/m" >/dev/null
    [ "$LAYOUT" = disp ] && { stats brickfs.graph "$T/m" >"$T/$phase.g0.json" || true; }
    cmd=("$bin" -n "$FILES" -d "$DIRS" -s 4096 -p "$phase" "$T/m/w")
    cb=$(cpu "${pids[@]}")
    cm=$(cpu "$mpid")
    if [ "$PERF" = 1 ] && command -v perf >/dev/null; then
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
    if [ -f "$T/$phase.perf" ]; then echo "$phase  fuse:   $(fuse_count "$T/$phase.perf")"; fi
    if [ "$LAYOUT" = disp ]; then
        stats brickfs.graph "$T/m" >"$T/$phase.g1.json" || true
        ec_lookups "$T/$phase.g0.json" "$T/$phase.g1.json" 2>/dev/null || true
    fi
done
