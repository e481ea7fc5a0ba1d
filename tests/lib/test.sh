# tests/lib/test.sh — TAP for integration tests (tests/integration/*.t, run
# by prove). Every .t starts with:
#
#   #!/usr/bin/env bash
#   . "$(dirname "$0")/../lib/test.sh"
#
#   skip_unless_brickfs                         # skips the file if not built
#   TEST write_volfiles b1 "$T/bricks/b1"
#   TEST start_brick b1
#   TEST mount_brickfs "$(client_volfile b1)" "$T/mnt"
#   TEST mkdir "$T/mnt/d"
#   EXPECT "1" brick_up b1
#   TEST kill_brick b1
#   EXPECT_WITHIN $PROCESS_DOWN_TIMEOUT "0" brick_up b1
#   done_testing
#
# It sources tests/lib/cluster.sh: $T, the named timeouts, the brick, mount
# and process helpers, and the cleanup on exit (see there).
#
#   TEST [!] CMD...               ok if CMD succeeds (fails, with !). CMD runs in
#                                 this shell, so helpers may set variables.
#   EXPECT WANT CMD...            ok if CMD's stdout equals WANT exactly
#                                 (trailing newlines dropped).
#   EXPECT_WITHIN SECS WANT CMD...  polls CMD until its stdout equals WANT;
#                                 not ok if SECS pass first.
#   SKIP REASON                   one skipped test; SKIP_ALL REASON skips the file.
#   plan N / done_testing         the plan up front, or counted at the end.
#
# done_testing tears the cluster down before it prints the plan, so a
# process that crashes on exit or a sanitizer report (BFS_SAN=1) fails the
# file rather than being noise after the plan (with BFS_SAN=1 and no plan
# given up front, the check is one more test, "no sanitizer reports"). When
# a test failed, the last lines of every log in $T/logs are printed as TAP
# comments.

# shellcheck source=tests/lib/cluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"

BFS_T_N=0
BFS_T_FAILED=0
BFS_T_PLANNED=
BFS_T_OUT=$T/.run/last-output

# Comments go to stdout, in the TAP stream, so prove -v shows them in place.
bfs__diag()
{
    sed 's/^/#   /'
}

bfs__result()
{
    local pass=$1 desc=$2
    BFS_T_N=$((BFS_T_N + 1))
    if [ "$pass" = 1 ]; then
        echo "ok $BFS_T_N - $desc"
    else
        BFS_T_FAILED=$((BFS_T_FAILED + 1))
        echo "not ok $BFS_T_N - $desc"
    fi
}

bfs__where()
{
    # caller of TEST/EXPECT: two frames up from here
    echo "line ${BASH_LINENO[1]}"
}

TEST()
{
    local where negate=0 rc
    where=$(bfs__where)
    if [ "${1:-}" = "!" ]; then
        negate=1
        shift
    fi
    "$@" >"$BFS_T_OUT" 2>&1
    rc=$?
    if { [ $negate = 0 ] && [ $rc = 0 ]; } || { [ $negate = 1 ] && [ $rc != 0 ]; }; then
        bfs__result 1 "$where: $([ $negate = 1 ] && echo '! ')$*"
    else
        bfs__result 0 "$where: $([ $negate = 1 ] && echo '! ')$*"
        echo "#   exit status $rc"
        tail -n 30 "$BFS_T_OUT" | bfs__diag
    fi
}

EXPECT()
{
    local where want=$1 got
    where=$(bfs__where)
    shift
    got=$("$@" 2>"$BFS_T_OUT")
    if [ "$got" = "$want" ]; then
        bfs__result 1 "$where: EXPECT '$want' $*"
    else
        bfs__result 0 "$where: EXPECT '$want' $*"
        echo "#   got '$got', want '$want'"
        tail -n 30 "$BFS_T_OUT" | bfs__diag
    fi
}

EXPECT_WITHIN()
{
    local where secs=$1 want=$2 got start deadline delay=0.05
    where=$(bfs__where)
    shift 2
    start=$(bfs_now_us)
    deadline=$((start + secs * 1000000))
    while :; do
        got=$("$@" 2>"$BFS_T_OUT")
        [ "$got" = "$want" ] && break
        [ "$(bfs_now_us)" -ge "$deadline" ] && break
        sleep "$delay"
        case $delay in 0.05) delay=0.1 ;; 0.1) delay=0.2 ;; *) delay=0.5 ;; esac
    done
    local took=$((($(bfs_now_us) - start) / 1000))
    if [ "$got" = "$want" ]; then
        bfs__result 1 "$where: EXPECT_WITHIN $secs '$want' $* (${took} ms)"
    else
        bfs__result 0 "$where: EXPECT_WITHIN $secs '$want' $*"
        echo "#   still '$got' after ${took} ms, want '$want'"
        tail -n 30 "$BFS_T_OUT" | bfs__diag
    fi
}

SKIP()
{
    BFS_T_N=$((BFS_T_N + 1))
    echo "ok $BFS_T_N # skip $*"
}

SKIP_ALL()
{
    echo "1..0 # SKIP $*"
    exit 0
}

plan()
{
    BFS_T_PLANNED=$1
    echo "1..$1"
}

# skip_unless_brickfs: skips the whole file when the brick or the mount
# program is not built yet, or FUSE is not usable.
skip_unless_brickfs()
{
    [ -x "$BRICK_BIN" ] || SKIP_ALL "$BRICK_BIN is not built"
    [ -x "$MOUNT_BIN" ] || SKIP_ALL "$MOUNT_BIN is not built"
    require_fuse
}

require_fuse()
{
    [ -c /dev/fuse ] && [ -r /dev/fuse ] && [ -w /dev/fuse ] || SKIP_ALL "/dev/fuse is not usable"
    command -v fusermount3 >/dev/null || SKIP_ALL "fusermount3 is missing (fuse3)"
}

require_root()
{
    [ "$(id -u)" = 0 ] || SKIP_ALL "needs root"
}

bfs__print_logs()
{
    local f
    for f in "$T"/logs/*; do
        [ -s "$f" ] || continue
        echo "# --- last lines of ${f#"$T"/}:"
        tail -n 25 "$f" | bfs__diag
    done
}

done_testing()
{
    bfs_teardown >"$BFS_T_OUT" 2>&1
    if [ -s "$BFS_T_OUT" ]; then
        echo "# teardown said:"
        bfs__diag <"$BFS_T_OUT"
    fi
    # Sanitizer reports: one more test when the plan is counted here; with a
    # plan given up front, a failure through the exit status instead.
    if [ "${BFS_SAN:-0}" = 1 ]; then
        local reports
        if reports=$(bfs_san_reports); then
            [ -z "$BFS_T_PLANNED" ] && bfs__result 1 "no sanitizer reports"
        else
            if [ -z "$BFS_T_PLANNED" ]; then
                bfs__result 0 "no sanitizer reports"
            else
                echo "# sanitizer reports:"
                BFS_T_FAILED=$((BFS_T_FAILED + 1))
            fi
            bfs__diag <<<"$reports"
        fi
    fi
    [ "$BFS_T_FAILED" -gt 0 ] && bfs__print_logs
    if [ -z "$BFS_T_PLANNED" ]; then
        echo "1..$BFS_T_N"
    elif [ "$BFS_T_PLANNED" != "$BFS_T_N" ]; then
        echo "# planned $BFS_T_PLANNED tests but ran $BFS_T_N"
        BFS_T_FAILED=$((BFS_T_FAILED + 1))
    fi
    [ "$BFS_T_FAILED" -eq 0 ] && exit 0
    echo "# $BFS_T_FAILED of $BFS_T_N tests failed (BFS_KEEP_TMP=1 keeps the scratch folder)"
    exit 1
}

# A test that dies before done_testing (a syntax error, an exit in the
# middle) still shows its logs; prove reports the missing plan.
bfs_exit_hook()
{
    if [ "$1" != 0 ] && [ "$BFS_T_FAILED" -eq 0 ] && [ "$BFS_T_N" -gt 0 ]; then
        echo "# exited with status $1 before done_testing"
        bfs__print_logs
    fi
}
