/*
 * test_posix_create.c — storage/posix's cheaper create
 * (docs/design/performance-notes.md, note 21) keeps its answers:
 *
 *   - the client's umask still applies on every worker thread: 0 (what the
 *     FUSE kernel sends, the thread's own umask between creates, no
 *     syscall) and 022 / 077 (set for the call, then back to 0) alternate
 *     on the same threads, each file gets exactly mode & ~umask;
 *   - the handle folders .brickfs/ab/cd it remembers as existing: a file
 *     whose handle folder was removed behind its back after it was
 *     remembered still gets its handle (the link falls back to making the
 *     folders again), and resolves by GFID; a file in a folder never seen
 *     gets its folder;
 *   - a create's preparent (taken from the parent's resolution instead of a
 *     second fstat) is the parent before the create: its mtime is not the
 *     postparent's once the clock moved, and its link count and type are
 *     the folder's;
 *   - a new file's GFID goes through its own fd and its attributes are taken
 *     once, after its handle (note 44): the answer is what a stat finds.
 * Needs root (storage/posix: trusted xattrs); skips otherwise.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/cluster-graph.h"
#include "../lib/tap.h"
#include "core/graph.h"

static char tmpdir[64], brickdir[128];
static struct bfs_stack *st;
static struct bfs_graph *g;

static int create_in(const struct bfs_gfid *dir, const char *name, mode_t mode, mode_t um,
                     struct bfs_create_rep *out)
{
    struct bfs_fd *fd = bfs_fd_new(g, NULL, O_RDWR, 0);
    struct bfs_create_req q = {.loc = {.pargfid = *dir, .name = name}, .fd = fd,
                               .flags = O_RDWR | O_CREAT | O_EXCL, .mode = mode, .umask = um};
    struct bfs_create_rep r;
    int rc = bfs_sync_create(g->top, st, &q, &r);
    if (rc >= 0) {
        if (out) {
            *out = r;
            out->xdata = NULL; /* freed just below */
        }
        bfs_create_rep_clear_dup(&r);
    }
    bfs_fd_unref(fd);
    return rc;
}

static int create(const char *name, mode_t mode, mode_t um, struct bfs_create_rep *out)
{
    return create_in(&bfs_gfid_root, name, mode, um, out);
}

static int mkdir_sub(const char *name, struct bfs_gfid *out)
{
    struct bfs_mkdir_req q = {.loc = {.pargfid = bfs_gfid_root, .name = name}, .mode = 0755};
    struct bfs_mkdir_rep r;
    int rc = bfs_sync_mkdir(g->top, st, &q, &r);
    if (rc >= 0) {
        *out = r.attr.gfid;
        bfs_mkdir_rep_clear_dup(&r);
    }
    return rc < 0 ? rc : 0;
}

static mode_t mode_on_brick(const char *name)
{
    char p[256];
    struct stat s;
    snprintf(p, sizeof(p), "%s/%s", brickdir, name);
    return stat(p, &s) == 0 ? s.st_mode & 07777 : (mode_t)-1;
}

static void test_umask(void)
{
    static const mode_t ums[] = {0, 022, 0, 077, 0, 0, 022, 022, 0};
    int good = 0, n = (int)(sizeof(ums) / sizeof(ums[0]));
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < n; i++) {
            char name[32];
            snprintf(name, sizeof(name), "u%d-%d", round, i);
            if (create(name, 0666, ums[i], NULL) >= 0 && mode_on_brick(name) == (0666 & ~ums[i]))
                good++;
            else
                printf("# %s: umask %03o gave %03o\n", name, (unsigned)ums[i],
                     (unsigned)mode_on_brick(name));
        }
    }
    is_int(good, 4 * n, "every create gets mode & ~umask, umasks alternating on the workers");
}

static void handle_dir(const struct bfs_gfid *gf, char *out, size_t len)
{
    char s[BFS_GFID_STRLEN];
    bfs_gfid_fmt(gf, s);
    snprintf(out, len, "%s/.brickfs/%.2s/%.2s", brickdir, s, s + 2);
}

static int stat_gfid(const struct bfs_gfid *gf)
{
    struct bfs_stat_req q = {.loc = {.gfid = *gf}};
    struct bfs_stat_rep r;
    int rc = bfs_sync_stat(g->top, st, &q, &r);
    bfs_stat_rep_clear_dup(&r);
    return rc;
}

static void test_handle_folders(void)
{
    struct bfs_create_rep r;
    ok(create("h1", 0644, 0, &r) >= 0, "a create");
    struct bfs_gfid g1 = r.attr.gfid;
    char hd[256], cmd[512];
    handle_dir(&g1, hd, sizeof(hd));
    struct stat s;
    ok(stat(hd, &s) == 0 && S_ISDIR(s.st_mode), "its handle folder exists");
    /* the translator now knows that folder: remove it behind its back, then
     * create files until one lands in it again (GFIDs are random) */
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", hd);
    ok(system(cmd) == 0, "handle folder removed behind the brick's back");
    /* a new file whose GFID falls in the same folder: ask for it */
    struct bfs_gfid g2 = g1;
    g2.b[15] ^= 0x5a;
    g2.b[14] ^= 0xa5;
    struct bfs_fd *fd = bfs_fd_new(g, NULL, O_RDWR, 0);
    struct bfs_dict *x = bfs_dict_new();
    bfs_dict_set_bin(x, "gfid-req", g2.b, 16);
    struct bfs_create_req q = {.loc = {.pargfid = bfs_gfid_root, .name = "h2"}, .fd = fd,
                               .flags = O_RDWR | O_CREAT | O_EXCL, .mode = 0644, .xdata = x};
    struct bfs_create_rep r2;
    int rc = bfs_sync_create(g->top, st, &q, &r2);
    is_int(rc, 0, "a create whose remembered handle folder is gone");
    if (rc >= 0) {
        ok(bfs_gfid_eq(&r2.attr.gfid, &g2), "it got the GFID it asked for (same folder)");
        bfs_create_rep_clear_dup(&r2);
    }
    bfs_dict_unref(x);
    bfs_fd_unref(fd);
    ok(stat(hd, &s) == 0 && S_ISDIR(s.st_mode), "the folder was made again");
    is_int(stat_gfid(&g2), 0, "the new file resolves by GFID (its handle is there)");
}

static void test_preparent(void)
{
    struct bfs_create_rep a, b;
    ok(create("p1", 0644, 0, &a) >= 0, "a create");
    usleep(20000); /* a later create moves the folder's mtime */
    ok(create("p2", 0644, 0, &b) >= 0, "a second create");
    ok(S_ISDIR(b.preparent.mode) && b.preparent.nlink == b.postparent.nlink,
       "preparent is the folder");
    ok(bfs_gfid_is_root(&b.preparent.gfid), "preparent has the folder's GFID");
    ok(b.preparent.mtime_sec * 1000000000ll + b.preparent.mtime_nsec ==
           a.postparent.mtime_sec * 1000000000ll + a.postparent.mtime_nsec,
       "preparent is the folder as the previous create left it");
    ok(b.postparent.mtime_sec * 1000000000ll + b.postparent.mtime_nsec >
           b.preparent.mtime_sec * 1000000000ll + b.preparent.mtime_nsec,
       "postparent is later than preparent");
}

/* ---- a create's own system calls (performance note 44) ---- */

static int (*real_fstat)(int, struct stat *);
static int (*real_setxattr)(const char *, const char *, const void *, size_t, int);
static int (*real_fsetxattr)(int, const char *, const void *, size_t, int);
static ssize_t (*real_getxattr)(const char *, const char *, void *, size_t);
static int n_fstat, n_setxattr, n_fsetxattr, n_getxattr;

static int count_fstat(int fd, struct stat *s)
{
    n_fstat++;
    return real_fstat(fd, s);
}

static int count_setxattr(const char *p, const char *k, const void *v, size_t n, int f)
{
    n_setxattr++;
    return real_setxattr(p, k, v, n, f);
}

static int count_fsetxattr(int fd, const char *k, const void *v, size_t n, int f)
{
    n_fsetxattr++;
    return real_fsetxattr(fd, k, v, n, f);
}

static ssize_t count_getxattr(const char *p, const char *k, void *v, size_t n)
{
    n_getxattr++;
    return real_getxattr(p, k, v, n);
}

static int stat_rep(const struct bfs_gfid *gf, struct bfs_iatt *out)
{
    struct bfs_stat_req q = {.loc = {.gfid = *gf}};
    struct bfs_stat_rep r;
    int rc = bfs_sync_stat(g->top, st, &q, &r);
    if (rc >= 0)
        *out = r.attr;
    bfs_stat_rep_clear_dup(&r);
    return rc;
}

/* A new file's GFID is written through its own fd (fsetxattr, not the
 * /proc/self/fd path), and its attributes are taken once, after its
 * handle: three fstat in all with the folder's resolution and postparent,
 * and the answer is still the file as a stat finds it. */
static void test_syscalls(void)
{
    int (*override)(const char *, void *, void **) =
        (int (*)(const char *, void *, void **))dlsym(g->top->dlhandle, "bfs_posix_sys_override");
    void *o1 = NULL, *o2 = NULL, *o3 = NULL, *o4 = NULL;
    if (!override || override("fstat", (void *)count_fstat, &o1) < 0 ||
        override("setxattr", (void *)count_setxattr, &o2) < 0 ||
        override("fsetxattr", (void *)count_fsetxattr, &o3) < 0 ||
        override("getxattr", (void *)count_getxattr, &o4) < 0) {
        ok(0, "syscalls: fstat, setxattr, fsetxattr and getxattr can be counted");
        return;
    }
    real_getxattr = (ssize_t(*)(const char *, const char *, void *, size_t))o4;
    real_fstat = (int (*)(int, struct stat *))o1;
    real_setxattr = (int (*)(const char *, const char *, const void *, size_t, int))o2;
    real_fsetxattr = (int (*)(int, const char *, const void *, size_t, int))o3;
    struct bfs_create_rep r;
    struct bfs_gfid sub;
    ok(mkdir_sub("sys", &sub) == 0, "syscalls: a folder");
    ok(create_in(&sub, "s0", 0644, 0, NULL) >= 0, "syscalls: a create (warms the folder's path)");
    n_fstat = n_setxattr = n_fsetxattr = n_getxattr = 0;
    ok(create_in(&sub, "s1", 0640, 0, &r) >= 0, "syscalls: another create");
    ok(n_fsetxattr == 1 && n_setxattr == 0,
       "... sets the GFID through the file's fd (%d fsetxattr, %d setxattr)", n_fsetxattr,
       n_setxattr);
    ok(n_fstat == 3, "... with three fstat: folder, file after its handle, postparent (%d)",
       n_fstat);
    is_int(n_getxattr, 0, "... and its folder found by its last path reads no xattr through /proc");
    override("fstat", NULL, NULL);
    override("setxattr", NULL, NULL);
    override("fsetxattr", NULL, NULL);
    override("getxattr", NULL, NULL);
    struct bfs_iatt a;
    is_int(stat_rep(&r.attr.gfid, &a), 0, "syscalls: the new file stats by GFID");
    ok(a.ino == r.attr.ino && a.mode == r.attr.mode && a.nlink == r.attr.nlink &&
           a.size == 0 && r.attr.mode == (S_IFREG | 0640) && bfs_gfid_eq(&a.gfid, &r.attr.gfid),
       "... and the create answered what a stat finds (ino, mode, links, size, GFID)");
    ok(a.ctime_sec == r.attr.ctime_sec && a.ctime_nsec == r.attr.ctime_nsec,
       "... its ctime taken after the GFID and handle were made");
}

int main(void)
{
    plan_lazy();
    if (geteuid() != 0) {
        printf("1..0 # SKIP storage/posix needs root (trusted xattrs)\n");
        return 0;
    }
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/bfs-pxcreate-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("1..0 # SKIP cannot make a temporary folder\n");
        return 0;
    }
    snprintf(brickdir, sizeof(brickdir), "%s/brick", tmpdir);
    mkdir(brickdir, 0755);
    bfs_log_set_level(BFS_LOG_ERROR);
    struct bfs_proc *proc = bfs_proc_new("test_posix_create", 2);
    st = bfs_stack_new();
    char vf[512];
    snprintf(vf, sizeof(vf), "volume px\n type storage/posix\n option directory %s\nend-volume\n",
             brickdir);
    g = proc && st ? cg_graph_start(vf, proc) : NULL;
    ok(g != NULL, "storage/posix graph");
    if (g) {
        test_umask();
        test_handle_folders();
        test_preparent();
        test_syscalls();
        if (g->top->mod->notify)
            g->top->mod->notify(g->top, BFS_EV_PARENT_DOWN, NULL, NULL);
        bfs_graph_free(g);
    }
    bfs_stack_unref(st);
    bfs_proc_free(proc);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", tmpdir);
    return done_testing();
}
