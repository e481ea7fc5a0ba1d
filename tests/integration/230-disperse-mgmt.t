#!/usr/bin/env bash
#
# 230-disperse-mgmt.t — management of dispersed volumes against a real
# brickfsd: `volume create NAME disperse N redundancy R` (and gluster's
# `disperse-data D redundancy R`), its validation errors (redundancy at
# least 1 and less than half the set, at most 32 bricks per set, whole sets,
# not with replica, a type that agrees), nothing created on the bricks when
# refused; then, when cluster/disperse is built, `volume info` (Disperse /
# Distributed-Disperse, SETS x (D + R) = BRICKS), the client volfile
# (cluster/disperse per set with option redundancy, cluster/distribute over
# the sets), start (with a self-heal daemon: `volume heal` and `heal info`
# answer, split-brain resolution is refused), stop and delete; when it is
# not built, the refusal (501).

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"

skip_unless_mgmt

B=$T/bricks
TEST start_brickfsd

# bricks PREFIX N: N brick arguments 127.0.0.1:$B/PREFIX1 ...
bricks()
{
    local i
    for ((i = 1; i <= $2; i++)); do printf '127.0.0.1:%s/%s%d ' "$B" "$1" "$i"; done
}

# refused WHY SPEC...: create fails with a message containing WHY
refused()
{
    local why=$1
    shift
    # shellcheck disable=SC2068
    cli volume create e $@ force 2>&1 | grep -c -- "$why"
}

# ---- validation (whether or not cluster/disperse is built) ----
# shellcheck disable=SC2046
{
EXPECT 1 refused 'disperse 3 needs a redundancy count' disperse 3 $(bricks e 3)
EXPECT 1 refused 'disperse 5 needs a redundancy count' disperse-data 5 $(bricks e 5)
EXPECT 1 refused 'redundancy needs a disperse count' redundancy 1 $(bricks e 3)
EXPECT 1 refused 'disperse count 2 is too small' disperse 2 redundancy 1 $(bricks e 2)
EXPECT 1 refused 'redundancy 2 is too large for disperse 4: it must be less than half the set (at most 1)' \
    disperse 4 redundancy 2 $(bricks e 4)
EXPECT 1 refused 'redundancy 3 is too large for disperse 6' disperse-data 3 redundancy 3 $(bricks e 6)
EXPECT 1 refused 'disperse count 33 is too large: at most 32' disperse 33 redundancy 2 $(bricks e 33)
EXPECT 1 refused 'disperse count 34 is too large' disperse-data 32 redundancy 2 $(bricks e 34)
EXPECT 1 refused '4 bricks is not a multiple of the disperse count 3' disperse 3 redundancy 1 $(bricks e 4)
EXPECT 1 refused '9 bricks is not a multiple of the disperse count 6' disperse 6 redundancy 2 $(bricks e 9)
EXPECT 1 refused 'either replicated or dispersed' replica 3 disperse 3 redundancy 1 $(bricks e 3)
EXPECT 1 refused 'disperse 4 is not disperse-data 2 + redundancy 1' \
    disperse 4 disperse-data 2 redundancy 1 $(bricks e 4)
EXPECT 2 eval "cli volume create e disperse 3 redundancy 0 $(bricks e 3) force >/dev/null 2>&1; echo \$?"
EXPECT 2 eval "cli volume create e disperse three redundancy 1 $(bricks e 3) force >/dev/null 2>&1; echo \$?"
}
json_bricks='["127.0.0.1:'$B'/e1","127.0.0.1:'$B'/e2","127.0.0.1:'$B'/e3"]'
EXPECT 400 api code POST /v1/volumes "{\"name\":\"e\",\"disperse\":-3,\"redundancy\":1,\"bricks\":$json_bricks,\"force\":true}"
EXPECT 400 api code POST /v1/volumes "{\"name\":\"e\",\"type\":\"disperse\",\"bricks\":$json_bricks,\"force\":true}"
EXPECT 1 eval "api body POST /v1/volumes '{\"name\":\"e\",\"type\":\"disperse\",\"bricks\":$json_bricks,\"force\":true}' | grep -c 'volume type disperse needs a disperse count'"
EXPECT 1 eval "api body POST /v1/volumes '{\"name\":\"e\",\"type\":\"distribute\",\"disperse\":3,\"redundancy\":1,\"bricks\":$json_bricks,\"force\":true}' | grep -c 'volume type distribute does not take a disperse count'"
EXPECT 1 eval "api body POST /v1/volumes '{\"name\":\"e\",\"type\":\"replicate\",\"disperse\":3,\"redundancy\":1,\"bricks\":$json_bricks,\"force\":true}' | grep -c 'volume type replicate needs a replica count'"
TEST ! test -e "$B/e1"          # nothing made on the bricks when refused
EXPECT "No volumes present" cli volume list

if [ ! -e "$BFS_BUILD/lib/brickfs/xlators/cluster/disperse.so" ]; then
    # Without the translator a valid disperse volume is refused, never mis-built.
    # shellcheck disable=SC2046
    EXPECT 1 refused 'needs the translator cluster/disperse, which is not built' \
        disperse 3 redundancy 1 $(bricks d 3)
    EXPECT 501 api code POST /v1/volumes "{\"name\":\"e\",\"disperse\":3,\"redundancy\":1,\"bricks\":$json_bricks,\"force\":true}"
    TEST ! test -e "$B/d1"
    SKIP "cluster/disperse is not built: create, info and volfiles not tested"
    done_testing
fi

# ---- disperse 3 redundancy 1: one set ----
# shellcheck disable=SC2046
TEST cli volume create d3 disperse 3 redundancy 1 $(bricks d 3) force
EXPECT "Type: Disperse" eval "cli volume info d3 | grep '^Type:'"
EXPECT "Number of Bricks: 1 x (2 + 1) = 3" eval "cli volume info d3 | grep '^Number of Bricks:'"
EXPECT "Brick3: 127.0.0.1:$B/d3" eval "cli volume info d3 | grep '^Brick3:'"
EXPECT disperse vol_field d3 type
EXPECT 3 vol_field d3 disperse
EXPECT 1 vol_field d3 redundancy
vf=$(api body GET /v1/volumes/d3/volfile/client)
EXPECT 1 eval "echo '$vf' | grep -c 'type cluster/disperse'"
EXPECT 1 eval "echo '$vf' | grep -c 'option redundancy 1\$'"
EXPECT 1 eval "echo '$vf' | grep -c 'subvolumes d3-client-0 d3-client-1 d3-client-2\$'"
EXPECT 1 eval "echo '$vf' | grep -c 'subvolumes d3-disperse-0\$'"  # io-stats on top
EXPECT 0 eval "echo '$vf' | grep -c 'cluster/distribute\|cluster/replicate'"
EXPECT 0 eval "grep -c 'disperse\|redundancy' '$(brickfsd_state)/volfiles/d3/d3-brick-0.vol'"
TEST cli volume start d3
EXPECT 1 vol_brick_field d3 2 online
# a dispersed volume has a self-heal daemon too, and `volume heal` answers
shd_online()
{
    cli --json volume status "$1" | python3 -c '
import json, sys
print(int(json.load(sys.stdin)["self_heal_daemon"]["online"]))'
}
EXPECT_WITHIN "$PROCESS_UP_TIMEOUT" 1 shd_online d3
TEST eval "cli volume heal d3 info | grep -q '^Number of entries: 0\$'"
TEST cli volume heal d3
EXPECT 1 eval "cli volume heal d3 split-brain bigger-file /x 2>&1 | grep -c 'dispersed: it has no split-brain'"
TEST cli volume stop d3 --yes
TEST cli volume delete d3 --yes

# ---- disperse-data 4 redundancy 2 over 12 bricks: distributed-disperse ----
# shellcheck disable=SC2046
TEST cli volume create dd disperse-data 4 redundancy 2 $(bricks dd 12) force
EXPECT "Type: Distributed-Disperse" eval "cli volume info dd | grep '^Type:'"
EXPECT "Number of Bricks: 2 x (4 + 2) = 12" eval "cli volume info dd | grep '^Number of Bricks:'"
EXPECT distributed-disperse vol_field dd type
EXPECT 6 vol_field dd disperse
vf=$(api body GET /v1/volumes/dd/volfile/client)
EXPECT 2 eval "echo '$vf' | grep -c 'type cluster/disperse'"
EXPECT 2 eval "echo '$vf' | grep -c 'option redundancy 2\$'"
EXPECT 1 eval "echo '$vf' | grep -c 'subvolumes dd-client-0 dd-client-1 dd-client-2 dd-client-3 dd-client-4 dd-client-5\$'"
EXPECT 1 eval "echo '$vf' | grep -c 'subvolumes dd-client-6 dd-client-7 dd-client-8 dd-client-9 dd-client-10 dd-client-11\$'"
EXPECT 1 eval "echo '$vf' | grep -c 'subvolumes dd-disperse-0 dd-disperse-1\$'"
EXPECT 1 eval "echo '$vf' | grep -c 'type cluster/distribute'"
TEST cli volume delete dd --yes

# ---- the REST API: type given and agreeing, both counts agreeing ----
d4='["127.0.0.1:'$B'/t1","127.0.0.1:'$B'/t2","127.0.0.1:'$B'/t3","127.0.0.1:'$B'/t4"]'
EXPECT 201 api code POST /v1/volumes "{\"name\":\"t\",\"type\":\"disperse\",\"disperse\":4,\"disperse-data\":3,\"redundancy\":1,\"bricks\":$d4,\"force\":true}"
EXPECT "Number of Bricks: 1 x (3 + 1) = 4" eval "cli volume info t | grep '^Number of Bricks:'"
TEST cli volume delete t --yes

done_testing
