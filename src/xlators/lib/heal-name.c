/*
 * heal-name.c — names a brick kept half made, completed by the entry heal
 * of their parent (heal-name.h says why, and what "half made" is). Used by
 * replicate (replicate-heal-entry.c) and disperse (disperse-heal.c), each
 * after its own marking of the copy as a new one. Nothing here outlives a
 * call.
 */
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

#include "core/fops-util.h"
#include "heal-name.h"

#define GFID_REQ "gfid-req" /* xdata BIN[16]: storage/posix's GFID for a new entry */

uint32_t bfs_heal_dirent_type(const struct bfs_dirent *e)
{
    if (e->has_attr)
        return e->attr.mode & S_IFMT;
    return e->d_type == DT_UNKNOWN ? 0 : DTTOIF(e->d_type);
}

bool bfs_heal_name_half(const struct bfs_dirent *have, const struct bfs_dirent *e)
{
    uint32_t type = e->attr.mode & S_IFMT;
    if (!e->has_attr || bfs_heal_dirent_type(have) != type)
        return false;
    if (!have->has_attr)
        return true; /* no GFID yet */
    return S_ISREG(type) && have->attr.nlink == 0 && bfs_gfid_eq(&have->attr.gfid, &e->attr.gfid);
}

int bfs_heal_name_lookup(struct bfs_xl *xl, int i, struct bfs_stack *st, const struct bfs_gfid *par,
                         const char *name, const struct bfs_gfid *want, struct bfs_iatt *out)
{
    struct bfs_lookup_req req = {0};
    struct bfs_lookup_rep rep;
    req.loc.pargfid = *par;
    req.loc.name = name;
    if (want) {
        req.xdata = bfs_dict_new();
        if (!req.xdata || bfs_dict_set_bin(req.xdata, GFID_REQ, want->b, sizeof(want->b)) < 0) {
            bfs_dict_unref(req.xdata);
            return -ENOMEM;
        }
    }
    int rc = bfs_sync_lookup(xl->children[i], st, &req, &rep);
    if (rc >= 0)
        *out = rep.attr;
    bfs_lookup_rep_clear_dup(&rep);
    bfs_dict_unref(req.xdata);
    return rc < 0 ? rc : 0;
}

bool bfs_heal_dir_half(struct bfs_xl *xl, int i, struct bfs_stack *st,
                       const struct bfs_dirent *have, const struct bfs_dirent *e)
{
    if (!have->has_attr || !e->has_attr || !S_ISDIR(have->attr.mode) ||
        !S_ISDIR(e->attr.mode) || !bfs_gfid_eq(&have->attr.gfid, &e->attr.gfid))
        return false;
    struct bfs_lookup_req req = {0};
    struct bfs_lookup_rep rep;
    req.loc.gfid = e->attr.gfid;
    int rc = bfs_sync_lookup(xl->children[i], st, &req, &rep);
    bfs_lookup_rep_clear_dup(&rep);
    return rc == -ENOENT || rc == -ESTALE;
}

int bfs_heal_name_complete(struct bfs_xl *xl, int i, struct bfs_stack *st,
                           const struct bfs_gfid *par, const struct bfs_dirent *e)
{
    struct bfs_iatt got;
    int rc = bfs_heal_name_lookup(xl, i, st, par, e->name, &e->attr.gfid, &got);
    if (rc >= 0 && !bfs_gfid_eq(&got.gfid, &e->attr.gfid))
        rc = -EIO; /* it took another GFID meanwhile: the next heal sees it */
    if (rc >= 0)
        XL_INFO(xl, "entry heal: %s on %s was half made (no GFID or no handle): completed",
                e->name, xl->children[i]->name);
    return rc;
}
