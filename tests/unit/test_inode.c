/*
 * test_inode.c — the inode table and fds (inode.h): lookup/creation, refs
 * and nlookup, forget on the translators with context, ctx slots, fd
 * release/releasedir. The graph is built by hand: three fake translators
 * whose module records every forget/release call.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../lib/tap.h"
#include "core/graph.h"
#include "core/inode.h"
#include "core/xlator.h"

#define NXL 3

static int forgets[NXL], releases[NXL], releasedirs[NXL];
static uint64_t forget_ctx[NXL];
static struct bfs_gfid last_forgotten;

/* forget may run on any thread that drops the last reference. */
static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;

static void rec_forget(struct bfs_xl *xl, struct bfs_inode *inode)
{
    uint64_t v = 0;
    pthread_mutex_lock(&rec_lock);
    forgets[xl->index]++;
    /* The context is still readable while forget runs. */
    if (bfs_inode_ctx_get(inode, xl, &v) == 0)
        forget_ctx[xl->index] = v;
    last_forgotten = inode->gfid;
    pthread_mutex_unlock(&rec_lock);
}

static void rec_release(struct bfs_xl *xl, struct bfs_fd *fd)
{
    releases[xl->index]++;
}

static void rec_releasedir(struct bfs_xl *xl, struct bfs_fd *fd)
{
    releasedirs[xl->index]++;
}

static const struct bfs_xl_module rec_mod = {
    .abi = BFS_XL_ABI,
    .type = "test/recorder",
    .forget = rec_forget,
    .release = rec_release,
    .releasedir = rec_releasedir,
};
static const struct bfs_xl_module bare_mod = {.abi = BFS_XL_ABI, .type = "test/bare"};

static struct bfs_xl xls[NXL];
static struct bfs_xl *xlp[NXL];
static struct bfs_graph graph;

static void setup_graph(void)
{
    static char names[NXL][8] = {"bottom", "middle", "top"};
    for (int i = 0; i < NXL; i++) {
        xls[i].name = names[i];
        xls[i].index = i;
        /* the middle one has no forget/release: must simply be skipped */
        xls[i].mod = i == 1 ? &bare_mod : &rec_mod;
        xls[i].graph = &graph;
        xlp[i] = &xls[i];
    }
    graph.xls = xlp;
    graph.nxls = NXL;
    graph.top = &xls[NXL - 1];
}

static void reset_counts(void)
{
    memset(forgets, 0, sizeof(forgets));
    memset(releases, 0, sizeof(releases));
    memset(releasedirs, 0, sizeof(releasedirs));
    memset(forget_ctx, 0, sizeof(forget_ctx));
}

static void test_root_and_find(void)
{
    struct bfs_itable *t = bfs_itable_new(&graph, NXL);
    struct bfs_gfid g;

    ok(t != NULL, "table created");
    struct bfs_inode *root = bfs_itable_root(t);
    ok(root && bfs_gfid_is_root(&root->gfid), "root present with gfid ...01");
    ok(S_ISDIR(root->type), "root is a directory");
    ok(bfs_inode_find(t, &bfs_gfid_root) == root, "find root");
    bfs_inode_unref(root);
    bfs_inode_unref(root);
    ok(bfs_inode_find(t, &bfs_gfid_root) == root, "root stays at refs 0");
    bfs_inode_forget(root, 100);
    ok(bfs_inode_find(t, &bfs_gfid_root) == root, "root stays after forget");
    bfs_inode_unref(root);
    is_int(forgets[0] + forgets[2], 0, "root never forgotten while the table lives");

    bfs_gfid_generate(&g);
    ok(bfs_inode_find(t, &g) == NULL, "unknown gfid not found");
    struct bfs_inode *i = bfs_inode_get(t, &g, S_IFREG | 0644);
    ok(i && bfs_gfid_eq(&i->gfid, &g), "get creates");
    is_int(i->type, S_IFREG, "type keeps only S_IFMT bits");
    ok(bfs_inode_get(t, &g, S_IFDIR) == i, "get again returns the same inode");
    is_int(i->type, S_IFREG, "known type not overwritten");
    ok(bfs_inode_find(t, &g) == i, "find after get");
    ok(bfs_inode_get(t, &bfs_gfid_root, 0) == root, "get of root gfid returns root");
    bfs_inode_unref(root);
    ok(bfs_inode_get(t, &bfs_gfid_null, 0) == NULL, "null gfid refused");
    bfs_inode_unref(i);
    bfs_inode_unref(i);
    bfs_inode_unref(i);
    ok(bfs_inode_find(t, &g) == NULL, "inode gone after last unref (no lookups)");

    struct bfs_gfid g2;
    bfs_gfid_generate(&g2);
    struct bfs_inode *u = bfs_inode_get(t, &g2, 0);
    is_int(u->type, 0, "type unknown");
    bfs_inode_unref(bfs_inode_get(t, &g2, S_IFLNK));
    is_int(u->type, S_IFLNK, "type filled in by a later get");
    bfs_inode_unref(u);
    bfs_itable_free(t);
}

static void test_refs_nlookup(void)
{
    struct bfs_itable *t = bfs_itable_new(&graph, NXL);
    struct bfs_gfid g;
    reset_counts();

    bfs_gfid_generate(&g);
    struct bfs_inode *i = bfs_inode_get(t, &g, S_IFREG);
    bfs_inode_ctx_set(i, &xls[0], 111);
    bfs_inode_ctx_set(i, &xls[1], 222);
    bfs_inode_ctx_set(i, &xls[2], 333);
    bfs_inode_lookup(i);
    bfs_inode_lookup(i);
    bfs_inode_unref(i);
    ok(bfs_inode_find(t, &g) == i, "kept while nlookup > 0 even with no refs");
    bfs_inode_unref(i);
    bfs_inode_forget(i, 1);
    is_int(forgets[0], 0, "no forget while nlookup is 1");
    i = bfs_inode_find(t, &g);
    bfs_inode_forget(i, 1);
    is_int(forgets[0], 0, "no forget while a ref is held");
    bfs_inode_unref(i);
    is_int(forgets[0], 1, "forget on bottom once both reach zero");
    is_int(forgets[2], 1, "forget on top");
    is_int(forgets[1], 0, "middle has no forget hook");
    is_int(forget_ctx[0], 111, "bottom's ctx readable in forget");
    is_int(forget_ctx[2], 333, "top's ctx readable in forget");
    ok(bfs_gfid_eq(&last_forgotten, &g), "forgot the right inode");
    ok(bfs_inode_find(t, &g) == NULL, "removed from the table");

    /* only translators with context are told */
    reset_counts();
    bfs_gfid_generate(&g);
    i = bfs_inode_get(t, &g, S_IFREG);
    bfs_inode_ctx_set(i, &xls[2], 0); /* 0 is a real value */
    bfs_inode_ctx_set(i, &xls[0], 5);
    uint64_t old = 0;
    is_int(bfs_inode_ctx_del(i, &xls[0], &old), 0, "ctx del");
    is_int(old, 5, "ctx del returns the old value");
    bfs_inode_forget(i, 10); /* more than looked up: clamps at 0 */
    bfs_inode_unref(i);
    ok(forgets[0] == 0 && forgets[2] == 1, "forget only where ctx is set (even to 0)");

    /* itable_free forgets everything left, referenced or not */
    reset_counts();
    bfs_gfid_generate(&g);
    i = bfs_inode_get(t, &g, S_IFREG);
    bfs_inode_ctx_set(i, &xls[0], 1);
    struct bfs_inode *root = bfs_itable_root(t);
    bfs_inode_ctx_set(root, &xls[2], 7);
    bfs_itable_free(t);
    ok(forgets[0] == 1 && forgets[2] == 1, "free forgets live inodes and root");
}

static void test_ctx(void)
{
    struct bfs_itable *t = bfs_itable_new(&graph, NXL);
    struct bfs_inode *root = bfs_itable_root(t);
    struct bfs_xl outsider = {.index = NXL, .mod = &rec_mod};
    uint64_t v;

    is_int(bfs_inode_ctx_get(root, &xls[1], &v), -ENOENT, "unset ctx");
    is_int(bfs_inode_ctx_set(root, &xls[1], 42), 0, "set ctx");
    v = 0;
    ok(bfs_inode_ctx_get(root, &xls[1], &v) == 0 && v == 42, "get ctx");
    is_int(bfs_inode_ctx_set(root, &xls[1], 43), 0, "overwrite ctx");
    ok(bfs_inode_ctx_get(root, &xls[1], &v) == 0 && v == 43, "overwritten");
    is_int(bfs_inode_ctx_get(root, &xls[0], &v), -ENOENT, "slots are separate");
    is_int(bfs_inode_ctx_del(root, &xls[1], NULL), 0, "del without old");
    is_int(bfs_inode_ctx_del(root, &xls[1], NULL), -ENOENT, "del again");
    is_int(bfs_inode_ctx_get(root, &xls[1], &v), -ENOENT, "gone");
    is_int(bfs_inode_ctx_set(root, &outsider, 1), -EINVAL, "index beyond slots refused");
    is_int(bfs_inode_ctx_get(root, &outsider, &v), -EINVAL, "get beyond slots refused");
    bfs_inode_unref(root);
    bfs_itable_free(t);

    /* many slots: bitmap spans several words */
    struct bfs_itable *big = bfs_itable_new(NULL, 130);
    root = bfs_itable_root(big);
    struct bfs_xl x129 = {.index = 129}, x64 = {.index = 64}, x63 = {.index = 63};
    bfs_inode_ctx_set(root, &x129, 9);
    bfs_inode_ctx_set(root, &x63, 6);
    ok(bfs_inode_ctx_get(root, &x129, &v) == 0 && v == 9, "slot 129");
    is_int(bfs_inode_ctx_get(root, &x64, &v), -ENOENT, "slot 64 unset");
    ok(bfs_inode_ctx_get(root, &x63, &v) == 0 && v == 6, "slot 63");
    bfs_inode_unref(root);
    bfs_itable_free(big);
}

static void test_fd(void)
{
    struct bfs_itable *t = bfs_itable_new(&graph, NXL);
    struct bfs_gfid g;
    uint64_t v;
    reset_counts();

    bfs_gfid_generate(&g);
    struct bfs_inode *i = bfs_inode_get(t, &g, S_IFREG);
    struct bfs_fd *fd = bfs_fd_new(&graph, i, 02, 0);
    ok(fd && fd->inode == i && fd->flags == 02 && !fd->is_dir, "fd created");
    bfs_inode_unref(i);
    ok(bfs_inode_find(t, &g) == i, "fd keeps its inode alive");
    bfs_inode_unref(i);

    is_int(bfs_fd_ctx_get(fd, &xls[0], &v), -ENOENT, "fd ctx unset");
    is_int(bfs_fd_ctx_set(fd, &xls[0], 10), 0, "fd ctx set bottom");
    is_int(bfs_fd_ctx_set(fd, &xls[1], 11), 0, "fd ctx set middle (no hook)");
    ok(bfs_fd_ctx_get(fd, &xls[0], &v) == 0 && v == 10, "fd ctx get");
    is_int(bfs_fd_ctx_set(fd, &xls[2], 12), 0, "fd ctx set top");
    is_int(bfs_fd_ctx_del(fd, &xls[2], &v), 0, "fd ctx del top");
    is_int(v, 12, "old value");
    is_int(bfs_fd_ctx_del(fd, &xls[2], &v), -ENOENT, "fd ctx del again");

    ok(bfs_fd_ref(fd) == fd, "fd ref");
    bfs_fd_unref(fd);
    is_int(releases[0], 0, "no release while a ref remains");
    bfs_fd_unref(fd);
    is_int(releases[0], 1, "release on the translator with ctx");
    is_int(releases[2], 0, "no release where ctx was deleted");
    is_int(releasedirs[0], 0, "release, not releasedir, for a file");
    ok(bfs_inode_find(t, &g) == NULL, "inode dropped with the last fd");

    reset_counts();
    struct bfs_inode *root = bfs_itable_root(t);
    struct bfs_fd *dfd = bfs_fd_new(&graph, root, 0, 1);
    bfs_fd_ctx_set(dfd, &xls[0], 1);
    bfs_fd_ctx_set(dfd, &xls[2], 2);
    bfs_fd_unref(dfd);
    ok(releasedirs[0] == 1 && releasedirs[2] == 1 && releases[0] == 0,
       "releasedir for a directory fd");
    bfs_inode_unref(root);

    struct bfs_fd *anon = bfs_fd_new(&graph, NULL, 0, 0);
    ok(anon && anon->inode == NULL, "anonymous fd");
    is_int(bfs_fd_ctx_set(anon, &xls[2], 3), 0, "anon fd has slots from the graph");
    bfs_fd_unref(anon);
    is_int(releases[2], 1, "anon fd released");
    bfs_itable_free(t);
}

/* Many threads get/lookup/forget/unref the same few gfids concurrently. */
#define NTH 4
#define NGF 8
static struct bfs_gfid shared[NGF];
static struct bfs_itable *shared_t;

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(long)arg;
    for (int k = 0; k < 20000; k++) {
        struct bfs_inode *i = bfs_inode_get(shared_t, &shared[rand_r(&seed) % NGF], S_IFREG);
        bfs_inode_ctx_set(i, &xls[0], 1);
        if (rand_r(&seed) % 2) {
            bfs_inode_lookup(i);
            bfs_inode_forget(i, 1);
        }
        bfs_inode_unref(i);
    }
    return NULL;
}

static void test_threads(void)
{
    pthread_t th[NTH];
    reset_counts();
    shared_t = bfs_itable_new(&graph, NXL);
    for (int i = 0; i < NGF; i++)
        bfs_gfid_generate(&shared[i]);
    for (long i = 0; i < NTH; i++)
        pthread_create(&th[i], NULL, churn, (void *)i);
    for (int i = 0; i < NTH; i++)
        pthread_join(th[i], NULL);
    int gone = 1;
    for (int i = 0; i < NGF; i++)
        gone &= bfs_inode_find(shared_t, &shared[i]) == NULL;
    ok(gone, "after concurrent churn every inode is gone");
    ok(forgets[0] >= NGF, "each inode was forgotten at least once (%d)", forgets[0]);
    bfs_itable_free(shared_t);
}

static void test_many(void)
{
    struct bfs_itable *t = bfs_itable_new(NULL, 1);
    enum { N = 20000 };
    static struct bfs_gfid gs[N];
    int bad = 0;
    for (int k = 0; k < N; k++) {
        bfs_gfid_generate(&gs[k]);
        struct bfs_inode *i = bfs_inode_get(t, &gs[k], S_IFREG);
        bfs_inode_lookup(i);
        bfs_inode_unref(i);
    }
    for (int k = 0; k < N; k++) {
        struct bfs_inode *i = bfs_inode_find(t, &gs[k]);
        bad += !i || !bfs_gfid_eq(&i->gfid, &gs[k]);
        if (i)
            bfs_inode_unref(i);
    }
    is_int(bad, 0, "20000 inodes found after the table grew");
    for (int k = 0; k < N; k += 2) {
        struct bfs_inode *i = bfs_inode_find(t, &gs[k]);
        bfs_inode_forget(i, 1);
        bfs_inode_unref(i);
    }
    for (int k = 0; k < N; k++) {
        struct bfs_inode *i = bfs_inode_find(t, &gs[k]);
        bad += (k % 2 == 0) != (i == NULL);
        if (i)
            bfs_inode_unref(i);
    }
    is_int(bad, 0, "half forgotten, half kept");
    bfs_itable_free(t); /* frees the rest (ASan checks the leak) */
}

int main(void)
{
    plan_lazy();
    setup_graph();
    test_root_and_find();
    test_refs_nlookup();
    test_ctx();
    test_fd();
    test_threads();
    test_many();
    return done_testing();
}
