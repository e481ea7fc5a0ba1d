/*
 * test_posix_orphans.c — storage/posix never leaves a handle without a name
 * holding its blocks for good, whatever crash window it was cut in
 * (docs/design/on-brick-format.md "Crashes and recovery", posix-defer.c,
 * posix-orphan.c):
 *
 *   - scan: names removed while the brick was down (what a crash between
 *     the unlink(2) of the name and the journal write leaves): at the next
 *     start the background scan removes those orphan handles, and nothing
 *     live loses its handle (a file, a file with two names, a directory,
 *     a symlink, a special file);
 *   - lost: the journal write and the handle removal never reach the disk
 *     (a power loss right after the answer): the scan at the next start
 *     removes the orphan although the journal does not name it;
 *   - durable: every deferred handle removal happens after a sync of the
 *     journal that covers its GFID's slot (so a journaled GFID survives a
 *     power loss until its handle is gone), and the unlink answers while
 *     that sync is stalled (the sync is not on the answer's path).
 *
 * Crashes are simulated in one process: the brick's system calls are
 * replaced through bfs_posix_sys_override, and the graph is stopped and
 * started again on the same folder. Needs root (trusted xattrs).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/cluster-graph.h"
#include "../lib/tap.h"
#include "core/graph.h"

static struct bfs_stack *st;
typedef int (*override_fn)(const char *, void *, void **);

/* ---- the brick ---- */

static struct bfs_graph *start_posix(const char *dir)
{
    char vf[512];
    /* dir: below cg_root(), well under 256 bytes */
    snprintf(vf, sizeof(vf), "volume px\n type storage/posix\n option directory %.255s\n"
             "end-volume\n", dir);
    return cg_graph_start(vf, NULL);
}

/* The cluster-graph helpers' view of a posix graph. */
static struct cg_vol vol_of(struct bfs_graph *g)
{
    return (struct cg_vol){.g = g, .top = g->top, .n = 1, .st = st};
}

static int mkdir_(struct bfs_graph *g, const char *name, struct bfs_iatt *a)
{
    struct cg_vol v = vol_of(g);
    return cg_mkdir(&v, &bfs_gfid_root, name, a);
}

static int unlink_(struct bfs_graph *g, const char *name)
{
    struct cg_vol v = vol_of(g);
    return cg_unlink(&v, &bfs_gfid_root, name);
}

/* A lookup by GFID only (resolution through the handle). */
static int stat_gfid(struct bfs_graph *g, const struct bfs_gfid *gfid)
{
    struct cg_vol v = vol_of(g);
    return cg_lookup(&v, gfid, NULL, NULL);
}

static override_fn override_of(struct bfs_graph *g)
{
    return (override_fn)dlsym(g->top->dlhandle, "bfs_posix_sys_override");
}

static int mknod_(struct bfs_xl *xl, const char *name, uint32_t mode, struct bfs_iatt *a)
{
    struct bfs_mknod_req q = {.loc = cg_L(&bfs_gfid_root, name), .mode = mode};
    struct bfs_mknod_rep r;
    int rc = bfs_sync_mknod(xl, st, &q, &r);
    *a = r.attr;
    bfs_mknod_rep_clear_dup(&r);
    return rc;
}

static int symlink_(struct bfs_xl *xl, const char *name, const char *target, struct bfs_iatt *a)
{
    struct bfs_symlink_req q = {.target = target, .loc = cg_L(&bfs_gfid_root, name)};
    struct bfs_symlink_rep r;
    int rc = bfs_sync_symlink(xl, st, &q, &r);
    *a = r.attr;
    bfs_symlink_rep_clear_dup(&r);
    return rc;
}

static int link_(struct bfs_xl *xl, const struct bfs_gfid *g, const char *name)
{
    struct bfs_link_req q = {.oldloc = {.gfid = *g}, .newloc = cg_L(&bfs_gfid_root, name)};
    struct bfs_link_rep r;
    int rc = bfs_sync_link(xl, st, &q, &r);
    bfs_link_rep_clear_dup(&r);
    return rc;
}

/* ---- the brick's folder ---- */

static int handle_nlink(const char *dir, const struct bfs_gfid *g)
{
    char hp[384];
    struct stat sb;
    cg_handle_of(dir, g, hp, sizeof(hp));
    return lstat(hp, &sb) == 0 ? (int)sb.st_nlink : -1;
}

/* Polls (up to 30 s) until no deferred handle removal is outstanding. */
static bool defer_idle(struct bfs_xl *xl)
{
    for (int i = 0; i < 3000; i++) {
        char *d = xl->mod->dump(xl);
        bool idle = d && strstr(d, "\"unlinks_deferred\":0,");
        free(d);
        if (idle)
            return true;
        usleep(10000);
    }
    return false;
}

/* ---- scan: names removed while the brick was down ---- */

static void test_scan(void)
{
    char dir[256], path[320];
    snprintf(dir, sizeof(dir), "%.200s/scan", cg_root());
    mkdir(dir, 0755);
    struct bfs_graph *g = start_posix(dir);
    ok(g != NULL, "scan: posix graph");
    if (!g)
        return;
    struct bfs_xl *xl = g->top;
    struct bfs_iatt live, two, orph1, orph2, d, s, fifo;
    is_int(mknod_(xl, "live", S_IFREG | 0644, &live), 0, "scan: mknod live");
    is_int(mknod_(xl, "two", S_IFREG | 0644, &two), 0, "scan: mknod two");
    is_int(link_(xl, &two.gfid, "two.b"), 0, "scan: link two.b");
    is_int(mknod_(xl, "orph1", S_IFREG | 0644, &orph1), 0, "scan: mknod orph1");
    is_int(mknod_(xl, "orph2", S_IFREG | 0644, &orph2), 0, "scan: mknod orph2");
    is_int(mkdir_(g, "d", &d), 0, "scan: mkdir d");
    is_int(symlink_(xl, "s", "nowhere", &s), 0, "scan: symlink s");
    is_int(mknod_(xl, "fifo", S_IFIFO | 0644, &fifo), 0, "scan: mknod fifo");
    cg_graph_stop(g);

    /* the crash window: names gone, handles left, nothing journaled */
    snprintf(path, sizeof(path), "%.255s/orph1", dir);
    ok(unlink(path) == 0, "scan: orph1's name removed while the brick is down");
    snprintf(path, sizeof(path), "%.255s/orph2", dir);
    ok(unlink(path) == 0, "scan: orph2's name removed while the brick is down");
    snprintf(path, sizeof(path), "%.255s/two", dir);
    ok(unlink(path) == 0, "scan: one of two's names removed too");
    is_int(handle_nlink(dir, &orph1.gfid), 1, "scan: orph1's handle is an orphan (nlink 1)");

    g = start_posix(dir);
    ok(g != NULL, "scan: posix graph restarted");
    if (!g)
        return;
    xl = g->top;
    is_int(cg_orphan_scan_finished(xl), 2, "scan: the start-up scan finished and removed 2 orphans");
    ok(!cg_handle_present(dir, &orph1.gfid), "scan: orph1's handle is gone");
    ok(!cg_handle_present(dir, &orph2.gfid), "scan: orph2's handle is gone");
    is_int(stat_gfid(g, &live.gfid), 0, "scan: a live file still resolves by GFID");
    is_int(stat_gfid(g, &two.gfid), 0, "scan: a file with one name left still resolves");
    is_int(stat_gfid(g, &d.gfid), 0, "scan: a directory still resolves (symlink handle)");
    is_int(stat_gfid(g, &s.gfid), 0, "scan: a symlink still resolves");
    is_int(stat_gfid(g, &fifo.gfid), 0, "scan: a fifo still resolves");
    ok(cg_handle_present(dir, &bfs_gfid_root), "scan: the root's handle stays");
    cg_graph_stop(g);

    /* a second start finds nothing to do */
    g = start_posix(dir);
    ok(g != NULL && cg_orphan_scan_finished(g->top) == 0, "scan: a second start removes nothing");
    cg_graph_stop(g);
}

/* ---- lost: the journal write and the handle removal never reached the disk ---- */

static bool fd_is_journal(int fd)
{
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n < 0)
        return false;
    target[n] = '\0';
    return n > 15 && strcmp(target + n - 15, "/unlink-pending") == 0;
}

/* "ab/cd/<36>": a handle path relative to .brickfs */
static bool is_handle_path(const char *p)
{
    return strlen(p) == 6 + BFS_GFID_STRLEN - 1 && p[2] == '/' && p[5] == '/';
}

static ssize_t lost_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (fd_is_journal(fd))
        return (ssize_t)n; /* "written": lost in the power cut */
    return pwrite(fd, buf, n, off);
}

static int lost_unlinkat(int dfd, const char *p, int flags)
{
    if (is_handle_path(p))
        return 0; /* "removed": lost in the power cut */
    return unlinkat(dfd, p, flags);
}

static void test_lost(void)
{
    char dir[256], path[320];
    struct stat sb;
    snprintf(dir, sizeof(dir), "%.200s/lost", cg_root());
    mkdir(dir, 0755);
    struct bfs_graph *g = start_posix(dir);
    ok(g != NULL, "lost: posix graph");
    if (!g)
        return;
    override_fn override = override_of(g);
    ok(override != NULL, "lost: the module exports bfs_posix_sys_override");
    struct bfs_iatt a, b;
    is_int(mknod_(g->top, "gone", S_IFREG | 0644, &a), 0, "lost: mknod gone");
    is_int(mknod_(g->top, "kept", S_IFREG | 0644, &b), 0, "lost: mknod kept");
    cg_orphan_scan_finished(g->top);
    if (!override) {
        cg_graph_stop(g);
        return;
    }
    override("pwrite", (void *)lost_pwrite, NULL);
    override("unlinkat", (void *)lost_unlinkat, NULL);
    is_int(unlink_(g, "gone"), 0, "lost: unlink gone");
    ok(defer_idle(g->top), "lost: the deferred removal ran (and \"removed\" nothing)");
    override("pwrite", NULL, NULL); /* while the module is loaded */
    override("unlinkat", NULL, NULL);
    cg_graph_stop(g);
    is_int(handle_nlink(dir, &a.gfid), 1, "lost: after the 'power cut' gone's handle is an orphan");
    snprintf(path, sizeof(path), "%.255s/.brickfs/unlink-pending", dir);
    ok(stat(path, &sb) == 0 && sb.st_size == 0, "lost: and the journal does not name it");

    g = start_posix(dir);
    ok(g != NULL, "lost: posix graph restarted");
    if (!g)
        return;
    is_int(cg_orphan_scan_finished(g->top), 1, "lost: the scan removed one orphan");
    ok(!cg_handle_present(dir, &a.gfid), "lost: gone's handle is gone");
    is_int(stat_gfid(g, &b.gfid), 0, "lost: kept still resolves by GFID");
    cg_graph_stop(g);
}

/* ---- durable: the journal is synced before a handle goes ---- */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    long ev;              /* event counter */
    long written[64];     /* event of the journal write of files[i] */
    struct bfs_gfid files[64];
    int nfiles;
    long covered;         /* writes before this event are synced */
    int syncs, removals, early; /* early: a handle removed before its slot was synced */
    bool stall, stalled;  /* hold the next journal sync / it is being held */
} J = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static ssize_t dur_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    ssize_t rc = pwrite(fd, buf, n, off);
    if (rc == (ssize_t)n && n >= 16 && fd_is_journal(fd)) {
        pthread_mutex_lock(&J.lock);
        for (int i = 0; i < J.nfiles; i++)
            if (memcmp(J.files[i].b, buf, 16) == 0)
                J.written[i] = ++J.ev;
        pthread_mutex_unlock(&J.lock);
    }
    return rc;
}

static int dur_sync(int fd, int (*real)(int))
{
    if (!fd_is_journal(fd))
        return real(fd);
    pthread_mutex_lock(&J.lock);
    long start = ++J.ev;
    if (J.stall) {
        J.stalled = true;
        pthread_cond_broadcast(&J.cond);
        while (J.stall)
            pthread_cond_wait(&J.cond, &J.lock);
        J.stalled = false;
    }
    pthread_mutex_unlock(&J.lock);
    int rc = real(fd);
    pthread_mutex_lock(&J.lock);
    J.syncs++;
    if (rc == 0 && start > J.covered)
        J.covered = start;
    pthread_mutex_unlock(&J.lock);
    return rc;
}

static int dur_fdatasync(int fd)
{
    return dur_sync(fd, fdatasync);
}

static int dur_fsync(int fd)
{
    return dur_sync(fd, fsync);
}

static int dur_unlinkat(int dfd, const char *p, int flags)
{
    if (is_handle_path(p)) {
        struct bfs_gfid g;
        pthread_mutex_lock(&J.lock);
        if (bfs_gfid_parse(p + 6, &g) == 0)
            for (int i = 0; i < J.nfiles; i++)
                if (bfs_gfid_eq(&g, &J.files[i])) {
                    J.removals++;
                    if (J.written[i] == 0 || J.covered <= J.written[i])
                        J.early++;
                }
        pthread_mutex_unlock(&J.lock);
    }
    return unlinkat(dfd, p, flags);
}

static void test_durable(void)
{
    char dir[256], name[32];
    snprintf(dir, sizeof(dir), "%.200s/durable", cg_root());
    mkdir(dir, 0755);
    struct bfs_graph *g = start_posix(dir);
    ok(g != NULL, "durable: posix graph");
    override_fn override = g ? override_of(g) : NULL;
    if (!override) {
        cg_graph_stop(g);
        return;
    }
    cg_orphan_scan_finished(g->top);
    enum { N = 20 };
    for (int i = 0; i < N; i++) {
        struct bfs_iatt a;
        snprintf(name, sizeof(name), "f%d", i);
        if (mknod_(g->top, name, S_IFREG | 0644, &a) == 0)
            J.files[J.nfiles++] = a.gfid;
    }
    is_int(J.nfiles, N, "durable: %d files made", N);
    override("pwrite", (void *)dur_pwrite, NULL);
    override("fdatasync", (void *)dur_fdatasync, NULL);
    override("fsync", (void *)dur_fsync, NULL);
    override("unlinkat", (void *)dur_unlinkat, NULL);

    /* the first unlink with its journal sync held: it answers anyway, and
     * its handle stays until the sync is done */
    pthread_mutex_lock(&J.lock);
    J.stall = true;
    pthread_mutex_unlock(&J.lock);
    is_int(unlink_(g, "f0"), 0, "durable: unlink f0 answers while the journal sync is held");
    pthread_mutex_lock(&J.lock);
    for (int i = 0; i < 3000 && !J.stalled; i++) {
        pthread_mutex_unlock(&J.lock);
        usleep(10000);
        pthread_mutex_lock(&J.lock);
    }
    bool stalled = J.stalled;
    pthread_mutex_unlock(&J.lock);
    ok(stalled, "durable: the deferred removal syncs the journal");
    ok(cg_handle_present(dir, &J.files[0]), "durable: f0's handle waits for that sync");
    pthread_mutex_lock(&J.lock);
    J.stall = false;
    pthread_cond_broadcast(&J.cond);
    pthread_mutex_unlock(&J.lock);

    int unlinked = 1;
    for (int i = 1; i < N; i++) {
        snprintf(name, sizeof(name), "f%d", i);
        unlinked += unlink_(g, name) == 0;
    }
    is_int(unlinked, N, "durable: every unlink answered");
    ok(defer_idle(g->top), "durable: every deferred removal ran");
    override("pwrite", NULL, NULL);
    override("fdatasync", NULL, NULL);
    override("fsync", NULL, NULL);
    override("unlinkat", NULL, NULL);
    cg_graph_stop(g);
    int gone = 0;
    for (int i = 0; i < N; i++)
        gone += !cg_handle_present(dir, &J.files[i]);
    is_int(gone, N, "durable: every handle is gone");
    is_int(J.removals, N, "durable: %d deferred handle removals seen", N);
    is_int(J.early, 0, "durable: none before a journal sync covering its slot");
    ok(J.syncs >= 1 && J.syncs <= N, "durable: %d journal sync(s) for %d unlinks", J.syncs, N);
}

int main(void)
{
    plan_lazy();
    if (!cg_can_run())
        return 0;
    if (cg_init("posix-orphans") < 0) {
        printf("1..0 # SKIP cannot make a scratch folder\n");
        return 0;
    }
    st = bfs_stack_new();
    static const struct cg_test tests[] = {
        {"scan", test_scan},
        {"lost", test_lost},
        {"durable", test_durable},
    };
    cg_run(tests, sizeof(tests) / sizeof(tests[0]), "ORPHAN_TEST");
    bfs_stack_unref(st);
    cg_fini();
    return done_testing();
}
