/*
 * portmap.c — brick ports. Each brick gets a port of the range
 * (--brick-ports) at create time, kept in the volume document: the lowest
 * one no other brick on the same host has (in a pool, bricks of other
 * hosts may share it) and, for a brick of this node, that can be bound
 * right now. The supervisor moves a brick whose port a stranger took
 * (supervisor.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mgmt/mgmt.h"
#include "mgmt/pool.h"

const char *bfs_brick_listen_addr(const char *host)
{
    if (strcmp(host, "localhost") == 0 || strncmp(host, "127.", 4) == 0)
        return "127.0.0.1";
    return "*";
}

bool bfs_port_free(const char *host, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    int one = 1;
    /* as the brick will bind: SO_REUSEADDR, so TIME_WAIT does not count */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = strcmp(bfs_brick_listen_addr(host), "*") == 0
                             ? htonl(INADDR_ANY)
                             : htonl(INADDR_LOOPBACK);
    bool ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

/* Whether bricks on hosts a and b can collide on a port: the same host,
 * or both bound to the loopback address (nodes of one machine in tests);
 * without a pool every brick is this machine's. */
static bool same_host(const struct bfs_mgmt *m, const char *a, const char *b)
{
    if (!bfs_pool_enabled(m) || strcmp(a, b) == 0)
        return true;
    return strcmp(bfs_brick_listen_addr(a), "127.0.0.1") == 0 &&
           strcmp(bfs_brick_listen_addr(b), "127.0.0.1") == 0;
}

/* Marks in used[] the ports of the bricks on host (other volumes', and
 * v's that have one). */
static void mark_used(const struct bfs_mgmt *m, struct bfs_volume **vols, int nvols,
                      const struct bfs_volume *v, const char *host, int lo, int hi, char *used)
{
    for (int i = 0; i <= nvols; i++) {
        const struct bfs_volume *x = i < nvols ? vols[i] : v;
        if (i < nvols && strcmp(x->name, v->name) == 0)
            continue; /* its old document: v is the new one */
        for (int j = 0; j < x->nbricks; j++) {
            int p = x->bricks[j].port;
            if (p >= lo && p <= hi && same_host(m, x->bricks[j].host, host))
                used[p - lo] = 1;
        }
    }
}

int bfs_ports_assign(struct bfs_mgmt *m, struct bfs_volume *v, struct bfs_err *e)
{
    struct bfs_volume **vols;
    int nvols;
    if (bfs_volume_list(m, &vols, &nvols) < 0)
        return bfs_fail(e, 500, "cannot list volumes from the store");
    int span = m->port_hi - m->port_lo + 1;
    char *used = calloc((size_t)span, 1);
    if (!used) {
        bfs_volume_list_free(vols, nvols);
        return bfs_fail(e, 500, "out of memory");
    }
    int rc = 0;
    for (int j = 0; j < v->nbricks && rc == 0; j++) {
        if (v->bricks[j].port)
            continue;
        /* Unique among the bricks of its host, which in a pool are not
         * all the pool's bricks; the bind test only where it will run
         * (another node moves its brick if a stranger holds the port). */
        memset(used, 0, (size_t)span);
        mark_used(m, vols, nvols, v, v->bricks[j].host, m->port_lo, m->port_hi, used);
        bool here = bfs_pool_brick_is_mine(m, v, j);
        int p;
        for (p = 0; p < span; p++)
            if (!used[p] && (!here || bfs_port_free(v->bricks[j].host, m->port_lo + p)))
                break;
        if (p == span) {
            rc = bfs_fail(e, 503, "no free brick port left in %d-%d on %s (brickfsd "
                          "--brick-ports LO-HI widens the range)", m->port_lo, m->port_hi,
                          v->bricks[j].host);
            break;
        }
        v->bricks[j].port = m->port_lo + p;
    }
    free(used);
    bfs_volume_list_free(vols, nvols);
    return rc;
}
