/*
 * crawl.c — the walk of the rebalance process and its checkpoint
 * (docs/design/rebalance.md, "Crawl"). For each subvolume S, a depth-first
 * walk of the directory tree on S alone (readdirplus on S; directories
 * exist everywhere with one GFID). Data files whose hashed subvolume under
 * the new table is not S are migrated there. A directory is finished when
 * its files and subdirectories are (post-order); its "S GFID" line is then
 * appended to STATE/checkpoint, and a later run skips it whole.
 *
 * The checkpoint starts with "ID LAYOUT_VERSION"; one of another rebalance
 * is discarded. Counters are kept in STATE/counters (rewritten atomically
 * with each fdatasync of the checkpoint); files moved are recounted from
 * moves.log, which a SIGKILL cannot lose.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/inode.h"
#include "core/log.h"
#include "rebal.h"

#define RB_LOG "rebalance"
#define SYNC_EVERY 64

/* ---- the set of finished directories ---- */

static uint64_t str_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static int done_add(struct rb *rb, const char *key)
{
    if ((rb->done_n + 1) * 2 > rb->done_cap) {
        size_t ncap = rb->done_cap ? rb->done_cap * 2 : 1024;
        char **n = calloc(ncap, sizeof(*n));
        if (!n)
            return -ENOMEM;
        for (size_t i = 0; i < rb->done_cap; i++)
            if (rb->done[i]) {
                size_t j = str_hash(rb->done[i]) & (ncap - 1);
                while (n[j])
                    j = (j + 1) & (ncap - 1);
                n[j] = rb->done[i];
            }
        free(rb->done);
        rb->done = n;
        rb->done_cap = ncap;
    }
    size_t j = str_hash(key) & (rb->done_cap - 1);
    while (rb->done[j]) {
        if (strcmp(rb->done[j], key) == 0)
            return 0;
        j = (j + 1) & (rb->done_cap - 1);
    }
    if (!(rb->done[j] = strdup(key)))
        return -ENOMEM;
    rb->done_n++;
    return 0;
}

static bool done_has(const struct rb *rb, const char *key)
{
    if (!rb->done_cap)
        return false;
    size_t j = str_hash(key) & (rb->done_cap - 1);
    while (rb->done[j]) {
        if (strcmp(rb->done[j], key) == 0)
            return true;
        j = (j + 1) & (rb->done_cap - 1);
    }
    return false;
}

static void dir_key(int s, const struct bfs_gfid *g, char *out, size_t len)
{
    char gs[BFS_GFID_STRLEN];
    bfs_gfid_fmt(g, gs);
    snprintf(out, len, "%d %s", s, gs);
}

/* ---- checkpoint files ---- */

static void save_counters(struct rb *rb)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof(path), "%s/counters", rb->state_dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (!f)
        return;
    fprintf(f, "%s %lld %lld %lld %lld %lld %lld\n", rb->id, (long long)rb->c.scanned,
            (long long)rb->c.skipped, (long long)rb->c.failed, (long long)rb->c.dirs_done,
            (long long)rb->c.runs, (long long)rb->c.bytes);
    fflush(f);
    fdatasync(fileno(f));
    fclose(f);
    rename(tmp, path);
}

static void load_counters(struct rb *rb)
{
    char path[4200], id[64];
    long long sc, sk, fa, dd, runs, by;
    snprintf(path, sizeof(path), "%s/counters", rb->state_dir);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    if (fscanf(f, "%63s %lld %lld %lld %lld %lld %lld", id, &sc, &sk, &fa, &dd, &runs, &by) == 7 &&
        strcmp(id, rb->id) == 0) {
        rb->c.scanned = sc;
        rb->c.skipped = sk;
        rb->c.failed = 0; /* failures are tried again: counted anew */
        rb->c.runs = runs;
        rb->c.bytes = by;
    }
    fclose(f);
}

/* Files moved so far by this rebalance: the lines of moves.log. */
static void count_moves(struct rb *rb)
{
    char path[4200], line[512];
    snprintf(path, sizeof(path), "%s/moves.log", rb->state_dir);
    FILE *f = fopen(path, "re");
    rb->c.moved = 0;
    while (f && fgets(line, sizeof(line), f))
        rb->c.moved++;
    if (f)
        fclose(f);
}

int bfs_rb_checkpoint_open(struct rb *rb)
{
    char path[4200], head[256], want[256], line[256];
    snprintf(path, sizeof(path), "%s/checkpoint", rb->state_dir);
    snprintf(want, sizeof(want), "%s %lld\n", rb->id, rb->layout_version);
    FILE *f = fopen(path, "re");
    bool ours = f && fgets(head, sizeof(head), f) && strcmp(head, want) == 0;
    if (ours) {
        while (fgets(line, sizeof(line), f)) {
            size_t n = strlen(line);
            if (n < 2 || line[n - 1] != '\n')
                break; /* a torn last line (SIGKILL mid-write): not finished */
            line[n - 1] = 0;
            if (done_add(rb, line) < 0) {
                fclose(f);
                return -ENOMEM;
            }
        }
    }
    if (f)
        fclose(f);
    char moves[4200];
    snprintf(moves, sizeof(moves), "%s/moves.log", rb->state_dir);
    if (!ours) { /* another rebalance's (or none): start from zero */
        unlink(moves);
        char cnt[4200];
        snprintf(cnt, sizeof(cnt), "%s/counters", rb->state_dir);
        unlink(cnt);
        f = fopen(path, "we");
        if (!f)
            return -errno;
        fputs(want, f);
        fflush(f);
        fdatasync(fileno(f));
        fclose(f);
    } else {
        load_counters(rb);
    }
    count_moves(rb);
    rb->c.dirs_done = (int64_t)rb->done_n;
    rb->c.runs++;
    rb->checkpoint = fopen(path, "ae");
    rb->moves_fd = open(moves, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (!rb->checkpoint || rb->moves_fd < 0)
        return -errno;
    save_counters(rb); /* this run counted */
    if (ours)
        bfs_log(RB_LOG, BFS_LOG_INFO, "resuming rebalance %s: %zu directories finished, %lld "
                "files moved before", rb->id, rb->done_n, (long long)rb->c.moved);
    return 0;
}

static void checkpoint_sync(struct rb *rb)
{
    fflush(rb->checkpoint);
    fdatasync(fileno(rb->checkpoint));
    save_counters(rb);
}

void bfs_rb_checkpoint_close(struct rb *rb)
{
    if (rb->checkpoint) {
        checkpoint_sync(rb);
        fclose(rb->checkpoint);
        rb->checkpoint = NULL;
    }
    if (rb->moves_fd >= 0) {
        fdatasync(rb->moves_fd);
        close(rb->moves_fd);
        rb->moves_fd = -1;
    }
    for (size_t i = 0; i < rb->done_cap; i++)
        free(rb->done[i]);
    free(rb->done);
    rb->done = NULL;
    rb->done_cap = rb->done_n = 0;
}

static void dir_finished(struct rb *rb, const char *key)
{
    fprintf(rb->checkpoint, "%s\n", key);
    fflush(rb->checkpoint); /* in the kernel: a SIGKILL cannot lose it */
    done_add(rb, key);
    rb->c.dirs_done++;
    if (rb->c.dirs_done % SYNC_EVERY == 0)
        checkpoint_sync(rb); /* on the disk: nor can a power cut */
}

/* ---- the walk ---- */

static bool is_link_shaped(const struct bfs_iatt *a)
{
    return (a->mode & 07777) == S_ISVTX; /* link file, or a migration's unfinished copy */
}

static void one_file(struct rb *rb, int s, const struct bfs_gfid *dir, const struct bfs_dirent *e)
{
    rb->c.scanned++;
    if (is_link_shaped(&e->attr))
        return;
    int h = dht_table_subvol(rb->table, dir->b, e->name);
    if (h == s || h >= rb->nsub)
        return;
    int rc = bfs_rb_migrate(rb, s, h, dir, e->name, &e->attr);
    if (rc > 0) {
        rb->c.moved++;
    } else if (rc == 0) {
        rb->c.skipped++;
    } else {
        rb->c.failed++;
        bfs_log(RB_LOG, BFS_LOG_WARNING, "cannot move %s from %s to %s: %s", e->name,
                rb->sub[s]->name, rb->sub[h]->name, strerror(-rc));
    }
    bfs_rb_status(rb, "in-progress", false);
}

struct subdirs {
    struct bfs_gfid *g;
    char **names;
    size_t n, cap;
    struct bfs_dirent *f; /* regular files: moved after the listing ended, so that
                           * unlinks do not disturb the listing's offsets */
    size_t nf, capf;
};

static int add_file(struct subdirs *sd, const struct bfs_dirent *e)
{
    if (sd->nf == sd->capf) {
        size_t nc = sd->capf ? sd->capf * 2 : 64;
        struct bfs_dirent *nf = realloc(sd->f, nc * sizeof(*nf));
        if (!nf)
            return -ENOMEM;
        sd->f = nf;
        sd->capf = nc;
    }
    sd->f[sd->nf] = *e;
    if (!(sd->f[sd->nf].name = strdup(e->name)))
        return -ENOMEM;
    sd->nf++;
    return 0;
}

static int walk(struct rb *rb, int s, const struct bfs_gfid *dir, int depth);

/* Reads dir on subvolume s: files handled at once, subdirectories collected. */
static int read_dir(struct rb *rb, int s, const struct bfs_gfid *dir, struct subdirs *sd)
{
    struct bfs_xl *xl = rb->sub[s];
    struct bfs_stack *st = bfs_rb_stack();
    struct bfs_inode *in = bfs_inode_get(rb->graph->itable, dir, S_IFDIR);
    struct bfs_fd *fd = in ? bfs_fd_new(rb->graph, in, O_RDONLY, 1) : NULL;
    if (in)
        bfs_inode_unref(in);
    int rc = fd ? 0 : -ENOMEM;
    if (rc == 0) {
        struct bfs_opendir_req o = {0};
        o.loc.gfid = *dir;
        o.fd = fd;
        rc = bfs_sync_opendir(xl, st, &o, NULL);
    }
    uint64_t off = 0;
    bool eod = false;
    while (rc >= 0 && !eod && !bfs_rb_stop) {
        struct bfs_readdir_req r = {0};
        struct bfs_readdir_rep rep;
        r.fd = fd;
        r.size = 64 * 1024;
        r.offset = off;
        r.plus = true;
        rc = bfs_sync_readdir(xl, st, &r, &rep);
        if (rc < 0) {
            bfs_readdir_rep_clear_dup(&rep);
            break;
        }
        eod = rep.eod || rep.entries.count == 0;
        for (uint32_t i = 0; i < rep.entries.count && rc >= 0; i++) {
            const struct bfs_dirent *e = &rep.entries.v[i];
            off = e->d_off;
            if (strcmp(e->name, ".") == 0 || strcmp(e->name, "..") == 0 ||
                (bfs_gfid_is_root(dir) && strcmp(e->name, ".brickfs") == 0) || !e->has_attr)
                continue;
            if (S_ISDIR(e->attr.mode)) {
                if (sd->n == sd->cap) {
                    size_t nc = sd->cap ? sd->cap * 2 : 16;
                    struct bfs_gfid *ng = realloc(sd->g, nc * sizeof(*ng));
                    char **nn = ng ? realloc(sd->names, nc * sizeof(*nn)) : NULL;
                    if (ng)
                        sd->g = ng;
                    if (!nn) {
                        rc = -ENOMEM;
                        break;
                    }
                    sd->names = nn;
                    sd->cap = nc;
                }
                if (!(sd->names[sd->n] = strdup(e->name))) {
                    rc = -ENOMEM;
                    break;
                }
                sd->g[sd->n++] = e->attr.gfid;
            } else if (S_ISREG(e->attr.mode)) {
                rc = add_file(sd, e);
            } else {
                rb->c.scanned++; /* symlinks and specials stay where they are */
            }
        }
        bfs_readdir_rep_clear_dup(&rep);
    }
    if (fd)
        bfs_fd_unref(fd);
    bfs_stack_unref(st);
    return bfs_rb_stop ? -EINTR : rc;
}

/* A named lookup of (P, N) through distribute: its directory self-heal
 * creates the directory on subvolumes that lack it (new bricks), before
 * files are moved into it there. */
static int heal_dir(struct rb *rb, const struct bfs_gfid *parent, const char *name)
{
    struct bfs_stack *st = bfs_rb_stack();
    struct bfs_lookup_req r = {0};
    struct bfs_lookup_rep rep;
    r.loc.pargfid = *parent;
    r.loc.name = name;
    int rc = bfs_sync_lookup(rb->dht, st, &r, &rep);
    bfs_lookup_rep_clear_dup(&rep);
    bfs_stack_unref(st);
    return rc;
}

static int walk(struct rb *rb, int s, const struct bfs_gfid *dir, int depth)
{
    char key[128];
    dir_key(s, dir, key, sizeof(key));
    if (!rb->rewalk && done_has(rb, key))
        return 0;
    if (depth > 256)
        return -ELOOP;
    struct subdirs sd = {0};
    int rc = read_dir(rb, s, dir, &sd);
    for (size_t i = 0; rc >= 0 && i < sd.nf; i++) {
        one_file(rb, s, dir, &sd.f[i]);
        if (bfs_rb_stop)
            rc = -EINTR;
    }
    for (size_t i = 0; i < sd.nf; i++)
        free(sd.f[i].name);
    free(sd.f);
    for (size_t i = 0; rc >= 0 && i < sd.n; i++) {
        rc = heal_dir(rb, dir, sd.names[i]);
        if (rc >= 0)
            rc = walk(rb, s, &sd.g[i], depth + 1);
    }
    for (size_t i = 0; i < sd.n; i++)
        free(sd.names[i]);
    free(sd.names);
    free(sd.g);
    if (rc >= 0 && !rb->rewalk)
        dir_finished(rb, key);
    return rc;
}

/* Does subvolume s own no bucket of the new table (a brick being drained
 * by remove-brick)? */
static bool leaving(const struct rb *rb, int s)
{
    if (s >= rb->table->nsubvols)
        return false; /* not in the table at all: an added brick (canonical:K) */
    for (uint32_t b = 0; b < DHT_BUCKETS; b++)
        if (rb->table->map[b] == s)
            return false;
    return true;
}

/* A subvolume being drained must end with no data file. A client's
 * rename keeps the data where it is, so a file renamed, after the walk
 * listed its directory, to a name the walk had already passed is still
 * on s. Walk s again (whole: the checkpoint says nothing about such late
 * arrivals) until a pass neither moved a file nor met one that raced away
 * from under it; files left on purpose (locked, hard links) stay. Data
 * arrives on a drained subvolume only that way (it owns no bucket), so
 * the passes converge; the bound is a guard against a pathological load. */
static int drain_again(struct rb *rb, int s)
{
    int rc = 0;
    rb->rewalk = true;
    for (int pass = 0; pass < 32; pass++) {
        int64_t moved = rb->c.moved, raced = rb->raced;
        struct bfs_gfid root = {0};
        root.b[15] = 1;
        rc = walk(rb, s, &root, 0);
        if (rc < 0 || (rb->c.moved == moved && rb->raced == raced))
            break;
        bfs_log(RB_LOG, BFS_LOG_INFO, "%s: pass %d moved %lld files (%lld raced): again",
                rb->sub[s]->name, pass + 2, (long long)(rb->c.moved - moved),
                (long long)(rb->raced - raced));
    }
    rb->rewalk = false;
    return rc;
}

int bfs_rb_crawl(struct rb *rb)
{
    struct bfs_gfid root = {0};
    root.b[15] = 1;
    int first_err = 0;
    for (int s = 0; s < rb->nsub; s++) {
        int rc = walk(rb, s, &root, 0);
        if (rc >= 0 && leaving(rb, s))
            rc = drain_again(rb, s);
        if (rc == -EINTR)
            return rc;
        if (rc < 0) {
            bfs_log(RB_LOG, BFS_LOG_ERROR, "walk of %s failed: %s", rb->sub[s]->name,
                    strerror(-rc));
            first_err = first_err ? first_err : rc;
        }
    }
    return first_err;
}
