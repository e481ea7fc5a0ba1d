#!/usr/bin/env bash
#
# scripts/demo.sh start|stop|status — a brickfs volume on this machine, the
# way an operator would run one, all under ./demo (or $DEMO_DIR):
#
#   demo/state, demo/log, demo/run   brickfsd's state, logs, pid and port files
#   demo/bricks/b1 b2 b3             the bricks (plain files: look inside)
#   demo/mnt                         the volume, mounted from brickfsd
#   demo/brickfsd.port               the 127.0.0.1 port brickfsd listens on
#
# start: starts brickfsd (on a free 127.0.0.1 port, kept for next time),
# creates the volume "demo" — the most protective type brickfsd implements:
# replicate 3, else distribute over 3 bricks, else one brick — starts it,
# mounts it at demo/mnt with brickfs-mount HOST:PORT:/demo, writes a few
# files and prints `volume status`. It builds nothing (`make demo` does).
# Running it again while the demo runs changes nothing; after a stop it
# starts everything again, data included.
#
# stop: unmounts demo/mnt, stops the volume (brickfsd stops the bricks),
# then brickfsd — each by pid, after checking its command line — and stops
# any brick or self-heal daemon still running without brickfsd. No process
# or mount is left.
# The data stays in demo/bricks; `rm -rf demo` after stop removes it all.
#
# Needs root: bricks mark their folders with trusted.* xattrs.
# BUILD (default build) is the build folder whose bin/ is used.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
BIN=$BUILD/bin
DEMO=${DEMO_DIR:-$ROOT/demo}
case $DEMO in /*) ;; *) DEMO=$PWD/$DEMO ;; esac
MNT=$DEMO/mnt
VOL=demo
# how messages name the folder: demo/... from the top of the tree, else in full
if [ "$DEMO" = "$ROOT/demo" ]; then D=demo; else D=$DEMO; fi
UP_TIMEOUT=20

# shellcheck source=tests/lib/volfile.sh
source "$ROOT/tests/lib/volfile.sh" # bfs_free_port, bfs_port_listening

say() { echo "demo: $*"; }
die()
{
    echo "demo: $*" >&2
    exit 1
}

# wait_for SECONDS CMD...: polls CMD until it succeeds.
wait_for()
{
    local secs=$1 i
    shift
    for ((i = 0; i < secs * 10; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}

is_mounted()
{
    awk -v d="$MNT" '$5 == d { f = 1 } END { exit !f }' /proc/self/mountinfo
}

# args_of PID: its command line, one argument a line.
args_of()
{
    { tr '\0' '\n' <"/proc/$1/cmdline"; } 2>/dev/null
}

# pid_runs PID BIN-BASENAME ARG: PID is alive, runs BIN-BASENAME, and has
# ARG among its arguments (our state folder, our mount point).
pid_runs()
{
    local pid=$1 base=$2 arg=$3 args
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
    args=$(args_of "$pid") || return 1
    [ "$(basename "$(head -n 1 <<<"$args")")" = "$base" ] && grep -qxF -- "$arg" <<<"$args"
}

brickfsd_pid()
{
    local pid
    pid=$(head -n 1 "$DEMO/state/brickfsd.lock" 2>/dev/null) || return 1
    pid_runs "$pid" brickfsd "$DEMO/state" && echo "$pid"
}

# The brickfs-mount serving demo/mnt (a daemon: found by its command line).
mount_pid()
{
    local d
    for d in /proc/[0-9]*; do
        pid_runs "${d#/proc/}" brickfs-mount "$MNT" && { echo "${d#/proc/}"; return 0; }
    done
    return 1
}

# Bricks brickfsd started for the demo, from their pid files.
brick_pids()
{
    local f pid
    for f in "$DEMO"/run/bricks/*.pid; do
        [ -e "$f" ] || continue
        pid=$(cat "$f" 2>/dev/null) || continue
        pid_runs "$pid" brickfs-brick "$DEMO/state/volfiles/$VOL/$(basename "$f" .pid).vol" &&
            echo "$pid"
    done
    return 0
}

# The volume's self-heal daemon (replicated volumes), from its pid file.
shd_pids()
{
    local pid
    pid=$(cat "$DEMO/run/shd/$VOL.pid" 2>/dev/null) || return 0
    pid_runs "$pid" brickfs-shd "$DEMO/state/volfiles/$VOL/shd.vol" && echo "$pid"
    return 0
}

cli()
{
    "$BIN/brickfs" --server "127.0.0.1:$PORT" "$@"
}

vol_status()
{
    cli --json volume info "$VOL" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["status"])'
}

tail_log()
{
    [ -s "$1" ] && { echo "--- last lines of $1:"; tail -n 20 "$1"; } >&2
    return 0
}

start_brickfsd()
{
    if brickfsd_pid >/dev/null; then
        say "brickfsd already running (pid $(brickfsd_pid), 127.0.0.1:$PORT)"
        return 0
    fi
    if ! [ -s "$DEMO/brickfsd.port" ] || bfs_port_listening "$(cat "$DEMO/brickfsd.port")"; then
        bfs_free_port >"$DEMO/brickfsd.port" || die "no free port on 127.0.0.1"
    fi
    PORT=$(cat "$DEMO/brickfsd.port")
    # brickfsd goes to the background once it listens, or says why it cannot
    if ! "$BIN/brickfsd" --state-dir "$DEMO/state" --log-dir "$DEMO/log" --run-dir "$DEMO/run" \
        --listen "127.0.0.1:$PORT"; then
        tail_log "$DEMO/log/brickfsd.log"
        die "brickfsd did not start"
    fi
    say "brickfsd started (pid $(brickfsd_pid), 127.0.0.1:$PORT, state in $D/state)"
}

# Creates volume demo: replicate, else distribute, else one brick — the
# first type this brickfsd implements. `force`: demo bricks usually live
# on the root file system, which a real volume should not use.
create_volume()
{
    if cli volume info "$VOL" >/dev/null 2>&1; then
        say "volume $VOL exists"
        return 0
    fi
    local b=() out
    for i in 1 2 3; do b+=("127.0.0.1:$DEMO/bricks/b$i"); done
    local tries=("replica 3 ${b[*]}" "${b[*]}" "${b[0]}")
    for t in "${tries[@]}"; do
        # shellcheck disable=SC2086
        if out=$(cli volume create "$VOL" $t force 2>&1); then
            say "created volume $VOL: $(cli --json volume info "$VOL" | python3 -c '
import json, sys
v = json.load(sys.stdin)
print("%s over %d brick%s" % (v["type"], len(v["bricks"]), "s" * (len(v["bricks"]) > 1)))')"
            return 0
        fi
        grep -q "not implemented" <<<"$out" || die "cannot create volume $VOL: $out"
        say "(${out#brickfs: volume create: }; trying a simpler volume)"
    done
    die "cannot create volume $VOL: $out"
}

start_volume()
{
    local status
    status=$(vol_status)
    if [ "$status" = started ]; then
        cli volume start "$VOL" force >/dev/null # bricks that are down, if any
        say "volume $VOL already started"
    else
        cli volume start "$VOL" >/dev/null || die "cannot start volume $VOL (logs in $D/log)"
        say "volume $VOL started"
    fi
}

mount_volume()
{
    if is_mounted; then
        say "$D/mnt already mounted (brickfs-mount pid $(mount_pid || echo ?))"
        return 0
    fi
    # brickfs-mount goes to the background once the mount is up
    if ! "$BIN/brickfs-mount" -o "log-file=$DEMO/log/mnt.log" "127.0.0.1:$PORT:/$VOL" "$MNT"; then
        tail_log "$DEMO/log/mnt.log"
        die "$D/mnt did not get mounted"
    fi
    say "mounted 127.0.0.1:$PORT:/$VOL at $D/mnt (brickfs-mount pid $(mount_pid || echo ?))"
}

start()
{
    for b in brickfsd brickfs brickfs-brick brickfs-mount; do
        [ -x "$BIN/$b" ] || die "$BIN/$b is not built yet: run 'make demo' (or 'make' first)"
    done
    [ "$(id -u)" = 0 ] ||
        die "the demo needs root (bricks mark their folders with trusted.* xattrs): sudo make demo"
    command -v fusermount3 >/dev/null || die "fusermount3 is missing: install fuse3 (scripts/install-deps.sh)"
    [ -c /dev/fuse ] || die "/dev/fuse is missing: try 'modprobe fuse'"
    mkdir -p "$DEMO/state" "$DEMO/log" "$DEMO/run" "$DEMO/bricks" "$MNT"
    PORT=$(cat "$DEMO/brickfsd.port" 2>/dev/null || true)
    start_brickfsd
    create_volume
    start_volume
    mount_volume

    mkdir -p "$MNT/hello"
    echo "hello from brickfs, $(date)" >"$MNT/hello/greeting.txt"
    seq 1 1000 >"$MNT/hello/numbers.txt"
    for i in 1 2 3 4 5 6; do echo "file $i" >"$MNT/hello/file$i.txt"; done
    say "wrote a few files through the mount:"
    ls -l "$MNT/hello"
    say "where they are on the bricks (plain files):"
    (cd "$DEMO" && find bricks -path '*/.brickfs' -prune -o -type f -print | sort)
    echo
    cli volume status "$VOL"
    cat <<EOF

Try:   ls $D/mnt; cat $D/mnt/hello/greeting.txt
       $BIN/brickfs --server 127.0.0.1:$PORT volume info $VOL
       $BIN/brickfs --server 127.0.0.1:$PORT volume set $VOL network.ping-timeout 20
         (the mount switches to the new graph live:
          getfattr -n brickfs.graph --only-values $D/mnt)
Logs:  $D/log (brickfsd.log, bricks/, mnt.log)
Stop:  make demo-stop$([ "$D" = demo ] || echo " DEMO_DIR=$D")   (or bash scripts/demo.sh stop)
EOF
}

# stop_pid PID WHAT: TERM, KILL after UP_TIMEOUT seconds; PID was checked.
stop_pid()
{
    local pid=$1 what=$2
    kill -TERM "$pid" 2>/dev/null || return 0
    if ! wait_for "$UP_TIMEOUT" eval "! [ -d /proc/$pid ] || grep -q '^State:.*Z' /proc/$pid/status"; then
        say "$what (pid $pid) ignored TERM, sending KILL"
        kill -KILL "$pid" 2>/dev/null || true
        wait_for 5 eval "! [ -d /proc/$pid ]" || true
    fi
    say "stopped $what (pid $pid)"
}

stop()
{
    local pid
    PORT=$(cat "$DEMO/brickfsd.port" 2>/dev/null || true)
    if is_mounted; then
        pid=$(mount_pid || true)
        if wait_for 10 eval 'fusermount3 -u "$MNT" 2>/dev/null || umount "$MNT" 2>/dev/null; ! is_mounted'; then
            say "unmounted $D/mnt"
        else
            say "$D/mnt is busy (a shell inside it?); unmounting lazily"
            fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
        fi
        # the mount process ends with its mount
        if [ -n "$pid" ] && ! wait_for "$UP_TIMEOUT" eval "! pid_runs $pid brickfs-mount '$MNT'"; then
            stop_pid "$pid" brickfs-mount
        fi
    fi
    pid=$(mount_pid || true)
    [ -n "$pid" ] && stop_pid "$pid" "brickfs-mount"
    if pid=$(brickfsd_pid); then
        if [ "$(vol_status 2>/dev/null)" = started ]; then
            cli --yes volume stop "$VOL" >/dev/null && say "volume $VOL stopped (its bricks too)"
        fi
        stop_pid "$pid" brickfsd
    fi
    # a self-heal daemon and bricks left running without brickfsd (it was killed, say)
    for pid in $(shd_pids); do stop_pid "$pid" "self-heal daemon"; done
    for pid in $(brick_pids); do stop_pid "$pid" "brick"; done
    say "stopped; the data stays in $D/bricks (rm -rf $D to remove it)"
}

status()
{
    PORT=$(cat "$DEMO/brickfsd.port" 2>/dev/null || true)
    if brickfsd_pid >/dev/null; then
        say "brickfsd: running (pid $(brickfsd_pid), 127.0.0.1:$PORT)"
        cli volume status "$VOL" || true
    else
        say "brickfsd: not running"
    fi
    if is_mounted; then say "$D/mnt: mounted"; else say "$D/mnt: not mounted"; fi
}

case ${1:-} in
start) start ;;
stop) stop ;;
status) status ;;
*)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
