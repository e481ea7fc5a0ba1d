#!/usr/bin/env bash
#
# 243-replace-brick.t — replace-brick in a replica 3 volume under a
# self-checking workload (docs/design/rebalance.md, "replace-brick"):
#   - refused on a distribute volume (501: nothing to heal from) and
#     without 'commit force';
#   - the new brick keeps the old one's id (v-brick-2, v-client-2), gets a
#     port and a process; the old folder is left as it was, unmarked;
#   - brickfsd marks the set's other bricks as heal sources of the new
#     one (replicate's pending counters on their root); heal on access (a
#     crawl of the mount: every name looked up, every file read, repeated
#     until it converges) gives the new brick every name; every file reads
#     back intact through the mount;
#   - same contents on the new brick, and the workload's verdict (reads
#     through long-lived fds across the replacement).
# The self-heal daemon brickfsd runs heals at the same time.

# shellcheck disable=SC2046
. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/dht.sh"
. "$(dirname "$0")/../lib/rebal.sh"

skip_unless_mgmt
skip_unless_brickfs

TEST start_brickfsd
TEST dht_volume d 2
TEST ! cli volume replace-brick d "127.0.0.1:$T/bricks/d/b1" "127.0.0.1:$T/bricks/d/new" commit force

mkdir -p "$T/bricks/r/b0" "$T/bricks/r/b1" "$T/bricks/r/b2"
TEST cli volume create r replica 3 "127.0.0.1:$T/bricks/r/b0" "127.0.0.1:$T/bricks/r/b1" "127.0.0.1:$T/bricks/r/b2" force
TEST cli volume set r network.ping-timeout "$NETWORK_PING_TIMEOUT"
TEST cli volume set r cluster.background-self-heal-count 0    # heal before answering
TEST cli volume start r
M=$T/m
TEST mount_vol r "$M"
TEST dht_check populate "$M" 4 50
TEST big_files "$M/big" 4 1
bfs_spawn io python3 "$BFS_ROOT/tests/lib/verify-io.py" "$M/work" "$T/stop-io" "$T/io-report"
TEST bfs_wait_until 20 test -s "$M/work/long"

TEST ! cli volume replace-brick r "127.0.0.1:$T/bricks/r/b2" "127.0.0.1:$T/bricks/r/new" commit
old_pid=$(mgmt_brick_pid r 2)
TEST cli volume replace-brick r "127.0.0.1:$T/bricks/r/b2" "127.0.0.1:$T/bricks/r/new" commit force
EXPECT "$T/bricks/r/new" eval "cli --json volume info r | python3 -c 'import json,sys; b=json.load(sys.stdin)[\"bricks\"][2]; print(b[\"path\"] if b[\"name\"] == \"r-brick-2\" else b[\"name\"])'"
TEST bfs_wait_gone "$old_pid" 20
EXPECT_WITHIN 20 "1 1 1" dht_online r
TEST [ -z "$(getfattr --absolute-names -n trusted.brickfs.volume-id "$T/bricks/r/b2" 2>/dev/null)" ]

# heal by crawl: every name looked up, every file read; the kernel's
# dentries dropped first so that each lookup reaches replicate (an entry
# heal creates the names; their data heals on their next lookup)
crawl()
{
    echo 2 >/proc/sys/vm/drop_caches
    find "$M" -path "$M/work" -prune -o -type f -print0 | xargs -0 cat >/dev/null
}
crawl
want=$(dht_check counts "$T/bricks/r/b0")
echo "# after one crawl: $(dht_check counts "$T/bricks/r/new") of $want data files on the new brick"
# every name (entry heal, started by the pending marks brickfsd put on the
# set's other bricks: without them nothing heals at all)
tree() { (cd "$1" && find . -path ./.brickfs -prune -o -path ./work -prune -o -print | sort); }
names_same() { crawl; [ "$(tree "$T/bricks/r/b0")" = "$(tree "$T/bricks/r/new")" ] && echo same; }
EXPECT_WITHIN 180 same names_same
# the files read back intact while the new brick is being healed (a
# readdirplus served by the new brick once gave the kernel its empty
# copies' sizes: replicate now passes a file's attributes up only from a
# copy known good for it, and reads never use what a copy's client fetched
# with the open before that copy was healed)
EXPECT "ok" dht_check verify "$M" 4 50
TEST big_check "$M/big"

touch "$T/stop-io"
TEST bfs_wait_gone "$(bfs_pid_of io)" 60
cat "$T/io-report" | bfs__diag
# the new brick ends equal to the others by heal on access, and the
# workload's long-lived fds read back what they wrote across the
# replacement (the listing of their folder had shrunk the kernel's size of
# a file to the new brick's partial copy)
same() { crawl; diff -r -q -x .brickfs -x work "$T/bricks/r/b0" "$T/bricks/r/new" >/dev/null && echo same; }
EXPECT_WITHIN 300 same same
TEST diff -r -x .brickfs -x work "$T/bricks/r/b0" "$T/bricks/r/new"
EXPECT OK eval "cut -d' ' -f1 '$T/io-report'"
done_testing
