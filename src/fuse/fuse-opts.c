/*
 * fuse-opts.c — the command line of brickfs-mount.
 *
 *   brickfs-mount [-f] [-o OPT[,OPT...]]... HOST[:PORT]:/VOLUME MOUNTPOINT
 *   brickfs-mount [-f] [-o OPT[,OPT...]]... --volfile FILE MOUNTPOINT
 *
 * HOST[:PORT]:/VOLUME names a brickfsd (PORT 24100 by default) to fetch the
 * client volfile of VOLUME from; backup-volfile-servers=H1:H2 names more
 * (docs/design/graph-switch.md).
 *
 * Our own options are parsed into struct bfs_fuse_opts. The standard mount
 * flags that mount(8) hands every helper are either passed on to libfuse
 * (those that change the kernel mount: nosuid, noexec, noatime, ...) or
 * accepted and ignored (those that only mean something to mount(8) or
 * systemd: defaults, _netdev, nofail, x-systemd.*, ...). Anything else is
 * a usage error (exit 2) naming the option, so a typo never mounts silently
 * with a default.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/options.h"
#include "fuse/fuse-bridge.h"

static const char usage_text[] =
    "Usage: brickfs-mount [-f] [-o OPT[,OPT...]] HOST[:PORT]:/VOLUME MOUNTPOINT\n"
    "       brickfs-mount [-f] [-o OPT[,OPT...]] --volfile FILE MOUNTPOINT\n"
    "\n"
    "Mounts brickfs volume VOLUME, whose client volfile brickfsd on HOST:PORT\n"
    "(default port 24100) serves, on MOUNTPOINT; or the volume that the client\n"
    "volfile FILE describes. A mount from brickfsd follows `volume set` live: it\n"
    "switches to the new graph without unmounting. Without -f it goes to the\n"
    "background once the mount is up; the exit status tells whether it is (0)\n"
    "or why not (1, reason on stderr).\n"
    "\n"
    "  -f, --foreground       stay in the foreground (logs to stderr by default)\n"
    "  -o OPT[,OPT...]        mount options, below\n"
    "      --volfile FILE     the client graph to run (instead of HOST:/VOLUME)\n"
    "  -h, --help             this text\n"
    "\n"
    "Options:\n"
    "  backup-volfile-servers=H1:H2[:PORT]:...\n"
    "                         more brickfsd to fetch the volfile from when HOST does\n"
    "                         not answer (a number after a host is its port)\n"
    "  volfile-poll=SECS      how often to check brickfsd for a new volfile\n"
    "                         (default 2; 0: never, no live graph switch)\n"
    "  attr-timeout=SECS      how long the kernel caches attributes (default 1)\n"
    "  entry-timeout=SECS     how long the kernel caches names (default 1)\n"
    "  negative-timeout=SECS  how long the kernel caches a missing name (default 0)\n"
    "  direct-io[=auto|on|off]\n"
    "                         which opens bypass the kernel page cache: auto (the\n"
    "                         default) those for writing only, on all, off none\n"
    "  capability[=on|off]    file capabilities (security.capability) through the\n"
    "                         mount (default off: the kernel asks for them before\n"
    "                         every write, which would double the round trips)\n"
    "  read-ahead=SIZE        kernel read-ahead window of the mount (default 2MiB;\n"
    "                         0: the kernel's own, 128KiB)\n"
    "  acl[=on|off]           POSIX ACLs (system.posix_acl_*) through the mount\n"
    "                         (default off: they are not supported, EOPNOTSUPP)\n"
    "  selinux[=on|off]       security.selinux labels through the mount (default\n"
    "                         off: they are not supported, EOPNOTSUPP)\n"
    "  log-file=PATH          log file (default: stderr with -f, else\n"
    "                         /var/log/brickfs/mnt-PATH.log)\n"
    "  log-level=LEVEL        none, critical, error, warning, info, debug, trace\n"
    "  allow_other            let every user use the mount (the default for root;\n"
    "                         permissions are checked by the kernel and the brick)\n"
    "  ro                     read-only mount\n"
    "  fsname=NAME            the source df and /proc/mounts show\n"
    "  up-timeout=SECS        how long to wait for the volume to come up (default 30)\n"
    "Standard mount flags (rw, nosuid, nodev, noexec, noatime, sync, _netdev,\n"
    "defaults, nofail, x-*, ...) are accepted; those that apply to the kernel\n"
    "mount are passed on.\n";

/* Flags mount(8) may pass: handed to libfuse as they are. */
static const char *const passed_flags[] = {
    "suid", "nosuid", "dev", "nodev", "exec", "noexec", "sync", "async",
    "dirsync", "noatime", "nodiratime", NULL,
};

/* Flags that mean nothing to a FUSE mount (or are our defaults anyway). */
static const char *const ignored_flags[] = {
    "rw", "defaults", "auto", "noauto", "user", "nouser", "users", "owner",
    "group", "nofail", "_netdev", "atime", "diratime", "relatime", "norelatime",
    "strictatime", "nostrictatime", "lazytime", "nolazytime", "iversion",
    "noiversion", "silent", "loud", "mand", "nomand", "default_permissions",
    "nosymfollow", NULL,
};

static bool in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return true;
    return false;
}

static int parse_secs(const char *key, const char *val, double *out)
{
    char *end;
    errno = 0;
    double d = val ? strtod(val, &end) : NAN;
    if (!val || !*val || *end || errno || !isfinite(d) || d < 0 || d > 86400.0 * 365) {
        fprintf(stderr, "brickfs-mount: option %s needs a number of seconds (got '%s')\n", key,
                val ? val : "");
        return -EINVAL;
    }
    *out = d;
    return 0;
}

static int set_str(char **dst, const char *key, const char *val)
{
    if (!val || !*val) {
        fprintf(stderr, "brickfs-mount: option %s needs a value\n", key);
        return -EINVAL;
    }
    free(*dst);
    *dst = strdup(val);
    return *dst ? 0 : -ENOMEM;
}

/* "key" alone is on; "key=BOOL" any boolean spelling. */
static int set_bool(bool *dst, const char *key, const char *val)
{
    if (val && bfs_parse_bool(val, dst) < 0) {
        fprintf(stderr, "brickfs-mount: %s takes on or off (got '%s')\n", key, val);
        return -EINVAL;
    }
    if (!val)
        *dst = true;
    return 0;
}

/* direct-io alone is on; =auto, or any boolean spelling. */
static int parse_direct_io(const char *val, int *out)
{
    bool on = true;
    if (val && !strcmp(val, "auto")) {
        *out = BFS_FUSE_DIO_AUTO;
        return 0;
    }
    if (val && bfs_parse_bool(val, &on) < 0) {
        fprintf(stderr, "brickfs-mount: direct-io takes auto, on or off (got '%s')\n", val);
        return -EINVAL;
    }
    *out = on ? BFS_FUSE_DIO_ON : BFS_FUSE_DIO_OFF;
    return 0;
}

static int add_flag(struct bfs_fuse_opts *o, const char *flag)
{
    size_t old = o->mount_flags ? strlen(o->mount_flags) : 0;
    char *s = realloc(o->mount_flags, old + strlen(flag) + 2);
    if (!s)
        return -ENOMEM;
    if (old)
        s[old++] = ',';
    strcpy(s + old, flag);
    o->mount_flags = s;
    return 0;
}

/* One "key[=value]" of -o. */
static int parse_one(struct bfs_fuse_opts *o, char *opt)
{
    char *val = strchr(opt, '=');
    if (val)
        *val++ = 0;
    const char *key = opt;

    if (!strcmp(key, "attr-timeout") || !strcmp(key, "attr_timeout"))
        return parse_secs(key, val, &o->attr_timeout);
    if (!strcmp(key, "entry-timeout") || !strcmp(key, "entry_timeout"))
        return parse_secs(key, val, &o->entry_timeout);
    if (!strcmp(key, "negative-timeout") || !strcmp(key, "negative_timeout"))
        return parse_secs(key, val, &o->negative_timeout);
    if (!strcmp(key, "up-timeout")) {
        double d;
        if (parse_secs(key, val, &d) < 0 || d < 1 || d > 3600) {
            fprintf(stderr, "brickfs-mount: up-timeout must be 1..3600 seconds\n");
            return -EINVAL;
        }
        o->up_timeout = (int)d;
        return 0;
    }
    if (!strcmp(key, "direct-io") || !strcmp(key, "direct_io"))
        return parse_direct_io(val, &o->direct_io);
    if (!strcmp(key, "capability"))
        return set_bool(&o->capability, key, val);
    if (!strcmp(key, "read-ahead") || !strcmp(key, "read_ahead")) {
        if (!val || bfs_parse_size(val, &o->read_ahead) < 0 || o->read_ahead > (256u << 20)) {
            fprintf(stderr, "brickfs-mount: read-ahead takes a size up to 256MiB, 0 for the "
                            "kernel's default (got '%s')\n", val ? val : "");
            return -EINVAL;
        }
        return 0;
    }
    if (!strcmp(key, "acl"))
        return set_bool(&o->acl, key, val);
    if (!strcmp(key, "selinux"))
        return set_bool(&o->selinux, key, val);
    if (!strcmp(key, "log-file") || !strcmp(key, "log_file"))
        return set_str(&o->log_file, key, val);
    if (!strcmp(key, "log-level") || !strcmp(key, "log_level")) {
        enum bfs_log_level lvl;
        if (!val || bfs_log_level_parse(val, &lvl) < 0) {
            fprintf(stderr, "brickfs-mount: log-level must be one of none, critical, error, "
                            "warning, info, debug, trace (got '%s')\n", val ? val : "");
            return -EINVAL;
        }
        return set_str(&o->log_level, key, val);
    }
    if (!strcmp(key, "fsname"))
        return set_str(&o->fsname, key, val);
    if (!strcmp(key, "backup-volfile-servers") || !strcmp(key, "backup-volfile-server") ||
        !strcmp(key, "backupvolfile-server"))
        return set_str(&o->backup_servers, key, val);
    if (!strcmp(key, "volfile-poll")) {
        double d;
        if (parse_secs(key, val, &d) < 0 || d > 3600) {
            fprintf(stderr, "brickfs-mount: volfile-poll must be 0..3600 seconds\n");
            return -EINVAL;
        }
        o->volfile_poll_ms = (int)(d * 1000);
        if (d > 0 && o->volfile_poll_ms < 100)
            o->volfile_poll_ms = 100;
        return 0;
    }
    if (!val && (!strcmp(key, "allow_other") || !strcmp(key, "allow-other"))) {
        o->allow_other = true;
        return 0;
    }
    if (!val && !strcmp(key, "ro")) {
        o->ro = true;
        return 0;
    }
    if (!val && !strcmp(key, "rw")) {
        o->ro = false;
        return 0;
    }
    if (!val && in_list(passed_flags, key))
        return add_flag(o, key);
    if (!val && in_list(ignored_flags, key))
        return 0;
    /* systemd and fstab annotations: x-systemd.automount, comment=... */
    if (!strncmp(key, "x-", 2) || !strcmp(key, "comment"))
        return 0;
    fprintf(stderr, "brickfs-mount: unknown mount option '%s%s%s' (see --help)\n", key,
            val ? "=" : "", val ? val : "");
    return -EINVAL;
}

static int parse_list(struct bfs_fuse_opts *o, const char *list)
{
    char *copy = strdup(list), *save = NULL;
    if (!copy)
        return -ENOMEM;
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save))
        rc = parse_one(o, t);
    free(copy);
    return rc;
}

/* An absolute version of path (which need not exist yet for a log file). */
static char *absolute(const char *path)
{
    if (path[0] == '/')
        return strdup(path);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd)))
        return NULL;
    size_t n = strlen(cwd) + strlen(path) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s", cwd, path);
    return s;
}

static int make_absolute(char **p)
{
    if (!*p)
        return 0;
    char *a = absolute(*p);
    if (!a)
        return -ENOMEM;
    free(*p);
    *p = a;
    return 0;
}

/* "HOST", "HOST:PORT", "[V6]", "[V6]:PORT" (len bytes of s) into srv;
 * port stays as given when there is none. */
static int parse_server(const char *s, size_t len, struct bfs_fuse_server *srv)
{
    const char *h = s, *end = s + len, *colon = NULL;
    size_t hl;
    if (len && s[0] == '[') {
        const char *rb = memchr(s, ']', len);
        if (!rb || rb == s + 1)
            return -EINVAL;
        h = s + 1;
        hl = (size_t)(rb - h);
        colon = rb + 1 < end ? rb + 1 : NULL;
        if (colon && *colon != ':')
            return -EINVAL;
    } else {
        colon = memchr(s, ':', len);
        hl = colon ? (size_t)(colon - s) : len;
    }
    if (hl == 0 || hl >= sizeof(srv->host))
        return -EINVAL;
    for (size_t i = 0; i < hl; i++)
        if (h[i] == '/' || h[i] == ',' || (unsigned char)h[i] <= ' ')
            return -EINVAL;
    memcpy(srv->host, h, hl);
    srv->host[hl] = 0;
    if (colon) {
        char port[8];
        size_t pl = (size_t)(end - colon - 1);
        char *e;
        if (pl == 0 || pl >= sizeof(port))
            return -EINVAL;
        memcpy(port, colon + 1, pl);
        port[pl] = 0;
        long p = strtol(port, &e, 10);
        if (*e || p < 1 || p > 65535)
            return -EINVAL;
        srv->port = (uint16_t)p;
    }
    return 0;
}

static bool volname_ok(const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || n > 64)
        return false;
    for (; *v; v++)
        if (!((*v >= 'a' && *v <= 'z') || (*v >= 'A' && *v <= 'Z') || (*v >= '0' && *v <= '9') ||
              *v == '_' || *v == '-'))
            return false;
    return true;
}

/* HOST[:PORT]:/VOLUME into servers[0] and volname. */
static int parse_spec(struct bfs_fuse_opts *o, const char *spec)
{
    const char *sep = spec[0] == '[' ? strchr(spec, ']') : spec;
    sep = sep ? strstr(sep, ":/") : NULL;
    if (!sep) {
        fprintf(stderr, "brickfs-mount: '%s' is not HOST[:PORT]:/VOLUME (or give --volfile "
                "FILE)\n", spec);
        return -EINVAL;
    }
    o->servers[0].port = BFS_FUSE_MGMT_PORT;
    if (parse_server(spec, (size_t)(sep - spec), &o->servers[0]) < 0) {
        fprintf(stderr, "brickfs-mount: '%.*s' is not HOST or HOST:PORT\n", (int)(sep - spec),
                spec);
        return -EINVAL;
    }
    o->nservers = 1;
    char *vol = strdup(sep + 2);
    if (!vol)
        return -ENOMEM;
    size_t n = strlen(vol);
    while (n > 0 && vol[n - 1] == '/')
        vol[--n] = 0;
    if (strchr(vol, '/')) {
        fprintf(stderr, "brickfs-mount: '%s': mounting a folder of a volume is not supported; "
                "mount HOST:/VOLUME\n", spec);
        free(vol);
        return -EINVAL;
    }
    if (!volname_ok(vol)) {
        fprintf(stderr, "brickfs-mount: '%s' is not a volume name ([A-Za-z0-9_-], at most 64)\n",
                vol);
        free(vol);
        return -EINVAL;
    }
    o->volname = vol;
    return (o->spec = strdup(spec)) ? 0 : -ENOMEM;
}

/* backup-volfile-servers=H1:H2[:PORT]:[V6]... after servers[0]. */
static int parse_backups(struct bfs_fuse_opts *o)
{
    const char *p = o->backup_servers;
    while (*p) {
        const char *t = p, *end;
        if (*t == '[') {
            end = strchr(t, ']');
            end = end ? end + 1 : t + strlen(t);
        } else {
            end = t + strcspn(t, ":");
        }
        size_t len = (size_t)(end - t);
        bool number = len > 0 && strspn(t, "0123456789") == len;
        if (number && o->nservers > 1) { /* the port of the host before */
            long v = len <= 5 ? strtol(t, NULL, 10) : 0; /* digits up to ':' or the end */
            if (v < 1 || v > 65535)
                goto bad;
            o->servers[o->nservers - 1].port = (uint16_t)v;
        } else if (len > 0) {
            if (o->nservers == BFS_FUSE_MAX_SERVERS) {
                fprintf(stderr, "brickfs-mount: at most %d volfile servers\n",
                        BFS_FUSE_MAX_SERVERS);
                return -EINVAL;
            }
            struct bfs_fuse_server *s = &o->servers[o->nservers];
            s->port = o->servers[0].port;
            if (parse_server(t, len, s) < 0)
                goto bad;
            o->nservers++;
        }
        p = *end ? end + 1 : end;
    }
    return 0;
bad:
    fprintf(stderr, "brickfs-mount: backup-volfile-servers=%s: give hosts separated by ':', "
            "each optionally followed by :PORT\n", o->backup_servers);
    return -EINVAL;
}

int bfs_fuse_opts_parse(int argc, char **argv, struct bfs_fuse_opts *o)
{
    static const struct option longopts[] = {
        {"foreground", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {"volfile", required_argument, NULL, 'v'},
        {"options", required_argument, NULL, 'o'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    o->attr_timeout = 1.0;
    o->entry_timeout = 1.0;
    o->negative_timeout = 0.0;
    o->up_timeout = 30;
    o->direct_io = BFS_FUSE_DIO_AUTO;
    o->read_ahead = BFS_FUSE_READ_AHEAD;
    o->volfile_poll_ms = 2000;
    o->allow_other = geteuid() == 0;

    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+fho:", longopts, NULL)) != -1) {
        switch (c) {
        case 'f':
            o->foreground = true;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return 1;
        case 'v':
            if (set_str(&o->volfile, "--volfile", optarg) < 0)
                return 2;
            break;
        case 'o':
            if (parse_list(o, optarg) < 0)
                return 2;
            break;
        default:
            fprintf(stderr, "brickfs-mount: bad argument '%s' (see --help)\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    int want = o->volfile ? 1 : 2;
    if (argc - optind != want) {
        fprintf(stderr, "brickfs-mount: %s (see --help)\n",
                argc - optind > want ? "too many arguments"
                : o->volfile || optind < argc ? "no mount point given"
                                              : "give HOST[:PORT]:/VOLUME (or --volfile FILE) "
                                                "and a mount point");
        return 2;
    }
    if (!o->volfile && parse_spec(o, argv[optind++]) < 0)
        return 2;
    if (o->backup_servers && !o->volname) {
        fprintf(stderr, "brickfs-mount: backup-volfile-servers goes with HOST:/VOLUME, not "
                "--volfile\n");
        return 2;
    }
    if (o->backup_servers && parse_backups(o) < 0)
        return 2;
    o->mountpoint = strdup(argv[optind]);
    if (!o->mountpoint || make_absolute(&o->mountpoint) < 0 ||
        make_absolute(&o->volfile) < 0 || make_absolute(&o->log_file) < 0) {
        fprintf(stderr, "brickfs-mount: out of memory or no current directory\n");
        return 2;
    }
    /* "/mnt/x/" and "/mnt/x" are the same mount point */
    size_t n = strlen(o->mountpoint);
    while (n > 1 && o->mountpoint[n - 1] == '/')
        o->mountpoint[--n] = 0;
    return 0;
}

void bfs_fuse_opts_free(struct bfs_fuse_opts *o)
{
    free(o->volfile);
    free(o->volname);
    free(o->spec);
    free(o->backup_servers);
    free(o->mountpoint);
    free(o->log_file);
    free(o->log_level);
    free(o->fsname);
    free(o->mount_flags);
    memset(o, 0, sizeof(*o));
}

/*
 * default_permissions is always on: the kernel checks permissions on every
 * path component before it sends a request. That check cannot happen
 * anywhere else, because a brick resolves each request by GFID (or parent
 * GFID + name) and never sees the ancestors of the object; the brick still
 * checks the object itself with the caller's credentials.
 */
char *bfs_fuse_opts_libfuse(const struct bfs_fuse_opts *o, const char *fsname)
{
    /* libfuse splits options at ',' unless escaped with a backslash */
    char esc[512];
    size_t k = 0;
    for (const char *p = fsname; *p && k + 3 < sizeof(esc); p++) {
        if (*p == ',' || *p == '\\')
            esc[k++] = '\\';
        esc[k++] = *p;
    }
    esc[k] = 0;

    char *s = NULL;
    int n = asprintf(&s, "fsname=%s,subtype=brickfs,default_permissions,max_read=%u%s%s%s%s",
                     esc, BFS_FUSE_MAX_IO, o->allow_other ? ",allow_other" : "",
                     o->ro ? ",ro" : "", o->mount_flags ? "," : "",
                     o->mount_flags ? o->mount_flags : "");
    return n < 0 ? NULL : s;
}
