#!/usr/bin/env bash
#
# 220-shd.t — the self-heal daemon (docs/design/self-heal-daemon.md,
# docs/man/brickfs-shd.md) on volumes made by brickfsd, with real bricks:
#
#   1. replica 3: a brick is down (brickfsd down too, so nothing restarts
#      it) while 1,000 files in folders are created and an old file is
#      rewritten through a mount; the mount goes away; the brick comes back.
#      The bricks' pending indices (.brickfs/indices/pending) list the
#      changes; `brickfs-shd --info summary --json` counts them. A
#      brickfs-shd started by the test heals everything with no client
#      access at all: --info goes to 0 pending, the three bricks hold the
#      same files and no trusted.brickfs.afr.* counter is left; its state
#      file says what it did; SIGUSR1 makes it crawl again; SIGTERM ends it;
#      started without -f it detaches and says so by exiting 0.
#   2. replica 2, quorum none: three files put in split-brain on purpose
#      (a write with brick 1 down, then another with brick 0 down, with no
#      client seeing both bricks in between); they read EIO; `--info
#      split-brain` lists them; `--resolve` fixes one with each policy
#      (bigger-file, latest-mtime, source-brick) and the bricks then agree
#      with the chosen copy; a file that is not in split-brain is refused.

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

# online VOL N: "1 1 ..." when the N bricks of VOL are online
online()
{
    local i s=""
    for ((i = 0; i < $2; i++)); do s="$s${s:+ }$(vol_brick_field "$1" "$i" online)"; done
    echo "$s"
}
volfile() { echo "$T/mgmt/d1/state/volfiles/$1/client.vol"; }

# info VOL WHAT KEY: one top-level field of `brickfs-shd --info WHAT --json`
info()
{
    "$SHD" --volfile "$(volfile "$1")" --info "$2" --json 2>>"$T/logs/shd-info.err" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$3"
}

# state KEY: a field of the daemon's state file
state() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$T/shd.json" "$1" 2>/dev/null; }

# pending BRICKDIR: the non-zero trusted.brickfs.afr.* values under a brick
pending()
{
    (cd "$1" && getfattr -R -d -m '^trusted\.brickfs\.afr\.' -e hex . 2>/dev/null) |
        awk '/^# file:/ { f = $3 } /=0x/ { split($0, kv, "="); if (kv[2] !~ /^0x0*$/) print f, $0 }'
}

index_count() { find "$1/.brickfs/indices/pending" -type f | wc -l; }

# tree DIR: every name with its type, size and content checksum (not .brickfs)
tree()
{
    (cd "$1" && find . -path ./.brickfs -prune -o -printf '%p %y %s\n' | sort |
        while read -r p y s; do
            if [ "$y" = f ]; then echo "$p $y $s $(md5sum <"$p" | cut -c1-32)"; else echo "$p $y"; fi
        done)
}

# same_bricks DIRS...: 1 when every brick has the tree of the first and none blames another
same_bricks()
{
    local first=$1 d ref
    ref=$(tree "$first")
    for d in "$@"; do
        [ "$(tree "$d")" = "$ref" ] || { echo "0 ($d differs from $first)"; return; }
        [ -z "$(pending "$d")" ] || { echo "0 ($d: $(pending "$d" | head -n 1))"; return; }
    done
    echo 1
}

# ---- 1. replica 3: heal without any client access ----
TEST start_brickfsd
TEST cli volume create r3 replica 3 "127.0.0.1:$B/r0" "127.0.0.1:$B/r1" "127.0.0.1:$B/r2" force
TEST cli volume set r3 network.ping-timeout "$NETWORK_PING_TIMEOUT"
TEST cli volume set r3 cluster.self-heal-daemon off      # the test runs its own daemon
TEST cli volume start r3
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1 1" online r3 3
TEST grep -q "type features/index" "$T/mgmt/d1/state/volfiles/r3/r3-brick-0.vol"
TEST test -d "$B/r0/.brickfs/indices/pending"
TEST mount_vol r3 "$M" entry-timeout=0,attr-timeout=0,negative-timeout=0
TEST mkdir "$M/old"
TEST eval "head -c 100000 /dev/urandom >'$M/old/file'"
# the folders' entry windows clear their dirty marks (and index entries)
# cluster.post-op-delay-ms after the last change
EXPECT_WITHIN 10 1 same_bricks "$B/r0" "$B/r1" "$B/r2"
EXPECT_WITHIN 10 0 index_count "$B/r0"

TEST kill_brickfsd
TEST kill_mgmt_brick r3 2
TEST mkdir -p "$M/d/a" "$M/d/b"
created=0
for i in $(seq 1 1000); do
    sub=$([ $((i % 2)) = 0 ] && echo a || echo b)
    printf 'file %d %0*d\n' "$i" $((i % 300)) 0 >"$M/d/$sub/f$i" && created=$((created + 1))
done
EXPECT 1000 echo "$created"
TEST eval "head -c 70000 /dev/urandom >'$M/old/file'"
TEST umount_fuse "$M"                                        # no client from here on
TEST ! test -e "$B/r2/d"
TEST test "$(index_count "$B/r0")" -ge 1
TEST test -z "$(tree "$B/r2" | grep ' f ' | grep -v old)"

TEST start_brickfsd
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1 1" online r3 3
n=$(info r3 summary total_pending)
TEST test "${n:-0}" -ge 1                                    # the indices say what is left
EXPECT 0 info r3 summary split_brain
# the full listing names the folders (files are listed by GFID only)
EXPECT 1 eval "'$SHD' --volfile '$(volfile r3)' --info --json | python3 -c '
import json, sys
v = json.load(sys.stdin)
paths = {e[\"path\"] for b in v[\"bricks\"] for e in b[\"entries\"]}
print(int(\"/d\" in paths and \"/\" in paths))'"

# pages of 128 GFIDs: the crawl goes through the indices' continuations
TEST bfs_spawn shd env BRICKFS_SHD_PAGE=128 "$SHD" --volfile "$(volfile r3)" \
    --state-file "$T/shd.json" --log-file "$T/logs/shd.log" --interval 3600 -f
shd_pid=$BFS_PID
EXPECT_WITHIN "$HEAL_TIMEOUT" 0 info r3 summary total_pending
EXPECT 1 same_bricks "$B/r0" "$B/r1" "$B/r2"
EXPECT 1000 eval "find '$B/r2/d' -type f | wc -l"
TEST cmp "$B/r0/old/file" "$B/r2/old/file"
EXPECT 0 index_count "$B/r0"
EXPECT 0 index_count "$B/r1"
EXPECT 0 index_count "$B/r2"
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" idle state state
EXPECT r3 state volume
EXPECT "$shd_pid" state pid
TEST test "$(state healed)" -ge 1000                         # each new file and folder
TEST test "$(state bytes)" -ge 70000
EXPECT 0 state remaining
EXPECT 0 state split_brain
# a counter replicate does not know (a child name no volfile has) keeps a
# file on the index: the crawl ends anyway, counting it as remaining
gf=$(getfattr --absolute-names -n trusted.brickfs.gfid -e hex "$B/r0/old/file" | sed -n 's/.*=0x//p')
gf=${gf:0:8}-${gf:8:4}-${gf:12:4}-${gf:16:4}-${gf:20:12}
TEST setfattr -n trusted.brickfs.afr.ghost -v 0x000000000000000100000000000000000000000000000000 "$B/r0/old/file"
TEST touch "$B/r0/.brickfs/indices/pending/$gf"
crawls=$(state crawls)
TEST kill -USR1 "$shd_pid"                                   # `volume heal NAME`
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 eval "[ \"\$(state crawls)\" -gt $crawls ] && echo 1"
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" idle state state
EXPECT 1 state remaining
EXPECT 1 eval "grep -c '$gf stays on an index' '$T/logs/shd.log'"
TEST setfattr -x trusted.brickfs.afr.ghost "$B/r0/old/file"
TEST rm "$B/r0/.brickfs/indices/pending/$gf"
TEST kill -TERM "$shd_pid"
TEST bfs_wait_gone "$shd_pid" "$PROCESS_DOWN_TIMEOUT"
TEST grep -q "stopped" "$T/logs/shd.log"
# detached (no -f): the started process returns 0 once the daemon runs
TEST "$SHD" --volfile "$(volfile r3)" --state-file "$T/shd2.json" --log-file "$T/logs/shd2.log"
pid2=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["pid"])' "$T/shd2.json")
TEST bfs_pid_alive "$pid2"
TEST kill -TERM "$pid2"
TEST bfs_wait_gone "$pid2" "$PROCESS_DOWN_TIMEOUT"

# ---- 2. replica 2: split-brain on purpose, resolved by each policy ----
# (heal on access off, so that the mount, which sees both bricks between
# the two writes, does not heal the first write over before the second)
TEST cli volume create s2 replica 2 "127.0.0.1:$B/s0" "127.0.0.1:$B/s1" force
TEST cli volume set s2 network.ping-timeout "$NETWORK_PING_TIMEOUT"
TEST cli volume set s2 cluster.quorum-type none
TEST cli volume set s2 cluster.self-heal-daemon off      # it would heal between the two writes
for k in data metadata entry; do TEST cli volume set s2 "cluster.$k-self-heal" off; done
# no entry windows: a brick killed while the root's window is held would keep
# its dirty mark, and with every heal off nothing would clear it (not what
# this part is about)
TEST cli volume set s2 cluster.entry-eager-lock off
TEST cli volume start s2
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1" online s2 2
TEST mount_vol s2 "$M" entry-timeout=0,attr-timeout=0,negative-timeout=0
for f in big mtime src calm; do TEST eval "echo start >'$M/$f'"; done

# brick 1 down: version A (big is bigger on this side)
TEST kill_brickfsd
TEST kill_mgmt_brick s2 1
TEST eval "head -c 3000 /dev/zero | tr '\\0' A >'$M/big'"
TEST eval "echo A >'$M/mtime'"
TEST eval "echo A >'$M/src'"
# brick 1 back (the mount reconnects), brick 0 down: version B, written later
TEST start_brickfsd
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1" online s2 2
TEST kill_brickfsd
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" 3 graph_info "$M" XL=s2-replicate-0 dump up   # both children
TEST kill_mgmt_brick s2 0
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" 0 eval "echo BB >'$M/big'; echo \$?"
TEST eval "echo BB >'$M/mtime'"
TEST eval "echo BB >'$M/src'"
TEST start_brickfsd
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1" online s2 2
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" 3 graph_info "$M" XL=s2-replicate-0 dump up
TEST ! cat "$M/big"                                          # EIO, never one side at random
TEST cat "$M/calm"
TEST umount_fuse "$M"

EXPECT 3 info s2 split-brain split_brain

V=$(volfile s2)
out=$("$SHD" --volfile "$V" --resolve bigger-file --file /calm 2>&1)
TEST test $? -ne 0
TEST eval "echo '$out' | grep -q 'not in split-brain'"
out=$("$SHD" --volfile "$V" --resolve source-brick --file /src 2>&1)
TEST test $? -ne 0                                           # source-brick needs its brick
TEST "$SHD" --volfile "$V" --resolve bigger-file --file /big --json
TEST cmp "$B/s0/big" "$B/s1/big"
EXPECT 3000 stat -c %s "$B/s1/big"
TEST "$SHD" --volfile "$V" --resolve latest-mtime --file /mtime
EXPECT BB cat "$B/s0/mtime"
EXPECT BB cat "$B/s1/mtime"
g=$(getfattr --absolute-names -n trusted.brickfs.gfid -e hex "$B/s0/src" 2>/dev/null | sed -n 's/.*=0x//p')
g=${g:0:8}-${g:8:4}-${g:12:4}-${g:16:4}-${g:20:12}
TEST "$SHD" --volfile "$V" --resolve source-brick --file "gfid:$g" --source-brick s2-client-0
EXPECT A cat "$B/s0/src"
EXPECT A cat "$B/s1/src"
EXPECT 0 info s2 split-brain split_brain
EXPECT_WITHIN "$HEAL_TIMEOUT" 0 info s2 summary total_pending
EXPECT 1 same_bricks "$B/s0" "$B/s1"
TEST mount_vol s2 "$M" entry-timeout=0,attr-timeout=0,negative-timeout=0
EXPECT BB cat "$M/mtime"
TEST umount_fuse "$M"

done_testing
