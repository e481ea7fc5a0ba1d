/*
 * daemon.c — turning brickfs-shd into a daemon (the same double fork as
 * brickfs-brick's src/brick/daemon.c; programs share no object files here).
 *
 * The classic double fork, with a pipe from the daemon back to the process
 * that was started: that process waits until the daemon has built its
 * graph and listens (or failed to), and exits with the matching status, so
 * `brickfs-shd --volfile X && next-step` is reliable. Startup errors are
 * still printed on the terminal because the daemon keeps stderr until it
 * reports ready.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shd.h"

static int ready_fd = -1;

static void to_devnull(int target)
{
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        dup2(fd, target);
        if (fd != target)
            close(fd);
    }
}

int shd_daemonize(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int rc = -errno;
        close(p[0]);
        close(p[1]);
        return rc;
    }
    if (pid > 0) { /* the process that was started: wait for the verdict */
        close(p[1]);
        char ok = 0;
        ssize_t n;
        do
            n = read(p[0], &ok, 1);
        while (n < 0 && errno == EINTR);
        waitpid(pid, NULL, 0); /* the intermediate child exits at once */
        _exit(n == 1 && ok == 1 ? 0 : 1);
    }
    close(p[0]);
    if (setsid() < 0)
        _exit(1);
    pid = fork();
    if (pid < 0)
        _exit(1);
    if (pid > 0)
        _exit(0); /* the daemon is not a session leader: it cannot get a terminal */
    ready_fd = p[1];
    umask(022);
    if (chdir("/") < 0)
        _exit(1);
    to_devnull(STDIN_FILENO);
    to_devnull(STDOUT_FILENO);
    return 0;
}

void shd_daemon_ready(int ok)
{
    if (ready_fd < 0)
        return;
    char c = ok ? 1 : 0;
    ssize_t n;
    do
        n = write(ready_fd, &c, 1);
    while (n < 0 && errno == EINTR);
    close(ready_fd);
    ready_fd = -1;
    if (ok)
        to_devnull(STDERR_FILENO);
}
