#ifndef CHIREDIS_SHIM_H
#define CHIREDIS_SHIM_H
/* The OpenSSL module first, as in CLibevent: the system headers hiredis
   needs too (timeval, stdio) then have one owner. */
#include "../COpenSSL/shim.h"
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#endif
