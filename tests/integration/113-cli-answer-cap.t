#!/usr/bin/env bash
#
# 113-cli-answer-cap.t — the brickfs CLI against a server that answers too
# much: an answer of exactly 64 MiB (the cap of src/cli/http-client.c) is
# read and used; one byte more fails the command with a clear error, exit
# status 1, instead of the CLI holding whatever the server sends. The
# "server" is python3's http.server over a folder of prepared answers.

. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"

[ -x "$BRICKFS_BIN" ] || SKIP_ALL "$BRICKFS_BIN is not built"
command -v python3 >/dev/null || SKIP_ALL "no python3"

CAP=$((64 << 20))
W=$T/www
mkdir -p "$W/v1/volumes"
# A JSON answer of exactly N bytes: {"volumes": [], "pad": "xxx..."}
answer()
{
    python3 -c 'import sys; n = int(sys.argv[1]); head = "{\"volumes\": [], \"pad\": \""
sys.stdout.write(head + "x" * (n - len(head) - 2) + "\"}")' "$1"
}
answer "$CAP" >"$W/v1/exact"
answer $((CAP + 1)) >"$W/v1/over"
EXPECT "$CAP" stat -c %s "$W/v1/exact"
EXPECT $((CAP + 1)) stat -c %s "$W/v1/over"

port=$(free_port)
TEST bfs_spawn www python3 -m http.server "$port" --bind 127.0.0.1 --directory "$W"
EXPECT_WITHIN 20 200 eval "curl -s -o /dev/null -w '%{http_code}' --noproxy '*' http://127.0.0.1:$port/v1/exact"

# `volume list` asks GET /v1/volumes: point that name at each answer in turn.
ask() { BRICKFS_SERVER=127.0.0.1:$port cli volume list; }
rm -rf "$W/v1/volumes"
ln -s exact "$W/v1/volumes"
EXPECT "No volumes present" ask
rm -f "$W/v1/volumes"
ln -s over "$W/v1/volumes"
EXPECT 1 eval 'ask >/dev/null 2>&1; echo $?'
msg=$(ask 2>&1)
EXPECT 1 eval "grep -c 'brickfsd at 127.0.0.1:$port answered more than 64 MiB to GET /v1/volumes: refused' <<<'$msg'"
EXPECT 1 eval "wc -l <<<'$msg'"                                  # one line, no body dumped

done_testing
