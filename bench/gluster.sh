# bench/gluster.sh — a private GlusterFS for `make bench` (sourced by
# bench/run.sh after tests/lib/cluster.sh, which provides $T, bfs_spawn,
# mount_fuse and the exit trap).
#
# What it runs: one glusterd of our own (Debian's glusterfs-server), in the
# foreground of a background job started with bfs_spawn, with every state
# folder under $T/glusterd:
#   wd/    working-directory (what /var/lib/glusterd normally is)
#   run/   run-directory: pid files of glusterd, bricks and self-heal daemons
#   log/   cluster-test-mode points glusterd's brick and daemon logs here
#   glusterd.socket  the CLI's socket (glusterd-sockfile), used with
#          gluster --glusterd-sock
# glusterd listens on $GL_HOST:24007 (transport.socket.bind-address; bricks
# and the FUSE client fetch their volfiles from port 24007 and there is no
# option to move it, so a system glusterd on 24007 makes the bench refuse).
# GL_HOST is 127.1.1.1 by default: gluster refuses bricks on 127.0.0.1 and
# "localhost" ("Please provide a valid hostname/ip other than localhost"),
# while any other address of 127.0.0.0/8 counts as this node.
#
# Lifetime: gl_start_glusterd once; per volume gl_create (create + start),
# gl_mount (glusterfs -N in the foreground through mount_fuse, so the mount is
# undone like every other one at exit), gl_destroy (stop + delete). At exit
# (gl_teardown, called from run.sh's bfs_exit_hook) every volume is stopped,
# then every process whose command line names $T/glusterd/ — glusterd's
# bricks and self-heal daemons daemonise away from us, so they are found that
# way, by pid, never by name — is stopped, glusterd last, and the brick
# sockets glusterd left in /var/run/gluster for our bricks are removed.
#
# Pitfalls of Debian 12's GlusterFS 10.3 this works around:
#   - `gluster volume heal V info` runs glfsheal, which fetches the volfile
#     from /var/run/glusterd.socket whatever --glusterd-sock says ("Not able
#     to fetch volfile from glusterd"); gl_heal_info calls glfsheal itself
#     with its glusterd-sock argument. glfsheal always logs to
#     /var/log/glusterfs/glfsheal-VOL.log.
#   - bricks on the root file system and several bricks of one replica or
#     disperse set on one host need `force`.
#   - brick sockets always go to /var/run/gluster (run-directory does not
#     move them) and are not removed when the brick stops.
#   - `volume heal V` right after a brick restart fails until the self-heal
#     daemon has connected to it ("Glusterd Syncop Mgmt brick op 'Heal'
#     failed"): gl_heal_start retries.

GL_HOST=${BENCH_GLUSTER_HOST:-127.1.1.1}
GL_PORT=24007
GLD=$T/glusterd
GLFSHEAL=${GLFSHEAL:-/usr/lib/x86_64-linux-gnu/glusterfs/glfsheal}
GL_VOLUMES=()

gl() { gluster --glusterd-sock="$GLD/glusterd.socket" --log-file="$GLD/log/cli.log" --mode=script "$@"; }

# gl_why_unusable: prints why GlusterFS cannot be benched here (nothing if it can).
gl_why_unusable()
{
    local p
    for p in glusterd gluster glusterfs glusterfsd; do
        command -v "$p" >/dev/null || { echo "$p is not installed (Debian: glusterfs-server)"; return; }
    done
    # A glusterd on another loopback address (another session's private one)
    # is no obstacle; one on GL_HOST or on every address is.
    if ss -Hltn 2>/dev/null | awk -v h="$GL_HOST:$GL_PORT" -v p="$GL_PORT" '
        $4 == h || $4 == "0.0.0.0:" p || $4 == "*:" p || $4 == "[::]:" p { f = 1 } END { exit !f }'; then
        echo "port $GL_PORT is taken on $GL_HOST or on every address (a system glusterd?); the bench runs only its own glusterd, and bricks and clients can only reach one on port $GL_PORT"
        return
    fi
    python3 -c 'import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0))' "$GL_HOST" 2>/dev/null ||
        echo "cannot bind $GL_HOST (set BENCH_GLUSTER_HOST to another address of 127.0.0.0/8)"
}

gl_start_glusterd()
{
    mkdir -p "$GLD/wd" "$GLD/run" "$GLD/log" || return 1
    cat >"$GLD/glusterd.vol" <<EOF
volume management
    type mgmt/glusterd
    option working-directory $GLD/wd
    option run-directory $GLD/run
    option glusterd-sockfile $GLD/glusterd.socket
    option cluster-test-mode $GLD/log
    option transport-type socket
    option transport.socket.bind-address $GL_HOST
    option transport.socket.listen-port $GL_PORT
    option transport.socket.keepalive-time 10
    option transport.socket.keepalive-interval 2
    option transport.socket.read-fail-log off
    option ping-timeout 0
    option event-threads 1
    option max-port 60999
end-volume
EOF
    bfs_spawn glusterd glusterd -N -f "$GLD/glusterd.vol" -p "$GLD/run/glusterd.pid" \
        -l "$GLD/log/glusterd.log"
    GL_PID=$BFS_PID
    if ! bfs_wait_until "$PROCESS_UP_TIMEOUT" eval "gl volume list || ! bfs_pid_alive $GL_PID" ||
        ! bfs_pid_alive "$GL_PID"; then
        echo "bench: glusterd did not start" >&2
        bfs__tail_log "$GLD/log/glusterd.log" "$T/logs/glusterd.out"
        return 1
    fi
}

# gl_create NAME "SPEC" DIR...: volume create NAME SPEC (e.g. "replica 3",
# "disperse 6 redundancy 2", "" for distribute) over GL_HOST:DIR..., force,
# then start. Errors are printed.
gl_create()
{
    local name=$1 spec=$2 d bricks=()
    shift 2
    for d in "$@"; do
        mkdir -p "$d" || return 1
        bricks+=("$GL_HOST:$d")
    done
    # shellcheck disable=SC2086
    gl volume create "$name" $spec "${bricks[@]}" force >"$T/logs/gl-create-$name.out" 2>&1 ||
        { cat "$T/logs/gl-create-$name.out" >&2; return 1; }
    GL_VOLUMES+=("$name")
    gl volume start "$name" >"$T/logs/gl-start-$name.out" 2>&1 ||
        { cat "$T/logs/gl-start-$name.out" >&2; return 1; }
    gl__note_sockets
}

# gl_mount NAME DIR: the GlusterFS FUSE client, in the foreground (-N), with
# its defaults (attribute and entry timeouts 1 s, as brickfs-mount).
gl_mount()
{
    mount_fuse "gl-mount-$1" "$2" glusterfs -N --volfile-server="$GL_HOST" --volfile-id="$1" \
        -l "$T/logs/gl-mount-$1.log" "$2"
}

# gl_destroy NAME: stop and delete the volume (unmount it first).
gl_destroy()
{
    gl volume stop "$1" >/dev/null 2>&1
    gl volume delete "$1" >/dev/null 2>&1
    local v keep=()
    for v in "${GL_VOLUMES[@]}"; do [ "$v" = "$1" ] || keep+=("$v"); done
    GL_VOLUMES=("${keep[@]}")
    gl__stop_ours "$GLD/run/vols/$1/"
}

# gl_brick_pid NAME DIR: the pid of brick DIR of volume NAME (glusterd's pid
# file), if that process is ours and serves DIR.
gl_brick_pid()
{
    local f pid
    f=$GLD/run/vols/$1/$GL_HOST-$(echo "${2#/}" | tr / -).pid
    pid=$(cat "$f" 2>/dev/null) || return 1
    gl__cmdline "$pid" | grep -qF -- "--brick-name $2 " || return 1
    echo "$pid"
}

# gl_kill_brick NAME DIR: SIGKILL to that brick; waits until it is gone.
gl_kill_brick()
{
    local pid
    pid=$(gl_brick_pid "$1" "$2") || { echo "bench: no brick process for $2" >&2; return 1; }
    kill -KILL "$pid" && bfs_wait_gone "$pid" "$PROCESS_DOWN_TIMEOUT"
}

# gl_restart_bricks NAME: volume start force (starts the bricks that are down)
# and waits until brick DIR (second argument) runs again.
gl_restart_bricks()
{
    gl volume start "$1" force >/dev/null 2>&1 || return 1
    gl__note_sockets
    bfs_wait_until "$PROCESS_UP_TIMEOUT" gl_brick_pid "$1" "$2"
}

# gl_heal_start NAME: `volume heal NAME` (index heal), retried for up to a
# minute while the self-heal daemon is not connected to every brick yet.
gl_heal_start()
{
    bfs_wait_until 60 gl volume heal "$1"
}

# gl_index_count DIR...: entries of the bricks' heal indexes (what heal info
# lists: xattrop and dirty, without their base files). Cheap enough to poll.
gl_index_count()
{
    local d n=0 c
    for d in "$@"; do
        c=$(find "$d/.glusterfs/indices/xattrop" "$d/.glusterfs/indices/dirty" -mindepth 1 \
            -maxdepth 1 ! -name 'xattrop-*' ! -name 'dirty-*' 2>/dev/null | wc -l)
        n=$((n + c))
    done
    echo "$n"
}

# gl_heal_info NAME: "Total Number of entries" summed over the bricks by
# `heal info summary` (glfsheal); "error" if a brick could not be asked.
gl_heal_info()
{
    "$GLFSHEAL" "$1" info-summary glusterd-sock "$GLD/glusterd.socket" 2>/dev/null | awk '
        /^Total Number of entries:/ { if ($NF ~ /^[0-9]+$/) n += $NF; else bad = 1; seen = 1 }
        END { if (bad || !seen) print "error"; else print n + 0 }'
}

gl__cmdline()
{
    { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null
    echo
}

# gl__ours [PATTERN]: pids of live processes whose command line names
# PATTERN (default: anything under $GLD/), glusterd excepted.
gl__ours()
{
    local d pid pat=${1:-$GLD/}
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        [ "$pid" = "${GL_PID:-}" ] && continue
        bfs_pid_alive "$pid" || continue
        gl__cmdline "$pid" | grep -qF -- "$pat" && echo "$pid"
    done
}

# Remembers the unix sockets (-S) of our bricks and daemons, to remove them at the end.
gl__note_sockets()
{
    local pid
    for pid in $(gl__ours); do
        gl__cmdline "$pid" | grep -oE -- '-S /var/run/gluster/[0-9a-f]+\.socket' | cut -c4- \
            >>"$GLD/sockets"
    done
}

# gl__stop_ours PATTERN: TERM (then KILL) to our processes naming PATTERN.
gl__stop_ours()
{
    local pids pid
    pids=$(gl__ours "$1")
    [ -n "$pids" ] || return 0
    for pid in $pids; do kill -TERM "$pid" 2>/dev/null; done
    for pid in $pids; do
        bfs_wait_gone "$pid" 10 || { gl__cmdline "$pid" | grep -qF -- "$1" && kill -KILL "$pid"; }
    done
}

# gl_teardown: everything of ours goes (called at exit, after our mounts are gone).
gl_teardown()
{
    [ -d "$GLD" ] || return 0
    local v s
    for v in "${GL_VOLUMES[@]}"; do
        gl volume stop "$v" >/dev/null 2>&1
        gl volume delete "$v" >/dev/null 2>&1
    done
    GL_VOLUMES=()
    gl__note_sockets
    gl__stop_ours "$GLD/"
    [ -n "${GL_PID:-}" ] && bfs_stop "$GL_PID" 10
    GL_PID=
    gl__stop_ours "$GLD/"
    sort -u "$GLD/sockets" 2>/dev/null | while read -r s; do
        case $s in /var/run/gluster/*.socket) rm -f "$s" ;; esac
    done
    : >"$GLD/sockets"
}
