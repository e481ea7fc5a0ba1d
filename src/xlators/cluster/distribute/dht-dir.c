/*
 * dht-dir.c — mkdir and rmdir: directories exist on every subvolume with
 * one GFID (docs/design/distribute.md, "Creating and removing names").
 *
 *   mkdir  under the entry lock of (P, N) on N's hashed subvolume H: every
 *          subvolume at once with the same gfid-req. H's failure is the
 *          answer, and what the others made is removed again (still under
 *          the lock); a down one is healed by a later lookup. H known to be
 *          down: H alone is asked.
 *   rmdir  under the same lock: every subvolume must be up; all but H in
 *          parallel, then H. ENOTEMPTY caused only by stale link files
 *          (whose data a lookup through distribute no longer finds) purges
 *          them and retries, once. Any other failure re-creates the
 *          directory (GFID, mode, owner) where it was already removed.
 *
 * struct dht_dir_op per call. Reply slots: [0, n) per subvolume, [n, 2n)
 * per subvolume again (restores, purge listings), [2n, 2n + PURGE_MAX)
 * purge lookups and unlinks, then two for locks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dht.h"

#define PURGE_MAX 64
#define PURGE_LIST_SIZE (256u << 10)

enum {
    D_START, D_LOCK, D_FIRST, D_REST, D_UNDONE,
    R_LOCK, R_LOOKED, R_OTHERS, R_LAST,
    R_RESTORE, R_RESTORE_OWNER, R_RESTORED,
    P_OPEN, P_READ, P_CHECK, P_VERIFY, P_UNLINKED,
    X_UNLOCK,
};

struct purge_cand {
    int s;
    char *name;
};

struct dht_dir_op {
    struct dht_op o;
    int fop, n, h;
    void *req;                /* our copy (mkdir or rmdir request) */
    struct bfs_loc loc;       /* borrowed from req */
    struct bfs_gfid gfid;
    struct bfs_iatt auth;     /* H's attributes (rmdir: for restores) */
    uint8_t *removed;         /* [n] rmdir succeeded there */
    uint8_t *failed;          /* [n] rmdir answered ENOTEMPTY there */
    int rc;                   /* answer kept while restoring/unlocking */
    int ans;                  /* slot of the reply to answer, or -1 */
    bool purged;
    bool nolock;              /* the caller (rename) holds the entry lock */
    bool answered;            /* the caller has its answer; only the unlock is left */
    int after_purge;          /* R_OTHERS or R_LAST */
    struct bfs_fd *pfd;       /* purge listings */
    struct purge_cand cand[PURGE_MAX];
    int ncand;
};

#define SLOT_AUX(d, s) ((d)->n + (s))
#define SLOT_P(d, k) (2 * (d)->n + (k))

static void dir_cleanup(struct dht_op *o)
{
    struct dht_dir_op *d = (struct dht_dir_op *)o;
    if (d->req) {
        bfs_fop_info[d->fop].req_clear_dup(d->req);
        free(d->req);
    }
    free(d->removed);
    free(d->failed);
    for (int k = 0; k < d->ncand; k++)
        free(d->cand[k].name);
    if (d->pfd)
        bfs_fd_unref(d->pfd);
}

static int finish(struct dht_dir_op *d, int rc, int slot)
{
    d->rc = rc;
    d->ans = rc >= 0 ? slot : -1;
    d->o.op.state = X_UNLOCK;
    return BFS_OP_CONTINUE;
}

/* The caller is answered as soon as the unlock is wound, not when it is
 * answered: the directory is made (or removed) on every subvolume by then,
 * and the unlock's answer changes nothing (a failed unlock is not acted on).
 * This mount's next request on the name goes down the same connection
 * after the unlock; another client's lock waits for it as before. One
 * round trip less per mkdir and rmdir. */
static int on_unlock(struct dht_dir_op *d)
{
    int rc = dht__unlock_step(&d->o);
    if (!d->answered) {
        const void *rep = d->ans >= 0 ? dht__rep(&d->o, d->ans) : NULL;
        if (d->rc >= 0 && d->fop == BFS_FOP_MKDIR && rep)
            dht__cache_put(d->o.priv, &((const struct bfs_mkdir_rep *)rep)->attr.gfid,
                           DHT_KIND_DIR, d->h);
        d->answered = true;
        bfs_unwind_any(d->fop, d->o.caller, d->rc < 0 ? d->rc : 0, rep);
    }
    return rc == DHT_WAIT ? BFS_OP_WAIT : BFS_OP_DONE;
}

static int lock(struct dht_dir_op *d)
{
    if (d->nolock)
        return 0;
    if (d->o.nlocks == 0) {
        d->o.locks[0] = (struct dht_lock){.pargfid = d->loc.pargfid, .name = d->loc.name,
                                          .subvol = d->h};
        d->o.nlocks = 1;
        dht__locks_sort(&d->o);
    }
    return dht__lock_step(&d->o);
}

/* ---- mkdir ---- */

static void mkdir_wind(struct dht_dir_op *d, int s)
{
    struct bfs_mkdir_req r = *(const struct bfs_mkdir_req *)d->req;
    struct bfs_dict *xd = r.xdata ? bfs_dict_copy(r.xdata) : bfs_dict_new();
    if (xd)
        bfs_dict_set_bin(xd, DHT_GFID_REQ_KEY, d->gfid.b, sizeof(d->gfid.b));
    r.xdata = xd;
    dht__wind(&d->o, s, BFS_FOP_MKDIR, s, &r, false);
    bfs_dict_unref(xd);
}

/* Under the lock, mkdir goes to every subvolume at once (one round trip,
 * not two). H's answer decides: H refused, so the name is not a directory
 * of ours; what the others made with our GFID is removed again (as root,
 * still under the lock, so no other change of the name on a subvolume
 * other than H can come in between: docs/design/distribute.md). With H
 * known to be down, only H is asked, as before (nothing made elsewhere). */
static int mkdir_all(struct dht_dir_op *d)
{
    pthread_mutex_lock(&d->o.priv->lock);
    bool h_down = d->o.priv->child[d->h] < 0;
    pthread_mutex_unlock(&d->o.priv->lock);
    mkdir_wind(d, d->h);
    if (h_down) {
        d->o.op.state = D_FIRST;
        return BFS_OP_WAIT;
    }
    for (int s = 0; s < d->n; s++)
        if (s != d->h)
            mkdir_wind(d, s);
    d->o.op.state = D_REST;
    return BFS_OP_WAIT;
}

/* H refused: undo what the others made (their mkdir succeeded: it is ours). */
static int mkdir_undo(struct dht_dir_op *d, int rc)
{
    bool any = false;
    for (int s = 0; s < d->n; s++) {
        if (s == d->h || dht__rc(&d->o, s) < 0)
            continue;
        struct bfs_rmdir_req r = {.loc = d->loc};
        dht__wind(&d->o, SLOT_AUX(d, s), BFS_FOP_RMDIR, s, &r, true);
        any = true;
    }
    d->rc = rc;
    d->o.op.state = D_UNDONE;
    return any ? BFS_OP_WAIT : BFS_OP_CONTINUE;
}

static int mkdir_step(struct dht_dir_op *d)
{
    int rc;
    switch (d->o.op.state) {
    case D_START:
        if (!dht__xdata_gfid_req(((const struct bfs_mkdir_req *)d->req)->xdata, &d->gfid))
            bfs_gfid_generate_entry(&d->gfid);
        d->o.op.state = D_LOCK;
        return BFS_OP_CONTINUE;
    case D_LOCK:
        if ((rc = lock(d)) == DHT_WAIT)
            return BFS_OP_WAIT;
        if (rc < 0)
            return finish(d, rc, -1);
        return mkdir_all(d);
    case D_FIRST: /* H was down: only H was asked */
        return finish(d, dht__rc(&d->o, d->h), d->h);
    case D_UNDONE:
        for (int s = 0; s < d->n; s++) {
            if (s == d->h || dht__rc(&d->o, s) < 0)
                continue;
            rc = dht__rc(&d->o, SLOT_AUX(d, s));
            if (rc < 0)
                XL_WARN(d->o.priv->xl, "mkdir %s refused by %s: its copy on %s stays: %s",
                        d->loc.name, d->o.priv->xl->children[d->h]->name,
                        d->o.priv->xl->children[s]->name, strerror(-rc));
        }
        return finish(d, d->rc, -1);
    default: /* D_REST */
        if ((rc = dht__rc(&d->o, d->h)) < 0)
            return mkdir_undo(d, rc);
        for (int s = 0; s < d->n; s++) {
            rc = dht__rc(&d->o, s);
            if (s != d->h && rc < 0 && rc != -ENOTCONN)
                XL_WARN(d->o.priv->xl, "mkdir %s on %s: %s (heal on lookup)", d->loc.name,
                        d->o.priv->xl->children[s]->name, strerror(-rc));
        }
        return finish(d, 0, d->h);
    }
}

/* ---- rmdir: restoring what was removed ---- */

static int restore(struct dht_dir_op *d, int rc)
{
    d->rc = rc;
    d->o.op.state = R_RESTORE;
    return BFS_OP_CONTINUE;
}

static int restore_step(struct dht_dir_op *d)
{
    bool any = false;
    if (d->o.op.state == R_RESTORE) {
        struct bfs_dict *xd = dht__xdata_gfid(&d->gfid);
        for (int s = 0; s < d->n; s++) {
            if (!d->removed[s])
                continue;
            struct bfs_mkdir_req r = {.loc = d->loc, .mode = d->auth.mode & 07777, .xdata = xd};
            XL_INFO(d->o.priv->xl, "rmdir %s failed (%s): restoring it on %s", d->loc.name,
                    strerror(-d->rc), d->o.priv->xl->children[s]->name);
            dht__wind(&d->o, SLOT_AUX(d, s), BFS_FOP_MKDIR, s, &r, true);
            any = true;
        }
        bfs_dict_unref(xd);
        d->o.op.state = R_RESTORE_OWNER;
    } else if (d->o.op.state == R_RESTORE_OWNER) {
        for (int s = 0; s < d->n; s++) {
            if (!d->removed[s] || dht__rc(&d->o, SLOT_AUX(d, s)) < 0)
                continue;
            struct bfs_setattr_req r = {.attr = d->auth,
                                        .valid = BFS_SET_MODE | BFS_SET_UID | BFS_SET_GID};
            r.loc.gfid = d->gfid;
            dht__wind(&d->o, SLOT_AUX(d, s), BFS_FOP_SETATTR, s, &r, true);
            any = true;
        }
        d->o.op.state = R_RESTORED;
    } else {
        return finish(d, d->rc, -1);
    }
    return any ? BFS_OP_WAIT : BFS_OP_CONTINUE;
}

/* ---- rmdir: purging stale link files ---- */

static int purge_start(struct dht_dir_op *d, int after)
{
    d->purged = true;
    d->after_purge = after;
    d->pfd = bfs_fd_new(d->o.priv->xl->graph, NULL, O_RDONLY | O_DIRECTORY, 1);
    if (!d->pfd)
        return restore(d, -ENOTEMPTY);
    for (int s = 0; s < d->n; s++) {
        if (!d->failed[s])
            continue;
        struct bfs_opendir_req r = {.fd = d->pfd};
        r.loc.gfid = d->gfid;
        dht__wind(&d->o, SLOT_AUX(d, s), BFS_FOP_OPENDIR, s, &r, true);
    }
    d->o.op.state = P_READ;
    return BFS_OP_WAIT;
}

static int purge_read(struct dht_dir_op *d)
{
    for (int s = 0; s < d->n; s++) {
        if (!d->failed[s])
            continue;
        if (dht__rc(&d->o, SLOT_AUX(d, s)) < 0)
            return restore(d, -ENOTEMPTY);
    }
    for (int s = 0; s < d->n; s++) {
        if (!d->failed[s])
            continue;
        struct bfs_readdir_req r = {.fd = d->pfd, .size = PURGE_LIST_SIZE, .plus = true};
        dht__wind(&d->o, SLOT_AUX(d, s), BFS_FOP_READDIR, s, &r, true);
    }
    d->o.op.state = P_CHECK;
    return BFS_OP_WAIT;
}

/* Only link-file-shaped entries, all listed at once: candidates. Each is
 * checked through distribute: a stale one is not found (ENOENT). */
static int purge_check(struct dht_dir_op *d)
{
    for (int s = 0; s < d->n; s++) {
        if (!d->failed[s])
            continue;
        const struct bfs_readdir_rep *r = DHT_REP(&d->o, SLOT_AUX(d, s), bfs_readdir_rep);
        if (dht__rc(&d->o, SLOT_AUX(d, s)) < 0 || !r->eod)
            return restore(d, -ENOTEMPTY);
        for (uint32_t i = 0; i < r->entries.count; i++) {
            const struct bfs_dirent *e = &r->entries.v[i];
            if (!e->has_attr || !dht__is_suspicious(&e->attr) || d->ncand == PURGE_MAX)
                return restore(d, -ENOTEMPTY);
            d->cand[d->ncand].s = s;
            if (!(d->cand[d->ncand].name = strdup(e->name)))
                return restore(d, -ENOTEMPTY);
            d->ncand++;
        }
    }
    for (int k = 0; k < d->ncand; k++) {
        struct bfs_loc loc = {.pargfid = d->gfid, .name = d->cand[k].name};
        dht__info_wind(&d->o, SLOT_P(d, k), &loc, true);
    }
    d->o.op.state = P_VERIFY;
    return d->ncand ? BFS_OP_WAIT : BFS_OP_CONTINUE;
}

static int purge_verify(struct dht_dir_op *d)
{
    for (int k = 0; k < d->ncand; k++)
        if (dht__rc(&d->o, SLOT_P(d, k)) != -ENOENT)
            return restore(d, -ENOTEMPTY); /* a real file behind it */
    for (int k = 0; k < d->ncand; k++) {
        struct bfs_loc loc = {.pargfid = d->gfid, .name = d->cand[k].name};
        XL_INFO(d->o.priv->xl, "rmdir %s: removing stale link file %s on %s", d->loc.name,
                d->cand[k].name, d->o.priv->xl->children[d->cand[k].s]->name);
        dht__unlink_wind(&d->o, SLOT_P(d, k), d->cand[k].s, &loc, true);
    }
    d->o.op.state = P_UNLINKED;
    return d->ncand ? BFS_OP_WAIT : BFS_OP_CONTINUE;
}

static int purge_retry(struct dht_dir_op *d)
{
    for (int s = 0; s < d->n; s++)
        if (d->failed[s])
            dht__wind(&d->o, s, BFS_FOP_RMDIR, s, d->req, false);
    d->o.op.state = d->after_purge;
    return BFS_OP_WAIT;
}

/* ---- rmdir ---- */

static int rmdir_looked(struct dht_dir_op *d)
{
    const struct bfs_lookup_rep *hr = DHT_REP(&d->o, d->h, bfs_lookup_rep);
    for (int s = 0; s < d->n; s++)
        if (dht__rc(&d->o, s) == -ENOTCONN)
            return finish(d, -ENOTCONN, -1); /* heal would resurrect it there */
    if (dht__rc(&d->o, d->h) < 0)
        return finish(d, dht__rc(&d->o, d->h), -1);
    if (!S_ISDIR(hr->attr.mode))
        return finish(d, -ENOTDIR, -1);
    d->gfid = hr->attr.gfid;
    d->auth = hr->attr;
    bool any = false;
    for (int s = 0; s < d->n; s++) {
        const struct bfs_lookup_rep *r = DHT_REP(&d->o, s, bfs_lookup_rep);
        if (s == d->h || dht__rc(&d->o, s) < 0 || !S_ISDIR(r->attr.mode) ||
            !bfs_gfid_eq(&r->attr.gfid, &d->gfid))
            continue;
        dht__wind(&d->o, s, BFS_FOP_RMDIR, s, d->req, false);
        any = true;
    }
    d->o.op.state = R_OTHERS;
    return any ? BFS_OP_WAIT : BFS_OP_CONTINUE;
}

/* After a round of rmdirs on the subvolumes in `which` (all but H, or H):
 * note what was removed; decide between going on, purging and restoring. */
static int rmdir_round(struct dht_dir_op *d, bool last)
{
    int err = 0;
    bool only_notempty = true;
    memset(d->failed, 0, (size_t)d->n);
    for (int s = 0; s < d->n; s++) {
        if ((s == d->h) != last || !d->o.op.replies[s].valid ||
            d->o.op.replies[s].fop != BFS_FOP_RMDIR || d->removed[s])
            continue;
        int rc = dht__rc(&d->o, s);
        if (rc >= 0 || rc == -ENOENT) { /* ENOENT: already gone there */
            d->removed[s] = rc >= 0;
            continue;
        }
        d->failed[s] = rc == -ENOTEMPTY;
        only_notempty = only_notempty && rc == -ENOTEMPTY;
        err = err ? err : rc;
    }
    if (err && only_notempty && !d->purged)
        return purge_start(d, last ? R_LAST : R_OTHERS);
    if (err)
        return restore(d, err);
    if (last)
        return finish(d, 0, d->h);
    d->o.op.state = R_LAST;
    dht__wind(&d->o, d->h, BFS_FOP_RMDIR, d->h, d->req, false);
    return BFS_OP_WAIT;
}

static int rmdir_step(struct dht_dir_op *d)
{
    int rc;
    switch (d->o.op.state) {
    case D_START:
        d->o.op.state = R_LOCK;
        return BFS_OP_CONTINUE;
    case R_LOCK:
        if ((rc = lock(d)) == DHT_WAIT)
            return BFS_OP_WAIT;
        if (rc < 0)
            return finish(d, rc, -1);
        for (int s = 0; s < d->n; s++) {
            struct bfs_lookup_req r = {0};
            r.loc.pargfid = d->loc.pargfid;
            r.loc.name = d->loc.name;
            dht__wind(&d->o, s, BFS_FOP_LOOKUP, s, &r, false);
        }
        d->o.op.state = R_LOOKED;
        return BFS_OP_WAIT;
    case R_LOOKED: return rmdir_looked(d);
    case R_OTHERS: return rmdir_round(d, false);
    case R_LAST: return rmdir_round(d, true);
    case R_RESTORE: case R_RESTORE_OWNER: case R_RESTORED: return restore_step(d);
    case P_READ: return purge_read(d);
    case P_CHECK: return purge_check(d);
    case P_VERIFY: return purge_verify(d);
    case P_UNLINKED: return purge_retry(d);
    }
    return finish(d, -EIO, -1);
}

static int dir_step(struct bfs_op *op)
{
    struct dht_dir_op *d = (struct dht_dir_op *)op;
    if (op->state == X_UNLOCK)
        return on_unlock(d);
    return d->fop == BFS_FOP_MKDIR ? mkdir_step(d) : rmdir_step(d);
}

static int dir_new(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req,
                   const struct bfs_loc *loc)
{
    struct dht_priv *priv = xl->private;
    int n = priv->n;
    if (bfs_gfid_is_null(&loc->pargfid) || !loc->name)
        return -EINVAL;
    int rc = bfs_name_check(loc->name);
    if (rc < 0)
        return rc;
    struct dht_dir_op *d = (struct dht_dir_op *)dht__op_new(
        sizeof(*d), frame, xl, 2 * n + PURGE_MAX + 2, dir_step, dir_cleanup);
    if (!d)
        return -ENOMEM;
    d->fop = fop;
    d->n = n;
    d->o.lock_slot = 2 * n + PURGE_MAX;
    d->req = malloc(bfs_fop_info[fop].req_size);
    d->removed = calloc((size_t)n, 1);
    d->failed = calloc((size_t)n, 1);
    if (!d->req || !d->removed || !d->failed ||
        bfs_fop_info[fop].req_copy_into(d->req, req) < 0) {
        free(d->req);
        d->req = NULL;
        bfs_op_unref(&d->o.op);
        return -ENOMEM;
    }
    d->loc = *(const struct bfs_loc *)((const char *)d->req +
                                      ((const char *)loc - (const char *)req));
    d->h = dht__hashed(&d->o, &d->loc.pargfid, d->loc.name);
    int64_t v;
    d->nolock = fop == BFS_FOP_RMDIR &&
                bfs_dict_get_int(((const struct bfs_rmdir_req *)req)->xdata, DHT_NOLOCK_KEY,
                                 &v) == 0 && v == 1;
    dht__op_start(&d->o);
    return 0;
}

int dht__mkdir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_mkdir_req *req)
{
    return dir_new(frame, xl, BFS_FOP_MKDIR, req, &req->loc);
}

int dht__rmdir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_rmdir_req *req)
{
    return dir_new(frame, xl, BFS_FOP_RMDIR, req, &req->loc);
}
