/*
 * heal-status.c — the self-heal daemon's status reply (heal-status.h).
 */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include "cluster.h"
#include "heal-status.h"

static const char *const type_names[BFS_TXN_NTYPES] = {"data", "metadata", "entry"};

/* "a,b" from the child names of mask. */
static void names_of(const struct bfs_xl *xl, uint32_t mask, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < xl->nchildren && o < len; i++)
        if (bfs_mask_has(mask, i))
            o += (size_t)snprintf(out + o, len - o, "%s%s", o ? "," : "", xl->children[i]->name);
}

static void types_of(uint32_t mask, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (int t = 0; t < BFS_TXN_NTYPES && o < len; t++)
        if (mask & BFS_BIT(t))
            o += (size_t)snprintf(out + o, len - o, "%s%s", o ? "," : "", type_names[t]);
}

const char *bfs_heal_ftype(const struct bfs_heal_status *hs)
{
    if (!hs->found)
        return "none";
    uint32_t m = hs->mode & S_IFMT;
    return m == S_IFREG ? "regular" : m == S_IFDIR ? "directory" : m == S_IFLNK ? "symlink"
                                                                               : "other";
}

struct bfs_dict *bfs_heal_status_dict(const struct bfs_xl *xl, const struct bfs_heal_status *hs)
{
    struct bfs_dict *d = bfs_dict_new();
    char pend[64], split[64], missing[1024], down[1024], line[4096], buf[1024], key[64];
    types_of(hs->pending, pend, sizeof(pend));
    types_of(hs->split, split, sizeof(split));
    names_of(xl, hs->missing, missing, sizeof(missing));
    names_of(xl, hs->down, down, sizeof(down));
    int rc = d ? 0 : -ENOMEM;
    size_t o = (size_t)snprintf(line, sizeof(line), "type=%s pending=%s split-brain=%s",
                                bfs_heal_ftype(hs), *pend ? pend : "-", *split ? split : "-");
    for (int t = 0; t < BFS_TXN_NTYPES && rc == 0; t++) {
        if (!(hs->types & BFS_BIT(t)))
            continue;
        for (int side = 0; side < 2 && rc == 0; side++) {
            names_of(xl, side ? hs->sinks[t] : hs->sources[t], buf, sizeof(buf));
            snprintf(key, sizeof(key), BFS_HEAL_VKEY_PREFIX "%s.%s", side ? "sinks" : "sources",
                     type_names[t]);
            rc = bfs_dict_set_str(d, key, buf);
            if (o < sizeof(line))
                o += (size_t)snprintf(line + o, sizeof(line) - o, side ? ",sinks=%s" : " %s:",
                                      side ? (*buf ? buf : "-") : type_names[t]);
            if (!side && o < sizeof(line))
                o += (size_t)snprintf(line + o, sizeof(line) - o, "sources=%s", *buf ? buf : "-");
        }
    }
    if (o < sizeof(line))
        snprintf(line + o, sizeof(line) - o, " missing=%s down=%s", *missing ? missing : "-",
                 *down ? down : "-");
    const char *keys[] = {"status", "pending", "split-brain", "missing", "down", "file-type"};
    const char *vals[] = {line, pend, split, missing, down, bfs_heal_ftype(hs)};
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]) && rc == 0; k++) {
        snprintf(key, sizeof(key), BFS_HEAL_VKEY_PREFIX "%s", keys[k]);
        rc = bfs_dict_set_str(d, key, vals[k]);
    }
    if (rc < 0) {
        bfs_dict_unref(d);
        return NULL;
    }
    return d;
}
