#!/usr/bin/env bash
#
# 250-readdir-graph-switch.t — a directory listing that spans a graph
# switch which removes a subvolume (remove-brick commit) still lists every
# file (docs/design/graph-switch.md, "Open directories").
#
# Distribute's readdir offsets name a subvolume by its index in the graph
# (docs/design/distribute.md, "Readdir"); the graph after remove-brick has
# fewer subvolumes, so an offset of the old graph names another brick, or
# none, in the new one. The listing here reads a 4-brick distribute
# directory up to a name on b2, pauses while b1 is drained and removed and
# the mount switches to the 3-brick graph, then reads on through the same
# open directory: it must meet every file once (242 once saw "listing
# lost a file" this way).

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/dht.sh"
. "$(dirname "$0")/../lib/rebal.sh"

skip_unless_mgmt
skip_unless_brickfs

M=$T/m
TEST start_brickfsd
TEST dht_volume v 4
TEST mount_vol v "$M"
TEST mkdir "$M/d"
TEST eval "for i in \$(seq -w 1 60); do echo \$i >'$M/d/f'\$i || exit 1; done"
# b1 leaves: drained first, so no file moves while the listing runs
B1=127.0.0.1:$T/bricks/v/b1
TEST cli volume remove-brick v "$B1" start
EXPECT_WITHIN 120 completed rebal_state v
EXPECT 0 dht_check counts "$T/bricks/v/b1"
on_b2=$(cd "$T/bricks/v/b2/d" && ls)
on_b3=$(cd "$T/bricks/v/b3/d" && ls)
TEST test "$(echo "$on_b2" | grep -c .)" -ge 1
TEST test "$(echo "$on_b3" | grep -c .)" -ge 1

# the listing stops after a call that returned a name of b2 (its offset then
# names subvolume 2 or 3 of the 4-brick graph)
bfs_spawn lister python3 "$BFS_ROOT/tests/lib/paused-listing.py" "$M/d" "$T/ready" "$T/go" \
    "$T/listed" $on_b2
lister=$BFS_PID
TEST bfs_wait_until 30 test -e "$T/ready"
b1pid=$(mgmt_brick_pid v 1)
TEST cli volume remove-brick v "$B1" commit
TEST bfs_wait_gone "$b1pid" 20
TEST bfs_wait_until 30 eval "[ \"\$(graph_info '$M' volfile_revision)\" = \"\$(vol_field v revision)\" ]"
EXPECT 1 graph_info "$M" retired_open_files             # the listing stays where it began
TEST touch "$T/go"
TEST bfs_wait_gone "$lister" 60
EXPECT eod tail -n 1 "$T/listed"
EXPECT 60 eval "grep -c '^f' '$T/listed'"
EXPECT 0 eval "grep '^f' '$T/listed' | sort | uniq -d | grep -c ."
for n in $on_b3; do grep -qx "$n" "$T/listed" || echo "# lost $n (on b3)"; done
# closed: the old generation goes at a later poll
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 0 graph_info "$M" retired_generations
# a listing from the start in the new graph: every file
EXPECT 60 eval "ls '$M/d' | grep -c '^f'"
done_testing
