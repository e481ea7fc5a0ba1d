#!/usr/bin/env bash
#
# tests/fuzz/run.sh BUILD SECONDS — builds every libFuzzer target
# (tests/fuzz/NAME.c -> BUILD/fuzz/NAME, via `make fuzz-build`) and runs each
# for SECONDS seconds, one after the other. A crash, a sanitizer report
# (ASan, and UBSan made fatal here), a 10 s hang on one input or more than
# 2 GiB of memory fails the target; its reproducer is kept in
# BUILD/fuzz/artifacts/ and the end of its log is printed.
#
# Seeds: tests/fuzz/corpus/NAME/ when present (read, never written); what a
# run learns goes to BUILD/fuzz/corpus/NAME/, kept between runs. A
# dictionary tests/fuzz/NAME.dict is used when present.
#
# Last line: "fuzz: N passed, N failed". Exits non-zero if a target failed.

set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1

if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD SECONDS" >&2
    exit 2
fi
BUILD=${1%/}
SECONDS_EACH=$2

srcs=(tests/fuzz/*.c)
if [ ! -e "${srcs[0]}" ]; then
    echo "fuzz: no targets yet (tests/fuzz/*.c)"
    echo "fuzz: 0 passed, 0 failed"
    exit 0
fi

# A make above us (make fuzz-smoke, make test) passes its jobserver in
# MAKEFLAGS without the descriptors; start clean instead of warning.
echo "fuzz: building targets"
if ! env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make --no-print-directory -j2 BUILD="$BUILD" fuzz-build; then
    echo "fuzz: build failed"
    echo "fuzz: 0 passed, ${#srcs[@]} failed"
    exit 1
fi

mkdir -p "$BUILD/fuzz/artifacts" "$BUILD/fuzz/logs"
# UBSan only prints unless told to stop; a report must count as a crash.
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"

passed=0
failed=0
for src in "${srcs[@]}"; do
    name=$(basename "$src" .c)
    bin=$BUILD/fuzz/$name
    log=$BUILD/fuzz/logs/$name.log
    work=$BUILD/fuzz/corpus/$name
    mkdir -p "$work"
    args=(-max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
          -artifact_prefix="$BUILD/fuzz/artifacts/$name-")
    [ -f "tests/fuzz/$name.dict" ] && args+=(-dict="tests/fuzz/$name.dict")
    dirs=("$work")
    [ -d "tests/fuzz/corpus/$name" ] && dirs+=("tests/fuzz/corpus/$name")

    "$bin" "${args[@]}" "${dirs[@]}" >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1))
        echo "fuzz: $name ok (${runs:-?} runs in ${SECONDS_EACH}s, corpus $(find "$work" -type f | wc -l) inputs)"
    else
        failed=$((failed + 1))
        echo "fuzz: $name FAILED (exit $rc); last lines of $log:"
        tail -n 40 "$log" | sed 's/^/    /'
        art=$(grep -o "Test unit written to [^ ]*" "$log" | tail -n 1)
        [ -n "$art" ] && echo "fuzz: $name: reproduce with $bin ${art#Test unit written to }"
    fi
done

echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
