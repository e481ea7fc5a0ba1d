/*
 * main.c — brickfsd: settings from flags and environment, the lock on the
 * state folder, daemonising, and the startup and shutdown order:
 *
 *   stores and node uuid (pool.c) -> option catalogue -> supervisor thread ->
 *   reconciliation (adopt / start / stop bricks) -> HTTP -> ready
 *
 * Shutdown (SIGTERM, SIGINT) runs it backwards and leaves bricks running
 * (docs/design/management.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "mgmt/mgmt.h"
#include "mgmt/pool.h"
#include "mgmt/store.h"

static const char usage[] =
    "usage: brickfsd [--foreground] [--state-dir DIR] [--log-dir DIR] [--run-dir DIR]\n"
    "                [--listen HOST:PORT] [--brick-ports LO-HI] [--log-level LEVEL]\n"
    "                [--store local|etcd:URL[,URL...]] [--node-name NAME] [--advertise HOST:PORT]\n"
    "                [--help]\n"
    "\n"
    "The management daemon of brickfs: volumes, volfiles, brick ports and processes,\n"
    "and the REST API the brickfs command line speaks.\n"
    "\n"
    "  -f, --foreground     stay in the foreground (default: detach once listening)\n"
    "  --state-dir DIR      state: the store and volfiles      [$BRICKFSD_STATE_DIR, /var/lib/brickfs]\n"
    "  --log-dir DIR        brickfsd.log and bricks/*.log      [$BRICKFSD_LOG_DIR, /var/log/brickfs]\n"
    "  --run-dir DIR        pid and port files                 [$BRICKFSD_RUN_DIR, /run/brickfs]\n"
    "  --listen HOST:PORT   address of the REST API            [$BRICKFSD_LISTEN, 127.0.0.1:24100]\n"
    "  --brick-ports LO-HI  ports given to bricks              [$BRICKFSD_BRICK_PORTS, 24200-24999]\n"
    "  --log-level LEVEL    error, warning, info, debug, trace [info]\n"
    "  --store SPEC         pool store: local, or etcd:http://HOST:2379[,...] [$BRICKFSD_STORE,\n"
    "                       remembered after the first start; local]\n"
    "  --node-name NAME     this node's name in the pool       [$BRICKFSD_NODE_NAME, host name]\n"
    "  --advertise HOST:PORT  where peers reach this brickfsd  [$BRICKFSD_ADVERTISE, --listen]\n"
    "\n"
    "Also: $BRICKFSD_BRICK_BIN (brick program), $BRICKFSD_SHD_BIN (self-heal daemon),\n"
    "$BRICKFSD_STOP_TIMEOUT, $BRICKFSD_START_TIMEOUT and $BRICKFSD_HEAL_TIMEOUT (seconds).\n"
    "See docs/design/management.md, docs/design/pool.md and docs/API.md.\n";

struct settings {
    bool foreground;
    const char *state, *log, *run, *listen, *ports, *level;
    struct bfs_pool_cfg pool;
};

static const char *env_or(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && *v ? v : def;
}

static int parse_args(int argc, char **argv, struct settings *s)
{
    static const struct option opts[] = {
        {"foreground", no_argument, NULL, 'f'}, {"state-dir", required_argument, NULL, 's'},
        {"log-dir", required_argument, NULL, 'l'}, {"run-dir", required_argument, NULL, 'r'},
        {"listen", required_argument, NULL, 'L'}, {"brick-ports", required_argument, NULL, 'p'},
        {"log-level", required_argument, NULL, 'v'}, {"help", no_argument, NULL, 'h'},
        {"store", required_argument, NULL, 'S'}, {"node-name", required_argument, NULL, 'N'},
        {"advertise", required_argument, NULL, 'A'},
        {NULL, 0, NULL, 0},
    };
    s->state = env_or("BRICKFSD_STATE_DIR", "/var/lib/brickfs");
    s->log = env_or("BRICKFSD_LOG_DIR", "/var/log/brickfs");
    s->run = env_or("BRICKFSD_RUN_DIR", "/run/brickfs");
    s->listen = env_or("BRICKFSD_LISTEN", "127.0.0.1:24100");
    s->ports = env_or("BRICKFSD_BRICK_PORTS", "24200-24999");
    s->level = "info";
    s->pool.store = env_or("BRICKFSD_STORE", NULL);
    s->pool.name = env_or("BRICKFSD_NODE_NAME", NULL);
    s->pool.advertise = env_or("BRICKFSD_ADVERTISE", NULL);
    int c;
    while ((c = getopt_long(argc, argv, "fh", opts, NULL)) != -1) {
        switch (c) {
        case 'f': s->foreground = true; break;
        case 's': s->state = optarg; break;
        case 'l': s->log = optarg; break;
        case 'r': s->run = optarg; break;
        case 'L': s->listen = optarg; break;
        case 'p': s->ports = optarg; break;
        case 'v': s->level = optarg; break;
        case 'S': s->pool.store = optarg; break;
        case 'N': s->pool.name = optarg; break;
        case 'A': s->pool.advertise = optarg; break;
        case 'h': fputs(usage, stdout); exit(0);
        default: fputs(usage, stderr); return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "brickfsd: unexpected argument '%s'\n%s", argv[optind], usage);
        return -1;
    }
    return 0;
}

static char *absolute(const char *p)
{
    char cwd[PATH_MAX], buf[PATH_MAX * 2];
    if (p[0] == '/' || !getcwd(cwd, sizeof(cwd)))
        return strdup(p);
    snprintf(buf, sizeof(buf), "%s/%s", cwd, p);
    return strdup(buf);
}

/* A helper program: $ENV if set, else NAME in the folder of brickfsd. */
static char *beside_me(const char *env, const char *name)
{
    char exe[PATH_MAX];
    if (env && *env)
        return absolute(env);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 64);
    if (n <= 0)
        return strdup(name);
    exe[n] = 0;
    *(strrchr(exe, '/') ? strrchr(exe, '/') : exe) = 0;
    size_t len = strlen(exe);
    snprintf(exe + len, sizeof(exe) - len, "/%s", name);
    return strdup(exe);
}

static int setup(struct bfs_mgmt *m, const struct settings *s, char *err, size_t errlen)
{
    m->state_dir = absolute(s->state);
    m->log_dir = absolute(s->log);
    m->run_dir = absolute(s->run);
    m->listen = strdup(s->listen);
    if (sscanf(s->ports, "%d-%d", &m->port_lo, &m->port_hi) != 2 || m->port_lo < 1 ||
        m->port_hi > 65535 || m->port_lo > m->port_hi) {
        snprintf(err, errlen, "--brick-ports '%s' is not LO-HI within 1-65535", s->ports);
        return -EINVAL;
    }
    m->stop_timeout_ms = atoi(env_or("BRICKFSD_STOP_TIMEOUT", "10")) * 1000;
    m->start_timeout_ms = atoi(env_or("BRICKFSD_START_TIMEOUT", "10")) * 1000;
    if (m->stop_timeout_ms <= 0)
        m->stop_timeout_ms = 10000;
    if (m->start_timeout_ms <= 0)
        m->start_timeout_ms = 10000;
    m->heal_timeout_ms = atoi(env_or("BRICKFSD_HEAL_TIMEOUT", "120")) * 1000;
    if (m->heal_timeout_ms <= 0)
        m->heal_timeout_ms = 120000;
    m->brick_bin = beside_me(getenv("BRICKFSD_BRICK_BIN"), "brickfs-brick");
    m->shd_bin = beside_me(getenv("BRICKFSD_SHD_BIN"), "brickfs-shd");
    const char *dirs[] = {m->state_dir, m->log_dir, m->run_dir, m->state_dir, m->log_dir,
                          m->run_dir};
    const char *subs[] = {"volfiles", "bricks", "bricks", "shd", "shd", "shd"};
    for (int i = 0; i < 6; i++) {
        char p[PATH_MAX + 16];
        snprintf(p, sizeof(p), "%s/%s", dirs[i], subs[i]);
        int rc = bfs_mkdir_p(p, 0755);
        if (rc < 0) {
            snprintf(err, errlen, "cannot create %.700s: %s", p, strerror(-rc));
            return rc;
        }
    }
    return 0;
}

/* One brickfsd per state folder: a POSIX record lock on STATE/brickfsd.lock,
 * held until exit. A record lock, not flock(): it belongs to this process
 * only, so no child can ever hold it (flock() locks follow the open file,
 * which a daemon being spawned holds until its exec closes it). It goes when
 * the last thread of this process has exited. */
static int take_lock(struct bfs_mgmt *m, char *err, size_t errlen)
{
    char p[PATH_MAX + 32], buf[32] = "";
    snprintf(p, sizeof(p), "%s/brickfsd.lock", m->state_dir);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %.700s: %s", p, strerror(errno));
        return -1;
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_SETLK, &fl) < 0) {
        int e = errno;
        struct flock who = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK) {
            snprintf(buf, sizeof(buf), "%d", (int)who.l_pid);
        } else {
            ssize_t r = pread(fd, buf, sizeof(buf) - 1, 0);
            buf[r > 0 ? r : 0] = 0;
            buf[strcspn(buf, "\n")] = 0;
        }
        if (e == EACCES || e == EAGAIN)
            snprintf(err, errlen, "another brickfsd (pid %s) uses the state folder %s",
                     buf[0] ? buf : "?", m->state_dir);
        else
            snprintf(err, errlen, "cannot lock %.700s: %s", p, strerror(e));
        close(fd);
        return -1;
    }
    int len = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)len, 0) != len)
        bfs_log(MGMT_LOG, BFS_LOG_WARNING, "cannot write my pid to %s", p);
    return fd; /* held open, and so locked, until exit (never closed: closing
                * any descriptor of this file would drop the record lock) */
}

/* Without --foreground: the parent waits for a line from the child on a
 * pipe ("ok" or the reason it failed) and exits with that verdict. */
static int daemonize(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) /* daemons spawned at startup must not hold it */
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid > 0) {
        close(p[1]);
        char msg[1200] = "";
        ssize_t n, got = 0;
        while ((n = read(p[0], msg + got, sizeof(msg) - 1 - (size_t)got)) > 0)
            got += n;
        msg[got] = 0;
        if (strncmp(msg, "ok", 2) == 0)
            exit(0);
        fprintf(stderr, "brickfsd: %s\n", got ? msg : "exited during startup");
        exit(1);
    }
    close(p[0]);
    setsid();
    return p[1];
}

static void report(int fd, const char *msg)
{
    if (fd >= 0) {
        ssize_t w = write(fd, msg, strlen(msg));
        (void)w;
        close(fd);
    }
}

int main(int argc, char **argv)
{
    static struct bfs_mgmt mg = {.lock = PTHREAD_MUTEX_INITIALIZER,
                                 .oplock = PTHREAD_MUTEX_INITIALIZER};
    struct bfs_mgmt *m = &mg;
    struct settings s = {0};
    char err[1024] = "", path[PATH_MAX + 32];
    enum bfs_log_level lvl;
    if (parse_args(argc, argv, &s) < 0)
        return 2;
    if (bfs_log_level_parse(s.level, &lvl) < 0) {
        fprintf(stderr, "brickfsd: unknown --log-level '%s'\n", s.level);
        return 2;
    }
    int notify = s.foreground ? -1 : daemonize();
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_cond_init(&m->cond, &ca);
    struct bfs_http *http = NULL;
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* before any thread: they inherit it */
    signal(SIGPIPE, SIG_IGN);
    if (setup(m, &s, err, sizeof(err)) < 0)
        goto fail;
    snprintf(path, sizeof(path), "%s/brickfsd.log", m->log_dir);
    if (bfs_log_open(path) < 0) {
        snprintf(err, sizeof(err), "cannot open log file %.700s", path);
        goto fail;
    }
    bfs_log_set_level(lvl);
    if (take_lock(m, err, sizeof(err)) < 0)
        goto fail;
    if (bfs_pool_open(m, &s.pool, err, sizeof(err)) < 0)
        goto fail;
    if (bfs_catalog_load(m) < 0 || bfs_sup_init(m) < 0 || bfs_rebal_init(m) < 0) {
        snprintf(err, sizeof(err), "cannot start: out of memory or threads");
        goto fail;
    }
    pthread_mutex_lock(&m->lock);
    bfs_sup_reconcile(m);
    bfs_rebal_reconcile(m);
    pthread_mutex_unlock(&m->lock);
    if (bfs_pool_sync_start(m) < 0) {
        snprintf(err, sizeof(err), "cannot watch the pool store: %s", bfs_store_errmsg());
        goto fail;
    }
    if (bfs_http_start(m, &http, err, sizeof(err)) < 0)
        goto fail;
    bfs_log(MGMT_LOG, BFS_LOG_INFO, "brickfsd %d listening on %s, state %s, node %s",
            (int)getpid(), m->listen, m->state_dir, m->node_uuid);
    if (notify >= 0) {
        int fd = open("/dev/null", O_RDWR);
        dup2(fd, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    report(notify, "ok");
    for (;;) {
        int sig;
        sigwait(&sigs, &sig);
        if (sig == SIGHUP) {
            bfs_log(MGMT_LOG, BFS_LOG_INFO, "SIGHUP: nothing to reload");
            continue;
        }
        bfs_log(MGMT_LOG, BFS_LOG_INFO, "signal %d: stopping (bricks keep running)", sig);
        break;
    }
    bfs_http_stop(http);
    bfs_pool_sync_stop(m);
    bfs_sup_shutdown(m);
    bfs_catalog_free(m->catalog);
    bfs_pool_close(m);
    bfs_log_close();
    return 0;
fail:
    bfs_log(MGMT_LOG, BFS_LOG_ERROR, "%s", err);
    if (notify < 0)
        fprintf(stderr, "brickfsd: %s\n", err);
    report(notify, err);
    return 1;
}
