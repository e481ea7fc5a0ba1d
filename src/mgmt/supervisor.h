/*
 * supervisor.h — the brick process table, shared by supervisor.c (the
 * thread, spawn, stop) and sup-volume.c (whole volumes, adoption). Every
 * call here needs m->lock held.
 */
#ifndef BFS_MGMT_SUPERVISOR_H
#define BFS_MGMT_SUPERVISOR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "mgmt/mgmt.h"

enum bp_state {
    BP_DOWN = 0,  /* not running, not wanted (or not yet started) */
    BP_RUNNING,   /* process alive (online once its port file says so) */
    BP_STOPPING,  /* SIGTERM sent, waiting for the exit */
    BP_WAIT,      /* crashed; restart at restart_at_ms */
};

struct bproc {
    char name[160];   /* VOL-brick-N */
    char vol[BFS_VOLNAME_MAX + 1];
    int idx;
    char volfile[4200], pidfile[4200], portfile[4200], logfile[4200];
    pid_t pid;
    int pidfd;        /* -1 when not running; closed only by the thread */
    bool child;       /* ours to waitpid (false when adopted) */
    enum bp_state state;
    int port;         /* the port it was started with */
    uint64_t started_ms, restart_at_ms;
    unsigned backoff_ms;
    int restarts;
    struct bproc *next;
};

struct bfs_sup {
    pthread_t thread;
    int evfd;
    bool quit;
    struct bproc *procs;
};

struct bproc *bfs__sup_get(struct bfs_mgmt *m, const struct bfs_volume *v, int idx);
void bfs__sup_wake(struct bfs_mgmt *m);
bool bfs__sup_online(const struct bproc *p);
/* Writes the volfiles and starts the brick (moving its port if taken). */
int bfs__sup_spawn(struct bfs_mgmt *m, struct bfs_volume *v, struct bproc *p,
                   struct bfs_err *e);
int bfs__sup_stop(struct bfs_mgmt *m, struct bproc *p, struct bfs_err *e);
bool bfs__sup_wait(struct bfs_mgmt *m, struct bproc *p, bool (*pred)(const struct bproc *),
                   uint64_t deadline_ms);

#endif
