/*
 * test_replicate_memory.c — cluster/replicate keeps what it knew about a
 * file's copies after the inode is forgotten (replicate-memory.c, option
 * cluster.inode-memory), so the read after an open by GFID — what the mount
 * sends when performance/md-cache answered the LOOKUP — needs no refresh;
 * and that what is kept is never trusted further than a live context: a
 * copy that failed a write stays unreadable, a child event or a brick's
 * invalidation of the file (features/upcall) makes the next read refresh;
 * an invalidation leaves a live context alone (its fd still reads).
 *
 * Graph: tests/lib/cluster-graph.h (replicate over error-gen c<i>, io-stats
 * s<i>, locks, posix). An inode is forgotten here the way the mount forgets
 * one: nobody holds it any more (the fd closed, replicate's ring of the
 * last 64 looked-up inodes moved on). Needs root (trusted xattrs).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/cluster-graph.h"
#include "../lib/tap.h"

#define RING 64 /* replicate.h AFR_RECENT */

/* Looks up RING other files, so that replicate's ring of recent lookups
 * lets go of every inode looked up before. */
static void push_out(struct cg_vol *v)
{
    for (int k = 0; k < RING; k++) {
        char name[16];
        snprintf(name, sizeof(name), "o%d", k);
        if (cg_lookup(v, &bfs_gfid_root, name, NULL) == -ENOENT)
            (void)cg_put(v, &bfs_gfid_root, name, "o", NULL);
        (void)cg_lookup(v, &bfs_gfid_root, name, NULL);
    }
}

/* Open by GFID and read, as the mount does after a LOOKUP answered above
 * replicate; returns the lookups each brick saw meanwhile (the refresh),
 * the same for all three or -1. */
static int open_read(struct cg_vol *v, const struct bfs_gfid *g, const char *want)
{
    struct bfs_fd *fd;
    char buf[32] = "";
    uint64_t l0[3], l1[3];
    cg_fop_counts(v, "lookup", l0);
    is_int(cg_open(v, g, O_RDONLY, &fd), 0, "open by GFID");
    int n = cg_read(v, fd, buf, sizeof(buf));
    is_int(n, (int)strlen(want), "read");
    ok(n > 0 && memcmp(buf, want, (size_t)n) == 0, "the bytes are '%s'", want);
    cg_flush_close(v, fd);
    cg_fop_counts(v, "lookup", l1);
    int d = (int)(l1[0] - l0[0]);
    for (int i = 1; i < 3; i++)
        if ((int)(l1[i] - l0[i]) != d)
            return -1;
    return d;
}

static void put_forgotten(struct cg_vol *v, const char *name, const char *s, struct bfs_iatt *a)
{
    ok(cg_put_known(v, name, s, a), "put %s: clean copies, looked up", name);
    push_out(v);
}

/* The read after a forgotten inode's open: no refresh; with the option 0,
 * one lookup per brick (the previous behaviour: shows the test can fail). */
static void test_kept(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    put_forgotten(&v, "k", "kept", &a);
    is_int(open_read(&v, &a.gfid, "kept"), 0, "no lookup: what the lookup learnt was kept");
    cg_top_set(&v, "cluster.inode-memory", "0");
    put_forgotten(&v, "k0", "off", &a);
    is_int(open_read(&v, &a.gfid, "off"), 1, "cluster.inode-memory 0: the read refreshes");
    cg_vol_close(&v);
}

/* A copy that failed a write is not readable in the kept context either:
 * the read goes to a good copy (first-up would pick c0). */
static void test_narrowed(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    if (cg_rep_open(&v, 3, false, " option cluster.read-policy first-up\n"
                                  " option cluster.data-self-heal off\n") < 0)
        return;
    put_forgotten(&v, "n", "stale", &a);
    is_int(cg_write_fails_on(&v, 0, &a.gfid, "FRESH"), 5, "a write that fails on c0 only");
    ok(cg_content_is(&v, 0, "n", "stale"), "c0 kept the old bytes");
    push_out(&v); /* the file's inode is forgotten with c0 out of its readable set */
    is_int(open_read(&v, &a.gfid, "FRESH"), 0, "no refresh, and not from c0");
    cg_vol_close(&v);
}

/* A child event, or a brick's invalidation of the file, and the next
 * read of a forgotten inode refreshes. */
static void test_dropped(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    /* no entry window on the root (on by default since session 8): with
     * the put's window still open, the child event below added a lookup
     * per brick to the read's count in 1 run of 4; windows are not what
     * this scenario is about */
    if (cg_rep_open(&v, 3, false, " option cluster.entry-eager-lock off\n") < 0)
        return;
    put_forgotten(&v, "e", "event", &a);
    cg_down(&v, 2, true);
    cg_up(&v, 2, true);
    is_int(open_read(&v, &a.gfid, "event"), 1, "after a child event: one lookup per brick");

    put_forgotten(&v, "u", "upcall", &a);
    struct bfs_upcall u = {.kind = BFS_UPCALL_INODE, .gfid = a.gfid};
    bfs_xl_notify_parents(cg_child(&v, 1), BFS_EV_UPCALL, &u);
    is_int(open_read(&v, &a.gfid, "upcall"), 1, "after an invalidation: one lookup per brick");
    is_int(open_read(&v, &a.gfid, "upcall"), 0, "that refresh is kept in turn");

    /* A live context is left alone: the fd of a file another client
     * unlinked (or a rebalance moved) still reads, where a refresh by GFID
     * would fail. */
    struct bfs_fd *fd;
    char buf[16];
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &fd), 0, "an fd held open (live context)");
    is_int(cg_read(&v, fd, buf, sizeof(buf)), 6, "read");
    is_int(cg_unlink(&v, &bfs_gfid_root, "u"), 0, "the file is unlinked (as by another client)");
    bfs_xl_notify_parents(cg_child(&v, 0), BFS_EV_UPCALL, &u);
    is_int(cg_read(&v, fd, buf, sizeof(buf)), 6, "after an invalidation, the open fd still reads");
    ok(memcmp(buf, "upcall", 6) == 0, "the file's bytes");
    cg_flush_close(&v, fd);
    cg_vol_close(&v);
}

/* Opens g O_RDONLY asking for the open-prefetch, as protocol/client does:
 * does the answer (the first copy's) carry the file's bytes? */
static bool open_prefetched(struct cg_vol *v, const struct bfs_gfid *g)
{
    struct bfs_inode *inode = bfs_inode_get(v->g->itable, g, S_IFREG);
    struct bfs_fd *fd = bfs_fd_new(v->g, inode, O_RDONLY, 0);
    struct bfs_dict *x = bfs_dict_new();
    bfs_dict_set_int(x, "open-prefetch", 65536);
    struct bfs_open_req o = {.fd = fd, .flags = O_RDONLY, .xdata = x};
    o.loc.gfid = *g;
    struct bfs_open_rep rep;
    bool with = false;
    if (bfs_sync_open(v->top, v->st, &o, &rep) == 0) {
        with = bfs_dict_has(rep.xdata, "open-prefetch");
        bfs_open_rep_clear_dup(&rep);
    }
    bfs_dict_unref(x);
    bfs_fd_unref(fd);
    bfs_inode_unref(inode);
    return with;
}

/* An open that finds no copy known good asks none for the open-prefetch
 * (a read would have to skip those bytes: replicate.md, "Reads"); one that
 * knows the copies asks the reading copy only (c0 for about a third). */
static void test_no_blind_prefetch(void)
{
    enum { N = 24 }; /* c0 serves none of them by chance: (2/3)^N */
    struct cg_vol v;
    struct bfs_iatt a[N];
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    cg_top_set(&v, "cluster.inode-memory", "0");
    int blind = 0, known = 0;
    for (int k = 0; k < N; k++) {
        char name[16];
        snprintf(name, sizeof(name), "p%d", k);
        (void)cg_put_settled(&v, &bfs_gfid_root, name, name, &a[k]); /* known: clean */
    }
    for (int k = 0; k < N; k++) /* nothing known: the put's inode is gone */
        blind += open_prefetched(&v, &a[k].gfid);
    is_int(blind, 0, "no copy known good: no copy prefetched the file");
    cg_top_set(&v, "cluster.lazy-open", "off"); /* every copy opened, c0's answer seen */
    for (int k = 0; k < N; k++) {
        char name[16];
        snprintf(name, sizeof(name), "p%d", k);
        (void)cg_lookup(&v, &bfs_gfid_root, name, NULL); /* held by the ring */
        known += open_prefetched(&v, &a[k].gfid);
    }
    ok(known > 0 && known < N, "copies known: c0 prefetched the %d of %d files it serves", known,
       N);
    cg_vol_close(&v);
}

int main(void)
{
    static const struct cg_test tests[] = {
        {"kept", test_kept},
        {"narrowed", test_narrowed},
        {"dropped", test_dropped},
        {"prefetch", test_no_blind_prefetch},
    };
    plan_lazy();
    if (!cg_main("afrmem", tests, sizeof(tests) / sizeof(tests[0]), "AFR_TEST"))
        return 0;
    return done_testing();
}
