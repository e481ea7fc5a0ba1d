/*
 * brick-ops.c — add-brick, remove-brick and replace-brick
 * (docs/design/rebalance.md, "Commands and messages"). Each runs under
 * m->oplock + m->lock like the other changing operations, writes the
 * document (the desired state) and then acts on processes; the client
 * volfile changes with the document, and mounts switch graphs live.
 *
 * In a pool (docs/design/pool.md) a new brick's HOST may name another node,
 * which then owns and runs it (its "node", as volume create sets it); the
 * processes of bricks of other nodes are started and stopped by those
 * nodes when they see the new document (pool-sync.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "core/log.h"
#include "core/types.h"
#include "mgmt/layout.h"
#include "mgmt/mgmt.h"
#include "mgmt/pool.h"
#include "mgmt/supervisor.h"

static int save(struct bfs_mgmt *m, struct bfs_volume *v, struct bfs_err *e)
{
    int rc = bfs_volume_save(m, v);
    if (rc < 0)
        return bfs_fail(e, rc == -ENXIO ? 409 : 500, "cannot save volume %s: %s", v->name,
                        bfs_volume_save_strerror(rc));
    struct bfs_err ve;
    if (bfs_volgen_write(m, v, &ve) < 0)
        bfs_log(MGMT_LOG, BFS_LOG_WARNING, "volume %s: %s", v->name, ve.msg);
    return 0;
}

static void set_type(struct bfs_volume *v)
{
    int sets = bfs_volume_nsubvols(v);
    const char *t = v->replica == 0 ? "distribute" : sets > 1 ? "distributed-replicate"
                                                              : "replicate";
    char *n = strdup(t);
    if (n) {
        free(v->type);
        v->type = n;
    }
}

/* Nothing else may be changing the layout. */
static int idle_check(const struct bfs_volume *v, const char *what, struct bfs_err *e)
{
    if (strcmp(v->rebal.state, "running") == 0 || strcmp(v->rebal.state, "paused") == 0)
        return bfs_fail(e, 409, "volume %s: a rebalance is %s; %s waits until it completed "
                        "(volume rebalance %s status)", v->name, v->rebal.state, what, v->name);
    if (v->nremove)
        return bfs_fail(e, 409, "volume %s is draining bricks (remove-brick start); commit or "
                        "stop that first", v->name);
    if (v->layout_prev && v->layout_prev[0])
        return bfs_fail(e, 409, "volume %s: the files of the last layout change have not "
                        "moved yet; run 'volume rebalance %s start' first", v->name, v->name);
    return 0;
}

/* ---- add-brick ---- */

static int add_locked(struct bfs_mgmt *m, const char *name, const char **specs,
                      char **nodes, int n, int replica, bool force, struct json_object **out,
                      struct bfs_err *e)
{
    struct bfs_volume *v;
    if (bfs_volume_get(m, name, &v, e) < 0)
        return -1;
    int rc = -1, per = v->replica > 0 ? v->replica : 1, old = v->nbricks;
    struct bfs_vbrick *nb = calloc((size_t)n + 1, sizeof(*nb)), *grown;
    if (!nb) {
        bfs_fail(e, 500, "out of memory");
        goto out;
    }
    if (idle_check(v, "add-brick", e) < 0)
        goto out;
    if (replica && replica != v->replica) {
        bfs_fail(e, 501, v->replica ? "volume %s is replica %d; changing the replica count "
                 "with add-brick is not implemented" : "volume %s is not replicated "
                 "(replica %d asked); changing the replica count with add-brick is not "
                 "implemented", name, v->replica ? v->replica : replica);
        goto out;
    }
    if (n < 1 || n % per != 0) {
        bfs_fail(e, 400, per > 1 ? "add-brick on volume %s needs whole replica sets: %d bricks "
                 "is not a multiple of the replica count %d (give %d, %d, ... bricks)"
                 : "add-brick on volume %s needs at least one brick (%d given)", name, n, per,
                 per, 2 * per);
        goto out;
    }
    if (bfs_volume_nsubvols(v) + n / per > DHT_MAX_SUBVOLS) {
        bfs_fail(e, 400, "volume %s would have more than %d subvolumes", name, DHT_MAX_SUBVOLS);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        if (bfs_brick_parse(specs[i], &nb[i].host, &nb[i].path, e) < 0)
            goto out;
        if (nodes && nodes[i])
            snprintf(nb[i].node, sizeof(nb[i].node), "%s", nodes[i]);
    }
    if (bfs_bricks_check(m, nb, n, force, e) < 0)
        goto out;
    if (!bfs_catalog_has_xlator(m->catalog, "cluster/distribute")) {
        bfs_fail(e, 501, "add-brick needs the translator cluster/distribute, which is not built");
        goto out;
    }
    if (bfs_layout_pin(v) < 0 || !(grown = realloc(v->bricks, (size_t)(old + n) * sizeof(*grown)))) {
        bfs_fail(e, 500, "out of memory");
        goto out;
    }
    v->bricks = grown;
    for (int i = 0; i < n; i++) {
        v->bricks[old + i] = nb[i];
        v->bricks[old + i].id = v->next_brick_id++;
        nb[i].host = nb[i].path = NULL;
    }
    v->nbricks = old + n;
    set_type(v);
    if (bfs_ports_assign(m, v, e) < 0 || save(m, v, e) < 0)
        goto out;
    struct bfs_volume fresh = *v; /* a view of the new bricks only */
    fresh.bricks = v->bricks + old;
    fresh.nbricks = n;
    if (bfs_bricks_mark(&fresh, e) < 0) {
        bfs_log(MGMT_LOG, BFS_LOG_ERROR, "volume %s: add-brick: %s", name, e->msg);
        goto out; /* the bricks are in the document: start force / remove-brick */
    }
    if (v->status == BFS_VOL_STARTED && bfs_sup_start_volume(m, v, e) < 0)
        goto out;
    bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s: %d brick%s added (%d now); run 'volume "
            "rebalance %s start' to use them", name, n, n == 1 ? "" : "s", v->nbricks, name);
    *out = bfs_volume_to_json(v);
    rc = 0;
out:
    for (int i = 0; nb && i < n; i++) {
        free(nb[i].host);
        free(nb[i].path);
    }
    free(nb);
    bfs_volume_free(v);
    return rc;
}

int bfs_op_add_brick(struct bfs_mgmt *m, const char *name, const char **bricks, int n,
                     int replica, bool force, struct json_object **out, struct bfs_err *e)
{
    char **specs = NULL, **nodes = NULL;
    /* in a pool, a brick HOST may name another node: it owns that brick */
    if (bfs_pool_enabled(m) && n > 0 && bfs_pool_owners(m, bricks, n, &specs, &nodes, e) < 0)
        return -1;
    pthread_mutex_lock(&m->oplock);
    pthread_mutex_lock(&m->lock);
    int rc = add_locked(m, name, specs ? (const char **)specs : bricks, nodes, n, replica,
                        force, out, e);
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_unlock(&m->oplock);
    bfs_pool_owners_free(specs, nodes, n);
    return rc;
}

/* ---- remove-brick ---- */

/* Positions of the named bricks in v (sorted), or -1 with e. */
static int find_bricks(const struct bfs_volume *v, const char **specs, int n, int *idx,
                       struct bfs_err *e)
{
    for (int i = 0; i < n; i++) {
        char *host, *path;
        if (bfs_brick_parse(specs[i], &host, &path, e) < 0)
            return -1;
        idx[i] = -1;
        for (int b = 0; b < v->nbricks; b++)
            if (strcmp(v->bricks[b].path, path) == 0 &&
                (strcmp(v->bricks[b].host, host) == 0 ||
                 (strcmp(host, "localhost") == 0 && strcmp(v->bricks[b].host, "127.0.0.1") == 0)))
                idx[i] = b;
        free(host);
        free(path);
        if (idx[i] < 0)
            return bfs_fail(e, 400, "%s is not a brick of volume %s", specs[i], v->name);
        for (int j = 0; j < i; j++)
            if (idx[j] == idx[i])
                return bfs_fail(e, 400, "brick %s is named twice", specs[i]);
    }
    for (int i = 1; i < n; i++) /* insertion sort: a few bricks */
        for (int j = i; j > 0 && idx[j - 1] > idx[j]; j--) {
            int t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    return 0;
}

/* Regular files that are not link files under dir (brickfs's folder skipped). */
static long count_files(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    long n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
            (depth == 0 && strcmp(de->d_name, ".brickfs") == 0))
            continue;
        char p[4096];
        struct stat st;
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        if (lstat(p, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode) && depth < 64)
            n += count_files(p, depth + 1);
        else if (!(S_ISREG(st.st_mode) && (st.st_mode & 07777) == S_ISVTX && st.st_size == 0))
            n++; /* data files, symlinks, special files: all must be gone */
    }
    closedir(d);
    return n;
}

static struct json_object *remove_status(struct bfs_mgmt *m, const struct bfs_volume *v)
{
    struct json_object *j = bfs_rebal_status_json(m, v), *arr = json_object_new_array();
    for (int i = 0; i < v->nremove; i++)
        for (int b = 0; b < v->nbricks; b++)
            if (v->bricks[b].id == v->remove_ids[i]) {
                struct json_object *o = json_object_new_object();
                char bn[160];
                bfs_brick_name(v, b, bn, sizeof(bn));
                json_object_object_add(o, "name", json_object_new_string(bn));
                json_object_object_add(o, "host", json_object_new_string(v->bricks[b].host));
                json_object_object_add(o, "path", json_object_new_string(v->bricks[b].path));
                json_object_object_add(o, "files_left",
                                       json_object_new_int64(count_files(v->bricks[b].path, 0)));
                json_object_array_add(arr, o);
            }
    json_object_object_add(j, "leaving", arr);
    return j;
}

static int remove_start(struct bfs_mgmt *m, struct bfs_volume *v, const int *idx, int n,
                        struct bfs_err *e)
{
    int per = v->replica > 0 ? v->replica : 1;
    if (idle_check(v, "remove-brick start", e) < 0)
        return -1;
    if (v->status != BFS_VOL_STARTED)
        return bfs_fail(e, 409, "volume %s is not started: the drain needs its bricks", v->name);
    if (n % per != 0)
        return bfs_fail(e, 400, "remove-brick on volume %s takes whole replica sets: %d bricks "
                        "is not a multiple of %d", v->name, n, per);
    for (int i = 0; i < n; i += per)
        for (int k = 0; k < per; k++)
            if (idx[i + k] != idx[i] - idx[i] % per + k || idx[i] % per != 0)
                return bfs_fail(e, 400, "remove-brick on volume %s takes whole replica sets: "
                                "%s:%s is not with the rest of its set", v->name,
                                v->bricks[idx[i + k]].host, v->bricks[idx[i + k]].path);
    if (n >= v->nbricks)
        return bfs_fail(e, 400, "remove-brick would leave volume %s without bricks (delete the "
                        "volume instead)", v->name);
    v->remove_ids = calloc((size_t)n, sizeof(int));
    if (!v->remove_ids)
        return bfs_fail(e, 500, "out of memory");
    for (int i = 0; i < n; i++)
        v->remove_ids[v->nremove++] = v->bricks[idx[i]].id;
    uint64_t w[DHT_MAX_SUBVOLS];
    bfs_layout_weights(v, w);
    if (bfs_layout_fix(v, w, e) < 0)
        return -1;
    return bfs__rebal_begin(m, v, "remove", e);
}

static int remove_commit(struct bfs_mgmt *m, struct bfs_volume *v, const int *idx, int n,
                         struct bfs_err *e)
{
    int per = v->replica > 0 ? v->replica : 1;
    if (!v->nremove)
        return bfs_fail(e, 409, "volume %s: no remove-brick was started ('volume remove-brick "
                        "%s BRICK... start' drains the bricks first)", v->name, v->name);
    bool same = n == v->nremove;
    for (int i = 0; same && i < n; i++)
        same = v->bricks[idx[i]].id == v->remove_ids[i];
    if (!same)
        return bfs_fail(e, 400, "volume %s: commit names other bricks than remove-brick start "
                        "did", v->name);
    if (strcmp(v->rebal.kind, "remove") != 0 || strcmp(v->rebal.state, "completed") != 0)
        return bfs_fail(e, 409, "volume %s: the drain of the leaving bricks is %s; commit waits "
                        "until it completed (volume remove-brick %s ... status)", v->name,
                        strcmp(v->rebal.state, "running") == 0 ? "in progress" : v->rebal.state,
                        v->name);
    for (int i = 0; i < n; i++) {
        long left = count_files(v->bricks[idx[i]].path, 0);
        if (left)
            return bfs_fail(e, 409, "%ld files are still on brick %s:%s: commit refused (volume "
                            "rebalance %s start moves them)", left, v->bricks[idx[i]].host,
                            v->bricks[idx[i]].path, v->name);
    }
    int subs[DHT_MAX_SUBVOLS], ns = 0;
    for (int i = 0; i < n; i += per)
        subs[ns++] = idx[i] / per;
    if (bfs_layout_drop(v, subs, ns, e) < 0)
        return -1;
    /* stop the leaving bricks, then drop them from the document */
    struct bfs_volume gone = *v;
    struct bfs_vbrick *left = calloc((size_t)n, sizeof(*left));
    if (!left)
        return bfs_fail(e, 500, "out of memory");
    for (int i = 0; i < n; i++) {
        /* another node's brick: its node stops it when it sees the document */
        struct bproc *p = bfs_pool_brick_is_mine(m, v, idx[i]) ? bfs__sup_get(m, v, idx[i])
                                                                : NULL;
        struct bfs_err ignore;
        if (p)
            bfs__sup_stop(m, p, &ignore);
        left[i] = v->bricks[idx[i]];
    }
    int k = 0;
    for (int b = 0, j = 0; b < v->nbricks; b++) {
        if (j < n && idx[j] == b) {
            j++;
            continue;
        }
        v->bricks[k++] = v->bricks[b];
    }
    v->nbricks = k;
    free(v->remove_ids);
    v->remove_ids = NULL;
    v->nremove = 0;
    set_type(v);
    int rc = save(m, v, e);
    gone.bricks = left;
    gone.nbricks = n;
    if (rc == 0)
        bfs_bricks_unmark(&gone);
    for (int i = 0; i < n; i++) {
        free(left[i].host);
        free(left[i].path);
    }
    free(left);
    return rc;
}

static int remove_locked(struct bfs_mgmt *m, const char *name, const char **specs, int n,
                         const char *action, struct json_object **out, struct bfs_err *e)
{
    struct bfs_volume *v;
    if (bfs_volume_get(m, name, &v, e) < 0)
        return -1;
    int rc = -1;
    int *idx = calloc((size_t)n + 1, sizeof(int));
    if (!idx) {
        bfs_fail(e, 500, "out of memory");
        goto out;
    }
    if (n < 1 && strcmp(action, "status") != 0) {
        bfs_fail(e, 400, "remove-brick needs the bricks (HOST:/DIR ...)");
        goto out;
    }
    if (find_bricks(v, specs, n, idx, e) < 0)
        goto out;
    if (strcmp(action, "start") == 0) {
        rc = remove_start(m, v, idx, n, e);
    } else if (strcmp(action, "status") == 0) {
        rc = v->nremove ? 0 : bfs_fail(e, 409, "volume %s: no remove-brick in progress", name);
    } else if (strcmp(action, "stop") == 0) {
        if (!v->nremove) {
            rc = bfs_fail(e, 409, "volume %s: no remove-brick in progress", name);
            goto out;
        }
        if (strcmp(v->rebal.state, "running") == 0) {
            snprintf(v->rebal.state, sizeof(v->rebal.state), "stopped");
            if (save(m, v, e) < 0)
                goto out;
            bfs__rebal_stop(m, name);
        }
        free(v->remove_ids);
        v->remove_ids = NULL;
        v->nremove = 0;
        rc = save(m, v, e);
    } else if (strcmp(action, "commit") == 0) {
        rc = remove_commit(m, v, idx, n, e);
    } else {
        rc = bfs_fail(e, 400, "unknown remove-brick action '%s' (start, status, stop, commit)",
                      action);
    }
    if (rc == 0)
        *out = strcmp(action, "commit") == 0 ? bfs_volume_to_json(v) : remove_status(m, v);
out:
    free(idx);
    bfs_volume_free(v);
    return rc < 0 ? -1 : 0;
}

int bfs_op_remove_brick(struct bfs_mgmt *m, const char *name, const char **bricks, int n,
                        const char *action, struct json_object **out, struct bfs_err *e)
{
    bool change = !action || strcmp(action, "status") != 0;
    char **specs = NULL, **nodes = NULL; /* in a pool, NODE:/DIR names a node */
    if (bfs_pool_enabled(m) && n > 0 && bfs_pool_owners(m, bricks, n, &specs, &nodes, e) < 0)
        return -1;
    if (change)
        pthread_mutex_lock(&m->oplock);
    pthread_mutex_lock(&m->lock);
    int rc = remove_locked(m, name, specs ? (const char **)specs : bricks, n,
                           action ? action : "", out, e);
    pthread_mutex_unlock(&m->lock);
    if (change)
        pthread_mutex_unlock(&m->oplock);
    bfs_pool_owners_free(specs, nodes, n);
    return rc;
}

/* ---- replace-brick ---- */

/* The root's entry in the brick's features/index (index.c: an empty file
 * <brick>/.brickfs/indices/pending/<gfid>). The counters blame_new_brick sets
 * go behind the index's back, so without it the self-heal daemon, which heals
 * what the indices list (and crawls when a brick comes up), would never
 * see them, and only a lookup of the root through a mount would start the
 * heal (the kernel does not look the root up). Best effort: a mount's
 * lookup still heals. */
static void index_root(const char *brick)
{
    char g[BFS_GFID_STRLEN], p[4200];
    bfs_gfid_fmt(&bfs_gfid_root, g);
    snprintf(p, sizeof(p), "%s/.brickfs/indices", brick);
    (void)mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/.brickfs/indices/pending", brick);
    (void)mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/.brickfs/indices/pending/%s", brick, g);
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    else
        bfs_log(MGMT_LOG, BFS_LOG_WARNING, "cannot add the root to the index of %s: %s", brick,
                strerror(errno));
}

/* The other bricks of idx's replica set blame it for their whole root
 * (replicate's pending counters, `trusted.brickfs.afr.VOL-client-ID`,
 * [data, metadata, entry] big-endian): the first lookup of the root heals
 * its entries onto the new, empty brick, and each healed entry carries the
 * heal on down (docs/design/replicate.md "Heal"). GlusterFS's replace-brick
 * does the same. The bricks are local folders of this node. */
static int blame_new_brick(const struct bfs_volume *v, int idx, struct bfs_err *e)
{
    char key[BFS_VOLNAME_MAX + 64];
    uint8_t row[24] = {0};
    row[15] = 1; /* metadata */
    row[23] = 1; /* entry */
    snprintf(key, sizeof(key), "trusted.brickfs.afr.%s-client-%d", v->name, v->bricks[idx].id);
    int first = idx - idx % v->replica, set_ok = 0;
    for (int b = first; b < first + v->replica; b++) {
        if (b == idx)
            continue;
        if (setxattr(v->bricks[b].path, key, row, sizeof(row), 0) == 0) {
            set_ok++;
            index_root(v->bricks[b].path);
        } else
            bfs_log(MGMT_LOG, BFS_LOG_WARNING, "volume %s: cannot mark %s for heal of the new "
                    "brick: %s", v->name, v->bricks[b].path, strerror(errno));
    }
    return set_ok ? 0 : bfs_fail(e, 500, "volume %s: no brick of the replica set could be "
                                 "marked as the heal source of the new brick", v->name);
}

static int replace_locked(struct bfs_mgmt *m, const char *name, const char *olds,
                          const char *news, const char *node, bool force,
                          struct json_object **out, struct bfs_err *e)
{
    struct bfs_volume *v;
    if (bfs_volume_get(m, name, &v, e) < 0)
        return -1;
    int rc = -1, idx;
    struct bfs_vbrick nb = {0};
    if (v->replica == 0) {
        bfs_fail(e, 501, "replace-brick on volume %s: it is not replicated, so the new brick "
                 "could not be healed from anywhere; use add-brick and remove-brick", name);
        goto out;
    }
    if (!force) {
        bfs_fail(e, 400, "replace-brick takes 'commit force' (the new brick is healed from its "
                 "replica set after the switch)");
        goto out;
    }
    if (find_bricks(v, &olds, 1, &idx, e) < 0)
        goto out;
    if (bfs_brick_parse(news, &nb.host, &nb.path, e) < 0 ||
        bfs_bricks_check(m, &nb, 1, true, e) < 0)
        goto out;
    struct bfs_err ignore;
    if (bfs_pool_brick_is_mine(m, v, idx)) { /* another node's stops when it sees the change */
        struct bproc *p = bfs__sup_get(m, v, idx);
        if (p)
            bfs__sup_stop(m, p, &ignore);
    }
    struct bfs_vbrick old = v->bricks[idx];
    v->bricks[idx].host = nb.host;
    v->bricks[idx].path = nb.path;
    snprintf(v->bricks[idx].node, sizeof(v->bricks[idx].node), "%s", node ? node : "");
    v->bricks[idx].port = 0; /* a fresh port: clients reconnect through the port map */
    nb.host = nb.path = NULL;
    struct bfs_volume fresh = *v;
    fresh.bricks = v->bricks + idx;
    fresh.nbricks = 1;
    if (bfs_ports_assign(m, v, e) < 0 || save(m, v, e) < 0 || bfs_bricks_mark(&fresh, e) < 0) {
        free(old.host);
        free(old.path);
        goto out;
    }
    struct bfs_volume gone = *v;
    gone.bricks = &old;
    gone.nbricks = 1;
    bfs_bricks_unmark(&gone);
    if (blame_new_brick(v, idx, e) < 0) {
        free(old.host);
        free(old.path);
        goto out;
    }
    free(old.host);
    free(old.path);
    /* The self-heal daemon starts anew once the new brick runs: its first
     * crawl waits until every brick answered, then finds the root in the
     * indices (index_root). A daemon left running may never crawl: it
     * crawls when a brick comes up, but it polls that once a second and
     * its client is back on the new brick (same port map name) sooner. */
    char shd_name[160];
    snprintf(shd_name, sizeof(shd_name), "%s-shd", v->name);
    struct bproc *shd = bfs__sup_find(m, shd_name);
    if (shd && shd->state == BP_RUNNING)
        bfs__sup_stop(m, shd, &ignore);
    if (v->status == BFS_VOL_STARTED && bfs_sup_start_volume(m, v, e) < 0)
        goto out;
    if (v->status == BFS_VOL_STARTED)
        bfs_sup_shd_sync(m, v);
    bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s: brick %s replaced by %s:%s", name, olds,
            v->bricks[idx].host, v->bricks[idx].path);
    *out = bfs_volume_to_json(v);
    rc = 0;
out:
    free(nb.host);
    free(nb.path);
    bfs_volume_free(v);
    return rc;
}

int bfs_op_replace_brick(struct bfs_mgmt *m, const char *name, const char *old_brick,
                         const char *new_brick, bool force, struct json_object **out,
                         struct bfs_err *e)
{
    /* in a pool, NODE:/DIR names a node: [0] the old brick, [1] the new one */
    const char *both[2] = {old_brick, new_brick};
    char **specs = NULL, **nodes = NULL;
    if (bfs_pool_enabled(m) && bfs_pool_owners(m, both, 2, &specs, &nodes, e) < 0)
        return -1;
    pthread_mutex_lock(&m->oplock);
    pthread_mutex_lock(&m->lock);
    int rc = replace_locked(m, name, specs ? specs[0] : old_brick, specs ? specs[1] : new_brick,
                            nodes ? nodes[1] : NULL, force, out, e);
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_unlock(&m->oplock);
    bfs_pool_owners_free(specs, nodes, 2);
    return rc;
}
