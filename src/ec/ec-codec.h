/*
 * ec-codec.h — Reed-Solomon erasure codec over GF(2^8) (Intel ISA-L) for
 * dispersed volumes.
 *
 * A codec instance describes a k + m code: k data fragments and m
 * redundancy (parity) fragments; any k of the k + m fragments give the data
 * back. The code is systematic: data fragments are the file's bytes
 * unchanged, so a read with every data brick up decodes nothing.
 *
 * Layout. A stripe is k * chunk bytes of file data. Fragment i (0 .. k-1)
 * of a stripe is bytes [i*chunk, (i+1)*chunk) of that stripe; fragments
 * k .. k+m-1 are parity. For nstripes consecutive stripes, the brick of
 * fragment i stores its chunk of stripe s at offset s*chunk of its buffer
 * (and of its fragment file): file offset o lives on brick
 * (o / chunk) % k at fragment offset (o / (k*chunk)) * chunk + o % chunk.
 *
 * Chunk size. Any chunk >= 1 works. ISA-L's SIMD loops take 32 (AVX2) or
 * 64 (AVX-512) bytes at a time and fall back to a byte loop for the tail,
 * so chunks that are multiples of 64 are fastest; per-call overhead makes
 * chunks below ~512 bytes slower (see docs/PERFORMANCE.md, bench/ec-codec).
 * The translator should use a chunk that is a multiple of 512 (disk
 * sector, page-cache friendly fragment offsets), e.g. 512 as GlusterFS does
 * (small read-modify-write windows) or 4096 (higher throughput).
 *
 * Matrix. The encoding matrix is [I_k ; C] with C the m x k Cauchy matrix of
 * gf_gen_cauchy1_matrix (C[i][j] = 1 / ((k+i) xor j) in GF(2^8)). Every
 * square submatrix of a Cauchy matrix is invertible, so every k x k
 * submatrix of [I ; C] is invertible: any k surviving fragments decode, for
 * every k + m <= 256. ISA-L's gf_gen_rs_matrix (Vandermonde rows) lacks
 * that guarantee for larger k and m.
 *
 * Lifetime and threads. bfs_ec_new creates an instance, bfs_ec_free frees
 * it (no call may be running). An instance is immutable after creation
 * except for an internal cache of decode tables (keyed by which fragments
 * are used and which are rebuilt), protected by a mutex; entries live until
 * bfs_ec_free. All calls are safe from many threads at once.
 *
 * Errors are negative errno: -EINVAL for bad arguments, -EIO when fewer
 * than k fragments are present, -ENOMEM.
 */
#ifndef BFS_EC_CODEC_H
#define BFS_EC_CODEC_H

#include <stddef.h>
#include <stdint.h>

#define BFS_EC_MAX_FRAGS 32 /* k + m <= 32 */

struct bfs_ec;

/* 1 <= k, 1 <= m, k + m <= 32 (-EINVAL otherwise); -ENOMEM. */
int bfs_ec_new(unsigned k, unsigned m, struct bfs_ec **out);
void bfs_ec_free(struct bfs_ec *ec);
unsigned bfs_ec_k(const struct bfs_ec *ec);
unsigned bfs_ec_m(const struct bfs_ec *ec);

/*
 * data: nstripes*k*chunk bytes in file order. frags[0 .. k+m-1]: each
 * nstripes*chunk bytes, filled: data fragments copied out, parity computed.
 * A NULL frags[i] is skipped (not wanted). Buffers must not overlap.
 */
int bfs_ec_encode_stripes(const struct bfs_ec *ec, const uint8_t *data, size_t nstripes,
                          size_t chunk, uint8_t *const *frags);

/*
 * frags[i] is NULL when fragment i is missing; at least k must be present
 * (-EIO otherwise). Writes nstripes*k*chunk bytes of file data to data.
 * With every data fragment present it only copies.
 */
int bfs_ec_decode_stripes(const struct bfs_ec *ec, const uint8_t *const *frags,
                          size_t nstripes, size_t chunk, uint8_t *data);

/*
 * Heal: rebuild the fragments listed in want[0 .. nwant-1] (data or parity,
 * no duplicates) into out[0 .. nwant-1] (nstripes*chunk bytes each) from the
 * present fragments (frags[i] NULL when missing; at least k present, -EIO
 * otherwise). A wanted fragment that is present is copied.
 */
int bfs_ec_rebuild_stripes(const struct bfs_ec *ec, const uint8_t *const *frags,
                           size_t nstripes, size_t chunk, const unsigned *want, unsigned nwant,
                           uint8_t *const *out);

#endif
