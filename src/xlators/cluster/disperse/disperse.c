/*
 * disperse.c — cluster/disperse: the module, its options, init/fini,
 * reconfigure, child up/down events and the statedump.
 *
 * N children, redundancy R, k = N - R (docs/design/disperse.md). This file
 * only wires things: the fops are in disperse-{lookup,read,fd,write,meta}.c,
 * the shared transaction machinery in src/xlators/lib/, heals in
 * disperse-heal*.c, the codec in src/ec/.
 *
 * Events: a child's CHILD_UP/CHILD_DOWN updates the up mask and bumps the
 * generation (inode contexts refresh before the next read). We tell our
 * parents CHILD_UP once k children are up, or once every child has
 * reported and one is up; CHILD_DOWN when none is up.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "core/graph.h"
#include "disperse.h"

uint32_t ec_all(const struct ec_priv *p)
{
    return p->n >= 32 ? ~0u : (1u << p->n) - 1;
}

uint32_t ec_up(const struct ec_priv *p)
{
    return bfs_cluster_up(&p->cl);
}

int ec_quorum(const struct ec_priv *p)
{
    int q = __atomic_load_n(&p->cl.qcount, __ATOMIC_RELAXED);
    return q < p->k ? p->k : q;
}

bool ec_child_fault(int rc)
{
    return rc == -ENOTCONN || rc == -EIO || rc == -EBADF || rc == -ESTALE || rc == -ENOENT ||
           rc == -ENODEV || rc == -ENOMEM || rc == -ETIMEDOUT || rc == -ECONNRESET;
}

/* ---- options ---- */

#define CLIENT_OPT (BFS_OPT_F_CLIENT | BFS_OPT_F_SETTABLE | BFS_OPT_F_RECONF)

static const struct bfs_option_desc ec_options[] = {
    {.key = "redundancy", .type = BFS_OPT_INT, .def = "1", .min = 1, .max = EC_MAX - 1,
     .description = "R: children that may be lost; the other N-R hold data fragments"},
    {.key = "disperse.chunk-size", .type = BFS_OPT_INT, .def = "0", .min = 0, .max = 65536,
     .description = "bytes of one fragment of one stripe (a multiple of 512; 0: auto, the "
                    "largest power of two with a stripe of at most 4 KiB); fixed for the "
                    "life of the volume"},
    {.key = "disperse.lock-domain", .type = BFS_OPT_STR, .def = "",
     .description = "the name the clients of this set lock under (empty: the translator's "
                    "name, which every client's volfile gives alike); set it when one "
                    "client's volfile names the translator otherwise"},
    {.key = "disperse.quorum-count", .type = BFS_OPT_INT, .def = "0", .min = 0, .max = EC_MAX,
     .flags = CLIENT_OPT,
     .description = "children a change must reach, else EIO (0 or less than N-R: N-R)"},
    {.key = "cluster.eager-lock", .type = BFS_OPT_BOOL, .def = "on", .flags = CLIENT_OPT,
     .description = "keep a file's lock and changelog between writes through one fd"},
    {.key = "disperse.other-eager-lock", .type = BFS_OPT_BOOL, .def = "on",
     .flags = CLIENT_OPT,
     .description = "keep a directory's entry lock and changelog between the creates and "
                    "removals of names in it (with cluster.eager-lock; released when "
                    "another client waits for it)"},
    {.key = "cluster.post-op-delay-ms", .type = BFS_OPT_INT, .def = "500", .min = 0,
     .max = 10000, .flags = CLIENT_OPT,
     .description = "how long an idle eager lock is kept before post-op and unlock"},
    {.key = "cluster.background-self-heal-count", .type = BFS_OPT_INT, .def = "8", .min = 0,
     .max = 1024, .flags = CLIENT_OPT,
     .description = "heals queued in the background at most; 0 heals in the foreground "
                    "(the access waits)"},
    {.key = "cluster.heal-lock-timeout", .type = BFS_OPT_TIME, .def = "10", .min = 1,
     .max = 3600, .flags = CLIENT_OPT,
     .description = "seconds a heal on access waits for a file's lock held elsewhere (queued, "
                    "so the holder is told) before leaving the heal to the next access (the "
                    "self-heal daemon tries once)"},
    {.key = "cluster.data-self-heal", .type = BFS_OPT_BOOL, .def = "on", .flags = CLIENT_OPT,
     .description = "rebuild stale fragments on access"},
    {.key = "cluster.metadata-self-heal", .type = BFS_OPT_BOOL, .def = "on",
     .flags = CLIENT_OPT, .description = "heal mode, owner and xattrs on access"},
    {.key = "cluster.entry-self-heal", .type = BFS_OPT_BOOL, .def = "on", .flags = CLIENT_OPT,
     .description = "heal directory entries on access"},
    {.key = NULL},
};

static const char *opt(struct bfs_xl *xl, const struct bfs_dict *over, const char *key)
{
    const char *v;
    if (over && bfs_dict_get_str(over, key, &v) == 0)
        return v;
    return bfs_xl_opt_str(xl, key);
}

static void apply_options(struct bfs_xl *xl, const struct bfs_dict *over)
{
    struct ec_priv *p = ec_priv(xl);
    bool b;
    int64_t v = 0;
    (void)bfs_parse_int(opt(xl, over, "disperse.quorum-count"), &v);
    if (v < p->k)
        v = p->k;
    if (v > p->n)
        v = p->n;
    __atomic_store_n(&p->cl.qtype, (int)BFS_QUORUM_FIXED, __ATOMIC_RELAXED);
    __atomic_store_n(&p->cl.qcount, (int)v, __ATOMIC_RELAXED);
    b = true;
    (void)bfs_parse_bool(opt(xl, over, "cluster.eager-lock"), &b);
    __atomic_store_n(&p->cl.eager, b, __ATOMIC_RELAXED);
    b = true;
    (void)bfs_parse_bool(opt(xl, over, "disperse.other-eager-lock"), &b);
    __atomic_store_n(&p->eager_entry, b, __ATOMIC_RELAXED);
    v = 500;
    (void)bfs_parse_int(opt(xl, over, "cluster.post-op-delay-ms"), &v);
    __atomic_store_n(&p->cl.delay_ms, (uint64_t)v, __ATOMIC_RELAXED);
    v = 10;
    (void)bfs_parse_int(opt(xl, over, "cluster.heal-lock-timeout"), &v);
    __atomic_store_n(&p->heal_lock_ms, (uint64_t)v * 1000, __ATOMIC_RELAXED);
    v = 8;
    (void)bfs_parse_int(opt(xl, over, "cluster.background-self-heal-count"), &v);
    __atomic_store_n(&p->heal_count, (int)v, __ATOMIC_RELAXED);
    static const char *const heal_keys[EC_NTYPES] = {
        "cluster.data-self-heal", "cluster.metadata-self-heal", "cluster.entry-self-heal"};
    for (int t = 0; t < EC_NTYPES; t++) {
        b = true;
        (void)bfs_parse_bool(opt(xl, over, heal_keys[t]), &b);
        __atomic_store_n(&p->heal_on[t], b, __ATOMIC_RELAXED);
    }
}

/* The chunk: the option, or the largest power of two >= 512 with k * C <= 4096. */
static int choose_chunk(struct ec_priv *p)
{
    int64_t c = bfs_xl_opt_int(p->xl, "disperse.chunk-size");
    if (c == 0) {
        c = 4096;
        while (c > 512 && c * p->k > 4096)
            c /= 2;
    } else if (c % 512) {
        XL_ERR(p->xl, "disperse.chunk-size %" PRId64 " is not a multiple of 512", c);
        return -EINVAL;
    }
    p->chunk = (uint64_t)c;
    p->stripe = p->chunk * (uint64_t)p->k;
    return 0;
}

/* ---- init / fini ---- */

static void free_priv(struct ec_priv *p)
{
    for (int t = 0; t < BFS_TXN_NTYPES; t++)
        free((char *)p->cl.domain[t]);
    if (p->codec)
        bfs_ec_free(p->codec);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static int init_domains(struct ec_priv *p)
{
    for (int t = 0; t < BFS_TXN_NTYPES; t++) {
        char *d = NULL;
        const char *base = bfs_xl_opt_str(p->xl, "disperse.lock-domain");
        if (!base || !*base)
            base = p->xl->name;
        if (asprintf(&d, "%s%s", base, t == BFS_TXN_METADATA ? ".meta" : "") < 0)
            return -ENOMEM;
        p->cl.domain[t] = d;
    }
    return 0;
}

static int ec_init(struct bfs_xl *xl)
{
    int r = (int)bfs_xl_opt_int(xl, "redundancy");
    int n = xl->nchildren;
    if (n < 2 || n > EC_MAX) {
        XL_ERR(xl, "disperse needs 2 to %d subvolumes, not %d", EC_MAX, n);
        return -EINVAL;
    }
    if (r < 1 || 2 * r >= n) {
        XL_ERR(xl, "redundancy %d with %d subvolumes: it must be at least 1 and less than "
                   "half of them (use replicate otherwise)", r, n);
        return -EINVAL;
    }
    struct ec_priv *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    pthread_mutex_init(&p->lock, NULL);
    p->xl = xl;
    p->n = n;
    p->r = r;
    p->k = n - r;
    p->cl.xl = xl;
    p->cl.n = n;
    p->cl.cl = &ec_changelog_ops;
    p->cl.cl_arg = p;
    p->cl.preop_in_fop = true; /* entry pre-ops ride in the entry fop (lib/txn-piggy.c) */
    p->cl.loop = xl->graph && xl->graph->proc ? xl->graph->proc->loop : NULL;
    bfs_cluster_init_timers(&p->cl);
    xl->private = p;
    int rc = choose_chunk(p);
    if (rc == 0)
        rc = bfs_ec_new((unsigned)p->k, (unsigned)p->r, &p->codec);
    if (rc == 0)
        rc = init_domains(p);
    if (rc == 0) {
        apply_options(xl, NULL);
        rc = ec_heal_start(p);
    }
    if (rc < 0) {
        xl->private = NULL;
        free_priv(p);
        return rc;
    }
    XL_INFO(xl, "disperse %d redundancy %d: stripe %" PRIu64 " bytes, chunk %" PRIu64, n, r,
            p->stripe, p->chunk);
    return 0;
}

static void ec_fini(struct bfs_xl *xl)
{
    struct ec_priv *p = ec_priv(xl);
    if (!p)
        return;
    ec_heal_stop(p);
    bfs_txn_timers_quiesce(&p->cl);
    xl->private = NULL;
    free_priv(p);
}

static int ec_reconfigure(struct bfs_xl *xl, struct bfs_dict *options)
{
    apply_options(xl, options);
    return 0;
}

/* ---- events ---- */

static int child_index(const struct bfs_xl *xl, const struct bfs_xl *from)
{
    for (int i = 0; i < xl->nchildren; i++)
        if (xl->children[i] == from)
            return i;
    return -1;
}

static void parent_down(struct ec_priv *p)
{
    ec_heal_stop(p);
    if (p->cl.loop && bfs_loop_on_loop_thread(p->cl.loop)) {
        XL_WARN(p->xl, "going down on the event loop thread: not waiting for transactions");
        return;
    }
    (void)bfs_txn_quiesce(&p->cl, 30000);
}

static int ec_notify(struct bfs_xl *xl, enum bfs_event ev, struct bfs_xl *from, void *data)
{
    struct ec_priv *p = ec_priv(xl);
    if (p && ev == BFS_EV_PARENT_DOWN)
        parent_down(p);
    if (p && ev == BFS_EV_UPCALL && data && bfs_txn_contention(&p->cl, data))
        return 0; /* a lock contention notice: ends our eager lock (lib/txn-contend.c) */
    if (p && ev == BFS_EV_PARENT_UP && !p->healq && ec_heal_start(p) < 0)
        XL_ERR(xl, "cannot start the heal thread: heals on access are off");
    int i = from ? child_index(xl, from) : -1;
    if ((ev != BFS_EV_CHILD_UP && ev != BFS_EV_CHILD_DOWN) || i < 0 || !p)
        return bfs_xl_notify_default(xl, ev, from, data);
    bool up = ev == BFS_EV_CHILD_UP;
    int announce = 0;
    pthread_mutex_lock(&p->lock);
    uint32_t mask = ec_up(p);
    mask = up ? mask | BFS_BIT(i) : mask & ~BFS_BIT(i);
    __atomic_store_n(&p->cl.up, mask, __ATOMIC_RELEASE);
    if (!up) { /* the next connection may reach another brick */
        __atomic_and_fetch(&p->cl.piggy, ~BFS_BIT(i), __ATOMIC_ACQ_REL);
        __atomic_and_fetch(&p->wadd, ~BFS_BIT(i), __ATOMIC_ACQ_REL);
    }
    __atomic_add_fetch(&p->gen, 1, __ATOMIC_ACQ_REL);
    p->reported |= BFS_BIT(i);
    bool ready = bfs_mask_count(mask) >= p->k || (p->reported == ec_all(p) && mask != 0);
    if (!p->announced_up && ready) {
        p->announced_up = true;
        announce = 1;
    } else if (p->announced_up && mask == 0) {
        p->announced_up = false;
        announce = -1;
    }
    pthread_mutex_unlock(&p->lock);
    XL_INFO(xl, "child %s is %s (%d of %d up, %d needed)", from->name, up ? "up" : "down",
            bfs_mask_count(mask), p->n, p->k);
    if (announce)
        bfs_xl_notify_parents(xl, announce > 0 ? BFS_EV_CHILD_UP : BFS_EV_CHILD_DOWN, NULL);
    return 0;
}

static char *ec_dump(struct bfs_xl *xl)
{
    struct ec_priv *p = ec_priv(xl);
    char *s = NULL;
    pthread_mutex_lock(&p->lock);
    uint32_t reported = p->reported;
    pthread_mutex_unlock(&p->lock);
    int n = asprintf(&s,
                     "{\"name\":\"%s\",\"children\":%d,\"redundancy\":%d,\"chunk\":%" PRIu64
                     ",\"up\":%u,\"reported\":%u,\"quorum\":%d,\"generation\":%" PRIu64
                     ",\"transactions\":%" PRIu64 ",\"rmw\":%" PRIu64 ",\"decodes\":%" PRIu64
                     ",\"heals_done\":%" PRIu64 ",\"heals_failed\":%" PRIu64
                     ",\"heals_queued\":%zu,\"lookups\":%" PRIu64
                     ",\"lookups_early\":%" PRIu64 ",\"lookup_replies_waited\":%" PRIu64
                     ",\"lookup_tail_us\":%" PRIu64 ",\"writes_lent\":%" PRIu64
                     ",\"writes_copied\":%" PRIu64 "}",
                     xl->name, p->n, p->r, p->chunk, ec_up(p), reported, ec_quorum(p),
                     __atomic_load_n(&p->gen, __ATOMIC_RELAXED),
                     __atomic_load_n(&p->n_txn, __ATOMIC_RELAXED),
                     __atomic_load_n(&p->n_rmw, __ATOMIC_RELAXED),
                     __atomic_load_n(&p->n_decode, __ATOMIC_RELAXED),
                     __atomic_load_n(&p->n_heal_ok, __ATOMIC_RELAXED),
                     __atomic_load_n(&p->n_heal_fail, __ATOMIC_RELAXED),
                     bfs_healq_queued(p->healq),
                     __atomic_load_n(&p->n_lookup, __ATOMIC_RELAXED),
                     __atomic_load_n(&p->n_lookup_early, __ATOMIC_RELAXED),
                     __atomic_load_n(&p->n_lookup_waited, __ATOMIC_RELAXED),
                     __atomic_load_n(&p->n_lookup_tail_ns, __ATOMIC_RELAXED) / 1000,
                     __atomic_load_n(&p->n_wlent, __ATOMIC_RELAXED),
                     __atomic_load_n(&p->n_wcopied, __ATOMIC_RELAXED));
    return n < 0 ? NULL : s;
}

static const struct bfs_fops ec_fops = {
    .lookup = ec_lookup,
    .stat = ec_stat,
    .fstat = ec_fstat,
    .access = ec_access,
    .readlink = ec_readlink,
    .mknod = ec_mknod,
    .mkdir = ec_mkdir,
    .unlink = ec_unlink,
    .rmdir = ec_rmdir,
    .symlink = ec_symlink,
    .rename = ec_rename,
    .link = ec_link,
    .truncate = ec_truncate,
    .ftruncate = ec_ftruncate,
    .open = ec_open,
    .create = ec_create,
    .read = ec_read,
    .write = ec_write,
    .flush = ec_flush,
    .fsync = ec_fsync,
    .opendir = ec_opendir,
    .readdir = ec_readdir,
    .fsyncdir = ec_fsyncdir,
    .statfs = ec_statfs,
    .setxattr = ec_setxattr,
    .fsetxattr = ec_fsetxattr,
    .getxattr = ec_getxattr,
    .fgetxattr = ec_fgetxattr,
    .removexattr = ec_removexattr,
    .fremovexattr = ec_fremovexattr,
    .lk = ec_lk,
    .inodelk = ec_inodelk,
    .finodelk = ec_finodelk,
    .entrylk = ec_entrylk,
    .fentrylk = ec_fentrylk,
    .xattrop = ec_xattrop,
    .fxattrop = ec_fxattrop,
    .setattr = ec_setattr,
    .fsetattr = ec_fsetattr,
    .fallocate = ec_fallocate,
    .discard = ec_discard,
    .zerofill = ec_zerofill,
    .seek = ec_seek,
    .lease = ec_lease,
    .copy_file_range = ec_copy_file_range,
};

BFS_XL_MODULE(.type = "cluster/disperse", .fops = &ec_fops, .options = ec_options,
              .init = ec_init, .fini = ec_fini, .reconfigure = ec_reconfigure,
              .notify = ec_notify, .release = ec_release, .releasedir = ec_release,
              .forget = ec_forget, .dump = ec_dump, .min_children = 2,
              .max_children = EC_MAX);
