/*
 * fuse-session.c — the life of a mount: graph up, FUSE session up, serve,
 * and everything down again in the right order.
 *
 *   1. logging; the volfile is read from its file or fetched from brickfsd
 *      (fuse-volfile.c), the first graph generation built from it,
 *      initialised and activated (clients connect), on threads that never
 *      take SIGINT or SIGTERM (libfuse's handlers must run on the thread
 *      that waits for the loop, or the loop would not notice);
 *   2. we wait for the graph's CHILD_UP (up-timeout seconds), so that a
 *      mount that succeeds can be used at once; a mount from brickfsd then
 *      starts its watcher thread (fuse-switch.c: live graph switches);
 *   3. the session is created (libfuse validates the mount options), the
 *      kernel mount made, and the outcome reported to whoever waits (the
 *      parent of a daemon, see fuse-main.c);
 *   4. fuse_session_loop_mt serves requests until fusermount3 -u, umount or
 *      SIGINT/SIGTERM/SIGHUP;
 *   5. shutdown: unmount, stop the watcher, tell every generation its
 *      parent is gone, wait until no call is in flight (a callback must
 *      never find the session freed), destroy the session, release handles
 *      the kernel never released, free the nodes, every generation (which
 *      forgets every inode) and the process resources.
 *
 * The FUSE connection's parameters are set in op_init: 1 MiB reads and
 * writes, POSIX and flock locks, readdirplus, atomic O_TRUNC; the kernel
 * (not the brick) removes set-user-ID bits on write, with a setattr we
 * answer, so its cached mode stays right.
 *
 * Read-ahead: the kernel offers FUSE at most its default window (128 KiB)
 * in INIT, so sequential reads would reach the brick as 128 KiB requests,
 * one or two in flight, each a round trip. Like the kernel's NFS client,
 * which sizes a mount's read-ahead from its rsize, the mount sets its own
 * backing device's read_ahead_kb (option read-ahead, default 2 MiB: two
 * 1 MiB requests in flight). INIT resets that value when the kernel takes
 * our reply, so it is written on the first open or create (the kernel sends
 * none before INIT is done; a file's window is taken from the device after
 * its open returns). Needs root (sysfs); otherwise logged and left.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/event.h"
#include "fuse/fuse-bridge.h"

#define BFS_FUSE_WORKERS 8          /* disk work of an in-process storage/posix */
#define BFS_FUSE_DRAIN_SECS 10      /* shutdown: wait this long for calls in flight */

/* ---- libfuse's messages go to our log; the last error is kept for the
 * report of a failed mount ---- */

static char fuse_last_error[512];

__attribute__((format(printf, 2, 0))) static void fuse_log_to_ours(enum fuse_log_level level,
                                                                   const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = 0;
    enum bfs_log_level l = level <= FUSE_LOG_ERR       ? BFS_LOG_ERROR
                           : level <= FUSE_LOG_WARNING ? BFS_LOG_WARNING
                           : level <= FUSE_LOG_INFO    ? BFS_LOG_INFO
                                                       : BFS_LOG_DEBUG;
    if (l <= BFS_LOG_WARNING)
        snprintf(fuse_last_error, sizeof(fuse_last_error), "%s", msg);
    bfs_log("libfuse", l, "%s", msg);
}

/* Waits until no call is in flight; false if some still are after secs. */
static bool drain(struct bfs_fuse *fu, int secs)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += secs;
    int rc = 0;
    pthread_mutex_lock(&fu->lock);
    while (fu->inflight && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&fu->cond, &fu->lock, &deadline);
    uint64_t left = fu->inflight;
    pthread_mutex_unlock(&fu->lock);
    if (left)
        bfs_log("fuse", BFS_LOG_ERROR, "%llu calls still in flight after %d s: exiting "
                "without freeing the graph", (unsigned long long)left, secs);
    return left == 0;
}

/* ---- FUSE init and destroy ---- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    conn->max_write = BFS_FUSE_MAX_IO;
    conn->max_read = BFS_FUSE_MAX_IO; /* = the max_read mount option */
    if (conn->max_readahead > BFS_FUSE_MAX_IO)
        conn->max_readahead = BFS_FUSE_MAX_IO;
    conn->time_gran = 1;
    unsigned want = FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_READDIRPLUS |
                    FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_ATOMIC_O_TRUNC |
                    FUSE_CAP_ASYNC_READ | FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_AUTO_INVAL_DATA;
    conn->want |= want & conn->capable;
    /* Not wanted: the writeback cache (other clients write too), splice
     * (no gain for copies we make anyway), and killpriv (see the top). */
    conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_SPLICE_READ |
                              FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE |
                              FUSE_CAP_HANDLE_KILLPRIV);
    bfs_log("fuse", BFS_LOG_INFO, "FUSE %u.%u: max_write %u, max_read %u, max_readahead %u, "
            "locks %s, readdirplus %s", conn->proto_major, conn->proto_minor, conn->max_write,
            conn->max_read, conn->max_readahead,
            (conn->want & FUSE_CAP_POSIX_LOCKS) ? "posix" : "none",
            (conn->want & FUSE_CAP_READDIRPLUS) ? "on" : "off");
}

static void op_destroy(void *userdata)
{
    bfs_log("fuse", BFS_LOG_INFO, "FUSE session ends");
}

static const struct fuse_lowlevel_ops bfs_fuse_ops = {
    .init = op_init,
    .destroy = op_destroy,
    .lookup = bfs_fuse_lookup,
    .forget = bfs_fuse_forget,
    .forget_multi = bfs_fuse_forget_multi,
    .getattr = bfs_fuse_getattr,
    .setattr = bfs_fuse_setattr,
    .readlink = bfs_fuse_readlink,
    .mknod = bfs_fuse_mknod,
    .mkdir = bfs_fuse_mkdir,
    .unlink = bfs_fuse_unlink,
    .rmdir = bfs_fuse_rmdir,
    .symlink = bfs_fuse_symlink,
    .rename = bfs_fuse_rename,
    .link = bfs_fuse_link,
    .open = bfs_fuse_open,
    .create = bfs_fuse_create,
    .read = bfs_fuse_read,
    .write = bfs_fuse_write,
    .flush = bfs_fuse_flush,
    .release = bfs_fuse_release,
    .fsync = bfs_fuse_fsync,
    .opendir = bfs_fuse_opendir,
    .readdir = bfs_fuse_readdir,
    .readdirplus = bfs_fuse_readdirplus,
    .releasedir = bfs_fuse_releasedir,
    .fsyncdir = bfs_fuse_fsyncdir,
    .statfs = bfs_fuse_statfs,
    .setxattr = bfs_fuse_setxattr,
    .getxattr = bfs_fuse_getxattr,
    .listxattr = bfs_fuse_listxattr,
    .removexattr = bfs_fuse_removexattr,
    .access = bfs_fuse_access,
    .getlk = bfs_fuse_getlk,
    .setlk = bfs_fuse_setlk,
    .flock = bfs_fuse_flock,
    .fallocate = bfs_fuse_fallocate,
    .lseek = bfs_fuse_lseek,
    .copy_file_range = bfs_fuse_copy_file_range,
};

/* ---- setup and teardown ---- */

static int open_log(struct bfs_fuse *fu)
{
    const struct bfs_fuse_opts *o = fu->opts;
    enum bfs_log_level lvl = BFS_LOG_INFO;
    if (o->log_level)
        (void)bfs_log_level_parse(o->log_level, &lvl); /* validated by the parser */
    bfs_log_set_level(lvl);
    if (o->log_file) {
        int rc = bfs_log_open(o->log_file);
        if (rc < 0)
            bfs_fuse_report(&fu->report_fd, 1, "cannot open log file %s: %s", o->log_file,
                            strerror(-rc));
        return rc;
    }
    if (fu->report_fd < 0)
        return 0; /* foreground: stderr */
    /* a daemon without log-file: /var/log/brickfs/mnt-a-b.log for /mnt/a/b */
    const char *dir = getenv("BRICKFS_LOG_DIR");
    char path[4096], name[1024];
    size_t k = 0;
    for (const char *p = o->mountpoint + 1; *p && k + 1 < sizeof(name); p++)
        name[k++] = *p == '/' ? '-' : *p;
    name[k] = 0;
    snprintf(path, sizeof(path), "%s/%s.log", dir && *dir ? dir : "/var/log/brickfs", name);
    (void)mkdir(dir && *dir ? dir : "/var/log/brickfs", 0755);
    if (bfs_log_open(path) < 0)
        (void)bfs_log_open("/dev/null"); /* a mount is worth more than its log */
    return 0;
}

/* The volfile FILE into vf. */
static int read_volfile(const char *path, struct bfs_fuse_volfile *vf, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        int rc = -errno;
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return rc;
    }
    size_t cap = 0, n;
    memset(vf, 0, sizeof(*vf));
    do {
        if (vf->len + 4096 > cap) {
            char *nb = realloc(vf->text, cap = cap * 2 + 4096 + 1);
            if (!nb) {
                fclose(f);
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
            }
            vf->text = nb;
        }
        n = fread(vf->text + vf->len, 1, cap - vf->len - 1, f);
        vf->len += n;
    } while (n > 0);
    fclose(f);
    vf->text[vf->len] = 0;
    snprintf(vf->source, sizeof(vf->source), "%s", path);
    return 0;
}

/* The first volfile: from its file, or from brickfsd. Reports failures. */
static int first_volfile(struct bfs_fuse *fu, struct bfs_fuse_volfile *vf, char *source,
                         size_t srclen)
{
    const struct bfs_fuse_opts *o = fu->opts;
    char err[1024];
    if (o->volfile) {
        int rc = read_volfile(o->volfile, vf, err, sizeof(err));
        if (rc < 0)
            bfs_fuse_report(&fu->report_fd, 1, "cannot load the volfile: %s", err);
        snprintf(source, srclen, "%s", o->volfile);
        return rc;
    }
    int rc = bfs_fuse_volfile_fetch(fu, "", vf, err, sizeof(err));
    if (rc == 200) {
        snprintf(source, srclen, "%s:/%s", vf->source, o->volname);
        bfs_log("fuse", BFS_LOG_INFO, "volfile of %s from %s, revision %s", o->volname,
                vf->source, vf->etag);
        return 0;
    }
    if (rc == -ENOENT)
        bfs_fuse_report(&fu->report_fd, 1, "cannot get the volfile of volume %s: %s",
                        o->volname, err);
    else
        bfs_fuse_report(&fu->report_fd, 1, "cannot get the volfile of volume %s: no volfile "
                        "server answered: %s", o->volname, err);
    return rc < 0 ? rc : -EPROTO;
}

/* Builds and starts the first graph generation; 0 once the volume is up.
 * Reports failures. */
static int start_graph(struct bfs_fuse *fu)
{
    char err[1024] = "", source[600];
    struct bfs_fuse_volfile vf;
    struct bfs_fuse_graph *gr = NULL;
    int rc = first_volfile(fu, &vf, source, sizeof(source));
    if (rc < 0)
        return rc;
    if (!(fu->notify = bfs_fuse_notify_start(fu))) {
        free(vf.text);
        bfs_fuse_report(&fu->report_fd, 1, "cannot start a thread: out of resources");
        return -ENOMEM;
    }
    rc = bfs_fuse_graph_new(fu, vf.text, vf.len, source, vf.etag, &gr, err, sizeof(err));
    free(vf.text);
    if (rc < 0) {
        bfs_log("fuse", BFS_LOG_ERROR, "%s", err);
        bfs_fuse_report(&fu->report_fd, 1, "cannot load the volfile: %s", err);
        return rc;
    }
    if ((rc = bfs_fuse_nodes_new(fu, gr)) < 0) {
        bfs_fuse_graph_free(gr);
        bfs_fuse_report(&fu->report_fd, 1, "out of memory");
        return rc;
    }
    if (bfs_fuse_graph_wait_up(gr, fu->opts->up_timeout) < 0) {
        bfs_fuse_report(&fu->report_fd, 1, "volume %s did not come up within %d s "
                        "(no brick reachable? details in the log)", gr->g->top->name,
                        fu->opts->up_timeout);
        return -ETIMEDOUT;
    }
    (void)bfs_fuse_graph_first_lookup(gr);
    if (fu->opts->volname && fu->opts->volfile_poll_ms > 0 && (rc = bfs_fuse_watch_start(fu)) < 0) {
        bfs_fuse_report(&fu->report_fd, 1, "cannot start a thread: %s", strerror(-rc));
        return rc;
    }
    return 0;
}

/* Creates the session and mounts; reports the outcome either way. */
/* ---- read-ahead ---- */

/* The "MAJOR:MINOR" of the last mount on path in /proc/self/mountinfo (the
 * mount just made: a later one on the same path would hide it anyway). */
static int find_bdi(const char *path, char *out, size_t len)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[4096], dev[32], mnt[4096];
    int found = -ENOENT;
    if (!f)
        return -errno;
    while (fgets(line, sizeof(line), f)) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT ... ; octal escapes in paths */
        if (sscanf(line, "%*d %*d %31s %*s %4095s", dev, mnt) != 2)
            continue;
        char *w = mnt;
        for (const char *r = mnt; *r; w++) {
            if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] && r[3]) {
                *w = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
                r += 4;
            } else {
                *w = *r++;
            }
        }
        *w = 0;
        if (strcmp(mnt, path) == 0 && strlen(dev) < len) {
            strcpy(out, dev);
            found = 0;
        }
    }
    fclose(f);
    if (found < 0)
        bfs_log("fuse", BFS_LOG_WARNING, "%s not found in /proc/self/mountinfo: read-ahead "
                "left at the kernel's default", path);
    return found;
}

void bfs_fuse_readahead_apply(struct bfs_fuse *fu)
{
    if (!__atomic_load_n(&fu->ra_pending, __ATOMIC_ACQUIRE) ||
        !__atomic_exchange_n(&fu->ra_pending, 0, __ATOMIC_ACQ_REL))
        return;
    char path[96];
    unsigned long long kb = (unsigned long long)(fu->opts->read_ahead + 1023) / 1024;
    snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", fu->bdi);
    FILE *f = fopen(path, "we");
    int ok = f && fprintf(f, "%llu\n", kb) > 0;
    if (f && fclose(f) != 0)
        ok = 0;
    if (ok)
        bfs_log("fuse", BFS_LOG_INFO, "read-ahead %llu KiB (%s)", kb, path);
    else
        bfs_log("fuse", BFS_LOG_WARNING, "cannot set read-ahead in %s: %s (the kernel's "
                "default stays)", path, strerror(errno));
}

static int start_session(struct bfs_fuse *fu)
{
    const struct bfs_fuse_opts *o = fu->opts;
    const char *fsname = o->fsname ? o->fsname : o->spec ? o->spec : fu->active->g->top->name;
    char *mopts = bfs_fuse_opts_libfuse(o, fsname);
    char *argv[] = {(char *)"brickfs-mount", (char *)"-o", mopts, NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, argv);
    if (!mopts) {
        bfs_fuse_report(&fu->report_fd, 1, "out of memory");
        return -ENOMEM;
    }
    bfs_log("fuse", BFS_LOG_INFO, "mounting on %s with -o %s", o->mountpoint, mopts);
    fu->se = fuse_session_new(&args, &bfs_fuse_ops, sizeof(bfs_fuse_ops), fu);
    fuse_opt_free_args(&args);
    free(mopts);
    if (!fu->se) {
        bfs_fuse_report(&fu->report_fd, 1, "cannot start the FUSE session: %s",
                        fuse_last_error[0] ? fuse_last_error : "bad mount options");
        return -EINVAL;
    }
    if (fuse_set_signal_handlers(fu->se) < 0) {
        bfs_fuse_report(&fu->report_fd, 1, "cannot install signal handlers");
        return -EINVAL;
    }
    if (fuse_session_mount(fu->se, o->mountpoint) < 0) {
        bfs_fuse_report(&fu->report_fd, 1, "cannot mount on %s: %s", o->mountpoint,
                        fuse_last_error[0] ? fuse_last_error : "see the log");
        fuse_remove_signal_handlers(fu->se);
        return -EIO;
    }
    bfs_log("fuse", BFS_LOG_INFO, "mounted %s on %s", fsname, o->mountpoint);
    if (o->read_ahead && find_bdi(o->mountpoint, fu->bdi, sizeof(fu->bdi)) == 0)
        __atomic_store_n(&fu->ra_pending, 1, __ATOMIC_RELEASE);
    bfs_fuse_report(&fu->report_fd, 0, "mounted");
    return 0;
}

static int serve(struct bfs_fuse *fu)
{
    struct fuse_loop_config *cfg = fuse_loop_cfg_create();
    if (!cfg)
        return -ENOMEM;
    fuse_loop_cfg_set_max_threads(cfg, 16);
    int rc = fuse_session_loop_mt(fu->se, cfg);
    fuse_loop_cfg_destroy(cfg);
    if (rc > 0)
        bfs_log("fuse", BFS_LOG_INFO, "signal %d: unmounting", rc);
    else if (rc < 0)
        bfs_log("fuse", BFS_LOG_ERROR, "FUSE loop failed: %s", strerror(-rc));
    return rc < 0 ? rc : 0;
}

/* Frees what exists; leaks on purpose when calls are still in flight,
 * because their callbacks would touch freed memory. */
static void teardown(struct bfs_fuse *fu, bool mounted)
{
    if (mounted) {
        fuse_session_unmount(fu->se);
        fuse_remove_signal_handlers(fu->se);
    }
    bfs_fuse_watch_stop(fu); /* no switch from here on */
    /* clients disconnect, pending calls fail; no lock needed: only the
     * watcher changed these */
    if (fu->active)
        bfs_graph_deactivate(fu->active->g);
    for (struct bfs_fuse_graph *r = fu->retired; r; r = r->next)
        bfs_graph_deactivate(r->g);
    if (!drain(fu, BFS_FUSE_DRAIN_SECS))
        return;
    bfs_fuse_notify_stop(fu->notify);
    fu->notify = NULL;
    if (fu->se)
        fuse_session_destroy(fu->se);
    fu->se = NULL;
    bfs_fuse_fh_drop_all(fu);
    bfs_fuse_nodes_free(fu);
    while (fu->retired) {
        struct bfs_fuse_graph *r = fu->retired;
        fu->retired = r->next;
        bfs_fuse_graph_free(r);
    }
    bfs_fuse_graph_free(fu->active);
    fu->active = NULL;
    bfs_proc_free(fu->proc);
    fu->proc = NULL;
}

int bfs_fuse_run(struct bfs_fuse_opts *opts, int report_fd)
{
    struct bfs_fuse fu;
    memset(&fu, 0, sizeof(fu));
    fu.opts = opts;
    fu.report_fd = report_fd;
    fu.fhs.next = fu.fhs.prev = &fu.fhs;
    pthread_mutex_init(&fu.lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&fu.cond, &ca);
    pthread_condattr_destroy(&ca);
    fuse_set_log_func(fuse_log_to_ours);
    signal(SIGPIPE, SIG_IGN);

    if (open_log(&fu) < 0)
        return 1;
    bfs_log("fuse", BFS_LOG_INFO, "brickfs-mount %s on %s (pid %d)",
            opts->volfile ? opts->volfile : opts->spec, opts->mountpoint, (int)getpid());

    /* Threads started from here on never take the stop signals. */
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, &old);
    fu.proc = bfs_proc_new("brickfs-mount", BFS_FUSE_WORKERS);
    int rc = fu.proc ? start_graph(&fu) : -ENOMEM;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!fu.proc)
        bfs_fuse_report(&fu.report_fd, 1, "cannot start the event loop: out of resources");

    bool mounted = false;
    if (rc == 0 && (rc = start_session(&fu)) == 0) {
        mounted = true;
        if (fu.report_fd < 0 && !opts->foreground) {
            /* daemon: the parent has gone; nothing may write to its terminal */
            int null = open("/dev/null", O_RDWR);
            if (null >= 0) {
                dup2(null, STDERR_FILENO);
                close(null);
            }
        }
        rc = serve(&fu);
    }
    teardown(&fu, mounted);
    bfs_log("fuse", BFS_LOG_INFO, "exiting (%s)", rc < 0 ? strerror(-rc) : "unmounted");
    bfs_log_close();
    return rc < 0 ? 1 : 0;
}
