#!/usr/bin/env bash
#
# 106-pool-loopback.t — a pool of three brickfsd (nA, nB, nC: own state
# folders and ports, all on 127.0.0.1) on one etcd (docs/design/pool.md):
# bootstrap and peer probe; a distribute volume with one brick per node
# created on A, started on B, its status from C with every brick online and
# each brick run by its own node only; a mount from C's volfile server;
# B's brickfsd killed and restarted (same pool, bricks adopted); etcd
# stopped: management fails fast with a clear message while I/O goes on;
# etcd back: management works again; stop from C, detach rules.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/etcd.sh"

skip_unless_mgmt
skip_unless_etcd
require_fuse

TEST start_etcd

node_count() { at "$1" cli --json pool list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["nodes"]))'; }
connected() { at "$1" cli --json pool list | python3 -c 'import json,sys; print(sum(d["state"] == "Connected" for d in json.load(sys.stdin)["nodes"]))'; }
online() { at "$1" cli --json volume status "$2" | python3 -c 'import json,sys; print(sum(b["online"] for b in json.load(sys.stdin)["bricks"]))'; }

TEST pool_node nA
TEST pool_node nB
TEST pool_node nC

# ---- membership ----
EXPECT 1 node_count nA                      # nA created the pool; B, C wait for a probe
EXPECT "Number of Peers: 0" eval 'at nA cli peer status | head -1'
TEST ! at nB cli peer probe "127.0.0.1:$(brickfsd_port nC)"    # B is no member yet
EXPECT 1 eval "at nB cli peer probe 127.0.0.1:$(brickfsd_port nC) 2>&1 | grep -c 'not a member'"
TEST at nA cli peer probe "127.0.0.1:$(brickfsd_port nB)"
TEST at nB cli peer probe "127.0.0.1:$(brickfsd_port nC)"      # B is one now
EXPECT 3 node_count nC
EXPECT 3 connected nC
EXPECT "Number of Peers: 2" eval 'at nC cli peer status | head -1'
EXPECT 1 eval "at nA cli peer probe 127.0.0.1:$(brickfsd_port nB) | grep -c 'already in the pool'"
dead=$(free_port)
TEST ! at nA cli peer probe "127.0.0.1:$dead"
EXPECT 1 eval "at nA cli peer probe 127.0.0.1:$dead 2>&1 | grep -c 'cannot reach brickfsd'"
uuidB=$(at nB cli --json pool list | python3 -c 'import json,sys; print([d["uuid"] for d in json.load(sys.stdin)["nodes"] if d["self"]][0])')

# ---- a volume over the three nodes ----
B=$T/bricks
TEST at nA cli volume create v1 nA:$B/a nB:$B/b nC:$B/c force
EXPECT 3 eval "at nC cli --json volume info v1 | python3 -c 'import json,sys; print(len(set(b[\"node\"] for b in json.load(sys.stdin)[\"bricks\"])))'"
EXPECT "$uuidB" eval "at nA cli --json volume info v1 | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"bricks\"][1][\"node\"])'"
TEST at nB cli volume start v1
EXPECT 3 online nC v1
EXPECT 3 online nA v1
# each brick run by its own node, and by no other
TEST test -s "$(brickfsd_run nA)/bricks/v1-brick-0.pid"
TEST test -s "$(brickfsd_run nB)/bricks/v1-brick-1.pid"
TEST test -s "$(brickfsd_run nC)/bricks/v1-brick-2.pid"
TEST test ! -e "$(brickfsd_run nA)/bricks/v1-brick-1.pid"
TEST test ! -e "$(brickfsd_run nB)/bricks/v1-brick-2.pid"
TEST test ! -e "$(brickfsd_run nC)/bricks/v1-brick-0.pid"
EXPECT 3 eval "bfs__mgmt_brick_pids | wc -l"

# ---- a mount from C's volfile server ----
M=$T/mnt
mkdir -p "$M"
TEST eval 'BRICKFS_SERVER=127.0.0.1:$(brickfsd_port nC) mount_vol v1 "$M"'
for i in $(seq 1 12); do echo "data $i" >"$M/f$i"; done
EXPECT "data 7" cat "$M/f7"
TEST eval '[ "$(ls "$B/a" "$B/b" "$B/c" | grep -c "^f")" -eq 12 ]'
TEST eval '[ -n "$(ls "$B/b" | grep "^f")" ]'   # B's brick got files too

# ---- B's brickfsd killed and restarted: same pool, its brick adopted ----
pidB=$(mgmt_brick_pid v1 1 nB)
TEST kill_brickfsd nB
TEST pool_node nB
EXPECT 3 node_count nB
EXPECT "$pidB" mgmt_brick_pid v1 1 nB
EXPECT 3 online nB v1
EXPECT started eval "at nB cli --json volume info v1 | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"status\"])'"

# ---- etcd stopped: I/O goes on, management fails fast and says why ----
TEST stop_etcd
t0=$(date +%s)
TEST ! at nA cli volume create v2 nA:$B/v2 force
msg=$(at nA cli volume create v2 nA:$B/v2 force 2>&1)
t1=$(date +%s)
EXPECT 1 eval 'grep -c "etcd is unreachable (http://127.0.0.1:.*); volumes keep serving I/O" <<<"$msg"'
EXPECT 1 eval 'wc -l <<<"$msg"'
TEST ! at nA cli volume list          # any command that needs the store
EXPECT 1 eval 'at nA cli volume list 2>&1 | grep -c "etcd is unreachable"' 
TEST [ $((t1 - t0)) -lt 30 ]          # fails fast, not after a long hang
TEST ! at nB cli peer status
echo "written while etcd is down" >"$M/during"
EXPECT "written while etcd is down" cat "$M/during"
EXPECT "data 3" cat "$M/f3"

# ---- etcd back: management works again, no repair ----
TEST start_etcd
TEST bfs_wait_until 20 at nA cli volume create v2 nA:$B/v2 force
EXPECT 3 connected nA
EXPECT 3 online nC v1

# ---- detach rules, stop from C ----
TEST ! at nA cli peer detach nC                       # it has bricks
EXPECT 1 eval "at nA cli peer detach nC 2>&1 | grep -c 'brick'"
TEST ! at nA cli peer detach nA                       # itself
TEST umount_fuse "$M"
TEST at nC cli --yes volume stop v1
EXPECT 0 online nA v1
EXPECT 0 eval "bfs__mgmt_brick_pids | wc -l"
TEST at nB cli --yes volume delete v1
TEST at nA cli peer detach nC
EXPECT 2 node_count nA
EXPECT "Number of Peers: 1" eval 'at nB cli peer status | head -1'

done_testing
