/*
 * posix-orphan.c — the start-up pass that removes orphan handles.
 *
 * A file's handle .brickfs/AB/CD/<gfid> is a hard link, so a live file's
 * has st_nlink >= 2 (its names plus the handle). One with st_nlink 1 has
 * no name left: an unlink removed the name and was cut short before the
 * handle went (a crash or power loss after the name's unlink(2) and before
 * the journal slot of posix-defer.c was written, or synced; a rename over
 * the file's last name; a name removed on the brick by hand). Resolution
 * already treats it as gone (ESTALE), but it keeps the inode and its blocks.
 * This pass finds and removes them.
 *
 * What it removes: a non-directory, non-symlink entry of a handle folder
 * whose name is a GFID and whose st_nlink is 1, checked again under that
 * GFID's inode lock (the lock every name-count change of the file holds,
 * posix-entry.c), so a concurrent create, link or unlink is seen whole.
 * At run time such a handle exists only while its removal is pending
 * (posix-defer.c, which then finds it gone and closes its fd): an fd open
 * on an unlinked file keeps the inode, not the handle. Symlinks are left:
 * a directory's handle is a symlink with st_nlink 1, and telling a client
 * symlink's orphan from it would need a walk (such an orphan holds no
 * data blocks). The root's handle and anything not named like a GFID
 * (unlink-pending, indices/, <gfid>.tmp.<tid>) are skipped.
 *
 * Cost: one pass over the store, bounded by its size: readdir of each
 * AB/CD folder that exists (at most 65,536) and one fstatat per regular
 * entry (d_type spares the others); no entry is looked at twice. It runs on
 * its own thread started after the journal replay, so the brick serves
 * meanwhile; progress is logged every PX_SCAN_LOG_SEC seconds and at the
 * end. fini stops it between two folders and joins it.
 *
 * Lifetime: one thread per translator instance, bfs__px_orphan_scan_start
 * (init) .. bfs__px_orphan_scan_stop (fini); it owns nothing but the
 * directory streams it opens, and uses p->handles_fd, which outlives it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "posix.h"

#define PX_SCAN_LOG_SEC 30

struct scan_count {
    uint64_t folders, checked, removed;
};

static bool hex2(const char *s)
{
    static const char hex[] = "0123456789abcdef";
    return strlen(s) == 2 && strchr(hex, s[0]) && strchr(hex, s[1]);
}

static bool stopping(struct px_priv *p)
{
    return __atomic_load_n(&p->scan_stop, __ATOMIC_ACQUIRE);
}

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The entry name (in folder rel "AB/CD") under its GFID's inode lock:
 * removed if still an orphan. */
static void check_entry(struct px_priv *p, const char *rel, const char *name,
                        struct scan_count *c)
{
    struct bfs_gfid g;
    char hp[PX_HPATH_LEN + 8];
    if (bfs_gfid_parse(name, &g) < 0 || bfs_gfid_is_root(&g) ||
        snprintf(hp, sizeof(hp), "%s/%s", rel, name) >= (int)sizeof(hp))
        return;
    c->checked++;
    pthread_mutex_t *il = bfs__px_ilock_for(p, &g);
    pthread_mutex_lock(il);
    struct stat st;
    if (SYS.fstatat(p->handles_fd, hp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode) && st.st_nlink == 1 &&
        SYS.unlinkat(p->handles_fd, hp, 0) == 0) {
        c->removed++;
        __atomic_add_fetch(&p->scan_removed, 1, __ATOMIC_RELAXED);
        bfs__px_cache_drop(p->cache, &g);
    }
    pthread_mutex_unlock(il);
}

static void scan_folder(struct px_priv *p, const char *rel, struct scan_count *c)
{
    int fd = SYS.openat(p->handles_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            SYS.close(fd);
        return;
    }
    c->folders++;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_type == DT_DIR || e->d_type == DT_LNK)
            continue;
        check_entry(p, rel, e->d_name, c);
    }
    closedir(d);
}

/* The names of the two-hex-digit folders below rel ("" for the top). */
static int list_hex(struct px_priv *p, const char *rel, char names[256][3])
{
    int fd = SYS.openat(p->handles_fd, *rel ? rel : ".",
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            SYS.close(fd);
        return 0;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 256)
        if ((e->d_type == DT_DIR || e->d_type == DT_UNKNOWN) && hex2(e->d_name))
            memcpy(names[n++], e->d_name, 3);
    closedir(d);
    return n;
}

static void *scan_main(void *arg)
{
    struct px_priv *p = arg;
    struct scan_count c = {0};
    char (*tops)[3] = calloc(256, 3), (*subs)[3] = calloc(256, 3);
    double start = now_sec(), logged = start;
    int ntop = tops && subs ? list_hex(p, "", tops) : 0;
    bfs_log(p->brick, BFS_LOG_INFO, "orphan handle scan started (%d top folders)", ntop);
    for (int i = 0; i < ntop && !stopping(p); i++) {
        int nsub = list_hex(p, tops[i], subs);
        for (int k = 0; k < nsub && !stopping(p); k++) {
            char rel[8];
            snprintf(rel, sizeof(rel), "%s/%s", tops[i], subs[k]);
            scan_folder(p, rel, &c);
        }
        if (now_sec() - logged >= PX_SCAN_LOG_SEC) {
            logged = now_sec();
            bfs_log(p->brick, BFS_LOG_INFO, "orphan handle scan: %d/%d top folders, %llu "
                    "handles checked, %llu orphans removed", i + 1, ntop,
                    (unsigned long long)c.checked, (unsigned long long)c.removed);
        }
    }
    free(tops);
    free(subs);
    bool stopped = stopping(p);
    bfs_log(p->brick, c.removed ? BFS_LOG_WARNING : BFS_LOG_INFO,
            "orphan handle scan %s in %.1f s: %llu folders, %llu handles checked, %llu "
            "orphan handle(s) of files unlinked before a crash removed",
            stopped ? "stopped" : "done", now_sec() - start, (unsigned long long)c.folders,
            (unsigned long long)c.checked, (unsigned long long)c.removed);
    __atomic_store_n(&p->scan_done, !stopped, __ATOMIC_RELEASE);
    return NULL;
}

void bfs__px_orphan_scan_start(struct px_priv *p)
{
    p->scan_stop = p->scan_done = false;
    p->scan_removed = 0;
    /* the thread inherits this one's identity: start it as root */
    bfs__px_root_begin();
    int rc = pthread_create(&p->scan_thread, NULL, scan_main, p);
    bfs__px_root_end();
    p->scan_started = rc == 0;
    if (rc != 0)
        bfs_log(p->brick, BFS_LOG_WARNING, "cannot start the orphan handle scan: %s",
                strerror(rc));
}

void bfs__px_orphan_scan_stop(struct px_priv *p)
{
    if (!p->scan_started)
        return;
    __atomic_store_n(&p->scan_stop, true, __ATOMIC_RELEASE);
    pthread_join(p->scan_thread, NULL);
    p->scan_started = false;
}
