/*
 * eg-conf.c — debug/error-gen's options turned into a struct eg_conf:
 * errno names or numbers ("EIO", "ENOTCONN", "5"), the comma-separated list
 * of fop names that `enable` selects ("all" or empty for every fop), and the
 * errors plausible per kind of fop for `random-failure`.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error-gen.h"

struct lookup {
    struct bfs_xl *xl;
    const struct bfs_dict *over, *base;
};

/* The value of key: changed, else in force, else volfile or default. */
static const char *opt(const struct lookup *l, const char *key)
{
    const char *v;
    if (l->over && bfs_dict_get_str(l->over, key, &v) == 0)
        return v;
    if (l->base && bfs_dict_get_str(l->base, key, &v) == 0)
        return v;
    return bfs_xl_opt_str(l->xl, key);
}

static int parse_errno(const char *s, int *out)
{
    int64_t n;
    if (!s || !*s)
        return -EINVAL;
    if (bfs_parse_int(s, &n) == 0) {
        if (n <= 0 || n > 4095)
            return -EINVAL;
        *out = (int)n;
        return 0;
    }
    for (int e = 1; e < 256; e++) {
        const char *name = strerrorname_np(e);
        if (name && strcasecmp(name, s) == 0) {
            *out = e;
            return 0;
        }
    }
    return -EINVAL;
}

static int parse_fops(struct bfs_xl *xl, const char *list, bool enabled[BFS_FOP_COUNT])
{
    bool all = !list || !*list || strcmp(list, "all") == 0;
    for (int i = 0; i < BFS_FOP_COUNT; i++)
        enabled[i] = all;
    if (all)
        return 0;
    char *copy = strdup(list), *save = NULL;
    if (!copy)
        return -ENOMEM;
    int rc = 0;
    for (char *tok = strtok_r(copy, ", ", &save); tok && rc == 0;
         tok = strtok_r(NULL, ", ", &save)) {
        int i = 0;
        while (i < BFS_FOP_COUNT && strcmp(bfs_fop_name(i), tok) != 0)
            i++;
        if (i == BFS_FOP_COUNT) {
            XL_ERR(xl, "option enable: unknown fop '%s'", tok);
            rc = -EINVAL;
        } else {
            enabled[i] = true;
        }
    }
    free(copy);
    return rc;
}

static int parse_u64(const char *s, uint64_t *out)
{
    int64_t v;
    if (!s)
        return -EINVAL;
    char buf[32];
    size_t n = strlen(s);
    if (n && n < sizeof(buf) && s[n - 1] == '%') { /* percent values may end in % */
        memcpy(buf, s, n - 1);
        buf[n - 1] = 0;
        s = buf;
    }
    if (bfs_parse_int(s, &v) < 0 || v < 0)
        return -EINVAL;
    *out = (uint64_t)v;
    return 0;
}

int bfs__eg_conf_parse(struct bfs_xl *xl, const struct bfs_dict *over,
                       const struct bfs_dict *base, struct eg_conf *out)
{
    const struct lookup l = {xl, over, base};
    const struct lookup *opts = &l;
    struct eg_conf c = {0};
    uint64_t failure, delay, delay_pct;
    const char *errno_s = opt(opts, "error-no");
    bool b;

    if (parse_u64(opt(opts, "failure"), &failure) < 0 || failure > 100) {
        XL_ERR(xl, "option failure: want a percentage");
        return -EINVAL;
    }
    if (parse_errno(errno_s, &c.error_no) < 0) {
        XL_ERR(xl, "option error-no: '%s' is neither an errno name nor a number",
               errno_s ? errno_s : "");
        return -EINVAL;
    }
    if (parse_u64(opt(opts, "delay-ms"), &delay) < 0 ||
        parse_u64(opt(opts, "delay-percent"), &delay_pct) < 0 || delay_pct > 100) {
        XL_ERR(xl, "option delay-ms / delay-percent: bad value");
        return -EINVAL;
    }
    int rc = parse_fops(xl, opt(opts, "enable"), c.enabled);
    if (rc < 0)
        return rc;
    c.failure_pct = (uint32_t)failure;
    c.delay_ms = delay;
    c.delay_pct = (uint32_t)delay_pct;
    c.random_errno = bfs_parse_bool(opt(opts, "random-failure"), &b) == 0 && b;
    c.fail_on_wind = bfs_parse_bool(opt(opts, "fail-on-wind"), &b) == 0 && b;
    *out = c;
    return 0;
}

int bfs__eg_random_errno(int fop, uint64_t r)
{
    static const int reads[] = {EIO, ENOTCONN, ESTALE, ENOENT, EACCES};
    static const int changes[] = {EIO, ENOTCONN, ESTALE, ENOSPC, EDQUOT, EROFS, EACCES};
    static const int locks[] = {EAGAIN, ENOTCONN, EIO};
    switch (fop) {
    case BFS_FOP_LOOKUP: case BFS_FOP_STAT: case BFS_FOP_FSTAT: case BFS_FOP_ACCESS:
    case BFS_FOP_READLINK: case BFS_FOP_READ: case BFS_FOP_OPENDIR: case BFS_FOP_READDIR:
    case BFS_FOP_STATFS: case BFS_FOP_GETXATTR: case BFS_FOP_FGETXATTR: case BFS_FOP_SEEK:
        return reads[r % (sizeof(reads) / sizeof(reads[0]))];
    case BFS_FOP_LK: case BFS_FOP_INODELK: case BFS_FOP_FINODELK: case BFS_FOP_ENTRYLK:
    case BFS_FOP_FENTRYLK: case BFS_FOP_LEASE:
        return locks[r % (sizeof(locks) / sizeof(locks[0]))];
    }
    return changes[r % (sizeof(changes) / sizeof(changes[0]))];
}
