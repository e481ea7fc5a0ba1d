/*
 * test_locks.c — features/locks over storage/memory: POSIX byte-range locks
 * (conflicts, GETLK, split and merge, blocking waits), flock, flush and
 * release, inodelk domains, entrylk, leases, and what happens to locks and
 * waiters when a client connection goes away (BFS_EV_CLIENT_GONE), and
 * while it is closing (BFS_EV_CLIENT_CLOSING: its calls still running).
 *
 * Two "clients" are two stacks with different stack->client pointers, as
 * protocol/server would give two connections. Blocking requests are wound
 * asynchronously and observed through their callbacks.
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../lib/tap.h"
#include "core/event.h"
#include "core/fops-util.h"
#include "core/graph.h"

static const char VOLFILE[] = "volume mem\n"
                              "    type storage/memory\n"
                              "end-volume\n"
                              "volume locks\n"
                              "    type features/locks\n"
                              "    subvolumes mem\n"
                              "end-volume\n";

static struct bfs_graph *graph;
static struct bfs_xl *top;
static int client_a, client_b, client_c; /* their addresses are the client ids */

static struct bfs_stack *stack_for(void *client, uint64_t lk_owner)
{
    struct bfs_stack *st = bfs_stack_new();
    st->client = client;
    st->lk_owner = lk_owner;
    st->pid = 100;
    return st;
}

/* ---- an asynchronous call whose answer the test waits for ---- */

struct pending {
    pthread_mutex_t m;
    pthread_cond_t c;
    bool done;
    int rc;
    struct bfs_flock lock;
    struct bfs_frame *frame;
};

static void pending_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    struct pending *p = cookie;
    (void)frame;
    pthread_mutex_lock(&p->m);
    p->rc = rc;
    if (fop == BFS_FOP_LK)
        p->lock = ((const struct bfs_lk_rep *)rep)->lock;
    p->done = true;
    pthread_cond_broadcast(&p->c);
    pthread_mutex_unlock(&p->m);
}

static struct pending *start(int fop, struct bfs_stack *st, const void *req)
{
    struct pending *p = calloc(1, sizeof(*p));
    pthread_mutex_init(&p->m, NULL);
    pthread_cond_init(&p->c, NULL);
    p->frame = bfs_frame_top_new(st, NULL);
    int rc = bfs_wind_any(fop, p->frame, top, pending_cbk, p, req);
    if (rc < 0) {
        p->rc = rc;
        p->done = true;
    }
    return p;
}

/* Waits up to ms for the answer; true if it came. */
static bool wait_for(struct pending *p, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&p->m);
    while (!p->done && pthread_cond_timedwait(&p->c, &p->m, &ts) == 0)
        ;
    bool done = p->done;
    pthread_mutex_unlock(&p->m);
    return done;
}

static bool is_done(struct pending *p)
{
    pthread_mutex_lock(&p->m);
    bool done = p->done;
    pthread_mutex_unlock(&p->m);
    return done;
}

static void pending_free(struct pending *p)
{
    bfs_frame_top_free(p->frame);
    pthread_mutex_destroy(&p->m);
    pthread_cond_destroy(&p->c);
    free(p);
}

/* ---- requests ---- */

static struct bfs_lk_req lk_req(struct bfs_fd *fd, uint32_t cmd, uint32_t type, uint64_t start,
                                uint64_t len, uint64_t owner)
{
    struct bfs_lk_req r = {.fd = fd, .cmd = cmd};
    r.lock = (struct bfs_flock){.type = type, .whence = SEEK_SET, .start = start, .len = len,
                                .pid = 42, .owner = owner};
    return r;
}

static int lk(struct bfs_stack *st, struct bfs_fd *fd, uint32_t cmd, uint32_t type,
              uint64_t start, uint64_t len, uint64_t owner, struct bfs_flock *out)
{
    struct bfs_lk_req req = lk_req(fd, cmd, type, start, len, owner);
    struct bfs_lk_rep rep;
    int rc = bfs_sync_lk(top, st, &req, &rep);
    if (out)
        *out = rep.lock;
    bfs_lk_rep_clear_dup(&rep);
    return rc;
}

static struct bfs_inodelk_req ilk_req(const char *dom, const struct bfs_gfid *g, uint32_t cmd,
                                      uint32_t type, uint64_t start, uint64_t len)
{
    struct bfs_inodelk_req r = {.domain = dom, .cmd = cmd};
    r.loc.gfid = *g;
    r.lock = (struct bfs_flock){.type = type, .whence = SEEK_SET, .start = start, .len = len};
    return r;
}

static int inodelk(struct bfs_stack *st, const char *dom, const struct bfs_gfid *g, uint32_t cmd,
                   uint32_t type, uint64_t start, uint64_t len)
{
    struct bfs_inodelk_req req = ilk_req(dom, g, cmd, type, start, len);
    return bfs_sync_inodelk(top, st, &req, NULL);
}

static struct bfs_entrylk_req elk_req(const char *dom, const char *name, uint32_t cmd,
                                      uint32_t type)
{
    struct bfs_entrylk_req r = {.domain = dom, .basename = name, .cmd = cmd, .type = type};
    r.loc.gfid = bfs_gfid_root;
    return r;
}

static int entrylk(struct bfs_stack *st, const char *dom, const char *name, uint32_t cmd,
                   uint32_t type)
{
    struct bfs_entrylk_req req = elk_req(dom, name, cmd, type);
    return bfs_sync_entrylk(top, st, &req, NULL);
}

/* Creates /name in the memory store and returns an fd on it. */
static struct bfs_fd *create_file(struct bfs_stack *st, const char *name, struct bfs_gfid *g)
{
    bfs_gfid_generate(g);
    struct bfs_inode *ino = bfs_inode_get(graph->itable, g, S_IFREG);
    struct bfs_fd *fd = bfs_fd_new(graph, ino, O_RDWR, 0);
    bfs_inode_unref(ino);
    struct bfs_create_req req = {.fd = fd, .flags = O_RDWR | O_CREAT, .mode = 0644};
    req.loc.pargfid = bfs_gfid_root;
    req.loc.name = name;
    req.xdata = bfs_dict_new();
    bfs_dict_set_bin(req.xdata, "gfid-req", g->b, 16);
    int rc = bfs_sync_create(top, st, &req, NULL);
    bfs_dict_unref(req.xdata);
    return rc == 0 ? fd : NULL;
}

static struct bfs_fd *open_fd(const struct bfs_gfid *g)
{
    struct bfs_inode *ino = bfs_inode_get(graph->itable, g, S_IFREG);
    struct bfs_fd *fd = bfs_fd_new(graph, ino, O_RDWR, 0);
    bfs_inode_unref(ino);
    return fd;
}

static json_object *dump_inode(const struct bfs_gfid *g)
{
    char *text = top->mod->dump(top), s[BFS_GFID_STRLEN];
    json_object *root = json_tokener_parse(text), *inodes, *found = NULL;
    free(text);
    if (!root || !json_object_object_get_ex(root, "inodes", &inodes))
        return NULL;
    bfs_gfid_fmt(g, s);
    for (size_t i = 0; i < json_object_array_length(inodes); i++) {
        json_object *o = json_object_array_get_idx(inodes, i), *gj;
        if (json_object_object_get_ex(o, "gfid", &gj) &&
            strcmp(json_object_get_string(gj), s) == 0)
            found = json_object_get(o);
    }
    json_object_put(root);
    return found;
}

static size_t dump_count(const struct bfs_gfid *g, const char *list)
{
    json_object *o = dump_inode(g), *a;
    size_t n = o && json_object_object_get_ex(o, list, &a) ? json_object_array_length(a) : 0;
    json_object_put(o);
    return n;
}

/* ---- tests ---- */

static void test_posix_conflicts(struct bfs_stack *a, struct bfs_stack *b, struct bfs_fd *fda,
                                 struct bfs_fd *fdb, const struct bfs_gfid *g)
{
    struct bfs_flock out;
    is_int(lk(a, fda, BFS_LK_SETLK, F_WRLCK, 0, 100, 1, NULL), 0, "A write-locks [0,100)");
    is_int(lk(b, fdb, BFS_LK_SETLK, F_WRLCK, 50, 10, 1, NULL), -EAGAIN,
           "B conflicting SETLK -> EAGAIN (same owner number, other client)");
    is_int(lk(b, fdb, BFS_LK_SETLK, F_RDLCK, 200, 10, 2, NULL), 0, "B locks a free range");
    is_int(lk(a, fda, BFS_LK_SETLK, F_WRLCK, 0, 10, 3, NULL), -EAGAIN,
           "same client, another owner conflicts too");

    is_int(lk(b, fdb, BFS_LK_GETLK, F_WRLCK, 0, 10, 2, &out), 0, "B GETLK succeeds");
    is_int(out.type, F_WRLCK, "GETLK reports the holder's type");
    ok(out.start == 0 && out.len == 100 && out.owner == 1 && out.pid == 42,
       "GETLK reports the holder's range, owner and pid");
    is_int(lk(a, fda, BFS_LK_GETLK, F_WRLCK, 0, 10, 1, &out), 0, "A GETLK over its own lock");
    is_int(out.type, F_UNLCK, "own locks never conflict: F_UNLCK");

    /* unlock the middle: [0,40) and [60,100) remain */
    is_int(lk(a, fda, BFS_LK_SETLK, F_UNLCK, 40, 20, 1, NULL), 0, "A unlocks [40,60)");
    is_int(lk(b, fdb, BFS_LK_SETLK, F_WRLCK, 45, 10, 2, NULL), 0, "B locks inside the hole");
    lk(b, fdb, BFS_LK_GETLK, F_WRLCK, 0, 1, 9, &out);
    ok(out.type == F_WRLCK && out.start == 0 && out.len == 40, "left piece is [0,40)");
    lk(b, fdb, BFS_LK_GETLK, F_WRLCK, 99, 1, 9, &out);
    ok(out.type == F_WRLCK && out.start == 60 && out.len == 40, "right piece is [60,100)");
    is_int(dump_count(g, "posix"), 4, "dump lists 2 locks of A and 2 of B");

    /* merge: two adjacent read locks become one */
    lk(a, fda, BFS_LK_SETLK, F_RDLCK, 100, 10, 1, NULL);
    lk(a, fda, BFS_LK_SETLK, F_RDLCK, 110, 10, 1, NULL);
    lk(b, fdb, BFS_LK_GETLK, F_WRLCK, 100, 20, 9, &out);
    ok(out.type == F_RDLCK && out.start == 100 && out.len == 20,
       "adjacent read locks merged into [100,120)");
    /* retype part of a lock: read [100,120) -> write [105,110) splits it */
    is_int(lk(a, fda, BFS_LK_SETLK, F_WRLCK, 105, 5, 1, NULL), 0, "A upgrades [105,110)");
    lk(b, fdb, BFS_LK_GETLK, F_RDLCK, 100, 20, 9, &out);
    ok(out.type == F_WRLCK && out.start == 105 && out.len == 5, "only [105,110) is a write lock");
    is_int(lk(b, fdb, BFS_LK_SETLK, F_RDLCK, 100, 5, 9, NULL), 0,
           "B shares the read piece left of it");
    lk(b, fdb, BFS_LK_SETLK, F_UNLCK, 0, 0, 9, NULL);
    lk(a, fda, BFS_LK_SETLK, F_UNLCK, 100, 20, 1, NULL);
    is_int(lk(a, fda, BFS_LK_SETLK, F_WRLCK, 0, 0, 1, NULL), -EAGAIN,
           "A cannot take the whole file while B holds ranges");
}

static void test_posix_blocking(struct bfs_stack *a, struct bfs_stack *b, struct bfs_fd *fda,
                                struct bfs_fd *fdb)
{
    struct bfs_lk_req req = lk_req(fdb, BFS_LK_SETLKW, F_WRLCK, 0, 10, 2);
    struct pending *p = start(BFS_FOP_LK, b, &req);
    ok(!wait_for(p, 100), "B SETLKW over A's lock waits");
    is_int(lk(a, fda, BFS_LK_SETLK, F_UNLCK, 0, 40, 1, NULL), 0, "A unlocks [0,40)");
    ok(wait_for(p, 2000), "B's waiting lock is granted on A's unlock");
    is_int(p->rc, 0, "granted with rc 0");
    ok(p->lock.start == 0 && p->lock.len == 10 && p->lock.type == F_WRLCK,
       "the reply carries the granted lock");
    pending_free(p);
    is_int(lk(a, fda, BFS_LK_SETLK, F_RDLCK, 5, 1, 1, NULL), -EAGAIN, "B now holds [0,10)");
    /* clean slate for the following tests */
    lk(a, fda, BFS_LK_SETLK, F_UNLCK, 0, 0, 1, NULL);
    lk(b, fdb, BFS_LK_SETLK, F_UNLCK, 0, 0, 2, NULL);
    is_int(lk(a, fda, BFS_LK_SETLK, F_WRLCK, 0, 0, 1, NULL), 0, "all clear: A locks everything");
    lk(a, fda, BFS_LK_SETLK, F_UNLCK, 0, 0, 1, NULL);
}

static void test_flock_flush_release(struct bfs_stack *a, struct bfs_stack *b,
                                     const struct bfs_gfid *g)
{
    struct bfs_fd *f1 = open_fd(g), *f2 = open_fd(g), *f3 = open_fd(g);
    uint32_t FL = BFS_LK_FLOCK;
    is_int(lk(a, f1, BFS_LK_SETLK | FL, F_WRLCK, 0, 0, 0, NULL), 0, "flock LOCK_EX on fd1");
    is_int(lk(b, f2, BFS_LK_SETLK | FL, F_RDLCK, 0, 0, 0, NULL), -EAGAIN,
           "flock LOCK_SH|LOCK_NB on fd2 -> EAGAIN");
    is_int(lk(a, f3, BFS_LK_SETLK | FL, F_RDLCK, 0, 0, 0, NULL), -EAGAIN,
           "flock owners are fds: another fd of the same client conflicts");
    is_int(lk(b, f2, BFS_LK_SETLK, F_WRLCK, 0, 0, 7, NULL), 0,
           "flock and POSIX locks do not interact");
    lk(b, f2, BFS_LK_SETLK, F_UNLCK, 0, 0, 7, NULL);

    struct bfs_lk_req req = lk_req(f2, BFS_LK_SETLKW | FL, F_RDLCK, 0, 0, 0);
    struct pending *p = start(BFS_FOP_LK, b, &req);
    ok(!wait_for(p, 50), "blocking flock waits");
    is_int(lk(a, f1, BFS_LK_SETLK | FL, F_UNLCK, 0, 0, 0, NULL), 0, "flock LOCK_UN on fd1");
    ok(wait_for(p, 2000) && p->rc == 0, "the waiting flock is granted");
    pending_free(p);
    is_int(lk(a, f3, BFS_LK_SETLK | FL, F_RDLCK, 0, 0, 0, NULL), 0, "shared flocks coexist");

    /* release: the last unref of fd2 drops its flock */
    bfs_fd_unref(f2);
    is_int(lk(a, f1, BFS_LK_SETLK | FL, F_WRLCK, 0, 0, 0, NULL), -EAGAIN,
           "fd3 still holds its shared flock");
    bfs_fd_unref(f3);
    is_int(lk(a, f1, BFS_LK_SETLK | FL, F_WRLCK, 0, 0, 0, NULL), 0,
           "after fd2 and fd3 are released, fd1 gets LOCK_EX");
    lk(a, f1, BFS_LK_SETLK | FL, F_UNLCK, 0, 0, 0, NULL);

    /* flush drops every POSIX lock of its lock owner, as close(2) does */
    struct bfs_stack *a5 = stack_for(&client_a, 5);
    is_int(lk(a5, f1, BFS_LK_SETLK, F_WRLCK, 1000, 10, 5, NULL), 0, "owner 5 locks [1000,1010)");
    lk(a5, f1, BFS_LK_SETLK, F_WRLCK, 2000, 10, 5, NULL);
    is_int(lk(b, f1, BFS_LK_SETLK, F_WRLCK, 1000, 10, 8, NULL), -EAGAIN, "B is kept out");
    struct bfs_flush_req fl = {.fd = f1};
    is_int(bfs_sync_flush(top, a5, &fl, NULL), 0, "flush by owner 5 passes down and succeeds");
    is_int(lk(b, f1, BFS_LK_SETLK, F_WRLCK, 1000, 1010, 8, NULL), 0,
           "after flush, both of owner 5's ranges are free");
    lk(b, f1, BFS_LK_SETLK, F_UNLCK, 0, 0, 8, NULL);
    bfs_stack_unref(a5);
    bfs_fd_unref(f1);
}

static void test_inodelk(struct bfs_stack *a, struct bfs_stack *b, const struct bfs_gfid *g)
{
    is_int(inodelk(a, "dom1", g, BFS_LK_SETLK, F_WRLCK, 0, 0), 0, "A inodelk dom1 whole file");
    is_int(inodelk(b, "dom1", g, BFS_LK_SETLK, F_WRLCK, 10, 10), -EAGAIN, "B conflicts in dom1");
    is_int(inodelk(b, "dom1", g, BFS_LK_GETLK, F_RDLCK, 10, 10), -EAGAIN,
           "inodelk GETLK says EAGAIN when not grantable");
    is_int(inodelk(b, "dom2", g, BFS_LK_SETLK, F_WRLCK, 0, 0), 0, "dom2 is independent");
    struct bfs_stack *b2 = stack_for(&client_b, 77);
    is_int(inodelk(b2, "dom2", g, BFS_LK_SETLK, F_RDLCK, 0, 1), -EAGAIN,
           "inodelk owner is (client, lk_owner): B's other owner conflicts");
    bfs_stack_unref(b2);
    is_int(inodelk(a, "dom1", g, BFS_LK_SETLK, F_UNLCK, 0, 5), -EINVAL,
           "unlock must name a held lock exactly");

    struct bfs_inodelk_req req = ilk_req("dom1", g, BFS_LK_SETLKW, F_WRLCK, 10, 10);
    struct pending *p = start(BFS_FOP_INODELK, b, &req);
    ok(!wait_for(p, 50), "blocking inodelk waits");
    is_int(inodelk(a, "dom1", g, BFS_LK_SETLK, F_UNLCK, 0, 0), 0, "A unlocks dom1");
    ok(wait_for(p, 2000) && p->rc == 0, "B's inodelk is granted");
    pending_free(p);
    is_int(inodelk(b, "dom1", g, BFS_LK_SETLK, F_UNLCK, 10, 10), 0, "B unlocks dom1");
    is_int(inodelk(b, "dom2", g, BFS_LK_SETLK, F_UNLCK, 0, 0), 0, "B unlocks dom2");

    /* fairness: a reader queues behind a waiting writer */
    inodelk(a, "dom3", g, BFS_LK_SETLK, F_RDLCK, 0, 0);
    req = ilk_req("dom3", g, BFS_LK_SETLKW, F_WRLCK, 0, 0);
    p = start(BFS_FOP_INODELK, b, &req);
    struct bfs_stack *c = stack_for(&client_c, 1);
    is_int(inodelk(c, "dom3", g, BFS_LK_SETLK, F_RDLCK, 0, 0), -EAGAIN,
           "a new reader does not overtake a waiting writer");
    is_int(inodelk(a, "dom3", g, BFS_LK_SETLK, F_RDLCK, 50, 1), 0,
           "but a holder may take more (no self-deadlock)");
    inodelk(a, "dom3", g, BFS_LK_SETLK, F_UNLCK, 0, 0);
    ok(!is_done(p), "writer still waits for A's second lock");
    inodelk(a, "dom3", g, BFS_LK_SETLK, F_UNLCK, 50, 1);
    ok(wait_for(p, 2000) && p->rc == 0, "writer granted once readers are gone");
    pending_free(p);
    inodelk(b, "dom3", g, BFS_LK_SETLK, F_UNLCK, 0, 0);
    bfs_stack_unref(c);
}

/* ---- contention notices (features/locks/contention.c) ---- */

static pthread_mutex_t ups_m = PTHREAD_MUTEX_INITIALIZER;
static int ups_n;
static struct bfs_upcall ups_last;
static char ups_domain[32], ups_name[32];

static void on_event(struct bfs_graph *g, enum bfs_event ev, void *data)
{
    (void)g;
    if (ev != BFS_EV_UPCALL || !data)
        return;
    const struct bfs_upcall *up = data;
    pthread_mutex_lock(&ups_m);
    ups_n++;
    ups_last = *up;
    snprintf(ups_domain, sizeof(ups_domain), "%s", up->domain ? up->domain : "");
    snprintf(ups_name, sizeof(ups_name), "%s", up->name ? up->name : "");
    pthread_mutex_unlock(&ups_m);
}

/* Notices heard so far; *last (may be NULL) gets the last one. */
static int ups_count(struct bfs_upcall *last)
{
    pthread_mutex_lock(&ups_m);
    int n = ups_n;
    if (last)
        *last = ups_last;
    pthread_mutex_unlock(&ups_m);
    return n;
}

static void set_opt(const char *key, const char *val)
{
    struct bfs_dict *d = bfs_dict_new();
    bfs_dict_set_str(d, key, val);
    is_int(top->mod->reconfigure(top, d), 0, "reconfigure %s %s", key, val);
    bfs_dict_unref(d);
}

static bool notice_is(const struct bfs_upcall *up, uint32_t kind, void *to, uint64_t owner,
                      const struct bfs_gfid *g, const char *name)
{
    return up->kind == kind && up->to == to && up->owner == owner && bfs_gfid_eq(&up->gfid, g) &&
           strcmp(ups_domain, "cd") == 0 && strcmp(ups_name, name ? name : "") == 0;
}

static void test_contention_inodelk(struct bfs_stack *a, struct bfs_stack *b,
                                    const struct bfs_gfid *g)
{
    struct bfs_upcall up;
    set_opt("notify-contention-delay", "60000");
    int n0 = ups_count(NULL);
    is_int(inodelk(a, "cd", g, BFS_LK_SETLK, F_WRLCK, 0, 0), 0, "contention: A holds an inodelk");
    is_int(inodelk(b, "cd", g, BFS_LK_SETLK, F_WRLCK, 0, 0), -EAGAIN,
           "contention: B's non-blocking request is refused");
    is_int(ups_count(NULL), n0, "contention: a non-blocking request tells nobody");
    struct bfs_inodelk_req req = ilk_req("cd", g, BFS_LK_SETLKW, F_WRLCK, 0, 0);
    struct pending *pb = start(BFS_FOP_INODELK, b, &req);
    ok(!is_done(pb) && ups_count(&up) == n0 + 1,
       "contention: B's blocking request waits and one notice goes out");
    ok(notice_is(&up, BFS_UPCALL_INODELK_CONTENTION, &client_a, 1, g, NULL),
       "contention: it goes to the holder only (client A, its lock owner) and names the "
       "domain and the GFID");
    struct bfs_stack *c = stack_for(&client_c, 3), *d = stack_for(&client_c, 4);
    struct pending *pc = start(BFS_FOP_INODELK, c, &req);
    is_int(ups_count(NULL), n0 + 1,
           "contention: a second waiter within notify-contention-delay: A is not told again");
    set_opt("notify-contention-delay", "0");
    struct pending *pd = start(BFS_FOP_INODELK, d, &req);
    ok(ups_count(&up) == n0 + 2 && up.to == &client_a,
       "contention: with a delay of 0, the next waiter tells A again (once)");
    is_int(inodelk(a, "cd", g, BFS_LK_SETLK, F_UNLCK, 0, 0), 0, "contention: A unlocks");
    ok(wait_for(pb, 2000) && pb->rc == 0, "contention: B is granted");
    ok(ups_count(&up) == n0 + 3 && notice_is(&up, BFS_UPCALL_INODELK_CONTENTION, &client_b, 2,
                                             g, NULL),
       "contention: the new holder B is told at once that others still wait (one notice)");
    is_int(inodelk(b, "cd", g, BFS_LK_SETLK, F_UNLCK, 0, 0), 0, "contention: B unlocks");
    ok(wait_for(pc, 2000) && pc->rc == 0, "contention: C's first owner is granted");
    ok(ups_count(&up) == n0 + 4 && up.to == &client_c && up.owner == 3,
       "contention: C's other owner waits for it: C is told");
    is_int(inodelk(c, "cd", g, BFS_LK_SETLK, F_UNLCK, 0, 0), 0, "contention: C unlocks");
    ok(wait_for(pd, 2000) && pd->rc == 0, "contention: the last waiter is granted");
    is_int(ups_count(NULL), n0 + 4, "contention: nobody waits: no notice");
    is_int(inodelk(d, "cd", g, BFS_LK_SETLK, F_UNLCK, 0, 0), 0, "contention: it unlocks");
    pending_free(pb);
    pending_free(pc);
    pending_free(pd);
    bfs_stack_unref(c);
    bfs_stack_unref(d);
}

static void test_contention(struct bfs_stack *a, struct bfs_stack *b, const struct bfs_gfid *g)
{
    graph->on_event = on_event;
    test_contention_inodelk(a, b, g);

    struct bfs_upcall up;
    int n0 = ups_count(NULL);
    is_int(entrylk(a, "cd", "x", BFS_ENTRYLK_LOCK_NB, BFS_ENTRYLK_WRLCK), 0,
           "contention: A holds an entrylk on x");
    struct bfs_entrylk_req ereq = elk_req("cd", "x", BFS_ENTRYLK_LOCK, BFS_ENTRYLK_RDLCK);
    struct pending *p = start(BFS_FOP_ENTRYLK, b, &ereq);
    ok(!is_done(p) && ups_count(&up) == n0 + 1 &&
           notice_is(&up, BFS_UPCALL_ENTRYLK_CONTENTION, &client_a, 1, &bfs_gfid_root, "x"),
       "contention: a blocked entrylk tells the holder, naming domain, directory and name");
    is_int(entrylk(a, "cd", "x", BFS_ENTRYLK_UNLOCK, BFS_ENTRYLK_WRLCK), 0,
           "contention: A drops x");
    ok(wait_for(p, 2000) && p->rc == 0, "contention: B's entrylk is granted");
    pending_free(p);
    is_int(entrylk(b, "cd", "x", BFS_ENTRYLK_UNLOCK, BFS_ENTRYLK_RDLCK), 0,
           "contention: B drops x");

    set_opt("notify-contention", "off");
    n0 = ups_count(NULL);
    is_int(inodelk(a, "cd", g, BFS_LK_SETLK, F_WRLCK, 0, 0), 0, "contention off: A holds");
    struct bfs_inodelk_req req = ilk_req("cd", g, BFS_LK_SETLKW, F_WRLCK, 0, 0);
    p = start(BFS_FOP_INODELK, b, &req);
    ok(!is_done(p) && ups_count(NULL) == n0, "contention off: B waits, nobody is told");
    is_int(inodelk(a, "cd", g, BFS_LK_SETLK, F_UNLCK, 0, 0), 0, "contention off: A unlocks");
    ok(wait_for(p, 2000) && p->rc == 0, "contention off: B is granted");
    pending_free(p);
    is_int(inodelk(b, "cd", g, BFS_LK_SETLK, F_UNLCK, 0, 0), 0, "contention off: B unlocks");
    set_opt("notify-contention", "on");
    set_opt("notify-contention-delay", "5");
    graph->on_event = NULL;
}

static void test_entrylk(struct bfs_stack *a, struct bfs_stack *b)
{
    is_int(entrylk(a, "d", "x", BFS_ENTRYLK_LOCK_NB, BFS_ENTRYLK_RDLCK), 0, "A RD x");
    is_int(entrylk(b, "d", "x", BFS_ENTRYLK_LOCK_NB, BFS_ENTRYLK_RDLCK), 0, "B RD x shares");
    is_int(entrylk(b, "d", "x", BFS_ENTRYLK_LOCK_NB, BFS_ENTRYLK_WRLCK), -EAGAIN,
           "B WR x -> EAGAIN");
    is_int(entrylk(b, "d", "y", BFS_ENTRYLK_LOCK_NB, BFS_ENTRYLK_WRLCK), 0, "B WR y");
    is_int(entrylk(a, "d", NULL, BFS_ENTRYLK_LOCK_NB, BFS_ENTRYLK_WRLCK), -EAGAIN,
           "whole-directory WR conflicts with names held");
    is_int(entrylk(a, "other", "y", BFS_ENTRYLK_LOCK_NB, BFS_ENTRYLK_WRLCK), 0,
           "another domain is independent");
    is_int(entrylk(b, "d", "x", BFS_ENTRYLK_UNLOCK, 0), 0, "B unlocks x");

    struct bfs_entrylk_req req = elk_req("d", "x", BFS_ENTRYLK_LOCK, BFS_ENTRYLK_WRLCK);
    struct pending *p = start(BFS_FOP_ENTRYLK, b, &req);
    ok(!wait_for(p, 50), "blocking WR x waits for A's RD");
    is_int(entrylk(a, "d", "x", BFS_ENTRYLK_UNLOCK, 0), 0, "A unlocks x");
    ok(wait_for(p, 2000) && p->rc == 0, "B gets WR x");
    pending_free(p);
    is_int(entrylk(a, "d", "x", BFS_ENTRYLK_UNLOCK, 0), -EINVAL, "A holds nothing on x any more");
    entrylk(b, "d", "x", BFS_ENTRYLK_UNLOCK, 0);
    entrylk(b, "d", "y", BFS_ENTRYLK_UNLOCK, 0);
    entrylk(a, "other", "y", BFS_ENTRYLK_UNLOCK, 0);
    is_int(entrylk(a, "d", NULL, BFS_ENTRYLK_LOCK_NB, BFS_ENTRYLK_WRLCK), 0,
           "all released: A locks the whole directory");
    entrylk(a, "d", NULL, BFS_ENTRYLK_UNLOCK, 0);
}

static int lease(struct bfs_stack *st, const struct bfs_gfid *g, uint32_t cmd, uint32_t type,
                 uint8_t id, struct bfs_lease *out)
{
    struct bfs_lease_req req = {.lease = {.cmd = cmd, .type = type}};
    struct bfs_lease_rep rep;
    req.loc.gfid = *g;
    memset(req.lease.id, id, 16);
    int rc = bfs_sync_lease(top, st, &req, &rep);
    if (out)
        *out = rep.lease;
    bfs_lease_rep_clear_dup(&rep);
    return rc;
}

static void test_leases(struct bfs_stack *a, struct bfs_stack *b, const struct bfs_gfid *g)
{
    struct bfs_lease out;
    is_int(lease(a, g, 2, F_RDLCK, 1, NULL), 0, "A takes a read lease");
    is_int(lease(b, g, 2, F_RDLCK, 2, NULL), 0, "B takes a read lease too");
    is_int(lease(b, g, 2, F_WRLCK, 2, NULL), -EAGAIN, "B cannot upgrade while A reads");
    lease(b, g, 1, 0, 2, &out);
    is_int(out.type, F_RDLCK, "get: read leases are held");
    is_int(lease(a, g, 3, 0, 1, NULL), 0, "A returns its lease");
    is_int(lease(b, g, 2, F_WRLCK, 2, NULL), 0, "now B upgrades to a write lease");
    is_int(lease(a, g, 2, F_RDLCK, 1, NULL), -EAGAIN, "A cannot read-lease under a write lease");
    is_int(lease(a, g, 3, 0, 1, NULL), -EINVAL, "unlock of a lease not held: EINVAL");
}

static void test_client_gone(struct bfs_stack *a, struct bfs_stack *b, struct bfs_fd *fda,
                             struct bfs_fd *fdb, const struct bfs_gfid *g)
{
    struct bfs_stack *c = stack_for(&client_c, 3);
    is_int(lk(a, fda, BFS_LK_SETLK, F_WRLCK, 0, 0, 1, NULL), 0, "A locks the whole file");
    is_int(inodelk(a, "gone", g, BFS_LK_SETLK, F_WRLCK, 0, 0), 0, "A holds an inodelk");
    is_int(entrylk(a, "gone", "n", BFS_ENTRYLK_LOCK_NB, BFS_ENTRYLK_WRLCK), 0,
           "A holds an entrylk");
    struct bfs_lk_req lreq = lk_req(fdb, BFS_LK_SETLKW, F_RDLCK, 0, 10, 2);
    struct bfs_inodelk_req ireq = ilk_req("gone", g, BFS_LK_SETLKW, F_WRLCK, 0, 0);
    struct bfs_entrylk_req ereq = elk_req("gone", "n", BFS_ENTRYLK_LOCK, BFS_ENTRYLK_RDLCK);
    struct pending *pl = start(BFS_FOP_LK, b, &lreq);
    struct pending *pi = start(BFS_FOP_INODELK, b, &ireq);
    struct pending *pe = start(BFS_FOP_ENTRYLK, b, &ereq);
    /* C waits too, and C's connection will go away while it waits */
    struct bfs_lk_req creq = lk_req(fdb, BFS_LK_SETLKW, F_WRLCK, 100, 10, 3);
    struct pending *pc = start(BFS_FOP_LK, c, &creq);
    ok(!wait_for(pl, 50) && !is_done(pi) && !is_done(pe) && !is_done(pc), "B and C wait on A");
    is_int(dump_count(g, "lk_blocked"), 2, "dump shows two blocked lk requests");

    top->mod->notify(top, BFS_EV_CLIENT_GONE, NULL, &client_c);
    ok(wait_for(pc, 2000) && pc->rc == -ENOTCONN, "a gone client's waiter answers ENOTCONN");
    ok(!is_done(pl), "B still waits");

    top->mod->notify(top, BFS_EV_CLIENT_GONE, NULL, &client_a);
    ok(wait_for(pl, 2000) && pl->rc == 0, "A gone: B's POSIX lock granted");
    ok(wait_for(pi, 2000) && pi->rc == 0, "A gone: B's inodelk granted");
    ok(wait_for(pe, 2000) && pe->rc == 0, "A gone: B's entrylk granted");
    is_int(lk(c, fdb, BFS_LK_SETLK, F_WRLCK, 500, 10, 3, NULL), 0,
           "A's whole-file lock is gone");
    is_int(lease(c, g, 2, F_RDLCK, 9, NULL), -EAGAIN, "B's write lease is still there");
    top->mod->notify(top, BFS_EV_CLIENT_GONE, NULL, &client_b);
    is_int(lease(c, g, 2, F_WRLCK, 9, NULL), 0, "B gone: its lease too");
    is_int(lk(c, fdb, BFS_LK_SETLK, F_WRLCK, 0, 0, 3, NULL), 0, "B gone: its locks too");
    is_int(inodelk(c, "gone", g, BFS_LK_SETLK, F_WRLCK, 0, 0), 0, "and its inodelks");
    top->mod->notify(top, BFS_EV_CLIENT_GONE, NULL, &client_c);
    is_int(dump_count(g, "posix"), 0, "no POSIX lock left");
    pending_free(pl);
    pending_free(pi);
    pending_free(pe);
    pending_free(pc);
    bfs_stack_unref(c);
}

/* A closing client (its connection closed, its calls still running in the
 * brick): its granted locks stay until it is gone, or a late post-op of
 * its transaction lands after another client took the lock (212's
 * negative counters); its queued requests answer ENOTCONN at once, and a
 * new lock request is refused, so that its calls all end and "gone" can
 * come. */
static void test_closing(struct bfs_stack *a, struct bfs_stack *b, const struct bfs_gfid *g)
{
    struct bfs_stack *a6 = stack_for(&client_a, 6);
    is_int(inodelk(a, "closing", g, BFS_LK_SETLK, F_WRLCK, 0, 0), 0, "closing: A holds an inodelk");
    struct bfs_inodelk_req req = ilk_req("closing", g, BFS_LK_SETLKW, F_WRLCK, 0, 0);
    struct pending *pa = start(BFS_FOP_INODELK, a6, &req);
    struct pending *pb = start(BFS_FOP_INODELK, b, &req);
    ok(!wait_for(pb, 50) && !is_done(pa), "closing: A's other owner and B wait on A");

    top->mod->notify(top, BFS_EV_CLIENT_CLOSING, NULL, &client_a);
    ok(wait_for(pa, 2000) && pa->rc == -ENOTCONN, "closing: A's queued request answers ENOTCONN");
    ok(!wait_for(pb, 100), "closing: A's granted lock still keeps B waiting");
    is_int(inodelk(a6, "closing-other", g, BFS_LK_SETLK, F_WRLCK, 0, 0), -ENOTCONN,
           "closing: a new lock request of A is refused");
    is_int(inodelk(b, "closing-b", g, BFS_LK_SETLK, F_WRLCK, 0, 0), 0,
           "closing: B's own requests are served");
    inodelk(b, "closing-b", g, BFS_LK_SETLK, F_UNLCK, 0, 0);

    top->mod->notify(top, BFS_EV_CLIENT_GONE, NULL, &client_a);
    ok(wait_for(pb, 2000) && pb->rc == 0, "closing: A gone: B granted");
    inodelk(b, "closing", g, BFS_LK_SETLK, F_UNLCK, 0, 0);
    is_int(inodelk(a, "closing", g, BFS_LK_SETLK, F_WRLCK, 0, 0), 0,
           "closing: once gone, A's client id is served again (a new connection)");
    inodelk(a, "closing", g, BFS_LK_SETLK, F_UNLCK, 0, 0);
    pending_free(pa);
    pending_free(pb);
    bfs_stack_unref(a6);
}

static void test_bad_requests(struct bfs_stack *a, struct bfs_fd *fda, const struct bfs_gfid *g)
{
    is_int(lk(a, fda, 99, F_WRLCK, 0, 0, 1, NULL), -EINVAL, "unknown lk cmd");
    is_int(lk(a, fda, BFS_LK_SETLK, 7, 0, 0, 1, NULL), -EINVAL, "unknown lock type");
    is_int(lk(a, fda, BFS_LK_SETLK, F_WRLCK, UINT64_MAX, 2, 1, NULL), -EINVAL, "range overflow");
    is_int(inodelk(a, "", g, BFS_LK_SETLK, F_WRLCK, 0, 0), -EINVAL, "empty domain");
    is_int(entrylk(a, "d", "a/b", BFS_ENTRYLK_LOCK_NB, BFS_ENTRYLK_WRLCK), -EINVAL,
           "entrylk name with a slash");
}

int main(void)
{
    plan_lazy();
    char err[512] = "";
    struct bfs_proc *proc = bfs_proc_new("test_locks", 0);
    ok(proc != NULL, "process resources");
    int rc = bfs_graph_from_text(VOLFILE, strlen(VOLFILE), "<inline>", proc, &graph, err,
                                 sizeof(err));
    is_int(rc, 0, "graph builds: %s", err);
    if (rc < 0)
        return done_testing();
    is_int(bfs_graph_init(graph), 0, "graph inits");
    top = graph->top;

    struct bfs_stack *a = stack_for(&client_a, 1), *b = stack_for(&client_b, 2);
    struct bfs_gfid g;
    struct bfs_fd *fda = create_file(a, "f", &g);
    ok(fda != NULL, "file created in storage/memory");
    struct bfs_fd *fdb = open_fd(&g);

    test_posix_conflicts(a, b, fda, fdb, &g);
    test_posix_blocking(a, b, fda, fdb);
    test_flock_flush_release(a, b, &g);
    test_inodelk(a, b, &g);
    test_entrylk(a, b);
    test_contention(a, b, &g);
    test_leases(a, b, &g);
    test_client_gone(a, b, fda, fdb, &g);
    test_closing(a, b, &g);
    test_bad_requests(a, fda, &g);

    bfs_fd_unref(fda);
    bfs_fd_unref(fdb);
    bfs_stack_unref(a);
    bfs_stack_unref(b);
    bfs_graph_free(graph);
    bfs_proc_free(proc);
    return done_testing();
}
