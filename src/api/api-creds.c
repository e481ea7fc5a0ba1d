/*
 * api-creds.c — per-thread credentials and the stack of each call.
 *
 * brickfs_set_creds() stores (uid, gid, groups) for the calling thread and
 * one brickfs_t in a small thread-local list keyed by the handle's id (ids
 * are never reused, so an entry left behind by a finished handle can never
 * apply to a new one). The list lives as long as the thread: a pthread key
 * destructor frees it at thread exit. Without an entry a call runs with the
 * process's effective uid, effective gid and supplementary groups.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"

struct creds {
    uint64_t fsid;
    uint32_t uid, gid;
    uint32_t ngroups;
    uint32_t groups[BFS_MAX_GROUPS];
    struct creds *next;
};

static __thread struct creds *tls_creds;
static pthread_key_t creds_key;
static pthread_once_t creds_once = PTHREAD_ONCE_INIT;

static void creds_list_free(void *p)
{
    struct creds *c = p, *next;
    for (; c; c = next) {
        next = c->next;
        free(c);
    }
    tls_creds = NULL;
}

static void creds_key_init(void)
{
    (void)pthread_key_create(&creds_key, creds_list_free);
}

static struct creds *creds_find(uint64_t fsid)
{
    for (struct creds *c = tls_creds; c; c = c->next)
        if (c->fsid == fsid)
            return c;
    return NULL;
}

int brickfs_set_creds(brickfs_t *fs, uid_t uid, gid_t gid, int ngroups, const gid_t *groups)
{
    if (!fs || ngroups < 0 || ngroups > BFS_MAX_GROUPS || (ngroups > 0 && !groups))
        return (int)bfs__api_ret(-EINVAL);
    pthread_once(&creds_once, creds_key_init);
    struct creds *c = creds_find(fs->id);
    if (!c) {
        c = calloc(1, sizeof(*c));
        if (!c)
            return (int)bfs__api_ret(-ENOMEM);
        c->fsid = fs->id;
        c->next = tls_creds;
        tls_creds = c;
        pthread_setspecific(creds_key, tls_creds);
    }
    c->uid = (uint32_t)uid;
    c->gid = (uint32_t)gid;
    c->ngroups = (uint32_t)ngroups;
    for (int i = 0; i < ngroups; i++)
        c->groups[i] = (uint32_t)groups[i];
    return 0;
}

int brickfs_reset_creds(brickfs_t *fs)
{
    if (!fs)
        return (int)bfs__api_ret(-EINVAL);
    bfs__api_creds_forget(fs);
    return 0;
}

void bfs__api_creds_forget(struct brickfs *fs)
{
    for (struct creds **pp = &tls_creds; *pp; pp = &(*pp)->next) {
        if ((*pp)->fsid == fs->id) {
            struct creds *c = *pp;
            *pp = c->next;
            free(c);
            /* an entry existed, so the key was created */
            pthread_setspecific(creds_key, tls_creds);
            return;
        }
    }
}

/* The process's own identity. getgroups() is asked each time: a process
 * may change its groups, and one syscall is nothing next to a fop. */
static void creds_default(struct bfs_stack *st)
{
    gid_t small[BFS_MAX_GROUPS], *groups = small;
    st->uid = (uint32_t)geteuid();
    st->gid = (uint32_t)getegid();
    int n = getgroups(BFS_MAX_GROUPS, groups);
    if (n < 0) {
        /* more groups than a stack carries: keep the first ones */
        int all = getgroups(0, NULL);
        groups = all > 0 ? malloc((size_t)all * sizeof(*groups)) : NULL;
        n = groups ? getgroups(all, groups) : 0;
        if (n < 0)
            n = 0;
        if (n > BFS_MAX_GROUPS)
            n = BFS_MAX_GROUPS;
    }
    st->ngroups = (uint32_t)n;
    for (int i = 0; i < n; i++)
        st->groups[i] = (uint32_t)groups[i];
    if (groups != small)
        free(groups);
}

struct bfs_stack *bfs__api_stack(struct brickfs *fs)
{
    struct bfs_stack *st = bfs_stack_new();
    if (!st)
        return NULL;
    struct creds *c = creds_find(fs->id);
    if (c) {
        st->uid = c->uid;
        st->gid = c->gid;
        st->ngroups = c->ngroups;
        memcpy(st->groups, c->groups, c->ngroups * sizeof(c->groups[0]));
    } else {
        creds_default(st);
    }
    st->pid = (uint32_t)getpid();
    st->unique = __atomic_add_fetch(&fs->next_unique, 1, __ATOMIC_RELAXED);
    return st;
}
