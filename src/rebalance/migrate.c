/*
 * migrate.c — moving one file from subvolume S to its new hashed
 * subvolume H (docs/design/rebalance.md, "Migration of one file"):
 *
 *   1 dst    (P, N) on H: created link-shaped (mode S_ISVTX, gfid-req G,
 *            linkto = S) or an earlier try's reused; inodelk dht.migrate
 *            on G at H (redirected writers wait on it)
 *   2 copy   S -> H in 1 MiB chunks, throttled; user xattrs
 *   3 freeze S: xattr migrating = "MODE H", mode |= S_ISVTX|S_ISGID; an empty
 *            write on S (waits for writes in flight); changed since the
 *            copy began -> copy once more (the last time: later writes
 *            are repeated on H by their clients); a chmod that unfroze S
 *            meanwhile -> its mode taken, frozen again, copied again; the
 *            size the last copy took recorded on S (xattr copied = SIZE)
 *   4 switch H: owner, times, the real mode; linkto removed
 *   5 drop   (P, N) unlinked on S; unlock
 *
 * A failure before 4 undoes what it can (unfreeze S, unlink dst) and
 * leaves the file where it was; after 4 the file has moved. Fds and
 * inodes made here are released before returning.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/dict.h"
#include "core/inode.h"
#include "core/log.h"
#include "rebal.h"

#define RB_LOG "rebalance"

struct mig {
    struct rb *rb;
    struct bfs_stack *st;
    struct bfs_xl *src, *dst;
    int s, h;
    struct bfs_loc loc;     /* (P, N), no GFID: the bricks resolve the name */
    struct bfs_gfid gfid;
    struct bfs_iatt attr;   /* the source as the crawl saw it */
    struct bfs_fd *sfd, *dfd;
    bool locked, frozen, dst_made;
    int elk[2], nelk;       /* subvolumes where we hold the name's entry lock */
};

static struct bfs_fd *new_fd(struct rb *rb, const struct bfs_gfid *g, int flags)
{
    struct bfs_inode *in = bfs_inode_get(rb->graph->itable, g, S_IFREG);
    if (!in)
        return NULL;
    struct bfs_fd *fd = bfs_fd_new(rb->graph, in, flags, 0);
    bfs_inode_unref(in);
    return fd;
}

static int open_gfid(struct mig *m, struct bfs_xl *xl, int flags, struct bfs_fd **out)
{
    struct bfs_fd *fd = new_fd(m->rb, &m->gfid, flags);
    if (!fd)
        return -ENOMEM;
    struct bfs_open_req r = {0};
    struct bfs_open_rep rep;
    r.loc.gfid = m->gfid;
    r.fd = fd;
    r.flags = (uint32_t)flags;
    int rc = bfs_sync_open(xl, m->st, &r, &rep);
    bfs_open_rep_clear_dup(&rep);
    if (rc < 0) {
        bfs_fd_unref(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

static int lookup_name(struct mig *m, struct bfs_xl *xl, struct bfs_iatt *out)
{
    struct bfs_lookup_req r = {0};
    struct bfs_lookup_rep rep;
    r.loc = m->loc;
    int rc = bfs_sync_lookup(xl, m->st, &r, &rep);
    if (rc >= 0)
        *out = rep.attr;
    bfs_lookup_rep_clear_dup(&rep);
    return rc;
}

static int set_internal(struct mig *m, struct bfs_xl *xl, const char *key, const char *val)
{
    struct bfs_dict *xa = bfs_dict_new(), *xd = bfs_rb_xdata_internal();
    struct bfs_setxattr_req r = {0};
    r.loc.gfid = m->gfid;
    r.xattrs = xa;
    r.xdata = xd;
    int rc = xa && xd ? bfs_dict_set_bin(xa, key, val, strlen(val)) : -ENOMEM;
    if (rc == 0)
        rc = bfs_sync_setxattr(xl, m->st, &r, NULL);
    bfs_dict_unref(xa);
    bfs_dict_unref(xd);
    return rc;
}

static int del_internal(struct mig *m, struct bfs_xl *xl, const char *key)
{
    struct bfs_dict *xd = bfs_rb_xdata_internal();
    struct bfs_removexattr_req r = {0};
    r.loc.gfid = m->gfid;
    r.name = key;
    r.xdata = xd;
    int rc = xd ? bfs_sync_removexattr(xl, m->st, &r, NULL) : -ENOMEM;
    bfs_dict_unref(xd);
    return rc == -ENODATA ? 0 : rc;
}

/* Internal: a brick keeps the frozen bits of a marked source through any
 * other chmod (storage/posix), so that unfreezing is ours alone. */
static int set_mode(struct mig *m, struct bfs_xl *xl, uint32_t mode)
{
    struct bfs_setattr_req r = {0};
    struct bfs_setattr_rep rep;
    r.loc.gfid = m->gfid;
    r.attr.mode = mode;
    r.valid = BFS_SET_MODE;
    r.xdata = bfs_rb_xdata_internal();
    int rc = r.xdata ? bfs_sync_setattr(xl, m->st, &r, &rep) : -ENOMEM;
    if (r.xdata) {
        bfs_setattr_rep_clear_dup(&rep);
        bfs_dict_unref(r.xdata);
    }
    return rc;
}

static int fstat_fd(struct mig *m, struct bfs_xl *xl, struct bfs_fd *fd, struct bfs_iatt *out)
{
    struct bfs_fstat_req r = {0};
    struct bfs_fstat_rep rep;
    r.fd = fd;
    int rc = bfs_sync_fstat(xl, m->st, &r, &rep);
    if (rc >= 0)
        *out = rep.attr;
    bfs_fstat_rep_clear_dup(&rep);
    return rc;
}

/* Step 1: dst on H, link-shaped, with linkto S. 1 = H already has the
 * real file (a move finished before a crash), 0 = ready, <0 failure. */
static int make_dst(struct mig *m)
{
    struct bfs_iatt cur;
    int rc = lookup_name(m, m->dst, &cur);
    const char *sname = m->src->name;
    if (rc >= 0 && !bfs_gfid_eq(&cur.gfid, &m->gfid) && (cur.mode & 07777) == S_ISVTX &&
        cur.size == 0) {
        /* a link file of another file (renamed away or unlinked while its
         * link stayed): with the name locked and its data on S, stale */
        struct bfs_unlink_req u = {0};
        struct bfs_unlink_rep urep;
        u.loc = m->loc;
        rc = bfs_sync_unlink(m->dst, m->st, &u, &urep);
        bfs_unlink_rep_clear_dup(&urep);
        if (rc >= 0 || rc == -ENOENT)
            rc = -ENOENT;
    }
    if (rc >= 0) {
        if (!bfs_gfid_eq(&cur.gfid, &m->gfid))
            return -EEXIST; /* another file under the name: a person must look */
        if ((cur.mode & 07777) != S_ISVTX)
            return 1;
        rc = open_gfid(m, m->dst, O_WRONLY, &m->dfd);
        if (rc < 0)
            return rc;
        struct bfs_ftruncate_req tr = {0};
        struct bfs_ftruncate_rep trep;
        tr.fd = m->dfd;
        rc = bfs_sync_ftruncate(m->dst, m->st, &tr, &trep);
        bfs_ftruncate_rep_clear_dup(&trep);
    } else if (rc == -ENOENT) {
        struct bfs_dict *xd = bfs_dict_new();
        m->dfd = new_fd(m->rb, &m->gfid, O_WRONLY);
        if (!xd || !m->dfd || bfs_dict_set_bin(xd, RB_GFID_REQ_KEY, m->gfid.b, 16) < 0) {
            bfs_dict_unref(xd);
            return -ENOMEM;
        }
        struct bfs_create_req r = {0};
        struct bfs_create_rep rep;
        r.loc = m->loc;
        r.fd = m->dfd;
        r.flags = O_WRONLY | O_CREAT | O_EXCL;
        r.mode = S_IFREG | S_ISVTX;
        r.xdata = xd;
        rc = bfs_sync_create(m->dst, m->st, &r, &rep);
        bfs_create_rep_clear_dup(&rep);
        bfs_dict_unref(xd);
        m->dst_made = rc >= 0;
    }
    if (rc >= 0)
        rc = set_internal(m, m->dst, RB_LINKTO_KEY, sname);
    return rc < 0 ? rc : 0;
}

/* The name's entry lock (domain "dht", what distribute's rename, unlink
 * and link take on the name's hashed subvolume) on subvolume s. */
static int entrylk(struct mig *m, int s, uint32_t cmd)
{
    struct bfs_entrylk_req r = {.domain = RB_ENTRY_DOMAIN, .basename = m->loc.name,
                                .cmd = cmd, .type = BFS_ENTRYLK_WRLCK};
    r.loc.gfid = m->loc.pargfid;
    return bfs_sync_entrylk(m->rb->sub[s], m->st, &r, NULL);
}

/* Takes the name's entry locks where clients take them: on H (the
 * hashed subvolume of clients that have the new table) and on the
 * previous table's hashed subvolume (clients still on the old graph),
 * lowest position first, the order distribute sorts its own locks in,
 * so a rename holding two names cannot deadlock with us. */
static int lock_name(struct mig *m)
{
    struct rb *rb = m->rb;
    int a = m->h, b = rb->prev ? dht_table_subvol(rb->prev, m->loc.pargfid.b, m->loc.name) : -1;
    if (b < 0 || b >= rb->nsub || b == a)
        b = -1;
    else if (b < a) {
        int t = a;
        a = b;
        b = t;
    }
    int want[2] = {a, b};
    for (int i = 0; i < 2 && want[i] >= 0; i++) {
        int rc = entrylk(m, want[i], BFS_ENTRYLK_LOCK);
        if (rc == -ENOSYS)
            continue; /* no features/locks under it (graph tests): as distribute */
        if (rc < 0)
            return rc;
        m->elk[m->nelk++] = want[i];
    }
    return 0;
}

static void unlock_name(struct mig *m)
{
    while (m->nelk > 0)
        entrylk(m, m->elk[--m->nelk], BFS_ENTRYLK_UNLOCK);
}

/* Under the name's locks: what is (P, N) on S now? The crawl listed it a
 * while ago; a client may have renamed or unlinked it, or renamed another
 * file over it, since. 1 = a data file (m->gfid/attr are now its), 0 =
 * nothing to move, <0 = failure. */
static int recheck_source(struct mig *m)
{
    struct bfs_iatt cur;
    int rc = lookup_name(m, m->src, &cur);
    if (rc == -ENOENT || rc == -ESTALE)
        return 0;
    if (rc < 0)
        return rc;
    if (!S_ISREG(cur.mode) || (cur.mode & 07777) == S_ISVTX)
        return 0; /* a link file now (the name was renamed over): its data is elsewhere */
    m->gfid = cur.gfid; /* another file renamed over the name: that one is moved */
    m->attr = cur;
    return 1;
}

static int inodelk(struct mig *m, uint32_t type)
{
    struct bfs_inodelk_req r = {0};
    r.domain = RB_LOCK_DOMAIN;
    r.loc.gfid = m->gfid;
    r.cmd = type == F_UNLCK ? BFS_LK_SETLK : BFS_LK_SETLKW;
    r.lock.type = type;
    r.lock.whence = SEEK_SET;
    r.lock.owner = m->rb->lock_owner;
    r.lock.pid = (uint32_t)getpid();
    return bfs_sync_inodelk(m->dst, m->st, &r, NULL);
}

/* Step 2: every byte of S to H (holes become zeros), then user xattrs. */
static int copy_data(struct mig *m, uint64_t size)
{
    struct rb *rb = m->rb;
    for (uint64_t off = 0; off < size;) {
        struct bfs_read_req r = {0};
        struct bfs_read_rep rep;
        r.fd = m->sfd;
        r.size = RB_CHUNK;
        r.offset = off;
        int rc = bfs_sync_read(m->src, m->st, &r, &rep);
        if (rc < 0) {
            bfs_read_rep_clear_dup(&rep);
            return rc;
        }
        size_t n = rep.data.len;
        if (n == 0) {
            bfs_read_rep_clear_dup(&rep);
            break; /* shrank meanwhile: the freeze check sees it */
        }
        struct bfs_write_req w = {0};
        struct bfs_write_rep wrep;
        w.fd = m->dfd;
        w.data = rep.data;
        w.offset = off;
        rc = bfs_sync_write(m->dst, m->st, &w, &wrep);
        bfs_write_rep_clear_dup(&wrep);
        bfs_read_rep_clear_dup(&rep);
        if (rc < 0)
            return rc;
        off += n;
        rb->c.bytes += (int64_t)n;
        bfs_rb_throttle(rb, n);
        if (bfs_rb_stop)
            return -EINTR;
    }
    struct bfs_ftruncate_req tr = {0}; /* a shorter source: the copy is as long */
    struct bfs_ftruncate_rep trep;
    tr.fd = m->dfd;
    tr.offset = size;
    int rc = bfs_sync_ftruncate(m->dst, m->st, &tr, &trep);
    bfs_ftruncate_rep_clear_dup(&trep);
    if (rc < 0)
        return rc;
    struct bfs_getxattr_req g = {0};
    struct bfs_getxattr_rep grep;
    g.loc.gfid = m->gfid;
    if (bfs_sync_getxattr(m->src, m->st, &g, &grep) >= 0 && bfs_dict_count(grep.xattrs) > 0) {
        struct bfs_fsetxattr_req s = {0};
        s.fd = m->dfd;
        s.xattrs = grep.xattrs;
        bfs_sync_fsetxattr(m->dst, m->st, &s, NULL); /* best effort, as cp -a */
    }
    bfs_getxattr_rep_clear_dup(&grep);
    return 0;
}

/* After the freeze: a write of no bytes at offset 0 on S. It changes
 * nothing, but through replicate it is a data transaction over the whole
 * file, so it waits until every write already in flight on S has landed
 * on every copy of S (their locks cover them). Without it a client write
 * could land before the chmod on one copy and after it on the other; its
 * answer (replicate's first copy: not frozen) is not repeated on H, and
 * the last copy, read from the other copy, may miss it. Every write after
 * the barrier lands after the chmod everywhere and its answer shows it. */
static int write_barrier(struct mig *m)
{
    struct bfs_write_req w = {0};
    struct bfs_write_rep wrep;
    w.fd = m->sfd;
    w.offset = 0;
    int rc = bfs_sync_write(m->src, m->st, &w, &wrep);
    bfs_write_rep_clear_dup(&wrep);
    return rc;
}

static bool same_content_stamp(const struct bfs_iatt *a, const struct bfs_iatt *b)
{
    return a->size == b->size && a->mtime_sec == b->mtime_sec && a->mtime_nsec == b->mtime_nsec;
}

/* Marks and freezes S with mode (its permission bits), then the barrier. */
static int freeze(struct mig *m, uint32_t mode)
{
    char txt[300]; /* "MODE DESTINATION": distribute's writers follow the name */
    snprintf(txt, sizeof(txt), "%o %s", mode & 07777, m->dst->name);
    int rc = set_internal(m, m->src, RB_MIGRATING_KEY, txt);
    if (rc >= 0 && (rc = set_mode(m, m->src, (mode & 07777) | RB_FROZEN_BITS)) >= 0)
        m->frozen = true;
    return rc < 0 ? rc : write_barrier(m);
}

/* After the last copy: the size it took, on S (RB_COPIED_KEY). A write
 * through an O_APPEND fd that lands on S shows the frozen bits and is
 * repeated on H by its client, which appends it there — unless it ends
 * within this size: then the last copy carried it, and appending it again
 * would write it twice. Appending, rather than writing at the offset it
 * had on S, keeps what other fds appended on H since the switch (and S,
 * once dropped, keeps a stale size). Every append after the stat this
 * size comes from lands at or beyond it. */
static int record_copied(struct mig *m, uint64_t size)
{
    char txt[24];
    snprintf(txt, sizeof(txt), "%llu", (unsigned long long)size);
    return set_internal(m, m->src, RB_COPIED_KEY, txt);
}

/* A chmod after the freeze replaces S's mode, frozen bits included: its
 * reply shows no frozen bits, so distribute does not repeat it on H, and
 * neither does it repeat the writes that land on S after it. Rounds of
 * refreezing allowed before the move gives up (the next run retries). */
#define FREEZE_ROUNDS 4

/* Steps 2 and 3: a first copy while writers go on, the freeze, and a
 * second copy when the source changed meanwhile. Every write that landed
 * before the freeze is in the source when the second copy reads it; every
 * write that lands after it sees the frozen mode in its reply and is
 * repeated on H by its client once we unlock. So the second copy is the
 * last, however busy the file is — unless a chmod unfroze S meanwhile
 * (checked after the copy): then its mode becomes the file's, S is frozen
 * again with it, and S copied once more, since writes that landed while it
 * was unfrozen were not repeated on H. */
static int copy_and_freeze(struct mig *m)
{
    struct bfs_iatt before, after, now;
    int rc = fstat_fd(m, m->src, m->sfd, &before);
    uint32_t mode = m->attr.mode; /* the original (restored from a crashed run's xattr) */
    if (rc >= 0)
        rc = copy_data(m, before.size);
    /* a chmod during the first copy: the freeze keeps it */
    if (rc >= 0 && (rc = fstat_fd(m, m->src, m->sfd, &now)) >= 0 &&
        (now.mode & RB_FROZEN_BITS) != RB_FROZEN_BITS)
        mode = (mode & ~07777u) | (now.mode & 07777);
    if (rc >= 0)
        rc = freeze(m, mode);
    bool again = false; /* S was unfrozen for a while: copy whatever the stamps say */
    for (int round = 1; rc >= 0; round++) {
        if ((rc = fstat_fd(m, m->src, m->sfd, &after)) < 0)
            break;
        if ((again || !same_content_stamp(&before, &after)) &&
            (rc = copy_data(m, after.size)) < 0)
            break;
        if ((rc = fstat_fd(m, m->src, m->sfd, &now)) < 0)
            break;
        if ((now.mode & 07777) == ((mode & 07777) | RB_FROZEN_BITS))
            break; /* still frozen after the last copy: no chmod came */
        uint32_t perm = now.mode & 07777;
        /* a brick that keeps the bits through a chmod (storage/posix): the
         * writes after it were repeated on H, no copy needed; the mark
         * takes the new mode (an undo restores it) */
        bool kept = (perm & RB_FROZEN_BITS) == RB_FROZEN_BITS;
        if (kept)
            perm &= ~(uint32_t)RB_FROZEN_BITS;
        mode = (mode & ~07777u) | perm;
        m->attr.mode = mode; /* an undo restores the user's latest mode */
        bfs_log(RB_LOG, BFS_LOG_INFO, "%s: chmod %o during the move: frozen again",
                m->loc.name, mode & 07777);
        rc = round >= FREEZE_ROUNDS ? -EAGAIN : freeze(m, mode);
        again = again || !kept;
    }
    if (rc >= 0) {
        m->attr = after;
        m->attr.mode = mode;
        rc = record_copied(m, after.size);
    }
    return rc;
}

/* Step 4: H's file becomes the real one. */
static int switch_dst(struct mig *m)
{
    struct bfs_fsetattr_req r = {0};
    struct bfs_fsetattr_rep rep;
    r.fd = m->dfd;
    r.attr = m->attr;
    r.attr.mode = m->attr.mode & 07777;
    r.valid = BFS_SET_UID | BFS_SET_GID | BFS_SET_ATIME | BFS_SET_MTIME;
    int rc = bfs_sync_fsetattr(m->dst, m->st, &r, &rep);
    bfs_fsetattr_rep_clear_dup(&rep);
    if (rc >= 0)
        rc = del_internal(m, m->dst, RB_LINKTO_KEY);
    if (rc >= 0) { /* the mode last: from here lookups on H answer this file */
        struct bfs_fsetattr_req r2 = {0};
        struct bfs_fsetattr_rep rep2;
        r2.fd = m->dfd;
        r2.attr.mode = m->attr.mode & 07777;
        r2.valid = BFS_SET_MODE;
        rc = bfs_sync_fsetattr(m->dst, m->st, &r2, &rep2);
        bfs_fsetattr_rep_clear_dup(&rep2);
    }
    return rc;
}

static int drop_src(struct mig *m)
{
    struct bfs_unlink_req r = {0};
    struct bfs_unlink_rep rep;
    r.loc = m->loc;
    int rc = bfs_sync_unlink(m->src, m->st, &r, &rep);
    bfs_unlink_rep_clear_dup(&rep);
    return rc == -ENOENT ? 0 : rc;
}

/* A link file of the moved file left where the previous table hashed its
 * name (it pointed at S; the file was placed behind it by a rename or
 * min-free-disk): no longer needed once the file is on its hashed
 * subvolume. Best effort: a leftover link file is harmless. */
static void drop_old_link(struct mig *m)
{
    struct rb *rb = m->rb;
    if (!rb->prev)
        return;
    int p = dht_table_subvol(rb->prev, m->loc.pargfid.b, m->loc.name);
    if (p == m->s || p == m->h || p >= rb->nsub)
        return;
    struct bfs_iatt cur;
    if (lookup_name(m, rb->sub[p], &cur) < 0 || !bfs_gfid_eq(&cur.gfid, &m->gfid) ||
        (cur.mode & 07777) != S_ISVTX || cur.size != 0)
        return;
    struct bfs_unlink_req r = {0};
    struct bfs_unlink_rep rep;
    r.loc = m->loc;
    bfs_sync_unlink(rb->sub[p], m->st, &r, &rep);
    bfs_unlink_rep_clear_dup(&rep);
}

/* The mode to give back to a frozen source whose original mode was orig:
 * its permission bits as they are now (cur: a brick keeps the frozen bits
 * through a client's chmod, storage/posix, so a chmod since the freeze is
 * in them), S_ISGID and S_ISVTX as orig had them (cur's are the freeze's). */
static uint32_t unfrozen_mode(uint32_t orig, uint32_t cur)
{
    if ((cur & RB_FROZEN_BITS) != RB_FROZEN_BITS)
        return orig & 07777; /* an older brick: a chmod unfroze it, and we took its mode */
    return (cur & 07777 & ~(uint32_t)RB_FROZEN_BITS) | (orig & RB_FROZEN_BITS);
}

static void undo(struct mig *m)
{
    if (m->frozen) {
        struct bfs_iatt cur;
        if (fstat_fd(m, m->src, m->sfd, &cur) >= 0)
            m->attr.mode = (m->attr.mode & ~07777u) | unfrozen_mode(m->attr.mode, cur.mode);
        set_mode(m, m->src, m->attr.mode & 07777);
        del_internal(m, m->src, RB_MIGRATING_KEY);
        del_internal(m, m->src, RB_COPIED_KEY);
    }
    struct bfs_iatt cur;
    if (lookup_name(m, m->dst, &cur) >= 0 && bfs_gfid_eq(&cur.gfid, &m->gfid) &&
        (cur.mode & 07777) == S_ISVTX) {
        struct bfs_unlink_req r = {0};
        struct bfs_unlink_rep rep;
        r.loc = m->loc;
        bfs_sync_unlink(m->dst, m->st, &r, &rep);
        bfs_unlink_rep_clear_dup(&rep);
    }
}

static void log_move(struct rb *rb, const struct mig *m)
{
    char g[BFS_GFID_STRLEN], line[256];
    bfs_gfid_fmt(&m->gfid, g);
    int n = snprintf(line, sizeof(line), "%s %llu %s %s\n", g,
                     (unsigned long long)m->attr.size, m->src->name, m->dst->name);
    if (write(rb->moves_fd, line, (size_t)n) != n)
        bfs_log(RB_LOG, BFS_LOG_WARNING, "cannot append to moves.log");
}

/* Does anyone hold a POSIX lock on the source? (GETLK of the whole file
 * for a write lock: no side effect.) */
static bool posix_locked(struct mig *m)
{
    struct bfs_lk_req r = {0};
    struct bfs_lk_rep rep;
    r.fd = m->sfd;
    r.cmd = BFS_LK_GETLK;
    r.lock.type = F_WRLCK;
    r.lock.whence = SEEK_SET;
    r.lock.owner = m->rb->lock_owner;
    r.lock.pid = (uint32_t)getpid();
    int rc = bfs_sync_lk(m->src, m->st, &r, &rep);
    bool held = rc >= 0 && rep.lock.type != F_UNLCK;
    bfs_lk_rep_clear_dup(&rep);
    return held;
}

/* Did step rc fail because a client unlinked or renamed the source
 * meanwhile (ENOENT/ESTALE, and the name on S no longer gives our GFID)?
 * Then there is nothing left to move: not a failure of the rebalance (a
 * remove-brick drain under a workload that renames and unlinks would
 * otherwise end "failed"). A file made anew under the name is another
 * file; the walk of a later run moves it. */
static bool source_gone(struct mig *m, int rc)
{
    if (rc != -ENOENT && rc != -ESTALE)
        return false;
    struct bfs_iatt cur;
    int lrc = lookup_name(m, m->src, &cur);
    return lrc == -ENOENT || lrc == -ESTALE || (lrc >= 0 && !bfs_gfid_eq(&cur.gfid, &m->gfid));
}

/* A file that stays on S while its name hashes to H: a link file on H
 * (make_dst leaves exactly that: link-shaped, empty, linkto S). */
static int leave_link(struct mig *m)
{
    if (m->dfd) {
        bfs_fd_unref(m->dfd);
        m->dfd = NULL;
    }
    int rc = make_dst(m);
    if (m->dfd) {
        bfs_fd_unref(m->dfd);
        m->dfd = NULL;
    }
    return rc < 0 ? rc : 0;
}

/* The mode of a source frozen by a run that died, restored (unfrozen_mode:
 * the mark has the original; a chmod since is in the permission bits). */
static void unfreeze_crashed(struct mig *m)
{
    struct bfs_getxattr_req g = {0};
    struct bfs_getxattr_rep grep;
    struct bfs_dict *xd = bfs_rb_xdata_internal();
    g.loc.gfid = m->gfid;
    g.name = RB_MIGRATING_KEY;
    g.xdata = xd;
    const void *v;
    size_t len;
    if (bfs_sync_getxattr(m->src, m->st, &g, &grep) >= 0 &&
        bfs_dict_get_bin(grep.xattrs, RB_MIGRATING_KEY, &v, &len) == 0) {
        char txt[16] = {0};
        memcpy(txt, v, len < sizeof(txt) - 1 ? len : sizeof(txt) - 1);
        uint32_t orig = (uint32_t)strtoul(txt, NULL, 8) & 07777;
        m->attr.mode = (m->attr.mode & ~07777u) | unfrozen_mode(orig, m->attr.mode);
        set_mode(m, m->src, m->attr.mode & 07777);
    }
    bfs_getxattr_rep_clear_dup(&grep);
    bfs_dict_unref(xd);
}

/* Steps 1-5 for a file that is there and may move (names locked). */
static int move_file(struct mig *m)
{
    struct rb *rb = m->rb;
    const char *name = m->loc.name;
    int rc;
    if (m->attr.nlink > 1) { /* hard links: moving one name would copy the file */
        rc = leave_link(m);
        return rc < 0 ? rc : -EBUSY;
    }
    /* A file someone holds a POSIX lock on stays: the holder's fd may be
     * pinned to a graph that does not know the destination (a mount keeps
     * locked fds on the graph where their locks are, graph-switch.md), and
     * its writes could not follow. Found through a link file; counted as
     * skipped; a later run moves it. */
    if ((rc = open_gfid(m, m->src, O_RDWR, &m->sfd)) >= 0 && posix_locked(m)) {
        rc = leave_link(m);
        return rc < 0 ? rc : -EBUSY;
    }
    const char *step = "dst";
    if (rc >= 0)
        rc = make_dst(m);
    if (rc == 1) { /* moved before a crash, not yet dropped */
        rc = drop_src(m);
        if (rc >= 0) {
            log_move(rb, m);
            rc = 1;
        }
        return rc;
    }
    if (rc >= 0 && (step = "lock", rc = inodelk(m, F_WRLCK)) >= 0)
        m->locked = true;
    if (rc >= 0 && (step = "copy"))
        rc = copy_and_freeze(m);
    if (rc >= 0 && (step = "switch"))
        rc = switch_dst(m);
    if (rc >= 0) {
        m->frozen = false; /* moved: S's copy is unlinked, frozen as it is */
        rc = drop_src(m);
        if (rc < 0) /* both exist, H's is the file: the next run drops S */
            bfs_log(RB_LOG, BFS_LOG_WARNING, "%s: moved, but unlink on %s: %s", name,
                    m->src->name, strerror(-rc));
        drop_old_link(m);
        log_move(rb, m);
        return 1;
    }
    undo(m);
    if (source_gone(m, rc)) {
        rb->raced++;
        bfs_log(RB_LOG, BFS_LOG_INFO, "%s: gone while being moved (%s): nothing to move",
                name, strerror(-rc));
        return -EBUSY; /* counted as skipped, not as a failure */
    }
    if (rc != -EINTR)
        bfs_log(RB_LOG, BFS_LOG_WARNING, "%s: step %s failed: %s", name, step, strerror(-rc));
    return rc;
}

int bfs_rb_migrate(struct rb *rb, int s, int h, const struct bfs_gfid *pargfid,
                   const char *name, const struct bfs_iatt *attr)
{
    struct mig m = {.rb = rb, .s = s, .h = h, .src = rb->sub[s], .dst = rb->sub[h]};
    m.st = bfs_rb_stack();
    m.st->lk_owner = rb->lock_owner; /* features/locks keys locks by (client, owner) */
    m.loc.pargfid = *pargfid;
    m.loc.name = name;
    m.gfid = attr->gfid;
    m.attr = *attr;
    /* The name's entry locks for the whole move: a client's rename,
     * unlink or link of the name waits for the move to end, and then finds
     * the file in one place (on H, or still on S after a failure). Without
     * them a rename on S between our copy and our unlink of S left the
     * renamed data on S with no link file, or our unlink removed the
     * data a rename had just put under the name. */
    int rc = lock_name(&m);
    if (rc >= 0)
        rc = recheck_source(&m);
    if (rc > 0) {
        if ((m.attr.mode & RB_FROZEN_BITS) == RB_FROZEN_BITS)
            unfreeze_crashed(&m);
        rc = move_file(&m);
    } else if (rc == 0) {
        rb->raced++;
        rc = -EBUSY; /* renamed or unlinked since the listing: nothing here to move */
    }
    if (m.locked)
        inodelk(&m, F_UNLCK);
    unlock_name(&m);
    if (m.sfd)
        bfs_fd_unref(m.sfd);
    if (m.dfd)
        bfs_fd_unref(m.dfd);
    bfs_stack_unref(m.st);
    return rc == -EBUSY ? 0 : rc; /* skipped (found through a link file, or gone) */
}

void bfs_rb_throttle(struct rb *rb, uint64_t n)
{
    if (rb->max_bps <= 0)
        return;
    rb->throttle_bytes += n;
    double due = rb->throttle_t0 + (double)rb->throttle_bytes / rb->max_bps;
    double now = bfs_rb_now();
    if (due > now) {
        struct timespec ts = {.tv_sec = (time_t)(due - now),
                              .tv_nsec = (long)(((due - now) - (double)(time_t)(due - now)) * 1e9)};
        nanosleep(&ts, NULL);
    }
    if (now - rb->throttle_t0 > 10) { /* a sliding start: no burst after a pause */
        rb->throttle_t0 = bfs_rb_now();
        rb->throttle_bytes = 0;
    }
}
