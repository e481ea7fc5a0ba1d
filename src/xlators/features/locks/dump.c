/*
 * dump.c — the statedump of features/locks as JSON (json-c):
 *
 *   {"xlator": NAME, "inodes": [{"gfid": ...,
 *       "posix": [LOCK...], "flock": [LOCK...], "lk_blocked": [LOCK...],
 *       "domains": {DOMAIN: {"inodelk": [...], "inodelk_blocked": [...],
 *                            "entrylk": [...], "entrylk_blocked": [...]}},
 *       "leases": [{"client":..., "id":..., "type":...}]}]}
 *
 * LOCK = {"type": "RDLCK"|"WRLCK", "start", "len" (0 = to EOF), "pid",
 * "owner" (hex), "client" (pointer, hex), "age_ms"}, plus "basename" for
 * entrylk (null = whole directory). The caller frees the returned text.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "locks.h"

static json_object *hex(uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
    return json_object_new_string(buf);
}

static json_object *lock_json(const struct pl_lock *l, uint64_t now)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "type",
                           json_object_new_string(l->type == F_WRLCK ? "WRLCK" : "RDLCK"));
    if (l->kind == PL_ENTRYLK) {
        json_object_object_add(o, "basename",
                               l->basename ? json_object_new_string(l->basename) : NULL);
    } else if (l->kind != PL_FLOCK) {
        json_object_object_add(o, "start", json_object_new_uint64(l->start));
        json_object_object_add(
            o, "len", json_object_new_uint64(l->end == UINT64_MAX ? 0 : l->end - l->start + 1));
    }
    json_object_object_add(o, "pid", json_object_new_int64(l->pid));
    json_object_object_add(o, "owner", hex(l->owner.id));
    json_object_object_add(o, "client", hex((uint64_t)(uintptr_t)l->owner.client));
    json_object_object_add(o, "age_ms",
                           json_object_new_uint64(now > l->since_ns ? (now - l->since_ns) / 1000000 : 0));
    return o;
}

static json_object *locks_json(const struct pl_list *h, uint64_t now)
{
    json_object *a = json_object_new_array();
    const struct pl_list *pos;
    pl_foreach(pos, h)
    {
        json_object_array_add(a, lock_json(pl_entry(pos, struct pl_lock, link), now));
    }
    return a;
}

static json_object *waiters_json(const struct pl_list *h, uint64_t now)
{
    json_object *a = json_object_new_array();
    const struct pl_list *pos;
    pl_foreach(pos, h)
    {
        json_object_array_add(a, lock_json(pl_entry(pos, struct pl_waiter, link)->lock, now));
    }
    return a;
}

static json_object *leases_json(const struct pl_list *h)
{
    json_object *a = json_object_new_array();
    const struct pl_list *pos;
    pl_foreach(pos, h)
    {
        const struct pl_lease *l = pl_entry(pos, struct pl_lease, link);
        char id[33];
        for (int i = 0; i < 16; i++)
            snprintf(id + 2 * i, 3, "%02x", l->id[i]);
        json_object *o = json_object_new_object();
        json_object_object_add(o, "type",
                               json_object_new_string(l->type == F_WRLCK ? "WRLCK" : "RDLCK"));
        json_object_object_add(o, "id", json_object_new_string(id));
        json_object_object_add(o, "client", hex((uint64_t)(uintptr_t)l->client));
        json_object_array_add(a, o);
    }
    return a;
}

/* Under pin->lock. */
static json_object *inode_json(struct pl_inode *pin, uint64_t now)
{
    char g[BFS_GFID_STRLEN];
    json_object *o = json_object_new_object();
    json_object_object_add(o, "gfid", json_object_new_string(bfs_gfid_fmt(&pin->gfid, g)));
    json_object_object_add(o, "posix", locks_json(&pin->posix, now));
    json_object_object_add(o, "flock", locks_json(&pin->flocks, now));
    json_object_object_add(o, "lk_blocked", waiters_json(&pin->lk_blocked, now));
    json_object *doms = json_object_new_object();
    const struct pl_list *pos;
    pl_foreach(pos, &pin->domains)
    {
        const struct pl_domain *d = pl_entry(pos, struct pl_domain, link);
        json_object *dj = json_object_new_object();
        json_object_object_add(dj, "inodelk", locks_json(&d->inodelks, now));
        json_object_object_add(dj, "inodelk_blocked", waiters_json(&d->inodelk_blocked, now));
        json_object_object_add(dj, "entrylk", locks_json(&d->entrylks, now));
        json_object_object_add(dj, "entrylk_blocked", waiters_json(&d->entrylk_blocked, now));
        json_object_object_add(doms, d->name, dj);
    }
    json_object_object_add(o, "domains", doms);
    json_object_object_add(o, "leases", leases_json(&pin->leases));
    return o;
}

char *bfs__pl_dump(struct bfs_xl *xl)
{
    uint64_t now = bfs_now_ns();
    json_object *root = json_object_new_object();
    json_object *inodes = json_object_new_array();
    json_object_object_add(root, "xlator", json_object_new_string(xl->name));
    struct pl_priv *priv = xl->private;
    json_object_object_add(root, "contention_notices",
                           json_object_new_int64((int64_t)__atomic_load_n(&priv->notices,
                                                                          __ATOMIC_RELAXED)));
    size_t n;
    struct pl_inode **all = bfs__pl_inode_all(xl, &n);
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&all[i]->lock);
        json_object_array_add(inodes, inode_json(all[i], now));
        pthread_mutex_unlock(&all[i]->lock);
        bfs__pl_inode_put(xl, all[i]);
    }
    free(all);
    json_object_object_add(root, "inodes", inodes);
    char *text = strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
    json_object_put(root);
    return text;
}
