#!/usr/bin/env bash
#
# 210-replicate-basic.t — replica 3 volumes made by brickfsd, mounted, with
# real brick processes (docs/design/replicate.md):
#
#   1. a brick killed with SIGKILL while brickfsd is down too (so that
#      nothing restarts it before the writes below are done — brickfsd
#      restarts a crashed brick after 1 s otherwise): writes, creates,
#      appends and a mkdir on the mount succeed with 2 of 3 bricks (quorum
#      auto); brickfsd started again restarts the brick (new pid); access
#      through the mount (cluster.background-self-heal-count 0: the heal
#      runs in the lookup) heals it — the three brick copies are identical
#      to what was written and no trusted.brickfs.afr.* counter is left
#      non-zero; nothing acknowledged is lost;
#   2. a brick killed with brickfsd up is restarted by brickfsd by itself;
#   3. quorum: 2 of 3 bricks down — writes and creates fail with EROFS,
#      reads go on; with the bricks back, writes work again;
#   4. replica 3 arbiter 1: the arbiter brick has every name and the
#      replicate xattrs, but its files are empty (size 0), while the two
#      data bricks hold the data.
#
# Waits are polled conditions (EXPECT_WITHIN); the mount runs with
# entry-timeout=0 and attr-timeout=0 so that every access is a lookup.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"

skip_unless_mgmt
skip_unless_brickfs
for xl in cluster/replicate protocol/client protocol/server storage/posix; do
    [ -f "$BFS_BUILD/lib/brickfs/xlators/$xl.so" ] || SKIP_ALL "$xl is not built"
done
command -v getfattr >/dev/null || SKIP_ALL "getfattr (attr) is missing"

B=$T/bricks
M=$T/m
S=$T/src   # what the mount should hold, written here first
mkdir -p "$S"

# ---- helpers ----

# online VOL: "1 1 1" when every brick of a 3-brick volume is online
online() { echo "$(vol_brick_field "$1" 0 online) $(vol_brick_field "$1" 1 online) $(vol_brick_field "$1" 2 online)"; }

# files: the regular files of $S, relative, sorted
files() { (cd "$S" && find . -type f | sed 's|^\./||' | sort); }

# mount_matches: 1 when every file of $S reads back identical on the mount
mount_matches()
{
    local f
    for f in $(files); do cmp -s "$S/$f" "$M/$f" || { echo "0 ($f differs)"; return; }; done
    echo 1
}

# access_all: a lookup and a read of every file and folder through the mount
access_all()
{
    local f
    stat "$M" "$M"/* >/dev/null 2>&1
    for f in $(files); do stat "$M/$f" >/dev/null 2>&1; cat "$M/$f" >/dev/null 2>&1; done
}

# pending BRICKDIR: the non-zero trusted.brickfs.afr.* values under a brick
# (its own folder included), one "path key=value" a line; none = healthy
pending()
{
    (cd "$1" && getfattr -R -d -m '^trusted\.brickfs\.afr\.' -e hex . 2>/dev/null) |
        awk '/^# file:/ { f = $3 } /=0x/ { split($0, kv, "="); if (kv[2] !~ /^0x0*$/) print f, $0 }'
}

# contents_identical BRICKDIRS...: "1" when every brick holds every file of
# $S with the same content
contents_identical()
{
    local d f
    for d in "$@"; do
        for f in $(files); do
            cmp -s "$S/$f" "$d/$f" || { echo "0 ($d/$f differs)"; return; }
        done
    done
    echo 1
}

# copies_identical BRICKDIRS...: the same contents, and no brick blames another
copies_identical()
{
    local d r
    r=$(contents_identical "$@")
    [ "$r" = 1 ] || { echo "$r"; return; }
    for d in "$@"; do
        [ -z "$(pending "$d")" ] || { echo "0 ($d: $(pending "$d" | head -n 1))"; return; }
    done
    echo 1
}

# heal_converged: access everything through the mount, then compare bricks
heal_converged()
{
    access_all
    copies_identical "$B/r0" "$B/r1" "$B/r2"
}

# try_write PATH: the errno name of appending a byte (OK when it works)
try_write()
{
    python3 - "$1" <<'PY'
import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"x")
    finally:
        os.close(fd)
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
PY
}

# put NAME SIZE: random content into $S/NAME and the same through the mount
put()
{
    mkdir -p "$(dirname "$S/$1")" && head -c "$2" /dev/urandom >"$S/$1" && cp "$S/$1" "$M/$1"
}

# ---- a replica 3 volume from brickfsd ----
TEST start_brickfsd
TEST cli volume create r3 replica 3 "127.0.0.1:$B/r0" "127.0.0.1:$B/r1" "127.0.0.1:$B/r2" force
TEST cli volume set r3 network.ping-timeout "$NETWORK_PING_TIMEOUT"
TEST cli volume set r3 cluster.background-self-heal-count 0
TEST cli volume start r3
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1 1" online r3
TEST mount_vol r3 "$M" entry-timeout=0,attr-timeout=0,negative-timeout=0
EXPECT 0 graph_opt "$M" r3-replicate-0 cluster.background-self-heal-count

for i in 1 2 3 4 5; do TEST put "f$i" $((i * 70000 + 123)); done
TEST mkdir "$M/d" "$S/d"
TEST put d/inner 4096
EXPECT 1 mount_matches
# the folders' entry windows clear their dirty marks cluster.post-op-delay-ms
# after the last change (replicate-entry.c)
EXPECT_WITHIN 10 1 copies_identical "$B/r0" "$B/r1" "$B/r2"

# ---- 1. brick 0 killed (brickfsd down, so it stays down); writes go on ----
old_pid=$(mgmt_brick_pid r3 0)
TEST kill_brickfsd
TEST kill_mgmt_brick r3 0
TEST put f6 300000                                          # create
TEST put d/new 5000                                         # create in a folder
head -c 8192 /dev/urandom >"$T/patch"
TEST dd if="$T/patch" of="$S/f1" bs=4096 seek=3 conv=notrunc status=none
TEST dd if="$T/patch" of="$M/f1" bs=4096 seek=3 conv=notrunc status=none   # overwrite
TEST eval "head -c 1000 /dev/urandom | tee -a '$S/f2' >>'$M/f2'"             # append
TEST mkdir "$M/d2" "$S/d2"
TEST put d2/x 777
EXPECT 1 mount_matches
EXPECT 1 contents_identical "$B/r1" "$B/r2"              # the two up bricks hold it all...
EXPECT 1 eval "[ -n \"\$(pending '$B/r1')\" ] && echo 1"   # ...and blame the dead one
TEST ! test -e "$B/r0/f6"

# brickfsd back: it restarts the brick (a new process), the mount reconnects
TEST start_brickfsd
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1 1" online r3
new_pid=$(mgmt_brick_pid r3 0)
TEST test -n "$new_pid" -a "$new_pid" != "$old_pid"
# heal on access: lookups through the mount until the copies are identical
EXPECT_WITHIN "$HEAL_TIMEOUT" 1 heal_converged
EXPECT 1 mount_matches
TEST test -d "$B/r0/d2"

# ---- 2. brick 1 killed with brickfsd up: brickfsd restarts it by itself ----
old_pid=$(mgmt_brick_pid r3 1)
TEST kill_mgmt_brick r3 1
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 eval "p=\$(mgmt_brick_pid r3 1); [ -n \"\$p\" ] && [ \"\$p\" != '$old_pid' ] && bfs_pid_alive \"\$p\" && echo 1"
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1 1" online r3
EXPECT 1 eval "[ \"\$(vol_brick_field r3 1 restarts)\" -ge 1 ] && echo 1"
TEST put f7 20000
EXPECT_WITHIN "$HEAL_TIMEOUT" 1 heal_converged
EXPECT 1 mount_matches

# ---- 3. quorum: 2 of 3 bricks down -> EROFS for changes, reads go on ----
TEST kill_brickfsd
TEST kill_mgmt_brick r3 1
TEST kill_mgmt_brick r3 2
EXPECT_WITHIN "$PING_TIMEOUT" EROFS try_write "$M/f3"
EXPECT EROFS try_write "$M/brand-new"
TEST ! mkdir "$M/nodir"
TEST ! test -e "$B/r0/brand-new"
EXPECT 1 mount_matches                                      # reads go on
TEST cmp "$S/f3" "$B/r0/f3"                                 # nothing half-written
TEST start_brickfsd
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1 1" online r3
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" OK try_write "$M/after"
echo -n x >"$S/after"
EXPECT_WITHIN "$HEAL_TIMEOUT" 1 heal_converged
EXPECT 1 mount_matches
TEST umount_fuse "$M"

# ---- 4. replica 3 arbiter 1 ----
TEST cli volume create ra replica 3 arbiter 1 "127.0.0.1:$B/a0" "127.0.0.1:$B/a1" \
    "127.0.0.1:$B/a2" force
TEST cli volume set ra network.ping-timeout "$NETWORK_PING_TIMEOUT"
TEST cli volume start ra
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1 1" online ra
MA=$T/ma
TEST mount_vol ra "$MA" entry-timeout=0,attr-timeout=0
EXPECT 1 graph_opt "$MA" ra-replicate-0 arbiter-count
rm -rf "$S" && mkdir -p "$S/sub"
for f in a1 a2 sub/a3; do
    head -c 50000 /dev/urandom >"$S/$f"
    TEST mkdir -p "$MA/sub"
    TEST cp "$S/$f" "$MA/$f"
done
for f in a1 a2 sub/a3; do
    TEST cmp "$S/$f" "$MA/$f"
    TEST cmp "$S/$f" "$B/a0/$f"
    TEST cmp "$S/$f" "$B/a1/$f"
    TEST test -f "$B/a2/$f"                                 # the arbiter has the name...
    EXPECT 0 stat -c %s "$B/a2/$f"                          # ...no data...
    EXPECT 1 eval "getfattr -d -m '^trusted\\.' -e hex '$B/a2/$f' 2>/dev/null | grep -c '^trusted.brickfs.gfid='"
    # ...and the same gfid as the data bricks
    EXPECT "$(getfattr --only-values -n trusted.brickfs.gfid -e hex "$B/a0/$f" 2>/dev/null)" \
        getfattr --only-values -n trusted.brickfs.gfid -e hex "$B/a2/$f"
    EXPECT_WITHIN 10 "" pending "$B/a2"                      # once the entry window ends
done
TEST setfattr -n user.tag -v hello "$MA/a1"                 # metadata reaches the arbiter
EXPECT hello getfattr --only-values -n user.tag "$B/a2/a1"
EXPECT 0 stat -c %s "$B/a2/a1"
TEST umount_fuse "$MA"

done_testing
