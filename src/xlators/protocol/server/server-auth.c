/*
 * server-auth.c — auth.allow / auth.reject: may this peer address connect?
 *
 * A list is what the option validator accepts (options.c): comma-separated
 * entries, each an address (compared as an address, so "::1" and
 * "0:0::1" are equal), a CIDR (ADDR/BITS) or a glob matched textually
 * against the address ("127.0.0.*", "*"), as GlusterFS does. An IPv4
 * client seen through an IPv6 socket (::ffff:a.b.c.d) is matched as the
 * IPv4 address. A peer matching auth.reject is refused even when
 * auth.allow matches it too.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server.h"

void srv_peer_ip(const char *peer, char *ip, size_t size)
{
    const char *start = peer, *end;
    if (*peer == '[') {
        start = peer + 1;
        end = strchr(start, ']');
    } else {
        end = strrchr(peer, ':');
    }
    size_t n = end ? (size_t)(end - start) : strlen(start);
    if (n >= size)
        n = size - 1;
    memcpy(ip, start, n);
    ip[n] = '\0';
    if (strncasecmp(ip, "::ffff:", 7) == 0 && strchr(ip + 7, '.'))
        memmove(ip, ip + 7, strlen(ip + 7) + 1);
}

/* Parses an address into 16 bytes (IPv4 as ::ffff:a.b.c.d); *bits is
 * the address's width. */
static bool parse_addr(const char *s, unsigned char out[16], int *bits)
{
    unsigned char v4[4];
    if (inet_pton(AF_INET, s, v4) == 1) {
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        memcpy(out + 12, v4, 4);
        *bits = 32;
        return true;
    }
    if (inet_pton(AF_INET6, s, out) == 1) {
        *bits = 128;
        return true;
    }
    return false;
}

static bool prefix_eq(const unsigned char *a, const unsigned char *b, int bits)
{
    int bytes = bits / 8, rest = bits % 8;
    if (memcmp(a, b, (size_t)bytes) != 0)
        return false;
    if (!rest)
        return true;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return (a[bytes] & mask) == (b[bytes] & mask);
}

static bool entry_matches(const char *entry, const char *ip)
{
    if (strchr(entry, '*') || strchr(entry, '?'))
        return fnmatch(entry, ip, 0) == 0;
    unsigned char want[16], got[16];
    int wbits, gbits;
    if (!parse_addr(ip, got, &gbits))
        return false;
    const char *slash = strchr(entry, '/');
    if (!slash)
        return parse_addr(entry, want, &wbits) && wbits == gbits && memcmp(want, got, 16) == 0;
    char addr[64];
    size_t n = (size_t)(slash - entry);
    if (n >= sizeof(addr))
        return false;
    memcpy(addr, entry, n);
    addr[n] = '\0';
    int prefix = atoi(slash + 1);
    if (!parse_addr(addr, want, &wbits) || wbits != gbits || prefix < 0 || prefix > wbits)
        return false;
    int skip = wbits == 32 ? 96 : 0; /* compare IPv4 prefixes past the ::ffff: part */
    return prefix_eq(want, got, skip + prefix);
}

static bool list_matches(const char *list, const char *ip)
{
    if (!list)
        return false;
    char entry[256];
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        while (n && isspace((unsigned char)*p)) {
            p++;
            n--;
        }
        while (n && isspace((unsigned char)p[n - 1]))
            n--;
        if (n && n < sizeof(entry)) {
            memcpy(entry, p, n);
            entry[n] = '\0';
            if (entry_matches(entry, ip))
                return true;
        }
        if (!comma)
            return false;
        p = comma + 1;
    }
}

int srv_auth_check(const char *allow, const char *reject, const char *ip)
{
    if (list_matches(reject, ip))
        return -EACCES;
    return list_matches(allow, ip) ? 0 : -EACCES;
}
