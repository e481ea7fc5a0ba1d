/*
 * log.h — process-wide logging. Every line names its translator (or
 * program component), so a log from a graph of many translators can be read.
 *
 *   2026-12-03 09:40:00.123456 E [posix] brick1: open failed: ... (errno)
 *
 * Output goes to stderr by default or to a file (bfs_log_open). Thread-safe.
 */
#ifndef BFS_CORE_LOG_H
#define BFS_CORE_LOG_H

enum bfs_log_level {
    BFS_LOG_NONE = 0,
    BFS_LOG_CRITICAL,
    BFS_LOG_ERROR,
    BFS_LOG_WARNING,
    BFS_LOG_INFO,
    BFS_LOG_DEBUG,
    BFS_LOG_TRACE,
};

/* path NULL or "-" means stderr. Returns 0 or -errno. */
int bfs_log_open(const char *path);
void bfs_log_close(void);
void bfs_log_set_level(enum bfs_log_level lvl);
enum bfs_log_level bfs_log_get_level(void);
/* "error", "warning", "info", "debug", "trace", "none"; -EINVAL otherwise. */
int bfs_log_level_parse(const char *s, enum bfs_log_level *out);

void bfs_log_msg(const char *who, enum bfs_log_level lvl, const char *file, int line,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define bfs_log(who, lvl, ...)                                                                 \
    do {                                                                                       \
        if ((lvl) <= bfs_log_get_level())                                                      \
            bfs_log_msg((who), (lvl), __FILE__, __LINE__, __VA_ARGS__);                        \
    } while (0)

/* Shorthands taking a translator (struct bfs_xl *) whose name tags the line. */
#define XL_ERR(xl, ...) bfs_log((xl)->name, BFS_LOG_ERROR, __VA_ARGS__)
#define XL_WARN(xl, ...) bfs_log((xl)->name, BFS_LOG_WARNING, __VA_ARGS__)
#define XL_INFO(xl, ...) bfs_log((xl)->name, BFS_LOG_INFO, __VA_ARGS__)
#define XL_DBG(xl, ...) bfs_log((xl)->name, BFS_LOG_DEBUG, __VA_ARGS__)
#define XL_TRACE(xl, ...) bfs_log((xl)->name, BFS_LOG_TRACE, __VA_ARGS__)

#endif
