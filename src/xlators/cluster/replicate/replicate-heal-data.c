/*
 * replicate-heal-data.c — data heal of one regular file: make every sink's
 * content, size and times those of the source, under the data lock (so no
 * writer, ours or another client's, changes the file meanwhile).
 *
 *   diff (default)  the sink is first cut or extended to the source's size,
 *                   then source and sink are compared block by block (128
 *                   KiB) and only blocks that differ are read on the source
 *                   and written to the sink. The comparison asks each brick
 *                   for a SHA-256 per block (rchecksum, SUM_SPAN of the file
 *                   per call), so equal blocks cost 32 bytes on the wire
 *                   instead of a read of the sink; a sink (or a source)
 *                   that cannot answer rchecksum (an older brick) is
 *                   compared by reading both copies instead. Holes stay
 *                   holes: a sink's new tail reads as zeros, as the
 *                   source's zeros do;
 *   full            the sink is emptied, every block of the source that is
 *                   not all zeros is written, then the size is set.
 * The arbiter is never a data sink. Runs on the heal thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/graph.h"
#include "replicate.h"

#define HEAL_BLOCK (128u << 10)
#define SUM_SPAN_BLOCKS 256u /* blocks per rchecksum call: 32 MiB, 8 KiB of sums */
#define SUM_LEN 32

static bool all_zero(const void *buf, size_t len)
{
    const uint8_t *b = buf;
    for (size_t i = 0; i < len; i++)
        if (b[i])
            return false;
    return true;
}

static int open_on(struct afr_hctx *h, int i, struct bfs_fd *fd, uint32_t flags)
{
    struct bfs_open_req req = {.fd = fd, .flags = flags};
    req.loc.gfid = h->gfid;
    return afr_hsync(h, i, BFS_FOP_OPEN, &req, NULL);
}

static int truncate_on(struct afr_hctx *h, int i, struct bfs_fd *fd, uint64_t size)
{
    struct bfs_ftruncate_req req = {.fd = fd, .offset = size};
    return afr_hsync(h, i, BFS_FOP_FTRUNCATE, &req, NULL);
}

/* Reads up to HEAL_BLOCK at off on child i into buf; the length read, or -errno. */
static ssize_t read_on(struct afr_hctx *h, int i, struct bfs_fd *fd, uint64_t off, void *buf)
{
    struct bfs_read_req req = {.fd = fd, .size = HEAL_BLOCK, .offset = off};
    struct bfs_read_rep rep;
    int rc = afr_hsync(h, i, BFS_FOP_READ, &req, &rep);
    ssize_t n = rc;
    if (rc >= 0) {
        n = (ssize_t)(rep.data.len < HEAL_BLOCK ? rep.data.len : HEAL_BLOCK);
        if (n)
            memcpy(buf, rep.data.data, (size_t)n);
    }
    bfs_read_rep_clear_dup(&rep);
    return n;
}

static int write_on(struct afr_hctx *h, int i, struct bfs_fd *fd, uint64_t off, const void *buf,
                    size_t len)
{
    struct bfs_write_req req = {.fd = fd, .offset = off};
    req.data.data = buf;
    req.data.len = len;
    return afr_hsync(h, i, BFS_FOP_WRITE, &req, NULL);
}

/* Copies block at off to every sink of *sinks that needs it; a sink that
 * fails leaves *sinks. */
static void copy_block(struct afr_hctx *h, struct bfs_fd *fd, int src, uint32_t *sinks,
                       uint64_t off, uint8_t *sbuf, uint8_t *kbuf, bool diff)
{
    ssize_t n = read_on(h, src, fd, off, sbuf);
    if (n < 0) {
        *sinks = 0; /* the source failed: nothing can be healed */
        return;
    }
    bool zero = all_zero(sbuf, (size_t)n);
    for (int k = 0; k < h->p->n; k++) {
        if (!bfs_mask_has(*sinks, k))
            continue;
        if (diff) {
            ssize_t m = read_on(h, k, fd, off, kbuf);
            if (m == n && memcmp(sbuf, kbuf, (size_t)n) == 0)
                continue;
        } else if (zero) {
            continue; /* the sink was emptied: a hole reads as zeros */
        }
        if (n && write_on(h, k, fd, off, sbuf, (size_t)n) < 0)
            *sinks &= ~BFS_BIT(k);
        else
            __atomic_add_fetch(&h->p->n_heal_blocks, 1, __ATOMIC_RELAXED);
    }
}

/* Checksums of the blocks of [off, off + len) on child i: the number of
 * blocks (sums in rep->sums), or -errno. */
static int sums_on(struct afr_hctx *h, int i, struct bfs_fd *fd, uint64_t off, uint64_t len,
                   struct bfs_rchecksum_rep *rep)
{
    struct bfs_rchecksum_req req = {.fd = fd, .offset = off, .len = len, .block = HEAL_BLOCK};
    int rc = afr_hsync(h, i, BFS_FOP_RCHECKSUM, &req, rep);
    if (rc >= 0 && rep->sums.len != (size_t)rc * SUM_LEN)
        rc = -EPROTO;
    return rc;
}

/* Copies the blocks of one span that sinks need (need[k][b]) from src. */
static void copy_needed(struct afr_hctx *h, struct bfs_fd *fd, int src, uint32_t *sinks,
                        uint64_t off, int nblocks, bool need[][SUM_SPAN_BLOCKS], uint8_t *buf)
{
    struct afr_priv *p = h->p;
    for (int b = 0; b < nblocks && *sinks; b++) {
        uint32_t want = 0;
        for (int k = 0; k < p->n; k++)
            if (bfs_mask_has(*sinks, k) && need[k][b])
                want |= BFS_BIT(k);
        if (!want)
            continue;
        uint64_t at = off + (uint64_t)b * HEAL_BLOCK;
        ssize_t n = read_on(h, src, fd, at, buf);
        if (n < 0) {
            *sinks = 0; /* the source failed: nothing can be healed */
            return;
        }
        for (int k = 0; k < p->n; k++) {
            if (!bfs_mask_has(want, k))
                continue;
            if (n && write_on(h, k, fd, at, buf, (size_t)n) < 0)
                *sinks &= ~BFS_BIT(k);
            else
                __atomic_add_fetch(&p->n_heal_blocks, 1, __ATOMIC_RELAXED);
        }
    }
}

/*
 * The diff heal by checksums, for the sinks of *sinks that answer
 * rchecksum. Returns the sinks it took care of; a sink that failed a
 * call on the way leaves *sinks; sinks that could not answer the first
 * rchecksum (and all of them when the source cannot) are left to the
 * comparison by reads.
 */
static uint32_t heal_by_sums(struct afr_hctx *h, struct bfs_fd *fd, int src, uint32_t *sinks,
                             uint8_t *buf)
{
    struct afr_priv *p = h->p;
    uint64_t size = h->s.attr[src].size;
    uint64_t span = (uint64_t)SUM_SPAN_BLOCKS * HEAL_BLOCK;
    uint32_t mine = *sinks;
    bool (*need)[SUM_SPAN_BLOCKS] = calloc((size_t)p->n, sizeof(*need));
    if (!need)
        return 0;
    for (uint64_t off = 0; off < size && (mine & *sinks); off += span) {
        uint64_t len = size - off < span ? size - off : span;
        struct bfs_rchecksum_rep srep;
        int n = sums_on(h, src, fd, off, len, &srep);
        if (n < 0) {
            bfs_rchecksum_rep_clear_dup(&srep);
            if (off > 0)
                *sinks &= ~mine;
            free(need);
            return 0; /* at the start: no checksums from the source, compare by reads */
        }
        for (int k = 0; k < p->n; k++) {
            if (!bfs_mask_has(mine & *sinks, k))
                continue;
            struct bfs_rchecksum_rep krep;
            int kn = sums_on(h, k, fd, off, len, &krep);
            if (kn < 0 && off == 0) {
                mine &= ~BFS_BIT(k); /* this sink: compare by reads */
            } else if (kn < 0) {
                *sinks &= ~BFS_BIT(k);
            } else {
                for (int b = 0; b < n; b++)
                    need[k][b] = b >= kn || memcmp((const uint8_t *)srep.sums.data + b * SUM_LEN,
                                                   (const uint8_t *)krep.sums.data + b * SUM_LEN,
                                                   SUM_LEN) != 0;
                __atomic_add_fetch(&p->n_heal_sum_blocks, (uint64_t)n, __ATOMIC_RELAXED);
            }
            bfs_rchecksum_rep_clear_dup(&krep);
        }
        bfs_rchecksum_rep_clear_dup(&srep);
        uint32_t todo = *sinks & mine;
        copy_needed(h, fd, src, &todo, off, n, need, buf);
        *sinks &= ~(mine & ~todo); /* sinks that failed a write, or all if the source did */
    }
    free(need);
    return mine & *sinks;
}

/* The heal proper: returns the sinks that were healed. */
static uint32_t copy_file(struct afr_hctx *h, int src, uint32_t sinks)
{
    struct afr_priv *p = h->p;
    struct bfs_xl *xl = p->xl;
    const struct bfs_iatt *sa = &h->s.attr[src];
    bool diff = __atomic_load_n(&p->heal_diff, __ATOMIC_RELAXED);
    struct bfs_inode *inode = afr_inode_of_gfid(xl, &h->gfid, S_IFREG);
    struct bfs_fd *fd = bfs_fd_new(xl->graph, inode, O_RDWR, 0);
    uint8_t *sbuf = malloc(HEAL_BLOCK), *kbuf = malloc(HEAL_BLOCK);
    if (!fd || !sbuf || !kbuf || open_on(h, src, fd, O_RDONLY) < 0)
        sinks = 0;
    for (int k = 0; k < p->n; k++)
        if (bfs_mask_has(sinks, k) &&
            (open_on(h, k, fd, O_RDWR) < 0 || truncate_on(h, k, fd, diff ? sa->size : 0) < 0))
            sinks &= ~BFS_BIT(k);
    uint32_t by_reads = sinks;
    if (diff && sinks)
        by_reads = sinks & ~heal_by_sums(h, fd, src, &sinks, sbuf);
    for (uint64_t off = 0; off < sa->size && (sinks & by_reads); off += HEAL_BLOCK) {
        uint32_t some = sinks & by_reads;
        copy_block(h, fd, src, &some, off, sbuf, kbuf, diff);
        sinks &= ~(sinks & by_reads & ~some);
    }
    for (int k = 0; k < p->n; k++) {
        if (!bfs_mask_has(sinks, k))
            continue;
        struct bfs_fsetattr_req req = {.fd = fd, .attr = *sa,
                                       .valid = BFS_SET_ATIME | BFS_SET_MTIME};
        if ((!diff && truncate_on(h, k, fd, sa->size) < 0) ||
            afr_hsync(h, k, BFS_FOP_FSETATTR, &req, NULL) < 0)
            sinks &= ~BFS_BIT(k);
    }
    free(sbuf);
    free(kbuf);
    if (fd)
        bfs_fd_unref(fd); /* release on every child it was opened on */
    if (inode)
        bfs_inode_unref(inode);
    return sinks;
}

int afr_heal_data(struct afr_priv *p, const struct bfs_gfid *g, int force)
{
    struct afr_hctx h;
    int rc = afr_heal_begin(&h, p, g, AFR_DATA, force);
    if (rc < 0)
        return rc;
    int ref = bfs_mask_first(h.s.valid);
    if (ref < 0 || !S_ISREG(h.s.attr[ref].mode)) {
        afr_heal_end(&h, 0, false);
        return 0;
    }
    if (h.d.split_brain) {
        XL_WARN(p->xl, "data split-brain: the copies blame each other");
        afr_heal_end(&h, 0, true);
        return -EIO;
    }
    if (!h.d.needs_heal) {
        afr_heal_end(&h, 0, false);
        return 0;
    }
    int src = bfs_mask_first(h.d.sources);
    uint32_t healed = src >= 0 && h.d.sinks ? copy_file(&h, src, h.d.sinks) : 0;
    bool all = healed == h.d.sinks;
    if (!all)
        XL_WARN(p->xl, "data heal from %s: %d of %d copies healed",
                src >= 0 ? p->xl->children[src]->name : "?", bfs_mask_count(healed),
                bfs_mask_count(h.d.sinks));
    /* the arbiter holds no data: its blame goes with the sources' */
    uint32_t good = h.d.sources | healed;
    if (p->arbiter >= 0 && bfs_mask_has(h.s.valid, p->arbiter))
        good |= BFS_BIT(p->arbiter);
    afr_heal_end(&h, src >= 0 ? good : 0, false);
    return all ? 0 : -EIO;
}
