/*
 * main.c — brickfs-brick: runs one brick's server graph
 * (storage/posix -> server-side features -> debug/io-stats -> protocol/server)
 * from a volfile until SIGTERM or SIGINT.
 *
 *   brickfs-brick --volfile FILE [--log-file FILE] [--log-level LEVEL]
 *                 [--pid-file FILE] [-f|--foreground] [--help]
 *   brickfs-brick --list-options [--json | --markdown]   (list-options.c)
 *
 * Order of events: arguments; daemonize unless -f (before any thread
 * exists; the started process waits and exits 0 once the brick listens, 1
 * if it failed); logging; signals blocked in every thread and read from a
 * signalfd by the main thread; the process resources (event loop and a
 * worker pool for storage/posix); the graph (errors name file and line);
 * init; pid file; activate. On SIGTERM/SIGINT: PARENT_DOWN down the graph
 * (protocol/server closes its clients and waits for requests in flight),
 * then free everything and exit 0. SIGHUP reopens the log file (logrotate).
 *
 * Log file default: -f logs to stderr; a daemon logs to
 * $BRICKFS_LOG_DIR (default /var/log/brickfs)/bricks/<volfile name>.log.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brick.h"

#include "core/daemon.h"
#include "core/graph.h"
#include "core/log.h"

#define PROG "brickfs-brick"
#define BRICK_WORKERS 16

struct args {
    char *volfile;
    char *log_file;
    const char *log_level;
    char *pid_file;
    int foreground;
    int list_options; /* 1 + enum bfs_list_format, 0 = run a brick */
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " --volfile FILE [options]\n"
            "       " PROG " --list-options [--json | --markdown]\n"
            "Runs the server graph of one brick until SIGTERM or SIGINT.\n\n"
            "  --volfile FILE     the brick's volfile (required)\n"
            "  --log-file FILE    log here ('-' for stderr); default: stderr with -f,\n"
            "                     else $BRICKFS_LOG_DIR/bricks/NAME.log\n"
            "                     ($BRICKFS_LOG_DIR defaults to /var/log/brickfs)\n"
            "  --log-level LEVEL  none, error, warning, info (default), debug, trace\n"
            "  --pid-file FILE    write the process id here (removed on exit)\n"
            "  -f, --foreground   do not detach from the terminal\n"
            "  --list-options     print every option of every installed translator and\n"
            "                     exit; --json or --markdown choose another format\n"
            "  --help             show this help\n");
}

/* An absolute version of path (malloc'd): the daemon runs in "/". */
static char *absolute(const char *path)
{
    char cwd[PATH_MAX], *out;
    if (path[0] == '/' || strcmp(path, "-") == 0 || !getcwd(cwd, sizeof(cwd)))
        return strdup(path);
    if (asprintf(&out, "%s/%s", cwd, path) < 0)
        return NULL;
    return out;
}

/* 0, or the exit status for a usage error (2) / --help (0, as -1). */
static int parse_args(int argc, char **argv, struct args *a)
{
    enum { O_VOLFILE = 256, O_LOGFILE, O_LOGLEVEL, O_PIDFILE, O_HELP, O_LIST, O_JSON, O_MD };
    static const struct option opts[] = {
        {"volfile", required_argument, NULL, O_VOLFILE},
        {"log-file", required_argument, NULL, O_LOGFILE},
        {"log-level", required_argument, NULL, O_LOGLEVEL},
        {"pid-file", required_argument, NULL, O_PIDFILE},
        {"foreground", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, O_HELP},
        {"list-options", no_argument, NULL, O_LIST},
        {"json", no_argument, NULL, O_JSON},
        {"markdown", no_argument, NULL, O_MD},
        {0},
    };
    int c, format = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f", opts, NULL)) != -1) {
        switch (c) {
        case O_VOLFILE: free(a->volfile); a->volfile = absolute(optarg); break;
        case O_LOGFILE: free(a->log_file); a->log_file = absolute(optarg); break;
        case O_LOGLEVEL: a->log_level = optarg; break;
        case O_PIDFILE: free(a->pid_file); a->pid_file = absolute(optarg); break;
        case 'f': a->foreground = 1; break;
        case O_HELP: usage(stdout); return -1;
        case O_LIST: a->list_options = 1; break;
        case O_JSON: format = BFS_LIST_JSON; break;
        case O_MD: format = BFS_LIST_MARKDOWN; break;
        case ':':
            fprintf(stderr, PROG ": option '%s' needs a value\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        default:
            fprintf(stderr, PROG ": unknown option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (format && !a->list_options) {
        fprintf(stderr, PROG ": --json and --markdown go with --list-options\n");
        usage(stderr);
        return 2;
    }
    if (a->list_options) {
        a->list_options = 1 + format;
        return 0;
    }
    if (!a->volfile) {
        fprintf(stderr, PROG ": --volfile is required\n");
        usage(stderr);
        return 2;
    }
    enum bfs_log_level lvl;
    if (a->log_level && bfs_log_level_parse(a->log_level, &lvl) < 0) {
        fprintf(stderr, PROG ": unknown log level '%s'\n", a->log_level);
        usage(stderr);
        return 2;
    }
    return 0;
}

static int setup_logging(struct args *a)
{
    if (!a->log_file && !a->foreground && !(a->log_file = bfs_daemon_log_file(a->volfile, "bricks")))
        return -ENOMEM;
    if (a->log_level) {
        enum bfs_log_level lvl;
        bfs_log_level_parse(a->log_level, &lvl);
        bfs_log_set_level(lvl);
    }
    int rc = bfs_log_open(a->log_file);
    if (rc < 0)
        fprintf(stderr, PROG ": cannot open log file %s: %s\n", a->log_file, strerror(-rc));
    return rc;
}

static void on_graph_event(struct bfs_graph *g, enum bfs_event ev, void *data)
{
    (void)g;
    (void)data;
    if (ev == BFS_EV_CHILD_DOWN)
        bfs_log(PROG, BFS_LOG_WARNING, "the brick's graph reports its storage down");
}

/* Waits for SIGTERM/SIGINT; SIGHUP reopens the log. Returns the signal. */
static int wait_for_stop(int sfd, const char *log_file)
{
    for (;;) {
        struct signalfd_siginfo si;
        ssize_t n = read(sfd, &si, sizeof(si));
        if (n < 0 && errno == EINTR)
            continue;
        if (n != (ssize_t)sizeof(si))
            return SIGTERM; /* cannot happen; stop rather than spin */
        if (si.ssi_signo == SIGHUP) {
            if (log_file && bfs_log_open(log_file) == 0)
                bfs_log(PROG, BFS_LOG_INFO, "log file reopened (SIGHUP)");
            continue;
        }
        return (int)si.ssi_signo;
    }
}

static int run(struct args *a)
{
    char err[1024];
    struct bfs_graph *g = NULL;
    int sfd = bfs_daemon_signalfd(0);
    if (sfd < 0) {
        fprintf(stderr, PROG ": cannot set up signal handling: %s\n", strerror(-sfd));
        return 1;
    }
    struct bfs_proc *proc = bfs_proc_new(PROG, BRICK_WORKERS);
    if (!proc) {
        fprintf(stderr, PROG ": cannot start the event loop and workers\n");
        return 1;
    }
    if (bfs_graph_from_file(a->volfile, proc, &g, err, sizeof(err)) < 0) {
        fprintf(stderr, PROG ": %s\n", err);
        bfs_log(PROG, BFS_LOG_ERROR, "%s", err);
        bfs_proc_free(proc);
        return 1;
    }
    g->on_event = on_graph_event;
    int rc = bfs_graph_init(g);
    if (rc < 0) {
        fprintf(stderr, PROG ": the graph of %s did not start: %s (details in the log)\n",
                a->volfile, strerror(-rc));
        bfs_log(PROG, BFS_LOG_ERROR, "the graph of %s did not start: %s", a->volfile,
                strerror(-rc));
        bfs_graph_free(g);
        bfs_proc_free(proc);
        return 1;
    }
    if (a->pid_file && (rc = bfs_brick_write_pidfile(a->pid_file)) < 0) {
        fprintf(stderr, PROG ": cannot write pid file %s: %s\n", a->pid_file, strerror(-rc));
        bfs_graph_deactivate(g);
        bfs_graph_free(g);
        bfs_proc_free(proc);
        return 1;
    }
    bfs_graph_activate(g);
    bfs_log(PROG, BFS_LOG_INFO, "brick %s started (pid %d)", a->volfile, (int)getpid());
    bfs_daemon_ready(1);

    int sig = wait_for_stop(sfd, a->log_file);
    bfs_log(PROG, BFS_LOG_INFO, "%s received: stopping", strsignal(sig));
    bfs_graph_deactivate(g);
    bfs_graph_free(g);
    bfs_proc_free(proc);
    close(sfd);
    if (a->pid_file)
        unlink(a->pid_file);
    bfs_log(PROG, BFS_LOG_INFO, "stopped");
    return 0;
}

int main(int argc, char **argv)
{
    /* 1 MiB read replies and write bodies pass through the heap at every
     * request: keep them there (no fresh pages per MiB; core/process.c) */
    bfs_proc_keep_heap();
    struct args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (a.list_options)
        return bfs_brick_list_options(stdout, (enum bfs_list_format)(a.list_options - 1));
    if (access(a.volfile, R_OK) < 0) {
        fprintf(stderr, PROG ": cannot read volfile %s: %s\n", a.volfile, strerror(errno));
        return 1;
    }
    if (!a.foreground && (rc = bfs_daemonize()) < 0) {
        fprintf(stderr, PROG ": cannot daemonize: %s\n", strerror(-rc));
        return 1;
    }
    if (setup_logging(&a) < 0) {
        bfs_daemon_ready(0);
        return 1;
    }
    rc = run(&a);
    if (rc != 0)
        bfs_daemon_ready(0);
    bfs_log_close();
    free(a.volfile);
    free(a.log_file);
    free(a.pid_file);
    return rc;
}
