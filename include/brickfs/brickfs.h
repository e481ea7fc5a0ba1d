/*
 * brickfs.h — libbrickfs, the public C client library of brickfs.
 *
 * This is the only public header of libbrickfs. It lets a program use a
 * brickfs volume with calls shaped like POSIX ones, without a FUSE mount:
 *
 *     brickfs_t *fs = brickfs_new_from_volfile("/etc/brickfs/vol.client.vol");
 *     if (!fs || brickfs_init(fs) < 0)
 *         err(1, "brickfs");
 *     brickfs_fd_t *fd = brickfs_creat(fs, "/hello.txt", 0644);
 *     brickfs_write(fd, "hi\n", 3);
 *     brickfs_close(fd);
 *     brickfs_fini(fs);
 *
 * Link with -lbrickfs. The reference for every function (synopsis,
 * description, return value, errors) is docs/libbrickfs.md; examples/hello.c
 * is a complete program.
 *
 * Conventions
 * -----------
 * Errors: like POSIX. A function that returns int or ssize_t returns -1 and
 * sets errno on failure; one that returns a pointer returns NULL and sets
 * errno. errno is left alone on success, except where a function says
 * otherwise. Functions that return 0/-1 are written "returns 0" below.
 *
 * Handles: brickfs_t (a volume), brickfs_fd_t (an open file) and
 * brickfs_dir_t (an open directory stream) are opaque. A brickfs_fd_t or
 * brickfs_dir_t belongs to the brickfs_t that opened it and must be closed
 * before that brickfs_t is finished (brickfs_fini closes whatever is left).
 *
 * Paths: absolute, or relative to the root of the volume (there is no
 * current directory: "a/b" is "/a/b"). Symbolic links are followed in every
 * component but the last, and in the last one unless the function says
 * otherwise (brickfs_lstat, brickfs_lchown, O_NOFOLLOW, ...); ".." is the
 * parent of the directory reached so far; at most 40 links are followed per
 * call (ELOOP). A component longer than 255 bytes or a path longer than 4095
 * bytes fails with ENAMETOOLONG.
 *
 * Threads: every function may be called from many threads at once on the
 * same brickfs_t. An individual brickfs_fd_t may be shared by threads (its
 * file offset is protected); a brickfs_dir_t, like a DIR *, must be used by
 * one thread at a time.
 *
 * Identity: each call runs on the bricks with the credentials of the calling
 * thread: those set with brickfs_set_creds() on that thread for that
 * brickfs_t, else the process's effective uid, effective gid and
 * supplementary groups. Permission checks happen on the bricks.
 *
 * Large files: off_t must be 64 bits (on 32-bit systems compile with
 * -D_FILE_OFFSET_BITS=64).
 */
#ifndef BRICKFS_BRICKFS_H
#define BRICKFS_BRICKFS_H

#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__SIZEOF_LONG__) && __SIZEOF_LONG__ < 8 &&                                      \
    (!defined(_FILE_OFFSET_BITS) || _FILE_OFFSET_BITS != 64)
#error "libbrickfs needs a 64-bit off_t: compile with -D_FILE_OFFSET_BITS=64"
#endif

#define BRICKFS_VERSION_MAJOR 0
#define BRICKFS_VERSION_MINOR 1

struct timespec; /* <time.h> declares it only for POSIX compilations */

typedef struct brickfs brickfs_t;        /* a volume, from new to fini */
typedef struct brickfs_fd brickfs_fd_t;  /* an open file (or directory) */
typedef struct brickfs_dir brickfs_dir_t; /* an open directory stream */

/* ------------------------------------------------------------------ */
/* Volume handles                                                      */
/* ------------------------------------------------------------------ */

/*
 * Creates a handle for the client graph described by the volfile at path
 * (read now) or given as text (len bytes, copied; need not end in NUL).
 * Nothing connects until brickfs_init(). NULL and errno on failure
 * (ENOENT/EACCES/... reading the file, ENOMEM, EINVAL for a NULL argument
 * or a volfile that does not parse; the parse error is logged).
 */
brickfs_t *brickfs_new_from_volfile(const char *path);
brickfs_t *brickfs_new_from_volfile_text(const char *text, size_t len);

/* Log levels for brickfs_set_logging. */
enum {
    BRICKFS_LOG_NONE = 0,
    BRICKFS_LOG_CRITICAL = 1,
    BRICKFS_LOG_ERROR = 2,
    BRICKFS_LOG_WARNING = 3,
    BRICKFS_LOG_INFO = 4, /* the default, or $BRICKFS_LOG_LEVEL */
    BRICKFS_LOG_DEBUG = 5,
    BRICKFS_LOG_TRACE = 6,
};

/*
 * Sends the library's log to the file at path (appended; NULL or "-" means
 * stderr, the default) and keeps messages up to level. Logging is
 * process-wide: the last call wins for every brickfs_t of the process.
 * Returns 0; EINVAL (bad level), or the error of opening path.
 */
int brickfs_set_logging(brickfs_t *fs, const char *path, int level);

/*
 * Sets an option of the handle; must be called before brickfs_init.
 *   "connect-timeout"  seconds brickfs_init waits for the volume to come up
 *                      (default 10, or $BRICKFS_CONNECT_TIMEOUT)
 *   "io-threads"       worker threads for blocking work (default 4, 1..64)
 * Returns 0; EINVAL (unknown key or bad value), EBUSY (after brickfs_init).
 */
int brickfs_set_option(brickfs_t *fs, const char *key, const char *value);

/*
 * Builds the translator graph, initialises it, starts connecting and waits
 * until the volume is up (at most "connect-timeout" seconds). Returns 0;
 * EINVAL if the graph cannot be built (unknown translator or option: logged),
 * the init error of a translator, ENOTCONN if nothing came up in time (the
 * graph keeps trying: calls may succeed later; brickfs_fini still must be
 * called), EALREADY if called twice.
 */
int brickfs_init(brickfs_t *fs);

/*
 * Closes any file and directory still open on fs, disconnects, stops the
 * library's threads and frees everything. fs is invalid afterwards.
 * NULL is accepted. Returns 0.
 */
int brickfs_fini(brickfs_t *fs);

/*
 * Sets the credentials (uid, gid and ngroups supplementary groups, at most
 * 256) with which the calling thread's later calls on fs run. Threads never
 * see each other's credentials. Returns 0; EINVAL (ngroups out of range,
 * or groups NULL with ngroups > 0), ENOMEM.
 */
int brickfs_set_creds(brickfs_t *fs, uid_t uid, gid_t gid, int ngroups, const gid_t *groups);
/* Back to the default (the process's euid, egid and groups). Returns 0. */
int brickfs_reset_creds(brickfs_t *fs);

/* Sets the file mode creation mask of fs (default 022) and returns the old
 * one, like umask(2). It applies to every thread. */
mode_t brickfs_umask(brickfs_t *fs, mode_t mask);

/* ------------------------------------------------------------------ */
/* Files                                                               */
/* ------------------------------------------------------------------ */

/*
 * Opens path with open(2) flags: O_RDONLY/O_WRONLY/O_RDWR, O_CREAT (the mode
 * argument, masked by brickfs_umask, is then required), O_EXCL, O_TRUNC,
 * O_APPEND, O_DIRECTORY, O_NOFOLLOW, O_SYNC, O_DSYNC; others are ignored. A
 * directory may be opened read-only (for fstat, fsync, fchmod, ...).
 * Returns a new handle, or NULL with errno: ENOENT, EEXIST (O_CREAT|O_EXCL),
 * EISDIR (a directory for writing), ENOTDIR, ELOOP (O_NOFOLLOW on a link,
 * or too many links), EACCES, ENAMETOOLONG, EINVAL, ENOTCONN, EIO, ...
 */
brickfs_fd_t *brickfs_open(brickfs_t *fs, const char *path, int flags, ...);
/* brickfs_open(fs, path, O_CREAT | O_WRONLY | O_TRUNC, mode). */
brickfs_fd_t *brickfs_creat(brickfs_t *fs, const char *path, mode_t mode);

/*
 * Flushes (errors from the bricks, e.g. a failed delayed write, are reported
 * here), releases the byte-range locks of this handle and frees it. The
 * handle is gone even when -1 is returned. Returns 0; EIO, ENOTCONN, ...
 */
int brickfs_close(brickfs_fd_t *fd);

/* Reading and writing, at the handle's offset (read/write, which move it)
 * or at offset (pread/pwrite, which do not). Any size and any 64-bit offset.
 * Return the number of bytes transferred (read: 0 at end of file; may be
 * short only at end of file or after an error), or -1: EBADF (not open for
 * that), EISDIR, EINVAL (negative offset), EFBIG, ENOSPC, EDQUOT, EIO, ... */
ssize_t brickfs_read(brickfs_fd_t *fd, void *buf, size_t count);
ssize_t brickfs_write(brickfs_fd_t *fd, const void *buf, size_t count);
ssize_t brickfs_pread(brickfs_fd_t *fd, void *buf, size_t count, off_t offset);
ssize_t brickfs_pwrite(brickfs_fd_t *fd, const void *buf, size_t count, off_t offset);

/* Like lseek(2), with SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA and SEEK_HOLE
 * (the last two asked of the bricks). Returns the new offset; EINVAL, ENXIO
 * (SEEK_DATA/SEEK_HOLE beyond the end of file), EOVERFLOW. */
off_t brickfs_lseek(brickfs_fd_t *fd, off_t offset, int whence);

int brickfs_fsync(brickfs_fd_t *fd);
int brickfs_fdatasync(brickfs_fd_t *fd);
int brickfs_ftruncate(brickfs_fd_t *fd, off_t length);
int brickfs_fstat(brickfs_fd_t *fd, struct stat *st);
int brickfs_fchmod(brickfs_fd_t *fd, mode_t mode);
/* uid or gid (uid_t)-1 / (gid_t)-1 leaves that one unchanged. */
int brickfs_fchown(brickfs_fd_t *fd, uid_t uid, gid_t gid);
/* times as for futimens(2): NULL, or times[0] the access and times[1] the
 * modification time, each may have tv_nsec UTIME_NOW or UTIME_OMIT. */
int brickfs_futimens(brickfs_fd_t *fd, const struct timespec *times);

/* fallocate(2) with its mode bits (FALLOC_FL_KEEP_SIZE, ...). */
int brickfs_fallocate(brickfs_fd_t *fd, int mode, off_t offset, off_t len);
/* Deallocates [offset, offset+len) keeping the size (punches a hole). */
int brickfs_discard(brickfs_fd_t *fd, off_t offset, off_t len);
/* Writes zeros over [offset, offset+len), extending the file if needed. */
int brickfs_zerofill(brickfs_fd_t *fd, off_t offset, off_t len);

/*
 * Byte-range locks: cmd F_GETLK, F_SETLK or F_SETLKW (F_OFD_GETLK,
 * F_OFD_SETLK, F_OFD_SETLKW are synonyms) and a struct flock as for
 * fcntl(2) (l_whence SEEK_SET, SEEK_CUR or SEEK_END). Locks belong to the
 * handle (open file description semantics, like Linux OFD locks): two
 * handles conflict even in one process, and a handle's locks go when it is
 * closed. F_GETLK answers with l_whence SEEK_SET. Returns 0; EAGAIN
 * (F_SETLK conflict), EDEADLK, EINTR, EBADF (a lock type the handle's
 * access mode does not allow), EINVAL, ENOLCK, ...
 */
int brickfs_posix_lock(brickfs_fd_t *fd, int cmd, struct flock *lock);

/* ------------------------------------------------------------------ */
/* Names and attributes                                                */
/* ------------------------------------------------------------------ */

int brickfs_stat(brickfs_t *fs, const char *path, struct stat *st);
int brickfs_lstat(brickfs_t *fs, const char *path, struct stat *st);
/* mode is F_OK or a mask of R_OK, W_OK, X_OK, checked with the thread's
 * credentials (not the real uid). */
int brickfs_access(brickfs_t *fs, const char *path, int mode);
int brickfs_truncate(brickfs_t *fs, const char *path, off_t length);

int brickfs_mkdir(brickfs_t *fs, const char *path, mode_t mode);
int brickfs_mknod(brickfs_t *fs, const char *path, mode_t mode, dev_t dev);
int brickfs_rmdir(brickfs_t *fs, const char *path);
int brickfs_unlink(brickfs_t *fs, const char *path);
int brickfs_rename(brickfs_t *fs, const char *oldpath, const char *newpath);
int brickfs_link(brickfs_t *fs, const char *oldpath, const char *newpath);
int brickfs_symlink(brickfs_t *fs, const char *target, const char *linkpath);
/* Like readlink(2): no terminating NUL; truncates to size. */
ssize_t brickfs_readlink(brickfs_t *fs, const char *path, char *buf, size_t size);

int brickfs_chmod(brickfs_t *fs, const char *path, mode_t mode);
int brickfs_chown(brickfs_t *fs, const char *path, uid_t uid, gid_t gid);
int brickfs_lchown(brickfs_t *fs, const char *path, uid_t uid, gid_t gid);
int brickfs_utimens(brickfs_t *fs, const char *path, const struct timespec *times);
int brickfs_lutimens(brickfs_t *fs, const char *path, const struct timespec *times);

int brickfs_statvfs(brickfs_t *fs, const char *path, struct statvfs *buf);

/* ------------------------------------------------------------------ */
/* Extended attributes (as setxattr(2) and friends)                    */
/* ------------------------------------------------------------------ */

/* flags: 0, XATTR_CREATE (EEXIST if present), XATTR_REPLACE (ENODATA if
 * absent). The l* forms do not follow a final symbolic link. */
int brickfs_setxattr(brickfs_t *fs, const char *path, const char *name, const void *value,
                     size_t size, int flags);
int brickfs_lsetxattr(brickfs_t *fs, const char *path, const char *name, const void *value,
                      size_t size, int flags);
int brickfs_fsetxattr(brickfs_fd_t *fd, const char *name, const void *value, size_t size,
                      int flags);
/* Returns the value's size. size 0: only that (value is not touched);
 * otherwise ERANGE if the value does not fit; ENODATA if there is none. */
ssize_t brickfs_getxattr(brickfs_t *fs, const char *path, const char *name, void *value,
                         size_t size);
ssize_t brickfs_lgetxattr(brickfs_t *fs, const char *path, const char *name, void *value,
                          size_t size);
ssize_t brickfs_fgetxattr(brickfs_fd_t *fd, const char *name, void *value, size_t size);
/* Names, each NUL-terminated, one after the other; size rules as above. */
ssize_t brickfs_listxattr(brickfs_t *fs, const char *path, char *list, size_t size);
ssize_t brickfs_llistxattr(brickfs_t *fs, const char *path, char *list, size_t size);
ssize_t brickfs_flistxattr(brickfs_fd_t *fd, char *list, size_t size);
int brickfs_removexattr(brickfs_t *fs, const char *path, const char *name);
int brickfs_lremovexattr(brickfs_t *fs, const char *path, const char *name);
int brickfs_fremovexattr(brickfs_fd_t *fd, const char *name);

/* ------------------------------------------------------------------ */
/* Directories                                                         */
/* ------------------------------------------------------------------ */

/* NULL with errno: ENOENT, ENOTDIR, EACCES, ELOOP, ENAMETOOLONG, ... */
brickfs_dir_t *brickfs_opendir(brickfs_t *fs, const char *path);
/*
 * The next entry, or NULL at the end (errno unchanged) or on error (errno
 * set): set errno to 0 before the call to tell them apart, as with
 * readdir(3). The entry (d_ino, d_off, d_type, d_name) stays valid until the
 * next call on dir. The list includes "." and ".." when the bricks report
 * them. brickfs_readdirplus also fills *st (if st is not NULL) with the
 * entry's attributes, without following a symbolic link.
 */
struct dirent *brickfs_readdir(brickfs_dir_t *dir);
struct dirent *brickfs_readdirplus(brickfs_dir_t *dir, struct stat *st);
/* Position after the last entry returned (the d_off of that entry), to give
 * to brickfs_seekdir later. */
long brickfs_telldir(brickfs_dir_t *dir);
void brickfs_seekdir(brickfs_dir_t *dir, long loc);
void brickfs_rewinddir(brickfs_dir_t *dir);
int brickfs_closedir(brickfs_dir_t *dir);

#ifdef __cplusplus
}
#endif

#endif
