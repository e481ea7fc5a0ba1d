/*
 * test_errorgen.c — debug/error-gen over storage/memory: targeted failures
 * (only writes fail, with the errno asked for, and never reach storage),
 * delayed answers, refusal at wind time, random errnos, partial failure
 * rates, live reconfiguration, and options refused at init. Also
 * debug/trace, the other generic debugging translator: its log lines name
 * each call and its answer.
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "core/event.h"
#include "core/fops-util.h"
#include "core/graph.h"

static const char VOLFILE[] = "volume mem\n"
                              "    type storage/memory\n"
                              "end-volume\n"
                              "volume faults\n"
                              "    type debug/error-gen\n"
                              "    option failure 100\n"
                              "    option enable write\n"
                              "    option error-no EIO\n"
                              "    option seed 12345\n"
                              "    subvolumes mem\n"
                              "end-volume\n";

static struct bfs_proc *proc;
static struct bfs_graph *graph;
static struct bfs_xl *top;
static struct bfs_stack *st;

static int reconf(const char *key, const char *val)
{
    struct bfs_dict *d = bfs_dict_new();
    bfs_dict_set_str(d, key, val);
    int rc = top->mod->reconfigure(top, d);
    bfs_dict_unref(d);
    return rc;
}

static int write_at(struct bfs_fd *fd, uint64_t off, const char *s)
{
    struct bfs_write_req w = {.fd = fd, .data = {s, strlen(s)}, .offset = off};
    return bfs_sync_write(top, st, &w, NULL);
}

static int64_t file_size(struct bfs_fd *fd)
{
    struct bfs_fstat_req r = {.fd = fd};
    struct bfs_fstat_rep rep;
    int rc = bfs_sync_fstat(top, st, &r, &rep);
    bfs_fstat_rep_clear_dup(&rep);
    return rc < 0 ? rc : (int64_t)rep.attr.size;
}

/* An asynchronous write whose callback is counted. */
struct async_write {
    pthread_mutex_t m;
    pthread_cond_t c;
    int calls, rc;
    uint64_t answered_ns;
};

static void async_cbk(struct bfs_frame *frame, void *cookie, int rc, const struct bfs_write_rep *rep)
{
    struct async_write *a = cookie;
    (void)frame;
    (void)rep;
    pthread_mutex_lock(&a->m);
    a->calls++;
    a->rc = rc;
    a->answered_ns = bfs_now_ns();
    pthread_cond_broadcast(&a->c);
    pthread_mutex_unlock(&a->m);
}

static void test_write_failures(struct bfs_fd *fd)
{
    int eio = 0;
    for (int i = 0; i < 10; i++)
        eio += write_at(fd, 0, "hello") == -EIO;
    is_int(eio, 10, "failure 100 on write: every write fails with EIO");
    is_int(file_size(fd), 0, "failed writes never reached storage");
    struct bfs_read_req r = {.fd = fd, .size = 10};
    is_int(bfs_sync_read(top, st, &r, NULL), 0, "reads are not enabled: they work");

    is_int(reconf("error-no", "ENOTCONN"), 0, "reconfigure error-no ENOTCONN");
    is_int(write_at(fd, 0, "x"), -ENOTCONN, "writes now fail with ENOTCONN");
    is_int(reconf("error-no", "28"), 0, "error-no by number");
    is_int(write_at(fd, 0, "x"), -ENOSPC, "28 is ENOSPC");
    is_int(reconf("error-no", "EBOGUS"), -EINVAL, "unknown errno name refused");
    is_int(reconf("enable", "write,nosuchfop"), -EINVAL, "unknown fop name refused");
    is_int(write_at(fd, 0, "x"), -ENOSPC, "a refused reconfigure changes nothing");
}

static void test_delay(struct bfs_fd *fd)
{
    is_int(reconf("failure", "0"), 0, "failure 0");
    is_int(reconf("delay-ms", "150"), 0, "delay-ms 150");
    struct async_write a = {.m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER};
    struct bfs_frame *f = bfs_frame_top_new(st, NULL);
    struct bfs_write_req w = {.fd = fd, .data = {"slow", 4}, .offset = 0};
    uint64_t t0 = bfs_now_ns();
    is_int(bfs_wind_write(f, top, async_cbk, &a, &w), 0, "delayed write wound");
    pthread_mutex_lock(&a.m);
    int early = a.calls;
    pthread_mutex_unlock(&a.m);
    is_int(early, 0, "no answer right away");
    is_int(file_size(fd), 4, "the write itself went down at once");
    pthread_mutex_lock(&a.m);
    while (a.calls == 0)
        pthread_cond_wait(&a.c, &a.m);
    pthread_mutex_unlock(&a.m);
    is_int(a.rc, 4, "delayed answer carries the child's result");
    ok(a.answered_ns - t0 >= 150 * 1000000ull, "answer came after >= 150 ms (%llu ms)",
       (unsigned long long)((a.answered_ns - t0) / 1000000));
    bfs_frame_top_free(f);

    /* a failure can be late too */
    reconf("failure", "100");
    reconf("error-no", "EIO");
    reconf("delay-ms", "60");
    uint64_t t1 = bfs_now_ns();
    is_int(write_at(fd, 0, "x"), -EIO, "failed write answered ...");
    ok(bfs_now_ns() - t1 >= 60 * 1000000ull, "... after the delay");
    reconf("delay-ms", "0");
}

static void test_refuse(struct bfs_fd *fd)
{
    is_int(reconf("fail-on-wind", "on"), 0, "fail-on-wind on");
    struct async_write a = {.m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER};
    struct bfs_frame *f = bfs_frame_top_new(st, NULL);
    struct bfs_write_req w = {.fd = fd, .data = {"x", 1}, .offset = 0};
    is_int(bfs_wind_write(f, top, async_cbk, &a, &w), -EIO, "the wind itself returns -EIO");
    is_int(a.calls, 0, "and the callback is never called");
    bfs_frame_top_free(f);
    reconf("fail-on-wind", "off");
}

static void test_random_and_rate(void)
{
    reconf("enable", "all");
    reconf("random-failure", "on");
    int failed = 0, plausible = 0, distinct = 0, seen[256] = {0};
    for (int i = 0; i < 60; i++) {
        struct bfs_stat_req r = {0};
        r.loc.gfid = bfs_gfid_root;
        int rc = bfs_sync_stat(top, st, &r, NULL);
        failed += rc < 0;
        int e = -rc;
        plausible += e == EIO || e == ENOTCONN || e == ESTALE || e == ENOENT || e == EACCES;
        if (e > 0 && e < 256 && !seen[e]++)
            distinct++;
    }
    is_int(failed, 60, "random-failure: every stat fails");
    is_int(plausible, 60, "with an errno plausible for a read-only fop");
    ok(distinct >= 2, "and not always the same one (%d kinds)", distinct);

    reconf("random-failure", "off");
    reconf("failure", "30");
    failed = 0;
    for (int i = 0; i < 400; i++) {
        struct bfs_stat_req r = {0};
        r.loc.gfid = bfs_gfid_root;
        failed += bfs_sync_stat(top, st, &r, NULL) < 0;
    }
    ok(failed > 60 && failed < 180, "failure 30: about 30%% of 400 calls fail (%d)", failed);
    reconf("failure", "0");
    struct bfs_stat_req r = {0};
    r.loc.gfid = bfs_gfid_root;
    is_int(bfs_sync_stat(top, st, &r, NULL), 0, "failure 0: calls succeed again");

    char *text = top->mod->dump(top);
    json_object *o = text ? json_tokener_parse(text) : NULL, *v;
    ok(o && json_object_object_get_ex(o, "injected", &v) && json_object_get_int64(v) > 100,
       "dump counts injected failures");
    json_object_put(o);
    free(text);
}

static void test_bad_options(void)
{
    static const char *const bad[] = {
        "volume m\n type storage/memory\nend-volume\n"
        "volume e\n type debug/error-gen\n option error-no EWHATEVER\n subvolumes m\nend-volume\n",
        "volume m\n type storage/memory\nend-volume\n"
        "volume e\n type debug/error-gen\n option enable read,bogus\n subvolumes m\nend-volume\n",
    };
    for (size_t i = 0; i < 2; i++) {
        struct bfs_graph *g = NULL;
        char err[256];
        int rc = bfs_graph_from_text(bad[i], strlen(bad[i]), "<bad>", proc, &g, err, sizeof(err));
        if (rc == 0)
            rc = bfs_graph_init(g);
        is_int(rc, -EINVAL, "bad option %zu refused", i);
        bfs_graph_free(g);
    }
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void test_trace(void)
{
    static const char vol[] = "volume m\n type storage/memory\nend-volume\n"
                              "volume tr\n type debug/trace\n subvolumes m\nend-volume\n";
    struct bfs_graph *g = NULL;
    char err[256], path[] = "/tmp/bfs-trace-XXXXXX";
    int rc = bfs_graph_from_text(vol, strlen(vol), "<trace>", proc, &g, err, sizeof(err));
    if (rc == 0)
        rc = bfs_graph_init(g);
    is_int(rc, 0, "trace graph: %s", err);
    if (rc < 0)
        return;
    close(mkstemp(path));
    bfs_log_open(path);
    bfs_log_set_level(BFS_LOG_INFO);
    struct bfs_stack *s = bfs_stack_new();
    s->unique = 77;
    struct bfs_lookup_req l = {0};
    l.loc.gfid = bfs_gfid_root;
    is_int(bfs_sync_lookup(g->top, s, &l, NULL), 0, "lookup through trace");
    l.loc.gfid = bfs_gfid_null;
    l.loc.pargfid = bfs_gfid_root;
    l.loc.name = "nothing-here";
    is_int(bfs_sync_lookup(g->top, s, &l, NULL), -ENOENT, "failing lookup through trace");
    bfs_log_set_level(BFS_LOG_CRITICAL);
    bfs_log_close();
    char *log = slurp(path);
    unlink(path);
    ok(log && strstr(log, "[tr]") != NULL, "trace lines name the translator");
    ok(log && strstr(log, "#77 lookup(gfid=00000000-0000-0000-0000-000000000001") != NULL,
       "the call is logged with its request");
    ok(log && strstr(log, "#77 lookup <- rc=0 gfid=00000000-0000-0000-0000-000000000001") != NULL,
       "the answer is logged with its attributes");
    ok(log && strstr(log, "name=nothing-here") && strstr(log, "#77 lookup <- rc=-2 ("),
       "a failed answer is logged with its errno");
    if (log && !strstr(log, "#77 lookup <- rc=-2 ("))
        printf("# log was:\n%s", log);
    free(log);
    bfs_stack_unref(s);
    bfs_graph_free(g);
}

int main(void)
{
    plan_lazy();
    bfs_log_set_level(BFS_LOG_CRITICAL); /* expected option errors stay quiet */
    char err[512] = "";
    proc = bfs_proc_new("test_errorgen", 0);
    int rc = bfs_graph_from_text(VOLFILE, strlen(VOLFILE), "<inline>", proc, &graph, err,
                                 sizeof(err));
    is_int(rc, 0, "graph builds: %s", err);
    if (rc < 0)
        return done_testing();
    is_int(bfs_graph_init(graph), 0, "graph inits");
    top = graph->top;
    st = bfs_stack_new();

    struct bfs_fd *fd = bfs_fd_new(graph, NULL, O_RDWR, 0);
    struct bfs_create_req c = {.fd = fd, .flags = O_RDWR | O_CREAT, .mode = 0644};
    c.loc.pargfid = bfs_gfid_root;
    c.loc.name = "f";
    is_int(bfs_sync_create(top, st, &c, NULL), 0, "create is not enabled: it works");

    test_write_failures(fd);
    test_delay(fd);
    test_refuse(fd);
    test_random_and_rate();
    test_bad_options();
    test_trace();

    bfs_fd_unref(fd);
    bfs_stack_unref(st);
    bfs_graph_free(graph);
    bfs_proc_free(proc);
    return done_testing();
}
