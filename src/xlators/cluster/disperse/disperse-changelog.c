/*
 * disperse-changelog.c — the xattrs disperse keeps on bricks (versions,
 * dirty marks, size; docs/design/disperse.md), as the shared transaction
 * code moves them (struct bfs_changelog_ops: build and check), as lookups
 * ask for them and read them back, and the pure combination of what the
 * children said (ec_combine): which are good, the size, what needs a heal.
 * Nothing here allocates anything that outlives a call.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "disperse.h"

void ec_row_encode(const int64_t row[EC_NTYPES], uint8_t out[EC_ROW_LEN])
{
    for (int t = 0; t < EC_NTYPES; t++) {
        uint64_t be = htobe64((uint64_t)row[t]);
        memcpy(out + 8 * t, &be, 8);
    }
}

static void row_parse(const void *v, size_t len, int64_t row[EC_NTYPES])
{
    memset(row, 0, sizeof(int64_t) * EC_NTYPES);
    for (int t = 0; t < EC_NTYPES && (size_t)(8 * t + 8) <= len; t++) {
        uint64_t be;
        memcpy(&be, (const uint8_t *)v + 8 * t, 8);
        row[t] = (int64_t)be64toh(be);
    }
}

static int add_row(struct bfs_dict *d, const char *key, int type, int64_t by)
{
    int64_t row[EC_NTYPES] = {0};
    uint8_t raw[EC_ROW_LEN];
    row[type] = by;
    ec_row_encode(row, raw);
    return bfs_dict_set_bin(d, key, raw, sizeof(raw));
}

/* struct bfs_changelog_ops.build (lib/cluster.h). Where replicate records
 * "child i blames the children of `blame`", disperse moves child i's
 * version: the children that take part pull ahead of those left out. The
 * same xattrop adds as much to child i's dirty mark, which the post-op
 * does not take back (it removes the pre-op's mark only): a child left
 * behind keeps the inode dirty on the others, so their pending index
 * lists it for the self-heal daemon until a heal with the whole set clears
 * it. An undo (by -1) takes both back. */
static struct bfs_dict *cl_build(void *arg, int type, int i, int64_t dirty, uint32_t blame,
                                 int64_t by, bool read_row)
{
    (void)arg;
    (void)i;
    if (blame)
        dirty += by;
    struct bfs_dict *d = bfs_dict_new();
    int rc = d ? 0 : -ENOMEM;
    if (rc == 0 && (dirty || read_row))
        rc = add_row(d, EC_KEY_DIRTY, type, dirty);
    if (rc == 0 && (blame || read_row))
        rc = add_row(d, EC_KEY_VERSION, type, blame ? by : 0);
    if (rc == 0 && read_row && type == EC_DATA) {
        uint64_t zero = 0;
        rc = bfs_dict_set_bin(d, EC_KEY_SIZE, &zero, sizeof(zero));
    }
    if (rc == 0 && bfs_dict_count(d) == 0)
        rc = -EINVAL;
    if (rc < 0) {
        bfs_dict_unref(d);
        return NULL;
    }
    return d;
}

static uint64_t size_of(const struct bfs_dict *x)
{
    const void *v;
    size_t len;
    uint64_t be;
    if (!x || bfs_dict_get_bin(x, EC_KEY_SIZE, &v, &len) < 0 || len != 8)
        return 0;
    memcpy(&be, v, 8);
    return be64toh(be);
}

static void versions_of(const struct bfs_dict *x, const char *key, int64_t row[EC_NTYPES])
{
    const void *v;
    size_t len;
    if (x && bfs_dict_get_bin(x, key, &v, &len) == 0)
        row_parse(v, len, row);
    else
        memset(row, 0, sizeof(int64_t) * EC_NTYPES);
}

/* Among the children of set, those with the highest version of type t and,
 * for data, the size most of them share (*size). */
static uint32_t good_of(const struct ec_state *s, int n, uint32_t set, int t, bool data,
                        uint64_t *size)
{
    int64_t max = INT64_MIN;
    for (int i = 0; i < n; i++)
        if (bfs_mask_has(set, i) && s->version[i][t] > max)
            max = s->version[i][t];
    uint32_t good = 0;
    for (int i = 0; i < n; i++)
        if (bfs_mask_has(set, i) && s->version[i][t] == max)
            good |= BFS_BIT(i);
    if (!data || !good)
        return good;
    int best = -1, best_votes = 0;
    for (int i = 0; i < n; i++) {
        if (!bfs_mask_has(good, i))
            continue;
        int votes = 0;
        for (int j = 0; j < n; j++)
            votes += bfs_mask_has(good, j) && s->size[j] == s->size[i];
        if (votes > best_votes) {
            best = i;
            best_votes = votes;
        }
    }
    uint32_t same = 0;
    for (int i = 0; i < n; i++)
        if (bfs_mask_has(good, i) && s->size[i] == s->size[best])
            same |= BFS_BIT(i);
    if (size)
        *size = s->size[best];
    return same;
}

/* struct bfs_changelog_ops.check: after the pre-op, only the children with
 * the highest version take the change (the others are stale: they are
 * left out and fall further behind); fewer than the quorum: EIO. The size
 * read under the lock becomes the window's. */
static int cl_check(void *arg, struct bfs_txn_lock *lk, int type, uint32_t set,
                    struct bfs_dict *const *rows, uint32_t *good)
{
    struct ec_priv *p = arg;
    struct ec_state *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    for (int i = 0; i < p->n; i++) {
        if (!bfs_mask_has(set, i))
            continue;
        versions_of(rows[i], EC_KEY_VERSION, s->version[i]);
        s->size[i] = size_of(rows[i]);
    }
    uint64_t size = 0;
    uint32_t g = good_of(s, p->n, set, type, type == EC_DATA, &size);
    free(s);
    if (bfs_mask_count(g) < ec_quorum(p)) {
        XL_WARN(p->xl, "a %s change would reach %d good fragment(s), %d needed: refused",
                type == EC_DATA ? "data" : "metadata", bfs_mask_count(g), ec_quorum(p));
        return -EIO;
    }
    *good = g;
    struct ec_inode *c = lk->inode ? ec_ictx_peek(p->xl, lk->inode) : NULL;
    if (c) {
        pthread_mutex_lock(&c->lock);
        c->good[type] = g;
        c->cseq++;
        if (type == EC_DATA) {
            c->size = size;
            c->win = lk->window; /* read under this window's lock */
        }
        pthread_mutex_unlock(&c->lock);
    }
    return 0;
}

/* struct bfs_changelog_ops.postop_attr: what lookup_done answers (ec_combine,
 * the good child's attributes with the file's size), when no heal is due.
 * A regular file's size is in the row of a data post-op only. */
static int cl_postop_attr(void *arg, int type, const struct bfs_iatt *attrs,
                          struct bfs_dict *const *rows, struct bfs_iatt *out)
{
    const struct ec_priv *p = arg;
    struct ec_state *s = calloc(1, sizeof(*s));
    int rc[EC_MAX] = {0};
    struct ec_view v;
    if (!s)
        return -ENOMEM;
    for (int i = 0; i < p->n; i++)
        ec_state_add(s, i, &attrs[i], rows[i]);
    ec_combine(p, s, s->valid, rc, &v);
    free(s);
    if (v.rc < 0 || v.child < 0 || v.heal || v.lag || v.entry_mismatch ||
        (S_ISREG(attrs[v.child].mode) && type != EC_DATA))
        return -EAGAIN;
    *out = attrs[v.child];
    ec_fix_iatt(p, out, v.size);
    return 0;
}

const struct bfs_changelog_ops ec_changelog_ops = {.build = cl_build, .check = cl_check,
                                                   .postop_attr = cl_postop_attr};

void ec_state_add(struct ec_state *s, int i, const struct bfs_iatt *attr,
                  const struct bfs_dict *x)
{
    s->valid |= BFS_BIT(i);
    if (attr)
        s->attr[i] = *attr;
    versions_of(x, EC_KEY_VERSION, s->version[i]);
    versions_of(x, EC_KEY_DIRTY, s->dirty[i]);
    s->size[i] = size_of(x);
}

static const char ec_keys[] = EC_KEY_VERSION "," EC_KEY_DIRTY "," EC_KEY_SIZE;

struct bfs_dict *ec_lookup_xdata(const struct bfs_dict *xdata)
{
    struct bfs_dict *d = xdata ? bfs_dict_copy(xdata) : bfs_dict_new();
    if (!d)
        return NULL;
    const char *theirs = NULL;
    int rc;
    if (bfs_dict_get_str(d, EC_XATTR_REQ, &theirs) == 0 && theirs && *theirs) {
        char *both = NULL;
        rc = asprintf(&both, "%s,%s", theirs, ec_keys) < 0 ? -ENOMEM : 0;
        if (rc == 0)
            rc = bfs_dict_set_str(d, EC_XATTR_REQ, both);
        free(both);
    } else {
        rc = bfs_dict_set_str(d, EC_XATTR_REQ, ec_keys);
    }
    if (rc < 0) {
        bfs_dict_unref(d);
        return NULL;
    }
    return d;
}

struct bfs_dict *ec_xdata_strip(const struct bfs_dict *xdata)
{
    if (!xdata)
        return NULL;
    struct bfs_dict *d = bfs_dict_copy(xdata);
    if (!d)
        return NULL;
    (void)bfs_dict_del(d, EC_KEY_VERSION);
    (void)bfs_dict_del(d, EC_KEY_DIRTY);
    (void)bfs_dict_del(d, EC_KEY_SIZE);
    return d;
}

/* The GFID most answering children agree on (its first holder), or -1. */
static int majority(const struct ec_state *s, int n)
{
    int best = -1, best_votes = 0;
    for (int i = 0; i < n; i++) {
        if (!bfs_mask_has(s->valid, i))
            continue;
        int votes = 0;
        for (int j = 0; j < n; j++)
            votes += bfs_mask_has(s->valid, j) &&
                     bfs_gfid_eq(&s->attr[j].gfid, &s->attr[i].gfid) &&
                     (s->attr[j].mode & S_IFMT) == (s->attr[i].mode & S_IFMT);
        if (votes > best_votes) {
            best = i;
            best_votes = votes;
        }
    }
    return best;
}

void ec_combine(const struct ec_priv *p, const struct ec_state *s, uint32_t asked,
                const int *rc, struct ec_view *v)
{
    memset(v, 0, sizeof(*v));
    v->child = -1;
    int m = majority(s, p->n);
    if (m < 0) {
        int err = 0;
        for (int i = 0; i < p->n; i++)
            if (bfs_mask_has(asked, i) && (!err || err == -ENOTCONN))
                err = rc[i];
        v->rc = err ? err : -ENOTCONN;
        return;
    }
    uint32_t mode = s->attr[m].mode & S_IFMT;
    for (int i = 0; i < p->n; i++)
        if (bfs_mask_has(s->valid, i) && bfs_gfid_eq(&s->attr[i].gfid, &s->attr[m].gfid) &&
            (s->attr[i].mode & S_IFMT) == mode)
            v->present |= BFS_BIT(i);
    for (int i = 0; i < p->n; i++) {
        bool missing = bfs_mask_has(asked, i) && rc[i] == -ENOENT;
        if (missing || (bfs_mask_has(s->valid, i) && !bfs_mask_has(v->present, i)))
            v->entry_mismatch = true;
    }
    for (int t = 0; t < EC_NTYPES; t++) {
        bool applies = t == EC_META || (t == EC_DATA && mode == S_IFREG) ||
                       (t == EC_ENTRY && mode == S_IFDIR);
        v->good[t] = good_of(s, p->n, v->present, t, t == EC_DATA && mode == S_IFREG,
                             t == EC_DATA ? &v->size : NULL);
        if (!applies)
            continue;
        bool dirty = false;
        for (int i = 0; i < p->n; i++)
            dirty = dirty || (bfs_mask_has(v->good[t], i) && s->dirty[i][t] > 0);
        if (v->present & ~v->good[t])
            v->lag |= BFS_BIT(t);
        if (dirty)
            v->dirty |= BFS_BIT(t);
        /* dirty marks with a child missing stay until it is back: a heal
         * could neither tell what it missed nor clear them */
        if ((v->lag & BFS_BIT(t)) || (dirty && v->present == ec_all(p)))
            v->heal |= BFS_BIT(t);
    }
    v->child = bfs_mask_first(v->good[EC_META]);
    if (v->child < 0)
        v->child = m;
    if (mode != S_IFREG)
        v->size = s->attr[v->child].size;
}

uint64_t ec_frag_size(const struct ec_priv *p, uint64_t size)
{
    return (size + p->stripe - 1) / p->stripe * p->chunk;
}

void ec_fix_iatt(const struct ec_priv *p, struct bfs_iatt *a, uint64_t size)
{
    if ((a->mode & S_IFMT) != S_IFREG)
        return;
    a->size = size;
    a->blocks *= (uint64_t)p->k;
}
