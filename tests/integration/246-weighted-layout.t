#!/usr/bin/env bash
#
# 246-weighted-layout.t — the layout follows brick sizes
# (docs/design/rebalance.md, "Tables"): two bricks of 64 MiB (tmpfs) and
# one of 192 MiB added; fix-layout gives the big one 3/5 of the 65,536
# buckets and takes them evenly from the two others; new files follow
# (about 60% of them on the big brick).

# shellcheck disable=SC2046
. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/dht.sh"
. "$(dirname "$0")/../lib/rebal.sh"

skip_unless_mgmt
skip_unless_brickfs

# tmpfs_brick DIR MB: a tmpfs of MB MiB at DIR, unmounted at exit.
tmpfs_brick()
{
    mkdir -p "$1" && mount -t tmpfs -o "size=${2}m" tmpfs "$1" && echo "$1" >>"$T/.run/mgmt-mounts"
}

# buckets VOL: buckets per subvolume of the volume's table ("S*C" runs).
buckets()
{
    cli --json volume info "$1" | python3 -c '
import json, sys
t = json.load(sys.stdin)["layout"]["table"]
c = {}
for run in t.split(","):
    s, n = run.split("*")
    c[int(s)] = c.get(int(s), 0) + int(n)
print(" ".join(str(c.get(i, 0)) for i in range(max(c) + 1)))'
}

TEST start_brickfsd
TEST tmpfs_brick "$T/bricks/w/b0" 64
TEST tmpfs_brick "$T/bricks/w/b1" 64
TEST tmpfs_brick "$T/bricks/w/b2" 192
TEST cli volume create w "127.0.0.1:$T/bricks/w/b0" "127.0.0.1:$T/bricks/w/b1"
TEST cli volume start w
TEST cli volume add-brick w "127.0.0.1:$T/bricks/w/b2"
TEST cli volume rebalance w fix-layout start
EXPECT "13107 13107 39322" buckets w
TEST mount_vol w "$T/m"
TEST dht_check populate "$T/m" 0 600
on_big=$(dht_check counts "$T/bricks/w/b2")
echo "# new files on the big brick: $on_big of 600"
TEST within_pct "$on_big" 360 15
done_testing
