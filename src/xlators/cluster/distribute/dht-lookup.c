/*
 * dht-lookup.c — lookup: the hashed subvolume first; link files followed;
 * directories looked up (and healed) on every subvolume; nameless lookups
 * by GFID through the location cache or a fan-out. The algorithm, step by
 * step, is in docs/design/distribute.md ("Lookup").
 *
 * One struct dht_lookup_op per call, freed by the fan-out driver after the
 * answer. Reply slots: [0, n) one per subvolume (lookups), n the linkto
 * getxattr, [n+1, 3n+2) the heal and version sub-procedures, then two for
 * entry locks.
 *
 * Internal callers (rename, unlink, link, the inode router) wind a lookup
 * into this translator itself with DHT_INFO_KEY in xdata and read where the
 * data and the link file are from the reply's xdata (dht__info_get).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dht.h"

enum {
    L_START,
    L_HASHED,     /* the hashed subvolume answered */
    L_LINKTO,     /* the linkto of a suspicious entry */
    L_TARGET,     /* the link's target answered */
    L_GFID_SEARCH,/* a link file without linkto: who has its GFID? */
    L_SEARCH,     /* a miss (or a down hashed subvolume): asked elsewhere */
    L_DIRS,       /* a directory: every subvolume answered */
    L_HEAL,
    L_ALL,        /* nameless: every subvolume answered */
    L_ONE,        /* nameless: the cached subvolume answered */
    L_VERSION,    /* root: layout-version on the bricks */
};

struct dht_lookup_op {
    struct dht_op o;
    struct bfs_lookup_req *req; /* our copy */
    bool named, info;
    int n;
    int h;                      /* hashed subvolume (named) */
    bool h_down;
    int link;                   /* subvolume holding a link file, -1 */
    int target;
    uint8_t *asked;             /* [n] */
    int mds;                    /* directory: hashed subvolume of its name, -1 */
    struct dht_heal heal;
    int vphase;
};

#define SLOT_X(l) ((l)->n)
#define SLOT_HEAL(l) ((l)->n + 1)

static void lookup_cleanup(struct dht_op *o)
{
    struct dht_lookup_op *l = (struct dht_lookup_op *)o;
    bfs_lookup_req_free(l->req);
    free(l->asked);
    dht__heal_free(&l->heal);
}

/* ---- internal lookups (used by other families) ---- */

void dht__info_req(struct bfs_lookup_req *req, const struct bfs_loc *loc, bool named)
{
    memset(req, 0, sizeof(*req));
    if (named) {
        req->loc.pargfid = loc->pargfid;
        req->loc.name = loc->name;
        req->loc.parent = loc->parent;
    } else {
        req->loc.gfid = loc->gfid;
        req->loc.inode = loc->inode;
    }
    req->xdata = bfs_dict_new();
    if (req->xdata)
        bfs_dict_set_int(req->xdata, DHT_INFO_KEY, 1);
}

void dht__info_get(const struct dht_op *o, int slot, struct dht_info *out)
{
    const struct bfs_lookup_rep *r = DHT_REP(o, slot, bfs_lookup_rep);
    int64_t v;
    memset(out, 0, sizeof(*out));
    out->rc = dht__rc(o, slot);
    out->cached = out->link = -1;
    if (!r)
        return;
    out->attr = r->attr;
    out->parent = r->parent;
    if (bfs_dict_get_int(r->xdata, DHT_INFO_CACHED, &v) == 0)
        out->cached = (int)v;
    if (bfs_dict_get_int(r->xdata, DHT_INFO_LINK, &v) == 0)
        out->link = (int)v;
    if (bfs_dict_get_int(r->xdata, DHT_INFO_DOWN, &v) == 0)
        out->down = (int)v;
}

/* ---- winding ---- */

static void wind_named(struct dht_lookup_op *l, int s)
{
    struct bfs_lookup_req r = *l->req;
    memset(&r.loc.gfid, 0, sizeof(r.loc.gfid)); /* bricks resolve the name */
    r.loc.inode = NULL;
    l->asked[s] = 1;
    dht__wind(&l->o, s, BFS_FOP_LOOKUP, s, &r, false);
}

static void wind_gfid(struct dht_lookup_op *l, int s, const struct bfs_gfid *g)
{
    struct bfs_lookup_req r = {.xdata = l->req->xdata};
    r.loc.gfid = *g;
    l->asked[s] = 1;
    dht__wind(&l->o, s, BFS_FOP_LOOKUP, s, &r, false);
}

/* Every subvolume not asked yet; false when there were none. */
static bool wind_rest(struct dht_lookup_op *l, bool named, const struct bfs_gfid *g)
{
    bool any = false;
    for (int s = 0; s < l->n; s++) {
        if (l->asked[s])
            continue;
        any = true;
        if (named)
            wind_named(l, s);
        else
            wind_gfid(l, s, g);
    }
    return any;
}

static const struct bfs_lookup_rep *rep_at(struct dht_lookup_op *l, int s)
{
    return dht__rc(&l->o, s) >= 0 ? DHT_REP(&l->o, s, bfs_lookup_rep) : NULL;
}

/* ---- answering ---- */

static int answer(struct dht_lookup_op *l, int rc, int slot, int cached)
{
    struct dht_priv *priv = l->o.priv;
    const struct bfs_lookup_rep *r = slot >= 0 ? rep_at(l, slot) : NULL;
    struct bfs_lookup_rep rep = {0};
    int down = 0;
    for (int s = 0; s < l->n; s++)
        down += l->asked[s] && dht__rc(&l->o, s) == -ENOTCONN;
    if (rc >= 0 && r) {
        rep = *r;
        rep.xdata = NULL;
        bool dir = S_ISDIR(r->attr.mode);
        if (dir && l->heal.phase >= 0)
            rep.attr = l->heal.auth; /* merged (and healed) attributes */
        if (dir)
            dht__cache_put(priv, &rep.attr.gfid, DHT_KIND_DIR, l->mds);
        else
            dht__cache_put(priv, &rep.attr.gfid, DHT_KIND_FILE, cached);
        if (l->link >= 0 && !dir)
            atomic_fetch_add(&priv->n_linkfollow, 1);
    }
    struct bfs_dict *xd = r && r->xdata ? bfs_dict_copy(r->xdata) : NULL;
    if (l->info) {
        if (!xd)
            xd = bfs_dict_new();
        if (xd) {
            bfs_dict_set_int(xd, DHT_INFO_CACHED, rc >= 0 ? cached : -1);
            bfs_dict_set_int(xd, DHT_INFO_LINK, rc >= 0 ? l->link : -1);
            bfs_dict_set_int(xd, DHT_INFO_DOWN, down);
        }
    }
    rep.xdata = xd;
    bfs_unwind_lookup(l->o.caller, rc < 0 ? rc : 0, &rep);
    bfs_dict_unref(xd);
    return BFS_OP_DONE;
}

/* A directory: merge every answer with its GFID into heal.auth, note who
 * lacks it or differs from the authority, heal or answer. */
static int dirs_done(struct dht_lookup_op *l, int auth)
{
    struct dht_heal *h = &l->heal;
    const struct bfs_lookup_rep *a = rep_at(l, auth);
    h->auth_s = auth;
    h->auth = a->attr;
    h->gfid = a->attr.gfid;
    for (int s = 0; s < l->n; s++) {
        const struct bfs_lookup_rep *r = rep_at(l, s);
        if (r && S_ISDIR(r->attr.mode) && bfs_gfid_eq(&r->attr.gfid, &h->gfid))
            dht__iatt_merge_dir(&h->auth, &r->attr);
        else if (r)
            XL_ERR(l->o.priv->xl, "directory %s: subvolume %s has another object (gfid "
                   "or type) under that name; left alone", l->req->loc.name ? l->req->loc.name
                   : "(root)", l->o.priv->xl->children[s]->name);
    }
    h->phase = 0;
    bool root = bfs_gfid_is_root(&h->gfid);
    /* Internal lookups never heal: their callers may hold this name's entry
     * lock, which the heal would wait for (a different lock owner). */
    if (!l->info && ((l->named && !l->h_down) || root)) {
        h->loc = l->req->loc;
        h->lock_s = l->named ? l->h : -1;
        if (dht__heal_needed(&l->o, h, 0)) {
            l->o.op.state = L_HEAL;
            return BFS_OP_CONTINUE;
        }
    }
    if (root && !atomic_load(&l->o.priv->version_checked)) {
        l->o.op.state = L_VERSION;
        return BFS_OP_CONTINUE;
    }
    return answer(l, 0, auth, -1);
}

/* ---- named lookup ---- */

static int on_hashed(struct dht_lookup_op *l)
{
    struct dht_priv *priv = l->o.priv;
    int rc = dht__rc(&l->o, l->h);
    const struct bfs_lookup_rep *r = rep_at(l, l->h);
    if (r && S_ISDIR(r->attr.mode)) {
        l->o.op.state = L_DIRS;
        return wind_rest(l, true, NULL) ? BFS_OP_WAIT : BFS_OP_CONTINUE;
    }
    if (r && dht__is_suspicious(&r->attr)) {
        l->link = l->h;
        l->o.op.state = L_LINKTO;
        dht__linkto_wind(&l->o, SLOT_X(l), l->h, &l->req->loc);
        return BFS_OP_WAIT;
    }
    if (r)
        return answer(l, 0, l->h, l->h);
    if (rc == -ENOTCONN) {
        l->h_down = true;
    } else if (rc == -ENOENT) {
        int p = dht__prev_hashed(&l->o, &l->req->loc.pargfid, l->req->loc.name);
        if (!priv->lookup_unhashed && !atomic_load(&priv->stale_layout)) {
            if (p < 0 || p == l->h)
                return answer(l, rc, -1, -1);
            l->o.op.state = L_SEARCH;
            wind_named(l, p);
            return BFS_OP_WAIT;
        }
    } else {
        return answer(l, rc, -1, -1);
    }
    l->o.op.state = L_SEARCH;
    return wind_rest(l, true, NULL) ? BFS_OP_WAIT : BFS_OP_CONTINUE;
}

/* The hashed subvolume missed (or is down): what did the others say? */
static int on_search(struct dht_lookup_op *l)
{
    int susp = -1;
    for (int s = 0; s < l->n; s++) {
        const struct bfs_lookup_rep *r = s == l->h ? NULL : rep_at(l, s);
        if (!r)
            continue;
        if (S_ISDIR(r->attr.mode)) {
            l->o.op.state = L_DIRS; /* a directory: ask every subvolume */
            return wind_rest(l, true, NULL) ? BFS_OP_WAIT : BFS_OP_CONTINUE;
        }
        if (!dht__is_suspicious(&r->attr))
            return answer(l, 0, s, s);
        if (susp < 0)
            susp = s;
    }
    if (susp >= 0) { /* an old link file (previous layout) */
        l->link = susp;
        l->o.op.state = L_LINKTO;
        dht__linkto_wind(&l->o, SLOT_X(l), susp, &l->req->loc);
        return BFS_OP_WAIT;
    }
    return answer(l, l->h_down ? -ENOTCONN : -ENOENT, -1, -1);
}

static int on_linkto(struct dht_lookup_op *l)
{
    int t = dht__linkto_read(&l->o, SLOT_X(l));
    if (t >= 0 && t != l->link) {
        l->target = t;
        l->o.op.state = L_TARGET;
        wind_named(l, t);
        return BFS_OP_WAIT;
    }
    /* no linkto: a link file under construction, a crash's leftover, or a
     * user's own empty ---------T file. Whoever has its GFID decides. */
    struct bfs_gfid g = rep_at(l, l->link)->attr.gfid;
    memset(l->asked, 0, (size_t)l->n);
    l->asked[l->link] = 1;
    l->o.op.state = L_GFID_SEARCH;
    return wind_rest(l, false, &g) ? BFS_OP_WAIT : BFS_OP_CONTINUE;
}

static int on_target(struct dht_lookup_op *l)
{
    const struct bfs_lookup_rep *r = rep_at(l, l->target);
    if (r && !S_ISDIR(r->attr.mode) && !dht__is_suspicious(&r->attr))
        return answer(l, 0, l->target, l->target);
    int rc = dht__rc(&l->o, l->target);
    if (rc == -ENOTCONN)
        return answer(l, rc, -1, -1);
    atomic_fetch_add(&l->o.priv->n_stale, 1);
    return answer(l, -ENOENT, -1, -1); /* a stale link file */
}

static int on_gfid_search(struct dht_lookup_op *l)
{
    for (int s = 0; s < l->n; s++) {
        const struct bfs_lookup_rep *r = s == l->link ? NULL : rep_at(l, s);
        if (r && !S_ISDIR(r->attr.mode) && !dht__is_suspicious(&r->attr))
            return answer(l, 0, s, s);
    }
    int s = l->link;
    l->link = -1; /* nobody else has it: a genuine file */
    return answer(l, 0, s, s);
}

static int on_dirs(struct dht_lookup_op *l)
{
    int auth = -1;
    const struct bfs_lookup_rep *hr = l->named ? rep_at(l, l->h) : NULL;
    if (hr && S_ISDIR(hr->attr.mode)) {
        auth = l->h;
    } else {
        for (int s = 0; s < l->n && auth < 0; s++) {
            const struct bfs_lookup_rep *r = rep_at(l, s);
            if (r && S_ISDIR(r->attr.mode))
                auth = s;
        }
    }
    if (auth < 0)
        return answer(l, l->h_down ? -ENOTCONN : -ENOENT, -1, -1);
    l->mds = l->named ? l->h : -1;
    return dirs_done(l, auth);
}

/* ---- nameless lookup ---- */

static int on_all(struct dht_lookup_op *l)
{
    const struct bfs_gfid *g = &l->req->loc.gfid;
    int dir = -1, file = -1, susp = -1, mds = -1;
    (void)dht__cache_get(l->o.priv, g, &mds);
    for (int s = 0; s < l->n; s++) {
        const struct bfs_lookup_rep *r = rep_at(l, s);
        if (!r)
            continue;
        if (S_ISDIR(r->attr.mode)) {
            if (dir < 0 || s == mds) /* the name's hashed subvolume, else the lowest */
                dir = s;
        } else if (!dht__is_suspicious(&r->attr)) {
            file = file < 0 ? s : file;
        } else {
            susp = susp < 0 ? s : susp;
        }
    }
    if (dir >= 0) {
        l->mds = mds >= 0 && mds < l->n ? mds : -1;
        return dirs_done(l, dir);
    }
    if (file >= 0 || susp >= 0)
        return answer(l, 0, file >= 0 ? file : susp, file >= 0 ? file : susp);
    int rc = -ENOENT;
    for (int s = 0; s < l->n; s++) {
        int r = dht__rc(&l->o, s);
        if (r == -ENOTCONN)
            rc = -ENOTCONN; /* it may be on the one that is down */
        else if (r < 0 && r != -ENOENT && r != -ESTALE && rc == -ENOENT)
            rc = r;
    }
    return answer(l, rc, -1, -1);
}

static int on_one(struct dht_lookup_op *l, int s)
{
    const struct bfs_lookup_rep *r = rep_at(l, s);
    if (r && !S_ISDIR(r->attr.mode) && !dht__is_suspicious(&r->attr))
        return answer(l, 0, s, s);
    int rc = dht__rc(&l->o, s);
    if (rc == -ENOTCONN || (rc < 0 && rc != -ENOENT && rc != -ESTALE))
        return answer(l, rc, -1, -1);
    dht__cache_drop(l->o.priv, &l->req->loc.gfid); /* moved or gone: ask everyone */
    l->o.op.state = L_ALL;
    return wind_rest(l, false, &l->req->loc.gfid) ? BFS_OP_WAIT : BFS_OP_CONTINUE;
}

static int start(struct dht_lookup_op *l)
{
    const struct bfs_loc *loc = &l->req->loc;
    if (l->named) {
        l->h = dht__hashed(&l->o, &loc->pargfid, loc->name);
        l->o.op.state = L_HASHED;
        wind_named(l, l->h);
        return BFS_OP_WAIT;
    }
    int s = -1;
    int kind = dht__cache_get(l->o.priv, &loc->gfid, &s);
    bool dir = bfs_gfid_is_root(&loc->gfid) || kind == DHT_KIND_DIR ||
               (loc->inode && S_ISDIR(loc->inode->type));
    if (!dir && kind == DHT_KIND_FILE && s >= 0 && s < l->n) {
        l->target = s;
        l->o.op.state = L_ONE;
        wind_gfid(l, s, &loc->gfid);
        return BFS_OP_WAIT;
    }
    l->o.op.state = L_ALL;
    wind_rest(l, false, &loc->gfid);
    return BFS_OP_WAIT;
}

static int lookup_step(struct bfs_op *op)
{
    struct dht_lookup_op *l = (struct dht_lookup_op *)op;
    int rc;
    switch (op->state) {
    case L_START: return start(l);
    case L_HASHED: return on_hashed(l);
    case L_SEARCH: return on_search(l);
    case L_LINKTO: return on_linkto(l);
    case L_TARGET: return on_target(l);
    case L_GFID_SEARCH: return on_gfid_search(l);
    case L_DIRS: return on_dirs(l);
    case L_ALL: return on_all(l);
    case L_ONE: return on_one(l, l->target);
    case L_HEAL:
        rc = dht__heal_step(&l->o, &l->heal);
        if (rc == DHT_WAIT)
            return BFS_OP_WAIT;
        if (rc < 0)
            return answer(l, rc, -1, -1);
        atomic_fetch_add(&l->o.priv->n_heal, 1);
        if (bfs_gfid_is_root(&l->heal.gfid) && !atomic_load(&l->o.priv->version_checked)) {
            op->state = L_VERSION;
            return BFS_OP_CONTINUE;
        }
        return answer(l, 0, l->heal.auth_s, -1);
    case L_VERSION:
        rc = dht__version_step(&l->o, &l->vphase, SLOT_HEAL(l));
        if (rc == DHT_WAIT)
            return BFS_OP_WAIT;
        return answer(l, 0, l->heal.auth_s, -1);
    }
    return answer(l, -EIO, -1, -1);
}

int dht__lookup(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_lookup_req *req)
{
    struct dht_priv *priv = xl->private;
    int n = priv->n;
    bool named = req->loc.name && !bfs_gfid_is_null(&req->loc.pargfid);
    if (!named && bfs_gfid_is_null(&req->loc.gfid))
        return -EINVAL;
    if (named && bfs_name_check(req->loc.name) < 0)
        return bfs_name_check(req->loc.name);
    struct dht_lookup_op *l = (struct dht_lookup_op *)dht__op_new(
        sizeof(*l), frame, xl, 3 * n + 4, lookup_step, lookup_cleanup);
    if (!l)
        return -ENOMEM;
    l->n = n;
    l->named = named;
    l->link = l->target = l->mds = -1;
    l->heal.phase = -1;
    l->o.lock_slot = 3 * n + 2;
    int64_t v;
    l->info = bfs_dict_get_int(req->xdata, DHT_INFO_KEY, &v) == 0 && v == 1;
    l->req = bfs_lookup_req_dup(req);
    l->asked = calloc((size_t)n, 1);
    if (!l->req || !l->asked) {
        bfs_op_unref(&l->o.op);
        return -ENOMEM;
    }
    if (l->info) { /* not for the bricks; the request's dict is shared, so copy */
        struct bfs_dict *xd = bfs_dict_copy(l->req->xdata);
        bfs_dict_unref(l->req->xdata);
        l->req->xdata = xd;
        bfs_dict_del(xd, DHT_INFO_KEY);
        if (bfs_dict_count(xd) == 0) {
            bfs_dict_unref(xd);
            l->req->xdata = NULL;
        }
    }
    l->heal.slot0 = SLOT_HEAL(l);
    dht__op_start(&l->o);
    return 0;
}
