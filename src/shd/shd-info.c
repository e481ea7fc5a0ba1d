/*
 * shd-info.c — the one-shot modes of brickfs-shd:
 *
 *   --info [summary|split-brain] [--json]   what every brick's pending index
 *       holds, with each entry's state as replicate sees it now;
 *   --resolve POLICY --file PATH|gfid:UUID [--source-brick CLIENT] [--json]
 *       resolves the split-brain of one file.
 *
 * Both wait (bounded) for the bricks to connect first, print, and return
 * the exit status. The JSON shapes are the contract of
 * docs/man/brickfs-shd.md (brickfsd and the CLI build on them).
 */
#include <errno.h>
#include <stdarg.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shd.h"

#define JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

static int wait_ms(void)
{
    const char *e = getenv("BRICKFS_SHD_WAIT_MS");
    int v = e ? atoi(e) : 0;
    return v > 0 ? v : 10000;
}

/* ---- --info ---- */

static json_object *types_array(const char *list)
{
    json_object *a = json_object_new_array();
    char buf[64];
    snprintf(buf, sizeof(buf), "%s", list);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        json_object_array_add(a, json_object_new_string(t));
    return a;
}

/* The path of a directory (the bricks keep directories' names in their
 * handles; a file's names are not recorded): a JSON string, or null. */
static json_object *dir_path(struct shd *s, struct shd_set *set, const struct bfs_gfid *g,
                             const struct shd_status *st)
{
    if (st->rc < 0 || strcmp(st->ftype, "directory") != 0)
        return NULL;
    struct bfs_getxattr_req req = {.name = "brickfs.path"};
    struct bfs_getxattr_rep rep;
    req.loc.gfid = *g;
    json_object *out = NULL;
    const char *path = NULL;
    if (bfs_sync_getxattr(set->afr, s->st, &req, &rep) >= 0 &&
        bfs_dict_get_str(rep.xattrs, "brickfs.path", &path) == 0 && path)
        out = json_object_new_string(path);
    bfs_getxattr_rep_clear_dup(&rep);
    return out;
}

/* One brick's object; *nsplit counts its split-brain entries. */
static json_object *brick_info(struct shd *s, struct shd_set *set, int i, bool up,
                               const char *what, uint64_t *pending, uint64_t *nsplit)
{
    struct bfs_xl *c = set->child[i];
    json_object *b = json_object_new_object(), *entries = json_object_new_array();
    json_object_object_add(b, "client", json_object_new_string(c->name));
    json_object_object_add(b, "remote_host",
                           json_object_new_string(shd_child_opt(c, "remote-host")));
    json_object_object_add(b, "remote_subvolume",
                           json_object_new_string(shd_child_opt(c, "remote-subvolume")));
    struct bfs_gfid *v = NULL;
    size_t n = 0;
    if (up && shd_list_index(s, c, &v, &n) < 0)
        up = false;
    json_object_object_add(b, "status",
                           json_object_new_string(up ? "connected" : "disconnected"));
    *pending = n;
    *nsplit = 0;
    json_object_object_add(b, "pending", json_object_new_int64((int64_t)n));
    for (size_t k = 0; k < n; k++) {
        struct shd_status st;
        char gs[BFS_GFID_STRLEN];
        shd_status(s, set, &v[k], "brickfs.heal.status", &st);
        bool split = st.rc >= 0 && st.split[0];
        *nsplit += split;
        if (strcmp(what, "summary") == 0 || (strcmp(what, "split-brain") == 0 && !split))
            continue;
        json_object *e = json_object_new_object();
        json_object_object_add(e, "gfid", json_object_new_string(bfs_gfid_fmt(&v[k], gs)));
        json_object_object_add(e, "path", dir_path(s, set, &v[k], &st));
        json_object_object_add(e, "split_brain", json_object_new_boolean(split));
        json_object_object_add(e, "types", types_array(st.rc >= 0 ? st.pending : ""));
        json_object_array_add(entries, e);
    }
    free(v);
    if (strcmp(what, "summary") != 0)
        json_object_object_add(b, "entries", entries);
    else
        json_object_put(entries);
    return b;
}

static void print_text(json_object *root)
{
    json_object *bricks, *v;
    json_object_object_get_ex(root, "bricks", &bricks);
    for (size_t i = 0; i < json_object_array_length(bricks); i++) {
        json_object *b = json_object_array_get_idx(bricks, i), *entries;
        const char *host = "", *sub = "", *cl = "", *status = "";
        if (json_object_object_get_ex(b, "remote_host", &v))
            host = json_object_get_string(v);
        if (json_object_object_get_ex(b, "remote_subvolume", &v))
            sub = json_object_get_string(v);
        if (json_object_object_get_ex(b, "client", &v))
            cl = json_object_get_string(v);
        if (json_object_object_get_ex(b, "status", &v))
            status = json_object_get_string(v);
        json_object_object_get_ex(b, "pending", &v);
        printf("Brick %s:%s (%s)\nStatus: %s\nNumber of entries: %lld\n", host, sub, cl, status,
               (long long)json_object_get_int64(v));
        if (json_object_object_get_ex(b, "entries", &entries))
            for (size_t k = 0; k < json_object_array_length(entries); k++) {
                json_object *e = json_object_array_get_idx(entries, k), *g, *sb, *ty, *pa;
                json_object_object_get_ex(e, "gfid", &g);
                json_object_object_get_ex(e, "split_brain", &sb);
                json_object_object_get_ex(e, "types", &ty);
                json_object_object_get_ex(e, "path", &pa);
                if (pa)
                    printf("%s ", json_object_get_string(pa));
                printf("<gfid:%s>%s%s\n", json_object_get_string(g),
                       json_object_get_boolean(sb) ? " - split-brain" : "",
                       json_object_array_length(ty) ? "" : " - no longer pending");
            }
        printf("\n");
    }
    json_object_object_get_ex(root, "total_pending", &v);
    printf("Total pending: %lld\n", (long long)json_object_get_int64(v));
    json_object_object_get_ex(root, "split_brain", &v);
    printf("In split-brain: %lld\n", (long long)json_object_get_int64(v));
}

int shd_info(struct shd *s, const char *what, bool json)
{
    shd_wait_children(s, wait_ms());
    json_object *root = json_object_new_object(), *bricks = json_object_new_array();
    uint64_t total = 0, split = 0;
    json_object_object_add(root, "volume", json_object_new_string(s->volume));
    for (int k = 0; k < s->nsets; k++) {
        struct shd_set *set = &s->sets[k];
        uint32_t up = shd_set_up(set);
        uint64_t set_split = 0;
        for (int i = 0; i < set->n; i++) {
            uint64_t pending = 0, nsplit = 0;
            json_object *b = brick_info(s, set, i, up & (1u << i), what, &pending, &nsplit);
            json_object_array_add(bricks, b);
            total += pending;
            /* a split-brain is listed by each brick that blames: count the
             * set's most, not their sum */
            set_split = nsplit > set_split ? nsplit : set_split;
        }
        split += set_split;
    }
    json_object_object_add(root, "bricks", bricks);
    json_object_object_add(root, "total_pending", json_object_new_int64((int64_t)total));
    json_object_object_add(root, "split_brain", json_object_new_int64((int64_t)split));
    if (json)
        printf("%s\n", json_object_to_json_string_ext(root, JSON_FLAGS));
    else
        print_text(root);
    json_object_put(root);
    return 0;
}

/* ---- --resolve ---- */

/* The GFID of path, looked up from the root through the whole graph. */
static int resolve_path(struct shd *s, const char *path, struct bfs_gfid *out)
{
    struct bfs_gfid cur = {{0}};
    cur.b[15] = 1;
    char *copy = strdup(path), *save = NULL;
    if (!copy)
        return -ENOMEM;
    int rc = 0;
    for (char *c = strtok_r(copy, "/", &save); c && rc == 0; c = strtok_r(NULL, "/", &save)) {
        struct bfs_lookup_req req = {0};
        struct bfs_lookup_rep rep;
        req.loc.pargfid = cur;
        req.loc.name = c;
        rc = bfs_sync_lookup(s->g->top, s->st, &req, &rep);
        if (rc >= 0) {
            cur = rep.attr.gfid;
            rc = 0;
        }
        bfs_lookup_rep_clear_dup(&rep);
    }
    free(copy);
    *out = cur;
    return rc;
}

__attribute__((format(printf, 2, 3))) static int fail(bool json, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "error", json_object_new_string(msg));
        printf("%s\n", json_object_to_json_string_ext(o, JSON_FLAGS));
        json_object_put(o);
    }
    fprintf(stderr, SHD_PROG ": %s\n", msg);
    return 1;
}

static const char *resolve_error(int rc)
{
    switch (-rc) {
    case EALREADY: return "is not in split-brain";
    case ENOENT: return "no such file";
    case ENOTUNIQ: return "the policy could not decide (the copies are equal by it)";
    case ENOTCONN: return "the source brick is not connected";
    case EINVAL: return "unknown policy or source brick";
    case EPERM: return "permission denied (run as root)";
    default: return "the heal from the chosen source failed";
    }
}

int shd_resolve(struct shd *s, const char *policy, const char *file, const char *source,
                bool json)
{
    char value[512], gs[BFS_GFID_STRLEN];
    if (strcmp(policy, "source-brick") == 0) {
        if (!source)
            return fail(json, "%s needs --source-brick CLIENT-NAME", policy);
        snprintf(value, sizeof(value), "source-brick:%s", source);
    } else if (strcmp(policy, "bigger-file") == 0 || strcmp(policy, "latest-mtime") == 0) {
        snprintf(value, sizeof(value), "%s", policy);
    } else {
        return fail(json, "unknown policy '%s' (bigger-file, latest-mtime, source-brick)",
                    policy);
    }
    shd_wait_children(s, wait_ms());
    struct bfs_gfid g;
    int rc = strncmp(file, "gfid:", 5) == 0 ? (bfs_gfid_parse(file + 5, &g) < 0 ? -EINVAL : 0)
                                            : resolve_path(s, file, &g);
    if (rc < 0)
        return fail(json, "%s: %s", file,
                    rc == -EINVAL ? "not a GFID" : rc == -ENOENT ? "no such file" : strerror(-rc));
    struct shd_set *set = NULL;
    struct shd_status st = {0};
    for (int k = 0; k < s->nsets && !set; k++) {
        shd_status(s, &s->sets[k], &g, "brickfs.heal.status", &st);
        if (st.rc >= 0 && strcmp(st.ftype, "none") != 0)
            set = &s->sets[k];
    }
    if (!set)
        return fail(json, "%s: no such file on any replica set", file);
    if (source) {
        bool found = false;
        for (int i = 0; i < set->n; i++)
            found = found || strcmp(set->child[i]->name, source) == 0;
        if (!found)
            return fail(json, "%s is not a brick of the file's replica set", source);
    }
    if (!st.split[0])
        return fail(json, "%s is not in split-brain", file);
    struct bfs_setxattr_req req = {.xattrs = bfs_dict_new()};
    req.loc.gfid = g;
    rc = req.xattrs ? bfs_dict_set_str(req.xattrs, "brickfs.heal.resolve", value) : -ENOMEM;
    if (rc == 0)
        rc = bfs_sync_setxattr(set->afr, s->st, &req, NULL);
    bfs_dict_unref(req.xattrs);
    if (rc < 0)
        return fail(json, "%s: %s", file, resolve_error(rc));
    if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "volume", json_object_new_string(s->volume));
        json_object_object_add(o, "file", json_object_new_string(file));
        json_object_object_add(o, "gfid", json_object_new_string(bfs_gfid_fmt(&g, gs)));
        json_object_object_add(o, "policy", json_object_new_string(policy));
        if (source)
            json_object_object_add(o, "source_brick", json_object_new_string(source));
        json_object_object_add(o, "resolved", json_object_new_boolean(1));
        printf("%s\n", json_object_to_json_string_ext(o, JSON_FLAGS));
        json_object_put(o);
    } else {
        printf("%s (gfid %s): split-brain resolved by %s%s%s\n", file, bfs_gfid_fmt(&g, gs),
               policy, source ? " " : "", source ? source : "");
    }
    return 0;
}
