/*
 * listing.h — a directory fd's listing as a cluster translator serves it
 * from one child (replicate-read.c, disperse-read.c): the child its
 * readdirs stick to (the offsets are that brick's) and where the listing
 * ended. The readdir that only confirms the end (the kernel asks once more
 * at the end offset) needs no child: the one that served the listing may
 * be gone by then (stopped, replaced), and the listing is complete.
 *
 * struct bfs_listing lives in the translator's fd context, under that
 * context's lock (passed in).
 */
#ifndef BFS_XL_LIB_LISTING_H
#define BFS_XL_LIB_LISTING_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/xlator.h"

struct bfs_listing {
    int child;        /* -1 until the first readdir (bfs_listing_init) */
    bool end;         /* the last reply was the end (end-of-directory, or no entry) */
    uint64_t end_off; /* where that reply said to continue */
};

void bfs_listing_init(struct bfs_listing *l);
/* A readdir at off answered by child with rep (NULL: no reply body):
 * the first one (off 0) picks the child; each tells whether it ended. */
void bfs_listing_note(pthread_mutex_t *lock, struct bfs_listing *l, int child, uint64_t off,
                      const struct bfs_readdir_rep *rep);
/* Is a readdir at off (not 0) the one that confirms the listing's end? */
bool bfs_listing_at_end(pthread_mutex_t *lock, const struct bfs_listing *l, uint64_t off);

#endif
