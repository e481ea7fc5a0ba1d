#!/usr/bin/env bash
#
# 030-leak-mount-cycle.t — a mount/unmount cycle leaks nothing: with the
# sanitizer build (BFS_SAN=1, as `make san-test` runs it), a brick and a
# FUSE mount do some of everything (files, directories, links, xattrs,
# locks, a large write, a listing), the mount is unmounted (fusermount3 -u)
# and the brick stopped (SIGTERM); both must exit by themselves, and
# LeakSanitizer, which runs at their exit and writes to log_path (their
# stderr is not seen), must have written nothing for either pid.
#
# The check can fail: the same cycle is run again with a leak planted in
# both daemons (an LD_PRELOADed constructor that drops a malloc), and then
# a LeakSanitizer report naming it must appear for each of them. This
# proves that both exit paths reach the leak check and that the reports
# land where done_testing looks for them.
#
# Without the sanitizer build the whole file is skipped.
#
# tags: sanitizer

. "$(dirname "$0")/../lib/test.sh"

skip_unless_brickfs
[ "${BFS_SAN:-0}" = 1 ] || SKIP_ALL "a leak check: needs the sanitizer build (make san-test)"
command -v cc >/dev/null || SKIP_ALL "no C compiler for the planted leak"

PYTHON=$(command -v python3)
ops() { "$PYTHON" "$BFS_ROOT/tests/lib/fuse-ops.py" "$@"; }

# reports DIR PID: the sanitizer report files of process PID in DIR
reports() { (cd "$1" 2>/dev/null && ls -- *."$2" 2>/dev/null) | tr '\n' ' ' | sed 's/ $//'; }

EXPECT 1 eval "ldd '$BRICK_BIN' | grep -c libasan"
EXPECT 1 eval "ldd '$MOUNT_BIN' | grep -c libasan"

# some of everything through the mount
workload()
{
    local m=$1
    mkdir -p "$m/d/e" &&
        head -c 3000000 /dev/urandom >"$T/big" &&
        cp "$T/big" "$m/d/big" && cmp "$T/big" "$m/d/big" &&
        echo hello >"$m/f" && ln "$m/f" "$m/d/f2" && ln -s f "$m/s" &&
        [ "$(cat "$m/s")" = hello ] &&
        mv "$m/d/f2" "$m/d/e/f3" && truncate -s 100000 "$m/d/e/f3" &&
        [ "$(ops try setxattr "$m/f" user.k v)" = ok ] &&
        [ "$(ops try getxattr "$m/f" user.k)" = v ] &&
        [ "$(ops lock-try "$m/f" 0 10)" = ok ] &&
        mkdir "$m/d/many" && [ "$(ops many "$m/d/many" 300)" = ok ] &&
        [ "$(ops count "$m/d/many")" = 300 ] &&
        rm -rf "$m/d/many" && rm "$m/d/big" && ls -lR "$m" >/dev/null &&
        stat -f "$m" >/dev/null && sync
}

# cycle NAME: brick NAME and a mount of it, the workload, unmount, stop;
# leaves the two pids in $brick_pid_ and $mount_pid_
cycle()
{
    local name=$1
    write_volfiles "$name" "$T/bricks/$name" || return 1
    start_brick "$name" || return 1
    brick_pid_=$(brick_pid "$name")
    mount_brickfs "$(client_volfile "$name")" "$T/mnt-$name" || return 1
    mount_pid_=$(bfs_pid_of "mount-mnt-$name")
    workload "$T/mnt-$name" || { echo "workload failed"; return 1; }
    umount_brickfs "$T/mnt-$name" || return 1
    bfs_wait_gone "$mount_pid_" "$PROCESS_DOWN_TIMEOUT" || { echo "mount still running"; return 1; }
    bfs_kill "$brick_pid_" TERM || return 1
    bfs_wait_gone "$brick_pid_" "$PROCESS_DOWN_TIMEOUT" || { echo "brick ignored TERM"; return 1; }
}

# ---- the real cycle: nothing reported ----
TEST cycle b1
EXPECT "" reports "$T/san" "$mount_pid_"
EXPECT "" reports "$T/san" "$brick_pid_"
# both went out through their clean paths, not a KILL from the harness
EXPECT 1 grep -c "exiting (unmounted)" "$T/logs/mount-mnt-b1.log"
TEST grep -q "stopped$" "$(brick_log b1)"

# ---- the control: a planted leak is reported for each daemon ----
mkdir -p "$T/control"
cat >"$T/leak.c" <<'EOF'
#include <stdlib.h>
void *volatile bfs_leak_sink;
__attribute__((constructor)) static void bfs_planted_leak(void)
{
    bfs_leak_sink = malloc(4242);
    bfs_leak_sink = NULL;
}
EOF
TEST cc -shared -fPIC -g -O0 -o "$T/leak.so" "$T/leak.c"
# Reports of this cycle go to $T/control, where done_testing does not look.
leaky()
{
    LD_PRELOAD=$T/leak.so \
        ASAN_OPTIONS="$ASAN_OPTIONS:verify_asan_link_order=0:log_path=$T/control/asan" \
        LSAN_OPTIONS="$LSAN_OPTIONS:log_path=$T/control/lsan" "$@"
}
TEST leaky cycle b2
for who in mount brick; do
    pid=$mount_pid_
    [ $who = brick ] && pid=$brick_pid_
    files=$(reports "$T/control" "$pid")
    TEST [ -n "$files" ]
    TEST eval "cd '$T/control' && grep -l 'ERROR: LeakSanitizer: detected memory leaks' $files"
    TEST eval "cd '$T/control' && grep -q '4242 byte(s) in 1 object(s)' $files"
done

done_testing
