#!/usr/bin/env python3
"""dht-check.py — looks at the bricks of a distribute volume from outside,
for the integration tests (tests/integration/20?-*.t, through
tests/lib/dht.sh). It reimplements the placement rules of
docs/design/distribute.md (the hash, the canonical table) so that a test can
check where every file is, not only that the mount shows it.

    hashed NSUB BRICKDIR DIR NAME...
        the hashed subvolume index of each NAME in DIR (relative to the
        volume root, "." for the root; its GFID read from the brick), one
        per line
    counts BRICKDIR...
        data files per brick (regular files that are not link files; the
        .brickfs folder left out), space separated
    spread PERCENT BRICKDIR...
        "ok" when every brick's count is within PERCENT of the mean, else
        the counts and the mean
    audit [--except=REL] VOLUME BRICKDIR...   (the bricks in volume order)
        "ok", or one line per problem (at most 20, then a count), REL (a
        folder a workload still changes) left out:
        - a directory missing on a brick, or with another GFID;
        - a data file on more than one brick;
        - a data file neither on its hashed brick nor pointed at by a link
          file there (same GFID, linkto = VOLUME-client-<its brick>);
        - a link file whose target brick has no data file of that GFID
          under that name (an orphan), or naming no subvolume at all, or
          on another brick than its name's hashed one (a leftover).
    readable MOUNTDIR BRICKDIR...
        "ok" when every data file directly in each BRICKDIR (a folder on a
        brick) reads through MOUNTDIR (the same folder on the mount) with
        the brick's content, else the first few that do not
    try OP PATH...
        for each PATH, "0" or the errno name (ENOTCONN...) of OP on it:
        read (open and read), stat, create (O_CREAT|O_EXCL, write PATH's
        name), mkdir, rmdir, unlink; one per line
    churn ROOT SECONDS SEED
        for SECONDS, random creates (with content), renames (also across
        directories and over existing names), unlinks, mkdirs and rmdirs
        on a small shared set of names in ROOT/s0..s3 (which must exist),
        so that two clients running it collide; prints the count of
        operations and of each errno met; exits 1 if an errno other than
        the ones races explain (ENOENT, EEXIST, ENOTEMPTY, ENOTDIR,
        EISDIR) was met
        NFILES files f0..f<NFILES-1> in each of d0..d<NDIRS-1> under ROOT
        (NDIRS 0: in ROOT itself); each holds its own relative path
    verify ROOT NDIRS NFILES
        "ok" when every such file exists and holds its path, else the
        first few that do not

Nothing here writes to a brick.
"""
import errno
import os
import stat
import sys

BUCKETS = 1 << 16
MASK = (1 << 64) - 1
GFID_KEY = "trusted.brickfs.gfid"
LINKTO_KEY = "trusted.brickfs.dht.linkto"
ROOT_GFID = bytes(15) + b"\x01"


def dht_hash(pgfid, name):
    h = 0xcbf29ce484222325
    for c in pgfid + name.encode():
        h = ((h ^ c) * 0x100000001b3) & MASK
    h ^= h >> 33
    h = (h * 0xff51afd7ed558ccd) & MASK
    h ^= h >> 33
    h = (h * 0xc4ceb9fe1a85ec53) & MASK
    h ^= h >> 33
    return h


_tables = {}


def canonical(n):
    """The canonical table of docs/design/distribute.md, grown 1 -> n."""
    if n in _tables:
        return _tables[n]
    t = [0] * BUCKETS
    for k in range(1, n):
        m = k + 1
        counts = [0] * m
        for s in t:
            counts[s] += 1
        give = [0] * m
        for s in range(k):
            want = BUCKETS // m + (1 if s < BUCKETS % m else 0)
            give[s] = max(counts[s] - want, 0)
        for b in range(BUCKETS - 1, -1, -1):
            s = t[b]
            if give[s]:
                give[s] -= 1
                t[b] = k
    _tables[n] = t
    return t


def hashed(n, pgfid, name):
    return canonical(n)[dht_hash(pgfid, name) >> 48]


def gfid_of(path):
    try:
        return os.getxattr(path, GFID_KEY, follow_symlinks=False)
    except OSError:
        return None


def is_linkfile(st):
    return stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == stat.S_ISVTX and \
        st.st_size == 0


def walk(brick):
    """(dirs {rel: gfid}, data {rel: gfid}, links {rel: (gfid, linkto)})"""
    dirs, data, links = {}, {}, {}
    for top, subdirs, files in os.walk(brick):
        if top == brick:
            subdirs[:] = [d for d in subdirs if d != ".brickfs"]
        rel_top = os.path.relpath(top, brick)
        for d in subdirs:
            rel = os.path.normpath(os.path.join(rel_top, d))
            dirs[rel] = gfid_of(os.path.join(top, d))
        for f in files:
            p = os.path.join(top, f)
            rel = os.path.normpath(os.path.join(rel_top, f))
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue  # unlinked by a client since the listing (a workload runs)
            if is_linkfile(st):
                try:
                    to = os.getxattr(p, LINKTO_KEY).rstrip(b"\0").decode()
                except OSError:
                    to = None
                links[rel] = (gfid_of(p), to)
            else:
                data[rel] = gfid_of(p)
    return dirs, data, links


def count_data(brick):
    return len(walk(brick)[1])


def cmd_counts(bricks):
    print(" ".join(str(count_data(b)) for b in bricks))


def cmd_spread(pct, bricks):
    counts = [count_data(b) for b in bricks]
    mean = sum(counts) / len(counts)
    ok = all(abs(c - mean) <= mean * float(pct) / 100 for c in counts)
    print("ok" if ok and mean > 0 else "counts %s mean %.1f" % (counts, mean))


def dir_gfid(brick, rel):
    return ROOT_GFID if rel in ("", ".") else gfid_of(os.path.join(brick, rel))


def parent_gfid(brick, rel):
    return dir_gfid(brick, os.path.dirname(rel))


def cmd_audit(vol, bricks, skip=None):
    n = len(bricks)
    trees = [walk(b) for b in bricks]
    if skip:  # a folder a workload still changes: left out
        inside = lambda rel: rel == skip or rel.startswith(skip + "/")  # noqa: E731
        trees = [tuple({k: v for k, v in part.items() if not inside(k)} for part in t)
                 for t in trees]
    problems = []
    alldirs = set().union(*(t[0].keys() for t in trees))
    for d in sorted(alldirs):
        gfids = set()
        for i, t in enumerate(trees):
            if d not in t[0]:
                problems.append("directory %s missing on brick %d" % (d, i))
            else:
                gfids.add(t[0][d])
        if len(gfids) > 1:
            problems.append("directory %s has %d GFIDs" % (d, len(gfids)))
    where = {}
    for i, t in enumerate(trees):
        for rel, g in t[1].items():
            where.setdefault(rel, []).append((i, g))
    for rel, places in sorted(where.items()):
        if len(places) > 1:
            problems.append("file %s has data on bricks %s" % (rel, [p[0] for p in places]))
            continue
        i, g = places[0]
        h = hashed(n, parent_gfid(bricks[i], rel), os.path.basename(rel))
        if h == i:
            continue
        link = trees[h][2].get(rel)
        if link != (g, "%s-client-%d" % (vol, i)):
            problems.append("file %s on brick %d hashes to %d, link there: %s" % (rel, i, h, link))
    for h, t in enumerate(trees):
        for rel, (g, to) in sorted(t[2].items()):
            prefix = vol + "-client-"
            if not to or not to.startswith(prefix) or not to[len(prefix):].isdigit() or \
                    int(to[len(prefix):]) >= n:
                problems.append("link file %s on brick %d names %r" % (rel, h, to))
                continue
            target = int(to[len(prefix):])
            want = hashed(n, parent_gfid(bricks[h], rel), os.path.basename(rel))
            if want != h:
                problems.append("link file %s on brick %d, its hashed brick is %d" % (rel, h, want))
            if rel not in trees[target][1] or trees[target][1][rel] != g or g is None:
                problems.append("link file %s on brick %d points at brick %d: no such file"
                                % (rel, h, target))
    if not problems:
        print("ok")
        return
    for p in problems[:20]:
        print(p)
    if len(problems) > 20:
        print("... %d problems in all" % len(problems))


def names(ndirs, nfiles):
    for d in (["d%d" % i for i in range(ndirs)] if ndirs else [""]):
        for f in range(nfiles):
            yield os.path.join(d, "f%d" % f)


def cmd_populate(root, ndirs, nfiles):
    for i in range(ndirs):
        os.mkdir(os.path.join(root, "d%d" % i))
    for rel in names(ndirs, nfiles):
        with open(os.path.join(root, rel), "w") as f:
            f.write(rel + "\n")


def cmd_verify(root, ndirs, nfiles):
    bad = []
    for rel in names(ndirs, nfiles):
        try:
            with open(os.path.join(root, rel)) as f:
                if f.read() != rel + "\n":
                    bad.append(rel + ": wrong content")
        except OSError as e:
            bad.append("%s: %s" % (rel, e.strerror))
        if len(bad) >= 5:
            break
    print("ok" if not bad else "\n".join(bad))


def cmd_readable(mnt, dirs):
    bad, n = [], 0
    for d in dirs:
        for f in sorted(os.listdir(d)):
            p = os.path.join(d, f)
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode) or is_linkfile(st):
                continue
            n += 1
            with open(p, "rb") as fh:
                want = fh.read()
            try:
                with open(os.path.join(mnt, f), "rb") as fh:
                    if fh.read() != want:
                        bad.append(f + ": wrong content")
            except OSError as e:
                bad.append("%s: %s" % (f, e.strerror))
            if len(bad) >= 5:
                break
    print("ok" if not bad and n else "\n".join(bad) or "no files")


def try_one(op, path):
    try:
        if op == "read":
            with open(path, "rb") as f:
                f.read()
        elif op == "stat":
            os.stat(path)
        elif op == "create":
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.write(fd, os.path.basename(path).encode() + b"\n")
            finally:
                os.close(fd)
        elif op == "mkdir":
            os.mkdir(path)
        elif op == "rmdir":
            os.rmdir(path)
        elif op == "unlink":
            os.unlink(path)
        else:
            sys.exit("dht-check.py: unknown op " + op)
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    return "0"


# ESTALE: the object a name led to was removed by the other client between
# the kernel's lookup and the call, and again after the kernel's one retry
# with a fresh lookup — a race a network file system shows (NFS does too).
RACE_ERRNOS = {errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR,
               errno.ESTALE}


def cmd_churn(root, seconds, seed):
    import random
    import time
    rnd = random.Random(seed)
    dirs = [os.path.join(root, "s%d" % i) for i in range(4)]
    deadline = time.monotonic() + seconds
    ops, errs = 0, {}

    def name():
        return os.path.join(rnd.choice(dirs), "k%d" % rnd.randrange(40))

    def subdir():
        return os.path.join(rnd.choice(dirs), "sub%d" % rnd.randrange(4))

    while time.monotonic() < deadline:
        op = rnd.random()
        try:
            if op < 0.35:
                p = name()
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    os.write(fd, os.path.basename(p).encode() + b"\n")
                finally:
                    os.close(fd)
            elif op < 0.65:
                os.rename(name(), name())
            elif op < 0.85:
                os.unlink(name())
            elif op < 0.93:
                os.mkdir(subdir())
            else:
                os.rmdir(subdir())
        except OSError as e:
            errs[errno.errorcode.get(e.errno, e.errno)] = \
                errs.get(errno.errorcode.get(e.errno, e.errno), 0) + 1
            if e.errno not in RACE_ERRNOS:
                print("%s: %s" % (e.filename, e.strerror))
        ops += 1
    print("ops %d errors %s" % (ops, errs))
    bad = [k for k in errs if getattr(errno, str(k), None) not in RACE_ERRNOS]
    sys.exit(1 if bad else 0)


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "hashed":
        n, g = int(args[0]), dir_gfid(args[1], args[2])
        for name in args[3:]:
            print(hashed(n, g, name))
    elif cmd == "counts":
        cmd_counts(args)
    elif cmd == "spread":
        cmd_spread(args[0], args[1:])
    elif cmd == "audit":
        skip = None
        if args and args[0].startswith("--except="):
            skip = args[0][len("--except="):]
            args = args[1:]
        cmd_audit(args[0], args[1:], skip)
    elif cmd == "readable":
        cmd_readable(args[0], args[1:])
    elif cmd == "try":
        for p in args[1:]:
            print(try_one(args[0], p))
    elif cmd == "churn":
        cmd_churn(args[0], float(args[1]), int(args[2]))
    elif cmd == "populate":
        cmd_populate(args[0], int(args[1]), int(args[2]))
    elif cmd == "verify":
        cmd_verify(args[0], int(args[1]), int(args[2]))
    else:
        sys.exit("dht-check.py: unknown command " + cmd)


if __name__ == "__main__":
    main(sys.argv)
