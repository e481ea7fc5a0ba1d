#!/usr/bin/env python3
"""verify-io.py DIR STOPFILE REPORT — a write/read workload that checks its
own data, for tests that change things under a mount while it runs (graph
switches, brick restarts).

Until STOPFILE exists (and at least --min-rounds rounds ran), each round:
  - writes a file of random size (0..256 KiB, in random chunks) under DIR,
    closes it, opens it again and compares every byte;
  - appends a record to a long-lived fd opened at the start (O_RDWR), reads
    the previous record back through it, and every few rounds reads the
    whole file through a fresh open;
  - writes and reads a record through a second long-lived fd that holds a
    POSIX write lock (fcntl) the whole time;
  - lists DIR, renames and removes some files.
Any error — an exception from the file system or data that differs — ends
it at once with "FAIL ..." in REPORT and exit status 1. At the end the
locked fd is unlocked and both long-lived files are verified whole; REPORT
gets "OK rounds=N files=N bytes=N records=N".
"""
import argparse
import fcntl
import os
import random
import sys
import time

REC = 4096


def record(i, tag):
    head = ("%s %08d " % (tag, i)).encode()
    return (head * (REC // len(head) + 1))[:REC]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("stop")
    ap.add_argument("report")
    ap.add_argument("--min-rounds", type=int, default=20)
    a = ap.parse_args()
    rnd = random.Random(42)
    os.makedirs(a.dir, exist_ok=True)
    st = {"rounds": 0, "files": 0, "bytes": 0, "records": 0}
    longp = os.path.join(a.dir, "long")
    lockp = os.path.join(a.dir, "locked")
    lfd = os.open(longp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    kfd = os.open(lockp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    fcntl.lockf(kfd, fcntl.LOCK_EX)          # held until the end
    step = "start"
    try:
        i = 0
        while i < a.min_rounds or not os.path.exists(a.stop):
            step = "file %d" % i
            name = os.path.join(a.dir, "f%03d" % (i % 40))
            size = rnd.randrange(0, 256 * 1024)
            data = rnd.randbytes(size)
            with open(name, "wb") as f:
                off = 0
                while off < size:
                    n = rnd.randrange(1, 64 * 1024)
                    f.write(data[off:off + n])
                    off += n
                if i % 5 == 0:
                    f.flush()
                    os.fsync(f.fileno())
            with open(name, "rb") as f:
                got = f.read()
            if got != data:
                raise RuntimeError("%s: read back %d bytes, wrote %d, or they differ"
                                   % (name, len(got), size))
            st["files"] += 1
            st["bytes"] += size

            step = "long record %d" % i
            os.pwrite(lfd, record(i, "L"), i * REC)
            if i > 0 and os.pread(lfd, REC, (i - 1) * REC) != record(i - 1, "L"):
                raise RuntimeError("long: record %d differs" % (i - 1))
            if i % 7 == 0:
                with open(longp, "rb") as f:
                    whole = f.read()
                for k in range(i + 1):
                    if whole[k * REC:(k + 1) * REC] != record(k, "L"):
                        raise RuntimeError("long (fresh open): record %d differs" % k)

            step = "locked record %d" % i
            os.pwrite(kfd, record(i, "K"), i * REC)
            if os.pread(kfd, REC, i * REC) != record(i, "K"):
                raise RuntimeError("locked: record %d differs" % i)
            st["records"] += 1

            step = "names %d" % i
            names = set(os.listdir(a.dir))
            if "long" not in names or "locked" not in names:
                raise RuntimeError("listing lost a file: %s" % sorted(names))
            if i % 3 == 0:
                tmp = os.path.join(a.dir, "tmp%d" % i)
                os.rename(name, tmp)
                os.unlink(tmp)
            i += 1
            st["rounds"] = i
        step = "end"
        fcntl.lockf(kfd, fcntl.LOCK_UN)
        os.close(kfd)
        os.close(lfd)
        for path, tag in ((longp, "L"), (lockp, "K")):
            with open(path, "rb") as f:
                whole = f.read()
            for k in range(st["rounds"]):
                if whole[k * REC:(k + 1) * REC] != record(k, tag):
                    raise RuntimeError("%s: record %d differs at the end" % (path, k))
    except Exception as e:  # noqa: BLE001 — every failure is the answer
        with open(a.report, "w") as r:
            r.write("FAIL at %s after %d rounds: %s: %s\n" % (step, st["rounds"],
                                                             type(e).__name__, e))
        return 1
    with open(a.report, "w") as r:
        r.write("OK " + " ".join("%s=%d" % kv for kv in st.items()) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
