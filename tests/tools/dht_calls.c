/*
 * dht_calls.c — diagnostics for docs/design/performance-notes.md (notes
 * 22-23, 30): how many calls each brick of cluster/distribute sees per
 * operation, and how many serial round trips an operation waits for.
 * Three storage/posix bricks in temporary folders under one distribute, in
 * one process (tests/lib/dht-graph.c; each brick ends in debug/error-gen,
 * whose dump counts the calls and whose delay-ms holds every answer back).
 *
 *   build/tests/tools/dht_calls
 *
 * Prints, for names hashing to b0 (a rename's new name hashes to b1), the
 * calls per operation each brick saw over 40 operations, then with every
 * brick answering 50 ms late the round trips per operation (elapsed / 50
 * ms, over 3 operations). Load-independent counts, printed, not asserted
 * (a background statfs every 5 s may add one call per brick). Was part of
 * tests/graph/test_distribute until session 6. Needs root (trusted xattrs
 * on the bricks). Exit status 0, 1 on failure to set up.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dht-graph.h"
#include "core/event.h"

#define CALLS_N 40

static int calls(struct dg_vol *v)
{
    struct bfs_gfid pg;
    char nm[CALLS_N][64], dn[CALLS_N][64];
    int rc = dg_mkdir(v, &bfs_gfid_root, "calls", &pg);
    if (rc < 0) {
        fprintf(stderr, "dht_calls: mkdir calls: %s\n", strerror(-rc));
        return 1;
    }
    for (int i = 0; i < CALLS_N; i++) {
        char p[16];
        snprintf(p, sizeof(p), "c%d", i);
        dg_name_on(v, &pg, p, 0, nm[i], sizeof(nm[i]));
        snprintf(p, sizeof(p), "r%d", i);
        dg_name_on(v, &pg, p, 1, dn[i], sizeof(dn[i]));
    }
    static const char *what[] = {"lookup of a missing name", "create + write", "rename to b1",
                                 "unlink (data on b0, link file on b1)", "mkdir", "rmdir"};
    for (int k = 0; k < 6; k++) {
        long c0[3];
        for (int b = 0; b < 3; b++)
            c0[b] = dg_eg_calls(v, b);
        for (int i = 0; i < CALLS_N; i++) {
            switch (k) {
            case 0: dg_lookup(v, &pg, nm[i], NULL); break;
            case 1: dg_put(v, &pg, nm[i], "x", NULL); break;
            case 2: dg_rename(v, &pg, nm[i], &pg, dn[i]); break;
            case 3: dg_unlink(v, &pg, dn[i]); break;
            case 4: dg_mkdir(v, &pg, nm[i], NULL); break;
            default: dg_rmdir(v, &pg, nm[i]); break;
            }
        }
        printf("calls per op, %s: b0 %.2f, b1 %.2f, b2 %.2f\n", what[k],
               (double)(dg_eg_calls(v, 0) - c0[0]) / CALLS_N,
               (double)(dg_eg_calls(v, 1) - c0[1]) / CALLS_N,
               (double)(dg_eg_calls(v, 2) - c0[2]) / CALLS_N);
    }
    /* serial round trips: every brick answers 50 ms late, so an operation
     * takes about 50 ms per round trip it waits for. First an unlink on b0
     * the long way, which teaches distribute that b0 locks unlinks itself */
    char warm[64];
    dg_name_on(v, &pg, "w", 0, warm, sizeof(warm));
    dg_put(v, &pg, warm, "x", NULL);
    dg_unlink(v, &pg, warm);
    for (int b = 0; b < 3; b++) {
        char bn[16];
        snprintf(bn, sizeof(bn), "b%d", b);
        dg_reconf(bfs_graph_find(v->g, bn), "delay-ms", "50");
    }
    static const char *rt[] = {"create", "unlink (data on b0)", "create", "mkdir",
                               "rename to b1", "unlink (link file on b1)"};
    for (int k = 0; k < 6; k++) {
        uint64_t t0 = bfs_now_ms();
        for (int i = 0; i < 3; i++) {
            switch (k) {
            case 0: case 2: dg_put(v, &pg, nm[i], NULL, NULL); break;
            case 1: dg_unlink(v, &pg, nm[i]); break;
            case 3: dg_mkdir(v, &pg, dn[i], NULL); break;
            case 4: dg_rename(v, &pg, nm[i], &pg, dn[i + 3]); break;
            default: dg_unlink(v, &pg, dn[i + 3]); break;
            }
        }
        printf("round trips (50 ms each) per %s: %.1f\n", rt[k],
               (double)(bfs_now_ms() - t0) / 3 / 50);
    }
    for (int b = 0; b < 3; b++) {
        char bn[16];
        snprintf(bn, sizeof(bn), "b%d", b);
        dg_reconf(bfs_graph_find(v->g, bn), "delay-ms", "0");
    }
    return 0;
}

int main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "dht_calls: needs root (trusted xattrs on the bricks)\n");
        return 1;
    }
    if (dg_init("dht_calls") < 0) {
        fprintf(stderr, "dht_calls: process resources\n");
        return 1;
    }
    struct dg_vol v;
    int rc = 1;
    if (dg_vol_start(&v, 3, "calls", "")) {
        rc = calls(&v);
        dg_vol_stop(&v);
    } else {
        fprintf(stderr, "dht_calls: the 3-brick volume did not start\n");
    }
    dg_fini();
    return rc;
}
