/*
 * metaops.c — the namespace workloads of `make bench` that smallfile.c does
 * not cover: many names in one folder, folder creation, renames.
 *
 *   metaops -p PHASE [-n COUNT] [-f FIRST] [-t THREADS] DIR
 *
 * PHASE:
 *   touch   create empty files DIR/fNNNNNNNN for i in [FIRST, FIRST+COUNT)
 *           (the setup of the `ls -l` figure; THREADS threads split the range
 *           so that a slow file system is filled faster; untimed by the bench)
 *   mkdir   create folders DIR/mNNNNNNNN for i in [FIRST, FIRST+COUNT)
 *   rmdir   remove them again
 *   rename  rename DIR/fNNNNNNNN to DIR/rNNNNNNNN for i in [FIRST, FIRST+COUNT)
 *           (the files made by touch; the new name hashes elsewhere, so on a
 *           distributed volume most renames cross bricks)
 *   unlink  remove DIR/fNNNNNNNN or, where that is gone, DIR/rNNNNNNNN
 * DIR must exist. One thread by default: the figures are the latency of one
 * client doing one thing after another, as smallfile.c's.
 *
 * Output: "PHASE COUNT SECONDS PER_SECOND". Any failed call ends the program
 * with status 1 and names the path.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum mo_phase { MO_TOUCH, MO_MKDIR, MO_RMDIR, MO_RENAME, MO_UNLINK, MO_NPHASES };

static const char *const mo_phase_names[MO_NPHASES] = { "touch", "mkdir", "rmdir", "rename",
                                                        "unlink" };

struct mo_worker {
    const char *dir;
    enum mo_phase phase;
    long first, count;
    int id, threads, failed;
    pthread_t thread;
};

static int mo_fail(const char *what, const char *path)
{
    fprintf(stderr, "metaops: %s %s: %s\n", what, path, strerror(errno));
    return -1;
}

static int mo_one(const struct mo_worker *w, long i)
{
    char a[4096], b[4096];
    int fd;

    switch (w->phase) {
    case MO_TOUCH:
        snprintf(a, sizeof(a), "%s/f%08ld", w->dir, i);
        fd = open(a, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
            return mo_fail("create", a);
        return close(fd) < 0 ? mo_fail("close", a) : 0;
    case MO_MKDIR:
        snprintf(a, sizeof(a), "%s/m%08ld", w->dir, i);
        return mkdir(a, 0755) < 0 ? mo_fail("mkdir", a) : 0;
    case MO_RMDIR:
        snprintf(a, sizeof(a), "%s/m%08ld", w->dir, i);
        return rmdir(a) < 0 ? mo_fail("rmdir", a) : 0;
    case MO_RENAME:
        snprintf(a, sizeof(a), "%s/f%08ld", w->dir, i);
        snprintf(b, sizeof(b), "%s/r%08ld", w->dir, i);
        return rename(a, b) < 0 ? mo_fail("rename", a) : 0;
    case MO_UNLINK:
        snprintf(a, sizeof(a), "%s/f%08ld", w->dir, i);
        if (unlink(a) == 0)
            return 0;
        if (errno != ENOENT)
            return mo_fail("unlink", a);
        snprintf(b, sizeof(b), "%s/r%08ld", w->dir, i);
        return unlink(b) < 0 ? mo_fail("unlink", b) : 0;
    case MO_NPHASES:
        break;
    }
    return -1;
}

/* Worker id handles the indexes first + k with k % threads == id. */
static void *mo_work(void *arg)
{
    struct mo_worker *w = arg;
    for (long k = w->id; k < w->count && !w->failed; k += w->threads) {
        if (mo_one(w, w->first + k) < 0)
            w->failed = 1;
    }
    return NULL;
}

static double mo_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long mo_number(const char *s, const char *what, long min)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > 100000000) {
        fprintf(stderr, "metaops: bad %s '%s'\n", what, s);
        exit(2);
    }
    return v;
}

static int mo_usage(void)
{
    fprintf(stderr, "usage: metaops -p touch|mkdir|rmdir|rename|unlink [-n COUNT] [-f FIRST] "
                    "[-t THREADS] DIR\n");
    return 2;
}

int main(int argc, char *argv[])
{
    long count = 1000, first = 0, threads = 1;
    int phase = -1, opt;

    while ((opt = getopt(argc, argv, "p:n:f:t:")) != -1) {
        switch (opt) {
        case 'p':
            for (int p = 0; p < MO_NPHASES; p++) {
                if (strcmp(optarg, mo_phase_names[p]) == 0)
                    phase = p;
            }
            if (phase < 0) {
                fprintf(stderr, "metaops: unknown phase '%s'\n", optarg);
                return 2;
            }
            break;
        case 'n': count = mo_number(optarg, "count", 1); break;
        case 'f': first = mo_number(optarg, "first index", 0); break;
        case 't': threads = mo_number(optarg, "thread count", 1); break;
        default: return mo_usage();
        }
    }
    if (phase < 0 || optind != argc - 1 || threads > 64)
        return mo_usage();

    struct mo_worker ws[64];
    int started = 0, failed = 0;
    double t0 = mo_now();
    for (int t = 0; t < threads; t++) {
        ws[t] = (struct mo_worker){ .dir = argv[optind], .phase = (enum mo_phase)phase,
                                    .first = first, .count = count, .id = t,
                                    .threads = (int)threads };
        if (pthread_create(&ws[t].thread, NULL, mo_work, &ws[t]) != 0) {
            fprintf(stderr, "metaops: cannot start thread %d\n", t);
            failed = 1;
            break;
        }
        started++;
    }
    for (int t = 0; t < started; t++) {
        pthread_join(ws[t].thread, NULL);
        failed |= ws[t].failed;
    }
    double secs = mo_now() - t0;
    if (failed)
        return 1;
    printf("%s %ld %.3f %.1f\n", mo_phase_names[phase], count, secs,
           secs > 0 ? (double)count / secs : 0.0);
    return 0;
}
