/*
 * lease.c — the lease fop: read and write leases per inode, held by
 * (client, lease id).
 *
 *   set F_RDLCK   granted unless another holder has a write lease
 *   set F_WRLCK   granted unless anyone else holds any lease
 *   set again     converts the holder's lease under the same rules
 *   unlock        drops the holder's lease (EINVAL if it holds none)
 *   get           answers the strongest lease held on the inode and the id
 *                 of a holder of it (F_UNLCK when none)
 *
 * A conflicting set answers EAGAIN. Leases are not recalled: this
 * translator does not watch opens or data fops, so a lease only excludes
 * other leases (recall through upcalls is a later step). Leases go when the
 * holder's connection does (bfs__pl_lease_client_gone).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "locks.h"

enum { LEASE_GET = 1, LEASE_SET = 2, LEASE_UNLOCK = 3 };

static bool is_holder(const struct pl_lease *l, void *client, const uint8_t id[16])
{
    return l->client == client && memcmp(l->id, id, 16) == 0;
}

static struct pl_lease *find(struct pl_inode *pin, void *client, const uint8_t id[16])
{
    struct pl_list *pos;
    pl_foreach(pos, &pin->leases)
    {
        struct pl_lease *l = pl_entry(pos, struct pl_lease, link);
        if (is_holder(l, client, id))
            return l;
    }
    return NULL;
}

static bool conflict(struct pl_inode *pin, void *client, const uint8_t id[16], uint32_t type)
{
    struct pl_list *pos;
    pl_foreach(pos, &pin->leases)
    {
        struct pl_lease *l = pl_entry(pos, struct pl_lease, link);
        if (!is_holder(l, client, id) && (type == F_WRLCK || l->type == F_WRLCK))
            return true;
    }
    return false;
}

/* Under pin->lock; *spare is consumed when a new lease is recorded. */
static int lease_locked(struct pl_inode *pin, void *client, const struct bfs_lease *in,
                        struct bfs_lease *out, struct pl_lease **spare)
{
    struct pl_lease *l = find(pin, client, in->id);
    struct pl_list *pos;
    switch (in->cmd) {
    case LEASE_GET:
        out->type = F_UNLCK;
        pl_foreach(pos, &pin->leases)
        {
            struct pl_lease *h = pl_entry(pos, struct pl_lease, link);
            if (out->type == F_UNLCK || h->type == F_WRLCK) {
                out->type = h->type;
                memcpy(out->id, h->id, 16);
            }
        }
        return 0;
    case LEASE_SET:
        if (conflict(pin, client, in->id, in->type))
            return -EAGAIN;
        if (!l) {
            l = *spare;
            *spare = NULL;
            l->client = client;
            memcpy(l->id, in->id, 16);
            pl_list_add_tail(&pin->leases, &l->link);
        }
        l->type = in->type;
        l->since_ns = bfs_now_ns();
        return 0;
    case LEASE_UNLOCK:
        if (!l)
            return -EINVAL;
        pl_list_del(&l->link);
        free(l);
        out->type = F_UNLCK;
        return 0;
    }
    return -EINVAL;
}

int bfs__pl_lease(struct bfs_frame *frame, struct bfs_xl *xl, const struct bfs_lease_req *req)
{
    const struct bfs_lease *in = &req->lease;
    struct bfs_gfid gfid;
    if (bfs__pl_loc_gfid(&req->loc, &gfid) < 0 || in->cmd < LEASE_GET || in->cmd > LEASE_UNLOCK)
        return -EINVAL;
    if (in->cmd == LEASE_SET && in->type != F_RDLCK && in->type != F_WRLCK)
        return -EINVAL;
    struct pl_lease *spare = calloc(1, sizeof(*spare));
    struct pl_inode *pin = spare ? bfs__pl_inode_get(xl, &gfid, true) : NULL;
    if (!pin) {
        free(spare);
        return -ENOMEM;
    }
    pl_list_init(&spare->link);
    struct bfs_lease_rep rep = {.lease = *in};
    pthread_mutex_lock(&pin->lock);
    int rc = lease_locked(pin, frame->stack->client, in, &rep.lease, &spare);
    pthread_mutex_unlock(&pin->lock);
    free(spare);
    bfs__pl_inode_put(xl, pin);
    if (rc < 0)
        memset(&rep, 0, sizeof(rep));
    bfs_unwind_lease(frame, rc, &rep);
    return 0;
}

void bfs__pl_lease_client_gone(struct pl_inode *pin, void *client)
{
    struct pl_list *pos, *tmp;
    pl_foreach_safe(pos, tmp, &pin->leases)
    {
        struct pl_lease *l = pl_entry(pos, struct pl_lease, link);
        if (l->client == client) {
            pl_list_del(&l->link);
            free(l);
        }
    }
}
