/*
 * hello.c — a first libbrickfs program.
 *
 *     hello VOLFILE
 *
 * Connects to the volume described by the client volfile VOLFILE, creates
 * /hello.txt, writes a greeting, reads it back, lists the root directory
 * and prints the file's attributes. It uses nothing but the public header.
 *
 * Build (from an installed tree):
 *     cc -o hello hello.c -lbrickfs
 * In the source tree `make` builds it as build/examples/hello.
 *
 * Environment: BRICKFS_CONNECT_TIMEOUT (seconds to wait for the volume),
 * BRICKFS_LOG_LEVEL (library log level; messages go to stderr).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <brickfs/brickfs.h>

static const char greeting[] = "Hello from libbrickfs!\n";

static int die(const char *what)
{
    fprintf(stderr, "hello: %s: %s\n", what, strerror(errno));
    return 1;
}

/* Creates (or truncates) /hello.txt and writes the greeting. */
static int write_hello(brickfs_t *fs)
{
    brickfs_fd_t *fd = brickfs_creat(fs, "/hello.txt", 0644);
    if (!fd)
        return die("create /hello.txt");
    ssize_t n = brickfs_write(fd, greeting, strlen(greeting));
    if (n != (ssize_t)strlen(greeting)) {
        if (n >= 0)
            errno = EIO; /* a short write */
        die("write /hello.txt");
        brickfs_close(fd);
        return 1;
    }
    /* close reports errors of writes the bricks may have delayed */
    if (brickfs_close(fd) < 0)
        return die("close /hello.txt");
    return 0;
}

/* Reads /hello.txt back and checks it is what we wrote. */
static int read_hello(brickfs_t *fs)
{
    char buf[256];
    brickfs_fd_t *fd = brickfs_open(fs, "/hello.txt", O_RDONLY);
    if (!fd)
        return die("open /hello.txt");
    ssize_t n = brickfs_read(fd, buf, sizeof(buf) - 1);
    int saved = errno;
    brickfs_close(fd);
    errno = saved;
    if (n < 0)
        return die("read /hello.txt");
    buf[n] = 0;
    printf("read back: %s", buf);
    if ((size_t)n != strlen(greeting) || memcmp(buf, greeting, (size_t)n) != 0) {
        fprintf(stderr, "hello: /hello.txt does not hold what was written\n");
        return 1;
    }
    return 0;
}

/* Lists / with each entry's type and size. */
static int list_root(brickfs_t *fs)
{
    brickfs_dir_t *dir = brickfs_opendir(fs, "/");
    if (!dir)
        return die("opendir /");
    printf("listing of /:\n");
    struct dirent *de;
    struct stat st;
    errno = 0;
    while ((de = brickfs_readdirplus(dir, &st)) != NULL) {
        printf("  %-20s %s %8lld bytes\n", de->d_name, S_ISDIR(st.st_mode) ? "dir " : "file",
               (long long)st.st_size);
        errno = 0;
    }
    int saved = errno; /* 0 at the end of the directory, else the error */
    brickfs_closedir(dir);
    errno = saved;
    return saved ? die("readdir /") : 0;
}

static int print_stat(brickfs_t *fs)
{
    struct stat st;
    if (brickfs_stat(fs, "/hello.txt", &st) < 0)
        return die("stat /hello.txt");
    printf("/hello.txt: size %lld, mode %04o, uid %u, gid %u, links %lu, inode %llu\n",
           (long long)st.st_size, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
           (unsigned)st.st_gid, (unsigned long)st.st_nlink, (unsigned long long)st.st_ino);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: hello VOLFILE\n");
        return 2;
    }
    brickfs_t *fs = brickfs_new_from_volfile(argv[1]);
    if (!fs)
        return die(argv[1]);
    if (!getenv("BRICKFS_LOG_LEVEL"))
        brickfs_set_logging(fs, NULL, BRICKFS_LOG_WARNING);
    if (brickfs_init(fs) < 0) {
        die("cannot reach the volume");
        brickfs_fini(fs);
        return 1;
    }
    int rc = write_hello(fs) || read_hello(fs) || list_root(fs) || print_stat(fs);
    brickfs_fini(fs);
    return rc;
}
