/*
 * test_body.c — the capped byte buffer (core/body.h) that collects HTTP
 * answers: the exact cap fits, one byte more fails the append and, through
 * libcurl (a file:// transfer), the whole transfer; an empty answer is "".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "../lib/tap.h"
#include "core/body.h"

static void test_append(void)
{
    struct bfs_body b;
    bfs_body_init(&b, 8);
    is_int(bfs_body_append(&b, "abc", 3), 0, "append 3 of 8");
    is_int(bfs_body_append(&b, "defgh", 5), 0, "append up to the exact cap");
    ok(b.len == 8 && strcmp(b.p, "abcdefgh") == 0 && !b.over, "... holds all 8, NUL-terminated");
    is_int(bfs_body_append(&b, "", 0), 0, "an empty append at the cap is fine");
    is_int(bfs_body_append(&b, "i", 1), -EFBIG, "one byte past the cap: EFBIG");
    ok(b.over && b.len == 8 && strcmp(b.p, "abcdefgh") == 0, "... over set, nothing appended");
    bfs_body_consume(&b, 6);
    is_int(bfs_body_append(&b, "i", 1), -EFBIG, "over is sticky: after room is made, still EFBIG");
    bfs_body_free(&b);
    ok(!b.p && b.len == 0 && !b.over && b.cap == 8, "free: empty again, same cap");

    bfs_body_init(&b, 8);
    is_int(bfs_body_append(&b, "123456789", 9), -EFBIG, "a first append past the cap: EFBIG");
    ok(b.p == NULL && b.len == 0 && b.over, "... nothing allocated");
    bfs_body_free(&b);

    bfs_body_init(&b, 100);
    bfs_body_append(&b, "one\ntwo\n", 8);
    bfs_body_consume(&b, 4);
    ok(b.len == 4 && strcmp(b.p, "two\n") == 0, "consume drops the front, keeps the NUL");
    char *s = bfs_body_take(&b);
    is_str(s, "two\n", "take gives the bytes");
    ok(b.p == NULL && b.len == 0 && b.cap == 100, "... and leaves the buffer empty");
    free(s);
    s = bfs_body_take(&b);
    is_str(s, "", "take of an empty body: \"\", not NULL");
    free(s);
}

static void test_large(void)
{
    /* 1 MiB in 16 KiB pieces, as libcurl delivers it: grows, never past cap + 1 */
    struct bfs_body b;
    static char piece[16384];
    memset(piece, 'x', sizeof(piece));
    bfs_body_init(&b, 1 << 20);
    int fails = 0;
    for (int i = 0; i < 64; i++)
        fails += bfs_body_append(&b, piece, sizeof(piece)) != 0;
    is_int(fails, 0, "64 pieces of 16 KiB fill a 1 MiB cap exactly");
    ok(b.len == 1u << 20 && b.size <= (1u << 20) + 1, "... allocation bounded by cap + 1 (%zu)",
       b.size);
    is_int(bfs_body_append(&b, piece, 1), -EFBIG, "the next byte: EFBIG");
    bfs_body_free(&b);
}

static void test_cap_str(void)
{
    char buf[32];
    is_str(bfs_body_cap_str((size_t)64 << 20, buf, sizeof(buf)), "64 MiB", "64 MiB");
    is_str(bfs_body_cap_str(64 << 10, buf, sizeof(buf)), "64 KiB", "64 KiB");
    is_str(bfs_body_cap_str(1000, buf, sizeof(buf)), "1000 bytes", "1000 bytes");
}

/* A file of size bytes fetched through libcurl into a body capped at cap. */
static CURLcode fetch(const char *dir, size_t size, size_t cap, struct bfs_body *b)
{
    char path[300], url[320];
    snprintf(path, sizeof(path), "%s/f%zu", dir, size);
    FILE *f = fopen(path, "w");
    for (size_t i = 0; f && i < size; i++)
        fputc('a' + (int)(i % 26), f);
    if (f)
        fclose(f);
    snprintf(url, sizeof(url), "file://%s", path);
    bfs_body_init(b, cap);
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, bfs_body_curl_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    CURLcode cc = curl_easy_perform(h);
    curl_easy_cleanup(h);
    unlink(path);
    return cc;
}

static void test_curl(void)
{
    char dir[] = "/tmp/bfs-body-XXXXXX";
    if (!mkdtemp(dir)) {
        ok(0, "mkdtemp");
        return;
    }
    struct bfs_body b;
    is_int(fetch(dir, 0, 100, &b), CURLE_OK, "curl: an empty answer");
    char *s = bfs_body_take(&b);
    is_str(s, "", "... is \"\"");
    free(s);
    is_int(fetch(dir, 100000, 100000, &b), CURLE_OK, "curl: an answer of exactly the cap");
    ok(b.len == 100000 && !b.over && b.p[99999] == 'a' + 99999 % 26, "... all of it, in order");
    bfs_body_free(&b);
    is_int(fetch(dir, 100001, 100000, &b), CURLE_WRITE_ERROR,
           "curl: one byte over the cap fails the transfer (write error)");
    ok(b.over && b.len <= 100000, "... over set, at most the cap held (%zu)", b.len);
    bfs_body_free(&b);
    rmdir(dir);
}

int main(void)
{
    plan_lazy();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    test_append();
    test_large();
    test_cap_str();
    test_curl();
    curl_global_cleanup();
    return done_testing();
}
