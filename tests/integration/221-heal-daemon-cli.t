#!/usr/bin/env bash
#
# 221-heal-daemon-cli.t — the self-heal daemon as brickfsd runs it, and the
# `brickfs volume heal` commands (docs/design/management.md "Self-heal
# daemon", docs/API.md "Heal"), with real bricks, a real brickfs-shd and a
# FUSE mount:
#
#   1. a started replica 3 volume has a daemon (volume status: pid, online,
#      its command line names the volume's shd.vol); `volume heal` makes it
#      crawl (statistics: crawls grows); killed, brickfsd restarts it;
#      brickfsd restarted adopts it (same pid); `cluster.self-heal-daemon
#      off` stops it at once and `volume heal` then fails, `on` starts it;
#      `cluster.heal-timeout` restarts it with the new --interval;
#   2. wrong syntax is a usage error (exit 2); a distribute volume, a stopped
#      volume, an unknown volume are refused with a reason (exit 1);
#   3. a brick killed (brickfsd down, so nothing restarts it) while files
#      are being created through the mount; the mount goes away (no client
#      access from there on); brickfsd started again restarts the brick;
#      with the daemon off, `heal info` lists the pending entries per brick
#      with counts and `info summary` counts them; two names the brick
#      kept half made (no GFID; a GFID without its handle: a kill in the
#      middle of a create leaves them so) are completed; the daemon switched
#      on heals them by itself: `info summary --json` reaches 0, the copies
#      on the three bricks are identical, `heal statistics` says what it did;
#   4. volume stop stops the daemon.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"

skip_unless_mgmt
skip_unless_brickfs
SHD=$BFS_BIN/brickfs-shd
[ -x "$SHD" ] || SKIP_ALL "$SHD is not built"
for xl in cluster/replicate features/index protocol/client protocol/server storage/posix; do
    [ -f "$BFS_BUILD/lib/brickfs/xlators/$xl.so" ] || SKIP_ALL "$xl is not built"
done
command -v getfattr >/dev/null || SKIP_ALL "getfattr (attr) is missing"

B=$T/bricks
M=$T/m

# ---- helpers ----

online()
{
    local i s=""
    for ((i = 0; i < $2; i++)); do s="$s${s:+ }$(vol_brick_field "$1" "$i" online)"; done
    echo "$s"
}

# shd VOL FIELD: a field of the volume's self-heal daemon in volume status (booleans 1/0)
shd()
{
    cli --json volume status "$1" | python3 -c '
import json, sys
v = json.load(sys.stdin)["self_heal_daemon"][sys.argv[1]]
print(int(v) if isinstance(v, bool) else v)' "$2"
}

# shd_alive VOL: 1 when the pid volume status gives runs brickfs-shd with the volume's shd.vol
shd_alive()
{
    local pid
    pid=$(shd "$1" pid)
    [ "${pid:-0}" -gt 0 ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null |
        grep -q "brickfs-shd .*--volfile $T/mgmt/d1/state/volfiles/$1/shd.vol" && echo 1 || echo 0
}

# stat VOL KEY: a field of `volume heal VOL statistics --json` .progress
stat_of()
{
    cli --json volume heal "$1" statistics | python3 -c '
import json, sys
p = json.load(sys.stdin)["progress"]
print(p[sys.argv[1]] if p else "none")' "$2"
}

# summary VOL KEY: a top-level field of `volume heal VOL info summary --json`
summary()
{
    cli --json volume heal "$1" info summary | python3 -c '
import json, sys
print(json.load(sys.stdin)[sys.argv[1]])' "$2"
}

# info_brick VOL IDX KEY: a field of brick IDX in `volume heal VOL info --json`
info_brick()
{
    cli --json volume heal "$1" info | python3 -c '
import json, sys
b = json.load(sys.stdin)["bricks"]
print([x for x in b if x["name"].endswith("-brick-" + sys.argv[1])][0][sys.argv[2]])' "$2" "$3"
}

usage_rc() { cli "$@" >/dev/null 2>&1; echo $?; }

pending()
{
    (cd "$1" && getfattr -R -d -m '^trusted\.brickfs\.afr\.' -e hex . 2>/dev/null) |
        awk '/^# file:/ { f = $3 } /=0x/ { split($0, kv, "="); if (kv[2] !~ /^0x0*$/) print f, $0 }'
}

# tree DIR: every name with its type, size and content checksum (not .brickfs)
tree()
{
    (cd "$1" && find . -path ./.brickfs -prune -o -printf '%p %y %s\n' | sort |
        while read -r p y s; do
            if [ "$y" = f ]; then echo "$p $y $s $(md5sum <"$p" | cut -c1-32)"; else echo "$p $y"; fi
        done)
}

# same_bricks DIRS...: 1 when every brick has the tree of the first and none blames another
# (the trees first: a difference says more than the counters that blame it)
same_bricks()
{
    local first=$1 d ref
    ref=$(tree "$first")
    for d in "$@"; do
        [ "$(tree "$d")" = "$ref" ] ||
            { echo "0 ($d differs from $first: $(diff <(echo "$ref") <(tree "$d") | grep '^[<>]' | head -n 2 | tr '\n' ' '))"; return; }
    done
    for d in "$@"; do
        [ -z "$(pending "$d")" ] || { echo "0 ($d: $(pending "$d" | head -n 1))"; return; }
    done
    echo 1
}

# ---- 1. the daemon of a started replica 3 volume ----
TEST start_brickfsd
TEST cli volume create r3 replica 3 "127.0.0.1:$B/r0" "127.0.0.1:$B/r1" "127.0.0.1:$B/r2" force
TEST cli volume set r3 network.ping-timeout "$NETWORK_PING_TIMEOUT"
EXPECT 0 shd r3 enabled                                       # created, not started
TEST cli volume start r3
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1 1" online r3 3
EXPECT 1 shd r3 online
EXPECT 1 shd r3 enabled
EXPECT 1 shd_alive r3
TEST eval "cli volume status r3 | grep -q '^Self-heal Daemon on localhost .* Y '"
TEST eval "cli volume set help | grep -A5 '^Option: cluster.self-heal-daemon\$' | grep -q 'management side (brickfsd)'"
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" idle stat_of r3 state
EXPECT "$(shd r3 pid)" stat_of r3 pid
crawls=$(stat_of r3 crawls)
TEST cli volume heal r3
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 eval "[ \"\$(stat_of r3 crawls)\" -gt $crawls ] && echo 1"
TEST eval "cli volume heal r3 progress | grep -q '^Entries remaining: *0'"

# killed: brickfsd restarts it
old=$(shd r3 pid)
TEST kill -KILL "$old"
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 eval "p=\$(shd r3 pid); [ \"\$p\" -gt 0 ] && [ \"\$p\" != $old ] && echo 1"
EXPECT 1 shd r3 restarts
EXPECT 1 shd_alive r3
# brickfsd restarted: adopts it
old=$(shd r3 pid)
TEST kill_brickfsd
TEST bfs_pid_alive "$old"                                     # daemons outlive brickfsd
TEST start_brickfsd
EXPECT "$old" shd r3 pid
EXPECT 1 shd r3 online
# cluster.heal-timeout: restarted with the new interval
TEST cli volume set r3 cluster.heal-timeout 3600
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 eval "p=\$(shd r3 pid); [ \"\$p\" -gt 0 ] && [ \"\$p\" != $old ] && echo 1"
TEST eval "tr '\\0' ' ' </proc/$(shd r3 pid)/cmdline | grep -q -- '--interval 3600'"
TEST ! cli volume set r3 cluster.heal-timeout 1                # out of range
# off: stopped at once, heal refused; on: started
old=$(shd r3 pid)
TEST cli volume set r3 cluster.self-heal-daemon off
EXPECT 0 shd r3 pid
EXPECT 0 shd r3 enabled
TEST bfs_wait_gone "$old" "$PROCESS_DOWN_TIMEOUT"
EXPECT 1 usage_rc volume heal r3
EXPECT 1 eval "cli volume heal r3 2>&1 | grep -c 'is off'"
TEST cli volume set r3 cluster.self-heal-daemon on
EXPECT 1 shd r3 online
EXPECT 1 shd_alive r3
TEST cli volume reset r3 cluster.self-heal-daemon
EXPECT 1 shd r3 online

# ---- 2. syntax and refusals ----
EXPECT 2 usage_rc volume heal
EXPECT 2 usage_rc volume heal r3 frobnicate
EXPECT 2 usage_rc volume heal r3 info bogus
EXPECT 2 usage_rc volume heal r3 info summary extra
EXPECT 2 usage_rc volume heal r3 statistics extra
EXPECT 2 usage_rc volume heal r3 split-brain
EXPECT 2 usage_rc volume heal r3 split-brain bigger-file
EXPECT 2 usage_rc volume heal r3 split-brain bigger-file /a /b
EXPECT 2 usage_rc volume heal r3 split-brain latest-mtime relative/path
EXPECT 2 usage_rc volume heal r3 split-brain source-brick
EXPECT 2 usage_rc volume heal r3 split-brain newest /a
TEST eval "cli volume heal r3 split-brain newest /a 2>&1 | grep -q 'unknown split-brain policy'"
TEST cli volume heal --help
EXPECT 1 usage_rc volume heal r3 split-brain source-brick "127.0.0.1:$B/elsewhere" /a
EXPECT 1 eval "cli volume heal r3 split-brain source-brick 127.0.0.1:$B/elsewhere /a 2>&1 | grep -c 'is not a brick of volume r3'"
EXPECT 1 usage_rc volume heal nosuchvol info
TEST cli volume create dv "127.0.0.1:$B/dv" force
TEST cli volume start dv
EXPECT 1 usage_rc volume heal dv
EXPECT 1 eval "cli volume heal dv info 2>&1 | grep -c 'not a replicated volume'"
TEST eval "! cli --json volume status dv | grep -q self_heal_daemon"
EXPECT 400 api code POST /v1/volumes/dv/heal
EXPECT 404 api code GET /v1/volumes/r3/heal/info/bogus
EXPECT 405 api code DELETE /v1/volumes/r3/heal
EXPECT 400 api code POST /v1/volumes/r3/heal/split-brain '{"policy":"bigger-file"}'

# ---- 3. a brick killed while files are created; the daemon heals it ----
TEST cli volume set r3 cluster.self-heal-daemon off   # so that heal info sees the backlog first
TEST mount_vol r3 "$M" entry-timeout=0,attr-timeout=0,negative-timeout=0
TEST mkdir "$M/d"
TEST eval "head -c 200000 /dev/urandom >'$M/old'"
EXPECT_WITHIN 10 1 same_bricks "$B/r0" "$B/r1" "$B/r2"   # once the root's entry window ends
TEST kill_brickfsd                                    # nothing restarts the brick
# the creator runs until told to stop; every create must succeed (2 of 3 is quorum)
(
    i=0
    while [ ! -e "$T/stop" ] && [ $i -lt 5000 ]; do
        i=$((i + 1))
        printf 'file %d %0*d\n' "$i" $((i % 500)) 0 >"$M/d/f$i" || exit 1
    done
) 2>"$T/logs/creator.log" &   # a failed create says why here
creator=$!
count() { ls "$1" | wc -l; }
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 eval "[ \$(count '$B/r2/d') -ge 20 ] && echo 1"
TEST kill_mgmt_brick r3 2                             # mid-creation
at_kill=$(count "$B/r2/d")
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 eval "[ \$(count '$B/r0/d') -ge $((at_kill + 50)) ] && echo 1"
TEST touch "$T/stop"
TEST wait "$creator"
TEST eval "head -c 65536 /dev/urandom | dd of='$M/old' bs=65536 seek=1 conv=notrunc status=none"
nfiles=$(count "$M/d")
TEST test "$nfiles" -ge $((at_kill + 50))
TEST umount_fuse "$M"                                 # no client access from here on
TEST test "$(count "$B/r2/d")" -lt "$nfiles"            # brick 2 missed some
# two names brick 2 kept half made, as a kill in the middle of a create
# leaves them (the daemon never looks a name up: its entry heal completes
# them): one with no GFID, one with its GFID but no handle
missed=$(comm -23 <(ls "$B/r0/d" | sort) <(ls "$B/r2/d" | sort) | head -n 2)
h1=$(sed -n 1p <<<"$missed")
h2=$(sed -n 2p <<<"$missed")
TEST test -n "$h2"
TEST touch "$B/r2/d/$h1"
# (getfattr's --only-values prints the raw bytes whatever -e says: the
# 0x form comes from the name=value line)
g2=$(getfattr --absolute-names -n trusted.brickfs.gfid -e hex "$B/r0/d/$h2" | sed -n 's/^trusted\.brickfs\.gfid=//p')
TEST test "${#g2}" -eq 34
TEST eval "touch '$B/r2/d/$h2' && setfattr -n trusted.brickfs.gfid -v $g2 '$B/r2/d/$h2'"
EXPECT "$g2" eval "getfattr --absolute-names -n trusted.brickfs.gfid -e hex '$B/r2/d/$h2' | sed -n 's/^trusted\.brickfs\.gfid=//p'"

TEST start_brickfsd                                   # restarts the brick
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1 1" online r3 3
EXPECT 0 shd r3 pid                                   # still off
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" connected info_brick r3 2 status
n0=$(info_brick r3 0 pending)
TEST test "${n0:-0}" -ge 2                            # brick 0 knows what brick 2 missed
TEST test "$(info_brick r3 1 pending)" -ge 2
TEST test "$(summary r3 total_pending)" -ge 4
EXPECT 0 summary r3 split_brain
TEST eval "cli volume heal r3 info | grep -q '^Number of entries: $n0\$'"
TEST eval "cli volume heal r3 info | grep -q '^<gfid:[0-9a-f-]*>\$'"
TEST eval "cli volume heal r3 info summary | grep -q '^Number of entries in heal pending: $n0\$'"
TEST eval "cli volume heal r3 info summary | grep -q '^Status: Connected\$'"
TEST eval "cli volume heal r3 info split-brain | grep -q '^Number of entries in split-brain: 0\$'"

TEST cli volume set r3 cluster.self-heal-daemon on     # heals with no client access
EXPECT_WITHIN "$HEAL_TIMEOUT" 0 summary r3 total_pending
EXPECT 1 same_bricks "$B/r0" "$B/r1" "$B/r2"
EXPECT "$nfiles" count "$B/r2/d"
EXPECT 2 stat -c %h "$B/r2/d/$h1"                        # a GFID and its handle now
EXPECT 2 stat -c %h "$B/r2/d/$h2"
EXPECT "$(printf 'file %d %0*d\n' "$nfiles" $((nfiles % 500)) 0)" cat "$B/r2/d/f$nfiles"
TEST cmp "$B/r0/old" "$B/r2/old"
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" idle stat_of r3 state
TEST test "$(stat_of r3 healed)" -ge 1
EXPECT 0 stat_of r3 remaining
EXPECT 0 stat_of r3 split_brain
TEST eval "cli volume heal r3 statistics | grep -q '^Entries healed: *[1-9]'"
TEST eval "cli volume heal r3 info | grep -q '^Number of entries: 0\$'"

# ---- 4. stop: the daemon goes with the bricks ----
old=$(shd r3 pid)
TEST cli --yes volume stop r3
TEST bfs_wait_gone "$old" "$PROCESS_DOWN_TIMEOUT"
EXPECT 0 shd r3 pid
EXPECT 1 usage_rc volume heal r3
EXPECT 1 eval "cli volume heal r3 info 2>&1 | grep -c 'is not started'"
TEST cli --yes volume delete r3
TEST ! test -e "$T/mgmt/d1/state/shd/r3.json"

done_testing
