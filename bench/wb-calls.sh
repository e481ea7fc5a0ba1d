#!/usr/bin/env bash
#
# bench/wb-calls.sh BUILD [MB] [FILES] [ROUNDS] — performance/write-behind
# on and off on the same one-brick volume, measured in ways that depend
# little on the machine's load (docs/PERFORMANCE.md, write-behind entry;
# docs/design/write-behind.md):
#
#   - sequential write: dd of MB MiB (bs=1M) and its close; for each, the
#     average time the kernel waited for a FUSE WRITE (a debug/io-stats on
#     top of the client graph: with write-behind, the time to answer), the
#     most writes write-behind had out at once (its dump), and the CPU time
#     of the mount and of the brick per GiB (/proc/PID/stat utime+stime);
#   - small files: bench/smallfile create of FILES files of 4 KiB, then (page
#     cache dropped) stat: files/s, the top io-stats' average WRITE and FLUSH
#     waits, and md-cache's hits in the stat phase (does it still learn the
#     size from the writes' answers?).
#
# One brick (tests/lib/cluster.sh volfiles with features/upcall), one client
# graph per setting: protocol/client -> io-stats -> md-cache (60 s) ->
# [write-behind] -> io-stats (named top). The settings alternate, ROUNDS
# (default 2) times each, off first. WB_REPLICA=3: three bricks under
# cluster/replicate instead of one (the brick CPU is the first brick's). Prints one line per run and the load
# average before it. WB_WINDOW=SIZE sets write-behind's window (default 4MB);
# WB_MAX_OUT=N its max-out (default 1); WB_ONLY=1 runs write-behind on only
# (to compare settings).
set -euo pipefail
BUILD=${1:?usage: bench/wb-calls.sh BUILD [MB] [FILES] [ROUNDS]}
MB=${2:-512}
FILES=${3:-2000}
ROUNDS=${4:-2}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
export BFS_BUILD=$BUILD
BFS_KEEP_TMP=${BENCH_KEEP_TMP:-0}
# shellcheck source=tests/lib/cluster.sh
source "$(dirname "$0")/../tests/lib/cluster.sh"
PY=${PYTHON:-python3}
SMALLFILE=$BUILD/bin/smallfile

NB=${WB_REPLICA:-1}
for ((b = 1; b <= NB; b++)); do
    BFS_MD_CACHE=60 write_volfiles "b$b" "$T/b$b"
    start_brick "b$b"
done
bpid=$(brick_pid b1)

# base_vf OUT: protocol/client -> io-stats -> md-cache (one brick), or
# protocol/client x3 -> cluster/replicate -> md-cache (WB_REPLICA=3)
base_vf()
{
    if [ "$NB" = 1 ]; then
        cat "$(client_volfile b1)" >"$1"
        return
    fi
    {
        for ((b = 1; b <= NB; b++)); do
            printf 'volume c%d\n    type protocol/client\n    option remote-host 127.0.0.1\n' "$b"
            printf '    option remote-port %s\n    option remote-subvolume b%d\nend-volume\n\n' \
                "$(brick_port "b$b")" "$b"
        done
        printf 'volume s1\n    type debug/io-stats\n    subvolumes c1\nend-volume\n\n'
        printf 'volume rep\n    type cluster/replicate\n    subvolumes s1'
        for ((b = 2; b <= NB; b++)); do printf ' c%d' "$b"; done
        printf '\nend-volume\n\nvolume b1-md-cache\n    type performance/md-cache\n'
        printf '    option performance.md-cache-timeout 10\n    subvolumes rep\nend-volume\n'
    } >"$1"
}

# client_vf WB OUT: the client graph, write-behind in it when WB is 1
client_vf()
{
    local wb=$1 out=$2 under=b1-md-cache
    base_vf "$out"
    if [ "$wb" = 1 ]; then
        printf '\nvolume b1-write-behind\n    type performance/write-behind\n' >>"$out"
        [ -z "${WB_WINDOW:-}" ] ||
            printf '    option performance.write-behind-window-size %s\n' "$WB_WINDOW" >>"$out"
        [ -z "${WB_MAX_OUT:-}" ] ||
            printf '    option performance.write-behind-max-out %s\n' "$WB_MAX_OUT" >>"$out"
        printf '    subvolumes b1-md-cache\nend-volume\n' >>"$out"
        under=b1-write-behind
    fi
    printf '\nvolume top\n    type debug/io-stats\n    subvolumes %s\nend-volume\n' "$under" >>"$out"
}

cpu_ms() { awk '{ printf "%d\n", ($14 + $15) * 1000 / '"$(getconf CLK_TCK)"' }' "/proc/$1/stat"; }
minflt() { awk '{ print $10 }' "/proc/$1/stat"; }

# dumped MNT XL KEY [FOP]: a number from translator XL's dump
dumped()
{
    "$PY" - "$@" <<'PY'
import json, os, sys
v = json.loads(os.getxattr(sys.argv[1], "brickfs.graph"))
x = next((x for x in v["xlators"] if x["name"] == sys.argv[2]), None)
d = x.get("dump", {}) if x else {}
if len(sys.argv) > 4:
    d = d.get("fops", {}).get(sys.argv[4], {})
print(d.get(sys.argv[3], 0))
PY
}

# s1_counts MNT: the first brick's calls so far, by fop (JSON)
s1_counts()
{
    "$PY" - "$1" <<'PY'
import json, os, sys
v = json.loads(os.getxattr(sys.argv[1], "brickfs.graph"))
x = next(x for x in v["xlators"] if x["name"] == "s1")
print(json.dumps({k: f["count"] for k, f in x["dump"]["fops"].items()}))
PY
}

run()
{
    local wb=$1 mnt=$T/m vf=$T/vol/client-wb$1.vol
    client_vf "$wb" "$vf"
    mount_brickfs "$vf" "$mnt" -o attr-timeout=1,entry-timeout=1
    local mpid
    mpid=$(bfs_pid_of "mount-m")
    local load c0m c0b t0 t1 c1m c1b
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    local f0 f1
    f0=$(minflt "$mpid")
    c0m=$(cpu_ms "$mpid") c0b=$(cpu_ms "$bpid") t0=$(bfs_now_us)
    dd if=/dev/zero of="$mnt/seq" bs=1M count="$MB" status=none
    t1=$(bfs_now_us) c1m=$(cpu_ms "$mpid") c1b=$(cpu_ms "$bpid")
    f1=$(minflt "$mpid")
    local wcount wlat smax
    wcount=$(dumped "$mnt" top count write) wlat=$(dumped "$mnt" top lat_avg_ns write)
    smax=$([ "$wb" = 1 ] && dumped "$mnt" b1-write-behind sent_max || echo 1)
    awk -v wb="$wb" -v win="${WB_WINDOW:-4MB}" -v mo="${WB_MAX_OUT:-1}" -v load="$load" -v mb="$MB" -v us=$((t1 - t0)) -v cm=$((c1m - c0m)) \
        -v cb=$((c1b - c0b)) -v n="$wcount" -v lat="$wlat" -v smax="$smax" -v flt=$((f1 - f0)) 'BEGIN {
        printf "wb=%s window=%s max-out=%s load=%s seq-write %.0f MB/s, %d WRITEs waited %.0f us each, %d out at most, CPU ms/GiB mount %.0f brick %.0f, mount page faults/MiB %.0f\n",
            wb, win, mo, load, mb * 1.048576 / (us / 1e6), n, lat / 1000, smax, cm * 1024 / mb, cb * 1024 / mb, flt / mb }'
    [ "$NB" = 1 ] || "$PY" - "$mnt" "$MB" <<'PY'
import json, os, sys
v = json.loads(os.getxattr(sys.argv[1], "brickfs.graph"))
x = next(x for x in v["xlators"] if x["name"] == "s1")
f = x["dump"]["fops"]
print("  brick 1 calls per MiB written:", " ".join("%s=%.2f" % (k, f[k]["count"] / float(sys.argv[2]))
      for k in sorted(f) if f[k]["count"]))
PY
    rm -f "$mnt/seq"
    local out hits0 hits1 fl wl statout c0=
    [ "$NB" = 1 ] || c0=$(s1_counts "$mnt")
    out=$("$SMALLFILE" -n "$FILES" -d 10 -s 4096 -p create "$mnt/sf")
    [ "$NB" = 1 ] || "$PY" - "$c0" "$(s1_counts "$mnt")" "$FILES" <<'PY'
import json, sys
a, b, n = json.loads(sys.argv[1]), json.loads(sys.argv[2]), float(sys.argv[3])
print("  brick 1 calls per created file:", " ".join("%s=%.2f" % (k, (b[k] - a.get(k, 0)) / n)
      for k in sorted(b) if b[k] - a.get(k, 0)))
PY
    wl=$(dumped "$mnt" top lat_avg_ns write) fl=$(dumped "$mnt" top lat_avg_ns flush)
    sync
    echo 3 >/proc/sys/vm/drop_caches
    hits0=$(dumped "$mnt" b1-md-cache hits)
    statout=$("$SMALLFILE" -n "$FILES" -d 10 -s 4096 -p stat "$mnt/sf")
    hits1=$(dumped "$mnt" b1-md-cache hits)
    "$SMALLFILE" -n "$FILES" -d 10 -s 4096 -p delete "$mnt/sf" >/dev/null
    awk -v wb="$wb" -v c="$out" -v s="$statout" -v wl="$wl" -v fl="$fl" -v h=$((hits1 - hits0)) \
        -v n="$FILES" 'BEGIN { split(c, a, " "); split(s, b, " ");
        printf "wb=%s small-file create %.0f files/s (WRITE waited %.0f us, FLUSH %.0f us), stat %.0f files/s, md-cache hits in stat %.2f per file\n",
            wb, a[4], wl / 1000, fl / 1000, b[4], h / n }'
    umount_fuse "$mnt"
}

for ((r = 0; r < ROUNDS; r++)); do
    [ "${WB_ONLY:-0}" = 1 ] || run 0
    run 1
done
