/*
 * locks.c — features/locks: the module, its table of per-inode lock state,
 * the waiter machinery shared by every lock kind, and the handling of a
 * client connection that closes (BFS_EV_CLIENT_CLOSING: its queued lock
 * requests answered, new ones refused, its locks kept while its calls
 * still run below) and then goes away (BFS_EV_CLIENT_GONE: its locks
 * released).
 *
 * The lock kinds themselves live in posix.c (lk, flush, release),
 * inodelk.c, entrylk.c and lease.c; dump.c renders the state as JSON.
 * Steps of cluster translators that ride in other calls: locks-txn.c
 * (replicate's and disperse's changelog), locks-unlink.c (distribute's
 * unlink under the name's entry lock).
 * See locks.h for the object lifetimes and the locking rules.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "locks.h"

#define PL_BUCKETS 4096 /* power of two */
/* notify-contention-delay: a holder acts on its first notice; repeats only
 * cover one that came before it knew the lock (docs/design/lock-contention.md) */
#define PL_NOTIFY_DELAY_STR "5"

static size_t gfid_bucket(const struct bfs_gfid *g)
{
    uint64_t a, b;
    memcpy(&a, g->b, 8);
    memcpy(&b, g->b + 8, 8);
    uint64_t h = a ^ (b * 0x9e3779b97f4a7c15ull);
    return (size_t)(h ^ (h >> 31)) & (PL_BUCKETS - 1);
}

static struct pl_inode *pin_new(const struct bfs_gfid *g)
{
    struct pl_inode *pin = calloc(1, sizeof(*pin));
    if (!pin)
        return NULL;
    pin->gfid = *g;
    pthread_mutex_init(&pin->lock, NULL);
    pl_list_init(&pin->posix);
    pl_list_init(&pin->flocks);
    pl_list_init(&pin->lk_blocked);
    pl_list_init(&pin->domains);
    pl_list_init(&pin->leases);
    return pin;
}

static bool domain_is_empty(const struct pl_domain *d)
{
    return pl_list_empty(&d->inodelks) && pl_list_empty(&d->inodelk_blocked) &&
           pl_list_empty(&d->entrylks) && pl_list_empty(&d->entrylk_blocked);
}

/* No lock, waiter or lease left (empty domains are freed on the way). */
static bool pin_is_empty(struct pl_inode *pin)
{
    struct pl_list *pos, *tmp;
    pl_foreach_safe(pos, tmp, &pin->domains)
    {
        struct pl_domain *d = pl_entry(pos, struct pl_domain, link);
        if (domain_is_empty(d)) {
            pl_list_del(&d->link);
            free(d->name);
            free(d);
        }
    }
    return pl_list_empty(&pin->posix) && pl_list_empty(&pin->flocks) &&
           pl_list_empty(&pin->lk_blocked) && pl_list_empty(&pin->domains) &&
           pl_list_empty(&pin->leases);
}

struct pl_inode *bfs__pl_inode_get(struct bfs_xl *xl, const struct bfs_gfid *g, bool create)
{
    struct pl_priv *priv = xl->private;
    size_t b = gfid_bucket(g);
    pthread_mutex_lock(&priv->lock);
    struct pl_inode *pin = priv->buckets[b];
    while (pin && !bfs_gfid_eq(&pin->gfid, g))
        pin = pin->hnext;
    if (!pin && create && (pin = pin_new(g))) {
        pin->hnext = priv->buckets[b];
        priv->buckets[b] = pin;
        priv->count++;
    }
    if (pin)
        pin->refs++;
    pthread_mutex_unlock(&priv->lock);
    return pin;
}

void bfs__pl_inode_put(struct bfs_xl *xl, struct pl_inode *pin)
{
    struct pl_priv *priv = xl->private;
    pthread_mutex_lock(&priv->lock);
    /* refs 0 under the table mutex: nobody else can reach pin any more, so
     * its lists may be read without its own mutex. */
    if (--pin->refs > 0 || !pin_is_empty(pin)) {
        pthread_mutex_unlock(&priv->lock);
        return;
    }
    struct pl_inode **pp = &priv->buckets[gfid_bucket(&pin->gfid)];
    while (*pp != pin)
        pp = &(*pp)->hnext;
    *pp = pin->hnext;
    priv->count--;
    pthread_mutex_unlock(&priv->lock);
    pthread_mutex_destroy(&pin->lock);
    free(pin);
}

struct pl_inode **bfs__pl_inode_all(struct bfs_xl *xl, size_t *n)
{
    struct pl_priv *priv = xl->private;
    struct pl_inode **v = NULL;
    *n = 0;
    pthread_mutex_lock(&priv->lock);
    if (priv->count && (v = malloc(priv->count * sizeof(*v)))) {
        for (size_t b = 0; b < priv->nbuckets; b++)
            for (struct pl_inode *pin = priv->buckets[b]; pin; pin = pin->hnext) {
                pin->refs++;
                v[(*n)++] = pin;
            }
    }
    pthread_mutex_unlock(&priv->lock);
    return v;
}

struct pl_domain *bfs__pl_domain_get(struct pl_inode *pin, const char *name, bool create)
{
    struct pl_list *pos;
    pl_foreach(pos, &pin->domains)
    {
        struct pl_domain *d = pl_entry(pos, struct pl_domain, link);
        if (strcmp(d->name, name) == 0)
            return d;
    }
    if (!create)
        return NULL;
    struct pl_domain *d = calloc(1, sizeof(*d));
    if (!d || !(d->name = strdup(name))) {
        free(d);
        return NULL;
    }
    pl_list_init(&d->inodelks);
    pl_list_init(&d->inodelk_blocked);
    pl_list_init(&d->entrylks);
    pl_list_init(&d->entrylk_blocked);
    pl_list_add_tail(&pin->domains, &d->link);
    return d;
}

bool bfs__pl_owner_eq(const struct pl_owner *a, const struct pl_owner *b)
{
    return a->client == b->client && a->id == b->id;
}

int bfs__pl_domain_drop(struct bfs_xl *xl, const struct bfs_gfid *gfid, const char *domain,
                        int (*unlock)(struct pl_domain *, const struct pl_lock *,
                                      struct pl_list *),
                        const struct pl_lock *want)
{
    struct pl_inode *pin = bfs__pl_inode_get(xl, gfid, false);
    if (!pin)
        return -EINVAL;
    struct pl_list wake;
    pl_list_init(&wake);
    struct pl_notices notes = {0};
    pthread_mutex_lock(&pin->lock);
    struct pl_domain *d = bfs__pl_domain_get(pin, domain, false);
    int rc = d ? unlock(d, want, &wake) : -EINVAL;
    bfs__pl_contention_scan(xl, pin, &notes);
    pthread_mutex_unlock(&pin->lock);
    bfs__pl_wake_all(&wake);
    bfs__pl_contention_send(xl, &notes);
    bfs__pl_inode_put(xl, pin);
    return rc;
}

int bfs__pl_range(const struct bfs_flock *fl, uint64_t *start, uint64_t *end)
{
    *start = fl->start;
    if (fl->len == 0) {
        *end = UINT64_MAX;
        return 0;
    }
    if (fl->len - 1 > UINT64_MAX - fl->start)
        return -EINVAL;
    *end = fl->start + fl->len - 1;
    return 0;
}

int bfs__pl_loc_gfid(const struct bfs_loc *loc, struct bfs_gfid *out)
{
    if (!bfs_gfid_is_null(&loc->gfid))
        *out = loc->gfid;
    else if (loc->inode && !bfs_gfid_is_null(&loc->inode->gfid))
        *out = loc->inode->gfid;
    else
        return -EINVAL;
    return 0;
}

struct pl_lock *bfs__pl_lock_new(enum pl_kind kind, const struct pl_owner *owner, uint32_t type,
                                 uint64_t start, uint64_t end, uint32_t pid)
{
    struct pl_lock *lk = calloc(1, sizeof(*lk));
    if (!lk)
        return NULL;
    pl_list_init(&lk->link);
    lk->kind = kind;
    lk->owner = *owner;
    lk->type = type;
    lk->start = start;
    lk->end = end;
    lk->pid = pid;
    lk->since_ns = bfs_now_ns();
    return lk;
}

void bfs__pl_lock_free(struct pl_lock *lk)
{
    if (!lk)
        return;
    free(lk->basename);
    free(lk);
}

struct pl_waiter *bfs__pl_waiter_new(struct bfs_frame *frame, int fop, struct bfs_fd *fd)
{
    struct pl_waiter *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    pl_list_init(&w->link);
    w->frame = frame;
    w->fop = fop;
    w->fd = fd ? bfs_fd_ref(fd) : NULL;
    return w;
}

void bfs__pl_waiter_done(struct pl_waiter *w, int rc, struct pl_list *wake)
{
    w->rc = rc;
    pl_list_add_tail(wake, &w->link);
}

void bfs__pl_wake_all(struct pl_list *wake)
{
    struct pl_list *pos, *tmp;
    pl_foreach_safe(pos, tmp, wake)
    {
        struct pl_waiter *w = pl_entry(pos, struct pl_waiter, link);
        pl_list_del(&w->link);
        if (w->fop == BFS_FOP_LK) {
            struct bfs_lk_rep rep = {.lock = w->reply};
            if (w->rc < 0)
                memset(&rep, 0, sizeof(rep));
            bfs_unwind_lk(w->frame, w->rc, &rep);
        } else {
            bfs_unwind_any(w->fop, w->frame, w->rc, NULL);
        }
        if (w->fd)
            bfs_fd_unref(w->fd);
        bfs__pl_lock_free(w->lock);
        bfs__pl_lock_free(w->spare);
        free(w);
    }
}

/* ---- client connection closing, then gone ---- */

struct pl_closing {
    void *client;
    struct pl_closing *next;
};

bool bfs__pl_locks_drop(struct pl_list *granted, void *client)
{
    bool dropped = false;
    struct pl_list *pos, *tmp;
    pl_foreach_safe(pos, tmp, granted)
    {
        struct pl_lock *l = pl_entry(pos, struct pl_lock, link);
        if (l->owner.client == client) {
            pl_list_del(&l->link);
            bfs__pl_lock_free(l);
            dropped = true;
        }
    }
    return dropped;
}

void bfs__pl_waiters_drop(struct pl_list *blocked, void *client, struct pl_list *wake)
{
    struct pl_list *pos, *tmp;
    pl_foreach_safe(pos, tmp, blocked)
    {
        struct pl_waiter *w = pl_entry(pos, struct pl_waiter, link);
        if (w->lock->owner.client == client) {
            pl_list_del(&w->link);
            bfs__pl_waiter_done(w, -ENOTCONN, wake);
        }
    }
}

bool bfs__pl_closing(struct bfs_xl *xl, const struct bfs_frame *frame)
{
    struct pl_priv *priv = xl->private;
    if (!__atomic_load_n(&priv->nclosing, __ATOMIC_ACQUIRE))
        return false;
    bool closing = false;
    pthread_mutex_lock(&priv->lock);
    for (struct pl_closing *c = priv->closing; c && !closing; c = c->next)
        closing = c->client == frame->stack->client;
    pthread_mutex_unlock(&priv->lock);
    return closing;
}

/* Marks client closing (on) or forgets it (off: gone). A mark that cannot
 * be allocated only costs the refusal of its late lock requests. */
static void closing_mark(struct pl_priv *priv, void *client, bool on)
{
    struct pl_closing *c = on ? calloc(1, sizeof(*c)) : NULL;
    pthread_mutex_lock(&priv->lock);
    for (struct pl_closing **pp = &priv->closing; *pp;) {
        struct pl_closing *e = *pp;
        if (e->client != client) {
            pp = &e->next;
            continue;
        }
        *pp = e->next; /* on: replaced below, never twice on the list */
        free(e);
        __atomic_sub_fetch(&priv->nclosing, 1, __ATOMIC_RELEASE);
    }
    if (c) {
        c->client = client;
        c->next = priv->closing;
        priv->closing = c;
        __atomic_add_fetch(&priv->nclosing, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&priv->lock);
}

/* CLIENT_CLOSING (waiters_only): the client's queued requests answer
 * ENOTCONN, its granted locks stay (its calls still running below may be
 * a transaction's post-op under them). CLIENT_GONE: everything of it. */
static void client_gone(struct bfs_xl *xl, void *client, bool waiters_only)
{
    closing_mark(xl->private, client, waiters_only);
    size_t n;
    struct pl_inode **all = bfs__pl_inode_all(xl, &n);
    for (size_t i = 0; i < n; i++) {
        struct pl_list wake;
        pl_list_init(&wake);
        pthread_mutex_lock(&all[i]->lock);
        bfs__pl_posix_client_gone(all[i], client, &wake, waiters_only);
        bfs__pl_inodelk_client_gone(all[i], client, &wake, waiters_only);
        bfs__pl_entrylk_client_gone(all[i], client, &wake, waiters_only);
        if (!waiters_only)
            bfs__pl_lease_client_gone(all[i], client);
        struct pl_notices notes = {0};
        bfs__pl_contention_scan(xl, all[i], &notes);
        pthread_mutex_unlock(&all[i]->lock);
        bfs__pl_wake_all(&wake);
        bfs__pl_contention_send(xl, &notes);
        bfs__pl_inode_put(xl, all[i]);
    }
    free(all);
}

static int pl_notify(struct bfs_xl *xl, enum bfs_event ev, struct bfs_xl *from, void *data)
{
    if ((ev == BFS_EV_CLIENT_GONE || ev == BFS_EV_CLIENT_CLOSING) && data) {
        bool closing = ev == BFS_EV_CLIENT_CLOSING;
        XL_DBG(xl, "client %p %s: %s", data, closing ? "closing" : "gone",
               closing ? "answering its queued lock requests" : "releasing its locks");
        client_gone(xl, data == BFS_CLIENT_LOCAL ? NULL : data, closing);
    }
    return bfs_xl_notify_default(xl, ev, from, data);
}

/* ---- init / fini ---- */

static int pl_init(struct bfs_xl *xl)
{
    struct pl_priv *priv = calloc(1, sizeof(*priv));
    if (!priv || !(priv->buckets = calloc(PL_BUCKETS, sizeof(*priv->buckets)))) {
        free(priv);
        return -ENOMEM;
    }
    priv->nbuckets = PL_BUCKETS;
    pthread_mutex_init(&priv->lock, NULL);
    priv->notify = bfs_xl_opt_bool(xl, "notify-contention");
    priv->notify_delay_ns = (uint64_t)bfs_xl_opt_int(xl, "notify-contention-delay") * 1000000u;
    xl->private = priv;
    return 0;
}

static int pl_reconfigure(struct bfs_xl *xl, struct bfs_dict *options)
{
    struct pl_priv *priv = xl->private;
    bool on;
    int64_t ms;
    const char *s;
    if (bfs_dict_get_str(options, "notify-contention", &s) == 0) {
        if (bfs_parse_bool(s, &on) < 0)
            return -EINVAL;
        __atomic_store_n(&priv->notify, on, __ATOMIC_RELAXED);
    }
    if (bfs_dict_get_str(options, "notify-contention-delay", &s) == 0) {
        if (bfs_parse_int(s, &ms) < 0 || ms < 0 || ms > 60000)
            return -EINVAL;
        __atomic_store_n(&priv->notify_delay_ns, (uint64_t)ms * 1000000u, __ATOMIC_RELAXED);
    }
    return 0;
}

static void free_lock_list(struct pl_list *h)
{
    struct pl_list *pos, *tmp;
    pl_foreach_safe(pos, tmp, h)
    {
        pl_list_del(pos);
        bfs__pl_lock_free(pl_entry(pos, struct pl_lock, link));
    }
}

/* At fini nobody above us is alive to hear an answer: waiters are dropped
 * without unwinding (their frames belong to the dying graph). */
static size_t free_waiter_list(struct pl_list *h)
{
    size_t n = 0;
    struct pl_list *pos, *tmp;
    pl_foreach_safe(pos, tmp, h)
    {
        struct pl_waiter *w = pl_entry(pos, struct pl_waiter, link);
        pl_list_del(pos);
        if (w->fd)
            bfs_fd_unref(w->fd);
        bfs__pl_lock_free(w->lock);
        bfs__pl_lock_free(w->spare);
        free(w);
        n++;
    }
    return n;
}

static size_t pin_free(struct pl_inode *pin)
{
    size_t waiters = 0;
    struct pl_list *pos, *tmp;
    free_lock_list(&pin->posix);
    free_lock_list(&pin->flocks);
    waiters += free_waiter_list(&pin->lk_blocked);
    pl_foreach_safe(pos, tmp, &pin->domains)
    {
        struct pl_domain *d = pl_entry(pos, struct pl_domain, link);
        free_lock_list(&d->inodelks);
        free_lock_list(&d->entrylks);
        waiters += free_waiter_list(&d->inodelk_blocked);
        waiters += free_waiter_list(&d->entrylk_blocked);
        free(d->name);
        free(d);
    }
    pl_foreach_safe(pos, tmp, &pin->leases)
    {
        free(pl_entry(pos, struct pl_lease, link));
    }
    pthread_mutex_destroy(&pin->lock);
    free(pin);
    return waiters;
}

static void pl_fini(struct bfs_xl *xl)
{
    struct pl_priv *priv = xl->private;
    if (!priv)
        return;
    size_t waiters = 0;
    for (size_t b = 0; b < priv->nbuckets; b++) {
        struct pl_inode *pin = priv->buckets[b];
        while (pin) {
            struct pl_inode *next = pin->hnext;
            waiters += pin_free(pin);
            pin = next;
        }
    }
    if (waiters)
        XL_WARN(xl, "fini with %zu blocked lock requests; dropped unanswered", waiters);
    while (priv->closing) {
        struct pl_closing *c = priv->closing;
        priv->closing = c->next;
        free(c);
    }
    pthread_mutex_destroy(&priv->lock);
    free(priv->buckets);
    free(priv);
    xl->private = NULL;
}

static const struct bfs_option_desc pl_options[] = {
    {.key = "notify-contention", .type = BFS_OPT_BOOL, .def = "on",
     .flags = BFS_OPT_F_RECONF,
     .description = "tell the holder of an inodelk or entrylk when another owner's blocking "
                    "request waits for it (cluster translators then end their eager lock)"},
    {.key = "notify-contention-delay", .type = BFS_OPT_INT, .def = PL_NOTIFY_DELAY_STR,
     .min = 0, .max = 60000, .flags = BFS_OPT_F_RECONF,
     .description = "milliseconds before the holder of the same lock is told again"},
    {.key = NULL},
};

static const struct bfs_fops pl_fops = {
    .lk = bfs__pl_lk,
    .flush = bfs__pl_flush,
    .inodelk = bfs__pl_inodelk,
    .finodelk = bfs__pl_finodelk,
    .entrylk = bfs__pl_entrylk,
    .fentrylk = bfs__pl_fentrylk,
    .lease = bfs__pl_lease,
    .xattrop = bfs__pl_xattrop,
    .fxattrop = bfs__pl_fxattrop,
    .create = bfs__pl_create,
    .mknod = bfs__pl_mknod,
    .mkdir = bfs__pl_mkdir,
    .symlink = bfs__pl_symlink,
    .link = bfs__pl_link,
    .unlink = bfs__pl_unlink_locked,
    .rmdir = bfs__pl_rmdir,
};

BFS_XL_MODULE(.type = "features/locks", .fops = &pl_fops, .options = pl_options,
              .init = pl_init, .fini = pl_fini, .reconfigure = pl_reconfigure,
              .notify = pl_notify, .release = bfs__pl_release, .dump = bfs__pl_dump,
              .min_children = 1, .max_children = 1);
