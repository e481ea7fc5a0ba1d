#!/usr/bin/env bash
#
# 201-distribute-brick-down.t — a 3-brick distribute volume with its brick 1
# down (SIGKILL; brickfsd killed first so that nothing restarts the brick,
# see tests/lib/dht.sh), docs/design/distribute.md "Failure cases":
#   - files on bricks 0 and 2 read back whole; a file on brick 1 answers
#     ENOTCONN (never ENOENT, which would invite a duplicate);
#   - creates and mkdirs whose names hash to brick 1 fail with ENOTCONN or
#     EIO, promptly, and leave nothing on bricks 0 and 2; the other names
#     work and land on their hashed brick;
#   - rmdir answers ENOTCONN and removes nothing;
#   - brick 1 back (brickfsd restarted restarts it): its files read back,
#     the names that failed can be created, a directory made meanwhile is
#     healed onto it on lookup, and the bricks pass the audit of
#     tests/lib/dht-check.py.

# Brick lists and name lists are split into words on purpose (no spaces in $T).
# shellcheck disable=SC2046
. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/dht.sh"

skip_unless_mgmt
skip_unless_brickfs

M=$T/m
B0=$T/bricks/v3/b0
B1=$T/bricks/v3/b1
B2=$T/bricks/v3/b2
HANG=60                    # an operation slower than this counts as a hang

TEST start_brickfsd
TEST dht_volume v3 3
TEST mount_vol v3 "$M"
TEST mkdir "$M/flat" "$M/keep"
TEST dht_check populate "$M/flat" 0 600
EXPECT ok dht_check audit v3 "$B0" "$B1" "$B2"
on1=$(dht_check counts "$B1/flat")
TEST [ "$on1" -gt 100 ]
f1=$(cd "$B1/flat" && find . -maxdepth 1 -type f -perm 644 -printf '%f\n' | head -n 1)
TEST [ -n "$f1" ]

# new names, split by the brick they hash to
down=() up=() ddown=() dup=()
mapfile -t h < <(dht_check hashed 3 "$B0" flat $(seq -f n%g 0 59))
for i in $(seq 0 59); do
    if [ "${h[$i]}" = 1 ]; then down+=("n$i"); else up+=("n$i"); fi
done
mapfile -t h < <(dht_check hashed 3 "$B0" . $(seq -f dir%g 0 59))
for i in $(seq 0 59); do
    if [ "${h[$i]}" = 1 ]; then ddown+=("dir$i"); else dup+=("dir$i"); fi
done
TEST [ "${#down[@]}" -ge 5 ] && [ "${#up[@]}" -ge 5 ] && [ "${#ddown[@]}" -ge 2 ] && [ "${#dup[@]}" -ge 2 ]

# all_of WANT... -- ARGS...: "ok" when every output line of dht_check ARGS
# is one of WANT, and it ends within $HANG seconds
all_of()
{
    local want=() line bad=0
    while [ "$1" != -- ]; do want+=("$1"); shift; done
    shift
    while read -r line; do
        [[ " ${want[*]} " == *" $line "* ]] || { echo "$line"; bad=1; }
    done < <(timeout "$HANG" python3 "$DHT_CHECK" "$@"; echo "rc=$?" | grep -v '^rc=0$')
    [ $bad = 0 ] && echo ok
}

# on_bricks NAME...: how many of those names exist on any brick dir given
# in $BRICKS (data, link file or directory).
on_bricks()
{
    local b n=0 x
    for b in $BRICKS; do
        for x in "$@"; do [ -e "$b/$x" ] && n=$((n + 1)); done
    done
    echo "$n"
}

# ---- brick 1 down ----
TEST dht_brick_down v3 1
EXPECT_WITHIN "$PING_TIMEOUT" ENOTCONN dht_check try read "$M/flat/$f1"
EXPECT ENOTCONN dht_check try stat "$M/flat/$f1"
EXPECT ok dht_check readable "$M/flat" "$B0/flat" "$B2/flat"
EXPECT "$((600 - on1)) 0" dht_listing "$M/flat"

# creates hashing to brick 1 fail cleanly and leave no orphans
EXPECT ok all_of ENOTCONN EIO -- try create $(printf "$M/flat/%s " "${down[@]}")
BRICKS="$B0/flat $B1/flat $B2/flat"
EXPECT 0 on_bricks "${down[@]}"
EXPECT ok all_of 0 -- try create $(printf "$M/flat/%s " "${up[@]}")
EXPECT "${#up[@]}" on_bricks "${up[@]}"
# mkdir likewise; a mkdir hashing elsewhere works on the bricks that are up
EXPECT ok all_of ENOTCONN EIO -- try mkdir $(printf "$M/%s " "${ddown[@]}")
BRICKS="$B0 $B1 $B2"
EXPECT 0 on_bricks "${ddown[@]}"
EXPECT ok all_of 0 -- try mkdir $(printf "$M/%s " "${dup[@]}")
BRICKS="$B0 $B2"
EXPECT "$((2 * ${#dup[@]}))" on_bricks "${dup[@]}"
EXPECT "${#dup[@]}" eval "ls -A '$M' | grep -c '^dir'"
# rmdir needs every brick: nothing removed
EXPECT ok all_of ENOTCONN -- try rmdir "$M/keep"
EXPECT 3 dht_dir_on_bricks v3 keep
EXPECT "$((600 - on1 + ${#up[@]})) 0" dht_listing "$M/flat"

# ---- brick 1 back ----
TEST dht_brick_back
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" "1 1 1" dht_online v3
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" 0 dht_check try read "$M/flat/$f1"
TEST dht_check verify "$M/flat" 0 600
EXPECT ok dht_check readable "$M/flat" "$B1/flat"
EXPECT "$((600 + ${#up[@]})) 0" dht_listing "$M/flat"
EXPECT ok all_of 0 -- try create $(printf "$M/flat/%s " "${down[@]}")
BRICKS="$B1/flat"
EXPECT "${#down[@]}" on_bricks "${down[@]}"
EXPECT "$((600 + ${#up[@]} + ${#down[@]})) 0" dht_listing "$M/flat"
# the directories made while brick 1 was away are healed onto it on lookup
# (polled: the kernel may answer from its dentry cache for a moment)
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" "${#dup[@]}" eval "stat ${dup[*]/#/$M/} >/dev/null; BRICKS=$B1 on_bricks ${dup[*]}"
EXPECT ok all_of 0 -- try mkdir $(printf "$M/%s " "${ddown[@]}")
EXPECT ok all_of 0 -- try rmdir "$M/keep" $(printf "$M/%s " "${dup[@]}" "${ddown[@]}")
EXPECT 0 dht_dir_on_bricks v3 keep
EXPECT ok dht_check audit v3 "$B0" "$B1" "$B2"

TEST umount_fuse "$M"
done_testing
