#!/usr/bin/env bash
#
# bench/ec-codec.sh BUILD — the erasure codec's step of `make bench`:
# runs BUILD/bin/ec-codec (bench/ec-codec.c), which times the codec
# (src/ec) on one core against a minimal direct ISA-L loop over the same
# buffers for 4+2, 6+2 and 8+3, and prints its table (GB/s of file data,
# codec/direct ratio, target >= 0.9). Called by bench/run.sh; runs alone too.
#
# Environment:
#   BENCH_EC_CHUNKS [512,4096,65536]  fragment chunk sizes (bytes per brick per stripe)
#   BENCH_EC_ROUNDS [9]               rounds; the best of each side is shown
#   BENCH_RECORD=1                    append the table to docs/PERFORMANCE.md
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build}
BUILD=${BUILD%/}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
BIN=$BUILD/bin/ec-codec

[ -x "$BIN" ] || { echo "bench: $BIN is not built (make)" >&2; exit 1; }
echo "bench: erasure codec (ec-codec)"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
out=$("$BIN" -c "${BENCH_EC_CHUNKS:-512,4096,65536}" -r "${BENCH_EC_ROUNDS:-9}") ||
    { echo "bench: ec-codec failed" >&2; exit 1; }
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "$out"

if [ "${BENCH_RECORD:-0}" = 1 ]; then
    doc=$ROOT/docs/PERFORMANCE.md
    commit=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "no commit")
    cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
    simd=$(grep -o -w 'avx2\|avx512f\|avx512bw\|gfni' /proc/cpuinfo | sort -u | tr '\n' ' ')
    {
        echo
        echo "### $(date -u '+%Y-%m-%d %H:%M UTC') — $commit — erasure codec"
        echo
        echo "Machine: $(nproc) CPUs ($cpu; ${simd% }), kernel $(uname -r); load average $load_before before, $load_after after."
        echo "$out" | sed -n '1s/^ec-codec: /Run: /p'
        echo
        echo "$out" | grep '^|'
        echo
        echo "$out" | tail -n 1 | sed 's/^ec-codec: /Result: /'
    } >>"$doc"
    echo "bench: recorded in docs/PERFORMANCE.md"
fi
