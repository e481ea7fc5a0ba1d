#!/usr/bin/env bash
#
# pool-scale.sh — how management latency and etcd load grow with the
# number of nodes in a pool (issue 8; docs/design/pool.md, "Scale";
# figures in docs/PERFORMANCE.md, "Pool scale (issue 8)").
#
#   scripts/pool-scale.sh [N...]      default: 10 50 100 200
#
# For each N: a fresh single-member etcd and N real brickfsd processes on
# 127.0.0.1 (own state folders and ports, as tests/lib/mgmt.sh starts
# them), all probed into one pool from node 1. Then, from node 1:
#
#   start      seconds to start the N brickfsd one after the other
#   rss        mean resident memory of one idle brickfsd (MiB); etcd's
#   probe      mean `peer probe` (ms) over the N-1 probes; last: the last one
#   idle       etcd load with nothing asked, over POOL_SCALE_IDLE s: gRPC
#              requests/s (lease keep-alives, each a fresh HTTP request
#              through etcd's gateway) and bytes/s in + out
#   per op     for each management command: its latency (ms), the time
#              until etcd is quiet again (every node has reacted to the
#              watch event: "settle", ms), and what etcd served meanwhile:
#              range (read) requests, txn/put (write) requests, watch
#              events sent, kilobytes sent to clients
#
# The commands: `volume create` of a distribute volume with a brick on each
# of POOL_SCALE_BRICKS (4) nodes (after POOL_SCALE_VOLUMES - 1 other
# volumes were created, default none: how the pool's volume count weighs), `volume set`, `volume start` (returns once
# every brick is online), `volume status`, `pool list`, `volume stop`.
# Prints Markdown tables. Needs root (brick markers) and a build. Runs on
# the harness of the integration tests, so everything it starts is stopped
# at exit (BFS_KEEP_TMP=1 keeps the logs). Latency on a shared machine is
# noisy: compare shapes, not single numbers; the load average is printed.

. "$(dirname "$0")/../tests/lib/test.sh"
. "$(dirname "$0")/../tests/lib/mgmt.sh"
. "$(dirname "$0")/../tests/lib/etcd.sh"

NS=("$@")
[ ${#NS[@]} -eq 0 ] && NS=(10 50 100 200)
NB=${POOL_SCALE_BRICKS:-4}
NV=${POOL_SCALE_VOLUMES:-1}
IDLE=${POOL_SCALE_IDLE:-10}
BRICK_PORT_SPAN=$((NV + NB + 4))  # the creating node assigns every brick port from its range

now_ms() { echo $(($(bfs_now_us) / 1000)); }
ms() { local t0 t1; t0=$(now_ms); "$@" >/dev/null 2>&1 || echo "# failed: $*" >&2; t1=$(now_ms); echo $((t1 - t0)); }

# metrics E: "grpc ranges writes events sent recv" of etcd E
metrics()
{
    curl -s --noproxy '*' "$(etcd_url "$1")/metrics" | awk '
        /^grpc_server_handled_total/ { g += $2 }
        /^etcd_mvcc_range_total/ { r += $2 }
        /^etcd_mvcc_(txn|put)_total/ { w += $2 }
        /^etcd_debugging_mvcc_events_total/ { ev += $2 }
        /^etcd_network_client_grpc_sent_bytes_total/ { s += $2 }
        /^etcd_network_client_grpc_received_bytes_total/ { rc += $2 }
        END { printf "%d %d %d %d %d %d\n", g, r, w, ev, s, rc }'
}

# settle E T0: waits until etcd E served no range or write for 1 s (30 s
# at most); prints when the last one was seen, in ms after T0 (0: none)
settle()
{
    local last cur t changed=0 end
    last=$(metrics "$1" | awk '{ print $2 + $3 }')
    end=$(($(now_ms) + 30000))
    t=$(now_ms)
    while [ "$t" -lt "$end" ]; do
        sleep 0.1
        cur=$(metrics "$1" | awk '{ print $2 + $3 }')
        t=$(now_ms)
        if [ "$cur" != "$last" ]; then
            changed=$((t - $2))
            last=$cur
        elif [ $((t - $2 - changed)) -ge 1000 ]; then
            break
        fi
    done
    echo "$changed"
}

# op E N LABEL CMD...: one table row for CMD (see the header)
op()
{
    local e=$1 n=$2 label=$3 t0 t1 st m0 m1
    shift 3
    m0=$(metrics "$e")
    t0=$(now_ms)
    "$@" >/dev/null 2>"$T/op.err" || echo "# $label failed: $(head -c 300 "$T/op.err")" >&2
    t1=$(now_ms)
    st=$(settle "$e" "$t0")
    m1=$(metrics "$e")
    echo "$m0 $m1" | awk -v n="$n" -v nv="$NV" -v l="$label" -v lat=$((t1 - t0)) -v st="$st" '
        { printf "| %d | %d | %s | %d | %d | %d | %d | %d | %.1f |\n", n, nv, l, lat, st < lat ? lat : st,
                 $8 - $2, $9 - $3, $10 - $4, ($11 - $5) / 1024 }'
}

rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

SUMMARY=$T/summary.md
OPS=$T/ops.md
echo "| nodes | start s | brickfsd RSS MiB | etcd RSS MiB | probe ms (mean / last) | idle requests/s | idle bytes/s | keys | load |" >"$SUMMARY"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" >>"$SUMMARY"
echo "| nodes | volumes | command | ms | settle ms | etcd reads | etcd writes | watch events | KiB sent |" >"$OPS"
echo "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |" >>"$OPS"

for n in "${NS[@]}"; do
    e=e$n
    start_etcd "$e" >/dev/null || exit 1
    store="etcd:$(etcd_url "$e")"
    t0=$(now_ms)
    for ((i = 1; i <= n; i++)); do
        BRICKFSD_STORE=$store BRICKFSD_NODE_NAME=s$n-$i start_brickfsd "s$n-$i" >/dev/null || exit 1
    done
    t1=$(now_ms)
    export BRICKFS_SERVER=127.0.0.1:$(brickfsd_port "s$n-1")
    total=0 last=0
    for ((i = 2; i <= n; i++)); do
        last=$(ms cli peer probe "127.0.0.1:$(brickfsd_port "s$n-$i")")
        total=$((total + last))
    done
    probe=$((n > 1 ? total / (n - 1) : 0))
    settle "$e" "$(now_ms)" >/dev/null
    sum=0
    for ((i = 1; i <= n; i++)); do sum=$((sum + $(rss_kb "$(brickfsd_pid "s$n-$i")"))); done
    erss=$(rss_kb "$(etcd_pid "$e")")
    m0=$(metrics "$e")
    sleep "$IDLE"
    m1=$(metrics "$e")
    idle=$(echo "$m0 $m1" | awk -v s="$IDLE" '{ printf "%.1f | %d", ($7 - $1) / s, ($11 + $12 - $5 - $6) / s }')
    keys=$(curl -s --noproxy '*' -X POST -d '{"key":"YnJpY2tmcy8=","range_end":"YnJpY2tmczA=","count_only":true}' "$(etcd_url "$e")/v3/kv/range" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("count", 0))')
    load=$(cut -d' ' -f1 /proc/loadavg)
    printf "| %d | %.1f | %.1f | %.1f | %d / %d | %s | %s | %s |\n" "$n" "$(((t1 - t0) / 100))e-1" \
        "$((sum / n / 102))e-1" "$((erss / 102))e-1" "$probe" "$last" "$idle" "$keys" "$load" >>"$SUMMARY"

    for ((i = 1; i < NV; i++)); do
        cli volume create "x$n-$i" "s$n-$(((i - 1) % n + 1)):$T/bricks/x$n-$i" force >/dev/null ||
            echo "# cannot create volume x$n-$i" >&2
    done
    [ "$NV" -gt 1 ] && settle "$e" "$(now_ms)" >/dev/null
    bricks=()
    for ((i = 0; i < NB && i < n; i++)); do bricks+=("s$n-$((n - i)):$T/bricks/$n-$i"); done
    op "$e" "$n" "volume create ($NB bricks)" cli volume create "v$n" "${bricks[@]}" force >>"$OPS"
    op "$e" "$n" "volume set" cli volume set "v$n" network.ping-timeout 9 >>"$OPS"
    op "$e" "$n" "volume start" cli volume start "v$n" >>"$OPS"
    op "$e" "$n" "volume status" cli volume status "v$n" >>"$OPS"
    op "$e" "$n" "pool list" cli pool list >>"$OPS"
    op "$e" "$n" "volume stop" cli --yes volume stop "v$n" >>"$OPS"
    cat "$SUMMARY"
    echo
    cat "$OPS"
    echo

    for ((i = 1; i <= n; i++)); do bfs_kill "$(brickfsd_pid "s$n-$i")" TERM; done
    for ((i = 1; i <= n; i++)); do bfs_wait_gone "$(brickfsd_pid "s$n-$i")" 30; done
    stop_etcd "$e"
done
done_testing >/dev/null
