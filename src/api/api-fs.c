/*
 * api-fs.c — the life of a brickfs_t: new (keeps the volfile text), options
 * and logging, init (process resources, graph build + init + activate, then
 * wait for CHILD_UP), fini (close leftover handles, free the graph, which
 * deactivates it and waits for queued work, then stop the threads).
 *
 * Whether the volume is up is fed by graph->on_event, which the runtime
 * calls with the events that reach the top translator (from whatever
 * thread raised them, the event loop's usually); fs->lock and fs->cond
 * carry it to brickfs_init.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "core/log.h"

#define API_WHO "libbrickfs"
#define DEFAULT_CONNECT_TIMEOUT_S 10
#define DEFAULT_IO_THREADS 4

static uint64_t next_fs_id; /* atomic */

static int parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    if (!s || !*s)
        return -EINVAL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -EINVAL;
    *out = (int)v;
    return 0;
}

static struct brickfs *fs_alloc(const char *source)
{
    struct brickfs *fs = calloc(1, sizeof(*fs));
    if (!fs)
        return NULL;
    fs->source = strdup(source);
    if (!fs->source) {
        free(fs);
        return NULL;
    }
    fs->id = __atomic_add_fetch(&next_fs_id, 1, __ATOMIC_RELAXED);
    fs->umask = 022;
    fs->connect_timeout_s = DEFAULT_CONNECT_TIMEOUT_S;
    int v;
    if (parse_int(getenv("BRICKFS_CONNECT_TIMEOUT"), 0, 86400, &v) == 0)
        fs->connect_timeout_s = v;
    fs->io_threads = DEFAULT_IO_THREADS;
    pthread_mutex_init(&fs->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&fs->cond, &ca);
    pthread_condattr_destroy(&ca);
    return fs;
}

/* Parses now so that a broken volfile fails at once, with its message. */
static struct brickfs *fs_new_text(const char *text, size_t len, const char *source)
{
    char err[512] = "";
    struct bfs_volfile *vf = NULL;
    if (bfs_volfile_parse(text, len, source, &vf, err, sizeof(err)) < 0) {
        bfs_log(API_WHO, BFS_LOG_ERROR, "%s", err);
        errno = EINVAL;
        return NULL;
    }
    bfs_volfile_free(vf);
    struct brickfs *fs = fs_alloc(source);
    if (!fs || !(fs->volfile = malloc(len + 1))) {
        brickfs_fini(fs);
        errno = ENOMEM;
        return NULL;
    }
    memcpy(fs->volfile, text, len);
    fs->volfile[len] = 0;
    fs->volfile_len = len;
    return fs;
}

brickfs_t *brickfs_new_from_volfile_text(const char *text, size_t len)
{
    if (!text) {
        errno = EINVAL;
        return NULL;
    }
    return fs_new_text(text, len, "<inline>");
}

brickfs_t *brickfs_new_from_volfile(const char *path)
{
    if (!path) {
        errno = EINVAL;
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat sb;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        close(fd);
        errno = EISDIR;
        return NULL;
    }
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 8192;
            char *nb = ncap > (64u << 20) ? NULL : realloc(buf, ncap);
            if (!nb) {
                free(buf);
                close(fd);
                errno = ncap > (64u << 20) ? EFBIG : ENOMEM;
                return NULL;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            free(buf);
            close(fd);
            errno = e;
            return NULL;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    struct brickfs *fs = fs_new_text(buf ? buf : "", len, path);
    int e = errno;
    free(buf);
    errno = e;
    return fs;
}

int brickfs_set_logging(brickfs_t *fs, const char *path, int level)
{
    if (!fs || level < BRICKFS_LOG_NONE || level > BRICKFS_LOG_TRACE)
        return (int)bfs__api_ret(-EINVAL);
    int rc = bfs_log_open(path);
    if (rc < 0)
        return (int)bfs__api_ret(rc);
    bfs_log_set_level((enum bfs_log_level)level);
    return 0;
}

int brickfs_set_option(brickfs_t *fs, const char *key, const char *value)
{
    if (!fs || !key || !value)
        return (int)bfs__api_ret(-EINVAL);
    if (fs->inited)
        return (int)bfs__api_ret(-EBUSY);
    if (strcmp(key, "connect-timeout") == 0)
        return (int)bfs__api_ret(parse_int(value, 0, 86400, &fs->connect_timeout_s));
    if (strcmp(key, "io-threads") == 0)
        return (int)bfs__api_ret(parse_int(value, 1, 64, &fs->io_threads));
    return (int)bfs__api_ret(-EINVAL);
}

mode_t brickfs_umask(brickfs_t *fs, mode_t mask)
{
    if (!fs)
        return 0;
    return __atomic_exchange_n(&fs->umask, mask & 0777, __ATOMIC_RELAXED);
}

/* Runs on whichever thread raised the event. */
static void api_on_event(struct bfs_graph *g, enum bfs_event ev, void *data)
{
    struct brickfs *fs = g->owner;
    (void)data;
    if (ev != BFS_EV_CHILD_UP && ev != BFS_EV_CHILD_DOWN)
        return;
    pthread_mutex_lock(&fs->lock);
    fs->up = ev == BFS_EV_CHILD_UP;
    pthread_cond_broadcast(&fs->cond);
    pthread_mutex_unlock(&fs->lock);
    bfs_log(API_WHO, BFS_LOG_INFO, "%s: volume is %s", fs->source,
            ev == BFS_EV_CHILD_UP ? "up" : "down");
}

static int wait_up(struct brickfs *fs)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += fs->connect_timeout_s;
    int rc = 0;
    pthread_mutex_lock(&fs->lock);
    while (!fs->up && rc == 0)
        rc = pthread_cond_timedwait(&fs->cond, &fs->lock, &dl);
    bool up = fs->up;
    pthread_mutex_unlock(&fs->lock);
    return up ? 0 : -ENOTCONN;
}

int brickfs_init(brickfs_t *fs)
{
    if (!fs)
        return (int)bfs__api_ret(-EINVAL);
    if (fs->inited)
        return (int)bfs__api_ret(-EALREADY);
    fs->inited = true;
    fs->proc = bfs_proc_new(API_WHO, fs->io_threads);
    if (!fs->proc)
        return (int)bfs__api_ret(-ENOMEM);
    char err[512] = "";
    int rc = bfs_graph_from_text(fs->volfile, fs->volfile_len, fs->source, fs->proc,
                                 &fs->graph, err, sizeof(err));
    if (rc < 0) {
        bfs_log(API_WHO, BFS_LOG_ERROR, "%s", err[0] ? err : strerror(-rc));
        fs->graph = NULL;
        return (int)bfs__api_ret(rc);
    }
    free(fs->volfile);
    fs->volfile = NULL;
    /* before init: a translator may announce CHILD_UP from init itself */
    fs->graph->owner = fs;
    fs->graph->on_event = api_on_event;
    rc = bfs_graph_init(fs->graph);
    if (rc < 0) {
        bfs_log(API_WHO, BFS_LOG_ERROR, "%s: graph init failed: %s", fs->source,
                strerror(-rc));
        bfs_graph_free(fs->graph);
        fs->graph = NULL;
        return (int)bfs__api_ret(rc);
    }
    bfs_graph_activate(fs->graph);
    rc = wait_up(fs);
    if (rc < 0)
        bfs_log(API_WHO, BFS_LOG_ERROR, "%s: volume not up after %d s", fs->source,
                fs->connect_timeout_s);
    return (int)bfs__api_ret(rc);
}

int bfs__api_ready(struct brickfs *fs)
{
    if (!fs)
        return -EINVAL;
    if (!fs->graph)
        return -ENOTCONN;
    return 0;
}

void bfs__api_track(struct brickfs *fs, struct brickfs_fd *fd)
{
    pthread_mutex_lock(&fs->lock);
    fd->prev = NULL;
    fd->next = fs->fds;
    if (fs->fds)
        fs->fds->prev = fd;
    fs->fds = fd;
    pthread_mutex_unlock(&fs->lock);
}

void bfs__api_untrack(struct brickfs *fs, struct brickfs_fd *fd)
{
    pthread_mutex_lock(&fs->lock);
    if (fd->prev)
        fd->prev->next = fd->next;
    else if (fs->fds == fd)
        fs->fds = fd->next;
    if (fd->next)
        fd->next->prev = fd->prev;
    fd->prev = fd->next = NULL;
    pthread_mutex_unlock(&fs->lock);
}

static void close_leftovers(struct brickfs *fs)
{
    for (;;) {
        pthread_mutex_lock(&fs->lock);
        struct brickfs_fd *fd = fs->fds;
        pthread_mutex_unlock(&fs->lock);
        if (!fd)
            break;
        bfs__api_untrack(fs, fd);
        bfs__api_fd_free(fd);
    }
}

int brickfs_fini(brickfs_t *fs)
{
    if (!fs)
        return 0;
    if (fs->graph) {
        /* releases reach the translators while they still run */
        close_leftovers(fs);
        /* A translator's queued work may still hold fds (a request copy
         * keeps its fd until the job is freed, after the answer we got):
         * let it finish before the inode table goes. */
        bfs_proc_quiesce(fs->proc);
        /* PARENT_DOWN, forget, fini, wait for queued work, unload */
        bfs_graph_free(fs->graph);
    }
    bfs_proc_free(fs->proc);
    bfs__api_creds_forget(fs);
    pthread_cond_destroy(&fs->cond);
    pthread_mutex_destroy(&fs->lock);
    free(fs->volfile);
    free(fs->source);
    free(fs);
    return 0;
}
