/*
 * test_md_cache.c — performance/md-cache over one brick in one process
 * (md-cache -> debug/io-stats "cnt" -> features/upcall -> storage/posix),
 * what it learns from a read's reply (docs/design/cache-invalidation.md):
 *
 *   - a stat after a read is answered without the child (io-stats below
 *     md-cache counts no stat) and carries the atime the read's reply
 *     reported (the brick's attributes after reading);
 *   - over a brick without invalidations (upcall off: its replies carry no
 *     mark) the read's reply is not learned: the stat goes down.
 * Needs root (storage/posix: trusted xattrs); skips otherwise.
 */
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/cluster-graph.h"
#include "../lib/tap.h"
#include "core/graph.h"

/* md-cache over a fresh brick folder; upcall on or off. */
static int vol_open(struct cg_vol *v, const char *brick, bool upcall)
{
    char vf[PATH_MAX + 1024];
    memset(v, 0, sizeof(*v));
    snprintf(v->brick[0], sizeof(v->brick[0]), "%s/%s", cg_root(), brick);
    if (mkdir(v->brick[0], 0755) < 0)
        return -1;
    snprintf(vf, sizeof(vf),
             "volume px\n type storage/posix\n option directory %s\nend-volume\n"
             "volume up\n type features/upcall\n option features.cache-invalidation %s\n"
             " subvolumes px\nend-volume\n"
             "volume cnt\n type debug/io-stats\n subvolumes up\nend-volume\n"
             "volume mdc\n type performance/md-cache\n subvolumes cnt\nend-volume\n",
             v->brick[0], upcall ? "on" : "off");
    if (!(v->g = cg_graph_start(vf, NULL)))
        return -1;
    v->top = bfs_graph_find(v->g, "mdc");
    v->st = bfs_stack_new();
    v->n = 1;
    return v->top && v->st ? 0 : -1;
}

static void vol_close(struct cg_vol *v)
{
    cg_graph_stop(v->g);
    bfs_stack_unref(v->st);
}

/* The calls of fop that went below md-cache (io-stats "cnt"). */
static long below(struct cg_vol *v, const char *fop)
{
    struct bfs_xl *cnt = bfs_graph_find(v->g, "cnt");
    char *text = cnt && cnt->mod->dump ? cnt->mod->dump(cnt) : NULL;
    json_object *o = text ? json_tokener_parse(text) : NULL, *fops, *f, *c;
    long n = -1;
    if (o && json_object_object_get_ex(o, "fops", &fops)) {
        n = 0;
        if (json_object_object_get_ex(fops, fop, &f) && json_object_object_get_ex(f, "count", &c))
            n = (long)json_object_get_int64(c);
    }
    json_object_put(o);
    free(text);
    return n;
}

static int do_stat(struct cg_vol *v, const struct bfs_gfid *g, struct bfs_iatt *attr)
{
    struct bfs_stat_req req = {0};
    struct bfs_stat_rep rep;
    req.loc.gfid = *g;
    int rc = bfs_sync_stat(v->top, v->st, &req, &rep);
    if (rc >= 0)
        *attr = rep.attr;
    bfs_stat_rep_clear_dup(&rep);
    return rc;
}

static int do_read(struct cg_vol *v, struct bfs_fd *fd, struct bfs_iatt *attr)
{
    struct bfs_read_req req = {.fd = fd, .size = 64};
    struct bfs_read_rep rep;
    int rc = bfs_sync_read(v->top, v->st, &req, &rep);
    if (rc >= 0)
        *attr = rep.attr;
    bfs_read_rep_clear_dup(&rep);
    return rc;
}

/* A file with an old atime (so that the read moves it on a relatime
 * brick), opened for reading, its attributes learned by a stat. */
static struct bfs_fd *old_file(struct cg_vol *v, const char *name, struct bfs_iatt *a)
{
    struct bfs_fd *fd = NULL;
    if (cg_put(v, &bfs_gfid_root, name, "hello", a) < 0)
        return NULL;
    struct bfs_setattr_req sr = {.valid = BFS_SET_ATIME};
    sr.loc.gfid = a->gfid;
    sr.attr.atime_sec = 1000;
    if (bfs_sync_setattr(v->top, v->st, &sr, NULL) < 0 || cg_open(v, &a->gfid, O_RDONLY, &fd) < 0)
        return NULL;
    if (do_stat(v, &a->gfid, a) < 0) {
        cg_flush_close(v, fd);
        return NULL;
    }
    return fd;
}

static void test_learned(void)
{
    struct cg_vol v;
    if (!ok(vol_open(&v, "b-up", true) == 0, "md-cache over a brick with upcall"))
        return;
    struct bfs_iatt a, r, s;
    struct bfs_fd *fd = old_file(&v, "f", &a);
    if (ok(fd != NULL, "a file with atime 1000, open, stat learned")) {
        is_int((int)a.atime_sec, 1000, "its atime is 1000");
        long n0 = below(&v, "stat");
        is_int(do_stat(&v, &a.gfid, &s), 0, "stat again");
        is_int((int)(below(&v, "stat") - n0), 0, "answered by md-cache");
        is_int(do_read(&v, fd, &r), 5, "read");
        ok(bfs_gfid_eq(&r.gfid, &a.gfid), "the read's reply carries the file's attributes");
        n0 = below(&v, "stat");
        is_int(do_stat(&v, &a.gfid, &s), 0, "stat after the read");
        is_int((int)(below(&v, "stat") - n0), 0, "answered without the child");
        ok(s.atime_sec == r.atime_sec && s.atime_nsec == r.atime_nsec,
           "with the atime of the read's reply (%lld, read %lld)", (long long)s.atime_sec,
           (long long)r.atime_sec);
        is_int((int)s.size, 5, "and its size");
        cg_flush_close(&v, fd);
    }
    vol_close(&v);
}

static void test_unmarked(void)
{
    struct cg_vol v;
    if (!ok(vol_open(&v, "b-off", false) == 0, "md-cache over a brick without invalidations"))
        return;
    struct bfs_iatt a, r, s;
    struct bfs_fd *fd = old_file(&v, "f", &a);
    if (ok(fd != NULL, "a file, open")) {
        is_int(do_read(&v, fd, &r), 5, "read");
        long n0 = below(&v, "stat");
        is_int(do_stat(&v, &a.gfid, &s), 0, "stat after the read");
        is_int((int)(below(&v, "stat") - n0), 1, "goes to the child: an unmarked read is not learned");
        cg_flush_close(&v, fd);
    }
    vol_close(&v);
}

int main(void)
{
    plan_lazy();
    if (!cg_can_run())
        return 0;
    alarm(120);
    ok(cg_init("mdc") == 0, "process resources");
    static const struct cg_test tests[] = {
        {"learned", test_learned},
        {"unmarked", test_unmarked},
    };
    cg_run(tests, sizeof(tests) / sizeof(tests[0]), "MDC_TEST");
    cg_fini();
    return done_testing();
}
