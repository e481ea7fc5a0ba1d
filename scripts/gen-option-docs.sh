#!/usr/bin/env bash
#
# scripts/gen-option-docs.sh [BUILD [OUT]] — writes the translator option
# reference OUT (default docs/options.md) from the option descriptors of the
# translators built in BUILD (default build): it is
# `BUILD/bin/brickfs-brick --list-options --markdown`, run against
# BUILD/lib/brickfs/xlators, written atomically.
#
# Run it after changing any translator's options[] table and commit the
# result; tests/integration/005-docs-options.t fails while docs/options.md
# differs from what this prints. Exits non-zero (and leaves OUT alone) when a
# translator cannot be loaded, so a broken build never produces a reference
# with a translator missing.

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build}
OUT=${2:-docs/options.md}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
case $OUT in /*) ;; *) OUT=$ROOT/$OUT ;; esac

BRICK=$BUILD/bin/brickfs-brick
XLDIR=$BUILD/lib/brickfs/xlators
if [ ! -x "$BRICK" ] || [ ! -d "$XLDIR" ]; then
    echo "gen-option-docs: $BRICK or $XLDIR is missing; run make first" >&2
    exit 1
fi

tmp=$(mktemp "$OUT.XXXXXX")
trap 'rm -f "$tmp"' EXIT
if ! BRICKFS_XLATOR_DIR=$XLDIR "$BRICK" --list-options --markdown >"$tmp"; then
    echo "gen-option-docs: brickfs-brick --list-options failed; $OUT left as it was" >&2
    exit 1
fi
chmod 644 "$tmp"
mv "$tmp" "$OUT"
trap - EXIT
echo "gen-option-docs: wrote ${OUT#"$ROOT"/}"
