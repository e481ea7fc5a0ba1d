#!/usr/bin/env bash
#
# 102-pool-ports.t — brick ports in a pool are unique per host, not per
# pool (docs/design/pool.md, "Each brickfsd's loop"; found by
# scripts/pool-scale.sh): three hosts made of network namespaces
# (tests/lib/netns.sh) whose brickfsd have a brick port range of 2; h1
# creates two volumes with a brick on h2 and one on h3 each. Before the
# fix every brick of the pool took a port of the creating node's range
# that no other brick of the pool had, so a pool held as many bricks as
# one range has ports and the second volume was refused ("no free brick
# port"). Now the bricks of one host have distinct ports, bricks of
# different hosts may share one, and every brick runs on its host.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/etcd.sh"
. "$(dirname "$0")/../lib/netns.sh"

skip_unless_mgmt
skip_unless_etcd
require_netns

NS_BRICK_PORTS=24200-24201
TEST ns_pool_start 3
TEST ns_cli 1 peer probe 10.99.0.2
TEST ns_cli 1 peer probe 10.99.0.3
online() { ns_cli "$1" --json volume status "$2" | python3 -c 'import json,sys; print(sum(b["online"] for b in json.load(sys.stdin)["bricks"]))'; }
# ports HOST VOL...: the ports of the bricks on HOST (10.99.0.I) in VOL...
ports()
{
    local h=$1 v
    shift
    for v in "$@"; do
        ns_cli 1 --json volume info "$v" | python3 -c '
import json, sys
print("\n".join(str(b["port"]) for b in json.load(sys.stdin)["bricks"] if b["host"] == sys.argv[1]))' "$h"
    done | sort | tr '\n' ' ' | sed 's/ $//'
}
NB=$T/nsb

TEST ns_cli 1 volume create p1 h2:$NB/b1 h3:$NB/c1 force
TEST ns_cli 1 volume create p2 h2:$NB/b2 h3:$NB/c2 force
EXPECT "24200 24201" ports 10.99.0.2 p1 p2     # two bricks on h2: both ports of the range
EXPECT "24200 24201" ports 10.99.0.3 p1 p2     # the same two on h3: another host
TEST ! ns_cli 1 volume create p3 h2:$NB/b3 force  # h2 has no port left...
EXPECT 1 eval "ns_cli 1 volume create p3 h2:$NB/b3 force 2>&1 | grep -c 'no free brick port'"
TEST ns_cli 1 volume create p3 h1:$NB/a3 force    # ...h1 has
TEST ns_cli 3 volume start p1
TEST ns_cli 2 volume start p2
EXPECT 2 online 1 p1
EXPECT 2 online 1 p2

TEST ns_cli 1 --yes volume stop p1
TEST ns_cli 1 --yes volume stop p2

done_testing
