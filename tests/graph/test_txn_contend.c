/*
 * test_txn_contend.c — lock contention notices end another client's eager
 * lock (features/locks/contention.c, protocol/server and protocol/client
 * upcall delivery, lib/txn-contend.c; docs/design/lock-contention.md).
 *
 * Across real TCP in one process: three bricks (storage/posix ->
 * features/locks -> debug/io-stats -> protocol/server on 127.0.0.1,
 * ephemeral ports) and two
 * client graphs A and B (three protocol/client under cluster/replicate
 * "rep", same lock domain, a delayed post-op of 10 s).
 *
 * Checks:
 *   - A writes a file and keeps its data lock (the 10 s window); B's write
 *     to the same file completes within 5 s, far sooner than A's post-op
 *     delay: the bricks told A (their dumps count the notices) and A let
 *     go. Then A and B write in turns, each write within 5 s, and the three
 *     copies end identical, with the content of the last writes and no
 *     dirty mark left;
 *   - with the bricks' notify-contention off, B's write still waits for
 *     A's delayed post-op (what happened before notices existed);
 *   - B's lookup of a file A is writing, healing in the foreground, answers
 *     within 5 s although A's window holds the data lock for 10 s: the
 *     heal's lock request queued at the bricks and A was told; against a
 *     holder that never lets go, the heal gives up after
 *     cluster.heal-lock-timeout and its waiting request is cancelled;
 *   - on the wire, the notice goes to the holder's connection only: raw
 *     protocol/client graphs R1 (holder, with client.invalidations off as
 *     the self-heal daemon has: notices still reach it), R2 (waiter), R3
 *     (bystander);
 *   - entry windows (cluster.entry-eager-lock, lib/txn-entry.c): A's run
 *     of creates in a folder costs each brick one entrylk and at most one
 *     xattrop in all (one per create before); B's create in that folder
 *     completes within 5 s although A's window would last 10 s; A's run
 *     of unlinks after it ends B's window the same way and costs at most
 *     two entrylk per brick; the copies end identical, no mark left once
 *     the windows end.
 * Needs root (trusted xattrs); skips otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../lib/cluster-graph.h"
#include "../lib/tap.h"
#include "core/event.h"
#include "core/fops-util.h"

#define NB 3
#define DELAY_MS 10000
#define PROMPT_MS 5000

static struct bfs_graph *bricks[NB];
static int ports[NB];
static const struct bfs_gfid ROOT = {.b = {[15] = 1}};

/* ---- the bricks ---- */

static int read_port(const char *file)
{
    int port = -1;
    for (int k = 0; k < 500 && port < 0; k++) {
        FILE *f = fopen(file, "r");
        if (f) {
            if (fscanf(f, "%d", &port) != 1)
                port = -1;
            fclose(f);
        }
        if (port < 0)
            usleep(10000);
    }
    return port;
}

static int bricks_start(struct cg_vol *paths)
{
    for (int i = 0; i < NB; i++) {
        char text[3 * PATH_MAX], portfile[PATH_MAX];
        snprintf(paths->brick[i], sizeof(paths->brick[i]), "%s/b%d", cg_root(), i);
        snprintf(portfile, sizeof(portfile), "%s/port%d", cg_root(), i);
        if (mkdir(paths->brick[i], 0755) < 0)
            return -1;
        snprintf(text, sizeof(text),
                 "volume b%d-posix\n type storage/posix\n option directory %s\nend-volume\n"
                 "volume b%d-locks\n type features/locks\n subvolumes b%d-posix\nend-volume\n"
                 "volume b%d\n type debug/io-stats\n subvolumes b%d-locks\nend-volume\n"
                 "volume b%d-server\n type protocol/server\n"
                 " option transport.listen-address 127.0.0.1\n option transport.listen-port 0\n"
                 " option transport.port-file %s\n subvolumes b%d\nend-volume\n",
                 i, paths->brick[i], i, i, i, i, i, portfile, i);
        if (!(bricks[i] = cg_graph_start(text, NULL)) || (ports[i] = read_port(portfile)) < 0)
            return -1;
    }
    paths->n = NB;
    return 0;
}

static struct bfs_xl *brick_locks(int i)
{
    char name[16];
    snprintf(name, sizeof(name), "b%d-locks", i);
    return bfs_graph_find(bricks[i], name);
}

/* Calls of fop that reached brick i (its io-stats dump). */
static uint64_t brick_calls(int i, const char *fop)
{
    char name[16], pat[64];
    snprintf(name, sizeof(name), "b%d", i);
    snprintf(pat, sizeof(pat), "\"%s\":{\"count\":", fop);
    struct bfs_xl *s = bfs_graph_find(bricks[i], name);
    char *d = s ? s->mod->dump(s) : NULL;
    const char *p = d ? strstr(d, pat) : NULL;
    uint64_t n = p ? strtoull(p + strlen(pat), NULL, 10) : 0;
    free(d);
    return n;
}

static void bricks_set(const char *key, const char *val)
{
    for (int i = 0; i < NB; i++) {
        struct bfs_xl *l = brick_locks(i);
        struct bfs_dict *d = bfs_dict_new();
        bfs_dict_set_str(d, key, val);
        l->mod->reconfigure(l, d);
        bfs_dict_unref(d);
    }
}

/* Contention notices the bricks sent so far (their features/locks dumps). */
static long long notices_sent(void)
{
    long long sum = 0;
    for (int i = 0; i < NB; i++) {
        struct bfs_xl *l = brick_locks(i);
        char *text = l->mod->dump(l);
        json_object *o = text ? json_tokener_parse(text) : NULL, *n;
        if (o && json_object_object_get_ex(o, "contention_notices", &n))
            sum += json_object_get_int64(n);
        json_object_put(o);
        free(text);
    }
    return sum;
}

/* ---- client graphs ---- */

/* A replicate client of the three bricks; v borrows paths' brick folders. */
static int client_open(struct cg_vol *v, const struct cg_vol *paths)
{
    char text[4096];
    size_t len = 0;
    for (int i = 0; i < NB; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len,
                                "volume c%d\n type protocol/client\n option remote-host 127.0.0.1\n"
                                " option remote-port %d\n option remote-subvolume b%d\n"
                                "end-volume\n", i, ports[i], i);
    snprintf(text + len, sizeof(text) - len,
             "volume rep\n type cluster/replicate\n option cluster.post-op-delay-ms %d\n"
             " option cluster.entry-eager-lock on\n"
             " subvolumes c0 c1 c2\nend-volume\n",
             DELAY_MS);
    *v = *paths;
    v->g = cg_graph_start(text, NULL);
    if (!v->g)
        return -1;
    v->top = v->g->top;
    v->st = bfs_stack_new();
    for (int k = 0; k < 1000; k++) { /* every child up: the copies take every write */
        if (cg_lookup(v, &ROOT, NULL, NULL) == 0) {
            char *d = v->top->mod->dump(v->top);
            bool all = d && strstr(d, "\"up\":7,");
            free(d);
            if (all)
                return 0;
        }
        usleep(10000);
    }
    return -1;
}

static void client_close(struct cg_vol *v)
{
    bfs_graph_free(v->g);
    bfs_stack_unref(v->st);
    v->g = NULL;
}

/* ---- a write that must answer in time ---- */

struct bg_write {
    struct cg_vol *v;
    struct bfs_fd *fd;
    uint64_t off;
    const char *s;
    size_t len;
    int rc;
    bool done;
    pthread_t th;
};

static void *bg_main(void *arg)
{
    struct bg_write *w = arg;
    struct bfs_stack *st = bfs_stack_new();
    struct bfs_write_req req = {.fd = w->fd, .offset = w->off};
    req.data.data = w->s;
    req.data.len = w->len;
    int rc = bfs_sync_write(w->v->top, st, &req, NULL);
    bfs_stack_unref(st);
    w->rc = rc;
    __atomic_store_n(&w->done, true, __ATOMIC_RELEASE);
    return NULL;
}

static void bg_start(struct bg_write *w)
{
    w->done = false;
    pthread_create(&w->th, NULL, bg_main, w);
}

/* Polls until the write answered or ms passed: true if it answered. */
static bool bg_wait(struct bg_write *w, int ms)
{
    uint64_t t0 = bfs_now_ms();
    while (!__atomic_load_n(&w->done, __ATOMIC_ACQUIRE) && bfs_now_ms() - t0 < (uint64_t)ms)
        usleep(2000);
    return __atomic_load_n(&w->done, __ATOMIC_ACQUIRE);
}

/* Writes s at off through v within PROMPT_MS: the bytes written, or
 * -ETIMEDOUT (the write is still waited for, so nothing is left behind). */
static int prompt_write(struct cg_vol *v, struct bfs_fd *fd, uint64_t off, const char *s,
                        uint64_t *ms)
{
    struct bg_write w = {.v = v, .fd = fd, .off = off, .s = s, .len = strlen(s)};
    uint64_t t0 = bfs_now_ms();
    bg_start(&w);
    bool in_time = bg_wait(&w, PROMPT_MS);
    if (ms)
        *ms = bfs_now_ms() - t0;
    pthread_join(w.th, NULL);
    return in_time ? w.rc : -ETIMEDOUT;
}

static int open_on(struct cg_vol *v, const char *name, struct bfs_fd **fd)
{
    struct bfs_iatt a;
    int rc = cg_lookup(v, &ROOT, name, &a);
    return rc < 0 ? rc : cg_open(v, &a.gfid, O_RDWR, fd);
}

/* ---- scenarios ---- */

static void turns(struct cg_vol *va, struct cg_vol *vb, const struct cg_vol *paths)
{
    struct bfs_fd *fa = NULL, *fb = NULL;
    uint64_t ms = 0;
    struct bfs_fd *fc = NULL;
    ok(cg_create(va, &ROOT, "f", &fc, NULL) == 0 && cg_flush_close(va, fc) == 0 &&
           open_on(va, "f", &fa) == 0 && cg_write(va, fa, 0, "aaaaaaaa", 8) == 8,
       "A creates f and writes: it keeps the data lock for its %d ms post-op delay", DELAY_MS);
    /* B's lookups see A's dirty marks: a heal of B's would queue for A's
     * lock at the bricks and end A's window itself (lock-contention.md,
     * "Heals"; scenario "heal" below): not what this one measures */
    cg_top_set(vb, "cluster.data-self-heal", "off");
    ok(open_on(vb, "f", &fb) == 0, "B opens f");
    long long before = notices_sent();
    int rc = prompt_write(vb, fb, 0, "bbbb", &ms);
    is_int(rc, 4, "B's write completes within %d ms although A holds the lock for %d ms "
           "(took %llu ms)", PROMPT_MS, DELAY_MS, (unsigned long long)ms);
    ok(notices_sent() > before, "the bricks told A that B waited (%lld notices)",
       notices_sent() - before);

    /* turns: each write waits for the other client's window to end */
    char buf[64];
    bool all = true;
    uint64_t worst = 0;
    for (int k = 0; k < 20 && all; k++) {
        struct cg_vol *v = k % 2 ? vb : va;
        struct bfs_fd *fd = k % 2 ? fb : fa;
        char s[2] = {(char)(k % 2 ? 'B' : 'A'), 0};
        int r = prompt_write(v, fd, (uint64_t)k, s, &ms);
        all = r == 1;
        worst = ms > worst ? ms : worst;
        if (!all)
            printf("# write %d by %s: %d after %llu ms\n", k, k % 2 ? "B" : "A", r,
                   (unsigned long long)ms);
    }
    ok(all, "A and B write in turns, 20 writes, each within %d ms (slowest %llu ms)", PROMPT_MS,
       (unsigned long long)worst);
    rc = cg_read(va, fa, buf, sizeof(buf));
    ok(rc == 20 && memcmp(buf, "ABABABABABABABABABAB", 20) == 0,
       "A reads every write of both clients (%d bytes)", rc);
    ok(cg_flush_close(va, fa) == 0 && cg_flush_close(vb, fb) == 0, "both close the file");
    struct cg_vol p = *paths;
    ok(cg_same_bytes(&p, 0, 1, "f") && cg_same_bytes(&p, 0, 2, "f") &&
           cg_content_is(&p, 0, "f", "ABABABABABABABABABAB"),
       "the three copies are identical");
    ok(cg_clean_soon(&p, "f"), "no pending or dirty mark is left on any copy");
    cg_top_set(vb, "cluster.data-self-heal", "on");
}

static void without_notices(struct cg_vol *va, struct cg_vol *vb)
{
    struct bfs_fd *fa = NULL, *fb = NULL;
    bricks_set("notify-contention", "off");
    cg_top_set(va, "cluster.post-op-delay-ms", "3000");
    ok(cg_create(va, &ROOT, "g", &fa, NULL) == 0 && cg_write(va, fa, 0, "aaaa", 4) == 4 &&
           open_on(vb, "g", &fb) == 0,
       "notices off: A writes g (3 s post-op delay), B opens it");
    long long before = notices_sent();
    struct bg_write w = {.v = vb, .fd = fb, .s = "bb", .len = 2};
    bg_start(&w);
    ok(!bg_wait(&w, 1000), "notices off: after 1 s B's write still waits for A's window");
    ok(bg_wait(&w, 20000) && w.rc == 2, "notices off: it completes once A's post-op ran");
    pthread_join(w.th, NULL);
    is_int(notices_sent() - before, 0, "notices off: the bricks sent none");
    cg_flush_close(va, fa);
    cg_flush_close(vb, fb);
    cg_top_set(va, "cluster.post-op-delay-ms", "10000");
    bricks_set("notify-contention", "on");
}

/* ---- a heal waiting for A's window ---- */

/* B's heal options, together (a reconfigure resets what it does not name). */
static void heal_opts(struct cg_vol *v, const char *count, const char *timeout)
{
    struct bfs_dict *d = bfs_dict_new();
    bfs_dict_set_str(d, "cluster.background-self-heal-count", count);
    bfs_dict_set_str(d, "cluster.heal-lock-timeout", timeout);
    v->top->mod->reconfigure(v->top, d);
    bfs_dict_unref(d);
}

struct bg_lookup {
    struct cg_vol *v;
    const struct bfs_gfid *par; /* create name in par, else look name up in the root */
    const char *name;
    int rc;
    bool done;
    pthread_t th;
};

static void *bg_lookup_main(void *arg)
{
    struct bg_lookup *l = arg;
    struct bfs_fd *fd = NULL;
    if (l->par) {
        l->rc = cg_create(l->v, l->par, l->name, &fd, NULL);
        if (l->rc == 0)
            l->rc = cg_flush_close(l->v, fd);
    } else {
        l->rc = cg_lookup(l->v, &ROOT, l->name, NULL);
    }
    __atomic_store_n(&l->done, true, __ATOMIC_RELEASE);
    return NULL;
}

/* Looks name up through v (or, par set, creates it in par) within
 * PROMPT_MS: its answer, or -ETIMEDOUT (the call is still waited for).
 * *ms: how long it took. */
static int prompt_entry(struct cg_vol *v, const struct bfs_gfid *par, const char *name,
                        uint64_t *ms)
{
    struct bg_lookup l = {.v = v, .par = par, .name = name};
    uint64_t t0 = bfs_now_ms();
    pthread_create(&l.th, NULL, bg_lookup_main, &l);
    while (!__atomic_load_n(&l.done, __ATOMIC_ACQUIRE) && bfs_now_ms() - t0 < PROMPT_MS)
        usleep(2000);
    bool in_time = __atomic_load_n(&l.done, __ATOMIC_ACQUIRE);
    pthread_join(l.th, NULL);
    *ms = bfs_now_ms() - t0;
    return in_time ? l.rc : -ETIMEDOUT;
}

/* B, healing in the foreground (cluster.background-self-heal-count 0),
 * looks up a file A is writing: the lookup sees A's dirty marks and heals
 * first, under the data lock that A's window holds for DELAY_MS. A heal
 * asked for the lock only with non-blocking requests, retried until
 * cluster.heal-lock-timeout (10 s): nobody told A that someone waited, so
 * the lookup took the whole window. Now the heal queues at the bricks after
 * a refused round, A hears of it and lets go. */
static void heal_waits(struct cg_vol *va, struct cg_vol *vb, const struct cg_vol *paths)
{
    struct bfs_fd *fa = NULL;
    heal_opts(vb, "0", "10");
    ok(cg_create(va, &ROOT, "h", &fa, NULL) == 0 && cg_write(va, fa, 0, "aaaa", 4) == 4,
       "heal: A writes h and keeps the data lock for its %d ms post-op delay", DELAY_MS);
    struct cg_vol p = *paths;
    ok(cg_counter(&p, 0, "h", "dirty", 0) > 0, "heal: h carries A's dirty mark on brick 0");
    long long before = notices_sent();
    uint64_t ms;
    int rc = prompt_entry(vb, NULL, "h", &ms);
    is_int(rc, 0, "heal: B's lookup (a foreground heal) answers within %d ms although A holds "
           "the lock for %d ms (took %llu ms)", PROMPT_MS, DELAY_MS, (unsigned long long)ms);
    ok(notices_sent() > before, "heal: the bricks told A that the heal waited (%lld notices)",
       notices_sent() - before);
    is_int(cg_write(va, fa, 4, "bb", 2), 2, "heal: A writes again afterwards");
    ok(cg_flush_close(va, fa) == 0 && cg_same_bytes(&p, 0, 1, "h") &&
           cg_same_bytes(&p, 0, 2, "h") && cg_content_is(&p, 0, "h", "aaaabb"),
       "heal: the copies are identical");
    ok(cg_clean_soon(&p, "h"), "heal: no pending or dirty mark is left on any copy");
    heal_opts(vb, "8", "10");
}

/* ---- on the wire: the holder's connection only ---- */

struct raw {
    struct bfs_graph *g;
    pthread_mutex_t m;
    int contention;
    struct bfs_upcall last;
    char domain[32];
};

static void raw_event(struct bfs_graph *g, enum bfs_event ev, void *data)
{
    struct raw *r = g->owner;
    const struct bfs_upcall *up = data;
    if (ev != BFS_EV_UPCALL || !up || !bfs_upcall_is_contention(up->kind))
        return;
    pthread_mutex_lock(&r->m);
    r->contention++;
    r->last = *up;
    snprintf(r->domain, sizeof(r->domain), "%s", up->domain ? up->domain : "");
    r->last.domain = r->domain;
    r->last.name = NULL;
    pthread_mutex_unlock(&r->m);
}

static int raw_count(struct raw *r)
{
    pthread_mutex_lock(&r->m);
    int n = r->contention;
    pthread_mutex_unlock(&r->m);
    return n;
}

/* extra: more option lines of the client. */
static int raw_open_opts(struct raw *r, const char *extra)
{
    char text[512];
    snprintf(text, sizeof(text),
             "volume r\n type protocol/client\n option remote-host 127.0.0.1\n"
             " option remote-port %d\n option remote-subvolume b0\n%send-volume\n", ports[0],
             extra);
    pthread_mutex_init(&r->m, NULL);
    char err[512] = "";
    if (bfs_graph_from_text(text, strlen(text), "raw.vol", cg_proc(), &r->g, err,
                            sizeof(err)) < 0)
        return -1;
    r->g->owner = r;
    r->g->on_event = raw_event;
    if (bfs_graph_init(r->g) < 0)
        return -1;
    bfs_graph_activate(r->g);
    struct bfs_stack *st = bfs_stack_new();
    struct bfs_lookup_req req = {.loc = {.gfid = ROOT}};
    int rc = -1;
    for (int k = 0; k < 500 && rc < 0; k++) {
        rc = bfs_sync_lookup(r->g->top, st, &req, NULL);
        if (rc < 0)
            usleep(10000);
    }
    bfs_stack_unref(st);
    return rc;
}

static int raw_open(struct raw *r)
{
    return raw_open_opts(r, "");
}

struct raw_lock {
    struct raw *r;
    uint64_t owner;
    uint32_t cmd, type;
    struct bfs_gfid gfid;
    const char *domain; /* NULL: "raw" */
    int rc;
    bool done;
    pthread_t th;
};

static int raw_inodelk(struct raw_lock *l)
{
    struct bfs_stack *st = bfs_stack_new();
    st->lk_owner = l->owner;
    struct bfs_inodelk_req req = {.domain = l->domain ? l->domain : "raw", .cmd = l->cmd};
    req.loc.gfid = l->gfid;
    req.lock = (struct bfs_flock){.type = l->type, .whence = SEEK_SET};
    int rc = bfs_sync_inodelk(l->r->g->top, st, &req, NULL);
    bfs_stack_unref(st);
    return rc;
}

static void *raw_lock_main(void *arg)
{
    struct raw_lock *l = arg;
    l->rc = raw_inodelk(l);
    __atomic_store_n(&l->done, true, __ATOMIC_RELEASE);
    return NULL;
}

static bool raw_wait(struct raw *r, int want, int ms)
{
    uint64_t t0 = bfs_now_ms();
    while (raw_count(r) < want && bfs_now_ms() - t0 < (uint64_t)ms)
        usleep(2000);
    return raw_count(r) >= want;
}

static void wire(void)
{
    struct raw r1 = {0}, r2 = {0}, r3 = {0};
    /* R1 takes no invalidations (as the self-heal daemon): notices still come */
    ok(raw_open_opts(&r1, " option client.invalidations off\n") == 0 && raw_open(&r2) == 0 &&
           raw_open(&r3) == 0,
       "wire: three raw clients of brick 0 (R1 with client.invalidations off)");
    struct raw_lock hold = {.r = &r1, .owner = 0x1111, .cmd = BFS_LK_SETLK, .type = F_WRLCK,
                            .gfid = ROOT};
    is_int(raw_inodelk(&hold), 0, "wire: R1 holds an inodelk");
    struct raw_lock wait = {.r = &r2, .owner = 0x2222, .cmd = BFS_LK_SETLKW, .type = F_WRLCK,
                            .gfid = ROOT};
    pthread_create(&wait.th, NULL, raw_lock_main, &wait);
    ok(raw_wait(&r1, 1, PROMPT_MS), "wire: R1 hears that someone waits");
    pthread_mutex_lock(&r1.m);
    ok(r1.last.kind == BFS_UPCALL_INODELK_CONTENTION && r1.last.owner == 0x1111 &&
           strcmp(r1.domain, "raw") == 0 && bfs_gfid_eq(&r1.last.gfid, &ROOT),
       "wire: the notice names R1's lock owner, the domain and the GFID");
    pthread_mutex_unlock(&r1.m);
    /* a reply on R2's and R3's connections after the notice went out: an
     * upcall sent to them would have come before it */
    struct bfs_stack *st = bfs_stack_new();
    struct bfs_lookup_req lr = {.loc = {.gfid = ROOT}};
    ok(bfs_sync_lookup(r2.g->top, st, &lr, NULL) == 0 &&
           bfs_sync_lookup(r3.g->top, st, &lr, NULL) == 0,
       "wire: R2 and R3 get answers sent after the notice");
    bfs_stack_unref(st);
    ok(!__atomic_load_n(&wait.done, __ATOMIC_ACQUIRE) && raw_count(&r2) == 0 &&
           raw_count(&r3) == 0,
       "wire: the waiter and a bystander hear nothing");
    hold.type = F_UNLCK;
    is_int(raw_inodelk(&hold), 0, "wire: R1 unlocks");
    pthread_join(wait.th, NULL);
    is_int(wait.rc, 0, "wire: R2 is granted");
    wait.type = F_UNLCK;
    wait.cmd = BFS_LK_SETLK;
    is_int(raw_inodelk(&wait), 0, "wire: R2 unlocks");
    ok(raw_count(&r2) == 0 && raw_count(&r3) == 0 && raw_count(&r1) == 1,
       "wire: one notice in all");
    bfs_graph_free(r1.g);
    bfs_graph_free(r2.g);
    bfs_graph_free(r3.g);
}

/* A holder that never lets go (a raw client keeps replicate's data lock of
 * k on brick 0 and ignores notices): B's foreground heal of k's dirty mark
 * queues, gives up after cluster.heal-lock-timeout (1 s here) and the
 * lookup answers; its waiting request was cancelled, not left queued to be
 * granted later (once the holder unlocks, another client gets the lock at
 * once); a later lookup heals k. */
static void heal_stuck(struct cg_vol *va, struct cg_vol *vb, const struct cg_vol *paths)
{
    struct cg_vol p = *paths;
    struct bfs_iatt a;
    ok(cg_put(va, &ROOT, "k", "kkkk", &a) == 0 && cg_clean_soon(&p, "k"),
       "stuck: A writes k and closes it");
    uint8_t dirty[24] = {0};
    dirty[7] = 1; /* data counter 1, big-endian */
    ok(lsetxattr(cg_on(&p, 0, "k"), "trusted.brickfs.afr.dirty", dirty, sizeof(dirty), 0) == 0,
       "stuck: a dirty mark on brick 0's copy");
    struct raw r = {0}, r2 = {0};
    ok(raw_open(&r) == 0 && raw_open(&r2) == 0, "stuck: two raw clients of brick 0");
    struct raw_lock hold = {.r = &r, .owner = 0x4444, .cmd = BFS_LK_SETLK, .type = F_WRLCK,
                            .gfid = a.gfid, .domain = "rep"};
    is_int(raw_inodelk(&hold), 0, "stuck: one of them holds replicate's data lock of k");
    heal_opts(vb, "0", "1");
    uint64_t ms;
    is_int(prompt_entry(vb, NULL, "k", &ms), 0,
           "stuck: B's lookup answers within %d ms once its heal gave up (took %llu ms)",
           PROMPT_MS, (unsigned long long)ms);
    ok(raw_count(&r) > 0, "stuck: the holder was told (%d notices)", raw_count(&r));
    ok(cg_counter(&p, 0, "k", "dirty", 0) > 0, "stuck: k is not healed yet");
    hold.type = F_UNLCK;
    is_int(raw_inodelk(&hold), 0, "stuck: the holder unlocks");
    struct raw_lock other = {.r = &r2, .owner = 0x5555, .cmd = BFS_LK_SETLK, .type = F_WRLCK,
                             .gfid = a.gfid, .domain = "rep"};
    is_int(raw_inodelk(&other), 0,
           "stuck: another client gets the lock at once: the heal's request was cancelled");
    other.type = F_UNLCK;
    is_int(raw_inodelk(&other), 0, "stuck: and unlocks");
    heal_opts(vb, "0", "10");
    ok(cg_lookup(vb, &ROOT, "k", NULL) == 0 && cg_clean_soon(&p, "k"),
       "stuck: the next lookup heals k");
    heal_opts(vb, "8", "10");
    bfs_graph_free(r.g);
    bfs_graph_free(r2.g);
}

/* Calls of fop that reached each brick since base[] (and base[] moved on). */
static void calls_since(const char *fop, uint64_t base[NB], uint64_t out[NB])
{
    for (int i = 0; i < NB; i++) {
        uint64_t n = brick_calls(i, fop);
        out[i] = n - base[i];
        base[i] = n;
    }
}

/* Polls until rel carries no pending or dirty mark on any copy (ms at most). */
static bool clean_within(struct cg_vol *p, const char *rel, int ms)
{
    for (uint64_t t0 = bfs_now_ms(); bfs_now_ms() - t0 < (uint64_t)ms; usleep(20000))
        if (cg_all_clean(p, rel))
            return true;
    return false;
}

/* Entry windows (cluster.entry-eager-lock, on in this graph): a folder's
 * entry lock is kept between one client's changes of names in it, and
 * given up promptly when another client (or a heal) asks for it. */
static void entry_windows(struct cg_vol *va, struct cg_vol *vb, const struct cg_vol *paths)
{
    enum { N = 20 };
    struct bfs_iatt d;
    char name[32];
    uint64_t lk[NB], xo[NB], dl[NB], dx[NB], ms = 0;
    struct cg_vol p = *paths;
    if (!ok(cg_mkdir(va, &ROOT, "ed", &d) == 0, "entry: A makes folder ed"))
        return;
    calls_since("entrylk", lk, dl);
    calls_since("xattrop", xo, dx);
    bool made = true;
    for (int k = 0; k < N && made; k++) {
        struct bfs_fd *fd = NULL;
        snprintf(name, sizeof(name), "a%d", k);
        made = cg_create(va, &d.gfid, name, &fd, NULL) == 0 && cg_flush_close(va, fd) == 0;
    }
    ok(made, "A creates %d files in ed", N);
    calls_since("entrylk", lk, dl);
    calls_since("xattrop", xo, dx);
    for (int i = 0; i < NB; i++) {
        /* one-shot locks: an entrylk (its unlock rides in the post-op) and
         * an xattrop per create, 20 of each */
        is_int((int)dl[i], 1, "brick %d: one entrylk for A's %d creates (the window's lock)", i,
               N);
        ok(dx[i] <= 1, "brick %d: at most one xattrop (the window's pre-op): %llu", i,
           (unsigned long long)dx[i]);
    }

    long long before = notices_sent();
    int rc = prompt_entry(vb, &d.gfid, "b0", &ms);
    is_int(rc, 0, "B's create in ed completes within %d ms although A's window lasts %d ms "
           "(took %llu ms)", PROMPT_MS, DELAY_MS, (unsigned long long)ms);
    ok(notices_sent() > before, "the bricks told A that B waited");

    calls_since("entrylk", lk, dl);
    uint64_t t0 = bfs_now_ms();
    bool gone = true;
    for (int k = 0; k < N && gone; k++) {
        snprintf(name, sizeof(name), "a%d", k);
        gone = cg_unlink(va, &d.gfid, name) == 0;
    }
    ms = bfs_now_ms() - t0;
    ok(gone && ms < PROMPT_MS, "A unlinks its %d files in %llu ms although B's window on ed "
       "lasts %d ms", N, (unsigned long long)ms, DELAY_MS);
    calls_since("entrylk", lk, dl);
    for (int i = 0; i < NB; i++) /* A's lock and B's unlock, at most A's unlock too */
        ok(dl[i] <= 3, "brick %d: %llu entrylk for A's %d unlinks", i, (unsigned long long)dl[i],
           N);

    /* B heals in the foreground: its lookup of ed sees A's dirty marks and
     * heals first, under the lock A's window holds */
    heal_opts(vb, "0", "10");
    rc = prompt_entry(vb, NULL, "ed", &ms);
    is_int(rc, 0, "B's lookup of ed (heal in the foreground) answers within %d ms (took %llu ms)",
           PROMPT_MS, (unsigned long long)ms);
    heal_opts(vb, "8", "10");
    bool same = cg_same_gfid(&p, "ed/b0", 7);
    for (int i = 0; i < NB; i++)
        same = same && !cg_exists(&p, i, "ed/a0") && !cg_exists(&p, i, "ed/a19");
    ok(same, "every copy of ed holds b0 (one GFID) and none of A's files");
    ok(clean_within(&p, "ed", DELAY_MS + 5000), "no pending or dirty mark on ed once the windows "
       "end");
}

int main(void)
{
    plan_lazy();
    if (!cg_can_run())
        return 0;
    alarm(180);
    if (!ok(cg_init("contend") == 0, "process and scratch folder"))
        return done_testing();
    struct cg_vol paths, va, vb;
    memset(&paths, 0, sizeof(paths));
    if (!ok(bricks_start(&paths) == 0, "three bricks listening") ||
        !ok(client_open(&va, &paths) == 0 && client_open(&vb, &paths) == 0,
            "two replica 3 clients, every child up")) {
        cg_fini();
        return done_testing();
    }
    const char *only = getenv("CONTEND_TEST");
    if (!only || strcmp(only, "turns") == 0)
        turns(&va, &vb, &paths);
    if (!only || strcmp(only, "off") == 0)
        without_notices(&va, &vb);
    if (!only || strcmp(only, "heal") == 0)
        heal_waits(&va, &vb, &paths);
    if (!only || strcmp(only, "stuck") == 0)
        heal_stuck(&va, &vb, &paths);
    if (!only || strcmp(only, "wire") == 0)
        wire();
    if (!only || strcmp(only, "entry") == 0)
        entry_windows(&va, &vb, &paths);
    client_close(&va);
    client_close(&vb);
    for (int i = 0; i < NB; i++)
        bfs_graph_free(bricks[i]);
    cg_fini();
    return done_testing();
}
