#!/usr/bin/env bash
#
# 204-dht-layout-version.t — a FUSE mount stamps and checks distribute's
# `trusted.brickfs.dht.layout-version` on the bricks' roots
# (docs/design/distribute.md "The version on the bricks"). The kernel never
# looks the root up, so the mount makes that lookup itself when a graph
# generation comes up (as GlusterFS's first lookup does):
#   - right after a mount of a fresh volume, with nothing else done on it,
#     every brick's root carries version 1;
#   - a mount whose volfile is older than a brick's stamp (the stamp set to
#     2 by hand, as a newer client would) logs the stale-volfile warning
#     without any file access, and still works.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/dht.sh"

skip_unless_mgmt
skip_unless_brickfs
command -v getfattr >/dev/null && command -v setfattr >/dev/null ||
    SKIP_ALL "getfattr/setfattr (package attr) not installed"

KEY=trusted.brickfs.dht.layout-version

# version_of DIR: the stamp on DIR as hex, or "none".
version_of()
{
    local v
    v=$(getfattr --absolute-names -n "$KEY" -e hex "$1" 2>/dev/null | sed -n "s/^$KEY=//p")
    echo "${v:-none}"
}

TEST start_brickfsd
TEST dht_volume v 2
B0=$T/bricks/v/b0
B1=$T/bricks/v/b1
EXPECT none version_of "$B0"
EXPECT none version_of "$B1"

TEST mount_vol v "$T/m1"
EXPECT_WITHIN 20 0x0000000000000001 version_of "$B0"
EXPECT_WITHIN 20 0x0000000000000001 version_of "$B1"
EXPECT 0 eval "grep -c 'stale volfile' '$T/logs/mount-m1.log'"

# a newer client stamped version 2 on b1: a mount with the volume's
# current volfile (version 1) is stale
TEST setfattr -n "$KEY" -v 0x0000000000000002 "$B1"
TEST mount_vol v "$T/m2"
EXPECT_WITHIN 20 1 eval "grep -c 'has layout-version 2, this client 1: stale volfile' '$T/logs/mount-m2.log'"
EXPECT 0x0000000000000002 version_of "$B1"     # never lowered
TEST eval "echo hello >'$T/m2/f'"
EXPECT hello cat "$T/m1/f"

TEST umount_fuse "$T/m2"
TEST umount_fuse "$T/m1"
done_testing
