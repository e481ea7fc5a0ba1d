#!/usr/bin/env bash
#
# 030-fault-brick-kill.t — a one-brick volume over TCP loses its brick in
# the middle of a write load, twice, and the FUSE mount lives through it:
#
#   1. kill -9: the brick's sockets close at once; the writer's calls fail
#      (ENOTCONN; EIO would be accepted and shows in the summary), none of
#      them blocks longer than the ping timeout; everything fsynced before
#      the kill is in the brick folder while the brick is dead, and on the
#      mount once it is back; the brick restarts on the same port from the
#      same volfile and the same mount (no remount) carries on: new files
#      are created and the writer's open descriptor works again (re-opened
#      by the client, not by the writer).
#   2. SIGSTOP: the brick hangs with its connections open, so only the
#      client's pings can tell; the call in flight fails with ENOTCONN
#      within network.ping-timeout (+ one ping interval + a margin), every
#      later call fails at once, and after SIGCONT the client reconnects.
#
# The load is tests/lib/fault-writer.py: records written with pwrite into a
# row of files, an fsync every 4 records logged in $T/writer/fsynced, each
# call timed, every failed call retried until it succeeds. At the end every
# record it acknowledged is intact, on the mount and in the brick folder
# (this graph has no write-behind and the mount no write-back cache, so an
# acknowledged write has reached the brick's file system).
#
# Waits are conditions polled with EXPECT_WITHIN; the few numbers measured
# (time to the first error, to recovery, the slowest call) are printed as
# comments.
#
# tags: sanitizer

. "$(dirname "$0")/../lib/test.sh"

skip_unless_brickfs
for xl in protocol/client protocol/server storage/posix; do
    [ -f "$BFS_BUILD/lib/brickfs/xlators/$xl.so" ] || SKIP_ALL "$xl is not built"
done

PING=3   # network.ping-timeout of this volume, seconds
# The brick is declared down after PING s of silence, checked every PING/4:
# a call may wait PING * 5/4, plus a margin for a loaded (or sanitized) host.
MAX_CALL_MS=$((PING * 1250 + 2000 * BFS_TIMEOUT_SCALE))
FIRST_ERROR_TIMEOUT=$(((MAX_CALL_MS + 999) / 1000 + 2))

PYTHON=$(command -v python3)
WRITER=$BFS_ROOT/tests/lib/fault-writer.py
W=$T/writer
fw() { "$PYTHON" "$WRITER" "$@"; }

# w KEY: the writer's status value; w_ge KEY N: 1 when it is >= N, else 0
w() { fw get "$W" "$1"; }
w_ge()
{
    local v
    v=$(w "$1")
    [ -n "$v" ] && [ "$v" -ge "$2" ] && echo 1 || echo 0
}
fsynced_lines() { wc -l <"$W/fsynced"; }
ms_since() { echo $((($(bfs_now_us) - $1) / 1000)); }

# in_set WORDS ALLOWED...: WORDS non-empty and each one of ALLOWED
in_set()
{
    local words=$1 x
    shift
    [ -n "$words" ] || { echo "no errors recorded"; return 1; }
    for x in $words; do
        case " $* " in *" $x "*) ;; *) echo "unexpected $x (in: $words)"; return 1 ;; esac
    done
}

# timed_ops WANT-ERRNO OP PATH: runs one call through fuse-ops.py, prints
# "ERRNO ms"
timed_ops()
{
    local t0=$(bfs_now_us) out
    out=$("$PYTHON" "$BFS_ROOT/tests/lib/fuse-ops.py" try "$@")
    echo "$out $(ms_since "$t0")"
}

TEST write_volfiles b1 "$T/bricks/b1" auto network.ping-timeout=$PING
TEST start_brick b1
BRICK=$(brick_dir b1)
M=$T/mnt
TEST mount_brickfs "$(client_volfile b1)" "$M"
mpid=$(bfs_pid_of mount-mnt)
TEST mkdir "$M/w"
mkdir -p "$W"

bfs_spawn writer "$PYTHON" "$WRITER" run "$M/w" "$W"
wpid=$BFS_PID
EXPECT_WITHIN 30 1 w_ge fsyncs 25
EXPECT 0 w errors

# ---- 1. kill -9 ----
n_kill=$(fsynced_lines)         # these were fsynced before the kill
errors0=$(w errors)
t_kill=$(bfs_now_us)
TEST kill_brick b1
EXPECT_WITHIN "$FIRST_ERROR_TIMEOUT" 1 w_ge errors $((errors0 + 1))
echo "# kill -9: the writer's first error after $(ms_since "$t_kill") ms ($(w last_errno))"
# what the dead brick left on its disk
EXPECT ok fw verify-fsynced "$BRICK/w" "$W" "$n_kill"
# it keeps failing, without hanging, while the brick is away
EXPECT_WITHIN 20 1 w_ge errors $((errors0 + 25))
TEST bfs_pid_alive "$wpid"
read -r got ms <<<"$(timed_ops create "$M/while-dead")"
TEST in_set "$got" ENOTCONN EIO
TEST [ "$ms" -le "$MAX_CALL_MS" ]

t_restart=$(bfs_now_us)
TEST start_brick b1             # same port, same volfile
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" ok "$PYTHON" "$BFS_ROOT/tests/lib/fuse-ops.py" try create "$M/after-kill"
echo "# kill -9: a new file created $(ms_since "$t_restart") ms after the restart"
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" 1 w_ge ok_since_error 200
t_back=$(bfs_now_us)
echo "# kill -9: the writer going again $(((t_back - t_restart) / 1000)) ms after the restart"
TEST bfs_pid_alive "$mpid"              # the same mount process, never remounted
TEST mountpoint -q "$M"
EXPECT 0 w reopens                      # its descriptor came back without the writer's help
EXPECT ok fw verify-fsynced "$M/w" "$W" "$n_kill"
errs=$(fw errnos "$W" "$t_kill" "$t_back")
echo "# kill -9: errors the writer saw: $errs"
TEST in_set "$errs" ENOTCONN EIO
slowest=$(fw max-ms "$W" "$t_kill" "$t_back")
echo "# kill -9: slowest call ${slowest} ms (limit $MAX_CALL_MS)"
TEST [ "$slowest" -le "$MAX_CALL_MS" ]

# ---- 2. SIGSTOP: a brick that hangs with its connections open ----
bpid=$(brick_pid b1)
n_stop=$(fsynced_lines)
errors0=$(w errors)
t_stop=$(bfs_now_us)
TEST bfs_kill "$bpid" STOP
EXPECT_WITHIN "$FIRST_ERROR_TIMEOUT" 1 w_ge errors $((errors0 + 1))
first=$(ms_since "$t_stop")
echo "# SIGSTOP: the writer's first error after $first ms ($(w last_errno))"
read -r got ms <<<"$(timed_ops create "$M/while-stopped")"
EXPECT ENOTCONN echo "$got"
TEST [ "$ms" -le "$MAX_CALL_MS" ]
EXPECT_WITHIN 20 1 w_ge errors $((errors0 + 25))
EXPECT ok fw verify-fsynced "$BRICK/w" "$W" "$n_stop"
t_cont=$(bfs_now_us)
TEST bfs_kill "$bpid" CONT
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" ok "$PYTHON" "$BFS_ROOT/tests/lib/fuse-ops.py" try create "$M/after-cont"
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" 1 w_ge ok_since_error 200
t_back=$(bfs_now_us)
echo "# SIGSTOP: the writer going again $(((t_back - t_cont) / 1000)) ms after SIGCONT"
errs=$(fw errnos "$W" "$t_stop" "$t_back")
echo "# SIGSTOP: errors the writer saw: $errs"
EXPECT ENOTCONN echo "$errs"
slowest=$(fw max-ms "$W" "$t_stop" "$t_back")
echo "# SIGSTOP: slowest call ${slowest} ms (limit $MAX_CALL_MS)"
TEST [ "$slowest" -le "$MAX_CALL_MS" ]
# the brick was silent, not gone: the first call to fail waited for the ping
# timeout (measured from SIGSTOP to that call's end: the call in flight may
# have begun before t_stop, or a loaded writer sent its next one late, so
# the slowest call begun after t_stop can be short)
first_end=$(fw first-error-ms "$W" "$t_stop" "$t_back")
echo "# SIGSTOP: the first failed call ended $first_end ms after it"
TEST [ "${first_end:-0}" -ge $((PING * 1000 / 2)) ]
EXPECT 0 w reopens
TEST bfs_pid_alive "$mpid"

# ---- the end: stop the load; everything acknowledged is there ----
TEST touch "$W/stop"
TEST bfs_wait_gone "$wpid" 60
EXPECT finished w state
echo "# writer: $(fw summary "$W")"
overall=$(w max_ms)
TEST [ "$overall" -le "$MAX_CALL_MS" ]
EXPECT ok fw verify-final "$M/w" "$W"
EXPECT ok fw verify-final "$BRICK/w" "$W"
TEST grep -q "declaring it down" "$T/logs/mount-mnt.log"

TEST umount_brickfs "$M"
TEST bfs_wait_gone "$mpid" "$PROCESS_DOWN_TIMEOUT"
TEST stop_brick b1

done_testing
