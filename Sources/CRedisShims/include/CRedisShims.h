#ifndef CREDISSHIMS_H
#define CREDISSHIMS_H

/* Forward declarations only: the Swift side sees these types through the
   CHiredis and CLibevent modules. */
struct redisAsyncContext;
struct event_base;

/* The most bytes of one reply element, and the most elements of one array,
   read from Redis; anything larger drops the connection unread. */
#define GW_REDIS_MAX_ELEMENT_BYTES (1024 * 1024)
#define GW_REDIS_MAX_ELEMENTS 20000

/* hiredis's libevent adapter (hiredis/adapters/libevent.h) is a header of
   static functions; this compiles it once and makes the attach callable,
   with the reads bounded (see shims.c).
   Returns 0 (REDIS_OK) or -1 (REDIS_ERR: something already attached). */
int gw_redis_libevent_attach(struct redisAsyncContext *context, struct event_base *base);

#endif
