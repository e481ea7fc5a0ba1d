#!/usr/bin/env python3
"""bench/report.py — the tables, verdicts and JSON of `make bench`.

bench/run.sh measures and writes one line per figure,
"SECTION TARGET METRIC ROUND VALUE" (tab separated; VALUE a number or
"error"), plus notes and the number of rounds per section; this program
turns them into, per section:

  - a table of figures: the median over the rounds for each target, and the
    ratio brickfs/GlusterFS (informational where the issue sets no target);
  - a table of the issues' targets: each target's ratio (the median of the
    rounds' ratios, each of figures taken seconds apart), the threshold and
    PASS, FAIL or n/a (a side missing or failed);

prints them, writes everything as JSON (--json) and, with --record FILE,
appends them as Markdown with the date and machine (docs/PERFORMANCE.md).
"""
import argparse
import json
import statistics
import sys

SECTIONS = {
    "1brick": "one brick",
    "dist3": "3-brick distribute",
    "rep3": "replica 3",
    "disp": "disperse 6 redundancy 2",
}
TARGETS = ["disk", "passthrough", "brickfs", "gluster"]

METRICS = [  # key, label, unit
    ("seq_write", "seq write", "MB/s"),
    ("seq_read", "seq read", "MB/s"),
    ("randread", "4 KiB random read", "IOPS"),
    ("create", "small-file create", "files/s"),
    ("stat", "small-file stat", "files/s"),
    ("read", "small-file read", "files/s"),
    ("delete", "small-file delete", "files/s"),
    ("mkdir", "mkdir", "dirs/s"),
    ("rename", "rename", "renames/s"),
    ("ls_small", "ls -l (small folder)", "entries/s"),
    ("ls_big", "ls -l (big folder)", "entries/s"),
    ("heal_files", "heal", "files/s"),
    ("heal_mb", "heal", "MB/s"),
]
LABEL = {k: (label, unit) for k, label, unit in METRICS}

# The issues' targets: (section, metric, basis, threshold, issue, wording).
# ratio = brickfs / basis, measured in the same run; PASS when >= threshold.
GOALS = [
    ("1brick", "seq_write", "passthrough", 0.70, 2, ">= 70% of the passthrough"),
    ("1brick", "seq_read", "passthrough", 0.70, 2, ">= 70% of the passthrough"),
    ("1brick", "create", "passthrough", 0.50, 2, ">= 50% of the passthrough"),
    ("1brick", "stat", "passthrough", 0.50, 2, ">= 50% of the passthrough"),
    ("1brick", "read", "passthrough", 0.50, 2, ">= 50% of the passthrough"),
    ("dist3", "create", "gluster", 5.0, 4, ">= 5x GlusterFS"),
    ("dist3", "delete", "gluster", 3.0, 4, ">= 3x GlusterFS"),
    ("dist3", "mkdir", "gluster", 3.0, 4, ">= 3x GlusterFS"),
    ("dist3", "rename", "gluster", 3.0, 4, ">= 3x GlusterFS"),
    ("dist3", "ls_small", "gluster", 2.0, 4, ">= 2x GlusterFS"),
    ("dist3", "ls_big", "gluster", 2.0, 4, ">= 2x GlusterFS"),
    ("dist3", "read", "gluster", 2.0, 4, ">= 2x GlusterFS"),
    ("dist3", "seq_read", "gluster", 2.0, 4, ">= 2x GlusterFS"),
    ("dist3", "randread", "gluster", 2.0, 4, ">= 2x GlusterFS"),
    ("dist3", "seq_write", "disk", 0.85, 4, ">= 85% of the bare disk"),
    ("rep3", "create", "gluster", 5.0, 5, ">= 5x GlusterFS replica 3"),
    ("rep3", "stat", "gluster", 2.0, 5, ">= 2x GlusterFS replica 3"),
    ("rep3", "read", "gluster", 2.0, 5, ">= 2x GlusterFS replica 3"),
    ("rep3", "delete", "gluster", 2.0, 5, ">= 2x GlusterFS replica 3"),
    ("rep3", "seq_write", "disk", 0.90 / 3, 5, ">= 90% of the bare disk / 3"),
    ("rep3", "seq_read", "gluster", 1.5, 5, ">= 1.5x GlusterFS replica 3"),
    ("disp", "seq_write", "gluster", 2.0, 6, ">= 2x GlusterFS disperse 6+2"),
    ("disp", "seq_read", "gluster", 2.0, 6, ">= 2x GlusterFS disperse 6+2"),
    ("disp", "seq_write", "disk", 0.85 * 4 / 6, 6, ">= 85% of the bare disk x 4/6"),
    ("disp", "create", "gluster", 3.0, 6, ">= 3x GlusterFS (small files)"),
    ("disp", "stat", "gluster", 3.0, 6, ">= 3x GlusterFS (small files)"),
    ("disp", "read", "gluster", 3.0, 6, ">= 3x GlusterFS (small files)"),
    ("disp", "delete", "gluster", 3.0, 6, ">= 3x GlusterFS (small files)"),
]


def load(args):
    res = {}  # (section, target, metric) -> {round: value or None}
    for line in open(args.results):
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 5:
            continue
        sec, tgt, met, rnd, val = parts
        try:
            v = float(val)
        except ValueError:
            v = None
        res.setdefault((sec, tgt, met), {})[int(rnd)] = v
    notes = {}
    for line in open(args.notes):
        sec, _, text = line.rstrip("\n").partition("\t")
        notes.setdefault(sec, []).append(text)
    runs = {}
    for line in open(args.runs):
        sec, _, n = line.strip().partition("\t")
        runs[sec] = int(n)
    return res, notes, runs


def median(xs):
    return statistics.median(xs) if xs else None


def figure(res, sec, tgt, met):
    """Median of the rounds, None if not measured, "error" if any round failed."""
    rounds = res.get((sec, tgt, met))
    if not rounds:
        return None
    if any(v is None for v in rounds.values()):
        return "error"
    return median(list(rounds.values()))


def round_ratios(res, sec, met, basis):
    b = res.get((sec, "brickfs", met), {})
    o = res.get((sec, basis, met), {})
    return [b[r] / o[r] for r in sorted(b) if r in o and b[r] and o[r]]


def ratio(res, sec, met, basis):
    b, o = figure(res, sec, "brickfs", met), figure(res, sec, basis, met)
    if not isinstance(b, float) or not isinstance(o, float):
        return None
    return median(round_ratios(res, sec, met, basis))


def fmt(v, digits=1):
    if v is None:
        return "n/a"
    if v == "error":
        return "error"
    return f"{v:.{digits}f}"


def section_report(res, notes, runs, sec):
    metrics = [m for m, _, _ in METRICS if any((sec, t, m) in res for t in TARGETS)]
    rows = []
    for m in metrics:
        label, unit = LABEL[m]
        row = {"metric": m, "label": label, "unit": unit}
        for t in TARGETS:
            row[t] = figure(res, sec, t, m)
            row[t + "_rounds"] = [res[(sec, t, m)][r] for r in sorted(res.get((sec, t, m), {}))]
        row["brickfs_per_gluster"] = ratio(res, sec, m, "gluster")
        rows.append(row)
    goals = []
    for gsec, m, basis, thr, issue, words in GOALS:
        if gsec != sec:
            continue
        r = ratio(res, sec, m, basis)
        verdict = "n/a" if r is None else ("PASS" if r >= thr else "FAIL")
        goals.append({"issue": issue, "metric": m, "label": "%s (%s)" % LABEL[m], "basis": basis,
                      "ratio": r, "threshold": round(thr, 4), "target": words, "verdict": verdict,
                      "round_ratios": round_ratios(res, sec, m, basis)})
    return {"section": sec, "layout": SECTIONS[sec], "rounds": runs.get(sec, 0), "figures": rows,
            "targets": goals, "notes": notes.get(sec, [])}


def markdown(rep):
    out = []
    out.append("| workload | unit | disk | passthrough | brickfs | GlusterFS | brickfs/GlusterFS |")
    out.append("|---|---|--:|--:|--:|--:|--:|")
    for r in rep["figures"]:
        out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            r["label"], r["unit"], fmt(r["disk"]), fmt(r["passthrough"]), fmt(r["brickfs"]),
            fmt(r["gluster"]), fmt(r["brickfs_per_gluster"], 2)))
    if rep["targets"]:
        out.append("")
        out.append("| issue | target | brickfs / basis | wanted | verdict |")
        out.append("|---|---|--:|---|---|")
        for g in rep["targets"]:
            spread = ""
            if len(g["round_ratios"]) > 1:
                spread = " (rounds: %s)" % " ".join("%.2f" % x for x in g["round_ratios"])
            out.append("| #%d | %s | %s%s | %s | %s |" % (
                g["issue"], g["label"], fmt(g["ratio"], 2), spread, g["target"], g["verdict"]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--notes", required=True)
    ap.add_argument("--runs", required=True)
    ap.add_argument("--json")
    ap.add_argument("--record")
    ap.add_argument("--meta", nargs="*", default=[])
    args = ap.parse_args()
    res, notes, runs = load(args)
    meta = dict(kv.split("=", 1) for kv in args.meta)
    reports = [section_report(res, notes, runs, s) for s in SECTIONS if s in runs]
    counts = {"PASS": 0, "FAIL": 0, "n/a": 0}
    for rep in reports:
        for g in rep["targets"]:
            counts[g["verdict"]] += 1

    sizes = ("seq %s MiB (bases: best of %s); small files %s x %s B in %s folders; "
             "ls -l %s and %s entries; "
             "mkdir/rename %s; fio %s MiB, %s jobs, %s s; heal %s files of %s B; "
             "page cache dropped before each step: %s" % (
                 meta.get("seq_mb"), meta.get("base_tries", "1"), meta.get("files"), meta.get("file_size"), meta.get("dirs"),
                 meta.get("ls_small"), meta.get("ls_big"), meta.get("meta"), meta.get("fio_mb"),
                 meta.get("fio_jobs"), meta.get("fio_secs"), meta.get("heal_files"),
                 meta.get("heal_size"), meta.get("dropped")))
    machine = "%s CPUs (%s), %s, kernel %s, data on %s; %s" % (
        meta.get("cpus"), meta.get("cpu"), meta.get("mem"), meta.get("kernel"), meta.get("fs"),
        meta.get("gluster", "GlusterFS ?"))
    loadavg = "load average %s before, %s after" % (meta.get("load_before"), meta.get("load_after"))

    lines = []
    for rep in reports:
        lines.append("")
        lines.append("#### %s (%s), %d round(s)" % (rep["section"], rep["layout"], rep["rounds"]))
        lines.append("")
        lines.extend(markdown(rep))
        for n in rep["notes"]:
            lines.append("")
            lines.append("Note: " + n)
    summary = "targets: %d PASS, %d FAIL, %d n/a" % (counts["PASS"], counts["FAIL"], counts["n/a"])

    print()
    print("bench: " + sizes)
    print("bench: " + machine + "; " + loadavg)
    print("\n".join(lines))
    print()
    print("bench: " + summary)

    doc = {"meta": meta, "sizes": sizes, "machine": machine, "load": loadavg, "summary": counts,
           "sections": reports}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print("bench: results in " + args.json)
    if args.record:
        with open(args.record, "a") as f:
            f.write("\n### %s — %s\n\n" % (meta.get("started"), meta.get("commit")))
            f.write("Machine: %s; %s.\n" % (machine, loadavg))
            f.write("Sizes: %s.\n" % sizes)
            f.write("\n".join(lines) + "\n")
            f.write("\n%s.\n" % summary.capitalize())
        print("bench: recorded in " + args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
