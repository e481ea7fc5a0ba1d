/*
 * replicate.c — cluster/replicate: the module, its options, init/fini,
 * reconfigure, child up/down events and the statedump.
 *
 * N children hold full copies (docs/design/replicate.md). This file only
 * wires things: the fops are in replicate-{lookup,read,fd,write,entry}.c,
 * the shared transaction machinery in src/xlators/lib/, heals in
 * replicate-heal*.c.
 *
 * Events: a child's CHILD_UP/CHILD_DOWN updates the up mask (atomic, read
 * by every fop) and bumps the generation (inode contexts refresh before the
 * next read). We tell our parents CHILD_UP once quorum is met, or once
 * every child has reported and one is up; CHILD_DOWN when none is up.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "core/graph.h"
#include "replicate.h"

uint32_t afr_all(const struct afr_priv *p)
{
    return p->n >= 32 ? ~0u : (1u << p->n) - 1;
}

uint32_t afr_up(const struct afr_priv *p)
{
    return bfs_cluster_up(&p->cl);
}

uint32_t afr_data_mask(const struct afr_priv *p, uint32_t mask)
{
    return p->arbiter >= 0 ? mask & ~BFS_BIT(p->arbiter) : mask;
}

/* ---- options ---- */

static const char *const read_policies[] = {"first-up", "gfid-hash", "least-loaded", NULL};
static const char *const quorum_types[] = {"none", "auto", "fixed", NULL};
static const char *const fav_policies[] = {"none", "size", "mtime", "ctime", "majority", NULL};
static const char *const heal_algos[] = {"full", "diff", NULL};

#define CLIENT_OPT (BFS_OPT_F_CLIENT | BFS_OPT_F_SETTABLE | BFS_OPT_F_RECONF)

static const struct bfs_option_desc afr_options[] = {
    {.key = "arbiter-count", .type = BFS_OPT_INT, .def = "0", .min = 0, .max = 1,
     .description = "1: the last child is an arbiter (names and metadata, no file data)"},
    {.key = "cluster.read-policy", .type = BFS_OPT_ENUM, .def = "gfid-hash",
     .values = read_policies, .flags = CLIENT_OPT,
     .description = "which good copy serves reads: first-up, gfid-hash or least-loaded"},
    {.key = "cluster.quorum-type", .type = BFS_OPT_ENUM, .def = "auto", .values = quorum_types,
     .flags = CLIENT_OPT,
     .description = "children needed for changes (else EROFS): none, auto (a majority) "
                    "or fixed (cluster.quorum-count)"},
    {.key = "cluster.quorum-count", .type = BFS_OPT_INT, .def = "1", .min = 1,
     .max = AFR_MAX, .flags = CLIENT_OPT,
     .description = "children needed for changes with cluster.quorum-type fixed"},
    {.key = "cluster.quorum-reads", .type = BFS_OPT_BOOL, .def = "off", .flags = CLIENT_OPT,
     .description = "without quorum, refuse reads too (ENOTCONN): a minority's copies may "
                    "miss acknowledged writes"},
    {.key = "cluster.favorite-child-policy", .type = BFS_OPT_ENUM, .def = "none",
     .values = fav_policies, .flags = CLIENT_OPT,
     .description = "resolve split-brain automatically: none, size, mtime, ctime or majority"},
    {.key = "cluster.eager-lock", .type = BFS_OPT_BOOL, .def = "on", .flags = CLIENT_OPT,
     .description = "keep a file's lock and changelog between writes through one fd"},
    {.key = "cluster.entry-eager-lock", .type = BFS_OPT_BOOL, .def = "on", .flags = CLIENT_OPT,
     .description = "keep a directory's entry lock and changelog between the creates and "
                    "removals of names in it (with cluster.eager-lock and a post-op delay; "
                    "released when another client or a heal waits for it, and after 1 s at "
                    "most)"},
    {.key = "cluster.post-op-delay-ms", .type = BFS_OPT_INT, .def = "500", .min = 0,
     .max = 10000, .flags = CLIENT_OPT,
     .description = "how long an idle eager lock is kept before post-op and unlock"},
    {.key = "cluster.background-self-heal-count", .type = BFS_OPT_INT, .def = "8", .min = 0,
     .max = 1024, .flags = CLIENT_OPT,
     .description = "heals queued in the background at most; 0 heals in the foreground "
                    "(the access waits)"},
    {.key = "cluster.data-self-heal", .type = BFS_OPT_BOOL, .def = "on", .flags = CLIENT_OPT,
     .description = "heal file data on access"},
    {.key = "cluster.metadata-self-heal", .type = BFS_OPT_BOOL, .def = "on",
     .flags = CLIENT_OPT, .description = "heal mode, owner and xattrs on access"},
    {.key = "cluster.entry-self-heal", .type = BFS_OPT_BOOL, .def = "on", .flags = CLIENT_OPT,
     .description = "heal directory entries on access"},
    {.key = "cluster.heal-lock-timeout", .type = BFS_OPT_TIME, .def = "10", .min = 1,
     .max = 3600, .flags = CLIENT_OPT,
     .description = "how long a heal tries to take its lock while another holds it, "
                    "before it gives up until the next access (seconds)"},
    {.key = "cluster.data-self-heal-algorithm", .type = BFS_OPT_ENUM, .def = "diff",
     .values = heal_algos, .flags = CLIENT_OPT,
     .description = "full copies every block; diff reads the sink too and writes only "
                    "blocks that differ"},
    {.key = "cluster.lazy-open", .type = BFS_OPT_BOOL, .def = "on", .flags = CLIENT_OPT,
     .description = "an O_RDONLY open goes to the good copy that will serve its reads only; "
                    "the others are opened when the fd needs them (a read failing over, a "
                    "lock, fsync, a change through it)"},
    {.key = "cluster.inode-memory", .type = BFS_OPT_INT, .def = "65536", .min = 0,
     .max = 16777216, .flags = CLIENT_OPT,
     .description = "files whose good copies are remembered after the mount forgot them "
                    "(until a brick comes or goes, or sends an invalidation of the file), so "
                    "that reads need no refresh; about 48 bytes each; 0: off"},
    {.key = NULL},
};

static int enum_index(const char *const *values, const char *v)
{
    for (int i = 0; v && values[i]; i++)
        if (strcmp(values[i], v) == 0)
            return i;
    return 0;
}

/* The value of key: from `over` (a reconfigure) if there, else in force. */
static const char *opt(struct bfs_xl *xl, const struct bfs_dict *over, const char *key)
{
    const char *v;
    if (over && bfs_dict_get_str(over, key, &v) == 0)
        return v;
    return bfs_xl_opt_str(xl, key);
}

static void apply_options(struct bfs_xl *xl, const struct bfs_dict *over)
{
    struct afr_priv *p = afr_priv(xl);
    bool b;
    int64_t v;
    enum bfs_quorum_type q = BFS_QUORUM_AUTO;
    (void)bfs_quorum_parse(opt(xl, over, "cluster.quorum-type"), &q);
    __atomic_store_n(&p->cl.qtype, (int)q, __ATOMIC_RELAXED);
    v = 1;
    (void)bfs_parse_int(opt(xl, over, "cluster.quorum-count"), &v);
    __atomic_store_n(&p->cl.qcount, (int)v, __ATOMIC_RELAXED);
    b = false;
    (void)bfs_parse_bool(opt(xl, over, "cluster.quorum-reads"), &b);
    __atomic_store_n(&p->quorum_reads, b, __ATOMIC_RELAXED);
    b = true;
    (void)bfs_parse_bool(opt(xl, over, "cluster.eager-lock"), &b);
    __atomic_store_n(&p->cl.eager, b, __ATOMIC_RELAXED);
    b = true;
    (void)bfs_parse_bool(opt(xl, over, "cluster.entry-eager-lock"), &b);
    __atomic_store_n(&p->eager_entry, b, __ATOMIC_RELAXED);
    v = 500;
    (void)bfs_parse_int(opt(xl, over, "cluster.post-op-delay-ms"), &v);
    __atomic_store_n(&p->cl.delay_ms, (uint64_t)v, __ATOMIC_RELAXED);
    __atomic_store_n(&p->read_policy,
                     enum_index(read_policies, opt(xl, over, "cluster.read-policy")),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&p->fav_policy,
                     enum_index(fav_policies, opt(xl, over, "cluster.favorite-child-policy")),
                     __ATOMIC_RELAXED);
    v = 10;
    (void)bfs_parse_int(opt(xl, over, "cluster.heal-lock-timeout"), &v);
    __atomic_store_n(&p->heal_lock_ms, (uint64_t)v * 1000, __ATOMIC_RELAXED);
    v = 8;
    (void)bfs_parse_int(opt(xl, over, "cluster.background-self-heal-count"), &v);
    __atomic_store_n(&p->heal_count, (int)v, __ATOMIC_RELAXED);
    static const char *const heal_keys[AFR_NTYPES] = {
        "cluster.data-self-heal", "cluster.metadata-self-heal", "cluster.entry-self-heal"};
    for (int t = 0; t < AFR_NTYPES; t++) {
        b = true;
        (void)bfs_parse_bool(opt(xl, over, heal_keys[t]), &b);
        __atomic_store_n(&p->heal_on[t], b, __ATOMIC_RELAXED);
    }
    b = true;
    (void)bfs_parse_bool(opt(xl, over, "cluster.lazy-open"), &b);
    __atomic_store_n(&p->lazy_open, b, __ATOMIC_RELAXED);
    v = 65536;
    (void)bfs_parse_int(opt(xl, over, "cluster.inode-memory"), &v);
    afr_mem_resize(p, (size_t)v);
    __atomic_store_n(&p->heal_diff,
                     enum_index(heal_algos, opt(xl, over, "cluster.data-self-heal-algorithm")) ==
                         1,
                     __ATOMIC_RELAXED);
}

/* ---- init / fini ---- */

static int init_names(struct afr_priv *p)
{
    size_t len = 1;
    for (int i = 0; i < p->n; i++) {
        const char *name = p->xl->children[i]->name;
        if (strcmp(name, "dirty") == 0 || strchr(name, ',')) {
            XL_ERR(p->xl, "a child may not be named '%s' (its pending key would clash)", name);
            return -EINVAL;
        }
        if (asprintf(&p->keys[i], AFR_KEY_PREFIX "%s", name) < 0) {
            p->keys[i] = NULL;
            return -ENOMEM;
        }
        len += strlen(p->keys[i]) + 1;
    }
    len += sizeof(AFR_DIRTY_KEY);
    if (!(p->xattr_req = calloc(1, len)))
        return -ENOMEM;
    for (int i = 0; i < p->n; i++) {
        strcat(p->xattr_req, p->keys[i]);
        strcat(p->xattr_req, ",");
    }
    strcat(p->xattr_req, AFR_DIRTY_KEY);
    for (int t = 0; t < BFS_TXN_NTYPES; t++) {
        char *d = NULL;
        if (asprintf(&d, "%s%s", p->xl->name, t == BFS_TXN_METADATA ? ".meta" : "") < 0)
            return -ENOMEM;
        p->cl.domain[t] = d;
    }
    return 0;
}

static void free_priv(struct afr_priv *p)
{
    for (int i = 0; i < AFR_MAX; i++)
        free(p->keys[i]);
    for (int t = 0; t < BFS_TXN_NTYPES; t++)
        free((char *)p->cl.domain[t]);
    free(p->xattr_req);
    afr_mem_fini(p);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static int afr_init(struct bfs_xl *xl)
{
    if (xl->nchildren < 2 || xl->nchildren > AFR_MAX) {
        XL_ERR(xl, "replicate needs 2 to %d subvolumes, not %d", AFR_MAX, xl->nchildren);
        return -EINVAL;
    }
    int arbiters = (int)bfs_xl_opt_int(xl, "arbiter-count");
    if (arbiters && xl->nchildren < 3) {
        XL_ERR(xl, "an arbiter needs at least 3 subvolumes (replica 3 arbiter 1)");
        return -EINVAL;
    }
    struct afr_priv *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    pthread_mutex_init(&p->lock, NULL);
    p->xl = xl;
    p->n = xl->nchildren;
    p->arbiter = arbiters ? p->n - 1 : -1;
    p->cl.xl = xl;
    p->cl.n = p->n;
    p->cl.cl = &afr_changelog_ops;
    p->cl.cl_arg = p;
    p->cl.preop_in_fop = true;
    p->cl.loop = xl->graph && xl->graph->proc ? xl->graph->proc->loop : NULL;
    bfs_cluster_init_timers(&p->cl);
    xl->private = p;
    int rc = init_names(p);
    if (rc == 0)
        rc = afr_ctx_init(p);
    if (rc == 0)
        rc = afr_mem_init(p, 0); /* sized by apply_options */
    if (rc == 0) {
        apply_options(xl, NULL);
        rc = afr_heal_start(p);
    }
    if (rc < 0) {
        xl->private = NULL;
        free_priv(p);
        return rc;
    }
    if (!p->cl.loop)
        XL_WARN(xl, "no event loop: delayed post-op is off");
    return 0;
}

static void afr_fini(struct bfs_xl *xl)
{
    struct afr_priv *p = afr_priv(xl);
    if (!p)
        return;
    afr_heal_stop(p);
    bfs_txn_timers_quiesce(&p->cl);
    xl->private = NULL;
    free_priv(p);
}

static int afr_reconfigure(struct bfs_xl *xl, struct bfs_dict *options)
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

/* The graph goes away: heals stop, held eager locks are released and the
 * transactions still finishing behind their answers end, before the
 * children disconnect. */
static void parent_down(struct afr_priv *p)
{
    afr_heal_stop(p);
    if (p->cl.loop && bfs_loop_on_loop_thread(p->cl.loop)) {
        XL_WARN(p->xl, "going down on the event loop thread: not waiting for transactions");
        afr_recent_drop(p, false);
        return;
    }
    (void)bfs_txn_quiesce(&p->cl, 30000);
    afr_recent_drop(p, false); /* before the graph frees its inodes */
}

static int afr_notify(struct bfs_xl *xl, enum bfs_event ev, struct bfs_xl *from, void *data)
{
    struct afr_priv *p = afr_priv(xl);
    if (p && ev == BFS_EV_PARENT_DOWN)
        parent_down(p);
    if (p && ev == BFS_EV_UPCALL && data && bfs_txn_contention(&p->cl, data))
        return 0; /* a lock contention notice: ends our eager lock (lib/txn-contend.c) */
    if (p && ev == BFS_EV_UPCALL && data &&
        ((const struct bfs_upcall *)data)->kind == BFS_UPCALL_INODE)
        afr_mem_invalidate(p, &((const struct bfs_upcall *)data)->gfid); /* then passed up */
    if (p && ev == BFS_EV_PARENT_UP)
        afr_recent_drop(p, true);
    if (p && ev == BFS_EV_PARENT_UP && !p->healq && afr_heal_start(p) < 0)
        XL_ERR(xl, "cannot start the heal thread: heals on access are off");
    int i = from ? child_index(xl, from) : -1;
    if ((ev != BFS_EV_CHILD_UP && ev != BFS_EV_CHILD_DOWN) || i < 0 || !p)
        return bfs_xl_notify_default(xl, ev, from, data);

    bool up = ev == BFS_EV_CHILD_UP;
    int announce = 0; /* 1 up, -1 down */
    struct bfs_gfid held[AFR_LEFT];
    size_t nheld = up ? 0 : bfs_txn_held_objects(&p->cl, BFS_TXN_ENTRY, held, AFR_LEFT);
    pthread_mutex_lock(&p->lock);
    for (size_t k = 0; k < nheld && p->nleft[i] < AFR_LEFT; k++)
        p->left[i][p->nleft[i]++] = held[k];
    int nleft = up ? p->nleft[i] : 0;
    if (up) {
        memcpy(held, p->left[i], (size_t)nleft * sizeof(held[0]));
        p->nleft[i] = 0;
    }
    uint32_t mask = afr_up(p);
    mask = up ? mask | BFS_BIT(i) : mask & ~BFS_BIT(i);
    __atomic_store_n(&p->cl.up, mask, __ATOMIC_RELEASE);
    if (!up) /* the next connection may reach another brick */
        __atomic_and_fetch(&p->cl.piggy, ~BFS_BIT(i), __ATOMIC_ACQ_REL);
    __atomic_add_fetch(&p->gen, 1, __ATOMIC_ACQ_REL);
    if (!up)
        __atomic_or_fetch(&p->been_down, BFS_BIT(i), __ATOMIC_ACQ_REL);
    p->reported |= BFS_BIT(i);
    bool ready = bfs_cluster_quorum(&p->cl, mask) ||
                 (p->reported == afr_all(p) && mask != 0);
    if (!p->announced_up && ready) {
        p->announced_up = true;
        announce = 1;
    } else if (p->announced_up && mask == 0) {
        p->announced_up = false;
        announce = -1;
    }
    pthread_mutex_unlock(&p->lock);
    XL_INFO(xl, "child %s is %s (%d of %d up)", from->name, up ? "up" : "down",
            bfs_mask_count(mask), p->n);
    /* entry windows end: their set was fixed when acquired (a returning
     * child would stay left out, a lost one be the only one tried) */
    bfs_txn_end_windows(&p->cl, BFS_TXN_ENTRY);
    for (int k = 0; k < nleft; k++)
        afr_heal_left(p, &held[k]);
    if (announce)
        bfs_xl_notify_parents(xl, announce > 0 ? BFS_EV_CHILD_UP : BFS_EV_CHILD_DOWN, NULL);
    return 0;
}

/* ---- statedump ---- */

static char *afr_dump(struct bfs_xl *xl)
{
    struct afr_priv *p = afr_priv(xl);
    char *s = NULL;
    uint64_t mem[3];
    afr_mem_stats(p, mem);
    int n = asprintf(&s,
                     "{\"name\":\"%s\",\"children\":%d,\"arbiter\":%d,\"up\":%u,\"reported\":%u,"
                     "\"quorum\":\"%s\",\"generation\":%" PRIu64 ",\"transactions\":%" PRIu64
                     ",\"read_failovers\":%" PRIu64 ",\"heals_done\":%" PRIu64
                     ",\"heals_failed\":%" PRIu64 ",\"split_brains\":%" PRIu64
                     ",\"heals_queued\":%zu,\"heal_blocks_written\":%" PRIu64
                     ",\"heal_blocks_summed\":%" PRIu64 ",\"memory_saved\":%" PRIu64
                     ",\"memory_seeded\":%" PRIu64 ",\"memory_dropped\":%" PRIu64
                     ",\"writes_lent\":%" PRIu64 ",\"writes_copied\":%" PRIu64 "}",
                     xl->name, p->n, p->arbiter, afr_up(p),
                     __atomic_load_n(&p->reported, __ATOMIC_RELAXED),
                     bfs_quorum_name(__atomic_load_n(&p->cl.qtype, __ATOMIC_RELAXED)),
                     __atomic_load_n(&p->gen, __ATOMIC_RELAXED),
                     __atomic_load_n(&p->n_txn, __ATOMIC_RELAXED),
                     __atomic_load_n(&p->n_read_failover, __ATOMIC_RELAXED),
                     __atomic_load_n(&p->n_heal_ok, __ATOMIC_RELAXED),
                     __atomic_load_n(&p->n_heal_fail, __ATOMIC_RELAXED),
                     __atomic_load_n(&p->n_split, __ATOMIC_RELAXED), afr_heal_queued(p),
                     __atomic_load_n(&p->n_heal_blocks, __ATOMIC_RELAXED),
                     __atomic_load_n(&p->n_heal_sum_blocks, __ATOMIC_RELAXED), mem[0], mem[1],
                     mem[2], __atomic_load_n(&p->n_write_lent, __ATOMIC_RELAXED),
                     __atomic_load_n(&p->n_write_copied, __ATOMIC_RELAXED));
    return n < 0 ? NULL : s;
}

static const struct bfs_fops afr_fops = {
    .lookup = afr_lookup,
    .stat = afr_stat,
    .fstat = afr_fstat,
    .access = afr_access,
    .readlink = afr_readlink,
    .mknod = afr_mknod,
    .mkdir = afr_mkdir,
    .unlink = afr_unlink,
    .rmdir = afr_rmdir,
    .symlink = afr_symlink,
    .rename = afr_rename,
    .link = afr_link,
    .truncate = afr_truncate,
    .ftruncate = afr_ftruncate,
    .open = afr_open,
    .create = afr_create,
    .read = afr_read,
    .write = afr_write,
    .flush = afr_flush,
    .fsync = afr_fsync,
    .opendir = afr_opendir,
    .readdir = afr_readdir,
    .fsyncdir = afr_fsyncdir,
    .statfs = afr_statfs,
    .setxattr = afr_setxattr,
    .fsetxattr = afr_fsetxattr,
    .getxattr = afr_getxattr,
    .fgetxattr = afr_fgetxattr,
    .removexattr = afr_removexattr,
    .fremovexattr = afr_fremovexattr,
    .lk = afr_lk,
    .inodelk = afr_inodelk,
    .finodelk = afr_finodelk,
    .entrylk = afr_entrylk,
    .fentrylk = afr_fentrylk,
    .xattrop = afr_xattrop,
    .fxattrop = afr_fxattrop,
    .setattr = afr_setattr,
    .fsetattr = afr_fsetattr,
    .fallocate = afr_fallocate,
    .discard = afr_discard,
    .zerofill = afr_zerofill,
    .seek = afr_seek,
    .lease = afr_lease,
    .copy_file_range = afr_copy_file_range,
};

BFS_XL_MODULE(.type = "cluster/replicate", .fops = &afr_fops, .options = afr_options,
              .init = afr_init, .fini = afr_fini, .reconfigure = afr_reconfigure,
              .notify = afr_notify, .release = afr_release, .releasedir = afr_release,
              .forget = afr_forget, .dump = afr_dump, .min_children = 2,
              .max_children = AFR_MAX);
