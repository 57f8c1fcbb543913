#include "CRedisShims.h"
#include <stdlib.h>
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>

int gw_redis_libevent_attach(struct redisAsyncContext *context, struct event_base *base) {
    return redisLibeventAttach(context, base);
}
