#!/usr/bin/env bash
#
# 203-distrep-rename.t — renames on a distributed-replicate volume (2 sets
# of replica 2), in particular over an existing name, which failed with
# EINVAL (docs/design/distribute.md, "Rename"): every case of the rename
# protocol, the data and the link files on both bricks of every set.
#   - a rename to a new name and over an existing name, for many names
#     (so that every combination of hashed sets occurs: the data's set,
#     the new name's set, the replaced file's set);
#   - the same across two directories;
#   - the atomic replacement idiom (write tmp; rename tmp over name), also
#     repeated over a name that already lives behind a link file;
#   - afterwards every name reads its expected content, the replaced files
#     are gone, and both bricks of each set hold the same names.

# shellcheck disable=SC2046
. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/dht.sh"

skip_unless_mgmt
skip_unless_brickfs

TEST start_brickfsd
TEST distrep_volume v 2 2
M=$T/m
TEST mount_vol v "$M"
TEST mkdir "$M/a" "$M/b"

# over an existing name, same folder: x<i> replaces y<i>
TEST eval '(for i in $(seq 0 39); do echo "x$i" >"$M/a/x$i" && echo "y$i" >"$M/a/y$i" || exit 1; done)'
TEST eval '(for i in $(seq 0 39); do mv -f "$M/a/x$i" "$M/a/y$i" || exit 1; done)'
TEST eval '(for i in $(seq 0 39); do [ "$(cat "$M/a/y$i")" = "x$i" ] && [ ! -e "$M/a/x$i" ] || exit 1; done)'
# to a new name, then over an existing name across folders
TEST eval '(for i in $(seq 0 39); do mv "$M/a/y$i" "$M/a/z$i" || exit 1; done)'
TEST eval '(for i in $(seq 0 39); do echo "old$i" >"$M/b/z$i" || exit 1; done)'
TEST eval '(for i in $(seq 0 39); do mv -f "$M/a/z$i" "$M/b/z$i" || exit 1; done)'
TEST eval '(for i in $(seq 0 39); do [ "$(cat "$M/b/z$i")" = "x$i" ] || exit 1; done)'
EXPECT 0 eval "ls -A '$M/a' | grep -c ."
EXPECT 40 eval "ls -A '$M/b' | grep -c ."
# atomic replacement, three times over the same names (the second and third
# times the names may live behind link files)
for round in 1 2 3; do
    TEST eval '(for i in $(seq 0 39); do echo "r'$round'-$i" >"$M/b/.tmp$i" && mv -f "$M/b/.tmp$i" "$M/b/z$i" || exit 1; done)'
done
TEST eval '(for i in $(seq 0 39); do [ "$(cat "$M/b/z$i")" = "r3-$i" ] || exit 1; done)'
EXPECT 40 eval "ls -A '$M/b' | grep -c ."
# python's os.replace (rename(2) straight, no unlink first)
TEST python3 -c '
import os, sys
d = sys.argv[1]
for i in range(40):
    with open(os.path.join(d, "n%d" % i), "w") as f: f.write("n%d" % i)
    os.replace(os.path.join(d, "n%d" % i), os.path.join(d, "z%d" % i))
for i in range(40):
    assert open(os.path.join(d, "z%d" % i)).read() == "n%d" % i, i
' "$M/b"
# both bricks of each set hold the same entries (data and link files)
for s in 0 2; do
    TEST diff -r -q -x .brickfs "$T/bricks/v/b$s" "$T/bricks/v/b$((s + 1))"
done
# no data file twice across the sets, none lost
EXPECT 40 eval "find '$T/bricks/v/b0/b' '$T/bricks/v/b2/b' -type f ! -perm 1000 | grep -c ."
done_testing
