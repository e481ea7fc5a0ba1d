#!/usr/bin/env bash
#
# 247-rebalance-rename-race.t — a rebalance moves files while a client
# renames them, replaces them (write a temporary, rename it over the name)
# and unlinks and re-creates them, as fast as it can (tests/lib/
# rename-race.py; docs/design/rebalance.md, "Migration of one file": the
# move holds the name's entry lock, so a rename or unlink of the name
# waits for the move and then finds the file in one place). Afterwards:
#   - the client saw no error, and every file is under its last name with
#     its last content, nothing else in the folder;
#   - dht-check audit: every data file on its hashed brick or behind a
#     link file there, no data file twice, no stale link file;
#   - the rebalance failed no file.
# Throttled to 1 MB/s so that each 64 KiB move takes long enough to be
# raced many times per run.

# shellcheck disable=SC2046
. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/dht.sh"
. "$(dirname "$0")/../lib/rebal.sh"

skip_unless_mgmt
skip_unless_brickfs

TEST start_brickfsd
TEST dht_volume v 2
M=$T/m
TEST mount_vol v "$M"
bfs_spawn race python3 "$BFS_ROOT/tests/lib/rename-race.py" "$M/r" 150 "$T/stop" "$T/report"
TEST bfs_wait_until 60 test -e "$T/report.ready"

mkdir -p "$T/bricks/v/b2"
TEST cli volume add-brick v "127.0.0.1:$T/bricks/v/b2" force
TEST bfs_wait_until 30 eval "[ \"\$(graph_info '$M' volfile_revision)\" = \"\$(vol_field v revision)\" ]"
TEST cli volume set v cluster.rebal-max-mbps 1
TEST cli volume rebalance v start
EXPECT_WITHIN 240 completed rebal_state v
echo "# moved $(rebal_field v files_moved), skipped $(rebal_field v files_skipped)"
EXPECT 0 rebal_field v files_failed
# (no rebal_dups check: a file moved and then renamed by the client to a
# name hashing elsewhere is met again on its new subvolume, rightly moved
# home a second time)
TEST [ "$(rebal_field v files_moved)" -gt 0 ]

touch "$T/stop"
TEST bfs_wait_gone "$(bfs_pid_of race)" 60
EXPECT OK eval "cut -d' ' -f1 '$T/report'"
cat "$T/report" | bfs__diag
EXPECT "ok" dht_check audit v $(dht_bricks v)
TEST [ "$(dht_check counts "$T/bricks/v/b2")" -gt 0 ]
done_testing
