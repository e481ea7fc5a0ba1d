#!/usr/bin/env bash
#
# 216-replicate-contention.t — two FUSE mounts of one replica 3 volume made
# by brickfsd write the same file at the same time
# (docs/design/lock-contention.md): mount 1 rewrites records at the start
# of the file without pause, mount 2 appends records after that region,
# each through one open fd (so each keeps an eager lock that its own
# writes keep joining; cluster.post-op-delay-ms 10000). The bricks tell
# each lock holder that the other mount waits, and the holder lets go:
#
#   - both writers finish their N writes (bounded wait, polled);
#   - both mounts' logs show the contention notices they acted on;
#   - both mounts read the same content, the expected one, and the three
#     brick copies are identical to it, with no trusted.brickfs.afr.*
#     counter left non-zero.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"

skip_unless_mgmt
skip_unless_brickfs
require_fuse
for xl in cluster/replicate protocol/client protocol/server storage/posix features/locks; do
    [ -f "$BFS_BUILD/lib/brickfs/xlators/$xl.so" ] || SKIP_ALL "$xl is not built"
done
command -v getfattr >/dev/null || SKIP_ALL "getfattr (attr) is missing"
PYTHON=$(command -v python3) || SKIP_ALL "python3 is missing"

B=$T/bricks
N=400      # writes per mount
REC=32     # bytes per record

online() { echo "$(vol_brick_field r 0 online) $(vol_brick_field r 1 online) $(vol_brick_field r 2 online)"; }

# writer PATH TAG BASE STATUS: N records "TAG<number>..." of REC bytes at
# BASE + i * REC through one fd, in the background, once $T/go exists
# (STATUS.ready says the fd is open); STATUS gets "done" and the seconds
# it took, or the error
writer()
{
    "$PYTHON" - "$1" "$2" "$3" "$N" "$REC" "$4" "$T/go" >"$4" 2>&1 <<'PY' &
import os, sys, time
path, tag, base, n, rec = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
t0 = time.time()
fd = os.open(path, os.O_WRONLY)
open(sys.argv[6] + ".ready", "w").close()
while not os.path.exists(sys.argv[7]):   # both writers start together
    time.sleep(0.01)
t0 = time.time()
for i in range(n):
    r = ("%s%06d" % (tag, i)).ljust(rec - 1, ".") + "\n"
    if os.pwrite(fd, r.encode(), base + i * rec) != rec:
        sys.exit("short write")
os.close(fd)
print("done %.1f" % (time.time() - t0))
PY
}

# expected: what the file must hold
expected()
{
    "$PYTHON" - "$N" "$REC" <<'PY'
import sys
n, rec = int(sys.argv[1]), int(sys.argv[2])
out = sys.stdout
for tag in "AB":
    for i in range(n):
        out.write(("%s%06d" % (tag, i)).ljust(rec - 1, ".") + "\n")
PY
}

status() { cut -d' ' -f1 "$1" 2>/dev/null; }

# pending BRICKDIR: non-zero trusted.brickfs.afr.* values of f, one a line
pending()
{
    getfattr -d -m '^trusted\.brickfs\.afr\.' -e hex "$1/f" 2>/dev/null |
        awk '/=0x/ { split($0, kv, "="); if (kv[2] !~ /^0x0*$/) print $0 }'
}
all_clean() { echo "$(pending "$B/b0")$(pending "$B/b1")$(pending "$B/b2")"; }

notices() { grep -c "contention notice for lock owner" "$T/logs/mount-$1.log" 2>/dev/null; }

TEST start_brickfsd
TEST cli volume create r replica 3 "127.0.0.1:$B/b0" "127.0.0.1:$B/b1" "127.0.0.1:$B/b2" force
TEST cli volume set r network.ping-timeout "$NETWORK_PING_TIMEOUT"
TEST cli volume set r cluster.post-op-delay-ms 10000
# each write must reach replicate when written: write-behind would merge a
# writer's records into a few writes whose lock windows seldom overlap
TEST cli volume set r performance.write-behind off
TEST cli volume start r
EXPECT_WITHIN 30 "1 1 1" online
TEST mount_vol r "$T/m1" log-level=DEBUG
TEST mount_vol r "$T/m2" log-level=DEBUG
TEST touch "$T/m1/f"
TEST test -f "$T/m2/f"

writer "$T/m1/f" A 0 "$T/w1"
writer "$T/m2/f" B $((N * REC)) "$T/w2"
EXPECT_WITHIN 30 "1 1" eval 'echo $([ -f "$T/w1.ready" ] && echo 1) $([ -f "$T/w2.ready" ] && echo 1)'
TEST touch "$T/go"
EXPECT_WITHIN 120 done status "$T/w1"
EXPECT_WITHIN 120 done status "$T/w2"
wait
echo "# writer 1: $(cat "$T/w1") s, writer 2: $(cat "$T/w2") s;" \
    "contention notices heard: mount 1 $(notices m1), mount 2 $(notices m2)"
EXPECT 1 eval "[ \$(notices m1) -gt 0 ] && [ \$(notices m2) -gt 0 ] && echo 1 ||
    echo \"notices: m1 \$(notices m1), m2 \$(notices m2)\""

expected >"$T/expect"
EXPECT $((2 * N * REC)) stat -c %s "$T/m1/f"
TEST cmp "$T/expect" "$T/m1/f"
TEST cmp "$T/expect" "$T/m2/f"
EXPECT_WITHIN 30 "" all_clean
for i in 0 1 2; do
    TEST cmp "$T/expect" "$B/b$i/f"
done

TEST umount_fuse "$T/m1"
TEST umount_fuse "$T/m2"
done_testing
