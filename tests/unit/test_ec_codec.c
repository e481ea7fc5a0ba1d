/*
 * test_ec_codec.c — the erasure codec (src/ec/ec-codec.h): encode against a
 * byte-by-byte reference of the Cauchy code, then for every erasure pattern
 * (every set of up to m lost fragments) of 2+1, 4+2, 6+2, 8+3 and 16+4, for
 * aligned and unaligned chunk sizes and several stripes, decode and rebuild
 * and compare with the original data and fragments; partial encodes;
 * -EIO past m losses; bad arguments; concurrent decodes filling the table
 * cache from several threads.
 *
 * Failures inside a sweep are counted and reported once per (code, chunk,
 * stripes) with the first failing pattern, so the TAP output stays short.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "../lib/tap.h"
#include "ec/ec-codec.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint8_t rnd8(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)(rng >> 24);
}

static uint8_t *random_buf(size_t len)
{
    uint8_t *b = malloc(len ? len : 1);
    for (size_t i = 0; i < len; i++)
        b[i] = rnd8();
    return b;
}

/* One encoded buffer set: data and its k + m fragments. */
struct set {
    unsigned k, m, n;
    size_t ns, chunk, dlen, flen;
    uint8_t *data;
    uint8_t *frag[BFS_EC_MAX_FRAGS];
};

static int set_make(struct set *s, const struct bfs_ec *ec, size_t ns, size_t chunk)
{
    s->k = bfs_ec_k(ec);
    s->m = bfs_ec_m(ec);
    s->n = s->k + s->m;
    s->ns = ns;
    s->chunk = chunk;
    s->flen = ns * chunk;
    s->dlen = s->flen * s->k;
    s->data = random_buf(s->dlen);
    for (unsigned i = 0; i < s->n; i++)
        s->frag[i] = malloc(s->flen);
    return bfs_ec_encode_stripes(ec, s->data, ns, chunk, s->frag);
}

static void set_free(struct set *s)
{
    free(s->data);
    for (unsigned i = 0; i < s->n; i++)
        free(s->frag[i]);
}

/* Reference: data fragments are slices of the data, parity row r is
 * sum_j C[r][j] * d_j with C[r][j] = 1 / ((k + r) xor j). */
static int reference_ok(const struct set *s)
{
    for (size_t st = 0; st < s->ns; st++)
        for (size_t b = 0; b < s->chunk; b++) {
            const uint8_t *stripe = s->data + st * s->k * s->chunk;
            for (unsigned j = 0; j < s->k; j++)
                if (s->frag[j][st * s->chunk + b] != stripe[j * s->chunk + b])
                    return 0;
            for (unsigned r = 0; r < s->m; r++) {
                uint8_t p = 0;
                for (unsigned j = 0; j < s->k; j++)
                    p ^= gf_mul(gf_inv((uint8_t)((s->k + r) ^ j)), stripe[j * s->chunk + b]);
                if (s->frag[s->k + r][st * s->chunk + b] != p)
                    return 0;
            }
        }
    return 1;
}

static void test_reference(void)
{
    static const unsigned codes[][2] = {{2, 1}, {4, 2}, {8, 3}, {16, 4}, {29, 3}};
    for (size_t c = 0; c < sizeof(codes) / sizeof(codes[0]); c++) {
        struct bfs_ec *ec;
        struct set s;
        is_int(bfs_ec_new(codes[c][0], codes[c][1], &ec), 0, "new %u+%u", codes[c][0],
               codes[c][1]);
        is_int(set_make(&s, ec, 3, 67), 0, "encode %u+%u, 3 stripes of 67", codes[c][0],
               codes[c][1]);
        ok(reference_ok(&s), "%u+%u: data fragments are the data, parity matches the "
           "byte-wise Cauchy reference", codes[c][0], codes[c][1]);
        set_free(&s);
        bfs_ec_free(ec);
    }
}

/* Every pattern of up to m lost fragments: decode gives the data back,
 * rebuild gives the lost fragments (asked in reverse order) and a present
 * one (copied) back. */
static void sweep(struct bfs_ec *ec, size_t ns, size_t chunk)
{
    struct set s;
    if (set_make(&s, ec, ns, chunk) != 0) {
        ok(0, "encode %u+%u chunk %zu", bfs_ec_k(ec), bfs_ec_m(ec), chunk);
        return;
    }
    uint8_t *out = malloc(s.dlen);
    uint8_t *rb[BFS_EC_MAX_FRAGS];
    for (unsigned i = 0; i < s.n; i++)
        rb[i] = malloc(s.flen);
    unsigned patterns = 0, bad_dec = 0, bad_reb = 0;
    uint32_t first_bad = 0;
    for (uint32_t lost = 0; lost < (1u << s.n); lost++) {
        if ((unsigned)__builtin_popcount(lost) > s.m)
            continue;
        patterns++;
        const uint8_t *fr[BFS_EC_MAX_FRAGS];
        unsigned want[BFS_EC_MAX_FRAGS], nwant = 0;
        for (unsigned i = 0; i < s.n; i++)
            fr[i] = lost >> i & 1 ? NULL : s.frag[i];
        for (unsigned i = s.n; i-- > 0;)
            if (lost >> i & 1)
                want[nwant++] = i;
        want[nwant++] = (unsigned)__builtin_ctz(~lost); /* a present one */
        memset(out, 0xa5, s.dlen);
        if (bfs_ec_decode_stripes(ec, fr, ns, chunk, out) != 0 || memcmp(out, s.data, s.dlen)) {
            if (!bad_dec++ && !bad_reb)
                first_bad = lost;
        }
        int fail = bfs_ec_rebuild_stripes(ec, fr, ns, chunk, want, nwant, rb) != 0;
        for (unsigned w = 0; w < nwant && !fail; w++)
            fail = memcmp(rb[w], s.frag[want[w]], s.flen) != 0;
        if (fail && !bad_reb++ && !bad_dec)
            first_bad = lost;
    }
    ok(bad_dec == 0 && bad_reb == 0,
       "%u+%u, %zu stripe(s) of chunk %zu: %u erasure patterns decode and rebuild", s.k, s.m,
       ns, chunk, patterns);
    if (bad_dec || bad_reb)
        printf("#   %u bad decodes, %u bad rebuilds, first lost mask 0x%x\n", bad_dec, bad_reb,
               first_bad);
    for (unsigned i = 0; i < s.n; i++)
        free(rb[i]);
    free(out);
    set_free(&s);
}

static void test_patterns(void)
{
    static const size_t chunks[] = {1, 7, 64, 511, 4096 + 3};
    static const unsigned codes[][2] = {{2, 1}, {4, 2}, {6, 2}, {8, 3}};
    for (size_t c = 0; c < sizeof(codes) / sizeof(codes[0]); c++) {
        struct bfs_ec *ec;
        if (bfs_ec_new(codes[c][0], codes[c][1], &ec) != 0) {
            ok(0, "new %u+%u", codes[c][0], codes[c][1]);
            continue;
        }
        for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
            sweep(ec, 1, chunks[i]);
            sweep(ec, 3, chunks[i]);
        }
        bfs_ec_free(ec);
    }
    /* 16+4: 6,196 patterns, more than the table cache holds (the uncached
     * path); small chunks keep it quick */
    struct bfs_ec *ec;
    if (bfs_ec_new(16, 4, &ec) == 0) {
        sweep(ec, 2, 7);
        sweep(ec, 1, 515);
        bfs_ec_free(ec);
    } else {
        ok(0, "new 16+4");
    }
}

/* NULL fragments in encode are skipped; the rest equal a full encode. */
static void test_partial_encode(void)
{
    struct bfs_ec *ec;
    struct set s;
    bfs_ec_new(8, 3, &ec);
    set_make(&s, ec, 4, 1000);
    static const uint32_t wanted[] = {0x001, 0x100, 0x400, 0x500, 0x0ff, 0x6ff, 0x7fe};
    for (size_t w = 0; w < sizeof(wanted) / sizeof(wanted[0]); w++) {
        uint8_t *fr[BFS_EC_MAX_FRAGS];
        int good = 1;
        for (unsigned i = 0; i < s.n; i++) {
            fr[i] = wanted[w] >> i & 1 ? malloc(s.flen) : NULL;
            if (fr[i])
                memset(fr[i], 0x5a, s.flen);
        }
        good = bfs_ec_encode_stripes(ec, s.data, s.ns, s.chunk, fr) == 0;
        for (unsigned i = 0; i < s.n; i++) {
            if (fr[i])
                good &= memcmp(fr[i], s.frag[i], s.flen) == 0;
            free(fr[i]);
        }
        ok(good, "encode of the fragments in mask 0x%03x only equals the full encode",
           wanted[w]);
    }
    /* small chunks take the copy-then-code path; partial data makes it
     * fall back to stripe by stripe */
    struct set t;
    set_make(&t, ec, 5, 100);
    uint8_t *fr[BFS_EC_MAX_FRAGS];
    for (unsigned i = 0; i < t.n; i++)
        fr[i] = i == 3 ? NULL : malloc(t.flen);
    int good = bfs_ec_encode_stripes(ec, t.data, t.ns, t.chunk, fr) == 0;
    for (unsigned i = 0; i < t.n; i++) {
        if (fr[i])
            good &= memcmp(fr[i], t.frag[i], t.flen) == 0;
        free(fr[i]);
    }
    ok(good, "small chunk, one data fragment not wanted: the rest equal the full encode");
    set_free(&t);
    set_free(&s);
    bfs_ec_free(ec);
}

static void test_too_many_lost(void)
{
    struct bfs_ec *ec;
    struct set s;
    bfs_ec_new(4, 2, &ec);
    set_make(&s, ec, 2, 64);
    uint8_t *out = malloc(s.dlen), *rb[1] = {malloc(s.flen)};
    const uint8_t *fr[BFS_EC_MAX_FRAGS];
    unsigned bad = 0, masks = 0;
    for (uint32_t lost = 0; lost < (1u << s.n); lost++) {
        if ((unsigned)__builtin_popcount(lost) <= s.m)
            continue;
        masks++;
        for (unsigned i = 0; i < s.n; i++)
            fr[i] = lost >> i & 1 ? NULL : s.frag[i];
        unsigned want = (unsigned)__builtin_ctz(lost);
        bad += bfs_ec_decode_stripes(ec, fr, s.ns, s.chunk, out) != -EIO;
        bad += bfs_ec_rebuild_stripes(ec, fr, s.ns, s.chunk, &want, 1, rb) != -EIO;
    }
    ok(bad == 0 && masks == 42, "4+2: all %u patterns of 3 or more lost give -EIO (decode "
       "and rebuild)", masks);
    free(out);
    free(rb[0]);
    set_free(&s);
    bfs_ec_free(ec);
}

static void test_invalid(void)
{
    struct bfs_ec *ec = NULL;
    is_int(bfs_ec_new(0, 1, &ec), -EINVAL, "k = 0 is invalid");
    is_int(bfs_ec_new(1, 0, &ec), -EINVAL, "m = 0 is invalid");
    is_int(bfs_ec_new(20, 13, &ec), -EINVAL, "k + m = 33 is invalid");
    is_int(bfs_ec_new(4, 2, NULL), -EINVAL, "NULL out is invalid");
    is_int(bfs_ec_new(31, 1, &ec), 0, "31+1 is valid");
    bfs_ec_free(ec);
    is_int(bfs_ec_new(1, 31, &ec), 0, "1+31 is valid");
    struct set s;
    is_int(set_make(&s, ec, 2, 9), 0, "1+31 encodes");
    const uint8_t *only31[BFS_EC_MAX_FRAGS] = {[31] = s.frag[31]};
    uint8_t back[18];
    is_int(bfs_ec_decode_stripes(ec, only31, 2, 9, back), 0, "1+31 decodes from fragment 31");
    ok(memcmp(back, s.data, s.dlen) == 0 && memcmp(s.frag[0], s.data, s.flen) == 0,
       "1+31: fragment 0 is the data, fragment 31 alone gives it back");
    set_free(&s);
    bfs_ec_free(ec);

    bfs_ec_new(4, 2, &ec);
    set_make(&s, ec, 1, 64);
    uint8_t *out = malloc(s.dlen), *rb[2] = {malloc(s.flen), malloc(s.flen)};
    const uint8_t *fr[BFS_EC_MAX_FRAGS];
    for (unsigned i = 0; i < s.n; i++)
        fr[i] = s.frag[i];
    is_int(bfs_ec_encode_stripes(ec, s.data, 1, 0, s.frag), -EINVAL, "encode chunk 0");
    is_int(bfs_ec_encode_stripes(ec, NULL, 1, 64, s.frag), -EINVAL, "encode NULL data");
    is_int(bfs_ec_encode_stripes(ec, s.data, 1, 64, NULL), -EINVAL, "encode NULL frags");
    is_int(bfs_ec_encode_stripes(ec, s.data, SIZE_MAX / 64, 64, s.frag), -EINVAL,
           "encode: size overflow");
    is_int(bfs_ec_encode_stripes(ec, s.data, 0, 64, s.frag), 0, "encode 0 stripes: nothing");
    is_int(bfs_ec_decode_stripes(ec, fr, 1, 0, out), -EINVAL, "decode chunk 0");
    is_int(bfs_ec_decode_stripes(ec, fr, 1, 64, NULL), -EINVAL, "decode NULL data");
    unsigned w_range[] = {6}, w_dup[] = {1, 1}, w_ok[] = {1, 5};
    is_int(bfs_ec_rebuild_stripes(ec, fr, 1, 64, w_range, 1, rb), -EINVAL,
           "rebuild: fragment index out of range");
    is_int(bfs_ec_rebuild_stripes(ec, fr, 1, 64, w_dup, 2, rb), -EINVAL,
           "rebuild: the same fragment twice");
    uint8_t *rb_null[2] = {rb[0], NULL};
    is_int(bfs_ec_rebuild_stripes(ec, fr, 1, 64, w_ok, 2, rb_null), -EINVAL,
           "rebuild: NULL output buffer");
    is_int(bfs_ec_rebuild_stripes(ec, fr, 1, 64, w_ok, 0, rb), 0, "rebuild nothing");
    free(out);
    free(rb[0]);
    free(rb[1]);
    set_free(&s);
    bfs_ec_free(ec);
}

/* Threads decoding different patterns at once, all building and caching
 * tables: every result right. */
struct worker {
    struct bfs_ec *ec;
    const struct set *s;
    unsigned seed, bad;
};

static void *worker_run(void *arg)
{
    struct worker *w = arg;
    const struct set *s = w->s;
    uint8_t *out = malloc(s->dlen);
    for (unsigned it = 0; it < 400; it++) {
        const uint8_t *fr[BFS_EC_MAX_FRAGS];
        uint32_t lost = 0;
        unsigned x = w->seed * 2654435761u + it * 40503u;
        for (unsigned e = 0; e < s->m; e++)
            lost |= 1u << ((x >> (5 * e)) % s->n);
        for (unsigned i = 0; i < s->n; i++)
            fr[i] = lost >> i & 1 ? NULL : s->frag[i];
        if (bfs_ec_decode_stripes(w->ec, fr, s->ns, s->chunk, out) != 0 ||
            memcmp(out, s->data, s->dlen) != 0)
            w->bad++;
    }
    free(out);
    return NULL;
}

static void test_threads(void)
{
    struct bfs_ec *ec;
    struct set s;
    bfs_ec_new(8, 3, &ec);
    set_make(&s, ec, 2, 256);
    pthread_t th[4];
    struct worker w[4];
    for (unsigned i = 0; i < 4; i++) {
        w[i] = (struct worker){.ec = ec, .s = &s, .seed = i + 1};
        pthread_create(&th[i], NULL, worker_run, &w[i]);
    }
    unsigned bad = 0;
    for (unsigned i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        bad += w[i].bad;
    }
    is_int(bad, 0, "4 threads x 400 decodes of random 8+3 erasure patterns, all right");
    set_free(&s);
    bfs_ec_free(ec);
}

int main(void)
{
    plan_lazy();
    test_reference();
    test_patterns();
    test_partial_encode();
    test_too_many_lost();
    test_invalid();
    test_threads();
    return done_testing();
}
