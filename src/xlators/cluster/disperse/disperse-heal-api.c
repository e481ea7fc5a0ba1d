/*
 * disperse-heal-api.c — what the self-heal daemon (brickfs-shd) asks of one
 * disperse set about one inode, as virtual xattrs answered here and never
 * sent to a brick: the same contract as replicate's
 * (replicate-heal-api.c, docs/design/self-heal-daemon.md), so that the
 * daemon and `volume heal NAME info` treat both kinds of set alike:
 *
 *   getxattr "brickfs.heal.status" on loc{gfid}: the inode's health now
 *   getxattr "brickfs.heal.now"    on loc{gfid}: heal what is pending
 *                                  (entry, metadata, data; locks tried
 *                                  once: a file being written stays
 *                                  pending for the next crawl), then the
 *                                  status, with "brickfs.heal.bytes"
 *
 * uid 0 only (EPERM). The status is a set of STR values (rc = their count):
 *   brickfs.heal.status       one line for people
 *   brickfs.heal.pending      "data,metadata,entry" (types with a stale
 *                             child or dirty marks; may be empty)
 *   brickfs.heal.split-brain  always empty: versions always give a source
 *                             (fewer than k good fragments is data loss, not
 *                             a choice between copies)
 *   brickfs.heal.sources.T / .sinks.T   child names, T = data|metadata|entry
 *   brickfs.heal.missing      children that answered ENOENT or ESTALE
 *   brickfs.heal.down         children down or failing
 *   brickfs.heal.file-type    regular|directory|symlink|other|none
 *
 * The reply is built by the shared lib/heal-status.c.
 *
 * Everything runs on the heal thread with blocking calls: the question
 * waits in the heal queue (a foreground job holding the getxattr's frame,
 * struct ec_heal_req.vop) and is answered from there; a job dropped at
 * shutdown is answered ENOTCONN.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "disperse.h"
#include "xlators/lib/heal-status.h"

bool ec_vop_getxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_getxattr_req *req)
{
    if (!req->name || strncmp(req->name, EC_VKEY_PREFIX, sizeof(EC_VKEY_PREFIX) - 1) != 0)
        return false;
    struct ec_heal_req r = {.gfid = req->loc.gfid, .frame = f};
    r.vop = strcmp(req->name, EC_VKEY_PREFIX "status") == 0 ? EC_VOP_STATUS
            : strcmp(req->name, EC_VKEY_PREFIX "now") == 0  ? EC_VOP_HEAL
                                                            : EC_VOP_NONE;
    int rc = !r.vop                          ? -ENODATA
             : f->stack->uid != 0            ? -EPERM
             : bfs_gfid_is_null(&r.gfid)     ? -EINVAL
                                             : ec_heal_request(ec_priv(xl), &r);
    if (rc < 0)
        bfs_unwind_getxattr(f, rc, &(struct bfs_getxattr_rep){0});
    return true;
}

/* ---- the state of one inode (heal thread) ---- */

struct snap {
    struct ec_state s;
    int rc[EC_MAX];
    struct ec_view v;
    uint32_t types;              /* the types that apply to the file type */
    uint32_t pending;            /* bit per type */
};

/* Looks g up on every up child (keys included), no lock: a snapshot. */
static void take_snap(struct ec_priv *p, struct bfs_stack *st, const struct bfs_gfid *g,
                      struct snap *sn)
{
    memset(sn, 0, sizeof(*sn));
    struct bfs_lookup_req req = {.xdata = ec_lookup_xdata(NULL)};
    req.loc.gfid = *g;
    uint32_t up = ec_up(p), asked = 0;
    for (int i = 0; i < p->n; i++) {
        sn->rc[i] = -ENOTCONN;
        if (!bfs_mask_has(up, i) || !req.xdata)
            continue;
        asked |= BFS_BIT(i);
        struct bfs_lookup_rep rep;
        sn->rc[i] = bfs_sync_lookup(p->xl->children[i], st, &req, &rep);
        if (sn->rc[i] >= 0)
            ec_state_add(&sn->s, i, &rep.attr, rep.xdata);
        bfs_lookup_rep_clear_dup(&rep);
    }
    bfs_dict_unref(req.xdata);
    ec_combine(p, &sn->s, asked, sn->rc, &sn->v);
    if (sn->v.rc < 0)
        return;
    uint32_t mode = sn->s.attr[sn->v.child].mode & S_IFMT;
    sn->types = BFS_BIT(EC_META) | (mode == S_IFREG ? BFS_BIT(EC_DATA) : 0) |
                (mode == S_IFDIR ? BFS_BIT(EC_ENTRY) : 0);
    sn->pending = (sn->v.lag | sn->v.dirty) & sn->types;
}

/* The reply dict of a status (lib/heal-status.c). NULL: ENOMEM. */
static struct bfs_dict *status_dict(const struct ec_priv *p, const struct snap *sn)
{
    struct bfs_heal_status hs = {.found = sn->v.rc == 0, .types = sn->types,
                                 .pending = sn->pending};
    if (hs.found)
        hs.mode = sn->s.attr[sn->v.child].mode;
    for (int t = 0; t < EC_NTYPES; t++) {
        hs.sources[t] = sn->v.good[t] & sn->v.present;
        hs.sinks[t] = sn->v.present & ~hs.sources[t];
    }
    for (int i = 0; i < p->n; i++) {
        if (sn->rc[i] == -ENOENT || sn->rc[i] == -ESTALE)
            hs.missing |= BFS_BIT(i);
        else if (sn->rc[i] < 0)
            hs.down |= BFS_BIT(i);
    }
    return bfs_heal_status_dict(p->xl, &hs);
}

/* Heals the pending types (locks tried once); bytes of file data healed. */
static int64_t heal_pending(struct ec_priv *p, const struct bfs_gfid *g, const struct snap *sn)
{
    int64_t bytes = 0;
    bool fail = false;
    if (sn->pending & BFS_BIT(EC_ENTRY))
        fail |= ec_heal_entry(p, g, true) < 0;
    if (sn->pending & BFS_BIT(EC_META))
        fail |= ec_heal_meta(p, g, true) < 0;
    if (sn->pending & BFS_BIT(EC_DATA)) {
        if (ec_heal_data(p, g, true) == 0)
            bytes = (int64_t)sn->v.size;
        else
            fail = true;
    }
    __atomic_add_fetch(fail ? &p->n_heal_fail : &p->n_heal_ok, 1, __ATOMIC_RELAXED);
    return bytes;
}

void ec_vop_run(struct ec_priv *p, struct ec_heal_req *r)
{
    struct bfs_stack *st = bfs_stack_new();
    struct snap *sn = calloc(1, sizeof(*sn));
    int64_t bytes = 0;
    struct bfs_getxattr_rep rep = {0};
    int rc = st && sn ? 0 : -ENOMEM;
    if (rc == 0) {
        take_snap(p, st, &r->gfid, sn);
        if (r->vop == EC_VOP_HEAL && sn->v.rc == 0 && sn->pending) {
            bytes = heal_pending(p, &r->gfid, sn);
            take_snap(p, st, &r->gfid, sn);
        }
        rep.xattrs = status_dict(p, sn);
        rc = rep.xattrs ? 0 : -ENOMEM;
    }
    if (rc == 0 && r->vop == EC_VOP_HEAL)
        rc = bfs_dict_set_int(rep.xattrs, EC_VKEY_PREFIX "bytes", bytes);
    if (rc == 0)
        rc = (int)bfs_dict_count(rep.xattrs);
    bfs_unwind_getxattr(r->frame, rc, &rep);
    bfs_dict_unref(rep.xattrs);
    free(sn);
    if (st)
        bfs_stack_unref(st);
}
