/*
 * volume-ops.c — the volume operations behind the REST API: create, start,
 * stop, delete, info, list, status, and the options (set, get, reset,
 * help). Each takes m->lock for its whole run, reads the volume from the
 * store, and writes the desired state before acting on processes, so a
 * crash half-way is finished by the startup reconciliation. Results are
 * JSON objects owned by the caller; failures fill a struct bfs_err.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "core/log.h"
#include "core/options.h"
#include "mgmt/mgmt.h"
#include "mgmt/pool.h"

/* The volume type create asks for, from the counts and the optional
 * "type" field. Fills *type (a static string) or e. */
static int replica_check(struct bfs_mgmt *m, const struct bfs_volcreate_req *r, struct bfs_err *e)
{
    if (r->replica < 0 || r->arbiter < 0)
        return bfs_fail(e, 400, "replica and arbiter counts must be positive");
    if (r->arbiter > 0 && r->replica == 0)
        return bfs_fail(e, 400, "arbiter needs a replica count: replica 3 arbiter 1");
    if (r->replica == 0)
        return 0;
    if (r->replica != 2 && r->replica != 3)
        return bfs_fail(e, 400, "replica count %d is not supported (replica 2 or replica 3)",
                        r->replica);
    if (r->arbiter > 1)
        return bfs_fail(e, 400, "arbiter count %d is not supported (arbiter 1: the last brick "
                        "of each replica set)", r->arbiter);
    if (r->arbiter == 1 && r->replica != 3)
        return bfs_fail(e, 400, "arbiter 1 needs replica 3 (two data bricks and an arbiter), "
                        "not replica %d", r->replica);
    if (r->nbricks > 0 && r->nbricks % r->replica != 0)
        return bfs_fail(e, 400, "%d bricks is not a multiple of the replica count %d "
                        "(give %d, %d, ... bricks)", r->nbricks, r->replica, r->replica,
                        2 * r->replica);
    if (!bfs_catalog_has_xlator(m->catalog, "cluster/replicate"))
        return bfs_fail(e, 501, "a replicate volume needs the translator cluster/replicate, "
                        "which is not built");
    return 0;
}

/*
 * Disperse counts: "disperse N redundancy R" (or gluster's "disperse-data D
 * redundancy R", N = D + R) groups consecutive runs of N bricks into sets
 * that each survive the loss of any R bricks, storing N/(N-R) times the
 * data. Fills *n (0 when not dispersed) or e. The rules:
 *   - R >= 1: with no redundancy it is a distribute volume with extra work;
 *   - 2R < N: a write is complete on the N - R bricks that hold enough
 *     fragments to read it back; with N - R > N/2 those are a majority, so
 *     any two such sets of bricks overlap and two sides of a partition can
 *     never both complete conflicting writes (the same majority rule as
 *     replicate's quorum). R = N/2 would also store as much as replica 2;
 *   - N <= 32: the erasure code's limit (k + m <= 32 fragments, src/ec).
 */
static int disperse_check(const struct bfs_volcreate_req *r, int *n, struct bfs_err *e)
{
    *n = 0;
    if (r->disperse < 0 || r->disperse_data < 0 || r->redundancy < 0)
        return bfs_fail(e, 400, "disperse, disperse-data and redundancy counts must be positive");
    if (r->disperse == 0 && r->disperse_data == 0 && r->redundancy == 0)
        return 0;
    if (r->replica > 0 || r->arbiter > 0)
        return bfs_fail(e, 400, "a volume is either replicated or dispersed: replica and "
                        "disperse do not go together");
    if (r->disperse == 0 && r->disperse_data == 0)
        return bfs_fail(e, 400, "redundancy needs a disperse count: disperse N redundancy R");
    int nn = r->disperse > 0 ? r->disperse : r->disperse_data + r->redundancy;
    if (r->redundancy == 0)
        return bfs_fail(e, 400, "disperse %d needs a redundancy count: disperse %d redundancy R "
                        "(R bricks of each set may fail; 1 <= R and 2R < %d)", nn, nn, nn);
    if (r->disperse > 0 && r->disperse_data > 0 && r->disperse != r->disperse_data + r->redundancy)
        return bfs_fail(e, 400, "disperse %d is not disperse-data %d + redundancy %d",
                        r->disperse, r->disperse_data, r->redundancy);
    if (nn < 3)
        return bfs_fail(e, 400, "disperse count %d is too small: a disperse set needs at least "
                        "3 bricks (disperse 3 redundancy 1)", nn);
    if (nn > BFS_DISPERSE_MAX)
        return bfs_fail(e, 400, "disperse count %d is too large: at most %d bricks per disperse "
                        "set (the erasure code's limit)", nn, BFS_DISPERSE_MAX);
    if (2 * r->redundancy >= nn)
        return bfs_fail(e, 400, "redundancy %d is too large for disperse %d: it must be less "
                        "than half the set (at most %d), so that the %d bricks a write needs "
                        "are a majority", r->redundancy, nn, (nn - 1) / 2, nn - (nn - 1) / 2);
    if (r->nbricks > 0 && r->nbricks % nn != 0)
        return bfs_fail(e, 400, "%d bricks is not a multiple of the disperse count %d "
                        "(give %d, %d, ... bricks)", r->nbricks, nn, nn, 2 * nn);
    *n = nn;
    return 0;
}

/* The family of a volume type: 0 distribute, 1 replicated, 2 dispersed, -1 unknown. */
static int type_family(const char *type)
{
    static const char *const names[] = {"distribute", "replicate", "distributed-replicate",
                                        "disperse", "distributed-disperse"};
    static const int family[] = {0, 1, 1, 2, 2};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(type, names[i]) == 0)
            return family[i];
    return -1;
}

/* The volume type create asks for, from the counts and the optional
 * "type" field. Fills *out (a static string) and *disperse, or e. */
static int type_check(struct bfs_mgmt *m, const struct bfs_volcreate_req *r, const char **out,
                      int *disperse, struct bfs_err *e)
{
    const char *type = r->type; /* NULL: from the counts */
    if (type && type_family(type) < 0)
        return bfs_fail(e, 400, "unknown volume type '%s' (distribute, replicate, disperse)",
                        type);
    if (replica_check(m, r, e) < 0 || disperse_check(r, disperse, e) < 0)
        return -1;
    bool replicated = r->replica > 0, dispersed = *disperse > 0;
    int family = replicated ? 1 : dispersed ? 2 : 0;
    if (type && type_family(type) != family) {
        if (replicated || type_family(type) == 1)
            return bfs_fail(e, 400, replicated ? "volume type %s does not take a replica count"
                                               : "volume type %s needs a replica count "
                                                 "(replica 2 or replica 3)", type);
        return bfs_fail(e, 400, dispersed ? "volume type %s does not take a disperse count"
                                          : "volume type %s needs a disperse count (disperse N "
                                            "redundancy R)", type);
    }
    /* volgen writes "option redundancy": refuse rather than write a volfile
     * the translator would reject (or that a build without it cannot load) */
    if (dispersed && (!bfs_catalog_has_xlator(m->catalog, "cluster/disperse") ||
                      !bfs_catalog_xlator_opt(m->catalog, "cluster/disperse", "redundancy")))
        return bfs_fail(e, 501, "a disperse volume needs the translator cluster/disperse, "
                        "which is not built");
    int per = replicated ? r->replica : dispersed ? *disperse : 1;
    int sets = r->nbricks / per;
    const char *what = replicated ? "replica sets" : dispersed ? "disperse sets" : "bricks";
    if (sets > 1 && !bfs_catalog_has_xlator(m->catalog, "cluster/distribute"))
        return bfs_fail(e, 501, "a volume of %d %s needs the translator cluster/distribute, "
                        "which is not built", sets, what);
    if (replicated)
        *out = sets > 1 ? "distributed-replicate" : "replicate";
    else if (dispersed)
        *out = sets > 1 ? "distributed-disperse" : "disperse";
    else
        *out = "distribute";
    return 0;
}

static int build_volume(const struct bfs_volcreate_req *r, const char *type, int disperse,
                        struct bfs_volume **out, struct bfs_err *e)
{
    struct bfs_volume *v = calloc(1, sizeof(*v));
    if (!v || !(v->name = strdup(r->name)) || !(v->type = strdup(type)) ||
        !(v->bricks = calloc((size_t)r->nbricks + 1, sizeof(*v->bricks)))) {
        bfs_volume_free(v);
        return bfs_fail(e, 500, "out of memory");
    }
    v->replica = r->replica;
    v->arbiter = r->arbiter;
    v->disperse = disperse;
    v->redundancy = disperse > 0 ? r->redundancy : 0;
    for (int i = 0; i < r->nbricks; i++) {
        if (bfs_brick_parse(r->bricks[i], &v->bricks[i].host, &v->bricks[i].path, e) < 0) {
            bfs_volume_free(v);
            return -1;
        }
        if (r->nodes && r->nodes[i])
            snprintf(v->bricks[i].node, sizeof(v->bricks[i].node), "%s", r->nodes[i]);
        v->bricks[i].id = i;
        v->nbricks++;
    }
    v->next_brick_id = v->nbricks;
    v->layout_version = 1;
    bfs_uuid_generate(v->id);
    v->created = (int64_t)time(NULL);
    v->status = BFS_VOL_CREATED;
    *out = v;
    return 0;
}

static struct json_object *info_json(const struct bfs_volume *v)
{
    struct json_object *j = bfs_volume_to_json(v);
    json_object_object_add(j, "revision", json_object_new_int64((int64_t)v->rev));
    return j;
}

static int create_locked(struct bfs_mgmt *m, const struct bfs_volcreate_req *r,
                         struct json_object **out, struct bfs_err *e)
{
    struct bfs_volume *v = NULL, *old = NULL;
    const char *type = NULL;
    int disperse = 0;
    if (bfs_volname_check(r->name, e) < 0 || type_check(m, r, &type, &disperse, e) < 0)
        return -1;
    int rc = bfs_volume_load(m, r->name, &old);
    bfs_volume_free(old);
    if (rc == 0)
        return bfs_fail(e, 409, "volume %s already exists", r->name);
    if (r->nbricks < 1)
        return bfs_fail(e, 400, "a volume needs at least one brick (HOST:/DIR)");
    if (build_volume(r, type, disperse, &v, e) < 0)
        return -1;
    if (bfs_bricks_check(m, v->bricks, v->nbricks, r->force, e) < 0 ||
        bfs_ports_assign(m, v, e) < 0)
        goto fail;
    rc = bfs_volume_save(m, v);
    if (rc < 0) {
        bfs_fail(e, rc == -ESTALE || rc == -ENXIO ? 409 : 500, "cannot save volume %s: %s",
                 v->name, rc == -ESTALE ? "it was created meanwhile"
                                        : bfs_volume_save_strerror(rc));
        goto fail;
    }
    if (bfs_bricks_mark(v, e) < 0) {
        bfs_volume_remove(m, v);
        goto fail;
    }
    struct bfs_err ve;
    if (bfs_volgen_write(m, v, &ve) < 0)
        bfs_log(MGMT_LOG, BFS_LOG_WARNING, "volume %s: %s", v->name, ve.msg);
    bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s created (%d bricks)", v->name, v->nbricks);
    *out = info_json(v);
    bfs_volume_free(v);
    return 0;
fail:
    bfs_volume_free(v);
    return -1;
}

int bfs_op_create(struct bfs_mgmt *m, const struct bfs_volcreate_req *r, struct json_object **out,
                  struct bfs_err *e)
{
    pthread_mutex_lock(&m->oplock);
    pthread_mutex_lock(&m->lock);
    int rc = create_locked(m, r, out, e);
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_unlock(&m->oplock);
    return rc;
}

static int save_or_fail(struct bfs_mgmt *m, struct bfs_volume *v, struct bfs_err *e)
{
    int rc = bfs_volume_save(m, v);
    if (rc < 0)
        return bfs_fail(e, 500, "cannot save volume %s: %s", v->name, strerror(-rc));
    return 0;
}

/* Brick i of v as volume status shows it (m->lock held). */
static struct json_object *brick_json(struct bfs_mgmt *m, const struct bfs_volume *v, int i)
{
    struct bfs_brick_state st;
    char bn[160];
    if (bfs_pool_brick_is_mine(m, v, i))
        bfs_sup_brick_state(m, v, i, &st);
    else
        bfs_pool_brick_state(m, v, i, &st); /* another node's, as it published it */
    bfs_brick_name(v, i, bn, sizeof(bn));
    struct json_object *b = json_object_new_object();
    json_object_object_add(b, "name", json_object_new_string(bn));
    json_object_object_add(b, "host", json_object_new_string(v->bricks[i].host));
    json_object_object_add(b, "path", json_object_new_string(v->bricks[i].path));
    json_object_object_add(b, "port", json_object_new_int(v->bricks[i].port));
    json_object_object_add(b, "pid", json_object_new_int(st.pid));
    json_object_object_add(b, "online", json_object_new_boolean(st.online));
    json_object_object_add(b, "restarts", json_object_new_int(st.restarts));
    return b;
}

static struct json_object *status_json(struct bfs_mgmt *m, const struct bfs_volume *v)
{
    struct json_object *j = json_object_new_object(), *arr = json_object_new_array();
    json_object_object_add(j, "name", json_object_new_string(v->name));
    json_object_object_add(j, "status", json_object_new_string(bfs_vol_status_name(v->status)));
    for (int i = 0; i < v->nbricks; i++)
        json_object_array_add(arr, brick_json(m, v, i));
    json_object_object_add(j, "bricks", arr);
    if (v->replica > 0 || v->disperse > 0) {
        struct bfs_shd_state st;
        bfs_sup_shd_state(m, v, &st);
        struct json_object *d = json_object_new_object();
        json_object_object_add(d, "host", json_object_new_string("localhost"));
        json_object_object_add(d, "enabled", json_object_new_boolean(st.enabled));
        json_object_object_add(d, "pid", json_object_new_int(st.pid));
        json_object_object_add(d, "online", json_object_new_boolean(st.online));
        json_object_object_add(d, "restarts", json_object_new_int(st.restarts));
        json_object_object_add(j, "self_heal_daemon", d);
    }
    return j;
}

static int start_locked(struct bfs_mgmt *m, const char *name, bool force,
                        struct json_object **out, struct bfs_err *e)
{
    struct bfs_volume *v;
    if (bfs_volume_get(m, name, &v, e) < 0)
        return -1;
    int rc = 0;
    enum bfs_vol_status prev = v->status;
    if (v->status == BFS_VOL_STARTED && !force) {
        rc = bfs_fail(e, 409, "volume %s is already started ('volume start %s force' starts "
                      "bricks that are down)", name, name);
        goto out;
    }
    v->status = BFS_VOL_STARTED;
    if (prev != BFS_VOL_STARTED && (rc = save_or_fail(m, v, e)) < 0)
        goto out;
    rc = bfs_sup_start_volume(m, v, e);
    if (rc < 0 && prev != BFS_VOL_STARTED) {
        v->status = prev;
        struct bfs_err ignore;
        save_or_fail(m, v, &ignore);
    }
    if (rc == 0) {
        bfs_sup_shd_sync(m, v); /* after the bricks: it connects to them */
        bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s started%s", name, force ? " (force)" : "");
        *out = status_json(m, v);
    }
out:
    bfs_volume_free(v);
    return rc;
}

int bfs_op_start(struct bfs_mgmt *m, const char *name, bool force, struct json_object **out,
                 struct bfs_err *e)
{
    pthread_mutex_lock(&m->oplock);
    pthread_mutex_lock(&m->lock);
    int rc = start_locked(m, name, force, out, e);
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_unlock(&m->oplock);
    return rc;
}

static int stop_locked(struct bfs_mgmt *m, const char *name, struct json_object **out,
                       struct bfs_err *e)
{
    struct bfs_volume *v;
    if (bfs_volume_get(m, name, &v, e) < 0)
        return -1;
    int rc = 0;
    if (v->status != BFS_VOL_STARTED) {
        rc = bfs_fail(e, 409, "volume %s is not started (it is %s)", name,
                      bfs_vol_status_name(v->status));
        goto out;
    }
    v->status = BFS_VOL_STOPPED;
    bool rebalancing = strcmp(v->rebal.state, "running") == 0;
    if (rebalancing) /* it needs the bricks: paused, 'rebalance resume' after start */
        snprintf(v->rebal.state, sizeof(v->rebal.state), "paused");
    if ((rc = save_or_fail(m, v, e)) < 0)
        goto out;
    if (rebalancing)
        bfs__rebal_stop(m, name);
    if ((rc = bfs_sup_stop_volume(m, v, e)) < 0)
        goto out;
    bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s stopped", name);
    *out = status_json(m, v);
out:
    bfs_volume_free(v);
    return rc;
}

int bfs_op_stop(struct bfs_mgmt *m, const char *name, struct json_object **out,
                struct bfs_err *e)
{
    pthread_mutex_lock(&m->oplock);
    pthread_mutex_lock(&m->lock);
    int rc = stop_locked(m, name, out, e);
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_unlock(&m->oplock);
    return rc;
}

static int delete_locked(struct bfs_mgmt *m, const char *name, struct json_object **out,
                         struct bfs_err *e)
{
    struct bfs_volume *v;
    if (bfs_volume_get(m, name, &v, e) < 0)
        return -1;
    int rc = 0;
    if (v->status == BFS_VOL_STARTED) {
        rc = bfs_fail(e, 409, "volume %s is started; stop it first (brickfs volume stop %s)",
                      name, name);
        goto out;
    }
    if ((rc = bfs_sup_stop_volume(m, v, e)) < 0)
        goto out;
    rc = bfs_volume_remove(m, v);
    if (rc < 0) {
        rc = bfs_fail(e, 500, "cannot remove volume %s from the store: %s", name,
                      strerror(-rc));
        goto out;
    }
    bfs_bricks_unmark(v);
    bfs_volgen_remove(m, name);
    char statefile[4200];
    bfs_shd_paths(m, name, NULL, statefile, NULL, NULL, sizeof(statefile));
    unlink(statefile);
    bfs__rebal_forget(m, name);
    bfs_sup_forget(m, name);
    bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s deleted", name);
    *out = json_object_new_object();
    json_object_object_add(*out, "deleted", json_object_new_string(name));
out:
    bfs_volume_free(v);
    return rc;
}

int bfs_op_delete(struct bfs_mgmt *m, const char *name, struct json_object **out,
                  struct bfs_err *e)
{
    pthread_mutex_lock(&m->oplock);
    pthread_mutex_lock(&m->lock);
    int rc = delete_locked(m, name, out, e);
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_unlock(&m->oplock);
    return rc;
}

int bfs_op_info(struct bfs_mgmt *m, const char *name, struct json_object **out,
                struct bfs_err *e)
{
    struct bfs_volume *v;
    pthread_mutex_lock(&m->lock);
    int rc = bfs_volume_get(m, name, &v, e);
    pthread_mutex_unlock(&m->lock);
    if (rc < 0)
        return -1;
    *out = info_json(v);
    bfs_volume_free(v);
    return 0;
}

/* {"volumes": [...]} of info (status false) or status (true) objects. */
static int all_volumes(struct bfs_mgmt *m, bool status, struct json_object **out,
                       struct bfs_err *e)
{
    struct bfs_volume **vols;
    int n;
    pthread_mutex_lock(&m->lock);
    int rc = bfs_volume_list(m, &vols, &n);
    if (rc < 0) {
        pthread_mutex_unlock(&m->lock);
        return bfs_fail(e, 500, "cannot list volumes: %s", strerror(-rc));
    }
    struct json_object *arr = json_object_new_array();
    for (int i = 0; i < n; i++)
        json_object_array_add(arr, status ? status_json(m, vols[i]) : info_json(vols[i]));
    pthread_mutex_unlock(&m->lock);
    bfs_volume_list_free(vols, n);
    *out = json_object_new_object();
    json_object_object_add(*out, "volumes", arr);
    return 0;
}

int bfs_op_list(struct bfs_mgmt *m, struct json_object **out, struct bfs_err *e)
{
    return all_volumes(m, false, out, e);
}

int bfs_op_status(struct bfs_mgmt *m, const char *name, struct json_object **out,
                  struct bfs_err *e)
{
    if (!name)
        return all_volumes(m, true, out, e);
    struct bfs_volume *v = NULL;
    pthread_mutex_lock(&m->lock);
    int rc = bfs_volume_get(m, name, &v, e);
    if (rc == 0)
        *out = status_json(m, v);
    pthread_mutex_unlock(&m->lock);
    bfs_volume_free(v);
    return rc;
}

int bfs_op_client_volfile(struct bfs_mgmt *m, const char *name, const char *mgmt_addr,
                          char **text, uint64_t *rev, struct bfs_err *e)
{
    struct bfs_volume *v = NULL;
    pthread_mutex_lock(&m->lock);
    int rc = bfs_volume_get(m, name, &v, e);
    if (rc == 0) {
        *text = bfs_volgen_client(m, v, mgmt_addr, true);
        *rev = v->rev;
        if (!*text)
            rc = bfs_fail(e, 500, "out of memory");
    }
    pthread_mutex_unlock(&m->lock);
    bfs_volume_free(v);
    return rc;
}

int bfs_op_brick_status(struct bfs_mgmt *m, const char *name, const char *brick,
                        struct json_object **out, struct bfs_err *e)
{
    struct bfs_volume *v = NULL;
    pthread_mutex_lock(&m->lock);
    int rc = bfs_volume_get(m, name, &v, e);
    for (int i = 0; rc == 0 && i <= v->nbricks; i++) {
        char bn[160];
        if (i == v->nbricks) {
            rc = bfs_fail(e, 404, "volume %s has no brick %s (volume status %s lists them)",
                          name, brick, name);
            break;
        }
        bfs_brick_name(v, i, bn, sizeof(bn));
        if (strcmp(bn, brick) == 0) {
            json_object *b = brick_json(m, v, i);
            json_object_object_add(b, "volume", json_object_new_string(v->name));
            json_object_object_add(b, "status",
                                   json_object_new_string(bfs_vol_status_name(v->status)));
            *out = b;
            break;
        }
    }
    pthread_mutex_unlock(&m->lock);
    bfs_volume_free(v);
    return rc;
}
