/*
 * replicate-heal-api.c — what the self-heal daemon (and an administrator)
 * asks of one replica set about one inode, as virtual xattrs answered here
 * and never sent to a brick (docs/design/self-heal-daemon.md):
 *
 *   getxattr "brickfs.heal.status"  on loc{gfid}: the inode's health now
 *   getxattr "brickfs.heal.now"     on loc{gfid}: heal what is pending
 *                                   (entry, metadata, data), then the status;
 *                                   its locks are tried, not waited for: an
 *                                   inode busy with a writer stays pending
 *   setxattr "brickfs.heal.resolve" on loc{gfid}, value "bigger-file",
 *                                   "latest-mtime" or "source-brick:CHILD":
 *                                   resolve a data/metadata split-brain
 *
 * All three are for uid 0 only (EPERM otherwise): a resolution throws away
 * one side's changes. The status is a set of STR values in the reply:
 *   brickfs.heal.status            one line for people
 *   brickfs.heal.pending           types with counters or differences
 *                                  ("data,metadata,entry", may be empty)
 *   brickfs.heal.split-brain       types in split-brain
 *   brickfs.heal.sources.T / .sinks.T   child names, T = data|metadata|entry
 *   brickfs.heal.missing           children that answered ENOENT or ESTALE
 *   brickfs.heal.down              children that are down or failed
 *   brickfs.heal.file-type         regular|directory|symlink|other|none
 * and "brickfs.heal.bytes" (INT) after a heal: bytes of file data healed.
 * rc is the number of keys.
 *
 * Resolution errors: EINVAL (unknown policy or child), ENOENT (no copy
 * answers), EALREADY (not in data or metadata split-brain), ENOTUNIQ (the
 * policy cannot choose: equal sizes or times), ENOTCONN (the chosen source
 * is not reachable), EIO (the heal failed).
 *
 * Everything runs on the heal thread (replicate-heal.c) with blocking calls:
 * the request waits in the heal queue with its frame (struct afr_heal_req,
 * vop set) and is answered from there.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "replicate.h"

#define VKEY_STATUS AFR_VKEY_PREFIX "status"
#define VKEY_NOW AFR_VKEY_PREFIX "now"
#define VKEY_RESOLVE AFR_VKEY_PREFIX "resolve"

static const char *const type_names[AFR_NTYPES] = {"data", "metadata", "entry"};

/* ---- entry points (any thread) ---- */

static int queue_vop(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_loc *loc, int vop,
                     const char *arg, size_t arglen)
{
    if (f->stack->uid != 0)
        return -EPERM;
    if (bfs_gfid_is_null(&loc->gfid))
        return -EINVAL;
    struct afr_heal_req r = {.gfid = loc->gfid, .frame = f, .vop = vop};
    if (arg && !(r.arg = strndup(arg, arglen)))
        return -ENOMEM;
    int rc = afr_heal_request(afr_priv(xl), &r);
    if (rc < 0)
        free(r.arg);
    return rc;
}

bool afr_vop_getxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_getxattr_req *req)
{
    if (!req->name || strncmp(req->name, AFR_VKEY_PREFIX, sizeof(AFR_VKEY_PREFIX) - 1) != 0)
        return false;
    int vop = strcmp(req->name, VKEY_STATUS) == 0 ? AFR_VOP_STATUS
              : strcmp(req->name, VKEY_NOW) == 0  ? AFR_VOP_HEAL
                                                  : AFR_VOP_NONE;
    int rc = vop ? queue_vop(f, xl, &req->loc, vop, NULL, 0) : -ENODATA;
    if (rc < 0)
        bfs_unwind_getxattr(f, rc, &(struct bfs_getxattr_rep){0});
    return true;
}

bool afr_vop_setxattr(struct bfs_frame *f, struct bfs_xl *xl, const struct bfs_setxattr_req *req)
{
    const void *v;
    size_t len;
    if (!req->xattrs || bfs_dict_get_raw(req->xattrs, VKEY_RESOLVE, NULL, &v, &len) < 0)
        return false;
    int rc = bfs_dict_count(req->xattrs) == 1
                 ? queue_vop(f, xl, &req->loc, AFR_VOP_RESOLVE, v, len)
                 : -EINVAL;
    if (rc < 0)
        bfs_unwind_setxattr(f, rc, &(struct bfs_setxattr_rep){0});
    return true;
}

void afr_vop_cancel(struct afr_heal_req *r)
{
    if (r->vop == AFR_VOP_RESOLVE)
        bfs_unwind_setxattr(r->frame, -ENOTCONN, &(struct bfs_setxattr_rep){0});
    else
        bfs_unwind_getxattr(r->frame, -ENOTCONN, &(struct bfs_getxattr_rep){0});
    free(r->arg);
    r->arg = NULL;
}

/* ---- the state of one inode (heal thread) ---- */

struct snap {
    struct afr_state s;
    int rc[AFR_MAX];
    uint32_t types;              /* the types that apply (from the file type) */
    struct afr_decision d[AFR_NTYPES];
    uint32_t pending;            /* bit per type */
    uint32_t split;              /* bit per type */
    int ref;                     /* a child that answered, -1 */
};

static bool counters_set(const struct afr_state *s, int t)
{
    for (int i = 0; i < s->n; i++) {
        if (!bfs_mask_has(s->valid, i))
            continue;
        if (s->dirty[i][t])
            return true;
        for (int j = 0; j < s->n; j++)
            if (s->pending[i][j][t])
                return true;
    }
    return false;
}

/* Looks g up on every up child (counters included), no lock: a snapshot. */
static void take_snap(struct afr_priv *p, struct bfs_stack *st, const struct bfs_gfid *g,
                      struct snap *sn)
{
    memset(sn, 0, sizeof(*sn));
    sn->s.n = p->n;
    sn->s.arbiter = p->arbiter;
    sn->ref = -1;
    struct bfs_lookup_req req = {.xdata = afr_lookup_xdata(p, NULL)};
    req.loc.gfid = *g;
    uint32_t up = afr_up(p);
    for (int i = 0; i < p->n; i++) {
        sn->rc[i] = -ENOTCONN;
        if (!bfs_mask_has(up, i) || !req.xdata)
            continue;
        struct bfs_lookup_rep rep;
        sn->rc[i] = bfs_sync_lookup(p->xl->children[i], st, &req, &rep);
        if (sn->rc[i] >= 0) {
            sn->s.attr[i] = rep.attr;
            afr_state_add_row(p, &sn->s, i, rep.xdata);
            if (sn->ref < 0)
                sn->ref = i;
        }
        bfs_lookup_rep_clear_dup(&rep);
    }
    bfs_dict_unref(req.xdata);
    if (sn->ref < 0)
        return;
    sn->types = afr_types_of(sn->s.attr[sn->ref].mode);
    for (int t = 0; t < AFR_NTYPES; t++) {
        if (!(sn->types & BFS_BIT(t)))
            continue;
        afr_decide(&sn->s, t, AFR_FAV_NONE, -1, &sn->d[t]);
        if (sn->d[t].split_brain)
            sn->split |= BFS_BIT(t);
        if (sn->d[t].needs_heal || counters_set(&sn->s, t))
            sn->pending |= BFS_BIT(t);
    }
}

/* "a,b" from the child names of mask. */
static void names_of(const struct afr_priv *p, uint32_t mask, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < p->n && o < len; i++)
        if (bfs_mask_has(mask, i))
            o += (size_t)snprintf(out + o, len - o, "%s%s", o ? "," : "",
                                  p->xl->children[i]->name);
}

static void types_of(uint32_t mask, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (int t = 0; t < AFR_NTYPES && o < len; t++)
        if (mask & BFS_BIT(t))
            o += (size_t)snprintf(out + o, len - o, "%s%s", o ? "," : "", type_names[t]);
}

static const char *ftype(const struct snap *sn)
{
    if (sn->ref < 0)
        return "none";
    uint32_t m = sn->s.attr[sn->ref].mode & S_IFMT;
    return m == S_IFREG ? "regular" : m == S_IFDIR ? "directory" : m == S_IFLNK ? "symlink"
                                                                               : "other";
}

/* The reply dict of a status. NULL: ENOMEM. */
static struct bfs_dict *status_dict(const struct afr_priv *p, const struct snap *sn)
{
    struct bfs_dict *d = bfs_dict_new();
    char pend[64], split[64], missing[1024], down[1024], line[4096], buf[1024], key[64];
    uint32_t mmask = 0, dmask = 0;
    for (int i = 0; i < p->n; i++) {
        if (sn->rc[i] == -ENOENT || sn->rc[i] == -ESTALE)
            mmask |= BFS_BIT(i);
        else if (sn->rc[i] < 0)
            dmask |= BFS_BIT(i);
    }
    types_of(sn->pending, pend, sizeof(pend));
    types_of(sn->split, split, sizeof(split));
    names_of(p, mmask, missing, sizeof(missing));
    names_of(p, dmask, down, sizeof(down));
    int rc = d ? 0 : -ENOMEM;
    size_t o = (size_t)snprintf(line, sizeof(line), "type=%s pending=%s split-brain=%s",
                                ftype(sn), *pend ? pend : "-", *split ? split : "-");
    for (int t = 0; t < AFR_NTYPES && rc == 0; t++) {
        if (!(sn->types & BFS_BIT(t)))
            continue;
        names_of(p, sn->d[t].sources, buf, sizeof(buf));
        snprintf(key, sizeof(key), AFR_VKEY_PREFIX "sources.%s", type_names[t]);
        rc = bfs_dict_set_str(d, key, buf);
        if (o < sizeof(line))
            o += (size_t)snprintf(line + o, sizeof(line) - o, " %s:sources=%s", type_names[t],
                                  *buf ? buf : "-");
        names_of(p, sn->d[t].sinks, buf, sizeof(buf));
        snprintf(key, sizeof(key), AFR_VKEY_PREFIX "sinks.%s", type_names[t]);
        if (rc == 0)
            rc = bfs_dict_set_str(d, key, buf);
        if (o < sizeof(line))
            o += (size_t)snprintf(line + o, sizeof(line) - o, ",sinks=%s", *buf ? buf : "-");
    }
    if (o < sizeof(line))
        snprintf(line + o, sizeof(line) - o, " missing=%s down=%s", *missing ? missing : "-",
                 *down ? down : "-");
    if (rc == 0)
        rc = bfs_dict_set_str(d, VKEY_STATUS, line);
    if (rc == 0)
        rc = bfs_dict_set_str(d, AFR_VKEY_PREFIX "pending", pend);
    if (rc == 0)
        rc = bfs_dict_set_str(d, AFR_VKEY_PREFIX "split-brain", split);
    if (rc == 0)
        rc = bfs_dict_set_str(d, AFR_VKEY_PREFIX "missing", missing);
    if (rc == 0)
        rc = bfs_dict_set_str(d, AFR_VKEY_PREFIX "down", down);
    if (rc == 0)
        rc = bfs_dict_set_str(d, AFR_VKEY_PREFIX "file-type", ftype(sn));
    if (rc < 0) {
        bfs_dict_unref(d);
        return NULL;
    }
    return d;
}

/* Heals the pending types of the inode; returns bytes of data healed. */
static int64_t heal_pending(struct afr_priv *p, const struct bfs_gfid *g, const struct snap *sn)
{
    int64_t bytes = 0;
    bool fail = false;
    /* a file that is being written (its eager lock held) is left for the
     * next crawl rather than holding the crawl up */
    p->heal_try = true;
    if (sn->pending & BFS_BIT(AFR_ENTRY))
        fail |= afr_heal_entry(p, g) < 0;
    if (sn->pending & BFS_BIT(AFR_METADATA))
        fail |= afr_heal_meta(p, g, -1) < 0;
    if (sn->pending & BFS_BIT(AFR_DATA)) {
        if (afr_heal_data(p, g, -1) == 0)
            bytes = (int64_t)sn->s.attr[sn->ref].size;
        else
            fail = true;
    }
    p->heal_try = false;
    __atomic_add_fetch(fail ? &p->n_heal_fail : &p->n_heal_ok, 1, __ATOMIC_RELAXED);
    return bytes;
}

/* ---- resolution ---- */

static bool later(const struct bfs_iatt *a, const struct bfs_iatt *b)
{
    return a->mtime_sec != b->mtime_sec ? a->mtime_sec > b->mtime_sec
                                        : a->mtime_nsec > b->mtime_nsec;
}

/* The child a policy chooses among those that answered, or -errno. */
static int choose(const struct afr_priv *p, const struct snap *sn, const char *policy)
{
    static const char sb[] = "source-brick:";
    if (strncmp(policy, sb, sizeof(sb) - 1) == 0) {
        for (int i = 0; i < p->n; i++)
            if (strcmp(p->xl->children[i]->name, policy + sizeof(sb) - 1) == 0)
                return bfs_mask_has(sn->s.valid, i) ? i : -ENOTCONN;
        return -EINVAL;
    }
    bool size = strcmp(policy, "bigger-file") == 0;
    if (!size && strcmp(policy, "latest-mtime") != 0)
        return -EINVAL;
    uint32_t cand = sn->s.valid;
    if (S_ISREG(sn->s.attr[sn->ref].mode))
        cand = afr_data_mask(p, cand);
    int best = -1;
    bool tie = false;
    for (int i = 0; i < p->n; i++) {
        if (!bfs_mask_has(cand, i))
            continue;
        const struct bfs_iatt *a = &sn->s.attr[i];
        if (best < 0) {
            best = i;
            continue;
        }
        const struct bfs_iatt *b = &sn->s.attr[best];
        bool better = size ? a->size > b->size : later(a, b);
        bool same = size ? a->size == b->size
                         : a->mtime_sec == b->mtime_sec && a->mtime_nsec == b->mtime_nsec;
        if (better) {
            best = i;
            tie = false;
        } else if (same) {
            tie = true;
        }
    }
    return best < 0 ? -ENOTCONN : tie ? -ENOTUNIQ : best;
}

static int resolve(struct afr_priv *p, struct bfs_stack *st, const struct bfs_gfid *g,
                   const char *policy)
{
    struct snap sn;
    take_snap(p, st, g, &sn);
    if (sn.ref < 0)
        return -ENOENT;
    uint32_t split = sn.split & (BFS_BIT(AFR_DATA) | BFS_BIT(AFR_METADATA));
    if (!split)
        return -EALREADY;
    int src = choose(p, &sn, policy);
    if (src < 0)
        return src;
    XL_INFO(p->xl, "split-brain resolution (%s): source %s", policy, p->xl->children[src]->name);
    int rc = 0;
    if ((split & BFS_BIT(AFR_DATA)) && afr_heal_data(p, g, src) < 0)
        rc = -EIO;
    if ((split & BFS_BIT(AFR_METADATA)) && afr_heal_meta(p, g, src) < 0)
        rc = -EIO;
    take_snap(p, st, g, &sn);
    if (rc == 0 && (sn.split & split))
        rc = -EIO;
    return rc;
}

/* ---- the heal thread ---- */

void afr_vop_run(struct afr_priv *p, struct afr_heal_req *r)
{
    struct bfs_stack *st = bfs_stack_new();
    if (!st) {
        afr_vop_cancel(r);
        return;
    }
    if (r->vop == AFR_VOP_RESOLVE) {
        int rc = resolve(p, st, &r->gfid, r->arg ? r->arg : "");
        bfs_unwind_setxattr(r->frame, rc, &(struct bfs_setxattr_rep){0});
    } else {
        struct snap sn;
        int64_t bytes = 0;
        take_snap(p, st, &r->gfid, &sn);
        if (r->vop == AFR_VOP_HEAL && sn.ref >= 0 && sn.pending) {
            bytes = heal_pending(p, &r->gfid, &sn);
            take_snap(p, st, &r->gfid, &sn);
        }
        struct bfs_getxattr_rep rep = {.xattrs = status_dict(p, &sn)};
        int rc = rep.xattrs ? 0 : -ENOMEM;
        if (rc == 0 && r->vop == AFR_VOP_HEAL)
            rc = bfs_dict_set_int(rep.xattrs, AFR_VKEY_PREFIX "bytes", bytes);
        if (rc == 0)
            rc = (int)bfs_dict_count(rep.xattrs);
        bfs_unwind_getxattr(r->frame, rc, &rep);
        bfs_dict_unref(rep.xattrs);
    }
    bfs_stack_unref(st);
    free(r->arg);
    r->arg = NULL;
}
