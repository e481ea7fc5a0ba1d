#!/usr/bin/env bash
#
# 202-distribute-clients.t — two mounts of one 3-brick distribute volume
# (two brickfs-mount processes, so two clients of the bricks) create,
# rename, remove, mkdir and rmdir the same names in the same directories
# at the same time (tests/lib/dht-check.py churn, 10 s each, bounded), and
# then there is one consistent namespace (docs/design/distribute.md,
# "Creating and removing names", "Rename"):
#   - no operation failed other than as races explain (ENOENT, EEXIST,
#     ENOTEMPTY...): no EIO, no ENOTCONN, no hang;
#   - both mounts list the same tree; no name twice; every file reads (once
#     the kernels' entry caches have expired);
#   - the bricks: every directory on every brick with one GFID, every file
#     on its hashed brick or behind a correct link file, data on one brick
#     only, no link file pointing nowhere (dht-check.py audit);
#   - the file count of the mounts is the data-file count of the bricks;
#   - a name one client replaced reads as the new file on the other at
#     once (ESTALE makes the kernel look the name up again);
#   - the tree can be removed from one mount, leaving nothing on any brick.

# Brick lists and name lists are split into words on purpose (no spaces in $T).
# shellcheck disable=SC2046
. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/dht.sh"

skip_unless_mgmt
skip_unless_brickfs

M1=$T/m1
M2=$T/m2
CHURN_SECONDS=10
HANG=90                    # a churn still running after this has hung

TEST start_brickfsd
TEST dht_volume v3 3
TEST mount_vol v3 "$M1"
TEST mount_vol v3 "$M2"
TEST mkdir "$M1/s0" "$M1/s1" "$M1/s2" "$M1/s3"
EXPECT_WITHIN 10 "s0 s1 s2 s3" eval "ls '$M2' | paste -sd' '"

# tree DIR: every path under DIR with its type, sorted
tree()
{
    (cd "$1" && find . -mindepth 1 -printf '%y %p\n' | sort)
}

# ---- two clients at once ----
timeout "$HANG" python3 "$DHT_CHECK" churn "$M1" "$CHURN_SECONDS" 1 >"$T/logs/churn1.out" 2>&1 &
c1=$!
timeout "$HANG" python3 "$DHT_CHECK" churn "$M2" "$CHURN_SECONDS" 2 >"$T/logs/churn2.out" 2>&1 &
c2=$!
TEST wait "$c1"
TEST wait "$c2"
grep -h '^ops' "$T/logs/churn1.out" "$T/logs/churn2.out" | sed 's/^/# /'
EXPECT 2 eval "grep -h '^ops' '$T/logs/churn1.out' '$T/logs/churn2.out' | awk '\$2 > 100' | wc -l"

# ---- one namespace ----
EXPECT_WITHIN 10 "" eval "diff <(tree '$M1') <(tree '$M2')"
EXPECT 0 eval "tree '$M1' | awk '{ print \$2 }' | uniq -d | wc -l"
TEST [ "$(find "$M1" -type f | wc -l)" -gt 0 ]          # the churn left files
# Polled: a mount's kernel keeps a name it looked up for entry-timeout (1 s)
# even when the other client has since replaced the file under it; an open
# through that stale entry answers ENOENT until it expires.
EXPECT_WITHIN 30 "" eval "find '$M1' -type f -exec cat {} + 2>&1 >/dev/null"
EXPECT_WITHIN 30 "" eval "find '$M2' -type f -exec cat {} + 2>&1 >/dev/null"
EXPECT ok dht_check audit v3 $(dht_bricks v3)
EXPECT "$(find "$M1" -type f | wc -l)" sum_of $(dht_check counts $(dht_bricks v3))
EXPECT "$(find "$M1" -type d | wc -l)" eval "find '$T/bricks/v3/b1' -path '*/.brickfs' -prune -o -type d -print | wc -l"

# ---- a name the other client replaced ----
# Client 1 knows x; client 2 renames y over it (a new file, a new GFID).
# Client 1's kernel still holds x's old inode for entry-timeout; the FUSE
# bridge answers ESTALE (not ENOENT) for calls by that inode, so the kernel
# looks the name up again (LOOKUP_REVAL) and opens the new file at once.
TEST eval "echo old >'$M1/s0/x' && echo new >'$M2/s0/y'"
EXPECT "old old" eval "echo \$(cat '$M1/s0/x' '$M2/s0/x')"
# One command, so it all happens well inside client 1's entry-timeout.
EXPECT "4 new" eval "cat '$M1/s0/x' >/dev/null && mv '$M2/s0/y' '$M2/s0/x' &&
                     echo \$(stat -c %s '$M1/s0/x') \$(cat '$M1/s0/x')"
EXPECT_WITHIN 10 new cat "$M1/s0/x"                     # right once the entry expired
EXPECT 1 eval "ls '$M1/s0' | grep -cx x"

# ---- and it all goes away from one mount ----
TEST rm -rf "$M1/s0" "$M1/s1" "$M1/s2" "$M1/s3"
EXPECT_WITHIN 10 "" ls -A "$M2"
EXPECT "0 0 0" dht_check counts $(dht_bricks v3)
EXPECT 0 eval "for b in $(dht_bricks v3 | tr '\n' ' '); do ls -A \$b; done | grep -vc '^\\.brickfs\$'"
EXPECT ok dht_check audit v3 $(dht_bricks v3)

TEST umount_fuse "$M2"
TEST umount_fuse "$M1"
done_testing
