#!/usr/bin/env python3
"""rename-race.py DIR N STOPFILE REPORT — renames, replaces and unlinks
files by name as fast as it can, so that a rebalance moving those files
meets clients changing their names in every step of its moves
(tests/integration/247-rebalance-rename-race.t).

DIR gets N files; file i lives under one of two names, a<i> or b<i>, and
holds "i gen\\n" padded to 64 KiB (gen counts its rewrites). Until STOPFILE
exists, each step picks a file at random and either:
  - renames it to its other name (a<i> <-> b<i>);
  - replaces it atomically: writes t<i>, renames t<i> over its name
    (gen + 1);
  - unlinks it and creates it again under its name (gen + 1).
Every call must succeed: any error ends the run with "FAIL ..." in REPORT
and exit status 1. REPORT.ready appears once the N files exist. At the end every file must be under its current name
with its current content, and nothing else may be in DIR; REPORT gets
"OK steps=N renames=N replaces=N recreates=N".
"""
import os
import random
import sys

SIZE = 64 * 1024


def content(i, gen):
    head = ("%d %d\n" % (i, gen)).encode()
    return head + b"." * (SIZE - len(head))


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def main():
    d, n, stop, report = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    rnd = random.Random(7)
    os.makedirs(d, exist_ok=True)
    name = ["a%d" % i for i in range(n)]
    gen = [0] * n
    for i in range(n):
        write(os.path.join(d, name[i]), content(i, 0))
    open(report + ".ready", "w").close()
    st = {"steps": 0, "renames": 0, "replaces": 0, "recreates": 0}
    step = "start"
    try:
        while not os.path.exists(stop) or st["steps"] < 50:
            i = rnd.randrange(n)
            cur = os.path.join(d, name[i])
            what = rnd.randrange(4)
            if what <= 1:
                other = ("b" if name[i][0] == "a" else "a") + str(i)
                step = "rename %s -> %s" % (name[i], other)
                os.rename(cur, os.path.join(d, other))
                name[i] = other
                st["renames"] += 1
            elif what == 2:
                tmp = os.path.join(d, "t%d" % i)
                step = "replace %s (through t%d)" % (name[i], i)
                write(tmp, content(i, gen[i] + 1))
                os.rename(tmp, cur)
                gen[i] += 1
                st["replaces"] += 1
            else:
                step = "recreate %s" % name[i]
                os.unlink(cur)
                write(cur, content(i, gen[i] + 1))
                gen[i] += 1
                st["recreates"] += 1
            st["steps"] += 1
        step = "final check"
        want = set(name)
        got = set(os.listdir(d))
        if got != want:
            raise RuntimeError("names differ: missing %s, extra %s"
                               % (sorted(want - got)[:5], sorted(got - want)[:5]))
        for i in range(n):
            with open(os.path.join(d, name[i]), "rb") as f:
                data = f.read()
            if data != content(i, gen[i]):
                raise RuntimeError("%s: %d bytes, starting %r; want gen %d"
                                   % (name[i], len(data), data[:16], gen[i]))
    except Exception as e:  # noqa: BLE001 — every failure is the answer
        with open(report, "w") as r:
            r.write("FAIL at %s after %d steps: %s: %s\n" % (step, st["steps"],
                                                            type(e).__name__, e))
        return 1
    with open(report, "w") as r:
        r.write("OK " + " ".join("%s=%d" % kv for kv in st.items()) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
