#!/usr/bin/env bash
#
# 232-disperse-fault.t — cluster/disperse over real bricks and a FUSE mount,
# from a hand-written client volfile (no brickfsd): disperse 4 redundancy 1
# (3+1) and disperse 8 redundancy 2 (6+2), with a self-checking random
# workload (tests/lib/ec-workload.py: unaligned writes across stripes and
# past the end, appends, truncates; a model of every file updated only by
# calls that succeeded) while bricks are killed with SIGKILL at moments
# chosen by the workload's progress:
#
#   - rounds: up to R bricks killed one after another mid-workload, the
#     workload goes on (no call may fail with R or fewer down), the bricks
#     restart on their ports, accesses through the mount heal them, and the
#     fragment files on every brick are then checked against the model
#     (sizes ceil(size/stripe)*chunk ~ size/k, data fragments byte-exact);
#   - at the end: the mount reads every file right with R bricks down, a
#     read with R+1 down fails EIO or ENOTCONN (never wrong data), and after
#     the restart and heal the bricks are right again;
#   - the self-heal daemon: up to R bricks killed at random moments (random
#     bricks, random progress of the workload), restarted; the workload
#     pauses and the mount goes away, so that no client touches the files;
#     `brickfs-shd --info summary` counts the entries the bricks' pending
#     indices hold (the children that took a change another missed keep a
#     dirty mark), a brickfs-shd started by the test heals them alone:
#     the count reaches 0 and the fragments on every brick are right again;
#   - two mounts (two clients) write interleaved pieces that share every
#     stripe of one file at the same time: both writers' pieces are there
#     (the inodelk between clients, eager locks handed over).
#
# The mount runs with entry-timeout=0 and attr-timeout=0, so that every
# access is a lookup (heal on access); the volfile heals in the foreground.
#

. "$(dirname "$0")/../lib/test.sh"

skip_unless_brickfs
require_fuse
require_root
for xl in protocol/client protocol/server storage/posix cluster/disperse; do
    [ -f "$BFS_BUILD/lib/brickfs/xlators/$xl.so" ] || SKIP_ALL "$xl is not built"
done

SHD=$BFS_BIN/brickfs-shd
[ -x "$SHD" ] || SKIP_ALL "$SHD is not built"
PYTHON=$(command -v python3)
WL=$BFS_ROOT/tests/lib/ec-workload.py
wl() { "$PYTHON" "$WL" "$@"; }

# ops_ge STATE N: 1 once the workload has made N operations
ops_ge()
{
    local v
    v=$(wl get "$1" ops)
    [ -n "$v" ] && [ "$v" -ge "$2" ] && echo 1 || echo 0
}
pause() { touch "$1/pause"; }
resume() { rm -f "$1/pause"; }
is_paused() { [ -e "$1/paused" ] && echo 1 || echo 0; }
is_stopped() { [ -e "$1/stopped" ] && echo 1 || echo 0; }

# heal_converged MNT STATE K CHUNK DIRS...: access everything, then check
heal_converged()
{
    local mnt=$1 state=$2
    shift 2
    wl touch "$mnt" "$state" >/dev/null
    wl bricks "$state" "$@"
}

# client_volfile_ec NAME N R: protocol/client per brick -> cluster/disperse
client_volfile_ec()
{
    local name=$1 n=$2 r=$3 i
    for ((i = 0; i < n; i++)); do
        printf 'volume %s-client-%d\n    type protocol/client\n' "$name" "$i"
        printf '    option remote-host 127.0.0.1\n    option remote-port %s\n' \
            "$(brick_port "$name-b$i")"
        printf '    option remote-subvolume %s-b%d\n    option network.ping-timeout 5\n' \
            "$name" "$i"
        printf 'end-volume\n'
    done
    printf 'volume %s-disperse\n    type cluster/disperse\n    option redundancy %d\n' \
        "$name" "$r"
    printf '    option cluster.background-self-heal-count 0\n    subvolumes'
    for ((i = 0; i < n; i++)); do printf ' %s-client-%d' "$name" "$i"; done
    printf '\nend-volume\nvolume %s\n    type debug/io-stats\n' "$name"
    printf '    subvolumes %s-disperse\nend-volume\n' "$name"
}

# shd_pending VOLFILE: entries the bricks' indices hold, as brickfs-shd --info counts them
shd_pending()
{
    "$SHD" --volfile "$1" --info summary --json 2>>"$T/logs/shd-info.err" |
        "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["total_pending"])'
}

# shd_round NAME N R K CHUNK VF MNT STATE OPS DIRS...: bricks killed at random
# moments, healed by brickfs-shd with no client access. Prints nothing; sets OPS.
shd_round()
{
    local name=$1 n=$2 r=$3 k=$4 chunk=$5 vf=$6 M=$7 S=$8 i victim
    shift 8
    local victims
    read -r -a victims <<<"$(shuf -i 0-$((n - 1)) -n "$r" | tr '\n' ' ')"
    for victim in "${victims[@]}"; do
        OPS=$((OPS + 5 + RANDOM % 40))
        EXPECT_WITHIN 120 1 ops_ge "$S" $OPS
        TEST kill_brick "$name-b$victim"
    done
    OPS=$((OPS + 20 + RANDOM % 20))
    EXPECT_WITHIN 120 1 ops_ge "$S" $OPS
    echo "# $name shd round: killed ${victims[*]}; $(wl get "$S" ops) operations"
    pause "$S"
    EXPECT_WITHIN 60 1 is_paused "$S"
    TEST umount_brickfs "$M"                      # no client access from here on
    for victim in "${victims[@]}"; do TEST start_brick "$name-b$victim"; done
    local before
    before=$(shd_pending "$vf")
    echo "# $name: the bricks' indices hold $before entr(y|ies)"
    TEST test "${before:-0}" -gt 0
    TEST bfs_spawn "shd-$name" "$SHD" --volfile "$vf" --state-file "$T/shd-$name.json" \
        --log-file "$T/logs/shd-$name.log" --interval 5 -f
    local shd_pid=$BFS_PID
    EXPECT_WITHIN "$HEAL_TIMEOUT" 0 shd_pending "$vf"
    EXPECT ok wl bricks "$S" "$k" "$chunk" "$@"
    TEST kill -TERM "$shd_pid"
    TEST bfs_wait_gone "$shd_pid" "$PROCESS_DOWN_TIMEOUT"
    TEST mount_brickfs "$vf" "$M" -o entry-timeout=0,attr-timeout=0
    resume "$S"
}

layout()
{
    local n=$1 r=$2 k=$(($1 - $2)) chunk=4096 name=ec$1 i
    while [ $chunk -gt 512 ] && [ $((chunk * k)) -gt 4096 ]; do chunk=$((chunk / 2)); done
    local dirs=()
    for ((i = 0; i < n; i++)); do
        TEST write_volfiles "$name-b$i" "$T/bricks/$name-b$i" auto
        TEST start_brick "$name-b$i"
        dirs+=("$(brick_dir "$name-b$i")")
    done
    local vf=$T/vol/$name.client.vol
    client_volfile_ec "$name" "$n" "$r" >"$vf"
    local M=$T/mnt-$name S=$T/state-$name
    mkdir -p "$S"
    TEST mount_brickfs "$vf" "$M" -o entry-timeout=0,attr-timeout=0
    bfs_spawn "wl-$name" "$PYTHON" "$WL" run "$M" "$S"
    local ops=40 round victim killed
    for round in 1 2 3; do
        killed=()
        for ((i = 0; i < r; i++)); do
            ops=$((ops + 25))
            EXPECT_WITHIN 120 1 ops_ge "$S" $ops
            victim=$(((round * 3 + i * 5) % n))
            TEST kill_brick "$name-b$victim"
            killed+=("$victim")
        done
        ops=$((ops + 25))
        EXPECT_WITHIN 120 1 ops_ge "$S" $ops
        echo "# $name round $round: killed ${killed[*]}; $(wl get "$S" ops) operations"
        for victim in "${killed[@]}"; do
            TEST start_brick "$name-b$victim"
        done
        pause "$S"
        EXPECT_WITHIN 60 1 is_paused "$S"
        EXPECT_WITHIN "$HEAL_TIMEOUT" ok heal_converged "$M" "$S" "$k" "$chunk" "${dirs[@]}"
        resume "$S"
    done
    OPS=$ops
    for round in 1 2; do
        shd_round "$name" "$n" "$r" "$k" "$chunk" "$vf" "$M" "$S" "${dirs[@]}"
    done
    echo "# $name: $(wl get "$S" errors) failed call(s), last $(wl get "$S" last_errno)"
    [ -s "$S/errors.log" ] && sed "s/^/# failed: /" "$S/errors.log"
    EXPECT 0 wl get "$S" errors
    touch "$S/stop"
    EXPECT_WITHIN 120 1 is_stopped "$S"
    EXPECT ok wl verify "$M" "$S"
    # R down: reads decode; R+1 down: EIO or ENOTCONN
    for ((i = 0; i < r; i++)); do TEST kill_brick "$name-b$i"; done
    EXPECT ok wl verify "$M" "$S"
    TEST kill_brick "$name-b$r"
    local got
    got=$(wl read-fails "$M" f0)
    echo "# $name: with $((r + 1)) bricks down a read fails $got"
    TEST eval '[ "$got" = EIO ] || [ "$got" = ENOTCONN ]'
    for ((i = 0; i <= r; i++)); do TEST start_brick "$name-b$i"; done
    EXPECT_WITHIN "$HEAL_TIMEOUT" ok heal_converged "$M" "$S" "$k" "$chunk" "${dirs[@]}"
    EXPECT ok wl verify "$M" "$S"
    # two clients, one file, every stripe written by both
    local M2=$T/mnt2-$name
    TEST mount_brickfs "$vf" "$M2" -o entry-timeout=0,attr-timeout=0
    TEST touch "$M/shared"
    wl pieces "$M" shared 0 12 1000 >"$T/p0.out" 2>&1 &
    local p0=$!
    wl pieces "$M2" shared 1 12 1000 >"$T/p1.out" 2>&1 &
    local p1=$!
    TEST wait "$p0"
    TEST wait "$p1"
    EXPECT ok wl pieces-check "$M" shared 12 1000
    EXPECT ok wl pieces-check "$M2" shared 12 1000
    TEST umount_brickfs "$M2"
    TEST umount_brickfs "$M"
}

layout 4 1
layout 8 2

done_testing
