/*
 * dht-layout.h — the placement arithmetic of cluster/distribute, with no
 * dependency on the translator runtime (plain C and libc), so that the unit
 * test and management can compile dht-layout.c on its own:
 *
 *   the hash of (parent GFID, name), the volume-wide table of 2^16 buckets
 *   that maps a hash to a subvolume, the canonical table for N subvolumes,
 *   adding and removing a subvolume, the table's text form (volfile option),
 *   and the readdir offset encoding (subvolume index in the high bits).
 *
 * The definitions are in docs/design/distribute.md; the unit test pins them
 * with fixed vectors. A table is a value: malloc'd by whoever makes it,
 * freed with dht_table_free().
 */
#ifndef BFS_XL_DHT_LAYOUT_H
#define BFS_XL_DHT_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define DHT_BUCKET_BITS 16
#define DHT_BUCKETS (1u << DHT_BUCKET_BITS)
#define DHT_MAX_SUBVOLS 1024 /* 10 bits of d_off */

/* 64-bit FNV-1a over the 16 GFID bytes then the name, then fmix64. */
uint64_t dht_hash(const uint8_t pargfid[16], const char *name);
static inline uint32_t dht_bucket_of(uint64_t hash)
{
    return (uint32_t)(hash >> (64 - DHT_BUCKET_BITS));
}

struct dht_table {
    int nsubvols;                /* indices in map are < nsubvols */
    uint16_t map[DHT_BUCKETS];   /* bucket -> subvolume index */
};

static inline int dht_table_subvol(const struct dht_table *t, const uint8_t pargfid[16],
                                   const char *name)
{
    return t->map[dht_bucket_of(dht_hash(pargfid, name))];
}

/* canonical(n): see the design note. NULL on ENOMEM or n out of range. */
struct dht_table *dht_table_canonical(int n);
void dht_table_free(struct dht_table *t);
/* Adds subvolume t->nsubvols (one growth step). 0, or -EINVAL when full. */
int dht_table_add(struct dht_table *t);
/* Removes subvolume x; its buckets go to the others below their new
 * target, and indices above x shift down. 0, or -EINVAL. */
int dht_table_remove(struct dht_table *t, int x);
/*
 * Re-targets t to n subvolumes (n >= t->nsubvols - only growth of the
 * index range; a subvolume to empty gets weight 0) with bucket counts
 * proportional to weights[0..n-1] (largest remainder, ties to the lower
 * index). Subvolumes above target give their highest-numbered buckets to
 * those below target, lowest index first: only the surplus moves. With
 * equal weights and n = t->nsubvols + 1 it equals dht_table_add. Returns
 * the number of buckets moved, or -EINVAL (no positive weight, n out of
 * range) / -ENOMEM.
 */
long dht_table_retarget(struct dht_table *t, int n, const uint64_t *weights);
/* Drops subvolume x, which must own no bucket: indices above x shift
 * down. 0 or -EINVAL. */
int dht_table_drop_empty(struct dht_table *t, int x);
/* Buckets per subvolume into counts[t->nsubvols]. */
void dht_table_counts(const struct dht_table *t, uint32_t *counts);

/*
 * Text form, the value of the options `layout` and `layout-previous`:
 *   ""  or "canonical"  canonical(nsubvols)
 *   "canonical:K"       canonical(K), 1 <= K <= nsubvols
 *   "S*C,S*C,..."       runs in bucket order: C buckets to subvolume S,
 *                       counts summing to 2^16, every S < nsubvols
 * Parse: 0 and *out, or -EINVAL (why[] says what is wrong) / -ENOMEM.
 */
int dht_table_parse(const char *text, int nsubvols, struct dht_table **out, char *why,
                    size_t whylen);
/* Explicit runs form of t (malloc'd string), NULL on ENOMEM. */
char *dht_table_format(const struct dht_table *t);

/*
 * readdir offsets: bit 63 clear, bits 62..53 the subvolume, bit 52 the
 * "shifted" flag, bits 51..0 the subvolume's cookie (exact when < 2^52,
 * else its top 52 of 63 bits).
 */
#define DHT_DOFF_SUBVOL_SHIFT 53
#define DHT_DOFF_FLAG (1ull << 52)
#define DHT_DOFF_LOW_MASK (DHT_DOFF_FLAG - 1)
#define DHT_DOFF_LOSSY_SHIFT 11

uint64_t dht_doff_encode(int subvol, uint64_t cookie);
void dht_doff_decode(uint64_t doff, int *subvol, uint64_t *cookie);

#endif
