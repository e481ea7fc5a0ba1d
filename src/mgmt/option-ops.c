/*
 * option-ops.c — volume options: set (validated against the translators'
 * descriptors), get, reset, and the help listing. A change is written to
 * the volume document and the volfiles regenerated; clients pick the new
 * client volfile up by its revision, bricks at their next start, and the
 * self-heal daemon is started, stopped or restarted to match at once.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "core/log.h"
#include "core/options.h"
#include "mgmt/mgmt.h"

static int unknown(const char *key, struct bfs_err *e)
{
    return bfs_fail(e, 400, "unknown option '%s' ('brickfs volume set help' lists the options "
                    "a volume can set)", key);
}

/* What the volfile syntax could not carry: control characters, leading or
 * trailing blanks (trimmed), a '#' after a blank (a comment). */
static int value_syntax(const char *key, const char *val, struct bfs_err *e)
{
    size_t n = strlen(val);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)val[i];
        if (c < 0x20 || c == 0x7f)
            return bfs_fail(e, 400, "option %s: the value has a control character", key);
        if (c == '#' && i > 0 && (val[i - 1] == ' ' || val[i - 1] == '\t'))
            return bfs_fail(e, 400, "option %s: the value has a '#' after a blank", key);
    }
    if (n == 0 || val[0] == ' ' || val[n - 1] == ' ')
        return bfs_fail(e, 400, "option %s: the value is empty or starts or ends with a blank",
                        key);
    return 0;
}

/* The option's value as text: strings as they are, numbers and booleans
 * as JSON writes them. */
static const char *json_text(struct json_object *v)
{
    if (!v || json_object_is_type(v, json_type_object) || json_object_is_type(v, json_type_array))
        return NULL;
    return json_object_get_string(v);
}

static bool touches_bricks(struct bfs_mgmt *m, const char *key)
{
    const struct bfs_catalog_entry *ce = bfs_catalog_find(m->catalog, key);
    return ce && (ce->sides & BFS_SIDE_BRICK);
}

static int commit(struct bfs_mgmt *m, struct bfs_volume *v, bool brick_change,
                  struct json_object **out, struct bfs_err *e)
{
    int rc = bfs_volume_save(m, v);
    if (rc < 0)
        return bfs_fail(e, 500, "cannot save volume %s: %s", v->name, strerror(-rc));
    /* brickfsd's own options (the self-heal daemon's) take effect now */
    bfs_sup_shd_sync(m, v);
    struct bfs_err ve;
    if (bfs_volgen_write(m, v, &ve) < 0)
        bfs_log(MGMT_LOG, BFS_LOG_WARNING, "volume %s: %s", v->name, ve.msg);
    *out = json_object_new_object();
    json_object_object_add(*out, "name", json_object_new_string(v->name));
    struct json_object *opts = json_object_new_object();
    for (int i = 0; i < v->nopts; i++)
        json_object_object_add(opts, v->opts[i].key, json_object_new_string(v->opts[i].value));
    json_object_object_add(*out, "options", opts);
    json_object_object_add(*out, "revision", json_object_new_int64((int64_t)v->rev));
    json_object_object_add(*out, "restart_needed",
                           json_object_new_boolean(brick_change && v->status == BFS_VOL_STARTED));
    return 0;
}

static int validate(struct bfs_mgmt *m, struct json_object *opts, struct bfs_err *e)
{
    if (!opts || !json_object_is_type(opts, json_type_object) ||
        json_object_object_length(opts) == 0)
        return bfs_fail(e, 400, "give the options to set as {\"options\": {\"KEY\": "
                        "\"VALUE\"}}");
    json_object_object_foreach(opts, key, val)
    {
        const struct bfs_catalog_entry *ce = bfs_catalog_find(m->catalog, key);
        const char *text = json_text(val);
        char why[256];
        if (!ce)
            return unknown(key, e);
        if (!text)
            return bfs_fail(e, 400, "option %s: the value must be a string", key);
        if (value_syntax(key, text, e) < 0)
            return -1;
        if (bfs_option_validate(ce->d, text, why, sizeof(why)) < 0)
            return bfs_fail(e, 400, "invalid value '%s' for option %s: %s", text, key, why);
    }
    return 0;
}

static int set_locked(struct bfs_mgmt *m, const char *name, struct json_object *opts,
                      struct json_object **out, struct bfs_err *e)
{
    struct bfs_volume *v;
    if (bfs_volume_get(m, name, &v, e) < 0)
        return -1;
    bool brick_change = false;
    int rc = validate(m, opts, e);
    if (rc == 0) {
        json_object_object_foreach(opts, key, val)
        {
            if (rc == 0 && bfs_volume_opt_set(v, key, json_text(val)) < 0)
                rc = bfs_fail(e, 500, "out of memory");
            brick_change |= touches_bricks(m, key);
        }
    }
    if (rc == 0)
        rc = commit(m, v, brick_change, out, e);
    if (rc == 0)
        bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s: %d option(s) set", name,
                json_object_object_length(opts));
    bfs_volume_free(v);
    return rc;
}

int bfs_op_set(struct bfs_mgmt *m, const char *name, struct json_object *opts,
               struct json_object **out, struct bfs_err *e)
{
    pthread_mutex_lock(&m->oplock);
    pthread_mutex_lock(&m->lock);
    int rc = set_locked(m, name, opts, out, e);
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_unlock(&m->oplock);
    return rc;
}

static struct json_object *opt_value_json(const struct bfs_catalog_entry *ce, const char *key,
                                          const char *set)
{
    struct json_object *j = json_object_new_object();
    const char *def = ce ? ce->d->def : NULL;
    json_object_object_add(j, "key", json_object_new_string(key));
    json_object_object_add(j, "value", set ? json_object_new_string(set)
                                       : def ? json_object_new_string(def)
                                             : NULL);
    json_object_object_add(j, "default", def ? json_object_new_string(def) : NULL);
    json_object_object_add(j, "source", json_object_new_string(set ? "set" : "default"));
    return j;
}

int bfs_op_get(struct bfs_mgmt *m, const char *name, const char *key, struct json_object **out,
               struct bfs_err *e)
{
    struct bfs_volume *v;
    pthread_mutex_lock(&m->lock);
    int rc = bfs_volume_get(m, name, &v, e);
    pthread_mutex_unlock(&m->lock);
    if (rc < 0)
        return -1;
    struct json_object *arr = json_object_new_array();
    if (key && strcmp(key, "all") != 0) {
        const struct bfs_catalog_entry *ce = bfs_catalog_find(m->catalog, key);
        if (!ce && !bfs_volume_opt(v, key)) {
            json_object_put(arr);
            bfs_volume_free(v);
            return unknown(key, e);
        }
        json_object_array_add(arr, opt_value_json(ce, key, bfs_volume_opt(v, key)));
    } else {
        int n;
        const struct bfs_catalog_entry *all = bfs_catalog_entries(m->catalog, &n);
        for (int i = 0; i < n; i++)
            json_object_array_add(arr, opt_value_json(&all[i], all[i].d->key,
                                                      bfs_volume_opt(v, all[i].d->key)));
        /* set earlier, its translator gone since: still shown */
        for (int i = 0; i < v->nopts; i++)
            if (!bfs_catalog_find(m->catalog, v->opts[i].key))
                json_object_array_add(arr, opt_value_json(NULL, v->opts[i].key,
                                                          v->opts[i].value));
    }
    *out = json_object_new_object();
    json_object_object_add(*out, "name", json_object_new_string(name));
    json_object_object_add(*out, "options", arr);
    bfs_volume_free(v);
    return 0;
}

static int reset_locked(struct bfs_mgmt *m, const char *name, const char *key,
                        struct json_object **out, struct bfs_err *e)
{
    struct bfs_volume *v;
    if (bfs_volume_get(m, name, &v, e) < 0)
        return -1;
    bool brick_change = false;
    int rc = 0;
    if (key) {
        if (!bfs_catalog_find(m->catalog, key) && !bfs_volume_opt(v, key))
            rc = unknown(key, e);
        else if (bfs_volume_opt_unset(v, key) == 0)
            brick_change = touches_bricks(m, key);
    } else {
        for (int i = 0; i < v->nopts; i++)
            brick_change |= touches_bricks(m, v->opts[i].key);
        while (v->nopts > 0)
            bfs_volume_opt_unset(v, v->opts[0].key);
    }
    if (rc == 0)
        rc = commit(m, v, brick_change, out, e);
    bfs_volume_free(v);
    return rc;
}

int bfs_op_reset(struct bfs_mgmt *m, const char *name, const char *key,
                 struct json_object **out, struct bfs_err *e)
{
    pthread_mutex_lock(&m->oplock);
    pthread_mutex_lock(&m->lock);
    int rc = reset_locked(m, name, key, out, e);
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_unlock(&m->oplock);
    return rc;
}

int bfs_op_options_help(struct bfs_mgmt *m, struct json_object **out, struct bfs_err *e)
{
    int n;
    const struct bfs_catalog_entry *all = bfs_catalog_entries(m->catalog, &n);
    struct json_object *arr = json_object_new_array();
    for (int i = 0; i < n; i++)
        json_object_array_add(arr, bfs_catalog_entry_json(&all[i]));
    *out = json_object_new_object();
    json_object_object_add(*out, "options", arr);
    (void)e;
    return 0;
}
