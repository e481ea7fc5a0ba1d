#!/usr/bin/env bash
#
# 108-pool-netns.t — a pool of 3 hosts made of network namespaces
# (tests/lib/netns.sh: 10.99.0.1-3 on a bridge, a client on 10.99.0.100),
# each with a brickfsd and a member of a 3-member etcd
# (docs/design/pool.md):
#   - probe by address; a distribute volume with one brick per host,
#     created on h1, started on h2, set on h3, status from h1;
#   - a mount in the client namespace, volfiles from h3;
#   - h2 cut off (its link down): etcd keeps quorum, management goes on
#     from h1 and h3; h2 shows Disconnected; a stop issued meanwhile names
#     h2's brick; h2 back: it converges by itself (its brick stops), no
#     repair; start again: every brick online;
#   - etcd losing one member: management goes on; every brickfsd
#     restarted: the pool and the volume as before;
#   - etcd members on h2 and h3 stopped (quorum lost): I/O goes on
#     untouched, management fails fast saying etcd is unreachable, and
#     works again once the members are back.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/etcd.sh"
. "$(dirname "$0")/../lib/netns.sh"

skip_unless_mgmt
skip_unless_etcd
require_fuse
require_netns
TEST ns_pool_start 3

nodes() { ns_cli "$1" --json pool list | python3 -c 'import json,sys; print(" ".join(sorted(d["name"] + "=" + d["state"] for d in json.load(sys.stdin)["nodes"])))'; }
online() { ns_cli "$1" --json volume status "$2" | python3 -c 'import json,sys; print(sum(b["online"] for b in json.load(sys.stdin)["bricks"]))'; }
running() { local n=0 i; for i in 1 2 3; do [ -s "$T/mgmt/h$i/run/bricks/$1-brick-$((i - 1)).pid" ] && bfs_pid_alive "$(cat "$T/mgmt/h$i/run/bricks/$1-brick-$((i - 1)).pid")" && n=$((n + 1)); done; echo $n; }

# ---- the pool ----
TEST ns_cli 1 peer probe 10.99.0.2
TEST ns_cli 1 peer probe 10.99.0.3
EXPECT "h1=Connected h2=Connected h3=Connected" nodes 3

# ---- a volume over the three hosts, managed from each ----
NB=$T/nsb
TEST ns_cli 1 volume create v h1:$NB/1 h2:$NB/2 h3:$NB/3 force
EXPECT "10.99.0.1 10.99.0.2 10.99.0.3" eval "ns_cli 3 --json volume info v | python3 -c 'import json,sys; print(\" \".join(b[\"host\"] for b in json.load(sys.stdin)[\"bricks\"]))'"
TEST ns_cli 2 volume start v
TEST ns_cli 3 volume set v network.ping-timeout 3
EXPECT 3 online 1 v
EXPECT 3 running v

# ---- a client in its own namespace, volfiles from h3 ----
M=$T/mnt
TEST mount_fuse mount-c "$M" nsenter --net="/run/netns/$(ns_name c)" -- "$MOUNT_BIN" -f \
    -o "log-file=$T/logs/mount-c.log" "10.99.0.3:24100:/v" "$M"
for i in $(seq 1 12); do echo "file $i" >"$M/f$i"; done
EXPECT "file 5" cat "$M/f5"
on1=$(ls "$NB/1" | grep '^f' | head -1)         # a file on h1's brick
TEST [ -n "$on1" ]

# ---- h2 cut off: quorum kept, management goes on, h2 converges after ----
TEST link_down 2
EXPECT_WITHIN 30 "h1=Connected h2=Disconnected h3=Connected" nodes 1
TEST ns_cli 3 volume set v network.ping-timeout 4
EXPECT "$(cat "$NB/1/$on1")" cat "$M/$on1"
msg=$(ns_cli 1 --yes volume stop v 2>&1)
echo "# stop while h2 is cut off: $msg"
EXPECT 1 eval 'grep -c "1 brick(s) are not known to be stopped: 10.99.0.2:.*disconnected" <<<"$msg"'
EXPECT 1 running v                               # only h2's, which cannot hear
TEST link_up 2
EXPECT_WITHIN 30 0 running v                     # h2 stopped its brick by itself
EXPECT_WITHIN 30 "h1=Connected h2=Connected h3=Connected" nodes 2
TEST ns_cli 3 volume start v
EXPECT 3 online 2 v
# the mount switched to the graph of the option set meanwhile, and
# reconnects to every brick (its own retry pace): new files on all
EXPECT_WITHIN 60 2 graph_info "$M" generation
write_all() { local i; for i in $(seq 1 12); do echo "$1 $i" >"$M/$1$i" 2>/dev/null || return 1; done; }
TEST bfs_wait_until 60 write_all w
EXPECT "file 7" cat "$M/f7"

# ---- etcd loses one member: management goes on ----
TEST bfs_stop "$(bfs_pid_of etcd-h3)"
TEST ns_cli 3 volume set v network.ping-timeout 6     # h3's brickfsd, through h1/h2's members
EXPECT 3 online 1 v
TEST ns_start_etcd 3 3
TEST ns_wait_etcd

# ---- every brickfsd restarted: the pool and the volume as before ----
for i in 1 2 3; do TEST ns_kill_brickfsd $i; done
for i in 1 2 3; do TEST ns_start_brickfsd $i; done
EXPECT "h1=Connected h2=Connected h3=Connected" nodes 2
EXPECT 3 online 3 v
EXPECT 6 eval "ns_cli 1 --json volume get v network.ping-timeout | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"options\"][0][\"value\"])'"
TEST bfs_wait_until 60 write_all r       # (the mount may be switching to the ping-timeout 6 graph)

# ---- etcd loses quorum (members 2 and 3 stopped): I/O goes on untouched,
# management fails fast and cleanly, and works again with quorum back ----
TEST bfs_stop "$(bfs_pid_of etcd-h2)"
TEST bfs_stop "$(bfs_pid_of etcd-h3)"
t0=$(date +%s)
msg=$(ns_cli 1 volume set v network.ping-timeout 5 2>&1)
rc=$?
t1=$(date +%s)
echo "# set without quorum: $msg"
TEST [ "$rc" = 1 ]
EXPECT 1 eval 'grep -c "etcd is unreachable.*volumes keep serving I/O" <<<"$msg"'
TEST [ $((t1 - t0)) -lt 30 ]
TEST write_all g
EXPECT "g 9" cat "$M/g9"
EXPECT "file 2" cat "$M/f2"
EXPECT 12 eval 'ls "$NB/1" "$NB/2" "$NB/3" | grep -c "^g"'
TEST ns_start_etcd 2 3
TEST ns_start_etcd 3 3
TEST ns_wait_etcd
TEST bfs_wait_until 30 ns_cli 1 volume set v network.ping-timeout 5
EXPECT 5 eval "ns_cli 2 --json volume get v network.ping-timeout | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"options\"][0][\"value\"])'"

TEST umount_fuse "$M"
TEST ns_cli 1 --yes volume stop v
EXPECT 0 running v

done_testing
