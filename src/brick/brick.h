/*
 * brick.h — helpers of the brickfs-brick program (src/brick/).
 */
#ifndef BFS_BRICK_H
#define BFS_BRICK_H

#include <stdio.h>

/*
 * Detaches from the terminal: fork, setsid, fork again. The first process
 * stays until the daemon reports its start (bfs_brick_daemon_ready) and
 * exits with 0 if it started, 1 if not; it never returns. The daemon
 * returns 0 here with stdin and stdout on /dev/null and stderr still on
 * the terminal, so startup errors can be printed. Call before creating
 * any thread. -errno if the first fork fails.
 */
int bfs_brick_daemonize(void);
/* In the daemon: tells the waiting parent ok (1) or failed (0); on ok,
 * stderr moves to /dev/null too. Harmless when not daemonized. */
void bfs_brick_daemon_ready(int ok);

/* Writes "PID\n" to path atomically (temporary file + rename). 0 / -errno. */
int bfs_brick_write_pidfile(const char *path);

/* list-options.c: every option of every translator in bfs_xlator_dir(),
 * for --list-options. Returns the exit status (0, or 1 after printing why
 * on stderr). */
enum bfs_list_format { BFS_LIST_TEXT, BFS_LIST_JSON, BFS_LIST_MARKDOWN };
int bfs_brick_list_options(FILE *out, enum bfs_list_format fmt);

#endif
