/*
 * cmd-elastic.c — `brickfs volume add-brick | remove-brick | replace-brick |
 * rebalance` (docs/design/rebalance.md): argument parsing, the REST call,
 * and the printed status. Syntax follows the gluster CLI.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cli/cli.h"

static void path_of(char *buf, size_t len, const char *vol, const char *sub)
{
    snprintf(buf, len, "/v1/volumes/%s/%s", vol, sub);
}

/* The rebalance status as a table, one line per node. */
static void print_rebal(struct json_object *st)
{
    struct json_object *nodes, *leaving;
    printf("volume %s: rebalance %s (%s), layout version %lld%s\n", cli_jtext(st, "volume"),
           cli_jtext(st, "state"), cli_jtext(st, "kind")[0] ? cli_jtext(st, "kind") : "none",
           (long long)cli_jint(st, "layout_version"),
           json_object_object_get_ex(st, "layout_pending", &nodes) &&
                   json_object_get_boolean(nodes)
               ? ", previous layout still consulted"
               : "");
    printf("%-38s %-12s %9s %9s %9s %7s %12s %9s %8s %8s\n", "node", "state", "scanned",
           "moved", "skipped", "failed", "bytes", "files/s", "MB/s", "eta");
    if (json_object_object_get_ex(st, "nodes", &nodes))
        for (size_t i = 0; i < json_object_array_length(nodes); i++) {
            struct json_object *n = json_object_array_get_idx(nodes, i);
            char eta[32];
            int64_t e = cli_jint(n, "eta_s");
            if (e < 0 || (e == 0 && strcmp(cli_jtext(n, "state"), "in-progress") == 0))
                snprintf(eta, sizeof(eta), "-");
            else
                snprintf(eta, sizeof(eta), "%llds", (long long)e);
            printf("%-38s %-12s %9lld %9lld %9lld %7lld %12lld %9.1f %8.2f %8s\n",
                   cli_jtext(n, "node"), cli_jtext(n, "state"),
                   (long long)cli_jint(n, "files_scanned"), (long long)cli_jint(n, "files_moved"),
                   (long long)cli_jint(n, "files_skipped"), (long long)cli_jint(n, "files_failed"),
                   (long long)cli_jint(n, "bytes_moved"), cli_jdbl(n, "rate_files_s"),
                   cli_jdbl(n, "rate_mb_s"), eta);
        }
    if (json_object_object_get_ex(st, "leaving", &leaving))
        for (size_t i = 0; i < json_object_array_length(leaving); i++) {
            struct json_object *b = json_object_array_get_idx(leaving, i);
            printf("leaving %s:%s: %lld files left\n", cli_jtext(b, "host"), cli_jtext(b, "path"),
                   (long long)cli_jint(b, "files_left"));
        }
}

int cli_add_brick(const struct cli *c, const char *what, int argc, char **argv)
{
    if (argc < 2)
        return cli_fail(CLI_USAGE, what, "usage: volume add-brick NAME [replica N] HOST:/DIR... "
                        "[force]");
    struct json_object *b = json_object_new_object(), *bricks = json_object_new_array();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "replica") == 0) {
            char *end;
            long n = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || *end || n < 1 || n > 16) {
                json_object_put(b);
                json_object_put(bricks);
                return cli_fail(CLI_USAGE, what, "'replica' needs a count");
            }
            json_object_object_add(b, "replica", json_object_new_int((int)n));
            i++;
        } else if (strcmp(argv[i], "force") == 0 && i == argc - 1) {
            json_object_object_add(b, "force", json_object_new_boolean(1));
        } else {
            json_object_array_add(bricks, json_object_new_string(argv[i]));
        }
    }
    if (json_object_array_length(bricks) == 0) {
        json_object_put(b);
        json_object_put(bricks);
        return cli_fail(CLI_USAGE, what, "at least one brick (HOST:/DIR) is required");
    }
    json_object_object_add(b, "bricks", bricks);
    char path[400];
    struct cli_resp r;
    path_of(path, sizeof(path), argv[0], "add-brick");
    int rc = cli_call(c, what, "POST", path, b, &r);
    if (rc == CLI_OK) {
        if (!c->json)
            printf("%s: %s: success: run 'brickfs volume rebalance %s start' to move files to "
                   "the new bricks\n", what, argv[0], argv[0]);
        cli_resp_free(&r);
    }
    return rc;
}

int cli_remove_brick(const struct cli *c, const char *what, int argc, char **argv)
{
    static const char *const actions[] = {"start", "status", "stop", "commit"};
    const char *action = argc > 1 ? argv[argc - 1] : "";
    bool ok = false;
    for (int i = 0; i < 4; i++)
        ok = ok || strcmp(action, actions[i]) == 0;
    if (argc < 3 || !ok)
        return cli_fail(CLI_USAGE, what, "usage: volume remove-brick NAME HOST:/DIR... "
                        "start|status|stop|commit");
    struct json_object *b = json_object_new_object(), *bricks = json_object_new_array();
    for (int i = 1; i < argc - 1; i++)
        json_object_array_add(bricks, json_object_new_string(argv[i]));
    json_object_object_add(b, "bricks", bricks);
    json_object_object_add(b, "action", json_object_new_string(action));
    char path[400];
    struct cli_resp r;
    path_of(path, sizeof(path), argv[0], "remove-brick");
    int rc = cli_call(c, what, "POST", path, b, &r);
    if (rc == CLI_OK) {
        if (!c->json) {
            if (strcmp(action, "commit") == 0)
                printf("%s: %s: success: the bricks left the volume (their folders are kept)\n",
                       what, argv[0]);
            else if (strcmp(action, "stop") == 0)
                printf("%s: %s: stopped\n", what, argv[0]);
            else if (r.json)
                print_rebal(r.json);
        }
        cli_resp_free(&r);
    }
    return rc;
}

int cli_replace_brick(const struct cli *c, const char *what, int argc, char **argv)
{
    if (argc != 5 || strcmp(argv[3], "commit") != 0 || strcmp(argv[4], "force") != 0)
        return cli_fail(CLI_USAGE, what, "usage: volume replace-brick NAME OLD NEW commit force");
    struct json_object *b = json_object_new_object();
    json_object_object_add(b, "old", json_object_new_string(argv[1]));
    json_object_object_add(b, "new", json_object_new_string(argv[2]));
    json_object_object_add(b, "force", json_object_new_boolean(1));
    char path[400];
    struct cli_resp r;
    path_of(path, sizeof(path), argv[0], "replace-brick");
    int rc = cli_call(c, what, "POST", path, b, &r);
    if (rc == CLI_OK) {
        if (!c->json)
            printf("%s: %s: success: %s is healed from its replica set\n", what, argv[0],
                   argv[2]);
        cli_resp_free(&r);
    }
    return rc;
}

int cli_rebalance(const struct cli *c, const char *what, int argc, char **argv)
{
    const char *action = argc > 1 ? argv[1] : "";
    if (argc == 3 && strcmp(argv[1], "fix-layout") == 0 && strcmp(argv[2], "start") == 0)
        action = "fix-layout";
    else if (argc != 2 || (strcmp(action, "start") && strcmp(action, "stop") &&
                           strcmp(action, "pause") && strcmp(action, "resume") &&
                           strcmp(action, "status")))
        return cli_fail(CLI_USAGE, what, "usage: volume rebalance NAME fix-layout start | "
                        "start|stop|pause|resume|status");
    char path[400];
    struct cli_resp r;
    path_of(path, sizeof(path), argv[0], "rebalance");
    struct json_object *b = NULL;
    if (strcmp(action, "status") != 0) {
        b = json_object_new_object();
        json_object_object_add(b, "action", json_object_new_string(action));
    }
    int rc = cli_call(c, what, b ? "POST" : "GET", path, b, &r);
    if (rc == CLI_OK) {
        if (!c->json && r.json)
            print_rebal(r.json);
        cli_resp_free(&r);
    }
    return rc;
}
