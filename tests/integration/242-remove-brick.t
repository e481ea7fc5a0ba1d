#!/usr/bin/env bash
#
# 242-remove-brick.t — remove-brick drains a brick of a 4-brick distribute
# volume under a self-checking workload (docs/design/rebalance.md):
#   - start: the leaving brick owns no bucket any more (new files go
#     elsewhere), a rebalance of kind "remove" drains it;
#   - commit refused while the drain runs (files left), with the count;
#   - status shows the files left; at the end 0, and the brick holds no
#     data file;
#   - commit: the brick leaves the volume, its process stops, the mount
#     switches to the graph of 3 bricks; every file reads back intact;
#   - bad input: a brick that is not in the volume, commit without start.
#
# The workload holds a POSIX lock on work/locked all along, and a locked
# file is left on its brick by design (rebalance.md, "Not built, or
# limits": commit is refused while it is there). Where that file lands
# depends on the random GFID of work/, so the leaving brick is one that
# does not hold it (b1 unless the locked file is there): otherwise the
# test would fail one run in four.

# shellcheck disable=SC2046
. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/dht.sh"
. "$(dirname "$0")/../lib/rebal.sh"

skip_unless_mgmt
skip_unless_brickfs

TEST start_brickfsd
TEST dht_volume v 4
M=$T/m
TEST mount_vol v "$M"
TEST dht_check populate "$M" 8 100
for i in 0 1 2 3; do TEST big_files "$M/big$i" 6 1; done
on=()
for i in 1 2; do on[i]=$(dht_check counts "$T/bricks/v/b$i"); done

bfs_spawn io python3 "$BFS_ROOT/tests/lib/verify-io.py" "$M/work" "$T/stop-io" "$T/io-report"
TEST bfs_wait_until 20 test -s "$M/work/long"
L=1
[ -e "$T/bricks/v/b1/work/locked" ] && L=2
echo "# the leaving brick: b$L (work/locked is on $(cd "$T/bricks/v" && echo b*/work/locked))"
B1=127.0.0.1:$T/bricks/v/b$L
on_b1=${on[L]}
echo "# data files on the leaving brick: $on_b1"

TEST ! cli volume remove-brick v "127.0.0.1:$T/bricks/v/nope" start
TEST ! cli volume remove-brick v "$B1" commit                 # nothing started
TEST cli volume set v cluster.rebal-max-mbps 2                # slow enough to see the refusal
TEST cli volume remove-brick v "$B1" start
EXPECT remove eval "cli --json volume rebalance v status | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"kind\"])'"
TEST ! cli volume remove-brick v "$B1" commit                 # still draining
cli volume remove-brick v "$B1" commit 2>&1 | bfs__diag
TEST ! cli volume add-brick v "127.0.0.1:$T/bricks/v/b9" force
EXPECT_WITHIN 240 completed rebal_state v
cli volume remove-brick v "$B1" status | bfs__diag
EXPECT 0 eval "cli --json volume remove-brick v '$B1' status | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"leaving\"][0][\"files_left\"])'"
EXPECT 0 dht_check counts "$T/bricks/v/b$L"
moved=$(rebal_field v files_moved)
echo "# drained $moved files (the brick had $on_b1 of the populated ones, plus the workload's)"
TEST [ "$moved" -ge "$on_b1" ]
EXPECT 0 rebal_dups_in v $T/bricks/v/b*/d[0-9]* $T/bricks/v/b*/big*   # (work/ is renamed)
EXPECT 0 rebal_field v files_failed
b1pid=$(mgmt_brick_pid v "$L")

TEST cli volume remove-brick v "$B1" commit
EXPECT 3 eval "cli --json volume info v | python3 -c 'import json,sys; print(len(json.load(sys.stdin)[\"bricks\"]))'"
rest=$(for i in 0 1 2 3; do [ "$i" = "$L" ] || printf 'v-brick-%d ' "$i"; done)
EXPECT "${rest% }" eval "cli --json volume info v | python3 -c 'import json,sys; print(\" \".join(b[\"name\"] for b in json.load(sys.stdin)[\"bricks\"]))'"
TEST bfs_wait_gone "$b1pid" 20
TEST bfs_wait_until 30 eval "[ \"\$(graph_info '$M' volfile_revision)\" = \"\$(vol_field v revision)\" ]"
TEST ! eval "api body GET /v1/volumes/v/volfile/client | grep -q v-client-$L"
EXPECT "ok" dht_check verify "$M" 8 100
for i in 0 1 2 3; do TEST big_check "$M/big$i"; done
TEST touch "$M/after-commit" "$M/d0/after-commit"
TEST [ ! -e "$T/bricks/v/b$L/after-commit" ]

touch "$T/stop-io"
TEST bfs_wait_gone "$(bfs_pid_of io)" 60
EXPECT OK eval "cut -d' ' -f1 '$T/io-report'"
cat "$T/io-report" | bfs__diag
done_testing
