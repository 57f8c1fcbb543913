#ifndef CREDISSHIMS_H
#define CREDISSHIMS_H

#include <stddef.h>

/* Forward declarations only: the Swift side sees these types through the
   CHiredis and CLibevent modules. */
struct redisAsyncContext;
struct event_base;

/* The most bytes of one reply element, and the most elements of one array,
   read from Redis; anything larger drops the connection unread. */
#define GW_REDIS_MAX_ELEMENT_BYTES (1024 * 1024)
#define GW_REDIS_MAX_ELEMENTS 20000

/* What one connection reads, at most: an element's bytes, and the elements
   of the reply being read. The connection owns it (it outlives every context
   it attaches) and sets max_elements before each reply to what the command
   it answers asked for, so a reply of more elements is refused from its
   header, before any of them is held. */
typedef struct gw_redis_bounds {
    size_t max_element_bytes;
    int max_elements;
} gw_redis_bounds;

/* hiredis's libevent adapter (hiredis/adapters/libevent.h) is a header of
   static functions; this compiles it once and makes the attach callable,
   with the reads bounded by `bounds` (see shims.c).
   Returns 0 (REDIS_OK) or -1 (REDIS_ERR: something already attached). */
int gw_redis_libevent_attach(struct redisAsyncContext *context, struct event_base *base, gw_redis_bounds *bounds);

#endif
