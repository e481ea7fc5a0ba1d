/*
 * posix-graph.c — one storage/posix brick in a scratch folder for the graph
 * tests of posix (posix-graph.h): its set-up and tear-down, the blocking
 * fop wrappers the tests share, the paths of names and handles on disk, and
 * the consistency check of the handle store.
 *
 * Everything lives in globals of the program (one brick per program): made
 * by pg_init / pg_start, freed by pg_fini, which also removes the folder.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "posix-graph.h"

struct bfs_proc *pg_proc;
struct bfs_graph *pg_graph;
struct bfs_xl *pg_xl;
char pg_brick[PATH_MAX];
struct bfs_stack *pg_root_st, *pg_user_st;

bool pg_can_run(void)
{
    if (geteuid() == 0)
        return true;
    printf("1..0 # SKIP storage/posix tests need root (trusted xattrs, setfsuid)\n");
    return false;
}

int pg_init(const char *name)
{
    char pname[64];
    umask(022);
    snprintf(pg_brick, sizeof(pg_brick), "/tmp/bfs-%s-XXXXXX", name);
    if (!mkdtemp(pg_brick))
        return -errno;
    bfs_log_set_level(BFS_LOG_ERROR);
    snprintf(pname, sizeof(pname), "test_%s", name);
    pg_proc = bfs_proc_new(pname, 4);
    pg_root_st = bfs_stack_new();
    pg_user_st = bfs_stack_new();
    if (!pg_proc || !pg_root_st || !pg_user_st)
        return -ENOMEM;
    pg_user_st->uid = 1000;
    pg_user_st->gid = 1000;
    return 0;
}

int pg_build(const char *dir, struct bfs_graph **out)
{
    return pg_build_with(dir, "", out);
}

int pg_build_with(const char *dir, const char *options, struct bfs_graph **out)
{
    char text[PATH_MAX + 1024], err[512] = "";
    snprintf(text, sizeof(text), "volume brick\n type storage/posix\n%s%s%s%send-volume\n",
             dir ? " option directory " : "", dir ? dir : "", dir ? "\n" : "", options);
    int rc = bfs_graph_from_text(text, strlen(text), "<test>", pg_proc, out, err, sizeof(err));
    if (rc < 0) {
        printf("# graph: %s\n", err);
        return rc;
    }
    rc = bfs_graph_init(*out);
    if (rc < 0) {
        bfs_graph_free(*out);
        *out = NULL;
    }
    return rc;
}

int pg_start(void)
{
    return pg_start_with("");
}

int pg_start_with(const char *options)
{
    int rc = pg_build_with(pg_brick, options, &pg_graph);
    pg_xl = pg_graph ? pg_graph->top : NULL;
    return rc;
}

void pg_stop(void)
{
    if (pg_graph)
        bfs_graph_free(pg_graph);
    pg_graph = NULL;
    pg_xl = NULL;
}

bool pg_dump_has(const char *needle)
{
    char *d = pg_xl->mod->dump(pg_xl);
    bool has = d && strstr(d, needle);
    if (!has)
        printf("# dump: %s\n", d ? d : "(none)");
    free(d);
    return has;
}

void pg_fini(void)
{
    pg_stop();
    bfs_stack_unref(pg_root_st);
    bfs_stack_unref(pg_user_st);
    bfs_proc_free(pg_proc);
    if (!pg_brick[0])
        return;
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", pg_brick);
    if (system(cmd) != 0)
        printf("# cleanup of %s failed\n", pg_brick);
}

/* ---- locations and what is on disk ---- */

struct bfs_loc pg_L(const struct bfs_gfid *par, const char *name)
{
    struct bfs_loc l = {0};
    l.pargfid = *par;
    l.name = name;
    return l;
}

struct bfs_loc pg_LG(const struct bfs_gfid *g)
{
    struct bfs_loc l = {0};
    l.gfid = *g;
    return l;
}

const char *pg_disk(const char *rel)
{
    static char buf[4][PATH_MAX + 64];
    static int n;
    char *b = buf[n++ % 4];
    snprintf(b, sizeof(buf[0]), "%s/%s", pg_brick, rel);
    return b;
}

const char *pg_hpath(const struct bfs_gfid *g)
{
    static char buf[2][PATH_MAX + 64];
    static int n;
    char s[BFS_GFID_STRLEN];
    char *b = buf[n++ % 2];
    bfs_gfid_fmt(g, s);
    snprintf(b, sizeof(buf[0]), "%s/.brickfs/%.2s/%.2s/%s", pg_brick, s, s + 2, s);
    return b;
}

bool pg_handle_exists(const struct bfs_gfid *g)
{
    struct stat st;
    return lstat(pg_hpath(g), &st) == 0;
}

int pg_disk_gfid(const char *rel, struct bfs_gfid *g)
{
    ssize_t n = lgetxattr(pg_disk(rel), PG_GFID_KEY, g->b, 16);
    return n == 16 ? 0 : -1;
}

struct bfs_dict *pg_gfid_req(const struct bfs_gfid *g)
{
    struct bfs_dict *d = bfs_dict_new();
    bfs_dict_set_bin(d, "gfid-req", g->b, 16);
    return d;
}

/* ---- fops ---- */

int pg_lookup(struct bfs_stack *st, struct bfs_loc loc, struct bfs_iatt *attr)
{
    struct bfs_lookup_req req = {.loc = loc};
    struct bfs_lookup_rep rep;
    int rc = bfs_sync_lookup(pg_xl, st, &req, &rep);
    if (attr)
        *attr = rep.attr;
    bfs_lookup_rep_clear_dup(&rep);
    return rc;
}

int pg_mkdir(struct bfs_stack *st, const struct bfs_gfid *par, const char *name, uint32_t mode,
             struct bfs_iatt *attr)
{
    struct bfs_mkdir_req req = {.loc = pg_L(par, name), .mode = mode, .umask = 0};
    struct bfs_mkdir_rep rep;
    int rc = bfs_sync_mkdir(pg_xl, st, &req, &rep);
    if (attr)
        *attr = rep.attr;
    bfs_mkdir_rep_clear_dup(&rep);
    return rc;
}

int pg_create_x(struct bfs_stack *st, const struct bfs_gfid *par, const char *name,
                uint32_t flags, uint32_t mode, uint32_t umask, struct bfs_dict *xdata,
                struct bfs_fd **fdp, struct bfs_iatt *attr)
{
    struct bfs_fd *fd = bfs_fd_new(pg_graph, NULL, (int32_t)flags, 0);
    struct bfs_create_req req = {.loc = pg_L(par, name), .fd = fd, .flags = flags,
                                 .mode = mode, .umask = umask, .xdata = xdata};
    struct bfs_create_rep rep;
    int rc = bfs_sync_create(pg_xl, st, &req, &rep);
    if (attr)
        *attr = rep.attr;
    bfs_create_rep_clear_dup(&rep);
    bfs_dict_unref(xdata);
    if (rc < 0 || !fdp)
        bfs_fd_unref(fd);
    else
        *fdp = fd;
    return rc;
}

int pg_create(struct bfs_stack *st, const struct bfs_gfid *par, const char *name,
              struct bfs_fd **fdp, struct bfs_iatt *attr)
{
    return pg_create_x(st, par, name, O_RDWR, 0644, 0, NULL, fdp, attr);
}

int pg_unlink(struct bfs_stack *st, const struct bfs_gfid *par, const char *name)
{
    struct bfs_unlink_req req = {.loc = pg_L(par, name)};
    return bfs_sync_unlink(pg_xl, st, &req, NULL);
}

int pg_rmdir(struct bfs_stack *st, const struct bfs_gfid *par, const char *name)
{
    struct bfs_rmdir_req req = {.loc = pg_L(par, name)};
    return bfs_sync_rmdir(pg_xl, st, &req, NULL);
}

int pg_rename(const struct bfs_gfid *op, const char *on, const struct bfs_gfid *np,
              const char *nn, uint32_t flags)
{
    struct bfs_rename_req req = {.oldloc = pg_L(op, on), .newloc = pg_L(np, nn), .flags = flags};
    return bfs_sync_rename(pg_xl, pg_root_st, &req, NULL);
}

/* ---- the handle store ---- */

void pg_deferred_done(void)
{
    for (int i = 0; i < 2000; i++) {
        char *d = pg_xl->mod->dump(pg_xl);
        bool idle = d && strstr(d, "\"unlinks_deferred\":0,");
        free(d);
        if (idle)
            return;
        usleep(10000);
    }
    printf("# deferred handle removals still outstanding after 20 s\n");
}

/* One handle of the store (path p, named g); 0 if it is alive, else 1. */
static int check_handle(const char *p, const struct bfs_gfid *g, const struct stat *st)
{
    struct bfs_gfid own;
    if (bfs_gfid_is_root(g))
        return 0;
    bool has = lgetxattr(p, PG_GFID_KEY, own.b, 16) == 16;
    if (!S_ISLNK(st->st_mode) || has) {
        if (st->st_nlink < 2 || !has || !bfs_gfid_eq(&own, g)) {
            printf("# orphan or wrong file handle %s (nlink %lu)\n", p,
                   (unsigned long)st->st_nlink);
            return 1;
        }
    } else if (pg_lookup(pg_root_st, pg_LG(g), NULL) != 0) {
        printf("# dead directory handle %s\n", p);
        return 1;
    }
    return 0;
}

int pg_check_store(void)
{
    int bad = 0;
    char top[PATH_MAX + 16];
    snprintf(top, sizeof(top), "%s/.brickfs", pg_brick);
    for (int a = 0; a < 256; a++) {
        for (int b = 0; b < 256; b++) {
            char dir[PATH_MAX + 32];
            snprintf(dir, sizeof(dir), "%s/%02x/%02x", top, a, b);
            DIR *d = opendir(dir);
            if (!d)
                continue;
            struct dirent *e;
            while ((e = readdir(d))) {
                if (e->d_name[0] == '.')
                    continue;
                char p[PATH_MAX + 96];
                struct stat st;
                struct bfs_gfid g;
                snprintf(p, sizeof(p), "%s/%.40s", dir, e->d_name);
                if (bfs_gfid_parse(e->d_name, &g) < 0 || lstat(p, &st) < 0) {
                    printf("# odd handle %s\n", p);
                    bad++;
                    continue;
                }
                bad += check_handle(p, &g, &st);
            }
            closedir(d);
        }
    }
    return bad;
}
