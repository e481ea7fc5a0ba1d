/*
 * zombie_leader.c — a process whose main thread is gone while another of its
 * threads still runs and holds a lock: what a multithreaded daemon killed
 * with SIGKILL looks like for a moment (its leader is a zombie, state Z in
 * /proc/PID/stat, until its last thread has exited and closed its files).
 * Used by tests/integration/000-harness.t to check that bfs_pid_alive does
 * not call such a process gone while it still holds its files.
 *
 *   zombie_leader LOCKFILE SECONDS
 *
 * flock()s LOCKFILE, then the main thread exits (pthread_exit) and a second
 * thread sleeps SECONDS before the process exits and so drops the lock.
 * Exit status 2 for usage errors, 1 when the file cannot be locked.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

static void *sleeper(void *arg)
{
    sleep((unsigned)(long)arg);
    exit(0);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: zombie_leader LOCKFILE SECONDS\n");
        return 2;
    }
    int fd = open(argv[1], O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
        perror(argv[1]);
        return 1;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, sleeper, (void *)(long)atoi(argv[2])) != 0)
        return 1;
    pthread_exit(NULL); /* the leader goes; the process and its lock stay */
}
