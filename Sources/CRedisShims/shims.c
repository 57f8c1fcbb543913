#include "CRedisShims.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>

/* What is read from Redis is bounded before it is held whole (contract: "every
   entry, message and reply element read from Redis is at most 1 MiB, and a
   reply holds no more elements than its command asked for").

   hiredis 0.14 buffers a bulk string until all of it has arrived, and sizes an
   array from its header before any element arrives, with no limit of its own.
   So, per connection:
   - before each read, the bytes buffered and not yet parsed are checked: once
     they pass one element's limit (plus a read's worth), the reader is put in
     error and hiredis drops the connection through its own error path;
   - the reply object functions refuse a string over the limit and an array
     header of more elements than the command being answered asked for (the
     connection sets that before each reply; the reader reports out of
     memory: the same drop). */

#define GW_REDIS_READ_CHUNK (16 * 1024)

static redisReplyObjectFunctions *gw_default_functions;
static pthread_once_t gw_default_functions_once = PTHREAD_ONCE_INIT;

/* hiredis's default functions are static in hiredis.c: read off a reader it
   makes with them. */
static void gw_capture_default_functions(void) {
    redisReader *reader = redisReaderCreate();
    gw_default_functions = reader->fn;
    redisReaderFree(reader);
}

static void *gw_create_string(const redisReadTask *task, char *str, size_t len) {
    const gw_redis_bounds *bounds = task->privdata;
    if (bounds != NULL && len > bounds->max_element_bytes) return NULL;
    return gw_default_functions->createString(task, str, len);
}

static void *gw_create_array(const redisReadTask *task, int elements) {
    const gw_redis_bounds *bounds = task->privdata;
    if (bounds != NULL && elements > bounds->max_elements) return NULL;
    return gw_default_functions->createArray(task, elements);
}

static void *gw_create_integer(const redisReadTask *task, long long value) {
    return gw_default_functions->createInteger(task, value);
}

static void *gw_create_nil(const redisReadTask *task) {
    return gw_default_functions->createNil(task);
}

static void gw_free_object(void *reply) {
    gw_default_functions->freeObject(reply);
}

static redisReplyObjectFunctions gw_bounded_functions = {
    gw_create_string, gw_create_array, gw_create_integer, gw_create_nil, gw_free_object,
};

static void gw_bounded_read_event(int fd, short event, void *arg) {
    (void)fd; (void)event;
    redisLibeventEvents *e = (redisLibeventEvents *)arg;
    redisReader *reader = e->context->c.reader;
    const gw_redis_bounds *bounds = reader != NULL ? reader->privdata : NULL;
    if (bounds != NULL && reader->err == 0 && reader->len - reader->pos > bounds->max_element_bytes + GW_REDIS_READ_CHUNK) {
        /* redisAsyncHandleRead then fails the feed and disconnects with this. */
        reader->err = REDIS_ERR_PROTOCOL;
        snprintf(reader->errstr, sizeof(reader->errstr), "a reply element over %zu bytes was refused", bounds->max_element_bytes);
    }
    redisAsyncHandleRead(e->context);
}

int gw_redis_libevent_attach(struct redisAsyncContext *context, struct event_base *base, gw_redis_bounds *bounds) {
    redisReader *reader = context->c.reader;
    if (reader == NULL || reader->privdata != NULL || bounds == NULL) return REDIS_ERR;
    if (pthread_once(&gw_default_functions_once, gw_capture_default_functions) != 0 || gw_default_functions == NULL) return REDIS_ERR;
    if (redisLibeventAttach(context, base) != REDIS_OK) return REDIS_ERR;
    reader->fn = &gw_bounded_functions;
    reader->privdata = bounds;
    /* The adapter's read event, replaced by one that checks the buffer first. */
    redisLibeventEvents *events = context->ev.data;
    event_del(events->rev);
    event_free(events->rev);
    events->rev = event_new(base, context->c.fd, EV_READ, gw_bounded_read_event, events);
    event_add(events->rev, NULL);
    return REDIS_OK;
}
