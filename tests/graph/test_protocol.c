/*
 * test_protocol.c — protocol/client and protocol/server across real TCP in
 * one process: a brick graph (storage/posix over a temporary folder ->
 * features/locks -> protocol/server on 127.0.0.1, ephemeral port, port
 * file) and a client graph (protocol/client alone) on the same bfs_proc.
 *
 * Asserts: CHILD_UP after the handshake; lookup, create, write, read,
 * mkdir, opendir/readdir, xattrs and locks cross the wire with the right
 * answers; bad names are refused at the server; fds unknown to the client
 * are refused; many requests in flight at once (an async burst, and
 * several threads) each get their own answer; a refused handshake (wrong
 * brick name) never reports CHILD_UP; stopping the brick fails a pending
 * call and new calls with ENOTCONN promptly and reports CHILD_DOWN;
 * restarting it on the same port brings CHILD_UP back, the fd opened
 * before works again (re-opened) and the lock held before is held again;
 * and a brick that stops answering (its event loop frozen) is declared
 * down after network.ping-timeout; a client with client.invalidations
 * off gets no invalidation while another does, and md-cache refuses to
 * sit over it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "core/event.h"
#include "core/fops-util.h"
#include "core/graph.h"
#include "../lib/cluster-graph.h"
#include "../lib/tap.h"

static struct bfs_proc *proc;
static char tmpdir[64], brickdir[128], portfile[160];

/* ---- events seen by a graph's owner ---- */

struct watch {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int ups, downs, upcalls;
    struct bfs_upcall last;
    char last_name[64];
};

static void on_event(struct bfs_graph *g, enum bfs_event ev, void *data)
{
    struct watch *w = g->owner;
    pthread_mutex_lock(&w->lock);
    if (ev == BFS_EV_CHILD_UP)
        w->ups++;
    if (ev == BFS_EV_CHILD_DOWN)
        w->downs++;
    if (ev == BFS_EV_UPCALL && data) {
        const struct bfs_upcall *up = data;
        w->upcalls++;
        w->last = *up;
        snprintf(w->last_name, sizeof(w->last_name), "%s", up->name ? up->name : "");
        w->last.name = w->last_name;
    }
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

/* Waits until *counter reaches want; returns the milliseconds it took or -1. */
static long wait_count(struct watch *w, int *counter, int want, long ms)
{
    uint64_t t0 = bfs_now_ms();
    pthread_mutex_lock(&w->lock);
    while (*counter < want && (long)(bfs_now_ms() - t0) < ms) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&w->cond, &w->lock, &ts);
    }
    bool ok = *counter >= want;
    pthread_mutex_unlock(&w->lock);
    return ok ? (long)(bfs_now_ms() - t0) : -1;
}

/* ---- graphs ---- */

static struct bfs_graph *start_graph(const char *text, struct bfs_proc *p, struct watch *w)
{
    char err[512] = "";
    struct bfs_graph *g = NULL;
    if (bfs_graph_from_text(text, strlen(text), "<test>", p, &g, err, sizeof(err)) < 0) {
        printf("# graph: %s\n", err);
        return NULL;
    }
    g->owner = w;
    g->on_event = w ? on_event : NULL;
    if (bfs_graph_init(g) < 0) {
        bfs_graph_free(g);
        return NULL;
    }
    bfs_graph_activate(g);
    return g;
}

static void stop_graph(struct bfs_graph *g)
{
    if (!g)
        return;
    struct bfs_xl *top = g->top;
    if (top->mod->notify)
        top->mod->notify(top, BFS_EV_PARENT_DOWN, NULL, NULL);
    bfs_graph_free(g);
}

static struct bfs_graph *start_server_opts(struct bfs_proc *p, int port, const char *extra)
{
    char vf[1024];
    snprintf(vf, sizeof(vf),
             "volume brick-posix\n type storage/posix\n option directory %s\nend-volume\n"
             "volume brick\n type features/locks\n subvolumes brick-posix\nend-volume\n"
             "volume brick-server\n type protocol/server\n"
             " option transport.listen-address 127.0.0.1\n"
             " option transport.listen-port %d\n option transport.port-file %s\n%s"
             " subvolumes brick\nend-volume\n",
             brickdir, port, portfile, extra);
    return start_graph(vf, p, NULL);
}

static struct bfs_graph *start_server(struct bfs_proc *p, int port)
{
    return start_server_opts(p, port, "");
}

#define WATCH_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, {0}, ""}

/* extra: more option lines of the client; above: a graph over it (or ""). */
static struct bfs_graph *start_client_opts(int port, const char *subvol, int ping,
                                           const char *extra, const char *above,
                                           struct watch *w)
{
    char vf[2048];
    snprintf(vf, sizeof(vf),
             "volume c0\n type protocol/client\n option remote-host 127.0.0.1\n"
             " option remote-port %d\n option remote-subvolume %s\n"
             " option network.ping-timeout %d\n option transport.reconnect-delay-max 300\n"
             "%send-volume\n%s",
             port, subvol, ping, extra, above);
    return start_graph(vf, proc, w);
}

static struct bfs_graph *start_client(int port, const char *subvol, int ping, struct watch *w)
{
    return start_client_opts(port, subvol, ping, "", "", w);
}

static int read_port(void)
{
    return cg_read_port(portfile);
}

/* ---- fop helpers (all blocking, on the client graph's top) ---- */

static struct bfs_stack *st;

static int do_lookup(struct bfs_xl *top, const char *name, struct bfs_iatt *attr)
{
    struct bfs_lookup_req q = {.loc = {.pargfid = bfs_gfid_root, .name = name}};
    if (!name)
        q.loc = (struct bfs_loc){.gfid = bfs_gfid_root};
    struct bfs_lookup_rep r;
    int rc = bfs_sync_lookup(top, st, &q, &r);
    if (attr)
        *attr = r.attr;
    bfs_lookup_rep_clear_dup(&r);
    return rc;
}

static int do_create(struct bfs_xl *top, const char *name, struct bfs_fd *fd,
                     struct bfs_iatt *attr)
{
    struct bfs_create_req q = {.loc = {.pargfid = bfs_gfid_root, .name = name}, .fd = fd,
                               .flags = O_RDWR | O_CREAT | O_EXCL, .mode = 0644};
    struct bfs_create_rep r;
    int rc = bfs_sync_create(top, st, &q, &r);
    if (attr)
        *attr = r.attr;
    bfs_create_rep_clear_dup(&r);
    return rc;
}

static int do_write(struct bfs_xl *top, struct bfs_fd *fd, const void *buf, size_t len,
                    uint64_t off)
{
    struct bfs_write_req q = {.fd = fd, .data = {buf, len}, .offset = off};
    struct bfs_write_rep r;
    int rc = bfs_sync_write(top, st, &q, &r);
    bfs_write_rep_clear_dup(&r);
    return rc;
}

/* Reads into buf; returns the byte count or -errno. */
static int do_read(struct bfs_xl *top, struct bfs_fd *fd, void *buf, uint32_t size, uint64_t off)
{
    struct bfs_read_req q = {.fd = fd, .size = size, .offset = off};
    struct bfs_read_rep r;
    int rc = bfs_sync_read(top, st, &q, &r);
    if (rc >= 0) {
        memcpy(buf, r.data.data, r.data.len < size ? r.data.len : size);
        rc = (int)r.data.len;
    }
    bfs_read_rep_clear_dup(&r);
    return rc;
}

static int do_lk(struct bfs_xl *top, struct bfs_fd *fd, uint32_t cmd, uint32_t type,
                 uint64_t owner)
{
    struct bfs_lk_req q = {.fd = fd, .cmd = cmd,
                           .lock = {.type = type, .whence = SEEK_SET, .start = 0, .len = 100,
                                    .pid = 7, .owner = owner}};
    struct bfs_lk_rep r;
    int rc = bfs_sync_lk(top, st, &q, &r);
    bfs_lk_rep_clear_dup(&r);
    return rc;
}

/* ---- an async burst: many reads in flight on one connection ---- */

#define BLK 4096
#define NBLK 64
#define BURST 256

static void fill_block(uint8_t *b, int j)
{
    memset(b, (j * 7 + 1) & 0xff, BLK);
    memcpy(b, &j, sizeof(j));
}

struct burst {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int left, good;
    int cookies[BURST];
};

static void burst_cbk(struct bfs_frame *frame, void *cookie, int rc,
                      const struct bfs_read_rep *rep)
{
    int *slot = cookie;
    struct burst *b = frame->top_arg;
    uint8_t want[BLK];
    fill_block(want, *slot);
    bool ok = rc >= 0 && rep->data.len == BLK && memcmp(rep->data.data, want, BLK) == 0;
    bfs_frame_top_free(frame);
    pthread_mutex_lock(&b->lock);
    b->good += ok;
    b->left--;
    pthread_cond_signal(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

static int run_burst(struct bfs_xl *top, struct bfs_fd *fd)
{
    struct burst b = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
                      .left = BURST};
    for (int k = 0; k < BURST; k++) {
        b.cookies[k] = (k * 37) % NBLK;
        struct bfs_read_req q = {.fd = fd, .size = BLK, .offset = (uint64_t)b.cookies[k] * BLK};
        struct bfs_frame *f = bfs_frame_top_new(st, &b);
        if (!f || bfs_wind_read(f, top, burst_cbk, &b.cookies[k], &q) < 0) {
            bfs_frame_top_free(f);
            pthread_mutex_lock(&b.lock);
            b.left--;
            pthread_mutex_unlock(&b.lock);
        }
    }
    pthread_mutex_lock(&b.lock);
    while (b.left > 0)
        pthread_cond_wait(&b.cond, &b.lock);
    pthread_mutex_unlock(&b.lock);
    return b.good;
}

/* ---- several threads at once ---- */

struct worker {
    struct bfs_xl *top;
    struct bfs_graph *g;
    int idx, good;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char name[32];
    snprintf(name, sizeof(name), "t%d", w->idx);
    struct bfs_fd *fd = bfs_fd_new(w->g, NULL, O_RDWR, 0);
    if (do_create(w->top, name, fd, NULL) == 0) {
        for (int i = 0; i < 50; i++) {
            char out[64], in[64] = "";
            int n = snprintf(out, sizeof(out), "thread %d op %d", w->idx, i);
            int wr = do_write(w->top, fd, out, (size_t)n, (uint64_t)i * 64);
            int rd = do_read(w->top, fd, in, (uint32_t)n, (uint64_t)i * 64);
            w->good += wr >= 0 && rd == n && memcmp(in, out, (size_t)n) == 0;
        }
    }
    bfs_fd_unref(fd);
    return NULL;
}

/* ---- a pending call that the brick never answers (blocked lock) ---- */

struct pending {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    int rc;
};

static void pending_cbk(struct bfs_frame *frame, void *cookie, int rc, const struct bfs_lk_rep *rep)
{
    struct pending *p = cookie;
    (void)rep;
    bfs_frame_top_free(frame);
    pthread_mutex_lock(&p->lock);
    p->done = true;
    p->rc = rc;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

static long wait_pending(struct pending *p, long ms)
{
    uint64_t t0 = bfs_now_ms();
    while (true) {
        pthread_mutex_lock(&p->lock);
        bool done = p->done;
        pthread_mutex_unlock(&p->lock);
        if (done)
            return (long)(bfs_now_ms() - t0);
        if ((long)(bfs_now_ms() - t0) > ms)
            return -1;
        usleep(5000);
    }
}

/* ---- freezing a loop (a brick that stops answering) ---- */

struct freeze {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool frozen, release;
};

static void freeze_task(void *arg)
{
    struct freeze *fz = arg;
    pthread_mutex_lock(&fz->lock);
    fz->frozen = true;
    pthread_cond_broadcast(&fz->cond);
    while (!fz->release)
        pthread_cond_wait(&fz->cond, &fz->lock);
    pthread_mutex_unlock(&fz->lock);
}

/* ---- the test ---- */

static void test_basics(struct bfs_xl *top, struct bfs_graph *cg, struct bfs_fd *fd,
                        struct bfs_iatt *f1)
{
    struct bfs_iatt a;
    is_int(do_lookup(top, NULL, &a), 0, "lookup of the root crosses the wire");
    ok(bfs_gfid_is_root(&a.gfid) && S_ISDIR(a.mode), "root attributes come back");
    is_int(do_create(top, "f1", fd, f1), 0, "create f1 with a new fd");
    ok(!bfs_gfid_is_null(&f1->gfid) && S_ISREG(f1->mode), "create returns a regular file");
    ok(do_write(top, fd, "hello world", 11, 0) >= 0, "write through the new fd");
    char buf[64] = "";
    is_int(do_read(top, fd, buf, sizeof(buf), 0), 11, "read returns 11 bytes");
    ok(memcmp(buf, "hello world", 11) == 0, "read returns what was written");
    struct bfs_rchecksum_req cq = {.fd = fd, .offset = 0, .len = 1 << 20, .block = 4096};
    struct bfs_rchecksum_rep cr;
    is_int(bfs_sync_rchecksum(top, st, &cq, &cr), 1, "rchecksum crosses the wire: 1 block");
    static const uint8_t sha_hello[4] = {0xb9, 0x4d, 0x27, 0xb9}; /* SHA-256("hello world") */
    ok(cr.sums.len == 32 && cr.size == 11 && memcmp(cr.sums.data, sha_hello, 4) == 0,
       "the block's SHA-256 and the file's size");
    bfs_rchecksum_rep_clear_dup(&cr);
    is_int(do_lookup(top, "f1", &a), 0, "lookup f1 by parent and name");
    ok(bfs_gfid_eq(&a.gfid, &f1->gfid) && a.size == 11, "lookup sees f1's gfid and size");
    is_int(do_lookup(top, "nope", NULL), -ENOENT, "lookup of a missing name: ENOENT");

    /* bad names are refused at the server */
    is_int(do_lookup(top, "a/b", NULL), -EINVAL, "name with '/': EINVAL");
    is_int(do_lookup(top, "..", NULL), -EINVAL, "name '..': EINVAL");
    char longname[300];
    memset(longname, 'x', 256);
    longname[256] = 0;
    is_int(do_lookup(top, longname, NULL), -ENAMETOOLONG, "256-byte name: ENAMETOOLONG");

    /* xattrs */
    struct bfs_dict *x = bfs_dict_new();
    bfs_dict_set_str(x, "user.color", "blue");
    struct bfs_setxattr_req sq = {.loc = {.gfid = f1->gfid}, .xattrs = x};
    is_int(bfs_sync_setxattr(top, st, &sq, NULL), 0, "setxattr user.color");
    bfs_dict_unref(x);
    struct bfs_getxattr_req gq = {.loc = {.gfid = f1->gfid}, .name = "user.color"};
    struct bfs_getxattr_rep gr;
    ok(bfs_sync_getxattr(top, st, &gq, &gr) >= 0, "getxattr user.color");
    const void *v = NULL;
    size_t vlen = 0;
    enum bfs_val_type t;
    ok(bfs_dict_get_raw(gr.xattrs, "user.color", &t, &v, &vlen) == 0 && vlen == 4 &&
           memcmp(v, "blue", 4) == 0,
       "getxattr returns the value set");
    bfs_getxattr_rep_clear_dup(&gr);

    /* directories */
    struct bfs_mkdir_req mq = {.loc = {.pargfid = bfs_gfid_root, .name = "d1"}, .mode = 0755};
    is_int(bfs_sync_mkdir(top, st, &mq, NULL), 0, "mkdir d1");
    struct bfs_fd *dfd = bfs_fd_new(cg, NULL, O_RDONLY, 1);
    struct bfs_opendir_req oq = {.loc = {.gfid = bfs_gfid_root}, .fd = dfd};
    is_int(bfs_sync_opendir(top, st, &oq, NULL), 0, "opendir the root");
    struct bfs_readdir_req rq = {.fd = dfd, .size = 65536};
    struct bfs_readdir_rep rr;
    ok(bfs_sync_readdir(top, st, &rq, &rr) >= 0, "readdir the root");
    bool f1_seen = false, d1_seen = false, hidden = false;
    for (uint32_t i = 0; i < rr.entries.count; i++) {
        f1_seen |= strcmp(rr.entries.v[i].name, "f1") == 0;
        d1_seen |= strcmp(rr.entries.v[i].name, "d1") == 0;
        hidden |= strcmp(rr.entries.v[i].name, ".brickfs") == 0;
    }
    ok(f1_seen && d1_seen && !hidden, "readdir lists f1 and d1, not .brickfs");
    bfs_readdir_rep_clear_dup(&rr);
    bfs_fd_unref(dfd); /* RELEASEDIR goes to the brick */

    /* an fd the client never opened */
    struct bfs_fd *stray = bfs_fd_new(cg, NULL, O_RDONLY, 0);
    struct bfs_fstat_req fq = {.fd = stray};
    is_int(bfs_sync_fstat(top, st, &fq, NULL), -EBADF, "fstat of an fd never opened: EBADF");
    bfs_fd_unref(stray);
}

/* A client cannot claim to be a brick-side translator: protocol/server
 * strips xdata "brickfs-internal", so trusted.brickfs.* stays hidden. */
static void test_internal_key(struct bfs_xl *top, struct bfs_graph *sg, const struct bfs_gfid *g)
{
    struct bfs_dict *xd = bfs_dict_new();
    bfs_dict_set_int(xd, "brickfs-internal", 1);
    struct bfs_getxattr_req q = {.loc = {.gfid = *g}, .name = "trusted.brickfs.gfid",
                                 .xdata = xd};
    int direct = bfs_sync_getxattr(FIRST_CHILD(sg->top), st, &q, NULL);
    ok(direct >= 0, "inside the brick, brickfs-internal reads trusted.brickfs.gfid (%d)", direct);
    is_int(bfs_sync_getxattr(top, st, &q, NULL), -ENODATA,
           "from a client the key is stripped: ENODATA");
    bfs_dict_unref(xd);
}

/* mknod as distribute makes a link file: the linkto in its xdata, set by
 * the brick with the new entry and said in the reply. Only a root caller's
 * mknod keeps brickfs-internal for it, and only trusted.brickfs.dht.* keys
 * are set that way. */
static int mknod_x(struct bfs_xl *top, struct bfs_stack *who, const struct bfs_gfid *par,
                   const char *name, const char *key, bool *said)
{
    struct bfs_dict *xd = bfs_dict_new();
    bfs_dict_set_int(xd, "brickfs-internal", 1);
    bfs_dict_set_bin(xd, key, "brick-9", 7);
    struct bfs_mknod_req q = {.loc = {.pargfid = *par, .name = name},
                              .mode = S_IFREG | S_ISVTX, .xdata = xd};
    struct bfs_mknod_rep rep;
    int rc = bfs_sync_mknod(top, who, &q, &rep);
    int64_t v = 0;
    *said = rc >= 0 && bfs_dict_get_int(rep.xdata, BFS_XDATA_ENTRY_XATTRS, &v) == 0 && v == 1;
    if (rc >= 0)
        bfs_mknod_rep_clear_dup(&rep);
    bfs_dict_unref(xd);
    return rc;
}

/* The value of key on the brick's copy of name ("" when absent). */
static const char *on_brick(const char *name, const char *key)
{
    static char v[64];
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", brickdir, name);
    ssize_t n = lgetxattr(path, key, v, sizeof(v) - 1);
    v[n > 0 ? n : 0] = 0;
    return v;
}

static void test_entry_xattrs(struct bfs_xl *top)
{
    const char *linkto = "trusted.brickfs.dht.linkto";
    bool said;
    is_int(mknod_x(top, st, &bfs_gfid_root, "lf-root", linkto, &said), 0,
           "root's mknod with a linkto");
    ok(said, "the reply says the brick set it");
    is_str(on_brick("lf-root", linkto), "brick-9", "the new entry carries it");

    struct bfs_mkdir_req mq = {.loc = {.pargfid = bfs_gfid_root, .name = "open"},
                               .mode = 0777};
    struct bfs_mkdir_rep mr;
    is_int(bfs_sync_mkdir(top, st, &mq, &mr), 0, "a folder anyone may write");
    struct bfs_stack *user = bfs_stack_new();
    user->uid = user->gid = 1000;
    is_int(mknod_x(top, user, &mr.attr.gfid, "lf-user", linkto, &said), 0,
           "an unprivileged caller's mknod with a linkto");
    ok(!said && !*on_brick("open/lf-user", linkto), "is not given it (internal stripped)");
    bfs_stack_unref(user);
    bfs_mkdir_rep_clear_dup(&mr);

    is_int(mknod_x(top, st, &bfs_gfid_root, "lf-gfid", "trusted.brickfs.gfid", &said), 0,
           "root's mknod giving another internal key");
    ok(!said && strcmp(on_brick("lf-gfid", "trusted.brickfs.gfid"), "brick-9") != 0,
       "is not given it (only distribute's keys are)");
}

static void test_pipelining(struct bfs_xl *top, struct bfs_graph *cg)
{
    struct bfs_fd *fd = bfs_fd_new(cg, NULL, O_RDWR, 0);
    is_int(do_create(top, "blocks", fd, NULL), 0, "create the burst file");
    uint8_t b[BLK];
    int wrote = 0;
    for (int j = 0; j < NBLK; j++) {
        fill_block(b, j);
        wrote += do_write(top, fd, b, BLK, (uint64_t)j * BLK) >= 0;
    }
    is_int(wrote, NBLK, "64 blocks written");
    uint64_t t0 = bfs_now_ms();
    is_int(run_burst(top, fd), BURST, "256 reads in flight at once each get their own block");
    printf("# burst of %d reads took %llu ms\n", BURST, (unsigned long long)(bfs_now_ms() - t0));
    bfs_fd_unref(fd);

    struct worker w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){.top = top, .g = cg, .idx = i};
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    int good = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        good += w[i].good;
    }
    is_int(good, 200, "4 threads x 50 write+read pairs all answered correctly");
}

static void test_wrong_brick(int port)
{
    struct watch w = WATCH_INIT;
    struct bfs_graph *g = start_client(port, "no-such-brick", 5, &w);
    ok(g != NULL, "a client for a brick name the server does not export starts");
    ok(wait_count(&w, &w.downs, 1, 5000) >= 0, "its refused handshake reports CHILD_DOWN");
    ok(w.ups == 0, "and never CHILD_UP");
    if (g)
        is_int(do_lookup(g->top, NULL, NULL), -ENOTCONN, "its fops fail with ENOTCONN");
    stop_graph(g);
}

/* Stop the brick with a lock request blocked in it, then restart it. */
static void test_restart(struct bfs_graph **sg, int port, struct bfs_xl *top, struct watch *w,
                         struct bfs_fd *fd)
{
    is_int(do_lk(top, fd, BFS_LK_SETLK, F_WRLCK, 0xA), 0, "owner A locks [0,100)");
    is_int(do_lk(top, fd, BFS_LK_SETLK, F_WRLCK, 0xB), -EAGAIN, "owner B conflicts: EAGAIN");

    struct pending p = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0};
    struct bfs_lk_req q = {.fd = fd, .cmd = BFS_LK_SETLKW,
                           .lock = {.type = F_WRLCK, .start = 0, .len = 100, .owner = 0xB}};
    struct bfs_frame *f = bfs_frame_top_new(st, NULL);
    is_int(bfs_wind_lk(f, top, pending_cbk, &p, &q), 0, "owner B's SETLKW is sent");
    usleep(200 * 1000);
    ok(!p.done, "and stays blocked in the brick");

    int downs = w->downs;
    stop_graph(*sg);
    *sg = NULL;
    long ms = wait_pending(&p, 3000);
    ok(ms >= 0, "stopping the brick answers the pending call (%ld ms)", ms);
    is_int(p.rc, -ENOTCONN, "with ENOTCONN");
    ok(wait_count(w, &w->downs, downs + 1, 3000) >= 0, "CHILD_DOWN is reported");
    uint64_t t0 = bfs_now_ms();
    is_int(do_lookup(top, NULL, NULL), -ENOTCONN, "a new call fails with ENOTCONN");
    ok(bfs_now_ms() - t0 < 100, "at once");

    int ups = w->ups;
    *sg = start_server(proc, port);
    ok(*sg != NULL, "the brick restarts on the same port %d", port);
    ms = wait_count(w, &w->ups, ups + 1, 10000);
    ok(ms >= 0, "the client reconnects: CHILD_UP (%ld ms)", ms);
    char buf[64] = "";
    is_int(do_read(top, fd, buf, sizeof(buf), 0), 11, "the fd opened before works again");
    ok(memcmp(buf, "hello world", 11) == 0, "and reads the file's data");
    is_int(do_lk(top, fd, BFS_LK_SETLK, F_WRLCK, 0xB), -EAGAIN,
           "owner A's lock was re-taken: owner B still conflicts");
    is_int(do_lk(top, fd, BFS_LK_SETLK, F_UNLCK, 0xA), 0, "owner A unlocks");
    is_int(do_lk(top, fd, BFS_LK_SETLK, F_WRLCK, 0xB), 0, "now owner B gets the lock");
    is_int(do_lk(top, fd, BFS_LK_SETLK, F_UNLCK, 0xB), 0, "owner B unlocks");
}

/* An upcall raised below protocol/server reaches the client graph's owner. */
static void test_upcall(struct bfs_graph *sg, struct watch *w, const struct bfs_gfid *g)
{
    struct bfs_xl *srv = sg->top;
    struct bfs_upcall up = {.kind = 2, .gfid = *g, .pargfid = bfs_gfid_root, .name = "f1"};
    int before = w->upcalls;
    srv->mod->notify(srv, BFS_EV_UPCALL, FIRST_CHILD(srv), &up);
    ok(wait_count(w, &w->upcalls, before + 1, 3000) >= 0, "a server upcall reaches the client");
    pthread_mutex_lock(&w->lock);
    ok(w->last.kind == 2 && bfs_gfid_eq(&w->last.gfid, g) &&
           bfs_gfid_is_root(&w->last.pargfid) && strcmp(w->last_name, "f1") == 0,
       "with its kind, gfids and name");
    pthread_mutex_unlock(&w->lock);
}

/* A client with client.invalidations off (the self-heal daemon's graph)
 * gets no invalidation while the other client still does; md-cache is
 * refused over such a client. */
static void test_no_invalidations(struct bfs_graph *sg, int port, struct watch *w,
                                  const struct bfs_gfid *g)
{
    struct watch w2 = WATCH_INIT;
    struct bfs_graph *q = start_client_opts(port, "brick", 5,
                                            " option client.invalidations off\n", "", &w2);
    ok(q != NULL, "a client with client.invalidations off starts");
    ok(q && wait_count(&w2, &w2.ups, 1, 5000) >= 0, "and its handshake is accepted");
    if (!q || w2.ups < 1) {
        stop_graph(q);
        return;
    }
    struct bfs_xl *srv = sg->top;
    struct bfs_upcall inode = {.kind = BFS_UPCALL_INODE, .gfid = *g};
    struct bfs_upcall entry = {.kind = BFS_UPCALL_ENTRY, .gfid = *g, .pargfid = bfs_gfid_root,
                               .name = "f1"};
    int before = w->upcalls;
    srv->mod->notify(srv, BFS_EV_UPCALL, FIRST_CHILD(srv), &inode);
    srv->mod->notify(srv, BFS_EV_UPCALL, FIRST_CHILD(srv), &entry);
    ok(wait_count(w, &w->upcalls, before + 2, 3000) >= 0,
       "the other client receives both invalidations");
    /* the broadcast queued whatever it sent on every connection before
     * returning, so a reply the quiet client reads now comes after it */
    is_int(do_lookup(q->top, NULL, NULL), 0, "a round trip on the quiet client's connection");
    pthread_mutex_lock(&w2.lock);
    is_int(w2.upcalls, 0, "the client with client.invalidations off received none");
    pthread_mutex_unlock(&w2.lock);
    stop_graph(q);

    struct bfs_graph *m = start_client_opts(
        port, "brick", 5, " option client.invalidations off\n",
        "volume mdc\n type performance/md-cache\n subvolumes c0\nend-volume\n", NULL);
    ok(m == NULL, "performance/md-cache over a client with client.invalidations off is refused");
    stop_graph(m);
    m = start_client_opts(port, "brick", 5, "",
                          "volume mdc\n type performance/md-cache\n subvolumes c0\nend-volume\n",
                          NULL);
    ok(m != NULL, "and accepted over a client that takes them");
    stop_graph(m);
}

/* auth.allow / auth.reject decide at the handshake. */
static void test_auth(void)
{
    static const struct {
        const char *opts;
        bool up;
        const char *what;
    } cases[] = {
        {" option auth.reject 127.0.0.1\n", false, "auth.reject 127.0.0.1 refuses us"},
        {" option auth.allow 10.0.0.0/8,192.168.*\n", false, "an auth.allow without us refuses"},
        {" option auth.allow 127.0.0.0/8\n option auth.reject 127.0.0.1\n", false,
         "auth.reject wins over auth.allow"},
        {" option auth.allow 10.1.1.1, 127.0.0.*\n option auth.reject 10.1.1.1\n", true,
         "a glob in auth.allow lets us in"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct bfs_graph *sg = start_server_opts(proc, 0, cases[i].opts);
        int port = read_port();
        struct watch w = WATCH_INIT;
        struct bfs_graph *cg = sg ? start_client(port, "brick", 5, &w) : NULL;
        if (cases[i].up)
            ok(wait_count(&w, &w.ups, 1, 5000) >= 0, "%s", cases[i].what);
        else
            ok(wait_count(&w, &w.downs, 1, 5000) >= 0 && w.ups == 0, "%s", cases[i].what);
        stop_graph(cg);
        stop_graph(sg);
    }
}

/* A connection that never says SETVOLUME is closed after the timeout. */
static void test_handshake_timeout(void)
{
    struct bfs_graph *sg = start_server_opts(proc, 0, " option server.handshake-timeout 1\n");
    int port = read_port();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ok(sg && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "a silent client connects");
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    uint64_t t0 = bfs_now_ms();
    char c;
    ssize_t n = recv(fd, &c, 1, 0);
    long ms = (long)(bfs_now_ms() - t0);
    ok(n == 0 || (n < 0 && errno == ECONNRESET), "the brick hangs up on it (%ld ms)", ms);
    ok(ms >= 700 && ms < 4000, "after server.handshake-timeout");
    close(fd);
    stop_graph(sg);
}

/* A brick on its own process resources whose loop we freeze. */
static void test_ping_timeout(void)
{
    struct bfs_proc *p2 = bfs_proc_new("test-brick2", 2);
    struct bfs_graph *sg = start_server(p2, 0);
    int port = read_port();
    ok(sg && port > 0, "a second brick listens on port %d", port);
    struct watch w = WATCH_INIT;
    struct bfs_graph *cg = start_client(port, "brick", 1, &w);
    ok(wait_count(&w, &w.ups, 1, 5000) >= 0, "a client with network.ping-timeout 1 is up");

    struct freeze fz = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};
    bfs_loop_post(p2->loop, freeze_task, &fz);
    long ms = wait_count(&w, &w.downs, 1, 5000);
    ok(ms >= 0, "the silent brick is declared down (%ld ms)", ms);
    ok(ms >= 500, "not before the ping timeout");
    if (cg)
        is_int(do_lookup(cg->top, NULL, NULL), -ENOTCONN, "fops fail with ENOTCONN meanwhile");
    pthread_mutex_lock(&fz.lock);
    fz.release = true;
    pthread_cond_broadcast(&fz.cond);
    pthread_mutex_unlock(&fz.lock);
    ok(wait_count(&w, &w.ups, 2, 10000) >= 0, "once it answers again the client is back up");
    if (cg)
        is_int(do_lookup(cg->top, NULL, NULL), 0, "and its fops work");
    stop_graph(cg);
    stop_graph(sg);
    bfs_proc_free(p2);
}

int main(void)
{
    plan_lazy();
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/bfs-proto-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("1..0 # SKIP cannot make a temporary folder\n");
        return 0;
    }
    snprintf(brickdir, sizeof(brickdir), "%s/brick", tmpdir);
    snprintf(portfile, sizeof(portfile), "%s/port", tmpdir);
    mkdir(brickdir, 0755);
    proc = bfs_proc_new("test_protocol", 4);
    st = bfs_stack_new();

    struct bfs_graph *sg = start_server(proc, 0);
    ok(sg != NULL, "the brick graph starts");
    int port = read_port();
    ok(port > 0, "the port file names the bound port (%d)", port);

    struct watch w = WATCH_INIT;
    struct bfs_graph *cg = start_client(port, "brick", 5, &w);
    ok(cg != NULL, "the client graph starts");
    ok(wait_count(&w, &w.ups, 1, 5000) >= 0, "CHILD_UP after the handshake");
    if (!sg || !cg || w.ups < 1) {
        stop_graph(cg);
        stop_graph(sg);
        return done_testing();
    }
    struct bfs_xl *top = cg->top;
    struct bfs_fd *fd = bfs_fd_new(cg, NULL, O_RDWR, 0);
    struct bfs_iatt f1;
    test_basics(top, cg, fd, &f1);
    test_internal_key(top, sg, &f1.gfid);
    test_entry_xattrs(top);
    test_pipelining(top, cg);
    test_wrong_brick(port);
    test_restart(&sg, port, top, &w, fd);
    if (sg)
        test_upcall(sg, &w, &f1.gfid);
    if (sg)
        test_no_invalidations(sg, port, &w, &f1.gfid);

    char *dump = top->mod->dump(top);
    ok(dump && strstr(dump, "\"state\":\"up\""), "the client's dump says up");
    free(dump);
    dump = sg ? sg->top->mod->dump(sg->top) : NULL;
    ok(dump && strstr(dump, "\"handshaken\":true"), "the server's dump lists the client");
    free(dump);

    bfs_fd_unref(fd);
    stop_graph(cg);
    stop_graph(sg);
    ok(access(portfile, F_OK) != 0, "a stopped brick removes its port file");

    test_auth();
    test_handshake_timeout();
    test_ping_timeout();

    bfs_stack_unref(st);
    bfs_proc_free(proc);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", tmpdir);
    return done_testing();
}
