/*
 * graph.c — from a parsed volfile to a running translator graph.
 *
 * Build: load each volume's module (registered in-process first, else
 * CLASS/NAME.so from bfs_xlator_dir()), validate and default its options
 * against the module's descriptor, link subvolumes (forward references are
 * allowed; cycles are refused), check subvolume counts, resolve the fop
 * table. Nothing runs until bfs_graph_init, which calls init children
 * first; bfs_graph_free calls fini parents first.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/graph.h"

#define MAX_REGISTERED 64

static const struct bfs_xl_module *registered[MAX_REGISTERED];
static int nregistered;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;

int bfs_module_register(const struct bfs_xl_module *mod)
{
    int rc = 0;
    pthread_mutex_lock(&reg_lock);
    if (nregistered == MAX_REGISTERED)
        rc = -ENOSPC;
    else
        registered[nregistered++] = mod;
    pthread_mutex_unlock(&reg_lock);
    return rc;
}

static const struct bfs_xl_module *find_registered(const char *type)
{
    const struct bfs_xl_module *m = NULL;
    pthread_mutex_lock(&reg_lock);
    for (int i = 0; i < nregistered && !m; i++)
        if (strcmp(registered[i]->type, type) == 0)
            m = registered[i];
    pthread_mutex_unlock(&reg_lock);
    return m;
}

static char xlator_dir[PATH_MAX];
static pthread_once_t xlator_dir_once = PTHREAD_ONCE_INIT;

static void find_xlator_dir(void)
{
    const char *env = getenv("BRICKFS_XLATOR_DIR");
    if (env && *env) {
        snprintf(xlator_dir, sizeof(xlator_dir), "%s", env);
        return;
    }
    char exe[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        n = 0;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    /* build/bin/X and PREFIX/bin/X, then build/tests/KIND/X */
    static const char *const rel[] = {"/../lib/brickfs/xlators", "/../../lib/brickfs/xlators"};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        struct stat st;
        snprintf(xlator_dir, sizeof(xlator_dir), "%s%s", exe, rel[i]);
        if (stat(xlator_dir, &st) == 0 && S_ISDIR(st.st_mode))
            return;
    }
    /* a program installed elsewhere than libbrickfs: look beside the
     * library itself (LIBDIR/brickfs/xlators) */
    Dl_info info;
    if (dladdr((void *)bfs_xlator_dir, &info) && info.dli_fname) {
        char lib[PATH_MAX - 64];
        snprintf(lib, sizeof(lib), "%s", info.dli_fname);
        char *s = strrchr(lib, '/');
        if (s) {
            *s = 0;
            struct stat st;
            snprintf(xlator_dir, sizeof(xlator_dir), "%s/brickfs/xlators", lib);
            if (stat(xlator_dir, &st) == 0 && S_ISDIR(st.st_mode))
                return;
        }
    }
    snprintf(xlator_dir, sizeof(xlator_dir), "%s%s", exe, rel[0]);
}

const char *bfs_xlator_dir(void)
{
    pthread_once(&xlator_dir_once, find_xlator_dir);
    return xlator_dir;
}

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* CLASS/NAME with a safe character set: the type becomes a file path. */
static bool type_is_safe(const char *t)
{
    int slashes = 0;
    if (!*t || *t == '/')
        return false;
    for (const char *p = t; *p; p++) {
        if (*p == '/') {
            if (++slashes > 1 || p[1] == 0)
                return false;
        } else if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
                     *p == '_')) {
            return false;
        }
    }
    return slashes == 1;
}

static int load_module(struct bfs_xl *xl, const struct bfs_vf_volume *v, const char *src,
                       char *err, size_t errlen)
{
    if (!type_is_safe(v->type))
        return fail(err, errlen, "%s:%d: volume %s: invalid type '%s' (want CLASS/NAME)", src,
                    v->type_line, v->name, v->type);
    xl->mod = find_registered(v->type);
    if (xl->mod)
        return 0;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s.so", bfs_xlator_dir(), v->type);
    xl->dlhandle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!xl->dlhandle)
        return fail(err, errlen, "%s:%d: volume %s: cannot load translator type '%s': %s", src,
                    v->type_line, v->name, v->type, dlerror());
    xl->mod = dlsym(xl->dlhandle, "bfs_xl_module");
    if (!xl->mod)
        return fail(err, errlen, "%s:%d: volume %s: %s exports no bfs_xl_module", src,
                    v->type_line, v->name, path);
    if (xl->mod->abi != BFS_XL_ABI)
        return fail(err, errlen, "%s:%d: volume %s: %s has ABI %u, this program wants %u", src,
                    v->type_line, v->name, path, xl->mod->abi, BFS_XL_ABI);
    return 0;
}

static int set_options(struct bfs_xl *xl, const struct bfs_vf_volume *v, const char *src,
                       char *err, size_t errlen)
{
    const struct bfs_option_desc *table = xl->mod->options;
    xl->options = bfs_dict_new();
    if (!xl->options)
        return -ENOMEM;
    for (int i = 0; i < v->nopts; i++) {
        const struct bfs_vf_option *o = &v->opts[i];
        const struct bfs_option_desc *d = table ? bfs_option_find(table, o->key) : NULL;
        char why[256];
        if (!d)
            return fail(err, errlen, "%s:%d: volume %s (%s): unknown option '%s'", src, o->line,
                        v->name, v->type, o->key);
        if (bfs_option_validate(d, o->value, why, sizeof(why)) < 0)
            return fail(err, errlen, "%s:%d: volume %s (%s): option '%s': %s", src, o->line,
                        v->name, v->type, o->key, why);
        if (bfs_dict_set_str(xl->options, o->key, o->value) < 0)
            return -ENOMEM;
    }
    for (const struct bfs_option_desc *d = table; d && d->key; d++)
        if (d->def && !bfs_dict_has(xl->options, d->key) &&
            bfs_dict_set_str(xl->options, d->key, d->def) < 0)
            return -ENOMEM;
    return 0;
}

static int add_parent(struct bfs_xl *child, struct bfs_xl *parent)
{
    struct bfs_xl **p = realloc(child->parents, (child->nparents + 1) * sizeof(*p));
    if (!p)
        return -ENOMEM;
    p[child->nparents++] = parent;
    child->parents = p;
    return 0;
}

static int link_children(struct bfs_graph *g, const struct bfs_volfile *vf, char *err,
                         size_t errlen)
{
    for (int i = 0; i < g->nxls; i++) {
        const struct bfs_vf_volume *v = &vf->vols[i];
        struct bfs_xl *xl = g->xls[i];
        xl->children = calloc(v->nsubvols ? v->nsubvols : 1, sizeof(*xl->children));
        if (!xl->children)
            return -ENOMEM;
        for (int j = 0; j < v->nsubvols; j++) {
            struct bfs_xl *c = bfs_graph_find(g, v->subvols[j]);
            if (!c)
                return fail(err, errlen, "%s:%d: volume %s: subvolume '%s' is not defined",
                            vf->source, v->subvols_line, v->name, v->subvols[j]);
            for (int k = 0; k < xl->nchildren; k++)
                if (xl->children[k] == c)
                    return fail(err, errlen, "%s:%d: volume %s: subvolume '%s' listed twice",
                                vf->source, v->subvols_line, v->name, c->name);
            xl->children[xl->nchildren++] = c;
            if (add_parent(c, xl) < 0)
                return -ENOMEM;
        }
        const struct bfs_xl_module *m = xl->mod;
        if (xl->nchildren < m->min_children ||
            (m->max_children && xl->nchildren > m->max_children))
            return fail(err, errlen,
                        "%s:%d: volume %s (%s): has %d subvolumes, needs %d..%d", vf->source,
                        v->nsubvols ? v->subvols_line : v->line, v->name, v->type,
                        xl->nchildren, m->min_children,
                        m->max_children ? m->max_children : INT_MAX);
    }
    return 0;
}

/* DFS colouring: 0 new, 1 on the current path, 2 done. */
static const struct bfs_xl *find_cycle(const struct bfs_xl *xl, int *colour)
{
    if (colour[xl->index] == 1)
        return xl;
    if (colour[xl->index] == 2)
        return NULL;
    colour[xl->index] = 1;
    for (int i = 0; i < xl->nchildren; i++) {
        const struct bfs_xl *c = find_cycle(xl->children[i], colour);
        if (c)
            return c;
    }
    colour[xl->index] = 2;
    return NULL;
}

static int check_shape(struct bfs_graph *g, const struct bfs_volfile *vf, char *err,
                       size_t errlen)
{
    int *colour = calloc(g->nxls, sizeof(int));
    if (!colour)
        return -ENOMEM;
    for (int i = 0; i < g->nxls; i++) {
        const struct bfs_xl *c = find_cycle(g->xls[i], colour);
        if (c) {
            free(colour);
            return fail(err, errlen, "%s:%d: volume %s: subvolumes form a cycle", vf->source,
                        vf->vols[c->index].subvols_line, c->name);
        }
    }
    free(colour);
    if (g->top->nparents)
        return fail(err, errlen, "%s:%d: volume %s: the last volume is the top of the graph "
                    "and cannot be a subvolume", vf->source, vf->vols[g->nxls - 1].line,
                    g->top->name);
    return 0;
}

int bfs_graph_build(const struct bfs_volfile *vf, struct bfs_proc *proc,
                    struct bfs_graph **out, char *err, size_t errlen)
{
    if (vf->nvols == 0)
        return fail(err, errlen, "%s: no volume defined", vf->source);
    struct bfs_graph *g = calloc(1, sizeof(*g));
    if (!g || !(g->xls = calloc(vf->nvols, sizeof(*g->xls)))) {
        free(g);
        return -ENOMEM;
    }
    g->proc = proc;
    int rc = 0;
    for (int i = 0; i < vf->nvols && rc == 0; i++) {
        struct bfs_xl *xl = calloc(1, sizeof(*xl));
        if (!xl) {
            rc = -ENOMEM;
            break;
        }
        g->xls[g->nxls++] = xl;
        xl->graph = g;
        xl->index = i;
        xl->name = strdup(vf->vols[i].name);
        xl->type = strdup(vf->vols[i].type);
        if (!xl->name || !xl->type)
            rc = -ENOMEM;
        if (rc == 0)
            rc = load_module(xl, &vf->vols[i], vf->source, err, errlen);
        if (rc == 0)
            rc = set_options(xl, &vf->vols[i], vf->source, err, errlen);
        if (rc == 0)
            bfs_fops_resolve(&xl->fops, xl->mod);
    }
    if (rc == 0) {
        g->top = g->xls[g->nxls - 1];
        rc = link_children(g, vf, err, errlen);
    }
    if (rc == 0)
        rc = check_shape(g, vf, err, errlen);
    if (rc == 0 && !(g->itable = bfs_itable_new(g, g->nxls)))
        rc = -ENOMEM;
    if (rc < 0) {
        if (rc == -ENOMEM && err && errlen)
            snprintf(err, errlen, "%s: out of memory building the graph", vf->source);
        bfs_graph_free(g);
        return rc;
    }
    *out = g;
    return 0;
}

int bfs_graph_from_text(const char *text, size_t len, const char *source,
                        struct bfs_proc *proc, struct bfs_graph **out, char *err,
                        size_t errlen)
{
    struct bfs_volfile *vf = NULL;
    int rc = bfs_volfile_parse(text, len, source, &vf, err, errlen);
    if (rc < 0)
        return rc;
    rc = bfs_graph_build(vf, proc, out, err, errlen);
    bfs_volfile_free(vf);
    if (rc == 0 && !((*out)->volfile_text = strndup(text, len))) {
        bfs_graph_free(*out);
        return -ENOMEM;
    }
    return rc;
}

int bfs_graph_from_file(const char *path, struct bfs_proc *proc, struct bfs_graph **out,
                        char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return fail(err, errlen, "%s: cannot open: %s", path, strerror(errno)), -errno;
    char *buf = NULL;
    size_t cap = 0, len = 0, n;
    do {
        if (len + 4096 > cap) {
            char *nb = realloc(buf, cap = cap * 2 + 4096);
            if (!nb) {
                free(buf);
                fclose(f);
                return -ENOMEM;
            }
            buf = nb;
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    fclose(f);
    int rc = bfs_graph_from_text(buf ? buf : "", len, path, proc, out, err, errlen);
    free(buf);
    return rc;
}

/* Post-order (children first) over the graph from xl. */
static int init_rec(struct bfs_xl *xl)
{
    if (xl->initialized)
        return 0;
    for (int i = 0; i < xl->nchildren; i++) {
        int rc = init_rec(xl->children[i]);
        if (rc < 0)
            return rc;
    }
    if (xl->mod->init) {
        int rc = xl->mod->init(xl);
        if (rc < 0) {
            XL_ERR(xl, "init of %s failed: %s", xl->type, strerror(-rc));
            return rc;
        }
    }
    xl->initialized = true;
    return 0;
}

static void fini_rec(struct bfs_xl *xl)
{
    if (!xl->initialized)
        return;
    for (int i = 0; i < xl->nparents; i++)
        if (xl->parents[i]->initialized)
            return; /* a parent still needs us; it will come back here */
    xl->initialized = false;
    if (xl->mod->fini)
        xl->mod->fini(xl);
    for (int i = 0; i < xl->nchildren; i++)
        fini_rec(xl->children[i]);
}

int bfs_graph_init(struct bfs_graph *g)
{
    for (int i = g->nxls - 1; i >= 0; i--) {
        int rc = init_rec(g->xls[i]);
        if (rc < 0) {
            /* fini what was initialised, parents before children */
            for (int j = g->nxls - 1; j >= 0; j--)
                fini_rec(g->xls[j]);
            return rc;
        }
    }
    return 0;
}

static void notify_top(struct bfs_graph *g, enum bfs_event ev)
{
    struct bfs_xl *top = g->top;
    if (top->mod->notify)
        top->mod->notify(top, ev, NULL, NULL);
    else
        bfs_xl_notify_default(top, ev, NULL, NULL);
}

void bfs_graph_activate(struct bfs_graph *g)
{
    g->active = true;
    notify_top(g, BFS_EV_PARENT_UP);
}

void bfs_graph_deactivate(struct bfs_graph *g)
{
    if (!g->active)
        return;
    g->active = false;
    notify_top(g, BFS_EV_PARENT_DOWN);
}

struct bfs_xl *bfs_graph_find(struct bfs_graph *g, const char *name)
{
    for (int i = 0; i < g->nxls; i++)
        if (strcmp(g->xls[i]->name, name) == 0)
            return g->xls[i];
    return NULL;
}

/* Bounded: a call that never ends (a bug below) must not hang teardown. */
static void wait_idle(struct bfs_graph *g)
{
    for (int ms = 0; ms < 5000; ms++) {
        if (__atomic_load_n(&g->inflight, __ATOMIC_ACQUIRE) == 0)
            return;
        usleep(1000);
    }
    bfs_log("graph", BFS_LOG_WARNING, "%d calls still in flight after 5 s; tearing down anyway",
            __atomic_load_n(&g->inflight, __ATOMIC_ACQUIRE));
}

void bfs_graph_free(struct bfs_graph *g)
{
    if (!g)
        return;
    /* Connections and fds go first (PARENT_DOWN), then forget() runs while
     * translators still have their private state, then fini. */
    bfs_graph_deactivate(g);
    /* Calls still in flight (a cluster translator's delayed post-op is a
     * chain of calls) must end before any translator is finalised; then
     * work already answered may still be finishing on the loop or the
     * workers (a posix job dropping its fd ref): let it end too. */
    wait_idle(g);
    bfs_proc_quiesce(g->proc);
    if (g->itable)
        bfs_itable_free(g->itable);
    for (int i = g->nxls - 1; i >= 0; i--)
        if (g->xls[i]->nparents == 0)
            fini_rec(g->xls[i]);
    /* no loop or worker may still be running translator code at dlclose */
    bfs_proc_quiesce(g->proc);
    for (int i = 0; i < g->nxls; i++) {
        struct bfs_xl *xl = g->xls[i];
        bfs_dict_unref(xl->options);
        free(xl->children);
        free(xl->parents);
        free(xl->name);
        free(xl->type);
        if (xl->dlhandle)
            dlclose(xl->dlhandle);
        free(xl);
    }
    free(g->xls);
    free(g->volfile_text);
    free(g);
}
