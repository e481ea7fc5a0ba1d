/*
 * test_posix_handles.c — storage/posix's handle store (.brickfs/PP/QQ/GFID)
 * over a real temporary directory: entries made behind brickfs's back are
 * adopted, entries removed by hand are recreated with the same GFID (as a
 * heal does), directories resolve by GFID deeper than the kernel's symlink
 * limit and through a moved ancestor, and concurrent create / link /
 * unlink / rename / mkdir leave every name with its handle and no orphan.
 * The brick and the wrappers are tests/lib/posix-graph.c's; the fops one by
 * one are test_posix.c's. Needs root (trusted xattrs); skips otherwise.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/posix-graph.h"
#include "../lib/tap.h"
#include "core/graph.h"

/* Entries made behind brickfs's back get a GFID and a handle on lookup. */
static void test_adopt(void)
{
    struct bfs_iatt a;
    struct bfs_gfid g;
    mkdir(pg_disk("foreign"), 0755);
    FILE *f = fopen(pg_disk("foreign/file"), "w");
    fputs("x", f);
    fclose(f);
    is_int(pg_lookup(pg_root_st, pg_L(&bfs_gfid_root, "foreign"), &a), 0,
           "lookup of a foreign dir");
    ok(!bfs_gfid_is_null(&a.gfid) && pg_disk_gfid("foreign", &g) == 0 && bfs_gfid_eq(&g, &a.gfid),
       "... gives it a GFID");
    struct bfs_iatt b;
    is_int(pg_lookup(pg_root_st, pg_L(&a.gfid, "file"), &b), 0, "lookup of a foreign file");
    struct stat s1, s2;
    ok(stat(pg_disk("foreign/file"), &s1) == 0 && stat(pg_hpath(&b.gfid), &s2) == 0 &&
       s1.st_ino == s2.st_ino, "... gives it a handle");
    /* a lost handle is recreated by a named lookup */
    unlink(pg_hpath(&b.gfid));
    is_int(pg_lookup(pg_root_st, pg_L(&a.gfid, "file"), NULL), 0, "lookup with its handle gone");
    ok(stat(pg_hpath(&b.gfid), &s2) == 0 && s1.st_ino == s2.st_ino, "... recreates the handle");
}

static int mkdir_req(const struct bfs_gfid *par, const char *name, const struct bfs_gfid *g,
                     struct bfs_iatt *attr)
{
    struct bfs_mkdir_req req = {.loc = pg_L(par, name), .mode = 0755, .xdata = pg_gfid_req(g)};
    struct bfs_mkdir_rep rep;
    int rc = bfs_sync_mkdir(pg_xl, pg_root_st, &req, &rep);
    if (attr)
        *attr = rep.attr;
    bfs_mkdir_rep_clear_dup(&rep);
    bfs_dict_unref(req.xdata);
    return rc;
}

/* An entry removed by hand on the brick leaves its handle behind; a heal
 * (distribute's directory self-heal, ...) recreates it with the same GFID. */
static void test_recreate_same_gfid(void)
{
    struct bfs_iatt a;
    struct bfs_gfid g, own;
    struct stat s1, s2;
    bfs_gfid_generate(&g);
    is_int(mkdir_req(&bfs_gfid_root, "regrow", &g, NULL), 0, "mkdir regrow with gfid-req");
    ok(rmdir(pg_disk("regrow")) == 0 && pg_handle_exists(&g),
       "rmdir(2) on the brick: handle stays");
    is_int(mkdir_req(&bfs_gfid_root, "regrow", &g, &a), 0,
           "mkdir again with the same gfid-req (stale handle resolves to the new dir)");
    ok(bfs_gfid_eq(&a.gfid, &g) && pg_disk_gfid("regrow", &own) == 0 && bfs_gfid_eq(&own, &g),
       "... it has that GFID");
    char t[256] = "", want[256], rs[BFS_GFID_STRLEN];
    snprintf(want, sizeof(want), "../../00/00/%s/regrow", bfs_gfid_fmt(&bfs_gfid_root, rs));
    ssize_t n = readlink(pg_hpath(&g), t, sizeof(t) - 1);
    t[n > 0 ? n : 0] = 0;
    is_str(t, want, "... and its handle names it");
    is_int(pg_lookup(pg_root_st, pg_LG(&g), &a), 0, "lookup by that GFID");
    ok(S_ISDIR(a.mode) && bfs_gfid_eq(&a.gfid, &g), "... is the new directory");
    is_int(pg_create(pg_root_st, &g, "in", NULL, NULL), 0, "create below it by GFID");
    ok(access(pg_disk("regrow/in"), F_OK) == 0, "... lands in the new directory");
    is_int(mkdir_req(&bfs_gfid_root, "regrow2", &g, NULL), -EEXIST,
           "another mkdir with that GFID (now live): EEXIST");
    ok(access(pg_disk("regrow2"), F_OK) < 0, "... and leaves nothing behind");
    pg_unlink(pg_root_st, &g, "in");
    is_int(pg_rmdir(pg_root_st, &bfs_gfid_root, "regrow"), 0, "rmdir it through brickfs");

    /* removed by hand and recreated elsewhere: the old handle does not
     * resolve any more and is replaced */
    is_int(mkdir_req(&bfs_gfid_root, "moved", &g, NULL), 0, "mkdir moved with gfid-req");
    ok(rmdir(pg_disk("moved")) == 0 && pg_handle_exists(&g), "rmdir(2) on the brick");
    is_int(mkdir_req(&bfs_gfid_root, "moved2", &g, NULL), 0, "mkdir it at another name");
    is_int(pg_lookup(pg_root_st, pg_LG(&g), &a), 0, "lookup by GFID");
    ok(S_ISDIR(a.mode) && bfs_gfid_eq(&a.gfid, &g) && pg_handle_exists(&g), "... finds it");
    pg_rmdir(pg_root_st, &bfs_gfid_root, "moved2");

    /* a file unlinked by hand: its old inode keeps only the handle, which a
     * file recreated with the same GFID takes over */
    struct bfs_gfid fg;
    bfs_gfid_generate(&fg);
    is_int(pg_create_x(pg_root_st, &bfs_gfid_root, "refile", O_RDWR, 0644, 0, pg_gfid_req(&fg),
                       NULL, NULL),
           0, "create refile with gfid-req");
    ok(unlink(pg_disk("refile")) == 0 && pg_handle_exists(&fg),
       "unlink(2) on the brick: handle stays");
    is_int(pg_create_x(pg_root_st, &bfs_gfid_root, "refile", O_RDWR, 0644, 0, pg_gfid_req(&fg),
                       NULL, &a),
           0, "create again with the same gfid-req");
    ok(stat(pg_disk("refile"), &s1) == 0 && stat(pg_hpath(&fg), &s2) == 0 &&
           s1.st_ino == s2.st_ino && s1.st_nlink == 2,
       "... the handle is a hard link to the new file");
    is_int(pg_unlink(pg_root_st, &bfs_gfid_root, "refile"), 0, "unlink it through brickfs");

    /* ... but while the old inode has another name, the GFID is still that
     * file's: the new entry is refused */
    is_int(pg_create_x(pg_root_st, &bfs_gfid_root, "keep", O_RDWR, 0644, 0, pg_gfid_req(&fg), NULL,
                       NULL),
           0, "create keep with gfid-req");
    ok(link(pg_disk("keep"), pg_disk("keep2")) == 0 && unlink(pg_disk("keep")) == 0,
       "link(2) keep2, unlink(2) keep on the brick");
    is_int(pg_create_x(pg_root_st, &bfs_gfid_root, "keep", O_RDWR, 0644, 0, pg_gfid_req(&fg), NULL,
                       NULL),
           -EEXIST, "create keep again with that GFID: EEXIST (keep2 still has it)");
    ok(access(pg_disk("keep"), F_OK) < 0 && stat(pg_disk("keep2"), &s1) == 0 &&
       stat(pg_hpath(&fg), &s2) == 0 && s1.st_ino == s2.st_ino, "... keep2 keeps its handle");
    pg_unlink(pg_root_st, &bfs_gfid_root, "keep2");
}

/* Deeper than the kernel's 40-symlink limit, and through a moved ancestor. */
static void test_deep(void)
{
    struct bfs_iatt d = {.gfid = bfs_gfid_root}, first = {0};
    int ok_all = 1;
    for (int i = 0; i < 60; i++) {
        struct bfs_iatt n;
        char name[16];
        snprintf(name, sizeof(name), "lvl%d", i);
        if (pg_mkdir(pg_root_st, &d.gfid, name, 0755, &n) < 0)
            ok_all = 0;
        if (i == 0)
            first = n;
        d = n;
    }
    ok(ok_all, "mkdir 60 levels deep");
    struct bfs_iatt a;
    is_int(pg_lookup(pg_root_st, pg_LG(&d.gfid), &a), 0, "lookup by GFID at depth 60");
    ok(bfs_gfid_eq(&a.gfid, &d.gfid), "... finds it");
    struct bfs_fd *fd;
    is_int(pg_create(pg_root_st, &d.gfid, "leaf", &fd, NULL), 0, "create at depth 60");
    bfs_fd_unref(fd);
    is_int(pg_rename(&bfs_gfid_root, "lvl0", &bfs_gfid_root, "moved0", 0), 0, "move the top");
    is_int(pg_lookup(pg_root_st, pg_L(&d.gfid, "leaf"), NULL), 0, "depth-60 entry still reachable");
    (void)first;
}

/* ---- a directory's path kept from its last walk (performance note 35) ---- */

static ssize_t (*real_readlinkat)(int, const char *, char *, size_t);
static int (*real_openat_beneath)(int, const char *, int);
static int n_readlinkat, n_beneath;

static ssize_t count_readlinkat(int d, const char *p, char *b, size_t n)
{
    n_readlinkat++;
    return real_readlinkat(d, p, b, n);
}

static int count_beneath(int d, const char *p, int flags)
{
    n_beneath++;
    return real_openat_beneath(d, p, flags);
}

/* One create in dir: 0 or -errno; counts its resolution's system calls. */
static int counted_create(const struct bfs_gfid *dir, const char *name)
{
    n_readlinkat = n_beneath = 0;
    struct bfs_fd *fd = NULL;
    int rc = pg_create(pg_root_st, dir, name, &fd, NULL);
    if (fd)
        bfs_fd_unref(fd);
    return rc;
}

static void test_dir_path(void)
{
    int (*override)(const char *, void *, void **) =
        (int (*)(const char *, void *, void **))dlsym(pg_xl->dlhandle, "bfs_posix_sys_override");
    void *o1 = NULL, *o2 = NULL;
    if (!override || override("readlinkat", (void *)count_readlinkat, &o1) < 0 ||
        override("openat_beneath", (void *)count_beneath, &o2) < 0) {
        ok(0, "dir path: readlinkat and openat_beneath can be counted");
        return;
    }
    real_readlinkat = (ssize_t(*)(int, const char *, char *, size_t))o1;
    real_openat_beneath = (int (*)(int, const char *, int))o2;
    struct bfs_iatt a, b, c;
    pg_mkdir(pg_root_st, &bfs_gfid_root, "pa", 0755, &a);
    pg_mkdir(pg_root_st, &a.gfid, "pb", 0755, &b);
    pg_mkdir(pg_root_st, &b.gfid, "pc", 0755, &c);
    is_int(counted_create(&c.gfid, "f1"), 0, "dir path: create 3 levels down");
    is_int(counted_create(&c.gfid, "f2"), 0, "dir path: another create there");
    ok(n_readlinkat == 1 && n_beneath == 1,
       "... resolves its folder with one readlinkat and one openat2, not a walk "
       "(%d readlinkat, %d openat2)", n_readlinkat, n_beneath);

    is_int(pg_rename(&a.gfid, "pb", &a.gfid, "pb2", 0), 0, "rename the middle folder");
    is_int(counted_create(&c.gfid, "f3"), 0, "create below the moved folder: found by the walk");
    ok(n_readlinkat >= 3, "... which read the whole handle chain (%d)", n_readlinkat);
    is_int(counted_create(&c.gfid, "f4"), 0, "the next create there");
    ok(n_readlinkat == 1 && n_beneath == 1, "... takes the new path (%d, %d)", n_readlinkat,
       n_beneath);

    /* Behind brickfs's back: the answers are the walk's, as without the path. */
    rename(pg_disk("pa/pb2"), pg_disk("pa/pb3"));
    is_int(counted_create(&c.gfid, "f5"), -ESTALE, "folder moved behind our back: ESTALE");
    rename(pg_disk("pa/pb3"), pg_disk("pa/pb2"));
    is_int(counted_create(&c.gfid, "f5"), 0, "moved back: found again");
    rename(pg_disk("pa/pb2"), pg_disk("pa/pb2.real"));
    symlink("pb2.real", pg_disk("pa/pb2"));
    is_int(counted_create(&c.gfid, "f6"), -ESTALE, "a symlink on the cached path: ESTALE, not followed");
    struct stat st;
    ok(stat(pg_disk("pa/pb2.real/pc/f6"), &st) < 0, "... nothing was made through it");
    unlink(pg_disk("pa/pb2"));
    rename(pg_disk("pa/pb2.real"), pg_disk("pa/pb2"));
    is_int(counted_create(&c.gfid, "f6"), 0, "restored: create works");
    override("readlinkat", NULL, NULL);
    override("openat_beneath", NULL, NULL);
}

/* ---- a handle removed between its open and its fstat ---- */

static int (*real_openat)(int, const char *, int, mode_t);
static char race_name[BFS_GFID_STRLEN]; /* the handle to remove, "" when disarmed */
static char race_path[PATH_MAX + 64];

/* The open of the armed handle succeeds, then the handle goes, as the
 * deferred removal (posix-defer.c) or the start-up scan (posix-orphan.c)
 * may do on another thread right then: the fd names an inode with no
 * link left. */
static int race_openat(int d, const char *path, int flags, mode_t mode)
{
    int fd = real_openat(d, path, flags, mode);
    if (fd >= 0 && race_name[0] && strstr(path, race_name)) {
        race_name[0] = 0;
        unlink(race_path);
    }
    return fd;
}

/* A file made and its name removed by hand (only its handle is left, an
 * orphan), with the race armed on its handle: 0 or -1. */
static int orphan_armed(const char *name, struct bfs_iatt *a)
{
    if (pg_create(pg_root_st, &bfs_gfid_root, name, NULL, a) != 0 || unlink(pg_disk(name)) != 0)
        return -1;
    snprintf(race_path, sizeof(race_path), "%s", pg_hpath(&a->gfid));
    bfs_gfid_fmt(&a->gfid, race_name);
    return 0;
}

static void test_removed_while_resolving(void)
{
    int (*override)(const char *, void *, void **) =
        (int (*)(const char *, void *, void **))dlsym(pg_xl->dlhandle, "bfs_posix_sys_override");
    void *o = NULL;
    if (!override || override("openat", (void *)race_openat, &o) < 0) {
        ok(0, "race: openat hooked");
        return;
    }
    real_openat = (int (*)(int, const char *, int, mode_t))o;
    struct bfs_iatt a, b, d;
    pg_mkdir(pg_root_st, &bfs_gfid_root, "race-dir", 0755, &d);
    is_int(orphan_armed("raced", &a), 0, "race: a file whose name went behind brickfs's back");
    is_int(pg_lookup(pg_root_st, pg_LG(&a.gfid), NULL), -ESTALE,
           "race: a lookup by GFID whose handle goes between open and fstat: ESTALE");
    ok(!race_name[0], "... the handle went in that window");
    is_int(orphan_armed("raced2", &b), 0, "race: another such file");
    struct bfs_link_req lr = {.oldloc = pg_LG(&b.gfid), .newloc = pg_L(&d.gfid, "back")};
    is_int(bfs_sync_link(pg_xl, pg_root_st, &lr, NULL), -ESTALE,
           "race: a link of it by GFID, the handle going in that window: ESTALE");
    ok(!race_name[0], "... the handle went in that window");
    race_name[0] = 0;
    override("openat", NULL, NULL);
}

struct stress_arg {
    struct bfs_gfid dir;
    unsigned seed;
};

static void *stress_thread(void *arg)
{
    struct stress_arg *a = arg;
    for (int i = 0; i < 400; i++) {
        char n1[16], n2[16];
        snprintf(n1, sizeof(n1), "s%d", rand_r(&a->seed) % 12);
        snprintf(n2, sizeof(n2), "s%d", rand_r(&a->seed) % 12);
        switch (rand_r(&a->seed) % 5) {
        case 0:
            pg_create_x(pg_root_st, &a->dir, n1, O_RDWR, 0644, 0, NULL, NULL, NULL);
            break;
        case 1: {
            struct bfs_link_req lr = {.oldloc = pg_L(&a->dir, n1), .newloc = pg_L(&a->dir, n2)};
            bfs_sync_link(pg_xl, pg_root_st, &lr, NULL);
            break;
        }
        case 2:
            pg_unlink(pg_root_st, &a->dir, n1);
            break;
        case 3:
            pg_rename(&a->dir, n1, &a->dir, n2, 0);
            break;
        default:
            if (pg_mkdir(pg_root_st, &a->dir, n1, 0755, NULL) < 0)
                pg_rmdir(pg_root_st, &a->dir, n1);
            break;
        }
    }
    return NULL;
}

static void test_stress(void)
{
    struct bfs_iatt d;
    pg_deferred_done();
    is_int(pg_check_store(), 0, "before the stress: the handle store is consistent");
    pg_mkdir(pg_root_st, &bfs_gfid_root, "stress", 0755, &d);
    pthread_t th[6];
    struct stress_arg args[6];
    for (int i = 0; i < 6; i++) {
        args[i].dir = d.gfid;
        args[i].seed = (unsigned)i * 7919u + 1;
        pthread_create(&th[i], NULL, stress_thread, &args[i]);
    }
    for (int i = 0; i < 6; i++)
        pthread_join(th[i], NULL);
    /* every name left has a live handle of its own inode */
    int bad = 0;
    DIR *dir = opendir(pg_disk("stress"));
    struct dirent *e;
    while (dir && (e = readdir(dir))) {
        char rel[64];
        struct bfs_gfid g;
        struct stat s1, s2;
        if (e->d_name[0] == '.')
            continue;
        snprintf(rel, sizeof(rel), "stress/%.40s", e->d_name);
        if (pg_disk_gfid(rel, &g) < 0 || lstat(pg_disk(rel), &s1) < 0 ||
            lstat(pg_hpath(&g), &s2) < 0 || (!S_ISDIR(s1.st_mode) && s1.st_ino != s2.st_ino)) {
            printf("# %s has no good handle\n", rel);
            bad++;
        } else if (S_ISDIR(s1.st_mode) && pg_lookup(pg_root_st, pg_LG(&g), NULL) != 0) {
            printf("# %s: directory handle does not resolve\n", rel);
            bad++;
        }
    }
    if (dir)
        closedir(dir);
    is_int(bad, 0, "after concurrent create/link/unlink/rename/mkdir: every name has its handle");
    pg_deferred_done();
    is_int(pg_check_store(), 0, "... and no handle is an orphan or dead");
}

int main(void)
{
    plan_lazy();
    if (!pg_can_run())
        return 0;
    if (pg_init("posix-handles") < 0) {
        printf("not ok 1 - mkdtemp, process, stacks\n");
        return 1;
    }
    is_int(pg_start(), 0, "storage/posix on the brick directory");
    if (pg_xl) {
        test_adopt();
        test_deep();
        test_dir_path();
        test_recreate_same_gfid();
        test_removed_while_resolving();
        test_stress();
        pg_deferred_done();
        is_int(pg_check_store(), 0, "the whole handle store is consistent");
    }
    pg_fini();
    return done_testing();
}
