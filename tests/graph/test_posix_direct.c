/*
 * test_posix_direct.c — storage/posix's direct reads (posix-direct.c,
 * docs/design/uncached-io.md "Direct reads"): a read of at least
 * storage.uncached-read-min bytes at an aligned offset, of a range the
 * brick's page cache does not hold whole, goes with O_DIRECT and leaves no
 * page of the file in the page cache; a cached or dirty range, an unaligned
 * offset, a write-only fd and storage.direct-read off read as before; a
 * file system that refuses O_DIRECT turns it off once. Every read's bytes
 * are compared with the brick's copy. Needs root; skips otherwise.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../lib/posix-graph.h"
#include "../lib/tap.h"
#include "core/graph.h"

#define BIG (256 * 1024)
#define FILE_LEN (BIG + 64 * 1024 + 1000) /* a tail that is no whole page */

static int (*override)(const char *, void *, void **);
static int (*real_openat)(int, const char *, int, mode_t);
static int n_direct_opens;
static bool refuse; /* O_DIRECT opens fail with EINVAL, as on tmpfs before 6.6 */

static int count_openat(int dirfd, const char *path, int flags, mode_t mode)
{
    if (flags & O_DIRECT) {
        n_direct_opens++;
        if (refuse) {
            errno = EINVAL;
            return -1;
        }
    }
    return real_openat(dirfd, path, flags, mode);
}

static int start(const char *direct)
{
    char opts[64];
    snprintf(opts, sizeof(opts), " option storage.direct-read %s\n", direct);
    int rc = pg_start_with(opts);
    void *old = NULL;
    override = pg_xl ? (int (*)(const char *, void *, void **))dlsym(pg_xl->dlhandle,
                                                                      "bfs_posix_sys_override")
                     : NULL;
    if (rc == 0 && (!override || override("openat", (void *)count_openat, &old) < 0))
        rc = -ENOSYS;
    real_openat = (int (*)(int, const char *, int, mode_t))old;
    if (rc < 0)
        printf("# graph or hook: %d\n", rc);
    return rc;
}

static void stop(void)
{
    if (override)
        override("openat", NULL, NULL);
    override = NULL;
    pg_stop();
}

/* The brick's copy of NAME written back and dropped from the page cache. */
static bool uncache(const char *name)
{
    int fd = open(pg_disk(name), O_RDONLY);
    bool done = fd >= 0 && fsync(fd) == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
    if (fd >= 0)
        close(fd);
    return done;
}

/* Pages of NAME's brick copy in the page cache (mincore), -1 on error. */
static int cached_pages(const char *name)
{
    int fd = open(pg_disk(name), O_RDONLY);
    if (fd < 0)
        return -1;
    long pg = sysconf(_SC_PAGESIZE);
    size_t npages = (FILE_LEN + (size_t)pg - 1) / (size_t)pg;
    void *m = mmap(NULL, FILE_LEN, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    unsigned char *vec = malloc(npages);
    int n = -1;
    if (m != MAP_FAILED && vec && mincore(m, FILE_LEN, vec) == 0) {
        n = 0;
        for (size_t i = 0; i < npages; i++)
            n += vec[i] & 1;
    }
    free(vec);
    if (m != MAP_FAILED)
        munmap(m, FILE_LEN);
    return n;
}

/* The bytes at off equal the brick's copy of NAME (read with O_DIRECT by
 * the test, so the check itself caches nothing). */
static bool on_disk(const char *name, const char *buf, size_t len, off_t off)
{
    int fd = open(pg_disk(name), O_RDONLY | O_DIRECT);
    size_t room = (FILE_LEN + 4095) & ~(size_t)4095;
    char *got = aligned_alloc(4096, room);
    bool same = fd >= 0 && got && pread(fd, got, room, 0) == FILE_LEN &&
                memcmp(got + off, buf, len) == 0;
    free(got);
    if (fd >= 0)
        close(fd);
    return same;
}

static struct bfs_fd *open_file(const char *name, int flags)
{
    struct bfs_fd *fd = bfs_fd_new(pg_graph, NULL, (uint32_t)flags, 0);
    struct bfs_open_req req = {.loc = pg_L(&bfs_gfid_root, name), .fd = fd,
                               .flags = (uint32_t)flags};
    if (bfs_sync_open(pg_xl, pg_root_st, &req, NULL) < 0) {
        bfs_fd_unref(fd);
        return NULL;
    }
    return fd;
}

/* Reads len at off through posix: the reply's length (or -errno); its
 * bytes must be the brick's, its eof flag as given. */
static int read_check(struct bfs_fd *fd, const char *name, size_t len, uint64_t off,
                      const char *what)
{
    struct bfs_read_req req = {.fd = fd, .size = len, .offset = off};
    struct bfs_read_rep rep;
    int rc = bfs_sync_read(pg_xl, pg_root_st, &req, &rep);
    if (rc < 0)
        return rc;
    size_t want = off >= FILE_LEN ? 0 : FILE_LEN - off < len ? FILE_LEN - off : len;
    ok(rep.data.len == want && rc == (int)want && on_disk(name, rep.data.data, want, (off_t)off),
       "%s: %zu bytes as on the brick", what, want);
    ok(rep.eof == (off + len >= FILE_LEN), "%s: eof %s", what, rep.eof ? "set" : "clear");
    bfs_read_rep_clear_dup(&rep);
    return rc;
}

/* A new file NAME of FILE_LEN bytes on the brick, out of the page cache. */
static bool make_file(const char *name)
{
    static char data[FILE_LEN];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (char)(i * 13 + (unsigned char)name[0]);
    struct bfs_fd *fd = NULL;
    if (pg_create(pg_root_st, &bfs_gfid_root, name, &fd, NULL) < 0)
        return false;
    struct bfs_write_req req = {.fd = fd, .data = {data, sizeof(data)}, .offset = 0};
    bool done = bfs_sync_write(pg_xl, pg_root_st, &req, NULL) == (int)sizeof(data);
    bfs_fd_unref(fd);
    return done && uncache(name);
}

static void direct_on(void)
{
    ok(make_file("a"), "a file of %d bytes, out of the page cache", FILE_LEN);
    is_int(cached_pages("a"), 0, "none of its pages cached before the reads");
    struct bfs_fd *fd = open_file("a", O_RDONLY);
    ok(fd != NULL, "opened read-only");
    if (!fd)
        return;
    n_direct_opens = 0;
    read_check(fd, "a", BIG, 0, "256 KiB at 0");
    read_check(fd, "a", BIG, BIG, "256 KiB at 256 KiB, past the end");
    ok(pg_dump_has("\"direct_reads\":{\"on\":true,\"done\":2,\"cached\":0}"),
       "both went direct");
    is_int(n_direct_opens, 1, "one O_DIRECT open for the fd, kept for its reads");
    is_int(cached_pages("a"), 0, "and left no page of the file in the page cache");

    read_check(fd, "a", 200 * 1024, 1000, "200 KiB at an unaligned offset");
    read_check(fd, "a", 64 * 1024, 0, "64 KiB, under the minimum");
    ok(pg_dump_has("\"done\":2,\"cached\":0}"), "neither went direct");

    static char disk_buf[BIG];
    ok(uncache("a"), "out of the page cache again (the 64 KiB read left pages)");
    int disk = open(pg_disk("a"), O_RDONLY);
    ok(disk >= 0 && posix_fadvise(disk, 0, 0, POSIX_FADV_RANDOM) == 0 &&
       pread(disk, disk_buf, 4096, 8192) == 4096, "one page read on the brick (no read-ahead)");
    is_int(cached_pages("a"), 1, "one page cached");
    read_check(fd, "a", BIG, 0, "256 KiB, one page of it cached");
    ok(pg_dump_has("\"done\":3,\"cached\":0}"), "went direct (a partly cached range)");
    ok(disk >= 0 && pread(disk, disk_buf, BIG, 0) == BIG, "all of it read on the brick");
    if (disk >= 0)
        close(disk);
    read_check(fd, "a", BIG, 0, "256 KiB, all cached");
    ok(pg_dump_has("\"done\":3,\"cached\":1}"), "read through the page cache");

    ok(uncache("a"), "out of the page cache again");
    struct bfs_fd *wfd = open_file("a", O_WRONLY);
    ok(wfd != NULL, "opened write-only");
    if (wfd) {
        char page[4096];
        memset(page, 'z', sizeof(page));
        struct bfs_write_req w = {.fd = wfd, .data = {page, sizeof(page)}, .offset = 4096};
        is_int(bfs_sync_write(pg_xl, pg_root_st, &w, NULL), 4096, "a page written (dirty)");
        read_check(fd, "a", BIG, 0, "256 KiB over the dirty page: the new bytes");
        ok(pg_dump_has("\"done\":3,\"cached\":2}"), "read through the page cache");
        ok(uncache("a"), "written back and dropped");
        n_direct_opens = 0;
        is_int(read_check(wfd, "a", BIG, 0, "write-only"), -EBADF,
               "a read on a write-only fd still fails EBADF");
        is_int(n_direct_opens, 0, "with no O_DIRECT open");
        bfs_fd_unref(wfd);
    }
    read_check(fd, "a", BIG, 0, "256 KiB after the write");
    ok(pg_dump_has("\"done\":4,"), "direct again once the pages are gone");
    bfs_fd_unref(fd);
}

int main(void)
{
    plan_lazy();
    if (!pg_can_run())
        return done_testing();
    if (pg_init("pxdirect") < 0 || start("on") < 0) {
        ok(0, "storage/posix graph, its openat hooked");
        stop();
        pg_fini();
        return done_testing();
    }
    direct_on();
    stop();

    ok(start("on") == 0, "a fresh graph");
    refuse = true;
    ok(make_file("b"), "a file out of the page cache");
    struct bfs_fd *fd = pg_xl ? open_file("b", O_RDONLY) : NULL;
    if (fd) {
        n_direct_opens = 0;
        read_check(fd, "b", BIG, 0, "O_DIRECT refused: 256 KiB");
        ok(pg_dump_has("\"direct_reads\":{\"on\":false,\"done\":0"), "direct reads are off");
        bfs_fd_unref(fd);
        fd = open_file("b", O_RDONLY);
        ok(uncache("b") && fd, "reopened, out of the page cache");
        if (fd) {
            read_check(fd, "b", BIG, 0, "after the refusal");
            bfs_fd_unref(fd);
        }
        is_int(n_direct_opens, 1, "O_DIRECT was tried once");
    }
    refuse = false;
    stop();

    ok(start("off") == 0, "storage.direct-read off");
    ok(make_file("c"), "a file out of the page cache");
    fd = pg_xl ? open_file("c", O_RDONLY) : NULL;
    if (fd) {
        n_direct_opens = 0;
        read_check(fd, "c", BIG, 0, "direct-read off: 256 KiB");
        ok(pg_dump_has("\"direct_reads\":{\"on\":false,\"done\":0,\"cached\":0}"),
           "direct-read off: none direct");
        is_int(n_direct_opens, 0, "direct-read off: no O_DIRECT open");
        bfs_fd_unref(fd);
    }
    stop();
    pg_fini();
    return done_testing();
}
