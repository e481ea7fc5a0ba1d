#!/usr/bin/env bash
#
# 101-mgmt-restart.t — supervision and crash recovery of brickfsd:
#   - a brick killed with SIGKILL is restarted (with backoff), and
#     'volume start NAME force' starts a brick that waits for its restart;
#   - brickfsd killed with SIGKILL and restarted: every volume, option and
#     running brick as before, running bricks adopted (same pid, also
#     without their pid file) and supervised, never duplicated;
#   - a brick still running for a volume that is not started is stopped.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"

skip_unless_mgmt

B=$T/bricks
TEST start_brickfsd
TEST cli volume create v1 "127.0.0.1:$B/b1" force
TEST cli volume create v2 "127.0.0.1:$B/b2" force
TEST cli volume set v1 network.ping-timeout 9
TEST cli volume start v1
EXPECT 1 vol_brick_field v1 0 online
pid1=$(vol_brick_field v1 0 pid)
port1=$(vol_brick_field v1 0 port)

# ---- a crashed brick is restarted ----
TEST kill_mgmt_brick v1 0
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 vol_brick_field v1 0 online
pid2=$(vol_brick_field v1 0 pid)
TEST [ "$pid2" != "$pid1" ]
EXPECT "$port1" vol_brick_field v1 0 port
EXPECT 1 vol_brick_field v1 0 restarts
TEST bfs_port_listening "$port1"

# second crash: restarted again, after a longer delay
t0=$(bfs_now_us)
TEST kill_mgmt_brick v1 0
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 vol_brick_field v1 0 online
took=$((($(bfs_now_us) - t0) / 1000))
TEST [ "$took" -ge 1900 ]                    # 1 s, then 2 s
EXPECT 2 vol_brick_field v1 0 restarts
# third crash: the restart is 4 s away; 'start force' does not wait for it
TEST kill_mgmt_brick v1 0
t0=$(bfs_now_us)
TEST cli volume start v1 force
EXPECT 1 vol_brick_field v1 0 online
took=$((($(bfs_now_us) - t0) / 1000))
TEST [ "$took" -lt 3500 ]
pid3=$(vol_brick_field v1 0 pid)
TEST ! eval "ls -l /proc/$pid3/fd | grep -q brickfsd.lock"   # the lock stays brickfsd's
sleep 5                                       # past the cancelled restart: still one brick
EXPECT "$pid3" vol_brick_field v1 0 pid
EXPECT 1 eval "bfs__mgmt_brick_pids | wc -l"

# ---- brickfsd killed with SIGKILL and restarted ----
before=$(cli --json volume info)
TEST kill_brickfsd d1 KILL
TEST bfs_pid_alive "$pid3"                    # bricks outlive brickfsd
TEST bfs_port_listening "$port1"
TEST start_brickfsd
EXPECT "$before" cli --json volume info       # every volume and option as before
EXPECT started vol_field v1 status
EXPECT created vol_field v2 status
EXPECT 9 vol_field v1 options network.ping-timeout
EXPECT "$pid3" vol_brick_field v1 0 pid       # adopted, not restarted
EXPECT 1 vol_brick_field v1 0 online
EXPECT 1 eval "bfs__mgmt_brick_pids | wc -l"

# an adopted brick (not brickfsd's child) is supervised too
TEST kill_mgmt_brick v1 0
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 vol_brick_field v1 0 online
pid4=$(vol_brick_field v1 0 pid)
TEST [ "$pid4" != "$pid3" ]

# adoption without the pid file (brickfsd killed right after a spawn)
TEST kill_brickfsd d1 KILL
TEST rm "$(brickfsd_run)/bricks/v1-brick-0.pid"
TEST start_brickfsd
EXPECT "$pid4" vol_brick_field v1 0 pid
EXPECT 1 eval "bfs__mgmt_brick_pids | wc -l"

# ---- a brick of a volume that is not started is stopped at startup ----
TEST kill_brickfsd d1 KILL
vf2=$(brickfsd_state)/volfiles/v2/v2-brick-0.vol
TEST test -e "$vf2"
bfs_spawn stray "$BRICK_BIN" -f --volfile "$vf2" --log-file "$T/logs/stray.log"
stray=$BFS_PID
TEST bfs_wait_until "$PROCESS_UP_TIMEOUT" eval "grep -q listening '$T/logs/stray.log'"
TEST start_brickfsd
EXPECT_WITHIN "$PROCESS_DOWN_TIMEOUT" 1 eval "bfs_pid_alive $stray || echo 1"
EXPECT created vol_field v2 status
EXPECT 0 vol_brick_field v2 0 online

# ---- stop after all this: the adopted brick goes, nothing is left ----
TEST cli volume stop v1 --yes
EXPECT_WITHIN "$PROCESS_DOWN_TIMEOUT" 1 eval "bfs_pid_alive $pid4 || echo 1"
EXPECT 0 eval "bfs__mgmt_brick_pids | wc -l"
sleep 2                                       # no restart of a stopped volume's brick
EXPECT 0 eval "bfs__mgmt_brick_pids | wc -l"

# ---- a brick whose port a stranger took moves to another port ----
taken=$(vol_brick_field v1 0 port)
bfs_spawn squatter python3 -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $taken)); s.listen(1); time.sleep(300)"
TEST bfs_wait_until "$PROCESS_UP_TIMEOUT" bfs_port_listening "$taken"
TEST cli volume start v1
EXPECT 1 vol_brick_field v1 0 online
TEST [ "$(vol_brick_field v1 0 port)" != "$taken" ]
EXPECT "$(vol_brick_field v1 0 port)" eval "cli --json volume info v1 | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"bricks\"][0][\"port\"])'"
TEST bfs_stop "$(bfs_pid_of squatter)"

# a started volume whose bricks all died while brickfsd was down
pid5=$(vol_brick_field v1 0 pid)
TEST kill_brickfsd d1 KILL
TEST kill_mgmt_brick v1 0
TEST start_brickfsd
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 vol_brick_field v1 0 online
TEST [ "$(vol_brick_field v1 0 pid)" != "$pid5" ]

done_testing
