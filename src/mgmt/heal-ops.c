/*
 * heal-ops.c — the heal operations behind /v1/volumes/NAME/heal...
 * (docs/API.md, docs/design/management.md "Self-heal daemon"):
 *
 *   heal             SIGUSR1 to the volume's self-heal daemon: crawl now;
 *   info             brickfs-shd --info [summary|split-brain] --json, run
 *                    once, its client names mapped to the bricks HOST:/DIR;
 *   statistics       the daemon's state file (progress, rates) and process;
 *   split-brain      brickfs-shd --resolve POLICY --file F [--source-brick
 *                    CLIENT], once per file (source-brick without a file:
 *                    every file in split-brain in that brick's replica set).
 *
 * The volume is read and checked under m->lock; brickfs-shd runs without
 * it (it talks to the bricks and may take a while), bounded by
 * BRICKFSD_HEAL_TIMEOUT. Results are JSON objects owned by the caller.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "core/log.h"
#include "mgmt/mgmt.h"
#include "mgmt/pool.h"

/* The volume NAME, checked to be replicated or dispersed, and started. With volfile,
 * also writes its client volfile for a one-shot run to STATE/volfiles/
 * VOL/client.vol (not shd.vol: that path names the daemon in /proc). */
static int heal_volume(struct bfs_mgmt *m, const char *name, struct bfs_volume **out,
                       char *volfile, size_t len, struct bfs_err *e)
{
    struct bfs_volume *v = NULL;
    pthread_mutex_lock(&m->lock);
    int rc = bfs_volume_get(m, name, &v, e);
    if (rc == 0 && v->replica <= 0 && v->disperse <= 0)
        rc = bfs_fail(e, 400, "volume %s is not a replicated volume nor a dispersed one (type "
                      "%s): it has nothing to heal", name, v->type);
    else if (rc == 0 && v->status != BFS_VOL_STARTED)
        rc = bfs_fail(e, 409, "volume %s is not started (it is %s)", name,
                      bfs_vol_status_name(v->status));
    if (rc == 0 && volfile) {
        char dir[4200];
        snprintf(dir, sizeof(dir), "%s/volfiles/%s", m->state_dir, name);
        snprintf(volfile, len, "%s/client.vol", dir);
        int mk = bfs_mkdir_p(dir, 0755);
        if (mk < 0)
            rc = bfs_fail(e, 500, "cannot create %s: %s", dir, strerror(-mk));
        else
            rc = bfs_volgen_write_client(m, v, volfile, e);
    }
    pthread_mutex_unlock(&m->lock);
    if (rc < 0) {
        bfs_volume_free(v);
        return -1;
    }
    *out = v;
    return 0;
}

/* The last non-empty line of a program's output, for messages. */
static void last_line(const char *text, char *buf, size_t len)
{
    buf[0] = 0;
    const char *p = text;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n > 0)
            snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), p);
        p = nl ? nl + 1 : NULL;
    }
}

/* Runs brickfs-shd with args; fails with e (status fail_status when it
 * ran and said no). */
static int run_shd(struct bfs_mgmt *m, char **argv, struct bfs_run_result *r, int fail_status,
                   struct bfs_err *e)
{
    argv[0] = m->shd_bin;
    int rc = bfs_run_capture(argv, m->heal_timeout_ms, r);
    if (rc < 0)
        return bfs_fail(e, 500, "cannot run %s: %s", m->shd_bin, strerror(-rc));
    if (r->timed_out) {
        bfs_run_result_free(r);
        return bfs_fail(e, 500, "%s %s did not finish within %d s (BRICKFSD_HEAL_TIMEOUT)",
                        m->shd_bin, argv[3], m->heal_timeout_ms / 1000);
    }
    if (r->status != 0) {
        char why[600];
        last_line(r->err, why, sizeof(why));
        if (!why[0])
            last_line(r->out, why, sizeof(why));
        if (r->status < 0)
            rc = bfs_fail(e, 500, "brickfs-shd %s was killed by a signal%s%s", argv[3],
                          why[0] ? ": " : "", why);
        else
            rc = bfs_fail(e, fail_status, "%s", why[0] ? why : "brickfs-shd failed, saying "
                          "nothing");
        bfs_run_result_free(r);
        return rc;
    }
    return 0;
}

/* Index of the brick brickfs-shd calls b (remote_subvolume VOL-brick-ID,
 * or client VOL-client-ID; IDs are stable, docs/design/rebalance.md), or -1. */
static int brick_of(const struct bfs_volume *v, struct json_object *b)
{
    struct json_object *o;
    const char *sub = json_object_object_get_ex(b, "remote_subvolume", &o)
                          ? json_object_get_string(o) : NULL;
    const char *cl = json_object_object_get_ex(b, "client", &o) ? json_object_get_string(o)
                                                                : NULL;
    for (int i = 0; i < v->nbricks; i++) {
        char bn[160], cn[160];
        bfs_brick_name(v, i, bn, sizeof(bn));
        snprintf(cn, sizeof(cn), "%s-client-%d", v->name, v->bricks[i].id);
        if ((sub && strcmp(sub, bn) == 0) || (cl && strcmp(cl, cn) == 0))
            return i;
    }
    return -1;
}

static int64_t int_of(struct json_object *j, const char *key, int64_t def)
{
    struct json_object *o;
    return j && json_object_object_get_ex(j, key, &o) && !json_object_is_type(o, json_type_null)
               ? json_object_get_int64(o) : def;
}

/* One brick of the info answer, from brickfs-shd's. */
static struct json_object *info_brick(const struct bfs_volume *v, struct json_object *b,
                                      const char *mode)
{
    struct json_object *j = json_object_new_object(), *o, *entries = NULL;
    int idx = brick_of(v, b);
    char where[4200] = "?";
    if (idx >= 0) {
        char bn[160];
        bfs_brick_name(v, idx, bn, sizeof(bn));
        snprintf(where, sizeof(where), "%s:%s", v->bricks[idx].host, v->bricks[idx].path);
        json_object_object_add(j, "name", json_object_new_string(bn));
    }
    json_object_object_add(j, "brick", json_object_new_string(where));
    if (json_object_object_get_ex(b, "client", &o))
        json_object_object_add(j, "client", json_object_get(o));
    json_object_object_add(j, "status", json_object_object_get_ex(b, "status", &o)
                                            ? json_object_get(o)
                                            : json_object_new_string("unknown"));
    json_object_object_get_ex(b, "entries", &entries);
    int64_t sb = 0, n = entries ? (int64_t)json_object_array_length(entries) : 0;
    struct json_object *kept = json_object_new_array();
    for (int64_t i = 0; i < n; i++) {
        struct json_object *en = json_object_array_get_idx(entries, (size_t)i), *f;
        bool split = json_object_object_get_ex(en, "split_brain", &f) && json_object_get_boolean(f);
        sb += split;
        if (!mode || (strcmp(mode, "split-brain") == 0 && split))
            json_object_array_add(kept, json_object_get(en));
    }
    int64_t pending = int_of(b, "pending", n);
    json_object_object_add(j, "pending", json_object_new_int64(pending));
    /* per-brick split-brain: brickfs-shd's count if it gives one, else the listed entries */
    json_object_object_add(j, "split_brain",
                           json_object_new_int64(entries ? sb : int_of(b, "split_brain", 0)));
    if (mode && strcmp(mode, "summary") == 0)
        json_object_put(kept);
    else
        json_object_object_add(j, "entries", kept);
    return j;
}

int bfs_op_heal_info(struct bfs_mgmt *m, const char *name, const char *mode,
                     struct json_object **out, struct bfs_err *e)
{
    struct bfs_volume *v;
    char volfile[4300];
    if (mode && strcmp(mode, "summary") != 0 && strcmp(mode, "split-brain") != 0)
        return bfs_fail(e, 404, "no such heal info: '%s' (summary or split-brain)", mode);
    if (heal_volume(m, name, &v, volfile, sizeof(volfile), e) < 0)
        return -1;
    char *argv[] = {NULL, (char *)"--volfile", volfile, (char *)"--info", (char *)mode,
                    (char *)"--json", NULL};
    if (!mode) {
        argv[4] = (char *)"--json";
        argv[5] = NULL;
    }
    struct bfs_run_result r;
    if (run_shd(m, argv, &r, 500, e) < 0) {
        bfs_volume_free(v);
        return -1;
    }
    struct json_object *got = json_tokener_parse(r.out), *bricks;
    int rc = 0;
    if (!got || !json_object_object_get_ex(got, "bricks", &bricks) ||
        !json_object_is_type(bricks, json_type_array)) {
        char line[300];
        last_line(r.out, line, sizeof(line));
        rc = bfs_fail(e, 500, "brickfs-shd --info printed no heal listing: %s",
                      line[0] ? line : "(nothing)");
    } else {
        struct json_object *arr = json_object_new_array();
        int64_t pending = 0, sb = 0;
        for (size_t i = 0; i < json_object_array_length(bricks); i++) {
            struct json_object *b = info_brick(v, json_object_array_get_idx(bricks, i), mode);
            pending += int_of(b, "pending", 0);
            sb += int_of(b, "split_brain", 0);
            json_object_array_add(arr, b);
        }
        *out = json_object_new_object();
        json_object_object_add(*out, "name", json_object_new_string(v->name));
        json_object_object_add(*out, "info", json_object_new_string(mode ? mode : "all"));
        json_object_object_add(*out, "bricks", arr);
        json_object_object_add(*out, "total_pending",
                               json_object_new_int64(int_of(got, "total_pending", pending)));
        json_object_object_add(*out, "split_brain",
                               json_object_new_int64(int_of(got, "split_brain", sb)));
    }
    json_object_put(got);
    bfs_run_result_free(&r);
    bfs_volume_free(v);
    return rc;
}

int bfs_op_heal(struct bfs_mgmt *m, const char *name, struct json_object **out,
                struct bfs_err *e)
{
    struct bfs_volume *v;
    if (heal_volume(m, name, &v, NULL, 0, e) < 0)
        return -1;
    pthread_mutex_lock(&m->lock);
    int rc = 0, pid = 0;
    char log[4200];
    bfs_shd_paths(m, name, NULL, NULL, log, NULL, sizeof(log));
    if (!bfs_shd_wanted(v))
        rc = bfs_fail(e, 409, "the self-heal daemon of volume %s is off (%s); 'brickfs volume "
                      "set %s %s on' starts it", name, BFS_OPT_SHD, name, BFS_OPT_SHD);
    else if (!bfs_pool_owns_bricks(m, v))
        rc = bfs_fail(e, 409, "this node owns no brick of volume %s: its self-heal daemons run "
                      "on the nodes that do; ask one of them (--server)", name);
    else if ((pid = bfs_sup_shd_kick(m, v)) < 0)
        rc = bfs_fail(e, 409, "the self-heal daemon of volume %s is not running (brickfsd "
                      "restarts it; its log: %s)", name, log);
    pthread_mutex_unlock(&m->lock);
    if (rc == 0) {
        bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s: heal: crawl requested (pid %d)", name, pid);
        *out = json_object_new_object();
        json_object_object_add(*out, "name", json_object_new_string(name));
        json_object_object_add(*out, "pid", json_object_new_int(pid));
        json_object_object_add(*out, "crawl", json_object_new_string("requested"));
    }
    bfs_volume_free(v);
    return rc;
}

int bfs_op_heal_stats(struct bfs_mgmt *m, const char *name, struct json_object **out,
                      struct bfs_err *e)
{
    struct bfs_volume *v = NULL;
    struct bfs_shd_state st;
    char statefile[4200];
    pthread_mutex_lock(&m->lock);
    int rc = bfs_volume_get(m, name, &v, e);
    if (rc == 0 && v->replica <= 0 && v->disperse <= 0)
        rc = bfs_fail(e, 400, "volume %s is not a replicated volume nor a dispersed one (type "
                      "%s): it has no self-heal daemon", name, v->type);
    if (rc == 0)
        bfs_sup_shd_state(m, v, &st);
    pthread_mutex_unlock(&m->lock);
    if (rc < 0) {
        bfs_volume_free(v);
        return -1;
    }
    bfs_shd_paths(m, name, NULL, statefile, NULL, NULL, sizeof(statefile));
    char *text = NULL;
    struct json_object *progress = NULL;
    if (bfs_read_small(statefile, &text) == 0)
        progress = json_tokener_parse(text);
    free(text);
    struct json_object *d = json_object_new_object();
    json_object_object_add(d, "enabled", json_object_new_boolean(st.enabled));
    json_object_object_add(d, "pid", json_object_new_int(st.pid));
    json_object_object_add(d, "online", json_object_new_boolean(st.online));
    json_object_object_add(d, "restarts", json_object_new_int(st.restarts));
    *out = json_object_new_object();
    json_object_object_add(*out, "name", json_object_new_string(name));
    json_object_object_add(*out, "status", json_object_new_string(bfs_vol_status_name(v->status)));
    json_object_object_add(*out, "self_heal_daemon", d);
    /* what the daemon last wrote; it survives the daemon (last known figures) */
    json_object_object_add(*out, "progress", progress);
    bfs_volume_free(v);
    return 0;
}

/* ---- split-brain resolution ---- */

/* Index of the brick "HOST:/DIR" (or its name VOL-brick-N) in v, or fails. */
static int find_brick(const struct bfs_volume *v, const char *spec, struct bfs_err *e)
{
    for (int i = 0; i < v->nbricks; i++) {
        char bn[160];
        bfs_brick_name(v, i, bn, sizeof(bn));
        if (strcmp(spec, bn) == 0)
            return i;
    }
    char *host = NULL, *path = NULL;
    struct bfs_err ignore;
    int found = -1;
    if (bfs_brick_parse(spec, &host, &path, &ignore) == 0)
        for (int i = 0; i < v->nbricks && found < 0; i++)
            if (strcmp(v->bricks[i].host, host) == 0 && strcmp(v->bricks[i].path, path) == 0)
                found = i;
    free(host);
    free(path);
    if (found < 0)
        return bfs_fail(e, 400, "%s is not a brick of volume %s ('brickfs volume info %s' "
                        "lists them as HOST:/DIR)", spec, v->name, v->name);
    return found;
}

static int file_check(const char *file, struct bfs_err *e)
{
    if (!file || (file[0] != '/' && strncmp(file, "gfid:", 5) != 0) ||
        strspn(file, "/") == strlen(file) || strchr(file, '\n'))
        return bfs_fail(e, 400, "FILE must be a path from the volume's root (/dir/file) or "
                        "gfid:UUID, not '%s'", file ? file : "");
    return 0;
}

/* One --resolve run; appends {"file", "ok", "message"} to results. */
static int resolve_one(struct bfs_mgmt *m, const char *volfile, const char *policy,
                       const char *file, const char *client, struct json_object *results,
                       struct bfs_err *e)
{
    char *argv[] = {NULL, (char *)"--volfile", (char *)volfile, (char *)"--resolve",
                    (char *)policy, (char *)"--file", (char *)file, NULL, NULL, NULL};
    if (client) {
        argv[7] = (char *)"--source-brick";
        argv[8] = (char *)client;
    }
    struct bfs_run_result r;
    struct bfs_err one = {0};
    int rc = run_shd(m, argv, &r, 409, &one);
    char msg[600];
    if (rc == 0) {
        last_line(r.out, msg, sizeof(msg));
        bfs_run_result_free(&r);
    }
    struct json_object *j = json_object_new_object();
    json_object_object_add(j, "file", json_object_new_string(file));
    json_object_object_add(j, "ok", json_object_new_boolean(rc == 0));
    json_object_object_add(j, "message", json_object_new_string(rc == 0 ? msg : one.msg));
    json_object_array_add(results, j);
    if (rc < 0 && e)
        *e = one;
    return rc;
}

/* The files in split-brain in replica set `set` of v (paths, else gfid:UUID). */
static int split_brain_files(struct bfs_mgmt *m, const struct bfs_volume *v, const char *volfile,
                             int set, struct json_object *files, struct bfs_err *e)
{
    char *argv[] = {NULL, (char *)"--volfile", (char *)volfile, (char *)"--info",
                    (char *)"split-brain", (char *)"--json", NULL};
    struct bfs_run_result r;
    if (run_shd(m, argv, &r, 500, e) < 0)
        return -1;
    struct json_object *got = json_tokener_parse(r.out), *bricks;
    bfs_run_result_free(&r);
    if (!got || !json_object_object_get_ex(got, "bricks", &bricks)) {
        json_object_put(got);
        return bfs_fail(e, 500, "brickfs-shd --info split-brain printed no listing");
    }
    for (size_t i = 0; i < json_object_array_length(bricks); i++) {
        struct json_object *b = json_object_array_get_idx(bricks, i), *entries, *o;
        int idx = brick_of(v, b);
        if (idx < 0 || idx / v->replica != set || !json_object_object_get_ex(b, "entries", &entries))
            continue;
        for (size_t k = 0; k < json_object_array_length(entries); k++) {
            struct json_object *en = json_object_array_get_idx(entries, k);
            if (json_object_object_get_ex(en, "split_brain", &o) && !json_object_get_boolean(o))
                continue;
            char f[4200] = "";
            if (json_object_object_get_ex(en, "path", &o) && json_object_is_type(o, json_type_string))
                snprintf(f, sizeof(f), "%s", json_object_get_string(o));
            else if (json_object_object_get_ex(en, "gfid", &o))
                snprintf(f, sizeof(f), "gfid:%s", json_object_get_string(o));
            bool dup = !f[0];
            for (size_t d = 0; d < json_object_array_length(files) && !dup; d++)
                dup = strcmp(json_object_get_string(json_object_array_get_idx(files, d)), f) == 0;
            if (!dup)
                json_object_array_add(files, json_object_new_string(f));
        }
    }
    json_object_put(got);
    return 0;
}

int bfs_op_heal_resolve(struct bfs_mgmt *m, const char *name, const char *policy,
                        const char *file, const char *brick, struct json_object **out,
                        struct bfs_err *e)
{
    bool src = policy && strcmp(policy, "source-brick") == 0;
    if (!policy || (!src && strcmp(policy, "bigger-file") != 0 &&
                    strcmp(policy, "latest-mtime") != 0))
        return bfs_fail(e, 400, "unknown split-brain policy '%s' (bigger-file, latest-mtime, "
                        "source-brick)", policy ? policy : "");
    if (src && !brick)
        return bfs_fail(e, 400, "source-brick needs the brick (HOST:/DIR) whose copies win");
    if (!src && brick)
        return bfs_fail(e, 400, "%s takes no brick: it picks the source itself", policy);
    if ((!src || file) && file_check(file, e) < 0)
        return -1;
    struct bfs_volume *v;
    char volfile[4300], client[160] = "";
    if (heal_volume(m, name, &v, volfile, sizeof(volfile), e) < 0)
        return -1;
    if (v->replica <= 0) { /* versions always name a source: no split-brain to resolve */
        bfs_fail(e, 400, "volume %s is dispersed: it has no split-brain to resolve", name);
        bfs_volume_free(v);
        return -1;
    }
    int idx = src ? find_brick(v, brick, e) : 0, rc = 0;
    if (idx < 0) {
        bfs_volume_free(v);
        return -1;
    }
    if (src)
        snprintf(client, sizeof(client), "%s-client-%d", v->name, v->bricks[idx].id);
    struct json_object *results = json_object_new_array(), *files = json_object_new_array();
    if (file)
        json_object_array_add(files, json_object_new_string(file));
    else
        rc = split_brain_files(m, v, volfile, idx / v->replica, files, e);
    int ok = 0, failed = 0;
    for (size_t i = 0; rc == 0 && i < json_object_array_length(files); i++) {
        const char *f = json_object_get_string(json_object_array_get_idx(files, i));
        if (resolve_one(m, volfile, policy, f, src ? client : NULL, results, file ? e : NULL) < 0)
            failed++;
        else
            ok++;
    }
    if (rc == 0 && file && failed)
        rc = -1; /* one named file: its failure is the answer */
    if (rc == 0) {
        bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s: split-brain %s%s%s: %d resolved, %d failed",
                name, policy, src ? " " : "", src ? brick : "", ok, failed);
        *out = json_object_new_object();
        json_object_object_add(*out, "name", json_object_new_string(name));
        json_object_object_add(*out, "policy", json_object_new_string(policy));
        if (src) {
            char where[4200];
            snprintf(where, sizeof(where), "%s:%s", v->bricks[idx].host, v->bricks[idx].path);
            json_object_object_add(*out, "source_brick", json_object_new_string(where));
        }
        json_object_object_add(*out, "results", json_object_get(results));
        json_object_object_add(*out, "resolved", json_object_new_int(ok));
        json_object_object_add(*out, "failed", json_object_new_int(failed));
    }
    json_object_put(results);
    json_object_put(files);
    bfs_volume_free(v);
    return rc;
}
