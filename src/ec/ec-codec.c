/*
 * ec-codec.c — systematic Reed-Solomon encode, decode and rebuild of stripes
 * with Intel ISA-L (see ec-codec.h for the layout and the matrix).
 *
 * Every operation is one product "targets = T x sources" over GF(2^8): k
 * source fragments in, some target fragments out. ISA-L wants T expanded to
 * lookup tables (ec_init_tables: 32 bytes per coefficient) and then runs its
 * SIMD dot products (ec_encode_data) over any length.
 *   encode:  sources = the data fragments, T = the parity rows of the matrix;
 *            their tables are built once, in bfs_ec_new.
 *   decode/rebuild: sources = the first k present fragments (data first, so
 *            present data fragments are always sources and only missing ones
 *            are computed), T = rows of M x B^-1 where B is the k x k
 *            submatrix of the sources' rows: a data target t is row t of B^-1,
 *            a parity target is its matrix row times B^-1.
 * Building decode tables costs a k x k inversion plus 32*k*rows table bytes,
 * far more than decoding one small stripe, so they are cached per (sources,
 * targets) pair in a small hash table under ec->lock. Entries are immutable
 * and live until bfs_ec_free, so a pointer taken under the lock stays valid
 * after it is released. The cache is bounded (EC_CACHE_MAX bytes); past the
 * bound tables are built per call and freed after it.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "ec/ec-codec.h"

#define EC_BUCKETS 128
#define EC_CACHE_MAX (4u << 20)
/* ec_encode_data takes an int length: longer runs are cut in pieces. */
#define EC_MAX_RUN (1u << 30)
/* Below this chunk size one ISA-L call per stripe costs more than the
 * arithmetic, so encode copies the data fragments out first and codes the
 * fragment buffers in one long call. */
#define EC_SMALL_CHUNK 512

struct ec_tables {
    struct ec_tables *next;
    uint32_t src, tgt; /* bit masks of source and target fragments */
    unsigned rows;     /* popcount(tgt) */
    uint8_t tbls[];    /* 32 * k * rows bytes, targets in ascending order */
};

struct bfs_ec {
    unsigned k, m, n;
    uint8_t *matrix;   /* n x k, rows 0..k-1 the identity */
    uint8_t *enc_tbls; /* tables of the m parity rows */
    pthread_mutex_t lock;
    size_t cache_bytes;
    struct ec_tables *bucket[EC_BUCKETS];
};

int bfs_ec_new(unsigned k, unsigned m, struct bfs_ec **out)
{
    if (!out || k < 1 || m < 1 || k + m > BFS_EC_MAX_FRAGS)
        return -EINVAL;
    struct bfs_ec *ec = calloc(1, sizeof(*ec));
    if (!ec)
        return -ENOMEM;
    ec->k = k;
    ec->m = m;
    ec->n = k + m;
    ec->matrix = malloc((size_t)ec->n * k);
    ec->enc_tbls = malloc((size_t)32 * k * m);
    if (!ec->matrix || !ec->enc_tbls || pthread_mutex_init(&ec->lock, NULL) != 0) {
        free(ec->matrix);
        free(ec->enc_tbls);
        free(ec);
        return -ENOMEM;
    }
    gf_gen_cauchy1_matrix(ec->matrix, (int)ec->n, (int)k);
    ec_init_tables((int)k, (int)m, ec->matrix + (size_t)k * k, ec->enc_tbls);
    *out = ec;
    return 0;
}

void bfs_ec_free(struct bfs_ec *ec)
{
    if (!ec)
        return;
    for (unsigned b = 0; b < EC_BUCKETS; b++) {
        struct ec_tables *t = ec->bucket[b];
        while (t) {
            struct ec_tables *next = t->next;
            free(t);
            t = next;
        }
    }
    pthread_mutex_destroy(&ec->lock);
    free(ec->matrix);
    free(ec->enc_tbls);
    free(ec);
}

unsigned bfs_ec_k(const struct bfs_ec *ec)
{
    return ec->k;
}

unsigned bfs_ec_m(const struct bfs_ec *ec)
{
    return ec->m;
}

/* ---- decode tables ---- */

static unsigned bucket_of(uint32_t src, uint32_t tgt)
{
    uint64_t h = ((uint64_t)src << 32 | tgt) * 0x9e3779b97f4a7c15ull;
    return (unsigned)(h >> 57) % EC_BUCKETS;
}

/* Tables for "targets = T x sources", freshly allocated; NULL if out of
 * memory (the submatrix is always invertible: see ec-codec.h). */
static struct ec_tables *tables_build(const struct bfs_ec *ec, uint32_t src, uint32_t tgt)
{
    unsigned k = ec->k, rows = (unsigned)__builtin_popcount(tgt);
    uint8_t b[BFS_EC_MAX_FRAGS * BFS_EC_MAX_FRAGS], inv[BFS_EC_MAX_FRAGS * BFS_EC_MAX_FRAGS];
    uint8_t coef[BFS_EC_MAX_FRAGS * BFS_EC_MAX_FRAGS];
    struct ec_tables *t = malloc(sizeof(*t) + (size_t)32 * k * rows);
    if (!t)
        return NULL;
    t->src = src;
    t->tgt = tgt;
    t->rows = rows;
    unsigned r = 0;
    for (unsigned i = 0; i < ec->n; i++)
        if (src >> i & 1)
            memcpy(b + (size_t)k * r++, ec->matrix + (size_t)k * i, k);
    if (gf_invert_matrix(b, inv, (int)k) != 0) { /* cannot happen with a Cauchy matrix */
        free(t);
        return NULL;
    }
    r = 0;
    for (unsigned i = 0; i < ec->n; i++) {
        if (!(tgt >> i & 1))
            continue;
        uint8_t *row = coef + (size_t)k * r++;
        if (i < k) {
            memcpy(row, inv + (size_t)k * i, k);
            continue;
        }
        const uint8_t *mrow = ec->matrix + (size_t)k * i;
        for (unsigned j = 0; j < k; j++) {
            uint8_t s = 0;
            for (unsigned l = 0; l < k; l++)
                s ^= gf_mul(mrow[l], inv[(size_t)k * l + j]);
            row[j] = s;
        }
    }
    ec_init_tables((int)k, (int)rows, coef, t->tbls);
    return t;
}

static struct ec_tables *cache_find(struct bfs_ec *ec, uint32_t src, uint32_t tgt)
{
    for (struct ec_tables *t = ec->bucket[bucket_of(src, tgt)]; t; t = t->next)
        if (t->src == src && t->tgt == tgt)
            return t;
    return NULL;
}

/*
 * Tables for (src, tgt): from the cache, or built and cached. *owned is set
 * when the cache was full and the caller must free the result. NULL: ENOMEM.
 */
static struct ec_tables *tables_get(const struct bfs_ec *cec, uint32_t src, uint32_t tgt,
                                    int *owned)
{
    struct bfs_ec *ec = (struct bfs_ec *)cec; /* only the cache changes, under the lock */
    *owned = 0;
    pthread_mutex_lock(&ec->lock);
    struct ec_tables *t = cache_find(ec, src, tgt);
    pthread_mutex_unlock(&ec->lock);
    if (t)
        return t;
    struct ec_tables *fresh = tables_build(ec, src, tgt); /* outside the lock: O(k^3) */
    if (!fresh)
        return NULL;
    size_t size = sizeof(*fresh) + (size_t)32 * ec->k * fresh->rows;
    pthread_mutex_lock(&ec->lock);
    t = cache_find(ec, src, tgt); /* another thread may have won the race */
    if (!t && ec->cache_bytes + size <= EC_CACHE_MAX) {
        unsigned b = bucket_of(src, tgt);
        fresh->next = ec->bucket[b];
        ec->bucket[b] = fresh;
        ec->cache_bytes += size;
        t = fresh;
        fresh = NULL;
    }
    pthread_mutex_unlock(&ec->lock);
    if (!t) {
        *owned = 1;
        return fresh;
    }
    free(fresh);
    return t;
}

/* ---- running the product ---- */

/* dst[r] = T x src[j] over len bytes (ec_encode_data takes an int length). */
static void code(const struct bfs_ec *ec, uint8_t *tbls, unsigned rows, uint8_t **src,
                 uint8_t **dst, size_t len)
{
    if (len <= EC_MAX_RUN) {
        ec_encode_data((int)len, (int)ec->k, (int)rows, tbls, src, dst);
        return;
    }
    uint8_t *s_ptr[BFS_EC_MAX_FRAGS], *d_ptr[BFS_EC_MAX_FRAGS];
    for (size_t off = 0; off < len; off += EC_MAX_RUN) {
        size_t n = len - off < EC_MAX_RUN ? len - off : EC_MAX_RUN;
        for (unsigned j = 0; j < ec->k; j++)
            s_ptr[j] = src[j] + off;
        for (unsigned r = 0; r < rows; r++)
            d_ptr[r] = dst[r] + off;
        ec_encode_data((int)n, (int)ec->k, (int)rows, tbls, s_ptr, d_ptr);
    }
}

/* nstripes * per_stripe without overflow; 0 for "nothing to do" is fine. */
static int sizes_ok(const struct bfs_ec *ec, size_t nstripes, size_t chunk)
{
    if (chunk == 0 || chunk > SIZE_MAX / ec->k)
        return 0;
    return nstripes <= SIZE_MAX / (chunk * ec->k);
}

/* Mask of present fragments, or -EIO with fewer than k. */
static int present_mask(const struct bfs_ec *ec, const uint8_t *const *frags, uint32_t *mask)
{
    uint32_t p = 0;
    for (unsigned i = 0; i < ec->n; i++)
        if (frags[i])
            p |= 1u << i;
    *mask = p;
    return (unsigned)__builtin_popcount(p) >= ec->k ? 0 : -EIO;
}

/* The first k present fragments: every present data fragment, then the
 * lowest parity ones. */
static uint32_t pick_sources(const struct bfs_ec *ec, uint32_t present)
{
    uint32_t src = 0;
    for (unsigned i = 0, got = 0; i < ec->n && got < ec->k; i++)
        if (present >> i & 1) {
            src |= 1u << i;
            got++;
        }
    return src;
}

/* ---- encode ---- */

static void copy_out(const struct bfs_ec *ec, const uint8_t *data, size_t s0, size_t ns,
                     size_t chunk, uint8_t *const *frags)
{
    for (size_t s = s0; s < s0 + ns; s++)
        for (unsigned i = 0; i < ec->k; i++)
            if (frags[i])
                memcpy(frags[i] + s * chunk, data + (s * ec->k + i) * chunk, chunk);
}

int bfs_ec_encode_stripes(const struct bfs_ec *ec, const uint8_t *data, size_t nstripes,
                          size_t chunk, uint8_t *const *frags)
{
    if (!ec || !frags || !sizes_ok(ec, nstripes, chunk) || (!data && nstripes))
        return -EINVAL;
    if (nstripes == 0)
        return 0;
    unsigned k = ec->k, rows = 0;
    uint32_t tgt = 0;
    int all_data = 1;
    uint8_t *src[BFS_EC_MAX_FRAGS], *dst[BFS_EC_MAX_FRAGS];
    for (unsigned i = 0; i < k; i++)
        all_data &= frags[i] != NULL;
    for (unsigned i = k; i < ec->n; i++)
        if (frags[i]) {
            tgt |= 1u << i;
            dst[rows++] = frags[i];
        }
    if (rows == 0) {
        copy_out(ec, data, 0, nstripes, chunk, frags);
        return 0;
    }
    int owned = 0;
    struct ec_tables *t = NULL;
    uint8_t *tbls = ec->enc_tbls;
    if (rows < ec->m) { /* only some parity wanted: tables of those rows */
        t = tables_get(ec, (1u << k) - 1, tgt, &owned);
        if (!t)
            return -ENOMEM;
        tbls = t->tbls;
    }
    if (chunk < EC_SMALL_CHUNK && all_data) {
        /* copy the data fragments out, then code them in one long run */
        copy_out(ec, data, 0, nstripes, chunk, frags);
        for (unsigned j = 0; j < k; j++)
            src[j] = frags[j];
        code(ec, tbls, rows, src, dst, nstripes * chunk);
    } else {
        /* stripe by stripe from the file data; each stripe's data fragments
         * are copied out right after coding, while they are in the cache */
        uint8_t *sdst[BFS_EC_MAX_FRAGS];
        for (size_t s = 0; s < nstripes; s++) {
            for (unsigned j = 0; j < k; j++)
                src[j] = (uint8_t *)data + (s * k + j) * chunk;
            for (unsigned r = 0; r < rows; r++)
                sdst[r] = dst[r] + s * chunk;
            code(ec, tbls, rows, src, sdst, chunk);
            copy_out(ec, data, s, 1, chunk, frags);
        }
    }
    if (owned)
        free(t);
    return 0;
}

/* ---- decode ---- */

static void copy_in(const struct bfs_ec *ec, const uint8_t *const *frags, size_t s0, size_t ns,
                    size_t chunk, uint8_t *data)
{
    for (size_t s = s0; s < s0 + ns; s++)
        for (unsigned i = 0; i < ec->k; i++)
            if (frags[i])
                memcpy(data + (s * ec->k + i) * chunk, frags[i] + s * chunk, chunk);
}

int bfs_ec_decode_stripes(const struct bfs_ec *ec, const uint8_t *const *frags,
                          size_t nstripes, size_t chunk, uint8_t *data)
{
    if (!ec || !frags || !sizes_ok(ec, nstripes, chunk) || (!data && nstripes))
        return -EINVAL;
    uint32_t present;
    int rc = present_mask(ec, frags, &present);
    if (rc < 0)
        return rc;
    if (nstripes == 0)
        return 0;
    unsigned k = ec->k, rows = 0;
    uint32_t missing = ((1u << k) - 1) & ~present;
    if (!missing) {
        copy_in(ec, frags, 0, nstripes, chunk, data);
        return 0;
    }
    uint32_t src = pick_sources(ec, present);
    int owned;
    struct ec_tables *t = tables_get(ec, src, missing, &owned);
    if (!t)
        return -ENOMEM;
    const uint8_t *sp[BFS_EC_MAX_FRAGS];
    unsigned lost[BFS_EC_MAX_FRAGS], j = 0;
    for (unsigned i = 0; i < ec->n; i++)
        if (src >> i & 1)
            sp[j++] = frags[i];
    for (unsigned i = 0; i < k; i++)
        if (missing >> i & 1)
            lost[rows++] = i;
    /* stripe by stripe, the present data chunks copied right after their
     * stripe is decoded, while the sources are in the cache */
    uint8_t *ssp[BFS_EC_MAX_FRAGS], *sdp[BFS_EC_MAX_FRAGS];
    for (size_t s = 0; s < nstripes; s++) {
        for (j = 0; j < k; j++)
            ssp[j] = (uint8_t *)sp[j] + s * chunk;
        for (unsigned r = 0; r < rows; r++)
            sdp[r] = data + (s * k + lost[r]) * chunk;
        code(ec, t->tbls, rows, ssp, sdp, chunk);
        copy_in(ec, frags, s, 1, chunk, data);
    }
    if (owned)
        free(t);
    return 0;
}

/* ---- rebuild (heal) ---- */

int bfs_ec_rebuild_stripes(const struct bfs_ec *ec, const uint8_t *const *frags,
                           size_t nstripes, size_t chunk, const unsigned *want, unsigned nwant,
                           uint8_t *const *out)
{
    if (!ec || !frags || !sizes_ok(ec, nstripes, chunk) || (nwant && (!want || !out)))
        return -EINVAL;
    uint32_t wanted = 0;
    for (unsigned w = 0; w < nwant; w++) {
        if (want[w] >= ec->n || (wanted >> want[w] & 1) || !out[w])
            return -EINVAL;
        wanted |= 1u << want[w];
    }
    uint32_t present;
    int rc = present_mask(ec, frags, &present);
    if (rc < 0)
        return rc;
    if (nstripes == 0 || nwant == 0)
        return 0;
    size_t len = nstripes * chunk;
    uint32_t tgt = wanted & ~present;
    for (unsigned w = 0; w < nwant; w++)
        if (present >> want[w] & 1)
            memcpy(out[w], frags[want[w]], len);
    if (!tgt)
        return 0;
    uint32_t src = pick_sources(ec, present);
    int owned;
    struct ec_tables *t = tables_get(ec, src, tgt, &owned);
    if (!t)
        return -ENOMEM;
    uint8_t *sp[BFS_EC_MAX_FRAGS], *dp[BFS_EC_MAX_FRAGS];
    unsigned j = 0, rows = 0;
    for (unsigned i = 0; i < ec->n; i++) {
        if (src >> i & 1)
            sp[j++] = (uint8_t *)frags[i];
        if (tgt >> i & 1)
            for (unsigned w = 0; w < nwant; w++)
                if (want[w] == i)
                    dp[rows++] = out[w];
    }
    code(ec, t->tbls, rows, sp, dp, len); /* fragments are contiguous: one long run */
    if (owned)
        free(t);
    return 0;
}
