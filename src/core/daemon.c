/*
 * daemon.c — bfs_daemonize / bfs_daemon_ready (daemon.h): the double fork
 * of brickfs-brick and brickfs-shd, and the pipe through which the daemon
 * tells the process that was started whether it came up. The pipe's write
 * end (ready_fd) lives from bfs_daemonize to bfs_daemon_ready. Also their
 * default log file and signalfd.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/daemon.h"

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

int bfs_daemonize(void)
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

void bfs_daemon_ready(int ok)
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

char *bfs_daemon_log_file(const char *volfile, const char *sub)
{
    const char *dir = getenv("BRICKFS_LOG_DIR");
    char *copy = strdup(volfile), *out = NULL;
    if (!copy)
        return NULL;
    char *name = basename(copy);
    size_t n = strlen(name);
    if (n > 4 && strcmp(name + n - 4, ".vol") == 0)
        name[n - 4] = '\0';
    if (!dir || !*dir)
        dir = "/var/log/brickfs";
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, sub);
    mkdir(dir, 0755);
    mkdir(path, 0755);
    if (asprintf(&out, "%s/%s.log", path, name) < 0)
        out = NULL;
    free(copy);
    return out;
}

int bfs_daemon_signalfd(int extra)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    if (extra)
        sigaddset(&set, extra);
    signal(SIGPIPE, SIG_IGN);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
        return -EINVAL;
    int fd = signalfd(-1, &set, SFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}
