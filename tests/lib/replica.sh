# tests/lib/replica.sh — helpers of the replicate fault tests
# (tests/integration/21x-*.t), sourced after test.sh and mgmt.sh:
#
#   rep_volume VOL N [arbiter] BRICKDIR-PREFIX [KEY=VALUE...]
#                            creates and starts a replica N volume (bricks
#                            PREFIX0..PREFIX(N-1)), small ping timeout,
#                            foreground heal; waits until every brick is online
#   signal_mgmt_brick VOL IDX SIG
#                            a signal to a brick brickfsd started (STOP, CONT)
#   wl_start MNT STATE [WORKERS]  starts tests/lib/replica-workload.py
#   wl_stop STATE            asks it to stop, waits for it to finish
#   wl KEY / wl_ge KEY N     a value of its status / "1" when >= N
#   wlc ARGS...              replica-workload.py ARGS (verify, errnos, ...)
#   heal_settle MNT BRICKS...    "identical" once heal has converged: drives
#                            the heal, then compares the bricks
#   brick_compare [--arbiter B] BRICKS...   tests/lib/brick-compare.py
#   in_set WORDS ALLOWED...  every word of WORDS is one of ALLOWED
#   child_ups MNT VOL IDX / wait_child_up MNT VOL IDX BEFORE
#                            reconnections of brick IDX as the mount logged them
#   try_write PATH [DATA] / try_read PATH   the errno name of the call, or OK
#   pwrite_at PATH OFFSET DATA   an overwrite in place, fsynced
#
#   heal_pending VOL         total entries `volume heal VOL info summary`
#                            lists (every brick's pending index)
#   daemon_settle VOL BRICKS...  "identical" once the self-heal daemon has
#                            emptied the pending indexes (asked to crawl by
#                            `volume heal VOL`, no client access) and the
#                            bricks compare equal
#   rep_heal_dump BRICKS...  for a heal that did not converge: each brick's
#                            heal index entries, the brickfs xattrs of each
#                            (counters, GFID), and for a pending folder its
#                            names with their GFID and handle (a half-made
#                            name shows "no GFID" or "no handle")
#
# Heal is driven by heal_crawl (a find/stat/read of everything through the
# mount: lookups heal in the foreground) in heal_settle, and by the
# self-heal daemon brickfsd runs in daemon_settle.

[ -n "${BFS_REPLICA_SH:-}" ] && return 0
BFS_REPLICA_SH=1

PYTHON=${PYTHON:-python3}
REP_PING=${REP_PING:-2}        # network.ping-timeout of the fault tests (seconds)
WL_PY="$BFS_ROOT/tests/lib/replica-workload.py"
BC_PY="$BFS_ROOT/tests/lib/brick-compare.py"

rep_volume()
{
    local vol=$1 n=$2 arb="" prefix i kv
    shift 2
    if [ "$1" = arbiter ]; then arb="arbiter 1"; shift; fi
    prefix=$1
    shift
    local bricks=()
    for ((i = 0; i < n; i++)); do bricks+=("127.0.0.1:$prefix$i"); done
    cli volume create "$vol" replica "$n" $arb "${bricks[@]}" force || return 1
    cli volume set "$vol" network.ping-timeout "$REP_PING" || return 1
    cli volume set "$vol" cluster.background-self-heal-count 0 || return 1
    for kv in "$@"; do cli volume set "$vol" "${kv%%=*}" "${kv#*=}" || return 1; done
    cli volume start "$vol" || return 1
    bfs_wait_until "$PROCESS_UP_TIMEOUT" rep_all_online "$vol" "$n"
}

# rep_all_online VOL N: succeeds when the N bricks are online
rep_all_online()
{
    local i
    for ((i = 0; i < $2; i++)); do
        [ "$(vol_brick_field "$1" "$i" online)" = 1 ] || return 1
    done
}

signal_mgmt_brick()
{
    local pid
    pid=$(mgmt_brick_pid "$1" "$2") || return 1
    bfs__mgmt_ours "$pid" || { echo "signal_mgmt_brick: $pid is not a brick of this test" >&2; return 1; }
    kill -s "$3" "$pid"
}

wl_start()
{
    mkdir -p "$2"
    bfs_spawn "workload" "$PYTHON" "$WL_PY" run "$1" "$2" --workers "${3:-4}" --seed "${WL_SEED:-$$}"
    WL_PID=$BFS_PID
    WL_STATE=$2
}

wl_stop()
{
    touch "$1/stop"
    bfs_wait_gone "$WL_PID" 120 && [ "$(wl state)" = finished ]
}

wl() { "$PYTHON" "$WL_PY" get "$WL_STATE" "$1"; }
wl_ge() { [ "$(wl "$1")" -ge "$2" ] 2>/dev/null && echo 1 || echo 0; }
wlc() { "$PYTHON" "$WL_PY" "$@"; }

brick_compare() { "$PYTHON" "$BC_PY" "$@"; }

# heal_crawl MNT: every name looked up, every folder listed, every file read
heal_crawl()
{
    find "$1" -print0 2>/dev/null | xargs -0 -r stat >/dev/null 2>&1
    find "$1" -type f -print0 2>/dev/null | xargs -0 -r cat >/dev/null 2>&1
    return 0
}

# heal_settle MNT [--arbiter B] BRICKS...: one crawl, then the comparison's
# last line ("identical (N paths)" -> "identical")
heal_settle()
{
    local m=$1 out last
    shift
    heal_crawl "$m"
    out=$(brick_compare "$@" 2>&1)
    last=$(echo "$out" | tail -n 1)
    case $last in
    identical*) echo identical ;;
    *)
        echo "$out" | head -n 5 | sed 's/^/# /' >&2
        echo "$last"
        ;;
    esac
}

heal_pending()
{
    cli --json volume heal "$1" info summary 2>/dev/null | $PYTHON -c '
import json, sys
print(json.load(sys.stdin)["total_pending"])'
}

# daemon_settle VOL [--arbiter B] BRICKS...: asks the daemon to crawl now;
# "identical" when heal info shows nothing pending and the copies agree
daemon_settle()
{
    local vol=$1 n out last
    shift
    cli volume heal "$vol" >/dev/null 2>&1
    n=$(heal_pending "$vol")
    [ "$n" = 0 ] || { echo "pending: ${n:-no answer}"; return 0; }
    out=$(brick_compare "$@" 2>&1)
    last=$(echo "$out" | tail -n 1)
    case $last in
    identical*) echo identical ;;
    *)
        echo "$out" | head -n 5 | sed 's/^/# /' >&2
        echo "$last"
        ;;
    esac
}

# rep_heal_dump BRICKS...: what each brick's pending index holds, as TAP
# comments (tests call it when heal does not converge, so that the flake
# explains itself)
rep_heal_dump()
{
    "$PYTHON" - "$@" <<'PY'
import os, sys, uuid

def handle(brick, g):
    return os.path.join(brick, ".brickfs", g[0:2], g[2:4], g)

def xattrs(path, follow=True):
    try:
        keys = os.listxattr(path, follow_symlinks=follow)
    except OSError as e:
        return "(%s)" % os.strerror(e.errno)
    out = []
    for k in sorted(keys):
        if k.startswith("trusted.brickfs."):
            try:
                v = os.getxattr(path, k, follow_symlinks=follow)
            except OSError as e:
                v = os.strerror(e.errno).encode()
            out.append("%s=0x%s" % (k[len("trusted.brickfs."):], v.hex()))
    return " ".join(out) or "(no brickfs xattr)"

def names(brick, d):
    for n in sorted(os.listdir(d)):
        p = os.path.join(d, n)
        try:
            raw = os.getxattr(p, "trusted.brickfs.gfid", follow_symlinks=False)
            g = str(uuid.UUID(bytes=raw))
            h = "" if os.path.lexists(handle(brick, g)) else " NO HANDLE"
            yield "%s %s%s" % (n, g, h)
        except OSError:
            yield "%s NO GFID" % n

for b in sys.argv[1:]:
    idx = os.path.join(b, ".brickfs", "indices", "pending")
    try:
        pend = sorted(e for e in os.listdir(idx) if not e.startswith("."))
    except OSError as e:
        print("# %s: no index (%s)" % (b, os.strerror(e.errno)))
        continue
    print("# %s: %d pending" % (b, len(pend)))
    for g in pend:
        h = handle(b, g)
        if not os.path.lexists(h):
            print("#   %s: no handle on this brick" % g)
            continue
        isdir = os.path.isdir(h)
        where = " -> " + os.readlink(h) if isdir and os.path.islink(h) else ""
        print("#   %s%s: %s" % (g, where, xattrs(h)))
        if isdir:
            try:
                for line in names(b, h):
                    print("#     " + line)
            except OSError as e:
                print("#     (cannot list: %s)" % os.strerror(e.errno))
PY
}

# in_set WORDS ALLOWED...: WORDS non-empty and each one of ALLOWED
in_set()
{
    local words=$1 x
    shift
    [ -n "$words" ] || { echo "no errors recorded"; return 1; }
    for x in $words; do
        case " $* " in *" $x "*) ;; *) echo "unexpected $x (in: $words)"; return 1 ;; esac
    done
}

# child_ups MNT VOL IDX: how many times the mount at MNT logged brick IDX
# of VOL up (a reconnection adds one)
child_ups()
{
    grep -c "child $2-client-$3 is up" "$T/logs/mount-$(basename "$1").log" 2>/dev/null
}

# wait_child_up MNT VOL IDX BEFORE: until child_ups passed BEFORE
wait_child_up()
{
    bfs_wait_until "$CHILD_UP_TIMEOUT" eval "[ \"\$(child_ups '$1' '$2' '$3')\" -gt '$4' ]"
}

# try_write PATH [DATA]: the errno name of appending DATA (default "x") to
# PATH through open/write/close (OK when it works)
try_write()
{
    "$PYTHON" - "$1" "${2:-x}" <<'PY'
import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, sys.argv[2].encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
PY
}

# try_read PATH: the errno name of reading PATH whole (OK when it works)
try_read()
{
    "$PYTHON" -c '
import errno, sys
try:
    open(sys.argv[1], "rb").read()
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))' "$1"
}

# pwrite_at PATH OFFSET DATA: DATA written at OFFSET of an existing file,
# fsynced; prints the errno name of the first failed call, or OK (and
# fails unless OK)
pwrite_at()
{
    local r
    r=$("$PYTHON" -c '
import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY)
    try:
        os.pwrite(fd, sys.argv[3].encode(), int(sys.argv[2]))
        os.fsync(fd)
    finally:
        os.close(fd)
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))' "$1" "$2" "$3")
    echo "$r"
    [ "$r" = OK ]
}
