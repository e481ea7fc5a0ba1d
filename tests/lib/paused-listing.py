#!/usr/bin/env python3
"""paused-listing.py DIR READY GO OUT [NAME...] — one listing of DIR that
pauses in its middle, for tests of what happens to an open directory while
the mount changes under it (a graph switch).

It reads DIR with getdents64 (one FUSE readdir per call) until a call has
returned one of the NAMEs (or the end, when none is given), then creates
READY and waits (at most 600 s) for GO to exist; then it reads on to the
end through the same open directory. OUT gets every name read, one a line
("." and ".." left out), and "eod" last once the end was reached.
"""
import ctypes
import os
import struct
import sys
import time

SYS_GETDENTS64 = 217  # x86_64


def batch(libc, fd):
    buf = ctypes.create_string_buffer(4096)
    n = libc.syscall(SYS_GETDENTS64, fd, buf, len(buf))
    if n < 0:
        raise OSError(ctypes.get_errno(), "getdents64")
    out, off, raw = [], 0, buf.raw[:n]
    while off < n:
        _ino, _doff, reclen, _typ = struct.unpack_from("QqHB", raw, off)
        name = raw[off + 19:off + reclen].split(b"\0", 1)[0].decode()
        if name not in (".", ".."):
            out.append(name)
        off += reclen
    return out


def main():
    d, ready, go, outp = sys.argv[1:5]
    want = set(sys.argv[5:])
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    names, eod, paused = [], False, False
    while not eod:
        b = batch(libc, fd)
        eod = not b
        names += b
        if not paused and (eod or want & set(b)):
            paused = True
            open(ready, "w").close()
            t0 = time.time()
            while not os.path.exists(go) and time.time() - t0 < 600:
                time.sleep(0.05)
    os.close(fd)
    with open(outp, "w") as f:
        f.write("".join(n + "\n" for n in names) + "eod\n")


if __name__ == "__main__":
    main()
