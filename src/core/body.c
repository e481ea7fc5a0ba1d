/*
 * body.c — the capped byte buffer of body.h. Grows by doubling (a 64 MiB
 * answer arrives in 16 KiB pieces: no quadratic copying) but never
 * allocates more than cap + 1 bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/body.h"

void bfs_body_init(struct bfs_body *b, size_t cap)
{
    memset(b, 0, sizeof(*b));
    b->cap = cap;
}

int bfs_body_append(struct bfs_body *b, const void *d, size_t n)
{
    if (b->over || n > b->cap - b->len) {
        b->over = true;
        return -EFBIG;
    }
    size_t need = b->len + n + 1;
    if (need > b->size) {
        size_t ns = b->size ? b->size : 256;
        while (ns < need)
            ns = ns > SIZE_MAX / 2 ? need : ns * 2;
        if (ns > b->cap + 1 && b->cap + 1 >= need) /* cap + 1 == 0: SIZE_MAX, no bound */
            ns = b->cap + 1;
        char *np = realloc(b->p, ns);
        if (!np)
            return -ENOMEM;
        b->p = np;
        b->size = ns;
    }
    if (n)
        memcpy(b->p + b->len, d, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

size_t bfs_body_curl_write(char *d, size_t size, size_t nmemb, void *arg)
{
    if (nmemb && size > SIZE_MAX / nmemb)
        return 0;
    size_t n = size * nmemb;
    return bfs_body_append(arg, d, n) == 0 ? n : 0;
}

void bfs_body_consume(struct bfs_body *b, size_t n)
{
    if (!b->p)
        return;
    if (n > b->len)
        n = b->len;
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
    b->p[b->len] = 0;
}

char *bfs_body_take(struct bfs_body *b)
{
    char *s = b->p ? b->p : strdup("");
    size_t cap = b->cap;
    bfs_body_init(b, cap);
    return s;
}

void bfs_body_free(struct bfs_body *b)
{
    free(b->p);
    bfs_body_init(b, b->cap);
}

const char *bfs_body_cap_str(size_t cap, char *buf, size_t len)
{
    if (cap >= (1u << 20) && cap % (1u << 20) == 0)
        snprintf(buf, len, "%zu MiB", cap >> 20);
    else if (cap >= 1024 && cap % 1024 == 0)
        snprintf(buf, len, "%zu KiB", cap >> 10);
    else
        snprintf(buf, len, "%zu bytes", cap);
    return buf;
}
