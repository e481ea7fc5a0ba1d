/*
 * dht-rename.c — rename of files and directories across subvolumes (the
 * protocol and what clients can observe are in docs/design/distribute.md,
 * "Rename").
 *
 * Files: S in P1 -> D in P2; Hs, Hd their hashed subvolumes, T where the
 * data of S lives (never moved). Under both names' entry locks:
 *   look both up through distribute;
 *   prepare D's pointer on Hd (when Hd != T): a link file at D if D is not
 *   on Hd, else one under a temporary name (nothing when S's own link file
 *   on Hs = Hd will be renamed);
 *   rename on T (S disappears, D is the file on T);
 *   switch D on Hd in one rename (S's link file or the temporary one);
 *   clean up: S's link file, the replaced D's data on a third subvolume.
 * Directories: every subvolume up; D (an empty directory) removed first
 * through our own rmdir (told that we hold the lock); rename on all but
 * Hs and Hd, then Hd, then Hs; undo what was done when a step fails.
 *
 * struct dht_rename_op per call. Slots: [0, n) per subvolume, then the
 * named ones below, then two for locks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dht.h"

enum {
    RN_START, RN_LOCK, RN_LOOKED, RN_LF, RN_RENAMED, RN_UNDO, RN_SWITCHED, RN_CLEANED,
    RD_LOOKED, RD_DSTGONE, RD_OTHERS, RD_HD, RD_HS, RD_ROLLED, RN_UNLOCK,
};

struct dht_rename_op {
    struct dht_op o;
    struct bfs_rename_req *req;  /* our copy */
    int n, hs, hd;
    int sl_src, sl_dst, sl_main, sl_aux, sl_aux2, sl_aux3, sl_lf;
    struct dht_info src, dst;
    int t;                       /* where the data of S is */
    bool dst_on_hd;              /* D has a name (data or link file) on Hd */
    bool move_slink;             /* rename S's link file on Hs = Hd to D */
    bool made_link;              /* lf made a link file (at D or tmp) */
    bool use_tmp;
    char tmp[64];
    struct bfs_loc tmploc;
    struct dht_lf lf;
    uint8_t *present, *done;     /* directories: [n] */
    int rc, ans;
    bool answered;               /* the caller has its answer; the unlocks are wound */
};

static void rename_cleanup(struct dht_op *o)
{
    struct dht_rename_op *r = (struct dht_rename_op *)o;
    bfs_rename_req_free(r->req);
    free(r->present);
    free(r->done);
}

static int finish(struct dht_rename_op *r, int rc, int slot)
{
    r->rc = rc;
    r->ans = rc >= 0 ? slot : -1;
    r->o.op.state = RN_UNLOCK;
    return BFS_OP_CONTINUE;
}

/* Answers as soon as the unlocks are wound, as mkdir and unlink do
 * (dht-dir.c, on_unlock): both names are switched by then, an unlock's
 * answer changes nothing, and this client's next request under either
 * lock goes down the same connection behind its unlock. */
static void answer(struct dht_rename_op *r)
{
    struct bfs_rename_rep rep = {0};
    const struct bfs_rename_rep *got = r->ans >= 0 ? DHT_REP(&r->o, r->ans, bfs_rename_rep) : NULL;
    if (got)
        rep = *got;
    else if (r->rc >= 0)
        rep.attr = r->src.attr; /* nothing to do (one file under both names) */
    if (r->rc >= 0 && !bfs_gfid_is_null(&r->src.attr.gfid)) {
        bool dir = S_ISDIR(r->src.attr.mode);
        dht__cache_put(r->o.priv, &r->src.attr.gfid, dir ? DHT_KIND_DIR : DHT_KIND_FILE,
                       dir ? r->hd : r->t);
        if (r->dst.rc >= 0 && !bfs_gfid_eq(&r->dst.attr.gfid, &r->src.attr.gfid))
            dht__cache_drop(r->o.priv, &r->dst.attr.gfid);
    }
    bfs_unwind_rename(r->o.caller, r->rc < 0 ? r->rc : 0, &rep);
}

static int on_unlock(struct dht_rename_op *r)
{
    int rc = dht__unlock_step(&r->o);
    if (!r->answered) {
        r->answered = true;
        answer(r);
    }
    return rc == DHT_WAIT ? BFS_OP_WAIT : BFS_OP_DONE;
}

/* ---- files ---- */

static int plan_file(struct dht_rename_op *r)
{
    const struct bfs_rename_req *q = r->req;
    r->t = r->src.cached;
    r->dst_on_hd = r->dst.rc >= 0 && (r->dst.link == r->hd || r->dst.cached == r->hd);
    if (r->hd == r->t) {
        r->o.op.state = RN_LF; /* no pointer needed: the rename on T replaces D */
        return BFS_OP_CONTINUE;
    }
    if (r->src.link == r->hd) {
        r->move_slink = true; /* S's link file on Hs = Hd becomes D's */
        r->o.op.state = RN_LF;
        return BFS_OP_CONTINUE;
    }
    const struct bfs_loc *at = &q->newloc;
    if (r->dst_on_hd) {
        char g[BFS_GFID_STRLEN];
        snprintf(r->tmp, sizeof(r->tmp), "%s%s", DHT_TMP_PREFIX, bfs_gfid_fmt(&r->src.attr.gfid, g));
        r->tmploc = (struct bfs_loc){.pargfid = q->newloc.pargfid, .name = r->tmp};
        r->use_tmp = true;
        at = &r->tmploc;
    }
    dht__lf_init(&r->lf, at, &r->src.attr.gfid, r->hd, r->t, r->sl_lf);
    dht__lf_shared(&r->lf, r->src.attr.nlink > 1);
    r->made_link = true;
    r->o.op.state = RN_LF;
    return BFS_OP_CONTINUE;
}

static int rename_on_t(struct dht_rename_op *r)
{
    if (r->made_link) {
        int rc = dht__lf_step(&r->o, &r->lf);
        if (rc == DHT_WAIT)
            return BFS_OP_WAIT;
        if (rc < 0)
            return finish(r, rc, -1);
    }
    r->o.op.state = RN_RENAMED;
    dht__wind(&r->o, r->sl_main, BFS_FOP_RENAME, r->t, r->req, false);
    return BFS_OP_WAIT;
}

static int on_renamed(struct dht_rename_op *r)
{
    const struct bfs_rename_req *q = r->req;
    int rc = dht__rc(&r->o, r->sl_main);
    if (rc < 0) {
        if (!r->made_link)
            return finish(r, rc, -1);
        r->rc = rc; /* take the prepared link file away again */
        r->o.op.state = RN_UNDO;
        dht__unlink_wind(&r->o, r->sl_aux, r->hd, r->use_tmp ? &r->tmploc : &q->newloc, true);
        return BFS_OP_WAIT;
    }
    struct bfs_rename_req sw = {.flags = 0};
    if (r->move_slink) {
        sw.oldloc = (struct bfs_loc){.pargfid = q->oldloc.pargfid, .name = q->oldloc.name};
    } else if (r->use_tmp) {
        sw.oldloc = r->tmploc;
    } else {
        r->o.op.state = RN_SWITCHED;
        return BFS_OP_CONTINUE;
    }
    sw.newloc = (struct bfs_loc){.pargfid = q->newloc.pargfid, .name = q->newloc.name};
    r->o.op.state = RN_SWITCHED;
    dht__wind(&r->o, r->sl_aux, BFS_FOP_RENAME, r->hd, &sw, true);
    return BFS_OP_WAIT;
}

static int on_switched(struct dht_rename_op *r)
{
    const struct bfs_rename_req *q = r->req;
    struct dht_priv *priv = r->o.priv;
    int rc = dht__rc(&r->o, r->sl_aux);
    if ((r->move_slink || r->use_tmp) && rc < 0)
        XL_ERR(priv->xl, "rename %s -> %s: switching the name on %s failed (%s): the old "
               "file stays visible under the new name", q->oldloc.name, q->newloc.name,
               priv->xl->children[r->hd]->name, strerror(-rc));
    bool any = false;
    int sl = r->src.link;
    if (sl >= 0 && sl != r->t && !r->move_slink) { /* S's link file */
        dht__unlink_wind(&r->o, r->sl_aux, sl, &q->oldloc, true);
        any = true;
    }
    int cd = r->dst.rc >= 0 ? r->dst.cached : -1;
    if (cd >= 0 && cd != r->t && cd != r->hd &&
        !bfs_gfid_eq(&r->dst.attr.gfid, &r->src.attr.gfid)) { /* the replaced file's data */
        dht__unlink_wind(&r->o, r->sl_aux2, cd, &q->newloc, true);
        any = true;
    }
    int dl = r->dst.rc >= 0 ? r->dst.link : -1;
    if (dl >= 0 && dl != r->hd && dl != r->t && dl != cd &&
        !bfs_gfid_eq(&r->dst.attr.gfid, &r->src.attr.gfid)) {
        /* the replaced file's link file where the previous table hashed D
         * (a rebalance pending): it points at the data just replaced */
        dht__unlink_wind(&r->o, r->sl_aux3, dl, &q->newloc, true);
        any = true;
    }
    r->o.op.state = RN_CLEANED;
    return any ? BFS_OP_WAIT : BFS_OP_CONTINUE;
}

/* ---- directories ---- */

static int dir_start(struct dht_rename_op *r)
{
    for (int s = 0; s < r->n; s++) {
        struct bfs_lookup_req q = {0};
        q.loc.pargfid = r->req->oldloc.pargfid;
        q.loc.name = r->req->oldloc.name;
        dht__wind(&r->o, s, BFS_FOP_LOOKUP, s, &q, false);
    }
    r->o.op.state = RD_LOOKED;
    return BFS_OP_WAIT;
}

static int dir_looked(struct dht_rename_op *r)
{
    for (int s = 0; s < r->n; s++) {
        const struct bfs_lookup_rep *l = DHT_REP(&r->o, s, bfs_lookup_rep);
        if (dht__rc(&r->o, s) == -ENOTCONN)
            return finish(r, -ENOTCONN, -1); /* every subvolume, or nothing */
        r->present[s] = dht__rc(&r->o, s) >= 0 && S_ISDIR(l->attr.mode) &&
                        bfs_gfid_eq(&l->attr.gfid, &r->src.attr.gfid);
    }
    if (r->dst.rc == -ENOENT) {
        r->o.op.state = RD_DSTGONE;
        return BFS_OP_CONTINUE;
    }
    struct bfs_rmdir_req q = {0}; /* D: an empty directory, replaced */
    q.loc.pargfid = r->req->newloc.pargfid;
    q.loc.name = r->req->newloc.name;
    q.xdata = bfs_dict_new();
    if (q.xdata)
        bfs_dict_set_int(q.xdata, DHT_NOLOCK_KEY, 1);
    r->o.op.state = RD_DSTGONE;
    dht__wind_self(&r->o, r->sl_aux, BFS_FOP_RMDIR, &q);
    bfs_dict_unref(q.xdata);
    return BFS_OP_WAIT;
}

static void dir_wind(struct dht_rename_op *r, int s, bool back)
{
    struct bfs_rename_req q = {0};
    q.oldloc = back ? r->req->newloc : r->req->oldloc;
    q.newloc = back ? r->req->oldloc : r->req->newloc;
    q.oldloc.gfid = q.newloc.gfid = bfs_gfid_null;
    q.oldloc.inode = q.newloc.inode = q.oldloc.parent = q.newloc.parent = NULL;
    dht__wind(&r->o, s, BFS_FOP_RENAME, s, &q, false);
}

static int rollback(struct dht_rename_op *r, int rc)
{
    r->rc = rc;
    bool any = false;
    for (int s = 0; s < r->n; s++) {
        if (r->done[s]) {
            dir_wind(r, s, true);
            any = true;
        }
    }
    r->o.op.state = RD_ROLLED;
    return any ? BFS_OP_WAIT : BFS_OP_CONTINUE;
}

/* The round just answered: which subvolumes renamed, did any fail? */
static int dir_round(struct dht_rename_op *r, int from_state)
{
    int err = 0;
    for (int s = 0; s < r->n; s++) {
        if (!r->o.op.replies[s].valid || r->o.op.replies[s].fop != BFS_FOP_RENAME || r->done[s])
            continue;
        int rc = dht__rc(&r->o, s);
        if (rc >= 0)
            r->done[s] = 1;
        else
            err = err ? err : rc;
    }
    if (err)
        return rollback(r, err);
    int next = from_state == RD_OTHERS ? r->hd : r->hs;
    if (from_state == RD_HS || (from_state == RD_HD && r->hs == r->hd))
        return finish(r, 0, r->present[r->hs] ? r->hs : r->hd);
    r->o.op.state = from_state == RD_OTHERS ? RD_HD : RD_HS;
    if (!r->present[next])
        return BFS_OP_CONTINUE;
    dir_wind(r, next, false);
    return BFS_OP_WAIT;
}

static int dir_step(struct dht_rename_op *r)
{
    switch (r->o.op.state) {
    case RD_LOOKED:
        return dir_looked(r);
    case RD_DSTGONE: {
        int rc = r->dst.rc == -ENOENT ? 0 : dht__rc(&r->o, r->sl_aux);
        if (rc < 0)
            return finish(r, rc, -1);
        bool any = false;
        for (int s = 0; s < r->n; s++) {
            if (r->present[s] && s != r->hs && s != r->hd) {
                dir_wind(r, s, false);
                any = true;
            }
        }
        r->o.op.state = RD_OTHERS;
        return any ? BFS_OP_WAIT : BFS_OP_CONTINUE;
    }
    case RD_OTHERS: case RD_HD: case RD_HS:
        return dir_round(r, r->o.op.state);
    default: /* RD_ROLLED */
        return finish(r, r->rc, -1);
    }
}

/* ---- both ---- */

static int on_looked(struct dht_rename_op *r)
{
    const struct bfs_rename_req *q = r->req;
    dht__info_get(&r->o, r->sl_src, &r->src);
    dht__info_get(&r->o, r->sl_dst, &r->dst);
    if (r->src.rc < 0)
        return finish(r, r->src.rc, -1);
    if (r->dst.rc < 0 && r->dst.rc != -ENOENT)
        return finish(r, r->dst.rc, -1);
    bool sdir = S_ISDIR(r->src.attr.mode);
    if (r->dst.rc >= 0) {
        if (bfs_gfid_eq(&r->dst.attr.gfid, &r->src.attr.gfid))
            return finish(r, 0, -1); /* two names of one file: nothing to do */
        if (q->flags & RENAME_NOREPLACE)
            return finish(r, -EEXIST, -1);
        bool ddir = S_ISDIR(r->dst.attr.mode);
        if (sdir != ddir)
            return finish(r, sdir ? -ENOTDIR : -EISDIR, -1);
    }
    if (sdir)
        return dir_start(r);
    if (r->src.cached < 0)
        return finish(r, -EIO, -1);
    return plan_file(r);
}

static int rename_step(struct bfs_op *op)
{
    struct dht_rename_op *r = (struct dht_rename_op *)op;
    int rc;
    switch (op->state) {
    case RN_START:
        r->o.op.state = RN_LOCK;
        return BFS_OP_CONTINUE;
    case RN_LOCK:
        if ((rc = dht__lock_step(&r->o)) == DHT_WAIT)
            return BFS_OP_WAIT;
        if (rc < 0)
            return finish(r, rc, -1);
        dht__info_wind(&r->o, r->sl_src, &r->req->oldloc, true);
        dht__info_wind(&r->o, r->sl_dst, &r->req->newloc, true);
        op->state = RN_LOOKED;
        return BFS_OP_WAIT;
    case RN_LOOKED: return on_looked(r);
    case RN_LF: return rename_on_t(r);
    case RN_RENAMED: return on_renamed(r);
    case RN_UNDO: return finish(r, r->rc, -1);
    case RN_SWITCHED: return on_switched(r);
    case RN_CLEANED: return finish(r, 0, r->sl_main);
    case RN_UNLOCK: return on_unlock(r);
    }
    return dir_step(r);
}

int dht__rename(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_rename_req *req)
{
    struct dht_priv *priv = xl->private;
    int n = priv->n;
    const struct bfs_loc *a = &req->oldloc, *b = &req->newloc;
    if (!a->name || !b->name || bfs_gfid_is_null(&a->pargfid) || bfs_gfid_is_null(&b->pargfid))
        return -EINVAL;
    if (bfs_name_check(a->name) < 0 || bfs_name_check(b->name) < 0)
        return -EINVAL;
    if (req->flags & ~(uint32_t)RENAME_NOREPLACE)
        return -EINVAL; /* RENAME_EXCHANGE across subvolumes: not supported */
    struct dht_rename_op *r = (struct dht_rename_op *)dht__op_new(
        sizeof(*r), frame, xl, n + 9, rename_step, rename_cleanup);
    if (!r)
        return -ENOMEM;
    r->n = n;
    r->sl_src = n;
    r->sl_dst = n + 1;
    r->sl_main = n + 2;
    r->sl_aux = n + 3;
    r->sl_aux2 = n + 4;
    r->sl_lf = n + 5;
    r->sl_aux3 = n + 6;
    r->o.lock_slot = n + 7;
    r->req = bfs_rename_req_dup(req);
    r->present = calloc((size_t)n, 1);
    r->done = calloc((size_t)n, 1);
    if (!r->req || !r->present || !r->done) {
        bfs_op_unref(&r->o.op);
        return -ENOMEM;
    }
    a = &r->req->oldloc;
    b = &r->req->newloc;
    r->hs = dht__hashed(&r->o, &a->pargfid, a->name);
    r->hd = dht__hashed(&r->o, &b->pargfid, b->name);
    r->t = -1;
    r->o.locks[0] = (struct dht_lock){.pargfid = a->pargfid, .name = a->name, .subvol = r->hs};
    r->o.locks[1] = (struct dht_lock){.pargfid = b->pargfid, .name = b->name, .subvol = r->hd};
    r->o.nlocks = 2;
    dht__locks_sort(&r->o);
    dht__op_start(&r->o);
    return 0;
}
