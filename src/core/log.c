/*
 * log.c — process-wide logging (log.h).
 *
 * One line per message:
 *
 *   2026-12-03 09:40:00.123456 E [posix] brick1: open failed: ...
 *
 * The timestamp is UTC (the logs of several nodes line up without knowing
 * their time zones) with microseconds; then the level letter (C E W I D T),
 * then who logged in brackets, then the message. Control characters in the
 * message (a file name from a client may hold a newline) are written as
 * \xNN so one message is always exactly one line; a trailing newline given
 * by the caller is dropped.
 *
 * State: one output fd (stderr, or a file opened O_APPEND so several
 * processes can share it), guarded by a mutex so lines never interleave,
 * and the level, an atomic int read without locking by the bfs_log() macro.
 * The level starts at INFO, or at $BRICKFS_LOG_LEVEL if that parses; the
 * environment is read once, at the first call of any function here.
 */
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define LOG_STACK_BUF 2048
#define LOG_MAX_MSG (64 * 1024) /* longer messages are cut, with "..." */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = STDERR_FILENO; /* under log_lock */
static int log_level = BFS_LOG_INFO; /* atomic */
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void log_init_once(void)
{
    const char *env = getenv("BRICKFS_LOG_LEVEL");
    enum bfs_log_level lvl;
    if (env && bfs_log_level_parse(env, &lvl) == 0)
        __atomic_store_n(&log_level, (int)lvl, __ATOMIC_RELAXED);
}

static void log_init(void)
{
    pthread_once(&log_once, log_init_once);
}

int bfs_log_open(const char *path)
{
    int fd = STDERR_FILENO;

    log_init();
    if (path && strcmp(path, "-") != 0) {
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0)
            return -errno;
    }
    pthread_mutex_lock(&log_lock);
    int old = log_fd;
    log_fd = fd;
    pthread_mutex_unlock(&log_lock);
    if (old != STDERR_FILENO)
        close(old);
    return 0;
}

void bfs_log_close(void)
{
    bfs_log_open(NULL); /* back to stderr, closing any file */
}

void bfs_log_set_level(enum bfs_log_level lvl)
{
    log_init(); /* so a later first use cannot override an explicit choice */
    if ((int)lvl < BFS_LOG_NONE)
        lvl = BFS_LOG_NONE;
    if (lvl > BFS_LOG_TRACE)
        lvl = BFS_LOG_TRACE;
    __atomic_store_n(&log_level, (int)lvl, __ATOMIC_RELAXED);
}

enum bfs_log_level bfs_log_get_level(void)
{
    log_init();
    return (enum bfs_log_level)__atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

int bfs_log_level_parse(const char *s, enum bfs_log_level *out)
{
    static const struct {
        const char *name;
        enum bfs_log_level lvl;
    } names[] = {
        {"none", BFS_LOG_NONE},       {"critical", BFS_LOG_CRITICAL},
        {"error", BFS_LOG_ERROR},     {"warning", BFS_LOG_WARNING},
        {"warn", BFS_LOG_WARNING},    {"info", BFS_LOG_INFO},
        {"debug", BFS_LOG_DEBUG},     {"trace", BFS_LOG_TRACE},
    };
    if (!s)
        return -EINVAL;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcasecmp(s, names[i].name) == 0) {
            if (out)
                *out = names[i].lvl;
            return 0;
        }
    }
    return -EINVAL;
}

static char level_letter(enum bfs_log_level lvl)
{
    static const char letters[] = "-CEWIDT";
    return (lvl >= BFS_LOG_NONE && lvl <= BFS_LOG_TRACE) ? letters[lvl] : '?';
}

/* Writes the whole buffer, retrying short writes and EINTR. Errors are
 * dropped: there is nowhere left to report a failure to log. */
static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

/* Copies msg into out, escaping control bytes; returns the length written.
 * out must have room for 4 * len bytes. */
static size_t escape_into(char *out, const char *msg, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)msg[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        } else {
            out[o++] = (char)c;
        }
    }
    return o;
}

static size_t format_prefix(char *buf, size_t size, const char *who, enum bfs_log_level lvl)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(buf, size, "%04d-%02d-%02d %02d:%02d:%02d.%06ld %c [%s] ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000, level_letter(lvl), who ? who : "-");
    if (n < 0)
        return 0;
    return (size_t)n < size ? (size_t)n : size - 1;
}

void bfs_log_msg(const char *who, enum bfs_log_level lvl, const char *file, int line,
                 const char *fmt, ...)
{
    char stackmsg[LOG_STACK_BUF], stackline[LOG_STACK_BUF * 4 + 512];
    char prefix[384];
    char *msg = stackmsg, *out = stackline;
    va_list ap;

    (void)file; /* kept in the API for a future "where" field; not printed */
    (void)line;
    if (lvl == BFS_LOG_NONE || lvl > bfs_log_get_level())
        return;

    va_start(ap, fmt);
    int n = vsnprintf(stackmsg, sizeof(stackmsg), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = (size_t)n;
    bool cut = false;
    if (len >= sizeof(stackmsg)) {
        if (len > LOG_MAX_MSG) {
            len = LOG_MAX_MSG;
            cut = true;
        }
        msg = malloc(len + 1);
        if (msg) {
            va_start(ap, fmt);
            vsnprintf(msg, len + 1, fmt, ap);
            va_end(ap);
        } else {
            msg = stackmsg; /* out of memory: log what fits */
            len = sizeof(stackmsg) - 1;
            cut = true;
        }
    }
    while (len > 0 && msg[len - 1] == '\n')
        len--;

    size_t plen = format_prefix(prefix, sizeof(prefix), who, lvl);
    size_t need = plen + len * 4 + 8;
    if (need > sizeof(stackline)) {
        out = malloc(need);
        if (!out) {
            out = stackline;
            len = (sizeof(stackline) - plen - 8) / 4;
            cut = true;
        }
    }
    memcpy(out, prefix, plen);
    size_t o = plen + escape_into(out + plen, msg, len);
    if (cut) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o++] = '\n';

    pthread_mutex_lock(&log_lock);
    write_all(log_fd, out, o);
    pthread_mutex_unlock(&log_lock);

    if (msg != stackmsg)
        free(msg);
    if (out != stackline)
        free(out);
}
