/*
 * replicate-decide.c — pure decision functions of cluster/replicate (see
 * replicate-decide.h; the rules are in docs/design/replicate.md, "On-brick
 * state" and "Heal"). No state, no I/O, no allocation.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "replicate-decide.h"

#define BIT(i) (1u << (i))

static int count(uint32_t m)
{
    return __builtin_popcount(m);
}

static int first(uint32_t m)
{
    return m ? __builtin_ctz(m) : -1;
}

/* ---- rows ---- */

void afr_row_parse(const void *val, size_t len, int64_t out[AFR_NTYPES])
{
    const uint8_t *p = val;
    for (int t = 0; t < AFR_NTYPES; t++) {
        uint64_t be = 0;
        out[t] = 0;
        if (p && len >= (size_t)(t + 1) * 8) {
            memcpy(&be, p + t * 8, 8);
            out[t] = (int64_t)be64toh(be);
        }
    }
}

void afr_row_encode(const int64_t in[AFR_NTYPES], uint8_t out[AFR_ROW_LEN])
{
    for (int t = 0; t < AFR_NTYPES; t++) {
        uint64_t be = htobe64((uint64_t)in[t]);
        memcpy(out + t * 8, &be, 8);
    }
}

/* ---- blame ---- */

/* Children of s->valid blamed by another child of `by` (self-blame is not
 * blame: it reads as a dirty mark). */
static uint32_t accused_by(const struct afr_state *s, int t, uint32_t by)
{
    uint32_t acc = 0;
    for (int i = 0; i < s->n; i++) {
        if (!(by & BIT(i)))
            continue;
        for (int j = 0; j < s->n; j++)
            if (j != i && (s->valid & BIT(j)) && s->pending[i][j][t] > 0)
                acc |= BIT(j);
    }
    return acc;
}

static bool any_dirty(const struct afr_state *s, int t, uint32_t among)
{
    for (int i = 0; i < s->n; i++)
        if ((among & BIT(i)) && (s->dirty[i][t] != 0 || s->pending[i][i][t] != 0))
            return true;
    return false;
}

static uint32_t data_children(const struct afr_state *s, int t)
{
    uint32_t m = s->valid;
    if (t == AFR_DATA && s->arbiter >= 0)
        m &= ~BIT(s->arbiter);
    return m;
}

/* Children of `among` that marked their own copy (pending[i][i]): it holds
 * a change that did not reach a quorum and was never acknowledged. Such a
 * copy is never taken over one without the mark. */
static uint32_t unacked(const struct afr_state *s, int t, uint32_t among)
{
    uint32_t m = 0;
    for (int i = 0; i < s->n; i++)
        if ((among & BIT(i)) && s->pending[i][i][t] > 0)
            m |= BIT(i);
    return m;
}

/* May the good copy be one that did not answer: a data child away that no
 * child here blames? */
static bool good_copy_away(const struct afr_state *s, int t)
{
    for (int j = 0; j < s->n; j++) {
        if ((s->valid & BIT(j)) || (t == AFR_DATA && j == s->arbiter))
            continue;
        bool blamed = false;
        for (int i = 0; i < s->n && !blamed; i++)
            blamed = (s->valid & BIT(i)) && s->pending[i][j][t] > 0;
        if (!blamed)
            return true;
    }
    return false;
}

/* ---- comparing copies ---- */

static int cmp_time(int64_t as, uint32_t ans, int64_t bs, uint32_t bns)
{
    if (as != bs)
        return as < bs ? -1 : 1;
    return ans < bns ? -1 : ans > bns;
}

/* Do two copies differ in what type t heals? */
static bool attrs_differ(const struct bfs_iatt *a, const struct bfs_iatt *b, int t)
{
    if (t == AFR_DATA)
        return a->size != b->size;
    if (t == AFR_METADATA)
        return a->mode != b->mode || a->uid != b->uid || a->gid != b->gid;
    return false;
}

/* The copy a heal without blame takes as its source: data, the largest
 * then the latest modified; metadata and entries, the latest changed. */
static int best_copy(const struct afr_state *s, uint32_t among, int t)
{
    int best = -1;
    for (int i = 0; i < s->n; i++) {
        if (!(among & BIT(i)))
            continue;
        if (best < 0) {
            best = i;
            continue;
        }
        const struct bfs_iatt *a = &s->attr[i], *b = &s->attr[best];
        int c;
        if (t == AFR_DATA) {
            c = a->size != b->size ? (a->size > b->size ? 1 : -1)
                                   : cmp_time(a->mtime_sec, a->mtime_nsec, b->mtime_sec,
                                              b->mtime_nsec);
        } else {
            c = cmp_time(a->ctime_sec, a->ctime_nsec, b->ctime_sec, b->ctime_nsec);
        }
        if (c > 0)
            best = i;
    }
    return best;
}

/* The unique copy with the greatest key among `among` (policy), or -1. */
static int unique_max(const struct afr_state *s, uint32_t among, int policy)
{
    int best = -1, ties = 0;
    for (int i = 0; i < s->n; i++) {
        if (!(among & BIT(i)))
            continue;
        const struct bfs_iatt *a = &s->attr[i];
        if (best < 0) {
            best = i;
            ties = 1;
            continue;
        }
        const struct bfs_iatt *b = &s->attr[best];
        int c;
        if (policy == AFR_FAV_SIZE)
            c = a->size == b->size ? 0 : (a->size > b->size ? 1 : -1);
        else if (policy == AFR_FAV_MTIME)
            c = cmp_time(a->mtime_sec, a->mtime_nsec, b->mtime_sec, b->mtime_nsec);
        else
            c = cmp_time(a->ctime_sec, a->ctime_nsec, b->ctime_sec, b->ctime_nsec);
        if (c > 0) {
            best = i;
            ties = 1;
        } else if (c == 0) {
            ties++;
        }
    }
    return ties == 1 ? best : -1;
}

/* majority: the copies sharing a value with more than half of `total`. */
static uint32_t majority(const struct afr_state *s, uint32_t among, int t, int total)
{
    for (int i = 0; i < s->n; i++) {
        if (!(among & BIT(i)))
            continue;
        uint32_t same = 0;
        for (int j = 0; j < s->n; j++)
            if ((among & BIT(j)) && !attrs_differ(&s->attr[i], &s->attr[j], t))
                same |= BIT(j);
        if (2 * count(same) > total)
            return same;
    }
    return 0;
}

/* A split-brain: the policy's source(s) among the candidates, or 0. */
static uint32_t by_policy(const struct afr_state *s, uint32_t cand, int t, int policy)
{
    int total = s->n - (t == AFR_DATA && s->arbiter >= 0 ? 1 : 0);
    int c;
    switch (policy) {
    case AFR_FAV_SIZE:
    case AFR_FAV_MTIME:
    case AFR_FAV_CTIME:
        c = unique_max(s, cand, policy);
        return c < 0 ? 0 : BIT(c);
    case AFR_FAV_MAJORITY:
        return majority(s, cand, t, total);
    }
    return 0;
}

/* ---- the decision ---- */

/* No blame at all: every copy may be read; heal (if marks or differences)
 * from the best copy to the others. */
static void decide_no_blame(const struct afr_state *s, int t, uint32_t cand,
                            struct afr_decision *d)
{
    d->readable = cand;
    d->sources = cand;
    int best = best_copy(s, cand, t);
    bool differ = false;
    for (int i = 0; i < s->n && best >= 0; i++)
        if ((cand & BIT(i)) && attrs_differ(&s->attr[i], &s->attr[best], t))
            differ = true;
    if (best < 0 || !(differ || any_dirty(s, t, s->valid)))
        return;
    d->needs_heal = true;
    d->sources = BIT(best);
    d->sinks = cand & ~BIT(best);
    if (t == AFR_DATA && s->arbiter >= 0 && (s->valid & BIT(s->arbiter)))
        d->sinks &= ~BIT(s->arbiter); /* only its marks are cleared */
}

void afr_decide(const struct afr_state *s, int t, int policy, int force,
                struct afr_decision *d)
{
    memset(d, 0, sizeof(*d));
    uint32_t cand = data_children(s, t); /* who can hold the content */
    if (!cand)
        return;
    if (force >= 0 && (cand & BIT(force))) {
        d->sources = d->readable = BIT(force);
        d->sinks = cand & ~BIT(force);
        d->needs_heal = d->sinks != 0 || any_dirty(s, t, s->valid);
        d->by_policy = true;
        return;
    }
    uint32_t accused = accused_by(s, t, s->valid);
    uint32_t marked = unacked(s, t, cand);
    if (!marked && !(accused & cand) && !(t == AFR_DATA && (accused & ~cand))) {
        decide_no_blame(s, t, cand, d);
        return;
    }
    uint32_t sources = cand & ~accused & ~marked;
    if (!sources && t == AFR_DATA && s->arbiter >= 0 && (s->valid & BIT(s->arbiter))) {
        /* the arbiter breaks the tie if it blames some data copies only */
        uint32_t blamed = accused_by(s, t, BIT(s->arbiter)) & cand;
        if (blamed && blamed != cand)
            sources = cand & ~blamed & ~marked;
    }
    if (!sources && (marked & ~accused)) {
        /* The copies here that nobody blames hold a change that was never
         * acknowledged. The copy without it may be one that did not
         * answer: wait for it (reads and writes ENOTCONN) rather than let
         * that change become the file. Everyone here: they all took part,
         * any of them will do. */
        if (good_copy_away(s, t)) {
            d->unreachable = true;
            return;
        }
        sources = marked & ~accused;
    }
    if (!sources && t == AFR_DATA && s->arbiter >= 0 && (s->valid & BIT(s->arbiter))) {
        /* Every data copy here is blamed, yet not by each other: the copy
         * that has the writes is one that did not answer. Not a split-brain
         * (no policy may pick a stale copy over it): wait for it. */
        uint32_t all_data = (s->n >= 32 ? ~0u : BIT(s->n) - 1) & ~BIT(s->arbiter);
        if ((cand & all_data) != all_data && !afr_mutual_blame(s, s->valid, t)) {
            d->unreachable = true;
            return;
        }
    }
    if (!sources && t != AFR_ENTRY) {
        sources = by_policy(s, cand, t, policy);
        d->by_policy = sources != 0;
    }
    d->needs_heal = true;
    if (!sources) {
        d->split_brain = true;
        return;
    }
    /* sources that differ among themselves: heal them from the best too */
    int best = best_copy(s, sources, t);
    uint32_t same = 0;
    for (int i = 0; i < s->n; i++)
        if ((sources & BIT(i)) && !attrs_differ(&s->attr[i], &s->attr[best], t))
            same |= BIT(i);
    d->sources = d->readable = same;
    d->sinks = cand & ~same;
}

int afr_check_stale(const struct afr_state *s, uint32_t set, int t)
{
    uint32_t copies = set & s->valid;
    if (t == AFR_DATA && s->arbiter >= 0)
        copies &= ~BIT(s->arbiter);
    if (!copies)
        return t == AFR_DATA ? -ENOTCONN : 0;
    uint32_t acc = accused_by(s, t, set & s->valid);
    if (copies & ~acc & ~unacked(s, t, copies))
        return 0;
    /* Only copies holding an unacknowledged change: fine if every copy is
     * in the set (they all took part), else the copy without it may be
     * one of those away (the pre-op blamed them just now, so their blame
     * cannot tell) and a change made here would be acknowledged on top of
     * a change that was not. */
    uint32_t all = (s->n >= 32 ? ~0u : BIT(s->n) - 1);
    if (t == AFR_DATA && s->arbiter >= 0)
        all &= ~BIT(s->arbiter);
    return (copies & ~acc) && (copies & all) == all ? 0 : -ENOTCONN;
}

bool afr_mutual_blame(const struct afr_state *s, uint32_t set, int t)
{
    uint32_t copies = set & s->valid;
    if (t == AFR_DATA && s->arbiter >= 0)
        copies &= ~BIT(s->arbiter);
    if (!copies)
        return false;
    uint32_t accused = accused_by(s, t, set & s->valid);
    for (int i = 0; i < s->n; i++) {
        if (!(copies & BIT(i)))
            continue;
        if (!(accused & BIT(i)) || !(accused_by(s, t, BIT(i)) & copies))
            return false;
    }
    return true;
}

/* ---- reads ---- */

int afr_pick_read(uint32_t candidates, int policy, const struct bfs_gfid *g,
                  const uint64_t *load, int n)
{
    if (n < 32)
        candidates &= (1u << n) - 1;
    int k = count(candidates);
    if (!k)
        return -1;
    if (policy == AFR_READ_LEAST_LOADED && load) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if ((candidates & BIT(i)) && (best < 0 || load[i] < load[best]))
                best = i;
        return best;
    }
    if (policy == AFR_READ_GFID_HASH && g) {
        uint64_t h = 1469598103934665603ull; /* FNV-1a over the GFID */
        for (int b = 0; b < 16; b++) {
            h ^= g->b[b];
            h *= 1099511628211ull;
        }
        h ^= h >> 33; /* FNV's low bits are weak: mix before the modulo */
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 33;
        int pick = (int)(h % (uint64_t)k);
        for (int i = 0; i < n; i++)
            if ((candidates & BIT(i)) && pick-- == 0)
                return i;
    }
    return first(candidates);
}

bool afr_child_fault(int rc)
{
    switch (-rc) {
    case ENOTCONN: case EIO: case EBADF: case ESTALE: case ENOENT: case ENODEV:
    case EHOSTDOWN: case EHOSTUNREACH: case ETIMEDOUT: case ECONNRESET: case ECONNREFUSED:
    case ENOMEM: case EPIPE:
        return true;
    }
    return false;
}

/* ---- lookup ---- */

uint32_t afr_types_of(uint32_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG:
        return BIT(AFR_DATA) | BIT(AFR_METADATA);
    case S_IFDIR:
        return BIT(AFR_METADATA) | BIT(AFR_ENTRY);
    }
    return BIT(AFR_METADATA);
}

static int first_error(uint32_t asked, const int *rc, int n)
{
    int err = 0;
    for (int i = 0; i < n; i++) {
        if (!(asked & BIT(i)) || rc[i] >= 0)
            continue;
        if (!err || err == -ENOTCONN)
            err = rc[i];
    }
    return err ? err : -ENOTCONN;
}

void afr_lookup_combine(const struct afr_state *s, uint32_t asked, const int *rc, int policy,
                        uint32_t parent_readable, struct afr_lookup_out *out)
{
    memset(out, 0, sizeof(*out));
    out->child = -1;
    uint32_t ok = s->valid & asked, enoent = 0;
    for (int i = 0; i < s->n; i++)
        if ((asked & BIT(i)) && rc[i] == -ENOENT)
            enoent |= BIT(i);
    if (!ok) {
        out->rc = enoent ? -ENOENT : first_error(asked, rc, s->n);
        return;
    }
    int ref = first(ok);
    for (int i = 0; i < s->n; i++) {
        if (!(ok & BIT(i)))
            continue;
        if (!bfs_gfid_eq(&s->attr[i].gfid, &s->attr[ref].gfid) ||
            (s->attr[i].mode & S_IFMT) != (s->attr[ref].mode & S_IFMT)) {
            out->gfid_mismatch = out->entry_mismatch = true;
            out->rc = -EIO;
            return;
        }
    }
    if (enoent) {
        out->entry_mismatch = true;
        if (parent_readable && !(ok & parent_readable) && (enoent & parent_readable)) {
            out->rc = -ENOENT; /* removed while these copies were away */
            return;
        }
    }
    uint32_t types = afr_types_of(s->attr[ref].mode);
    for (int t = 0; t < AFR_NTYPES; t++) {
        if (!(types & BIT(t)))
            continue;
        struct afr_decision d;
        afr_decide(s, t, policy, -1, &d);
        out->readable[t] = d.readable;
        out->split[t] = d.split_brain;
        if (t == AFR_ENTRY && d.split_brain) {
            /* entries are merged, never lost: any copy may be listed meanwhile */
            out->readable[t] = ok;
            out->split[t] = false;
        }
        if (d.needs_heal)
            out->heal |= BIT(t);
    }
    /* answer with a good copy: data-readable for files (the arbiter's size
     * is 0), metadata-readable otherwise */
    int t = (types & BIT(AFR_DATA)) ? AFR_DATA : AFR_METADATA;
    uint32_t pick = out->readable[t] ? out->readable[t] : data_children(s, t);
    if (!pick)
        pick = ok;
    out->child = first(pick);
    out->rc = 0;
}
