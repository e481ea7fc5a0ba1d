/*
 * replicate-heal-entry.c — entry heal of one directory: make the names in
 * every sink those of the sources (docs/design/replicate.md, "Heal").
 *
 *   missing on a sink   created there with the source's GFID (mknod,
 *                       mkdir, symlink with gfid-req; link() when the sink
 *                       has that GFID under another name already), then
 *                       marked on the source so that the new entry's own
 *                       data/metadata/entries heal on its next access;
 *   only on a sink      removed there (a directory with everything in it,
 *                       looked up by name first: a half-made one has no
 *                       GFID or handle to reach it by);
 *   another GFID/type   removed on the sink and created again;
 *   half made on a sink a name left by a brick killed in the middle of a
 *                       create or mkdir (no GFID, or no handle; a folder
 *                       of the source's GFID is tried by GFID): looked up there
 *                       with the source's GFID, which completes it, and
 *                       marked like a new one (complete_on).
 * A split-brain of entries is healed by a conservative merge: every
 * missing name is created everywhere, nothing is removed. Runs on the heal
 * thread; listings are read whole (readdirplus) and sorted by name.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/graph.h"
#include "replicate.h"
#include "xlators/lib/heal-name.h"

#define HEAL_DEPTH_MAX 256

struct listing {
    struct bfs_dirents d;
    bool ok;
};

static int cmp_dirent(const void *a, const void *b)
{
    return strcmp(((const struct bfs_dirent *)a)->name, ((const struct bfs_dirent *)b)->name);
}

static const struct bfs_dirent *find(const struct listing *l, const char *name)
{
    struct bfs_dirent key = {.name = (char *)name};
    if (!l->ok || !l->d.count)
        return NULL;
    return bsearch(&key, l->d.v, l->d.count, sizeof(key), cmp_dirent);
}

/* Reads directory g on child i whole. */
static int list_dir(struct afr_hctx *h, int i, const struct bfs_gfid *g, struct listing *out)
{
    struct bfs_xl *xl = h->p->xl;
    struct bfs_fd *fd = bfs_fd_new(xl->graph, NULL, O_RDONLY | O_DIRECTORY, 1);
    if (!fd)
        return -ENOMEM;
    struct bfs_opendir_req oreq = {.fd = fd};
    oreq.loc.gfid = *g;
    int rc = afr_hsync(h, i, BFS_FOP_OPENDIR, &oreq, NULL);
    uint64_t off = 0;
    for (bool eod = false; rc >= 0 && !eod;) {
        struct bfs_readdir_req req = {.fd = fd, .size = 65536, .offset = off, .plus = true};
        struct bfs_readdir_rep rep;
        rc = afr_hsync(h, i, BFS_FOP_READDIR, &req, &rep);
        for (uint32_t k = 0; rc >= 0 && k < rep.entries.count; k++) {
            const struct bfs_dirent *e = &rep.entries.v[k];
            rc = bfs_dirents_add(&out->d, e->name, e->d_off, e->d_type, e->d_ino,
                                 e->has_attr ? &e->attr : NULL);
            off = e->d_off;
        }
        eod = rc < 0 || rep.eod || rep.entries.count == 0;
        bfs_readdir_rep_clear_dup(&rep);
    }
    bfs_fd_unref(fd);
    if (rc >= 0 && out->d.count)
        qsort(out->d.v, out->d.count, sizeof(out->d.v[0]), cmp_dirent);
    out->ok = rc >= 0;
    return rc < 0 ? rc : 0;
}

static struct bfs_loc entry_loc(const struct bfs_gfid *par, const char *name)
{
    struct bfs_loc l = {0};
    l.pargfid = *par;
    l.name = name;
    return l;
}

/* Removes (par, name) of type `type` (0: unknown) on child k, a directory
 * with all it holds. A folder is looked up BY NAME first: one a brick
 * killed in the middle of its mkdir left with no GFID or no handle cannot
 * be reached by GFID (the lookup gives it a GFID or its handle back). */
static int expunge(struct afr_hctx *h, int k, const struct bfs_gfid *par, const char *name,
                   uint32_t type, int depth)
{
    struct bfs_iatt a = {.mode = type};
    int rc = 0;
    if (type == 0 || S_ISDIR(type))
        rc = bfs_heal_name_lookup(h->p->xl, k, h->st, par, name, NULL, &a);
    if (rc < 0)
        return rc == -ENOENT ? 0 : rc;
    if (!S_ISDIR(a.mode)) {
        struct bfs_unlink_req req = {.loc = entry_loc(par, name)};
        rc = afr_hsync(h, k, BFS_FOP_UNLINK, &req, NULL);
        return rc == -ENOENT ? 0 : rc;
    }
    if (depth > HEAL_DEPTH_MAX)
        return -ELOOP;
    struct listing l = {0};
    rc = list_dir(h, k, &a.gfid, &l);
    for (uint32_t i = 0; rc >= 0 && i < l.d.count; i++) {
        const struct bfs_dirent *e = &l.d.v[i];
        rc = expunge(h, k, &a.gfid, e->name, bfs_heal_dirent_type(e), depth + 1);
    }
    bfs_dirents_free(&l.d);
    if (rc >= 0) {
        struct bfs_rmdir_req req = {.loc = entry_loc(par, name)};
        rc = afr_hsync(h, k, BFS_FOP_RMDIR, &req, NULL);
        rc = rc == -ENOENT ? 0 : rc;
    }
    return rc;
}

static struct bfs_dict *gfid_xdata(const struct bfs_gfid *g)
{
    struct bfs_dict *d = bfs_dict_new();
    if (d && bfs_dict_set_bin(d, AFR_GFID_REQ, g->b, sizeof(g->b)) < 0) {
        bfs_dict_unref(d);
        d = NULL;
    }
    return d;
}

/* Makes on child k the entry e of the source src, with its GFID. */
static int create_on(struct afr_hctx *h, int k, int src, const struct bfs_dirent *e)
{
    const struct bfs_iatt *a = &e->attr;
    struct bfs_loc loc = entry_loc(&h->gfid, e->name);
    uint32_t type = a->mode & S_IFMT, perm = a->mode & 07777;
    int rc;
    if (type != S_IFDIR) { /* another name of a file the sink has already? */
        struct bfs_lookup_req lr = {0};
        lr.loc.gfid = a->gfid;
        if (afr_hsync(h, k, BFS_FOP_LOOKUP, &lr, NULL) == 0) {
            struct bfs_link_req req = {.newloc = loc};
            req.oldloc.gfid = a->gfid;
            return afr_hsync(h, k, BFS_FOP_LINK, &req, NULL);
        }
    }
    struct bfs_dict *x = gfid_xdata(&a->gfid);
    if (!x)
        return -ENOMEM;
    /* The source blames the sink BEFORE the sink's copy exists: a lookup
     * that runs between the two (lookups take no lock) must never find
     * an empty new copy that nobody blames and read from it. If the
     * create fails, the blame stays and a later heal makes the copy. */
    rc = afr_heal_mark_new(h, src, &a->gfid, a->mode, BFS_BIT(k));
    if (rc < 0) {
        bfs_dict_unref(x);
        return rc;
    }
    if (type == S_IFDIR) {
        struct bfs_mkdir_req req = {.loc = loc, .mode = perm, .xdata = x};
        rc = afr_hsync(h, k, BFS_FOP_MKDIR, &req, NULL);
    } else if (type == S_IFLNK) {
        struct bfs_readlink_req rl = {.size = 4096};
        struct bfs_readlink_rep rr;
        rl.loc.gfid = a->gfid;
        rc = afr_hsync(h, src, BFS_FOP_READLINK, &rl, &rr);
        if (rc >= 0) {
            struct bfs_symlink_req req = {.target = rr.target, .loc = loc, .xdata = x};
            rc = afr_hsync(h, k, BFS_FOP_SYMLINK, &req, NULL);
        }
        bfs_readlink_rep_clear_dup(&rr);
    } else {
        struct bfs_mknod_req req = {.loc = loc, .mode = type | perm, .rdev = a->rdev, .xdata = x};
        rc = afr_hsync(h, k, BFS_FOP_MKNOD, &req, NULL);
    }
    bfs_dict_unref(x);
    return rc < 0 ? rc : 0;
}

/*
 * Name e of source src exists on sink k half made (lib/heal-name.h: no
 * GFID, or no handle): completed there with e's GFID. The source blames
 * the copy first, as for a new one (create_on): what it holds may be
 * anything. Returns 0 or -errno.
 */
static int complete_on(struct afr_hctx *h, int k, int src, const struct bfs_dirent *e)
{
    int rc = afr_heal_mark_new(h, src, &e->attr.gfid, e->attr.mode, BFS_BIT(k));
    return rc < 0 ? rc : bfs_heal_name_complete(h->p->xl, k, h->st, &h->gfid, e);
}

/* Name e (from source src) on sink k. Returns 0 or -errno. */
static int heal_name(struct afr_hctx *h, int k, int src, const struct bfs_dirent *e,
                     const struct listing *lk, bool merge)
{
    const struct bfs_dirent *have = find(lk, e->name);
    if (have && (bfs_heal_name_half(have, e) || bfs_heal_dir_half(h->p->xl, k, h->st, have, e)))
        return complete_on(h, k, src, e);
    if (have && have->has_attr && bfs_gfid_eq(&have->attr.gfid, &e->attr.gfid) &&
        bfs_heal_dirent_type(have) == (e->attr.mode & S_IFMT))
        return 0;
    if (have && merge)
        return -EIO; /* a conflict a merge cannot decide: the name stays EIO */
    if (have) {
        int rc = expunge(h, k, &h->gfid, have->name, bfs_heal_dirent_type(have), 0);
        if (rc < 0)
            return rc;
    }
    return create_on(h, k, src, e);
}

/* Heals every sink from the sources' listings. Returns the sinks healed. */
static uint32_t heal_names(struct afr_hctx *h, uint32_t sources, uint32_t sinks, bool merge,
                           struct listing *l)
{
    struct afr_priv *p = h->p;
    uint32_t bad = 0;
    for (int s = 0; s < p->n; s++) {
        if (!bfs_mask_has(sources, s))
            continue;
        for (uint32_t i = 0; i < l[s].d.count; i++) {
            const struct bfs_dirent *e = &l[s].d.v[i];
            if (!e->has_attr)
                continue; /* no GFID yet: a lookup gives it one, then we heal it */
            bool seen = false; /* from an earlier source already */
            for (int s2 = 0; s2 < s && !seen; s2++)
                seen = bfs_mask_has(sources, s2) && find(&l[s2], e->name);
            if (seen)
                continue;
            for (int k = 0; k < p->n; k++)
                if (k != s && bfs_mask_has(sinks, k) && heal_name(h, k, s, e, &l[k], merge) < 0)
                    bad |= BFS_BIT(k);
        }
    }
    for (int k = 0; k < p->n && !merge; k++) {
        if (!bfs_mask_has(sinks, k))
            continue;
        for (uint32_t i = 0; i < l[k].d.count; i++) {
            const struct bfs_dirent *e = &l[k].d.v[i];
            bool known = false;
            for (int s = 0; s < p->n && !known; s++)
                known = bfs_mask_has(sources, s) && find(&l[s], e->name);
            if (!known && expunge(h, k, &h->gfid, e->name, bfs_heal_dirent_type(e), 0) < 0)
                bad |= BFS_BIT(k);
        }
    }
    return sinks & ~bad;
}

int afr_heal_entry(struct afr_priv *p, const struct bfs_gfid *g)
{
    struct afr_hctx h;
    int rc = afr_heal_begin(&h, p, g, AFR_ENTRY, -1);
    if (rc < 0)
        return rc;
    int ref = bfs_mask_first(h.s.valid);
    if (ref < 0 || !S_ISDIR(h.s.attr[ref].mode) || !h.d.needs_heal) {
        afr_heal_end(&h, 0, false);
        return 0;
    }
    bool merge = h.d.split_brain;
    uint32_t sources = merge ? h.s.valid : h.d.sources;
    uint32_t sinks = merge ? h.s.valid : h.d.sinks;
    struct listing l[AFR_MAX];
    memset(l, 0, sizeof(l));
    for (int i = 0; i < p->n; i++)
        if (bfs_mask_has(sources | sinks, i) && list_dir(&h, i, g, &l[i]) < 0) {
            sources &= ~BFS_BIT(i);
            sinks &= ~BFS_BIT(i);
        }
    uint32_t healed = sources ? heal_names(&h, sources, sinks, merge, l) : 0;
    for (int i = 0; i < p->n; i++)
        bfs_dirents_free(&l[i].d);
    bool all = healed == sinks && sources;
    if (merge)
        XL_INFO(p->xl, "entry split-brain: merged the names of %d copies",
                bfs_mask_count(h.s.valid));
    afr_heal_end(&h, sources ? sources | healed : 0, false);
    return all ? 0 : -EIO;
}
