/*
 * bricks.c — brick folders: parsing "HOST:/DIR", the checks of volume
 * create (host is this node, no nesting, exists or creatable, not on the
 * root file system unless forced, not already part of a volume), and the
 * trusted.brickfs.volume-id marker on the brick root.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "core/log.h"
#include "mgmt/mgmt.h"
#include "mgmt/pool.h"

/* Lexical normalisation: no empty, "." or ".." components. */
static int normalise(const char *in, char *out, size_t outlen)
{
    size_t o = 0;
    const char *p = in;
    while (*p) {
        while (*p == '/')
            p++;
        const char *s = p;
        while (*p && *p != '/')
            p++;
        size_t n = (size_t)(p - s);
        if (n == 0 || (n == 1 && s[0] == '.'))
            continue;
        if (n == 2 && s[0] == '.' && s[1] == '.') {
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
            continue;
        }
        if (o + n + 2 > outlen)
            return -ENAMETOOLONG;
        out[o++] = '/';
        memcpy(out + o, s, n);
        o += n;
    }
    out[o] = 0;
    return o ? 0 : -EINVAL;
}

static bool addr_is_local(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET &&
        (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127)
        return true;
    if (sa->sa_family == AF_INET6 &&
        IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr))
        return true;
    struct ifaddrs *ifs, *i;
    bool found = false;
    if (getifaddrs(&ifs) < 0)
        return false;
    for (i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != sa->sa_family)
            continue;
        if (sa->sa_family == AF_INET)
            found = ((const struct sockaddr_in *)sa)->sin_addr.s_addr ==
                    ((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
        else
            found = memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr,
                           &((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16) == 0;
    }
    freeifaddrs(ifs);
    return found;
}

static int host_check(const char *host, struct bfs_err *e)
{
    if (strcmp(host, "127.0.0.1") == 0 || strcmp(host, "localhost") == 0)
        return 0;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *a;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0)
        return bfs_fail(e, 400, "brick host '%s' does not resolve (%s)", host,
                        gai_strerror(rc));
    bool local = false;
    for (a = res; a && !local; a = a->ai_next)
        local = addr_is_local(a->ai_addr);
    freeaddrinfo(res);
    if (!local && bfs_pool_known_host(host))
        return 0; /* a pool member's address: that node owns the brick (pool.c) */
    if (!local)
        return bfs_fail(e, 400, "brick host '%s' is neither this node nor a node of the pool "
                        "(use 127.0.0.1, a name of this node, or in a pool a node's name: "
                        "brickfs pool list)", host);
    return 0;
}

int bfs_brick_parse(const char *spec, char **host, char **path, struct bfs_err *e)
{
    const char *sep = strstr(spec, ":/");
    if (!sep || sep == spec)
        return bfs_fail(e, 400, "brick '%s' is not HOST:/ABSOLUTE/PATH", spec);
    char h[256], p[PATH_MAX];
    if ((size_t)(sep - spec) >= sizeof(h))
        return bfs_fail(e, 400, "brick '%s': host name too long", spec);
    memcpy(h, spec, (size_t)(sep - spec));
    h[sep - spec] = 0;
    int rc = normalise(sep + 1, p, sizeof(p));
    if (rc == -EINVAL)
        return bfs_fail(e, 400, "brick '%s': the root folder cannot be a brick", spec);
    if (rc < 0)
        return bfs_fail(e, 400, "brick '%s': path too long", spec);
    if (host_check(h, e) < 0)
        return -1;
    *host = strdup(h);
    *path = strdup(p);
    if (!*host || !*path) {
        free(*host);
        free(*path);
        return bfs_fail(e, 500, "out of memory");
    }
    return 0;
}

/* The real path of p: its longest existing prefix through realpath(3), the
 * rest appended. *exist_len says how much of out exists. */
static int resolve(const char *p, char *out, size_t outlen, size_t *exist_len)
{
    char head[PATH_MAX], rp[PATH_MAX];
    snprintf(head, sizeof(head), "%s", p);
    size_t hl = strlen(head);
    for (;;) {
        if (realpath(hl ? head : "/", rp))
            break;
        if (errno != ENOENT)
            return -errno;
        char *slash = strrchr(head, '/');
        if (!slash)
            return -ENOENT;
        *slash = 0;
        hl = strlen(head);
    }
    const char *rest = p + hl;
    *exist_len = strcmp(rp, "/") == 0 ? 0 : strlen(rp);
    if (snprintf(out, outlen, "%s%s", strcmp(rp, "/") == 0 ? "" : rp, rest) >= (int)outlen)
        return -ENAMETOOLONG;
    if (!*out)
        snprintf(out, outlen, "/");
    return 0;
}

/* a is b or lies inside it */
static bool path_within(const char *a, const char *b)
{
    size_t n = strlen(b);
    return strncmp(a, b, n) == 0 && (a[n] == 0 || a[n] == '/');
}

struct rbrick {
    char real[PATH_MAX];
    const char *spec_host, *spec_path;
    const char *vol; /* NULL = the new volume */
};

static int nesting_check(struct rbrick *all, int n, int nnew, struct bfs_err *e)
{
    for (int i = 0; i < nnew; i++) {
        for (int j = 0; j < n; j++) {
            if (i == j)
                continue;
            const char *what = all[j].vol ? all[j].vol : "the same request";
            if (strcmp(all[i].real, all[j].real) == 0 && !all[j].vol)
                return bfs_fail(e, 400, "brick %s:%s is given twice", all[i].spec_host,
                                all[i].spec_path);
            if (strcmp(all[i].real, all[j].real) == 0)
                return bfs_fail(e, 409, "brick %s:%s is already a brick of volume %s",
                                all[i].spec_host, all[i].spec_path, all[j].vol);
            if (path_within(all[i].real, all[j].real) || path_within(all[j].real, all[i].real))
                return bfs_fail(e, 409, "brick %s:%s %s brick %s:%s of %s%s; bricks cannot "
                                "be nested", all[i].spec_host, all[i].spec_path,
                                path_within(all[i].real, all[j].real) ? "lies inside"
                                                                      : "contains",
                                all[j].spec_host, all[j].spec_path,
                                all[j].vol ? "volume " : "", what);
        }
    }
    return 0;
}

static int folder_check(const struct rbrick *b, size_t exist_len, bool force, struct bfs_err *e)
{
    struct stat st, root;
    char existing[PATH_MAX];
    snprintf(existing, sizeof(existing), "%.*s", (int)(exist_len ? exist_len : 1),
             exist_len ? b->real : "/");
    bool exists = strcmp(existing, b->real) == 0;
    if (stat(existing, &st) < 0)
        return bfs_fail(e, 400, "brick %s:%s: cannot stat %s: %s", b->spec_host, b->spec_path,
                        existing, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return bfs_fail(e, 400, "brick %s:%s: %s is not a directory", b->spec_host,
                        b->spec_path, existing);
    if (!exists && access(existing, W_OK | X_OK) < 0)
        return bfs_fail(e, 400, "brick %s:%s does not exist and cannot be created (%s: %s)",
                        b->spec_host, b->spec_path, existing, strerror(errno));
    if (stat("/", &root) == 0 && root.st_dev == st.st_dev && !force)
        return bfs_fail(e, 400, "brick %s:%s is on the root file system; put bricks on their "
                        "own file system, or add 'force' to use it anyway", b->spec_host,
                        b->spec_path);
    if (exists) {
        char id[64];
        ssize_t n = getxattr(b->real, BFS_BRICK_XATTR, id, sizeof(id) - 1);
        if (n >= 0) {
            id[n] = 0;
            return bfs_fail(e, 409, "brick %s:%s already belongs to a volume (id %s); if "
                            "that volume is gone, free the folder with: setfattr -x %s %s",
                            b->spec_host, b->spec_path, id, BFS_BRICK_XATTR, b->real);
        }
    }
    return 0;
}

int bfs_bricks_check(struct bfs_mgmt *m, struct bfs_vbrick *nb, int n, bool force,
                     struct bfs_err *e)
{
    struct bfs_volume **vols;
    int nvols, total = n, k = 0, rc = 0;
    if (n < 1)
        return bfs_fail(e, 400, "a volume needs at least one brick (HOST:/DIR)");
    if (bfs_volume_list(m, &vols, &nvols) < 0)
        return bfs_fail(e, 500, "cannot list volumes from the store");
    for (int i = 0; i < nvols; i++)
        total += vols[i]->nbricks;
    struct rbrick *all = calloc((size_t)total, sizeof(*all));
    size_t *exist = calloc((size_t)n, sizeof(*exist));
    if (!all || !exist) {
        rc = bfs_fail(e, 500, "out of memory");
        goto out;
    }
    for (int i = 0; i < n && rc == 0; i++, k++) {
        all[k].spec_host = nb[i].host;
        all[k].spec_path = nb[i].path;
        int r = resolve(nb[i].path, all[k].real, sizeof(all[k].real), &exist[i]);
        if (r < 0)
            rc = bfs_fail(e, 400, "brick %s:%s: %s", nb[i].host, nb[i].path, strerror(-r));
    }
    for (int v = 0; v < nvols && rc == 0; v++) {
        for (int i = 0; i < vols[v]->nbricks; i++, k++) {
            size_t el;
            all[k].spec_host = vols[v]->bricks[i].host;
            all[k].spec_path = vols[v]->bricks[i].path;
            all[k].vol = vols[v]->name;
            if (resolve(vols[v]->bricks[i].path, all[k].real, sizeof(all[k].real), &el) < 0)
                snprintf(all[k].real, sizeof(all[k].real), "%s", vols[v]->bricks[i].path);
        }
    }
    if (rc == 0)
        rc = nesting_check(all, k, n, e);
    for (int i = 0; i < n && rc == 0; i++)
        rc = folder_check(&all[i], exist[i], force, e);
out:
    free(all);
    free(exist);
    bfs_volume_list_free(vols, nvols);
    return rc;
}

static int unmark_one(const char *path, const char *id)
{
    char cur[64];
    ssize_t n = getxattr(path, BFS_BRICK_XATTR, cur, sizeof(cur) - 1);
    if (n < 0)
        return errno == ENODATA || errno == ENOENT ? 0 : -errno;
    cur[n] = 0;
    if (strcmp(cur, id) != 0)
        return 0; /* another volume's marker: not ours to remove */
    return removexattr(path, BFS_BRICK_XATTR) < 0 ? -errno : 0;
}

int bfs_bricks_mark(const struct bfs_volume *v, struct bfs_err *e)
{
    for (int i = 0; i < v->nbricks; i++) {
        const char *p = v->bricks[i].path;
        int rc = bfs_mkdir_p(p, 0755);
        if (rc == 0 && setxattr(p, BFS_BRICK_XATTR, v->id, strlen(v->id), XATTR_CREATE) < 0)
            rc = -errno;
        if (rc < 0) {
            for (int j = 0; j < i; j++)
                unmark_one(v->bricks[j].path, v->id);
            if (rc == -EPERM || rc == -ENOTSUP)
                return bfs_fail(e, 500, "cannot set %s on brick %s: %s (brickfsd must run as "
                                "root, on a file system with trusted xattrs)", BFS_BRICK_XATTR,
                                p, strerror(-rc));
            return bfs_fail(e, 500, "cannot prepare brick folder %s: %s", p, strerror(-rc));
        }
    }
    return 0;
}

void bfs_bricks_unmark(const struct bfs_volume *v)
{
    for (int i = 0; i < v->nbricks; i++) {
        int rc = unmark_one(v->bricks[i].path, v->id);
        if (rc < 0)
            bfs_log(MGMT_LOG, BFS_LOG_WARNING, "volume %s: cannot remove %s from %s: %s",
                    v->name, BFS_BRICK_XATTR, v->bricks[i].path, strerror(-rc));
    }
}

void bfs_bricks_remark(const struct bfs_volume *v)
{
    for (int i = 0; i < v->nbricks; i++) {
        const char *p = v->bricks[i].path;
        char cur[64];
        ssize_t n = getxattr(p, BFS_BRICK_XATTR, cur, sizeof(cur) - 1);
        if (n >= 0) {
            cur[n] = 0;
            if (strcmp(cur, v->id) != 0)
                bfs_log(MGMT_LOG, BFS_LOG_WARNING, "volume %s: brick %s carries volume id %s, "
                        "not %s", v->name, p, cur, v->id);
            continue;
        }
        if (bfs_mkdir_p(p, 0755) == 0 &&
            setxattr(p, BFS_BRICK_XATTR, v->id, strlen(v->id), XATTR_CREATE) == 0)
            bfs_log(MGMT_LOG, BFS_LOG_INFO, "volume %s: marked brick %s (create was "
                    "interrupted)", v->name, p);
    }
}
