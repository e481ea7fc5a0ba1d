/*
 * test_log.c — logging (log.h): line format, [who] tag, level filtering,
 * BRICKFS_LOG_LEVEL, escaping, many threads writing at once.
 */
#include <errno.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "core/log.h"

static char path[] = "/tmp/bfs-test-log-XXXXXX";

/* Reads the whole log file (malloc'd, NUL-terminated). */
static char *slurp(void)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = calloc(1, (size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n)
        buf[0] = '\0';
    fclose(f);
    return buf;
}

static void truncate_log(void)
{
    if (truncate(path, 0) != 0)
        perror("truncate");
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

#define LINE_RE "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} "

static int matches(const char *text, const char *re)
{
    regex_t r;
    if (regcomp(&r, re, REG_EXTENDED | REG_NEWLINE | REG_NOSUB) != 0)
        return 0;
    int m = regexec(&r, text, 0, NULL, 0) == 0;
    regfree(&r);
    return m;
}

static void test_env_default(void)
{
    /* Set before any log call: the first use must pick it up. */
    setenv("BRICKFS_LOG_LEVEL", "debug", 1);
    is_int(bfs_log_get_level(), BFS_LOG_DEBUG, "BRICKFS_LOG_LEVEL sets the starting level");
    setenv("BRICKFS_LOG_LEVEL", "error", 1);
    is_int(bfs_log_get_level(), BFS_LOG_DEBUG, "environment is read once, at first use");
    unsetenv("BRICKFS_LOG_LEVEL");
}

static void test_parse(void)
{
    enum bfs_log_level l;
    is_int(bfs_log_level_parse("error", &l), 0, "parse error");
    is_int(l, BFS_LOG_ERROR, "error level");
    is_int(bfs_log_level_parse("WARNING", &l), 0, "parse is case-insensitive");
    is_int(l, BFS_LOG_WARNING, "warning level");
    bfs_log_level_parse("trace", &l);
    is_int(l, BFS_LOG_TRACE, "trace");
    bfs_log_level_parse("none", &l);
    is_int(l, BFS_LOG_NONE, "none");
    bfs_log_level_parse("info", &l);
    is_int(l, BFS_LOG_INFO, "info");
    bfs_log_level_parse("debug", &l);
    is_int(l, BFS_LOG_DEBUG, "debug");
    is_int(bfs_log_level_parse("loud", &l), -EINVAL, "unknown level refused");
    is_int(bfs_log_level_parse(NULL, &l), -EINVAL, "NULL refused");
}

static void test_format(void)
{
    truncate_log();
    bfs_log_set_level(BFS_LOG_INFO);
    bfs_log("posix", BFS_LOG_ERROR, "brick1: open failed: %s (%d)", "No such file", 2);
    char *s = slurp();
    ok(matches(s, LINE_RE "E \\[posix\\] brick1: open failed: No such file \\(2\\)$"),
       "error line: timestamp with microseconds, letter, [who], message");
    is_int(count_lines(s), 1, "exactly one line");
    free(s);

    truncate_log();
    bfs_log("a", BFS_LOG_CRITICAL, "c");
    bfs_log("b", BFS_LOG_WARNING, "w");
    bfs_log("c", BFS_LOG_INFO, "i\n"); /* trailing newline dropped */
    bfs_log(NULL, BFS_LOG_INFO, "nobody");
    s = slurp();
    ok(matches(s, LINE_RE "C \\[a\\] c$"), "critical letter C");
    ok(matches(s, LINE_RE "W \\[b\\] w$"), "warning letter W");
    ok(matches(s, LINE_RE "I \\[c\\] i$"), "info letter I, trailing newline dropped");
    ok(matches(s, LINE_RE "I \\[-\\] nobody$"), "NULL who shows as [-]");
    is_int(count_lines(s), 4, "four lines");
    free(s);

    truncate_log();
    bfs_log("x", BFS_LOG_INFO, "evil\nname\x01");
    s = slurp();
    ok(matches(s, LINE_RE "I \\[x\\] evil\\\\x0aname\\\\x01$"), "control bytes are escaped");
    is_int(count_lines(s), 1, "an embedded newline cannot forge a second line");
    free(s);

    truncate_log();
    char *big = malloc(10001);
    memset(big, 'z', 10000);
    big[10000] = '\0';
    bfs_log("big", BFS_LOG_INFO, "%s", big);
    s = slurp();
    ok(strstr(s, big) != NULL && count_lines(s) == 1, "a 10000-byte message is kept whole");
    free(s);
    free(big);
}

static void test_levels(void)
{
    truncate_log();
    bfs_log_set_level(BFS_LOG_WARNING);
    is_int(bfs_log_get_level(), BFS_LOG_WARNING, "set level");
    bfs_log("f", BFS_LOG_ERROR, "shown-error");
    bfs_log("f", BFS_LOG_WARNING, "shown-warning");
    bfs_log("f", BFS_LOG_INFO, "hidden-info");
    bfs_log("f", BFS_LOG_DEBUG, "hidden-debug");
    bfs_log_msg("f", BFS_LOG_TRACE, __FILE__, __LINE__, "hidden-direct");
    char *s = slurp();
    ok(strstr(s, "shown-error") && strstr(s, "shown-warning"), "levels at or above pass");
    ok(!strstr(s, "hidden"), "levels below are filtered (macro and direct call)");
    free(s);

    truncate_log();
    bfs_log_set_level(BFS_LOG_TRACE);
    bfs_log("f", BFS_LOG_TRACE, "trace-now");
    bfs_log("f", BFS_LOG_DEBUG, "debug-now");
    s = slurp();
    ok(matches(s, LINE_RE "T \\[f\\] trace-now$") && matches(s, LINE_RE "D \\[f\\] debug-now$"),
       "trace and debug shown at TRACE with letters T and D");
    free(s);

    truncate_log();
    bfs_log_set_level(BFS_LOG_NONE);
    bfs_log("f", BFS_LOG_CRITICAL, "nothing");
    s = slurp();
    is_int(strlen(s), 0, "NONE silences everything");
    free(s);
    bfs_log_set_level(BFS_LOG_INFO);
}

#define NTHREADS 4
#define NLINES 500

static void *writer(void *arg)
{
    long id = (long)arg;
    for (int i = 0; i < NLINES; i++)
        bfs_log("thr", BFS_LOG_INFO, "thread %ld line %d %s", id, i,
                "padding-padding-padding-padding-padding-padding-padding");
    return NULL;
}

static void test_threads(void)
{
    pthread_t t[NTHREADS];
    truncate_log();
    for (long i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, writer, (void *)i);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    char *s = slurp();
    is_int(count_lines(s), NTHREADS * NLINES, "every line from every thread written");
    int bad = 0;
    regex_t r;
    regcomp(&r, LINE_RE "I \\[thr\\] thread [0-9] line [0-9]+ (padding-){6}padding$",
            REG_EXTENDED | REG_NOSUB);
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"))
        bad += regexec(&r, line, 0, NULL, 0) != 0;
    regfree(&r);
    is_int(bad, 0, "no line is interleaved with another");
    free(s);
}

static void test_reopen(void)
{
    is_int(bfs_log_open("/nonexistent-dir/x.log"), -ENOENT, "open reports -errno");
    truncate_log();
    bfs_log("still", BFS_LOG_INFO, "same file after failed open");
    char *s = slurp();
    ok(strstr(s, "same file after failed open") != NULL, "failed open keeps the old output");
    free(s);
    bfs_log_close();
    truncate_log();
    bfs_log("gone", BFS_LOG_INFO, "to stderr now (expected in test output)");
    s = slurp();
    is_int(strlen(s), 0, "after close nothing goes to the file");
    free(s);
}

int main(void)
{
    plan_lazy();
    test_env_default();
    int fd = mkstemp(path);
    ok(fd >= 0, "temp file");
    close(fd);
    is_int(bfs_log_open(path), 0, "open log file");
    test_parse();
    test_format();
    test_levels();
    test_threads();
    test_reopen();
    unlink(path);
    return done_testing();
}
