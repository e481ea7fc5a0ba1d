#!/usr/bin/env bash
#
# 249-rebalance-append.t — appends through O_APPEND fds while their file
# is moved (docs/design/rebalance.md, "Open descriptors follow"): every
# record is in the moved copy exactly once. A write that lands on the
# frozen source is repeated on the destination by its client; through an
# O_APPEND fd the repeat appends, so an append the last copy already
# carried used to be written twice. The move now records on the source the
# size its last copy took (trusted.brickfs.dht.copied), and an append that
# ends within it is not repeated.
#
# Two appenders (fds opened before the move) write 16-byte records every
# 10 ms while the 2 MiB file is moved (throttled to 1 MB/s, so the move
# takes seconds and its last copy runs while they append). A third fd,
# opened before the move, writes once after it: its write lands on the
# dropped source, whose size is stale by then, and must be appended after
# the others' records, not written over them at the source's old end. A
# watcher holds the source open on the brick and reads the recorded size
# once the move unlinked it.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/dht.sh"
. "$(dirname "$0")/../lib/rebal.sh"

skip_unless_mgmt
skip_unless_brickfs

TEST start_brickfsd

# appender PATH TAG STOP LAST: records "TAG%014d\n" through one O_APPEND fd
# opened at once, every 10 ms until STOP exists; LAST gets the count
appender='
import os, sys, time
path, tag, stop, last = sys.argv[1:5]
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
i = 0
while not os.path.exists(stop) or i < 20:
    if os.write(fd, b"%s%014d\n" % (tag.encode(), i)) != 16:
        raise SystemExit("short write")
    i += 1
    time.sleep(0.01)
os.close(fd)
open(last, "w").write("%d" % i)
'
# late PATH GO DONE: one O_APPEND fd opened at once; one record written
# once GO exists
late='
import os, sys, time
path, go, done = sys.argv[1:4]
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
open(done + ".opened", "w").write("1")
while not os.path.exists(go):
    time.sleep(0.01)
n = os.write(fd, b"C%014d\n" % 0)
os.close(fd)
open(done, "w").write("%d" % n)
'
# watcher SRC REPORT: the source held open on the brick; once its name is
# gone (dropped by the move), the size the move recorded on it
watcher='
import os, sys, time
src, report = sys.argv[1:3]
fd = os.open(src, os.O_RDONLY)
ino = os.fstat(fd).st_ino
deadline = time.time() + 300
while time.time() < deadline:
    try:
        if os.stat(src).st_ino != ino:
            break
    except FileNotFoundError:
        break
    time.sleep(0.01)
try:
    v = os.getxattr(fd, "trusted.brickfs.dht.copied").decode()
except OSError as e:
    v = "NONE(%s)" % e.strerror
open(report, "w").write(v)
'
# check FILE HEADMD5 NA NB: the file is the 2 MiB head, then NA records
# of A, NB of B (each in its own order) and one of C, each exactly once
check='
import hashlib, sys
def fail(why):
    print("FAIL " + why)
    sys.exit(1)
path, md5, na, nb = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = open(path, "rb").read()
head, tail = data[:2097152], data[2097152:]
if hashlib.md5(head).hexdigest() != md5:
    fail("the first 2 MiB changed")
if len(tail) % 16:
    fail("%d bytes after the head: not whole records" % len(tail))
recs = [tail[i:i + 16] for i in range(0, len(tail), 16)]
want = {b"A": na, b"B": nb, b"C": 1}
for tag, n in want.items():
    got = [r for r in recs if r[:1] == tag]
    exp = [b"%s%014d\n" % (tag, i) for i in range(n)]
    if got != exp:
        dup = len(got) - len(set(got))
        fail("%s: %d records (want %d), %d duplicated" % (tag.decode(), len(got), n, dup))
if len(recs) != na + nb + 1:
    fail("%d records, want %d (torn or foreign)" % (len(recs), na + nb + 1))
print("OK")
'

v=v M=$T/m-v B=$T/bricks/v
rebal_moving_file "$v" 2097152
f=$RB_F src=$RB_SRC
md5=$(md5sum <"$M/$f" | cut -d' ' -f1)
bfs_spawn watcher python3 -c "$watcher" "$src" "$T/copied"
bfs_spawn late python3 -c "$late" "$M/$f" "$T/go" "$T/late-done"
bfs_spawn appender-a python3 -c "$appender" "$M/$f" A "$T/stop" "$T/last-a"
bfs_spawn appender-b python3 -c "$appender" "$M/$f" B "$T/stop" "$T/last-b"
TEST bfs_wait_until 30 test -e "$T/late-done.opened"

rebal_add_third "$v" 1
EXPECT 0 rebal_field "$v" files_failed
EXPECT 2 dht_data_brick "$v" "$f"               # it moved to the new brick
TEST bfs_wait_gone "$(bfs_pid_of watcher)" 30
bfs__diag <<<"recorded on the source: copied=$(cat "$T/copied")"
TEST python3 -c 'import sys; v = open(sys.argv[1]).read(); sys.exit(0 if v.isdigit() and int(v) >= 2097152 else 1)' "$T/copied"

# the late fd writes on the dropped source after the appenders added more
# on the destination
TEST bfs_wait_until 30 eval "[ \$(stat -c %s '$B/b2/$f') -ge \$(( \$(cat '$T/copied') + 320 )) ]"
touch "$T/go"
TEST bfs_wait_gone "$(bfs_pid_of late)" 30
EXPECT 16 cat "$T/late-done"
touch "$T/stop"
TEST bfs_wait_gone "$(bfs_pid_of appender-a)" 30
TEST bfs_wait_gone "$(bfs_pid_of appender-b)" 30
EXPECT OK python3 -c "$check" "$B/b2/$f" "$md5" "$(cat "$T/last-a")" "$(cat "$T/last-b")"
EXPECT OK python3 -c "$check" "$M/$f" "$md5" "$(cat "$T/last-a")" "$(cat "$T/last-b")"
EXPECT "ok" dht_check audit "$v" $(dht_bricks "$v")
echo "# rebalance log:"
grep -v "^$" "$T"/mgmt/*/log/rebalance/"$v".log 2>/dev/null | tail -10 | bfs__diag
done_testing
