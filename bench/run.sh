#!/usr/bin/env bash
#
# bench/run.sh BUILD — `make bench`: the same workloads on
#   disk         a folder of the local file system
#   passthrough  that folder through bench/passthrough.c, a minimal FUSE
#                file system: the ceiling any FUSE client can reach here
#   brickfs      a one-brick brickfs volume (brick on that file system,
#                FUSE mount) — skipped, with a note, while the brick or the
#                mount program is not built
# and prints one table with the figures and the ratio brickfs/passthrough.
#
# Workloads:
#   seq write   dd 1 MiB blocks of zeros into one file, conv=fsync   MB/s
#   seq read    dd that file back (page cache dropped first)         MB/s
#   create, stat, read, delete of BENCH_FILES files of 4 KiB in 50
#   folders (build/bin/smallfile, page cache dropped before each)    files/s
# MB is 10^6 bytes, as dd prints it.
#
# Environment (defaults in brackets):
#   BENCH_SEQ_MB [1024]  size of the sequential file in MiB
#   BENCH_FILES [5000] BENCH_DIRS [50] BENCH_FILE_SIZE [4096] BENCH_THREADS [1]
#   BENCH_DIR [BUILD/bench-tmp]  where the data goes (its file system is the
#                                "local disk"; /tmp may be tmpfs)
#   BENCH_TARGETS ["disk passthrough brickfs"]
#   BENCH_RECORD=1  append the table, the date and the machine's facts to
#                   docs/PERFORMANCE.md
# Dropping the page cache needs root; without it the read figures come from
# memory, and the table says so.
#
# Quick run: BENCH_SEQ_MB=64 BENCH_FILES=500 make bench

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
mkdir -p "$BENCH_DIR" || die "cannot create $BENCH_DIR"

# Room for the sequential file and the small files, with a margin.
need_kb=$(((SEQ_MB * 1024 + FILES * ((FILE_SIZE + 4095) / 4096) * 4 + DIRS * 4) * 11 / 10))
avail_kb=$(df -Pk "$BENCH_DIR" | awk 'NR == 2 { print $4 }')
[ "$avail_kb" -ge "$need_kb" ] ||
    die "$BENCH_DIR has $((avail_kb / 1024)) MiB free, the bench needs $((need_kb / 1024)) MiB; lower BENCH_SEQ_MB or set BENCH_DIR"

# $T (removed at exit), process and mount helpers, cleanup on any exit.
export BFS_BUILD=$BUILD_ABS BFS_TMPDIR=$BENCH_DIR
# shellcheck source=tests/lib/cluster.sh
source "$ROOT/tests/lib/cluster.sh"

declare -A R       # R[target:metric] = figure, or "error"
NOTES=()
DROPPED=yes

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

# run_workloads TARGET DIR
run_workloads()
{
    local target=$1 dir=$2 t0 secs out phase
    echo "bench: $target: sequential write, $SEQ_MB MiB"
    drop_caches
    t0=$(bfs_now_us)
    if dd if=/dev/zero of="$dir/seq.bin" bs=1M count="$SEQ_MB" conv=fsync status=none; then
        secs=$(elapsed_since "$t0")
        R[$target:seq_write]=$(rate "$(mb "$SEQ_MB")" "$secs")
    else
        R[$target:seq_write]=error
    fi
    echo "bench: $target: sequential read"
    drop_caches
    t0=$(bfs_now_us)
    if dd if="$dir/seq.bin" of=/dev/null bs=1M status=none; then
        secs=$(elapsed_since "$t0")
        R[$target:seq_read]=$(rate "$(mb "$SEQ_MB")" "$secs")
    else
        R[$target:seq_read]=error
    fi
    rm -f "$dir/seq.bin"

    for phase in create stat read delete; do
        echo "bench: $target: $phase $FILES files of $FILE_SIZE bytes in $DIRS folders"
        drop_caches
        if out=$("$SMALLFILE" -p "$phase" -n "$FILES" -d "$DIRS" -s "$FILE_SIZE" -t "$THREADS" \
            "$dir/small"); then
            R[$target:$phase]=${out##* }
        else
            R[$target:$phase]=error
            # a failed phase leaves the later ones nothing sane to do
            break
        fi
    done
    rm -rf "$dir/small"
}

fuse_usable()
{
    [ -c /dev/fuse ] && [ -w /dev/fuse ] && command -v fusermount3 >/dev/null
}

bench_disk()
{
    mkdir -p "$T/disk"
    run_workloads disk "$T/disk"
}

bench_passthrough()
{
    [ -x "$PASSTHROUGH" ] || { NOTES+=("passthrough: skipped, $PASSTHROUGH is not built"); return; }
    fuse_usable || { NOTES+=("passthrough: skipped, FUSE is not usable (/dev/fuse, fusermount3)"); return; }
    mkdir -p "$T/pt-src"
    if ! mount_fuse passthrough "$T/pt-mnt" "$PASSTHROUGH" "$T/pt-src" "$T/pt-mnt" -f; then
        NOTES+=("passthrough: could not mount")
        return
    fi
    run_workloads passthrough "$T/pt-mnt"
    umount_fuse "$T/pt-mnt"
}

bench_brickfs()
{
    local b
    for b in "$BRICK_BIN" "$MOUNT_BIN"; do
        [ -x "$b" ] || { NOTES+=("brickfs: skipped, $b is not built yet"); return; }
    done
    fuse_usable || { NOTES+=("brickfs: skipped, FUSE is not usable (/dev/fuse, fusermount3)"); return; }
    if ! write_volfiles b1 "$T/bricks/b1" || ! start_brick b1; then
        NOTES+=("brickfs: the brick did not start (log: see above)")
        return
    fi
    if ! mount_brickfs "$(client_volfile b1)" "$T/bfs-mnt"; then
        NOTES+=("brickfs: the mount failed (log: see above)")
        return
    fi
    run_workloads brickfs "$T/bfs-mnt"
    umount_fuse "$T/bfs-mnt"
    stop_brick b1
}

for target in $TARGETS; do
    case $target in
    disk) bench_disk ;;
    passthrough) bench_passthrough ;;
    brickfs) bench_brickfs ;;
    *) die "unknown target '$target' (disk, passthrough, brickfs)" ;;
    esac
done

# ---- the table ----
METRICS=(seq_write seq_read create stat read delete)
declare -A LABEL=(
    [seq_write]="seq write (MB/s)" [seq_read]="seq read (MB/s)"
    [create]="create (files/s)" [stat]="stat (files/s)"
    [read]="read (files/s)" [delete]="delete (files/s)"
)

fig()
{
    echo "${R[$1:$2]:-n/a}"
}

ratio()
{
    local b p
    b=$(fig brickfs "$1")
    p=$(fig passthrough "$1")
    case "$b$p" in *n/a* | *error*) echo n/a; return ;; esac
    awk -v b="$b" -v p="$p" 'BEGIN { if (p > 0) printf "%.2f", b / p; else print "n/a" }'
}

table()
{
    printf '| %-18s | %12s | %12s | %12s | %20s |\n' workload disk passthrough brickfs brickfs/passthrough
    printf '|%s|%s|%s|%s|%s|\n' "--------------------" "-------------:" "-------------:" \
        "-------------:" "---------------------:"
    local m
    for m in "${METRICS[@]}"; do
        printf '| %-18s | %12s | %12s | %12s | %20s |\n' "${LABEL[$m]}" "$(fig disk "$m")" \
            "$(fig passthrough "$m")" "$(fig brickfs "$m")" "$(ratio "$m")"
    done
}

fstype=$(findmnt -no FSTYPE -T "$BENCH_DIR" 2>/dev/null || stat -f -c %T "$BENCH_DIR")
sizes="seq $SEQ_MB MiB; $FILES files of $FILE_SIZE B in $DIRS folders, $THREADS thread(s); page cache dropped: $DROPPED"

echo
echo "bench: $sizes; data on $fstype ($BENCH_DIR)"
table
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
        echo "## $(date -u '+%Y-%m-%d %H:%M UTC') — $commit"
        echo
        echo "Machine: $(nproc) CPUs ($cpu), $mem, kernel $(uname -r), data on $fstype."
        echo "Sizes: $sizes."
        echo
        table
        for n in "${NOTES[@]}"; do
            echo
            echo "Note: $n"
        done
    } >>"$doc"
    echo "bench: recorded in docs/PERFORMANCE.md"
fi
