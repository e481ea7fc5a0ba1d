/*
 * client.c — protocol/client: the module, its options, and its life.
 *
 * protocol/client stands for one brick (remote-host, remote-port,
 * remote-subvolume). With mgmt-server and mgmt-volume it asks brickfsd for
 * the brick's port before every connect instead (client-portmap.c).
 * Every fop wound into it goes out as one CALL frame and comes back as its
 * REPLY, through the generated codec — there is no per-fop code
 * (client-fop.c). It connects when the graph is activated
 * (PARENT_UP), keeps the connection alive with pings, and after any loss
 * reconnects with exponential backoff, re-opens the open fds and re-takes
 * the POSIX locks held through them before telling its parents CHILD_UP
 * again (client-conn.c, client-reopen.c).
 *
 * Life: init reads options and makes the state; nothing touches the
 * network until PARENT_UP. PARENT_DOWN stops for good (no more
 * reconnects). fini stops, waits until the connection is closed and every
 * request in flight has been failed (and any port map question has been
 * answered), and frees. Every fd opened through us
 * must be released before fini: release reaches us through the fd.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"

#include "core/event.h"
#include "core/graph.h"

#define CF (BFS_OPT_F_CLIENT)

static const struct bfs_option_desc cli_options[] = {
    {.key = "remote-host", .type = BFS_OPT_STR, .description = "host of the brick (required)",
     .flags = CF},
    {.key = "remote-port", .type = BFS_OPT_INT, .min = 1, .max = 65535,
     .description = "TCP port the brick listens on (required without mgmt-server; with it, "
                    "the port used until brickfsd answers)", .flags = CF},
    {.key = "mgmt-server", .type = BFS_OPT_STR,
     .description = "HOST:PORT of the brickfsd to ask where the brick listens, before every "
                    "connect (its port map)", .flags = CF},
    {.key = "mgmt-volume", .type = BFS_OPT_STR,
     .description = "the volume whose port map names the brick (with mgmt-server)",
     .flags = CF},
    {.key = "remote-subvolume", .type = BFS_OPT_STR,
     .description = "name of the brick's exported translator (required)", .flags = CF},
    {.key = "network.ping-timeout", .type = BFS_OPT_TIME, .def = "42", .min = 1, .max = 1013,
     .description = "seconds a brick may stay silent before it is declared down",
     .flags = CF | BFS_OPT_F_SETTABLE | BFS_OPT_F_RECONF},
    {.key = "transport.connect-timeout", .type = BFS_OPT_TIME, .def = "10", .min = 1,
     .max = 600, .description = "seconds a TCP connect may take", .flags = CF},
    {.key = "transport.reconnect-delay-min", .type = BFS_OPT_INT, .def = "100", .min = 10,
     .max = 60000, .description = "first delay in ms before reconnecting; doubles per failure",
     .flags = CF},
    {.key = "transport.reconnect-delay-max", .type = BFS_OPT_INT, .def = "5000", .min = 10,
     .max = 600000, .description = "largest delay in ms between reconnect attempts",
     .flags = CF},
    {.key = "performance.open-prefetch", .type = BFS_OPT_SIZE, .def = "64KB", .min = 0,
     .max = 128 * 1024,
     .description = "an O_RDONLY open of a file no larger than this brings its bytes back "
                    "with it, so that reading it takes no further round trip; 0: off",
     .flags = CF | BFS_OPT_F_SETTABLE},
    {.key = "client.invalidations", .type = BFS_OPT_BOOL, .def = "on",
     .description = "off: the handshake asks the brick to send this client no cache "
                    "invalidations (lock contention notices still come), for graphs that keep "
                    "no cache they would correct: brickfsd writes it in the self-heal daemon's "
                    "graph only; refused under performance/md-cache",
     .flags = CF},
    {0},
};

/* xl or a translator above it is of the given type. */
static bool has_ancestor(const struct bfs_xl *xl, const char *type, int depth)
{
    if (depth > 64)
        return false; /* a graph is a DAG of a few levels; never loops */
    for (int i = 0; i < xl->nparents; i++) {
        const struct bfs_xl *p = xl->parents[i];
        if ((p->type && strcmp(p->type, type) == 0) || has_ancestor(p, type, depth + 1))
            return true;
    }
    return false;
}

static int cli_init(struct bfs_xl *xl)
{
    if (!xl->graph || !xl->graph->proc) {
        XL_ERR(xl, "needs a graph with a process");
        return -EINVAL;
    }
    if (xl->nchildren > 0) {
        XL_ERR(xl, "protocol/client is a leaf: it takes no subvolumes");
        return -EINVAL;
    }
    const char *host = bfs_xl_opt_str(xl, "remote-host");
    int64_t port = bfs_xl_opt_str(xl, "remote-port") ? bfs_xl_opt_int(xl, "remote-port") : 0;
    const char *subvol = bfs_xl_opt_str(xl, "remote-subvolume");
    const char *mgmt = bfs_xl_opt_str(xl, "mgmt-server");
    const char *mvol = bfs_xl_opt_str(xl, "mgmt-volume");
    if (!host || !*host || (port <= 0 && !mgmt) || !subvol || !*subvol) {
        XL_ERR(xl, "options remote-host, remote-subvolume and remote-port (or mgmt-server) "
               "are required");
        return -EINVAL;
    }
    if (mgmt && (!mvol || !*mvol)) {
        XL_ERR(xl, "option mgmt-server needs mgmt-volume (the volume of the brick)");
        return -EINVAL;
    }
    if (mgmt && !xl->graph->proc->workers) {
        XL_ERR(xl, "option mgmt-server needs the process's worker pool (bfs_proc_new with "
               "workers): port map questions are blocking HTTP");
        return -EINVAL;
    }
    bool inval = bfs_xl_opt_bool(xl, "client.invalidations");
    if (!inval && has_ancestor(xl, "performance/md-cache", 0)) {
        /* md-cache caches whatever features/upcall marks, trusting the
         * brick's invalidations to reach it: without them it would go stale */
        XL_ERR(xl, "option client.invalidations off under performance/md-cache: its cache "
               "would miss other clients' changes");
        return -EINVAL;
    }
    struct cli_priv *priv = calloc(1, sizeof(*priv));
    if (!priv)
        return -ENOMEM;
    priv->no_inval = !inval;
    if (mgmt && cli_pm_parse_server(mgmt, priv->mgmt_host, sizeof(priv->mgmt_host),
                                    &priv->mgmt_port) < 0) {
        XL_ERR(xl, "option mgmt-server '%s' is not HOST:PORT", mgmt);
        free(priv);
        return -EINVAL;
    }
    priv->xl = xl;
    priv->loop = xl->graph->proc->loop;
    priv->workers = xl->graph->proc->workers;
    priv->host = host;
    priv->port = (uint16_t)port;
    priv->subvol = subvol;
    priv->mgmt_volume = mvol;
    priv->ping_timeout_ms = (uint64_t)bfs_xl_opt_int(xl, "network.ping-timeout") * 1000;
    priv->connect_timeout_ms = (uint64_t)bfs_xl_opt_int(xl, "transport.connect-timeout") * 1000;
    priv->backoff_min_ms = (uint64_t)bfs_xl_opt_int(xl, "transport.reconnect-delay-min");
    priv->backoff_max_ms = (uint64_t)bfs_xl_opt_int(xl, "transport.reconnect-delay-max");
    if (priv->backoff_max_ms < priv->backoff_min_ms)
        priv->backoff_max_ms = priv->backoff_min_ms;
    priv->backoff_ms = priv->backoff_min_ms;
    struct bfs_gfid u;
    bfs_gfid_generate(&u);
    bfs_gfid_fmt(&u, priv->uuid);
    priv->next_fd_id = 1;
    priv->pf_max = bfs_xl_opt_size(xl, "performance.open-prefetch");
    pthread_mutex_init(&priv->lock, NULL);
    pthread_cond_init(&priv->cond, NULL);
    xl->private = priv;
    return 0;
}

/* Runs fn on the loop thread and waits for it (inline when already there). */
struct loop_call {
    void (*fn)(void *);
    void *arg;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
};

static void loop_call_task(void *arg)
{
    struct loop_call *lc = arg;
    lc->fn(lc->arg);
    pthread_mutex_lock(&lc->lock);
    lc->done = true;
    pthread_cond_signal(&lc->cond);
    pthread_mutex_unlock(&lc->lock);
}

static void run_on_loop(struct bfs_loop *loop, void (*fn)(void *), void *arg)
{
    if (bfs_loop_on_loop_thread(loop)) {
        fn(arg);
        return;
    }
    struct loop_call lc = {.fn = fn, .arg = arg, .lock = PTHREAD_MUTEX_INITIALIZER,
                           .cond = PTHREAD_COND_INITIALIZER};
    if (bfs_loop_post(loop, loop_call_task, &lc) < 0) {
        fn(arg); /* no memory for the task: better racy than never */
        return;
    }
    pthread_mutex_lock(&lc.lock);
    while (!lc.done)
        pthread_cond_wait(&lc.cond, &lc.lock);
    pthread_mutex_unlock(&lc.lock);
}

static void cli_fini(struct bfs_xl *xl)
{
    struct cli_priv *priv = xl->private;
    if (!priv)
        return;
    run_on_loop(priv->loop, cli_stop_task, priv);
    pthread_mutex_lock(&priv->lock);
    if (!bfs_loop_on_loop_thread(priv->loop)) {
        uint64_t deadline = bfs_now_ms() + 10000;
        while ((priv->conn || priv->in_close || priv->pm_outstanding) &&
               bfs_now_ms() < deadline) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&priv->cond, &priv->lock, &ts);
        }
    }
    bool leak = priv->conn || priv->in_close || priv->pm_outstanding;
    pthread_mutex_unlock(&priv->lock);
    if (leak) {
        XL_ERR(xl, "connection to %s:%u did not close; leaking its state", priv->host,
               priv->port);
        xl->private = NULL;
        return;
    }
    cli_detach_fds(priv);
    xl->private = NULL;
    bfs_idmap_destroy(&priv->pending);
    pthread_mutex_destroy(&priv->lock);
    pthread_cond_destroy(&priv->cond);
    free(priv);
}

static int cli_notify(struct bfs_xl *xl, enum bfs_event ev, struct bfs_xl *from, void *data)
{
    struct cli_priv *priv = xl->private;
    (void)from;
    (void)data;
    switch (ev) {
    case BFS_EV_PARENT_UP: {
        pthread_mutex_lock(&priv->lock);
        bool start = !priv->activated && priv->state == CLI_IDLE;
        priv->activated = true;
        pthread_mutex_unlock(&priv->lock);
        if (start && bfs_loop_post(priv->loop, cli_start_task, priv) < 0) {
            XL_ERR(xl, "cannot start connecting: out of memory");
            return -ENOMEM;
        }
        return 0;
    }
    case BFS_EV_PARENT_DOWN:
        run_on_loop(priv->loop, cli_stop_task, priv);
        return 0;
    default:
        return 0; /* a leaf: nothing below to tell */
    }
}

static int cli_reconfigure(struct bfs_xl *xl, struct bfs_dict *options)
{
    struct cli_priv *priv = xl->private;
    const char *v;
    int64_t secs = 42;
    if (bfs_dict_get_str(options, "network.ping-timeout", &v) == 0 &&
        (bfs_parse_int(v, &secs) < 0 || secs < 1))
        return -EINVAL;
    pthread_mutex_lock(&priv->lock);
    priv->ping_timeout_ms = (uint64_t)secs * 1000; /* read by the next ping tick */
    pthread_mutex_unlock(&priv->lock);
    return 0;
}

BFS_XL_MODULE(.type = "protocol/client", .options = cli_options, .init = cli_init,
              .fini = cli_fini, .notify = cli_notify, .reconfigure = cli_reconfigure,
              .release = cli_release, .releasedir = cli_release, .dump = cli_dump,
              .min_children = 0, .max_children = 0, .generic_fop = cli_generic_fop);
