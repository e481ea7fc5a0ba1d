/*
 * error-gen.c — debug/error-gen: fails a chosen share of fops with a chosen
 * errno and/or answers them late, so graph tests can reach error paths.
 *
 *   option failure 100          every enabled fop fails ...
 *   option error-no ENOTCONN    ... with this errno (name or number)
 *   option random-failure on    ... or with a random errno plausible for it
 *   option enable write,fsync   only these fops (default: all)
 *   option delay-ms 200         answers come 200 ms late (a loop timer) ...
 *   option delay-percent 50     ... for half of the calls (default all)
 *   option fail-on-wind on      a failing call is refused (the wind returns
 *                               -errno, no callback) instead of answered
 *
 * A failed call never reaches the child. A delayed call goes down at once;
 * its answer is deep-copied and replayed from a timer on the process event
 * loop. Every fop goes through the module's generic_fop. `reconfigure`
 * changes the keys it is given and keeps the others as they are in force,
 * then swaps the whole configuration at once (tests switch faults on and
 * off); a bad value changes nothing.
 *
 * Lifetime of delayed answers: each is on priv->pending until its timer
 * runs. fini cancels what has not fired; those frames are dropped (the
 * graph is going away). A timer caught firing during fini keeps priv alive
 * (leaked, with a warning) rather than risk a use after free.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/event.h"
#include "core/graph.h"
#include "error-gen.h"

struct eg_priv;

struct eg_delayed {
    struct eg_delayed *next, *prev;
    struct eg_priv *p;       /* not the xl: a timer firing at fini outlives it */
    struct bfs_frame *frame;
    int fop, rc;
    void *rep;               /* deep copy, or NULL for an error answer */
    struct bfs_timer *timer;
};

struct eg_priv {
    pthread_mutex_t lock;    /* guards everything below */
    struct eg_conf conf;
    struct bfs_dict *opts;   /* option text in force (volfile + reconfigures) */
    uint64_t rng;            /* xorshift64* state */
    struct bfs_loop *loop;
    struct eg_delayed pending; /* list head */
    uint64_t calls, injected, delayed;
};

static uint64_t rng_next(struct eg_priv *p)
{
    uint64_t x = p->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    p->rng = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* ---- delayed answers ---- */

static void delayed_free(struct eg_delayed *d)
{
    if (d->rep) {
        bfs_fop_info[d->fop].rep_clear_dup(d->rep);
        free(d->rep);
    }
    free(d);
}

static void delayed_fire(void *arg)
{
    struct eg_delayed *d = arg;
    struct eg_priv *p = d->p;
    pthread_mutex_lock(&p->lock);
    d->prev->next = d->next;
    d->next->prev = d->prev;
    pthread_mutex_unlock(&p->lock);
    bfs_unwind_any(d->fop, d->frame, d->rc, d->rep);
    delayed_free(d);
}

/* Answers frame after delay_ms; on failure to arm a timer, answers now. */
static void answer_later(struct bfs_xl *xl, struct bfs_frame *frame, int fop, int rc,
                         const void *rep, uint64_t delay_ms)
{
    struct eg_priv *p = xl->private;
    struct eg_delayed *d = calloc(1, sizeof(*d));
    if (d && rc >= 0 && rep) {
        d->rep = calloc(1, bfs_fop_info[fop].rep_size);
        if (!d->rep || bfs_fop_info[fop].rep_copy_into(d->rep, rep) < 0) {
            free(d->rep);
            free(d);
            d = NULL;
        }
    }
    if (!d || !p->loop) {
        free(d);
        bfs_unwind_any(fop, frame, rc, rep);
        return;
    }
    d->p = p;
    d->frame = frame;
    d->fop = fop;
    d->rc = rc;
    /* link first and arm under the lock: the timer may fire at once on the
     * loop thread, and must find itself on the list */
    pthread_mutex_lock(&p->lock);
    d->next = p->pending.next;
    d->prev = &p->pending;
    p->pending.next->prev = d;
    p->pending.next = d;
    d->timer = bfs_timer_add(p->loop, delay_ms, delayed_fire, d);
    if (!d->timer) {
        d->prev->next = d->next;
        d->next->prev = d->prev;
    }
    pthread_mutex_unlock(&p->lock);
    if (!d->timer) {
        bfs_unwind_any(fop, frame, rc, rep);
        delayed_free(d);
    }
}

/* ---- the fop path ---- */

struct eg_decision {
    int err;          /* > 0: fail with this errno */
    uint64_t delay_ms;
    bool refuse;
};

static struct eg_decision decide(struct eg_priv *p, int fop)
{
    struct eg_decision d = {0};
    pthread_mutex_lock(&p->lock);
    const struct eg_conf *c = &p->conf;
    p->calls++;
    if (c->enabled[fop]) {
        if (c->failure_pct && rng_next(p) % 100 < c->failure_pct) {
            d.err = c->random_errno ? bfs__eg_random_errno(fop, rng_next(p)) : c->error_no;
            d.refuse = c->fail_on_wind;
            p->injected++;
        }
        if (c->delay_ms && !d.refuse && rng_next(p) % 100 < c->delay_pct) {
            d.delay_ms = c->delay_ms;
            p->delayed++;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return d;
}

static void eg_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    uint64_t delay_ms = (uint64_t)(uintptr_t)cookie;
    if (delay_ms)
        answer_later(frame->xl, frame, fop, rc, rep, delay_ms);
    else
        bfs_unwind_any(fop, frame, rc, rep);
}

static int eg_generic(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req)
{
    struct eg_decision d = decide(xl->private, fop);
    if (d.err && d.refuse) {
        XL_DBG(xl, "%s refused with %s", bfs_fop_name(fop), strerrorname_np(d.err));
        return -d.err;
    }
    if (d.err) {
        XL_DBG(xl, "%s fails with %s", bfs_fop_name(fop), strerrorname_np(d.err));
        if (d.delay_ms)
            answer_later(xl, frame, fop, -d.err, NULL, d.delay_ms);
        else
            bfs_unwind_any(fop, frame, -d.err, NULL);
        return 0;
    }
    return bfs_wind_any(fop, frame, FIRST_CHILD(xl), eg_cbk, (void *)(uintptr_t)d.delay_ms,
                        req);
}

/* ---- module ---- */

static int eg_init(struct bfs_xl *xl)
{
    struct eg_priv *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    int rc = bfs__eg_conf_parse(xl, NULL, NULL, &p->conf);
    if (rc == 0 && !(p->opts = bfs_dict_copy(xl->options)))
        rc = -ENOMEM;
    if (rc < 0) {
        free(p);
        return rc;
    }
    pthread_mutex_init(&p->lock, NULL);
    p->pending.next = p->pending.prev = &p->pending;
    int64_t seed = bfs_xl_opt_int(xl, "seed");
    p->rng = seed ? (uint64_t)seed : bfs_now_ns() ^ (uint64_t)(uintptr_t)p;
    if (!p->rng)
        p->rng = 0x9e3779b97f4a7c15ull;
    p->loop = xl->graph && xl->graph->proc ? xl->graph->proc->loop : NULL;
    if (p->conf.delay_ms && !p->loop)
        XL_WARN(xl, "delay-ms set but the process has no event loop: answers are not delayed");
    xl->private = p;
    return 0;
}

static void eg_fini(struct bfs_xl *xl)
{
    struct eg_priv *p = xl->private;
    if (!p)
        return;
    size_t dropped = 0, firing = 0;
    pthread_mutex_lock(&p->lock);
    struct eg_delayed *d = p->pending.next;
    while (d != &p->pending) {
        struct eg_delayed *next = d->next;
        if (bfs_timer_cancel(p->loop, d->timer) == 1) {
            d->prev->next = d->next;
            d->next->prev = d->prev;
            delayed_free(d);
            dropped++;
        } else {
            firing++;
        }
        d = next;
    }
    pthread_mutex_unlock(&p->lock);
    if (dropped)
        XL_WARN(xl, "fini dropped %zu delayed answers", dropped);
    xl->private = NULL;
    if (firing) {
        XL_WARN(xl, "fini while %zu delayed answers fire; keeping their state", firing);
        return;
    }
    pthread_mutex_destroy(&p->lock);
    bfs_dict_unref(p->opts);
    free(p);
}

static int merge_one(const char *key, enum bfs_val_type type, const void *val, size_t len,
                     void *arg)
{
    (void)len;
    return type == BFS_VAL_STR ? bfs_dict_set_str(arg, key, val) : 0;
}

/* The keys given change; the others keep the value in force. */
static int eg_reconfigure(struct bfs_xl *xl, struct bfs_dict *options)
{
    struct eg_priv *p = xl->private;
    struct eg_conf c;
    struct bfs_dict *next = bfs_dict_copy(p->opts);
    if (!next)
        return -ENOMEM;
    int rc = bfs__eg_conf_parse(xl, options, p->opts, &c);
    if (rc == 0)
        rc = bfs_dict_foreach(options, merge_one, next);
    if (rc < 0) {
        bfs_dict_unref(next);
        return rc;
    }
    pthread_mutex_lock(&p->lock);
    p->conf = c;
    struct bfs_dict *old = p->opts;
    p->opts = next;
    pthread_mutex_unlock(&p->lock);
    bfs_dict_unref(old);
    return 0;
}

static char *eg_dump(struct bfs_xl *xl)
{
    struct eg_priv *p = xl->private;
    char *s = NULL;
    pthread_mutex_lock(&p->lock);
    int n = asprintf(&s,
                     "{\"name\":\"%s\",\"calls\":%" PRIu64 ",\"injected\":%" PRIu64
                     ",\"delayed\":%" PRIu64 ",\"failure\":%u,\"error_no\":\"%s\","
                     "\"delay_ms\":%" PRIu64 "}",
                     xl->name, p->calls, p->injected, p->delayed, p->conf.failure_pct,
                     strerrorname_np(p->conf.error_no) ? strerrorname_np(p->conf.error_no) : "?",
                     p->conf.delay_ms);
    pthread_mutex_unlock(&p->lock);
    return n < 0 ? NULL : s;
}

static const struct bfs_option_desc eg_options[] = {
    {.key = "failure", .type = BFS_OPT_PERCENT, .def = "0",
     .description = "percentage of enabled fops that fail", .flags = BFS_OPT_F_RECONF},
    {.key = "error-no", .type = BFS_OPT_STR, .def = "EIO",
     .description = "errno of injected failures, by name (EIO) or number",
     .flags = BFS_OPT_F_RECONF},
    {.key = "random-failure", .type = BFS_OPT_BOOL, .def = "off",
     .description = "fail with a random errno plausible for each fop instead of error-no",
     .flags = BFS_OPT_F_RECONF},
    {.key = "enable", .type = BFS_OPT_STR, .def = "all",
     .description = "comma-separated fop names subject to faults, or all",
     .flags = BFS_OPT_F_RECONF},
    {.key = "delay-ms", .type = BFS_OPT_INT, .def = "0", .min = 0, .max = 600000,
     .description = "delay answers of enabled fops by this many milliseconds",
     .flags = BFS_OPT_F_RECONF},
    {.key = "delay-percent", .type = BFS_OPT_PERCENT, .def = "100",
     .description = "percentage of enabled fops whose answer is delayed",
     .flags = BFS_OPT_F_RECONF},
    {.key = "fail-on-wind", .type = BFS_OPT_BOOL, .def = "off",
     .description = "refuse failing calls (wind returns -errno) instead of answering them",
     .flags = BFS_OPT_F_RECONF},
    {.key = "seed", .type = BFS_OPT_INT, .def = "0", .min = 0, .max = INT64_MAX,
     .description = "random seed for reproducible faults (0: from the clock)"},
    {.key = NULL},
};

BFS_XL_MODULE(.type = "debug/error-gen", .options = eg_options, .init = eg_init,
              .fini = eg_fini, .reconfigure = eg_reconfigure, .dump = eg_dump,
              .generic_fop = eg_generic, .min_children = 1, .max_children = 1);
