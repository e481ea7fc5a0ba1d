/*
 * test_event.c — the event loop (fd readiness, mod/del, stale events,
 * del_fd from another thread while events flow), timers (order, cancel),
 * posts from other threads, and the worker pool (event.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "core/event.h"

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_SEQ_CST)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_SEQ_CST)
#define INC(x) __atomic_add_fetch(&(x), 1, __ATOMIC_SEQ_CST)

/* Polls *v until it reaches want or ms elapse; returns whether it did. */
static int wait_for(int *v, int want, int ms)
{
    uint64_t end = bfs_now_ms() + (uint64_t)ms;
    while (LOAD(*v) < want) {
        if (bfs_now_ms() > end)
            return 0;
        usleep(1000);
    }
    return 1;
}

/* ---- fd readiness ---- */

static int got_events, got_byte, handler_calls, on_thread_ok;

static void read_handler(struct bfs_loop *loop, int fd, int events, void *arg)
{
    char c;
    if (read(fd, &c, 1) == 1)
        STORE(got_byte, c);
    STORE(got_events, events);
    if (bfs_loop_on_loop_thread(loop) && arg == (void *)0x1234)
        STORE(on_thread_ok, 1);
    INC(handler_calls);
}

static void test_fd_ready(void)
{
    struct bfs_loop *loop = bfs_loop_new();
    int p[2];
    ok(loop != NULL, "loop created");
    ok(pipe(p) == 0, "pipe");
    is_int(bfs_loop_add_fd(loop, p[0], BFS_EV_IN, read_handler, (void *)0x1234), 0, "add fd");
    is_int(bfs_loop_add_fd(loop, p[0], BFS_EV_IN, read_handler, NULL), -EEXIST,
           "adding twice is refused");
    is_int(bfs_loop_add_fd(loop, -1, BFS_EV_IN, read_handler, NULL), -EINVAL, "bad fd refused");
    is_int(bfs_loop_mod_fd(loop, 999, BFS_EV_IN), -ENOENT, "mod of unknown fd");
    is_int(bfs_loop_del_fd(loop, 999), -ENOENT, "del of unknown fd");
    is_int(bfs_loop_start(loop, "test-loop"), 0, "start loop thread");
    ok(!bfs_loop_on_loop_thread(loop), "main thread is not the loop thread");

    usleep(20000);
    is_int(LOAD(handler_calls), 0, "no call before the fd is ready");
    ok(write(p[1], "A", 1) == 1, "write");
    ok(wait_for(&handler_calls, 1, 2000), "handler called when readable");
    is_int(LOAD(got_byte), 'A', "handler read the byte");
    is_int(LOAD(got_events), BFS_EV_IN, "events = IN");
    ok(LOAD(on_thread_ok), "handler ran on the loop thread with its arg");

    /* writable: mod to OUT on the write end */
    STORE(handler_calls, 0);
    is_int(bfs_loop_del_fd(loop, p[0]), 0, "del read end");
    close(p[0]); /* the write end now reports an error (EPIPE condition) */
    is_int(bfs_loop_add_fd(loop, p[1], 0, read_handler, NULL), 0, "add write end, no events");
    usleep(20000);
    ok(LOAD(handler_calls) >= 1 && (LOAD(got_events) & BFS_EV_ERR),
       "errors are reported even when no event was asked for");
    bfs_loop_del_fd(loop, p[1]);
    close(p[1]);
    bfs_loop_free(loop);
}

static int out_calls, out_events;
static void out_handler(struct bfs_loop *loop, int fd, int events, void *arg)
{
    STORE(out_events, events);
    if (INC(out_calls) == 3)
        bfs_loop_mod_fd(loop, fd, BFS_EV_IN); /* nothing to read: calls stop */
}

static void test_mod(void)
{
    struct bfs_loop *loop = bfs_loop_new();
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    bfs_loop_add_fd(loop, sv[0], BFS_EV_IN, out_handler, NULL);
    bfs_loop_start(loop, "t");
    usleep(20000);
    is_int(LOAD(out_calls), 0, "IN on an empty socket: no calls");
    is_int(bfs_loop_mod_fd(loop, sv[0], BFS_EV_OUT), 0, "mod to OUT");
    ok(wait_for(&out_calls, 3, 2000), "level-triggered OUT fires repeatedly");
    is_int(LOAD(out_events), BFS_EV_OUT, "events = OUT");
    usleep(30000);
    is_int(LOAD(out_calls), 3, "mod back to IN from the handler stops the calls");
    bfs_loop_free(loop);
    close(sv[0]);
    close(sv[1]);
}

/* ---- two handlers each deleting the other: stale events are dropped ---- */

static int pair_fds[2], pair_calls;
static void pair_handler(struct bfs_loop *loop, int fd, int events, void *arg)
{
    INC(pair_calls);
    int other = fd == pair_fds[0] ? pair_fds[1] : pair_fds[0];
    bfs_loop_del_fd(loop, other);
    bfs_loop_del_fd(loop, fd); /* deleting itself from inside the handler */
}

static void test_stale(void)
{
    struct bfs_loop *loop = bfs_loop_new();
    int a[2], b[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, a);
    socketpair(AF_UNIX, SOCK_STREAM, 0, b);
    pair_fds[0] = a[0];
    pair_fds[1] = b[0];
    /* Both writable at once: one epoll_wait returns both events. */
    bfs_loop_add_fd(loop, a[0], BFS_EV_OUT, pair_handler, NULL);
    bfs_loop_add_fd(loop, b[0], BFS_EV_OUT, pair_handler, NULL);
    bfs_loop_start(loop, "t");
    ok(wait_for(&pair_calls, 1, 2000), "a handler ran");
    usleep(30000);
    is_int(LOAD(pair_calls), 1, "the other's already-returned event was dropped");
    bfs_loop_free(loop);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
}

/* ---- an fd number reused within one batch: the stale event is dropped ---- */

static int reuse_fds[2], reuse_spurious, reuse_first, reuse_keep[2];

static void reuse_new_handler(struct bfs_loop *loop, int fd, int events, void *arg)
{
    char c;
    /* The new socket never has data: any call here is the old fd's event. */
    if (recv(fd, &c, 1, MSG_DONTWAIT) < 0)
        INC(reuse_spurious);
}

static void reuse_handler(struct bfs_loop *loop, int fd, int events, void *arg)
{
    int other = fd == reuse_fds[0] ? reuse_fds[1] : reuse_fds[0];
    bfs_loop_del_fd(loop, fd);
    bfs_loop_del_fd(loop, other);
    /* Give `other`'s number to a fresh, empty socket and register that. */
    socketpair(AF_UNIX, SOCK_STREAM, 0, reuse_keep);
    dup2(reuse_keep[0], other);
    bfs_loop_add_fd(loop, other, BFS_EV_IN, reuse_new_handler, NULL);
    INC(reuse_first);
}

static void test_stale_reuse(void)
{
    struct bfs_loop *loop = bfs_loop_new();
    int a[2], b[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, a);
    socketpair(AF_UNIX, SOCK_STREAM, 0, b);
    ok(write(a[1], "x", 1) == 1 && write(b[1], "y", 1) == 1, "both readable");
    reuse_fds[0] = a[0];
    reuse_fds[1] = b[0];
    bfs_loop_add_fd(loop, a[0], BFS_EV_IN, reuse_handler, NULL);
    bfs_loop_add_fd(loop, b[0], BFS_EV_IN, reuse_handler, NULL);
    bfs_loop_start(loop, "t"); /* first epoll_wait returns both events */
    ok(wait_for(&reuse_first, 1, 2000), "first handler ran");
    usleep(30000);
    is_int(LOAD(reuse_first), 1, "the other old registration was not called");
    is_int(LOAD(reuse_spurious), 0,
           "the new registration on the same fd number got no stale event");
    bfs_loop_free(loop);
    for (int i = 0; i < 2; i++) {
        close(a[i]);
        close(b[i]);
        close(reuse_keep[i]);
    }
}

/* ---- del_fd from another thread while the handler keeps firing ---- */

static int flow_in_handler, flow_calls, flow_deleted, flow_violations;

static void flow_handler(struct bfs_loop *loop, int fd, int events, void *arg)
{
    STORE(flow_in_handler, 1);
    if (LOAD(flow_deleted))
        INC(flow_violations); /* called after del_fd returned */
    usleep(50);               /* widen the window for the race */
    INC(flow_calls);
    STORE(flow_in_handler, 0);
}

static void test_del_from_other_thread(void)
{
    struct bfs_loop *loop = bfs_loop_new();
    int sv[2], running_after = 0, late_calls = 0;
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    bfs_loop_start(loop, "t");
    for (int round = 0; round < 50; round++) {
        STORE(flow_deleted, 0);
        STORE(flow_calls, 0);
        /* always writable: the handler fires on every iteration */
        bfs_loop_add_fd(loop, sv[0], BFS_EV_OUT, flow_handler, NULL);
        wait_for(&flow_calls, 5 + round % 7, 2000);
        bfs_loop_del_fd(loop, sv[0]);
        running_after += LOAD(flow_in_handler);
        STORE(flow_deleted, 1);
        int calls = LOAD(flow_calls);
        usleep(2000);
        late_calls += LOAD(flow_calls) != calls;
    }
    is_int(running_after, 0, "handler never running when del_fd returns");
    is_int(late_calls, 0, "no call after del_fd returned (50 rounds)");
    is_int(LOAD(flow_violations), 0, "handler never saw the deleted flag");
    bfs_loop_free(loop);
    close(sv[0]);
    close(sv[1]);
}

/* ---- timers ---- */

static char order[64];
static int order_n;

/* Timer args carry a one-letter tag in the pointer value itself. */
#define TAG(c) ((void *)(uintptr_t)(c))

static void mark(void *arg)
{
    int n = __atomic_fetch_add(&order_n, 1, __ATOMIC_SEQ_CST);
    STORE(order[n], (char)(uintptr_t)arg);
}

static void stop_loop(void *arg)
{
    bfs_loop_stop(arg);
}

static void cancel_self(void *arg);
static struct bfs_timer *self_timer;
static struct bfs_loop *self_loop;
static int self_cancel_rc = -1;
static void cancel_self(void *arg)
{
    self_cancel_rc = bfs_timer_cancel(self_loop, self_timer);
    mark(arg);
}

static void test_timers(void)
{
    struct bfs_loop *loop = bfs_loop_new();
    self_loop = loop;
    order_n = 0;
    memset(order, 0, sizeof(order));
    uint64_t t0 = bfs_now_ms();
    bfs_timer_add(loop, 30, mark, TAG('d'));
    bfs_timer_add(loop, 10, mark, TAG('a'));
    bfs_timer_add(loop, 20, mark, TAG('c'));
    bfs_timer_add(loop, 10, mark, TAG('b')); /* same deadline-ish as "a": added later */
    bfs_timer_add(loop, 0, mark, TAG('0'));
    struct bfs_timer *x = bfs_timer_add(loop, 15, mark, TAG('X'));
    self_timer = bfs_timer_add(loop, 25, cancel_self, TAG('s'));
    bfs_timer_add(loop, 60, stop_loop, loop);
    is_int(bfs_timer_cancel(loop, x), 1, "cancel of a pending timer returns 1");
    is_int(bfs_loop_run(loop), 0, "run returns 0 after stop");
    uint64_t took = bfs_now_ms() - t0;
    is_str(order, "0abcsd", "timers fire in deadline order, ties in add order, cancelled never");
    is_int(self_cancel_rc, 0, "cancel from inside its own callback returns 0");
    is_int(bfs_timer_cancel(loop, self_timer), 0, "cancel after it fired returns 0 (safely)");
    is_int(bfs_timer_cancel(loop, x), 0, "cancel twice returns 0");
    is_int(bfs_timer_cancel(loop, NULL), 0, "cancel NULL returns 0");
    ok(took >= 60 && took < 1000, "run lasted until the stop timer (%llu ms)",
       (unsigned long long)took);

    /* a timer added from another thread wakes a sleeping loop early */
    order_n = 0;
    memset(order, 0, sizeof(order));
    bfs_loop_start(loop, "t");
    usleep(10000);
    bfs_timer_add(loop, 1, mark, TAG('w'));
    uint64_t t1 = bfs_now_ms();
    while (!LOAD(order[0]) && bfs_now_ms() - t1 < 2000)
        usleep(500);
    is_str(order, "w", "timer added from another thread fires");
    ok(bfs_now_ms() - t1 < 500, "and promptly");
    struct bfs_timer *far = bfs_timer_add(loop, 100000, mark, TAG('F'));
    is_int(bfs_timer_cancel(loop, far), 1, "cancel from another thread");
    bfs_timer_add(loop, 100000, mark, TAG('L')); /* pending at free: freed, not fired */
    bfs_loop_free(loop);
    is_str(order, "w", "pending timers are dropped by free");
}

static int slow_started, slow_done;
static void slow_timer(void *arg)
{
    STORE(slow_started, 1);
    usleep(50000);
    STORE(slow_done, 1);
}

static void test_cancel_while_firing(void)
{
    struct bfs_loop *loop = bfs_loop_new();
    bfs_loop_start(loop, "t");
    struct bfs_timer *t = bfs_timer_add(loop, 1, slow_timer, NULL);
    ok(wait_for(&slow_started, 1, 2000), "slow timer started");
    is_int(bfs_timer_cancel(loop, t), 0, "cancel while firing returns 0");
    ok(wait_for(&slow_done, 1, 2000), "callback ran to completion");
    bfs_loop_free(loop); /* ASan/valgrind: no double free, no leak */
}

/* ---- posts ---- */

#define NPOSTS 2000
static int post_seen[NPOSTS], post_count, post_in_order = 1, post_on_loop = 1;
static struct bfs_loop *post_loop;

static void post_task(void *arg)
{
    long i = (long)arg;
    if (i != LOAD(post_count))
        post_in_order = 0;
    if (!bfs_loop_on_loop_thread(post_loop))
        post_on_loop = 0;
    post_seen[i]++;
    INC(post_count);
}

static void *poster(void *arg)
{
    for (long i = 0; i < NPOSTS; i++)
        bfs_loop_post(post_loop, post_task, (void *)i);
    return NULL;
}

static void test_posts(void)
{
    pthread_t th;
    post_loop = bfs_loop_new();
    bfs_loop_start(post_loop, "t");
    pthread_create(&th, NULL, poster, NULL);
    pthread_join(th, NULL);
    ok(wait_for(&post_count, NPOSTS, 5000), "all %d posts ran", NPOSTS);
    ok(post_in_order, "posts ran in FIFO order");
    ok(post_on_loop, "posts ran on the loop thread");
    int once = 1;
    for (int i = 0; i < NPOSTS; i++)
        once &= post_seen[i] == 1;
    ok(once, "each post ran exactly once");
    bfs_loop_free(post_loop);
}

/* ---- stop/start again ---- */

static void test_restart(void)
{
    struct bfs_loop *loop = bfs_loop_new();
    bfs_loop_stop(loop); /* stop before run: run returns at once */
    uint64_t t0 = bfs_now_ms();
    bfs_timer_add(loop, 3000, stop_loop, loop);
    is_int(bfs_loop_run(loop), 0, "run after an early stop returns");
    ok(bfs_now_ms() - t0 < 1000, "without waiting for timers");
    bfs_timer_add(loop, 5, stop_loop, loop);
    is_int(bfs_loop_run(loop), 0, "a loop can be run again after it stopped");
    bfs_loop_free(loop);
}

/* ---- workers ---- */

#define NTASKS 1000
static int task_count, task_order[NTASKS], task_order_n;

static void count_task(void *arg)
{
    INC(task_count);
}

static void order_task(void *arg)
{
    task_order[task_order_n++] = (int)(long)arg; /* one thread: no race */
}

static void test_workers(void)
{
    struct bfs_workers *w = bfs_workers_new(4, "wk");
    ok(w != NULL, "pool of 4");
    int bad = 0;
    for (int i = 0; i < NTASKS; i++)
        bad += bfs_workers_submit(w, count_task, NULL) != 0;
    is_int(bad, 0, "submitted %d tasks", NTASKS);
    ok(wait_for(&task_count, NTASKS, 5000), "pool ran all tasks");
    bfs_workers_free(w);

    task_count = 0;
    w = bfs_workers_new(2, "wk");
    for (int i = 0; i < NTASKS; i++)
        bfs_workers_submit(w, count_task, NULL);
    bfs_workers_free(w); /* must drain */
    is_int(task_count, NTASKS, "free drains the queue");

    w = bfs_workers_new(1, "wk");
    for (long i = 0; i < 100; i++)
        bfs_workers_submit(w, order_task, (void *)i);
    bfs_workers_free(w);
    int fifo = task_order_n == 100;
    for (int i = 0; i < task_order_n; i++)
        fifo &= task_order[i] == i;
    ok(fifo, "one thread runs tasks in FIFO order");

    w = bfs_workers_new(0, NULL);
    ok(w != NULL, "nthreads 0 still gives a working pool");
    task_count = 0;
    bfs_workers_submit(w, count_task, NULL);
    bfs_workers_free(w);
    is_int(task_count, 1, "and it runs tasks");
}

int main(void)
{
    plan_lazy();
    test_fd_ready();
    test_mod();
    test_stale();
    test_stale_reuse();
    test_del_from_other_thread();
    test_timers();
    test_cancel_while_firing();
    test_posts();
    test_restart();
    test_workers();
    ok(bfs_now_ns() / 1000000 - bfs_now_ms() <= 1, "now_ms and now_ns agree");
    return done_testing();
}
