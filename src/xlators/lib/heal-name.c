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

int bfs_heal_name_complete(struct bfs_xl *xl, int i, struct bfs_stack *st,
                           const struct bfs_gfid *par, const struct bfs_dirent *e)
{
    struct bfs_lookup_req req = {.xdata = bfs_dict_new()};
    struct bfs_lookup_rep rep;
    req.loc.pargfid = *par;
    req.loc.name = e->name;
    int rc = req.xdata ? bfs_dict_set_bin(req.xdata, GFID_REQ, e->attr.gfid.b,
                                          sizeof(e->attr.gfid.b)) : -ENOMEM;
    if (rc >= 0) {
        rc = bfs_sync_lookup(xl->children[i], st, &req, &rep);
        if (rc >= 0 && !bfs_gfid_eq(&rep.attr.gfid, &e->attr.gfid))
            rc = -EIO; /* it took another GFID meanwhile: the next heal sees it */
        bfs_lookup_rep_clear_dup(&rep);
    }
    bfs_dict_unref(req.xdata);
    if (rc >= 0)
        XL_INFO(xl, "entry heal: %s on %s was half made (no GFID or no handle): completed",
                e->name, xl->children[i]->name);
    return rc < 0 ? rc : 0;
}
