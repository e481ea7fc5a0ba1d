/*
 * index.h — private to features/index (index.c: the translator;
 * index-known.c: what it knows of inodes' counters without reading them;
 * index-base.c: entries as hard links to a base file).
 */
#ifndef BFS_XL_INDEX_H
#define BFS_XL_INDEX_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/xlator.h"

#define IX_INTERNAL_KEY "brickfs-internal"
#define IX_CREATED_KEY "brickfs-created" /* storage/posix's create reply: a new file */
#define IX_VKEY_PENDING "brickfs.index.pending"
#define IX_VKEY_OFFSET "brickfs.index.offset"
#define IX_VKEY_EOF "brickfs.index.eof"
#define IX_VKEY_PURGE "brickfs.index.purge"
#define IX_VPREFIX "brickfs.index."
#define IX_X_OFFSET "index-offset"
#define IX_X_COUNT "index-count"
#define IX_COUNT_DEF 1024
#define IX_COUNT_MAX 65536
#define IX_MAX_WATCH 16
#define IX_BUCKETS 64
#define IX_BASE_NAMELEN 48      /* "base-" and a GFID, with room */

struct ix_call {
    struct ix_call *next;       /* in the queue of its busy GFID */
    struct bfs_frame *frame;
    struct bfs_xl *xl;
    int fop;                    /* BFS_FOP_XATTROP, FXATTROP, or SETXATTR: a purge */
    void *req;                  /* our copy */
    void *rep;                  /* the child's answer, kept during the check */
    int rc;
    struct bfs_gfid gfid;
    bool added;                 /* the entry was made before the call went down */
};

struct ix_busy {
    struct ix_busy *next;       /* in its bucket */
    struct bfs_gfid gfid;
    struct ix_call *head, *tail; /* waiting (the running call is not here) */
};

struct ix_priv {
    char *dir;                  /* .../.brickfs/indices */
    int pending_fd;             /* O_DIRECTORY on dir/pending */
    char *watch[IX_MAX_WATCH];  /* key names; a trailing '*' makes a prefix */
    int nwatch;
    pthread_mutex_t lock;       /* busy */
    struct ix_busy *busy[IX_BUCKETS];
    struct ix_known_table *known; /* index-known.c */
    /* index-base.c */
    int base_dfd;               /* O_DIRECTORY on dir/base, or -1: entries are plain files */
    bool no_links;              /* linkat is not possible here: plain files */
    int64_t link_max;           /* option link-max: a base is full after that many (0: fs) */
    pthread_mutex_t base_lock;  /* base_name, base_gen */
    char base_name[IX_BASE_NAMELEN]; /* the current base; "" if none */
    uint64_t base_gen;          /* bumped at each change of the current base */
    uint64_t base_links;        /* links made to the current base (relaxed atomic) */
    uint64_t n_added, n_removed, n_listed, n_checks, n_bases; /* statistics (relaxed atomics) */
};

struct ix_known_table;

/* Is key one of the watched names? */
bool ix_watched(const struct ix_priv *p, const char *key);

/* ---- index-known.c ----
 * The watched keys of an inode that are non-zero, known exactly from a full
 * read of its xattrs and kept current by every xattrop reply after it (all
 * changes to those keys go through the index, one at a time per GFID), so
 * that the reply of a post-op can decide about the entry without reading
 * the inode again. Bounded: when full, everything is forgotten. */
int ix_known_init(struct ix_priv *p);
void ix_known_fini(struct ix_priv *p);
/* After a full read: the inode's xattrs are all. */
void ix_known_set(struct ix_priv *p, const struct bfs_gfid *g, const struct bfs_dict *all);
void ix_known_forget(struct ix_priv *p, const struct bfs_gfid *g);
/* Applies the new values of watched keys (vals) to a known inode: 1 if some
 * watched key is non-zero now, 0 if none, -1 if the inode is not known. */
int ix_known_apply(struct ix_priv *p, const struct bfs_gfid *g, const struct bfs_dict *vals);

/* ---- index-base.c ----
 * Makes the index folder's base/ (dir) and chooses or makes the current base
 * file. base_dfd must be -1 and base_lock initialised before. -errno: entries
 * will be plain files. */
int ix_base_init(struct bfs_xl *xl, struct ix_priv *p, const char *dir);
void ix_base_fini(struct ix_priv *p);
/* Makes the pending entry named entry: a link to the current base (a new
 * base when it is full), else a plain file. 0, -EEXIST, or -errno. */
int ix_entry_make(struct bfs_xl *xl, struct ix_priv *p, const char *entry);

#endif
