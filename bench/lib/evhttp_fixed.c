/*
 * The evhttp front's ceiling: libevent's evhttp on one thread answering
 * every request with a fixed body, as the gateway's front does, with none of
 * the gateway's work. bench/run compiles it with cc and measures it beside
 * nginx, so "what stands between the gateway and nginx" has a number.
 *
 *   evhttp_fixed PORT BODY_FILE
 */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>

static char *body;
static long body_length;

static void answer(struct evhttp_request *request, void *unused) {
    (void)unused;
    evhttp_add_header(evhttp_request_get_output_headers(request), "Content-Type", "application/json");
    evbuffer_add(evhttp_request_get_output_buffer(request), body, (size_t)body_length);
    evhttp_send_reply(request, 200, "OK", NULL);
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: evhttp_fixed PORT BODY_FILE\n"); return 2; }
    FILE *file = fopen(argv[2], "rb");
    if (!file) { perror(argv[2]); return 1; }
    fseek(file, 0, SEEK_END);
    body_length = ftell(file);
    rewind(file);
    body = malloc((size_t)body_length);
    if (!body || fread(body, 1, (size_t)body_length, file) != (size_t)body_length) { perror("read"); return 1; }
    fclose(file);
    struct event_base *base = event_base_new();
    struct evhttp *http = evhttp_new(base);
    evhttp_set_gencb(http, answer, NULL);
    if (!evhttp_bind_socket_with_handle(http, "127.0.0.1", (ev_uint16_t)atoi(argv[1]))) { perror("bind"); return 1; }
    event_base_dispatch(base);
    return 0;
}
