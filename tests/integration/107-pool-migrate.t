#!/usr/bin/env bash
#
# 107-pool-migrate.t — a single node moves from its local store to etcd
# (docs/design/pool.md, "Moving a single node to etcd"): a started volume on
# the local store; brickfsd restarted with --store etcd:... against an empty
# etcd imports it in one transaction, adopts the running brick (no
# interruption: same pid, the mount keeps working) and remembers the store;
# a restart without the flag stays in the pool; a start with another store
# is refused, as is a node with volumes joining a pool that exists.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/etcd.sh"

skip_unless_mgmt
skip_unless_etcd
require_fuse

B=$T/bricks
TEST start_brickfsd d1
TEST cli volume create v1 127.0.0.1:$B/one force
TEST cli volume start v1
EXPECT 1 vol_brick_field v1 0 online
EXPECT local eval "cli --json pool list >/dev/null && curl -s --noproxy '*' http://\$BRICKFS_SERVER/v1/node | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"store\"])'"
M=$T/mnt
mkdir -p "$M"
TEST mount_vol v1 "$M"
echo before >"$M/a"
pid=$(mgmt_brick_pid v1 0)

# ---- the move ----
TEST start_etcd
url=$(etcd_url)
TEST kill_brickfsd d1 TERM
TEST eval 'BRICKFSD_STORE="etcd:$url" start_brickfsd d1'
EXPECT "$pid" mgmt_brick_pid v1 0                  # the brick was adopted, not restarted
EXPECT started vol_field v1 status
EXPECT 1 vol_brick_field v1 0 online
EXPECT 1 eval "ETCDCTL_API=3 etcdctl --endpoints $url get --prefix brickfs/volumes/ --keys-only | grep -c volumes/v1"
EXPECT etcd eval "curl -s --noproxy '*' http://\$BRICKFS_SERVER/v1/node | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"store\"])'"
EXPECT 1 eval "cli --json pool list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)[\"nodes\"]))'"
echo after >"$M/b"
EXPECT before cat "$M/a"
EXPECT after cat "$M/b"

# ---- the store is remembered; another one is refused ----
TEST kill_brickfsd d1 TERM
TEST start_brickfsd d1                             # no flag: still etcd
EXPECT etcd eval "curl -s --noproxy '*' http://\$BRICKFS_SERVER/v1/node | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"store\"])'"
TEST cli volume set v1 network.ping-timeout 7      # changes go to etcd
EXPECT 1 eval "ETCDCTL_API=3 etcdctl --endpoints $url get brickfs/volumes/v1 --print-value-only | grep -c ping-timeout"
TEST kill_brickfsd d1 TERM
S=$T/mgmt/d1
out=$("$BRICKFSD_BIN" --foreground --store local --state-dir "$S/state" --log-dir "$S/log" --run-dir "$S/run" --listen "127.0.0.1:$(brickfsd_port d1)" 2>&1)
EXPECT 1 eval 'grep -c "belongs to the pool in etcd:" <<<"$out"'

# ---- a node with volumes cannot join a pool that exists ----
TEST start_brickfsd d2
TEST cli volume create v2 127.0.0.1:$B/two force
TEST kill_brickfsd d2 TERM
S=$T/mgmt/d2
out=$("$BRICKFSD_BIN" --foreground --store "etcd:$url" --state-dir "$S/state" --log-dir "$S/log" --run-dir "$S/run" --listen "127.0.0.1:$(brickfsd_port d2)" 2>&1)
EXPECT 1 eval 'grep -c "cannot join another pool" <<<"$out"'
EXPECT 0 eval "ETCDCTL_API=3 etcdctl --endpoints $url get brickfs/volumes/v2 --keys-only | grep -c v2"

TEST start_brickfsd d1
TEST umount_fuse "$M"
TEST cli --yes volume stop v1

done_testing
