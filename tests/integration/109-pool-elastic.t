#!/usr/bin/env bash
#
# 109-pool-elastic.t — elastic volumes and the self-heal daemon in a pool of
# three brickfsd (nA, nB, nC on 127.0.0.1, one etcd; docs/design/pool.md,
# "Bricks added later, self-heal daemons, rebalance"):
#   - add-brick from a node that owns nothing: the new brick belongs to the
#     node its HOST names, which runs it (and no other node does);
#   - rebalance started from that node runs on a node that owns bricks (the
#     owner of the first brick), is recorded as such in the document, and
#     completes; its state is seen from every node;
#   - a replica 2 volume over nA and nB: a self-heal daemon on each of
#     them, none on nC;
#   - replace-brick of nB's brick by one on nC (asked on nA): the new brick
#     belongs to nC and runs there, nB stops its old brick and its daemon,
#     nC starts one.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/etcd.sh"

skip_unless_mgmt
skip_unless_etcd

TEST start_etcd

online() { at "$1" cli --json volume status "$2" | python3 -c 'import json,sys; print(sum(b["online"] for b in json.load(sys.stdin)["bricks"]))'; }
uuid_of() { at "$1" cli --json pool list | python3 -c 'import json,sys; print([d["uuid"] for d in json.load(sys.stdin)["nodes"] if d["self"]][0])'; }
# doc NODE VOL EXPR: a Python expression over the volume document d
doc() { at "$1" cli --json volume info "$2" | python3 -c "import json,sys; d = json.load(sys.stdin); print($3)"; }
# shd_on NODE VOL: how many brickfs-shd run with NODE's shd.vol of VOL
shd_on()
{
    local d n=0
    for d in /proc/[0-9]*; do
        tr '\0' ' ' <"$d/cmdline" 2>/dev/null |
            grep -q "brickfs-shd .*--volfile $T/mgmt/$1/state/volfiles/$2/shd.vol" && n=$((n + 1))
    done
    echo $n
}
rstate() { at "$1" cli --json volume rebalance "$2" status | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }

TEST pool_node nA
TEST pool_node nB
TEST pool_node nC
TEST at nA cli peer probe "127.0.0.1:$(brickfsd_port nB)"
TEST at nA cli peer probe "127.0.0.1:$(brickfsd_port nC)"
uA=$(uuid_of nA) uB=$(uuid_of nB) uC=$(uuid_of nC)
B=$T/bricks

# ---- add-brick from nC, which owns nothing ----
TEST at nA cli volume create d1 nA:$B/d0 force
TEST at nA cli volume start d1
EXPECT 1 online nC d1
TEST at nC cli volume add-brick d1 nB:$B/d1 force
EXPECT "$uB" doc nA d1 'd["bricks"][1]["node"]'
EXPECT "$uA" doc nA d1 'd["bricks"][0]["node"]'
# both sides' fields survive the document's round trip through etcd
EXPECT "1 2 $uB" doc nC d1 '" ".join(map(str, (d["bricks"][1]["id"], d["next_brick_id"], d["bricks"][1]["node"])))'
EXPECT_WITHIN 30 2 online nC d1
TEST test -s "$(brickfsd_run nB)/bricks/d1-brick-1.pid"
TEST test ! -e "$(brickfsd_run nA)/bricks/d1-brick-1.pid"
TEST test ! -e "$(brickfsd_run nC)/bricks/d1-brick-1.pid"

# ---- rebalance from nC: runs on nA (owner of the first brick), not on nC ----
TEST at nC cli volume rebalance d1 start
EXPECT "$uA" doc nB d1 'd["rebalance"]["node"]'
EXPECT "True" doc nB d1 'd["layout"]["version"] >= 2 and d["bricks"][0]["node"] == "'"$uA"'"'
EXPECT_WITHIN 120 completed rstate nC d1
EXPECT completed rstate nA d1
TEST test -s "$(brickfsd_logs nA)/rebalance/d1.log"
TEST test ! -e "$(brickfsd_logs nC)/rebalance/d1.log"
TEST test ! -e "$(brickfsd_logs nB)/rebalance/d1.log"

# ---- a replica volume over nA and nB: a self-heal daemon on each ----
TEST at nC cli volume create r1 replica 2 nA:$B/ra nB:$B/rb force
TEST at nC cli volume start r1
EXPECT 2 online nA r1
EXPECT_WITHIN 30 1 shd_on nA r1
EXPECT_WITHIN 30 1 shd_on nB r1
EXPECT 0 shd_on nC r1
TEST ! at nC cli volume heal r1                  # nC owns none: says where to ask
EXPECT 1 eval "at nC cli volume heal r1 2>&1 | grep -c 'owns no brick'"
TEST at nB cli volume heal r1

# ---- replace-brick nB's brick by one on nC, asked on nA ----
oldB=$(mgmt_brick_pid r1 1 nB)
TEST [ -n "$oldB" ]
TEST at nA cli volume replace-brick r1 "nB:$B/rb" "nC:$B/rc" commit force   # node names
EXPECT "$uC" doc nB r1 'd["bricks"][1]["node"]'
EXPECT "$B/rc" doc nB r1 'd["bricks"][1]["path"]'
EXPECT_WITHIN 30 2 online nA r1
TEST bfs_wait_gone "$oldB" 30                     # nB stopped its old brick
TEST bfs_wait_until 30 test -s "$(brickfsd_run nC)/bricks/r1-brick-1.pid"
EXPECT_WITHIN 30 0 shd_on nB r1
EXPECT_WITHIN 30 1 shd_on nC r1
EXPECT 1 shd_on nA r1

# ---- stop from nB: every node stops its bricks and daemons ----
TEST at nB cli --yes volume stop r1
EXPECT 0 online nC r1
EXPECT_WITHIN 30 0 shd_on nA r1
EXPECT_WITHIN 30 0 shd_on nC r1

done_testing
