/*
 * client-prefetch.c — small files read with their open (option
 * performance.open-prefetch, default 64 KiB; 0 turns it off).
 *
 * Reading a small file takes three round trips to the brick: lookup, open,
 * read. An O_RDONLY open (no O_TRUNC) asks storage/posix, in its xdata
 * (key "open-prefetch", the size limit), to send the whole file back with
 * the open if it is no larger than the limit; posix reads it as the caller
 * through the fd it just opened. The bytes are kept on the fd (struct
 * cli_fd, pf_*) and the reads of that fd inside them are answered here.
 * The key is taken out of the reply before it goes up.
 *
 * What such a read returns is the file as the brick had it when it opened
 * it: the same as a read sent right after the open would return (what the
 * kernel's page cache does for the rest of the time a file is open), as
 * long as nothing changed the file through this client since. So every
 * fop that changes file data through this client (write, truncate,
 * ftruncate, fallocate, discard, zerofill, copy_file_range) bumps
 * priv->pf_gen when it is sent and again when it is answered, and so does
 * a lost connection; a prefetch is used only while pf_gen is the value it
 * had when the open was sent. Coarse (one counter for every file of the
 * brick) but never wrong: a busy writer only costs other files their
 * prefetch. Changes by other clients are not seen, as with any read that
 * follows an open: close-to-open consistency.
 *
 * A translator above that cannot vouch for the brick's copy as of the open
 * puts "open-prefetch-skip" in the read's xdata: the bytes are dropped and
 * the read goes to the brick (replicate: a copy that was being healed by
 * another process when the open was sent may be good by the time of the
 * read, and its prefetched bytes would be the old ones).
 *
 * A read answered here carries BFS_XDATA_PREFETCHED in its reply's xdata:
 * it reached no brick, so performance/md-cache need not forget the file's
 * attributes for it (the open's reply carried them as of the prefetch).
 *
 * The data lives until the fd's last read reaches its end, or the fd goes
 * (cli_fd_free). Per brick, per fd: replicate and distribute above get from
 * each brick exactly what that brick would have read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

#define CLI_PREFETCH_KEY "open-prefetch"
#define CLI_PREFETCH_SKIP_KEY "open-prefetch-skip" /* read xdata: go to the brick */

bool cli_pf_changes_data(int fop)
{
    switch (fop) {
    case BFS_FOP_WRITE: case BFS_FOP_TRUNCATE: case BFS_FOP_FTRUNCATE: case BFS_FOP_FALLOCATE:
    case BFS_FOP_DISCARD: case BFS_FOP_ZEROFILL: case BFS_FOP_COPY_FILE_RANGE:
        return true;
    default:
        return false;
    }
}

void cli_pf_bump(struct cli_priv *priv)
{
    pthread_mutex_lock(&priv->lock);
    priv->pf_gen++;
    pthread_mutex_unlock(&priv->lock);
}

int cli_pf_open_req(struct cli_priv *priv, struct cli_call *call, const struct bfs_open_req *q,
                    struct bfs_open_req *copy)
{
    int64_t asked = 1;
    if (priv->pf_max == 0 || (q->flags & (O_ACCMODE | O_TRUNC)) != O_RDONLY)
        return 0;
    /* a translator above that knows reads will go elsewhere (replicate:
     * one copy serves them) sends 0: no prefetch here (posix ignores 0) */
    if (bfs_dict_get_int(q->xdata, CLI_PREFETCH_KEY, &asked) == 0 && asked <= 0)
        return 0;
    *copy = *q;
    copy->xdata = q->xdata ? bfs_dict_copy(q->xdata) : bfs_dict_new();
    if (!copy->xdata || bfs_dict_set_int(copy->xdata, CLI_PREFETCH_KEY, (int64_t)priv->pf_max) < 0) {
        bfs_dict_unref(copy->xdata);
        return 0; /* no prefetch, an ordinary open */
    }
    pthread_mutex_lock(&priv->lock);
    call->pf_gen = priv->pf_gen;
    pthread_mutex_unlock(&priv->lock);
    call->pf = true;
    return 1;
}

void cli_pf_open_reply(struct cli_priv *priv, struct cli_call *call, struct cli_fd *cf,
                       struct bfs_open_rep *rep)
{
    const void *data;
    size_t len;
    if (!rep->xdata || bfs_dict_get_bin(rep->xdata, CLI_PREFETCH_KEY, &data, &len) < 0)
        return;
    void *copy = cf ? malloc(len ? len : 1) : NULL;
    if (copy)
        memcpy(copy, data, len);
    (void)bfs_dict_del(rep->xdata, CLI_PREFETCH_KEY); /* ours, not the caller's */
    if (!copy)
        return;
    pthread_mutex_lock(&priv->lock);
    if (priv->pf_gen == call->pf_gen && !cf->pf_data) {
        cf->pf_data = copy;
        cf->pf_len = len;
        cf->pf_attr = rep->attr;
        cf->pf_gen = call->pf_gen;
        copy = NULL;
    }
    pthread_mutex_unlock(&priv->lock);
    free(copy);
}

bool cli_pf_read(struct cli_priv *priv, struct cli_fd *cf, struct bfs_frame *frame,
                 const struct bfs_read_req *q)
{
    void *drop = NULL, *own = NULL;
    struct bfs_read_rep rep = {0};
    bool served = false;
    pthread_mutex_lock(&priv->lock);
    if (cf->pf_data && (cf->pf_gen != priv->pf_gen || q->flags ||
                        bfs_dict_has(q->xdata, CLI_PREFETCH_SKIP_KEY))) {
        /* changed since, a read with flags we do not interpret, or the
         * translator above does not trust what this brick had at the open
         * (replicate: the copy may have been healed since) */
        drop = cf->pf_data;
        cf->pf_data = NULL;
    } else if (cf->pf_data) {
        size_t len = cf->pf_len;
        size_t off = q->offset < len ? (size_t)q->offset : len;
        size_t n = len - off < q->size ? len - off : q->size;
        rep.eof = off + n >= len;
        rep.attr = cf->pf_attr;
        if (rep.eof) { /* the last of it: the data goes with this read */
            own = cf->pf_data;
            cf->pf_data = NULL;
            rep.data = (struct bfs_bytes){(const char *)own + off, n};
            served = true;
        } else if ((drop = malloc(n ? n : 1))) { /* a copy: another read may take the rest */
            memcpy(drop, (const char *)cf->pf_data + off, n);
            rep.data = (struct bfs_bytes){drop, n};
            served = true;
        }
    }
    pthread_mutex_unlock(&priv->lock);
    if (served) {
        /* no brick saw this read: md-cache may keep the file's attributes
         * (without memory for the key, it drops them: only a cost) */
        if ((rep.xdata = bfs_dict_new()) &&
            bfs_dict_set_int(rep.xdata, BFS_XDATA_PREFETCHED, 1) < 0) {
            bfs_dict_unref(rep.xdata);
            rep.xdata = NULL;
        }
        bfs_unwind_read(frame, (int)rep.data.len, &rep);
        bfs_dict_unref(rep.xdata);
    }
    free(own);
    free(drop);
    return served;
}
