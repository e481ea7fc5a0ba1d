/*
 * layout.c — the volume's distribute table as management keeps it
 * (docs/design/rebalance.md, "Tables"): the table in force and the previous
 * one in their text forms, brick weights from statvfs, and the changes
 * add-brick, fix-layout, remove-brick and commit make to them. The
 * arithmetic is distribute's own dht-layout.c, compiled in here so that
 * brickfsd and the clients can never disagree on it.
 *
 * Everything works on a struct bfs_volume in memory; the caller saves it.
 * Tables made here are freed before returning.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "mgmt/layout.h"
#include "xlators/cluster/distribute/dht-layout.c"

static int set_text(char **slot, const char *text)
{
    char *n = strdup(text);
    if (!n)
        return -ENOMEM;
    free(*slot);
    *slot = n;
    return 0;
}

int bfs_layout_current(const struct bfs_volume *v, int nsub, struct dht_table **out,
                       struct bfs_err *e)
{
    char why[200];
    int rc = dht_table_parse(v->layout_table, nsub, out, why, sizeof(why));
    if (rc == -EINVAL)
        return bfs_fail(e, 500, "volume %s: its layout does not parse: %s", v->name, why);
    if (rc < 0)
        return bfs_fail(e, 500, "out of memory");
    (*out)->nsubvols = nsub;
    return 0;
}

int bfs_layout_pin(struct bfs_volume *v)
{
    if (v->layout_table && v->layout_table[0])
        return 0;
    char t[32];
    snprintf(t, sizeof(t), "canonical:%d", bfs_volume_nsubvols(v));
    return set_text(&v->layout_table, t);
}

/* Size of the folder's file system in bytes (0 when unknown). */
static uint64_t brick_size(const char *path)
{
    struct statvfs sv;
    if (statvfs(path, &sv) < 0)
        return 0;
    return (uint64_t)sv.f_blocks * (uint64_t)sv.f_frsize;
}

static bool leaving(const struct bfs_volume *v, int brick)
{
    for (int i = 0; i < v->nremove; i++)
        if (v->remove_ids[i] == v->bricks[brick].id)
            return true;
    return false;
}

void bfs_layout_weights(const struct bfs_volume *v, uint64_t *w)
{
    int per = v->replica > 0 ? v->replica : 1, n = bfs_volume_nsubvols(v);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int s = 0; s < n; s++) {
        uint64_t min = UINT64_MAX;
        for (int b = s * per; b < (s + 1) * per; b++) {
            uint64_t sz = brick_size(v->bricks[b].path);
            min = sz < min ? sz : min;
        }
        w[s] = min ? min : 1;
        lo = w[s] < lo ? w[s] : lo;
        hi = w[s] > hi ? w[s] : hi;
    }
    /* within 5%: equal (one file system, same disks): canonical arithmetic */
    bool equal = hi - lo <= hi / 20;
    for (int s = 0; s < n; s++) {
        if (equal)
            w[s] = 1;
        if (leaving(v, s * per))
            w[s] = 0;
    }
}

/* The table as its shortest text: "" when canonical for n. */
static char *short_text(const struct dht_table *t)
{
    struct dht_table *c = dht_table_canonical(t->nsubvols);
    bool canon = c && memcmp(c->map, t->map, sizeof(c->map)) == 0;
    dht_table_free(c);
    return canon ? strdup("") : dht_table_format(t);
}

long bfs_layout_fix(struct bfs_volume *v, const uint64_t *w, struct bfs_err *e)
{
    int n = bfs_volume_nsubvols(v);
    struct dht_table *t;
    if (bfs_layout_current(v, n, &t, e) < 0)
        return -1;
    long moved = dht_table_retarget(t, n, w);
    if (moved < 0) {
        dht_table_free(t);
        return bfs_fail(e, 500, "cannot compute the new layout: %s", strerror((int)-moved));
    }
    if (moved == 0) {
        dht_table_free(t);
        return 0;
    }
    char *text = short_text(t);
    dht_table_free(t);
    /* previous: the table in force, as the clients parse it today */
    const char *cur = v->layout_table && v->layout_table[0] ? v->layout_table : NULL;
    char canon[32];
    if (!cur) {
        snprintf(canon, sizeof(canon), "canonical:%d", n);
        cur = canon;
    }
    if (!text || set_text(&v->layout_prev, cur) < 0) {
        free(text);
        return bfs_fail(e, 500, "out of memory");
    }
    free(v->layout_table);
    v->layout_table = text;
    v->layout_version++;
    return moved;
}

int bfs_layout_drop(struct bfs_volume *v, const int *subvols, int nsub, struct bfs_err *e)
{
    int n = bfs_volume_nsubvols(v);
    struct dht_table *t;
    if (bfs_layout_current(v, n, &t, e) < 0)
        return -1;
    for (int i = nsub; i-- > 0;) { /* highest position first: the others keep theirs */
        if (dht_table_drop_empty(t, subvols[i]) < 0) {
            dht_table_free(t);
            return bfs_fail(e, 409, "subvolume %d still owns buckets of the layout", subvols[i]);
        }
    }
    char *text = short_text(t);
    dht_table_free(t);
    if (!text || set_text(&v->layout_prev, "") < 0) {
        free(text);
        return bfs_fail(e, 500, "out of memory");
    }
    free(v->layout_table);
    v->layout_table = text;
    v->layout_version++;
    return 0;
}

int bfs_layout_finish(struct bfs_volume *v)
{
    if (!v->layout_prev || !v->layout_prev[0])
        return 0;
    int rc = set_text(&v->layout_prev, "");
    if (rc == 0)
        v->layout_version++;
    return rc;
}
