/*
 * test_txn_piggy.c — changelog steps that ride in other calls
 * (lib/txn-piggy.c, features/locks/locks-txn.c; docs/design/replicate.md,
 * "Piggybacked changelog steps"): replica 3 in one process, each child
 * storage/posix under features/locks under debug/io-stats (s0, s1, s2:
 * what reached each brick), named c0..c2.
 *
 * Checks, with the calls counted at each brick and the counters read on
 * the brick directories:
 *   - the first create takes the long way (separate pre-op), every later
 *     one carries its pre-op in the create and its unlock in the post-op:
 *     one entrylk and one xattrop per create;
 *   - after them, no dirty mark on the parent, and the entry locks are free
 *     (another owner takes them non-blocking on every brick);
 *   - a create that fails everywhere (EEXIST) leaves no dirty mark (the
 *     brick took its pre-op back);
 *   - a create takes its file's data lock: the writes through its fd send
 *     no inodelk and no pre-op, the flush releases the lock with its
 *     post-op (no inodelk at all), the copies hold the data, no mark left;
 *   - a created file nobody writes loses its lock and mark at the delayed
 *     post-op;
 *   - a create asking for its lock at a brick gets its rows through its
 *     own fd, never on an existing file it opened instead;
 *   - O_RDONLY opens ask only the copy that will serve the reads for the
 *     open-prefetch (replicate-prefetch.c).
 * Needs root (trusted xattrs); skips otherwise.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "core/graph.h"
#include "xlators/lib/txn-wire.h"

static struct bfs_proc *proc;
static char root[256];

struct vol {
    struct bfs_graph *g;
    struct bfs_xl *afr;
    char brick[3][PATH_MAX];
    struct bfs_stack *st;
};

static int vol_open(struct vol *v, const char *tag, int delay_ms)
{
    char text[4096];
    size_t len = 0;
    memset(v, 0, sizeof(*v));
    for (int i = 0; i < 3; i++) {
        snprintf(v->brick[i], sizeof(v->brick[i]), "%s/%s%d", root, tag, i);
        if (mkdir(v->brick[i], 0755) < 0)
            return -1;
        len += (size_t)snprintf(text + len, sizeof(text) - len,
                                "volume b%d\n type storage/posix\n option directory %s\n"
                                "end-volume\n"
                                "volume l%d\n type features/locks\n subvolumes b%d\nend-volume\n"
                                "volume c%d\n type debug/io-stats\n subvolumes l%d\nend-volume\n",
                                i, v->brick[i], i, i, i, i);
    }
    len += (size_t)snprintf(text + len, sizeof(text) - len,
                            "volume rep\n type cluster/replicate\n"
                            " option cluster.post-op-delay-ms %d\n"
                            /* the one-shot entry locks these checks are about (entry
                             * windows: test_txn_contend, scenario "entry") */
                            " option cluster.entry-eager-lock off\n subvolumes c0 c1 c2\n"
                            "end-volume\n",
                            delay_ms);
    char err[512];
    if (bfs_graph_from_text(text, len, "piggy.vol", proc, &v->g, err, sizeof(err)) < 0) {
        printf("# graph: %s\n", err);
        return -1;
    }
    if (bfs_graph_init(v->g) < 0)
        return -1;
    bfs_graph_activate(v->g);
    v->afr = v->g->top;
    v->st = bfs_stack_new();
    return 0;
}

/* Calls of fop that reached brick i (from its io-stats dump). */
static uint64_t calls(struct vol *v, int i, const char *fop)
{
    char name[16], pat[64];
    snprintf(name, sizeof(name), "c%d", i);
    snprintf(pat, sizeof(pat), "\"%s\":{\"count\":", fop);
    struct bfs_xl *s = bfs_graph_find(v->g, name);
    char *d = s ? s->mod->dump(s) : NULL;
    const char *p = d ? strstr(d, pat) : NULL;
    uint64_t n = p ? strtoull(p + strlen(pat), NULL, 10) : 0;
    free(d);
    return n;
}

/* calls(), polled for up to 5 s until it reaches want (the calls behind
 * an answer are counted when they answer). */
static uint64_t calls_reach(struct vol *v, int i, const char *fop, uint64_t want)
{
    uint64_t n = calls(v, i, fop);
    for (int k = 0; k < 500 && n < want; k++) {
        usleep(10000);
        n = calls(v, i, fop);
    }
    return n;
}

/* lock_free(), polled for up to 5 s. */
static bool lock_freed(struct vol *v, int i, const char *name, const struct bfs_gfid *gfid);

/* The dirty counter of `type` (0 data, 2 entry) on brick i's path rel. */
static int64_t dirty(struct vol *v, int i, const char *rel, int type)
{
    char path[PATH_MAX];
    uint8_t raw[24];
    snprintf(path, sizeof(path), "%s/%s", v->brick[i], rel);
    if (lgetxattr(path, "trusted.brickfs.afr.dirty", raw, sizeof(raw)) != (ssize_t)sizeof(raw))
        return 0;
    uint64_t be;
    memcpy(&be, raw + 8 * type, 8);
    return (int64_t)be64toh(be);
}

static struct bfs_loc L(const char *name)
{
    struct bfs_loc l = {0};
    l.pargfid.b[15] = 1; /* the root */
    l.name = name;
    return l;
}

static int create(struct vol *v, const char *name, struct bfs_fd **fdp)
{
    struct bfs_fd *fd = bfs_fd_new(v->g, NULL, O_RDWR, 0);
    struct bfs_create_req req = {.loc = L(name), .fd = fd, .flags = O_RDWR | O_CREAT | O_EXCL,
                                 .mode = 0644};
    int rc = bfs_sync_create(v->afr, v->st, &req, NULL);
    if (rc < 0 || !fdp)
        bfs_fd_unref(fd);
    else
        *fdp = fd;
    return rc;
}

/* Can another owner take the entry lock on name (or, NULL, the data lock
 * of gfid) on brick i right now? Takes and drops it. */
static bool lock_free(struct vol *v, int i, const char *name, const struct bfs_gfid *gfid)
{
    char c[16];
    snprintf(c, sizeof(c), "c%d", i);
    struct bfs_xl *x = bfs_graph_find(v->g, c);
    struct bfs_stack *st = bfs_stack_new();
    st->lk_owner = 777;
    int rc;
    if (name) {
        struct bfs_entrylk_req r = {.domain = "rep", .basename = name,
                                    .cmd = BFS_ENTRYLK_LOCK_NB, .type = BFS_ENTRYLK_WRLCK};
        r.loc.gfid.b[15] = 1;
        rc = bfs_sync_entrylk(x, st, &r, NULL);
        r.cmd = BFS_ENTRYLK_UNLOCK;
        if (rc == 0)
            bfs_sync_entrylk(x, st, &r, NULL);
    } else {
        struct bfs_inodelk_req r = {.domain = "rep", .cmd = BFS_LK_SETLK};
        r.loc.gfid = *gfid;
        r.lock.type = F_WRLCK;
        rc = bfs_sync_inodelk(x, st, &r, NULL);
        r.lock.type = F_UNLCK;
        if (rc == 0)
            bfs_sync_inodelk(x, st, &r, NULL);
    }
    bfs_stack_unref(st);
    return rc == 0;
}

static bool settled(struct vol *v, const char *rel, int type);

/* The first entry transactions take the long way, until a post-op's reply
 * (behind their answer) has told replicate that the bricks know the keys:
 * creates until one costs a single xattrop per brick (its post-op). */
static bool warm_up(struct vol *v)
{
    for (int k = 0; k < 100; k++) {
        char name[32];
        uint64_t x0[3];
        for (int i = 0; i < 3; i++)
            x0[i] = calls(v, i, "xattrop");
        snprintf(name, sizeof(name), "warm%d", k);
        if (create(v, name, NULL) < 0 || !settled(v, ".", 2))
            return false;
        bool piggy = true;
        for (int i = 0; i < 3; i++)
            piggy = piggy && calls(v, i, "xattrop") - x0[i] == 1;
        if (piggy)
            return true;
        usleep(10000);
    }
    return false;
}

static bool lock_freed(struct vol *v, int i, const char *name, const struct bfs_gfid *gfid)
{
    for (int k = 0; k < 500; k++) {
        if (lock_free(v, i, name, gfid))
            return true;
        usleep(10000);
    }
    return false;
}

/* Polls until the post-ops behind the answers are done: the parent's
 * entry dirty mark is back to 0 on every brick (at most 10 s). */
static bool settled(struct vol *v, const char *rel, int type)
{
    for (int k = 0; k < 1000; k++) {
        bool clean = true;
        for (int i = 0; i < 3; i++)
            clean = clean && dirty(v, i, rel, type) == 0;
        if (clean)
            return true;
        usleep(10000);
    }
    return false;
}

static void test_entry(struct vol *v)
{
    enum { N = 20 };
    char name[32];
    uint64_t lk0[3], xo0[3];
    for (int i = 0; i < 3; i++) {
        lk0[i] = calls(v, i, "entrylk");
        xo0[i] = calls(v, i, "xattrop");
    }
    for (int k = 0; k < N; k++) {
        snprintf(name, sizeof(name), "f%d", k);
        is_int(create(v, name, NULL), 0, "create %s", name);
        ok(settled(v, ".", 2), "no dirty mark on the parent after %s", name);
    }
    for (int i = 0; i < 3; i++) {
        /* lock, then the post-op carrying the unlock (the pre-op rode in
         * the create) */
        is_int((int)(calls_reach(v, i, "entrylk", lk0[i] + N) - lk0[i]), N,
               "c%d: one entrylk per create", i);
        is_int((int)(calls_reach(v, i, "xattrop", xo0[i] + N) - xo0[i]), N,
               "c%d: one xattrop per create", i);
        ok(lock_freed(v, i, "f3", NULL) && lock_freed(v, i, "f19", NULL),
           "c%d: the entry locks were released", i);
    }
    is_int(create(v, "f5", NULL), -EEXIST, "create of an existing name: EEXIST");
    ok(settled(v, ".", 2), "its pre-op was taken back on every brick");
    for (int i = 0; i < 3; i++) /* the unlock goes behind the answer */
        ok(lock_freed(v, i, "f5", NULL), "c%d: and its lock released", i);
    struct bfs_unlink_req u = {.loc = L("f7")};
    is_int(bfs_sync_unlink(v->afr, v->st, &u, NULL), 0, "unlink f7");
    ok(settled(v, ".", 2), "no dirty mark after the unlink");
    for (int i = 0; i < 3; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/f7", v->brick[i]);
        ok(access(p, F_OK) < 0 && errno == ENOENT, "c%d: f7 is gone", i);
    }
}

/* A create and the writes through its fd, as FUSE makes them: the fd has
 * the inode of the GFID the create asks for. */
static void test_data(struct vol *v)
{
    struct bfs_gfid g;
    bfs_gfid_generate(&g);
    struct bfs_inode *inode = bfs_inode_get(v->g->itable, &g, S_IFREG);
    struct bfs_fd *fd = bfs_fd_new(v->g, inode, O_RDWR, 0);
    bfs_inode_unref(inode);
    struct bfs_dict *x = bfs_dict_new();
    bfs_dict_set_bin(x, "gfid-req", g.b, sizeof(g.b));
    uint64_t il0[3], fx0[3], xo0[3];
    for (int i = 0; i < 3; i++) {
        il0[i] = calls(v, i, "inodelk") + calls(v, i, "finodelk");
        fx0[i] = calls(v, i, "fxattrop") + calls(v, i, "xattrop");
        xo0[i] = calls(v, i, "xattrop");
    }
    struct bfs_create_req req = {.loc = L("d"), .fd = fd, .flags = O_RDWR | O_CREAT | O_EXCL,
                                 .mode = 0644, .xdata = x};
    is_int(bfs_sync_create(v->afr, v->st, &req, NULL), 0, "create d");
    bfs_dict_unref(x);
    struct bfs_write_req w = {.fd = fd, .offset = 0};
    w.data.data = "hello";
    w.data.len = 5;
    is_int(bfs_sync_write(v->afr, v->st, &w, NULL), 5, "write (joins the lock the create took)");
    w.offset = 5;
    is_int(bfs_sync_write(v->afr, v->st, &w, NULL), 5, "second write");
    struct bfs_flush_req f = {.fd = fd};
    is_int(bfs_sync_flush(v->afr, v->st, &f, NULL), 0, "flush (releases the lock)");
    ok(settled(v, ".", 2), "no entry dirty mark on the parent");
    for (int i = 0; i < 3; i++) {
        is_int((int)(calls(v, i, "inodelk") + calls(v, i, "finodelk") - il0[i]), 0,
               "c%d: no inodelk at all (taken by the create, released by the post-op)", i);
        /* the entry post-op on the parent and the data post-op at flush,
         * both behind their answers (the flush answers once the release of
         * the data lock has started); the brick frees the lock after the
         * post-op carrying the unlock */
        ok(lock_freed(v, i, NULL, &g), "c%d: the data lock is free after the flush", i);
        calls_reach(v, i, "xattrop", xo0[i] + 1);
        uint64_t xops = calls(v, i, "fxattrop") + calls(v, i, "xattrop");
        for (int k = 0; k < 500 && xops < fx0[i] + 2; k++) {
            usleep(10000);
            xops = calls(v, i, "fxattrop") + calls(v, i, "xattrop");
        }
        is_int((int)(xops - fx0[i]), 2, "c%d: two xattrops (entry post-op, data post-op)", i);
        is_int((int)dirty(v, i, "d", 0), 0, "c%d: no data dirty mark after the flush", i);
        char p[PATH_MAX], buf[16] = {0};
        snprintf(p, sizeof(p), "%s/d", v->brick[i]);
        FILE *fp = fopen(p, "r");
        size_t n = fp ? fread(buf, 1, sizeof(buf) - 1, fp) : 0;
        if (fp)
            fclose(fp);
        ok(n == 10 && strcmp(buf, "hellohello") == 0, "c%d: holds both writes", i);
    }
    bfs_fd_unref(fd);
}

/* O_RDONLY opens with open-prefetch (as protocol/client asks, here sent by
 * the test): only the copy that will serve the reads is asked for it, the
 * others get 0 (replicate-prefetch.c). The open's answer is the first copy's
 * reply (c0), so it carries the file only when c0 is that copy: with
 * gfid-hash that is about a third of the files, not all of them. */
static void test_prefetch(struct vol *v)
{
    enum { N = 30 };
    int with = 0, right = 0;
    struct bfs_dict *lazy = bfs_dict_new(); /* every copy opened (replicate-fd.c) */
    bfs_dict_set_str(lazy, "cluster.lazy-open", "off");
    v->afr->mod->reconfigure(v->afr, lazy);
    for (int k = 0; k < N; k++) {
        char name[32];
        snprintf(name, sizeof(name), "p%d", k);
        struct bfs_fd *wfd = NULL;
        if (create(v, name, &wfd) < 0)
            continue;
        struct bfs_write_req w = {.fd = wfd, .offset = 0};
        w.data.data = name;
        w.data.len = strlen(name);
        bfs_sync_write(v->afr, v->st, &w, NULL);
        struct bfs_flush_req f = {.fd = wfd};
        bfs_sync_flush(v->afr, v->st, &f, NULL);
        bfs_fd_unref(wfd);
        struct bfs_lookup_req lr = {.loc = L(name)};
        struct bfs_lookup_rep lrep;
        if (bfs_sync_lookup(v->afr, v->st, &lr, &lrep) < 0)
            continue;
        struct bfs_gfid g = lrep.attr.gfid;
        bfs_lookup_rep_clear_dup(&lrep);
        /* held from lookup to open, as the kernel holds a looked-up inode:
         * its context (which copies are good) lives as long */
        struct bfs_inode *inode = bfs_inode_get(v->g->itable, &g, S_IFREG);
        struct bfs_lookup_req lg = {0};
        lg.loc.gfid = g;
        lg.loc.inode = inode;
        bfs_sync_lookup(v->afr, v->st, &lg, NULL);
        struct bfs_fd *fd = bfs_fd_new(v->g, inode, O_RDONLY, 0);
        struct bfs_dict *x = bfs_dict_new();
        bfs_dict_set_int(x, "open-prefetch", 65536);
        struct bfs_open_req o = {.fd = fd, .flags = O_RDONLY, .xdata = x};
        o.loc.gfid = g;
        struct bfs_open_rep orep;
        if (bfs_sync_open(v->afr, v->st, &o, &orep) == 0) {
            const void *data;
            size_t len;
            if (bfs_dict_get_bin(orep.xdata, "open-prefetch", &data, &len) == 0) {
                with++;
                right += len == strlen(name) && memcmp(data, name, len) == 0;
            }
            bfs_open_rep_clear_dup(&orep);
        }
        bfs_dict_unref(x);
        bfs_fd_unref(fd);
        bfs_inode_unref(inode);
    }
    ok(with > 0 && with < N, "the first copy prefetched %d of %d files (the ones it serves)", with,
       N);
    is_int(right, with, "what it prefetched is the file");
    bfs_dict_set_str(lazy, "cluster.lazy-open", "on");
    v->afr->mod->reconfigure(v->afr, lazy);
    bfs_dict_unref(lazy);
}

/* A create whose file nobody writes: the lock it took goes at the delayed
 * post-op, leaving no mark. */
static void test_idle(struct vol *v)
{
    is_int(create(v, "idle", NULL), 0, "create idle");
    bool clean = false;
    for (int k = 0; k < 1000 && !clean; k++) {
        clean = true;
        for (int i = 0; i < 3; i++)
            clean = clean && dirty(v, i, "idle", 0) == 0;
        if (!clean)
            usleep(10000);
    }
    ok(clean, "the file's data dirty mark is cleared by the delayed post-op");
    struct bfs_lookup_req lr = {.loc = L("idle")};
    struct bfs_lookup_rep rep;
    is_int(bfs_sync_lookup(v->afr, v->st, &lr, &rep), 0, "lookup idle");
    struct bfs_gfid g = rep.attr.gfid;
    bfs_lookup_rep_clear_dup(&rep);
    for (int i = 0; i < 3; i++) {
        bool freed = false;
        for (int k = 0; k < 500 && !freed; k++) {
            freed = lock_free(v, i, NULL, &g);
            if (!freed)
                usleep(10000);
        }
        ok(freed, "c%d: its data lock was released", i);
    }
}

/* A create asking for its file's lock straight at brick 0's features/locks
 * (as replicate sends it, the fd without inode as protocol/server makes
 * it): *acked tells whether the reply acknowledged the lock. */
static int brick_create(struct vol *v, const char *name, uint32_t flags, bool *acked)
{
    struct bfs_gfid g;
    bfs_gfid_generate(&g);
    uint8_t row[24] = {0, 0, 0, 0, 0, 0, 0, 1};
    struct bfs_dict *x = bfs_dict_new();
    bfs_dict_set_bin(x, BFS_TXN_X_GFID_REQ, g.b, sizeof(g.b));
    bfs_dict_set_str(x, BFS_TXN_X_NEWLOCK, "rep");
    bfs_dict_set_int(x, BFS_TXN_X_NEWLOCK_OWNER, 4242);
    bfs_dict_set_bin(x, BFS_TXN_X_NEWROW "trusted.brickfs.afr.dirty", row, sizeof(row));
    struct bfs_fd *fd = bfs_fd_new(v->g, NULL, O_RDWR, 0);
    struct bfs_create_req req = {.loc = L(name), .fd = fd, .flags = O_RDWR | O_CREAT | flags,
                                 .mode = 0644, .xdata = x};
    struct bfs_create_rep rep;
    int rc = bfs_sync_create(bfs_graph_find(v->g, "l0"), v->st, &req, &rep);
    *acked = rc == 0 && bfs_dict_has(rep.xdata, BFS_TXN_X_NEWLOCKED);
    if (rc == 0)
        bfs_create_rep_clear_dup(&rep);
    bfs_dict_unref(x);
    bfs_fd_unref(fd);
    return rc;
}

/* The brick adds a new file's rows through the create's own fd, but only
 * to the file it made with the GFID asked: a create that opened an
 * existing file (no O_EXCL) gets neither rows nor lock. */
static void test_newrow(struct vol *v)
{
    bool acked = false;
    is_int(brick_create(v, "nr", O_EXCL, &acked), 0, "brick 0: create nr with its lock");
    ok(acked, "... acknowledges the lock");
    is_int((int)dirty(v, 0, "nr", 0), 1, "... and marked the file dirty");
    /* storage/posix refuses it (EEXIST: another GFID asked); were it opened,
     * locks would still not take it for the file it asked for */
    int rc = brick_create(v, "nr", 0, &acked);
    ok(rc == -EEXIST || (rc == 0 && !acked),
       "brick 0: create of the existing nr with another GFID takes no lock");
    is_int((int)dirty(v, 0, "nr", 0), 1, "... and adds no row to the file");
}

int main(void)
{
    plan_lazy();
    if (geteuid() != 0) {
        printf("1..0 # SKIP needs root (trusted xattrs)\n");
        return 0;
    }
    alarm(120);
    bfs_log_set_level(BFS_LOG_ERROR);
    snprintf(root, sizeof(root), "/tmp/bfs-piggy-XXXXXX");
    if (!mkdtemp(root))
        return 1;
    proc = bfs_proc_new("test_txn_piggy", 2);
    struct vol v;
    static const struct {
        const char *tag;
        int delay;
        void (*fn)(struct vol *);
    } runs[] = {{"e", 100, test_entry}, {"d", 10000, test_data}, {"i", 100, test_idle},
                   {"p", 100, test_prefetch}, {"n", 100, test_newrow}};
    for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
        if (!ok(vol_open(&v, runs[r].tag, runs[r].delay) == 0, "replica 3 graph"))
            return done_testing();
        struct bfs_lookup_req lr = {0};
        lr.loc.gfid.b[15] = 1;
        is_int(bfs_sync_lookup(v.afr, v.st, &lr, NULL), 0, "root lookup");
        ok(warm_up(&v), "creates carry their pre-op once the bricks acknowledged the keys");
        runs[r].fn(&v);
        bfs_graph_free(v.g);
        bfs_stack_unref(v.st);
    }
    bfs_proc_free(proc);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", root);
    return done_testing();
}
