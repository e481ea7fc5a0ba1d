#!/usr/bin/env bash
#
# 110-mount-graph-switch.t — `volume set` of client options reaches a
# mounted client, which switches to the new graph live
# (docs/design/graph-switch.md):
#   - during a write/read workload that checks its own data (tests/lib/
#     verify-io.py: new files, a long-lived fd written across every switch,
#     a second long-lived fd holding a POSIX lock), 20 switches: no I/O
#     error, every byte as written;
#   - after each switch the new value is in effect: the active graph's
#     translator has it (options) and applies it (protocol/client's
#     statedump shows the ping timeout it uses), read through the mount's
#     brickfs.graph virtual xattr;
#   - the locked fd stays in its generation (pinned) until closed, the
#     others move; once the workload ends no retired generation is left;
#   - no leak per switch: the mount's RSS after 25 more switches is within
#     a small margin of the RSS after the first 25 (ASan's leak check
#     covers the rest under BFS_SAN=1);
#   - a revision whose graph cannot come up (its only brick stopped) leaves
#     the mount on its old graph, and it switches once the brick is back.
#
# tags: sanitizer

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"

skip_unless_mgmt
skip_unless_brickfs

B=$T/bricks
M=$T/mnt
TEST start_brickfsd
TEST cli volume create v1 "127.0.0.1:$B/b1" force
TEST cli volume start v1
TEST mount_vol v1 "$M" volfile-poll=0.2,up-timeout=5
EXPECT 1 graph_info "$M" generation
EXPECT 42 graph_opt "$M" v1-client-0 network.ping-timeout

# switch_to VALUE: volume set, then the mount runs a graph with VALUE in
# effect: the option in the active graph, and protocol/client applying it.
switch_to()
{
    cli volume set v1 network.ping-timeout "$1" >/dev/null || return 1
    bfs_wait_until 20 eval "[ \"\$(graph_opt '$M' v1-client-0 network.ping-timeout)\" = $1 ]" ||
        { echo "ping-timeout $1 never reached the mount"; return 1; }
    [ "$(graph_info "$M" XL=v1-client-0 dump ping_timeout_s)" = "$1" ] ||
        { echo "protocol/client does not apply ping-timeout $1"; return 1; }
    [ "$(graph_info "$M" volfile_revision)" = "$(vol_field v1 revision)" ]
}

# ---- 20 switches under a workload that checks its data ----
bfs_spawn io python3 "$BFS_ROOT/tests/lib/verify-io.py" "$M/work" "$T/stop-io" "$T/io-report"
TEST bfs_wait_until 20 test -s "$M/work/long"
gen0=$(graph_info "$M" generation)
for v in $(seq 11 30); do
    TEST switch_to "$v"
    TEST bfs_owned "$(bfs_pid_of io)"        # the workload is still going
done
EXPECT $((gen0 + 20)) graph_info "$M" generation
EXPECT 20 graph_info "$M" switches
EXPECT 0 graph_info "$M" failed_switches
EXPECT 1 graph_info "$M" pinned_files          # the locked fd stayed where its lock is
TEST [ "$(graph_info "$M" migrated_files)" -ge 20 ]   # the long-lived fd moved every time
EXPECT_WITHIN 10 1 graph_info "$M" retired_generations   # only the pinned fd's is left
# another client option, of another translator
TEST cli volume set v1 latency-measurement off
EXPECT_WITHIN 20 off graph_opt "$M" v1 latency-measurement
touch "$T/stop-io"
TEST bfs_wait_gone "$(bfs_pid_of io)" 60
EXPECT OK eval "cut -d' ' -f1 '$T/io-report'"
cat "$T/io-report" | bfs__diag
EXPECT_WITHIN 20 0 graph_info "$M" retired_generations   # the pinned generation went too
EXPECT 0 graph_info "$M" pinned_files
EXPECT 0 graph_info "$M" open_files

# ---- memory: nothing kept per switch ----
for v in $(seq 31 55); do switch_to "$v" >/dev/null || break; done
EXPECT 55 graph_opt "$M" v1-client-0 network.ping-timeout
EXPECT_WITHIN 20 0 graph_info "$M" retired_generations
rss1=$(mount_rss "$M")
for v in $(seq 56 80); do switch_to "$v" >/dev/null || break; done
EXPECT 80 graph_opt "$M" v1-client-0 network.ping-timeout
EXPECT_WITHIN 20 0 graph_info "$M" retired_generations
rss2=$(mount_rss "$M")
echo "# RSS after 50 switches: $rss1 kB, after 75: $rss2 kB"
if [ "${BFS_SAN:-0}" = 1 ]; then
    SKIP "RSS under ASan (its quarantine keeps freed memory; its leak check runs at exit)"
else
    TEST [ $((rss2 - rss1)) -lt 2048 ]
fi

# ---- a graph that cannot come up is not switched to ----
# (with the volume stopped the mount itself answers nothing — the kernel
# checks permissions with fresh attributes — so the log tells)
gen=$(graph_info "$M" generation)
TEST cli volume stop v1 --yes
TEST cli volume set v1 network.ping-timeout 9
EXPECT_WITHIN 20 1 eval "grep -c 'did not come up within 5 s; keeping generation $gen\$' '$T/logs/mount-mnt.log'"
TEST cli volume start v1
# the start is a new revision (a failed one is tried again after 30 s anyway)
EXPECT_WITHIN 45 9 graph_opt "$M" v1-client-0 network.ping-timeout
TEST [ "$(graph_info "$M" failed_switches)" -ge 1 ]
TEST [ "$(graph_info "$M" generation)" -gt $((gen + 1)) ]   # the failed one was dropped
TEST eval "echo after >'$M/after'"
EXPECT after cat "$M/after"

TEST umount_fuse "$M"
done_testing
