/*
 * dht-graph.c — cluster/distribute over real bricks, in one process, for
 * the graph tests of distribute (test_distribute.c,
 * test_distribute_migrate.c); dht-graph.h says what each helper does.
 *
 * The process and the scratch root are cluster-graph.c's: dg_init makes
 * them, dg_fini removes them. A struct dg_vol lives from dg_vol_start to
 * dg_vol_stop, which also empties its brick folders so that the next
 * volume of the program starts from nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
