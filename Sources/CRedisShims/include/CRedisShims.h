#ifndef CREDISSHIMS_H
#define CREDISSHIMS_H

/* Forward declarations only: the Swift side sees these types through the
   CHiredis and CLibevent modules. */
struct redisAsyncContext;
struct event_base;

/* hiredis's libevent adapter (hiredis/adapters/libevent.h) is a header of
   static functions; this compiles it once and makes the attach callable.
   Returns 0 (REDIS_OK) or -1 (REDIS_ERR: something already attached). */
int gw_redis_libevent_attach(struct redisAsyncContext *context, struct event_base *base);

#endif
