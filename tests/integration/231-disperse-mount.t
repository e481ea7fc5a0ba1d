#!/usr/bin/env bash
#
# 231-disperse-mount.t — a dispersed volume made by brickfsd, end to end:
# `volume create d disperse 3 redundancy 1`, start, mount from brickfsd;
# files written through the mount (sizes around the stripe and chunk
# boundaries, and 3 MiB + 1 byte) read back equal, also from a second,
# fresh mount; each brick holds a fragment file of about size/2 (k = 2),
# and the three fragments differ (two data halves and a parity). Then with
# brickfsd killed (so that it restarts nothing): one brick killed, reads
# decode and a new file is written; two killed, a read fails (EIO or
# ENOTCONN), never wrong data; brickfsd restarted restarts the bricks, the
# mount reconnects, everything reads back, and heal gives the brick that
# missed the write its fragment; brick 0's fragments, the healed one
# included, are chunk 0 of every stripe of the data as is (systematic).

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

# ---- bricks down ----
TEST mount_vol d "$T/m3"                      # nothing read through it yet
TEST kill_brickfsd d1 KILL                    # else it restarts killed bricks
TEST kill_mgmt_brick d 0                      # a data brick
for s in 4097 1048576 3145729; do
    TEST cmp "$T/src/f$s" "$T/m3/f$s"         # brick 1's half + parity
done
head -c 300001 /dev/urandom >"$T/src/g"
TEST cp "$T/src/g" "$T/m3/g"                  # written on 2 of 3 bricks
EXPECT 300001 stat -c %s "$T/m3/g"
TEST kill_mgmt_brick d 1                      # 2 of 3 down: more than R
TEST ! cat "$T/m3/f65537"                     # refused, never wrong data
TEST ! test -e "$B/b0/g"

TEST start_brickfsd                           # restarts bricks 0 and 1
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 vol_brick_field d 0 online
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 vol_brick_field d 1 online
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" 0 eval "cmp -s '$T/src/f65537' '$T/m3/f65537'; echo \$?"
TEST mount_vol d "$T/m4"
for s in $sizes; do
    TEST cmp "$T/src/f$s" "$T/m4/f$s"
done
TEST cmp "$T/src/g" "$T/m4/g"
# heal (on access) writes brick 0's fragment of g
EXPECT_WITHIN "$HEAL_TIMEOUT" "$(stat -c %s "$B/b1/g")" eval "stat -c %s '$T/m4/g' >/dev/null; stat -c %s '$B/b0/g' 2>/dev/null"
# systematic layout: brick 0 holds chunk 0 of every stripe of the data as
# is (the last stripe zero-padded), the healed copy included
chunk=$(graph_info "$T/m4" XL=d-disperse-0 dump chunk)
EXPECT 2048 echo "$chunk"                     # auto: a stripe of at most 4 KiB
frag0()
{
    python3 - "$1" "$2" <<'PY'
import sys
data, c = open(sys.argv[1], "rb").read(), int(sys.argv[2])
out = b"".join(data[s:s + c].ljust(c, b"\0") for s in range(0, len(data), 2 * c))
sys.stdout.buffer.write(out)
PY
}
frag0 "$T/src/g" "$chunk" >"$T/g.frag0"
frag0 "$T/src/f$S" "$chunk" >"$T/f.frag0"
TEST cmp "$T/g.frag0" "$B/b0/g"
TEST cmp "$T/f.frag0" "$B/b0/f$S"

for m in m1 m3 m4; do TEST umount_fuse "$T/$m"; done
TEST cli volume stop d --yes

done_testing
