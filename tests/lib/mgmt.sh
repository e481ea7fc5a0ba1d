# tests/lib/mgmt.sh — brickfsd and the brickfs CLI in integration tests.
#
# Sourced after tests/lib/test.sh:
#
#   . "$(dirname "$0")/../lib/test.sh"
#   . "$(dirname "$0")/../lib/mgmt.sh"
#   skip_unless_mgmt
#   TEST start_brickfsd              # d1: own state/log/run folders, free ports
#   TEST cli volume create v1 127.0.0.1:$T/bricks/b1 force
#   TEST cli volume start v1
#   EXPECT 1 vol_brick_field v1 0 online
#
# Each brickfsd NAME (default d1) keeps its state in $T/mgmt/NAME/{state,run},
# logs in $T/mgmt/NAME/log/ (brickfsd.log, bricks/*.log; $T/logs/NAME.log
# links to brickfsd.log so a failing test prints it), listens on a free port of
# 127.0.0.1 and hands bricks ports of its own range. `cli` talks to the
# brickfsd started last (or $BRICKFS_SERVER).
#
# Mounts from brickfsd: mount_vol VOL DIR; graph_info/graph_opt read a
# mount's brickfs.graph virtual xattr (its active graph, options in effect).
#
# Teardown: bricks outlive brickfsd by design, so after the usual teardown
# (which stops brickfsd) every brick process whose command line names a
# volfile under $T/mgmt/ is stopped (TERM, then KILL) — by pid, after
# checking that command line, never by name. A /sbin/mount.brickfs link
# made by sbin_helper_install is removed.

[ -n "${BFS_MGMT_SH:-}" ] && return 0
BFS_MGMT_SH=1

BRICKFSD_BIN=${BRICKFSD_BIN:-$BFS_BIN/brickfsd}
BRICKFS_BIN=${BRICKFS_BIN:-$BFS_BIN/brickfs}
BRICK_PORT_SPAN=40
mkdir -p "$T/mgmt" "$T/.run/mgmt"

# skip_unless_mgmt: skips the file unless brickfsd, brickfs and the brick
# program are built and we are root (brick markers are trusted xattrs).
skip_unless_mgmt()
{
    [ -x "$BRICKFSD_BIN" ] || SKIP_ALL "$BRICKFSD_BIN is not built"
    [ -x "$BRICKFS_BIN" ] || SKIP_ALL "$BRICKFS_BIN is not built"
    [ -x "$BRICK_BIN" ] || SKIP_ALL "$BRICK_BIN is not built"
    require_root
}

bfs__mgmt() { cat "$T/.run/mgmt/$1/$2" 2>/dev/null; }
brickfsd_port() { bfs__mgmt "${1:-d1}" port; }
brickfsd_state() { echo "$T/mgmt/${1:-d1}/state"; }
brickfsd_run() { echo "$T/mgmt/${1:-d1}/run"; }
brickfsd_logs() { echo "$T/mgmt/${1:-d1}/log"; }
brickfsd_pid() { bfs_pid_of "brickfsd-${1:-d1}"; }

# cli ARGS...: the brickfs CLI against the current brickfsd.
cli()
{
    "$BRICKFS_BIN" "$@"
}

# start_brickfsd [NAME]: starts (or, after kill_brickfsd, restarts with the
# same folders and ports) brickfsd NAME in the foreground of a background
# job and waits until its API answers. Exports BRICKFS_SERVER.
start_brickfsd()
{
    local name=${1:-d1} b=$T/.run/mgmt/${1:-d1} port lo
    mkdir -p "$b" "$T/mgmt/$name/log"
    if [ ! -s "$b/port" ]; then
        port=$(free_port) || return 1
        lo=$(free_port) || return 1
        local i
        for ((i = 1; i < BRICK_PORT_SPAN; i++)); do echo $((lo + i)) >>"$T/.run/ports"; done
        echo "$port" >"$b/port"
        echo "$lo-$((lo + BRICK_PORT_SPAN - 1))" >"$b/ports"
    fi
    port=$(cat "$b/port")
    ln -sfn "$T/mgmt/$name/log/brickfsd.log" "$T/logs/$name.log"
    local args=(--foreground --state-dir "$T/mgmt/$name/state" --log-dir "$T/mgmt/$name/log"
        --run-dir "$T/mgmt/$name/run" --listen "127.0.0.1:$port" --brick-ports "$(cat "$b/ports")")
    [ -n "${BFS_LOG_LEVEL:-}" ] && args+=(--log-level "$BFS_LOG_LEVEL")
    bfs_spawn "brickfsd-$name" "$BRICKFSD_BIN" "${args[@]}"
    local pid=$BFS_PID
    export BRICKFS_SERVER=127.0.0.1:$port
    if ! bfs_wait_until "$PROCESS_UP_TIMEOUT" eval "cli volume list || ! bfs_pid_alive $pid"; then
        echo "start_brickfsd: $name (pid $pid) does not answer on $port" >&2
        bfs__tail_log "$T/mgmt/$name/log/brickfsd.log" "$T/logs/brickfsd-$name.out"
        return 1
    fi
    if ! bfs_pid_alive "$pid"; then
        echo "start_brickfsd: $name (pid $pid) exited during start" >&2
        bfs__tail_log "$T/mgmt/$name/log/brickfsd.log" "$T/logs/brickfsd-$name.out"
        return 1
    fi
}

# kill_brickfsd [NAME] [SIGNAL]: signals brickfsd (default KILL) and waits
# until it is gone.
kill_brickfsd()
{
    local pid
    pid=$(brickfsd_pid "${1:-d1}") || return 1
    bfs_kill "$pid" "${2:-KILL}" || return 1
    bfs_wait_gone "$pid" "$PROCESS_DOWN_TIMEOUT"
}

# vol_brick_field VOL IDX FIELD: one field of one brick in volume status
# (booleans as 1/0). vol_field VOL KEY...: a field of volume info, by path.
vol_brick_field()
{
    cli --json volume status "$1" | python3 -c '
import json, sys
v = json.load(sys.stdin)["bricks"][int(sys.argv[1])][sys.argv[2]]
print(int(v) if isinstance(v, bool) else v)' "$2" "$3"
}

vol_field()
{
    local vol=$1
    shift
    cli --json volume info "$vol" | python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1:]:
    v = v[k]
print(v)' "$@"
}

# api WHAT METHOD PATH [BODY] [HEADER:VALUE]: one request to the REST API
# of the current brickfsd; prints the status code (WHAT=code), the body
# (WHAT=body) or one header's value (WHAT=header:NAME).
api()
{
    python3 - "$@" "http://$BRICKFS_SERVER" <<'PY'
import sys, urllib.request, urllib.error
what, method, path = sys.argv[1:4]
body = sys.argv[4] if len(sys.argv) > 5 else ""
hdr = sys.argv[5] if len(sys.argv) > 6 else ""
req = urllib.request.Request(sys.argv[-1] + path, data=body.encode() or None, method=method)
if hdr:
    k, v = hdr.split(":", 1)
    req.add_header(k.strip(), v.strip())
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    r = opener.open(req, timeout=60)
    code, data, headers = r.status, r.read(), r.headers
except urllib.error.HTTPError as e:
    code, data, headers = e.code, e.read(), e.headers
if what == "code":
    print(code)
elif what == "body":
    sys.stdout.write(data.decode())
elif what.startswith("header:"):
    print(headers.get(what[7:], ""))
PY
}

# mgmt_brick_pid VOL IDX [NAME]: the pid brickfsd recorded for the brick.
mgmt_brick_pid()
{
    cat "$(brickfsd_run "${3:-d1}")/bricks/$1-brick-$2.pid" 2>/dev/null
}

# kill_mgmt_brick VOL IDX [NAME]: SIGKILL to a brick brickfsd started (its
# command line must name a volfile of this test), waits until it is gone.
kill_mgmt_brick()
{
    local pid
    pid=$(mgmt_brick_pid "$1" "$2" "${3:-}") || return 1
    bfs__mgmt_ours "$pid" || { echo "kill_mgmt_brick: $pid is not a brick of this test" >&2; return 1; }
    kill -KILL "$pid" && bfs_wait_gone "$pid" "$PROCESS_DOWN_TIMEOUT"
}

bfs__mgmt_ours()
{
    { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null | grep -qF -- "--volfile $T/mgmt/"
}

bfs__mgmt_brick_pids()
{
    local d
    for d in /proc/[0-9]*; do
        bfs__mgmt_ours "${d#/proc/}" && echo "${d#/proc/}"
    done
    return 0 # not the last process's verdict: under `set -e` it ended the teardown
}

mgmt_teardown()
{
    local pid pids
    pids=$(bfs__mgmt_brick_pids)
    for pid in $pids; do kill -TERM "$pid" 2>/dev/null; done
    for pid in $pids; do
        bfs_wait_gone "$pid" 10 || { bfs__mgmt_ours "$pid" && kill -KILL "$pid" 2>/dev/null; }
    done
    for pid in $pids; do bfs_wait_gone "$pid" 5; done
    local m
    while read -r m; do
        [ -n "$m" ] && umount "$m" 2>/dev/null
    done < <(tac "$T/.run/mgmt-mounts" 2>/dev/null)
}

# mount_tmpfs DIR: a small tmpfs (a file system that is not the root's), undone at exit.
mount_tmpfs()
{
    mkdir -p "$1" && mount -t tmpfs -o size=64m tmpfs "$1" && echo "$1" >>"$T/.run/mgmt-mounts"
}

# Run the usual teardown (it stops brickfsd), then stop the bricks.
eval "bfs__cluster_teardown() $(declare -f bfs_teardown | tail -n +2)"
bfs_teardown()
{
    bfs__cluster_teardown
    mgmt_teardown
    bfs__sbin_helper_remove
}

# ---- mounts from brickfsd ----

# mount_vol VOL DIR [OPT,...]: brickfs-mount -f HOST:PORT:/VOL DIR against the
# current brickfsd, logging to $T/logs/mount-<basename DIR>.log; waits until
# DIR is mounted. Undone by umount_fuse DIR or at exit.
mount_vol()
{
    local vol=$1 mnt=$2 extra=${3:-} name
    name="mount-$(basename "$mnt")"
    local opts="log-file=$T/logs/$name.log${extra:+,$extra}"
    [ -n "${BFS_LOG_LEVEL:-}" ] && opts=$opts,log-level=$BFS_LOG_LEVEL
    mount_fuse "$name" "$mnt" "$MOUNT_BIN" -f -o "$opts" "$BRICKFS_SERVER:/$vol" "$mnt"
}

# bench_volume "LAYOUT" "KEY=VALUE ...": for bench scripts, a volume rw of
# this layout ("replica 3", "disperse 6 redundancy 2", "distribute N": the
# brick count is its second word) with bricks $T/b0.., made by a brickfsd
# started here, the options set before the start, mounted on $T/m. Sets
# mpid (the mount's pid) and bp (the bricks' pids, in order).
bench_volume()
{
    local layout=$1 sets=${2:-} nb kv i
    # shellcheck disable=SC2086
    set -- $layout
    nb=$2
    case $1 in distribute) layout= ;; esac
    start_brickfsd >/dev/null
    local bricks=()
    for ((i = 0; i < nb; i++)); do bricks+=("127.0.0.1:$T/b$i"); done
    # shellcheck disable=SC2086
    cli volume create rw $layout "${bricks[@]}" force >/dev/null
    for kv in $sets; do cli volume set rw "${kv%%=*}" "${kv#*=}" >/dev/null; done
    cli volume start rw >/dev/null
    for ((i = 0; i < nb; i++)); do bfs_wait_until "$PROCESS_UP_TIMEOUT" bfs__has_brick_pid "$i"; done
    mount_vol rw "$T/m" >/dev/null
    # shellcheck disable=SC2034 # for the caller, as bp
    mpid=$(mount_pid "$T/m")
    bp=()
    for ((i = 0; i < nb; i++)); do bp+=("$(mgmt_brick_pid rw "$i")"); done
}
bfs__has_brick_pid() { [ -n "$(mgmt_brick_pid rw "$1")" ]; }

# mount_pid DIR: the pid of the FUSE process of a mount made here.
mount_pid()
{
    awk -v d="$(bfs__abspath "$1")" '$1 == d { p = $2 } END { if (p) print p; else exit 1 }' \
        "$T/.run/mounts"
}

# mount_rss DIR: resident memory (kB) of that process.
mount_rss()
{
    awk '/^VmRSS:/ { print $2 }' "/proc/$(mount_pid "$1")/status"
}

# graph_info DIR KEY...: a field of the mount's brickfs.graph virtual xattr
# (docs/design/graph-switch.md), by path; XL=NAME as a step picks the
# translator NAME of "xlators". Booleans as 1/0.
graph_info()
{
    python3 - "$@" <<'PY'
import json, os, sys
v = json.loads(os.getxattr(sys.argv[1], "brickfs.graph"))
for k in sys.argv[2:]:
    if k.startswith("XL="):
        v = next(x for x in v["xlators"] if x["name"] == k[3:])
    else:
        v = v[k]
print(int(v) if isinstance(v, bool) else v)
PY
}

# graph_opt DIR XLATOR KEY: an option of a translator of the active graph.
graph_opt()
{
    graph_info "$1" "XL=$2" options "$3"
}

# sbin_helper_install: makes `mount -t brickfs` find build/bin/mount.brickfs
# by linking /sbin/mount.brickfs to it (mount(8) looks nowhere else), unless
# /sbin/mount.brickfs exists already (then returns 1, and the caller
# skips). The link is removed at exit.
sbin_helper_install()
{
    local link=/sbin/mount.brickfs
    [ -e "$link" ] || [ -L "$link" ] && return 1
    ln -s "$BFS_BIN/mount.brickfs" "$link" || return 1
    echo "$link" >"$T/.run/sbin-helper"
}

bfs__sbin_helper_remove()
{
    local link
    link=$(cat "$T/.run/sbin-helper" 2>/dev/null) || return 0
    [ -L "$link" ] && [ "$(readlink "$link")" = "$BFS_BIN/mount.brickfs" ] && rm -f "$link"
    rm -f "$T/.run/sbin-helper"
}

# helper_mount_pid DIR: the pid of the brickfs-mount daemon serving DIR, for
# mounts made through mount(8) or mount.brickfs (not started here).
helper_mount_pid()
{
    local d pid dir
    dir=$(bfs__abspath "$1")
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        { tr '\0' '\n' <"$d/cmdline"; } 2>/dev/null | grep -qxF "$dir" || continue
        { tr '\0' '\n' <"$d/cmdline"; } 2>/dev/null | head -n 1 | grep -q 'brickfs-mount$' &&
            { echo "$pid"; return 0; }
    done
    return 1
}
