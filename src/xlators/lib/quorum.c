/*
 * quorum.c — client quorum rules (see quorum.h). No state.
 */
#include <errno.h>
#include <string.h>

#include "quorum.h"

int bfs_quorum_parse(const char *s, enum bfs_quorum_type *out)
{
    if (!s)
        return -EINVAL;
    if (strcmp(s, "none") == 0)
        *out = BFS_QUORUM_NONE;
    else if (strcmp(s, "auto") == 0)
        *out = BFS_QUORUM_AUTO;
    else if (strcmp(s, "fixed") == 0)
        *out = BFS_QUORUM_FIXED;
    else
        return -EINVAL;
    return 0;
}

const char *bfs_quorum_name(enum bfs_quorum_type t)
{
    switch (t) {
    case BFS_QUORUM_NONE: return "none";
    case BFS_QUORUM_AUTO: return "auto";
    case BFS_QUORUM_FIXED: return "fixed";
    }
    return "?";
}

bool bfs_quorum_met(int type, int count, int n, uint32_t mask)
{
    if (n <= 0 || n > 32)
        return false;
    if (n < 32)
        mask &= (1u << n) - 1;
    int up = __builtin_popcount(mask);
    if (up == 0)
        return false;
    switch (type) {
    case BFS_QUORUM_NONE:
        return true;
    case BFS_QUORUM_FIXED:
        if (count < 1)
            count = 1;
        return up >= (count < n ? count : n);
    case BFS_QUORUM_AUTO:
        if (2 * up > n)
            return true;
        return 2 * up == n && (mask & 1u);
    }
    return false;
}
