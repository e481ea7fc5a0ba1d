/*
 * api-resolve.c — turns a path into (parent GFID, name, target) by walking
 * it one component at a time with lookup(pargfid, name) from the root.
 *
 * The walk keeps the stack of directories reached so far (root first), so
 * ".." pops the stack and never asks a brick (bricks refuse ".." names).
 * A symbolic link met in a middle component (or in the last one with
 * RES_FOLLOW, or before a trailing slash) is read with readlink and its
 * target is spliced in front of the rest of the path: an absolute target
 * restarts from the root, a relative one continues from the link's
 * directory, so ".." after a link is the parent of where the link led.
 * No caching: every call asks the bricks (correctness first).
 *
 * The buffers and the stack are per call; the only shared objects are the
 * graph's inode table (thread-safe) and the inodes the result holds refs on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/api.h"

struct walk_dir {
    struct bfs_gfid gfid;
    struct bfs_inode *inode; /* ref'd */
    struct bfs_iatt attr;
    bool have_attr;          /* false for the root until asked */
};

struct walk {
    struct brickfs *fs;
    struct bfs_stack *st;
    struct walk_dir *dirs;
    int ndirs, cap;
    char *path;              /* what is left to walk, malloc'd */
    int links;
};

struct bfs_inode *bfs__api_inode(struct brickfs *fs, const struct bfs_iatt *attr, int *rc)
{
    if (bfs_gfid_is_null(&attr->gfid)) {
        *rc = -EIO; /* a brick answered without an identity */
        return NULL;
    }
    struct bfs_inode *i = bfs_inode_get(fs->graph->itable, &attr->gfid, attr->mode & S_IFMT);
    *rc = i ? 0 : -ENOMEM;
    return i;
}

static int walk_push(struct walk *w, const struct bfs_gfid *g, struct bfs_inode *inode,
                     const struct bfs_iatt *attr)
{
    if (w->ndirs == w->cap) {
        int ncap = w->cap ? w->cap * 2 : 16;
        struct walk_dir *nd = realloc(w->dirs, (size_t)ncap * sizeof(*nd));
        if (!nd) {
            bfs_inode_unref(inode);
            return -ENOMEM;
        }
        w->dirs = nd;
        w->cap = ncap;
    }
    struct walk_dir *d = &w->dirs[w->ndirs++];
    d->gfid = *g;
    d->inode = inode;
    d->have_attr = attr != NULL;
    if (attr)
        d->attr = *attr;
    return 0;
}

static void walk_pop_to(struct walk *w, int n)
{
    while (w->ndirs > n)
        bfs_inode_unref(w->dirs[--w->ndirs].inode);
}

static int walk_reset_root(struct walk *w)
{
    walk_pop_to(w, 0);
    return walk_push(w, &bfs_gfid_root, bfs_itable_root(w->fs->graph->itable), NULL);
}

static struct walk_dir *walk_top(struct walk *w)
{
    return &w->dirs[w->ndirs - 1];
}

/* lookup(dir, name): 0 with *attr, or -errno. */
static int walk_lookup(struct walk *w, struct walk_dir *dir, const char *name,
                       struct bfs_iatt *attr)
{
    struct bfs_lookup_req req = {0};
    struct bfs_lookup_rep rep;
    req.loc.pargfid = dir->gfid;
    req.loc.parent = dir->inode;
    req.loc.name = name;
    int rc = bfs_sync_lookup(w->fs->graph->top, w->st, &req, &rep);
    if (rc >= 0)
        *attr = rep.attr;
    bfs_lookup_rep_clear_dup(&rep);
    return rc < 0 ? rc : 0;
}

/* Attributes of a directory on the stack reached without a lookup of its
 * name (the root): a nameless lookup by GFID. */
static int walk_dir_attr(struct walk *w, struct walk_dir *dir)
{
    if (dir->have_attr)
        return 0;
    struct bfs_lookup_req req = {0};
    struct bfs_lookup_rep rep;
    req.loc.gfid = dir->gfid;
    req.loc.inode = dir->inode;
    int rc = bfs_sync_lookup(w->fs->graph->top, w->st, &req, &rep);
    if (rc >= 0) {
        dir->attr = rep.attr;
        dir->have_attr = true;
    }
    bfs_lookup_rep_clear_dup(&rep);
    return rc < 0 ? rc : 0;
}

/* Replaces the walked path by the link's target + what follows the link
 * (from w->path + restoff). */
static int walk_splice_link(struct walk *w, const struct bfs_iatt *attr, struct walk_dir *dir,
                            const char *name, size_t restoff)
{
    if (++w->links > API_MAX_SYMLINKS)
        return -ELOOP;
    struct bfs_readlink_req req = {0};
    struct bfs_readlink_rep rep;
    req.loc.gfid = attr->gfid;
    req.loc.pargfid = dir->gfid;
    req.loc.parent = dir->inode;
    req.loc.name = name;
    req.size = API_PATH_MAX;
    int rc = bfs_sync_readlink(w->fs->graph->top, w->st, &req, &rep);
    if (rc >= 0 && (!rep.target || !rep.target[0]))
        rc = -ENOENT; /* an empty link names nothing */
    if (rc < 0) {
        bfs_readlink_rep_clear_dup(&rep);
        return rc;
    }
    /* rest is "" or starts with '/': target + rest keeps a trailing slash
     * meaningful and adds none */
    const char *rest = w->path + restoff;
    size_t tlen = strlen(rep.target), rlen = strlen(rest);
    if (tlen + rlen >= API_PATH_MAX) {
        bfs_readlink_rep_clear_dup(&rep);
        return -ENAMETOOLONG;
    }
    char *np = malloc(tlen + rlen + 1);
    if (!np) {
        bfs_readlink_rep_clear_dup(&rep);
        return -ENOMEM;
    }
    memcpy(np, rep.target, tlen);
    memcpy(np + tlen, rest, rlen + 1);
    bool absolute = rep.target[0] == '/';
    bfs_readlink_rep_clear_dup(&rep);
    free(w->path);
    w->path = np;
    return absolute ? walk_reset_root(w) : 0;
}

/* The target is the directory on top of the stack ("/", "x/." or "x/.."). */
static int res_from_top(struct walk *w, const char *dot, struct api_res *res)
{
    struct walk_dir *top = walk_top(w);
    int rc = walk_dir_attr(w, top);
    if (rc < 0)
        return rc;
    struct walk_dir *up = w->ndirs > 1 ? &w->dirs[w->ndirs - 2] : top;
    res->pargfid = up->gfid;
    res->parent = bfs_inode_ref(up->inode);
    snprintf(res->dotname, sizeof(res->dotname), "%s", dot);
    res->exists = true;
    res->attr = top->attr;
    res->inode = bfs_inode_ref(top->inode);
    return 0;
}

static int res_ancestors(struct walk *w, int n, struct api_res *res)
{
    res->anc = malloc((size_t)(n > 0 ? n : 1) * sizeof(*res->anc));
    if (!res->anc)
        return -ENOMEM;
    for (int i = 0; i < n; i++)
        res->anc[i] = w->dirs[i].gfid;
    res->nanc = n;
    return 0;
}

/* The target is name in the directory on top of the stack; attr is NULL
 * when it does not exist. */
static int res_named(struct walk *w, const char *name, bool slash,
                     const struct bfs_iatt *attr, int flags, struct api_res *res)
{
    struct walk_dir *dir = walk_top(w);
    int rc = 0;
    if (attr && slash && !S_ISDIR(attr->mode))
        return -ENOTDIR;
    res->trailing_slash = slash;
    res->pargfid = dir->gfid;
    res->parent = bfs_inode_ref(dir->inode);
    snprintf(res->name, sizeof(res->name), "%s", name);
    res->exists = attr != NULL;
    if (attr) {
        res->attr = *attr;
        res->inode = bfs__api_inode(w->fs, attr, &rc);
        if (rc < 0)
            return rc;
    }
    return (flags & RES_ANCESTORS) ? res_ancestors(w, w->ndirs, res) : 0;
}

static int walk_run(struct walk *w, int flags, struct api_res *res)
{
    size_t pos = 0;
    for (;;) {
        const char *p = w->path;
        while (p[pos] == '/')
            pos++;
        if (!p[pos]) /* "/" or a path that ended on "." / ".." already popped */
            return res_from_top(w, "/", res);
        size_t start = pos, len = 0;
        while (p[pos] && p[pos] != '/')
            pos++, len++;
        if (len > API_NAME_MAX)
            return -ENAMETOOLONG;
        size_t after = pos;
        while (p[after] == '/')
            after++;
        bool last = p[after] == 0;
        bool slash = last && after > pos;
        char name[API_NAME_MAX + 1];
        memcpy(name, p + start, len);
        name[len] = 0;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
            if (name[1] == '.' && w->ndirs > 1)
                walk_pop_to(w, w->ndirs - 1);
            if (last) {
                res->trailing_slash = slash;
                return res_from_top(w, name, res);
            }
            continue;
        }
        struct walk_dir *dir = walk_top(w);
        struct bfs_iatt attr;
        int rc = walk_lookup(w, dir, name, &attr);
        if (rc == -ENOENT && last)
            return (flags & RES_MAY_MISS) ? res_named(w, name, slash, NULL, flags, res) : rc;
        if (rc < 0)
            return rc;
        if (S_ISLNK(attr.mode) && (!last || slash || (flags & RES_FOLLOW))) {
            rc = walk_splice_link(w, &attr, dir, name, pos);
            if (rc < 0)
                return rc;
            pos = 0;
            continue;
        }
        if (last)
            return res_named(w, name, slash, &attr, flags, res);
        if (!S_ISDIR(attr.mode))
            return -ENOTDIR;
        struct bfs_inode *inode = bfs__api_inode(w->fs, &attr, &rc);
        if (rc < 0)
            return rc;
        rc = walk_push(w, &attr.gfid, inode, &attr);
        if (rc < 0)
            return rc;
    }
}

int bfs__api_resolve(struct brickfs *fs, struct bfs_stack *st, const char *path, int flags,
                     struct api_res *res)
{
    memset(res, 0, sizeof(*res));
    if (!path)
        return -EINVAL;
    size_t len = strnlen(path, API_PATH_MAX);
    if (len == 0)
        return -ENOENT;
    if (len >= API_PATH_MAX)
        return -ENAMETOOLONG;
    struct walk w = {.fs = fs, .st = st};
    w.path = strdup(path);
    int rc = w.path ? walk_reset_root(&w) : -ENOMEM;
    if (rc == 0)
        rc = walk_run(&w, flags, res);
    if (rc == 0 && (flags & RES_ANCESTORS) && !res->anc)
        rc = res_ancestors(&w, w.ndirs > 1 ? w.ndirs - 1 : 1, res);
    walk_pop_to(&w, 0);
    free(w.dirs);
    free(w.path);
    if (rc < 0)
        bfs__api_res_clear(res);
    return rc;
}

void bfs__api_res_clear(struct api_res *res)
{
    bfs_inode_unref(res->parent);
    bfs_inode_unref(res->inode);
    free(res->anc);
    memset(res, 0, sizeof(*res));
}

void bfs__api_res_loc(const struct api_res *res, struct bfs_loc *loc, const char *path)
{
    memset(loc, 0, sizeof(*loc));
    loc->gfid = res->attr.gfid;
    loc->inode = res->inode;
    if (res->name[0]) {
        loc->pargfid = res->pargfid;
        loc->parent = res->parent;
        loc->name = res->name;
    }
    loc->path = path;
}

void bfs__api_res_newloc(const struct api_res *res, struct bfs_loc *loc, const char *path)
{
    memset(loc, 0, sizeof(*loc));
    loc->pargfid = res->pargfid;
    loc->parent = res->parent;
    loc->name = res->name;
    loc->path = path;
}

int bfs__api_path_begin(struct brickfs *fs, const char *path, int flags,
                        struct bfs_stack **st, struct api_res *res)
{
    *st = NULL;
    int rc = bfs__api_ready(fs);
    if (rc < 0)
        return rc;
    *st = bfs__api_stack(fs);
    if (!*st)
        return -ENOMEM;
    rc = bfs__api_resolve(fs, *st, path, flags, res);
    if (rc < 0) {
        bfs_stack_unref(*st);
        *st = NULL;
    }
    return rc;
}

void bfs__api_path_end(struct bfs_stack *st, struct api_res *res)
{
    bfs__api_res_clear(res);
    bfs_stack_unref(st);
}
