/*
 * test_posix_uncached.c — storage/posix's streaming writes and reads
 * (docs/design/uncached-io.md): a write of at least
 * storage.uncached-write-min bytes goes with RWF_DONTCACHE, a smaller one
 * as a plain pwrite; 0 turns it off; a kernel that refuses the flag
 * (EOPNOTSUPP) costs one refused call, the write still lands, and every
 * later write is plain. Reads the same with storage.uncached-read-min,
 * independently of writes. The system calls are counted through posix's
 * call table (bfs_posix_sys_override); the bytes are checked each time.
 * Needs root (storage/posix: trusted xattrs); skips otherwise.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../lib/posix-graph.h"
#include "../lib/tap.h"
#include "core/graph.h"

#define DONTCACHE 0x80 /* RWF_DONTCACHE */

static int (*override)(const char *, void *, void **);
static ssize_t (*real_pwritev2)(int, const struct iovec *, int, off_t, int);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_preadv2)(int, const struct iovec *, int, off_t, int);
static ssize_t (*real_pread)(int, void *, size_t, off_t);
static int n_v2, n_v2_dontcache, n_pwrite, n_rv2, n_rv2_dontcache, n_pread;
static bool refuse, refuse_reads; /* answer EOPNOTSUPP, as a kernel before 6.14 does */

static ssize_t count_pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    n_v2++;
    if (flags & DONTCACHE)
        n_v2_dontcache++;
    if (refuse) {
        errno = EOPNOTSUPP;
        return -1;
    }
    return real_pwritev2(fd, iov, cnt, off, flags);
}

static ssize_t count_pwrite(int fd, const void *buf, size_t len, off_t off)
{
    n_pwrite++;
    return real_pwrite(fd, buf, len, off);
}

static ssize_t count_preadv2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    n_rv2++;
    if (flags & DONTCACHE)
        n_rv2_dontcache++;
    if (refuse_reads) {
        errno = EOPNOTSUPP;
        return -1;
    }
    return real_preadv2(fd, iov, cnt, off, flags);
}

static ssize_t count_pread(int fd, void *buf, size_t len, off_t off)
{
    n_pread++;
    return real_pread(fd, buf, len, off);
}

/* Counts posix's pwritev2 and pwrite: its call table lives in the module,
 * which each graph loads anew. */
static int hook(void)
{
    override = (int (*)(const char *, void *, void **))dlsym(pg_xl->dlhandle,
                                                             "bfs_posix_sys_override");
    void *o1 = NULL, *o2 = NULL, *o3 = NULL, *o4 = NULL;
    if (!override || override("pwritev2", (void *)count_pwritev2, &o1) < 0 ||
        override("pwrite", (void *)count_pwrite, &o2) < 0 ||
        override("preadv2", (void *)count_preadv2, &o3) < 0 ||
        override("pread", (void *)count_pread, &o4) < 0)
        return -1;
    real_pwritev2 = (ssize_t(*)(int, const struct iovec *, int, off_t, int))o1;
    real_pwrite = (ssize_t(*)(int, const void *, size_t, off_t))o2;
    real_preadv2 = (ssize_t(*)(int, const struct iovec *, int, off_t, int))o3;
    real_pread = (ssize_t(*)(int, void *, size_t, off_t))o4;
    return 0;
}

/* A storage/posix graph over pg_brick with the option set to min, its
 * writes counted. */
static int start(const char *min, const char *rmin)
{
    char opts[256];
    snprintf(opts, sizeof(opts),
             " option storage.uncached-write-min %s\n option storage.uncached-read-min %s\n"
             " option storage.direct-read off\n", /* test_posix_direct.c's */
             min, rmin);
    int rc = pg_start_with(opts);
    if (rc == 0 && hook() < 0)
        rc = -ENOSYS;
    if (rc < 0)
        printf("# graph or hooks: %d\n", rc);
    return rc;
}

static void stop(void)
{
    if (override) {
        override("pwritev2", NULL, NULL);
        override("pwrite", NULL, NULL);
        override("preadv2", NULL, NULL);
        override("pread", NULL, NULL);
        override = NULL;
    }
    pg_stop();
}

static int write_at(struct bfs_fd *fd, const char *buf, size_t len, uint64_t off)
{
    struct bfs_write_req req = {.fd = fd, .data = {buf, len}, .offset = off};
    return bfs_sync_write(pg_xl, pg_root_st, &req, NULL);
}

/* The file's bytes at off on the brick equal buf. */
static bool on_disk(const char *name, const char *buf, size_t len, off_t off)
{
    int fd = open(pg_disk(name), O_RDONLY);
    char *got = malloc(len);
    bool same = fd >= 0 && got && pread(fd, got, len, off) == (ssize_t)len &&
                memcmp(got, buf, len) == 0;
    free(got);
    if (fd >= 0)
        close(fd);
    return same;
}

/* Writes of 256 KiB and of 64 KiB into a new file NAME; checks the calls. */
static void writes(const char *name, int want_dontcache, int want_pwrite, const char *what)
{
    static char big[256 * 1024], small[64 * 1024];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)(i * 7 + (unsigned char)name[0]);
    memset(small, name[0], sizeof(small));
    struct bfs_fd *fd = NULL;
    ok(pg_create(pg_root_st, &bfs_gfid_root, name, &fd, NULL) >= 0, "%s: a file", what);
    if (!fd)
        return;
    n_v2 = n_v2_dontcache = n_pwrite = 0;
    is_int(write_at(fd, big, sizeof(big), 0), (int)sizeof(big), "%s: 256 KiB written", what);
    is_int(write_at(fd, small, sizeof(small), sizeof(big)), (int)sizeof(small),
           "%s: 64 KiB after it", what);
    is_int(n_v2_dontcache, want_dontcache, "%s: uncached writes", what);
    is_int(n_pwrite, want_pwrite, "%s: plain writes", what);
    ok(on_disk(name, big, sizeof(big), 0) && on_disk(name, small, sizeof(small), sizeof(big)),
       "%s: the bytes are on the brick", what);
    bfs_fd_unref(fd);
}

/* len bytes of fd at off equal the brick's copy of NAME there. */
static bool read_same(struct bfs_fd *fd, const char *name, size_t len, uint64_t off)
{
    struct bfs_read_req req = {.fd = fd, .size = len, .offset = off};
    struct bfs_read_rep rep;
    int rc = bfs_sync_read(pg_xl, pg_root_st, &req, &rep);
    bool same = rc == (int)len && rep.data.len == len &&
                on_disk(name, rep.data.data, len, (off_t)off);
    if (rc >= 0)
        bfs_read_rep_clear_dup(&rep);
    return same;
}

/* Reads of 256 KiB and of 64 KiB of NAME (writes() made it); checks the
 * calls. */
static void reads(const char *name, int want_dontcache, int want_pread, const char *what)
{
    struct bfs_fd *fd = bfs_fd_new(pg_graph, NULL, O_RDONLY, 0);
    struct bfs_open_req req = {.loc = pg_L(&bfs_gfid_root, name), .fd = fd, .flags = O_RDONLY};
    if (bfs_sync_open(pg_xl, pg_root_st, &req, NULL) < 0) {
        ok(0, "%s: %s opened", what, name);
        bfs_fd_unref(fd);
        return;
    }
    n_rv2 = n_rv2_dontcache = n_pread = 0;
    ok(read_same(fd, name, 256 * 1024, 0), "%s: 256 KiB read as on the brick", what);
    ok(read_same(fd, name, 64 * 1024, 256 * 1024), "%s: 64 KiB after it", what);
    is_int(n_rv2_dontcache, want_dontcache, "%s: uncached reads", what);
    is_int(n_pread, want_pread, "%s: plain reads", what);
    bfs_fd_unref(fd);
}

int main(void)
{
    plan_lazy();
    if (!pg_can_run())
        return done_testing();
    if (pg_init("pxuncached") < 0 || start("128KB", "128KB") < 0) {
        ok(0, "storage/posix graph, its pwritev2 and pwrite counted");
        stop();
        pg_fini();
        return done_testing();
    }
    writes("a", 1, 1, "min 128KB");
    ok(pg_dump_has("\"uncached_writes\":{\"min\":131072,\"on\":true,\"done\":1}"),
       "min 128KB: the dump counts it");
    reads("a", 1, 1, "read min 128KB");
    ok(pg_dump_has("\"uncached_reads\":{\"min\":131072,\"on\":true,\"done\":1}"),
       "read min 128KB: the dump counts it");
    refuse_reads = true;
    reads("a", 1, 2, "reads refused");
    is_int(n_rv2, 1, "reads refused: the flag was tried once");
    ok(pg_dump_has("\"uncached_reads\":{\"min\":131072,\"on\":false"),
       "reads refused: the dump says uncached reads are off");
    reads("a", 0, 2, "after a read refusal");
    is_int(n_rv2, 0, "after a read refusal: not tried again");
    refuse_reads = false;
    writes("a2", 1, 1, "writes after a read refusal");

    refuse = true;
    writes("b", 1, 2, "refused");
    is_int(n_v2, 1, "refused: the flag was tried once");
    ok(pg_dump_has("\"on\":false"), "refused: the dump says uncached writes are off");
    writes("c", 0, 2, "after a refusal");
    is_int(n_v2, 0, "after a refusal: not tried again");
    refuse = false;
    stop();

    ok(start("0", "0") == 0, "min 0: a graph");
    if (pg_xl) {
        writes("d", 0, 2, "min 0");
        is_int(n_v2, 0, "min 0: never tried");
        reads("d", 0, 2, "read min 0");
        is_int(n_rv2, 0, "read min 0: never tried");
        stop();
    }
    ok(start("1MB", "1MB") == 0, "min 1MB: a graph");
    if (pg_xl) {
        writes("e", 0, 2, "min 1MB");
        reads("e", 0, 2, "read min 1MB");
        stop();
    }
    pg_fini();
    return done_testing();
}
