/*
 * disperse-heal.c — heals on the shared heal queue (lib/healq.c): when a
 * lookup finds stale children (lower versions), dirty marks or names
 * missing on some children, it asks for a heal; the heal thread runs it as
 * straight-line code over blocking calls (a self-heal daemon would call
 * ec_heal_{data,meta,entry} the same way).
 *
 * Every heal: lock the type's domain on every up child (an owner of its
 * own, bfs_lkset_trylock_sync: a non-blocking round; busy, blocking
 * requests in child order, so the holder is told, each cancelled after
 * cluster.heal-lock-timeout; one round only for the self-heal daemon and
 * for heals of dirty marks only, which are most often another client's
 * open window), look the object up on them under
 * the lock, combine (sources = highest version), repair the sinks from the
 * sources, then move each sink's version to the sources' and, when every
 * child of the set is there and good afterwards, take away the dirty marks
 * read under the lock (a mark is what puts the inode on the bricks' pending
 * index: it stays while a child is missing), unlock.
 *   data      fragments rebuilt from k sources (bfs_ec_rebuild_stripes) in
 *             runs of stripes; runs of zeros are skipped (holes stay holes);
 *             with only dirty marks and every data child a source, the
 *             parity children are rebuilt (a client died mid-write);
 *   metadata  mode (not symlinks), owner, times, and the source's xattrs;
 *   entry     names of the sources missing on a sink are made there with
 *             their GFID (files empty: their version 0 makes them stale, so
 *             their data heal follows); names a sink kept half made (a
 *             brick killed in the middle of a create or a mkdir: no GFID,
 *             or no handle; lib/heal-name.h) are completed there with the
 *             source's GFID, for the file's own heals work by GFID and no
 *             client may ever look the name up; names only on a sink are
 *             removed.
 * Lifetime: a job from request to the end of its run; a struct ec_hctx on
 * the heal thread's stack for one heal.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/graph.h"
#include "disperse.h"
#include "xlators/lib/heal-name.h"
#include "xlators/lib/upcall-mark.h"

#define HEAL_STRIPES 64 /* stripes per run of the data heal */

struct ec_hctx {
    struct ec_priv *p;
    struct bfs_stack *st;
    struct bfs_gfid gfid;
    int type;
    struct bfs_lkset lk;
    uint32_t locked;
    struct ec_state s;
    int rc[EC_MAX];
    struct ec_view v;
    bool once;                   /* lock: one round only */
};

static int hsync(struct ec_hctx *h, int i, int fop, const void *req, void *rep)
{
    return bfs_sync_any(fop, h->p->xl->children[i], h->st, req, rep);
}

static void heal_end(struct ec_hctx *h)
{
    bool ran = h->locked != 0;
    bfs_lkset_unlock_sync(&h->lk, h->p->xl, h->st, h->locked);
    bfs_lkset_clear(&h->lk);
    bfs_stack_unref(h->st);
    /* a heal that got its locks may have moved times below md-cache (cold
     * path: told after every such heal, changed or not) */
    if (ran)
        bfs_upcall_local(h->p->xl, &h->gfid, false);
}

static uint32_t up_of(void *arg)
{
    return ec_up(arg);
}

static int heal_begin(struct ec_hctx *h, struct ec_priv *p, const struct bfs_gfid *g, int t,
                      bool once)
{
    memset(h, 0, sizeof(*h));
    h->p = p;
    h->gfid = *g;
    h->type = t;
    h->once = once;
    if (!(h->st = bfs_heal_stack_new()))
        return -ENOMEM;
    if (bfs_lkset_init(&h->lk, t == EC_ENTRY ? BFS_LKSET_ENTRY : BFS_LKSET_INODE,
                       p->cl.domain[t], g, NULL) < 0) {
        bfs_stack_unref(h->st);
        return -ENOMEM;
    }
    uint64_t wait_ms = once ? 0 : __atomic_load_n(&p->heal_lock_ms, __ATOMIC_RELAXED);
    int lrc = bfs_lkset_trylock_sync(&h->lk, p->xl, h->st, up_of, p, wait_ms, &h->locked);
    if (lrc < 0) {
        heal_end(h);
        return lrc;
    }
    struct bfs_lookup_req req = {.xdata = ec_lookup_xdata(NULL)};
    req.loc.gfid = *g;
    for (int i = 0; i < p->n; i++) {
        h->rc[i] = -ENOTCONN;
        if (!bfs_mask_has(h->locked, i) || !req.xdata)
            continue;
        struct bfs_lookup_rep rep;
        h->rc[i] = hsync(h, i, BFS_FOP_LOOKUP, &req, &rep);
        if (h->rc[i] >= 0)
            ec_state_add(&h->s, i, &rep.attr, rep.xdata);
        bfs_lookup_rep_clear_dup(&rep);
    }
    bfs_dict_unref(req.xdata);
    ec_combine(p, &h->s, h->locked, h->rc, &h->v);
    if (h->v.rc < 0) {
        int rc = h->v.rc;
        heal_end(h);
        return rc;
    }
    return 0;
}

/* Is every child of the set there, locked and good (or healed) now? Only
 * then may the dirty marks go: they are what keeps the inode on the
 * bricks' pending index for a child that is missing. */
static bool whole(const struct ec_hctx *h, uint32_t healed)
{
    uint32_t all = ec_all(h->p);
    return h->v.present == all && ((h->v.good[h->type] | healed) & all) == all;
}

/* Sinks take the sources' version of the type (and size), and, when the
 * set is whole afterwards, every child loses the dirty marks read under
 * the lock. */
static void settle(struct ec_hctx *h, uint32_t healed, int src)
{
    struct ec_priv *p = h->p;
    int t = h->type;
    bool clean = whole(h, healed);
    for (int i = 0; i < p->n; i++) {
        if (!bfs_mask_has(h->v.present, i))
            continue;
        bool sink = bfs_mask_has(healed, i);
        bool good = bfs_mask_has(h->v.good[t], i);
        if (!sink && !good)
            continue;
        struct bfs_dict *d = bfs_dict_new();
        int64_t row[EC_NTYPES] = {0};
        uint8_t raw[EC_ROW_LEN];
        if (!d)
            continue;
        if (sink && h->s.version[src][t] != h->s.version[i][t]) {
            row[t] = h->s.version[src][t] - h->s.version[i][t];
            ec_row_encode(row, raw);
            (void)bfs_dict_set_bin(d, EC_KEY_VERSION, raw, sizeof(raw));
        }
        if (sink && t == EC_DATA && h->s.size[src] != h->s.size[i]) {
            uint64_t be = htobe64(h->s.size[src] - h->s.size[i]);
            (void)bfs_dict_set_bin(d, EC_KEY_SIZE, &be, 8);
        }
        if (clean && h->s.dirty[i][t]) {
            memset(row, 0, sizeof(row));
            row[t] = -h->s.dirty[i][t];
            ec_row_encode(row, raw);
            (void)bfs_dict_set_bin(d, EC_KEY_DIRTY, raw, sizeof(raw));
        }
        if (bfs_dict_count(d)) {
            struct bfs_xattrop_req req = {.optype = BFS_XATTROP_ADD64, .xattrs = d};
            req.loc.gfid = h->gfid;
            int rc = hsync(h, i, BFS_FOP_XATTROP, &req, NULL);
            if (rc < 0)
                XL_WARN(p->xl, "heal: cannot settle the xattrs on %s: %s",
                        p->xl->children[i]->name, strerror(-rc));
        }
        bfs_dict_unref(d);
    }
    struct bfs_xl *xl = p->xl;
    struct bfs_inode *inode =
        xl->graph && xl->graph->itable ? bfs_inode_find(xl->graph->itable, &h->gfid) : NULL;
    struct ec_inode *c = ec_ictx_peek(xl, inode);
    if (c) {
        pthread_mutex_lock(&c->lock);
        c->good[t] = h->v.good[t] | healed;
        c->cseq++;
        pthread_mutex_unlock(&c->lock);
    }
    if (inode)
        bfs_inode_unref(inode);
}

/* ---- data ---- */

static bool all_zero(const uint8_t *b, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (b[i])
            return false;
    return true;
}

static int fd_op(struct ec_hctx *h, int i, struct bfs_fd *fd, int fop, uint64_t off)
{
    if (fop == BFS_FOP_OPEN) {
        struct bfs_open_req req = {.fd = fd, .flags = O_RDWR};
        req.loc.gfid = h->gfid;
        return hsync(h, i, BFS_FOP_OPEN, &req, NULL);
    }
    struct bfs_ftruncate_req req = {.fd = fd, .offset = off};
    return hsync(h, i, BFS_FOP_FTRUNCATE, &req, NULL);
}

/* Rebuilds the fragments of `sinks` from the k children of `from`;
 * returns the sinks healed. */
static uint32_t rebuild(struct ec_hctx *h, uint32_t from, uint32_t sinks)
{
    struct ec_priv *p = h->p;
    struct bfs_xl *xl = p->xl;
    uint64_t fsize = ec_frag_size(p, h->v.size);
    uint64_t run = HEAL_STRIPES * p->chunk;
    struct bfs_inode *inode = ec_inode_of_gfid(xl, &h->gfid, S_IFREG);
    struct bfs_fd *fd = bfs_fd_new(xl->graph, inode, O_RDWR, 0);
    uint8_t *buf = malloc((size_t)(run * (uint64_t)(2 * p->n)));
    unsigned want[EC_MAX], nwant = 0;
    uint8_t *out[EC_MAX] = {0};
    const uint8_t *in[EC_MAX] = {0};
    if (!fd || !buf)
        sinks = 0;
    for (int i = 0; i < p->n && sinks; i++)
        if (bfs_mask_has(from, i) && fd_op(h, i, fd, BFS_FOP_OPEN, 0) < 0)
            sinks = 0;
    for (int i = 0; i < p->n; i++)
        if (bfs_mask_has(sinks, i) &&
            (fd_op(h, i, fd, BFS_FOP_OPEN, 0) < 0 || fd_op(h, i, fd, BFS_FOP_FTRUNCATE, 0) < 0))
            sinks &= ~BFS_BIT(i);
    for (int i = 0; i < p->n; i++)
        if (bfs_mask_has(sinks, i)) {
            out[nwant] = buf + run * (uint64_t)(p->n + i);
            want[nwant++] = (unsigned)i;
        }
    for (uint64_t off = 0; off < fsize && sinks; off += run) {
        uint64_t len = fsize - off < run ? fsize - off : run;
        bool zero = true;
        for (int i = 0; i < p->n && sinks; i++) {
            if (!bfs_mask_has(from, i))
                continue;
            struct bfs_read_req req = {.fd = fd, .size = (uint32_t)len, .offset = off};
            struct bfs_read_rep rep;
            uint8_t *f = buf + run * (uint64_t)i;
            int rc = hsync(h, i, BFS_FOP_READ, &req, &rep);
            if (rc < 0) {
                sinks = 0;
            } else {
                size_t got = rep.data.len < len ? rep.data.len : len;
                memcpy(f, rep.data.data, got);
                memset(f + got, 0, len - got);
                zero = zero && all_zero(f, len);
            }
            bfs_read_rep_clear_dup(&rep);
            in[i] = f;
        }
        if (!sinks || zero)
            continue;
        if (bfs_ec_rebuild_stripes(p->codec, in, len / p->chunk, p->chunk, want, nwant, out) < 0)
            sinks = 0;
        for (unsigned w = 0; w < nwant && sinks; w++) {
            struct bfs_write_req req = {.fd = fd, .offset = off};
            req.data.data = out[w];
            req.data.len = len;
            if (bfs_mask_has(sinks, (int)want[w]) && hsync(h, (int)want[w], BFS_FOP_WRITE, &req,
                                                          NULL) < 0)
                sinks &= ~BFS_BIT(want[w]);
        }
    }
    for (int i = 0; i < p->n; i++)
        if (bfs_mask_has(sinks, i) && fd_op(h, i, fd, BFS_FOP_FTRUNCATE, fsize) < 0)
            sinks &= ~BFS_BIT(i);
    free(buf);
    if (fd)
        bfs_fd_unref(fd);
    if (inode)
        bfs_inode_unref(inode);
    return sinks;
}

int ec_heal_data(struct ec_priv *p, const struct bfs_gfid *g, bool once)
{
    struct ec_hctx h;
    int rc = heal_begin(&h, p, g, EC_DATA, once);
    if (rc < 0)
        return rc;
    uint32_t src = h.v.good[EC_DATA];
    uint32_t sinks = h.v.present & ~src;
    uint32_t datamask = (1u << p->k) - 1;
    if ((h.s.attr[h.v.child].mode & S_IFMT) != S_IFREG || bfs_mask_count(src) < p->k) {
        heal_end(&h);
        return (h.s.attr[h.v.child].mode & S_IFMT) != S_IFREG ? 0 : -EIO;
    }
    uint32_t from = ec_pick_k(p, src);
    if (!sinks && (src & datamask) == datamask && whole(&h, 0)) {
        bool dirty = false;
        for (int i = 0; i < p->n; i++)
            dirty = dirty || (bfs_mask_has(src, i) && h.s.dirty[i][EC_DATA]);
        if (dirty) { /* a client died mid-write: parity follows the data again */
            sinks = src & ~datamask;
            from = datamask;
        }
    }
    uint32_t healed = sinks ? rebuild(&h, from, sinks) : 0;
    if (healed)
        XL_INFO(p->xl, "healed the fragments of %d child(ren) of a file", bfs_mask_count(healed));
    settle(&h, healed & ~src, bfs_mask_first(src));
    heal_end(&h);
    return healed == sinks ? 0 : -EIO;
}

/* ---- metadata ---- */

int ec_heal_meta(struct ec_priv *p, const struct bfs_gfid *g, bool once)
{
    struct ec_hctx h;
    int rc = heal_begin(&h, p, g, EC_META, once);
    if (rc < 0)
        return rc;
    int src = bfs_mask_first(h.v.good[EC_META]);
    uint32_t sinks = h.v.present & ~h.v.good[EC_META];
    uint32_t healed = 0;
    struct bfs_getxattr_req greq = {.name = NULL};
    struct bfs_getxattr_rep grep = {0};
    greq.loc.gfid = *g;
    bool have_x = sinks && hsync(&h, src, BFS_FOP_GETXATTR, &greq, &grep) >= 0 && grep.xattrs &&
                  bfs_dict_count(grep.xattrs) > 0;
    for (int i = 0; i < p->n; i++) {
        if (!bfs_mask_has(sinks, i))
            continue;
        const struct bfs_iatt *a = &h.s.attr[src];
        struct bfs_setattr_req req = {.attr = *a,
                                      .valid = BFS_SET_UID | BFS_SET_GID | BFS_SET_ATIME |
                                               BFS_SET_MTIME};
        req.loc.gfid = *g;
        if (!S_ISLNK(a->mode))
            req.valid |= BFS_SET_MODE;
        rc = hsync(&h, i, BFS_FOP_SETATTR, &req, NULL);
        if (rc >= 0 && have_x) {
            struct bfs_setxattr_req sreq = {.xattrs = grep.xattrs};
            sreq.loc.gfid = *g;
            rc = hsync(&h, i, BFS_FOP_SETXATTR, &sreq, NULL);
        }
        if (rc >= 0)
            healed |= BFS_BIT(i);
    }
    bfs_getxattr_rep_clear_dup(&grep);
    settle(&h, healed, src);
    heal_end(&h);
    return healed == sinks ? 0 : -EIO;
}

/* ---- entries ---- */

static int list_dir(struct ec_hctx *h, int i, struct bfs_dirents *out)
{
    struct bfs_xl *xl = h->p->xl;
    struct bfs_fd *fd = bfs_fd_new(xl->graph, NULL, O_RDONLY | O_DIRECTORY, 1);
    if (!fd)
        return -ENOMEM;
    struct bfs_opendir_req oreq = {.fd = fd};
    oreq.loc.gfid = h->gfid;
    int rc = hsync(h, i, BFS_FOP_OPENDIR, &oreq, NULL);
    uint64_t off = 0;
    for (bool eod = false; rc >= 0 && !eod;) {
        struct bfs_readdir_req req = {.fd = fd, .size = 65536, .offset = off, .plus = true};
        struct bfs_readdir_rep rep;
        rc = hsync(h, i, BFS_FOP_READDIR, &req, &rep);
        for (uint32_t k = 0; rc >= 0 && k < rep.entries.count; k++) {
            const struct bfs_dirent *e = &rep.entries.v[k];
            off = e->d_off;
            if (strcmp(e->name, ".") && strcmp(e->name, ".."))
                rc = bfs_dirents_add(out, e->name, e->d_off, e->d_type, e->d_ino,
                                     e->has_attr ? &e->attr : NULL);
        }
        eod = rc < 0 || rep.eod || rep.entries.count == 0;
        bfs_readdir_rep_clear_dup(&rep);
    }
    bfs_fd_unref(fd);
    return rc < 0 ? rc : 0;
}

static const struct bfs_dirent *find(const struct bfs_dirents *l, const char *name)
{
    for (uint32_t k = 0; k < l->count; k++)
        if (strcmp(l->v[k].name, name) == 0)
            return &l->v[k];
    return NULL;
}

/* Child i's copy of a with a's owner and times (and `also`: BFS_SET_MODE). */
static void own_like(struct ec_hctx *h, int i, const struct bfs_iatt *a, uint32_t also)
{
    struct bfs_setattr_req req = {.attr = *a, .valid = BFS_SET_UID | BFS_SET_GID |
                                                       BFS_SET_ATIME | BFS_SET_MTIME | also};
    req.loc.gfid = a->gfid;
    (void)hsync(h, i, BFS_FOP_SETATTR, &req, NULL);
}

/* Makes entry e of source src on child i, with its GFID. */
static int make_entry(struct ec_hctx *h, int src, int i, const struct bfs_dirent *e)
{
    struct bfs_lookup_req lreq = {0};
    struct bfs_lookup_rep lrep;
    lreq.loc.pargfid = h->gfid;
    lreq.loc.name = e->name;
    int rc = hsync(h, src, BFS_FOP_LOOKUP, &lreq, &lrep);
    struct bfs_iatt a = lrep.attr;
    bfs_lookup_rep_clear_dup(&lrep);
    if (rc < 0)
        return rc;
    struct bfs_dict *x = bfs_dict_new();
    if (!x || bfs_dict_set_bin(x, EC_GFID_REQ, a.gfid.b, sizeof(a.gfid.b)) < 0) {
        bfs_dict_unref(x);
        return -ENOMEM;
    }
    struct bfs_loc loc = {0};
    loc.pargfid = h->gfid;
    loc.name = e->name;
    if (S_ISDIR(a.mode)) {
        struct bfs_mkdir_req req = {.loc = loc, .mode = a.mode & 07777, .xdata = x};
        rc = hsync(h, i, BFS_FOP_MKDIR, &req, NULL);
    } else if (S_ISLNK(a.mode)) {
        struct bfs_readlink_req rreq = {.size = 4096};
        struct bfs_readlink_rep rrep;
        rreq.loc.gfid = a.gfid;
        rc = hsync(h, src, BFS_FOP_READLINK, &rreq, &rrep);
        if (rc >= 0) {
            struct bfs_symlink_req req = {.target = rrep.target, .loc = loc, .xdata = x};
            rc = hsync(h, i, BFS_FOP_SYMLINK, &req, NULL);
        }
        bfs_readlink_rep_clear_dup(&rrep);
    } else {
        struct bfs_mknod_req req = {.loc = loc, .mode = a.mode, .rdev = a.rdev, .xdata = x};
        rc = hsync(h, i, BFS_FOP_MKNOD, &req, NULL);
    }
    bfs_dict_unref(x);
    if (rc >= 0) /* made by uid 0: the source's owner and times (its versions are 0 too) */
        own_like(h, i, &a, 0);
    return rc;
}

/* Is `have`, child i's entry for source entry e, half made: a name with
 * no GFID or a file with no handle (the listing tells), or a folder of
 * e's GFID that child i cannot reach by it (a mkdir killed before the
 * handle's link: one lookup by GFID tells; lib/heal-name.h)? */
static bool half_made(struct ec_hctx *h, int i, const struct bfs_dirent *have,
                      const struct bfs_dirent *e)
{
    return bfs_heal_name_half(have, e) || bfs_heal_dir_half(h->p->xl, i, h->st, have, e);
}

/* Name e of source src is half made on child i (lib/heal-name.h: a brick
 * killed in the middle of a create kept it with no GFID, or with no
 * handle): completed there with e's GFID, then given the source's mode,
 * owner and times as a made one. Its versions are a new copy's (0: it
 * never took a change by GFID), so it is stale against written sources
 * and the file's own heals, which now find it, rebuild it. */
static int complete_entry(struct ec_hctx *h, int i, const struct bfs_dirent *e)
{
    int rc = bfs_heal_name_complete(h->p->xl, i, h->st, &h->gfid, e);
    if (rc >= 0)
        own_like(h, i, &e->attr, S_ISLNK(e->attr.mode) ? 0 : BFS_SET_MODE);
    return rc;
}

static int remove_entry(struct ec_hctx *h, int i, const struct bfs_dirent *e)
{
    bool dir = e->d_type == DT_DIR || (e->has_attr && S_ISDIR(e->attr.mode));
    if (dir) {
        struct bfs_rmdir_req req = {0};
        req.loc.pargfid = h->gfid;
        req.loc.name = e->name;
        return hsync(h, i, BFS_FOP_RMDIR, &req, NULL);
    }
    struct bfs_unlink_req req = {0};
    req.loc.pargfid = h->gfid;
    req.loc.name = e->name;
    return hsync(h, i, BFS_FOP_UNLINK, &req, NULL);
}

int ec_heal_entry(struct ec_priv *p, const struct bfs_gfid *g, bool once)
{
    struct ec_hctx h;
    int rc = heal_begin(&h, p, g, EC_ENTRY, once);
    if (rc < 0)
        return rc;
    if ((h.s.attr[h.v.child].mode & S_IFMT) != S_IFDIR) {
        heal_end(&h);
        return 0;
    }
    int src = bfs_mask_first(h.v.good[EC_ENTRY]);
    /* entries missing anywhere are made, even without a version gap (a
     * lookup saw a name missing on a child) */
    uint32_t sinks = h.v.present & ~BFS_BIT(src);
    struct bfs_dirents sl = {0};
    uint32_t healed = 0;
    if (list_dir(&h, src, &sl) < 0)
        sinks = 0;
    for (int i = 0; i < p->n; i++) {
        if (!bfs_mask_has(sinks, i))
            continue;
        struct bfs_dirents kl = {0};
        bool stale = !bfs_mask_has(h.v.good[EC_ENTRY], i);
        int err = list_dir(&h, i, &kl);
        for (uint32_t e = 0; err == 0 && e < sl.count; e++) {
            const struct bfs_dirent *have = find(&kl, sl.v[e].name);
            if (!have ? make_entry(&h, src, i, &sl.v[e]) < 0
                      : half_made(&h, i, have, &sl.v[e]) && complete_entry(&h, i, &sl.v[e]) < 0)
                err = -EIO;
        }
        for (uint32_t e = 0; err == 0 && stale && e < kl.count; e++)
            if (!find(&sl, kl.v[e].name))
                (void)remove_entry(&h, i, &kl.v[e]);
        bfs_dirents_free(&kl);
        if (err == 0 && stale)
            healed |= BFS_BIT(i);
    }
    bfs_dirents_free(&sl);
    settle(&h, healed, src);
    heal_end(&h);
    return 0;
}

/* ---- the queue ---- */

static void run_job(void *owner, void *job)
{
    struct ec_priv *p = owner;
    struct ec_heal_req *r = job;
    int rc = 0;
    if (r->vop) {
        ec_vop_run(p, r);
        return;
    }
    if (!bfs_gfid_is_null(&r->pargfid))
        rc = ec_heal_entry(p, &r->pargfid, false);
    if (r->types & BFS_BIT(EC_ENTRY))
        rc = ec_heal_entry(p, &r->gfid, r->once) < 0 ? -1 : rc;
    if (r->types & BFS_BIT(EC_META))
        rc = ec_heal_meta(p, &r->gfid, r->once) < 0 ? -1 : rc;
    if (r->types & BFS_BIT(EC_DATA))
        rc = ec_heal_data(p, &r->gfid, r->once) < 0 ? -1 : rc;
    __atomic_add_fetch(rc < 0 ? &p->n_heal_fail : &p->n_heal_ok, 1, __ATOMIC_RELAXED);
    if (r->frame)
        ec_lookup_resume(p->xl, r->frame, r->req);
}

static void drop_job(void *owner, void *job)
{
    (void)owner;
    struct ec_heal_req *r = job;
    if (r->vop) {
        bfs_unwind_getxattr(r->frame, -ENOTCONN, &(struct bfs_getxattr_rep){0});
    } else if (r->frame) {
        bfs_unwind_lookup(r->frame, -ENOTCONN, NULL);
        bfs_lookup_req_free(r->req);
    }
}

static bool merge_job(void *queued, const void *job)
{
    struct ec_heal_req *q = queued;
    const struct ec_heal_req *j = job;
    if (!bfs_gfid_eq(&q->gfid, &j->gfid) || !bfs_gfid_eq(&q->pargfid, &j->pargfid))
        return false;
    q->types |= j->types;
    q->once = q->once && j->once;
    return true;
}

static const struct bfs_healq_ops heal_ops = {.run = run_job, .drop = drop_job,
                                              .merge = merge_job};

int ec_heal_start(struct ec_priv *p)
{
    return bfs_healq_start(&p->healq, p, sizeof(struct ec_heal_req), &heal_ops);
}

void ec_heal_stop(struct ec_priv *p)
{
    bfs_healq_stop(p->healq);
    p->healq = NULL;
}

int ec_heal_request(struct ec_priv *p, const struct ec_heal_req *r)
{
    size_t limit = (size_t)__atomic_load_n(&p->heal_count, __ATOMIC_RELAXED);
    return bfs_healq_push(p->healq, r, r->frame != NULL, limit);
}
