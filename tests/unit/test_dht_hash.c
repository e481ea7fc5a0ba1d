/*
 * test_dht_hash.c — cluster/distribute's placement arithmetic
 * (src/xlators/cluster/distribute/dht-layout.c, compiled in here: it needs
 * nothing but libc).
 *
 * Fixed vectors pin the on-disk format: the hash of known (parent GFID,
 * name) pairs and the canonical tables for 1, 2, 3 and 6 subvolumes were
 * computed by an independent Python implementation of the definitions in
 * docs/design/distribute.md. If one of them changes, existing volumes would
 * look for their files on the wrong bricks: that is a format change, not a
 * test to update.
 *
 * Also: balance of canonical tables, growth moving exactly one share,
 * removal moving only the removed subvolume's buckets, the text form
 * (round trip and refusals), readdir offsets (exact, lossy, bit 63), and
 * the spread of repeating names across directories.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/tap.h"
#include "xlators/cluster/distribute/dht-layout.h"

static const uint8_t ROOT[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t SEQ[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

static void test_vectors(void)
{
    static const struct {
        const uint8_t *g;
        const char *name;
        uint64_t hash;
        uint32_t bucket;
    } v[] = {
        {ROOT, "", 0xb55b74000d560088ull, 46427},
        {ROOT, "a", 0x470d7970501aba2bull, 18189},
        {ROOT, "hello.txt", 0xcc99c37b671d5cbaull, 52377},
        {SEQ, "Makefile", 0x61eabb8ac302d83cull, 25066},
        {SEQ, "0001.jpg", 0x9535cc0db991e2b7ull, 38197},
        {ROOT, "Makefile", 0x3cac772278a29932ull, 15532},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        uint64_t h = dht_hash(v[i].g, v[i].name);
        ok(h == v[i].hash, "hash('%s') = %016llx", v[i].name, (unsigned long long)h);
        is_int(dht_bucket_of(h), v[i].bucket, "bucket of '%s'", v[i].name);
    }
    ok(dht_hash(ROOT, "Makefile") != dht_hash(SEQ, "Makefile"),
       "the parent GFID is part of the hash");
}

static void test_canonical_vectors(void)
{
    static const struct {
        int n;
        const char *runs;
    } v[] = {
        {1, "0*65536"},
        {2, "0*32768,1*32768"},
        {3, "0*21846,2*10922,1*21845,2*10923"},
        {6, "0*10923,5*2185,4*3276,3*5462,2*10922,1*10923,5*2184,4*3277,3*5461,2*1,5*2184,"
            "4*3277,5*2184,4*1092,5*2185"},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        struct dht_table *t = dht_table_canonical(v[i].n);
        char *s = t ? dht_table_format(t) : NULL;
        is_str(s, v[i].runs, "canonical(%d) as runs", v[i].n);
        free(s);
        dht_table_free(t);
    }
}

static bool balanced(const struct dht_table *t)
{
    uint32_t c[DHT_MAX_SUBVOLS];
    dht_table_counts(t, c);
    uint32_t lo = DHT_BUCKETS / (uint32_t)t->nsubvols, hi = lo + 1;
    for (int s = 0; s < t->nsubvols; s++)
        if (c[s] < lo || c[s] > hi)
            return false;
    return true;
}

static void test_growth(void)
{
    bool all_balanced = true, all_minimal = true, all_to_new = true;
    struct dht_table *t = dht_table_canonical(1), *prev = malloc(sizeof(*prev));
    for (int n = 2; n <= 130 && t && prev; n++) {
        *prev = *t;
        if (dht_table_add(t) < 0) {
            all_balanced = false;
            break;
        }
        uint32_t moved = 0, share = DHT_BUCKETS / (uint32_t)n;
        for (uint32_t b = 0; b < DHT_BUCKETS; b++) {
            if (t->map[b] != prev->map[b]) {
                moved++;
                all_to_new = all_to_new && t->map[b] == n - 1;
            }
        }
        all_minimal = all_minimal && (moved == share || moved == share + 1);
        all_balanced = all_balanced && balanced(t);
    }
    ok(all_balanced, "canonical(2..130): every subvolume has floor or ceil of 65536/N buckets");
    ok(all_minimal, "adding a subvolume moves exactly one share (about 1/(N+1))");
    ok(all_to_new, "and every moved bucket goes to the new subvolume");
    dht_table_free(t);
    free(prev);
    struct dht_table *big = dht_table_canonical(1000);
    ok(big && balanced(big), "canonical(1000) is balanced too");
    dht_table_free(big);
    ok(dht_table_canonical(0) == NULL && dht_table_canonical(DHT_MAX_SUBVOLS + 1) == NULL,
       "0 or more than %d subvolumes: refused", DHT_MAX_SUBVOLS);
}

static void test_remove(void)
{
    for (int x = 0; x < 6; x += 5) {
        struct dht_table *t = dht_table_canonical(6), *old = dht_table_canonical(6);
        is_int(dht_table_remove(t, x), 0, "remove subvolume %d of 6", x);
        bool only_x = true;
        for (uint32_t b = 0; b < DHT_BUCKETS; b++) {
            int was = old->map[b];
            if (was != x) /* untouched, renumbered */
                only_x = only_x && t->map[b] == was - (was > x);
        }
        ok(only_x, "only the removed subvolume's buckets moved");
        ok(t->nsubvols == 5 && balanced(t), "the 5 left are balanced");
        dht_table_free(t);
        dht_table_free(old);
    }
    struct dht_table *one = dht_table_canonical(1);
    is_int(dht_table_remove(one, 0), -EINVAL, "the last subvolume cannot be removed");
    dht_table_free(one);
}

/* dht_table_retarget: equal weights = canonical growth; weights give
 * proportional counts; a weight of 0 drains; only the surplus moves. */
static void test_retarget(void)
{
    uint64_t w[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    bool same = true;
    for (int n = 2; n <= 8; n++) {
        struct dht_table *a = dht_table_canonical(n - 1), *c = dht_table_canonical(n);
        long moved = dht_table_retarget(a, n, w);
        same = same && moved > 0 && memcmp(a->map, c->map, sizeof(a->map)) == 0;
        dht_table_free(a);
        dht_table_free(c);
    }
    ok(same, "retarget with equal weights and one more subvolume = canonical growth (2..8)");

    struct dht_table *t = dht_table_canonical(3), *old = dht_table_canonical(3);
    uint64_t wt[4] = {100, 100, 100, 300}; /* a new brick three times as big */
    long moved = dht_table_retarget(t, 4, wt);
    uint32_t cnt[4];
    dht_table_counts(t, cnt);
    is_int((int)cnt[3], 32768, "a subvolume with half the weight gets half the buckets");
    ok(cnt[0] + cnt[1] + cnt[2] == 32768 && cnt[0] >= 10922 && cnt[2] <= 10923,
       "the others share the rest evenly (%u %u %u)", cnt[0], cnt[1], cnt[2]);
    is_int((int)moved, 32768, "exactly the new subvolume's buckets moved");
    bool to_new = true;
    for (uint32_t b = 0; b < DHT_BUCKETS; b++)
        if (t->map[b] != old->map[b])
            to_new = to_new && t->map[b] == 3;
    ok(to_new, "every moved bucket went to the new subvolume");

    uint64_t drain[4] = {100, 0, 100, 300};
    struct dht_table *before = malloc(sizeof(*before));
    *before = *t;
    uint32_t before_1 = cnt[1];
    moved = dht_table_retarget(t, 4, drain);
    dht_table_counts(t, cnt);
    is_int((int)cnt[1], 0, "a weight of 0 drains the subvolume");
    bool only_from_1 = true;
    for (uint32_t b = 0; b < DHT_BUCKETS; b++)
        if (t->map[b] != before->map[b])
            only_from_1 = only_from_1 && before->map[b] == 1;
    ok(only_from_1 && moved == (long)before_1, "only the drained subvolume's %ld buckets moved",
       moved);
    is_int(dht_table_drop_empty(t, 1), 0, "the drained subvolume is dropped");
    ok(t->nsubvols == 3, "3 subvolumes left");
    is_int(dht_table_drop_empty(t, 0), -EINVAL, "a subvolume owning buckets cannot be dropped");
    uint64_t zero[3] = {0, 0, 0};
    is_int((int)dht_table_retarget(t, 3, zero), -EINVAL, "all weights 0: refused");
    free(before);
    dht_table_free(t);
    dht_table_free(old);
}

static void test_text(void)
{
    char why[128];
    struct dht_table *t = NULL, *c3 = dht_table_canonical(3);
    is_int(dht_table_parse(NULL, 3, &t, why, sizeof(why)), 0, "no text: canonical");
    ok(t && memcmp(t->map, c3->map, sizeof(t->map)) == 0, "equals canonical(3)");
    dht_table_free(t);
    is_int(dht_table_parse("canonical:2", 3, &t, why, sizeof(why)), 0, "canonical:2 of 3");
    ok(t && t->map[0] == 0 && t->map[DHT_BUCKETS - 1] == 1, "the first two subvolumes only");
    dht_table_free(t);
    char *s = dht_table_format(c3);
    is_int(dht_table_parse(s, 3, &t, why, sizeof(why)), 0, "runs parse");
    ok(t && memcmp(t->map, c3->map, sizeof(t->map)) == 0, "format then parse round-trips");
    dht_table_free(t);
    free(s);
    static const char *const bad[] = {"0*65535", "0*65537", "3*65536", "0*100,x", "0-65536",
                                      "canonical:4", "canonical:0", "0*0,0*65536"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = 0;
        int rc = dht_table_parse(bad[i], 3, &t, why, sizeof(why));
        ok(rc == -EINVAL && t == NULL && why[0], "'%s' refused: %s", bad[i], why);
    }
    dht_table_free(c3);
}

static void test_doff(void)
{
    int s;
    uint64_t c;
    is_int(dht_doff_encode(0, 0), 0, "subvolume 0 from its start is offset 0");
    dht_doff_decode(dht_doff_encode(7, 12345), &s, &c);
    ok(s == 7 && c == 12345, "small cookies round-trip exactly");
    dht_doff_decode(dht_doff_encode(1023, DHT_DOFF_LOW_MASK), &s, &c);
    ok(s == 1023 && c == DHT_DOFF_LOW_MASK, "the largest exact cookie, the largest subvolume");
    uint64_t big = 0x7fffffffdeadbeefull; /* ext4: 63-bit hash cookies */
    uint64_t e = dht_doff_encode(1023, big);
    ok(!(e >> 63), "bit 63 stays clear (a positive off_t)");
    dht_doff_decode(e, &s, &c);
    ok(s == 1023 && c == (big & ~0x7ffull), "63-bit cookies keep their top 52 bits");
    bool ordered = true;
    for (uint64_t a = 1; a < (1ull << 62); a = a * 3 + 1)
        ordered = ordered && dht_doff_encode(2, a) < dht_doff_encode(2, a * 3 + 1);
    ok(ordered, "within a subvolume, the encoding keeps the cookies' order");
    ok(dht_doff_encode(1, ~0ull >> 1) < dht_doff_encode(2, 0),
       "every offset of subvolume 1 sorts before subvolume 2's start");
}

static void test_spread(void)
{
    /* 30 directories x 100 identical names over 6 subvolumes */
    struct dht_table *t = dht_table_canonical(6);
    uint32_t count[6] = {0};
    uint8_t g[16];
    for (int d = 0; d < 30; d++) {
        for (int i = 0; i < 16; i++)
            g[i] = (uint8_t)(d * 37 + i * 101 + 7); /* distinct parent GFIDs */
        for (int i = 0; i < 100; i++) {
            char name[32];
            snprintf(name, sizeof(name), "file-%03d.txt", i);
            count[dht_table_subvol(t, g, name)]++;
        }
    }
    bool within = true;
    for (int s = 0; s < 6; s++)
        within = within && count[s] >= 375 && count[s] <= 625;
    ok(within, "same names in 30 directories: every subvolume within 25%% of 500 "
       "(%u %u %u %u %u %u)", count[0], count[1], count[2], count[3], count[4], count[5]);
    dht_table_free(t);
}

int main(void)
{
    plan_lazy();
    test_vectors();
    test_canonical_vectors();
    test_growth();
    test_remove();
    test_retarget();
    test_text();
    test_doff();
    test_spread();
    return done_testing();
}
