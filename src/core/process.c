/*
 * process.c — the resources one process shares among its graphs: an event
 * loop running on its own thread and a pool of workers for blocking work.
 */
#include <stdlib.h>

#include "core/event.h"
#include "core/graph.h"

struct bfs_proc *bfs_proc_new(const char *program, int nworkers)
{
    struct bfs_proc *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->program = program;
    p->loop = bfs_loop_new();
    if (!p->loop || bfs_loop_start(p->loop, "bfs-loop") < 0)
        goto fail;
    if (nworkers > 0 && !(p->workers = bfs_workers_new(nworkers, "bfs-work")))
        goto fail;
    return p;
fail:
    bfs_log(program, BFS_LOG_ERROR, "cannot start the event loop or worker pool");
    bfs_proc_free(p);
    return NULL;
}

void bfs_proc_free(struct bfs_proc *p)
{
    if (!p)
        return;
    if (p->workers)
        bfs_workers_free(p->workers);
    if (p->loop)
        bfs_loop_free(p->loop);
    free(p);
}
