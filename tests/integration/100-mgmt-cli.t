#!/usr/bin/env bash
#
# 100-mgmt-cli.t — every brickfs volume command against a real brickfsd and
# real bricks, and their errors: bad and duplicate names, missing
# arguments, bricks in use or nested, the root file system without force,
# replica and disperse counts (more in 230), stop of a stopped volume, delete of a started
# one, unknown options and out-of-range values, usage and help.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"

skip_unless_mgmt

B=$T/bricks
TEST start_brickfsd

# ---- help and usage ----
TEST cli --help
TEST cli volume --help
TEST cli volume create --help
EXPECT 2 eval 'cli volume >/dev/null 2>&1; echo $?'
EXPECT 2 eval 'cli frobnicate >/dev/null 2>&1; echo $?'
EXPECT 2 eval 'cli volume frobnicate >/dev/null 2>&1; echo $?'
EXPECT 2 eval 'cli --bogus volume list >/dev/null 2>&1; echo $?'
EXPECT "No volumes present" cli volume list

# ---- create: names ----
EXPECT 2 eval 'cli volume create >/dev/null 2>&1; echo $?'             # no name
EXPECT 2 eval 'cli volume create v1 >/dev/null 2>&1; echo $?'          # no brick
TEST ! cli volume create 'bad name' "127.0.0.1:$B/x" force
TEST ! cli volume create 'a/b' "127.0.0.1:$B/x" force
TEST ! cli volume create "$(printf 'v%.0s' {1..65})" "127.0.0.1:$B/x" force
TEST cli volume create "$(printf 'v%.0s' {1..64})" "127.0.0.1:$B/long" force
msg=$(cli volume create 'bad name' "127.0.0.1:$B/x" force 2>&1)
EXPECT 1 eval "echo '$msg' | grep -c \"has a character other than\""
EXPECT 1 eval "echo '$msg' | wc -l"                                    # one line

# ---- create: bricks ----
TEST ! cli volume create v1 "$B/nohost" force                          # not HOST:/DIR
TEST ! cli volume create v1 "127.0.0.1:relative/dir" force
TEST ! cli volume create v1 "10.255.255.1:$B/b1" force                 # not this node
TEST ! cli volume create v1 "127.0.0.1:$B/b1"                          # root fs, no force
EXPECT 1 eval "cli volume create v1 127.0.0.1:$B/b1 2>&1 | grep -c 'root file system'"
TEST ! test -e "$B/b1"                                                 # nothing made on failure
TEST cli volume create v1 "127.0.0.1:$B/b1" force
TEST test -d "$B/b1"                                                   # created
EXPECT "$(vol_field v1 id)" getfattr --only-values -n trusted.brickfs.volume-id "$B/b1"
TEST ! cli volume create v1 "127.0.0.1:$B/b9" force                    # duplicate name
EXPECT 1 eval "cli volume create v1 127.0.0.1:$B/b9 force 2>&1 | grep -c 'already exists'"
TEST ! cli volume create v2 "127.0.0.1:$B/b1" force                    # brick in use
TEST ! cli volume create v2 "127.0.0.1:$B/b1/inner" force              # nested inside
TEST ! cli volume create v2 "127.0.0.1:$B" force                       # contains a brick
TEST ! cli volume create v2 "127.0.0.1:$B/b2" "127.0.0.1:$B/b2/" force # twice in one request
EXPECT 1 eval "cli volume create v2 127.0.0.1:$B/b1/inner force 2>&1 | grep -c 'lies inside'"
mkdir -p "$T/other"
setfattr -n trusted.brickfs.volume-id -v someone-else "$T/other"
TEST ! cli volume create v2 "localhost:$T/other" force                 # marked by another pool
EXPECT 1 eval "cli volume create v2 localhost:$T/other force 2>&1 | grep -c 'setfattr -x'"
TEST ! cli volume create v2 "127.0.0.1:$T/mgmt/d1/state/store/volumes%2Fv1.kv" force  # a file

# ---- replica and disperse counts are checked, never mis-built ----
t3="127.0.0.1:$B/t1 127.0.0.1:$B/t2 127.0.0.1:$B/t3"
refused() # WHY SPEC...: create fails with a message containing WHY
{
    local why=$1; shift
    # shellcheck disable=SC2068
    cli volume create v3 $@ force 2>&1 | grep -c -- "$why"
}
EXPECT 1 refused 'is not a multiple of the replica count 2' replica 2 $t3
EXPECT 1 refused 'is not a multiple of the replica count 3' replica 3 127.0.0.1:$B/t1 127.0.0.1:$B/t2
EXPECT 1 refused 'arbiter 1 needs replica 3' replica 2 arbiter 1 127.0.0.1:$B/t1 127.0.0.1:$B/t2
EXPECT 1 refused 'arbiter needs a replica count' arbiter 1 $t3
EXPECT 1 refused 'arbiter count 2 is not supported' replica 3 arbiter 2 $t3
EXPECT 1 refused 'replica count 4 is not supported' replica 4 $t3 127.0.0.1:$B/t4
EXPECT 1 refused 'disperse 3 needs a redundancy count' disperse 3 $t3
EXPECT 1 refused 'redundancy 2 is too large for disperse 4' disperse 4 redundancy 2 $t3 127.0.0.1:$B/t4
EXPECT 2 eval "cli volume create v3 replica x 127.0.0.1:$B/t1 force >/dev/null 2>&1; echo \$?"
EXPECT 2 eval "cli volume create v3 replica 0 127.0.0.1:$B/t1 force >/dev/null 2>&1; echo \$?"
TEST ! test -e "$B/t1"

# ---- replicate, distributed-replicate and arbiter volumes ----
if [ -e "$BFS_BUILD/lib/brickfs/xlators/cluster/replicate.so" ]; then
    # shellcheck disable=SC2086
    TEST cli volume create r3 replica 3 $t3 force
    EXPECT "Type: Replicate" eval "cli volume info r3 | grep '^Type:'"
    EXPECT "Number of Bricks: 1 x 3 = 3" eval "cli volume info r3 | grep '^Number of Bricks:'"
    EXPECT replicate vol_field r3 type
    EXPECT 3 vol_field r3 replica
    vf=$(api body GET /v1/volumes/r3/volfile/client)
    EXPECT 1 eval "echo '$vf' | grep -c 'type cluster/replicate'"
    EXPECT 1 eval "echo '$vf' | grep -c 'subvolumes r3-client-0 r3-client-1 r3-client-2\$'"
    EXPECT 0 eval "echo '$vf' | grep -c 'cluster/distribute\|arbiter-count'"
    EXPECT 1 eval "echo '$vf' | grep -c 'subvolumes r3-replicate-0\$'"   # io-stats on top
    # replicate's options are volume options, on the client side only
    TEST cli volume set r3 cluster.quorum-type fixed
    TEST cli volume set r3 cluster.quorum-count 2
    TEST ! cli volume set r3 cluster.quorum-type sometimes
    TEST ! cli volume set r3 arbiter-count 1                           # the layout decides that
    EXPECT 1 eval "api body GET /v1/volumes/r3/volfile/client | grep -c 'option cluster.quorum-type fixed'"
    EXPECT 0 eval "grep -c 'cluster.quorum' '$(brickfsd_state)/volfiles/r3/r3-brick-0.vol'"
    EXPECT 1 eval "cli volume set help | grep -A4 '^Option: cluster.background-self-heal-count$' | grep -c '^Applies to: client side (cluster/replicate[,)]'"

    TEST cli volume create dr replica 2 "127.0.0.1:$B/d1" "127.0.0.1:$B/d2" \
        "127.0.0.1:$B/d3" "127.0.0.1:$B/d4" force
    EXPECT "Type: Distributed-Replicate" eval "cli volume info dr | grep '^Type:'"
    EXPECT "Number of Bricks: 2 x 2 = 4" eval "cli volume info dr | grep '^Number of Bricks:'"
    vf=$(api body GET /v1/volumes/dr/volfile/client)
    EXPECT 1 eval "echo '$vf' | grep -c 'subvolumes dr-client-0 dr-client-1\$'"
    EXPECT 1 eval "echo '$vf' | grep -c 'subvolumes dr-client-2 dr-client-3\$'"
    EXPECT 1 eval "echo '$vf' | grep -c 'subvolumes dr-replicate-0 dr-replicate-1\$'"
    EXPECT 1 eval "echo '$vf' | grep -c 'type cluster/distribute'"

    TEST cli volume create ar replica 3 arbiter 1 "127.0.0.1:$B/a1" "127.0.0.1:$B/a2" \
        "127.0.0.1:$B/a3" "127.0.0.1:$B/a4" "127.0.0.1:$B/a5" "127.0.0.1:$B/a6" force
    EXPECT "Number of Bricks: 2 x (2 + 1) = 6" eval "cli volume info ar | grep '^Number of Bricks:'"
    EXPECT "Brick3: 127.0.0.1:$B/a3 (arbiter)" eval "cli volume info ar | grep '^Brick3:'"
    EXPECT "Brick4: 127.0.0.1:$B/a4" eval "cli volume info ar | grep '^Brick4:'"
    EXPECT 2 eval "api body GET /v1/volumes/ar/volfile/client | grep -c 'option arbiter-count 1'"
    for v in r3 dr ar; do TEST cli volume delete "$v" --yes; done
else
    SKIP "cluster/replicate is not built"
fi
if [ ! -e "$BFS_BUILD/lib/brickfs/xlators/cluster/distribute.so" ]; then
    TEST ! cli volume create v3 "127.0.0.1:$B/t1" "127.0.0.1:$B/t2" force
fi

# ---- a host name of this node is a valid brick host ----
if getent ahostsv4 "$(hostname)" >/dev/null 2>&1; then
    TEST cli volume create vh "$(hostname):$B/h1" force
    EXPECT "$(hostname)" eval "cli --json volume info vh | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"bricks\"][0][\"host\"])'"
    TEST cli volume delete vh --yes
else
    SKIP "$(hostname) does not resolve here"
fi

# ---- not on the root file system: no force needed ----
if mount_tmpfs "$T/fs" 2>/dev/null; then
    TEST cli volume create vt "127.0.0.1:$T/fs/brick"
    TEST cli volume delete vt --yes
else
    SKIP "cannot mount a tmpfs here"
fi

# ---- info, list ----
EXPECT "created" vol_field v1 status
EXPECT "1" eval "cli volume info v1 | grep -c '^Brick1: 127.0.0.1:$B/b1\$'"
EXPECT "v1
$(printf 'v%.0s' {1..64})" cli volume list                          # sorted
TEST ! cli volume info nosuch
EXPECT 1 eval "cli volume info nosuch 2>&1 | grep -c 'does not exist'"
TEST cli --json volume info
EXPECT "v1" eval "cli --json volume info v1 | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"name\"])'"

# ---- start, status ----
TEST ! cli volume start
TEST ! cli volume start nosuch
TEST ! cli volume stop v1                                              # not started
EXPECT 1 eval "cli volume stop v1 2>&1 | grep -c 'is not started'"
TEST cli volume start v1
EXPECT started vol_field v1 status
EXPECT 1 vol_brick_field v1 0 online
port=$(vol_brick_field v1 0 port)
pid=$(vol_brick_field v1 0 pid)
TEST bfs_port_listening "$port"
EXPECT "$pid" mgmt_brick_pid v1 0
TEST ! cli volume start v1                                             # already started
TEST cli volume start v1 force                                         # harmless when up
EXPECT "$pid" vol_brick_field v1 0 pid                                 # not restarted
EXPECT 1 eval "cli volume status v1 | grep -c '^127.0.0.1:$B/b1 *$port *Y *$pid'"
TEST cli volume status
EXPECT "$port" eval "cli --json volume status v1 | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"bricks\"][0][\"port\"])'"

# ---- options ----
TEST cli volume set help
EXPECT 1 eval "cli volume set help | grep -c '^Option: network.ping-timeout\$'"
TEST cli volume set v1 network.ping-timeout 7
EXPECT 7 eval "cli --json volume get v1 network.ping-timeout | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"options\"][0][\"value\"])'"
EXPECT 1 eval "cli volume info v1 | grep -c '^network.ping-timeout: 7\$'"
EXPECT 1 eval "api body GET /v1/volumes/v1/volfile/client | grep -c 'option network.ping-timeout 7'"
vf_url=/v1/volumes/v1/volfile/client
rev=$(api header:X-Brickfs-Volfile-Revision GET "$vf_url")
TEST [ -n "$rev" ]
EXPECT 304 api code GET "$vf_url" "" "If-None-Match: \"$rev\""
TEST cli volume set v1 network.ping-timeout 8
EXPECT 200 api code GET "$vf_url" "" "If-None-Match: \"$rev\""
TEST ! cli volume set v1 no.such.option 1
EXPECT 1 eval "cli volume set v1 no.such.option 1 2>&1 | grep -c 'unknown option'"
TEST ! cli volume set v1 network.ping-timeout 0                       # below the range
TEST ! cli volume set v1 network.ping-timeout 100000                  # above the range
TEST ! cli volume set v1 network.ping-timeout soon                    # not a number
EXPECT 1 eval "cli volume set v1 network.ping-timeout 100000 2>&1 | grep -c 'out of range'"
TEST ! cli volume set v1 network.ping-timeout                          # missing value
TEST ! cli volume set nosuch network.ping-timeout 5
TEST ! cli volume set v1 transport.listen-port 5                       # not settable
EXPECT 8 eval "cli --json volume get v1 network.ping-timeout | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"options\"][0][\"value\"])'"
TEST cli volume get v1 all
TEST ! cli volume get v1 no.such.option
TEST ! cli volume get v1
TEST cli volume set v1 auth.allow 127.0.0.1
EXPECT 1 eval "grep -c 'option auth.allow 127.0.0.1' '$(brickfsd_state)/volfiles/v1/v1-brick-0.vol'"
TEST cli volume reset v1 network.ping-timeout
EXPECT default eval "cli --json volume get v1 network.ping-timeout | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"options\"][0][\"source\"])'"
TEST cli volume reset v1
EXPECT 0 eval "cli volume info v1 | grep -c 'Options Reconfigured'"
TEST ! cli volume reset v1 no.such.option

# ---- stop, delete ----
TEST ! cli volume delete v1 --yes                                      # started
EXPECT 1 eval "cli volume delete v1 --yes 2>&1 | grep -c 'stop it first'"
TEST cli volume stop v1 --yes
EXPECT_WITHIN "$PROCESS_DOWN_TIMEOUT" 1 eval "bfs_pid_alive $pid || echo 1"
EXPECT 0 vol_brick_field v1 0 online
TEST ! cli volume stop v1 --yes                                        # stopped already
TEST cli --yes volume delete v1
TEST ! cli volume info v1
TEST ! getfattr -n trusted.brickfs.volume-id "$B/b1"                   # marker removed
TEST test -d "$B/b1"                                                   # data kept
TEST cli volume create v1again "127.0.0.1:$B/b1" force                 # reusable
TEST ! cli volume delete nosuch --yes

# ---- the API itself ----
EXPECT 404 api code GET /v1/nothing
EXPECT 405 api code PUT /v1/volumes
EXPECT 400 api code POST /v1/volumes '{not json' 
EXPECT 409 api code POST /v1/volumes "{\"name\":\"v1again\",\"bricks\":[\"127.0.0.1:$B/z\"],\"force\":true}"
EXPECT 400 api code POST /v1/volumes "{\"name\":\"r\",\"replica\":2,\"bricks\":[\"127.0.0.1:$B/r1\"],\"force\":true}"
EXPECT 400 api code POST /v1/volumes "{\"name\":\"r\",\"type\":\"replicate\",\"bricks\":[\"127.0.0.1:$B/r1\"],\"force\":true}"
EXPECT 400 api code POST /v1/volumes "{\"name\":\"r\",\"disperse\":3,\"bricks\":[\"127.0.0.1:$B/r1\",\"127.0.0.1:$B/r2\",\"127.0.0.1:$B/r3\"],\"force\":true}"
TEST ! test -e "$B/r1"
EXPECT 1 eval "api body GET /v1/volumes/nosuch | grep -c '\"error\"'"
EXPECT 404 api code GET /v1/volumes/nosuch
EXPECT 400 api code GET '/v1/volumes/bad%20name'
EXPECT 200 api code GET /v1/health

# ---- brickfsd itself ----
TEST "$BRICKFSD_BIN" --help
TEST ! "$BRICKFSD_BIN" --no-such-flag
p2=$(free_port)
TEST ! "$BRICKFSD_BIN" --foreground --state-dir "$(brickfsd_state)" --log-dir "$T/mgmt/x/log" \
    --run-dir "$T/mgmt/x/run" --listen "127.0.0.1:$p2"                # state folder in use
EXPECT 1 eval "grep -c 'another brickfsd (pid $(brickfsd_pid)) uses the state folder' '$T/mgmt/x/log/brickfsd.log'"
# without --foreground it detaches once it listens, and says so by its exit status
TEST "$BRICKFSD_BIN" --state-dir "$T/mgmt/d2/state" --log-dir "$T/mgmt/d2/log" \
    --run-dir "$T/mgmt/d2/run" --listen "127.0.0.1:$p2" --brick-ports 1000-1001
d2=$(head -n 1 "$T/mgmt/d2/state/brickfsd.lock")
[ -n "$d2" ] && echo "$d2 $(bfs_proc_start "$d2") brickfsd-d2" >>"$T/.run/pids"   # torn down with the rest
TEST cli --server "127.0.0.1:$p2" volume list
TEST bfs_stop "$d2"
TEST ! "$BRICKFSD_BIN" --state-dir "$T/mgmt/d3/state" --log-dir "$T/mgmt/d3/log" \
    --run-dir "$T/mgmt/d3/run" --listen "127.0.0.1:$(brickfsd_port)"   # port in use: fails, not hangs

# ---- unreachable brickfsd: one line, non-zero ----
TEST ! cli --server 127.0.0.1:1 volume list
EXPECT 1 eval "cli --server 127.0.0.1:1 volume list 2>&1 | wc -l"

done_testing
