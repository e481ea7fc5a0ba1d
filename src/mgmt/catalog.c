/*
 * catalog.c — the option catalogue of `volume set`: the descriptors of
 * every translator that volgen places, read from the translators'
 * modules themselves (dlopen of CLASS/NAME.so in bfs_xlator_dir(), symbol
 * bfs_xl_module), so the descriptors stay the single source of truth.
 *
 * Lifetime: loaded once at startup; the modules stay open (descriptors
 * point into them) until bfs_catalog_free().
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "core/graph.h"
#include "core/options.h"
#include "core/xlator.h"
#include "mgmt/mgmt.h"

struct xl_type {
    const char *type;
    unsigned sides;
};

/* What volgen places (volgen.c). */
static const struct xl_type xl_types[] = {
    {"storage/posix", BFS_SIDE_BRICK},     {"features/index", BFS_SIDE_BRICK},
    {"features/locks", BFS_SIDE_BRICK},    {"features/upcall", BFS_SIDE_BRICK},
    {"performance/md-cache", BFS_SIDE_CLIENT}, {"performance/write-behind", BFS_SIDE_CLIENT},
    {"protocol/server", BFS_SIDE_BRICK},   {"debug/io-stats", BFS_SIDE_BRICK | BFS_SIDE_CLIENT},
    {"protocol/client", BFS_SIDE_CLIENT},  {"cluster/distribute", BFS_SIDE_CLIENT},
    {"cluster/replicate", BFS_SIDE_CLIENT},  {"cluster/disperse", BFS_SIDE_CLIENT},
};
#define NTYPES (sizeof(xl_types) / sizeof(xl_types[0]))

/* brickfsd's own volume options: what it does for a volume rather than
 * what a translator does (docs/design/management.md, "Self-heal daemon").
 * They go into no volfile; `volume set` applies them at once. */
static const struct bfs_option_desc mgmt_options[] = {
    {.key = BFS_OPT_SHD, .type = BFS_OPT_BOOL, .def = "on",
     .description = "run a self-heal daemon (brickfs-shd) for this replicated or dispersed "
                    "volume while it is started",
     .flags = BFS_OPT_F_SETTABLE | BFS_OPT_F_RECONF},
    {.key = BFS_OPT_HEAL_INTERVAL, .type = BFS_OPT_TIME, .def = "600", .min = 5, .max = 86400,
     .description = "seconds between two index crawls of the self-heal daemon (volume heal "
                    "NAME crawls at once)",
     .flags = BFS_OPT_F_SETTABLE | BFS_OPT_F_RECONF},
    {.key = NULL},
};

struct bfs_catalog {
    void *handles[NTYPES];
    const struct bfs_xl_module *mods[NTYPES];
    struct bfs_catalog_entry *entries;
    int n;
};

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const struct bfs_catalog_entry *)a)->d->key,
                  ((const struct bfs_catalog_entry *)b)->d->key);
}

/* t: index in xl_types, or NTYPES for brickfsd's own options. */
static int add_options(struct bfs_catalog *c, size_t t)
{
    const struct bfs_option_desc *table = t < NTYPES ? c->mods[t]->options : mgmt_options;
    const char *xl = t < NTYPES ? xl_types[t].type : "brickfsd";
    unsigned sides = t < NTYPES ? xl_types[t].sides : BFS_SIDE_MGMT;
    for (const struct bfs_option_desc *d = table; d && d->key; d++) {
        if (!(d->flags & BFS_OPT_F_SETTABLE))
            continue;
        struct bfs_catalog_entry *ce = NULL;
        for (int i = 0; i < c->n && !ce; i++)
            if (strcmp(c->entries[i].d->key, d->key) == 0)
                ce = &c->entries[i];
        if (!ce) {
            struct bfs_catalog_entry *ne = realloc(c->entries, (size_t)(c->n + 1) * sizeof(*ne));
            if (!ne)
                return -ENOMEM;
            c->entries = ne;
            ce = &ne[c->n++];
            memset(ce, 0, sizeof(*ce));
            ce->d = d;
        }
        if (ce->nxlators < 8)
            ce->xlators[ce->nxlators++] = xl;
        ce->sides |= sides;
    }
    return 0;
}

int bfs_catalog_load(struct bfs_mgmt *m)
{
    struct bfs_catalog *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    for (size_t t = 0; t < NTYPES; t++) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s.so", bfs_xlator_dir(), xl_types[t].type);
        c->handles[t] = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!c->handles[t]) {
            bfs_log(MGMT_LOG, BFS_LOG_INFO, "translator %s is not available (%s); its "
                    "options are left out", xl_types[t].type, dlerror());
            continue;
        }
        const struct bfs_xl_module *mod = dlsym(c->handles[t], "bfs_xl_module");
        if (!mod || mod->abi != BFS_XL_ABI) {
            bfs_log(MGMT_LOG, BFS_LOG_WARNING, "%s exports no usable bfs_xl_module", path);
            dlclose(c->handles[t]);
            c->handles[t] = NULL;
            continue;
        }
        c->mods[t] = mod;
        if (add_options(c, t) < 0) {
            bfs_catalog_free(c);
            return -ENOMEM;
        }
    }
    if (add_options(c, NTYPES) < 0) {
        bfs_catalog_free(c);
        return -ENOMEM;
    }
    if (c->n)
        qsort(c->entries, (size_t)c->n, sizeof(*c->entries), cmp_entry);
    m->catalog = c;
    return 0;
}

void bfs_catalog_free(struct bfs_catalog *c)
{
    if (!c)
        return;
    free(c->entries);
    for (size_t t = 0; t < NTYPES; t++)
        if (c->handles[t])
            dlclose(c->handles[t]);
    free(c);
}

bool bfs_catalog_has_xlator(const struct bfs_catalog *c, const char *type)
{
    for (size_t t = 0; t < NTYPES; t++)
        if (strcmp(xl_types[t].type, type) == 0)
            return c->mods[t] != NULL;
    return false;
}

const struct bfs_catalog_entry *bfs_catalog_entries(const struct bfs_catalog *c, int *n)
{
    *n = c->n;
    return c->entries;
}

const struct bfs_catalog_entry *bfs_catalog_find(const struct bfs_catalog *c, const char *key)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->entries[i].d->key, key) == 0)
            return &c->entries[i];
    return NULL;
}

const struct bfs_option_desc *bfs_catalog_xlator_opt(const struct bfs_catalog *c,
                                                     const char *type, const char *key)
{
    for (size_t t = 0; t < NTYPES; t++)
        if (c->mods[t] && strcmp(xl_types[t].type, type) == 0 && c->mods[t]->options)
            return bfs_option_find(c->mods[t]->options, key);
    return NULL;
}

struct json_object *bfs_catalog_entry_json(const struct bfs_catalog_entry *ce)
{
    const struct bfs_option_desc *d = ce->d;
    struct json_object *j = json_object_new_object();
    json_object_object_add(j, "key", json_object_new_string(d->key));
    json_object_object_add(j, "type", json_object_new_string(bfs_opt_type_name(d->type)));
    json_object_object_add(j, "default", d->def ? json_object_new_string(d->def) : NULL);
    if (d->min != 0 || d->max != 0) {
        json_object_object_add(j, "min", json_object_new_int64(d->min));
        json_object_object_add(j, "max", json_object_new_int64(d->max));
    }
    if (d->values) {
        struct json_object *vals = json_object_new_array();
        for (const char *const *v = d->values; *v; v++)
            json_object_array_add(vals, json_object_new_string(*v));
        json_object_object_add(j, "values", vals);
    }
    json_object_object_add(j, "description",
                           json_object_new_string(d->description ? d->description : ""));
    unsigned xs = ce->sides & (BFS_SIDE_CLIENT | BFS_SIDE_BRICK);
    const char *side = xs == (BFS_SIDE_CLIENT | BFS_SIDE_BRICK) ? "both"
                       : xs == BFS_SIDE_CLIENT                  ? "client"
                       : xs == BFS_SIDE_BRICK                   ? "brick"
                                                                : "management";
    json_object_object_add(j, "side", json_object_new_string(side));
    struct json_object *xls = json_object_new_array();
    for (int i = 0; i < ce->nxlators; i++)
        json_object_array_add(xls, json_object_new_string(ce->xlators[i]));
    json_object_object_add(j, "translators", xls);
    json_object_object_add(j, "live", json_object_new_boolean(!!(d->flags & BFS_OPT_F_RECONF)));
    return j;
}
