/*
 * dht-layout.c — hash, bucket table and readdir offsets of
 * cluster/distribute (see dht-layout.h and docs/design/distribute.md).
 *
 * Pure functions over values: no locks, no runtime, no logging. Tables are
 * malloc'd here and freed by dht_table_free(); the translator keeps them in
 * a refcounted holder of its own (dht.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dht-layout.h"

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

uint64_t dht_hash(const uint8_t pargfid[16], const char *name)
{
    uint64_t h = FNV_OFFSET;
    for (int i = 0; i < 16; i++)
        h = (h ^ pargfid[i]) * FNV_PRIME;
    for (const unsigned char *p = (const unsigned char *)name; p && *p; p++)
        h = (h ^ *p) * FNV_PRIME;
    /* murmur3's fmix64: FNV's high bits are weak, and buckets use them */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

/* ---- tables ---- */

void dht_table_free(struct dht_table *t)
{
    free(t);
}

void dht_table_counts(const struct dht_table *t, uint32_t *counts)
{
    memset(counts, 0, sizeof(*counts) * (size_t)t->nsubvols);
    for (uint32_t b = 0; b < DHT_BUCKETS; b++)
        counts[t->map[b]]++;
}

static uint32_t target_of(int s, int n)
{
    return DHT_BUCKETS / (uint32_t)n + ((uint32_t)s < DHT_BUCKETS % (uint32_t)n ? 1 : 0);
}

int dht_table_add(struct dht_table *t)
{
    int k = t->nsubvols, n = k + 1;
    if (n > DHT_MAX_SUBVOLS)
        return -EINVAL;
    uint32_t *give = calloc((size_t)n, sizeof(*give));
    if (!give)
        return -ENOMEM;
    dht_table_counts(t, give);
    for (int s = 0; s < k; s++) {
        uint32_t want = target_of(s, n);
        give[s] = give[s] > want ? give[s] - want : 0;
    }
    /* every existing subvolume gives its highest-numbered buckets */
    for (uint32_t b = DHT_BUCKETS; b-- > 0;) {
        uint16_t s = t->map[b];
        if (give[s]) {
            give[s]--;
            t->map[b] = (uint16_t)k;
        }
    }
    free(give);
    t->nsubvols = n;
    return 0;
}

int dht_table_remove(struct dht_table *t, int x)
{
    int n = t->nsubvols - 1;
    if (x < 0 || x > n || n < 1)
        return -EINVAL;
    uint32_t *count = calloc((size_t)t->nsubvols, sizeof(*count));
    if (!count)
        return -ENOMEM;
    dht_table_counts(t, count);
    int next = 0; /* lowest old index that may still be below its target */
    for (uint32_t b = 0; b < DHT_BUCKETS; b++) {
        if (t->map[b] != x)
            continue;
        while (next <= n && (next == x || count[next] >= target_of(next - (next > x), n)))
            next++;
        int to = next;
        if (to > n) { /* every one at target (an uneven table): the emptiest */
            to = x == 0 ? 1 : 0;
            for (int s = 0; s <= n; s++)
                if (s != x && count[s] < count[to])
                    to = s;
        }
        t->map[b] = (uint16_t)to;
        count[to]++;
    }
    for (uint32_t b = 0; b < DHT_BUCKETS; b++)
        if (t->map[b] > x)
            t->map[b]--;
    free(count);
    t->nsubvols = n;
    return 0;
}

/* Targets proportional to w (largest remainder, ties to the lower index). */
static int weighted_targets(int n, const uint64_t *w, uint32_t *target)
{
    long double sum = 0;
    for (int s = 0; s < n; s++)
        sum += (long double)w[s];
    if (sum <= 0)
        return -EINVAL;
    uint32_t given = 0;
    long double *rem = calloc((size_t)n, sizeof(*rem));
    if (!rem)
        return -ENOMEM;
    for (int s = 0; s < n; s++) {
        long double exact = (long double)DHT_BUCKETS * (long double)w[s] / sum;
        target[s] = (uint32_t)exact;
        rem[s] = exact - (long double)target[s];
        given += target[s];
    }
    while (given < DHT_BUCKETS) { /* at most n rounds */
        int best = -1;
        for (int s = 0; s < n; s++)
            if (w[s] && (best < 0 || rem[s] > rem[best]))
                best = s;
        target[best]++;
        rem[best] = -1;
        given++;
    }
    free(rem);
    return 0;
}

long dht_table_retarget(struct dht_table *t, int n, const uint64_t *weights)
{
    if (n < t->nsubvols || n < 1 || n > DHT_MAX_SUBVOLS)
        return -EINVAL;
    uint32_t *target = calloc((size_t)n, sizeof(*target));
    uint32_t *count = calloc((size_t)n, sizeof(*count));
    if (!target || !count) {
        free(target);
        free(count);
        return -ENOMEM;
    }
    int rc = weighted_targets(n, weights, target);
    if (rc < 0) {
        free(target);
        free(count);
        return rc;
    }
    t->nsubvols = n;
    dht_table_counts(t, count);
    long moved = 0;
    int next = 0; /* lowest index that may still be below its target */
    for (uint32_t b = DHT_BUCKETS; b-- > 0;) {
        uint16_t s = t->map[b];
        if (count[s] <= target[s])
            continue;
        while (next < n && count[next] >= target[next])
            next++;
        if (next >= n)
            break; /* cannot happen: surplus and deficit are equal */
        count[s]--;
        count[next]++;
        t->map[b] = (uint16_t)next;
        moved++;
    }
    free(target);
    free(count);
    return moved;
}

int dht_table_drop_empty(struct dht_table *t, int x)
{
    if (x < 0 || x >= t->nsubvols || t->nsubvols < 2)
        return -EINVAL;
    for (uint32_t b = 0; b < DHT_BUCKETS; b++)
        if (t->map[b] == x)
            return -EINVAL;
    for (uint32_t b = 0; b < DHT_BUCKETS; b++)
        if (t->map[b] > x)
            t->map[b]--;
    t->nsubvols--;
    return 0;
}

struct dht_table *dht_table_canonical(int n)
{
    if (n < 1 || n > DHT_MAX_SUBVOLS)
        return NULL;
    struct dht_table *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->nsubvols = 1;
    while (t->nsubvols < n) {
        if (dht_table_add(t) < 0) {
            free(t);
            return NULL;
        }
    }
    return t;
}

/* ---- text form ---- */

__attribute__((format(printf, 3, 4))) static int why_set(char *why, size_t len,
                                                        const char *fmt, ...)
{
    if (why && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static int parse_runs(const char *text, struct dht_table *t, char *why, size_t whylen)
{
    uint32_t at = 0;
    const char *p = text;
    while (*p) {
        char *end;
        errno = 0;
        unsigned long s = strtoul(p, &end, 10);
        if (end == p || *end != '*' || errno)
            return why_set(why, whylen, "run %u: want SUBVOL*COUNT", at);
        if (s >= (unsigned long)t->nsubvols)
            return why_set(why, whylen, "subvolume %lu out of range (%d subvolumes)", s,
                           t->nsubvols);
        p = end + 1;
        unsigned long c = strtoul(p, &end, 10);
        if (end == p || errno || c == 0 || c > DHT_BUCKETS - at)
            return why_set(why, whylen, "bad count after bucket %u", at);
        for (unsigned long i = 0; i < c; i++)
            t->map[at++] = (uint16_t)s;
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            return why_set(why, whylen, "unexpected '%c' after bucket %u", *p, at);
    }
    if (at != DHT_BUCKETS)
        return why_set(why, whylen, "runs cover %u buckets, not %u", at, DHT_BUCKETS);
    return 0;
}

int dht_table_parse(const char *text, int nsubvols, struct dht_table **out, char *why,
                    size_t whylen)
{
    *out = NULL;
    if (nsubvols < 1 || nsubvols > DHT_MAX_SUBVOLS)
        return why_set(why, whylen, "%d subvolumes (1..%d)", nsubvols, DHT_MAX_SUBVOLS);
    if (!text || !*text || strcmp(text, "canonical") == 0) {
        *out = dht_table_canonical(nsubvols);
        return *out ? 0 : -ENOMEM;
    }
    if (strncmp(text, "canonical:", 10) == 0) {
        char *end;
        long k = strtol(text + 10, &end, 10);
        if (end == text + 10 || *end || k < 1 || k > nsubvols)
            return why_set(why, whylen, "canonical:K wants 1 <= K <= %d", nsubvols);
        *out = dht_table_canonical((int)k);
        return *out ? 0 : -ENOMEM;
    }
    struct dht_table *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->nsubvols = nsubvols;
    int rc = parse_runs(text, t, why, whylen);
    if (rc < 0) {
        free(t);
        return rc;
    }
    *out = t;
    return 0;
}

char *dht_table_format(const struct dht_table *t)
{
    size_t cap = 256, len = 0;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    s[0] = 0;
    for (uint32_t b = 0; b < DHT_BUCKETS;) {
        uint32_t e = b;
        while (e < DHT_BUCKETS && t->map[e] == t->map[b])
            e++;
        if (cap - len < 32) {
            char *ns = realloc(s, cap * 2);
            if (!ns) {
                free(s);
                return NULL;
            }
            s = ns;
            cap *= 2;
        }
        len += (size_t)snprintf(s + len, cap - len, "%s%u*%u", len ? "," : "", t->map[b],
                                e - b);
        b = e;
    }
    return s;
}

/* ---- readdir offsets ---- */

uint64_t dht_doff_encode(int subvol, uint64_t cookie)
{
    uint64_t hi = (uint64_t)subvol << DHT_DOFF_SUBVOL_SHIFT;
    if (cookie <= DHT_DOFF_LOW_MASK)
        return hi | cookie;
    /* a 63-bit cookie (ext4 hash order): keep its top 52 bits */
    return hi | DHT_DOFF_FLAG | ((cookie >> DHT_DOFF_LOSSY_SHIFT) & DHT_DOFF_LOW_MASK);
}

void dht_doff_decode(uint64_t doff, int *subvol, uint64_t *cookie)
{
    *subvol = (int)((doff >> DHT_DOFF_SUBVOL_SHIFT) & (DHT_MAX_SUBVOLS - 1));
    uint64_t low = doff & DHT_DOFF_LOW_MASK;
    *cookie = (doff & DHT_DOFF_FLAG) ? low << DHT_DOFF_LOSSY_SHIFT : low;
}
