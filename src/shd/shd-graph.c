/*
 * shd-graph.c — the client graph of brickfs-shd: built from the volume's
 * ordinary client volfile, its cluster/replicate and cluster/disperse
 * translators found by type (each one a set the daemon heals: both answer
 * the same virtual xattrs, brickfs.heal.*), and which of their children
 * are up, read from the set's statedump ("up": the child mask the
 * translator itself uses), so that the daemon sees what the set sees.
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shd.h"

/* A translator whose children the daemon heals: replicate or disperse. */
static bool is_set(const struct bfs_xl *xl)
{
    return strcmp(xl->type, "cluster/replicate") == 0 ||
           strcmp(xl->type, "cluster/disperse") == 0;
}

int shd_graph_open(struct shd *s)
{
    char err[1024];
    if (!(s->proc = bfs_proc_new(SHD_PROG, 2))) {
        fprintf(stderr, SHD_PROG ": cannot start the event loop and workers\n");
        return -ENOMEM;
    }
    if (bfs_graph_from_file(s->volfile, s->proc, &s->g, err, sizeof(err)) < 0) {
        fprintf(stderr, SHD_PROG ": %s\n", err);
        return -EINVAL;
    }
    int rc = bfs_graph_init(s->g);
    if (rc < 0) {
        fprintf(stderr, SHD_PROG ": the graph of %s did not start: %s\n", s->volfile,
                strerror(-rc));
        bfs_graph_free(s->g);
        s->g = NULL;
        return rc;
    }
    s->volume = s->g->top->name;
    for (int i = 0; i < s->g->nxls; i++)
        if (is_set(s->g->xls[i]))
            s->nsets++;
    s->sets = calloc((size_t)(s->nsets ? s->nsets : 1), sizeof(*s->sets));
    if (!s->sets)
        return -ENOMEM;
    int k = 0;
    for (int i = 0; i < s->g->nxls; i++) {
        struct bfs_xl *xl = s->g->xls[i];
        if (!is_set(xl))
            continue;
        struct shd_set *set = &s->sets[k++];
        set->afr = xl;
        set->n = xl->nchildren < SHD_MAX_CHILDREN ? xl->nchildren : SHD_MAX_CHILDREN;
        for (int c = 0; c < set->n; c++)
            set->child[c] = xl->children[c];
    }
    if (!(s->st = bfs_stack_new()))
        return -ENOMEM;
    bfs_graph_activate(s->g);
    return 0;
}

void shd_graph_close(struct shd *s)
{
    if (s->g)
        bfs_graph_free(s->g);
    if (s->proc)
        bfs_proc_free(s->proc);
    if (s->st)
        bfs_stack_unref(s->st);
    free(s->sets);
    s->g = NULL;
    s->proc = NULL;
    s->st = NULL;
    s->sets = NULL;
}

/* A child mask of the set's statedump ("up", "reported"). */
static uint32_t dump_mask(const struct shd_set *set, const char *key)
{
    struct bfs_xl *xl = set->afr;
    if (!xl->mod->dump)
        return 0;
    char *text = xl->mod->dump(xl);
    uint32_t m = 0;
    json_object *o = text ? json_tokener_parse(text) : NULL, *v;
    if (o && json_object_object_get_ex(o, key, &v))
        m = (uint32_t)json_object_get_int64(v);
    json_object_put(o);
    free(text);
    return m;
}

uint32_t shd_set_up(const struct shd_set *set)
{
    return dump_mask(set, "up");
}

/* Has every child of every set said whether it is up (all: is every one up)? */
static bool settled(struct shd *s, bool all)
{
    for (int i = 0; i < s->nsets; i++) {
        uint32_t want = s->sets[i].n >= 32 ? ~0u : (1u << s->sets[i].n) - 1;
        if ((dump_mask(&s->sets[i], all ? "up" : "reported") & want) != want)
            return false;
    }
    return true;
}

void shd_wait_children(struct shd *s, int timeout_ms)
{
    /* every child up; or every child heard from and a second more for the
     * ones that are down to come (a brick just restarted) */
    int grace = -1;
    for (int waited = 0; waited < timeout_ms && !settled(s, true); waited += 50) {
        if (grace < 0 && settled(s, false))
            grace = waited + 1000;
        if (grace >= 0 && waited >= grace)
            break;
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

const char *shd_child_opt(const struct bfs_xl *child, const char *key)
{
    const char *v = NULL;
    if (child->options && bfs_dict_get_str(child->options, key, &v) == 0 && v)
        return v;
    return "";
}
