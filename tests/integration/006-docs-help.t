#!/usr/bin/env bash
#
# 006-docs-help.t — the man pages (docs/man/*.md) cannot silently miss what
# the programs offer. For each program (brickfs-brick, brickfs-mount,
# brickfsd, brickfs, mount.brickfs, and any other in BUILD/bin but the
# bench tools) and its page docs/man/PROGRAM.8.md:
#   - `--help` exits 0 and prints something on standard output;
#   - an unknown flag exits non-zero with a message naming the flag on
#     standard error, and that exit status is listed under EXIT STATUS;
#   - every long option (--xyz) and short option (-x) that --help prints is
#     in the page, every environment variable it names is under ENVIRONMENT;
#   - brickfs-mount: every -o option of its --help is in the page;
#   - brickfs: every `volume COMMAND` is in the page and answers --help;
#   - the page has the classic sections, in order.
# And for the documentation as a whole: every relative link in docs/ points
# at a file that exists, and docs/README.md links every page in docs/.
#
# A new flag therefore fails this test until its man page documents it:
# that is the point. Add it to the page, don't weaken the test.
#
# tags: sanitizer

. "$(dirname "$0")/../lib/test.sh"

DOCS=$BFS_ROOT/docs
MAN=$DOCS/man
[ -d "$MAN" ] || SKIP_ALL "docs/man does not exist"

# section PAGE NAME: the text of "## NAME" up to the next "## " heading
section()
{
    awk -v s="## $2" '$0 == s { on = 1; next } /^## / { on = 0 } on' "$1"
}

# in_page PAGE WORD: WORD appears in PAGE as a whole word (so --log is not
# found inside --log-file)
in_page()
{
    grep -qE -- "(^|[^A-Za-z0-9_-])$(printf '%s' "$2" | sed 's/[.[\*^$]/\\&/g')([^A-Za-z0-9_-]|\$)" "$1"
}

# missing PAGE WORD...: prints the WORDs PAGE lacks
missing()
{
    local page=$1 w
    shift
    for w in "$@"; do in_page "$page" "$w" || echo "$w"; done
}

# long_opts / short_opts / env_vars FILE: what a --help text mentions
long_opts()
{
    grep -oE -- '(^|[^A-Za-z0-9_-])--[a-z][a-z0-9-]*' "$1" | sed 's/^[^-]*//' | sort -u
}
short_opts()
{
    grep -oE -- '(^|[][ ,(|])-[A-Za-z]([] ,)|]|$)' "$1" | grep -oE -- '-[A-Za-z]' | sort -u
}
env_vars()
{
    grep -oE '\$?\b(BRICKFS|BRICKFSD)_[A-Z_]+' "$1" | tr -d '$' | sort -u
}

# exit_codes PAGE: the codes listed under EXIT STATUS ("- `N`: ...")
exit_codes()
{
    section "$1" "EXIT STATUS" | sed -n 's/^- `\([0-9][0-9]*\)`.*/\1/p' | sort -u
}

# check_sections PAGE "A|B|...": the page has these "## " sections in this
# order (others may come between)
check_sections()
{
    local page=$1 want=() i=0 h
    IFS='|' read -r -a want <<<"$2"
    while IFS= read -r h; do
        [ $i -lt ${#want[@]} ] && [ "$h" = "${want[$i]}" ] && i=$((i + 1))
    done < <(sed -n 's/^## //p' "$page")
    [ $i = ${#want[@]} ] && return 0
    echo "$page: sections $(sed -n 's/^## //p' "$page" | tr '\n' '|')"
    echo "want, in this order: $2 (missing from: ${want[$i]})"
    return 1
}

SECTIONS8="NAME|SYNOPSIS|DESCRIPTION|OPTIONS|ENVIRONMENT|FILES|EXIT STATUS|EXAMPLES|SEE ALSO"
SECTIONS5="NAME|SYNOPSIS|DESCRIPTION|EXAMPLES|FILES|SEE ALSO"

# The programs: these five, and any other program the build puts in bin/
# (bench/NAME.c tools excepted), so a new program needs a page too.
progs=(brickfs-brick brickfs-mount brickfsd brickfs mount.brickfs)
for f in "$BFS_BIN"/*; do
    name=$(basename "$f")
    [ -f "$f" ] && [ -x "$f" ] || continue
    [ -e "$BFS_ROOT/bench/$name.c" ] && continue
    case " ${progs[*]} " in *" $name "*) continue ;; esac
    progs+=("$name")
done

for prog in "${progs[@]}"; do
    page=$MAN/$prog.8.md
    bin=$BFS_BIN/$prog
    TEST test -f "$page"
    [ -f "$page" ] || continue
    TEST check_sections "$page" "$SECTIONS8"
    EXPECT "# $prog(8)" head -n 1 "$page"
    if [ ! -x "$bin" ]; then
        SKIP "$bin is not built"
        continue
    fi
    help=$T/$prog.help
    TEST eval "timeout 10 '$bin' --help >'$help' </dev/null"
    TEST [ -s "$help" ]
    EXPECT "" missing "$page" $(long_opts "$help")
    EXPECT "" missing "$page" $(short_opts "$help")
    section "$page" ENVIRONMENT >"$T/$prog.env"
    EXPECT "" missing "$T/$prog.env" $(env_vars "$help")
    TEST eval "exit_codes '$page' | grep -qx 0"

    # an unknown flag: refused, with a message naming it, and a documented status
    rc=0
    timeout 10 "$bin" --no-such-flag-xyz </dev/null >"$T/$prog.out" 2>"$T/$prog.err" || rc=$?
    TEST [ "$rc" != 0 ]
    TEST [ "$rc" != 124 ]           # not a hang
    TEST grep -q -- "--no-such-flag-xyz" "$T/$prog.err"
    TEST eval "exit_codes '$page' | grep -qx '$rc'"
done

# ---- brickfs-mount: the -o options ----
if [ -x "$BFS_BIN/brickfs-mount" ] && [ -f "$MAN/brickfs-mount.8.md" ]; then
    # the lines "  name[=...]  text" of the "Options:" part of --help
    mopts=$(awk '/^Options:/ { on = 1; next } on && /^[^ ]/ { on = 0 } on' "$T/brickfs-mount.help" |
        sed -n 's/^  \([a-z_][a-z_-]*\)\(=\|\[\| \).*/\1/p' | sort -u)
    TEST [ -n "$mopts" ]
    EXPECT "" missing "$MAN/brickfs-mount.8.md" $mopts
    # and an unknown one is refused
    rc=0
    timeout 10 "$BFS_BIN/brickfs-mount" -o no-such-opt --volfile /dev/null "$T" \
        >/dev/null 2>"$T/mopt.err" || rc=$?
    EXPECT 2 echo "$rc"
    TEST grep -q "no-such-opt" "$T/mopt.err"
fi

# ---- brickfs: every volume command ----
if [ -x "$BFS_BIN/brickfs" ] && [ -f "$MAN/brickfs.8.md" ]; then
    TEST eval "timeout 10 '$BFS_BIN/brickfs' volume --help >'$T/volume.help'"
    cmds=$(sed -n 's/^  volume \([a-z][a-z-]*\).*/\1/p' "$T/volume.help" | sort -u)
    TEST [ -n "$cmds" ]
    missing_cmds()
    {
        local c
        for c in $cmds; do
            grep -qE -- "^- \`volume $c( |\`)" "$MAN/brickfs.8.md" || echo "volume $c"
        done
    }
    EXPECT "" missing_cmds
    for c in $cmds; do
        TEST eval "timeout 10 '$BFS_BIN/brickfs' volume $c --help | grep -q 'usage: brickfs volume $c'"
    done
    rc=0
    timeout 10 "$BFS_BIN/brickfs" volume no-such-command >/dev/null 2>"$T/vcmd.err" || rc=$?
    EXPECT 2 echo "$rc"
    TEST grep -q "no-such-command" "$T/vcmd.err"
fi

# ---- section 5 ----
TEST test -f "$MAN/brickfs-volfile.5.md"
TEST check_sections "$MAN/brickfs-volfile.5.md" "$SECTIONS5"

# ---- links and the index ----
# every relative link target in docs/**/*.md exists (anchors are not checked)
broken_links()
{
    local f t dir
    while IFS= read -r f; do
        dir=$(dirname "$f")
        grep -oE '\]\([^)#[:space:]]+' "$f" | sed 's/^](//' | while IFS= read -r t; do
            case $t in http:* | https:* | mailto:*) continue ;; esac
            [ -e "$dir/$t" ] || echo "${f#"$BFS_ROOT"/}: $t"
        done
    done < <(find "$DOCS" -name '*.md' | sort)
}
EXPECT "" broken_links

# docs/README.md links every page of docs/ (itself excepted)
unindexed()
{
    local f rel
    while IFS= read -r f; do
        rel=${f#"$DOCS"/}
        [ "$rel" = README.md ] && continue
        grep -qF "]($rel)" "$DOCS/README.md" || echo "$rel"
    done < <(find "$DOCS" -name '*.md' | sort)
}
TEST test -f "$DOCS/README.md"
EXPECT "" unindexed

done_testing
