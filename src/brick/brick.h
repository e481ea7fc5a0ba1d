/*
 * brick.h — helpers of the brickfs-brick program (src/brick/).
 */
#ifndef BFS_BRICK_H
#define BFS_BRICK_H

#include <stdio.h>

/* Writes "PID\n" to path atomically (temporary file + rename). 0 / -errno. */
int bfs_brick_write_pidfile(const char *path);

/* list-options.c: every option of every translator in bfs_xlator_dir(),
 * for --list-options. Returns the exit status (0, or 1 after printing why
 * on stderr). */
enum bfs_list_format { BFS_LIST_TEXT, BFS_LIST_JSON, BFS_LIST_MARKDOWN };
int bfs_brick_list_options(FILE *out, enum bfs_list_format fmt);

#endif
