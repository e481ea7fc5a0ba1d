#!/usr/bin/env python3
"""replica-workload.py — a file system workload that checks its own data,
for fault tests (tests/integration/21x-*.t).

    replica-workload.py run MNT STATE [--workers N] [--seed S] [--max-ops N]
    replica-workload.py verify MNT STATE        "ok", or the differences
    replica-workload.py errnos STATE [FROM TO]  errno names of failed ops
                                                (µs since the epoch), uniq
    replica-workload.py get STATE KEY           a value of STATE/status
    replica-workload.py summary STATE           one line for a TAP comment

`run` starts N worker threads; worker k works only in MNT/wk (so that the
expected state of every name is known without ordering between workers).
Each picks random operations:

  create    a new file with random content, fsync, close
  write     pwrite of random bytes at a random offset (holes possible), fsync
  append    O_APPEND write, fsync
  truncate  ftruncate to a random size (shorter or longer), fsync
  rename    a file to a new name (then fsync of the folder)
  mkdir, rmdir (empty folders), unlink

An operation counts as **acknowledged** when every call of it succeeded
(including the fsync and the close): only then is it applied to the
worker's model and written to its journal STATE/journal.k ("op_no op path
... sha256"). An operation with a failed call was in flight at a fault: the
worker records it in STATE/events ("start_us worker op ERRNO"), waits until
the mount answers again, reads back the state of the names it touched and
accepts it only if it is the state before or after that operation (or, for
a create, the empty file its first call made; or, when a write(2) answered
a short count, the state with exactly the bytes it acknowledged; anything
else — a change applied in part — is a violation, written to
STATE/violations); the model takes what it read. A short count is
followed, as programs do, by a write of the rest, which then fails with
the fault's errno: the kernel cuts a write into several requests (at the
first page boundary when it starts mid-page), and the first can be
acknowledged when a later one fails. For the same reason a write that
failed outright (or whose failure came back from fsync, write-behind
having answered the write) may show its first requests applied (the data
up to a page boundary) and nothing else: a brick that died with a request
in flight may have applied it, or its first pages (the kernel stops a
write between pages on SIGKILL), before its answer was lost, and replicate then keeps that
copy, the only one without the unacknowledged mark (docs/design/
replicate.md: nobody can tell it from a copy that missed the request). So at the end exactly the
acknowledged operations, plus whichever way each faulted one went, must be
visible.

`run` stops when STATE/stop exists (or after --max-ops per worker), then
writes STATE/model.k (JSON: every file's size and SHA-256, every folder)
and STATE/status (key=value: ops, failed, violations, max_ms — the
slowest operation — and state=finished). Operations slower than 1 s are
listed in STATE/events as "start_us worker op SLOW ms".
`verify` walks MNT/wk and compares with the models: names, types, sizes,
contents. It prints "ok" when everything matches and there were no
violations.
"""
import errno
import hashlib
import json
import os
import random
import sys
import threading
import time

MAX_SIZE = 192 << 10
MAX_FILES = 24
MAX_DIRS = 6
SETTLE_S = 90           # how long a worker waits for the mount to answer again


def now_us():
    return time.time_ns() // 1000


def ename(code):
    return errno.errorcode.get(code, str(code))


def sha(b):
    return hashlib.sha256(b).hexdigest()


class Faulted(Exception):
    def __init__(self, err):
        Exception.__init__(self, err)
        self.err = err


class Worker(threading.Thread):
    def __init__(self, k, mnt, state, seed, max_ops, shared):
        threading.Thread.__init__(self, daemon=True)
        self.k, self.state, self.max_ops, self.shared = k, state, max_ops, shared
        self.dir = os.path.join(mnt, "w%d" % k)
        self.rng = random.Random(seed * 1000 + k)
        self.files = {}     # name -> bytearray (the model)
        self.dirs = set()   # names of sub-folders (empty: rmdir may take them)
        self.seq = 0
        self.ops = self.failed = self.violations = self.max_ms = 0
        self.journal = open(os.path.join(state, "journal.%d" % k), "a", buffering=1)
        self.acked = []     # what a short write acknowledged (write_file)
        self.inflight = None  # (offset or None, bytes) of write_file's write

    # ---- helpers ----

    def stopping(self):
        return os.path.exists(os.path.join(self.state, "stop")) or \
            (self.max_ops and self.ops >= self.max_ops)

    def path(self, name):
        return os.path.join(self.dir, name)

    def new_name(self, prefix):
        self.seq += 1
        return "%s%05d" % (prefix, self.seq)

    def data(self, n):
        return self.rng.randbytes(n)

    def event(self, start, op, err):
        self.shared.event("%d %d %s %s\n" % (start, self.k, op, ename(err)))

    def violation(self, text):
        self.violations += 1
        self.shared.violation("w%d: %s\n" % (self.k, text))

    def read_state(self, name):
        """What the mount shows for name now: None (absent), 'dir', or bytes.
        Retries while the mount does not answer."""
        deadline = time.time() + SETTLE_S
        while True:
            try:
                st = os.lstat(self.path(name))
                if os.path.isdir(self.path(name)):
                    return "dir"
                with open(self.path(name), "rb") as f:
                    b = f.read()
                if len(b) != st.st_size:
                    continue
                return b
            except FileNotFoundError:
                return None
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)

    def settle(self, start, op, err, names, before, after):
        """A faulted op: names' state must be `before` or `after` (per name),
        or, for a create, the empty file its first call made, or what a
        short write count acknowledged (self.acked), or a failed write's
        first requests alone (self.inflight: up to a page boundary)."""
        self.failed += 1
        self.event(start, op, err)
        now = {n: self.read_state(n) for n in names}
        b = {n: before.get(n) for n in names}
        a = {n: after.get(n) for n in names}
        mid = {n: b"" for n in names} if op == "create" else a
        short = first = a
        if self.acked:  # a short count acknowledged part of a write
            short = {names[0]: self.applied(b[names[0]], *self.acked[0])}
        elif self.inflight and isinstance(now[names[0]], bytes):
            # the kernel's first requests of the write alone: the data up to
            # a page boundary (the one that matches, if any)
            off, data = self.inflight
            at = len(b[names[0]] or b"") if off is None else off
            for k in range(-at % 4096 or 4096, len(data), 4096):
                if now[names[0]] == self.applied(b[names[0]], at, data[:k]):
                    first = {names[0]: now[names[0]]}
                    break
        self.acked, self.inflight = [], None
        if now not in (b, a, mid, short, first):
            def show(d):
                return {n: (v if v in (None, "dir") else "%d bytes %s" % (len(v), sha(v)[:12]))
                        for n, v in d.items()}
            extra = "; short write acknowledged %s" % show(short) if short is not a else ""
            self.violation("%s failed (%s) and left %s; before %s, after %s%s" % (
                op, ename(err), show(now), show(b), show(a), extra))
        for n, v in now.items():
            self.files.pop(n, None)
            self.dirs.discard(n)
            if v == "dir":
                self.dirs.add(n)
            elif v is not None:
                self.files[n] = bytearray(v)
        time.sleep(0.05)

    @staticmethod
    def applied(cur, off, data):
        """cur (bytes or None) with data written at off (None: at the end)."""
        new = bytearray(cur or b"")
        if off is None:
            off = len(new)
        new.extend(b"\0" * max(0, off - len(new)))
        new[off:off + len(data)] = data
        return bytes(new)

    def note_time(self, start, op):
        """The slowest operation (ms); slow ones (> 1 s) go to the events."""
        ms = (now_us() - start) // 1000
        if ms > self.max_ms:
            self.max_ms = ms
        if ms > 1000:
            self.shared.event("%d %d %s SLOW %d\n" % (start, self.k, op, ms))

    def log(self, op, *args):
        self.ops += 1
        self.journal.write("%d %s %s\n" % (self.ops, op, " ".join(str(a) for a in args)))

    # ---- operations: each raises Faulted(errno) from its first failed call ----

    @staticmethod
    def call(fn, *a):
        try:
            return fn(*a)
        except OSError as e:
            raise Faulted(e.errno)

    def write_file(self, name, flags, chunks, trunc=None):
        """Writes chunks ((offset or None for an append, bytes)); what a
        short count acknowledged is kept in self.acked ((offset, bytes) as
        far as acknowledged) for settle."""
        self.acked = []
        self.inflight = chunks[0] if len(chunks) == 1 else None
        fd = self.call(os.open, self.path(name), flags, 0o644)
        try:
            if trunc is not None:
                self.call(os.ftruncate, fd, trunc)
            for off, b in chunks:
                done = 0
                while done < len(b):
                    if off is None:
                        n = self.call(os.write, fd, b[done:])
                    else:
                        n = self.call(os.pwrite, fd, b[done:], off + done)
                    if n <= 0:
                        raise Faulted(errno.EIO)
                    done += n
                    if done < len(b):
                        self.acked = [(off, b[:done])]
            self.acked = []
            # self.inflight stays until fsync and close answered: the mount's
            # write-behind answers a write at once and its failure comes
            # back from fsync, with the brick's pwrite possibly cut at a
            # page boundary by its kill (the kernel stops a write between
            # pages on a fatal signal)
            self.call(os.fsync, fd)
        finally:
            try:
                os.close(fd)
            except OSError as e:
                raise Faulted(e.errno)
        self.inflight = None

    def op_create(self):
        name = self.new_name("f")
        b = self.data(self.rng.randrange(0, 64 << 10))
        before, after = {name: None}, {name: b}
        return "create", [name], before, after, \
            lambda: self.write_file(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, [(0, b)])

    def op_write(self, name):
        cur = bytes(self.files[name])
        off = self.rng.randrange(0, min(len(cur) + 8192, MAX_SIZE))
        b = self.data(self.rng.randrange(1, 32 << 10))
        new = bytearray(cur)
        if len(new) < off:
            new.extend(b"\0" * (off - len(new)))
        new[off:off + len(b)] = b
        return "write", [name], {name: cur}, {name: bytes(new)}, \
            lambda: self.write_file(name, os.O_WRONLY, [(off, b)])

    def op_append(self, name):
        cur = bytes(self.files[name])
        b = self.data(self.rng.randrange(1, 16 << 10))
        return "append", [name], {name: cur}, {name: cur + b}, \
            lambda: self.write_file(name, os.O_WRONLY | os.O_APPEND, [(None, b)])

    def op_truncate(self, name):
        cur = bytes(self.files[name])
        size = self.rng.randrange(0, min(len(cur) + 16384, MAX_SIZE))
        new = cur[:size] + b"\0" * max(0, size - len(cur))
        return "truncate", [name], {name: cur}, {name: new}, \
            lambda: self.write_file(name, os.O_WRONLY, [], trunc=size)

    def op_rename(self, name):
        new = self.new_name("r")
        cur = bytes(self.files[name])

        def run():
            self.call(os.rename, self.path(name), self.path(new))
            self.fsync_dir()
        return "rename", [name, new], {name: cur, new: None}, {name: None, new: cur}, run

    def op_unlink(self, name):
        cur = bytes(self.files[name])

        def run():
            self.call(os.unlink, self.path(name))
            self.fsync_dir()
        return "unlink", [name], {name: cur}, {name: None}, run

    def op_mkdir(self):
        name = self.new_name("d")

        def run():
            self.call(os.mkdir, self.path(name))
            self.fsync_dir()
        return "mkdir", [name], {name: None}, {name: "dir"}, run

    def op_rmdir(self, name):
        def run():
            self.call(os.rmdir, self.path(name))
            self.fsync_dir()
        return "rmdir", [name], {name: "dir"}, {name: None}, run

    def fsync_dir(self):
        fd = self.call(os.open, self.dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self.call(os.fsync, fd)
        finally:
            os.close(fd)

    def pick(self):
        r = self.rng.random()
        names = sorted(self.files)
        if not names or (r < 0.15 and len(names) < MAX_FILES):
            return self.op_create()
        name = self.rng.choice(names)
        if r < 0.45:
            return self.op_write(name)
        if r < 0.60:
            return self.op_append(name)
        if r < 0.70:
            return self.op_truncate(name)
        if r < 0.80:
            return self.op_rename(name)
        if r < 0.86 and len(names) > 4:
            return self.op_unlink(name)
        if r < 0.93 and len(self.dirs) < MAX_DIRS:
            return self.op_mkdir()
        if self.dirs:
            return self.op_rmdir(self.rng.choice(sorted(self.dirs)))
        return self.op_write(name)

    def run(self):
        while True:
            try:
                os.mkdir(self.dir)
                break
            except FileExistsError:
                break
            except OSError:
                time.sleep(0.1)
        while not self.stopping():
            op, names, before, after, fn = self.pick()
            start = now_us()
            try:
                fn()
            except Faulted as f:
                self.note_time(start, op)
                self.settle(start, op, f.err, names, before, after)
                continue
            self.note_time(start, op)
            for n, v in after.items():
                self.files.pop(n, None)
                self.dirs.discard(n)
                if v == "dir":
                    self.dirs.add(n)
                elif v is not None:
                    self.files[n] = bytearray(v)
            self.log(op, *["%s=%s" % (n, "dir" if v == "dir" else "-" if v is None else
                                      "%d:%s" % (len(v), sha(v)[:16])) for n, v in after.items()])
        model = {"files": {n: [len(b), sha(bytes(b))] for n, b in self.files.items()},
                 "dirs": sorted(self.dirs)}
        tmp = os.path.join(self.state, "model.%d.tmp" % self.k)
        with open(tmp, "w") as f:
            json.dump(model, f)
        os.rename(tmp, os.path.join(self.state, "model.%d" % self.k))
        self.journal.close()


class Shared:
    def __init__(self, state):
        self.lock = threading.Lock()
        self.events = open(os.path.join(state, "events"), "a", buffering=1)
        self.viol = open(os.path.join(state, "violations"), "a", buffering=1)

    def event(self, line):
        with self.lock:
            self.events.write(line)

    def violation(self, line):
        with self.lock:
            self.viol.write(line)


def write_status(state, kv):
    tmp = os.path.join(state, "status.tmp")
    with open(tmp, "w") as f:
        for k, v in kv.items():
            f.write("%s=%s\n" % (k, v))
    os.rename(tmp, os.path.join(state, "status"))


def cmd_run(a):
    mnt, state = a[0], a[1]
    opts = {"--workers": 4, "--seed": 1, "--max-ops": 0}
    i = 2
    while i < len(a):
        if a[i] not in opts or i + 1 >= len(a):
            return usage()
        opts[a[i]] = int(a[i + 1])
        i += 2
    os.makedirs(state, exist_ok=True)
    shared = Shared(state)
    ws = [Worker(k, mnt, state, opts["--seed"], opts["--max-ops"], shared)
          for k in range(opts["--workers"])]
    write_status(state, {"state": "running", "workers": len(ws)})
    for w in ws:
        w.start()
    while any(w.is_alive() for w in ws):
        write_status(state, {"state": "running", "workers": len(ws),
                             "ops": sum(w.ops for w in ws),
                             "failed": sum(w.failed for w in ws),
                             "violations": sum(w.violations for w in ws),
                             "max_ms": max(w.max_ms for w in ws)})
        time.sleep(0.2)
    for w in ws:
        w.join()
    write_status(state, {"state": "finished", "workers": len(ws), "ops": sum(w.ops for w in ws),
                         "failed": sum(w.failed for w in ws),
                         "violations": sum(w.violations for w in ws),
                         "max_ms": max(w.max_ms for w in ws)})
    return 0


def status(state):
    kv = {}
    try:
        with open(os.path.join(state, "status")) as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                kv[k] = v
    except OSError:
        pass
    return kv


def cmd_verify(a):
    mnt, state = a[0], a[1]
    st = status(state)
    bad = []
    if st.get("state") != "finished":
        bad.append("the workload did not finish (state=%s)" % st.get("state"))
    try:
        with open(os.path.join(state, "violations")) as f:
            bad += ["violation: " + line.strip() for line in f if line.strip()]
    except OSError:
        pass
    nworkers = int(st.get("workers", 0))
    for k in range(nworkers):
        try:
            with open(os.path.join(state, "model.%d" % k)) as f:
                model = json.load(f)
        except (OSError, ValueError) as e:
            bad.append("w%d: no model (%s)" % (k, e))
            continue
        d = os.path.join(mnt, "w%d" % k)
        try:
            names = set(os.listdir(d))
        except OSError as e:
            bad.append("w%d: cannot list: %s" % (k, e.strerror))
            continue
        want = set(model["files"]) | set(model["dirs"])
        for n in sorted(want - names):
            bad.append("w%d/%s: missing" % (k, n))
        for n in sorted(names - want):
            bad.append("w%d/%s: not expected" % (k, n))
        for n in sorted(set(model["dirs"]) & names):
            if not os.path.isdir(os.path.join(d, n)):
                bad.append("w%d/%s: not a folder" % (k, n))
        for n, (size, digest) in sorted(model["files"].items()):
            if n not in names:
                continue
            try:
                with open(os.path.join(d, n), "rb") as f:
                    b = f.read()
            except OSError as e:
                bad.append("w%d/%s: cannot read: %s" % (k, n, e.strerror))
                continue
            if len(b) != size or sha(b) != digest:
                bad.append("w%d/%s: %d bytes %s, expected %d bytes %s" % (
                    k, n, len(b), sha(b)[:12], size, digest[:12]))
    for line in bad:
        print(line)
    if not bad:
        print("ok")
    return 0 if not bad else 1


def cmd_errnos(a):
    state = a[0]
    lo, hi = (int(a[1]), int(a[2])) if len(a) >= 3 else (0, 1 << 62)
    seen = set()
    try:
        with open(os.path.join(state, "events")) as f:
            for line in f:
                p = line.split()
                if len(p) >= 4 and lo <= int(p[0]) <= hi and p[3] != "SLOW":
                    seen.add(p[3])
    except OSError:
        pass
    print(" ".join(sorted(seen)))
    return 0


def cmd_get(a):
    print(status(a[0]).get(a[1], ""))
    return 0


def cmd_summary(a):
    st = status(a[0])
    print("workload: %s ops acknowledged, %s faulted, %s violations, state %s" % (
        st.get("ops", "?"), st.get("failed", "?"), st.get("violations", "?"),
        st.get("state", "?")))
    return 0


def usage():
    sys.stderr.write(__doc__)
    return 2


def main():
    cmds = {"run": (cmd_run, 2), "verify": (cmd_verify, 2), "errnos": (cmd_errnos, 1),
            "get": (cmd_get, 2), "summary": (cmd_summary, 1)}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds or len(sys.argv) - 2 < cmds[sys.argv[1]][1]:
        return usage()
    return cmds[sys.argv[1]][0](sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
