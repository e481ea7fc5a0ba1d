#!/usr/bin/env bash
#
# 024-fuse-xattr-local.t — the extended attributes brickfs-mount answers
# itself (src/fuse/fuse-xattr.c). `ls -l` asks for security.selinux and
# system.posix_acl_access of every entry; without the selinux and acl mount
# options the mount does not support them and answers without a brick:
# POSIX ACLs and security.selinux are EOPNOTSUPP (get, set, remove; ls then
# stops asking for them for the whole file system after the first entry).
# What this checks: those answers, that `ls -l` of many files sends no
# getxattr to the graph (the client's io-stats), that an ACL put on the
# brick behind the mount's back is neither listed nor read; and that with
# -o acl,selinux both go to the brick as before (setfacl/getfacl work).
# tags: sanitizer

. "$(dirname "$0")/../lib/test.sh"

[ -x "$MOUNT_BIN" ] || SKIP_ALL "$MOUNT_BIN is not built"
[ -x "$BRICK_BIN" ] || SKIP_ALL "$BRICK_BIN is not built"
command -v setfacl >/dev/null && command -v getfattr >/dev/null ||
    SKIP_ALL "setfacl/getfattr are not installed (acl, attr)"
require_fuse
require_root

PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON=$(command -v python3)

# getxattrs MOUNT: how many getxattr fops went down the mount's graph
getxattrs()
{
    getfattr -n brickfs.io-stats --only-values "$1" 2>/dev/null | "$PYTHON" -c '
import json, sys
print(json.load(sys.stdin)["fops"].get("getxattr", {}).get("count", 0))'
}

# xerr OP PATH NAME [VALUE]: the errno name a raw xattr call fails with, or "ok"
xerr()
{
    "$PYTHON" - "$@" <<'PY'
import errno, os, sys
op, path, name = sys.argv[1:4]
try:
    if op == "get":
        os.getxattr(path, name)
    elif op == "set":
        os.setxattr(path, name, sys.argv[4].encode())
    else:
        os.removexattr(path, name)
    print("ok")
except OSError as e:  # EOPNOTSUPP and ENOTSUP are one number on Linux
    print("EOPNOTSUPP" if e.errno == errno.EOPNOTSUPP else errno.errorcode[e.errno])
PY
}

TEST write_volfiles b1 "$T/bricks/b1"
TEST start_brick b1
BRICK=$(brick_dir b1)
M=$T/mnt
TEST mount_brickfs "$(client_volfile b1)" "$M"

TEST mkdir "$M/d"
for i in $(seq 1 40); do : >"$M/d/f$i"; done
TEST [ -e "$M/d/f40" ]

# ACLs: not supported on this mount
EXPECT EOPNOTSUPP xerr get "$M/d/f1" system.posix_acl_access
EXPECT EOPNOTSUPP xerr get "$M/d" system.posix_acl_default
EXPECT EOPNOTSUPP xerr remove "$M/d/f1" system.posix_acl_access
TEST ! setfacl -m u:nobody:r "$M/d/f1"
EXPECT "" getfattr --absolute-names -n system.posix_acl_access --only-values "$BRICK/d/f1"
# SELinux labels: not supported either
EXPECT EOPNOTSUPP xerr get "$M/d/f1" security.selinux
EXPECT EOPNOTSUPP xerr set "$M/d/f1" security.selinux x
EXPECT EOPNOTSUPP xerr remove "$M/d/f1" security.selinux
# security.capability: none, answered by the mount as before
EXPECT ENODATA xerr get "$M/d/f1" security.capability
# other names still go to the brick
TEST setfattr -n user.k -v v "$M/d/f1"
EXPECT v getfattr --absolute-names -n user.k --only-values "$M/d/f1"

# an ACL set on the brick behind the mount's back: neither listed nor read
TEST setfacl -m u:nobody:r "$BRICK/d/f2"
TEST setfattr -n user.k -v v "$M/d/f2"
EXPECT "user.k" eval "getfattr --absolute-names -d -m - '$M/d/f2' | grep -o '^[a-z.]*[a-z]'"
EXPECT EOPNOTSUPP xerr get "$M/d/f2" system.posix_acl_access

# ls -l of the folder: no getxattr reaches the graph, and ls asks for the
# ACL and the label once each, not per entry
n0=$(getxattrs "$M")
TEST eval "ls -l '$M/d' >/dev/null"
EXPECT "$n0" getxattrs "$M"
if command -v strace >/dev/null; then
    EXPECT 2 eval "strace -f -e trace=getxattr,lgetxattr -o '$T/ls.strace' ls -l '$M/d' >/dev/null && grep -c xattr '$T/ls.strace'"
else
    SKIP "strace is not installed"
fi

# with acl and selinux: passed through, as the brick has them
MA=$T/mnt-acl
TEST mount_brickfs "$(client_volfile b1)" "$MA" -o acl,selinux
TEST setfacl -m u:nobody:r "$MA/d/f3"
EXPECT "user:nobody:r--" eval "getfacl -p '$MA/d/f3' 2>/dev/null | grep '^user:nobody'"
EXPECT "user:nobody:r--" eval "getfacl -p '$BRICK/d/f3' 2>/dev/null | grep '^user:nobody'"
EXPECT ENODATA xerr get "$MA/d/f1" system.posix_acl_access
n0=$(getxattrs "$MA")
TEST eval "ls -l '$MA/d' >/dev/null"
TEST [ "$(getxattrs "$MA")" -gt "$n0" ]

TEST umount_brickfs "$MA"
TEST umount_brickfs "$M"

done_testing
