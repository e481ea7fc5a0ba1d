#!/usr/bin/env bash
#
# 104-pool-netns-replica.t — a replica 3 volume with one brick per host on
# a pool of 3 hosts made of network namespaces (tests/lib/netns.sh; a
# brickfsd and an etcd member on each host, the client in a 4th namespace;
# docs/design/pool.md, "Failures"):
#   - created on h2, set on h3, started on h1; a self-heal daemon on every
#     host;
#   - the client mounts with h1 first and h2, h3 as backup volfile servers
#     while h1 is cut off (link down): the mount fails over to h2 and
#     works on the two bricks it reaches; files written then miss h1's
#     brick; an option set from h3 meanwhile;
#   - h1 back: its brickfsd converges by itself (Connected, its brick
#     online, the option set while it was away in its daemon's volfile), its brick
#     rejoins, the self-heal daemons heal it (`volume heal r info` reaches
#     0 with no client access) and the three bricks are identical;
#   - h2 (the mount's volfile server now) cut off while a file is written
#     through the mount: I/O goes on; an option set from h1 reaches the
#     mount through another volfile server (a new graph generation); h2
#     back: healed the same way;
#   - every brickfsd restarted: the pool, the volume, its bricks and its
#     daemons as before, nothing pending.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/etcd.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/replica.sh"

skip_unless_mgmt
skip_unless_etcd
require_fuse
require_netns
TEST ns_pool_start 3
TEST ns_cli 1 peer probe 10.99.0.2
TEST ns_cli 1 peer probe 10.99.0.3

nodes() { ns_cli "$1" --json pool list | python3 -c 'import json,sys; print(" ".join(sorted(d["name"] + "=" + d["state"] for d in json.load(sys.stdin)["nodes"])))'; }
online() { ns_cli "$1" --json volume status "$2" | python3 -c 'import json,sys; print(sum(b["online"] for b in json.load(sys.stdin)["bricks"]))'; }
pending() { ns_cli "$1" --json volume heal "$2" info summary | python3 -c 'import json,sys; print(json.load(sys.stdin)["total_pending"])'; }
# shd_here I VOL: 1 when host I's brickfsd runs a self-heal daemon of VOL
shd_here()
{
    local p=$T/mgmt/h$1/run/shd/$2.pid
    [ -s "$p" ] && bfs_pid_alive "$(cat "$p")" && echo 1 || echo 0
}
# shd_opt I VOL KEY: KEY's value in the volfile of host I's self-heal
# daemon of VOL, which host I writes from the volume document it read
shd_opt() { awk -v k="$3" '$1 == "option" && $2 == k { print $3; exit }' "$T/mgmt/h$1/state/volfiles/$2/shd.vol" 2>/dev/null; }
# healed I: host I's daemon asked to crawl, nothing pending, the bricks identical
healed()
{
    ns_cli "$1" volume heal r >/dev/null 2>&1
    [ "$(pending "$1" r)" = 0 ] || { echo pending; return; }
    brick_compare "$NB/1" "$NB/2" "$NB/3" | tail -n 1 | awk '{ print $1 }'
}

# ---- a replica 3 volume, one brick per host, managed from each ----
NB=$T/nsb
TEST ns_cli 2 volume create r replica 3 h1:$NB/1 h2:$NB/2 h3:$NB/3 force
TEST ns_cli 3 volume set r network.ping-timeout 3
TEST ns_cli 1 volume start r
EXPECT 3 online 2 r
for i in 1 2 3; do EXPECT_WITHIN 30 1 shd_here $i r; done
EXPECT_WITHIN 30 3 shd_opt 1 r network.ping-timeout

# ---- h1 cut off; the client mounts with h1 first: fails over to h2 ----
TEST link_down 1
EXPECT_WITHIN 30 "h1=Disconnected h2=Connected h3=Connected" nodes 2
M=$T/mnt
TEST mount_fuse mount-c "$M" nsenter --net="/run/netns/$(ns_name c)" -- "$MOUNT_BIN" -f \
    -o "log-file=$T/logs/mount-c.log,backup-volfile-servers=10.99.0.2:24100:10.99.0.3:24100" \
    "10.99.0.1:24100:/r" "$M"
EXPECT 1 eval "grep -c 'volfile server is now 10.99.0.2:24100' '$T/logs/mount-c.log'"
mkdir -p "$M/d"
for i in $(seq 1 20); do echo "away $i" >"$M/d/a$i"; done
EXPECT "away 7" cat "$M/d/a7"
TEST [ ! -e "$NB/1/d/a7" ]                      # h1's brick missed them
TEST [ -e "$NB/2/d/a7" ]
TEST ns_cli 3 volume set r network.ping-timeout 5
EXPECT_WITHIN 30 5 shd_opt 2 r network.ping-timeout
EXPECT 3 shd_opt 1 r network.ping-timeout       # h1 cannot hear it yet

# ---- h1 back: converges by itself, its brick rejoins, the daemons heal ----
TEST link_up 1
EXPECT_WITHIN 60 "h1=Connected h2=Connected h3=Connected" nodes 3
EXPECT_WITHIN 30 3 online 1 r
EXPECT_WITHIN 30 1 shd_here 1 r
EXPECT_WITHIN 30 5 shd_opt 1 r network.ping-timeout   # caught up from the store
EXPECT_WITHIN 120 identical healed 2
EXPECT 0 pending 1 r
EXPECT "away 13" cat "$NB/1/d/a13"             # healed by the daemons, no client read

# ---- h2 (the volfile server now) cut off during a write; volfiles from h1/h3 ----
gen0=$(graph_info "$M" generation)
exec 7>"$M/d/long"
echo "before" >&7
TEST link_down 2
EXPECT_WITHIN 30 "h1=Connected h2=Disconnected h3=Connected" nodes 1
echo "during" >&7
for i in $(seq 1 10); do echo "cut $i" >"$M/d/c$i"; done
TEST ns_cli 1 volume set r network.ping-timeout 4
EXPECT_WITHIN 60 "$((gen0 + 1))" graph_info "$M" generation
TEST grep -q -E 'volfile server is now 10.99.0.(1|3):24100' "$T/logs/mount-c.log"
echo "after" >&7
exec 7>&-
EXPECT "before during after" eval "tr '\n' ' ' <'$M/d/long' | sed 's/ \$//'"
TEST link_up 2
EXPECT_WITHIN 60 "h1=Connected h2=Connected h3=Connected" nodes 2
EXPECT_WITHIN 60 4 shd_opt 2 r network.ping-timeout   # h2 caught up
EXPECT_WITHIN 30 3 online 3 r
EXPECT_WITHIN 120 identical healed 3
EXPECT "cut 4" cat "$NB/2/d/c4"

# ---- every brickfsd restarted: everything as before ----
for i in 1 2 3; do TEST ns_kill_brickfsd $i; done
for i in 1 2 3; do TEST ns_start_brickfsd $i; done
EXPECT "h1=Connected h2=Connected h3=Connected" nodes 3
EXPECT_WITHIN 30 3 online 1 r
for i in 1 2 3; do EXPECT_WITHIN 30 1 shd_here $i r; done
EXPECT 0 pending 2 r
echo "again" >"$M/d/again"
EXPECT again cat "$NB/3/d/again"

TEST umount_fuse "$M"
TEST ns_cli 2 --yes volume stop r
for i in 1 2 3; do EXPECT_WITHIN 30 0 shd_here $i r; done

done_testing
