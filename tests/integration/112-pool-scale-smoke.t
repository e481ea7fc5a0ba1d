#!/usr/bin/env bash
#
# 112-pool-scale-smoke.t — a small run of scripts/pool-scale.sh (12
# brickfsd on loopback, 8 volumes; docs/performance-history.md, "Pool scale
# (issue 8)"), checking what the big runs rely on and what must not grow
# back:
#   - every command of the run works, from node 1, on a pool of 12;
#   - a volume change reaches every node (one watch event each);
#   - each node then reads that one document, not every volume: the bytes
#     etcd sends per node for a `volume set` stay under 4 KiB with 8
#     volumes (each node listing all of them sent ~6 KiB per change);
#   - idle, etcd serves the lease keep-alives only (about 1 per node every
#     3 s) and nothing is written.
# The big runs (10 to 200 nodes) are `scripts/pool-scale.sh`, by hand.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/etcd.sh"

skip_unless_mgmt
skip_unless_etcd

N=12
out=$T/scale.out
TEST eval "POOL_SCALE_VOLUMES=8 POOL_SCALE_IDLE=3 BFS_BUILD='$BFS_BUILD' '$BFS_ROOT/scripts/pool-scale.sh' $N >'$out' 2>'$T/scale.err'"
sed 's/^/# /' "$out"
EXPECT 0 eval "grep -c 'failed\|cannot' '$T/scale.err'"
# col CMD F: awk field F of the row of CMD in the commands' table
# (F 9: watch events, 10: KiB sent)
col() { awk -F'|' -v c="$1" -v k="$2" '$4 ~ c { gsub(/ /, "", $k); print $k }' "$out"; }
EXPECT 6 eval "grep -c '^| $N | 8 | ' '$out'"
for c in "volume create" "volume set" "volume start" "volume stop"; do
    EXPECT $N col "$c" 9                              # watch events: one per node
done
EXPECT 1 eval "echo \"\$(col 'volume set' 10) < 4 * $N\" | bc"   # KiB sent
# idle: requests/s (column 6 of the summary) at most one per node per 2 s
EXPECT 1 eval "awk -F'|' '\$2 ~ /^ $N / && \$4 !~ /volume|pool/ { print (\$7 + 0 <= $N / 2) }' '$out' | head -1"

done_testing
