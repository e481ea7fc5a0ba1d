/*
 * volume.c — the volume model: names, the JSON document kept in the store
 * under volumes/NAME, and loading and saving it with compare-and-swap.
 *
 * Lifetime: a struct bfs_volume is a private copy made by load or
 * from_json; the caller frees it with bfs_volume_free(). Nothing keeps
 * volumes in memory between requests: the store is the truth.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "core/log.h"
#include "mgmt/mgmt.h"
#include "mgmt/pool.h"
#include "mgmt/store.h"

#define VOL_PREFIX "volumes/"

static const char *jstr(struct json_object *j, const char *key);

static const char *const status_names[] = {"created", "started", "stopped"};

const char *bfs_vol_status_name(enum bfs_vol_status s)
{
    return (unsigned)s < 3 ? status_names[s] : "unknown";
}

void bfs_volume_free(struct bfs_volume *v)
{
    if (!v)
        return;
    for (int i = 0; i < v->nbricks; i++) {
        free(v->bricks[i].host);
        free(v->bricks[i].path);
    }
    for (int i = 0; i < v->nopts; i++) {
        free(v->opts[i].key);
        free(v->opts[i].value);
    }
    free(v->bricks);
    free(v->opts);
    free(v->layout_table);
    free(v->layout_prev);
    free(v->remove_ids);
    free(v->name);
    free(v->type);
    free(v);
}

int bfs_volname_check(const char *name, struct bfs_err *e)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0)
        return bfs_fail(e, 400, "a volume name is required");
    if (n > BFS_VOLNAME_MAX)
        return bfs_fail(e, 400, "volume name '%.80s...' is too long (at most %d characters)",
                        name, BFS_VOLNAME_MAX);
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return bfs_fail(e, 400, "volume name '%s' has a character other than letters, "
                            "digits, '_' and '-'", name);
    }
    return 0;
}

void bfs_brick_name(const struct bfs_volume *v, int idx, char *buf, size_t len)
{
    snprintf(buf, len, "%s-brick-%d", v->name, v->bricks[idx].id);
}

int bfs_volume_brick_index(const struct bfs_volume *v, const char *name)
{
    char bn[160];
    for (int i = 0; i < v->nbricks; i++) {
        bfs_brick_name(v, i, bn, sizeof(bn));
        if (strcmp(bn, name) == 0)
            return i;
    }
    return -1;
}

int bfs_volume_nsubvols(const struct bfs_volume *v)
{
    int per = v->replica > 0 ? v->replica : v->disperse > 0 ? v->disperse : 1;
    return v->nbricks / per;
}

void bfs_subvol_name(const struct bfs_volume *v, int s, char *buf, size_t len)
{
    if (v->replica > 0)
        snprintf(buf, len, "%s-replicate-%d", v->name, v->bricks[s * v->replica].id / v->replica);
    else if (v->disperse > 0)
        snprintf(buf, len, "%s-disperse-%d", v->name, v->bricks[s * v->disperse].id / v->disperse);
    else
        snprintf(buf, len, "%s-client-%d", v->name, v->bricks[s].id);
}

const char *bfs_volume_opt(const struct bfs_volume *v, const char *key)
{
    for (int i = 0; i < v->nopts; i++)
        if (strcmp(v->opts[i].key, key) == 0)
            return v->opts[i].value;
    return NULL;
}

int bfs_volume_opt_set(struct bfs_volume *v, const char *key, const char *value)
{
    char *nv = strdup(value);
    if (!nv)
        return -ENOMEM;
    for (int i = 0; i < v->nopts; i++) {
        if (strcmp(v->opts[i].key, key) == 0) {
            free(v->opts[i].value);
            v->opts[i].value = nv;
            return 0;
        }
    }
    struct bfs_vopt *o = realloc(v->opts, (size_t)(v->nopts + 1) * sizeof(*o));
    if (!o) {
        free(nv);
        return -ENOMEM;
    }
    v->opts = o;
    if (!(o[v->nopts].key = strdup(key))) {
        free(nv);
        return -ENOMEM;
    }
    o[v->nopts++].value = nv;
    return 0;
}

int bfs_volume_opt_unset(struct bfs_volume *v, const char *key)
{
    for (int i = 0; i < v->nopts; i++) {
        if (strcmp(v->opts[i].key, key) == 0) {
            free(v->opts[i].key);
            free(v->opts[i].value);
            v->opts[i] = v->opts[--v->nopts];
            return 0;
        }
    }
    return -ENOENT;
}

struct json_object *bfs_volume_to_json(const struct bfs_volume *v)
{
    struct json_object *j = json_object_new_object();
    json_object_object_add(j, "name", json_object_new_string(v->name));
    json_object_object_add(j, "id", json_object_new_string(v->id));
    json_object_object_add(j, "type", json_object_new_string(v->type));
    json_object_object_add(j, "status", json_object_new_string(bfs_vol_status_name(v->status)));
    if (v->replica > 0) {
        json_object_object_add(j, "replica", json_object_new_int(v->replica));
        json_object_object_add(j, "arbiter", json_object_new_int(v->arbiter));
    }
    if (v->disperse > 0) {
        json_object_object_add(j, "disperse", json_object_new_int(v->disperse));
        json_object_object_add(j, "redundancy", json_object_new_int(v->redundancy));
    }
    struct json_object *bricks = json_object_new_array();
    for (int i = 0; i < v->nbricks; i++) {
        struct json_object *b = json_object_new_object();
        char name[128];
        bfs_brick_name(v, i, name, sizeof(name));
        json_object_object_add(b, "name", json_object_new_string(name));
        json_object_object_add(b, "id", json_object_new_int(v->bricks[i].id));
        json_object_object_add(b, "host", json_object_new_string(v->bricks[i].host));
        json_object_object_add(b, "path", json_object_new_string(v->bricks[i].path));
        json_object_object_add(b, "port", json_object_new_int(v->bricks[i].port));
        if (v->bricks[i].node[0])
            json_object_object_add(b, "node", json_object_new_string(v->bricks[i].node));
        json_object_array_add(bricks, b);
    }
    json_object_object_add(j, "bricks", bricks);
    struct json_object *opts = json_object_new_object();
    for (int i = 0; i < v->nopts; i++)
        json_object_object_add(opts, v->opts[i].key, json_object_new_string(v->opts[i].value));
    json_object_object_add(j, "options", opts);
    json_object_object_add(j, "created", json_object_new_int64(v->created));
    json_object_object_add(j, "next_brick_id", json_object_new_int(v->next_brick_id));
    struct json_object *lay = json_object_new_object();
    json_object_object_add(lay, "version", json_object_new_int64(v->layout_version));
    json_object_object_add(lay, "table", json_object_new_string(v->layout_table ? v->layout_table : ""));
    json_object_object_add(lay, "previous", json_object_new_string(v->layout_prev ? v->layout_prev : ""));
    json_object_object_add(j, "layout", lay);
    if (v->nremove) {
        struct json_object *rm = json_object_new_object(), *ids = json_object_new_array();
        for (int i = 0; i < v->nremove; i++)
            json_object_array_add(ids, json_object_new_int(v->remove_ids[i]));
        json_object_object_add(rm, "ids", ids);
        json_object_object_add(j, "remove", rm);
    }
    if (v->rebal.id[0]) {
        struct json_object *r = json_object_new_object();
        json_object_object_add(r, "id", json_object_new_string(v->rebal.id));
        json_object_object_add(r, "kind", json_object_new_string(v->rebal.kind));
        json_object_object_add(r, "state", json_object_new_string(v->rebal.state));
        json_object_object_add(r, "started", json_object_new_int64(v->rebal.started));
        json_object_object_add(r, "layout_version", json_object_new_int64(v->rebal.layout_version));
        if (v->rebal.node[0])
            json_object_object_add(r, "node", json_object_new_string(v->rebal.node));
        json_object_object_add(j, "rebalance", r);
    }
    return j;
}

/* layout, remove and rebalance (absent in documents written before them). */
static int elastic_from_json(struct json_object *j, struct bfs_volume *v)
{
    struct json_object *o, *x;
    int maxid = -1;
    for (int i = 0; i < v->nbricks; i++)
        maxid = v->bricks[i].id > maxid ? v->bricks[i].id : maxid;
    v->next_brick_id = json_object_object_get_ex(j, "next_brick_id", &o) ? json_object_get_int(o)
                                                                          : maxid + 1;
    if (v->next_brick_id <= maxid)
        return -EINVAL;
    const char *t = NULL, *p = NULL;
    v->layout_version = 1;
    if (json_object_object_get_ex(j, "layout", &o)) {
        t = jstr(o, "table");
        p = jstr(o, "previous");
        if (json_object_object_get_ex(o, "version", &x))
            v->layout_version = json_object_get_int64(x);
    }
    if (!(v->layout_table = strdup(t ? t : "")) || !(v->layout_prev = strdup(p ? p : "")))
        return -ENOMEM;
    if (json_object_object_get_ex(j, "remove", &o) && json_object_object_get_ex(o, "ids", &x) &&
        json_object_is_type(x, json_type_array)) {
        int n = (int)json_object_array_length(x);
        v->remove_ids = calloc((size_t)n + 1, sizeof(int));
        if (!v->remove_ids)
            return -ENOMEM;
        for (int i = 0; i < n; i++)
            v->remove_ids[v->nremove++] = json_object_get_int(json_object_array_get_idx(x, (size_t)i));
    }
    if (json_object_object_get_ex(j, "rebalance", &o)) {
        const char *id = jstr(o, "id"), *kind = jstr(o, "kind"), *state = jstr(o, "state");
        const char *node = jstr(o, "node");
        snprintf(v->rebal.node, sizeof(v->rebal.node), "%s", node ? node : "");
        snprintf(v->rebal.id, sizeof(v->rebal.id), "%s", id ? id : "");
        snprintf(v->rebal.kind, sizeof(v->rebal.kind), "%s", kind ? kind : "");
        snprintf(v->rebal.state, sizeof(v->rebal.state), "%s", state ? state : "");
        if (json_object_object_get_ex(o, "started", &x))
            v->rebal.started = json_object_get_int64(x);
        if (json_object_object_get_ex(o, "layout_version", &x))
            v->rebal.layout_version = json_object_get_int64(x);
    }
    return 0;
}

static const char *jstr(struct json_object *j, const char *key)
{
    struct json_object *o;
    if (!json_object_object_get_ex(j, key, &o) || !json_object_is_type(o, json_type_string))
        return NULL;
    return json_object_get_string(o);
}

static int bricks_from_json(struct json_object *arr, struct bfs_volume *v)
{
    if (!arr || !json_object_is_type(arr, json_type_array))
        return -EINVAL;
    int n = (int)json_object_array_length(arr);
    v->bricks = calloc(n ? (size_t)n : 1, sizeof(*v->bricks));
    if (!v->bricks)
        return -ENOMEM;
    for (int i = 0; i < n; i++) {
        struct json_object *b = json_object_array_get_idx(arr, (size_t)i), *port, *id;
        const char *host = jstr(b, "host"), *path = jstr(b, "path");
        if (!host || !path || !json_object_object_get_ex(b, "port", &port))
            return -EINVAL;
        v->bricks[i].host = strdup(host);
        v->bricks[i].path = strdup(path);
        v->bricks[i].port = json_object_get_int(port);
        const char *node = jstr(b, "node");
        snprintf(v->bricks[i].node, sizeof(v->bricks[i].node), "%s", node ? node : "");
        v->bricks[i].id = json_object_object_get_ex(b, "id", &id) ? json_object_get_int(id) : i;
        v->nbricks++;
        if (!v->bricks[i].host || !v->bricks[i].path)
            return -ENOMEM;
    }
    return 0;
}

int bfs_volume_from_json(struct json_object *j, struct bfs_volume **out)
{
    struct bfs_volume *v = calloc(1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    const char *name = jstr(j, "name"), *id = jstr(j, "id"), *type = jstr(j, "type");
    const char *status = jstr(j, "status");
    struct json_object *arr = NULL, *opts = NULL, *created = NULL, *cnt = NULL;
    int rc = (!name || !id || !type || !status) ? -EINVAL : 0;
    if (rc == 0) {
        v->name = strdup(name);
        v->type = strdup(type);
        snprintf(v->id, sizeof(v->id), "%s", id);
        rc = (!v->name || !v->type) ? -ENOMEM : 0;
    }
    v->status = BFS_VOL_CREATED;
    for (int i = 0; status && i < 3; i++)
        if (strcmp(status, status_names[i]) == 0)
            v->status = (enum bfs_vol_status)i;
    if (rc == 0) {
        json_object_object_get_ex(j, "bricks", &arr);
        rc = bricks_from_json(arr, v);
    }
    if (rc == 0 && json_object_object_get_ex(j, "options", &opts)) {
        json_object_object_foreach(opts, k, val)
        {
            if (rc == 0 && json_object_is_type(val, json_type_string))
                rc = bfs_volume_opt_set(v, k, json_object_get_string(val));
        }
    }
    if (json_object_object_get_ex(j, "replica", &cnt))
        v->replica = json_object_get_int(cnt);
    if (json_object_object_get_ex(j, "arbiter", &cnt))
        v->arbiter = json_object_get_int(cnt);
    if (json_object_object_get_ex(j, "disperse", &cnt))
        v->disperse = json_object_get_int(cnt);
    if (json_object_object_get_ex(j, "redundancy", &cnt))
        v->redundancy = json_object_get_int(cnt);
    /* A document that does not hold whole replica or disperse sets is not
     * one we wrote. */
    if (rc == 0 && (v->replica < 0 || v->replica == 1 || v->arbiter < 0 || v->arbiter > 1 ||
                    (v->replica > 0 && v->nbricks % v->replica != 0)))
        rc = -EINVAL;
    if (rc == 0 && (v->disperse < 0 || v->disperse > BFS_DISPERSE_MAX ||
                    (v->disperse > 0 && (v->replica > 0 || v->redundancy < 1 ||
                                         2 * v->redundancy >= v->disperse ||
                                         v->nbricks % v->disperse != 0)) ||
                    (v->disperse == 0 && v->redundancy != 0)))
        rc = -EINVAL;
    if (json_object_object_get_ex(j, "created", &created))
        v->created = json_object_get_int64(created);
    if (rc == 0)
        rc = elastic_from_json(j, v);
    if (rc < 0) {
        bfs_volume_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

static int parse_doc(const char *text, uint64_t rev, struct bfs_volume **out)
{
    struct json_object *j = json_tokener_parse(text);
    if (!j)
        return -EIO;
    int rc = bfs_volume_from_json(j, out);
    json_object_put(j);
    if (rc == 0)
        (*out)->rev = rev;
    return rc == -EINVAL ? -EIO : rc;
}

int bfs_volume_load(struct bfs_mgmt *m, const char *name, struct bfs_volume **out)
{
    char key[BFS_VOLNAME_MAX + 16];
    struct bfs_store_kv kv;
    snprintf(key, sizeof(key), VOL_PREFIX "%s", name);
    int rc = bfs_store_get(m->store, key, &kv);
    if (rc < 0)
        return rc;
    rc = parse_doc(kv.value, kv.rev, out);
    if (rc < 0)
        bfs_log(MGMT_LOG, BFS_LOG_ERROR, "store key %s does not hold a volume document", key);
    bfs_store_kv_clear(&kv);
    return rc;
}

int bfs_volume_get(struct bfs_mgmt *m, const char *name, struct bfs_volume **out,
                   struct bfs_err *e)
{
    if (bfs_volname_check(name, e) < 0)
        return -1;
    int rc = bfs_volume_load(m, name, out);
    if (rc == -ENOENT)
        return bfs_fail(e, 404, "volume %s does not exist (brickfs volume list shows the "
                        "volumes)", name);
    if (rc < 0)
        return bfs_fail(e, 500, "cannot read volume %s from the store: %s", name,
                        strerror(-rc));
    return 0;
}

/* In a pool: "nodes/UUID exists" for each node that owns bricks of v, so
 * that a document never gives a brick to a node detached meanwhile
 * (docs/design/pool.md, "Bootstrap, probe, detach"). Returns the count. */
static size_t owner_conds(const struct bfs_volume *v, struct bfs_store_cond *c, char (*keys)[64])
{
    size_t n = 0;
    for (int i = 0; i < v->nbricks; i++) {
        const char *u = v->bricks[i].node;
        bool seen = !u[0];
        for (size_t k = 0; k < n && !seen; k++)
            seen = strcmp(keys[k] + strlen("nodes/"), u) == 0;
        if (seen)
            continue;
        snprintf(keys[n], 64, "nodes/%s", u);
        c[n] = (struct bfs_store_cond){.key = keys[n], .max_rev = BFS_STORE_ANY};
        n++;
    }
    return n;
}

int bfs_volume_save(struct bfs_mgmt *m, struct bfs_volume *v)
{
    char key[BFS_VOLNAME_MAX + 16];
    snprintf(key, sizeof(key), VOL_PREFIX "%s", v->name);
    struct bfs_store_cond *conds = NULL;
    char(*keys)[64] = NULL;
    size_t nc = 0;
    if (bfs_pool_enabled(m) && v->nbricks > 0) {
        conds = calloc((size_t)v->nbricks, sizeof(*conds));
        keys = calloc((size_t)v->nbricks, sizeof(*keys));
        if (!conds || !keys) {
            free(conds);
            free(keys);
            return -ENOMEM;
        }
        nc = owner_conds(v, conds, keys);
    }
    bfs__test_pause("volume-save");
    struct json_object *j = bfs_volume_to_json(v);
    size_t len;
    const char *text = json_object_to_json_string_length(j, JSON_C_TO_STRING_PRETTY, &len);
    uint64_t rev;
    int rc = bfs_store_write_if(m->store, key, text, len, v->rev, conds, nc, &rev);
    json_object_put(j);
    if (rc == -ESTALE && nc > 0) { /* the document's revision, or an owner? */
        struct bfs_store_kv kv;
        int g = bfs_store_get(m->store, key, &kv);
        if ((g == -ENOENT && v->rev == 0) || (g == 0 && kv.rev == v->rev))
            rc = -ENXIO;
        bfs_store_kv_clear(&kv);
    }
    free(conds);
    free(keys);
    if (rc == 0)
        v->rev = rev;
    return rc;
}

const char *bfs_volume_save_strerror(int rc)
{
    if (rc == -ENXIO)
        return "a node that owns one of its bricks is no longer in the pool (detached "
               "meanwhile? brickfs pool list)";
    return strerror(-rc);
}

int bfs_volume_remove(struct bfs_mgmt *m, struct bfs_volume *v)
{
    char key[BFS_VOLNAME_MAX + 16];
    snprintf(key, sizeof(key), VOL_PREFIX "%s", v->name);
    return bfs_store_delete(m->store, key, v->rev, NULL);
}

int bfs_volume_list(struct bfs_mgmt *m, struct bfs_volume ***out, int *n)
{
    struct bfs_store_kv *kvs;
    size_t nkv;
    *out = NULL;
    *n = 0;
    int rc = bfs_store_list(m->store, VOL_PREFIX, &kvs, &nkv);
    if (rc < 0)
        return rc;
    struct bfs_volume **vs = calloc(nkv ? nkv : 1, sizeof(*vs));
    int cnt = 0;
    for (size_t i = 0; vs && i < nkv; i++) {
        if (parse_doc(kvs[i].value, kvs[i].rev, &vs[cnt]) == 0)
            cnt++;
        else
            bfs_log(MGMT_LOG, BFS_LOG_ERROR, "store key %s does not hold a volume document",
                    kvs[i].key);
    }
    bfs_store_kvs_free(kvs, nkv);
    if (!vs)
        return -ENOMEM;
    *out = vs;
    *n = cnt;
    return 0;
}

void bfs_volume_list_free(struct bfs_volume **v, int n)
{
    for (int i = 0; v && i < n; i++)
        bfs_volume_free(v[i]);
    free(v);
}
