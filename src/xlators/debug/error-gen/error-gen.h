/*
 * error-gen.h — internal interface of debug/error-gen, the fault injector
 * that graph tests put under a translator to cause failures and slow
 * answers that are hard to get for real.
 *
 * A configuration (struct eg_conf) is parsed from options at init and
 * again at reconfigure, and swapped in under priv->lock; each call reads it
 * under the same lock while it rolls the dice.
 */
#ifndef BFS_XL_ERROR_GEN_H
#define BFS_XL_ERROR_GEN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/fops-util.h"
#include "core/xlator.h"

struct eg_conf {
    uint32_t failure_pct;          /* chance an enabled fop fails, 0..100 */
    int error_no;                  /* positive errno */
    bool random_errno;             /* pick from the fop's plausible errors */
    bool fail_on_wind;             /* refuse (return -errno) instead of answering */
    bool enabled[BFS_FOP_COUNT];   /* fops subject to failure and delay */
    uint64_t delay_ms;             /* answer this much later ... */
    uint32_t delay_pct;            /* ... with this chance */
};

/* eg-conf.c: options -> conf. A key is looked up in `over` (the keys a
 * reconfigure changes), then in `base` (the configuration in force), then
 * in the volfile options and defaults; either dict may be NULL. On a bad
 * value returns -EINVAL and logs why. */
int bfs__eg_conf_parse(struct bfs_xl *xl, const struct bfs_dict *over,
                       const struct bfs_dict *base, struct eg_conf *out);
/* An errno plausible for fop (for random-failure). r is a random number. */
int bfs__eg_random_errno(int fop, uint64_t r);

#endif
