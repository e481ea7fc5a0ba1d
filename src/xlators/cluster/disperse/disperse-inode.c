/*
 * disperse-inode.c — what disperse remembers per inode and per fd.
 *
 * Inode context (struct ec_inode): the good children per type (from the
 * last lookup or refresh, or the check of a transaction's pre-op; narrowed
 * by failed changes, widened by heals), the file size, and the shared data
 * lock object of eager locking (and the entry lock a directory keeps
 * between entry changes, disperse-meta.c). Made on first use under
 * priv->lock, freed by forget; a lock object that is not FREE holds a
 * reference on the inode.
 * The masks are only trusted while ctx->gen equals priv->gen.
 *
 * fd context (struct ec_fd): the children the fd is open on and the child
 * a directory listing stays on.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/graph.h"
#include "disperse.h"

struct bfs_inode *ec_inode_of_gfid(struct bfs_xl *xl, const struct bfs_gfid *g, uint32_t type)
{
    if (!g || bfs_gfid_is_null(g) || !xl->graph || !xl->graph->itable)
        return NULL;
    return bfs_inode_get(xl->graph->itable, g, type);
}

struct bfs_inode *ec_inode_of_loc(struct bfs_xl *xl, const struct bfs_loc *loc)
{
    if (loc->inode && !bfs_gfid_is_null(&loc->inode->gfid))
        return bfs_inode_ref(loc->inode);
    return ec_inode_of_gfid(xl, &loc->gfid, 0);
}

struct bfs_inode *ec_inode_of_fd(struct bfs_xl *xl, struct bfs_fd *fd)
{
    if (fd && fd->inode)
        return bfs_inode_ref(fd->inode);
    struct ec_fd *f = ec_fdctx(xl, fd, false);
    if (!f)
        return NULL;
    pthread_mutex_lock(&f->lock);
    struct bfs_gfid g = f->gfid;
    pthread_mutex_unlock(&f->lock);
    return ec_inode_of_gfid(xl, &g, 0);
}

struct ec_inode *ec_ictx_peek(struct bfs_xl *xl, struct bfs_inode *inode)
{
    uint64_t v;
    if (inode && bfs_inode_ctx_get(inode, xl, &v) == 0 && v)
        return (struct ec_inode *)(uintptr_t)v;
    return NULL;
}

struct ec_inode *ec_ictx(struct bfs_xl *xl, struct bfs_inode *inode)
{
    struct ec_priv *p = ec_priv(xl);
    uint64_t v;
    if (!inode)
        return NULL;
    if (bfs_inode_ctx_get(inode, xl, &v) == 0)
        return (struct ec_inode *)(uintptr_t)v;
    pthread_mutex_lock(&p->lock);
    struct ec_inode *c = NULL;
    if (bfs_inode_ctx_get(inode, xl, &v) == 0) {
        c = (struct ec_inode *)(uintptr_t)v;
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
        }
    }
    pthread_mutex_unlock(&p->lock);
    return c;
}

void ec_ictx_window(const struct ec_priv *p, struct ec_inode *c, uint32_t mode,
                    const struct ec_view *v, uint64_t win)
{
    uint64_t gen = __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE);
    pthread_mutex_lock(&c->lock);
    c->gen = gen ? gen : 1;
    c->type = mode & S_IFMT;
    for (int t = 0; t < EC_NTYPES; t++)
        c->good[t] = v->good[t];
    c->size = v->size;
    c->win = win;
    c->cseq++;
    pthread_mutex_unlock(&c->lock);
}

bool ec_ictx_in_window(struct ec_inode *c, uint64_t win)
{
    pthread_mutex_lock(&c->lock);
    bool in = c->win == win;
    pthread_mutex_unlock(&c->lock);
    return in;
}

bool ec_ictx_fresh(const struct ec_priv *p, struct ec_inode *c)
{
    uint64_t gen = __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE);
    pthread_mutex_lock(&c->lock);
    bool fresh = c->gen != 0 && c->gen == gen;
    pthread_mutex_unlock(&c->lock);
    return fresh;
}

/* Under c->lock. */
static void update_locked(const struct ec_priv *p, struct ec_inode *c, uint32_t mode,
                          const struct ec_view *v, bool held, bool raced)
{
    uint64_t gen = __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE);
    bool take = !held && (!raced || c->gen == 0);
    if (take || held)
        c->gen = gen ? gen : 1;
    c->type = mode & S_IFMT;
    for (int t = 0; t < EC_NTYPES; t++)
        if (t != EC_DATA || take)
            c->good[t] = v->good[t];
    if (take)
        c->size = v->size;
}

void ec_ictx_update(const struct ec_priv *p, struct ec_inode *c, uint32_t mode,
                    const struct ec_view *v, uint64_t seq)
{
    /* while we hold the data lock, the window's size and good set are the
     * truth; a data change that started or ended since the answers were
     * asked for may have made them stale (they are taken anyway the first
     * time: better than nothing) */
    bool held = bfs_txn_lock_state(&c->dlock) != BFS_TXL_FREE;
    bool raced = seq != ec_dseq(p);
    pthread_mutex_lock(&c->lock);
    update_locked(p, c, mode, v, held, raced);
    pthread_mutex_unlock(&c->lock);
}

void ec_ictx_update_if(const struct ec_priv *p, struct ec_inode *c, uint32_t mode,
                       const struct ec_view *v, uint64_t seq, uint64_t cseq)
{
    bool held = bfs_txn_lock_state(&c->dlock) != BFS_TXL_FREE;
    bool raced = seq != ec_dseq(p);
    pthread_mutex_lock(&c->lock);
    if (c->cseq == cseq)
        update_locked(p, c, mode, v, held, raced);
    pthread_mutex_unlock(&c->lock);
}

uint64_t ec_ictx_cseq(struct ec_inode *c)
{
    if (!c)
        return 0;
    pthread_mutex_lock(&c->lock);
    uint64_t n = c->cseq;
    pthread_mutex_unlock(&c->lock);
    return n;
}

void ec_ictx_failed(struct ec_inode *c, int t, uint32_t failed)
{
    if (!c || !failed)
        return;
    pthread_mutex_lock(&c->lock);
    c->good[t] &= ~failed;
    c->cseq++;
    pthread_mutex_unlock(&c->lock);
}

uint32_t ec_ictx_good(struct ec_inode *c, int t, uint32_t *type, uint64_t *size)
{
    pthread_mutex_lock(&c->lock);
    uint32_t g = c->good[t];
    if (type)
        *type = c->type;
    if (size)
        *size = c->size;
    pthread_mutex_unlock(&c->lock);
    return g;
}

void ec_forget(struct bfs_xl *xl, struct bfs_inode *inode)
{
    uint64_t v;
    if (bfs_inode_ctx_del(inode, xl, &v) < 0 || !v)
        return;
    struct ec_inode *c = (struct ec_inode *)(uintptr_t)v;
    bfs_txn_lock_fini(&c->elock);
    bfs_txn_lock_fini(&c->dlock);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* ---- fds ---- */

struct ec_fd *ec_fdctx(struct bfs_xl *xl, struct bfs_fd *fd, bool create)
{
    struct ec_priv *p = ec_priv(xl);
    uint64_t v;
    if (!fd)
        return NULL;
    if (bfs_fd_ctx_get(fd, xl, &v) == 0)
        return (struct ec_fd *)(uintptr_t)v;
    if (!create)
        return NULL;
    pthread_mutex_lock(&p->lock);
    struct ec_fd *f = NULL;
    if (bfs_fd_ctx_get(fd, xl, &v) == 0) {
        f = (struct ec_fd *)(uintptr_t)v;
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

uint32_t ec_fd_opened(struct bfs_xl *xl, struct bfs_fd *fd)
{
    struct ec_fd *f = ec_fdctx(xl, fd, false);
    if (!f)
        return ec_all(ec_priv(xl));
    pthread_mutex_lock(&f->lock);
    uint32_t m = f->opened;
    pthread_mutex_unlock(&f->lock);
    return m;
}

void ec_fd_set_opened(struct bfs_xl *xl, struct bfs_fd *fd, uint32_t opened,
                      const struct bfs_gfid *gfid, uint32_t flags)
{
    struct ec_fd *f = ec_fdctx(xl, fd, true);
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    f->opened = opened;
    if (gfid)
        f->gfid = *gfid;
    f->flags = flags;
    pthread_mutex_unlock(&f->lock);
}

void ec_release(struct bfs_xl *xl, struct bfs_fd *fd)
{
    uint64_t v;
    if (bfs_fd_ctx_del(fd, xl, &v) < 0 || !v)
        return;
    struct ec_fd *f = (struct ec_fd *)(uintptr_t)v;
    pthread_mutex_destroy(&f->lock);
    free(f);
}
