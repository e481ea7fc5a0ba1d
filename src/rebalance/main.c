/*
 * main.c — brickfs-rebalance: arguments, the client graph (libbrickfs),
 * the status file, signals and the exit status (docs/design/rebalance.md,
 * "The rebalance process").
 *
 *   brickfs-rebalance --volume VOL --volfile FILE --state DIR --status FILE
 *                     --id ID --layout-version N [--kind KIND]
 *
 * Exit: 0 completed or stopped (SIGTERM/SIGINT: checkpoint written), 3
 * failed (some files could not be moved, or a subvolume not walked), 1 the
 * process could not start (graph, state folder), 2 usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "api/api.h"
#include "core/dict.h"
#include "core/log.h"
#include "rebal.h"

#define RB_LOG "rebalance"

volatile sig_atomic_t bfs_rb_stop;

static void on_signal(int sig)
{
    (void)sig;
    bfs_rb_stop = 1;
}

double bfs_rb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct bfs_stack *bfs_rb_stack(void)
{
    return bfs_stack_new(); /* root: internal xattrs and any file */
}

struct bfs_dict *bfs_rb_xdata_internal(void)
{
    struct bfs_dict *d = bfs_dict_new();
    if (d && bfs_dict_set_int(d, RB_INTERNAL_KEY, 1) < 0) {
        bfs_dict_unref(d);
        return NULL;
    }
    return d;
}

void bfs_rb_status(struct rb *rb, const char *state, bool force)
{
    double now = bfs_rb_now();
    if (!force && now - rb->last_status < 0.5)
        return;
    rb->last_status = now;
    double el = now - rb->start_time;
    struct json_object *j = json_object_new_object();
    json_object_object_add(j, "state", json_object_new_string(state));
    json_object_object_add(j, "id", json_object_new_string(rb->id));
    json_object_object_add(j, "pid", json_object_new_int((int)getpid()));
    json_object_object_add(j, "files_scanned", json_object_new_int64(rb->c.scanned));
    json_object_object_add(j, "files_moved", json_object_new_int64(rb->c.moved));
    json_object_object_add(j, "files_skipped", json_object_new_int64(rb->c.skipped));
    json_object_object_add(j, "files_failed", json_object_new_int64(rb->c.failed));
    json_object_object_add(j, "bytes_moved", json_object_new_int64(rb->c.bytes));
    json_object_object_add(j, "dirs_done", json_object_new_int64(rb->c.dirs_done));
    json_object_object_add(j, "runs", json_object_new_int64(rb->c.runs));
    json_object_object_add(j, "elapsed_s", json_object_new_int64((int64_t)el));
    static int64_t moved0 = -1, bytes0;
    if (moved0 < 0) {
        moved0 = rb->c.moved;
        bytes0 = rb->c.bytes;
    }
    double rf = el > 0 ? (double)(rb->c.moved - moved0) / el : 0;
    double rm = el > 0 ? (double)(rb->c.bytes - bytes0) / el / 1e6 : 0;
    json_object_object_add(j, "rate_files_s", json_object_new_double(rf));
    json_object_object_add(j, "rate_mb_s", json_object_new_double(rm));
    int64_t eta = -1;
    double scan_rate = el > 1 ? (double)(rb->c.scanned - rb->scanned_at_start) / el : 0;
    if (strcmp(state, "completed") == 0) {
        eta = 0;
    } else if (scan_rate > 0 && rb->total_estimate) {
        double left = (double)rb->total_estimate - (double)(rb->c.scanned + rb->c.dirs_done);
        eta = left > 0 ? (int64_t)(left / scan_rate) : 0;
    }
    json_object_object_add(j, "eta_s", json_object_new_int64(eta));
    const char *txt = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN);
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", rb->status_path);
    FILE *f = fopen(tmp, "we");
    if (f) {
        fputs(txt, f);
        fputc('\n', f);
        fclose(f);
        rename(tmp, rb->status_path);
    }
    json_object_put(j);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: brickfs-rebalance --volume VOL --volfile FILE --state DIR --status FILE\n"
               "                         --id ID --layout-version N [--kind KIND]\n"
               "                         [--settle-until EPOCH]\n"
               "Moves the files of a distribute volume whose place changed; started by\n"
               "brickfsd ('brickfs volume rebalance VOL start'), see docs/design/rebalance.md.\n");
}

static int parse_args(struct rb *rb, int argc, char **argv)
{
    static const struct option opts[] = {
        {"volume", 1, 0, 'v'}, {"volfile", 1, 0, 'f'}, {"state", 1, 0, 's'},
        {"status", 1, 0, 't'}, {"id", 1, 0, 'i'},      {"layout-version", 1, 0, 'l'},
        {"kind", 1, 0, 'k'},   {"settle-until", 1, 0, 'u'},
        {"help", 0, 0, 'h'},   {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'v': rb->volume = optarg; break;
        case 'f': rb->volfile = optarg; break;
        case 's': rb->state_dir = optarg; break;
        case 't': rb->status_path = optarg; break;
        case 'i': rb->id = optarg; break;
        case 'l': rb->layout_version = atoll(optarg); break;
        case 'k': rb->kind = optarg; break;
        case 'u': rb->settle_until = atoll(optarg); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (!rb->volume || !rb->volfile || !rb->state_dir || !rb->status_path || !rb->id) {
        usage(stderr);
        return -1;
    }
    if (!rb->kind)
        rb->kind = "migrate";
    return 0;
}

/* The distribute translator, its children, the table, the throttle. */
static int setup(struct rb *rb, struct brickfs *fs)
{
    rb->graph = fs->graph;
    for (int i = 0; i < rb->graph->nxls; i++)
        if (strcmp(rb->graph->xls[i]->type, "cluster/distribute") == 0)
            rb->dht = rb->graph->xls[i];
    if (!rb->dht) {
        fprintf(stderr, "brickfs-rebalance: the volfile has no cluster/distribute\n");
        return -1;
    }
    rb->sub = rb->dht->children;
    rb->nsub = rb->dht->nchildren;
    char why[200];
    if (dht_table_parse(bfs_xl_opt_str(rb->dht, "layout"), rb->nsub, &rb->table, why,
                        sizeof(why)) < 0) {
        fprintf(stderr, "brickfs-rebalance: layout: %s\n", why);
        return -1;
    }
    const char *prev = bfs_xl_opt_str(rb->dht, "layout-previous");
    if (prev && *prev &&
        dht_table_parse(prev, rb->nsub, &rb->prev, why, sizeof(why)) < 0) {
        fprintf(stderr, "brickfs-rebalance: layout-previous: %s\n", why);
        return -1;
    }
    const char *thr = bfs_xl_opt_str(rb->dht, "cluster.rebal-throttle");
    int64_t mbps = bfs_xl_opt_int(rb->dht, "cluster.rebal-max-mbps");
    if (mbps > 0)
        rb->max_bps = (double)mbps * 1e6;
    else if (thr && strcmp(thr, "lazy") == 0)
        rb->max_bps = 10e6;
    else if (thr && strcmp(thr, "aggressive") == 0)
        rb->max_bps = 0;
    else
        rb->max_bps = 50e6;
    /* entries on the subvolumes, for the time left */
    struct bfs_stack *st = bfs_rb_stack();
    for (int s = 0; s < rb->nsub; s++) {
        struct bfs_statfs_req r = {0};
        struct bfs_statfs_rep rep;
        r.loc.gfid.b[15] = 1;
        if (bfs_sync_statfs(rb->sub[s], st, &r, &rep) >= 0 && rep.buf.files >= rep.buf.ffree)
            rb->total_estimate += rep.buf.files - rep.buf.ffree;
        bfs_statfs_rep_clear_dup(&rep);
    }
    bfs_stack_unref(st);
    rb->lock_owner = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL);
    return 0;
}

/* Until --settle-until (seconds since the epoch): nothing is moved while
 * mounts may still place and find files by the table before this change
 * (they switch graphs at their next volfile poll, every 2 s by default).
 * A client on the old table would not find a file moved under a name its
 * table hashes elsewhere, and its renames would leave data the walk has
 * passed behind link files only the old table knows
 * (docs/design/rebalance.md, "Settling"). -EINTR when asked to stop. */
static int settle(struct rb *rb)
{
    bool said = false;
    while (!bfs_rb_stop && (long long)time(NULL) < rb->settle_until) {
        if (!said)
            bfs_log(RB_LOG, BFS_LOG_INFO, "waiting %lld s for mounts to switch to the new "
                    "layout", rb->settle_until - (long long)time(NULL));
        said = true;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
        bfs_rb_status(rb, "in-progress", false);
    }
    return bfs_rb_stop ? -EINTR : 0;
}

int main(int argc, char **argv)
{
    struct rb rb = {.moves_fd = -1};
    if (parse_args(&rb, argc, argv) < 0)
        return 2;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct brickfs *fs = brickfs_new_from_volfile(rb.volfile);
    if (!fs || brickfs_init(fs) < 0) {
        fprintf(stderr, "brickfs-rebalance: volume %s (%s) did not come up: %s\n", rb.volume,
                rb.volfile, strerror(errno));
        return 1;
    }
    int rc = setup(&rb, fs);
    if (rc == 0 && (rc = bfs_rb_checkpoint_open(&rb)) < 0)
        fprintf(stderr, "brickfs-rebalance: state folder %s: %s\n", rb.state_dir,
                strerror(-rc));
    if (rc < 0) {
        brickfs_fini(fs);
        return 1;
    }
    rb.start_time = bfs_rb_now();
    rb.throttle_t0 = rb.start_time;
    rb.scanned_at_start = rb.c.scanned;
    bfs_log(RB_LOG, BFS_LOG_INFO, "rebalance %s of %s (%s): %d subvolumes, layout version %lld, "
            "run %lld", rb.id, rb.volume, rb.kind, rb.nsub, rb.layout_version,
            (long long)rb.c.runs);
    fprintf(stderr, "brickfs-rebalance: rebalance %s of %s: run %lld, %zu directories already "
            "finished, %lld files moved before\n", rb.id, rb.volume, (long long)rb.c.runs,
            rb.done_n, (long long)rb.c.moved);
    bfs_rb_status(&rb, "in-progress", true);
    rc = settle(&rb);
    if (rc == 0) {
        rb.start_time = rb.throttle_t0 = bfs_rb_now(); /* rates count the work, not the wait */
        rc = bfs_rb_crawl(&rb);
    }
    const char *state = rc == -EINTR ? "stopped"
                        : rc < 0 || rb.c.failed ? "failed"
                                                : "completed";
    bfs_rb_checkpoint_close(&rb);
    bfs_rb_status(&rb, state, true);
    fprintf(stderr, "brickfs-rebalance: %s: scanned %lld, moved %lld, skipped %lld, failed "
            "%lld, %lld bytes in %.1f s\n", state, (long long)rb.c.scanned,
            (long long)rb.c.moved, (long long)rb.c.skipped, (long long)rb.c.failed,
            (long long)rb.c.bytes, bfs_rb_now() - rb.start_time);
    dht_table_free(rb.table);
    dht_table_free(rb.prev);
    brickfs_fini(fs);
    return strcmp(state, "failed") == 0 ? 3 : 0;
}
