#!/usr/bin/env bash
#
# 114-mgmt-md-cache.t — cache invalidation in the graphs brickfsd makes
# (src/mgmt/volgen.c, docs/design/cache-invalidation.md "Defaults"):
#   - every brick graph has features/upcall; a mount's graph has
#     performance/md-cache (the translator's default timeout on every volume
#     type, replicate and disperse included, unless set); the client.vol
#     brickfsd's own daemons run has none;
#   - two mounts of a one-brick volume: a change made through one is seen
#     through the other (polled: upcalls are asynchronous), and the other's
#     md-cache answers stats without the brick;
#   - `volume set performance.md-cache off` takes it out of the mounts'
#     graph live; features.cache-invalidation off reaches the brick graph;
#   - on a distribute volume, one brick's connection lost and back empties
#     md-cache although distribute keeps that child's down/up to itself.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"

skip_unless_mgmt
skip_unless_brickfs

B=$T/bricks
TEST start_brickfsd
TEST cli volume create v1 "127.0.0.1:$B/b1" force
TEST cli volume set v1 network.ping-timeout "$NETWORK_PING_TIMEOUT"
TEST cli volume start v1
S=$(brickfsd_state)

# ---- the graphs ----
TEST grep -q 'type features/upcall' "$S/volfiles/v1/v1-brick-0.vol"
vf=$(api body GET /v1/volumes/v1/volfile/client)
EXPECT 1 eval "grep -c 'type performance/md-cache' <<<'$vf'"
EXPECT 0 eval "grep -c 'md-cache-timeout' <<<'$vf'"       # one brick: the default
EXPECT 0 eval "grep -c 'md-cache' '$S/volfiles/v1/client.vol'"

# xl_has DIR NAME: 1 when the mount's active graph has translator NAME
xl_has()
{
    python3 - "$1" "$2" <<'PY'
import json, os, sys
v = json.loads(os.getxattr(sys.argv[1], "brickfs.graph"))
print(int(any(x["name"] == sys.argv[2] for x in v["xlators"])))
PY
}
mdc() { graph_info "$1" XL=v1-md-cache dump "$2"; }

# ---- two mounts: changes cross, stats come from memory ----
TEST mount_vol v1 "$T/m1"
TEST mount_vol v1 "$T/m2"
EXPECT 1 xl_has "$T/m1" v1-md-cache
TEST eval "echo one >'$T/m1/f'"
EXPECT_WITHIN 10 4 stat -c %s "$T/m2/f"
TEST eval "echo three >>'$T/m1/f'"
EXPECT_WITHIN 10 10 stat -c %s "$T/m2/f"        # the upcall dropped m2's copy
TEST chmod 600 "$T/m1/f"
EXPECT_WITHIN 10 600 stat -c %a "$T/m2/f"
TEST eval "echo x >'$T/m1/new'"                   # a name m2 has not seen
EXPECT_WITHIN 10 2 stat -c %s "$T/m2/new"
TEST rm -f "$T/m1/new"
EXPECT_WITHIN 10 gone eval "stat '$T/m2/new' >/dev/null 2>&1 && echo there || echo gone"
# a stat with the kernel's caches dropped is answered by md-cache (the
# first one learns the folder's attributes the upcalls above dropped)
TEST eval "sync; echo 3 >/proc/sys/vm/drop_caches"
TEST stat "$T/m2/f"
h0=$(mdc "$T/m2" hits)
TEST eval "sync; echo 3 >/proc/sys/vm/drop_caches"
TEST stat "$T/m2/f"
TEST [ "$(mdc "$T/m2" hits)" -gt "$h0" ]

# ---- the options ----
gen=$(graph_info "$T/m1" generation)
TEST cli volume set v1 performance.md-cache off
EXPECT 0 eval "api body GET /v1/volumes/v1/volfile/client | grep -c md-cache"
EXPECT_WITHIN 20 $((gen + 1)) graph_info "$T/m1" generation
EXPECT 0 xl_has "$T/m1" v1-md-cache
EXPECT 10 stat -c %s "$T/m1/f"
TEST cli volume set v1 features.cache-invalidation off
TEST grep -q 'option features.cache-invalidation off' "$S/volfiles/v1/v1-brick-0.vol"
TEST ! cli volume set v1 performance.md-cache sometimes
TEST umount_fuse "$T/m1"
TEST umount_fuse "$T/m2"

# ---- a distribute volume: the default timeout, and a lost brick empties md-cache ----
TEST cli volume create v2 "127.0.0.1:$B/d1" "127.0.0.1:$B/d2" force
TEST cli volume set v2 network.ping-timeout "$NETWORK_PING_TIMEOUT"
TEST cli volume start v2
EXPECT 0 eval "api body GET /v1/volumes/v2/volfile/client | grep -c 'md-cache-timeout'"
TEST mount_vol v2 "$T/m3"
for i in 1 2 3 4 5 6; do echo "$i" >"$T/m3/g$i"; done
TEST stat "$T/m3/g1"
fl0=$(graph_info "$T/m3" XL=v2-md-cache dump flushes)
flushed_since() { [ "$(graph_info "$T/m3" XL=v2-md-cache dump flushes)" -gt "$1" ] && echo 1; }
# brickfsd down while the brick is: it would restart the brick a second
# after the kill by itself, and on a loaded machine the reconnect's flush
# could then come before fl1 is read (and none after it)
TEST kill_brickfsd
TEST kill_mgmt_brick v2 1
EXPECT_WITHIN 10 1 flushed_since "$fl0"
TEST stat "$T/m3/g1"                          # learned again (if on the live brick)
fl1=$(graph_info "$T/m3" XL=v2-md-cache dump flushes)
TEST start_brickfsd                           # restarts the brick
EXPECT_WITHIN 30 1 flushed_since "$fl1"
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 vol_brick_field v2 1 online
TEST cli volume set v2 performance.md-cache-timeout 30
EXPECT 1 eval "api body GET /v1/volumes/v2/volfile/client | grep -c 'md-cache-timeout 30\$'"
EXPECT 0 eval "api body GET /v1/volumes/v2/volfile/client | grep -c 'md-cache-timeout 10\$'"
TEST umount_fuse "$T/m3"

# ---- replicated and dispersed volumes: the default too (their changelog and
# heals are invalidated exactly: cache-invalidation.md, "Defaults") ----
TEST cli volume create v4 replica 2 "127.0.0.1:$B/r1" "127.0.0.1:$B/r2" force
EXPECT 0 eval "api body GET /v1/volumes/v4/volfile/client | grep -c 'md-cache-timeout'"
TEST cli volume create v5 disperse 3 redundancy 1 "127.0.0.1:$B/e1" "127.0.0.1:$B/e2" "127.0.0.1:$B/e3" force
EXPECT 0 eval "api body GET /v1/volumes/v5/volfile/client | grep -c 'md-cache-timeout'"

done_testing
