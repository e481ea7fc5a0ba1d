/*
 * mem.c — storage/memory: module descriptor, init/fini, fd context and the
 * reply path (synchronous, or posted to the event loop with `async on`).
 *
 * In async mode a reply is deep-copied (bfs_fop_info[fop].rep_copy_into),
 * the copy is answered from the loop thread and freed after its callback.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/event.h"
#include "core/graph.h"
#include "mem.h"

struct posted_reply {
    struct bfs_frame *frame;
    int fop;
    int rc;
    void *rep; /* deep copy */
};

static void posted_reply_run(void *arg)
{
    struct posted_reply *p = arg;
    bfs_unwind_any(p->fop, p->frame, p->rc, p->rep);
    bfs_fop_info[p->fop].rep_clear_dup(p->rep);
    free(p->rep);
    free(p);
}

void bfs__mem_reply(struct bfs_xl *xl, struct bfs_frame *frame, int fop, int rc, const void *rep)
{
    struct mem_priv *priv = xl->private;
    if (rc < 0)
        rep = NULL; /* an error answers a zeroed reply */
    if (priv->async) {
        struct posted_reply *p = calloc(1, sizeof(*p));
        void *copy = p ? calloc(1, bfs_fop_info[fop].rep_size) : NULL;
        if (copy && (!rep || bfs_fop_info[fop].rep_copy_into(copy, rep) == 0)) {
            *p = (struct posted_reply){frame, fop, rc, copy};
            if (bfs_loop_post(priv->loop, posted_reply_run, p) == 0)
                return;
            bfs_fop_info[fop].rep_clear_dup(copy);
        }
        free(copy);
        free(p);
        /* out of memory: answering now is still an answer */
    }
    bfs_unwind_any(fop, frame, rc, rep);
}

void bfs__mem_fd_bind(struct bfs_xl *xl, struct bfs_fd *fd, struct mem_inode *mi)
{
    uint64_t old;
    if (fd->graph != xl->graph)
        return; /* context slots are per graph; such an fd resolves by gfid */
    if (bfs_fd_ctx_get(fd, xl, &old) == 0 && old) {
        if ((struct mem_inode *)(uintptr_t)old == mi)
            return; /* re-open of the same fd object: keep one count */
        bfs__mem_put_open(xl->private, (struct mem_inode *)(uintptr_t)old);
    }
    if (bfs_fd_ctx_set(fd, xl, (uint64_t)(uintptr_t)mi) == 0)
        mi->opens++;
}

static void mem_release(struct bfs_xl *xl, struct bfs_fd *fd)
{
    struct mem_priv *priv = xl->private;
    uint64_t v;
    if (!priv || bfs_fd_ctx_del(fd, xl, &v) < 0 || !v)
        return;
    pthread_mutex_lock(&priv->lock);
    bfs__mem_put_open(priv, (struct mem_inode *)(uintptr_t)v);
    pthread_mutex_unlock(&priv->lock);
}

static int mem_init(struct bfs_xl *xl)
{
    struct mem_priv *priv = calloc(1, sizeof(*priv));
    if (!priv)
        return -ENOMEM;
    pthread_mutex_init(&priv->lock, NULL);
    priv->async = bfs_xl_opt_bool(xl, "async");
    priv->max_file_size = bfs_xl_opt_size(xl, "max-file-size");
    priv->loop = xl->graph && xl->graph->proc ? xl->graph->proc->loop : NULL;
    if (priv->async && !priv->loop) {
        XL_ERR(xl, "async on needs a process event loop");
        free(priv);
        return -EINVAL;
    }
    struct bfs_dict *xd = bfs_dict_new();
    struct mem_inode *root = NULL;
    int rc = xd && priv ? bfs__mem_store_init(priv) : -ENOMEM;
    if (rc == 0)
        rc = bfs_dict_set_bin(xd, MEM_GFID_REQ_KEY, bfs_gfid_root.b, 16);
    if (rc == 0)
        rc = bfs__mem_new(priv, NULL, xd, S_IFDIR | 0755, &root);
    bfs_dict_unref(xd);
    if (rc < 0) {
        bfs__mem_store_fini(priv);
        free(priv);
        return rc;
    }
    root->attr.nlink = 2;
    root->parent = bfs_gfid_root;
    xl->private = priv;
    return 0;
}

static void mem_fini(struct bfs_xl *xl)
{
    struct mem_priv *priv = xl->private;
    if (!priv)
        return;
    /* Unlinked inodes still held by fds are freed by their release;
     * once fini runs no fd of this graph may be live. */
    bfs__mem_store_fini(priv);
    pthread_mutex_destroy(&priv->lock);
    free(priv);
    xl->private = NULL;
}

static int mem_reconfigure(struct bfs_xl *xl, struct bfs_dict *options)
{
    struct mem_priv *priv = xl->private;
    const char *v;
    bool async;
    uint64_t size;
    if (bfs_dict_get_str(options, "async", &v) == 0 && bfs_parse_bool(v, &async) == 0) {
        if (async && !priv->loop)
            return -EINVAL;
        priv->async = async;
    }
    if (bfs_dict_get_str(options, "max-file-size", &v) == 0 && bfs_parse_size(v, &size) == 0)
        priv->max_file_size = size;
    return 0;
}

static const struct bfs_option_desc mem_options[] = {
    {.key = "async", .type = BFS_OPT_BOOL, .def = "off",
     .description = "answer every fop from the event loop instead of inline",
     .flags = BFS_OPT_F_RECONF},
    {.key = "max-file-size", .type = BFS_OPT_SIZE, .def = "1GB", .min = 0, .max = 0,
     .description = "largest file size; writes beyond fail with EFBIG",
     .flags = BFS_OPT_F_RECONF},
    {.key = NULL},
};

static const struct bfs_fops mem_fops = {
    .lookup = bfs__mem_lookup,
    .stat = bfs__mem_stat_fop,
    .fstat = bfs__mem_fstat,
    .access = bfs__mem_access,
    .readlink = bfs__mem_readlink,
    .mknod = bfs__mem_mknod,
    .mkdir = bfs__mem_mkdir,
    .unlink = bfs__mem_unlink,
    .rmdir = bfs__mem_rmdir,
    .symlink = bfs__mem_symlink,
    .rename = bfs__mem_rename,
    .link = bfs__mem_link,
    .truncate = bfs__mem_truncate,
    .ftruncate = bfs__mem_ftruncate,
    .open = bfs__mem_open,
    .create = bfs__mem_create,
    .read = bfs__mem_read,
    .write = bfs__mem_write,
    .flush = bfs__mem_flush,
    .fsync = bfs__mem_fsync,
    .opendir = bfs__mem_opendir,
    .readdir = bfs__mem_readdir,
    .fsyncdir = bfs__mem_fsyncdir,
    .statfs = bfs__mem_statfs,
    .setxattr = bfs__mem_setxattr,
    .fsetxattr = bfs__mem_fsetxattr,
    .getxattr = bfs__mem_getxattr,
    .fgetxattr = bfs__mem_fgetxattr,
    .removexattr = bfs__mem_removexattr,
    .fremovexattr = bfs__mem_fremovexattr,
    .xattrop = bfs__mem_xattrop,
    .fxattrop = bfs__mem_fxattrop,
    .setattr = bfs__mem_setattr,
    .fsetattr = bfs__mem_fsetattr,
};

BFS_XL_MODULE(.type = "storage/memory", .fops = &mem_fops, .options = mem_options,
              .init = mem_init, .fini = mem_fini, .reconfigure = mem_reconfigure,
              .release = mem_release, .releasedir = mem_release, .min_children = 0,
              .max_children = 0);
