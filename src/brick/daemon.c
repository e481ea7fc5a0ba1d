/*
 * daemon.c — the pid file of brickfs-brick (turning it into a daemon is
 * bfs_daemonize, src/core/daemon.c, shared with brickfs-shd).
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "brick.h"

int bfs_brick_write_pidfile(const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    FILE *f = fopen(tmp, "we");
    if (!f)
        return -errno;
    int rc = fprintf(f, "%d\n", (int)getpid()) < 0 ? -EIO : 0;
    if (fclose(f) != 0 && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path) < 0)
        rc = -errno;
    if (rc)
        unlink(tmp);
    return rc;
}
