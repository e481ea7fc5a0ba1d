#!/usr/bin/env bash
#
# 240-rebalance-add-brick.t — a distribute volume of 3 bricks grows to 4
# under a self-checking workload (docs/design/rebalance.md):
#   - add-brick: the new brick is in the volume, owns no bucket yet; files
#     placed by the old table; add-brick refused with bad counts;
#   - rebalance start: the migration; about 1/4 of the files move
#     (within +-30%), not more; every file where the new (canonical) table
#     says (dht-check audit), all contents intact, no GFID moved twice;
#   - fix-layout alone: new files go to the new brick at once, old ones
#     stay and are found through the previous table (layout-previous);
#   - status: completed, counters, rates; the previous layout dropped from
#     the client volfile afterwards;
#   - the workload (verify-io.py: new files, long-lived fds written
#     throughout) finds nothing wrong; a file written and read through one
#     fd all along, whose name moves to the new brick, moves while open and
#     loses no write (distribute repeats writes that land on the frozen or
#     unlinked source on the new brick).

# shellcheck disable=SC2046
. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/dht.sh"
. "$(dirname "$0")/../lib/rebal.sh"

skip_unless_mgmt
skip_unless_brickfs

TEST start_brickfsd
TEST dht_volume v 3
M=$T/m
TEST mount_vol v "$M"
TEST dht_check populate "$M" 10 150
TEST big_files "$M/big" 16 1
# renamed files: their data stays, link files point at it from the new names' bricks
TEST eval 'mkdir "$M/ren" && for i in $(seq 0 59); do echo "ren$i" >"$M/ren/a$i" && mv "$M/ren/a$i" "$M/ren/b$i" || exit 1; done'
links=$(find $(dht_bricks v) -path '*/ren/*' -perm 1000 -size 0 | grep -c .)
echo "# link files after the renames: $links"
TEST [ "$links" -gt 0 ]
EXPECT "ok" dht_check audit v $(dht_bricks v)

bfs_spawn io python3 "$BFS_ROOT/tests/lib/verify-io.py" "$M/work" "$T/stop-io" "$T/io-report"
TEST bfs_wait_until 20 test -s "$M/work/long"
# a file written through one fd the whole time, whose name moves to the new brick
held=$(moving_name "$T/bricks/v/b0" . 4)
TEST [ -n "$held" ]
bfs_spawn hold bash -c ". '$BFS_ROOT/tests/lib/rebal.sh'; hold_writer '$M/$held' '$T/stop-io' '$T/hold-report'"
TEST bfs_wait_until 20 test -s "$M/$held"

# ---- add-brick ----
mkdir -p "$T/bricks/v/b3"
EXPECT_FAIL=x
TEST ! cli volume add-brick v replica 2 "127.0.0.1:$T/bricks/v/b3" "127.0.0.1:$T/bricks/v/b4" force
TEST ! cli volume add-brick v "127.0.0.1:$T/bricks/v/b0" force   # already a brick
TEST cli volume add-brick v "127.0.0.1:$T/bricks/v/b3" force
EXPECT 4 eval "cli --json volume info v | python3 -c 'import json,sys; print(len(json.load(sys.stdin)[\"bricks\"]))'"
EXPECT "canonical:3" eval "cli --json volume info v | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"layout\"][\"table\"])'"
EXPECT not-started rebal_state v
TEST bfs_wait_until 30 eval "[ \"\$(graph_info '$M' volfile_revision)\" = \"\$(vol_field v revision)\" ]"
before=$(sum_of $(dht_check counts $(dht_bricks v)))
echo "# data files before the rebalance: $before"

# ---- fix-layout: new files use the new brick, old ones are found where they are ----
TEST cli volume rebalance v fix-layout start
EXPECT true rebal_pending v
TEST ! cli volume rebalance v fix-layout start                 # nothing left to fix
TEST bfs_wait_until 30 eval "[ \"\$(graph_info '$M' volfile_revision)\" = \"\$(vol_field v revision)\" ]"
TEST eval 'api body GET /v1/volumes/v/volfile/client | grep -q "layout-previous canonical:3"'
EXPECT "ok" dht_check verify "$M" 10 150                      # through the previous table
# none moved yet: no data file in the populated folders of the new brick
# (anchored: '*/d[0-9]*/f*' also matched brickfs's own handles, e.g.
# .brickfs/d3/f0/<gfid>, of files the workload creates there)
EXPECT 0 eval "find '$T/bricks/v/b3' -path '$T/bricks/v/b3/d[0-9]*/f*' -type f ! -perm 1000 | grep -c ."
TEST eval 'for i in $(seq 0 39); do echo "new$i" >"$M/new$i" || exit 1; done'
TEST [ "$(dht_check counts "$T/bricks/v/b3")" -gt 0 ]        # new files go there already
TEST eval 'for i in $(seq 0 39); do [ "$(cat "$M/new$i")" = "new$i" ] || exit 1; done'

# ---- rebalance ----
TEST cli volume rebalance v start
TEST ! cli volume add-brick v "127.0.0.1:$T/bricks/v/b5" force      # one change at a time
EXPECT_WITHIN 180 completed rebal_state v
moved=$(rebal_field v files_moved)
echo "# moved $moved of $before files; $(rebal_field v rate_files_s) files/s, $(rebal_field v rate_mb_s) MB/s, $(rebal_field v bytes_moved) bytes"
TEST within_pct "$moved" "$((before / 4))" 30
EXPECT 0 rebal_field v files_failed
EXPECT 0 rebal_dups_in v $T/bricks/v/b*/d[0-9]* $T/bricks/v/b*/big $T/bricks/v/b*/ren   # (work/ is renamed)
EXPECT "$moved" eval "rebal_moves v | grep -c ."
EXPECT false rebal_pending v
TEST bfs_wait_until 30 eval "[ \"\$(graph_info '$M' volfile_revision)\" = \"\$(vol_field v revision)\" ]"
TEST ! eval "api body GET /v1/volumes/v/volfile/client | grep -q layout-previous"
EXPECT "ok" dht_check verify "$M" 10 150
TEST big_check "$M/big"
TEST eval 'for i in $(seq 0 59); do [ "$(cat "$M/ren/b$i")" = "ren$i" ] || exit 1; done'
# no leftover link file either; work/ is left to the audit at the end: the
# workload still renames and unlinks there, and an audit walking the
# bricks one after the other can see a file on one brick and its link
# file already gone from the next
EXPECT "ok" dht_check audit --except=work v $(dht_bricks v)
TEST [ "$(dht_check counts "$T/bricks/v/b3")" -gt 0 ]
cli volume rebalance v status | bfs__diag

touch "$T/stop-io"
TEST bfs_wait_gone "$(bfs_pid_of io)" 60
EXPECT OK eval "cut -d' ' -f1 '$T/io-report'"
cat "$T/io-report" | bfs__diag
TEST bfs_wait_gone "$(bfs_pid_of hold)" 60
EXPECT OK eval "cut -d' ' -f1 '$T/hold-report'"
cat "$T/hold-report" | bfs__diag
EXPECT 3 dht_data_brick v "$held"             # it moved while open, and its writes followed
EXPECT "ok" dht_check audit v $(dht_bricks v)

done_testing
