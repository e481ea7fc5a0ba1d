/*
 * posix-sys.c — the system call table of storage/posix.
 *
 * Every call that touches the brick goes through bfs__px_sys (SYS.name in
 * the code), not libc directly, so that a test can make one of them fail or
 * stall (SQLite's aSyscall[] idea): bfs_posix_sys_override("pwrite", fn, &old).
 * The table is process-wide (shared by every posix instance) and lives as
 * long as the module is loaded; overriding is meant for tests only and is
 * not synchronised with running fops.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "posix.h"

/* libc's openat is variadic; the table wants a fixed signature. */
static int px_openat(int dirfd, const char *path, int flags, mode_t mode)
{
    return openat(dirfd, path, flags, mode);
}

/* glibc 2.36 has no faccessat2 wrapper that does AT_EMPTY_PATH natively. */
static int px_faccessat2(int dirfd, const char *path, int mode, int flags)
{
    return (int)syscall(SYS_faccessat2, dirfd, path, mode, flags);
}

#ifndef SYS_cachestat
#define SYS_cachestat 451 /* the same number on every architecture */
#endif

/* cachestat(2): Linux 6.5, no glibc wrapper in Debian 12. */
static int px_cachestat(int fd, const struct px_cachestat_range *r, struct px_cachestat *cs,
                        unsigned flags)
{
    return (int)syscall(SYS_cachestat, fd, r, cs, flags);
}

/* openat2(2) beneath dirfd, never following a symlink nor leaving the
 * file system: a path that meets one fails (ELOOP, EXDEV, ENOENT...). */
static int px_openat_beneath(int dirfd, const char *path, int flags)
{
    struct open_how how = {
        .flags = (uint64_t)flags,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
    };
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

static int px_renameat2(int od, const char *on, int nd, const char *nn, unsigned flags)
{
    return renameat2(od, on, nd, nn, flags);
}

static ssize_t px_copy_file_range(int in, off_t *oin, int out, off_t *oout, size_t len,
                                  unsigned flags)
{
    return copy_file_range(in, oin, out, oout, len, flags);
}

static const struct px_sys px_sys_default = {
    .openat = px_openat,
    .openat_beneath = px_openat_beneath,
    .close = close,
    .fstat = fstat,
    .fstatat = fstatat,
    .mkdirat = mkdirat,
    .mknodat = mknodat,
    .symlinkat = symlinkat,
    .linkat = linkat,
    .unlinkat = unlinkat,
    .renameat2 = px_renameat2,
    .readlinkat = readlinkat,
    .pread = pread,
    .pwrite = pwrite,
    .pwritev2 = pwritev2,
    .preadv2 = preadv2,
    .cachestat = px_cachestat,
    .ftruncate = ftruncate,
    .fallocate = fallocate,
    .fsync = fsync,
    .fdatasync = fdatasync,
    .lseek = lseek,
    .copy_file_range = px_copy_file_range,
    .fstatvfs = fstatvfs,
    .fchmod = fchmod,
    .fchmodat = fchmodat,
    .fchown = fchown,
    .fchownat = fchownat,
    .futimens = futimens,
    .utimensat = utimensat,
    .faccessat2 = px_faccessat2,
    .getxattr = getxattr,
    .setxattr = setxattr,
    .listxattr = listxattr,
    .removexattr = removexattr,
    .fgetxattr = fgetxattr,
    .fsetxattr = fsetxattr,
    .flistxattr = flistxattr,
    .fremovexattr = fremovexattr,
};

struct px_sys bfs__px_sys = px_sys_default;

/* name -> offset of the slot in struct px_sys, generated from the list. */
struct px_sys_slot {
    const char *name;
    size_t off;
};

#define PX_SYS_SLOT(name, ret, args) {#name, offsetof(struct px_sys, name)},
static const struct px_sys_slot px_sys_slots[] = {PX_SYSCALLS(PX_SYS_SLOT)};
#undef PX_SYS_SLOT

int bfs_posix_sys_override(const char *name, void *fn, void **old)
{
    for (size_t i = 0; i < sizeof(px_sys_slots) / sizeof(px_sys_slots[0]); i++) {
        if (strcmp(px_sys_slots[i].name, name) != 0)
            continue;
        void **slot = (void **)((char *)&bfs__px_sys + px_sys_slots[i].off);
        void *const *def = (void *const *)((const char *)&px_sys_default + px_sys_slots[i].off);
        if (old)
            *old = *slot;
        *slot = fn ? fn : *def;
        return 0;
    }
    return -ENOENT;
}
