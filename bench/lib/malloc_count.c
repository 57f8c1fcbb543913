/*
 * malloc_count: an LD_PRELOAD interposer that counts allocation calls.
 *
 * Counts malloc, calloc, realloc, reallocarray, posix_memalign,
 * aligned_alloc, memalign, valloc and pvalloc calls (and the bytes they
 * asked for) with relaxed atomics, and forwards each call to glibc's own
 * allocator (__libc_malloc and friends), so nothing else changes.
 *
 * The counts are written to the file named by MALLOC_COUNT_FILE:
 *   - on SIGUSR2 (the benchmark sends it before and after a fixed number of
 *     requests), and
 *   - when the process exits.
 * The file is written to "<name>.tmp" and renamed, so a reader never sees a
 * half-written file; "seq" grows by one with each dump.
 *
 * Built by bench/run with: cc -O2 -shared -fPIC -o malloc_count.so malloc_count.c
 * glibc only (it relies on the exported __libc_* entry points).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static uint64_t n_calls;  /* every allocating call */
static uint64_t n_bytes;  /* bytes asked for */
static uint64_t n_frees;  /* free calls with a non-null pointer */
static uint64_t n_seq;
static char dump_path[4096];
static char dump_tmp[4104];

static inline void count(size_t bytes) {
    __atomic_fetch_add(&n_calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&n_bytes, (uint64_t)bytes, __ATOMIC_RELAXED);
}

void *malloc(size_t size) { count(size); return __libc_malloc(size); }

void *calloc(size_t n, size_t size) {
    count(n * size);
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size) { count(size); return __libc_realloc(p, size); }

void *reallocarray(void *p, size_t n, size_t size) {
    if (size != 0 && n > SIZE_MAX / size) { errno = ENOMEM; return NULL; }
    count(n * size);
    return __libc_realloc(p, n * size);
}

void free(void *p) {
    if (p) __atomic_fetch_add(&n_frees, 1, __ATOMIC_RELAXED);
    __libc_free(p);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    count(size);
    void *p = __libc_memalign(alignment, size);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t alignment, size_t size) { count(size); return __libc_memalign(alignment, size); }
void *memalign(size_t alignment, size_t size) { count(size); return __libc_memalign(alignment, size); }

void *valloc(size_t size) {
    count(size);
    return __libc_memalign((size_t)sysconf(_SC_PAGESIZE), size);
}

void *pvalloc(size_t size) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    count(size);
    return __libc_memalign(page, (size + page - 1) & ~(page - 1));
}

/* Async-signal-safe: formats by hand, writes with open/write/rename. */
static char *put_u64(char *at, uint64_t value) {
    char digits[24];
    int n = 0;
    do { digits[n++] = (char)('0' + value % 10); value /= 10; } while (value);
    while (n) *at++ = digits[--n];
    return at;
}

static char *put_str(char *at, const char *text) {
    while (*text) *at++ = *text++;
    return at;
}

static void dump(void) {
    if (!dump_path[0]) return;
    int saved = errno;
    char line[256], *at = line;
    at = put_str(at, "seq ");
    at = put_u64(at, __atomic_add_fetch(&n_seq, 1, __ATOMIC_RELAXED));
    at = put_str(at, "\nallocs ");
    at = put_u64(at, __atomic_load_n(&n_calls, __ATOMIC_RELAXED));
    at = put_str(at, "\nbytes ");
    at = put_u64(at, __atomic_load_n(&n_bytes, __ATOMIC_RELAXED));
    at = put_str(at, "\nfrees ");
    at = put_u64(at, __atomic_load_n(&n_frees, __ATOMIC_RELAXED));
    at = put_str(at, "\n");
    int fd = open(dump_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        ssize_t ignored = write(fd, line, (size_t)(at - line));
        (void)ignored;
        close(fd);
        rename(dump_tmp, dump_path);
    }
    errno = saved;
}

static void on_signal(int number) { (void)number; dump(); }

__attribute__((constructor)) static void malloc_count_init(void) {
    const char *path = getenv("MALLOC_COUNT_FILE");
    if (!path || !*path || strlen(path) >= sizeof(dump_path)) return;
    memcpy(dump_path, path, strlen(path) + 1);
    memcpy(dump_tmp, path, strlen(path));
    memcpy(dump_tmp + strlen(path), ".tmp", 5);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGUSR2, &action, NULL);
}

__attribute__((destructor)) static void malloc_count_fini(void) { dump(); }
