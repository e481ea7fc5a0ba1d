/*
 * listing.c — where a directory fd's listing stands (listing.h).
 */
#include "listing.h"

void bfs_listing_init(struct bfs_listing *l)
{
    l->child = -1;
    l->end = false;
    l->end_off = 0;
}

void bfs_listing_note(pthread_mutex_t *lock, struct bfs_listing *l, int child, uint64_t off,
                      const struct bfs_readdir_rep *rep)
{
    uint32_t n = rep ? rep->entries.count : 0;
    pthread_mutex_lock(lock);
    if (off == 0)
        l->child = child;
    l->end = !rep || rep->eod || !n;
    l->end_off = n ? rep->entries.v[n - 1].d_off : off;
    pthread_mutex_unlock(lock);
}

bool bfs_listing_at_end(pthread_mutex_t *lock, const struct bfs_listing *l, uint64_t off)
{
    if (off == 0)
        return false;
    pthread_mutex_lock(lock);
    bool end = l->end && l->end_off == off;
    pthread_mutex_unlock(lock);
    return end;
}
