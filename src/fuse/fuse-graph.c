/*
 * fuse-graph.c — graph generations of a mount (docs/design/graph-switch.md).
 *
 * A generation (struct bfs_fuse_graph) is one client graph built from one
 * volfile text: its translators, connections and inode table, plus what the
 * bridge counts about it under fu->lock — calls in flight on it, open files
 * whose fd lives in it, and whether its last event was CHILD_UP.
 *
 * Life: bfs_fuse_graph_new builds, initialises and activates it (clients
 * connect); it becomes the active generation (fuse-session.c at the start,
 * fuse-switch.c later), is retired by the next switch, and is freed by
 * bfs_fuse_graph_free once idle — or at unmount. Graph events arrive on the
 * event loop through on_event with g->owner pointing here.
 *
 * Once a generation is up, the bridge looks its root up by GFID
 * (bfs_fuse_graph_first_lookup), as GlusterFS's fuse does: the kernel
 * never sends a lookup of the root, and translators do their once-per-graph
 * root work on it (distribute stamps and checks the layout-version on the
 * bricks, warning about a stale volfile).
 *
 * Also here: the brickfs.graph virtual xattr, a JSON view of the active
 * generation (bfs_fuse_graph_dump).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "fuse/fuse-bridge.h"

static void on_event(struct bfs_graph *g, enum bfs_event ev, void *data)
{
    struct bfs_fuse_graph *gr = g->owner;
    struct bfs_fuse *fu = gr->fu;
    switch (ev) {
    case BFS_EV_CHILD_UP:
    case BFS_EV_CHILD_DOWN: {
        int up = ev == BFS_EV_CHILD_UP;
        pthread_mutex_lock(&fu->lock);
        bool changed = gr->up != up, active = fu->active == gr;
        gr->up = up;
        pthread_cond_broadcast(&fu->cond);
        pthread_mutex_unlock(&fu->lock);
        if (changed && active && up)
            bfs_log("fuse", BFS_LOG_INFO, "volume %s is up", g->top->name);
        else if (changed && active)
            bfs_log("fuse", BFS_LOG_WARNING, "volume %s is down: operations fail with "
                    "ENOTCONN until it is back", g->top->name);
        break;
    }
    case BFS_EV_UPCALL:
        if (data && !((const struct bfs_upcall *)data)->local)
            bfs_fuse_notify_post(fu->notify, data);
        break;
    default:
        break;
    }
}

int bfs_fuse_graph_new(struct bfs_fuse *fu, const char *text, size_t len, const char *source,
                       const char *rev, struct bfs_fuse_graph **out, char *err, size_t errlen)
{
    struct bfs_fuse_graph *gr = calloc(1, sizeof(*gr));
    if (!gr) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    gr->fu = fu;
    snprintf(gr->rev, sizeof(gr->rev), "%s", rev ? rev : "");
    err[0] = 0;
    int rc = bfs_graph_from_text(text, len, source, fu->proc, &gr->g, err, errlen);
    if (rc < 0) {
        if (!err[0])
            snprintf(err, errlen, "%s", strerror(-rc));
        free(gr);
        return rc;
    }
    gr->g->owner = gr;
    gr->g->on_event = on_event;
    pthread_mutex_lock(&fu->lock);
    gr->gen = ++fu->generations;
    pthread_mutex_unlock(&fu->lock);
    if ((rc = bfs_graph_init(gr->g)) < 0) {
        snprintf(err, errlen, "the volume's translators failed to start: %s (details in the "
                 "log)", strerror(-rc));
        bfs_graph_free(gr->g);
        free(gr);
        return rc;
    }
    bfs_graph_activate(gr->g);
    *out = gr;
    return 0;
}

int bfs_fuse_graph_wait_up(struct bfs_fuse_graph *gr, int secs)
{
    struct bfs_fuse *fu = gr->fu;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += secs;
    int rc = 0;
    pthread_mutex_lock(&fu->lock);
    while (!gr->up && !fu->stopping && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&fu->cond, &fu->lock, &deadline);
    int up = gr->up;
    pthread_mutex_unlock(&fu->lock);
    return up ? 0 : -ETIMEDOUT;
}

int bfs_fuse_graph_first_lookup(struct bfs_fuse_graph *gr)
{
    struct bfs_inode *root = bfs_itable_root(gr->g->itable);
    struct bfs_stack *st = bfs_stack_new();
    int rc = root && st ? 0 : -ENOMEM;
    if (rc == 0) {
        struct bfs_lookup_req r = {0};
        struct bfs_lookup_rep out = {0};
        bfs_fuse_loc_inode(&r.loc, root);
        rc = bfs_sync_lookup(gr->g->top, st, &r, &out);
        if (rc >= 0)
            bfs_lookup_rep_clear_dup(&out);
    }
    if (st)
        bfs_stack_unref(st);
    if (root)
        bfs_inode_unref(root);
    if (rc < 0)
        bfs_log("fuse", BFS_LOG_WARNING, "graph generation %llu: first lookup of the root: %s",
                (unsigned long long)gr->gen, strerror(-rc));
    return rc;
}

void bfs_fuse_graph_free(struct bfs_fuse_graph *gr)
{
    if (!gr)
        return;
    bfs_graph_free(gr->g); /* deactivates: connections close, pending calls fail */
    free(gr);
}

bool bfs_fuse_graph_idle(const struct bfs_fuse_graph *gr)
{
    return gr->inflight == 0 && gr->fds == 0;
}

/* ---- brickfs.graph ---- */

static int add_opt(const char *key, enum bfs_val_type type, const void *val, size_t len,
                   void *arg)
{
    if (type == BFS_VAL_STR && val) /* volfile options are all text */
        json_object_object_add(arg, key, json_object_new_string_len(val, (int)strnlen(val, len)));
    return 0;
}

static json_object *xl_json(struct bfs_xl *xl)
{
    json_object *o = json_object_new_object(), *opts = json_object_new_object();
    json_object_object_add(o, "name", json_object_new_string(xl->name));
    json_object_object_add(o, "type", json_object_new_string(xl->type));
    if (xl->options)
        bfs_dict_foreach(xl->options, add_opt, opts);
    json_object_object_add(o, "options", opts);
    char *dump = xl->mod->dump && xl->initialized ? xl->mod->dump(xl) : NULL;
    json_object *d = dump ? json_tokener_parse(dump) : NULL;
    if (d)
        json_object_object_add(o, "dump", d);
    free(dump);
    return o;
}

char *bfs_fuse_graph_dump(struct bfs_fuse *fu)
{
    /* Counted as a call, so the generation cannot be retired and freed
     * while we read its translators. */
    pthread_mutex_lock(&fu->lock);
    struct bfs_fuse_graph *gr = fu->active;
    gr->inflight++;
    fu->inflight++;
    uint64_t retired = 0, pinned_fds = 0;
    for (struct bfs_fuse_graph *r = fu->retired; r; r = r->next) {
        retired++;
        pinned_fds += r->fds;
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "generation", json_object_new_int64((int64_t)gr->gen));
    json_object_object_add(o, "volfile_revision", json_object_new_string(gr->rev));
    json_object_object_add(o, "up", json_object_new_boolean(gr->up));
    json_object_object_add(o, "switches", json_object_new_int64((int64_t)fu->switches));
    json_object_object_add(o, "failed_switches",
                           json_object_new_int64((int64_t)fu->failed_switches));
    json_object_object_add(o, "retired_generations", json_object_new_int64((int64_t)retired));
    json_object_object_add(o, "retired_open_files", json_object_new_int64((int64_t)pinned_fds));
    json_object_object_add(o, "open_files", json_object_new_int64((int64_t)gr->fds));
    json_object_object_add(o, "migrated_files", json_object_new_int64((int64_t)fu->migrated));
    json_object_object_add(o, "pinned_files", json_object_new_int64((int64_t)fu->pinned));
    pthread_mutex_unlock(&fu->lock);
    json_object_object_add(o, "nodes", json_object_new_int64((int64_t)bfs_fuse_nodes_count(fu)));
    json_object *xls = json_object_new_array();
    for (int i = 0; i < gr->g->nxls; i++)
        json_object_array_add(xls, xl_json(gr->g->xls[i]));
    json_object_object_add(o, "xlators", xls);
    char *text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
    pthread_mutex_lock(&fu->lock);
    gr->inflight--;
    if (--fu->inflight == 0)
        pthread_cond_broadcast(&fu->cond);
    pthread_mutex_unlock(&fu->lock);
    return text;
}
