/*
 * test_fastpath.c — the short cuts of the data path (docs/design/
 * performance-notes.md) keep the answers they short-cut:
 *
 *   - storage/posix runs cheap fops inline when wound on the event-loop
 *     thread (answered before the wind returns, on that thread) and
 *     everything else on its workers (fsync from the loop, any fop from
 *     another thread);
 *   - its GFID cache: a file resolved by GFID after a lookup is served from
 *     the cache (dump: hits), a file whose last name went is ESTALE, not a
 *     cached ghost; a file that keeps another name still resolves; the
 *     number of fds it keeps is bounded by gfid-cache-fds; gfid-cache-size 0
 *     turns it off and everything still works; a location with both a GFID
 *     and a name uses the name only when it leads to that GFID;
 *   - protocol/client answers a flush itself when no lock was ever taken on
 *     the file through it (the brick's io-stats sees no flush), and sends it
 *     once one was: close(2) on another fd of a locked file still drops the
 *     closing owner's POSIX locks on the brick;
 *   - big writes, which protocol/client sends in pieces without copying the
 *     payload (and bfs_conn_send queues in part when the socket is full),
 *     arrive intact, also from four writers at once;
 *   - a small file opened O_RDONLY comes back with its open and the reads
 *     inside it are answered by protocol/client (the brick's io-stats sees
 *     no read), with the file's bytes; a write through the client after the
 *     open, and a file above the limit, are read from the brick.
 *   - a regular file's handle is removed after its unlink answered
 *     (posix-defer.c): meanwhile the GFID resolves to ESTALE and cannot be
 *     linked back; an orphan handle (no name) resolves to ESTALE; at start
 *     the journal's orphans lose their handles, named files keep theirs.
 * Needs root (storage/posix: trusted xattrs); skips otherwise.
 */
#include <dirent.h>
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
#include "core/event.h"
#include "core/graph.h"

static char tmpdir[64], brickdir[128], portfile[160];
static struct bfs_stack *st;

/* ---- graphs ---- */

/* storage/posix alone over dir, with extra option lines. */
static struct bfs_graph *start_posix(struct bfs_proc *p, const char *dir, const char *opts)
{
    char vf[1024];
    snprintf(vf, sizeof(vf), "volume px\n type storage/posix\n option directory %s\n%s"
             "end-volume\n", dir, opts);
    return cg_graph_start(vf, p);
}

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    while (d && readdir(d))
        n++;
    if (d)
        closedir(d);
    return n;
}

static struct bfs_loc L(const struct bfs_gfid *par, const char *name)
{
    return (struct bfs_loc){.pargfid = *par, .name = name};
}

static struct bfs_loc LG(const struct bfs_gfid *g)
{
    return (struct bfs_loc){.gfid = *g};
}

static int lookup(struct bfs_xl *xl, struct bfs_loc loc, struct bfs_iatt *attr)
{
    struct bfs_lookup_req q = {.loc = loc};
    struct bfs_lookup_rep r;
    int rc = bfs_sync_lookup(xl, st, &q, &r);
    if (attr)
        *attr = r.attr;
    bfs_lookup_rep_clear_dup(&r);
    return rc;
}

static int stat_gfid(struct bfs_xl *xl, const struct bfs_gfid *g)
{
    struct bfs_stat_req q = {.loc = LG(g)};
    struct bfs_stat_rep r;
    int rc = bfs_sync_stat(xl, st, &q, &r);
    bfs_stat_rep_clear_dup(&r);
    return rc;
}

static int mknod_(struct bfs_xl *xl, const char *name, struct bfs_iatt *attr)
{
    struct bfs_mknod_req q = {.loc = L(&bfs_gfid_root, name), .mode = S_IFREG | 0644};
    struct bfs_mknod_rep r;
    int rc = bfs_sync_mknod(xl, st, &q, &r);
    if (attr)
        *attr = r.attr;
    bfs_mknod_rep_clear_dup(&r);
    return rc;
}

static int unlink_(struct bfs_xl *xl, const char *name)
{
    struct bfs_unlink_req q = {.loc = L(&bfs_gfid_root, name)};
    struct bfs_unlink_rep r;
    int rc = bfs_sync_unlink(xl, st, &q, &r);
    bfs_unlink_rep_clear_dup(&r);
    return rc;
}

static int link_(struct bfs_xl *xl, const struct bfs_gfid *g, const char *name)
{
    struct bfs_link_req q = {.oldloc = LG(g), .newloc = L(&bfs_gfid_root, name)};
    struct bfs_link_rep r;
    int rc = bfs_sync_link(xl, st, &q, &r);
    bfs_link_rep_clear_dup(&r);
    return rc;
}

static unsigned long long dump_num(struct bfs_xl *xl, const char *key)
{
    char *d = xl->mod->dump(xl);
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char *p = d ? strstr(d, pat) : NULL;
    unsigned long long v = p ? strtoull(p + strlen(pat), NULL, 10) : ~0ull;
    free(d);
    return v;
}

static bool handle_goes(const char *dir, const struct bfs_gfid *g);

/* ---- inline on the loop thread, workers elsewhere ---- */

struct probe {
    struct bfs_xl *xl;
    struct bfs_fd *fd;
    const char *create; /* a create of this name (O_RDWR|O_CREAT|O_TRUNC) */
    const char *unlink; /* an unlink of this name */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool winding, done, before_return;
    pthread_t cb_thread, wind_thread;
    int rc;
};

static void probe_done(struct probe *p, int rc)
{
    pthread_mutex_lock(&p->lock);
    p->before_return = p->winding;
    p->cb_thread = pthread_self();
    p->rc = rc;
    p->done = true;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

static void probe_lookup_cbk(struct bfs_frame *frame, void *cookie, int rc,
                             const struct bfs_lookup_rep *rep)
{
    bfs_frame_top_free(frame);
    probe_done(cookie, rc);
}

static void probe_fsync_cbk(struct bfs_frame *frame, void *cookie, int rc,
                            const struct bfs_fsync_rep *rep)
{
    bfs_frame_top_free(frame);
    probe_done(cookie, rc);
}

static void probe_create_cbk(struct bfs_frame *frame, void *cookie, int rc,
                             const struct bfs_create_rep *rep)
{
    bfs_frame_top_free(frame);
    probe_done(cookie, rc);
}

static void probe_unlink_cbk(struct bfs_frame *frame, void *cookie, int rc,
                             const struct bfs_unlink_rep *rep)
{
    bfs_frame_top_free(frame);
    probe_done(cookie, rc);
}

static void probe_wind(struct probe *p, bool fsync)
{
    struct bfs_frame *f = bfs_frame_top_new(st, NULL);
    pthread_mutex_lock(&p->lock);
    p->winding = true;
    p->wind_thread = pthread_self();
    pthread_mutex_unlock(&p->lock);
    int rc;
    if (p->unlink) {
        struct bfs_unlink_req q = {.loc = L(&bfs_gfid_root, p->unlink)};
        rc = bfs_wind_unlink(f, p->xl, probe_unlink_cbk, p, &q);
    } else if (p->create) {
        struct bfs_create_req q = {.loc = L(&bfs_gfid_root, p->create), .fd = p->fd,
                                   .flags = O_RDWR | O_CREAT | O_TRUNC, .mode = 0644};
        rc = bfs_wind_create(f, p->xl, probe_create_cbk, p, &q);
    } else if (fsync) {
        struct bfs_fsync_req q = {.fd = p->fd};
        rc = bfs_wind_fsync(f, p->xl, probe_fsync_cbk, p, &q);
    } else {
        struct bfs_lookup_req q = {.loc = L(&bfs_gfid_root, "probe")};
        rc = bfs_wind_lookup(f, p->xl, probe_lookup_cbk, p, &q);
    }
    pthread_mutex_lock(&p->lock);
    p->winding = false;
    pthread_mutex_unlock(&p->lock);
    if (rc < 0) {
        bfs_frame_top_free(f);
        probe_done(p, rc);
    }
}

static void task_lookup(void *arg)
{
    probe_wind(arg, false);
}

static void task_fsync(void *arg)
{
    probe_wind(arg, true);
}

/* Winds on the loop (via a posted task) or here; waits for the answer. */
static void probe_run(struct bfs_proc *proc, struct probe *p, bool on_loop, bool fsync)
{
    p->done = false;
    if (on_loop)
        bfs_loop_post(proc->loop, fsync ? task_fsync : task_lookup, p);
    else
        probe_wind(p, fsync);
    pthread_mutex_lock(&p->lock);
    while (!p->done)
        pthread_cond_wait(&p->cond, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

static void test_inline(struct bfs_proc *proc)
{
    struct bfs_graph *g = start_posix(proc, brickdir, "");
    ok(g != NULL, "posix graph");
    if (!g)
        return;
    struct probe p = {.xl = g->top, .lock = PTHREAD_MUTEX_INITIALIZER,
                      .cond = PTHREAD_COND_INITIALIZER};
    is_int(mknod_(g->top, "probe", NULL), 0, "mknod probe");
    p.fd = bfs_fd_new(g, NULL, O_RDWR, 0);
    struct bfs_create_req cq = {.loc = L(&bfs_gfid_root, "probe.open"), .fd = p.fd,
                                .flags = O_RDWR | O_CREAT, .mode = 0644};
    struct bfs_create_rep cr;
    is_int(bfs_sync_create(g->top, st, &cq, &cr), 0, "create an open file");
    bfs_create_rep_clear_dup(&cr);

    probe_run(proc, &p, true, false);
    ok(p.rc == 0 && p.before_return && pthread_equal(p.cb_thread, p.wind_thread),
       "lookup wound on the loop: answered inline, before the wind returned");
    probe_run(proc, &p, true, true);
    ok(p.rc == 0 && !pthread_equal(p.cb_thread, p.wind_thread),
       "fsync wound on the loop: answered from a worker");
    probe_run(proc, &p, false, false);
    ok(p.rc == 0 && !pthread_equal(p.cb_thread, p.wind_thread),
       "lookup wound on another thread: answered from a worker");
    bfs_fd_unref(p.fd);

    /* create with O_TRUNC: inline when the name is new; a file that is
     * there (with data to free) is truncated by a worker */
    char path[300];
    p.fd = bfs_fd_new(g, NULL, O_RDWR, 0);
    p.create = "probe.trunc";
    probe_run(proc, &p, true, false);
    ok(p.rc == 0 && p.before_return && pthread_equal(p.cb_thread, p.wind_thread),
       "create O_TRUNC of a new name wound on the loop: answered inline");
    bfs_fd_unref(p.fd);
    snprintf(path, sizeof(path), "%s/probe.trunc", brickdir);
    int wfd = open(path, O_WRONLY);
    ok(wfd >= 0 && write(wfd, "data", 4) == 4, "data in the file");
    if (wfd >= 0)
        close(wfd);
    p.fd = bfs_fd_new(g, NULL, O_RDWR, 0);
    probe_run(proc, &p, true, false);
    struct stat sb;
    ok(p.rc == 0 && !pthread_equal(p.cb_thread, p.wind_thread),
       "create O_TRUNC of an existing file wound on the loop: answered from a worker");
    ok(stat(path, &sb) == 0 && sb.st_size == 0 && sb.st_nlink == 2,
       "the existing file was truncated, its handle kept");
    bfs_fd_unref(p.fd);
    p.create = NULL;

    /* unlink of a file's last name: inline, the handle removed later by a
     * worker (posix-defer.c); with the journal unusable, by a worker */
    struct bfs_iatt ua;
    is_int(mknod_(g->top, "probe.unlink", &ua), 0, "mknod probe.unlink");
    p.unlink = "probe.unlink";
    probe_run(proc, &p, true, false);
    ok(p.rc == 0 && p.before_return && pthread_equal(p.cb_thread, p.wind_thread),
       "unlink of a last name wound on the loop: answered inline");
    ok(handle_goes(brickdir, &ua.gfid), "its handle goes");
    char nd[160], jp[200];
    snprintf(nd, sizeof(nd), "%s/nodefer", tmpdir);
    snprintf(jp, sizeof(jp), "%s/.brickfs/unlink-pending", nd);
    mkdir(nd, 0755);
    snprintf(path, sizeof(path), "%s/.brickfs", nd);
    mkdir(path, 0700);
    mkdir(jp, 0700); /* a journal that cannot be opened: no deferring */
    struct bfs_graph *g2 = start_posix(proc, nd, "");
    ok(g2 != NULL, "posix graph without an unlink journal");
    if (g2) {
        p.xl = g2->top;
        is_int(mknod_(g2->top, "probe.unlink", &ua), 0, "mknod probe.unlink there");
        probe_run(proc, &p, true, false);
        ok(p.rc == 0 && !pthread_equal(p.cb_thread, p.wind_thread),
           "unlink that cannot defer the handle's removal: answered from a worker");
        ok(!cg_handle_present(nd, &ua.gfid), "its handle is gone with the answer");
        p.xl = g->top;
        cg_graph_stop(g2);
    }
    p.unlink = NULL;
    cg_graph_stop(g);
}

/* ---- the GFID cache ---- */

static int stat_loc(struct bfs_xl *xl, struct bfs_loc loc, struct bfs_gfid *got)
{
    struct bfs_stat_req q = {.loc = loc};
    struct bfs_stat_rep r;
    int rc = bfs_sync_stat(xl, st, &q, &r);
    *got = rc == 0 ? r.attr.gfid : bfs_gfid_null;
    bfs_stat_rep_clear_dup(&r);
    return rc;
}

/* A loc with a GFID and a (parent, name) (what md-cache sends with an open):
 * the name is used only if it leads to that GFID (a, named "three", in
 * brick folder dir); the handle decides otherwise. With a's handle gone
 * behind brickfs's back, only the name can find it: proof that it is used. */
static void test_named_gfid(struct bfs_xl *xl, const char *dir, const struct bfs_iatt *a)
{
    struct bfs_iatt other;
    struct bfs_gfid got;
    is_int(mknod_(xl, "four", &other), 0, "mknod four");
    struct bfs_loc l = {.gfid = a->gfid, .pargfid = bfs_gfid_root, .name = "four"};
    ok(stat_loc(xl, l, &got) == 0 && bfs_gfid_eq(&got, &a->gfid),
       "GFID + a name that leads to another file: the GFID's file");
    l.name = "missing";
    ok(stat_loc(xl, l, &got) == 0 && bfs_gfid_eq(&got, &a->gfid),
       "GFID + a missing name: the GFID's file");
    char s[BFS_GFID_STRLEN], handle[512];
    bfs_gfid_fmt(&a->gfid, s);
    snprintf(handle, sizeof(handle), "%s/.brickfs/%.2s/%.2s/%s", dir, s, s + 2, s);
    is_int(unlink(handle), 0, "remove three's handle behind brickfs's back");
    l.name = "three";
    ok(stat_loc(xl, l, &got) == 0 && bfs_gfid_eq(&got, &a->gfid),
       "GFID + its name: found through the name");
    l.name = "four";
    is_int(stat_loc(xl, l, &got), -ESTALE, "GFID + another file's name, no handle: ESTALE");
    is_int(lookup(xl, L(&bfs_gfid_root, "three"), NULL), 0, "a lookup by name repairs the handle");
    is_int(stat_gfid(xl, &a->gfid), 0, "then the GFID alone resolves again");
}

static void test_cache(struct bfs_proc *proc)
{
    char dir[160];
    snprintf(dir, sizeof(dir), "%s/cache", tmpdir);
    mkdir(dir, 0755);
    struct bfs_graph *g = start_posix(proc, dir, " option gfid-cache-fds 8\n");
    ok(g != NULL, "posix graph with gfid-cache-fds 8");
    if (!g)
        return;
    struct bfs_xl *xl = g->top;
    struct bfs_iatt a, b;
    is_int(mknod_(xl, "one", &a), 0, "mknod one");
    unsigned long long h0 = dump_num(xl, "hits");
    is_int(lookup(xl, L(&bfs_gfid_root, "one"), NULL), 0, "lookup one by name");
    is_int(stat_gfid(xl, &a.gfid), 0, "stat one by GFID");
    ok(dump_num(xl, "hits") > h0, "... served from the cache (hits %llu -> %llu)", h0,
       dump_num(xl, "hits"));
    is_int(unlink_(xl, "one"), 0, "unlink its only name");
    is_int(stat_gfid(xl, &a.gfid), -ESTALE, "stat by GFID: ESTALE, not a cached ghost");

    is_int(mknod_(xl, "two", &b), 0, "mknod two");
    is_int(link_(xl, &b.gfid, "two.bis"), 0, "link two.bis");
    is_int(lookup(xl, L(&bfs_gfid_root, "two"), NULL), 0, "lookup two");
    is_int(unlink_(xl, "two"), 0, "unlink one of its names");
    is_int(stat_gfid(xl, &b.gfid), 0, "stat by GFID: still there through the other");
    is_int(unlink_(xl, "two.bis"), 0, "unlink the other");
    is_int(stat_gfid(xl, &b.gfid), -ESTALE, "stat by GFID: now ESTALE");

    int before = count_fds(), bad = 0;
    for (int i = 0; i < 64; i++) {
        char name[32];
        snprintf(name, sizeof(name), "many%d", i);
        bad += mknod_(xl, name, &a) != 0 || lookup(xl, L(&bfs_gfid_root, name), NULL) != 0 ||
               stat_gfid(xl, &a.gfid) != 0;
    }
    int grown = count_fds() - before;
    ok(bad == 0 && grown <= 8, "64 files looked up: the cache holds %d more fds (<= 8)", grown);
    ok(dump_num(xl, "fds") <= 8 && dump_num(xl, "entries") >= 64,
       "dump: at most 8 fds, every file remembered");
    cg_graph_stop(g);

    g = start_posix(proc, dir, " option gfid-cache-size 0\n");
    ok(g != NULL, "posix graph with gfid-cache-size 0");
    if (!g)
        return;
    xl = g->top;
    is_int(mknod_(xl, "three", &a), 0, "mknod three");
    is_int(lookup(xl, L(&bfs_gfid_root, "three"), NULL), 0, "lookup three");
    is_int(stat_gfid(xl, &a.gfid), 0, "stat by GFID");
    ok(dump_num(xl, "entries") == 0 && dump_num(xl, "hits") == 0, "dump: nothing cached");
    test_named_gfid(xl, dir, &a);
    cg_graph_stop(g);
}

/* ---- handles removed after the unlink answered (posix-defer.c) ---- */

/* Polls (up to 20 s) until the handle of g is gone. */
static bool handle_goes(const char *dir, const struct bfs_gfid *g)
{
    for (int i = 0; i < 2000 && cg_handle_present(dir, g); i++)
        usleep(10000);
    return !cg_handle_present(dir, g);
}

static void journal_put(const char *dir, int slot, const struct bfs_gfid *g)
{
    char path[256], page[4096] = {0};
    snprintf(path, sizeof(path), "%s/.brickfs/unlink-pending", dir);
    memcpy(page, g->b, sizeof(g->b));
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    ok(fd >= 0 && pwrite(fd, page, sizeof(page), (off_t)slot * 4096) == (ssize_t)sizeof(page),
       "journal slot %d written by hand", slot);
    if (fd >= 0)
        close(fd);
}

static void test_defer(struct bfs_proc *proc)
{
    char dir[160], path[256];
    struct stat sb;
    snprintf(dir, sizeof(dir), "%s/defer", tmpdir);
    mkdir(dir, 0755);
    struct bfs_graph *g = start_posix(proc, dir, "");
    ok(g != NULL, "defer: posix graph");
    if (!g)
        return;
    struct bfs_xl *xl = g->top;
    struct bfs_iatt a, b, c;
    /* running, the scan removes any orphan it meets, also one made on purpose */
    ok(cg_orphan_scan_finished(xl) >= 0, "defer: the start-up scan of orphans is done");
    is_int(mknod_(xl, "f1", &a), 0, "defer: mknod f1");
    ok(cg_handle_present(dir, &a.gfid), "defer: f1 has a handle");
    is_int(unlink_(xl, "f1"), 0, "defer: unlink f1");
    is_int(stat_gfid(xl, &a.gfid), -ESTALE, "defer: f1 by GFID right after: ESTALE");
    is_int(link_(xl, &a.gfid, "f1.back"), -ESTALE, "defer: nor can it be linked back");
    ok(handle_goes(dir, &a.gfid), "defer: its handle goes");

    /* a name removed behind brickfs's back leaves an orphan handle (what a
     * crash between the unlink and its deferred removal leaves too): it
     * resolves as gone */
    is_int(mknod_(xl, "f2", &b), 0, "defer: mknod f2");
    is_int(stat_gfid(xl, &b.gfid), 0, "defer: f2 by GFID");
    snprintf(path, sizeof(path), "%s/f2", dir);
    ok(unlink(path) == 0, "defer: f2's name removed on the brick by hand");
    is_int(stat_gfid(xl, &b.gfid), -ESTALE, "defer: an orphan handle resolves to ESTALE");
    is_int(mknod_(xl, "f3", &c), 0, "defer: mknod f3");
    cg_graph_stop(g);

    /* the journal at start: the orphan's handle goes, a live file's stays */
    struct bfs_gfid none;
    bfs_gfid_generate(&none);
    journal_put(dir, 0, &b.gfid);
    journal_put(dir, 3, &c.gfid);
    journal_put(dir, 5, &none);
    ok(cg_handle_present(dir, &b.gfid), "defer: the orphan's handle is there before the restart");
    g = start_posix(proc, dir, "");
    ok(g != NULL, "defer: posix graph restarted");
    if (!g)
        return;
    ok(!cg_handle_present(dir, &b.gfid), "defer: replay removed the orphan's handle");
    ok(cg_handle_present(dir, &c.gfid), "defer: a journaled GFID with a name keeps its handle");
    is_int(stat_gfid(g->top, &c.gfid), 0, "defer: f3 resolves by GFID");
    snprintf(path, sizeof(path), "%s/.brickfs/unlink-pending", dir);
    ok(stat(path, &sb) == 0 && sb.st_size == 0, "defer: the journal is emptied");
    cg_graph_stop(g);
}

/* ---- flush answered by protocol/client ---- */

static int do_lk(struct bfs_xl *top, struct bfs_fd *fd, uint64_t owner)
{
    struct bfs_lk_req q = {.fd = fd, .cmd = BFS_LK_SETLK,
                           .lock = {.type = F_WRLCK, .whence = SEEK_SET, .start = 0, .len = 10,
                                    .pid = 9, .owner = owner}};
    struct bfs_lk_rep r;
    int rc = bfs_sync_lk(top, st, &q, &r);
    bfs_lk_rep_clear_dup(&r);
    return rc;
}

static int do_flush(struct bfs_xl *top, struct bfs_fd *fd, uint64_t owner)
{
    struct bfs_flush_req q = {.fd = fd};
    struct bfs_flush_rep r;
    st->lk_owner = owner;
    int rc = bfs_sync_flush(top, st, &q, &r);
    st->lk_owner = 0;
    bfs_flush_rep_clear_dup(&r);
    return rc;
}

/* The brick's io-stats count of fop, read through the client. */
static long brick_count(struct bfs_xl *top, const char *fop)
{
    char key[64];
    snprintf(key, sizeof(key), "\"%s\":{\"count\":", fop);
    struct bfs_getxattr_req q = {.loc = LG(&bfs_gfid_root), .name = "brickfs.io-stats"};
    struct bfs_getxattr_rep r;
    long n = -1;
    if (bfs_sync_getxattr(top, st, &q, &r) >= 0) {
        const char *v = NULL;
        if (bfs_dict_get_str(r.xattrs, "brickfs.io-stats", &v) == 0 && v) {
            const char *f = strstr(v, key);
            n = f ? strtol(f + strlen(key), NULL, 10) : 0;
        }
    }
    bfs_getxattr_rep_clear_dup(&r);
    return n;
}

static long brick_flushes(struct bfs_xl *top)
{
    return brick_count(top, "flush");
}

/* ---- big writes (sent in pieces, without a copy of the payload) ---- */

static uint8_t pattern(uint64_t off, int seed)
{
    return (uint8_t)((off * 2654435761u) >> 13) ^ (uint8_t)seed;
}

struct writer {
    struct bfs_xl *top;
    struct bfs_fd *fd;
    int seed, bad;
    uint64_t base;
    size_t len;
};

/* Writes [base, base+len) with the writer's pattern in 1 MiB writes. */
static void *writer_main(void *arg)
{
    struct writer *w = arg;
    struct bfs_stack *ws = bfs_stack_new();
    uint8_t *buf = malloc(1u << 20);
    for (size_t done = 0; done < w->len;) {
        size_t n = w->len - done < (1u << 20) ? w->len - done : (1u << 20);
        for (size_t k = 0; k < n; k++)
            buf[k] = pattern(w->base + done + k, w->seed);
        struct bfs_write_req q = {.fd = w->fd, .data = {buf, n}, .offset = w->base + done};
        struct bfs_write_rep r;
        int rc = bfs_sync_write(w->top, ws, &q, &r);
        bfs_write_rep_clear_dup(&r);
        memset(buf, 0xEE, n); /* ours again once the write answered */
        w->bad += rc != (int)n;
        done += n;
    }
    free(buf);
    bfs_stack_unref(ws);
    return NULL;
}

/* Reads [base, base+len) back and counts bytes that differ from the pattern. */
static long check_range(struct bfs_xl *top, struct bfs_fd *fd, uint64_t base, size_t len, int seed)
{
    long bad = 0;
    for (size_t done = 0; done < len;) {
        uint32_t n = len - done < (1u << 20) ? (uint32_t)(len - done) : (1u << 20);
        struct bfs_read_req q = {.fd = fd, .size = n, .offset = base + done};
        struct bfs_read_rep r;
        int rc = bfs_sync_read(top, st, &q, &r);
        if (rc != (int)n) {
            bad += n;
        } else {
            const uint8_t *p = r.data.data;
            for (size_t k = 0; k < n; k++)
                bad += p[k] != pattern(base + done + k, seed);
        }
        bfs_read_rep_clear_dup(&r);
        done += n;
    }
    return bad;
}

static void test_big_writes(struct bfs_xl *top, struct bfs_graph *cg, struct bfs_fd *fd)
{
    (void)cg;
    /* sizes around the gather threshold, then four writers at once so that
     * the socket fills and sends queue behind each other */
    size_t sizes[] = {64 * 1024 - 1, 64 * 1024, 64 * 1024 + 7, 1u << 20, 3u << 20};
    uint64_t base = 0;
    int bad = 0;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        struct writer w = {.top = top, .fd = fd, .seed = (int)i, .base = base, .len = sizes[i]};
        writer_main(&w);
        bad += w.bad != 0 || check_range(top, fd, base, sizes[i], (int)i) != 0;
        base += sizes[i] + 4096;
    }
    is_int(bad, 0, "writes of 64 KiB - 1 to 3 MiB read back intact");

    enum { NW = 4, EACH = 8u << 20 };
    pthread_t t[NW];
    struct writer w[NW];
    base = 64u << 20;
    for (int i = 0; i < NW; i++) {
        w[i] = (struct writer){.top = top, .fd = fd, .seed = 100 + i,
                               .base = base + (uint64_t)i * EACH, .len = EACH};
        pthread_create(&t[i], NULL, writer_main, &w[i]);
    }
    int failed = 0;
    long wrong = 0;
    for (int i = 0; i < NW; i++) {
        pthread_join(t[i], NULL);
        failed += w[i].bad;
        wrong += check_range(top, fd, w[i].base, EACH, w[i].seed);
    }
    ok(failed == 0 && wrong == 0, "4 writers x 8 MiB at once: every write answered, every byte "
       "in place (%d failed writes, %ld wrong bytes)", failed, wrong);
}

static struct bfs_fd *client_fd(struct bfs_graph *cg, const struct bfs_gfid *g)
{
    struct bfs_inode *i = bfs_inode_get(cg->itable, g, S_IFREG);
    struct bfs_fd *fd = bfs_fd_new(cg, i, O_RDWR, 0);
    bfs_inode_unref(i);
    return fd;
}

/* ---- small files read with their open (client-prefetch.c) ---- */

static int pf_write(struct bfs_xl *top, struct bfs_fd *fd, uint64_t off, size_t len, int seed)
{
    uint8_t *buf = malloc(len);
    for (size_t k = 0; k < len; k++)
        buf[k] = pattern(off + k, seed);
    struct bfs_write_req q = {.fd = fd, .data = {buf, len}, .offset = off};
    struct bfs_write_rep r;
    int rc = bfs_sync_write(top, st, &q, &r);
    bfs_write_rep_clear_dup(&r);
    free(buf);
    return rc;
}

/* Opens g O_RDONLY through the client; *leak: the reply's xdata still has
 * the prefetch key. */
static struct bfs_fd *pf_open(struct bfs_xl *top, struct bfs_graph *cg, const struct bfs_gfid *g,
                              bool *leak)
{
    struct bfs_fd *fd = client_fd(cg, g);
    struct bfs_open_req q = {.loc = LG(g), .fd = fd, .flags = O_RDONLY};
    struct bfs_open_rep r;
    int rc = bfs_sync_open(top, st, &q, &r);
    if (leak)
        *leak = bfs_dict_has(r.xdata, "open-prefetch");
    bfs_open_rep_clear_dup(&r);
    if (rc < 0) {
        bfs_fd_unref(fd);
        return NULL;
    }
    return fd;
}

/* Reads [off, off+len) and checks it against pattern seed and the file's
 * size: 0, or -1 with a diagnostic. */
static int pf_read(struct bfs_xl *top, struct bfs_fd *fd, uint64_t off, uint32_t len,
                   uint64_t size, int seed)
{
    struct bfs_read_req q = {.fd = fd, .size = len, .offset = off};
    struct bfs_read_rep r;
    int rc = bfs_sync_read(top, st, &q, &r);
    uint64_t want = off >= size ? 0 : size - off < len ? size - off : len;
    int bad = rc != (int)want || r.data.len != want;
    for (size_t k = 0; !bad && k < want; k++)
        bad = ((const uint8_t *)r.data.data)[k] != pattern(off + k, seed);
    if (bad)
        printf("# read %u at %llu: rc %d, %zu bytes, want %llu of seed %d\n", len,
               (unsigned long long)off, rc, r.data.len, (unsigned long long)want, seed);
    bfs_read_rep_clear_dup(&r);
    return bad ? -1 : 0;
}

static void test_prefetch(struct bfs_xl *top, struct bfs_graph *cg)
{
    struct bfs_gfid g, big;
    bfs_gfid_generate(&g);
    bfs_gfid_generate(&big);
    struct bfs_dict *xd = bfs_dict_new();
    bfs_dict_set_bin(xd, "gfid-req", g.b, sizeof(g.b));
    struct bfs_fd *w = client_fd(cg, &g);
    struct bfs_create_req cq = {.loc = L(&bfs_gfid_root, "small"), .fd = w,
                                .flags = O_RDWR | O_CREAT | O_EXCL, .mode = 0644, .xdata = xd};
    struct bfs_create_rep cr;
    is_int(bfs_sync_create(top, st, &cq, &cr), 0, "create small");
    bfs_create_rep_clear_dup(&cr);
    bfs_dict_unref(xd);
    is_int(pf_write(top, w, 0, 5000, 7), 5000, "5000 bytes into small");

    bool leak = true;
    long r0 = brick_count(top, "read");
    struct bfs_fd *fd = pf_open(top, cg, &g, &leak);
    ok(fd && !leak, "open small O_RDONLY; the prefetched bytes do not show in the reply");
    is_int(pf_read(top, fd, 0, 1000, 5000, 7), 0, "read 1000 at 0: the file's bytes");
    is_int(pf_read(top, fd, 1000, 65536, 5000, 7), 0, "read the rest: the file's bytes");
    is_int((int)(brick_count(top, "read") - r0), 0, "... both answered by the client");
    is_int(pf_read(top, fd, 0, 65536, 5000, 7), 0, "read again, whole: the file's bytes");
    is_int((int)(brick_count(top, "read") - r0), 1, "... from the brick (the bytes went)");
    bfs_fd_unref(fd);

    /* a write through this client between the open and the read */
    fd = pf_open(top, cg, &g, NULL);
    is_int(pf_write(top, w, 0, 6000, 8), 6000, "open O_RDONLY, then 6000 new bytes via another fd");
    r0 = brick_count(top, "read");
    is_int(pf_read(top, fd, 0, 65536, 6000, 8), 0, "the read sees the new bytes");
    is_int((int)(brick_count(top, "read") - r0), 1, "... read from the brick");
    bfs_fd_unref(fd);

    /* the brick's copy changed by someone else (the self-heal daemon
     * healing it) after the open: a read carrying "open-prefetch-skip"
     * (replicate: that copy was not known good at the open) goes to the
     * brick and sees the new bytes */
    fd = pf_open(top, cg, &g, NULL);
    char path[sizeof(brickdir) + 16];
    snprintf(path, sizeof(path), "%s/small", brickdir);
    uint8_t nb[6000];
    for (size_t k = 0; k < sizeof(nb); k++)
        nb[k] = pattern(k, 10);
    int bfd = open(path, O_WRONLY);
    ok(bfd >= 0 && pwrite(bfd, nb, sizeof(nb), 0) == (ssize_t)sizeof(nb), "the brick's copy "
       "rewritten behind the client's back");
    if (bfd >= 0)
        close(bfd);
    r0 = brick_count(top, "read");
    struct bfs_read_req sq = {.fd = fd, .size = 65536, .xdata = bfs_dict_new()};
    bfs_dict_set_int(sq.xdata, "open-prefetch-skip", 1);
    struct bfs_read_rep sr;
    int src = bfs_sync_read(top, st, &sq, &sr);
    ok(src == 6000 && sr.data.len == 6000 && memcmp(sr.data.data, nb, 6000) == 0,
       "a read with open-prefetch-skip: the brick's new bytes, not those of the open");
    bfs_read_rep_clear_dup(&sr);
    bfs_dict_unref(sq.xdata);
    is_int((int)(brick_count(top, "read") - r0), 1, "... read from the brick");
    bfs_fd_unref(fd);

    /* a file larger than performance.open-prefetch (64 KiB) */
    xd = bfs_dict_new();
    bfs_dict_set_bin(xd, "gfid-req", big.b, sizeof(big.b));
    struct bfs_fd *wb = client_fd(cg, &big);
    cq = (struct bfs_create_req){.loc = L(&bfs_gfid_root, "big"), .fd = wb,
                                 .flags = O_RDWR | O_CREAT | O_EXCL, .mode = 0644, .xdata = xd};
    is_int(bfs_sync_create(top, st, &cq, &cr), 0, "create big");
    bfs_create_rep_clear_dup(&cr);
    bfs_dict_unref(xd);
    is_int(pf_write(top, wb, 0, 65537, 9), 65537, "65537 bytes into big");
    fd = pf_open(top, cg, &big, NULL);
    r0 = brick_count(top, "read");
    is_int(pf_read(top, fd, 0, 131072, 65537, 9), 0, "big read back whole");
    is_int((int)(brick_count(top, "read") - r0), 1, "... from the brick");
    bfs_fd_unref(fd);
    bfs_fd_unref(wb);
    bfs_fd_unref(w);
}

static void test_flush(struct bfs_proc *bproc, struct bfs_proc *cproc)
{
    char vf[1024];
    snprintf(vf, sizeof(vf),
             "volume brick-posix\n type storage/posix\n option directory %s\nend-volume\n"
             "volume brick-locks\n type features/locks\n subvolumes brick-posix\nend-volume\n"
             "volume brick\n type debug/io-stats\n subvolumes brick-locks\nend-volume\n"
             "volume brick-server\n type protocol/server\n"
             " option transport.listen-address 127.0.0.1\n option transport.listen-port 0\n"
             " option transport.port-file %s\n subvolumes brick\nend-volume\n",
             brickdir, portfile);
    struct bfs_graph *sg = cg_graph_start(vf, bproc);
    int port = -1;
    FILE *pf = fopen(portfile, "r");
    if (pf) {
        if (fscanf(pf, "%d", &port) != 1)
            port = -1;
        fclose(pf);
    }
    ok(sg && port > 0, "brick graph on port %d", port);
    snprintf(vf, sizeof(vf),
             "volume c0\n type protocol/client\n option remote-host 127.0.0.1\n"
             " option remote-port %d\n option remote-subvolume brick\nend-volume\n", port);
    struct bfs_graph *cg = sg ? cg_graph_start(vf, cproc) : NULL;
    struct bfs_xl *top = cg ? cg->top : NULL;
    int up = -1;
    for (int i = 0; top && i < 500 && up < 0; i++) {
        up = lookup(top, LG(&bfs_gfid_root), NULL) == 0 ? 0 : -1;
        if (up < 0)
            usleep(10000);
    }
    ok(up == 0, "the client is up");
    if (up < 0) {
        cg_graph_stop(cg);
        cg_graph_stop(sg);
        return;
    }

    struct bfs_gfid g;
    bfs_gfid_generate(&g);
    struct bfs_dict *xd = bfs_dict_new();
    bfs_dict_set_bin(xd, "gfid-req", g.b, sizeof(g.b));
    struct bfs_fd *fd1 = client_fd(cg, &g);
    struct bfs_create_req cq = {.loc = L(&bfs_gfid_root, "flushme"), .fd = fd1,
                                .flags = O_RDWR | O_CREAT | O_EXCL, .mode = 0644, .xdata = xd};
    struct bfs_create_rep cr;
    is_int(bfs_sync_create(top, st, &cq, &cr), 0, "create flushme (client fd with an inode)");
    bfs_create_rep_clear_dup(&cr);
    bfs_dict_unref(xd);

    long f0 = brick_flushes(top);
    is_int(do_flush(top, fd1, 1), 0, "flush of a file never locked");
    is_int(brick_flushes(top), f0, "... answered by the client: the brick saw no flush");

    struct bfs_fd *fd2 = client_fd(cg, &g);
    struct bfs_open_req oq = {.loc = LG(&g), .fd = fd2, .flags = O_RDWR};
    struct bfs_open_rep orp;
    is_int(bfs_sync_open(top, st, &oq, &orp), 0, "open a second fd");
    bfs_open_rep_clear_dup(&orp);
    is_int(do_lk(top, fd1, 0xA), 0, "owner A locks through fd1");
    is_int(do_lk(top, fd2, 0xB), -EAGAIN, "owner B conflicts");
    is_int(do_flush(top, fd2, 0xA), 0, "owner A closes fd2 (flush)");
    is_int(brick_flushes(top), f0 + 1, "... that flush reached the brick");
    is_int(do_lk(top, fd2, 0xB), 0, "owner B now gets the lock: A's lock went with the close");

    test_big_writes(top, cg, fd1);
    test_prefetch(top, cg);
    bfs_fd_unref(fd2);
    bfs_fd_unref(fd1);
    cg_graph_stop(cg);
    cg_graph_stop(sg);
}

int main(void)
{
    plan_lazy();
    if (geteuid() != 0) {
        printf("1..0 # SKIP storage/posix needs root (trusted xattrs)\n");
        return 0;
    }
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/bfs-fast-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("1..0 # SKIP cannot make a temporary folder\n");
        return 0;
    }
    snprintf(brickdir, sizeof(brickdir), "%s/brick", tmpdir);
    snprintf(portfile, sizeof(portfile), "%s/port", tmpdir);
    mkdir(brickdir, 0755);
    bfs_log_set_level(BFS_LOG_ERROR);
    struct bfs_proc *bproc = bfs_proc_new("test_fastpath-brick", 2);
    struct bfs_proc *cproc = bfs_proc_new("test_fastpath-client", 2);
    st = bfs_stack_new();
    ok(bproc && cproc && st, "processes and a stack");

    test_inline(bproc);
    test_cache(bproc);
    test_defer(bproc);
    test_flush(bproc, cproc);

    bfs_stack_unref(st);
    bfs_proc_free(cproc);
    bfs_proc_free(bproc);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", tmpdir);
    return done_testing();
}
