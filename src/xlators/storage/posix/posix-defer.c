/*
 * posix-defer.c — a file's handle removed after the unlink is answered.
 *
 * When unlink (posix-entry.c) removes the last name of a regular file, only
 * its handle .brickfs/ab/cd/<gfid> is left. Removing it reads one of 65,536
 * handle folders, which is a disk read whenever that folder is not cached
 * (always, after the page cache was dropped), and the last close of the
 * inode frees its blocks: together most of an unlink's time on the brick.
 * Neither changes what the client sees, so both are handed to a worker and
 * the unlink answers without them.
 *
 * Crash safety: a handle whose removal was handed off and never done is an
 * orphan (st_nlink 1, no name) that would keep its blocks. So before the
 * hand-off the GFID is written to a slot of .brickfs/unlink-pending (one
 * page per slot, PX_DEFER_SLOTS slots: a whole page written never needs a
 * read, a hot page or a cold one). At start, before the brick serves, every
 * GFID found there whose handle is a regular file with st_nlink 1 loses its
 * handle, which frees the inode and its blocks. A slot is reused once its
 * removal is done; its old GFID stays until then, which is harmless: replay removes
 * only a handle that has no name, whoever it belongs to. Until the removal
 * is done, resolution treats such a handle as gone (posix-handle.c:
 * a regular file with st_nlink 1 resolves to ESTALE), so nothing can open
 * or link the file back by GFID in the window.
 *
 * Durability: the slot's page is written on the unlink's answer path but
 * synced only by the worker, before it removes the handle (group commit:
 * one fdatasync covers every slot written before it started, so a burst of
 * unlinks costs a few syncs, none on an answer's path). Once the sync is
 * done the GFID survives a power loss until the handle's removal does.
 * Before it — a power loss between the answer and the worker's sync, or
 * a crash between the name's unlink(2) and the slot's write — the orphan
 * is not in the journal; the start-up scan of the handle store
 * (posix-orphan.c) removes those.
 *
 * A slot is claimed only for a regular file whose last name went; with
 * every slot busy, or the journal unusable, the unlink removes the handle
 * itself as before.
 *
 * Lifetimes: struct px_defer per hand-off, owned by the worker task (frees
 * it). fini waits until no hand-off is outstanding.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "posix.h"

#define PX_DEFER_PAGE 4096

struct px_defer {
    struct px_priv *p;
    struct bfs_gfid gfid;
    int fd;   /* O_PATH on the inode: its last close may free the blocks */
    int slot;
    uint64_t seq; /* number of its slot's write (p->defer_written) */
};

/* Makes every slot write up to seq durable: a sync that started after it
 * was written covers it, so concurrent workers share one fdatasync. */
static void journal_sync(struct px_priv *p, uint64_t seq)
{
    if (__atomic_load_n(&p->defer_synced, __ATOMIC_ACQUIRE) >= seq)
        return;
    pthread_mutex_lock(&p->defer_sync_lock);
    if (__atomic_load_n(&p->defer_synced, __ATOMIC_ACQUIRE) < seq) {
        uint64_t upto = __atomic_load_n(&p->defer_written, __ATOMIC_ACQUIRE);
        if (SYS.fdatasync(p->defer_fd) == 0)
            __atomic_store_n(&p->defer_synced, upto, __ATOMIC_RELEASE);
        else /* the handle goes anyway: the start-up scan covers a lost slot */
            bfs_log(p->brick, BFS_LOG_WARNING, "%s/%s: fdatasync: %s", PX_HIDDEN,
                    PX_DEFER_FILE, strerror(errno));
    }
    pthread_mutex_unlock(&p->defer_sync_lock);
}

static bool orphan_handle(struct px_priv *p, const struct bfs_gfid *g, const char *hp,
                          int fd)
{
    struct stat hst, st;
    if (SYS.fstatat(p->handles_fd, hp, &hst, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(hst.st_mode) ||
        hst.st_nlink != 1)
        return false;
    if (fd < 0)
        return true;
    return SYS.fstat(fd, &st) == 0 && st.st_ino == hst.st_ino && st.st_dev == hst.st_dev;
}

static void defer_run(void *arg)
{
    struct px_defer *d = arg;
    struct px_priv *p = d->p;
    char hp[PX_HPATH_LEN];
    bfs__px_handle_path(&d->gfid, hp);
    pthread_mutex_t *il = bfs__px_ilock_for(p, &d->gfid);
    bfs__px_root_begin();
    journal_sync(p, d->seq);
    pthread_mutex_lock(il);
    /* a link by GFID cannot have come back (resolution refuses an orphan),
     * but the GFID may have been given to a new file meanwhile: only the
     * inode we unlinked loses its handle */
    if (orphan_handle(p, &d->gfid, hp, d->fd))
        (void)SYS.unlinkat(p->handles_fd, hp, 0);
    pthread_mutex_unlock(il);
    SYS.close(d->fd);
    bfs__px_root_end();
    pthread_mutex_lock(&p->defer_lock);
    p->defer_busy &= ~(1ull << d->slot);
    if (p->defer_busy == 0)
        pthread_cond_broadcast(&p->defer_idle);
    pthread_mutex_unlock(&p->defer_lock);
    free(d);
}

static int claim_slot(struct px_priv *p)
{
    int slot = -1;
    pthread_mutex_lock(&p->defer_lock);
    for (int i = 0; i < PX_DEFER_SLOTS; i++) {
        if (!(p->defer_busy & (1ull << i))) {
            p->defer_busy |= 1ull << i;
            slot = i;
            break;
        }
    }
    pthread_mutex_unlock(&p->defer_lock);
    return slot;
}

static void release_slot(struct px_priv *p, int slot)
{
    pthread_mutex_lock(&p->defer_lock);
    p->defer_busy &= ~(1ull << slot);
    if (p->defer_busy == 0)
        pthread_cond_broadcast(&p->defer_idle);
    pthread_mutex_unlock(&p->defer_lock);
}

bool bfs__px_defer_ready(struct px_priv *p)
{
    if (p->defer_fd < 0)
        return false;
    pthread_mutex_lock(&p->defer_lock);
    bool ready = p->defer_busy != (PX_DEFER_SLOTS >= 64 ? ~0ull : (1ull << PX_DEFER_SLOTS) - 1);
    pthread_mutex_unlock(&p->defer_lock);
    return ready;
}

bool bfs__px_handle_defer(struct px_priv *p, struct px_obj *o)
{
    struct stat st;
    if (p->defer_fd < 0 || !S_ISREG(o->st.st_mode) || bfs_gfid_is_null(&o->gfid) ||
        SYS.fstat(o->fd, &st) < 0 || st.st_nlink != 1)
        return false; /* other names left, or not ours to defer: the caller drops */
    int slot = claim_slot(p);
    if (slot < 0)
        return false;
    char page[PX_DEFER_PAGE];
    memset(page, 0, sizeof(page));
    memcpy(page, o->gfid.b, sizeof(o->gfid.b));
    struct px_defer *d = calloc(1, sizeof(*d));
    if (!d || SYS.pwrite(p->defer_fd, page, sizeof(page), (off_t)slot * PX_DEFER_PAGE) !=
                  (ssize_t)sizeof(page)) {
        free(d);
        release_slot(p, slot);
        return false;
    }
    d->seq = __atomic_add_fetch(&p->defer_written, 1, __ATOMIC_ACQ_REL);
    d->p = p;
    d->gfid = o->gfid;
    d->fd = o->fd;
    d->slot = slot;
    bfs__px_cache_drop(p->cache, &o->gfid);
    if (bfs_workers_submit(p->workers, defer_run, d) < 0) {
        free(d);
        release_slot(p, slot); /* its GFID stays written: replay would only find it gone */
        return false;
    }
    o->fd = -1; /* the task closes it */
    return true;
}

int bfs__px_defer_init(struct px_priv *p)
{
    pthread_mutex_init(&p->defer_lock, NULL);
    pthread_cond_init(&p->defer_idle, NULL);
    pthread_mutex_init(&p->defer_sync_lock, NULL);
    p->defer_busy = 0;
    p->defer_written = p->defer_synced = 0;
    bfs__px_root_begin();
    p->defer_fd = SYS.openat(p->handles_fd, PX_DEFER_FILE,
                             O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    int rc = p->defer_fd < 0 ? -errno : 0, done = 0;
    for (int slot = 0; rc == 0 && slot < PX_DEFER_SLOTS; slot++) {
        struct bfs_gfid g;
        ssize_t n = SYS.pread(p->defer_fd, g.b, sizeof(g.b), (off_t)slot * PX_DEFER_PAGE);
        if (n != (ssize_t)sizeof(g.b))
            break;
        char hp[PX_HPATH_LEN];
        if (bfs_gfid_is_null(&g) || bfs_gfid_is_root(&g))
            continue;
        bfs__px_handle_path(&g, hp);
        if (orphan_handle(p, &g, hp, -1) && SYS.unlinkat(p->handles_fd, hp, 0) == 0)
            done++;
    }
    /* emptied for good before any new slot is written: a stale GFID must
     * not come back after a power loss (harmless, but confusing) */
    if (rc == 0 && (SYS.ftruncate(p->defer_fd, 0) < 0 || SYS.fsync(p->defer_fd) < 0))
        rc = -errno;
    bfs__px_root_end();
    if (done)
        bfs_log(p->brick, BFS_LOG_INFO, "removed %d handle(s) of files unlinked before a "
                "crash (%s)", done, PX_DEFER_FILE);
    if (rc < 0) {
        bfs_log(p->brick, BFS_LOG_WARNING, "%s/%s: %s; unlinks remove handles themselves",
                PX_HIDDEN, PX_DEFER_FILE, strerror(-rc));
        if (p->defer_fd >= 0)
            SYS.close(p->defer_fd);
        p->defer_fd = -1;
    }
    return 0;
}

int bfs__px_defer_pending(struct px_priv *p)
{
    if (!p->defer_init)
        return 0;
    pthread_mutex_lock(&p->defer_lock);
    int n = __builtin_popcountll(p->defer_busy);
    pthread_mutex_unlock(&p->defer_lock);
    return n;
}

void bfs__px_defer_fini(struct px_priv *p)
{
    pthread_mutex_lock(&p->defer_lock);
    while (p->defer_busy)
        pthread_cond_wait(&p->defer_idle, &p->defer_lock);
    pthread_mutex_unlock(&p->defer_lock);
    if (p->defer_fd >= 0)
        SYS.close(p->defer_fd);
    p->defer_fd = -1;
    pthread_mutex_destroy(&p->defer_lock);
    pthread_cond_destroy(&p->defer_idle);
    pthread_mutex_destroy(&p->defer_sync_lock);
}
