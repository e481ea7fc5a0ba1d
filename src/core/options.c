/*
 * options.c — translator option descriptors: value parsers and validation
 * (options.h).
 *
 * Validation messages are written for an operator who typed
 * `volume set` or edited a volfile: they quote the value and say what was
 * expected ("value 70000 is out of range 1..65535"). The caller prefixes
 * the translator, option and file position.
 *
 * Nothing here allocates or keeps state.
 */
#include "core/options.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *bfs_opt_type_name(enum bfs_opt_type t)
{
    switch (t) {
    case BFS_OPT_STR: return "string";
    case BFS_OPT_INT: return "integer";
    case BFS_OPT_SIZE: return "size";
    case BFS_OPT_BOOL: return "bool";
    case BFS_OPT_ENUM: return "enum";
    case BFS_OPT_PATH: return "path";
    case BFS_OPT_TIME: return "time";
    case BFS_OPT_PERCENT: return "percent";
    case BFS_OPT_ADDRLIST: return "address-list";
    }
    return "unknown";
}

const struct bfs_option_desc *bfs_option_find(const struct bfs_option_desc *table,
                                              const char *key)
{
    if (!table || !key)
        return NULL;
    for (; table->key; table++)
        if (strcmp(table->key, key) == 0)
            return table;
    return NULL;
}

/* ---- parsers ---- */

int bfs_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"on", "yes", "true", "enable", "1"};
    static const char *const no[] = {"off", "no", "false", "disable", "0"};
    if (!s)
        return -EINVAL;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            if (out)
                *out = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            if (out)
                *out = false;
            return 0;
        }
    }
    return -EINVAL;
}

/* Decimal integer, optional sign, nothing else (no spaces, no suffix). */
int bfs_parse_int(const char *s, int64_t *out)
{
    if (!s)
        return -EINVAL;
    const char *p = s;
    if (*p == '-' || *p == '+')
        p++;
    if (!isdigit((unsigned char)*p))
        return -EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || *end != '\0')
        return -EINVAL;
    if (out)
        *out = v;
    return 0;
}

/*
 * Bytes: digits, optional spaces, optional unit B K KB KiB M MB MiB G GB GiB
 * T TB TiB in any case. All units are 1024-based, as for GlusterFS options
 * ("64KB" = 65536): nobody sizes a cache in powers of ten.
 */
int bfs_parse_size(const char *s, uint64_t *out)
{
    static const struct {
        const char *unit;
        unsigned shift;
    } units[] = {
        {"", 0},    {"b", 0},    {"k", 10},  {"kb", 10}, {"kib", 10}, {"m", 20},
        {"mb", 20}, {"mib", 20}, {"g", 30},  {"gb", 30}, {"gib", 30}, {"t", 40},
        {"tb", 40}, {"tib", 40},
    };
    if (!s || !isdigit((unsigned char)*s))
        return -EINVAL;
    uint64_t v = 0;
    const char *p = s;
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -EINVAL;
        v = v * 10 + d;
    }
    while (*p == ' ' || *p == '\t')
        p++;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(p, units[i].unit) != 0)
            continue;
        if (units[i].shift && v > (UINT64_MAX >> units[i].shift))
            return -EINVAL;
        if (out)
            *out = v << units[i].shift;
        return 0;
    }
    return -EINVAL;
}

/* 0..100, decimals allowed, optional trailing '%'. */
static int parse_percent(const char *s, double *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -EINVAL;
    char *end;
    double v = strtod(s, &end);
    if (*end == '%')
        end++;
    if (*end != '\0' || !isfinite(v))
        return -EINVAL;
    *out = v;
    return 0;
}

/* ---- address lists ---- */

static int valid_addr(const char *a)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, a, buf) == 1 || inet_pton(AF_INET6, a, buf) == 1;
}

/* ADDR/PREFIX with the prefix within the family's width. */
static int valid_cidr(const char *e, const char *slash)
{
    char addr[INET6_ADDRSTRLEN + 1];
    unsigned char buf[sizeof(struct in6_addr)];
    size_t alen = (size_t)(slash - e);
    int64_t prefix;

    if (alen == 0 || alen >= sizeof(addr) || bfs_parse_int(slash + 1, &prefix) < 0 ||
        slash[1] == '-' || slash[1] == '+')
        return 0;
    memcpy(addr, e, alen);
    addr[alen] = '\0';
    if (inet_pton(AF_INET, addr, buf) == 1)
        return prefix >= 0 && prefix <= 32;
    if (inet_pton(AF_INET6, addr, buf) == 1)
        return prefix >= 0 && prefix <= 128;
    return 0;
}

/*
 * A glob matches addresses textually ('*' any run, '?' one character), as
 * auth.allow does in GlusterFS: "127.0.0.*", "192.168.*", "fe80::*", "*".
 * We accept only the characters an address can contain plus the wildcards,
 * so a typo such as "192.168.l.*" (letter l) is reported instead of
 * silently matching nothing.
 */
static int valid_glob(const char *e)
{
    for (const char *p = e; *p; p++)
        if (!isxdigit((unsigned char)*p) && !strchr(".:*?", *p))
            return 0;
    return 1;
}

static int valid_addr_entry(const char *e)
{
    const char *slash = strchr(e, '/');
    if (strchr(e, '*') || strchr(e, '?'))
        return !slash && valid_glob(e);
    if (slash)
        return valid_cidr(e, slash);
    return valid_addr(e);
}

/* ---- validation ---- */

__attribute__((format(printf, 3, 4))) static int fail(char *why, size_t whylen,
                                                      const char *fmt, ...)
{
    if (why && whylen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, whylen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static int check_addrlist(const char *value, char *why, size_t whylen)
{
    char entry[256];
    const char *p = value;

    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        while (n && isspace((unsigned char)*p)) {
            p++;
            n--;
        }
        while (n && isspace((unsigned char)p[n - 1]))
            n--;
        if (n == 0)
            return fail(why, whylen, "value '%s' has an empty entry in its address list",
                        value);
        if (n >= sizeof(entry))
            return fail(why, whylen, "address list entry '%.40s...' is too long", p);
        memcpy(entry, p, n);
        entry[n] = '\0';
        if (!valid_addr_entry(entry))
            return fail(why, whylen,
                        "'%s' is not an IP address, CIDR (ADDR/BITS) or glob such as "
                        "127.0.0.*",
                        entry);
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

static int has_range(const struct bfs_option_desc *d)
{
    return d->min != 0 || d->max != 0;
}

static int check_int(const struct bfs_option_desc *d, const char *value, const char *what,
                     char *why, size_t whylen)
{
    int64_t v;
    if (bfs_parse_int(value, &v) < 0)
        return fail(why, whylen, "value '%s' is not an integer%s", value, what);
    if (has_range(d) && (v < d->min || v > d->max))
        return fail(why, whylen, "value %lld is out of range %lld..%lld%s", (long long)v,
                    (long long)d->min, (long long)d->max, what);
    return 0;
}

static int check_size(const struct bfs_option_desc *d, const char *value, char *why,
                      size_t whylen)
{
    uint64_t v;
    if (bfs_parse_size(value, &v) < 0)
        return fail(why, whylen,
                    "value '%s' is not a size (a number with an optional unit "
                    "K, KB, M, MB, G, GB, T or TB)",
                    value);
    /* min/max are int64_t; a size above INT64_MAX is out of any range. */
    if (has_range(d) && (v > (uint64_t)INT64_MAX || (int64_t)v < d->min || (int64_t)v > d->max))
        return fail(why, whylen, "value %s (%llu bytes) is out of range %lld..%lld bytes",
                    value, (unsigned long long)v, (long long)d->min, (long long)d->max);
    return 0;
}

static int check_enum(const struct bfs_option_desc *d, const char *value, char *why,
                      size_t whylen)
{
    if (!d->values)
        return fail(why, whylen, "option declares no allowed values");
    for (const char *const *v = d->values; *v; v++)
        if (strcmp(*v, value) == 0)
            return 0;
    if (why && whylen) {
        size_t o = (size_t)snprintf(why, whylen, "must be one of: ");
        for (const char *const *v = d->values; *v && o < whylen; v++)
            o += (size_t)snprintf(why + o, whylen - o, "%s%s", v == d->values ? "" : ", ", *v);
    }
    return -EINVAL;
}

int bfs_option_validate(const struct bfs_option_desc *d, const char *value, char *why,
                        size_t whylen)
{
    bool b;
    double pct;

    if (why && whylen)
        why[0] = '\0';
    if (!d)
        return fail(why, whylen, "unknown option");
    if (!value)
        return fail(why, whylen, "no value given");

    switch (d->type) {
    case BFS_OPT_STR:
        return 0;
    case BFS_OPT_INT:
        return check_int(d, value, "", why, whylen);
    case BFS_OPT_TIME:
        return check_int(d, value, " (seconds)", why, whylen);
    case BFS_OPT_SIZE:
        return check_size(d, value, why, whylen);
    case BFS_OPT_BOOL:
        if (bfs_parse_bool(value, &b) < 0)
            return fail(why, whylen,
                        "value '%s' is not a boolean (on/off, yes/no, true/false, "
                        "enable/disable, 1/0)",
                        value);
        return 0;
    case BFS_OPT_ENUM:
        return check_enum(d, value, why, whylen);
    case BFS_OPT_PATH:
        if (value[0] != '/')
            return fail(why, whylen, "value '%s' is not an absolute path", value);
        if (strlen(value) >= PATH_MAX)
            return fail(why, whylen, "path is longer than %d bytes", PATH_MAX - 1);
        return 0;
    case BFS_OPT_PERCENT:
        if (parse_percent(value, &pct) < 0)
            return fail(why, whylen, "value '%s' is not a percentage", value);
        if (pct < 0 || pct > 100)
            return fail(why, whylen, "value %s is out of range 0..100%%", value);
        return 0;
    case BFS_OPT_ADDRLIST:
        return check_addrlist(value, why, whylen);
    }
    return fail(why, whylen, "option has an unknown type %d", (int)d->type);
}
