/*
 * dht-readdir.c — opendir, readdir and readdirplus across subvolumes
 * (docs/design/distribute.md, "Readdir").
 *
 * opendir opens the directory on every subvolume with the caller's fd
 * (each subvolume keeps its own context on it) and records, in our fd
 * context (struct dht_dirfd, freed by releasedir), where it is open and
 * which subvolume lists directories (the lowest one open).
 *
 * readdir walks the subvolumes in index order. The offset names the
 * subvolume and its own cookie (dht_doff_encode). Each call asks one
 * subvolume for readdirplus, keeps files, keeps directories only from the
 * lister, drops link files (a suspicious entry on its hashed subvolume is
 * confirmed with a getxattr, one parallel batch per call), rewrites d_off
 * and d_ino, and moves to the next subvolume by itself when a reply had
 * nothing left to show.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dht.h"

#define MAX_CAND 128 /* suspicious entries confirmed per call */

/* ---- fd context ---- */

struct dht_dirfd *dht__dirfd(struct bfs_xl *xl, struct bfs_fd *fd)
{
    uint64_t v;
    if (!fd || bfs_fd_ctx_get(fd, xl, &v) < 0 || !v)
        return NULL;
    return (struct dht_dirfd *)(uintptr_t)v;
}

void dht__releasedir(struct bfs_xl *xl, struct bfs_fd *fd)
{
    uint64_t v = 0;
    if (bfs_fd_ctx_del(fd, xl, &v) == 0)
        free((void *)(uintptr_t)v);
}

static int next_open(const struct dht_dirfd *df, int from)
{
    for (int s = from; s < df->n; s++)
        if (df->open[s])
            return s;
    return -1;
}

/* ---- opendir ---- */

struct dht_opendir_op {
    struct dht_op o;
    struct bfs_opendir_req *req;
    int n;
};

static void opendir_cleanup(struct dht_op *o)
{
    bfs_opendir_req_free(((struct dht_opendir_op *)o)->req);
}

static int opendir_step(struct bfs_op *op)
{
    struct dht_opendir_op *d = (struct dht_opendir_op *)op;
    if (op->state == 0) {
        op->state = 1;
        for (int s = 0; s < d->n; s++)
            dht__wind(&d->o, s, BFS_FOP_OPENDIR, s, d->req, false);
        return BFS_OP_WAIT;
    }
    int first = -1, err = 0;
    for (int s = 0; s < d->n; s++) {
        int rc = dht__rc(&d->o, s);
        if (rc >= 0 && first < 0)
            first = s;
        if (rc < 0 && rc != -ENOTCONN && !err)
            err = rc;
    }
    if (first < 0) {
        bfs_unwind_opendir(d->o.caller, err ? err : dht__rc(&d->o, 0), NULL);
        return BFS_OP_DONE;
    }
    struct dht_dirfd *df = calloc(1, sizeof(*df) + (size_t)d->n);
    if (!df) {
        bfs_unwind_opendir(d->o.caller, -ENOMEM, NULL);
        return BFS_OP_DONE;
    }
    df->gfid = d->req->loc.gfid;
    df->n = d->n;
    df->lister = first;
    for (int s = 0; s < d->n; s++)
        df->open[s] = dht__rc(&d->o, s) >= 0;
    if (bfs_fd_ctx_set(d->req->fd, d->o.priv->xl, (uintptr_t)df) < 0) {
        free(df);
        bfs_unwind_opendir(d->o.caller, -ENOMEM, NULL);
        return BFS_OP_DONE;
    }
    bfs_unwind_opendir(d->o.caller, 0, DHT_REP(&d->o, first, bfs_opendir_rep));
    return BFS_OP_DONE;
}

int dht__opendir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_opendir_req *req)
{
    struct dht_priv *priv = xl->private;
    if (!req->fd || bfs_gfid_is_null(&req->loc.gfid))
        return -EINVAL;
    if (dht__dirfd(xl, req->fd))
        return -EBUSY; /* opened twice */
    struct dht_opendir_op *d = (struct dht_opendir_op *)dht__op_new(
        sizeof(*d), frame, xl, priv->n, opendir_step, opendir_cleanup);
    if (!d)
        return -ENOMEM;
    d->n = priv->n;
    if (!(d->req = bfs_opendir_req_dup(req))) {
        bfs_op_unref(&d->o.op);
        return -ENOMEM;
    }
    dht__op_start(&d->o);
    return 0;
}

/* ---- readdir ---- */

enum { RD_READ, RD_GOT, RD_BUILD };

struct dht_readdir_op {
    struct dht_op o;
    struct bfs_readdir_req *req;
    struct dht_dirfd *df;
    int s;                  /* subvolume being read */
    uint64_t cookie;        /* its own offset */
    struct bfs_dirents out;
    uint32_t upto;          /* entries of the child reply handled this round */
    int cand[MAX_CAND];     /* indices of suspicious entries, slots 1.. */
    int ncand;
};

static void readdir_cleanup(struct dht_op *o)
{
    struct dht_readdir_op *r = (struct dht_readdir_op *)o;
    bfs_readdir_req_free(r->req);
    bfs_dirents_free(&r->out);
}

static int answer(struct dht_readdir_op *r, int rc, bool eod)
{
    struct bfs_readdir_rep rep = {.entries = r->out, .eod = eod};
    bfs_unwind_readdir(r->o.caller, rc < 0 ? rc : (int)r->out.count, rc < 0 ? NULL : &rep);
    return BFS_OP_DONE;
}

static int read_from(struct dht_readdir_op *r, int s, uint64_t cookie)
{
    if (s < 0)
        return answer(r, 0, true);
    r->s = s;
    r->cookie = cookie;
    struct bfs_readdir_req q = *r->req;
    q.offset = cookie;
    q.plus = true; /* link files are recognised by their attributes */
    r->o.op.state = RD_GOT;
    dht__wind(&r->o, 0, BFS_FOP_READDIR, s, &q, false);
    return BFS_OP_WAIT;
}

static bool may_be_link(struct dht_readdir_op *r, const struct bfs_dirent *e)
{
    if (!e->has_attr || !dht__is_suspicious(&e->attr))
        return false;
    return dht__hashed(&r->o, &r->df->gfid, e->name) == r->s ||
           dht__prev_hashed(&r->o, &r->df->gfid, e->name) == r->s;
}

/* Which entries of the child's reply to look at this round, and which of
 * them need their linkto confirmed (wound now). */
static int on_got(struct dht_readdir_op *r)
{
    int rc = dht__rc(&r->o, 0);
    const struct bfs_readdir_rep *c = DHT_REP(&r->o, 0, bfs_readdir_rep);
    if (rc < 0) {
        if (rc == -ENOTCONN && r->out.count == 0) { /* skip it: its files are unavailable */
            XL_WARN(r->o.priv->xl, "readdir: subvolume %s is down; listing the others",
                    r->o.priv->xl->children[r->s]->name);
            return read_from(r, next_open(r->df, r->s + 1), 0);
        }
        return answer(r, rc, false);
    }
    r->ncand = 0;
    r->upto = c->entries.count;
    for (uint32_t i = 0; i < c->entries.count; i++) {
        if (!may_be_link(r, &c->entries.v[i]))
            continue;
        if (r->ncand == MAX_CAND) {
            r->upto = i; /* the rest next round */
            break;
        }
        struct bfs_loc loc = {.pargfid = r->df->gfid, .name = c->entries.v[i].name};
        r->cand[r->ncand] = (int)i;
        dht__linkto_wind(&r->o, 1 + r->ncand, r->s, &loc);
        r->ncand++;
    }
    r->o.op.state = RD_BUILD;
    return r->ncand ? BFS_OP_WAIT : BFS_OP_CONTINUE;
}

static bool confirmed_link(struct dht_readdir_op *r, uint32_t i)
{
    for (int k = 0; k < r->ncand; k++)
        if (r->cand[k] == (int)i)
            return dht__linkto_read(&r->o, 1 + k) >= 0 ||
                   dht__rc(&r->o, 1 + k) == -ENOTCONN;
    return false;
}

static int add(struct dht_readdir_op *r, const struct bfs_dirent *e)
{
    const struct bfs_iatt *attr = r->req->plus && e->has_attr ? &e->attr : NULL;
    uint64_t ino = e->has_attr ? bfs_gfid_to_ino(&e->attr.gfid) : e->d_ino;
    /* A plain file listed here has its data here: remember it, so that the
     * fops a listing brings (ls -l: getxattr, stat once the kernel's
     * attributes expire) need no resolving lookup first. Link-file shapes
     * (also a source the rebalance froze) are left to lookup. The cache is
     * a hint: a fop that finds the file gone resolves again. */
    if (e->has_attr && !S_ISDIR(e->attr.mode) && !dht__is_suspicious(&e->attr))
        dht__cache_put(r->o.priv, &e->attr.gfid, DHT_KIND_FILE, r->s);
    return bfs_dirents_add(&r->out, e->name, dht_doff_encode(r->s, e->d_off), e->d_type, ino,
                           attr);
}

static int on_build(struct dht_readdir_op *r)
{
    const struct bfs_readdir_rep *c = DHT_REP(&r->o, 0, bfs_readdir_rep);
    bool lister = r->s == r->df->lister;
    uint64_t last = r->cookie;
    for (uint32_t i = 0; i < r->upto; i++) {
        const struct bfs_dirent *e = &c->entries.v[i];
        last = e->d_off;
        bool dir = e->has_attr ? S_ISDIR(e->attr.mode) : e->d_type == DT_DIR;
        if ((dir && !lister) || confirmed_link(r, i))
            continue;
        if (add(r, e) < 0)
            return answer(r, -ENOMEM, false);
    }
    bool child_eod = c->eod && r->upto == c->entries.count;
    if (!child_eod) {
        if (r->out.count)
            return answer(r, 0, false);
        return read_from(r, r->s, last); /* everything was hidden: go on */
    }
    int next = next_open(r->df, r->s + 1);
    if (!r->out.count)
        return read_from(r, next, 0);
    if (next >= 0) /* the caller continues at the next subvolume's start */
        r->out.v[r->out.count - 1].d_off = dht_doff_encode(next, 0);
    return answer(r, 0, next < 0);
}

static int readdir_step(struct bfs_op *op)
{
    struct dht_readdir_op *r = (struct dht_readdir_op *)op;
    switch (op->state) {
    case RD_READ: {
        int s;
        uint64_t cookie;
        dht_doff_decode(r->req->offset, &s, &cookie);
        if (s >= r->df->n)
            return answer(r, 0, true);
        if (!r->df->open[s]) /* not open in this listing: from the next one's start */
            return read_from(r, next_open(r->df, s), 0);
        return read_from(r, s, cookie);
    }
    case RD_GOT:
        return on_got(r);
    default:
        return on_build(r);
    }
}

int dht__readdir(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_readdir_req *req)
{
    struct dht_dirfd *df = dht__dirfd(xl, req->fd);
    if (!df)
        return -EBADFD;
    struct dht_readdir_op *r = (struct dht_readdir_op *)dht__op_new(
        sizeof(*r), frame, xl, 1 + MAX_CAND, readdir_step, readdir_cleanup);
    if (!r)
        return -ENOMEM;
    r->df = df;
    if (!(r->req = bfs_readdir_req_dup(req))) {
        bfs_op_unref(&r->o.op);
        return -ENOMEM;
    }
    dht__op_start(&r->o);
    return 0;
}
