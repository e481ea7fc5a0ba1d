/*
 * http-client.c — one HTTP request to brickfsd's REST API with libcurl,
 * and the call every command makes through it (cli_call: --json output,
 * the error line). A struct cli_resp owns the body and its parsed JSON
 * until cli_resp_free().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "cli/cli.h"
#include "core/body.h"

/* brickfsd's largest answer is a heal listing, which it cuts at 16 MiB of
 * brickfs-shd's output (mgmt/shd-run.c); anything past 64 MiB is not a
 * brickfsd answering, and fails the command rather than filling memory. */
#define ANSWER_MAX ((size_t)64 << 20)

int cli_http(const struct cli *c, const char *method, const char *path,
             struct json_object *body, struct cli_resp *r)
{
    char url[600], err[CURL_ERROR_SIZE] = "", cap[32];
    struct bfs_body s;
    bfs_body_init(&s, ANSWER_MAX);
    memset(r, 0, sizeof(*r));
    snprintf(url, sizeof(url), "http://%s%s", c->server, path);
    CURL *h = curl_easy_init();
    if (!h)
        return cli_fail(-1, "http", "cannot initialise libcurl");
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    const char *text = body ? json_object_to_json_string(body) : NULL;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, bfs_body_curl_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 300L); /* a stop waits for every brick */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");  /* the API is never behind a proxy */
    if (text)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
    CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    if (s.over) {
        bfs_body_free(&s);
        return cli_fail(-1, "error", "brickfsd at %s answered more than %s to %s %s: refused",
                        c->server, bfs_body_cap_str(ANSWER_MAX, cap, sizeof(cap)), method, path);
    }
    if (rc != CURLE_OK) {
        bfs_body_free(&s);
        return cli_fail(-1, "error", "cannot reach brickfsd at %s: %s (is it running? "
                        "--server HOST:PORT or $BRICKFS_SERVER names another)", c->server,
                        err[0] ? err : curl_easy_strerror(rc));
    }
    r->body = bfs_body_take(&s);
    if (!r->body)
        return cli_fail(-1, "error", "out of memory");
    r->json = json_tokener_parse(r->body);
    return 0;
}

void cli_resp_free(struct cli_resp *r)
{
    json_object_put(r->json);
    free(r->body);
    memset(r, 0, sizeof(*r));
}

int cli_call(const struct cli *c, const char *what, const char *method, const char *path,
             struct json_object *body, struct cli_resp *r)
{
    int rc = cli_http(c, method, path, body, r);
    json_object_put(body);
    if (rc < 0)
        return CLI_ERR;
    if (c->json)
        fputs(r->body, stdout);
    if (r->status >= 300) {
        char msg[1200];
        cli_fail(0, what, "%s", cli_resp_error(r, msg, sizeof(msg)));
        cli_resp_free(r);
        return CLI_ERR;
    }
    return CLI_OK;
}

int cli_call_simple(const struct cli *c, const char *what, const char *method, const char *path,
                    struct json_object *body, const char *name)
{
    struct cli_resp r;
    int rc = cli_call(c, what, method, path, body, &r);
    if (rc == CLI_OK) {
        if (!c->json)
            printf("%s: %s: success\n", what, name);
        cli_resp_free(&r);
    }
    return rc;
}

const char *cli_resp_error(const struct cli_resp *r, char *buf, size_t len)
{
    struct json_object *e;
    if (r->json && json_object_object_get_ex(r->json, "error", &e))
        snprintf(buf, len, "%s", json_object_get_string(e));
    else
        snprintf(buf, len, "brickfsd answered HTTP %ld", r->status);
    return buf;
}
