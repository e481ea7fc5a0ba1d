/*
 * cmd-peer.c — `brickfs peer probe|detach|status` and `brickfs pool list`
 * (docs/design/pool.md): one REST call each (docs/API.md, "Pool"), printed
 * as the gluster CLI does, or brickfsd's JSON with --json.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "cli/cli.h"

static int probe(const struct cli *c, int argc, char **argv)
{
    if (argc != 1)
        return cli_fail(CLI_USAGE, "peer probe", "usage: brickfs peer probe HOST[:PORT]");
    struct json_object *b = json_object_new_object();
    json_object_object_add(b, "host", json_object_new_string(argv[0]));
    struct cli_resp r;
    int rc = cli_call(c, "peer probe", "POST", "/v1/peers", b, &r);
    if (rc == CLI_OK) {
        if (!c->json)
            printf("peer probe: %s: %s\n", argv[0], cli_jtext(r.json, "message"));
        cli_resp_free(&r);
    }
    return rc;
}

static int detach(const struct cli *c, int argc, char **argv)
{
    bool force = argc == 2 && strcmp(argv[1], "force") == 0;
    if (argc < 1 || argc > 2 || (argc == 2 && !force))
        return cli_fail(CLI_USAGE, "peer detach", "usage: brickfs peer detach HOST [force]");
    char *esc = curl_easy_escape(NULL, argv[0], 0), path[1200];
    snprintf(path, sizeof(path), "/v1/peers/%s", esc ? esc : "");
    curl_free(esc);
    struct json_object *b = json_object_new_object();
    json_object_object_add(b, "force", json_object_new_boolean(force));
    return cli_call_simple(c, "peer detach", "DELETE", path, b, argv[0]);
}

static int status(const struct cli *c, bool pool)
{
    const char *what = pool ? "pool list" : "peer status";
    struct cli_resp r;
    int rc = cli_call(c, what, "GET", pool ? "/v1/pool" : "/v1/peers", NULL, &r);
    if (rc != CLI_OK)
        return rc;
    struct json_object *arr = json_object_object_get(r.json, pool ? "nodes" : "peers");
    size_t n = arr ? json_object_array_length(arr) : 0;
    if (!c->json && pool)
        printf("%-36s  %-20s  %-22s  %s\n", "UUID", "Hostname", "Address", "State");
    else if (!c->json)
        printf("Number of Peers: %zu\n", n);
    for (size_t i = 0; !c->json && i < n; i++) {
        struct json_object *d = json_object_array_get_idx(arr, i);
        bool self = json_object_get_boolean(json_object_object_get(d, "self"));
        if (pool)
            printf("%-36s  %-20s  %-22s  %s\n", cli_jtext(d, "uuid"),
                   self ? "localhost" : cli_jtext(d, "name"), cli_jtext(d, "address"),
                   cli_jtext(d, "state"));
        else
            printf("\nHostname: %s\nAddress: %s\nUuid: %s\nState: Peer in Cluster (%s)\n",
                   cli_jtext(d, "name"), cli_jtext(d, "address"), cli_jtext(d, "uuid"),
                   cli_jtext(d, "state"));
    }
    cli_resp_free(&r);
    return CLI_OK;
}

static const char peer_usage[] =
    "usage: brickfs [--server HOST[:PORT]] [--json] peer COMMAND ...\n\n"
    "  peer probe HOST[:PORT]   adds the brickfsd at HOST (port 24100 by default) to this\n"
    "                           pool; it must use the same --store etcd:...\n"
    "  peer detach HOST [force] removes a node that has no bricks; 'force' for one that\n"
    "                           is disconnected\n"
    "  peer status              the other nodes of the pool and whether they are connected\n";

int cli_peer(const struct cli *c, int argc, char **argv)
{
    bool help = argc > 0 && strcmp(argv[argc - 1], "--help") == 0;
    if (help) {
        fputs(peer_usage, stdout);
        return CLI_OK;
    }
    if (argc >= 2 && strcmp(argv[1], "probe") == 0)
        return probe(c, argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "detach") == 0)
        return detach(c, argc - 2, argv + 2);
    if (argc == 2 && strcmp(argv[1], "status") == 0)
        return status(c, false);
    fputs(peer_usage, stderr);
    return CLI_USAGE;
}

int cli_pool(const struct cli *c, int argc, char **argv)
{
    bool help = argc > 0 && strcmp(argv[argc - 1], "--help") == 0;
    if (help || argc != 2 || strcmp(argv[1], "list") != 0) {
        fputs("usage: brickfs [--server HOST[:PORT]] [--json] pool list\n\n"
              "  pool list   every node of the pool, this one as localhost\n",
              help ? stdout : stderr);
        return help ? CLI_OK : CLI_USAGE;
    }
    return status(c, true);
}
