/*
 * test_disperse_heal.c — cluster/disperse's entry heal of names a brick
 * kept half made, in one process over real bricks (storage/posix ->
 * features/index -> features/locks -> debug/error-gen, named c0, c1, ...;
 * tests/lib/cluster-graph.c), with heal on access switched off so that
 * only the self-heal daemon's calls (getxattr brickfs.heal.now) heal:
 *
 *   - a brick killed in the middle of a create keeps the name with no GFID
 *     (killed between the open and setting the GFID) or with its GFID but
 *     no handle (killed before the handle's link). The file's own heals
 *     work by GFID and fail on that brick, and no client may ever look the
 *     name up: the parent's entry heal must complete the name there, and
 *     the file then heals (fragments rebuilt, indices empty);
 *   - the same for a mkdir ("halfdir"): a folder with no GFID, or with its
 *     GFID and no handle (the listing cannot tell: a lookup by GFID does),
 *     completed, or removed when no other child has the name;
 *   - (not heal, but the same graph) the readdir that confirms a
 *     listing's end, after the child that served the listing is gone,
 *     answers empty with end-of-directory.
 *
 * Needs root (trusted xattrs); skips otherwise.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../lib/cluster-graph.h"
#include "../lib/tap.h"

/* 3+1 over features/index (x<i>) and features/locks (l<i>); heal on
 * access off: the daemon's calls are what heal. */
static int vol_open(struct cg_vol *v)
{
    static const char *const layers[] = {"features/index x", "features/locks l", NULL};
    return cg_vol_open(v, 4, layers,
                       " type cluster/disperse\n option redundancy 1\n"
                       " option cluster.post-op-delay-ms 0\n"
                       " option cluster.data-self-heal off\n"
                       " option cluster.metadata-self-heal off\n"
                       " option cluster.entry-self-heal off\n");
}

/* No dirty mark on rel on any brick (within 10 s: post-ops run behind the
 * answer). */
static bool clean_soon(struct cg_vol *v, const char *rel)
{
    for (int k = 0; k < 1000; k++) {
        bool clean = true;
        for (int i = 0; i < v->n && clean; i++) {
            static const char zero[24];
            char raw[24] = {0};
            ssize_t len = lgetxattr(cg_on(v, i, rel), "trusted.brickfs.ec.dirty", raw, sizeof(raw));
            clean = len <= 0 || memcmp(raw, zero, (size_t)len) == 0;
        }
        if (clean)
            return true;
        usleep(10000);
    }
    return false;
}

struct status {
    int rc;
    char pending[64], missing[64];
};

static void copy(const struct bfs_dict *d, const char *key, char *out, size_t len)
{
    const char *s = NULL;
    out[0] = '\0';
    if (bfs_dict_get_str(d, key, &s) == 0 && s)
        snprintf(out, len, "%s", s);
}

/* heal.now of g until nothing is pending (at most 100 tries, 20 ms apart:
 * it tries the locks once, and an entry change's unlock runs behind its
 * answer; the daemon comes back on its next pass, so does this). */
static struct status heal_settles(struct cg_vol *v, const struct bfs_gfid *g)
{
    struct status s = {0};
    for (int k = 0; k < 100; k++) {
        struct bfs_getxattr_req req = {.name = "brickfs.heal.now"};
        struct bfs_getxattr_rep rep;
        req.loc.gfid = *g;
        s.rc = bfs_sync_getxattr(v->top, v->st, &req, &rep);
        copy(rep.xattrs, "brickfs.heal.pending", s.pending, sizeof(s.pending));
        copy(rep.xattrs, "brickfs.heal.missing", s.missing, sizeof(s.missing));
        bfs_getxattr_rep_clear_dup(&rep);
        if (s.rc <= 0 || !s.pending[0])
            break;
        usleep(20000);
    }
    return s;
}

/* Entries on child i's pending index after they settle (at most 10 s). */
static int index_settles(struct cg_vol *v, int i)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/.brickfs/indices/pending", v->brick[i]);
    int n = -1;
    for (int k = 0; k < 1000 && n != 0; k++) {
        if (k)
            usleep(10000);
        DIR *d = opendir(path);
        n = 0;
        for (struct dirent *de; d && (de = readdir(d));)
            n += de->d_name[0] != '.';
        if (d)
            closedir(d);
    }
    return n;
}

/* The file g reads s through the volume (from whatever children are up). */
static bool reads(struct cg_vol *v, const struct bfs_gfid *g, const char *s)
{
    struct bfs_fd *fd;
    char buf[4096];
    if (cg_open(v, g, O_RDONLY, &fd) < 0)
        return false;
    int n = cg_read(v, fd, buf, sizeof(buf));
    cg_flush_close(v, fd);
    return n == (int)strlen(s) && memcmp(buf, s, (size_t)n) == 0;
}

/* 2500 bytes of letters from `first` on: chunks of 1024 (3+1), so data
 * child 1 holds bytes 1024-2047. */
static void text(char *out, char first)
{
    for (int i = 0; i < 2500; i++)
        out[i] = (char)(first + i % 23);
    out[2500] = '\0';
}

/* Child 1 (a data child) misses the creates of d/f and d/g and keeps them
 * half made: d/f with no GFID, d/g with its GFID and no handle. */
static void test_half_created(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_gfid d, f, g;
    char tf[2501], tg[2501];
    text(tf, 'a');
    text(tg, 'A');
    if (vol_open(&v) < 0) {
        ok(0, "half: graph");
        return;
    }
    is_int(cg_mkdir(&v, &bfs_gfid_root, "d", &a), 0, "half: mkdir d");
    d = a.gfid;
    ok(clean_soon(&v, "."), "half: the root's post-op done before c1 goes down");
    cg_down(&v, 1, true);
    is_int(cg_put(&v, &d, "f", tf, &a), 0, "half: create d/f with c1 down");
    f = a.gfid;
    is_int(cg_put(&v, &d, "g", tg, &a), 0, "half: create d/g with c1 down");
    g = a.gfid;
    cg_half_create(&v, 1, "d/f", NULL); /* c1 died before the GFID */
    cg_half_create(&v, 1, "d/g", &g);   /* c1 died before the handle */
    ok(cg_exists(&v, 1, "d/f") && !cg_handle_present(v.brick[1], &g),
       "half: c1 has d/f, and d/g's GFID but no handle");
    cg_up(&v, 1, true);
    struct status s = heal_settles(&v, &d);
    is_str(s.pending, "", "half: d healed");
    const struct bfs_gfid *file[2] = {&f, &g};
    for (int k = 0; k < 2; k++) {
        const char *rel = k ? "d/g" : "d/f";
        s = heal_settles(&v, file[k]);
        is_str(s.pending, "", "half: %s healed (%s missing)", rel, s.missing);
        is_str(s.missing, "", "half: %s is on every child", rel);
        ok(cg_gfid_on(&v, 1, rel, file[k]) && cg_handle_present(v.brick[1], file[k]),
           "half: c1's %s has the file's GFID and its handle", rel);
    }
    for (int i = 0; i < v.n; i++)
        is_int(index_settles(&v, i), 0, "half: index of c%d empty", i);
    /* c0 down: reads need c1's rebuilt fragments */
    cg_down(&v, 0, true);
    ok(reads(&v, &f, tf), "half: d/f reads right with c1's rebuilt fragment (c0 down)");
    ok(reads(&v, &g, tg), "half: d/g reads right with c1's rebuilt fragment (c0 down)");
    cg_up(&v, 0, true);
    cg_down(&v, 3, true); /* c3 (parity) down: c1's fragment is read as it is */
    ok(reads(&v, &f, tf) && reads(&v, &g, tg), "half: both read right from c0-c2 (c3 down)");
    cg_up(&v, 3, true);
    cg_vol_close(&v);
}

/* The same for a mkdir: child 1 keeps d/k with no GFID and d/k2 with its
 * GFID and no handle (killed in the middle of their mkdirs), and d/gone,
 * d/gone2 (no GFID / a GFID, no handle) that no other child has (mkdirs
 * that failed). The parent's entry heal must remove what the others lack
 * (reachable by name only) and complete the rest; the folders then heal
 * by GFID. */
static void test_half_dir(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_gfid d, k, k2, x, gone2;
    char tx[2501];
    text(tx, 'k');
    if (vol_open(&v) < 0) {
        ok(0, "halfdir: graph");
        return;
    }
    is_int(cg_mkdir(&v, &bfs_gfid_root, "d", &a), 0, "halfdir: mkdir d");
    d = a.gfid;
    ok(clean_soon(&v, "."), "halfdir: the root's post-op done before c1 goes down");
    cg_down(&v, 1, true);
    is_int(cg_mkdir(&v, &d, "k", &a), 0, "halfdir: mkdir d/k with c1 down");
    k = a.gfid;
    is_int(cg_mkdir(&v, &d, "k2", &a), 0, "halfdir: mkdir d/k2 with c1 down");
    k2 = a.gfid;
    is_int(cg_put(&v, &k2, "x", tx, &a), 0, "halfdir: create d/k2/x with c1 down");
    x = a.gfid;
    bfs_gfid_generate(&gone2);
    cg_half_mkdir(&v, 1, "d/k", NULL);    /* c1 died before the GFID */
    cg_half_mkdir(&v, 1, "d/k2", &k2);    /* c1 died before the handle */
    cg_half_mkdir(&v, 1, "d/gone", NULL); /* mkdirs that failed: c1 only */
    cg_half_mkdir(&v, 1, "d/gone2", &gone2);
    ok(!cg_handle_present(v.brick[1], &k2), "halfdir: c1 has d/k2's GFID but no handle");
    cg_up(&v, 1, true);
    struct status s = heal_settles(&v, &d);
    is_str(s.pending, "", "halfdir: d healed");
    ok(!cg_exists(&v, 1, "d/gone"), "halfdir: c1's d/gone (no GFID, on no other child) removed");
    ok(!cg_exists(&v, 1, "d/gone2"), "halfdir: c1's d/gone2 (no handle, on no other child) removed");
    ok(cg_gfid_on(&v, 1, "d/k", &k), "halfdir: c1's d/k has the folder's GFID");
    ok(cg_handle_present(v.brick[1], &k), "halfdir: c1 has d/k's handle");
    ok(cg_handle_present(v.brick[1], &k2), "halfdir: c1 has d/k2's handle");
    const struct bfs_gfid *heals[3] = {&k, &k2, &x};
    static const char *const rel[3] = {"d/k", "d/k2", "d/k2/x"};
    for (int j = 0; j < 3; j++) {
        s = heal_settles(&v, heals[j]);
        is_str(s.pending, "", "halfdir: %s healed (%s missing)", rel[j], s.missing);
    }
    for (int i = 0; i < v.n; i++)
        is_int(index_settles(&v, i), 0, "halfdir: index of c%d empty", i);
    cg_down(&v, 0, true); /* reads need c1's rebuilt fragment */
    ok(reads(&v, &x, tx), "halfdir: d/k2/x reads right with c1's rebuilt fragment (c0 down)");
    cg_up(&v, 0, true);
    cg_vol_close(&v);
}

/* The last readdir of a listing (the one that confirms the end) may come
 * after the child that served the listing went away (a replace-brick:
 * the kernel asks once more at the end offset). The listing is complete:
 * it is answered empty with end-of-directory, not ENOTCONN (as replicate
 * does, replicate-read.c). */
static void test_listing_end(void)
{
    struct cg_vol v;
    struct bfs_iatt d;
    if (vol_open(&v) < 0) {
        ok(0, "listend: graph");
        return;
    }
    struct bfs_fd *dfd = cg_dir_of_names(&v, "ld", 3, &d);
    if (!ok(dfd != NULL, "listend: a folder of 3 names, opened")) {
        cg_vol_close(&v);
        return;
    }
    bool eod = false;
    uint64_t off = 0, mid = 0, next = 0;
    int names = cg_list_to_end(&v, dfd, 8, &eod, &mid, &off); /* one name per call */
    is_int(names, 3, "listend: the listing gives the 3 names, one per call");
    ok(eod, "listend: to the end of the directory");
    cg_down(&v, 0, false); /* c0 (the first good child) served it */
    is_int(cg_readdir_at(&v, dfd, off, 4096, &eod, &next), 0,
           "listend: c0 fails (not known down): the readdir at the end offset answers empty");
    ok(eod, "listend: with end-of-directory");
    cg_down(&v, 0, true);
    is_int(cg_readdir_at(&v, dfd, off, 4096, &eod, &next), 0,
           "listend: c0 known down: empty again");
    ok(eod, "listend: with end-of-directory");
    ok(cg_readdir_at(&v, dfd, mid, 4096, &eod, &next) < 0,
       "listend: a readdir from the middle of that listing still fails (its child is gone)");
    bfs_fd_unref(dfd);
    cg_up(&v, 0, true);
    cg_vol_close(&v);
}

int main(void)
{
    static const struct cg_test tests[] = {{"half", test_half_created},
                                         {"listend", test_listing_end},
                                         {"halfdir", test_half_dir}};
    plan_lazy();
    if (!cg_main("echeal", tests, sizeof(tests) / sizeof(tests[0]), "EC_TEST"))
        return 0;
    return done_testing();
}
