/*
 * locks-unlink.c — an unlink that runs under the caller's entry lock, taken
 * and released here, in one request (lib/lk-unlink-wire.h has the keys).
 * Distribute removes a file that lives on its hashed brick this way: the
 * lock it would take with an entrylk of its own, the lookup it would make
 * under it, the unlink and the release are one round trip instead of three
 * (docs/design/distribute.md, "Creating and removing names").
 *
 *   1. entrylk LOCK (write, the request's domain, parent, name) wound into
 *      this translator itself, so it queues and is granted like any other
 *      (owner = the caller's client and stack->lk_owner);
 *   2. lookup of (parent, name) below: an error is the answer; a mode equal
 *      to the request's refuse-mode (a distribute link file) answers
 *      -EREMOTE, nothing removed;
 *   3. the unlink below, without our keys;
 *   4. the lock released (bfs__pl_entrylk_drop), then the unlink's answer
 *      goes up with BFS_LK_X_UNLINK_LOCKED in its xdata when it succeeded.
 *
 * Not combined with the pre-op keys of locks-txn.c: a request carrying
 * ours goes straight to the translator below (distribute sends them only
 * to subvolumes that are single bricks, where no changelog rides).
 *
 * Lifetime: a struct lu_call lives from the request until its answer went
 * up; it owns a deep copy of the request (without our keys).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "locks.h"
#include "xlators/lib/lk-unlink-wire.h"

struct lu_call {
    struct bfs_xl *xl;
    struct bfs_unlink_req req; /* deep copy, our keys removed */
    struct pl_owner owner;
    char *domain;
    bool refuse;
    uint32_t refuse_mode;
    bool locked;
};

static void lu_free(struct lu_call *c)
{
    bfs_unlink_req_clear_dup(&c->req);
    free(c->domain);
    free(c);
}

static void lu_unlock(struct lu_call *c)
{
    if (c->locked)
        (void)bfs__pl_entrylk_drop(c->xl, &c->owner, c->domain, &c->req.loc.pargfid,
                                   c->req.loc.name);
    c->locked = false;
}

static void lu_fail(struct bfs_frame *frame, struct lu_call *c, int rc)
{
    lu_unlock(c);
    lu_free(c);
    bfs_unwind_unlink(frame, rc, &(struct bfs_unlink_rep){0});
}

static void unlink_cbk(struct bfs_frame *frame, void *cookie, int rc,
                       const struct bfs_unlink_rep *rep)
{
    struct lu_call *c = cookie;
    lu_unlock(c);
    struct bfs_unlink_rep r = *rep;
    struct bfs_dict *x = NULL;
    if (rc >= 0) {
        x = rep->xdata ? bfs_dict_copy(rep->xdata) : bfs_dict_new();
        if (x && bfs_dict_set_int(x, BFS_LK_X_UNLINK_LOCKED, 1) < 0) {
            bfs_dict_unref(x);
            x = NULL;
        }
        if (x) /* without it the client only stops using the keys */
            r.xdata = x;
    }
    lu_free(c);
    bfs_unwind_unlink(frame, rc, &r);
    bfs_dict_unref(x);
}

static void lookup_cbk(struct bfs_frame *frame, void *cookie, int rc,
                       const struct bfs_lookup_rep *rep)
{
    struct lu_call *c = cookie;
    if (rc >= 0 && c->refuse && rep->attr.mode == c->refuse_mode)
        rc = -EREMOTE;
    if (rc >= 0)
        rc = bfs_wind_unlink(frame, FIRST_CHILD(c->xl), unlink_cbk, c, &c->req);
    if (rc < 0)
        lu_fail(frame, c, rc);
}

static void lock_cbk(struct bfs_frame *frame, void *cookie, int rc,
                     const struct bfs_entrylk_rep *rep)
{
    (void)rep;
    struct lu_call *c = cookie;
    if (rc >= 0) {
        c->locked = true;
        struct bfs_lookup_req q = {0};
        q.loc.pargfid = c->req.loc.pargfid;
        q.loc.name = c->req.loc.name;
        rc = bfs_wind_lookup(frame, FIRST_CHILD(c->xl), lookup_cbk, c, &q);
    }
    if (rc < 0)
        lu_fail(frame, c, rc);
}

/* The request with our keys: 1 when it has none (pass it on as it is). */
static int locked_unlink(struct bfs_frame *frame, struct bfs_xl *xl,
                         const struct bfs_unlink_req *req)
{
    const char *dom;
    int64_t mode;
    if (bfs_dict_get_str(req->xdata, BFS_LK_X_UNLINK_ENTRYLK, &dom) < 0 || !dom || !*dom)
        return 1;
    if (bfs_gfid_is_null(&req->loc.pargfid) || !req->loc.name)
        return -EINVAL;
    struct lu_call *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->xl = xl;
    c->owner.client = frame->stack->client;
    c->owner.id = frame->stack->lk_owner;
    c->refuse = bfs_dict_get_int(req->xdata, BFS_LK_X_UNLINK_REFUSE, &mode) == 0;
    c->refuse_mode = (uint32_t)mode;
    c->domain = strdup(dom);
    if (!c->domain || bfs_unlink_req_copy_into(&c->req, req) < 0) {
        free(c->domain);
        free(c);
        return -ENOMEM;
    }
    bfs_dict_unref(c->req.xdata); /* a reference to the caller's: ours is a copy */
    if (!(c->req.xdata = bfs_dict_copy(req->xdata))) {
        lu_free(c);
        return -ENOMEM;
    }
    (void)bfs_dict_del(c->req.xdata, BFS_LK_X_UNLINK_ENTRYLK);
    (void)bfs_dict_del(c->req.xdata, BFS_LK_X_UNLINK_REFUSE);
    struct bfs_entrylk_req q = {.domain = c->domain, .basename = c->req.loc.name,
                                .cmd = BFS_ENTRYLK_LOCK, .type = BFS_ENTRYLK_WRLCK};
    q.loc.gfid = c->req.loc.pargfid;
    int rc = bfs_wind_entrylk(frame, xl, lock_cbk, c, &q); /* into ourselves: it may wait */
    if (rc < 0)
        lu_free(c);
    return rc;
}

int bfs__pl_unlink_locked(struct bfs_frame *frame, struct bfs_xl *xl,
                          const struct bfs_unlink_req *req)
{
    int rc = req->xdata ? locked_unlink(frame, xl, req) : 1;
    return rc == 1 ? bfs__pl_unlink(frame, xl, req) : rc;
}
