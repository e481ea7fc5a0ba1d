/*
 * replicate-inode.c — what replicate remembers per inode and per fd.
 *
 * Inode context (struct afr_inode): which children hold a good copy of the
 * data, the metadata and the entries (readable masks, from the last lookup
 * or refresh, narrowed by failed changes, widened by heals), split-brain
 * flags, the shared data lock object of eager locking and, for a
 * directory, its entry window's lock (replicate-entry.c). It is made on
 * first use under priv->lock and freed by forget; a lock object that is
 * not FREE holds a reference on the inode, so it is never freed under a
 * transaction. The masks are only trusted while ctx->gen equals priv->gen
 * (every child up/down event bumps it): after that, reads refresh first.
 * A lookup fills the context before the mount holds the inode; the last
 * AFR_RECENT looked-up inodes are kept ref'd (afr_recent_keep) so that
 * what it learnt is still there for the open and reads that follow.
 * A fresh context is saved by GFID when its inode is forgotten, and a new
 * context of that GFID starts from it (replicate-memory.c).
 *
 * fd context (struct afr_fd): the children the fd is open on (a child that
 * was down at open time is skipped, and blamed, for its writes), and the
 * child a directory listing stays on (offsets are per brick).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/graph.h"
#include "replicate.h"

int afr_ctx_init(struct afr_priv *p)
{
    (void)p;
    return 0;
}

struct bfs_inode *afr_inode_of_gfid(struct bfs_xl *xl, const struct bfs_gfid *g, uint32_t type)
{
    if (!g || bfs_gfid_is_null(g) || !xl->graph || !xl->graph->itable)
        return NULL;
    return bfs_inode_get(xl->graph->itable, g, type);
}

struct bfs_inode *afr_inode_of_loc(struct bfs_xl *xl, const struct bfs_loc *loc)
{
    if (loc->inode && !bfs_gfid_is_null(&loc->inode->gfid))
        return bfs_inode_ref(loc->inode);
    return afr_inode_of_gfid(xl, &loc->gfid, 0);
}

struct bfs_inode *afr_inode_of_fd(struct bfs_xl *xl, struct bfs_fd *fd)
{
    if (fd && fd->inode)
        return bfs_inode_ref(fd->inode);
    struct afr_fd *f = afr_fdctx(xl, fd, false);
    if (!f)
        return NULL;
    pthread_mutex_lock(&f->lock);
    struct bfs_gfid g = f->gfid;
    pthread_mutex_unlock(&f->lock);
    return afr_inode_of_gfid(xl, &g, 0);
}

struct afr_inode *afr_ictx(struct bfs_xl *xl, struct bfs_inode *inode)
{
    struct afr_priv *p = afr_priv(xl);
    uint64_t v;
    if (!inode)
        return NULL;
    if (bfs_inode_ctx_get(inode, xl, &v) == 0)
        return (struct afr_inode *)(uintptr_t)v;
    pthread_mutex_lock(&p->lock);
    struct afr_inode *c = NULL;
    if (bfs_inode_ctx_get(inode, xl, &v) == 0) {
        c = (struct afr_inode *)(uintptr_t)v;
    } else if ((c = calloc(1, sizeof(*c)))) {
        pthread_mutex_init(&c->lock, NULL);
        c->type = inode->type;
        bfs_txn_lock_init(&c->dlock, &p->cl, BFS_TXN_DATA, true);
        bfs_txn_lock_init(&c->elock, &p->cl, BFS_TXN_ENTRY, true);
        if (bfs_inode_ctx_set(inode, xl, (uintptr_t)c) < 0) {
            bfs_txn_lock_fini(&c->elock);
            bfs_txn_lock_fini(&c->dlock);
            pthread_mutex_destroy(&c->lock);
            free(c);
            c = NULL;
        } else {
            (void)afr_mem_seed(p, &inode->gfid, c); /* what a forgotten inode knew */
        }
    }
    pthread_mutex_unlock(&p->lock);
    return c;
}

bool afr_ictx_fresh(const struct afr_priv *p, struct afr_inode *c)
{
    uint64_t gen = __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE);
    pthread_mutex_lock(&c->lock);
    bool fresh = c->gen != 0 && c->gen == gen;
    pthread_mutex_unlock(&c->lock);
    return fresh;
}

void afr_ictx_update(const struct afr_priv *p, struct afr_inode *c, uint32_t type,
                     const struct afr_lookup_out *o)
{
    uint64_t gen = __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE);
    pthread_mutex_lock(&c->lock);
    c->gen = gen ? gen : 1;
    c->type = type & S_IFMT;
    for (int t = 0; t < AFR_NTYPES; t++) {
        c->readable[t] = o->readable[t];
        c->split[t] = o->split[t];
    }
    pthread_mutex_unlock(&c->lock);
}

void afr_ictx_failed(struct afr_inode *c, int t, uint32_t failed)
{
    if (!c || !failed)
        return;
    pthread_mutex_lock(&c->lock);
    c->readable[t] &= ~failed;
    pthread_mutex_unlock(&c->lock);
}

uint32_t afr_ictx_readable(struct afr_inode *c, int t, bool *split, uint32_t *type)
{
    pthread_mutex_lock(&c->lock);
    if (t == AFR_DATA && c->type && c->type != S_IFREG)
        t = AFR_METADATA; /* stat of a directory or a symlink */
    uint32_t r = c->readable[t];
    *split = c->split[t];
    if (type)
        *type = c->type;
    pthread_mutex_unlock(&c->lock);
    return r;
}

void afr_ictx_healed(const struct afr_priv *p, struct afr_inode *c, int t, uint32_t readable,
                     bool split)
{
    (void)p;
    pthread_mutex_lock(&c->lock);
    c->readable[t] = split ? 0 : readable;
    c->split[t] = split;
    pthread_mutex_unlock(&c->lock);
}

void afr_recent_keep(struct afr_priv *p, struct bfs_inode *inode)
{
    struct bfs_inode *old = NULL;
    pthread_mutex_lock(&p->lock);
    if (!p->recent_off) {
        unsigned k = p->recent_next++ % AFR_RECENT;
        old = p->recent[k];
        p->recent[k] = bfs_inode_ref(inode);
    }
    pthread_mutex_unlock(&p->lock);
    if (old)
        bfs_inode_unref(old);
}

void afr_recent_drop(struct afr_priv *p, bool on)
{
    struct bfs_inode *v[AFR_RECENT];
    pthread_mutex_lock(&p->lock);
    memcpy(v, p->recent, sizeof(v));
    memset(p->recent, 0, sizeof(p->recent));
    p->recent_off = !on;
    pthread_mutex_unlock(&p->lock);
    for (int k = 0; k < AFR_RECENT; k++)
        if (v[k])
            bfs_inode_unref(v[k]);
}

void afr_forget(struct bfs_xl *xl, struct bfs_inode *inode)
{
    uint64_t v;
    if (bfs_inode_ctx_del(inode, xl, &v) < 0 || !v)
        return;
    struct afr_inode *c = (struct afr_inode *)(uintptr_t)v;
    if (afr_priv(xl))
        afr_mem_save(afr_priv(xl), &inode->gfid, c);
    bfs_txn_lock_fini(&c->elock);
    bfs_txn_lock_fini(&c->dlock);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* ---- fds ---- */

struct afr_fd *afr_fdctx(struct bfs_xl *xl, struct bfs_fd *fd, bool create)
{
    struct afr_priv *p = afr_priv(xl);
    uint64_t v;
    if (!fd)
        return NULL;
    if (bfs_fd_ctx_get(fd, xl, &v) == 0)
        return (struct afr_fd *)(uintptr_t)v;
    if (!create)
        return NULL;
    pthread_mutex_lock(&p->lock);
    struct afr_fd *f = NULL;
    if (bfs_fd_ctx_get(fd, xl, &v) == 0) {
        f = (struct afr_fd *)(uintptr_t)v;
    } else if ((f = calloc(1, sizeof(*f)))) {
        pthread_mutex_init(&f->lock, NULL);
        bfs_listing_init(&f->listing);
        if (bfs_fd_ctx_set(fd, xl, (uintptr_t)f) < 0) {
            pthread_mutex_destroy(&f->lock);
            free(f);
            f = NULL;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return f;
}

uint32_t afr_fd_opened(struct bfs_xl *xl, struct bfs_fd *fd)
{
    struct afr_fd *f = afr_fdctx(xl, fd, false);
    if (!f)
        return afr_all(afr_priv(xl));
    pthread_mutex_lock(&f->lock);
    uint32_t m = f->opened;
    pthread_mutex_unlock(&f->lock);
    return m;
}

void afr_fd_set_opened(struct bfs_xl *xl, struct bfs_fd *fd, uint32_t opened,
                       const struct bfs_gfid *gfid, uint32_t flags)
{
    struct afr_fd *f = afr_fdctx(xl, fd, true);
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    f->opened = opened;
    if (gfid)
        f->gfid = *gfid;
    f->flags = flags & ~(uint32_t)(O_CREAT | O_EXCL | O_TRUNC);
    f->reopen_gen = __atomic_load_n(&afr_priv(xl)->gen, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&f->lock);
}

void afr_fd_set_lazy(struct bfs_xl *xl, struct bfs_fd *fd)
{
    struct afr_fd *f = afr_fdctx(xl, fd, false);
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    f->reopen_gen = 0; /* the first fix-open goes, whatever the generation */
    pthread_mutex_unlock(&f->lock);
}

void afr_fd_set_prefetch_ok(struct bfs_xl *xl, struct bfs_fd *fd, uint32_t ok)
{
    struct afr_fd *f = afr_fdctx(xl, fd, true);
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    f->prefetch_ok = ok;
    pthread_mutex_unlock(&f->lock);
}

uint32_t afr_fd_prefetch_ok(struct bfs_xl *xl, struct bfs_fd *fd)
{
    struct afr_fd *f = afr_fdctx(xl, fd, false);
    if (!f)
        return 0;
    pthread_mutex_lock(&f->lock);
    uint32_t m = f->prefetch_ok;
    pthread_mutex_unlock(&f->lock);
    return m;
}

void afr_release(struct bfs_xl *xl, struct bfs_fd *fd)
{
    uint64_t v;
    if (bfs_fd_ctx_del(fd, xl, &v) < 0 || !v)
        return;
    struct afr_fd *f = (struct afr_fd *)(uintptr_t)v;
    pthread_mutex_destroy(&f->lock);
    free(f);
}
