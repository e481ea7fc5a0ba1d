/*
 * fuse-call.c — one FUSE request as a call into the graph: credentials,
 * the top frame, the generation it runs on, the inodes and fds it holds,
 * and entry replies.
 *
 * A call is created by the operation handler on a FUSE thread, bound to
 * the active generation (or, through bfs_fuse_call_fd, to the generation of
 * the open file it goes through), wound into that generation's top, and
 * ended by the fop callback (any thread) once it replied. fu->inflight and
 * the generation's inflight count calls between those two points, so that
 * shutdown can wait until no callback will touch the session any more, and
 * a retired generation is freed only once no call runs on it
 * (docs/design/graph-switch.md). Inodes and fds a call uses are references
 * it holds, dropped when it ends — before it stops counting.
 *
 * Supplementary groups are not in the FUSE request: libfuse reads them from
 * /proc/PID/task/PID/status, a file open per request. A small cache keyed by
 * (pid, uid, gid) keeps them for one second, the same trade-off every FUSE
 * network file system makes (a process that changes its groups sees the
 * change on the mount within a second).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/event.h"
#include "fuse/fuse-bridge.h"

#define GROUP_CACHE_SLOTS 64
#define GROUP_CACHE_NS 1000000000ull

struct group_entry {
    uint32_t pid, uid, gid;
    uint32_t ngroups;
    uint64_t when_ns;
    uint32_t groups[BFS_MAX_GROUPS];
};

static struct group_entry group_cache[GROUP_CACHE_SLOTS];
static pthread_mutex_t group_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t call_counter;

static void fill_groups(fuse_req_t req, struct bfs_stack *st)
{
    if (st->pid == 0)
        return; /* kernel-initiated (writeback, release): no process to ask */
    struct group_entry *g = &group_cache[st->pid % GROUP_CACHE_SLOTS];
    uint64_t now = bfs_now_ns();

    pthread_mutex_lock(&group_lock);
    if (g->when_ns && g->pid == st->pid && g->uid == st->uid && g->gid == st->gid &&
        now - g->when_ns < GROUP_CACHE_NS) {
        st->ngroups = g->ngroups;
        memcpy(st->groups, g->groups, g->ngroups * sizeof(g->groups[0]));
        pthread_mutex_unlock(&group_lock);
        return;
    }
    pthread_mutex_unlock(&group_lock);

    gid_t list[BFS_MAX_GROUPS];
    int n = fuse_req_getgroups(req, BFS_MAX_GROUPS, list);
    if (n < 0)
        return; /* the process is gone or /proc is unreadable: primary gid only */
    if (n > BFS_MAX_GROUPS)
        n = BFS_MAX_GROUPS;
    st->ngroups = (uint32_t)n;
    for (int i = 0; i < n; i++)
        st->groups[i] = list[i];

    pthread_mutex_lock(&group_lock);
    g->pid = st->pid;
    g->uid = st->uid;
    g->gid = st->gid;
    g->ngroups = st->ngroups;
    memcpy(g->groups, st->groups, st->ngroups * sizeof(g->groups[0]));
    g->when_ns = now;
    pthread_mutex_unlock(&group_lock);
}

struct bfs_fuse *bfs_fuse_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

struct bfs_fuse_call *bfs_fuse_call_new(fuse_req_t req)
{
    struct bfs_fuse *fu = bfs_fuse_of(req);
    struct bfs_fuse_call *c = calloc(1, sizeof(*c));
    struct bfs_stack *st = bfs_stack_new();
    if (!c || !st)
        goto nomem;
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    st->uid = ctx->uid;
    st->gid = ctx->gid;
    st->pid = (uint32_t)ctx->pid;
    st->unique = __atomic_add_fetch(&call_counter, 1, __ATOMIC_RELAXED);
    fill_groups(req, st);
    c->frame = bfs_frame_top_new(st, c);
    if (!c->frame)
        goto nomem;
    bfs_stack_unref(st); /* the frame holds it */
    c->req = req;
    c->fu = fu;
    pthread_mutex_lock(&fu->lock);
    c->gr = fu->active;
    c->gr->inflight++;
    fu->inflight++;
    pthread_mutex_unlock(&fu->lock);
    return c;
nomem:
    bfs_stack_unref(st);
    free(c);
    fuse_reply_err(req, ENOMEM);
    return NULL;
}

struct bfs_fuse_call *bfs_fuse_call_on(fuse_req_t req, fuse_ino_t ino, int rc)
{
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return NULL;
    }
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (c)
        c->ino = ino;
    return c;
}

struct bfs_fuse_call *bfs_fuse_call_new_lk(fuse_req_t req, uint64_t owner)
{
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (c)
        c->frame->stack->lk_owner = owner;
    return c;
}

struct bfs_fuse_call *bfs_fuse_call_new_internal(struct bfs_fuse *fu, struct bfs_fuse_graph *gr,
                                                 const struct bfs_stack *like)
{
    struct bfs_fuse_call *c = calloc(1, sizeof(*c));
    struct bfs_stack *st = bfs_stack_new();
    if (!c || !st || !(c->frame = bfs_frame_top_new(st, c))) {
        bfs_stack_unref(st);
        free(c);
        return NULL;
    }
    st->uid = like->uid;
    st->gid = like->gid;
    st->pid = like->pid;
    st->ngroups = like->ngroups;
    memcpy(st->groups, like->groups, like->ngroups * sizeof(like->groups[0]));
    st->lk_owner = like->lk_owner;
    st->unique = __atomic_add_fetch(&call_counter, 1, __ATOMIC_RELAXED);
    bfs_stack_unref(st);
    c->fu = fu;
    pthread_mutex_lock(&fu->lock);
    c->gr = gr;
    gr->inflight++;
    fu->inflight++;
    pthread_mutex_unlock(&fu->lock);
    return c;
}

void bfs_fuse_call_done(struct bfs_fuse_call *c)
{
    struct bfs_fuse *fu = c->fu;
    struct bfs_fuse_graph *gr = c->gr;
    bfs_frame_top_free(c->frame);
    if (c->fd_ref)
        bfs_fd_unref(c->fd_ref);
    if (c->inode)
        bfs_inode_unref(c->inode);
    for (int i = 0; i < c->nheld; i++)
        bfs_inode_unref(c->held[i]);
    for (int i = 0; i < c->nfds; i++)
        bfs_fd_unref(c->fds[i]);
    if (c->nfds) {
        pthread_mutex_lock(&fu->lock);
        for (int i = 0; i < c->nfds; i++)
            if (--c->fhs[i]->users == 0 && c->fhs[i]->draining)
                pthread_cond_broadcast(&fu->cond);
        pthread_mutex_unlock(&fu->lock);
        for (int i = 0; i < c->nfds; i++)
            bfs_fuse_fh_unref(fu, c->fhs[i]);
    }
    if (c->fh)
        bfs_fuse_fh_free(fu, c->fh); /* an open that never reached the kernel */
    free(c->name);
    free(c);
    /* Last: once it stops counting, gr may be freed (a retired generation). */
    pthread_mutex_lock(&fu->lock);
    gr->inflight--;
    if (--fu->inflight == 0 || gr->inflight == 0)
        pthread_cond_broadcast(&fu->cond);
    pthread_mutex_unlock(&fu->lock);
}

struct bfs_fd *bfs_fuse_call_fd(struct bfs_fuse_call *c, const struct fuse_file_info *fi,
                                bool pin)
{
    struct bfs_fuse *fu = c->fu;
    struct bfs_fuse_fh *fh = bfs_fuse_fh(fi);
    struct bfs_fd *fd = NULL;
    pthread_mutex_lock(&fu->lock);
    /* A graph switch is moving the handle: its writes first (fuse-switch.c) */
    while (fh->draining)
        pthread_cond_wait(&fu->cond, &fu->lock);
    /* A call holds things of one generation only: it may move to the fd's
     * while it holds nothing yet. */
    bool may_move = c->nfds == 0 && c->nheld == 0 && !c->inode && !c->fh;
    if (c->nfds < 2 && (c->gr == fh->gr || may_move)) {
        if (pin && !fh->pinned) {
            fh->pinned = true;
            fu->pinned++;
        }
        fh->users++;
        fh->refs++;
        c->fhs[c->nfds] = fh;
        fd = c->fds[c->nfds++] = bfs_fd_ref(fh->fd);
        if (c->gr != fh->gr) {
            c->gr->inflight--;
            if (c->gr->inflight == 0)
                pthread_cond_broadcast(&fu->cond);
            c->gr = fh->gr;
            c->gr->inflight++;
        }
    }
    pthread_mutex_unlock(&fu->lock);
    if (fd && !c->fd)
        c->fd = fd;
    return fd;
}

void bfs_fuse_call_fail(struct bfs_fuse_call *c, int rc)
{
    fuse_reply_err(c->req, rc < 0 ? -rc : EIO);
    bfs_fuse_call_done(c);
}

/* ---- nodeids ---- */

struct bfs_inode *bfs_fuse_inode(struct bfs_fuse_call *c, fuse_ino_t ino)
{
    if (c->nheld == BFS_FUSE_CALL_HELD)
        return NULL;
    struct bfs_inode *i = bfs_fuse_node_inode(c->fu, ino, c->gr);
    if (i)
        c->held[c->nheld++] = i;
    return i;
}

void bfs_fuse_loc_inode(struct bfs_loc *loc, struct bfs_inode *inode)
{
    memset(loc, 0, sizeof(*loc));
    loc->gfid = inode->gfid;
    loc->inode = inode;
}

int bfs_fuse_loc_ino(struct bfs_fuse_call *c, struct bfs_loc *loc, fuse_ino_t ino)
{
    struct bfs_inode *i = bfs_fuse_inode(c, ino);
    if (!i)
        return -ENOMEM;
    bfs_fuse_loc_inode(loc, i);
    return 0;
}

int bfs_fuse_loc_name(struct bfs_fuse_call *c, struct bfs_loc *loc, fuse_ino_t parent,
                      const char *name)
{
    struct bfs_inode *p = bfs_fuse_inode(c, parent);
    memset(loc, 0, sizeof(*loc));
    if (!p)
        return -ENOMEM;
    loc->pargfid = p->gfid;
    loc->parent = p;
    loc->name = name;
    return 0;
}

int bfs_fuse_name_check(const char *name)
{
    return bfs_name_check(name);
}

bool bfs_fuse_hidden_entry(fuse_ino_t parent, const char *name)
{
    return parent == FUSE_ROOT_ID && strcmp(name, BFS_FUSE_HIDDEN_DIR) == 0;
}

bool bfs_fuse_hidden_dirent(const struct bfs_inode *dir, const char *name)
{
    return bfs_gfid_is_root(&dir->gfid) && strcmp(name, BFS_FUSE_HIDDEN_DIR) == 0;
}

bool bfs_fuse_hidden_xattr(const char *name)
{
    size_t n = strlen(BFS_FUSE_HIDDEN_XATTR) - 1; /* "trusted.brickfs" */
    return strncmp(name, BFS_FUSE_HIDDEN_XATTR, n) == 0 && (name[n] == '.' || name[n] == 0);
}

/* ---- attributes and entries ---- */

void bfs_fuse_stat(const struct bfs_iatt *ia, struct stat *st)
{
    bfs_iatt_to_stat(ia, st);
    if (!bfs_gfid_is_null(&ia->gfid))
        st->st_ino = bfs_gfid_to_ino(&ia->gfid);
}

struct bfs_fuse_node *bfs_fuse_entry(struct bfs_fuse *fu, const struct bfs_iatt *attr,
                                     struct fuse_entry_param *e)
{
    if (bfs_gfid_is_null(&attr->gfid)) {
        errno = EIO; /* a reply without an identity: nothing we could name */
        return NULL;
    }
    struct bfs_fuse_node *n = bfs_fuse_node_lookup(fu, &attr->gfid, attr->mode);
    if (!n)
        return NULL;
    memset(e, 0, sizeof(*e));
    e->ino = bfs_fuse_node_ino(fu, n);
    e->generation = 1;
    bfs_fuse_stat(attr, &e->attr);
    e->attr_timeout = fu->opts->attr_timeout;
    e->entry_timeout = fu->opts->entry_timeout;
    return n;
}

void bfs_fuse_reply_entry(struct bfs_fuse_call *c, const struct bfs_iatt *attr)
{
    struct fuse_entry_param e;
    struct bfs_fuse_node *n = bfs_fuse_entry(c->fu, attr, &e);
    if (!n) {
        fuse_reply_err(c->req, errno ? errno : EIO);
        return;
    }
    /* An interrupted request never reached the kernel: take the count back. */
    if (fuse_reply_entry(c->req, &e) < 0)
        bfs_fuse_node_unlookup(c->fu, n, 1);
}

void bfs_fuse_reply_attr(struct bfs_fuse_call *c, const struct bfs_iatt *attr)
{
    struct stat st;
    bfs_fuse_stat(attr, &st);
    fuse_reply_attr(c->req, &st, c->fu->opts->attr_timeout);
}

struct bfs_dict *bfs_fuse_gfid_req(struct bfs_gfid *g)
{
    struct bfs_dict *d = bfs_dict_new();
    bfs_gfid_generate_entry(g);
    if (d && bfs_dict_set_bin(d, BFS_FUSE_GFID_REQ_KEY, g->b, sizeof(g->b)) < 0) {
        bfs_dict_unref(d);
        d = NULL;
    }
    return d;
}
