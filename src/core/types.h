/*
 * types.h — the plain value types every fop carries: GFIDs, attributes
 * (iatt), locations, locks, directory entries, statfs results.
 *
 * These are values, not objects: they are copied freely and never own
 * memory except where a field says so (loc.name, dirent names).
 */
#ifndef BFS_CORE_TYPES_H
#define BFS_CORE_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* 128-bit identity of a file or directory, the same on every brick. */
struct bfs_gfid {
    uint8_t b[16];
};

#define BFS_GFID_STRLEN 37 /* 36 chars + NUL */

extern const struct bfs_gfid bfs_gfid_null;
extern const struct bfs_gfid bfs_gfid_root; /* 00..01 */

void bfs_gfid_generate(struct bfs_gfid *out);
/* The GFID of a new file or directory: random, except that runs of 256
 * consecutive calls in a process share the first two bytes (the handle
 * folder on a brick, types.c). */
void bfs_gfid_generate_entry(struct bfs_gfid *out);
bool bfs_gfid_is_null(const struct bfs_gfid *g);
bool bfs_gfid_is_root(const struct bfs_gfid *g);
bool bfs_gfid_eq(const struct bfs_gfid *a, const struct bfs_gfid *b);
/* Writes "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" into out[BFS_GFID_STRLEN]. */
char *bfs_gfid_fmt(const struct bfs_gfid *g, char out[BFS_GFID_STRLEN]);
/* Parses the canonical form; -EINVAL on anything else. */
int bfs_gfid_parse(const char *s, struct bfs_gfid *out);
/* 64-bit inode number derived from a GFID (root maps to 1). */
uint64_t bfs_gfid_to_ino(const struct bfs_gfid *g);

/* File attributes as a brick reports them. mode includes S_IFMT bits. */
struct bfs_iatt {
    struct bfs_gfid gfid;
    uint64_t ino;
    uint64_t dev;
    uint32_t mode;
    uint32_t nlink;
    uint32_t uid;
    uint32_t gid;
    uint64_t rdev;
    uint64_t size;
    uint64_t blocks; /* 512-byte units */
    uint32_t blksize;
    int64_t atime_sec, mtime_sec, ctime_sec;
    uint32_t atime_nsec, mtime_nsec, ctime_nsec;
};

/* setattr "valid" bits: which fields of the iatt argument to apply. */
enum {
    BFS_SET_MODE = 1u << 0,
    BFS_SET_UID = 1u << 1,
    BFS_SET_GID = 1u << 2,
    BFS_SET_ATIME = 1u << 3,
    BFS_SET_MTIME = 1u << 4,
    BFS_SET_ATIME_NOW = 1u << 5,
    BFS_SET_MTIME_NOW = 1u << 6,
    BFS_SET_CTIME = 1u << 7,
};

struct bfs_inode; /* inode.h */

/*
 * Where an operation applies. A server resolves by gfid when it is set,
 * otherwise by (pargfid, name). name is a single path component, never a
 * path; the server refuses "", ".", "..", and anything with '/' or NUL.
 * inode/parent are optional client-side hints, never sent on the wire.
 * path is for log messages only and may be NULL.
 */
struct bfs_loc {
    struct bfs_gfid gfid;
    struct bfs_gfid pargfid;
    const char *name;
    struct bfs_inode *inode;
    struct bfs_inode *parent;
    const char *path;
};

/* POSIX byte-range lock description (lk, inodelk). */
struct bfs_flock {
    uint32_t type;   /* F_RDLCK, F_WRLCK, F_UNLCK */
    uint32_t whence; /* always SEEK_SET on the wire */
    uint64_t start;
    uint64_t len;    /* 0 means to end of file */
    uint32_t pid;
    uint64_t owner;  /* lock owner (lk_owner), opaque */
};

/* lk / inodelk commands (values are ours, not fcntl's). */
enum {
    BFS_LK_GETLK = 1,
    BFS_LK_SETLK = 2,  /* non-blocking */
    BFS_LK_SETLKW = 3, /* blocking */
    BFS_LK_FLOCK = 4,  /* flag bit: BSD flock semantics */
};

/* entrylk */
enum { BFS_ENTRYLK_LOCK = 1, BFS_ENTRYLK_LOCK_NB = 2, BFS_ENTRYLK_UNLOCK = 3 };
enum { BFS_ENTRYLK_RDLCK = 1, BFS_ENTRYLK_WRLCK = 2 };

/* xattrop */
enum { BFS_XATTROP_ADD64 = 1, BFS_XATTROP_ADD32 = 2, BFS_XATTROP_GET_AND_SET = 3 };

/* lease */
struct bfs_lease {
    uint32_t cmd;  /* 1 get, 2 set, 3 unlock */
    uint32_t type; /* F_RDLCK / F_WRLCK / F_UNLCK */
    uint8_t id[16];
};

struct bfs_statvfs {
    uint64_t bsize, frsize;
    uint64_t blocks, bfree, bavail;
    uint64_t files, ffree, favail;
    uint64_t fsid, flag, namemax;
};

/* One directory entry. With readdirplus, attr is filled (attr.gfid set). */
struct bfs_dirent {
    char *name;       /* owned by the list */
    uint64_t d_off;   /* cookie to continue after this entry */
    uint32_t d_type;  /* DT_* */
    uint64_t d_ino;
    bool has_attr;
    struct bfs_iatt attr;
};

struct bfs_dirents {
    struct bfs_dirent *v;
    uint32_t count;
    uint32_t cap;
};

int bfs_dirents_add(struct bfs_dirents *l, const char *name, uint64_t d_off,
                    uint32_t d_type, uint64_t d_ino, const struct bfs_iatt *attr);
void bfs_dirents_free(struct bfs_dirents *l); /* frees entries; l reusable */
int bfs_dirents_copy(struct bfs_dirents *dst, const struct bfs_dirents *src);

/* A borrowed byte range (write payload, read result). */
struct bfs_bytes {
    const void *data;
    size_t len;
};

/* iatt <-> struct stat */
struct stat;
void bfs_iatt_from_stat(struct bfs_iatt *ia, const struct stat *st);
void bfs_iatt_to_stat(const struct bfs_iatt *ia, struct stat *st);

/* A single path component acceptable to a brick: 1..255 bytes, not "." or
 * "..", no '/'. Returns 0, -EINVAL or -ENAMETOOLONG. */
int bfs_name_check(const char *name);

#endif
