#!/usr/bin/env bash
#
# 021-fuse-dir-attrs.t — a directory's attributes after this mount's own
# create, mkdir, unlink, rmdir, rename, link and symlink in it. The kernel
# asks for them again (GETATTR) after each of those; brickfs-mount answers
# that GETATTR from the parent's attributes in the operation's reply
# instead of asking the brick (docs/design/performance-notes.md, note 10).
# What this checks: the answer is the brick's state right after the
# operation (mtime, ctime, link count, mode), also after a chmod of the
# directory and an xattr change on it; and the brick is not asked (the
# client's io-stats count no stat for it).
#
# With long attribute caching (attr-timeout=60), as in 020.
# tags: sanitizer

. "$(dirname "$0")/../lib/test.sh"

[ -x "$MOUNT_BIN" ] || SKIP_ALL "$MOUNT_BIN is not built"
[ -x "$BRICK_BIN" ] || SKIP_ALL "$BRICK_BIN is not built"
require_fuse
require_root

PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON=$(command -v python3)
ops() { "$PYTHON" "$BFS_ROOT/tests/lib/fuse-ops.py" "$@"; }

# stats: how many stat fops went to the brick (the client's io-stats).
stats()
{
    getfattr -n brickfs.io-stats --only-values "$M" 2>/dev/null | "$PYTHON" -c '
import json, sys
print(json.load(sys.stdin)["fops"].get("stat", {}).get("count", 0))'
}

TEST write_volfiles b1 "$T/bricks/b1"
TEST start_brick b1
BRICK=$(brick_dir b1)
M=$T/mnt
TEST mount_brickfs "$(client_volfile b1)" "$M" -o attr-timeout=60,entry-timeout=60

TEST mkdir "$M/d" "$M/e"
TEST stat "$M/d" "$M/e"
n0=$(stats)
# every change below moves the directory's ctime, sometimes by less than
# the file system's clock resolution without the sleeps
for change in "touch '$M/d/f'" "mkdir '$M/d/sub'" "ln '$M/d/f' '$M/d/g'" \
    "ln -s f '$M/d/s'" "mknod '$M/d/p' p" "rm '$M/d/g'" "rmdir '$M/d/sub'"; do
    ctime0=$(ops stat "$M/d" ctime_ns)
    sleep 0.02
    TEST eval "$change"
    TEST [ "$(ops stat "$M/d" ctime_ns)" -gt "$ctime0" ]
    EXPECT "same" ops same-attrs "$M/d" "$BRICK/d"
    EXPECT "$(stat -c %h "$BRICK/d")" stat -c %h "$M/d"
done
EXPECT "$n0" stats       # every stat of d above came from the operation's reply

# the mode set by chmod, not the one the create before it saw; a listing
# (which makes the kernel ask for the atime again) shows the brick's atime
TEST touch "$M/d/h1"
TEST chmod 700 "$M/d"
TEST ls "$M/d"
EXPECT 700 stat -c %a "$M/d"
EXPECT "same" ops same-attrs "$M/d" "$BRICK/d"
TEST touch "$M/d/h2"
EXPECT 700 stat -c %a "$M/d"
EXPECT "same" ops same-attrs "$M/d" "$BRICK/d"
TEST touch "$M/d/h3"
TEST chmod 755 "$M/d"
EXPECT 755 stat -c %a "$M/d"
# an xattr change after a create: its ctime, not the create's
TEST touch "$M/d/h4"
ctime0=$(stat -c %Z "$BRICK/d")
sleep 1.1
TEST setfattr -n user.x -v 1 "$M/d"
TEST [ "$(stat -c %Z "$M/d")" -gt "$ctime0" ]
EXPECT "same" ops same-attrs "$M/d" "$BRICK/d"

# rename between two directories: both show the brick's state
TEST touch "$M/e/x"
TEST stat "$M/e"
TEST mv "$M/d/f" "$M/e/f"
EXPECT "same" ops same-attrs "$M/d" "$BRICK/d"
EXPECT "same" ops same-attrs "$M/e" "$BRICK/e"

# attr-timeout=0: nothing kept, every stat asks the brick
M0=$T/mnt0
TEST mount_brickfs "$(client_volfile b1)" "$M0" -o attr-timeout=0
TEST stat "$M0/d"
m0=$(M=$M0 stats)
TEST touch "$M0/d/z"
TEST stat "$M0/d"
TEST [ "$(M=$M0 stats)" -gt "$m0" ]
EXPECT "same" ops same-attrs "$M0/d" "$BRICK/d"

TEST umount_brickfs "$M0"
TEST umount_brickfs "$M"

done_testing
