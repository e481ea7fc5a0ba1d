/*
 * fuse-main.c — brickfs-mount's entry point: the command line, going to
 * the background, and telling the caller whether the mount is up.
 *
 * Without -f the program forks before anything starts a thread (a fork
 * copies only the calling thread). The parent waits on a pipe; the child
 * brings the graph and the mount up and writes one message: "0" once the
 * kernel mount exists, or "1" and the reason. The parent exits with that
 * status and prints the reason, so `brickfs-mount ... && ls MNT` works and
 * mount(8) gets a meaningful error. A child that dies before writing closes
 * the pipe, which the parent reports too.
 *
 * Exit status: 0 mounted (or --help), 1 the mount failed, 2 usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "fuse/fuse-bridge.h"

void bfs_fuse_report(int *fd, int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + 1, sizeof(msg) - 1, fmt, ap);
    va_end(ap);
    if (code)
        bfs_log("fuse", BFS_LOG_ERROR, "%s", msg + 1);
    if (*fd < 0) {
        if (code)
            fprintf(stderr, "brickfs-mount: %s\n", msg + 1);
        return;
    }
    msg[0] = code ? '1' : '0';
    size_t len = strlen(msg + 1) + 1, off = 0;
    while (off < len) {
        ssize_t n = write(*fd, msg + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    close(*fd);
    *fd = -1;
}

/* The parent's side: waits for the child's message and exits with it. */
static void parent_wait(int fd, const char *log_hint)
{
    char msg[1024];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, msg + len, sizeof(msg) - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == sizeof(msg) - 1)
            break;
    }
    msg[len] = 0;
    if (len > 0 && msg[0] == '0')
        exit(0);
    if (len > 1)
        fprintf(stderr, "brickfs-mount: %s\n", msg + 1);
    else
        fprintf(stderr, "brickfs-mount: the mount process exited before the mount was up%s%s\n",
                log_hint ? "; see " : "", log_hint ? log_hint : "");
    exit(1);
}

/* Returns in the child with the pipe to report through; the parent never
 * returns. -1 if the fork failed (reported). */
static int daemonize(const struct bfs_fuse_opts *o)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        fprintf(stderr, "brickfs-mount: pipe: %s\n", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "brickfs-mount: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid > 0) {
        close(p[1]);
        parent_wait(p[0], o->log_file);
    }
    close(p[0]);
    setsid();
    if (chdir("/") < 0) {
        /* "/" always exists; nothing sensible to do otherwise */
    }
    /* stdin and stdout go now, so a caller reading our output (for example
     * through $(...)) is not kept waiting; stderr stays until the mount is
     * up, for libfuse's own complaints. */
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        if (null > STDERR_FILENO)
            close(null);
    }
    return p[1];
}

/* Checks what can be checked before going to the background. */
static int precheck(const struct bfs_fuse_opts *o)
{
    struct stat st;
    if (o->volfile && access(o->volfile, R_OK) < 0) {
        fprintf(stderr, "brickfs-mount: cannot read volfile %s: %s\n", o->volfile,
                strerror(errno));
        return -1;
    }
    if (stat(o->mountpoint, &st) < 0) {
        fprintf(stderr, "brickfs-mount: mount point %s: %s\n", o->mountpoint, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "brickfs-mount: mount point %s is not a directory\n", o->mountpoint);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* every write passes big buffers through the heap: keep them there
     * (no page faults per MiB; process.c) */
    bfs_proc_keep_heap();
    struct bfs_fuse_opts o;
    int rc = bfs_fuse_opts_parse(argc, argv, &o);
    if (rc != 0) {
        bfs_fuse_opts_free(&o);
        return rc == 1 ? 0 : 2;
    }
    if (precheck(&o) < 0) {
        bfs_fuse_opts_free(&o);
        return 1;
    }
    int report_fd = -1;
    if (!o.foreground && (report_fd = daemonize(&o)) < 0) {
        bfs_fuse_opts_free(&o);
        return 1;
    }
    /* before any thread: curl's global state is not thread-safe to set up */
    if (o.volname && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        bfs_fuse_report(&report_fd, 1, "cannot initialise libcurl");
        bfs_fuse_opts_free(&o);
        return 1;
    }
    rc = bfs_fuse_run(&o, report_fd);
    if (o.volname)
        curl_global_cleanup();
    bfs_fuse_opts_free(&o);
    return rc;
}
