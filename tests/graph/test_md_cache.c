/*
 * test_md_cache.c — performance/md-cache over one brick in one process
 * (md-cache -> debug/io-stats "cnt" -> features/upcall -> storage/posix),
 * what it learns from a read's reply (docs/design/cache-invalidation.md):
 *
 *   - a stat after a read is answered without the child (io-stats below
 *     md-cache counts no stat) and carries the atime the read's reply
 *     reported (the brick's attributes after reading);
 *   - over a brick without invalidations (upcall off: its replies carry no
 *     mark) the read's reply is not learned: the stat goes down;
 * and over protocol/client to a brick behind protocol/server, two clients
 * A (md-cache) and B, what it keeps of an open that prefetched the file
 * (client-prefetch.c, performance-notes 36):
 *   - after A's lookup, open and read (answered by A's protocol/client from
 *     the open's prefetch: the brick sees no read), A's lookup of the name
 *     is answered by md-cache, with the attributes the brick has after the
 *     prefetch read (its atime, checked on the brick's own file);
 *   - B's change of the file reaches A as an invalidation: A's next lookup
 *     goes down and sees it;
 *   - B's change between A's open and A's read (the read still answered
 *     from the prefetch, close-to-open): the lookup after it goes down;
 *   - over a brick without upcall, nothing is kept: the lookup goes down;
 * and what cluster translators pass up of an open's mark (lib/upcall-mark.h):
 *   - replicate: marked when the open went lazily to the copy known good,
 *     not with cluster.lazy-open off (any copy answers);
 *   - disperse: never (a fragment's attributes);
 * and over disperse 2+1 (tests/lib/cluster-graph.h, md-cache on top), what
 * it keeps of disperse's read (disperse-read.c vouches for what it
 * assembled, performance-notes 41):
 *   - after a read, the lookup of the name (a delete's) reaches no brick,
 *     and answers the file's size, not a fragment's;
 *   - another client's chmod or append (wound into disperse below
 *     md-cache: the bricks' upcall reports it) makes the next lookup go
 *     down and see it;
 *   - the same over protocol/client (three bricks behind protocol/server,
 *     A and B each a disperse client), the read answered from the open's
 *     prefetch on every fragment (the bench's read phase): A's lookup after
 *     it reaches no brick, and B's chmod still reaches A;
 * and, same setup over replicate 3 and disperse 2+1, the changelog's
 * post-op (it runs when the writer's eager lock ends, after md-cache
 * learned the file) moves the ctime below md-cache: once it ran, A's lookup
 * answers a ctime one of the bricks has (cache-invalidation.md,
 * "Messages"):
 *   - A's own write (the cluster translator's local invalidation);
 *   - B's write (the bricks' upcall of B's post-op xattrop);
 *   - A's create in a directory (replicate): the post-op on the directory
 *     drops its attributes (a stat of it answers the bricks' ctime) but
 *     not its names (a missing name is still answered by md-cache);
 *   - A's create, write and close: the post-op's replies teach md-cache the
 *     file's attributes (cache-invalidation.md, "Messages"): A's lookup
 *     and stat reach no brick and answer exactly what a lookup made with
 *     md-cache emptied answers;
 * and over one brick, the post-op's local events raised by hand: what the
 *   done brings is kept only if nothing (another client's invalidation, a
 *   change of A's, another post-op) came between the begin and the done;
 *   and through distribute: a file's kept, a directory's not (merged).
 * Needs root (storage/posix: trusted xattrs); skips otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/cluster-graph.h"
#include "../lib/tap.h"
#include "core/graph.h"

/* md-cache over a fresh brick folder; upcall on or off. */
static int vol_open(struct cg_vol *v, const char *brick, bool upcall)
{
    char vf[PATH_MAX + 1024];
    memset(v, 0, sizeof(*v));
    snprintf(v->brick[0], sizeof(v->brick[0]), "%s/%s", cg_root(), brick);
    if (mkdir(v->brick[0], 0755) < 0)
        return -1;
    snprintf(vf, sizeof(vf),
             "volume px\n type storage/posix\n option directory %s\nend-volume\n"
             "volume up\n type features/upcall\n option features.cache-invalidation %s\n"
             " subvolumes px\nend-volume\n"
             "volume cnt\n type debug/io-stats\n subvolumes up\nend-volume\n"
             "volume mdc\n type performance/md-cache\n subvolumes cnt\nend-volume\n",
             v->brick[0], upcall ? "on" : "off");
    if (!(v->g = cg_graph_start(vf, NULL)))
        return -1;
    v->top = bfs_graph_find(v->g, "mdc");
    v->st = bfs_stack_new();
    v->n = 1;
    return v->top && v->st ? 0 : -1;
}

static void vol_close(struct cg_vol *v)
{
    cg_graph_stop(v->g);
    bfs_stack_unref(v->st);
}

/* The calls of fop io-stats `name` of graph g counted. */
static long counted(struct bfs_graph *g, const char *name, const char *fop)
{
    struct bfs_xl *cnt = bfs_graph_find(g, name);
    char *text = cnt && cnt->mod->dump ? cnt->mod->dump(cnt) : NULL;
    json_object *o = text ? json_tokener_parse(text) : NULL, *fops, *f, *c;
    long n = -1;
    if (o && json_object_object_get_ex(o, "fops", &fops)) {
        n = 0;
        if (json_object_object_get_ex(fops, fop, &f) && json_object_object_get_ex(f, "count", &c))
            n = (long)json_object_get_int64(c);
    }
    json_object_put(o);
    free(text);
    return n;
}

/* The calls of fop that went below md-cache (io-stats "cnt"). */
static long below(struct cg_vol *v, const char *fop)
{
    return counted(v->g, "cnt", fop);
}

static int do_stat(struct cg_vol *v, const struct bfs_gfid *g, struct bfs_iatt *attr)
{
    struct bfs_stat_req req = {0};
    struct bfs_stat_rep rep;
    req.loc.gfid = *g;
    int rc = bfs_sync_stat(v->top, v->st, &req, &rep);
    if (rc >= 0)
        *attr = rep.attr;
    bfs_stat_rep_clear_dup(&rep);
    return rc;
}

static int do_read(struct cg_vol *v, struct bfs_fd *fd, struct bfs_iatt *attr)
{
    struct bfs_read_req req = {.fd = fd, .size = 64};
    struct bfs_read_rep rep;
    int rc = bfs_sync_read(v->top, v->st, &req, &rep);
    if (rc >= 0)
        *attr = rep.attr;
    bfs_read_rep_clear_dup(&rep);
    return rc;
}

/* A file with an old atime (so that the read moves it on a relatime
 * brick), opened for reading, its attributes learned by a stat. */
static struct bfs_fd *old_file(struct cg_vol *v, const char *name, struct bfs_iatt *a)
{
    struct bfs_fd *fd = NULL;
    if (cg_put(v, &bfs_gfid_root, name, "hello", a) < 0)
        return NULL;
    struct bfs_setattr_req sr = {.valid = BFS_SET_ATIME};
    sr.loc.gfid = a->gfid;
    sr.attr.atime_sec = 1000;
    if (bfs_sync_setattr(v->top, v->st, &sr, NULL) < 0 || cg_open(v, &a->gfid, O_RDONLY, &fd) < 0)
        return NULL;
    if (do_stat(v, &a->gfid, a) < 0) {
        cg_flush_close(v, fd);
        return NULL;
    }
    return fd;
}

static void test_learned(void)
{
    struct cg_vol v;
    if (!ok(vol_open(&v, "b-up", true) == 0, "md-cache over a brick with upcall"))
        return;
    struct bfs_iatt a, r, s;
    struct bfs_fd *fd = old_file(&v, "f", &a);
    if (ok(fd != NULL, "a file with atime 1000, open, stat learned")) {
        is_int((int)a.atime_sec, 1000, "its atime is 1000");
        long n0 = below(&v, "stat");
        is_int(do_stat(&v, &a.gfid, &s), 0, "stat again");
        is_int((int)(below(&v, "stat") - n0), 0, "answered by md-cache");
        is_int(do_read(&v, fd, &r), 5, "read");
        ok(bfs_gfid_eq(&r.gfid, &a.gfid), "the read's reply carries the file's attributes");
        n0 = below(&v, "stat");
        is_int(do_stat(&v, &a.gfid, &s), 0, "stat after the read");
        is_int((int)(below(&v, "stat") - n0), 0, "answered without the child");
        ok(s.atime_sec == r.atime_sec && s.atime_nsec == r.atime_nsec,
           "with the atime of the read's reply (%lld, read %lld)", (long long)s.atime_sec,
           (long long)r.atime_sec);
        is_int((int)s.size, 5, "and its size");
        cg_flush_close(&v, fd);
    }
    vol_close(&v);
}

static void test_unmarked(void)
{
    struct cg_vol v;
    if (!ok(vol_open(&v, "b-off", false) == 0, "md-cache over a brick without invalidations"))
        return;
    struct bfs_iatt a, r, s;
    struct bfs_fd *fd = old_file(&v, "f", &a);
    if (ok(fd != NULL, "a file, open")) {
        is_int(do_read(&v, fd, &r), 5, "read");
        long n0 = below(&v, "stat");
        is_int(do_stat(&v, &a.gfid, &s), 0, "stat after the read");
        is_int((int)(below(&v, "stat") - n0), 1, "goes to the child: an unmarked read is not learned");
        cg_flush_close(&v, fd);
    }
    vol_close(&v);
}

/* ---- over protocol/client: the open's prefetch ---- */

struct pf_env {
    struct bfs_proc *bproc;
    struct bfs_graph *sg; /* the brick, behind protocol/server */
    struct cg_vol a, b;   /* A: client -> io-stats "cnt" -> md-cache; B: client */
    char dir[PATH_MAX];
};

/* 0 when each of v's connections to its bricks (protocol/client c<i>,
 * below io-stats "cnt" and md-cache) answered a stat of the root, asked
 * now. A brick sends a change's invalidations to the other clients before
 * it answers the changer, and a connection delivers its frames in order,
 * announcing the connection (md-cache empties itself then) before any
 * answer: so v has heard every invalidation of the changes answered before
 * this was called, and no connection of v comes up later. */
static int bricks_answer(struct cg_vol *v)
{
    return cg_children_answer(v);
}

/* A client of the bricks listening on ports[0..n): protocol/client c<i>
 * to each, over them (n > 1) cluster/disperse "rep" (redundancy 1), and
 * with mdc io-stats "cnt" and md-cache "mdc" on top; returns once every
 * connection is up (disperse answers with 2 of 3: a third coming up later
 * would empty md-cache in the middle of a test). */
static int pf_client_of(struct cg_vol *v, const int *ports, int n, bool mdc, const char *type);

static int pf_client(struct cg_vol *v, const int *ports, int n, bool mdc)
{
    return pf_client_of(v, ports, n, mdc, " type cluster/disperse\n option redundancy 1\n"
                                          " option cluster.background-self-heal-count 0\n");
}

/* The same with the cluster translator's lines `type` (n > 1). */
static int pf_client_of(struct cg_vol *v, const int *ports, int n, bool mdc, const char *type)
{
    char vf[4096];
    size_t len = 0;
    memset(v, 0, sizeof(*v));
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(vf + len, sizeof(vf) - len,
                                "volume c%d\n type protocol/client\n option remote-host 127.0.0.1\n"
                                " option remote-port %d\n option remote-subvolume brick\n"
                                "end-volume\n", i, ports[i]);
    const char *below = "c0";
    if (n > 1) {
        len += (size_t)snprintf(vf + len, sizeof(vf) - len,
                                "volume rep\n%s subvolumes", type);
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(vf + len, sizeof(vf) - len, " c%d", i);
        len += (size_t)snprintf(vf + len, sizeof(vf) - len, "\nend-volume\n");
        below = "rep";
    }
    if (mdc)
        snprintf(vf + len, sizeof(vf) - len,
                 "volume cnt\n type debug/io-stats\n subvolumes %s\nend-volume\n"
                 "volume mdc\n type performance/md-cache\n subvolumes cnt\nend-volume\n", below);
    if (!(v->g = cg_graph_start(vf, NULL)))
        return -1;
    v->top = v->g->top;
    v->st = bfs_stack_new();
    v->n = n;
    for (int i = 0; i < 500; i++) { /* until every connection is up */
        if (bricks_answer(v) == 0 && cg_lookup(v, &bfs_gfid_root, NULL, NULL) == 0)
            return 0;
        usleep(10000);
    }
    return -1;
}

/* Brick folder dir (made here) behind protocol/server in process bp
 * (upcall on or off): its graph, *port the port it listens on. */
static struct bfs_graph *brick_start(struct bfs_proc *bp, const char *dir, bool upcall, int *port)
{
    char vf[PATH_MAX * 2 + 1024], portfile[PATH_MAX + 16];
    snprintf(portfile, sizeof(portfile), "%s.port", dir);
    if (mkdir(dir, 0755) < 0)
        return NULL;
    snprintf(vf, sizeof(vf),
             "volume px\n type storage/posix\n option directory %s\nend-volume\n"
             "volume lk\n type features/locks\n subvolumes px\nend-volume\n"
             "volume up\n type features/upcall\n option features.cache-invalidation %s\n"
             " subvolumes lk\nend-volume\n"
             "volume brick\n type debug/io-stats\n subvolumes up\nend-volume\n"
             "volume server\n type protocol/server\n"
             " option transport.listen-address 127.0.0.1\n option transport.listen-port 0\n"
             " option transport.port-file %s\n subvolumes brick\nend-volume\n",
             dir, upcall ? "on" : "off", portfile);
    struct bfs_graph *g = cg_graph_start(vf, bp);
    *port = g ? cg_read_port(portfile) : -1;
    return g;
}

/* A brick folder `name` behind protocol/server (upcall on or off), clients
 * A and B connected to it. */
static int pf_open_env(struct pf_env *e, const char *name, bool upcall)
{
    memset(e, 0, sizeof(*e));
    snprintf(e->dir, sizeof(e->dir), "%s/%s", cg_root(), name);
    int port = -1;
    if (!(e->bproc = bfs_proc_new("test_md_cache-brick", 2)) ||
        !(e->sg = brick_start(e->bproc, e->dir, upcall, &port)))
        return -1;
    if (port <= 0 || pf_client(&e->a, &port, 1, true) < 0 || pf_client(&e->b, &port, 1, false) < 0)
        return -1;
    return 0;
}

static void pf_close_env(struct pf_env *e)
{
    if (e->a.g)
        vol_close(&e->a);
    if (e->b.g)
        vol_close(&e->b);
    cg_graph_stop(e->sg);
    if (e->bproc)
        bfs_proc_free(e->bproc);
}

/* A's open O_RDONLY of g (*attr: the open reply's) and a read of it all;
 * the read's byte count or -errno. */
static int pf_open_read(struct cg_vol *v, const struct bfs_gfid *g, struct bfs_iatt *attr,
                        struct bfs_fd **fdp)
{
    struct bfs_inode *inode = bfs_inode_get(v->g->itable, g, S_IFREG);
    struct bfs_fd *fd = bfs_fd_new(v->g, inode, O_RDONLY, 0);
    bfs_inode_unref(inode);
    struct bfs_open_req q = {.fd = fd, .flags = O_RDONLY};
    struct bfs_open_rep r;
    q.loc.gfid = *g;
    int rc = bfs_sync_open(v->top, v->st, &q, &r);
    if (rc >= 0 && attr)
        *attr = r.attr;
    bfs_open_rep_clear_dup(&r);
    if (rc < 0) {
        bfs_fd_unref(fd);
        return rc;
    }
    *fdp = fd;
    return 0;
}

static long mdc_counter(struct cg_vol *v, const char *key)
{
    struct bfs_xl *m = bfs_graph_find(v->g, "mdc");
    char *text = m ? m->mod->dump(m) : NULL;
    json_object *o = text ? json_tokener_parse(text) : NULL, *c;
    long n = o && json_object_object_get_ex(o, key, &c) ? (long)json_object_get_int64(c) : -1;
    json_object_put(o);
    free(text);
    return n;
}

/* A file of 100 bytes made by client `by` with an old atime (the prefetch
 * read moves it on a relatime brick), looked up by client `at` once `at`
 * has heard the invalidations of by's changes. They travel on at's own
 * connections, unordered with by's answers: one heard while at's lookup
 * is out makes md-cache refuse its reply (it may predate the change), so
 * the name would not be known and the lookup after a read go down. */
static int pf_file_on(struct cg_vol *by, struct cg_vol *at, const char *name, struct bfs_iatt *a)
{
    static const char hundred[] = "0123456789012345678901234567890123456789012345678901234567890"
                                  "123456789012345678901234567890123456789";
    if (cg_put(by, &bfs_gfid_root, name, hundred, a) < 0)
        return -1;
    struct bfs_setattr_req sr = {.valid = BFS_SET_ATIME};
    sr.loc.gfid = a->gfid;
    sr.attr.atime_sec = 1000;
    if (bfs_sync_setattr(by->top, by->st, &sr, NULL) < 0 || bricks_answer(at) < 0)
        return -1;
    return cg_lookup(at, &bfs_gfid_root, name, a);
}

static int pf_file(struct pf_env *e, const char *name, struct bfs_iatt *a)
{
    return pf_file_on(&e->b, &e->a, name, a);
}

/* Client `by` makes name (g) mode 600; true once `at`'s lookup of it sees
 * that (within 5 s: the invalidation travels on its own). */
static bool chmod_seen(struct cg_vol *by, struct cg_vol *at, const struct bfs_gfid *g,
                       const char *name)
{
    struct bfs_setattr_req sr = {.valid = BFS_SET_MODE};
    struct bfs_iatt l;
    sr.loc.gfid = *g;
    sr.attr.mode = S_IFREG | 0600;
    if (bfs_sync_setattr(by->top, by->st, &sr, NULL) < 0)
        return false;
    for (int i = 0; i < 500; i++) {
        if (cg_lookup(at, &bfs_gfid_root, name, &l) == 0 && (l.mode & 07777) == 0600)
            return true;
        usleep(10000);
    }
    return false;
}

static void test_prefetched(void)
{
    struct pf_env e;
    char buf[256];
    struct bfs_iatt a, o, l;
    struct bfs_fd *fd = NULL;
    if (!ok(pf_open_env(&e, "b-pf", true) == 0, "a brick with upcall behind protocol/server; "
            "clients A (md-cache) and B") ||
        !ok(pf_file(&e, "pf", &a) == 0, "B made pf (100 bytes, atime 1000), A looked it up")) {
        pf_close_env(&e);
        return;
    }
    long r0 = counted(e.sg, "brick", "read"), l0 = below(&e.a, "lookup");
    is_int(pf_open_read(&e.a, &a.gfid, &o, &fd), 0, "A opens pf O_RDONLY");
    is_int(cg_read(&e.a, fd, buf, sizeof(buf)), 100, "A reads it whole");
    is_int((int)(counted(e.sg, "brick", "read") - r0), 0,
           "the read answered by protocol/client (the open's prefetch)");
    struct stat bst;
    char path[PATH_MAX + 8];
    snprintf(path, sizeof(path), "%s/pf", e.dir);
    int src = stat(path, &bst);
    ok(src == 0 && bst.st_atime != 1000 && o.atime_sec == bst.st_atime &&
           o.atime_nsec == (uint32_t)bst.st_atim.tv_nsec,
       "the open's reply has the atime the prefetch read left on the brick (%lld, brick %lld)",
       (long long)o.atime_sec, (long long)bst.st_atime);
    cg_flush_close(&e.a, fd);
    is_int(cg_lookup(&e.a, &bfs_gfid_root, "pf", &l), 0, "A looks pf up again (a delete's lookup)");
    is_int((int)(below(&e.a, "lookup") - l0), 0, "answered by md-cache");
    ok(l.atime_sec == o.atime_sec && l.atime_nsec == o.atime_nsec && l.size == 100,
       "with the open's attributes (atime %lld, size %llu)", (long long)l.atime_sec,
       (unsigned long long)l.size);

    /* another client's change invalidates it */
    ok(chmod_seen(&e.b, &e.a, &a.gfid, "pf"),
       "B: chmod 600 pf; A's lookup sees mode 600 (B's change invalidated A's record)");
    ok(below(&e.a, "lookup") - l0 >= 1, "... from the brick");

    /* a change by B between A's open and read: not restored by the read */
    is_int(pf_open_read(&e.a, &a.gfid, &o, &fd), 0, "A opens pf again");
    long inv = mdc_counter(&e.a, "invalidations");
    struct bfs_fd *bw = NULL;
    is_int(cg_open(&e.b, &a.gfid, O_WRONLY, &bw), 0, "B opens pf for writing");
    is_int(cg_write(&e.b, bw, 100, "more", 4), 4, "B appends 4 bytes");
    if (bw)
        cg_flush_close(&e.b, bw);
    bool got = false;
    for (int i = 0; i < 500 && !got; i++) {
        got = mdc_counter(&e.a, "invalidations") > inv;
        if (!got)
            usleep(10000);
    }
    ok(got, "A heard B's write (invalidation)");
    r0 = counted(e.sg, "brick", "read");
    is_int(cg_read(&e.a, fd, buf, sizeof(buf)), 100,
           "A's read through the open fd: the 100 bytes of the open (close-to-open)");
    is_int((int)(counted(e.sg, "brick", "read") - r0), 0, "... from the prefetch");
    cg_flush_close(&e.a, fd);
    l0 = below(&e.a, "lookup");
    is_int(cg_lookup(&e.a, &bfs_gfid_root, "pf", &l), 0, "A looks pf up");
    is_int((int)(below(&e.a, "lookup") - l0), 1, "goes down: the read restored nothing");
    is_int((int)l.size, 104, "and sees B's 104 bytes");
    pf_close_env(&e);
}

static void test_prefetched_unmarked(void)
{
    struct pf_env e;
    char buf[256];
    struct bfs_iatt a, l;
    struct bfs_fd *fd = NULL;
    if (!ok(pf_open_env(&e, "b-pf-off", false) == 0, "a brick without upcall, A and B") ||
        !ok(pf_file(&e, "pf", &a) == 0, "B made pf, A looked it up")) {
        pf_close_env(&e);
        return;
    }
    long r0 = counted(e.sg, "brick", "read"), l0 = below(&e.a, "lookup");
    is_int(pf_open_read(&e.a, &a.gfid, NULL, &fd), 0, "A opens pf");
    is_int(cg_read(&e.a, fd, buf, sizeof(buf)), 100, "A reads it");
    is_int((int)(counted(e.sg, "brick", "read") - r0), 0, "from the prefetch");
    cg_flush_close(&e.a, fd);
    is_int(cg_lookup(&e.a, &bfs_gfid_root, "pf", &l), 0, "A looks pf up");
    is_int((int)(below(&e.a, "lookup") - l0), 1, "goes down: nothing unmarked is kept");
    pf_close_env(&e);
}

/* ---- cluster translators and the open's mark ---- */

/* Opens g with flags through v->top: 1 the reply is marked, 0 not, -errno. */
static int open_marked(struct cg_vol *v, const struct bfs_gfid *g, int flags)
{
    struct bfs_inode *inode = bfs_inode_get(v->g->itable, g, S_IFREG);
    struct bfs_fd *fd = bfs_fd_new(v->g, inode, flags, 0);
    bfs_inode_unref(inode);
    struct bfs_open_req q = {.fd = fd, .flags = (uint32_t)flags};
    struct bfs_open_rep r;
    q.loc.gfid = *g;
    int rc = bfs_sync_open(v->top, v->st, &q, &r);
    if (rc >= 0)
        rc = bfs_dict_has(r.xdata, BFS_XDATA_UPCALL) ? 1 : 0;
    bfs_open_rep_clear_dup(&r);
    if (rc >= 0)
        cg_flush_close(v, fd);
    else
        bfs_fd_unref(fd);
    return rc;
}

static const char *const up_layers[] = {"features/locks l", "features/upcall u", NULL};

static void test_cluster_marks(void)
{
    struct cg_vol v;
    struct bfs_iatt a;
    if (ok(cg_vol_open(&v, 3, up_layers,
                       " type cluster/replicate\n"
                       " option cluster.background-self-heal-count 0\n") == 0,
           "replicate 3 over bricks with upcall")) {
        ok(cg_put(&v, &bfs_gfid_root, "f", "hello", &a) == 0 &&
               cg_lookup(&v, &bfs_gfid_root, "f", &a) == 0,
           "a file, looked up (its copies known good)");
        is_int(open_marked(&v, &a.gfid, O_RDONLY), 1,
               "O_RDONLY open (lazy: the good copy alone): the mark passes");
        cg_top_set(&v, "cluster.lazy-open", "off");
        is_int(open_marked(&v, &a.gfid, O_RDONLY), 0,
               "with cluster.lazy-open off (any copy answers): no mark");
        cg_vol_close(&v);
    }
    if (ok(cg_vol_open(&v, 3, up_layers,
                       " type cluster/disperse\n option redundancy 1\n"
                       " option cluster.background-self-heal-count 0\n") == 0,
           "disperse 2+1 over bricks with upcall")) {
        ok(cg_put(&v, &bfs_gfid_root, "f", "hello", &a) == 0 &&
               cg_lookup(&v, &bfs_gfid_root, "f", &a) == 0, "a file");
        is_int(open_marked(&v, &a.gfid, O_RDONLY), 0,
               "O_RDONLY open: no mark (a fragment's attributes)");
        cg_vol_close(&v);
    }
}

/* ---- disperse's read: the attributes it vouches for (disperse-read.c) ---- */

static const char *const ec_layers[] = {"features/locks l", "features/upcall u",
                                        "debug/io-stats s", NULL};

/* md-cache "mdc" over disperse 2+1 ("rep") over bricks with upcall. */
static int ec_mdc_open(struct cg_vol *v)
{
    return cg_vol_open_above(v, 3, ec_layers,
                             " type cluster/disperse\n option redundancy 1\n"
                             " option cluster.background-self-heal-count 0\n",
                             "volume mdc\n type performance/md-cache\n subvolumes rep\n"
                             "end-volume\n");
}

/* Lookups that reached the bricks (their io-stats s<i>). */
static uint64_t brick_lookups(struct cg_vol *v)
{
    uint64_t n = 0;
    for (int i = 0; i < v->n; i++)
        n += cg_fop_calls(v, i, "lookup");
    return n;
}

/* f made, looked up, opened O_RDONLY, read whole and closed through md-cache;
 * then a lookup of f (the one before a delete): 0 when md-cache answered
 * it, 1 when it went down, -1 on a failure (a TAP comment says which). */
static int read_then_lookup(struct cg_vol *v, const char *name, struct bfs_iatt *a,
                            struct bfs_iatt *l)
{
    char buf[64];
    struct bfs_fd *fd = NULL;
    /* close() does not wait for the put's post-op, whose invalidation (times)
     * would drop what the lookup below fills: wait until the bricks freed
     * the window (the post-op carries the unlock), and a little for its
     * reply to be announced */
    bool put = cg_put_settled(v, &bfs_gfid_root, name, "hello", a) == 0;
    if (put) {
        cg_unlocked_soon(v);
        usleep(50000);
    }
    if (!put || cg_lookup(v, &bfs_gfid_root, name, a) < 0 ||
        cg_open(v, &a->gfid, O_RDONLY, &fd) < 0) {
        printf("# %s: put, lookup or open failed\n", name);
        return -1;
    }
    int n = cg_read(v, fd, buf, sizeof(buf));
    cg_flush_close(v, fd);
    uint64_t l0 = brick_lookups(v);
    if (n != 5 || cg_lookup(v, &bfs_gfid_root, name, l) < 0) {
        printf("# %s: read %d, or the lookup failed\n", name, n);
        return -1;
    }
    return brick_lookups(v) == l0 ? 0 : 1;
}

static void test_disperse_read(void)
{
    struct cg_vol v;
    struct bfs_iatt a, l;
    if (!ok(ec_mdc_open(&v) == 0, "md-cache over disperse 2+1 over bricks with upcall"))
        return;
    is_int(read_then_lookup(&v, "f", &a, &l), 0,
           "after a read through disperse, the lookup of f is answered by md-cache "
           "(no brick sees it)");
    ok(bfs_gfid_eq(&l.gfid, &a.gfid) && l.size == 5 && (l.mode & S_IFMT) == S_IFREG,
       "with the file's GFID, type and size (%llu), not a fragment's",
       (unsigned long long)l.size);
    cg_vol_close(&v);
}

/* Another client's changes (here: wound into disperse below md-cache,
 * which the bricks' upcall reports as it does a remote client's) are seen
 * after disperse's read was kept. */
static void test_disperse_invalidated(void)
{
    struct cg_vol v;
    struct bfs_iatt a, l;
    if (!ok(ec_mdc_open(&v) == 0, "md-cache over disperse 2+1 over bricks with upcall"))
        return;
    is_int(read_then_lookup(&v, "f", &a, &l), 0, "f read, its lookup answered by md-cache");
    struct cg_vol other = v;
    other.top = bfs_graph_find(v.g, "rep");
    struct bfs_setattr_req sr = {.valid = BFS_SET_MODE};
    sr.loc.gfid = a.gfid;
    sr.attr.mode = S_IFREG | 0600;
    is_int(bfs_sync_setattr(other.top, other.st, &sr, NULL), 0,
           "another client (below md-cache): chmod 600 f");
    uint64_t l0 = brick_lookups(&v);
    is_int(cg_lookup(&v, &bfs_gfid_root, "f", &l), 0, "lookup f");
    ok(brick_lookups(&v) > l0, "goes to the bricks (the invalidation dropped the record)");
    is_int((int)(l.mode & 07777), 0600, "and sees mode 600");

    is_int(read_then_lookup(&v, "g", &a, &l), 0, "g read, its lookup answered by md-cache");
    struct bfs_fd *fd = NULL;
    is_int(cg_open(&other, &a.gfid, O_WRONLY, &fd), 0, "another client opens g for writing");
    is_int(cg_write(&other, fd, 5, " world", 6), 6, "and appends 6 bytes");
    if (fd)
        cg_flush_close(&other, fd);
    l0 = brick_lookups(&v);
    is_int(cg_lookup(&v, &bfs_gfid_root, "g", &l), 0, "lookup g");
    ok(brick_lookups(&v) > l0, "goes to the bricks");
    is_int((int)l.size, 11, "and sees the 11 bytes");
    cg_vol_close(&v);
}

/* ---- disperse over protocol/client: fragments from the open's prefetch ---- */

struct ep_env {
    struct bfs_proc *bproc;
    struct bfs_graph *sg[3]; /* bricks behind protocol/server, with upcall */
    struct cg_vol a, b;      /* A: disperse -> io-stats "cnt" -> md-cache; B: disperse */
    char dir[3][PATH_MAX];   /* the brick folders */
};

/* Bricks <root>/<prefix><i> behind protocol/server; A and B clients with
 * cluster translator lines `type` over them. */
static int ep_open_env_of(struct ep_env *e, const char *prefix, const char *type)
{
    int ports[3];
    memset(e, 0, sizeof(*e));
    if (!(e->bproc = bfs_proc_new("test_md_cache-bricks", 2)))
        return -1;
    for (int i = 0; i < 3; i++) {
        snprintf(e->dir[i], sizeof(e->dir[i]), "%s/%s%d", cg_root(), prefix, i);
        if (!(e->sg[i] = brick_start(e->bproc, e->dir[i], true, &ports[i])) || ports[i] <= 0)
            return -1;
    }
    return pf_client_of(&e->a, ports, 3, true, type) < 0 ||
                   pf_client_of(&e->b, ports, 3, false, type) < 0
               ? -1
               : 0;
}

static int ep_open_env(struct ep_env *e)
{
    return ep_open_env_of(e, "ec-b", " type cluster/disperse\n option redundancy 1\n"
                                     " option cluster.background-self-heal-count 0\n");
}

static void ep_close_env(struct ep_env *e)
{
    if (e->a.g)
        vol_close(&e->a);
    if (e->b.g)
        vol_close(&e->b);
    for (int i = 0; i < 3; i++)
        cg_graph_stop(e->sg[i]);
    if (e->bproc)
        bfs_proc_free(e->bproc);
}

static long ep_brick_reads(struct ep_env *e)
{
    long n = 0;
    for (int i = 0; i < 3; i++)
        n += counted(e->sg[i], "brick", "read");
    return n;
}

/* The ctime of name on brick folder i (-1: no such file). */
static int64_t brick_ctime_ns(struct ep_env *e, int i, const char *name)
{
    char path[PATH_MAX + 64];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", e->dir[i], name);
    if (stat(path, &st) < 0)
        return -1;
    return (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
}

/* Until no brick's ctime of name moved for 3 s (the post-op that ends
 * the eager lock has run), at most 12 s. */
static bool bricks_settled(struct ep_env *e, const char *name)
{
    int64_t last[3] = {0};
    int still = 0;
    for (int k = 0; k < 240 && still < 60; k++) {
        bool moved = false;
        for (int i = 0; i < 3; i++) {
            int64_t c = brick_ctime_ns(e, i, name);
            moved = moved || c != last[i];
            last[i] = c;
        }
        still = moved ? 0 : still + 1;
        usleep(50000);
    }
    return still >= 60;
}

static void test_disperse_prefetched(void)
{
    struct ep_env e;
    char buf[256];
    struct bfs_iatt a, l;
    struct bfs_fd *fd = NULL;
    if (!ok(ep_open_env(&e) == 0, "3 bricks with upcall behind protocol/server; A (disperse "
            "2+1, md-cache) and B (disperse 2+1)") ||
        !ok(pf_file_on(&e.b, &e.a, "pf", &a) == 0 && bricks_settled(&e, "pf") &&
                cg_lookup(&e.a, &bfs_gfid_root, "pf", &a) == 0,
            "B made pf (100 bytes), its post-ops ran (their invalidations reach A), "
            "A looked it up")) {
        ep_close_env(&e);
        return;
    }
    long r0 = ep_brick_reads(&e);
    is_int(pf_open_read(&e.a, &a.gfid, NULL, &fd), 0, "A opens pf O_RDONLY");
    is_int(cg_read(&e.a, fd, buf, sizeof(buf)), 100, "A reads it whole");
    is_int((int)(ep_brick_reads(&e) - r0), 0, "every fragment from the open's prefetch");
    cg_flush_close(&e.a, fd);
    long l0 = below(&e.a, "lookup");
    is_int(cg_lookup(&e.a, &bfs_gfid_root, "pf", &l), 0, "A looks pf up (a delete's lookup)");
    is_int((int)(below(&e.a, "lookup") - l0), 0, "answered by md-cache");
    ok(l.size == 100 && bfs_gfid_eq(&l.gfid, &a.gfid), "with the file's size (%llu)",
       (unsigned long long)l.size);

    ok(chmod_seen(&e.b, &e.a, &a.gfid, "pf"),
       "B: chmod 600 pf; A's lookup sees mode 600 (B's change invalidated A's record)");
    ok(below(&e.a, "lookup") - l0 >= 1, "... from the bricks");
    ep_close_env(&e);
}

/* ---- changes below md-cache: the changelog's post-op ---- */

/* Heals in the background: a lookup that finds another client's dirty
 * marks answers before its heal's lock ends that client's window. An idle
 * eager lock lasts 2 s (replicate ends it by that delay, not at the
 * close): long enough for the lookups before it on a loaded machine,
 * shorter than bricks_settled's quiet time. */
static const char *const rep3_type = " type cluster/replicate\n"
                                     " option cluster.post-op-delay-ms 2000\n";
static const char *const ec21_type = " type cluster/disperse\n option redundancy 1\n"
                                     " option cluster.background-self-heal-count 0\n"
                                     " option cluster.post-op-delay-ms 2000\n";

/* A's lookup of name answers the ctime of one of the copies (fragments) on
 * the bricks, as a client that kept nothing would see it. */
static bool ctime_exact(struct ep_env *e, const char *name)
{
    struct bfs_iatt l;
    if (cg_lookup(&e->a, &bfs_gfid_root, name, &l) < 0)
        return false;
    int64_t c = l.ctime_sec * 1000000000 + l.ctime_nsec;
    for (int i = 0; i < 3; i++)
        if (brick_ctime_ns(e, i, name) == c)
            return true;
    printf("# A's lookup: ctime %lld.%09u; bricks %lld %lld %lld\n", (long long)l.ctime_sec,
           l.ctime_nsec, (long long)brick_ctime_ns(e, 0, name),
           (long long)brick_ctime_ns(e, 1, name), (long long)brick_ctime_ns(e, 2, name));
    return false;
}

/* A looks name up twice (the second answered by md-cache), then the
 * writer's fd is closed (its eager lock ends: the post-op) and A's next
 * lookup must answer the bricks' ctime. */
static void kept_then_exact(struct ep_env *e, struct cg_vol *writer, struct bfs_fd *fd,
                            const char *name, const char *what)
{
    struct bfs_iatt l;
    long sent = -1;
    /* An invalidation between the two lookups (the writer's delayed
     * post-op when this machine is slow, or a late one of its write)
     * rightly sends the second below: then the pair is made again; a
     * second lookup sent below with no invalidation in between fails. */
    for (int i = 0; i < 5 && sent != 0; i++) {
        long inv = mdc_counter(&e->a, "invalidations");
        is_int(cg_lookup(&e->a, &bfs_gfid_root, name, &l), 0, "A looks %s up", name);
        long l0 = below(&e->a, "lookup");
        is_int(cg_lookup(&e->a, &bfs_gfid_root, name, &l), 0, "and again");
        sent = below(&e->a, "lookup") - l0;
        if (sent == 0)
            break;
        if (mdc_counter(&e->a, "invalidations") == inv) {
            printf("# the second lookup went below with no invalidation in between\n");
            break;
        }
        printf("# an invalidation came between the lookups: again\n");
    }
    is_int((int)sent, 0, "answered by md-cache");
    cg_flush_close(writer, fd);
    ok(bricks_settled(e, name), "the writer closed %s; the post-op ran on the bricks", name);
    ok(ctime_exact(e, name), "A's lookup answers the ctime the bricks have after the post-op "
       "(%s)", what);
}

static bool ep_opened(struct ep_env *e, const char *prefix, const char *type, const char *what)
{
    if (ok(ep_open_env_of(e, prefix, type) == 0, "3 bricks with upcall behind protocol/server; "
           "A (%s, md-cache) and B", what))
        return true;
    ep_close_env(e);
    return false;
}

/* A's own write: its post-op (at the close, 500 ms eager lock) moves the
 * ctime on the bricks after A learned the file's attributes. */
static void own_postop(const char *prefix, const char *type, const char *what)
{
    struct ep_env e;
    struct bfs_iatt a;
    struct bfs_fd *fd = NULL;
    if (!ep_opened(&e, prefix, type, what))
        return;
    if (ok(cg_create(&e.a, &bfs_gfid_root, "own", &fd, &a) == 0, "A creates own")) {
        is_int(cg_write(&e.a, fd, 0, "hello", 5), 5, "A writes 5 bytes (fd still open)");
        kept_then_exact(&e, &e.a, fd, "own", what);
    }
    ep_close_env(&e);
}

/* A heard its invalidations: the count moved, then stopped moving. */
static bool heard(struct cg_vol *v, long before)
{
    bool got = false;
    for (int i = 0; i < 500 && !got; i++) {
        got = mdc_counter(v, "invalidations") > before;
        if (!got)
            usleep(10000);
    }
    for (long n = -1; got && n != mdc_counter(v, "invalidations");) {
        n = mdc_counter(v, "invalidations");
        usleep(200000); /* the pre-op's and the write's, from every brick */
    }
    return got;
}

/* B's write: B's post-op moves the ctime after A learned the attributes
 * the write's invalidation made it fetch again. */
static void other_postop(const char *prefix, const char *type, const char *what)
{
    struct ep_env e;
    struct bfs_iatt a, l;
    struct bfs_fd *fd = NULL;
    if (!ep_opened(&e, prefix, type, what))
        return;
    if (ok(cg_put(&e.b, &bfs_gfid_root, "oth", "hello", &a) == 0 && bricks_settled(&e, "oth") &&
               cg_lookup(&e.a, &bfs_gfid_root, "oth", &l) == 0,
           "B made oth, A looked it up")) {
        long inv = mdc_counter(&e.a, "invalidations");
        is_int(cg_open(&e.b, &a.gfid, O_WRONLY, &fd), 0, "B opens oth for writing");
        is_int(cg_write(&e.b, fd, 0, "HELLO", 5), 5, "B writes (fd still open)");
        ok(heard(&e.a, inv), "A heard B's write");
        kept_then_exact(&e, &e.b, fd, "oth", what);
    }
    ep_close_env(&e);
}

/* A's create in a directory A made: the entry transaction's post-op on
 * the directory (after the create's answer) moves its times, not its
 * names: what md-cache knows of its names still answers (here a missing
 * one: the kernel's LOOKUP before the next create), its attributes not. */
static void test_rep_postop_names(void)
{
    struct ep_env e;
    struct bfs_iatt d, f, l;
    struct bfs_fd *fd = NULL;
    if (!ep_opened(&e, "rep-names-b", rep3_type, "replicate 3"))
        return;
    if (ok(cg_mkdir(&e.a, &bfs_gfid_root, "d", &d) == 0 &&
               cg_create(&e.a, &d.gfid, "f1", &fd, &f) == 0,
           "A made d and d/f1")) {
        cg_flush_close(&e.a, fd);
        ok(bricks_settled(&e, "d"), "the post-op on d ran on the bricks");
        long l0 = below(&e.a, "lookup");
        is_int(cg_lookup(&e.a, &d.gfid, "nx", &l), -ENOENT, "A looks d/nx up: no such name");
        is_int((int)(below(&e.a, "lookup") - l0), 0, "answered by md-cache");
        struct bfs_stat_req sr = {0};
        struct bfs_stat_rep srep;
        sr.loc.gfid = d.gfid;
        is_int(bfs_sync_stat(e.a.top, e.a.st, &sr, &srep), 0, "A stats d");
        int64_t c = srep.attr.ctime_sec * 1000000000 + srep.attr.ctime_nsec;
        ok(c == brick_ctime_ns(&e, 0, "d") || c == brick_ctime_ns(&e, 1, "d") ||
               c == brick_ctime_ns(&e, 2, "d"),
           "with the ctime the bricks have after the post-op");
        bfs_stat_rep_clear_dup(&srep);
    }
    ep_close_env(&e);
}

static void test_rep_own_postop(void)
{
    own_postop("rep-own-b", rep3_type, "replicate 3");
}

static void test_ec_own_postop(void)
{
    own_postop("ec-own-b", ec21_type, "disperse 2+1");
}

static void test_rep_other_postop(void)
{
    other_postop("rep-oth-b", rep3_type, "replicate 3");
}

static void test_ec_other_postop(void)
{
    other_postop("ec-oth-b", ec21_type, "disperse 2+1");
}

/* ---- the post-op's attributes kept (cache-invalidation.md, "Messages") ---- */

/* Empties A's md-cache (the benchmark's virtual xattr). */
static int mdc_flush(struct cg_vol *v)
{
    struct bfs_setxattr_req req = {.xattrs = bfs_dict_new()};
    req.loc.gfid = bfs_gfid_root;
    int rc = req.xattrs ? bfs_dict_set_int(req.xattrs, "brickfs.md-cache.flush", 1) : -ENOMEM;
    if (rc == 0)
        rc = bfs_sync_setxattr(v->top, v->st, &req, NULL);
    bfs_dict_unref(req.xattrs);
    return rc;
}

static bool same_attr(const struct bfs_iatt *a, const struct bfs_iatt *b)
{
    bool same = bfs_gfid_eq(&a->gfid, &b->gfid) && a->size == b->size &&
                a->blocks == b->blocks && a->mode == b->mode && a->nlink == b->nlink &&
                a->uid == b->uid && a->gid == b->gid && a->atime_sec == b->atime_sec &&
                a->atime_nsec == b->atime_nsec && a->mtime_sec == b->mtime_sec &&
                a->mtime_nsec == b->mtime_nsec && a->ctime_sec == b->ctime_sec &&
                a->ctime_nsec == b->ctime_nsec;
    if (!same)
        printf("# kept: size %llu blocks %llu mode %o nlink %u ctime %lld.%09u; "
               "lookup: size %llu blocks %llu mode %o nlink %u ctime %lld.%09u\n",
               (unsigned long long)a->size, (unsigned long long)a->blocks, a->mode, a->nlink,
               (long long)a->ctime_sec, a->ctime_nsec, (unsigned long long)b->size,
               (unsigned long long)b->blocks, b->mode, b->nlink, (long long)b->ctime_sec,
               b->ctime_nsec);
    return same;
}

/* A creates, writes and closes a file (the close ends the eager lock: the
 * post-op). A's lookup and stat of it then reach no brick (md-cache kept
 * what the post-op's replies made), and answer exactly what a lookup made
 * with md-cache emptied answers. */
static void own_postop_kept(const char *prefix, const char *type, const char *what)
{
    struct ep_env e;
    struct bfs_iatt a, l, st, fresh;
    struct bfs_fd *fd = NULL;
    if (!ep_opened(&e, prefix, type, what))
        return;
    if (ok(cg_create(&e.a, &bfs_gfid_root, "kept", &fd, &a) == 0, "A creates kept")) {
        is_int(cg_write(&e.a, fd, 0, "hello world", 11), 11, "A writes 11 bytes");
        is_int(cg_flush_close(&e.a, fd), 0, "and closes it (the post-op)");
        /* close() answers when the window's release starts (note 43): the
         * post-op's attributes come a round trip later */
        for (int k = 0; k < 500 && mdc_counter(&e.a, "postop_kept") < 1; k++)
            usleep(10000);
        long l0 = below(&e.a, "lookup"), s0 = below(&e.a, "stat");
        is_int(cg_lookup(&e.a, &bfs_gfid_root, "kept", &l), 0, "A looks kept up");
        is_int(do_stat(&e.a, &a.gfid, &st), 0, "and stats it");
        is_int((int)(below(&e.a, "lookup") - l0 + below(&e.a, "stat") - s0), 0,
               "both answered by md-cache (%s)", what);
        ok(mdc_counter(&e.a, "postop_kept") >= 1, "which kept the post-op's attributes");
        is_int(mdc_flush(&e.a), 0, "A empties its md-cache");
        is_int(cg_lookup(&e.a, &bfs_gfid_root, "kept", &fresh), 0, "A looks kept up again");
        ok(below(&e.a, "lookup") - l0 >= 1, "from the bricks");
        is_int((int)fresh.size, 11, "11 bytes");
        ok(same_attr(&l, &fresh), "md-cache's lookup answered exactly that");
        ok(same_attr(&st, &fresh), "and its stat too");
    }
    ep_close_env(&e);
}

static void test_rep_postop_kept(void)
{
    own_postop_kept("rep-kept-b", rep3_type, "replicate 3");
}

static void test_ec_postop_kept(void)
{
    own_postop_kept("ec-kept-b", ec21_type, "disperse 2+1");
}

/* Raises a local post-op event in md-cache, as a cluster translator
 * below it would (lib/upcall-mark.h). */
static void postop_event(struct cg_vol *v, const struct bfs_gfid *g, uint64_t id, bool begin,
                         const struct bfs_iatt *attr)
{
    struct bfs_upcall up = {.kind = BFS_UPCALL_INODE, .gfid = *g, .local = true,
                            .times_only = true, .postop = id, .postop_begin = begin,
                            .attr = attr};
    v->top->mod->notify(v->top, BFS_EV_UPCALL, v->top->children[0], &up);
}

/* Stats g: answered by md-cache (no stat below it) or not. */
static bool stat_kept(struct cg_vol *v, const struct bfs_gfid *g, struct bfs_iatt *out)
{
    long s0 = below(v, "stat");
    return do_stat(v, g, out) == 0 && below(v, "stat") == s0;
}

/* md-cache over one brick, the post-op's events raised by hand: what a
 * post-op's done brings is kept when nothing came between its begin and
 * its done; an invalidation (another client's change) or a change of
 * this client in between leaves the attributes dropped. */
static void test_postop_race(void)
{
    struct cg_vol v;
    struct bfs_iatt a, x, fake;
    if (!ok(vol_open(&v, "race", true) == 0 && cg_put(&v, &bfs_gfid_root, "f", "hello", &a) == 0,
            "md-cache over one brick with upcall; file f (5 bytes)")) {
        vol_close(&v);
        return;
    }
    fake = a;
    fake.size = 4242;
    postop_event(&v, &a.gfid, 1, true, NULL);
    postop_event(&v, &a.gfid, 1, false, &fake);
    ok(stat_kept(&v, &a.gfid, &x) && x.size == 4242,
       "begin, done with attributes: kept (a stat answers them)");

    fake.size = 777;
    postop_event(&v, &a.gfid, 2, true, NULL);
    struct bfs_upcall inv = {.kind = BFS_UPCALL_INODE, .gfid = a.gfid};
    v.top->mod->notify(v.top, BFS_EV_UPCALL, v.top->children[0], &inv);
    postop_event(&v, &a.gfid, 2, false, &fake);
    ok(!stat_kept(&v, &a.gfid, &x) && x.size == 5,
       "begin, another client's invalidation, done: dropped (the stat goes down: 5 bytes)");

    postop_event(&v, &a.gfid, 3, true, NULL);
    struct bfs_setattr_req sr = {.valid = BFS_SET_MODE};
    sr.loc.gfid = a.gfid;
    sr.attr.mode = 0600;
    is_int(bfs_sync_setattr(v.top, v.st, &sr, NULL), 0, "begin, then A's chmod 600");
    postop_event(&v, &a.gfid, 3, false, &fake);
    ok(!stat_kept(&v, &a.gfid, &x) && (x.mode & 0777) == 0600 && x.size == 5,
       "done: dropped (the stat goes down: mode 600)");

    postop_event(&v, &a.gfid, 4, true, NULL);
    postop_event(&v, &a.gfid, 5, true, NULL);
    postop_event(&v, &a.gfid, 4, false, &fake);
    postop_event(&v, &a.gfid, 5, false, &fake);
    ok(!stat_kept(&v, &a.gfid, &x) && x.size == 5, "two post-ops at once: neither kept");

    postop_event(&v, &a.gfid, 6, true, NULL);
    postop_event(&v, &a.gfid, 6, false, NULL);
    ok(!stat_kept(&v, &a.gfid, &x) && x.size == 5,
       "done without attributes (the cluster could not vouch): dropped");
    vol_close(&v);
}

/* md-cache over distribute over two bricks (upcall on): a post-op's done
 * event raised below distribute (as replicate under it would) keeps a
 * file's attributes, not a directory's (distribute's lookup merges a
 * directory's from every subvolume; one subvolume's are not what it
 * answers). */
static void test_dht_postop(void)
{
    struct cg_vol v;
    struct bfs_iatt d, f, x;
    char vf[2 * PATH_MAX + 1024];
    memset(&v, 0, sizeof(v));
    for (int i = 0; i < 2; i++) {
        snprintf(v.brick[i], sizeof(v.brick[i]), "%s/dht%d", cg_root(), i);
        if (mkdir(v.brick[i], 0755) < 0)
            return;
    }
    snprintf(vf, sizeof(vf),
             "volume p0\n type storage/posix\n option directory %s\nend-volume\n"
             "volume u0\n type features/upcall\n subvolumes p0\nend-volume\n"
             "volume p1\n type storage/posix\n option directory %s\nend-volume\n"
             "volume u1\n type features/upcall\n subvolumes p1\nend-volume\n"
             "volume dht\n type cluster/distribute\n subvolumes u0 u1\nend-volume\n"
             "volume cnt\n type debug/io-stats\n subvolumes dht\nend-volume\n"
             "volume mdc\n type performance/md-cache\n subvolumes cnt\nend-volume\n",
             v.brick[0], v.brick[1]);
    v.g = cg_graph_start(vf, NULL);
    v.top = v.g ? bfs_graph_find(v.g, "mdc") : NULL;
    v.st = bfs_stack_new();
    v.n = 2;
    struct bfs_xl *dht = v.g ? bfs_graph_find(v.g, "dht") : NULL;
    if (!ok(v.top && dht && cg_mkdir(&v, &bfs_gfid_root, "d", &d) == 0 &&
                cg_put(&v, &bfs_gfid_root, "f", "hello", &f) == 0 &&
                do_stat(&v, &f.gfid, &f) == 0,
            "md-cache over distribute over 2 bricks; d and f (5 bytes) made")) {
        if (v.g)
            vol_close(&v);
        return;
    }
    struct bfs_iatt *objs[2] = {&d, &f};
    for (int k = 0; k < 2; k++) {
        struct bfs_upcall up = {.kind = BFS_UPCALL_INODE, .gfid = objs[k]->gfid, .local = true,
                                .times_only = true, .postop = 10 + (uint64_t)k,
                                .postop_begin = true};
        dht->mod->notify(dht, BFS_EV_UPCALL, dht->children[0], &up);
        up.postop_begin = false;
        up.attr = objs[k];
        dht->mod->notify(dht, BFS_EV_UPCALL, dht->children[0], &up);
    }
    ok(!stat_kept(&v, &d.gfid, &x), "the directory's attributes: dropped (a stat goes down)");
    ok(stat_kept(&v, &f.gfid, &x) && x.size == 5, "the file's: kept");
    vol_close(&v);
}

int main(void)
{
    plan_lazy();
    if (!cg_can_run())
        return 0;
    alarm(300);
    ok(cg_init("mdc") == 0, "process resources");
    static const struct cg_test tests[] = {
        {"learned", test_learned},
        {"unmarked", test_unmarked},
        {"prefetched", test_prefetched},
        {"prefetched-unmarked", test_prefetched_unmarked},
        {"cluster-marks", test_cluster_marks},
        {"disperse-read", test_disperse_read},
        {"disperse-invalidated", test_disperse_invalidated},
        {"disperse-prefetched", test_disperse_prefetched},
        {"rep-own-postop", test_rep_own_postop},
        {"rep-postop-names", test_rep_postop_names},
        {"disperse-own-postop", test_ec_own_postop},
        {"rep-other-postop", test_rep_other_postop},
        {"disperse-other-postop", test_ec_other_postop},
        {"rep-postop-kept", test_rep_postop_kept},
        {"disperse-postop-kept", test_ec_postop_kept},
        {"postop-race", test_postop_race},
        {"dht-postop", test_dht_postop},
    };
    cg_run(tests, sizeof(tests) / sizeof(tests[0]), "MDC_TEST");
    cg_fini();
    return done_testing();
}
