/*
 * test_store_local.c — the store interface over its local backend
 * (src/mgmt/store.c, store-local.c): the store contract shared with etcd
 * (store-contract.h: get/put/CAS/delete/list, revisions, watches, reopen),
 * then what is the local backend's own: damaged files, and crash consistency (a writer killed
 * with SIGKILL at random moments, then the store reopened and checked).
 *
 * The store is part of brickfsd, not of libbrickfs, so its two sources are
 * compiled into this test directly.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mgmt/store-etcd.c"
#include "mgmt/store-local.c"
#include "mgmt/store.c"
#include "store-contract.h"
#include "tap.h"

static char dir[256];

static struct bfs_store *open_store(void)
{
    char spec[300], err[256] = "";
    struct bfs_store *s = NULL;
    snprintf(spec, sizeof(spec), "local:%s/store", dir);
    int rc = bfs_store_open(spec, &s, err, sizeof(err));
    if (rc < 0)
        printf("# open: %s\n", err);
    return s;
}

/* What only a fresh local store promises: revisions start at 0. */
static void test_fresh(void)
{
    struct bfs_store *s = open_store();
    ok(s != NULL, "a fresh store opens");
    is_int(bfs_store_revision(s), 0, "a fresh store is at revision 0");
    uint64_t r1 = 0;
    is_int(bfs_store_put(s, "volumes/a", "one", 3, &r1), 0, "put");
    is_int(r1, 1, "first write is revision 1");
    is_str(bfs_store_scheme(s), "local", "scheme");
    is_int(bfs_store_put_lease(s, "alive/x", "1", 1, NULL), -ENOTSUP, "no leases in local");
    bfs_store_delete(s, "volumes/a", BFS_STORE_ANY, NULL);
    bfs_store_close(s);
}

static void test_damage(void)
{
    char path[400], spec[300], err[256] = "";
    struct bfs_store *s;
    /* a leftover temp file from a crash is ignored and removed */
    snprintf(path, sizeof(path), "%s/store/volumes%%2Fz.kv.tmp", dir);
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    ok(fd >= 0 && write(fd, "half", 4) == 4, "plant a half-written temp file");
    close(fd);
    s = open_store();
    ok(s != NULL, "store opens with a stray temp file");
    ok(access(path, F_OK) != 0, "the temp file was removed");
    struct bfs_store_kv kv;
    is_int(bfs_store_get(s, "volumes/z", &kv), -ENOENT, "and it is not a key");
    bfs_store_close(s);

    /* a truncated key file makes open fail, naming the file */
    snprintf(path, sizeof(path), "%s/store/volumes%%2Fa.kv", dir);
    ok(truncate(path, 20) == 0, "damage a key file");
    snprintf(spec, sizeof(spec), "local:%s/store", dir);
    s = NULL;
    ok(bfs_store_open(spec, &s, err, sizeof(err)) < 0, "open refuses a damaged key file");
    ok(strstr(err, "volumes%2Fa.kv") != NULL, "the error names the file: %s", err);
    unlink(path);
}

/* The child writes keys k0..k9 over and over, each value "GEN:KEY:padding"
 * of varying size, and records nothing else: the parent kills it at a
 * random moment and checks what is on disk. */
static void crash_writer(void)
{
    struct bfs_store *s = open_store();
    if (!s)
        _exit(2);
    char key[16], val[9000];
    for (unsigned gen = 0;; gen++) {
        snprintf(key, sizeof(key), "k%u", gen % 10);
        int n = snprintf(val, sizeof(val), "%u:%s:", gen, key);
        size_t len = (size_t)n + (gen * 7919) % 8000;
        memset(val + n, 'a' + gen % 26, len - (size_t)n);
        if (gen % 7 == 3)
            bfs_store_delete(s, key, BFS_STORE_ANY, NULL);
        else if (bfs_store_put(s, key, val, len, NULL) < 0)
            _exit(3);
    }
}

static int check_consistent(struct bfs_store *s, char *why, size_t whylen)
{
    struct bfs_store_kv *kvs;
    size_t n;
    if (bfs_store_list(s, "k", &kvs, &n) < 0)
        return snprintf(why, whylen, "list failed"), 0;
    uint64_t rev = bfs_store_revision(s);
    int good = 1;
    for (size_t i = 0; i < n && good; i++) {
        unsigned gen;
        char key[16];
        if (sscanf(kvs[i].value, "%u:%15[^:]:", &gen, key) != 2 || strcmp(key, kvs[i].key)) {
            snprintf(why, whylen, "key %s holds '%.20s'", kvs[i].key, kvs[i].value);
            good = 0;
            break;
        }
        int n0 = snprintf(NULL, 0, "%u:%s:", gen, key);
        size_t want = (size_t)n0 + (gen * 7919) % 8000;
        if (kvs[i].len != want || kvs[i].rev > rev) {
            snprintf(why, whylen, "key %s: len %zu want %zu, rev %llu store %llu", key,
                     kvs[i].len, want, (unsigned long long)kvs[i].rev,
                     (unsigned long long)rev);
            good = 0;
        }
        for (size_t j = (size_t)n0; good && j < kvs[i].len; j++)
            if (kvs[i].value[j] != (char)('a' + gen % 26)) {
                snprintf(why, whylen, "key %s: torn value at byte %zu", key, j);
                good = 0;
            }
    }
    bfs_store_kvs_free(kvs, n);
    return good;
}

static void test_crash(void)
{
    int rounds = 12, good = 0;
    uint64_t prev = 0;
    int monotonic = 1;
    char why[256] = "";
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    for (int i = 0; i < rounds; i++) {
        pid_t pid = fork();
        if (pid == 0)
            crash_writer();
        struct timespec ts = {0, (5 + rand() % 60) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        struct bfs_store *s = open_store();
        if (!s) {
            snprintf(why, sizeof(why), "reopen failed in round %d", i);
            break;
        }
        uint64_t r = bfs_store_revision(s);
        if (r < prev)
            monotonic = 0;
        prev = r;
        if (check_consistent(s, why, sizeof(why)))
            good++;
        bfs_store_close(s);
    }
    is_int(good, rounds, "after SIGKILL at random moments every key is whole %s", why);
    ok(monotonic, "the revision never goes back across crashes");
    ok(prev > 0, "the writer got some writes done (revision %llu)", (unsigned long long)prev);
}

int main(void)
{
    plan_lazy();
    snprintf(dir, sizeof(dir), "/tmp/bfs-store-test.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_fresh();
    store_contract();
    test_damage();
    test_crash();
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", dir);
    return done_testing();
}
