#ifndef CLIBEVENT_SHIM_H
#define CLIBEVENT_SHIM_H
/* Import the OpenSSL module first so the system headers both need (fd_set,
   timeval) have one owner; two modules defining them conflict in Swift. */
#include "../COpenSSL/shim.h"
#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <event2/util.h>
#endif
