#!/usr/bin/env bash
#
# 105-store-etcd.t — the etcd store backend (src/mgmt/store-etcd.c) against
# a real etcd: the same store contract as the local store
# (tests/lib/store-contract.h, through build/tests/tools/store_contract),
# leases, all-or-nothing multi-key writes, endpoint failover, failing fast
# with nothing listening, and a restart of etcd (data kept, the store works
# again). Each run of the contract uses its own key prefix: it needs an
# empty store.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/etcd.sh"

skip_unless_etcd
SC=$BFS_BUILD/tests/tools/store_contract
[ -x "$SC" ] || SKIP_ALL "$SC is not built"
command -v etcdctl >/dev/null || SKIP_ALL "etcdctl is not installed (Debian: etcd-client)"

TEST start_etcd
url=$(etcd_url)
dead=http://127.0.0.1:$(free_port)
ectl() { ETCDCTL_API=3 etcdctl --endpoints "$url" "$@"; }

# the contract (its TAP lines are shown when it fails)
TEST "$SC" "etcd:$url;prefix=run1/" "$dead"
out=$("$SC" "etcd:$url;prefix=run2/" 2>&1)
EXPECT 0 eval "echo \"\$out\" | grep -c '^not ok'"
TEST eval "echo \"\$out\" | grep -q '^ok 60 '"     # it ran to the end

# keys really are in etcd, under the prefix, as written
EXPECT uno ectl get run1/volumes/a --print-value-only
EXPECT "" ectl get brickfs/volumes/a --print-value-only

# etcd restarted: the data is there and the store works again
TEST stop_etcd
TEST ! "$SC" "etcd:$url;timeout=300;prefix=run3/"
TEST start_etcd
EXPECT uno ectl get run1/volumes/a --print-value-only
TEST "$SC" "etcd:$url;prefix=run4/"

done_testing
