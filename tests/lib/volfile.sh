# tests/lib/volfile.sh — loopback ports and the volfiles of a one-brick volume.
#
# Sourced, never run. It only defines functions: no traps, no temp folder, no
# output. tests/lib/cluster.sh (integration tests, the bench) and
# scripts/demo.sh both use it, so the option names of a brick graph and of a
# client graph are written down in exactly one place.
#
# The graphs (DESIGN.md, "Processes"):
#   brick:  storage/posix -> features/index -> features/locks -> debug/io-stats
#           -> protocol/server
#   client: protocol/client -> debug/io-stats
# The brick's io-stats volume carries the brick's own name: that is the
# subvolume protocol/server exports and the client asks for with
# remote-subvolume.
#
# BFS_MD_CACHE=SECONDS (environment, unset by default) adds cache
# invalidation to both graphs (docs/design/cache-invalidation.md):
# features/upcall between features/locks and the brick's io-stats, and
# performance/md-cache with md-cache-timeout SECONDS on top of the client.
# BFS_WRITE_BEHIND=1 puts performance/write-behind on top of the client (over
# md-cache, as volgen does).

# bfs_port_listening PORT: true when something listens on TCP PORT.
# Asks the kernel (ss) instead of connecting, so the brick does not see a
# stray connection in its log; falls back to a connect where ss is missing.
bfs_port_listening()
{
    local port=$1
    if command -v ss >/dev/null 2>&1; then
        [ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ]
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
    fi
}

# bfs_free_port [EXCLUDE...]: prints a TCP port of 127.0.0.1 that nothing is
# bound to and that is not among EXCLUDE (ports already handed out but not
# yet bound). Picks below the kernel's ephemeral range so an outgoing
# connection cannot be given the port between this pick and the bind.
bfs_free_port()
{
    python3 - "$@" <<'EOF'
import random, socket, sys
exclude = {int(p) for p in sys.argv[1:]}
try:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        eph_lo = int(f.read().split()[0])
except OSError:
    eph_lo = 32768
lo, hi = 20000, max(20100, min(eph_lo, 32768))
for _ in range(500):
    port = random.randrange(lo, hi)
    if port in exclude:
        continue
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    sys.exit(0)
sys.stderr.write("bfs_free_port: no free port found\n")
sys.exit(1)
EOF
}

# bfs_write_brick_volfile OUT NAME DIR PORT: the server graph of brick NAME
# exporting folder DIR (absolute) on 127.0.0.1:PORT.
bfs_write_brick_volfile()
{
    local out=$1 name=$2 dir=$3 port=$4
    case $dir in /*) ;; *) echo "bfs_write_brick_volfile: '$dir' is not absolute" >&2; return 1 ;; esac
    cat >"$out" <<EOF
# brick $name: $dir on 127.0.0.1:$port
volume $name-posix
    type storage/posix
    option directory $dir
end-volume

volume $name-index
    type features/index
    subvolumes $name-posix
end-volume

volume $name-locks
    type features/locks
    subvolumes $name-index
end-volume
$(bfs__upcall_volume "$name")
volume $name
    type debug/io-stats
    subvolumes $name-$([ -n "${BFS_MD_CACHE:-}" ] && echo upcall || echo locks)
end-volume

volume $name-server
    type protocol/server
    option transport.listen-address 127.0.0.1
    option transport.listen-port $port
    option auth.allow 127.0.0.1
    subvolumes $name
end-volume
EOF
}

# bfs_write_client_volfile OUT VOLNAME BRICKNAME PORT [KEY=VALUE...]: the
# client graph of a one-brick volume VOLNAME whose brick BRICKNAME listens on
# 127.0.0.1:PORT. Each KEY=VALUE becomes one more option of protocol/client
# (for example network.ping-timeout=5).
bfs_write_client_volfile()
{
    local out=$1 vol=$2 brick=$3 port=$4
    shift 4
    {
        echo "# volume $vol: one brick, $brick on 127.0.0.1:$port"
        echo "volume $vol-client-0"
        echo "    type protocol/client"
        echo "    option remote-host 127.0.0.1"
        echo "    option remote-port $port"
        echo "    option remote-subvolume $brick"
        local kv
        for kv in "$@"; do
            case $kv in
            *=*) echo "    option ${kv%%=*} ${kv#*=}" ;;
            *) echo "bfs_write_client_volfile: '$kv' is not KEY=VALUE" >&2; return 1 ;;
            esac
        done
        echo "end-volume"
        echo
        echo "volume $vol"
        echo "    type debug/io-stats"
        echo "    subvolumes $vol-client-0"
        echo "end-volume"
        local under=$vol
        if [ -n "${BFS_MD_CACHE:-}" ]; then
            echo
            echo "volume $vol-md-cache"
            echo "    type performance/md-cache"
            echo "    option performance.md-cache-timeout $BFS_MD_CACHE"
            echo "    subvolumes $under"
            echo "end-volume"
            under=$vol-md-cache
        fi
        if [ -n "${BFS_WRITE_BEHIND:-}" ]; then
            echo
            echo "volume $vol-write-behind"
            echo "    type performance/write-behind"
            echo "    subvolumes $under"
            echo "end-volume"
        fi
    } >"$out"
}

# bfs__upcall_volume NAME: brick NAME's features/upcall volume when
# BFS_MD_CACHE is set, else nothing.
bfs__upcall_volume()
{
    [ -n "${BFS_MD_CACHE:-}" ] || return 0
    printf '\nvolume %s-upcall\n    type features/upcall\n    subvolumes %s-locks\nend-volume\n' "$1" "$1"
}

# bfs_volfile_port FILE: the transport.listen-port of a brick volfile.
bfs_volfile_port()
{
    awk '$1 == "option" && $2 == "transport.listen-port" { print $3; exit }' "$1"
}
