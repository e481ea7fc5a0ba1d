# tests/lib/rebal.sh — elastic volumes in integration tests
# (tests/integration/24?-*.t; docs/design/rebalance.md). Sourced after
# tests/lib/test.sh, mgmt.sh and dht.sh:
#
#   EXPECT_WITHIN 120 completed rebal_state v
#   rebal_field v files_moved          # a number of the node's status
#   EXPECT 0 rebal_dups v              # no GFID moved twice (moves.log)
#   EXPECT 0 rebal_dups_in v $T/bricks/v/b*/d*   # the same, among those files

[ -n "${BFS_REBAL_SH:-}" ] && return 0
BFS_REBAL_SH=1

# rebal_state VOL: the rebalance state (not-started, in-progress, ...).
rebal_state()
{
    cli --json volume rebalance "$1" status | python3 -c '
import json, sys
print(json.load(sys.stdin)["state"])'
}

# rebal_field VOL KEY: one field of this node's rebalance status.
rebal_field()
{
    cli --json volume rebalance "$1" status | python3 -c '
import json, sys
print(json.load(sys.stdin)["nodes"][0][sys.argv[1]])' "$2"
}

# rebal_pending VOL: "true" while the previous layout is still consulted.
rebal_pending()
{
    cli --json volume rebalance "$1" status | python3 -c '
import json, sys
print(str(json.load(sys.stdin)["layout_pending"]).lower())'
}

# rebal_moves VOL: the moves.log of the current rebalance ("GFID SIZE FROM TO").
rebal_moves()
{
    cat "$(brickfsd_state)/rebalance/$1/moves.log" 2>/dev/null
}

# rebal_dups VOL: how many GFIDs appear more than once in moves.log.
rebal_dups()
{
    rebal_moves "$1" | cut -d' ' -f1 | sort | uniq -d | grep -c .
}

# rebal_dups_in VOL DIR...: how many GFIDs appear more than once in
# moves.log among the files under the brick folders DIR... (a workload that
# renames files lets a moved file be met again under a name hashing
# elsewhere, rightly moved a second time: count only files it leaves alone).
rebal_dups_in()
{
    local vol=$1
    shift
    python3 - "$(brickfsd_state)/rebalance/$vol/moves.log" "$@" <<'PY'
import collections, os, sys
moves = collections.Counter(l.split()[0].replace("-", "") for l in open(sys.argv[1]) if l.strip())
mine = set()
for top in sys.argv[2:]:
    for d, _, files in os.walk(top):
        for f in files:
            try:
                mine.add(os.getxattr(os.path.join(d, f), "trusted.brickfs.gfid").hex())
            except OSError:
                pass
print(sum(1 for g, n in moves.items() if n > 1 and g in mine))
PY
}

# rebal_pid VOL: the rebalance process's pid (0 when none).
rebal_pid()
{
    rebal_field "$1" pid
}

# within_pct GOT WANT PCT: GOT is within PCT percent of WANT.
within_pct()
{
    python3 -c 'import sys; g, w, p = map(float, sys.argv[1:]); sys.exit(0 if abs(g - w) <= w * p / 100 else 1)' "$@"
}

# big_files DIR N MB: N files of MB MiB of random data, and DIR.md5.
big_files()
{
    local i
    mkdir -p "$1" || return 1
    for ((i = 0; i < $2; i++)); do
        head -c "$(($3 * 1048576))" /dev/urandom >"$1/big$i" || return 1
    done
    (cd "$1" && md5sum big* >"$T/$(basename "$1").md5")
}

# big_check DIR: the files of big_files DIR are intact.
big_check()
{
    (cd "$1" && md5sum --quiet -c "$T/$(basename "$1").md5")
}

# moving_name BRICKDIR DIR NSUB: a name "held<i>" that hashes, in DIR (as
# dht-check's hashed: relative to the volume root, "." for the root), to
# the last of NSUB subvolumes under canonical(NSUB): a file of that name
# moves to an added brick.
moving_name()
{
    local names=() i
    for ((i = 0; i < 64; i++)); do names+=("held$i"); done
    paste <(printf '%s\n' "${names[@]}") <(dht_check hashed "$3" "$1" "$2" "${names[@]}") |
        awk -v last="$(($3 - 1))" '$2 == last { print $1; exit }'
}

# rebal_moving_file VOL SIZE: volume VOL of two bricks ($T/bricks/VOL/b0,
# b1: dht.sh's dht_volume) mounted at $T/m-VOL, with a file of SIZE random
# bytes whose name hashes to a third brick (moving_name), so that
# rebal_add_third moves it: its name in RB_F, its path on the brick that
# holds it in RB_SRC. Asserts each step (TEST).
rebal_moving_file()
{
    local v=$1 M=$T/m-$1 B=$T/bricks/$1
    TEST dht_volume "$v" 2
    TEST mount_vol "$v" "$M"
    RB_F=$(moving_name "$B/b0" . 3)
    TEST [ -n "$RB_F" ]
    TEST eval "head -c $2 /dev/urandom >'$M/$RB_F'"
    RB_SRC=$(ls -d "$B"/b[01]/"$RB_F" 2>/dev/null | head -1)
    TEST [ -f "$RB_SRC" ]
}

# rebal_add_third VOL [MBPS]: adds brick $T/bricks/VOL/b2 to VOL, waits
# until the mount $T/m-VOL runs the new graph, rebalances (throttled to
# MBPS MB/s when given) and waits until the rebalance completed (TEST,
# EXPECT_WITHIN 240 s).
rebal_add_third()
{
    local v=$1 M=$T/m-$1 B=$T/bricks/$1
    mkdir -p "$B/b2"
    TEST cli volume add-brick "$v" "127.0.0.1:$B/b2" force
    TEST bfs_wait_until 30 eval "[ \"\$(graph_info '$M' volfile_revision)\" = \"\$(vol_field $v revision)\" ]"
    [ -z "${2:-}" ] || TEST cli volume set "$v" cluster.rebal-max-mbps "$2"
    TEST cli volume rebalance "$v" start
    EXPECT_WITHIN 240 completed rebal_state "$v"
}

# hold_writer FILE STOP REPORT: one fd kept open on FILE; a 4 KiB record
# written (and read back through the same fd) every 10 ms until STOP
# exists; then the whole file checked through a new open. REPORT gets
# "OK records=N" or "FAIL why".
hold_writer()
{
    python3 - "$@" <<'PY'
import os, sys, time
path, stop, report = sys.argv[1:4]
def rec(i):
    return (b"%08d" % i) * 512
n = 0
try:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    while not os.path.exists(stop) or n < 50:
        os.pwrite(fd, rec(n), n * 4096)
        if os.pread(fd, 4096, n * 4096) != rec(n):
            raise Exception("record %d read back wrong through the same fd" % n)
        n += 1
        time.sleep(0.01)
    os.fsync(fd)
    os.close(fd)
    with open(path, "rb") as f:
        data = f.read()
    if len(data) != n * 4096:
        raise Exception("size %d, want %d" % (len(data), n * 4096))
    for i in range(n):
        if data[i * 4096:(i + 1) * 4096] != rec(i):
            raise Exception("record %d of %d wrong" % (i, n))
    open(report, "w").write("OK records=%d\n" % n)
except Exception as e:
    open(report, "w").write("FAIL %s\n" % e)
    sys.exit(1)
PY
}
