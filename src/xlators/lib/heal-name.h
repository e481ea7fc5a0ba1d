/*
 * heal-name.h — a name a brick kept half made, for the entry heals of the
 * cluster translators (replicate-heal-entry.c, disperse-heal.c). A brick
 * killed in the middle of a create or mkdir keeps the name with no GFID (killed
 * between the open and setting the GFID: its readdirplus gives the name
 * no attributes) or with the GFID but not its handle (killed before the
 * handle's link: a regular file whose link count, the handle hidden,
 * reads 0; a folder: only a lookup by GFID tells). The file's own heals work by GFID and fail on that brick,
 * and only a lookup of the name completes it, which no client may ever
 * send (the self-heal daemon heals with no mount): the entry heal of the
 * parent recognises such a name (bfs_heal_name_half) and completes it
 * (bfs_heal_name_complete). Nothing here outlives a call.
 */
#ifndef BFS_XL_LIB_HEAL_NAME_H
#define BFS_XL_LIB_HEAL_NAME_H

#include <stdbool.h>
#include <stdint.h>

#include "core/xlator.h"

/* The type (S_IFMT bits) of a listed entry: from its attributes, else
 * from its d_type; 0 when unknown. */
uint32_t bfs_heal_dirent_type(const struct bfs_dirent *e);

/* Is `have`, a sink's listing entry for the name of source entry e (with
 * attributes), that name half made: of e's type, and with no attributes,
 * or a regular file of e's GFID with link count 0? */
bool bfs_heal_name_half(const struct bfs_dirent *have, const struct bfs_dirent *e);

/* Looks (par, name) up on child i of xl BY NAME, the one way to reach a
 * half-made name: storage/posix gives a name with no GFID one (*want when
 * not NULL, else a new one) and repairs a missing handle. Blocking, on
 * stack st. Out: its attributes. 0 or -errno (-ENOENT: no such name). */
int bfs_heal_name_lookup(struct bfs_xl *xl, int i, struct bfs_stack *st, const struct bfs_gfid *par,
                         const char *name, const struct bfs_gfid *want, struct bfs_iatt *out);

/* Is `have`, a sink's listing entry for the name of directory entry e,
 * a folder of e's GFID that child i cannot reach by that GFID (a mkdir
 * killed before the handle's link: the listing cannot tell)? One lookup
 * by GFID on child i, only for a folder of e's GFID. */
bool bfs_heal_dir_half(struct bfs_xl *xl, int i, struct bfs_stack *st,
                       const struct bfs_dirent *have, const struct bfs_dirent *e);

/* Completes the half-made name (par, e->name) on child i of xl: a named
 * lookup there with e's GFID as gfid-req (storage/posix adopts the name
 * with it, or repairs the handle). Blocking, on stack st (the heal
 * thread's). 0; -EIO when the name has another GFID (the next heal sees
 * it); or -errno. */
int bfs_heal_name_complete(struct bfs_xl *xl, int i, struct bfs_stack *st,
                           const struct bfs_gfid *par, const struct bfs_dirent *e);

#endif
