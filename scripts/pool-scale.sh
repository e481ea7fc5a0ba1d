#!/usr/bin/env bash
#
# pool-scale.sh — how management latency and etcd load grow with the
# number of nodes in a pool (issue 8; docs/design/pool.md, "Scale").
#
#   scripts/pool-scale.sh [N...]      default: 5 20 40
#
# For each N: a fresh single-member etcd and N brickfsd processes on
# loopback (own state folders and ports, as tests/lib/mgmt.sh starts them),
# all probed into one pool from the first. Measured, from node 1:
#   probe     mean time of one `peer probe` (ms)
#   pool      mean time of `pool list` (ms, 5 runs)
#   create    `volume create` of a 1-brick volume (ms)
#   start     `volume start` of it (ms; waits for its brick online)
#   status    `volume status` of all volumes (ms, 5 runs)
#   idle w/s  etcd writes per second while nothing is asked (revision growth
#             over 10 s: lease keep-alives are not writes)
#   idle rq/s requests per second etcd served while idle (its gRPC counter:
#             keep-alives, the gateway's calls)
#   keys      keys under brickfs/ at the end
# Prints a Markdown table. Needs root (brick markers) and a build. Runs on
# the harness of the integration tests, so everything it starts is stopped
# at exit. Latency on a shared 2-core machine is noisy: compare shapes, not
# single numbers.

. "$(dirname "$0")/../tests/lib/test.sh"
. "$(dirname "$0")/../tests/lib/mgmt.sh"
. "$(dirname "$0")/../tests/lib/etcd.sh"

NS=("$@")
[ ${#NS[@]} -eq 0 ] && NS=(5 20 40)

ms() { local t0 t1; t0=$(bfs_now_us); "$@" >/dev/null 2>&1 || echo "# failed: $*" >&2; t1=$(bfs_now_us); echo $(((t1 - t0) / 1000)); }
mean5() { local s=0 i; for i in 1 2 3 4 5; do s=$((s + $(ms "$@"))); done; echo $((s / 5)); }
grpc_total() { curl -s --noproxy '*' "$(etcd_url "$1")/metrics" | awk '/^grpc_server_handled_total/ { s += $2 } END { printf "%d\n", s }'; }
rev() { curl -s --noproxy '*' -X POST -d '{"key":"YnJpY2tmcy8="}' "$(etcd_url "$1")/v3/kv/range" | python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])'; }

echo "| nodes | probe ms | pool list ms | create ms | start ms | status ms | idle writes/s | idle requests/s | keys |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for n in "${NS[@]}"; do
    e=e$n
    start_etcd "$e" >/dev/null || exit 1
    store="etcd:$(etcd_url "$e")"
    for ((i = 1; i <= n; i++)); do
        BRICKFSD_STORE=$store BRICKFSD_NODE_NAME=s$n-$i start_brickfsd "s$n-$i" >/dev/null || exit 1
    done
    export BRICKFS_SERVER=127.0.0.1:$(brickfsd_port "s$n-1")
    total=0
    for ((i = 2; i <= n; i++)); do
        total=$((total + $(ms cli peer probe "127.0.0.1:$(brickfsd_port "s$n-$i")")))
    done
    probe=$((n > 1 ? total / (n - 1) : 0))
    pool=$(mean5 cli pool list)
    create=$(ms cli volume create "v$n" "s$n-$n:$T/bricks/$n" force)
    start=$(ms cli volume start "v$n")
    status=$(mean5 cli volume status)
    r0=$(rev "$e"); g0=$(grpc_total "$e")
    sleep 10
    r1=$(rev "$e"); g1=$(grpc_total "$e")
    keys=$(curl -s --noproxy '*' -X POST -d '{"key":"YnJpY2tmcy8=","range_end":"YnJpY2tmczA=","count_only":true}' "$(etcd_url "$e")/v3/kv/range" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("count", 0))')
    echo "| $n | $probe | $pool | $create | $start | $status | $(((r1 - r0) / 10)) | $(((g1 - g0) / 10)) | $keys |"
    cli --yes volume stop "v$n" >/dev/null
    for ((i = 1; i <= n; i++)); do kill_brickfsd "s$n-$i" TERM; done
    stop_etcd "$e"
done
done_testing >/dev/null
