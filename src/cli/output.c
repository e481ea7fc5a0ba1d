/*
 * output.c — what brickfs prints for people (the --json output is the
 * API's own): volume info, status, option help and values, in the layout
 * gluster users know.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "cli/cli.h"

const char *cli_jstr(struct json_object *j, const char *key)
{
    struct json_object *o;
    if (!j || !json_object_object_get_ex(j, key, &o) || json_object_is_type(o, json_type_null))
        return NULL;
    return json_object_get_string(o);
}

const char *cli_jtext(struct json_object *j, const char *key)
{
    const char *s = cli_jstr(j, key);
    return s ? s : "";
}

int64_t cli_jint(struct json_object *j, const char *key)
{
    struct json_object *o;
    return j && json_object_object_get_ex(j, key, &o) ? json_object_get_int64(o) : 0;
}

double cli_jdbl(struct json_object *j, const char *key)
{
    struct json_object *o;
    return j && json_object_object_get_ex(j, key, &o) ? json_object_get_double(o) : 0;
}

static const char *or_dash(const char *s)
{
    return s ? s : "-";
}

struct json_object *cli_jarr(struct json_object *j, const char *key)
{
    struct json_object *o;
    if (!j || !json_object_object_get_ex(j, key, &o) || !json_object_is_type(o, json_type_array))
        return NULL;
    return o;
}

void cli_print_info(struct json_object *v)
{
    struct json_object *bricks = cli_jarr(v, "bricks"), *opts;
    const char *type = or_dash(cli_jstr(v, "type")), *status = or_dash(cli_jstr(v, "status"));
    size_t n = bricks ? json_object_array_length(bricks) : 0;
    printf("Volume Name: %s\n", or_dash(cli_jstr(v, "name")));
    /* "distributed-replicate" -> "Distributed-Replicate", as gluster shows it. */
    printf("Type: ");
    for (size_t i = 0; type[i]; i++)
        putchar((i == 0 || type[i - 1] == '-') && type[i] >= 'a' && type[i] <= 'z' ? type[i] - 32
                                                                                   : type[i]);
    printf("\n");
    printf("Volume ID: %s\n", or_dash(cli_jstr(v, "id")));
    printf("Status: %c%s\n", status[0] >= 'a' && status[0] <= 'z' ? status[0] - 32 : status[0],
           status + 1);
    struct json_object *o;
    int replica = json_object_object_get_ex(v, "replica", &o) ? json_object_get_int(o) : 0;
    int arbiter = json_object_object_get_ex(v, "arbiter", &o) ? json_object_get_int(o) : 0;
    int disperse = json_object_object_get_ex(v, "disperse", &o) ? json_object_get_int(o) : 0;
    int redundancy = json_object_object_get_ex(v, "redundancy", &o) ? json_object_get_int(o) : 0;
    if (disperse > 0) /* gluster's form: sets x (data + redundancy) = bricks */
        printf("Number of Bricks: %zu x (%d + %d) = %zu\n", n / (size_t)disperse,
               disperse - redundancy, redundancy, n);
    else if (replica > 0 && arbiter > 0)
        printf("Number of Bricks: %zu x (%d + %d) = %zu\n", n / (size_t)replica,
               replica - arbiter, arbiter, n);
    else if (replica > 0)
        printf("Number of Bricks: %zu x %d = %zu\n", n / (size_t)replica, replica, n);
    else
        printf("Number of Bricks: %zu\n", n);
    printf("Bricks:\n");
    for (size_t i = 0; i < n; i++) {
        struct json_object *b = json_object_array_get_idx(bricks, i);
        /* The arbiter is the last brick of each replica set. */
        bool arb = replica > 0 && arbiter > 0 && (i + 1) % (size_t)replica == 0;
        printf("Brick%zu: %s:%s%s\n", i + 1, or_dash(cli_jstr(b, "host")),
               or_dash(cli_jstr(b, "path")), arb ? " (arbiter)" : "");
    }
    if (json_object_object_get_ex(v, "options", &opts) && json_object_object_length(opts) > 0) {
        printf("Options Reconfigured:\n");
        json_object_object_foreach(opts, key, val)
            printf("%s: %s\n", key, json_object_get_string(val));
    }
}

void cli_print_status(struct json_object *st)
{
    struct json_object *bricks = cli_jarr(st, "bricks");
    size_t n = bricks ? json_object_array_length(bricks) : 0;
    printf("Status of volume: %s (%s)\n", or_dash(cli_jstr(st, "name")),
           or_dash(cli_jstr(st, "status")));
    printf("%-48s %-6s %-7s %-8s %s\n", "Brick", "Port", "Online", "Pid", "Restarts");
    printf("%.80s\n", "------------------------------------------------------------------"
                      "--------------");
    for (size_t i = 0; i < n; i++) {
        struct json_object *b = json_object_array_get_idx(bricks, i), *o;
        char where[4200], pid[16] = "N/A";
        snprintf(where, sizeof(where), "%s:%s", or_dash(cli_jstr(b, "host")),
                 or_dash(cli_jstr(b, "path")));
        bool online = json_object_object_get_ex(b, "online", &o) && json_object_get_boolean(o);
        int p = json_object_object_get_ex(b, "pid", &o) ? json_object_get_int(o) : 0;
        if (p > 0)
            snprintf(pid, sizeof(pid), "%d", p);
        printf("%-48s %-6s %-7s %-8s %s\n", where, or_dash(cli_jstr(b, "port")), online ? "Y" : "N",
               pid, or_dash(cli_jstr(b, "restarts")));
    }
    struct json_object *d, *o;
    if (json_object_object_get_ex(st, "self_heal_daemon", &d)) {
        char who[128], pid[16] = "N/A";
        bool on = json_object_object_get_ex(d, "online", &o) && json_object_get_boolean(o);
        bool enabled = json_object_object_get_ex(d, "enabled", &o) && json_object_get_boolean(o);
        int p = json_object_object_get_ex(d, "pid", &o) ? json_object_get_int(o) : 0;
        if (p > 0)
            snprintf(pid, sizeof(pid), "%d", p);
        snprintf(who, sizeof(who), "Self-heal Daemon on %s%s", or_dash(cli_jstr(d, "host")),
                 enabled ? "" : " (off)");
        printf("%-48s %-6s %-7s %-8s %s\n", who, "N/A", on ? "Y" : "N", pid,
               or_dash(cli_jstr(d, "restarts")));
    }
}

void cli_print_options_help(struct json_object *resp)
{
    struct json_object *opts = cli_jarr(resp, "options");
    size_t n = opts ? json_object_array_length(opts) : 0;
    for (size_t i = 0; i < n; i++) {
        struct json_object *o = json_object_array_get_idx(opts, i), *vals = cli_jarr(o, "values");
        printf("%sOption: %s\n", i ? "\n" : "", or_dash(cli_jstr(o, "key")));
        printf("Default Value: %s\n", cli_jstr(o, "default") ? cli_jstr(o, "default") : "(none)");
        printf("Type: %s", or_dash(cli_jstr(o, "type")));
        if (cli_jstr(o, "min") && cli_jstr(o, "max"))
            printf(" (%s to %s)", cli_jstr(o, "min"), cli_jstr(o, "max"));
        for (size_t k = 0; vals && k < json_object_array_length(vals); k++)
            printf("%s%s", k ? ", " : " (",
                   json_object_get_string(json_object_array_get_idx(vals, k)));
        printf("%s\n", vals ? ")" : "");
        struct json_object *xls = cli_jarr(o, "translators");
        printf("Applies to: %s side (", or_dash(cli_jstr(o, "side")));
        for (size_t k = 0; xls && k < json_object_array_length(xls); k++)
            printf("%s%s", k ? ", " : "",
                   json_object_get_string(json_object_array_get_idx(xls, k)));
        printf(")\n");
        printf("Description: %s\n", or_dash(cli_jstr(o, "description")));
    }
}

void cli_print_get(struct json_object *resp)
{
    struct json_object *opts = cli_jarr(resp, "options");
    size_t n = opts ? json_object_array_length(opts) : 0;
    printf("%-32s %-24s %s\n", "Option", "Value", "Source");
    printf("%-32s %-24s %s\n", "------", "-----", "------");
    for (size_t i = 0; i < n; i++) {
        struct json_object *o = json_object_array_get_idx(opts, i);
        const char *val = cli_jstr(o, "value");
        printf("%-32s %-24s %s\n", or_dash(cli_jstr(o, "key")), val ? val : "(unset)",
               or_dash(cli_jstr(o, "source")));
    }
}
