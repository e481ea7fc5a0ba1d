/*
 * posix-sum.c — rchecksum: a SHA-256 per block of a byte range of an open
 * file, so that a heal compares copies by checksums and moves only the
 * blocks that differ (docs/design/replicate.md, "Heal").
 *
 *   request  fd, offset, len, block (4 KiB .. 4 MiB; at most
 *            PX_SUM_MAX_BLOCKS blocks in the range)
 *   reply    sums: 32 bytes per block of [offset, min(offset + len, EOF)),
 *            block k covering [offset + k * block, + block), the last one
 *            shorter at EOF; blocks wholly past EOF are absent; size: the
 *            file's size. rc = the number of blocks.
 *
 * It reads the data, so it always runs on the worker pool (never inline on
 * the event loop). SHA-256 from libcrypto (docs/DEPENDENCIES.md): a brick
 * must never call two different blocks equal, and a 32-byte digest per
 * 128 KiB costs little on the wire. The reply's buffer belongs to the job
 * and is freed with the reply.
 */
#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "posix.h"

#define PX_SUM_LEN 32
#define PX_SUM_BLOCK_MIN 4096u
#define PX_SUM_BLOCK_MAX (4u << 20)
#define PX_SUM_MAX_BLOCKS 4096u

/* Reads up to len bytes at off into buf (short only at EOF). */
static ssize_t read_full(int fd, uint8_t *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = SYS.pread(fd, buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

static int do_rchecksum(struct px_job *j, const struct bfs_rchecksum_req *req,
                        struct bfs_rchecksum_rep *rep)
{
    struct px_fd *pf;
    uint32_t block = req->block;
    if (block < PX_SUM_BLOCK_MIN || block > PX_SUM_BLOCK_MAX || req->len == 0 ||
        req->offset > (uint64_t)INT64_MAX || req->len > (uint64_t)INT64_MAX - req->offset ||
        (req->len + block - 1) / block > PX_SUM_MAX_BLOCKS)
        return -EINVAL;
    int rc = bfs__px_fd_get(j, req->fd, &pf);
    if (rc < 0)
        return rc;
    struct bfs_iatt attr;
    rc = bfs__px_fstat_iatt(pf->fd, &pf->gfid, &attr);
    if (rc < 0)
        return rc;
    rep->size = attr.size;
    uint64_t end = req->offset + req->len < attr.size ? req->offset + req->len : attr.size;
    uint64_t n = end > req->offset ? (end - req->offset + block - 1) / block : 0;
    uint8_t *sums = malloc(n ? n * PX_SUM_LEN : 1);
    uint8_t *buf = malloc(block);
    if (!sums || !buf) {
        free(sums);
        free(buf);
        return -ENOMEM;
    }
    rep->sums.data = sums; /* freed by the job with the reply */
    rep->sums.len = 0;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t off = req->offset + k * block;
        size_t want = end - off < block ? (size_t)(end - off) : block;
        ssize_t got = read_full(pf->fd, buf, want, off);
        if (got < 0) {
            free(buf);
            return (int)got;
        }
        unsigned int len = 0;
        if (!EVP_Digest(buf, (size_t)got, sums + k * PX_SUM_LEN, &len, EVP_sha256(), NULL) ||
            len != PX_SUM_LEN) {
            free(buf);
            return -EIO;
        }
        rep->sums.len += PX_SUM_LEN;
    }
    free(buf);
    return (int)n;
}
PX_FOP_DEFINE(rchecksum, BFS_FOP_RCHECKSUM)
