#ifndef C_FAULT_PROXY_SHIMS_H
#define C_FAULT_PROXY_SHIMS_H

#include <poll.h>
#include <time.h>

/// ppoll(2) without a signal mask: poll() with a timeout in nanoseconds
/// rather than whole milliseconds. Glibc declares ppoll only under
/// _GNU_SOURCE, which Swift's Glibc module is not built with, hence this
/// shim. A NULL timeout waits forever; returns what ppoll returns (errno
/// set on -1).
int fault_proxy_ppoll(struct pollfd *fds, unsigned long count, const struct timespec *timeout);

/// prctl(PR_SET_TIMERSLACK) for the calling thread: how late the kernel may
/// wake it past a timeout (50 us by default; prctl is variadic, so Swift
/// cannot call it). Returns what prctl returns.
int fault_proxy_set_timer_slack(unsigned long nanoseconds);

#endif
