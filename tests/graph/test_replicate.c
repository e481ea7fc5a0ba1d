/*
 * test_replicate.c — cluster/replicate in one process over real bricks:
 * each child is storage/posix on a temporary directory, under
 * features/locks, under debug/io-stats (s0, s1, ...: what reached each
 * brick), under debug/error-gen (named c0, c1, ...: the names the
 * pending xattrs carry). A "down" brick is error-gen failing every fop with
 * ENOTCONN, with or without a CHILD_DOWN event; "back" is the reverse.
 *
 * Every check that matters is made on the brick directories themselves
 * with getxattr(2)/stat(2)/read(2): pending counters blaming the child that
 * missed a change, copies identical after heal (content, mode, xattrs,
 * GFID), no data on the arbiter. Covers replica 3, replica 2 (split-brain
 * and its resolution by the favorite-child policies), replica 3 arbiter 1,
 * quorum, eager locking, read fail-over and entry heal of names created and
 * removed while a brick was down. Needs root (trusted xattrs); skips
 * otherwise.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "core/graph.h"

static struct bfs_proc *proc;
static char root[256];
static int scenario;

struct vol {
    struct bfs_graph *g;
    struct bfs_xl *afr;
    int n;
    char brick[3][PATH_MAX];
    struct bfs_stack *st;
};

/* ---- graph ---- */

/* What replicate tells the program above it. */
static int events_up, events_down;

static void on_event(struct bfs_graph *g, enum bfs_event ev, void *data)
{
    (void)g;
    (void)data;
    if (ev == BFS_EV_CHILD_UP)
        __atomic_add_fetch(&events_up, 1, __ATOMIC_RELAXED);
    if (ev == BFS_EV_CHILD_DOWN)
        __atomic_add_fetch(&events_down, 1, __ATOMIC_RELAXED);
}

static int vol_open(struct vol *v, int n, bool arbiter, const char *options)
{
    char text[8192];
    size_t len = 0;
    memset(v, 0, sizeof(*v));
    v->n = n;
    scenario++;
    for (int i = 0; i < n; i++) {
        snprintf(v->brick[i], sizeof(v->brick[i]), "%s/s%d-b%d", root, scenario, i);
        if (mkdir(v->brick[i], 0755) < 0)
            return -1;
        len += (size_t)snprintf(text + len, sizeof(text) - len,
                                "volume b%d\n type storage/posix\n option directory %s\n"
                                "end-volume\n"
                                "volume l%d\n type features/locks\n subvolumes b%d\nend-volume\n"
                                "volume s%d\n type debug/io-stats\n subvolumes l%d\nend-volume\n"
                                "volume c%d\n type debug/error-gen\n option error-no ENOTCONN\n"
                                " subvolumes s%d\nend-volume\n",
                                i, v->brick[i], i, i, i, i, i, i);
    }
    len += (size_t)snprintf(text + len, sizeof(text) - len,
                            "volume rep\n type cluster/replicate\n%s%s%s%s subvolumes",
                            options && strstr(options, "self-heal-count")
                                ? ""
                                : " option cluster.background-self-heal-count 0\n",
                            options && strstr(options, "post-op-delay")
                                ? ""
                                : " option cluster.post-op-delay-ms 100\n",
                            arbiter ? " option arbiter-count 1\n" : "", options ? options : "");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, " c%d", i);
    len += (size_t)snprintf(text + len, sizeof(text) - len, "\nend-volume\n");
    char err[512];
    if (bfs_graph_from_text(text, len, "replicate.vol", proc, &v->g, err, sizeof(err)) < 0) {
        printf("# graph: %s\n", err);
        return -1;
    }
    if (bfs_graph_init(v->g) < 0)
        return -1;
    v->g->on_event = on_event;
    bfs_graph_activate(v->g);
    v->afr = v->g->top;
    v->st = bfs_stack_new();
    return 0;
}

static void vol_close(struct vol *v)
{
    if (v->g)
        bfs_graph_free(v->g);
    bfs_stack_unref(v->st);
    v->g = NULL;
}

static struct bfs_xl *child(struct vol *v, int i)
{
    char name[16];
    snprintf(name, sizeof(name), "c%d", i);
    return bfs_graph_find(v->g, name);
}

static void reconf(struct vol *v, int i, const char *key, const char *val)
{
    struct bfs_xl *c = child(v, i);
    struct bfs_dict *d = bfs_dict_new();
    bfs_dict_set_str(d, key, val);
    c->mod->reconfigure(c, d);
    bfs_dict_unref(d);
}

/* Child i's connection is gone: every call fails with ENOTCONN and the
 * brick drops our locks, as protocol/server does when a connection closes
 * (ENOTCONN only ever comes from a closed connection). `tell`: replicate
 * hears CHILD_DOWN; without it, it has not noticed yet. */
static void down(struct vol *v, int i, bool tell)
{
    reconf(v, i, "failure", "100");
    char name[16];
    snprintf(name, sizeof(name), "l%d", i);
    struct bfs_xl *locks = bfs_graph_find(v->g, name);
    locks->mod->notify(locks, BFS_EV_CLIENT_GONE, child(v, i), BFS_CLIENT_LOCAL);
    if (tell)
        bfs_xl_notify_parents(child(v, i), BFS_EV_CHILD_DOWN, NULL);
}

static void up(struct vol *v, int i, bool tell)
{
    reconf(v, i, "failure", "0");
    if (tell)
        bfs_xl_notify_parents(child(v, i), BFS_EV_CHILD_UP, NULL);
}

static void afr_set(struct vol *v, const char *key, const char *val)
{
    struct bfs_dict *d = bfs_dict_new();
    bfs_dict_set_str(d, key, val);
    v->afr->mod->reconfigure(v->afr, d);
    bfs_dict_unref(d);
}

/* ---- calls through replicate ---- */

static struct bfs_loc L(const struct bfs_gfid *par, const char *name)
{
    struct bfs_loc l = {0};
    l.pargfid = *par;
    l.name = name;
    return l;
}

static int lookup(struct vol *v, const struct bfs_gfid *par, const char *name,
                  struct bfs_iatt *attr)
{
    struct bfs_lookup_req req = {.loc = L(par, name)};
    struct bfs_lookup_rep rep;
    if (!name) {
        memset(&req.loc, 0, sizeof(req.loc));
        req.loc.gfid = *par;
    }
    int rc = bfs_sync_lookup(v->afr, v->st, &req, &rep);
    if (attr)
        *attr = rep.attr;
    bfs_lookup_rep_clear_dup(&rep);
    return rc;
}

static int create(struct vol *v, const struct bfs_gfid *par, const char *name,
                  struct bfs_fd **fdp, struct bfs_iatt *attr)
{
    struct bfs_fd *fd = bfs_fd_new(v->g, NULL, O_RDWR, 0);
    struct bfs_create_req req = {.loc = L(par, name), .fd = fd, .flags = O_RDWR | O_CREAT,
                                 .mode = 0644};
    struct bfs_create_rep rep;
    int rc = bfs_sync_create(v->afr, v->st, &req, &rep);
    if (attr)
        *attr = rep.attr;
    bfs_create_rep_clear_dup(&rep);
    if (rc < 0 || !fdp)
        bfs_fd_unref(fd);
    else
        *fdp = fd;
    return rc;
}

/* An fd on the inode (as FUSE and protocol/server make them); create's
 * fds have none (the GFID is not known yet), which replicate copes with. */
static int open_(struct vol *v, const struct bfs_gfid *g, int flags, struct bfs_fd **fdp)
{
    struct bfs_inode *inode = bfs_inode_get(v->g->itable, g, S_IFREG);
    struct bfs_fd *fd = bfs_fd_new(v->g, inode, flags, 0);
    bfs_inode_unref(inode);
    struct bfs_open_req req = {.fd = fd, .flags = (uint32_t)flags};
    req.loc.gfid = *g;
    int rc = bfs_sync_open(v->afr, v->st, &req, NULL);
    if (rc < 0)
        bfs_fd_unref(fd);
    else
        *fdp = fd;
    return rc;
}

static int write_(struct vol *v, struct bfs_fd *fd, uint64_t off, const char *s, size_t len)
{
    struct bfs_write_req req = {.fd = fd, .offset = off};
    req.data.data = s;
    req.data.len = len;
    return bfs_sync_write(v->afr, v->st, &req, NULL);
}

static int read_(struct vol *v, struct bfs_fd *fd, char *buf, size_t size)
{
    struct bfs_read_req req = {.fd = fd, .size = (uint32_t)size, .offset = 0};
    struct bfs_read_rep rep;
    int rc = bfs_sync_read(v->afr, v->st, &req, &rep);
    if (rc >= 0) {
        size_t n = rep.data.len < size ? rep.data.len : size;
        memcpy(buf, rep.data.data, n);
        rc = (int)n;
    }
    bfs_read_rep_clear_dup(&rep);
    return rc;
}

static int flush_close(struct vol *v, struct bfs_fd *fd)
{
    struct bfs_flush_req req = {.fd = fd};
    int rc = bfs_sync_flush(v->afr, v->st, &req, NULL);
    bfs_fd_unref(fd);
    return rc;
}

static int mkdir_(struct vol *v, const struct bfs_gfid *par, const char *name,
                  struct bfs_iatt *attr)
{
    struct bfs_mkdir_req req = {.loc = L(par, name), .mode = 0755};
    struct bfs_mkdir_rep rep;
    int rc = bfs_sync_mkdir(v->afr, v->st, &req, &rep);
    if (attr)
        *attr = rep.attr;
    bfs_mkdir_rep_clear_dup(&rep);
    return rc;
}

static int unlink_(struct vol *v, const struct bfs_gfid *par, const char *name)
{
    struct bfs_unlink_req req = {.loc = L(par, name)};
    return bfs_sync_unlink(v->afr, v->st, &req, NULL);
}

static int rmdir_(struct vol *v, const struct bfs_gfid *par, const char *name)
{
    struct bfs_rmdir_req req = {.loc = L(par, name)};
    return bfs_sync_rmdir(v->afr, v->st, &req, NULL);
}

/* Writes whole content to a new file and closes it. */
static int put(struct vol *v, const struct bfs_gfid *par, const char *name, const char *s,
               struct bfs_iatt *attr)
{
    struct bfs_fd *fd;
    int rc = create(v, par, name, &fd, attr);
    if (rc < 0)
        return rc;
    rc = write_(v, fd, 0, s, strlen(s));
    int frc = flush_close(v, fd);
    return rc < 0 ? rc : frc;
}

/* ---- the bricks underneath ---- */

static const char *on(struct vol *v, int i, const char *rel)
{
    static char buf[8][PATH_MAX + 64];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, sizeof(buf[0]), "%s/%s", v->brick[i], rel);
    return b;
}

/* Counter of type t in trusted.brickfs.afr.<key> on brick i (0 if absent). */
static long long counter(struct vol *v, int i, const char *rel, const char *key, int t)
{
    char name[64];
    uint8_t raw[24];
    snprintf(name, sizeof(name), "trusted.brickfs.afr.%s", key);
    ssize_t n = lgetxattr(on(v, i, rel), name, raw, sizeof(raw));
    if (n < (t + 1) * 8)
        return 0;
    uint64_t be;
    memcpy(&be, raw + t * 8, 8);
    return (long long)be64toh(be);
}

/* Every pending and dirty counter of rel on every brick is 0. */
static bool all_clean(struct vol *v, const char *rel)
{
    for (int i = 0; i < v->n; i++) {
        for (int t = 0; t < 3; t++) {
            if (counter(v, i, rel, "dirty", t))
                return false;
            for (int j = 0; j < v->n; j++) {
                char key[16];
                snprintf(key, sizeof(key), "c%d", j);
                if (counter(v, i, rel, key, t))
                    return false;
            }
        }
    }
    return true;
}

/* Post-op and unlock of entry and metadata changes run behind the answer:
 * give them a moment. */
static bool clean_soon(struct vol *v, const char *rel)
{
    for (int i = 0; i < 200; i++) {
        if (all_clean(v, rel))
            return true;
        usleep(10000);
    }
    return false;
}

static ssize_t slurp(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size);
    close(fd);
    return n;
}

/* Content of rel on brick i equals s. */
static bool content_is(struct vol *v, int i, const char *rel, const char *s)
{
    char buf[4096];
    ssize_t n = slurp(on(v, i, rel), buf, sizeof(buf));
    return n == (ssize_t)strlen(s) && memcmp(buf, s, (size_t)n) == 0;
}

static bool same_gfid(struct vol *v, const char *rel, uint32_t mask)
{
    uint8_t a[16], b[16];
    int first = -1;
    for (int i = 0; i < v->n; i++) {
        if (!(mask & (1u << i)))
            continue;
        if (lgetxattr(on(v, i, rel), "trusted.brickfs.gfid", first < 0 ? a : b, 16) != 16)
            return false;
        if (first >= 0 && memcmp(a, b, 16))
            return false;
        if (first < 0)
            first = i;
    }
    return first >= 0;
}

/* The user.* xattrs of a path, "name=value;" sorted by the kernel's order. */
static void user_xattrs(const char *path, char *out, size_t size)
{
    char names[4096], val[256];
    ssize_t n = llistxattr(path, names, sizeof(names));
    size_t len = 0;
    out[0] = 0;
    for (ssize_t off = 0; n > 0 && off < n; off += (ssize_t)strlen(names + off) + 1) {
        if (strncmp(names + off, "user.", 5))
            continue;
        ssize_t m = lgetxattr(path, names + off, val, sizeof(val) - 1);
        val[m > 0 ? m : 0] = 0;
        len += (size_t)snprintf(out + len, size - len, "%s=%s;", names + off, val);
    }
}

/* rel is the same on every brick of mask: type, mode, owner, GFID, user
 * xattrs and (regular files; not on the arbiter) content. */
static bool same_everywhere(struct vol *v, const char *rel, uint32_t mask, int arbiter)
{
    struct stat a, b;
    char ca[8192], cb[8192], xa[1024], xb[1024];
    int ref = -1;
    ssize_t na = 0;
    if (!same_gfid(v, rel, mask))
        return false;
    for (int i = 0; i < v->n; i++) {
        if (!(mask & (1u << i)))
            continue;
        struct stat *st = ref < 0 ? &a : &b;
        if (lstat(on(v, i, rel), st) < 0)
            return false;
        char *xs = ref < 0 ? xa : xb;
        user_xattrs(on(v, i, rel), xs, sizeof(xa));
        ssize_t nc = S_ISREG(st->st_mode) && i != arbiter
                         ? slurp(on(v, i, rel), ref < 0 ? ca : cb, sizeof(ca))
                         : -2;
        if (ref < 0) {
            ref = i;
            na = nc;
            continue;
        }
        if (a.st_mode != b.st_mode || a.st_uid != b.st_uid || a.st_gid != b.st_gid ||
            strcmp(xa, xb) != 0)
            return false;
        if (nc != -2 && na != -2 && (nc != na || memcmp(ca, cb, (size_t)na) != 0))
            return false;
    }
    return ref >= 0;
}

static bool exists(struct vol *v, int i, const char *rel)
{
    struct stat st;
    return lstat(on(v, i, rel), &st) == 0;
}

static uint64_t calls_of(struct vol *v, int i)
{
    char *d = child(v, i)->mod->dump(child(v, i));
    const char *p = d ? strstr(d, "\"calls\":") : NULL;
    uint64_t n = p ? strtoull(p + 8, NULL, 10) : 0;
    free(d);
    return n;
}

/* A lookup that must answer within ms: a hang would stop the whole test,
 * so one that does not answer in time bails out. */
struct timed_lookup {
    struct vol *v;
    struct bfs_gfid par;
    const char *name;
    int rc;
    bool done;
    pthread_mutex_t m;
    pthread_cond_t c;
};

static void *timed_lookup_main(void *arg)
{
    struct timed_lookup *t = arg;
    struct bfs_stack *st = bfs_stack_new();
    struct bfs_lookup_req req = {.loc = L(&t->par, t->name)};
    struct bfs_lookup_rep rep;
    if (!t->name) {
        memset(&req.loc, 0, sizeof(req.loc));
        req.loc.gfid = t->par;
    }
    int rc = bfs_sync_lookup(t->v->afr, st, &req, &rep);
    bfs_lookup_rep_clear_dup(&rep);
    bfs_stack_unref(st);
    pthread_mutex_lock(&t->m);
    t->rc = rc;
    t->done = true;
    pthread_cond_signal(&t->c);
    pthread_mutex_unlock(&t->m);
    return NULL;
}

static int lookup_within(struct vol *v, const struct bfs_gfid *par, const char *name, int ms,
                         const char *what)
{
    struct timed_lookup t = {.v = v, .par = *par, .name = name};
    pthread_mutex_init(&t.m, NULL);
    pthread_cond_init(&t.c, NULL);
    pthread_t th;
    if (pthread_create(&th, NULL, timed_lookup_main, &t) != 0)
        return -EAGAIN;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&t.m);
    while (!t.done && pthread_cond_timedwait(&t.c, &t.m, &ts) == 0)
        ;
    bool done = t.done;
    pthread_mutex_unlock(&t.m);
    if (!done) {
        printf("not ok %d - %s: the lookup did not answer within %d ms\n", ++tap_n, what, ms);
        printf("Bail out! a lookup hangs\n");
        fflush(stdout);
        _exit(1);
    }
    pthread_join(th, NULL);
    pthread_mutex_destroy(&t.m);
    pthread_cond_destroy(&t.c);
    return t.rc;
}

/* Takes (lock) or drops an entry lock on (dir, name) directly on child i,
 * as another client would (its own lock owner). */
static int entrylk_on(struct vol *v, int i, const struct bfs_gfid *dir, const char *name,
                      bool lock, uint64_t owner)
{
    struct bfs_stack *st = bfs_stack_new();
    st->lk_owner = owner;
    struct bfs_entrylk_req req = {.domain = "rep", .basename = name,
                                  .cmd = lock ? BFS_ENTRYLK_LOCK_NB : BFS_ENTRYLK_UNLOCK,
                                  .type = BFS_ENTRYLK_WRLCK};
    req.loc.gfid = *dir;
    int rc = bfs_sync_entrylk(child(v, i), st, &req, NULL);
    bfs_stack_unref(st);
    return rc;
}

/* A counter of brick i's io-stats dump ("bytes_written", "bytes_read"). */
static uint64_t brick_stat(struct vol *v, int i, const char *key)
{
    char name[16], pat[64];
    snprintf(name, sizeof(name), "s%d", i);
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    struct bfs_xl *s = bfs_graph_find(v->g, name);
    char *d = s ? s->mod->dump(s) : NULL;
    const char *p = d ? strstr(d, pat) : NULL;
    uint64_t n = p ? strtoull(p + strlen(pat), NULL, 10) : 0;
    free(d);
    return n;
}

/* Brick files rel on i and j have the same bytes (any size). */
static bool same_bytes(struct vol *v, int i, int j, const char *rel)
{
    FILE *a = fopen(on(v, i, rel), "rb"), *b = fopen(on(v, j, rel), "rb");
    bool same = a && b;
    while (same) {
        int x = fgetc(a), y = fgetc(b);
        same = x == y;
        if (x == EOF || y == EOF)
            break;
    }
    if (a)
        fclose(a);
    if (b)
        fclose(b);
    return same;
}

/* ---- scenarios ---- */

static void test_basic_replica3(void)
{
    struct vol v;
    struct bfs_iatt a, d;
    char buf[64];
    ok(vol_open(&v, 3, false, NULL) == 0, "replica 3 over three posix bricks starts");
    if (!v.g)
        return;
    is_int(lookup(&v, &bfs_gfid_root, NULL, NULL), 0, "root lookup");
    is_int(put(&v, &bfs_gfid_root, "f", "hello", &a), 0, "create + write + close");
    ok(same_gfid(&v, "f", 7), "the new file has the same GFID on every brick");
    ok(content_is(&v, 0, "f", "hello") && content_is(&v, 1, "f", "hello") &&
           content_is(&v, 2, "f", "hello"),
       "three identical copies");
    ok(clean_soon(&v, "f") && clean_soon(&v, ""), "after close: no pending, no dirty counter");
    struct bfs_fd *fd;
    is_int(open_(&v, &a.gfid, O_RDONLY, &fd), 0, "open");
    is_int(read_(&v, fd, buf, sizeof(buf)), 5, "read 5 bytes");
    ok(memcmp(buf, "hello", 5) == 0, "read what was written");
    flush_close(&v, fd);
    is_int(mkdir_(&v, &bfs_gfid_root, "d", &d), 0, "mkdir");
    ok(same_gfid(&v, "d", 7), "the new directory has the same GFID everywhere");
    is_int(lookup(&v, &bfs_gfid_root, "f", &a), 0, "named lookup");
    is_int(a.size, 5, "with the size of a data copy");
    vol_close(&v);
}

static void test_pending_and_data_heal(void)
{
    struct vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    if (vol_open(&v, 3, false, NULL) < 0)
        return;
    put(&v, &bfs_gfid_root, "f", "old old old", &a);
    down(&v, 1, false); /* failing silently: the writes find out */
    is_int(open_(&v, &a.gfid, O_RDWR, &fd), 0, "open with c1 failing");
    is_int(write_(&v, fd, 0, "NEW", 3), 3, "write with c1 failing succeeds (quorum 2 of 3)");
    is_int(write_(&v, fd, 11, " and more", 9), 9, "a second write through the eager lock");
    is_int(flush_close(&v, fd), 0, "close");
    ok(counter(&v, 0, "f", "c1", 0) > 0 && counter(&v, 2, "f", "c1", 0) > 0,
       "c0 and c2 blame c1 for data");
    ok(counter(&v, 0, "f", "c2", 0) == 0 && counter(&v, 2, "f", "c0", 0) == 0,
       "and nobody else");
    ok(counter(&v, 0, "f", "dirty", 0) == 0, "the good copies are not dirty after close");
    ok(content_is(&v, 1, "f", "old old old"), "c1's copy missed the writes");
    ok(content_is(&v, 0, "f", "NEW old old and more"), "c0 has them");
    up(&v, 1, false);
    is_int(lookup(&v, &bfs_gfid_root, "f", &a), 0, "lookup after c1 returns (heals first)");
    ok(content_is(&v, 1, "f", "NEW old old and more"), "c1's copy healed");
    ok(same_everywhere(&v, "f", 7, -1), "the three copies are identical");
    ok(clean_soon(&v, "f"), "every counter back to 0 after the heal");
    is_int(a.size, 20, "lookup answers the healed size");
    vol_close(&v);
}

static void test_entry_heal(void)
{
    struct vol v;
    struct bfs_iatt a, d, x;
    if (vol_open(&v, 3, false, NULL) < 0)
        return;
    put(&v, &bfs_gfid_root, "gone", "bye", NULL);
    mkdir_(&v, &bfs_gfid_root, "tree", &d);
    put(&v, &d.gfid, "leaf", "leaf", NULL);
    down(&v, 2, true);
    is_int(put(&v, &bfs_gfid_root, "g", "made while c2 was down", &a), 0,
           "create + write with c2 down (known)");
    is_int(unlink_(&v, &bfs_gfid_root, "gone"), 0, "unlink with c2 down");
    is_int(unlink_(&v, &d.gfid, "leaf"), 0, "unlink inside a directory");
    is_int(rmdir_(&v, &bfs_gfid_root, "tree"), 0, "rmdir with c2 down");
    ok(counter(&v, 0, "", "c2", 2) > 0 && counter(&v, 1, "", "c2", 2) > 0,
       "the root's entry counters blame c2");
    ok(!exists(&v, 2, "g") && exists(&v, 2, "gone") && exists(&v, 2, "tree/leaf"),
       "c2 missed all of it");
    up(&v, 2, true);
    is_int(lookup(&v, &bfs_gfid_root, NULL, NULL), 0, "root lookup after c2 returns");
    ok(exists(&v, 2, "g") && same_gfid(&v, "g", 7), "g created on c2 with its GFID");
    ok(!exists(&v, 2, "gone"), "gone removed from c2");
    ok(!exists(&v, 2, "tree"), "tree removed from c2 with what it held");
    ok(clean_soon(&v, ""), "root counters clean");
    is_int(lookup(&v, &bfs_gfid_root, "g", &x), 0, "lookup g: its own heal");
    ok(content_is(&v, 2, "g", "made while c2 was down"), "g's data healed on c2");
    ok(clean_soon(&v, "g"), "g's counters clean");
    struct stat s0, s2;
    ok(stat(on(&v, 0, "g"), &s0) == 0 && stat(on(&v, 2, "g"), &s2) == 0 &&
           s0.st_mode == s2.st_mode && s0.st_uid == s2.st_uid,
       "g's metadata healed too");
    vol_close(&v);
}

static void test_metadata_heal(void)
{
    struct vol v;
    struct bfs_iatt a;
    if (vol_open(&v, 3, false, NULL) < 0)
        return;
    put(&v, &bfs_gfid_root, "m", "meta", &a);
    down(&v, 0, true);
    struct bfs_setattr_req sr = {.valid = BFS_SET_MODE};
    sr.loc.gfid = a.gfid;
    sr.attr.mode = S_IFREG | 0600;
    is_int(bfs_sync_setattr(v.afr, v.st, &sr, NULL), 0, "chmod 600 with c0 down");
    struct bfs_setxattr_req xr = {.xattrs = bfs_dict_new()};
    xr.loc.gfid = a.gfid;
    bfs_dict_set_bin(xr.xattrs, "user.colour", "blue", 4);
    is_int(bfs_sync_setxattr(v.afr, v.st, &xr, NULL), 0, "setxattr with c0 down");
    bfs_dict_unref(xr.xattrs);
    ok(counter(&v, 1, "m", "c0", 1) > 0, "metadata counter blames c0");
    up(&v, 0, true);
    is_int(lookup(&v, &bfs_gfid_root, "m", NULL), 0, "lookup after c0 returns");
    struct stat st;
    char val[16] = "";
    ok(stat(on(&v, 0, "m"), &st) == 0 && (st.st_mode & 07777) == 0600, "mode healed on c0");
    ok(getxattr(on(&v, 0, "m"), "user.colour", val, sizeof(val)) == 4 &&
           memcmp(val, "blue", 4) == 0,
       "user xattr healed on c0");
    ok(clean_soon(&v, "m"), "counters clean");
    ok(same_everywhere(&v, "m", 7, -1), "the three copies are identical");
    vol_close(&v);
}

static void test_quorum(void)
{
    struct vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    char buf[32];
    if (vol_open(&v, 3, false, " option cluster.quorum-type auto\n") < 0)
        return;
    put(&v, &bfs_gfid_root, "q", "quorum", &a);
    is_int(open_(&v, &a.gfid, O_RDWR, &fd), 0, "open");
    down(&v, 1, true);
    down(&v, 2, true);
    is_int(write_(&v, fd, 0, "x", 1), -EROFS, "auto quorum, 1 of 3 up: write fails EROFS");
    is_int(create(&v, &bfs_gfid_root, "q2", NULL, NULL), -EROFS, "create fails EROFS");
    is_int(read_(&v, fd, buf, sizeof(buf)), 6, "reads go on");
    is_int(lookup(&v, &bfs_gfid_root, "q", NULL), 0, "lookups go on");
    ok(content_is(&v, 0, "q", "quorum"), "nothing was changed");
    up(&v, 1, true);
    is_int(write_(&v, fd, 0, "Q", 1), 1, "2 of 3 up: writes again");
    flush_close(&v, fd);
    up(&v, 2, true);
    vol_close(&v);

    if (vol_open(&v, 3, false, " option cluster.quorum-type fixed\n"
                               " option cluster.quorum-count 3\n") < 0)
        return;
    put(&v, &bfs_gfid_root, "q", "quorum", &a);
    down(&v, 2, true);
    is_int(put(&v, &bfs_gfid_root, "q3", "x", NULL), -EROFS, "fixed 3, 2 up: EROFS");
    vol_close(&v);
}

/* A write that loses its quorum is not acknowledged, and the copy that took
 * it anyway must not become the file (tests/integration/212): replica 3,
 * c0 away; c2 fails the next write (it dies under it), so c1 alone took
 * it: EROFS. c1 marks its own copy (pending[c1][c1]) and does not blame
 * c2; while c1's is the only copy here, reads refuse it (ENOTCONN); once
 * c2 is back, the heal takes c2's copy and the failed write is gone. */
static void test_quorum_lost_write(void)
{
    struct vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    char buf[64];
    if (vol_open(&v, 3, false, " option cluster.read-policy first-up\n") < 0)
        return;
    put(&v, &bfs_gfid_root, "u", "before", &a);
    down(&v, 0, true);
    is_int(open_(&v, &a.gfid, O_RDWR, &fd), 0, "open");
    is_int(write_(&v, fd, 6, "+ok", 3), 3, "2 of 3 up: a write is acknowledged");
    reconf(&v, 2, "enable", "write");
    reconf(&v, 2, "failure", "100");
    is_int(write_(&v, fd, 9, "+LOST", 5), -EROFS, "c2 fails the next one: c1 alone took it");
    ok(content_is(&v, 1, "u", "before+ok+LOST"), "c1's copy has it");
    ok(counter(&v, 1, "u", "c1", 0) > 0, "c1 marks its copy: an unacknowledged change");
    is_int(counter(&v, 1, "u", "c2", 0), 0, "and does not blame c2");
    ok(counter(&v, 1, "u", "c0", 0) > 0, "c0 is still blamed for what it missed");
    down(&v, 2, true);
    reconf(&v, 2, "enable", "all");
    is_int(read_(&v, fd, buf, sizeof(buf)), -ENOTCONN,
           "c1's copy alone: not read (the good copy is away)");
    is_int(flush_close(&v, fd), 0, "close");
    up(&v, 2, true);
    is_int(lookup(&v, &bfs_gfid_root, "u", NULL), 0, "c2 back: lookup heals");
    ok(content_is(&v, 1, "u", "before+ok") && content_is(&v, 2, "u", "before+ok"),
       "from c2: the failed write is undone on c1");
    is_int(counter(&v, 1, "u", "c1", 0), 0, "the mark is gone");
    is_int(open_(&v, &a.gfid, O_RDONLY, &fd), 0, "open");
    is_int(read_(&v, fd, buf, sizeof(buf)), 9, "read");
    ok(memcmp(buf, "before+ok", 9) == 0, "what was acknowledged, nothing else");
    flush_close(&v, fd);
    up(&v, 0, true);
    is_int(lookup(&v, &bfs_gfid_root, "u", NULL), 0, "c0 back: lookup heals");
    ok(same_everywhere(&v, "u", 7, -1) && content_is(&v, 0, "u", "before+ok"), "one copy");
    ok(clean_soon(&v, "u"), "counters clean");
    vol_close(&v);
}

/* The attributes of "f" in a readdirplus of the root served by child c
 * (the other children fail readdir): its size, or -1 if the entry came
 * without attributes, -2 if it was not listed or the call failed. */
static long long plus_size_from(struct vol *v, int c)
{
    for (int i = 0; i < v->n; i++) {
        reconf(v, i, "enable", "readdir");
        reconf(v, i, "failure", i == c ? "0" : "100");
    }
    struct bfs_fd *dfd = bfs_fd_new(v->g, NULL, O_RDONLY, 1);
    struct bfs_opendir_req oreq = {.fd = dfd};
    oreq.loc.gfid = bfs_gfid_root;
    long long size = -2;
    if (bfs_sync_opendir(v->afr, v->st, &oreq, NULL) == 0) {
        struct bfs_readdir_req rr = {.fd = dfd, .size = 4096, .plus = true};
        struct bfs_readdir_rep rep;
        if (bfs_sync_readdir(v->afr, v->st, &rr, &rep) >= 0) {
            for (uint32_t k = 0; k < rep.entries.count; k++)
                if (strcmp(rep.entries.v[k].name, "f") == 0)
                    size = rep.entries.v[k].has_attr ? (long long)rep.entries.v[k].attr.size : -1;
            bfs_readdir_rep_clear_dup(&rep);
        }
    }
    bfs_fd_unref(dfd);
    for (int i = 0; i < v->n; i++) {
        reconf(v, i, "failure", "0");
        reconf(v, i, "enable", "all");
    }
    return size;
}

/* A readdirplus answered by a copy whose data of a file is not good must
 * not carry that file's attributes: the kernel caches them (a size 0 from
 * a brick the heal has not filled yet hid the data of files in
 * tests/integration/243, replace-brick). */
static void test_readdirplus_attrs(void)
{
    struct vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    if (vol_open(&v, 3, false, " option cluster.data-self-heal off\n") < 0)
        return;
    put(&v, &bfs_gfid_root, "f", "hello", &a);
    is_int(plus_size_from(&v, 2), 5, "c2 never went away: its attributes go up");
    down(&v, 2, true);
    is_int(open_(&v, &a.gfid, O_RDWR, &fd), 0, "open");
    is_int(write_(&v, fd, 0, "hello, world", 12), 12, "a write c2 misses");
    flush_close(&v, fd);
    up(&v, 2, true);
    is_int(lookup(&v, &bfs_gfid_root, "f", NULL), 0, "lookup (data heal off: c2 stays stale)");
    is_int(plus_size_from(&v, 0), 12, "served by a good copy: attributes kept");
    is_int(plus_size_from(&v, 2), -1, "served by the stale c2: no attributes (the kernel looks up)");
    vol_close(&v);
    if (vol_open(&v, 3, true, NULL) < 0)
        return;
    put(&v, &bfs_gfid_root, "f", "hello", &a);
    is_int(plus_size_from(&v, 2), -1, "served by the arbiter: no file attributes (it has no data)");
    is_int(plus_size_from(&v, 1), 5, "by a data copy: kept");
    vol_close(&v);
}

/* Replica 2, quorum none: a write with c0 failing, then one with c1
 * failing. Returns the file's GFID. */
static void provoke_split(struct vol *v, const char *name, struct bfs_iatt *a)
{
    struct bfs_fd *fd;
    put(v, &bfs_gfid_root, name, "0123456789", a);
    down(v, 0, false);
    open_(v, &a->gfid, O_RDWR, &fd);
    write_(v, fd, 0, "BBBBBBBBBBBBBBBBBBBB", 20); /* c1: 20 bytes */
    flush_close(v, fd);
    up(v, 0, false);
    usleep(20000); /* distinct mtimes */
    down(v, 1, false);
    open_(v, &a->gfid, O_RDWR, &fd);
    write_(v, fd, 0, "AAA", 3); /* c0: still 10 bytes, newer */
    flush_close(v, fd);
    up(v, 1, false);
}

static void test_split_brain(void)
{
    struct vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    char buf[64];
    if (vol_open(&v, 2, false, " option cluster.quorum-type none\n") < 0)
        return;
    provoke_split(&v, "sb", &a);
    ok(counter(&v, 0, "sb", "c1", 0) > 0 && counter(&v, 1, "sb", "c0", 0) > 0,
       "each copy blames the other");
    is_int(lookup(&v, &bfs_gfid_root, "sb", NULL), 0, "lookup of a split-brain file succeeds");
    is_int(open_(&v, &a.gfid, O_RDONLY, &fd), 0, "open succeeds");
    is_int(read_(&v, fd, buf, sizeof(buf)), -EIO, "read: EIO, never one side at random");
    flush_close(&v, fd);
    ok(content_is(&v, 0, "sb", "AAA3456789") && content_is(&v, 1, "sb", "BBBBBBBBBBBBBBBBBBBB"),
       "both copies untouched");

    afr_set(&v, "cluster.favorite-child-policy", "size");
    is_int(lookup(&v, &bfs_gfid_root, "sb", NULL), 0, "lookup with favorite-child size");
    ok(content_is(&v, 0, "sb", "BBBBBBBBBBBBBBBBBBBB"), "the bigger copy won");
    ok(clean_soon(&v, "sb"), "counters clean after resolution");
    is_int(open_(&v, &a.gfid, O_RDONLY, &fd), 0, "open");
    is_int(read_(&v, fd, buf, sizeof(buf)), 20, "read works again");
    flush_close(&v, fd);

    afr_set(&v, "cluster.favorite-child-policy", "none");
    provoke_split(&v, "sb2", &a);
    afr_set(&v, "cluster.favorite-child-policy", "mtime");
    is_int(lookup(&v, &bfs_gfid_root, "sb2", NULL), 0, "lookup with favorite-child mtime");
    ok(content_is(&v, 1, "sb2", "AAA3456789") && content_is(&v, 0, "sb2", "AAA3456789"),
       "the newer copy won");
    ok(clean_soon(&v, "sb2"), "counters clean");
    vol_close(&v);
}

static void test_entry_merge(void)
{
    struct vol v;
    if (vol_open(&v, 2, false, " option cluster.quorum-type none\n") < 0)
        return;
    mkdir_(&v, &bfs_gfid_root, "dir", NULL);
    struct bfs_iatt d;
    lookup(&v, &bfs_gfid_root, "dir", &d);
    down(&v, 1, false);
    is_int(put(&v, &d.gfid, "only-on-c0", "zero", NULL), 0, "create with c1 failing");
    up(&v, 1, false);
    down(&v, 0, false);
    is_int(put(&v, &d.gfid, "only-on-c1", "one", NULL), 0, "create with c0 failing");
    up(&v, 0, false);
    ok(counter(&v, 0, "dir", "c1", 2) > 0 && counter(&v, 1, "dir", "c0", 2) > 0,
       "the directory's entry counters blame each other");
    is_int(lookup(&v, &bfs_gfid_root, "dir", NULL), 0, "lookup of the directory");
    ok(exists(&v, 0, "dir/only-on-c1") && exists(&v, 1, "dir/only-on-c0"),
       "entry split-brain merged: every name on every copy");
    ok(clean_soon(&v, "dir"), "and the counters clean");
    is_int(lookup(&v, &d.gfid, "only-on-c1", NULL), 0, "lookup of a merged name");
    ok(same_everywhere(&v, "dir/only-on-c1", 3, -1), "its data healed too");
    vol_close(&v);
}

static void test_arbiter(void)
{
    struct vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    struct stat st;
    if (vol_open(&v, 3, true, NULL) < 0)
        return;
    is_int(put(&v, &bfs_gfid_root, "arb", "payload", NULL), 0, "replica 3 arbiter 1: write");
    is_int(lookup(&v, &bfs_gfid_root, "arb", &a), 0, "lookup");
    ok(same_gfid(&v, "arb", 7), "same GFID on the data bricks and the arbiter");
    ok(content_is(&v, 0, "arb", "payload") && content_is(&v, 1, "arb", "payload"),
       "data on both data bricks");
    ok(stat(on(&v, 2, "arb"), &st) == 0 && st.st_size == 0, "the arbiter holds no data");
    is_int(a.size, 7, "the size answered is a data brick's");

    down(&v, 0, true);
    open_(&v, &a.gfid, O_RDWR, &fd);
    is_int(write_(&v, fd, 0, "PAYLOAD", 7), 7, "write with c0 down (c1 + arbiter)");
    flush_close(&v, fd);
    ok(counter(&v, 2, "arb", "c0", 0) > 0, "the arbiter blames c0 too");
    up(&v, 0, true);
    down(&v, 1, true);
    is_int(open_(&v, &a.gfid, O_RDWR, &fd), 0, "open with c1 down");
    is_int(write_(&v, fd, 0, "xx", 2), -ENOTCONN,
           "c0 (stale) + arbiter only: the write is refused, no split-brain");
    flush_close(&v, fd);
    ok(content_is(&v, 0, "arb", "payload"), "c0 untouched");
    up(&v, 1, true);
    is_int(lookup(&v, &bfs_gfid_root, "arb", NULL), 0, "lookup with everyone back");
    ok(content_is(&v, 0, "arb", "PAYLOAD"), "c0 healed from c1");
    ok(stat(on(&v, 2, "arb"), &st) == 0 && st.st_size == 0, "the arbiter still has no data");
    ok(clean_soon(&v, "arb"), "counters clean");
    ok(same_everywhere(&v, "arb", 7, 2), "data copies identical, arbiter metadata too");
    vol_close(&v);
}

static void test_eager_lock(void)
{
    struct vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    if (vol_open(&v, 3, false, " option cluster.post-op-delay-ms 5000\n") < 0)
        return;
    put(&v, &bfs_gfid_root, "e", "", &a);
    open_(&v, &a.gfid, O_RDWR, &fd);
    write_(&v, fd, 0, "w", 1);
    usleep(100000); /* the create's post-op and unlock run behind its answer */
    uint64_t before = calls_of(&v, 0);
    int bad = 0;
    for (int i = 1; i <= 50; i++)
        bad += write_(&v, fd, (uint64_t)i, "w", 1) != 1;
    uint64_t during = calls_of(&v, 0) - before;
    is_int(bad, 0, "50 sequential writes");
    ok(during >= 50 && during <= 52, "about one call per write on a child (no lock, no "
                                     "xattrop; %llu calls)", (unsigned long long)during);
    is_int(counter(&v, 0, "e", "dirty", 0), 1, "while writing, the dirty mark stays (delayed post-op)");
    flush_close(&v, fd);
    is_int(counter(&v, 0, "e", "dirty", 0), 0, "close ends it: post-op done");
    ok(clean_soon(&v, "e"), "counters clean");
    vol_close(&v);
}

static void test_read_failover(void)
{
    struct vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    char buf[32];
    if (vol_open(&v, 3, false, " option cluster.read-policy first-up\n") < 0)
        return;
    put(&v, &bfs_gfid_root, "r", "readme", &a);
    open_(&v, &a.gfid, O_RDONLY, &fd);
    reconf(&v, 0, "error-no", "EIO");
    reconf(&v, 0, "enable", "read");
    reconf(&v, 0, "failure", "100");
    is_int(read_(&v, fd, buf, sizeof(buf)), 6, "first-up child fails reads: another copy answers");
    ok(memcmp(buf, "readme", 6) == 0, "with the right data");
    reconf(&v, 0, "failure", "0");
    flush_close(&v, fd);
    vol_close(&v);
}

static void test_replica2_quorum(void)
{
    struct vol v;
    if (vol_open(&v, 2, false, NULL) < 0) /* quorum-type auto by default */
        return;
    down(&v, 1, true);
    is_int(put(&v, &bfs_gfid_root, "first", "x", NULL), 0,
           "replica 2, auto: the first child alone has quorum");
    up(&v, 1, true);
    is_int(lookup(&v, &bfs_gfid_root, NULL, NULL), 0, "root lookup heals the entry");
    down(&v, 0, true);
    is_int(put(&v, &bfs_gfid_root, "second", "x", NULL), -EROFS,
           "replica 2, auto: the second child alone has not");
    up(&v, 0, true);
    is_int(lookup(&v, &bfs_gfid_root, "first", NULL), 0, "lookup first: its own heal");
    ok(same_everywhere(&v, "first", 3, -1), "first healed onto c1");
    vol_close(&v);
}

static void test_reads_avoid_stale(void)
{
    struct vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    char buf[32];
    if (vol_open(&v, 3, false, " option cluster.read-policy first-up\n"
                               " option cluster.data-self-heal off\n") < 0)
        return;
    put(&v, &bfs_gfid_root, "s", "stale", &a);
    reconf(&v, 0, "error-no", "ENOSPC");
    reconf(&v, 0, "enable", "write");
    reconf(&v, 0, "failure", "100");
    is_int(open_(&v, &a.gfid, O_RDWR, &fd), 0, "open");
    is_int(write_(&v, fd, 0, "FRESH", 5), 5, "a write that fails on c0 only (ENOSPC)");
    flush_close(&v, fd);
    reconf(&v, 0, "failure", "0");
    ok(counter(&v, 1, "s", "c0", 0) > 0, "c0 is blamed");
    ok(content_is(&v, 0, "s", "stale"), "c0 kept the old data");
    is_int(lookup(&v, &bfs_gfid_root, "s", NULL), 0, "lookup (data heal off)");
    is_int(open_(&v, &a.gfid, O_RDONLY, &fd), 0, "open");
    is_int(read_(&v, fd, buf, sizeof(buf)), 5, "read");
    ok(memcmp(buf, "FRESH", 5) == 0, "first-up policy, yet the read avoids the stale c0");
    flush_close(&v, fd);
    vol_close(&v);
}

static void test_background_heal(void)
{
    struct vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    if (vol_open(&v, 3, false, " option cluster.background-self-heal-count 8\n") < 0)
        return;
    put(&v, &bfs_gfid_root, "bg", "before", &a);
    down(&v, 2, false);
    open_(&v, &a.gfid, O_RDWR, &fd);
    write_(&v, fd, 0, "AFTER!", 6);
    flush_close(&v, fd);
    up(&v, 2, false);
    is_int(lookup(&v, &bfs_gfid_root, "bg", NULL), 0, "lookup answers at once");
    bool healed = false;
    for (int i = 0; i < 300 && !healed; i++) {
        healed = content_is(&v, 2, "bg", "AFTER!") && all_clean(&v, "bg");
        if (!healed)
            usleep(10000);
    }
    ok(healed, "the background heal made c2's copy equal and the counters clean");
    vol_close(&v);
}

static void test_rename_symlink_heal(void)
{
    struct vol v;
    struct bfs_iatt a;
    if (vol_open(&v, 3, false, NULL) < 0)
        return;
    put(&v, &bfs_gfid_root, "old", "renamed content", &a);
    down(&v, 1, true);
    struct bfs_rename_req rr = {.oldloc = L(&bfs_gfid_root, "old"),
                                .newloc = L(&bfs_gfid_root, "new")};
    is_int(bfs_sync_rename(v.afr, v.st, &rr, NULL), 0, "rename with c1 down");
    struct bfs_symlink_req sr = {.target = "new", .loc = L(&bfs_gfid_root, "ln")};
    is_int(bfs_sync_symlink(v.afr, v.st, &sr, NULL), 0, "symlink with c1 down");
    struct bfs_setxattr_req xr = {.xattrs = bfs_dict_new()};
    xr.loc.gfid = a.gfid;
    bfs_dict_set_bin(xr.xattrs, "user.tag", "t1", 2);
    is_int(bfs_sync_setxattr(v.afr, v.st, &xr, NULL), 0, "setxattr with c1 down");
    bfs_dict_unref(xr.xattrs);
    up(&v, 1, true);
    is_int(lookup(&v, &bfs_gfid_root, NULL, NULL), 0, "root lookup after c1 returns");
    ok(!exists(&v, 1, "old") && exists(&v, 1, "new"), "the rename reached c1");
    ok(same_gfid(&v, "new", 7), "as the same file (same GFID)");
    char t[16] = "";
    ok(readlink(on(&v, 1, "ln"), t, sizeof(t)) == 3 && memcmp(t, "new", 3) == 0,
       "the symlink was made on c1 with its target");
    ok(same_gfid(&v, "ln", 7), "with its GFID");
    is_int(lookup(&v, &bfs_gfid_root, "new", NULL), 0, "lookup new: metadata heal");
    ok(same_everywhere(&v, "new", 7, -1), "copies identical: content, mode, owner, xattrs");
    ok(clean_soon(&v, "new") && clean_soon(&v, ""), "counters clean");
    vol_close(&v);
}


/* The unlock of a change runs behind its answer. A brick that goes away
 * (its connection closes) between the answer and the unlock drops the
 * lock itself: the next heal, once the brick is back, must not wait for a
 * lock nobody holds any more. */
static void test_unlock_lost_on_down(void)
{
    struct vol v;
    if (vol_open(&v, 3, false, NULL) < 0)
        return;
    /* c1 answers xattrops late: the create's post-op is still out when the
     * caller has its answer and c1 goes down, so its unlock on c1 fails */
    reconf(&v, 1, "enable", "xattrop");
    reconf(&v, 1, "delay-ms", "300");
    is_int(create(&v, &bfs_gfid_root, "f", NULL, NULL), 0, "create (post-op on c1 slow)");
    reconf(&v, 1, "enable", "all");
    reconf(&v, 1, "delay-ms", "0");
    down(&v, 1, true);
    bool unlocked = false; /* c2 is unlocked after c1's unlock was tried */
    for (int i = 0; i < 500 && !unlocked; i++) {
        unlocked = entrylk_on(&v, 2, &bfs_gfid_root, "f", true, 77) == 0;
        if (!unlocked)
            usleep(10000);
    }
    ok(unlocked, "the create's lock is released on c2");
    entrylk_on(&v, 2, &bfs_gfid_root, "f", false, 77);
    up(&v, 1, true);
    is_int(lookup_within(&v, &bfs_gfid_root, NULL, 20000, "root lookup"), 0,
           "root lookup after c1 returns answers");
    ok(clean_soon(&v, ""), "and the root's dirty mark on c1 was healed");
    vol_close(&v);
}

/* Heals take their locks without waiting for ever: a lock held elsewhere
 * (another client that stopped while holding it) delays a foreground heal
 * by cluster.heal-lock-timeout at most; the lookup answers from a good
 * copy and the heal happens on a later access. */
static void test_heal_lock_busy(void)
{
    struct vol v;
    struct bfs_iatt a;
    if (vol_open(&v, 3, false, " option cluster.heal-lock-timeout 1\n") < 0)
        return;
    down(&v, 2, true);
    is_int(mkdir_(&v, &bfs_gfid_root, "d", &a), 0, "mkdir with c2 down");
    up(&v, 2, true);
    is_int(entrylk_on(&v, 1, &bfs_gfid_root, "x", true, 99), 0, "another client locks a name");
    is_int(lookup_within(&v, &bfs_gfid_root, NULL, 20000, "root lookup"), 0,
           "root lookup answers although the heal cannot lock");
    ok(!exists(&v, 2, "d"), "c2 not healed while the lock is held");
    is_int(entrylk_on(&v, 1, &bfs_gfid_root, "x", false, 99), 0, "the other client unlocks");
    is_int(lookup_within(&v, &bfs_gfid_root, NULL, 20000, "root lookup"), 0, "root lookup");
    ok(exists(&v, 2, "d") && same_gfid(&v, "d", 7), "now the heal made d on c2");
    ok(clean_soon(&v, ""), "counters clean");
    vol_close(&v);
}


/* Data heal by checksums: a 4 MiB file whose copy on c2 missed one small
 * write heals by writing that one 128 KiB block to c2 and reading nothing
 * of c2's copy (rchecksum compares); a sink that cannot answer rchecksum
 * is compared by reads and still gets only the block that differs. */
static void heal_one_block(struct vol *v, const char *name, bool sink_sums)
{
    struct bfs_iatt a;
    struct bfs_fd *fd;
    enum { SIZE = 4 << 20, CHUNK = 1 << 20 };
    char *buf = malloc(CHUNK);
    unsigned seed = 12345;
    create(v, &bfs_gfid_root, name, &fd, &a);
    for (int off = 0; off < SIZE; off += CHUNK) {
        for (int i = 0; i < CHUNK; i++)
            buf[i] = (char)(rand_r(&seed) & 0xff);
        write_(v, fd, (uint64_t)off, buf, CHUNK);
    }
    flush_close(v, fd);
    free(buf);
    down(v, 2, true);
    open_(v, &a.gfid, O_RDWR, &fd);
    is_int(write_(v, fd, (1 << 20) + 5, "a change in block 8", 19), 19, "write with c2 down");
    flush_close(v, fd);
    up(v, 2, true);
    if (!sink_sums) { /* c2 an older brick: rchecksum unknown */
        reconf(v, 2, "enable", "rchecksum");
        reconf(v, 2, "error-no", "ENOSYS");
        reconf(v, 2, "failure", "100");
    }
    ok(!same_bytes(v, 0, 2, name), "c2's copy differs");
    uint64_t w0 = brick_stat(v, 2, "bytes_written"), r0 = brick_stat(v, 2, "bytes_read");
    is_int(lookup(v, &bfs_gfid_root, name, NULL), 0, "lookup: data heal");
    uint64_t written = brick_stat(v, 2, "bytes_written") - w0;
    uint64_t read = brick_stat(v, 2, "bytes_read") - r0;
    ok(same_bytes(v, 0, 2, name) && same_bytes(v, 1, 2, name), "c2's copy healed");
    ok(all_clean(v, name), "counters clean");
    is_int((long long)written, 128 << 10, "only the block that differs was written to c2");
    if (sink_sums)
        is_int((long long)read, 0, "c2's copy was compared by checksums, not read");
    else
        is_int((long long)read, SIZE, "without rchecksum c2's copy was read to compare");
    if (!sink_sums) {
        reconf(v, 2, "failure", "0");
        reconf(v, 2, "error-no", "ENOTCONN");
        reconf(v, 2, "enable", "all");
    }
}

static void test_checksum_heal(void)
{
    struct vol v;
    if (vol_open(&v, 3, false, NULL) < 0)
        return;
    heal_one_block(&v, "big", true);
    heal_one_block(&v, "big-old-sink", false);
    /* rchecksum itself, on one brick */
    struct bfs_iatt a;
    lookup(&v, &bfs_gfid_root, "big", &a);
    struct bfs_fd *fd;
    open_(&v, &a.gfid, O_RDONLY, &fd);
    struct bfs_rchecksum_req rq = {.fd = fd, .offset = 0, .len = 300 << 10, .block = 128 << 10};
    struct bfs_rchecksum_rep rp;
    is_int(bfs_sync_rchecksum(child(&v, 0), v.st, &rq, &rp), 3, "rchecksum: 3 blocks");
    ok(rp.size == 4 << 20 && rp.sums.len == 96, "32 bytes each, and the file's size");
    bfs_rchecksum_rep_clear_dup(&rp);
    rq.offset = (4 << 20) - 1000;
    is_int(bfs_sync_rchecksum(child(&v, 0), v.st, &rq, &rp), 1, "a range across EOF: 1 block");
    bfs_rchecksum_rep_clear_dup(&rp);
    rq.block = 100;
    is_int(bfs_sync_rchecksum(child(&v, 0), v.st, &rq, &rp), -EINVAL, "a tiny block: EINVAL");
    bfs_rchecksum_rep_clear_dup(&rp);
    flush_close(&v, fd);
    vol_close(&v);
}


/* Blocking locks from above (inodelk SETLKW, as a translator over
 * replicate or an application's fcntl(F_SETLKW) sends them) must be taken
 * in child order, never all at once: two lockers racing may each win a
 * different copy first, and then each waits for the other for ever. The
 * invariant that rules it out: a request waiting for copy i holds no copy
 * after i. Here c1 is held elsewhere (owner D): A's request, while it
 * waits for c1, must not hold c2. */
struct lk_call {
    struct vol *v;
    struct bfs_gfid g;
    uint64_t owner;
    bool lock;
    int rc;
    bool done;
    pthread_mutex_t m;
    pthread_cond_t c;
};

static void *lk_call_main(void *arg)
{
    struct lk_call *k = arg;
    struct bfs_stack *st = bfs_stack_new();
    st->lk_owner = k->owner;
    struct bfs_inodelk_req req = {.domain = "app", .cmd = k->lock ? BFS_LK_SETLKW : BFS_LK_SETLK};
    req.loc.gfid = k->g;
    req.lock.type = k->lock ? F_WRLCK : F_UNLCK;
    req.lock.whence = SEEK_SET;
    req.lock.owner = k->owner;
    int rc = bfs_sync_inodelk(k->v->afr, st, &req, NULL);
    bfs_stack_unref(st);
    pthread_mutex_lock(&k->m);
    k->rc = rc;
    k->done = true;
    pthread_cond_signal(&k->c);
    pthread_mutex_unlock(&k->m);
    return NULL;
}

static void lk_start(struct lk_call *k, pthread_t *th, struct vol *v, const struct bfs_gfid *g,
                     uint64_t owner, bool lock)
{
    memset(k, 0, sizeof(*k));
    k->v = v;
    k->g = *g;
    k->owner = owner;
    k->lock = lock;
    pthread_mutex_init(&k->m, NULL);
    pthread_cond_init(&k->c, NULL);
    pthread_create(th, NULL, lk_call_main, k);
}

/* Waits up to ms for the call; bails out (the test cannot go on) if it hangs. */
static int lk_wait(struct lk_call *k, pthread_t th, int ms, const char *what)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    pthread_mutex_lock(&k->m);
    while (!k->done && pthread_cond_timedwait(&k->c, &k->m, &ts) == 0)
        ;
    bool done = k->done;
    pthread_mutex_unlock(&k->m);
    if (!done) {
        printf("not ok %d - %s: no answer within %d ms (deadlock)\n", ++tap_n, what, ms);
        printf("Bail out! a lock request hangs\n");
        fflush(stdout);
        _exit(1);
    }
    pthread_join(th, NULL);
    return k->rc;
}

static int inodelk_on(struct vol *v, int i, const struct bfs_gfid *g, uint64_t owner, bool lock)
{
    struct bfs_stack *st = bfs_stack_new();
    st->lk_owner = owner;
    struct bfs_inodelk_req req = {.domain = "app", .cmd = BFS_LK_SETLK};
    req.loc.gfid = *g;
    req.lock.type = lock ? F_WRLCK : F_UNLCK;
    req.lock.whence = SEEK_SET;
    req.lock.owner = owner;
    int rc = bfs_sync_inodelk(child(v, i), st, &req, NULL);
    bfs_stack_unref(st);
    return rc;
}

static void test_lock_order(void)
{
    struct vol v;
    struct bfs_iatt a;
    if (vol_open(&v, 3, false, NULL) < 0)
        return;
    put(&v, &bfs_gfid_root, "lk", "x", &a);
    enum { A = 0xa1, D = 0xd4, E = 0xe5 };
    is_int(inodelk_on(&v, 1, &a.gfid, D, true), 0, "another owner holds c1");
    struct lk_call ka, ku;
    pthread_t ta, tu;
    lk_start(&ka, &ta, &v, &a.gfid, A, true);
    bool c0_held = false; /* A has reached c0 (and waits for c1) */
    for (int i = 0; i < 500 && !c0_held; i++) {
        c0_held = inodelk_on(&v, 0, &a.gfid, E, true) == -EAGAIN;
        if (!c0_held) {
            inodelk_on(&v, 0, &a.gfid, E, false);
            usleep(10000);
        }
    }
    ok(c0_held, "A holds c0 and waits for c1");
    int rc2 = inodelk_on(&v, 2, &a.gfid, E, true);
    is_int(rc2, 0, "while it waits for c1, A holds nothing on c2");
    if (rc2 == 0)
        inodelk_on(&v, 2, &a.gfid, E, false);
    ok(!ka.done, "A still waits");
    is_int(inodelk_on(&v, 1, &a.gfid, D, false), 0, "the other owner lets go of c1");
    is_int(lk_wait(&ka, ta, 20000, "A's lock"), 0, "A gets the lock");
    is_int(inodelk_on(&v, 2, &a.gfid, E, true), -EAGAIN, "on every copy");
    lk_start(&ku, &tu, &v, &a.gfid, A, false);
    is_int(lk_wait(&ku, tu, 20000, "A's unlock"), 0, "A unlocks");
    for (int i = 0; i < 3; i++) {
        is_int(inodelk_on(&v, i, &a.gfid, E, true), 0, "nothing left held");
        inodelk_on(&v, i, &a.gfid, E, false);
    }
    /* uncontended: one parallel round, granted everywhere */
    lk_start(&ka, &ta, &v, &a.gfid, A, true);
    is_int(lk_wait(&ka, ta, 20000, "A's lock"), 0, "an uncontended blocking lock");
    lk_start(&ku, &tu, &v, &a.gfid, A, false);
    is_int(lk_wait(&ku, tu, 20000, "A's unlock"), 0, "and its unlock");
    vol_close(&v);
}


/* cluster.quorum-reads: without quorum a read may see a copy that missed
 * acknowledged writes (replica 2: c0 took a write alone, then c1 alone is
 * asked); with the option on it answers ENOTCONN instead. */
static void test_quorum_reads(void)
{
    struct vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    char buf[16] = "";
    if (vol_open(&v, 2, false, NULL) < 0)
        return;
    put(&v, &bfs_gfid_root, "q", "old", &a);
    down(&v, 1, true);
    open_(&v, &a.gfid, O_RDWR, &fd);
    is_int(write_(&v, fd, 0, "new", 3), 3, "c0 alone takes a write (it has quorum)");
    flush_close(&v, fd);
    up(&v, 1, true);
    down(&v, 0, true);
    open_(&v, &a.gfid, O_RDONLY, &fd);
    is_int(read_(&v, fd, buf, sizeof(buf)), 3, "quorum-reads off: c1 alone answers a read...");
    ok(memcmp(buf, "old", 3) == 0, "...with its older copy");
    afr_set(&v, "cluster.quorum-reads", "on");
    is_int(read_(&v, fd, buf, sizeof(buf)), -ENOTCONN, "quorum-reads on: refused");
    struct bfs_stat_req sr = {0};
    sr.loc.gfid = a.gfid;
    is_int(bfs_sync_stat(v.afr, v.st, &sr, NULL), -ENOTCONN, "stat too");
    is_int(lookup(&v, &bfs_gfid_root, "q", NULL), 0, "lookups go on (names stay visible)");
    flush_close(&v, fd);
    up(&v, 0, true);
    open_(&v, &a.gfid, O_RDONLY, &fd);
    is_int(read_(&v, fd, buf, sizeof(buf)), 3, "with quorum again reads work...");
    ok(memcmp(buf, "new", 3) == 0, "...and see the acknowledged write");
    flush_close(&v, fd);
    vol_close(&v);
}


/* A brick that hangs (SIGSTOP) and is then declared down: every call to
 * it answers ENOTCONN late, then CHILD_DOWN. Changes through an fd in
 * flight meanwhile must succeed on the two others (quorum), never EIO. */
struct trunc_loop {
    struct vol *v;
    struct bfs_gfid g;
    volatile bool stop;
    int ops, errors, last_err;
};

static void *trunc_main(void *arg)
{
    struct trunc_loop *t = arg;
    struct bfs_stack *st = bfs_stack_new();
    unsigned seed = 7;
    while (!t->stop) {
        struct bfs_inode *inode = bfs_inode_get(t->v->g->itable, &t->g, S_IFREG);
        struct bfs_fd *fd = bfs_fd_new(t->v->g, inode, O_WRONLY, 0);
        bfs_inode_unref(inode);
        struct bfs_open_req oq = {.fd = fd, .flags = O_WRONLY};
        oq.loc.gfid = t->g;
        int rc = bfs_sync_open(t->v->afr, st, &oq, NULL);
        if (rc == 0) {
            struct bfs_ftruncate_req tq = {.fd = fd, .offset = rand_r(&seed) % 5000};
            rc = bfs_sync_ftruncate(t->v->afr, st, &tq, NULL);
            if (rc >= 0) {
                struct bfs_fsync_req fq = {.fd = fd};
                rc = bfs_sync_fsync(t->v->afr, st, &fq, NULL);
            }
            struct bfs_flush_req cq = {.fd = fd};
            int frc = bfs_sync_flush(t->v->afr, st, &cq, NULL);
            rc = rc < 0 ? rc : frc;
        }
        bfs_fd_unref(fd);
        t->ops++;
        if (rc < 0) {
            t->errors++;
            t->last_err = rc;
        }
    }
    bfs_stack_unref(st);
    return NULL;
}

static void test_hung_brick(void)
{
    struct vol v;
    struct bfs_iatt a;
    if (vol_open(&v, 3, false, NULL) < 0)
        return;
    put(&v, &bfs_gfid_root, "t", "0123456789", &a);
    struct trunc_loop t = {.v = &v, .g = a.gfid};
    pthread_t th;
    pthread_create(&th, NULL, trunc_main, &t);
    for (int round = 0; round < 5; round++) {
        usleep(100000);
        reconf(&v, 1, "delay-ms", "300"); /* hangs ... */
        reconf(&v, 1, "failure", "100");
        usleep(350000);
        down(&v, 1, true);                /* ... then the ping timeout */
        reconf(&v, 1, "delay-ms", "0");
        usleep(100000);
        up(&v, 1, true);
    }
    t.stop = true;
    pthread_join(th, NULL);
    printf("# %d open/ftruncate/fsync/flush rounds, %d errors (last %d)\n", t.ops, t.errors,
           t.last_err);
    ok(t.ops > 0, "the writer ran");
    is_int(t.errors, 0, "no change failed while c1 hung and went down");
    vol_close(&v);
}

struct writer {
    struct vol *v;
    struct bfs_fd *fd;
    int id, bad;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    char buf[64];
    unsigned seed = (unsigned)w->id * 7919u;
    memset(buf, 'a' + w->id, sizeof(buf));
    for (int i = 0; i < 60; i++) {
        uint64_t off = rand_r(&seed) % 2000; /* overlapping ranges on purpose */
        size_t len = 1 + rand_r(&seed) % sizeof(buf);
        w->bad += write_(w->v, w->fd, off, buf, len) != (int)len;
    }
    return NULL;
}

static void test_concurrent_writes(void)
{
    struct vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    if (vol_open(&v, 3, false, NULL) < 0)
        return;
    put(&v, &bfs_gfid_root, "cw", "", &a);
    open_(&v, &a.gfid, O_RDWR, &fd);
    struct writer w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct writer){.v = &v, .fd = fd, .id = i};
        pthread_create(&th[i], NULL, writer_main, &w[i]);
    }
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        bad += w[i].bad;
    }
    is_int(bad, 0, "4 threads x 60 overlapping writes through one fd");
    flush_close(&v, fd);
    ok(same_everywhere(&v, "cw", 7, -1), "the copies are byte for byte identical");
    ok(clean_soon(&v, "cw"), "counters clean");
    vol_close(&v);
}

static void test_misc_fops(void)
{
    struct vol v;
    struct bfs_iatt a, d;
    struct bfs_fd *fd;
    char buf[32];
    if (vol_open(&v, 3, false, NULL) < 0)
        return;
    mkdir_(&v, &bfs_gfid_root, "dir", &d);
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "e%d", i);
        put(&v, &d.gfid, name, "e", NULL);
    }
    struct bfs_fd *dfd = bfs_fd_new(v.g, NULL, O_RDONLY, 1);
    struct bfs_opendir_req oreq = {.fd = dfd};
    oreq.loc.gfid = d.gfid;
    is_int(bfs_sync_opendir(v.afr, v.st, &oreq, NULL), 0, "opendir");
    int count = 0;
    uint64_t off = 0;
    for (bool eod = false; !eod;) {
        struct bfs_readdir_req rr = {.fd = dfd, .size = 100, .offset = off};
        struct bfs_readdir_rep rep;
        int rc = bfs_sync_readdir(v.afr, v.st, &rr, &rep);
        if (rc < 0)
            break;
        count += (int)rep.entries.count;
        if (rep.entries.count)
            off = rep.entries.v[rep.entries.count - 1].d_off;
        eod = rep.eod || !rep.entries.count;
        bfs_readdir_rep_clear_dup(&rep);
    }
    is_int(count, 5, "readdir in small pieces lists the 5 names once (sticky child)");
    bfs_fd_unref(dfd);

    struct bfs_statfs_req sreq = {0};
    struct bfs_statfs_rep srep;
    sreq.loc.gfid = bfs_gfid_root;
    ok(bfs_sync_statfs(v.afr, v.st, &sreq, &srep) == 0 && srep.buf.bsize > 0, "statfs");
    bfs_statfs_rep_clear_dup(&srep);

    put(&v, &bfs_gfid_root, "t", "to be truncated", &a);
    is_int(open_(&v, &a.gfid, O_RDWR | O_TRUNC, &fd), 0, "open with O_TRUNC");
    struct bfs_fsync_req fs = {.fd = fd};
    is_int(bfs_sync_fsync(v.afr, v.st, &fs, NULL), 0, "fsync");
    struct bfs_lk_req lr = {.fd = fd, .cmd = BFS_LK_SETLK};
    lr.lock.type = F_WRLCK;
    lr.lock.owner = 42;
    is_int(bfs_sync_lk(v.afr, v.st, &lr, NULL), 0, "a POSIX lock on every copy");
    lr.lock.type = F_UNLCK;
    is_int(bfs_sync_lk(v.afr, v.st, &lr, NULL), 0, "and its unlock");
    is_int(read_(&v, fd, buf, sizeof(buf)), 0, "the file reads empty");
    flush_close(&v, fd);
    ok(content_is(&v, 0, "t", "") && content_is(&v, 1, "t", "") && content_is(&v, 2, "t", ""),
       "truncated on every brick");
    ok(clean_soon(&v, "t"), "counters clean");

    /* an entry lock from above that one copy refuses is undone on the others */
    reconf(&v, 1, "error-no", "EAGAIN");
    reconf(&v, 1, "enable", "entrylk");
    reconf(&v, 1, "failure", "100");
    struct bfs_entrylk_req el = {.domain = "above", .basename = "n",
                                 .cmd = BFS_ENTRYLK_LOCK_NB, .type = BFS_ENTRYLK_WRLCK};
    el.loc.gfid = bfs_gfid_root;
    is_int(bfs_sync_entrylk(v.afr, v.st, &el, NULL), -EAGAIN, "entrylk refused by one copy");
    reconf(&v, 1, "failure", "0");
    struct bfs_stack *other = bfs_stack_new();
    other->lk_owner = 777;
    is_int(bfs_sync_entrylk(v.afr, other, &el, NULL), 0,
           "another owner gets it: the partial grant was released");
    el.cmd = BFS_ENTRYLK_UNLOCK;
    is_int(bfs_sync_entrylk(v.afr, other, &el, NULL), 0, "unlock");
    bfs_stack_unref(other);

    mkdir_(&v, &bfs_gfid_root, "other", &a);
    struct bfs_rename_req rn = {.oldloc = L(&d.gfid, "e0"), .newloc = L(&a.gfid, "moved")};
    is_int(bfs_sync_rename(v.afr, v.st, &rn, NULL), 0, "rename across directories");
    ok(exists(&v, 0, "other/moved") && exists(&v, 2, "other/moved") && !exists(&v, 1, "dir/e0"),
       "moved on every brick");
    ok(clean_soon(&v, "dir") && clean_soon(&v, "other"), "both parents' counters clean");
    vol_close(&v);
}

static void test_fix_open(void)
{
    struct vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    if (vol_open(&v, 3, false, NULL) < 0)
        return;
    put(&v, &bfs_gfid_root, "fo", "aaaa", &a);
    down(&v, 1, true);
    is_int(open_(&v, &a.gfid, O_RDWR, &fd), 0, "open while c1 is down");
    up(&v, 1, true);
    is_int(write_(&v, fd, 0, "bbbb", 4), 4, "write after c1 is back");
    flush_close(&v, fd);
    ok(content_is(&v, 1, "fo", "bbbb"), "the fd was re-opened on c1 and the write reached it");
    ok(clean_soon(&v, "fo"), "so nobody blames c1");
    vol_close(&v);
}

static void test_notify(void)
{
    struct vol v;
    events_up = events_down = 0;
    if (vol_open(&v, 3, false, NULL) < 0)
        return;
    is_int(events_up, 1, "one CHILD_UP once the children are up");
    down(&v, 0, true);
    down(&v, 1, true);
    is_int(events_down, 0, "no CHILD_DOWN while a child is up (reads go on)");
    down(&v, 2, true);
    is_int(events_down, 1, "CHILD_DOWN when the last child goes");
    is_int(lookup(&v, &bfs_gfid_root, NULL, NULL), -ENOTCONN, "nothing up: ENOTCONN");
    up(&v, 2, true);
    is_int(events_up, 2, "CHILD_UP again with one child (every child has reported)");
    is_int(lookup(&v, &bfs_gfid_root, NULL, NULL), 0, "reads go on without quorum");
    up(&v, 0, true);
    up(&v, 1, true);
    is_int(events_up, 2, "no repeated CHILD_UP");
    vol_close(&v);
}

/* storage/posix's part: lookup answers the xattrs named in xattr-req. */
static void test_posix_xattr_req(void)
{
    struct vol v;
    struct bfs_iatt a;
    if (vol_open(&v, 2, false, NULL) < 0)
        return;
    put(&v, &bfs_gfid_root, "x", "x", &a);
    setxattr(on(&v, 0, "x"), "user.u", "1", 1, 0);
    setxattr(on(&v, 0, "x"), "trusted.t", "2", 1, 0);
    setxattr(on(&v, 0, "x"), "trusted.brickfs.afr.c1", "123456781234567812345678", 24, 0);
    struct bfs_xl *brick = bfs_graph_find(v.g, "b0");
    struct bfs_stack *user = bfs_stack_new();
    user->uid = user->gid = 1000;
    struct bfs_lookup_req req = {.loc = L(&bfs_gfid_root, "x"), .xdata = bfs_dict_new()};
    bfs_dict_set_str(req.xdata, "xattr-req",
                     "user.u,trusted.t,trusted.brickfs.afr.c1,trusted.brickfs.gfid,user.none");
    for (int who = 0; who < 2; who++) {
        struct bfs_lookup_rep rep;
        int rc = bfs_sync_lookup(brick, who ? user : v.st, &req, &rep);
        const char *tag = who ? "uid 1000" : "root";
        is_int(rc, 0, "posix lookup with xattr-req (%s)", tag);
        ok(bfs_dict_has(rep.xdata, "user.u"), "a user xattr is answered (%s)", tag);
        ok(bfs_dict_has(rep.xdata, "trusted.brickfs.afr.c1"),
           "replicate's counters are answered (%s)", tag);
        ok(!bfs_dict_has(rep.xdata, "trusted.brickfs.gfid"),
           "other brickfs xattrs are not (%s)", tag);
        ok(!bfs_dict_has(rep.xdata, "user.none"), "absent ones are left out (%s)", tag);
        is_int(bfs_dict_has(rep.xdata, "trusted.t"), !who, "trusted.* only for root (%s)", tag);
        bfs_lookup_rep_clear_dup(&rep);
    }
    bfs_dict_unref(req.xdata);
    bfs_stack_unref(user);
    struct bfs_lookup_rep rep;
    req.xdata = NULL;
    is_int(lookup(&v, &bfs_gfid_root, "x", NULL), 0, "through replicate");
    req.loc = L(&bfs_gfid_root, "x");
    bfs_sync_lookup(v.afr, v.st, &req, &rep);
    ok(!bfs_dict_has(rep.xdata, "trusted.brickfs.afr.c1"),
       "replicate takes its counters out of the reply");
    bfs_lookup_rep_clear_dup(&rep);
    vol_close(&v);
}

int main(void)
{
    plan_lazy();
    if (geteuid() != 0) {
        printf("1..0 # SKIP needs root (trusted xattrs)\n");
        return 0;
    }
    alarm(300);
    bfs_log_set_level(BFS_LOG_ERROR);
    snprintf(root, sizeof(root), "/tmp/bfs-afr-XXXXXX");
    if (!mkdtemp(root))
        return 1;
    proc = bfs_proc_new("test_replicate", 2);
    ok(proc != NULL, "process resources");
    static const struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
        {"basic", test_basic_replica3}, {"data", test_pending_and_data_heal},
        {"entry", test_entry_heal},     {"meta", test_metadata_heal},
        {"quorum", test_quorum},        {"split", test_split_brain},
        {"arbiter", test_arbiter},      {"eager", test_eager_lock},
        {"failover", test_read_failover}, {"replica2", test_replica2_quorum},
        {"stale", test_reads_avoid_stale}, {"background", test_background_heal},
        {"rename", test_rename_symlink_heal}, {"posix", test_posix_xattr_req},
        {"concurrent", test_concurrent_writes}, {"misc", test_misc_fops},
        {"notify", test_notify}, {"fixopen", test_fix_open},
        {"merge", test_entry_merge},     {"lostunlock", test_unlock_lost_on_down},
        {"healbusy", test_heal_lock_busy}, {"sumheal", test_checksum_heal},
        {"lkorder", test_lock_order},     {"quorumreads", test_quorum_reads},
        {"hung", test_hung_brick},       {"unacked", test_quorum_lost_write},
        {"plusattrs", test_readdirplus_attrs},
    };
    const char *only = getenv("AFR_TEST"); /* run one scenario by name */
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        if (!only || strcmp(only, tests[i].name) == 0)
            tests[i].fn();
    }
    bfs_proc_free(proc);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", root);
    return done_testing();
}
