#!/usr/bin/env bash
#
# bench/run.sh BUILD — `make bench`: brickfs side by side with GlusterFS
# (Debian's glusterfs-server, a private glusterd: bench/gluster.sh) on the
# same layouts, in the same run, against the targets of issues 2, 4, 5, 6.
#
# Sections (BENCH_ONLY, comma list, default all, in this order):
#   1brick  one brick          issue 2 (ratios to the passthrough)
#   dist3   3-brick distribute issue 4 (ratios to GlusterFS, seq write to the disk)
#   rep3    replica 3          issue 5 (+ heal rate after a brick was down)
#   disp    disperse 6 redundancy 2, issue 6 (brickfs: a volume made by
#           brickfsd, 4+2 fragments, default chunk 1 KiB: 4 KiB stripes)
# Targets of every section (BENCH_TARGETS, default all four):
#   disk         a folder of the local file system
#   passthrough  that folder through bench/passthrough.c, a minimal FUSE file
#                system: the ceiling any FUSE client can reach here
#   brickfs      1brick: brickfs-brick (storage/posix -> features/index -> features/locks ->
#                [features/upcall ->] debug/io-stats -> protocol/server) +
#                brickfs-mount --volfile [with performance/md-cache and
#                performance/write-behind on top],
#                as issue 2 defines it, with the caches volgen gives every
#                volume (the bracketed translators; BENCH_MD_CACHE=0 leaves
#                them out: docs/design/cache-invalidation.md); the other
#                sections: a volume made by
#                brickfsd (tests/lib/mgmt.sh) with brick folders on the same
#                file system, mounted with brickfs-mount, default options
#   gluster      the same layout with GlusterFS 10.3, default options, its
#                FUSE client (glusterfs) with default options; bricks on
#                127.1.1.1 (gluster refuses 127.0.0.1), all on the same file
#                system, `force` (root file system, sets on one host)
#
# Workloads, every one run on every target of the section:
#   seq write  dd 1 MiB blocks of zeros into one file, conv=fsync (one fsync
#              at the end, inside the time)                          MB/s
#   seq read   dd that file back                                     MB/s
#              (both: the disk, the passthrough and GlusterFS get the best
#              of BENCH_BASE_TRIES runs, brickfs one run)
#   create, stat, read, delete of BENCH_FILES files of 4 KiB in 50 folders
#              (build/bin/smallfile, one phase per call, one thread) files/s
#   dist3 also:
#   randread   fio, 4 KiB random reads, O_DIRECT, psync, BENCH_FIO_JOBS jobs
#              on one BENCH_FIO_MB file for BENCH_FIO_SECS s        IOPS
#   mkdir      BENCH_META folders in one folder (build/bin/metaops)  dirs/s
#   rename     BENCH_META files renamed in one folder (new names hash
#              elsewhere: most renames cross bricks)                 renames/s
#   ls_small, ls_big  `ls -l` of one folder holding BENCH_LS_SMALL, then
#              BENCH_LS_BIG empty files (made untimed, 4 threads)   entries/s
#   rep3 also (brickfs and gluster only, after the rounds):
#   heal       one brick killed (SIGKILL), BENCH_HEAL_FILES files of
#              BENCH_HEAL_SIZE bytes created in 10 folders, the brick
#              restarted (volume start force); timed from the restart to the
#              end of the heal                              files/s and MB/s
#              gluster: `volume heal V`, then the bricks' heal indexes polled
#              (what heal info lists) until empty, confirmed by heal info;
#              brickfs: `brickfs volume heal V` + `volume heal V info --json`
#              when the CLI has them, else a crawl of the mount (stat and
#              first byte of every file: heal on access) repeated until the
#              restarted brick holds every file at its size. Either way the
#              brick's copy is then compared with a good one (untimed).
# MB is 10^6 bytes. The page cache (and with it the kernel's cached names
# and attributes of every mount) is dropped before each step
# (echo 3 >/proc/sys/vm/drop_caches), so reads and lookups start cold on
# all targets; bricks' own caches are not.
#
# Fairness: with BENCH_MD_CACHE=SECONDS (default 60, volgen's for one brick) the 1brick brickfs client keeps
# attributes and names in its own memory (kept valid by the brick's
# invalidations), which drop_caches does not empty: its stat, read and delete
# steps then start warm on the client side, unlike the passthrough's
# (BENCH_MD_CACHE_COLD=1 empties it before every step, BENCH_MD_CACHE=0 runs
# without it). One file system for everything; FUSE mounts with 1 s attribute
# and entry timeouts (gluster's defaults; the passthrough and brickfs-mount
# are set so); no writeback cache on any; targets interleaved step by step,
# the first target rotating each round; figures are medians over the rounds
# and ratios the median of each round's ratio (figures taken seconds apart).
#
# Environment (defaults in brackets; BENCH_QUICK=1 or BENCH_SIZE=F scale the
# counts and sizes down, F a fraction, for a smoke run; a variable given
# explicitly wins):
#   BENCH_ONLY [1brick,dist3,rep3,disp]   BENCH_TARGETS [disk passthrough brickfs gluster]
#   BENCH_RUNS [3 for 1brick, 1 for the others]
#   BENCH_MD_CACHE [600] 1brick: md-cache-timeout of the client (0: no
#                        features/upcall nor performance/md-cache, the graph
#                        of issue 2's text)
#   BENCH_WRITE_BEHIND [1]  0: no performance/write-behind in the brickfs
#                        client (1brick: left out of the hand-written graph;
#                        other sections: volume set performance.write-behind off)
#   BENCH_MD_CACHE_COLD [0]  1: empty that md-cache with the page cache
#                        before every step (cold on the client side too)
#   BENCH_SEQ_MB [1024] BENCH_FILES [5000] BENCH_DIRS [50] BENCH_FILE_SIZE [4096]
#   BENCH_LS_SMALL [10000] BENCH_LS_BIG [50000] BENCH_META [2000]
#   BENCH_FIO_MB [512] BENCH_FIO_SECS [20] BENCH_FIO_JOBS [4]
#   BENCH_BASE_TRIES [2]  sequential runs of each basis (disk, passthrough,
#                        GlusterFS) per round, the best kept
#   BENCH_HEAL_FILES [10000] BENCH_HEAL_SIZE [16384] BENCH_HEAL_TIMEOUT [1800]
#   BENCH_HEAL_STALL [90]  brickfs crawl heal: give up after that long without progress
#   BENCH_DIR [BUILD/bench-tmp]  where all data goes (its file system is "the disk")
#   BENCH_JSON [bench/results/DATE-HOST.json]  results as JSON
#   BENCH_RECORD=1  append the tables, date and machine to docs/PERFORMANCE.md
#   BENCH_GLUSTER_HOST [127.1.1.1]
# Needs root (drop_caches, glusterd, brickfsd's trusted xattrs). fio and
# GlusterFS are installed here with apt-get when missing (install-deps.sh
# has no bench section: they are bench-only dependencies).

set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
BUILD=${1:-build}
BUILD=${BUILD%/}
case $BUILD in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$ROOT/$BUILD ;; esac

die()
{
    echo "bench: $*" >&2
    exit 1
}

# ---- sizes ----
QUICK=${BENCH_QUICK:-0}
SCALE=${BENCH_SIZE:-}
[ -z "$SCALE" ] && { [ "$QUICK" = 1 ] && SCALE=0.05 || SCALE=1; }
awk -v s="$SCALE" 'BEGIN { exit !(s > 0 && s <= 1) }' || die "BENCH_SIZE must be a fraction in (0, 1]"
# sc DEFAULT MIN: DEFAULT scaled by BENCH_SIZE, at least MIN
sc() { awk -v d="$1" -v m="$2" -v s="$SCALE" 'BEGIN { v = int(d * s); print (v < m) ? m : v }'; }
SEQ_MB=${BENCH_SEQ_MB:-$(sc 1024 16)}
FILES=${BENCH_FILES:-$(sc 5000 100)}
DIRS=${BENCH_DIRS:-50}
FILE_SIZE=${BENCH_FILE_SIZE:-4096}
LS_SMALL=${BENCH_LS_SMALL:-$(sc 10000 200)}
LS_BIG=${BENCH_LS_BIG:-$(sc 50000 1000)}
META_N=${BENCH_META:-$(sc 2000 100)}
FIO_MB=${BENCH_FIO_MB:-$(sc 512 16)}
FIO_SECS=${BENCH_FIO_SECS:-$([ "$QUICK" = 1 ] && echo 3 || echo 20)}
FIO_JOBS=${BENCH_FIO_JOBS:-4}
BASE_TRIES=${BENCH_BASE_TRIES:-2}
HEAL_FILES=${BENCH_HEAL_FILES:-$(sc 10000 200)}
HEAL_SIZE=${BENCH_HEAL_SIZE:-16384}
HEAL_TIMEOUT_S=${BENCH_HEAL_TIMEOUT:-$([ "$QUICK" = 1 ] && echo 120 || echo 1800)}
HEAL_STALL_S=${BENCH_HEAL_STALL:-$([ "$QUICK" = 1 ] && echo 20 || echo 90)}
RUNS_SET=${BENCH_RUNS:-}
MD_CACHE=${BENCH_MD_CACHE:-600} # the translator's default, as volgen's volumes have it
MD_CACHE_COLD=${BENCH_MD_CACHE_COLD:-0}
WRITE_BEHIND=${BENCH_WRITE_BEHIND:-1}
[ "$QUICK" = 1 ] && RUNS_SET=${RUNS_SET:-1}
ONLY=${BENCH_ONLY:-1brick,dist3,rep3,disp}
TARGETS=${BENCH_TARGETS:-disk passthrough brickfs gluster}
BENCH_DIR=${BENCH_DIR:-$BUILD_ABS/bench-tmp}
STAMP=$(date -u +%Y%m%d-%H%M%S)
JSON=${BENCH_JSON:-$ROOT/bench/results/$STAMP-$(hostname -s 2>/dev/null || echo host).json}

for v in SEQ_MB FILES DIRS FILE_SIZE LS_SMALL LS_BIG META_N FIO_MB FIO_SECS FIO_JOBS BASE_TRIES \
    HEAL_FILES HEAL_SIZE HEAL_TIMEOUT_S HEAL_STALL_S; do
    [ "${!v}" -ge 1 ] 2>/dev/null || die "$v must be a positive number (got '${!v}')"
done
[ "$LS_BIG" -gt "$LS_SMALL" ] || die "BENCH_LS_BIG must be larger than BENCH_LS_SMALL"
[ -z "$RUNS_SET" ] || [ "$RUNS_SET" -ge 1 ] 2>/dev/null || die "BENCH_RUNS must be a positive number"
SECTIONS=()
for s in ${ONLY//,/ }; do
    case $s in 1brick | dist3 | rep3 | disp) SECTIONS+=("$s") ;;
    *) die "unknown section '$s' in BENCH_ONLY (1brick, dist3, rep3, disp)" ;; esac
done
for t in $TARGETS; do
    case $t in disk | passthrough | brickfs | gluster) ;;
    *) die "unknown target '$t' in BENCH_TARGETS (disk, passthrough, brickfs, gluster)" ;; esac
done
[ "$(id -u)" = 0 ] || echo "bench: not root: the page cache cannot be dropped, and brickfs volumes and GlusterFS will not start" >&2

SMALLFILE=$BUILD_ABS/bin/smallfile
METAOPS=$BUILD_ABS/bin/metaops
PASSTHROUGH=$BUILD_ABS/bin/passthrough
[ -x "$SMALLFILE" ] && [ -x "$METAOPS" ] || die "$SMALLFILE or $METAOPS is not built (make)"

# Bench-only Debian packages, installed like scripts/install-deps.sh does.
bench_deps()
{
    local p missing=()
    for p in fio glusterfs-server glusterfs-client; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null && [ "$(id -u)" = 0 ] || {
        echo "bench: missing ${missing[*]} (not root or no apt-get): those figures will be n/a" >&2
        return 0
    }
    echo "bench: installing bench dependencies: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
        echo "bench: could not install ${missing[*]}" >&2
}
bench_deps

mkdir -p "$BENCH_DIR" || die "cannot create $BENCH_DIR"
# Room: the sequential files of every target at once (rep3: 3 copies each
# for brickfs and gluster), the ls files, the heal files, with a margin.
need_kb=$(((SEQ_MB * 1024 * 9 + FIO_MB * 1024 * 4 + HEAL_FILES * (HEAL_SIZE / 1024 + 4) * 6 + LS_BIG * 8 * 6) * 11 / 10))
avail_kb=$(df -Pk "$BENCH_DIR" | awk 'NR == 2 { print $4 }')
[ "$avail_kb" -ge "$need_kb" ] ||
    die "$BENCH_DIR has $((avail_kb / 1024)) MiB free, the bench needs $((need_kb / 1024)) MiB; lower BENCH_SIZE or set BENCH_DIR"

# $T (removed at exit), process and mount helpers, brickfsd helpers.
export BFS_BUILD=$BUILD_ABS BFS_TMPDIR=$BENCH_DIR
# shellcheck source=tests/lib/cluster.sh
source "$ROOT/tests/lib/cluster.sh"
# shellcheck source=tests/lib/mgmt.sh
source "$ROOT/tests/lib/mgmt.sh"
# shellcheck source=bench/gluster.sh
source "$ROOT/bench/gluster.sh"

# At exit or on a signal, before the usual teardown (which stops glusterd
# with the other processes started here): unmount the GlusterFS mounts, then
# stop GlusterFS's volumes and processes.
eval "bfs__bench_teardown() $(declare -f bfs_teardown | tail -n +2)"
bfs_teardown()
{
    local mnt pid
    while read -r mnt pid; do
        case $mnt in */gl-mnt-*) umount_fuse "$mnt" >&2 ;; esac
    done < <(tac "$T/.run/mounts" 2>/dev/null)
    gl_teardown >&2
    bfs__bench_teardown
}

RES=$T/results.tsv # section target metric round value
NOTES=$T/notes.tsv # section note
: >"$RES"
: >"$NOTES"
DROPPED=yes

note()
{
    printf '%s\t%s\n' "$SECTION" "$1" >>"$NOTES"
    echo "bench: note: $1"
}

record()
{
    printf '%s\t%s\t%s\t%s\t%s\n' "$SECTION" "$1" "$2" "$ROUND" "$3" >>"$RES"
}

drop_caches()
{
    sync
    if [ "$DROPPED" = yes ] && ! { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
        DROPPED=no
        note "page cache not dropped (needs root): read figures come from memory"
    fi
    if [ "$MD_CACHE_COLD" = 1 ] && [ "$SECTION" = 1brick ] && [ "$MD_CACHE" != 0 ] &&
        [ -n "${DIR[brickfs]:-}" ]; then
        setfattr -n brickfs.md-cache.flush -v 1 "${DIR[brickfs]}" 2>/dev/null ||
            note "brickfs: could not empty md-cache"
    fi
}

elapsed_since()
{
    awk -v a="$1" -v b="$(bfs_now_us)" 'BEGIN { printf "%.6f", (b - a) / 1e6 }'
}

rate()
{
    awk -v n="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.1f", n / s; else print "error" }'
}

mb() { awk -v m="$1" 'BEGIN { printf "%.6f", m * 1048576 / 1e6 }'; }

# ---- workload steps: STEP TARGET, on the folder DIR[TARGET] ----
declare -A DIR BROKEN

# The bases a target compares with (disk, passthrough, GlusterFS) get the
# best of BASE_TRIES sequential runs, brickfs one: on this kind of guest a
# buffered writer or reader that meets freshly reported memory runs 2-4x
# slower than one that reuses recently freed pages (performance-notes.md
# note 46), and one such run of a basis decided verdicts either way.
seq_tries() { [ "$1" = brickfs ] && echo 1 || echo "$BASE_TRIES"; }

# best_rate TARGET CMD...: runs CMD seq_tries times (drop_caches before
# each, and first rm -f of $BR_RM when set: a rewrite must not time the
# truncation of the last one), prints the best MB/s or "error"
best_rate()
{
    local t=$1 best=error i t0 r
    shift
    for ((i = 0; i < $(seq_tries "$t"); i++)); do
        [ -n "${BR_RM:-}" ] && rm -f "$BR_RM"
        drop_caches
        t0=$(bfs_now_us)
        "$@" || { echo error; return; }
        r=$(rate "$(mb "$SEQ_MB")" "$(elapsed_since "$t0")")
        best=$(awk -v a="$best" -v b="$r" 'BEGIN { print (a == "error" || b + 0 > a + 0) ? b : a }')
    done
    echo "$best"
}

seq_write()
{
    local t=$1
    echo "bench: $SECTION $t: sequential write, $SEQ_MB MiB"
    local f=${DIR[$t]}/seq.bin
    record "$t" seq_write "$(BR_RM=$f best_rate "$t" dd if=/dev/zero of="$f" bs=1M count="$SEQ_MB" \
        conv=fsync status=none)"
}

seq_read()
{
    local t=$1
    echo "bench: $SECTION $t: sequential read"
    record "$t" seq_read "$(best_rate "$t" dd if="${DIR[$t]}/seq.bin" of=/dev/null bs=1M status=none)"
    rm -f "${DIR[$t]}/seq.bin"
}

small()
{
    local t=$1 phase=$2 out
    if [ -n "${BROKEN[$t]:-}" ]; then
        record "$t" "$phase" error # a failed phase leaves the later ones nothing sane to do
        return
    fi
    echo "bench: $SECTION $t: $phase $FILES files of $FILE_SIZE bytes in $DIRS folders"
    drop_caches
    if out=$("$SMALLFILE" -p "$phase" -n "$FILES" -d "$DIRS" -s "$FILE_SIZE" "${DIR[$t]}/small"); then
        record "$t" "$phase" "${out##* }"
    else
        record "$t" "$phase" error
        BROKEN[$t]=1
    fi
}

randread()
{
    local t=$1 f=${DIR[$1]}/fio.bin out iops
    echo "bench: $SECTION $t: 4 KiB random reads, $FIO_JOBS jobs, ${FIO_SECS}s on $FIO_MB MiB"
    if ! dd if=/dev/zero of="$f" bs=1M count="$FIO_MB" conv=fsync status=none; then
        record "$t" randread error
        return
    fi
    drop_caches
    if out=$(fio --name=randread --filename="$f" --rw=randread --bs=4k --size="${FIO_MB}M" \
        --direct=1 --ioengine=psync --numjobs="$FIO_JOBS" --runtime="$FIO_SECS" --time_based \
        --group_reporting --output-format=json 2>"$T/logs/fio-$SECTION-$t.err") &&
        iops=$(echo "$out" | python3 -c 'import json, sys; print("%.1f" % json.load(sys.stdin)["jobs"][0]["read"]["iops"])'); then
        record "$t" randread "$iops"
    else
        record "$t" randread error
        bfs__tail_log "$T/logs/fio-$SECTION-$t.err"
    fi
    rm -f "$f"
}

# metaop TARGET PHASE DIR [ARGS...]: build/bin/metaops, prints the rate or "error"
metaop()
{
    local out
    out=$("$METAOPS" -p "$2" "${@:4}" "$3") || { echo error; return 1; }
    echo "${out##* }"
}

mkdirs()
{
    local t=$1 d=${DIR[$1]}/mk r
    echo "bench: $SECTION $t: mkdir of $META_N folders in one folder"
    mkdir -p "$d" || { record "$t" mkdir error; return; }
    drop_caches
    r=$(metaop "$t" mkdir "$d" -n "$META_N")
    record "$t" mkdir "$r"
    rm -rf "$d"
}

renames()
{
    local t=$1 d=${DIR[$1]}/rn r
    echo "bench: $SECTION $t: rename of $META_N files in one folder"
    mkdir -p "$d" && metaop "$t" touch "$d" -n "$META_N" -t 4 >/dev/null ||
        { record "$t" rename error; rm -rf "$d"; return; }
    drop_caches
    r=$(metaop "$t" rename "$d" -n "$META_N")
    record "$t" rename "$r"
    rm -rf "$d"
}

# ls -l of LS_SMALL, then (40,000 more files later) LS_BIG entries.
lists()
{
    local t=$1 d=${DIR[$1]}/ls metric n first t0
    mkdir -p "$d" || { record "$t" ls_small error; record "$t" ls_big error; return; }
    first=0
    for metric in ls_small ls_big; do
        [ $metric = ls_small ] && n=$LS_SMALL || n=$LS_BIG
        echo "bench: $SECTION $t: ls -l of $n files in one folder"
        if ! metaop "$t" touch "$d" -f "$first" -n $((n - first)) -t 4 >/dev/null; then
            record "$t" "$metric" error
            continue
        fi
        first=$n
        drop_caches
        t0=$(bfs_now_us)
        if [ "$(ls -l "$d" | wc -l)" -eq $((n + 1)) ]; then
            record "$t" "$metric" "$(rate "$n" "$(elapsed_since "$t0")")"
        else
            record "$t" "$metric" error
            note "$t: ls -l of $d did not list $n entries"
        fi
    done
    rm -rf "$d"
}

# run_round N: every step, each on every target in turn (the first target
# rotates from round to round), so that compared figures are seconds apart.
run_round()
{
    local n=${#LIVE[@]} order=() i t phase
    for ((i = 0; i < n; i++)); do order+=("${LIVE[(i + $1) % n]}"); done
    BROKEN=()
    for t in "${order[@]}"; do seq_write "$t"; done
    for t in "${order[@]}"; do seq_read "$t"; done
    [ "$SECTION" = dist3 ] && for t in "${order[@]}"; do randread "$t"; done
    for phase in create stat read delete; do
        for t in "${order[@]}"; do small "$t" "$phase"; done
    done
    for t in "${order[@]}"; do rm -rf "${DIR[$t]}/small"; done
    if [ "$SECTION" = dist3 ]; then
        for t in "${order[@]}"; do mkdirs "$t"; done
        for t in "${order[@]}"; do renames "$t"; done
        for t in "${order[@]}"; do lists "$t"; done
    fi
}

# ---- targets: setup_TARGET, with S=$T/$SECTION ----
declare -A LAYOUT_N=([1brick]=1 [dist3]=3 [rep3]=3 [disp]=6)
declare -A LAYOUT_SPEC=([1brick]="" [dist3]="" [rep3]="replica 3" [disp]="disperse 6 redundancy 2")
LIVE=()
BFS_VOL=
GL_VOL=
BFSD_UP=
GLD_UP=

fuse_usable()
{
    [ -c /dev/fuse ] && [ -w /dev/fuse ] && command -v fusermount3 >/dev/null
}

setup_disk()
{
    mkdir -p "$S/disk" && DIR[disk]=$S/disk
}

setup_passthrough()
{
    [ -x "$PASSTHROUGH" ] || { note "passthrough: skipped, $PASSTHROUGH is not built"; return 1; }
    fuse_usable || { note "passthrough: skipped, FUSE is not usable"; return 1; }
    mkdir -p "$S/pt-src"
    mount_fuse "passthrough-$SECTION" "$S/pt-mnt" "$PASSTHROUGH" "$S/pt-src" "$S/pt-mnt" -f \
        -o default_permissions || { note "passthrough: could not mount"; return 1; }
    DIR[passthrough]=$S/pt-mnt
}

# brick folders of a target: $S/TARGET-bricks/b1..bN
brick_dirs()
{
    local i
    for ((i = 1; i <= LAYOUT_N[$SECTION]; i++)); do echo "$S/$1-bricks/b$i"; done
}

setup_brickfs()
{
    local b out dirs=() d
    for b in "$BRICK_BIN" "$MOUNT_BIN" "$BRICKFSD_BIN" "$BRICKFS_BIN"; do
        [ -x "$b" ] || { note "brickfs: skipped, $b is not built"; return 1; }
    done
    fuse_usable || { note "brickfs: skipped, FUSE is not usable"; return 1; }
    if [ "$SECTION" = 1brick ]; then
        # issue 2's setup: a hand-written one-brick graph, no management
        local mdc=
        if [ "$MD_CACHE" != 0 ]; then
            mdc=$MD_CACHE
            if [ "$MD_CACHE_COLD" = 1 ]; then
                note "brickfs: features/upcall on the brick, performance/md-cache (md-cache-timeout $MD_CACHE) on the client, emptied with the page cache before every step"
            else
                note "brickfs: features/upcall on the brick, performance/md-cache (md-cache-timeout $MD_CACHE) on the client: its cache outlives drop_caches"
            fi
        fi
        local wb=
        if [ "$WRITE_BEHIND" != 0 ]; then
            wb=1
            note "brickfs: performance/write-behind on the client"
        fi
        BFS_WRITE_BEHIND=$wb BFS_MD_CACHE=$mdc write_volfiles b1 "$S/brickfs-bricks/b1" &&
            start_brick b1 ||
            { note "brickfs: the brick did not start"; return 1; }
        mount_brickfs "$(client_volfile b1)" "$S/bfs-mnt-$SECTION" || { note "brickfs: the mount failed"; return 1; }
        DIR[brickfs]=$S/bfs-mnt-$SECTION
        return 0
    fi
    if [ -z "$BFSD_UP" ]; then
        start_brickfsd >/dev/null || { note "brickfs: brickfsd did not start"; return 1; }
        BFSD_UP=1
    fi
    mapfile -t dirs < <(brick_dirs brickfs)
    local spec=${LAYOUT_SPEC[$SECTION]} bricks=()
    for d in "${dirs[@]}"; do bricks+=("127.0.0.1:$d"); done
    BFS_VOL=bench-$SECTION
    # shellcheck disable=SC2086
    if ! out=$(cli volume create "$BFS_VOL" $spec "${bricks[@]}" force 2>&1); then
        note "brickfs: volume create ... $spec refused: $(echo "$out" | tail -n 1)"
        BFS_VOL=
        return 1
    fi
    if [ "$WRITE_BEHIND" = 0 ]; then
        out=$(cli volume set "$BFS_VOL" performance.write-behind off 2>&1) ||
            { note "brickfs: volume set performance.write-behind off failed: $out"; return 1; }
        note "brickfs: performance.write-behind off"
    fi
    out=$(cli volume start "$BFS_VOL" 2>&1) || { note "brickfs: volume start failed: $out"; return 1; }
    mount_vol "$BFS_VOL" "$S/bfs-mnt-$SECTION" || { note "brickfs: the mount failed"; return 1; }
    DIR[brickfs]=$S/bfs-mnt-$SECTION
}

setup_gluster()
{
    local why dirs=()
    fuse_usable || { note "gluster: skipped, FUSE is not usable"; return 1; }
    if [ -z "$GLD_UP" ]; then
        why=$(gl_why_unusable)
        [ -z "$why" ] || { note "gluster: skipped: $why"; GLD_UP=no; return 1; }
        gl_start_glusterd || { note "gluster: glusterd did not start"; GLD_UP=no; return 1; }
        GLD_UP=yes
    fi
    [ "$GLD_UP" = yes ] || return 1
    mapfile -t dirs < <(brick_dirs gluster)
    GL_VOL=gb-$SECTION
    gl_create "$GL_VOL" "${LAYOUT_SPEC[$SECTION]}" "${dirs[@]}" ||
        { note "gluster: volume create/start failed"; GL_VOL=; return 1; }
    gl_mount "$GL_VOL" "$S/gl-mnt-$SECTION" || { note "gluster: the mount failed"; return 1; }
    DIR[gluster]=$S/gl-mnt-$SECTION
}

teardown_section()
{
    [ -n "${DIR[passthrough]:-}" ] && umount_fuse "${DIR[passthrough]}"
    if [ -n "${DIR[brickfs]:-}" ]; then
        umount_fuse "${DIR[brickfs]}"
        [ "$SECTION" = 1brick ] && stop_brick b1
    fi
    if [ -n "$BFS_VOL" ]; then
        cli --yes volume stop "$BFS_VOL" >/dev/null 2>&1
        cli --yes volume delete "$BFS_VOL" >/dev/null 2>&1
    fi
    [ -n "${DIR[gluster]:-}" ] && umount_fuse "${DIR[gluster]}"
    [ -n "$GL_VOL" ] && gl_destroy "$GL_VOL"
    BFS_VOL= GL_VOL=
    DIR=()
    LIVE=()
    rm -rf --one-file-system "$S"
}

# ---- rep3: heal after a brick was down ----

# bfs_heal_cli: the brickfs CLI has `volume heal` (another branch adds it).
bfs_heal_cli()
{
    cli volume heal --help >/dev/null 2>&1
}

# bfs_heal_pending VOL: entries still to heal per `volume heal VOL info
# --json` (any JSON shape with per-brick counts); "error" when unreadable.
bfs_heal_pending()
{
    cli --json volume heal "$1" info 2>/dev/null | python3 -c '
import json, sys
def count(v):
    if isinstance(v, dict):
        for k in ("total_pending", "pending", "total", "count", "remaining"):
            if isinstance(v.get(k), int) and not isinstance(v.get(k), bool):
                return v[k]
        if isinstance(v.get("bricks"), list):
            return sum(count(b) for b in v["bricks"])
        if isinstance(v.get("entries"), list):
            return len(v["entries"])
    raise ValueError
try:
    print(count(json.load(sys.stdin)))
except Exception:
    print("error")'
}

# sink_complete DIR: the restarted brick DIR holds every heal file at its size.
sink_count()
{
    find "$1/heal" -type f -size "${HEAL_SIZE}c" 2>/dev/null | wc -l
}

sink_complete()
{
    [ "$(sink_count "$1")" -eq "$HEAL_FILES" ]
}

# heal_verify GOOD SINK: the sink's copies of heal/ equal the good brick's.
heal_verify()
{
    diff -rq --exclude=.glusterfs --exclude=.brickfs "$1/heal" "$2/heal" >"$T/logs/heal-diff-$3.out" 2>&1
}

heal_gluster()
{
    local dirs=() t0 secs n info
    mapfile -t dirs < <(brick_dirs gluster)
    echo "bench: rep3 gluster: heal: brick 3 down during the creation of $HEAL_FILES files of $HEAL_SIZE bytes"
    gl_kill_brick "$GL_VOL" "${dirs[2]}" || { record gluster heal_files error; return; }
    "$SMALLFILE" -p create -n "$HEAL_FILES" -d 10 -s "$HEAL_SIZE" "${DIR[gluster]}/heal" >/dev/null ||
        { record gluster heal_files error; note "gluster: heal: creating the files failed"; return; }
    # The time runs from the restart: a self-heal daemon may heal while the
    # brick comes up (brickfs's does, on the brick's connect).
    t0=$(bfs_now_us)
    gl_restart_bricks "$GL_VOL" "${dirs[2]}" || { record gluster heal_files error; note "gluster: heal: the brick did not restart"; return; }
    gl_heal_start "$GL_VOL" || note "gluster: heal: 'volume heal' kept failing; waiting for the self-heal daemon's own crawl"
    if ! bfs_wait_until "$HEAL_TIMEOUT_S" eval '[ "$(gl_index_count "${dirs[@]}")" -eq 0 ]'; then
        record gluster heal_files error
        note "gluster: heal: $(gl_index_count "${dirs[@]}") index entries left after ${HEAL_TIMEOUT_S}s"
        return
    fi
    secs=$(elapsed_since "$t0")
    record gluster heal_files "$(rate "$HEAL_FILES" "$secs")"
    record gluster heal_mb "$(rate "$(awk -v n="$HEAL_FILES" -v s="$HEAL_SIZE" 'BEGIN { print n * s / 1e6 }')" "$secs")"
    info=$(gl_heal_info "$GL_VOL")
    [ "$info" = 0 ] || note "gluster: heal: heal info says $info entries after the indexes emptied"
    heal_verify "${dirs[0]}" "${dirs[2]}" gluster || note "gluster: heal: brick 3 differs from brick 1 after the heal (logs/heal-diff-gluster.out)"
    note "gluster: heal by 'volume heal' (index heal of the self-heal daemon), finished when the bricks' indexes were empty ($info entries in heal info)"
}

heal_brickfs()
{
    local dirs=() t0 secs mode n=
    mapfile -t dirs < <(brick_dirs brickfs)
    echo "bench: rep3 brickfs: heal: brick 3 down during the creation of $HEAL_FILES files of $HEAL_SIZE bytes"
    # brickfsd's supervisor restarts a killed brick after 1 s (glusterd does
    # not): it is stopped (SIGSTOP) while the brick is down, so that the
    # brick stays down during the creation as GlusterFS's does.
    local bpid fpid
    bpid=$(mgmt_brick_pid "$BFS_VOL" 2) && fpid=$(brickfsd_pid d1) ||
        { record brickfs heal_files error; note "brickfs: heal: brick 3 or brickfsd not found"; return; }
    kill -STOP "$fpid"
    kill -KILL "$bpid" && bfs_wait_gone "$bpid" "$PROCESS_DOWN_TIMEOUT" ||
        { kill -CONT "$fpid"; record brickfs heal_files error; note "brickfs: heal: could not kill brick 3"; return; }
    "$SMALLFILE" -p create -n "$HEAL_FILES" -d 10 -s "$HEAL_SIZE" "${DIR[brickfs]}/heal" >/dev/null ||
        { kill -CONT "$fpid"; record brickfs heal_files error; note "brickfs: heal: creating the files failed"; return; }
    kill -CONT "$fpid"
    t0=$(bfs_now_us) # from the restart, as for GlusterFS
    cli volume start "$BFS_VOL" force >/dev/null 2>&1 &&
        bfs_wait_until "$PROCESS_UP_TIMEOUT" eval '[ "$(vol_brick_field "$BFS_VOL" 2 online)" = 1 ]' ||
        { record brickfs heal_files error; note "brickfs: heal: brick 3 did not restart"; return; }
    if bfs_heal_cli; then
        mode="'brickfs volume heal' + 'volume heal info --json'"
        cli volume heal "$BFS_VOL" >/dev/null 2>&1 || note "brickfs: heal: 'volume heal' failed"
        bfs_wait_until "$HEAL_TIMEOUT_S" eval '[ "$(bfs_heal_pending "$BFS_VOL")" = 0 ] && sink_complete "${dirs[2]}"'
    else
        mode="a crawl of the mount (find, stat and first byte of every file; brickfs has no 'volume heal' yet)"
        local deadline=$(($(bfs_now_us) + HEAL_TIMEOUT_S * 1000000))
        # Stop early when crawls stop making progress (a heal that never
        # comes would otherwise hold the bench for BENCH_HEAL_TIMEOUT).
        local done_now done_before=-1 progress_at
        progress_at=$(bfs_now_us)
        n=0
        while ! sink_complete "${dirs[2]}" && [ "$(bfs_now_us)" -lt "$deadline" ] &&
            [ $(($(bfs_now_us) - progress_at)) -lt $((HEAL_STALL_S * 1000000)) ]; do
            n=$((n + 1))
            echo 2 >/proc/sys/vm/drop_caches 2>/dev/null # forget names: every stat is a lookup
            find "${DIR[brickfs]}/heal" -type f -print0 | xargs -0 -r head -c 1 >/dev/null 2>&1
            sink_complete "${dirs[2]}" && break
            sleep 1
            done_now=$(sink_count "${dirs[2]}")
            [ "$done_now" -gt "$done_before" ] && progress_at=$(bfs_now_us)
            done_before=$done_now
        done
    fi
    if ! sink_complete "${dirs[2]}"; then
        record brickfs heal_files error
        note "brickfs: heal by $mode: brick 3 holds $(sink_count "${dirs[2]}") of $HEAL_FILES files at their size after $(elapsed_since "$t0")s${n:+ and $n crawls, none healing more for ${HEAL_STALL_S}s}"
        return
    fi
    secs=$(elapsed_since "$t0")
    record brickfs heal_files "$(rate "$HEAL_FILES" "$secs")"
    record brickfs heal_mb "$(rate "$(awk -v n="$HEAL_FILES" -v s="$HEAL_SIZE" 'BEGIN { print n * s / 1e6 }')" "$secs")"
    heal_verify "${dirs[0]}" "${dirs[2]}" brickfs || note "brickfs: heal: brick 3 differs from brick 1 after the heal (logs/heal-diff-brickfs.out)"
    note "brickfs: heal by $mode${n:+, $n crawl(s)}"
}

# ---- main ----
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started_at=$(date -u '+%Y-%m-%d %H:%M UTC')
for SECTION in "${SECTIONS[@]}"; do
    S=$T/$SECTION
    mkdir -p "$S"
    ROUND=0
    echo "bench: ==== $SECTION (${LAYOUT_SPEC[$SECTION]:-$([ "${LAYOUT_N[$SECTION]}" = 1 ] && echo plain || echo distribute)} over ${LAYOUT_N[$SECTION]} brick(s)) ===="
    for t in $TARGETS; do
        "setup_$t" && LIVE+=("$t")
    done
    RUNS=${RUNS_SET:-$([ "$SECTION" = 1brick ] && echo 3 || echo 1)}
    printf '%s\t%s\n' "$SECTION" "$RUNS" >>"$T/runs.tsv"
    if [ ${#LIVE[@]} -gt 0 ]; then
        for ((ROUND = 1; ROUND <= RUNS; ROUND++)); do
            echo "bench: $SECTION: round $ROUND of $RUNS"
            run_round "$ROUND"
        done
        ROUND=1
        if [ "$SECTION" = rep3 ]; then
            [ -n "$GL_VOL" ] && [ -n "${DIR[gluster]:-}" ] && heal_gluster
            [ -n "$BFS_VOL" ] && [ -n "${DIR[brickfs]:-}" ] && heal_brickfs
        fi
    fi
    teardown_section
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

fstype=$(findmnt -no FSTYPE -T "$BENCH_DIR" 2>/dev/null || stat -f -c %T "$BENCH_DIR")
mkdir -p "$(dirname "$JSON")"
record_args=()
[ "${BENCH_RECORD:-0}" = 1 ] && record_args=(--record "$ROOT/docs/PERFORMANCE.md")
python3 "$ROOT/bench/report.py" --results "$RES" --notes "$NOTES" --runs "$T/runs.tsv" \
    --json "$JSON" "${record_args[@]}" --meta started="$started_at" commit="$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo none)" \
    cpus="$(nproc)" cpu="$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)" \
    mem="$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)" \
    kernel="$(uname -r)" fs="$fstype" bench_dir="$BENCH_DIR" \
    load_before="$load_before" load_after="$load_after" \
    gluster="$(glusterfs --version 2>/dev/null | head -n 1)" \
    seq_mb="$SEQ_MB" files="$FILES" dirs="$DIRS" file_size="$FILE_SIZE" ls_small="$LS_SMALL" \
    ls_big="$LS_BIG" meta="$META_N" fio_mb="$FIO_MB" fio_secs="$FIO_SECS" fio_jobs="$FIO_JOBS" \
    base_tries="$BASE_TRIES" \
    heal_files="$HEAL_FILES" heal_size="$HEAL_SIZE" dropped="$DROPPED" quick="$QUICK" scale="$SCALE"

# The erasure codec's throughput: a separate step with its own table
# (bench/ec-codec.sh; BENCH_EC=0 leaves it out).
if [ "${BENCH_EC:-1}" = 1 ]; then
    echo
    bash "$ROOT/bench/ec-codec.sh" "$BUILD"
fi
