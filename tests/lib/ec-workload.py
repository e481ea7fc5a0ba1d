#!/usr/bin/env python3
"""ec-workload.py — a self-checking data workload for dispersed volumes.

  run MNT STATE          writes to files MNT/f0..f7 until STATE/stop exists:
                         unaligned pwrites spanning stripes and past the end
                         (holes), appends (pwrite at the end), truncates down
                         and up; each file opened and closed per operation.
                         A model of every file is kept in STATE/model/<name>
                         and updated only when the call succeeded; a failed
                         call is counted (STATE/status) and retried until it
                         succeeds (every operation is idempotent). While
                         STATE/pause exists it stops between operations and
                         says so in STATE/paused.
  verify MNT STATE       every file on the mount equals its model: "ok".
  bricks STATE K CHUNK DIR...
                         the fragment files on the bricks (DIR in child
                         order): each is ceil(size / (K*CHUNK)) * CHUNK bytes
                         and a data child's holds exactly the model's bytes
                         of its chunks: "ok", else what differs.
  touch MNT STATE        stats and reads every file (lookups: heal on access).
  read-fails MNT NAME    reading NAME fails with EIO or ENOTCONN: prints the
                         errno name, or "read-ok".
  pieces MNT NAME ID N PIECE
                         writes pieces j*2+ID (j < N) of PIECE bytes of
                         NAME through one descriptor, each a pattern of (ID,
                         j): two writers (ID 0 and 1, two mounts) interleave
                         in every stripe.
  pieces-check MNT NAME N PIECE
                         NAME holds both writers' pieces: "ok".
"""
import errno
import json
import os
import random
import sys
import time

NFILES = 8
MAXSIZE = 600 * 1024


def load(path, default):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def save(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def model_path(state, name):
    return os.path.join(state, "model", name)


def read_model(state, name):
    try:
        with open(model_path(state, name), "rb") as f:
            return bytearray(f.read())
    except FileNotFoundError:
        return None


def write_model(state, name, data):
    p = model_path(state, name)
    with open(p + ".tmp", "wb") as f:
        f.write(data)
    os.replace(p + ".tmp", p)


def attempt(fn, status, state):
    """Runs fn until it succeeds; counts failures."""
    while True:
        try:
            return fn()
        except OSError as e:
            status["errors"] += 1
            status["last_errno"] = errno.errorcode.get(e.errno, str(e.errno))
            with open(os.path.join(state, "errors.log"), "a") as f:
                f.write("%.6f %s %s\n" % (time.time(), fn.__name__, status["last_errno"]))
            save(os.path.join(state, "status"), status)
            time.sleep(0.05)


def one_op(mnt, state, rng, status):
    name = "f%d" % rng.randrange(NFILES)
    path = os.path.join(mnt, name)
    cur = read_model(state, name)
    if cur is None:
        cur = bytearray()
    op = rng.random()
    if op < 0.6 or not cur:
        off = rng.randrange(0, min(len(cur) + 20000, MAXSIZE - 70000))
        ln = rng.choice([1, 7, 511, 513, 1000, 3071, 4096, 5000, 30000, 65537])
        data = os.urandom(ln)

        def w():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                n = os.pwrite(fd, data, off)
                if n != ln:
                    raise OSError(errno.EIO, "short write")
            finally:
                os.close(fd)
        attempt(w, status, state)
        if off > len(cur):
            cur.extend(bytes(off - len(cur)))
        cur[off:off + ln] = data
    elif op < 0.8:
        data = os.urandom(rng.randrange(1, 9000))
        off = len(cur)
        if off + len(data) > MAXSIZE:
            return

        def a():
            fd = os.open(path, os.O_WRONLY)
            try:
                os.pwrite(fd, data, off)
            finally:
                os.close(fd)
        attempt(a, status, state)
        cur.extend(data)
    else:
        size = rng.randrange(0, len(cur) + 10000)

        def t():
            os.truncate(path, size)
        attempt(t, status, state)
        if size < len(cur):
            del cur[size:]
        else:
            cur.extend(bytes(size - len(cur)))
    write_model(state, name, cur)


def run(mnt, state):
    os.makedirs(os.path.join(state, "model"), exist_ok=True)
    status = {"ops": 0, "errors": 0, "last_errno": ""}
    rng = random.Random(int(os.environ.get("EC_SEED", "7")))
    while not os.path.exists(os.path.join(state, "stop")):
        if os.path.exists(os.path.join(state, "pause")):
            open(os.path.join(state, "paused"), "w").close()
            time.sleep(0.02)
            continue
        if os.path.exists(os.path.join(state, "paused")):
            os.unlink(os.path.join(state, "paused"))
        one_op(mnt, state, rng, status)
        status["ops"] += 1
        save(os.path.join(state, "status"), status)
    open(os.path.join(state, "stopped"), "w").close()


def verify(mnt, state):
    for name in sorted(os.listdir(os.path.join(state, "model"))):
        if name.endswith(".tmp"):
            continue
        want = read_model(state, name)
        with open(os.path.join(mnt, name), "rb") as f:
            got = f.read()
        if got != want:
            first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                         min(len(got), len(want)))
            print("%s differs: %d bytes, want %d, first difference at %d" %
                  (name, len(got), len(want), first))
            return
    print("ok")


def bricks(state, k, chunk, dirs):
    stripe = k * chunk
    for name in sorted(os.listdir(os.path.join(state, "model"))):
        if name.endswith(".tmp"):
            continue
        want = read_model(state, name)
        fsize = (len(want) + stripe - 1) // stripe * chunk
        for i, d in enumerate(dirs):
            try:
                with open(os.path.join(d, name), "rb") as f:
                    frag = f.read()
            except OSError as e:
                print("%s on child %d: %s" % (name, i, e.strerror))
                return
            if len(frag) != fsize:
                print("%s on child %d: %d bytes, want %d" % (name, i, len(frag), fsize))
                return
            if i >= k:
                continue
            for s in range(fsize // chunk):
                lo = s * stripe + i * chunk
                part = want[lo:lo + chunk]
                part += bytes(chunk - len(part))
                if frag[s * chunk:(s + 1) * chunk] != part:
                    print("%s on child %d: fragment of stripe %d differs" % (name, i, s))
                    return
    print("ok")


def touch(mnt, state):
    for name in sorted(os.listdir(os.path.join(state, "model"))):
        if name.endswith(".tmp"):
            continue
        p = os.path.join(mnt, name)
        try:
            os.stat(p)
            with open(p, "rb") as f:
                f.read(1)
        except OSError:
            pass
    print("ok")


def read_fails(mnt, name):
    try:
        with open(os.path.join(mnt, name), "rb") as f:
            f.read()
        print("read-ok")
    except OSError as e:
        print(errno.errorcode.get(e.errno, str(e.errno)))


def piece(i, j, size):
    return bytes(((i * 131 + j * 7 + k) % 251) for k in range(size))


def pieces(mnt, name, wid, n, size):
    fd = os.open(os.path.join(mnt, name), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        for j in range(n):
            os.pwrite(fd, piece(wid, j, size), (j * 2 + wid) * size)
    finally:
        os.close(fd)
    print("ok")


def pieces_check(mnt, name, n, size):
    with open(os.path.join(mnt, name), "rb") as f:
        got = f.read()
    want = b"".join(piece(j % 2, j // 2, size) for j in range(2 * n))
    if got == want:
        print("ok")
    else:
        first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                     min(len(got), len(want)))
        print("differs: %d bytes, want %d, first difference at %d" % (len(got), len(want), first))


def main():
    cmd = sys.argv[1]
    if cmd == "run":
        run(sys.argv[2], sys.argv[3])
    elif cmd == "verify":
        verify(sys.argv[2], sys.argv[3])
    elif cmd == "bricks":
        bricks(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:])
    elif cmd == "touch":
        touch(sys.argv[2], sys.argv[3])
    elif cmd == "read-fails":
        read_fails(sys.argv[2], sys.argv[3])
    elif cmd == "pieces":
        pieces(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    elif cmd == "pieces-check":
        pieces_check(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif cmd == "get":
        print(load(os.path.join(sys.argv[2], "status"), {}).get(sys.argv[3], ""))
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
