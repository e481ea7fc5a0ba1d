#!/usr/bin/env bash
#
# 111-mount-mgmt.t — mounting from brickfsd, and finding bricks through its
# port map (docs/design/graph-switch.md):
#   - the client volfile names no port; GET /v1/volumes/V/bricks/B answers one;
#   - brickfs-mount HOST:PORT:/VOLUME, its errors (no such volume, no
#     server, a bad spec), backup-volfile-servers when the first is down;
#   - mount.brickfs (the mount(8) helper), `mount -t brickfs` and an fstab
#     line (an fstab of the test's own, mount -T); `mount -t` needs
#     /sbin/mount.brickfs: the test links it when it does not exist and
#     removes the link at exit (else those tests are skipped);
#   - a brick killed with SIGKILL whose port a stranger takes meanwhile is
#     restarted by brickfsd on another port; the mount asks the port map
#     and carries on;
#   - brickfsd killed: the mount carries on.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"

skip_unless_mgmt
skip_unless_brickfs

B=$T/bricks
TEST start_brickfsd
TEST cli volume create v1 "127.0.0.1:$B/b1" force
TEST cli volume set v1 network.ping-timeout "$NETWORK_PING_TIMEOUT"
TEST cli volume start v1
port=${BRICKFS_SERVER##*:}

# ---- the volfile names no port; the port map has it ----
vf=$(api body GET /v1/volumes/v1/volfile/client)
EXPECT 0 eval "grep -c remote-port <<<'$vf'"
EXPECT 1 eval "grep -c 'option mgmt-server $BRICKFS_SERVER\$' <<<'$vf'"
EXPECT 1 eval "grep -c 'option mgmt-volume v1\$' <<<'$vf'"
pm_port() { api body GET "/v1/volumes/$1/bricks/$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["port"])'; }
EXPECT "$(vol_brick_field v1 0 port)" pm_port v1 v1-brick-0
EXPECT 404 api code GET /v1/volumes/v1/bricks/v1-brick-9
EXPECT 404 api code GET /v1/volumes/nosuch/bricks/v1-brick-0
# the address a client used is what its volfile names (Host header)
EXPECT 1 eval "curl -s --noproxy '*' http://localhost:$port/v1/volumes/v1/volfile/client | grep -c 'option mgmt-server localhost:$port\$'"

# ---- brickfs-mount HOST:PORT:/VOLUME ----
TEST mount_vol v1 "$T/m1"
EXPECT "127.0.0.1:$port:/v1" findmnt -no SOURCE "$T/m1"
TEST eval "echo one >'$T/m1/one'"
EXPECT one cat "$T/m1/one"
EXPECT one cat "$B/b1/one"                       # on the brick, as a plain file
EXPECT 1 graph_info "$T/m1" generation
EXPECT "$(vol_field v1 revision)" graph_info "$T/m1" volfile_revision
EXPECT "$(vol_brick_field v1 0 port)" graph_info "$T/m1" XL=v1-client-0 dump remote_port

# errors: exit 1 with the reason, 2 for usage
mkdir -p "$T/m2"
TEST ! "$MOUNT_BIN" "127.0.0.1:$port:/nosuch" "$T/m2"
EXPECT 1 eval "'$MOUNT_BIN' 127.0.0.1:$port:/nosuch '$T/m2' 2>&1 | grep -c 'volume nosuch does not exist'"
dead=$(free_port)
EXPECT 1 eval "'$MOUNT_BIN' 127.0.0.1:$dead:/v1 '$T/m2' 2>&1 | grep -c 'no volfile server answered'"
EXPECT 1 eval "'$MOUNT_BIN' 127.0.0.1:$dead:/v1 '$T/m2' >/dev/null 2>&1; echo \$?"
EXPECT 2 eval "'$MOUNT_BIN' no-colon-slash '$T/m2' >/dev/null 2>&1; echo \$?"
EXPECT 2 eval "'$MOUNT_BIN' 127.0.0.1:/v1/sub '$T/m2' >/dev/null 2>&1; echo \$?"
EXPECT 2 eval "'$MOUNT_BIN' '127.0.0.1:/bad name' '$T/m2' >/dev/null 2>&1; echo \$?"
EXPECT 2 eval "'$MOUNT_BIN' -o backup-volfile-servers=h:0 127.0.0.1:/v1 '$T/m2' >/dev/null 2>&1; echo \$?"
TEST ! bfs_is_mounted "$T/m2"

# ---- backup-volfile-servers: the first server is down, a backup answers ----
TEST mount_fuse m3 "$T/m3" "$MOUNT_BIN" -f -o "log-file=$T/logs/m3.log,backup-volfile-servers=localhost:$dead:127.0.0.1:$port" "127.0.0.1:$dead:/v1" "$T/m3"
EXPECT one cat "$T/m3/one"
EXPECT 1 eval "grep -c 'volfile server is now 127.0.0.1:$port' '$T/logs/m3.log'"
TEST umount_fuse "$T/m3"

# ---- the mount(8) helper, mount -t brickfs, fstab ----
mkdir -p "$T/m4" "$T/m5" "$T/m6"
TEST "$BFS_BIN/mount.brickfs" "$BRICKFS_SERVER:/v1" "$T/m4" -o "rw,_netdev,log-file=$T/logs/m4.log"
echo "$T/m4" >>"$T/.run/mounts"
EXPECT one cat "$T/m4/one"
m4pid=$(helper_mount_pid "$T/m4")
TEST [ -n "$m4pid" ]
TEST umount_fuse "$T/m4"
TEST bfs_wait_gone "$m4pid" "$PROCESS_DOWN_TIMEOUT"   # the daemon ends with its mount
# a volfile path works through the helper too
cli_vf=$(brickfsd_state)/volfiles/v1/client.vol
TEST "$BFS_BIN/mount.brickfs" "$cli_vf" "$T/m4" -o "log-file=$T/logs/m4b.log"
echo "$T/m4" >>"$T/.run/mounts"
EXPECT one cat "$T/m4/one"
TEST umount_fuse "$T/m4"
TEST ! "$BFS_BIN/mount.brickfs" "127.0.0.1:$port:/nosuch" "$T/m4"

if sbin_helper_install; then
    TEST mount -t brickfs -o "log-file=$T/logs/m5.log" "$BRICKFS_SERVER:/v1" "$T/m5"
    echo "$T/m5" >>"$T/.run/mounts"
    EXPECT one cat "$T/m5/one"
    EXPECT fuse.brickfs findmnt -no FSTYPE "$T/m5"
    m5pid=$(helper_mount_pid "$T/m5")
    TEST umount "$T/m5"
    TEST bfs_wait_gone "$m5pid" "$PROCESS_DOWN_TIMEOUT"
    # an fstab line (an fstab of our own: mount -T), then `mount DIR`
    printf '%s %s brickfs defaults,_netdev,log-file=%s 0 0\n' "$BRICKFS_SERVER:/v1" "$T/m6" \
        "$T/logs/m6.log" >"$T/fstab"
    TEST mount -T "$T/fstab" "$T/m6"
    echo "$T/m6" >>"$T/.run/mounts"
    EXPECT one cat "$T/m6/one"
    TEST umount "$T/m6"
    TEST ! mount -t brickfs "127.0.0.1:$port:/nosuch" "$T/m5"
else
    SKIP "/sbin/mount.brickfs exists and is not ours: mount -t brickfs and fstab not tried"
fi

# ---- a brick restarted on another port: the mount finds it ----
TEST eval "seq 1 5000 >'$T/m1/numbers'"
old=$(vol_brick_field v1 0 port)
TEST kill_mgmt_brick v1 0
# a stranger takes the port before brickfsd restarts the brick (after 1 s);
# it accepts connections and closes them, as a wrong service would
bfs_spawn squatter python3 -c "
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $old)); s.listen(16)
while True:
    c, _ = s.accept(); c.close()"
TEST bfs_wait_until "$PROCESS_UP_TIMEOUT" bfs_port_listening "$old"
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 vol_brick_field v1 0 online
new=$(vol_brick_field v1 0 port)
TEST [ "$new" != "$old" ]
EXPECT "$new" pm_port v1 v1-brick-0
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" "$new" graph_info "$T/m1" XL=v1-client-0 dump remote_port
EXPECT_WITHIN "$CHILD_UP_TIMEOUT" 5000 eval "wc -l <'$T/m1/numbers'"
TEST eval "echo two >'$T/m1/two'"
EXPECT two cat "$B/b1/two"
EXPECT 1 graph_info "$T/m1" generation      # the same graph: the text did not change
TEST bfs_stop "$(bfs_pid_of squatter)"

# ---- brickfsd killed: the mount carries on ----
TEST kill_brickfsd d1 KILL
TEST eval "echo three >'$T/m1/three'"
EXPECT three cat "$T/m1/three"
EXPECT 5000 eval "wc -l <'$T/m1/numbers'"
TEST start_brickfsd
EXPECT three cat "$T/m1/three"

TEST umount_fuse "$T/m1"
done_testing
