/*
 * cmd-heal.c — `brickfs volume heal NAME ...`: the self-heal commands in
 * gluster's syntax, each one REST call (docs/API.md, "Heal"), and what they
 * print for people (--json prints the API's answer instead):
 *
 *   volume heal NAME                         POST /v1/volumes/NAME/heal
 *   volume heal NAME info [summary|split-brain]
 *                                            GET  .../heal/info[/MODE]
 *   volume heal NAME statistics|progress     GET  .../heal/statistics
 *   volume heal NAME split-brain bigger-file FILE
 *   volume heal NAME split-brain latest-mtime FILE
 *   volume heal NAME split-brain source-brick HOST:/DIR [FILE]
 *                                            POST .../heal/split-brain
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "cli/cli.h"

static int usage(const char *what)
{
    return cli_fail(CLI_USAGE, what, "usage: brickfs %s", CLI_HEAL_USAGE);
}

/* "Connected" from "connected" */
static void print_status(struct json_object *b)
{
    const char *s = cli_jstr(b, "status") ? cli_jstr(b, "status") : "unknown";
    printf("Status: %c%s\n", s[0] >= 'a' && s[0] <= 'z' ? s[0] - 32 : s[0], s + 1);
}

static void print_entry(struct json_object *en, bool mark_split)
{
    struct json_object *o;
    const char *path = cli_jstr(en, "path"), *gfid = cli_jstr(en, "gfid");
    bool split = json_object_object_get_ex(en, "split_brain", &o) && json_object_get_boolean(o);
    if (path)
        printf("%s", path);
    else
        printf("<gfid:%s>", gfid ? gfid : "?");
    printf("%s\n", mark_split && split ? " - Is in split-brain" : "");
}

static void print_info(struct json_object *resp, const char *mode)
{
    struct json_object *bricks = cli_jarr(resp, "bricks");
    size_t n = bricks ? json_object_array_length(bricks) : 0;
    bool summary = mode && strcmp(mode, "summary") == 0;
    bool sb = mode && strcmp(mode, "split-brain") == 0;
    for (size_t i = 0; i < n; i++) {
        struct json_object *b = json_object_array_get_idx(bricks, i),
                           *entries = cli_jarr(b, "entries");
        printf("%sBrick %s\n", i ? "\n" : "", cli_jstr(b, "brick") ? cli_jstr(b, "brick") : "?");
        if (!summary)
            for (size_t k = 0; entries && k < json_object_array_length(entries); k++)
                print_entry(json_object_array_get_idx(entries, k), !sb);
        print_status(b);
        if (summary) {
            int64_t p = cli_jint(b, "pending"), s = cli_jint(b, "split_brain");
            printf("Total Number of entries: %lld\n", (long long)p);
            printf("Number of entries in heal pending: %lld\n", (long long)(p - s));
            printf("Number of entries in split-brain: %lld\n", (long long)s);
        } else if (sb) {
            printf("Number of entries in split-brain: %lld\n",
                   (long long)cli_jint(b, "split_brain"));
        } else {
            printf("Number of entries: %lld\n", (long long)cli_jint(b, "pending"));
        }
    }
}

static void print_time(const char *label, int64_t t)
{
    char buf[64] = "never";
    if (t > 0) {
        time_t tt = (time_t)t;
        struct tm tm;
        strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", localtime_r(&tt, &tm));
    }
    printf("%-26s%s\n", label, buf);
}

static void print_stats(struct json_object *resp)
{
    struct json_object *d = NULL, *p = NULL;
    json_object_object_get_ex(resp, "self_heal_daemon", &d);
    json_object_object_get_ex(resp, "progress", &p);
    bool enabled = d && json_object_get_boolean(json_object_object_get(d, "enabled"));
    bool online = d && json_object_get_boolean(json_object_object_get(d, "online"));
    printf("Self-heal daemon of volume %s: ",
           cli_jstr(resp, "name") ? cli_jstr(resp, "name") : "?");
    if (!enabled)
        printf("off\n");
    else if (online)
        printf("online, pid %lld\n", (long long)cli_jint(d, "pid"));
    else
        printf("not running\n");
    if (!p || !json_object_is_type(p, json_type_object)) {
        printf("No heal statistics yet\n");
        return;
    }
    printf("%-26s%s\n", "State:", cli_jstr(p, "state") ? cli_jstr(p, "state") : "?");
    printf("%-26s%lld\n", "Crawls:", (long long)cli_jint(p, "crawls"));
    print_time("Last crawl started:", cli_jint(p, "last_crawl_start"));
    print_time("Last crawl ended:", cli_jint(p, "last_crawl_end"));
    printf("%-26s%lld\n", "Entries healed:", (long long)cli_jint(p, "healed"));
    printf("%-26s%lld\n", "Entries failed:", (long long)cli_jint(p, "failed"));
    printf("%-26s%lld\n", "Entries in split-brain:", (long long)cli_jint(p, "split_brain"));
    printf("%-26s%lld\n", "Entries remaining:", (long long)cli_jint(p, "remaining"));
    printf("%-26s%lld\n", "Bytes healed:", (long long)cli_jint(p, "bytes"));
    printf("%-26s%.1f files/s, %.2f MB/s\n", "Rate:", cli_jdbl(p, "rate_files_per_s"),
           cli_jdbl(p, "rate_bytes_per_s") / 1e6);
}

static int get_and_print(const struct cli *c, const char *what, const char *path,
                         const char *mode, bool stats)
{
    struct cli_resp r;
    int rc = cli_call(c, what, "GET", path, NULL, &r);
    if (rc != CLI_OK)
        return rc;
    if (!c->json && stats)
        print_stats(r.json);
    else if (!c->json)
        print_info(r.json, mode);
    cli_resp_free(&r);
    return rc;
}

/* FILE as brickfsd wants it: a path from the volume's root or gfid:UUID. */
static bool file_ok(const char *f)
{
    return f[0] == '/' || strncmp(f, "gfid:", 5) == 0;
}

static int resolve(const struct cli *c, const char *what, const char *vol, int argc, char **argv)
{
    /* argv: POLICY ARGS... */
    const char *policy = argc > 0 ? argv[0] : "", *file = NULL, *brick = NULL;
    if (strcmp(policy, "bigger-file") == 0 || strcmp(policy, "latest-mtime") == 0) {
        if (argc != 2)
            return usage(what);
        file = argv[1];
    } else if (strcmp(policy, "source-brick") == 0) {
        if (argc < 2 || argc > 3)
            return usage(what);
        brick = argv[1];
        file = argc == 3 ? argv[2] : NULL;
    } else {
        return cli_fail(CLI_USAGE, what, "unknown split-brain policy '%s' (bigger-file, "
                        "latest-mtime, source-brick)", policy);
    }
    if (file && !file_ok(file))
        return cli_fail(CLI_USAGE, what, "FILE must be a path from the volume's root "
                        "(/dir/file) or gfid:UUID, not '%s'", file);
    struct json_object *b = json_object_new_object();
    json_object_object_add(b, "policy", json_object_new_string(policy));
    if (file)
        json_object_object_add(b, "file", json_object_new_string(file));
    if (brick)
        json_object_object_add(b, "source_brick", json_object_new_string(brick));
    char path[256];
    snprintf(path, sizeof(path), "/v1/volumes/%s/heal/split-brain", vol);
    struct cli_resp r;
    int rc = cli_call(c, what, "POST", path, b, &r);
    if (rc != CLI_OK)
        return rc;
    struct json_object *res = cli_jarr(r.json, "results");
    size_t n = res ? json_object_array_length(res) : 0;
    for (size_t i = 0; i < n && !c->json; i++) {
        struct json_object *o = json_object_array_get_idx(res, i), *ok;
        bool good = json_object_object_get_ex(o, "ok", &ok) && json_object_get_boolean(ok);
        if (good)
            printf("Healed %s.\n", cli_jstr(o, "file") ? cli_jstr(o, "file") : "?");
        else
            fprintf(stderr, "brickfs: %s: %s: %s\n", what,
                    cli_jstr(o, "file") ? cli_jstr(o, "file") : "?",
                    cli_jstr(o, "message") ? cli_jstr(o, "message") : "failed");
    }
    if (!c->json && n == 0)
        printf("No file in split-brain on the replica set of %s\n", brick ? brick : "?");
    if (cli_jint(r.json, "failed") > 0)
        rc = cli_fail(CLI_ERR, what, "%lld of %zu file(s) could not be resolved",
                      (long long)cli_jint(r.json, "failed"), n);
    cli_resp_free(&r);
    return rc;
}

int cli_volume_heal(const struct cli *c, const char *what, int argc, char **argv)
{
    char path[300];
    if (argc < 1)
        return usage(what);
    const char *vol = argv[0], *sub = argc > 1 ? argv[1] : NULL;
    if (!sub) {
        snprintf(path, sizeof(path), "/v1/volumes/%s/heal", vol);
        struct cli_resp r;
        int rc = cli_call(c, what, "POST", path, NULL, &r);
        if (rc == CLI_OK) {
            if (!c->json)
                printf("Launching heal operation to perform index self heal on volume %s has "
                       "been successful\nUse heal info commands to check status.\n", vol);
            cli_resp_free(&r);
        }
        return rc;
    }
    if (strcmp(sub, "info") == 0) {
        const char *mode = argc > 2 ? argv[2] : NULL;
        if (argc > 3 || (mode && strcmp(mode, "summary") != 0 && strcmp(mode, "split-brain") != 0))
            return usage(what);
        snprintf(path, sizeof(path), "/v1/volumes/%s/heal/info%s%s", vol, mode ? "/" : "",
                 mode ? mode : "");
        return get_and_print(c, what, path, mode, false);
    }
    if (strcmp(sub, "statistics") == 0 || strcmp(sub, "progress") == 0) {
        if (argc != 2)
            return usage(what);
        snprintf(path, sizeof(path), "/v1/volumes/%s/heal/statistics", vol);
        return get_and_print(c, what, path, NULL, true);
    }
    if (strcmp(sub, "split-brain") == 0)
        return resolve(c, what, vol, argc - 2, argv + 2);
    return cli_fail(CLI_USAGE, what, "unknown heal command '%s' (info, statistics, progress, "
                    "split-brain; brickfs volume heal --help)", sub);
}
