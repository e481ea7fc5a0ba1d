#!/usr/bin/env bash
#
# 241-rebalance-resume.t — a rebalance that is SIGKILLed mid-way resumes
# where it was and completes without moving any file twice; pause and
# resume; the throttle option (docs/design/rebalance.md):
#   - cluster.rebal-max-mbps 1 keeps the copy slow enough to be caught;
#   - SIGKILL of brickfs-rebalance once some directories are finished:
#     brickfsd restarts it, the new run skips the finished directories
#     (its log says how many) and counts from where the first stopped;
#   - pause: the process ends, state paused; resume: it goes on (run 3);
#   - brickfsd SIGKILLed meanwhile: the process runs on, the new brickfsd
#     adopts it and records its completion;
#   - at the end: about 1/4 of the files moved in all (+-30%), no GFID
#     twice in moves.log, every file where the table says, contents intact.

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
TEST dht_check populate "$M" 12 60
# 2 MiB each: about 24 MiB to move at 1 MB/s, so the run outlasts the
# kill, the pause and the resume below on a loaded machine
for i in 0 1 2 3 4 5; do TEST big_files "$M/big$i" 8 2; done
mkdir -p "$T/bricks/v/b3"
TEST cli volume add-brick v "127.0.0.1:$T/bricks/v/b3" force
TEST cli volume set v cluster.rebal-max-mbps 1
TEST ! cli volume set v cluster.rebal-throttle sometimes      # bad value: refused
before=$(sum_of $(dht_check counts $(dht_bricks v)))
LOG=$(brickfsd_logs)/rebalance/v.log

TEST cli volume rebalance v start
EXPECT_WITHIN 60 in-progress rebal_state v
TEST bfs_wait_until 120 eval '[ "$(rebal_field v dirs_done)" -ge 3 ] && [ "$(rebal_field v files_moved)" -ge 3 ]'
pid1=$(rebal_pid v)
TEST [ "$pid1" -gt 0 ]
TEST kill -KILL "$pid1"
moved1=$(rebal_moves v | grep -c .)
echo "# killed run 1 (pid $pid1) after $moved1 moves"
TEST bfs_wait_until 60 eval '[ "$(rebal_pid v)" -gt 0 ] && [ "$(rebal_pid v)" != '"$pid1"' ]'
EXPECT_WITHIN 30 2 rebal_field v runs
TEST bfs_wait_until 20 grep -q "run 2, [1-9][0-9]* directories already finished, [1-9][0-9]* files moved before" "$LOG"
grep "run 2," "$LOG" | bfs__diag

# ---- pause / resume ----
TEST cli volume rebalance v pause
EXPECT paused rebal_state v
EXPECT 0 rebal_pid v
TEST ! cli volume rebalance v pause
TEST cli volume rebalance v resume
EXPECT_WITHIN 30 3 rebal_field v runs

# ---- brickfsd killed while it runs: the process goes on, is adopted ----
pid3=$(rebal_pid v)
TEST kill_brickfsd d1 KILL
TEST bfs_pid_alive "$pid3"
TEST start_brickfsd
TEST cli volume set v cluster.rebal-max-mbps 0       # read at the next run
EXPECT_WITHIN 300 completed rebal_state v
TEST grep -q "adopted rebalance process $pid3" "$(brickfsd_logs)/brickfsd.log"

moved=$(rebal_moves v | grep -c .)
echo "# moved $moved of $before files in 3 runs"
EXPECT 0 rebal_dups v
TEST within_pct "$moved" "$((before / 4))" 30
EXPECT "$moved" rebal_field v files_moved
EXPECT 0 rebal_field v files_failed
EXPECT "ok" dht_check verify "$M" 12 60
for i in 0 1 2 3 4 5; do TEST big_check "$M/big$i"; done
EXPECT "ok" dht_check audit v $(dht_bricks v)
done_testing
