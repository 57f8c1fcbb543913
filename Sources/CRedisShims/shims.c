#include "CRedisShims.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The reply objects are made here, as hiredis 0.14 makes them (hiredis.c's
   createStringObject and friends, whose free is freeReplyObject), with two
   differences:
   - the bounds above;
   - the replies every shared-tier call reads many of are not allocated: a
     nil (a key with no entry), the statuses OK and QUEUED (MULTI, SET, each
     command a transaction queues) and the integers 0 and 1 (flags) are
     static objects, read-only, shared by every connection and loop; the
     free below skips them. Two allocations (object and text) per QUEUED
     and one per nil is what a 35-key transaction cost before.
   hiredis frees every reply with the reader's freeObject (async.c, read.c),
   never with freeReplyObject, so no static object reaches free(). */

static char gw_ok_text[] = "OK";
static char gw_queued_text[] = "QUEUED";
static redisReply gw_static_nil = { .type = REDIS_REPLY_NIL };
static redisReply gw_static_ok = { .type = REDIS_REPLY_STATUS, .len = 2, .str = gw_ok_text };
static redisReply gw_static_queued = { .type = REDIS_REPLY_STATUS, .len = 6, .str = gw_queued_text };
static redisReply gw_static_zero = { .type = REDIS_REPLY_INTEGER, .integer = 0 };
static redisReply gw_static_one = { .type = REDIS_REPLY_INTEGER, .integer = 1 };

static int gw_is_static(const redisReply *reply) {
    return reply == &gw_static_nil || reply == &gw_static_ok || reply == &gw_static_queued ||
           reply == &gw_static_zero || reply == &gw_static_one;
}

/* Puts `reply` at its place in the array being read, if any. */
static void *gw_placed(const redisReadTask *task, redisReply *reply) {
    if (reply != NULL && task->parent != NULL) {
        redisReply *parent = task->parent->obj;
        parent->element[task->idx] = reply;
    }
    return reply;
}

static void gw_free_object(void *object) {
    redisReply *reply = object;
    if (reply == NULL || gw_is_static(reply)) return;
    switch (reply->type) {
    case REDIS_REPLY_ARRAY:
        if (reply->element != NULL) {
            /* Elements not read yet (a reply refused half-way) are NULL. */
            for (size_t index = 0; index < reply->elements; index++) gw_free_object(reply->element[index]);
            free(reply->element);
        }
        break;
    case REDIS_REPLY_ERROR:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_STRING:
        free(reply->str);
        break;
    default:
        break;
    }
    free(reply);
}

static void *gw_create_string(const redisReadTask *task, char *str, size_t len) {
    const gw_redis_bounds *bounds = task->privdata;
    if (bounds != NULL && len > bounds->max_element_bytes) return NULL;
    if (task->type == REDIS_REPLY_STATUS) {
        if (len == 2 && memcmp(str, "OK", 2) == 0) return gw_placed(task, &gw_static_ok);
        if (len == 6 && memcmp(str, "QUEUED", 6) == 0) return gw_placed(task, &gw_static_queued);
    }
    redisReply *reply = calloc(1, sizeof(*reply));
    if (reply == NULL) return NULL;
    char *text = malloc(len + 1);
    if (text == NULL) {
        free(reply);
        return NULL;
    }
    memcpy(text, str, len);
    text[len] = '\0';
    reply->type = task->type;
    reply->str = text;
    reply->len = len;
    return gw_placed(task, reply);
}

static void *gw_create_array(const redisReadTask *task, int elements) {
    const gw_redis_bounds *bounds = task->privdata;
    if (bounds != NULL && elements > bounds->max_elements) return NULL;
    redisReply *reply = calloc(1, sizeof(*reply));
    if (reply == NULL) return NULL;
    reply->type = REDIS_REPLY_ARRAY;
    if (elements > 0) {
        reply->element = calloc((size_t)elements, sizeof(redisReply *));
        if (reply->element == NULL) {
            free(reply);
            return NULL;
        }
    }
    reply->elements = elements > 0 ? (size_t)elements : 0;
    return gw_placed(task, reply);
}

static void *gw_create_integer(const redisReadTask *task, long long value) {
    if (value == 0) return gw_placed(task, &gw_static_zero);
    if (value == 1) return gw_placed(task, &gw_static_one);
    redisReply *reply = calloc(1, sizeof(*reply));
    if (reply == NULL) return NULL;
    reply->type = REDIS_REPLY_INTEGER;
    reply->integer = value;
    return gw_placed(task, reply);
}

static void *gw_create_nil(const redisReadTask *task) {
    return gw_placed(task, &gw_static_nil);
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
    if (redisLibeventAttach(context, base) != REDIS_OK) return REDIS_ERR;
    reader->fn = &gw_bounded_functions;
    reader->privdata = bounds;
    /* The adapter's read event, replaced by one that checks the buffer first,
       and persistent: the adapter's is not, so each reply cost an epoll_ctl
       (the event removed as it fires, then added again by hiredis after the
       read). hiredis's add of a persistent event already added changes
       nothing; its delete (on disconnect) still removes it. */
    redisLibeventEvents *events = context->ev.data;
    event_del(events->rev);
    event_free(events->rev);
    events->rev = event_new(base, context->c.fd, EV_READ | EV_PERSIST, gw_bounded_read_event, events);
    event_add(events->rev, NULL);
    return REDIS_OK;
}
