/*
 * shd-crawl.c — the daemon's work: list the pending index of every brick of
 * each replica set, ask replicate to heal each GFID listed, and keep the
 * progress figures (written atomically to the state file).
 *
 * A crawl of one set runs in passes. A pass lists every brick's index
 * (paged, SHD_PAGE GFIDs a call), merges the lists (a GFID blamed on two
 * bricks is healed once) and heals each GFID with getxattr
 * "brickfs.heal.now". An entry whose heal leaves it pending, because its
 * name does not exist yet on a brick that missed its creation, is retried
 * in the next pass, after the heal of its parent directory has created it
 * (the parent's entry heal also marks the new names, which puts them on the
 * index). Passes repeat while one of them made progress, at most
 * SHD_MAX_PASSES. After a heal that leaves the inode clean, and for an
 * inode that exists on no brick any more (removed while it was pending),
 * the bricks' indices are asked to purge the entry ("brickfs.index.purge":
 * each index checks the counters itself, so a purge can never drop the
 * entry of an inode that is pending again). An entry found clean twice in
 * one crawl (its index keeps it: a counter replicate does not know) is no
 * progress: it is logged and counted as remaining.
 *
 * Lifetimes: the lists of one pass are freed at its end; the crawler thread
 * lives from start to SIGTERM.
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shd.h"

#define SHD_MAX_PASSES 64

/* ---- index listing ---- */

/* GFIDs asked of one listing call: SHD_PAGE, or $BRICKFS_SHD_PAGE (tests
 * use a small page to go through the continuation). */
static int64_t page_size(void)
{
    const char *e = getenv("BRICKFS_SHD_PAGE");
    long v = e ? atol(e) : 0;
    return v > 0 && v <= 65536 ? v : SHD_PAGE;
}

int shd_list_index(struct shd *s, struct bfs_xl *child, struct bfs_gfid **out, size_t *n)
{
    struct bfs_gfid *v = NULL;
    size_t len = 0, cap = 0;
    int64_t off = 0, eof = 0;
    int rc = 0;
    while (!eof) {
        struct bfs_getxattr_req req = {.name = "brickfs.index.pending", .xdata = bfs_dict_new()};
        struct bfs_getxattr_rep rep;
        req.loc.gfid.b[15] = 1;
        if (!req.xdata || bfs_dict_set_int(req.xdata, "index-offset", off) < 0 ||
            bfs_dict_set_int(req.xdata, "index-count", page_size()) < 0) {
            bfs_dict_unref(req.xdata);
            rc = -ENOMEM;
            break;
        }
        rc = bfs_sync_getxattr(child, s->st, &req, &rep);
        bfs_dict_unref(req.xdata);
        const void *raw = NULL;
        size_t rawlen = 0;
        if (rc >= 0 && (bfs_dict_get_bin(rep.xattrs, "brickfs.index.pending", &raw, &rawlen) < 0 ||
                        bfs_dict_get_int(rep.xattrs, "brickfs.index.offset", &off) < 0 ||
                        bfs_dict_get_int(rep.xattrs, "brickfs.index.eof", &eof) < 0 ||
                        rawlen % sizeof(struct bfs_gfid)))
            rc = -EPROTO;
        size_t k = rawlen / sizeof(struct bfs_gfid);
        if (rc >= 0 && len + k > cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            while (ncap < len + k)
                ncap *= 2;
            struct bfs_gfid *nv = realloc(v, ncap * sizeof(*v));
            if (!nv)
                rc = -ENOMEM;
            else
                v = nv, cap = ncap;
        }
        if (rc >= 0 && k) {
            memcpy(v + len, raw, k * sizeof(*v));
            len += k;
        }
        bfs_getxattr_rep_clear_dup(&rep);
        if (rc < 0)
            break;
    }
    if (rc < 0) {
        free(v);
        return rc;
    }
    *out = v;
    *n = len;
    return 0;
}

/* ---- one GFID ---- */

static void copy_str(const struct bfs_dict *d, const char *key, char *out, size_t len)
{
    const char *v = NULL;
    out[0] = '\0';
    if (bfs_dict_get_str(d, key, &v) == 0 && v)
        snprintf(out, len, "%s", v);
}

void shd_status(struct shd *s, struct shd_set *set, const struct bfs_gfid *g, const char *name,
                struct shd_status *out)
{
    struct bfs_getxattr_req req = {.name = name};
    struct bfs_getxattr_rep rep;
    req.loc.gfid = *g;
    memset(out, 0, sizeof(*out));
    out->rc = bfs_sync_getxattr(set->afr, s->st, &req, &rep);
    if (out->rc >= 0) {
        copy_str(rep.xattrs, "brickfs.heal.pending", out->pending, sizeof(out->pending));
        copy_str(rep.xattrs, "brickfs.heal.split-brain", out->split, sizeof(out->split));
        copy_str(rep.xattrs, "brickfs.heal.file-type", out->ftype, sizeof(out->ftype));
        copy_str(rep.xattrs, "brickfs.heal.missing", out->missing, sizeof(out->missing));
        (void)bfs_dict_get_int(rep.xattrs, "brickfs.heal.bytes", &out->bytes);
    }
    bfs_getxattr_rep_clear_dup(&rep);
}

static void purge(struct shd *s, struct shd_set *set, const struct bfs_gfid *g)
{
    for (int i = 0; i < set->n; i++) {
        struct bfs_setxattr_req req = {.xattrs = bfs_dict_new()};
        req.loc.gfid = *g;
        if (req.xattrs && bfs_dict_set_int(req.xattrs, "brickfs.index.purge", 1) == 0)
            (void)bfs_sync_setxattr(set->child[i], s->st, &req, NULL);
        bfs_dict_unref(req.xattrs);
    }
}

/* ---- a crawl ---- */

static int cmp_gfid(const void *a, const void *b)
{
    return memcmp(a, b, sizeof(struct bfs_gfid));
}

/* The union of every reachable brick's index, sorted, without repeats. */
static int list_set(struct shd *s, struct shd_set *set, struct bfs_gfid **out, size_t *n)
{
    struct bfs_gfid *all = NULL;
    size_t len = 0;
    uint32_t up = shd_set_up(set);
    for (int i = 0; i < set->n; i++) {
        struct bfs_gfid *v;
        size_t k;
        if (!(up & (1u << i)) || shd_list_index(s, set->child[i], &v, &k) < 0)
            continue;
        struct bfs_gfid *na = realloc(all, (len + k + 1) * sizeof(*all));
        if (!na) {
            free(v);
            free(all);
            return -ENOMEM;
        }
        all = na;
        if (k)
            memcpy(all + len, v, k * sizeof(*v));
        len += k;
        free(v);
    }
    if (len)
        qsort(all, len, sizeof(*all), cmp_gfid);
    size_t u = 0;
    for (size_t i = 0; i < len; i++)
        if (u == 0 || memcmp(&all[u - 1], &all[i], sizeof(*all)) != 0)
            all[u++] = all[i];
    *out = all;
    *n = u;
    return 0;
}

static bool stopping(struct shd *s)
{
    pthread_mutex_lock(&s->lock);
    bool stop = s->stop;
    pthread_mutex_unlock(&s->lock);
    return stop;
}

struct pass_result {
    uint64_t healed, left, split, bytes;
};

/* The GFIDs of one crawl of one set found clean already: one listed again
 * in a later pass (an entry its index would not drop) is no progress. */
struct gset {
    struct bfs_gfid *v;
    size_t n, cap;
    size_t sorted;              /* v[0..sorted) is sorted */
};

static bool gset_has(const struct gset *g, const struct bfs_gfid *x)
{
    return g->sorted && bsearch(x, g->v, g->sorted, sizeof(*x), cmp_gfid) != NULL;
}

static void gset_add(struct gset *g, const struct bfs_gfid *x)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 256;
        struct bfs_gfid *v = realloc(g->v, cap * sizeof(*v));
        if (!v)
            return; /* at worst a repeat counts as progress once more */
        g->v = v;
        g->cap = cap;
    }
    g->v[g->n++] = *x;
}

/* After a pass: what it added becomes searchable. */
static void gset_seal(struct gset *g)
{
    if (g->n)
        qsort(g->v, g->n, sizeof(*g->v), cmp_gfid);
    g->sorted = g->n;
}

/* One pass over one set. */
static void pass(struct shd *s, struct shd_set *set, struct gset *clean, struct pass_result *r,
                 int64_t *last_write)
{
    struct bfs_gfid *v = NULL;
    size_t n = 0;
    memset(r, 0, sizeof(*r));
    if (list_set(s, set, &v, &n) < 0)
        return;
    for (size_t i = 0; i < n && !stopping(s); i++) {
        struct shd_status st;
        shd_status(s, set, &v[i], "brickfs.heal.now", &st);
        char gs[BFS_GFID_STRLEN];
        if (st.rc < 0) {
            bfs_log(SHD_PROG, BFS_LOG_WARNING, "%s: heal of %s: %s", set->afr->name,
                    bfs_gfid_fmt(&v[i], gs), strerror(-st.rc));
            r->left++;
        } else if (strcmp(st.ftype, "none") == 0 && !st.missing[0]) {
            r->left++; /* nothing answered: a brick is down, try later */
        } else if (strcmp(st.ftype, "none") == 0) {
            purge(s, set, &v[i]); /* gone from every brick that answered */
            r->healed++;
        } else if (st.split[0]) {
            r->split++;
        } else if (!st.pending[0] && gset_has(clean, &v[i])) {
            r->left++; /* clean, yet still listed: a key replicate does not know */
            bfs_log(SHD_PROG, BFS_LOG_WARNING, "%s: %s stays on an index with nothing to heal",
                    set->afr->name, bfs_gfid_fmt(&v[i], gs));
        } else if (!st.pending[0]) {
            purge(s, set, &v[i]); /* an entry left with zero counters goes too */
            gset_add(clean, &v[i]);
            r->healed++;
            r->bytes += (uint64_t)st.bytes;
        } else {
            r->left++;
        }
        pthread_mutex_lock(&s->lock);
        s->stats.remaining = n - i - 1;
        pthread_mutex_unlock(&s->lock);
        int64_t now = (int64_t)time(NULL);
        if (now != *last_write) {
            *last_write = now;
            shd_write_state(s);
        }
    }
    free(v);
}

void shd_crawl(struct shd *s)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_mutex_lock(&s->lock);
    s->stats.crawling = true;
    s->stats.crawls++;
    s->stats.last_start = (int64_t)time(NULL);
    pthread_mutex_unlock(&s->lock);
    shd_write_state(s);
    uint64_t healed = 0, bytes = 0, failed = 0, split = 0, left = 0;
    int64_t last_write = 0;
    for (int k = 0; k < s->nsets && !stopping(s); k++) {
        struct pass_result r = {0};
        struct gset clean = {0};
        for (int p = 0; p < SHD_MAX_PASSES && !stopping(s); p++) {
            pass(s, &s->sets[k], &clean, &r, &last_write);
            gset_seal(&clean);
            healed += r.healed;
            bytes += r.bytes;
            pthread_mutex_lock(&s->lock);
            s->stats.healed += r.healed;
            s->stats.bytes += r.bytes;
            pthread_mutex_unlock(&s->lock);
            /* a pass that healed something may have made new entries (names
             * created by a parent's heal are marked): look again; one that
             * healed nothing leaves the rest to the next crawl */
            if (!r.healed)
                break;
        }
        free(clean.v);
        split += r.split;
        left += r.left + r.split;
        failed += r.left;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (secs < 1e-3)
        secs = 1e-3;
    pthread_mutex_lock(&s->lock);
    s->stats.crawling = false;
    s->stats.last_end = (int64_t)time(NULL);
    s->stats.failed += failed;
    s->stats.split_brain = split;
    s->stats.remaining = left;
    s->stats.rate_files = (double)healed / secs;
    s->stats.rate_bytes = (double)bytes / secs;
    pthread_mutex_unlock(&s->lock);
    shd_write_state(s);
    bfs_log(SHD_PROG, BFS_LOG_INFO,
            "crawl done in %.1f s: %llu healed, %llu left (%llu in split-brain)", secs,
            (unsigned long long)healed, (unsigned long long)left, (unsigned long long)split);
}

/* ---- the state file ---- */

void shd_write_state(struct shd *s)
{
    if (!s->state_file)
        return;
    pthread_mutex_lock(&s->lock);
    struct shd_stats t = s->stats;
    pthread_mutex_unlock(&s->lock);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "volume", json_object_new_string(s->volume ? s->volume : ""));
    json_object_object_add(o, "pid", json_object_new_int64((int64_t)getpid()));
    json_object_object_add(o, "state", json_object_new_string(t.crawling ? "crawling" : "idle"));
    json_object_object_add(o, "crawls", json_object_new_int64((int64_t)t.crawls));
    json_object_object_add(o, "last_crawl_start", json_object_new_int64(t.last_start));
    json_object_object_add(o, "last_crawl_end", json_object_new_int64(t.last_end));
    json_object_object_add(o, "healed", json_object_new_int64((int64_t)t.healed));
    json_object_object_add(o, "failed", json_object_new_int64((int64_t)t.failed));
    json_object_object_add(o, "split_brain", json_object_new_int64((int64_t)t.split_brain));
    json_object_object_add(o, "remaining", json_object_new_int64((int64_t)t.remaining));
    json_object_object_add(o, "bytes", json_object_new_int64((int64_t)t.bytes));
    json_object_object_add(o, "rate_files_per_s", json_object_new_double(t.rate_files));
    json_object_object_add(o, "rate_bytes_per_s", json_object_new_double(t.rate_bytes));
    const char *text =
        json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", s->state_file, (int)getpid());
    FILE *f = fopen(tmp, "we");
    bool ok = f && fprintf(f, "%s\n", text) > 0;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok || rename(tmp, s->state_file) < 0) {
        bfs_log(SHD_PROG, BFS_LOG_WARNING, "cannot write the state file %s: %s", s->state_file,
                strerror(errno));
        unlink(tmp);
    }
    json_object_put(o);
}

/* ---- the crawler thread ---- */

void shd_wake(struct shd *s)
{
    pthread_mutex_lock(&s->lock);
    s->wake = true;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

void *shd_crawler_main(void *arg)
{
    struct shd *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (!s->wake && !s->stop)
            pthread_cond_wait(&s->cond, &s->lock);
        bool stop = s->stop;
        s->wake = false;
        pthread_mutex_unlock(&s->lock);
        if (stop)
            break;
        shd_crawl(s);
    }
    return NULL;
}
