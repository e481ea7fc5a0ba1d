/*
 * pl-list.h — a minimal intrusive doubly linked list for features/locks.
 *
 * A list head is a struct pl_list whose next/prev point to itself when
 * empty; elements embed a struct pl_list and are found back with
 * pl_entry(). Nothing here allocates; the owner of an element frees it
 * after unlinking it.
 */
#ifndef BFS_XL_LOCKS_LIST_H
#define BFS_XL_LOCKS_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct pl_list {
    struct pl_list *next, *prev;
};

#define pl_entry(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

/* Iterate where the body may unlink (and free) the current element. */
#define pl_foreach_safe(pos, tmp, head)                                                      \
    for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head);                       \
         (pos) = (tmp), (tmp) = (pos)->next)

#define pl_foreach(pos, head) for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)

static inline void pl_list_init(struct pl_list *h)
{
    h->next = h->prev = h;
}

static inline bool pl_list_empty(const struct pl_list *h)
{
    return h->next == h;
}

/* Inserts n right before pos (at the tail when pos is the head). */
static inline void pl_list_insert_before(struct pl_list *pos, struct pl_list *n)
{
    n->prev = pos->prev;
    n->next = pos;
    pos->prev->next = n;
    pos->prev = n;
}

static inline void pl_list_add_tail(struct pl_list *h, struct pl_list *n)
{
    pl_list_insert_before(h, n);
}

static inline void pl_list_del(struct pl_list *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->next = n->prev = n;
}

/* Moves every element of from to the tail of to; from ends empty. */
static inline void pl_list_splice_tail(struct pl_list *to, struct pl_list *from)
{
    if (pl_list_empty(from))
        return;
    from->next->prev = to->prev;
    to->prev->next = from->next;
    from->prev->next = to;
    to->prev = from->prev;
    pl_list_init(from);
}

#endif
