/*
 * test_replicate_heal.c — self-heal of cluster/replicate in one process over
 * real bricks (tests/lib/cluster-graph.[ch], the same graph as
 * test_replicate.c): heals that find their lock held elsewhere (they wait
 * a bounded time, lookups never hang), the order of blocking locks from
 * above, the data heal by checksums (only the differing block crosses),
 * renames and symlinks healed, and the conservative merge of an entry
 * split-brain. Needs root (trusted xattrs); skips otherwise.
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

#include "../lib/cluster-graph.h"
#include "../lib/tap.h"

/* ---- scenarios ---- */

static void test_entry_merge(void)
{
    struct cg_vol v;
    if (cg_rep_open(&v, 2, false, " option cluster.quorum-type none\n") < 0)
        return;
    cg_mkdir(&v, &bfs_gfid_root, "dir", NULL);
    struct bfs_iatt d;
    cg_lookup(&v, &bfs_gfid_root, "dir", &d);
    cg_down(&v, 1, false);
    is_int(cg_put(&v, &d.gfid, "only-on-c0", "zero", NULL), 0, "create with c1 failing");
    /* The create's post-op (its dirty mark off, with the unlock) runs behind
     * its answer. c0 goes down below without replicate hearing of it (its
     * locks dropped, no CHILD_DOWN): a post-op still on its way would land
     * on c0 once it is back, unlocked, possibly between the merge's reading
     * of the counters and its reset (dirty -1 left, seen under load). */
    bool settled = false;
    for (int k = 0; k < 500 && !settled; k++) {
        settled = cg_counter(&v, 0, "dir", "dirty", 2) == 0;
        if (!settled)
            usleep(10000);
    }
    ok(settled, "the create's post-op done on c0");
    cg_up(&v, 1, false);
    cg_down(&v, 0, false);
    is_int(cg_put(&v, &d.gfid, "only-on-c1", "one", NULL), 0, "create with c0 failing");
    cg_up(&v, 0, false);
    ok(cg_counter(&v, 0, "dir", "c1", 2) > 0 && cg_counter(&v, 1, "dir", "c0", 2) > 0,
       "the directory's entry counters blame each other");
    is_int(cg_lookup(&v, &bfs_gfid_root, "dir", NULL), 0, "lookup of the directory");
    ok(cg_exists(&v, 0, "dir/only-on-c1") && cg_exists(&v, 1, "dir/only-on-c0"),
       "entry split-brain merged: every name on every copy");
    bool clean = cg_clean_soon(&v, "dir");
    ok(clean, "and the counters clean");
    for (int i = 0; i < 2 && !clean; i++)
        for (int t = 0; t < 3; t++)
            printf("# dir on c%d type %d: dirty %lld c0 %lld c1 %lld\n", i, t,
                   cg_counter(&v, i, "dir", "dirty", t), cg_counter(&v, i, "dir", "c0", t),
                   cg_counter(&v, i, "dir", "c1", t));
    is_int(cg_lookup(&v, &d.gfid, "only-on-c1", NULL), 0, "lookup of a merged name");
    ok(cg_same_everywhere(&v, "dir/only-on-c1", 3, -1), "its data healed too");
    cg_vol_close(&v);
}

static void test_rename_symlink_heal(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    cg_put(&v, &bfs_gfid_root, "old", "renamed content", &a);
    cg_down(&v, 1, true);
    struct bfs_rename_req rr = {.oldloc = cg_L(&bfs_gfid_root, "old"),
                                .newloc = cg_L(&bfs_gfid_root, "new")};
    is_int(bfs_sync_rename(v.top, v.st, &rr, NULL), 0, "rename with c1 down");
    struct bfs_symlink_req sr = {.target = "new", .loc = cg_L(&bfs_gfid_root, "ln")};
    is_int(bfs_sync_symlink(v.top, v.st, &sr, NULL), 0, "symlink with c1 down");
    struct bfs_setxattr_req xr = {.xattrs = bfs_dict_new()};
    xr.loc.gfid = a.gfid;
    bfs_dict_set_bin(xr.xattrs, "user.tag", "t1", 2);
    is_int(bfs_sync_setxattr(v.top, v.st, &xr, NULL), 0, "setxattr with c1 down");
    bfs_dict_unref(xr.xattrs);
    cg_up(&v, 1, true);
    is_int(cg_lookup(&v, &bfs_gfid_root, NULL, NULL), 0, "root lookup after c1 returns");
    ok(!cg_exists(&v, 1, "old") && cg_exists(&v, 1, "new"), "the rename reached c1");
    ok(cg_same_gfid(&v, "new", 7), "as the same file (same GFID)");
    char t[16] = "";
    ok(readlink(cg_on(&v, 1, "ln"), t, sizeof(t)) == 3 && memcmp(t, "new", 3) == 0,
       "the symlink was made on c1 with its target");
    ok(cg_same_gfid(&v, "ln", 7), "with its GFID");
    is_int(cg_lookup(&v, &bfs_gfid_root, "new", NULL), 0, "lookup new: metadata heal");
    ok(cg_same_everywhere(&v, "new", 7, -1), "copies identical: content, mode, owner, xattrs");
    ok(cg_clean_soon(&v, "new") && cg_clean_soon(&v, ""), "counters clean");
    cg_vol_close(&v);
}


/* A brick that goes down while this client's entry window on a folder is
 * held keeps the window's dirty mark (the post-op cannot reach it); when
 * it is back, replicate heals that folder's entries by itself, without a
 * lookup (the root, which the kernel never looks up, would else keep it
 * until the self-heal daemon came by). */
static bool dirty_gone_on(struct cg_vol *v, int i, const char *rel)
{
    for (int k = 0; k < 200; k++) {
        if (cg_counter(v, i, rel, "dirty", 2) == 0)
            return true;
        usleep(10000);
    }
    return false;
}

static void test_window_marks(void)
{
    struct cg_vol v;
    if (cg_rep_open(&v, 3, false,
                    " option cluster.post-op-delay-ms 10000\n option cluster.entry-eager-lock on\n") < 0)
        return;
    is_int(cg_put(&v, &bfs_gfid_root, "w1", "one", NULL), 0, "create under the root's window");
    ok(cg_counter(&v, 0, "", "dirty", 2) > 0, "the window's dirty mark is on c0");
    cg_down(&v, 0, true);
    ok(dirty_gone_on(&v, 1, "") && dirty_gone_on(&v, 2, ""),
       "c0 down: the window ends, c1 and c2 clean");
    ok(cg_counter(&v, 0, "", "dirty", 2) > 0, "c0 kept its mark");
    cg_up(&v, 0, true);
    ok(cg_clean_soon(&v, ""), "c0 back: the root's mark is gone without a lookup");
    ok(cg_same_gfid(&v, "w1", 7), "w1 on every copy");
    cg_vol_close(&v);
}

/* Entries of the root listed through replicate (-errno on failure). */
static int list_root(struct cg_vol *v)
{
    struct bfs_fd *dfd = bfs_fd_new(v->g, NULL, O_RDONLY, 1);
    struct bfs_opendir_req oreq = {.fd = dfd};
    oreq.loc.gfid = bfs_gfid_root;
    int rc = bfs_sync_opendir(v->top, v->st, &oreq, NULL);
    if (rc == 0) {
        struct bfs_readdir_req rr = {.fd = dfd, .size = 4096};
        struct bfs_readdir_rep rep;
        rc = bfs_sync_readdir(v->top, v->st, &rr, &rep);
        if (rc >= 0) {
            rc = (int)rep.entries.count;
            bfs_readdir_rep_clear_dup(&rep);
        }
    }
    bfs_fd_unref(dfd);
    return rc;
}

/* A change of a name that fails alike on every copy (EEXIST) changed
 * nothing: the directory stays listable (it was left with no readable
 * copy, and its listings failed with ENOTCONN until its next lookup:
 * seen as a lost listing in tests/integration/244 once the creates of
 * rebalance ran under entry windows). */
static void test_eexist_listing(void)
{
    struct cg_vol v;
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    is_int(cg_put(&v, &bfs_gfid_root, "x", "one", NULL), 0, "create x");
    ok(list_root(&v) > 0, "the root lists");
    is_int(cg_mkdir(&v, &bfs_gfid_root, "x", NULL), -EEXIST, "mkdir x: EEXIST on every copy");
    ok(list_root(&v) > 0, "the root still lists (%d)", list_root(&v));
    cg_vol_close(&v);
}

/* Sets brick i's dirty counter of type t on rel (a change in flight,
 * as another client's pre-op leaves it). */
static void set_dirty(struct cg_vol *v, int i, const char *rel, int t, int64_t n)
{
    uint64_t row[3] = {0, 0, 0};
    row[t] = htobe64((uint64_t)n);
    (void)setxattr(cg_on(v, i, rel), "trusted.brickfs.afr.dirty", row, sizeof(row), 0);
}

/* An entry heal that finds nothing to do once it holds the lock (the
 * change that left the dirty mark a lookup saw was over by then: under
 * another client's entry window that is most heals) changed nothing: the
 * folder's copies stay readable, and a listing in progress goes on (it
 * failed ENOTCONN: no readable copy, and a listing past its start did
 * not look again; 244 and 243 with cluster.entry-eager-lock on). */
static void test_heal_nothing(void)
{
    struct cg_vol v;
    struct bfs_iatt d;
    if (cg_rep_open(&v, 3, false,
                    " option cluster.background-self-heal-count 8\n"
                    " option cluster.entry-eager-lock off\n"
                    " option cluster.read-policy first-up\n") < 0)
        return;
    struct bfs_fd *dfd = cg_dir_of_names(&v, "hn", 3, &d);
    if (!ok(dfd != NULL, "a folder of 3 names, opened")) {
        cg_vol_close(&v);
        return;
    }
    ok(cg_clean_soon(&v, "hn"), "its counters clean");
    bool eod = false;
    uint64_t off = 0;
    is_int(cg_readdir_at(&v, dfd, 0, 8, &eod, &off), 1, "a listing starts: one name");
    /* another client is creating a name in it */
    is_int(cg_entrylk_on(&v, 1, &d.gfid, "x", true, 99), 0, "another client locks a name");
    set_dirty(&v, 0, "hn", 2, 1);
    uint64_t h0 = cg_top_stat(&v, "heals_done");
    is_int(cg_lookup(&v, &bfs_gfid_root, "hn", NULL), 0,
           "a lookup sees its dirty mark (the heal waits for the lock)");
    set_dirty(&v, 0, "hn", 2, 0);
    is_int(cg_entrylk_on(&v, 1, &d.gfid, "x", false, 99), 0, "its change is over: it unlocks");
    bool done = false;
    for (int k = 0; k < 500 && !done; k++) {
        done = cg_top_stat(&v, "heals_done") > h0;
        if (!done)
            usleep(10000);
    }
    ok(done, "the heal ran and found nothing to do");
    uint64_t l0[3];
    cg_fop_counts(&v, "lookup", l0);
    int names = 1, rc = 0;
    for (int calls = 0; !eod && calls < 10; calls++) {
        rc = cg_readdir_at(&v, dfd, off, 8, &eod, &off);
        if (rc < 0)
            break;
        names += rc;
    }
    is_int(rc < 0 ? rc : names, 3, "the listing goes on to its end: 3 names");
    uint64_t l1[3];
    cg_fop_counts(&v, "lookup", l1);
    ok(l1[0] == l0[0] && l1[1] == l0[1] && l1[2] == l0[2],
       "without looking the folder up again (its copies stayed readable)");
    bfs_fd_unref(dfd);
    cg_vol_close(&v);
}

/* Heals take their locks without waiting for ever: a lock held elsewhere
 * (another client that stopped while holding it) delays a foreground heal
 * by cluster.heal-lock-timeout at most; the lookup answers from a good
 * copy and the heal happens on a later access. */
static void test_heal_lock_busy(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    /* the other client's lock is a try lock (no contention notice): our own
     * entry window on the root after the mkdir would refuse it */
    if (cg_rep_open(&v, 3, false,
                    " option cluster.heal-lock-timeout 1\n option cluster.entry-eager-lock off\n") < 0)
        return;
    cg_down(&v, 2, true);
    is_int(cg_mkdir(&v, &bfs_gfid_root, "d", &a), 0, "mkdir with c2 down");
    cg_up(&v, 2, true);
    is_int(cg_entrylk_on(&v, 1, &bfs_gfid_root, "x", true, 99), 0, "another client locks a name");
    is_int(cg_lookup_within(&v, &bfs_gfid_root, NULL, 20000, "root lookup"), 0,
           "root lookup answers although the heal cannot lock");
    ok(!cg_exists(&v, 2, "d"), "c2 not healed while the lock is held");
    is_int(cg_entrylk_on(&v, 1, &bfs_gfid_root, "x", false, 99), 0, "the other client unlocks");
    is_int(cg_lookup_within(&v, &bfs_gfid_root, NULL, 20000, "root lookup"), 0, "root lookup");
    ok(cg_exists(&v, 2, "d") && cg_same_gfid(&v, "d", 7), "now the heal made d on c2");
    ok(cg_clean_soon(&v, ""), "counters clean");
    cg_vol_close(&v);
}


/* Data heal by checksums: a 4 MiB file whose copy on c2 missed one small
 * write heals by writing that one 128 KiB block to c2 and reading nothing
 * of c2's copy (rchecksum compares); a sink that cannot answer rchecksum
 * is compared by reads and still gets only the block that differs. */
static void heal_one_block(struct cg_vol *v, const char *name, bool sink_sums)
{
    struct bfs_iatt a;
    struct bfs_fd *fd;
    enum { SIZE = 4 << 20, CHUNK = 1 << 20 };
    char *buf = malloc(CHUNK);
    unsigned seed = 12345;
    cg_create(v, &bfs_gfid_root, name, &fd, &a);
    for (int off = 0; off < SIZE; off += CHUNK) {
        for (int i = 0; i < CHUNK; i++)
            buf[i] = (char)(rand_r(&seed) & 0xff);
        cg_write(v, fd, (uint64_t)off, buf, CHUNK);
    }
    cg_flush_close(v, fd);
    free(buf);
    cg_down(v, 2, true);
    cg_open(v, &a.gfid, O_RDWR, &fd);
    is_int(cg_write(v, fd, (1 << 20) + 5, "a change in block 8", 19), 19, "write with c2 down");
    cg_flush_close(v, fd);
    cg_up(v, 2, true);
    if (!sink_sums) { /* c2 an older brick: rchecksum unknown */
        cg_reconf(v, 2, "enable", "rchecksum");
        cg_reconf(v, 2, "error-no", "ENOSYS");
        cg_reconf(v, 2, "failure", "100");
    }
    ok(!cg_same_bytes(v, 0, 2, name), "c2's copy differs");
    uint64_t w0 = cg_brick_stat(v, 2, "bytes_written"), r0 = cg_brick_stat(v, 2, "bytes_read");
    is_int(cg_lookup(v, &bfs_gfid_root, name, NULL), 0, "lookup: data heal");
    uint64_t written = cg_brick_stat(v, 2, "bytes_written") - w0;
    uint64_t read = cg_brick_stat(v, 2, "bytes_read") - r0;
    ok(cg_same_bytes(v, 0, 2, name) && cg_same_bytes(v, 1, 2, name), "c2's copy healed");
    ok(cg_all_clean(v, name), "counters clean");
    is_int((long long)written, 128 << 10, "only the block that differs was written to c2");
    if (sink_sums)
        is_int((long long)read, 0, "c2's copy was compared by checksums, not read");
    else
        is_int((long long)read, SIZE, "without rchecksum c2's copy was read to compare");
    if (!sink_sums) {
        cg_reconf(v, 2, "failure", "0");
        cg_reconf(v, 2, "error-no", "ENOTCONN");
        cg_reconf(v, 2, "enable", "all");
    }
}

static void test_checksum_heal(void)
{
    struct cg_vol v;
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    heal_one_block(&v, "big", true);
    heal_one_block(&v, "big-old-sink", false);
    /* rchecksum itself, on one brick */
    struct bfs_iatt a;
    cg_lookup(&v, &bfs_gfid_root, "big", &a);
    struct bfs_fd *fd;
    cg_top_set(&v, "cluster.lazy-open", "off"); /* the fd must be open on c0 too */
    cg_open(&v, &a.gfid, O_RDONLY, &fd);
    struct bfs_rchecksum_req rq = {.fd = fd, .offset = 0, .len = 300 << 10, .block = 128 << 10};
    struct bfs_rchecksum_rep rp;
    is_int(bfs_sync_rchecksum(cg_child(&v, 0), v.st, &rq, &rp), 3, "rchecksum: 3 blocks");
    ok(rp.size == 4 << 20 && rp.sums.len == 96, "32 bytes each, and the file's size");
    bfs_rchecksum_rep_clear_dup(&rp);
    rq.offset = (4 << 20) - 1000;
    is_int(bfs_sync_rchecksum(cg_child(&v, 0), v.st, &rq, &rp), 1, "a range across EOF: 1 block");
    bfs_rchecksum_rep_clear_dup(&rp);
    rq.block = 100;
    is_int(bfs_sync_rchecksum(cg_child(&v, 0), v.st, &rq, &rp), -EINVAL, "a tiny block: EINVAL");
    bfs_rchecksum_rep_clear_dup(&rp);
    cg_flush_close(&v, fd);
    cg_vol_close(&v);
}


/* Blocking locks from above (inodelk SETLKW, as a translator over
 * replicate or an application's fcntl(F_SETLKW) sends them) must be taken
 * in child order, never all at once: two lockers racing may each win a
 * different copy first, and then each waits for the other for ever. The
 * invariant that rules it out: a request waiting for copy i holds no copy
 * after i. Here c1 is held elsewhere (owner D): A's request, while it
 * waits for c1, must not hold c2. */
struct lk_call {
    struct cg_vol *v;
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
    int rc = bfs_sync_inodelk(k->v->top, st, &req, NULL);
    bfs_stack_unref(st);
    pthread_mutex_lock(&k->m);
    k->rc = rc;
    k->done = true;
    pthread_cond_signal(&k->c);
    pthread_mutex_unlock(&k->m);
    return NULL;
}

static void lk_start(struct lk_call *k, pthread_t *th, struct cg_vol *v, const struct bfs_gfid *g,
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

static int inodelk_on(struct cg_vol *v, int i, const struct bfs_gfid *g, uint64_t owner, bool lock)
{
    struct bfs_stack *st = bfs_stack_new();
    st->lk_owner = owner;
    struct bfs_inodelk_req req = {.domain = "app", .cmd = BFS_LK_SETLK};
    req.loc.gfid = *g;
    req.lock.type = lock ? F_WRLCK : F_UNLCK;
    req.lock.whence = SEEK_SET;
    req.lock.owner = owner;
    int rc = bfs_sync_inodelk(cg_child(v, i), st, &req, NULL);
    bfs_stack_unref(st);
    return rc;
}

static void test_lock_order(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    cg_put(&v, &bfs_gfid_root, "lk", "x", &a);
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
    cg_vol_close(&v);
}

int main(void)
{
    static const struct cg_test tests[] = {
        {"merge", test_entry_merge},     {"rename", test_rename_symlink_heal},
        {"healbusy", test_heal_lock_busy}, {"winmarks", test_window_marks},
        {"eexist", test_eexist_listing}, {"healnothing", test_heal_nothing},
        {"sumheal", test_checksum_heal},  {"lkorder", test_lock_order},
    };
    plan_lazy();
    if (!cg_main("afrheal", tests, sizeof(tests) / sizeof(tests[0]), "AFR_TEST"))
        return 0;
    return done_testing();
}
