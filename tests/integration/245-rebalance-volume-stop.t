#!/usr/bin/env bash
#
# 245-rebalance-volume-stop.t — a rebalance and the volume's life
# (docs/design/rebalance.md): `volume stop` pauses a running rebalance and
# ends its process (it needs the bricks); after `volume start`,
# `rebalance resume` completes it; `volume delete` removes its checkpoint.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/dht.sh"
. "$(dirname "$0")/../lib/rebal.sh"

skip_unless_mgmt
skip_unless_brickfs

TEST start_brickfsd
TEST dht_volume v 3
TEST mount_vol v "$T/m"
TEST big_files "$T/m/big" 32 1   # ~8 MiB to move at 1 MB/s: still running when the volume stops, even on a loaded machine
TEST big_check "$T/m/big"
mkdir -p $T/bricks/v/b3
TEST cli volume add-brick v 127.0.0.1:$T/bricks/v/b3 force
TEST cli volume set v cluster.rebal-max-mbps 1
TEST cli volume rebalance v start
EXPECT_WITHIN 30 in-progress rebal_state v
TEST umount_fuse "$T/m"
TEST cli --yes volume stop v
EXPECT paused rebal_state v
EXPECT 0 rebal_pid v
TEST cli volume start v
TEST cli volume set v cluster.rebal-max-mbps 0
TEST cli volume rebalance v resume
EXPECT_WITHIN 60 completed rebal_state v
TEST mount_vol v "$T/m"
TEST big_check "$T/m/big"
EXPECT 0 rebal_dups v
TEST umount_fuse "$T/m"
TEST cli --yes volume stop v
TEST cli --yes volume delete v
TEST [ ! -e "$(brickfsd_state)/rebalance/v" ]
done_testing
