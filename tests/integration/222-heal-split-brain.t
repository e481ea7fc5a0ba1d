#!/usr/bin/env bash
#
# 222-heal-split-brain.t — split-brain provoked on purpose on a replica 2
# volume made by brickfsd, seen and resolved through the brickfs CLI
# (`volume heal NAME info split-brain`, `volume heal NAME split-brain
# ...`), with real bricks, brickfs-shd and a FUSE mount:
#
#   - quorum none, heal on access off, the self-heal daemon off (each would
#     otherwise heal the first write onto the other brick before the
#     second write makes the split);
#   - a write with brick 1 down (version A), then, once the mount sees both
#     bricks again, another with brick 0 down (version B, written later);
#   - reads through the mount answer EIO; `heal info split-brain` lists
#     every such file (text and --json);
#   - each CLI form resolves its files, and they read back through the same
#     mount with the expected copy, identical on both bricks:
#       bigger-file FILE             -> the bigger copy (A: 3000 bytes)
#       latest-mtime FILE            -> the later copy (B)
#       source-brick HOST:/DIR FILE  -> that brick's copy (brick 0: A)
#       source-brick HOST:/DIR       -> every file in split-brain (brick 1: B)
#   - a file that is not in split-brain is refused with the reason;
#     source-brick without FILE when nothing is in split-brain succeeds.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"

skip_unless_mgmt
skip_unless_brickfs
SHD=$BFS_BIN/brickfs-shd
[ -x "$SHD" ] || SKIP_ALL "$SHD is not built"
for xl in cluster/replicate features/index protocol/client protocol/server storage/posix; do
    [ -f "$BFS_BUILD/lib/brickfs/xlators/$xl.so" ] || SKIP_ALL "$xl is not built"
done
command -v getfattr >/dev/null || SKIP_ALL "getfattr (attr) is missing"

B=$T/bricks
M=$T/m

online() { echo "$(vol_brick_field s2 0 online) $(vol_brick_field s2 1 online)"; }

# read_errno FILE: the errno name of reading FILE (OK when it reads)
read_errno()
{
    python3 - "$1" <<'PY'
import errno, sys
try:
    open(sys.argv[1], "rb").read()
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
PY
}

# sb KEY: a top-level field of `volume heal s2 info split-brain --json`
sb() { cli --json volume heal s2 info split-brain | python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
summary() { cli --json volume heal s2 info summary | python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

# bricks_agree F: 1 when both bricks hold the same bytes for F
bricks_agree() { cmp -s "$B/s0/$1" "$B/s1/$1" && echo 1 || echo 0; }

# both_up: the mount's replicate sees both bricks (up mask 3)
both_up() { graph_info "$M" XL=s2-replicate-0 dump up; }

version_a() { head -c 3000 /dev/zero | tr '\0' A; }   # A: the bigger one

TEST start_brickfsd
TEST cli volume create s2 replica 2 "127.0.0.1:$B/s0" "127.0.0.1:$B/s1" force
TEST cli volume set s2 network.ping-timeout "$NETWORK_PING_TIMEOUT"
TEST cli volume set s2 cluster.quorum-type none
for k in data metadata entry; do TEST cli volume set s2 "cluster.$k-self-heal" off; done
TEST cli volume set s2 cluster.self-heal-daemon off
# no entry windows: a brick killed while the root's window is held would keep
# its dirty mark, and with every heal off nothing would clear it (not what
# this test is about)
TEST cli volume set s2 cluster.entry-eager-lock off
TEST cli volume start s2
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1" online
TEST mount_vol s2 "$M" entry-timeout=0,attr-timeout=0,negative-timeout=0
FILES="big mtime src all1 all2"
for f in $FILES calm; do TEST eval "echo start-$f >'$M/$f'"; done

# brick 1 down (brickfsd down too, so that it stays down): version A
TEST kill_brickfsd
TEST kill_mgmt_brick s2 1
for f in $FILES; do TEST eval "version_a >'$M/$f'"; done
# brick 1 back and seen by the mount; then brick 0 down: version B, later
TEST start_brickfsd
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1" online
TEST kill_brickfsd
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" 3 both_up
TEST kill_mgmt_brick s2 0
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" 0 eval "echo B-big >'$M/big'; echo \$?"
for f in mtime src all1 all2; do TEST eval "echo B-$f >'$M/$f'"; done
TEST start_brickfsd
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1" online
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" 3 both_up

# ---- seen: EIO through the mount, listed by heal info split-brain ----
for f in $FILES; do EXPECT EIO read_errno "$M/$f"; done
EXPECT OK read_errno "$M/calm"
EXPECT 5 sb split_brain
TEST eval "cli volume heal s2 info split-brain | grep -q '^Brick 127.0.0.1:$B/s0\$'"
TEST eval "cli volume heal s2 info split-brain | grep -q '^Number of entries in split-brain: 5\$'"
TEST eval "cli volume heal s2 info | grep -q ' - Is in split-brain\$'"
EXPECT 5 summary split_brain

# ---- resolved, one CLI form at a time ----
EXPECT 1 eval "cli volume heal s2 split-brain bigger-file /calm 2>&1 | grep -c 'not in split-brain'"
TEST ! cli volume heal s2 split-brain bigger-file /calm
TEST ! cli volume heal s2 split-brain bigger-file /no-such-file

TEST eval "cli volume heal s2 split-brain bigger-file /big | grep -q '^Healed /big.\$'"
EXPECT 1 bricks_agree big
EXPECT 3000 stat -c %s "$B/s1/big"
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" OK read_errno "$M/big"
EXPECT "$(version_a)" cat "$M/big"
EXPECT EIO read_errno "$M/mtime"                             # the others still are

TEST cli volume heal s2 split-brain latest-mtime /mtime
EXPECT 1 bricks_agree mtime
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" B-mtime cat "$M/mtime"

TEST cli volume heal s2 split-brain source-brick "127.0.0.1:$B/s0" /src
EXPECT 1 bricks_agree src
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" "$(version_a)" cat "$M/src"

EXPECT 2 sb split_brain
out=$(cli volume heal s2 split-brain source-brick "127.0.0.1:$B/s1")
TEST test $? = 0
EXPECT 2 eval "echo '$out' | grep -c '^Healed gfid:'"
for f in all1 all2; do
    EXPECT 1 bricks_agree "$f"
    EXPECT_WITHIN "$CHILD_UP_TIMEOUT" "B-$f" cat "$M/$f"
done

# ---- nothing left ----
EXPECT 0 sb split_brain
EXPECT_WITHIN "$HEAL_TIMEOUT" 0 summary total_pending
TEST eval "cli volume heal s2 split-brain source-brick 127.0.0.1:$B/s0 | grep -q '^No file in split-brain'"
EXPECT start-calm cat "$M/calm"
TEST cli volume set s2 cluster.self-heal-daemon on
shd_online() { cli --json volume status s2 | python3 -c 'import json, sys; print(int(json.load(sys.stdin)["self_heal_daemon"]["online"]))'; }
EXPECT 1 shd_online
TEST umount_fuse "$M"

done_testing
