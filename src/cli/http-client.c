/*
 * http-client.c — one HTTP request to brickfsd's REST API with libcurl.
 * A struct cli_resp owns the body and its parsed JSON until
 * cli_resp_free().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "cli/cli.h"

struct sink {
    char *p;
    size_t len;
};

static size_t on_data(char *data, size_t size, size_t n, void *arg)
{
    struct sink *s = arg;
    size_t add = size * n;
    char *np = realloc(s->p, s->len + add + 1);
    if (!np)
        return 0;
    memcpy(np + s->len, data, add);
    s->p = np;
    s->len += add;
    s->p[s->len] = 0;
    return add;
}

int cli_http(const struct cli *c, const char *method, const char *path,
             struct json_object *body, struct cli_resp *r)
{
    char url[600], err[CURL_ERROR_SIZE] = "";
    struct sink s = {0};
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
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
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
    if (rc != CURLE_OK) {
        free(s.p);
        return cli_fail(-1, "error", "cannot reach brickfsd at %s: %s (is it running? "
                        "--server HOST:PORT or $BRICKFS_SERVER names another)", c->server,
                        err[0] ? err : curl_easy_strerror(rc));
    }
    r->body = s.p ? s.p : strdup("");
    r->json = json_tokener_parse(r->body);
    return 0;
}

void cli_resp_free(struct cli_resp *r)
{
    json_object_put(r->json);
    free(r->body);
    memset(r, 0, sizeof(*r));
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
