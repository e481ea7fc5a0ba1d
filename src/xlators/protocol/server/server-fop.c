/*
 * server-fop.c — one generic path for every fop a client sends: decode the
 * CALL body (caller identity, then the request through bfs_fop_info[]),
 * check it, wind it into the child from a fresh top frame, and encode the
 * answer as a REPLY when it comes back, on whatever thread it comes back.
 *
 * A request's life: struct srv_req holds the frame body (decoded strings
 * and byte ranges point into it), the decoded request, a stack whose
 * `client` is the connection, and a reference on the connection. It is
 * freed right after its reply is queued.
 *
 * fds: the request names fds by the client's ids, mapped through the
 * connection's table. A fop that opens an fd (open, create, opendir)
 * carries the id the client chose for it; we make a new bfs_fd for it
 * (an id already in use is EBADF) and enter it in the table only when
 * the fop succeeds, so a failed open leaves nothing behind.
 *
 * Checks before anything reaches the graph:
 *   - decode errors: a well-framed but unacceptable value (a name with an
 *     embedded NUL: -EINVAL; an unknown fd id: -EBADF) is answered with
 *     that error; anything else (truncated, trailing bytes, bad lengths)
 *     means the peer does not speak the protocol: the connection closes.
 *   - names (server-names.c): "", ".", "..", '/' and over-long names are
 *     answered EINVAL / ENAMETOOLONG (storage/posix checks again).
 *   - xdata key "brickfs-internal", which server-side translators read as
 *     "this request comes from brickfs itself" (it opens trusted.brickfs.*),
 *     is removed from every request, except the xattr calls of a root
 *     caller that name only trusted.brickfs.dht.* keys, and a root caller's
 *     mknod that gives the new entry such keys: cluster/distribute runs in
 *     clients and keeps its link files there (srv_internal_allowed).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server.h"

#include "core/fops-util.h"
#include "core/graph.h"
#include "rpc/codec.h"

#define SRV_INTERNAL_KEY "brickfs-internal"

/* The generator appends `struct bfs_dict *xdata` as the last member of
 * every request struct, and no member is aligned wider than a pointer, so
 * xdata ends the struct. Checked here on a few shapes. */
#define XDATA_IS_LAST(t)                                                                       \
    _Static_assert(offsetof(struct t, xdata) + sizeof(void *) == sizeof(struct t),              \
                   #t ": xdata is not the last member")
XDATA_IS_LAST(bfs_lookup_req);
XDATA_IS_LAST(bfs_write_req);
XDATA_IS_LAST(bfs_lk_req);
XDATA_IS_LAST(bfs_readdir_req);
XDATA_IS_LAST(bfs_lease_req);
XDATA_IS_LAST(bfs_copy_file_range_req);

struct srv_req {
    struct srv_conn *sc;
    uint64_t id;
    int fop;
    void *body;
    struct bfs_stack *stack;
    struct bfs_frame *top;
    struct bfs_fd *newfd; /* the fd this fop opens; the request holds its reference */
    uint64_t newfd_id;
    _Alignas(16) unsigned char req[];
};

static struct bfs_dict **req_xdata(struct srv_req *r)
{
    size_t size = bfs_fop_info[r->fop].req_size;
    return (struct bfs_dict **)(void *)(r->req + size - sizeof(struct bfs_dict *));
}

/* ---- the fd mapping used while decoding ---- */

static int srv_id_to_fd(void *arg, uint64_t id, int is_new, struct bfs_fd **out)
{
    struct srv_req *r = arg;
    struct bfs_fd *fd = srv_fd_get(r->sc, id);
    if (!is_new) {
        *out = fd;
        return fd ? 0 : -EBADF;
    }
    if (fd || r->newfd) {
        bfs_fd_unref(fd);
        return -EBADF; /* the id names an open fd */
    }
    struct bfs_xl *xl = r->sc->priv->xl;
    fd = bfs_fd_new(xl->graph, NULL, 0, r->fop == BFS_FOP_OPENDIR);
    if (!fd)
        return -ENOMEM;
    r->newfd = fd;
    r->newfd_id = id;
    *out = fd;
    return 0;
}

static int srv_fd_to_id(void *arg, struct bfs_fd *fd, uint64_t *id)
{
    (void)arg;
    (void)fd;
    (void)id;
    return -EINVAL; /* replies carry no fds */
}

/* Open flags and, when the request names it, the inode of a new fd.
 * create's inode is only known from its reply (srv_newfd_from_reply). */
static void srv_newfd_prepare(struct srv_req *r)
{
    struct bfs_itable *it = r->sc->priv->xl->graph->itable;
    const struct bfs_loc *loc = NULL;
    uint32_t type = 0;
    switch (r->fop) {
    case BFS_FOP_OPEN: {
        const struct bfs_open_req *q = (const void *)r->req;
        r->newfd->flags = (int32_t)q->flags;
        loc = &q->loc;
        break;
    }
    case BFS_FOP_CREATE: {
        const struct bfs_create_req *q = (const void *)r->req;
        r->newfd->flags = (int32_t)q->flags;
        break;
    }
    case BFS_FOP_OPENDIR: {
        const struct bfs_opendir_req *q = (const void *)r->req;
        r->newfd->flags = O_RDONLY | O_DIRECTORY;
        loc = &q->loc;
        type = S_IFDIR;
        break;
    }
    }
    if (loc && !bfs_gfid_is_null(&loc->gfid))
        r->newfd->inode = bfs_inode_get(it, &loc->gfid, type);
}

static void srv_newfd_from_reply(struct srv_req *r, const void *rep)
{
    const struct bfs_iatt *attr = NULL;
    if (r->newfd->inode)
        return;
    if (r->fop == BFS_FOP_OPEN)
        attr = &((const struct bfs_open_rep *)rep)->attr;
    else if (r->fop == BFS_FOP_CREATE)
        attr = &((const struct bfs_create_rep *)rep)->attr;
    if (attr && !bfs_gfid_is_null(&attr->gfid))
        r->newfd->inode = bfs_inode_get(r->sc->priv->xl->graph->itable, &attr->gfid,
                                        attr->mode & S_IFMT);
}

/* ---- request life ---- */

static struct srv_req *srv_req_new(struct srv_conn *sc, const struct bfs_wire_hdr *h,
                                   void *body)
{
    size_t size = bfs_fop_info[h->proc].req_size;
    struct srv_req *r = calloc(1, sizeof(*r) + size);
    struct bfs_stack *st = bfs_stack_new();
    if (!r || !st) {
        free(r);
        bfs_stack_unref(st);
        return NULL;
    }
    r->sc = srv_conn_ref(sc);
    r->id = h->id;
    r->fop = (int)h->proc;
    r->body = body;
    r->stack = st;
    st->client = sc;
    st->unique = h->id;
    pthread_mutex_lock(&sc->lock);
    sc->inflight++;
    sc->requests++;
    pthread_mutex_unlock(&sc->lock);
    return r;
}

static void srv_req_free(struct srv_req *r)
{
    struct srv_conn *sc = r->sc;
    bfs_frame_top_free(r->top);
    bfs_fop_info[r->fop].req_clear_decoded(r->req); /* drops the request's fd refs */
    free(r->body);
    bfs_stack_unref(r->stack);
    pthread_mutex_lock(&sc->lock);
    sc->inflight--;
    pthread_mutex_unlock(&sc->lock);
    free(r);
    srv_conn_unref(sc);
}

/* ---- big read replies without a copy of the data ----
 * As protocol/client does for writes: the reply is encoded around empty
 * data and sent in three pieces (bfs_conn_send writes them without a copy
 * when the socket takes them at once). The data is the first field of a
 * read reply; read_layout_ok() checks that once against the generated
 * encoder, and the copying path is taken if it ever changes. */

#define SRV_GATHER_MIN (64u * 1024)

static bool read_gather_ok;
static pthread_once_t read_gather_once = PTHREAD_ONCE_INIT;

static void read_gather_check(void)
{
    struct bfs_read_rep q = {.data = {"abc", 3}, .eof = true};
    struct bfs_wbuf a, b;
    bfs_wbuf_init(&a);
    bfs_wbuf_init(&b);
    int rc = bfs_fop_info[BFS_FOP_READ].enc_rep(&a, &q);
    q.data = (struct bfs_bytes){"", 0};
    if (rc == 0)
        rc = bfs_fop_info[BFS_FOP_READ].enc_rep(&b, &q);
    if (rc == 0 && b.len >= 4 && a.len == b.len + 3) {
        struct iovec iov[3];
        struct bfs_bytes data = {"abc", 3};
        bfs_wbuf_gather_bytes(&b, 0, &data, iov);
        size_t off = 0;
        bool same = true;
        for (int i = 0; i < 3 && same; i++) {
            same = memcmp(a.p + off, iov[i].iov_base, iov[i].iov_len) == 0;
            off += iov[i].iov_len;
        }
        read_gather_ok = same && off == a.len;
    }
    bfs_wbuf_free(&a);
    bfs_wbuf_free(&b);
}

/* Sends a successful read reply with its data gathered: true if it went
 * (or the connection is closing), false to take the copying path. */
static bool srv_reply_read_gathered(struct srv_req *r, int rc, const struct bfs_read_rep *rep)
{
    if (rep->data.len < SRV_GATHER_MIN)
        return false;
    pthread_once(&read_gather_once, read_gather_check);
    if (!read_gather_ok)
        return false;
    struct bfs_read_rep empty = *rep;
    empty.data = (struct bfs_bytes){"", 0};
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    bool sent = false;
    if (bfs_fop_info[BFS_FOP_READ].enc_rep(&w, &empty) == 0) {
        struct iovec iov[3];
        bfs_wbuf_gather_bytes(&w, 0, &rep->data, iov);
        struct bfs_wire_hdr h = {.type = BFS_WIRE_REPLY, .id = r->id, .proc = (uint32_t)r->fop,
                                 .status = rc};
        int err = bfs_conn_send(r->sc->conn, &h, iov, 3);
        sent = err == 0 || err == -ENOTCONN;
    }
    bfs_wbuf_free(&w);
    return sent;
}

/* Encodes rep (NULL: empty body) and sends the REPLY. */
static void srv_reply(struct srv_req *r, int rc, const void *rep)
{
    void *body = NULL;
    size_t len = 0;
    if (rep && rc >= 0 && r->fop == BFS_FOP_READ && srv_reply_read_gathered(r, rc, rep))
        return;
    if (rep) {
        struct bfs_wbuf w;
        bfs_wbuf_init(&w);
        int err = bfs_fop_info[r->fop].enc_rep(&w, rep);
        if (err < 0) {
            XL_WARN(r->sc->priv->xl, "peer %s: cannot encode the %s reply: %s", r->sc->peer,
                    bfs_fop_name(r->fop), strerror(-err));
            bfs_wbuf_free(&w);
            rc = err;
        } else {
            body = bfs_wbuf_take(&w, &len);
        }
    }
    srv_send_reply(r->sc, r->id, (uint32_t)r->fop, rc, body, len);
}

static void srv_fop_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    struct srv_req *r = cookie;
    (void)frame;
    (void)fop;
    if (rc >= 0 && r->newfd) {
        srv_newfd_from_reply(r, rep);
        int err = srv_fd_insert(r->sc, r->newfd_id, r->newfd);
        if (err < 0) {
            /* The child opened it; our reference going away releases it. */
            if (err != -ENOTCONN)
                XL_WARN(r->sc->priv->xl, "peer %s: %s fd id %llu: %s", r->sc->peer,
                        bfs_fop_name(r->fop), (unsigned long long)r->newfd_id,
                        strerror(-err));
            rc = err;
            rep = NULL;
        }
    }
    srv_reply(r, rc, rep);
    srv_req_free(r);
}

/* Decodes stack and request. 0, an error to answer (> -4096, logged), or
 * SRV_DROP when the connection must close (logged). */
#define SRV_DROP 1
static int srv_decode(struct srv_req *r, size_t len)
{
    const struct bfs_codec_fds fds = {.arg = r, .fd_to_id = srv_fd_to_id,
                                      .id_to_fd = srv_id_to_fd};
    struct srv_conn *sc = r->sc;
    struct bfs_rbuf rd;
    bfs_rbuf_init(&rd, r->body, len);
    int rc = bfs_get_stack(&rd, r->stack);
    if (rc == 0)
        rc = bfs_fop_info[r->fop].dec_req(&rd, r->req, &fds);
    if (rc == 0)
        rc = bfs_rbuf_end(&rd);
    if (rc == -EINVAL || rc == -EBADF || rc == -ENOMEM) {
        XL_WARN(sc->priv->xl, "peer %s: %s request %llu refused while decoding: %s",
                sc->peer, bfs_fop_name(r->fop), (unsigned long long)r->id, strerror(-rc));
        return rc;
    }
    if (rc < 0) {
        srv_conn_fail(sc, -EPROTO, "malformed %s request %llu: %s", bfs_fop_name(r->fop),
                      (unsigned long long)r->id, strerror(-rc));
        return SRV_DROP;
    }
    if ((rc = srv_check_names(r->fop, r->req)) < 0) {
        XL_WARN(sc->priv->xl, "peer %s: %s request %llu refused: bad name: %s", sc->peer,
                bfs_fop_name(r->fop), (unsigned long long)r->id, strerror(-rc));
        return rc;
    }
    struct bfs_dict *xd = *req_xdata(r);
    if (xd && bfs_dict_has(xd, SRV_INTERNAL_KEY) &&
        !srv_internal_allowed(r->fop, r->req, r->stack) &&
        bfs_dict_del(xd, SRV_INTERNAL_KEY) == 0)
        XL_DBG(sc->priv->xl, "peer %s: removed '%s' from a %s request", sc->peer,
               SRV_INTERNAL_KEY, bfs_fop_name(r->fop));
    return 0;
}

void srv_handle_fop(struct srv_conn *sc, const struct bfs_wire_hdr *h, void *body, size_t len)
{
    struct srv_req *r = srv_req_new(sc, h, body);
    if (!r) {
        free(body);
        srv_send_reply(sc, h->id, h->proc, -ENOMEM, NULL, 0);
        return;
    }
    int rc = srv_decode(r, len);
    if (rc == SRV_DROP) {
        srv_req_free(r);
        return;
    }
    if (rc == 0 && r->newfd)
        srv_newfd_prepare(r);
    if (rc == 0 && !(r->top = bfs_frame_top_new(r->stack, r)))
        rc = -ENOMEM;
    if (rc == 0)
        rc = bfs_wind_any(r->fop, r->top, FIRST_CHILD(sc->priv->xl), srv_fop_cbk, r, r->req);
    if (rc < 0) {
        srv_reply(r, rc, NULL);
        srv_req_free(r);
    }
}
