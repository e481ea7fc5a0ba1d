/*
 * dht-entry.c — names of files: create, mknod, symlink, link, unlink (the
 * protocols are in docs/design/distribute.md, "Creating and removing
 * names"). Directories are in dht-dir.c, rename in dht-rename.c.
 *
 * One struct dht_entry_op per call, whatever the fop: it keeps a copy of
 * the request, the name's hashed subvolume, where the data is, and the
 * link-file and lock sub-procedures. Every path ends in E_UNLOCK, which
 * releases any entry lock and then answers from the kept reply slot.
 *
 *   create   create on H with O_EXCL. EEXIST without the caller's O_EXCL:
 *            find the file through distribute and open it where it lives.
 *            A name that exists on H yet is not found (a stale link file)
 *            is cleared under the entry lock and the create retried.
 *            H below min-free-disk: lock, link file on H, create with the
 *            same GFID elsewhere (undo the link file if that fails).
 *   mknod, symlink  on H.
 *   link     where the data is; a link file on the new name's H first when
 *            that is another subvolume (under the entry lock).
 *   unlink   a file on its hashed subvolume H, when H is a single brick whose
 *            features/locks acknowledged it: one request, in which the brick
 *            takes the entry lock, finds the name not link-shaped, unlinks
 *            and unlocks (features/locks/locks-unlink.c). Anything else (a
 *            link file, not found there, a brick not known to do it): under
 *            the entry lock taken from here, data name first (as the
 *            caller), then the link file (as root); a stale link file alone
 *            is cleared.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dht.h"
#include "xlators/lib/lk-unlink-wire.h"

enum {
    E_START,
    E_UNLOCK,     /* release locks, then answer (or retry) */
    E_SIMPLE,     /* one call answered as it is */
    C_CREATED, C_FOUND, C_OPENED,
    C_SLOCK, C_SLOOK, C_SRAW, C_SUNLINK,
    C_DLOCK, C_DLINK, C_DCREATE, C_DUNDO,
    K_FOUND, K_LOCK, K_LF, K_DATA, K_UNDO,
    U_FAST, U_LOCK, U_FOUND, U_DATA, U_LINK, U_STALE, U_STALE_DONE,
};

enum { S_MAIN, S_AUX, S_INFO, S_LF, S_LOCK, NSLOTS = S_LOCK + 2 };

struct dht_entry_op {
    struct dht_op o;
    int fop;
    void *req;              /* our copy of the request */
    struct bfs_loc loc;     /* the name made or removed (borrowed from req) */
    int h;                  /* its hashed subvolume */
    int data;               /* where the data is, or goes */
    int link;               /* where its link file is, or -1 */
    int tries;
    bool retry;             /* E_UNLOCK goes back to E_START */
    bool answered;          /* the caller has its answer; only the unlock is left */
    struct bfs_gfid gfid;
    struct dht_lf lf;
    struct dht_info info;
    int rc;                 /* the answer, kept while unlocking */
    int ans;                /* slot holding the reply to answer, or -1 */
};

static void entry_cleanup(struct dht_op *o)
{
    struct dht_entry_op *e = (struct dht_entry_op *)o;
    if (e->req) {
        bfs_fop_info[e->fop].req_clear_dup(e->req);
        free(e->req);
    }
}

static int finish(struct dht_entry_op *e, int rc, int slot)
{
    e->rc = rc;
    e->ans = rc >= 0 ? slot : -1;
    e->retry = false;
    e->o.op.state = E_UNLOCK;
    return BFS_OP_CONTINUE;
}

static int retry(struct dht_entry_op *e)
{
    e->retry = true;
    e->o.op.state = E_UNLOCK;
    return BFS_OP_CONTINUE;
}

static int set_lock(struct dht_entry_op *e)
{
    if (e->o.nlocks == 0) {
        e->o.locks[0] = (struct dht_lock){.pargfid = e->loc.pargfid, .name = e->loc.name,
                                          .subvol = e->h};
        e->o.nlocks = 1;
        dht__locks_sort(&e->o);
    }
    return dht__lock_step(&e->o);
}

/* ---- answering ---- */

static void answer_create(struct dht_entry_op *e)
{
    const struct bfs_create_req *q = e->req;
    struct bfs_create_rep rep = {0};
    if (e->ans == S_AUX) { /* an existing file, opened where it lives */
        const struct bfs_open_rep *r = DHT_REP(&e->o, S_AUX, bfs_open_rep);
        rep.attr = r->attr;
        rep.preparent = rep.postparent = e->info.parent;
        rep.xdata = r->xdata;
    } else if (e->ans >= 0) {
        rep = *DHT_REP(&e->o, e->ans, bfs_create_rep);
    }
    if (e->rc >= 0) {
        dht__fd_set_subvol(e->o.priv->xl, q->fd, e->data);
        dht__cache_put(e->o.priv, &rep.attr.gfid, DHT_KIND_FILE, e->data);
    }
    bfs_unwind_create(e->o.caller, e->rc < 0 ? e->rc : 0, &rep);
}

static int answer(struct dht_entry_op *e)
{
    const void *rep = e->ans >= 0 ? dht__rep(&e->o, e->ans) : NULL;
    int rc = e->rc < 0 ? e->rc : 0;
    switch (e->fop) {
    case BFS_FOP_CREATE:
        answer_create(e);
        return BFS_OP_DONE;
    case BFS_FOP_MKNOD: case BFS_FOP_SYMLINK: case BFS_FOP_LINK:
        if (rc >= 0 && rep) /* attr is the first field of all three replies */
            dht__cache_put(e->o.priv, &((const struct bfs_mknod_rep *)rep)->attr.gfid,
                           DHT_KIND_FILE, e->data);
        break;
    }
    bfs_unwind_any(e->fop, e->o.caller, rc, rep);
    return BFS_OP_DONE;
}

/* Answers as soon as the unlock is wound (unless the op starts over): the
 * change is made, and the unlock's answer changes nothing (see on_unlock in
 * dht-dir.c). One round trip less for unlink and for the locked paths of
 * create and link. */
static int on_unlock(struct dht_entry_op *e)
{
    int rc = dht__unlock_step(&e->o);
    if (rc == DHT_WAIT) {
        if (!e->retry && !e->answered) {
            e->answered = true;
            (void)answer(e);
        }
        return BFS_OP_WAIT;
    }
    e->o.nlocks = 0;
    if (e->answered)
        return BFS_OP_DONE;
    if (!e->retry)
        return answer(e);
    e->retry = false;
    e->o.op.state = E_START;
    return BFS_OP_CONTINUE;
}

/* ---- create ---- */

static struct bfs_dict *xdata_with_gfid(const struct bfs_dict *xd, const struct bfs_gfid *g)
{
    struct bfs_dict *d = xd ? bfs_dict_copy(xd) : bfs_dict_new();
    if (d && bfs_dict_set_bin(d, DHT_GFID_REQ_KEY, g->b, sizeof(g->b)) < 0) {
        bfs_dict_unref(d);
        return NULL;
    }
    return d;
}

static int create_start(struct dht_entry_op *e)
{
    const struct bfs_create_req *q = e->req;
    e->h = dht__hashed(&e->o, &q->loc.pargfid, q->loc.name);
    e->data = e->tries == 0 ? dht__free_pick(e->o.priv, e->h) : e->h;
    if (e->data != e->h) { /* H is full: link file on H, data elsewhere */
        if (!dht__xdata_gfid_req(q->xdata, &e->gfid))
            bfs_gfid_generate_entry(&e->gfid);
        e->o.op.state = C_DLOCK;
        return BFS_OP_CONTINUE;
    }
    struct bfs_create_req r = *q;
    r.flags |= O_EXCL; /* so we know whether we made it (see C_CREATED) */
    e->o.op.state = C_CREATED;
    dht__wind(&e->o, S_MAIN, BFS_FOP_CREATE, e->h, &r, false);
    return BFS_OP_WAIT;
}

static int create_created(struct dht_entry_op *e)
{
    const struct bfs_create_req *q = e->req;
    int rc = dht__rc(&e->o, S_MAIN);
    if (rc != -EEXIST || (q->flags & O_EXCL))
        return finish(e, rc, S_MAIN);
    e->o.op.state = C_FOUND; /* it exists: where does it live? */
    dht__info_wind(&e->o, S_INFO, &e->loc, true);
    return BFS_OP_WAIT;
}

static int create_found(struct dht_entry_op *e)
{
    const struct bfs_create_req *q = e->req;
    dht__info_get(&e->o, S_INFO, &e->info);
    if (e->info.rc == -ENOENT && e->tries++ < 2) {
        e->o.op.state = C_SLOCK; /* EEXIST on H, yet not found: a stale link file */
        return BFS_OP_CONTINUE;
    }
    if (e->info.rc < 0)
        return finish(e, e->info.rc, -1);
    if (S_ISDIR(e->info.attr.mode))
        return finish(e, -EISDIR, -1);
    e->data = e->info.cached;
    struct bfs_open_req r = {.fd = q->fd, .flags = q->flags & ~(uint32_t)(O_CREAT | O_EXCL),
                             .xdata = q->xdata};
    r.loc = q->loc;
    r.loc.gfid = e->info.attr.gfid;
    e->o.op.state = C_OPENED;
    dht__wind(&e->o, S_AUX, BFS_FOP_OPEN, e->data, &r, false);
    return BFS_OP_WAIT;
}

/* Stale link file in the way: under the lock, is the name still not found?
 * Then remove what H has under it (a link file) and create again. */
static int create_stale(struct dht_entry_op *e)
{
    const struct bfs_lookup_rep *r;
    switch (e->o.op.state) {
    case C_SLOCK: {
        int rc = set_lock(e);
        if (rc == DHT_WAIT)
            return BFS_OP_WAIT;
        if (rc < 0)
            return finish(e, rc, -1);
        e->o.op.state = C_SLOOK;
        dht__info_wind(&e->o, S_INFO, &e->loc, true);
        return BFS_OP_WAIT;
    }
    case C_SLOOK:
        if (dht__rc(&e->o, S_INFO) != -ENOENT)
            return retry(e);
        e->o.op.state = C_SRAW;
        {
            struct bfs_lookup_req q = {0};
            q.loc.pargfid = e->loc.pargfid;
            q.loc.name = e->loc.name;
            dht__wind(&e->o, S_AUX, BFS_FOP_LOOKUP, e->h, &q, true);
        }
        return BFS_OP_WAIT;
    case C_SRAW:
        r = DHT_REP(&e->o, S_AUX, bfs_lookup_rep);
        if (dht__rc(&e->o, S_AUX) < 0 || !dht__is_suspicious(&r->attr))
            return retry(e);
        XL_INFO(e->o.priv->xl, "removing stale link file %s on %s", e->loc.name,
                e->o.priv->xl->children[e->h]->name);
        e->o.op.state = C_SUNLINK;
        dht__unlink_wind(&e->o, S_AUX, e->h, &e->loc, true);
        return BFS_OP_WAIT;
    default: /* C_SUNLINK */
        return retry(e);
    }
}

/* H below min-free-disk: link file on H, the file itself on e->data. */
static int create_divert(struct dht_entry_op *e)
{
    const struct bfs_create_req *q = e->req;
    int rc;
    switch (e->o.op.state) {
    case C_DLOCK:
        if ((rc = set_lock(e)) == DHT_WAIT)
            return BFS_OP_WAIT;
        if (rc < 0)
            return finish(e, rc, -1);
        dht__lf_init(&e->lf, &e->loc, &e->gfid, e->h, e->data, S_LF);
        e->o.op.state = C_DLINK;
        return BFS_OP_CONTINUE;
    case C_DLINK:
        if ((rc = dht__lf_step(&e->o, &e->lf)) == DHT_WAIT)
            return BFS_OP_WAIT;
        if (rc == -EEXIST) {
            e->tries = 1; /* the name exists: the plain path sorts it out */
            return retry(e);
        }
        if (rc < 0)
            return finish(e, rc, -1);
        {
            struct bfs_create_req r = *q;
            r.flags |= O_EXCL;
            r.xdata = xdata_with_gfid(q->xdata, &e->gfid);
            e->o.op.state = C_DCREATE;
            dht__wind(&e->o, S_MAIN, BFS_FOP_CREATE, e->data, &r, false);
            bfs_dict_unref(r.xdata);
        }
        return BFS_OP_WAIT;
    case C_DCREATE:
        if ((rc = dht__rc(&e->o, S_MAIN)) >= 0) {
            atomic_fetch_add(&e->o.priv->n_divert, 1);
            return finish(e, rc, S_MAIN);
        }
        e->rc = rc;
        e->o.op.state = C_DUNDO;
        dht__unlink_wind(&e->o, S_AUX, e->h, &e->loc, true);
        return BFS_OP_WAIT;
    default: /* C_DUNDO */
        return finish(e, e->rc, -1);
    }
}

/* ---- link ---- */

static int link_found(struct dht_entry_op *e)
{
    const struct bfs_link_req *q = e->req;
    dht__info_get(&e->o, S_INFO, &e->info);
    if (e->info.rc < 0)
        return finish(e, e->info.rc, -1);
    if (S_ISDIR(e->info.attr.mode))
        return finish(e, -EPERM, -1);
    e->data = e->info.cached;
    e->gfid = e->info.attr.gfid;
    e->h = dht__hashed(&e->o, &q->newloc.pargfid, q->newloc.name);
    if (e->h == e->data) {
        struct bfs_link_req r = *q;
        r.oldloc = (struct bfs_loc){.gfid = e->gfid};
        e->o.op.state = E_SIMPLE;
        dht__wind(&e->o, S_MAIN, BFS_FOP_LINK, e->data, &r, false);
        return BFS_OP_WAIT;
    }
    e->o.op.state = K_LOCK;
    return BFS_OP_CONTINUE;
}

static int link_steps(struct dht_entry_op *e)
{
    const struct bfs_link_req *q = e->req;
    int rc;
    switch (e->o.op.state) {
    case K_LOCK:
        if ((rc = set_lock(e)) == DHT_WAIT)
            return BFS_OP_WAIT;
        if (rc < 0)
            return finish(e, rc, -1);
        dht__lf_init(&e->lf, &e->loc, &e->gfid, e->h, e->data, S_LF);
        dht__lf_shared(&e->lf, true); /* another name's link file may be there already */
        e->o.op.state = K_LF;
        return BFS_OP_CONTINUE;
    case K_LF:
        if ((rc = dht__lf_step(&e->o, &e->lf)) == DHT_WAIT)
            return BFS_OP_WAIT;
        if (rc < 0)
            return finish(e, rc, -1);
        {
            struct bfs_link_req r = *q;
            r.oldloc = (struct bfs_loc){.gfid = e->gfid};
            e->o.op.state = K_DATA;
            dht__wind(&e->o, S_MAIN, BFS_FOP_LINK, e->data, &r, false);
        }
        return BFS_OP_WAIT;
    case K_DATA:
        if ((rc = dht__rc(&e->o, S_MAIN)) >= 0)
            return finish(e, rc, S_MAIN);
        e->rc = rc;
        e->o.op.state = K_UNDO;
        dht__unlink_wind(&e->o, S_AUX, e->h, &e->loc, true);
        return BFS_OP_WAIT;
    default: /* K_UNDO */
        return finish(e, e->rc, -1);
    }
}

/* ---- unlink ---- */

/* The caller's unlink to s; with locked, the keys that make s's
 * features/locks take the name's entry lock around it and refuse a link
 * file (lib/lk-unlink-wire.h). */
static void unlink_wind(struct dht_entry_op *e, int slot, int s, bool locked)
{
    const struct bfs_unlink_req *q = e->req;
    struct bfs_unlink_req r = *q;
    struct bfs_dict *x = NULL;
    if (locked) {
        x = q->xdata ? bfs_dict_copy(q->xdata) : bfs_dict_new();
        if (x && (bfs_dict_set_str(x, BFS_LK_X_UNLINK_ENTRYLK, DHT_LOCK_DOMAIN) < 0 ||
                  bfs_dict_set_int(x, BFS_LK_X_UNLINK_REFUSE, DHT_LINK_MODE) < 0)) {
            bfs_dict_unref(x);
            x = NULL;
        }
        if (x)
            r.xdata = x;
    }
    dht__wind(&e->o, slot, BFS_FOP_UNLINK, s, &r, false);
    bfs_dict_unref(x);
}

static bool unlink_acked(const struct dht_entry_op *e, int slot)
{
    const struct bfs_unlink_rep *r = DHT_REP(&e->o, slot, bfs_unlink_rep);
    int64_t v = 0;
    return r && r->xdata && bfs_dict_get_int(r->xdata, BFS_LK_X_UNLINK_LOCKED, &v) == 0 &&
           v == 1;
}

/* Can the unlink go to H as one locked request? */
static bool unlink_fast(const struct dht_entry_op *e)
{
    const struct dht_priv *p = e->o.priv;
    return p->single[e->h] && atomic_load(&p->unlink_lk[e->h]);
}

bool dht__single_brick(const struct bfs_xl *x)
{
    for (; x; x = x->nchildren ? x->children[0] : NULL)
        if (x->nchildren > 1 || strncmp(x->type, "cluster/", 8) == 0)
            return false;
    return true;
}

/* The one-request unlink answered. A link file on H (EREMOTE), the name
 * not there (ENOENT: it may live elsewhere) or a stale parent: the long
 * way, which looks again under the lock. */
static int unlink_fast_done(struct dht_entry_op *e)
{
    int rc = dht__rc(&e->o, S_MAIN);
    if (rc == -EREMOTE || rc == -ENOENT || rc == -ESTALE) {
        e->o.op.state = U_LOCK;
        return BFS_OP_CONTINUE;
    }
    if (rc >= 0) {
        const struct bfs_unlink_req *q = e->req;
        if (!unlink_acked(e, S_MAIN)) { /* cannot happen with a brick that acknowledged */
            atomic_store(&e->o.priv->unlink_lk[e->h], false);
            XL_WARN(e->o.priv->xl, "unlink %s: %s did not take the entry lock it was asked "
                    "to; unlinks there take the lock from here again", e->loc.name,
                    e->o.priv->xl->children[e->h]->name);
        }
        dht__cache_drop(e->o.priv, &q->loc.gfid);
        atomic_fetch_add(&e->o.priv->n_unlink_fast, 1);
    }
    return finish(e, rc, rc >= 0 ? S_MAIN : -1);
}

static int unlink_found(struct dht_entry_op *e)
{
    dht__info_get(&e->o, S_INFO, &e->info);
    if (e->info.rc == -ENOENT) { /* perhaps a stale link file on H */
        struct bfs_lookup_req q = {0};
        q.loc.pargfid = e->loc.pargfid;
        q.loc.name = e->loc.name;
        e->o.op.state = U_STALE;
        dht__wind(&e->o, S_AUX, BFS_FOP_LOOKUP, e->h, &q, true);
        return BFS_OP_WAIT;
    }
    if (e->info.rc < 0)
        return finish(e, e->info.rc, -1);
    if (S_ISDIR(e->info.attr.mode))
        return finish(e, -EISDIR, -1);
    e->data = e->info.cached;
    e->link = e->info.link;
    e->o.op.state = U_DATA;
    /* data on H and H a single brick not yet known to lock unlinks: ask it
     * to (our own owner, whose lock it grants at once), to learn whether it
     * can; the next unlinks on H then take the one-request way */
    bool ask = e->data == e->h && e->o.priv->single[e->h] &&
               !atomic_load(&e->o.priv->unlink_lk[e->h]);
    unlink_wind(e, S_MAIN, e->data, ask);
    return BFS_OP_WAIT;
}

static int unlink_steps(struct dht_entry_op *e)
{
    int rc;
    const struct bfs_lookup_rep *r;
    switch (e->o.op.state) {
    case U_LOCK:
        if ((rc = set_lock(e)) == DHT_WAIT)
            return BFS_OP_WAIT;
        if (rc < 0)
            return finish(e, rc, -1);
        e->o.op.state = U_FOUND;
        dht__info_wind(&e->o, S_INFO, &e->loc, true);
        return BFS_OP_WAIT;
    case U_FOUND:
        return unlink_found(e);
    case U_FAST:
        return unlink_fast_done(e);
    case U_DATA:
        if ((rc = dht__rc(&e->o, S_MAIN)) < 0)
            return finish(e, rc, -1);
        if (e->data == e->h && unlink_acked(e, S_MAIN))
            atomic_store(&e->o.priv->unlink_lk[e->h], true);
        dht__cache_drop(e->o.priv, &e->info.attr.gfid);
        if (e->link < 0 || e->link == e->data)
            return finish(e, rc, S_MAIN);
        e->o.op.state = U_LINK;
        dht__unlink_wind(&e->o, S_AUX, e->link, &e->loc, true);
        return BFS_OP_WAIT;
    case U_LINK:
        if ((rc = dht__rc(&e->o, S_AUX)) < 0)
            XL_WARN(e->o.priv->xl, "unlink %s: link file on %s stays (stale): %s", e->loc.name,
                    e->o.priv->xl->children[e->link]->name, strerror(-rc));
        return finish(e, 0, S_MAIN);
    case U_STALE:
        r = DHT_REP(&e->o, S_AUX, bfs_lookup_rep);
        if (dht__rc(&e->o, S_AUX) < 0 || !dht__is_suspicious(&r->attr))
            return finish(e, -ENOENT, -1);
        e->o.op.state = U_STALE_DONE;
        dht__unlink_wind(&e->o, S_AUX, e->h, &e->loc, true);
        return BFS_OP_WAIT;
    default: /* U_STALE_DONE: the name did not exist */
        return finish(e, -ENOENT, -1);
    }
}

/* ---- the step and the entry points ---- */

static int entry_start(struct dht_entry_op *e)
{
    switch (e->fop) {
    case BFS_FOP_CREATE:
        return create_start(e);
    case BFS_FOP_LINK: {
        const struct bfs_link_req *q = e->req;
        bool by_gfid = !bfs_gfid_is_null(&q->oldloc.gfid);
        e->o.op.state = K_FOUND;
        dht__info_wind(&e->o, S_INFO, &q->oldloc, !by_gfid);
        return BFS_OP_WAIT;
    }
    case BFS_FOP_UNLINK:
        if (unlink_fast(e)) {
            e->o.op.state = U_FAST;
            unlink_wind(e, S_MAIN, e->h, true);
            return BFS_OP_WAIT;
        }
        e->o.op.state = U_LOCK;
        return BFS_OP_CONTINUE;
    }
    e->o.op.state = E_SIMPLE; /* mknod, symlink: on H */
    dht__wind(&e->o, S_MAIN, e->fop, e->h, e->req, false);
    return BFS_OP_WAIT;
}

static int entry_step(struct bfs_op *op)
{
    struct dht_entry_op *e = (struct dht_entry_op *)op;
    int s = op->state;
    if (s == E_START)
        return entry_start(e);
    if (s == E_UNLOCK)
        return on_unlock(e);
    if (s == E_SIMPLE)
        return finish(e, dht__rc(&e->o, S_MAIN), S_MAIN);
    if (s == C_CREATED)
        return create_created(e);
    if (s == C_FOUND)
        return create_found(e);
    if (s == C_OPENED)
        return finish(e, dht__rc(&e->o, S_AUX), S_AUX);
    if (s >= C_SLOCK && s <= C_SUNLINK)
        return create_stale(e);
    if (s >= C_DLOCK && s <= C_DUNDO)
        return create_divert(e);
    if (s == K_FOUND)
        return link_found(e);
    if (s >= K_LOCK && s <= K_UNDO)
        return link_steps(e);
    return unlink_steps(e);
}

static int entry_new(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req,
                     const struct bfs_loc *loc)
{
    if (bfs_gfid_is_null(&loc->pargfid) || !loc->name)
        return -EINVAL;
    int rc = bfs_name_check(loc->name);
    if (rc < 0)
        return rc;
    struct dht_entry_op *e = (struct dht_entry_op *)dht__op_new(sizeof(*e), frame, xl, NSLOTS,
                                                                entry_step, entry_cleanup);
    if (!e)
        return -ENOMEM;
    e->fop = fop;
    e->link = -1;
    e->o.lock_slot = S_LOCK;
    e->req = malloc(bfs_fop_info[fop].req_size);
    if (!e->req || bfs_fop_info[fop].req_copy_into(e->req, req) < 0) {
        free(e->req);
        e->req = NULL;
        bfs_op_unref(&e->o.op);
        return -ENOMEM;
    }
    /* the same member of our copy, so that it lives as long as the op */
    e->loc = *(const struct bfs_loc *)((const char *)e->req +
                                      ((const char *)loc - (const char *)req));
    e->h = dht__hashed(&e->o, &e->loc.pargfid, e->loc.name);
    e->data = e->h;
    dht__op_start(&e->o);
    return 0;
}

int dht__create(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_create_req *req)
{
    return entry_new(frame, xl, BFS_FOP_CREATE, req, &req->loc);
}

int dht__mknod(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_mknod_req *req)
{
    return entry_new(frame, xl, BFS_FOP_MKNOD, req, &req->loc);
}

int dht__symlink(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_symlink_req *req)
{
    return entry_new(frame, xl, BFS_FOP_SYMLINK, req, &req->loc);
}

int dht__link(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_link_req *req)
{
    return entry_new(frame, xl, BFS_FOP_LINK, req, &req->newloc);
}

int dht__unlink(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_unlink_req *req)
{
    return entry_new(frame, xl, BFS_FOP_UNLINK, req, &req->loc);
}
