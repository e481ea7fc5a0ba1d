# tests/lib/dht.sh — distribute volumes in integration tests
# (tests/integration/20?-*.t). Sourced after tests/lib/test.sh and
# tests/lib/mgmt.sh:
#
#   TEST dht_volume v3 3              # bricks $T/bricks/v3/b0..b2, started
#   TEST distrep_volume v 2 2          # 2 sets of replica 2: b0..b3
#   TEST mount_vol v3 "$T/m"
#   EXPECT ok dht_check spread 25 $(dht_bricks v3)
#   EXPECT ok dht_check audit v3 $(dht_bricks v3)
#
# Brick directories are named b0..b<N-1> after their index in the volume
# (the index in `volume status`, and N in the subvolume name v3-client-N
# that link files name). dht_check runs tests/lib/dht-check.py (its header
# lists the commands: hashed, counts, spread, audit, populate, verify).
#
# A brick kept down: brickfsd restarts a killed brick (with backoff), so
# dht_brick_down kills brickfsd first (bricks outlive it by design), then
# the brick; dht_brick_back starts brickfsd again, which starts the missing
# brick while it reconciles. The mounts keep their connections to the other
# bricks meanwhile and find the returning one through the port map.

[ -n "${BFS_DHT_SH:-}" ] && return 0
BFS_DHT_SH=1

DHT_CHECK=$BFS_ROOT/tests/lib/dht-check.py

dht_check()
{
    python3 "$DHT_CHECK" "$@"
}

# dht_bricks VOL: its brick directories, in volume order.
dht_bricks()
{
    local d i=0
    while d=$T/bricks/$1/b$i && [ -d "$d" ]; do
        echo "$d"
        i=$((i + 1))
    done
}

# dht_volume VOL N: creates, tunes (short ping timeout) and starts a
# distribute volume of N bricks on 127.0.0.1.
dht_volume()
{
    local vol=$1 n=$2 i args=()
    for ((i = 0; i < n; i++)); do
        mkdir -p "$T/bricks/$vol/b$i" && args+=("127.0.0.1:$T/bricks/$vol/b$i")
    done
    cli volume create "$vol" "${args[@]}" force &&
        cli volume set "$vol" network.ping-timeout "$NETWORK_PING_TIMEOUT" &&
        cli volume start "$vol"
}

# distrep_volume VOL NSETS REPLICA: creates, tunes and starts a
# distributed-replicate volume of NSETS sets of REPLICA bricks
# ($T/bricks/VOL/b0.., set s = bricks s*REPLICA..).
distrep_volume()
{
    local vol=$1 n=$(($2 * $3)) i args=()
    for ((i = 0; i < n; i++)); do
        mkdir -p "$T/bricks/$vol/b$i" && args+=("127.0.0.1:$T/bricks/$vol/b$i")
    done
    cli volume create "$vol" replica "$3" "${args[@]}" force &&
        cli volume set "$vol" network.ping-timeout "$NETWORK_PING_TIMEOUT" &&
        cli volume start "$vol"
}

# dht_online VOL: the online flags of its bricks, e.g. "1 1 0".
dht_online()
{
    cli --json volume status "$1" | python3 -c '
import json, sys
print(" ".join(str(int(b["online"])) for b in json.load(sys.stdin)["bricks"]))'
}

# dht_brick_down VOL IDX: brickfsd and then brick IDX killed (SIGKILL);
# nothing restarts the brick until dht_brick_back.
dht_brick_down()
{
    kill_brickfsd d1 KILL && kill_mgmt_brick "$1" "$2"
}

# dht_brick_back: brickfsd again; it restarts the missing brick.
dht_brick_back()
{
    start_brickfsd
}

# dht_listing DIR: "TOTAL DUPLICATES" of ls -A DIR.
dht_listing()
{
    local all
    all=$(ls -A "$1") || return 1
    echo "$(grep -c . <<<"$all") $(sort <<<"$all" | uniq -d | grep -c .)"
}

# dht_dir_on_bricks VOL REL: how many bricks have directory REL.
dht_dir_on_bricks()
{
    local b n=0
    for b in $(dht_bricks "$1"); do [ -d "$b/$2" ] && n=$((n + 1)); done
    echo "$n"
}

# dht_gfid PATH: the trusted.brickfs.gfid of a file on a brick, in hex.
dht_gfid()
{
    python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "trusted.brickfs.gfid").hex())' "$1"
}

# dht_data_brick VOL REL: the index of the brick holding REL's data (not a
# link file); fails if none or several do.
dht_data_brick()
{
    local b i=0 found=
    for b in $(dht_bricks "$1"); do
        if [ -f "$b/$2" ] && [ "$(stat -c %a "$b/$2")" != 1000 ]; then
            [ -n "$found" ] && return 1
            found=$i
        fi
        i=$((i + 1))
    done
    [ -n "$found" ] && echo "$found"
}

# sum_of N...: their sum.
sum_of()
{
    local s=0 x
    for x in "$@"; do s=$((s + x)); done
    echo "$s"
}
