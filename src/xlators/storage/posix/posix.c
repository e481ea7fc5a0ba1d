/*
 * posix.c — storage/posix: the module, its options, init/fini, fds and the
 * worker-job plumbing every fop goes through.
 *
 * storage/posix is the leaf of every brick graph: it serves one local
 * directory (option `directory`) and implements every fop of fops.def but
 * the lock family (lk, inodelk, finodelk, entrylk, fentrylk) and lease,
 * which belong to features/locks above it and answer -ENOSYS here.
 *
 * Every fop goes through bfs__px_submit(), which runs the fop's do_FOP()
 * with the caller's credentials (posix-creds.c) either
 *   - inline, when called on the process's event-loop thread (a brick:
 *     protocol/server winds there), for fops that are a few system calls on
 *     metadata or on a little data (px_inline(): lookup, stat, open,
 *     create, small reads and writes...): a hand-off to another thread
 *     costs more than the fop itself; or
 *   - on the process's worker pool (xl->graph->proc->workers) for whatever
 *     may block for long (fsync, unlink and truncate that free blocks, big
 *     transfers, readdir): the request is deep copied, the worker answers
 *     with bfs_unwind_FOP and then frees its copy.
 * Either way the answer comes through the callback (possibly before the
 * wind returns); only -ENOMEM while queueing is returned directly.
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

static int px_to_workers(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req,
                         px_work_fn fn);

/* Runs the fop of j as its caller and answers (a fop running inline may
 * send itself to the workers instead: PX_EWORKER). j->req is not touched after
 * the answer: an inline job's request belongs to the caller. */
static void job_exec(struct px_job *j)
{
    const struct bfs_fop_info *fi = &bfs_fop_info[j->fop];
    void *rep = calloc(1, fi->rep_size);
    int rc = -ENOMEM;

    if (rep) {
        bfs__px_creds_enter(j->frame->stack);
        rc = j->fn(j, j->req, rep);
        bfs__px_creds_leave();
        if (rc == -PX_EWORKER && j->inline_run) {
            fi->rep_clear_dup(rep);
            free(rep);
            if ((rc = px_to_workers(j->frame, j->xl, j->fop, j->req, j->fn)) == 0)
                return;
            rep = NULL; /* -ENOMEM: answered below */
        } else if (rc < 0) { /* a failed reply is a zeroed one */
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
}

static void job_run(void *arg)
{
    struct px_job *j = arg;
    job_exec(j);
    job_free(j);
}

/*
 * Whether a fop runs on the calling thread instead of a worker. A hand-off
 * to a worker costs a thread wake-up, often on another CPU (tens of
 * microseconds on a virtual machine), which is more than the whole fop for
 * a lookup or a small read. So fops that are a handful of system calls on
 * metadata, small reads and buffered writes run inline; what can take long
 * stays on the workers: freeing blocks (rmdir, rename over a file, truncate,
 * O_TRUNC on open and on a create that finds the file, an unlink that
 * cannot defer its handle's removal), waiting for the disk (fsync, O_SYNC/O_DSYNC writes,
 * reads over 128 KiB), whole-directory work (readdir) and copy_file_range,
 * fallocate and friends. The price: while the loop thread runs a fop, the
 * brick reads no other request (at worst one 1 MiB copy into the page
 * cache, or a metadata read from a cold disk). Option inline-fops off runs
 * everything on the workers. See docs/design/performance-notes.md.
 */
#define PX_INLINE_READ (128u * 1024)
#define PX_INLINE_WRITE (1u << 20)

static bool fd_syncs(const struct bfs_fd *fd)
{
    return fd && (fd->flags & (O_SYNC | O_DSYNC));
}

static bool px_inline(const struct px_priv *p, int fop, const void *req)
{
    /* Only the event loop's own thread: it is about to sleep in epoll_wait
     * anyway. Other callers (a FUSE thread, an application thread of
     * libbrickfs) keep their thread's identity and umask untouched. */
    if (!p->inline_fops || !p->loop || !bfs_loop_on_loop_thread(p->loop))
        return false;
    switch (fop) {
    case BFS_FOP_LOOKUP:
    case BFS_FOP_STAT:
    case BFS_FOP_FSTAT:
    case BFS_FOP_ACCESS:
    case BFS_FOP_READLINK:
    case BFS_FOP_STATFS:
    case BFS_FOP_OPENDIR:
    case BFS_FOP_MKNOD:
    case BFS_FOP_MKDIR:
    case BFS_FOP_SYMLINK:
    case BFS_FOP_LINK:
    case BFS_FOP_GETXATTR:
    case BFS_FOP_FGETXATTR:
    case BFS_FOP_SETXATTR:
    case BFS_FOP_FSETXATTR:
    case BFS_FOP_REMOVEXATTR:
    case BFS_FOP_FREMOVEXATTR:
    case BFS_FOP_XATTROP:
    case BFS_FOP_FXATTROP:
    case BFS_FOP_SETATTR:
    case BFS_FOP_FSETATTR:
    case BFS_FOP_SEEK:
        return true;
    case BFS_FOP_UNLINK:
        /* the last name of a file: its handle keeps the blocks, which a
         * worker frees after the answer (posix-defer.c); an unlink that
         * would free them itself goes to the workers (posix-entry.c) */
        return true;
    case BFS_FOP_OPEN:
        return !(((const struct bfs_open_req *)req)->flags & O_TRUNC);
    case BFS_FOP_CREATE:
        /* with O_TRUNC too: the name is almost always new (the kernel looked
         * it up first); a create that finds a file to truncate goes to the
         * workers before it touches it (posix-io.c, PX_EWORKER) */
        return true;
    case BFS_FOP_READ: {
        /* a read may wait for the disk; the kernel's read-ahead sends
         * several at once, which workers serve in parallel */
        const struct bfs_read_req *r = req;
        return r->size <= PX_INLINE_READ;
    }
    case BFS_FOP_WRITE: {
        /* a write only copies into the page cache (unless O_SYNC): inline
         * it saves the copy of the payload a worker would need, up to the
         * 1 MiB a FUSE client sends at most */
        const struct bfs_write_req *w = req;
        return w->data.len <= PX_INLINE_WRITE && !fd_syncs(w->fd);
    }
    default:
        return false;
    }
}

int bfs__px_submit(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req,
                   px_work_fn fn)
{
    if (px_inline(xl->private, fop, req)) {
        struct px_job j = {.frame = frame, .xl = xl, .priv = xl->private, .fop = fop,
                           .fn = fn, .req = (void *)req, .inline_run = true};
        job_exec(&j);
        return 0;
    }
    return px_to_workers(frame, xl, fop, req, fn);
}

/* Queues a deep copy of req for fn on the worker pool. */
static int px_to_workers(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req,
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
    bfs__px_direct_close(pf);
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
        pf->dfd = PX_DFD_NONE;
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
    /* The close of a file that still has a name frees nothing: on the
     * event loop it is cheaper than waking a worker for it (one wake-up
     * per file created or read). The last close of an unlinked file may
     * free many blocks, and a directory stream is not worth the fstat:
     * those go to a worker. */
    struct stat st;
    if (p && !pf->dir && p->inline_fops && p->loop && bfs_loop_on_loop_thread(p->loop) &&
        SYS.fstat(pf->fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink > 0) {
        px_fd_close(pf);
        return;
    }
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
    {.key = "gfid-cache-size",
     .type = BFS_OPT_INT,
     .def = "65536",
     .min = 0,
     .max = 16777216,
     .description = "GFIDs whose handle is remembered as checked (about 100 bytes each; "
                    "0 turns the cache and its fds off)"},
    {.key = "gfid-cache-fds",
     .type = BFS_OPT_INT,
     .def = "1024",
     .min = 0,
     .max = 1048576,
     .description = "of those, how many most recently used keep an O_PATH fd for a quick "
                    "resolution (bounded by half the fd limit)"},
    {.key = "inline-fops",
     .type = BFS_OPT_BOOL,
     .def = "on",
     .description = "run cheap fops (metadata, small reads, buffered writes) on the thread "
                    "that received them when that is the event loop, instead of handing "
                    "them to a worker: less latency, but the loop reads no other request "
                    "meanwhile"},
    {.key = "storage.uncached-write-min",
     .type = BFS_OPT_SIZE,
     .def = "128KB",
     .min = 0,
     .max = 1024 * 1024 * 1024,
     .description = "a write of at least this many bytes goes with RWF_DONTCACHE: writeback "
                    "starts at once and the brick's page cache drops the pages when it is "
                    "done, instead of keeping streamed data (0: never; a kernel or file "
                    "system without it, before Linux 6.14, writes as usual)",
     .flags = BFS_OPT_F_SETTABLE},
    {.key = "storage.uncached-read-min",
     .type = BFS_OPT_SIZE,
     .def = "128KB",
     .min = 0,
     .max = 1024 * 1024 * 1024,
     .description = "a read of at least this many bytes goes with RWF_DONTCACHE: what it "
                    "brought into the brick's page cache is dropped once copied out, while "
                    "data already cached stays (0: never; a kernel or file system without "
                    "it, before Linux 6.14, reads as usual)",
     .flags = BFS_OPT_F_SETTABLE},
    {.key = "storage.direct-read",
     .type = BFS_OPT_BOOL,
     .def = "on",
     .description = "a read of at least storage.uncached-read-min bytes at a 4 KiB-aligned "
                    "offset goes with O_DIRECT straight into the reply, unless the brick's "
                    "page cache holds all of the range or some of it is dirty: no page-cache "
                    "pages taken and copied (off: RWF_DONTCACHE as for other big reads; a "
                    "file system without O_DIRECT reads as usual)",
     .flags = BFS_OPT_F_SETTABLE},
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
    if (rc == 0) {
        rc = bfs__px_defer_init(p);
        p->defer_init = true;
    }
    if (rc == 0) /* after the replay; the brick serves meanwhile */
        bfs__px_orphan_scan_start(p);
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
    bfs__px_orphan_scan_stop(p);
    if (p->defer_init)
        bfs__px_defer_fini(p);
    if (p->handles_fd >= 0)
        close(p->handles_fd);
    if (p->root_fd >= 0)
        close(p->root_fd);
    bfs__px_cache_free(p->cache);
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
    p->root_fd = p->handles_fd = p->defer_fd = -1;
    p->workers = xl->graph->proc->workers;
    p->loop = xl->graph->proc->loop;
    const char *bn = bfs_xl_opt_str(xl, "brick-name");
    p->brick = bn && *bn ? bn : p->dir;
    for (int i = 0; i < PX_NLOCKS; i++) {
        pthread_mutex_init(&p->elocks[i], NULL);
        pthread_mutex_init(&p->ilocks[i], NULL);
    }
    int64_t cache_size = bfs_xl_opt_int(xl, "gfid-cache-size");
    int64_t cache_fds = bfs_xl_opt_int(xl, "gfid-cache-fds");
    p->inline_fops = bfs_xl_opt_bool(xl, "inline-fops");
    p->uc_write.min = bfs_xl_opt_size(xl, "storage.uncached-write-min");
    p->uc_read.min = bfs_xl_opt_size(xl, "storage.uncached-read-min");
    p->direct.want = bfs_xl_opt_bool(xl, "storage.direct-read");
    p->cache = bfs__px_cache_new(cache_size > 0 ? (size_t)cache_size : 0,
                                 cache_fds > 0 ? (size_t)cache_fds : 0);
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

/* "KEY":{"min":N,"on":true|false,"done":N}, for dump. */
static size_t dump_uncached(char *s, size_t cap, const char *key, struct px_uncached *u)
{
    bool on = u->min && !__atomic_load_n(&u->off, __ATOMIC_RELAXED);
    int n = snprintf(s, cap, "\"%s\":{\"min\":%llu,\"on\":%s,\"done\":%llu},", key,
                     (unsigned long long)u->min, on ? "true" : "false",
                     (unsigned long long)__atomic_load_n(&u->done, __ATOMIC_RELAXED));
    if (n < 0 || cap == 0)
        return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

/* "direct_reads":{"on":true|false,"done":N,"cached":N}, for dump. */
static size_t dump_direct(char *s, size_t cap, struct px_priv *p)
{
    int n = snprintf(s, cap, "\"direct_reads\":{\"on\":%s,\"done\":%llu,\"cached\":%llu},",
                     bfs__px_direct_on(p) ? "true" : "false",
                     (unsigned long long)__atomic_load_n(&p->direct.done, __ATOMIC_RELAXED),
                     (unsigned long long)__atomic_load_n(&p->direct.cached, __ATOMIC_RELAXED));
    if (n < 0 || cap == 0)
        return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

static char *px_dump(struct bfs_xl *xl)
{
    struct px_priv *p = xl->private;
    if (!p)
        return NULL;
    size_t cap = 320 + strlen(p->dir) + BFS_FOP_COUNT * 80, len = 0;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    struct px_cache_stats cs;
    bfs__px_cache_stats(p->cache, &cs);
    len += (size_t)snprintf(s + len, cap - len,
                            "{\"directory\":\"%s\",\"gfid_cache\":{\"entries\":%llu,\"cap\":%llu,"
                            "\"fds\":%llu,\"fd_cap\":%llu,\"hits\":%llu,\"misses\":%llu},"
                            "\"unlinks_deferred\":%d,\"orphan_scan\":{\"done\":%d,"
                            "\"removed\":%llu},",
                            p->dir, (unsigned long long)cs.entries, (unsigned long long)cs.cap,
                            (unsigned long long)cs.fds, (unsigned long long)cs.fdcap,
                            (unsigned long long)cs.hits, (unsigned long long)cs.misses,
                            bfs__px_defer_pending(p),
                            (int)__atomic_load_n(&p->scan_done, __ATOMIC_ACQUIRE),
                            (unsigned long long)__atomic_load_n(&p->scan_removed,
                                                                __ATOMIC_RELAXED));
    len += dump_uncached(s + len, cap - len, "uncached_writes", &p->uc_write);
    len += dump_uncached(s + len, cap - len, "uncached_reads", &p->uc_read);
    len += dump_direct(s + len, cap - len, p);
    len += (size_t)snprintf(s + len, cap - len, "\"fops\":{");
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
