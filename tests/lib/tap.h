/*
 * tap.h — minimal TAP producer for C unit and graph tests (run by prove).
 *
 *   int main(void) {
 *       plan_lazy();
 *       ok(1 + 1 == 2, "arithmetic");
 *       is_int(f(), -ENOENT, "f fails with ENOENT");
 *       return done_testing();
 *   }
 */
#ifndef BFS_TESTS_TAP_H
#define BFS_TESTS_TAP_H

#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

static inline void plan_lazy(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
}

#define ok(cond, ...)                                                                         \
    tap_ok(!!(cond), __FILE__, __LINE__, #cond, __VA_ARGS__)

__attribute__((format(printf, 5, 6))) static inline int
tap_ok(int pass, const char *file, int line, const char *expr, const char *fmt, ...)
{
    __builtin_va_list ap;
    tap_n++;
    printf("%s %d - ", pass ? "ok" : "not ok", tap_n);
    __builtin_va_start(ap, fmt);
    vprintf(fmt, ap);
    __builtin_va_end(ap);
    printf("\n");
    if (!pass) {
        tap_failed++;
        printf("#   failed at %s:%d: %s\n", file, line, expr);
    }
    return pass;
}

#define is_int(got, want, ...)                                                                \
    do {                                                                                      \
        long long g__ = (long long)(got), w__ = (long long)(want);                            \
        if (!ok(g__ == w__, __VA_ARGS__))                                                     \
            printf("#   got %lld, want %lld\n", g__, w__);                                    \
    } while (0)

#define is_str(got, want, ...)                                                                \
    do {                                                                                      \
        const char *g__ = (got), *w__ = (want);                                               \
        if (!ok(g__ && w__ && strcmp(g__, w__) == 0, __VA_ARGS__))                            \
            printf("#   got '%s', want '%s'\n", g__ ? g__ : "(null)", w__ ? w__ : "(null)"); \
    } while (0)

static inline int done_testing(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}

#endif
