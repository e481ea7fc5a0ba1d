# tests/lib/netns.sh — hosts made of network namespaces, for pool tests
# (docs/design/pool.md): N host namespaces and a client one, each with an
# eth0 joined by a veth pair to a bridge in a hub namespace, addresses
# 10.99.0.I/24 (client 10.99.0.100) that exist inside the namespaces only.
# Every namespace shares the machine's file systems and mounts (processes
# are started with `nsenter --net`, which changes the network only), so a
# FUSE mount made from the client namespace is seen by the test as usual.
#
# Sourced after test.sh and mgmt.sh (and etcd.sh for ns_start_etcd):
#
#   require_netns
#   TEST netns_setup 3              # hosts 1..3 and the client (index c)
#   in_ns 2 CMD...                  # CMD in host 2's network
#   TEST ns_start_etcd 1 3          # member 1 of a 3-member etcd on 10.99.0.1
#   TEST ns_start_brickfsd 1 3      # brickfsd h1, store: the 3 members
#   ns_cli 1 volume list            # brickfs --server 10.99.0.1:24100 ...
#   TEST link_down 2 / link_up 2    # cut host 2 off from every other one
#   TEST ns_pool_start 3            # all of the above: hosts, an etcd member
#                                   # and a brickfsd on each (not probed)
#
# Names: bfs<PID>-hub, bfs<PID>-h1, ..., bfs<PID>-c, so tests in parallel
# never meet. Teardown (after the usual one has stopped every process)
# deletes the namespaces, which removes the veths and the bridge.

[ -n "${BFS_NETNS_SH:-}" ] && return 0
BFS_NETNS_SH=1

NS_PREFIX=bfs$$
NS_NET=10.99.0

require_netns()
{
    require_root
    command -v ip >/dev/null || SKIP_ALL "ip (iproute2) is not installed"
    command -v nsenter >/dev/null || SKIP_ALL "nsenter (util-linux) is not installed"
    ip netns add "$NS_PREFIX-probe" 2>/dev/null || SKIP_ALL "cannot create network namespaces"
    ip netns del "$NS_PREFIX-probe"
}

ns_name() { [ "$1" = c ] && echo "$NS_PREFIX-c" || echo "$NS_PREFIX-h$1"; }
ns_addr() { [ "$1" = c ] && echo "$NS_NET.100" || echo "$NS_NET.$1"; }

# in_ns I CMD...: CMD with host I's network (I = c: the client's).
in_ns()
{
    local i=$1
    shift
    nsenter --net="/run/netns/$(ns_name "$i")" -- "$@"
}

bfs__ns_add()
{
    local i=$1 ns hub=$NS_PREFIX-hub
    ns=$(ns_name "$i")
    ip netns add "$ns" || return 1
    echo "$ns" >>"$T/.run/netns"
    ip link add "v$i" netns "$hub" type veth peer name eth0 netns "$ns" || return 1
    ip -n "$hub" link set "v$i" master br0 up || return 1
    ip -n "$ns" addr add "$(ns_addr "$i")/24" dev eth0 || return 1
    ip -n "$ns" link set lo up && ip -n "$ns" link set eth0 up
}

# netns_setup N: the hub with its bridge, hosts 1..N and the client.
netns_setup()
{
    local n=$1 i hub=$NS_PREFIX-hub
    ip netns add "$hub" || return 1
    echo "$hub" >>"$T/.run/netns"
    ip -n "$hub" link add br0 type bridge || return 1
    ip -n "$hub" link set br0 up || return 1
    for ((i = 1; i <= n; i++)); do bfs__ns_add "$i" || return 1; done
    bfs__ns_add c || return 1
    echo "$n" >"$T/.run/netns-count"
}

# link_down I / link_up I: host I's port on the bridge, so I is cut off
# from every other host and the client (and back).
link_down() { ip -n "$NS_PREFIX-hub" link set "v$1" down; }
link_up() { ip -n "$NS_PREFIX-hub" link set "v$1" up; }

# ns_etcd_endpoints: the client URLs of every member, comma-separated.
ns_etcd_endpoints()
{
    local i n out=
    n=$(cat "$T/.run/netns-count")
    for ((i = 1; i <= n; i++)); do out=$out${out:+,}http://$(ns_addr "$i"):2379; done
    echo "$out"
}

# ns_etcd_healthy I: member I answers and the cluster has a leader.
ns_etcd_healthy()
{
    in_ns "$1" curl -s --noproxy '*' -m 2 "http://$(ns_addr "$1"):2379/health" | grep -q '"health":"true"'
}

# ns_start_etcd I N: member eI of an N-member etcd cluster on host I (data in
# $T/etcd/hI). Waits for its health only once every member was started
# (a member alone has no leader): call it for every I, then ns_wait_etcd.
ns_start_etcd()
{
    local i=$1 n=$2 j cluster=
    for ((j = 1; j <= n; j++)); do cluster=$cluster${cluster:+,}e$j=http://$(ns_addr "$j"):2380; done
    local a
    a=$(ns_addr "$i")
    bfs_spawn "etcd-h$i" nsenter --net="/run/netns/$(ns_name "$i")" -- "$ETCD_BIN" \
        --name "e$i" --data-dir "$T/etcd/h$i" \
        --listen-client-urls "http://$a:2379" --advertise-client-urls "http://$a:2379" \
        --listen-peer-urls "http://$a:2380" --initial-advertise-peer-urls "http://$a:2380" \
        --initial-cluster "$cluster" --initial-cluster-state new --log-level warn --logger zap
}

ns_wait_etcd()
{
    local i n
    n=$(cat "$T/.run/netns-count")
    for ((i = 1; i <= n; i++)); do
        bfs_wait_until "$PROCESS_UP_TIMEOUT" ns_etcd_healthy "$i" || {
            echo "ns_wait_etcd: member $i is not healthy" >&2
            tail -n 20 "$T/logs/etcd-h$i.out" >&2
            return 1
        }
    done
}

# ns_cli I ARGS...: the brickfs CLI against host I's brickfsd, from host I.
ns_cli() { local i=$1; shift; in_ns "$i" "$BRICKFS_BIN" --server "$(ns_addr "$i"):24100" "$@"; }

# ns_start_brickfsd I: brickfsd hI on host I (10.99.0.I:24100, bricks
# $NS_BRICK_PORTS, default 24200-24299, state in $T/mgmt/hI like
# start_brickfsd's), store: every etcd member; waits until its API answers.
ns_start_brickfsd()
{
    local i=$1 d=$T/mgmt/h$1
    mkdir -p "$d/log"
    ln -sfn "$d/log/brickfsd.log" "$T/logs/h$i.log"
    bfs_spawn "brickfsd-h$i" nsenter --net="/run/netns/$(ns_name "$i")" -- env \
        BRICKFSD_STORE="etcd:$(ns_etcd_endpoints);timeout=1500" BRICKFSD_NODE_NAME="h$i" \
        "$BRICKFSD_BIN" --foreground --state-dir "$d/state" --log-dir "$d/log" --run-dir "$d/run" \
        --listen "$(ns_addr "$i"):24100" --brick-ports "${NS_BRICK_PORTS:-24200-24299}"
    local pid=$BFS_PID
    if ! bfs_wait_until "$PROCESS_UP_TIMEOUT" eval "ns_cli $i volume list || ! bfs_pid_alive $pid"; then
        echo "ns_start_brickfsd: h$i does not answer" >&2
        tail -n 20 "$d/log/brickfsd.log" "$T/logs/brickfsd-h$i.out" >&2
        return 1
    fi
    bfs_pid_alive "$pid"
}

ns_kill_brickfsd()
{
    local pid
    pid=$(bfs_pid_of "brickfsd-h$1") || return 1
    bfs_kill "$pid" "${2:-TERM}" && bfs_wait_gone "$pid" "$PROCESS_DOWN_TIMEOUT"
}

# ns_pool_start N: N hosts and the client, a member of an N-member etcd on
# each host, then a brickfsd on each (brick start timeout 3 s unless
# BRICKFSD_START_TIMEOUT says otherwise); the nodes are not probed.
ns_pool_start()
{
    local n=$1 i
    export BRICKFSD_START_TIMEOUT=${BRICKFSD_START_TIMEOUT:-3}
    netns_setup "$n" || return 1
    for ((i = 1; i <= n; i++)); do ns_start_etcd "$i" "$n" || return 1; done
    ns_wait_etcd || return 1
    for ((i = 1; i <= n; i++)); do ns_start_brickfsd "$i" || return 1; done
}

netns_teardown()
{
    local ns
    while read -r ns; do
        [ -n "$ns" ] && ip netns del "$ns" 2>/dev/null
    done < <(tac "$T/.run/netns" 2>/dev/null)
    rm -f "$T/.run/netns"
}

eval "bfs__netns_prev_teardown() $(declare -f bfs_teardown | tail -n +2)"
bfs_teardown()
{
    bfs__netns_prev_teardown
    netns_teardown
}
