#define _GNU_SOURCE
#include "CFaultProxyShims.h"

#include <signal.h>
#include <sys/prctl.h>

int fault_proxy_ppoll(struct pollfd *fds, unsigned long count, const struct timespec *timeout) {
    return ppoll(fds, (nfds_t)count, timeout, NULL);
}

int fault_proxy_set_timer_slack(unsigned long nanoseconds) {
    return prctl(PR_SET_TIMERSLACK, nanoseconds, 0, 0, 0);
}
