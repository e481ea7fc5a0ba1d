#!/usr/bin/env bash
#
# 103-pool-detach-race.t — peer detach against a volume given a brick on
# the leaving node at the same moment, from another node (docs/design/
# pool.md, "Bootstrap, probe, detach"). Four brickfsd on 127.0.0.1, one
# etcd; BRICKFSD_TEST_PAUSE holds each race open at its worst point:
#   - nA detaches nB and pauses between counting nB's bricks (none) and
#     removing it; meanwhile nB creates a volume with a brick on itself:
#     the detach fails ("changed meanwhile") and nB stays a member that
#     owns that brick;
#   - nC creates a volume with a brick on nB and pauses between resolving
#     nB and saving the document; meanwhile nD detaches nB: the create
#     fails saying the node left the pool, and no volume is left behind.
# Before the fix the detach removed nB in the first race and the create
# saved a brick owned by a node outside the pool in the second.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/etcd.sh"

skip_unless_mgmt
skip_unless_etcd

TEST start_etcd
members() { at nD cli --json pool list | python3 -c 'import json,sys; print(" ".join(sorted(d["name"] for d in json.load(sys.stdin)["nodes"])))'; }
uuid_of() { at nD cli --json pool list | python3 -c 'import json,sys; print([d["uuid"] for d in json.load(sys.stdin)["nodes"] if d["name"] == sys.argv[1]][0])' "$1"; }
owner() { at nD cli --json volume info "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["bricks"][0]["node"])'; }
paused() { grep -c "test pause at $2" "$T/mgmt/$1/log/brickfsd.log"; }
B=$T/bricks

BRICKFSD_TEST_PAUSE=detach=3000 TEST pool_node nA
TEST pool_node nB
BRICKFSD_TEST_PAUSE=volume-save=3000 TEST pool_node nC
TEST pool_node nD
for n in nB nC nD; do TEST at nA cli peer probe "127.0.0.1:$(brickfsd_port "$n")"; done
EXPECT "nA nB nC nD" members

# ---- a volume on nB created while nA detaches nB ----
at nA cli peer detach nB >"$T/detach.out" 2>&1 &
det=$!
EXPECT_WITHIN 30 1 paused nA detach
TEST at nB cli volume create v1 nB:$B/v1 force
wait "$det"
EXPECT 1 echo $?                                  # the detach failed...
cat "$T/detach.out" | sed 's/^/# /'
EXPECT 1 eval "grep -c 'changed meanwhile' '$T/detach.out'"
EXPECT "nA nB nC nD" members                      # ...and nB is still in the pool
EXPECT "$(uuid_of nB)" owner v1
TEST ! at nD cli peer detach nB                   # it owns a brick now
TEST at nB cli --yes volume delete v1

# ---- nB detached while nC creates a volume on it ----
at nC cli volume create v2 nB:$B/v2 force >"$T/create.out" 2>&1 &
cre=$!
EXPECT_WITHIN 30 1 paused nC volume-save
TEST at nD cli peer detach nB
wait "$cre"
EXPECT 1 echo $?                                  # the create failed...
cat "$T/create.out" | sed 's/^/# /'
EXPECT 1 eval "grep -c 'no longer in the pool' '$T/create.out'"
TEST ! at nD cli volume info v2                   # ...and left no volume
EXPECT "nA nC nD" members

# ---- without a race: detach and create work as before ----
TEST at nD cli volume create v3 nC:$B/v3 force
EXPECT "$(uuid_of nC)" owner v3
TEST at nD cli --yes volume delete v3

done_testing
