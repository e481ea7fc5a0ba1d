# tests/lib/etcd.sh — a real etcd (Debian's etcd-server) for tests of the
# pool store (docs/design/pool.md).
#
# Sourced after tests/lib/test.sh:
#
#   . "$(dirname "$0")/../lib/etcd.sh"
#   skip_unless_etcd
#   TEST start_etcd                 # e1: own data dir, free 127.0.0.1 ports
#   url=$(etcd_url)                 # http://127.0.0.1:PORT
#   TEST stop_etcd                  # TERM by pid, waits until gone
#   TEST start_etcd                 # again: same ports and data
#   TEST pool_node nA               # brickfsd nA in the pool on e1 (mgmt.sh)
#   at nA cli pool list             # a command against brickfsd nA
#
# Each etcd NAME (default e1) keeps its data in $T/etcd/NAME, its log in
# $T/logs/etcd-NAME.out, and is a single-member cluster. It is started with
# bfs_spawn, so the usual teardown stops it by pid.

[ -n "${BFS_ETCD_SH:-}" ] && return 0
BFS_ETCD_SH=1

ETCD_BIN=${ETCD_BIN:-$(command -v etcd || echo /usr/bin/etcd)}
mkdir -p "$T/etcd" "$T/.run/etcd"

skip_unless_etcd()
{
    [ -x "$ETCD_BIN" ] || SKIP_ALL "etcd is not installed (Debian: etcd-server)"
}

etcd_url() { echo "http://127.0.0.1:$(cat "$T/.run/etcd/${1:-e1}.client")"; }
etcd_pid() { bfs_pid_of "etcd-${1:-e1}"; }

# etcd_healthy [NAME]: etcd answers and has a leader.
etcd_healthy()
{
    curl -s --noproxy '*' -m 2 "$(etcd_url "${1:-e1}")/health" | grep -q '"health":"true"'
}

# start_etcd [NAME]: starts (or restarts, with the same ports and data)
# etcd NAME and waits until it is healthy.
start_etcd()
{
    local name=${1:-e1} r=$T/.run/etcd cp pp
    if [ ! -s "$r/$name.client" ]; then
        free_port >"$r/$name.client" || return 1
        free_port >"$r/$name.peer" || return 1
    fi
    cp=$(cat "$r/$name.client")
    pp=$(cat "$r/$name.peer")
    bfs_spawn "etcd-$name" "$ETCD_BIN" --name "$name" --data-dir "$T/etcd/$name" \
        --listen-client-urls "http://127.0.0.1:$cp" --advertise-client-urls "http://127.0.0.1:$cp" \
        --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
        --initial-cluster "$name=http://127.0.0.1:$pp" --initial-cluster-state new \
        --log-level warn --logger zap
    local pid=$BFS_PID
    if ! bfs_wait_until "$PROCESS_UP_TIMEOUT" eval "etcd_healthy $name || ! bfs_pid_alive $pid"; then
        echo "start_etcd: $name (pid $pid) is not healthy on port $cp" >&2
        tail -n 20 "$T/logs/etcd-$name.out" >&2
        return 1
    fi
    bfs_pid_alive "$pid" || { echo "start_etcd: $name exited" >&2; tail -n 20 "$T/logs/etcd-$name.out" >&2; return 1; }
}

# stop_etcd [NAME] [SIGNAL]: stops etcd NAME (default TERM) by pid, waits until gone.
stop_etcd()
{
    local pid
    pid=$(etcd_pid "${1:-e1}") || return 1
    bfs_kill "$pid" "${2:-TERM}" || return 1
    bfs_wait_gone "$pid" "$PROCESS_DOWN_TIMEOUT"
}

# pool_node NAME: brickfsd NAME (tests/lib/mgmt.sh's start_brickfsd) with
# node name NAME in the pool on etcd e1 (store timeout 1 s); other
# BRICKFSD_* variables the caller sets pass through.
pool_node()
{
    BRICKFSD_STORE="etcd:$(etcd_url);timeout=1000" BRICKFSD_NODE_NAME=$1 start_brickfsd "$1"
}

# at NAME CMD...: CMD with BRICKFS_SERVER naming brickfsd NAME (at nA cli ...)
at() { local n=$1; shift; BRICKFS_SERVER=127.0.0.1:$(brickfsd_port "$n") "$@"; }
