/*
 * portmap.c — brick ports. Each brick gets a port of the range
 * (--brick-ports) at create time, kept in the volume document: the lowest
 * one no brick of any volume has and that can be bound right now. The
 * supervisor moves a brick whose port a stranger took (supervisor.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mgmt/mgmt.h"

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
    for (int i = 0; i < nvols; i++)
        for (int j = 0; j < vols[i]->nbricks; j++) {
            int p = vols[i]->bricks[j].port;
            if (strcmp(vols[i]->name, v->name) != 0 && p >= m->port_lo && p <= m->port_hi)
                used[p - m->port_lo] = 1;
        }
    for (int j = 0; j < v->nbricks; j++)
        if (v->bricks[j].port >= m->port_lo && v->bricks[j].port <= m->port_hi)
            used[v->bricks[j].port - m->port_lo] = 1;
    int rc = 0;
    for (int j = 0; j < v->nbricks && rc == 0; j++) {
        if (v->bricks[j].port)
            continue;
        int p;
        for (p = 0; p < span; p++)
            if (!used[p] && bfs_port_free(v->bricks[j].host, m->port_lo + p))
                break;
        if (p == span) {
            rc = bfs_fail(e, 503, "no free brick port left in %d-%d (brickfsd "
                          "--brick-ports LO-HI widens the range)", m->port_lo, m->port_hi);
            break;
        }
        used[p] = 1;
        v->bricks[j].port = m->port_lo + p;
    }
    free(used);
    bfs_volume_list_free(vols, nvols);
    return rc;
}
