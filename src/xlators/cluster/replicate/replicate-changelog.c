/*
 * replicate-changelog.c — the pending matrix on the bricks: key names,
 * the 24-byte rows, the xattrop dicts of pre-op, blame and post-op (the
 * struct bfs_changelog_ops the shared transaction code calls), and the
 * lookup side: asking for the keys with xattr-req and reading the rows
 * back. Nothing here allocates anything that outlives a call.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replicate.h"

int afr_dict_add_row(const struct afr_priv *p, struct bfs_dict *d, int j,
                     const int64_t row[AFR_NTYPES])
{
    uint8_t raw[AFR_ROW_LEN];
    afr_row_encode(row, raw);
    return bfs_dict_set_bin(d, j < 0 ? AFR_DIRTY_KEY : p->keys[j], raw, sizeof(raw));
}

/* struct bfs_changelog_ops.build: see lib/cluster.h. */
static struct bfs_dict *cl_build(void *arg, int type, int i, int64_t dirty, uint32_t blame,
                                 int64_t by, bool read_row)
{
    const struct afr_priv *p = arg;
    struct bfs_dict *d = bfs_dict_new();
    int rc = d ? 0 : -ENOMEM;
    int64_t row[AFR_NTYPES] = {0};
    if (rc == 0 && (dirty || read_row)) {
        row[type] = dirty;
        rc = afr_dict_add_row(p, d, -1, row);
    }
    for (int j = 0; j < p->n && rc == 0; j++) {
        if (j == i)
            continue; /* a brick never blames itself */
        bool b = bfs_mask_has(blame, j);
        if (!b && !read_row)
            continue;
        memset(row, 0, sizeof(row));
        row[type] = b ? by : 0;
        rc = afr_dict_add_row(p, d, j, row);
    }
    if (rc == 0 && bfs_dict_count(d) == 0)
        rc = -EINVAL; /* nothing to do: callers never ask for that */
    if (rc < 0) {
        bfs_dict_unref(d);
        return NULL;
    }
    return d;
}

/* struct bfs_changelog_ops.build_unacked: child i took a change that did
 * not reach a quorum; pending[i][i] += 1 says "my copy holds a change
 * nobody acknowledged" (afr_decide never takes it over an unmarked copy).
 * The arbiter holds no file data: for data, +0 (nothing to mark). */
static struct bfs_dict *cl_build_unacked(void *arg, int type, int i)
{
    const struct afr_priv *p = arg;
    struct bfs_dict *d = bfs_dict_new();
    int64_t row[AFR_NTYPES] = {0};
    row[type] = type == AFR_DATA && i == p->arbiter ? 0 : 1;
    if (d && afr_dict_add_row(p, d, i, row) < 0) {
        bfs_dict_unref(d);
        d = NULL;
    }
    return d;
}

void afr_state_add_row(const struct afr_priv *p, struct afr_state *s, int i,
                       const struct bfs_dict *x)
{
    const void *v;
    size_t len;
    s->valid |= BFS_BIT(i);
    memset(s->pending[i], 0, sizeof(s->pending[i]));
    memset(s->dirty[i], 0, sizeof(s->dirty[i]));
    if (!x)
        return;
    if (bfs_dict_get_bin(x, AFR_DIRTY_KEY, &v, &len) == 0)
        afr_row_parse(v, len, s->dirty[i]);
    for (int j = 0; j < p->n; j++)
        if (bfs_dict_get_bin(x, p->keys[j], &v, &len) == 0)
            afr_row_parse(v, len, s->pending[i][j]);
}

/* struct bfs_changelog_ops.check: refuse changes that would reach only
 * stale copies (afr_check_stale). */
static int cl_check(void *arg, struct bfs_txn_lock *lk, int type, uint32_t set,
                    struct bfs_dict *const *rows, uint32_t *good)
{
    (void)lk;
    (void)good; /* every child of set may take the change */
    const struct afr_priv *p = arg;
    struct afr_state *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->n = p->n;
    s->arbiter = p->arbiter;
    for (int i = 0; i < p->n; i++)
        if (bfs_mask_has(set, i))
            afr_state_add_row(p, s, i, rows[i]);
    int rc = afr_check_stale(s, set, type);
    if (rc < 0) {
        if (afr_mutual_blame(s, set, type))
            rc = -EIO; /* the copies blame each other: a split-brain, not a missing copy */
        XL_WARN(p->xl, "a %s change would reach only copies that other copies blame: %s",
                type == AFR_DATA ? "data" : "metadata",
                rc == -EIO ? "split-brain" : "refused until the good copy is back");
    }
    free(s);
    return rc;
}

/* struct bfs_changelog_ops.postop_attr: the copy a lookup answers with
 * (afr_lookup_combine over the post-op's rows and attributes), when no
 * heal is due (then every copy holds every change). */
static int cl_postop_attr(void *arg, int type, const struct bfs_iatt *attrs,
                          struct bfs_dict *const *rows, struct bfs_iatt *out)
{
    (void)type;
    const struct afr_priv *p = arg;
    struct afr_state *s = calloc(1, sizeof(*s));
    int rc[AFR_MAX] = {0};
    struct afr_lookup_out o;
    if (!s)
        return -ENOMEM;
    s->n = p->n;
    s->arbiter = p->arbiter;
    for (int i = 0; i < p->n; i++) {
        s->attr[i] = attrs[i];
        afr_state_add_row(p, s, i, rows[i]);
    }
    afr_lookup_combine(s, s->valid, rc, __atomic_load_n(&p->fav_policy, __ATOMIC_RELAXED), 0,
                       &o);
    free(s);
    if (o.rc < 0 || o.child < 0 || o.heal || o.entry_mismatch)
        return -EAGAIN;
    *out = attrs[o.child];
    return 0;
}

const struct bfs_changelog_ops afr_changelog_ops = {
    .postop_attr = cl_postop_attr,
    .build = cl_build,
    .check = cl_check,
    .unacked_types = BFS_BIT(BFS_TXN_DATA) | BFS_BIT(BFS_TXN_METADATA),
    .build_unacked = cl_build_unacked,
};

struct bfs_dict *afr_lookup_xdata(const struct afr_priv *p, const struct bfs_dict *xdata)
{
    struct bfs_dict *d = xdata ? bfs_dict_copy(xdata) : bfs_dict_new();
    if (!d)
        return NULL;
    const char *theirs = NULL;
    int rc;
    if (bfs_dict_get_str(d, AFR_XATTR_REQ, &theirs) == 0 && theirs && *theirs) {
        char *both = NULL;
        rc = asprintf(&both, "%s,%s", theirs, p->xattr_req) < 0 ? -ENOMEM : 0;
        if (rc == 0)
            rc = bfs_dict_set_str(d, AFR_XATTR_REQ, both);
        free(both);
    } else {
        rc = bfs_dict_set_str(d, AFR_XATTR_REQ, p->xattr_req);
    }
    if (rc < 0) {
        bfs_dict_unref(d);
        return NULL;
    }
    return d;
}

struct bfs_dict *afr_xdata_strip(const struct afr_priv *p, const struct bfs_dict *xdata)
{
    if (!xdata)
        return NULL;
    struct bfs_dict *d = bfs_dict_copy(xdata);
    if (!d)
        return NULL;
    (void)bfs_dict_del(d, AFR_DIRTY_KEY);
    for (int j = 0; j < p->n; j++)
        (void)bfs_dict_del(d, p->keys[j]);
    return d;
}
