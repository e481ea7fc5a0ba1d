/*
 * test_distribute_migrate.c — cluster/distribute over 3 storage/posix
 * bricks (tests/lib/dht-graph.c) while the rebalance moves a file
 * (docs/design/rebalance.md): the test plays the rebalance's part directly
 * on the bricks (the copy with the same GFID on the destination, the
 * source's mark and freeze) and checks through distribute and in the brick
 * folders underneath.
 *
 * Asserts: an open(O_TRUNC), an ftruncate through an fd opened before the
 * move and a write landing on a source the rebalance froze follow the file
 * to its new brick; with a link file of the same GFID on a third brick (a
 * renamed file being moved), a write follows the brick the source's mark
 * names, not the first one a search by GFID meets; a write through an
 * O_WRONLY fd follows too, on a frozen and on a dropped source; a write
 * through an O_APPEND fd that the last copy carried is not appended twice,
 * and one after it is appended at the destination's end; a chmod, and a
 * chown, landing on the frozen source in the move's last round trips
 * follow, and so do the writes after them.
 *
 * Needs root (trusted xattrs on the bricks); skips otherwise. DHT_TEST_LOG:
 * the log level.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/dht-graph.h"
#include "../lib/tap.h"
#include "core/graph.h"

static int open_(struct dg_vol *v, const struct bfs_gfid *g, int flags, struct bfs_fd **out)
{
    struct bfs_inode *in = bfs_inode_get(v->g->itable, g, S_IFREG); /* as a mount's fds */
    *out = bfs_fd_new(v->g, in, flags, 0);
    if (in)
        bfs_inode_unref(in);
    struct bfs_open_req o = {.loc = dg_LG(g), .fd = *out, .flags = (uint32_t)flags};
    return bfs_sync_open(v->top, dg_st, &o, NULL);
}

static long disk_size(struct dg_vol *v, int b, const char *rel)
{
    struct stat sb;
    return stat(dg_on_disk(v, b, rel), &sb) == 0 ? (long)sb.st_size : -1;
}

/* The content of rel on brick b, read from its folder (NUL-terminated). */
static const char *disk_read(struct dg_vol *v, int b, const char *rel, char *buf, size_t len)
{
    ssize_t n = cg_slurp(dg_on_disk(v, b, rel), buf, len - 1);
    buf[n > 0 ? n : 0] = 0;
    return buf;
}

/* create (root, name) on brick xl with GFID g and mode (content data) */
static int brick_put(struct dg_vol *v, struct bfs_xl *xl, const char *name,
                     const struct bfs_gfid *g, uint32_t mode, const char *data)
{
    struct bfs_fd *fd = bfs_fd_new(v->g, NULL, O_WRONLY, 0);
    struct bfs_dict *xd = bfs_dict_new();
    bfs_dict_set_bin(xd, "gfid-req", g->b, 16);
    struct bfs_create_req c = {.loc = cg_L(&bfs_gfid_root, name), .fd = fd,
                               .flags = O_WRONLY | O_CREAT | O_EXCL, .mode = mode, .xdata = xd};
    int rc = bfs_sync_create(xl, dg_st, &c, NULL);
    struct bfs_write_req w = {.fd = fd, .data = {data, strlen(data)}};
    if (rc >= 0 && *data)
        rc = bfs_sync_write(xl, dg_st, &w, NULL);
    bfs_dict_unref(xd);
    bfs_fd_unref(fd);
    return rc;
}

/* The rebalance's freeze of g on brick xl (rebalance.md, step 3): the
 * mark "MODE DEST", then the mode with S_ISVTX|S_ISGID. */
static int brick_freeze_mode(struct bfs_xl *xl, const struct bfs_gfid *g, const char *dest,
                             unsigned mode)
{
    char val[32];
    int len = snprintf(val, sizeof(val), "%o %s", mode, dest);
    struct bfs_dict *mark = bfs_dict_new(), *internal = bfs_dict_new();
    bfs_dict_set_bin(mark, "trusted.brickfs.dht.migrating", val, (size_t)len);
    bfs_dict_set_int(internal, "brickfs-internal", 1);
    struct bfs_setxattr_req mk = {.loc = dg_LG(g), .xattrs = mark, .xdata = internal};
    struct bfs_setattr_req fz = {.loc = dg_LG(g), .valid = BFS_SET_MODE};
    fz.attr.mode = mode | S_ISVTX | S_ISGID;
    int rc = bfs_sync_setxattr(xl, dg_st, &mk, NULL);
    if (rc >= 0)
        rc = bfs_sync_setattr(xl, dg_st, &fz, NULL);
    bfs_dict_unref(mark);
    bfs_dict_unref(internal);
    return rc;
}

static int brick_freeze(struct bfs_xl *xl, const struct bfs_gfid *g, const char *dest)
{
    return brick_freeze_mode(xl, g, dest, 0644);
}

/* A renamed file being moved: besides the source (brick 0) and the copy
 * (brick 2), a link file of the same GFID on brick 1 (where the previous
 * table hashed its name). A write through an fd on the source must reach
 * brick 2: the source's mark names it (a search by GFID would meet brick
 * 1's link file first). */
static void test_follow_mark(struct dg_vol *v, struct bfs_xl *b0, struct bfs_xl *b1,
                             struct bfs_xl *b2)
{
    char name[32], buf[64];
    struct bfs_gfid g;
    dg_name_on(v, &bfs_gfid_root, "mk", 0, name, sizeof(name));
    is_int(dg_put(v, &bfs_gfid_root, name, "abcdef", &g), 0, "mark: a file on brick 0");
    struct bfs_fd *fd = NULL;
    is_int(open_(v, &g, O_RDWR, &fd), 0, "mark: an fd on it");
    ok(brick_put(v, b1, name, &g, S_ISVTX, "") >= 0 &&
       brick_put(v, b2, name, &g, 0644, "abcdef") >= 0 && brick_freeze(b0, &g, "b2") >= 0,
       "mark: a link file on brick 1, the copy on brick 2, the source marked and frozen");
    struct bfs_write_req w = {.fd = fd, .data = {"XY", 2}};
    is_int(bfs_sync_write(v->top, dg_st, &w, NULL), 2, "mark: a write on the frozen source");
    is_str(disk_read(v, 2, name, buf, sizeof(buf)), "XYcdef",
           "mark: it followed to brick 2, the destination the mark names");
    bfs_fd_unref(fd);
    struct bfs_unlink_req u = {.loc = cg_L(&bfs_gfid_root, name)};
    ok(bfs_sync_unlink(b0, dg_st, &u, NULL) >= 0 && bfs_sync_unlink(b1, dg_st, &u, NULL) >= 0 &&
       bfs_sync_unlink(b2, dg_st, &u, NULL) >= 0, "mark: all three removed");
}

/* A write of data at off through distribute; its answer. */
static int write_at(struct dg_vol *v, struct bfs_fd *fd, const char *data, uint64_t off)
{
    struct bfs_write_req w = {.fd = fd, .data = {data, strlen(data)}, .offset = off};
    return bfs_sync_write(v->top, dg_st, &w, NULL);
}

/* A write through an O_WRONLY fd that lands on the frozen source: the
 * follow cannot read the bytes back through that fd (EBADF), so it must
 * repeat them from the write itself. Two fds opened before the move: the
 * first writes while the source is frozen, the second after the move
 * dropped the source (unlinked on brick 0, its fd still open there). Both
 * writes must be on brick 1, the copy the move keeps. */
static void test_follow_wronly(struct dg_vol *v, struct bfs_xl *b0, struct bfs_xl *b1)
{
    char name[32], buf[64];
    struct bfs_gfid g;
    dg_name_on(v, &bfs_gfid_root, "wo", 0, name, sizeof(name));
    is_int(dg_put(v, &bfs_gfid_root, name, "abcdefgh", &g), 0, "wronly: a file on brick 0");
    struct bfs_fd *w1 = NULL, *w2 = NULL;
    ok(open_(v, &g, O_WRONLY, &w1) == 0 && open_(v, &g, O_WRONLY, &w2) == 0,
       "wronly: two write-only fds opened before the move");
    ok(brick_put(v, b1, name, &g, 0644, "abcdefgh") >= 0 && brick_freeze(b0, &g, "b1") >= 0,
       "wronly: copied to brick 1, source marked and frozen");
    is_int(write_at(v, w1, "XY", 2), 2, "wronly: a write on the frozen source");
    is_str(disk_read(v, 1, name, buf, sizeof(buf)), "abXYefgh",
           "wronly: it was repeated on brick 1");
    struct bfs_unlink_req u = {.loc = cg_L(&bfs_gfid_root, name)};
    is_int(bfs_sync_unlink(b0, dg_st, &u, NULL), 0, "wronly: the move drops the source");
    is_int(write_at(v, w2, "QRS", 5), 3,
           "wronly: a write on the dropped source through the other fd");
    is_str(disk_read(v, 1, name, buf, sizeof(buf)), "abXYeQRS",
           "wronly: it was repeated on brick 1 too");
    is_int(write_at(v, w2, "T", 8), 1, "wronly: that fd writes on brick 1 now");
    is_str(disk_read(v, 1, name, buf, sizeof(buf)), "abXYeQRST", "wronly: all writes there");
    bfs_fd_unref(w1);
    bfs_fd_unref(w2);
    is_int(bfs_sync_unlink(b1, dg_st, &u, NULL), 0, "wronly: the moved copy removed");
}

/* The rebalance's record on the source of the size its last copy took
 * (rebalance.md, step 3: trusted.brickfs.dht.copied). */
static int brick_copied(struct bfs_xl *xl, const struct bfs_gfid *g, unsigned size)
{
    char val[24];
    int len = snprintf(val, sizeof(val), "%u", size);
    struct bfs_dict *xa = bfs_dict_new(), *internal = bfs_dict_new();
    bfs_dict_set_bin(xa, "trusted.brickfs.dht.copied", val, (size_t)len);
    bfs_dict_set_int(internal, "brickfs-internal", 1);
    struct bfs_setxattr_req r = {.loc = dg_LG(g), .xattrs = xa, .xdata = internal};
    int rc = bfs_sync_setxattr(xl, dg_st, &r, NULL);
    bfs_dict_unref(xa);
    bfs_dict_unref(internal);
    return rc;
}

/* Writes through O_APPEND fds that land on the source of a move
 * (rebalance.md, "Open descriptors follow"). The destination fd is opened
 * with O_APPEND, where storage/posix pwrite()s at the end whatever the
 * offset, so:
 *   - a write that the last copy already carried to the destination (the
 *     move recorded the size it copied: the write ends within it) must not
 *     be appended there again ("abcdefghXY" became "abcdefghXYXY");
 *   - a write after the last copy must be appended at the destination's
 *     end, not written at the offset it had on the source: another fd may
 *     have appended there since (here "Z", written on the destination),
 *     and a source dropped by the move keeps the size it had then. */
static void test_follow_append(struct dg_vol *v, struct bfs_xl *b0, struct bfs_xl *b1)
{
    char name[32], buf[64];
    struct bfs_gfid g;
    dg_name_on(v, &bfs_gfid_root, "ap", 0, name, sizeof(name));
    is_int(dg_put(v, &bfs_gfid_root, name, "abcdefgh", &g), 0, "append: a file on brick 0");
    struct bfs_fd *fd = NULL;
    is_int(open_(v, &g, O_WRONLY | O_APPEND, &fd), 0, "append: an O_APPEND fd on it");
    ok(brick_put(v, b1, name, &g, 0644, "abcdefghXY") >= 0 && brick_freeze(b0, &g, "b1") >= 0 &&
       brick_copied(b0, &g, 10) >= 0,
       "append: the last copy (with the write below, 10 bytes) on brick 1, the source frozen");
    is_int(write_at(v, fd, "XY", 8), 2, "append: a write on the frozen source");
    is_str(disk_read(v, 1, name, buf, sizeof(buf)), "abcdefghXY",
           "append: its bytes are on brick 1 once");
    is_int(write_at(v, fd, "W", 0), 1, "append: that fd writes on brick 1 now");
    is_str(disk_read(v, 1, name, buf, sizeof(buf)), "abcdefghXYW", "append: at its end");
    bfs_fd_unref(fd);
    struct bfs_unlink_req u = {.loc = cg_L(&bfs_gfid_root, name)};
    ok(bfs_sync_unlink(b0, dg_st, &u, NULL) >= 0 && bfs_sync_unlink(b1, dg_st, &u, NULL) >= 0,
       "append: both copies removed");

    /* after the last copy, on the frozen then on the dropped source */
    dg_name_on(v, &bfs_gfid_root, "aq", 0, name, sizeof(name));
    is_int(dg_put(v, &bfs_gfid_root, name, "abcdefgh", &g), 0, "append late: a file on brick 0");
    struct bfs_fd *f1 = NULL, *f2 = NULL;
    ok(open_(v, &g, O_WRONLY | O_APPEND, &f1) == 0 && open_(v, &g, O_WRONLY | O_APPEND, &f2) == 0,
       "append late: two O_APPEND fds on it");
    ok(brick_put(v, b1, name, &g, 0644, "abcdefghZ") >= 0 && brick_freeze(b0, &g, "b1") >= 0 &&
       brick_copied(b0, &g, 8) >= 0,
       "append late: the last copy (8 bytes) on brick 1 and appended to there, source frozen");
    is_int(write_at(v, f1, "XY", 0), 2, "append late: a write on the frozen source");
    is_str(disk_read(v, 1, name, buf, sizeof(buf)), "abcdefghZXY",
           "append late: appended on brick 1, after what was appended there");
    is_int(bfs_sync_unlink(b0, dg_st, &u, NULL), 0, "append late: the move drops the source");
    is_int(write_at(v, f2, "Q", 0), 1, "append late: a write on the dropped source");
    is_str(disk_read(v, 1, name, buf, sizeof(buf)), "abcdefghZXYQ",
           "append late: appended on brick 1 too");
    bfs_fd_unref(f1);
    bfs_fd_unref(f2);
    is_int(bfs_sync_unlink(b1, dg_st, &u, NULL), 0, "append late: the moved copy removed");
}

static unsigned disk_mode(struct dg_vol *v, int b, const char *rel)
{
    struct stat sb;
    return stat(dg_on_disk(v, b, rel), &sb) == 0 ? (unsigned)(sb.st_mode & 07777) : 0;
}

/* A chmod, and a chown, landing on the source in the last round trips of
 * a move: after its last check that the source is still frozen (played
 * here by the destination made real and the source frozen), before it
 * drops the source. The chmod replaced the frozen bits (a chown of a file
 * with group execute clears S_ISGID): its reply did not show them, so it
 * was not repeated on the destination, and neither were the writes after
 * it; the move then dropped the source with both. */
static void test_follow_chmod(struct dg_vol *v, struct bfs_xl *b0, struct bfs_xl *b1)
{
    char name[32], buf[64];
    struct bfs_gfid g;
    dg_name_on(v, &bfs_gfid_root, "cm", 0, name, sizeof(name));
    is_int(dg_put(v, &bfs_gfid_root, name, "abcdefgh", &g), 0, "chmod: a file on brick 0");
    struct bfs_fd *fd = NULL;
    is_int(open_(v, &g, O_WRONLY, &fd), 0, "chmod: an fd opened before the move");
    ok(brick_put(v, b1, name, &g, 0644, "abcdefgh") >= 0 && brick_freeze(b0, &g, "b1") >= 0,
       "chmod: the moved copy on brick 1, the source still frozen");
    struct bfs_setattr_req ch = {.loc = dg_LG(&g), .valid = BFS_SET_MODE};
    ch.attr.mode = 0600;
    struct bfs_setattr_rep cr;
    memset(&cr, 0, sizeof(cr));
    is_int(bfs_sync_setattr(v->top, dg_st, &ch, &cr), 0, "chmod: 0600 on the frozen source");
    is_int((int)(cr.post.mode & 07777), 0600, "chmod: its answer shows the mode asked for");
    bfs_setattr_rep_clear_dup(&cr);
    is_int((int)disk_mode(v, 1, name), 0600, "chmod: it reached the moved copy");
    is_int(write_at(v, fd, "XY", 2), 2, "chmod: a write after it, through the early fd");
    is_str(disk_read(v, 1, name, buf, sizeof(buf)), "abXYefgh", "chmod: it followed too");
    bfs_fd_unref(fd);
    struct bfs_unlink_req u = {.loc = cg_L(&bfs_gfid_root, name)};
    ok(bfs_sync_unlink(b0, dg_st, &u, NULL) >= 0 && bfs_sync_unlink(b1, dg_st, &u, NULL) >= 0,
       "chmod: both copies removed");

    dg_name_on(v, &bfs_gfid_root, "co", 0, name, sizeof(name));
    is_int(dg_put(v, &bfs_gfid_root, name, "abcdefgh", &g), 0, "chown: a file on brick 0");
    is_int(open_(v, &g, O_WRONLY, &fd), 0, "chown: an fd opened before the move");
    ok(brick_put(v, b1, name, &g, 0755, "abcdefgh") >= 0 &&
       brick_freeze_mode(b0, &g, "b1", 0755) >= 0,
       "chown: the moved copy (0755) on brick 1, the source still frozen");
    struct bfs_setattr_req co = {.loc = dg_LG(&g), .valid = BFS_SET_UID | BFS_SET_GID};
    co.attr.uid = 1234;
    co.attr.gid = 5678;
    is_int(bfs_sync_setattr(v->top, dg_st, &co, NULL), 0, "chown: 1234:5678 on the frozen source");
    struct stat sb;
    ok(stat(dg_on_disk(v, 1, name), &sb) == 0 && sb.st_uid == 1234 && sb.st_gid == 5678,
       "chown: it reached the moved copy");
    is_int((int)disk_mode(v, 1, name), 0755, "chown: the moved copy's mode is the file's");
    is_int(write_at(v, fd, "QR", 4), 2, "chown: a write after it, through the early fd");
    is_str(disk_read(v, 1, name, buf, sizeof(buf)), "abcdQRgh", "chown: it followed too");
    bfs_fd_unref(fd);
    ok(bfs_sync_unlink(b0, dg_st, &u, NULL) >= 0 && bfs_sync_unlink(b1, dg_st, &u, NULL) >= 0,
       "chown: both copies removed");
}

/* A write by a caller outside the file's group to a group-executable
 * file: the kernel clears S_ISGID (as for any set-group-ID file), so the
 * write unfroze the source, its reply did not show the bits and it was
 * not repeated on the destination. Here by uid/gid 65534 through an fd
 * opened before the move, on a 0757 file. */
static void test_follow_killpriv(struct dg_vol *v, struct bfs_xl *b0, struct bfs_xl *b1)
{
    char name[32], buf[64];
    struct bfs_gfid g;
    dg_name_on(v, &bfs_gfid_root, "kp", 0, name, sizeof(name));
    is_int(dg_put(v, &bfs_gfid_root, name, "abcdefgh", &g), 0, "killpriv: a file on brick 0");
    struct bfs_setattr_req ch = {.loc = dg_LG(&g), .valid = BFS_SET_MODE};
    ch.attr.mode = 0757;
    is_int(bfs_sync_setattr(v->top, dg_st, &ch, NULL), 0, "killpriv: mode 0757");
    struct bfs_fd *fd = NULL;
    is_int(open_(v, &g, O_WRONLY, &fd), 0, "killpriv: an fd opened before the move");
    ok(brick_put(v, b1, name, &g, 0757, "abcdefgh") >= 0 &&
       brick_freeze_mode(b0, &g, "b1", 0757) >= 0,
       "killpriv: the moved copy on brick 1, the source still frozen");
    struct bfs_stack *nobody = bfs_stack_new();
    nobody->uid = nobody->gid = 65534;
    struct bfs_write_req w = {.fd = fd, .data = {"XY", 2}, .offset = 2};
    is_int(bfs_sync_write(v->top, nobody, &w, NULL), 2,
           "killpriv: a write by uid/gid 65534 on the frozen source");
    bfs_stack_unref(nobody);
    is_str(disk_read(v, 1, name, buf, sizeof(buf)), "abXYefgh", "killpriv: it followed");
    bfs_fd_unref(fd);
    struct bfs_unlink_req u = {.loc = cg_L(&bfs_gfid_root, name)};
    ok(bfs_sync_unlink(b0, dg_st, &u, NULL) >= 0 && bfs_sync_unlink(b1, dg_st, &u, NULL) >= 0,
       "killpriv: both copies removed");
}

/* The state of a move after its switch (rebalance.md, steps 3-4): the
 * source on brick 0 frozen (S_ISVTX|S_ISGID), the real copy with the same
 * GFID on brick 1. What lands on the frozen source must follow the file:
 * an open(O_TRUNC), an ftruncate through an fd opened before, a write. */
static void test_follow(struct dg_vol *v)
{
    char name[32], buf[64];
    struct bfs_gfid g;
    const char *old = "the old content, long";
    dg_name_on(v, &bfs_gfid_root, "mv", 0, name, sizeof(name));
    is_int(dg_put(v, &bfs_gfid_root, name, old, &g), 0, "follow: a file on brick 0");
    struct bfs_fd *early = NULL, *tr = NULL, *reader = NULL;
    is_int(open_(v, &g, O_RDWR, &early), 0, "follow: an fd opened before the move");
    is_int(open_(v, &g, O_RDONLY, &reader), 0, "follow: a reader's fd opened before the move");
    struct bfs_xl *b0 = bfs_graph_find(v->g, "b0"), *b1 = bfs_graph_find(v->g, "b1");
    ok(brick_put(v, b1, name, &g, 0644, old) >= 0 && brick_freeze(b0, &g, "b1") >= 0,
       "follow: copied to brick 1, source marked and frozen");

    is_int(open_(v, &g, O_WRONLY | O_TRUNC, &tr), 0, "follow: open(O_TRUNC) of the frozen file");
    is_int((int)disk_size(v, 1, name), 0, "follow: the truncation reached the moved copy");
    struct bfs_write_req nw = {.fd = tr, .data = {"new", 3}};
    is_int(bfs_sync_write(v->top, dg_st, &nw, NULL), 3, "follow: write through that fd");
    is_str(disk_read(v, 1, name, buf, sizeof(buf)), "new",
           "follow: the moved copy holds exactly what was written after the open");
    struct bfs_read_req rq = {.fd = reader, .size = 16};
    struct bfs_read_rep rr;
    memset(&rr, 0, sizeof(rr));
    int n = bfs_sync_read(v->top, dg_st, &rq, &rr);
    ok(n == 3 && rr.data.len == 3 && memcmp(rr.data.data, "new", 3) == 0,
       "follow: a read through a reader's early fd sees the moved copy (rc %d, %.*s)", n,
       n >= 0 ? (int)rr.data.len : 0, n >= 0 ? (const char *)rr.data.data : "");
    if (n >= 0)
        bfs_read_rep_clear_dup(&rr);
    bfs_fd_unref(reader);
    struct bfs_ftruncate_req ft = {.fd = early, .offset = 2};
    is_int(bfs_sync_ftruncate(v->top, dg_st, &ft, NULL), 0,
           "follow: ftruncate through the early fd");
    is_int((int)disk_size(v, 1, name), 2, "follow: it reached the moved copy");
    bfs_fd_unref(early);
    bfs_fd_unref(tr);
    struct bfs_unlink_req u = {.loc = cg_L(&bfs_gfid_root, name)};
    ok(bfs_sync_unlink(b0, dg_st, &u, NULL) >= 0 && bfs_sync_unlink(b1, dg_st, &u, NULL) >= 0,
       "follow: both copies removed");
    test_follow_mark(v, b0, b1, bfs_graph_find(v->g, "b2"));
    test_follow_wronly(v, b0, b1);
    test_follow_append(v, b0, b1);
    test_follow_chmod(v, b0, b1);
    test_follow_killpriv(v, b0, b1);
}

int main(void)
{
    plan_lazy();
    if (!cg_can_run())
        return 0;
    struct dg_vol v;
    if (dg_init("test_distribute_migrate") < 0 || !dg_vol_start(&v, 3, "migrate", "")) {
        ok(0, "a 3-brick volume starts");
        dg_fini();
        return done_testing();
    }
    test_follow(&v);
    dg_vol_stop(&v);
    dg_fini();
    return done_testing();
}
