/*
 * trace.c — debug/trace: logs every fop that passes through and its answer
 * at INFO, each line tagged with this translator's name:
 *
 *   I [trace0] #42 write(fd gfid=..., off=0, len=4096) ->
 *   I [trace0] #42 write <- rc=4096 (+35 us)
 *
 * One generic handler (module generic_fop) serves every fop. What a request
 * is about is read from its first field, whose kind depends only on the
 * fop (a loc, an fd, or for a few a name before them), plus offsets and
 * sizes for data fops; replies that start with an iatt show its gfid, type
 * and size. The option `log-level` lowers the level (e.g. debug) for noisy
 * graphs. No state per call: the fop number travels in the frame.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "core/fops-util.h"
#include "core/xlator.h"

struct trace_priv {
    enum bfs_log_level level;
};

static void fmt_loc(char *buf, size_t len, const struct bfs_loc *loc)
{
    char g[BFS_GFID_STRLEN];
    if (!bfs_gfid_is_null(&loc->gfid))
        snprintf(buf, len, "gfid=%s%s%s", bfs_gfid_fmt(&loc->gfid, g), loc->name ? " name=" : "",
                 loc->name ? loc->name : "");
    else
        snprintf(buf, len, "pargfid=%s name=%s", bfs_gfid_fmt(&loc->pargfid, g),
                 loc->name ? loc->name : "(null)");
}

static void fmt_fd(char *buf, size_t len, const struct bfs_fd *fd)
{
    char g[BFS_GFID_STRLEN];
    if (fd && fd->inode)
        snprintf(buf, len, "fd=%p gfid=%s", (const void *)fd, bfs_gfid_fmt(&fd->inode->gfid, g));
    else
        snprintf(buf, len, "fd=%p", (const void *)fd);
}

static void fmt_domain(char *buf, size_t len, const char *domain, const char *what)
{
    snprintf(buf, len, "domain=%s %s", domain ? domain : "(null)", what);
}

/* The first field of every request is a loc or an fd, except these. */
static void describe_req(int fop, const void *req, char *buf, size_t len)
{
    char a[160], b[160];
    switch (fop) {
    case BFS_FOP_SYMLINK: {
        const struct bfs_symlink_req *r = req;
        fmt_loc(a, sizeof(a), &r->loc);
        snprintf(buf, len, "%s -> %s", a, r->target ? r->target : "(null)");
        return;
    }
    case BFS_FOP_RENAME: {
        const struct bfs_rename_req *r = req;
        fmt_loc(a, sizeof(a), &r->oldloc);
        fmt_loc(b, sizeof(b), &r->newloc);
        snprintf(buf, len, "%s => %s", a, b);
        return;
    }
    case BFS_FOP_LINK: {
        const struct bfs_link_req *r = req;
        fmt_loc(a, sizeof(a), &r->oldloc);
        fmt_loc(b, sizeof(b), &r->newloc);
        snprintf(buf, len, "%s => %s", a, b);
        return;
    }
    case BFS_FOP_INODELK:
        fmt_loc(a, sizeof(a), &((const struct bfs_inodelk_req *)req)->loc);
        fmt_domain(buf, len, ((const struct bfs_inodelk_req *)req)->domain, a);
        return;
    case BFS_FOP_ENTRYLK:
        fmt_loc(a, sizeof(a), &((const struct bfs_entrylk_req *)req)->loc);
        fmt_domain(buf, len, ((const struct bfs_entrylk_req *)req)->domain, a);
        return;
    case BFS_FOP_FINODELK:
        fmt_fd(a, sizeof(a), ((const struct bfs_finodelk_req *)req)->fd);
        fmt_domain(buf, len, ((const struct bfs_finodelk_req *)req)->domain, a);
        return;
    case BFS_FOP_FENTRYLK:
        fmt_fd(a, sizeof(a), ((const struct bfs_fentrylk_req *)req)->fd);
        fmt_domain(buf, len, ((const struct bfs_fentrylk_req *)req)->domain, a);
        return;
    case BFS_FOP_READ: {
        const struct bfs_read_req *r = req;
        fmt_fd(a, sizeof(a), r->fd);
        snprintf(buf, len, "%s off=%" PRIu64 " size=%" PRIu32, a, r->offset, r->size);
        return;
    }
    case BFS_FOP_WRITE: {
        const struct bfs_write_req *r = req;
        fmt_fd(a, sizeof(a), r->fd);
        snprintf(buf, len, "%s off=%" PRIu64 " len=%zu", a, r->offset, r->data.len);
        return;
    }
    }
    if (bfs_fop_info[fop].has_fd)
        fmt_fd(buf, len, *(struct bfs_fd *const *)req);
    else
        fmt_loc(buf, len, (const struct bfs_loc *)req);
}

/* Replies whose first field is an iatt. */
static bool rep_starts_with_iatt(int fop)
{
    switch (fop) {
    case BFS_FOP_LOOKUP: case BFS_FOP_STAT: case BFS_FOP_FSTAT: case BFS_FOP_MKNOD:
    case BFS_FOP_MKDIR: case BFS_FOP_SYMLINK: case BFS_FOP_RENAME: case BFS_FOP_LINK:
    case BFS_FOP_OPEN: case BFS_FOP_CREATE:
        return true;
    }
    return false;
}

static void trace_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    struct bfs_xl *xl = frame->xl;
    struct trace_priv *p = xl->private;
    uint64_t us = (bfs_now_ns() - frame->wound_ns) / 1000;
    (void)cookie;
    if (rc < 0) {
        bfs_log(xl->name, p->level, "#%" PRIu64 " %s <- rc=%d (%s) (+%" PRIu64 " us)",
                frame->stack->unique, bfs_fop_name(fop), rc, strerror(-rc), us);
    } else if (rep_starts_with_iatt(fop)) {
        const struct bfs_iatt *ia = rep;
        char g[BFS_GFID_STRLEN];
        bfs_log(xl->name, p->level,
                "#%" PRIu64 " %s <- rc=%d gfid=%s mode=0%o size=%" PRIu64 " (+%" PRIu64 " us)",
                frame->stack->unique, bfs_fop_name(fop), rc, bfs_gfid_fmt(&ia->gfid, g),
                ia->mode, ia->size, us);
    } else {
        bfs_log(xl->name, p->level, "#%" PRIu64 " %s <- rc=%d (+%" PRIu64 " us)",
                frame->stack->unique, bfs_fop_name(fop), rc, us);
    }
    bfs_unwind_any(fop, frame, rc, rep);
}

static int trace_generic(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req)
{
    struct trace_priv *p = xl->private;
    if (p->level <= bfs_log_get_level()) {
        char what[400];
        describe_req(fop, req, what, sizeof(what));
        bfs_log_msg(xl->name, p->level, __FILE__, __LINE__,
                    "#%" PRIu64 " %s(%s) uid=%u pid=%u ->", frame->stack->unique,
                    bfs_fop_name(fop), what, frame->stack->uid, frame->stack->pid);
    }
    int rc = bfs_wind_any(fop, frame, FIRST_CHILD(xl), trace_cbk, NULL, req);
    if (rc < 0)
        bfs_log(xl->name, p->level, "#%" PRIu64 " %s refused: rc=%d (%s)",
                frame->stack->unique, bfs_fop_name(fop), rc, strerror(-rc));
    return rc;
}

static int trace_init(struct bfs_xl *xl)
{
    struct trace_priv *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    if (bfs_log_level_parse(bfs_xl_opt_str(xl, "log-level"), &p->level) < 0)
        p->level = BFS_LOG_INFO;
    xl->private = p;
    return 0;
}

static void trace_fini(struct bfs_xl *xl)
{
    free(xl->private);
    xl->private = NULL;
}

static const char *const trace_levels[] = {"error", "warning", "info", "debug", "trace", NULL};

static const struct bfs_option_desc trace_options[] = {
    {.key = "log-level", .type = BFS_OPT_ENUM, .def = "info", .values = trace_levels,
     .description = "level at which calls and answers are logged"},
    {.key = NULL},
};

BFS_XL_MODULE(.type = "debug/trace", .options = trace_options, .init = trace_init,
              .fini = trace_fini, .generic_fop = trace_generic, .min_children = 1,
              .max_children = 1);
