#!/usr/bin/env python3
"""fault-writer.py — a write load that keeps going through brick faults, and
the checks of what it leaves behind (tests/integration/030-fault-*.t).

    fault-writer.py run DIR STATE [--rec-size B] [--per-file N]
                                  [--fsync-every N] [--rate R]
    fault-writer.py get STATE KEY              one value of STATE/status
    fault-writer.py errnos STATE FROM TO       errno names of failed calls
                                               between FROM and TO (µs since
                                               the epoch), sorted, uniq
    fault-writer.py max-ms STATE [FROM TO]     the slowest call (ms), overall
                                               or among calls that began
                                               between FROM and TO
    fault-writer.py first-error-ms STATE FROM TO
                                               ms from FROM to the end of the
                                               first failed call that ended
                                               between FROM and TO (a call
                                               begun before FROM counts),
                                               empty when none
    fault-writer.py verify-fsynced DIR STATE LINES
                                               the records named by the first
                                               LINES lines of STATE/fsynced
                                               are intact in DIR: "ok"
    fault-writer.py verify-final DIR STATE     every record the writer had
                                               acknowledged is intact in DIR
                                               and nothing else is there: "ok"
    fault-writer.py summary STATE              one line for a TAP comment

`run` writes records into files DIR/f000000, DIR/f000001, ...: PER_FILE
records of REC_SIZE bytes each, record r of file n at offset r * REC_SIZE,
its bytes a function of (n, r) alone. It fsyncs every FSYNC_EVERY records
and at the end of each file, and after each successful fsync appends
"n r time_us" to STATE/fsynced: records 0..r of file n are durable. At most
RATE records a second, so a run of a minute stays small.

A call that fails is retried (every 20 ms) until it succeeds: the same
record at the same offset, so the data a retry writes is the data the failed
call may or may not have written, and the final contents are known. Only
close is not retried (the descriptor is gone either way; its records were
fsynced just before). A descriptor the client lost (EBADF, EBADFD) is opened
again by name, and counted as a reopen.

Every call is timed (a monotonic clock). Failed calls and calls slower than
250 ms are appended to STATE/events as "start_us op ERRNO|- ms file rec";
STATE/status holds key=value lines, replaced atomically at most every 50 ms
and at exit: ok, errors, records, fsyncs, reopens, ok_since_error, max_ms,
max_op, file, rec (records acknowledged in that file), last_errno, state
(running, finished, gave-up).

The test stops `run` by creating STATE/stop; it finishes at the next record
boundary (after a success), fsyncs and closes. If calls still fail 60 s
after the stop was asked for, it gives up (state=gave-up, exit 3).
"""
import errno
import hashlib
import os
import sys
import time

SLOW_MS = 250
RETRY_S = 0.02


def ename(code):
    return errno.errorcode.get(code, str(code))


def record(n, r, size):
    head = b"file %06d rec %06d " % (n, r)
    fill = hashlib.sha256(b"%d:%d" % (n, r)).digest()
    body = head + fill * ((size - len(head)) // len(fill) + 1)
    return body[:size - 1] + b"\n"


def fname(n):
    return "f%06d" % n


def now_us():
    return time.time_ns() // 1000


class Writer:
    def __init__(self, d, state, rec_size, per_file, fsync_every, rate):
        self.dir, self.state = d, state
        self.rec_size, self.per_file, self.fsync_every = rec_size, per_file, fsync_every
        self.period = 1.0 / rate if rate > 0 else 0.0
        self.st = {"ok": 0, "errors": 0, "records": 0, "fsyncs": 0, "reopens": 0,
                   "ok_since_error": 0, "max_ms": 0, "max_op": "-", "file": 0, "rec": 0,
                   "last_errno": "-", "state": "running"}
        self.events = open(os.path.join(state, "events"), "a", buffering=1)
        self.fsynced = open(os.path.join(state, "fsynced"), "a", buffering=1)
        self.last_status = 0.0
        self.stop_asked = None
        self.fd = -1

    def save(self, force=False):
        t = time.monotonic()
        if not force and t - self.last_status < 0.05:
            return
        self.last_status = t
        tmp = os.path.join(self.state, "status.tmp")
        with open(tmp, "w") as f:
            for k, v in self.st.items():
                f.write("%s=%s\n" % (k, v))
        os.rename(tmp, os.path.join(self.state, "status"))

    def stopping(self):
        if self.stop_asked is None and os.path.exists(os.path.join(self.state, "stop")):
            self.stop_asked = time.monotonic()
        return self.stop_asked is not None

    def call(self, op, fn):
        """Runs fn until it succeeds; times and records every attempt."""
        while True:
            start_us, t0 = now_us(), time.monotonic_ns()
            err = None
            try:
                ret = fn()
            except OSError as e:
                err = e.errno
            ms = (time.monotonic_ns() - t0) // 1000000
            if ms > self.st["max_ms"]:
                self.st["max_ms"], self.st["max_op"] = ms, op
            if err is None:
                self.st["ok"] += 1
                self.st["ok_since_error"] += 1
                if ms >= SLOW_MS:
                    self.event(start_us, op, "-", ms)
                self.save()
                return ret
            self.st["errors"] += 1
            self.st["ok_since_error"] = 0
            self.st["last_errno"] = ename(err)
            self.event(start_us, op, ename(err), ms)
            self.save(True)
            if err in (errno.EBADF, errno.EBADFD) and op != "open":
                self.reopen()
            if self.stop_asked is not None and time.monotonic() - self.stop_asked > 60:
                self.st["state"] = "gave-up"
                self.save(True)
                sys.exit(3)
            self.stopping()
            time.sleep(RETRY_S)

    def event(self, start_us, op, what, ms):
        self.events.write("%d %s %s %d %d %d\n" % (start_us, op, what, ms, self.st["file"],
                                                   self.st["rec"]))

    def open_file(self):
        path = os.path.join(self.dir, fname(self.st["file"]))
        self.fd = self.call("open", lambda: os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))

    def reopen(self):
        try:
            os.close(self.fd)
        except OSError:
            pass
        self.fd = -1
        self.st["reopens"] += 1
        self.open_file()

    def pwrite(self, data, off):
        if os.pwrite(self.fd, data, off) != len(data):
            raise OSError(errno.EIO, "short write")

    def fsync(self):
        self.call("fsync", lambda: os.fsync(self.fd))
        self.st["fsyncs"] += 1
        self.fsynced.write("%d %d %d\n" % (self.st["file"], self.st["rec"] - 1, now_us()))

    def close_file(self):
        t0 = time.monotonic_ns()
        try:
            os.close(self.fd)
        except OSError as e:  # the fd is gone anyway; its records were fsynced
            self.st["errors"] += 1
            self.event(now_us(), "close", ename(e.errno), (time.monotonic_ns() - t0) // 1000000)
        self.fd = -1

    def run(self):
        next_at = time.monotonic()
        self.open_file()
        while True:
            n, r = self.st["file"], self.st["rec"]
            data = record(n, r, self.rec_size)
            self.call("write", lambda: self.pwrite(data, r * self.rec_size))
            self.st["rec"] = r + 1
            self.st["records"] += 1
            last = self.st["rec"] == self.per_file
            if last or self.st["rec"] % self.fsync_every == 0:
                self.fsync()
            if last:
                self.close_file()
                if self.stopping():
                    break
                self.st["file"], self.st["rec"] = n + 1, 0
                self.open_file()
            elif self.stopping():
                if self.st["rec"] % self.fsync_every:
                    self.fsync()
                self.close_file()
                break
            if self.period:
                next_at += self.period
                delay = next_at - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                else:
                    next_at = time.monotonic()
        self.st["state"] = "finished"
        self.save(True)


def read_status(state):
    st = {}
    try:
        with open(os.path.join(state, "status")) as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("=")
                st[k] = v
    except FileNotFoundError:
        pass
    return st


def read_events(state):
    out = []
    try:
        with open(os.path.join(state, "events")) as f:
            for line in f:
                p = line.split()
                if len(p) == 6:
                    out.append((int(p[0]), p[1], p[2], int(p[3])))
    except FileNotFoundError:
        pass
    return out


def read_params(state):
    with open(os.path.join(state, "params")) as f:
        return {k: int(v) for k, v in (line.split("=") for line in f if "=" in line)}


def check_file(d, n, nrec, size, exact):
    """Records 0..nrec-1 of file n intact; with exact, nothing more. Returns
    an error message or None."""
    path = os.path.join(d, fname(n))
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return "%s: %s" % (path, os.strerror(e.errno))
    if len(data) < nrec * size or (exact and len(data) != nrec * size):
        return "%s: %d bytes, want %s%d" % (path, len(data), "" if exact else ">= ",
                                           nrec * size)
    for r in range(nrec):
        if data[r * size:(r + 1) * size] != record(n, r, size):
            got = data[r * size:r * size + 24]
            return "%s: record %d differs (starts %r)" % (path, r, got)
    return None


def cmd_verify_fsynced(d, state, lines):
    p = read_params(state)
    upto = {}
    with open(os.path.join(state, "fsynced")) as f:
        for i, line in enumerate(f):
            if i >= lines:
                break
            n, r, _ = (int(x) for x in line.split())
            upto[n] = max(upto.get(n, -1), r)
    if len(upto) == 0 and lines > 0:
        print("bad")
        sys.stderr.write("no fsynced records in %s\n" % state)
        return 1
    for n, r in sorted(upto.items()):
        msg = check_file(d, n, r + 1, p["rec_size"], False)
        if msg:
            print("bad")
            sys.stderr.write(msg + "\n")
            return 1
    print("ok")
    sys.stderr.write("%d fsync points over %d files intact\n" % (lines, len(upto)))
    return 0


def cmd_verify_final(d, state):
    p, st = read_params(state), read_status(state)
    if st.get("state") != "finished":
        print("bad")
        sys.stderr.write("writer state is %s, not finished\n" % st.get("state"))
        return 1
    last, nrec = int(st["file"]), int(st["rec"])
    want = {fname(n) for n in range(last + 1)}
    have = set(os.listdir(d))
    if have != want:
        print("bad")
        sys.stderr.write("%s: unexpected %s, missing %s\n" % (
            d, sorted(have - want)[:5], sorted(want - have)[:5]))
        return 1
    for n in range(last + 1):
        msg = check_file(d, n, p["per_file"] if n < last else nrec, p["rec_size"], True)
        if msg:
            print("bad")
            sys.stderr.write(msg + "\n")
            return 1
    print("ok")
    return 0


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "run":
        d, state = args[0], args[1]
        opts = {"--rec-size": 1024, "--per-file": 64, "--fsync-every": 4, "--rate": 400}
        rest = args[2:]
        while rest:
            opts[rest[0]] = int(rest[1])
            rest = rest[2:]
        os.makedirs(state, exist_ok=True)
        with open(os.path.join(state, "params"), "w") as f:
            f.write("rec_size=%d\nper_file=%d\nfsync_every=%d\n" % (
                opts["--rec-size"], opts["--per-file"], opts["--fsync-every"]))
        w = Writer(d, state, opts["--rec-size"], opts["--per-file"], opts["--fsync-every"],
                   opts["--rate"])
        w.save(True)
        w.run()
        return 0
    if cmd == "get":
        print(read_status(args[0]).get(args[1], ""))
        return 0
    if cmd == "errnos":
        lo, hi = int(args[1]), int(args[2])
        names = sorted({e[2] for e in read_events(args[0]) if lo <= e[0] <= hi and e[2] != "-"})
        print(" ".join(names))
        return 0
    if cmd == "max-ms":
        if len(args) == 3:
            lo, hi = int(args[1]), int(args[2])
            print(max([e[3] for e in read_events(args[0]) if lo <= e[0] <= hi] + [0]))
        else:
            print(read_status(args[0]).get("max_ms", ""))
        return 0
    if cmd == "first-error-ms":
        lo, hi = int(args[1]), int(args[2])
        ends = [e[0] + e[3] * 1000 for e in read_events(args[0]) if e[2] != "-"]
        ends = [t for t in ends if lo <= t <= hi]
        print((min(ends) - lo) // 1000 if ends else "")
        return 0
    if cmd == "verify-fsynced":
        return cmd_verify_fsynced(args[0], args[1], int(args[2]))
    if cmd == "verify-final":
        return cmd_verify_final(args[0], args[1])
    if cmd == "summary":
        st = read_status(args[0])
        hist = {}
        for e in read_events(args[0]):
            if e[2] != "-":
                hist[e[2]] = hist.get(e[2], 0) + 1
        print("%s records in %d files, %s fsyncs, %s ok calls, %s failed (%s), %s reopens, "
              "slowest call %s ms (%s)" % (
                  st.get("records"), int(st.get("file", 0)) + 1, st.get("fsyncs"),
                  st.get("ok"), st.get("errors"),
                  ", ".join("%s x%d" % kv for kv in sorted(hist.items())) or "none",
                  st.get("reopens"), st.get("max_ms"), st.get("max_op")))
        return 0
    sys.stderr.write("fault-writer.py: unknown command %s\n" % cmd)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
