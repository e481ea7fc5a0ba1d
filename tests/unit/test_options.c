/*
 * test_options.c — option parsers and validation messages (options.h).
 */
#include <errno.h>
#include <string.h>

#include "../lib/tap.h"
#include "core/options.h"

static const char *const modes[] = {"none", "auto", "fixed", NULL};

static const struct bfs_option_desc table[] = {
    {.key = "name", .type = BFS_OPT_STR},
    {.key = "port", .type = BFS_OPT_INT, .min = 1, .max = 65535},
    {.key = "any-int", .type = BFS_OPT_INT},
    {.key = "cache-size", .type = BFS_OPT_SIZE, .min = 4096, .max = 1LL << 30},
    {.key = "any-size", .type = BFS_OPT_SIZE},
    {.key = "enabled", .type = BFS_OPT_BOOL},
    {.key = "mode", .type = BFS_OPT_ENUM, .values = modes},
    {.key = "directory", .type = BFS_OPT_PATH},
    {.key = "timeout", .type = BFS_OPT_TIME, .min = 1, .max = 3600},
    {.key = "min-free", .type = BFS_OPT_PERCENT},
    {.key = "auth.allow", .type = BFS_OPT_ADDRLIST},
    {.key = NULL},
};

static const struct bfs_option_desc *opt(const char *key)
{
    return bfs_option_find(table, key);
}

/* Validates and checks both the result and the reason text. */
static void check(const char *key, const char *value, int want_rc, const char *want_why)
{
    char why[256];
    int rc = bfs_option_validate(opt(key), value, why, sizeof(why));
    if (want_rc == 0) {
        is_int(rc, 0, "%s = '%s' accepted", key, value);
    } else {
        is_int(rc, -EINVAL, "%s = '%s' refused", key, value);
        if (want_why)
            is_str(why, want_why, "%s = '%s' reason", key, value);
    }
}

static void test_find_and_names(void)
{
    ok(opt("port") == &table[1], "find by key");
    ok(opt("nope") == NULL, "unknown key -> NULL");
    ok(bfs_option_find(NULL, "port") == NULL, "NULL table");
    is_str(bfs_opt_type_name(BFS_OPT_INT), "integer", "type name int");
    is_str(bfs_opt_type_name(BFS_OPT_SIZE), "size", "type name size");
    is_str(bfs_opt_type_name(BFS_OPT_BOOL), "bool", "type name bool");
    is_str(bfs_opt_type_name(BFS_OPT_ADDRLIST), "address-list", "type name addrlist");
    is_str(bfs_opt_type_name((enum bfs_opt_type)99), "unknown", "type name of garbage");
}

static void test_parsers(void)
{
    bool b;
    uint64_t sz;
    int64_t i;

    static const char *yes[] = {"on", "yes", "true", "enable", "1", "ON", "True"};
    static const char *no[] = {"off", "no", "false", "disable", "0", "OFF", "Disable"};
    for (size_t k = 0; k < sizeof(yes) / sizeof(yes[0]); k++) {
        b = false;
        ok(bfs_parse_bool(yes[k], &b) == 0 && b, "bool '%s' is true", yes[k]);
        b = true;
        ok(bfs_parse_bool(no[k], &b) == 0 && !b, "bool '%s' is false", no[k]);
    }
    is_int(bfs_parse_bool("maybe", &b), -EINVAL, "bool 'maybe' refused");
    is_int(bfs_parse_bool("", &b), -EINVAL, "bool '' refused");
    is_int(bfs_parse_bool("2", &b), -EINVAL, "bool '2' refused");

    struct {
        const char *s;
        uint64_t v;
    } sizes[] = {
        {"0", 0},
        {"4096", 4096},
        {"1K", 1024},
        {"1kb", 1024},
        {"64KB", 65536},
        {"1KiB", 1024},
        {"2M", 2u << 20},
        {"2MB", 2u << 20},
        {"3G", 3ull << 30},
        {"3gb", 3ull << 30},
        {"1T", 1ull << 40},
        {"1TB", 1ull << 40},
        {"10 MB", 10u << 20},
        {"7B", 7},
        {"16777215TB", 16777215ull << 40},
    };
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        sz = 1;
        ok(bfs_parse_size(sizes[k].s, &sz) == 0 && sz == sizes[k].v, "size '%s' = %llu",
           sizes[k].s, (unsigned long long)sizes[k].v);
    }
    static const char *badsz[] = {"", "K", "-1", "1.5G", "1X", "1 K B", "16777216TB",
                                  "99999999999999999999", " 1", "1KBB"};
    for (size_t k = 0; k < sizeof(badsz) / sizeof(badsz[0]); k++)
        is_int(bfs_parse_size(badsz[k], &sz), -EINVAL, "size '%s' refused", badsz[k]);

    ok(bfs_parse_int("42", &i) == 0 && i == 42, "int 42");
    ok(bfs_parse_int("-7", &i) == 0 && i == -7, "int -7");
    ok(bfs_parse_int("9223372036854775807", &i) == 0 && i == INT64_MAX, "int max");
    is_int(bfs_parse_int("9223372036854775808", &i), -EINVAL, "int overflow refused");
    is_int(bfs_parse_int("12abc", &i), -EINVAL, "trailing junk refused");
    is_int(bfs_parse_int("", &i), -EINVAL, "empty refused");
    is_int(bfs_parse_int(" 1", &i), -EINVAL, "leading space refused");
    is_int(bfs_parse_int("-", &i), -EINVAL, "lone sign refused");
}

static void test_validate(void)
{
    check("name", "anything at all", 0, NULL);
    check("port", "24007", 0, NULL);
    check("port", "1", 0, NULL);
    check("port", "65535", 0, NULL);
    check("port", "abc", -EINVAL, "value 'abc' is not an integer");
    check("port", "70000", -EINVAL, "value 70000 is out of range 1..65535");
    check("port", "0", -EINVAL, "value 0 is out of range 1..65535");
    check("any-int", "-99999999", 0, NULL); /* min == max == 0: no range */

    check("cache-size", "32MB", 0, NULL);
    check("cache-size", "4KB", 0, NULL);
    check("cache-size", "2GB", -EINVAL,
          "value 2GB (2147483648 bytes) is out of range 4096..1073741824 bytes");
    check("cache-size", "lots", -EINVAL,
          "value 'lots' is not a size (a number with an optional unit K, KB, M, MB, G, GB, "
          "T or TB)");
    check("any-size", "16000000TB", 0, NULL);

    check("enabled", "on", 0, NULL);
    check("enabled", "Disable", 0, NULL);
    check("enabled", "perhaps", -EINVAL,
          "value 'perhaps' is not a boolean (on/off, yes/no, true/false, enable/disable, 1/0)");

    check("mode", "auto", 0, NULL);
    check("mode", "fixed", 0, NULL);
    check("mode", "Auto", -EINVAL, "must be one of: none, auto, fixed");
    check("mode", "", -EINVAL, "must be one of: none, auto, fixed");

    check("directory", "/data/brick1", 0, NULL);
    check("directory", "data/brick1", -EINVAL, "value 'data/brick1' is not an absolute path");
    check("directory", "", -EINVAL, "value '' is not an absolute path");

    check("timeout", "42", 0, NULL);
    check("timeout", "0", -EINVAL, "value 0 is out of range 1..3600 (seconds)");
    check("timeout", "42s", -EINVAL, "value '42s' is not an integer (seconds)");

    check("min-free", "10", 0, NULL);
    check("min-free", "10%", 0, NULL);
    check("min-free", "0", 0, NULL);
    check("min-free", "100%", 0, NULL);
    check("min-free", "12.5%", 0, NULL);
    check("min-free", "101%", -EINVAL, "value 101% is out of range 0..100%");
    check("min-free", "-1", -EINVAL, "value '-1' is not a percentage");
    check("min-free", "ten", -EINVAL, "value 'ten' is not a percentage");
    check("min-free", "10%%", -EINVAL, NULL);
    check("min-free", "nan", -EINVAL, NULL);

    check("auth.allow", "127.0.0.1", 0, NULL);
    check("auth.allow", "*", 0, NULL);
    check("auth.allow", "127.0.0.*", 0, NULL);
    check("auth.allow", "10.0.0.0/8, 192.168.1.5,::1", 0, NULL);
    check("auth.allow", "fe80::/10,2001:db8::1", 0, NULL);
    check("auth.allow", "fe80::*", 0, NULL);
    check("auth.allow", "10.0.0.0/33", -EINVAL,
          "'10.0.0.0/33' is not an IP address, CIDR (ADDR/BITS) or glob such as 127.0.0.*");
    check("auth.allow", "::/129", -EINVAL, NULL);
    check("auth.allow", "10.0.0.0/", -EINVAL, NULL);
    check("auth.allow", "10.0.0.0/+8", -EINVAL, NULL);
    check("auth.allow", "300.1.1.1", -EINVAL, NULL);
    check("auth.allow", "host.example.com", -EINVAL, NULL);
    check("auth.allow", "192.168.l.*", -EINVAL, NULL);
    check("auth.allow", "127.0.0.*/8", -EINVAL, NULL);
    check("auth.allow", "1.2.3.4,,5.6.7.8", -EINVAL,
          "value '1.2.3.4,,5.6.7.8' has an empty entry in its address list");
    check("auth.allow", "1.2.3.4,", -EINVAL, NULL);
    check("auth.allow", "", -EINVAL, NULL);

    char why[64];
    is_int(bfs_option_validate(opt("port"), NULL, why, sizeof(why)), -EINVAL, "NULL value");
    is_int(bfs_option_validate(NULL, "1", why, sizeof(why)), -EINVAL, "NULL descriptor");
    is_int(bfs_option_validate(opt("port"), "x", NULL, 0), -EINVAL, "why may be NULL");
    char tiny[8];
    is_int(bfs_option_validate(opt("mode"), "x", tiny, sizeof(tiny)), -EINVAL, "tiny buffer");
    is_int(strlen(tiny), 7, "reason truncated to the buffer");
    is_int(bfs_option_validate(opt("port"), "80", why, sizeof(why)), 0, "valid");
    is_str(why, "", "reason empty on success");
}

int main(void)
{
    plan_lazy();
    test_find_and_names();
    test_parsers();
    test_validate();
    return done_testing();
}
