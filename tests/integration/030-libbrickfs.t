#!/usr/bin/env bash
#
# 030-libbrickfs.t — libbrickfs against a real brick over TCP: the example
# program build/examples/hello (public header only) creates /hello.txt on a
# one-brick volume through protocol/client, reads it back, lists / and
# stats it; the brick folder then holds the plain file. Also: a second run
# truncates and rewrites, a stopped brick makes brickfs_init fail with
# ENOTCONN within the connect timeout, a missing volfile is reported.
# Then the whole tests/graph/test_api suite runs over TCP against a brick
# of its own.
#
# tags: sanitizer

. "$(dirname "$0")/../lib/test.sh"

HELLO=$BFS_BUILD/examples/hello
[ -x "$BRICK_BIN" ] || SKIP_ALL "$BRICK_BIN is not built"
for xl in protocol/client protocol/server storage/posix; do
    [ -f "$BFS_BUILD/lib/brickfs/xlators/$xl.so" ] || SKIP_ALL "$xl is not built"
done
[ -x "$HELLO" ] || SKIP_ALL "$HELLO is not built"

GREETING="Hello from libbrickfs!"
export BRICKFS_CONNECT_TIMEOUT=$CHILD_UP_TIMEOUT

# hello VOLFILE, its stdout in $T/hello.out, its stderr in the logs
hello()
{
    "$HELLO" "$@" >"$T/hello.out" 2>>"$T/logs/hello.err"
}

TEST write_volfiles b1 "$T/bricks/b1"
TEST start_brick b1
[ "$(brick_up b1)" = 1 ] || done_testing # nothing below can pass
CV=$(client_volfile b1)

TEST hello "$CV"
TEST grep -qx "read back: $GREETING" "$T/hello.out"
TEST grep -q "^listing of /:" "$T/hello.out"
TEST grep -qE '^  hello.txt +file +23 bytes$' "$T/hello.out"
TEST grep -qE '^/hello.txt: size 23, mode 0644, ' "$T/hello.out"
TEST ! grep -q '\.brickfs' "$T/hello.out"

# the brick keeps it as a plain file
EXPECT "$GREETING" cat "$T/bricks/b1/hello.txt"
EXPECT 644 stat -c %a "$T/bricks/b1/hello.txt"
EXPECT "$(id -u)" stat -c %u "$T/bricks/b1/hello.txt"

# a second run: creat truncates, the content is written once, not twice
TEST hello "$CV"
EXPECT 23 stat -c %s "$T/bricks/b1/hello.txt"
TEST grep -qx "read back: $GREETING" "$T/hello.out"

# no brick: init gives up after the connect timeout with ENOTCONN
TEST stop_brick b1
t0=$(bfs_now_us)
BRICKFS_CONNECT_TIMEOUT=2
TEST ! hello "$CV"
BRICKFS_CONNECT_TIMEOUT=$CHILD_UP_TIMEOUT
took=$((($(bfs_now_us) - t0) / 1000000))
TEST [ "$took" -lt $((10 * BFS_TIMEOUT_SCALE)) ]
TEST grep -q "hello: cannot reach the volume: Transport endpoint is not connected" \
    "$T/logs/hello.err"

# the brick back: the same volfile works again
TEST start_brick b1
TEST hello "$CV"
TEST grep -qx "read back: $GREETING" "$T/hello.out"

# the whole API suite of tests/graph/test_api, over TCP on a brick of its own
API_SUITE=$BFS_BUILD/tests/graph/test_api
if [ -x "$API_SUITE" ]; then
    TEST write_volfiles api "$T/bricks/api"
    TEST start_brick api
    TEST eval "BFS_API_VOLFILE='$(client_volfile api)' BFS_API_BRICKDIR='$T/bricks/api' \
        '$API_SUITE' >'$T/logs/api-suite.out' 2>&1"
    EXPECT "" grep -A3 '^not ok' "$T/logs/api-suite.out"
    TEST grep -qE '^1\.\.[0-9]{3}$' "$T/logs/api-suite.out"
    TEST stop_brick api
else
    for i in 1 2 3 4 5; do SKIP "$API_SUITE is not built"; done
fi

# bad invocations
TEST ! hello "$T/no-such.vol"
TEST grep -q "hello: $T/no-such.vol: No such file or directory" "$T/logs/hello.err"
"$HELLO" >/dev/null 2>&1
EXPECT 2 echo $?

done_testing
