/*
 * shd-run.c — runs a helper program once (brickfs-shd --info, --resolve)
 * and collects what it prints, with a time limit: the REST thread that
 * asked waits here, without m->lock. The child gets its own process group
 * (so a timeout kills whatever it started too), /dev/null as stdin, pipes
 * for stdout and stderr, and default signal handling and mask (brickfsd
 * blocks signals for sigwait; the child must not inherit that).
 *
 * The child is reaped here by pid; the supervisor thread only ever waits
 * for the pids in its process table, so the two never steal each other's
 * exit status.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/body.h"
#include "core/event.h"
#include "mgmt/mgmt.h"
#include "mgmt/supervisor.h"

#define OUT_MAX (16u << 20) /* a heal listing of many entries; more is cut */

/* Reads what is there; 0 at EOF, 1 if more may come. What does not fit
 * in s (OUT_MAX) is read and dropped, so the child never blocks on a full
 * pipe. */
static int drain(int fd, struct bfs_body *s)
{
    char buf[16384];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 1 : 0;
    if (n == 0)
        return 0;
    bfs_body_append(s, buf, (size_t)n);
    return 1;
}

static int spawn(char *const argv[], int out, int err, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out, 1);
    posix_spawn_file_actions_adddup2(&fa, err, 2);
    int rc = bfs__spawn(argv, &fa, POSIX_SPAWN_SETPGROUP, pid);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

int bfs_run_capture(char *const argv[], int timeout_ms, struct bfs_run_result *r)
{
    int po[2], pe[2];
    memset(r, 0, sizeof(*r));
    if (pipe2(po, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(pe, O_CLOEXEC) < 0) {
        int rc = -errno;
        close(po[0]);
        close(po[1]);
        return rc;
    }
    pid_t pid;
    int rc = spawn(argv, po[1], pe[1], &pid);
    close(po[1]);
    close(pe[1]);
    if (rc < 0) {
        close(po[0]);
        close(pe[0]);
        return rc;
    }
    struct bfs_body out, err;
    bfs_body_init(&out, OUT_MAX);
    bfs_body_init(&err, OUT_MAX);
    struct pollfd fds[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
    uint64_t deadline = bfs_now_ms() + (uint64_t)timeout_ms;
    while (fds[0].fd >= 0 || fds[1].fd >= 0) {
        uint64_t now = bfs_now_ms();
        if (now >= deadline) {
            r->timed_out = true;
            kill(-pid, SIGKILL);
            break;
        }
        int n = poll(fds, 2, (int)(deadline - now));
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2 && n > 0; i++) {
            if (fds[i].fd < 0 || !fds[i].revents)
                continue;
            if (!drain(fds[i].fd, i == 0 ? &out : &err)) {
                close(fds[i].fd);
                fds[i].fd = -1;
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0)
            close(fds[i].fd);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r->out = bfs_body_take(&out);
    r->err = bfs_body_take(&err);
    return 0;
}

void bfs_run_result_free(struct bfs_run_result *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof(*r));
}
