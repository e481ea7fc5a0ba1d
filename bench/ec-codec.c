/*
 * ec-codec.c — throughput of the erasure codec (src/ec) on one core against
 * a minimal direct ISA-L loop over the same buffers, in the same run.
 *
 *   ec-codec [-t MS] [-r ROUNDS] [-s BYTES] [-c CHUNK,...] [-q]
 *
 * For each code (4+2, 6+2, 8+3) and chunk size, each call works on about
 * BYTES (default 1 MiB, a FUSE write) of file data: nstripes = BYTES / (k *
 * chunk) stripes.
 *   encode  codec:  bfs_ec_encode_stripes, every fragment wanted (data
 *                   fragments copied out, parity computed);
 *           direct: per stripe, ec_encode_data from the data buffer into
 *                   the parity buffers (parity only, no copy-out);
 *   decode  data fragments 0 .. m-1 lost:
 *           codec:  bfs_ec_decode_stripes (m chunks decoded per stripe, the
 *                   k-m present data chunks copied into place);
 *           direct: per stripe, ec_encode_data with decode tables built
 *                   once, from k present fragments into the m lost chunks'
 *                   places in the data buffer (no copy of present data).
 * So the direct loop does strictly less work than the codec. Throughput is
 * file data bytes per second of this thread's CPU time (GB = 10^9): GB/s
 * per core, not counting time the scheduler gives to other processes. The
 * three loops (codec, direct, ISA-L alone) take turns for ROUNDS rounds of
 * at least MS ms of CPU each; the figures are the best round of each (the
 * least disturbed by cache and memory traffic of other work), the ratio is
 * codec / direct of those. Prints one table; exit status 0 (1 if codec and
 * direct loop disagree on the bytes, checked before timing).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <isa-l/erasure_code.h>

#include "ec/ec-codec.h"

struct bench {
    unsigned k, m, n;
    size_t chunk, ns, dlen, flen;
    struct bfs_ec *ec;
    uint8_t *data, *out;
    uint8_t *frag[BFS_EC_MAX_FRAGS];
    uint8_t *matrix, *enc_tbls, *dec_tbls;
};

/* CPU time of this thread: "per core" figures that do not count the time
 * the scheduler gives to other work on a shared machine. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *xmalloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 1) != 0) {
        fprintf(stderr, "ec-codec: out of memory\n");
        exit(1);
    }
    return p;
}

/* ---- the direct ISA-L loops ---- */

static void direct_encode_parity(struct bench *b)
{
    uint8_t *src[BFS_EC_MAX_FRAGS], *dst[BFS_EC_MAX_FRAGS];
    for (size_t s = 0; s < b->ns; s++) {
        for (unsigned j = 0; j < b->k; j++)
            src[j] = b->data + (s * b->k + j) * b->chunk;
        for (unsigned r = 0; r < b->m; r++)
            dst[r] = b->frag[b->k + r] + s * b->chunk;
        ec_encode_data((int)b->chunk, (int)b->k, (int)b->m, b->enc_tbls, src, dst);
    }
}

static void direct_encode(struct bench *b)
{
    uint8_t *src[BFS_EC_MAX_FRAGS], *dst[BFS_EC_MAX_FRAGS];
    for (size_t s = 0; s < b->ns; s++) {
        for (unsigned j = 0; j < b->k; j++)
            src[j] = b->data + (s * b->k + j) * b->chunk;
        for (unsigned r = 0; r < b->m; r++)
            dst[r] = b->frag[b->k + r] + s * b->chunk;
        ec_encode_data((int)b->chunk, (int)b->k, (int)b->m, b->enc_tbls, src, dst);
        for (unsigned j = 0; j < b->k; j++)
            memcpy(b->frag[j] + s * b->chunk, src[j], b->chunk);
    }
}

/* decode tables for "data fragments 0..m-1 lost": sources m .. m+k-1 */
static int direct_decode_tables(struct bench *b)
{
    unsigned k = b->k;
    uint8_t sub[BFS_EC_MAX_FRAGS * BFS_EC_MAX_FRAGS], inv[BFS_EC_MAX_FRAGS * BFS_EC_MAX_FRAGS];
    memcpy(sub, b->matrix + (size_t)b->m * k, (size_t)k * k);
    if (gf_invert_matrix(sub, inv, (int)k) != 0)
        return -1;
    ec_init_tables((int)k, (int)b->m, inv, b->dec_tbls); /* rows 0..m-1 of the inverse */
    return 0;
}

static void direct_decode_lost(struct bench *b)
{
    uint8_t *src[BFS_EC_MAX_FRAGS], *dst[BFS_EC_MAX_FRAGS];
    for (size_t s = 0; s < b->ns; s++) {
        for (unsigned j = 0; j < b->k; j++)
            src[j] = b->frag[b->m + j] + s * b->chunk;
        for (unsigned r = 0; r < b->m; r++)
            dst[r] = b->out + (s * b->k + r) * b->chunk;
        ec_encode_data((int)b->chunk, (int)b->k, (int)b->m, b->dec_tbls, src, dst);
    }
}

static void direct_decode(struct bench *b)
{
    uint8_t *src[BFS_EC_MAX_FRAGS], *dst[BFS_EC_MAX_FRAGS];
    for (size_t s = 0; s < b->ns; s++) {
        for (unsigned j = 0; j < b->k; j++)
            src[j] = b->frag[b->m + j] + s * b->chunk;
        for (unsigned r = 0; r < b->m; r++)
            dst[r] = b->out + (s * b->k + r) * b->chunk;
        ec_encode_data((int)b->chunk, (int)b->k, (int)b->m, b->dec_tbls, src, dst);
        for (unsigned j = b->m; j < b->k; j++)
            memcpy(b->out + (s * b->k + j) * b->chunk, b->frag[j] + s * b->chunk, b->chunk);
    }
}

/* ---- the codec ---- */

static void codec_encode(struct bench *b)
{
    if (bfs_ec_encode_stripes(b->ec, b->data, b->ns, b->chunk, b->frag) != 0)
        abort();
}

static void codec_decode(struct bench *b)
{
    const uint8_t *fr[BFS_EC_MAX_FRAGS];
    for (unsigned i = 0; i < b->n; i++)
        fr[i] = i < b->m ? NULL : b->frag[i];
    if (bfs_ec_decode_stripes(b->ec, fr, b->ns, b->chunk, b->out) != 0)
        abort();
}

/* GB/s of file data over at least ms milliseconds */
static double measure(struct bench *b, void (*fn)(struct bench *), double ms)
{
    size_t calls = 0;
    double t0 = now(), t;
    do {
        fn(b);
        calls++;
        t = now() - t0;
    } while (t * 1e3 < ms);
    return (double)calls * (double)b->dlen / t / 1e9;
}

static int setup(struct bench *b, unsigned k, unsigned m, size_t chunk, size_t bytes)
{
    memset(b, 0, sizeof(*b));
    b->k = k;
    b->m = m;
    b->n = k + m;
    b->chunk = chunk;
    b->ns = bytes / (k * chunk) ? bytes / (k * chunk) : 1;
    b->flen = b->ns * chunk;
    b->dlen = b->flen * k;
    if (bfs_ec_new(k, m, &b->ec) != 0)
        return -1;
    b->data = xmalloc(b->dlen);
    b->out = xmalloc(b->dlen);
    for (size_t i = 0; i < b->dlen; i++)
        b->data[i] = (uint8_t)(i * 2654435761u >> 13);
    for (unsigned i = 0; i < b->n; i++)
        b->frag[i] = xmalloc(b->flen);
    b->matrix = xmalloc((size_t)b->n * k);
    b->enc_tbls = xmalloc((size_t)32 * k * m);
    b->dec_tbls = xmalloc((size_t)32 * k * m);
    gf_gen_cauchy1_matrix(b->matrix, (int)b->n, (int)k);
    ec_init_tables((int)k, (int)m, b->matrix + (size_t)k * k, b->enc_tbls);
    if (direct_decode_tables(b) != 0)
        return -1;
    /* both encoders must agree before anything is timed */
    codec_encode(b);
    uint8_t *p = xmalloc(b->flen * m);
    for (unsigned r = 0; r < m; r++)
        memcpy(p + r * b->flen, b->frag[k + r], b->flen);
    direct_encode(b);
    int same = 1;
    for (unsigned r = 0; r < m; r++)
        same &= memcmp(p + r * b->flen, b->frag[k + r], b->flen) == 0;
    free(p);
    codec_decode(b);
    same &= memcmp(b->out, b->data, b->dlen) == 0;
    memset(b->out, 0, b->dlen);
    direct_decode(b);
    same &= memcmp(b->out, b->data, b->dlen) == 0;
    return same ? 0 : -1;
}

static void teardown(struct bench *b)
{
    bfs_ec_free(b->ec);
    free(b->data);
    free(b->out);
    for (unsigned i = 0; i < b->n; i++)
        free(b->frag[i]);
    free(b->matrix);
    free(b->enc_tbls);
    free(b->dec_tbls);
}

int main(int argc, char **argv)
{
    double ms = 30;
    int rounds = 9, opt;
    size_t bytes = 1 << 20;
    size_t chunks[8] = {512, 4096};
    int nchunks = 2;
    while ((opt = getopt(argc, argv, "t:r:s:c:")) != -1) {
        switch (opt) {
        case 't': ms = atof(optarg); break;
        case 'r': rounds = atoi(optarg); break;
        case 's': bytes = strtoull(optarg, NULL, 0); break;
        case 'c': {
            nchunks = 0;
            for (char *tok = strtok(optarg, ","); tok && nchunks < 8; tok = strtok(NULL, ","))
                chunks[nchunks++] = strtoull(tok, NULL, 0);
            break;
        }
        default:
            fprintf(stderr, "usage: ec-codec [-t MS] [-r ROUNDS] [-s BYTES] [-c CHUNK,...]\n");
            return 2;
        }
    }
    if (rounds < 1 || ms <= 0 || bytes < 1 || nchunks < 1) {
        fprintf(stderr, "ec-codec: bad arguments\n");
        return 2;
    }
    static const unsigned codes[][2] = {{4, 2}, {6, 2}, {8, 3}};
    printf("ec-codec: one core, about %zu bytes of file data per call, best of %d rounds of "
           ">= %.0f ms of CPU time; GB/s of file data per CPU second (10^9 B/s)\n", bytes, rounds, ms);
    printf("| %-5s | %6s | %-26s | %10s | %11s | %5s | %17s |\n", "code", "chunk", "operation",
           "codec GB/s", "direct GB/s", "ratio", "ISA-L alone GB/s");
    printf("|-------|-------:|----------------------------|-----------:|------------:|------:|"
           "------------------:|\n");
    int worst_ok = 1;
    for (size_t c = 0; c < sizeof(codes) / sizeof(codes[0]); c++)
        for (int ci = 0; ci < nchunks; ci++) {
            struct bench b;
            unsigned k = codes[c][0], m = codes[c][1];
            if (setup(&b, k, m, chunks[ci], bytes) != 0) {
                fprintf(stderr, "ec-codec: %u+%u chunk %zu: codec and direct loop disagree\n",
                        k, m, chunks[ci]);
                return 1;
            }
            for (int op = 0; op < 2; op++) {
                void (*f[3])(struct bench *) = {
                    op ? codec_decode : codec_encode, op ? direct_decode : direct_encode,
                    op ? direct_decode_lost : direct_encode_parity};
                double best[3] = {0, 0, 0};
                for (int r = 0; r < rounds; r++)
                    for (int i = 0; i < 3; i++) { /* rotate who goes first */
                        int w = (i + r) % 3;
                        double v = measure(&b, f[w], ms);
                        best[w] = v > best[w] ? v : best[w];
                    }
                char what[40];
                snprintf(what, sizeof(what), op ? "decode, %u data frags lost" : "encode", m);
                printf("| %u+%u   | %6zu | %-26s | %10.2f | %11.2f | %5.2f | %17.2f |\n", k, m,
                       chunks[ci], what, best[0], best[1], best[0] / best[1], best[2]);
                worst_ok &= best[0] / best[1] >= 0.9;
            }
            teardown(&b);
        }
    printf("ec-codec: codec/direct %s 0.9 in every row\n", worst_ok ? ">=" : "is NOT >=");
    return 0;
}
