/*
 * proto.c — codecs of the protocol's non-fop messages (proto.h): the
 * SETVOLUME handshake and upcalls. Same conventions as the generated fop
 * codec: a flat list of puts/gets over a sticky-error buffer.
 */
#include "rpc/proto.h"

#include <errno.h>
#include <string.h>

#include "core/xlator.h"

int bfs_proto_dec_end(struct bfs_rbuf *rd, int rc)
{
    if (rc < 0)
        return rc;
    return bfs_rbuf_end(rd);
}

int bfs_enc_setvolume_req(struct bfs_wbuf *w, const struct bfs_setvolume_req *r)
{
    bfs_put_u32(w, r->version);
    bfs_put_str(w, r->subvol);
    bfs_put_str(w, r->uuid);
    bfs_put_str(w, r->name);
    bfs_put_dict(w, r->xdata);
    return w->err;
}

int bfs_dec_setvolume_req(struct bfs_rbuf *rd, struct bfs_setvolume_req *r)
{
    memset(r, 0, sizeof(*r));
    bfs_get_u32(rd, &r->version);
    bfs_get_str(rd, &r->subvol);
    bfs_get_str(rd, &r->uuid);
    bfs_get_str(rd, &r->name);
    bfs_get_dict(rd, &r->xdata);
    return bfs_proto_dec_end(rd, rd->err);
}

int bfs_enc_setvolume_rep(struct bfs_wbuf *w, const struct bfs_setvolume_rep *r)
{
    bfs_put_u32(w, r->version);
    bfs_put_str(w, r->brick);
    bfs_put_str(w, r->msg);
    bfs_put_dict(w, r->xdata);
    return w->err;
}

int bfs_dec_setvolume_rep(struct bfs_rbuf *rd, struct bfs_setvolume_rep *r)
{
    memset(r, 0, sizeof(*r));
    bfs_get_u32(rd, &r->version);
    bfs_get_str(rd, &r->brick);
    bfs_get_str(rd, &r->msg);
    bfs_get_dict(rd, &r->xdata);
    return bfs_proto_dec_end(rd, rd->err);
}

int bfs_enc_upcall(struct bfs_wbuf *w, const struct bfs_upcall *u)
{
    bfs_put_u32(w, u->kind);
    bfs_put_gfid(w, &u->gfid);
    bfs_put_gfid(w, &u->pargfid);
    bfs_put_str(w, u->name);
    if (bfs_upcall_is_contention(u->kind)) {
        bfs_put_str(w, u->domain);
        bfs_put_u64(w, u->owner);
    }
    return w->err;
}

int bfs_dec_upcall(struct bfs_rbuf *rd, struct bfs_upcall *u)
{
    memset(u, 0, sizeof(*u));
    bfs_get_u32(rd, &u->kind);
    bfs_get_gfid(rd, &u->gfid);
    bfs_get_gfid(rd, &u->pargfid);
    bfs_get_str(rd, &u->name);
    if (bfs_upcall_is_contention(u->kind)) {
        bfs_get_str(rd, &u->domain);
        bfs_get_u64(rd, &u->owner);
    }
    return bfs_proto_dec_end(rd, rd->err);
}
