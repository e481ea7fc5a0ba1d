/*
 * mem.h — internal interface of storage/memory, an in-memory storage
 * translator for graph tests: a whole namespace (files, directories,
 * symlinks, device nodes, hard links, xattrs) kept in process memory, so a
 * graph can be exercised without a disk.
 *
 * Objects. A struct mem_inode per GFID, in a hash while it has a name
 * (nlink > 0); directories hold their entries (name -> GFID) in insertion
 * order, each with a stable d_off cookie for readdir. An inode that loses
 * its last name is unhashed, but survives while fds hold it (opens counts
 * the fds whose context points at it); the last of both frees it.
 *
 * Concurrency: one mutex (priv->lock) guards the whole store. Replies are
 * always sent with it released: synchronously from the fop, or with option
 * `async on` from the event loop (bfs__mem_reply copies the reply and posts
 * it), so tests can exercise both kinds of answer.
 *
 * Placement: a new entry takes the GFID in xdata "gfid-req" (16 bytes)
 * when present, so cluster translators can give all bricks the same GFID.
 */
#ifndef BFS_XL_MEMORY_H
#define BFS_XL_MEMORY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/fops-util.h"
#include "core/xlator.h"

#define MEM_GFID_REQ_KEY "gfid-req"

/* Runs the following block with priv->lock held. The block must not
 * return, break or goto out of itself (the unlock would be skipped). */
#define LOCKED(priv)                                                                         \
    for (int once__ = (pthread_mutex_lock(&(priv)->lock), 1); once__;                       \
         once__ = (pthread_mutex_unlock(&(priv)->lock), 0))

struct mem_dirent {
    char *name;
    struct bfs_gfid gfid;
    uint64_t off; /* readdir cookie; increasing in list order */
};

struct mem_inode {
    struct mem_inode *hnext;
    struct bfs_iatt attr;      /* gfid, mode, nlink, size, times... */
    bool hashed;
    uint64_t opens;            /* fds whose context points here */
    /* regular files */
    char *data;
    size_t cap;
    /* symlinks */
    char *target;
    /* directories */
    struct mem_dirent *ents;
    size_t nents, capents;
    uint64_t next_off;
    struct bfs_gfid parent;
    struct bfs_dict *xattrs;   /* NULL until the first setxattr */
};

struct mem_priv {
    pthread_mutex_t lock;
    struct mem_inode **buckets;
    size_t nbuckets;           /* power of two */
    size_t count;
    bool async;
    uint64_t max_file_size;
    struct bfs_loop *loop;
};

/* ---- mem-store.c: the inode store (priv->lock held unless noted) ---- */
int bfs__mem_store_init(struct mem_priv *priv);
void bfs__mem_store_fini(struct mem_priv *priv);
struct mem_inode *bfs__mem_find(struct mem_priv *priv, const struct bfs_gfid *g);
/* New inode, hashed, nlink 0: gfid from xdata "gfid-req" or random.
 * -EEXIST if that gfid is taken. */
int bfs__mem_new(struct mem_priv *priv, struct bfs_frame *frame, struct bfs_dict *xdata,
                 uint32_t mode, struct mem_inode **out);
/* nlink went to 0: unhash, and free unless an fd still holds it. */
void bfs__mem_unlinked(struct mem_priv *priv, struct mem_inode *mi);
void bfs__mem_put_open(struct mem_priv *priv, struct mem_inode *mi); /* opens-- */

/* The target of loc: by gfid if set (-ESTALE if gone), else
 * (pargfid, name) (-ENOENT). *parent, if asked, gets the parent when
 * resolved by name (else NULL). */
int bfs__mem_resolve(struct mem_priv *priv, const struct bfs_loc *loc, struct mem_inode **out,
                     struct mem_inode **parent);
/* The parent directory of loc and a checked name, for creating fops. */
int bfs__mem_resolve_parent(struct mem_priv *priv, const struct bfs_loc *loc,
                            struct mem_inode **parent);
/* The inode behind an fd: its context, else its inode's gfid. */
struct mem_inode *bfs__mem_fd_inode(struct bfs_xl *xl, struct bfs_fd *fd);

struct mem_dirent *bfs__mem_dir_find(struct mem_inode *dir, const char *name);
int bfs__mem_dir_add(struct mem_inode *dir, const char *name, const struct bfs_gfid *g);
void bfs__mem_dir_del(struct mem_inode *dir, struct mem_dirent *e);

void bfs__mem_touch(struct mem_inode *mi, bool a, bool m, bool c); /* set times to now */
void bfs__mem_stat(const struct mem_inode *mi, struct bfs_iatt *out);
int bfs__mem_resize(struct mem_priv *priv, struct mem_inode *mi, uint64_t size);

/* ---- mem.c ---- */
/* Answers frame now, or from the event loop with option async. */
void bfs__mem_reply(struct bfs_xl *xl, struct bfs_frame *frame, int fop, int rc,
                    const void *rep);
/* Points the fd's context at mi (opens++) so release can drop it. */
void bfs__mem_fd_bind(struct bfs_xl *xl, struct bfs_fd *fd, struct mem_inode *mi);

/* ---- fops: mem-entry.c (namespace), mem-data.c (files, attributes),
 * mem-dir.c (directory reading), mem-xattr.c ---- */
int bfs__mem_lookup(struct bfs_frame *, struct bfs_xl *, const struct bfs_lookup_req *);
int bfs__mem_mknod(struct bfs_frame *, struct bfs_xl *, const struct bfs_mknod_req *);
int bfs__mem_mkdir(struct bfs_frame *, struct bfs_xl *, const struct bfs_mkdir_req *);
int bfs__mem_symlink(struct bfs_frame *, struct bfs_xl *, const struct bfs_symlink_req *);
int bfs__mem_unlink(struct bfs_frame *, struct bfs_xl *, const struct bfs_unlink_req *);
int bfs__mem_rmdir(struct bfs_frame *, struct bfs_xl *, const struct bfs_rmdir_req *);
int bfs__mem_link(struct bfs_frame *, struct bfs_xl *, const struct bfs_link_req *);
int bfs__mem_rename(struct bfs_frame *, struct bfs_xl *, const struct bfs_rename_req *);
int bfs__mem_readlink(struct bfs_frame *, struct bfs_xl *, const struct bfs_readlink_req *);
int bfs__mem_create(struct bfs_frame *, struct bfs_xl *, const struct bfs_create_req *);

int bfs__mem_stat_fop(struct bfs_frame *, struct bfs_xl *, const struct bfs_stat_req *);
int bfs__mem_fstat(struct bfs_frame *, struct bfs_xl *, const struct bfs_fstat_req *);
int bfs__mem_access(struct bfs_frame *, struct bfs_xl *, const struct bfs_access_req *);
int bfs__mem_open(struct bfs_frame *, struct bfs_xl *, const struct bfs_open_req *);
int bfs__mem_read(struct bfs_frame *, struct bfs_xl *, const struct bfs_read_req *);
int bfs__mem_write(struct bfs_frame *, struct bfs_xl *, const struct bfs_write_req *);
int bfs__mem_truncate(struct bfs_frame *, struct bfs_xl *, const struct bfs_truncate_req *);
int bfs__mem_ftruncate(struct bfs_frame *, struct bfs_xl *, const struct bfs_ftruncate_req *);
int bfs__mem_flush(struct bfs_frame *, struct bfs_xl *, const struct bfs_flush_req *);
int bfs__mem_fsync(struct bfs_frame *, struct bfs_xl *, const struct bfs_fsync_req *);
int bfs__mem_setattr(struct bfs_frame *, struct bfs_xl *, const struct bfs_setattr_req *);
int bfs__mem_fsetattr(struct bfs_frame *, struct bfs_xl *, const struct bfs_fsetattr_req *);
int bfs__mem_statfs(struct bfs_frame *, struct bfs_xl *, const struct bfs_statfs_req *);

int bfs__mem_opendir(struct bfs_frame *, struct bfs_xl *, const struct bfs_opendir_req *);
int bfs__mem_readdir(struct bfs_frame *, struct bfs_xl *, const struct bfs_readdir_req *);
int bfs__mem_fsyncdir(struct bfs_frame *, struct bfs_xl *, const struct bfs_fsyncdir_req *);

int bfs__mem_setxattr(struct bfs_frame *, struct bfs_xl *, const struct bfs_setxattr_req *);
int bfs__mem_fsetxattr(struct bfs_frame *, struct bfs_xl *, const struct bfs_fsetxattr_req *);
int bfs__mem_getxattr(struct bfs_frame *, struct bfs_xl *, const struct bfs_getxattr_req *);
int bfs__mem_fgetxattr(struct bfs_frame *, struct bfs_xl *, const struct bfs_fgetxattr_req *);
int bfs__mem_removexattr(struct bfs_frame *, struct bfs_xl *,
                         const struct bfs_removexattr_req *);
int bfs__mem_fremovexattr(struct bfs_frame *, struct bfs_xl *,
                          const struct bfs_fremovexattr_req *);
int bfs__mem_xattrop(struct bfs_frame *, struct bfs_xl *, const struct bfs_xattrop_req *);
int bfs__mem_fxattrop(struct bfs_frame *, struct bfs_xl *, const struct bfs_fxattrop_req *);
/* Copies into *out the inode's xattrs named by the keys of want (lookup
 * xdata asks for xattrs this way). priv->lock held. */
int bfs__mem_xattrs_wanted(const struct mem_inode *mi, const struct bfs_dict *want,
                           struct bfs_dict **out);

#endif
