#!/usr/bin/env bash
#
# 007-bench-report.t — bench/report.py, which turns `make bench`'s raw
# figures into the tables and the PASS/FAIL verdicts against the issues'
# targets, gets those verdicts right: the ratio is brickfs over the right
# basis (passthrough, GlusterFS or the disk), the median of the rounds'
# ratios, compared with the issue's threshold; a missing or failed side
# gives n/a, never PASS. (The bench itself is not run by `make test`; this
# checks only its arithmetic, on made-up figures.)

. "$(dirname "$0")/../lib/test.sh"

command -v python3 >/dev/null || SKIP_ALL "python3 is missing"
REPORT=$BFS_ROOT/bench/report.py

# section target metric round value
printf '%s\n' \
    "1brick	passthrough	seq_write	1	100" "1brick	brickfs	seq_write	1	80" \
    "1brick	passthrough	seq_write	2	100" "1brick	brickfs	seq_write	2	60" \
    "1brick	passthrough	seq_write	3	100" "1brick	brickfs	seq_write	3	90" \
    "1brick	passthrough	create	1	1000" "1brick	brickfs	create	1	400" \
    "1brick	passthrough	stat	1	1000" "1brick	brickfs	stat	1	error" \
    "dist3	gluster	create	1	100" "dist3	brickfs	create	1	500" \
    "dist3	gluster	mkdir	1	100" "dist3	brickfs	mkdir	1	299" \
    "dist3	disk	seq_write	1	1000" "dist3	brickfs	seq_write	1	850" \
    "rep3	disk	seq_write	1	900" "rep3	brickfs	seq_write	1	269" \
    "rep3	gluster	heal_files	1	20" \
    >"$T/res.tsv"
printf '1brick\tsome note\n' >"$T/notes.tsv"
printf '1brick\t3\ndist3\t1\nrep3\t1\n' >"$T/runs.tsv"

run_report()
{
    python3 "$REPORT" --results "$T/res.tsv" --notes "$T/notes.tsv" --runs "$T/runs.tsv" \
        --json "$T/out.json" --record "$T/out.md" --meta seq_mb=1 >"$T/out.txt"
}
TEST run_report

# verdict SECTION METRIC BASIS: "VERDICT RATIO" from the JSON
verdict()
{
    python3 - "$T/out.json" "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for s in d["sections"]:
    if s["section"] != sys.argv[2]:
        continue
    for g in s["targets"]:
        if g["metric"] == sys.argv[3] and g["basis"] == sys.argv[4]:
            r = g["ratio"]
            print(g["verdict"], "n/a" if r is None else "%.3f" % r)
PY
}

# median of 0.8, 0.6, 0.9 is 0.8 >= 0.70
EXPECT "PASS 0.800" verdict 1brick seq_write passthrough
EXPECT "FAIL 0.400" verdict 1brick create passthrough
# a failed brickfs figure: n/a, not FAIL or PASS
EXPECT "n/a n/a" verdict 1brick stat passthrough
# nothing measured at all
EXPECT "n/a n/a" verdict 1brick read passthrough
# 5x GlusterFS exactly is enough; 2.99x is not 3x
EXPECT "PASS 5.000" verdict dist3 create gluster
EXPECT "FAIL 2.990" verdict dist3 mkdir gluster
EXPECT "PASS 0.850" verdict dist3 seq_write disk
# replica 3: 90% of the disk / 3 is 0.30; 269/900 = 0.299
EXPECT "FAIL 0.299" verdict rep3 seq_write disk
# the figure table keeps the median and the GlusterFS-only heal figure
EXPECT "20.0" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["metric"]: r for s in d["sections"] if s["section"] == "rep3" for r in s["figures"]}
print("%.1f" % rows["heal_files"]["gluster"])' "$T/out.json"
EXPECT "bench: targets: 3 PASS, 3 FAIL, 15 n/a" grep "^bench: targets:" "$T/out.txt"
TEST grep -q '^Note: some note$' "$T/out.md"
TEST grep -q '| #4 | mkdir (dirs/s) | 2.99 | >= 3x GlusterFS | FAIL |' "$T/out.md"

done_testing
