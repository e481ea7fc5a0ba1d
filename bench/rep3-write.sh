#!/usr/bin/env bash
#
# bench/rep3-write.sh BUILD [MB] [ROUNDS] — where a replica 3 sequential write
# spends its time, in figures that depend little on the machine's load
# (docs/design/performance-notes.md note 37):
#
# A replica 3 volume made by brickfsd (the bench's rep3 layout, 3 bricks on
# this host, volgen's graphs), mounted; dd of MB MiB (bs=1M, conv=fsync) into
# one file, ROUNDS times. For each round: MB/s, the load average, the CPU
# time per MiB of the mount and of each brick (/proc/PID/stat), the system
# calls per MiB of the mount and of the first brick (perf stat,
# raw_syscalls:sys_enter), the mount's and first brick's context switches per
# MiB, the mount's minor page faults per MiB, and the CPU time per MiB of
# the test's other processes (brickfsd, its self-heal daemon) and of dd
# itself (perf stat task-clock: its copy into the FUSE page cache), and how
# many vCPUs all of them kept busy over the write (the kernel's writeback
# workers not counted).
# REP3W_LAYOUT="disperse 6 redundancy 2" (or "replica 3", the default, or
# "distribute 3", or "distribute 1": one brick) makes another layout: the
# brick count is the layout's second word, the CPU
# columns list every brick. REP3W_SET="KEY=VALUE ..." sets volume options
# before the start. Last,
# replicate's count of writes wound without a copy of their payload, disperse's
# transactions and read-modify-writes, write-behind's most writes out. PERF_RECORD=1 also records a
# call graph of the mount and the first brick (perf record -g) into
# $BENCH_KEEP_DIR (default /tmp) for `perf report`. REP3W_DISK=1 first
# writes MB MiB with a bare dd (conv=fsync, page cache dropped) to the
# bricks' disk twice and compares each round's MB/s with the better of the
# two, as a share of the disk and of what the layout writes of it (k/n for
# disperse k+r, 1/n for replica n; performance-notes.md note 50).
#
# Needs root (brickfsd's trusted xattrs, perf).
set -euo pipefail
BUILD=${1:?usage: bench/rep3-write.sh BUILD [MB] [ROUNDS]}
MB=${2:-1024}
ROUNDS=${3:-1}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
export BFS_BUILD=$BUILD
# shellcheck source=tests/lib/cluster.sh
source "$(dirname "$0")/../tests/lib/cluster.sh"
# shellcheck source=tests/lib/mgmt.sh
source "$(dirname "$0")/../tests/lib/mgmt.sh"
KEEP=${BENCH_KEEP_DIR:-/tmp}

# disk_basis: the better MB/s of two bare dd of MB MiB to $T's disk
disk_basis()
{
    local i t0 t1 v best=0
    for i in 1 2; do
        rm -f "$T/disk.img"
        sync
        echo 3 >/proc/sys/vm/drop_caches
        t0=$(bfs_now_us)
        dd if=/dev/zero of="$T/disk.img" bs=1M count="$MB" conv=fsync status=none
        t1=$(bfs_now_us)
        v=$(awk -v mb="$MB" -v us=$((t1 - t0)) 'BEGIN { printf "%.0f", mb * 1.048576 / (us / 1e6) }')
        [ "$v" -gt "$best" ] && best=$v
    done
    rm -f "$T/disk.img"
    echo "$best"
}
disk=0
if [ "${REP3W_DISK:-0}" = 1 ]; then
    disk=$(disk_basis)
    echo "disk: $disk MB/s (the better of two dd of $MB MiB)"
fi
share=$(awk -v l="${REP3W_LAYOUT:-replica 3}" 'BEGIN { split(l, w, " ")
    if (w[1] == "disperse") print (w[2] - w[4]) / w[2]; else if (w[1] == "replica") print 1 / w[2]; else print 1 }')

bench_volume "${REP3W_LAYOUT:-replica 3}" "${REP3W_SET:-}"
NB=${#bp[@]}
# the test's other processes (brickfsd, its self-heal daemon): what the
# bricks' cache invalidations cost them
others=()
for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case " $mpid ${bp[*]} " in *" $p "*) continue ;; esac
    { tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null | grep -qF -- "$T/" && others+=("$p")
done
cpu_others() { local s=0 p; for p in "${others[@]}"; do s=$((s + $(cpu_us "$p"))); done; echo $s; }

minflt() { awk '{ print $10 }' "/proc/$1/stat"; }
cpu_us() { awk '{ printf "%d\n", ($14 + $15) * 1000000 / '"$(getconf CLK_TCK)"' }' "/proc/$1/stat"; }
# csw PID: voluntary + involuntary context switches of all its threads
csw()
{
    cat /proc/"$1"/task/*/status 2>/dev/null |
        awk '/^(non)?voluntary_ctxt_switches:/ { s += $2 } END { print s }'
}

for ((r = 1; r <= ROUNDS; r++)); do
    rm -f "$T/m/seq"
    sync
    echo 3 >/proc/sys/vm/drop_caches
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    c0=() c1=()
    for p in "$mpid" "${bp[@]}"; do c0+=("$(cpu_us "$p")"); done
    o0=$(cpu_others)
    s0m=$(csw "$mpid") s0b=$(csw "${bp[0]}") f0=$(minflt "$mpid")
    perf stat -x, -e raw_syscalls:sys_enter -p "$mpid" -o "$T/ps-m" &
    psm=$!
    perf stat -x, -e raw_syscalls:sys_enter -p "${bp[0]}" -o "$T/ps-b" &
    psb=$!
    if [ "${PERF_RECORD:-0}" = 1 ]; then
        perf record -g -o "$KEEP/rep3w-mount.data" -p "$mpid" 2>/dev/null &
        prm=$!
        perf record -g -o "$KEEP/rep3w-brick.data" -p "${bp[0]}" 2>/dev/null &
        prb=$!
    fi
    sleep 0.5
    t0=$(bfs_now_us)
    perf stat -x, -e task-clock -o "$T/ps-dd" -- \
        dd if=/dev/zero of="$T/m/seq" bs=1M count="$MB" conv=fsync status=none
    t1=$(bfs_now_us)
    for p in "$mpid" "${bp[@]}"; do c1+=("$(cpu_us "$p")"); done
    o1=$(cpu_others)
    s1m=$(csw "$mpid") s1b=$(csw "${bp[0]}") f1=$(minflt "$mpid")
    kill -INT "$psm" "$psb"
    wait "$psm" "$psb" || true
    if [ "${PERF_RECORD:-0}" = 1 ]; then
        kill -INT "$prm" "$prb"
        wait "$prm" "$prb" || true
    fi
    scm=$(awk -F, '/sys_enter/ { print $1 }' "$T/ps-m")
    ddus=$(awk -F, '/task-clock/ { printf "%d", $1 * 1000 }' "$T/ps-dd")
    scb=$(awk -F, '/sys_enter/ { print $1 }' "$T/ps-b")
    bcpu=""
    for ((i = 0; i < NB; i++)); do bcpu+=" $((c1[i + 1] - c0[i + 1]))"; done
    awk -v load="$load" -v mb="$MB" -v us=$((t1 - t0)) -v m=$((c1[0] - c0[0])) -v bcpu="$bcpu" \
        -v disk="$disk" -v share="$share" -v ddus="$ddus" \
        -v scm="$scm" -v scb="$scb" -v sm=$((s1m - s0m)) -v sb=$((s1b - s0b)) -v flt=$((f1 - f0)) -v oth=$((o1 - o0)) 'BEGIN {
        n = split(bcpu, b, " "); bs = ""; sum = m + oth
        for (i = 1; i <= n; i++) { bs = bs sprintf(" %.0f", b[i] / mb); sum += b[i] }
        printf "load %s: %.0f MB/s; CPU us/MiB mount %.0f bricks%s others %.0f (sum %.0f; dd %.0f; vCPUs busy with it all %.2f); syscalls/MiB mount %.1f brick0 %.1f; switches/MiB mount %.1f brick0 %.1f; mount page faults/MiB %.1f\n",
            load, mb * 1.048576 / (us / 1e6), m / mb, bs, oth / mb, sum / mb, ddus / mb, (sum + ddus) / us,
            scm / mb, scb / mb, sm / mb, sb / mb, flt / mb
        r = mb * 1.048576 / (us / 1e6)
        if (disk > 0)
            printf "  %.0f MB/s: %.3f of the disk (%d MB/s), %.3f of the disk x %.3f\n",
                r, r / disk, disk, r / (disk * share), share }'
    # replicate's own counts (builds that have them): writes wound from
    # the caller's bytes and writes whose payload was copied
    python3 - "$T/m" <<'PY'
import json, os, sys
v = json.loads(os.getxattr(sys.argv[1], "brickfs.graph"))
for x in v["xlators"]:
    d = x.get("dump", {})
    if "writes_lent" in d:
        print("  %s: writes lent %d, copied %d (all rounds)" % (x["name"], d["writes_lent"], d["writes_copied"]))
    if "rmw" in d:
        print("  %s: transactions %d, read-modify-writes %d (all rounds)" % (x["name"], d["transactions"], d["rmw"]))
    if "sent_max" in d:
        print("  %s: most writes out %d, waits for the window %d, bytes out max %d (all rounds)"
              % (x["name"], d["sent_max"], d["waited_window"], d["answered_bytes_out_max"]))
PY
done
