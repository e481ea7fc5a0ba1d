/*
 * api.h — internals of libbrickfs shared by the files of src/api (never installed).
 *
 * Objects and their lives:
 *   struct brickfs     one volume: the graph, its process resources (event
 *                      loop, workers), the "is it up" state fed by
 *                      graph->on_event, and the list of open handles so
 *                      that brickfs_fini can close what users left open.
 *                      Created by brickfs_new_*, freed by brickfs_fini.
 *   struct brickfs_fd  one open file or directory: a struct bfs_fd of the
 *                      graph (ref'd; its last unref runs the translators'
 *                      release), the offset and the lock owner. Created by
 *                      open/creat/opendir, freed by close/closedir/fini.
 *   struct brickfs_dir a directory stream over a brickfs_fd plus a buffer
 *                      of entries from the last readdir fop.
 *
 * Every public call builds one struct bfs_stack (the thread's credentials,
 * api-creds.c), resolves its path by lookups from the root (api-resolve.c)
 * and runs blocking bfs_sync_FOP calls on graph->top. Internally every
 * function returns 0/positive or -errno; only the public entry points turn
 * that into -1 + errno (API_RET).
 */
#ifndef BFS_API_API_H
#define BFS_API_API_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#include "brickfs/brickfs.h"
#include "core/graph.h"
#include "core/xlator.h"

#define API_MAX_SYMLINKS 40
#define API_PATH_MAX 4096 /* including the NUL */
#define API_NAME_MAX 255
/* Largest read/write sent as one fop; bigger transfers are split. */
#define API_IO_CHUNK (4u << 20)
/* Bytes asked of one readdir fop. */
#define API_READDIR_SIZE (64u << 10)

struct brickfs {
    uint64_t id;                 /* unique per process, keys thread creds */
    char *volfile;               /* text, until the graph is built */
    size_t volfile_len;
    char *source;                /* file name for messages */
    struct bfs_proc *proc;
    struct bfs_graph *graph;
    int connect_timeout_s;
    int io_threads;
    bool inited;
    mode_t umask;                /* atomic */
    uint64_t next_unique;        /* atomic: stack->unique */
    uint64_t next_owner;         /* atomic: lock owners of handles */

    pthread_mutex_t lock;        /* guards up, events and the handle list */
    pthread_cond_t cond;
    bool up;
    struct brickfs_fd *fds;      /* every open handle (files and dirs) */
};

struct brickfs_fd {
    struct brickfs *fs;
    struct bfs_fd *fd;           /* ref'd */
    int flags;                   /* open(2) flags as given */
    bool is_dir;
    uint64_t lk_owner;
    struct bfs_gfid gfid;
    pthread_mutex_t lock;        /* guards offset */
    off_t offset;
    struct brickfs_fd *prev, *next; /* fs->fds, under fs->lock */
    struct brickfs_dir *stream;  /* the directory stream owning this handle */
};

/* ---- api-fs.c ---- */
/* Adds/removes fd to/from fs's list of open handles. */
void bfs__api_track(struct brickfs *fs, struct brickfs_fd *fd);
void bfs__api_untrack(struct brickfs *fs, struct brickfs_fd *fd);
/* Checks the handle is usable: -EINVAL if fs is NULL, -ENOTCONN before init. */
int bfs__api_ready(struct brickfs *fs);

/* ---- api-creds.c ---- */
/* A new stack with the calling thread's credentials for fs (ref'd); NULL on
 * ENOMEM. */
struct bfs_stack *bfs__api_stack(struct brickfs *fs);
/* Drops the credentials of every thread for fs (at brickfs_fini). */
void bfs__api_creds_forget(struct brickfs *fs);

/* ---- api-resolve.c ---- */
enum {
    RES_FOLLOW = 1 << 0,   /* follow a symbolic link in the last component */
    RES_MAY_MISS = 1 << 1, /* a missing last component is not an error */
    RES_ANCESTORS = 1 << 2 /* record the directories above the target */
};

/*
 * The outcome of walking a path. "target" is what the path names. When the
 * path ends in a name, parent/pargfid/name say where that name lives;
 * when it names a directory without a name of its own (the root, or a last
 * component "." or ".."), name is "" and dotname says which.
 */
struct api_res {
    struct bfs_gfid pargfid;     /* directory holding the target (root for root) */
    struct bfs_inode *parent;    /* ref'd */
    char name[API_NAME_MAX + 1]; /* last component, "" if none */
    char dotname[3];             /* "", ".", ".." or "/" (root) when name is "" */
    bool exists;
    bool trailing_slash;         /* the path ended in '/' */
    struct bfs_iatt attr;        /* of the target when it exists */
    struct bfs_inode *inode;     /* ref'd when it exists */
    struct bfs_gfid *anc;        /* RES_ANCESTORS: directories from root to
                                  * the parent, malloc'd */
    int nanc;
};

/* Walks path. Returns 0 (res filled; release with bfs__api_res_clear) or
 * -errno (res cleared). Without RES_MAY_MISS a missing target is -ENOENT. */
int bfs__api_resolve(struct brickfs *fs, struct bfs_stack *st, const char *path, int flags,
                     struct api_res *res);
void bfs__api_res_clear(struct api_res *res);
/* A loc naming the resolved target (gfid + parent + name). */
void bfs__api_res_loc(const struct api_res *res, struct bfs_loc *loc, const char *path);
/* A loc naming the entry res->name inside res's parent (for creating ops). */
void bfs__api_res_newloc(const struct api_res *res, struct bfs_loc *loc, const char *path);
/* The start of most path calls: ready check, a stack, resolve. On 0 the
 * caller owns *st and *res and ends with bfs__api_path_end; on error
 * nothing is held (*st NULL). */
int bfs__api_path_begin(struct brickfs *fs, const char *path, int flags,
                        struct bfs_stack **st, struct api_res *res);
void bfs__api_path_end(struct bfs_stack *st, struct api_res *res);
/* Inode of the graph's table for attr (ref'd); NULL with -EIO/-ENOMEM in *rc. */
struct bfs_inode *bfs__api_inode(struct brickfs *fs, const struct bfs_iatt *attr, int *rc);

/* ---- api-file.c ---- */
/* Common part of open and opendir: a handle over a resolved target. */
int bfs__api_open_resolved(struct brickfs *fs, struct bfs_stack *st, struct api_res *res,
                           int flags, const char *path, struct brickfs_fd **out);
/* Releases the handle without flushing (fini, closedir). */
void bfs__api_fd_free(struct brickfs_fd *fd);
/* A stack for calls on fd: credentials + the handle's lock owner. */
struct bfs_stack *bfs__api_fd_stack(struct brickfs_fd *fd);

/* ---- api-dir.c ---- */
/* Frees a directory stream's own memory (its handle is freed by the caller). */
void bfs__api_stream_free(struct brickfs_dir *dir);

/* ---- helpers ---- */
void bfs__api_times_to_iatt(const struct timespec *times, struct bfs_iatt *ia,
                            uint32_t *valid);

/* -errno -> -1 with errno set; >= 0 passes. */
static inline long bfs__api_ret(long rc)
{
    if (rc < 0) {
        errno = (int)-rc;
        return -1;
    }
    return rc;
}

#endif
