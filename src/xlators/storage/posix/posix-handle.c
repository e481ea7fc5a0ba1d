/*
 * posix-handle.c — GFIDs, the handle store and path-free resolution.
 *
 * Every entry of a brick carries its GFID in trusted.brickfs.gfid, and
 * <brick>/.brickfs/ab/cd/<gfid> (ab, cd: its first two bytes in hex) is its
 * handle:
 *   - files, symlinks, special files: a hard link to the same inode, so the
 *     object is reachable by GFID whatever its names (and while it has one:
 *     the handle goes when the last name goes; a regular file's just after,
 *     journaled in .brickfs/unlink-pending, see posix-defer.c; meanwhile a
 *     handle with st_nlink 1, an orphan, resolves as gone: -ESTALE);
 *   - directories: a symlink "../../PP/QQ/<pgfid>/<name>" (GlusterFS's
 *     scheme), that is, the handle of its parent plus its name. The root's
 *     handle is "../../.." so that the kernel could follow a chain; the
 *     root's GFID is 00000000-0000-0000-0000-000000000001.
 * .brickfs and everything under it is 0700 root; it is only touched as root
 * (bfs__px_root_begin), never by a client's identity.
 *
 * Resolution never lets the kernel follow a symlink and never parses a
 * client path:
 *   - a file handle is opened O_PATH|O_NOFOLLOW: the inode itself;
 *   - a directory handle is read level by level (readlinkat) up to the root,
 *     which yields the names from the root down, and those are opened one by
 *     one from the brick root fd with O_PATH|O_NOFOLLOW|O_DIRECTORY; a
 *     symlink anywhere on the way fails with ENOTDIR. The directory found
 *     must carry the GFID asked for, else the handle is stale (-ESTALE).
 *     This costs two system calls per level of depth; there is no limit of
 *     40 levels as with kernel-followed chains.
 *   - (parent, name) is one openat(O_PATH|O_NOFOLLOW) below the parent's fd,
 *     made with the caller's identity so that search permission applies.
 * A symlink handle is also what a client's symlink has (its hard link is a
 * symlink); it is told apart from a directory handle by its own GFID xattr.
 *
 * Lifetimes: a struct px_obj owns its fd; bfs__px_obj_close() closes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "posix.h"

#define PX_MAX_DEPTH 4096
#define PX_TARGET_LEN 320 /* "../../" + handle path + "/" + 255-byte name */

void bfs__px_obj_close(struct px_obj *o)
{
    if (o->fd >= 0)
        SYS.close(o->fd);
    o->fd = -1;
}

void bfs__px_proc_path(int fd, char out[PX_PROC_FD_LEN])
{
    snprintf(out, PX_PROC_FD_LEN, "/proc/self/fd/%d", fd);
}

void bfs__px_handle_path(const struct bfs_gfid *g, char out[PX_HPATH_LEN])
{
    char s[BFS_GFID_STRLEN];
    bfs_gfid_fmt(g, s);
    snprintf(out, PX_HPATH_LEN, "%.2s/%.2s/%s", s, s + 2, s);
}

static unsigned stripe(const struct bfs_gfid *g)
{
    unsigned h = 0;
    for (int i = 0; i < 16; i++)
        h = h * 31 + g->b[i];
    return h % PX_NLOCKS;
}

pthread_mutex_t *bfs__px_elock_for(struct px_priv *p, const struct bfs_gfid *pargfid)
{
    return &p->elocks[stripe(pargfid)];
}

pthread_mutex_t *bfs__px_ilock_for(struct px_priv *p, const struct bfs_gfid *g)
{
    return &p->ilocks[stripe(g)];
}

void bfs__px_lock2(pthread_mutex_t *a, pthread_mutex_t *b)
{
    if (!a || a == b) {
        a = b;
        b = NULL;
    }
    if (a && b && b < a) {
        pthread_mutex_t *t = a;
        a = b;
        b = t;
    }
    if (a)
        pthread_mutex_lock(a);
    if (b)
        pthread_mutex_lock(b);
}

void bfs__px_unlock2(pthread_mutex_t *a, pthread_mutex_t *b)
{
    if (a)
        pthread_mutex_unlock(a);
    if (b && b != a)
        pthread_mutex_unlock(b);
}

/* ---- GFID xattr ---- */

/* Through /proc/self/fd so that it works on O_PATH fds and on symlinks (the
 * magic link lands on the inode itself, nothing further is followed). */
static int gfid_read(ssize_t n, const struct bfs_gfid *out)
{
    if (n < 0)
        return errno == ERANGE ? -EIO : -errno;
    if (n != (ssize_t)sizeof(out->b) || bfs_gfid_is_null(out))
        return -EIO;
    return 0;
}

int bfs__px_gfid_get(int fd, struct bfs_gfid *out)
{
    char path[PX_PROC_FD_LEN];
    bfs__px_proc_path(fd, path);
    return gfid_read(SYS.getxattr(path, PX_GFID_XATTR, out->b, sizeof(out->b)), out);
}

/* The same on an fd open for I/O (not O_PATH): no procfs walk. */
static int gfid_get_io(int fd, struct bfs_gfid *out)
{
    return gfid_read(SYS.fgetxattr(fd, PX_GFID_XATTR, out->b, sizeof(out->b)), out);
}

/* On an fd open for I/O directly: the /proc/self/fd path costs a lookup of
 * three procfs names per call (~0.8 µs measured, against 0.3 µs). */
static int gfid_set(int fd, bool io, const struct bfs_gfid *g)
{
    char path[PX_PROC_FD_LEN];
    int set;
    if (io) {
        set = SYS.fsetxattr(fd, PX_GFID_XATTR, g->b, sizeof(g->b), XATTR_CREATE);
    } else {
        bfs__px_proc_path(fd, path);
        set = SYS.setxattr(path, PX_GFID_XATTR, g->b, sizeof(g->b), XATTR_CREATE);
    }
    if (set == 0)
        return 0;
    int rc = -errno;
    struct bfs_gfid old;
    if (rc == -EEXIST && bfs__px_gfid_get(fd, &old) == 0 && bfs_gfid_eq(&old, g))
        return 0;
    return rc;
}

static void gfid_unset(int fd, bool io)
{
    char path[PX_PROC_FD_LEN];
    if (io) {
        (void)SYS.fremovexattr(fd, PX_GFID_XATTR);
        return;
    }
    bfs__px_proc_path(fd, path);
    (void)SYS.removexattr(path, PX_GFID_XATTR);
}

int bfs__px_gfid_for_new(const struct bfs_dict *xdata, struct bfs_gfid *out, bool *requested)
{
    const void *v;
    size_t len;
    int rc = bfs_dict_get_bin(xdata, PX_GFID_REQ_KEY, &v, &len);
    *requested = false;
    if (rc == -ENOENT || !xdata) {
        bfs_gfid_generate_entry(out);
        return 0;
    }
    if (rc < 0 || len != sizeof(out->b))
        return -EINVAL;
    memcpy(out->b, v, sizeof(out->b));
    if (bfs_gfid_is_null(out) || bfs_gfid_is_root(out))
        return -EINVAL;
    *requested = true;
    return 0;
}

/* ---- handle store layout ---- */

static void handle_target(const struct bfs_gfid *pg, const char *name, char out[PX_TARGET_LEN])
{
    char hp[PX_HPATH_LEN];
    bfs__px_handle_path(pg, hp);
    snprintf(out, PX_TARGET_LEN, "../../%s/%s", hp, name);
}

/* Parses "../../PP/QQ/<pgfid>/<name>" strictly; the name must be a name. */
static int parse_target(const char *t, struct bfs_gfid *pg, const char **name)
{
    char hp[PX_HPATH_LEN];
    if (strncmp(t, "../../", 6) != 0 || strlen(t) < 6 + 43 + 1)
        return -EINVAL;
    t += 6;
    char gs[BFS_GFID_STRLEN];
    memcpy(gs, t + 6, 36);
    gs[36] = '\0';
    if (bfs_gfid_parse(gs, pg) < 0 || t[42] != '/')
        return -EINVAL;
    bfs__px_handle_path(pg, hp);
    if (strncmp(t, hp, 42) != 0)
        return -EINVAL;
    *name = t + 43;
    return bfs_name_check(*name) < 0 ? -EINVAL : 0;
}

/* The handle folder .brickfs/ab/cd of g, as an index into hdir_known. */
static unsigned hdir_index(const struct bfs_gfid *g)
{
    return (unsigned)g->b[0] << 8 | g->b[1];
}

static bool hdir_known(struct px_priv *p, const struct bfs_gfid *g)
{
    unsigned i = hdir_index(g);
    return __atomic_load_n(&p->hdir_known[i / 64], __ATOMIC_RELAXED) & (1ull << (i % 64));
}

/* .brickfs/ab and .brickfs/ab/cd, created on first use (root, 0700): the
 * leaf first (its parent exists once 256 files were made), the parent only
 * when missing; a folder that exists is remembered, so that a later handle
 * goes straight to its link (folders are never removed while the brick
 * runs; a handle whose link still finds none makes them again). */
static void handle_mkdirs(struct px_priv *p, const struct bfs_gfid *g)
{
    char hp[PX_HPATH_LEN];
    bfs__px_handle_path(g, hp);
    hp[5] = '\0';
    int rc = SYS.mkdirat(p->handles_fd, hp, 0700);
    if (rc < 0 && errno == ENOENT) {
        hp[2] = '\0';
        (void)SYS.mkdirat(p->handles_fd, hp, 0700);
        hp[2] = '/';
        rc = SYS.mkdirat(p->handles_fd, hp, 0700);
    }
    if (rc == 0 || errno == EEXIST) {
        unsigned i = hdir_index(g);
        __atomic_or_fetch(&p->hdir_known[i / 64], 1ull << (i % 64), __ATOMIC_RELAXED);
    }
}

/* Before a new handle: its folder, unless known to exist. */
static void handle_folder(struct px_priv *p, const struct bfs_gfid *g)
{
    if (!hdir_known(p, g))
        handle_mkdirs(p, g);
}

/* ---- resolution ---- */

static int open_root(struct px_priv *p, struct px_obj *o)
{
    o->fd = SYS.openat(p->root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
    if (o->fd < 0 || SYS.fstat(o->fd, &o->st) < 0) {
        int rc = -errno;
        bfs__px_obj_close(o);
        return rc;
    }
    o->gfid = bfs_gfid_root;
    return 0;
}

struct name_stack {
    char **v;
    size_t n, cap;
};

static void names_free(struct name_stack *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

static int names_push(struct name_stack *s, const char *name)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        char **v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    if (!(s->v[s->n] = strdup(name)))
        return -ENOMEM;
    s->n++;
    return 0;
}

/* Reads the chain of directory handles from g up to the root: names[0] is
 * g's own name, names[n-1] the name of its ancestor at the root. Root. */
static int read_chain(struct px_priv *p, const struct bfs_gfid *g, struct name_stack *names,
                      struct bfs_gfid *first_parent)
{
    struct bfs_gfid cur = *g;
    char hp[PX_HPATH_LEN], buf[PX_TARGET_LEN + 1];

    while (!bfs_gfid_is_root(&cur)) {
        if (names->n >= PX_MAX_DEPTH)
            return -ELOOP;
        bfs__px_handle_path(&cur, hp);
        ssize_t len = SYS.readlinkat(p->handles_fd, hp, buf, sizeof(buf) - 1);
        if (len < 0)
            return errno == ENOENT || errno == EINVAL ? -ESTALE : -errno;
        buf[len] = '\0';
        struct bfs_gfid pg;
        const char *name;
        if (parse_target(buf, &pg, &name) < 0)
            return -ESTALE;
        int rc = names_push(names, name);
        if (rc < 0)
            return rc;
        if (names->n == 1 && first_parent)
            *first_parent = pg;
        cur = pg;
    }
    /* Never into our own folder, whatever a handle says. */
    if (names->n && strcmp(names->v[names->n - 1], PX_HIDDEN) == 0)
        return -ESTALE;
    return 0;
}

int bfs__px_dir_path(struct px_priv *p, const struct bfs_gfid *g, char **out)
{
    struct name_stack names = {0};
    bfs__px_root_begin();
    int rc = read_chain(p, g, &names, NULL);
    bfs__px_root_end();
    size_t len = 1;
    for (size_t i = 0; rc == 0 && i < names.n; i++)
        len += strlen(names.v[i]) + 1;
    char *s = rc == 0 ? malloc(len + 1) : NULL;
    if (rc == 0 && !s)
        rc = -ENOMEM;
    if (rc == 0) {
        size_t o = 0;
        s[o++] = '/';
        for (size_t i = names.n; i-- > 0;)
            o += (size_t)sprintf(s + o, "%s%s", names.v[i], i ? "/" : "");
        s[o] = '\0';
        *out = s;
    }
    names_free(&names);
    return rc;
}

/* Directory g at the path its last walk took (posix-cache.c), for one
 * readlinkat and one openat2 where the walk costs a readlinkat and an
 * openat per level. g's own handle must still name the parent and the
 * name it named then (the handle decides, as in the walk); the path is
 * opened beneath the brick root, following no symlink and staying on its
 * file system; what it finds must carry g's GFID: a directory has one
 * name, so that is g itself. Anything else (renamed, removed, a symlink or
 * a mount on the way, a changed handle) fails here and the walk decides.
 * 0 or -ENOENT. Root. */
static int open_cached_path(struct px_priv *p, const struct bfs_gfid *g, struct px_obj *o)
{
    char path[PX_DPATH_MAX], hp[PX_HPATH_LEN], buf[PX_TARGET_LEN + 1];
    struct bfs_gfid pg, hpg;
    const char *name;
    if (bfs__px_cache_dir_path(p->cache, g, path, sizeof(path), &pg) < 0)
        return -ENOENT;
    bfs__px_handle_path(g, hp);
    ssize_t len = SYS.readlinkat(p->handles_fd, hp, buf, sizeof(buf) - 1);
    if (len < 0)
        return -ENOENT;
    buf[len] = '\0';
    const char *last = strrchr(path, '/');
    last = last ? last + 1 : path;
    if (parse_target(buf, &hpg, &name) < 0 || !bfs_gfid_eq(&hpg, &pg) || strcmp(name, last) != 0)
        return -ENOENT;
    /* O_RDONLY, not O_PATH: as root a folder always opens so, and its GFID
     * then reads with fgetxattr instead of through /proc/self/fd (0.8 µs
     * less per resolution, performance note 44). Only folders: opening
     * anything else could block (a FIFO) or act (a device). */
    struct px_obj cur = PX_OBJ_INIT;
    cur.fd = SYS.openat_beneath(p->root_fd, path, O_RDONLY | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
    if (cur.fd < 0 || SYS.fstat(cur.fd, &cur.st) < 0 || gfid_get_io(cur.fd, &cur.gfid) < 0 ||
        !bfs_gfid_eq(&cur.gfid, g)) {
        bfs__px_obj_close(&cur);
        return -ENOENT;
    }
    *o = cur;
    return 0;
}

/* names (read_chain's) as a path relative to the brick root; NULL if it
 * does not fit the cache's bound or memory is short. */
static char *chain_path(const struct name_stack *names)
{
    size_t len = 0;
    for (size_t i = 0; i < names->n; i++)
        len += strlen(names->v[i]) + 1;
    char *s = len && len <= PX_DPATH_MAX ? malloc(len) : NULL;
    if (!s)
        return NULL;
    size_t o = 0;
    for (size_t i = names->n; i-- > 0;)
        o += (size_t)sprintf(s + o, "%s%s", names->v[i], i ? "/" : "");
    return s;
}

/* Opens directory g by walking its handle chain from the brick root (or
 * straight along the path the last walk took, if it still leads to g). Root. */
static int walk_dir(struct px_priv *p, const struct bfs_gfid *g, struct px_obj *o)
{
    if (open_cached_path(p, g, o) == 0)
        return 0;
    struct name_stack names = {0};
    struct px_obj cur = PX_OBJ_INIT;
    struct bfs_gfid pg = bfs_gfid_null;
    int rc = read_chain(p, g, &names, &pg);
    if (rc == 0 && names.n == 0)
        rc = open_root(p, &cur);
    /* the first name is opened below the brick root's own fd */
    for (size_t i = names.n; rc == 0 && i-- > 0;) {
        int fd = SYS.openat(cur.fd >= 0 ? cur.fd : p->root_fd, names.v[i],
                            O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC, 0);
        if (fd < 0)
            rc = errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? -ESTALE : -errno;
        bfs__px_obj_close(&cur);
        cur.fd = fd;
    }
    if (rc == 0 && SYS.fstat(cur.fd, &cur.st) < 0)
        rc = -errno;
    if (rc == 0 && (bfs__px_gfid_get(cur.fd, &cur.gfid) < 0 || !bfs_gfid_eq(&cur.gfid, g)))
        rc = -ESTALE; /* the handle points at an entry that is not g (any more) */
    if (rc == 0 && p->cache && names.n) {
        char *path = chain_path(&names);
        if (path)
            bfs__px_cache_note_dir(p->cache, g, &cur.st, &pg, path);
        free(path);
    }
    names_free(&names);
    if (rc < 0) {
        bfs__px_obj_close(&cur);
        return rc;
    }
    *o = cur;
    return 0;
}

static int resolve_handle(struct px_priv *p, const struct bfs_gfid *g, struct px_obj *o)
{
    char hp[PX_HPATH_LEN];
    /* A GFID known to be a directory: straight to the walk, which checks
     * everything the probe below would (a failure takes the long way). */
    if (bfs__px_cache_is_dir(p->cache, g) && walk_dir(p, g, o) == 0)
        return 0;
    bfs__px_handle_path(g, hp);
    int fd = SYS.openat(p->handles_fd, hp, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? -ESTALE : -errno;
    struct stat st;
    if (SYS.fstat(fd, &st) < 0) {
        int rc = -errno;
        SYS.close(fd);
        return rc;
    }
    if (S_ISREG(st.st_mode) && st.st_nlink <= 1) {
        /* only the handle is left: the file has no name (its removal is
         * deferred, posix-defer.c, or a crash cut an unlink short); 0: that
         * removal (or the start-up scan, posix-orphan.c) took the handle
         * between our open and this fstat */
        SYS.close(fd);
        return -ESTALE;
    }
    if (!S_ISLNK(st.st_mode)) {
        o->fd = fd;
        o->st = st;
        o->gfid = *g;
        return 0;
    }
    /* The hard link of a client's symlink carries its own GFID; a directory
     * handle does not. */
    struct bfs_gfid own;
    if (bfs__px_gfid_get(fd, &own) == 0 && bfs_gfid_eq(&own, g)) {
        o->fd = fd;
        o->st = st;
        o->gfid = *g;
        return 0;
    }
    SYS.close(fd);
    /* A rename of an ancestor moves the directory before its handle: a walk
     * in that window fails, a later one sees the new handle. */
    int rc = walk_dir(p, g, o);
    for (int attempt = 0; rc == -ESTALE && attempt < 2; attempt++) {
        sched_yield();
        rc = walk_dir(p, g, o);
    }
    return rc;
}

int bfs__px_resolve_gfid(struct px_priv *p, const struct bfs_gfid *g, struct px_obj *o)
{
    if (bfs_gfid_is_null(g))
        return -EINVAL;
    if (bfs_gfid_is_root(g))
        return open_root(p, o);
    if (bfs__px_cache_get(p->cache, g, o) == 0)
        return 0;
    bfs__px_root_begin();
    int rc = resolve_handle(p, g, o);
    bfs__px_root_end();
    if (rc == 0)
        bfs__px_cache_put(p->cache, o);
    return rc;
}

int bfs__px_resolve_entry(struct px_priv *p, const struct px_obj *par, const char *name,
                          struct px_obj *o)
{
    (void)p;
    int fd = SYS.openat(par->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    o->fd = fd;
    if (SYS.fstat(fd, &o->st) < 0) {
        int rc = -errno;
        bfs__px_obj_close(o);
        return rc;
    }
    int rc = bfs__px_gfid_get(fd, &o->gfid);
    if (rc < 0)
        o->gfid = bfs_gfid_null; /* an entry made behind brickfs's back */
    return 0;
}

int bfs__px_resolve_parent(struct px_priv *p, const struct bfs_loc *loc, bool creating,
                           struct px_obj *par)
{
    if (bfs_gfid_is_null(&loc->pargfid) || !loc->name)
        return -EINVAL;
    int rc = bfs_name_check(loc->name);
    if (rc < 0)
        return rc;
    rc = bfs__px_resolve_gfid(p, &loc->pargfid, par);
    if (rc < 0)
        return rc;
    if (!S_ISDIR(par->st.st_mode)) {
        bfs__px_obj_close(par);
        return -ENOTDIR;
    }
    if (bfs_gfid_is_root(&loc->pargfid) && strcmp(loc->name, PX_HIDDEN) == 0) {
        bfs__px_obj_close(par);
        return creating ? -EPERM : -ENOENT;
    }
    return 0;
}

/* A loc with both a GFID and a (parent, name) whose GFID the cache does
 * not hold: the name, if it still leads to that GFID, costs reads of the
 * parent's folder (warm: shared with its siblings) where the handle would
 * cost a read of its own handle folder (cold: one per file). Any failure or
 * another GFID there: -ESTALE, and the handle decides. Not cached: only
 * handles checked good go into the cache. */
static int resolve_named(struct px_priv *p, const struct bfs_loc *loc, struct px_obj *o)
{
    if (!loc->name || bfs_gfid_is_null(&loc->pargfid))
        return -ESTALE;
    if (bfs__px_cache_get(p->cache, &loc->gfid, o) == 0)
        return 0;
    struct px_obj par = PX_OBJ_INIT;
    int rc = bfs__px_resolve_parent(p, loc, false, &par);
    if (rc == 0) {
        rc = bfs__px_resolve_entry(p, &par, loc->name, o);
        bfs__px_obj_close(&par);
    }
    if (rc == 0 && !bfs_gfid_eq(&o->gfid, &loc->gfid)) {
        bfs__px_obj_close(o);
        rc = -ESTALE;
    }
    return rc < 0 ? -ESTALE : 0;
}

int bfs__px_resolve_loc(struct px_priv *p, const struct bfs_loc *loc, struct px_obj *o)
{
    if (!bfs_gfid_is_null(&loc->gfid)) {
        if (resolve_named(p, loc, o) == 0)
            return 0;
        return bfs__px_resolve_gfid(p, &loc->gfid, o);
    }
    struct px_obj par = PX_OBJ_INIT;
    int rc = bfs__px_resolve_parent(p, loc, false, &par);
    if (rc < 0)
        return rc;
    rc = bfs__px_resolve_entry(p, &par, loc->name, o);
    bfs__px_obj_close(&par);
    return rc;
}

/* ---- handle maintenance (all as root) ---- */

/* Whether the object an existing handle names is still alive somewhere. */
static bool handle_live(struct px_priv *p, const struct bfs_gfid *g, const struct stat *hst)
{
    if (!S_ISLNK(hst->st_mode))
        return hst->st_nlink > 1; /* 1: only the handle is left, an orphan */
    struct px_obj o = PX_OBJ_INIT;
    int rc = resolve_handle(p, g, &o);
    bfs__px_obj_close(&o);
    return rc == 0;
}

/* Whether the existing handle of g (hst: its lstat) names a live object other
 * than the inode of st, so that g must not be given to st's object. A
 * directory handle that resolves to st's own inode is not "other": that is
 * the old handle of a directory removed behind brickfs's back (rmdir(2) on
 * the brick) and now made again with its GFID (distribute's directory
 * self-heal sends gfid-req): bfs__px_assign has already set the GFID on the
 * new directory, and the old "../../PP/QQ/<pgfid>/<name>" leads to it. Such
 * a handle, like a stale one, is simply rewritten. */
static bool handle_names_other(struct px_priv *p, const struct bfs_gfid *g,
                               const struct stat *hst, const struct stat *st)
{
    if (!S_ISLNK(hst->st_mode))
        return (hst->st_ino != st->st_ino || hst->st_dev != st->st_dev) &&
               handle_live(p, g, hst);
    struct px_obj o = PX_OBJ_INIT;
    int rc = resolve_handle(p, g, &o);
    bool other = rc == 0 && (o.st.st_ino != st->st_ino || o.st.st_dev != st->st_dev);
    bfs__px_obj_close(&o);
    return other;
}

/* A file's handle is a hard link, so an old handle of g is the OLD inode
 * whatever names it: when a file was unlinked behind brickfs's back and is
 * made again with its GFID, the old inode is left with only the handle
 * (st_nlink 1, an orphan) and the new file takes the handle over. While the
 * old inode still has another name (a hard link made on the brick), g is
 * that file's and the new entry is refused (-EEXIST): two inodes with one
 * GFID would be worse than a failed heal. */
static int file_handle_link(struct px_priv *p, int fd, const struct bfs_gfid *g)
{
    char hp[PX_HPATH_LEN];
    bfs__px_handle_path(g, hp);
    handle_folder(p, g);
    for (int attempt = 0; attempt < 3; attempt++) {
        if (SYS.linkat(fd, "", p->handles_fd, hp, AT_EMPTY_PATH) == 0)
            return 0;
        if (errno == ENOENT && attempt == 0) {
            handle_mkdirs(p, g);
            continue;
        }
        if (errno != EEXIST)
            return -errno;
        struct stat hst, st;
        if (SYS.fstatat(p->handles_fd, hp, &hst, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue; /* removed meanwhile (posix-defer.c): link again */
            return -errno;
        }
        if (SYS.fstat(fd, &st) < 0)
            return -errno;
        if (hst.st_ino == st.st_ino && hst.st_dev == st.st_dev)
            return 0;
        if (handle_live(p, g, &hst))
            return -EEXIST; /* that GFID belongs to another live object */
        (void)SYS.unlinkat(p->handles_fd, hp, 0);
    }
    return -EEXIST;
}

int bfs__px_handle_dir_move(struct px_priv *p, const struct bfs_gfid *g,
                            const struct bfs_gfid *pargfid, const char *name)
{
    char hp[PX_HPATH_LEN], tmp[PX_HPATH_LEN + 32], target[PX_TARGET_LEN];
    bfs__px_handle_path(g, hp);
    handle_target(pargfid, name, target);
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", hp, (long)syscall(SYS_gettid));
    bfs__px_root_begin();
    (void)SYS.unlinkat(p->handles_fd, tmp, 0);
    int rc = SYS.symlinkat(target, p->handles_fd, tmp);
    if (rc < 0 && errno == ENOENT) {
        handle_mkdirs(p, g);
        rc = SYS.symlinkat(target, p->handles_fd, tmp);
    }
    /* rename over the old handle: a concurrent resolution sees old or new */
    if (rc == 0 && (rc = SYS.renameat2(p->handles_fd, tmp, p->handles_fd, hp, 0)) < 0)
        (void)SYS.unlinkat(p->handles_fd, tmp, 0);
    rc = rc < 0 ? -errno : 0;
    bfs__px_root_end();
    return rc;
}

static int dir_handle_create(struct px_priv *p, const struct bfs_gfid *g,
                             const struct bfs_gfid *pargfid, const char *name,
                             const struct stat *st)
{
    char hp[PX_HPATH_LEN], target[PX_TARGET_LEN];
    bfs__px_handle_path(g, hp);
    handle_target(pargfid, name, target);
    handle_folder(p, g);
    int rc = SYS.symlinkat(target, p->handles_fd, hp);
    if (rc < 0 && errno == ENOENT) {
        handle_mkdirs(p, g);
        rc = SYS.symlinkat(target, p->handles_fd, hp);
    }
    if (rc == 0)
        return 0;
    if (errno != EEXIST)
        return -errno;
    struct stat hst;
    if (SYS.fstatat(p->handles_fd, hp, &hst, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    if (handle_names_other(p, g, &hst, st))
        return -EEXIST;
    /* stale, or already leading to this directory: rewritten exactly */
    return bfs__px_handle_dir_move(p, g, pargfid, name);
}

int bfs__px_assign(struct px_priv *p, struct px_obj *o, const struct bfs_gfid *g,
                   const struct bfs_gfid *pargfid, const char *name)
{
    bfs__px_root_begin();
    int rc = gfid_set(o->fd, o->io, g);
    if (rc == 0) {
        if (S_ISDIR(o->st.st_mode)) {
            rc = dir_handle_create(p, g, pargfid, name, &o->st);
        } else {
            /* under the GFID's inode lock: a deferred removal of an older
             * orphan handle of g (posix-defer.c) must not take ours */
            pthread_mutex_t *il = bfs__px_ilock_for(p, g);
            pthread_mutex_lock(il);
            rc = file_handle_link(p, o->fd, g);
            pthread_mutex_unlock(il);
        }
        if (rc < 0)
            gfid_unset(o->fd, o->io);
    }
    bfs__px_root_end();
    if (rc == 0) {
        o->gfid = *g;
        /* A file create just made comes without attributes (st_ino 0, see
         * create_open): taken now, after its handle, they are the create's
         * answer too. Without them the cache is not told, which only costs
         * the next resolution its handle check. */
        struct stat st;
        if (o->st.st_ino == 0 && SYS.fstat(o->fd, &st) == 0)
            o->st = st;
        if (o->st.st_ino != 0)
            bfs__px_cache_note(p->cache, g, &o->st);
    }
    return rc;
}

void bfs__px_handle_drop(struct px_priv *p, const struct px_obj *o)
{
    char hp[PX_HPATH_LEN];
    if (bfs_gfid_is_null(&o->gfid) || bfs_gfid_is_root(&o->gfid))
        return;
    /* Forgotten even when the handle stays (another name is left): the next
     * resolution checks the store, and no cached fd pins a dying inode. */
    bfs__px_cache_drop(p->cache, &o->gfid);
    bfs__px_handle_path(&o->gfid, hp);
    bfs__px_root_begin();
    struct stat st, hst;
    if (S_ISDIR(o->st.st_mode)) {
        (void)SYS.unlinkat(p->handles_fd, hp, 0);
    } else if (SYS.fstat(o->fd, &st) == 0 && st.st_nlink == 1 &&
               SYS.fstatat(p->handles_fd, hp, &hst, AT_SYMLINK_NOFOLLOW) == 0 &&
               hst.st_ino == st.st_ino && hst.st_dev == st.st_dev) {
        (void)SYS.unlinkat(p->handles_fd, hp, 0); /* only the handle was left */
    }
    bfs__px_root_end();
}

bool bfs__px_handle_ok(struct px_priv *p, const struct px_obj *o, const struct bfs_gfid *pargfid,
                       const char *name)
{
    char hp[PX_HPATH_LEN], target[PX_TARGET_LEN], buf[PX_TARGET_LEN + 1];
    bool ok;
    if (bfs_gfid_is_null(&o->gfid) || bfs_gfid_is_root(&o->gfid))
        return true;
    bfs__px_handle_path(&o->gfid, hp);
    bfs__px_root_begin();
    if (S_ISDIR(o->st.st_mode)) {
        handle_target(pargfid, name, target);
        ssize_t n = SYS.readlinkat(p->handles_fd, hp, buf, sizeof(buf) - 1);
        ok = n >= 0 && (size_t)n == strlen(target) && memcmp(buf, target, (size_t)n) == 0;
    } else {
        struct stat hst;
        ok = SYS.fstatat(p->handles_fd, hp, &hst, AT_SYMLINK_NOFOLLOW) == 0 &&
             hst.st_ino == o->st.st_ino && hst.st_dev == o->st.st_dev;
    }
    bfs__px_root_end();
    return ok;
}

void bfs__px_handle_heal(struct px_priv *p, struct px_obj *o, const struct bfs_gfid *pargfid,
                         const char *name)
{
    char hp[PX_HPATH_LEN];
    struct stat hst;
    if (bfs__px_handle_ok(p, o, pargfid, name))
        return;
    bfs__px_handle_path(&o->gfid, hp);
    bfs__px_root_begin();
    if (S_ISDIR(o->st.st_mode)) {
        bool exists = SYS.fstatat(p->handles_fd, hp, &hst, AT_SYMLINK_NOFOLLOW) == 0;
        if (exists && handle_names_other(p, &o->gfid, &hst, &o->st))
            bfs_log(p->brick, BFS_LOG_WARNING, "directory %s: its GFID's handle names "
                    "another live directory (duplicate GFID?)", name);
        else
            (void)bfs__px_handle_dir_move(p, &o->gfid, pargfid, name);
    } else {
        /* missing, or an orphan of a lost race or crash: replaced; a live
         * other inode with this GFID is left alone */
        pthread_mutex_t *lk = bfs__px_ilock_for(p, &o->gfid);
        pthread_mutex_lock(lk);
        if (file_handle_link(p, o->fd, &o->gfid) == -EEXIST)
            bfs_log(p->brick, BFS_LOG_WARNING, "%s: its GFID's handle is another live inode",
                    name);
        pthread_mutex_unlock(lk);
    }
    bfs__px_root_end();
}

/* ---- the brick root ---- */

int bfs__px_handles_init(struct px_priv *p)
{
    struct bfs_gfid g;
    int rc = bfs__px_gfid_get(p->root_fd, &g);
    if (rc == -ENODATA) {
        rc = gfid_set(p->root_fd, false, &bfs_gfid_root);
        g = bfs_gfid_root;
    }
    if (rc < 0)
        return rc;
    if (!bfs_gfid_is_root(&g))
        return -EEXIST; /* the root of something else's namespace */

    if (SYS.mkdirat(p->root_fd, PX_HIDDEN, 0700) < 0 && errno != EEXIST)
        return -errno;
    p->handles_fd = SYS.openat(p->root_fd, PX_HIDDEN,
                               O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (p->handles_fd < 0)
        return -errno;
    /* Whatever it was before, only root may look inside. */
    if (SYS.fchown(p->handles_fd, 0, 0) < 0 || SYS.fchmod(p->handles_fd, 0700) < 0)
        return -errno;

    char hp[PX_HPATH_LEN];
    bfs__px_handle_path(&bfs_gfid_root, hp);
    handle_mkdirs(p, &bfs_gfid_root);
    if (SYS.symlinkat("../../..", p->handles_fd, hp) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* ---- attributes ---- */

void bfs__px_iatt(const struct stat *st, const struct bfs_gfid *g, struct bfs_iatt *ia)
{
    memset(ia, 0, sizeof(*ia));
    bfs_iatt_from_stat(ia, st);
    if (!g || bfs_gfid_is_null(g))
        return;
    ia->gfid = *g;
    ia->ino = bfs_gfid_to_ino(g);
    /* Clients count names: not the handle of a file, not .brickfs. */
    if (!S_ISDIR(st->st_mode) && ia->nlink > 0)
        ia->nlink--;
    else if (bfs_gfid_is_root(g) && ia->nlink > 2)
        ia->nlink--;
}

int bfs__px_fstat_iatt(int fd, const struct bfs_gfid *g, struct bfs_iatt *ia)
{
    struct stat st;
    if (SYS.fstat(fd, &st) < 0)
        return -errno;
    bfs__px_iatt(&st, g, ia);
    return 0;
}
