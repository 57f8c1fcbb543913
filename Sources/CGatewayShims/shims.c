#if !defined(__linux__)
#error "products-gateway builds on Linux only (eventfd, accept4, SO_REUSEPORT load balancing); run it in its container image elsewhere"
#endif

#define _GNU_SOURCE
#include "CGatewayShims.h"

#include <sys/queue.h>
#include <openssl/ssl.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/event.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_struct.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

void gw_bufferevent_write_soon(struct bufferevent *bev) {
    event_active(&bev->ev_write, EV_WRITE, 1);
}

void gw_bufferevent_read_soon(struct bufferevent *bev) {
    event_active(&bev->ev_read, EV_READ, 1);
}

int gw_ssl_set_sni_host_name(SSL *ssl, const char *host_name) {
    return (int)SSL_set_tlsext_host_name(ssl, host_name);
}

int gw_ssl_ctx_set_min_tls12(SSL_CTX *ctx) {
    return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
}

void gw_ssl_ctx_harden(SSL_CTX *ctx) {
    /* Partial writes and moving buffers are what bufferevent_openssl expects. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
}

struct evkeyval *gw_headers_first(struct evkeyvalq *headers) {
    return headers == NULL ? NULL : headers->tqh_first;
}

struct evkeyval *gw_headers_next(struct evkeyval *header) {
    return header == NULL ? NULL : header->next.tqe_next;
}

/* Resolves host:port for a passive (listening) socket; on failure writes
 * the reason to `error` and returns NULL. */
static struct addrinfo *gw_resolve_passive(const char *host, int port, char *error, size_t error_len) {
    struct addrinfo hints, *result = NULL;
    char service[16];
    int rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(service, sizeof(service), "%d", port);
    rc = getaddrinfo(host, service, &hints, &result);
    if (rc != 0) {
        snprintf(error, error_len, "cannot resolve listen address %s: %s", host, gai_strerror(rc));
        return NULL;
    }
    return result;
}

int gw_listen_tcp(const char *host, int port, int backlog, char *error, size_t error_len) {
    struct addrinfo *result, *ai;
    int fd = -1, one = 1, saved = 0;

    if ((result = gw_resolve_passive(host, port, error, error_len)) == NULL) return -1;
    for (ai = result; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) { saved = errno; continue; }
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
            bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
            listen(fd, backlog) != 0) {
            saved = errno;
            close(fd);
            fd = -1;
            continue;
        }
        break;
    }
    freeaddrinfo(result);
    if (fd < 0) {
        snprintf(error, error_len, "cannot listen on %s:%d: %s", host, port, strerror(saved));
    }
    return fd;
}

int gw_tcp_port_available(const char *host, int port, char *error, size_t error_len) {
    struct addrinfo *result, *ai;
    int fd, rc, one = 1, available = -1, saved = 0;

    if ((result = gw_resolve_passive(host, port, error, error_len)) == NULL) return -1;
    /* The same address gw_listen_tcp would take: the first that binds. */
    for (ai = result; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) { saved = errno; continue; }
        /* SO_REUSEADDR still allows a restart over TIME_WAIT connections;
         * it never allows binding beside a listening socket. */
        rc = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0
            ? bind(fd, ai->ai_addr, ai->ai_addrlen) : -1;
        saved = errno;
        close(fd);
        if (rc == 0) { available = 0; break; }
        if (saved == EADDRINUSE) break;
    }
    freeaddrinfo(result);
    if (available != 0) {
        snprintf(error, error_len, "cannot listen on %s:%d: %s", host, port, strerror(saved));
    }
    return available;
}

int gw_socket_local_port(int fd) {
    struct sockaddr_storage address;
    socklen_t length = sizeof(address);
    if (getsockname(fd, (struct sockaddr *)&address, &length) != 0) return -1;
    if (address.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&address)->sin_port);
    if (address.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&address)->sin6_port);
    return -1;
}

int gw_socket_set_nodelay(int fd) {
    int one = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int gw_socket_set_keepalive(int fd, int idle_seconds, int interval_seconds, int count) {
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) != 0) return -1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_seconds, sizeof(idle_seconds)) != 0) return -1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_seconds, sizeof(interval_seconds)) != 0) return -1;
    return setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

int gw_socket_set_linger_zero(int fd) {
    struct linger option = { .l_onoff = 1, .l_linger = 0 };
    return setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, sizeof(option));
}

int gw_eventfd_create(void) {
    return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

int gw_eventfd_signal(int fd) {
    uint64_t one = 1;
    ssize_t written;
    do { written = write(fd, &one, sizeof(one)); } while (written < 0 && errno == EINTR);
    /* EAGAIN means the counter is saturated: the loop is already due to wake. */
    return (written == sizeof(one) || (written < 0 && errno == EAGAIN)) ? 0 : -1;
}

void gw_eventfd_drain(int fd) {
    uint64_t value;
    while (read(fd, &value, sizeof(value)) > 0) { }
}

int gw_accept(int listen_fd) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return -errno;
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

long gw_read(int fd, void *buffer, size_t length) {
    ssize_t n;
    do { n = read(fd, buffer, length); } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : (long)n;
}

long gw_write2(int fd, const void *first, size_t first_length, const void *second, size_t second_length) {
    struct iovec parts[2] = {
        { .iov_base = (void *)first, .iov_len = first_length },
        { .iov_base = (void *)second, .iov_len = second_length },
    };
    struct msghdr message = { 0 };
    message.msg_iov = parts;
    message.msg_iovlen = second_length > 0 ? 2 : 1;
    ssize_t n;
    do { n = sendmsg(fd, &message, MSG_NOSIGNAL); } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : (long)n;
}

int gw_shutdown_write(int fd) {
    return shutdown(fd, SHUT_WR) < 0 ? -errno : 0;
}

int gw_raise_open_file_limit(long wanted, long *soft_after) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) < 0) return -errno;
    if (limit.rlim_cur == RLIM_INFINITY || (long)limit.rlim_cur >= wanted) {
        *soft_after = limit.rlim_cur == RLIM_INFINITY ? wanted : (long)limit.rlim_cur;
        return 0;
    }
    rlim_t target = (rlim_t)wanted;
    if (limit.rlim_max != RLIM_INFINITY && target > limit.rlim_max) target = limit.rlim_max;
    struct rlimit raised = { .rlim_cur = target, .rlim_max = limit.rlim_max };
    if (setrlimit(RLIMIT_NOFILE, &raised) < 0) {
        *soft_after = (long)limit.rlim_cur;
        return -errno;
    }
    *soft_after = (long)target;
    return 0;
}

int gw_set_thread_name(const char *name) {
    char shortened[16];
    snprintf(shortened, sizeof shortened, "%s", name);
    return pthread_setname_np(pthread_self(), shortened);
}
