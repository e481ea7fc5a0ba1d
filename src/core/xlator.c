/*
 * xlator.c — stacks, frames and the small parts of the translator contract
 * that are not generated: option getters and default event propagation.
 *
 * Lifetimes: a stack is refcounted and shared by all frames of one call;
 * each frame holds one reference. A frame is created by a wind
 * (bfs__frame_new) and destroyed right after its callback returns
 * (bfs__frame_destroy, from the generated unwind), or by the wind itself when
 * the callee refused the call. Top frames are created and freed by the
 * code outside the graph that starts a call.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "core/fops-util.h"
#include "core/graph.h"
#include "core/xlator.h"

struct bfs_stack *bfs_stack_new(void)
{
    struct bfs_stack *s = calloc(1, sizeof(*s));
    if (s)
        s->refs = 1;
    return s;
}

struct bfs_stack *bfs_stack_ref(struct bfs_stack *s)
{
    __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
    return s;
}

void bfs_stack_unref(struct bfs_stack *s)
{
    if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(s);
}

struct bfs_frame *bfs_frame_top_new(struct bfs_stack *stack, void *arg)
{
    struct bfs_frame *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->stack = bfs_stack_ref(stack);
    f->top_arg = arg;
    f->fop = -1;
    return f;
}

void bfs_frame_top_free(struct bfs_frame *f)
{
    if (!f)
        return;
    if (f->local_free && f->local)
        f->local_free(f->local);
    bfs_stack_unref(f->stack);
    free(f);
}

struct bfs_frame *bfs__frame_new(struct bfs_frame *parent, struct bfs_xl *child, int fop,
                                 void (*cbk)(void), bool cbk_any, void *cookie)
{
    struct bfs_frame *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->stack = bfs_stack_ref(parent->stack);
    f->xl = child;
    f->parent = parent;
    f->cbk = cbk;
    f->cbk_any = cbk_any;
    f->cookie = cookie;
    f->fop = fop;
    f->wound_ns = bfs_now_ns();
    f->graph = child->graph;
    if (f->graph)
        __atomic_add_fetch(&f->graph->inflight, 1, __ATOMIC_RELAXED);
    return f;
}

void bfs__frame_destroy(struct bfs_frame *f)
{
    if (f->local_free && f->local)
        f->local_free(f->local);
    if (f->graph)
        __atomic_sub_fetch(&f->graph->inflight, 1, __ATOMIC_RELEASE);
    bfs_stack_unref(f->stack);
    free(f);
}

void bfs__frame_unwinding(struct bfs_frame *frame, int rc)
{
    (void)frame;
    (void)rc;
}

void bfs__frame_pass(struct bfs_frame *frame, struct bfs_xl *child)
{
    /* A translator that passes a call on keeps no per-call state: the
     * child may set its own local on this frame. */
    if (frame->local_free && frame->local) {
        frame->local_free(frame->local);
    }
    frame->local = NULL;
    frame->local_free = NULL;
    frame->xl = child;
}

int bfs__loc_copy(struct bfs_loc *dst, const struct bfs_loc *src)
{
    *dst = *src;
    dst->name = NULL;
    dst->path = NULL;
    dst->inode = src->inode ? bfs_inode_ref(src->inode) : NULL;
    dst->parent = src->parent ? bfs_inode_ref(src->parent) : NULL;
    if ((src->name && !(dst->name = strdup(src->name))) ||
        (src->path && !(dst->path = strdup(src->path)))) {
        bfs__loc_clear(dst);
        return -ENOMEM;
    }
    return 0;
}

void bfs__loc_clear(struct bfs_loc *loc)
{
    free((char *)loc->name);
    free((char *)loc->path);
    if (loc->inode)
        bfs_inode_unref(loc->inode);
    if (loc->parent)
        bfs_inode_unref(loc->parent);
    memset(loc, 0, sizeof(*loc));
}

int bfs__bytes_copy(struct bfs_bytes *dst, const struct bfs_bytes *src)
{
    dst->len = src->len;
    dst->data = NULL;
    if (!src->data)
        return 0;
    void *p = malloc(src->len ? src->len : 1);
    if (!p)
        return -ENOMEM;
    memcpy(p, src->data, src->len);
    dst->data = p;
    return 0;
}

int bfs_wind_any(int fop, struct bfs_frame *frame, struct bfs_xl *child, bfs_any_cbk_t cbk,
                 void *cookie, const void *req)
{
    if (fop < 0 || fop >= BFS_FOP_COUNT)
        return -EINVAL;
    return bfs_fop_info[fop].wind(frame, child, (void (*)(void))cbk, true, cookie, req);
}

void bfs_unwind_any(int fop, struct bfs_frame *frame, int rc, const void *rep)
{
    bfs_fop_info[fop].unwind(frame, rc, rep);
}

/* ---- options ---- */

static const char *opt_text(const struct bfs_xl *xl, const char *key)
{
    const char *v = NULL;
    if (bfs_dict_get_str(xl->options, key, &v) == 0)
        return v;
    const struct bfs_option_desc *d = bfs_option_find(xl->mod->options, key);
    return d ? d->def : NULL;
}

const char *bfs_xl_opt_str(const struct bfs_xl *xl, const char *key)
{
    return opt_text(xl, key);
}

int64_t bfs_xl_opt_int(const struct bfs_xl *xl, const char *key)
{
    int64_t v = 0;
    const char *s = opt_text(xl, key);
    if (s && bfs_parse_int(s, &v) < 0) {
        /* percent values may carry a trailing '%' */
        v = strtoll(s, NULL, 10);
    }
    return v;
}

uint64_t bfs_xl_opt_size(const struct bfs_xl *xl, const char *key)
{
    uint64_t v = 0;
    const char *s = opt_text(xl, key);
    if (s)
        (void)bfs_parse_size(s, &v);
    return v;
}

bool bfs_xl_opt_bool(const struct bfs_xl *xl, const char *key)
{
    bool v = false;
    const char *s = opt_text(xl, key);
    if (s)
        (void)bfs_parse_bool(s, &v);
    return v;
}

/* ---- events ---- */

void bfs_xl_notify_parents(struct bfs_xl *xl, enum bfs_event ev, void *data)
{
    if (xl->nparents == 0 && xl->graph && xl->graph->on_event && xl == xl->graph->top)
        xl->graph->on_event(xl->graph, ev, data);
    for (int i = 0; i < xl->nparents; i++) {
        struct bfs_xl *p = xl->parents[i];
        if (p->mod->notify)
            p->mod->notify(p, ev, xl, data);
        else
            bfs_xl_notify_default(p, ev, xl, data);
    }
}

int bfs_xl_notify_default(struct bfs_xl *xl, enum bfs_event ev, struct bfs_xl *from, void *data)
{
    (void)from;
    /* A leaf with nothing to connect (storage) is up once the graph above is. */
    if (ev == BFS_EV_PARENT_UP && xl->nchildren == 0) {
        bfs_xl_notify_parents(xl, BFS_EV_CHILD_UP, NULL);
        return 0;
    }
    if (ev == BFS_EV_PARENT_UP || ev == BFS_EV_PARENT_DOWN || ev == BFS_EV_CLIENT_GONE ||
        ev == BFS_EV_CLIENT_CLOSING) {
        for (int i = 0; i < xl->nchildren; i++) {
            struct bfs_xl *c = xl->children[i];
            if (c->mod->notify)
                c->mod->notify(c, ev, xl, data);
            else
                bfs_xl_notify_default(c, ev, xl, data);
        }
        return 0;
    }
    bfs_xl_notify_parents(xl, ev, data);
    return 0;
}
