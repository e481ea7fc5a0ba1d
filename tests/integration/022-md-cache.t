#!/usr/bin/env bash
#
# 022-md-cache.t — metadata caching with cache invalidation
# (docs/design/cache-invalidation.md): features/upcall on the brick,
# performance/md-cache on two mounts of the same one-brick volume.
#
# - the cache answers: after the kernel forgot every name (drop_caches),
#   a stat of a known file and of a missing name in a folder this mount
#   made reach the brick no more (the client's io-stats, below md-cache,
#   count no lookup), nor after the file was read (a small file, read from
#   its open's prefetch: performance-notes 36);
# - a change on one mount is seen on the other within a bounded time
#   (polled, no sleeps), for size, mode, new names in a folder the other
#   mount knows complete, unlinks and renames; M2 also has 60 s kernel
#   attribute and entry timeouts, so its kernel caches must be invalidated
#   too;
# - a lost connection empties the cache: a change made on the brick's disk
#   while the brick is down shows after it is back;
# - md-cache over a brick without features/upcall caches nothing.
# tags: sanitizer

. "$(dirname "$0")/../lib/test.sh"

[ -x "$MOUNT_BIN" ] || SKIP_ALL "$MOUNT_BIN is not built"
[ -x "$BRICK_BIN" ] || SKIP_ALL "$BRICK_BIN is not built"
require_fuse
require_root

PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON=$(command -v python3)

# lookups MOUNT: lookup + stat fops that went below md-cache (client io-stats)
lookups()
{
    getfattr -n brickfs.io-stats --only-values "$1" 2>/dev/null | "$PYTHON" -c '
import json, sys
f = json.load(sys.stdin)["fops"]
print(f.get("lookup", {}).get("count", 0) + f.get("stat", {}).get("count", 0))'
}
forget() { sync; echo 2 >/proc/sys/vm/drop_caches; }
size_of() { stat -c %s "$1" 2>/dev/null || echo gone; }
mode_of() { stat -c %a "$1" 2>/dev/null || echo gone; }
exists() { [ -e "$1" ] && echo yes || echo no; }

export BFS_MD_CACHE=60
TEST write_volfiles b1 "$T/bricks/b1"
TEST grep -q features/upcall "$(brick_volfile b1)"
TEST grep -q performance/md-cache "$(client_volfile b1)"
TEST start_brick b1
BRICK=$(brick_dir b1)
M1=$T/m1
M2=$T/m2
TEST mount_brickfs "$(client_volfile b1)" "$M1"
TEST mount_brickfs "$(client_volfile b1)" "$M2" -o attr-timeout=60,entry-timeout=60

# ---- the cache answers ----
TEST mkdir "$M1/d"
TEST eval "printf hello >'$M1/d/f'"
n0=$(lookups "$M1")
TEST forget
EXPECT 5 size_of "$M1/d/f"
EXPECT no exists "$M1/d/missing"
EXPECT "$n0" lookups "$M1"
EXPECT hello cat "$M1/d/f"
# that read was answered from the open's prefetch (5 bytes): md-cache kept
# the open's attributes, so the kernel's next LOOKUP (a delete's) stays here
TEST forget
EXPECT 5 size_of "$M1/d/f"
EXPECT "$n0" lookups "$M1"

# ---- one mount's changes seen on the other ----
EXPECT 5 size_of "$M2/d/f"             # M2 caches it now (md-cache and kernel)
TEST eval "printf ' world' >>'$M1/d/f'"
EXPECT_WITHIN 10 11 size_of "$M2/d/f"
EXPECT "hello world" cat "$M2/d/f"
TEST chmod 600 "$M1/d/f"
EXPECT_WITHIN 10 600 mode_of "$M2/d/f"
# a folder M2 made: M2 knows all its names and answers "no such name"
TEST mkdir "$M2/n"
EXPECT no exists "$M2/n/x"
n2=$(lookups "$M2")
EXPECT no exists "$M2/n/x"
EXPECT "$n2" lookups "$M2"
TEST touch "$M1/n/x"
EXPECT_WITHIN 10 yes exists "$M2/n/x"
TEST mv "$M1/n/x" "$M1/n/y"
EXPECT_WITHIN 10 no exists "$M2/n/x"
EXPECT_WITHIN 10 yes exists "$M2/n/y"
TEST rm "$M1/n/y"
EXPECT_WITHIN 10 no exists "$M2/n/y"
# and the other way round
EXPECT 11 size_of "$M1/d/f"
TEST truncate -s 3 "$M2/d/f"
EXPECT_WITHIN 10 3 size_of "$M1/d/f"

# ---- a lost connection empties the cache ----
EXPECT 3 size_of "$M1/d/f"
TEST kill_brick b1
TEST truncate -s 7 "$BRICK/d/f"         # an invalidation nobody could send
TEST start_brick b1
EXPECT_WITHIN 20 7 size_of "$M1/d/f"

TEST umount_brickfs "$M1"
TEST umount_brickfs "$M2"

# ---- md-cache over a brick without features/upcall caches nothing ----
BFS_MD_CACHE= TEST write_volfiles b2 "$T/bricks/b2"
TEST [ -z "$(grep upcall "$(brick_volfile b2)")" ]
VF3=$T/b2-md-cache.vol
TEST cp "$(client_volfile b2)" "$VF3"
TEST eval "printf '\nvolume b2-md-cache\n    type performance/md-cache\n    subvolumes b2\nend-volume\n' >>'$VF3'"
TEST start_brick b2
M3=$T/m3
TEST mount_brickfs "$VF3" "$M3"
TEST touch "$M3/g"
n3=$(lookups "$M3")
TEST forget
TEST stat "$M3/g"
TEST [ "$(lookups "$M3")" -gt "$n3" ]
TEST umount_brickfs "$M3"

done_testing
