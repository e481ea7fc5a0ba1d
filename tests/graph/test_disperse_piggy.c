/*
 * test_disperse_piggy.c — the calls a small file costs each brick of a
 * dispersed volume (4+2) once disperse's changelog steps ride in other
 * calls (lib/txn-piggy.c, features/locks/locks-txn.c;
 * docs/design/disperse.md "Small files"): each child is storage/posix under
 * features/locks under debug/io-stats (c0..c5: what reached each brick),
 * in one process.
 *
 * Checks, with the calls counted at each brick and the xattrs read on the
 * brick directories:
 *   - after a warm-up (the first entry change takes the long way), a create
 *     + 4 KiB write + flush costs each brick one entrylk (the pre-op rides
 *     in the create, the unlock in the post-op), one xattrop (the entry
 *     post-op), no inodelk (the create took the file's data lock), the
 *     write carrying the size delta (lib/wadd-wire.h), one fxattrop (the
 *     data post-op carrying the unlock) and no read (a write of whole new
 *     stripes reads nothing);
 *   - the files read back right, the data fragments on the bricks are the
 *     file's bytes, no dirty mark is left and the data locks are free;
 *   - an unlink costs one entrylk, the unlink and one xattrop;
 *   - a sequential write of 1 MiB blocks costs each brick one write per
 *     block and one fxattrop (the post-op at the flush);
 *   - a create that fails everywhere (EEXIST) leaves no dirty mark;
 *   - a file created and never written loses its lock and its mark at the
 *     delayed post-op;
 *   - with R children down the same path still works (the create takes the
 *     lock on the others) and the returning children are healed.
 *   - under performance/write-behind, 1 MiB writes go down from the
 *     caller's bytes with no copy in either translator, and read back as
 *     written (data and parity) after the caller scribbled over them.
 * EC_PIGGY_BENCH=N instead times N small files (create + 4 KiB write +
 * flush, then unlink): files/s and CPU per file of the whole process,
 * printed, nothing asserted.
 * Needs root (trusted xattrs); skips otherwise.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../lib/cluster-graph.h"
#include "../lib/tap.h"
#include "core/graph.h"

enum { N = 6, R = 2, K = N - R, CHUNK = 1024, STRIPE = K * CHUNK };

/* 4+2 over posix, features/locks (l<i>), debug/io-stats (s<i>: what
 * reached brick i), error-gen (c<i>); foreground heals; the post-op delay
 * (ms); extra: more disperse options ("" for none). */
static int vol_open_x(struct cg_vol *v, int delay_ms, const char *extra)
{
    static const char *const layers[] = {"features/locks l", "debug/io-stats s", NULL};
    char top[512];
    snprintf(top, sizeof(top),
             " type cluster/disperse\n option redundancy %d\n"
             " option cluster.background-self-heal-count 0\n"
             " option cluster.post-op-delay-ms %d\n%s", R, delay_ms, extra);
    return cg_vol_open(v, N, layers, top);
}

static int vol_open(struct cg_vol *v, const char *extra)
{
    return vol_open_x(v, 50, extra);
}

static struct bfs_xl *xl_of(struct cg_vol *v, const char *prefix, int i)
{
    char name[16];
    snprintf(name, sizeof(name), "%s%d", prefix, i);
    return bfs_graph_find(v->g, name);
}

/* Calls of fop that reached brick i (its io-stats dump). */
static uint64_t calls(struct cg_vol *v, int i, const char *fop)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":{\"count\":", fop);
    struct bfs_xl *s = xl_of(v, "s", i);
    char *d = s ? s->mod->dump(s) : NULL;
    const char *p = d ? strstr(d, pat) : NULL;
    uint64_t n = p ? strtoull(p + strlen(pat), NULL, 10) : 0;
    free(d);
    return n;
}

static const char *const FOPS[] = {"lookup", "entrylk", "inodelk", "finodelk", "xattrop",
                                   "fxattrop", "create", "write", "read", "flush", "unlink"};
enum { NFOPS = sizeof(FOPS) / sizeof(FOPS[0]) };

struct counts {
    uint64_t c[N][NFOPS];
};

static void snap(struct cg_vol *v, struct counts *s)
{
    for (int i = 0; i < N; i++)
        for (int f = 0; f < NFOPS; f++)
            s->c[i][f] = calls(v, i, FOPS[f]);
}

/* snap() once the calls behind earlier answers (post-ops, unlocks) have
 * come in: no count moved for 200 ms (at most 5 s). */
static void snap_quiet(struct cg_vol *v, struct counts *s)
{
    struct counts b;
    snap(v, s);
    for (int k = 0; k < 25; k++) {
        usleep(200000);
        snap(v, &b);
        if (memcmp(&b, s, sizeof(b)) == 0)
            return;
        *s = b;
    }
}

/* Calls of FOPS[f] on brick i since s. */
static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* How many times a run of calls on one file may have lost its data lock
 * window on a loaded machine. The window ends the post-op delay (50 ms
 * here) after the last call and 1 s after it began at the latest; a call
 * after that locks again (one inodelk) and has a pre-op and post-op of its
 * own (two fxattrop). pace_step() after each call counts the calls that
 * took the delay or longer (the idle time before the next is shorter),
 * plus one per second of the whole run. On a quiet machine: none. */
#define PACE_DELAY_S 0.05
struct pace {
    double t0, last;
    int slow;
};

static void pace_start(struct pace *p)
{
    p->t0 = p->last = wall_s();
    p->slow = 0;
}

static void pace_step(struct pace *p)
{
    double now = wall_s();
    p->slow += now - p->last >= PACE_DELAY_S;
    p->last = now;
}

static int pace_breaks(const struct pace *p)
{
    if (p->slow)
        printf("# %d call(s) took the post-op delay or longer (loaded machine)\n", p->slow);
    return p->slow + (int)(p->last - p->t0);
}

static int since(struct cg_vol *v, const struct counts *s, int i, const char *fop)
{
    for (int f = 0; f < NFOPS; f++)
        if (strcmp(FOPS[f], fop) == 0)
            return (int)(calls(v, i, fop) - s->c[i][f]);
    return -1;
}

/* since(), polled for up to 5 s until it reaches want (calls behind an
 * answer are counted when they answer). */
static int since_reach(struct cg_vol *v, const struct counts *s, int i, const char *fop, int want)
{
    int n = since(v, s, i, fop);
    for (int k = 0; k < 500 && n < want; k++) {
        usleep(10000);
        n = since(v, s, i, fop);
    }
    return n;
}

/* Brick i's data lock calls for f files each created, written once and
 * flushed, `slow` of which may have lost their data window (struct pace):
 * no inodelk (each create took its file's data lock) and one fxattrop per
 * file (its post-op; the size rides in the write), plus one inodelk and
 * two fxattrop per slow file at most. */
static void data_locks_ok(struct cg_vol *v, const struct counts *s, int i, int f, int slow,
                          const char *what)
{
    int lk = since(v, s, i, "inodelk") + since(v, s, i, "finodelk");
    ok(lk <= slow, "%sc%d: no inodelk (each create took its file's data lock): %d, %d slow "
       "file(s)", what, i, lk, slow);
    int fx = since_reach(v, s, i, "fxattrop", f); /* the last post-op runs behind its close */
    ok(fx >= f && fx <= f + 2 * slow, "%sc%d: one fxattrop per file (the post-op; the size "
       "rides in the write): %d for %d files, %d slow", what, i, fx, f, slow);
}

static void print_counts(struct cg_vol *v, const struct counts *s, int i, int files)
{
    char line[512];
    size_t len = 0;
    for (int f = 0; f < NFOPS; f++) {
        int n = since(v, s, i, FOPS[f]);
        if (n > 0)
            len += (size_t)snprintf(line + len, sizeof(line) - len, " %s %.2f", FOPS[f],
                                    (double)n / files);
    }
    printf("# c%d per file:%s\n", i, line);
}

/* Type t's counter of key (version or dirty) on brick i's rel. */
static long long xnum(struct cg_vol *v, int i, const char *rel, const char *key, int t)
{
    char path[PATH_MAX + 64];
    uint8_t raw[24];
    snprintf(path, sizeof(path), "%s/%s", v->brick[i], rel);
    if (lgetxattr(path, key, raw, sizeof(raw)) < (ssize_t)(8 * (t + 1)))
        return 0;
    uint64_t be;
    memcpy(&be, raw + 8 * t, 8);
    return (long long)be64toh(be);
}

/* No dirty mark of type t on rel on the children of mask, within 5 s. */
static bool clean_soon(struct cg_vol *v, const char *rel, int t, uint32_t mask)
{
    for (int k = 0; k < 500; k++) {
        bool clean = true;
        for (int i = 0; i < N; i++)
            if (mask & (1u << i))
                clean = clean && xnum(v, i, rel, "trusted.brickfs.ec.dirty", t) == 0;
        if (clean)
            return true;
        usleep(10000);
    }
    return false;
}

/* Another owner's non-blocking try for the data lock of g on brick i. */
static int try_data_lock(struct bfs_xl *x, struct bfs_stack *st, const struct bfs_gfid *g,
                         short type)
{
    struct bfs_inodelk_req r = {.domain = "ec", .cmd = BFS_LK_SETLK};
    r.loc.gfid = *g;
    r.lock.type = type;
    return bfs_sync_inodelk(x, st, &r, NULL);
}

/* Can another owner take the data lock of g on brick i (polled 5 s)? */
static bool data_lock_free(struct cg_vol *v, int i, const struct bfs_gfid *g)
{
    struct bfs_xl *x = xl_of(v, "s", i);
    struct bfs_stack *st = bfs_stack_new();
    st->lk_owner = 777;
    int rc = -1;
    for (int k = 0; k < 500 && (rc = try_data_lock(x, st, g, F_WRLCK)) != 0; k++)
        usleep(10000);
    if (rc == 0)
        try_data_lock(x, st, g, F_UNLCK);
    bfs_stack_unref(st);
    return rc == 0;
}

static struct bfs_loc L(const char *name)
{
    struct bfs_loc l = {0};
    l.pargfid.b[15] = 1; /* the root */
    l.name = name;
    return l;
}

/* As FUSE makes it: an fd on the inode of the GFID the create asks for. */
static int create(struct cg_vol *v, const char *name, struct bfs_gfid *g, struct bfs_fd **fdp)
{
    bfs_gfid_generate(g);
    struct bfs_inode *inode = bfs_inode_get(v->g->itable, g, S_IFREG);
    struct bfs_fd *fd = bfs_fd_new(v->g, inode, O_RDWR, 0);
    bfs_inode_unref(inode);
    struct bfs_dict *x = bfs_dict_new();
    bfs_dict_set_bin(x, "gfid-req", g->b, sizeof(g->b));
    struct bfs_create_req req = {.loc = L(name), .fd = fd, .flags = O_RDWR | O_CREAT | O_EXCL,
                                 .mode = 0644, .xdata = x};
    int rc = bfs_sync_create(v->top, v->st, &req, NULL);
    bfs_dict_unref(x);
    if (rc < 0 || !fdp)
        bfs_fd_unref(fd);
    else
        *fdp = fd;
    return rc;
}

static void fill(uint8_t *b, size_t len, int seed)
{
    for (size_t j = 0; j < len; j++)
        b[j] = (uint8_t)(j * 7 + (size_t)seed * 13 + 1);
}

/* create + write of len bytes + flush, as `cp` of a small file does. */
static int small_file(struct cg_vol *v, const char *name, int seed, size_t len, struct bfs_gfid *g)
{
    struct bfs_fd *fd = NULL;
    uint8_t buf[3 * STRIPE];
    int rc = create(v, name, g, &fd);
    if (rc < 0)
        return rc;
    fill(buf, len, seed);
    struct bfs_write_req w = {.fd = fd, .offset = 0};
    w.data.data = buf;
    w.data.len = len;
    rc = bfs_sync_write(v->top, v->st, &w, NULL);
    struct bfs_flush_req f = {.fd = fd};
    int frc = bfs_sync_flush(v->top, v->st, &f, NULL);
    bfs_fd_unref(fd);
    return rc < 0 ? rc : rc != (int)len ? -EIO : frc;
}

/* The data fragments of name on the data bricks of mask are its bytes. */
static bool fragments_right(struct cg_vol *v, const char *name, int seed, size_t len, uint32_t mask)
{
    uint8_t want[3 * STRIPE], got[CHUNK];
    fill(want, len, seed);
    size_t stripes = (len + STRIPE - 1) / STRIPE;
    for (int i = 0; i < K; i++) {
        if (!(mask & (1u << i)))
            continue;
        char path[PATH_MAX + 64];
        snprintf(path, sizeof(path), "%s/%s", v->brick[i], name);
        FILE *fp = fopen(path, "r");
        if (!fp)
            return false;
        bool right = true;
        for (size_t s = 0; s < stripes && right; s++) {
            size_t n = fread(got, 1, CHUNK, fp);
            size_t off = s * STRIPE + (size_t)i * CHUNK;
            for (size_t j = 0; j < CHUNK && right; j++)
                right = (j < n ? got[j] : 0) == (off + j < len ? want[off + j] : 0);
        }
        right = right && fgetc(fp) == EOF;
        fclose(fp);
        if (!right)
            return false;
    }
    return true;
}

/* Reads name back through the volume. */
static bool reads_right(struct cg_vol *v, const char *name, int seed, size_t len)
{
    struct bfs_lookup_req lr = {.loc = L(name)};
    struct bfs_lookup_rep lrep;
    if (bfs_sync_lookup(v->top, v->st, &lr, &lrep) < 0)
        return false;
    struct bfs_gfid g = lrep.attr.gfid;
    uint64_t size = lrep.attr.size;
    bfs_lookup_rep_clear_dup(&lrep);
    struct bfs_inode *inode = bfs_inode_get(v->g->itable, &g, S_IFREG);
    struct bfs_fd *fd = bfs_fd_new(v->g, inode, O_RDONLY, 0);
    bfs_inode_unref(inode);
    struct bfs_open_req o = {.fd = fd, .flags = O_RDONLY};
    o.loc.gfid = g;
    bool right = size == len && bfs_sync_open(v->top, v->st, &o, NULL) == 0;
    struct bfs_read_req rq = {.fd = fd, .size = 3 * STRIPE, .offset = 0};
    struct bfs_read_rep rp;
    uint8_t want[3 * STRIPE];
    fill(want, len, seed);
    if (right && bfs_sync_read(v->top, v->st, &rq, &rp) >= 0) {
        right = rp.data.len == len && memcmp(rp.data.data, want, len) == 0;
        bfs_read_rep_clear_dup(&rp);
    } else {
        right = false;
    }
    struct bfs_flush_req f = {.fd = fd};
    bfs_sync_flush(v->top, v->st, &f, NULL);
    bfs_fd_unref(fd);
    return right;
}

/* The first entry changes take the long way, until a post-op's reply has
 * told disperse that the bricks know the keys: creates until one costs a
 * single xattrop per brick (its post-op). */
static bool warm_up(struct cg_vol *v)
{
    for (int k = 0; k < 100; k++) {
        char name[32];
        struct counts s;
        struct bfs_gfid g;
        snap(v, &s);
        snprintf(name, sizeof(name), "warm%d", k);
        if (create(v, name, &g, NULL) < 0 || !clean_soon(v, ".", 2, 0x3f) ||
            !clean_soon(v, name, 0, 0x3f))
            return false;
        bool piggy = true;
        for (int i = 0; i < N; i++)
            piggy = piggy && since(v, &s, i, "xattrop") == 1;
        if (piggy)
            return true;
    }
    return false;
}

static void test_small_files(struct cg_vol *v)
{
    enum { F = 10 };
    struct counts s;
    struct bfs_gfid g[F];
    char name[32];
    ok(warm_up(v), "warm-up: creates carry their pre-op");
    /* the first extending write to a brick asks whether it takes the size
     * delta in the write (probe, with the fxattrop beside it) */
    is_int(small_file(v, "warmw", 1, 100, &g[0]), 0, "warm-up: a first small file");
    snap_quiet(v, &s);
    /* a file whose create, write and flush took the post-op delay may have
     * lost the create's data lock before its write came (struct pace) */
    struct pace pc;
    int slow = 0;
    for (int k = 0; k < F; k++) {
        snprintf(name, sizeof(name), "f%d", k);
        pace_start(&pc);
        is_int(small_file(v, name, k, STRIPE, &g[k]), 0, "create + 4 KiB write + flush of %s",
               name);
        pace_step(&pc);
        slow += pc.slow + (int)(pc.last - pc.t0);
    }
    ok(clean_soon(v, ".", 2, 0x3f), "no entry dirty mark on the parent");
    for (int i = 0; i < N; i++) {
        since_reach(v, &s, i, "xattrop", F); /* entry post-ops, behind the answers */
        print_counts(v, &s, i, F);
        is_int(since(v, &s, i, "entrylk"), F, "c%d: one entrylk per file (unlock in the post-op)",
               i);
        is_int(since(v, &s, i, "xattrop"), F, "c%d: one xattrop per file (entry post-op)", i);
        data_locks_ok(v, &s, i, F, slow, "");
        is_int(since(v, &s, i, "write"), F, "c%d: one write per file", i);
        is_int(since(v, &s, i, "read"), 0, "c%d: no read (whole new stripes)", i);
    }
    for (int k = 0; k < F; k += 3) {
        snprintf(name, sizeof(name), "f%d", k);
        ok(fragments_right(v, name, k, STRIPE, 0xf), "%s: data fragments on the bricks", name);
        ok(clean_soon(v, name, 0, 0x3f), "%s: no data dirty mark", name);
        bool freed = true;
        for (int i = 0; i < N; i++)
            freed = freed && data_lock_free(v, i, &g[k]);
        ok(freed, "%s: the data lock is free on every brick", name);
        ok(reads_right(v, name, k, STRIPE), "%s reads back right", name);
    }
    /* a file of several stripes and a partial one: still no read */
    snap_quiet(v, &s);
    is_int(small_file(v, "big", 99, 2 * STRIPE + 100, &g[0]), 0, "a file of 2 stripes + 100 B");
    for (int i = 0; i < N; i++)
        is_int(since(v, &s, i, "read"), 0, "c%d: written without reading", i);
    ok(reads_right(v, "big", 99, 2 * STRIPE + 100), "it reads back right");
    ok(fragments_right(v, "big", 99, 2 * STRIPE + 100, 0xf), "its data fragments are right");
    for (int i = 0; i < N; i++)
        is_int((int)xnum(v, i, "big", "trusted.brickfs.ec.size", 0), 2 * STRIPE + 100,
               "c%d: the size counter moved with the write", i);

    snap_quiet(v, &s);
    for (int k = 0; k < F; k++) {
        snprintf(name, sizeof(name), "f%d", k);
        struct bfs_unlink_req u = {.loc = L(name)};
        is_int(bfs_sync_unlink(v->top, v->st, &u, NULL), 0, "unlink %s", name);
    }
    ok(clean_soon(v, ".", 2, 0x3f), "no entry dirty mark after the unlinks");
    for (int i = 0; i < N; i++) {
        since_reach(v, &s, i, "xattrop", F);
        print_counts(v, &s, i, F);
        is_int(since(v, &s, i, "entrylk"), F, "c%d: one entrylk per unlink", i);
        is_int(since(v, &s, i, "xattrop"), F, "c%d: one xattrop per unlink", i);
        is_int(since(v, &s, i, "unlink"), F, "c%d: one unlink per unlink", i);
        char p[PATH_MAX + 8];
        snprintf(p, sizeof(p), "%s/f3", v->brick[i]);
        ok(access(p, F_OK) < 0 && errno == ENOENT, "c%d: f3 is gone", i);
    }
}

/* How many entry windows a run of changes that took `secs` can have used
 * at most. A window ends TXN_WINDOW_MAX_MS (1 s) after it began at the
 * latest, and this volume's post-op delay (1 s) after its last change when
 * idle; the next begins after that (no other owner contends here), so two
 * beginnings are more than 1 s apart: at most 1 + secs windows. A loaded
 * machine makes the run slow, not the windows short; one spare for the
 * clock read around the run rather than inside the translator. */
static int windows_max(double secs)
{
    return 2 + (int)secs;
}

/* Can another owner take the whole root directory's entry lock on brick i
 * (polled 5 s)? */
static bool dir_lock_free(struct cg_vol *v, int i)
{
    struct bfs_xl *x = xl_of(v, "s", i);
    struct bfs_stack *st = bfs_stack_new();
    st->lk_owner = 778;
    struct bfs_entrylk_req r = {.domain = "ec", .cmd = BFS_ENTRYLK_LOCK_NB,
                                .type = BFS_ENTRYLK_WRLCK};
    r.loc.gfid.b[15] = 1;
    int rc = -1;
    for (int k = 0; k < 500 && (rc = bfs_sync_entrylk(x, st, &r, NULL)) != 0; k++)
        usleep(10000);
    if (rc == 0) {
        r.cmd = BFS_ENTRYLK_UNLOCK;
        (void)bfs_sync_entrylk(x, st, &r, NULL);
    }
    bfs_stack_unref(st);
    return rc == 0;
}

/* The directory's entry window (disperse.other-eager-lock, the default):
 * the creates and unlinks of names in one directory share one entrylk of
 * the whole directory and one pre-op / post-op of its changelog; each costs
 * its brick only the fop (and the create's file its write and data
 * post-op). */
static void test_entry_window(struct cg_vol *v)
{
    enum { F = 20 }; /* a window lasts 1 s at most: a slow run takes a few */
    struct counts s;
    struct bfs_gfid g[F];
    char name[32];
    is_int(small_file(v, "w-warm", 1, 100, &g[0]), 0, "window: a first small file");
    ok(clean_soon(v, ".", 2, 0x3f), "window: released after the delay (no entry mark)");
    for (int i = 0; i < N; i++)
        ok(dir_lock_free(v, i), "window: c%d: the directory's lock is released", i);
    snap_quiet(v, &s);
    double t0 = wall_s();
    struct pace pc;
    int slow = 0; /* files that may have lost their data window (struct pace) */
    for (int k = 0; k < F; k++) {
        snprintf(name, sizeof(name), "x%d", k);
        pace_start(&pc);
        is_int(small_file(v, name, k, STRIPE, &g[k]), 0, "window: create + write + flush of %s",
               name);
        pace_step(&pc);
        slow += pc.slow + (int)(pc.last - pc.t0);
    }
    int wmax = windows_max(wall_s() - t0);
    printf("# %d creates in %.2f s: at most %d windows\n", F, wall_s() - t0, wmax);
    ok(clean_soon(v, ".", 2, 0x3f), "window: no entry dirty mark");
    for (int i = 0; i < N; i++) {
        print_counts(v, &s, i, F);
        ok(since(v, &s, i, "entrylk") <= 2 * wmax, "window: c%d: the directory locked once "
           "per window (%d entrylk for %d creates, %d windows at most)", i,
           since(v, &s, i, "entrylk"), F, wmax);
        ok(since(v, &s, i, "xattrop") <= 2 * wmax, "window: c%d: one entry pre-op and post-op "
           "per window (%d xattrop)", i, since(v, &s, i, "xattrop"));
        is_int(since(v, &s, i, "create"), F, "window: c%d: one create per file", i);
        data_locks_ok(v, &s, i, F, slow, "window: ");
        is_int(since(v, &s, i, "write"), F, "window: c%d: one write per file", i);
    }
    for (int k = 0; k < F; k += 3) {
        snprintf(name, sizeof(name), "x%d", k);
        ok(fragments_right(v, name, k, STRIPE, 0xf), "window: %s: data fragments", name);
        ok(clean_soon(v, name, 0, 0x3f), "window: %s: no data dirty mark", name);
        ok(reads_right(v, name, k, STRIPE), "window: %s reads back right", name);
    }
    snap_quiet(v, &s);
    t0 = wall_s();
    for (int k = 0; k < F; k++) {
        snprintf(name, sizeof(name), "x%d", k);
        struct bfs_unlink_req u = {.loc = L(name)};
        is_int(bfs_sync_unlink(v->top, v->st, &u, NULL), 0, "window: unlink %s", name);
    }
    wmax = windows_max(wall_s() - t0);
    printf("# %d unlinks in %.2f s: at most %d windows\n", F, wall_s() - t0, wmax);
    ok(clean_soon(v, ".", 2, 0x3f), "window: no entry dirty mark after the unlinks");
    for (int i = 0; i < N; i++) {
        print_counts(v, &s, i, F);
        ok(since(v, &s, i, "entrylk") <= 2 * wmax && since(v, &s, i, "xattrop") <= 2 * wmax,
           "window: c%d: the unlinks share one lock and changelog (%d entrylk, %d xattrop)", i,
           since(v, &s, i, "entrylk"), since(v, &s, i, "xattrop"));
        is_int(since(v, &s, i, "unlink"), F, "window: c%d: one unlink per unlink", i);
        char p[PATH_MAX + 8];
        snprintf(p, sizeof(p), "%s/x3", v->brick[i]);
        ok(access(p, F_OK) < 0 && errno == ENOENT, "window: c%d: x3 is gone", i);
        is_int((int)xnum(v, i, ".", "trusted.brickfs.ec.version", 2), 0,
               "window: c%d: nobody blamed (entry version 0)", i);
    }
    /* an unlink a child fails under the window: it is blamed (the others'
     * entry version moves) and a lookup of the directory heals it */
    is_int(small_file(v, "y", 1, 100, &g[0]), 0, "window: y created");
    cg_down(v, 3, true);
    struct bfs_unlink_req u = {.loc = L("y")};
    is_int(bfs_sync_unlink(v->top, v->st, &u, NULL), 0, "window: unlink y with c3 down");
    ok(xnum(v, 0, ".", "trusted.brickfs.ec.version", 2) > 0,
       "window: the others are ahead (entry version)");
    cg_up(v, 3, true);
    struct bfs_lookup_req lr = {0};
    lr.loc.gfid.b[15] = 1;
    ok(bfs_sync_lookup(v->top, v->st, &lr, NULL) == 0, "window: lookup of the directory");
    char p[PATH_MAX + 8];
    snprintf(p, sizeof(p), "%s/y", v->brick[3]);
    ok(access(p, F_OK) < 0 && errno == ENOENT, "window: the heal removed y from c3");
    ok(clean_soon(v, ".", 2, 0x3f), "window: no entry dirty mark after the heal");
}

/* A sequential write of 1 MiB blocks, as dd through FUSE: one call per
 * brick per block (the size rides in it), one post-op at the flush. */
static void test_seq_write(struct cg_vol *v)
{
    enum { BLOCKS = 8, BS = 1 << 20 };
    struct counts s;
    struct bfs_gfid g;
    struct bfs_fd *fd = NULL;
    uint8_t *buf = malloc(BS);
    struct pace pc;
    snap_quiet(v, &s);
    pace_start(&pc);
    is_int(create(v, "seq", &g, &fd), 0, "create seq");
    pace_step(&pc);
    int good = 0;
    for (int b = 0; b < BLOCKS && buf; b++) {
        fill(buf, BS, b);
        struct bfs_write_req w = {.fd = fd, .offset = (uint64_t)b * BS};
        w.data.data = buf;
        w.data.len = BS;
        good += bfs_sync_write(v->top, v->st, &w, NULL) == BS;
        pace_step(&pc);
    }
    is_int(good, BLOCKS, "%d writes of 1 MiB", BLOCKS);
    struct bfs_flush_req f = {.fd = fd};
    is_int(bfs_sync_flush(v->top, v->st, &f, NULL), 0, "flush");
    bfs_fd_unref(fd);
    int breaks = pace_breaks(&pc);
    for (int i = 0; i < N; i++) {
        print_counts(v, &s, i, BLOCKS);
        is_int(since(v, &s, i, "write"), BLOCKS, "c%d: one write per block", i);
        /* the post-op runs behind the flush's answer */
        int fx = since_reach(v, &s, i, "fxattrop", 1);
        ok(fx >= 1 && fx <= 1 + 2 * breaks, "c%d: one fxattrop in all (the post-op): %d, %d "
           "window break(s) allowed", i, fx, breaks);
        int lk = since(v, &s, i, "inodelk") + since(v, &s, i, "finodelk");
        ok(lk <= breaks, "c%d: no inodelk: %d, %d window break(s) allowed", i, lk, breaks);
        is_int((int)xnum(v, i, "seq", "trusted.brickfs.ec.size", 0), BLOCKS * BS,
               "c%d: size counter", i);
    }
    ok(buf && clean_soon(v, "seq", 0, 0x3f), "no data dirty mark");
    free(buf);
}

/* The file read through the volume is model[0, len). */
static bool file_is(struct cg_vol *v, struct bfs_fd *fd, const uint8_t *model, size_t len)
{
    struct bfs_read_req rq = {.fd = fd, .size = (uint32_t)len + 1, .offset = 0};
    struct bfs_read_rep rp;
    if (bfs_sync_read(v->top, v->st, &rq, &rp) < 0)
        return false;
    bool right = rp.data.len == len && memcmp(rp.data.data, model, len) == 0;
    bfs_read_rep_clear_dup(&rp);
    return right;
}

/* A write of whole stripes is encoded from the caller's bytes inside the
 * call (disperse-write.c, whole_stripes): its payload is not copied; any
 * other write copies it, its piece being built under the lock, after the
 * call may have returned. Every child answers 100 ms late, so the first
 * write's lock is still being taken when its call returns; the caller
 * scribbles over its buffer then. What the file holds must be the bytes as
 * they were when written (cg_scribbled_write). */
/* A new file `name` whose children answer 100 ms late; the bytes to
 * write into it (len, from seed), or NULL. */
static uint8_t *slow_file(struct cg_vol *v, const char *name, size_t len, int seed,
                          struct bfs_fd **fd)
{
    struct bfs_gfid g;
    uint8_t *model = malloc(len);
    if (!model)
        return NULL;
    fill(model, len, seed);
    is_int(create(v, name, &g, fd), 0, "create %s", name);
    for (int i = 0; i < N; i++)
        cg_reconf(v, i, "delay-ms", "100");
    return model;
}

/* The children on time again: the file holds model, data and parity
 * (read with two data children down), then flush and close. */
static void as_written(struct cg_vol *v, struct bfs_fd *fd, uint8_t *model, size_t len)
{
    for (int i = 0; i < N; i++)
        cg_reconf(v, i, "delay-ms", "0");
    ok(file_is(v, fd, model, len), "the file holds the bytes as written, not the later scribbles");
    cg_down(v, 0, true);
    cg_down(v, 2, true);
    ok(file_is(v, fd, model, len), "and so do the parity fragments (2 data children down)");
    cg_up(v, 0, true);
    cg_up(v, 2, true);
    struct bfs_flush_req f = {.fd = fd};
    is_int(bfs_sync_flush(v->top, v->st, &f, NULL), 0, "flush");
    bfs_fd_unref(fd);
    free(model);
}

static void test_lent_payload(struct cg_vol *v)
{
    enum { BS = 1 << 20, ODD = STRIPE + 100, LEN = 2 * BS + ODD };
    struct bfs_fd *fd = NULL;
    uint8_t *model = slow_file(v, "lent", LEN, 3, &fd);
    if (!model)
        return;
    uint64_t lent0 = cg_top_stat(v, "writes_lent"), copied0 = cg_top_stat(v, "writes_copied");
    is_int(cg_scribbled_write(v, fd, 0, model, BS, NULL), BS, "1 MiB of whole stripes (takes the lock)");
    is_int(cg_scribbled_write(v, fd, BS, model + BS, BS, NULL), BS, "the next MiB (joins it)");
    is_int((int)(cg_top_stat(v, "writes_lent") - lent0), 2, "both encoded from the caller's bytes");
    is_int((int)(cg_top_stat(v, "writes_copied") - copied0), 0, "neither payload copied");
    is_int(cg_scribbled_write(v, fd, 2 * BS, model + 2 * BS, ODD, NULL), ODD, "a write ending inside a stripe");
    is_int((int)(cg_top_stat(v, "writes_copied") - copied0), 1, "its payload was copied");
    as_written(v, fd, model, LEN);
}

/* Counter key of translator name's own dump (0 when absent). */
static uint64_t xl_stat(struct cg_vol *v, const char *name, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    struct bfs_xl *x = bfs_graph_find(v->g, name);
    char *d = x && x->mod->dump ? x->mod->dump(x) : NULL;
    const char *at = d ? strstr(d, pat) : NULL;
    uint64_t n = at ? strtoull(at + strlen(pat), NULL, 10) : 0;
    free(d);
    return n;
}

/* 4+2 as vol_open (post-op delay 50 ms) under performance/write-behind "wb"
 * (the top): a mount's write path. */
static int wb_vol_open(struct cg_vol *v)
{
    static const char *const layers[] = {"features/locks l", "debug/io-stats s", NULL};
    char top[512];
    snprintf(top, sizeof(top),
             " type cluster/disperse\n option redundancy %d\n"
             " option cluster.background-self-heal-count 0\n"
             " option cluster.post-op-delay-ms 50\n", R);
    return cg_vol_open_above(v, N, layers, top,
                             "volume wb\n type performance/write-behind\n subvolumes rep\n"
                             "end-volume\n");
}

/* Write-behind sends a big write it can send at once from the caller's
 * bytes, inside the call, and answers it after the send (wb-queue.c,
 * bfs__wb_write): no copy of the payload there, and disperse below encodes
 * the whole stripes from those same bytes before its wind returns. Every
 * child answers 100 ms late, the caller scribbles over its buffer as soon
 * as it is answered: the file must hold the bytes as written, data and
 * parity (read back with two data children down). */
static void test_wb_lent(struct cg_vol *v)
{
    enum { BS = 1 << 20, SMALL = 100, LEN = 2 * BS + SMALL };
    struct bfs_fd *fd = NULL;
    uint8_t *model = slow_file(v, "wblent", LEN, 5, &fd);
    if (!model)
        return;
    uint64_t wl0 = cg_top_stat(v, "writes_lent"), wc0 = cg_top_stat(v, "writes_copied");
    uint64_t el0 = xl_stat(v, "rep", "writes_lent"), ec0 = xl_stat(v, "rep", "writes_copied");
    is_int(cg_scribbled_write(v, fd, 0, model, BS, NULL), BS, "1 MiB through write-behind");
    is_int(cg_scribbled_write(v, fd, BS, model + BS, BS, NULL), BS, "the next MiB (2 out)");
    is_int((int)(cg_top_stat(v, "writes_lent") - wl0), 2,
           "write-behind sent both from the caller's bytes");
    is_int((int)(cg_top_stat(v, "writes_copied") - wc0), 0, "and copied neither");
    is_int((int)(xl_stat(v, "rep", "writes_lent") - el0), 2,
           "disperse encoded both from those bytes");
    is_int((int)(xl_stat(v, "rep", "writes_copied") - ec0), 0, "... without a copy either");
    is_int(cg_scribbled_write(v, fd, 2 * BS, model + 2 * BS, SMALL, NULL), SMALL,
           "a small write");
    is_int((int)(cg_top_stat(v, "writes_copied") - wc0), 1, "its payload was copied");
    as_written(v, fd, model, LEN);
}

/* storage/posix alone (through s0): a write carrying counter deltas adds
 * them once written and acknowledges; a probe is acknowledged and adds
 * nothing; a failed write adds nothing. */
static void test_posix_wadd(struct cg_vol *v)
{
    struct bfs_gfid g;
    struct bfs_fd *fd = NULL;
    is_int(create(v, "ctr", &g, &fd), 0, "create ctr");
    struct bfs_xl *s0 = xl_of(v, "s", 0);
    uint64_t be = htobe64(5);
    struct bfs_dict *x = bfs_dict_new();
    bfs_dict_set_bin(x, "brickfs.wadd:trusted.brickfs.test", &be, 8);
    struct bfs_write_req w = {.fd = fd, .offset = 0, .xdata = x};
    w.data.data = "abc";
    w.data.len = 3;
    struct bfs_write_rep rep;
    int64_t acked = 0;
    is_int(bfs_sync_write(s0, v->st, &w, &rep), 3, "a write with a delta");
    ok(bfs_dict_get_int(rep.xdata, "brickfs.wadded", &acked) == 0 && acked == 1, "acknowledged");
    bfs_write_rep_clear_dup(&rep);
    is_int(bfs_sync_write(s0, v->st, &w, NULL), 3, "again");
    is_int((int)xnum(v, 0, "ctr", "trusted.brickfs.test", 0), 10, "the counter moved by 5 twice");
    bfs_dict_unref(x);
    x = bfs_dict_new();
    bfs_dict_set_int(x, "brickfs.wadd-probe", 1);
    w.xdata = x;
    acked = 0;
    is_int(bfs_sync_write(s0, v->st, &w, &rep), 3, "a write with a probe");
    ok(bfs_dict_get_int(rep.xdata, "brickfs.wadded", &acked) == 0 && acked == 1,
       "acknowledged too");
    bfs_write_rep_clear_dup(&rep);
    bfs_dict_unref(x);
    x = bfs_dict_new();
    bfs_dict_set_bin(x, "brickfs.wadd:trusted.brickfs.test", &be, 8);
    w.xdata = x;
    w.offset = UINT64_MAX - 1; /* refused by the brick */
    ok(bfs_sync_write(s0, v->st, &w, NULL) < 0, "a write that fails");
    is_int((int)xnum(v, 0, "ctr", "trusted.brickfs.test", 0), 10, "adds nothing");
    bfs_dict_unref(x);
    struct bfs_flush_req f = {.fd = fd};
    bfs_sync_flush(v->top, v->st, &f, NULL);
    bfs_fd_unref(fd);
}

static void test_failures(struct cg_vol *v)
{
    struct bfs_gfid g;
    (void)create(v, "big", &g, NULL); /* made by test_small_files on the first volume */
    is_int(create(v, "big", &g, NULL), -EEXIST, "create of an existing name: EEXIST");
    ok(clean_soon(v, ".", 2, 0x3f), "its pre-op was taken back on every brick");

    is_int(create(v, "idle", &g, NULL), 0, "create idle (never written)");
    ok(clean_soon(v, "idle", 0, 0x3f), "its data mark is cleared by the delayed post-op");
    bool freed = true;
    for (int i = 0; i < N; i++)
        freed = freed && data_lock_free(v, i, &g);
    ok(freed, "and its data lock released on every brick");

    /* R children down: the same path on the others; they heal afterwards */
    cg_down(v, 1, true);
    cg_down(v, 4, true);
    is_int(small_file(v, "deg", 7, STRIPE + 10, &g), 0, "create + write + flush, 2 down");
    ok(reads_right(v, "deg", 7, STRIPE + 10), "reads back right with 2 down");
    ok(xnum(v, 0, "deg", "trusted.brickfs.ec.version", 0) > 0,
       "the children that took it are ahead (version)");
    cg_up(v, 1, true);
    cg_up(v, 4, true);
    ok(reads_right(v, "deg", 7, STRIPE + 10), "lookup after they are back heals, reads right");
    ok(fragments_right(v, "deg", 7, STRIPE + 10, 0xf), "data fragments right on every data brick");
    ok(clean_soon(v, "deg", 0, 0x3f), "no data dirty mark after the heal");
    for (int i = 0; i < N; i++)
        is_int((int)xnum(v, i, "deg", "trusted.brickfs.ec.size", 0), STRIPE + 10,
               "c%d: size counter right after the heal", i);
}

/* CPU seconds of the process (client and the 6 bricks: all in here). */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* EC_PIGGY_BENCH=N: N small files created and removed, timed (CPU of the
 * whole process per file: less bound to the machine's load than the wall
 * clock). Figures only, nothing asserted. */
static void measure(struct cg_vol *v, int n)
{
    char name[32];
    struct bfs_gfid g;
    double c0 = cpu_s(), w0 = wall_s();
    int bad = 0;
    for (int k = 0; k < n; k++) {
        snprintf(name, sizeof(name), "m%d", k);
        bad += small_file(v, name, k, STRIPE, &g) != 0;
    }
    double c1 = cpu_s(), w1 = wall_s();
    for (int k = 0; k < n; k++) {
        snprintf(name, sizeof(name), "m%d", k);
        struct bfs_unlink_req u = {.loc = L(name)};
        bad += bfs_sync_unlink(v->top, v->st, &u, NULL) != 0;
    }
    double c2 = cpu_s(), w2 = wall_s();
    printf("# bench %d files: create %.0f/s, %.0f us CPU each; delete %.0f/s, %.0f us CPU "
           "each; %d failed\n",
           n, n / (w1 - w0), 1e6 * (c1 - c0) / n, n / (w2 - w1), 1e6 * (c2 - c1) / n, bad);
}

int main(void)
{
    plan_lazy();
    if (!cg_can_run())
        return 0;
    alarm(180);
    struct cg_vol v;
    /* one-shot entry locks (the directory's window off): the per-name path */
    if (cg_init("ecpiggy") < 0 || vol_open(&v, " option disperse.other-eager-lock off\n") < 0) {
        ok(false, "graph");
    } else {
        if (getenv("EC_PIGGY_BENCH")) {
            ok(warm_up(&v), "warm-up");
            measure(&v, atoi(getenv("EC_PIGGY_BENCH")));
            cg_vol_close(&v);
            if (vol_open(&v, "") == 0) {
                printf("# with the directory's entry window:\n");
                measure(&v, atoi(getenv("EC_PIGGY_BENCH")));
                cg_vol_close(&v);
            }
            cg_fini();
            return done_testing();
        }
        test_small_files(&v);
        test_seq_write(&v);
        test_lent_payload(&v);
        test_posix_wadd(&v);
        test_failures(&v);
        cg_vol_close(&v);
        if (wb_vol_open(&v) < 0) {
            ok(false, "graph with write-behind");
        } else {
            test_wb_lent(&v);
            cg_vol_close(&v);
        }
        /* the default: the directory's entry window */
        if (vol_open_x(&v, 1000, "") < 0) {
            ok(false, "graph with entry windows");
        } else {
            test_entry_window(&v);
            test_failures(&v);
            cg_vol_close(&v);
        }
    }
    cg_fini();
    return done_testing();
}
