/*
 * test_volfile.c — the volfile parser (graph.h: bfs_volfile_parse): good
 * files, and every error naming its file and line.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/tap.h"
#include "core/graph.h"

static char err[512];

static int parse(const char *text, struct bfs_volfile **vf)
{
    return bfs_volfile_parse(text, strlen(text), "t.vol", vf, err, sizeof(err));
}

static void test_good(void)
{
    static const char text[] =
        "# a client graph\n"
        "\n"
        "volume test-client-0\n"
        "    type protocol/client\n"
        "    option remote-host 127.0.0.1   # trailing comment\n"
        "    option remote-subvolume /data/brick#1\n"
        "    option transport.address-family   inet  \n"
        "end-volume\n"
        "\r\n"
        "volume test-client-1\r\n"
        "\ttype\tprotocol/client\r\n"
        "    option remote-host 127.0.0.2\r\n"
        "end-volume\r\n"
        "volume test-replicate-0\n"
        "    type cluster/replicate\n"
        "    subvolumes test-client-0 test-client-1\n"
        "end-volume\n"
        "volume top\n"
        "  type debug/io-stats\n"
        "  option log-level  a value with   inner  spaces \n"
        "  subvolumes test-replicate-0\n"
        "end-volume";  /* no final newline */
    struct bfs_volfile *vf = NULL;

    is_int(parse(text, &vf), 0, "good volfile parses");
    is_str(err, "", "no error text on success");
    if (!vf)
        return;
    is_str(vf->source, "t.vol", "source kept");
    is_int(vf->nvols, 4, "four volumes");
    struct bfs_vf_volume *c0 = &vf->vols[0], *c1 = &vf->vols[1], *r = &vf->vols[2],
                         *top = &vf->vols[3];
    is_str(c0->name, "test-client-0", "first name");
    is_int(c0->line, 3, "volume line");
    is_str(c0->type, "protocol/client", "type");
    is_int(c0->type_line, 4, "type line");
    is_int(c0->nopts, 3, "three options");
    is_str(c0->opts[0].key, "remote-host", "option key");
    is_str(c0->opts[0].value, "127.0.0.1", "comment after whitespace stripped");
    is_int(c0->opts[0].line, 5, "option line");
    is_str(c0->opts[1].value, "/data/brick#1", "'#' inside a word is kept");
    is_str(c0->opts[2].value, "inet", "value trimmed");
    is_str(c1->type, "protocol/client", "CRLF lines and tabs");
    is_str(c1->opts[0].value, "127.0.0.2", "CRLF stripped from value");
    is_int(c1->line, 10, "line count includes CRLF and blank lines");
    is_int(r->nsubvols, 2, "two subvolumes");
    is_str(r->subvols[0], "test-client-0", "subvol 0");
    is_str(r->subvols[1], "test-client-1", "subvol 1");
    is_int(r->subvols_line, 16, "subvolumes line");
    is_int(r->nopts, 0, "no options");
    is_str(top->opts[0].value, "a value with   inner  spaces", "value is the rest of the line");
    is_int(top->nsubvols, 1, "top has one subvolume");
    bfs_volfile_free(vf);

    /* a buffer that is not NUL-terminated */
    char raw[] = "volume a\ntype x/y\nend-volume\nGARBAGE";
    is_int(bfs_volfile_parse(raw, strlen(raw) - 7, "raw", &vf, err, sizeof(err)), 0,
           "only len bytes are read");
    ok(vf && vf->nvols == 1, "one volume");
    bfs_volfile_free(vf);

    is_int(bfs_volfile_parse("volume a\ntype x/y\nend-volume\n", 29, NULL, &vf, err,
                             sizeof(err)),
           0, "NULL source");
    is_str(vf ? vf->source : NULL, "<inline>", "NULL source is <inline>");
    bfs_volfile_free(vf);
    bfs_volfile_free(NULL);
}

/* Parses text, expects -EINVAL, no result, and exactly `msg` as error. */
static void bad(const char *text, const char *msg)
{
    struct bfs_volfile *vf = (struct bfs_volfile *)1;
    int rc = parse(text, &vf);
    is_int(rc, -EINVAL, "refused: %s", msg);
    ok(vf == NULL, "no partial result: %s", msg);
    is_str(err, msg, "message");
}

#define V "volume a\ntype x/y\n"

static void test_errors(void)
{
    bad("volume a\n  tpye x/y\nend-volume\n",
        "t.vol:2: unknown keyword 'tpye' (expected volume, type, option, subvolumes or "
        "end-volume)");
    bad("option k v\n",
        "t.vol:1: 'option' outside a volume (expected 'volume NAME' first)");
    bad(V "end-volume\n\n\ntype x/y\n",
        "t.vol:6: 'type' outside a volume (expected 'volume NAME' first)");
    bad(V "end-volume\nsubvolumes a\n",
        "t.vol:4: 'subvolumes' outside a volume (expected 'volume NAME' first)");
    bad("end-volume\n", "t.vol:1: 'end-volume' outside a volume (expected 'volume NAME' first)");
    bad(V "end-volume\n# again\nvolume a\ntype x/y\nend-volume\n",
        "t.vol:5: duplicate volume name 'a' (first defined at line 1)");
    bad("volume a\noption k v\nend-volume\n", "t.vol:3: volume 'a' (line 1) has no type");
    bad(V "option k v\n", "t.vol:3: missing end-volume for volume 'a' (opened at line 1)");
    bad(V "volume b\n",
        "t.vol:3: nested volume: 'volume' inside volume 'a' (opened at line 1, missing "
        "end-volume?)");
    bad(V "option k v\noption j w\noption k z\nend-volume\n",
        "t.vol:5: duplicate option 'k' in volume 'a' (first at line 3)");
    bad("volume\n", "t.vol:1: empty name: 'volume' needs a name");
    bad("volume   # just a comment\n", "t.vol:1: empty name: 'volume' needs a name");
    bad("volume a b\n", "t.vol:1: unexpected 'b' after the volume name");
    bad("volume a\ntype\n", "t.vol:2: empty name: 'type' needs CLASS/NAME");
    bad("volume a\ntype posix\n", "t.vol:2: type 'posix' is not of the form CLASS/NAME");
    bad("volume a\ntype /posix\n", "t.vol:2: type '/posix' is not of the form CLASS/NAME");
    bad("volume a\ntype a/b/c\n", "t.vol:2: type 'a/b/c' is not of the form CLASS/NAME");
    bad("volume a\ntype x/y z\n", "t.vol:2: unexpected 'z' after the type");
    bad(V "type x/z\n", "t.vol:3: 'type' given twice in volume 'a' (first at line 2)");
    bad(V "option\n", "t.vol:3: empty name: 'option' needs a key and a value");
    bad(V "option k\n", "t.vol:3: option 'k' has no value");
    bad(V "option k   # comment only\n", "t.vol:3: option 'k' has no value");
    bad(V "subvolumes\n", "t.vol:3: empty name: 'subvolumes' needs at least one name");
    bad(V "subvolumes b c b\n", "t.vol:3: subvolume 'b' listed twice");
    bad(V "subvolumes b\nsubvolumes c\n",
        "t.vol:4: 'subvolumes' given twice in volume 'a' (first at line 3)");
    bad(V "end-volume x\n", "t.vol:3: unexpected 'x' after end-volume");
    bad("volume a\x01\n",
        "t.vol:1: volume name 'a\\x01' contains a non-printable or non-ASCII byte");
    bad("volume caf\xc3\xa9\n",
        "t.vol:1: volume name 'caf\\xc3\\xa9' contains a non-printable or non-ASCII byte");
    bad("", "t.vol:1: no volume defined");
    bad("# nothing\n\n", "t.vol:2: no volume defined");
    bad("\x7f\n", "t.vol:1: unknown keyword '\\x7f' (expected volume, type, option, "
                  "subvolumes or end-volume)");

    /* NUL byte: needs an explicit length */
    static const char nul[] = "volume a\ntype x/\0y\nend-volume\n";
    struct bfs_volfile *vf = NULL;
    is_int(bfs_volfile_parse(nul, sizeof(nul) - 1, "n.vol", &vf, err, sizeof(err)), -EINVAL,
           "NUL refused");
    is_str(err, "n.vol:2: NUL byte in volfile", "NUL message names the line");

    /* a name over 255 bytes; a long unknown keyword is quoted short */
    char *t = malloc(2000);
    strcpy(t, "volume ");
    memset(t + 7, 'n', 256);
    strcpy(t + 7 + 256, "\n");
    vf = NULL;
    is_int(parse(t, &vf), -EINVAL, "long name refused");
    ok(strstr(err, "t.vol:1: volume name 'nnnn") == err && strstr(err, "...' is longer than 255"),
       "long name message is quoted short: %s", err);
    memset(t, 'k', 1000);
    t[1000] = '\0';
    is_int(parse(t, &vf), -EINVAL, "long keyword refused");
    ok(strlen(err) < 200, "message stays short (%zu bytes)", strlen(err));
    free(t);
}

static void test_limits(void)
{
    struct bfs_volfile *vf = NULL;
    size_t n = 64 * 1024;

    /* a 64 KiB line is fine, one byte more is not */
    char *t = malloc(n + 64);
    strcpy(t, "volume a\ntype x/y\noption k ");
    size_t pre = strlen(t) - strlen("option k ");
    memset(t + strlen(t), 'v', n - strlen("option k "));
    t[pre + n] = '\0';
    strcat(t, "\nend-volume\n");
    is_int(parse(t, &vf), 0, "a line of exactly 64 KiB is accepted");
    ok(vf && strlen(vf->vols[0].opts[0].value) == n - strlen("option k "), "long value kept");
    bfs_volfile_free(vf);
    memmove(t + pre + 1, t + pre, strlen(t + pre) + 1);
    t[pre] = 'o';
    memcpy(t + pre, "option k v", 10);
    vf = NULL;
    is_int(parse(t, &vf), -EINVAL, "a line over 64 KiB is refused");
    is_str(err, "t.vol:3: line is longer than 65536 bytes", "line-length message");
    free(t);

    /* input over 16 MiB: refused up front, naming the line at the limit */
    size_t big = 16u * 1024 * 1024 + 1;
    char *b = malloc(big);
    memset(b, '#', big);
    for (size_t i = 99; i < big; i += 100)
        b[i] = '\n';
    is_int(bfs_volfile_parse(b, big, "big.vol", &vf, err, sizeof(err)), -EINVAL,
           "16 MiB + 1 refused");
    char want[128];
    snprintf(want, sizeof(want), "big.vol:%d: volfile is larger than 16 MiB",
             (int)((16u * 1024 * 1024) / 100 + 1));
    is_str(err, want, "size message names the line at the limit");
    free(b);

    /* many volumes and options: duplicate checks stay fast */
    size_t cap = 6 * 1024 * 1024, o = 0;
    char *m = malloc(cap);
    for (int i = 0; i < 50000; i++)
        o += (size_t)snprintf(m + o, cap - o, "volume v%d\ntype c/t\noption k%d x\nend-volume\n",
                              i, i);
    o += (size_t)snprintf(m + o, cap - o, "volume w\ntype c/t\n");
    for (int i = 0; i < 50000; i++)
        o += (size_t)snprintf(m + o, cap - o, "option key%d val\n", i);
    o += (size_t)snprintf(m + o, cap - o, "end-volume\n");
    is_int(bfs_volfile_parse(m, o, "m.vol", &vf, err, sizeof(err)), 0,
           "50000 volumes and a volume with 50000 options");
    ok(vf && vf->nvols == 50001 && vf->vols[50000].nopts == 50000, "all kept");
    bfs_volfile_free(vf);
    free(m);

    char small[8];
    is_int(bfs_volfile_parse("bogus\n", 6, "x.vol", &vf, small, sizeof(small)), -EINVAL,
           "tiny error buffer");
    is_int(strlen(small), 7, "message truncated to the buffer");
    is_int(bfs_volfile_parse("bogus\n", 6, "x.vol", &vf, NULL, 0), -EINVAL,
           "NULL error buffer");
}

int main(void)
{
    plan_lazy();
    test_good();
    test_errors();
    test_limits();
    return done_testing();
}
