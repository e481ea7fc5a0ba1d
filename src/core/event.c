/*
 * event.c — the epoll event loop, its timers and posted tasks (event.h).
 *
 * One loop = one epoll set + one eventfd (to wake epoll_wait when another
 * thread posts a task, adds a timer or asks to stop) + a mutex guarding the
 * registration table, the timer heap and the post queue. Everything the
 * loop calls (fd handlers, timer callbacks, posted tasks) runs on the loop
 * thread with the mutex released, so callbacks may register, cancel and post
 * freely.
 *
 * fd registrations. epoll_event.data carries (generation << 32 | fd), never
 * a pointer: an event already returned by epoll_wait for an fd that a
 * previous handler in the same batch deleted (and perhaps re-added) is then
 * recognised as stale by its generation and dropped, instead of reaching a
 * freed registration.
 *
 * Why del_fd is safe from another thread. The loop marks the registration it
 * is about to call as loop->current (under the mutex) and clears it after the
 * handler returns. bfs_loop_del_fd() removes the registration from the table
 * and from epoll under the mutex, so no later dispatch can find it; if the
 * handler is running right now (current == reg) on the loop thread, a caller
 * on another thread waits on loop->idle until current changes, and only then
 * frees and returns. So once it returns, the handler is neither running nor
 * will it run again. From the loop thread itself (typically from inside the
 * handler), waiting would deadlock, so the registration is only marked dead
 * and the loop frees it when the handler returns. Waiting is also why a
 * handler must never block on a lock that a del_fd caller may hold.
 *
 * Timers: a binary min-heap ordered by (deadline, id), so timers due at the
 * same time fire in the order they were added; the epoll_wait timeout is the
 * time to the earliest deadline. The handle a caller gets is the timer's id,
 * not its address (see struct timer), so bfs_timer_cancel() can never touch
 * freed memory: it frees and returns 1 while the timer is pending, and
 * returns 0 once the loop has taken it out to fire (the loop frees it after
 * the callback). Cancel does not wait for a running callback: a caller that
 * holds a lock the callback takes would deadlock.
 *
 * Posted tasks: a FIFO list, run after I/O and timers in each iteration.
 *
 * Lifetime: bfs_loop_free() stops and joins the loop thread, then frees the
 * registrations (fds are not closed), pending timers and posted tasks without
 * running them. It must not be called from the loop thread (it would join
 * itself); a loop driven by bfs_loop_run() must have returned first.
 */
#include "core/event.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define LOOP_MAX_EVENTS 64
#define WAKE_TAG UINT64_MAX /* epoll data of the eventfd */

struct reg {
    int fd;
    uint32_t gen;
    int events;       /* BFS_EV_* */
    bfs_fd_handler h;
    void *arg;
    bool dead;        /* deleted while its handler ran on the loop thread */
};

/*
 * A timer. Callers never see this struct: the handle bfs_timer_add() returns
 * is the timer's id (never 0, never reused) disguised as a struct bfs_timer
 * pointer, looked up in a hash under the loop's lock. So cancelling a timer
 * that has already fired (and been freed) is safe and simply returns 0.
 */
struct timer {
    uint64_t deadline_ns;
    uint64_t id;      /* also the tie-breaker: equal deadlines fire in add order */
    bfs_timer_fn fn;
    void *arg;
    size_t heap_idx;  /* position in the heap */
    struct timer *hnext;
};

struct post {
    bfs_task_fn fn;
    void *arg;
    struct post *next;
};

struct bfs_loop {
    int epfd;
    int wakefd;
    pthread_mutex_t lock;
    pthread_cond_t idle;       /* signalled when current changes */

    struct reg **regs;         /* indexed by fd */
    size_t nregs;
    uint32_t next_gen;
    struct reg *current;       /* registration whose handler is running */

    struct timer **heap;       /* pending timers, min-heap */
    size_t nheap, capheap;
    struct timer **tbuckets;   /* pending timers by id; [ntbuckets], power of two */
    size_t ntbuckets;
    uint64_t next_id;

    struct post *posts, *posts_tail;

    int stop;                  /* atomic */
    bool started;              /* has its own thread */
    pthread_t thread;
};

/* The loop this thread is running (bfs_loop_run sets it). */
static __thread struct bfs_loop *tls_loop;

uint64_t bfs_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t bfs_now_ms(void)
{
    return bfs_now_ns() / 1000000ull;
}

static void loop_wake(struct bfs_loop *loop)
{
    uint64_t one = 1;
    /* EAGAIN means the counter is already non-zero: the loop will wake anyway. */
    while (write(loop->wakefd, &one, sizeof(one)) < 0 && errno == EINTR)
        ;
}

int bfs_loop_on_loop_thread(const struct bfs_loop *loop)
{
    return tls_loop == loop;
}

struct bfs_loop *bfs_loop_new(void)
{
    struct bfs_loop *loop = calloc(1, sizeof(*loop));
    if (!loop)
        return NULL;
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    loop->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = WAKE_TAG};
    if (loop->epfd < 0 || loop->wakefd < 0 ||
        epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->wakefd, &ev) < 0) {
        if (loop->epfd >= 0)
            close(loop->epfd);
        if (loop->wakefd >= 0)
            close(loop->wakefd);
        free(loop);
        return NULL;
    }
    pthread_mutex_init(&loop->lock, NULL);
    pthread_cond_init(&loop->idle, NULL);
    loop->next_gen = 1;
    return loop;
}

/* ---- timer heap and id hash (loop->lock held) ---- */

static bool timer_before(const struct timer *a, const struct timer *b)
{
    return a->deadline_ns < b->deadline_ns ||
           (a->deadline_ns == b->deadline_ns && a->id < b->id);
}

static void heap_set(struct bfs_loop *loop, size_t i, struct timer *t)
{
    loop->heap[i] = t;
    t->heap_idx = i;
}

static void heap_up(struct bfs_loop *loop, size_t i)
{
    struct timer *t = loop->heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!timer_before(t, loop->heap[p]))
            break;
        heap_set(loop, i, loop->heap[p]);
        i = p;
    }
    heap_set(loop, i, t);
}

static void heap_down(struct bfs_loop *loop, size_t i)
{
    struct timer *t = loop->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= loop->nheap)
            break;
        if (c + 1 < loop->nheap && timer_before(loop->heap[c + 1], loop->heap[c]))
            c++;
        if (!timer_before(loop->heap[c], t))
            break;
        heap_set(loop, i, loop->heap[c]);
        i = c;
    }
    heap_set(loop, i, t);
}

static struct timer **tbucket(struct bfs_loop *loop, uint64_t id)
{
    return &loop->tbuckets[id & (loop->ntbuckets - 1)];
}

/* Grows the heap array and the id hash for one more timer. */
static int __timers_reserve(struct bfs_loop *loop)
{
    if (loop->nheap == loop->capheap) {
        size_t cap = loop->capheap ? loop->capheap * 2 : 16;
        struct timer **h = realloc(loop->heap, cap * sizeof(*h));
        if (!h)
            return -ENOMEM;
        loop->heap = h;
        loop->capheap = cap;
    }
    if (loop->nheap + 1 > loop->ntbuckets) {
        size_t n = loop->ntbuckets ? loop->ntbuckets * 2 : 64;
        struct timer **b = calloc(n, sizeof(*b)), **old = loop->tbuckets;
        size_t oldn = loop->ntbuckets;
        if (!b)
            return -ENOMEM;
        loop->tbuckets = b;
        loop->ntbuckets = n;
        for (size_t i = 0; i < oldn; i++) {
            for (struct timer *t = old[i], *next; t; t = next) {
                next = t->hnext;
                t->hnext = *tbucket(loop, t->id);
                *tbucket(loop, t->id) = t;
            }
        }
        free(old);
    }
    return 0;
}

/* Removes a pending timer from the heap and the hash. */
static void __timer_remove(struct bfs_loop *loop, struct timer *t)
{
    struct timer **pp = tbucket(loop, t->id);
    while (*pp != t)
        pp = &(*pp)->hnext;
    *pp = t->hnext;

    size_t i = t->heap_idx;
    struct timer *last = loop->heap[--loop->nheap];
    if (i == loop->nheap)
        return;
    heap_set(loop, i, last);
    heap_up(loop, i);
    heap_down(loop, last->heap_idx);
}

struct bfs_timer *bfs_timer_add(struct bfs_loop *loop, uint64_t ms, bfs_timer_fn fn, void *arg)
{
    struct timer *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->fn = fn;
    t->arg = arg;
    uint64_t now = bfs_now_ns();
    t->deadline_ns = ms > (UINT64_MAX - now) / 1000000ull ? UINT64_MAX : now + ms * 1000000ull;

    pthread_mutex_lock(&loop->lock);
    if (__timers_reserve(loop) < 0) {
        pthread_mutex_unlock(&loop->lock);
        free(t);
        return NULL;
    }
    t->id = ++loop->next_id; /* starts at 1: a handle is never NULL */
    t->hnext = *tbucket(loop, t->id);
    *tbucket(loop, t->id) = t;
    loop->heap[loop->nheap++] = t;
    heap_up(loop, loop->nheap - 1);
    bool earliest = loop->heap[0] == t;
    uint64_t id = t->id;
    pthread_mutex_unlock(&loop->lock);

    /* The loop recomputes its timeout each iteration; it only needs a nudge
     * when this timer is now the first due and we are not the loop. */
    if (earliest && !bfs_loop_on_loop_thread(loop))
        loop_wake(loop);
    return (struct bfs_timer *)(uintptr_t)id;
}

int bfs_timer_cancel(struct bfs_loop *loop, struct bfs_timer *handle)
{
    uint64_t id = (uintptr_t)handle;
    struct timer *t = NULL;

    if (!id)
        return 0;
    pthread_mutex_lock(&loop->lock);
    if (loop->ntbuckets) {
        for (t = *tbucket(loop, id); t && t->id != id; t = t->hnext)
            ;
        if (t)
            __timer_remove(loop, t);
    }
    pthread_mutex_unlock(&loop->lock);
    /* t is NULL if the timer fired, is firing, or was cancelled before. */
    int cancelled = t != NULL;
    free(t);
    return cancelled;
}

/* Pops and runs every timer due at `now`. Timers added by callbacks for
 * "now" are due only from the next iteration, so they cannot starve I/O.
 * A popped timer is out of the hash, so only this thread can reach it. */
static void run_timers(struct bfs_loop *loop)
{
    uint64_t now = bfs_now_ns();
    for (;;) {
        pthread_mutex_lock(&loop->lock);
        if (loop->nheap == 0 || loop->heap[0]->deadline_ns > now) {
            pthread_mutex_unlock(&loop->lock);
            return;
        }
        struct timer *t = loop->heap[0];
        __timer_remove(loop, t);
        pthread_mutex_unlock(&loop->lock);
        t->fn(t->arg);
        free(t);
    }
}

/* epoll_wait timeout in ms: -1 without timers, rounded up so we never wake
 * just before a deadline and spin. */
static int next_timeout(struct bfs_loop *loop)
{
    int timeout = -1;
    pthread_mutex_lock(&loop->lock);
    if (loop->posts) {
        timeout = 0;
    } else if (loop->nheap) {
        uint64_t now = bfs_now_ns(), dl = loop->heap[0]->deadline_ns;
        if (dl <= now) {
            timeout = 0;
        } else {
            uint64_t ms = (dl - now + 999999) / 1000000;
            timeout = ms > 3600 * 1000 ? 3600 * 1000 : (int)ms;
        }
    }
    pthread_mutex_unlock(&loop->lock);
    return timeout;
}

/* ---- posted tasks ---- */

int bfs_loop_post(struct bfs_loop *loop, bfs_task_fn fn, void *arg)
{
    struct post *p = malloc(sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->fn = fn;
    p->arg = arg;
    p->next = NULL;
    pthread_mutex_lock(&loop->lock);
    bool was_empty = loop->posts == NULL;
    if (loop->posts_tail)
        loop->posts_tail->next = p;
    else
        loop->posts = p;
    loop->posts_tail = p;
    pthread_mutex_unlock(&loop->lock);
    if (was_empty && !bfs_loop_on_loop_thread(loop))
        loop_wake(loop);
    return 0;
}

/* Runs the tasks queued so far; tasks they post run next iteration. */
static void run_posts(struct bfs_loop *loop)
{
    pthread_mutex_lock(&loop->lock);
    struct post *p = loop->posts;
    loop->posts = loop->posts_tail = NULL;
    pthread_mutex_unlock(&loop->lock);
    while (p) {
        struct post *next = p->next;
        p->fn(p->arg);
        free(p);
        p = next;
    }
}

/* ---- fd registrations ---- */

static uint32_t to_epoll(int events)
{
    return (events & BFS_EV_IN ? EPOLLIN : 0u) | (events & BFS_EV_OUT ? EPOLLOUT : 0u);
}

static int from_epoll(uint32_t ev)
{
    return (ev & EPOLLIN ? BFS_EV_IN : 0) | (ev & EPOLLOUT ? BFS_EV_OUT : 0) |
           (ev & (EPOLLERR | EPOLLHUP) ? BFS_EV_ERR : 0);
}

static struct reg *reg_get(struct bfs_loop *loop, int fd)
{
    return fd >= 0 && (size_t)fd < loop->nregs ? loop->regs[fd] : NULL;
}

int bfs_loop_add_fd(struct bfs_loop *loop, int fd, int events, bfs_fd_handler h, void *arg)
{
    if (fd < 0 || !h)
        return -EINVAL;
    struct reg *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->fd = fd;
    r->events = events;
    r->h = h;
    r->arg = arg;

    int rc = 0;
    pthread_mutex_lock(&loop->lock);
    if (reg_get(loop, fd)) {
        rc = -EEXIST;
        goto out;
    }
    if ((size_t)fd >= loop->nregs) {
        size_t n = loop->nregs ? loop->nregs : 64;
        while (n <= (size_t)fd)
            n *= 2;
        struct reg **v = realloc(loop->regs, n * sizeof(*v));
        if (!v) {
            rc = -ENOMEM;
            goto out;
        }
        memset(v + loop->nregs, 0, (n - loop->nregs) * sizeof(*v));
        loop->regs = v;
        loop->nregs = n;
    }
    r->gen = loop->next_gen++;
    if (loop->next_gen == 0) /* generation 0 is never used */
        loop->next_gen = 1;
    struct epoll_event ev = {.events = to_epoll(events),
                             .data.u64 = (uint64_t)r->gen << 32 | (uint32_t)fd};
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        rc = -errno;
        goto out;
    }
    loop->regs[fd] = r;
    r = NULL;
out:
    pthread_mutex_unlock(&loop->lock);
    free(r);
    return rc;
}

int bfs_loop_mod_fd(struct bfs_loop *loop, int fd, int events)
{
    int rc = 0;
    pthread_mutex_lock(&loop->lock);
    struct reg *r = reg_get(loop, fd);
    if (!r) {
        rc = -ENOENT;
    } else {
        struct epoll_event ev = {.events = to_epoll(events),
                                 .data.u64 = (uint64_t)r->gen << 32 | (uint32_t)fd};
        if (epoll_ctl(loop->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
            rc = -errno;
        else
            r->events = events;
    }
    pthread_mutex_unlock(&loop->lock);
    return rc;
}

int bfs_loop_del_fd(struct bfs_loop *loop, int fd)
{
    pthread_mutex_lock(&loop->lock);
    struct reg *r = reg_get(loop, fd);
    if (!r) {
        pthread_mutex_unlock(&loop->lock);
        return -ENOENT;
    }
    loop->regs[fd] = NULL;
    /* EBADF/ENOENT: the caller closed the fd first, which removed it already. */
    epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, NULL);
    if (loop->current == r) {
        if (bfs_loop_on_loop_thread(loop)) {
            r->dead = true; /* dispatch() frees it when the handler returns */
            pthread_mutex_unlock(&loop->lock);
            return 0;
        }
        while (loop->current == r)
            pthread_cond_wait(&loop->idle, &loop->lock);
    }
    pthread_mutex_unlock(&loop->lock);
    free(r);
    return 0;
}

static void dispatch(struct bfs_loop *loop, const struct epoll_event *ev)
{
    int fd = (int)(uint32_t)ev->data.u64;
    uint32_t gen = (uint32_t)(ev->data.u64 >> 32);

    pthread_mutex_lock(&loop->lock);
    struct reg *r = reg_get(loop, fd);
    if (!r || r->gen != gen) {
        pthread_mutex_unlock(&loop->lock); /* stale: deleted earlier in this batch */
        return;
    }
    /* Report only what was asked for, plus errors, even if a mod_fd raced. */
    int events = from_epoll(ev->events) & (r->events | BFS_EV_ERR);
    if (!events) {
        pthread_mutex_unlock(&loop->lock);
        return;
    }
    loop->current = r;
    bfs_fd_handler h = r->h;
    void *arg = r->arg;
    pthread_mutex_unlock(&loop->lock);

    h(loop, fd, events, arg);

    pthread_mutex_lock(&loop->lock);
    loop->current = NULL;
    bool dead = r->dead;
    pthread_cond_broadcast(&loop->idle);
    pthread_mutex_unlock(&loop->lock);
    if (dead)
        free(r);
}

/* ---- running ---- */

static void drain_wakefd(struct bfs_loop *loop)
{
    uint64_t v;
    while (read(loop->wakefd, &v, sizeof(v)) < 0 && errno == EINTR)
        ;
}

int bfs_loop_run(struct bfs_loop *loop)
{
    struct epoll_event evs[LOOP_MAX_EVENTS];
    struct bfs_loop *prev = tls_loop;
    int rc = 0;

    tls_loop = loop;
    while (!__atomic_load_n(&loop->stop, __ATOMIC_ACQUIRE)) {
        int n = epoll_wait(loop->epfd, evs, LOOP_MAX_EVENTS, next_timeout(loop));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            break;
        }
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 == WAKE_TAG)
                drain_wakefd(loop);
            else
                dispatch(loop, &evs[i]);
        }
        run_timers(loop);
        run_posts(loop);
    }
    /* Re-arm for a later run; a stop that raced with this return is consumed,
     * which is what the caller of stop wanted anyway. */
    __atomic_store_n(&loop->stop, 0, __ATOMIC_RELEASE);
    tls_loop = prev;
    return rc;
}

static void *loop_thread(void *arg)
{
    bfs_loop_run(arg);
    return NULL;
}

int bfs_loop_start(struct bfs_loop *loop, const char *thread_name)
{
    if (loop->started)
        return -EBUSY;
    int rc = pthread_create(&loop->thread, NULL, loop_thread, loop);
    if (rc)
        return -rc;
    loop->started = true;
    if (thread_name) {
        char name[16];
        snprintf(name, sizeof(name), "%s", thread_name);
        pthread_setname_np(loop->thread, name);
    }
    return 0;
}

void bfs_loop_stop(struct bfs_loop *loop)
{
    __atomic_store_n(&loop->stop, 1, __ATOMIC_RELEASE);
    if (!bfs_loop_on_loop_thread(loop))
        loop_wake(loop);
}

void bfs_loop_free(struct bfs_loop *loop)
{
    if (!loop)
        return;
    if (loop->started) {
        bfs_loop_stop(loop);
        pthread_join(loop->thread, NULL);
    }
    for (size_t i = 0; i < loop->nregs; i++)
        free(loop->regs[i]);
    free(loop->regs);
    for (size_t i = 0; i < loop->nheap; i++)
        free(loop->heap[i]);
    free(loop->heap);
    free(loop->tbuckets);
    while (loop->posts) {
        struct post *p = loop->posts;
        loop->posts = p->next;
        free(p);
    }
    close(loop->epfd);
    close(loop->wakefd);
    pthread_cond_destroy(&loop->idle);
    pthread_mutex_destroy(&loop->lock);
    free(loop);
}
