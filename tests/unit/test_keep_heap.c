/*
 * test_keep_heap.c — bfs_proc_keep_heap (core/process.c): the big buffers
 * of a sequential write (write-behind's four 1 MiB copies, disperse's two
 * 1.5 MiB fragment areas) allocated, written and freed round after round
 * on a thread of its own (an arena of its own, as a mount's threads) cost
 * no page faults once the first round has faulted them in. With glibc's
 * defaults every round faults them in again (~1,800 faults a round).
 * Under AddressSanitizer malloc is not glibc's: nothing to test.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "../lib/tap.h"
#include "core/graph.h"

#define ROUNDS 20
#define MIB (1u << 20)

static long minflt(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* One write window's buffers: allocated, written, freed. */
static void one_round(void)
{
    void *b[6];
    for (int i = 0; i < 6; i++) {
        size_t len = i < 4 ? MIB : 3 * MIB / 2;
        b[i] = malloc(len);
        if (b[i])
            memset(b[i], i + 1, len);
    }
    for (int i = 0; i < 6; i++)
        free(b[i]);
}

static void *rounds(void *arg)
{
    one_round(); /* faults the arena in */
    long before = minflt();
    for (int r = 1; r < ROUNDS; r++)
        one_round();
    *(long *)arg = minflt() - before;
    return NULL;
}

/* AddressSanitizer brings its own malloc: mallopt does nothing there. */
static bool glibc_malloc(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return false;
#else
    return true;
#endif
}

int main(void)
{
    if (!glibc_malloc()) {
        ok(1, "# SKIP AddressSanitizer's malloc");
        return done_testing();
    }
    is_int(bfs_proc_keep_heap(), 0, "the heap keeps big buffers");
    long faults = -1;
    pthread_t t;
    ok(pthread_create(&t, NULL, rounds, &faults) == 0 && pthread_join(t, NULL) == 0,
       "%d rounds of 4 x 1 MiB + 2 x 1.5 MiB on a thread", ROUNDS);
    printf("# page faults after the first round: %ld\n", faults);
    ok(faults >= 0 && faults < 10 * ROUNDS,
       "after the first round the buffers cost (almost) no page faults");
    return done_testing();
}
