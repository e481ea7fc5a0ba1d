#!/usr/bin/env bash
#
# 248-rebalance-chmod.t — a chmod made while a file is frozen for the last
# copy of its move (docs/design/rebalance.md, "Migration of one file",
# step 3) is carried to the moved copy, and so are the writes that land
# after it. The chmod replaced the source's frozen bits; the move used to
# restore the mode taken before the freeze on the destination, losing it
# (since session 5 the brick keeps the bits of a marked source through a
# client's chmod, and distribute follows the chmod like a write).
# Then (volume x) a source left frozen by a crashed move and chmodded:
# the next run keeps the chmod (it restored the mark's mode).
# Run twice: the writer's fd O_RDWR on volume v, O_WRONLY on volume w (a
# write landing on the frozen source follows the file however the fd was
# opened). Throttled to 1 MB/s with a writer on the file, so that the last copy
# of its 2 MiB takes about two seconds; the chmod is made through the
# mount as soon as the source shows the frozen bits (S_ISVTX|S_ISGID: mode
# 3xxx on the brick).

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/dht.sh"
. "$(dirname "$0")/../lib/rebal.sh"

skip_unless_mgmt
skip_unless_brickfs

TEST start_brickfsd

# a writer rewriting the first 4 KiB every 20 ms: the file changes while
# it is copied, so the move makes its last copy after the freeze
writer='
import os, sys, time
path, mode, stop, last = sys.argv[1:5]
fd = os.open(path, os.O_RDWR if mode == "rdwr" else os.O_WRONLY)
i = 0
while not os.path.exists(stop):
    os.pwrite(fd, b"%08d" % i * 512, 0)
    i += 1
    time.sleep(0.02)
os.close(fd)
open(last, "w").write("%08d" % (i - 1))
'
# the chmod, as soon as the source is frozen
chmodder='
import os, stat, sys, time
src, path, report = sys.argv[1:4]
while True:
    try:
        m = os.stat(src).st_mode
    except FileNotFoundError:
        open(report, "w").write("MISSED (source gone before it was seen frozen)\n")
        sys.exit(0)
    if m & 0o3000 == 0o3000:
        os.chmod(path, 0o600)
        open(report, "w").write("CHMOD while source mode was %o\n" % stat.S_IMODE(m))
        sys.exit(0)
    time.sleep(0.005)
'

# run_case VOL MODE: volume VOL of two bricks, a 2 MiB file written to
# through an fd opened MODE (rdwr or wronly), a third brick added and the
# file moved there while it is written to and chmodded.
run_case()
{
    local v=$1 mode=$2 M=$T/m-$1 B=$T/bricks/$1 f src
    rebal_moving_file "$v" 2097152
    f=$RB_F src=$RB_SRC
    TEST chmod 0644 "$M/$f"
    bfs_spawn "writer-$v" python3 -c "$writer" "$M/$f" "$mode" "$T/stop-$v" "$T/last-$v"
    bfs_spawn "chmodder-$v" python3 -c "$chmodder" "$src" "$M/$f" "$T/chmod-report-$v"
    rebal_add_third "$v" 1
    touch "$T/stop-$v"
    TEST bfs_wait_gone "$(bfs_pid_of "writer-$v")" 30
    TEST bfs_wait_gone "$(bfs_pid_of "chmodder-$v")" 30
    EXPECT CHMOD eval "cut -d' ' -f1 '$T/chmod-report-$v'"
    bfs__diag <"$T/chmod-report-$v"
    EXPECT 0 rebal_field "$v" files_failed
    EXPECT 2 dht_data_brick "$v" "$f"            # it moved to the new brick
    EXPECT 600 stat -c %a "$B/b2/$f"             # with the chmod made during its last copy
    EXPECT 600 stat -c %a "$M/$f"
    # the writes that landed on the source while it was frozen, and while
    # the chmod had unfrozen it, followed (the last one included); an
    # O_WRONLY fd used to lose them: distribute re-read their bytes through
    # the caller's fd to repeat them on the destination (EBADF)
    EXPECT "$(cat "$T/last-$v" 2>/dev/null)" head -c 8 "$B/b2/$f"
    EXPECT "ok" dht_check audit "$v" $(dht_bricks "$v")
    echo "# rebalance log ($mode):"
    grep -v "^$" "$T"/mgmt/*/log/rebalance/"$v".log 2>/dev/null | tail -15 | bfs__diag
}

# crashed_case VOL: a source left frozen by a move that died (its mark,
# the frozen bits) is chmodded through the mount: the brick keeps the bits
# (so a live move would see the chmod follow), and the next run's move
# restores the chmod's mode, not the one the mark recorded.
crashed_case()
{
    local v=$1 M=$T/m-$1 B=$T/bricks/$1 f src sum
    rebal_moving_file "$v" 65536
    f=$RB_F src=$RB_SRC
    TEST chmod 0644 "$M/$f"
    sum=$(md5sum <"$M/$f")
    TEST python3 -c 'import os, sys; os.setxattr(sys.argv[1], "trusted.brickfs.dht.migrating", sys.argv[2].encode()); os.chmod(sys.argv[1], 0o3644)' "$src" "644 $v-client-1"
    TEST chmod 0600 "$M/$f"
    EXPECT 3600 stat -c %a "$src"                # the brick kept the frozen bits
    rebal_add_third "$v"
    EXPECT 0 rebal_field "$v" files_failed
    EXPECT 2 dht_data_brick "$v" "$f"
    EXPECT 600 stat -c %a "$B/b2/$f"             # the chmod made after the crash
    EXPECT "$sum" eval "md5sum <'$M/$f'"
    EXPECT "ok" dht_check audit "$v" $(dht_bricks "$v")
}

run_case v rdwr
run_case w wronly
crashed_case x
done_testing
