#!/usr/bin/env bash
#
# scripts/demo.sh start|stop|status — a one-brick brickfs volume in ./demo,
# started by hand until the management daemon (brickfsd) can do it:
#
#   demo/bricks/b1     the brick's folder (plain files: look inside)
#   demo/mnt           the FUSE mount of the volume
#   demo/logs          brick and client logs
#   demo/vol           brick and client volfiles
#   demo/run           pid files and the brick's port
#
# start: writes the volfiles (once; the port is kept), starts brickfs-brick
# on a free 127.0.0.1 port, mounts demo/mnt with brickfs-mount, writes a few
# files through the mount and lists them. It builds nothing (`make demo`
# does). Running it again while the demo runs changes nothing.
# stop: unmounts demo/mnt and stops, by pid, the processes start started
# (checked against their command line). The brick's data stays in
# demo/bricks; `rm -rf demo` after stop removes everything.
#
# BUILD (default build) is the build folder whose bin/ is used.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
BRICK_BIN=$BUILD/bin/brickfs-brick
MOUNT_BIN=$BUILD/bin/brickfs-mount
DEMO=$ROOT/demo
MNT=$DEMO/mnt
RUN=$DEMO/run
UP_TIMEOUT=20

# shellcheck source=tests/lib/volfile.sh
source "$ROOT/tests/lib/volfile.sh"

say()
{
    echo "demo: $*"
}

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

# running NAME BIN: the pid in run/NAME.pid is alive and runs BIN: BIN is
# its argv[0] (or argv[1], for a script run through its interpreter). The
# command line, not /proc/PID/exe, so a rebuilt BIN still matches.
running()
{
    local pid args
    pid=$(cat "$RUN/$1.pid" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
    mapfile -d '' -t args <"/proc/$pid/cmdline" || return 1
    [ "${args[0]:-}" = "$2" ] || [ "${args[1]:-}" = "$2" ]
}

# spawn NAME LOG CMD...: in its own session, so it outlives this script and
# the terminal; the pid goes to run/NAME.pid.
spawn()
{
    local name=$1 log=$2
    shift 2
    setsid "$@" </dev/null >>"$log" 2>&1 &
    echo $! >"$RUN/$name.pid"
}

tail_log()
{
    [ -s "$1" ] && { echo "--- last lines of $1:"; tail -n 20 "$1"; } >&2
    return 0
}

start()
{
    for b in "$BRICK_BIN" "$MOUNT_BIN"; do
        [ -x "$b" ] || die "$b is not built yet. Run 'make' first (brickfs is early: the brick and mount programs may not exist yet)."
    done
    command -v fusermount3 >/dev/null || die "fusermount3 is missing: install fuse3 (scripts/install-deps.sh)"
    [ -c /dev/fuse ] || die "/dev/fuse is missing: try 'modprobe fuse'"
    mkdir -p "$DEMO/bricks/b1" "$MNT" "$DEMO/logs" "$DEMO/vol" "$RUN"

    local port
    if [ -s "$RUN/b1.port" ] && [ -s "$DEMO/vol/b1.vol" ] && [ -s "$DEMO/vol/client.vol" ]; then
        port=$(cat "$RUN/b1.port")
    else
        port=$(bfs_free_port) || die "no free port on 127.0.0.1"
        bfs_write_brick_volfile "$DEMO/vol/b1.vol" b1 "$DEMO/bricks/b1" "$port"
        bfs_write_client_volfile "$DEMO/vol/client.vol" demo b1 "$port"
        echo "$port" >"$RUN/b1.port"
    fi

    if running brick "$BRICK_BIN"; then
        say "brick b1 already running (pid $(cat "$RUN/brick.pid"), port $port)"
    else
        bfs_port_listening "$port" && die "port $port is taken by another program; remove $RUN/b1.port and $DEMO/vol to pick a new one"
        spawn brick "$DEMO/logs/b1.out" "$BRICK_BIN" -f --volfile "$DEMO/vol/b1.vol" \
            --log-file "$DEMO/logs/b1.log"
        if ! wait_for "$UP_TIMEOUT" bfs_port_listening "$port" || ! running brick "$BRICK_BIN"; then
            tail_log "$DEMO/logs/b1.log"
            tail_log "$DEMO/logs/b1.out"
            die "brick b1 did not come up on port $port"
        fi
        say "brick b1 up (pid $(cat "$RUN/brick.pid"), 127.0.0.1:$port, data in demo/bricks/b1)"
    fi

    if is_mounted; then
        say "demo/mnt already mounted"
    else
        spawn mount "$DEMO/logs/mount.out" "$MOUNT_BIN" -f -o "log-file=$DEMO/logs/mount.log" \
            --volfile "$DEMO/vol/client.vol" "$MNT"
        if ! wait_for "$UP_TIMEOUT" mountpoint -q "$MNT"; then
            tail_log "$DEMO/logs/mount.log"
            tail_log "$DEMO/logs/mount.out"
            die "demo/mnt did not get mounted"
        fi
        say "mounted at demo/mnt (pid $(cat "$RUN/mount.pid"))"
    fi

    mkdir -p "$MNT/hello"
    echo "hello from brickfs, $(date)" >"$MNT/hello/greeting.txt"
    seq 1 1000 >"$MNT/hello/numbers.txt"
    cp "$DEMO/vol/client.vol" "$MNT/hello/client.vol"
    say "wrote a few files through the mount:"
    ls -l "$MNT/hello"
    say "and here they are on the brick, as plain files:"
    ls -l "$DEMO/bricks/b1/hello" || true
    cat <<EOF

Try: ls demo/mnt; cat demo/mnt/hello/greeting.txt
Logs: demo/logs. Mount it again elsewhere by hand:
  $MOUNT_BIN --volfile $DEMO/vol/client.vol /some/dir
Stop: make demo-stop   (or bash scripts/demo.sh stop)
EOF
}

# stop_pid NAME BIN: TERM, then KILL after UP_TIMEOUT seconds.
stop_pid()
{
    local name=$1 bin=$2 pid
    if ! running "$name" "$bin"; then
        rm -f "$RUN/$name.pid"
        return 0
    fi
    pid=$(cat "$RUN/$name.pid")
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_for "$UP_TIMEOUT" eval "! running $name '$bin'"; then
        say "$name (pid $pid) ignored TERM, sending KILL"
        kill -KILL "$pid" 2>/dev/null || true
        wait_for 5 eval "! running $name '$bin'" || true
    fi
    say "stopped $name (pid $pid)"
    rm -f "$RUN/$name.pid"
}

stop()
{
    if is_mounted; then
        if wait_for 10 eval 'fusermount3 -u "$MNT" 2>/dev/null; ! is_mounted'; then
            say "unmounted demo/mnt"
        else
            say "demo/mnt is busy (a shell inside it?); unmounting lazily"
            fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
        fi
    fi
    stop_pid mount "$MOUNT_BIN"
    stop_pid brick "$BRICK_BIN"
    say "stopped; the brick's data stays in demo/bricks (rm -rf demo to remove it)"
}

status()
{
    if running brick "$BRICK_BIN"; then
        say "brick b1: running (pid $(cat "$RUN/brick.pid"), port $(cat "$RUN/b1.port"))"
    else
        say "brick b1: not running"
    fi
    if is_mounted; then say "demo/mnt: mounted"; else say "demo/mnt: not mounted"; fi
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
