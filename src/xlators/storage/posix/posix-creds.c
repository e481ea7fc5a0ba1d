/*
 * posix-creds.c — run each fop with the caller's identity.
 *
 * A brick runs as root, but must refuse what the local file system would
 * refuse the calling user. So while a job runs, its worker thread takes the
 * caller's fsuid, fsgid and supplementary groups (frame->stack): the kernel
 * then checks permissions, applies the sticky bit and sets ownership of new
 * files exactly as for a local process of that user.
 *
 * Linux credentials are per thread; glibc's setgroups/setuid wrappers
 * broadcast a change to every thread of the process (POSIX semantics), which
 * would be a disaster here, so groups are set with the raw system call.
 * setfsuid/setfsgid are per thread already. Changing fsuid from 0 drops the
 * file capabilities (DAC override, chown, fowner) from the thread's
 * effective set and changing it back to 0 restores them.
 *
 * Handle maintenance in .brickfs (root-only) and resolution through it run
 * as root: bfs__px_root_begin()/end() (nestable) switch the thread back for
 * a moment. The identity currently on the thread is cached, so a switch to
 * what is already active costs nothing — a root caller costs no syscall.
 *
 * Worker threads are shared with other translators: a job always ends with
 * the thread back at the process's own identity (bfs__px_creds_leave).
 *
 * State: one process-wide root identity (read once), and per thread the
 * active identity, the current job's caller and the root nesting depth.
 */
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "posix.h"

struct px_ident {
    uint32_t uid, gid;
    uint32_t ngroups;
    gid_t groups[BFS_MAX_GROUPS];
};

static struct px_ident root_ident;
static bool can_switch; /* the process is root: switching is possible */
static pthread_once_t creds_once = PTHREAD_ONCE_INIT;

static __thread struct {
    bool known;               /* cur is what the thread really carries */
    bool in_job;
    int root_depth;
    int fs_state;             /* 0 not tried, 1 own fs_struct, -1 unshare failed */
    mode_t um;                /* the umask between creates (own fs_struct: 0) */
    struct px_ident cur;
    struct px_ident caller;
} T;

static void creds_init_once(void)
{
    root_ident.uid = (uint32_t)geteuid();
    root_ident.gid = (uint32_t)getegid();
    int n = getgroups(BFS_MAX_GROUPS, root_ident.groups);
    root_ident.ngroups = n > 0 ? (uint32_t)n : 0;
    can_switch = geteuid() == 0;
}

void bfs__px_creds_init(void)
{
    pthread_once(&creds_once, creds_init_once);
}

static bool groups_eq(const struct px_ident *a, const struct px_ident *b)
{
    return a->ngroups == b->ngroups &&
           memcmp(a->groups, b->groups, a->ngroups * sizeof(a->groups[0])) == 0;
}

static void ident_copy(struct px_ident *dst, const struct px_ident *src)
{
    dst->uid = src->uid;
    dst->gid = src->gid;
    dst->ngroups = src->ngroups;
    memcpy(dst->groups, src->groups, src->ngroups * sizeof(src->groups[0]));
}

/* Makes the thread carry `want`. Raw syscalls: per thread, never broadcast.
 * setfsuid/setfsgid cannot report failure; as root they do not fail. */
static void apply(const struct px_ident *want)
{
    if (!can_switch)
        return;
    bool all = !T.known;
    if (all || !groups_eq(&T.cur, want)) {
        if (syscall(SYS_setgroups, (size_t)want->ngroups, want->groups) < 0)
            T.known = false;
    }
    if (all || T.cur.gid != want->gid)
        syscall(SYS_setfsgid, want->gid);
    if (all || T.cur.uid != want->uid)
        syscall(SYS_setfsuid, want->uid);
    ident_copy(&T.cur, want);
    T.known = true;
}

void bfs__px_creds_enter(const struct bfs_stack *st)
{
    bfs__px_creds_init();
    T.caller.uid = st->uid;
    T.caller.gid = st->gid;
    T.caller.ngroups = st->ngroups > BFS_MAX_GROUPS ? BFS_MAX_GROUPS : st->ngroups;
    for (uint32_t i = 0; i < T.caller.ngroups; i++)
        T.caller.groups[i] = st->groups[i];
    T.in_job = true;
    T.root_depth = 0;
    apply(&T.caller);
}

void bfs__px_creds_leave(void)
{
    T.in_job = false;
    T.root_depth = 0;
    apply(&root_ident);
}

void bfs__px_root_begin(void)
{
    if (T.root_depth++ == 0)
        apply(&root_ident);
}

void bfs__px_root_end(void)
{
    if (T.root_depth > 0 && --T.root_depth == 0)
        apply(T.in_job ? &T.caller : &root_ident);
}

/*
 * The umask of a create must be the client's, and the kernel must apply it
 * itself (it skips the umask when the parent has a default ACL). umask is
 * per fs_struct, shared by all threads; unshare(CLONE_FS) once gives this
 * worker thread its own. If that fails, the umask is applied to the mode
 * here instead (the process umask then also applies), and ACL inheritance
 * loses that detail.
 */
mode_t bfs__px_umask_push(mode_t um, mode_t *mode)
{
    if (T.fs_state == 0 && unshare(CLONE_FS) == 0) {
        /* this thread's own umask is 0 between creates: what the FUSE
         * kernel sends (it applied the umask itself), so most creates
         * need no umask calls at all; internal files (0700, 0600) are
         * made with exactly their mode */
        umask(0);
        T.fs_state = 1;
        T.um = 0;
    } else if (T.fs_state == 0) {
        T.fs_state = -1;
    }
    if (T.fs_state < 0) {
        *mode &= ~(um & 0777);
        return (mode_t)-1;
    }
    um &= 0777;
    if (T.um == um)
        return (mode_t)-1; /* already this thread's: no syscalls */
    return umask(um);
}

void bfs__px_umask_pop(mode_t old)
{
    if (old != (mode_t)-1)
        umask(old);
}
