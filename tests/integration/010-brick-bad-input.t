#!/usr/bin/env bash
#
# 010-brick-bad-input.t — a real brickfs-brick against a client that speaks
# the wire protocol with hand-built frames (tests/tools/rawclient):
#   - names no client may use ("a/b", "..", ".", "", "x\0y" with a NUL on
#     the wire, ".brickfs" at the root, 256 bytes) in lookup, create, mkdir
#     and rename are refused with EINVAL / ENAMETOOLONG (".brickfs": hidden,
#     so ENOENT to look up and EPERM to create), and nothing appears outside
#     the brick folder or in it;
#   - misused fd ids (one in use, one never opened) get EBADF;
#   - malformed traffic (truncated frame, oversized length, unknown
#     procedure, a fop before the handshake, short and over-long bodies, a
#     REPLY from the client, random bytes) makes the brick close that
#     connection and log why, with the peer's address;
#   - the brick stays alive and serves a good request at the end.
#
# tags: sanitizer

. "$(dirname "$0")/../lib/test.sh"

RAW=$BFS_BUILD/tests/tools/rawclient
[ -x "$BRICK_BIN" ] || SKIP_ALL "$BRICK_BIN is not built"
[ -x "$RAW" ] || SKIP_ALL "$RAW is not built"

# result OP LABEL: what the brick answered to OP with the name LABEL
result()
{
    awk -v op="$1" -v l="$2" '$1 == op && $2 == l { print $3 }' "$T/names.out"
}

# result_in OP LABEL ERRNO...: the answer is one of ERRNO...
result_in()
{
    local got op=$1 label=$2
    shift 2
    got=$(result "$op" "$label")
    for want in "$@"; do [ "$got" = "$want" ] && return 0; done
    echo "$op $label: got '$got', want one of $*"
    return 1
}

# outside_brick: every path under $T/bricks except inside the brick folder
outside_brick()
{
    (cd "$T/bricks" && find . -path ./b1 -prune -o -print | sort)
}

TEST write_volfiles b1 "$T/bricks/b1"
mkdir -p "$T/bricks/sibling/sub"
echo keep >"$T/bricks/sibling/keep"
before=$(outside_brick; md5sum "$T/bricks/sibling/keep")
TEST start_brick b1
port=$(brick_port b1)
pid=$(brick_pid b1)

# ---- names ----
TEST eval "'$RAW' names 127.0.0.1 $port b1 >'$T/names.out'"
EXPECT OK result lookup root
EXPECT OK result create good
for op in lookup create mkdir rename; do
    for label in slash dotdot dot empty nul; do
        EXPECT EINVAL result $op $label
    done
    EXPECT ENAMETOOLONG result $op long
done
TEST result_in lookup hidden ENOENT EINVAL
TEST result_in create hidden EPERM EINVAL
TEST result_in mkdir hidden EPERM EINVAL
TEST result_in rename hidden EPERM EINVAL
EXPECT EBADF result open dup-fd-id
EXPECT EBADF result fstat unknown-fd-id
EXPECT OK result fstat fd-id
EXPECT OK result lookup root-again

# nothing was made anywhere but "good" in the brick
EXPECT "$before" eval 'outside_brick; md5sum "$T/bricks/sibling/keep"'
EXPECT ".brickfs good" eval "ls -A '$T/bricks/b1' | tr '\n' ' ' | sed 's/ \$//'"
TEST test -f "$T/bricks/b1/good"
TEST bfs_pid_alive "$pid"

# ---- garbage, each case on its own connection ----
TEST eval "'$RAW' garbage 127.0.0.1 $port b1 >'$T/garbage.out'"
for c in truncated-frame oversized-length unknown-procedure fop-before-handshake \
    short-body trailing-bytes reply-from-client random-bytes; do
    EXPECT "closed alive" awk -v c=$c '$1 == c { print $2, $3 }' "$T/garbage.out"
done

# ---- the brick is still there and serves a good request ----
TEST bfs_pid_alive "$pid"
EXPECT 1 brick_up b1
EXPECT alive "$RAW" ping 127.0.0.1 "$port" b1

# ---- and its log says what was refused, and from whom ----
log=$(brick_log b1)
TEST grep -q "lookup request [0-9]* refused: bad name: Invalid argument" "$log"
TEST grep -q "refused while decoding: Invalid argument" "$log"          # x\0y
TEST grep -q "refused: bad name: File name too long" "$log"
TEST grep -q "refused while decoding: Bad file descriptor" "$log"
TEST grep -q "peer 127.0.0.1:[0-9]*: connection closed inside a frame" "$log"
TEST grep -q "peer 127.0.0.1:[0-9]*: bad frame header: frame body larger" "$log"
TEST grep -q "peer 127.0.0.1:[0-9]*: unknown procedure 999; closing" "$log"
TEST grep -q "before the handshake; closing" "$log"
TEST grep -q "malformed lookup request [0-9]*: Bad message; closing" "$log"
TEST grep -q "unexpected REPLY frame; closing" "$log"
TEST grep -q "bad frame header: bad magic" "$log"

# ---- a clean stop ----
TEST stop_brick b1
TEST ! bfs_pid_alive "$pid"
TEST grep -q "stopped$" "$log"

done_testing
