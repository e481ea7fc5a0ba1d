/*
 * fuse-dir.c — directories: opendir, readdir, readdirplus, releasedir,
 * fsyncdir.
 *
 * A directory handle is a struct bfs_fuse_fh like a file's (is_dir set).
 * readdir asks the graph for entries from the kernel's offset and packs
 * what fits in the kernel's buffer; every entry carries as its offset the
 * brick's cookie for "after this entry", so the kernel's next request
 * resumes exactly after the last entry it got, whatever we had to leave
 * out. readdirplus also hands the kernel a nodeid for every entry that came
 * with attributes, so each of those counts one kernel lookup — except "."
 * and "..", which the kernel never counts (nodeid 0 tells it "no entry
 * attributes"). If the kernel drops the reply (interrupted), the counts are
 * taken back.
 *
 * Bricks never list "." and ".."; this layer adds them at the start of the
 * stream with the offsets 1 (after ".") and 2 (after "..", which is where
 * the brick's own listing starts, its offset 0). No brick file system hands
 * out 1 or 2 as the cookie of a real entry: those are the positions of its
 * own "." and ".." (tmpfs), or far below its first real entry (ext4, xfs).
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuse/fuse-bridge.h"

/* ---- opendir, releasedir, fsyncdir ---- */

static void opendir_cbk(struct bfs_frame *frame, void *cookie, int rc,
                        const struct bfs_opendir_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    if (rc < 0) {
        fuse_reply_err(c->req, -rc);
    } else {
        c->fi.fh = (uint64_t)(uintptr_t)c->fh;
        c->fi.cache_readdir = 0;
        c->fi.keep_cache = 0;
        bfs_fuse_fh_publish(c->fu, c->fh);
        if (fuse_reply_open(c->req, &c->fi) == 0)
            c->fh = NULL; /* the kernel will releasedir it */
    }
    bfs_fuse_call_done(c);
}

void bfs_fuse_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_inode *inode = bfs_fuse_inode(c, ino);
    c->fi = *fi;
    if (!inode || !(c->fh = bfs_fuse_fh_new(c, inode, fi->flags, 1))) {
        bfs_fuse_call_fail(c, -ENOMEM);
        return;
    }
    struct bfs_opendir_req r = {.fd = c->fh->fd};
    bfs_fuse_loc_inode(&r.loc, inode);
    int rc = bfs_wind_opendir(c->frame, bfs_fuse_top(c), opendir_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

void bfs_fuse_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    bfs_fuse_fh_free(bfs_fuse_of(req), bfs_fuse_fh(fi));
    fuse_reply_err(req, 0);
}

static void fsyncdir_cbk(struct bfs_frame *frame, void *cookie, int rc,
                         const struct bfs_fsyncdir_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    fuse_reply_err(c->req, rc < 0 ? -rc : 0);
    bfs_fuse_call_done(c);
}

void bfs_fuse_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    struct bfs_fsyncdir_req r = {.fd = bfs_fuse_call_fd(c, fi, false),
                                 .datasync = datasync ? 1 : 0};
    int rc = bfs_wind_fsyncdir(c->frame, bfs_fuse_top(c), fsyncdir_cbk, NULL, &r);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

/* ---- readdir, readdirplus ---- */

/* c->u64[0]: the kernel's buffer size; c->u64[1]: 1 for readdirplus;
 * c->valid: how many of ".", ".." still to add in front (2, 1 or 0). */
#define DOT_OFF 1    /* offset after "." */
#define DOTDOT_OFF 2 /* offset after "..": the brick's offset 0 */
static int wind_readdir(struct bfs_fuse_call *c, uint64_t offset);

static bool is_dots(const char *name)
{
    return name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0));
}

/* Adds entry d to buf if it fits; returns the bytes used, 0 if it does not
 * fit. A readdirplus entry with attributes counts a lookup on its node,
 * noted in linked[] (taken back by the caller if the reply is lost). */
static size_t add_entry(struct bfs_fuse_call *c, char *buf, size_t room,
                        const struct bfs_dirent *d, struct bfs_fuse_node **linked,
                        size_t *nlinked)
{
    bool plus = c->u64[1] != 0;
    size_t need = plus ? fuse_add_direntry_plus(c->req, NULL, 0, d->name, NULL, 0)
                       : fuse_add_direntry(c->req, NULL, 0, d->name, NULL, 0);
    if (need > room)
        return 0;
    struct fuse_entry_param e;
    memset(&e, 0, sizeof(e));
    e.attr.st_ino = d->has_attr && !bfs_gfid_is_null(&d->attr.gfid)
                        ? bfs_gfid_to_ino(&d->attr.gfid) : d->d_ino;
    e.attr.st_mode = DTTOIF(d->d_type);
    if (!plus)
        return fuse_add_direntry(c->req, buf, room, d->name, &e.attr, (off_t)d->d_off);
    if (d->has_attr && !bfs_gfid_is_null(&d->attr.gfid) && !is_dots(d->name)) {
        struct bfs_fuse_node *n = bfs_fuse_entry(c->fu, &d->attr, &e);
        if (n)
            linked[(*nlinked)++] = n;
        else
            memset(&e, 0, sizeof(e)); /* ENOMEM: name only, nodeid 0 */
    }
    return fuse_add_direntry_plus(c->req, buf, room, d->name, &e, (off_t)d->d_off);
}

/* Marks the handle the readdir came through (fh->listing). */
static void set_listing(struct bfs_fuse_call *c, bool listing)
{
    if (c->nfds < 1)
        return;
    pthread_mutex_lock(&c->fu->lock);
    c->fhs[0]->listing = listing;
    pthread_mutex_unlock(&c->fu->lock);
}

static void readdir_cbk(struct bfs_frame *frame, void *cookie, int rc,
                        const struct bfs_readdir_rep *rep)
{
    struct bfs_fuse_call *c = bfs_fuse_call_of(frame);
    const struct bfs_dirents *l = &rep->entries;
    size_t size = c->u64[0], used = 0, nlinked = 0, shown = 0;
    char *buf = NULL;
    /* reading may have moved the directory's atime: what an entry
     * operation said of it is out of date (fuse-node.c) */
    bfs_fuse_node_dir_attr_drop(c->fu, c->ino);
    struct bfs_fuse_node **linked = NULL;

    if (rc < 0)
        goto fail;
    buf = malloc(size ? size : 1);
    linked = calloc(l->count ? l->count : 1, sizeof(*linked));
    if (!buf || !linked) {
        rc = -ENOMEM;
        goto fail;
    }
    struct bfs_inode *dir = c->inode;
    for (uint32_t s = 2 - c->valid; s < 2; s++) {
        struct bfs_dirent dot = {.name = (char *)(s == 0 ? "." : ".."),
                                 .d_off = s == 0 ? DOT_OFF : DOTDOT_OFF, .d_type = DT_DIR,
                                 .d_ino = bfs_gfid_to_ino(&dir->gfid)}; /* root: 1 */
        used += add_entry(c, buf + used, size - used, &dot, linked, &nlinked);
        shown++;
    }
    uint32_t k, listed = 0;
    for (k = 0; k < l->count; k++) {
        const struct bfs_dirent *d = &l->v[k];
        if (bfs_fuse_hidden_dirent(dir, d->name))
            continue;
        size_t n = add_entry(c, buf + used, size - used, d, linked, &nlinked);
        if (n == 0)
            break;
        used += n;
        shown++;
        listed++;
    }
    /* Everything in this batch was hidden, and there is more: go on. */
    if (shown == 0 && k == l->count && l->count > 0 && !rep->eod) {
        c->valid = 0;
        free(buf);
        free(linked);
        rc = wind_readdir(c, l->v[l->count - 1].d_off);
        if (rc < 0)
            bfs_fuse_call_fail(c, rc);
        return;
    }
    /* the kernel comes back with the offset of our last entry: one of this
     * generation's if it was the graph's (not "." or ".."); a reply with
     * none ends the listing (before the call ends: a switch waits for it) */
    set_listing(c, listed > 0);
    if (fuse_reply_buf(c->req, used ? buf : NULL, used) < 0)
        for (size_t i = 0; i < nlinked; i++)
            bfs_fuse_node_unlookup(c->fu, linked[i], 1);
    free(buf);
    free(linked);
    bfs_fuse_call_done(c);
    return;
fail:
    free(buf);
    free(linked);
    fuse_reply_err(c->req, -rc);
    bfs_fuse_call_done(c);
}

static int wind_readdir(struct bfs_fuse_call *c, uint64_t offset)
{
    struct bfs_readdir_req r = {.fd = c->fd, .size = (uint32_t)c->u64[0], .offset = offset,
                                .plus = c->u64[1] != 0};
    return bfs_wind_readdir(c->frame, bfs_fuse_top(c), readdir_cbk, NULL, &r);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi, bool plus)
{
    struct bfs_fuse_call *c = bfs_fuse_call_new(req);
    if (!c)
        return;
    (void)bfs_fuse_call_fd(c, fi, false); /* sets c->fd; c now runs on its generation */
    if (!(c->inode = c->fd->inode ? bfs_inode_ref(c->fd->inode) : NULL)) {
        bfs_fuse_call_fail(c, -EBADF);
        return;
    }
    c->u64[0] = size;
    c->u64[1] = plus;
    c->ino = ino;
    uint64_t brick_off = (uint64_t)off;
    if (off < DOTDOT_OFF) {
        c->valid = off == 0 ? 2 : 1;
        brick_off = 0;
    } else if (off == DOTDOT_OFF) {
        brick_off = 0;
    }
    int rc = wind_readdir(c, brick_off);
    if (rc < 0)
        bfs_fuse_call_fail(c, rc);
}

void bfs_fuse_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      struct fuse_file_info *fi)
{
    do_readdir(req, ino, size, off, fi, false);
}

void bfs_fuse_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                          struct fuse_file_info *fi)
{
    do_readdir(req, ino, size, off, fi, true);
}
