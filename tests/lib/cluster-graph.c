/*
 * cluster-graph.c — a cluster translator over real bricks, in one process,
 * for the graph tests of replicate (test_replicate.c,
 * test_replicate_heal.c, test_heal_api.c; the process, the scratch root
 * and cg_graph_start also for dht-graph.c and test_fastpath.c);
 * cluster-graph.h says what each helper does.
 *
 * Each child is storage/posix on a folder of its own under a scratch root
 * (made by cg_init, removed by cg_fini), under the layers the test asks
 * for, under debug/error-gen named c0, c1, ... (the names replicate's
 * pending xattrs carry): a "down" brick is error-gen failing every fop with
 * ENOTCONN. A struct cg_vol lives from cg_vol_open to cg_vol_close; the
 * graph's CHILD_UP/DOWN events to the program are counted in
 * cg_events_up/down. Helpers that check bricks read the brick folders
 * directly (getxattr(2), stat(2), read(2)).
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

#include "cluster-graph.h"

static struct bfs_proc *proc;
static char root[256];
static int scenario;

bool cg_can_run(void)
{
    if (geteuid() == 0)
        return true;
    printf("1..0 # SKIP needs root (trusted xattrs)\n");
    return false;
}

void cg_run(const struct cg_test *tests, size_t n, const char *only_env)
{
    const char *only = getenv(only_env);
    for (size_t i = 0; i < n; i++)
        if (!only || strcmp(only, tests[i].name) == 0)
            tests[i].fn();
}

bool cg_main(const char *name, const struct cg_test *tests, size_t n, const char *only_env)
{
    if (!cg_can_run())
        return false;
    alarm(300);
    if (cg_init(name) < 0) {
        printf("Bail out! %s: process resources\n", name);
        exit(1);
    }
    cg_run(tests, n, only_env);
    cg_fini();
    return true;
}

int cg_init(const char *name)
{
    return cg_init_threads(name, 2);
}

int cg_init_threads(const char *name, int threads)
{
    bfs_log_set_level(BFS_LOG_ERROR);
    snprintf(root, sizeof(root), "/tmp/bfs-%s-XXXXXX", name);
    if (!mkdtemp(root))
        return -errno;
    proc = bfs_proc_new(name, threads);
    return proc ? 0 : -ENOMEM;
}

void cg_fini(void)
{
    if (proc)
        bfs_proc_free(proc);
    proc = NULL;
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    if (root[0] && system(cmd) != 0)
        printf("# could not remove %s\n", root);
}

struct bfs_proc *cg_proc(void)
{
    return proc;
}

const char *cg_root(void)
{
    return root;
}

/* ---- graph ---- */

struct bfs_graph *cg_graph_start(const char *text, struct bfs_proc *p)
{
    char err[512] = "";
    struct bfs_graph *g = NULL;
    struct bfs_proc *in = p ? p : proc;
    if (bfs_graph_from_text(text, strlen(text), "<test>", in, &g, err, sizeof(err)) < 0) {
        printf("# graph: %s\n", err);
        return NULL;
    }
    if (bfs_graph_init(g) < 0) {
        bfs_graph_free(g);
        return NULL;
    }
    bfs_graph_activate(g);
    return g;
}

int cg_read_port(const char *path)
{
    FILE *f = fopen(path, "r");
    int port = -1;
    if (f) {
        if (fscanf(f, "%d", &port) != 1)
            port = -1;
        fclose(f);
    }
    return port;
}

/* What replicate tells the program above it. */
int cg_events_up, cg_events_down;

static void on_event(struct bfs_graph *g, enum bfs_event ev, void *data)
{
    (void)g;
    (void)data;
    if (ev == BFS_EV_CHILD_UP)
        __atomic_add_fetch(&cg_events_up, 1, __ATOMIC_RELAXED);
    if (ev == BFS_EV_CHILD_DOWN)
        __atomic_add_fetch(&cg_events_down, 1, __ATOMIC_RELAXED);
}

/* The volfile of cg_vol_open_above into text (cap bytes); its length, or 0. */
static size_t volfile(struct cg_vol *v, int n, const char *const *layers, const char *top,
                      const char *above, char *text, size_t cap)
{
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        snprintf(v->brick[i], sizeof(v->brick[i]), "%s/s%d-b%d", root, scenario, i);
        if (mkdir(v->brick[i], 0755) < 0)
            return 0;
        char below[32];
        len += (size_t)snprintf(text + len, cap - len,
                                "volume b%d\n type storage/posix\n option directory %s\n"
                                "end-volume\n", i, v->brick[i]);
        snprintf(below, sizeof(below), "b%d", i);
        for (int k = 0; layers && layers[k] && len < cap; k++) {
            char type[64], prefix[16];
            if (sscanf(layers[k], "%63s %15s", type, prefix) != 2)
                return 0;
            len += (size_t)snprintf(text + len, cap - len,
                                    "volume %s%d\n type %s\n subvolumes %s\nend-volume\n",
                                    prefix, i, type, below);
            snprintf(below, sizeof(below), "%s%d", prefix, i);
        }
        if (len < cap)
            len += (size_t)snprintf(text + len, cap - len,
                                    "volume c%d\n type debug/error-gen\n"
                                    " option error-no ENOTCONN\n subvolumes %s\nend-volume\n",
                                    i, below);
        if (len >= cap)
            return 0;
    }
    len += (size_t)snprintf(text + len, cap - len, "volume rep\n%s subvolumes", top);
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(text + len, cap - len, " c%d", i);
    if (len < cap)
        len += (size_t)snprintf(text + len, cap - len, "\nend-volume\n");
    if (above && len < cap)
        len += (size_t)snprintf(text + len, cap - len, "%s", above);
    return len < cap ? len : 0;
}

int cg_vol_open(struct cg_vol *v, int n, const char *const *layers, const char *top)
{
    return cg_vol_open_above(v, n, layers, top, NULL);
}

int cg_vol_open_above(struct cg_vol *v, int n, const char *const *layers, const char *top,
                      const char *above)
{
    static char text[16384];
    char err[512] = "volfile too long or bad layer";
    memset(v, 0, sizeof(*v));
    if (n < 1 || n > CG_MAX)
        return -1;
    v->n = n;
    scenario++;
    size_t len = volfile(v, n, layers, top, above, text, sizeof(text));
    if (!len || bfs_graph_from_text(text, len, "cluster-graph.vol", proc, &v->g, err,
                                    sizeof(err)) < 0) {
        printf("# graph: %s\n", err);
        return -1;
    }
    if (bfs_graph_init(v->g) < 0)
        return -1;
    v->g->on_event = on_event;
    bfs_graph_activate(v->g);
    v->top = v->g->top;
    v->st = bfs_stack_new();
    return 0;
}

int cg_rep_open(struct cg_vol *v, int n, bool arbiter, const char *options)
{
    static const char *const layers[] = {"features/locks l", "debug/io-stats s", NULL};
    char top[2048];
    snprintf(top, sizeof(top), " type cluster/replicate\n%s%s%s%s",
             options && strstr(options, "self-heal-count")
                 ? ""
                 : " option cluster.background-self-heal-count 0\n",
             options && strstr(options, "post-op-delay") ? ""
                                                         : " option cluster.post-op-delay-ms 100\n",
             arbiter ? " option arbiter-count 1\n" : "", options ? options : "");
    return cg_vol_open(v, n, layers, top);
}

void cg_vol_close(struct cg_vol *v)
{
    if (v->g)
        bfs_graph_free(v->g);
    bfs_stack_unref(v->st);
    v->g = NULL;
}

struct bfs_xl *cg_child(struct cg_vol *v, int i)
{
    char name[16];
    snprintf(name, sizeof(name), "c%d", i);
    return bfs_graph_find(v->g, name);
}

void cg_reconf(struct cg_vol *v, int i, const char *key, const char *val)
{
    struct bfs_xl *c = cg_child(v, i);
    struct bfs_dict *d = bfs_dict_new();
    bfs_dict_set_str(d, key, val);
    c->mod->reconfigure(c, d);
    bfs_dict_unref(d);
}

/* Child i's connection is gone: every call fails with ENOTCONN and the
 * brick drops our locks, as protocol/server does when a connection closes
 * (ENOTCONN only ever comes from a closed connection). `tell`: replicate
 * hears CHILD_DOWN; without it, it has not noticed yet. */
void cg_down(struct cg_vol *v, int i, bool tell)
{
    cg_reconf(v, i, "failure", "100");
    char name[16];
    snprintf(name, sizeof(name), "l%d", i);
    struct bfs_xl *locks = bfs_graph_find(v->g, name);
    locks->mod->notify(locks, BFS_EV_CLIENT_GONE, cg_child(v, i), BFS_CLIENT_LOCAL);
    if (tell)
        bfs_xl_notify_parents(cg_child(v, i), BFS_EV_CHILD_DOWN, NULL);
}

void cg_fault(struct cg_vol *v, int i, const char *err, const char *fops)
{
    cg_reconf(v, i, "error-no", err);
    cg_reconf(v, i, "enable", fops);
    cg_reconf(v, i, "failure", "100");
}

void cg_up(struct cg_vol *v, int i, bool tell)
{
    cg_reconf(v, i, "failure", "0");
    if (tell)
        bfs_xl_notify_parents(cg_child(v, i), BFS_EV_CHILD_UP, NULL);
}

void cg_top_set(struct cg_vol *v, const char *key, const char *val)
{
    struct bfs_dict *d = bfs_dict_new();
    bfs_dict_set_str(d, key, val);
    v->top->mod->reconfigure(v->top, d);
    bfs_dict_unref(d);
}

/* ---- calls through replicate ---- */

struct bfs_loc cg_L(const struct bfs_gfid *par, const char *name)
{
    struct bfs_loc l = {0};
    l.pargfid = *par;
    l.name = name;
    return l;
}

int cg_lookup(struct cg_vol *v, const struct bfs_gfid *par, const char *name,
              struct bfs_iatt *attr)
{
    struct bfs_lookup_req req = {.loc = cg_L(par, name)};
    struct bfs_lookup_rep rep;
    if (!name) {
        memset(&req.loc, 0, sizeof(req.loc));
        req.loc.gfid = *par;
    }
    int rc = bfs_sync_lookup(v->top, v->st, &req, &rep);
    if (attr)
        *attr = rep.attr;
    bfs_lookup_rep_clear_dup(&rep);
    return rc;
}

int cg_create(struct cg_vol *v, const struct bfs_gfid *par, const char *name,
              struct bfs_fd **fdp, struct bfs_iatt *attr)
{
    struct bfs_fd *fd = bfs_fd_new(v->g, NULL, O_RDWR, 0);
    struct bfs_create_req req = {.loc = cg_L(par, name), .fd = fd, .flags = O_RDWR | O_CREAT,
                                 .mode = 0644};
    struct bfs_create_rep rep;
    int rc = bfs_sync_create(v->top, v->st, &req, &rep);
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
int cg_open(struct cg_vol *v, const struct bfs_gfid *g, int flags, struct bfs_fd **fdp)
{
    struct bfs_inode *inode = bfs_inode_get(v->g->itable, g, S_IFREG);
    struct bfs_fd *fd = bfs_fd_new(v->g, inode, flags, 0);
    bfs_inode_unref(inode);
    struct bfs_open_req req = {.fd = fd, .flags = (uint32_t)flags};
    req.loc.gfid = *g;
    int rc = bfs_sync_open(v->top, v->st, &req, NULL);
    if (rc < 0)
        bfs_fd_unref(fd);
    else
        *fdp = fd;
    return rc;
}

int cg_write(struct cg_vol *v, struct bfs_fd *fd, uint64_t off, const char *s, size_t len)
{
    struct bfs_write_req req = {.fd = fd, .offset = off};
    req.data.data = s;
    req.data.len = len;
    return bfs_sync_write(v->top, v->st, &req, NULL);
}

int cg_read(struct cg_vol *v, struct bfs_fd *fd, char *buf, size_t size)
{
    struct bfs_read_req req = {.fd = fd, .size = (uint32_t)size, .offset = 0};
    struct bfs_read_rep rep;
    int rc = bfs_sync_read(v->top, v->st, &req, &rep);
    if (rc >= 0) {
        size_t n = rep.data.len < size ? rep.data.len : size;
        memcpy(buf, rep.data.data, n);
        rc = (int)n;
    }
    bfs_read_rep_clear_dup(&rep);
    return rc;
}

int cg_flush_close(struct cg_vol *v, struct bfs_fd *fd)
{
    struct bfs_flush_req req = {.fd = fd};
    int rc = bfs_sync_flush(v->top, v->st, &req, NULL);
    bfs_fd_unref(fd);
    return rc;
}

int cg_mkdir(struct cg_vol *v, const struct bfs_gfid *par, const char *name,
                  struct bfs_iatt *attr)
{
    struct bfs_mkdir_req req = {.loc = cg_L(par, name), .mode = 0755};
    struct bfs_mkdir_rep rep;
    int rc = bfs_sync_mkdir(v->top, v->st, &req, &rep);
    if (attr)
        *attr = rep.attr;
    bfs_mkdir_rep_clear_dup(&rep);
    return rc;
}

int cg_unlink(struct cg_vol *v, const struct bfs_gfid *par, const char *name)
{
    struct bfs_unlink_req req = {.loc = cg_L(par, name)};
    return bfs_sync_unlink(v->top, v->st, &req, NULL);
}

int cg_rmdir(struct cg_vol *v, const struct bfs_gfid *par, const char *name)
{
    struct bfs_rmdir_req req = {.loc = cg_L(par, name)};
    return bfs_sync_rmdir(v->top, v->st, &req, NULL);
}

struct bfs_fd *cg_dir_of_names(struct cg_vol *v, const char *dir, int n, struct bfs_iatt *d)
{
    cg_mkdir(v, &bfs_gfid_root, dir, d);
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof(name), "e%d", i);
        cg_put(v, &d->gfid, name, "e", NULL);
    }
    struct bfs_fd *dfd = bfs_fd_new(v->g, NULL, O_RDONLY, 1);
    struct bfs_opendir_req oreq = {.fd = dfd};
    oreq.loc.gfid = d->gfid;
    if (dfd && bfs_sync_opendir(v->top, v->st, &oreq, NULL) == 0)
        return dfd;
    if (dfd)
        bfs_fd_unref(dfd);
    return NULL;
}

int cg_readdir_at(struct cg_vol *v, struct bfs_fd *dfd, uint64_t off, size_t size, bool *eod,
                  uint64_t *next)
{
    struct bfs_readdir_req rr = {.fd = dfd, .size = size, .offset = off};
    struct bfs_readdir_rep rep;
    int rc = bfs_sync_readdir(v->top, v->st, &rr, &rep);
    *eod = false;
    *next = off;
    if (rc < 0)
        return rc;
    *eod = rep.eod || !rep.entries.count;
    if (rep.entries.count)
        *next = rep.entries.v[rep.entries.count - 1].d_off;
    rc = (int)rep.entries.count;
    bfs_readdir_rep_clear_dup(&rep);
    return rc;
}

int cg_list_to_end(struct cg_vol *v, struct bfs_fd *dfd, size_t size, bool *eod, uint64_t *mid,
                   uint64_t *end)
{
    int names = 0;
    *eod = false;
    *end = 0;
    for (int rc = 0, calls = 0; !*eod && rc >= 0 && calls < 10; calls++) {
        rc = cg_readdir_at(v, dfd, *end, size, eod, end);
        names += rc > 0 ? rc : 0;
        if (calls == 0)
            *mid = *end;
    }
    return names;
}

/* Writes whole content to a new file and closes it. */
int cg_put(struct cg_vol *v, const struct bfs_gfid *par, const char *name, const char *s,
           struct bfs_iatt *attr)
{
    struct bfs_fd *fd;
    int rc = cg_create(v, par, name, &fd, attr);
    if (rc < 0)
        return rc;
    rc = cg_write(v, fd, 0, s, strlen(s));
    int frc = cg_flush_close(v, fd);
    return rc < 0 ? rc : frc;
}

int cg_put_settled(struct cg_vol *v, const struct bfs_gfid *par, const char *name, const char *s,
                   struct bfs_iatt *attr)
{
    int rc = cg_put(v, par, name, s, attr);
    if (rc == 0 && bfs_gfid_is_root(par))
        (void)cg_clean_soon(v, name);
    return rc;
}

bool cg_put_known(struct cg_vol *v, const char *name, const char *s, struct bfs_iatt *attr)
{
    int rc = cg_put(v, &bfs_gfid_root, name, s, attr);
    bool clean = rc == 0 && cg_clean_soon(v, name);
    int lrc = rc == 0 ? cg_lookup(v, &bfs_gfid_root, name, attr) : rc;
    if (rc < 0 || !clean || lrc < 0)
        printf("#   %s: put %d, counters %s, lookup %d\n", name, rc,
               clean ? "clean" : "not clean", lrc);
    return rc == 0 && clean && lrc == 0;
}

int cg_write_fails_on(struct cg_vol *v, int i, const struct bfs_gfid *g, const char *s)
{
    struct bfs_fd *fd;
    cg_fault(v, i, "ENOSPC", "write");
    int rc = cg_open(v, g, O_RDWR, &fd);
    if (rc == 0) {
        rc = cg_write(v, fd, 0, s, strlen(s));
        cg_flush_close(v, fd);
    }
    cg_reconf(v, i, "failure", "0");
    return rc;
}

/* ---- the bricks underneath ---- */

const char *cg_on(struct cg_vol *v, int i, const char *rel)
{
    static char buf[8][PATH_MAX + 64];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, sizeof(buf[0]), "%s/%s", v->brick[i], rel);
    return b;
}

/* Counter of type t in trusted.brickfs.afr.<key> on brick i (0 if absent). */
long long cg_counter(struct cg_vol *v, int i, const char *rel, const char *key, int t)
{
    char name[64];
    uint8_t raw[24];
    snprintf(name, sizeof(name), "trusted.brickfs.afr.%s", key);
    ssize_t n = lgetxattr(cg_on(v, i, rel), name, raw, sizeof(raw));
    if (n < (t + 1) * 8)
        return 0;
    uint64_t be;
    memcpy(&be, raw + t * 8, 8);
    return (long long)be64toh(be);
}

/* Every pending and dirty counter of rel on every brick is 0. */
bool cg_all_clean(struct cg_vol *v, const char *rel)
{
    for (int i = 0; i < v->n; i++) {
        for (int t = 0; t < 3; t++) {
            if (cg_counter(v, i, rel, "dirty", t))
                return false;
            for (int j = 0; j < v->n; j++) {
                char key[16];
                snprintf(key, sizeof(key), "c%d", j);
                if (cg_counter(v, i, rel, key, t))
                    return false;
            }
        }
    }
    return true;
}

/* Post-op and unlock of entry and metadata changes run behind the answer:
 * give them a moment. */
bool cg_clean_soon(struct cg_vol *v, const char *rel)
{
    for (int i = 0; i < 200; i++) {
        if (cg_all_clean(v, rel))
            return true;
        usleep(10000);
    }
    return false;
}

static bool graph_brick_locked(struct bfs_graph *g, int i)
{
    char name[16];
    snprintf(name, sizeof(name), "l%d", i);
    struct bfs_xl *x = bfs_graph_find(g, name);
    char *d = x && x->mod->dump ? x->mod->dump(x) : NULL;
    bool held = d && strstr(d, "\"inodelk\":[{") != NULL;
    free(d);
    return held;
}

bool cg_brick_locked(struct cg_vol *v, int i)
{
    return graph_brick_locked(v->g, i);
}

bool cg_graph_unlocked_soon(struct bfs_graph *g, int n)
{
    for (int k = 0; k < 500; k++) {
        bool any = false;
        for (int i = 0; i < n && !any; i++)
            any = graph_brick_locked(g, i);
        if (!any)
            return true;
        usleep(10000);
    }
    return false;
}

bool cg_unlocked_soon(struct cg_vol *v)
{
    return cg_graph_unlocked_soon(v->g, v->n);
}

ssize_t cg_slurp(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size);
    close(fd);
    return n;
}

/* Content of rel on brick i equals s. */
bool cg_content_is(struct cg_vol *v, int i, const char *rel, const char *s)
{
    char buf[4096];
    ssize_t n = cg_slurp(cg_on(v, i, rel), buf, sizeof(buf));
    return n == (ssize_t)strlen(s) && memcmp(buf, s, (size_t)n) == 0;
}

bool cg_same_gfid(struct cg_vol *v, const char *rel, uint32_t mask)
{
    uint8_t a[16], b[16];
    int first = -1;
    for (int i = 0; i < v->n; i++) {
        if (!(mask & (1u << i)))
            continue;
        if (lgetxattr(cg_on(v, i, rel), "trusted.brickfs.gfid", first < 0 ? a : b, 16) != 16)
            return false;
        if (first >= 0 && memcmp(a, b, 16))
            return false;
        if (first < 0)
            first = i;
    }
    return first >= 0;
}

/* The user.* xattrs of a path, "name=value;" sorted by the kernel's order. */
static void cg_user_xattrs(const char *path, char *out, size_t size)
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
bool cg_same_everywhere(struct cg_vol *v, const char *rel, uint32_t mask, int arbiter)
{
    struct stat a, b;
    char ca[8192], cb[8192], xa[1024], xb[1024];
    int ref = -1;
    ssize_t na = 0;
    if (!cg_same_gfid(v, rel, mask))
        return false;
    for (int i = 0; i < v->n; i++) {
        if (!(mask & (1u << i)))
            continue;
        struct stat *st = ref < 0 ? &a : &b;
        if (lstat(cg_on(v, i, rel), st) < 0)
            return false;
        char *xs = ref < 0 ? xa : xb;
        cg_user_xattrs(cg_on(v, i, rel), xs, sizeof(xa));
        ssize_t nc = S_ISREG(st->st_mode) && i != arbiter
                         ? cg_slurp(cg_on(v, i, rel), ref < 0 ? ca : cb, sizeof(ca))
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

int cg_children_answer(struct cg_vol *v)
{
    for (int i = 0; i < v->n; i++) {
        char name[16];
        snprintf(name, sizeof(name), "c%d", i);
        struct bfs_xl *c = bfs_graph_find(v->g, name);
        struct bfs_stat_req req = {0};
        struct bfs_stat_rep rep;
        req.loc.gfid = bfs_gfid_root;
        int rc = c ? bfs_sync_stat(c, v->st, &req, &rep) : -1;
        if (rc < 0)
            return rc;
        bfs_stat_rep_clear_dup(&rep);
    }
    return 0;
}

bool cg_exists(struct cg_vol *v, int i, const char *rel)
{
    struct stat st;
    return lstat(cg_on(v, i, rel), &st) == 0;
}

/* The number after pat in xl's dump (0 when absent or xl is NULL). */
static uint64_t dump_num(struct bfs_xl *xl, const char *pat)
{
    char *d = xl ? xl->mod->dump(xl) : NULL;
    const char *p = d ? strstr(d, pat) : NULL;
    uint64_t n = p ? strtoull(p + strlen(pat), NULL, 10) : 0;
    free(d);
    return n;
}

uint64_t cg_calls_of(struct cg_vol *v, int i)
{
    return dump_num(cg_child(v, i), "\"calls\":");
}

uint64_t cg_top_stat(struct cg_vol *v, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    return dump_num(v->top, pat);
}

/* A lookup that must answer within ms: a hang would stop the whole test,
 * so one that does not answer in time bails out. */
struct timed_lookup {
    struct cg_vol *v;
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
    struct bfs_lookup_req req = {.loc = cg_L(&t->par, t->name)};
    struct bfs_lookup_rep rep;
    if (!t->name) {
        memset(&req.loc, 0, sizeof(req.loc));
        req.loc.gfid = t->par;
    }
    int rc = bfs_sync_lookup(t->v->top, st, &req, &rep);
    bfs_lookup_rep_clear_dup(&rep);
    bfs_stack_unref(st);
    pthread_mutex_lock(&t->m);
    t->rc = rc;
    t->done = true;
    pthread_cond_signal(&t->c);
    pthread_mutex_unlock(&t->m);
    return NULL;
}

int cg_lookup_within(struct cg_vol *v, const struct bfs_gfid *par, const char *name, int ms,
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
        printf("Bail out! %s: the lookup did not answer within %d ms\n", what, ms);
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
int cg_entrylk_on(struct cg_vol *v, int i, const struct bfs_gfid *dir, const char *name,
                  bool lock, uint64_t owner)
{
    struct bfs_stack *st = bfs_stack_new();
    st->lk_owner = owner;
    struct bfs_entrylk_req req = {.domain = "rep", .basename = name,
                                  .cmd = lock ? BFS_ENTRYLK_LOCK_NB : BFS_ENTRYLK_UNLOCK,
                                  .type = BFS_ENTRYLK_WRLCK};
    req.loc.gfid = *dir;
    int rc = bfs_sync_entrylk(cg_child(v, i), st, &req, NULL);
    bfs_stack_unref(st);
    return rc;
}

/* The number after pat in brick i's io-stats dump (0 when absent). */
static uint64_t brick_dump_num(struct cg_vol *v, int i, const char *pat)
{
    char name[16];
    snprintf(name, sizeof(name), "s%d", i);
    return dump_num(bfs_graph_find(v->g, name), pat);
}

void cg_fop_counts(struct cg_vol *v, const char *fop, uint64_t *out)
{
    for (int i = 0; i < v->n; i++)
        out[i] = cg_fop_calls(v, i, fop);
}

/* A counter of brick i's io-stats dump ("bytes_written", "bytes_read"). */
uint64_t cg_brick_stat(struct cg_vol *v, int i, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    return brick_dump_num(v, i, pat);
}

uint64_t cg_fop_calls(struct cg_vol *v, int i, const char *fop)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":{\"count\":", fop);
    return brick_dump_num(v, i, pat);
}

/* Brick files rel on i and j have the same bytes (any size). */
bool cg_same_bytes(struct cg_vol *v, int i, int j, const char *rel)
{
    FILE *a = fopen(cg_on(v, i, rel), "rb"), *b = fopen(cg_on(v, j, rel), "rb");
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

void cg_handle_of(const char *dir, const struct bfs_gfid *g, char *out, size_t len)
{
    char s[BFS_GFID_STRLEN];
    bfs_gfid_fmt(g, s);
    snprintf(out, len, "%s/.brickfs/%.2s/%.2s/%s", dir, s, s + 2, s);
}

bool cg_handle_present(const char *dir, const struct bfs_gfid *g)
{
    char hp[PATH_MAX + 64];
    struct stat sb;
    cg_handle_of(dir, g, hp, sizeof(hp));
    return lstat(hp, &sb) == 0;
}

/* The start-up scan's state from the dump: "orphan_scan":{"done":D,"removed":R}. */
static bool orphan_scan_state(struct bfs_xl *xl, int *done, long *removed)
{
    char *d = xl->mod->dump(xl);
    const char *p = d ? strstr(d, "\"orphan_scan\":{\"done\":") : NULL;
    bool found = p && sscanf(p, "\"orphan_scan\":{\"done\":%d,\"removed\":%ld", done,
                             removed) == 2;
    free(d);
    return found;
}

long cg_orphan_scan_finished(struct bfs_xl *xl)
{
    int done = 0;
    long removed = -1;
    for (int i = 0; i < 3000; i++) {
        if (orphan_scan_state(xl, &done, &removed) && done)
            return removed;
        usleep(10000);
    }
    return -1;
}

void cg_half_create(struct cg_vol *v, int i, const char *rel, const struct bfs_gfid *g)
{
    int fd = open(cg_on(v, i, rel), O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd >= 0 && g)
        (void)fsetxattr(fd, "trusted.brickfs.gfid", g->b, sizeof(g->b), 0);
    if (fd >= 0)
        close(fd);
}

void cg_half_mkdir(struct cg_vol *v, int i, const char *rel, const struct bfs_gfid *g)
{
    const char *path = cg_on(v, i, rel);
    if (mkdir(path, 0755) == 0 && g)
        (void)setxattr(path, "trusted.brickfs.gfid", g->b, sizeof(g->b), 0);
}

bool cg_gfid_on(struct cg_vol *v, int i, const char *rel, const struct bfs_gfid *g)
{
    struct bfs_gfid got;
    return getxattr(cg_on(v, i, rel), "trusted.brickfs.gfid", got.b, sizeof(got.b)) ==
               sizeof(got.b) && bfs_gfid_eq(&got, g);
}

void cg_graph_stop(struct bfs_graph *g)
{
    if (!g)
        return;
    if (g->top->mod->notify)
        g->top->mod->notify(g->top, BFS_EV_PARENT_DOWN, NULL, NULL);
    bfs_graph_free(g);
}

struct scribbled_write {
    pthread_mutex_t m;
    pthread_cond_t c;
    int calls, rc;
};

static void scribbled_cbk(struct bfs_frame *frame, void *cookie, int rc,
                          const struct bfs_write_rep *rep)
{
    struct scribbled_write *w = cookie;
    (void)frame;
    (void)rep;
    pthread_mutex_lock(&w->m);
    w->calls++;
    w->rc = rc;
    pthread_cond_broadcast(&w->c);
    pthread_mutex_unlock(&w->m);
}

int cg_scribbled_write(struct cg_vol *v, struct bfs_fd *fd, uint64_t off, const void *src,
                       size_t len, bool *early)
{
    struct scribbled_write w = {.m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER};
    char *buf = malloc(len);
    if (!buf)
        return -ENOMEM;
    memcpy(buf, src, len);
    struct bfs_frame *f = bfs_frame_top_new(v->st, NULL);
    struct bfs_write_req q = {.fd = fd, .data = {buf, len}, .offset = off};
    int rc = bfs_wind_write(f, v->top, scribbled_cbk, &w, &q);
    pthread_mutex_lock(&w.m);
    if (early)
        *early = w.calls > 0;
    pthread_mutex_unlock(&w.m);
    memset(buf, 'X', len); /* the caller's buffer is its own again */
    pthread_mutex_lock(&w.m);
    while (rc == 0 && !w.calls)
        pthread_cond_wait(&w.c, &w.m);
    rc = rc == 0 ? w.rc : rc;
    pthread_mutex_unlock(&w.m);
    bfs_frame_top_free(f);
    free(buf);
    return rc;
}
