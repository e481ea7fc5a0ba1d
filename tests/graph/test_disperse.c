/*
 * test_disperse.c — cluster/disperse in one process over real bricks: each
 * child is storage/posix on a temporary directory, under features/locks,
 * under debug/error-gen (c0, c1, ...). A "down" child is error-gen failing
 * every fop with ENOTCONN plus a CHILD_DOWN event; "back" is the reverse.
 *
 * Layouts 3+1 and 6+2 (4 and 8 children, redundancy 1 and 2). Every data
 * check compares with a model of the file kept in memory: random writes at
 * unaligned offsets spanning stripes and past the end (holes), appends,
 * truncates down and up, zerofill and discard; reads of the whole file and
 * of random ranges. On the bricks: the data children's fragment files are
 * the model's bytes at the documented places (byte-exact), every fragment
 * file is ceil(size / stripe) * chunk bytes (about size/k), versions agree
 * and dirty marks are gone after close. Failures: up to R children down
 * (reads decode, writes go on), more than R down (EIO, never wrong data), a
 * child that comes back is healed on lookup (its fragments byte-exact for a
 * data child; for parity children, reads that must use them are right).
 * Concurrent writers to one file through two fds stay consistent. Needs
 * root (trusted xattrs); skips otherwise.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../lib/cluster-graph.h"
#include "../lib/tap.h"
#include "core/graph.h"

#define MAXF (320u << 10)

static struct bfs_proc *proc;
static char root[256];
static int scenario;
static bool two_clients; /* vol_open adds "ec2", a second client of the same bricks */

struct vol {
    struct bfs_graph *g;
    struct bfs_xl *ec;
    int n, r, k;
    uint64_t chunk, stripe;
    char brick[8][PATH_MAX];
    struct bfs_stack *st;
};

static int vol_open(struct vol *v, int n, int r, const char *options)
{
    char text[8192];
    size_t len = 0;
    memset(v, 0, sizeof(*v));
    v->n = n;
    v->r = r;
    v->k = n - r;
    v->chunk = 4096;
    while (v->chunk > 512 && v->chunk * (uint64_t)v->k > 4096)
        v->chunk /= 2;
    v->stripe = v->chunk * (uint64_t)v->k;
    scenario++;
    for (int i = 0; i < n; i++) {
        snprintf(v->brick[i], sizeof(v->brick[i]), "%s/s%d-b%d", root, scenario, i);
        if (mkdir(v->brick[i], 0755) < 0)
            return -1;
        len += (size_t)snprintf(text + len, sizeof(text) - len,
                                "volume b%d\n type storage/posix\n option directory %s\n"
                                "end-volume\n"
                                "volume l%d\n type features/locks\n subvolumes b%d\nend-volume\n"
                                "volume c%d\n type debug/error-gen\n option error-no ENOTCONN\n"
                                " subvolumes l%d\nend-volume\n",
                                i, v->brick[i], i, i, i, i);
    }
    if (two_clients) {
        len += (size_t)snprintf(text + len, sizeof(text) - len,
                                "volume ec2\n type cluster/disperse\n option redundancy %d\n"
                                " option cluster.post-op-delay-ms 50\n"
                                " option disperse.lock-domain ec\n subvolumes", r);
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(text + len, sizeof(text) - len, " c%d", i);
        len += (size_t)snprintf(text + len, sizeof(text) - len, "\nend-volume\n");
    }
    len += (size_t)snprintf(text + len, sizeof(text) - len,
                            "volume ec\n type cluster/disperse\n option redundancy %d\n"
                            " option cluster.background-self-heal-count 0\n"
                            " option cluster.post-op-delay-ms 50\n%s subvolumes",
                            r, options ? options : "");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, " c%d", i);
    len += (size_t)snprintf(text + len, sizeof(text) - len, "\nend-volume\n");
    char err[512];
    if (bfs_graph_from_text(text, len, "disperse.vol", proc, &v->g, err, sizeof(err)) < 0) {
        printf("# graph: %s\n", err);
        return -1;
    }
    if (bfs_graph_init(v->g) < 0)
        return -1;
    bfs_graph_activate(v->g);
    v->ec = v->g->top;
    v->st = bfs_stack_new();
    return 0;
}

static void vol_close(struct vol *v)
{
    if (v->g)
        bfs_graph_free(v->g);
    bfs_stack_unref(v->st);
    v->g = NULL;
}

static struct bfs_xl *child(struct vol *v, int i)
{
    char name[16];
    snprintf(name, sizeof(name), "c%d", i);
    return bfs_graph_find(v->g, name);
}

static void reconf(struct vol *v, int i, const char *key, const char *val)
{
    struct bfs_xl *c = child(v, i);
    struct bfs_dict *d = bfs_dict_new();
    bfs_dict_set_str(d, key, val);
    c->mod->reconfigure(c, d);
    bfs_dict_unref(d);
}

/* Child i's connection closes: its calls fail and the brick drops our
 * locks, as protocol/server does (tests/lib/cluster-graph.c, cg_down): a
 * window's unlock still on its way behind close() must not stay held. */
static void down(struct vol *v, int i)
{
    char name[16];
    snprintf(name, sizeof(name), "l%d", i);
    struct bfs_xl *locks = bfs_graph_find(v->g, name);
    reconf(v, i, "failure", "100");
    locks->mod->notify(locks, BFS_EV_CLIENT_GONE, child(v, i), BFS_CLIENT_LOCAL);
    bfs_xl_notify_parents(child(v, i), BFS_EV_CHILD_DOWN, NULL);
}

static void up(struct vol *v, int i)
{
    reconf(v, i, "failure", "0");
    bfs_xl_notify_parents(child(v, i), BFS_EV_CHILD_UP, NULL);
}

/* ---- calls ---- */

static const struct bfs_gfid ROOT = {.b = {[15] = 1}};

static struct bfs_loc L(const struct bfs_gfid *par, const char *name)
{
    struct bfs_loc l = {0};
    l.pargfid = *par;
    l.name = name;
    return l;
}

static int lookup(struct vol *v, const char *name, struct bfs_iatt *attr)
{
    struct bfs_lookup_req req = {.loc = L(&ROOT, name)};
    struct bfs_lookup_rep rep;
    int rc = bfs_sync_lookup(v->ec, v->st, &req, &rep);
    if (attr)
        *attr = rep.attr;
    bfs_lookup_rep_clear_dup(&rep);
    return rc;
}

static int create(struct vol *v, const char *name, struct bfs_fd **fdp, struct bfs_gfid *g)
{
    struct bfs_fd *fd = bfs_fd_new(v->g, NULL, O_RDWR, 0);
    struct bfs_create_req req = {.loc = L(&ROOT, name), .fd = fd, .flags = O_RDWR | O_CREAT,
                                 .mode = 0644};
    struct bfs_create_rep rep;
    int rc = bfs_sync_create(v->ec, v->st, &req, &rep);
    if (g)
        *g = rep.attr.gfid;
    bfs_create_rep_clear_dup(&rep);
    if (rc < 0)
        bfs_fd_unref(fd);
    else
        *fdp = fd;
    return rc;
}

static int flush_close(struct vol *v, struct bfs_fd *fd);

static int create_closed(struct vol *v, const char *name, struct bfs_gfid *g)
{
    struct bfs_fd *fd;
    int rc = create(v, name, &fd, g);
    if (rc == 0)
        rc = flush_close(v, fd);
    return rc;
}

static int open_(struct vol *v, const struct bfs_gfid *g, int flags, struct bfs_fd **fdp)
{
    struct bfs_inode *inode = bfs_inode_get(v->g->itable, g, S_IFREG);
    struct bfs_fd *fd = bfs_fd_new(v->g, inode, flags, 0);
    bfs_inode_unref(inode);
    struct bfs_open_req req = {.fd = fd, .flags = (uint32_t)flags};
    req.loc.gfid = *g;
    int rc = bfs_sync_open(v->ec, v->st, &req, NULL);
    if (rc < 0)
        bfs_fd_unref(fd);
    else
        *fdp = fd;
    return rc;
}

static int write_(struct vol *v, struct bfs_fd *fd, uint64_t off, const void *s, size_t len)
{
    struct bfs_write_req req = {.fd = fd, .offset = off};
    req.data.data = s;
    req.data.len = len;
    return bfs_sync_write(v->ec, v->st, &req, NULL);
}

static int read_(struct vol *v, struct bfs_fd *fd, uint64_t off, void *buf, size_t size)
{
    struct bfs_read_req req = {.fd = fd, .size = (uint32_t)size, .offset = off};
    struct bfs_read_rep rep;
    int rc = bfs_sync_read(v->ec, v->st, &req, &rep);
    if (rc >= 0) {
        size_t n = rep.data.len < size ? rep.data.len : size;
        memcpy(buf, rep.data.data, n);
        rc = (int)n;
    }
    bfs_read_rep_clear_dup(&rep);
    return rc;
}

static int ftruncate_(struct vol *v, struct bfs_fd *fd, uint64_t size)
{
    struct bfs_ftruncate_req req = {.fd = fd, .offset = size};
    return bfs_sync_ftruncate(v->ec, v->st, &req, NULL);
}

static int truncate_(struct vol *v, const struct bfs_gfid *g, uint64_t size)
{
    struct bfs_truncate_req req = {.offset = size};
    req.loc.gfid = *g;
    return bfs_sync_truncate(v->ec, v->st, &req, NULL);
}

static int fstat_size(struct vol *v, struct bfs_fd *fd, uint64_t *size)
{
    struct bfs_fstat_req req = {.fd = fd};
    struct bfs_fstat_rep rep;
    int rc = bfs_sync_fstat(v->ec, v->st, &req, &rep);
    *size = rep.attr.size;
    bfs_fstat_rep_clear_dup(&rep);
    return rc;
}

static int flush_close(struct vol *v, struct bfs_fd *fd)
{
    struct bfs_flush_req req = {.fd = fd};
    int rc = bfs_sync_flush(v->ec, v->st, &req, NULL);
    bfs_fd_unref(fd);
    return rc;
}

/* ---- the model ---- */

struct model {
    uint8_t *b;
    uint64_t size;
};

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(uint64_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return n ? rng % n : 0;
}

static void fill(uint8_t *b, size_t len)
{
    for (size_t i = 0; i < len; i++)
        b[i] = (uint8_t)(rnd(255) + 1);
}

/* The whole file read back equals the model (and a few random ranges). */
static bool same(struct vol *v, struct bfs_fd *fd, const struct model *m)
{
    uint8_t *buf = malloc(MAXF + 8192);
    int rc = read_(v, fd, 0, buf, MAXF + 8192);
    bool good = rc == (int)m->size && memcmp(buf, m->b, m->size) == 0;
    if (!good)
        printf("# read %d bytes, want %llu\n", rc, (unsigned long long)m->size);
    for (int i = 0; good && i < 4 && m->size; i++) {
        uint64_t off = rnd(m->size), len = 1 + rnd(20000);
        rc = read_(v, fd, off, buf, len);
        uint64_t want = off + len > m->size ? m->size - off : len;
        good = rc == (int)want && memcmp(buf, m->b + off, want) == 0;
        if (!good)
            printf("# range read at %llu+%llu: %d\n", (unsigned long long)off,
                   (unsigned long long)len, rc);
    }
    free(buf);
    return good;
}

static int m_write(struct vol *v, struct bfs_fd *fd, struct model *m, uint64_t off, size_t len)
{
    uint8_t *d = malloc(len);
    fill(d, len);
    int rc = write_(v, fd, off, d, len);
    if (rc >= 0) {
        memcpy(m->b + off, d, len);
        if (off + len > m->size)
            m->size = off + len;
    }
    free(d);
    return rc;
}

static void m_truncate(struct model *m, uint64_t size)
{
    if (size > m->size)
        memset(m->b + m->size, 0, size - m->size);
    else
        memset(m->b + size, 0, m->size - size);
    m->size = size;
}

/* ---- the bricks ---- */

static const char *on(struct vol *v, int i, const char *rel)
{
    static char buf[8][PATH_MAX + 64];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, sizeof(buf[0]), "%s/%s", v->brick[i], rel);
    return b;
}

static long long xnum(struct vol *v, int i, const char *rel, const char *key, int t)
{
    uint8_t raw[24];
    ssize_t n = lgetxattr(on(v, i, rel), key, raw, sizeof(raw));
    if (n < (t + 1) * 8)
        return 0;
    uint64_t be;
    memcpy(&be, raw + t * 8, 8);
    return (long long)be64toh(be);
}

static long long fsize_on(struct vol *v, int i, const char *rel)
{
    struct stat st;
    return stat(on(v, i, rel), &st) == 0 ? (long long)st.st_size : -1;
}

/* Fragment files: sizes, the data children's bytes, versions, dirty. */
static bool bricks_ok(struct vol *v, const char *rel, const struct model *m, uint32_t which)
{
    long long want = (long long)((m->size + v->stripe - 1) / v->stripe * v->chunk);
    bool good = true;
    uint8_t *f = malloc(want + 1);
    for (int i = 0; i < v->n && good; i++) {
        if (!(which & (1u << i)))
            continue;
        long long got = fsize_on(v, i, rel);
        if (got != want) {
            printf("# child %d: fragment file %lld bytes, want %lld\n", i, got, want);
            good = false;
        }
        if (xnum(v, i, rel, "trusted.brickfs.ec.size", 0) != (long long)m->size ||
            xnum(v, i, rel, "trusted.brickfs.ec.dirty", 0) != 0 ||
            xnum(v, i, rel, "trusted.brickfs.ec.version", 0) !=
                xnum(v, __builtin_ctz(which), rel, "trusted.brickfs.ec.version", 0)) {
            printf("# child %d: size %lld dirty %lld version %lld\n", i,
                   xnum(v, i, rel, "trusted.brickfs.ec.size", 0),
                   xnum(v, i, rel, "trusted.brickfs.ec.dirty", 0),
                   xnum(v, i, rel, "trusted.brickfs.ec.version", 0));
            good = false;
        }
        if (i >= v->k || !good)
            continue;
        FILE *fp = fopen(on(v, i, rel), "rb");
        size_t n = fp ? fread(f, 1, (size_t)want, fp) : 0;
        if (fp)
            fclose(fp);
        for (uint64_t s = 0; good && s * v->chunk < n; s++) {
            for (uint64_t b = 0; b < v->chunk; b++) {
                uint64_t o = s * v->stripe + (uint64_t)i * v->chunk + b;
                uint8_t expect = o < m->size ? m->b[o] : 0;
                if (f[s * v->chunk + b] != expect) {
                    printf("# child %d: fragment byte %llu differs\n", i,
                           (unsigned long long)(s * v->chunk + b));
                    good = false;
                    break;
                }
            }
        }
    }
    free(f);
    return good;
}

/* Post-op of the last window runs after the delay: wait for clean marks. */
static bool settled(struct vol *v, const char *rel, const struct model *m, uint32_t which)
{
    for (int i = 0; i < 300; i++) {
        bool clean = true;
        for (int c = 0; c < v->n; c++)
            if ((which & (1u << c)) && xnum(v, c, rel, "trusted.brickfs.ec.dirty", 0))
                clean = false;
        if (clean)
            break;
        usleep(10000);
    }
    return bricks_ok(v, rel, m, which);
}

/* ---- scenarios ---- */

/* Entry changes unlock behind their answer; taking the same entry lock
 * (blocking) and dropping it waits for that, so that a child made "down"
 * next does not keep a lock whose unlock it refused (a real brick drops
 * the locks of a client that goes away). */
static void quiesce_name(struct vol *v, const char *name)
{
    struct bfs_entrylk_req req = {.domain = "ec", .loc = {.gfid = ROOT}, .basename = name,
                                  .cmd = BFS_ENTRYLK_LOCK, .type = BFS_ENTRYLK_WRLCK};
    if (bfs_sync_entrylk(v->ec, v->st, &req, NULL) == 0) {
        req.cmd = BFS_ENTRYLK_UNLOCK;
        (void)bfs_sync_entrylk(v->ec, v->st, &req, NULL);
    }
}


/* Random writes, appends, truncates, zerofill, discard; compared throughout. */
static void random_io(int n, int r)
{
    struct vol v;
    ok(vol_open(&v, n, r, NULL) == 0, "%d+%d: graph", n - r, r);
    struct model m = {.b = calloc(1, MAXF + 65536)};
    struct bfs_fd *fd;
    struct bfs_gfid g;
    char name[32];
    snprintf(name, sizeof(name), "f%d%d", n, r);
    ok(create(&v, name, &fd, &g) == 0, "%d+%d: create", n - r, r);
    bool all = true;
    for (int step = 0; step < 60 && all; step++) {
        uint64_t op = rnd(10), off, len;
        int rc = 0;
        if (op < 6) {
            off = rnd(MAXF - 45000);
            len = 1 + rnd(step % 3 == 0 ? 40000 : 3000);
            rc = m_write(&v, fd, &m, off, len);
            all = rc == (int)len;
        } else if (op == 6) {
            uint64_t size = rnd(m.size + 5000);
            if (size > MAXF)
                size = MAXF;
            rc = step % 2 ? ftruncate_(&v, fd, size) : truncate_(&v, &g, size);
            m_truncate(&m, size);
            all = rc >= 0;
        } else if (op == 7) { /* zerofill */
            off = rnd(m.size + 1);
            len = 1 + rnd(12000);
            if (off + len > MAXF)
                len = MAXF - off;
            struct bfs_zerofill_req req = {.fd = fd, .offset = off, .len = len};
            rc = bfs_sync_zerofill(v.ec, v.st, &req, NULL);
            if (off + len > m.size)
                m_truncate(&m, off + len);
            memset(m.b + off, 0, len);
            all = rc >= 0;
        } else if (op == 8) { /* discard: punches, the size stays */
            off = rnd(m.size + 1);
            len = 1 + rnd(12000);
            struct bfs_discard_req req = {.fd = fd, .offset = off, .len = len};
            rc = bfs_sync_discard(v.ec, v.st, &req, NULL);
            if (off < m.size)
                memset(m.b + off, 0, (off + len > m.size ? m.size : off + len) - off);
            all = rc >= 0;
        } else { /* append through an O_APPEND fd */
            struct bfs_fd *afd;
            len = 1 + rnd(5000);
            if (m.size + len > MAXF)
                continue;
            rc = open_(&v, &g, O_WRONLY | O_APPEND, &afd);
            if (rc == 0) {
                uint8_t *d = malloc(len);
                fill(d, len);
                rc = write_(&v, afd, 12345 /* ignored */, d, len);
                memcpy(m.b + m.size, d, len);
                m.size += len;
                free(d);
                flush_close(&v, afd);
            }
            all = rc == (int)len;
        }
        if (!all)
            printf("# step %d op %llu failed: %d\n", step, (unsigned long long)op, rc);
        if (getenv("EC_VERBOSE"))
            printf("# step %d op %llu size %llu\n", step, (unsigned long long)op,
                   (unsigned long long)m.size);
        if (all && step % 5 == 4)
            all = same(&v, fd, &m);
    }
    ok(all, "%d+%d: random writes, truncates, zerofill, discard, appends read back right",
       n - r, r);
    ok(same(&v, fd, &m), "%d+%d: the whole file and random ranges", n - r, r);
    uint64_t size = 0;
    ok(fstat_size(&v, fd, &size) == 0 && size == m.size, "%d+%d: fstat size %llu", n - r, r,
       (unsigned long long)m.size);
    ok(flush_close(&v, fd) == 0, "%d+%d: close", n - r, r);
    ok(settled(&v, name, &m, (1u << n) - 1),
       "%d+%d: fragment files ~size/k, data fragments byte-exact, clean xattrs", n - r, r);
    struct bfs_iatt a;
    ok(lookup(&v, name, &a) == 0 && a.size == m.size, "%d+%d: lookup size", n - r, r);
    free(m.b);
    vol_close(&v);
}

/* Up to R children down: reads decode, writes go on; more: EIO; heal. */
static void degraded(int n, int r)
{
    struct vol v;
    /* EC_NOHEAL=1 shows the heal checks can fail */
    ok(vol_open(&v, n, r, getenv("EC_NOHEAL") ? " option cluster.data-self-heal off\n" : NULL) == 0,
       "%d+%d degraded: graph", n - r, r);
    struct model m = {.b = calloc(1, MAXF + 65536)};
    struct bfs_fd *fd;
    struct bfs_gfid g;
    ok(create(&v, "d", &fd, &g) == 0 && m_write(&v, fd, &m, 0, 100000) == 100000,
       "%d+%d degraded: a file of 100000 bytes", n - r, r);
    flush_close(&v, fd);
    quiesce_name(&v, "d");
    /* R data children down (the worst case: decode everything) */
    for (int i = 0; i < r; i++)
        down(&v, i);
    ok(lookup(&v, "d", NULL) == 0 && open_(&v, &g, O_RDWR, &fd) == 0,
       "%d+%d degraded: %d children down: lookup, open", n - r, r, r);
    ok(same(&v, fd, &m), "%d+%d degraded: reads decode right", n - r, r);
    bool w = m_write(&v, fd, &m, 5000, 7777) == 7777 && m_write(&v, fd, &m, 99000, 9000) == 9000;
    ok(w && same(&v, fd, &m), "%d+%d degraded: RMW writes and extension with %d down", n - r, r,
       r);
    ok(ftruncate_(&v, fd, 60001) == 0, "%d+%d degraded: truncate", n - r, r);
    m_truncate(&m, 60001);
    ok(same(&v, fd, &m), "%d+%d degraded: after truncate", n - r, r);
    /* one more down: too few fragments */
    down(&v, r);
    uint8_t buf[64];
    int rc = read_(&v, fd, 0, buf, sizeof(buf));
    ok(rc == -EIO || rc == -ENOTCONN, "%d+%d degraded: %d down: read fails (%d)", n - r, r,
       r + 1, rc);
    rc = write_(&v, fd, 10, "x", 1);
    ok(rc == -EIO || rc == -ENOTCONN, "%d+%d degraded: %d down: write fails (%d)", n - r, r,
       r + 1, rc);
    up(&v, r);
    ok(same(&v, fd, &m), "%d+%d degraded: back to %d down: still right", n - r, r, r);
    flush_close(&v, fd);
    cg_graph_unlocked_soon(v.g, n); /* the window's release, behind the close */
    /* the children come back: lookup heals them (foreground) */
    for (int i = 0; i < r; i++)
        up(&v, i);
    ok(lookup(&v, "d", NULL) == 0, "%d+%d heal: lookup", n - r, r);
    ok(settled(&v, "d", &m, (1u << n) - 1),
       "%d+%d heal: the healed fragments are byte-exact, sizes and versions agree", n - r, r);
    /* the parity children down: reads now need the healed data children */
    for (int i = n - r; i < n; i++)
        down(&v, i);
    ok(open_(&v, &g, O_RDONLY, &fd) == 0 && same(&v, fd, &m),
       "%d+%d heal: reads from the healed children are right", n - r, r);
    flush_close(&v, fd);
    for (int i = n - r; i < n; i++)
        up(&v, i);
    /* a parity child misses writes, comes back, is healed, then is needed */
    down(&v, n - 1);
    ok(open_(&v, &g, O_RDWR, &fd) == 0 && m_write(&v, fd, &m, 1234, 40000) == 40000,
       "%d+%d heal: write with a parity child down", n - r, r);
    flush_close(&v, fd);
    /* close() does not wait for the window's post-op and unlock: a lookup
     * that found the lock still held would not heal */
    cg_graph_unlocked_soon(v.g, n);
    up(&v, n - 1);
    ok(lookup(&v, "d", NULL) == 0 && settled(&v, "d", &m, (1u << n) - 1),
       "%d+%d heal: the parity child is healed (sizes, versions)", n - r, r);
    for (int i = 0; i < r; i++)
        down(&v, i);
    ok(open_(&v, &g, O_RDONLY, &fd) == 0 && same(&v, fd, &m),
       "%d+%d heal: reads that need the healed parity are right", n - r, r);
    flush_close(&v, fd);
    for (int i = 0; i < r; i++)
        up(&v, i);
    /* a file made while a child was down is made there by the entry heal */
    down(&v, 1);
    struct model m2 = {.b = calloc(1, MAXF + 65536)};
    struct bfs_gfid g2;
    ok(create(&v, "late", &fd, &g2) == 0 && m_write(&v, fd, &m2, 0, 30000) == 30000,
       "%d+%d entry heal: created with a child down", n - r, r);
    flush_close(&v, fd);
    cg_graph_unlocked_soon(v.g, n);
    up(&v, 1);
    ok(lookup(&v, "late", NULL) == 0 && fsize_on(&v, 1, "late") >= 0,
       "%d+%d entry heal: the name is made on the child", n - r, r);
    ok(lookup(&v, "late", NULL) == 0 && settled(&v, "late", &m2, (1u << n) - 1),
       "%d+%d entry heal: then its fragments", n - r, r);
    free(m2.b);
    free(m.b);
    vol_close(&v);
}

struct cw {
    struct vol *v;
    struct bfs_fd *fd;
    const uint8_t *data;
    int id, nthreads;
    uint64_t piece;
    int rc;
};

static void *writer(void *arg)
{
    struct cw *c = arg;
    /* interleaved pieces: neighbours share stripes, so every write is a RMW */
    for (uint64_t off = (uint64_t)c->id * c->piece; off < 200000; off += c->piece * c->nthreads) {
        int rc = write_(c->v, c->fd, off, c->data + off, c->piece);
        if (rc != (int)c->piece)
            c->rc = rc < 0 ? rc : -EIO;
    }
    return NULL;
}

static void concurrent(int n, int r)
{
    struct vol v;
    ok(vol_open(&v, n, r, NULL) == 0, "%d+%d concurrent: graph", n - r, r);
    struct model m = {.b = calloc(1, MAXF + 65536)};
    struct bfs_fd *fd[2];
    struct bfs_gfid g;
    ok(create(&v, "c", &fd[0], &g) == 0 && open_(&v, &g, O_RDWR, &fd[1]) == 0,
       "%d+%d concurrent: two fds", n - r, r);
    fill(m.b, 200000 + 2000);
    pthread_t th[4];
    struct cw cw[4];
    for (int i = 0; i < 4; i++) {
        cw[i] = (struct cw){.v = &v, .fd = fd[i % 2], .data = m.b, .id = i, .nthreads = 4,
                            .piece = 777};
        pthread_create(&th[i], NULL, writer, &cw[i]);
    }
    bool wrote = true;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        wrote = wrote && cw[i].rc == 0;
    }
    m.size = 0;
    for (uint64_t off = 0; off < 200000; off += 777)
        m.size = off + 777;
    ok(wrote && same(&v, fd[0], &m), "%d+%d concurrent: 4 writers sharing stripes", n - r, r);
    flush_close(&v, fd[0]);
    flush_close(&v, fd[1]);
    ok(settled(&v, "c", &m, (1u << n) - 1), "%d+%d concurrent: fragments", n - r, r);
    free(m.b);
    vol_close(&v);
}

/* A client that died mid-write leaves dirty marks and possibly parity that
 * does not match the data: heal recomputes the parity from the data. */
static void crashed_writer(int n, int r)
{
    struct vol v;
    ok(vol_open(&v, n, r, NULL) == 0, "%d+%d crash: graph", n - r, r);
    struct model m = {.b = calloc(1, MAXF + 65536)};
    struct bfs_fd *fd;
    struct bfs_gfid g;
    ok(create(&v, "x", &fd, &g) == 0 && m_write(&v, fd, &m, 0, 50000) == 50000,
       "%d+%d crash: a file", n - r, r);
    flush_close(&v, fd);
    ok(settled(&v, "x", &m, (1u << n) - 1), "%d+%d crash: clean", n - r, r);
    /* what a dead client leaves: dirty everywhere, a parity fragment torn */
    uint8_t dirty[24] = {0};
    dirty[7] = 1;
    for (int i = 0; i < n; i++)
        lsetxattr(on(&v, i, "x"), "trusted.brickfs.ec.dirty", dirty, sizeof(dirty), 0);
    FILE *fp = fopen(on(&v, n - 1, "x"), "r+b");
    if (fp) {
        fseek(fp, 100, SEEK_SET);
        fwrite("garbage-garbage-garbage", 1, 23, fp);
        fclose(fp);
    }
    ok(lookup(&v, "x", NULL) == 0 && settled(&v, "x", &m, (1u << n) - 1),
       "%d+%d crash: lookup heals: dirty marks gone", n - r, r);
    for (int i = 0; i < r; i++)
        down(&v, i); /* reads must use the parity now */
    ok(open_(&v, &g, O_RDONLY, &fd) == 0 && same(&v, fd, &m),
       "%d+%d crash: the parity was recomputed from the data", n - r, r);
    flush_close(&v, fd);
    free(m.b);
    vol_close(&v);
}

/* Metadata and names changed while a child was down are healed. */
static void meta_entry_heal(int n, int r)
{
    struct vol v;
    ok(vol_open(&v, n, r, NULL) == 0, "%d+%d meta: graph", n - r, r);
    struct bfs_fd *fd;
    struct bfs_gfid g, g2;
    ok(create(&v, "m", &fd, &g) == 0 && create_closed(&v, "gone", &g2) == 0,
       "%d+%d meta: two files", n - r, r);
    quiesce_name(&v, "m"); /* their unlocks run behind the answers: let them reach child 2 */
    quiesce_name(&v, "gone");
    down(&v, 2);
    struct bfs_setattr_req sreq = {.valid = BFS_SET_MODE};
    sreq.loc.gfid = g;
    sreq.attr.mode = S_IFREG | 0600;
    ok(bfs_sync_setattr(v.ec, v.st, &sreq, NULL) == 0, "%d+%d meta: chmod with a child down",
       n - r, r);
    struct bfs_unlink_req ureq = {.loc = L(&ROOT, "gone")};
    ok(bfs_sync_unlink(v.ec, v.st, &ureq, NULL) == 0, "%d+%d meta: unlink with a child down",
       n - r, r);
    up(&v, 2);
    struct stat st;
    ok(lookup(&v, "m", NULL) == 0 && stat(on(&v, 2, "m"), &st) == 0 && (st.st_mode & 07777) == 0600,
       "%d+%d meta: the mode is healed on the child", n - r, r);
    struct bfs_lookup_req lreq = {0};
    lreq.loc.gfid = ROOT;
    ok(bfs_sync_lookup(v.ec, v.st, &lreq, NULL) == 0 && stat(on(&v, 2, "gone"), &st) < 0,
       "%d+%d meta: the name removed meanwhile is removed from the child", n - r, r);
    /* readdirplus: regular files come without attributes (fragment sizes) */
    struct bfs_fd *dfd = bfs_fd_new(v.g, NULL, O_RDONLY | O_DIRECTORY, 1);
    struct bfs_opendir_req oreq = {.fd = dfd};
    oreq.loc.gfid = ROOT;
    struct bfs_readdir_req rreq = {.fd = dfd, .size = 65536, .plus = true};
    struct bfs_readdir_rep rrep;
    bool saw = false, attrs = false;
    if (bfs_sync_opendir(v.ec, v.st, &oreq, NULL) == 0 &&
        bfs_sync_readdir(v.ec, v.st, &rreq, &rrep) >= 0) {
        for (uint32_t e = 0; e < rrep.entries.count; e++)
            if (strcmp(rrep.entries.v[e].name, "m") == 0) {
                saw = true;
                attrs = rrep.entries.v[e].has_attr;
            }
        bfs_readdir_rep_clear_dup(&rrep);
    }
    bfs_fd_unref(dfd);
    ok(saw && !attrs, "%d+%d meta: readdirplus lists files without brick attributes", n - r, r);
    /* open with O_TRUNC empties the file through a transaction */
    uint8_t d[9000];
    fill(d, sizeof(d));
    ok(write_(&v, fd, 0, d, sizeof(d)) == (int)sizeof(d), "%d+%d meta: write", n - r, r);
    flush_close(&v, fd);
    struct bfs_fd *tfd;
    uint64_t size = 1;
    ok(open_(&v, &g, O_WRONLY | O_TRUNC, &tfd) == 0 && fstat_size(&v, tfd, &size) == 0 &&
           size == 0,
       "%d+%d meta: open O_TRUNC", n - r, r);
    /* fallocate without KEEP_SIZE grows the file with zeros */
    struct bfs_fallocate_req freq = {.fd = tfd, .offset = 1000, .len = 20000};
    ok(bfs_sync_fallocate(v.ec, v.st, &freq, NULL) == 0 && fstat_size(&v, tfd, &size) == 0 &&
           size == 21000,
       "%d+%d meta: fallocate grows the size", n - r, r);
    /* seek answers conservatively: the whole file is data */
    struct bfs_seek_req kreq = {.fd = tfd, .offset = 5, .what = SEEK_HOLE};
    struct bfs_seek_rep krep;
    ok(bfs_sync_seek(v.ec, v.st, &kreq, &krep) == 0 && krep.offset == 21000,
       "%d+%d meta: SEEK_HOLE answers the size", n - r, r);
    kreq.offset = 21000;
    kreq.what = SEEK_DATA;
    ok(bfs_sync_seek(v.ec, v.st, &kreq, &krep) == -ENXIO, "%d+%d meta: SEEK_DATA past the end",
       n - r, r);
    flush_close(&v, tfd);
    vol_close(&v);
}

/* A child that fails the fop itself (not the lock or the pre-op) is blamed
 * before the answer; the answer still carries the file's attributes (the
 * blame stage must not eat the fop's replies). */
static void fop_fails_on_one(int n, int r)
{
    struct vol v;
    ok(vol_open(&v, n, r, NULL) == 0, "%d+%d blame: graph", n - r, r);
    struct model m = {.b = calloc(1, MAXF + 65536)};
    struct bfs_fd *fd;
    struct bfs_gfid g;
    ok(create(&v, "b", &fd, &g) == 0 && m_write(&v, fd, &m, 0, 20000) == 20000,
       "%d+%d blame: a file", n - r, r);
    reconf(&v, 1, "enable", "ftruncate,write");
    reconf(&v, 1, "failure", "100");
    struct bfs_ftruncate_req req = {.fd = fd, .offset = 7001};
    struct bfs_ftruncate_rep rep;
    int rc = bfs_sync_ftruncate(v.ec, v.st, &req, &rep);
    ok(rc == 0 && S_ISREG(rep.post.mode) && rep.post.size == 7001 && S_ISREG(rep.pre.mode),
       "%d+%d blame: ftruncate failing on one child answers the file's attributes "
       "(rc %d, mode %o, size %llu)", n - r, r, rc, rep.post.mode,
       (unsigned long long)rep.post.size);
    bfs_ftruncate_rep_clear_dup(&rep);
    m_truncate(&m, 7001);
    struct bfs_write_req wreq = {.fd = fd, .offset = 3};
    struct bfs_write_rep wrep;
    wreq.data.data = "abc";
    wreq.data.len = 3;
    rc = bfs_sync_write(v.ec, v.st, &wreq, &wrep);
    ok(rc == 3 && S_ISREG(wrep.post.mode) && wrep.post.size == 7001,
       "%d+%d blame: so does a write", n - r, r);
    bfs_write_rep_clear_dup(&wrep);
    memcpy(m.b + 3, "abc", 3);
    ok(same(&v, fd, &m), "%d+%d blame: the data is right", n - r, r);
    reconf(&v, 1, "failure", "0");
    reconf(&v, 1, "enable", "all");
    flush_close(&v, fd);
    free(m.b);
    vol_close(&v);
}

/* A write that fails on every child (ENOSPC everywhere) changed nothing:
 * the size counter on the bricks must not move either (it is sent beside
 * the fragment writes). */
static void failed_everywhere(int n, int r)
{
    struct vol v;
    ok(vol_open(&v, n, r, NULL) == 0, "%d+%d failed write: graph", n - r, r);
    struct model m = {.b = calloc(1, MAXF + 65536)};
    struct bfs_fd *fd;
    struct bfs_gfid g;
    ok(create(&v, "s", &fd, &g) == 0 && m_write(&v, fd, &m, 0, 20000) == 20000,
       "%d+%d failed write: a file of 20000 bytes", n - r, r);
    for (int i = 0; i < n; i++) {
        reconf(&v, i, "error-no", "ENOSPC");
        reconf(&v, i, "enable", "write");
        reconf(&v, i, "failure", "100");
    }
    uint8_t d[5000];
    fill(d, sizeof(d));
    int rc1 = write_(&v, fd, 30000, d, sizeof(d));
    int rc2 = write_(&v, fd, 20000, d, 100);
    ok(rc1 < 0 && rc2 < 0, "%d+%d failed write: extending writes fail everywhere (%d, %d)",
       n - r, r, rc1, rc2);
    for (int i = 0; i < n; i++) {
        reconf(&v, i, "failure", "0");
        reconf(&v, i, "enable", "all");
        reconf(&v, i, "error-no", "ENOTCONN");
    }
    uint64_t size = 0;
    ok(fstat_size(&v, fd, &size) == 0 && size == 20000, "%d+%d failed write: fstat size %llu",
       n - r, r, (unsigned long long)size);
    flush_close(&v, fd);
    struct bfs_iatt a = {0};
    ok(lookup(&v, "s", &a) == 0 && a.size == 20000 && settled(&v, "s", &m, (1u << n) - 1),
       "%d+%d failed write: the size counter on the bricks did not move (lookup %llu)", n - r,
       r, (unsigned long long)a.size);
    ok(open_(&v, &g, O_RDWR, &fd) == 0 && m_write(&v, fd, &m, 20000, 3000) == 3000 &&
           same(&v, fd, &m),
       "%d+%d failed write: the next write extends from the right size", n - r, r);
    flush_close(&v, fd);
    ok(settled(&v, "s", &m, (1u << n) - 1), "%d+%d failed write: fragments", n - r, r);
    free(m.b);
    vol_close(&v);
}

struct lookup_thread {
    struct vol *v;
    const char *name;
    int rc;
    bool done;
};

static void *lookup_main(void *arg)
{
    struct lookup_thread *l = arg;
    struct bfs_stack *st = bfs_stack_new();
    struct bfs_lookup_req req = {.loc = L(&ROOT, l->name)};
    l->rc = bfs_sync_lookup(l->v->ec, st, &req, NULL);
    bfs_stack_unref(st);
    __atomic_store_n(&l->done, true, __ATOMIC_RELEASE);
    return NULL;
}

/* inodelk in the data domain ("ec") on child i by owner: cmd SETLK or 0 */
static int foreign_lock(struct vol *v, int i, const struct bfs_gfid *g, int cmd)
{
    struct bfs_stack *st = bfs_stack_new();
    st->lk_owner = 0xdead0000beefull;
    struct bfs_inodelk_req req = {.domain = "ec", .cmd = (uint32_t)(cmd ? cmd : BFS_LK_SETLK),
                                  .lock = {.type = cmd ? F_WRLCK : F_UNLCK,
                                           .owner = st->lk_owner}};
    req.loc.gfid = *g;
    int rc = bfs_sync_inodelk(child(v, i), st, &req, NULL);
    bfs_stack_unref(st);
    return rc;
}

/* A heal never queues behind a lock held elsewhere while holding the
 * lock on other children: with another owner holding the data lock on one
 * child, a heal on access gives up in bounded time and leaves no child
 * locked; once the lock is gone, the next access heals. */
static void heal_vs_lock(int n, int r)
{
    struct vol v;
    ok(vol_open(&v, n, r, " option cluster.heal-lock-timeout 1\n") == 0,
       "%d+%d heal lock: graph", n - r, r);
    struct model m = {.b = calloc(1, MAXF + 65536)};
    struct bfs_fd *fd;
    struct bfs_gfid g;
    ok(create(&v, "h", &fd, &g) == 0 && m_write(&v, fd, &m, 0, 30000) == 30000,
       "%d+%d heal lock: a file", n - r, r);
    flush_close(&v, fd);
    quiesce_name(&v, "h");
    down(&v, 0);
    ok(open_(&v, &g, O_RDWR, &fd) == 0 && m_write(&v, fd, &m, 100, 5000) == 5000,
       "%d+%d heal lock: written with child 0 down", n - r, r);
    flush_close(&v, fd);
    settled(&v, "h", &m, 0); /* the delayed post-op */
    usleep(200000);
    up(&v, 0);
    ok(foreign_lock(&v, 1, &g, BFS_LK_SETLK) == 0, "%d+%d heal lock: another owner locks child 1",
       n - r, r);
    struct lookup_thread lt = {.v = &v, .name = "h"};
    pthread_t th;
    pthread_create(&th, NULL, lookup_main, &lt);
    bool done = false;
    for (int i = 0; i < 800 && !done; i++) { /* 8 s */
        usleep(10000);
        done = __atomic_load_n(&lt.done, __ATOMIC_ACQUIRE);
    }
    ok(done, "%d+%d heal lock: the lookup (foreground heal) answers while the lock is held",
       n - r, r);
    bool free0 = foreign_lock(&v, 0, &g, BFS_LK_SETLK) == 0;
    if (free0)
        foreign_lock(&v, 0, &g, 0);
    ok(done && free0, "%d+%d heal lock: the heal left child 0 unlocked", n - r, r);
    foreign_lock(&v, 1, &g, 0);
    pthread_join(th, NULL);
    ok(lookup(&v, "h", NULL) == 0 && settled(&v, "h", &m, (1u << n) - 1),
       "%d+%d heal lock: the next access heals", n - r, r);
    free(m.b);
    vol_close(&v);
}

/* getxattr "brickfs.heal.status" / "brickfs.heal.now" on loc{gfid}: what
 * the self-heal daemon asks (replicate's contract). */
static int heal_vop(struct vol *v, const struct bfs_gfid *g, const char *name, char *pending,
                    size_t len)
{
    struct bfs_getxattr_req req = {.name = name};
    struct bfs_getxattr_rep rep;
    req.loc.gfid = *g;
    int rc = bfs_sync_getxattr(v->ec, v->st, &req, &rep);
    const char *s = NULL;
    pending[0] = '\0';
    if (rc >= 0 && bfs_dict_get_str(rep.xattrs, "brickfs.heal.pending", &s) == 0 && s)
        snprintf(pending, len, "%s", s);
    else if (rc >= 0)
        rc = -EPROTO;
    bfs_getxattr_rep_clear_dup(&rep);
    return rc;
}

/* What the self-heal daemon relies on: a change that left a child behind
 * leaves a dirty mark on the children that took it (the brick index lists
 * the inode), the status says what is pending, and heal.now heals it with
 * no lookup through the translator. */
static void shd_entry_points(int n, int r)
{
    struct vol v;
    ok(vol_open(&v, n, r, " option cluster.data-self-heal off\n"
                          " option cluster.metadata-self-heal off\n") == 0,
       "%d+%d shd: graph", n - r, r);
    struct model m = {.b = calloc(1, MAXF + 65536)};
    struct bfs_fd *fd;
    struct bfs_gfid g;
    ok(create(&v, "z", &fd, &g) == 0 && m_write(&v, fd, &m, 0, 30000) == 30000,
       "%d+%d shd: a file", n - r, r);
    flush_close(&v, fd);
    quiesce_name(&v, "z");
    ok(settled(&v, "z", &m, (1u << n) - 1), "%d+%d shd: clean", n - r, r);
    char pend[64];
    ok(heal_vop(&v, &g, "brickfs.heal.status", pend, sizeof(pend)) > 0 && pend[0] == '\0',
       "%d+%d shd: status of a clean file: nothing pending", n - r, r);
    down(&v, n - 1);
    ok(open_(&v, &g, O_RDWR, &fd) == 0 && m_write(&v, fd, &m, 1000, 9000) == 9000,
       "%d+%d shd: written with a child down", n - r, r);
    flush_close(&v, fd);
    bool marked = false;
    for (int i = 0; i < 300 && !marked; i++) { /* after the delayed post-op too */
        usleep(10000);
        marked = i > 20 && xnum(&v, 0, "z", "trusted.brickfs.ec.dirty", 0) > 0;
    }
    ok(marked, "%d+%d shd: the children that took it keep a dirty mark (for the index)",
       n - r, r);
    ok(heal_vop(&v, &g, "brickfs.heal.status", pend, sizeof(pend)) > 0 &&
           strstr(pend, "data") != NULL,
       "%d+%d shd: status with the child down: data pending (%s)", n - r, r, pend);
    up(&v, n - 1);
    ok(heal_vop(&v, &g, "brickfs.heal.now", pend, sizeof(pend)) > 0 && pend[0] == '\0',
       "%d+%d shd: heal.now heals it (left: '%s')", n - r, r, pend);
    ok(bricks_ok(&v, "z", &m, (1u << n) - 1), "%d+%d shd: fragments and marks after heal.now",
       n - r, r);
    for (int i = 0; i < r; i++)
        down(&v, i);
    ok(open_(&v, &g, O_RDONLY, &fd) == 0 && same(&v, fd, &m),
       "%d+%d shd: reads that need the healed parity are right", n - r, r);
    flush_close(&v, fd);
    struct bfs_stack *st = bfs_stack_new();
    st->uid = 1000;
    struct bfs_getxattr_req req = {.name = "brickfs.heal.now"};
    req.loc.gfid = g;
    ok(bfs_sync_getxattr(v.ec, st, &req, NULL) == -EPERM, "%d+%d shd: uid 0 only", n - r, r);
    bfs_stack_unref(st);
    struct bfs_setxattr_req sreq = {.xattrs = bfs_dict_new()};
    sreq.loc.gfid = g;
    bfs_dict_set_str(sreq.xattrs, "brickfs.heal.resolve", "bigger-file");
    ok(bfs_sync_setxattr(v.ec, v.st, &sreq, NULL) == -EALREADY &&
           lgetxattr(on(&v, 0, "z"), "brickfs.heal.resolve", NULL, 0) < 0,
       "%d+%d shd: a split-brain resolution is refused (EALREADY), nothing set", n - r, r);
    bfs_dict_unref(sreq.xattrs);
    free(m.b);
    vol_close(&v);
}

struct wthread {
    struct vol *v;
    struct bfs_fd *fd;
    size_t len;
    int rounds, rc;
    bool done;
};

/* Rewrites the whole region, all 'A' then all 'B', ... */
static void *write_main(void *arg)
{
    struct wthread *w = arg;
    struct bfs_stack *st = bfs_stack_new();
    uint8_t *b = malloc(w->len);
    for (int i = 0; i < w->rounds && w->rc >= 0; i++) {
        memset(b, i % 2 ? 'B' : 'A', w->len);
        struct bfs_write_req req = {.fd = w->fd, .offset = 0};
        req.data.data = b;
        req.data.len = w->len;
        int rc = bfs_sync_write(w->v->ec, st, &req, NULL);
        if (rc != (int)w->len)
            w->rc = rc < 0 ? rc : -EIO;
    }
    free(b);
    bfs_stack_unref(st);
    __atomic_store_n(&w->done, true, __ATOMIC_RELEASE);
    return NULL;
}

/* -1 if every stripe of got is one byte repeated, else the first that is not */
static int mixed_stripe(const struct vol *v, const uint8_t *got, size_t len)
{
    for (uint64_t s = 0; s * v->stripe < len; s++)
        for (uint64_t b = 1; b < v->stripe; b++)
            if (got[s * v->stripe + b] != got[s * v->stripe])
                return (int)s;
    return -1;
}

static int read2(struct vol *v, struct bfs_xl *ec2, struct bfs_fd *fd2, uint8_t *got, size_t len)
{
    struct bfs_read_req rreq = {.fd = fd2, .size = (uint32_t)len, .offset = 0};
    struct bfs_read_rep rrep;
    int rc = bfs_sync_read(ec2, v->st, &rreq, &rrep);
    if (rc >= 0) {
        rc = (int)(rrep.data.len < len ? rrep.data.len : len);
        memcpy(got, rrep.data.data, (size_t)rc);
    }
    bfs_read_rep_clear_dup(&rrep);
    return rc;
}

/* Two clients of the same bricks (two disperse translators, "ec" and
 * "ec2"). One rewrites whole stripes again and again while the other
 * reads them: every stripe read is all old or all new, never decoded from
 * fragments of two versions. Then a write that fails on one child (the
 * others blame it): the other client, whose cached view still counts that
 * child as good, must not read its old fragments beside the new ones. */
static void torn_read(int n, int r)
{
    struct vol v;
    two_clients = true;
    ok(vol_open(&v, n, r, NULL) == 0, "%d+%d torn read: graph with two clients", n - r, r);
    two_clients = false;
    struct bfs_xl *ec2 = bfs_graph_find(v.g, "ec2");
    size_t len = 8 * v.stripe;
    uint8_t *got = malloc(len), *old = malloc(len);
    memset(old, 'A', len);
    struct bfs_fd *fd, *fd2 = NULL;
    struct bfs_gfid g;
    ok(create(&v, "t", &fd, &g) == 0 && write_(&v, fd, 0, old, len) == (int)len,
       "%d+%d torn read: a file of 8 stripes", n - r, r);
    flush_close(&v, fd);
    quiesce_name(&v, "t");
    struct bfs_lookup_req lreq = {.loc = L(&ROOT, "t")};
    struct bfs_inode *inode = bfs_inode_get(v.g->itable, &g, S_IFREG);
    fd2 = bfs_fd_new(v.g, inode, O_RDONLY, 0);
    bfs_inode_unref(inode);
    struct bfs_open_req oreq = {.fd = fd2, .flags = O_RDONLY};
    oreq.loc.gfid = g;
    ok(bfs_sync_lookup(ec2, v.st, &lreq, NULL) == 0 && bfs_sync_open(ec2, v.st, &oreq, NULL) == 0,
       "%d+%d torn read: the other client opens it", n - r, r);
    ok(open_(&v, &g, O_RDWR, &fd) == 0, "%d+%d torn read: the writer opens it", n - r, r);
    struct wthread w = {.v = &v, .fd = fd, .len = len, .rounds = 150};
    pthread_t th;
    pthread_create(&th, NULL, write_main, &w);
    /* The writer's lock waits for the reader's, and the reader's lock
     * holder hears it at once (a contention notice ends its window): the
     * two take turns every few calls (4-950 reads seen, under load).
     * Without notices the reader kept its window for up to a second at a
     * time: the 150 rewrites took 20-300 s and hundreds of thousands of
     * reads. READS_MAX bounds that without timing anything. */
    enum { READS_MAX = 100 * 150 };
    int reads = 0, bad = -1, rc = 0;
    while (!__atomic_load_n(&w.done, __ATOMIC_ACQUIRE) && bad < 0 && rc >= 0 &&
           reads < READS_MAX) {
        rc = read2(&v, ec2, fd2, got, len);
        reads++;
        if (rc == (int)len)
            bad = mixed_stripe(&v, got, len);
    }
    pthread_join(th, NULL);
    ok(w.rc == 0 && rc >= 0 && bad < 0,
       "%d+%d torn read: %d reads during 150 rewrites: every stripe all old or all new "
       "(write %d, read %d, first mixed stripe %d)", n - r, r, reads, w.rc, rc, bad);
    ok(reads < READS_MAX, "%d+%d torn read: the reader does not keep the writer out (%d reads "
       "during the 150 rewrites, fewer than %d)", n - r, r, reads, READS_MAX);
    /* a write that fails on child 1 only; then the other client reads */
    reconf(&v, 1, "enable", "write");
    reconf(&v, 1, "failure", "100");
    memset(old, 'C', len);
    ok(write_(&v, fd, 0, old, len) == (int)len, "%d+%d torn read: a write child 1 fails",
       n - r, r);
    reconf(&v, 1, "failure", "0");
    reconf(&v, 1, "enable", "all");
    flush_close(&v, fd);
    rc = read2(&v, ec2, fd2, got, len);
    ok(rc == (int)len && memcmp(got, old, len) == 0,
       "%d+%d torn read: the other client reads the new data, not child 1's old fragments "
       "(read %d, first mixed stripe %d)", n - r, r, rc, rc > 0 ? mixed_stripe(&v, got, len) : -2);
    struct bfs_flush_req freq = {.fd = fd2};
    (void)bfs_sync_flush(ec2, v.st, &freq, NULL);
    bfs_fd_unref(fd2);
    free(old);
    free(got);
    vol_close(&v);
}

/* Client A (ec) creates and removes names in the root in a loop, so that
 * its entry window on the directory is always in use; client B (ec2, the
 * same bricks) makes and removes its own names there meanwhile. B's
 * entrylk queues behind A's window, the bricks tell A (a contention
 * notice), A lets go: B's changes go through while A goes on, and every
 * brick ends with the same names and no dirty mark. */
struct ewin {
    struct vol *v;
    int made, rc;
    bool stop;
};

static int make_name(struct bfs_xl *ec, struct vol *v, const char *name)
{
    struct bfs_fd *fd = bfs_fd_new(v->g, NULL, O_RDWR, 0);
    struct bfs_create_req req = {.loc = L(&ROOT, name), .fd = fd, .flags = O_RDWR | O_CREAT,
                                 .mode = 0644};
    int rc = bfs_sync_create(ec, v->st, &req, NULL);
    struct bfs_flush_req freq = {.fd = fd};
    if (rc == 0)
        rc = bfs_sync_flush(ec, v->st, &freq, NULL);
    bfs_fd_unref(fd);
    return rc;
}

static void *ewin_main(void *arg)
{
    struct ewin *a = arg;
    enum { A_MAX = 20000 }; /* B kept out until the 1 s window bound: far more */
    for (int k = 0; k < A_MAX && !__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE) && !a->rc; k++) {
        char name[32];
        snprintf(name, sizeof(name), "a%d", k);
        a->rc = make_name(a->v->ec, a->v, name);
        if (!a->rc && k % 2) { /* every other one removed again: unlinks too */
            struct bfs_unlink_req u = {.loc = L(&ROOT, name)};
            a->rc = bfs_sync_unlink(a->v->ec, a->v->st, &u, NULL);
        }
        __atomic_store_n(&a->made, k + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* Names in brick i's root (not ours). */
static int names_on(struct vol *v, int i)
{
    DIR *d = opendir(v->brick[i]);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] == 'a' || e->d_name[0] == 'b';
    if (d)
        closedir(d);
    return n;
}

static void entry_window_two_clients(int n, int r)
{
    struct vol v;
    two_clients = true;
    ok(vol_open(&v, n, r, NULL) == 0, "%d+%d entry window: graph with two clients", n - r, r);
    two_clients = false;
    struct bfs_xl *ec2 = bfs_graph_find(v.g, "ec2");
    struct ewin a = {.v = &v};
    pthread_t th;
    pthread_create(&th, NULL, ewin_main, &a);
    while (__atomic_load_n(&a.made, __ATOMIC_ACQUIRE) < 5 && !a.rc)
        usleep(1000); /* A's window is there */
    enum { B = 20 };
    int brc = 0;
    for (int k = 0; k < B && !brc; k++) {
        char name[32];
        snprintf(name, sizeof(name), "b%d", k);
        brc = make_name(ec2, &v, name);
    }
    struct bfs_unlink_req u = {.loc = L(&ROOT, "b0")};
    if (!brc)
        brc = bfs_sync_unlink(ec2, v.st, &u, NULL);
    int during = __atomic_load_n(&a.made, __ATOMIC_ACQUIRE);
    __atomic_store_n(&a.stop, true, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    ok(brc == 0 && a.rc == 0, "%d+%d entry window: both clients' creates and unlinks succeed "
       "(B %d, A %d)", n - r, r, brc, a.rc);
    /* with notices the two take turns (about one of A's changes per one
     * of B's); without them each of B's 21 changes waits for A's window
     * to end otherwise (its age bound): 300-460 of A's changes were seen */
    ok(during < 150, "%d+%d entry window: B got in while A went on (%d of A's changes "
       "meanwhile)", n - r, r, during);
    int want = (a.made + 1) / 2 + B - 1;
    struct stat st;
    bool same = true, clean = false;
    for (int i = 0; i < n; i++)
        same = same && names_on(&v, i) == want;
    ok(same, "%d+%d entry window: every brick holds the %d names", n - r, r, want);
    for (int k = 0; k < 500 && !clean; k++) { /* the windows end after their delay */
        clean = true;
        for (int i = 0; i < n; i++) {
            static const uint8_t zero[8];
            uint8_t raw[24] = {0};
            ssize_t len = lgetxattr(v.brick[i], "trusted.brickfs.ec.dirty", raw, sizeof(raw));
            clean = clean && (len < 24 || memcmp(raw + 16, zero, 8) == 0);
        }
        if (!clean)
            usleep(10000);
    }
    ok(clean, "%d+%d entry window: no entry dirty mark left on the directory", n - r, r);
    ok(stat(on(&v, 0, "b0"), &st) < 0 && stat(on(&v, n - 1, "b1"), &st) == 0,
       "%d+%d entry window: B's unlink and create reached the bricks", n - r, r);
    vol_close(&v);
}

int main(void)
{
    plan_lazy();
    if (geteuid() != 0) {
        printf("1..0 # SKIP needs root (trusted xattrs)\n");
        return 0;
    }
    alarm(600);
    bfs_log_set_level(getenv("EC_LOG") ? BFS_LOG_DEBUG : BFS_LOG_ERROR);
    snprintf(root, sizeof(root), "/tmp/bfs-ec-XXXXXX");
    if (!mkdtemp(root))
        return 1;
    proc = bfs_proc_new("test_disperse", 2);
    ok(proc != NULL, "process resources");
    const char *only = getenv("EC_TEST"); /* one scenario; EC_LOG=1: debug log on stderr */
    static const int layouts[2][2] = {{4, 1}, {8, 2}};
    for (int l = 0; l < 2; l++) {
        int n = layouts[l][0], r = layouts[l][1];
        if (!only || strcmp(only, "random") == 0)
            random_io(n, r);
        if (!only || strcmp(only, "degraded") == 0)
            degraded(n, r);
        if (!only || strcmp(only, "concurrent") == 0)
            concurrent(n, r);
        if (!only || strcmp(only, "crash") == 0)
            crashed_writer(n, r);
        if (!only || strcmp(only, "meta") == 0)
            meta_entry_heal(n, r);
        if (!only || strcmp(only, "blame") == 0)
            fop_fails_on_one(n, r);
        if (!only || strcmp(only, "size") == 0)
            failed_everywhere(n, r);
        if (!only || strcmp(only, "heallock") == 0)
            heal_vs_lock(n, r);
        if (!only || strcmp(only, "shd") == 0)
            shd_entry_points(n, r);
        if (!only || strcmp(only, "torn") == 0)
            torn_read(n, r);
        if (!only || strcmp(only, "entrywin") == 0)
            entry_window_two_clients(n, r);
    }
    bfs_proc_free(proc);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", root);
    return done_testing();
}
