#!/usr/bin/env python3
"""brick-compare.py — compare the bricks of one replica set, as they are on
disk (run as root: trusted.* xattrs), and print every difference.

    brick-compare.py [--arbiter DIR] [--no-pending] [--ignore-xattr RE]...
                     DIR DIR [DIR...]

Every brick must hold the same tree (the brick's own .brickfs folder is
left out). For each path, compared across all bricks:

  type          regular, directory, symlink, fifo, ...
  mode, owner   permission bits, uid, gid
  symlink       the target
  data          size and SHA-256 of the content (regular files; not on
                the arbiter, whose files must be empty: "arbiter holds data")
  xattrs        user.*, security.*, system.*, and trusted.* — among them
                trusted.brickfs.gfid and trusted.brickfs.dht.* — must be
                equal; trusted.brickfs.afr.* are replicate's counters, which
                legitimately differ from brick to brick while they are
                zero: any non-zero one is printed as "pending" (a heal is
                still owed) unless --no-pending.

Times, inode numbers and link counts are not compared (they legitimately
differ). --ignore-xattr RE (repeatable) leaves out more xattr names.

Output: one line per difference, "PATH: what", then a summary line
"identical (N paths)" or "N differences"; exit status 0 when identical,
1 otherwise, 2 on bad usage.
"""
import argparse
import hashlib
import os
import re
import stat
import sys

HIDDEN = ".brickfs"
AFR = "trusted.brickfs.afr."


def kind(mode):
    for test, name in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "dir"), (stat.S_ISLNK, "symlink"),
                       (stat.S_ISFIFO, "fifo"), (stat.S_ISCHR, "chardev"),
                       (stat.S_ISBLK, "blockdev"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "unknown"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def xattrs(path, ignore):
    """(compared xattrs, non-zero afr counters) of path."""
    out, pending = {}, {}
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return out, pending
    for n in names:
        if any(r.search(n) for r in ignore):
            continue
        try:
            v = os.getxattr(path, n, follow_symlinks=False)
        except OSError:
            continue
        if n.startswith(AFR):
            if any(v):
                pending[n] = v.hex()
            continue
        out[n] = v.hex()
    return out, pending


def walk(root):
    """Relative paths of everything under root ("" is the root itself)."""
    paths = [""]
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        rel = "" if rel == "." else rel
        if rel == "":
            dirs[:] = [x for x in dirs if x != HIDDEN]
            files = [x for x in files if x != HIDDEN]
        for name in sorted(dirs + files):
            paths.append(os.path.join(rel, name))
        # symlinks to directories are listed in dirs but not followed (os.walk default)
    return paths


def describe(root, rel, arbiter, ignore):
    p = os.path.join(root, rel) if rel else root
    st = os.lstat(p)
    k = kind(st.st_mode)
    d = {"type": k, "mode": "%o" % stat.S_IMODE(st.st_mode), "owner": "%d:%d" % (st.st_uid,
                                                                                  st.st_gid)}
    if k == "symlink":
        d["target"] = os.readlink(p)
    if k == "file":
        if arbiter:
            d["arbiter_size"] = st.st_size
        else:
            d["size"] = st.st_size
            d["sha256"] = sha256(p)
    d["xattrs"], d["pending"] = xattrs(p, ignore)
    return d


def compare(bricks, arbiter, ignore, check_pending):
    diffs = []
    listing = {b: set(walk(b)) for b in bricks}
    every = sorted(set().union(*listing.values()))
    for rel in every:
        shown = rel or "/"
        missing = [b for b in bricks if rel not in listing[b]]
        if missing:
            diffs.append("%s: missing on %s" % (shown, ", ".join(missing)))
            continue
        descs = {}
        for b in bricks:
            try:
                descs[b] = describe(b, rel, b == arbiter, ignore)
            except OSError as e:
                diffs.append("%s: cannot read on %s: %s" % (shown, b, e.strerror))
        if len(descs) != len(bricks):
            continue
        ref_b = next(b for b in bricks if b != arbiter)
        ref = descs[ref_b]
        for b in bricks:
            d = descs[b]
            if check_pending and d["pending"]:
                diffs.append("%s: pending on %s: %s" % (
                    shown, b, " ".join("%s=%s" % kv for kv in sorted(d["pending"].items()))))
            if b == ref_b:
                continue
            for key in ("type", "mode", "owner", "target", "size", "sha256"):
                if key in d and key in ref and d[key] != ref[key]:
                    diffs.append("%s: %s differs: %s has %s, %s has %s" % (
                        shown, key, ref_b, ref[key], b, d[key]))
            if d.get("arbiter_size"):
                diffs.append("%s: arbiter holds data: %d bytes on %s" % (
                    shown, d["arbiter_size"], b))
            for n in sorted(set(ref["xattrs"]) | set(d["xattrs"])):
                a, c = ref["xattrs"].get(n), d["xattrs"].get(n)
                if a != c:
                    diffs.append("%s: xattr %s differs: %s has %s, %s has %s" % (
                        shown, n, ref_b, a if a is not None else "none", b,
                        c if c is not None else "none"))
    return diffs, len(every)


def main():
    ap = argparse.ArgumentParser(description="compare the bricks of a replica set")
    ap.add_argument("--arbiter", help="the arbiter brick (one of DIRS): names and metadata only")
    ap.add_argument("--no-pending", action="store_true",
                    help="do not report non-zero trusted.brickfs.afr.* counters")
    ap.add_argument("--ignore-xattr", action="append", default=[], metavar="RE",
                    help="leave out xattrs whose name matches RE (repeatable)")
    ap.add_argument("bricks", nargs="+", metavar="DIR")
    a = ap.parse_args()
    if len(a.bricks) < 2:
        ap.error("give at least two bricks")
    for b in a.bricks:
        if not os.path.isdir(b):
            ap.error("%s is not a directory" % b)
    if a.arbiter and a.arbiter not in a.bricks:
        ap.error("--arbiter must be one of the bricks")
    if a.arbiter and len(a.bricks) < 3:
        ap.error("an arbiter needs two data bricks besides it")
    try:
        ignore = [re.compile(r) for r in a.ignore_xattr]
    except re.error as e:
        ap.error("bad --ignore-xattr: %s" % e)
    diffs, n = compare(a.bricks, a.arbiter, ignore, not a.no_pending)
    for d in diffs:
        print(d)
    print("identical (%d paths)" % n if not diffs else "%d differences" % len(diffs))
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())
