#!/usr/bin/env bash
#
# 005-docs-options.t — the option reference cannot drift from the code:
#   - `brickfs-brick --list-options` (text, --json, --markdown) lists every
#     translator .so of the build's translator folder, each loadable, with
#     every option its descriptor table declares;
#   - every option has a description, a known type, a default that its own
#     type accepts where one is given, and a range with min <= max;
#   - docs/options.md is exactly what scripts/gen-option-docs.sh writes now
#     (regenerated into $T and compared): a descriptor changed without
#     regenerating the reference fails here, with the diff.
# Fix a failure of the last kind with `scripts/gen-option-docs.sh` and commit
# docs/options.md with the descriptor change.
#
# tags: sanitizer

. "$(dirname "$0")/../lib/test.sh"

[ -x "$BRICK_BIN" ] || SKIP_ALL "$BRICK_BIN is not built"
command -v python3 >/dev/null || SKIP_ALL "python3 is missing"
XLDIR=$BFS_BUILD/lib/brickfs/xlators
[ -d "$XLDIR" ] || SKIP_ALL "$XLDIR does not exist"
export BRICKFS_XLATOR_DIR=$XLDIR

# ---- the listing runs, in every format ----
TEST eval "'$BRICK_BIN' --list-options >'$T/list.txt' 2>'$T/list.err'"
TEST eval "'$BRICK_BIN' --list-options --json >'$T/list.json'"
TEST eval "'$BRICK_BIN' --list-options --markdown >'$T/list.md'"
# nothing is left out with a warning (a .so that is not a translator)
EXPECT "" cat "$T/list.err"
# --json / --markdown alone are usage errors
TEST ! "$BRICK_BIN" --json
EXPECT 2 eval "'$BRICK_BIN' --markdown >/dev/null 2>&1; echo \$?"

# ---- every translator .so is listed ----
# (cd + find, so the names are CLASS/NAME exactly as volfiles spell them)
EXPECT "$(cd "$XLDIR" && find -L . -mindepth 2 -maxdepth 2 -name '*.so' | sed 's|^\./||; s|\.so$||' | sort)" \
    python3 -c 'import json, sys
for x in json.load(open(sys.argv[1]))["translators"]: print(x["translator"])' "$T/list.json"

# ---- each option is complete and consistent ----
cat >"$T/check.py" <<'EOF'
import json, re, sys
types = {"string", "integer", "size", "bool", "enum", "path", "time", "percent",
         "address-list"}
bad = []
n = 0
for x in json.load(open(sys.argv[1]))["translators"]:
    keys = set()
    for o in x["options"]:
        n += 1
        where = "%s: %s" % (x["translator"], o["key"])
        if not o["description"].strip():
            bad.append(where + ": empty description")
        if o["type"] not in types:
            bad.append(where + ": unknown type " + o["type"])
        if o["key"] in keys:
            bad.append(where + ": declared twice")
        keys.add(o["key"])
        if "min" in o and o["min"] > o["max"]:
            bad.append(where + ": min %d > max %d" % (o["min"], o["max"]))
        if o["type"] == "enum" and not o.get("values"):
            bad.append(where + ": enum without values")
        d = o["default"]
        if d is None:
            continue
        if o["type"] in ("integer", "time"):
            if not re.fullmatch(r"[-+]?\d+", d):
                bad.append(where + ": default %r is not an integer" % d)
            elif "min" in o and not o["min"] <= int(d) <= o["max"]:
                bad.append(where + ": default %s outside %d..%d" % (d, o["min"], o["max"]))
        if o["type"] == "enum" and d not in o.get("values", []):
            bad.append(where + ": default %r is not one of its values" % d)
        if o["type"] == "bool" and d.lower() not in (
                "on", "off", "yes", "no", "true", "false", "enable", "disable", "1", "0"):
            bad.append(where + ": default %r is not a boolean" % d)
        if o["type"] == "path" and not d.startswith("/"):
            bad.append(where + ": default %r is not an absolute path" % d)
print("\n".join(bad) if bad else "%d options ok" % n)
sys.exit(1 if bad else 0)
EOF
TEST python3 "$T/check.py" "$T/list.json"

# the text form names every option of the JSON form (one listing, three formats)
TEST eval "python3 -c 'import json, sys
for x in json.load(open(sys.argv[1]))[\"translators\"]:
    for o in x[\"options\"]: print(o[\"key\"])' '$T/list.json' >'$T/keys'"
TEST [ -s "$T/keys" ]
missing_keys()
{
    local k
    while read -r k; do
        grep -qE "^  $k( |\$)" "$T/list.txt" || echo "text listing lacks $k"
        grep -qF "| \`$k\` |" "$T/list.md" || echo "markdown listing lacks $k"
    done <"$T/keys"
}
EXPECT "" missing_keys

# ---- docs/options.md is current ----
TEST bash "$BFS_ROOT/scripts/gen-option-docs.sh" "$BFS_BUILD" "$T/options.md"
TEST cmp -s "$T/options.md" "$T/list.md"
TEST diff -u "$BFS_ROOT/docs/options.md" "$T/options.md"
cmp -s "$BFS_ROOT/docs/options.md" "$T/options.md" ||
    echo "# docs/options.md is stale: run scripts/gen-option-docs.sh and commit it"
# and the script refuses to write anything from a broken translator folder
mkdir -p "$T/badxl/bad"
echo "not an ELF file" >"$T/badxl/bad/broken.so"
mkdir -p "$T/badbuild/lib/brickfs" "$T/badbuild/bin"
ln -s "$T/badxl" "$T/badbuild/lib/brickfs/xlators"
ln -s "$BRICK_BIN" "$T/badbuild/bin/brickfs-brick"
echo keep >"$T/out.md"
TEST ! bash "$BFS_ROOT/scripts/gen-option-docs.sh" "$T/badbuild" "$T/out.md"
EXPECT keep cat "$T/out.md"
EXPECT "" eval "ls '$T' | grep '^out\.md\.' || true"

done_testing
