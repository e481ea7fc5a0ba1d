/*
 * posix.c — storage/posix: the module, its options, init/fini, fds and the
 * worker-job plumbing every fop goes through.
 *
 * storage/posix is the leaf of every brick graph: it serves one local
 * directory (option `directory`) and implements every fop of fops.def but
 * the lock family (lk, inodelk, finodelk, entrylk, fentrylk) and lease,
 * which belong to features/locks above it and answer -ENOSYS here.
 *
 * A fop never blocks the calling (event) thread: bfs__px_submit() deep
 * copies the request and queues a job on the process's worker pool
 * (xl->graph->proc->workers); the job runs the fop's do_FOP() with the
 * caller's credentials (posix-creds.c), answers with bfs_unwind_FOP from the
 * worker thread, then frees its copy and whatever the reply owned. Errors
 * reach the caller through the callback: only -ENOMEM while queueing is
 * returned directly.
 *
 * Lifetimes: priv from init to fini. A struct px_fd is attached to a bfs_fd
 * by open/create/opendir and freed by release/releasedir (the fd's last
 * reference); the real close is queued on the workers too, because the last
 * close of an unlinked big file frees its blocks synchronously.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fops-util.h"
#include "core/graph.h"
#include "posix.h"

/* ---- jobs ---- */

static void job_free(struct px_job *j)
{
    bfs_fop_info[j->fop].req_clear_dup(j->req);
    free(j->req);
    free(j);
}

static void job_run(void *arg)
{
    struct px_job *j = arg;
    const struct bfs_fop_info *fi = &bfs_fop_info[j->fop];
    void *rep = calloc(1, fi->rep_size);
    int rc = -ENOMEM;

    if (rep) {
        bfs__px_creds_enter(j->frame->stack);
        rc = j->fn(j, j->req, rep);
        bfs__px_creds_leave();
        if (rc < 0) { /* a failed reply is a zeroed one */
            fi->rep_clear_dup(rep);
            memset(rep, 0, fi->rep_size);
        }
    }
    __atomic_add_fetch(&j->priv->calls[j->fop], 1, __ATOMIC_RELAXED);
    if (rc < 0)
        __atomic_add_fetch(&j->priv->errors[j->fop], 1, __ATOMIC_RELAXED);
    if (rc < 0 && rc != -ENOENT && rc != -EEXIST && rc != -ENODATA)
        XL_DBG(j->xl, "%s: %s", bfs_fop_name(j->fop), strerror(-rc));
    bfs_unwind_any(j->fop, j->frame, rc, rep);
    if (rep) {
        fi->rep_clear_dup(rep);
        free(rep);
    }
    job_free(j);
}

int bfs__px_submit(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req,
                   px_work_fn fn)
{
    const struct bfs_fop_info *fi = &bfs_fop_info[fop];
    struct px_job *j = calloc(1, sizeof(*j));
    void *copy = calloc(1, fi->req_size);

    if (!j || !copy || fi->req_copy_into(copy, req) < 0) {
        free(copy);
        free(j);
        return -ENOMEM;
    }
    j->frame = frame;
    j->xl = xl;
    j->priv = xl->private;
    j->fop = fop;
    j->fn = fn;
    j->req = copy;
    if (bfs_workers_submit(j->priv->workers, job_run, j) < 0) {
        job_free(j);
        return -ENOMEM;
    }
    return 0;
}

/* ---- fds ---- */

int bfs__px_fd_get(struct px_job *j, struct bfs_fd *fd, struct px_fd **out)
{
    uint64_t v;
    if (!fd || bfs_fd_ctx_get(fd, j->xl, &v) < 0 || !v)
        return -EBADF;
    *out = (struct px_fd *)(uintptr_t)v;
    return 0;
}

static void px_fd_close(struct px_fd *pf)
{
    if (pf->dir)
        closedir(pf->dir); /* closes pf->fd too */
    else if (pf->fd >= 0)
        SYS.close(pf->fd);
    pthread_mutex_destroy(&pf->lock);
    free(pf);
}

/* Takes ownership of realfd/dir: closed on failure. */
int bfs__px_fd_install(struct px_job *j, struct bfs_fd *fd, int realfd, DIR *dir,
                       const struct bfs_gfid *g)
{
    struct px_fd *pf = calloc(1, sizeof(*pf));
    int rc = -ENOMEM;
    if (pf) {
        pf->fd = realfd;
        pf->dir = dir;
        pf->gfid = *g;
        pf->is_root = bfs_gfid_is_root(g);
        pthread_mutex_init(&pf->lock, NULL);
        rc = -EINVAL;
    }
    if (pf && fd) {
        rc = bfs_fd_ctx_get(fd, j->xl, NULL) == 0 ? -EBUSY /* opened twice */
                                                   : bfs_fd_ctx_set(fd, j->xl, (uintptr_t)pf);
    }
    if (rc == 0)
        return 0;
    if (pf) {
        px_fd_close(pf);
    } else if (dir) {
        closedir(dir);
    } else {
        SYS.close(realfd);
    }
    return rc;
}

int bfs__px_reopen(int pathfd, int flags)
{
    char path[PX_PROC_FD_LEN];
    bfs__px_proc_path(pathfd, path);
    /* Not O_NOFOLLOW: the magic link itself is the last component. It lands
     * on the very inode of pathfd (a symlink there fails with ELOOP). */
    flags &= ~(O_NOFOLLOW | O_CREAT | O_EXCL | O_PATH);
    int fd = SYS.openat(AT_FDCWD, path, flags | O_CLOEXEC | O_NOCTTY, 0);
    return fd < 0 ? -errno : fd;
}

static void close_task(void *arg)
{
    px_fd_close(arg);
}

static void px_release(struct bfs_xl *xl, struct bfs_fd *fd)
{
    uint64_t v;
    if (bfs_fd_ctx_del(fd, xl, &v) < 0 || !v)
        return;
    struct px_fd *pf = (struct px_fd *)(uintptr_t)v;
    struct px_priv *p = xl->private;
    if (!p || bfs_workers_submit(p->workers, close_task, pf) < 0)
        px_fd_close(pf);
}

/* ---- module ---- */

static const struct bfs_option_desc px_options[] = {
    {.key = "directory",
     .type = BFS_OPT_PATH,
     .description = "the brick: local directory whose contents this translator serves "
                    "(required)"},
    {.key = "brick-name",
     .type = BFS_OPT_STR,
     .description = "name of the brick in log lines (default: the directory)"},
    {.key = NULL},
};

static int open_brick(struct bfs_xl *xl, struct px_priv *p)
{
    p->root_fd = open(p->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (p->root_fd < 0) {
        int rc = -errno;
        XL_ERR(xl, "brick directory %s: %s", p->dir,
               rc == -ENOTDIR ? "is not a directory" : strerror(-rc));
        return rc;
    }
    struct stat st;
    if (fstat(p->root_fd, &st) < 0)
        return -errno;
    p->dev = st.st_dev;
    int rc = bfs__px_handles_init(p);
    if (rc == -EEXIST)
        XL_ERR(xl, "brick directory %s: its root carries another GFID than the root's; "
               "it belongs to something else", p->dir);
    else if (rc == -EPERM || rc == -EOPNOTSUPP || rc == -ENOTSUP)
        XL_ERR(xl, "brick directory %s: cannot set %s (%s): a brick needs root "
               "(CAP_SYS_ADMIN) and a file system with trusted xattrs", p->dir,
               PX_GFID_XATTR, strerror(-rc));
    else if (rc < 0)
        XL_ERR(xl, "brick directory %s: cannot prepare %s: %s", p->dir, PX_HIDDEN,
               strerror(-rc));
    return rc;
}

static void px_fini(struct bfs_xl *xl)
{
    struct px_priv *p = xl->private;
    if (!p)
        return;
    if (p->handles_fd >= 0)
        close(p->handles_fd);
    if (p->root_fd >= 0)
        close(p->root_fd);
    for (int i = 0; i < PX_NLOCKS; i++) {
        pthread_mutex_destroy(&p->elocks[i]);
        pthread_mutex_destroy(&p->ilocks[i]);
    }
    free(p->dir);
    free(p);
    xl->private = NULL;
}

static int px_init(struct bfs_xl *xl)
{
    const char *dir = bfs_xl_opt_str(xl, "directory");
    if (!dir || !*dir) {
        XL_ERR(xl, "option 'directory' is required: the local directory of the brick");
        return -EINVAL;
    }
    if (xl->nchildren > 0) {
        XL_ERR(xl, "storage/posix is a leaf: it takes no subvolumes");
        return -EINVAL;
    }
    if (!xl->graph || !xl->graph->proc || !xl->graph->proc->workers) {
        XL_ERR(xl, "storage/posix needs the process's worker pool (bfs_proc_new with workers)");
        return -EINVAL;
    }
    struct px_priv *p = calloc(1, sizeof(*p));
    if (!p || !(p->dir = strdup(dir))) {
        free(p);
        return -ENOMEM;
    }
    p->root_fd = p->handles_fd = -1;
    p->workers = xl->graph->proc->workers;
    const char *bn = bfs_xl_opt_str(xl, "brick-name");
    p->brick = bn && *bn ? bn : p->dir;
    for (int i = 0; i < PX_NLOCKS; i++) {
        pthread_mutex_init(&p->elocks[i], NULL);
        pthread_mutex_init(&p->ilocks[i], NULL);
    }
    xl->private = p;
    bfs__px_creds_init();
    if (geteuid() != 0)
        XL_WARN(xl, "not running as root: every fop runs with the process's own identity");
    int rc = open_brick(xl, p);
    if (rc < 0) {
        px_fini(xl);
        return rc;
    }
    XL_INFO(xl, "serving %s", p->dir);
    return 0;
}

static char *px_dump(struct bfs_xl *xl)
{
    struct px_priv *p = xl->private;
    if (!p)
        return NULL;
    size_t cap = 64 + strlen(p->dir) + BFS_FOP_COUNT * 80, len = 0;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    len += (size_t)snprintf(s + len, cap - len, "{\"directory\":\"%s\",\"fops\":{", p->dir);
    bool first = true;
    for (int f = 0; f < BFS_FOP_COUNT && len < cap; f++) {
        uint64_t c = __atomic_load_n(&p->calls[f], __ATOMIC_RELAXED);
        uint64_t e = __atomic_load_n(&p->errors[f], __ATOMIC_RELAXED);
        if (!c)
            continue;
        len += (size_t)snprintf(s + len, cap - len, "%s\"%s\":{\"calls\":%llu,\"errors\":%llu}",
                                first ? "" : ",", bfs_fop_name(f), (unsigned long long)c,
                                (unsigned long long)e);
        first = false;
    }
    if (len < cap)
        snprintf(s + len, cap - len, "}}");
    return s;
}

#define PX_FOP_SLOT(fop) .fop = bfs__px_##fop,
static const struct bfs_fops px_fops = {PX_FOPS(PX_FOP_SLOT)};
#undef PX_FOP_SLOT

BFS_XL_MODULE(.type = "storage/posix", .fops = &px_fops, .options = px_options,
              .init = px_init, .fini = px_fini, .release = px_release,
              .releasedir = px_release, .dump = px_dump, .min_children = 0,
              .max_children = 0);
