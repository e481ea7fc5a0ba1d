/*
 * test_replicate.c — cluster/replicate in one process over real bricks
 * (tests/lib/cluster-graph.[ch]: each child is storage/posix on a
 * temporary directory, under features/locks, under debug/io-stats (s0,
 * s1, ...: what reached each brick), under debug/error-gen (named c0, c1,
 * ...: the names the pending xattrs carry). A "down" brick is error-gen
 * failing every fop with ENOTCONN, with or without a CHILD_DOWN event;
 * "back" is the reverse.
 *
 * Every check that matters is made on the brick directories themselves
 * with getxattr(2)/stat(2)/read(2): pending counters blaming the child that
 * missed a change, copies identical after heal (content, mode, xattrs,
 * GFID), no data on the arbiter. Covers replica 3, replica 2 (split-brain
 * and its resolution by the favorite-child policies), replica 3 arbiter 1,
 * quorum (and a change that loses it midway), eager locking, read
 * fail-over, readdirplus attributes, and heal on access of data, metadata
 * and entries. The heal scenarios of locks, checksums, renames and merges
 * are in test_replicate_heal.c. Needs root (trusted xattrs); skips
 * otherwise.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "../lib/cluster-graph.h"
#include "core/event.h"
#include "../lib/tap.h"

/* ---- scenarios ---- */

static void test_basic_replica3(void)
{
    struct cg_vol v;
    struct bfs_iatt a, d;
    char buf[64];
    ok(cg_rep_open(&v, 3, false, NULL) == 0, "replica 3 over three posix bricks starts");
    if (!v.g)
        return;
    is_int(cg_lookup(&v, &bfs_gfid_root, NULL, NULL), 0, "root lookup");
    is_int(cg_put(&v, &bfs_gfid_root, "f", "hello", &a), 0, "create + write + close");
    ok(cg_same_gfid(&v, "f", 7), "the new file has the same GFID on every brick");
    ok(cg_content_is(&v, 0, "f", "hello") && cg_content_is(&v, 1, "f", "hello") &&
           cg_content_is(&v, 2, "f", "hello"),
       "three identical copies");
    ok(cg_clean_soon(&v, "f") && cg_clean_soon(&v, ""), "after close: no pending, no dirty counter");
    struct bfs_fd *fd;
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &fd), 0, "open");
    is_int(cg_read(&v, fd, buf, sizeof(buf)), 5, "read 5 bytes");
    ok(memcmp(buf, "hello", 5) == 0, "read what was written");
    cg_flush_close(&v, fd);
    is_int(cg_mkdir(&v, &bfs_gfid_root, "d", &d), 0, "mkdir");
    ok(cg_same_gfid(&v, "d", 7), "the new directory has the same GFID everywhere");
    is_int(cg_lookup(&v, &bfs_gfid_root, "f", &a), 0, "named lookup");
    is_int(a.size, 5, "with the size of a data copy");
    cg_vol_close(&v);
}

static void test_pending_and_data_heal(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "f", "old old old", &a);
    cg_down(&v, 1, false); /* failing silently: the writes find out */
    is_int(cg_open(&v, &a.gfid, O_RDWR, &fd), 0, "open with c1 failing");
    is_int(cg_write(&v, fd, 0, "NEW", 3), 3, "write with c1 failing succeeds (quorum 2 of 3)");
    is_int(cg_write(&v, fd, 11, " and more", 9), 9, "a second write through the eager lock");
    is_int(cg_flush_close(&v, fd), 0, "close");
    ok(cg_counter(&v, 0, "f", "c1", 0) > 0 && cg_counter(&v, 2, "f", "c1", 0) > 0,
       "c0 and c2 blame c1 for data");
    ok(cg_counter(&v, 0, "f", "c2", 0) == 0 && cg_counter(&v, 2, "f", "c0", 0) == 0,
       "and nobody else");
    bool clean = false; /* the post-op runs behind close's answer */
    for (int k = 0; k < 500 && !clean; k++) {
        clean = cg_counter(&v, 0, "f", "dirty", 0) == 0 && cg_counter(&v, 2, "f", "dirty", 0) == 0;
        if (!clean)
            usleep(10000);
    }
    ok(clean, "the good copies are not dirty once the close's post-op is done");
    ok(cg_content_is(&v, 1, "f", "old old old"), "c1's copy missed the writes");
    ok(cg_content_is(&v, 0, "f", "NEW old old and more"), "c0 has them");
    cg_up(&v, 1, false);
    is_int(cg_lookup(&v, &bfs_gfid_root, "f", &a), 0, "lookup after c1 returns (heals first)");
    ok(cg_content_is(&v, 1, "f", "NEW old old and more"), "c1's copy healed");
    ok(cg_same_everywhere(&v, "f", 7, -1), "the three copies are identical");
    ok(cg_clean_soon(&v, "f"), "every counter back to 0 after the heal");
    is_int(a.size, 20, "lookup answers the healed size");
    cg_vol_close(&v);
}

static void test_entry_heal(void)
{
    struct cg_vol v;
    struct bfs_iatt a, d, x;
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "gone", "bye", NULL);
    cg_mkdir(&v, &bfs_gfid_root, "tree", &d);
    cg_put(&v, &d.gfid, "leaf", "leaf", NULL);
    cg_down(&v, 2, true);
    is_int(cg_put(&v, &bfs_gfid_root, "g", "made while c2 was down", &a), 0,
           "create + write with c2 down (known)");
    is_int(cg_unlink(&v, &bfs_gfid_root, "gone"), 0, "unlink with c2 down");
    is_int(cg_unlink(&v, &d.gfid, "leaf"), 0, "unlink inside a directory");
    is_int(cg_rmdir(&v, &bfs_gfid_root, "tree"), 0, "rmdir with c2 down");
    ok(cg_counter(&v, 0, "", "c2", 2) > 0 && cg_counter(&v, 1, "", "c2", 2) > 0,
       "the root's entry counters blame c2");
    ok(!cg_exists(&v, 2, "g") && cg_exists(&v, 2, "gone") && cg_exists(&v, 2, "tree/leaf"),
       "c2 missed all of it");
    cg_up(&v, 2, true);
    is_int(cg_lookup(&v, &bfs_gfid_root, NULL, NULL), 0, "root lookup after c2 returns");
    ok(cg_exists(&v, 2, "g") && cg_same_gfid(&v, "g", 7), "g created on c2 with its GFID");
    ok(!cg_exists(&v, 2, "gone"), "gone removed from c2");
    ok(!cg_exists(&v, 2, "tree"), "tree removed from c2 with what it held");
    ok(cg_clean_soon(&v, ""), "root counters clean");
    is_int(cg_lookup(&v, &bfs_gfid_root, "g", &x), 0, "lookup g: its own heal");
    ok(cg_content_is(&v, 2, "g", "made while c2 was down"), "g's data healed on c2");
    ok(cg_clean_soon(&v, "g"), "g's counters clean");
    struct stat s0, s2;
    ok(stat(cg_on(&v, 0, "g"), &s0) == 0 && stat(cg_on(&v, 2, "g"), &s2) == 0 &&
           s0.st_mode == s2.st_mode && s0.st_uid == s2.st_uid,
       "g's metadata healed too");
    cg_vol_close(&v);
}

static void test_metadata_heal(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "m", "meta", &a);
    cg_down(&v, 0, true);
    struct bfs_setattr_req sr = {.valid = BFS_SET_MODE};
    sr.loc.gfid = a.gfid;
    sr.attr.mode = S_IFREG | 0600;
    is_int(bfs_sync_setattr(v.top, v.st, &sr, NULL), 0, "chmod 600 with c0 down");
    struct bfs_setxattr_req xr = {.xattrs = bfs_dict_new()};
    xr.loc.gfid = a.gfid;
    bfs_dict_set_bin(xr.xattrs, "user.colour", "blue", 4);
    is_int(bfs_sync_setxattr(v.top, v.st, &xr, NULL), 0, "setxattr with c0 down");
    bfs_dict_unref(xr.xattrs);
    ok(cg_counter(&v, 1, "m", "c0", 1) > 0, "metadata counter blames c0");
    cg_up(&v, 0, true);
    is_int(cg_lookup(&v, &bfs_gfid_root, "m", NULL), 0, "lookup after c0 returns");
    struct stat st;
    char val[16] = "";
    ok(stat(cg_on(&v, 0, "m"), &st) == 0 && (st.st_mode & 07777) == 0600, "mode healed on c0");
    ok(getxattr(cg_on(&v, 0, "m"), "user.colour", val, sizeof(val)) == 4 &&
           memcmp(val, "blue", 4) == 0,
       "user xattr healed on c0");
    ok(cg_clean_soon(&v, "m"), "counters clean");
    ok(cg_same_everywhere(&v, "m", 7, -1), "the three copies are identical");
    cg_vol_close(&v);
}

static void test_quorum(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    char buf[32];
    if (cg_rep_open(&v, 3, false, " option cluster.quorum-type auto\n") < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "q", "quorum", &a);
    is_int(cg_open(&v, &a.gfid, O_RDWR, &fd), 0, "open");
    cg_down(&v, 1, true);
    cg_down(&v, 2, true);
    is_int(cg_write(&v, fd, 0, "x", 1), -EROFS, "auto quorum, 1 of 3 up: write fails EROFS");
    is_int(cg_create(&v, &bfs_gfid_root, "q2", NULL, NULL), -EROFS, "create fails EROFS");
    is_int(cg_read(&v, fd, buf, sizeof(buf)), 6, "reads go on");
    is_int(cg_lookup(&v, &bfs_gfid_root, "q", NULL), 0, "lookups go on");
    ok(cg_content_is(&v, 0, "q", "quorum"), "nothing was changed");
    cg_up(&v, 1, true);
    is_int(cg_write(&v, fd, 0, "Q", 1), 1, "2 of 3 up: writes again");
    cg_flush_close(&v, fd);
    cg_up(&v, 2, true);
    cg_vol_close(&v);

    if (cg_rep_open(&v, 3, false, " option cluster.quorum-type fixed\n"
                               " option cluster.quorum-count 3\n") < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "q", "quorum", &a);
    cg_down(&v, 2, true);
    is_int(cg_put(&v, &bfs_gfid_root, "q3", "x", NULL), -EROFS, "fixed 3, 2 up: EROFS");
    cg_vol_close(&v);
}

/* A write that loses its quorum is not acknowledged, and the copy that took
 * it anyway must not become the file (tests/integration/212): replica 3,
 * c0 away; c2 fails the next write (it dies under it), so c1 alone took
 * it: EROFS. c1 marks its own copy (pending[c1][c1]) and does not blame
 * c2; while c1's is the only copy here, reads refuse it (ENOTCONN); once
 * c2 is back, the heal takes c2's copy and the failed write is gone. */
static void test_quorum_lost_write(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    char buf[64];
    if (cg_rep_open(&v, 3, false, " option cluster.read-policy first-up\n") < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "u", "before", &a);
    cg_down(&v, 0, true);
    is_int(cg_open(&v, &a.gfid, O_RDWR, &fd), 0, "open");
    is_int(cg_write(&v, fd, 6, "+ok", 3), 3, "2 of 3 up: a write is acknowledged");
    cg_reconf(&v, 2, "enable", "write");
    cg_reconf(&v, 2, "failure", "100");
    is_int(cg_write(&v, fd, 9, "+LOST", 5), -EROFS, "c2 fails the next one: c1 alone took it");
    ok(cg_content_is(&v, 1, "u", "before+ok+LOST"), "c1's copy has it");
    ok(cg_counter(&v, 1, "u", "c1", 0) > 0, "c1 marks its copy: an unacknowledged change");
    is_int(cg_counter(&v, 1, "u", "c2", 0), 0, "and does not blame c2");
    ok(cg_counter(&v, 1, "u", "c0", 0) > 0, "c0 is still blamed for what it missed");
    cg_down(&v, 2, true);
    cg_reconf(&v, 2, "enable", "all");
    is_int(cg_read(&v, fd, buf, sizeof(buf)), -ENOTCONN,
           "c1's copy alone: not read (the good copy is away)");
    is_int(cg_flush_close(&v, fd), 0, "close");
    /* close() answered when the window's release started (note 43): a
     * lookup that meets its lock still held would skip the heal */
    ok(cg_unlocked_soon(&v), "the window's lock released");
    cg_up(&v, 2, true);
    is_int(cg_lookup(&v, &bfs_gfid_root, "u", NULL), 0, "c2 back: lookup heals");
    ok(cg_content_is(&v, 1, "u", "before+ok") && cg_content_is(&v, 2, "u", "before+ok"),
       "from c2: the failed write is undone on c1");
    is_int(cg_counter(&v, 1, "u", "c1", 0), 0, "the mark is gone");
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &fd), 0, "open");
    is_int(cg_read(&v, fd, buf, sizeof(buf)), 9, "read");
    ok(memcmp(buf, "before+ok", 9) == 0, "what was acknowledged, nothing else");
    cg_flush_close(&v, fd);
    cg_up(&v, 0, true);
    is_int(cg_lookup(&v, &bfs_gfid_root, "u", NULL), 0, "c0 back: lookup heals");
    ok(cg_same_everywhere(&v, "u", 7, -1) && cg_content_is(&v, 0, "u", "before+ok"), "one copy");
    ok(cg_clean_soon(&v, "u"), "counters clean");
    cg_vol_close(&v);
}

/* The attributes of "f" in a readdirplus of the root served by child c
 * (the other children fail readdir; c < 0: any child): its size, or -1 if
 * the entry came without attributes, -2 if it was not listed or the call
 * failed. */
static long long plus_size_from(struct cg_vol *v, int c)
{
    for (int i = 0; i < v->n && c >= 0; i++) { /* c < 0: every child answers */
        cg_reconf(v, i, "enable", "readdir");
        cg_reconf(v, i, "failure", i == c ? "0" : "100");
    }
    struct bfs_fd *dfd = bfs_fd_new(v->g, NULL, O_RDONLY, 1);
    struct bfs_opendir_req oreq = {.fd = dfd};
    oreq.loc.gfid = bfs_gfid_root;
    long long size = -2;
    if (bfs_sync_opendir(v->top, v->st, &oreq, NULL) == 0) {
        struct bfs_readdir_req rr = {.fd = dfd, .size = 4096, .plus = true};
        struct bfs_readdir_rep rep;
        if (bfs_sync_readdir(v->top, v->st, &rr, &rep) >= 0) {
            for (uint32_t k = 0; k < rep.entries.count; k++)
                if (strcmp(rep.entries.v[k].name, "f") == 0)
                    size = rep.entries.v[k].has_attr ? (long long)rep.entries.v[k].attr.size : -1;
            bfs_readdir_rep_clear_dup(&rep);
        }
    }
    bfs_fd_unref(dfd);
    for (int i = 0; i < v->n; i++) {
        cg_reconf(v, i, "failure", "0");
        cg_reconf(v, i, "enable", "all");
    }
    return size;
}

/* A readdirplus answered by a copy whose data of a file is not good must
 * not carry that file's attributes: the kernel caches them (a size 0 from
 * a brick the heal has not filled yet hid the data of files in
 * tests/integration/243, replace-brick). */
static void test_readdirplus_attrs(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    if (cg_rep_open(&v, 3, false, " option cluster.data-self-heal off\n") < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "f", "hello", &a);
    is_int(plus_size_from(&v, 2), 5, "c2 never went away: its attributes go up");
    cg_down(&v, 2, true);
    is_int(cg_open(&v, &a.gfid, O_RDWR, &fd), 0, "open");
    is_int(cg_write(&v, fd, 0, "hello, world", 12), 12, "a write c2 misses");
    cg_flush_close(&v, fd);
    cg_up(&v, 2, true);
    /* c2 kept the dirty mark of the root's entry window (f's create), held
     * when it went down; replicate heals the root's entries once it is back
     * (replicate.c, struct afr_priv.left): until then, c2 alone cannot
     * serve the root's listing */
    ok(cg_clean_soon(&v, ""), "the root's marks are healed");
    is_int(cg_lookup(&v, &bfs_gfid_root, "f", NULL), 0, "lookup (data heal off: c2 stays stale)");
    is_int(plus_size_from(&v, 0), 12, "served by a good copy: attributes kept");
    for (int k = 0; k < 3; k++)
        is_int(plus_size_from(&v, -1), 12, "all answer: the listing starts on a copy never down");
    is_int(plus_size_from(&v, 2), -1, "served by the stale c2: no attributes (the kernel looks up)");
    cg_vol_close(&v);
    if (cg_rep_open(&v, 3, true, NULL) < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "f", "hello", &a);
    is_int(plus_size_from(&v, 2), -1, "served by the arbiter: no file attributes (it has no data)");
    is_int(plus_size_from(&v, 1), 5, "by a data copy: kept");
    cg_vol_close(&v);
}

/* Replica 2, quorum none: a write with c0 failing, then one with c1
 * failing. Returns the file's GFID. */
static void provoke_split(struct cg_vol *v, const char *name, struct bfs_iatt *a)
{
    struct bfs_fd *fd;
    cg_put_settled(v, &bfs_gfid_root, name, "0123456789", a);
    cg_down(v, 0, false);
    cg_open(v, &a->gfid, O_RDWR, &fd);
    cg_write(v, fd, 0, "BBBBBBBBBBBBBBBBBBBB", 20); /* c1: 20 bytes */
    cg_flush_close(v, fd);
    /* close() does not wait for the window's post-op and unlock: c1 must
     * have them before it goes down, and a lookup that found the lock still
     * held would skip the heal the scenarios expect */
    cg_unlocked_soon(v);
    cg_up(v, 0, false);
    usleep(20000); /* distinct mtimes */
    cg_down(v, 1, false);
    cg_open(v, &a->gfid, O_RDWR, &fd);
    cg_write(v, fd, 0, "AAA", 3); /* c0: still 10 bytes, newer */
    cg_flush_close(v, fd);
    cg_unlocked_soon(v);
    cg_up(v, 1, false);
}

static void test_split_brain(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    char buf[64];
    if (cg_rep_open(&v, 2, false, " option cluster.quorum-type none\n") < 0)
        return;
    provoke_split(&v, "sb", &a);
    ok(cg_counter(&v, 0, "sb", "c1", 0) > 0 && cg_counter(&v, 1, "sb", "c0", 0) > 0,
       "each copy blames the other");
    is_int(cg_lookup(&v, &bfs_gfid_root, "sb", NULL), 0, "lookup of a split-brain file succeeds");
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &fd), 0, "open succeeds");
    is_int(cg_read(&v, fd, buf, sizeof(buf)), -EIO, "read: EIO, never one side at random");
    cg_flush_close(&v, fd);
    ok(cg_content_is(&v, 0, "sb", "AAA3456789") && cg_content_is(&v, 1, "sb", "BBBBBBBBBBBBBBBBBBBB"),
       "both copies untouched");

    cg_top_set(&v, "cluster.favorite-child-policy", "size");
    is_int(cg_lookup(&v, &bfs_gfid_root, "sb", NULL), 0, "lookup with favorite-child size");
    ok(cg_content_is(&v, 0, "sb", "BBBBBBBBBBBBBBBBBBBB"), "the bigger copy won");
    ok(cg_clean_soon(&v, "sb"), "counters clean after resolution");
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &fd), 0, "open");
    is_int(cg_read(&v, fd, buf, sizeof(buf)), 20, "read works again");
    cg_flush_close(&v, fd);

    cg_top_set(&v, "cluster.favorite-child-policy", "none");
    provoke_split(&v, "sb2", &a);
    cg_top_set(&v, "cluster.favorite-child-policy", "mtime");
    is_int(cg_lookup(&v, &bfs_gfid_root, "sb2", NULL), 0, "lookup with favorite-child mtime");
    ok(cg_content_is(&v, 1, "sb2", "AAA3456789") && cg_content_is(&v, 0, "sb2", "AAA3456789"),
       "the newer copy won");
    ok(cg_clean_soon(&v, "sb2"), "counters clean");
    cg_vol_close(&v);
}

static void test_arbiter(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    struct stat st;
    if (cg_rep_open(&v, 3, true, NULL) < 0)
        return;
    is_int(cg_put(&v, &bfs_gfid_root, "arb", "payload", NULL), 0, "replica 3 arbiter 1: write");
    is_int(cg_lookup(&v, &bfs_gfid_root, "arb", &a), 0, "lookup");
    ok(cg_same_gfid(&v, "arb", 7), "same GFID on the data bricks and the arbiter");
    ok(cg_content_is(&v, 0, "arb", "payload") && cg_content_is(&v, 1, "arb", "payload"),
       "data on both data bricks");
    ok(stat(cg_on(&v, 2, "arb"), &st) == 0 && st.st_size == 0, "the arbiter holds no data");
    is_int(a.size, 7, "the size answered is a data brick's");

    cg_down(&v, 0, true);
    cg_open(&v, &a.gfid, O_RDWR, &fd);
    is_int(cg_write(&v, fd, 0, "PAYLOAD", 7), 7, "write with c0 down (c1 + arbiter)");
    cg_flush_close(&v, fd);
    ok(cg_counter(&v, 2, "arb", "c0", 0) > 0, "the arbiter blames c0 too");
    cg_up(&v, 0, true);
    cg_down(&v, 1, true);
    is_int(cg_open(&v, &a.gfid, O_RDWR, &fd), 0, "open with c1 down");
    is_int(cg_write(&v, fd, 0, "xx", 2), -ENOTCONN,
           "c0 (stale) + arbiter only: the write is refused, no split-brain");
    cg_flush_close(&v, fd);
    ok(cg_content_is(&v, 0, "arb", "payload"), "c0 untouched");
    cg_up(&v, 1, true);
    is_int(cg_lookup(&v, &bfs_gfid_root, "arb", NULL), 0, "lookup with everyone back");
    ok(cg_content_is(&v, 0, "arb", "PAYLOAD"), "c0 healed from c1");
    ok(stat(cg_on(&v, 2, "arb"), &st) == 0 && st.st_size == 0, "the arbiter still has no data");
    ok(cg_clean_soon(&v, "arb"), "counters clean");
    ok(cg_same_everywhere(&v, "arb", 7, 2), "data copies identical, arbiter metadata too");
    cg_vol_close(&v);
}

static void test_eager_lock(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    if (cg_rep_open(&v, 3, false, " option cluster.post-op-delay-ms 5000\n") < 0)
        return;
    cg_put(&v, &bfs_gfid_root, "e", "", &a);
    cg_open(&v, &a.gfid, O_RDWR, &fd);
    cg_write(&v, fd, 0, "w", 1);
    usleep(100000); /* the create's post-op and unlock run behind its answer */
    uint64_t before = cg_calls_of(&v, 0);
    int bad = 0;
    for (int i = 1; i <= 50; i++)
        bad += cg_write(&v, fd, (uint64_t)i, "w", 1) != 1;
    uint64_t during = cg_calls_of(&v, 0) - before;
    is_int(bad, 0, "50 sequential writes");
    ok(during >= 50 && during <= 52, "about one call per write on a child (no lock, no "
                                     "xattrop; %llu calls)", (unsigned long long)during);
    is_int(cg_counter(&v, 0, "e", "dirty", 0), 1, "while writing, the dirty mark stays (delayed post-op)");
    is_int(cg_flush_close(&v, fd), 0, "close");
    /* close starts the release and answers without waiting for its post-op */
    ok(cg_clean_soon(&v, "e"), "close ends it: the post-op behind its answer cleans the counters");
    cg_vol_close(&v);
}

/* A write's payload is lent to replicate until the wind returns
 * (replicate-write.c, struct afr_wtxn): the first write of a lock window
 * is wound only after the lock answered — replicate must keep a copy — and
 * a write that joins the held lock is wound at once. Either way the
 * caller's buffer, rewritten as soon as the wind returns, must not be what
 * lands on the bricks. Every child answers 100 ms late (error-gen), so the
 * lock is still being taken when the first wind returns.
 *
 * lent_write_at: a write of len bytes of c at off whose buffer is
 * scribbled over when the wind returns (cg_scribbled_write); its answer,
 * *early whether it had answered before the wind returned. */
static int lent_write_at(struct cg_vol *v, struct bfs_fd *fd, uint64_t off, size_t len, char c,
                         bool *early)
{
    char *src = malloc(len);
    if (!src)
        return -ENOMEM;
    memset(src, c, len);
    int rc = cg_scribbled_write(v, fd, off, src, len, early);
    free(src);
    return rc;
}

static void test_lent_payload(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    enum { LEN = 256 * 1024 };
    if (cg_rep_open(&v, 3, false, " option cluster.post-op-delay-ms 5000\n") < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "lent", "", &a);
    is_int(cg_open(&v, &a.gfid, O_RDWR, &fd), 0, "open");
    for (int i = 0; i < 3; i++)
        cg_reconf(&v, i, "delay-ms", "100");
    bool early1 = true, early2 = true;
    uint64_t lent0 = cg_top_stat(&v, "writes_lent"), copied0 = cg_top_stat(&v, "writes_copied");
    is_int(lent_write_at(&v, fd, 0, LEN, 'a', &early1), LEN, "first write (takes the lock)");
    ok(!early1, "it was not answered before its wind returned");
    is_int(cg_top_stat(&v, "writes_copied") - copied0, 1, "its payload was copied (wound later)");
    is_int(lent_write_at(&v, fd, LEN, LEN, 'b', &early2), LEN, "second write (joins the lock)");
    ok(!early2, "nor was the second");
    is_int(cg_top_stat(&v, "writes_lent") - lent0, 1, "its payload was not copied (wound at once)");
    for (int i = 0; i < 3; i++)
        cg_reconf(&v, i, "delay-ms", "0");
    cg_flush_close(&v, fd);
    static char want[2 * LEN], got[2 * LEN + 1];
    memset(want, 'a', LEN);
    memset(want + LEN, 'b', LEN);
    int good = 0;
    for (int i = 0; i < 3; i++)
        good += cg_slurp(cg_on(&v, i, "lent"), got, sizeof(got)) == 2 * LEN &&
                memcmp(got, want, sizeof(want)) == 0;
    is_int(good, 3, "every copy has the bytes as they were when written, not the buffer's later ones");
    ok(cg_clean_soon(&v, "lent"), "counters clean");
    cg_vol_close(&v);
}

/* Writers of the same range through one fd: a write overlapping one in
 * flight is queued and woken on another thread, which may wind it while
 * its caller is still deciding whether to copy (struct afr_wtxn's mutex).
 * Each write covers the whole range with one byte and its caller then
 * scribbles 'X' over its buffer as soon as the wind returns: the copies
 * must end identical, holding one writer's byte everywhere and never an
 * 'X'. It drives both paths (lent and copied) from several threads at
 * once; its content check sees the last write only ("lent" checks the
 * copy itself). */
enum { RACE_LEN = 64 * 1024 };

struct lent_racer {
    struct cg_vol *v;
    struct bfs_fd *fd;
    int id, bad;
};

static void *lent_racer_main(void *arg)
{
    struct lent_racer *r = arg;
    for (int i = 0; i < 30; i++) {
        bool early;
        r->bad += lent_write_at(r->v, r->fd, 0, RACE_LEN, (char)('a' + r->id), &early) != RACE_LEN;
    }
    return NULL;
}

static void test_lent_race(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "race", "", &a);
    is_int(cg_open(&v, &a.gfid, O_RDWR, &fd), 0, "open");
    struct lent_racer r[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (struct lent_racer){.v = &v, .fd = fd, .id = i};
        pthread_create(&th[i], NULL, lent_racer_main, &r[i]);
    }
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        bad += r[i].bad;
    }
    is_int(bad, 0, "4 threads x 30 writes of the same 64 KiB");
    cg_flush_close(&v, fd);
    static char got[RACE_LEN + 1];
    int good = 0;
    for (int i = 0; i < 3; i++) {
        bool same = cg_slurp(cg_on(&v, i, "race"), got, sizeof(got)) == RACE_LEN &&
                    got[0] >= 'a' && got[0] <= 'd';
        for (int k = 1; same && k < RACE_LEN; k++)
            same = got[k] == got[0];
        good += same;
    }
    is_int(good, 3, "each copy holds one writer's bytes throughout (no scribble)");
    ok(cg_same_everywhere(&v, "race", 7, -1), "the copies are identical");
    printf("# writes lent %llu, copied %llu\n", (unsigned long long)cg_top_stat(&v, "writes_lent"),
           (unsigned long long)cg_top_stat(&v, "writes_copied"));
    cg_vol_close(&v);
}

static void test_read_failover(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    char buf[32];
    if (cg_rep_open(&v, 3, false, " option cluster.read-policy first-up\n") < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "r", "readme", &a);
    cg_open(&v, &a.gfid, O_RDONLY, &fd);
    cg_fault(&v, 0, "EIO", "read");
    is_int(cg_read(&v, fd, buf, sizeof(buf)), 6, "first-up child fails reads: another copy answers");
    ok(memcmp(buf, "readme", 6) == 0, "with the right data");
    cg_reconf(&v, 0, "failure", "0");
    cg_flush_close(&v, fd);
    cg_vol_close(&v);
}

static void test_replica2_quorum(void)
{
    struct cg_vol v;
    if (cg_rep_open(&v, 2, false, NULL) < 0) /* quorum-type auto by default */
        return;
    cg_down(&v, 1, true);
    is_int(cg_put(&v, &bfs_gfid_root, "first", "x", NULL), 0,
           "replica 2, auto: the first child alone has quorum");
    cg_up(&v, 1, true);
    is_int(cg_lookup(&v, &bfs_gfid_root, NULL, NULL), 0, "root lookup heals the entry");
    cg_down(&v, 0, true);
    is_int(cg_put(&v, &bfs_gfid_root, "second", "x", NULL), -EROFS,
           "replica 2, auto: the second child alone has not");
    cg_up(&v, 0, true);
    is_int(cg_lookup(&v, &bfs_gfid_root, "first", NULL), 0, "lookup first: its own heal");
    ok(cg_same_everywhere(&v, "first", 3, -1), "first healed onto c1");
    cg_vol_close(&v);
}

static void test_reads_avoid_stale(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    char buf[32];
    if (cg_rep_open(&v, 3, false, " option cluster.read-policy first-up\n"
                               " option cluster.data-self-heal off\n") < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "s", "stale", &a);
    is_int(cg_write_fails_on(&v, 0, &a.gfid, "FRESH"), 5, "a write that fails on c0 only (ENOSPC)");
    ok(cg_counter(&v, 1, "s", "c0", 0) > 0, "c0 is blamed");
    ok(cg_content_is(&v, 0, "s", "stale"), "c0 kept the old data");
    is_int(cg_lookup(&v, &bfs_gfid_root, "s", NULL), 0, "lookup (data heal off)");
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &fd), 0, "open");
    is_int(cg_read(&v, fd, buf, sizeof(buf)), 5, "read");
    ok(memcmp(buf, "FRESH", 5) == 0, "first-up policy, yet the read avoids the stale c0");
    cg_flush_close(&v, fd);
    cg_vol_close(&v);
}

static void test_background_heal(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    if (cg_rep_open(&v, 3, false, " option cluster.background-self-heal-count 8\n") < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "bg", "before", &a);
    cg_down(&v, 2, false);
    cg_open(&v, &a.gfid, O_RDWR, &fd);
    cg_write(&v, fd, 0, "AFTER!", 6);
    cg_flush_close(&v, fd);
    cg_up(&v, 2, false);
    is_int(cg_lookup(&v, &bfs_gfid_root, "bg", NULL), 0, "lookup answers at once");
    bool healed = false;
    for (int i = 0; i < 300 && !healed; i++) {
        healed = cg_content_is(&v, 2, "bg", "AFTER!") && cg_all_clean(&v, "bg");
        if (!healed)
            usleep(10000);
        /* a lookup made while our close's post-op is still out starts no
         * data heal (the marks are our window's): look again */
        if (!healed && i % 20 == 19)
            cg_lookup(&v, &bfs_gfid_root, "bg", NULL);
    }
    ok(healed, "the background heal made c2's copy equal and the counters clean");
    cg_vol_close(&v);
}

/* The unlock of a change runs behind its answer. A brick that goes away
 * (its connection closes) between the answer and the unlock drops the
 * lock itself: the next heal, once the brick is back, must not wait for a
 * lock nobody holds any more. */
static void test_unlock_lost_on_down(void)
{
    struct cg_vol v;
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    /* c1 answers xattrops late: the create's post-op is still out when the
     * caller has its answer and c1 goes down, so its unlock on c1 fails */
    cg_reconf(&v, 1, "enable", "xattrop");
    cg_reconf(&v, 1, "delay-ms", "300");
    is_int(cg_create(&v, &bfs_gfid_root, "f", NULL, NULL), 0, "create (post-op on c1 slow)");
    cg_reconf(&v, 1, "enable", "all");
    cg_reconf(&v, 1, "delay-ms", "0");
    cg_down(&v, 1, true);
    bool unlocked = false; /* c2 is unlocked after c1's unlock was tried */
    for (int i = 0; i < 500 && !unlocked; i++) {
        unlocked = cg_entrylk_on(&v, 2, &bfs_gfid_root, "f", true, 77) == 0;
        if (!unlocked)
            usleep(10000);
    }
    ok(unlocked, "the create's lock is released on c2");
    cg_entrylk_on(&v, 2, &bfs_gfid_root, "f", false, 77);
    cg_up(&v, 1, true);
    is_int(cg_lookup_within(&v, &bfs_gfid_root, NULL, 20000, "root lookup"), 0,
           "root lookup after c1 returns answers");
    ok(cg_clean_soon(&v, ""), "and the root's dirty mark on c1 was healed");
    cg_vol_close(&v);
}

/* cluster.quorum-reads: without quorum a read may see a copy that missed
 * acknowledged writes (replica 2: c0 took a write alone, then c1 alone is
 * asked); with the option on it answers ENOTCONN instead. */
static void test_quorum_reads(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    char buf[16] = "";
    if (cg_rep_open(&v, 2, false, NULL) < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "q", "old", &a);
    cg_down(&v, 1, true);
    cg_open(&v, &a.gfid, O_RDWR, &fd);
    is_int(cg_write(&v, fd, 0, "new", 3), 3, "c0 alone takes a write (it has quorum)");
    cg_flush_close(&v, fd);
    cg_up(&v, 1, true);
    cg_down(&v, 0, true);
    cg_open(&v, &a.gfid, O_RDONLY, &fd);
    is_int(cg_read(&v, fd, buf, sizeof(buf)), 3, "quorum-reads off: c1 alone answers a read...");
    ok(memcmp(buf, "old", 3) == 0, "...with its older copy");
    cg_top_set(&v, "cluster.quorum-reads", "on");
    is_int(cg_read(&v, fd, buf, sizeof(buf)), -ENOTCONN, "quorum-reads on: refused");
    struct bfs_stat_req sr = {0};
    sr.loc.gfid = a.gfid;
    is_int(bfs_sync_stat(v.top, v.st, &sr, NULL), -ENOTCONN, "stat too");
    is_int(cg_lookup(&v, &bfs_gfid_root, "q", NULL), 0, "lookups go on (names stay visible)");
    cg_flush_close(&v, fd);
    cg_up(&v, 0, true);
    cg_open(&v, &a.gfid, O_RDONLY, &fd);
    is_int(cg_read(&v, fd, buf, sizeof(buf)), 3, "with quorum again reads work...");
    ok(memcmp(buf, "new", 3) == 0, "...and see the acknowledged write");
    cg_flush_close(&v, fd);
    cg_vol_close(&v);
}


/* A brick that hangs (SIGSTOP) and is then declared down: every call to
 * it answers ENOTCONN late, then CHILD_DOWN. Changes through an fd in
 * flight meanwhile must succeed on the two others (quorum), never EIO. */
struct trunc_loop {
    struct cg_vol *v;
    struct bfs_gfid g;
    volatile bool stop;
    int ops, errors, last_err;
};

static void *trunc_main(void *arg)
{
    struct trunc_loop *t = arg;
    struct bfs_stack *st = bfs_stack_new();
    unsigned seed = 7;
    while (!t->stop) {
        struct bfs_inode *inode = bfs_inode_get(t->v->g->itable, &t->g, S_IFREG);
        struct bfs_fd *fd = bfs_fd_new(t->v->g, inode, O_WRONLY, 0);
        bfs_inode_unref(inode);
        struct bfs_open_req oq = {.fd = fd, .flags = O_WRONLY};
        oq.loc.gfid = t->g;
        int rc = bfs_sync_open(t->v->top, st, &oq, NULL);
        if (rc == 0) {
            struct bfs_ftruncate_req tq = {.fd = fd, .offset = rand_r(&seed) % 5000};
            rc = bfs_sync_ftruncate(t->v->top, st, &tq, NULL);
            if (rc >= 0) {
                struct bfs_fsync_req fq = {.fd = fd};
                rc = bfs_sync_fsync(t->v->top, st, &fq, NULL);
            }
            struct bfs_flush_req cq = {.fd = fd};
            int frc = bfs_sync_flush(t->v->top, st, &cq, NULL);
            rc = rc < 0 ? rc : frc;
        }
        bfs_fd_unref(fd);
        t->ops++;
        if (rc < 0) {
            t->errors++;
            t->last_err = rc;
        }
    }
    bfs_stack_unref(st);
    return NULL;
}

static void test_hung_brick(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "t", "0123456789", &a);
    struct trunc_loop t = {.v = &v, .g = a.gfid};
    pthread_t th;
    pthread_create(&th, NULL, trunc_main, &t);
    for (int round = 0; round < 5; round++) {
        usleep(100000);
        cg_reconf(&v, 1, "delay-ms", "300"); /* hangs ... */
        cg_reconf(&v, 1, "failure", "100");
        usleep(350000);
        cg_down(&v, 1, true);                /* ... then the ping timeout */
        cg_reconf(&v, 1, "delay-ms", "0");
        usleep(100000);
        cg_up(&v, 1, true);
    }
    t.stop = true;
    pthread_join(th, NULL);
    printf("# %d open/ftruncate/fsync/flush rounds, %d errors (last %d)\n", t.ops, t.errors,
           t.last_err);
    ok(t.ops > 0, "the writer ran");
    is_int(t.errors, 0, "no change failed while c1 hung and went down");
    cg_vol_close(&v);
}

struct writer {
    struct cg_vol *v;
    struct bfs_fd *fd;
    int id, bad;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    char buf[64];
    unsigned seed = (unsigned)w->id * 7919u;
    memset(buf, 'a' + w->id, sizeof(buf));
    for (int i = 0; i < 60; i++) {
        uint64_t off = rand_r(&seed) % 2000; /* overlapping ranges on purpose */
        size_t len = 1 + rand_r(&seed) % sizeof(buf);
        w->bad += cg_write(w->v, w->fd, off, buf, len) != (int)len;
    }
    return NULL;
}

static void test_concurrent_writes(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "cw", "", &a);
    cg_open(&v, &a.gfid, O_RDWR, &fd);
    struct writer w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct writer){.v = &v, .fd = fd, .id = i};
        pthread_create(&th[i], NULL, writer_main, &w[i]);
    }
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        bad += w[i].bad;
    }
    is_int(bad, 0, "4 threads x 60 overlapping writes through one fd");
    cg_flush_close(&v, fd);
    ok(cg_same_everywhere(&v, "cw", 7, -1), "the copies are byte for byte identical");
    ok(cg_clean_soon(&v, "cw"), "counters clean");
    cg_vol_close(&v);
}

/* The last readdir of a listing (the one that confirms the end) may come
 * after the copy that served the listing went away (a replace-brick: the
 * kernel asks once more at the end offset). The listing is complete: it
 * is answered empty with end-of-directory, not ENOTCONN (an `ls` that
 * failed in tests/integration/243 with cluster.entry-eager-lock on). */
static void test_listing_end(void)
{
    struct cg_vol v;
    struct bfs_iatt d;
    if (cg_rep_open(&v, 3, false, " option cluster.read-policy first-up\n") < 0)
        return;
    struct bfs_fd *dfd = cg_dir_of_names(&v, "ld", 3, &d);
    if (!ok(dfd != NULL, "a folder of 3 names, opened")) {
        cg_vol_close(&v);
        return;
    }
    uint64_t r0 = cg_fop_calls(&v, 0, "readdir");
    bool eod = false;
    uint64_t off = 0, mid = 0, next = 0;
    int names = cg_list_to_end(&v, dfd, 8, &eod, &mid, &off); /* one name per call */
    is_int(names, 3, "the listing gives the 3 names, one per call");
    ok(eod, "to the end of the directory");
    ok(cg_fop_calls(&v, 0, "readdir") > r0, "c0 served it (first-up)");
    cg_down(&v, 0, false);
    is_int(cg_readdir_at(&v, dfd, off, 4096, &eod, &next), 0,
           "c0 fails (not known down): the readdir at the end offset answers empty");
    ok(eod, "with end-of-directory");
    cg_down(&v, 0, true);
    is_int(cg_readdir_at(&v, dfd, off, 4096, &eod, &next), 0, "c0 known down: empty again");
    ok(eod, "with end-of-directory");
    ok(cg_readdir_at(&v, dfd, mid, 4096, &eod, &next) < 0,
       "a readdir from the middle of that listing still fails (its copy is gone)");
    bfs_fd_unref(dfd);
    cg_up(&v, 0, true);
    cg_vol_close(&v);
}

static void test_misc_fops(void)
{
    struct cg_vol v;
    struct bfs_iatt a, d;
    struct bfs_fd *fd;
    char buf[32];
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    struct bfs_fd *dfd = cg_dir_of_names(&v, "dir", 5, &d);
    ok(dfd != NULL, "opendir");
    int count = 0;
    uint64_t off = 0;
    for (bool eod = false; !eod;) {
        int rc = cg_readdir_at(&v, dfd, off, 100, &eod, &off);
        if (rc < 0)
            break;
        count += rc;
    }
    is_int(count, 5, "readdir in small pieces lists the 5 names once (sticky child)");
    bfs_fd_unref(dfd);

    struct bfs_statfs_req sreq = {0};
    struct bfs_statfs_rep srep;
    sreq.loc.gfid = bfs_gfid_root;
    ok(bfs_sync_statfs(v.top, v.st, &sreq, &srep) == 0 && srep.buf.bsize > 0, "statfs");
    bfs_statfs_rep_clear_dup(&srep);

    cg_put_settled(&v, &bfs_gfid_root, "t", "to be truncated", &a);
    is_int(cg_open(&v, &a.gfid, O_RDWR | O_TRUNC, &fd), 0, "open with O_TRUNC");
    struct bfs_fsync_req fs = {.fd = fd};
    is_int(bfs_sync_fsync(v.top, v.st, &fs, NULL), 0, "fsync");
    struct bfs_lk_req lr = {.fd = fd, .cmd = BFS_LK_SETLK};
    lr.lock.type = F_WRLCK;
    lr.lock.owner = 42;
    is_int(bfs_sync_lk(v.top, v.st, &lr, NULL), 0, "a POSIX lock on every copy");
    lr.lock.type = F_UNLCK;
    is_int(bfs_sync_lk(v.top, v.st, &lr, NULL), 0, "and its unlock");
    is_int(cg_read(&v, fd, buf, sizeof(buf)), 0, "the file reads empty");
    cg_flush_close(&v, fd);
    ok(cg_content_is(&v, 0, "t", "") && cg_content_is(&v, 1, "t", "") && cg_content_is(&v, 2, "t", ""),
       "truncated on every brick");
    ok(cg_clean_soon(&v, "t"), "counters clean");

    /* an entry lock from above that one copy refuses is undone on the others */
    cg_fault(&v, 1, "EAGAIN", "entrylk");
    struct bfs_entrylk_req el = {.domain = "above", .basename = "n",
                                 .cmd = BFS_ENTRYLK_LOCK_NB, .type = BFS_ENTRYLK_WRLCK};
    el.loc.gfid = bfs_gfid_root;
    is_int(bfs_sync_entrylk(v.top, v.st, &el, NULL), -EAGAIN, "entrylk refused by one copy");
    cg_reconf(&v, 1, "failure", "0");
    struct bfs_stack *other = bfs_stack_new();
    other->lk_owner = 777;
    is_int(bfs_sync_entrylk(v.top, other, &el, NULL), 0,
           "another owner gets it: the partial grant was released");
    el.cmd = BFS_ENTRYLK_UNLOCK;
    is_int(bfs_sync_entrylk(v.top, other, &el, NULL), 0, "unlock");
    bfs_stack_unref(other);

    cg_mkdir(&v, &bfs_gfid_root, "other", &a);
    struct bfs_rename_req rn = {.oldloc = cg_L(&d.gfid, "e0"), .newloc = cg_L(&a.gfid, "moved")};
    is_int(bfs_sync_rename(v.top, v.st, &rn, NULL), 0, "rename across directories");
    ok(cg_exists(&v, 0, "other/moved") && cg_exists(&v, 2, "other/moved") && !cg_exists(&v, 1, "dir/e0"),
       "moved on every brick");
    ok(cg_clean_soon(&v, "dir") && cg_clean_soon(&v, "other"), "both parents' counters clean");
    cg_vol_close(&v);
}

static void test_fix_open(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "fo", "aaaa", &a);
    cg_down(&v, 1, true);
    is_int(cg_open(&v, &a.gfid, O_RDWR, &fd), 0, "open while c1 is down");
    cg_up(&v, 1, true);
    is_int(cg_write(&v, fd, 0, "bbbb", 4), 4, "write after c1 is back");
    cg_flush_close(&v, fd);
    ok(cg_content_is(&v, 1, "fo", "bbbb"), "the fd was re-opened on c1 and the write reached it");
    ok(cg_clean_soon(&v, "fo"), "so nobody blames c1");
    cg_vol_close(&v);
}

static void test_notify(void)
{
    struct cg_vol v;
    cg_events_up = cg_events_down = 0;
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    is_int(cg_events_up, 1, "one CHILD_UP once the children are up");
    cg_down(&v, 0, true);
    cg_down(&v, 1, true);
    is_int(cg_events_down, 0, "no CHILD_DOWN while a child is up (reads go on)");
    cg_down(&v, 2, true);
    is_int(cg_events_down, 1, "CHILD_DOWN when the last child goes");
    is_int(cg_lookup(&v, &bfs_gfid_root, NULL, NULL), -ENOTCONN, "nothing up: ENOTCONN");
    cg_up(&v, 2, true);
    is_int(cg_events_up, 2, "CHILD_UP again with one child (every child has reported)");
    is_int(cg_lookup(&v, &bfs_gfid_root, NULL, NULL), 0, "reads go on without quorum");
    cg_up(&v, 0, true);
    cg_up(&v, 1, true);
    is_int(cg_events_up, 2, "no repeated CHILD_UP");
    cg_vol_close(&v);
}

/* storage/posix's part: lookup answers the xattrs named in xattr-req. */
static void test_posix_xattr_req(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    if (cg_rep_open(&v, 2, false, NULL) < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "x", "x", &a);
    setxattr(cg_on(&v, 0, "x"), "user.u", "1", 1, 0);
    setxattr(cg_on(&v, 0, "x"), "trusted.t", "2", 1, 0);
    setxattr(cg_on(&v, 0, "x"), "trusted.brickfs.afr.c1", "123456781234567812345678", 24, 0);
    struct bfs_xl *brick = bfs_graph_find(v.g, "b0");
    struct bfs_stack *user = bfs_stack_new();
    user->uid = user->gid = 1000;
    struct bfs_lookup_req req = {.loc = cg_L(&bfs_gfid_root, "x"), .xdata = bfs_dict_new()};
    bfs_dict_set_str(req.xdata, "xattr-req",
                     "user.u,trusted.t,trusted.brickfs.afr.c1,trusted.brickfs.gfid,user.none");
    for (int who = 0; who < 2; who++) {
        struct bfs_lookup_rep rep;
        int rc = bfs_sync_lookup(brick, who ? user : v.st, &req, &rep);
        const char *tag = who ? "uid 1000" : "root";
        is_int(rc, 0, "posix lookup with xattr-req (%s)", tag);
        ok(bfs_dict_has(rep.xdata, "user.u"), "a user xattr is answered (%s)", tag);
        ok(bfs_dict_has(rep.xdata, "trusted.brickfs.afr.c1"),
           "replicate's counters are answered (%s)", tag);
        ok(!bfs_dict_has(rep.xdata, "trusted.brickfs.gfid"),
           "other brickfs xattrs are not (%s)", tag);
        ok(!bfs_dict_has(rep.xdata, "user.none"), "absent ones are left out (%s)", tag);
        is_int(bfs_dict_has(rep.xdata, "trusted.t"), !who, "trusted.* only for root (%s)", tag);
        bfs_lookup_rep_clear_dup(&rep);
    }
    bfs_dict_unref(req.xdata);
    bfs_stack_unref(user);
    struct bfs_lookup_rep rep;
    req.xdata = NULL;
    is_int(cg_lookup(&v, &bfs_gfid_root, "x", NULL), 0, "through replicate");
    req.loc = cg_L(&bfs_gfid_root, "x");
    bfs_sync_lookup(v.top, v.st, &req, &rep);
    ok(!bfs_dict_has(rep.xdata, "trusted.brickfs.afr.c1"),
       "replicate takes its counters out of the reply");
    bfs_lookup_rep_clear_dup(&rep);
    cg_vol_close(&v);
}

/* Another lock owner takes the file's data lock on child i (blocking, in
 * replicate's domain, as another client's window would) and gives it
 * back: 0, or the lock's error. */
static int data_lock_on(struct cg_vol *v, int i, const struct bfs_gfid *g, uint64_t owner)
{
    struct bfs_stack *st = bfs_stack_new();
    st->lk_owner = owner;
    struct bfs_inodelk_req req = {.domain = "rep", .cmd = BFS_LK_SETLKW};
    req.loc.gfid = *g;
    req.lock.type = F_WRLCK;
    req.lock.whence = SEEK_SET;
    req.lock.owner = owner;
    int rc = bfs_sync_inodelk(cg_child(v, i), st, &req, NULL);
    if (rc == 0) {
        req.cmd = BFS_LK_SETLK;
        req.lock.type = F_UNLCK;
        (void)bfs_sync_inodelk(cg_child(v, i), st, &req, NULL);
    }
    bfs_stack_unref(st);
    return rc;
}

/* close() answers once the release of the file's eager lock has started,
 * not when its post-op has answered (replicate-fd.c, afr_flush): c1
 * answers its xattrops 1.5 s late (they reach the brick at once), and the
 * close is back before that. The write was acknowledged on every copy; the
 * post-op clears the marks behind the answer. A new open and write of the
 * file meanwhile wait for that release and go through, so does another
 * owner's lock on every brick, and nothing is lost. */
static void test_flush_early(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "fe", "0123", &a);
    is_int(cg_open(&v, &a.gfid, O_RDWR, &fd), 0, "open");
    is_int(cg_write(&v, fd, 0, "abcd", 4), 4, "write (takes the eager lock)");
    cg_reconf(&v, 1, "enable", "fxattrop,xattrop");
    cg_reconf(&v, 1, "delay-ms", "1500");
    uint64_t t0 = bfs_now_ms();
    is_int(cg_flush_close(&v, fd), 0, "close");
    uint64_t took = bfs_now_ms() - t0;
    ok(took < 1000, "close answered before c1's post-op did (%llu ms; c1 answers 1.5 s late)",
       (unsigned long long)took);
    for (int i = 0; i < 3; i++)
        ok(cg_content_is(&v, i, "fe", "abcd"), "c%d holds the acknowledged write", i);
    /* the release is still out (c1's post-op answer, then the unlock) */
    is_int(cg_open(&v, &a.gfid, O_RDWR, &fd), 0, "open again while the release is out");
    is_int(cg_write(&v, fd, 0, "efgh", 4), 4, "a write of the new open waits for it, then goes");
    cg_reconf(&v, 1, "delay-ms", "0");
    cg_reconf(&v, 1, "enable", "all");
    is_int(cg_flush_close(&v, fd), 0, "close");
    for (int i = 0; i < 3; i++)
        is_int(data_lock_on(&v, i, &a.gfid, 4242), 0, "another owner's data lock on c%d", i);
    for (int i = 0; i < 3; i++)
        ok(cg_content_is(&v, i, "fe", "efgh"), "c%d holds the second write", i);
    ok(cg_clean_soon(&v, "fe"), "the post-ops behind the answers cleared every mark");
    cg_vol_close(&v);
}

/* A brick lost between the last write and the post-op that ends the
 * window: its copy keeps the dirty mark (no blame: it has every
 * acknowledged write); the next lookup heals it and the data is intact. */
static void test_lost_before_postop(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "lp", "0123", &a);
    is_int(cg_open(&v, &a.gfid, O_RDWR, &fd), 0, "open");
    is_int(cg_write(&v, fd, 0, "WXYZ", 4), 4, "write acknowledged by every copy");
    cg_down(&v, 1, false); /* dies holding the window's dirty mark */
    is_int(cg_flush_close(&v, fd), 0, "close");
    ok(cg_unlocked_soon(&v), "the window's lock released (else the lookup skips its heal)");
    cg_up(&v, 1, false);
    ok(cg_counter(&v, 1, "lp", "dirty", 0) > 0 && cg_counter(&v, 0, "lp", "c1", 0) == 0,
       "c1 kept its dirty mark, nobody blames it");
    is_int(cg_lookup(&v, &bfs_gfid_root, "lp", NULL), 0, "lookup (heals)");
    ok(cg_clean_soon(&v, "lp"), "the mark was healed");
    for (int i = 0; i < 3; i++)
        ok(cg_content_is(&v, i, "lp", "WXYZ"), "c%d holds the acknowledged write", i);
    cg_vol_close(&v);
}

/* What a lookup learnt stays for the open and the read that follow, even
 * though nobody held the inode when the lookup answered (the mount takes
 * it afterwards): the read sends no lookup of its own (replicate.h,
 * afr_priv.recent). */
static void test_recent_lookup(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    struct bfs_fd *fd;
    char buf[16] = "";
    if (cg_rep_open(&v, 3, false, NULL) < 0)
        return;
    cg_put_settled(&v, &bfs_gfid_root, "rl", "recent", &a);
    uint64_t l0[3];
    cg_fop_counts(&v, "lookup", l0);
    is_int(cg_lookup(&v, &bfs_gfid_root, "rl", &a), 0, "lookup, inode held by nobody");
    is_int(cg_open(&v, &a.gfid, O_RDONLY, &fd), 0, "open");
    is_int(cg_read(&v, fd, buf, sizeof(buf)), 6, "read");
    cg_flush_close(&v, fd);
    ok(memcmp(buf, "recent", 6) == 0, "the file's bytes");
    for (int i = 0; i < 3; i++)
        is_int((int)(cg_fop_calls(&v, i, "lookup") - l0[i]), 1,
               "c%d: one lookup (the read did not refresh what the lookup learnt)", i);
    cg_vol_close(&v);
}

int main(void)
{
    static const struct cg_test tests[] = {
        {"basic", test_basic_replica3}, {"data", test_pending_and_data_heal},
        {"entry", test_entry_heal},     {"meta", test_metadata_heal},
        {"quorum", test_quorum},        {"split", test_split_brain},
        {"arbiter", test_arbiter},      {"eager", test_eager_lock},
        {"failover", test_read_failover}, {"replica2", test_replica2_quorum},
        {"stale", test_reads_avoid_stale}, {"background", test_background_heal},
        {"posix", test_posix_xattr_req}, {"concurrent", test_concurrent_writes},
        {"misc", test_misc_fops},       {"notify", test_notify},
        {"fixopen", test_fix_open},     {"lostunlock", test_unlock_lost_on_down},
        {"quorumreads", test_quorum_reads}, {"hung", test_hung_brick},
        {"unacked", test_quorum_lost_write}, {"plusattrs", test_readdirplus_attrs},
        {"flushearly", test_flush_early}, {"lostpostop", test_lost_before_postop},
        {"recent", test_recent_lookup}, {"lent", test_lent_payload},
        {"lentrace", test_lent_race}, {"listend", test_listing_end},
    };
    plan_lazy();
    if (!cg_main("afr", tests, sizeof(tests) / sizeof(tests[0]), "AFR_TEST"))
        return 0;
    return done_testing();
}
