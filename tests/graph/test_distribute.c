/*
 * test_distribute.c — cluster/distribute over 3 and 6 storage/posix bricks
 * (temporary folders) in one process. Each brick is posix -> features/locks
 * -> debug/error-gen (a switch to make it "down" with ENOTCONN); distribute
 * sits on top. Fops go through the blocking bfs_sync_FOP wrappers and the
 * test checks both the replies and the brick folders underneath (where
 * files, link files and directories really are, GFID xattrs).
 *
 * Asserts: 3,000 files spread within ±25% of the mean per brick, also with
 * 30 directories of the same 100 names; every name listed exactly once with
 * tiny readdir buffers (plus and not); directories on every brick with one
 * GFID, rmdir everywhere, ENOTEMPTY restores; renames across bricks keep
 * content and GFID and leave exactly the documented link files; renames
 * over existing files and directories; hard links across bricks; with a
 * brick down: others readable, creates hashing there fail with ENOTCONN and
 * leave nothing behind, lookups of its files answer ENOTCONN, and its files
 * are back when it returns; directory self-heal after a directory was
 * removed from one brick by hand; statfs summed; min-free-disk diverts new
 * files behind link files; stale link files are cleared; concurrent
 * creates, renames and removes from several threads end consistent; a
 * listing primes the location cache; layout versions and layout changes.
 *
 * The same volume across real protocol/client and protocol/server:
 * test_distribute_network.c. A file the rebalance is moving:
 * test_distribute_migrate.c. Volumes, calls and checks shared with them:
 * tests/lib/dht-graph.c. Calls and round trips per operation (printed, for
 * docs/design/performance-notes.md): tests/tools/dht_calls.c.
 *
 * Needs root (trusted xattrs on the bricks); skips otherwise. Knobs for
 * longer runs: DHT_TEST_ITER (operations per concurrent thread, default
 * 250), DHT_TEST_SEED (their random seed), DHT_TEST_LOG (log level).
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../lib/dht-graph.h"
#include "../lib/tap.h"
#include "core/event.h"
#include "core/fops-util.h"
#include "core/graph.h"

static void brick_down(struct dg_vol *v, int i, bool down)
{
    char name[16];
    snprintf(name, sizeof(name), "b%d", i);
    dg_reconf(bfs_graph_find(v->g, name), "failure", down ? "100" : "0");
}

/* ---- fops ---- */

static int link_(struct dg_vol *v, const struct bfs_gfid *g, const struct bfs_gfid *np,
                 const char *nn)
{
    struct bfs_link_req q = {.oldloc = dg_LG(g), .newloc = cg_L(np, nn)};
    return bfs_sync_link(v->top, dg_st, &q, NULL);
}

/* ---- what is on the bricks ---- */

static bool disk_gfid(struct dg_vol *v, int b, const char *rel, struct bfs_gfid *g)
{
    return lgetxattr(dg_on_disk(v, b, rel), "trusted.brickfs.gfid", g->b, 16) == 16;
}

/* A brick that lost an (empty) directory by hand (rmdir(2) on the brick):
 * only the directory goes, its GFID handle in .brickfs stays behind and
 * still names the path, so the self-heal's mkdir with gfid-req meets it. */
static bool lose_dir(struct dg_vol *v, int b, const char *rel)
{
    struct bfs_gfid g;
    struct stat s;
    char str[BFS_GFID_STRLEN], hp[128];
    if (!disk_gfid(v, b, rel, &g))
        return false;
    bfs_gfid_fmt(&g, str);
    snprintf(hp, sizeof(hp), ".brickfs/%.2s/%.2s/%s", str, str + 2, str);
    return rmdir(dg_on_disk(v, b, rel)) == 0 && lstat(dg_on_disk(v, b, hp), &s) == 0 &&
           S_ISLNK(s.st_mode);
}

/* Regular non-link files directly in brick b's folder rel. */
static int disk_files(struct dg_vol *v, int b, const char *rel)
{
    DIR *d = opendir(dg_on_disk(v, b, rel));
    int n = 0;
    struct dirent *e;
    char p[600];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof(p), "%s/%s", rel, e->d_name);
        n += dg_disk_kind(v, b, p, NULL) == DG_DATA;
    }
    if (d)
        closedir(d);
    return n;
}

/* ---- spread and listing ---- */

/* Lists dir g and checks each of the n expected names appears once. */
static bool listed_once(struct dg_vol *v, const struct bfs_gfid *g, const char *prefix, int n,
                        uint32_t size, bool plus, const char *what)
{
    struct dg_tally t = {.count = calloc((size_t)n, sizeof(int)), .n = n, .plus = plus,
                         .prefix = prefix};
    int total = dg_list(v, g, size, plus, dg_tally_fn, &t);
    int missing = 0, dups = 0;
    for (int i = 0; i < n; i++) {
        missing += t.count[i] == 0;
        dups += t.count[i] > 1;
    }
    bool good = total == n && !missing && !dups && !t.bad && !t.noattr;
    ok(good, "%s: %d entries, each of %d names once (readdir%s of %u bytes)", what, total, n,
       plus ? "plus" : "", size);
    if (!good)
        printf("#   missing %d, duplicated %d, unexpected %d, without attributes %d\n", missing,
               dups, t.bad, t.noattr);
    free(t.count);
    return good;
}

static bool balanced(const int *per, int n, int total, const char *what)
{
    double mean = (double)total / n;
    bool good = true;
    char line[256];
    size_t len = 0;
    for (int b = 0; b < n; b++) {
        good = good && per[b] >= mean * 0.75 && per[b] <= mean * 1.25;
        len += (size_t)snprintf(line + len, sizeof(line) - len, " %d", per[b]);
    }
    ok(good, "%s: every brick within 25%% of the mean %.0f (%s )", what, mean, line);
    return good;
}

static void test_spread(int n)
{
    struct dg_vol v;
    char tag[16], name[32], rel[64];
    snprintf(tag, sizeof(tag), "spread%d", n);
    if (!dg_vol_start(&v, n, tag, "")) {
        ok(0, "%d-brick volume starts", n);
        return;
    }
    struct bfs_gfid dg, sg, sub[30];
    is_int(dg_mkdir(&v, &bfs_gfid_root, "spread", &dg), 0, "%d bricks: mkdir spread", n);
    int fails = 0;
    for (int i = 0; i < 3000; i++) {
        snprintf(name, sizeof(name), "f-%04d", i);
        fails += dg_put(&v, &dg, name, NULL, NULL) < 0;
    }
    is_int(fails, 0, "3000 creates");
    int per[DG_MAXB], total = 0;
    for (int b = 0; b < n; b++)
        total += per[b] = disk_files(&v, b, "spread");
    is_int(total, 3000, "3000 data files on the bricks, no more");
    balanced(per, n, 3000, "3000 names in one directory");
    listed_once(&v, &dg, "f-", 3000, 200, false, "spread");
    listed_once(&v, &dg, "f-", 3000, 4096, true, "spread");

    /* stable continuation: stop halfway, go on from the offset on another fd */
    struct dg_tally t = {.count = calloc(3000, sizeof(int)), .n = 3000, .prefix = "f-"};
    struct bfs_fd *fd = bfs_fd_new(v.g, NULL, O_RDONLY | O_DIRECTORY, 1);
    struct bfs_opendir_req o = {.loc = dg_LG(&dg), .fd = fd};
    uint64_t off = 0;
    int got = 0;
    bfs_sync_opendir(v.top, dg_st, &o, NULL);
    while (got < 1500) {
        struct bfs_readdir_req q = {.fd = fd, .size = 1024, .offset = off};
        struct bfs_readdir_rep r;
        if (bfs_sync_readdir(v.top, dg_st, &q, &r) < 0 || r.entries.count == 0)
            break;
        for (uint32_t i = 0; i < r.entries.count; i++, got++) {
            dg_tally_fn(&r.entries.v[i], &t);
            off = r.entries.v[i].d_off;
        }
        bfs_readdir_rep_clear_dup(&r);
    }
    bfs_fd_unref(fd);
    fd = bfs_fd_new(v.g, NULL, O_RDONLY | O_DIRECTORY, 1);
    o.fd = fd;
    bfs_sync_opendir(v.top, dg_st, &o, NULL);
    for (;;) {
        struct bfs_readdir_req q = {.fd = fd, .size = 1024, .offset = off};
        struct bfs_readdir_rep r;
        if (bfs_sync_readdir(v.top, dg_st, &q, &r) < 0 || r.entries.count == 0) {
            bfs_readdir_rep_clear_dup(&r);
            break;
        }
        for (uint32_t i = 0; i < r.entries.count; i++, got++) {
            dg_tally_fn(&r.entries.v[i], &t);
            off = r.entries.v[i].d_off;
        }
        bool eod = r.eod;
        bfs_readdir_rep_clear_dup(&r);
        if (eod)
            break;
    }
    bfs_fd_unref(fd);
    int once = 0;
    for (int i = 0; i < 3000; i++)
        once += t.count[i] == 1;
    ok(got == 3000 && once == 3000, "an offset from one fd continues on another: %d entries, "
       "%d names once", got, once);
    free(t.count);

    /* the same 100 names in 30 directories */
    is_int(dg_mkdir(&v, &bfs_gfid_root, "same", &sg), 0, "mkdir same");
    fails = 0;
    for (int d = 0; d < 30; d++) {
        snprintf(name, sizeof(name), "d%02d", d);
        fails += dg_mkdir(&v, &sg, name, &sub[d]) < 0;
        for (int i = 0; i < 100; i++) {
            snprintf(name, sizeof(name), "same-%03d", i);
            fails += dg_put(&v, &sub[d], name, NULL, NULL) < 0;
        }
    }
    is_int(fails, 0, "30 directories x 100 same names");
    memset(per, 0, sizeof(per));
    for (int d = 0; d < 30; d++) {
        snprintf(rel, sizeof(rel), "same/d%02d", d);
        for (int b = 0; b < n; b++)
            per[b] += disk_files(&v, b, rel);
    }
    balanced(per, n, 3000, "repeating names");
    listed_once(&v, &sg, "d", 30, 128, true, "30 directories, listed from one brick only");
    int good = 0;
    for (int d = 0; d < 30; d++) {
        struct dg_tally u = {.count = calloc(100, sizeof(int)), .n = 100, .prefix = "same-"};
        int k = dg_list(&v, &sub[d], 300, d % 2 == 0, dg_tally_fn, &u), once1 = 0;
        for (int i = 0; i < 100; i++)
            once1 += u.count[i] == 1;
        good += k == 100 && once1 == 100 && !u.bad;
        free(u.count);
    }
    is_int(good, 30, "each of the 30 directories lists its 100 names exactly once");
    dg_vol_stop(&v);
}

/* ---- directories ---- */

static void test_dirs(struct dg_vol *v)
{
    struct bfs_gfid dg, ag, g;
    struct bfs_iatt a;
    int data, links, dirs;
    is_int(dg_mkdir(v, &bfs_gfid_root, "dirs", &dg), 0, "mkdir dirs");
    is_int(dg_mkdir(v, &dg, "a", &ag), 0, "mkdir dirs/a");
    int same = 0;
    for (int b = 0; b < v->n; b++)
        same += disk_gfid(v, b, "dirs/a", &g) && bfs_gfid_eq(&g, &ag);
    is_int(same, v->n, "dirs/a on every brick with the GFID of the reply");
    is_int(dg_mkdir(v, &dg, "a", NULL), -EEXIST, "mkdir of an existing name: EEXIST");
    is_int(dg_put(v, &ag, "file", "x", NULL), 0, "a file in dirs/a");
    is_int(dg_rmdir(v, &dg, "a"), -ENOTEMPTY, "rmdir of a non-empty directory: ENOTEMPTY");
    dg_census(v, "dirs/a", &data, &links, &dirs);
    same = 0;
    for (int b = 0; b < v->n; b++)
        same += disk_gfid(v, b, "dirs/a", &g) && bfs_gfid_eq(&g, &ag);
    ok(dirs == v->n && same == v->n, "and it is still on every brick, same GFID (restored "
       "where it had been removed)");
    is_int(dg_lookup(v, &ag, "file", NULL), 0, "its file is still there");
    is_int(dg_unlink(v, &ag, "file"), 0, "unlink the file");
    is_int(dg_rmdir(v, &dg, "a"), 0, "rmdir dirs/a");
    dg_census(v, "dirs/a", &data, &links, &dirs);
    is_int(dirs + data + links, 0, "gone from every brick");
    is_int(dg_lookup(v, &dg, "a", NULL), -ENOENT, "lookup: ENOENT");
    is_int(dg_rmdir(v, &dg, "a"), -ENOENT, "rmdir again: ENOENT");
    struct bfs_gfid bg, cg;
    is_int(dg_mkdir(v, &dg, "b", &bg) | dg_mkdir(v, &bg, "c", &cg), 0, "mkdir dirs/b/c");
    ok(dg_lookup(v, &bg, "c", &a) == 0 && bfs_gfid_eq(&a.gfid, &cg) && S_ISDIR(a.mode),
       "lookup dirs/b/c");
    is_int(dg_rmdir(v, &dg, "b"), -ENOTEMPTY, "rmdir dirs/b: ENOTEMPTY (c in it)");
    dg_census(v, "dirs/b/c", &data, &links, &dirs);
    is_int(dirs, v->n, "dirs/b/c intact on every brick");
    is_int(dg_rmdir(v, &bg, "c") | dg_rmdir(v, &dg, "b"), 0, "rmdir c, then b");
    dg_census(v, "dirs/b", &data, &links, &dirs);
    is_int(dirs, 0, "dirs/b gone everywhere");
    is_int(dg_put(v, &dg, "plain", "", NULL), 0, "a file");
    is_int(dg_rmdir(v, &dg, "plain"), -ENOTDIR, "rmdir of a file: ENOTDIR");

    /* inode fops on a directory: stat merged, fd fops over every brick */
    struct bfs_stat_req sq = {.loc = dg_LG(&dg)};
    struct bfs_stat_rep sr;
    ok(bfs_sync_stat(v->top, dg_st, &sq, &sr) == 0 && S_ISDIR(sr.attr.mode) &&
       bfs_gfid_eq(&sr.attr.gfid, &dg), "stat of a directory");
    bfs_stat_rep_clear_dup(&sr);
    struct bfs_fd *fd = bfs_fd_new(v->g, NULL, O_RDONLY | O_DIRECTORY, 1);
    struct bfs_opendir_req oq = {.loc = dg_LG(&dg), .fd = fd};
    struct bfs_fstat_req fq = {.fd = fd};
    struct bfs_fsyncdir_req yq = {.fd = fd};
    ok(bfs_sync_opendir(v->top, dg_st, &oq, NULL) == 0 &&
       bfs_sync_fstat(v->top, dg_st, &fq, NULL) == 0 &&
       bfs_sync_fsyncdir(v->top, dg_st, &yq, NULL) == 0, "opendir, fstat, fsyncdir on its fd");
    struct bfs_fsetattr_req fa = {.fd = fd, .valid = BFS_SET_MODE};
    fa.attr.mode = S_IFDIR | 0711;
    is_int(bfs_sync_fsetattr(v->top, dg_st, &fa, NULL), 0, "fsetattr 0711 on the directory fd");
    bfs_fd_unref(fd);
    struct stat s;
    int set = 0;
    for (int b = 0; b < v->n; b++)
        set += lstat(dg_on_disk(v, b, "dirs"), &s) == 0 && (s.st_mode & 07777) == 0711;
    is_int(set, v->n, "on every brick");
    struct bfs_getxattr_req gq = {.loc = dg_LG(&dg), .name = "user.none"};
    is_int(bfs_sync_getxattr(v->top, dg_st, &gq, NULL), -ENODATA, "getxattr on it: ENODATA");
    struct bfs_iatt pa;
    ok(dg_lookup(v, &dg, "plain", &pa) == 0, "lookup the file");
    struct bfs_truncate_req tq = {.loc = dg_LG(&pa.gfid), .offset = 4096};
    struct bfs_stat_req fs = {.loc = dg_LG(&pa.gfid)};
    struct bfs_stat_rep fr;
    ok(bfs_sync_truncate(v->top, dg_st, &tq, NULL) == 0 &&
       bfs_sync_stat(v->top, dg_st, &fs, &fr) == 0 && fr.attr.size == 4096,
       "truncate and stat of a file by GFID go to its brick");
    bfs_stat_rep_clear_dup(&fr);
    is_int(dg_unlink(v, &bfs_gfid_root, "dirs"), -EISDIR, "unlink of a directory: EISDIR");
}

/* ---- rename ---- */

/* mkdir asks every brick at once under the entry lock (performance-notes,
 * note 22): with the hashed brick's answer held back (error-gen delays its
 * refusal), the other bricks already have the directory; when that answer
 * is a refusal, their copies are removed again and the refusal is the
 * answer. On the previous code the others were asked only after the
 * hashed brick had answered, and a refusal made nothing anywhere. */
struct mkdir_bg {
    struct dg_vol *v;
    struct bfs_gfid par;
    const char *name;
    atomic_int rc, done;
};

static void *mkdir_bg_run(void *arg)
{
    struct mkdir_bg *m = arg;
    atomic_store(&m->rc, dg_mkdir(m->v, &m->par, m->name, NULL));
    atomic_store(&m->done, 1);
    return NULL;
}

static void test_mkdir_parallel(struct dg_vol *v)
{
    struct bfs_gfid pg;
    char name[64], rel[128], bn[16];
    is_int(dg_mkdir(v, &bfs_gfid_root, "par", &pg), 0, "par: mkdir");
    snprintf(name, sizeof(name), "d");
    int h = dg_hashed(v, &pg, name);
    snprintf(bn, sizeof(bn), "b%d", h);
    struct bfs_xl *eg = bfs_graph_find(v->g, bn);
    dg_reconf(eg, "enable", "mkdir");
    dg_reconf(eg, "error-no", "EACCES");
    dg_reconf(eg, "delay-ms", "3000");
    dg_reconf(eg, "failure", "100");
    snprintf(rel, sizeof(rel), "par/%s", name);
    struct mkdir_bg m = {.v = v, .par = pg, .name = name};
    pthread_t th;
    pthread_create(&th, NULL, mkdir_bg_run, &m);
    int seen = 0, data, links, dirs;
    while (!atomic_load(&m.done) && seen < v->n - 1) {
        dg_census(v, rel, &data, &links, &dirs);
        seen = dirs > seen ? dirs : seen;
        usleep(1000);
    }
    pthread_join(th, NULL);
    is_int(seen, v->n - 1, "par: while the hashed brick's answer is held back, the others "
           "have the directory (asked at once)");
    is_int(atomic_load(&m.rc), -EACCES, "par: the hashed brick's refusal is the answer");
    dg_census(v, rel, &data, &links, &dirs);
    is_int(dirs + data + links, 0, "par: the others' copies are removed again");
    dg_reconf(eg, "failure", "0");
    dg_reconf(eg, "delay-ms", "0");
    dg_reconf(eg, "enable", "all");
    dg_reconf(eg, "error-no", "ENOTCONN");
    struct bfs_gfid g, dgf;
    is_int(dg_mkdir(v, &pg, name, &dgf), 0, "par: mkdir again, the brick accepting");
    int same = 0;
    for (int b = 0; b < v->n; b++)
        same += disk_gfid(v, b, rel, &g) && bfs_gfid_eq(&g, &dgf);
    is_int(same, v->n, "par: on every brick, one GFID");
    brick_down(v, h, true);
    snprintf(name, sizeof(name), "%s", dg_name_on(v, &pg, "dn", h, rel, sizeof(rel)));
    is_int(dg_mkdir(v, &pg, name, NULL), -ENOTCONN, "par: mkdir on a down hashed brick: ENOTCONN");
    brick_down(v, h, false);
    snprintf(rel, sizeof(rel), "par/%s", name);
    dg_census(v, rel, &data, &links, &dirs);
    is_int(dirs, 0, "par: and nothing made on the others");
}

static void test_rename_files(struct dg_vol *v, const struct bfs_gfid *rg)
{
    char s[32], d[32], e[32], x[32], y[32], p[32], q[32], rel[96], buf[64];
    struct bfs_gfid gs, g, gx, gp;
    dg_name_on(v, rg, "s", 0, s, sizeof(s));
    dg_name_on(v, rg, "d", 1, d, sizeof(d));
    is_int(dg_put(v, rg, s, "hello", &gs), 0, "file %s on brick 0", s);

    long c1 = dg_eg_calls(v, 1);
    is_int(dg_rename(v, rg, s, rg, d), 0, "rename %s (brick 0) -> %s (hashes to brick 1)", s, d);
    is_int((int)(dg_eg_calls(v, 1) - c1), 4, "brick 1 saw lock, lookup, the link file's mknod "
           "(its linkto with it) and unlock");
    ok(dg_get(v, rg, d, buf, sizeof(buf), &g) == 0 && strcmp(buf, "hello") == 0 &&
       bfs_gfid_eq(&g, &gs), "the new name has the content and the GFID");
    is_int(dg_lookup(v, rg, s, NULL), -ENOENT, "the old name is gone");
    snprintf(rel, sizeof(rel), "rn/%s", d);
    ok(dg_placed(v, rel, 0, 1), "data stays on brick 0, a link file on brick 1 points to it");
    snprintf(rel, sizeof(rel), "rn/%s", s);
    ok(dg_placed(v, rel, -1, -1), "nothing left under the old name on any brick");

    dg_name_on(v, rg, "e", 0, e, sizeof(e));
    is_int(dg_rename(v, rg, d, rg, e), 0, "rename %s -> %s (hashes to brick 0, where the data is)",
           d, e);
    snprintf(rel, sizeof(rel), "rn/%s", e);
    ok(dg_placed(v, rel, 0, -1), "data on brick 0, no link file needed");
    snprintf(rel, sizeof(rel), "rn/%s", d);
    ok(dg_placed(v, rel, -1, -1), "the link file of the old name went");

    dg_name_on(v, rg, "x", 2, x, sizeof(x));
    is_int(dg_put(v, rg, x, "old", &gx), 0, "file %s on brick 2", x);
    is_int(dg_rename(v, rg, e, rg, x), 0, "rename %s over the existing %s", e, x);
    ok(dg_get(v, rg, x, buf, sizeof(buf), &g) == 0 && strcmp(buf, "hello") == 0 &&
       bfs_gfid_eq(&g, &gs), "%s now has the renamed file's content and GFID", x);
    snprintf(rel, sizeof(rel), "rn/%s", x);
    ok(dg_placed(v, rel, 0, 2), "the replaced file's data is gone; a link file replaced it");

    dg_name_on(v, rg, "y", 2, y, sizeof(y));
    is_int(dg_rename(v, rg, x, rg, y), 0, "rename %s -> %s (both hash to brick 2: the link file "
           "itself is renamed)", x, y);
    snprintf(rel, sizeof(rel), "rn/%s", y);
    ok(dg_placed(v, rel, 0, 2), "data on brick 0, link file on brick 2");
    snprintf(rel, sizeof(rel), "rn/%s", x);
    ok(dg_placed(v, rel, -1, -1), "nothing under %s", x);

    dg_name_on(v, rg, "p", 2, p, sizeof(p));
    dg_name_on(v, rg, "q", 1, q, sizeof(q));
    is_int(dg_put(v, rg, p, "ppp", &gp) | dg_rename(v, rg, p, rg, q), 0,
           "file %s: data on brick 2, link file on brick 1", q);
    snprintf(rel, sizeof(rel), "rn/%s", q);
    ok(dg_placed(v, rel, 2, 1), "(as planned)");
    is_int(dg_rename(v, rg, y, rg, q), 0, "rename %s (data 0, link 2) over %s (data 2, link 1)", y,
           q);
    ok(dg_get(v, rg, q, buf, sizeof(buf), &g) == 0 && strcmp(buf, "hello") == 0 &&
       bfs_gfid_eq(&g, &gs), "%s is the renamed file", q);
    ok(dg_placed(v, rel, 0, 1), "data on brick 0, brick 1's link file now points there, the "
       "replaced data on brick 2 is gone");
    snprintf(rel, sizeof(rel), "rn/%s", y);
    ok(dg_placed(v, rel, -1, -1), "%s's link file went", y);
    ok(dg_no_tmp_names(v, "rn"), "no temporary link file left behind");

    is_int(dg_rename(v, rg, q, rg, q), 0, "rename onto itself: nothing to do");
    is_int(link_(v, &gs, rg, "alias") | dg_rename(v, rg, q, rg, "alias"), 0,
           "rename onto another name of the same file: nothing to do (POSIX)");
    ok(dg_lookup(v, rg, q, NULL) == 0 && dg_lookup(v, rg, "alias", NULL) == 0, "both names stay");
    is_int(dg_unlink(v, rg, "alias"), 0, "unlink the alias");
}

static void test_rename_dirs(struct dg_vol *v, const struct bfs_gfid *rg)
{
    char a[32], b[32], rel[96], buf[64];
    struct bfs_gfid ga, g, ge, gf;
    struct bfs_iatt at;
    int data, links, dirs;
    dg_name_on(v, rg, "da", 0, a, sizeof(a));
    dg_name_on(v, rg, "db", 2, b, sizeof(b));
    is_int(dg_mkdir(v, rg, a, &ga) | dg_put(v, &ga, "inner", "in", NULL), 0,
           "directory %s with a file", a);
    is_int(dg_rename(v, rg, a, rg, b), 0, "rename directory %s -> %s", a, b);
    ok(dg_lookup(v, rg, b, &at) == 0 && bfs_gfid_eq(&at.gfid, &ga), "%s has the GFID", b);
    snprintf(rel, sizeof(rel), "rn/%s", b);
    dg_census(v, rel, &data, &links, &dirs);
    int same = 0;
    for (int k = 0; k < v->n; k++)
        same += disk_gfid(v, k, rel, &g) && bfs_gfid_eq(&g, &ga);
    ok(dirs == v->n && same == v->n, "renamed on every brick");
    snprintf(rel, sizeof(rel), "rn/%s", a);
    dg_census(v, rel, &data, &links, &dirs);
    is_int(dirs, 0, "the old name is gone from every brick");
    ok(dg_get(v, &ga, "inner", buf, sizeof(buf), NULL) == 0 && strcmp(buf, "in") == 0,
       "the file inside is still readable");

    is_int(dg_mkdir(v, rg, "empty", &ge), 0, "an empty directory");
    is_int(dg_rename(v, rg, b, rg, "empty"), 0, "rename a directory over an empty one");
    ok(dg_lookup(v, rg, "empty", &at) == 0 && bfs_gfid_eq(&at.gfid, &ga), "it replaced it");
    dg_census(v, "rn/empty", &data, &links, &dirs);
    is_int(dirs, v->n, "on every brick");
    is_int(dg_mkdir(v, rg, "full", &gf) | dg_put(v, &gf, "x", "", NULL), 0, "a non-empty directory");
    is_int(dg_rename(v, rg, "empty", rg, "full"), -ENOTEMPTY, "rename over it: ENOTEMPTY");
    ok(dg_lookup(v, rg, "empty", NULL) == 0 && dg_lookup(v, &gf, "x", NULL) == 0, "both intact");
    dg_census(v, "rn/full", &data, &links, &dirs);
    is_int(dirs, v->n, "the non-empty one is still on every brick");
    is_int(dg_put(v, rg, "afile", "", NULL), 0, "a file");
    is_int(dg_rename(v, rg, "afile", rg, "full"), -EISDIR, "rename a file over a directory: EISDIR");
    is_int(dg_rename(v, rg, "empty", rg, "afile"), -ENOTDIR,
           "rename a directory over a file: ENOTDIR");
    is_int(dg_rename(v, rg, "empty", &ga, "inside"), -EINVAL,
           "rename a directory into itself: EINVAL");
    dg_census(v, "rn/empty", &data, &links, &dirs);
    is_int(dirs, v->n, "and nothing changed");
}

/* A rename asks for both entry locks at once without waiting
 * (performance-notes, note 23); when one is held by someone else it must
 * give back the one it got and wait in the fixed order: it completes only
 * after the holder lets go, and leaves no lock behind. */
struct rename_bg {
    struct dg_vol *v;
    struct bfs_gfid par;
    const char *from, *to;
    atomic_int rc, done;
};

static void *rename_bg_run(void *arg) /* or unlink of from, without to */
{
    struct rename_bg *m = arg;
    atomic_store(&m->rc, m->to ? dg_rename(m->v, &m->par, m->from, &m->par, m->to)
                               : dg_unlink(m->v, &m->par, m->from));
    atomic_store(&m->done, 1);
    return NULL;
}

static int elk(struct dg_vol *v, int b, struct bfs_stack *st, const struct bfs_gfid *par,
               const char *name, uint32_t cmd)
{
    char bn[16];
    snprintf(bn, sizeof(bn), "b%d", b);
    struct bfs_entrylk_req q = {.domain = "dht", .basename = name, .cmd = cmd,
                                .type = BFS_ENTRYLK_WRLCK};
    q.loc.gfid = *par;
    return bfs_sync_entrylk(bfs_graph_find(v->g, bn), st, &q, NULL);
}

/* Does brick b's features/locks list a waiter for an entry lock? */
static bool lock_waiter(struct dg_vol *v, int b)
{
    char bn[32];
    snprintf(bn, sizeof(bn), "b%d-locks", b);
    struct bfs_xl *lx = bfs_graph_find(v->g, bn);
    char *d = lx && lx->mod->dump ? lx->mod->dump(lx) : NULL;
    const char *w = d ? strstr(d, "\"entrylk_blocked\"") : NULL;
    bool any = w && strncmp(w, "\"entrylk_blocked\":[]", 20) != 0 &&
               strncmp(w, "\"entrylk_blocked\": [ ]", 23) != 0 &&
               strncmp(w, "\"entrylk_blocked\": []", 21) != 0;
    free(d);
    return any;
}

static void test_rename_locks(struct dg_vol *v)
{
    struct bfs_gfid pg;
    char src[64], dst[64];
    is_int(dg_mkdir(v, &bfs_gfid_root, "rl", &pg), 0, "rl: mkdir");
    dg_name_on(v, &pg, "s", 0, src, sizeof(src));
    dg_name_on(v, &pg, "d", 1, dst, sizeof(dst));
    is_int(dg_put(v, &pg, src, "abc", NULL), 0, "rl: a file on b0");
    is_int(dg_rename(v, &pg, src, &pg, dst), 0, "rl: rename across bricks (both locks free)");
    is_int(dg_rename(v, &pg, dst, &pg, src), 0, "rl: and back");
    struct bfs_stack *other = bfs_stack_new();
    other->lk_owner = 0x5eed;
    is_int(elk(v, 1, other, &pg, dst, BFS_ENTRYLK_LOCK), 0, "rl: another owner holds the "
           "destination name's lock on b1");
    struct rename_bg m = {.v = v, .par = pg, .from = src, .to = dst};
    pthread_t th;
    pthread_create(&th, NULL, rename_bg_run, &m);
    while (!atomic_load(&m.done) && !lock_waiter(v, 1))
        usleep(1000);
    ok(!atomic_load(&m.done), "rl: the rename waits for it (a waiter is queued on b1)");
    struct bfs_stack *third = bfs_stack_new();
    third->lk_owner = 0x7a11;
    is_int(elk(v, 0, third, &pg, src, BFS_ENTRYLK_LOCK_NB), -EAGAIN,
           "rl: meanwhile the source name's lock on b0 is held (by the waiting rename)");
    is_int(elk(v, 1, other, &pg, dst, BFS_ENTRYLK_UNLOCK), 0, "rl: the holder lets go");
    pthread_join(th, NULL);
    is_int(atomic_load(&m.rc), 0, "rl: the rename completes");
    struct bfs_iatt a;
    ok(dg_lookup(v, &pg, dst, &a) == 0 && a.size == 3 && dg_lookup(v, &pg, src, NULL) == -ENOENT,
       "rl: the file is under its new name only");
    ok(elk(v, 0, third, &pg, src, BFS_ENTRYLK_LOCK_NB) == 0 &&
       elk(v, 1, third, &pg, dst, BFS_ENTRYLK_LOCK_NB) == 0, "rl: no lock left behind");
    elk(v, 0, third, &pg, src, BFS_ENTRYLK_UNLOCK);
    elk(v, 1, third, &pg, dst, BFS_ENTRYLK_UNLOCK);
    /* both asked at once: with b0 refusing every entrylk, b1 was asked too
     * (and its lock given back); the ordered way never reached b1 */
    struct bfs_xl *e0 = bfs_graph_find(v->g, "b0");
    dg_reconf(e0, "enable", "entrylk");
    dg_reconf(e0, "error-no", "EIO");
    dg_reconf(e0, "failure", "100");
    long before = dg_eg_calls(v, 1);
    is_int(dg_rename(v, &pg, dst, &pg, src), -EIO, "rl: b0 refuses its lock: EIO");
    is_int(dg_eg_calls(v, 1) - before, 2, "rl: b1 got the other lock at the same time, and gave "
           "it back (2 calls)");
    dg_reconf(e0, "failure", "0");
    dg_reconf(e0, "enable", "all");
    dg_reconf(e0, "error-no", "ENOTCONN");
    is_int(elk(v, 1, third, &pg, dst, BFS_ENTRYLK_LOCK_NB), 0, "rl: no lock left on b1");
    elk(v, 1, third, &pg, dst, BFS_ENTRYLK_UNLOCK);
    bfs_stack_unref(other);
    bfs_stack_unref(third);
}

/* Diagnostics for docs/design/performance-notes.md (notes 22-23): calls
 * each brick's error-gen saw per operation, for names hashing to b0 (H);
 * a rename's new name hashes to b1. Printed, not asserted (a background
 * statfs every 5 s may add one call per brick). */
static void test_rename(struct dg_vol *v)
{
    struct bfs_gfid rg;
    is_int(dg_mkdir(v, &bfs_gfid_root, "rn", &rg), 0, "mkdir rn");
    test_rename_files(v, &rg);
    test_rename_dirs(v, &rg);
    struct dg_tally t = {.count = calloc(1, sizeof(int)), .n = 1, .prefix = "none-"};
    int k = dg_list(v, &rg, 256, true, dg_tally_fn, &t);
    /* left: q, afile, empty, full */
    ok(k == 4 && t.bad == 4, "rn lists exactly its 4 names (no link files): %d", k);
    free(t.count);
}

/* ---- hard links ---- */

static void test_hardlink(struct dg_vol *v)
{
    struct bfs_gfid hg, gf, g;
    struct bfs_iatt a;
    char f[32], n1[32], n2[32], k0[32], rel[96], rel2[96], buf[64];
    struct stat s1, s2;
    is_int(dg_mkdir(v, &bfs_gfid_root, "hl", &hg), 0, "mkdir hl");
    dg_name_on(v, &hg, "f", 0, f, sizeof(f));
    dg_name_on(v, &hg, "n", 1, n1, sizeof(n1));
    dg_name_on(v, &hg, "m", 1, n2, sizeof(n2));
    dg_name_on(v, &hg, "k", 0, k0, sizeof(k0));
    is_int(dg_put(v, &hg, f, "shared", &gf), 0, "file %s on brick 0", f);
    is_int(link_(v, &gf, &hg, n1), 0, "link %s (hashes to brick 1)", n1);
    ok(dg_get(v, &hg, n1, buf, sizeof(buf), &g) == 0 && strcmp(buf, "shared") == 0 &&
       bfs_gfid_eq(&g, &gf), "same content, same GFID");
    ok(dg_lookup(v, &hg, f, &a) == 0 && a.nlink == 2, "two names");
    snprintf(rel, sizeof(rel), "hl/%s", n1);
    ok(dg_placed(v, rel, 0, 1), "a hard link on brick 0, a link file on brick 1");
    is_int(link_(v, &gf, &hg, n2), 0, "another link %s (also brick 1)", n2);
    snprintf(rel2, sizeof(rel2), "hl/%s", n2);
    ok(dg_placed(v, rel2, 0, 1) && lstat(dg_on_disk(v, 1, rel), &s1) == 0 &&
       lstat(dg_on_disk(v, 1, rel2), &s2) == 0 && s1.st_ino == s2.st_ino,
       "its link file on brick 1 shares the first one's inode (one GFID, one object)");
    is_int(link_(v, &gf, &hg, k0), 0, "a link %s hashing where the data is", k0);
    snprintf(rel, sizeof(rel), "hl/%s", k0);
    ok(dg_placed(v, rel, 0, -1), "a plain hard link, no link file");
    is_int(link_(v, &gf, &hg, n1), -EEXIST, "link onto an existing name: EEXIST");
    is_int(dg_unlink(v, &hg, f), 0, "unlink the first name");
    ok(dg_get(v, &hg, n1, buf, sizeof(buf), NULL) == 0 && strcmp(buf, "shared") == 0,
       "the others still read it");
    is_int(dg_unlink(v, &hg, n1) | dg_unlink(v, &hg, n2) | dg_unlink(v, &hg, k0), 0, "unlink the rest");
    int left = 0;
    for (int b = 0; b < v->n; b++)
        left += disk_files(v, b, "hl");
    snprintf(rel, sizeof(rel), "hl/%s", n1);
    snprintf(rel2, sizeof(rel2), "hl/%s", n2);
    ok(left == 0 && dg_placed(v, rel, -1, -1) && dg_placed(v, rel2, -1, -1),
       "no data and no link files left");
    struct bfs_gfid dg;
    is_int(dg_mkdir(v, &hg, "sub", &dg), 0, "a directory");
    is_int(link_(v, &dg, &hg, "dirlink"), -EPERM, "hard link of a directory: EPERM");
}

/* ---- a brick down ---- */

static void test_down(struct dg_vol *v)
{
    struct bfs_gfid dg, g;
    char name[32], rel[96], buf[64], m[32];
    const int down = 1;
    is_int(dg_mkdir(v, &bfs_gfid_root, "dn", &dg), 0, "mkdir dn");
    int fails = 0;
    for (int i = 0; i < 30; i++) {
        snprintf(name, sizeof(name), "f-%d", i);
        fails += dg_put(v, &dg, name, name, NULL) < 0;
    }
    is_int(fails, 0, "30 files");
    char dd[32];
    struct bfs_gfid ddg;
    struct bfs_iatt da;
    dg_name_on(v, &dg, "dir", down, dd, sizeof(dd));
    is_int(dg_mkdir(v, &dg, dd, &ddg), 0, "a directory %s hashing to brick %d", dd, down);
    brick_down(v, down, true);
    ok(dg_lookup(v, &dg, dd, &da) == 0 && S_ISDIR(da.mode) && bfs_gfid_eq(&da.gfid, &ddg),
       "with its hashed brick down, the directory is still found on the others");
    int readable = 0, notconn = 0, wrong = 0, on_down = 0;
    for (int i = 0; i < 30; i++) {
        snprintf(name, sizeof(name), "f-%d", i);
        int rc = dg_get(v, &dg, name, buf, sizeof(buf), NULL);
        if (dg_hashed(v, &dg, name) == down) {
            on_down++;
            notconn += rc == -ENOTCONN;
        } else {
            readable += rc == 0 && strcmp(buf, name) == 0;
            wrong += rc != 0;
        }
    }
    ok(readable == 30 - on_down && wrong == 0, "brick %d down: the %d files elsewhere read fine",
       down, 30 - on_down);
    ok(on_down > 0 && notconn == on_down, "its %d files: ENOTCONN, not ENOENT", on_down);
    int refused = 0, made = 0, orphans = 0, wanted_down = 0;
    for (int i = 0; i < 30; i++) {
        snprintf(name, sizeof(name), "new-%d", i);
        int rc = dg_put(v, &dg, name, "n", NULL);
        snprintf(rel, sizeof(rel), "dn/%s", name);
        if (dg_hashed(v, &dg, name) == down) {
            wanted_down++;
            refused += rc == -ENOTCONN;
            for (int b = 0; b < v->n; b++)
                orphans += dg_disk_kind(v, b, rel, NULL) != DG_ABSENT;
        } else {
            made += rc == 0;
        }
    }
    ok(wanted_down > 0 && refused == wanted_down, "creates hashing to the down brick: ENOTCONN "
       "(%d of %d)", refused, wanted_down);
    is_int(orphans, 0, "and they left nothing on any brick");
    is_int(made, 30 - wanted_down, "creates hashing elsewhere work");
    int data, links, dirs;
    dg_name_on(v, &dg, "sub", down, m, sizeof(m));
    is_int(dg_mkdir(v, &dg, m, NULL), -ENOTCONN, "mkdir hashing to the down brick: ENOTCONN");
    snprintf(rel, sizeof(rel), "dn/%s", m);
    dg_census(v, rel, &data, &links, &dirs);
    is_int(dirs, 0, "and made nothing anywhere");
    dg_name_on(v, &dg, "sub", (down + 1) % v->n, m, sizeof(m));
    is_int(dg_mkdir(v, &dg, m, &g), 0, "mkdir hashing elsewhere works");
    snprintf(rel, sizeof(rel), "dn/%s", m);
    dg_census(v, rel, &data, &links, &dirs);
    ok(dirs == v->n - 1 && dg_disk_kind(v, down, rel, NULL) == DG_ABSENT,
       "on every brick but the down one");
    is_int(dg_rmdir(v, &dg, m), -ENOTCONN, "rmdir while a brick is down: ENOTCONN");
    is_int(dg_rename(v, &dg, m, &dg, "renamed"), -ENOTCONN,
           "directory rename while a brick is down: ENOTCONN");
    struct dg_tally t = {.count = calloc(1, sizeof(int)), .n = 1, .prefix = "none-"};
    int k = dg_list(v, &dg, 512, true, dg_tally_fn, &t);
    /* f-*: 30 - on_down, new-*: made, plus the directory */
    is_int(k, 30 - on_down + made + 2, "readdir lists everything on the bricks that are up");
    free(t.count);
    struct bfs_statfs_req sq = {.loc = dg_LG(&bfs_gfid_root)};
    is_int(bfs_sync_statfs(v->top, dg_st, &sq, NULL), 0, "statfs answers with a brick down");

    brick_down(v, down, false);
    readable = 0;
    for (int i = 0; i < 30; i++) {
        snprintf(name, sizeof(name), "f-%d", i);
        readable += dg_get(v, &dg, name, buf, sizeof(buf), NULL) == 0 && strcmp(buf, name) == 0;
    }
    is_int(readable, 30, "brick back: all 30 files read again");
    is_int(dg_lookup(v, &dg, m, NULL), 0, "lookup of the directory made while it was down");
    dg_census(v, rel, &data, &links, &dirs);
    ok(dirs == v->n && disk_gfid(v, down, rel, &g), "healed onto the returned brick");
    is_int(dg_rmdir(v, &dg, m) | dg_rmdir(v, &dg, dd), 0, "rmdir now works");
    dg_census(v, rel, &data, &links, &dirs);
    is_int(dirs, 0, "gone everywhere");
}

/* ---- directory self-heal ---- */

static void test_heal(struct dg_vol *v)
{
    struct bfs_gfid hg, g;
    struct bfs_iatt a;
    struct stat s;
    int h = dg_hashed(v, &bfs_gfid_root, "heal"), x = (h + 1) % v->n, y = (h + 2) % v->n;
    is_int(dg_mkdir(v, &bfs_gfid_root, "heal", &hg), 0, "mkdir heal");
    struct bfs_setattr_req sq = {.loc = dg_LG(&hg),
                                 .valid = BFS_SET_MODE | BFS_SET_UID | BFS_SET_GID};
    sq.attr.mode = S_IFDIR | 0750;
    sq.attr.uid = 1234;
    sq.attr.gid = 5678;
    is_int(bfs_sync_setattr(v->top, dg_st, &sq, NULL), 0, "chmod 0750, chown 1234:5678");
    int set = 0;
    for (int b = 0; b < v->n; b++)
        set += lstat(dg_on_disk(v, b, "heal"), &s) == 0 && (s.st_mode & 07777) == 0750 &&
               s.st_uid == 1234 && s.st_gid == 5678;
    is_int(set, v->n, "applied on every brick");
    struct bfs_dict *xa = bfs_dict_new();
    bfs_dict_set_bin(xa, "user.colour", "blue", 4);
    struct bfs_setxattr_req xq = {.loc = dg_LG(&hg), .xattrs = xa};
    is_int(bfs_sync_setxattr(v->top, dg_st, &xq, NULL), 0, "setxattr user.colour on it");
    bfs_dict_unref(xa);

    ok(lose_dir(v, x, "heal"), "remove it from brick %d by hand", x);
    ok(dg_lookup(v, &bfs_gfid_root, "heal", &a) == 0 && bfs_gfid_eq(&a.gfid, &hg),
       "lookup finds it");
    char val[16] = "";
    ok(lstat(dg_on_disk(v, x, "heal"), &s) == 0 && S_ISDIR(s.st_mode) &&
       disk_gfid(v, x, "heal", &g) && bfs_gfid_eq(&g, &hg),
       "and re-created it on brick %d with the same GFID", x);
    ok((s.st_mode & 07777) == 0750 && s.st_uid == 1234 && s.st_gid == 5678,
       "mode 0750, owner 1234:5678");
    ok(lgetxattr(dg_on_disk(v, x, "heal"), "user.colour", val, sizeof(val)) == 4 &&
       memcmp(val, "blue", 4) == 0, "and its user xattr");
    ok(chmod(dg_on_disk(v, y, "heal"), 0700) == 0 && chown(dg_on_disk(v, y, "heal"), 1, 1) == 0,
       "chmod/chown it on brick %d by hand", y);
    is_int(dg_lookup(v, &bfs_gfid_root, "heal", NULL), 0, "lookup");
    ok(lstat(dg_on_disk(v, y, "heal"), &s) == 0 && (s.st_mode & 07777) == 0750 &&
       s.st_uid == 1234 && s.st_gid == 5678, "mode and owner healed on brick %d", y);
    ok(lose_dir(v, h, "heal"), "remove it from its hashed brick %d by hand", h);
    is_int(dg_lookup(v, &bfs_gfid_root, "heal", NULL), -ENOENT,
           "a default lookup trusts the hashed brick: ENOENT");
    is_int(dg_reconf(v->top, "cluster.lookup-unhashed", "on"), 0, "cluster.lookup-unhashed on");
    ok(dg_lookup(v, &bfs_gfid_root, "heal", &a) == 0 && bfs_gfid_eq(&a.gfid, &hg),
       "finds it on the others");
    is_int(dg_reconf(v->top, "cluster.lookup-unhashed", "off"), 0, "off again");
    is_int(dg_lookup(v, &bfs_gfid_root, "heal", NULL), 0, "the hashed brick was healed too");
    ok(disk_gfid(v, h, "heal", &g) && bfs_gfid_eq(&g, &hg), "same GFID on brick %d", h);
    is_int(dg_rmdir(v, &bfs_gfid_root, "heal"), 0, "rmdir heal");

    /* namespace changes of a directory that needs healing: their internal
     * lookups must not try to heal under the lock they hold */
    int data, links, dirs;
    is_int(dg_mkdir(v, &bfs_gfid_root, "h2", &hg), 0, "mkdir h2");
    x = (dg_hashed(v, &bfs_gfid_root, "h2") + 1) % v->n;
    ok(lose_dir(v, x, "h2"), "brick %d loses it", x);
    is_int(dg_unlink(v, &bfs_gfid_root, "h2"), -EISDIR, "unlink of it: EISDIR (no deadlock)");
    is_int(dg_rename(v, &bfs_gfid_root, "h2", &bfs_gfid_root, "h3"), 0, "rename it");
    ok(dg_lookup(v, &bfs_gfid_root, "h3", &a) == 0 && bfs_gfid_eq(&a.gfid, &hg), "lookup h3");
    dg_census(v, "h3", &data, &links, &dirs);
    is_int(dirs, v->n, "healed onto brick %d under its new name", x);
    dg_census(v, "h2", &data, &links, &dirs);
    is_int(dirs, 0, "the old name is nowhere");
    is_int(dg_rmdir(v, &bfs_gfid_root, "h3"), 0, "rmdir h3");
}

/* ---- statfs ---- */

static void test_statfs(struct dg_vol *v)
{
    struct statvfs sv;
    struct bfs_statfs_req q = {.loc = dg_LG(&bfs_gfid_root)};
    struct bfs_statfs_rep r;
    int rc = bfs_sync_statfs(v->top, dg_st, &q, &r);
    ok(rc == 0 && statvfs(v->dir[0], &sv) == 0 &&
       r.buf.blocks * r.buf.frsize == (uint64_t)v->n * sv.f_blocks * sv.f_frsize,
       "statfs: the sum of the %d bricks' sizes", v->n);
    bfs_statfs_rep_clear_dup(&r);
}

/* ---- min-free-disk ---- */

static void test_minfree(void)
{
    struct statvfs sv;
    statvfs(cg_root(), &sv);
    int pct = (int)(sv.f_bavail * 100 / sv.f_blocks);
    if (pct > 90) {
        ok(1, "# SKIP min-free-disk: the test file system is %d%% free", pct);
        return;
    }
    char extra[64], name[32], rel[96], buf[64];
    snprintf(extra, sizeof(extra), " option cluster.min-free-disk %d%%\n", (pct + 100) / 2);
    struct dg_vol v;
    if (!dg_vol_start_types(&v, "ppm", "minfree", extra)) {
        ok(0, "volume of two posix bricks (%d%% free) and a memory brick", pct);
        return;
    }
    struct bfs_gfid dg;
    struct bfs_statfs_req q = {.loc = dg_LG(&bfs_gfid_root)};
    is_int(bfs_sync_statfs(v.top, dg_st, &q, NULL), 0, "statfs (distribute notes free space)");
    is_int(dg_mkdir(&v, &bfs_gfid_root, "mf", &dg), 0, "mkdir mf");
    int diverted = 0, full = 0, readable = 0;
    for (int i = 0; i < 30; i++) {
        snprintf(name, sizeof(name), "m-%d", i);
        dg_put(&v, &dg, name, name, NULL);
        int h = dg_hashed(&v, &dg, name);
        snprintf(rel, sizeof(rel), "mf/%s", name);
        if (h != 2) {
            full++;
            int to = -1;
            diverted += dg_disk_kind(&v, h, rel, &to) == DG_LINKF && to == 2;
        }
        readable += dg_get(&v, &dg, name, buf, sizeof(buf), NULL) == 0 && strcmp(buf, name) == 0;
    }
    ok(full > 0 && diverted == full, "files hashing to the full bricks went to the empty one, "
       "behind link files (%d of %d)", diverted, full);
    is_int(readable, 30, "all 30 read back");
    listed_once(&v, &dg, "m-", 30, 256, true, "mf");
    int left = 0;
    for (int i = 0; i < 30; i++) {
        snprintf(name, sizeof(name), "m-%d", i);
        dg_unlink(&v, &dg, name);
        snprintf(rel, sizeof(rel), "mf/%s", name);
        for (int b = 0; b < 2; b++)
            left += dg_disk_kind(&v, b, rel, NULL) != DG_ABSENT;
    }
    is_int(left, 0, "unlink removes data and link files");
    dg_vol_stop(&v);
}

/* ---- stale link files ---- */

/* A link file to brick `to` made by hand on brick b as (par, name) at rel,
 * then looked up on that brick alone so that it gets a GFID, as real link
 * files have. */
static void stale_link(struct dg_vol *v, int b, const struct bfs_gfid *par, const char *name,
                       const char *rel, int to)
{
    char t[8];
    int fd = open(dg_on_disk(v, b, rel), O_CREAT | O_WRONLY, 0);
    if (fd >= 0)
        close(fd);
    chmod(dg_on_disk(v, b, rel), S_ISVTX);
    snprintf(t, sizeof(t), "b%d", to);
    lsetxattr(dg_on_disk(v, b, rel), DG_LINKTO, t, strlen(t), 0);
    struct bfs_lookup_req q = {.loc = cg_L(par, name)};
    snprintf(t, sizeof(t), "b%d", b);
    bfs_sync_lookup(bfs_graph_find(v->g, t), dg_st, &q, NULL);
}

static void test_stale(struct dg_vol *v)
{
    struct bfs_gfid sg, ug, g;
    struct bfs_iatt a;
    char rel[96], buf[64], ghost[32], g2[32], in[32];
    is_int(dg_mkdir(v, &bfs_gfid_root, "st", &sg), 0, "mkdir st");
    dg_name_on(v, &sg, "ghost", 0, ghost, sizeof(ghost));
    snprintf(rel, sizeof(rel), "st/%s", ghost);
    stale_link(v, 0, &sg, ghost, rel, 1);
    is_int(dg_lookup(v, &sg, ghost, NULL), -ENOENT, "a stale link file (its data is nowhere): ENOENT");
    struct dg_tally t = {.count = calloc(1, sizeof(int)), .n = 1, .prefix = "none-"};
    is_int(dg_list(v, &sg, 512, false, dg_tally_fn, &t), 0, "and not listed");
    free(t.count);
    ok(dg_put(v, &sg, ghost, "real", NULL) == 0 &&
       dg_get(v, &sg, ghost, buf, sizeof(buf), NULL) == 0 && strcmp(buf, "real") == 0,
       "create over it makes a real file");
    ok(dg_placed(v, rel, 0, -1), "which replaced the stale link file");
    dg_name_on(v, &sg, "ghost", 1, g2, sizeof(g2));
    snprintf(rel, sizeof(rel), "st/%s", g2);
    stale_link(v, 1, &sg, g2, rel, 2);
    is_int(dg_unlink(v, &sg, g2), -ENOENT, "unlink of a stale link file: ENOENT");
    ok(dg_placed(v, rel, -1, -1), "and it is cleared");

    is_int(dg_mkdir(v, &sg, "sub", &ug), 0, "mkdir st/sub");
    dg_name_on(v, &ug, "in", 2, in, sizeof(in));
    snprintf(rel, sizeof(rel), "st/sub/%s", in);
    stale_link(v, 2, &ug, in, rel, 0);
    is_int(dg_rmdir(v, &sg, "sub"), 0, "rmdir of a directory holding only a stale link file");
    int data, links, dirs;
    dg_census(v, "st/sub", &data, &links, &dirs);
    is_int(dirs, 0, "gone from every brick");

    struct bfs_fd *fd = bfs_fd_new(v->g, NULL, O_RDWR, 0);
    struct bfs_create_req cq = {.loc = cg_L(&sg, "sticky"), .fd = fd, .flags = O_RDWR | O_CREAT,
                                .mode = S_ISVTX};
    is_int(bfs_sync_create(v->top, dg_st, &cq, NULL), 0, "a user's own empty ---------T file");
    bfs_fd_unref(fd);
    ok(dg_lookup(v, &sg, "sticky", &a) == 0 && a.mode == (S_IFREG | S_ISVTX), "lookup finds it");
    g = a.gfid;
    struct dg_tally u = {.count = calloc(1, sizeof(int)), .n = 1, .prefix = "none-"};
    int k = dg_list(v, &sg, 512, true, dg_tally_fn, &u);
    ok(k == 2 && u.bad == 2, "listed (it has no linkto: not a link file), with %s (%d)", ghost, k);
    free(u.count);
    (void)g;
}

/* ---- unlink in one request (performance-notes 30) ---- */

/* distribute's statedump says b's brick locks unlinks itself */
static bool ul_known(struct dg_vol *v, int b)
{
    char *d = v->top->mod->dump(v->top), want[64];
    snprintf(want, sizeof(want), "\"name\":\"b%d\"", b);
    const char *c = d ? strstr(d, want) : NULL;
    const char *f = c ? strstr(c, "\"locked_unlink\":") : NULL;
    bool yes = f && strncmp(f + 16, "true", 4) == 0;
    free(d);
    return yes;
}

/* A file on its hashed brick is removed with one call there: the brick
 * takes the name's entry lock, checks the name is not a link file, unlinks
 * and unlocks. The long way (lock, lookup, unlink) stays for everything
 * else, and teaches distribute which bricks can. */
static void test_unlink_locked(struct dg_vol *v)
{
    struct bfs_gfid pg;
    char n[4][64], src[64], dst[64], rel[128];
    is_int(dg_mkdir(v, &bfs_gfid_root, "ul", &pg), 0, "ul: mkdir");
    for (int i = 0; i < 4; i++) {
        char p[8];
        snprintf(p, sizeof(p), "u%d", i);
        dg_name_on(v, &pg, p, 0, n[i], sizeof(n[i]));
        dg_put(v, &pg, n[i], "data", NULL);
    }
    struct bfs_xl *b0 = bfs_graph_find(v->g, "b0");
    v->top->mod->notify(v->top, BFS_EV_CHILD_DOWN, b0, NULL); /* forget what b0 said */
    v->top->mod->notify(v->top, BFS_EV_CHILD_UP, b0, NULL);
    ok(!ul_known(v, 0), "ul: after b0 came back, its locked unlinks are not assumed");
    long c0 = dg_eg_calls(v, 0);
    is_int(dg_unlink(v, &pg, n[0]), 0, "ul: unlink of a file on its hashed brick b0");
    is_int(dg_eg_calls(v, 0) - c0, 4, "ul: the long way (lock, lookup, unlink asking for the lock, "
           "unlock: 4 calls)");
    ok(ul_known(v, 0), "ul: b0 acknowledged the lock it was asked for");
    c0 = dg_eg_calls(v, 0);
    long c1 = dg_eg_calls(v, 1) + dg_eg_calls(v, 2);
    is_int(dg_unlink(v, &pg, n[1]), 0, "ul: the next unlink there");
    is_int(dg_eg_calls(v, 0) - c0, 1, "ul: one call to b0");
    is_int(dg_eg_calls(v, 1) + dg_eg_calls(v, 2) - c1, 0, "ul: none elsewhere");
    snprintf(rel, sizeof(rel), "ul/%s", n[1]);
    ok(dg_placed(v, rel, -1, -1) && dg_lookup(v, &pg, n[1], NULL) == -ENOENT, "ul: it is gone");
    is_int(dg_unlink(v, &pg, n[1]), -ENOENT, "ul: unlink of a missing name: ENOENT");

    /* a link file on b0 (the data renamed from b1): refused by the brick,
     * then removed the long way with its data */
    dg_name_on(v, &pg, "s", 1, src, sizeof(src));
    dg_name_on(v, &pg, "t", 0, dst, sizeof(dst));
    dg_put(v, &pg, src, "moved", NULL);
    is_int(dg_rename(v, &pg, src, &pg, dst), 0, "ul: a file on b1 renamed to a name of b0");
    snprintf(rel, sizeof(rel), "ul/%s", dst);
    ok(dg_placed(v, rel, 1, 0), "ul: data on b1, link file on b0");
    is_int(dg_unlink(v, &pg, dst), 0, "ul: unlink through the link file");
    ok(dg_placed(v, rel, -1, -1), "ul: data and link file gone");

    /* the lock: another owner holds the name's lock on b0 (a rename or a
     * rebalance move in progress) and replaces the file by a link file to
     * data on b1 meanwhile; the unlink waits, then removes both */
    struct bfs_stack *other = bfs_stack_new();
    other->lk_owner = 0xd157;
    is_int(elk(v, 0, other, &pg, n[2], BFS_ENTRYLK_LOCK), 0, "ul: another owner holds %s's "
           "lock on b0", n[2]);
    struct rename_bg m = {.v = v, .par = pg, .from = n[2]}; /* no .to: an unlink */
    pthread_t th;
    pthread_create(&th, NULL, rename_bg_run, &m);
    while (!atomic_load(&m.done) && !lock_waiter(v, 0))
        usleep(1000);
    ok(!atomic_load(&m.done), "ul: the unlink waits for it (a waiter is queued on b0)");
    struct bfs_unlink_req uq = {.loc = cg_L(&pg, n[2])};
    is_int(bfs_sync_unlink(b0, dg_st, &uq, NULL), 0, "ul: (the holder removes the file on b0)");
    snprintf(rel, sizeof(rel), "ul/%s", n[2]);
    int fd = open(dg_on_disk(v, 1, rel), O_CREAT | O_WRONLY, 0644);
    ok(fd >= 0 && write(fd, "elsewhere", 9) == 9, "ul: (puts data on b1)");
    if (fd >= 0)
        close(fd);
    struct bfs_lookup_req lq = {.loc = cg_L(&pg, n[2])};
    bfs_sync_lookup(bfs_graph_find(v->g, "b1"), dg_st, &lq, NULL);
    stale_link(v, 0, &pg, n[2], rel, 1);
    ok(dg_placed(v, rel, 1, 0), "ul: (and a link file to it on b0)");
    is_int(elk(v, 0, other, &pg, n[2], BFS_ENTRYLK_UNLOCK), 0, "ul: the holder lets go");
    pthread_join(th, NULL);
    is_int(atomic_load(&m.rc), 0, "ul: the unlink completes");
    ok(dg_placed(v, rel, -1, -1), "ul: what the name had become is gone from every brick (the "
       "link file was not removed alone)");
    ok(elk(v, 0, other, &pg, n[2], BFS_ENTRYLK_LOCK_NB) == 0, "ul: no lock left behind");
    elk(v, 0, other, &pg, n[2], BFS_ENTRYLK_UNLOCK);
    bfs_stack_unref(other);
    is_int(dg_unlink(v, &pg, n[3]), 0, "ul: and the next one");
}

/* ---- concurrent namespace changes ---- */

static void test_concurrent(struct dg_vol *v)
{
    struct dg_cc r;
    bool good = dg_run_cc(v, v, "cc", &r); /* before the message reads r */
    ok(good, "4 threads x %d creates/renames/unlinks on %d names: every name "
       "is either nowhere or one file with exactly its link file (%d exist), no temporary names "
       "left, readdir lists exactly the names that exist", r.iters, DG_CC_NAMES, r.exist);
}

/* ---- a listing primes the location cache ---- */

#define PRIME_N 30

static void prime_fn(const struct bfs_dirent *e, void *arg)
{
    struct bfs_gfid *g = arg;
    int i;
    if (e->has_attr && sscanf(e->name, "p-%d", &i) == 1 && i >= 0 && i < PRIME_N)
        g[i] = e->attr.gfid;
}

/* A readdirplus tells distribute where each listed file is: a fop on such
 * a file right after the listing goes straight to its brick, without a
 * resolving lookup (`ls -l` sends a getxattr per entry). A second instance
 * over the same bricks, whose own cache is empty and whose bricks fail
 * every lookup, must answer getxattr of every listed file from its brick. */
static void test_list_primes(struct dg_vol *v)
{
    struct bfs_gfid dg, g[PRIME_N];
    char name[32];
    int made = 0;
    memset(g, 0, sizeof(g));
    is_int(dg_mkdir(v, &bfs_gfid_root, "prime", &dg), 0, "prime: mkdir");
    for (int i = 0; i < PRIME_N; i++) {
        snprintf(name, sizeof(name), "p-%d", i);
        made += dg_put(v, &dg, name, "x", NULL) == 0;
    }
    is_int(made, PRIME_N, "prime: %d files created", PRIME_N);
    struct dg_vol w;
    if (!dg_vol_start(&w, 3, "main", "")) {
        ok(0, "prime: a second instance over the same bricks starts");
        return;
    }
    for (int b = 0; b < w.n; b++) {
        char bn[16];
        snprintf(bn, sizeof(bn), "b%d", b);
        struct bfs_xl *eg = bfs_graph_find(w.g, bn);
        dg_reconf(eg, "enable", "lookup");
        dg_reconf(eg, "error-no", "EIO");
        dg_reconf(eg, "failure", "100");
    }
    struct bfs_loc lg = dg_LG(&dg);
    struct bfs_lookup_req lq = {.loc = lg};
    is_int(bfs_sync_lookup(w.top, dg_st, &lq, NULL), -EIO, "prime: the bricks refuse lookups");
    is_int(dg_list(&w, &dg, 4096, true, prime_fn, g), PRIME_N, "prime: readdirplus lists them");
    int good = 0;
    for (int i = 0; i < PRIME_N; i++) {
        struct bfs_getxattr_req q = {.loc = dg_LG(&g[i]), .name = "user.none"};
        int rc = bfs_sync_getxattr(w.top, dg_st, &q, NULL);
        good += rc == -ENODATA;
        if (rc != -ENODATA)
            printf("# prime: p-%d: getxattr %d\n", i, rc);
    }
    is_int(good, PRIME_N, "prime: getxattr of each listed file reached its brick (no lookup)");
    bfs_graph_free(w.g);
    dht_table_free(w.table);
}

/* ---- layout version and layout changes ---- */

static int64_t brick_version(struct dg_vol *v, int b)
{
    uint64_t be;
    if (lgetxattr(v->dir[b], "trusted.brickfs.dht.layout-version", &be, 8) != 8)
        return -1;
    return (int64_t)be64toh(be);
}

static int root_lookup(struct dg_vol *v)
{
    struct bfs_lookup_req q = {.loc = dg_LG(&bfs_gfid_root)};
    return bfs_sync_lookup(v->top, dg_st, &q, NULL);
}

static int reconf3(struct bfs_xl *xl, const char *layout, const char *prev, const char *ver)
{
    struct bfs_dict *d = bfs_dict_new();
    bfs_dict_set_str(d, "layout", layout);
    bfs_dict_set_str(d, "layout-previous", prev);
    bfs_dict_set_str(d, "layout-version", ver);
    int rc = xl->mod->reconfigure(xl, d);
    bfs_dict_unref(d);
    return rc;
}

static void test_version(struct dg_vol *v)
{
    struct bfs_gfid vg;
    char name[32];
    is_int(root_lookup(v), 0, "a root lookup");
    int got = 0;
    for (int b = 0; b < v->n; b++)
        got += brick_version(v, b) == 1;
    is_int(got, v->n, "stamps layout-version 1 on every brick's root");
    is_int(dg_reconf(v->top, "layout-version", "2"), 0, "layout-version 2");
    root_lookup(v);
    got = 0;
    for (int b = 0; b < v->n; b++)
        got += brick_version(v, b) == 2;
    is_int(got, v->n, "the bricks now say 2");
    is_int(dg_mkdir(v, &bfs_gfid_root, "ver", &vg), 0, "mkdir ver");
    int h = dg_hashed(v, &vg, dg_name_on(v, &vg, "misplaced", 0, name, sizeof(name)));
    struct bfs_fd *fd = bfs_fd_new(v->g, NULL, O_RDWR, 0);
    struct bfs_create_req cq = {.loc = cg_L(&vg, name), .fd = fd, .flags = O_RDWR | O_CREAT,
                                .mode = 0644};
    is_int(bfs_sync_create(bfs_graph_find(v->g, "b2"), dg_st, &cq, NULL), 0,
           "a file placed on brick 2 behind distribute's back (it hashes to %d)", h);
    bfs_fd_unref(fd);
    is_int(dg_lookup(v, &vg, name, NULL), -ENOENT, "not found where the layout says: ENOENT");
    is_int(dg_reconf(v->top, "layout-version", "1"), 0, "this client goes back to version 1");
    root_lookup(v);
    char *dump = v->top->mod->dump(v->top);
    ok(dump && strstr(dump, "\"stale_layout\":true"), "it notices its layout is stale");
    free(dump);
    got = 0;
    for (int b = 0; b < v->n; b++)
        got += brick_version(v, b) == 2;
    is_int(got, v->n, "and leaves the bricks' newer version alone");
    is_int(dg_lookup(v, &vg, name, NULL), 0, "a stale client searches every brick on a miss");
    is_int(dg_reconf(v->top, "layout-version", "2"), 0, "version 2 again");
    root_lookup(v);
    is_int(dg_reconf(v->top, "cluster.min-free-disk", "5%"), 0, "an unrelated reconfigure");
    dump = v->top->mod->dump(v->top);
    ok(dump && strstr(dump, "\"stale_layout\":false") && strstr(dump, "\"layout_version\":2") &&
       strstr(dump, "\"min_free_disk\":5"), "no longer stale; earlier changes stay in force");
    free(dump);
    struct bfs_unlink_req uq = {.loc = cg_L(&vg, name)};
    bfs_sync_unlink(bfs_graph_find(v->g, "b2"), dg_st, &uq, NULL);
    is_int(dg_rmdir(v, &bfs_gfid_root, "ver"), 0, "rmdir ver");
}

static void test_relayout(void)
{
    struct dg_vol v;
    struct bfs_gfid dg;
    char name[32], rel[64], buf[64];
    if (!dg_vol_start(&v, 3, "relayout", "")) {
        ok(0, "volume starts");
        return;
    }
    is_int(dg_mkdir(&v, &bfs_gfid_root, "rl", &dg), 0, "mkdir rl");
    int fails = 0, moved = 0;
    for (int i = 0; i < 60; i++) {
        snprintf(name, sizeof(name), "r-%d", i);
        fails += dg_put(&v, &dg, name, name, NULL) < 0;
    }
    is_int(fails, 0, "60 files under canonical(3)");
    struct dht_table *t2 = dht_table_canonical(2);
    for (int i = 0; i < 60; i++) {
        snprintf(name, sizeof(name), "r-%d", i);
        moved += dht_table_subvol(t2, dg.b, name) != dg_hashed(&v, &dg, name);
    }
    is_int(reconf3(v.top, "canonical:2", "canonical", "2"), 0,
           "new layout canonical:2 (brick 2 takes no new files), previous canonical(3)");
    int found = 0;
    for (int i = 0; i < 60; i++) {
        snprintf(name, sizeof(name), "r-%d", i);
        found += dg_get(&v, &dg, name, buf, sizeof(buf), NULL) == 0 && strcmp(buf, name) == 0;
    }
    ok(moved > 0 && found == 60, "all 60 found, the %d whose hashed brick changed through the "
       "previous layout", moved);
    int on2 = 0;
    for (int i = 0; i < 20; i++) {
        snprintf(name, sizeof(name), "n-%d", i);
        dg_put(&v, &dg, name, name, NULL);
        snprintf(rel, sizeof(rel), "rl/%s", name);
        on2 += dg_disk_kind(&v, 2, rel, NULL) != DG_ABSENT;
    }
    is_int(on2, 0, "new files follow the new layout: none on brick 2");
    struct dg_tally tl = {.count = calloc(60, sizeof(int)), .n = 60, .prefix = "r-"};
    int k = dg_list(&v, &dg, 512, true, dg_tally_fn, &tl);
    is_int(k, 80, "readdir lists the 80 names");
    free(tl.count);
    is_int(reconf3(v.top, "0*65536,9*0", "", "3"), -EINVAL, "a bad table is refused");
    snprintf(name, sizeof(name), "r-%d", 0);
    is_int(dg_lookup(&v, &dg, name, NULL), 0, "and the layout in force stays");
    is_int(reconf3(v.top, "canonical:2", "", "3"), 0, "the same layout without a previous one");
    found = 0;
    for (int i = 0; i < 60; i++) {
        snprintf(name, sizeof(name), "r-%d", i);
        found += dg_lookup(&v, &dg, name, NULL) == 0;
    }
    is_int(found, 60 - moved, "then only the files where the new layout puts them are found");
    dht_table_free(t2);
    dg_vol_stop(&v);
}

int main(void)
{
    plan_lazy();
    if (!cg_can_run())
        return 0;
    if (!ok(dg_init("test_distribute") == 0, "process resources"))
        return 1;
    test_spread(3);
    test_spread(6);
    struct dg_vol v;
    if (dg_vol_start(&v, 3, "main", "")) {
        test_dirs(&v);
        test_mkdir_parallel(&v);
        test_rename(&v);
        test_rename_locks(&v);
        test_hardlink(&v);
        test_down(&v);
        test_heal(&v);
        test_statfs(&v);
        test_stale(&v);
        test_unlink_locked(&v);
        test_concurrent(&v);
        test_list_primes(&v);
        test_version(&v);
        dg_vol_stop(&v);
    } else {
        ok(0, "3-brick volume starts");
    }
    test_minfree();
    test_relayout();
    dg_fini();
    return done_testing();
}
