/*
 * replicate-read.c — fops that read one copy: stat, fstat, access,
 * readlink, read, getxattr, fgetxattr, seek, readdir.
 *
 * One generic op serves them all (the fop number and a copy of the request
 * travel in it): make sure the inode context is fresh (else refresh it: a
 * lookup by GFID on every up child, as replicate-lookup.c does), refuse a
 * split-brain with EIO (and anything without quorum with ENOTCONN when
 * cluster.quorum-reads is on), pick a readable child by cluster.read-policy, and
 * on a child fault try the next one — after opening the fd on the copies
 * it is not open on, once, when no copy it is open on is left (a lazy open
 * went to one copy: replicate-fd.c). readdir sticks to the child its first
 * call used (offsets are that brick's); the readdir that only confirms a
 * listing's end is answered empty with end-of-directory when that child
 * is gone (the listing is complete).
 *
 * Lifetime: struct afr_read lives from the fop call to its answer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/graph.h"
#include "replicate.h"

enum { RD_START = 1, RD_REFRESHED, RD_PICK, RD_ANSWERED, RD_FIXED };

struct afr_read {
    struct bfs_op op; /* first */
    struct afr_priv *p;
    int fop;
    void *req;                 /* our copy */
    struct bfs_gfid gfid;      /* null when the call names none */
    struct bfs_inode *inode;   /* ref, may be NULL */
    struct afr_inode *ictx;    /* NULL: no context (read blind from any up copy) */
    struct bfs_fd *fd;         /* fd-based fops: only where it is open */
    int type;                  /* AFR_DATA, ... */
    uint32_t tried;
    int child;
    int last_rc;
    bool refreshed;            /* at most one refresh per read */
    bool refreshed_needed;     /* no candidate with a fresh context: look again */
    bool fixed_open;           /* the fd was opened on the copies it missed (once) */
    uint64_t readdir_offset;
};

static void read_destroy(struct bfs_op *op)
{
    struct afr_read *r = (struct afr_read *)op;
    bfs_fop_info[r->fop].req_clear_dup(r->req);
    free(r->req);
    if (r->inode)
        bfs_inode_unref(r->inode);
    free(r);
}

static int answer(struct afr_read *r, int rc, const void *rep)
{
    bfs_unwind_any(r->fop, r->op.frame, rc, rc >= 0 ? rep : NULL);
    return BFS_OP_DONE;
}

/* The inode context must be refreshed first? */
static int start(struct afr_read *r)
{
    struct afr_priv *p = r->p;
    if (__atomic_load_n(&p->quorum_reads, __ATOMIC_RELAXED) &&
        !bfs_cluster_quorum(&p->cl, afr_up(p)))
        return answer(r, -ENOTCONN, NULL); /* a minority may hold older copies */
    if (!r->ictx || (afr_ictx_fresh(p, r->ictx) && !r->refreshed_needed)) {
        r->op.state = RD_PICK;
        return BFS_OP_CONTINUE;
    }
    uint32_t up = afr_up(p);
    if (!up)
        return answer(r, -ENOTCONN, NULL);
    if (afr_refresh_wind(&r->op, p, &r->gfid, up) < 0)
        return answer(r, -ENOMEM, NULL);
    r->tried = up; /* reused as "asked" until RD_REFRESHED */
    r->refreshed = true;
    r->op.state = RD_REFRESHED;
    return BFS_OP_WAIT;
}

static int after_refresh(struct afr_read *r)
{
    struct afr_priv *p = r->p;
    struct afr_state *s = malloc(sizeof(*s));
    int rc[AFR_MAX];
    struct afr_lookup_out o;
    if (!s)
        return answer(r, -ENOMEM, NULL);
    afr_refresh_gather(p, &r->op, r->tried, s, rc);
    afr_lookup_combine(s, r->tried, rc, __atomic_load_n(&p->fav_policy, __ATOMIC_RELAXED), 0,
                       &o);
    uint32_t mode = o.child >= 0 ? s->attr[o.child].mode : 0;
    free(s);
    bfs_op_reset_replies(&r->op);
    r->tried = 0;
    if (o.rc < 0)
        return answer(r, o.rc, NULL);
    afr_ictx_update(p, r->ictx, mode, &o);
    r->op.state = RD_PICK;
    return BFS_OP_CONTINUE;
}

/* A listing starts on a copy whose file attributes can go up as they are
 * (trust_dirents): a data copy that has never been down, when there is
 * one among the candidates. */
static uint32_t prefer_for_listing(struct afr_priv *p, uint32_t cand)
{
    uint32_t good = cand & ~__atomic_load_n(&p->been_down, __ATOMIC_ACQUIRE);
    if (p->arbiter >= 0)
        good &= ~BFS_BIT(p->arbiter);
    return good ? good : cand;
}

/* The children this read may go to now. */
static uint32_t candidates(struct afr_read *r, int *err)
{
    struct afr_priv *p = r->p;
    uint32_t cand = afr_up(p) & ~r->tried;
    uint32_t type = 0;
    *err = 0;
    if (r->ictx) {
        bool split = false;
        cand &= afr_ictx_readable(r->ictx, r->type, &split, &type);
        if (split) {
            *err = -EIO;
            return 0;
        }
    }
    if (r->fd)
        cand &= afr_fd_opened(p->xl, r->fd);
    if (r->type == AFR_DATA && (type == 0 || type == S_IFREG))
        cand = afr_data_mask(p, cand);
    if (r->fop == BFS_FOP_READDIR) {
        struct afr_fd *f = afr_fdctx(p->xl, r->fd, true);
        int sticky = -1;
        if (f) {
            pthread_mutex_lock(&f->lock);
            sticky = f->listing.child;
            pthread_mutex_unlock(&f->lock);
        }
        if (r->readdir_offset != 0 && sticky >= 0) /* a listing cannot change copy midway */
            cand &= BFS_BIT(sticky);
        else
            cand = prefer_for_listing(p, cand);
    }
    return cand;
}

/* The read must reach the brick (struct afr_fd.prefetch_ok): our copy of
 * the request gets AFR_PREFETCH_SKIP, in an xdata of its own. */
static int skip_prefetch(struct afr_read *r)
{
    struct bfs_read_req *q = r->req;
    if (bfs_dict_has(q->xdata, AFR_PREFETCH_SKIP))
        return 0;
    struct bfs_dict *x = q->xdata ? bfs_dict_copy(q->xdata) : bfs_dict_new();
    if (!x || bfs_dict_set_int(x, AFR_PREFETCH_SKIP, 1) < 0) {
        bfs_dict_unref(x);
        return -ENOMEM;
    }
    bfs_dict_unref(q->xdata);
    q->xdata = x;
    return 0;
}

static void fixed(void *arg)
{
    struct afr_read *r = arg;
    bfs_op_answer(&r->op, 0, BFS_FOP_OPEN, 0);
}

/* No candidate among the copies the fd is open on: open it on the others
 * (afr_fix_open), then pick again. */
static int fix_open(struct afr_read *r)
{
    r->fixed_open = true;
    bfs_op_reset_replies(&r->op);
    bfs_op_expect(&r->op, 1);
    r->op.state = RD_FIXED;
    if (afr_fix_open(r->op.frame, r->p->xl, r->fd, fixed, r) != 1)
        bfs_op_answer(&r->op, 0, BFS_FOP_OPEN, 0);
    return BFS_OP_WAIT;
}

/* A readdir at the offset where its listing already ended (the kernel
 * asks once more to confirm the end)? It needs no copy: the one that
 * served the listing may be gone by now (stopped, replaced). */
static bool at_listing_end(struct afr_read *r)
{
    struct afr_fd *f = r->fop == BFS_FOP_READDIR ? afr_fdctx(r->p->xl, r->fd, false) : NULL;
    return f && bfs_listing_at_end(&f->lock, &f->listing, r->readdir_offset);
}

/* What a listing's reply tells its fd: the copy it sticks to (from its
 * first call) and whether (and where) it ended. */
static void note_listing(struct afr_read *r, const struct bfs_readdir_rep *rep)
{
    struct afr_fd *f = afr_fdctx(r->p->xl, r->fd, true);
    if (f)
        bfs_listing_note(&f->lock, &f->listing, r->child, r->readdir_offset, rep);
}

static int pick(struct afr_read *r)
{
    struct afr_priv *p = r->p;
    int err;
    uint32_t cand = candidates(r, &err);
    if (err)
        return answer(r, err, NULL);
    r->child = afr_pick_read(cand, __atomic_load_n(&p->read_policy, __ATOMIC_RELAXED), &r->gfid,
                             p->load, p->n);
    if (r->child < 0 && at_listing_end(r)) {
        struct bfs_readdir_rep end = {.eod = true};
        return answer(r, 0, &end);
    }
    if (r->child < 0 && r->fd && !r->fixed_open && r->fop != BFS_FOP_READDIR &&
        (afr_up(p) & ~afr_fd_opened(p->xl, r->fd)))
        return fix_open(r);
    /* (a listing too, at its start or midway: a heal may have left its
     * folder with no readable copy since it started; the calls after its
     * first stay on its copy all the same, offsets are per brick) */
    if (r->child < 0 && !r->refreshed && !r->tried && r->ictx) {
        r->refreshed_needed = true; /* what we knew leaves no copy: ask the children */
        r->op.state = RD_START;
        return BFS_OP_CONTINUE;
    }
    if (r->child < 0)
        return answer(r, r->last_rc ? r->last_rc : -ENOTCONN, NULL);
    if (r->fop == BFS_FOP_READ && r->fd &&
        !bfs_mask_has(afr_fd_prefetch_ok(p->xl, r->fd), r->child) &&
        skip_prefetch(r) < 0)
        return answer(r, -ENOMEM, NULL);
    __atomic_add_fetch(&p->load[r->child], 1, __ATOMIC_RELAXED);
    bfs_op_reset_replies(&r->op);
    bfs_op_expect(&r->op, 1);
    r->op.state = RD_ANSWERED;
    bfs_op_wind(&r->op, r->child, r->fop, p->xl->children[r->child], r->req);
    return BFS_OP_WAIT;
}

/* May the attributes child c gave for a regular file in a readdirplus
 * answer go up (to the kernel, which caches them: a size of 0 from a copy
 * not healed yet would hide the file's data)? Yes if the file's context
 * is fresh and says c's data is good; if it knows nothing, yes unless c
 * has been down since we started (a copy that may have missed changes:
 * a restarted or replaced brick whose files are being healed). Never from
 * the arbiter (no data). Stripped entries make the kernel look the name
 * up, which finds a good copy. */
static bool dirent_attr_ok(struct afr_priv *p, int c, const struct bfs_dirent *e)
{
    if (!e->has_attr || !S_ISREG(e->attr.mode))
        return true;
    if ((e->attr.mode & ~(uint32_t)S_IFMT) == S_ISVTX)
        return true; /* distribute's link file: it reads the mode, there are no data */
    if (c == p->arbiter)
        return false;
    struct bfs_xl *xl = p->xl;
    struct bfs_inode *inode = xl->graph && xl->graph->itable
                                  ? bfs_inode_find(xl->graph->itable, &e->attr.gfid) : NULL;
    uint64_t v;
    int known = -1; /* -1: no fresh context */
    if (inode && bfs_inode_ctx_get(inode, xl, &v) == 0 && v) {
        struct afr_inode *ic = (struct afr_inode *)(uintptr_t)v;
        bool split = false;
        if (afr_ictx_fresh(p, ic))
            known = bfs_mask_has(afr_ictx_readable(ic, AFR_DATA, &split, NULL), c) && !split;
    }
    if (inode)
        bfs_inode_unref(inode);
    if (known >= 0)
        return known;
    return !bfs_mask_has(__atomic_load_n(&p->been_down, __ATOMIC_ACQUIRE), c);
}

static void trust_dirents(struct afr_priv *p, int c, struct bfs_readdir_rep *rep)
{
    for (uint32_t k = 0; k < rep->entries.count; k++)
        if (!dirent_attr_ok(p, c, &rep->entries.v[k]))
            rep->entries.v[k].has_attr = false;
}

static int answered(struct afr_read *r)
{
    struct afr_priv *p = r->p;
    const struct bfs_op_reply *rep = &r->op.replies[r->child];
    __atomic_sub_fetch(&p->load[r->child], 1, __ATOMIC_RELAXED);
    int rc = rep->valid ? rep->rc : -EIO;
    if (rc < 0 && afr_child_fault(rc)) {
        r->tried |= BFS_BIT(r->child);
        r->last_rc = rc;
        __atomic_add_fetch(&p->n_read_failover, 1, __ATOMIC_RELAXED);
        r->op.state = RD_PICK;
        return BFS_OP_CONTINUE;
    }
    if (rc >= 0 && r->fop == BFS_FOP_READDIR && rep->rep)
        trust_dirents(p, r->child, (struct bfs_readdir_rep *)rep->rep);
    if (rc >= 0 && r->fop == BFS_FOP_READDIR)
        note_listing(r, rep->rep);
    return answer(r, rc, rep->rep);
}

static int read_step(struct bfs_op *op)
{
    struct afr_read *r = (struct afr_read *)op;
    switch (op->state) {
    case RD_START:
        return start(r);
    case RD_REFRESHED:
        return after_refresh(r);
    case RD_PICK:
        return pick(r);
    case RD_ANSWERED:
        return answered(r);
    case RD_FIXED:
        bfs_op_reset_replies(op);
        op->state = RD_PICK;
        return BFS_OP_CONTINUE;
    }
    return BFS_OP_DONE;
}

/* Starts a read of `type` on the inode named by loc or fd. */
static int read_start(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req,
                      const struct bfs_loc *loc, struct bfs_fd *fd, int type, uint64_t off)
{
    struct afr_priv *p = afr_priv(xl);
    const struct bfs_fop_info *fi = &bfs_fop_info[fop];
    struct afr_read *r = calloc(1, sizeof(*r));
    void *copy = calloc(1, fi->req_size);
    if (!r || !copy || fi->req_copy_into(copy, req) < 0) {
        free(copy);
        free(r);
        return -ENOMEM;
    }
    if (bfs_op_init(&r->op, frame, xl, p->n, read_step, read_destroy) < 0) {
        fi->req_clear_dup(copy);
        free(copy);
        free(r);
        return -ENOMEM;
    }
    r->p = p;
    r->fop = fop;
    r->req = copy;
    r->fd = fd;
    r->type = type;
    r->readdir_offset = off;
    r->inode = fd ? afr_inode_of_fd(xl, fd) : afr_inode_of_loc(xl, loc);
    if (r->inode) {
        r->gfid = r->inode->gfid;
        r->ictx = afr_ictx(xl, r->inode);
    }
    r->op.state = RD_START;
    bfs_op_run(&r->op);
    return 0;
}

int afr_stat(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_stat_req *req)
{
    return read_start(f, xl, BFS_FOP_STAT, req, &req->loc, NULL, AFR_DATA, 0);
}

int afr_fstat(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fstat_req *req)
{
    return read_start(f, xl, BFS_FOP_FSTAT, req, NULL, req->fd, AFR_DATA, 0);
}

int afr_access(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_access_req *req)
{
    return read_start(f, xl, BFS_FOP_ACCESS, req, &req->loc, NULL, AFR_METADATA, 0);
}

int afr_readlink(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_readlink_req *req)
{
    return read_start(f, xl, BFS_FOP_READLINK, req, &req->loc, NULL, AFR_METADATA, 0);
}

int afr_read(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_read_req *req)
{
    return read_start(f, xl, BFS_FOP_READ, req, NULL, req->fd, AFR_DATA, 0);
}

int afr_getxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_getxattr_req *req)
{
    if (afr_vop_getxattr(f, xl, req))
        return 0;
    return read_start(f, xl, BFS_FOP_GETXATTR, req, &req->loc, NULL, AFR_METADATA, 0);
}

int afr_fgetxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_fgetxattr_req *req)
{
    return read_start(f, xl, BFS_FOP_FGETXATTR, req, NULL, req->fd, AFR_METADATA, 0);
}

int afr_seek(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_seek_req *req)
{
    return read_start(f, xl, BFS_FOP_SEEK, req, NULL, req->fd, AFR_DATA, 0);
}

int afr_readdir(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_readdir_req *req)
{
    return read_start(f, xl, BFS_FOP_READDIR, req, NULL, req->fd, AFR_ENTRY, req->offset);
}
