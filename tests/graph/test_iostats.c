/*
 * test_iostats.c — debug/io-stats over storage/memory (async answers) with
 * a debug/error-gen in between that delays reads: counts, errors, bytes and
 * latencies move as fops pass, and read back as JSON through the virtual
 * xattr "brickfs.io-stats" (getxattr and fgetxattr) and the dump hook.
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../lib/tap.h"
#include "core/event.h"
#include "core/fops-util.h"
#include "core/graph.h"

static const char VOLFILE[] = "volume mem\n"
                              "    type storage/memory\n"
                              "    option async on\n"
                              "end-volume\n"
                              "volume slow\n"
                              "    type debug/error-gen\n"
                              "    option enable read\n"
                              "    option delay-ms 20\n"
                              "    subvolumes mem\n"
                              "end-volume\n"
                              "volume stats\n"
                              "    type debug/io-stats\n"
                              "    subvolumes slow\n"
                              "end-volume\n";

static struct bfs_graph *graph;
static struct bfs_xl *top;
static struct bfs_stack *st;

static json_object *parse_value(const struct bfs_dict *d, const char *key)
{
    const void *v;
    size_t len;
    if (bfs_dict_get_raw(d, key, NULL, &v, &len) < 0)
        return NULL;
    char *text = strndup(v, len);
    json_object *o = json_tokener_parse(text);
    free(text);
    return o;
}

/* getxattr of the virtual name, parsed. */
static json_object *stats_via_getxattr(const char *name)
{
    struct bfs_getxattr_req req = {.name = name};
    struct bfs_getxattr_rep rep;
    req.loc.gfid = bfs_gfid_root;
    int rc = bfs_sync_getxattr(top, st, &req, &rep);
    json_object *o = rc >= 0 ? parse_value(rep.xattrs, name) : NULL;
    bfs_getxattr_rep_clear_dup(&rep);
    return o;
}

static int64_t num(json_object *root, const char *fop, const char *field)
{
    json_object *fops, *f, *v;
    if (!root || !json_object_object_get_ex(root, "fops", &fops) ||
        !json_object_object_get_ex(fops, fop, &f) || !json_object_object_get_ex(f, field, &v))
        return -1;
    return json_object_get_int64(v);
}

static int64_t top_num(json_object *root, const char *field)
{
    json_object *v;
    return root && json_object_object_get_ex(root, field, &v) ? json_object_get_int64(v) : -1;
}

static struct bfs_fd *create_file(const char *name)
{
    struct bfs_fd *fd = bfs_fd_new(graph, NULL, O_RDWR, 0);
    struct bfs_create_req req = {.fd = fd, .flags = O_RDWR | O_CREAT, .mode = 0644};
    req.loc.pargfid = bfs_gfid_root;
    req.loc.name = name;
    return bfs_sync_create(top, st, &req, NULL) == 0 ? fd : NULL;
}

static void do_io(struct bfs_fd *fd)
{
    char buf[100];
    memset(buf, 'x', sizeof(buf));
    int good = 0;
    for (int i = 0; i < 3; i++) {
        struct bfs_write_req w = {.fd = fd, .data = {buf, sizeof(buf)}, .offset = i * 100u};
        good += bfs_sync_write(top, st, &w, NULL) == 100;
    }
    is_int(good, 3, "three writes of 100 bytes");
    struct bfs_read_req r = {.fd = fd, .size = 250, .offset = 0};
    struct bfs_read_rep rep;
    is_int(bfs_sync_read(top, st, &r, &rep), 250, "read 250 bytes");
    bfs_read_rep_clear_dup(&rep);
    r.offset = 250;
    is_int(bfs_sync_read(top, st, &r, &rep), 50, "read the last 50 bytes");
    bfs_read_rep_clear_dup(&rep);

    struct bfs_lookup_req l = {0};
    l.loc.pargfid = bfs_gfid_root;
    l.loc.name = "missing";
    is_int(bfs_sync_lookup(top, st, &l, NULL), -ENOENT, "lookup of a missing name fails");
}

static void check_stats(json_object *o, const char *how)
{
    ok(o != NULL, "%s: value parses as JSON", how);
    json_object *name;
    ok(o && json_object_object_get_ex(o, "name", &name) &&
           strcmp(json_object_get_string(name), "stats") == 0,
       "%s: names the translator", how);
    is_int(num(o, "write", "count"), 3, "%s: write count", how);
    is_int(num(o, "write", "bytes"), 300, "%s: bytes written", how);
    is_int(num(o, "write", "errors"), 0, "%s: no write errors", how);
    is_int(num(o, "read", "count"), 2, "%s: read count", how);
    is_int(num(o, "read", "bytes"), 300, "%s: bytes read", how);
    is_int(num(o, "lookup", "count"), 1, "%s: lookup count", how);
    is_int(num(o, "lookup", "errors"), 1, "%s: the failed lookup is an error", how);
    is_int(top_num(o, "bytes_written"), 300, "%s: bytes_written total", how);
    is_int(top_num(o, "bytes_read"), 300, "%s: bytes_read total", how);
    int64_t mn = num(o, "write", "lat_min_ns"), avg = num(o, "write", "lat_avg_ns"),
            mx = num(o, "write", "lat_max_ns");
    ok(mn > 0 && mn <= avg && avg <= mx, "%s: write latency 0 < min <= avg <= max", how);
    ok(num(o, "read", "lat_min_ns") >= 20 * 1000000LL,
       "%s: reads delayed 20 ms below show it in their latency", how);
    is_int(num(o, "fsync", "count"), -1, "%s: fops never called are left out", how);
}

int main(void)
{
    plan_lazy();
    char err[512] = "";
    struct bfs_proc *proc = bfs_proc_new("test_iostats", 0);
    int rc = bfs_graph_from_text(VOLFILE, strlen(VOLFILE), "<inline>", proc, &graph, err,
                                 sizeof(err));
    is_int(rc, 0, "graph builds: %s", err);
    if (rc < 0)
        return done_testing();
    is_int(bfs_graph_init(graph), 0, "graph inits");
    top = graph->top;
    st = bfs_stack_new();

    struct bfs_fd *fd = create_file("f");
    ok(fd != NULL, "created a file");
    do_io(fd);

    json_object *o = stats_via_getxattr("brickfs.io-stats");
    check_stats(o, "getxattr");
    json_object_put(o);

    char *text = top->mod->dump(top);
    o = text ? json_tokener_parse(text) : NULL;
    free(text);
    check_stats(o, "dump");
    json_object_put(o);

    struct bfs_fgetxattr_req fg = {.fd = fd, .name = "brickfs.io-stats"};
    struct bfs_fgetxattr_rep frep;
    is_int(bfs_sync_fgetxattr(top, st, &fg, &frep), 0, "fgetxattr of the virtual name");
    o = parse_value(frep.xattrs, "brickfs.io-stats");
    is_int(num(o, "write", "count"), 3, "fgetxattr: same numbers");
    is_int(num(o, "getxattr", "count"), -1, "the virtual xattr itself is not counted");
    json_object_put(o);
    bfs_fgetxattr_rep_clear_dup(&frep);

    /* a real xattr goes down and is counted */
    struct bfs_getxattr_req g = {.name = "user.none"};
    g.loc.gfid = bfs_gfid_root;
    is_int(bfs_sync_getxattr(top, st, &g, NULL), -ENODATA, "other names go down (ENODATA)");

    o = stats_via_getxattr("brickfs.io-stats.reset");
    is_int(num(o, "getxattr", "errors"), 1, "reset answers the numbers before zeroing");
    json_object_put(o);
    o = stats_via_getxattr("brickfs.io-stats");
    is_int(num(o, "write", "count"), -1, "after reset, counters start again");
    json_object_put(o);

    /* latency-measurement off: counts still move, latencies do not */
    struct bfs_dict *opts = bfs_dict_new();
    bfs_dict_set_str(opts, "latency-measurement", "off");
    is_int(top->mod->reconfigure(top, opts), 0, "reconfigure latency-measurement off");
    bfs_dict_unref(opts);
    struct bfs_fstat_req fs = {.fd = fd};
    bfs_sync_fstat(top, st, &fs, NULL);
    o = stats_via_getxattr("brickfs.io-stats");
    is_int(num(o, "fstat", "count"), 1, "fstat counted");
    is_int(num(o, "fstat", "lat_max_ns"), 0, "without latency measurement");
    json_object_put(o);

    bfs_fd_unref(fd);
    bfs_stack_unref(st);
    bfs_graph_free(graph);
    bfs_proc_free(proc);
    return done_testing();
}
