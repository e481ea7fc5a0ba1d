/*
 * test_memory.c — storage/memory, the in-memory storage other graph tests
 * stand on: namespace (lookup, mkdir, create, link, symlink, rename,
 * unlink, rmdir), data (write, read, truncate, open-unlinked files),
 * attributes, xattrs and xattrop, readdir continuation. Every check runs
 * twice: answers inline, and answers from the event loop (option async).
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "../lib/tap.h"
#include "core/event.h"
#include "core/fops-util.h"
#include "core/graph.h"

static struct bfs_graph *graph;
static struct bfs_xl *top;
static struct bfs_stack *st;
static const char *mode_name;

static struct bfs_loc named(const struct bfs_gfid *parent, const char *name)
{
    struct bfs_loc l = {0};
    l.pargfid = *parent;
    l.name = name;
    return l;
}

static struct bfs_loc by_gfid(const struct bfs_gfid *g)
{
    struct bfs_loc l = {0};
    l.gfid = *g;
    return l;
}

static int lookup(struct bfs_loc loc, struct bfs_iatt *attr)
{
    struct bfs_lookup_req req = {.loc = loc};
    struct bfs_lookup_rep rep;
    int rc = bfs_sync_lookup(top, st, &req, &rep);
    if (attr)
        *attr = rep.attr;
    bfs_lookup_rep_clear_dup(&rep);
    return rc;
}

static int mkdir_at(const struct bfs_gfid *parent, const char *name, struct bfs_gfid *out)
{
    struct bfs_mkdir_req req = {.loc = named(parent, name), .mode = 0755};
    struct bfs_mkdir_rep rep;
    int rc = bfs_sync_mkdir(top, st, &req, &rep);
    if (out)
        *out = rep.attr.gfid;
    bfs_mkdir_rep_clear_dup(&rep);
    return rc;
}

static struct bfs_fd *create_at(const struct bfs_gfid *parent, const char *name, int *rc,
                                struct bfs_gfid *out)
{
    struct bfs_fd *fd = bfs_fd_new(graph, NULL, O_RDWR, 0);
    struct bfs_create_req req = {.loc = named(parent, name), .fd = fd,
                                 .flags = O_RDWR | O_CREAT | O_EXCL, .mode = 0644};
    struct bfs_create_rep rep;
    *rc = bfs_sync_create(top, st, &req, &rep);
    if (out)
        *out = rep.attr.gfid;
    bfs_create_rep_clear_dup(&rep);
    if (*rc < 0) {
        bfs_fd_unref(fd);
        return NULL;
    }
    return fd;
}

static int write_at(struct bfs_fd *fd, uint64_t off, const char *s, size_t len)
{
    struct bfs_write_req w = {.fd = fd, .data = {s, len}, .offset = off};
    return bfs_sync_write(top, st, &w, NULL);
}

/* Reads up to size bytes at off into buf (NUL-terminated); returns rc. */
static int read_at(struct bfs_fd *fd, uint64_t off, uint32_t size, char *buf, bool *eof)
{
    struct bfs_read_req r = {.fd = fd, .size = size, .offset = off};
    struct bfs_read_rep rep;
    int rc = bfs_sync_read(top, st, &r, &rep);
    if (rc >= 0) {
        memcpy(buf, rep.data.data ? rep.data.data : "", rep.data.len);
        buf[rep.data.len] = 0;
        if (eof)
            *eof = rep.eof;
    }
    bfs_read_rep_clear_dup(&rep);
    return rc;
}

static void test_namespace(void)
{
    struct bfs_iatt ia;
    struct bfs_gfid want, d, f;
    is_int(lookup(by_gfid(&bfs_gfid_root), &ia), 0, "[%s] root looks up by gfid", mode_name);
    ok(S_ISDIR(ia.mode) && ia.ino == 1, "[%s] root is a directory with ino 1", mode_name);

    bfs_gfid_generate(&want);
    struct bfs_mkdir_req mk = {.loc = named(&bfs_gfid_root, "d"), .mode = 0750, .umask = 022};
    struct bfs_mkdir_rep mrep;
    mk.xdata = bfs_dict_new();
    bfs_dict_set_bin(mk.xdata, "gfid-req", want.b, 16);
    is_int(bfs_sync_mkdir(top, st, &mk, &mrep), 0, "[%s] mkdir /d", mode_name);
    ok(bfs_gfid_eq(&mrep.attr.gfid, &want), "[%s] mkdir honours gfid-req", mode_name);
    is_int(mrep.attr.mode, S_IFDIR | 0750, "[%s] mode with umask applied", mode_name);
    is_int(mrep.postparent.nlink, mrep.preparent.nlink + 1, "[%s] parent nlink +1", mode_name);
    bfs_mkdir_rep_clear_dup(&mrep);
    bfs_dict_unref(mk.xdata);
    d = want;

    is_int(mkdir_at(&bfs_gfid_root, "d", NULL), -EEXIST, "[%s] mkdir again: EEXIST", mode_name);
    is_int(mkdir_at(&bfs_gfid_root, "..", NULL), -EINVAL, "[%s] '..' refused", mode_name);
    is_int(mkdir_at(&bfs_gfid_root, "a/b", NULL), -EINVAL, "[%s] 'a/b' refused", mode_name);
    is_int(lookup(named(&d, "nope"), NULL), -ENOENT, "[%s] missing name: ENOENT", mode_name);

    int rc;
    struct bfs_fd *fd = create_at(&d, "f", &rc, &f);
    is_int(rc, 0, "[%s] create /d/f", mode_name);
    is_int(lookup(named(&d, "f"), &ia), 0, "[%s] lookup /d/f by name", mode_name);
    ok(bfs_gfid_eq(&ia.gfid, &f) && S_ISREG(ia.mode) && ia.nlink == 1,
       "[%s] same gfid, regular, one link", mode_name);
    struct bfs_fd *fd2 = create_at(&d, "f", &rc, NULL);
    is_int(rc, -EEXIST, "[%s] O_EXCL create of an existing name", mode_name);

    /* hard link, symlink */
    struct bfs_link_req ln = {.oldloc = by_gfid(&f), .newloc = named(&d, "g")};
    struct bfs_link_rep lrep;
    is_int(bfs_sync_link(top, st, &ln, &lrep), 0, "[%s] link f -> g", mode_name);
    is_int(lrep.attr.nlink, 2, "[%s] two links", mode_name);
    bfs_link_rep_clear_dup(&lrep);
    struct bfs_symlink_req sl = {.target = "../elsewhere", .loc = named(&d, "s")};
    is_int(bfs_sync_symlink(top, st, &sl, NULL), 0, "[%s] symlink", mode_name);
    struct bfs_readlink_req rl = {.loc = named(&d, "s"), .size = 4096};
    struct bfs_readlink_rep rlrep;
    is_int(bfs_sync_readlink(top, st, &rl, &rlrep), 12, "[%s] readlink length", mode_name);
    is_str(rlrep.target, "../elsewhere", "[%s] readlink target", mode_name);
    bfs_readlink_rep_clear_dup(&rlrep);

    /* data survives the unlink of one name, and of the last while open */
    is_int(write_at(fd, 0, "hello world", 11), 11, "[%s] write 11 bytes", mode_name);
    struct bfs_unlink_req ul = {.loc = named(&d, "f")};
    is_int(bfs_sync_unlink(top, st, &ul, NULL), 0, "[%s] unlink f", mode_name);
    is_int(lookup(named(&d, "g"), &ia), 0, "[%s] g still there", mode_name);
    is_int(ia.nlink, 1, "[%s] with one link", mode_name);
    ul.loc = named(&d, "g");
    is_int(bfs_sync_unlink(top, st, &ul, NULL), 0, "[%s] unlink g, the last name", mode_name);
    is_int(lookup(by_gfid(&f), NULL), -ENOENT, "[%s] gone by gfid too", mode_name);
    char buf[64];
    is_int(read_at(fd, 0, 64, buf, NULL), 11, "[%s] the open fd still reads", mode_name);
    is_str(buf, "hello world", "[%s] its data", mode_name);
    bfs_fd_unref(fd);
    bfs_fd_unref(fd2);

    /* rmdir rules */
    struct bfs_gfid sub;
    mkdir_at(&d, "sub", &sub);
    struct bfs_rmdir_req rd = {.loc = named(&bfs_gfid_root, "d")};
    is_int(bfs_sync_rmdir(top, st, &rd, NULL), -ENOTEMPTY, "[%s] rmdir non-empty", mode_name);
    ul.loc = named(&d, "sub");
    is_int(bfs_sync_unlink(top, st, &ul, NULL), -EISDIR, "[%s] unlink of a dir", mode_name);
    rd.loc = named(&d, "s");
    is_int(bfs_sync_rmdir(top, st, &rd, NULL), -ENOTDIR, "[%s] rmdir of a symlink", mode_name);
}

static void test_rename(void)
{
    struct bfs_gfid r, a, b, x, y;
    int rc;
    mkdir_at(&bfs_gfid_root, "ren", &r);
    mkdir_at(&r, "a", &a);
    mkdir_at(&a, "deep", NULL);
    mkdir_at(&r, "b", &b);
    bfs_fd_unref(create_at(&r, "x", &rc, &x));
    bfs_fd_unref(create_at(&r, "y", &rc, &y));

    struct bfs_rename_req rn = {.oldloc = named(&r, "x"), .newloc = named(&r, "y")};
    is_int(bfs_sync_rename(top, st, &rn, NULL), 0, "[%s] rename file over file", mode_name);
    struct bfs_iatt ia;
    lookup(named(&r, "y"), &ia);
    ok(bfs_gfid_eq(&ia.gfid, &x), "[%s] y is now x's inode", mode_name);
    is_int(lookup(by_gfid(&y), NULL), -ENOENT, "[%s] the replaced inode is gone", mode_name);
    is_int(lookup(named(&r, "x"), NULL), -ENOENT, "[%s] the old name is gone", mode_name);

    rn = (struct bfs_rename_req){.oldloc = named(&r, "a"), .newloc = named(&a, "inside")};
    is_int(bfs_sync_rename(top, st, &rn, NULL), -EINVAL, "[%s] dir into itself", mode_name);
    rn = (struct bfs_rename_req){.oldloc = named(&r, "b"), .newloc = named(&r, "a")};
    is_int(bfs_sync_rename(top, st, &rn, NULL), -ENOTEMPTY, "[%s] over a non-empty dir",
           mode_name);
    rn = (struct bfs_rename_req){.oldloc = named(&r, "y"), .newloc = named(&r, "b")};
    is_int(bfs_sync_rename(top, st, &rn, NULL), -EISDIR, "[%s] file over dir", mode_name);
    rn = (struct bfs_rename_req){.oldloc = named(&r, "a"), .newloc = named(&b, "a2")};
    is_int(bfs_sync_rename(top, st, &rn, NULL), 0, "[%s] move a dir", mode_name);
    is_int(lookup(named(&b, "a2"), &ia), 0, "[%s] found under its new parent", mode_name);
    ok(bfs_gfid_eq(&ia.gfid, &a), "[%s] same inode", mode_name);
    is_int(lookup(named(&a, "deep"), NULL), 0, "[%s] its contents moved along", mode_name);
    rn = (struct bfs_rename_req){.oldloc = named(&r, "y"), .newloc = named(&b, "a2"),
                                 .flags = RENAME_NOREPLACE};
    is_int(bfs_sync_rename(top, st, &rn, NULL), -EEXIST, "[%s] RENAME_NOREPLACE", mode_name);
}

static void test_data_and_attrs(void)
{
    int rc;
    struct bfs_gfid g;
    struct bfs_fd *fd = create_at(&bfs_gfid_root, "data", &rc, &g);
    char buf[64];
    bool eof = false;
    write_at(fd, 0, "abc", 3);
    is_int(write_at(fd, 10, "xyz", 3), 3, "[%s] write past the end", mode_name);
    is_int(read_at(fd, 0, 64, buf, &eof), 13, "[%s] file is 13 bytes", mode_name);
    ok(memcmp(buf, "abc\0\0\0\0\0\0\0xyz", 13) == 0, "[%s] the gap reads as zeros", mode_name);
    ok(eof, "[%s] eof reported", mode_name);
    is_int(read_at(fd, 100, 10, buf, &eof), 0, "[%s] read beyond the end: 0 bytes", mode_name);

    struct bfs_truncate_req tr = {.loc = by_gfid(&g), .offset = 2};
    struct bfs_truncate_rep trep;
    is_int(bfs_sync_truncate(top, st, &tr, &trep), 0, "[%s] truncate to 2", mode_name);
    ok(trep.pre.size == 13 && trep.post.size == 2, "[%s] pre and post sizes", mode_name);
    bfs_truncate_rep_clear_dup(&trep);
    struct bfs_ftruncate_req ftr = {.fd = fd, .offset = 6};
    bfs_sync_ftruncate(top, st, &ftr, NULL);
    read_at(fd, 0, 64, buf, NULL);
    ok(memcmp(buf, "ab\0\0\0\0", 6) == 0, "[%s] grown again, old bytes do not return",
       mode_name);

    struct bfs_setattr_req sa = {.loc = by_gfid(&g), .valid = BFS_SET_MODE | BFS_SET_UID};
    sa.attr.mode = 0600;
    sa.attr.uid = 1234;
    struct bfs_setattr_rep sarep;
    is_int(bfs_sync_setattr(top, st, &sa, &sarep), 0, "[%s] setattr", mode_name);
    ok(sarep.post.mode == (S_IFREG | 0600) && sarep.post.uid == 1234, "[%s] mode and uid set",
       mode_name);
    bfs_setattr_rep_clear_dup(&sarep);

    struct bfs_statfs_req sf = {.loc = by_gfid(&bfs_gfid_root)};
    struct bfs_statfs_rep sfrep;
    is_int(bfs_sync_statfs(top, st, &sf, &sfrep), 0, "[%s] statfs", mode_name);
    ok(sfrep.buf.bsize == 4096 && sfrep.buf.bfree < sfrep.buf.blocks, "[%s] statfs numbers",
       mode_name);
    bfs_statfs_rep_clear_dup(&sfrep);
    bfs_fd_unref(fd);
}

static int setx(const struct bfs_gfid *g, const char *k, const char *v, uint32_t flags)
{
    struct bfs_setxattr_req req = {.loc = by_gfid(g), .flags = flags, .xattrs = bfs_dict_new()};
    bfs_dict_set_str(req.xattrs, k, v);
    int rc = bfs_sync_setxattr(top, st, &req, NULL);
    bfs_dict_unref(req.xattrs);
    return rc;
}

static void test_xattrs(void)
{
    struct bfs_gfid g = bfs_gfid_root;
    is_int(setx(&g, "user.a", "1", XATTR_CREATE), 0, "[%s] setxattr create", mode_name);
    is_int(setx(&g, "user.a", "2", XATTR_CREATE), -EEXIST, "[%s] create again", mode_name);
    is_int(setx(&g, "user.b", "2", XATTR_REPLACE), -ENODATA, "[%s] replace missing",
           mode_name);
    is_int(setx(&g, "user.b", "22", 0), 0, "[%s] plain set", mode_name);

    struct bfs_getxattr_req gx = {.loc = by_gfid(&g), .name = "user.b"};
    struct bfs_getxattr_rep gxrep;
    const void *v = NULL;
    size_t len = 0;
    is_int(bfs_sync_getxattr(top, st, &gx, &gxrep), 0, "[%s] getxattr", mode_name);
    ok(bfs_dict_get_bin(gxrep.xattrs, "user.b", &v, &len) == 0 && len == 2 &&
           memcmp(v, "22", 2) == 0, "[%s] value as stored", mode_name);
    bfs_getxattr_rep_clear_dup(&gxrep);
    gx.name = NULL;
    bfs_sync_getxattr(top, st, &gx, &gxrep);
    is_int(bfs_dict_count(gxrep.xattrs), 2, "[%s] list all", mode_name);
    bfs_getxattr_rep_clear_dup(&gxrep);

    struct bfs_lookup_req lk = {.loc = by_gfid(&g), .xdata = bfs_dict_new()};
    struct bfs_lookup_rep lkrep;
    bfs_dict_set_int(lk.xdata, "user.a", 0);
    bfs_dict_set_int(lk.xdata, "user.none", 0);
    bfs_sync_lookup(top, st, &lk, &lkrep);
    ok(bfs_dict_has(lkrep.xdata, "user.a") && !bfs_dict_has(lkrep.xdata, "user.none"),
       "[%s] lookup answers the xattrs its xdata asks for", mode_name);
    bfs_lookup_rep_clear_dup(&lkrep);
    bfs_dict_unref(lk.xdata);

    struct bfs_removexattr_req rx = {.loc = by_gfid(&g), .name = "user.a"};
    is_int(bfs_sync_removexattr(top, st, &rx, NULL), 0, "[%s] removexattr", mode_name);
    is_int(bfs_sync_removexattr(top, st, &rx, NULL), -ENODATA, "[%s] remove again", mode_name);

    /* xattrop ADD64: big-endian arrays, added element-wise */
    uint64_t add[2] = {htobe64(1), htobe64(5)};
    struct bfs_xattrop_req xo = {.loc = by_gfid(&g), .optype = BFS_XATTROP_ADD64,
                                 .xattrs = bfs_dict_new()};
    struct bfs_xattrop_rep xorep;
    bfs_dict_set_bin(xo.xattrs, "trusted.pending", add, sizeof(add));
    bfs_sync_xattrop(top, st, &xo, NULL);
    is_int(bfs_sync_xattrop(top, st, &xo, &xorep), 0, "[%s] xattrop twice", mode_name);
    ok(bfs_dict_get_bin(xorep.xattrs, "trusted.pending", &v, &len) == 0 && len == 16,
       "[%s] answers the new value", mode_name);
    uint64_t sum[2] = {0, 0};
    if (len == 16)
        memcpy(sum, v, 16);
    ok(be64toh(sum[0]) == 2 && be64toh(sum[1]) == 10, "[%s] 2x[1,5] = [2,10]", mode_name);
    bfs_xattrop_rep_clear_dup(&xorep);
    bfs_dict_unref(xo.xattrs);
}

/* Lists dir in small chunks, removing one entry mid-way; every name that
 * stays must be seen exactly once. */
static void test_readdir(void)
{
    struct bfs_gfid dg;
    char name[32];
    int rc;
    mkdir_at(&bfs_gfid_root, "many", &dg);
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof(name), "n%02d", i);
        bfs_fd_unref(create_at(&dg, name, &rc, NULL));
    }
    struct bfs_inode *ino = bfs_inode_get(graph->itable, &dg, S_IFDIR);
    struct bfs_fd *fd = bfs_fd_new(graph, ino, O_RDONLY, 1);
    bfs_inode_unref(ino);
    struct bfs_opendir_req od = {.loc = by_gfid(&dg), .fd = fd};
    is_int(bfs_sync_opendir(top, st, &od, NULL), 0, "[%s] opendir", mode_name);

    int seen[40] = {0}, dots = 0, calls = 0, with_attr = 0;
    uint64_t off = 0;
    bool eod = false;
    while (!eod && calls < 100) {
        struct bfs_readdir_req rq = {.fd = fd, .size = 200, .offset = off, .plus = true};
        struct bfs_readdir_rep rp;
        if (bfs_sync_readdir(top, st, &rq, &rp) < 0)
            break;
        calls++;
        for (uint32_t i = 0; i < rp.entries.count; i++) {
            const struct bfs_dirent *e = &rp.entries.v[i];
            int n;
            if (!strcmp(e->name, ".") || !strcmp(e->name, ".."))
                dots++;
            else if (sscanf(e->name, "n%d", &n) == 1 && n >= 0 && n < 40)
                seen[n]++;
            with_attr += e->has_attr && !bfs_gfid_is_null(&e->attr.gfid);
            off = e->d_off;
        }
        eod = rp.eod;
        bfs_readdir_rep_clear_dup(&rp);
        if (calls == 2) { /* remove an entry not listed yet */
            struct bfs_unlink_req ul = {.loc = named(&dg, "n39")};
            bfs_sync_unlink(top, st, &ul, NULL);
        }
    }
    int once = 0;
    for (int i = 0; i < 39; i++)
        once += seen[i] == 1;
    ok(calls > 2 && eod, "[%s] listing took several calls (%d) and ended", mode_name, calls);
    is_int(once, 39, "[%s] every remaining entry exactly once", mode_name);
    is_int(seen[39], 0, "[%s] the removed entry is not listed", mode_name);
    is_int(dots, 2, "[%s] . and ..", mode_name);
    is_int(with_attr, 41, "[%s] readdirplus carries attributes", mode_name);
    bfs_fd_unref(fd);

    fd = bfs_fd_new(graph, NULL, O_RDONLY, 1);
    struct bfs_gfid fg;
    bfs_fd_unref(create_at(&dg, "plain", &rc, &fg));
    od = (struct bfs_opendir_req){.loc = by_gfid(&fg), .fd = fd};
    is_int(bfs_sync_opendir(top, st, &od, NULL), -ENOTDIR, "[%s] opendir of a file", mode_name);
    bfs_fd_unref(fd);
}

static void run(const char *volfile, const char *name, struct bfs_proc *proc)
{
    char err[256] = "";
    mode_name = name;
    int rc = bfs_graph_from_text(volfile, strlen(volfile), "<inline>", proc, &graph, err,
                                 sizeof(err));
    if (rc == 0)
        rc = bfs_graph_init(graph);
    is_int(rc, 0, "[%s] graph: %s", name, err);
    if (rc < 0)
        return;
    top = graph->top;
    test_namespace();
    test_rename();
    test_data_and_attrs();
    test_xattrs();
    test_readdir();
    bfs_graph_free(graph);
}

int main(void)
{
    plan_lazy();
    struct bfs_proc *proc = bfs_proc_new("test_memory", 0);
    st = bfs_stack_new();
    run("volume mem\n type storage/memory\nend-volume\n", "sync", proc);
    run("volume mem\n type storage/memory\n option async on\nend-volume\n", "async", proc);
    bfs_stack_unref(st);
    bfs_proc_free(proc);
    return done_testing();
}
