#!/usr/bin/env python3
"""fuse-ops.py — file system calls for integration tests, one per command,
with answers a shell test can compare: "ok", a value, or the errno name.

    fuse-ops.py try OP ARGS...     run one call: prints ok / value / ENAME
    fuse-ops.py seek PATH data|hole OFFSET
    fuse-ops.py xattr-probe PATH NAME    size probe and ERANGE of getxattr
    fuse-ops.py list-probe PATH          size probe and ERANGE of listxattr
    fuse-ops.py bigio PATH               reads and writes past 4 GiB
    fuse-ops.py unlinked PATH            an unlinked file stays usable while open
    fuse-ops.py lock-hold PATH START LEN READYFILE [flock]
    fuse-ops.py lock-try PATH START LEN [flock]   non-blocking: ok / EAGAIN
    fuse-ops.py lock-wait PATH START LEN [flock]  blocking: prints ms waited
    fuse-ops.py many DIR N               creates N empty files
    fuse-ops.py count DIR                entries readdir returns (without . ..)
    fuse-ops.py longpath                 every call on 4,095-byte relative paths (cwd)
    fuse-ops.py cfr SRC DST              copy_file_range SRC to DST, prints bytes
    fuse-ops.py stat PATH FIELD          one st_FIELD of lstat (mtime_ns, nlink, ...)
    fuse-ops.py same-attrs A B           "same", or which attributes of A and B differ
                                         (mode, uid, gid, size, atime, mtime, ctime)

Every failure that is not an expected errno prints a message and exits 1.
"""
import ctypes
import ctypes.util
import errno
import fcntl
import os
import stat
import sys
import time

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
AT_FDCWD = -100
RENAME_FLAGS = {"noreplace": 1, "exchange": 2}
FALLOC = {"keep": 1, "punch": 2 | 1, "collapse": 8, "zero": 16, "insert": 32}


def ename(e):
    if e.errno == errno.EOPNOTSUPP:  # == ENOTSUP on Linux; say it the usual way
        return "EOPNOTSUPP"
    return errno.errorcode.get(e.errno, str(e.errno))


def renameat2(a, b, flags):
    if libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def fallocate(path, mode, off, length):
    fd = os.open(path, os.O_RDWR)
    try:
        libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
        if libc.fallocate(fd, mode, off, length) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    finally:
        os.close(fd)


def xattr_value(v):
    """@N: N bytes; hex:HEX: those bytes; else the text itself."""
    if v.startswith("@"):
        return b"x" * int(v[1:])
    if v.startswith("hex:"):
        return bytes.fromhex(v[4:])
    return v.encode()


def op_try(op, args):
    """One call; returns what to print on success."""
    if op == "rmdir":
        os.rmdir(args[0])
    elif op == "mkdir":
        os.mkdir(args[0])
    elif op == "unlink":
        os.unlink(args[0])
    elif op == "rename":
        if len(args) > 2:
            renameat2(args[0], args[1], RENAME_FLAGS[args[2]])
        else:
            os.rename(args[0], args[1])
    elif op == "link":
        os.link(args[0], args[1])
    elif op == "symlink":
        os.symlink(args[0], args[1])
    elif op == "create_excl":
        os.close(os.open(args[0], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    elif op == "create":
        os.close(os.open(args[0], os.O_CREAT | os.O_WRONLY, 0o644))
    elif op == "open_r":
        os.close(os.open(args[0], os.O_RDONLY))
    elif op == "open_w":
        os.close(os.open(args[0], os.O_WRONLY))
    elif op in ("write", "write_rw"):
        fd = os.open(args[0], os.O_WRONLY if op == "write" else os.O_RDWR)
        try:
            os.write(fd, args[1].encode())
        finally:
            os.close(fd)
    elif op == "read":
        with open(args[0], "rb") as f:
            return f.read().decode(errors="replace")
    elif op == "stat":
        os.lstat(args[0])
    elif op == "truncate":
        os.truncate(args[0], int(args[1]))
    elif op == "chmod":
        os.chmod(args[0], int(args[1], 8))
    elif op == "chown":
        os.chown(args[0], int(args[1]), int(args[2]))
    elif op == "utime":
        os.utime(args[0], (int(args[1]), int(args[1])) if len(args) > 1 else None)
    elif op == "setxattr":
        flags = {"create": os.XATTR_CREATE, "replace": os.XATTR_REPLACE}.get(
            args[3] if len(args) > 3 else "", 0)
        os.setxattr(args[0], args[1], xattr_value(args[2]), flags)
    elif op == "getxattr":
        return os.getxattr(args[0], args[1]).decode(errors="replace")
    elif op == "removexattr":
        os.removexattr(args[0], args[1])
    elif op == "listxattr":
        return " ".join(sorted(os.listxattr(args[0])))
    elif op == "fallocate":
        fallocate(args[0], FALLOC[args[1]], int(args[2]), int(args[3]))
    elif op == "readlink":
        return os.readlink(args[0])
    elif op == "listdir":
        return " ".join(sorted(os.listdir(args[0])))
    elif op == "mkfifo":
        os.mkfifo(args[0])
    elif op == "fsync":
        fd = os.open(args[0], os.O_RDONLY)
        try:
            os.fsync(fd)
            os.fdatasync(fd)
        finally:
            os.close(fd)
    elif op == "fsyncdir":
        fd = os.open(args[0], os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    else:
        sys.exit("fuse-ops.py: unknown op " + op)
    return "ok"


def cmd_try(args):
    try:
        print(op_try(args[0], args[1:]))
    except OSError as e:
        print(ename(e))


def cmd_seek(args):
    path, what, off = args[0], args[1], int(args[2])
    fd = os.open(path, os.O_RDONLY)
    try:
        print(os.lseek(fd, off, os.SEEK_DATA if what == "data" else os.SEEK_HOLE))
    except OSError as e:
        print(ename(e))
    finally:
        os.close(fd)


def raw_getxattr(path, name, size):
    buf = ctypes.create_string_buffer(max(size, 1))
    n = libc.getxattr(path.encode(), name.encode(), buf if size else None, ctypes.c_size_t(size))
    if n < 0:
        return errno.errorcode[ctypes.get_errno()], b""
    return n, buf.raw[:n] if size else b""


def cmd_xattr_probe(args):
    """Prints 'SIZE SMALL FULL': the size a 0-byte probe reports, what a
    buffer one byte too small gets, and whether the full read matches."""
    path, name = args
    size, _ = raw_getxattr(path, name, 0)
    if not isinstance(size, int):
        print(size)
        return
    small, _ = raw_getxattr(path, name, size - 1) if size > 0 else ("none", b"")
    n, val = raw_getxattr(path, name, size)
    ok = n == size and val == os.getxattr(path, name)
    print(size, small, "full-ok" if ok else "full-bad")


def cmd_list_probe(args):
    path = args[0]
    size = libc.listxattr(path.encode(), None, ctypes.c_size_t(0))
    buf = ctypes.create_string_buffer(max(size, 1))
    small = libc.listxattr(path.encode(), buf, ctypes.c_size_t(size - 1)) if size > 0 else 0
    small_e = errno.errorcode.get(ctypes.get_errno(), "?") if small < 0 else "none"
    full = libc.listxattr(path.encode(), buf, ctypes.c_size_t(size))
    print(size, small_e, "full-ok" if full == size else "full-bad")


def cmd_bigio(args):
    path = args[0]
    big = 5 << 30
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        assert os.pwrite(fd, b"head", 0) == 4
        assert os.pwrite(fd, b"past-4GiB", big) == 9
        assert os.pwrite(fd, b"at-4GiB", 4 << 30) == 7
        assert os.fstat(fd).st_size == big + 9, "size %d" % os.fstat(fd).st_size
        assert os.pread(fd, 9, big) == b"past-4GiB"
        assert os.pread(fd, 7, 4 << 30) == b"at-4GiB"
        assert os.pread(fd, 16, (4 << 30) - 8) == b"\0" * 8 + b"at-4GiB\0"
        assert os.pread(fd, 4096, 1 << 31) == b"\0" * 4096, "hole is not zeros"
        assert os.pread(fd, 100, big + 5) == b"4GiB", "short read at end"
        assert os.pread(fd, 100, big + 100) == b"", "read past end"
        # one 1 MiB write and read straddling 4 GiB
        blob = bytes(range(256)) * 4096
        assert os.pwrite(fd, blob, (4 << 30) - (1 << 19)) == len(blob)
        assert os.pread(fd, len(blob), (4 << 30) - (1 << 19)) == blob
    finally:
        os.close(fd)
    st = os.stat(path)
    assert st.st_blocks * 512 < st.st_size, "a 5 GiB sparse file took %d blocks" % st.st_blocks
    print("ok")


def cmd_unlinked(args):
    path = args[0]
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"before")
        os.unlink(path)
        assert not os.path.exists(path), "name still there"
        assert os.pread(fd, 100, 0) == b"before"
        assert os.pwrite(fd, b" after", 6) == 6
        assert os.pread(fd, 100, 0) == b"before after"
        st = os.fstat(fd)
        assert st.st_nlink == 0, "nlink %d" % st.st_nlink
        assert st.st_size == 12, "size %d" % st.st_size
        os.ftruncate(fd, 3)
        assert os.pread(fd, 100, 0) == b"bef"
        os.fchmod(fd, 0o600)
        assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o600
        os.fsync(fd)
    finally:
        os.close(fd)
    print("ok")


def lock(path, start, length, flock, blocking):
    fd = os.open(path, os.O_RDWR)
    if flock:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    else:
        fcntl.lockf(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB), length, start)
    return fd


def cmd_lock_hold(args):
    path, start, length, ready = args[0], int(args[1]), int(args[2]), args[3]
    flock = len(args) > 4 and args[4] == "flock"
    fd = lock(path, start, length, flock, True)
    with open(ready, "w") as f:
        f.write("locked\n")
    time.sleep(3600)  # until killed: the kernel then flushes and releases
    os.close(fd)


def cmd_lock_try(args):
    flock = len(args) > 3 and args[3] == "flock"
    try:
        fd = lock(args[0], int(args[1]), int(args[2]), flock, False)
        os.close(fd)
        print("ok")
    except OSError as e:
        print(ename(e))


def cmd_lock_wait(args):
    flock = len(args) > 3 and args[3] == "flock"
    t0 = time.monotonic()
    fd = lock(args[0], int(args[1]), int(args[2]), flock, True)
    print(int((time.monotonic() - t0) * 1000))
    os.close(fd)


def cmd_many(args):
    d, n = args[0], int(args[1])
    for i in range(n):
        os.close(os.open(os.path.join(d, "f%05d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
    print("ok")


def cmd_count(args):
    with os.scandir(args[0]) as it:
        names = [e.name for e in it]
    assert len(names) == len(set(names)), "duplicate names in a listing"
    print(len(names))


def long_rel_path(prefix, total):
    """A relative path of exactly `total` bytes under prefix/ made of
    components of at most 255 bytes."""
    parts, left = [prefix], total - len(prefix)
    while left > 0:
        left -= 1  # the '/'
        n = min(255, left)
        if 0 < left - n < 2:   # keep room for a last component of >= 1 byte
            n -= 2
        parts.append(chr(ord("a") + len(parts) % 26) * n)
        left -= n
    p = "/".join(parts)
    assert len(p) == total, (len(p), total)
    return p


def cmd_longpath(args):
    p = long_rel_path("lp", 4095)
    q = p[:-1] + "Q"        # a sibling, same length
    d = os.path.dirname(p)
    steps = []

    def step(name, fn):
        steps.append(name)
        fn()

    step("makedirs", lambda: os.makedirs(d))
    step("create", lambda: os.close(os.open(p, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o640)))
    with open(p, "wb") as f:
        f.write(b"deep")
    step("read", lambda: (open(p, "rb").read() == b"deep") or fail("read"))
    step("stat", lambda: os.stat(p).st_size == 4 or fail("stat"))
    step("chmod", lambda: os.chmod(p, 0o600))
    step("chown", lambda: os.chown(p, 0, 0))
    step("utime", lambda: os.utime(p, (1000000000, 1000000000)))
    step("utime-check", lambda: os.stat(p).st_mtime == 1000000000 or fail("mtime"))
    step("truncate", lambda: os.truncate(p, 2))
    step("setxattr", lambda: os.setxattr(p, "user.deep", b"1"))
    step("getxattr", lambda: os.getxattr(p, "user.deep") == b"1" or fail("getxattr"))
    step("listxattr", lambda: "user.deep" in os.listxattr(p) or fail("listxattr"))
    step("removexattr", lambda: os.removexattr(p, "user.deep"))
    step("access", lambda: os.access(p, os.R_OK) or fail("access"))
    step("link", lambda: os.link(p, q))
    step("link-count", lambda: os.stat(p).st_nlink == 2 or fail("nlink"))
    step("unlink", lambda: os.unlink(q))
    step("rename", lambda: os.rename(p, q))
    step("rename-back", lambda: os.rename(q, p))
    step("symlink", lambda: os.symlink("target", q))
    step("readlink", lambda: os.readlink(q) == "target" or fail("readlink"))
    step("unlink-symlink", lambda: os.unlink(q))
    step("mkfifo", lambda: os.mkfifo(q))
    step("unlink-fifo", lambda: os.unlink(q))
    step("mkdir", lambda: os.mkdir(q))
    step("listdir", lambda: sorted(os.listdir(d)) == sorted([os.path.basename(p),
                                                             os.path.basename(q)]) or fail("ls"))
    step("rmdir", lambda: os.rmdir(q))
    step("opendir-fd", lambda: os.close(os.open(d, os.O_RDONLY | os.O_DIRECTORY)))
    step("statvfs", lambda: os.statvfs(p))
    step("unlink-file", lambda: os.unlink(p))
    print("ok")


def fail(what):
    raise AssertionError(what + " gave a wrong answer")


def cmd_cfr(args):
    src = os.open(args[0], os.O_RDONLY)
    dst = os.open(args[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        n, total = 1, 0
        while n > 0:
            n = os.copy_file_range(src, dst, 1 << 20)
            total += n
        print(total)
    finally:
        os.close(src)
        os.close(dst)


def cmd_stat(args):
    print(getattr(os.lstat(args[0]), "st_" + args[1]))


def cmd_same_attrs(args):
    a, b = os.lstat(args[0]), os.lstat(args[1])
    fields = ["mode", "uid", "gid", "size", "atime_ns", "mtime_ns", "ctime_ns"]
    diff = ["%s %s!=%s" % (f, getattr(a, "st_" + f), getattr(b, "st_" + f))
            for f in fields if getattr(a, "st_" + f) != getattr(b, "st_" + f)]
    print("; ".join(diff) if diff else "same")


COMMANDS = {
    "stat": cmd_stat, "same-attrs": cmd_same_attrs,
    "try": cmd_try, "seek": cmd_seek, "xattr-probe": cmd_xattr_probe,
    "list-probe": cmd_list_probe, "bigio": cmd_bigio, "unlinked": cmd_unlinked,
    "lock-hold": cmd_lock_hold, "lock-try": cmd_lock_try, "lock-wait": cmd_lock_wait,
    "many": cmd_many, "count": cmd_count, "longpath": cmd_longpath, "cfr": cmd_cfr,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    try:
        COMMANDS[sys.argv[1]](sys.argv[2:])
    except (AssertionError, OSError) as e:
        sys.exit("fuse-ops.py %s: %s" % (sys.argv[1], e))
