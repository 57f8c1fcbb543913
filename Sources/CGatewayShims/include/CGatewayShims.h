#ifndef CGATEWAYSHIMS_H
#define CGATEWAYSHIMS_H

/*
 * Real functions for what Swift cannot import (macros, anonymous TAILQ
 * members) and for socket set-up that is clearer in C. Every function is
 * prefixed `gw_` and does one thing; the Swift layer in EventTransport is the
 * only caller.
 */

#include <stddef.h>
#include <stdint.h>

/*
 * Forward declarations only: including the libevent or OpenSSL headers here
 * would define their types in a second Clang module, which conflicts with the
 * CLibevent and COpenSSL system-library modules. The .c file includes them.
 */
struct ssl_st;
struct ssl_ctx_st;
struct evkeyval;
struct evkeyvalq;
struct bufferevent;

/* SSL_set_tlsext_host_name is a macro over SSL_ctrl. Returns 1 on success. */
int gw_ssl_set_sni_host_name(struct ssl_st *ssl, const char *host_name);

/* SSL_CTX_set_min_proto_version is a macro: pin TLS 1.2 as the floor. */
int gw_ssl_ctx_set_min_tls12(struct ssl_ctx_st *ctx);

/* SSL_CTX_set_mode / SSL_CTX_set_options are macros. */
void gw_ssl_ctx_harden(struct ssl_ctx_st *ctx);

/*
 * Runs a connected bufferevent's write event in this loop turn, as if its
 * socket had reported writable: an OpenSSL bufferevent then writes what was
 * just added to its output now, and its add and delete of write interest
 * fall in the same turn, so epoll's changelist hears neither. Without it,
 * each request costs two epoll_ctl calls and waits a loop turn. The event
 * lives in struct bufferevent (event2/bufferevent_struct.h).
 */
void gw_bufferevent_write_soon(struct bufferevent *bev);

/*
 * Runs a connected OpenSSL bufferevent's read event in this loop turn, as if
 * its socket had reported readable. With OpenSSL's read-ahead on, one read
 * can take several TLS records off the socket, and libevent 2.1 only asks
 * SSL_pending (the rest of the record being read) before it stops reading:
 * a second record left in OpenSSL's buffer would wait for bytes that may
 * never come. Its owner calls this when SSL_has_pending says so.
 */
void gw_bufferevent_read_soon(struct bufferevent *bev);

/* Header list iteration: evkeyval's TAILQ members are anonymous structs. */
struct evkeyval *gw_headers_first(struct evkeyvalq *headers);
struct evkeyval *gw_headers_next(struct evkeyval *header);

/*
 * Creates a non-blocking TCP listening socket on host:port with SO_REUSEADDR
 * and SO_REUSEPORT set before bind (so several event loops can each own a
 * listener on the same port). Returns the fd, or -1 with a message in
 * `error` (NUL-terminated, at most error_len bytes).
 */
int gw_listen_tcp(const char *host, int port, int backlog, char *error, size_t error_len);

/*
 * Returns 0 when nothing listens on host:port yet, else -1 with a message in
 * `error`. Bound without SO_REUSEPORT, then closed: SO_REUSEPORT alone would
 * let a second process of the same user join a port already served and
 * silently take half its connections.
 */
int gw_tcp_port_available(const char *host, int port, char *error, size_t error_len);

/* The local port a socket is bound to, or -1. */
int gw_socket_local_port(int fd);

/* TCP_NODELAY on: a TLS answer leaves as several records, and Nagle plus
 * delayed ACKs would hold the last one back ~40 ms. */
int gw_socket_set_nodelay(int fd);

/* TCP keepalive on fd: the first probe after idle_seconds of silence, then
 * every interval_seconds, the peer given up after count unanswered probes.
 * A peer that went away without a word (a host lost, a NAT entry forgotten)
 * is then found even while nothing is sent. Returns 0, or -1 with errno. */
int gw_socket_set_keepalive(int fd, int idle_seconds, int interval_seconds, int count);

/* SO_LINGER {on, 0}: the next close sends RST (test upstream's reset fault). */
int gw_socket_set_linger_zero(int fd);

/* Names the calling thread (at most 15 bytes are kept); 0 or an errno. */
int gw_set_thread_name(const char *name);

/* An eventfd used to wake an event loop from another thread. */
int gw_eventfd_create(void);
int gw_eventfd_signal(int fd);
void gw_eventfd_drain(int fd);

/* The plain-socket calls of the HTTP front. Each returns the result, or
 * -errno on failure, so Swift never reads a thread-local errno. */

/* accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC, then TCP_NODELAY on. */
int gw_accept(int listen_fd);
/* read(2) into buffer. */
long gw_read(int fd, void *buffer, size_t length);
/* Writes first then second (either may be empty) in one sendmsg with
 * MSG_NOSIGNAL: a peer that has gone gives -EPIPE, never SIGPIPE. */
long gw_write2(int fd, const void *first, size_t first_length, const void *second, size_t second_length);
/* shutdown(fd, SHUT_WR): the peer reads EOF after what was sent. */
int gw_shutdown_write(int fd);
/* Raises the soft RLIMIT_NOFILE to at least `wanted` (capped by the hard
 * limit). Writes the soft limit in force afterwards; returns 0, or -errno. */
int gw_raise_open_file_limit(long wanted, long *soft_after);

#endif
