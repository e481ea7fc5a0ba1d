#!/usr/bin/env bash
#
# 244-add-brick-replicated.t — add-brick on a distributed-replicate volume
# (replica 2, 2 sets -> 3 sets) and rebalance, under a self-checking
# workload (docs/design/rebalance.md):
#   - whole replica sets only: 1 or 3 bricks refused, replica 3 refused
#     (changing the replica count is not implemented: 501);
#   - the new set is v-replicate-2 over v-client-4/5;
#   - rebalance: about 1/3 of the files move (+-30%), no GFID twice, no
#     failure; both bricks of every set hold the same files afterwards;
#     every file reads back intact; the writer's records all intact, and
#     verify-io.py (renames over existing names included) saw no error.

# shellcheck disable=SC2046
. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/dht.sh"
. "$(dirname "$0")/../lib/rebal.sh"

skip_unless_mgmt
skip_unless_brickfs

TEST start_brickfsd
TEST distrep_volume v 2 2
M=$T/m
TEST mount_vol v "$M"
TEST dht_check populate "$M" 6 100
TEST big_files "$M/big" 8 1
# The workloads: tests/lib/fault-writer.py (records through long-lived
# fds, every one checked at the end) and tests/lib/verify-io.py (files
# written and read back, renamed over and unlinked, a locked fd).
W=$T/writer
mkdir -p "$M/w" "$W"
fw() { python3 "$BFS_ROOT/tests/lib/fault-writer.py" "$@"; }
bfs_spawn writer python3 "$BFS_ROOT/tests/lib/fault-writer.py" run "$M/w" "$W" --rate 200
bfs_spawn io python3 "$BFS_ROOT/tests/lib/verify-io.py" "$M/work" "$T/stop-io" "$T/io-report"
TEST bfs_wait_until 20 test -s "$M/work/long"
TEST bfs_wait_until 20 eval '[ "$(fw get "$W" records)" -ge 20 ]'

B=127.0.0.1:$T/bricks/v
mkdir -p "$T/bricks/v/b4" "$T/bricks/v/b5" "$T/bricks/v/b6"
TEST ! cli volume add-brick v "$B/b4" force                          # half a set
TEST ! cli volume add-brick v "$B/b4" "$B/b5" "$B/b6" force          # a set and a half
TEST ! cli volume add-brick v replica 3 "$B/b4" "$B/b5" "$B/b6" force  # another replica count
EXPECT 501 api code POST /v1/volumes/v/add-brick "{\"replica\": 3, \"bricks\": [\"$B/b4\", \"$B/b5\", \"$B/b6\"], \"force\": true}"
TEST cli volume add-brick v replica 2 "$B/b4" "$B/b5" force
TEST eval "api body GET /v1/volumes/v/volfile/client | grep -q 'subvolumes v-client-4 v-client-5'"
TEST eval "api body GET /v1/volumes/v/volfile/client | grep -q 'subvolumes v-replicate-0 v-replicate-1 v-replicate-2'"
before=$(sum_of $(dht_check counts "$T/bricks/v/b0" "$T/bricks/v/b2"))

TEST cli volume rebalance v start
EXPECT_WITHIN 240 completed rebal_state v
moved=$(rebal_field v files_moved)
echo "# moved $moved of $before files; $(rebal_field v rate_files_s) files/s, $(rebal_field v rate_mb_s) MB/s"
TEST within_pct "$moved" "$((before / 3))" 30
EXPECT 0 rebal_dups_in v $T/bricks/v/b*/d[0-9]* $T/bricks/v/b*/big $T/bricks/v/b*/w   # (work/ is renamed)
EXPECT 0 rebal_field v files_failed
for s in 0 2 4; do
    TEST diff -r -q -x .brickfs -x w -x work "$T/bricks/v/b$s" "$T/bricks/v/b$((s + 1))"
done
TEST [ "$(dht_check counts "$T/bricks/v/b4")" -gt 0 ]
EXPECT "ok" dht_check verify "$M" 6 100
TEST big_check "$M/big"

touch "$W/stop" "$T/stop-io"
TEST bfs_wait_gone "$(bfs_pid_of writer)" 90
EXPECT finished fw get "$W" state
EXPECT 0 fw get "$W" errors
EXPECT ok fw verify-final "$M/w" "$W"
TEST bfs_wait_gone "$(bfs_pid_of io)" 60
EXPECT OK eval "cut -d' ' -f1 '$T/io-report'"
cat "$T/io-report" | bfs__diag
fw summary "$W" | bfs__diag
done_testing
