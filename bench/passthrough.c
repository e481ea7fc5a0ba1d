/*
 * passthrough.c — the smallest useful FUSE file system: it mirrors one local
 * folder. `make bench` mounts it next to brickfs to measure the ceiling that
 * any FUSE client can reach on this machine (the cost of the kernel round
 * trips alone), so brickfs's figures read as a ratio to it.
 *
 *   passthrough SOURCE MOUNTPOINT [FUSE options, e.g. -f -o entry_timeout=1]
 *
 * libfuse3's high-level, path-based API; multithreaded (fuse_main's default);
 * 1 MiB max write, max read and readahead, as brickfs-mount; libfuse's
 * default attribute and entry timeouts (1 s), as a plain client would have.
 * bench/run.sh adds -o default_permissions, which brickfs-mount always uses,
 * so that the kernel does the same permission checks (and the same
 * attribute refreshes they need) in front of both.
 *
 * Every path is resolved relative to a descriptor of SOURCE opened before
 * mounting (openat and friends), so the daemon's working folder does not
 * matter. Open files and folders keep their descriptor (DIR stream) in
 * fi->fh from open/opendir/create until release/releasedir.
 */
#define FUSE_USE_VERSION 31

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>

#define PT_MAX_IO (1u << 20)

static int pt_src = -1; /* descriptor of SOURCE, for the *at() calls */

/* FUSE paths start with '/'; the *at() calls want them relative to pt_src. */
static const char *pt_rel(const char *path)
{
    while (*path == '/')
        path++;
    return *path ? path : ".";
}

/* The xattr calls have no *at() form: go through /proc/self/fd. */
static int pt_proc_path(char *buf, size_t len, const char *path)
{
    int n = snprintf(buf, len, "/proc/self/fd/%d/%s", pt_src, pt_rel(path));
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static void *pt_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
    cfg->use_ino = 1;
    cfg->nullpath_ok = 1;
    conn->max_write = PT_MAX_IO;
    conn->max_read = PT_MAX_IO; /* = the max_read mount option main() adds */
    conn->max_readahead = PT_MAX_IO;
    return NULL;
}

static int pt_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    int rc = fi ? fstat((int)fi->fh, st) : fstatat(pt_src, pt_rel(path), st, AT_SYMLINK_NOFOLLOW);
    return rc < 0 ? -errno : 0;
}

static int pt_access(const char *path, int mask)
{
    return faccessat(pt_src, pt_rel(path), mask, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static int pt_readlink(const char *path, char *buf, size_t size)
{
    ssize_t n = readlinkat(pt_src, pt_rel(path), buf, size - 1);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return 0;
}

struct pt_dir {
    DIR *dp;
    struct dirent *entry; /* read but not yet given to the kernel */
    off_t offset;
};

static int pt_opendir(const char *path, struct fuse_file_info *fi)
{
    struct pt_dir *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    int fd = openat(pt_src, pt_rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || !(d->dp = fdopendir(fd))) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        free(d);
        return -err;
    }
    fi->fh = (uint64_t)(uintptr_t)d;
    return 0;
}

static int pt_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t offset,
                      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
    struct pt_dir *d = (struct pt_dir *)(uintptr_t)fi->fh;

    if (offset != d->offset) {
        seekdir(d->dp, offset);
        d->entry = NULL;
        d->offset = offset;
    }
    for (;;) {
        if (!d->entry) {
            errno = 0;
            d->entry = readdir(d->dp);
            if (!d->entry)
                return errno ? -errno : 0;
        }
        struct stat st = { .st_ino = d->entry->d_ino, .st_mode = (mode_t)d->entry->d_type << 12 };
        off_t next = telldir(d->dp);
        if (filler(buf, d->entry->d_name, &st, next, 0))
            return 0; /* buffer full: keep this entry for the next call */
        d->entry = NULL;
        d->offset = next;
    }
}

static int pt_releasedir(const char *path, struct fuse_file_info *fi)
{
    struct pt_dir *d = (struct pt_dir *)(uintptr_t)fi->fh;
    closedir(d->dp);
    free(d);
    return 0;
}

static int pt_mknod(const char *path, mode_t mode, dev_t rdev)
{
    return mknodat(pt_src, pt_rel(path), mode, rdev) < 0 ? -errno : 0;
}

static int pt_mkdir(const char *path, mode_t mode)
{
    return mkdirat(pt_src, pt_rel(path), mode) < 0 ? -errno : 0;
}

static int pt_unlink(const char *path)
{
    return unlinkat(pt_src, pt_rel(path), 0) < 0 ? -errno : 0;
}

static int pt_rmdir(const char *path)
{
    return unlinkat(pt_src, pt_rel(path), AT_REMOVEDIR) < 0 ? -errno : 0;
}

static int pt_symlink(const char *target, const char *path)
{
    return symlinkat(target, pt_src, pt_rel(path)) < 0 ? -errno : 0;
}

static int pt_rename(const char *from, const char *to, unsigned int flags)
{
    return renameat2(pt_src, pt_rel(from), pt_src, pt_rel(to), flags) < 0 ? -errno : 0;
}

static int pt_link(const char *from, const char *to)
{
    return linkat(pt_src, pt_rel(from), pt_src, pt_rel(to), 0) < 0 ? -errno : 0;
}

static int pt_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
    int rc = fi ? fchmod((int)fi->fh, mode) : fchmodat(pt_src, pt_rel(path), mode, 0);
    return rc < 0 ? -errno : 0;
}

static int pt_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
    int rc = fi ? fchown((int)fi->fh, uid, gid)
                : fchownat(pt_src, pt_rel(path), uid, gid, AT_SYMLINK_NOFOLLOW);
    return rc < 0 ? -errno : 0;
}

static int pt_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
    if (fi)
        return ftruncate((int)fi->fh, size) < 0 ? -errno : 0;
    int fd = openat(pt_src, pt_rel(path), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = ftruncate(fd, size) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

static int pt_utimens(const char *path, const struct timespec ts[2], struct fuse_file_info *fi)
{
    int rc = fi ? futimens((int)fi->fh, ts)
                : utimensat(pt_src, pt_rel(path), ts, AT_SYMLINK_NOFOLLOW);
    return rc < 0 ? -errno : 0;
}

static int pt_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
    int fd = openat(pt_src, pt_rel(path), fi->flags | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    fi->fh = (uint64_t)fd;
    return 0;
}

static int pt_open(const char *path, struct fuse_file_info *fi)
{
    int fd = openat(pt_src, pt_rel(path), fi->flags | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    fi->fh = (uint64_t)fd;
    return 0;
}

/* Hand libfuse the descriptor, not bytes: it reads straight into its reply. */
static int pt_read_buf(const char *path, struct fuse_bufvec **bufp, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    struct fuse_bufvec *src = malloc(sizeof(*src));
    if (!src)
        return -ENOMEM;
    *src = (struct fuse_bufvec)FUSE_BUFVEC_INIT(size);
    src->buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    src->buf[0].fd = (int)fi->fh;
    src->buf[0].pos = off;
    *bufp = src;
    return 0;
}

static int pt_write_buf(const char *path, struct fuse_bufvec *buf, off_t off,
                        struct fuse_file_info *fi)
{
    struct fuse_bufvec dst = FUSE_BUFVEC_INIT(fuse_buf_size(buf));
    dst.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    dst.buf[0].fd = (int)fi->fh;
    dst.buf[0].pos = off;
    return (int)fuse_buf_copy(&dst, buf, FUSE_BUF_SPLICE_NONBLOCK);
}

static int pt_statfs(const char *path, struct statvfs *sv)
{
    return fstatvfs(pt_src, sv) < 0 ? -errno : 0;
}

/* close(2) on a duplicate reports the errors a close would (NFS-like
 * backends), without closing the descriptor other dups still use. */
static int pt_flush(const char *path, struct fuse_file_info *fi)
{
    int fd = dup((int)fi->fh);
    if (fd < 0)
        return -errno;
    return close(fd) < 0 ? -errno : 0;
}

static int pt_release(const char *path, struct fuse_file_info *fi)
{
    close((int)fi->fh);
    return 0;
}

static int pt_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
    int rc = datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh);
    return rc < 0 ? -errno : 0;
}

static int pt_fallocate(const char *path, int mode, off_t off, off_t len,
                        struct fuse_file_info *fi)
{
    return fallocate((int)fi->fh, mode, off, len) < 0 ? -errno : 0;
}

static int pt_setxattr(const char *path, const char *name, const char *value, size_t size,
                       int flags)
{
    char p[PATH_MAX];
    int rc = pt_proc_path(p, sizeof(p), path);
    if (rc < 0)
        return rc;
    return lsetxattr(p, name, value, size, flags) < 0 ? -errno : 0;
}

static int pt_getxattr(const char *path, const char *name, char *value, size_t size)
{
    char p[PATH_MAX];
    int rc = pt_proc_path(p, sizeof(p), path);
    if (rc < 0)
        return rc;
    ssize_t n = lgetxattr(p, name, value, size);
    return n < 0 ? -errno : (int)n;
}

static int pt_listxattr(const char *path, char *list, size_t size)
{
    char p[PATH_MAX];
    int rc = pt_proc_path(p, sizeof(p), path);
    if (rc < 0)
        return rc;
    ssize_t n = llistxattr(p, list, size);
    return n < 0 ? -errno : (int)n;
}

static int pt_removexattr(const char *path, const char *name)
{
    char p[PATH_MAX];
    int rc = pt_proc_path(p, sizeof(p), path);
    if (rc < 0)
        return rc;
    return lremovexattr(p, name) < 0 ? -errno : 0;
}

static const struct fuse_operations pt_ops = {
    .init = pt_init,
    .getattr = pt_getattr,
    .access = pt_access,
    .readlink = pt_readlink,
    .opendir = pt_opendir,
    .readdir = pt_readdir,
    .releasedir = pt_releasedir,
    .mknod = pt_mknod,
    .mkdir = pt_mkdir,
    .unlink = pt_unlink,
    .rmdir = pt_rmdir,
    .symlink = pt_symlink,
    .rename = pt_rename,
    .link = pt_link,
    .chmod = pt_chmod,
    .chown = pt_chown,
    .truncate = pt_truncate,
    .utimens = pt_utimens,
    .create = pt_create,
    .open = pt_open,
    .read_buf = pt_read_buf,
    .write_buf = pt_write_buf,
    .statfs = pt_statfs,
    .flush = pt_flush,
    .release = pt_release,
    .fsync = pt_fsync,
    .fallocate = pt_fallocate,
    .setxattr = pt_setxattr,
    .getxattr = pt_getxattr,
    .listxattr = pt_listxattr,
    .removexattr = pt_removexattr,
};

int main(int argc, char *argv[])
{
    if (argc < 3 || argv[1][0] == '-') {
        fprintf(stderr, "usage: %s SOURCE MOUNTPOINT [FUSE options]\n", argv[0]);
        return 2;
    }
    pt_src = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pt_src < 0) {
        fprintf(stderr, "%s: %s: %s\n", argv[0], argv[1], strerror(errno));
        return 1;
    }
    /* The kernel already applied the caller's umask to every mode we get. */
    umask(0);
    /* fuse_main parses the rest: drop SOURCE, and name the idle-thread
     * count (libfuse's default, 10) so that libfuse 3.14 does not warn about
     * its own unset default (-1) at every start; max_read must match what
     * pt_init asks for */
    char **args = calloc((size_t)argc + 3, sizeof(*args));
    if (!args)
        return 1;
    int n = 0;
    args[n++] = argv[0];
    args[n++] = (char *)"-omax_idle_threads=10";
    args[n++] = (char *)"-omax_read=1048576";
    for (int i = 2; i < argc; i++)
        args[n++] = argv[i];
    int rc = fuse_main(n, args, &pt_ops, NULL);
    free(args);
    return rc;
}
