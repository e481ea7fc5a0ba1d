/*
 * test_runtime.c — the translator runtime in one process: graphs from inline
 * volfiles over in-test translators, asserting pass-through, the error
 * contract (callback exactly once, never after an error return), fan-out and
 * gather with children that fail or answer synchronously, early answers
 * (bfs_op_early, BFS_OP_WAIT_ANY: answered on a quorum, the rest gathered
 * behind the answer, slots stable under the step), and graph build errors
 * that name file, line, translator and option.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/event.h"
#include "core/fanout.h"
#include "core/fops-util.h"
#include "core/graph.h"
#include "../lib/tap.h"

/* ---- test/leaf: answers lookup as its `mode` option says ---- */

static const char *const leaf_modes[] = {"sync",        "async", "fail-return",
                                          "fail-unwind", "gate",  NULL};

static const struct bfs_option_desc leaf_options[] = {
    {.key = "mode", .type = BFS_OPT_ENUM, .def = "sync", .values = leaf_modes,
     .description = "how lookup answers"},
    {.key = "tag", .type = BFS_OPT_INT, .def = "0", .min = 0, .max = 1000,
     .description = "written into attr.ino"},
    {0},
};

struct async_answer {
    struct bfs_frame *frame;
    uint64_t ino;
};

static void *answer_later(void *arg)
{
    struct async_answer *a = arg;
    usleep(2000);
    struct bfs_lookup_rep rep = {.attr.ino = a->ino};
    bfs_unwind_lookup(a->frame, 0, &rep);
    free(a);
    return NULL;
}

/* mode gate: lookups are held until open_gate answers them */
#define GATE_MAX 64
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bfs_frame *gate_frames[GATE_MAX];
static int gate_n;

static int gate_held(void)
{
    pthread_mutex_lock(&gate_lock);
    int n = gate_n;
    pthread_mutex_unlock(&gate_lock);
    return n;
}

/* Answers every held lookup with rc (ino 100 on success). */
static void open_gate(int rc)
{
    pthread_mutex_lock(&gate_lock);
    int n = gate_n;
    struct bfs_frame *held[GATE_MAX];
    memcpy(held, gate_frames, sizeof(held[0]) * n);
    gate_n = 0;
    pthread_mutex_unlock(&gate_lock);
    for (int i = 0; i < n; i++) {
        struct bfs_lookup_rep rep = {.attr.ino = 100};
        bfs_unwind_lookup(held[i], rc, rc >= 0 ? &rep : NULL);
    }
}

static int leaf_lookup(struct bfs_frame *frame, struct bfs_xl *xl,
                       const struct bfs_lookup_req *req)
{
    const char *mode = bfs_xl_opt_str(xl, "mode");
    uint64_t ino = (uint64_t)bfs_xl_opt_int(xl, "tag");
    (void)req;
    if (strcmp(mode, "fail-return") == 0)
        return -EIO;
    if (strcmp(mode, "fail-unwind") == 0) {
        bfs_unwind_lookup(frame, -ENOENT, NULL);
        return 0;
    }
    if (strcmp(mode, "gate") == 0) {
        pthread_mutex_lock(&gate_lock);
        bool room = gate_n < GATE_MAX;
        if (room)
            gate_frames[gate_n++] = frame;
        pthread_mutex_unlock(&gate_lock);
        return room ? 0 : -ENOMEM;
    }
    if (strcmp(mode, "async") == 0) {
        struct async_answer *a = malloc(sizeof(*a));
        pthread_t t;
        a->frame = frame;
        a->ino = ino;
        pthread_create(&t, NULL, answer_later, a);
        pthread_detach(t);
        return 0;
    }
    struct bfs_lookup_rep rep = {.attr.ino = ino};
    bfs_unwind_lookup(frame, 0, &rep);
    return 0;
}

static const struct bfs_fops leaf_fops = {.lookup = leaf_lookup};
static const struct bfs_xl_module leaf_mod = {
    .abi = BFS_XL_ABI, .type = "test/leaf", .fops = &leaf_fops, .options = leaf_options,
    .max_children = 0, /* any */
};

/* ---- test/passthru: implements nothing ---- */
static const struct bfs_xl_module pass_mod = {
    .abi = BFS_XL_ABI, .type = "test/passthru", .min_children = 1, .max_children = 1,
};

/* ---- test/fan: lookup to every child, success if any succeeded ---- */

enum { FAN_DISPATCH, FAN_COMBINE };

struct fan_op {
    struct bfs_op op; /* first */
    struct bfs_lookup_req *req;
};

static int step_depth, max_step_depth;

static void fan_destroy(struct bfs_op *op)
{
    struct fan_op *f = (struct fan_op *)op;
    bfs_lookup_req_free(f->req);
    free(f);
}

static int fan_step(struct bfs_op *op)
{
    struct fan_op *f = (struct fan_op *)op;
    int depth = __atomic_add_fetch(&step_depth, 1, __ATOMIC_SEQ_CST);
    if (depth > max_step_depth)
        max_step_depth = depth;
    int next = BFS_OP_DONE;
    switch (op->state) {
    case FAN_DISPATCH:
        bfs_op_expect(op, op->xl->nchildren);
        op->state = FAN_COMBINE;
        for (int i = 0; i < op->xl->nchildren; i++)
            bfs_op_wind(op, i, BFS_FOP_LOOKUP, op->xl->children[i], f->req);
        next = BFS_OP_WAIT;
        break;
    case FAN_COMBINE: {
        struct bfs_lookup_rep rep = {0};
        int ok = bfs_op_count_ok(op);
        rep.attr.nlink = (uint32_t)ok; /* report how many children succeeded */
        for (int i = 0; i < op->n; i++)
            if (op->replies[i].valid && op->replies[i].rc >= 0)
                rep.attr.ino += ((struct bfs_lookup_rep *)op->replies[i].rep)->attr.ino;
        bfs_unwind_lookup(op->frame, ok ? 0 : bfs_op_first_error(op), &rep);
        break;
    }
    }
    __atomic_sub_fetch(&step_depth, 1, __ATOMIC_SEQ_CST);
    return next;
}

static int fan_lookup(struct bfs_frame *frame, struct bfs_xl *xl,
                      const struct bfs_lookup_req *req)
{
    struct fan_op *f = calloc(1, sizeof(*f));
    if (!f || !(f->req = bfs_lookup_req_dup(req)) ||
        bfs_op_init(&f->op, frame, xl, xl->nchildren, fan_step, fan_destroy) < 0) {
        if (f)
            bfs_lookup_req_free(f->req);
        free(f);
        return -ENOMEM;
    }
    f->op.state = FAN_DISPATCH;
    bfs_op_run(&f->op);
    return 0;
}

static const struct bfs_fops fan_fops = {.lookup = fan_lookup};
static const struct bfs_xl_module fan_mod = {
    .abi = BFS_XL_ABI, .type = "test/fan", .fops = &fan_fops, .min_children = 1,
};

/* ---- test/early: lookup to every child, answered once 2 succeeded ---- */

enum { EARLY_DISPATCH, EARLY_GATHER, EARLY_LATE };

struct early_op {
    struct bfs_op op; /* first */
    struct bfs_lookup_req *req;
    bool answered;
};

/* what the ops saw (atomics) */
static int early_late_steps, early_late_ok, early_destroyed, early_unstable;

static void early_destroy(struct bfs_op *op)
{
    struct early_op *e = (struct early_op *)op;
    bfs_lookup_req_free(e->req);
    free(e);
    __atomic_add_fetch(&early_destroyed, 1, __ATOMIC_SEQ_CST);
}

static uint32_t valid_mask(const struct bfs_op *op)
{
    uint32_t m = 0;
    for (int i = 0; i < op->n; i++)
        if (op->replies[i].valid)
            m |= 1u << i;
    return m;
}

static void early_answer(struct bfs_op *op, int ok)
{
    struct bfs_lookup_rep rep = {.attr.nlink = (uint32_t)ok};
    for (int i = 0; i < op->n; i++)
        if (op->replies[i].valid && op->replies[i].rc >= 0)
            rep.attr.ino += ((struct bfs_lookup_rep *)op->replies[i].rep)->attr.ino;
    bfs_unwind_lookup(op->frame, ok ? 0 : bfs_op_first_error(op), &rep);
    op->frame = NULL;
}

static int early_step(struct bfs_op *op)
{
    struct early_op *e = (struct early_op *)op;
    int depth = __atomic_add_fetch(&step_depth, 1, __ATOMIC_SEQ_CST);
    if (depth > max_step_depth)
        max_step_depth = depth;
    int next = BFS_OP_DONE;
    uint32_t seen = valid_mask(op);
    int ok = bfs_op_count_ok(op);
    switch (op->state) {
    case EARLY_DISPATCH:
        bfs_op_expect(op, op->xl->nchildren);
        op->state = EARLY_GATHER;
        for (int i = 0; i < op->xl->nchildren; i++)
            bfs_op_wind(op, i, BFS_FOP_LOOKUP, op->xl->children[i], e->req);
        next = BFS_OP_WAIT_ANY;
        break;
    case EARLY_GATHER:
        usleep(300); /* answers arriving now must not show up in the slots */
        if (valid_mask(op) != seen)
            __atomic_add_fetch(&early_unstable, 1, __ATOMIC_SEQ_CST);
        if (seen == (1u << op->n) - 1) { /* all in before a quorum answered */
            early_answer(op, ok);
            __atomic_add_fetch(&early_late_steps, 1, __ATOMIC_SEQ_CST);
            __atomic_add_fetch(&early_late_ok, ok, __ATOMIC_SEQ_CST);
            break;
        }
        if (ok >= 2) {
            early_answer(op, ok);
            op->state = EARLY_LATE;
            next = BFS_OP_WAIT;
        } else {
            next = BFS_OP_WAIT_ANY;
        }
        break;
    case EARLY_LATE: /* every answer is in: what a heal check would see */
        __atomic_add_fetch(&early_late_steps, 1, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&early_late_ok, ok, __ATOMIC_SEQ_CST);
        break;
    }
    __atomic_sub_fetch(&step_depth, 1, __ATOMIC_SEQ_CST);
    return next;
}

static int early_lookup(struct bfs_frame *frame, struct bfs_xl *xl,
                        const struct bfs_lookup_req *req)
{
    struct early_op *e = calloc(1, sizeof(*e));
    if (!e || !(e->req = bfs_lookup_req_dup(req)) ||
        bfs_op_init(&e->op, frame, xl, xl->nchildren, early_step, early_destroy) < 0) {
        if (e)
            bfs_lookup_req_free(e->req);
        free(e);
        return -ENOMEM;
    }
    if (bfs_op_early(&e->op) < 0) {
        bfs_op_unref(&e->op);
        return -ENOMEM;
    }
    e->op.state = EARLY_DISPATCH;
    bfs_op_run(&e->op);
    return 0;
}

static const struct bfs_fops early_fops = {.lookup = early_lookup};
static const struct bfs_xl_module early_mod = {
    .abi = BFS_XL_ABI, .type = "test/early", .fops = &early_fops, .min_children = 1,
};

/* ---- calling the graph and counting callbacks ---- */

struct result {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int calls;
    int rc;
    struct bfs_lookup_rep rep;
};

static void top_cbk(struct bfs_frame *frame, void *cookie, int rc,
                    const struct bfs_lookup_rep *rep)
{
    struct result *r = cookie;
    (void)frame;
    pthread_mutex_lock(&r->lock);
    r->calls++;
    r->rc = rc;
    r->rep = *rep;
    r->rep.xdata = NULL;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

/* Winds a lookup into g's top; returns wind's rc and fills r once answered. */
static int call_lookup(struct bfs_graph *g, struct result *r)
{
    struct bfs_stack *st = bfs_stack_new();
    struct bfs_frame *top = bfs_frame_top_new(st, NULL);
    struct bfs_lookup_req req = {.loc.gfid = bfs_gfid_root};
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    int rc = bfs_wind_lookup(top, g->top, top_cbk, r, &req);
    if (rc == 0) {
        pthread_mutex_lock(&r->lock);
        while (r->calls == 0)
            pthread_cond_wait(&r->cond, &r->lock);
        pthread_mutex_unlock(&r->lock);
    }
    usleep(5000); /* a second (wrong) callback would land here */
    bfs_frame_top_free(top);
    bfs_stack_unref(st);
    return rc;
}

static struct bfs_graph *build(const char *text, struct bfs_proc *proc)
{
    struct bfs_graph *g = NULL;
    char err[512];
    int rc = bfs_graph_from_text(text, strlen(text), "inline.vol", proc, &g, err, sizeof(err));
    if (rc < 0) {
        printf("# build failed: %s\n", err);
        return NULL;
    }
    if (bfs_graph_init(g) < 0) {
        bfs_graph_free(g);
        return NULL;
    }
    return g;
}

static void test_passthrough(struct bfs_proc *proc)
{
    struct result r;
    struct bfs_graph *g = build("volume leaf\n type test/leaf\n option tag 7\nend-volume\n"
                                "volume p1\n type test/passthru\n subvolumes leaf\nend-volume\n"
                                "volume p2\n type test/passthru\n subvolumes p1\nend-volume\n",
                                proc);
    ok(g != NULL, "graph leaf <- passthru <- passthru builds");
    if (!g)
        return;
    is_int(call_lookup(g, &r), 0, "wind through two pass-through translators succeeds");
    is_int(r.calls, 1, "callback called exactly once");
    is_int(r.rep.attr.ino, 7, "reply comes from the leaf unchanged");
    bfs_graph_free(g);
}

static void test_error_contract(struct bfs_proc *proc)
{
    struct result r;
    struct bfs_graph *g =
        build("volume leaf\n type test/leaf\n option mode fail-return\nend-volume\n"
              "volume p\n type test/passthru\n subvolumes leaf\nend-volume\n", proc);
    if (!g)
        return;
    is_int(call_lookup(g, &r), -EIO, "an error return propagates up as the wind's rc");
    is_int(r.calls, 0, "and the callback is never called");
    bfs_graph_free(g);

    g = build("volume leaf\n type test/leaf\n option mode fail-unwind\nend-volume\n", proc);
    if (!g)
        return;
    is_int(call_lookup(g, &r), 0, "an error answered through the callback returns 0");
    is_int(r.calls, 1, "callback once");
    is_int(r.rc, -ENOENT, "with rc -ENOENT");
    bfs_graph_free(g);
}

static void test_fanout(struct bfs_proc *proc)
{
    struct result r;
    struct bfs_graph *g =
        build("volume a\n type test/leaf\n option mode sync\n option tag 1\nend-volume\n"
              "volume b\n type test/leaf\n option mode async\n option tag 10\nend-volume\n"
              "volume c\n type test/leaf\n option mode fail-return\nend-volume\n"
              "volume d\n type test/leaf\n option mode fail-unwind\nend-volume\n"
              "volume fan\n type test/fan\n subvolumes a b c d\nend-volume\n",
              proc);
    ok(g != NULL, "fan over sync, async, failing children builds");
    if (!g)
        return;
    is_int(call_lookup(g, &r), 0, "fan-out lookup succeeds");
    is_int(r.calls, 1, "callback exactly once");
    is_int(r.rep.attr.nlink, 2, "two children succeeded");
    is_int(r.rep.attr.ino, 11, "replies of sync and async children were gathered");
    bfs_graph_free(g);

    max_step_depth = 0;
    g = build("volume a\n type test/leaf\nend-volume\nvolume b\n type test/leaf\nend-volume\n"
              "volume c\n type test/leaf\nend-volume\n"
              "volume fan\n type test/fan\n subvolumes a b c\nend-volume\n",
              proc);
    if (!g)
        return;
    for (int i = 0; i < 100; i++)
        call_lookup(g, &r);
    is_int(r.rep.attr.nlink, 3, "all-synchronous children: all gathered");
    is_int(max_step_depth, 1, "the step is never re-entered by synchronous answers");
    bfs_graph_free(g);

    g = build("volume a\n type test/leaf\n option mode fail-return\nend-volume\n"
              "volume b\n type test/leaf\n option mode fail-unwind\nend-volume\n"
              "volume fan\n type test/fan\n subvolumes a b\nend-volume\n",
              proc);
    if (!g)
        return;
    is_int(call_lookup(g, &r), 0, "all children failing: the call itself is accepted");
    is_int(r.calls, 1, "callback once");
    is_int(r.rc, -EIO, "with the first child's error");
    bfs_graph_free(g);
}

static int load_int(const int *v)
{
    return __atomic_load_n(v, __ATOMIC_SEQ_CST);
}

/* Polls (no sleep as synchronisation: a bounded wait for a condition). */
static bool wait_for(const int *v, int want)
{
    for (int i = 0; i < 5000 && load_int(v) != want; i++)
        usleep(1000);
    return load_int(v) == want;
}

static void test_early(struct bfs_proc *proc)
{
    struct result r;
    struct bfs_graph *g =
        build("volume a\n type test/leaf\n option tag 1\nend-volume\n"
              "volume b\n type test/leaf\n option mode gate\nend-volume\n"
              "volume c\n type test/leaf\n option mode async\n option tag 10\nend-volume\n"
              "volume early\n type test/early\n subvolumes a b c\nend-volume\n",
              proc);
    ok(g != NULL, "early fan over sync, held and async children builds");
    if (!g)
        return;
    early_late_steps = early_late_ok = early_destroyed = early_unstable = 0;
    is_int(call_lookup(g, &r), 0, "early lookup accepted");
    is_int(r.calls, 1, "answered once while one child still holds its call");
    is_int(r.rep.attr.nlink, 2, "answered on the two that succeeded");
    is_int(r.rep.attr.ino, 11, "with their replies (sync and async)");
    is_int(gate_held(), 1, "the held child's call is still in flight");
    is_int(load_int(&early_late_steps), 0, "the op waits for it");
    is_int(load_int(&early_destroyed), 0, "and is alive");
    open_gate(-EIO);
    ok(wait_for(&early_destroyed, 1), "the late answer ends the op");
    is_int(load_int(&early_late_steps), 1, "its step ran once more, after the answer");
    is_int(load_int(&early_late_ok), 2, "and saw the late failure among the replies");
    is_int(r.calls, 1, "the caller was not answered again");
    bfs_graph_free(g);

    /* many ops over async children answering on other threads */
    g = build("volume a\n type test/leaf\n option mode async\n option tag 1\nend-volume\n"
              "volume b\n type test/leaf\n option mode async\n option tag 1\nend-volume\n"
              "volume c\n type test/leaf\n option mode async\n option tag 1\nend-volume\n"
              "volume d\n type test/leaf\n option mode async\n option tag 1\nend-volume\n"
              "volume early\n type test/early\n subvolumes a b c d\nend-volume\n",
              proc);
    if (!g)
        return;
    early_late_steps = early_late_ok = early_destroyed = early_unstable = 0;
    max_step_depth = 0;
    int calls = 0, good = 0;
    for (int i = 0; i < 40; i++) {
        call_lookup(g, &r);
        calls += r.calls;
        good += r.rc == 0 && r.rep.attr.nlink >= 2 && r.rep.attr.ino == r.rep.attr.nlink;
    }
    ok(wait_for(&early_destroyed, 40), "every op ended after its last answer");
    is_int(calls, 40, "each caller answered exactly once");
    is_int(good, 40, "each on a quorum of gathered replies");
    is_int(load_int(&early_late_steps), 40, "each op's final step ran once");
    is_int(load_int(&early_late_ok), 160, "and saw all four answers");
    is_int(load_int(&early_unstable), 0, "reply slots never changed under a step");
    is_int(max_step_depth, 1, "the step is never re-entered");
    bfs_graph_free(g);
}

static void expect_build_error(struct bfs_proc *proc, const char *text, const char *want1,
                               const char *want2, const char *what)
{
    struct bfs_graph *g = NULL;
    char err[512] = "";
    int rc = bfs_graph_from_text(text, strlen(text), "bad.vol", proc, &g, err, sizeof(err));
    ok(rc < 0 && strstr(err, want1) && strstr(err, want2), "%s refused", what);
    if (rc == 0)
        bfs_graph_free(g);
    else
        printf("# message: %s\n", err);
}

static void test_build_errors(struct bfs_proc *proc)
{
    expect_build_error(proc, "volume a\n type test/leaf\n option colour red\nend-volume\n",
                       "bad.vol:3", "unknown option 'colour'", "unknown option");
    expect_build_error(proc, "volume a\n type test/leaf\n option tag 5000\nend-volume\n",
                       "bad.vol:3", "'tag'", "out-of-range option");
    expect_build_error(proc, "volume a\n type test/leaf\n option mode sideways\nend-volume\n",
                       "volume a", "'mode'", "bad enum value");
    expect_build_error(proc, "volume p\n type test/passthru\n subvolumes ghost\nend-volume\n",
                       "bad.vol:3", "'ghost' is not defined", "missing subvolume");
    expect_build_error(proc,
                       "volume a\n type test/passthru\n subvolumes b\nend-volume\n"
                       "volume b\n type test/passthru\n subvolumes a\nend-volume\n",
                       "bad.vol:", "cycle", "a cycle");
    expect_build_error(proc, "volume a\n type nosuch/thing\nend-volume\n", "bad.vol:2",
                       "nosuch/thing", "unknown translator type");
    expect_build_error(proc, "volume a\n type ../../etc\nend-volume\n", "bad.vol:2",
                       "CLASS/NAME", "a type that is a path");
    expect_build_error(proc, "volume p\n type test/passthru\nend-volume\n", "volume p",
                       "subvolumes", "too few subvolumes");
}

int main(void)
{
    plan_lazy();
    bfs_module_register(&leaf_mod);
    bfs_module_register(&pass_mod);
    bfs_module_register(&fan_mod);
    bfs_module_register(&early_mod);
    struct bfs_proc *proc = bfs_proc_new("test_runtime", 2);
    ok(proc != NULL, "process resources start");
    test_passthrough(proc);
    test_error_contract(proc);
    test_fanout(proc);
    test_early(proc);
    test_build_errors(proc);
    bfs_proc_free(proc);
    return done_testing();
}
