/*
 * smallfile.c — the small-file workload of `make bench`: create, stat, read
 * and delete FILES files of SIZE bytes spread over DIRS folders, and print
 * how many files per second each phase did.
 *
 *   smallfile [-n FILES] [-d DIRS] [-s SIZE] [-t THREADS] [-T] [-p PHASES] DIR
 *
 * PHASES is a comma list among create,stat,read,delete (default: all four in
 * that order); bench/run.sh runs one phase per call so it can drop the page
 * cache in between. create makes DIR if needed. File i is DIR/dNNN/fNNNNNNN with NNN = i % DIRS; its
 * bytes are all (i & 0xff), and read checks them, so a file system that
 * returns wrong data fails the bench instead of winning it. create makes the
 * folders, delete removes them. THREADS threads (default 1) split the
 * folders between them. Files are created with O_CREAT|O_EXCL, or with
 * -T O_CREAT|O_TRUNC (as cp and shell redirections do).
 *
 * Output, one line per phase: "PHASE FILES SECONDS FILES_PER_SECOND".
 * Any failed call ends the program with status 1 and names the path.
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

enum sf_phase { SF_CREATE, SF_STAT, SF_READ, SF_DELETE, SF_NPHASES };

static const char *const sf_phase_names[SF_NPHASES] = { "create", "stat", "read", "delete" };

struct sf_conf {
    const char *dir;
    long files;
    long dirs;
    size_t size;
    int threads;
    int create_flags; /* O_EXCL, or O_TRUNC with -T */
};

struct sf_worker {
    const struct sf_conf *conf;
    enum sf_phase phase;
    int id;
    int failed;
    pthread_t thread;
};

static void sf_file_path(const struct sf_conf *c, long i, char *buf, size_t len)
{
    snprintf(buf, len, "%s/d%03ld/f%07ld", c->dir, i % c->dirs, i);
}

static void sf_dir_path(const struct sf_conf *c, long d, char *buf, size_t len)
{
    snprintf(buf, len, "%s/d%03ld", c->dir, d);
}

static int sf_fail(const char *what, const char *path)
{
    fprintf(stderr, "smallfile: %s %s: %s\n", what, path, strerror(errno));
    return -1;
}

static int sf_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static int sf_create(const struct sf_conf *c, long i, char *buf, const char *path)
{
    memset(buf, (int)(i & 0xff), c->size);
    int fd = open(path, O_WRONLY | O_CREAT | c->create_flags | O_CLOEXEC, 0644);
    if (fd < 0)
        return sf_fail("create", path);
    if (sf_write_all(fd, buf, c->size) < 0) {
        sf_fail("write", path);
        close(fd);
        return -1;
    }
    return close(fd) < 0 ? sf_fail("close", path) : 0;
}

static int sf_stat(const struct sf_conf *c, const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return sf_fail("stat", path);
    if ((size_t)st.st_size != c->size) {
        fprintf(stderr, "smallfile: %s has %lld bytes, want %zu\n", path, (long long)st.st_size,
                c->size);
        return -1;
    }
    return 0;
}

static int sf_read(const struct sf_conf *c, long i, char *buf, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sf_fail("open", path);
    size_t got = 0;
    for (;;) {
        /* one byte more than expected, to see a file that grew */
        ssize_t n = read(fd, buf + got, c->size + 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            sf_fail("read", path);
            close(fd);
            return -1;
        }
        if (n == 0)
            break;
        got += (size_t)n;
        if (got == c->size + 1)
            break;
    }
    close(fd);
    for (size_t k = 0; k < got; k++) {
        if ((unsigned char)buf[k] != (unsigned char)(i & 0xff)) {
            fprintf(stderr, "smallfile: %s: wrong byte at %zu\n", path, k);
            return -1;
        }
    }
    if (got != c->size) {
        fprintf(stderr, "smallfile: %s: read %zu bytes, want %zu\n", path, got, c->size);
        return -1;
    }
    return 0;
}

/* Runs one phase over the folders d with d % threads == id. */
static void *sf_work(void *arg)
{
    struct sf_worker *w = arg;
    const struct sf_conf *c = w->conf;
    char path[4096];
    char *buf = malloc(c->size + 1);
    if (!buf) {
        w->failed = 1;
        return NULL;
    }
    for (long d = w->id; d < c->dirs && !w->failed; d += c->threads) {
        sf_dir_path(c, d, path, sizeof(path));
        if (w->phase == SF_CREATE && mkdir(path, 0755) < 0 && errno != EEXIST) {
            w->failed = sf_fail("mkdir", path) < 0;
            break;
        }
        for (long i = d; i < c->files; i += c->dirs) {
            int rc = 0;
            sf_file_path(c, i, path, sizeof(path));
            switch (w->phase) {
            case SF_CREATE: rc = sf_create(c, i, buf, path); break;
            case SF_STAT: rc = sf_stat(c, path); break;
            case SF_READ: rc = sf_read(c, i, buf, path); break;
            case SF_DELETE: rc = unlink(path) < 0 ? sf_fail("unlink", path) : 0; break;
            case SF_NPHASES: break;
            }
            if (rc < 0) {
                w->failed = 1;
                break;
            }
        }
        if (w->phase == SF_DELETE && !w->failed) {
            sf_dir_path(c, d, path, sizeof(path));
            if (rmdir(path) < 0)
                w->failed = sf_fail("rmdir", path) < 0;
        }
    }
    free(buf);
    return NULL;
}

static double sf_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int sf_run_phase(const struct sf_conf *c, enum sf_phase phase)
{
    struct sf_worker *ws = calloc((size_t)c->threads, sizeof(*ws));
    if (!ws)
        return -1;
    double t0 = sf_now();
    int started = 0, failed = 0;
    if (phase == SF_CREATE && mkdir(c->dir, 0755) < 0 && errno != EEXIST) {
        sf_fail("mkdir", c->dir);
        free(ws);
        return -1;
    }
    for (int t = 0; t < c->threads; t++) {
        ws[t] = (struct sf_worker){ .conf = c, .phase = phase, .id = t };
        if (pthread_create(&ws[t].thread, NULL, sf_work, &ws[t]) != 0) {
            fprintf(stderr, "smallfile: cannot start thread %d\n", t);
            failed = 1;
            break;
        }
        started++;
    }
    for (int t = 0; t < started; t++) {
        pthread_join(ws[t].thread, NULL);
        failed |= ws[t].failed;
    }
    double secs = sf_now() - t0;
    free(ws);
    if (failed)
        return -1;
    printf("%s %ld %.3f %.1f\n", sf_phase_names[phase], c->files, secs,
           secs > 0 ? (double)c->files / secs : 0.0);
    fflush(stdout);
    return 0;
}

static int sf_parse_phases(const char *list, int want[SF_NPHASES])
{
    char *copy = strdup(list), *save = NULL;
    if (!copy)
        return -1;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int p = 0; p < SF_NPHASES; p++) {
            if (strcmp(tok, sf_phase_names[p]) == 0) {
                want[p] = found = 1;
            }
        }
        if (!found) {
            fprintf(stderr, "smallfile: unknown phase '%s'\n", tok);
            free(copy);
            return -1;
        }
    }
    free(copy);
    return 0;
}

static long sf_number(const char *s, const char *what)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v <= 0) {
        fprintf(stderr, "smallfile: bad %s '%s'\n", what, s);
        exit(2);
    }
    return v;
}

int main(int argc, char *argv[])
{
    struct sf_conf c = { .files = 5000, .dirs = 50, .size = 4096, .threads = 1,
                         .create_flags = O_EXCL };
    int want[SF_NPHASES] = { 0 }, any = 0, opt;

    while ((opt = getopt(argc, argv, "n:d:s:t:p:T")) != -1) {
        switch (opt) {
        case 'n': c.files = sf_number(optarg, "file count"); break;
        case 'd': c.dirs = sf_number(optarg, "folder count"); break;
        case 's': c.size = (size_t)sf_number(optarg, "size"); break;
        case 't': c.threads = (int)sf_number(optarg, "thread count"); break;
        case 'T': c.create_flags = O_TRUNC; break;
        case 'p':
            if (sf_parse_phases(optarg, want) < 0)
                return 2;
            break;
        default:
            fprintf(stderr, "usage: smallfile [-n FILES] [-d DIRS] [-s SIZE] [-t THREADS] [-T] "
                            "[-p create,stat,read,delete] DIR\n");
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "smallfile: one DIR expected\n");
        return 2;
    }
    c.dir = argv[optind];
    if (c.dirs > 1000 || c.size > (64u << 20)) {
        fprintf(stderr, "smallfile: at most 1000 folders and 64 MiB files\n");
        return 2;
    }
    for (int p = 0; p < SF_NPHASES; p++)
        any |= want[p];
    for (int p = 0; p < SF_NPHASES; p++) {
        if ((!any || want[p]) && sf_run_phase(&c, (enum sf_phase)p) < 0)
            return 1;
    }
    return 0;
}
