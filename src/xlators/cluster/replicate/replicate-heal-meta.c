/*
 * replicate-heal-meta.c — metadata heal of one inode: make every sink's
 * mode (not on symlinks), owner and xattrs those of the source. The xattrs
 * are what root sees through the brick: user.*, trusted.* other than
 * brickfs's own, security.*, system.*; the source's are set, a sink's
 * extra ones removed. Runs on the heal thread (replicate-heal.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "replicate.h"

static struct bfs_dict *all_xattrs(struct afr_hctx *h, int i, int *rc)
{
    struct bfs_getxattr_req req = {.name = NULL};
    struct bfs_getxattr_rep rep;
    req.loc.gfid = h->gfid;
    *rc = afr_hsync(h, i, BFS_FOP_GETXATTR, &req, &rep);
    struct bfs_dict *d = *rc >= 0 ? bfs_dict_ref(rep.xattrs) : NULL;
    bfs_getxattr_rep_clear_dup(&rep);
    if (*rc >= 0 && !d)
        d = bfs_dict_new();
    if (*rc == -ENODATA || *rc == -EOPNOTSUPP) { /* none at all, or none allowed here */
        *rc = 0;
        d = bfs_dict_new();
    }
    return d;
}

struct diff_ctx {
    const struct bfs_dict *other;
    struct bfs_dict *out;       /* keys to set (or NULL: collect names to remove) */
    char **names;
    size_t nnames;
};

/* Keys of the source the sink lacks or has with another value. */
static int differs(const char *key, enum bfs_val_type type, const void *val, size_t len,
                   void *arg)
{
    (void)type;
    struct diff_ctx *c = arg;
    const void *v;
    size_t l;
    if (bfs_dict_get_bin(c->other, key, &v, &l) == 0 && l == len && memcmp(v, val, len) == 0)
        return 0;
    return bfs_dict_set_bin(c->out, key, val, len);
}

/* Keys of the sink the source does not have. */
static int extra(const char *key, enum bfs_val_type type, const void *val, size_t len, void *arg)
{
    (void)type;
    (void)val;
    (void)len;
    struct diff_ctx *c = arg;
    if (bfs_dict_has(c->other, key))
        return 0;
    char **n = realloc(c->names, (c->nnames + 1) * sizeof(*n));
    if (!n || !(n[c->nnames] = strdup(key))) {
        c->names = n ? n : c->names;
        return -ENOMEM;
    }
    c->names = n;
    c->nnames++;
    return 0;
}

static int copy_xattrs(struct afr_hctx *h, int src, int sink)
{
    int rc;
    struct bfs_dict *s = all_xattrs(h, src, &rc);
    if (rc < 0)
        return rc;
    struct bfs_dict *k = all_xattrs(h, sink, &rc);
    struct diff_ctx c = {.other = k, .out = bfs_dict_new()};
    if (rc == 0 && (!s || !k || !c.out))
        rc = -ENOMEM;
    if (rc == 0)
        rc = bfs_dict_foreach(s, differs, &c);
    if (rc == 0 && bfs_dict_count(c.out)) {
        struct bfs_setxattr_req req = {.xattrs = c.out, .flags = 0};
        req.loc.gfid = h->gfid;
        rc = afr_hsync(h, sink, BFS_FOP_SETXATTR, &req, NULL);
    }
    c.other = s;
    if (rc >= 0)
        rc = bfs_dict_foreach(k, extra, &c);
    for (size_t i = 0; i < c.nnames; i++) {
        struct bfs_removexattr_req req = {.name = c.names[i]};
        req.loc.gfid = h->gfid;
        int r = afr_hsync(h, sink, BFS_FOP_REMOVEXATTR, &req, NULL);
        if (rc >= 0 && r < 0 && r != -ENODATA)
            rc = r;
        free(c.names[i]);
    }
    free(c.names);
    bfs_dict_unref(c.out);
    bfs_dict_unref(s);
    bfs_dict_unref(k);
    return rc < 0 ? rc : 0;
}

static int copy_meta(struct afr_hctx *h, int src, int sink)
{
    const struct bfs_iatt *a = &h->s.attr[src];
    int rc = copy_xattrs(h, src, sink); /* ACL xattrs touch the mode: before setattr */
    if (rc < 0)
        return rc;
    struct bfs_setattr_req req = {.valid = BFS_SET_UID | BFS_SET_GID};
    req.loc.gfid = h->gfid;
    req.attr = *a;
    if (!S_ISLNK(a->mode))
        req.valid |= BFS_SET_MODE;
    return afr_hsync(h, sink, BFS_FOP_SETATTR, &req, NULL);
}

int afr_heal_meta(struct afr_priv *p, const struct bfs_gfid *g, int force)
{
    struct afr_hctx h;
    int rc = afr_heal_begin(&h, p, g, AFR_METADATA, force);
    if (rc < 0)
        return rc;
    if (h.d.split_brain) {
        XL_WARN(p->xl, "metadata split-brain: the copies blame each other");
        afr_heal_end(&h, 0, true);
        return -EIO;
    }
    uint32_t healed = h.d.sources;
    int src = bfs_mask_first(h.d.sources);
    for (int k = 0; k < p->n && h.d.needs_heal && src >= 0; k++) {
        if (!bfs_mask_has(h.d.sinks, k))
            continue;
        rc = copy_meta(&h, src, k);
        if (rc < 0)
            XL_WARN(p->xl, "metadata heal of %s from %s failed: %s", p->xl->children[k]->name,
                    p->xl->children[src]->name, strerror(-rc));
        else
            healed |= BFS_BIT(k);
    }
    bool all = (healed & h.d.sinks) == h.d.sinks;
    afr_heal_end(&h, h.d.needs_heal ? healed : 0, false);
    return all ? 0 : -EIO;
}
