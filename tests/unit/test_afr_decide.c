/*
 * test_afr_decide.c — the pure decisions of cluster/replicate and the
 * shared quorum rules, without a graph: sources and sinks from pending
 * matrices, dirty-only states, split-brain and each favorite-child policy,
 * the arbiter's tie-break, the stale-write check, lookup combination, read
 * child choice and row encoding.
 *
 * The functions live in the translator (hidden symbols), so their source
 * files are compiled into this test directly.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "../lib/tap.h"
#include "xlators/cluster/replicate/replicate-decide.c"
#include "xlators/lib/quorum.c"

#define A 0
#define B 1
#define C 2
#define BITS(...) bits_of((int[]){__VA_ARGS__, -1})

static uint32_t bits_of(const int *v)
{
    uint32_t m = 0;
    for (; *v >= 0; v++)
        m |= 1u << *v;
    return m;
}

/* n children, all answered, files of `size` bytes, same everything. */
static void state(struct afr_state *s, int n, int arbiter)
{
    memset(s, 0, sizeof(*s));
    s->n = n;
    s->arbiter = arbiter;
    s->valid = (1u << n) - 1;
    for (int i = 0; i < n; i++) {
        s->attr[i].mode = S_IFREG | 0644;
        s->attr[i].size = i == arbiter ? 0 : 100;
        s->attr[i].mtime_sec = s->attr[i].ctime_sec = 1000;
        s->attr[i].gfid.b[15] = 7;
    }
}

static void blame(struct afr_state *s, int i, int j, int t)
{
    s->pending[i][j][t] += 1;
}

static void test_clean_and_dirty(void)
{
    struct afr_state s;
    struct afr_decision d;
    state(&s, 3, -1);
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    ok(!d.needs_heal && !d.split_brain, "no blame, no marks: nothing to heal");
    is_int(d.readable, BITS(A, B, C), "every copy readable");

    s.dirty[B][AFR_DATA] = 1;
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    ok(d.needs_heal, "a dirty mark alone asks for a heal");
    is_int(d.readable, BITS(A, B, C), "dirty without blame: every copy still readable");
    is_int(__builtin_popcount(d.sources), 1, "the heal takes one source");

    s.attr[C].size = 300; /* the biggest copy is the source of a blameless heal */
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    is_int(d.sources, BITS(C), "blameless heal: the largest file is the source");
    is_int(d.sinks, BITS(A, B), "and the others are sinks");

    state(&s, 3, -1);
    s.attr[B].mode = S_IFREG | 0600;
    s.attr[B].ctime_sec = 2000;
    afr_decide(&s, AFR_METADATA, AFR_FAV_NONE, -1, &d);
    ok(d.needs_heal, "metadata that differs without blame needs a heal");
    is_int(d.sources, BITS(B), "from the latest changed copy");
}

static void test_blame(void)
{
    struct afr_state s;
    struct afr_decision d;
    state(&s, 3, -1);
    blame(&s, A, C, AFR_DATA);
    blame(&s, B, C, AFR_DATA);
    s.attr[C].size = 10;
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    is_int(d.sources, BITS(A, B), "A and B blame C: they are the sources");
    is_int(d.sinks, BITS(C), "C is the sink");
    is_int(d.readable, BITS(A, B), "reads avoid C");
    ok(d.needs_heal && !d.split_brain, "a heal, no split-brain");

    afr_decide(&s, AFR_METADATA, AFR_FAV_NONE, -1, &d);
    ok(!d.needs_heal, "data blame says nothing about metadata");

    state(&s, 3, -1);
    blame(&s, A, C, AFR_DATA);
    s.valid = BITS(B, C); /* A (the only one who knows) is down */
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    ok(!d.needs_heal, "blame from a child that did not answer is not counted");

}

/* pending[i][i]: i's copy holds a change that lost its quorum (EROFS). */
static void test_unacked(void)
{
    struct afr_state s;
    struct afr_decision d;
    state(&s, 3, -1);
    s.pending[C][C][AFR_DATA] = 1;
    s.attr[C].size = 300;
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    is_int(d.sources, BITS(A, B), "a copy marked unacknowledged is not a source");
    is_int(d.sinks, BITS(C), "it is healed from the others, though it is the largest");
    is_int(d.readable, BITS(A, B), "nor read");

    /* c0 missed acknowledged writes (blamed by c1), c1 alone took a write
     * that lost its quorum, c2 failed it and is away */
    state(&s, 3, -1);
    blame(&s, B, A, AFR_DATA);
    s.pending[B][B][AFR_DATA] = 1;
    s.valid = BITS(B);
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    ok(d.unreachable && !d.readable && !d.sources && !d.split_brain,
       "only the marked copy here, an unblamed one away: wait for it");
    s.valid = BITS(A, B);
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    ok(d.unreachable && !d.readable, "a stale copy does not help");
    s.valid = BITS(B, C);
    s.dirty[C][AFR_DATA] = 1;
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    is_int(d.sources, BITS(C), "the copy without the change back: it is the source");
    is_int(d.sinks, BITS(B), "the change is undone on the marked copy");
    ok(d.needs_heal && !d.split_brain, "a heal");
    blame(&s, B, C, AFR_DATA);
    s.valid = BITS(B);
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    ok(!d.unreachable && d.sources == BITS(B),
       "every copy away is blamed: the marked copy is the best there is");

    state(&s, 2, -1);
    s.pending[A][A][AFR_DATA] = 1;
    s.pending[B][B][AFR_DATA] = 1;
    s.attr[B].size = 300;
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    ok(d.sources == BITS(B) && d.sinks == BITS(A) && !d.split_brain,
       "every copy here and marked: they all took part, the largest wins");

    state(&s, 3, -1);
    blame(&s, B, A, AFR_DATA);
    s.pending[B][B][AFR_DATA] = 1;
    s.valid = BITS(A, B);
    is_int(afr_check_stale(&s, BITS(A, B), AFR_DATA), -ENOTCONN,
           "a write to a marked copy and a stale one, the third away: refused");
    s.valid = BITS(A, B, C);
    is_int(afr_check_stale(&s, BITS(A, B, C), AFR_DATA), 0, "with the third: fine");
    s.valid = BITS(B, C);
    is_int(afr_check_stale(&s, BITS(B, C), AFR_DATA), 0, "marked and unmarked: fine");
    state(&s, 2, -1);
    s.pending[A][A][AFR_DATA] = 1;
    s.pending[B][B][AFR_DATA] = 1;
    is_int(afr_check_stale(&s, BITS(A, B), AFR_DATA), 0, "all marked, all here: fine");
}

static void test_split_brain(void)
{
    struct afr_state s;
    struct afr_decision d;
    state(&s, 2, -1);
    blame(&s, A, B, AFR_DATA);
    blame(&s, B, A, AFR_DATA);
    s.attr[A].size = 50;
    s.attr[A].mtime_sec = 3000; /* A newer, B bigger */
    s.attr[B].size = 200;
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    ok(d.split_brain && !d.readable, "mutual blame: split-brain, nothing readable");

    afr_decide(&s, AFR_DATA, AFR_FAV_SIZE, -1, &d);
    ok(!d.split_brain && d.by_policy, "size policy resolves it");
    is_int(d.sources, BITS(B), "the bigger file wins");
    is_int(d.sinks, BITS(A), "the other is healed");

    afr_decide(&s, AFR_DATA, AFR_FAV_MTIME, -1, &d);
    is_int(d.sources, BITS(A), "mtime policy: the newer file wins");

    s.attr[B].ctime_sec = 5000;
    afr_decide(&s, AFR_DATA, AFR_FAV_CTIME, -1, &d);
    is_int(d.sources, BITS(B), "ctime policy: the latest change wins");

    afr_decide(&s, AFR_DATA, AFR_FAV_MAJORITY, -1, &d);
    ok(d.split_brain, "majority cannot decide between two copies");

    s.attr[B].size = 50;
    afr_decide(&s, AFR_DATA, AFR_FAV_SIZE, -1, &d);
    ok(d.split_brain, "a size tie resolves nothing");

    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, B, &d);
    is_int(d.sources, BITS(B), "a forced source wins whatever the matrix says");

    state(&s, 3, -1);
    blame(&s, A, B, AFR_DATA);
    blame(&s, B, A, AFR_DATA);
    blame(&s, B, C, AFR_DATA);
    blame(&s, C, A, AFR_DATA);
    blame(&s, C, B, AFR_DATA);
    s.attr[A].size = 10; /* B and C agree on 100 bytes */
    afr_decide(&s, AFR_DATA, AFR_FAV_MAJORITY, -1, &d);
    is_int(d.sources, BITS(B, C), "majority: the size two of three copies share");

    state(&s, 2, -1);
    s.attr[A].mode = s.attr[B].mode = S_IFDIR | 0755;
    blame(&s, A, B, AFR_ENTRY);
    blame(&s, B, A, AFR_ENTRY);
    afr_decide(&s, AFR_ENTRY, AFR_FAV_SIZE, -1, &d);
    ok(d.split_brain, "policies do not apply to entries (merged instead)");
}

static void test_arbiter(void)
{
    struct afr_state s;
    struct afr_decision d;
    state(&s, 3, C);
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    ok(!d.needs_heal, "arbiter size 0 is not a data difference");
    is_int(d.readable, BITS(A, B), "the arbiter never serves data");

    blame(&s, B, A, AFR_DATA);
    blame(&s, C, A, AFR_DATA);
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    is_int(d.sources, BITS(B), "B and the arbiter blame A: B is the source");
    is_int(d.sinks, BITS(A), "the arbiter is never a data sink");

    state(&s, 3, C);
    blame(&s, A, B, AFR_DATA);
    blame(&s, B, A, AFR_DATA);
    blame(&s, C, B, AFR_DATA);
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    ok(!d.split_brain, "the arbiter breaks a tie between data copies");
    is_int(d.sources, BITS(A), "in favour of the copy it does not blame");

    state(&s, 3, C);
    blame(&s, A, C, AFR_DATA);
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    ok(d.needs_heal && d.sinks == 0, "blame on the arbiter's data: marks cleared, nothing copied");

    state(&s, 3, C); /* B was down, then A went down: the arbiter blames A */
    blame(&s, C, A, AFR_DATA);
    blame(&s, B, A, AFR_DATA);
    is_int(afr_check_stale(&s, BITS(A, C), AFR_DATA), -ENOTCONN,
           "writing to A and the arbiter only, A blamed: refused");
    is_int(afr_check_stale(&s, BITS(B, C), AFR_DATA), 0, "writing to the good copy: allowed");
    is_int(afr_check_stale(&s, BITS(C), AFR_DATA), -ENOTCONN,
           "only the arbiter up: no data copy to write");
    ok(!afr_mutual_blame(&s, BITS(A, C), AFR_DATA), "a stale copy is not a split-brain");
    s.valid = BITS(A, C); /* B, the good copy, does not answer */
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    ok(!d.split_brain, "the good copy away, A blamed by the arbiter: not a split-brain");
    ok(d.unreachable && !d.readable && !d.sources, "no source here: the good copy is away");
    ok(!d.needs_heal, "nothing to heal from until it returns");
    s.valid = BITS(A, B, C);
    blame(&s, C, B, AFR_DATA);
    blame(&s, A, B, AFR_DATA);
    afr_decide(&s, AFR_DATA, AFR_FAV_NONE, -1, &d);
    ok(d.split_brain && !d.unreachable, "both data copies here and blamed: a split-brain");
    state(&s, 2, -1);
    blame(&s, A, B, AFR_DATA);
    blame(&s, B, A, AFR_DATA);
    ok(afr_mutual_blame(&s, BITS(A, B), AFR_DATA), "copies blaming each other are");
}

static void test_check_stale(void)
{
    struct afr_state s;
    state(&s, 2, -1);
    blame(&s, B, A, AFR_DATA);
    s.valid = BITS(A); /* B down: nobody sees the blame */
    is_int(afr_check_stale(&s, BITS(A), AFR_DATA), 0,
           "replica 2, the blamer down: the write goes on (the split-brain case)");
    s.valid = BITS(A, B);
    is_int(afr_check_stale(&s, BITS(A, B), AFR_DATA), 0, "a stale copy with a good one: fine");
    state(&s, 3, -1);
    blame(&s, A, B, AFR_METADATA);
    blame(&s, B, A, AFR_METADATA);
    is_int(afr_check_stale(&s, BITS(A, B), AFR_METADATA), -ENOTCONN,
           "metadata: every copy in the set blamed: refused");
}

static void test_lookup_combine(void)
{
    struct afr_state s;
    struct afr_lookup_out o;
    int rc[3] = {0, 0, 0};
    state(&s, 3, -1);
    blame(&s, A, C, AFR_DATA);
    afr_lookup_combine(&s, BITS(A, B, C), rc, AFR_FAV_NONE, 0, &o);
    is_int(o.rc, 0, "lookup succeeds");
    is_int(o.heal, 1u << AFR_DATA, "data heal wanted");
    is_int(o.readable[AFR_DATA], BITS(A, B), "readable data copies");
    is_int(o.readable[AFR_ENTRY], 0, "entry readability does not apply to files");
    ok(o.child == A || o.child == B, "attributes come from a good copy");

    state(&s, 3, -1);
    rc[C] = -ENOENT;
    s.valid = BITS(A, B);
    afr_lookup_combine(&s, BITS(A, B, C), rc, AFR_FAV_NONE, 0, &o);
    ok(o.rc == 0 && o.entry_mismatch, "present on two of three: found, parent needs a heal");
    afr_lookup_combine(&s, BITS(A, B, C), rc, AFR_FAV_NONE, BITS(C), &o);
    is_int(o.rc, -ENOENT, "present only where the parent is stale: ENOENT");

    state(&s, 2, -1);
    rc[A] = rc[B] = -ENOENT;
    s.valid = 0;
    afr_lookup_combine(&s, BITS(A, B), rc, AFR_FAV_NONE, 0, &o);
    is_int(o.rc, -ENOENT, "absent everywhere: ENOENT");

    state(&s, 2, -1);
    rc[A] = rc[B] = 0;
    s.attr[B].gfid.b[0] = 9;
    afr_lookup_combine(&s, BITS(A, B), rc, AFR_FAV_NONE, 0, &o);
    ok(o.rc == -EIO && o.gfid_mismatch, "different GFIDs under one name: EIO");

    state(&s, 3, C);
    afr_lookup_combine(&s, BITS(A, B, C), rc, AFR_FAV_NONE, 0, &o);
    ok(o.child == A || o.child == B, "a file's attributes never come from the arbiter");

    state(&s, 2, -1);
    s.attr[A].mode = s.attr[B].mode = S_IFDIR | 0755;
    blame(&s, A, B, AFR_ENTRY);
    blame(&s, B, A, AFR_ENTRY);
    afr_lookup_combine(&s, BITS(A, B), rc, AFR_FAV_NONE, 0, &o);
    ok(!o.split[AFR_ENTRY] && o.readable[AFR_ENTRY] == BITS(A, B) &&
           (o.heal & (1u << AFR_ENTRY)),
       "a directory whose entries blame each other stays listable and gets merged");
}

static void test_read_pick(void)
{
    struct bfs_gfid g = {{0}};
    uint64_t load[3] = {5, 1, 9};
    is_int(afr_pick_read(BITS(B, C), AFR_READ_FIRST_UP, &g, load, 3), B, "first-up");
    is_int(afr_pick_read(BITS(A, B, C), AFR_READ_LEAST_LOADED, &g, load, 3), B,
           "least-loaded");
    int seen = 0;
    for (int k = 0; k < 64; k++) {
        g.b[0] = (uint8_t)k;
        g.b[7] = (uint8_t)(k * 37);
        int c = afr_pick_read(BITS(A, C), AFR_READ_GFID_HASH, &g, load, 3);
        if (c != A && c != C)
            seen |= 4;
        seen |= c == A ? 1 : c == C ? 2 : 0;
    }
    is_int(seen, 3, "gfid-hash spreads over the candidates and only them");
    is_int(afr_pick_read(0, AFR_READ_FIRST_UP, &g, load, 3), -1, "no candidate: -1");
    ok(afr_child_fault(-ENOTCONN) && !afr_child_fault(-EACCES), "faults and answers");
}

static void test_rows(void)
{
    int64_t in[3] = {1, -1, 1LL << 40}, out[3];
    uint8_t raw[AFR_ROW_LEN];
    afr_row_encode(in, raw);
    is_int(raw[7], 1, "big-endian");
    afr_row_parse(raw, sizeof(raw), out);
    ok(out[0] == 1 && out[1] == -1 && out[2] == (1LL << 40), "rows round-trip");
    afr_row_parse(raw, 8, out);
    ok(out[0] == 1 && out[1] == 0 && out[2] == 0, "a short row reads as far as it goes");
}

static void test_quorum(void)
{
    ok(!bfs_quorum_met(BFS_QUORUM_AUTO, 0, 3, BITS(A)), "auto, 1 of 3: no");
    ok(bfs_quorum_met(BFS_QUORUM_AUTO, 0, 3, BITS(B, C)), "auto, 2 of 3: yes");
    ok(bfs_quorum_met(BFS_QUORUM_AUTO, 0, 2, BITS(A)), "auto, replica 2, the first: yes");
    ok(!bfs_quorum_met(BFS_QUORUM_AUTO, 0, 2, BITS(B)), "auto, replica 2, the second: no");
    ok(bfs_quorum_met(BFS_QUORUM_NONE, 0, 3, BITS(C)), "none: any one");
    ok(!bfs_quorum_met(BFS_QUORUM_NONE, 0, 3, 0), "none: not zero");
    ok(!bfs_quorum_met(BFS_QUORUM_FIXED, 3, 3, BITS(A, B)), "fixed 3: two is not enough");
    ok(bfs_quorum_met(BFS_QUORUM_FIXED, 5, 3, BITS(A, B, C)), "fixed above n: all of them");
    ok(!bfs_quorum_met(BFS_QUORUM_AUTO, 0, 3, 1u << 5), "children beyond n do not count");
    enum bfs_quorum_type q;
    ok(bfs_quorum_parse("fixed", &q) == 0 && q == BFS_QUORUM_FIXED, "parse fixed");
    ok(bfs_quorum_parse("most", &q) == -EINVAL, "parse refuses others");
}

int main(void)
{
    plan_lazy();
    test_clean_and_dirty();
    test_blame();
    test_unacked();
    test_split_brain();
    test_arbiter();
    test_check_stale();
    test_lookup_combine();
    test_read_pick();
    test_rows();
    test_quorum();
    return done_testing();
}
