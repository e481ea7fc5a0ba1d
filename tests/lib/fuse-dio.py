#!/usr/bin/env python3
"""Helper of 026-fuse-direct-writes.t: whether writes through an open of a
FUSE file left pages in the kernel's page cache, and whether an open reader
sees them.

  fuse-dio.py resident PATH wronly|rdwr
      PATH exists. Opens a reader, then a writer with those flags, writes
      1 MiB of a pattern through the writer and closes it; prints how many of
      the file's 256 pages are in the page cache (mincore through a mapping
      of the reader) and "same" or "differs" for the reader's read of them.
  fuse-dio.py overwrite PATH
      An open reader that has read 8 KiB sees 4 bytes written through a
      write-only open at offset 100: "seen" or the bytes it read.
  fuse-dio.py mapshared PATH
      A shared mapping of PATH opened for reading and writing: "ok" or the
      error's name (the kernel refuses one for a direct I/O open: ENODEV).
  fuse-dio.py tail PATH
      A reader at the end of a 100-byte file reads the 50 bytes a
      write-only O_APPEND open adds: "seen" or what it read.
"""
import errno
import mmap
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pagecache import resident  # noqa: E402

MIB = 1 << 20


def pattern(n):
    return bytes((i * 7 + 3) & 0xFF for i in range(256)) * (n // 256)


def cmd_resident(path, how):
    flags = os.O_WRONLY if how == "wronly" else os.O_RDWR
    r = os.open(path, os.O_RDONLY)
    w = os.open(path, flags)
    data = pattern(MIB)
    os.write(w, data)
    os.close(w)
    n = resident(r, MIB)
    same = os.pread(r, MIB, 0) == data
    os.close(r)
    print(n, "same" if same else "differs")


def cmd_overwrite(path):
    r = os.open(path, os.O_RDONLY)
    os.pread(r, 8192, 0)
    w = os.open(path, os.O_WRONLY)
    os.pwrite(w, b"bbbb", 100)
    os.close(w)
    got = os.pread(r, 4, 100)
    os.close(r)
    print("seen" if got == b"bbbb" else repr(got))


def cmd_tail(path):
    r = os.open(path, os.O_RDONLY)
    os.read(r, 1000)
    w = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.write(w, b"y" * 50)
    os.close(w)
    got = os.read(r, 1000)
    os.close(r)
    print("seen" if got == b"y" * 50 else repr(got))


def cmd_mapshared(path):
    fd = os.open(path, os.O_RDWR)
    try:
        mmap.mmap(fd, 1, mmap.MAP_SHARED).close()
        print("ok")
    except OSError as e:
        print(errno.errorcode.get(e.errno, str(e.errno)))
    finally:
        os.close(fd)


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    if cmd == "resident":
        cmd_resident(path, sys.argv[3])
    elif cmd == "overwrite":
        cmd_overwrite(path)
    elif cmd == "mapshared":
        cmd_mapshared(path)
    elif cmd == "tail":
        cmd_tail(path)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
