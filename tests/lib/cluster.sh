# tests/lib/cluster.sh — a hermetic scratch folder and the processes of a
# test cluster: bricks, FUSE mounts, and anything else a test starts.
#
# Sourced by tests/lib/test.sh (integration tests) and bench/run.sh.
# Sourcing it:
#   - creates $T, a fresh folder (mktemp -d under $BFS_TMPDIR, else $TMPDIR,
#     else /tmp) with $T/logs for every log and $T/.run for bookkeeping;
#   - traps EXIT, INT, TERM and HUP to tear everything down: unmount every
#     mount made through mount_fuse/mount_brickfs (fusermount3 -u, lazily as
#     a last resort), stop every process started through bfs_spawn (TERM,
#     then KILL) — by pid, after checking that the pid still names the
#     process we started (same start time), never by name — and remove $T
#     (one file system only, so a mount that refused to go cannot make rm
#     walk into it).
#
# Bookkeeping lives in files under $T/.run, not in shell variables, so that
# a helper run in a subshell (EXPECT's $(...)) still registers what it
# starts and the EXIT trap of the main shell still finds it.
#
# Environment: BFS_BUILD (build folder, default <repo>/build), BFS_SAN=1
# (sanitizer build: timeouts x3, reports collected in $T/san),
# BFS_TIMEOUT_SCALE (overrides the x3), BFS_KEEP_TMP=1 (keep $T for a
# post-mortem), BFS_LOG_LEVEL (passed to bricks and mounts).

BFS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=tests/lib/volfile.sh
source "$BFS_ROOT/tests/lib/volfile.sh"

BFS_BUILD=${BFS_BUILD:-build}
case $BFS_BUILD in /*) ;; *) BFS_BUILD=$BFS_ROOT/$BFS_BUILD ;; esac
BFS_BIN=$BFS_BUILD/bin
BRICK_BIN=${BRICK_BIN:-$BFS_BIN/brickfs-brick}
MOUNT_BIN=${MOUNT_BIN:-$BFS_BIN/brickfs-mount}

# ---- named timeouts (seconds): wait for a condition, never sleep a guess ----
if [ -z "${BFS_TIMEOUT_SCALE:-}" ]; then
    if [ "${BFS_SAN:-0}" = 1 ]; then BFS_TIMEOUT_SCALE=3; else BFS_TIMEOUT_SCALE=1; fi
fi
PROCESS_UP_TIMEOUT=$((20 * BFS_TIMEOUT_SCALE))    # a brick listens / a daemon is up
PROCESS_DOWN_TIMEOUT=$((20 * BFS_TIMEOUT_SCALE))  # a process exits after TERM
MOUNT_TIMEOUT=$((20 * BFS_TIMEOUT_SCALE))         # mountpoint -q says mounted
UMOUNT_TIMEOUT=$((20 * BFS_TIMEOUT_SCALE))        # fusermount3 -u has taken effect
CHILD_UP_TIMEOUT=$((20 * BFS_TIMEOUT_SCALE))      # a client reconnects to a restarted brick
NETWORK_PING_TIMEOUT=5                            # what tests set as network.ping-timeout
PING_TIMEOUT=$(((NETWORK_PING_TIMEOUT * 2 + 5) * BFS_TIMEOUT_SCALE))  # a client sees a silent brick as down
HEAL_TIMEOUT=$((60 * BFS_TIMEOUT_SCALE))          # self-heal converges
REBALANCE_TIMEOUT=$((120 * BFS_TIMEOUT_SCALE))    # a rebalance finishes

# ---- scratch folder and traps ----
bfs__tmpbase=${BFS_TMPDIR:-${TMPDIR:-/tmp}}
mkdir -p "$bfs__tmpbase" || exit 1
T=$(mktemp -d "$bfs__tmpbase/bfs.XXXXXX") || { echo "cluster.sh: mktemp failed" >&2; exit 1; }
# Other users (as_user) must be able to reach mount points under $T.
chmod 755 "$T"
mkdir -p "$T/logs" "$T/.run/bricks" "$T/vol"
: >"$T/.run/pids"
: >"$T/.run/mounts"
: >"$T/.run/ports"
BFS_MAIN_PID=$BASHPID

# Sanitizer builds: the first error ends the program, leaks are checked at
# exit, and every report goes to $T/san/KIND.PROGRAM.PID (the daemons'
# stderr is seen by no one), where done_testing looks. The caller's options
# come before ours except log_path, which must be ours. ASan and LSan share
# one log_path in the end (LSAN_OPTIONS is read last): $T/san either way.
if [ "${BFS_SAN:-0}" = 1 ]; then
    mkdir -p "$T/san"
    export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:log_exe_name=1:${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$T/san/asan"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$T/san/ubsan"
    export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}log_path=$T/san/lsan"
fi

# ---- time and polling ----

bfs_now_us()
{
    echo "${EPOCHREALTIME/./}"
}

# bfs_wait_until SECONDS CMD...: runs CMD (output discarded) until it
# succeeds or SECONDS have passed; polls quickly at first, then every 0.5 s.
bfs_wait_until()
{
    local secs=$1
    shift
    local deadline=$(($(bfs_now_us) + secs * 1000000)) delay=0.05
    while :; do
        "$@" >/dev/null 2>&1 && return 0
        [ "$(bfs_now_us)" -ge "$deadline" ] && return 1
        sleep "$delay"
        case $delay in 0.05) delay=0.1 ;; 0.1) delay=0.2 ;; *) delay=0.5 ;; esac
    done
}

# ---- processes: started here, tracked by pid and start time ----

# bfs_proc_start PID: prints the start time of PID (clock ticks since boot).
bfs_proc_start()
{
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }           # the command name may hold spaces and ')'
    set -- $stat
    echo "${20}"
}

# bfs_pid_alive PID: PID exists and is not a zombie (a zombie leader with
# threads still running counts as alive: it still holds its files).
bfs_pid_alive()
{
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    case ${stat%% *} in
    Z | X)
        # A zombie leader whose other threads still run (a multithreaded
        # process killed a moment ago) keeps its files and locks until its
        # last thread has exited: not gone yet.
        local tasks=(/proc/"$1"/task/*)
        [ "${#tasks[@]}" -gt 1 ] && [ -e "${tasks[1]}" ] && return 0
        return 1
        ;;
    esac
    return 0
}

# bfs_owned PID: PID is alive and is a process this test started.
bfs_owned()
{
    local pid=$1 start
    start=$(bfs_proc_start "$pid") || return 1
    bfs_pid_alive "$pid" || return 1
    awk -v p="$pid" -v s="$start" '$1 == p && $2 == s { f = 1 } END { exit !f }' "$T/.run/pids"
}

# bfs_spawn NAME CMD...: starts CMD in the background (stdin /dev/null,
# stdout and stderr appended to $T/logs/NAME.out), registers it and sets
# BFS_PID. The pid is also kept in $T/.run/pid.NAME (see bfs_pid_of).
bfs_spawn()
{
    local name=$1
    shift
    "$@" </dev/null >>"$T/logs/$name.out" 2>&1 &
    BFS_PID=$!
    # The shell still reaps it; it just does not print "Killed" about it.
    disown "$BFS_PID" 2>/dev/null
    local start
    start=$(bfs_proc_start "$BFS_PID") || start=gone
    echo "$BFS_PID $start $name" >>"$T/.run/pids"
    echo "$BFS_PID" >"$T/.run/pid.$name"
    return 0
}

bfs_pid_of()
{
    cat "$T/.run/pid.$1" 2>/dev/null
}

# bfs_wait_gone PID SECONDS
bfs_wait_gone()
{
    bfs_wait_until "$2" eval "! bfs_pid_alive $1"
}

# bfs_kill PID [SIGNAL]: signals PID only if this test started it.
bfs_kill()
{
    local pid=$1 sig=${2:-TERM}
    if ! bfs_owned "$pid"; then
        bfs_pid_alive "$pid" && echo "bfs_kill: $pid is not a process this test started" >&2
        return 1
    fi
    kill -s "$sig" "$pid" 2>/dev/null
}

# bfs_stop PID [SECONDS]: TERM, and KILL if it is still there after SECONDS.
bfs_stop()
{
    local pid=$1 secs=${2:-$PROCESS_DOWN_TIMEOUT}
    bfs_kill "$pid" TERM || return 0
    bfs_wait_gone "$pid" "$secs" && return 0
    echo "bfs_stop: $pid ignored TERM for ${secs}s, sending KILL" >&2
    bfs_kill "$pid" KILL
    bfs_wait_gone "$pid" 5
}

# ---- ports ----

# free_port: a free 127.0.0.1 port, different from every port this test
# already picked.
free_port()
{
    local p
    # shellcheck disable=SC2046
    p=$(bfs_free_port $(cat "$T/.run/ports")) || return 1
    echo "$p" >>"$T/.run/ports"
    echo "$p"
}

# ---- bricks ----

bfs__brick()
{
    cat "$T/.run/bricks/$1/$2" 2>/dev/null
}
brick_dir() { bfs__brick "$1" dir; }
brick_port() { bfs__brick "$1" port; }
brick_volfile() { bfs__brick "$1" volfile; }
client_volfile() { bfs__brick "$1" client; }
brick_log() { bfs__brick "$1" log; }
brick_pid() { bfs_pid_of "brick-$1"; }

# write_volfiles NAME DIR [PORT|auto] [KEY=VALUE...]: brick NAME over folder
# DIR (created) on PORT (a fresh free port when omitted or "auto"); writes
# $T/vol/NAME.brick.vol and the client volfile of a one-brick volume named
# NAME, $T/vol/NAME.client.vol, with KEY=VALUE as extra protocol/client
# options. The paths are then given by brick_volfile / client_volfile NAME.
write_volfiles()
{
    local name=$1 dir=$2 port=${3:-auto}
    [ $# -ge 3 ] && shift 3 || shift $#
    [ "$port" = auto ] && { port=$(free_port) || return 1; }
    case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
    mkdir -p "$dir" "$T/.run/bricks/$name" || return 1
    local b=$T/.run/bricks/$name
    bfs_write_brick_volfile "$T/vol/$name.brick.vol" "$name" "$dir" "$port" || return 1
    bfs_write_client_volfile "$T/vol/$name.client.vol" "$name" "$name" "$port" "$@" || return 1
    echo "$dir" >"$b/dir"
    echo "$port" >"$b/port"
    echo "$T/vol/$name.brick.vol" >"$b/volfile"
    echo "$T/vol/$name.client.vol" >"$b/client"
    echo "$T/logs/brick-$name.log" >"$b/log"
}

bfs__tail_log()
{
    local f
    for f in "$@"; do
        [ -s "$f" ] || continue
        echo "--- last lines of $f:"
        tail -n 20 "$f"
    done >&2
}

# start_brick NAME: runs brickfs-brick in the foreground of a background job
# (so its pid is ours to signal) and waits until its port accepts.
start_brick()
{
    local name=$1 vf port log
    vf=$(brick_volfile "$name")
    [ -n "$vf" ] || { echo "start_brick: no volfile for $name (write_volfiles first)" >&2; return 1; }
    [ -x "$BRICK_BIN" ] || { echo "start_brick: $BRICK_BIN is not built" >&2; return 1; }
    port=$(brick_port "$name")
    log=$(brick_log "$name")
    if bfs_port_listening "$port"; then
        echo "start_brick: port $port of $name is already taken" >&2
        return 1
    fi
    local args=(-f --volfile "$vf" --log-file "$log")
    [ -n "${BFS_LOG_LEVEL:-}" ] && args+=(--log-level "$BFS_LOG_LEVEL")
    bfs_spawn "brick-$name" "$BRICK_BIN" "${args[@]}"
    local pid=$BFS_PID
    if ! bfs_wait_until "$PROCESS_UP_TIMEOUT" eval "bfs_port_listening $port || ! bfs_pid_alive $pid"; then
        echo "start_brick: $name (pid $pid) not listening on $port after ${PROCESS_UP_TIMEOUT}s" >&2
        bfs__tail_log "$log" "$T/logs/brick-$name.out"
        return 1
    fi
    if ! bfs_pid_alive "$pid"; then
        echo "start_brick: $name (pid $pid) exited during start" >&2
        bfs__tail_log "$log" "$T/logs/brick-$name.out"
        return 1
    fi
}

# stop_brick NAME: a clean stop (TERM).
stop_brick()
{
    local pid
    pid=$(brick_pid "$1") || return 1
    bfs_stop "$pid"
}

# kill_brick NAME: SIGKILL, as a crash; returns when the process is gone.
kill_brick()
{
    local pid
    pid=$(brick_pid "$1") || return 1
    bfs_kill "$pid" KILL || return 1
    bfs_wait_gone "$pid" "$PROCESS_DOWN_TIMEOUT"
}

# restart_brick NAME: kills it if it runs, then starts it on the same port.
restart_brick()
{
    local pid
    pid=$(brick_pid "$1")
    if [ -n "$pid" ] && bfs_owned "$pid"; then
        kill_brick "$1" || return 1
    fi
    start_brick "$1"
}

# brick_up NAME: prints 1 when the brick process runs and its port listens.
brick_up()
{
    local pid
    pid=$(brick_pid "$1")
    if [ -n "$pid" ] && bfs_pid_alive "$pid" && bfs_port_listening "$(brick_port "$1")"; then
        echo 1
    else
        echo 0
    fi
}

# ---- mounts ----

bfs__abspath()
{
    case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac
}

# bfs_is_mounted DIR: DIR is a mount point. Reads mountinfo rather than
# stat()ing DIR, which would fail (or block) on a dead FUSE mount.
bfs_is_mounted()
{
    local d
    d=$(bfs__abspath "$1")
    d=${d%/}
    awk -v d="$d" '$5 == d { f = 1 } END { exit !f }' /proc/self/mountinfo
}

# mount_fuse NAME DIR CMD...: runs CMD, a FUSE program that stays in the
# foreground and mounts at DIR, and waits until DIR is mounted. The mount is
# undone by umount_fuse DIR or at exit.
mount_fuse()
{
    local name=$1 mnt
    mnt=$(bfs__abspath "$2")
    shift 2
    mkdir -p "$mnt" || return 1
    if bfs_is_mounted "$mnt"; then
        echo "mount_fuse: $mnt is already a mount point" >&2
        return 1
    fi
    bfs_spawn "$name" "$@"
    local pid=$BFS_PID
    echo "$mnt $pid" >>"$T/.run/mounts"
    bfs_wait_until "$MOUNT_TIMEOUT" eval "mountpoint -q '$mnt' || ! bfs_pid_alive $pid"
    if ! mountpoint -q "$mnt"; then
        echo "mount_fuse: $mnt not mounted after ${MOUNT_TIMEOUT}s (pid $pid $(bfs_pid_alive "$pid" && echo running || echo exited))" >&2
        bfs__tail_log "$T/logs/$name.out" "$T/logs/$name.log"
        return 1
    fi
}

# mount_brickfs VOLFILE DIR [-o OPT,...]: brickfs-mount -f in the background,
# logging to $T/logs/mount-<basename DIR>.log unless -o log-file= is given.
mount_brickfs()
{
    local vf=$1 mnt=$2 opts=
    shift 2
    while [ $# -gt 0 ]; do
        case $1 in
        -o) opts=${opts:+$opts,}$2; shift 2 ;;
        -o*) opts=${opts:+$opts,}${1#-o}; shift ;;
        *) echo "mount_brickfs: unexpected argument '$1'" >&2; return 1 ;;
        esac
    done
    [ -x "$MOUNT_BIN" ] || { echo "mount_brickfs: $MOUNT_BIN is not built" >&2; return 1; }
    local name="mount-$(basename "$mnt")"
    case ",$opts," in *,log-file=*) ;; *) opts=${opts:+$opts,}log-file=$T/logs/$name.log ;; esac
    [ -n "${BFS_LOG_LEVEL:-}" ] && case ",$opts," in *,log-level=*) ;; *) opts=$opts,log-level=$BFS_LOG_LEVEL ;; esac
    mount_fuse "$name" "$mnt" "$MOUNT_BIN" -f -o "$opts" --volfile "$vf" "$mnt"
}

bfs__forget_mount()
{
    local mnt=$1
    awk -v d="$mnt" '$1 != d' "$T/.run/mounts" >"$T/.run/mounts.new" && mv "$T/.run/mounts.new" "$T/.run/mounts"
}

# umount_fuse DIR (alias umount_brickfs): fusermount3 -u, retried while the
# mount is busy; lazily as a last resort (then returns 1). Waits for the FUSE
# process of a mount made here to exit, stopping it if it does not.
umount_fuse()
{
    local mnt rc=0 pid
    mnt=$(bfs__abspath "$1")
    mnt=${mnt%/}
    pid=$(awk -v d="$mnt" '$1 == d { p = $2 } END { print p }' "$T/.run/mounts")
    if bfs_is_mounted "$mnt"; then
        if ! bfs_wait_until "$UMOUNT_TIMEOUT" eval "fusermount3 -u '$mnt' 2>/dev/null; ! bfs_is_mounted '$mnt'"; then
            echo "umount_fuse: $mnt still busy after ${UMOUNT_TIMEOUT}s, unmounting lazily" >&2
            fusermount3 -u -z "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
            rc=1
        fi
    fi
    if [ -n "$pid" ] && bfs_owned "$pid"; then
        bfs_wait_gone "$pid" "$PROCESS_DOWN_TIMEOUT" || bfs_stop "$pid" 5
    fi
    bfs__forget_mount "$mnt"
    ! bfs_is_mounted "$mnt" && return $rc
    return 1
}
umount_brickfs() { umount_fuse "$@"; }

# ---- other users ----

# as_user UID GID CMD...: runs CMD with real and effective uid/gid UID/GID
# and no supplementary groups (needs root).
as_user()
{
    local uid=$1 gid=$2
    shift 2
    setpriv --reuid="$uid" --regid="$gid" --clear-groups "$@"
}

# ---- sanitizer reports ----

# bfs_san_reports: prints every sanitizer report written so far (BFS_SAN=1)
# and fails if there is one.
bfs_san_reports()
{
    [ -d "$T/san" ] || return 0
    local f found=1
    for f in "$T"/san/*; do
        [ -s "$f" ] || continue
        found=0
        echo "=== $f"
        head -n 60 "$f"
    done
    return $((!found))
}

# ---- teardown ----

# bfs_teardown: unmounts every mount made here, then stops every process
# started here, newest first. Safe to call more than once.
bfs_teardown()
{
    local mnt pid start name
    while read -r mnt pid; do
        [ -n "$mnt" ] && umount_fuse "$mnt" >&2
    done < <(tac "$T/.run/mounts" 2>/dev/null)
    while read -r pid start name; do
        [ -n "$pid" ] || continue
        if bfs_owned "$pid"; then
            bfs_stop "$pid" 10 >&2
        fi
    done < <(tac "$T/.run/pids" 2>/dev/null)
}

bfs__remove_tmp()
{
    [ -d "$T" ] || return 0
    if [ "${BFS_KEEP_TMP:-0}" = 1 ]; then
        echo "# kept $T (BFS_KEEP_TMP=1)" >&2
        return 0
    fi
    if awk -v t="$T/" 'index($5 "/", t) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
        echo "# not removing $T: something is still mounted under it" >&2
        return 1
    fi
    rm -rf --one-file-system "$T"
}

bfs__on_exit()
{
    local rc=$?
    [ "$BASHPID" = "$BFS_MAIN_PID" ] || return "$rc"
    declare -F bfs_exit_hook >/dev/null && bfs_exit_hook "$rc"
    bfs_teardown
    bfs__remove_tmp
    return "$rc"
}

bfs__on_signal()
{
    [ "$BASHPID" = "$BFS_MAIN_PID" ] || exit "$1"
    echo "# caught signal, cleaning up" >&2
    trap - EXIT
    bfs_teardown
    bfs__remove_tmp
    exit "$1"
}

trap bfs__on_exit EXIT
trap 'bfs__on_signal 129' HUP
trap 'bfs__on_signal 130' INT
trap 'bfs__on_signal 143' TERM
