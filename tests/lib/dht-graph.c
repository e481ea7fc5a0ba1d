/*
 * dht-graph.c — cluster/distribute over real bricks, in one process, for
 * the graph tests of distribute (test_distribute.c,
 * test_distribute_network.c, test_distribute_migrate.c) and the tool
 * tests/tools/dht_calls.c; dht-graph.h says what each helper does.
 *
 * The process and the scratch root are cluster-graph.c's: dg_init makes
 * them, dg_fini removes them. A struct dg_vol lives from dg_vol_start to
 * dg_vol_stop, which also empties its brick folders so that the next
 * volume of the program starts from nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "dht-graph.h"

struct bfs_stack *dg_st;

int dg_init(const char *name)
{
    int rc = cg_init_threads(name, 4);
    if (rc < 0)
        return rc;
    enum bfs_log_level lvl = BFS_LOG_ERROR;
    if (getenv("DHT_TEST_LOG"))
        bfs_log_level_parse(getenv("DHT_TEST_LOG"), &lvl);
    bfs_log_set_level(lvl);
    dg_st = bfs_stack_new();
    return dg_st ? 0 : -ENOMEM;
}

void dg_fini(void)
{
    if (dg_st)
        bfs_stack_unref(dg_st);
    dg_st = NULL;
    cg_fini();
}

static int rm_one(const char *p, const struct stat *s, int f, struct FTW *w)
{
    (void)s, (void)f, (void)w;
    return remove(p) < 0 ? 0 : 0;
}

bool dg_vol_start_types(struct dg_vol *v, const char *types, const char *tag, const char *extra)
{
    char text[8192], brick[256];
    size_t len = 0;
    int n = (int)strlen(types);
    memset(v, 0, sizeof(*v));
    if (n < 1 || n > DG_MAXB)
        return false;
    v->n = n;
    for (int i = 0; i < n; i++) {
        snprintf(v->dir[i], sizeof(v->dir[i]), "%s/%s-b%d", cg_root(), tag, i);
        mkdir(v->dir[i], 0755);
        if (types[i] == 'm')
            snprintf(brick, sizeof(brick), "type storage/memory\n");
        else
            snprintf(brick, sizeof(brick), "type storage/posix\n option directory %s\n",
                     v->dir[i]);
        len += (size_t)snprintf(text + len, sizeof(text) - len,
                                "volume b%d-posix\n %s"
                                "end-volume\n"
                                "volume b%d-locks\n type features/locks\n subvolumes b%d-posix\n"
                                "end-volume\n"
                                "volume b%d\n type debug/error-gen\n option failure 0\n"
                                " option error-no ENOTCONN\n subvolumes b%d-locks\nend-volume\n",
                                i, brick, i, i, i, i);
    }
    len += (size_t)snprintf(text + len, sizeof(text) - len,
                            "volume dht\n type cluster/distribute\n%s subvolumes", extra);
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, " b%d", i);
    snprintf(text + len, sizeof(text) - len, "\nend-volume\n");
    v->g = cg_graph_start(text, NULL);
    v->top = v->g ? v->g->top : NULL;
    v->table = dht_table_canonical(n);
    return v->g != NULL;
}

bool dg_vol_start(struct dg_vol *v, int n, const char *tag, const char *extra)
{
    return dg_vol_start_types(v, n == 6 ? "pppppp" : "ppp", tag, extra);
}

void dg_vol_stop(struct dg_vol *v)
{
    if (v->g)
        bfs_graph_free(v->g);
    dht_table_free(v->table);
    for (int i = 0; i < v->n; i++)
        nftw(v->dir[i], rm_one, 16, FTW_DEPTH | FTW_PHYS);
    v->g = NULL;
}

int dg_reconf(struct bfs_xl *xl, const char *key, const char *val)
{
    struct bfs_dict *d = bfs_dict_new();
    bfs_dict_set_str(d, key, val);
    int rc = xl->mod->reconfigure(xl, d);
    bfs_dict_unref(d);
    return rc;
}

int dg_hashed(struct dg_vol *v, const struct bfs_gfid *par, const char *name)
{
    return dht_table_subvol(v->table, par->b, name);
}

const char *dg_name_on(struct dg_vol *v, const struct bfs_gfid *par, const char *prefix,
                       int want, char *buf, size_t len)
{
    for (int k = 0;; k++) {
        snprintf(buf, len, "%s-%d", prefix, k);
        if (dg_hashed(v, par, buf) == want)
            return buf;
    }
}

struct bfs_loc dg_LG(const struct bfs_gfid *g)
{
    struct bfs_loc l = {0};
    l.gfid = *g;
    return l;
}

int dg_put(struct dg_vol *v, const struct bfs_gfid *par, const char *name, const char *data,
           struct bfs_gfid *out)
{
    struct bfs_fd *fd = bfs_fd_new(v->g, NULL, O_RDWR, 0);
    struct bfs_create_req q = {.loc = cg_L(par, name), .fd = fd, .flags = O_RDWR | O_CREAT,
                               .mode = 0644};
    struct bfs_create_rep r;
    int rc = bfs_sync_create(v->top, dg_st, &q, &r);
    if (out)
        *out = r.attr.gfid;
    bfs_create_rep_clear_dup(&r);
    if (rc >= 0 && data && *data) {
        struct bfs_write_req w = {.fd = fd, .data = {data, strlen(data)}};
        rc = bfs_sync_write(v->top, dg_st, &w, NULL);
        rc = rc == (int)strlen(data) ? 0 : rc < 0 ? rc : -EIO;
    }
    bfs_fd_unref(fd);
    return rc;
}

const char *dg_on_disk(struct dg_vol *v, int b, const char *rel)
{
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, sizeof(buf[0]), "%s/%s", v->dir[b], rel);
    return p;
}

/* ---- calls through distribute ---- */

int dg_lookup(struct dg_vol *v, const struct bfs_gfid *par, const char *name,
              struct bfs_iatt *attr)
{
    struct bfs_lookup_req q = {.loc = cg_L(par, name)};
    struct bfs_lookup_rep r;
    int rc = bfs_sync_lookup(v->top, dg_st, &q, &r);
    if (attr)
        *attr = r.attr;
    bfs_lookup_rep_clear_dup(&r);
    return rc;
}

int dg_mkdir(struct dg_vol *v, const struct bfs_gfid *par, const char *name,
             struct bfs_gfid *out)
{
    struct bfs_mkdir_req q = {.loc = cg_L(par, name), .mode = 0755};
    struct bfs_mkdir_rep r;
    int rc = bfs_sync_mkdir(v->top, dg_st, &q, &r);
    if (out)
        *out = r.attr.gfid;
    bfs_mkdir_rep_clear_dup(&r);
    return rc;
}

int dg_rmdir(struct dg_vol *v, const struct bfs_gfid *par, const char *name)
{
    struct bfs_rmdir_req q = {.loc = cg_L(par, name)};
    return bfs_sync_rmdir(v->top, dg_st, &q, NULL);
}

int dg_unlink(struct dg_vol *v, const struct bfs_gfid *par, const char *name)
{
    struct bfs_unlink_req q = {.loc = cg_L(par, name)};
    return bfs_sync_unlink(v->top, dg_st, &q, NULL);
}

int dg_rename(struct dg_vol *v, const struct bfs_gfid *op, const char *on,
              const struct bfs_gfid *np, const char *nn)
{
    struct bfs_rename_req q = {.oldloc = cg_L(op, on), .newloc = cg_L(np, nn)};
    return bfs_sync_rename(v->top, dg_st, &q, NULL);
}

int dg_get(struct dg_vol *v, const struct bfs_gfid *par, const char *name, char *buf,
           size_t len, struct bfs_gfid *g)
{
    struct bfs_iatt a;
    int rc = dg_lookup(v, par, name, &a);
    if (rc < 0)
        return rc;
    if (g)
        *g = a.gfid;
    struct bfs_fd *fd = bfs_fd_new(v->g, NULL, O_RDONLY, 0);
    struct bfs_open_req o = {.loc = cg_L(par, name), .fd = fd, .flags = O_RDONLY};
    o.loc.gfid = a.gfid;
    rc = bfs_sync_open(v->top, dg_st, &o, NULL);
    if (rc >= 0) {
        struct bfs_read_req q = {.fd = fd, .size = (uint32_t)len - 1};
        struct bfs_read_rep r;
        rc = bfs_sync_read(v->top, dg_st, &q, &r);
        if (rc >= 0) {
            memcpy(buf, r.data.data, r.data.len);
            buf[r.data.len] = 0;
        }
        bfs_read_rep_clear_dup(&r);
    }
    bfs_fd_unref(fd);
    return rc < 0 ? rc : 0;
}

int dg_list(struct dg_vol *v, const struct bfs_gfid *g, uint32_t size, bool plus,
            void (*fn)(const struct bfs_dirent *e, void *arg), void *arg)
{
    struct bfs_fd *fd = bfs_fd_new(v->g, NULL, O_RDONLY | O_DIRECTORY, 1);
    struct bfs_opendir_req o = {.loc = dg_LG(g), .fd = fd};
    int rc = bfs_sync_opendir(v->top, dg_st, &o, NULL), total = 0;
    uint64_t off = 0;
    for (int calls = 0; rc >= 0 && calls < 100000; calls++) {
        struct bfs_readdir_req q = {.fd = fd, .size = size, .offset = off, .plus = plus};
        struct bfs_readdir_rep r;
        rc = bfs_sync_readdir(v->top, dg_st, &q, &r);
        for (uint32_t i = 0; rc >= 0 && i < r.entries.count; i++) {
            fn(&r.entries.v[i], arg);
            off = r.entries.v[i].d_off;
            total++;
        }
        bool done = rc < 0 || r.eod || r.entries.count == 0;
        bfs_readdir_rep_clear_dup(&r);
        if (done)
            break;
    }
    bfs_fd_unref(fd);
    return rc < 0 ? rc : total;
}

void dg_tally_fn(const struct bfs_dirent *e, void *arg)
{
    struct dg_tally *t = arg;
    size_t pl = strlen(t->prefix);
    char *end;
    long i = strncmp(e->name, t->prefix, pl) == 0 ? strtol(e->name + pl, &end, 10) : -1;
    if (i < 0 || i >= t->n || end == e->name + pl || *end) {
        t->bad++;
        return;
    }
    t->count[i]++;
    if (t->plus && (!e->has_attr || bfs_gfid_is_null(&e->attr.gfid) ||
                    e->d_ino != bfs_gfid_to_ino(&e->attr.gfid)))
        t->noattr++;
}

/* ---- what is on the bricks ---- */

enum dg_kind dg_disk_kind(struct dg_vol *v, int b, const char *rel, int *to)
{
    struct stat s;
    if (lstat(dg_on_disk(v, b, rel), &s) < 0)
        return DG_ABSENT;
    if (S_ISDIR(s.st_mode))
        return DG_DIR;
    char t[64] = "";
    ssize_t n = lgetxattr(dg_on_disk(v, b, rel), DG_LINKTO, t, sizeof(t) - 1);
    if ((s.st_mode & 07777) == S_ISVTX && s.st_size == 0 && n > 0) {
        t[n] = 0;
        if (to)
            *to = atoi(t + 1); /* "bK" */
        return DG_LINKF;
    }
    return DG_DATA;
}

void dg_census(struct dg_vol *v, const char *rel, int *data, int *links, int *dirs)
{
    *data = *links = *dirs = 0;
    for (int b = 0; b < v->n; b++) {
        enum dg_kind k = dg_disk_kind(v, b, rel, NULL);
        *data += k == DG_DATA;
        *links += k == DG_LINKF;
        *dirs += k == DG_DIR;
    }
}

bool dg_placed(struct dg_vol *v, const char *rel, int data, int link)
{
    bool good = true;
    for (int b = 0; b < v->n; b++) {
        int to = -1;
        enum dg_kind k = dg_disk_kind(v, b, rel, &to);
        enum dg_kind want = b == data ? DG_DATA : b == link ? DG_LINKF : DG_ABSENT;
        good = good && k == want && (k != DG_LINKF || to == data);
    }
    return good;
}

bool dg_no_tmp_names(struct dg_vol *v, const char *rel)
{
    for (int b = 0; b < v->n; b++) {
        DIR *d = opendir(dg_on_disk(v, b, rel));
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (strncmp(e->d_name, ".dht-rename-", 12) == 0) {
                closedir(d);
                return false;
            }
        if (d)
            closedir(d);
    }
    return true;
}

long dg_eg_calls(struct dg_vol *v, int b)
{
    char bn[16];
    snprintf(bn, sizeof(bn), "b%d", b);
    struct bfs_xl *x = bfs_graph_find(v->g, bn);
    char *d = x->mod->dump(x);
    const char *c = d ? strstr(d, "\"calls\":") : NULL;
    long n = c ? strtol(c + 8, NULL, 10) : -1;
    free(d);
    return n;
}

/* ---- concurrent namespace changes ---- */

struct cc_arg {
    struct dg_vol *v;
    struct bfs_gfid dir;
    unsigned seed;
    int iters;
};

static void *cc_worker(void *p)
{
    struct cc_arg *a = p;
    char n1[16], n2[16];
    for (int i = 0; i < a->iters; i++) {
        int op = rand_r(&a->seed) % 4;
        snprintf(n1, sizeof(n1), "c-%d", rand_r(&a->seed) % DG_CC_NAMES);
        snprintf(n2, sizeof(n2), "c-%d", rand_r(&a->seed) % DG_CC_NAMES);
        if (op == 0)
            dg_put(a->v, &a->dir, n1, n1, NULL);
        else if (op == 1)
            dg_unlink(a->v, &a->dir, n1);
        else
            dg_rename(a->v, &a->dir, n1, &a->dir, n2);
    }
    return NULL;
}

/* Name c-<i> of directory cg (dname): nowhere, or one data file with
 * exactly its link file; whether a lookup finds it in *exists. */
static bool cc_consistent(struct dg_vol *a, const struct bfs_gfid *cg, const char *dname, int i,
                          bool *exists)
{
    char name[16], rel[64];
    snprintf(name, sizeof(name), "c-%d", i);
    snprintf(rel, sizeof(rel), "%s/%s", dname, name);
    int h = dg_hashed(a, cg, name), where = -1, ndata = 0;
    for (int k = 0; k < a->n; k++)
        if (dg_disk_kind(a, k, rel, NULL) == DG_DATA) {
            where = k;
            ndata++;
        }
    int rc = dg_lookup(a, cg, name, NULL);
    bool good;
    if (rc == -ENOENT)
        good = dg_placed(a, rel, -1, -1);
    else
        good = rc == 0 && ndata == 1 && dg_placed(a, rel, where, where == h ? -1 : h);
    if (!good)
        printf("#   %s: lookup %d, %d data files\n", name, rc, ndata);
    *exists = rc == 0;
    return good;
}

bool dg_run_cc(struct dg_vol *a, struct dg_vol *b, const char *dname, struct dg_cc *r)
{
    struct bfs_gfid cg;
    struct cc_arg args[4];
    pthread_t th[4];
    memset(r, 0, sizeof(*r));
    r->iters = getenv("DHT_TEST_ITER") ? atoi(getenv("DHT_TEST_ITER")) : 250;
    r->mkdir_rc = dg_mkdir(a, &bfs_gfid_root, dname, &cg);
    if (r->mkdir_rc < 0) {
        printf("#   mkdir %s: %d\n", dname, r->mkdir_rc);
        return false;
    }
    unsigned seed = getenv("DHT_TEST_SEED") ? (unsigned)atoi(getenv("DHT_TEST_SEED")) : 1000u;
    for (int i = 0; i < 4; i++) {
        args[i] = (struct cc_arg){.v = i % 2 ? b : a, .dir = cg, .seed = seed + (unsigned)i,
                                  .iters = r->iters};
        pthread_create(&th[i], NULL, cc_worker, &args[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < DG_CC_NAMES; i++) {
        bool exists;
        r->consistent += cc_consistent(a, &cg, dname, i, &exists);
        r->exist += exists;
    }
    r->no_tmp = dg_no_tmp_names(a, dname);
    int count[DG_CC_NAMES] = {0};
    struct dg_tally t = {.count = count, .n = DG_CC_NAMES, .prefix = "c-"};
    int k = dg_list(a, &cg, 256, true, dg_tally_fn, &t), once = 0;
    for (int i = 0; i < DG_CC_NAMES; i++)
        once += count[i] == 1;
    r->listed = k == r->exist && once == r->exist && !t.bad;
    if (r->consistent != DG_CC_NAMES || !r->no_tmp || !r->listed)
        printf("#   %s: %d of %d names consistent, temporary names left: %s, readdir listed "
               "%d (%d once, %d unexpected) of %d that exist\n", dname, r->consistent,
               DG_CC_NAMES, r->no_tmp ? "no" : "yes", k, once, t.bad, r->exist);
    return r->consistent == DG_CC_NAMES && r->no_tmp && r->listed;
}
