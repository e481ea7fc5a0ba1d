#!/usr/bin/env bash
#
# bench/run.sh BUILD — `make bench`: the same workloads on
#   disk         a folder of the local file system
#   passthrough  that folder through bench/passthrough.c, a minimal FUSE
#                file system: the ceiling any FUSE client can reach here
#   brickfs      a one-brick brickfs volume over TCP on 127.0.0.1:
#                brickfs-brick (storage/posix -> features/locks ->
#                debug/io-stats -> protocol/server) on that file system,
#                brickfs-mount --volfile (protocol/client -> debug/io-stats)
# and prints one table with the median figures, the ratio brickfs /
# passthrough (median of the rounds' ratios) and the issue's target for it.
#
# Workloads:
#   seq write   dd 1 MiB blocks of zeros into one file, conv=fsync   MB/s
#   seq read    dd that file back                                    MB/s
#   create, stat, read, delete of BENCH_FILES files of 4 KiB in 50
#   folders (build/bin/smallfile, one phase per call)                files/s
# MB is 10^6 bytes, as dd prints it. The page cache (and with it the
# kernel's cached names and attributes of every mount) is dropped before
# each step, so reads and lookups start cold on all three targets.
#
# Fairness:
#   - one bench folder, one file system, for all three targets;
#   - the passthrough is mounted with the kernel-side options brickfs-mount
#     uses: default_permissions (the kernel checks permissions; without it
#     a passthrough running as root lets every user read every file),
#     max_read=1 MiB; both use 1 MiB max_write and max_readahead (set in
#     their init), 1 s attribute and entry timeouts and no negative cache;
#   - neither uses the kernel's writeback cache (unsafe for brickfs: other
#     clients write too), so every write(2) of 1 MiB is one synchronous
#     FUSE_WRITE on both; reads go through the kernel's read-ahead on both
#     (1 MiB window, several FUSE_READs in flight), the disk's through its
#     block device's read_ahead_kb;
#   - what drop_caches cannot drop: storage/posix holds O_PATH fds of the
#     files it used last (gfid-cache-fds, 1,024), which keeps their inodes
#     in memory on the brick side;
#   - the targets are interleaved step by step: each of BENCH_RUNS rounds
#     runs each step (seq write, seq read, create, stat, read, delete) on
#     every target in turn, the first target rotating from round to round;
#     the table shows the median figures and, as the ratio, the median of
#     the rounds' ratios, each made of figures taken seconds apart, so that
#     other work on a shared machine weighs on both sides alike.
#
# Environment (defaults in brackets):
#   BENCH_SEQ_MB [1024]  size of the sequential file in MiB
#   BENCH_FILES [5000] BENCH_DIRS [50] BENCH_FILE_SIZE [4096] BENCH_THREADS [1]
#   BENCH_RUNS [3]       rounds; the table shows medians
#   BENCH_DIR [BUILD/bench-tmp]  where the data goes (its file system is the
#                                "local disk"; /tmp may be tmpfs)
#   BENCH_TARGETS ["disk passthrough brickfs"]
#   BENCH_RECORD=1  append the table, the date and the machine's facts to
#                   docs/PERFORMANCE.md
# Dropping the page cache needs root; without it the read figures come from
# memory, and the table says so.
#
# Quick run: BENCH_SEQ_MB=64 BENCH_FILES=500 BENCH_RUNS=1 make bench

set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
BUILD=${1:-build}
BUILD=${BUILD%/}
case $BUILD in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$ROOT/$BUILD ;; esac

SEQ_MB=${BENCH_SEQ_MB:-1024}
FILES=${BENCH_FILES:-5000}
DIRS=${BENCH_DIRS:-50}
FILE_SIZE=${BENCH_FILE_SIZE:-4096}
THREADS=${BENCH_THREADS:-1}
RUNS=${BENCH_RUNS:-3}
TARGETS=${BENCH_TARGETS:-disk passthrough brickfs}
BENCH_DIR=${BENCH_DIR:-$BUILD_ABS/bench-tmp}

SMALLFILE=$BUILD_ABS/bin/smallfile
PASSTHROUGH=$BUILD_ABS/bin/passthrough

die()
{
    echo "bench: $*" >&2
    exit 1
}

[ -x "$SMALLFILE" ] || die "$SMALLFILE is not built (make)"
[ "$RUNS" -ge 1 ] 2>/dev/null || die "BENCH_RUNS must be a positive number"
mkdir -p "$BENCH_DIR" || die "cannot create $BENCH_DIR"

# Room for the sequential file and the small files of every target at
# once (the steps are interleaved), with a margin.
ntargets=$(echo "$TARGETS" | wc -w)
need_kb=$(((SEQ_MB * 1024 + FILES * ((FILE_SIZE + 4095) / 4096) * 4 * 2 + DIRS * 8) * ntargets * 11 / 10))
avail_kb=$(df -Pk "$BENCH_DIR" | awk 'NR == 2 { print $4 }')
[ "$avail_kb" -ge "$need_kb" ] ||
    die "$BENCH_DIR has $((avail_kb / 1024)) MiB free, the bench needs $((need_kb / 1024)) MiB; lower BENCH_SEQ_MB or set BENCH_DIR"

# $T (removed at exit), process and mount helpers, cleanup on any exit.
export BFS_BUILD=$BUILD_ABS BFS_TMPDIR=$BENCH_DIR
# shellcheck source=tests/lib/cluster.sh
source "$ROOT/tests/lib/cluster.sh"

declare -A R       # R[target:metric] = "figure figure ..." one per round, or "error"
declare -A DIR     # DIR[target] = the folder its workloads run in
NOTES=()
DROPPED=yes
LIVE=()            # targets that are set up

drop_caches()
{
    sync
    if [ "$DROPPED" = yes ] && ! { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
        DROPPED=no
        NOTES+=("page cache not dropped (needs root): read figures come from memory")
    fi
}

# elapsed_since START_US: seconds, as a decimal
elapsed_since()
{
    awk -v a="$1" -v b="$(bfs_now_us)" 'BEGIN { printf "%.6f", (b - a) / 1e6 }'
}

# mb MIB: the same size in MB (10^6 bytes)
mb()
{
    awk -v m="$1" 'BEGIN { printf "%.6f", m * 1048576 / 1e6 }'
}

rate()
{
    awk -v n="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.1f", n / s; else print "error" }'
}

# record TARGET METRIC VALUE
record()
{
    R[$1:$2]="${R[$1:$2]:-}${R[$1:$2]:+ }$3"
}

# seq_write TARGET / seq_read TARGET / small TARGET PHASE: one step on one
# target, page cache dropped first.
seq_write()
{
    local target=$1 dir=${DIR[$1]} t0 secs
    echo "bench: $target: sequential write, $SEQ_MB MiB"
    drop_caches
    t0=$(bfs_now_us)
    if dd if=/dev/zero of="$dir/seq.bin" bs=1M count="$SEQ_MB" conv=fsync status=none; then
        secs=$(elapsed_since "$t0")
        record "$target" seq_write "$(rate "$(mb "$SEQ_MB")" "$secs")"
    else
        record "$target" seq_write error
    fi
}

seq_read()
{
    local target=$1 dir=${DIR[$1]} t0 secs
    echo "bench: $target: sequential read"
    drop_caches
    t0=$(bfs_now_us)
    if dd if="$dir/seq.bin" of=/dev/null bs=1M status=none; then
        secs=$(elapsed_since "$t0")
        record "$target" seq_read "$(rate "$(mb "$SEQ_MB")" "$secs")"
    else
        record "$target" seq_read error
    fi
    rm -f "$dir/seq.bin"
}

declare -A BROKEN  # BROKEN[target]=1 after a failed small-file phase in this round

small()
{
    local target=$1 phase=$2 dir=${DIR[$1]} out
    if [ -n "${BROKEN[$target]:-}" ]; then
        record "$target" "$phase" error # a failed phase leaves the later ones nothing sane to do
        return
    fi
    echo "bench: $target: $phase $FILES files of $FILE_SIZE bytes in $DIRS folders"
    drop_caches
    if out=$("$SMALLFILE" -p "$phase" -n "$FILES" -d "$DIRS" -s "$FILE_SIZE" -t "$THREADS" \
        "$dir/small"); then
        record "$target" "$phase" "${out##* }"
    else
        record "$target" "$phase" error
        BROKEN[$target]=1
    fi
}

# run_round N: every step of every workload, each step on every target in
# turn (the first target rotates from round to round), so that the figures
# compared with each other were taken seconds apart.
run_round()
{
    local n=${#LIVE[@]} order=() i t phase
    for ((i = 0; i < n; i++)); do
        order+=("${LIVE[(i + $1) % n]}")
    done
    BROKEN=()
    for t in "${order[@]}"; do seq_write "$t"; done
    for t in "${order[@]}"; do seq_read "$t"; done
    for phase in create stat read delete; do
        for t in "${order[@]}"; do small "$t" "$phase"; done
    done
    for t in "${order[@]}"; do rm -rf "${DIR[$t]}/small"; done
}

fuse_usable()
{
    [ -c /dev/fuse ] && [ -w /dev/fuse ] && command -v fusermount3 >/dev/null
}

setup_disk()
{
    mkdir -p "$T/disk" && DIR[disk]=$T/disk
}

setup_passthrough()
{
    [ -x "$PASSTHROUGH" ] || { NOTES+=("passthrough: skipped, $PASSTHROUGH is not built"); return 1; }
    fuse_usable || { NOTES+=("passthrough: skipped, FUSE is not usable (/dev/fuse, fusermount3)"); return 1; }
    mkdir -p "$T/pt-src"
    if ! mount_fuse passthrough "$T/pt-mnt" "$PASSTHROUGH" "$T/pt-src" "$T/pt-mnt" -f \
        -o default_permissions; then
        NOTES+=("passthrough: could not mount")
        return 1
    fi
    DIR[passthrough]=$T/pt-mnt
}

setup_brickfs()
{
    local b
    for b in "$BRICK_BIN" "$MOUNT_BIN"; do
        [ -x "$b" ] || { NOTES+=("brickfs: skipped, $b is not built yet"); return 1; }
    done
    fuse_usable || { NOTES+=("brickfs: skipped, FUSE is not usable (/dev/fuse, fusermount3)"); return 1; }
    if ! write_volfiles b1 "$T/bricks/b1" || ! start_brick b1; then
        NOTES+=("brickfs: the brick did not start (log: see above)")
        return 1
    fi
    if ! mount_brickfs "$(client_volfile b1)" "$T/bfs-mnt"; then
        NOTES+=("brickfs: the mount failed (log: see above)")
        return 1
    fi
    DIR[brickfs]=$T/bfs-mnt
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for target in $TARGETS; do
    case $target in
    disk) setup_disk && LIVE+=(disk) ;;
    passthrough) setup_passthrough && LIVE+=(passthrough) ;;
    brickfs) setup_brickfs && LIVE+=(brickfs) ;;
    *) die "unknown target '$target' (disk, passthrough, brickfs)" ;;
    esac
done
for ((round = 1; round <= RUNS; round++)); do
    echo "bench: round $round of $RUNS"
    run_round "$round"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
[ -n "${DIR[passthrough]:-}" ] && umount_fuse "${DIR[passthrough]}"
if [ -n "${DIR[brickfs]:-}" ]; then
    umount_fuse "${DIR[brickfs]}"
    stop_brick b1
fi

# ---- the table ----
METRICS=(seq_write seq_read create stat read delete)
declare -A LABEL=(
    [seq_write]="seq write (MB/s)" [seq_read]="seq read (MB/s)"
    [create]="create (files/s)" [stat]="stat (files/s)"
    [read]="read (files/s)" [delete]="delete (files/s)"
)
# The issue's targets for brickfs / passthrough.
declare -A TARGET=(
    [seq_write]=0.70 [seq_read]=0.70 [create]=0.50 [stat]=0.50 [read]=0.50 [delete]=""
)

# median of the figures of TARGET:METRIC ("n/a" when not run, "error" if any failed)
fig()
{
    local v=${R[$1:$2]:-}
    [ -n "$v" ] || { echo n/a; return; }
    case " $v " in *" error "*) echo error; return ;; esac
    echo "$v" | tr ' ' '\n' | sort -g | awk '{ a[NR] = $1 } END {
        if (NR % 2) printf "%.1f", a[(NR + 1) / 2]; else printf "%.1f", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# brickfs/passthrough of each round, space separated ("n/a" where missing)
round_ratios()
{
    local b p i out=""
    read -r -a b <<<"${R[brickfs:$1]:-}"
    read -r -a p <<<"${R[passthrough:$1]:-}"
    [ "${#b[@]}" -gt 0 ] && [ "${#b[@]}" = "${#p[@]}" ] || return 0
    for ((i = 0; i < ${#b[@]}; i++)); do
        out+=" $(awk -v b="${b[i]}" -v p="${p[i]}" 'BEGIN {
            if (b + 0 > 0 && p + 0 > 0) printf "%.2f", b / p; else printf "n/a" }')"
    done
    echo "${out# }"
}

# The ratio of the table: the median of the rounds' ratios (each from
# figures taken seconds apart), not the ratio of the medians.
ratio()
{
    local r
    r=$(round_ratios "$1")
    case " $r " in "  " | *" n/a "*) echo n/a; return ;; esac
    echo "$r" | tr ' ' '\n' | sort -g | awk '{ a[NR] = $1 } END {
        if (NR % 2) printf "%.2f", a[(NR + 1) / 2]; else printf "%.2f", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

met()
{
    local r=$1 t=$2
    [ -n "$t" ] || { echo "-"; return; }
    case $r in n/a) echo n/a; return ;; esac
    awk -v r="$r" -v t="$t" 'BEGIN { print (r >= t) ? "yes" : "no" }'
}

table()
{
    printf '| %-18s | %10s | %11s | %10s | %16s | %7s | %4s |\n' workload disk passthrough \
        brickfs brickfs/passthr. target met?
    printf '|%s|%s|%s|%s|%s|%s|%s|\n' "--------------------" "-----------:" "------------:" \
        "-----------:" "-----------------:" "--------:" "------"
    local m r t
    for m in "${METRICS[@]}"; do
        r=$(ratio "$m")
        t=${TARGET[$m]}
        printf '| %-18s | %10s | %11s | %10s | %16s | %7s | %4s |\n' "${LABEL[$m]}" \
            "$(fig disk "$m")" "$(fig passthrough "$m")" "$(fig brickfs "$m")" "$r" \
            "${t:+>= $t}" "$(met "$r" "$t")"
    done
}

# Every round's ratio, to show the spread behind the medians.
spread()
{
    local m r
    for m in "${METRICS[@]}"; do
        r=$(round_ratios "$m")
        [ -n "$r" ] && echo "  ${LABEL[$m]}: $r"
    done
}

fstype=$(findmnt -no FSTYPE -T "$BENCH_DIR" 2>/dev/null || stat -f -c %T "$BENCH_DIR")
sizes="seq $SEQ_MB MiB; $FILES files of $FILE_SIZE B in $DIRS folders, $THREADS thread(s); $RUNS round(s), medians; page cache dropped before each step: $DROPPED"
load="load average $load_before before, $load_after after"

echo
echo "bench: $sizes; data on $fstype ($BENCH_DIR); $load"
table
if [ "$RUNS" -gt 1 ]; then
    echo "brickfs/passthrough in each round:"
    spread
fi
for n in "${NOTES[@]}"; do
    echo "note: $n"
done

if [ "${BENCH_RECORD:-0}" = 1 ]; then
    doc=$ROOT/docs/PERFORMANCE.md
    [ -f "$doc" ] || printf '# brickfs performance\n\nEntries appended by `BENCH_RECORD=1 make bench` (bench/run.sh).\n' >"$doc"
    commit=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "no commit")
    cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
    mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
    {
        echo
        echo "### $(date -u '+%Y-%m-%d %H:%M UTC') — $commit"
        echo
        echo "Machine: $(nproc) CPUs ($cpu), $mem, kernel $(uname -r), data on $fstype; $load."
        echo "Sizes: $sizes."
        echo
        table
        if [ "$RUNS" -gt 1 ]; then
            echo
            echo "brickfs/passthrough in each round:"
            echo
            spread | sed 's/^  /- /'
        fi
        for n in "${NOTES[@]}"; do
            echo
            echo "Note: $n"
        done
    } >>"$doc"
    echo "bench: recorded in docs/PERFORMANCE.md"
fi

# The erasure codec's throughput: a separate step with its own table
# (bench/ec-codec.sh; BENCH_EC=0 leaves it out).
if [ "${BENCH_EC:-1}" = 1 ]; then
    echo
    bash "$ROOT/bench/ec-codec.sh" "$BUILD"
fi
