/*
 * test_disperse_early.c — cluster/disperse answers a lookup or stat on the
 * first replies that agree (performance-notes.md 34; disperse-lookup.c
 * early_pick), in one process over real bricks: 4+2, each child
 * storage/posix under features/locks under debug/io-stats under
 * debug/error-gen (c0..c5), whose delay-ms holds two children's answers
 * back for seconds so that which replies are in at the answer does not
 * depend on timing.
 *
 * Checks (disperse's dump counts the answers given early and the replies
 * in at each answer):
 *   - with c4 and c5 held back, a lookup by name and a stat by GFID are
 *     answered on c0..c3 with the right size, before the held replies;
 *   - a stale child among the first replies (c0 missed a change) stops the
 *     early answer: the answer waits for all and has the new size;
 *   - a late reply that disagrees (c5's data version behind, clean marks on
 *     the others) does not change the early answer, and still starts the
 *     heal: c5 catches up in the background;
 *   - R children down: the right size (nothing early: all asked are in);
 *     more than R down: an error, never an answer;
 *   - a change made right after an early answer (a setxattr failing on c0)
 *     is not undone by the late replies: the good children it set stay
 *     (a getxattr reads the new value, not c0's old one);
 *   - a foreground-heal volume (background count 0) never answers a lookup
 *     early.
 * Needs root (trusted xattrs); skips otherwise.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../lib/cluster-graph.h"
#include "../lib/tap.h"
#include "core/graph.h"

enum { N = 6, R = 2 };

static const struct bfs_gfid ROOT = {.b = {[15] = 1}};
#define VKEY "trusted.brickfs.ec.version"

static int vol_open(struct cg_vol *v, int heal_count)
{
    static const char *const layers[] = {"features/locks l", "debug/io-stats s", NULL};
    char top[512];
    snprintf(top, sizeof(top),
             " type cluster/disperse\n option redundancy %d\n"
             " option cluster.background-self-heal-count %d\n"
             " option cluster.post-op-delay-ms 20\n", R, heal_count);
    return cg_vol_open(v, N, layers, top);
}

static void hold(struct cg_vol *v, int i, const char *ms)
{
    cg_reconf(v, i, "delay-ms", ms);
}

static int stat_gfid(struct cg_vol *v, const struct bfs_gfid *g, struct bfs_iatt *attr)
{
    struct bfs_stat_req req = {.loc.gfid = *g};
    struct bfs_stat_rep rep = {0};
    int rc = bfs_sync_stat(v->top, v->st, &req, &rep);
    if (attr)
        *attr = rep.attr;
    bfs_stat_rep_clear_dup(&rep);
    return rc;
}

static long long version_of(struct cg_vol *v, int i, const char *rel, int t)
{
    uint8_t raw[24];
    if (lgetxattr(cg_on(v, i, rel), VKEY, raw, sizeof(raw)) < (ssize_t)(8 * t + 8))
        return -1;
    uint64_t be;
    memcpy(&be, raw + 8 * t, 8);
    return (long long)be64toh(be);
}

/* Every held answer has come back: no call of the graph in flight (at most
 * 10 s). */
static bool settle(struct cg_vol *v)
{
    for (int k = 0; k < 1000; k++) {
        if (__atomic_load_n(&v->g->inflight, __ATOMIC_ACQUIRE) == 0)
            return true;
        usleep(10000);
    }
    return false;
}

/* No dirty mark of rel on any brick (within 5 s: post-ops run behind the
 * answers). */
static bool clean_soon(struct cg_vol *v, const char *rel)
{
    for (int k = 0; k < 500; k++) {
        bool clean = true;
        for (int i = 0; i < N && clean; i++) {
            uint8_t raw[24] = {0};
            ssize_t n = lgetxattr(cg_on(v, i, rel), "trusted.brickfs.ec.dirty", raw, sizeof(raw));
            for (ssize_t j = 0; j < n; j++)
                clean = clean && raw[j] == 0;
        }
        if (clean)
            return true;
        usleep(10000);
    }
    return false;
}

static char big[9000];

static void test_early(struct cg_vol *v)
{
    struct bfs_iatt a;
    ok(cg_put(v, &ROOT, "f", "hello early answers", &a) == 0, "a file");
    struct bfs_gfid g = a.gfid;
    ok(clean_soon(v, "f"), "its marks are gone"); /* the eager window's post-op */
    hold(v, 4, "2000");
    hold(v, 5, "2000");
    uint64_t e0 = cg_top_stat(v, "lookups_early"), w0 = cg_top_stat(v, "lookup_replies_waited");
    uint64_t n0 = cg_top_stat(v, "lookups");
    is_int(cg_lookup(v, &ROOT, "f", &a), 0, "lookup with c4, c5 held back");
    is_int((int)a.size, 19, "the file's size");
    is_int(stat_gfid(v, &g, &a), 0, "stat by GFID");
    is_int((int)a.size, 19, "the file's size");
    is_int((int)(cg_top_stat(v, "lookups") - n0), 2, "two answers");
    is_int((int)(cg_top_stat(v, "lookups_early") - e0), 2, "both before every reply was in");
    is_int((int)(cg_top_stat(v, "lookup_replies_waited") - w0), 8, "each on the 4 first replies");
    hold(v, 4, "0");
    hold(v, 5, "0");
    ok(settle(v), "the held replies came back");
}

static void test_stale_first(struct cg_vol *v)
{
    struct bfs_iatt a;
    memset(big, 'x', sizeof(big));
    big[sizeof(big) - 1] = 0;
    ok(cg_put(v, &ROOT, "s", "short", &a) == 0, "a file");
    struct bfs_gfid g = a.gfid;
    ok(clean_soon(v, "s"), "its marks are gone");
    cg_down(v, 0, true);
    struct bfs_fd *fd;
    int rc = cg_open(v, &g, O_RDWR, &fd);
    ok(rc == 0 && cg_write(v, fd, 0, big, sizeof(big) - 1) == (int)sizeof(big) - 1 &&
           cg_flush_close(v, fd) == 0, "written longer while c0 is down");
    cg_up(v, 0, true);
    hold(v, 4, "2000");
    hold(v, 5, "2000");
    uint64_t e0 = cg_top_stat(v, "lookups_early"), w0 = cg_top_stat(v, "lookup_replies_waited");
    is_int(stat_gfid(v, &g, &a), 0, "stat with c0 stale, c4 and c5 held back");
    is_int((int)a.size, (int)sizeof(big) - 1, "the new size, not c0's");
    is_int((int)(cg_top_stat(v, "lookups_early") - e0), 0, "not answered early");
    is_int((int)(cg_top_stat(v, "lookup_replies_waited") - w0), 6, "but on all six replies");
    hold(v, 4, "0");
    hold(v, 5, "0");
    ok(settle(v), "the held replies came back");
}

static void test_late_disagrees(struct cg_vol *v)
{
    struct bfs_iatt a;
    ok(cg_put(v, &ROOT, "l", "late replies still heal", &a) == 0, "a file");
    ok(clean_soon(v, "l"), "its marks are gone");
    /* and its window released (close does not wait for it): a heal finding
     * the lock still held would leave c5 for later */
    ok(cg_unlocked_soon(v), "its lock released");
    /* c5 falls behind: the others' data version moves on by hand, as if
     * c5 had missed a change whose marks were cleared since */
    bool set = true;
    for (int i = 0; i < N - 1; i++) {
        uint8_t raw[24] = {0};
        ssize_t n = lgetxattr(cg_on(v, i, "l"), VKEY, raw, sizeof(raw));
        uint64_t be;
        memcpy(&be, raw, 8);
        be = htobe64(be64toh(be) + 1);
        memcpy(raw, &be, 8);
        set = set && (n == 24 || n < 0) && lsetxattr(cg_on(v, i, "l"), VKEY, raw, 24, 0) == 0;
    }
    long long want = version_of(v, 0, "l", 0);
    ok(set && want > version_of(v, 5, "l", 0), "c0..c4's data version ahead of c5's");
    hold(v, 4, "1000");
    hold(v, 5, "1000");
    uint64_t e0 = cg_top_stat(v, "lookups_early");
    is_int(cg_lookup(v, &ROOT, "l", &a), 0, "lookup with stale c5 held back");
    is_int((int)a.size, 23, "the right size");
    is_int((int)(cg_top_stat(v, "lookups_early") - e0), 1, "answered early");
    hold(v, 4, "0");
    hold(v, 5, "0");
    bool healed = false;
    for (int k = 0; k < 1000 && !healed; k++) {
        healed = version_of(v, 5, "l", 0) == want;
        if (!healed)
            usleep(10000);
    }
    ok(healed, "the late reply started the heal: c5 caught up");
}

static int set_x(struct cg_vol *v, const struct bfs_gfid *g, const char *val)
{
    struct bfs_setxattr_req req = {.loc.gfid = *g, .xattrs = bfs_dict_new()};
    struct bfs_setxattr_rep rep = {0};
    bfs_dict_set_bin(req.xattrs, "user.x", val, strlen(val));
    int rc = bfs_sync_setxattr(v->top, v->st, &req, &rep);
    bfs_dict_unref(req.xattrs);
    bfs_setxattr_rep_clear_dup(&rep);
    return rc;
}

/* user.x through the volume, "" when it cannot be read */
static void get_x(struct cg_vol *v, const struct bfs_gfid *g, char *out, size_t size)
{
    struct bfs_getxattr_req req = {.loc.gfid = *g, .name = "user.x"};
    struct bfs_getxattr_rep rep = {0};
    const void *val;
    size_t len;
    out[0] = 0;
    int rc = bfs_sync_getxattr(v->top, v->st, &req, &rep);
    if (rc < 0)
        snprintf(out, size, "error %d", rc);
    if (rc >= 0 && rep.xattrs && bfs_dict_get_bin(rep.xattrs, "user.x", &val, &len) == 0 &&
        len < size) {
        memcpy(out, val, len);
        out[len] = 0;
    }
    bfs_getxattr_rep_clear_dup(&rep);
}

static void test_change_after(struct cg_vol *v)
{
    struct bfs_iatt a;
    char got[32];
    ok(cg_put(v, &ROOT, "m", "metadata", &a) == 0, "a file");
    struct bfs_gfid g = a.gfid;
    is_int(set_x(v, &g, "old"), 0, "user.x = old");
    ok(clean_soon(v, "m"), "its marks are gone");
    /* only the lookups of c4 and c5 come late */
    cg_reconf(v, 4, "enable", "lookup");
    cg_reconf(v, 5, "enable", "lookup");
    hold(v, 4, "1500");
    hold(v, 5, "1500");
    uint64_t e0 = cg_top_stat(v, "lookups_early");
    is_int(stat_gfid(v, &g, &a), 0, "stat answered");
    is_int((int)(cg_top_stat(v, "lookups_early") - e0), 1, "early");
    cg_reconf(v, 0, "enable", "setxattr");
    cg_reconf(v, 0, "failure", "100");
    is_int(set_x(v, &g, "new"), 0, "user.x = new while c0 fails it and the stat's replies are out");
    cg_reconf(v, 0, "failure", "0");
    cg_reconf(v, 0, "enable", "all");
    hold(v, 4, "0");
    hold(v, 5, "0");
    ok(settle(v), "the stat's late replies came back");
    cg_reconf(v, 4, "enable", "all");
    cg_reconf(v, 5, "enable", "all");
    get_x(v, &g, got, sizeof(got));
    is_str(got, "new", "getxattr reads the new value: c0 is still not good");
}

static void test_down(struct cg_vol *v)
{
    struct bfs_iatt a;
    ok(cg_put(v, &ROOT, "d", "two down is fine", &a) == 0, "a file");
    struct bfs_gfid g = a.gfid;
    ok(clean_soon(v, "d"), "its marks are gone");
    cg_down(v, 1, true);
    cg_down(v, 4, true);
    uint64_t e0 = cg_top_stat(v, "lookups_early");
    is_int(stat_gfid(v, &g, &a), 0, "stat with R children down");
    is_int((int)a.size, 16, "the right size");
    is_int(cg_lookup(v, &ROOT, "d", &a), 0, "lookup with R children down");
    is_int((int)a.size, 16, "the right size");
    is_int((int)(cg_top_stat(v, "lookups_early") - e0), 0, "nothing early: all asked answered");
    cg_down(v, 2, true);
    /* attributes are whole on every child: a stat may answer from fewer
     * than k (they overlap every acknowledged change), the data may not */
    int rc = stat_gfid(v, &g, &a);
    ok(rc == 0 ? a.size == 16 : rc == -ENOTCONN || rc == -EIO,
       "more than R down: stat right or failed (%d)", rc);
    struct bfs_fd *fd;
    char buf[64];
    rc = cg_open(v, &g, O_RDONLY, &fd);
    if (rc == 0) {
        rc = cg_read(v, fd, buf, sizeof(buf));
        cg_flush_close(v, fd);
    }
    ok(rc == -ENOTCONN || rc == -EIO, "and a read fails (%d), never wrong data", rc);
    cg_up(v, 1, true);
    cg_up(v, 2, true);
    cg_up(v, 4, true);
}

static void test_foreground(void)
{
    struct cg_vol v;
    if (vol_open(&v, 0) < 0) {
        ok(false, "foreground-heal graph");
        return;
    }
    struct bfs_iatt a;
    ok(cg_put(&v, &ROOT, "f", "foreground", &a) == 0, "a file (foreground heals)");
    ok(clean_soon(&v, "f"), "its marks are gone");
    hold(&v, 5, "300");
    uint64_t e0 = cg_top_stat(&v, "lookups_early");
    is_int(cg_lookup(&v, &ROOT, "f", &a), 0, "lookup with c5 held back");
    is_int((int)(cg_top_stat(&v, "lookups_early") - e0), 0, "waits for every reply");
    hold(&v, 5, "0");
    ok(settle(&v), "the held reply came back");
    cg_vol_close(&v);
}

int main(void)
{
    plan_lazy();
    if (!cg_can_run())
        return 0;
    alarm(180);
    struct cg_vol v;
    if (cg_init("ecearly") < 0 || vol_open(&v, 8) < 0) {
        ok(false, "graph");
    } else {
        test_early(&v);
        test_stale_first(&v);
        test_late_disagrees(&v);
        test_change_after(&v);
        test_down(&v);
        cg_vol_close(&v);
        test_foreground();
    }
    cg_fini();
    return done_testing();
}
