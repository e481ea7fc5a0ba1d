#!/usr/bin/env python3
"""Page cache residency of a file, by mincore(2) through a shared mapping
(mapping reads nothing). Imported by fuse-dio.py; as a program:

  pagecache.py FILE    prints the percent of FILE's pages in the page cache
"""
import ctypes
import mmap
import os
import sys

PAGE = mmap.PAGESIZE


def resident(fd, length):
    """Pages of fd's first length bytes in the page cache."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap: " + os.strerror(ctypes.get_errno()))
    try:
        vec = (ctypes.c_ubyte * ((length + PAGE - 1) // PAGE))()
        if libc.mincore(addr, length, vec) != 0:
            raise OSError(ctypes.get_errno(), "mincore: " + os.strerror(ctypes.get_errno()))
        return sum(v & 1 for v in vec)
    finally:
        libc.munmap(addr, length)


def main():
    fd = os.open(sys.argv[1], os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pages = (size + PAGE - 1) // PAGE
        print(100 * resident(fd, size) // pages if pages else 0)
    finally:
        os.close(fd)


if __name__ == "__main__":
    main()
