#!/usr/bin/env bash
#
# 231-disperse-mount.t — a dispersed volume made by brickfsd, end to end:
# `volume create d disperse 3 redundancy 1`, start, mount from brickfsd;
# files written through the mount (sizes around the stripe and chunk
# boundaries, and 3 MiB + 1 byte) read back equal, also from a second,
# fresh mount; each brick holds a fragment file of about size/2 (k = 2),
# and the three fragments differ (two data halves and a parity).

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"

skip_unless_mgmt
skip_unless_brickfs
require_fuse
[ -e "$BFS_BUILD/lib/brickfs/xlators/cluster/disperse.so" ] ||
    SKIP_ALL "cluster/disperse is not built"

B=$T/bricks
TEST start_brickfsd
TEST cli volume create d disperse 3 redundancy 1 "127.0.0.1:$B/b0" "127.0.0.1:$B/b1" \
    "127.0.0.1:$B/b2" force
TEST cli volume set d network.ping-timeout "$NETWORK_PING_TIMEOUT"
TEST cli volume start d
TEST mount_vol d "$T/m1"

# ---- files of many sizes, written and read back ----
sizes="0 1 511 512 513 4095 4096 4097 8191 8192 65537 1048576 3145729"
mkdir -p "$T/src"
for s in $sizes; do
    head -c "$s" /dev/urandom >"$T/src/f$s"
    TEST cp "$T/src/f$s" "$T/m1/f$s"
done
for s in $sizes; do
    EXPECT "$s" stat -c %s "$T/m1/f$s"
    TEST cmp "$T/src/f$s" "$T/m1/f$s"
done

# a second mount starts with nothing cached
TEST mount_vol d "$T/m2"
for s in $sizes; do
    TEST cmp "$T/src/f$s" "$T/m2/f$s"
done
TEST umount_fuse "$T/m2"

# ---- fragments on the bricks: about size/2 each, all different ----
S=3145729
for i in 0 1 2; do
    f=$B/b$i/f$S
    TEST test -f "$f"
    sz=$(stat -c %s "$f")
    # k = 2: at least half the size, at most one stripe's chunk (<= 64 KiB) more
    EXPECT 1 eval "[ $sz -ge $((S / 2)) ] && [ $sz -le $((S / 2 + 65536)) ] && echo 1 || echo 'fragment $i: $sz bytes'"
done
TEST ! cmp -s "$B/b0/f$S" "$B/b1/f$S"
TEST ! cmp -s "$B/b0/f$S" "$B/b2/f$S"
TEST ! cmp -s "$B/b1/f$S" "$B/b2/f$S"
# total on the bricks: about 1.5 x the data, not 3 x
total=$(($(stat -c %s "$B/b0/f$S") + $(stat -c %s "$B/b1/f$S") + $(stat -c %s "$B/b2/f$S")))
EXPECT 1 eval "[ $total -le $((S * 3 / 2 + 3 * 65536)) ] && echo 1 || echo 'total $total'"

TEST umount_fuse "$T/m1"
TEST cli volume stop d --yes

done_testing
