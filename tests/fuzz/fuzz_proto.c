/*
 * fuzz_proto.c — libFuzzer target for every body decoder a brick or client
 * runs on bytes from the network: the handshake, upcalls, and the request
 * and reply of every fop (the generated codec, as protocol/server and
 * protocol/client call it). The first input byte picks the decoder; a
 * decoded message is re-encoded and released, so leaks and bad ownership
 * show up under ASan/LSan.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/xlator.h"
#include "rpc/codec.h"
#include "rpc/proto.h"

static int fake_fd_to_id(void *arg, struct bfs_fd *fd, uint64_t *id)
{
    (void)arg;
    *id = (uint64_t)(uintptr_t)fd->flags;
    return 0;
}

/* Any id decodes to a fresh, unattached fd, as the server does for new fds. */
static int fake_id_to_fd(void *arg, uint64_t id, int is_new, struct bfs_fd **out)
{
    (void)arg;
    (void)is_new;
    if (id == 0)
        return -EBADF;
    *out = bfs_fd_new(NULL, NULL, (int32_t)(id & 0xffff), 0);
    return *out ? 0 : -ENOMEM;
}

static const struct bfs_codec_fds fds = {NULL, fake_fd_to_id, fake_id_to_fd};

static void fuzz_fop(int fop, int reply, const uint8_t *p, size_t n)
{
    const struct bfs_fop_info *fi = &bfs_fop_info[fop];
    void *msg = calloc(1, reply ? fi->rep_size : fi->req_size);
    struct bfs_rbuf rd;
    struct bfs_wbuf w;
    bfs_rbuf_init(&rd, p, n);
    bfs_wbuf_init(&w);
    int rc = reply ? fi->dec_rep(&rd, msg) : fi->dec_req(&rd, msg, &fds);
    if (rc == 0)
        (void)(reply ? fi->enc_rep(&w, msg) : fi->enc_req(&w, msg, &fds));
    (reply ? fi->rep_clear_decoded : fi->req_clear_decoded)(msg);
    bfs_wbuf_free(&w);
    free(msg);
}

static bool same_str(const char *a, const char *b)
{
    return (!a || !*a) ? (!b || !*b) : (b && strcmp(a, b) == 0);
}

/* What an upcall encodes to decodes to the same message (the contention
 * kinds carry a domain and an owner the others do not). */
static void upcall_round_trip(const struct bfs_upcall *u, const struct bfs_wbuf *w)
{
    struct bfs_rbuf rd;
    struct bfs_upcall v;
    bfs_rbuf_init(&rd, w->p, w->len);
    if (bfs_dec_upcall(&rd, &v) != 0 || v.kind != u->kind || v.owner != u->owner ||
        !bfs_gfid_eq(&v.gfid, &u->gfid) || !bfs_gfid_eq(&v.pargfid, &u->pargfid) ||
        !same_str(v.name, u->name) || !same_str(v.domain, u->domain))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned sel = data[0];
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    struct bfs_rbuf rd;
    struct bfs_wbuf w;
    bfs_rbuf_init(&rd, p, n);
    bfs_wbuf_init(&w);
    if (sel < 2 * BFS_FOP_COUNT) {
        fuzz_fop((int)(sel >> 1), (int)(sel & 1), p, n);
    } else if (sel % 3 == 0) {
        struct bfs_setvolume_req r = {0};
        if (bfs_proto_dec_end(&rd, bfs_dec_setvolume_req(&rd, &r)) == 0)
            bfs_enc_setvolume_req(&w, &r);
        bfs_dict_unref(r.xdata);
    } else if (sel % 3 == 1) {
        struct bfs_setvolume_rep r = {0};
        if (bfs_proto_dec_end(&rd, bfs_dec_setvolume_rep(&rd, &r)) == 0)
            bfs_enc_setvolume_rep(&w, &r);
        bfs_dict_unref(r.xdata);
    } else {
        struct bfs_upcall u = {0};
        if (bfs_proto_dec_end(&rd, bfs_dec_upcall(&rd, &u)) == 0 && bfs_enc_upcall(&w, &u) == 0)
            upcall_round_trip(&u, &w);
    }
    bfs_wbuf_free(&w);
    return 0;
}
