/*
 * daemon.h — turning a program into a daemon that reports its start
 * (brickfs-brick, brickfs-shd).
 *
 * The classic double fork, with a pipe from the daemon back to the process
 * that was started: that process waits until the daemon has built its
 * graph and listens (or failed to), and exits with the matching status, so
 * `PROGRAM --volfile X && next-step` is reliable. Startup errors are still
 * printed on the terminal because the daemon keeps stderr until it reports
 * ready. One daemon per process: the pipe's end is process state.
 *
 * Also what both daemons do the same way around it: the default log file
 * and the signalfd their main thread waits on.
 */
#ifndef BFS_CORE_DAEMON_H
#define BFS_CORE_DAEMON_H

/*
 * Detaches from the terminal: fork, setsid, fork again. The first process
 * stays until the daemon reports its start (bfs_daemon_ready) and exits
 * with 0 if it started, 1 if not; it never returns. The daemon returns 0
 * here with stdin and stdout on /dev/null, stderr still on the terminal,
 * and / as its working folder. Call before creating any thread. -errno if
 * the first fork fails.
 */
int bfs_daemonize(void);

/* In the daemon: tells the waiting parent ok (1) or failed (0); on ok,
 * stderr moves to /dev/null too. Harmless when not daemonized, and after
 * the first call. */
void bfs_daemon_ready(int ok);

/* The default log file of a daemon started from volfile:
 * $BRICKFS_LOG_DIR (or /var/log/brickfs) /SUB/NAME.log, NAME the volfile's
 * base name without ".vol"; the folders are made if missing. A malloc'ed
 * path, NULL when out of memory. */
char *bfs_daemon_log_file(const char *volfile, const char *sub);

/* Blocks SIGTERM, SIGINT, SIGHUP and `extra` (0: none) in this thread and
 * every thread created after (call before creating any), ignores SIGPIPE,
 * and returns a close-on-exec signalfd for them, or -errno. */
int bfs_daemon_signalfd(int extra);

#endif
