/*
 * io-stats.c — debug/io-stats: per-fop call counts, errors, bytes and
 * latency (min/avg/max in ns) of everything that passes through.
 *
 * Every fop goes through one generic handler (module generic_fop): it winds
 * the call on with a callback that records the answer. Latency is measured
 * from frame->wound_ns (set when our caller wound into us) to the answer.
 * The write payload size travels as the wind cookie, so nothing is
 * allocated per call; counters are relaxed atomics (min/max by CAS), so
 * threads never wait on each other here.
 *
 * Reading the numbers, as JSON:
 *   - the module's dump hook;
 *   - getxattr / fgetxattr of the virtual name "brickfs.io-stats" on any
 *     file answers {"name":..., "uptime_s":..., "bytes_read":...,
 *     "bytes_written":..., "fops":{"write":{"count","errors","bytes",
 *     "lat_min_ns","lat_avg_ns","lat_max_ns"}, ...}} as a STR value, without
 *     going down the graph. Fops never called are left out.
 *   - getxattr "brickfs.io-stats.reset" answers the same and then zeroes
 *     every counter.
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "core/fops-util.h"
#include "core/xlator.h"

#define IOS_XATTR "brickfs.io-stats"
#define IOS_XATTR_RESET "brickfs.io-stats.reset"

struct ios_fop {
    uint64_t count, errors, bytes;
    uint64_t lat_sum, lat_min, lat_max, lat_n;
};

struct ios_priv {
    struct ios_fop fops[BFS_FOP_COUNT];
    uint64_t started_ns;
    bool latency; /* option latency-measurement */
};

static void ios_reset(struct ios_priv *p)
{
    for (int i = 0; i < BFS_FOP_COUNT; i++) {
        struct ios_fop *f = &p->fops[i];
        __atomic_store_n(&f->count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&f->errors, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&f->bytes, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&f->lat_sum, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&f->lat_n, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&f->lat_min, UINT64_MAX, __ATOMIC_RELAXED);
        __atomic_store_n(&f->lat_max, 0, __ATOMIC_RELAXED);
    }
}

static void atomic_min(uint64_t *p, uint64_t v)
{
    uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v < cur &&
           !__atomic_compare_exchange_n(p, &cur, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static void atomic_max(uint64_t *p, uint64_t v)
{
    uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v > cur &&
           !__atomic_compare_exchange_n(p, &cur, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static void ios_record(struct ios_priv *p, int fop, int rc, uint64_t bytes, uint64_t lat)
{
    struct ios_fop *f = &p->fops[fop];
    __atomic_fetch_add(&f->count, 1, __ATOMIC_RELAXED);
    if (rc < 0)
        __atomic_fetch_add(&f->errors, 1, __ATOMIC_RELAXED);
    else if (bytes)
        __atomic_fetch_add(&f->bytes, bytes, __ATOMIC_RELAXED);
    if (lat != UINT64_MAX) {
        __atomic_fetch_add(&f->lat_sum, lat, __ATOMIC_RELAXED);
        __atomic_fetch_add(&f->lat_n, 1, __ATOMIC_RELAXED);
        atomic_min(&f->lat_min, lat);
        atomic_max(&f->lat_max, lat);
    }
}

/* Bytes moved by a successful call: reads by the reply, writes by the
 * request (carried in the cookie). */
static uint64_t moved_bytes(int fop, void *cookie, const void *rep)
{
    if (fop == BFS_FOP_READ)
        return ((const struct bfs_read_rep *)rep)->data.len;
    if (fop == BFS_FOP_WRITE)
        return (uint64_t)(uintptr_t)cookie;
    if (fop == BFS_FOP_COPY_FILE_RANGE)
        return ((const struct bfs_copy_file_range_rep *)rep)->count;
    return 0;
}

static void ios_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    struct ios_priv *p = frame->xl->private;
    bool measure = __atomic_load_n(&p->latency, __ATOMIC_RELAXED);
    uint64_t now = measure ? bfs_now_ns() : 0;
    uint64_t lat = measure && now >= frame->wound_ns ? now - frame->wound_ns : UINT64_MAX;
    ios_record(p, fop, rc, rc >= 0 ? moved_bytes(fop, cookie, rep) : 0, lat);
    bfs_unwind_any(fop, frame, rc, rep);
}

static int ios_generic(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req)
{
    void *cookie = NULL;
    if (fop == BFS_FOP_WRITE)
        cookie = (void *)(uintptr_t)((const struct bfs_write_req *)req)->data.len;
    int rc = bfs_wind_any(fop, frame, FIRST_CHILD(xl), ios_cbk, cookie, req);
    if (rc < 0)
        ios_record(xl->private, fop, rc, 0, UINT64_MAX); /* refused: an error too */
    return rc;
}

/* ---- JSON ---- */

static json_object *u64(uint64_t v)
{
    return json_object_new_uint64(v);
}

static char *ios_json(struct bfs_xl *xl)
{
    struct ios_priv *p = xl->private;
    json_object *root = json_object_new_object(), *fops = json_object_new_object();
    uint64_t rd = 0, wr = 0;
    json_object_object_add(root, "name", json_object_new_string(xl->name));
    json_object_object_add(root, "uptime_s", u64((bfs_now_ns() - p->started_ns) / 1000000000));
    for (int i = 0; i < BFS_FOP_COUNT; i++) {
        const struct ios_fop *f = &p->fops[i];
        uint64_t count = __atomic_load_n(&f->count, __ATOMIC_RELAXED);
        if (!count)
            continue;
        uint64_t n = __atomic_load_n(&f->lat_n, __ATOMIC_RELAXED);
        uint64_t sum = __atomic_load_n(&f->lat_sum, __ATOMIC_RELAXED);
        uint64_t min = __atomic_load_n(&f->lat_min, __ATOMIC_RELAXED);
        uint64_t bytes = __atomic_load_n(&f->bytes, __ATOMIC_RELAXED);
        json_object *o = json_object_new_object();
        json_object_object_add(o, "count", u64(count));
        json_object_object_add(o, "errors", u64(__atomic_load_n(&f->errors, __ATOMIC_RELAXED)));
        json_object_object_add(o, "bytes", u64(bytes));
        json_object_object_add(o, "lat_min_ns", u64(n && min != UINT64_MAX ? min : 0));
        json_object_object_add(o, "lat_avg_ns", u64(n ? sum / n : 0));
        json_object_object_add(o, "lat_max_ns",
                               u64(__atomic_load_n(&f->lat_max, __ATOMIC_RELAXED)));
        json_object_object_add(fops, bfs_fop_name(i), o);
        if (i == BFS_FOP_READ)
            rd += bytes;
        else if (i == BFS_FOP_WRITE)
            wr += bytes;
    }
    json_object_object_add(root, "bytes_read", u64(rd));
    json_object_object_add(root, "bytes_written", u64(wr));
    json_object_object_add(root, "fops", fops);
    char *text = strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
    json_object_put(root);
    return text;
}

/* Answers the virtual xattr; returns false if name is not ours. */
static bool ios_virtual_xattr(struct bfs_frame *frame, struct bfs_xl *xl, int fop,
                              const char *name)
{
    if (!name || (strcmp(name, IOS_XATTR) != 0 && strcmp(name, IOS_XATTR_RESET) != 0))
        return false;
    char *text = ios_json(xl);
    struct bfs_dict *d = bfs_dict_new();
    int rc = text && d ? bfs_dict_set_str(d, name, text) : -ENOMEM;
    if (rc == 0 && strcmp(name, IOS_XATTR_RESET) == 0)
        ios_reset(xl->private);
    /* getxattr and fgetxattr replies are both { xattrs, xdata } */
    if (fop == BFS_FOP_GETXATTR) {
        struct bfs_getxattr_rep rep = {.xattrs = rc == 0 ? d : NULL};
        bfs_unwind_getxattr(frame, rc, &rep);
    } else {
        struct bfs_fgetxattr_rep rep = {.xattrs = rc == 0 ? d : NULL};
        bfs_unwind_fgetxattr(frame, rc, &rep);
    }
    bfs_dict_unref(d);
    free(text);
    return true;
}

static int ios_getxattr(struct bfs_frame *frame, struct bfs_xl *xl,
                        const struct bfs_getxattr_req *req)
{
    if (ios_virtual_xattr(frame, xl, BFS_FOP_GETXATTR, req->name))
        return 0;
    return ios_generic(frame, xl, BFS_FOP_GETXATTR, req);
}

static int ios_fgetxattr(struct bfs_frame *frame, struct bfs_xl *xl,
                         const struct bfs_fgetxattr_req *req)
{
    if (ios_virtual_xattr(frame, xl, BFS_FOP_FGETXATTR, req->name))
        return 0;
    return ios_generic(frame, xl, BFS_FOP_FGETXATTR, req);
}

/* ---- module ---- */

static int ios_init(struct bfs_xl *xl)
{
    struct ios_priv *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    ios_reset(p);
    p->started_ns = bfs_now_ns();
    p->latency = bfs_xl_opt_bool(xl, "latency-measurement");
    xl->private = p;
    return 0;
}

static void ios_fini(struct bfs_xl *xl)
{
    free(xl->private);
    xl->private = NULL;
}

static int ios_reconfigure(struct bfs_xl *xl, struct bfs_dict *options)
{
    struct ios_priv *p = xl->private;
    const char *v;
    bool on;
    if (bfs_dict_get_str(options, "latency-measurement", &v) == 0) {
        if (bfs_parse_bool(v, &on) < 0)
            return -EINVAL;
        __atomic_store_n(&p->latency, on, __ATOMIC_RELAXED);
    }
    return 0;
}

static const struct bfs_option_desc ios_options[] = {
    {.key = "latency-measurement", .type = BFS_OPT_BOOL, .def = "on",
     .description = "measure per-fop latency (min/avg/max) besides counting",
     .flags = BFS_OPT_F_SETTABLE | BFS_OPT_F_RECONF},
    {.key = NULL},
};

static const struct bfs_fops ios_fops = {
    .getxattr = ios_getxattr,
    .fgetxattr = ios_fgetxattr,
};

BFS_XL_MODULE(.type = "debug/io-stats", .fops = &ios_fops, .options = ios_options,
              .init = ios_init, .fini = ios_fini, .reconfigure = ios_reconfigure,
              .dump = ios_json, .generic_fop = ios_generic, .min_children = 1,
              .max_children = 1);
