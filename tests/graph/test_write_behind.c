/*
 * test_write_behind.c — performance/write-behind over a child that holds
 * writes (test/hold, registered here) over storage/memory:
 *
 *   write-behind -> test/hold -> storage/memory
 *
 * test/hold keeps every write it receives, unanswered and not applied,
 * until the test lets it go on (forwarded to storage) or fails it (answered
 * with an error, never applied); when the graph goes away it fails what it
 * holds, as protocol/client's closing connections do. So the tests see what write-behind sends,
 * in which order, and what it answers before the child did: writes
 * answered at once, overlapping writes sent one after the other, reads,
 * fstat and lookups that wait for the writes before them, readdirplus
 * entries without the attributes of a file with writes out, failures
 * reported by the next write, fsync and flush, the window's backpressure,
 * a big write sent from the caller's bytes without a copy, O_APPEND passed
 * through, a file closed with writes out, and the option off.
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "core/event.h"
#include "core/fops-util.h"
#include "core/graph.h"

/* ---- test/hold ---- */

struct held {
    struct held *next;
    struct bfs_frame *frame;
    struct bfs_write_req *req;
};

static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static struct held *held_head;
static bool holding;

static int writes_done; /* writes storage answered through test/hold */
static struct bfs_proc *proc;
static int held_on_loop; /* held writes that reached test/hold on the loop thread */

static void hold_pass_cbk(struct bfs_frame *frame, void *cookie, int fop, int rc, const void *rep)
{
    (void)cookie;
    if (fop == BFS_FOP_WRITE && rc > 0)
        __atomic_add_fetch(&writes_done, 1, __ATOMIC_SEQ_CST);
    bfs_unwind_any(fop, frame, rc, rep);
}

static int hold_generic(struct bfs_frame *frame, struct bfs_xl *xl, int fop, const void *req)
{
    pthread_mutex_lock(&hold_lock);
    bool hold = holding && fop == BFS_FOP_WRITE;
    if (hold) {
        struct held *h = calloc(1, sizeof(*h)), **pp = &held_head;
        h->frame = frame;
        h->req = bfs_write_req_dup(req);
        if (proc && proc->loop && bfs_loop_on_loop_thread(proc->loop))
            held_on_loop++;
        while (*pp)
            pp = &(*pp)->next;
        *pp = h;
    }
    pthread_mutex_unlock(&hold_lock);
    if (hold)
        return 0;
    return bfs_wind_any(fop, frame, FIRST_CHILD(xl), hold_pass_cbk, NULL, req);
}

static void release_all(int rc);

/* As protocol/client does when the graph goes away (its connections
 * close): what it still holds fails. */
static int hold_notify(struct bfs_xl *xl, enum bfs_event ev, struct bfs_xl *from, void *data)
{
    if (ev == BFS_EV_PARENT_DOWN)
        release_all(-ENOTCONN);
    return bfs_xl_notify_default(xl, ev, from, data);
}

static const struct bfs_xl_module hold_mod = {
    .abi = BFS_XL_ABI, .type = "test/hold", .generic_fop = hold_generic,
    .notify = hold_notify, .min_children = 1, .max_children = 1,
};

static int nheld(void)
{
    int n = 0;
    pthread_mutex_lock(&hold_lock);
    for (struct held *h = held_head; h; h = h->next)
        n++;
    pthread_mutex_unlock(&hold_lock);
    return n;
}

/* The k-th held write's offset (-1: none). */
static int64_t held_off(int k)
{
    int64_t off = -1;
    pthread_mutex_lock(&hold_lock);
    struct held *h = held_head;
    while (h && k-- > 0)
        h = h->next;
    if (h)
        off = (int64_t)h->req->offset;
    pthread_mutex_unlock(&hold_lock);
    return off;
}

static struct bfs_xl *hold_xl;

/* Lets the first held write go on to storage (rc 0) or answers it rc. */
static void release_one(int rc)
{
    pthread_mutex_lock(&hold_lock);
    struct held *h = held_head;
    if (h)
        held_head = h->next;
    pthread_mutex_unlock(&hold_lock);
    if (!h)
        return;
    if (rc < 0) {
        struct bfs_write_rep none = {0};
        bfs_unwind_write(h->frame, rc, &none);
    } else if (bfs_wind_any(BFS_FOP_WRITE, h->frame, FIRST_CHILD(hold_xl), hold_pass_cbk, NULL,
                            h->req) < 0) {
        struct bfs_write_rep none = {0};
        bfs_unwind_write(h->frame, -EIO, &none);
    }
    bfs_write_req_free(h->req);
    free(h);
}

static void release_all(int rc)
{
    while (nheld() > 0)
        release_one(rc);
}

/* ---- the graph ---- */

static struct bfs_graph *graph;
static struct bfs_xl *top;
static struct bfs_stack *st;

static int build(const char *wb_opts)
{
    char vol[1024], err[256] = "";
    snprintf(vol, sizeof(vol),
             "volume mem\n type storage/memory\nend-volume\n"
             "volume hold\n type test/hold\n subvolumes mem\nend-volume\n"
             "volume wb\n type performance/write-behind\n%s subvolumes hold\nend-volume\n",
             wb_opts);
    int rc = bfs_graph_from_text(vol, strlen(vol), "<inline>", proc, &graph, err, sizeof(err));
    if (rc == 0)
        rc = bfs_graph_init(graph);
    if (rc < 0) {
        printf("# graph: %s\n", err);
        return rc;
    }
    bfs_graph_activate(graph); /* so that freeing it sends PARENT_DOWN */
    top = graph->top;
    hold_xl = bfs_graph_find(graph, "hold");
    return 0;
}

/* A new file name, open with flags: an fd that knows its inode. */
static struct bfs_fd *make_file(const char *name, int flags)
{
    struct bfs_fd *cfd = bfs_fd_new(graph, NULL, O_RDWR, 0);
    struct bfs_create_req c = {.fd = cfd, .flags = O_RDWR | O_CREAT, .mode = 0644};
    struct bfs_create_rep crep;
    c.loc.pargfid = bfs_gfid_root;
    c.loc.name = name;
    int rc = bfs_sync_create(top, st, &c, &crep);
    bfs_fd_unref(cfd);
    if (rc < 0) {
        printf("# create %s: %d\n", name, rc);
        return NULL;
    }
    struct bfs_inode *in = bfs_inode_get(graph->itable, &crep.attr.gfid, S_IFREG);
    bfs_create_rep_clear_dup(&crep);
    struct bfs_fd *fd = bfs_fd_new(graph, in, flags, 0);
    struct bfs_open_req o = {.fd = fd, .flags = (uint32_t)flags};
    o.loc.gfid = in->gfid;
    o.loc.inode = in;
    rc = bfs_sync_open(top, st, &o, NULL);
    bfs_inode_unref(in);
    if (rc < 0) {
        printf("# open %s: %d\n", name, rc);
        bfs_fd_unref(fd);
        return NULL;
    }
    return fd;
}

/* ---- asynchronous calls whose answers are counted ---- */

struct answer {
    pthread_mutex_t m;
    int calls, rc;
    bool on_loop;      /* the last answer came on the event loop's thread */
    uint64_t size;     /* fstat, lookup: the size answered */
    char data[64];     /* read */
    struct bfs_frame *frame;
};

static void answer_init(struct answer *a)
{
    memset(a, 0, sizeof(*a));
    pthread_mutex_init(&a->m, NULL);
    a->frame = bfs_frame_top_new(st, NULL);
}

static int answered(struct answer *a)
{
    pthread_mutex_lock(&a->m);
    int n = a->calls;
    pthread_mutex_unlock(&a->m);
    return n;
}

static void answer_done(struct answer *a)
{
    bfs_frame_top_free(a->frame);
    pthread_mutex_destroy(&a->m);
}

static void record(struct answer *a, int rc, uint64_t size, const void *data, size_t len)
{
    pthread_mutex_lock(&a->m);
    a->calls++;
    a->rc = rc;
    a->on_loop = bfs_loop_on_loop_thread(proc->loop);
    a->size = size;
    if (data)
        memcpy(a->data, data, len < sizeof(a->data) - 1 ? len : sizeof(a->data) - 1);
    pthread_mutex_unlock(&a->m);
}

static void write_cbk(struct bfs_frame *f, void *c, int rc, const struct bfs_write_rep *r)
{
    (void)f;
    (void)r;
    record(c, rc, 0, NULL, 0);
}

static void fstat_cbk(struct bfs_frame *f, void *c, int rc, const struct bfs_fstat_rep *r)
{
    (void)f;
    record(c, rc, r->attr.size, NULL, 0);
}

static void lookup_cbk(struct bfs_frame *f, void *c, int rc, const struct bfs_lookup_rep *r)
{
    (void)f;
    record(c, rc, r->attr.size, NULL, 0);
}

static void read_cbk(struct bfs_frame *f, void *c, int rc, const struct bfs_read_rep *r)
{
    (void)f;
    record(c, rc, r->data.len, r->data.data, r->data.len);
}

static void flush_cbk(struct bfs_frame *f, void *c, int rc, const struct bfs_flush_rep *r)
{
    (void)f;
    (void)r;
    record(c, rc, 0, NULL, 0);
}

static int awrite(struct answer *a, struct bfs_fd *fd, uint64_t off, const void *d, size_t len)
{
    answer_init(a);
    struct bfs_write_req w = {.fd = fd, .data = {d, len}, .offset = off};
    return bfs_wind_write(a->frame, top, write_cbk, a, &w);
}

static int swrite(struct bfs_fd *fd, uint64_t off, const char *s)
{
    struct bfs_write_req w = {.fd = fd, .data = {s, strlen(s)}, .offset = off};
    return bfs_sync_write(top, st, &w, NULL);
}

static int sfsync(struct bfs_fd *fd)
{
    struct bfs_fsync_req r = {.fd = fd};
    return bfs_sync_fsync(top, st, &r, NULL);
}

static int sflush(struct bfs_fd *fd)
{
    struct bfs_flush_req r = {.fd = fd};
    return bfs_sync_flush(top, st, &r, NULL);
}

/* Reads from storage itself (under write-behind and test/hold). */
static void stored(struct bfs_fd *fd, uint64_t off, size_t len, char *out)
{
    struct bfs_read_req r = {.fd = fd, .size = (uint32_t)len, .offset = off};
    struct bfs_read_rep rep;
    memset(out, 0, len + 1);
    if (bfs_sync_read(FIRST_CHILD(hold_xl), st, &r, &rep) >= 0)
        memcpy(out, rep.data.data, rep.data.len);
    bfs_read_rep_clear_dup(&rep);
}

static uint64_t dump_counter(const char *key)
{
    char *text = top->mod->dump(top);
    json_object *o = text ? json_tokener_parse(text) : NULL, *v;
    uint64_t n = o && json_object_object_get_ex(o, key, &v) ? (uint64_t)json_object_get_int64(v)
                                                              : (uint64_t)-1;
    json_object_put(o);
    free(text);
    return n;
}

/* ---- tests ---- */

static void test_answered_early_and_ordered(void)
{
    struct bfs_fd *fd = make_file("order", O_RDWR);
    holding = true;
    struct answer a, b, c;
    is_int(awrite(&a, fd, 0, "AAAAAAAAAA", 10), 0, "write A wound");
    is_int(answered(&a), 1, "A answered before the child answered it");
    is_int(a.rc, 10, "with its full size");
    is_int(nheld(), 1, "A is at the child, held");
    is_int(awrite(&b, fd, 5, "BBBBBBBBBB", 10), 0, "write B overlapping A wound");
    is_int(answered(&b), 1, "B answered too");
    is_int(nheld(), 1, "B not sent while A, which it overlaps, is out");
    is_int(awrite(&c, fd, 100, "CCCC", 4), 0, "write C elsewhere wound");
    is_int(nheld(), 2, "C, overlapping nothing, is sent at once");
    is_int(held_off(1), 100, "(it is C)");
    struct answer d;
    is_int(awrite(&d, fd, 200, "DDDD", 4), 0, "write D elsewhere wound");
    is_int(answered(&d), 1, "D answered");
    is_int(nheld(), 2, "D not sent: max-out 2 writes are out");
    release_one(0); /* A lands; B goes down */
    is_int(nheld(), 2, "A done: B sent (before D, which came after it)");
    is_int(held_off(1), 5, "(it is B, behind C)");
    release_all(0);
    char buf[32];
    stored(fd, 0, 15, buf);
    is_str(buf, "AAAAABBBBBBBBBB", "overlapping writes landed in the order they were made");
    stored(fd, 100, 4, buf);
    is_str(buf, "CCCC", "C landed");
    stored(fd, 200, 4, buf);
    is_str(buf, "DDDD", "D landed");
    answer_done(&d);
    answer_done(&a);
    answer_done(&b);
    answer_done(&c);
    bfs_fd_unref(fd);
}

static void test_reads_wait(void)
{
    struct bfs_fd *fd = make_file("rw", O_RDWR);
    holding = true;
    struct answer w, r, s, l;
    awrite(&w, fd, 1000, "0123456789", 10);
    is_int(answered(&w), 1, "write answered");
    answer_init(&r);
    struct bfs_read_req rr = {.fd = fd, .size = 10, .offset = 1000};
    is_int(bfs_wind_read(r.frame, top, read_cbk, &r, &rr), 0, "read of the range wound");
    answer_init(&s);
    struct bfs_fstat_req fr = {.fd = fd};
    is_int(bfs_wind_fstat(s.frame, top, fstat_cbk, &s, &fr), 0, "fstat wound");
    answer_init(&l);
    struct bfs_lookup_req lr = {0};
    lr.loc.pargfid = bfs_gfid_root;
    lr.loc.name = "rw";
    is_int(bfs_wind_lookup(l.frame, top, lookup_cbk, &l, &lr), 0, "lookup by name wound");
    is_int(answered(&r) + answered(&s) + answered(&l), 0,
           "read, fstat and lookup wait while the write is out");
    release_all(0);
    is_int(answered(&r), 1, "read answered once the write is done");
    is_str(r.data, "0123456789", "read after write sees the data");
    is_int(answered(&s), 1, "fstat answered");
    is_int(s.size, 1010, "fstat after write sees the size");
    is_int(answered(&l), 1, "lookup answered");
    is_int(l.size, 1010, "lookup by name after write sees the size (made again)");
    ok(dump_counter("lookups_redone") >= 1, "the dump counts the lookup made again");
    answer_done(&w);
    answer_done(&r);
    answer_done(&s);
    answer_done(&l);
    bfs_fd_unref(fd);
}

/* Whether a readdirplus of the root gives name's attributes (-1: not listed). */
static int listed_with_attr(const char *name)
{
    struct bfs_inode *root = bfs_itable_root(graph->itable);
    struct bfs_fd *dfd = bfs_fd_new(graph, root, O_RDONLY, 1);
    struct bfs_opendir_req o = {.fd = dfd};
    o.loc.gfid = bfs_gfid_root;
    o.loc.inode = root;
    int found = -1;
    if (bfs_sync_opendir(top, st, &o, NULL) == 0) {
        struct bfs_readdir_req r = {.fd = dfd, .size = 65536, .plus = true};
        struct bfs_readdir_rep rep;
        if (bfs_sync_readdir(top, st, &r, &rep) >= 0)
            for (uint32_t k = 0; k < rep.entries.count; k++)
                if (strcmp(rep.entries.v[k].name, name) == 0)
                    found = rep.entries.v[k].has_attr;
        bfs_readdir_rep_clear_dup(&rep);
    }
    bfs_fd_unref(dfd);
    bfs_inode_unref(root);
    return found;
}

static void test_readdirplus(void)
{
    struct bfs_fd *fd = make_file("listed", O_RDWR);
    is_int(listed_with_attr("listed"), 1, "readdirplus: a file with nothing out has attributes");
    holding = true;
    struct answer w;
    awrite(&w, fd, 0, "data", 4);
    is_int(listed_with_attr("listed"), 0, "a file with a write out is listed without them");
    release_all(0);
    is_int(listed_with_attr("listed"), 1, "and with them again once it is done");
    ok(dump_counter("readdirp_cleared") >= 1, "the dump counts the stripped entry");
    answer_done(&w);
    bfs_fd_unref(fd);
}

static void test_failures(void)
{
    struct bfs_fd *fd = make_file("fail", O_RDWR);
    holding = true;
    struct answer w;
    awrite(&w, fd, 0, "lost", 4);
    is_int(w.rc, 4, "write answered");
    release_all(-EIO); /* the child fails it */
    holding = false;
    is_int(swrite(fd, 10, "next"), -EIO, "the next write reports the failure");
    is_int(sfsync(fd), -EIO, "fsync reports it too");
    is_int(sfsync(fd), 0, "then it is cleared");
    is_int(swrite(fd, 10, "next"), 4, "writes work again");

    holding = true;
    struct answer w2, f;
    awrite(&w2, fd, 0, "gone", 4);
    answer_init(&f);
    struct bfs_flush_req fl = {.fd = fd};
    is_int(bfs_wind_flush(f.frame, top, flush_cbk, &f, &fl), 0, "flush wound");
    is_int(answered(&f), 0, "flush waits for the write out");
    release_all(-ENOSPC);
    holding = false;
    is_int(answered(&f), 1, "flush answered once the write ended");
    is_int(f.rc, -ENOSPC, "flush (close) reports the failure, not success");
    is_int(sflush(fd), 0, "a later flush succeeds");
    ok(dump_counter("failed") >= 2, "the dump counts failures");
    answer_done(&w);
    answer_done(&w2);
    answer_done(&f);
    bfs_fd_unref(fd);
}

static void test_window(void)
{
    /* the graph was built with a 64 KiB window */
    struct bfs_fd *fd = make_file("window", O_RDWR);
    static char big[3][32 * 1024];
    for (int i = 0; i < 3; i++)
        memset(big[i], 'a' + i, sizeof(big[i]));
    holding = true;
    struct answer a[3];
    for (int i = 0; i < 3; i++)
        awrite(&a[i], fd, (uint64_t)i * sizeof(big[i]), big[i], sizeof(big[i]));
    is_int(answered(&a[0]) + answered(&a[1]), 2, "two 32 KiB writes fill the window");
    is_int(answered(&a[2]), 0, "the third waits (backpressure)");
    release_one(0);
    is_int(answered(&a[2]), 1, "answered once room was made");
    release_all(0);
    char buf[8];
    stored(fd, 2 * 32 * 1024 + 5, 3, buf);
    is_str(buf, "ccc", "and it landed");
    ok(dump_counter("waited_window") >= 1, "the dump counts the wait");
    for (int i = 0; i < 3; i++)
        answer_done(&a[i]);
    bfs_fd_unref(fd);
}

/* A write of 64 KiB (WB_LEND_MIN) that can go out at once is sent from
 * the caller's bytes inside the call and answered after the send, without
 * our copy; the caller may scribble over its buffer once answered (what
 * test/hold keeps is its own copy, as every translator that keeps a
 * payload must). A small write is copied. */
static void test_lent(void)
{
    enum { BIG = 64 * 1024 };
    struct bfs_fd *fd = make_file("lent", O_RDWR);
    char *buf = malloc(BIG);
    memset(buf, 'L', BIG);
    holding = true;
    uint64_t lent0 = dump_counter("writes_lent"), copied0 = dump_counter("writes_copied");
    struct answer a, b;
    is_int(awrite(&a, fd, 0, buf, BIG), 0, "a 64 KiB write wound");
    is_int(answered(&a), 1, "answered inside the call");
    is_int(nheld(), 1, "and sent (held at the child)");
    is_int((int)(dump_counter("writes_lent") - lent0), 1, "sent from the caller's bytes");
    is_int((int)(dump_counter("writes_copied") - copied0), 0, "not copied");
    memset(buf, 'X', BIG); /* the caller's buffer is its own again */
    release_all(0);
    is_int(awrite(&b, fd, BIG, "small", 5), 0, "a small write wound");
    is_int((int)(dump_counter("writes_copied") - copied0), 1, "its payload was copied");
    release_all(0);
    char got[8];
    stored(fd, 0, 3, got);
    is_str(got, "LLL", "the big write landed as written (head)");
    stored(fd, BIG - 3, 3, got);
    is_str(got, "LLL", "... and tail");
    stored(fd, BIG, 5, got);
    is_str(got, "small", "the small one too");
    answer_done(&a);
    answer_done(&b);
    free(buf);
    bfs_fd_unref(fd);
}

static void test_append_and_close(void)
{
    struct bfs_fd *fd = make_file("append", O_RDWR | O_APPEND);
    holding = true;
    struct answer a;
    awrite(&a, fd, 0, "xyz", 3);
    is_int(answered(&a), 0, "an O_APPEND write is not answered before the child answers");
    release_all(0);
    is_int(answered(&a), 1, "it is answered by the child");
    answer_done(&a);
    bfs_fd_unref(fd);

    fd = make_file("closed", O_RDWR);
    struct bfs_fd *peek = bfs_fd_ref(fd);
    struct answer w;
    awrite(&w, fd, 0, "after close", 11);
    is_int(w.rc, 11, "write answered");
    bfs_fd_unref(fd); /* the caller's last reference: "close" */
    is_int(nheld(), 1, "the write is still out after the file was closed");
    release_all(0);
    char buf[16];
    stored(peek, 0, 11, buf);
    is_str(buf, "after close", "and landed");
    answer_done(&w);
    bfs_fd_unref(peek);
}

static void test_off(void)
{
    struct bfs_fd *fd = make_file("off", O_RDWR);
    holding = true;
    struct answer a;
    awrite(&a, fd, 0, "x", 1);
    is_int(answered(&a), 0, "performance.write-behind off: writes pass through");
    release_all(0);
    is_int(answered(&a), 1, "answered by the child");
    holding = false;
    answer_done(&a);
    bfs_fd_unref(fd);
}

/* Lets the held writes go on after a pause, from another thread. */
static void *release_later(void *arg)
{
    (void)arg;
    while (nheld() == 0)
        usleep(1000);
    usleep(100 * 1000);
    release_all(0);
    return NULL;
}

/* The graph goes away (unmount, a retired generation) with a write
 * answered and still out: teardown waits for it before the child goes. */
static void test_teardown_waits(void)
{
    struct bfs_fd *fd = make_file("teardown", O_RDWR);
    holding = true;
    struct answer w;
    awrite(&w, fd, 0, "late", 4);
    is_int(w.rc, 4, "write answered");
    answer_done(&w);
    bfs_fd_unref(fd); /* closed */
    int before = __atomic_load_n(&writes_done, __ATOMIC_SEQ_CST);
    pthread_t t;
    pthread_create(&t, NULL, release_later, NULL);
    bfs_graph_free(graph); /* PARENT_DOWN waits in write-behind */
    graph = NULL;
    pthread_join(t, NULL);
    holding = false;
    is_int(__atomic_load_n(&writes_done, __ATOMIC_SEQ_CST) - before, 1,
           "the graph was freed only after the write reached storage");
}

/* Polls (up to 10 s) until a has been answered n times. */
static int wait_answered(struct answer *a, int n)
{
    for (int i = 0; i < 10000 && answered(a) < n; i++)
        usleep(1000);
    return answered(a);
}

static void release_one_task(void *arg)
{
    (void)arg;
    release_one(0);
}

/* A write's answer arrives on the event loop (as protocol/client's do).
 * A flush that waited for it is answered right there: handing it to a
 * worker would add a thread wake-up to every small file's close
 * (performance note 35). A write still to send is handed to a worker, so
 * the loop never pushes a payload into the sockets. */
static void test_completion_threads(void)
{
    struct bfs_proc *old = proc;
    proc = bfs_proc_new("test_write_behind", 2);
    if (!proc || build(" option performance.write-behind-max-out 1\n") < 0) {
        ok(0, "a process with workers and its graph");
        bfs_proc_free(proc);
        proc = old;
        return;
    }
    struct bfs_fd *fd = make_file("threads", O_RDWR);
    holding = true;
    struct answer w, f;
    awrite(&w, fd, 0, "small", 5);
    is_int(w.rc, 5, "write answered at once");
    answer_init(&f);
    struct bfs_flush_req fl = {.fd = fd};
    is_int(bfs_wind_flush(f.frame, top, flush_cbk, &f, &fl), 0, "flush wound");
    is_int(answered(&f), 0, "flush waits for the write");
    bfs_loop_post(proc->loop, release_one_task, NULL); /* the write's answer, on the loop */
    is_int(wait_answered(&f, 1), 1, "flush answered once the write ended");
    is_int(f.rc, 0, "flush succeeded");
    ok(f.on_loop, "flush answered on the loop thread that completed the write (no worker)");
    answer_done(&w);
    answer_done(&f);

    struct answer w1, w2;
    held_on_loop = 0;
    awrite(&w1, fd, 0, "first", 5);
    awrite(&w2, fd, 100, "second", 6);
    is_int(nheld(), 1, "max-out 1: the second write waits in write-behind");
    bfs_loop_post(proc->loop, release_one_task, NULL);
    for (int i = 0; i < 10000 && held_off(0) != 100; i++)
        usleep(1000);
    is_int((int)held_off(0), 100, "the first write's end sent the second");
    is_int(held_on_loop, 0, "and it was sent from a worker, not the loop");
    holding = false;
    release_all(0);
    is_int(sflush(fd), 0, "flush after both");
    answer_done(&w1);
    answer_done(&w2);
    bfs_fd_unref(fd);
    bfs_graph_free(graph);
    graph = NULL;
    bfs_proc_free(proc);
    proc = old;
}

int main(void)
{
    plan_lazy();
    bfs_log_set_level(BFS_LOG_CRITICAL); /* the failures we inject are logged */
    bfs_module_register(&hold_mod);
    proc = bfs_proc_new("test_write_behind", 0);
    st = bfs_stack_new();
    if (build(" option performance.write-behind-window-size 64KB\n"
              " option performance.write-behind-max-out 2\n") < 0)
        return done_testing();
    test_answered_early_and_ordered();
    test_reads_wait();
    test_readdirplus();
    test_failures();
    test_window();
    test_lent();
    test_append_and_close();
    holding = false;
    test_teardown_waits();

    if (build(" option performance.write-behind off\n") == 0) {
        test_off();
        bfs_graph_free(graph);
    }
    test_completion_threads();
    bfs_stack_unref(st);
    bfs_proc_free(proc);
    return done_testing();
}
