/*
 * posix-graph.h — graph tests of storage/posix alone (posix-graph.c):
 * test_posix.c (the fops one by one) and test_posix_handles.c (the handle
 * store: adoption, re-creation with the same GFID, deep resolution,
 * consistency under concurrent changes). One brick per program: a scratch
 * folder /tmp/bfs-NAME-XXXXXX made by pg_init, a one-translator graph over
 * it started by pg_start, both gone after pg_fini. Link: every C file of
 * tests/lib is linked into every test program (Makefile, TESTLIB_OBJS).
 *
 * Needs root (trusted xattrs, credential switching).
 */
#ifndef BFS_TESTS_POSIX_GRAPH_H
#define BFS_TESTS_POSIX_GRAPH_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/graph.h"

#define PG_GFID_KEY "trusted.brickfs.gfid"

/* The program's brick (valid between pg_init / pg_start and pg_fini). */
extern struct bfs_proc *pg_proc;
extern struct bfs_graph *pg_graph;    /* pg_start's, NULL before */
extern struct bfs_xl *pg_xl;          /* its storage/posix translator */
extern char pg_brick[PATH_MAX];       /* the brick folder */
/* Calls as root, and as uid/gid 1000. */
extern struct bfs_stack *pg_root_st, *pg_user_st;

/* Not root: prints the TAP plan that skips the program and returns false. */
bool pg_can_run(void);
/* umask 022, the brick folder /tmp/bfs-NAME-XXXXXX, the process (4
 * threads), the stacks; logs at error level. 0 or -errno. */
int pg_init(const char *name);
/* A storage/posix graph whose directory is dir (NULL: no directory option),
 * initialised; 0 or the error of the parser (printed as a TAP comment) or
 * of init. */
int pg_build(const char *dir, struct bfs_graph **out);
/* pg_build with more lines for the volume (" option KEY VALUE\n"...). */
int pg_build_with(const char *dir, const char *options, struct bfs_graph **out);
/* pg_build over pg_brick into pg_graph / pg_xl. */
int pg_start(void);
/* pg_build_with over pg_brick into pg_graph / pg_xl. */
int pg_start_with(const char *options);
/* Frees pg_graph (NULL-safe); pg_graph and pg_xl become NULL. */
void pg_stop(void);
/* Whether pg_xl's dump contains needle; prints the dump when not. */
bool pg_dump_has(const char *needle);
/* Frees the graph, the stacks and the process; removes the brick folder. */
void pg_fini(void);

/* ---- locations and what is on disk ---- */
struct bfs_loc pg_L(const struct bfs_gfid *par, const char *name);
struct bfs_loc pg_LG(const struct bfs_gfid *g);
/* The brick's path of rel (one of 4 rotating buffers). */
const char *pg_disk(const char *rel);
/* The path of g's handle in .brickfs (one of 2 rotating buffers). */
const char *pg_hpath(const struct bfs_gfid *g);
bool pg_handle_exists(const struct bfs_gfid *g);
/* The GFID xattr of rel; 0 or -1. */
int pg_disk_gfid(const char *rel, struct bfs_gfid *g);
/* An xdata asking for GFID g (the caller's reference). */
struct bfs_dict *pg_gfid_req(const struct bfs_gfid *g);

/* ---- fops through pg_xl (results as the fop's: >= 0 or -errno) ---- */
int pg_lookup(struct bfs_stack *st, struct bfs_loc loc, struct bfs_iatt *attr);
int pg_mkdir(struct bfs_stack *st, const struct bfs_gfid *par, const char *name, uint32_t mode,
             struct bfs_iatt *attr);
/* Takes xdata. *fdp (fdp may be NULL) gets the open fd on success. */
int pg_create_x(struct bfs_stack *st, const struct bfs_gfid *par, const char *name,
                uint32_t flags, uint32_t mode, uint32_t umask, struct bfs_dict *xdata,
                struct bfs_fd **fdp, struct bfs_iatt *attr);
/* O_RDWR, 0644 */
int pg_create(struct bfs_stack *st, const struct bfs_gfid *par, const char *name,
              struct bfs_fd **fdp, struct bfs_iatt *attr);
int pg_unlink(struct bfs_stack *st, const struct bfs_gfid *par, const char *name);
int pg_rmdir(struct bfs_stack *st, const struct bfs_gfid *par, const char *name);
/* As root. */
int pg_rename(const struct bfs_gfid *op, const char *on, const struct bfs_gfid *np,
              const char *nn, uint32_t flags);

/* ---- the handle store ---- */
/* A regular file's handle goes just after its last unlink answered
 * (posix-defer.c): polls (up to 20 s) until no removal is outstanding. */
void pg_deferred_done(void);
/* Every handle is alive: a file's has another name (nlink >= 2) and the
 * GFID of its name; a directory's resolves by GFID. Returns the number of
 * problems (each printed as a TAP comment). */
int pg_check_store(void);

#endif
