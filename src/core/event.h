/*
 * event.h — the epoll event loop and its timers.
 *
 * A loop runs on its own thread (bfs_loop_start) or on the caller's
 * (bfs_loop_run). Handlers and timer callbacks run on the loop thread and
 * must not block. Registration calls are thread-safe and may be made from
 * any thread, including from inside a handler.
 *
 * Lifetime: bfs_loop_del_fd() guarantees that, once it returns, the handler
 * will not be called again for that registration (unless called from the
 * handler itself on the loop thread, where the current call simply ends).
 */
#ifndef BFS_CORE_EVENT_H
#define BFS_CORE_EVENT_H

#include <stdint.h>

struct bfs_loop;
struct bfs_timer;

enum { BFS_EV_IN = 1, BFS_EV_OUT = 2, BFS_EV_ERR = 4 /* also HUP */ };

typedef void (*bfs_fd_handler)(struct bfs_loop *loop, int fd, int events, void *arg);
typedef void (*bfs_timer_fn)(void *arg);
typedef void (*bfs_task_fn)(void *arg);

struct bfs_loop *bfs_loop_new(void);
/* Stops the loop thread (if started) and frees; registered fds are not closed. */
void bfs_loop_free(struct bfs_loop *loop);
int bfs_loop_start(struct bfs_loop *loop, const char *thread_name); /* own thread */
int bfs_loop_run(struct bfs_loop *loop);  /* on caller's thread until stop */
void bfs_loop_stop(struct bfs_loop *loop); /* thread-safe, async */
int bfs_loop_on_loop_thread(const struct bfs_loop *loop);

/* events: BFS_EV_IN | BFS_EV_OUT. Level-triggered. Returns 0 or -errno. */
int bfs_loop_add_fd(struct bfs_loop *loop, int fd, int events, bfs_fd_handler h, void *arg);
int bfs_loop_mod_fd(struct bfs_loop *loop, int fd, int events);
int bfs_loop_del_fd(struct bfs_loop *loop, int fd);

/* One-shot timer after ms milliseconds. Returns NULL on ENOMEM. */
struct bfs_timer *bfs_timer_add(struct bfs_loop *loop, uint64_t ms, bfs_timer_fn fn, void *arg);
/* Returns 1 if cancelled before firing, 0 if it already fired or is firing.
 * Once it returns, fn will not be started; frees the timer either way. */
int bfs_timer_cancel(struct bfs_loop *loop, struct bfs_timer *t);

/* Runs fn(arg) on the loop thread soon (thread-safe). 0 or -ENOMEM. */
int bfs_loop_post(struct bfs_loop *loop, bfs_task_fn fn, void *arg);

uint64_t bfs_now_ns(void); /* CLOCK_MONOTONIC */
uint64_t bfs_now_ms(void);

/*
 * Worker pool for blocking work (disk I/O in storage/posix). Tasks run in
 * FIFO order on up to nthreads threads.
 */
struct bfs_workers;
struct bfs_workers *bfs_workers_new(int nthreads, const char *name);
void bfs_workers_free(struct bfs_workers *w); /* drains queued tasks first */
int bfs_workers_submit(struct bfs_workers *w, bfs_task_fn fn, void *arg); /* 0 / -ENOMEM */

#endif
