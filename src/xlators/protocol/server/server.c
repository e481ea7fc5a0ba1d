/*
 * server.c — protocol/server: the module, its options, and the life of the
 * listening socket.
 *
 * protocol/server is the top of a brick graph. It listens on TCP, lets
 * clients in after a SETVOLUME handshake (protocol version, the brick they
 * want, auth.allow/auth.reject on their address), and turns every CALL
 * frame into a fop wound into its one child; answers go back out of order,
 * as they complete (server-conn.c, server-fop.c). It holds no per-fop code:
 * requests are decoded and replies encoded through bfs_fop_info[].
 *
 * Life: init binds the listener (so a port in use fails the brick's start
 * with a clear error) and writes transport.port-file; connections may
 * arrive from then on. Shutdown — on PARENT_DOWN, or in fini at the latest
 * — stops accepting, closes every connection, waits until every request in
 * flight has been answered and every fd released, and removes the port
 * file. A program must send PARENT_DOWN before bfs_graph_free, because the
 * graph's inode table goes before fini runs and our fds point into it.
 *
 * Default listen address: every address ("*"), as in GlusterFS. A brick
 * exists to be reached from the other nodes of the pool; who may connect is
 * decided by auth.allow/auth.reject, which brickfsd writes into the
 * volfiles it generates. Use 127.0.0.1 for a brick meant for local use.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server.h"

#include "core/graph.h"

static const struct bfs_option_desc srv_options[] = {
    {.key = "transport.listen-address", .type = BFS_OPT_STR, .def = "*",
     .description = "address to listen on; '*' means every address"},
    {.key = "transport.listen-port", .type = BFS_OPT_INT, .def = "0", .min = 0, .max = 65535,
     .description = "TCP port to listen on; 0 picks a free port (see transport.port-file)"},
    {.key = "transport.port-file", .type = BFS_OPT_PATH,
     .description = "file that receives the bound port once listening (written atomically)"},
    {.key = "auth.allow", .type = BFS_OPT_ADDRLIST, .def = "*",
     .description = "client addresses allowed to connect (addresses, CIDRs, globs)",
     .flags = BFS_OPT_F_SETTABLE | BFS_OPT_F_RECONF},
    {.key = "auth.reject", .type = BFS_OPT_ADDRLIST,
     .description = "client addresses refused; wins over auth.allow",
     .flags = BFS_OPT_F_SETTABLE | BFS_OPT_F_RECONF},
    {.key = "server.max-connections", .type = BFS_OPT_INT, .def = "1024", .min = 1,
     .max = 1000000, .description = "connections accepted at once; more are closed at accept"},
    {.key = "transport.keepalive-time", .type = BFS_OPT_TIME, .def = "20", .min = 1, .max = 7200,
     .description = "idle seconds before TCP keepalive probes a client's connection"},
    {.key = "transport.keepalive-interval", .type = BFS_OPT_TIME, .def = "2", .min = 1,
     .max = 300, .description = "seconds between TCP keepalive probes"},
    {.key = "transport.keepalive-count", .type = BFS_OPT_INT, .def = "9", .min = 1, .max = 100,
     .description = "unanswered keepalive probes before the connection is dropped"},
    {.key = "transport.tcp-user-timeout", .type = BFS_OPT_TIME, .def = "42", .min = 0,
     .max = 3600,
     .description = "seconds sent data may stay unacknowledged before the connection is "
                    "dropped (0: the kernel's default)"},
    {.key = "server.handshake-timeout", .type = BFS_OPT_TIME, .def = "10", .min = 1, .max = 600,
     .description = "seconds a new connection has to complete its handshake"},
    {0},
};

/* Writes "PORT\n" to path through a temporary file and rename(2), so a
 * reader never sees a partial file. */
static int write_port_file(const char *path, uint16_t port)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    char buf[16];
    int n = snprintf(buf, sizeof(buf), "%u\n", port);
    int rc = 0;
    if (write(fd, buf, (size_t)n) != n || fsync(fd) < 0)
        rc = errno ? -errno : -EIO;
    if (close(fd) < 0 && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path) < 0)
        rc = -errno;
    if (rc)
        unlink(tmp);
    return rc;
}

static int set_auth(struct srv_priv *priv, const char *allow, const char *reject)
{
    char *a = allow ? strdup(allow) : NULL;
    char *r = reject ? strdup(reject) : NULL;
    if ((allow && !a) || (reject && !r)) {
        free(a);
        free(r);
        return -ENOMEM;
    }
    pthread_mutex_lock(&priv->lock);
    free(priv->auth_allow);
    free(priv->auth_reject);
    priv->auth_allow = a;
    priv->auth_reject = r;
    pthread_mutex_unlock(&priv->lock);
    return 0;
}

static void priv_free(struct srv_priv *priv)
{
    pthread_mutex_destroy(&priv->lock);
    pthread_cond_destroy(&priv->drained);
    free(priv->auth_allow);
    free(priv->auth_reject);
    free(priv->port_file);
    free(priv);
}

static int srv_listen(struct bfs_xl *xl, struct srv_priv *priv)
{
    int64_t port = bfs_xl_opt_int(xl, "transport.listen-port");
    int rc = bfs_listener_new(priv->loop, priv->listen_addr, (uint16_t)port, srv_accept, priv,
                              &priv->listener);
    if (rc < 0) {
        XL_ERR(xl, "cannot listen on %s port %lld: %s", priv->listen_addr, (long long)port,
               strerror(-rc));
        return rc;
    }
    priv->port = bfs_listener_port(priv->listener);
    const char *pf = bfs_xl_opt_str(xl, "transport.port-file");
    if (pf) {
        if (!(priv->port_file = strdup(pf))) {
            rc = -ENOMEM;
        } else if ((rc = write_port_file(pf, priv->port)) < 0) {
            XL_ERR(xl, "cannot write port file %s: %s", pf, strerror(-rc));
            free(priv->port_file);
            priv->port_file = NULL;
        }
        if (rc < 0) {
            bfs_listener_free(priv->listener);
            priv->listener = NULL;
            return rc;
        }
    }
    XL_INFO(xl, "listening on %s port %u, exporting %s", priv->listen_addr, priv->port,
            FIRST_CHILD(xl)->name);
    return 0;
}

static int srv_init(struct bfs_xl *xl)
{
    if (!xl->graph || !xl->graph->proc || !xl->graph->itable) {
        XL_ERR(xl, "needs a graph with a process and an inode table");
        return -EINVAL;
    }
    struct srv_priv *priv = calloc(1, sizeof(*priv));
    if (!priv)
        return -ENOMEM;
    priv->xl = xl;
    priv->loop = xl->graph->proc->loop;
    priv->listen_addr = bfs_xl_opt_str(xl, "transport.listen-address");
    priv->max_conns = bfs_xl_opt_int(xl, "server.max-connections");
    priv->hs_timeout_ms = (uint64_t)bfs_xl_opt_int(xl, "server.handshake-timeout") * 1000;
    priv->ka_time = (int)bfs_xl_opt_int(xl, "transport.keepalive-time");
    priv->ka_interval = (int)bfs_xl_opt_int(xl, "transport.keepalive-interval");
    priv->ka_count = (int)bfs_xl_opt_int(xl, "transport.keepalive-count");
    priv->user_timeout_ms = (int)bfs_xl_opt_int(xl, "transport.tcp-user-timeout") * 1000;
    pthread_mutex_init(&priv->lock, NULL);
    pthread_cond_init(&priv->drained, NULL);
    int rc = set_auth(priv, bfs_xl_opt_str(xl, "auth.allow"), bfs_xl_opt_str(xl, "auth.reject"));
    if (rc == 0) {
        xl->private = priv;
        rc = srv_listen(xl, priv);
    }
    if (rc < 0) {
        xl->private = NULL;
        priv_free(priv);
    }
    return rc;
}

/* Stops accepting, closes every connection, waits for them. Idempotent. */
static void srv_shutdown(struct bfs_xl *xl)
{
    struct srv_priv *priv = xl->private;
    pthread_mutex_lock(&priv->lock);
    bool first = !priv->stopped;
    priv->stopped = true;
    pthread_mutex_unlock(&priv->lock);
    if (!first)
        return;
    bfs_listener_free(priv->listener);
    priv->listener = NULL;
    srv_close_all(priv);
    if (priv->port_file)
        unlink(priv->port_file);
    XL_INFO(xl, "stopped listening on port %u", priv->port);
}

static void srv_fini(struct bfs_xl *xl)
{
    struct srv_priv *priv = xl->private;
    if (!priv)
        return;
    srv_shutdown(xl);
    xl->private = NULL;
    if (priv->nconns == 0) /* else a connection still points at priv: leak it */
        priv_free(priv);
}

static int srv_notify(struct bfs_xl *xl, enum bfs_event ev, struct bfs_xl *from, void *data)
{
    switch (ev) {
    case BFS_EV_PARENT_DOWN:
        if (xl->private)
            srv_shutdown(xl);
        return bfs_xl_notify_default(xl, ev, from, data);
    case BFS_EV_UPCALL:
        if (xl->private && data)
            srv_broadcast_upcall(xl->private, data);
        return 0;
    default:
        return bfs_xl_notify_default(xl, ev, from, data);
    }
}

static int srv_reconfigure(struct bfs_xl *xl, struct bfs_dict *options)
{
    const char *allow = "*", *reject = NULL;
    (void)bfs_dict_get_str(options, "auth.allow", &allow);
    (void)bfs_dict_get_str(options, "auth.reject", &reject);
    int rc = set_auth(xl->private, allow, reject);
    if (rc == 0)
        XL_INFO(xl, "auth.allow '%s', auth.reject '%s' (applies to new handshakes)", allow,
                reject ? reject : "");
    return rc;
}

/* Every fop reaches us through generic_fop only if a parent winds into the
 * server, which never happens in a brick graph: refuse. */
static int srv_generic_fop(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req)
{
    (void)frame;
    (void)req;
    XL_ERR(xl, "%s wound into protocol/server, which is a graph's top", bfs_fop_name(fop));
    return -ENOSYS;
}

BFS_XL_MODULE(.type = "protocol/server", .options = srv_options, .init = srv_init,
              .fini = srv_fini, .notify = srv_notify, .reconfigure = srv_reconfigure,
              .dump = srv_dump, .min_children = 1, .max_children = 1,
              .generic_fop = srv_generic_fop);
