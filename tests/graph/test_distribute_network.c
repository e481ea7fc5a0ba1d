/*
 * test_distribute_network.c — cluster/distribute over two bricks across
 * real protocol/client and protocol/server in one process: each brick is a
 * server graph (storage/posix -> features/locks -> protocol/server on a
 * free 127.0.0.1 port, temporary folders), the client graph is distribute
 * over two protocol/clients.
 *
 * Asserts: a rename across bricks leaves a link file whose linkto was set
 * over the wire (distribute's internal xattrs cross it with
 * brickfs-internal, for root only; other trusted.brickfs keys stay out of
 * reach) and the file reads through it; a second client finds a file by
 * GFID alone; threads of two clients changing the same names at once end
 * consistent. The rest of distribute: test_distribute.c; the shared
 * volumes, calls and checks: tests/lib/dht-graph.c.
 *
 * Needs root (trusted xattrs on the bricks); skips otherwise. Knobs:
 * DHT_TEST_ITER, DHT_TEST_SEED, DHT_TEST_LOG (as test_distribute).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/dht-graph.h"
#include "../lib/tap.h"
#include "core/event.h"
#include "core/fops-util.h"
#include "core/graph.h"

struct watch {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int ups;
};

static void on_event(struct bfs_graph *g, enum bfs_event ev, void *data)
{
    struct watch *w = g->owner;
    (void)data;
    pthread_mutex_lock(&w->lock);
    w->ups += ev == BFS_EV_CHILD_UP;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

static bool wait_up(struct watch *w, long ms)
{
    uint64_t t0 = bfs_now_ms();
    pthread_mutex_lock(&w->lock);
    while (w->ups == 0 && (long)(bfs_now_ms() - t0) < ms) {
        pthread_mutex_unlock(&w->lock);
        usleep(10000);
        pthread_mutex_lock(&w->lock);
    }
    bool up = w->ups > 0;
    pthread_mutex_unlock(&w->lock);
    return up;
}

static int brick_server(const char *dir, const char *portfile, struct bfs_graph **out)
{
    char text[1024];
    snprintf(text, sizeof(text),
             "volume brick-posix\n type storage/posix\n option directory %s\nend-volume\n"
             "volume brick\n type features/locks\n subvolumes brick-posix\nend-volume\n"
             "volume brick-server\n type protocol/server\n"
             " option transport.listen-address 127.0.0.1\n option transport.listen-port 0\n"
             " option transport.port-file %s\n subvolumes brick\nend-volume\n",
             dir, portfile);
    *out = cg_graph_start(text, NULL);
    return *out ? cg_read_port(portfile) : -1;
}

static int xattr_call(struct bfs_xl *xl, struct bfs_stack *who, const struct bfs_gfid *g,
                      const char *key, bool set, bool internal)
{
    struct bfs_dict *xd = bfs_dict_new(), *xa = bfs_dict_new();
    if (internal)
        bfs_dict_set_int(xd, "brickfs-internal", 1);
    bfs_dict_set_bin(xa, key, "c9", 2);
    int rc;
    if (set) {
        struct bfs_setxattr_req q = {.loc = dg_LG(g), .xattrs = xa, .xdata = xd};
        rc = bfs_sync_setxattr(xl, who, &q, NULL);
    } else {
        struct bfs_getxattr_req q = {.loc = dg_LG(g), .name = key, .xdata = xd};
        rc = bfs_sync_getxattr(xl, who, &q, NULL);
    }
    bfs_dict_unref(xd);
    bfs_dict_unref(xa);
    return rc;
}

static void test_network_keys(struct dg_vol *v, const struct bfs_gfid *g)
{
    struct bfs_xl *c0 = bfs_graph_find(v->g, "c0");
    struct bfs_stack *user = bfs_stack_new();
    user->uid = user->gid = 1000;
    is_int(xattr_call(c0, dg_st, g, "trusted.brickfs.dht.probe", true, true), 0,
           "over the wire, root may set a trusted.brickfs.dht.* key with brickfs-internal");
    is_int(xattr_call(c0, dg_st, g, "trusted.brickfs.dht.probe", false, true), 2, "and read it");
    is_int(xattr_call(c0, dg_st, g, "trusted.brickfs.dht.probe", false, false), -ENODATA,
           "without brickfs-internal it stays invisible");
    is_int(xattr_call(c0, user, g, "trusted.brickfs.dht.probe", true, true), -EPERM,
           "a non-root caller's brickfs-internal is stripped: EPERM");
    is_int(xattr_call(c0, dg_st, g, "trusted.brickfs.gfid", false, true), -ENODATA,
           "other trusted.brickfs keys stay out of reach: the GFID reads ENODATA");
    is_int(xattr_call(c0, dg_st, g, "trusted.brickfs.afr.x", true, true), -EPERM,
           "and cannot be set");
    is_int(xattr_call(v->top, dg_st, g, "trusted.brickfs.dht.linkto", true, false), -EPERM,
           "distribute refuses its own keys from callers above it");
    bfs_stack_unref(user);
}

/* A second client graph over the same two bricks; threads of both change
 * the same names at once. */
static void test_two_clients(struct dg_vol *v, const char *text)
{
    struct watch w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    char err[512] = "";
    struct bfs_graph *g2 = NULL;
    if (bfs_graph_from_text(text, strlen(text), "<client2>", cg_proc(), &g2, err,
                            sizeof(err)) < 0 ||
        (g2->owner = &w, g2->on_event = on_event, bfs_graph_init(g2) < 0)) {
        ok(0, "a second client: %s", err);
        if (g2)
            bfs_graph_free(g2);
        return;
    }
    bfs_graph_activate(g2);
    ok(wait_up(&w, 5000), "a second client is up");
    struct dg_vol v2 = *v;
    v2.g = g2;
    v2.top = g2->top;
    struct bfs_gfid g;
    char buf[64];
    is_int(dg_put(v, &bfs_gfid_root, "cold", "from client 1", &g), 0, "client 1 writes a file");
    struct bfs_stat_req sq = {.loc = dg_LG(&g)};
    struct bfs_fd *fd = bfs_fd_new(g2, NULL, O_RDONLY, 0);
    struct bfs_open_req oq = {.loc = dg_LG(&g), .fd = fd, .flags = O_RDONLY};
    struct bfs_read_req rq = {.fd = fd, .size = sizeof(buf)};
    struct bfs_read_rep rr = {0};
    int rc = bfs_sync_stat(v2.top, dg_st, &sq, NULL);
    if (rc == 0)
        rc = bfs_sync_open(v2.top, dg_st, &oq, NULL);
    if (rc == 0)
        rc = bfs_sync_read(v2.top, dg_st, &rq, &rr);
    ok(rc == 13 && memcmp(rr.data.data, "from client 1", 13) == 0,
       "client 2 stats, opens and reads it by GFID alone (nothing cached: found by fan-out)");
    bfs_read_rep_clear_dup(&rr);
    bfs_fd_unref(fd);
    dg_unlink(v, &bfs_gfid_root, "cold");
    struct dg_cc r;
    bool good = dg_run_cc(v, &v2, "ncc", &r); /* before the message reads r */
    ok(good, "4 threads on two clients x %d creates/renames/unlinks on %d names: every name is "
       "either nowhere or one file with exactly its link file (%d exist), no temporary names "
       "left, readdir lists exactly the names that exist", r.iters, DG_CC_NAMES, r.exist);
    bfs_graph_free(g2);
}

static void test_network(void)
{
    struct dg_vol v;
    struct bfs_graph *sg[2] = {NULL, NULL};
    char pf[2][160], text[1024], buf[64], s[32], d[32], rel[96];
    int port[2];
    memset(&v, 0, sizeof(v));
    v.n = 2;
    for (int i = 0; i < 2; i++) {
        snprintf(v.dir[i], sizeof(v.dir[i]), "%s/net-b%d", cg_root(), i);
        snprintf(pf[i], sizeof(pf[i]), "%s/net-port%d", cg_root(), i);
        mkdir(v.dir[i], 0755);
        port[i] = brick_server(v.dir[i], pf[i], &sg[i]);
    }
    ok(port[0] > 0 && port[1] > 0, "two brick processes' graphs listen (%d, %d)", port[0],
       port[1]);
    snprintf(text, sizeof(text),
             "volume c0\n type protocol/client\n option remote-host 127.0.0.1\n"
             " option remote-port %d\n option remote-subvolume brick\nend-volume\n"
             "volume c1\n type protocol/client\n option remote-host 127.0.0.1\n"
             " option remote-port %d\n option remote-subvolume brick\nend-volume\n"
             "volume dht\n type cluster/distribute\n subvolumes c0 c1\nend-volume\n",
             port[0], port[1]);
    struct watch w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    char err[512] = "";
    struct bfs_graph *cg = NULL;
    if (port[0] > 0 && port[1] > 0 &&
        bfs_graph_from_text(text, strlen(text), "<client>", cg_proc(), &cg, err,
                            sizeof(err)) == 0) {
        cg->owner = &w;
        cg->on_event = on_event;
        if (bfs_graph_init(cg) < 0) {
            bfs_graph_free(cg);
            cg = NULL;
        } else {
            bfs_graph_activate(cg);
        }
    }
    ok(cg && wait_up(&w, 5000), "a client graph: distribute over two protocol/clients, up");
    if (cg && w.ups) {
        v.g = cg;
        v.top = cg->top;
        v.table = dht_table_canonical(2);
        struct bfs_gfid ng, gs, g;
        int data, links, dirs;
        is_int(dg_mkdir(&v, &bfs_gfid_root, "net", &ng), 0, "mkdir net");
        dg_census(&v, "net", &data, &links, &dirs);
        is_int(dirs, 2, "on both bricks");
        dg_name_on(&v, &ng, "s", 0, s, sizeof(s));
        dg_name_on(&v, &ng, "d", 1, d, sizeof(d));
        is_int(dg_put(&v, &ng, s, "over the wire", &gs), 0, "a file on brick 0");
        is_int(dg_rename(&v, &ng, s, &ng, d), 0, "rename it to a name hashing to brick 1");
        snprintf(rel, sizeof(rel), "net/%s", d);
        ok(dg_placed(&v, rel, 0, 1), "brick 1 has a link file with its linkto set over the wire");
        ok(dg_get(&v, &ng, d, buf, sizeof(buf), &g) == 0 && strcmp(buf, "over the wire") == 0 &&
           bfs_gfid_eq(&g, &gs), "read through the link file");
        test_network_keys(&v, &gs);
        test_two_clients(&v, text);
        is_int(dg_unlink(&v, &ng, d), 0, "unlink");
        ok(dg_placed(&v, rel, -1, -1), "data and link file gone");
        is_int(dg_rmdir(&v, &bfs_gfid_root, "net"), 0, "rmdir net");
        dht_table_free(v.table);
        v.table = NULL;
    }
    if (cg)
        bfs_graph_free(cg);
    for (int i = 0; i < 2; i++)
        if (sg[i])
            bfs_graph_free(sg[i]);
}

int main(void)
{
    plan_lazy();
    if (!cg_can_run())
        return 0;
    if (!ok(dg_init("test_distribute_network") == 0, "process resources"))
        return 1;
    test_network();
    dg_fini();
    return done_testing();
}
