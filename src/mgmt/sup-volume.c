/*
 * sup-volume.c — the supervisor's work on whole volumes: start every brick
 * and wait until each listens, stop every brick (and the volume's self-heal
 * daemon), and the reconciliation at startup that adopts bricks still
 * running from before (pid file, else a scan of /proc, both checked against
 * the brick's command line) so that a brick is never run twice. All with
 * m->lock held.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <unistd.h>

#include "core/event.h"
#include "core/log.h"
#include "mgmt/mgmt.h"
#include "mgmt/pool.h"
#include "mgmt/supervisor.h"

static bool exited(const struct bproc *p)
{
    return p->state != BP_RUNNING;
}

static bool online_or_exited(const struct bproc *p)
{
    return p->state != BP_RUNNING || bfs__sup_online(p);
}

/* The last non-empty line of a log, for error messages. */
static void last_line(const char *path, char *out, size_t len)
{
    snprintf(out, len, "(no log)");
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char line[512];
    if (fseek(f, -4096, SEEK_END) < 0)
        rewind(f);
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0])
            snprintf(out, len, "%.*s", (int)len - 1, line);
    }
    fclose(f);
}

int bfs_sup_start_volume(struct bfs_mgmt *m, struct bfs_volume *v, struct bfs_err *e)
{
    struct bproc **started = calloc((size_t)v->nbricks, sizeof(*started));
    int rc = 0, nstarted = 0;
    if (!started)
        return bfs_fail(e, 500, "out of memory");
    for (int i = 0; i < v->nbricks && rc == 0; i++) {
        if (!bfs_pool_brick_is_mine(m, v, i))
            continue; /* its node starts it (pool.c) */
        struct bproc *p = bfs__sup_get(m, v, i);
        if (!p) {
            rc = bfs_fail(e, 500, "out of memory");
            break;
        }
        if (p->state == BP_STOPPING)
            bfs__sup_wait(m, p, exited, bfs_now_ms() + (uint64_t)m->stop_timeout_ms + 5000);
        if (p->state == BP_RUNNING)
            continue; /* force-start: already up */
        rc = bfs__sup_spawn(m, v, p, e);
        if (rc == 0)
            started[nstarted++] = p;
    }
    uint64_t deadline = bfs_now_ms() + (uint64_t)m->start_timeout_ms;
    for (int i = 0; i < nstarted && rc == 0; i++) {
        struct bproc *p = started[i];
        const struct bfs_vbrick *b = &v->bricks[p->idx];
        char line[400];
        if (!bfs__sup_wait(m, p, online_or_exited, deadline)) {
            last_line(p->logfile, line, sizeof(line));
            rc = bfs_fail(e, 500, "brick %s:%s did not listen on port %d within %d s; last "
                          "log line: %s (log: %s)", b->host, b->path, b->port,
                          m->start_timeout_ms / 1000, line, p->logfile);
        } else if (p->state != BP_RUNNING) {
            last_line(p->logfile, line, sizeof(line));
            rc = bfs_fail(e, 500, "brick %s:%s exited while starting: %s (log: %s)", b->host,
                          b->path, line, p->logfile);
        }
    }
    if (rc < 0) {
        struct bfs_err ignore;
        for (int i = 0; i < nstarted; i++)
            bfs__sup_stop(m, started[i], &ignore);
    }
    free(started);
    return rc;
}

int bfs_sup_stop_volume(struct bfs_mgmt *m, const struct bfs_volume *v, struct bfs_err *e)
{
    int rc = 0;
    char name[160];
    snprintf(name, sizeof(name), "%s-shd", v->name);
    struct bproc *shd = bfs__sup_find(m, name); /* first: it is a client of the bricks */
    if (shd && bfs__sup_stop(m, shd, e) < 0)
        rc = -1;
    for (int i = 0; i < v->nbricks; i++) {
        if (!bfs_pool_brick_is_mine(m, v, i))
            continue;
        struct bproc *p = bfs__sup_get(m, v, i);
        if (p && bfs__sup_stop(m, p, e) < 0)
            rc = -1;
    }
    return rc;
}

void bfs_sup_stop_unowned(struct bfs_mgmt *m, const struct bfs_volume *v)
{
    for (struct bproc *p = m->sup->procs; p; p = p->next) {
        if (p->kind != BP_BRICK || strcmp(p->vol, v->name) != 0 || p->state == BP_DOWN)
            continue;
        int idx = bfs_volume_brick_index(v, p->name);
        const char *why = idx < 0 ? "is no longer a brick of the volume"
                          : !bfs_pool_brick_is_mine(m, v, idx) ? "belongs to another node now"
                          : p->state == BP_RUNNING && p->port && v->bricks[idx].port &&
                                    p->port != v->bricks[idx].port ? "was replaced"
                          : NULL;
        if (!why)
            continue;
        struct bfs_err e;
        bfs_log(MGMT_LOG, BFS_LOG_INFO, "pool: brick %s %s: stopping it", p->name, why);
        if (p->state == BP_WAIT)
            p->state = BP_DOWN;
        else if (bfs__sup_stop(m, p, &e) < 0)
            bfs_log(MGMT_LOG, BFS_LOG_ERROR, "%s", e.msg);
    }
}

/* /proc/PID/cmdline is BIN ... OPT VAL ... with BIN's base name that of
 * bin (the brick program, the self-heal daemon, the rebalance process). */
bool bfs__cmdline_matches(pid_t pid, const char *bin, const char *opt, const char *val)
{
    char path[64], buf[8192];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = 0;
    const char *base = strrchr(bin, '/') ? strrchr(bin, '/') + 1 : bin;
    const char *a0 = strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf; /* within argv[0] */
    if (strcmp(a0, base) != 0)
        return false;
    for (char *a = buf; a < buf + n; a += strlen(a) + 1)
        if (strcmp(a, opt) == 0 && a + strlen(a) + 1 < buf + n &&
            strcmp(a + strlen(a) + 1, val) == 0)
            return true;
    return false;
}

static pid_t scan_proc(const char *bin, const char *volfile)
{
    DIR *d = opendir("/proc");
    pid_t found = 0;
    struct dirent *de;
    while (d && !found && (de = readdir(d))) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        pid_t pid = (pid_t)atoi(de->d_name);
        if (pid != getpid() && bfs__cmdline_matches(pid, bin, "--volfile", volfile))
            found = pid;
    }
    if (d)
        closedir(d);
    return found;
}

/* A running process of brick p, as a pidfd checked after opening (the pid
 * cannot be recycled under a pidfd), or -1. */
int bfs__sup_find_running(struct bfs_mgmt *m, struct bproc *p, const char *bin, pid_t *pid_out)
{
    (void)m;
    char *txt = NULL;
    pid_t pid = 0;
    if (bfs_read_small(p->pidfile, &txt) == 0) {
        pid = (pid_t)atoi(txt);
        free(txt);
    }
    if (pid <= 0 || !bfs__cmdline_matches(pid, bin, "--volfile", p->volfile))
        pid = scan_proc(bin, p->volfile);
    if (pid <= 0)
        return -1;
    int fd = pidfd_open(pid, 0);
    if (fd < 0)
        return -1;
    if (!bfs__cmdline_matches(pid, bin, "--volfile", p->volfile)) {
        close(fd);
        return -1;
    }
    *pid_out = pid;
    return fd;
}

static void reconcile_brick(struct bfs_mgmt *m, struct bfs_volume *v, int idx)
{
    struct bproc *p = bfs__sup_get(m, v, idx);
    struct bfs_err e;
    pid_t pid = 0;
    if (!p)
        return;
    int fd = bfs__sup_find_running(m, p, m->brick_bin, &pid);
    if (fd >= 0) {
        p->pid = pid;
        p->pidfd = fd;
        p->child = false;
        p->state = BP_RUNNING;
        p->port = v->bricks[idx].port;
        p->started_ms = bfs_now_ms();
        char txt[32];
        snprintf(txt, sizeof(txt), "%d\n", (int)pid);
        bfs_write_file_atomic(p->pidfile, txt, strlen(txt));
        bfs__sup_wake(m);
        if (v->status == BFS_VOL_STARTED) {
            bfs_log(MGMT_LOG, BFS_LOG_INFO, "adopted brick %s, pid %d", p->name, (int)pid);
        } else {
            bfs_log(MGMT_LOG, BFS_LOG_INFO, "brick %s (pid %d) runs but volume %s is %s: "
                    "stopping it", p->name, (int)pid, v->name, bfs_vol_status_name(v->status));
            if (bfs__sup_stop(m, p, &e) < 0)
                bfs_log(MGMT_LOG, BFS_LOG_ERROR, "%s", e.msg);
        }
    } else if (v->status == BFS_VOL_STARTED) {
        if (bfs__sup_spawn(m, v, p, &e) < 0) {
            bfs_log(MGMT_LOG, BFS_LOG_ERROR, "brick %s: start failed: %s; will retry",
                    p->name, e.msg);
            p->state = BP_WAIT;
            p->restart_at_ms = bfs_now_ms() + p->backoff_ms;
            bfs__sup_wake(m);
        }
    }
}

void bfs_sup_reconcile(struct bfs_mgmt *m)
{
    struct bfs_volume **vols;
    int n;
    if (bfs_volume_list(m, &vols, &n) < 0) {
        bfs_log(MGMT_LOG, BFS_LOG_ERROR, "cannot list volumes to reconcile");
        return;
    }
    for (int i = 0; i < n; i++) {
        bfs_bricks_remark(vols[i]);
        for (int b = 0; b < vols[i]->nbricks; b++)
            if (bfs_pool_brick_is_mine(m, vols[i], b))
                reconcile_brick(m, vols[i], b);
        bfs_sup_shd_reconcile(m, vols[i]);
    }
    bfs_volume_list_free(vols, n);
}
