/*
 * index-base.c — how features/index makes a pending entry: a hard link to a
 * base file, so that making one allocates no inode (index.h).
 *
 * Why: an entry is made before every pre-op and removed after the post-op
 * (index.c). As an empty file of its own, each mknodat allocated an inode
 * (and each unlinkat freed one): on ext4 that was most of the cost of a
 * brick's xattrop. A link to an existing inode is a directory entry only
 * (GlusterFS's index does the same with its xattrop-<uuid> file).
 *
 *   <indices>/base/base-<gfid>      the base files (empty, 0600)
 *   <indices>/pending/<gfid>        an entry: a link to the current base
 *
 * The base files live in their own folder, next to pending/ (so on the
 * same file system: linkat cannot cross one), and the listing of pending/
 * never sees them. An entry is still any name in pending/: entries made as
 * plain files (older bricks, brickfsd's replace-brick) are listed and
 * removed the same way.
 *
 * One base is current. A link that fails with EMLINK (the base has the file
 * system's most links: 65,000 on ext4) or ENOENT (the base was removed by
 * hand) makes a new current base and tries again; the old base keeps its
 * entries. The option link-max (tests) makes a base full after that many
 * links made through it. Where links cannot be made at all (EXDEV, EPERM,
 * EOPNOTSUPP: the folder is on another file system or one without hard
 * links) or no base can be made, entries are plain files, as before.
 *
 * At start: bases with no entry left (st_nlink 1) are removed, except one,
 * which becomes the current base; if none is left, a new one is made.
 * Bases that still have entries stay until a later start finds them
 * empty. Nothing is synced: a link is one metadata change, like the mknod
 * it replaces, ordered the same way before the pre-op.
 *
 * Lifetimes: base_dfd and the current name from init (ix_base_init) to
 * fini (ix_base_fini); base_lock guards the name and its generation.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index.h"

#define IX_BASE_PREFIX "base-"

/* Makes a new current base unless another thread already replaced the one
 * of generation gen. 0, or -errno (then there is no current base). */
static int base_roll(struct bfs_xl *xl, struct ix_priv *p, uint64_t gen)
{
    int rc = 0;
    pthread_mutex_lock(&p->base_lock);
    if (p->base_gen == gen) {
        struct bfs_gfid g;
        char name[IX_BASE_NAMELEN], s[BFS_GFID_STRLEN];
        bfs_gfid_generate(&g);
        snprintf(name, sizeof(name), IX_BASE_PREFIX "%s", bfs_gfid_fmt(&g, s));
        int fd = openat(p->base_dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) {
            close(fd);
            memcpy(p->base_name, name, sizeof(name));
            __atomic_store_n(&p->base_links, 0, __ATOMIC_RELAXED);
            __atomic_add_fetch(&p->n_bases, 1, __ATOMIC_RELAXED);
        } else {
            rc = -errno;
            p->base_name[0] = '\0';
            XL_WARN(xl, "cannot make an index base file %s/base/%s: %s", p->dir, name,
                    strerror(-rc));
        }
        p->base_gen++;
    }
    pthread_mutex_unlock(&p->base_lock);
    return rc;
}

/* The current base's name and generation; false if there is none. */
static bool base_get(struct ix_priv *p, char *name, uint64_t *gen)
{
    pthread_mutex_lock(&p->base_lock);
    memcpy(name, p->base_name, IX_BASE_NAMELEN);
    *gen = p->base_gen;
    pthread_mutex_unlock(&p->base_lock);
    return name[0] != '\0';
}

int ix_entry_make(struct bfs_xl *xl, struct ix_priv *p, const char *entry)
{
    bool links = p->base_dfd >= 0 && !__atomic_load_n(&p->no_links, __ATOMIC_RELAXED);
    for (int tries = 0; links && tries < 3; tries++) {
        char base[IX_BASE_NAMELEN];
        uint64_t gen;
        bool have = base_get(p, base, &gen);
        int err = ENOENT; /* no current base: make one */
        if (have && p->link_max > 0 &&
            __atomic_load_n(&p->base_links, __ATOMIC_RELAXED) >= (uint64_t)p->link_max) {
            err = EMLINK; /* the option's limit, as the file system would say it */
        } else if (have && linkat(p->base_dfd, base, p->pending_fd, entry, 0) == 0) {
            __atomic_add_fetch(&p->base_links, 1, __ATOMIC_RELAXED);
            return 0;
        } else if (have) {
            err = errno;
        }
        if (err == EEXIST)
            return -EEXIST;
        if (err == EXDEV || err == EPERM || err == EOPNOTSUPP) {
            XL_WARN(xl, "index entries cannot be links to a base file (%s): plain files from "
                        "now on", strerror(err));
            __atomic_store_n(&p->no_links, true, __ATOMIC_RELAXED); /* several may say it */
            break;
        }
        if (err != EMLINK && err != ENOENT)
            return -err;
        if (base_roll(xl, p, gen) < 0)
            break;
    }
    return mknodat(p->pending_fd, entry, S_IFREG | 0600, 0) < 0 ? -errno : 0;
}

/* Start: removes the bases without entries, keeping one as the current. */
static void base_scan(struct bfs_xl *xl, struct ix_priv *p)
{
    int dfd = openat(p->base_dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return;
    }
    int removed = 0, kept = 0;
    for (struct dirent *de; (de = readdir(d));) {
        struct stat st;
        if (strncmp(de->d_name, IX_BASE_PREFIX, sizeof(IX_BASE_PREFIX) - 1) != 0 ||
            strlen(de->d_name) >= IX_BASE_NAMELEN ||
            fstatat(p->base_dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode))
            continue;
        if (st.st_nlink > 1) {
            kept++;
        } else if (!p->base_name[0]) {
            snprintf(p->base_name, sizeof(p->base_name), "%s", de->d_name);
        } else if (unlinkat(p->base_dfd, de->d_name, 0) == 0) {
            removed++;
        }
    }
    closedir(d);
    if (removed || kept)
        XL_INFO(xl, "index base files: %d without entries removed, %d with entries kept", removed,
                kept);
}

int ix_base_init(struct bfs_xl *xl, struct ix_priv *p, const char *dir)
{
    p->link_max = bfs_xl_opt_int(xl, "link-max");
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -errno;
    p->base_dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (p->base_dfd < 0)
        return -errno;
    base_scan(xl, p);
    return p->base_name[0] ? 0 : base_roll(xl, p, p->base_gen);
}

void ix_base_fini(struct ix_priv *p)
{
    if (p->base_dfd >= 0)
        close(p->base_dfd);
    p->base_dfd = -1;
    pthread_mutex_destroy(&p->base_lock);
}
