/*
 * test_replicate_lazy.c — cluster/replicate's lazy open (cluster.lazy-open,
 * replicate-fd.c): an O_RDONLY open whose reading copy is known good goes
 * to that copy only, and the fd is opened on the others when it needs them.
 * Checked on the bricks' io-stats (s<i>) and with the data they hold:
 *   - one open in all, on the copy that serves the reads; every copy with
 *     the option off;
 *   - a read that must fail over (the copy faults, or goes down) opens the
 *     fd on the others first and answers the right bytes;
 *   - an open that the reading copy fails (ENOTCONN, not yet known down)
 *     goes to the others; a close once that copy is down succeeds;
 *   - a copy that failed a write through another fd after the open is not
 *     read from, though the fd is open only there;
 *   - a POSIX lock through such an fd reaches every copy (and conflicts
 *     with another owner's), so does fsync.
 * Graph: tests/lib/cluster-graph.h. Needs root (trusted xattrs).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../lib/cluster-graph.h"
#include "../lib/tap.h"

static int read_is(struct cg_vol *v, struct bfs_fd *fd, const char *want)
{
    char buf[32] = "";
    int n = cg_read(v, fd, buf, sizeof(buf));
    return n == (int)strlen(want) && memcmp(buf, want, (size_t)n) == 0;
}

static void test_one_copy(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    uint64_t o0[3], o1[3];
    if (cg_rep_open(&v, 3, false, " option cluster.read-policy first-up\n") < 0)
        return;
    ok(cg_put_known(&v, "one", "only one", &a), "put one: clean copies, looked up");
    cg_fop_counts(&v, "open", o0);
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &fd), 0, "open O_RDONLY");
    ok(read_is(&v, fd, "only one"), "read");
    cg_flush_close(&v, fd);
    cg_fop_counts(&v, "open", o1);
    is_int((int)(o1[0] - o0[0]), 1, "c0 (the reading copy) opened it");
    is_int((int)(o1[1] - o0[1] + o1[2] - o0[2]), 0, "c1 and c2 did not");

    is_int(cg_open(&v, &a.gfid, O_RDWR, &fd), 0, "open O_RDWR");
    cg_flush_close(&v, fd);
    cg_fop_counts(&v, "open", o0);
    for (int i = 0; i < 3; i++)
        is_int((int)(o0[i] - o1[i]), 1, "O_RDWR: c%d opened it", i);

    cg_top_set(&v, "cluster.lazy-open", "off");
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &fd), 0, "open O_RDONLY, lazy-open off");
    cg_flush_close(&v, fd);
    cg_fop_counts(&v, "open", o1);
    for (int i = 0; i < 3; i++)
        is_int((int)(o1[i] - o0[i]), 1, "lazy-open off: c%d opened it", i);
    cg_vol_close(&v);
}

/* The reading copy's connection is lost while the lazy open is on its
 * way (it fails ENOTCONN before replicate hears CHILD_DOWN): the open
 * goes to the other copies instead of failing (an open through the mount
 * failed ENOTCONN while a replace-brick stopped the reading copy: 243). */
static void test_open_fault(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd = NULL;
    uint64_t o0[3], o1[3];
    if (cg_rep_open(&v, 3, false, " option cluster.read-policy first-up\n") < 0)
        return;
    ok(cg_put_known(&v, "of", "open fault", &a), "put of: clean copies, looked up");
    cg_fault(&v, 0, "ENOTCONN", "open");
    cg_fop_counts(&v, "open", o0);
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &fd), 0,
           "c0, the reading copy, fails the open ENOTCONN: the open succeeds");
    cg_fop_counts(&v, "open", o1);
    is_int((int)(o1[1] - o0[1] + o1[2] - o0[2]), 2, "on c1 and c2");
    ok(fd && read_is(&v, fd, "open fault"), "and reads the file");
    cg_reconf(&v, 0, "failure", "0");
    if (fd)
        cg_flush_close(&v, fd);
    cg_vol_close(&v);
}

/* The close of a lazily opened fd whose only copy has gone down (the
 * other copies are up): nothing of the fd is left on a reachable brick,
 * the close succeeds (it failed ENOTCONN: a read-only file's close in
 * 243 while the replace-brick stopped its copy). */
static void test_flush_down(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd = NULL;
    if (cg_rep_open(&v, 3, false, " option cluster.read-policy first-up\n") < 0)
        return;
    ok(cg_put_known(&v, "fd", "flush down", &a), "put fd: clean copies, looked up");
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &fd), 0, "open O_RDONLY (on c0 only)");
    ok(read_is(&v, fd, "flush down"), "read");
    cg_down(&v, 0, true);
    is_int(cg_flush_close(&v, fd), 0, "c0 down: the close succeeds");
    cg_up(&v, 0, true);
    cg_vol_close(&v);
}

/* The reading copy fails reads (EIO), then goes down: the read is
 * answered from another copy, where the fd was opened meanwhile. */
static void test_failover(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    uint64_t o0[3], o1[3];
    if (cg_rep_open(&v, 3, false, " option cluster.read-policy first-up\n") < 0)
        return;
    ok(cg_put_known(&v, "f", "failover", &a), "put f: clean copies, looked up");
    cg_fop_counts(&v, "open", o0);
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &fd), 0, "open O_RDONLY (on c0 only)");
    cg_fault(&v, 0, "EIO", "read");
    ok(read_is(&v, fd, "failover"), "c0 fails the read: the bytes come from another copy");
    cg_reconf(&v, 0, "failure", "0");
    cg_fop_counts(&v, "open", o1);
    is_int((int)(o1[1] - o0[1]), 1, "the fd was opened on c1");
    is_int((int)(o1[2] - o0[2]), 1, "and on c2");
    cg_flush_close(&v, fd);

    ok(cg_put_known(&v, "d", "down", &a), "put d: clean copies, looked up");
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &fd), 0, "open O_RDONLY (on c0 only)");
    cg_down(&v, 0, true);
    ok(read_is(&v, fd, "down"), "c0 down: the read is answered by another copy");
    cg_flush_close(&v, fd);
    cg_up(&v, 0, true);
    cg_vol_close(&v);
}

/* After the lazy open on c0, a write through another fd fails on c0
 * only: the read through the lazy fd must not come from c0. */
static void test_stale_after_open(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *rfd;
    if (cg_rep_open(&v, 3, false, " option cluster.read-policy first-up\n"
                                  " option cluster.data-self-heal off\n") < 0)
        return;
    ok(cg_put_known(&v, "s", "stale", &a), "put s: clean copies, looked up");
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &rfd), 0, "open O_RDONLY (on c0 only)");
    is_int(cg_write_fails_on(&v, 0, &a.gfid, "FRESH"), 5, "a write that fails on c0 only");
    ok(cg_content_is(&v, 0, "s", "stale"), "c0 kept the old bytes");
    ok(read_is(&v, rfd, "FRESH"), "the read through the lazy fd has the acknowledged write");
    cg_flush_close(&v, rfd);
    cg_vol_close(&v);
}

static int lk(struct cg_vol *v, struct bfs_fd *fd, uint32_t type, uint64_t owner)
{
    struct bfs_lk_req q = {.fd = fd, .cmd = BFS_LK_SETLK};
    q.lock = (struct bfs_flock){.type = type, .whence = SEEK_SET, .len = 0, .pid = 7,
                                .owner = owner};
    struct bfs_lk_rep r;
    int rc = bfs_sync_lk(v->top, v->st, &q, &r);
    if (rc == 0)
        bfs_lk_rep_clear_dup(&r);
    return rc;
}

/* A lock through a lazily opened fd is held on every copy. */
static void test_lock_everywhere(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *rfd, *wfd;
    uint64_t l0[3], o0[3], o1[3];
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    ok(cg_put_known(&v, "lk", "locked", &a), "put lk: clean copies, looked up");
    cg_fop_counts(&v, "open", o0);
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &rfd), 0, "open O_RDONLY (one copy)");
    cg_fop_counts(&v, "lk", l0);
    is_int(lk(&v, rfd, F_RDLCK, 1), 0, "read lock through it");
    cg_fop_counts(&v, "open", o1);
    for (int i = 0; i < 3; i++) {
        is_int((int)(o1[i] - o0[i]), 1, "c%d: the fd is open there", i);
        is_int((int)(cg_fop_calls(&v, i, "lk") - l0[i]), 1, "c%d: the lock reached it", i);
    }
    is_int(cg_open(&v, &a.gfid, O_RDWR, &wfd), 0, "another fd, O_RDWR");
    is_int(lk(&v, wfd, F_WRLCK, 2), -EAGAIN, "another owner's write lock conflicts");
    is_int(lk(&v, rfd, F_UNLCK, 1), 0, "unlock");
    is_int(lk(&v, wfd, F_WRLCK, 2), 0, "then it is granted");
    is_int(lk(&v, wfd, F_UNLCK, 2), 0, "unlock");
    cg_flush_close(&v, wfd);

    struct bfs_fd *ffd;
    ok(cg_put_known(&v, "fs", "synced", &a), "put fs: clean copies, looked up");
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &ffd), 0, "open O_RDONLY (one copy)");
    cg_fop_counts(&v, "fsync", l0);
    struct bfs_fsync_req fq = {.fd = ffd};
    is_int(bfs_sync_fsync(v.top, v.st, &fq, NULL), 0, "fsync through it");
    for (int i = 0; i < 3; i++)
        is_int((int)(cg_fop_calls(&v, i, "fsync") - l0[i]), 1, "c%d: the fsync reached it", i);
    cg_flush_close(&v, ffd);
    cg_flush_close(&v, rfd);
    cg_vol_close(&v);
}

struct reader {
    struct cg_vol *v;
    struct bfs_fd *fd;
    int ok;
};

static void *read_thread(void *arg)
{
    struct reader *r = arg;
    struct bfs_stack *st = bfs_stack_new();
    struct bfs_read_req req = {.fd = r->fd, .size = 32, .offset = 0};
    struct bfs_read_rep rep;
    int rc = bfs_sync_read(r->v->top, st, &req, &rep);
    r->ok = rc == 4 && memcmp(rep.data.data, "both", 4) == 0;
    if (rc >= 0)
        bfs_read_rep_clear_dup(&rep);
    bfs_stack_unref(st);
    return NULL;
}

/* Two reads through one lazy fd fail over at the same time: the second
 * waits for the first one's fix-open (held back 300 ms) instead of finding
 * no copy to read. */
static void test_concurrent_failover(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    if (cg_rep_open(&v, 3, false, " option cluster.read-policy first-up\n") < 0)
        return;
    ok(cg_put_known(&v, "cf", "both", &a), "put cf: clean copies, looked up");
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &fd), 0, "open O_RDONLY (on c0 only)");
    cg_fault(&v, 0, "EIO", "read");
    for (int i = 1; i < 3; i++) {
        cg_reconf(&v, i, "enable", "open");
        cg_reconf(&v, i, "delay-ms", "300");
    }
    struct reader r[2] = {{&v, fd, 0}, {&v, fd, 0}};
    pthread_t th[2];
    for (int k = 0; k < 2; k++)
        pthread_create(&th[k], NULL, read_thread, &r[k]);
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    ok(r[0].ok && r[1].ok, "both reads answered from another copy");
    cg_reconf(&v, 0, "failure", "0");
    for (int i = 1; i < 3; i++)
        cg_reconf(&v, i, "delay-ms", "0");
    cg_flush_close(&v, fd);
    cg_vol_close(&v);
}

int main(void)
{
    static const struct cg_test tests[] = {
        {"one", test_one_copy},
        {"failover", test_failover},
        {"stale", test_stale_after_open},
        {"lock", test_lock_everywhere},
        {"concurrent", test_concurrent_failover},
        {"openfault", test_open_fault},
        {"flushdown", test_flush_down},
    };
    plan_lazy();
    if (!cg_main("afrlazy", tests, sizeof(tests) / sizeof(tests[0]), "AFR_TEST"))
        return 0;
    return done_testing();
}
