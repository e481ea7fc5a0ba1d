/*
 * supervisor.h — the process table, shared by supervisor.c (the thread,
 * spawn, stop), sup-volume.c (whole volumes, adoption) and sup-shd.c (the
 * self-heal daemon of each replicated volume). A table entry is a brick
 * (VOL-brick-N) or a volume's self-heal daemon (VOL-shd); both are
 * spawned, watched and restarted the same way. Every call here needs
 * m->lock held.
 */
#ifndef BFS_MGMT_SUPERVISOR_H
#define BFS_MGMT_SUPERVISOR_H

#include <stdbool.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/types.h>

#include "mgmt/mgmt.h"

enum bp_state {
    BP_DOWN = 0,  /* not running, not wanted (or not yet started) */
    BP_RUNNING,   /* process alive (online once its port file says so) */
    BP_STOPPING,  /* SIGTERM sent, waiting for the exit */
    BP_WAIT,      /* crashed; restart at restart_at_ms */
};

enum bp_kind {
    BP_BRICK = 0,
    BP_SHD,       /* brickfs-shd: no port; online while the process runs */
};

struct bproc {
    char name[160];   /* VOL-brick-N, or VOL-shd */
    enum bp_kind kind;
    char vol[BFS_VOLNAME_MAX + 1];
    int idx;
    char volfile[4200], pidfile[4200], portfile[4200], logfile[4200];
    char statefile[4200]; /* shd: its progress JSON */
    int interval;         /* shd: the --interval it was started with */
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
/* The entry of v's self-heal daemon (made on first use). */
struct bproc *bfs__sup_get_shd(struct bfs_mgmt *m, const struct bfs_volume *v);
struct bproc *bfs__sup_find(struct bfs_mgmt *m, const char *name);
void bfs__sup_wake(struct bfs_mgmt *m);
bool bfs__sup_online(const struct bproc *p);
/* "brick" or "self-heal daemon", for messages. */
const char *bfs__sup_what(const struct bproc *p);
/* Writes the volfiles and starts the brick (moving its port if taken). */
int bfs__sup_spawn(struct bfs_mgmt *m, struct bfs_volume *v, struct bproc *p,
                   struct bfs_err *e);
int bfs__sup_stop(struct bfs_mgmt *m, struct bproc *p, struct bfs_err *e);
/* posix_spawn of a daemon in its own session, stdin /dev/null, stdout and
 * stderr appended to logfile, default signals. 0 or -errno. */
int bfs__spawn_daemon(char *const argv[], const char *logfile, pid_t *pid);
/* posix_spawn of argv[0] with file actions fa and flags (POSIX_SPAWN_SETSID,
 * or POSIX_SPAWN_SETPGROUP: a group of its own), the default signal mask
 * and handlers (brickfsd blocks signals for sigwait; a child must not
 * inherit that). 0 or -errno. */
int bfs__spawn(char *const argv[], const posix_spawn_file_actions_t *fa, short flags,
               pid_t *pid);
/* After a spawn: pidfd, pid file, state RUNNING. Kills pid on failure. */
int bfs__sup_track(struct bfs_mgmt *m, struct bproc *p, pid_t pid, struct bfs_err *e);
/* Spawns v's self-heal daemon (sup-shd.c); fills e on failure. */
int bfs__sup_spawn_shd(struct bfs_mgmt *m, const struct bfs_volume *v, struct bproc *p,
                       struct bfs_err *e);
/* True if /proc/PID/cmdline is BIN ... OPT VAL ... (BIN's base name that of
 * bin; opt "--volfile" for bricks and self-heal daemons) (sup-volume.c). */
bool bfs__cmdline_matches(pid_t pid, const char *bin, const char *opt, const char *val);
/* A running process of p found by pid file or /proc scan, as a checked
 * pidfd, or -1 (sup-volume.c). */
int bfs__sup_find_running(struct bfs_mgmt *m, struct bproc *p, const char *bin, pid_t *pid_out);
bool bfs__sup_wait(struct bfs_mgmt *m, struct bproc *p, bool (*pred)(const struct bproc *),
                   uint64_t deadline_ms);

#endif
