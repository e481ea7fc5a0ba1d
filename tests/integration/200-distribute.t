#!/usr/bin/env bash
#
# 200-distribute.t — distribute volumes of 3 and of 6 bricks made by
# brickfsd, mounted over TCP on 127.0.0.1 (docs/design/distribute.md):
#   - 3,000 files in one directory, and 30 directories x the same 100
#     names, spread with every brick within +-25% of the mean (counted on
#     the bricks: data files only, no link files, no .brickfs);
#   - every name listed exactly once, every file reads back its content;
#   - every file where the hash says or behind a correct link file, every
#     directory on every brick with one GFID, no orphan link files
#     (tests/lib/dht-check.py audit recomputes the hash and the table);
#   - renames of files (within and across directories, onto an existing
#     name) and of directories keep content, inode number and brick GFID;
#   - mkdir, mkdir -p, rmdir seen on every brick.
# The brick-down cases are in 201-distribute-brick-down.t, two clients in
# 202-distribute-clients.t.

# Brick lists and name lists are split into words on purpose (no spaces in $T).
# shellcheck disable=SC2046
. "$(dirname "$0")/../lib/test.sh"
. "$(dirname "$0")/../lib/mgmt.sh"
. "$(dirname "$0")/../lib/dht.sh"

skip_unless_mgmt
skip_unless_brickfs

TEST start_brickfsd

# dht_listing_prefix DIR P: "COUNT DUPLICATES" of the names starting with P.
dht_listing_prefix()
{
    local all
    all=$(ls -A "$1") && all=$(grep "^$2" <<<"$all") || return 1
    echo "$(grep -c . <<<"$all") $(sort <<<"$all" | uniq -d | grep -c .)"
}

# rename_keeps VOL MNT FROM TO: mv FROM TO on the mount keeps the content,
# the inode number on the mount and the GFID of the data file on its brick.
rename_keeps()
{
    local vol=$1 m=$2 from=$3 to=$4 sum ino bi gfid
    sum=$(md5sum <"$m/$from") && ino=$(stat -c %i "$m/$from") &&
        bi=$(dht_data_brick "$vol" "$from") &&
        gfid=$(dht_gfid "$T/bricks/$vol/b$bi/$from") || return 1
    mv "$m/$from" "$m/$to" || return 1
    [ ! -e "$m/$from" ] || { echo "$from still there"; return 1; }
    [ "$(md5sum <"$m/$to")" = "$sum" ] || { echo "content of $to changed"; return 1; }
    [ "$(stat -c %i "$m/$to")" = "$ino" ] || { echo "inode of $to changed"; return 1; }
    bi=$(dht_data_brick "$vol" "$to") || { echo "no single data file for $to"; return 1; }
    [ "$(dht_gfid "$T/bricks/$vol/b$bi/$to")" = "$gfid" ] || { echo "GFID of $to changed"; return 1; }
}

# cross_renames VOL MNT N: renames flat/f<i> to flat/r<i> for i < N with
# rename_keeps; prints how many of them moved the name to another brick
# than the one holding the data.
cross_renames()
{
    local vol=$1 m=$2 n=$3 nb i cross=0 src dst
    nb=$(dht_bricks "$vol" | wc -l)
    for ((i = 0; i < n; i++)); do
        src=$(dht_data_brick "$vol" "flat/f$i") || return 1
        dst=$(dht_check hashed "$nb" "$T/bricks/$vol/b0" flat "r$i")
        rename_keeps "$vol" "$m" "flat/f$i" "flat/r$i" >&2 || return 1
        [ "$src" != "$dst" ] && cross=$((cross + 1))
    done
    [ "$cross" -gt 0 ] && echo "$cross"
}

for n in 3 6; do
    v=v$n
    m=$T/m$n
    TEST dht_volume "$v" "$n"
    EXPECT "$n" eval "dht_bricks $v | wc -l"
    TEST mount_vol "$v" "$m"
    EXPECT "$(printf '1 %.0s' $(seq "$n") | sed 's/ $//')" dht_online "$v"

    # ---- 3,000 files in one directory ----
    TEST mkdir "$m/flat"
    TEST dht_check populate "$m/flat" 0 3000
    EXPECT ok dht_check spread 25 $(dht_bricks "$v" | sed 's|$|/flat|')
    EXPECT 3000 sum_of $(dht_check counts $(dht_bricks "$v" | sed 's|$|/flat|'))
    EXPECT "3000 0" dht_listing "$m/flat"
    EXPECT 3000 eval "ls -l '$m/flat' | grep -c '^-'"     # readdirplus + stat of every name
    TEST dht_check verify "$m/flat" 0 3000

    # ---- 30 directories x the same 100 names ----
    TEST mkdir "$m/same"
    TEST dht_check populate "$m/same" 30 100
    EXPECT ok dht_check spread 25 $(dht_bricks "$v" | sed 's|$|/same|')
    EXPECT "30 0" dht_listing "$m/same"
    EXPECT "100 0" dht_listing "$m/same/d0"
    EXPECT "100 0" dht_listing "$m/same/d29"
    EXPECT 3000 eval "find '$m/same' -type f | wc -l"
    EXPECT 0 eval "find '$m/same' -type f | sort | uniq -d | wc -l"
    TEST dht_check verify "$m/same" 30 100
    EXPECT "$n" dht_dir_on_bricks "$v" same/d17
    EXPECT ok dht_check audit "$v" $(dht_bricks "$v")

    # ---- renames keep content, inode and GFID ----
    cross=0
    TEST eval 'cross=$(cross_renames "$v" "$m" 40)'
    TEST [ "${cross:-0}" -gt 0 ]                           # some moved between bricks
    EXPECT "2960 0" dht_listing_prefix "$m/flat" f
    EXPECT "40 0" dht_listing_prefix "$m/flat" r
    # across directories, and onto an existing name (which it replaces)
    TEST rename_keeps "$v" "$m" same/d0/f5 same/d1/moved5
    TEST rename_keeps "$v" "$m" flat/f100 flat/f101
    EXPECT "f100" cat "$m/flat/f101"
    EXPECT "2959 0" dht_listing_prefix "$m/flat" f
    # a renamed file renamed again, back to its first name
    TEST rename_keeps "$v" "$m" flat/r3 flat/f3
    EXPECT "f3" cat "$m/flat/f3"
    EXPECT "2999 0" dht_listing "$m/flat"
    # a directory with files: every brick sees the new name only
    TEST mv "$m/same/d29" "$m/same/e29"
    EXPECT "$n" dht_dir_on_bricks "$v" same/e29
    EXPECT 0 dht_dir_on_bricks "$v" same/d29
    EXPECT "100 0" dht_listing "$m/same/e29"
    EXPECT "d29/f42" cat "$m/same/e29/f42"
    EXPECT ok dht_check audit "$v" $(dht_bricks "$v")

    # ---- directory operations on every brick ----
    TEST mkdir "$m/newdir"
    EXPECT "$n" dht_dir_on_bricks "$v" newdir
    TEST mkdir -p "$m/a/b/c/d"
    EXPECT "$n" dht_dir_on_bricks "$v" a/b/c/d
    TEST eval "echo deep >'$m/a/b/c/d/file'"
    EXPECT deep cat "$m/a/b/c/d/file"
    TEST ! rmdir "$m/a/b/c/d"                              # not empty
    EXPECT "$n" dht_dir_on_bricks "$v" a/b/c/d
    TEST rm "$m/a/b/c/d/file"
    TEST rmdir "$m/a/b/c/d" "$m/a/b/c" "$m/a/b" "$m/a" "$m/newdir"
    EXPECT 0 dht_dir_on_bricks "$v" a
    EXPECT 0 dht_dir_on_bricks "$v" newdir
    TEST ! stat "$m/newdir"
    for i in 0 1 2 3 4 5 6 7 8 9; do mkdir "$m/md$i" || break; done
    EXPECT "$((10 * n))" eval "for i in 0 1 2 3 4 5 6 7 8 9; do dht_dir_on_bricks $v md\$i; done | awk '{ s += \$1 } END { print s }'"
    TEST rmdir "$m"/md?
    EXPECT 0 eval "for i in 0 1 2 3 4 5 6 7 8 9; do dht_dir_on_bricks $v md\$i; done | awk '{ s += \$1 } END { print s }'"
    # removing every file of a directory leaves no trace on any brick
    TEST rm -r "$m/same/d1"
    EXPECT 0 dht_dir_on_bricks "$v" same/d1
    EXPECT "29 0" dht_listing "$m/same"
    EXPECT ok dht_check audit "$v" $(dht_bricks "$v")

    TEST umount_fuse "$m"
done

done_testing
