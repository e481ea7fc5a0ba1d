/*
 * replicate-decide.h — the pure decisions of cluster/replicate: which
 * copies are good (sources), which are behind (sinks), split-brain, the
 * favorite-child policies, which child a read goes to, how the answers of a
 * lookup combine. No runtime, no I/O: everything is a function of what the
 * children answered, so tests/unit/test_afr_decide.c includes the .c file
 * and checks them directly.
 *
 * The pending matrix (docs/design/replicate.md): pending[i][j][t] > 0 means
 * child i blames child j for changes of type t (data, metadata, entry) it
 * may have missed; dirty[i][t] != 0 means a change of type t on i was never
 * confirmed; pending[i][i][t] > 0 (a child "blaming itself") means i's copy
 * holds a change of type t that did not reach a quorum and was never
 * acknowledged: it is never a source while a copy without the mark is
 * here or may be away. A child that did not answer has no row and is
 * never counted.
 */
#ifndef BFS_XL_REPLICATE_DECIDE_H
#define BFS_XL_REPLICATE_DECIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/types.h"

#define AFR_MAX 16
#define AFR_ROW_LEN 24 /* three big-endian int64: data, metadata, entry */

enum { AFR_DATA = 0, AFR_METADATA = 1, AFR_ENTRY = 2, AFR_NTYPES = 3 };

enum afr_fav {
    AFR_FAV_NONE = 0,
    AFR_FAV_SIZE,
    AFR_FAV_MTIME,
    AFR_FAV_CTIME,
    AFR_FAV_MAJORITY,
};

enum afr_read_policy { AFR_READ_FIRST_UP = 0, AFR_READ_GFID_HASH, AFR_READ_LEAST_LOADED };

/* What the children said about one inode. */
struct afr_state {
    int n;                                  /* children */
    int arbiter;                            /* index, or -1 */
    uint32_t valid;                         /* children that answered with a row */
    int64_t pending[AFR_MAX][AFR_MAX][AFR_NTYPES];
    int64_t dirty[AFR_MAX][AFR_NTYPES];
    struct bfs_iatt attr[AFR_MAX];          /* for policies and mismatch checks */
};

struct afr_decision {
    uint32_t readable;   /* may serve reads now (before any heal) */
    uint32_t sources;    /* a heal copies from one of these ... */
    uint32_t sinks;      /* ... to these */
    bool split_brain;    /* no source, and the policy did not pick one */
    bool unreachable;    /* no source among the copies that answered, but the
                          * good copy may be one that did not (arbiter volumes:
                          * the arbiter blames every data copy here; or the
                          * copies here hold an unacknowledged change): wait
                          * for it, this is not a split-brain */
    bool by_policy;      /* the favorite-child policy picked the source */
    bool needs_heal;     /* sinks, dirty marks, or a split-brain */
};

/*
 * Decides type t (AFR_DATA, ...) of one inode. policy: enum afr_fav, used
 * only to resolve a split-brain (not for entries). force >= 0 makes that
 * child the only source (manual resolution). For data, the arbiter is never
 * a source or a sink; its blame counts and breaks a tie between data
 * children.
 */
void afr_decide(const struct afr_state *s, int t, int policy, int force,
                struct afr_decision *d);

/* After a pre-op: -ENOTCONN when every data child of `set` (metadata: every
 * child) is blamed by a child of `set` — the change would reach only stale
 * copies (with an arbiter: the second write of a split-brain) — or when
 * the ones not blamed all hold an unacknowledged change (pending[i][i])
 * while some copy is not in `set`. Else 0. */
int afr_check_stale(const struct afr_state *s, uint32_t set, int t);

/* Does every data child of `set` blame, and is it blamed by, another child
 * of `set`? (a split-brain among them, rather than a good copy that is
 * simply not there) */
bool afr_mutual_blame(const struct afr_state *s, uint32_t set, int t);

/* Rows on the wire: 24 bytes, big-endian int64 x 3. Shorter values are
 * read as far as they go (missing counters are 0). */
void afr_row_parse(const void *val, size_t len, int64_t out[AFR_NTYPES]);
void afr_row_encode(const int64_t in[AFR_NTYPES], uint8_t out[AFR_ROW_LEN]);

/* One child of `candidates` for a read (-1 if none). load[i]: calls in
 * flight (least-loaded). */
int afr_pick_read(uint32_t candidates, int policy, const struct bfs_gfid *g,
                  const uint64_t *load, int n);

/* The combined answer of a lookup. */
struct afr_lookup_out {
    int rc;                        /* for the caller */
    int child;                     /* whose attributes to answer with, -1 */
    uint32_t readable[AFR_NTYPES]; /* per type; 0 for types that do not apply */
    bool split[AFR_NTYPES];
    uint32_t heal;                 /* bit per type needing heal on this inode */
    bool entry_mismatch;           /* present on some children only: heal the parent */
    bool gfid_mismatch;            /* different GFIDs or types: EIO until the parent heals */
};

/*
 * rc[i]: each child's answer (children not asked: anything, with `asked`
 * clear). s->valid must be the asked children that succeeded, with their
 * rows and attributes. parent_readable: the parent directory's entry
 * sources if known (0 = unknown): a name present only on children that are
 * not among them was removed while they were away, and is ENOENT.
 */
void afr_lookup_combine(const struct afr_state *s, uint32_t asked, const int *rc, int policy,
                        uint32_t parent_readable, struct afr_lookup_out *out);

/* The types that apply to a file type (mode & S_IFMT): bit per type. */
uint32_t afr_types_of(uint32_t mode);

/* Is rc a fault of the child (try another copy) rather than an answer? */
bool afr_child_fault(int rc);

#endif
