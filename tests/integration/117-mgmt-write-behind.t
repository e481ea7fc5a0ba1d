#!/usr/bin/env bash
#
# 117-mgmt-write-behind.t — performance/write-behind in the graphs brickfsd
# makes (src/mgmt/volgen.c, docs/design/write-behind.md), through a real
# FUSE mount of a replica 3 volume with quorum-count 3:
#   - a mount's graph has it, over md-cache; the client.vol brickfsd's own
#     daemons run has none;
#   - a 24 MiB file written with dd reads back identical, on the mount and
#     on every brick, and the writes went behind (its dump counts them);
#   - quorum lost (one brick down, brickfsd down so it is not restarted):
#     a plain write() is answered, and the close() reports EROFS — the
#     failure is not lost; an O_APPEND write still fails in write() itself
#     (it passes through);
#   - a write answered and failed before a graph switch (`volume set`) is
#     still reported by the close() after it (the handle stays pinned);
#   - back to quorum, heal, the file is intact;
#   - `volume set performance.write-behind off` takes it out live.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/replica.sh"

skip_unless_mgmt
skip_unless_brickfs
for xl in performance/write-behind cluster/replicate protocol/client; do
    [ -f "$BFS_BUILD/lib/brickfs/xlators/$xl.so" ] || SKIP_ALL "$xl is not built"
done

B=$T/bricks
M=$T/m
TEST start_brickfsd
TEST rep_volume wv 3 "$B/r" cluster.quorum-type=fixed cluster.quorum-count=3
S=$(brickfsd_state)

# ---- the graphs ----
vf=$(api body GET /v1/volumes/wv/volfile/client)
EXPECT 1 eval "grep -c 'type performance/write-behind' <<<'$vf'"
EXPECT 1 eval "grep -A3 'volume wv-write-behind' <<<'$vf' | grep -c 'subvolumes wv-md-cache'"
EXPECT 0 eval "grep -c 'write-behind' '$S/volfiles/wv/client.vol'"

wb() { graph_info "$M" XL=wv-write-behind dump "$1"; }
xl_has()
{
    python3 - "$1" "$2" <<'PY'
import json, os, sys
v = json.loads(os.getxattr(sys.argv[1], "brickfs.graph"))
print(int(any(x["name"] == sys.argv[2] for x in v["xlators"])))
PY
}

# ---- data ----
TEST mount_vol wv "$M" entry-timeout=0,attr-timeout=0,negative-timeout=0
EXPECT 1 xl_has "$M" wv-write-behind
TEST dd if=/dev/urandom of="$T/src" bs=1M count=24 status=none
TEST dd if="$T/src" of="$M/f" bs=1M status=none
TEST cmp "$T/src" "$M/f"
TEST [ "$(wb behind)" -ge 24 ]
EXPECT 0 wb failed
EXPECT 0 wb queued
for i in 0 1 2; do TEST cmp "$T/src" "$B/r$i/f"; done

# ---- quorum lost: close() reports what write() could not ----
# write_close PATH [GO RES]: "W C" — the errno names (or OK) of one
# write() of 64 KiB at offset 0 of the existing file and of the close()
# after it; with GO and RES, the close waits until file GO exists and the
# line goes to file RES.
write_close()
{
    python3 - "$@" <<'PY'
import errno, os, sys, time
def name(f):
    try:
        f()
        return "OK"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
fd = os.open(sys.argv[1], os.O_WRONLY)
w = name(lambda: os.pwrite(fd, b"z" * 65536, 0))
if len(sys.argv) > 3:
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.05)
line = w + " " + name(lambda: os.close(fd))
if len(sys.argv) > 3:
    with open(sys.argv[3], "w") as f:
        f.write(line + "\n")
else:
    print(line)
PY
}
down() { kill_brickfsd && kill_mgmt_brick "$1" "$2"; }
TEST down wv 2
EXPECT_WITHIN "$PING_TIMEOUT" EROFS try_write "$M/f" tail     # O_APPEND: write() fails
EXPECT "OK EROFS" write_close "$M/f"
TEST [ "$(wb failed)" -ge 1 ]
TEST [ "$(wb reported)" -ge 1 ]
TEST cmp "$T/src" "$B/r0/f"                                   # nothing half written

# ---- a failure answered before a graph switch is reported after it ----
# A writer keeps its fd open across a switch (fuse-switch.c drains the
# handle's writes first; a failed one keeps it pinned in its generation).
go=$T/go
res=$T/res
failed0=$(wb failed)
write_close "$M/f" "$go" "$res" &
writer=$!
failed_more() { [ "$(wb failed)" -gt "$failed0" ] && echo 1; }
EXPECT_WITHIN 10 1 failed_more

# ---- back ----
before=$(child_ups "$M" wv 2)
TEST start_brickfsd
TEST bfs_wait_until "$PROCESS_UP_TIMEOUT" rep_all_online wv 3
TEST wait_child_up "$M" wv 2 "$before"
gen=$(graph_info "$M" generation)
pinned0=$(graph_info "$M" pinned_files)
TEST cli volume set wv performance.md-cache-size 4096
EXPECT_WITHIN 20 $((gen + 1)) graph_info "$M" generation
EXPECT_WITHIN 20 $((pinned0 + 1)) graph_info "$M" pinned_files
TEST touch "$go"
TEST wait "$writer"
EXPECT "OK EROFS" cat "$res"
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" "OK OK" write_close "$M/f"
TEST dd if="$T/src" of="$M/f" bs=1M conv=notrunc status=none
EXPECT_WITHIN "$HEAL_TIMEOUT" identical heal_settle "$M" "$B/r0" "$B/r1" "$B/r2"
TEST cmp "$T/src" "$M/f"

# ---- off, live ----
gen=$(graph_info "$M" generation)
TEST cli volume set wv performance.write-behind off
EXPECT 0 eval "api body GET /v1/volumes/wv/volfile/client | grep -c write-behind"
EXPECT_WITHIN 20 $((gen + 1)) graph_info "$M" generation
EXPECT 0 xl_has "$M" wv-write-behind
TEST dd if="$T/src" of="$M/f2" bs=1M status=none
TEST cmp "$T/src" "$M/f2"
TEST ! cli volume set wv performance.write-behind sometimes
TEST ! cli volume set wv performance.write-behind-window-size 1KB
TEST umount_fuse "$M"

done_testing
