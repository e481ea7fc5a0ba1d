/*
 * main.c — brickfs-shd: the self-heal daemon of replicated volumes, and its
 * one-shot inspection and split-brain resolution modes.
 *
 *   brickfs-shd --volfile FILE [--state-file PATH] [--log-file PATH]
 *               [--log-level L] [--interval SEC] [-f]
 *   brickfs-shd --volfile FILE --info [summary|split-brain] [--json]
 *   brickfs-shd --volfile FILE --resolve bigger-file|latest-mtime|source-brick
 *               --file PATH|gfid:UUID [--source-brick CLIENT-NAME] [--json]
 *
 * Daemon: detaches unless -f (the started process exits 0 once the graph
 * is up, 1 if it failed), blocks its signals and reads them from a
 * signalfd on the main thread: SIGTERM/SIGINT stop (the crawler finishes
 * the GFID it is healing), SIGUSR1 starts a crawl now, SIGHUP reopens the
 * log. The crawler thread (shd-crawl.c) crawls at start, every --interval
 * seconds, on SIGUSR1, and when a child of a replica set comes up (the
 * main thread polls replicate's up masks once a second).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/daemon.h"
#include "core/log.h"
#include "shd.h"

struct args {
    char *volfile;
    char *state_file;
    char *log_file;
    const char *log_level;
    int interval;
    int foreground;
    const char *info;           /* NULL: not --info; "" full; summary; split-brain */
    const char *resolve;        /* policy */
    const char *file;
    const char *source;
    int json;
};

/* path made absolute (malloc'd): the daemon runs in "/". */
static char *abspath(const char *path)
{
    char cwd[PATH_MAX], *out = NULL;
    if (path[0] == '/' || strcmp(path, "-") == 0 || !getcwd(cwd, sizeof(cwd)))
        return strdup(path);
    if (asprintf(&out, "%s/%s", cwd, path) < 0)
        return NULL;
    return out;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: " SHD_PROG " --volfile FILE [--state-file PATH] [--log-file PATH]\n"
            "                   [--log-level L] [--interval SEC] [-f]\n"
            "       " SHD_PROG " --volfile FILE --info [summary|split-brain] [--json]\n"
            "       " SHD_PROG " --volfile FILE --resolve bigger-file|latest-mtime|source-brick\n"
            "                   --file PATH|gfid:UUID [--source-brick CLIENT-NAME] [--json]\n"
            "Heals the replica sets of a volume from the pending index of their bricks.\n\n"
            "  --volfile FILE        the volume's client volfile (required)\n"
            "  --state-file PATH     write progress as JSON here (atomically)\n"
            "  --log-file PATH       log here ('-' for stderr); default: stderr with -f,\n"
            "                        else $BRICKFS_LOG_DIR/shd/NAME.log\n"
            "  --log-level L         none, error, warning, info (default), debug, trace\n"
            "  --interval SEC        crawl every SEC seconds (default 60); SIGUSR1 crawls now\n"
            "  -f, --foreground      do not detach from the terminal\n"
            "  --info [WHAT]         print the pending entries of every brick and exit;\n"
            "                        WHAT: summary (counts only) or split-brain\n"
            "  --resolve POLICY      resolve the split-brain of --file by POLICY:\n"
            "                        bigger-file, latest-mtime or source-brick\n"
            "  --file PATH|gfid:UUID the file to resolve (path in the volume, or its GFID)\n"
            "  --source-brick NAME   the client name (VOL-client-N) of the source brick\n"
            "  --json                JSON output for --info and --resolve\n"
            "  --help                show this help\n");
}

static int parse_args(int argc, char **argv, struct args *a)
{
    enum { O_VOLFILE = 256, O_STATE, O_LOGF, O_LOGL, O_INTERVAL, O_INFO, O_RESOLVE, O_FILE,
           O_SOURCE, O_JSON, O_HELP };
    static const struct option opts[] = {
        {"volfile", required_argument, NULL, O_VOLFILE},
        {"state-file", required_argument, NULL, O_STATE},
        {"log-file", required_argument, NULL, O_LOGF},
        {"log-level", required_argument, NULL, O_LOGL},
        {"interval", required_argument, NULL, O_INTERVAL},
        {"foreground", no_argument, NULL, 'f'},
        {"info", optional_argument, NULL, O_INFO},
        {"resolve", required_argument, NULL, O_RESOLVE},
        {"file", required_argument, NULL, O_FILE},
        {"source-brick", required_argument, NULL, O_SOURCE},
        {"json", no_argument, NULL, O_JSON},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    a->interval = 60;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "f", opts, NULL)) != -1) {
        switch (c) {
        case O_VOLFILE: free(a->volfile); a->volfile = abspath(optarg); break;
        case O_STATE: free(a->state_file); a->state_file = abspath(optarg); break;
        case O_LOGF: free(a->log_file); a->log_file = abspath(optarg); break;
        case O_LOGL: a->log_level = optarg; break;
        case 'f': a->foreground = 1; break;
        case O_RESOLVE: a->resolve = optarg; break;
        case O_FILE: a->file = optarg; break;
        case O_SOURCE: a->source = optarg; break;
        case O_JSON: a->json = 1; break;
        case O_HELP: usage(stdout); return -1;
        case O_INFO:
            /* --info WHAT as well as --info=WHAT */
            a->info = optarg ? optarg
                      : (optind < argc && argv[optind][0] != '-') ? argv[optind++] : "";
            break;
        case O_INTERVAL: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 86400) {
                fprintf(stderr, SHD_PROG ": --interval: want 1..86400 seconds, got '%s'\n",
                        optarg);
                return 2;
            }
            a->interval = (int)v;
            break;
        }
        default:
            fprintf(stderr, SHD_PROG ": unknown or incomplete option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    enum bfs_log_level lvl;
    if (a->log_level && bfs_log_level_parse(a->log_level, &lvl) < 0) {
        fprintf(stderr, SHD_PROG ": unknown log level '%s'\n", a->log_level);
        return 2;
    }
    if (optind < argc) {
        fprintf(stderr, SHD_PROG ": unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!a->volfile) {
        fprintf(stderr, SHD_PROG ": --volfile is required\n");
        usage(stderr);
        return 2;
    }
    if (a->info && *a->info && strcmp(a->info, "summary") && strcmp(a->info, "split-brain")) {
        fprintf(stderr, SHD_PROG ": --info: want summary or split-brain, got '%s'\n", a->info);
        return 2;
    }
    if (a->info && a->resolve) {
        fprintf(stderr, SHD_PROG ": --info and --resolve exclude each other\n");
        return 2;
    }
    if (a->resolve && !a->file) {
        fprintf(stderr, SHD_PROG ": --resolve needs --file PATH|gfid:UUID\n");
        return 2;
    }
    return 0;
}

static int setup_logging(struct args *a, bool daemon)
{
    enum bfs_log_level lvl = daemon ? BFS_LOG_INFO : BFS_LOG_ERROR;
    if (a->log_level)
        bfs_log_level_parse(a->log_level, &lvl);
    bfs_log_set_level(lvl);
    if (daemon && !a->log_file && !a->foreground && !(a->log_file = bfs_daemon_log_file(a->volfile, "shd")))
        return -ENOMEM;
    if (!a->log_file)
        return 0;
    int rc = bfs_log_open(a->log_file);
    if (rc < 0)
        fprintf(stderr, SHD_PROG ": cannot open log file %s: %s\n", a->log_file, strerror(-rc));
    return rc;
}

#define SHD_RETRY_MIN 5 /* s: first crawl again after one that left entries it could heal */

/* After a finished crawl that left entries (not in split-brain) behind —
 * a lock another client held, a brick that went away mid-heal — the next
 * crawl comes after retry seconds (5, 10, 20 ... up to the interval),
 * instead of a whole interval later. *next is moved earlier only. */
static void retry_left(struct shd *s, const struct args *a, int64_t *seen_end, int *retry,
                       time_t *next)
{
    pthread_mutex_lock(&s->lock);
    bool done = !s->stats.crawling && s->stats.last_end != *seen_end;
    bool left = s->stats.remaining > s->stats.split_brain;
    *seen_end = s->stats.last_end;
    pthread_mutex_unlock(&s->lock);
    if (!done)
        return;
    if (!left) {
        *retry = SHD_RETRY_MIN;
        return;
    }
    time_t soon = time(NULL) + *retry;
    if (soon < *next)
        *next = soon;
    bfs_log(SHD_PROG, BFS_LOG_INFO, "entries left after the crawl: crawling again in %d s",
            *retry);
    *retry = *retry * 2 < a->interval ? *retry * 2 : a->interval;
}

/* The main thread of the daemon: signals, the interval, children coming up. */
static void serve(struct shd *s, int sfd, const struct args *a)
{
    uint32_t up[64] = {0};
    time_t next = time(NULL) + a->interval;
    int64_t seen_end = 0;
    int retry = SHD_RETRY_MIN;
    for (int k = 0; k < s->nsets && k < 64; k++)
        up[k] = shd_set_up(&s->sets[k]);
    shd_wake(s); /* the first crawl */
    for (;;) {
        struct pollfd pfd = {.fd = sfd, .events = POLLIN};
        int n = poll(&pfd, 1, 1000);
        if (n > 0) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
                continue;
            if (si.ssi_signo == SIGUSR1) {
                bfs_log(SHD_PROG, BFS_LOG_INFO, "SIGUSR1: crawling now");
                shd_wake(s);
            } else if (si.ssi_signo == SIGHUP) {
                if (a->log_file && bfs_log_open(a->log_file) == 0)
                    bfs_log(SHD_PROG, BFS_LOG_INFO, "log file reopened (SIGHUP)");
            } else {
                bfs_log(SHD_PROG, BFS_LOG_INFO, "%s received: stopping",
                        strsignal((int)si.ssi_signo));
                return;
            }
        }
        for (int k = 0; k < s->nsets && k < 64; k++) {
            uint32_t now = shd_set_up(&s->sets[k]);
            if (now & ~up[k]) {
                bfs_log(SHD_PROG, BFS_LOG_INFO, "%s: a child came up: crawling",
                        s->sets[k].afr->name);
                shd_wake(s);
            }
            up[k] = now;
        }
        retry_left(s, a, &seen_end, &retry, &next);
        if (time(NULL) >= next) {
            next = time(NULL) + a->interval;
            shd_wake(s);
        }
    }
}

static int run_daemon(struct shd *s, const struct args *a)
{
    int sfd = bfs_daemon_signalfd(SIGUSR1);
    if (sfd < 0) {
        fprintf(stderr, SHD_PROG ": cannot set up signal handling: %s\n", strerror(-sfd));
        return 1;
    }
    if (shd_graph_open(s) < 0) {
        shd_graph_close(s);
        close(sfd);
        return 1;
    }
    if (s->nsets == 0)
        bfs_log(SHD_PROG, BFS_LOG_WARNING, "%s has no cluster/replicate: nothing to heal",
                s->volfile);
    pthread_t crawler;
    if (pthread_create(&crawler, NULL, shd_crawler_main, s) != 0) {
        fprintf(stderr, SHD_PROG ": cannot start the crawler thread\n");
        shd_graph_close(s);
        close(sfd);
        return 1;
    }
    shd_write_state(s);
    bfs_log(SHD_PROG, BFS_LOG_INFO, "self-heal daemon of %s started (pid %d, %d replica sets)",
            s->volume, (int)getpid(), s->nsets);
    bfs_daemon_ready(1);
    shd_wait_children(s, 10000);
    serve(s, sfd, a);
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(crawler, NULL);
    shd_write_state(s);
    shd_graph_close(s);
    close(sfd);
    bfs_log(SHD_PROG, BFS_LOG_INFO, "stopped");
    return 0;
}

static int run_once(struct shd *s, const struct args *a)
{
    if (shd_graph_open(s) < 0) {
        shd_graph_close(s);
        return 1;
    }
    int rc = a->info ? shd_info(s, *a->info ? a->info : "full", a->json)
                     : shd_resolve(s, a->resolve, a->file, a->source, a->json);
    fflush(stdout);
    shd_graph_close(s);
    return rc;
}

int main(int argc, char **argv)
{
    struct args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (access(a.volfile, R_OK) < 0) {
        fprintf(stderr, SHD_PROG ": cannot read volfile %s: %s\n", a.volfile, strerror(errno));
        return 1;
    }
    struct shd s = {.volfile = a.volfile, .state_file = a.state_file};
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.cond, NULL);
    bool daemon = !a.info && !a.resolve;
    if (daemon && !a.foreground && (rc = bfs_daemonize()) < 0) {
        fprintf(stderr, SHD_PROG ": cannot daemonize: %s\n", strerror(-rc));
        return 1;
    }
    if (setup_logging(&a, daemon) < 0) {
        bfs_daemon_ready(0);
        return 1;
    }
    rc = daemon ? run_daemon(&s, &a) : run_once(&s, &a);
    if (rc != 0)
        bfs_daemon_ready(0);
    bfs_log_close();
    pthread_mutex_destroy(&s.lock);
    pthread_cond_destroy(&s.cond);
    free(a.volfile);
    free(a.state_file);
    free(a.log_file);
    return rc;
}
