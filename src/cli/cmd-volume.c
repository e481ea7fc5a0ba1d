/*
 * cmd-volume.c — `brickfs volume ...`: argument parsing for each volume
 * command, the REST call it makes, and what it prints (output.c for the
 * longer listings). Syntax follows the gluster CLI.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cli/cli.h"

struct vcmd {
    const char *name;
    int (*fn)(const struct cli *c, const char *what, int argc, char **argv);
    const char *usage;
    const char *help;
};

/* Names go into URLs: refuse what brickfsd would refuse anyway, here, so
 * the message is the same and a '/' cannot change the route. */
static int name_check(const char *what, const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 64)
        return cli_fail(-1, what, "volume name '%s' must have 1 to 64 characters", name);
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", name[i]))
            return cli_fail(-1, what, "volume name '%s' has a character other than letters, "
                            "digits, '_' and '-'", name);
    return 0;
}

static int key_check(const char *what, const char *key)
{
    for (const char *p = key; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.", *p))
            return cli_fail(-1, what, "unknown option '%s' ('brickfs volume set help' lists "
                            "the options a volume can set)", key);
    return 0;
}

static bool confirm(const struct cli *c, const char *question)
{
    if (c->yes || !isatty(0))
        return true;
    fprintf(stderr, "%s Continue? (y/n) ", question);
    char line[16];
    if (!fgets(line, sizeof(line), stdin))
        return false;
    return line[0] == 'y' || line[0] == 'Y';
}

static int positive(const char *what, const char *word, const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || *end || v < 1 || v > 1000)
        return cli_fail(-1, what, "'%s' needs a positive number, not '%s'", word, s ? s : "");
    *out = (int)v;
    return 0;
}

static int do_create(const struct cli *c, const char *what, int argc, char **argv)
{
    if (argc < 1)
        return cli_fail(CLI_USAGE, what, "a volume name is required");
    struct json_object *b = json_object_new_object(), *bricks = json_object_new_array();
    json_object_object_add(b, "name", json_object_new_string(argv[0]));
    static const char *const counts[] = {"replica", "arbiter", "disperse", "redundancy",
                                         "disperse-data"};
    for (int i = 1; i < argc; i++) {
        bool counted = false;
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]) && !counted; k++) {
            if (strcmp(argv[i], counts[k]) != 0)
                continue;
            int n = 0;
            if (positive(what, argv[i], i + 1 < argc ? argv[i + 1] : NULL, &n) < 0) {
                json_object_put(b);
                json_object_put(bricks);
                return CLI_USAGE;
            }
            json_object_object_add(b, counts[k], json_object_new_int(n));
            counted = true;
            i++;
        }
        if (counted)
            continue;
        if (strcmp(argv[i], "force") == 0 && i == argc - 1)
            json_object_object_add(b, "force", json_object_new_boolean(1));
        else if (strcmp(argv[i], "transport") == 0 && i + 1 < argc && !strcmp(argv[i + 1], "tcp"))
            i++; /* gluster's default, accepted for familiarity */
        else
            json_object_array_add(bricks, json_object_new_string(argv[i]));
    }
    if (json_object_array_length(bricks) == 0) {
        json_object_put(b);
        json_object_put(bricks);
        return cli_fail(CLI_USAGE, what, "at least one brick (HOST:/DIR) is required");
    }
    json_object_object_add(b, "bricks", bricks);
    struct cli_resp r;
    int rc = cli_call(c, what, "POST", "/v1/volumes", b, &r);
    if (rc == CLI_OK) {
        if (!c->json)
            printf("%s: %s: success: please start the volume to access data\n", what, argv[0]);
        cli_resp_free(&r);
    }
    return rc;
}

static int do_start(const struct cli *c, const char *what, int argc, char **argv)
{
    if (argc < 1 || argc > 2 || (argc == 2 && strcmp(argv[1], "force") != 0))
        return cli_fail(CLI_USAGE, what, "usage: volume start NAME [force]");
    char path[256];
    snprintf(path, sizeof(path), "/v1/volumes/%s/start", argv[0]);
    struct json_object *b = json_object_new_object();
    json_object_object_add(b, "force", json_object_new_boolean(argc == 2));
    return cli_call_simple(c, what, "POST", path, b, argv[0]);
}

static int do_stop(const struct cli *c, const char *what, int argc, char **argv)
{
    if (argc < 1 || argc > 2 || (argc == 2 && strcmp(argv[1], "force") != 0))
        return cli_fail(CLI_USAGE, what, "usage: volume stop NAME");
    char path[256], q[300];
    snprintf(q, sizeof(q), "Stopping volume %s makes its data unavailable to clients.", argv[0]);
    if (!confirm(c, q))
        return cli_fail(CLI_ERR, what, "cancelled");
    snprintf(path, sizeof(path), "/v1/volumes/%s/stop", argv[0]);
    return cli_call_simple(c, what, "POST", path, NULL, argv[0]);
}

static int do_delete(const struct cli *c, const char *what, int argc, char **argv)
{
    if (argc != 1)
        return cli_fail(CLI_USAGE, what, "usage: volume delete NAME");
    char path[256], q[300];
    snprintf(q, sizeof(q), "Deleting volume %s removes its definition (the data stays in the "
             "brick folders).", argv[0]);
    if (!confirm(c, q))
        return cli_fail(CLI_ERR, what, "cancelled");
    snprintf(path, sizeof(path), "/v1/volumes/%s", argv[0]);
    return cli_call_simple(c, what, "DELETE", path, NULL, argv[0]);
}

/* Every volume of an answer {"volumes": [...]}, printed by print, a blank
 * line between two. */
static void print_volumes(struct json_object *resp, void (*print)(struct json_object *))
{
    struct json_object *vols;
    if (!json_object_object_get_ex(resp, "volumes", &vols))
        return;
    size_t n = json_object_array_length(vols);
    if (n == 0)
        printf("No volumes present\n");
    for (size_t i = 0; i < n; i++) {
        if (i)
            printf("\n");
        print(json_object_array_get_idx(vols, i));
    }
}

/* `volume info|status [NAME]`: GET /v1/volumes/NAME + sub, or all (every
 * volume, printed one after the other). */
static int show(const struct cli *c, const char *what, int argc, char **argv, const char *sub,
                const char *all, void (*print)(struct json_object *))
{
    char path[256];
    struct cli_resp r;
    if (argc > 1)
        return cli_fail(CLI_USAGE, what, "usage: %s [NAME]", what);
    if (argc)
        snprintf(path, sizeof(path), "/v1/volumes/%s%s", argv[0], sub);
    else
        snprintf(path, sizeof(path), "%s", all);
    int rc = cli_call(c, what, "GET", path, NULL, &r);
    if (rc != CLI_OK)
        return rc;
    if (c->json) {
    } else if (argc) {
        print(r.json);
    } else {
        print_volumes(r.json, print);
    }
    cli_resp_free(&r);
    return rc;
}

static int do_info(const struct cli *c, const char *what, int argc, char **argv)
{
    return show(c, what, argc, argv, "", "/v1/volumes", cli_print_info);
}

static int do_list(const struct cli *c, const char *what, int argc, char **argv)
{
    struct cli_resp r;
    struct json_object *vols, *name;
    (void)argv;
    if (argc != 0)
        return cli_fail(CLI_USAGE, what, "usage: volume list");
    int rc = cli_call(c, what, "GET", "/v1/volumes", NULL, &r);
    if (rc != CLI_OK)
        return rc;
    if (!c->json && json_object_object_get_ex(r.json, "volumes", &vols)) {
        size_t n = json_object_array_length(vols);
        if (n == 0)
            printf("No volumes present\n");
        for (size_t i = 0; i < n; i++)
            if (json_object_object_get_ex(json_object_array_get_idx(vols, i), "name", &name))
                printf("%s\n", json_object_get_string(name));
    }
    cli_resp_free(&r);
    return rc;
}

static int do_status(const struct cli *c, const char *what, int argc, char **argv)
{
    return show(c, what, argc, argv, "/status", "/v1/status", cli_print_status);
}

static int do_set(const struct cli *c, const char *what, int argc, char **argv)
{
    struct cli_resp r;
    if (argc == 1 && strcmp(argv[0], "help") == 0) {
        int rc = cli_call(c, what, "GET", "/v1/options", NULL, &r);
        if (rc == CLI_OK && !c->json)
            cli_print_options_help(r.json);
        if (rc == CLI_OK)
            cli_resp_free(&r);
        return rc;
    }
    if (argc != 3)
        return cli_fail(CLI_USAGE, what, "usage: volume set NAME KEY VALUE (or: volume set "
                        "help)");
    char path[256];
    snprintf(path, sizeof(path), "/v1/volumes/%s/options", argv[0]);
    struct json_object *b = json_object_new_object(), *o = json_object_new_object(), *rn;
    json_object_object_add(o, argv[1], json_object_new_string(argv[2]));
    json_object_object_add(b, "options", o);
    int rc = cli_call(c, what, "POST", path, b, &r);
    if (rc != CLI_OK)
        return rc;
    if (!c->json) {
        printf("%s: success\n", what);
        if (json_object_object_get_ex(r.json, "restart_needed", &rn) &&
            json_object_get_boolean(rn))
            printf("note: %s is a brick option; running bricks get it when they restart "
                   "(volume stop, then start)\n", argv[1]);
    }
    cli_resp_free(&r);
    return rc;
}

static int do_get(const struct cli *c, const char *what, int argc, char **argv)
{
    struct cli_resp r;
    if (argc != 2)
        return cli_fail(CLI_USAGE, what, "usage: volume get NAME KEY|all");
    char path[300];
    snprintf(path, sizeof(path), "/v1/volumes/%s/options%s%s", argv[0],
             strcmp(argv[1], "all") ? "/" : "", strcmp(argv[1], "all") ? argv[1] : "");
    int rc = cli_call(c, what, "GET", path, NULL, &r);
    if (rc == CLI_OK && !c->json)
        cli_print_get(r.json);
    if (rc == CLI_OK)
        cli_resp_free(&r);
    return rc;
}

static int do_reset(const struct cli *c, const char *what, int argc, char **argv)
{
    if (argc < 1 || argc > 2)
        return cli_fail(CLI_USAGE, what, "usage: volume reset NAME [KEY]");
    char path[300];
    snprintf(path, sizeof(path), "/v1/volumes/%s/options%s%s", argv[0], argc == 2 ? "/" : "",
             argc == 2 ? argv[1] : "");
    struct cli_resp r;
    int rc = cli_call(c, what, "DELETE", path, NULL, &r);
    if (rc == CLI_OK) {
        if (!c->json)
            printf("%s: success\n", what);
        cli_resp_free(&r);
    }
    return rc;
}

static const struct vcmd cmds[] = {
    {"create", do_create,
     "volume create NAME [replica N [arbiter 1]] [disperse N | disperse-data D] [redundancy R] "
     "HOST:/DIR... [force]",
     "Defines a volume over brick folders (created if missing). Without counts the files\n"
     "are distributed over the bricks. 'replica 2|3' groups consecutive bricks into replica\n"
     "sets (the brick count a multiple of it; more than one set is distributed-replicate);\n"
     "'arbiter 1' (replica 3 only) makes the last brick of each set an arbiter, which keeps\n"
     "names and metadata but no file data. 'disperse N redundancy R' groups consecutive\n"
     "bricks into disperse sets of N that each survive the loss of any R bricks, storing\n"
     "N/(N-R) times the data (erasure code; 1 <= R, 2R < N, N <= 32; the brick count a\n"
     "multiple of N; more than one set is distributed-disperse); 'disperse-data D\n"
     "redundancy R' is the same with N = D + R.\n"
     "'force' allows bricks on the root file system."},
    {"start", do_start, "volume start NAME [force]",
     "Starts the bricks of a volume. 'force' starts the bricks that are down of a started\n"
     "volume."},
    {"stop", do_stop, "volume stop NAME",
     "Stops the bricks of a volume (asks first on a terminal; --yes does not ask)."},
    {"delete", do_delete, "volume delete NAME",
     "Deletes a stopped volume's definition; the files stay in the brick folders (asks\n"
     "first on a terminal; --yes does not ask)."},
    {"info", do_info, "volume info [NAME]", "Shows the definition of one or every volume."},
    {"list", do_list, "volume list", "Lists the volumes by name."},
    {"status", do_status, "volume status [NAME]",
     "Shows each brick's host, path, port, pid and whether it is online."},
    {"set", do_set, "volume set NAME KEY VALUE | volume set help",
     "Sets a volume option, checked against the translators' option descriptors.\n"
     "'volume set help' lists every option with its type, default and description."},
    {"get", do_get, "volume get NAME KEY|all", "Shows an option's value (set or default)."},
    {"heal", cli_volume_heal, CLI_HEAL_USAGE, CLI_HEAL_HELP},
    {"reset", do_reset, "volume reset NAME [KEY]",
     "Returns one option, or every option, to its default."},
    {"add-brick", cli_add_brick, "volume add-brick NAME [replica N] HOST:/DIR... [force]",
     "Adds bricks (whole replica sets of a replicated volume) to a volume. New files go to\n"
     "them after 'volume rebalance NAME fix-layout start' or 'volume rebalance NAME start'\n"
     "(which also moves the files whose place changed). The layout is weighted by brick size."},
    {"remove-brick", cli_remove_brick,
     "volume remove-brick NAME HOST:/DIR... start|status|stop|commit",
     "Takes bricks (whole replica sets) out of a volume: 'start' stops placing new files on\n"
     "them and drains their files to the others, 'status' shows the drain and the files\n"
     "left, 'stop' abandons it, 'commit' (refused while files remain) removes the bricks."},
    {"replace-brick", cli_replace_brick, "volume replace-brick NAME OLD NEW commit force",
     "Replaces a brick of a replicated volume by an empty one, which is then healed from\n"
     "the rest of its replica set."},
    {"rebalance", cli_rebalance,
     "volume rebalance NAME fix-layout start | start|stop|pause|resume|status",
     "'fix-layout start' gives new bricks their share of the layout (new files go there);\n"
     "'start' also moves the files whose place changed, by a rebalance process per node;\n"
     "'stop'/'pause' end it with a checkpoint, 'resume' continues from there; 'status'\n"
     "shows files scanned, moved, skipped and failed, bytes, rate and time left.\n"
     "Throttle: volume set NAME cluster.rebal-throttle lazy|normal|aggressive|MB/s."},
};
#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

static void volume_usage(FILE *f)
{
    fprintf(f, "usage: brickfs [--server HOST[:PORT]] [--json] [--yes] volume COMMAND ...\n\n");
    for (size_t i = 0; i < NCMDS; i++)
        fprintf(f, "  %s\n", cmds[i].usage);
}

int cli_volume(const struct cli *c, int argc, char **argv)
{
    bool help = argc > 0 && strcmp(argv[argc - 1], "--help") == 0;
    if (help)
        argc--;
    if (argc < 2) {
        volume_usage(help ? stdout : stderr);
        return help ? CLI_OK : CLI_USAGE;
    }
    for (size_t i = 0; i < NCMDS; i++) {
        if (strcmp(argv[1], cmds[i].name) != 0)
            continue;
        if (help) {
            printf("usage: brickfs %s\n\n%s\n", cmds[i].usage, cmds[i].help);
            return CLI_OK;
        }
        char what[64];
        snprintf(what, sizeof(what), "volume %s", cmds[i].name);
        /* every command but create and 'set help' has the name in its URL */
        bool url_name = argc > 2 && strcmp(cmds[i].name, "create") != 0 &&
                        !(strcmp(cmds[i].name, "set") == 0 && strcmp(argv[2], "help") == 0);
        if (url_name && name_check(what, argv[2]) < 0)
            return CLI_ERR;
        bool url_key = argc > 3 && (strcmp(cmds[i].name, "get") == 0 ||
                                    strcmp(cmds[i].name, "reset") == 0);
        if (url_key && key_check(what, argv[3]) < 0)
            return CLI_ERR;
        return cmds[i].fn(c, what, argc - 2, argv + 2);
    }
    return cli_fail(CLI_USAGE, "volume", "unknown command '%s' (brickfs volume --help)",
                    argv[1]);
}
