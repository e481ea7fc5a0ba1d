#!/usr/bin/env bash
#
# 214-replicate-quorum.t — client quorum (cluster.quorum-type,
# cluster.quorum-count; docs/design/replicate.md, "Quorum") on volumes from
# brickfsd, with real bricks killed (brickfsd down meanwhile, so that it
# does not restart them):
#
#   fixed, replica 3, quorum-count 3: one brick down is enough to refuse
#     changes with EROFS — reads go on, nothing is half written; with
#     quorum-count 2 (volume set) the same fault lets writes through;
#   auto, replica 2: the first brick alone has quorum (writes work), the
#     second alone has not (EROFS); its reads go on, or with
#     cluster.quorum-reads on answer ENOTCONN;
#   none, replica 2: either brick alone takes writes.
#
# Reads in a minority (quorum-reads off) see that minority's copies, which
# may miss a write acknowledged while they were away: not checked for
# content here (docs/design/replicate.md, "Quorum").

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/replica.sh"

skip_unless_mgmt
skip_unless_brickfs
for xl in cluster/replicate protocol/client protocol/server storage/posix; do
    [ -f "$BFS_BUILD/lib/brickfs/xlators/$xl.so" ] || SKIP_ALL "$xl is not built"
done

B=$T/bricks

# down VOL IDX / back VOL N MNT IDX: a brick killed with brickfsd down / brickfsd
# started again (it restarts the brick) until the mount has it again
down() { kill_brickfsd && kill_mgmt_brick "$1" "$2"; }
back()
{
    local before
    before=$(child_ups "$3" "$1" "$4")
    start_brickfsd && bfs_wait_until "$PROCESS_UP_TIMEOUT" rep_all_online "$1" "$2" &&
        wait_child_up "$3" "$1" "$4" "$before"
}

# ---- fixed, replica 3 ----
M=$T/mf
TEST start_brickfsd
TEST rep_volume rf 3 "$B/f" cluster.quorum-type=fixed cluster.quorum-count=3
TEST mount_vol rf "$M" entry-timeout=0,attr-timeout=0,negative-timeout=0
EXPECT 3 graph_opt "$M" rf-replicate-0 cluster.quorum-count
EXPECT OK try_write "$M/a" hello
TEST down rf 2
EXPECT_WITHIN "$PING_TIMEOUT" EROFS try_write "$M/a" more
EXPECT EROFS try_write "$M/new"
TEST ! mkdir "$M/dir"
EXPECT OK try_read "$M/a"
EXPECT hello cat "$M/a"
EXPECT hello cat "$B/f0/a"                                     # nothing half written
TEST ! test -e "$B/f0/new"
TEST back rf 3 "$M" 2
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" OK try_write "$M/a" more
TEST cli volume set rf cluster.quorum-count 2
EXPECT_WITHIN 20 2 graph_opt "$M" rf-replicate-0 cluster.quorum-count
TEST down rf 2
EXPECT OK try_write "$M/a" again                               # 2 of 3 is enough now
EXPECT OK try_write "$M/new"
EXPECT hellomoreagain cat "$M/a"
TEST back rf 3 "$M" 2
EXPECT_WITHIN "$HEAL_TIMEOUT" identical heal_settle "$M" "$B/f0" "$B/f1" "$B/f2"
TEST umount_fuse "$M"

# ---- auto, replica 2: the first brick alone has quorum, the second not ----
M=$T/ma
TEST rep_volume ra 2 "$B/a"
TEST mount_vol ra "$M" entry-timeout=0,attr-timeout=0,negative-timeout=0
EXPECT auto graph_opt "$M" ra-replicate-0 cluster.quorum-type
EXPECT OK try_write "$M/a" 1
TEST down ra 1
EXPECT_WITHIN "$PING_TIMEOUT" OK try_write "$M/a" 2             # brick 0 alone: quorum
TEST back ra 2 "$M" 1
TEST down ra 0
EXPECT_WITHIN "$PING_TIMEOUT" EROFS try_write "$M/a" 3          # brick 1 alone: none
EXPECT EROFS try_write "$M/b"
EXPECT OK try_read "$M/a"                                      # reads go on (of brick 1's
                                                               # copy, which misses "2")
TEST back ra 2 "$M" 0
TEST cli volume set ra cluster.quorum-reads on
EXPECT_WITHIN 20 on graph_opt "$M" ra-replicate-0 cluster.quorum-reads
TEST down ra 0
EXPECT_WITHIN "$PING_TIMEOUT" ENOTCONN try_read "$M/a"         # refused instead
TEST back ra 2 "$M" 0
EXPECT OK try_read "$M/a"
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" OK try_write "$M/a" 3
EXPECT_WITHIN "$HEAL_TIMEOUT" identical heal_settle "$M" "$B/a0" "$B/a1"
EXPECT 123 cat "$M/a"
TEST umount_fuse "$M"

# ---- none, replica 2: either brick alone ----
M=$T/mn
TEST rep_volume rn 2 "$B/n" cluster.quorum-type=none
TEST mount_vol rn "$M" entry-timeout=0,attr-timeout=0,negative-timeout=0
EXPECT OK try_write "$M/a" 1
TEST down rn 0
EXPECT_WITHIN "$PING_TIMEOUT" OK try_write "$M/a" 2
TEST back rn 2 "$M" 0
EXPECT_WITHIN "$HEAL_TIMEOUT" identical heal_settle "$M" "$B/n0" "$B/n1"
EXPECT 12 cat "$M/a"
TEST umount_fuse "$M"

done_testing
