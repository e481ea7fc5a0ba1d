/*
 * test_dict.c — the refcounted typed map (dict.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/tap.h"
#include "core/dict.h"

static void test_types(void)
{
    struct bfs_dict *d = bfs_dict_new();
    const char *s;
    const void *b;
    size_t len;
    int64_t i;
    enum bfs_val_type t;

    ok(d != NULL, "new");
    is_int(bfs_dict_count(d), 0, "new dict is empty");
    is_int(bfs_dict_set_str(d, "name", "brick1"), 0, "set str");
    is_int(bfs_dict_set_int(d, "count", -42), 0, "set int");
    is_int(bfs_dict_set_bin(d, "blob", "\x00\x01\x02", 3), 0, "set bin");
    is_int(bfs_dict_set_bin(d, "empty", NULL, 0), 0, "set empty bin");
    is_int(bfs_dict_count(d), 4, "four keys");

    is_int(bfs_dict_get_str(d, "name", &s), 0, "get str");
    is_str(s, "brick1", "str value");
    is_int(bfs_dict_get_int(d, "count", &i), 0, "get int");
    is_int(i, -42, "int value");
    is_int(bfs_dict_get_bin(d, "blob", &b, &len), 0, "get bin");
    ok(len == 3 && memcmp(b, "\x00\x01\x02", 3) == 0, "bin value");
    is_int(((const char *)b)[3], 0, "bin has a hidden NUL");
    is_int(bfs_dict_get_bin(d, "empty", &b, &len), 0, "get empty bin");
    ok(len == 0 && b && ((const char *)b)[0] == 0, "empty bin is a NUL-terminated empty buffer");

    is_int(bfs_dict_get_int(d, "name", &i), -EINVAL, "type mismatch str->int");
    is_int(bfs_dict_get_str(d, "count", &s), -EINVAL, "type mismatch int->str");
    is_int(bfs_dict_get_bin(d, "name", &b, &len), -EINVAL, "type mismatch str->bin");
    is_int(bfs_dict_get_str(d, "nope", &s), -ENOENT, "missing key");

    is_int(bfs_dict_get_raw(d, "count", &t, &b, &len), 0, "raw int");
    ok(t == BFS_VAL_INT && len == 8 && memcmp(b, "\xd6\xff\xff\xff\xff\xff\xff\xff", 8) == 0,
       "raw int is 8 little-endian bytes");
    is_int(bfs_dict_get_raw(d, "name", &t, &b, &len), 0, "raw str");
    ok(t == BFS_VAL_STR && len == 6 && memcmp(b, "brick1", 6) == 0, "raw str has no NUL");
    is_int(bfs_dict_get_raw(d, "nope", &t, &b, &len), -ENOENT, "raw missing");

    ok(bfs_dict_has(d, "blob") && !bfs_dict_has(d, "blobby"), "has");
    ok(!bfs_dict_has(NULL, "x") && bfs_dict_count(NULL) == 0, "NULL-safe has/count");
    is_int(bfs_dict_set_str(d, "x", NULL), -EINVAL, "set str NULL value refused");
    is_int(bfs_dict_set_int(d, NULL, 1), -EINVAL, "NULL key refused");
    bfs_dict_unref(d);
}

static void test_replace_delete(void)
{
    struct bfs_dict *d = bfs_dict_new();
    const char *s;
    int64_t i;

    bfs_dict_set_str(d, "a", "1");
    bfs_dict_set_str(d, "b", "2");
    bfs_dict_set_str(d, "c", "3");
    is_int(bfs_dict_set_int(d, "b", 22), 0, "replace with another type");
    is_int(bfs_dict_count(d), 3, "replace does not add");
    is_int(bfs_dict_get_int(d, "b", &i), 0, "replaced value readable");
    is_int(i, 22, "replaced value");
    /* set a key to its own current value (pointer into the dict) */
    bfs_dict_get_str(d, "a", &s);
    is_int(bfs_dict_set_str(d, "a", s), 0, "set from own value");
    bfs_dict_get_str(d, "a", &s);
    is_str(s, "1", "self-assignment kept the value");

    is_int(bfs_dict_del(d, "b"), 0, "delete");
    is_int(bfs_dict_del(d, "b"), -ENOENT, "delete again");
    is_int(bfs_dict_count(d), 2, "count after delete");
    ok(!bfs_dict_has(d, "b") && bfs_dict_has(d, "a") && bfs_dict_has(d, "c"), "others remain");
    is_int(bfs_dict_del(NULL, "a"), -ENOENT, "delete on NULL dict");
    bfs_dict_unref(d);
}

struct order {
    char buf[256];
    int stop_after;
    int n;
};

static int collect(const char *key, enum bfs_val_type type, const void *val, size_t len,
                   void *arg)
{
    struct order *o = arg;
    strncat(o->buf, key, sizeof(o->buf) - strlen(o->buf) - 1);
    strncat(o->buf, ",", sizeof(o->buf) - strlen(o->buf) - 1);
    return ++o->n == o->stop_after ? 7 : 0;
}

static void test_order(void)
{
    struct bfs_dict *d = bfs_dict_new();
    struct order o = {.stop_after = -1};

    bfs_dict_set_int(d, "zeta", 1);
    bfs_dict_set_int(d, "alpha", 2);
    bfs_dict_set_int(d, "mid", 3);
    bfs_dict_set_int(d, "beta", 4);
    bfs_dict_set_int(d, "alpha", 5); /* replace keeps position */
    bfs_dict_del(d, "mid");
    bfs_dict_set_int(d, "mid", 6); /* re-added goes last */
    is_int(bfs_dict_foreach(d, collect, &o), 0, "foreach returns 0 when fn does");
    is_str(o.buf, "zeta,alpha,beta,mid,", "insertion order kept across replace and delete");

    struct order o2 = {.stop_after = 2};
    is_int(bfs_dict_foreach(d, collect, &o2), 7, "foreach returns fn's non-zero value");
    is_str(o2.buf, "zeta,alpha,", "foreach stops at first non-zero");
    is_int(bfs_dict_foreach(NULL, collect, &o2), 0, "foreach on NULL");
    bfs_dict_unref(d);
}

static void test_many(void)
{
    struct bfs_dict *d = bfs_dict_new();
    char key[32], val[32];
    int bad = 0;

    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof(key), "key.%d", i);
        snprintf(val, sizeof(val), "v%d", i);
        bad += bfs_dict_set_str(d, key, val) != 0;
    }
    is_int(bad, 0, "5000 inserts");
    is_int(bfs_dict_count(d), 5000, "5000 keys");
    for (int i = 0; i < 5000; i += 2) {
        snprintf(key, sizeof(key), "key.%d", i);
        bad += bfs_dict_del(d, key) != 0;
    }
    is_int(bad, 0, "2500 deletes");
    for (int i = 0; i < 5000; i++) {
        const char *s;
        snprintf(key, sizeof(key), "key.%d", i);
        snprintf(val, sizeof(val), "v%d", i);
        int rc = bfs_dict_get_str(d, key, &s);
        if (i % 2 == 0)
            bad += rc != -ENOENT;
        else
            bad += rc != 0 || strcmp(s, val) != 0;
    }
    is_int(bad, 0, "lookups after deletes see exactly the odd keys");

    struct order o = {.stop_after = 1};
    bfs_dict_foreach(d, collect, &o);
    is_str(o.buf, "key.1,", "first remaining key in order");

    /* shrink below the index threshold and grow again */
    for (int i = 1; i < 4990; i += 2) {
        snprintf(key, sizeof(key), "key.%d", i);
        bad += bfs_dict_del(d, key) != 0;
    }
    is_int(bfs_dict_count(d), 5, "5 keys left");
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "new.%d", i);
        bad += bfs_dict_set_int(d, key, i) != 0;
    }
    int64_t v = -1;
    ok(bad == 0 && bfs_dict_get_int(d, "new.77", &v) == 0 && v == 77, "regrown dict works");
    ok(bfs_dict_has(d, "key.4999") && !bfs_dict_has(d, "key.4998"), "old keys still right");
    bfs_dict_unref(d);
}

static void test_copy_ref(void)
{
    struct bfs_dict *d = bfs_dict_new();
    const char *s;
    const void *b;
    size_t len;

    bfs_dict_set_str(d, "s", "str");
    bfs_dict_set_int(d, "i", 9);
    bfs_dict_set_bin(d, "b", "xy", 2);
    struct bfs_dict *c = bfs_dict_copy(d);
    ok(c && c != d, "copy is a new dict");
    bfs_dict_set_str(d, "s", "changed");
    ok(bfs_dict_get_str(c, "s", &s) == 0 && strcmp(s, "str") == 0, "copy is deep");
    ok(bfs_dict_get_bin(c, "b", &b, &len) == 0 && len == 2 && memcmp(b, "xy", 2) == 0,
       "bin copied");
    struct order o = {.stop_after = -1};
    bfs_dict_foreach(c, collect, &o);
    is_str(o.buf, "s,i,b,", "copy keeps order");
    ok(bfs_dict_copy(NULL) == NULL, "copy NULL -> NULL");

    ok(bfs_dict_ref(c) == c, "ref returns the dict");
    bfs_dict_unref(c);
    ok(bfs_dict_get_str(c, "s", &s) == 0, "still alive after ref+unref");
    bfs_dict_unref(c);
    ok(bfs_dict_ref(NULL) == NULL, "ref NULL");
    bfs_dict_unref(NULL);
    bfs_dict_unref(d);
}

static void *ref_storm(void *arg)
{
    struct bfs_dict *d = arg;
    for (int i = 0; i < 100000; i++) {
        bfs_dict_ref(d);
        bfs_dict_unref(d);
    }
    return NULL;
}

static void test_refs_threads(void)
{
    struct bfs_dict *d = bfs_dict_new();
    pthread_t t[4];
    const char *s;
    bfs_dict_set_str(d, "k", "v");
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, ref_storm, d);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    ok(bfs_dict_get_str(d, "k", &s) == 0 && strcmp(s, "v") == 0,
       "dict survives concurrent ref/unref");
    bfs_dict_unref(d); /* ASan/valgrind would flag a leak or double free */
}

int main(void)
{
    plan_lazy();
    test_types();
    test_replace_delete();
    test_order();
    test_many();
    test_copy_ref();
    test_refs_threads();
    return done_testing();
}
