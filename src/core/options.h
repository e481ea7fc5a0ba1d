/*
 * options.h — translator option descriptors and validation.
 *
 * Each translator declares its options once (bfs_option_desc[], ended by an
 * entry with key NULL). That table is the single source for volfile
 * validation, defaults, `volume set` and the option reference in docs/.
 */
#ifndef BFS_CORE_OPTIONS_H
#define BFS_CORE_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bfs_dict;

enum bfs_opt_type {
    BFS_OPT_STR = 1,  /* any string */
    BFS_OPT_INT,      /* integer within [min, max] */
    BFS_OPT_SIZE,     /* bytes with optional suffix KB MB GB TB (1024-based) */
    BFS_OPT_BOOL,     /* on/off, yes/no, true/false, enable/disable, 1/0 */
    BFS_OPT_ENUM,     /* one of values[] */
    BFS_OPT_PATH,     /* absolute path */
    BFS_OPT_TIME,     /* seconds, integer within [min, max] */
    BFS_OPT_PERCENT,  /* 0..100 with optional % */
    BFS_OPT_ADDRLIST, /* comma-separated IPv4/IPv6 addresses, CIDRs or '*' globs */
};

enum {
    BFS_OPT_F_CLIENT = 1u << 0,   /* belongs to a client-side translator */
    BFS_OPT_F_SETTABLE = 1u << 1, /* changeable by `volume set` */
    BFS_OPT_F_RECONF = 1u << 2,   /* applied live through reconfigure() */
};

struct bfs_option_desc {
    const char *key;
    enum bfs_opt_type type;
    const char *def;             /* default as text, NULL = no default */
    int64_t min, max;            /* INT, SIZE, TIME (ignored if min == max == 0) */
    const char *const *values;   /* ENUM: NULL-terminated */
    const char *description;     /* one line */
    unsigned flags;
};

const char *bfs_opt_type_name(enum bfs_opt_type t);

/* Validates one value against its descriptor. On error returns -EINVAL and
 * writes a human-readable reason into why[whylen]. */
int bfs_option_validate(const struct bfs_option_desc *d, const char *value, char *why,
                        size_t whylen);
const struct bfs_option_desc *bfs_option_find(const struct bfs_option_desc *table,
                                              const char *key);

/* Parsers shared by validation and the typed getters. 0 or -EINVAL. */
int bfs_parse_bool(const char *s, bool *out);
int bfs_parse_size(const char *s, uint64_t *out);
int bfs_parse_int(const char *s, int64_t *out);

#endif
