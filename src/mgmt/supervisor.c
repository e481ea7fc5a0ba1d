/*
 * supervisor.c — brick processes: spawn, stop, restart after a crash with
 * backoff, adopt after brickfsd itself restarted (docs/design/management.md,
 * "Supervision").
 *
 * One thread owns every pidfd: it polls them (plus an eventfd to be woken
 * when the set changes, plus a timeout for the next due restart) and is the
 * only one that closes them. API threads spawn and signal bricks with
 * m->lock held and wait for exits on m->cond, which the thread broadcasts
 * after each change. A struct bproc lives from the first start of a brick
 * until its volume is deleted (bfs_sup_forget) or brickfsd stops.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/event.h"
#include "core/log.h"
#include "mgmt/mgmt.h"
#include "mgmt/pool.h"
#include "mgmt/supervisor.h"

extern char **environ;

#define BACKOFF_FIRST_MS 1000u
#define BACKOFF_MAX_MS 30000u
#define STABLE_MS 60000u /* up this long: the next crash starts from the first delay */

static struct bproc *find(struct bfs_sup *s, const char *name)
{
    for (struct bproc *p = s->procs; p; p = p->next)
        if (strcmp(p->name, name) == 0)
            return p;
    return NULL;
}

struct bproc *bfs__sup_find(struct bfs_mgmt *m, const char *name)
{
    return find(m->sup, name);
}

struct bproc *bfs__sup_get_shd(struct bfs_mgmt *m, const struct bfs_volume *v)
{
    char name[160];
    snprintf(name, sizeof(name), "%s-shd", v->name);
    struct bproc *p = find(m->sup, name);
    if (p)
        return p;
    p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    snprintf(p->name, sizeof(p->name), "%s", name);
    snprintf(p->vol, sizeof(p->vol), "%s", v->name);
    p->kind = BP_SHD;
    p->idx = -1;
    p->pidfd = -1;
    p->backoff_ms = BACKOFF_FIRST_MS;
    bfs_shd_paths(m, v->name, p->volfile, p->statefile, p->logfile, p->pidfile,
                  sizeof(p->volfile));
    p->next = m->sup->procs;
    m->sup->procs = p;
    return p;
}

struct bproc *bfs__sup_get(struct bfs_mgmt *m, const struct bfs_volume *v, int idx)
{
    char name[160];
    bfs_brick_name(v, idx, name, sizeof(name));
    struct bproc *p = find(m->sup, name);
    if (p) {
        p->idx = idx; /* positions move when bricks leave (remove-brick) */
        return p;
    }
    p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    snprintf(p->name, sizeof(p->name), "%s", name);
    snprintf(p->vol, sizeof(p->vol), "%s", v->name);
    p->idx = idx;
    p->pidfd = -1;
    p->backoff_ms = BACKOFF_FIRST_MS;
    bfs_volgen_brick_path(m, v, idx, p->volfile, sizeof(p->volfile));
    snprintf(p->pidfile, sizeof(p->pidfile), "%s/bricks/%s.pid", m->run_dir, name);
    snprintf(p->portfile, sizeof(p->portfile), "%s/bricks/%s.port", m->run_dir, name);
    snprintf(p->logfile, sizeof(p->logfile), "%s/bricks/%s.log", m->log_dir, name);
    p->next = m->sup->procs;
    m->sup->procs = p;
    return p;
}

void bfs__sup_wake(struct bfs_mgmt *m)
{
    uint64_t one = 1;
    if (write(m->sup->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        bfs_log(MGMT_LOG, BFS_LOG_ERROR, "cannot wake the supervisor: %s", strerror(errno));
}

const char *bfs__sup_what(const struct bproc *p)
{
    return p->kind == BP_SHD ? "self-heal daemon" : "brick";
}

bool bfs__sup_online(const struct bproc *p)
{
    if (p->state != BP_RUNNING)
        return false;
    if (p->kind == BP_SHD)
        return true; /* no port: alive is online */
    char *txt = NULL;
    if (bfs_read_small(p->portfile, &txt) < 0)
        return false;
    bool ok = atoi(txt) == p->port;
    free(txt);
    return ok;
}

/* Moves brick idx of v to a free port if a stranger holds its port, and
 * saves v. */
static int ensure_port(struct bfs_mgmt *m, struct bfs_volume *v, int idx, struct bfs_err *e)
{
    struct bfs_vbrick *b = &v->bricks[idx];
    if (bfs_port_free(b->host, b->port))
        return 0;
    int old = b->port;
    b->port = 0;
    if (bfs_ports_assign(m, v, e) < 0) {
        b->port = old;
        return -1;
    }
    int rc = bfs_volume_save(m, v);
    if (rc < 0) {
        b->port = old;
        return bfs_fail(e, 500, "cannot save volume %s: %s", v->name, strerror(-rc));
    }
    bfs_log(MGMT_LOG, BFS_LOG_WARNING, "brick %s:%s: port %d is taken by another process; "
            "moved to port %d", b->host, b->path, old, b->port);
    return 0;
}

int bfs__spawn(char *const argv[], const posix_spawn_file_actions_t *fa, short flags,
               pid_t *pid)
{
    posix_spawnattr_t at;
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, flags | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (flags & POSIX_SPAWN_SETPGROUP)
        posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    int rc = posix_spawn(pid, argv[0], fa, &at, argv, environ);
    posix_spawnattr_destroy(&at);
    return -rc;
}

int bfs__spawn_daemon(char *const argv[], const char *logfile, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, logfile, O_WRONLY | O_APPEND | O_CREAT, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    /* own session: a brick outlives brickfsd and its terminal's signals */
    int rc = bfs__spawn(argv, &fa, POSIX_SPAWN_SETSID, pid);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

static int do_spawn(struct bfs_mgmt *m, struct bproc *p, pid_t *pid)
{
    char *argv[] = {m->brick_bin, (char *)"-f", (char *)"--volfile", p->volfile,
                    (char *)"--log-file", p->logfile, NULL};
    return bfs__spawn_daemon(argv, p->logfile, pid);
}

int bfs__sup_track(struct bfs_mgmt *m, struct bproc *p, pid_t pid, struct bfs_err *e)
{
    int fd = pidfd_open(pid, 0);
    if (fd < 0) {
        int err = errno;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return bfs_fail(e, 500, "pidfd_open of %s %s: %s", bfs__sup_what(p), p->name,
                        strerror(err));
    }
    char txt[32];
    snprintf(txt, sizeof(txt), "%d\n", (int)pid);
    int rc = bfs_write_file_atomic(p->pidfile, txt, strlen(txt));
    if (rc < 0)
        bfs_log(MGMT_LOG, BFS_LOG_WARNING, "cannot write %s: %s", p->pidfile, strerror(-rc));
    p->pid = pid;
    p->pidfd = fd;
    p->child = true;
    p->state = BP_RUNNING;
    p->started_ms = bfs_now_ms();
    (void)m;
    return 0;
}

int bfs__sup_spawn(struct bfs_mgmt *m, struct bfs_volume *v, struct bproc *p,
                   struct bfs_err *e)
{
    if (ensure_port(m, v, p->idx, e) < 0 || bfs_volgen_write(m, v, e) < 0)
        return -1;
    unlink(p->portfile);
    pid_t pid;
    int rc = do_spawn(m, p, &pid);
    if (rc < 0)
        return bfs_fail(e, 500, "cannot run %s: %s", m->brick_bin, strerror(-rc));
    if (bfs__sup_track(m, p, pid, e) < 0)
        return -1;
    p->port = v->bricks[p->idx].port;
    bfs_log(MGMT_LOG, BFS_LOG_INFO, "brick %s (%s:%s) started, pid %d, port %d", p->name,
            v->bricks[p->idx].host, v->bricks[p->idx].path, (int)pid, p->port);
    bfs__sup_wake(m);
    return 0;
}

/* The exit of p's process, seen by the supervisor thread. */
static void handle_exit(struct bfs_mgmt *m, struct bproc *p)
{
    int st = 0;
    char how[64] = "exited (not our child: status unknown)";
    if (p->child && waitpid(p->pid, &st, WNOHANG) == p->pid) {
        if (WIFEXITED(st))
            snprintf(how, sizeof(how), "exited with status %d", WEXITSTATUS(st));
        else if (WIFSIGNALED(st))
            snprintf(how, sizeof(how), "was killed by signal %d", WTERMSIG(st));
    }
    close(p->pidfd);
    p->pidfd = -1;
    unlink(p->pidfile);
    if (p->kind == BP_BRICK)
        unlink(p->portfile);
    uint64_t now = bfs_now_ms();
    if (p->state == BP_STOPPING) {
        bfs_log(MGMT_LOG, BFS_LOG_INFO, "%s %s (pid %d) stopped: %s", bfs__sup_what(p),
                p->name, (int)p->pid, how);
        p->state = BP_DOWN;
    } else {
        if (now - p->started_ms >= STABLE_MS)
            p->backoff_ms = BACKOFF_FIRST_MS;
        p->restart_at_ms = now + p->backoff_ms;
        bfs_log(MGMT_LOG, BFS_LOG_WARNING, "%s %s (pid %d) %s; restarting in %u ms (log: %s)",
                bfs__sup_what(p), p->name, (int)p->pid, how, p->backoff_ms, p->logfile);
        p->backoff_ms = p->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : p->backoff_ms * 2;
        p->state = BP_WAIT;
    }
    p->pid = 0;
    pthread_cond_broadcast(&m->cond);
}

static void restart_due(struct bfs_mgmt *m, struct bproc *p)
{
    struct bfs_volume *v = NULL;
    struct bfs_err e;
    bool shd = p->kind == BP_SHD;
    if (bfs_volume_load(m, p->vol, &v) < 0 || v->status != BFS_VOL_STARTED ||
        (shd ? !bfs_shd_wanted_here(m, v)
             : (p->idx = bfs_volume_brick_index(v, p->name)) < 0 ||
                   !bfs_pool_brick_is_mine(m, v, p->idx))) {
        p->state = BP_DOWN;
    } else if ((shd ? bfs__sup_spawn_shd(m, v, p, &e) : bfs__sup_spawn(m, v, p, &e)) < 0) {
        bfs_log(MGMT_LOG, BFS_LOG_ERROR, "%s %s: restart failed: %s", bfs__sup_what(p), p->name,
                e.msg);
        p->restart_at_ms = bfs_now_ms() + p->backoff_ms;
        p->backoff_ms = p->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : p->backoff_ms * 2;
    } else {
        p->restarts++;
    }
    bfs_volume_free(v);
    pthread_cond_broadcast(&m->cond);
}

/* One round: which fds to poll and how long. */
static int prepare(struct bfs_sup *s, struct pollfd **fds, int *timeout)
{
    int n = 1;
    uint64_t now = bfs_now_ms(), next = UINT64_MAX;
    for (struct bproc *p = s->procs; p; p = p->next) {
        n += p->pidfd >= 0;
        if (p->state == BP_WAIT && p->restart_at_ms < next)
            next = p->restart_at_ms;
    }
    struct pollfd *f = calloc((size_t)n, sizeof(*f));
    if (!f)
        return -ENOMEM;
    f[0].fd = s->evfd;
    f[0].events = POLLIN;
    int i = 1;
    for (struct bproc *p = s->procs; p; p = p->next)
        if (p->pidfd >= 0) {
            f[i].fd = p->pidfd;
            f[i++].events = POLLIN;
        }
    *timeout = next == UINT64_MAX ? -1 : next <= now ? 0 : (int)(next - now);
    *fds = f;
    return n;
}

static void *sup_thread(void *arg)
{
    struct bfs_mgmt *m = arg;
    struct bfs_sup *s = m->sup;
    pthread_mutex_lock(&m->lock);
    while (!s->quit) {
        struct pollfd *fds;
        int timeout, n = prepare(s, &fds, &timeout);
        if (n < 0) {
            pthread_mutex_unlock(&m->lock);
            sleep(1);
            pthread_mutex_lock(&m->lock);
            continue;
        }
        pthread_mutex_unlock(&m->lock);
        poll(fds, (nfds_t)n, timeout);
        pthread_mutex_lock(&m->lock);
        uint64_t junk;
        if (fds[0].revents && read(s->evfd, &junk, sizeof(junk)) < 0 && errno != EAGAIN)
            bfs_log(MGMT_LOG, BFS_LOG_ERROR, "eventfd: %s", strerror(errno));
        for (int i = 1; i < n; i++) {
            if (!fds[i].revents)
                continue;
            for (struct bproc *p = s->procs; p; p = p->next)
                if (p->pidfd == fds[i].fd) { /* only this thread closes pidfds */
                    handle_exit(m, p);
                    break;
                }
        }
        free(fds);
        uint64_t now = bfs_now_ms();
        for (struct bproc *p = s->procs; p && !s->quit; p = p->next)
            if (p->state == BP_WAIT && p->restart_at_ms <= now)
                restart_due(m, p);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

int bfs_sup_init(struct bfs_mgmt *m)
{
    struct bfs_sup *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->evfd < 0) {
        free(s);
        return -errno;
    }
    m->sup = s;
    int rc = pthread_create(&s->thread, NULL, sup_thread, m);
    if (rc) {
        close(s->evfd);
        free(s);
        m->sup = NULL;
        return -rc;
    }
    return 0;
}

void bfs_sup_shutdown(struct bfs_mgmt *m)
{
    struct bfs_sup *s = m->sup;
    if (!s)
        return;
    pthread_mutex_lock(&m->lock);
    s->quit = true;
    bfs__sup_wake(m);
    pthread_mutex_unlock(&m->lock);
    pthread_join(s->thread, NULL);
    while (s->procs) {
        struct bproc *p = s->procs;
        s->procs = p->next;
        if (p->pidfd >= 0)
            close(p->pidfd);
        free(p);
    }
    close(s->evfd);
    free(s);
    m->sup = NULL;
}

void bfs_sup_forget(struct bfs_mgmt *m, const char *vol)
{
    for (struct bproc **pp = &m->sup->procs; *pp;) {
        struct bproc *p = *pp;
        if (strcmp(p->vol, vol) == 0 && p->pidfd < 0) {
            *pp = p->next;
            free(p);
        } else {
            pp = &p->next;
        }
    }
}

/* Waits on m->cond until pred(p) or deadline (ms, monotonic). */
bool bfs__sup_wait(struct bfs_mgmt *m, struct bproc *p, bool (*pred)(const struct bproc *),
                   uint64_t deadline_ms)
{
    while (!pred(p)) {
        uint64_t now = bfs_now_ms();
        if (now >= deadline_ms)
            return false;
        uint64_t step = deadline_ms - now > 100 ? 100 : deadline_ms - now;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(step * 1000000);
        ts.tv_sec += ts.tv_nsec / 1000000000;
        ts.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&m->cond, &m->lock, &ts);
    }
    return true;
}

static bool is_down(const struct bproc *p)
{
    return p->state == BP_DOWN || p->state == BP_WAIT;
}

int bfs__sup_stop(struct bfs_mgmt *m, struct bproc *p, struct bfs_err *e)
{
    if (p->state == BP_WAIT || p->state == BP_DOWN) {
        p->state = BP_DOWN;
        return 0;
    }
    if (p->state == BP_RUNNING) {
        p->state = BP_STOPPING;
        if (pidfd_send_signal(p->pidfd, SIGTERM, NULL, 0) < 0 && errno != ESRCH)
            bfs_log(MGMT_LOG, BFS_LOG_ERROR, "SIGTERM to %s %s: %s", bfs__sup_what(p), p->name,
                    strerror(errno));
    }
    if (bfs__sup_wait(m, p, is_down, bfs_now_ms() + (uint64_t)m->stop_timeout_ms))
        goto done;
    bfs_log(MGMT_LOG, BFS_LOG_WARNING, "%s %s (pid %d) ignored SIGTERM for %d ms; SIGKILL",
            bfs__sup_what(p), p->name, (int)p->pid, m->stop_timeout_ms);
    if (p->pidfd >= 0)
        pidfd_send_signal(p->pidfd, SIGKILL, NULL, 0);
    if (!bfs__sup_wait(m, p, is_down, bfs_now_ms() + 5000))
        return bfs_fail(e, 500, "%s %s (pid %d) did not exit after SIGKILL", bfs__sup_what(p),
                        p->name, (int)p->pid);
done:
    p->state = BP_DOWN;
    return 0;
}

void bfs_sup_brick_state(struct bfs_mgmt *m, const struct bfs_volume *v, int idx,
                         struct bfs_brick_state *out)
{
    char name[160];
    bfs_brick_name(v, idx, name, sizeof(name));
    struct bproc *p = find(m->sup, name);
    memset(out, 0, sizeof(*out));
    if (!p)
        return;
    out->pid = p->state == BP_RUNNING || p->state == BP_STOPPING ? p->pid : 0;
    out->online = bfs__sup_online(p);
    out->restarts = p->restarts;
}
