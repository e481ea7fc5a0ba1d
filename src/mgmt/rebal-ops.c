/*
 * rebal-ops.c — `volume rebalance`: the operations (fix-layout, start, stop,
 * pause, resume, status) and the supervision of the per-node rebalance
 * process brickfs-rebalance (docs/design/rebalance.md).
 *
 * The volume document holds the desired state (rebalance.state); the
 * process writes what it is doing to RUN/rebalance/VOL.status. One struct
 * rproc per volume with a process, in m->rebal, from spawn (or adoption at
 * startup) until its exit was handled; a detached watcher thread per
 * process polls its pidfd and, with m->lock held, handles the exit:
 * completed -> the document says so and the previous table is dropped
 * (clients switch graphs); a crash while still wanted -> restarted after a
 * backoff (it resumes from its checkpoint); stopped/paused -> nothing.
 * Everything here runs with m->lock held unless it says otherwise.
 *
 * In a pool one node runs a volume's rebalance: the document names it
 * (rebalance.node), chosen when it starts or resumes: the node given the
 * command if it owns bricks of the volume, else the owner of its first
 * brick. The others leave it alone; that node's pool-sync starts or stops
 * the process (bfs_rebal_sync) when the document changes.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "core/log.h"
#include "mgmt/layout.h"
#include "mgmt/mgmt.h"
#include "mgmt/pool.h"
#include "mgmt/supervisor.h"

/* Seconds between a rebalance's start (its layout change) and its first
 * move: three volfile polls of a mount with the default `volfile-poll`
 * (2 s), so that mounts have switched to the new table. */
#define BFS_REBAL_SETTLE_S 6

struct rproc {
    char vol[BFS_VOLNAME_MAX + 1];
    char id[40];
    pid_t pid;
    int pidfd;
    bool child;
    bool exited;
    unsigned backoff_ms;
    struct rproc *next;
};

struct bfs_rebal {
    struct rproc *procs;
};

static void paths(struct bfs_mgmt *m, const char *vol, const char *what, char *buf, size_t len)
{
    if (strcmp(what, "state") == 0)
        snprintf(buf, len, "%s/rebalance/%s", m->state_dir, vol);
    else if (strcmp(what, "log") == 0)
        snprintf(buf, len, "%s/rebalance/%s.log", m->log_dir, vol);
    else if (strcmp(what, "volfile") == 0)
        snprintf(buf, len, "%s/volfiles/%s/client.vol", m->state_dir, vol);
    else
        snprintf(buf, len, "%s/rebalance/%s.%s", m->run_dir, vol, what);
}

static struct rproc *rfind(struct bfs_mgmt *m, const char *vol)
{
    if (!m->rebal)
        return NULL;
    for (struct rproc *p = m->rebal->procs; p; p = p->next)
        if (strcmp(p->vol, vol) == 0 && !p->exited)
            return p;
    return NULL;
}

static void rforget(struct bfs_mgmt *m, struct rproc *r)
{
    for (struct rproc **pp = &m->rebal->procs; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            free(r);
            return;
        }
}

/* The process's status file (NULL when none). */
static struct json_object *read_status(struct bfs_mgmt *m, const char *vol)
{
    char path[4200], *txt = NULL;
    paths(m, vol, "status", path, sizeof(path));
    if (bfs_read_small(path, &txt) < 0)
        return NULL;
    struct json_object *j = json_tokener_parse(txt);
    free(txt);
    return j;
}

static const char *status_state(struct json_object *st)
{
    struct json_object *o;
    if (st && json_object_object_get_ex(st, "state", &o))
        return json_object_get_string(o);
    return "";
}

static void *watch(void *arg);
static bool runs_here(struct bfs_mgmt *m, const struct bfs_volume *v);

struct watch_arg {
    struct bfs_mgmt *m;
    struct rproc *r;
};

/* A detached thread (watch) that waits for r's process to end. */
static void watch_start(struct bfs_mgmt *m, struct rproc *r)
{
    pthread_t th;
    struct watch_arg *arg = malloc(sizeof(*arg));
    if (!arg)
        return;
    arg->m = m;
    arg->r = r;
    if (pthread_create(&th, NULL, watch, arg) == 0)
        pthread_detach(th);
    else
        free(arg);
}

static int spawn_proc(struct bfs_mgmt *m, struct bfs_volume *v, struct bfs_err *e)
{
    char bin[4200], volfile[4200], state[4200], status[4200], log[4200], pidf[4200], lv[32];
    char dir[4200], *slash;
    snprintf(bin, sizeof(bin), "%s", m->brick_bin);
    slash = strrchr(bin, '/');
    snprintf(slash ? slash + 1 : bin, sizeof(bin) - (size_t)(slash ? slash + 1 - bin : 0),
             "brickfs-rebalance");
    const char *envbin = getenv("BRICKFSD_REBALANCE_BIN");
    if (envbin && *envbin)
        snprintf(bin, sizeof(bin), "%s", envbin);
    if (bfs_volgen_write(m, v, e) < 0)
        return -1;
    paths(m, v->name, "volfile", volfile, sizeof(volfile));
    paths(m, v->name, "state", state, sizeof(state));
    paths(m, v->name, "status", status, sizeof(status));
    paths(m, v->name, "log", log, sizeof(log));
    paths(m, v->name, "pid", pidf, sizeof(pidf));
    snprintf(dir, sizeof(dir), "%s/rebalance", m->run_dir);
    bfs_mkdir_p(dir, 0755);
    snprintf(dir, sizeof(dir), "%s/rebalance", m->log_dir);
    bfs_mkdir_p(dir, 0755);
    bfs_mkdir_p(state, 0755);
    snprintf(lv, sizeof(lv), "%lld", (long long)v->rebal.layout_version);
    /* mounts switch to the new table within a few volfile polls of the
     * start (docs/design/rebalance.md, "Settling"); a resumed run started
     * long ago does not wait */
    char settle[32];
    snprintf(settle, sizeof(settle), "%lld", (long long)v->rebal.started + BFS_REBAL_SETTLE_S);
    char *argv[] = {bin, (char *)"--volume", v->name, (char *)"--volfile", volfile,
                    (char *)"--state", state, (char *)"--status", status, (char *)"--id",
                    v->rebal.id, (char *)"--layout-version", lv, (char *)"--kind",
                    v->rebal.kind, (char *)"--settle-until", settle, NULL};
    pid_t pid;
    int rc = -bfs__spawn_daemon(argv, log, &pid);
    if (rc != 0)
        return bfs_fail(e, 500, "cannot run %s: %s", bin, strerror(rc));
    int fd = pidfd_open(pid, 0);
    struct rproc *r = calloc(1, sizeof(*r));
    if (fd < 0 || !r) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        if (fd >= 0)
            close(fd);
        free(r);
        return bfs_fail(e, 500, "cannot watch the rebalance process: %s", strerror(ENOMEM));
    }
    char txt[32];
    snprintf(txt, sizeof(txt), "%d\n", (int)pid);
    bfs_write_file_atomic(pidf, txt, strlen(txt));
    snprintf(r->vol, sizeof(r->vol), "%s", v->name);
    snprintf(r->id, sizeof(r->id), "%s", v->rebal.id);
    r->pid = pid;
    r->pidfd = fd;
    r->child = true;
    r->backoff_ms = 1000;
    struct rproc *old = NULL;
    for (struct rproc *p = m->rebal->procs; p; p = p->next)
        if (strcmp(p->vol, v->name) == 0)
            old = p;
    if (old) /* a restart: keep the backoff */
        r->backoff_ms = old->backoff_ms;
    r->next = m->rebal->procs;
    m->rebal->procs = r;
    watch_start(m, r);
    bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s: rebalance %s started, pid %d (log: %s)", v->name,
            v->rebal.id, (int)pid, log);
    return 0;
}

/* The process of r exited (m->lock held). */
static void handle_exit(struct bfs_mgmt *m, struct rproc *r, int wst)
{
    struct bfs_volume *v = NULL;
    struct json_object *st = read_status(m, r->vol);
    const char *s = status_state(st);
    char how[64] = "status unknown";
    if (WIFEXITED(wst))
        snprintf(how, sizeof(how), "exit status %d", WEXITSTATUS(wst));
    else if (WIFSIGNALED(wst))
        snprintf(how, sizeof(how), "killed by signal %d", WTERMSIG(wst));
    bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s: rebalance process %d ended (%s, state %s)",
            r->vol, (int)r->pid, how, s);
    r->exited = true;
    char pidf[4200];
    paths(m, r->vol, "pid", pidf, sizeof(pidf));
    unlink(pidf);
    if (bfs_volume_load(m, r->vol, &v) < 0 || strcmp(v->rebal.id, r->id) != 0)
        goto out;
    if (strcmp(s, "completed") == 0 && strcmp(v->rebal.state, "running") == 0) {
        snprintf(v->rebal.state, sizeof(v->rebal.state), "completed");
        if (bfs_layout_finish(v) < 0 || bfs_volume_save(m, v) < 0)
            bfs_log(MGMT_LOG, BFS_LOG_ERROR, "volume %s: cannot record the completed rebalance",
                    v->name);
        struct bfs_err e;
        bfs_volgen_write(m, v, &e);
        bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s: rebalance %s completed", v->name, r->id);
    } else if (strcmp(s, "failed") == 0 && strcmp(v->rebal.state, "running") == 0) {
        snprintf(v->rebal.state, sizeof(v->rebal.state), "failed");
        bfs_volume_save(m, v);
    } else if (strcmp(v->rebal.state, "running") == 0 && v->status == BFS_VOL_STARTED) {
        /* crashed or killed while wanted: again, from its checkpoint */
        unsigned delay = r->backoff_ms;
        r->backoff_ms = r->backoff_ms * 2 > 30000 ? 30000 : r->backoff_ms * 2;
        bfs_log(MGMT_LOG, BFS_LOG_WARNING, "volume %s: rebalance process died (%s); "
                "restarting in %u ms", v->name, how, delay);
        pthread_mutex_unlock(&m->lock);
        usleep(delay * 1000u);
        pthread_mutex_lock(&m->lock);
        bfs_volume_free(v);
        v = NULL;
        struct bfs_err e;
        if (bfs_volume_load(m, r->vol, &v) == 0 && strcmp(v->rebal.id, r->id) == 0 &&
            strcmp(v->rebal.state, "running") == 0 && !rfind(m, r->vol) &&
            spawn_proc(m, v, &e) < 0)
            bfs_log(MGMT_LOG, BFS_LOG_ERROR, "volume %s: rebalance restart: %s", r->vol, e.msg);
    }
out:
    bfs_volume_free(v);
    json_object_put(st);
}

static void *watch(void *arg)
{
    struct watch_arg *a = arg;
    struct bfs_mgmt *m = a->m;
    struct rproc *r = a->r;
    free(a);
    struct pollfd pf = {.fd = r->pidfd, .events = POLLIN};
    while (poll(&pf, 1, -1) < 0 && errno == EINTR)
        ;
    int wst = 0;
    if (r->child)
        waitpid(r->pid, &wst, 0);
    else
        wst = 0xff00; /* adopted: exit status not ours to read */
    close(r->pidfd);
    pthread_mutex_lock(&m->lock);
    handle_exit(m, r, wst);
    rforget(m, r);
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

/* SIGTERM to the process of vol and wait for its exit (KILL after the stop timeout). */
static void stop_proc(struct bfs_mgmt *m, const char *vol)
{
    struct rproc *r = rfind(m, vol);
    if (!r)
        return;
    pid_t pid = r->pid;
    kill(pid, SIGTERM);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += m->stop_timeout_ms / 1000 + 1;
    bool killed = false;
    while (rfind(m, vol) && rfind(m, vol)->pid == pid) {
        if (pthread_cond_timedwait(&m->cond, &m->lock, &dl) == ETIMEDOUT) {
            if (killed)
                break;
            kill(pid, SIGKILL);
            killed = true;
            dl.tv_sec += 5;
        }
    }
}

int bfs_rebal_init(struct bfs_mgmt *m)
{
    m->rebal = calloc(1, sizeof(*m->rebal));
    return m->rebal ? 0 : -ENOMEM;
}

void bfs_rebal_reconcile(struct bfs_mgmt *m)
{
    struct bfs_volume **vols;
    int n;
    if (bfs_volume_list(m, &vols, &n) < 0)
        return;
    for (int i = 0; i < n; i++) {
        struct bfs_volume *v = vols[i];
        if (strcmp(v->rebal.state, "running") != 0 || v->status != BFS_VOL_STARTED ||
            !runs_here(m, v))
            continue;
        char pidf[4200], *txt = NULL;
        paths(m, v->name, "pid", pidf, sizeof(pidf));
        pid_t pid = 0;
        if (bfs_read_small(pidf, &txt) == 0) {
            pid = (pid_t)atoi(txt);
            free(txt);
        }
        int fd = pid > 0 ? pidfd_open(pid, 0) : -1;
        struct rproc *r = NULL;
        if (fd >= 0 && bfs__cmdline_matches(pid, "brickfs-rebalance", "--volume", v->name) &&
            (r = calloc(1, sizeof(*r)))) {
            snprintf(r->vol, sizeof(r->vol), "%s", v->name);
            snprintf(r->id, sizeof(r->id), "%s", v->rebal.id);
            r->pid = pid;
            r->pidfd = fd;
            r->backoff_ms = 1000;
            r->next = m->rebal->procs;
            m->rebal->procs = r;
            watch_start(m, r);
            bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s: adopted rebalance process %d", v->name,
                    (int)pid);
            continue;
        }
        if (fd >= 0)
            close(fd);
        struct bfs_err e;
        if (spawn_proc(m, v, &e) < 0)
            bfs_log(MGMT_LOG, BFS_LOG_ERROR, "volume %s: rebalance restart: %s", v->name, e.msg);
    }
    bfs_volume_list_free(vols, n);
}

/* Does v's rebalance run on this node? A document without rebalance.node
 * (single node, or from before pools): the owner of the first brick. */
static bool runs_here(struct bfs_mgmt *m, const struct bfs_volume *v)
{
    if (v->rebal.node[0])
        return strcmp(v->rebal.node, m->node_uuid) == 0;
    return v->nbricks > 0 && bfs_pool_brick_is_mine(m, v, 0);
}

/* The node to run a rebalance of v that starts now (see the top). */
static void pick_node(struct bfs_mgmt *m, struct bfs_volume *v)
{
    v->rebal.node[0] = 0;
    if (!bfs_pool_enabled(m))
        return;
    const char *n = bfs_pool_owns_bricks(m, v) ? m->node_uuid : NULL;
    for (int i = 0; !n && i < v->nbricks; i++)
        if (v->bricks[i].node[0])
            n = v->bricks[i].node;
    snprintf(v->rebal.node, sizeof(v->rebal.node), "%s", n ? n : m->node_uuid);
}

/* Starts v's process if it runs here, else leaves it to its node. */
static int spawn_here(struct bfs_mgmt *m, struct bfs_volume *v, struct bfs_err *e)
{
    if (runs_here(m, v))
        return spawn_proc(m, v, e);
    bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s: rebalance %s runs on node %s", v->name,
            v->rebal.id, v->rebal.node);
    return 0;
}

void bfs_rebal_sync(struct bfs_mgmt *m, const struct bfs_volume *v)
{
    bool want = strcmp(v->rebal.state, "running") == 0 && v->status == BFS_VOL_STARTED &&
                runs_here(m, v);
    struct rproc *r = rfind(m, v->name);
    if (want && !r) {
        struct bfs_volume *c;
        struct bfs_err e;
        if (bfs_volume_load(m, v->name, &c) < 0) /* spawn_proc wants a mutable copy */
            return;
        if (spawn_proc(m, c, &e) < 0)
            bfs_log(MGMT_LOG, BFS_LOG_ERROR, "volume %s: rebalance: %s", v->name, e.msg);
        bfs_volume_free(c);
    } else if (!want && r && strcmp(v->rebal.id, r->id) == 0 &&
               strcmp(v->rebal.state, "running") != 0) {
        stop_proc(m, v->name); /* stopped or paused from another node */
    }
}

/* ---- status ---- */

static int64_t jint(struct json_object *j, const char *k)
{
    struct json_object *o;
    return j && json_object_object_get_ex(j, k, &o) ? json_object_get_int64(o) : 0;
}

struct json_object *bfs_rebal_status_json(struct bfs_mgmt *m, const struct bfs_volume *v)
{
    struct json_object *j = json_object_new_object(), *nodes = json_object_new_array();
    struct json_object *st = v->rebal.id[0] ? read_status(m, v->name) : NULL;
    const char *desired = v->rebal.state, *ps = status_state(st), *state;
    if (!v->rebal.id[0])
        state = "not-started";
    else if (strcmp(desired, "running") == 0)
        state = strcmp(ps, "completed") == 0 || strcmp(ps, "failed") == 0 ? ps : "in-progress";
    else if (strcmp(desired, "paused") == 0)
        state = "paused";
    else if (strcmp(desired, "stopped") == 0)
        state = "stopped";
    else
        state = desired;
    json_object_object_add(j, "volume", json_object_new_string(v->name));
    json_object_object_add(j, "id", json_object_new_string(v->rebal.id));
    json_object_object_add(j, "kind", json_object_new_string(v->rebal.kind));
    json_object_object_add(j, "state", json_object_new_string(state));
    json_object_object_add(j, "layout_version", json_object_new_int64(v->layout_version));
    json_object_object_add(j, "layout_pending",
                           json_object_new_boolean(v->layout_prev && v->layout_prev[0]));
    struct json_object *n = json_object_new_object();
    json_object_object_add(n, "node", json_object_new_string(v->rebal.node[0] ? v->rebal.node
                                                                            : m->node_uuid));
    json_object_object_add(n, "state", json_object_new_string(state));
    static const char *const keys[] = {"files_scanned", "files_moved", "files_skipped",
                                       "files_failed", "bytes_moved", "elapsed_s", "eta_s",
                                       "dirs_done", "runs"};
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
        json_object_object_add(n, keys[k], json_object_new_int64(jint(st, keys[k])));
    struct json_object *o;
    double rf = st && json_object_object_get_ex(st, "rate_files_s", &o) ? json_object_get_double(o) : 0;
    double rm = st && json_object_object_get_ex(st, "rate_mb_s", &o) ? json_object_get_double(o) : 0;
    json_object_object_add(n, "rate_files_s", json_object_new_double(rf));
    json_object_object_add(n, "rate_mb_s", json_object_new_double(rm));
    struct rproc *r = rfind(m, v->name);
    json_object_object_add(n, "pid", json_object_new_int(r ? r->pid : 0));
    json_object_array_add(nodes, n);
    json_object_object_add(j, "nodes", nodes);
    json_object_put(st);
    return j;
}

/* ---- operations ---- */

int bfs__rebal_begin(struct bfs_mgmt *m, struct bfs_volume *v, const char *kind,
                     struct bfs_err *e)
{
    char path[4200];
    bfs_uuid_generate(v->rebal.id);
    snprintf(v->rebal.kind, sizeof(v->rebal.kind), "%s", kind);
    snprintf(v->rebal.state, sizeof(v->rebal.state), "running");
    v->rebal.started = (int64_t)time(NULL);
    v->rebal.layout_version = v->layout_version;
    pick_node(m, v);
    paths(m, v->name, "status", path, sizeof(path));
    unlink(path);
    int rc = bfs_volume_save(m, v);
    if (rc < 0)
        return bfs_fail(e, 500, "cannot save volume %s: %s", v->name, strerror(-rc));
    return spawn_here(m, v, e);
}

void bfs__rebal_stop(struct bfs_mgmt *m, const char *vol)
{
    stop_proc(m, vol);
}

void bfs__rebal_forget(struct bfs_mgmt *m, const char *vol)
{
    static const char *const files[] = {"checkpoint", "counters", "moves.log"};
    char dir[4200], path[4400];
    paths(m, vol, "state", dir, sizeof(dir));
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    paths(m, vol, "status", path, sizeof(path));
    unlink(path);
}

static int pending_check(const struct bfs_volume *v, struct bfs_err *e)
{
    if (v->status != BFS_VOL_STARTED)
        return bfs_fail(e, 409, "volume %s is not started", v->name);
    if (bfs_volume_nsubvols(v) < 2)
        return bfs_fail(e, 400, "volume %s has one %s: there is nothing to rebalance",
                        v->name, v->replica ? "replica set" : "brick");
    return 0;
}

static int rebal_locked(struct bfs_mgmt *m, const char *name, const char *action,
                        struct json_object **out, struct bfs_err *e)
{
    struct bfs_volume *v;
    if (bfs_volume_get(m, name, &v, e) < 0)
        return -1;
    int rc = 0;
    bool running = strcmp(v->rebal.state, "running") == 0;
    uint64_t w[DHT_MAX_SUBVOLS];
    if (strcmp(action, "fix-layout") == 0 || strcmp(action, "start") == 0) {
        if ((rc = pending_check(v, e)) < 0)
            goto out;
        if (running) {
            rc = bfs_fail(e, 409, "a rebalance of volume %s is already running (volume "
                          "rebalance %s status)", name, name);
            goto out;
        }
        if (v->nremove) {
            rc = bfs_fail(e, 409, "volume %s is draining bricks (remove-brick); see volume "
                          "remove-brick %s ... status", name, name);
            goto out;
        }
        bfs_layout_weights(v, w);
        bool pending = v->layout_prev && v->layout_prev[0];
        long moved = 0;
        if (!pending || strcmp(action, "fix-layout") == 0) {
            if (pending) {
                rc = bfs_fail(e, 409, "volume %s: the files of the last layout change have "
                              "not moved yet; run 'volume rebalance %s start' first", name, name);
                goto out;
            }
            if ((moved = bfs_layout_fix(v, w, e)) < 0) {
                rc = -1;
                goto out;
            }
        }
        if (strcmp(action, "fix-layout") == 0) {
            if (moved == 0) {
                rc = bfs_fail(e, 409, "volume %s: the layout is already balanced", name);
                goto out;
            }
            snprintf(v->rebal.state, sizeof(v->rebal.state), "completed");
            snprintf(v->rebal.kind, sizeof(v->rebal.kind), "fix-layout");
            bfs_uuid_generate(v->rebal.id);
            v->rebal.started = (int64_t)time(NULL);
            v->rebal.layout_version = v->layout_version;
            if ((rc = bfs_volume_save(m, v)) < 0) {
                rc = bfs_fail(e, 500, "cannot save volume %s: %s", name, strerror(-rc));
                goto out;
            }
            bfs_volgen_write(m, v, e);
            bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s: fix-layout: %ld buckets moved, layout "
                    "version %lld", name, moved, (long long)v->layout_version);
        } else if (!pending && moved == 0) {
            rc = bfs_fail(e, 409, "volume %s: the layout is balanced and no file is out of "
                          "place: nothing to rebalance", name);
            goto out;
        } else {
            /* same layout version as a stopped/paused one: its checkpoint goes on */
            bool resume = (strcmp(v->rebal.state, "stopped") == 0 ||
                           strcmp(v->rebal.state, "paused") == 0) &&
                          v->rebal.layout_version == v->layout_version;
            if (resume) {
                snprintf(v->rebal.state, sizeof(v->rebal.state), "running");
                pick_node(m, v);
                if ((rc = bfs_volume_save(m, v)) < 0 || (rc = spawn_here(m, v, e)) < 0)
                    goto out;
            } else if ((rc = bfs__rebal_begin(m, v, "migrate", e)) < 0) {
                goto out;
            }
        }
    } else if (strcmp(action, "stop") == 0 || strcmp(action, "pause") == 0) {
        if (!running) {
            rc = bfs_fail(e, 409, "no rebalance of volume %s is running", name);
            goto out;
        }
        snprintf(v->rebal.state, sizeof(v->rebal.state), "%s",
                 action[0] == 's' ? "stopped" : "paused");
        if ((rc = bfs_volume_save(m, v)) < 0) {
            rc = bfs_fail(e, 500, "cannot save volume %s: %s", name, strerror(-rc));
            goto out;
        }
        stop_proc(m, name);
    } else if (strcmp(action, "resume") == 0) {
        if (strcmp(v->rebal.state, "paused") != 0 && strcmp(v->rebal.state, "stopped") != 0) {
            rc = bfs_fail(e, 409, "no paused or stopped rebalance of volume %s to resume", name);
            goto out;
        }
        if ((rc = pending_check(v, e)) < 0)
            goto out;
        snprintf(v->rebal.state, sizeof(v->rebal.state), "running");
        pick_node(m, v);
        if ((rc = bfs_volume_save(m, v)) < 0 || (rc = spawn_here(m, v, e)) < 0)
            goto out;
    } else {
        rc = bfs_fail(e, 400, "unknown rebalance action '%s' (fix-layout, start, stop, pause, "
                      "resume, status)", action);
        goto out;
    }
    *out = bfs_rebal_status_json(m, v);
out:
    if (rc < 0 && !e->msg[0])
        bfs_fail(e, 500, "volume %s: rebalance %s failed", name, action);
    bfs_volume_free(v);
    return rc < 0 ? -1 : 0;
}

int bfs_op_rebalance(struct bfs_mgmt *m, const char *name, const char *action,
                     struct json_object **out, struct bfs_err *e)
{
    pthread_mutex_lock(&m->oplock);
    pthread_mutex_lock(&m->lock);
    int rc = rebal_locked(m, name, action ? action : "", out, e);
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_unlock(&m->oplock);
    return rc;
}

int bfs_op_rebalance_status(struct bfs_mgmt *m, const char *name, struct json_object **out,
                            struct bfs_err *e)
{
    struct bfs_volume *v;
    pthread_mutex_lock(&m->lock);
    int rc = bfs_volume_get(m, name, &v, e);
    if (rc == 0) {
        *out = bfs_rebal_status_json(m, v);
        bfs_volume_free(v);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}
