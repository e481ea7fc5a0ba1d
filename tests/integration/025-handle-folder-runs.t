#!/usr/bin/env bash
#
# 025-handle-folder-runs.t — consecutive creates of a mount share a handle
# folder on the brick. The GFID of a new entry (chosen by brickfs-mount,
# gfid-req) comes in runs of 256 that share their first two bytes, the
# handle folder .brickfs/AB/CD (docs/design/performance-notes.md, note 28;
# on-brick-format.md). With random GFIDs a young brick made a new folder
# for almost every file (600 creates: ~600 folders); with runs, a handful.
# What this checks: the folders made for 600 files and 3 folders, every
# handle a hard link of its file in its GFID's folder, the GFIDs distinct,
# the files readable by name after a remount, and removable.
# tags: sanitizer

. "$(dirname "$0")/../lib/test.sh"

[ -x "$MOUNT_BIN" ] || SKIP_ALL "$MOUNT_BIN is not built"
[ -x "$BRICK_BIN" ] || SKIP_ALL "$BRICK_BIN is not built"
require_fuse
require_root

# gfid FILE: the file's trusted.brickfs.gfid on the brick, 32 hex digits
gfid() { getfattr -n trusted.brickfs.gfid -e hex "$1" 2>/dev/null | sed -n 's/^trusted.brickfs.gfid=0x//p'; }
# handle folders: the second-level folders under .brickfs (indices excluded)
folders() { find "$BRICK/.brickfs" -mindepth 2 -maxdepth 2 -type d ! -path '*/indices/*' | wc -l; }

TEST write_volfiles b1 "$T/bricks/b1"
TEST start_brick b1
BRICK=$(brick_dir b1)
M=$T/mnt
TEST mount_brickfs "$(client_volfile b1)" "$M"

n0=$(folders)
TEST mkdir "$M/a" "$M/b" "$M/c"
dirs=(a b c)
for i in $(seq 0 599); do
    echo "$i" >"$M/${dirs[i % 3]}/$(printf 'f%03d' "$i")"
done
TEST [ "$(find "$M" -type f | wc -l)" -eq 600 ]
made=$(($(folders) - n0))
echo "# handle folders made for 3 folders and 600 files: $made"
# 603 GFIDs are three runs of 256 at most (four if this mount's run was
# already under way); random GFIDs would make ~600 folders
TEST [ "$made" -ge 1 -a "$made" -le 4 ]

# every file's handle: .brickfs/AB/CD/<gfid>, the same inode as its name
bad=0
for f in "$BRICK"/a/f* "$BRICK"/b/f* "$BRICK"/c/f*; do
    g=$(gfid "$f")
    h=$BRICK/.brickfs/${g:0:2}/${g:2:2}/${g:0:8}-${g:8:4}-${g:12:4}-${g:16:4}-${g:20:12}
    [ "$(stat -c %i "$f")" = "$(stat -c %i "$h" 2>/dev/null)" ] || bad=$((bad + 1))
done
EXPECT 0 echo "$bad"
# GFIDs differ although they share folders
EXPECT 600 eval "for f in '$BRICK'/[abc]/f*; do gfid \"\$f\"; done | sort -u | grep -c '^[0-9a-f]\{32\}$'"

# after a remount nothing is cached on the client: opens resolve again
TEST umount_brickfs "$M"
TEST mount_brickfs "$(client_volfile b1)" "$M"
EXPECT 7 cat "$M/b/f007"
EXPECT 599 cat "$M/c/f599"
TEST rm "$M/a/f000" "$M/b/f001"
TEST [ ! -e "$BRICK/a/f000" ]

TEST umount_brickfs "$M"
done_testing
