/*
 * proto.h — the brickfs protocol above the frame layer (wire.h): which
 * frames protocol/client and protocol/server exchange, and the bodies of
 * the few messages that are not fops.
 *
 * Frames (type, proc, body):
 *   CALL   proc = fop number (enum bfs_fop)   stack (bfs_put_stack), then the
 *                                             fop's request (bfs_fop_info.enc_req)
 *   CALL   proc = BFS_PROC_SETVOLUME          struct bfs_setvolume_req
 *   CALL   proc = BFS_PROC_RELEASE(DIR)       u64 fd id
 *   REPLY  same id and proc as its CALL;      fops: the reply (enc_rep), or an
 *          status = rc                        empty body when status < 0 and the
 *                                             server has no reply struct (decode
 *                                             errors): read it as all zero.
 *                                             SETVOLUME: struct bfs_setvolume_rep.
 *                                             RELEASE(DIR): empty.
 *   PING / PONG  empty; a PONG carries the id of its PING. Either side may ping.
 *   UPCALL proc = 0                           struct bfs_upcall (server to client)
 *
 * Rules: the first CALL on a connection must be SETVOLUME; until it succeeds
 * the server answers nothing else and closes a connection that sends a fop.
 * fd ids are chosen by the client, are scoped to one connection and stay
 * valid until RELEASE(DIR) or the connection's end. A server answers calls
 * in any order.
 */
#ifndef BFS_RPC_PROTO_H
#define BFS_RPC_PROTO_H

#include <stdint.h>

#include "core/dict.h"
#include "rpc/codec.h"

#define BFS_PROTO_VERSION 1

/* Control procedures; fops use their enum bfs_fop value (< 1000). */
enum {
    BFS_PROC_SETVOLUME = 1000,
    BFS_PROC_RELEASE = 1001,
    BFS_PROC_RELEASEDIR = 1002,
};

/* Handshake. Strings point into the decoded buffer; xdata is owned. */
struct bfs_setvolume_req {
    uint32_t version;    /* BFS_PROTO_VERSION */
    const char *subvol;  /* the brick (server's child) the client wants */
    const char *uuid;    /* client identity, for logs and dumps */
    const char *name;    /* client translator name, may be NULL */
    struct bfs_dict *xdata;
};

struct bfs_setvolume_rep {
    uint32_t version;    /* the server's BFS_PROTO_VERSION */
    const char *brick;   /* the server's child name */
    const char *msg;     /* why it failed, for the client's log; may be NULL */
    struct bfs_dict *xdata;
};

int bfs_enc_setvolume_req(struct bfs_wbuf *w, const struct bfs_setvolume_req *r);
int bfs_dec_setvolume_req(struct bfs_rbuf *rd, struct bfs_setvolume_req *r);
int bfs_enc_setvolume_rep(struct bfs_wbuf *w, const struct bfs_setvolume_rep *r);
int bfs_dec_setvolume_rep(struct bfs_rbuf *rd, struct bfs_setvolume_rep *r);

/* Upcall body: kind gfid pargfid name:str, then for the contention kinds
 * (3, 4) domain:str owner:u64. Strings point into the buffer. A client
 * gets contention upcalls only if its SETVOLUME xdata carried
 * BFS_SETVOLUME_CONTENTION (older clients reject the longer body). */
#define BFS_SETVOLUME_CONTENTION "brickfs.upcall.contention"
/* SETVOLUME xdata: a client that keeps no cache an invalidation would
 * correct (the self-heal daemon's graph, protocol/client option
 * client.invalidations off) asks for no kind 1 and 2 upcalls; contention
 * notices still come. Absent (older clients): invalidations are sent. */
#define BFS_SETVOLUME_NO_INVAL "brickfs.upcall.no-invalidations"
struct bfs_upcall;
int bfs_enc_upcall(struct bfs_wbuf *w, const struct bfs_upcall *u);
int bfs_dec_upcall(struct bfs_rbuf *rd, struct bfs_upcall *u);

/* A decoding that must consume the whole body: dec's result, or -EBADMSG
 * for trailing bytes. */
int bfs_proto_dec_end(struct bfs_rbuf *rd, int rc);

#endif
