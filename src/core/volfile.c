/*
 * volfile.c — the volfile parser (graph.h: bfs_volfile_parse/free).
 *
 *   volume NAME
 *       type CLASS/NAME
 *       option KEY VALUE          # VALUE is the rest of the line, trimmed
 *       subvolumes A B ...
 *   end-volume
 *
 * Line-based: one statement per line. '#' starts a comment at the start of
 * a line or after whitespace (so a value such as "a#b" keeps its '#', while
 * "value   # note" loses the note). Lines may end in "\n" or "\r\n".
 *
 * The input is untrusted (it is fuzzed, and `volume set` values end up in
 * generated volfiles), so: every length is bounded (16 MiB of text, 64 KiB
 * per line, 255 bytes per name or key), NUL bytes are refused, names and
 * keys must be printable ASCII, duplicate checks use hash sets (no quadratic
 * blow-up on huge inputs) and quoted user text in messages is escaped and
 * shortened. Every error is "SOURCE:LINE: message" and nothing is returned
 * on error.
 *
 * Lifetime: the result is one tree of malloc'd memory freed by
 * bfs_volfile_free(). Semantics beyond syntax (does the type exist, are the
 * subvolumes defined, are the options known) belong to bfs_graph_build().
 */
#include "core/graph.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VF_MAX_TEXT (16u * 1024 * 1024)
#define VF_MAX_LINE (64u * 1024)
#define VF_MAX_NAME 255

/* A set of strings -> int (a line number or an index), open addressing.
 * Used for volume names, option keys of a volume, subvolume names. */
struct strset {
    const char **keys;
    int *vals;
    size_t cap, n;
};

struct parser {
    const char *source;
    char *err;
    size_t errlen;
    int line;
    struct bfs_volfile *vf;
    struct bfs_vf_volume *cur; /* open volume, or NULL */
    int vcap;                  /* capacity of vf->vols */
    int ocap;                  /* capacity of cur->opts */
    struct strset names;       /* volume name -> line */
    struct strset keys;        /* option key of cur -> line */
};

static uint32_t str_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static void strset_clear(struct strset *s)
{
    free(s->keys);
    free(s->vals);
    memset(s, 0, sizeof(*s));
}

/* Returns the slot's value if key is present (and *found = true). */
static int strset_get(const struct strset *s, const char *key, bool *found)
{
    *found = false;
    if (!s->cap)
        return 0;
    for (size_t i = str_hash(key) & (s->cap - 1); s->keys[i]; i = (i + 1) & (s->cap - 1)) {
        if (strcmp(s->keys[i], key) == 0) {
            *found = true;
            return s->vals[i];
        }
    }
    return 0;
}

/* key must outlive the set (it points into the volfile being built). */
static int strset_add(struct strset *s, const char *key, int val)
{
    if ((s->n + 1) * 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        const char **keys = calloc(cap, sizeof(*keys));
        int *vals = calloc(cap, sizeof(*vals));
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return -ENOMEM;
        }
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->keys[i])
                continue;
            size_t j = str_hash(s->keys[i]) & (cap - 1);
            while (keys[j])
                j = (j + 1) & (cap - 1);
            keys[j] = s->keys[i];
            vals[j] = s->vals[i];
        }
        free(s->keys);
        free(s->vals);
        s->keys = keys;
        s->vals = vals;
        s->cap = cap;
    }
    size_t i = str_hash(key) & (s->cap - 1);
    while (s->keys[i])
        i = (i + 1) & (s->cap - 1);
    s->keys[i] = key;
    s->vals[i] = val;
    s->n++;
    return 0;
}

/* ---- errors ---- */

/* Quotes untrusted text for a message: printable ASCII kept, the rest as
 * \xNN, cut at 48 bytes. */
static const char *quote(const char *s, char *buf, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; s[i]; i++) {
        if (o + 8 >= size || i >= 48) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f) {
            buf[o++] = (char)c;
        } else {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        }
    }
    buf[o] = '\0';
    return buf;
}

__attribute__((format(printf, 3, 4))) static int perr(struct parser *p, int line,
                                                      const char *fmt, ...)
{
    if (p->err && p->errlen) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        snprintf(p->err, p->errlen, "%s:%d: %s", p->source, line, msg);
    }
    return -EINVAL;
}

static int enomem(struct parser *p)
{
    perr(p, p->line, "out of memory");
    return -ENOMEM;
}

/* ---- tokens ---- */

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Splits off the next whitespace-separated word of *s (NUL-terminating it in
 * place) and advances *s; NULL at end of line. */
static char *next_word(char **s)
{
    char *p = *s;
    while (is_space(*p))
        p++;
    if (!*p) {
        *s = p;
        return NULL;
    }
    char *w = p;
    while (*p && !is_space(*p))
        p++;
    if (*p)
        *p++ = '\0';
    *s = p;
    return w;
}

static char *trim(char *s)
{
    while (is_space(*s))
        s++;
    size_t n = strlen(s);
    while (n && is_space(s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* Names (volume, subvolume, option key): printable ASCII, bounded. */
static int check_name(struct parser *p, const char *what, const char *name)
{
    char q[256];
    if (!name || !*name)
        return perr(p, p->line, "empty %s", what);
    size_t n = strlen(name);
    if (n > VF_MAX_NAME)
        return perr(p, p->line, "%s '%s' is longer than %d bytes", what,
                    quote(name, q, sizeof(q)), VF_MAX_NAME);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c <= 0x20 || c >= 0x7f)
            return perr(p, p->line, "%s '%s' contains a non-printable or non-ASCII byte",
                        what, quote(name, q, sizeof(q)));
    }
    return 0;
}

static int need_volume(struct parser *p, const char *kw)
{
    if (!p->cur)
        return perr(p, p->line, "'%s' outside a volume (expected 'volume NAME' first)", kw);
    return 0;
}

static int no_more_words(struct parser *p, char *rest, const char *after)
{
    char q[256];
    char *extra = next_word(&rest);
    if (extra)
        return perr(p, p->line, "unexpected '%s' after %s", quote(extra, q, sizeof(q)), after);
    return 0;
}

/* ---- statements ---- */

static int st_volume(struct parser *p, char *rest)
{
    char q[256];
    char *name = next_word(&rest);
    bool found;

    if (p->cur)
        return perr(p, p->line,
                    "nested volume: 'volume' inside volume '%s' (opened at line %d, "
                    "missing end-volume?)",
                    quote(p->cur->name, q, sizeof(q)), p->cur->line);
    if (!name)
        return perr(p, p->line, "empty name: 'volume' needs a name");
    int rc = check_name(p, "volume name", name);
    if (rc < 0)
        return rc;
    if ((rc = no_more_words(p, rest, "the volume name")) < 0)
        return rc;
    int first = strset_get(&p->names, name, &found);
    if (found)
        return perr(p, p->line, "duplicate volume name '%s' (first defined at line %d)",
                    quote(name, q, sizeof(q)), first);

    struct bfs_volfile *vf = p->vf;
    if (vf->nvols == p->vcap) {
        int cap = p->vcap ? p->vcap * 2 : 8;
        struct bfs_vf_volume *v = realloc(vf->vols, (size_t)cap * sizeof(*v));
        if (!v)
            return enomem(p);
        vf->vols = v;
        p->vcap = cap;
    }
    struct bfs_vf_volume *vol = &vf->vols[vf->nvols];
    memset(vol, 0, sizeof(*vol));
    vol->line = p->line;
    if (!(vol->name = strdup(name)))
        return enomem(p);
    vf->nvols++;
    if (strset_add(&p->names, vol->name, p->line) < 0)
        return enomem(p);
    p->cur = vol;
    p->ocap = 0;
    strset_clear(&p->keys);
    return 0;
}

static int st_type(struct parser *p, char *rest)
{
    char q[256];
    int rc = need_volume(p, "type");
    if (rc < 0)
        return rc;
    if (p->cur->type)
        return perr(p, p->line, "'type' given twice in volume '%s' (first at line %d)",
                    quote(p->cur->name, q, sizeof(q)), p->cur->type_line);
    char *type = next_word(&rest);
    if (!type)
        return perr(p, p->line, "empty name: 'type' needs CLASS/NAME");
    if ((rc = check_name(p, "type", type)) < 0)
        return rc;
    char *slash = strchr(type, '/');
    if (!slash || slash == type || !slash[1] || strchr(slash + 1, '/'))
        return perr(p, p->line, "type '%s' is not of the form CLASS/NAME",
                    quote(type, q, sizeof(q)));
    if ((rc = no_more_words(p, rest, "the type")) < 0)
        return rc;
    if (!(p->cur->type = strdup(type)))
        return enomem(p);
    p->cur->type_line = p->line;
    return 0;
}

static int st_option(struct parser *p, char *rest)
{
    char q[256];
    bool found;
    int rc = need_volume(p, "option");
    if (rc < 0)
        return rc;
    char *key = next_word(&rest);
    if (!key)
        return perr(p, p->line, "empty name: 'option' needs a key and a value");
    if ((rc = check_name(p, "option key", key)) < 0)
        return rc;
    char *value = trim(rest);
    if (!*value)
        return perr(p, p->line, "option '%s' has no value", quote(key, q, sizeof(q)));
    int first = strset_get(&p->keys, key, &found);
    if (found)
        return perr(p, p->line, "duplicate option '%s' in volume '%s' (first at line %d)",
                    quote(key, q, sizeof(q)), p->cur->name, first);

    struct bfs_vf_volume *v = p->cur;
    if (v->nopts == p->ocap) {
        int cap = p->ocap ? p->ocap * 2 : 8;
        struct bfs_vf_option *o = realloc(v->opts, (size_t)cap * sizeof(*o));
        if (!o)
            return enomem(p);
        v->opts = o;
        p->ocap = cap;
    }
    struct bfs_vf_option *o = &v->opts[v->nopts];
    o->key = strdup(key);
    o->value = strdup(value);
    o->line = p->line;
    if (!o->key || !o->value) {
        free(o->key);
        free(o->value);
        return enomem(p);
    }
    v->nopts++;
    if (strset_add(&p->keys, o->key, p->line) < 0)
        return enomem(p);
    return 0;
}

static int st_subvolumes(struct parser *p, char *rest)
{
    char q[256];
    struct strset seen = {0};
    bool found;
    int rc = need_volume(p, "subvolumes");
    if (rc < 0)
        return rc;
    struct bfs_vf_volume *v = p->cur;
    if (v->subvols)
        return perr(p, p->line, "'subvolumes' given twice in volume '%s' (first at line %d)",
                    quote(v->name, q, sizeof(q)), v->subvols_line);
    int n = 0, cap = 0;
    char *w;
    v->subvols_line = p->line;
    while ((w = next_word(&rest))) {
        if ((rc = check_name(p, "subvolume name", w)) < 0)
            goto out;
        strset_get(&seen, w, &found);
        if (found) {
            rc = perr(p, p->line, "subvolume '%s' listed twice", quote(w, q, sizeof(q)));
            goto out;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 4;
            char **s = realloc(v->subvols, (size_t)cap * sizeof(*s));
            if (!s) {
                rc = enomem(p);
                goto out;
            }
            v->subvols = s;
        }
        if (!(v->subvols[n] = strdup(w))) {
            rc = enomem(p);
            goto out;
        }
        v->nsubvols = ++n;
        if (strset_add(&seen, v->subvols[n - 1], 0) < 0) {
            rc = enomem(p);
            goto out;
        }
    }
    if (n == 0)
        rc = perr(p, p->line, "empty name: 'subvolumes' needs at least one name");
out:
    strset_clear(&seen);
    return rc;
}

static int st_end(struct parser *p, char *rest)
{
    char q[256];
    int rc = need_volume(p, "end-volume");
    if (rc < 0)
        return rc;
    if ((rc = no_more_words(p, rest, "end-volume")) < 0)
        return rc;
    if (!p->cur->type)
        return perr(p, p->line, "volume '%s' (line %d) has no type",
                    quote(p->cur->name, q, sizeof(q)), p->cur->line);
    p->cur = NULL;
    strset_clear(&p->keys);
    return 0;
}

/* One line, NUL-terminated, with comments still in it. */
static int parse_line(struct parser *p, char *s)
{
    static const struct {
        const char *kw;
        int (*fn)(struct parser *, char *);
    } stmts[] = {
        {"volume", st_volume},         {"type", st_type},       {"option", st_option},
        {"subvolumes", st_subvolumes}, {"end-volume", st_end},
    };
    char q[256];

    for (char *c = s; (c = strchr(c, '#')); c++) {
        if (c == s || is_space(c[-1])) {
            *c = '\0';
            break;
        }
    }
    char *kw = next_word(&s);
    if (!kw)
        return 0; /* blank or comment */
    for (size_t i = 0; i < sizeof(stmts) / sizeof(stmts[0]); i++)
        if (strcmp(kw, stmts[i].kw) == 0)
            return stmts[i].fn(p, s);
    return perr(p, p->line, "unknown keyword '%s' (expected volume, type, option, "
                "subvolumes or end-volume)", quote(kw, q, sizeof(q)));
}

/* Line number at byte offset off (1-based). */
static int line_at(const char *text, size_t off)
{
    int line = 1;
    for (const char *c = text; (c = memchr(c, '\n', off - (size_t)(c - text))); c++)
        line++;
    return line;
}

static int parse_all(struct parser *p, const char *text, size_t len)
{
    char *buf = malloc(VF_MAX_LINE + 1);
    size_t pos = 0;
    int rc = 0;

    if (!buf)
        return enomem(p);
    p->line = 0;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        p->line++;
        if (n && text[pos + n - 1] == '\r')
            n--;
        if (n > VF_MAX_LINE) {
            rc = perr(p, p->line, "line is longer than %u bytes", VF_MAX_LINE);
            break;
        }
        if (memchr(text + pos, '\0', n)) {
            rc = perr(p, p->line, "NUL byte in volfile");
            break;
        }
        memcpy(buf, text + pos, n);
        buf[n] = '\0';
        if ((rc = parse_line(p, buf)) < 0)
            break;
        pos += (nl ? (size_t)(nl - (text + pos)) + 1 : len - pos);
    }
    free(buf);
    if (rc < 0)
        return rc;
    if (p->cur) {
        char q[256];
        return perr(p, p->line, "missing end-volume for volume '%s' (opened at line %d)",
                    quote(p->cur->name, q, sizeof(q)), p->cur->line);
    }
    if (p->vf->nvols == 0)
        return perr(p, p->line ? p->line : 1, "no volume defined");
    return 0;
}

int bfs_volfile_parse(const char *text, size_t len, const char *source,
                      struct bfs_volfile **out, char *err, size_t errlen)
{
    struct parser p = {.source = source ? source : "<inline>", .err = err, .errlen = errlen};

    *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    if (!text && len)
        return perr(&p, 0, "no text");
    if (len > VF_MAX_TEXT)
        return perr(&p, line_at(text, VF_MAX_TEXT), "volfile is larger than 16 MiB");

    p.vf = calloc(1, sizeof(*p.vf));
    if (!p.vf || !(p.vf->source = strdup(p.source))) {
        free(p.vf);
        return enomem(&p);
    }
    int rc = parse_all(&p, text ? text : "", len);
    strset_clear(&p.names);
    strset_clear(&p.keys);
    if (rc < 0) {
        bfs_volfile_free(p.vf);
        return rc;
    }
    *out = p.vf;
    return 0;
}

void bfs_volfile_free(struct bfs_volfile *vf)
{
    if (!vf)
        return;
    for (int i = 0; i < vf->nvols; i++) {
        struct bfs_vf_volume *v = &vf->vols[i];
        free(v->name);
        free(v->type);
        for (int k = 0; k < v->nopts; k++) {
            free(v->opts[k].key);
            free(v->opts[k].value);
        }
        free(v->opts);
        for (int k = 0; k < v->nsubvols; k++)
            free(v->subvols[k]);
        free(v->subvols);
    }
    free(vf->vols);
    free(vf->source);
    free(vf);
}
