/*
 * volgen.c — volfiles from a volume document (docs/design/management.md,
 * "Volfiles"). The graphs:
 *
 *   brick VOL-brick-N: storage/posix -> features/index -> features/locks
 *                      -> features/upcall -> debug/io-stats (named VOL-brick-N,
 *                      what clients ask for) -> protocol/server
 *   client:            protocol/client x N -> cluster/distribute (N > 1)
 *                      -> [performance/md-cache] -> [performance/write-behind]
 *                      -> debug/io-stats (named VOL)
 *   replicated client: protocol/client x N -> cluster/replicate per set of
 *                      `replica` consecutive bricks (VOL-replicate-S, with
 *                      arbiter-count 1 when the last of each set is an
 *                      arbiter) -> cluster/distribute (more than one set)
 *                      -> debug/io-stats (named VOL)
 *   dispersed client:  protocol/client x N -> cluster/disperse per set of
 *                      `disperse` consecutive bricks (VOL-disperse-S, option
 *                      redundancy R; the translator defaults the rest)
 *                      -> cluster/distribute (more than one set)
 *                      -> [performance/md-cache] -> debug/io-stats (named VOL)
 *
 * performance/write-behind (VOL-write-behind) and performance/md-cache
 * (VOL-md-cache) are in the graphs mounts fetch (bfs_op_client_volfile),
 * write-behind over md-cache (docs/design/write-behind.md), not in the
 * client.vol and shd.vol written for brickfsd's own daemons: the self-heal
 * daemon and rebalance change files below them by design, want every answer
 * from the bricks and every write done when it is answered. Volume options
 * performance.write-behind off and performance.md-cache off leave them out.
 * md-cache keeps the translator's default timeout (60 s) on every volume
 * type unless performance.md-cache-timeout is set: the changes below it are
 * invalidated exactly (replicate's and disperse's changelog xattrops and
 * heals: the bricks' upcall tells the other clients, the cluster
 * translator this one); on distribute, a directory heal's merged times
 * follow a brick's return, which empties md-cache
 * (docs/design/cache-invalidation.md, "Defaults").
 *
 * shd.vol, the self-heal daemon's graph, is client.vol with two options
 * written over whatever the volume sets (docs/design/performance-notes.md,
 * note 38): each protocol/client has client.invalidations off, so the
 * bricks send the daemon none of the cache invalidations of every change
 * the mounts make (it woke six times per file created on replica 3 for
 * them), and each cluster/replicate has cluster.inode-memory 0, the only
 * thing in that graph an invalidation corrects (replicate-memory.c); the
 * rest of what the daemon keeps is the live inodes' contexts, which no
 * invalidation touches, and a heal decides under its locks from what the
 * bricks say then (docs/design/cache-invalidation.md, "The self-heal
 * daemon takes none").
 *
 * Client volfiles name no brick port: each protocol/client asks brickfsd
 * (mgmt-server, mgmt-volume) where its brick listens before every connect,
 * so a brick that moved port is found again and a moved port does not
 * change the text (docs/design/graph-switch.md).
 *
 * A volume option set with `volume set` goes to every translator of these
 * graphs whose descriptor declares it. Returned texts are malloc'd.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/options.h"
#include "mgmt/mgmt.h"

#define MDC_TYPE "performance/md-cache"
#define MDC_OPT_ON "performance.md-cache"
#define WB_TYPE "performance/write-behind"
#define WB_OPT_ON "performance.write-behind"
#define SHD_CLIENT_OPT "client.invalidations"
#define SHD_AFR_OPT "cluster.inode-memory"

struct buf {
    char *p;
    size_t len, cap;
    bool oom;
};

__attribute__((format(printf, 2, 3))) static void put(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        size_t room = b->cap - b->len;
        va_start(ap, fmt);
        int n = b->p ? vsnprintf(b->p + b->len, room, fmt, ap) : -1;
        va_end(ap);
        if (n >= 0 && (size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t ncap = b->cap ? b->cap * 2 : 1024;
        while (n >= 0 && ncap < b->len + (size_t)n + 1)
            ncap *= 2;
        char *np = realloc(b->p, ncap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
}

static char *finish(struct buf *b)
{
    if (b->oom) {
        free(b->p);
        return NULL;
    }
    return b->p;
}

/* The set options that translator type declares, but skip (NULL: none),
 * which the caller writes itself. */
static void put_set_opts_but(struct bfs_mgmt *m, struct buf *b, const struct bfs_volume *v,
                             const char *type, const char *skip)
{
    for (int i = 0; i < v->nopts; i++)
        if (bfs_catalog_xlator_opt(m->catalog, type, v->opts[i].key) &&
            !(skip && strcmp(skip, v->opts[i].key) == 0))
            put(b, "    option %s %s\n", v->opts[i].key, v->opts[i].value);
}

static void put_set_opts(struct bfs_mgmt *m, struct buf *b, const struct bfs_volume *v,
                         const char *type)
{
    put_set_opts_but(m, b, v, type, NULL);
}

static void put_xl(struct bfs_mgmt *m, struct buf *b, const struct bfs_volume *v,
                   const char *name, const char *type, const char *sub)
{
    put(b, "volume %s\n    type %s\n", name, type);
    put_set_opts(m, b, v, type);
    if (sub)
        put(b, "    subvolumes %s\n", sub);
    put(b, "end-volume\n\n");
}

char *bfs_volgen_brick(struct bfs_mgmt *m, const struct bfs_volume *v, int idx)
{
    struct buf b = {0};
    char bn[128], n1[160], n2[160];
    const struct bfs_vbrick *br = &v->bricks[idx];
    bfs_brick_name(v, idx, bn, sizeof(bn));
    put(&b, "# brick %s of volume %s: %s:%s on port %d\n", bn, v->name, br->host, br->path,
        br->port);
    put(&b, "# generated by brickfsd from the volume definition; edits are overwritten\n\n");
    snprintf(n1, sizeof(n1), "%s-posix", bn);
    put(&b, "volume %s\n    type storage/posix\n    option directory %s\n", n1, br->path);
    put(&b, "    option brick-name %s:%s\n", br->host, br->path);
    put_set_opts(m, &b, v, "storage/posix");
    put(&b, "end-volume\n\n");
    /* the pending-heal index sits right on the storage (self-heal-daemon.md) */
    snprintf(n2, sizeof(n2), "%s-index", bn);
    put_xl(m, &b, v, n2, "features/index", n1);
    snprintf(n1, sizeof(n1), "%s-locks", bn);
    put_xl(m, &b, v, n1, "features/locks", n2);
    /* invalidations to the other clients' md-cache (cache-invalidation.md) */
    snprintf(n2, sizeof(n2), "%s-upcall", bn);
    put_xl(m, &b, v, n2, "features/upcall", n1);
    put_xl(m, &b, v, bn, "debug/io-stats", n2);
    put(&b, "volume %s-server\n    type protocol/server\n", bn);
    put(&b, "    option transport.listen-address %s\n", bfs_brick_listen_addr(br->host));
    put(&b, "    option transport.listen-port %d\n", br->port);
    put(&b, "    option transport.port-file %s/bricks/%s.port\n", m->run_dir, bn);
    put_set_opts(m, &b, v, "protocol/server");
    put(&b, "    subvolumes %s\nend-volume\n", bn);
    return finish(&b);
}

/* distribute's table options (docs/design/rebalance.md); nothing for a
 * volume that never changed its layout, so its text stays as it was. */
static void put_layout(struct buf *b, const struct bfs_volume *v)
{
    if (v->layout_table && v->layout_table[0])
        put(b, "    option layout %s\n", v->layout_table);
    if (v->layout_prev && v->layout_prev[0])
        put(b, "    option layout-previous %s\n", v->layout_prev);
    if (v->layout_version > 1)
        put(b, "    option layout-version %lld\n", (long long)v->layout_version);
}

/* md-cache over top_child, when the volume wants it: returns the name the
 * io-stats on top goes over. */
static const char *put_md_cache(struct bfs_mgmt *m, struct buf *b, const struct bfs_volume *v,
                                const char *top_child, char *name, size_t len)
{
    const char *on = bfs_volume_opt(v, MDC_OPT_ON);
    bool want = true;
    if (on)
        (void)bfs_parse_bool(on, &want);
    if (!want || !bfs_catalog_has_xlator(m->catalog, MDC_TYPE))
        return top_child;
    snprintf(name, len, "%s-md-cache", v->name);
    put(b, "volume %s\n    type %s\n", name, MDC_TYPE);
    put_set_opts(m, b, v, MDC_TYPE);
    put(b, "    subvolumes %s\nend-volume\n\n", top_child);
    return name;
}

/* write-behind over top_child (md-cache, when there is one), when the
 * volume wants it: returns the name io-stats goes over. Above md-cache so
 * that md-cache sees the writes' real answers when they come back (and
 * learns the size from them, as without write-behind); every call that
 * md-cache could answer from what it knows of a file waits in write-behind
 * for the file's writes first (docs/design/write-behind.md, "Place"). */
static const char *put_write_behind(struct bfs_mgmt *m, struct buf *b,
                                    const struct bfs_volume *v, const char *top_child,
                                    char *name, size_t len)
{
    const char *on = bfs_volume_opt(v, WB_OPT_ON);
    bool want = true;
    if (on)
        (void)bfs_parse_bool(on, &want);
    if (!want || !bfs_catalog_has_xlator(m->catalog, WB_TYPE))
        return top_child;
    snprintf(name, len, "%s-write-behind", v->name);
    put(b, "volume %s\n    type %s\n", name, WB_TYPE);
    put_set_opts(m, b, v, WB_TYPE);
    put(b, "    subvolumes %s\nend-volume\n\n", top_child);
    return name;
}

static char *gen_client(struct bfs_mgmt *m, const struct bfs_volume *v, const char *mgmt_addr,
                        bool mount, bool shd)
{
    struct buf b = {0}, subs = {0};
    put(&b, "# %s graph of volume %s (%s, %d brick%s)\n", shd ? "self-heal daemon" : "client",
        v->name, v->type, v->nbricks, v->nbricks == 1 ? "" : "s");
    put(&b, "# generated by brickfsd from the volume definition; edits are overwritten\n\n");
    put(&subs, "%s", "");
    for (int i = 0; i < v->nbricks; i++) {
        char bn[128];
        bfs_brick_name(v, i, bn, sizeof(bn));
        put(&b, "volume %s-client-%d\n    type protocol/client\n", v->name, v->bricks[i].id);
        put(&b, "    option remote-host %s\n", v->bricks[i].host);
        put(&b, "    option remote-subvolume %s\n", bn);
        put(&b, "    option mgmt-server %s\n", mgmt_addr ? mgmt_addr : m->listen);
        put(&b, "    option mgmt-volume %s\n", v->name);
        put_set_opts_but(m, &b, v, "protocol/client", shd ? SHD_CLIENT_OPT : NULL);
        if (shd)
            put(&b, "    option %s off\n", SHD_CLIENT_OPT);
        put(&b, "end-volume\n\n");
        put(&subs, "%s%s-client-%d", i ? " " : "", v->name, v->bricks[i].id);
    }
    /* Replica or disperse sets: each a cluster translator over its
     * clients; the distribute (if any) then spreads over the sets, not the
     * bricks. */
    int per = v->replica > 0 ? v->replica : v->disperse > 0 ? v->disperse : 1;
    int nsets = v->nbricks / per;
    const char *set_kind = v->replica > 0 ? "replicate" : v->disperse > 0 ? "disperse" : NULL;
    if (set_kind) {
        struct buf sets = {0};
        char set_type[32];
        snprintf(set_type, sizeof(set_type), "cluster/%s", set_kind);
        put(&sets, "%s", "");
        for (int s = 0; s < nsets; s++) {
            char sn[BFS_VOLNAME_MAX + 32];
            bfs_subvol_name(v, s, sn, sizeof(sn));
            put(&b, "volume %s\n    type %s\n", sn, set_type);
            if (v->arbiter)
                put(&b, "    option arbiter-count 1\n");
            if (v->disperse > 0)
                put(&b, "    option redundancy %d\n", v->redundancy);
            bool afr = shd && v->replica > 0;
            put_set_opts_but(m, &b, v, set_type, afr ? SHD_AFR_OPT : NULL);
            if (afr)
                put(&b, "    option %s 0\n", SHD_AFR_OPT);
            put(&b, "    subvolumes");
            for (int i = s * per; i < (s + 1) * per; i++)
                put(&b, " %s-client-%d", v->name, v->bricks[i].id);
            put(&b, "\nend-volume\n\n");
            put(&sets, "%s%s", s ? " " : "", sn);
        }
        free(finish(&subs));
        subs = sets;
    }
    char top_child[BFS_VOLNAME_MAX + 32];
    if (nsets > 1) {
        snprintf(top_child, sizeof(top_child), "%s-dht", v->name);
        put(&b, "volume %s\n    type cluster/distribute\n", top_child);
        put_set_opts(m, &b, v, "cluster/distribute");
        put_layout(&b, v);
        put(&b, "    subvolumes %s\nend-volume\n\n", subs.p);
    } else {
        bfs_subvol_name(v, 0, top_child, sizeof(top_child));
    }
    char wb[BFS_VOLNAME_MAX + 32], mdc[BFS_VOLNAME_MAX + 32];
    const char *under = top_child;
    if (mount)
        under = put_md_cache(m, &b, v, under, mdc, sizeof(mdc));
    if (mount)
        under = put_write_behind(m, &b, v, under, wb, sizeof(wb));
    put_xl(m, &b, v, v->name, "debug/io-stats", under);
    free(finish(&subs));
    return finish(&b);
}

char *bfs_volgen_client(struct bfs_mgmt *m, const struct bfs_volume *v, const char *mgmt_addr,
                        bool mount)
{
    return gen_client(m, v, mgmt_addr, mount, false);
}

char *bfs_volgen_shd(struct bfs_mgmt *m, const struct bfs_volume *v)
{
    return gen_client(m, v, NULL, false, true);
}

void bfs_volgen_brick_path(struct bfs_mgmt *m, const struct bfs_volume *v, int idx, char *buf,
                           size_t len)
{
    char bn[128];
    bfs_brick_name(v, idx, bn, sizeof(bn));
    snprintf(buf, len, "%s/volfiles/%s/%s.vol", m->state_dir, v->name, bn);
}

int bfs_volgen_write(struct bfs_mgmt *m, const struct bfs_volume *v, struct bfs_err *e)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof(dir), "%s/volfiles/%s", m->state_dir, v->name);
    int rc = bfs_mkdir_p(dir, 0755);
    if (rc < 0)
        return bfs_fail(e, 500, "cannot create %s: %s", dir, strerror(-rc));
    for (int i = 0; i <= v->nbricks; i++) {
        char *text = i < v->nbricks ? bfs_volgen_brick(m, v, i)
                                    : bfs_volgen_client(m, v, NULL, false);
        if (!text)
            return bfs_fail(e, 500, "out of memory");
        if (i < v->nbricks)
            bfs_volgen_brick_path(m, v, i, path, sizeof(path));
        else
            snprintf(path, sizeof(path), "%s/client.vol", dir);
        rc = bfs_write_file_atomic(path, text, strlen(text));
        free(text);
        if (rc < 0)
            return bfs_fail(e, 500, "cannot write volfile %s: %s", path, strerror(-rc));
    }
    return 0;
}

static int write_text(char *text, const char *path, struct bfs_err *e)
{
    if (!text)
        return bfs_fail(e, 500, "out of memory");
    int rc = bfs_write_file_atomic(path, text, strlen(text));
    free(text);
    if (rc < 0)
        return bfs_fail(e, 500, "cannot write volfile %s: %s", path, strerror(-rc));
    return 0;
}

int bfs_volgen_write_client(struct bfs_mgmt *m, const struct bfs_volume *v, const char *path,
                            struct bfs_err *e)
{
    return write_text(bfs_volgen_client(m, v, NULL, false), path, e);
}

int bfs_volgen_write_shd(struct bfs_mgmt *m, const struct bfs_volume *v, const char *path,
                         struct bfs_err *e)
{
    return write_text(bfs_volgen_shd(m, v), path, e);
}

void bfs_volgen_remove(struct bfs_mgmt *m, const char *volname)
{
    char dir[4096], path[4400];
    snprintf(dir, sizeof(dir), "%s/volfiles/%s", m->state_dir, volname);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    /* Only files we wrote live there: *.vol, and *.tmp after a crash. */
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if ((n > 4 && strcmp(de->d_name + n - 4, ".vol") == 0) ||
            (n > 4 && strcmp(de->d_name + n - 4, ".tmp") == 0)) {
            snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
            unlink(path);
        }
    }
    closedir(d);
    rmdir(dir);
}
