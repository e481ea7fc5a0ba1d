#!/usr/bin/env bash
#
# tests/run-all.sh BUILD [PART...] — runs brickfs's tests against the build
# folder BUILD (build or build-san) and ends with the line
# "N passed, N failed", where N counts test programs: unit and graph test
# binaries, fuzz targets, integration .t files.
#
# PARTs, in the order they run (default: unit graph fuzz-smoke integration
# sanitizer; without sanitizer when BUILD is itself a sanitizer build or
# BFS_TEST_SANITIZER=0):
#   unit                   BUILD/tests/unit/*       (prove, compiled TAP)
#   graph                  BUILD/tests/graph/*      (prove, compiled TAP)
#   fuzz-smoke             tests/fuzz/run.sh BUILD 10: each libFuzzer target 10 s
#   integration            tests/integration/*.t    (prove -v, bash)
#   sanitizer-integration  the .t files with a "# tags: ... sanitizer" line,
#                          run against BUILD with BFS_SAN=1 (timeouts x3,
#                          sanitizer reports fail the test)
#   sanitizer              builds build-san (make SAN=1 all; BFS_SAN_BUILD
#                          names another folder) and runs unit, graph and
#                          sanitizer-integration against it, in a run of its
#                          own whose counts join this summary
#
# Sanitizer runs (BUILD ends in -san, or SAN=1): every program gets
# ASAN_OPTIONS, LSAN_OPTIONS and UBSAN_OPTIONS with detect_leaks=1,
# halt_on_error=1 and log_path into a folder of the run, since a daemon's
# stderr is seen by no one: for unit and graph binaries BUILD/test-logs/san-PART/
# (a report there fails the part even if the program exited 0, for example
# from a forked child), for integration tests each test's $T/san/ (checked
# by done_testing, tests/lib/test.sh).
#
# Every test program runs under `timeout`: BFS_UNIT_TIMEOUT (default 120 s)
# for unit and graph binaries, BFS_TEST_TIMEOUT (default 300 s, x3 with
# sanitizers) for each .t. Logs of each part: BUILD/test-logs/PART.log.
# Exits 0 only if nothing failed.

set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1

if [ $# -lt 1 ]; then
    echo "usage: $0 BUILD [unit|graph|fuzz-smoke|integration|sanitizer-integration|sanitizer]..." >&2
    exit 2
fi
BUILD=${1%/}
shift
case $BUILD in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$ROOT/$BUILD ;; esac
PARTS=("$@")

SAN=${SAN:-0}
case $BUILD in *-san) SAN=1 ;; esac
if [ ${#PARTS[@]} -eq 0 ]; then
    PARTS=(unit graph fuzz-smoke integration)
    [ "$SAN" = 0 ] && [ "${BFS_TEST_SANITIZER:-1}" != 0 ] && PARTS+=(sanitizer)
fi
SCALE=1
[ "$SAN" = 1 ] && SCALE=3
UNIT_TIMEOUT=${BFS_UNIT_TIMEOUT:-$((120 * SCALE))}
TEST_TIMEOUT=${BFS_TEST_TIMEOUT:-$((300 * SCALE))}
LOGDIR=$BUILD/test-logs
mkdir -p "$LOGDIR"

PASSED=0
FAILED=0
SUMMARY=()

say()
{
    printf '\n==== %s\n' "$*"
}

# tally PART PASSED FAILED [NOTE]
tally()
{
    PASSED=$((PASSED + $2))
    FAILED=$((FAILED + $3))
    SUMMARY+=("$(printf '%-22s %4d passed, %4d failed%s' "$1" "$2" "$3" "${4:+  ($4)}")")
}

skip_part()
{
    echo "$1: $2 — skipped"
    SUMMARY+=("$(printf '%-22s skipped: %s' "$1" "$2")")
}

# run_prove PART PROVE-ARGS... -- FILES...: runs prove, shows its output,
# and counts test programs from its summary: every file named in the "Test
# Summary Report" failed (bad exit, failed tests, bad plan, timeout).
run_prove()
{
    local part=$1 log=$LOGDIR/$1.log
    shift
    local args=() files=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
    shift
    files=("$@")
    prove "${args[@]}" "${files[@]}" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]} total failed note=
    total=$(sed -n 's/^Files=\([0-9]*\),.*/\1/p' "$log" | tail -n 1)
    failed=$(grep -cE '\(Wstat: [0-9]+.*Tests: [0-9]+ Failed: [0-9]+\)$' "$log")
    if [ -z "$total" ]; then
        # prove itself failed before running anything
        total=${#files[@]}
        failed=$total
        note="prove exited $rc without a summary"
    elif [ "$rc" != 0 ] && [ "$failed" = 0 ]; then
        failed=1
        note="prove exited $rc"
    fi
    if grep -qE '\(Wstat: [0-9]+ \(exited 124\)' "$log"; then
        note="${note:+$note; }exit 124 means killed by the per-test timeout"
    fi
    tally "$part" $((total - failed)) "$failed" "$note"
}

# compiled TAP tests: one binary per tests/PART/*.c
run_binaries()
{
    local part=$1 src bin missing=0 bins=()
    say "$part tests ($BUILD/tests/$part)"
    local srcs=(tests/"$part"/*.c)
    if [ ! -e "${srcs[0]}" ]; then
        skip_part "$part" "no tests/$part/*.c yet"
        return
    fi
    for src in "${srcs[@]}"; do
        bin=$BUILD/tests/$part/$(basename "$src" .c)
        if [ -x "$bin" ]; then
            bins+=("$bin")
        else
            echo "$part: $src has no binary $bin (did make build it?)"
            missing=$((missing + 1))
        fi
    done
    [ $missing -gt 0 ] && tally "$part (not built)" 0 "$missing"
    [ ${#bins[@]} -gt 0 ] || return
    if [ "$SAN" != 1 ]; then
        run_prove "$part" -f -o -e "timeout -k 10 $UNIT_TIMEOUT" -- "${bins[@]}"
        return
    fi
    local d=$LOGDIR/san-$part
    rm -rf "$d"
    mkdir -p "$d"
    # prefix assignments on a function call reach the programs it runs
    BFS_SAN=1 ASAN_OPTIONS=$(san_opts asan "$d") LSAN_OPTIONS=$(san_opts lsan "$d") \
        UBSAN_OPTIONS=$(san_opts ubsan "$d") \
        run_prove "$part" -f -o -e "timeout -k 10 $UNIT_TIMEOUT" -- "${bins[@]}"
    san_check "$part" "$d"
}

# san_opts asan|lsan|ubsan DIR: the sanitizer options of a unit or graph
# run: the first error ends the program, leaks are checked at exit, reports
# go to DIR/KIND.PROGRAM.PID (ASan and LSan share one log_path in the end:
# LSAN_OPTIONS is read last), whatever the caller's options were.
san_opts()
{
    local d=$2
    case $1 in
    asan) echo "detect_leaks=1:halt_on_error=1:log_exe_name=1:${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$d/asan" ;;
    lsan) echo "${LSAN_OPTIONS:+$LSAN_OPTIONS:}log_path=$d/lsan" ;;
    ubsan) echo "halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$d/ubsan" ;;
    esac
}

# san_check PART DIR: shows the sanitizer reports in DIR, and counts one
# more failure for PART if there is any: a report the programs' exit
# statuses did not show (a forked child, a leak in a test that exits 0
# through a path without the leak check) is still a failure.
san_check()
{
    local part=$1 dir=$2 f files=() who
    for f in "$dir"/*; do
        [ -s "$f" ] && files+=("$f")
    done
    [ ${#files[@]} -eq 0 ] && return 0
    echo "$part: ${#files[@]} sanitizer report(s) in $dir:"
    for f in "${files[@]}"; do
        echo "=== $f"
        head -n 80 "$f"
    done
    who=$(for f in "${files[@]}"; do f=${f##*/}; f=${f#*.}; echo "${f%.*}"; done | sort -u | tr '\n' ' ')
    tally "$part (sanitizer)" 0 1 "reports from ${who% }"
}

run_fuzz_smoke()
{
    say "fuzz smoke (10 s per target)"
    local srcs=(tests/fuzz/*.c)
    if [ ! -e "${srcs[0]}" ]; then
        skip_part fuzz-smoke "no tests/fuzz/*.c yet"
        return
    fi
    local log=$LOGDIR/fuzz-smoke.log
    bash tests/fuzz/run.sh "$BUILD" 10 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]} line p f
    line=$(grep -E '^fuzz: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        tally fuzz-smoke 0 1 "tests/fuzz/run.sh exited $rc without a summary"
        return
    fi
    read -r _ p _ f _ <<<"$line"
    [ "$rc" != 0 ] && [ "$f" = 0 ] && f=1
    tally fuzz-smoke "$p" "$f"
}

run_integration()
{
    local part=$1 files=() f san=$SAN limit=$TEST_TIMEOUT
    if [ "$part" = sanitizer-integration ]; then
        san=1
        limit=${BFS_TEST_TIMEOUT:-900}
    fi
    say "$part tests (tests/integration, $BUILD, ${limit}s per test)"
    for f in tests/integration/*.t; do
        [ -e "$f" ] || continue
        if [ "$part" = sanitizer-integration ]; then
            grep -qE '^# tags:.*\bsanitizer\b' "$f" || continue
        fi
        files+=("$f")
    done
    if [ ${#files[@]} -eq 0 ]; then
        if [ "$part" = sanitizer-integration ]; then
            skip_part "$part" "no tests/integration/*.t tagged '# tags: sanitizer' yet"
        else
            skip_part "$part" "no tests/integration/*.t yet"
        fi
        return
    fi
    BFS_BUILD=$BUILD_ABS BFS_SAN=$san \
        run_prove "$part" -v -e "timeout -k 10 $limit bash" -- "${files[@]}"
}

# The sanitizer part: builds the sanitizer tree and runs unit, graph and
# sanitizer-integration against it through a run of this script of its own;
# that run's counts join ours and its summary lines show under ours.
run_sanitizer()
{
    local sb=${BFS_SAN_BUILD:-build-san} log t0=$SECONDS
    say "sanitizer build (make SAN=1 all into $sb)"
    mkdir -p "$sb"
    log=$sb/build.log
    # Like tests/fuzz/run.sh: a make above us passes a jobserver we cannot
    # use, so start clean (WERROR, if set, comes through the environment).
    if ! env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS \
        make --no-print-directory -j2 SAN=1 BUILD="$sb" all >"$log" 2>&1; then
        echo "sanitizer build FAILED; compiler and make messages follow (command lines left out):"
        grep -vE '^(cc|gcc|clang|install|mkdir|rm|python3?) ' "$log" | tail -n 100
        tally sanitizer 0 1 "make SAN=1 all failed, see $log"
        return
    fi
    echo "sanitizer build ok in $((SECONDS - t0)) s ($log)"
    SUMMARY+=("$sb: built in $((SECONDS - t0)) s")
    local out=$LOGDIR/sanitizer.log line rc
    SAN=1 bash "$ROOT/tests/run-all.sh" "$sb" unit graph sanitizer-integration 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    line=$(tail -n 1 "$out")
    if ! [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        tally sanitizer 0 1 "the run on $sb exited $rc without a summary"
        return
    fi
    local p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]}
    [ "$rc" != 0 ] && [ "$f" = 0 ] && f=1
    PASSED=$((PASSED + p))
    FAILED=$((FAILED + f))
    while IFS= read -r line; do
        SUMMARY+=("$sb: ${line#  }")
    done < <(sed -n '/^==== summary/,$p' "$out" | sed '1d;$d')
}

TIMES=()
for part in "${PARTS[@]}"; do
    t0=$SECONDS
    case $part in
    unit | graph) run_binaries "$part" ;;
    fuzz-smoke) run_fuzz_smoke ;;
    integration | sanitizer-integration) run_integration "$part" ;;
    sanitizer) run_sanitizer ;;
    *)
        echo "run-all: unknown part '$part'" >&2
        tally "$part" 0 1 "unknown part"
        ;;
    esac
    TIMES+=("$part $((SECONDS - t0)) s")
done

say "summary ($BUILD)"
for line in "${SUMMARY[@]}"; do
    echo "  $line"
done
(IFS=,; echo "  time: ${TIMES[*]}" | sed 's/,/, /g')
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
