/*
 * test_heal_api.c — what the self-heal daemon asks of cluster/replicate,
 * in one process over real bricks (storage/posix -> features/index ->
 * features/locks -> debug/error-gen, named c0, c1, ...), with heal on
 * access switched off so that only the daemon's calls heal:
 *
 *   - the bricks' pending indices list what a brick missed while it was
 *     down (listing through the child, as the daemon does);
 *   - getxattr brickfs.heal.status describes an inode (pending types,
 *     missing copies, sources and sinks) without changing anything;
 *     brickfs.path (storage/posix) names a directory;
 *   - getxattr brickfs.heal.now on a file whose name the returning brick
 *     lacks leaves it pending; after the heal of its parent (which creates
 *     the name) it heals; the indices end empty and the copies equal;
 *   - a name a returning brick has half made (killed in the middle of a
 *     create: no GFID, or a GFID without its handle) is completed by the
 *     parent's entry heal, and the file then heals by GFID;
 *   - a folder a returning brick has half made (killed in the middle of a
 *     mkdir: no GFID, or a GFID without its handle) is removed by the
 *     parent's entry heal when the sources lack the name, else completed,
 *     and then heals by GFID ("halfdir");
 *   - heal.now does not wait for a busy file (its data lock held by another
 *     owner): it stays pending, and heals once the lock is released;
 *   - setxattr brickfs.heal.resolve: EPERM for non-root, EALREADY when not
 *     in split-brain, EINVAL for an unknown brick, ENOTUNIQ when the policy
 *     cannot choose, and a real resolution by source-brick, bigger-file and
 *     latest-mtime.
 * Needs root (trusted xattrs); skips otherwise.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../lib/cluster-graph.h"
#include "../lib/tap.h"

/* Bricks: posix, features/index (x<i>), features/locks (l<i>), error-gen
 * (c<i>); replicate without heal on access (the API is what heals). */
static int vol_open(struct cg_vol *v, int n, const char *options)
{
    static const char *const layers[] = {"features/index x", "features/locks l", NULL};
    char top[1024];
    snprintf(top, sizeof(top),
             " type cluster/replicate\n option cluster.post-op-delay-ms 0\n"
             " option cluster.data-self-heal off\n option cluster.metadata-self-heal off\n"
             " option cluster.entry-self-heal off\n%s",
             options ? options : "");
    return cg_vol_open(v, n, layers, top);
}

/* A child's connection closes (or comes back) and replicate hears of it.
 * Closing, the brick drops the locks we held there, as protocol/server
 * does (cg_down): failing the calls alone left a lock whose unlock was
 * still on its way (behind close(), or behind a write's answer) on the
 * brick for good, and the next lock there waited forever. */
static void down(struct cg_vol *v, int i) { cg_down(v, i, true); }
static void up(struct cg_vol *v, int i) { cg_up(v, i, true); }

static int mkdir_(struct cg_vol *v, const struct bfs_gfid *par, const char *name,
                  struct bfs_gfid *g)
{
    struct bfs_iatt a;
    int rc = cg_mkdir(v, par, name, &a);
    *g = a.gfid;
    return rc;
}

static int write_fd(struct cg_vol *v, struct bfs_fd *fd, const char *s)
{
    struct bfs_write_req req = {.fd = fd, .offset = 0};
    req.data.data = s;
    req.data.len = strlen(s);
    int rc = bfs_sync_write(v->top, v->st, &req, NULL);
    struct bfs_flush_req freq = {.fd = fd};
    int frc = bfs_sync_flush(v->top, v->st, &freq, NULL);
    bfs_fd_unref(fd);
    return rc < 0 ? rc : frc;
}

/* A new file par/name holding s. */
static int put(struct cg_vol *v, const struct bfs_gfid *par, const char *name, const char *s,
               struct bfs_gfid *g)
{
    struct bfs_fd *fd = bfs_fd_new(v->g, NULL, O_RDWR, 0);
    struct bfs_create_req req = {.loc = cg_L(par, name), .fd = fd, .flags = O_RDWR | O_CREAT,
                                 .mode = 0644};
    struct bfs_create_rep rep;
    int rc = bfs_sync_create(v->top, v->st, &req, &rep);
    *g = rep.attr.gfid;
    bfs_create_rep_clear_dup(&rep);
    if (rc < 0) {
        bfs_fd_unref(fd);
        return rc;
    }
    return write_fd(v, fd, s);
}

/* Overwrites the start of file g with s. */
static int overwrite(struct cg_vol *v, const struct bfs_gfid *g, const char *s)
{
    struct bfs_inode *inode = bfs_inode_get(v->g->itable, g, S_IFREG);
    struct bfs_fd *fd = bfs_fd_new(v->g, inode, O_RDWR, 0);
    bfs_inode_unref(inode);
    struct bfs_open_req req = {.fd = fd, .flags = O_RDWR};
    req.loc.gfid = *g;
    int rc = bfs_sync_open(v->top, v->st, &req, NULL);
    if (rc < 0) {
        bfs_fd_unref(fd);
        return rc;
    }
    return write_fd(v, fd, s);
}

/* ---- the virtual xattrs ---- */

struct status {
    int rc;
    char pending[64], split[64], missing[64], ftype[16], sources[64], sinks[64];
};

static void copy(const struct bfs_dict *d, const char *key, char *out, size_t len)
{
    const char *s = NULL;
    out[0] = '\0';
    if (bfs_dict_get_str(d, key, &s) == 0 && s)
        snprintf(out, len, "%s", s);
}

static struct status vx(struct cg_vol *v, const struct bfs_gfid *g, const char *name,
                        struct bfs_stack *st)
{
    struct bfs_getxattr_req req = {.name = name};
    struct bfs_getxattr_rep rep;
    struct status s;
    req.loc.gfid = *g;
    s.rc = bfs_sync_getxattr(v->top, st ? st : v->st, &req, &rep);
    copy(rep.xattrs, "brickfs.heal.pending", s.pending, sizeof(s.pending));
    copy(rep.xattrs, "brickfs.heal.split-brain", s.split, sizeof(s.split));
    copy(rep.xattrs, "brickfs.heal.missing", s.missing, sizeof(s.missing));
    copy(rep.xattrs, "brickfs.heal.file-type", s.ftype, sizeof(s.ftype));
    copy(rep.xattrs, "brickfs.heal.sources.data", s.sources, sizeof(s.sources));
    copy(rep.xattrs, "brickfs.heal.sinks.data", s.sinks, sizeof(s.sinks));
    bfs_getxattr_rep_clear_dup(&rep);
    return s;
}

static int resolve(struct cg_vol *v, const struct bfs_gfid *g, const char *policy,
                   struct bfs_stack *st)
{
    struct bfs_setxattr_req req = {.xattrs = bfs_dict_new()};
    req.loc.gfid = *g;
    bfs_dict_set_str(req.xattrs, "brickfs.heal.resolve", policy);
    int rc = bfs_sync_setxattr(v->top, st ? st : v->st, &req, NULL);
    bfs_dict_unref(req.xattrs);
    return rc;
}

/* Is g on child i's index (listed through the child, as the daemon does)? */
static int listed(struct cg_vol *v, int i, const struct bfs_gfid *g)
{
    struct bfs_getxattr_req req = {.name = "brickfs.index.pending", .xdata = bfs_dict_new()};
    struct bfs_getxattr_rep rep;
    bfs_dict_set_int(req.xdata, "index-count", 1000);
    req.loc.gfid = bfs_gfid_root;
    int rc = bfs_sync_getxattr(cg_child(v, i), v->st, &req, &rep);
    bfs_dict_unref(req.xdata);
    int found = rc < 0 ? rc : 0;
    const void *raw;
    size_t len = 0;
    if (rc >= 0 && bfs_dict_get_bin(rep.xattrs, "brickfs.index.pending", &raw, &len) == 0)
        for (size_t k = 0; k + 16 <= len; k += 16)
            found |= memcmp((const char *)raw + k, g, 16) == 0;
    bfs_getxattr_rep_clear_dup(&rep);
    return found;
}

static int index_size(struct cg_vol *v, int i)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/.brickfs/indices/pending", v->brick[i]);
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* Waits (at most 10 s) until child i's index holds n entries: entry
 * transactions run their post-op behind their answer, so the last dirty
 * mark may still be on its way out. Returns the last count seen. */
static int index_settles(struct cg_vol *v, int i, int n)
{
    int got = index_size(v, i);
    for (int k = 0; k < 1000 && got != n; k++) {
        usleep(10000);
        got = index_size(v, i);
    }
    if (got != n) { /* what is left, and the root's counters: for the diagnosis */
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/.brickfs/indices/pending", v->brick[i]);
        DIR *d = opendir(path);
        for (struct dirent *de; d && (de = readdir(d));)
            if (de->d_name[0] != '.')
                printf("# on the index of c%d: %s\n", i, de->d_name);
        if (d)
            closedir(d);
        for (int b = 0; b < v->n; b++)
            for (int t = 0; t < 3; t++)
                printf("# root on c%d type %d: dirty %lld c0 %lld c1 %lld\n", b, t,
                       cg_counter(v, b, ".", "dirty", t), cg_counter(v, b, ".", "c0", t),
                       cg_counter(v, b, ".", "c1", t));
    }
    return got;
}

/* heal.now of g until nothing is pending (at most 100 tries, 20 ms apart).
 * heal.now tries the inode's locks once and leaves a busy inode pending,
 * and an entry change that just answered still holds its parent's entry
 * lock until its post-op (which carries the unlock) is done: the daemon
 * comes back to such an inode on its next pass; so does this. */
static struct status heal_settles(struct cg_vol *v, const struct bfs_gfid *g)
{
    struct status s = vx(v, g, "brickfs.heal.now", NULL);
    for (int k = 0; k < 100 && s.rc > 0 && s.pending[0]; k++) {
        usleep(20000);
        s = vx(v, g, "brickfs.heal.now", NULL);
    }
    return s;
}

/* Takes or drops replicate's data lock (domain: its name) on f, on brick i. */
static int lock_data(struct cg_vol *v, int i, const struct bfs_gfid *f, struct bfs_stack *st,
                     bool lock)
{
    struct bfs_inodelk_req req = {.domain = "rep", .cmd = BFS_LK_SETLK};
    req.loc.gfid = *f;
    req.lock.type = lock ? F_WRLCK : F_UNLCK;
    req.lock.whence = SEEK_SET;
    req.lock.owner = st->lk_owner;
    return bfs_sync_inodelk(cg_child(v, i), st, &req, NULL);
}

/* ---- scenarios ---- */

static void test_heal_now(void)
{
    struct cg_vol v;
    struct bfs_gfid d, f;
    if (vol_open(&v, 3, NULL) < 0)
        return;
    down(&v, 2);
    is_int(mkdir_(&v, &bfs_gfid_root, "d", &d), 0, "mkdir d with c2 down");
    is_int(put(&v, &d, "f", "hello", &f), 0, "create d/f with c2 down");
    up(&v, 2);
    ok(listed(&v, 0, &bfs_gfid_root) == 1 && listed(&v, 1, &bfs_gfid_root) == 1,
       "the root (entries c2 missed) is on the indices of c0 and c1");
    ok(listed(&v, 0, &d) == 1, "d is on c0's index");
    is_int(listed(&v, 2, &bfs_gfid_root), 0, "c2's own index has nothing");

    struct status s = vx(&v, &d, "brickfs.heal.status", NULL);
    ok(s.rc > 0, "status of d answers (%d keys)", s.rc);
    is_str(s.ftype, "directory", "d is a directory");
    is_str(s.missing, "c2", "d is missing on c2");
    ok(strstr(s.pending, "entry") != NULL, "d needs an entry heal (%s)", s.pending);

    struct bfs_getxattr_req preq = {.name = "brickfs.path"};
    struct bfs_getxattr_rep prep;
    const char *path = NULL;
    preq.loc.gfid = d;
    if (bfs_sync_getxattr(v.top, v.st, &preq, &prep) > 0)
        bfs_dict_get_str(prep.xattrs, "brickfs.path", &path);
    is_str(path, "/d", "brickfs.path of d is /d");
    bfs_getxattr_rep_clear_dup(&prep);
    preq.loc.gfid = f;
    is_int(bfs_sync_getxattr(v.top, v.st, &preq, &prep), -ENODATA,
           "brickfs.path of a file: ENODATA (names of files are not recorded)");
    bfs_getxattr_rep_clear_dup(&prep);

    struct bfs_stack *user = bfs_stack_new();
    user->uid = 1000;
    is_int(vx(&v, &d, "brickfs.heal.status", user).rc, -EPERM, "status as non-root: EPERM");
    is_int(resolve(&v, &d, "bigger-file", user), -EPERM, "resolve as non-root: EPERM");
    bfs_stack_unref(user);
    is_int(vx(&v, &d, "brickfs.heal.bogus", NULL).rc, -ENODATA, "unknown virtual name: ENODATA");

    s = vx(&v, &f, "brickfs.heal.now", NULL);
    ok(s.rc > 0 && s.pending[0] && strcmp(s.missing, "c2") == 0,
       "heal of d/f before its parent: still pending (%s), missing on c2", s.pending);
    s = heal_settles(&v, &bfs_gfid_root);
    is_str(s.pending, "", "root healed");
    s = heal_settles(&v, &d);
    is_str(s.pending, "", "d healed (f created on c2)");
    ok(listed(&v, 0, &f) == 1, "d's heal marked f: on c0's index");
    s = heal_settles(&v, &f);
    is_str(s.pending, "", "now d/f heals");
    is_str(s.missing, "", "and is on every brick");
    ok(cg_content_is(&v, 2, "d/f", "hello"), "c2 holds the data");
    for (int i = 0; i < 3; i++)
        is_int(index_settles(&v, i, 0), 0, "index of c%d empty", i);
    is_int(resolve(&v, &f, "bigger-file", NULL), -EALREADY, "resolve when healthy: EALREADY");

    /* a busy file (its data lock held, as a writer's eager lock is) is
     * left pending at once, not waited for */
    down(&v, 2);
    is_int(overwrite(&v, &f, "HELLO"), 0, "d/f rewritten with c2 down");
    up(&v, 2);
    struct bfs_stack *other = bfs_stack_new();
    other->lk_owner = 424242;
    /* close() does not wait for the post-op that releases our own lock
     * (replicate-fd.c, afr_flush): take it once that is done */
    int held = 0;
    for (int k = 0; k < 500 && held < 3; k++) {
        held = 0;
        for (int i = 0; i < 3; i++)
            held += lock_data(&v, i, &f, other, true) == 0;
        if (held < 3) {
            for (int i = 0; i < 3; i++)
                lock_data(&v, i, &f, other, false);
            usleep(10000);
        }
    }
    is_int(held, 3, "another owner holds the data lock of d/f on every brick");
    s = vx(&v, &f, "brickfs.heal.now", NULL);
    is_str(s.pending, "data", "heal.now gives up on the busy file: still pending");
    ok(cg_content_is(&v, 2, "d/f", "hello"), "c2 untouched");
    for (int i = 0; i < 3; i++)
        lock_data(&v, i, &f, other, false);
    bfs_stack_unref(other);
    s = heal_settles(&v, &f);
    is_str(s.pending, "", "lock released: healed");
    ok(cg_content_is(&v, 2, "d/f", "HELLO"), "c2 has the new data");
    cg_vol_close(&v);
}

/* mkdir d on every brick, then c2 down. */
static void dir_then_down(struct cg_vol *v, struct bfs_gfid *d, const char *what)
{
    is_int(mkdir_(v, &bfs_gfid_root, "d", d), 0, "%s: mkdir d", what);
    /* its post-op (with the unlock) runs behind the answer: done before c2
     * fails, or c2 keeps the lock and the mark (error-gen is no crash) */
    bool settled = false;
    for (int k = 0; k < 5 && !settled; k++)
        settled = cg_clean_soon(v, ".");
    ok(settled, "%s: the root's post-op done before c2 goes down", what);
    down(v, 2);
}

/* A brick killed in the middle of a create keeps the name without the rest:
 * with no GFID (killed between the open and setting the GFID), or with the
 * GFID but no handle (killed before the handle's link). The file's data
 * then heals by GFID on the others and fails on that brick, and no client
 * ever looks the name up (the daemon heals with no mount): the entry heal
 * of the parent must give the name its GFID, or its handle, and mark it,
 * so that the file's own heal finds it (221 left one such file pending). */
static void test_half_created(void)
{
    struct cg_vol v;
    struct bfs_gfid d, f, g;
    if (vol_open(&v, 3, NULL) < 0)
        return;
    dir_then_down(&v, &d, "half");
    is_int(put(&v, &d, "f", "hello", &f), 0, "half: create d/f with c2 down");
    is_int(put(&v, &d, "g", "world", &g), 0, "half: create d/g with c2 down");
    cg_half_create(&v, 2, "d/f", NULL); /* c2 died before the GFID */
    cg_half_create(&v, 2, "d/g", &g);   /* c2 died before the handle */
    ok(!cg_handle_present(v.brick[2], &g), "half: c2 has d/g's GFID but no handle");
    up(&v, 2);
    struct status s = heal_settles(&v, &d);
    is_str(s.pending, "", "half: d healed");
    s = heal_settles(&v, &f);
    is_str(s.pending, "", "half: d/f healed (%s missing)", s.missing);
    is_str(s.missing, "", "half: d/f is on every brick");
    ok(cg_gfid_on(&v, 2, "d/f", &f), "half: c2's d/f has the file's GFID");
    ok(cg_content_is(&v, 2, "d/f", "hello"), "half: c2's d/f holds the data");
    s = heal_settles(&v, &g);
    is_str(s.pending, "", "half: d/g healed (%s missing)", s.missing);
    ok(cg_handle_present(v.brick[2], &g), "half: c2 has d/g's handle");
    ok(cg_content_is(&v, 2, "d/g", "world"), "half: c2's d/g holds the data");
    for (int i = 0; i < 3; i++)
        is_int(index_settles(&v, i, 0), 0, "half: index of c%d empty", i);
    cg_vol_close(&v);
}

static bool on_brick(struct cg_vol *v, int i, const char *rel)
{
    struct stat sb;
    return lstat(cg_on(v, i, rel), &sb) == 0;
}

/* The same for a mkdir (212's flake): a folder name with no GFID, or with
 * its GFID but no handle. Only on the returning brick (the sources never
 * made it), the entry heal used to address it by GFID, could not list or
 * remove it, and the parent stayed pending for good; on the sources too,
 * a folder with a GFID but no handle passed for healthy and its own heal
 * (by GFID) failed on that brick for good. */
static void test_half_dir(void)
{
    struct cg_vol v;
    struct bfs_gfid d, k, k2, x, gone2;
    if (vol_open(&v, 3, NULL) < 0)
        return;
    dir_then_down(&v, &d, "halfdir");
    is_int(mkdir_(&v, &d, "k", &k), 0, "halfdir: mkdir d/k with c2 down");
    is_int(mkdir_(&v, &d, "k2", &k2), 0, "halfdir: mkdir d/k2 with c2 down");
    is_int(put(&v, &k2, "x", "inside", &x), 0, "halfdir: create d/k2/x with c2 down");
    bfs_gfid_generate(&gone2);
    cg_half_mkdir(&v, 2, "d/k", NULL);        /* c2 died before the GFID */
    cg_half_mkdir(&v, 2, "d/k2", &k2);        /* c2 died before the handle */
    cg_half_mkdir(&v, 2, "d/gone", NULL);     /* a mkdir that failed: c2 only */
    cg_half_mkdir(&v, 2, "d/gone2", &gone2);
    ok(!cg_handle_present(v.brick[2], &k2), "halfdir: c2 has d/k2's GFID but no handle");
    up(&v, 2);
    struct status s = heal_settles(&v, &d);
    is_str(s.pending, "", "halfdir: d healed");
    ok(!on_brick(&v, 2, "d/gone"), "halfdir: c2's d/gone (no GFID, not on the sources) removed");
    ok(!on_brick(&v, 2, "d/gone2"), "halfdir: c2's d/gone2 (no handle, not on the sources) removed");
    ok(cg_gfid_on(&v, 2, "d/k", &k), "halfdir: c2's d/k has the folder's GFID");
    ok(cg_handle_present(v.brick[2], &k), "halfdir: c2 has d/k's handle");
    ok(cg_handle_present(v.brick[2], &k2), "halfdir: c2 has d/k2's handle");
    s = heal_settles(&v, &k);
    is_str(s.pending, "", "halfdir: d/k healed (%s missing)", s.missing);
    s = heal_settles(&v, &k2);
    is_str(s.pending, "", "halfdir: d/k2 healed (%s missing)", s.missing);
    s = heal_settles(&v, &x);
    is_str(s.pending, "", "halfdir: d/k2/x healed (%s missing)", s.missing);
    ok(cg_content_is(&v, 2, "d/k2/x", "inside"), "halfdir: c2's d/k2/x holds the data");
    for (int i = 0; i < 3; i++)
        is_int(index_settles(&v, i, 0), 0, "halfdir: index of c%d empty", i);
    cg_vol_close(&v);
}

/* f: "0123456789" everywhere, then c1 writes 20 B while c0 is down, then
 * c0 writes 3 B over the start while c1 is down: data split-brain with
 * c1 bigger and c0 later. */
/* close() does not wait for the post-op that ends the write's eager lock
 * (replicate-fd.c, afr_flush): before a brick is taken down, wait until
 * that post-op cleared the data dirty mark on the copies in mask (at most
 * 5 s), so that the scenario's counters are the writes' blame only. */
static void settle(struct cg_vol *v, const char *name, uint32_t mask)
{
    for (int k = 0; k < 500; k++) {
        bool clean = true;
        for (int i = 0; i < 2; i++)
            if (mask & (1u << i))
                clean = clean && cg_counter(v, i, name, "dirty", 0) == 0;
        if (clean)
            return;
        usleep(10000);
    }
}

static void provoke_split(struct cg_vol *v, const char *name, struct bfs_gfid *f, const char *a,
                          const char *b)
{
    put(v, &bfs_gfid_root, name, "0123456789", f);
    /* The create's entry post-op on the root runs behind its answer: a
     * brick taken down before it arrives keeps the root's dirty mark and
     * its index entry, rightly (nothing heals them here: entry heal is
     * off), and the root would be left on c0's index beside sb4. */
    bool settled = false;
    for (int k = 0; k < 5 && !settled; k++)
        settled = cg_clean_soon(v, ".");
    ok(settled, "%s: the root's post-op done before c0 goes down", name);
    settle(v, name, 3);
    down(v, 0);
    overwrite(v, f, b);
    settle(v, name, 2);
    up(v, 0);
    usleep(20000); /* distinct mtimes */
    down(v, 1);
    overwrite(v, f, a);
    settle(v, name, 1);
    up(v, 1);
}

/* The unlock of a write's window runs behind the write's answer (with
 * post-op-delay-ms 0 as here, or behind close()). A brick that goes down
 * (its connection closes) before that unlock reaches it drops the lock
 * itself, as protocol/server does: once back, it holds nothing of ours,
 * and the next write, to it alone, answers. (A down that only failed the
 * calls left the lock on the brick for good, and that write waited on it
 * forever: performance-notes 24 and 43.) */
static void test_unlock_after_down(void)
{
    struct cg_vol v;
    struct bfs_gfid f;
    struct bfs_fd *fd;
    if (vol_open(&v, 2, " option cluster.quorum-type none\n") < 0)
        return;
    is_int(put(&v, &bfs_gfid_root, "ul", "0123456789", &f), 0, "put");
    settle(&v, "ul", 3);
    /* c1 answers the post-op late: the unlock waits for it */
    cg_reconf(&v, 1, "enable", "fxattrop,xattrop");
    cg_reconf(&v, 1, "delay-ms", "300");
    is_int(cg_open(&v, &f, O_RDWR, &fd), 0, "open");
    is_int(cg_write(&v, fd, 0, "ab", 2), 2, "write (its post-op and unlock go out behind it)");
    down(&v, 0); /* before the unlock reaches c0 */
    for (int k = 0; k < 500 && cg_brick_locked(&v, 1); k++)
        usleep(10000);
    ok(!cg_brick_locked(&v, 1), "the window's release is over (c1 unlocked)");
    cg_reconf(&v, 1, "delay-ms", "0");
    cg_reconf(&v, 1, "enable", "all");
    is_int(cg_flush_close(&v, fd), 0, "close");
    up(&v, 0);
    bool stale = cg_brick_locked(&v, 0);
    ok(!stale, "c0 holds no lock of the window once back");
    if (!stale) { /* else this write would wait forever */
        down(&v, 1);
        is_int(overwrite(&v, &f, "AB"), 0, "a write to c0 alone answers");
        ok(cg_content_is(&v, 0, "ul", "AB23456789"), "c0 has it");
        up(&v, 1);
    }
    cg_vol_close(&v);
}

static void test_resolve(void)
{
    struct cg_vol v;
    struct bfs_gfid f;
    if (vol_open(&v, 2, " option cluster.quorum-type none\n") < 0)
        return;
    provoke_split(&v, "sb", &f, "AAA", "BBBBBBBBBBBBBBBBBBBB");
    struct status s = vx(&v, &f, "brickfs.heal.status", NULL);
    is_str(s.split, "data", "data split-brain reported");
    s = vx(&v, &f, "brickfs.heal.now", NULL);
    is_str(s.split, "data", "heal.now does not resolve it");
    ok(cg_content_is(&v, 0, "sb", "AAA3456789") && cg_content_is(&v, 1, "sb", "BBBBBBBBBBBBBBBBBBBB"),
       "both copies untouched");
    is_int(resolve(&v, &f, "source-brick:nope", NULL), -EINVAL, "unknown brick: EINVAL");
    is_int(resolve(&v, &f, "biggest", NULL), -EINVAL, "unknown policy: EINVAL");
    is_int(resolve(&v, &f, "source-brick:c0", NULL), 0, "resolve by source-brick c0");
    ok(cg_content_is(&v, 1, "sb", "AAA3456789"), "c1 now holds c0's copy");
    s = vx(&v, &f, "brickfs.heal.status", NULL);
    ok(!s.split[0] && !s.pending[0], "healthy after resolution");

    provoke_split(&v, "sb2", &f, "AAA", "BBBBBBBBBBBBBBBBBBBB");
    is_int(resolve(&v, &f, "bigger-file", NULL), 0, "resolve by bigger-file");
    ok(cg_content_is(&v, 0, "sb2", "BBBBBBBBBBBBBBBBBBBB"), "the bigger copy (c1) won");

    provoke_split(&v, "sb3", &f, "AAA", "BBBBBBBBBBBBBBBBBBBB");
    is_int(resolve(&v, &f, "latest-mtime", NULL), 0, "resolve by latest-mtime");
    ok(cg_content_is(&v, 1, "sb3", "AAA3456789"), "the later copy (c0) won");

    provoke_split(&v, "sb4", &f, "AA", "BB"); /* same size on both */
    char gs[BFS_GFID_STRLEN];
    printf("# sb4 is %s\n", bfs_gfid_fmt(&f, gs)); /* for index_settles' diagnosis */
    is_int(resolve(&v, &f, "bigger-file", NULL), -ENOTUNIQ, "equal sizes: ENOTUNIQ");
    is_str(vx(&v, &f, "brickfs.heal.status", NULL).split, "data", "still in split-brain");
    for (int i = 0; i < 2; i++)
        is_int(index_settles(&v, i, 1), 1, "only sb4 left on the index of c%d", i);
    cg_vol_close(&v);
}

int main(void)
{
    plan_lazy();
    if (!cg_can_run())
        return 0;
    alarm(180);
    ok(cg_init("healapi") == 0, "process resources");
    test_heal_now();
    test_half_created();
    test_half_dir();
    test_unlock_after_down();
    test_resolve();
    cg_fini();
    return done_testing();
}
