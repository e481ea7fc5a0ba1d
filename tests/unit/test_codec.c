/*
 * test_codec.c — the body codec primitives (src/rpc/codec.h): round trips
 * of every type, every truncation of a message holding all of them, lying
 * counts, embedded NULs, caps, sticky errors and the fd mapping.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/xlator.h"
#include "rpc/codec.h"
#include "rpc/proto.h"
#include "rpc/wire.h"
#include "../lib/tap.h"

/* ---- helpers ---- */

/* A decoder view over an exact-size heap copy, so that ASan flags any read
 * past the end. */
struct view {
    uint8_t *copy;
    struct bfs_rbuf r;
};

static void view_init(struct view *v, const uint8_t *p, size_t len)
{
    v->copy = malloc(len ? len : 1);
    if (len)
        memcpy(v->copy, p, len);
    bfs_rbuf_init(&v->r, v->copy, len);
}

static void view_free(struct view *v)
{
    free(v->copy);
}

static struct bfs_iatt sample_iatt(int seed)
{
    struct bfs_iatt ia;
    memset(&ia, 0, sizeof(ia));
    for (int i = 0; i < 16; i++)
        ia.gfid.b[i] = (uint8_t)(seed * 16 + i);
    ia.ino = 0x0102030405060708ull + (uint64_t)seed;
    ia.dev = UINT64_MAX - (uint64_t)seed;
    ia.mode = 0100644;
    ia.nlink = 3;
    ia.uid = 1000;
    ia.gid = 0xFFFFFFFFu;
    ia.rdev = 77;
    ia.size = 1ull << 40;
    ia.blocks = 12345;
    ia.blksize = 4096;
    ia.atime_sec = -1;
    ia.mtime_sec = INT64_MIN;
    ia.ctime_sec = INT64_MAX;
    ia.atime_nsec = 999999999;
    ia.mtime_nsec = 1;
    ia.ctime_nsec = 0;
    return ia;
}

/* ---- fd mapping mock: ids 100.. map to a static array ---- */

static struct bfs_fd fake_fds[4];
static int last_is_new = -1;

static int mock_fd_to_id(void *arg, struct bfs_fd *fd, uint64_t *id)
{
    (void)arg;
    if (fd < fake_fds || fd >= fake_fds + 4)
        return -EBADF;
    *id = 100 + (uint64_t)(fd - fake_fds);
    return 0;
}

static int mock_id_to_fd(void *arg, uint64_t id, int is_new, struct bfs_fd **out)
{
    (void)arg;
    last_is_new = is_new;
    if (id < 100 || id >= 104)
        return -EBADF;
    *out = &fake_fds[id - 100];
    return 0;
}

static const struct bfs_codec_fds mock_fds = {NULL, mock_fd_to_id, mock_id_to_fd};

/* ---- scalars, strings, bytes ---- */

static void test_scalars(void)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    bfs_put_u8(&w, 0xAB);
    bfs_put_u32(&w, 0xDEADBEEF);
    bfs_put_u64(&w, 0x0123456789ABCDEFull);
    bfs_put_i64(&w, -2);
    bfs_put_bool(&w, true);
    bfs_put_bool(&w, false);
    is_int(w.err, 0, "scalar puts succeed");
    is_int(w.len, 1 + 4 + 8 + 8 + 1 + 1, "scalar sizes");
    ok(w.p[1] == 0xEF && w.p[4] == 0xDE, "u32 is little-endian on the wire");
    ok(w.p[5] == 0xEF && w.p[12] == 0x01, "u64 is little-endian on the wire");

    struct view v;
    view_init(&v, w.p, w.len);
    uint8_t u8;
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    bool b1, b2;
    bfs_get_u8(&v.r, &u8);
    bfs_get_u32(&v.r, &u32);
    bfs_get_u64(&v.r, &u64);
    bfs_get_i64(&v.r, &i64);
    bfs_get_bool(&v.r, &b1);
    bfs_get_bool(&v.r, &b2);
    is_int(bfs_rbuf_end(&v.r), 0, "scalars decode and consume the body");
    ok(u8 == 0xAB && u32 == 0xDEADBEEF && u64 == 0x0123456789ABCDEFull && i64 == -2 && b1 &&
           !b2,
       "scalar values round-trip");
    /* one more get overruns: sticky -EBADMSG, output zeroed */
    u32 = 7;
    is_int(bfs_get_u32(&v.r, &u32), -EBADMSG, "get past the end fails with EBADMSG");
    is_int(u32, 0, "failed get zeroes its output");
    is_int(bfs_get_u8(&v.r, &u8), -EBADMSG, "error is sticky");
    view_free(&v);

    uint8_t bad_bool[] = {2};
    view_init(&v, bad_bool, 1);
    is_int(bfs_get_bool(&v.r, &b1), -EBADMSG, "bool other than 0/1 is malformed");
    view_free(&v);

    /* trailing bytes are reported by bfs_rbuf_end */
    uint8_t two[] = {1, 2};
    view_init(&v, two, 2);
    bfs_get_u8(&v.r, &u8);
    is_int(bfs_rbuf_end(&v.r), -EBADMSG, "unread trailing bytes make rbuf_end fail");
    view_free(&v);
    bfs_wbuf_free(&w);
}

static void test_strings(void)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    char *big = malloc(100001);
    memset(big, 'x', 100000);
    big[100000] = 0;
    bfs_put_str(&w, "hello");
    bfs_put_str(&w, NULL);
    bfs_put_str(&w, "");
    bfs_put_str(&w, big);
    struct bfs_bytes b = {"a\0b", 3}, e = {NULL, 0};
    bfs_put_bytes(&w, &b);
    bfs_put_bytes(&w, &e);
    is_int(w.err, 0, "string puts succeed");
    ok(w.p[0] == 5 && w.p[4] == 'h' && w.p[9] == 0, "str is u32 len, bytes, NUL");
    ok(bfs_le32_get(w.p + 10) == 0xFFFFFFFFu, "NULL str is 0xFFFFFFFF");

    struct view v;
    view_init(&v, w.p, w.len);
    const char *s1, *s2, *s3, *s4;
    struct bfs_bytes o1, o2;
    bfs_get_str(&v.r, &s1);
    bfs_get_str(&v.r, &s2);
    bfs_get_str(&v.r, &s3);
    bfs_get_str(&v.r, &s4);
    bfs_get_bytes(&v.r, &o1);
    bfs_get_bytes(&v.r, &o2);
    is_int(bfs_rbuf_end(&v.r), 0, "strings decode");
    is_str(s1, "hello", "str round-trips");
    ok(s2 == NULL, "NULL str round-trips as NULL");
    is_str(s3, "", "empty str round-trips");
    ok(s4 && strcmp(s4, big) == 0, "100 kB str round-trips");
    ok(s1 == (const char *)v.copy + 4, "str getter is zero-copy");
    ok(o1.len == 3 && memcmp(o1.data, "a\0b", 3) == 0, "bytes round-trip (with NUL inside)");
    ok((const uint8_t *)o1.data >= v.copy && (const uint8_t *)o1.data < v.copy + w.len,
       "bytes getter points into the buffer");
    is_int(o2.len, 0, "empty bytes round-trip");
    view_free(&v);

    /* embedded NUL: well framed, so EINVAL (answerable), not EBADMSG */
    uint8_t emb[] = {3, 0, 0, 0, 'a', 0, 'b', 0};
    view_init(&v, emb, sizeof(emb));
    s1 = "junk";
    is_int(bfs_get_str(&v.r, &s1), -EINVAL, "embedded NUL fails with EINVAL");
    ok(s1 == NULL, "and leaves NULL");
    is_int(v.r.err, -EINVAL, "EINVAL is sticky");
    view_free(&v);

    uint8_t noterm[] = {3, 0, 0, 0, 'a', 'b', 'c', 'd'};
    view_init(&v, noterm, sizeof(noterm));
    is_int(bfs_get_str(&v.r, &s1), -EBADMSG, "missing terminator is malformed");
    view_free(&v);

    uint8_t huge[] = {0xFE, 0xFF, 0xFF, 0xFF, 'a', 0};
    view_init(&v, huge, sizeof(huge));
    is_int(bfs_get_str(&v.r, &s1), -EBADMSG, "length beyond the body is malformed");
    view_free(&v);
    view_init(&v, huge, sizeof(huge));
    is_int(bfs_get_bytes(&v.r, &o1), -EBADMSG, "bytes length beyond the body is malformed");
    ok(o1.data == NULL && o1.len == 0, "failed bytes get leaves it empty");
    view_free(&v);

    free(big);
    bfs_wbuf_free(&w);
}

/* ---- fixed layouts ---- */

static void test_fixed(void)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    struct bfs_iatt ia = sample_iatt(1);
    struct bfs_loc loc = {.name = "file.txt", .path = "/dir/file.txt"};
    loc.gfid.b[15] = 9;
    loc.pargfid = bfs_gfid_root;
    struct bfs_loc loc2 = {.name = NULL};
    loc2.gfid.b[0] = 0xFF;
    struct bfs_flock fl = {2, 0, 1ull << 63, 0, 4242, 0xFEEDFACECAFEBEEFull};
    struct bfs_lease le = {2, 1, {0}};
    for (int i = 0; i < 16; i++)
        le.id[i] = (uint8_t)(0xF0 + i);
    struct bfs_statvfs sv = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, UINT64_MAX};

    size_t before = w.len;
    bfs_put_iatt(&w, &ia);
    is_int(w.len - before, BFS_CODEC_IATT_LEN, "iatt is 112 bytes");
    bfs_put_gfid(&w, &ia.gfid);
    bfs_put_loc(&w, &loc);
    bfs_put_loc(&w, &loc2);
    bfs_put_flock(&w, &fl);
    bfs_put_lease(&w, &le);
    bfs_put_statvfs(&w, &sv);
    is_int(w.err, 0, "fixed-layout puts succeed");

    struct view v;
    view_init(&v, w.p, w.len);
    struct bfs_iatt oia;
    struct bfs_gfid og;
    struct bfs_loc ol, ol2;
    struct bfs_flock ofl;
    struct bfs_lease ole;
    struct bfs_statvfs osv;
    bfs_get_iatt(&v.r, &oia);
    bfs_get_gfid(&v.r, &og);
    bfs_get_loc(&v.r, &ol);
    bfs_get_loc(&v.r, &ol2);
    bfs_get_flock(&v.r, &ofl);
    bfs_get_lease(&v.r, &ole);
    bfs_get_statvfs(&v.r, &osv);
    is_int(bfs_rbuf_end(&v.r), 0, "fixed layouts decode");
    ok(memcmp(&oia, &ia, sizeof(ia)) == 0, "iatt round-trips (every field)");
    ok(bfs_gfid_eq(&og, &ia.gfid), "gfid round-trips");
    ok(bfs_gfid_eq(&ol.gfid, &loc.gfid) && bfs_gfid_is_root(&ol.pargfid), "loc gfids");
    is_str(ol.name, "file.txt", "loc name");
    ok(!ol.path && !ol.inode && !ol.parent, "loc path/inode/parent are not sent");
    ok(ol2.name == NULL && ol2.gfid.b[0] == 0xFF, "loc without a name");
    ok(ofl.type == fl.type && ofl.whence == fl.whence && ofl.start == fl.start &&
           ofl.len == fl.len && ofl.pid == fl.pid && ofl.owner == fl.owner,
       "flock round-trips");
    ok(memcmp(&ole, &le, sizeof(le)) == 0, "lease round-trips");
    ok(memcmp(&osv, &sv, sizeof(sv)) == 0, "statvfs round-trips");
    view_free(&v);

    /* a truncated iatt fails whole and leaves a zeroed struct */
    view_init(&v, w.p, BFS_CODEC_IATT_LEN - 1);
    is_int(bfs_get_iatt(&v.r, &oia), -EBADMSG, "truncated iatt fails");
    struct bfs_iatt zero;
    memset(&zero, 0, sizeof(zero));
    ok(memcmp(&oia, &zero, sizeof(zero)) == 0, "and is zeroed");
    view_free(&v);
    bfs_wbuf_free(&w);
}

/* ---- dict ---- */

static void test_dict(void)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    struct bfs_dict *d = bfs_dict_new(), *empty = bfs_dict_new();
    bfs_dict_set_str(d, "user.name", "value");
    bfs_dict_set_int(d, "trusted.count", -123456789012345ll);
    bfs_dict_set_bin(d, "bin", "\x00\x01\x02", 3);
    bfs_dict_set_str(d, "empty", "");
    bfs_put_dict(&w, d);
    bfs_put_dict(&w, NULL);
    bfs_put_dict(&w, empty);
    is_int(w.err, 0, "dict puts succeed");

    struct view v;
    view_init(&v, w.p, w.len);
    struct bfs_dict *o1, *o2, *o3;
    bfs_get_dict(&v.r, &o1);
    bfs_get_dict(&v.r, &o2);
    bfs_get_dict(&v.r, &o3);
    is_int(bfs_rbuf_end(&v.r), 0, "dicts decode");
    const char *s = NULL;
    int64_t iv = 0;
    const void *bv = NULL;
    size_t bl = 0;
    ok(o1 && bfs_dict_count(o1) == 4, "dict has 4 entries");
    ok(bfs_dict_get_str(o1, "user.name", &s) == 0 && strcmp(s, "value") == 0, "STR value");
    ok(bfs_dict_get_int(o1, "trusted.count", &iv) == 0 && iv == -123456789012345ll, "INT value");
    ok(bfs_dict_get_bin(o1, "bin", &bv, &bl) == 0 && bl == 3 && memcmp(bv, "\0\1\2", 3) == 0,
       "BIN value");
    ok(bfs_dict_get_str(o1, "empty", &s) == 0 && strcmp(s, "") == 0, "empty STR value");
    ok(o2 == NULL, "NULL dict round-trips as NULL");
    ok(o3 && bfs_dict_count(o3) == 0, "empty dict round-trips as empty");
    bfs_dict_unref(o1);
    bfs_dict_unref(o3);
    view_free(&v);

    /* encoder caps */
    char longkey[300];
    memset(longkey, 'k', 256);
    longkey[256] = 0;
    struct bfs_dict *bad = bfs_dict_new();
    bfs_dict_set_int(bad, longkey, 1);
    bfs_wbuf_free(&w);
    bfs_put_dict(&w, bad);
    is_int(w.err, -EINVAL, "put of a 256-byte key fails");
    bfs_dict_unref(bad);
    bad = bfs_dict_new();
    char key[32];
    for (int i = 0; i <= BFS_CODEC_MAX_DICT; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        bfs_dict_set_int(bad, key, i);
    }
    bfs_wbuf_free(&w);
    bfs_put_dict(&w, bad);
    is_int(w.err, -E2BIG, "put of 4097 entries fails");
    bfs_dict_unref(bad);

    /* decoder caps and malformed entries, hand-built */
    struct {
        const char *what;
        int want;
        uint32_t count, klen;
        const char *key;
        uint8_t type;
        uint32_t vlen;
        const char *val;
    } cases[] = {
        {"count over the cap", -EBADMSG, 4097, 1, "a", 3, 0, ""},
        {"count lying about the bytes left", -EBADMSG, 4000, 1, "a", 3, 0, ""},
        {"NULL key", -EBADMSG, 1, 0xFFFFFFFFu, "", 3, 0, ""},
        {"empty key", -EBADMSG, 1, 0, "", 3, 0, ""},
        {"unknown value type", -EBADMSG, 1, 1, "a", 9, 0, ""},
        {"INT value not 8 bytes", -EBADMSG, 1, 1, "a", 2, 4, "abcd"},
        {"STR value with a NUL", -EINVAL, 1, 1, "a", 1, 3, "a\0b"},
        {"key with a NUL", -EINVAL, 1, 3, "a\0b", 3, 0, ""},
        {"value length past the end", -EBADMSG, 1, 1, "a", 3, 1000, "x"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bfs_wbuf_free(&w);
        bfs_put_u32(&w, cases[i].count);
        bfs_put_u32(&w, cases[i].klen);
        if (cases[i].klen != 0xFFFFFFFFu) {
            bfs_wbuf_append(&w, cases[i].key, cases[i].klen);
            bfs_put_u8(&w, 0);
        }
        bfs_put_u8(&w, cases[i].type);
        bfs_put_u32(&w, cases[i].vlen);
        bfs_wbuf_append(&w, cases[i].val, cases[i].vlen < 8 ? cases[i].vlen : 1);
        view_init(&v, w.p, w.len);
        o1 = (struct bfs_dict *)1;
        is_int(bfs_get_dict(&v.r, &o1), cases[i].want, "dict decode: %s", cases[i].what);
        ok(o1 == NULL, "dict decode: %s leaves NULL", cases[i].what);
        view_free(&v);
    }

    /* a 255-byte key is fine */
    bfs_wbuf_free(&w);
    longkey[255] = 0;
    bad = bfs_dict_new();
    bfs_dict_set_int(bad, longkey, 1);
    bfs_put_dict(&w, bad);
    view_init(&v, w.p, w.len);
    ok(bfs_get_dict(&v.r, &o1) == 0 && bfs_dict_has(o1, longkey), "255-byte key round-trips");
    bfs_dict_unref(o1);
    bfs_dict_unref(bad);
    view_free(&v);

    bfs_dict_unref(d);
    bfs_dict_unref(empty);
    bfs_wbuf_free(&w);
}

/* ---- dirents ---- */

static void test_dirents(void)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    struct bfs_dirents l = {0}, o;
    struct bfs_iatt ia = sample_iatt(2);
    bfs_dirents_add(&l, ".", 1, 4, 1, NULL);
    bfs_dirents_add(&l, "file", 2, 8, 99, &ia);
    bfs_dirents_add(&l, "", UINT64_MAX, 0, 0, NULL);
    bfs_put_dirents(&w, &l);
    struct bfs_dirents none = {0};
    bfs_put_dirents(&w, &none);
    is_int(w.err, 0, "dirents puts succeed");

    struct view v;
    view_init(&v, w.p, w.len);
    struct bfs_dirents o2;
    bfs_get_dirents(&v.r, &o);
    bfs_get_dirents(&v.r, &o2);
    is_int(bfs_rbuf_end(&v.r), 0, "dirents decode");
    is_int(o.count, 3, "three entries");
    ok(o.count == 3 && strcmp(o.v[1].name, "file") == 0 && o.v[1].d_off == 2 &&
           o.v[1].d_type == 8 && o.v[1].d_ino == 99 && o.v[1].has_attr &&
           memcmp(&o.v[1].attr, &ia, sizeof(ia)) == 0,
       "entry with attr round-trips");
    ok(o.count == 3 && !o.v[0].has_attr && strcmp(o.v[0].name, ".") == 0 &&
           o.v[2].d_off == UINT64_MAX,
       "entries without attr round-trip");
    ok(o.count == 3 && ((const uint8_t *)o.v[1].name >= v.copy + w.len ||
                        (const uint8_t *)o.v[1].name < v.copy),
       "names are owned copies, not pointers into the buffer");
    is_int(o2.count, 0, "empty listing round-trips");
    bfs_dirents_free(&o);
    bfs_dirents_free(&o2);
    view_free(&v);

    /* lying counts: rejected before allocating anything */
    uint32_t counts[] = {BFS_CODEC_MAX_DIRENTS + 1, BFS_CODEC_MAX_DIRENTS, 0xFFFFFFFFu, 2};
    for (size_t i = 0; i < 4; i++) {
        bfs_wbuf_free(&w);
        bfs_put_u32(&w, counts[i]);
        bfs_put_str(&w, "only-one");
        bfs_put_u64(&w, 1);
        bfs_put_u32(&w, 8);
        bfs_put_u64(&w, 1);
        bfs_put_bool(&w, false);
        view_init(&v, w.p, w.len);
        o.count = 77;
        is_int(bfs_get_dirents(&v.r, &o), -EBADMSG, "dirents count %u with one entry fails",
               counts[i]);
        ok(o.count == 0 && o.v == NULL, "and leaves an empty list");
        view_free(&v);
    }

    /* a NULL name is malformed, an embedded NUL is EINVAL */
    bfs_wbuf_free(&w);
    bfs_put_u32(&w, 1);
    bfs_put_str(&w, NULL);
    for (int i = 0; i < 4; i++)
        bfs_put_u64(&w, 0);
    view_init(&v, w.p, w.len);
    is_int(bfs_get_dirents(&v.r, &o), -EBADMSG, "dirent with a NULL name is malformed");
    view_free(&v);

    bfs_dirents_free(&l);
    bfs_wbuf_free(&w);
}

/* ---- fds and the caller identity ---- */

static void test_fd_and_stack(void)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    is_int(bfs_put_fd(&w, &fake_fds[2], &mock_fds), 0, "fd put through the mapping");
    ok(w.len == 8 && bfs_le64_get(w.p) == 102, "fd travels as its u64 id");
    struct view v;
    view_init(&v, w.p, w.len);
    struct bfs_fd *fd = NULL;
    is_int(bfs__dec_fd(&v.r, &fd, 1, &mock_fds), 0, "fd get through the mapping");
    ok(fd == &fake_fds[2] && last_is_new == 1, "id maps back, is_new passed through");
    view_free(&v);

    struct bfs_fd stray;
    is_int(bfs__enc_fd(&w, &stray, &mock_fds), -EBADF, "mapping error propagates on put");
    is_int(w.err, -EBADF, "and is sticky");
    bfs_wbuf_free(&w);
    is_int(bfs_put_fd(&w, &fake_fds[0], NULL), -EINVAL, "put without a mapping fails");
    bfs_wbuf_free(&w);

    bfs_put_u64(&w, 555);
    view_init(&v, w.p, w.len);
    fd = (struct bfs_fd *)1;
    is_int(bfs_get_fd(&v.r, &fd, 0, &mock_fds), -EBADF, "unknown id: mapping error on get");
    ok(fd == NULL, "and NULL fd");
    view_free(&v);
    bfs_wbuf_free(&w);

    /* stack */
    struct bfs_stack st, out;
    memset(&st, 0, sizeof(st));
    memset(&out, 0, sizeof(out));
    st.uid = 1000;
    st.gid = 100;
    st.pid = 4321;
    st.lk_owner = 0xAABBCCDDEEFF0011ull;
    st.ngroups = BFS_MAX_GROUPS;
    for (uint32_t i = 0; i < BFS_MAX_GROUPS; i++)
        st.groups[i] = i * 7;
    st.unique = 5;
    bfs_put_stack(&w, &st);
    view_init(&v, w.p, w.len);
    out.refs = 9;
    out.unique = 42;
    bfs_get_stack(&v.r, &out);
    is_int(bfs_rbuf_end(&v.r), 0, "stack decodes");
    ok(out.uid == 1000 && out.gid == 100 && out.pid == 4321 &&
           out.lk_owner == 0xAABBCCDDEEFF0011ull && out.ngroups == BFS_MAX_GROUPS &&
           memcmp(out.groups, st.groups, sizeof(st.groups)) == 0,
       "stack round-trips with %d groups", BFS_MAX_GROUPS);
    ok(out.refs == 9 && out.unique == 42, "stack get leaves receiver fields alone");
    view_free(&v);
    bfs_wbuf_free(&w);

    st.ngroups = BFS_MAX_GROUPS + 1;
    bfs_put_stack(&w, &st);
    is_int(w.err, -EINVAL, "put of too many groups fails");
    bfs_wbuf_free(&w);

    /* hand-built: ngroups over the cap, then ngroups lying about the bytes */
    uint32_t ng[] = {BFS_MAX_GROUPS + 1, 10};
    for (int i = 0; i < 2; i++) {
        bfs_put_u32(&w, 1);
        bfs_put_u32(&w, 2);
        bfs_put_u32(&w, 3);
        bfs_put_u64(&w, 4);
        bfs_put_u32(&w, ng[i]);
        bfs_put_u32(&w, 5);
        view_init(&v, w.p, w.len);
        memset(&out, 0, sizeof(out));
        is_int(bfs_get_stack(&v.r, &out), -EBADMSG, "stack with ngroups %u fails", ng[i]);
        ok(out.uid == 0 && out.ngroups == 0, "and leaves the stack untouched");
        view_free(&v);
        bfs_wbuf_free(&w);
    }
}

/* ---- every truncation of a message with every type ---- */

struct all {
    uint8_t u8;
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    bool b;
    const char *s, *sn;
    struct bfs_bytes by;
    struct bfs_gfid g;
    struct bfs_iatt ia;
    struct bfs_loc loc;
    struct bfs_flock fl;
    struct bfs_lease le;
    struct bfs_statvfs sv;
    struct bfs_dict *d;
    struct bfs_dirents de;
    struct bfs_fd *fd;
    struct bfs_stack st;
};

static void enc_all(struct bfs_wbuf *w)
{
    struct bfs_iatt ia = sample_iatt(3);
    struct bfs_loc loc = {.name = "n"};
    struct bfs_flock fl = {1, 0, 2, 3, 4, 5};
    struct bfs_lease le = {1, 2, {3}};
    struct bfs_statvfs sv = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    struct bfs_dict *d = bfs_dict_new();
    struct bfs_dirents de = {0};
    struct bfs_stack st;
    memset(&st, 0, sizeof(st));
    st.ngroups = 2;
    st.groups[1] = 77;
    bfs_dict_set_str(d, "k1", "v");
    bfs_dict_set_int(d, "k2", 2);
    bfs_dict_set_bin(d, "k3", "bb", 2);
    bfs_dirents_add(&de, "a", 1, 8, 1, &ia);
    bfs_dirents_add(&de, "b", 2, 4, 2, NULL);

    bfs_put_stack(w, &st);
    bfs_put_u8(w, 1);
    bfs_put_u32(w, 2);
    bfs_put_u64(w, 3);
    bfs_put_i64(w, -4);
    bfs_put_bool(w, true);
    bfs_put_str(w, "str");
    bfs_put_str(w, NULL);
    bfs_put_bytes(w, &(struct bfs_bytes){"xyz", 3});
    bfs_put_gfid(w, &ia.gfid);
    bfs_put_iatt(w, &ia);
    bfs_put_loc(w, &loc);
    bfs_put_flock(w, &fl);
    bfs_put_lease(w, &le);
    bfs_put_statvfs(w, &sv);
    bfs_put_dict(w, d);
    bfs_put_dirents(w, &de);
    bfs_put_fd(w, &fake_fds[1], &mock_fds);
    bfs_dict_unref(d);
    bfs_dirents_free(&de);
}

static int dec_all(struct bfs_rbuf *r, struct all *a)
{
    memset(a, 0, sizeof(*a));
    bfs_get_stack(r, &a->st);
    bfs_get_u8(r, &a->u8);
    bfs_get_u32(r, &a->u32);
    bfs_get_u64(r, &a->u64);
    bfs_get_i64(r, &a->i64);
    bfs_get_bool(r, &a->b);
    bfs_get_str(r, &a->s);
    bfs_get_str(r, &a->sn);
    bfs_get_bytes(r, &a->by);
    bfs_get_gfid(r, &a->g);
    bfs_get_iatt(r, &a->ia);
    bfs_get_loc(r, &a->loc);
    bfs_get_flock(r, &a->fl);
    bfs_get_lease(r, &a->le);
    bfs_get_statvfs(r, &a->sv);
    bfs_get_dict(r, &a->d);
    bfs_get_dirents(r, &a->de);
    bfs_get_fd(r, &a->fd, 0, &mock_fds);
    return bfs_rbuf_end(r);
}

static void all_clear(struct all *a)
{
    bfs_dict_unref(a->d);
    bfs_dirents_free(&a->de);
}

static void test_truncation(void)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    enc_all(&w);
    is_int(w.err, 0, "composite message encodes (%zu bytes)", w.len);

    struct view v;
    struct all a;
    view_init(&v, w.p, w.len);
    is_int(dec_all(&v.r, &a), 0, "composite message decodes whole");
    ok(a.st.groups[1] == 77 && a.u8 == 1 && a.u32 == 2 && a.u64 == 3 && a.i64 == -4 && a.b &&
           strcmp(a.s, "str") == 0 && !a.sn && a.by.len == 3 && a.ia.ino == sample_iatt(3).ino &&
           strcmp(a.loc.name, "n") == 0 && a.fl.owner == 5 && a.le.id[0] == 3 &&
           a.sv.namemax == 11 && bfs_dict_count(a.d) == 3 && a.de.count == 2 &&
           a.fd == &fake_fds[1],
       "composite values are right");
    all_clear(&a);
    view_free(&v);

    size_t bad = 0;
    for (size_t n = 0; n < w.len; n++) {
        view_init(&v, w.p, n);
        int rc = dec_all(&v.r, &a);
        /* Fields decoded before the cut are owned and released by
         * all_clear (LeakSanitizer checks that); the cut field and all
         * after it must be empty: the fd is always after the cut. */
        if (rc != -EBADMSG || a.fd) {
            if (bad++ < 5)
                printf("# truncation at %zu: rc %d fd %p\n", n, rc, (void *)a.fd);
        }
        all_clear(&a);
        view_free(&v);
    }
    is_int(bad, 0, "each of the %zu truncations fails with EBADMSG", w.len);

    /* one extra byte: decodes, but rbuf_end reports the leftover */
    uint8_t *longer = malloc(w.len + 1);
    memcpy(longer, w.p, w.len);
    longer[w.len] = 0;
    view_init(&v, longer, w.len + 1);
    is_int(dec_all(&v.r, &a), -EBADMSG, "a trailing byte is reported");
    all_clear(&a);
    view_free(&v);
    free(longer);
    bfs_wbuf_free(&w);
}

/* ---- write buffer ---- */

static void test_wbuf(void)
{
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    for (uint32_t i = 0; i < 100000; i++)
        bfs_put_u32(&w, i);
    ok(w.err == 0 && w.len == 400000 && w.cap >= w.len, "wbuf grows");
    ok(bfs_le32_get(w.p + 4 * 99999) == 99999, "contents survive growth");
    size_t len;
    uint8_t *p = bfs_wbuf_take(&w, &len);
    ok(p && len == 400000 && w.p == NULL && w.len == 0, "take hands the buffer over");
    free(p);

    is_int(bfs_wbuf_reserve(&w, BFS_WBUF_MAX + 1), -ENOMEM, "impossible reserve fails");
    bfs_put_u32(&w, 1);
    bfs_put_str(&w, "x");
    ok(w.err == -ENOMEM && w.len == 0, "ENOMEM is sticky; later puts are no-ops");
    bfs_wbuf_free(&w);
    ok(w.err == 0 && w.p == NULL, "free re-initializes");
}

/* ---- the generated per-fop codec on top of these primitives ---- */

static void test_generated(void)
{
    struct bfs_wbuf w;
    struct view v;
    bfs_wbuf_init(&w);

    /* lookup request: loc + xdata, through the generic table */
    struct bfs_lookup_req lq = {.loc = {.name = "dir"}}, olq;
    lq.loc.pargfid = bfs_gfid_root;
    lq.xdata = bfs_dict_new();
    bfs_dict_set_int(lq.xdata, "want-gfid", 1);
    is_int(bfs_fop_info[BFS_FOP_LOOKUP].enc_req(&w, &lq, &mock_fds), 0, "lookup req encodes");
    view_init(&v, w.p, w.len);
    is_int(bfs_fop_info[BFS_FOP_LOOKUP].dec_req(&v.r, &olq, &mock_fds), 0, "lookup req decodes");
    is_int(bfs_rbuf_end(&v.r), 0, "and consumes the body");
    ok(olq.loc.name && strcmp(olq.loc.name, "dir") == 0 && bfs_gfid_is_root(&olq.loc.pargfid) &&
           bfs_dict_has(olq.xdata, "want-gfid"),
       "lookup req round-trips");
    bfs_lookup_req_clear_decoded(&olq);
    bfs_dict_unref(lq.xdata);
    view_free(&v);
    bfs_wbuf_free(&w);

    /* write request: fd through the mapping, payload zero-copy */
    struct bfs_write_req wq = {.fd = &fake_fds[3], .data = {"payload", 7}, .offset = 1ull << 33,
                               .flags = 2},
                         owq;
    is_int(bfs_fop_info[BFS_FOP_WRITE].enc_req(&w, &wq, &mock_fds), 0, "write req encodes");
    view_init(&v, w.p, w.len);
    is_int(bfs_fop_info[BFS_FOP_WRITE].dec_req(&v.r, &owq, &mock_fds), 0, "write req decodes");
    ok(owq.fd == &fake_fds[3] && owq.data.len == 7 && memcmp(owq.data.data, "payload", 7) == 0 &&
           owq.offset == (1ull << 33) && owq.flags == 2 && owq.xdata == NULL,
       "write req round-trips");
    view_free(&v); /* not clear_decoded: the fake fd is not refcounted */
    bfs_wbuf_free(&w);

    /* readdir reply: dirents and eod */
    struct bfs_readdir_rep rr = {.eod = true}, orr;
    bfs_dirents_add(&rr.entries, "a", 1, 8, 5, NULL);
    is_int(bfs_fop_info[BFS_FOP_READDIR].enc_rep(&w, &rr), 0, "readdir rep encodes");
    for (size_t n = 0; n < w.len; n++) {
        view_init(&v, w.p, n);
        if (bfs_fop_info[BFS_FOP_READDIR].dec_rep(&v.r, &orr) != -EBADMSG)
            ok(0, "truncated readdir rep at %zu must fail", n);
        bfs_readdir_rep_clear_decoded(&orr);
        view_free(&v);
    }
    view_init(&v, w.p, w.len);
    is_int(bfs_fop_info[BFS_FOP_READDIR].dec_rep(&v.r, &orr), 0, "readdir rep decodes");
    ok(orr.eod && orr.entries.count == 1 && strcmp(orr.entries.v[0].name, "a") == 0,
       "readdir rep round-trips");
    bfs_readdir_rep_clear_decoded(&orr);
    bfs_dirents_free(&rr.entries);
    view_free(&v);
    bfs_wbuf_free(&w);
}

/* Upcalls (rpc/proto.c): invalidations keep their body; contention
 * notices add the domain and the lock owner; a body cut short or longer
 * than its kind says is refused. */
static void test_upcall(void)
{
    struct bfs_upcall inv = {.kind = BFS_UPCALL_ENTRY, .name = "x", .domain = "ignored",
                             .owner = 9};
    inv.pargfid.b[15] = 1;
    struct bfs_wbuf w;
    bfs_wbuf_init(&w);
    ok(bfs_enc_upcall(&w, &inv) == 0, "upcall: an invalidation encodes");
    size_t inv_len = w.len;
    struct bfs_upcall got;
    struct bfs_rbuf rd;
    bfs_rbuf_init(&rd, w.p, w.len);
    ok(bfs_dec_upcall(&rd, &got) == 0 && got.kind == BFS_UPCALL_ENTRY && got.name &&
           strcmp(got.name, "x") == 0 && !got.domain && got.owner == 0,
       "upcall: an invalidation carries no domain or owner (its body is unchanged)");
    bfs_wbuf_free(&w);

    struct bfs_upcall c = {.kind = BFS_UPCALL_ENTRYLK_CONTENTION, .name = "f", .domain = "rep",
                           .owner = 0x8000000000000123ull};
    c.gfid.b[0] = 7;
    bfs_wbuf_init(&w);
    ok(bfs_enc_upcall(&w, &c) == 0 && w.len > inv_len, "upcall: a contention notice encodes");
    bfs_rbuf_init(&rd, w.p, w.len);
    ok(bfs_dec_upcall(&rd, &got) == 0 && got.kind == c.kind && bfs_gfid_eq(&got.gfid, &c.gfid) &&
           got.name && strcmp(got.name, "f") == 0 && got.domain &&
           strcmp(got.domain, "rep") == 0 && got.owner == c.owner,
       "upcall: a contention notice decodes with its domain, name and owner");
    bfs_rbuf_init(&rd, w.p, w.len - 1);
    ok(bfs_dec_upcall(&rd, &got) < 0, "upcall: a notice cut short is refused");
    uint8_t *longer = malloc(w.len + 1);
    memcpy(longer, w.p, w.len);
    longer[w.len] = 0;
    bfs_rbuf_init(&rd, longer, w.len + 1);
    ok(bfs_dec_upcall(&rd, &got) == -EBADMSG, "upcall: trailing bytes are refused");
    struct bfs_wbuf kw; /* the same body under an invalidation's kind (the first u32) */
    bfs_wbuf_init(&kw);
    bfs_put_u32(&kw, BFS_UPCALL_INODE);
    memcpy(longer, kw.p, kw.len);
    bfs_wbuf_free(&kw);
    bfs_rbuf_init(&rd, longer, w.len);
    ok(bfs_dec_upcall(&rd, &got) == -EBADMSG,
       "upcall: what an older client sees in a notice (an invalidation with trailing bytes) "
       "is refused: hence the handshake flag");
    free(longer);
    bfs_wbuf_free(&w);
}

int main(void)
{
    plan_lazy();
    test_upcall();
    test_scalars();
    test_strings();
    test_fixed();
    test_dict();
    test_dirents();
    test_fd_and_stack();
    test_truncation();
    test_wbuf();
    test_generated();
    return done_testing();
}
