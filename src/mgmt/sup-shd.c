/*
 * sup-shd.c — the self-heal daemon of each replicated or dispersed volume
 * (docs/design/management.md, "Self-heal daemon"): one `brickfs-shd` per
 * started replicated or dispersed volume whose cluster.self-heal-daemon is on, spawned,
 * watched and restarted with backoff by the same supervisor as the bricks
 * (a struct bproc of kind BP_SHD named VOL-shd, which lives like a brick's:
 * from first use until the volume is deleted or brickfsd stops). In a
 * pool, each node that owns bricks of the volume runs one (pool-sync.c
 * calls bfs_sup_shd_sync on every change of the volumes).
 *
 *   brickfs-shd -f --volfile STATE/volfiles/VOL/shd.vol
 *               --state-file STATE/shd/VOL.json --log-file LOG/shd/VOL.log
 *               --interval SECONDS
 *
 * shd.vol is the volume's client volfile as the daemon wants it
 * (bfs_volgen_shd: no invalidations from the bricks), written before each
 * spawn; its path is what identifies the daemon in /proc when brickfsd
 * adopts it after a restart (one-shot runs use client.vol, so they are
 * never taken for the daemon). Everything here runs with m->lock held.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <unistd.h>

#include "core/event.h"
#include "core/log.h"
#include "core/options.h"
#include "mgmt/mgmt.h"
#include "mgmt/pool.h"
#include "mgmt/supervisor.h"

#define DEFAULT_INTERVAL 600

bool bfs_shd_wanted(const struct bfs_volume *v)
{
    if (v->status != BFS_VOL_STARTED || (v->replica <= 0 && v->disperse <= 0))
        return false;
    const char *on = bfs_volume_opt(v, BFS_OPT_SHD);
    bool b = true;
    if (on && bfs_parse_bool(on, &b) < 0)
        b = true; /* validated at set time; an odd stored value keeps the default */
    return b;
}

bool bfs_shd_wanted_here(struct bfs_mgmt *m, const struct bfs_volume *v)
{
    /* In a pool, one daemon per node that owns bricks of the volume (as
     * GlusterFS does): a node that is down does not stop the others'
     * heals; none on a node without bricks of it (docs/design/pool.md). */
    return bfs_shd_wanted(v) && bfs_pool_owns_bricks(m, v);
}

int bfs_shd_interval(const struct bfs_volume *v)
{
    const char *s = bfs_volume_opt(v, BFS_OPT_HEAL_INTERVAL);
    int64_t n = 0;
    if (!s || bfs_parse_int(s, &n) < 0 || n < 1 || n > 86400)
        return DEFAULT_INTERVAL;
    return (int)n;
}

void bfs_shd_paths(struct bfs_mgmt *m, const char *vol, char *volfile, char *statefile,
                   char *logfile, char *pidfile, size_t len)
{
    if (volfile)
        snprintf(volfile, len, "%s/volfiles/%s/shd.vol", m->state_dir, vol);
    if (statefile)
        snprintf(statefile, len, "%s/shd/%s.json", m->state_dir, vol);
    if (logfile)
        snprintf(logfile, len, "%s/shd/%s.log", m->log_dir, vol);
    if (pidfile)
        snprintf(pidfile, len, "%s/shd/%s.pid", m->run_dir, vol);
}

int bfs__sup_spawn_shd(struct bfs_mgmt *m, const struct bfs_volume *v, struct bproc *p,
                       struct bfs_err *e)
{
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/volfiles/%s", m->state_dir, v->name);
    int rc = bfs_mkdir_p(dir, 0755);
    if (rc < 0)
        return bfs_fail(e, 500, "cannot create %s: %s", dir, strerror(-rc));
    if (bfs_volgen_write_shd(m, v, p->volfile, e) < 0)
        return -1;
    char interval[16];
    p->interval = bfs_shd_interval(v);
    snprintf(interval, sizeof(interval), "%d", p->interval);
    char *argv[] = {m->shd_bin, (char *)"-f", (char *)"--volfile", p->volfile,
                    (char *)"--state-file", p->statefile, (char *)"--log-file", p->logfile,
                    (char *)"--interval", interval, NULL};
    pid_t pid;
    rc = bfs__spawn_daemon(argv, p->logfile, &pid);
    if (rc < 0)
        return bfs_fail(e, 500, "cannot run %s: %s", m->shd_bin, strerror(-rc));
    if (bfs__sup_track(m, p, pid, e) < 0)
        return -1;
    bfs_log(MGMT_LOG, BFS_LOG_INFO, "self-heal daemon of volume %s started, pid %d, "
            "crawl every %d s (log: %s)", v->name, (int)pid, p->interval, p->logfile);
    bfs__sup_wake(m);
    return 0;
}

/* A start that failed: retried by the supervisor thread with backoff. */
static void retry_later(struct bfs_mgmt *m, struct bproc *p, const char *why)
{
    bfs_log(MGMT_LOG, BFS_LOG_ERROR, "self-heal daemon %s: %s; will retry in %u ms", p->name,
            why, p->backoff_ms);
    p->state = BP_WAIT;
    p->restart_at_ms = bfs_now_ms() + p->backoff_ms;
    p->backoff_ms = p->backoff_ms * 2 > 30000u ? 30000u : p->backoff_ms * 2;
    bfs__sup_wake(m);
}

static bool gone(const struct bproc *p)
{
    return p->state != BP_RUNNING && p->state != BP_STOPPING;
}

/* The whole of a text file (up to 1 MiB), malloc'd; NULL if unreadable. */
static char *read_whole(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    size_t cap = 8192, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0 || len + 1 < cap)
            break;
        char *nb = cap < (1u << 20) ? realloc(buf, cap * 2) : NULL;
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (buf)
        buf[len] = 0;
    fclose(f);
    return buf;
}

/* Why a running daemon must restart to match v, or NULL: it reads its
 * volfile and interval once, at start. */
static const char *stale(struct bfs_mgmt *m, const struct bfs_volume *v, const struct bproc *p)
{
    if (p->interval != bfs_shd_interval(v))
        return BFS_OPT_HEAL_INTERVAL " changed";
    char *want = bfs_volgen_shd(m, v), *have = read_whole(p->volfile);
    bool same = want && have && strcmp(want, have) == 0;
    free(want);
    free(have);
    return same || !want ? NULL : "its client volfile changed";
}

void bfs_sup_shd_sync(struct bfs_mgmt *m, const struct bfs_volume *v)
{
    bool want = bfs_shd_wanted_here(m, v);
    struct bproc *p = want ? bfs__sup_get_shd(m, v) : NULL;
    struct bfs_err e;
    if (!want) {
        char name[160];
        snprintf(name, sizeof(name), "%s-shd", v->name);
        p = bfs__sup_find(m, name);
        if (p && p->state != BP_DOWN) {
            bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s: stopping its self-heal daemon",
                    v->name);
            if (bfs__sup_stop(m, p, &e) < 0)
                bfs_log(MGMT_LOG, BFS_LOG_ERROR, "%s", e.msg);
        }
        return;
    }
    if (!p)
        return;
    const char *why = p->state == BP_RUNNING ? stale(m, v, p) : NULL;
    if (why) {
        bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s: %s; restarting the self-heal daemon",
                v->name, why);
        if (bfs__sup_stop(m, p, &e) < 0)
            bfs_log(MGMT_LOG, BFS_LOG_ERROR, "%s", e.msg);
    }
    if (p->state == BP_STOPPING)
        bfs__sup_wait(m, p, gone, bfs_now_ms() + (uint64_t)m->stop_timeout_ms + 5000);
    if (p->state == BP_RUNNING || p->state == BP_STOPPING)
        return;
    /* DOWN, or WAIT (a crash's backoff): start now, as `start force` does for bricks */
    if (bfs__sup_spawn_shd(m, v, p, &e) < 0)
        retry_later(m, p, e.msg);
}

void bfs_sup_shd_reconcile(struct bfs_mgmt *m, const struct bfs_volume *v)
{
    if (v->replica <= 0 && v->disperse <= 0)
        return; /* never had a daemon */
    struct bproc *p = bfs__sup_get_shd(m, v);
    pid_t pid = 0;
    if (!p)
        return;
    int fd = bfs__sup_find_running(m, p, m->shd_bin, &pid);
    if (fd >= 0) {
        p->pid = pid;
        p->pidfd = fd;
        p->child = false;
        p->state = BP_RUNNING;
        p->started_ms = bfs_now_ms();
        p->interval = bfs_shd_interval(v);
        char txt[32];
        snprintf(txt, sizeof(txt), "%d\n", (int)pid);
        bfs_write_file_atomic(p->pidfile, txt, strlen(txt));
        bfs__sup_wake(m);
        bfs_log(MGMT_LOG, BFS_LOG_INFO, "found the self-heal daemon of volume %s, pid %d",
                v->name, (int)pid);
    }
    bfs_sup_shd_sync(m, v); /* stops it if unwanted, starts it if missing */
}

void bfs_sup_shd_state(struct bfs_mgmt *m, const struct bfs_volume *v, struct bfs_shd_state *out)
{
    char name[160];
    snprintf(name, sizeof(name), "%s-shd", v->name);
    struct bproc *p = bfs__sup_find(m, name);
    memset(out, 0, sizeof(*out));
    out->enabled = bfs_shd_wanted(v);
    if (!p)
        return;
    out->pid = p->state == BP_RUNNING || p->state == BP_STOPPING ? p->pid : 0;
    out->online = bfs__sup_online(p);
    out->restarts = p->restarts;
}

int bfs_sup_shd_kick(struct bfs_mgmt *m, const struct bfs_volume *v)
{
    char name[160];
    snprintf(name, sizeof(name), "%s-shd", v->name);
    struct bproc *p = bfs__sup_find(m, name);
    if (!p || p->state != BP_RUNNING || p->pidfd < 0)
        return -ESRCH;
    if (pidfd_send_signal(p->pidfd, SIGUSR1, NULL, 0) < 0)
        return -errno;
    return p->pid;
}
