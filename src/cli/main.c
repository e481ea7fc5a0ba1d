/*
 * main.c — the brickfs command line: global options anywhere on the line
 * (--server HOST[:PORT], --json, --yes, --help), then a command. Every
 * command is one or two REST calls to brickfsd (docs/API.md).
 *
 * Exit status: 0 success, 1 an error from brickfsd or the system (one line
 * on stderr), 2 a usage error.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "cli/cli.h"

static const char usage[] =
    "usage: brickfs [--server HOST[:PORT]] [--json] [--yes] COMMAND ...\n"
    "\n"
    "Commands:\n"
    "  volume create NAME [replica N [arbiter 1]] [disperse N | disperse-data D] [redundancy R]\n"
    "                HOST:/DIR... [force]\n"
    "  volume start NAME [force]      volume stop NAME           volume delete NAME\n"
    "  volume info [NAME]             volume list                volume status [NAME]\n"
    "  volume set NAME KEY VALUE      volume get NAME KEY|all    volume reset NAME [KEY]\n"
    "  volume set help\n"
    "  peer probe HOST[:PORT]         peer detach HOST [force]   peer status\n"
    "  pool list\n"
    "  volume heal NAME [info [summary|split-brain] | statistics | progress]\n"
    "  volume heal NAME split-brain {bigger-file FILE | latest-mtime FILE | source-brick HOST:/DIR [FILE]}\n"
    "\n"
    "Global options (anywhere on the line):\n"
    "  --server HOST[:PORT]  the brickfsd to talk to [$BRICKFS_SERVER, 127.0.0.1:24100]\n"
    "  --json                print brickfsd's JSON answer as it is\n"
    "  --yes                 do not ask for confirmation (stop, delete)\n"
    "  --help                this text; 'brickfs volume --help' and 'brickfs volume CMD --help'\n"
    "                        describe the volume commands\n";

int cli_fail(int code, const char *what, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "brickfs: %s: ", what);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

static void set_server(struct cli *c, const char *s)
{
    if (strchr(s, ':'))
        snprintf(c->server, sizeof(c->server), "%s", s);
    else
        snprintf(c->server, sizeof(c->server), "%s:%d", s, CLI_DEFAULT_PORT);
}

/* Takes the global options out of argv (in place); returns the new argc,
 * or -1 on a usage error. *help is set by --help / -h. */
static int globals(struct cli *c, int argc, char **argv, bool *help)
{
    int out = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            c->json = true;
        } else if (strcmp(a, "--yes") == 0 || strcmp(a, "-y") == 0) {
            c->yes = true;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *help = true;
        } else if (strcmp(a, "--server") == 0) {
            if (i + 1 >= argc)
                return cli_fail(-1, "usage", "--server needs HOST[:PORT]");
            set_server(c, argv[++i]);
        } else if (strncmp(a, "--server=", 9) == 0) {
            set_server(c, a + 9);
        } else if (a[0] == '-' && a[1] == '-') {
            return cli_fail(-1, "usage", "unknown option '%s' (brickfs --help)", a);
        } else {
            argv[out++] = argv[i];
        }
    }
    argv[out] = NULL;
    return out;
}

int main(int argc, char **argv)
{
    struct cli c = {0};
    bool help = false;
    const char *env = getenv("BRICKFS_SERVER");
    set_server(&c, env && *env ? env : "127.0.0.1");
    argc = globals(&c, argc, argv, &help);
    if (argc < 0)
        return CLI_USAGE;
    if (argc < 2) {
        fputs(usage, help ? stdout : stderr);
        return help ? CLI_OK : CLI_USAGE;
    }
    bool pool = strcmp(argv[1], "peer") == 0 || strcmp(argv[1], "pool") == 0;
    if (strcmp(argv[1], "volume") != 0 && !pool) {
        if (strcmp(argv[1], "help") == 0) {
            fputs(usage, stdout);
            return CLI_OK;
        }
        return cli_fail(CLI_USAGE, "usage", "unknown command '%s' (brickfs --help)", argv[1]);
    }
    if (help) { /* volume [CMD] --help */
        argv[argc++] = (char *)"--help";
        argv[argc] = NULL;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = strcmp(argv[1], "peer") == 0   ? cli_peer(&c, argc - 1, argv + 1)
             : strcmp(argv[1], "pool") == 0 ? cli_pool(&c, argc - 1, argv + 1)
                                            : cli_volume(&c, argc - 1, argv + 1);
    curl_global_cleanup();
    return rc;
}
