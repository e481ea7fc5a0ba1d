/*
 * test_types.c — GFIDs, iatt <-> stat, dirent lists, name checks (types.h).
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "core/types.h"

static void test_gfid_basics(void)
{
    struct bfs_gfid a, b;
    char s[BFS_GFID_STRLEN];

    ok(bfs_gfid_is_null(&bfs_gfid_null), "null gfid is null");
    ok(!bfs_gfid_is_root(&bfs_gfid_null), "null gfid is not root");
    ok(bfs_gfid_is_root(&bfs_gfid_root), "root gfid is root");
    is_str(bfs_gfid_fmt(&bfs_gfid_root, s), "00000000-0000-0000-0000-000000000001",
           "root formats canonically");
    is_str(bfs_gfid_fmt(&bfs_gfid_null, s), "00000000-0000-0000-0000-000000000000",
           "null formats canonically");

    bfs_gfid_generate(&a);
    bfs_gfid_generate(&b);
    ok(!bfs_gfid_eq(&a, &b), "two generated gfids differ");
    ok(!bfs_gfid_is_null(&a) && !bfs_gfid_is_root(&a), "generated gfid is neither null nor root");
    is_int(a.b[6] >> 4, 4, "generated gfid is a version 4 UUID");
    is_int(a.b[8] >> 6, 2, "generated gfid has the RFC 4122 variant");
    ok(bfs_gfid_eq(&a, &a), "gfid equals itself");
}

static void test_gfid_parse(void)
{
    struct bfs_gfid g, back;
    char s[BFS_GFID_STRLEN];

    is_int(bfs_gfid_parse("0123abcd-4567-89ef-0123-456789ABCDEF", &g), 0,
           "parse accepts mixed-case canonical form");
    is_int(g.b[0], 0x01, "first byte parsed");
    is_int(g.b[15], 0xef, "last byte parsed");
    is_str(bfs_gfid_fmt(&g, s), "0123abcd-4567-89ef-0123-456789abcdef", "formats lowercase");

    int good = 0;
    for (int i = 0; i < 100; i++) {
        bfs_gfid_generate(&g);
        bfs_gfid_fmt(&g, s);
        good += bfs_gfid_parse(s, &back) == 0 && bfs_gfid_eq(&g, &back) && strlen(s) == 36;
    }
    is_int(good, 100, "fmt/parse round-trips 100 random gfids");

    static const char *bad[] = {
        "",
        "0123abcd-4567-89ef-0123-456789abcde",   /* short */
        "0123abcd-4567-89ef-0123-456789abcdef0", /* long */
        "0123abcd04567-89ef-0123-456789abcdef",  /* no dash */
        "0123abcd-4567-89ef-0123-456789abcdeg",  /* bad hex */
        "0123abc-d4567-89ef-0123-456789abcdef",  /* dash misplaced */
        " 123abcd-4567-89ef-0123-456789abcdef",
        "0123abcd-4567-89ef-0123-456789abcd\nf",
    };
    struct bfs_gfid untouched = bfs_gfid_root;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        is_int(bfs_gfid_parse(bad[i], &untouched), -EINVAL, "parse rejects bad form %zu", i);
    ok(bfs_gfid_is_root(&untouched), "failed parses leave output untouched");
    is_int(bfs_gfid_parse(NULL, &g), -EINVAL, "parse rejects NULL");
}

static void test_gfid_ino(void)
{
    struct bfs_gfid g = bfs_gfid_null;

    is_int(bfs_gfid_to_ino(&bfs_gfid_root), 1, "root maps to inode 1");
    ok(bfs_gfid_to_ino(&bfs_gfid_null) > 1, "null gfid does not map to 0 or 1");
    /* halves equal -> fold is 0; halves differing only in the last bit -> 1 */
    memset(g.b, 0xab, 16);
    ok(bfs_gfid_to_ino(&g) > 1, "a fold of 0 is moved away from 0");
    g.b[15] ^= 1;
    ok(bfs_gfid_to_ino(&g) > 1, "a fold of 1 is moved away from 1");

    int stable = 1, distinct = 1, valid = 1;
    uint64_t prev = 0;
    for (int i = 0; i < 1000; i++) {
        struct bfs_gfid r, copy;
        bfs_gfid_generate(&r);
        copy = r;
        uint64_t ino = bfs_gfid_to_ino(&r);
        stable &= ino == bfs_gfid_to_ino(&copy);
        valid &= ino > 1;
        distinct &= ino != prev;
        prev = ino;
    }
    ok(stable, "inode number is a function of the gfid");
    ok(valid, "random gfids never map to 0 or 1");
    ok(distinct, "consecutive random gfids map to different inodes");

    /* A known value: documents the fold so a change of it is noticed. */
    bfs_gfid_parse("00000000-0000-0002-0000-000000000010", &g);
    is_int(bfs_gfid_to_ino(&g), 0x12, "fold is XOR of the two 64-bit halves");
}

/* Entry GFIDs: runs of 256 share the two bytes that name a brick's handle
 * folder (.brickfs/AB/CD); everything else stays random and distinct. */
static void test_gfid_entry_runs(void)
{
    enum { RUN = 256, N = RUN * 8 + 1 };
    static struct bfs_gfid g[N];
    bool valid = true, distinct = true;
    for (int i = 0; i < N; i++) {
        bfs_gfid_generate_entry(&g[i]);
        valid = valid && g[i].b[6] >> 4 == 4 && (g[i].b[8] & 0xc0) == 0x80 &&
                !bfs_gfid_is_null(&g[i]) && !bfs_gfid_is_root(&g[i]);
        if (i > 0 && memcmp(g[i].b + 2, g[i - 1].b + 2, 14) == 0)
            distinct = false;
    }
    ok(valid, "entry gfids are version 4 UUIDs, neither null nor root");
    ok(distinct, "the 14 bytes after the folder prefix differ between calls");
    /* Skip the (possibly partial) run this process was in, then every run
     * is 256 calls long; two runs that drew the same prefix (one chance in
     * 65,536 per run) look like one of 512, still a multiple of 256. */
    int start = 1;
    while (start < N && memcmp(g[start].b, g[start - 1].b, 2) == 0)
        start++;
    ok(start <= RUN, "a run ends within 256 calls (%d)", start);
    int runs = 0, len = 1;
    bool whole = true;
    for (int i = start + 1; i < N; i++) {
        if (memcmp(g[i].b, g[i - 1].b, 2) == 0) {
            len++;
            continue;
        }
        whole = whole && len % RUN == 0;
        runs++;
        len = 1;
    }
    ok(whole && runs >= 5, "runs of 256 calls share their first two bytes (%d runs seen)", runs);
}

static int gfid_cmp(const void *a, const void *b)
{
    return memcmp(a, b, sizeof(struct bfs_gfid));
}

/* Draws pre GFIDs, forks, and draws 8 more in both: how many of the
 * child's are among the parent's (-1 if the child failed). */
static int fork_shared(int pre)
{
    enum { K = 8 };
    struct bfs_gfid mine[K], theirs[K];
    for (int i = 0; i < pre; i++)
        bfs_gfid_generate(&mine[0]);
    int fds[2];
    if (pipe(fds) < 0)
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < K; i++)
            bfs_gfid_generate(&theirs[i]);
        ssize_t w = write(fds[1], theirs, sizeof(theirs));
        _exit(w == (ssize_t)sizeof(theirs) ? 0 : 1);
    }
    close(fds[1]);
    for (int i = 0; i < K; i++)
        bfs_gfid_generate(&mine[i]);
    ssize_t got = pid > 0 ? read(fds[0], theirs, sizeof(theirs)) : -1;
    close(fds[0]);
    int status = 0;
    if (pid > 0)
        waitpid(pid, &status, 0);
    if (got != (ssize_t)sizeof(theirs) || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    int same = 0;
    for (int i = 0; i < K; i++)
        for (int j = 0; j < K; j++)
            same += gfid_cmp(&mine[i], &theirs[j]) == 0;
    return same;
}

/* GFIDs come from a buffer of random bytes per thread (performance note
 * 44): every one handed out once, and a forked child does not hand out
 * what its parent's buffer still holds. */
static void test_gfid_pool(void)
{
    enum { N = 2000 };
    static struct bfs_gfid g[N];
    for (int i = 0; i < N; i++)
        bfs_gfid_generate(&g[i]);
    qsort(g, N, sizeof(g[0]), gfid_cmp);
    int dups = 0;
    for (int i = 1; i < N; i++)
        dups += gfid_cmp(&g[i - 1], &g[i]) == 0;
    is_int(dups, 0, "2,000 generated gfids are distinct");

    /* twice, one GFID apart: whatever the buffer held before, it holds
     * unused bytes at one of the two forks */
    int a = fork_shared(1), b = fork_shared(1);
    ok(a == 0 && b == 0, "a forked child's gfids are not its parent's next ones (%d, %d shared)",
       a, b);
}

static void test_iatt(void)
{
    struct stat st, back;
    struct bfs_iatt ia;

    memset(&st, 0, sizeof(st));
    st.st_ino = 1234;
    st.st_dev = 77;
    st.st_mode = S_IFREG | 0640;
    st.st_nlink = 3;
    st.st_uid = 1000;
    st.st_gid = 100;
    st.st_rdev = 5;
    st.st_size = 1 << 20;
    st.st_blocks = 2048;
    st.st_blksize = 4096;
    st.st_atim.tv_sec = 1700000000;
    st.st_atim.tv_nsec = 1;
    st.st_mtim.tv_sec = 1700000001;
    st.st_mtim.tv_nsec = 999999999;
    st.st_ctim.tv_sec = 1700000002;
    st.st_ctim.tv_nsec = 500;

    memset(&ia, 0, sizeof(ia));
    ia.gfid = bfs_gfid_root;
    bfs_iatt_from_stat(&ia, &st);
    ok(bfs_gfid_is_root(&ia.gfid), "from_stat leaves gfid alone");
    is_int(ia.ino, 1234, "ino");
    is_int(ia.mode, S_IFREG | 0640, "mode with type bits");
    is_int(ia.nlink, 3, "nlink");
    is_int(ia.size, 1 << 20, "size");
    is_int(ia.blocks, 2048, "blocks");
    is_int(ia.blksize, 4096, "blksize");
    is_int(ia.mtime_sec, 1700000001, "mtime sec");
    is_int(ia.mtime_nsec, 999999999, "mtime nsec");
    is_int(ia.ctime_nsec, 500, "ctime nsec");

    memset(&back, 0xff, sizeof(back));
    bfs_iatt_to_stat(&ia, &back);
    ok(back.st_ino == st.st_ino && back.st_dev == st.st_dev && back.st_mode == st.st_mode &&
           back.st_nlink == st.st_nlink && back.st_uid == st.st_uid &&
           back.st_gid == st.st_gid && back.st_rdev == st.st_rdev &&
           back.st_size == st.st_size && back.st_blocks == st.st_blocks &&
           back.st_blksize == st.st_blksize,
       "to_stat restores every numeric field");
    ok(back.st_atim.tv_sec == st.st_atim.tv_sec && back.st_atim.tv_nsec == st.st_atim.tv_nsec &&
           back.st_mtim.tv_nsec == st.st_mtim.tv_nsec &&
           back.st_ctim.tv_sec == st.st_ctim.tv_sec,
       "to_stat restores timestamps");
}

static void test_dirents(void)
{
    struct bfs_dirents l = {0}, c = {0};
    struct bfs_iatt ia = {0};
    char name[32];

    ia.size = 42;
    is_int(bfs_dirents_add(&l, "a", 1, DT_REG, 10, NULL), 0, "add without attr");
    is_int(bfs_dirents_add(&l, "b", 2, DT_DIR, 11, &ia), 0, "add with attr");
    is_int(bfs_dirents_add(&l, NULL, 3, DT_DIR, 11, NULL), -EINVAL, "add refuses NULL name");
    is_int(l.count, 2, "two entries");
    ok(!l.v[0].has_attr && l.v[1].has_attr && l.v[1].attr.size == 42, "attr kept");
    is_str(l.v[1].name, "b", "name copied");
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "f%d", i);
        if (bfs_dirents_add(&l, name, (uint64_t)i + 3, DT_REG, 0, NULL) != 0)
            break;
    }
    is_int(l.count, 1002, "list grows to 1002 entries");
    is_str(l.v[1001].name, "f999", "last name right after growth");

    is_int(bfs_dirents_copy(&c, &l), 0, "copy");
    is_int(c.count, l.count, "copy has the same count");
    ok(c.v[0].name != l.v[0].name, "copy owns its names");
    is_str(c.v[500].name, l.v[500].name, "copied names equal");
    ok(c.v[1].has_attr && c.v[1].attr.size == 42 && c.v[2].d_off == 3, "copied fields equal");

    bfs_dirents_free(&l);
    ok(l.v == NULL && l.count == 0 && l.cap == 0, "free empties the list");
    is_int(bfs_dirents_add(&l, "again", 1, DT_REG, 1, NULL), 0, "list reusable after free");
    is_int(l.count, 1, "one entry after reuse");
    bfs_dirents_free(&l);
    bfs_dirents_free(&c);

    struct bfs_dirents e = {0}, ec;
    is_int(bfs_dirents_copy(&ec, &e), 0, "copy of empty list");
    is_int(ec.count, 0, "empty copy is empty");
    bfs_dirents_free(&ec);
}

static void test_names(void)
{
    char n255[257], n256[258];
    memset(n255, 'x', 255);
    n255[255] = '\0';
    memset(n256, 'x', 256);
    n256[256] = '\0';

    is_int(bfs_name_check("file"), 0, "plain name ok");
    is_int(bfs_name_check("..."), 0, "'...' ok");
    is_int(bfs_name_check(".hidden"), 0, "dot file ok");
    is_int(bfs_name_check(n255), 0, "255 bytes ok");
    is_int(bfs_name_check(n256), -ENAMETOOLONG, "256 bytes too long");
    is_int(bfs_name_check(""), -EINVAL, "empty refused");
    is_int(bfs_name_check("."), -EINVAL, "'.' refused");
    is_int(bfs_name_check(".."), -EINVAL, "'..' refused");
    is_int(bfs_name_check("a/b"), -EINVAL, "slash refused");
    is_int(bfs_name_check("/"), -EINVAL, "lone slash refused");
    is_int(bfs_name_check(NULL), -EINVAL, "NULL refused");
}

int main(void)
{
    plan_lazy();
    test_gfid_basics();
    test_gfid_parse();
    test_gfid_ino();
    test_gfid_entry_runs();
    test_gfid_pool();
    test_iatt();
    test_dirents();
    test_names();
    return done_testing();
}
