/*
 * store-local.c — the embedded store backend: one file per key in a folder,
 * written so that a crash at any moment leaves every key wholly old or
 * wholly new (docs/design/management.md, "The local backend").
 *
 *   DIR/ENCODED-KEY.kv   "brickfs-store 1 REV LEN\n" + LEN bytes of value
 *   DIR/REVISION         "REV\n": the last revision handed out
 *
 * Each file is written to NAME.tmp, fsync'd, renamed over NAME, then the
 * folder is fsync'd. A put writes the key then REVISION; a delete writes
 * REVISION then unlinks, so after a crash the revision (the larger of
 * REVISION and every key's) never goes back. Keys are encoded with every
 * byte outside [A-Za-z0-9._-] as %XX.
 *
 * Lifetime: open() allocates a struct local, close() frees it. One mutex
 * serialises every call (state is small; writes are fsync-bound anyway).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mgmt/store.h"

#define KV_SUFFIX ".kv"
#define TMP_SUFFIX ".tmp"
#define REV_FILE "REVISION"
#define HDR_MAGIC "brickfs-store 1 "
#define NAME_MAX_ENC 240

struct local {
    char *dir;
    int dirfd;
    uint64_t rev;
    pthread_mutex_t lock;
};

static int encode_key(const char *key, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-';
        if (o + 4 + sizeof(KV_SUFFIX) > outlen || o > NAME_MAX_ENC)
            return -ENAMETOOLONG;
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    /* "REVISION" and "x.tmp" can never collide: both lack the .kv suffix */
    memcpy(out + o, KV_SUFFIX, sizeof(KV_SUFFIX));
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* File name -> key; -EINVAL if it is not a key file. */
static int decode_name(const char *name, char *key, size_t keylen)
{
    size_t n = strlen(name), sl = strlen(KV_SUFFIX), o = 0;
    if (n <= sl || strcmp(name + n - sl, KV_SUFFIX) != 0)
        return -EINVAL;
    for (size_t i = 0; i < n - sl; i++) {
        if (o + 1 >= keylen)
            return -EINVAL;
        if (name[i] == '%') {
            int a = i + 2 < n - sl ? hexval(name[i + 1]) : -1;
            int b = a >= 0 ? hexval(name[i + 2]) : -1;
            if (b < 0)
                return -EINVAL;
            key[o++] = (char)(a * 16 + b);
            i += 2;
        } else {
            key[o++] = name[i];
        }
    }
    key[o] = 0;
    return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* NAME.tmp <- head + body, fsync, rename over NAME, fsync the folder. */
static int atomic_write(struct local *l, const char *name, const char *head, const void *body,
                        size_t len)
{
    char tmp[NAME_MAX_ENC + 32];
    snprintf(tmp, sizeof(tmp), "%s%s", name, TMP_SUFFIX);
    int fd = openat(l->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int rc = write_all(fd, head, strlen(head));
    if (rc == 0 && len)
        rc = write_all(fd, body, len);
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && renameat(l->dirfd, tmp, l->dirfd, name) < 0)
        rc = -errno;
    if (rc < 0) {
        unlinkat(l->dirfd, tmp, 0);
        return rc;
    }
    return fsync(l->dirfd) < 0 ? -errno : 0;
}

static int read_file(int dirfd, const char *name, char **buf, size_t *len)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    char *b = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    int rc = b ? 0 : -ENOMEM;
    while (rc == 0 && got < (size_t)st.st_size) {
        ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            rc = r < 0 ? -errno : -EIO;
        else
            got += (size_t)r;
    }
    close(fd);
    if (rc < 0) {
        free(b);
        return rc;
    }
    b[got] = 0;
    *buf = b;
    *len = got;
    return 0;
}

/* Parses a key file. The value is moved to the front of buf. */
static int parse_kv(char *buf, size_t len, uint64_t *rev, size_t *vlen)
{
    size_t ml = strlen(HDR_MAGIC);
    char *nl = memchr(buf, '\n', len);
    if (!nl || len < ml || memcmp(buf, HDR_MAGIC, ml) != 0)
        return -EIO;
    uint64_t r, n;
    char extra;
    *nl = 0;
    if (sscanf(buf + ml, "%" SCNu64 " %" SCNu64 "%c", &r, &n, &extra) != 2)
        return -EIO;
    size_t hl = (size_t)(nl - buf) + 1;
    if (n != len - hl || r == 0)
        return -EIO;
    memmove(buf, buf + hl, n);
    buf[n] = 0;
    *rev = r;
    *vlen = n;
    return 0;
}

/* Reads key file NAME: 0, -ENOENT, -EIO (corrupt). */
static int load(struct local *l, const char *name, char **val, size_t *len, uint64_t *rev)
{
    char *buf;
    size_t n;
    int rc = read_file(l->dirfd, name, &buf, &n);
    if (rc < 0)
        return rc;
    rc = parse_kv(buf, n, rev, len);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    if (val)
        *val = buf;
    else
        free(buf);
    return 0;
}

static int write_rev(struct local *l, uint64_t rev)
{
    char head[32];
    snprintf(head, sizeof(head), "%" PRIu64 "\n", rev);
    return atomic_write(l, REV_FILE, head, NULL, 0);
}

/* At open: drop stray temp files, check every key file, find the revision. */
static int recover(struct local *l, char *err, size_t errlen)
{
    char *buf;
    size_t n;
    if (read_file(l->dirfd, REV_FILE, &buf, &n) == 0) {
        l->rev = strtoull(buf, NULL, 10);
        free(buf);
    }
    DIR *d = fdopendir(fcntl(l->dirfd, F_DUPFD_CLOEXEC, 0));
    if (!d)
        return -errno;
    rewinddir(d); /* the dup shares its offset with dirfd */
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d))) {
        size_t nl = strlen(de->d_name), tl = strlen(TMP_SUFFIX);
        if (nl > tl && strcmp(de->d_name + nl - tl, TMP_SUFFIX) == 0) {
            unlinkat(l->dirfd, de->d_name, 0);
            continue;
        }
        char key[BFS_STORE_KEY_MAX + 1];
        if (decode_name(de->d_name, key, sizeof(key)) < 0)
            continue;
        uint64_t r;
        size_t vl;
        rc = load(l, de->d_name, NULL, &vl, &r);
        if (rc < 0)
            snprintf(err, errlen, "store file %s/%s is damaged (%s); move it away to start "
                     "without it", l->dir, de->d_name, strerror(-rc));
        else if (r > l->rev)
            l->rev = r;
    }
    closedir(d);
    return rc;
}

static int local_open(const char *arg, void **be, char *err, size_t errlen)
{
    if (!arg || arg[0] != '/') {
        snprintf(err, errlen, "local store: '%s' is not an absolute folder", arg ? arg : "");
        return -EINVAL;
    }
    if (mkdir(arg, 0700) < 0 && errno != EEXIST) {
        int e = errno;
        snprintf(err, errlen, "local store: cannot create %s: %s", arg, strerror(e));
        return -e;
    }
    struct local *l = calloc(1, sizeof(*l));
    if (!l || !(l->dir = strdup(arg))) {
        free(l);
        return -ENOMEM;
    }
    pthread_mutex_init(&l->lock, NULL);
    l->dirfd = open(arg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = l->dirfd < 0 ? -errno : recover(l, err, errlen);
    if (l->dirfd < 0)
        snprintf(err, errlen, "local store: cannot open %s: %s", arg, strerror(-rc));
    if (rc < 0) {
        if (l->dirfd >= 0)
            close(l->dirfd);
        pthread_mutex_destroy(&l->lock);
        free(l->dir);
        free(l);
        return rc;
    }
    *be = l;
    return 0;
}

static void local_close(void *be)
{
    struct local *l = be;
    close(l->dirfd);
    pthread_mutex_destroy(&l->lock);
    free(l->dir);
    free(l);
}

static int local_get(void *be, const char *key, struct bfs_store_kv *out)
{
    struct local *l = be;
    char name[NAME_MAX_ENC + 32];
    int rc = encode_key(key, name, sizeof(name));
    if (rc < 0)
        return rc;
    if (!(out->key = strdup(key)))
        return -ENOMEM;
    pthread_mutex_lock(&l->lock);
    rc = load(l, name, &out->value, &out->len, &out->rev);
    pthread_mutex_unlock(&l->lock);
    if (rc < 0)
        bfs_store_kv_clear(out);
    return rc;
}

static int local_write_locked(struct local *l, const char *name, const void *val, size_t len,
                              uint64_t expect, uint64_t *rev)
{
    uint64_t cur = 0;
    size_t vl;
    int rc = load(l, name, NULL, &vl, &cur);
    if (rc < 0 && rc != -ENOENT)
        return rc;
    if (!val && rc == -ENOENT)
        return -ENOENT;
    if (expect != BFS_STORE_ANY && expect != cur)
        return -ESTALE;
    uint64_t next = l->rev + 1;
    if (val) {
        char head[64];
        snprintf(head, sizeof(head), HDR_MAGIC "%" PRIu64 " %zu\n", next, len);
        rc = atomic_write(l, name, head, val, len);
        if (rc == 0)
            rc = write_rev(l, next);
    } else {
        rc = write_rev(l, next);
        if (rc == 0 && unlinkat(l->dirfd, name, 0) < 0)
            rc = -errno;
        if (rc == 0 && fsync(l->dirfd) < 0)
            rc = -errno;
    }
    /* Even a failed REVISION write may have left the key at next: never
     * hand next out twice. */
    l->rev = next;
    if (rc == 0)
        *rev = next;
    return rc;
}

static int local_write(void *be, const char *key, const void *val, size_t len, uint64_t expect,
                       uint64_t *rev)
{
    struct local *l = be;
    char name[NAME_MAX_ENC + 32];
    int rc = encode_key(key, name, sizeof(name));
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&l->lock);
    rc = local_write_locked(l, name, val, len, expect, rev);
    pthread_mutex_unlock(&l->lock);
    return rc;
}

static int cmp_kv(const void *a, const void *b)
{
    return strcmp(((const struct bfs_store_kv *)a)->key, ((const struct bfs_store_kv *)b)->key);
}

static int list_locked(struct local *l, const char *prefix, struct bfs_store_kv **out,
                       size_t *n)
{
    DIR *d = fdopendir(fcntl(l->dirfd, F_DUPFD_CLOEXEC, 0));
    if (!d)
        return -errno;
    rewinddir(d); /* the dup shares its offset with dirfd */
    struct bfs_store_kv *v = NULL;
    size_t cnt = 0, cap = 0;
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d))) {
        char key[BFS_STORE_KEY_MAX + 1];
        if (decode_name(de->d_name, key, sizeof(key)) < 0 ||
            strncmp(key, prefix, strlen(prefix)) != 0)
            continue;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            struct bfs_store_kv *nv = realloc(v, cap * sizeof(*v));
            if (!nv) {
                rc = -ENOMEM;
                break;
            }
            v = nv;
        }
        struct bfs_store_kv *kv = &v[cnt];
        memset(kv, 0, sizeof(*kv));
        rc = load(l, de->d_name, &kv->value, &kv->len, &kv->rev);
        if (rc == -ENOENT) { /* cannot happen under the lock; be safe */
            rc = 0;
            continue;
        }
        if (rc == 0 && !(kv->key = strdup(key))) {
            free(kv->value);
            rc = -ENOMEM;
        }
        if (rc == 0)
            cnt++;
    }
    closedir(d);
    if (rc < 0) {
        bfs_store_kvs_free(v, cnt);
        return rc;
    }
    if (cnt)
        qsort(v, cnt, sizeof(*v), cmp_kv);
    *out = v;
    *n = cnt;
    return 0;
}

static int local_list(void *be, const char *prefix, struct bfs_store_kv **out, size_t *n)
{
    struct local *l = be;
    pthread_mutex_lock(&l->lock);
    int rc = list_locked(l, prefix, out, n);
    pthread_mutex_unlock(&l->lock);
    return rc;
}

static uint64_t local_revision(void *be)
{
    struct local *l = be;
    pthread_mutex_lock(&l->lock);
    uint64_t r = l->rev;
    pthread_mutex_unlock(&l->lock);
    return r;
}

const struct bfs_store_ops bfs_store_local_ops = {
    .scheme = "local",
    .open = local_open,
    .close = local_close,
    .get = local_get,
    .write = local_write,
    .list = local_list,
    .revision = local_revision,
};
