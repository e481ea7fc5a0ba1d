/*
 * body.h — a byte buffer that grows up to a hard cap: the body of an HTTP
 * answer collected by libcurl (brickfsd's etcd store and peer probe, the
 * brickfs command line, the mount's volfile fetch) or of a request
 * gathered by brickfsd's HTTP server. The cap is what keeps a misbehaving
 * or hostile peer from making the process allocate without bound: the
 * byte that would pass it fails the append (and so the transfer), and
 * `over` tells the caller to say so rather than to report a network error.
 *
 * Lifetime: zero it or bfs_body_init(); the bytes are the caller's to
 * bfs_body_free() (or to keep with bfs_body_take()). Not thread-safe: one
 * transfer fills one buffer. No libcurl dependency: bfs_body_curl_write
 * only has the signature of CURLOPT_WRITEFUNCTION.
 */
#ifndef BFS_CORE_BODY_H
#define BFS_CORE_BODY_H

#include <stdbool.h>
#include <stddef.h>

struct bfs_body {
    char *p;      /* the bytes, NUL-terminated; NULL until the first byte */
    size_t len;   /* bytes held (not counting the NUL) */
    size_t size;  /* bytes allocated */
    size_t cap;   /* at most this many bytes are ever held */
    bool over;    /* an append would have passed cap (sticky until free) */
};

/* An empty buffer that holds at most cap bytes. */
void bfs_body_init(struct bfs_body *b, size_t cap);
/* Appends n bytes: 0; -EFBIG (and over set) if len + n would pass cap, or
 * if an earlier append did; -ENOMEM. On error nothing is appended. */
int bfs_body_append(struct bfs_body *b, const void *d, size_t n);
/* CURLOPT_WRITEFUNCTION with CURLOPT_WRITEDATA a struct bfs_body *: the
 * bytes taken, or 0 (libcurl then fails with CURLE_WRITE_ERROR). */
size_t bfs_body_curl_write(char *d, size_t size, size_t nmemb, void *arg);
/* Drops the first n bytes (n <= len), keeping the rest and the NUL. */
void bfs_body_consume(struct bfs_body *b, size_t n);
/* The bytes as a malloc'ed string ("" when empty, NULL when out of
 * memory) for the caller to free; b is left empty. */
char *bfs_body_take(struct bfs_body *b);
void bfs_body_free(struct bfs_body *b);
/* "64 MiB", "64 KiB" or "N bytes": the cap for error messages. */
const char *bfs_body_cap_str(size_t cap, char *buf, size_t len);

#endif
