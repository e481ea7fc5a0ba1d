/*
 * cli.h — what the parts of the brickfs command line share: the global
 * options, one HTTP exchange with brickfsd, and the printers.
 */
#ifndef BFS_CLI_CLI_H
#define BFS_CLI_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;

#define CLI_DEFAULT_PORT 24100

struct cli {
    char server[300];  /* HOST:PORT */
    bool json, yes;
};

struct cli_resp {
    long status;               /* HTTP status */
    char *body;                /* as received, NUL-terminated */
    struct json_object *json;  /* parsed body, NULL if not JSON */
};

/* Exit statuses */
enum { CLI_OK = 0, CLI_ERR = 1, CLI_USAGE = 2 };

/* One request; body may be NULL. 0 when brickfsd answered (any status),
 * -1 after printing why it could not be reached. */
int cli_http(const struct cli *c, const char *method, const char *path,
             struct json_object *body, struct cli_resp *r);
void cli_resp_free(struct cli_resp *r);
/* The error message of a failed answer (from {"error": ...} or the status). */
const char *cli_resp_error(const struct cli_resp *r, char *buf, size_t len);

/* Prints "brickfs: WHAT: message" to stderr and returns code. */
int cli_fail(int code, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

int cli_volume(const struct cli *c, int argc, char **argv);
/* cmd-peer.c: argv[0] is "peer" / "pool" */
int cli_peer(const struct cli *c, int argc, char **argv);
int cli_pool(const struct cli *c, int argc, char **argv);

/* http-client.c: one call; prints the JSON with --json and the error line
 * on failure. CLI_OK with r filled (free it), or CLI_ERR. Takes body. */
int cli_call(const struct cli *c, const char *what, const char *method, const char *path,
             struct json_object *body, struct cli_resp *r);
/* A call whose success prints "WHAT: NAME: success" (nothing else to show). */
int cli_call_simple(const struct cli *c, const char *what, const char *method, const char *path,
                    struct json_object *body, const char *name);

/* output.c: fields of an answer; j may be NULL. */
const char *cli_jstr(struct json_object *j, const char *key);   /* NULL if absent or null */
const char *cli_jtext(struct json_object *j, const char *key);  /* "" if absent or null */
int64_t cli_jint(struct json_object *j, const char *key);       /* 0 if absent */
double cli_jdbl(struct json_object *j, const char *key);        /* 0 if absent */
struct json_object *cli_jarr(struct json_object *j, const char *key); /* NULL unless an array */

/* cmd-heal.c: `volume heal NAME ...` (argv from NAME on) */
int cli_volume_heal(const struct cli *c, const char *what, int argc, char **argv);
#define CLI_HEAL_USAGE                                                                        \
    "volume heal NAME [info [summary|split-brain] | statistics | progress |\n"                \
    "         split-brain {bigger-file FILE | latest-mtime FILE | source-brick HOST:/DIR "       \
    "[FILE]}]"
#define CLI_HEAL_HELP                                                                         \
    "Self-heal of a replicated, started volume. Alone: the self-heal daemon crawls the\n"     \
    "bricks' indexes of pending entries now. 'info' lists the entries that need a heal,\n"    \
    "per brick with counts; 'info summary' only the counts; 'info split-brain' the\n"        \
    "entries in split-brain. 'statistics' (or 'progress') shows the daemon's figures:\n"     \
    "entries healed, failed, remaining, rates. 'split-brain POLICY' resolves a split-brain\n" \
    "by choosing the source copy of FILE (a path from the volume's root, or gfid:UUID):\n"   \
    "the bigger file, the latest modification time, or the copy on brick HOST:/DIR;\n"       \
    "source-brick without FILE resolves every file in split-brain of that brick's\n"         \
    "replica set from it."

/* cmd-elastic.c: argv[0] is the volume name */
int cli_add_brick(const struct cli *c, const char *what, int argc, char **argv);
int cli_remove_brick(const struct cli *c, const char *what, int argc, char **argv);
int cli_replace_brick(const struct cli *c, const char *what, int argc, char **argv);
int cli_rebalance(const struct cli *c, const char *what, int argc, char **argv);

/* output.c */
void cli_print_info(struct json_object *vol);
void cli_print_status(struct json_object *st);
void cli_print_options_help(struct json_object *resp);
void cli_print_get(struct json_object *resp);

#endif
