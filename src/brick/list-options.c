/*
 * list-options.c — `brickfs-brick --list-options [--json | --markdown]`:
 * every option of every translator installed in bfs_xlator_dir(), read
 * from the modules themselves (dlopen of CLASS/NAME.so, symbol
 * bfs_xl_module), so the listing can never disagree with what a volfile
 * accepts. scripts/gen-option-docs.sh writes docs/options.md from the
 * --markdown form, and tests/integration/005-docs-options.t checks that
 * file is current.
 *
 * Order: translators by type name (CLASS/NAME), options in the order their
 * table declares them (authors group related options). The modules stay
 * loaded until the listing is printed, because the descriptors live in
 * them; everything is unloaded before returning.
 *
 * A .so that does not load, or has another ABI, is an error (reported on
 * stderr, the others are still listed, exit status 1). A .so that exports
 * no bfs_xl_module at all is not a translator yet (a half-built one, or a
 * helper library): it is left out with a warning and is not an error.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "brick.h"

#include "core/graph.h"
#include "core/options.h"
#include "core/xlator.h"

#define PROG "brickfs-brick"

struct xl_entry {
    char type[256];
    void *handle;
    const struct bfs_xl_module *mod;
};

struct xl_list {
    struct xl_entry *v;
    size_t n, cap;
    int errors;
};

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const struct xl_entry *)a)->type, ((const struct xl_entry *)b)->type);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Loads DIR/TYPE.so into the list; failures are counted or skipped. */
static void load_one(struct xl_list *l, const char *dir, const char *type)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s.so", dir, type);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, PROG ": cannot load %s: %s\n", path, dlerror());
        l->errors++;
        return;
    }
    const struct bfs_xl_module *mod = dlsym(h, "bfs_xl_module");
    if (!mod) {
        fprintf(stderr, PROG ": warning: %s exports no bfs_xl_module (not a translator "
                "yet); left out\n", path);
        dlclose(h);
        return;
    }
    if (mod->abi != BFS_XL_ABI) {
        fprintf(stderr, PROG ": %s has ABI %u, this program wants %u\n", path, mod->abi,
                BFS_XL_ABI);
        dlclose(h);
        l->errors++;
        return;
    }
    if (!mod->type || strcmp(mod->type, type) != 0)
        fprintf(stderr, PROG ": warning: %s calls itself '%s'; listed as %s, the name "
                "volfiles use\n", path, mod->type ? mod->type : "(null)", type);
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct xl_entry *v = realloc(l->v, cap * sizeof(*v));
        if (!v) {
            dlclose(h);
            l->errors++;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    struct xl_entry *e = &l->v[l->n++];
    snprintf(e->type, sizeof(e->type), "%s", type);
    e->handle = h;
    e->mod = mod;
}

static bool is_dir(const char *dir, const char *name)
{
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The names in dir that end in suffix (suffix removed) or, with suffix
 * NULL, the subdirectories; sorted, malloc'd, NULL-terminated. */
static char **dir_names(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char **names = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *nm = de->d_name;
        size_t len = strlen(nm), sl = suffix ? strlen(suffix) : 0;
        if (nm[0] == '.')
            continue;
        if (suffix ? len <= sl || strcmp(nm + len - sl, suffix) != 0 : !is_dir(dir, nm))
            continue;
        char **nn = realloc(names, (n + 2) * sizeof(*nn));
        if (!nn)
            break;
        names = nn;
        if (!(names[n] = strndup(nm, len - sl)))
            break;
        names[++n] = NULL;
    }
    closedir(d);
    if (!names && (names = calloc(1, sizeof(*names))) == NULL)
        return NULL;
    qsort(names, n, sizeof(*names), cmp_str);
    return names;
}

static void free_names(char **names)
{
    for (char **p = names; p && *p; p++)
        free(*p);
    free(names);
}

static int load_all(struct xl_list *l, const char *dir)
{
    char **classes = dir_names(dir, NULL);
    if (!classes) {
        fprintf(stderr, PROG ": cannot read the translator folder %s: %s\n", dir,
                strerror(errno));
        return -1;
    }
    for (char **c = classes; *c; c++) {
        char sub[PATH_MAX];
        snprintf(sub, sizeof(sub), "%s/%s", dir, *c);
        char **mods = dir_names(sub, ".so");
        for (char **m = mods; m && *m; m++) {
            char type[256];
            if (snprintf(type, sizeof(type), "%s/%s", *c, *m) < (int)sizeof(type))
                load_one(l, dir, type);
        }
        free_names(mods);
    }
    free_names(classes);
    if (l->n == 0) {
        fprintf(stderr, PROG ": no translator found in %s (is brickfs built? "
                "$BRICKFS_XLATOR_DIR names another folder)\n", dir);
        return -1;
    }
    qsort(l->v, l->n, sizeof(*l->v), cmp_entry);
    return 0;
}

/* ---- what each option says, shared by the formats ---- */

static bool has_range(const struct bfs_option_desc *d)
{
    return (d->min != 0 || d->max != 0) &&
           (d->type == BFS_OPT_INT || d->type == BFS_OPT_TIME || d->type == BFS_OPT_SIZE);
}

/* "1..1013 s" (a range), "a, b, c" (the values of an enum), or "" */
static void range_text(const struct bfs_option_desc *d, char *buf, size_t len)
{
    buf[0] = 0;
    if (has_range(d)) {
        snprintf(buf, len, "%lld..%lld%s", (long long)d->min, (long long)d->max,
                 d->type == BFS_OPT_TIME ? " s" : d->type == BFS_OPT_SIZE ? " bytes" : "");
    } else if (d->type == BFS_OPT_ENUM && d->values) {
        size_t o = 0;
        for (const char *const *v = d->values; *v && o < len; v++)
            o += (size_t)snprintf(buf + o, len - o, "%s%s", v == d->values ? "" : ", ", *v);
    }
}

/* "client, settable, live", or "" */
static void flags_text(const struct bfs_option_desc *d, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s%s%s", d->flags & BFS_OPT_F_CLIENT ? "client" : "",
             (d->flags & BFS_OPT_F_CLIENT) && (d->flags & BFS_OPT_F_SETTABLE) ? ", " : "",
             d->flags & BFS_OPT_F_SETTABLE ? "settable" : "",
             (d->flags & (BFS_OPT_F_CLIENT | BFS_OPT_F_SETTABLE)) && (d->flags & BFS_OPT_F_RECONF)
                 ? ", "
                 : "",
             d->flags & BFS_OPT_F_RECONF ? "live" : "");
}

/* ---- text ---- */

static void print_text(FILE *out, const struct xl_list *l, const char *dir)
{
    fprintf(out, "Translators in %s and their volfile options\n"
                 "(flags: client = of a client-side translator, settable = brickfs volume "
                 "set,\nlive = applied without a restart)\n", dir);
    for (size_t i = 0; i < l->n; i++) {
        fprintf(out, "\n%s\n", l->v[i].type);
        const struct bfs_option_desc *d = l->v[i].mod->options;
        if (!d || !d->key)
            fprintf(out, "  (no options)\n");
        for (; d && d->key; d++) {
            char range[512], flags[64], head[600];
            range_text(d, range, sizeof(range));
            flags_text(d, flags, sizeof(flags));
            snprintf(head, sizeof(head), "%s%s%s%s", bfs_opt_type_name(d->type),
                     range[0] ? " " : "", range, d->def ? "" : ", no default");
            if (d->def)
                fprintf(out, "  %s = %s  (%s", d->key, d->def[0] ? d->def : "\"\"", head);
            else
                fprintf(out, "  %s  (%s", d->key, head);
            fprintf(out, "%s%s)\n      %s\n", flags[0] ? "; " : "", flags,
                    d->description ? d->description : "");
        }
    }
}

/* ---- JSON (field names as in brickfsd's GET /v1/options) ---- */

static struct json_object *option_json(const struct bfs_option_desc *d)
{
    struct json_object *j = json_object_new_object();
    json_object_object_add(j, "key", json_object_new_string(d->key));
    json_object_object_add(j, "type", json_object_new_string(bfs_opt_type_name(d->type)));
    json_object_object_add(j, "default", d->def ? json_object_new_string(d->def) : NULL);
    if (has_range(d)) {
        json_object_object_add(j, "min", json_object_new_int64(d->min));
        json_object_object_add(j, "max", json_object_new_int64(d->max));
    }
    if (d->type == BFS_OPT_ENUM && d->values) {
        struct json_object *vals = json_object_new_array();
        for (const char *const *v = d->values; *v; v++)
            json_object_array_add(vals, json_object_new_string(*v));
        json_object_object_add(j, "values", vals);
    }
    json_object_object_add(j, "description",
                           json_object_new_string(d->description ? d->description : ""));
    json_object_object_add(j, "client", json_object_new_boolean(d->flags & BFS_OPT_F_CLIENT));
    json_object_object_add(j, "settable",
                           json_object_new_boolean(d->flags & BFS_OPT_F_SETTABLE));
    json_object_object_add(j, "live", json_object_new_boolean(d->flags & BFS_OPT_F_RECONF));
    return j;
}

static int print_json(FILE *out, const struct xl_list *l)
{
    struct json_object *root = json_object_new_object(), *xls = json_object_new_array();
    for (size_t i = 0; i < l->n; i++) {
        struct json_object *x = json_object_new_object(), *opts = json_object_new_array();
        json_object_object_add(x, "translator", json_object_new_string(l->v[i].type));
        for (const struct bfs_option_desc *d = l->v[i].mod->options; d && d->key; d++)
            json_object_array_add(opts, option_json(d));
        json_object_object_add(x, "options", opts);
        json_object_array_add(xls, x);
    }
    json_object_object_add(root, "translators", xls);
    const char *s = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
                                                             JSON_C_TO_STRING_SPACED |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE);
    int rc = s ? (fprintf(out, "%s\n", s) < 0 ? -1 : 0) : -1;
    json_object_put(root);
    return rc;
}

/* ---- Markdown (docs/options.md) ---- */

/* Text for a table cell: Markdown's active characters escaped. */
static void md_cell(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (strchr("\\|*_`<>[]", *s))
            fputc('\\', out);
        fputc(*s, out);
    }
}

static void print_markdown(FILE *out, const struct xl_list *l)
{
    fputs("# Translator options\n\n"
          "<!-- Generated by scripts/gen-option-docs.sh (brickfs-brick --list-options "
          "--markdown)\n"
          "     from the option descriptors in src/xlators/CLASS/NAME/. Do not edit: change "
          "the\n"
          "     descriptor, run the script, commit both. "
          "tests/integration/005-docs-options.t\n"
          "     fails while this file differs from the descriptors. -->\n\n"
          "Every option every translator accepts in a volfile (`option KEY VALUE`, see\n"
          "[brickfs-volfile(5)](man/brickfs-volfile.5.md)), as its module declares it. An\n"
          "unknown key or a value outside the type or range below makes the graph fail to\n"
          "build, naming the volfile, line, translator and option.\n\n"
          "- **type**: `string` (the rest of the line); `integer` (decimal); `time`\n"
          "  (whole seconds); `size` (bytes, with an optional unit B, K, KB, KiB, M, MB,\n"
          "  MiB, G, GB, GiB, T, TB or TiB in any case, all powers of 1024: `64KB` is\n"
          "  65536); `bool` (on/off, yes/no, true/false, enable/disable, 1/0); `enum`\n"
          "  (one of the values listed); `path` (absolute); `percent` (0 to 100,\n"
          "  optionally with decimals and `%`); `address-list` (comma-separated IPv4 or\n"
          "  IPv6 addresses, CIDRs `ADDR/BITS`, globs such as `127.0.0.*`, or `*`).\n"
          "- **default**: the value a translator gets when the volfile does not set the\n"
          "  option; (none) means unset.\n"
          "- **flags**: *client*: an option of a client-side translator; *settable*:\n"
          "  `brickfs volume set` accepts it (for the translators brickfsd places in a\n"
          "  volume's graphs; `brickfs volume set help` lists those); *live*: a running\n"
          "  translator applies a new value without a restart.\n\n"
          "The same listing, for the translators actually installed, is printed by\n"
          "`brickfs-brick --list-options` (`--json` for scripts).\n\n",
          out);
    fputs("Translators: ", out);
    for (size_t i = 0; i < l->n; i++) {
        char anchor[256];
        size_t k = 0;
        for (const char *p = l->v[i].type; *p && k + 1 < sizeof(anchor); p++)
            if (*p != '/')
                anchor[k++] = *p;
        anchor[k] = 0;
        fprintf(out, "%s[%s](#%s)", i ? " · " : "", l->v[i].type, anchor);
    }
    fputs(".\n", out);
    for (size_t i = 0; i < l->n; i++) {
        fprintf(out, "\n## %s\n\n", l->v[i].type);
        const struct bfs_option_desc *d = l->v[i].mod->options;
        if (!d || !d->key) {
            fputs("No options.\n", out);
            continue;
        }
        fputs("| option | type | default | range / values | flags | description |\n"
              "| --- | --- | --- | --- | --- | --- |\n",
              out);
        for (; d->key; d++) {
            char range[512], flags[64];
            range_text(d, range, sizeof(range));
            flags_text(d, flags, sizeof(flags));
            fprintf(out, "| `%s` | %s | ", d->key, bfs_opt_type_name(d->type));
            if (!d->def)
                fputs("(none)", out);
            else if (!d->def[0])
                fputs("(empty)", out);
            else
                fprintf(out, "`%s`", d->def);
            fputs(" | ", out);
            md_cell(out, range);
            fprintf(out, " | %s | ", flags);
            md_cell(out, d->description ? d->description : "");
            fputs(" |\n", out);
        }
    }
}

int bfs_brick_list_options(FILE *out, enum bfs_list_format fmt)
{
    struct xl_list l = {0};
    const char *dir = bfs_xlator_dir();
    int rc = load_all(&l, dir);
    if (rc == 0) {
        if (fmt == BFS_LIST_JSON)
            rc = print_json(out, &l);
        else if (fmt == BFS_LIST_MARKDOWN)
            print_markdown(out, &l);
        else
            print_text(out, &l, dir);
        if (fflush(out) != 0 || ferror(out)) {
            fprintf(stderr, PROG ": cannot write the listing: %s\n", strerror(errno));
            rc = -1;
        }
    }
    for (size_t i = 0; i < l.n; i++)
        dlclose(l.v[i].handle);
    free(l.v);
    return rc < 0 || l.errors ? 1 : 0;
}
