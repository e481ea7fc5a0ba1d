/*
 * posix-direct.c — big reads straight from the disk into the reply
 * (docs/design/uncached-io.md, "Direct reads").
 *
 * A READ of at least storage.uncached-read-min bytes at an offset aligned
 * to PX_DIO_ALIGN, of a range with no page in the brick's page cache, is
 * read with O_DIRECT into the (aligned) reply buffer: the disk's data lands
 * where the reply is sent from, with no page-cache page taken, filled,
 * copied and dropped (RWF_DONTCACHE's work, which costs more than the
 * copy itself where fresh pages are expensive, as on a VM whose host
 * takes back free memory).
 *
 * A range that is all in the page cache, or has a page dirty or under
 * writeback, is read through the page cache as before: cached data is
 * cheaper to copy than to read again, and O_DIRECT would first have to
 * write dirty pages back. A range only partly cached goes direct: the
 * pages are most likely the kernel's read-ahead after an earlier small
 * read, and taking the cached path for them would keep that read-ahead
 * going for the whole file. cachestat(2) (Linux 6.5) says which; without
 * it every big aligned read goes direct, which is still correct (the
 * kernel writes back what is dirty in the range before it reads).
 *
 * The O_DIRECT fd is a second open of the file (through /proc/self/fd/N,
 * as root, read-only), made on the fd's first big read and kept with it
 * (struct px_fd dfd): flags belong to the open file description, so the
 * client's own fd cannot be switched. Only for a regular file, and never
 * for a write-only fd (a read there must fail, and does, on the original
 * fd). A file system that
 * refuses O_DIRECT (EINVAL) turns direct reads off for the brick, said
 * once in the log.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "posix.h"

static size_t round_up(size_t len)
{
    return (len + PX_DIO_ALIGN - 1) & ~(size_t)(PX_DIO_ALIGN - 1);
}

bool bfs__px_direct_on(struct px_priv *p)
{
    return p->direct.want && p->uc_read.min && !__atomic_load_n(&p->direct.off, __ATOMIC_RELAXED);
}

void *bfs__px_read_buf(struct px_priv *p, size_t size, size_t *room)
{
    if (bfs__px_direct_on(p) && size >= p->uc_read.min) {
        *room = round_up(size);
        return aligned_alloc(PX_DIO_ALIGN, *room);
    }
    *room = size;
    return malloc(size ? size : 1);
}

static void refused(struct px_job *j, int err)
{
    if (!__atomic_exchange_n(&j->priv->direct.off, true, __ATOMIC_RELAXED))
        XL_WARN(j->xl, "%s: the file system does not take O_DIRECT reads (%s); big reads go "
                "through the page cache from now on, storage.direct-read off says so",
                j->priv->brick, strerror(err));
}

/* pf's O_DIRECT twin, opened on first use; < 0 when there is none. */
static int direct_fd(struct px_job *j, struct px_fd *pf)
{
    int d = __atomic_load_n(&pf->dfd, __ATOMIC_ACQUIRE);
    if (d != PX_DFD_NONE)
        return d;
    int fl = fcntl(pf->fd, F_GETFL);
    struct stat st;
    int nd = PX_DFD_NEVER;
    if (fl >= 0 && !(fl & O_PATH) && (fl & O_ACCMODE) != O_WRONLY &&
        SYS.fstat(pf->fd, &st) == 0 && S_ISREG(st.st_mode)) {
        char path[PX_PROC_FD_LEN];
        bfs__px_proc_path(pf->fd, path);
        bfs__px_root_begin(); /* the file is open for reading already */
        nd = SYS.openat(AT_FDCWD, path, O_RDONLY | O_DIRECT | O_CLOEXEC, 0);
        int err = errno;
        bfs__px_root_end();
        if (nd < 0 && err == EINVAL)
            refused(j, err);
        if (nd < 0)
            nd = PX_DFD_NEVER;
    }
    int expect = PX_DFD_NONE;
    if (!__atomic_compare_exchange_n(&pf->dfd, &expect, nd, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        if (nd >= 0)
            SYS.close(nd); /* another read opened one first */
        nd = expect;
    }
    return nd;
}

/* Whether the range is better read through the page cache: all of it is
 * there, or some of it waits to be written (unknown: no). */
static bool range_cached(int fd, off_t off, size_t len)
{
    struct px_cachestat_range r = {(uint64_t)off, len};
    struct px_cachestat cs;
    if (SYS.cachestat(fd, &r, &cs, 0) < 0)
        return false;
    uint64_t pages = (len + PX_DIO_ALIGN - 1) / PX_DIO_ALIGN;
    return cs.nr_dirty || cs.nr_writeback || cs.nr_cache >= pages;
}

int bfs__px_direct_read(struct px_job *j, struct px_fd *pf, void *buf, size_t len, size_t room,
                        off_t off, size_t *n)
{
    struct px_priv *p = j->priv;
    size_t want = round_up(len);
    if (!bfs__px_direct_on(p) || len < p->uc_read.min || (uint64_t)off % PX_DIO_ALIGN ||
        (uintptr_t)buf % PX_DIO_ALIGN || room < want)
        return 0;
    if (range_cached(pf->fd, off, len)) {
        __atomic_add_fetch(&p->direct.cached, 1, __ATOMIC_RELAXED);
        return 0;
    }
    int dfd = direct_fd(j, pf);
    if (dfd < 0)
        return 0;
    ssize_t got = SYS.pread(dfd, buf, want, off);
    if (got < 0 && errno == EINVAL) { /* alignment this file system will not take */
        refused(j, errno);
        return 0;
    }
    if (got < 0)
        return -errno;
    __atomic_add_fetch(&p->direct.done, 1, __ATOMIC_RELAXED);
    *n = (size_t)got < len ? (size_t)got : len;
    return 1;
}

void bfs__px_direct_close(struct px_fd *pf)
{
    if (pf->dfd >= 0)
        SYS.close(pf->dfd);
    pf->dfd = PX_DFD_NEVER;
}
