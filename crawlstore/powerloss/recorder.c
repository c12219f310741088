/* The write recorder of crawlstore's power-loss tests: an LD_PRELOAD shim that logs, in order,
 * every write, truncate and sync a process makes to the files of one directory, with the data
 * written. crawlstore/powerloss/record.py compiles it with the system's C compiler.
 *
 *   CRAWLSTORE_RECORD_DIR  the directory whose files are recorded (an absolute path)
 *   CRAWLSTORE_RECORD_LOG  the log: a sequence of records, each a header and its payload
 *   CRAWLSTORE_FAULT       optional, "write:N:ERRNO" or "sync:N:ERRNO": the Nth write (or
 *                          fsync/fdatasync) to those files fails with ERRNO (28: ENOSPC,
 *                          5: EIO), without writing (or syncing); the calls after it succeed
 *
 * A record: op (u8), flags (u8), file (u16), length (u32), offset (u64), then `length` bytes:
 * the path for OPEN, the data for WRITE, nothing else. Each is written with one write(2) under
 * a lock, after the call it records returned, so the log's order is the order the calls
 * completed in. What it cannot see: writes through a shared writable mmap (LMDB makes none
 * unless MDB_WRITEMAP, which crawlstore never sets), and files opened before the shim loaded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum { OP_OPEN = 1, OP_WRITE = 2, OP_TRUNC = 3, OP_SYNC = 4, OP_CLOSE = 5, OP_MSYNC = 6,
       OP_LINK = 7, OP_RENAME = 8 };
enum { FLAG_DSYNC = 1 };

#pragma pack(push, 1)
struct header {
    uint8_t op;
    uint8_t flags;
    uint16_t file;
    uint32_t length;
    uint64_t offset;
};
#pragma pack(pop)

#define MAX_FD 4096
static int log_fd = -1;
static char dir[4096];
static size_t dir_len;
static int files;                 /* files seen so far: their numbers */
static int file_of[MAX_FD];       /* fd -> file number + 1 (0: not recorded) */
static uint8_t flags_of[MAX_FD];
static uint8_t spared[MAX_FD];    /* the workload's own acknowledgements: never failed */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int fault_on_sync = -1;   /* -1: no fault; 0: the Nth write fails; 1: the Nth sync */
static long fault_at, fault_errno, writes_seen, syncs_seen;

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_close)(int);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off_t);
static int (*real_msync)(void *, size_t, int);
static int (*real_link)(const char *, const char *);
static int (*real_rename)(const char *, const char *);

static void raw_write_all(const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t done = syscall(SYS_write, log_fd, p, n);
        if (done <= 0) {
            if (done < 0 && errno == EINTR) continue;
            abort(); /* a record lost would make every image a lie */
        }
        p += done;
        n -= (size_t)done;
    }
}

__attribute__((constructor)) static void init(void) {
    real_write = dlsym(RTLD_NEXT, "write");
    real_pwrite = dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    real_writev = dlsym(RTLD_NEXT, "writev");
    real_pwritev = dlsym(RTLD_NEXT, "pwritev");
    real_open = dlsym(RTLD_NEXT, "open");
    real_open64 = dlsym(RTLD_NEXT, "open64");
    real_openat = dlsym(RTLD_NEXT, "openat");
    real_close = dlsym(RTLD_NEXT, "close");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_ftruncate = dlsym(RTLD_NEXT, "ftruncate");
    real_ftruncate64 = dlsym(RTLD_NEXT, "ftruncate64");
    real_msync = dlsym(RTLD_NEXT, "msync");
    real_link = dlsym(RTLD_NEXT, "link");
    real_rename = dlsym(RTLD_NEXT, "rename");
    const char *d = getenv("CRAWLSTORE_RECORD_DIR");
    const char *l = getenv("CRAWLSTORE_RECORD_LOG");
    if (d == NULL || l == NULL || strlen(d) + 2 > sizeof dir) return;
    strcpy(dir, d);
    dir_len = strlen(dir);
    if (dir_len > 1 && dir[dir_len - 1] == '/') dir[--dir_len] = 0;
    log_fd = (int)syscall(SYS_openat, AT_FDCWD, l, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const char *f = getenv("CRAWLSTORE_FAULT");
    if (f != NULL) {
        char kind[8] = {0};
        if (sscanf(f, "%7[a-z]:%ld:%ld", kind, &fault_at, &fault_errno) == 3)
            fault_on_sync = strcmp(kind, "sync") == 0 ? 1 : strcmp(kind, "write") == 0 ? 0 : -1;
    }
}

static void record(uint8_t op, uint8_t flags, int file, uint64_t offset, const void *data,
                   uint32_t length) {
    struct header h = {op, flags, (uint16_t)file, length, offset};
    raw_write_all(&h, sizeof h);
    if (length) raw_write_all(data, length);
}

static int tracked(int fd) {
    return log_fd >= 0 && fd >= 0 && fd < MAX_FD && file_of[fd] != 0;
}

/* The absolute form of `path` in `full`; 1 when it is the directory or a file in it. */
static int inside(const char *path, char *full, size_t size) {
    if (log_fd < 0 || path == NULL) return 0;
    if (path[0] != '/') {
        if (strlen(path) + 2 >= size || getcwd(full, size - strlen(path) - 2) == NULL) return 0;
        strcat(full, "/");
        strcat(full, path);
    } else {
        if (strlen(path) >= size) return 0;
        strcpy(full, path);
    }
    return strncmp(full, dir, dir_len) == 0 && (full[dir_len] == '/' || full[dir_len] == 0);
}

static void opened(int fd, const char *path, int flags) {
    if (fd < 0 || fd >= MAX_FD) return;
    char full[8192];
    if (!inside(path, full, sizeof full)) return;
    pthread_mutex_lock(&lock);
    int file = files++;
    file_of[fd] = file + 1;
    flags_of[fd] = (flags & (O_DSYNC | O_SYNC)) ? FLAG_DSYNC : 0;
    size_t n = strlen(full);
    spared[fd] = n >= 5 && strcmp(full + n - 5, "/acks") == 0;
    record(OP_OPEN, flags_of[fd], file, (uint64_t)(flags & O_TRUNC ? 1 : 0), full,
           (uint32_t)strlen(full));
    pthread_mutex_unlock(&lock);
}

static void wrote(int fd, uint64_t offset, const void *data, ssize_t done) {
    if (done <= 0 || !tracked(fd)) return;
    pthread_mutex_lock(&lock);
    record(OP_WRITE, flags_of[fd], file_of[fd] - 1, offset, data, (uint32_t)done);
    pthread_mutex_unlock(&lock);
}

static void wrote_vector(int fd, uint64_t offset, const struct iovec *iov, int n, ssize_t done) {
    if (done <= 0 || !tracked(fd)) return;
    for (int i = 0; i < n && done > 0; i++) {
        ssize_t part = (ssize_t)iov[i].iov_len < done ? (ssize_t)iov[i].iov_len : done;
        wrote(fd, offset, iov[i].iov_base, part);
        offset += (uint64_t)part;
        done -= part;
    }
}

static void plain(uint8_t op, int fd, uint64_t value) {
    if (!tracked(fd)) return;
    pthread_mutex_lock(&lock);
    record(op, flags_of[fd], file_of[fd] - 1, value, NULL, 0);
    pthread_mutex_unlock(&lock);
}

/* Whether this call (a write: 0, a sync: 1) to a recorded file is the one to fail; a writev
 * of `pieces` buffers counts as that many writes, as the log records it. */
static int fails(int fd, int sync, long pieces) {
    if (fault_on_sync != sync || !tracked(fd) || spared[fd]) return 0;
    pthread_mutex_lock(&lock);
    long first = (sync ? syncs_seen : writes_seen) + 1;
    if (sync) syncs_seen += pieces; else writes_seen += pieces;
    pthread_mutex_unlock(&lock);
    if (fault_at < first || fault_at >= first + pieces) return 0;
    errno = (int)fault_errno;
    return 1;
}

static int mode_of(int flags, va_list args) {
    return (flags & (O_CREAT | O_TMPFILE)) ? va_arg(args, int) : 0;
}

int open(const char *path, int flags, ...) {
    va_list args;
    va_start(args, flags);
    int mode = mode_of(flags, args);
    va_end(args);
    int fd = real_open(path, flags, mode);
    opened(fd, path, flags);
    return fd;
}

int open64(const char *path, int flags, ...) {
    va_list args;
    va_start(args, flags);
    int mode = mode_of(flags, args);
    va_end(args);
    int fd = real_open64 ? real_open64(path, flags, mode) : real_open(path, flags, mode);
    opened(fd, path, flags);
    return fd;
}

int openat(int at, const char *path, int flags, ...) {
    va_list args;
    va_start(args, flags);
    int mode = mode_of(flags, args);
    va_end(args);
    int fd = real_openat(at, path, flags, mode);
    if (at == AT_FDCWD || (path && path[0] == '/')) opened(fd, path, flags);
    return fd;
}

int close(int fd) {
    if (tracked(fd)) {
        plain(OP_CLOSE, fd, 0);
        file_of[fd] = 0;
    }
    return real_close(fd);
}

ssize_t write(int fd, const void *buf, size_t n) {
    if (fails(fd, 0, 1)) return -1;
    off_t at = tracked(fd) ? lseek(fd, 0, SEEK_CUR) : 0;
    ssize_t done = real_write(fd, buf, n);
    wrote(fd, (uint64_t)at, buf, done);
    return done;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t offset) {
    if (fails(fd, 0, 1)) return -1;
    ssize_t done = real_pwrite(fd, buf, n, offset);
    wrote(fd, (uint64_t)offset, buf, done);
    return done;
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t offset) {
    if (fails(fd, 0, 1)) return -1;
    ssize_t done = real_pwrite64(fd, buf, n, offset);
    wrote(fd, (uint64_t)offset, buf, done);
    return done;
}

ssize_t writev(int fd, const struct iovec *iov, int n) {
    if (fails(fd, 0, n)) return -1;
    off_t at = tracked(fd) ? lseek(fd, 0, SEEK_CUR) : 0;
    ssize_t done = real_writev(fd, iov, n);
    wrote_vector(fd, (uint64_t)at, iov, n, done);
    return done;
}

ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t offset) {
    if (fails(fd, 0, n)) return -1;
    ssize_t done = real_pwritev(fd, iov, n, offset);
    wrote_vector(fd, (uint64_t)offset, iov, n, done);
    return done;
}

int fsync(int fd) {
    if (fails(fd, 1, 1)) return -1;
    int done = real_fsync(fd);
    if (done == 0) plain(OP_SYNC, fd, 0);
    return done;
}

int fdatasync(int fd) {
    if (fails(fd, 1, 1)) return -1;
    int done = real_fdatasync(fd);
    if (done == 0) plain(OP_SYNC, fd, 0);
    return done;
}

int ftruncate(int fd, off_t length) {
    int done = real_ftruncate(fd, length);
    if (done == 0) plain(OP_TRUNC, fd, (uint64_t)length);
    return done;
}

int ftruncate64(int fd, off_t length) {
    int done = real_ftruncate64 ? real_ftruncate64(fd, length) : real_ftruncate(fd, length);
    if (done == 0) plain(OP_TRUNC, fd, (uint64_t)length);
    return done;
}

/* A new name for a file (link) or a file moved (rename): recorded as "from\0to". */
static void named(uint8_t op, const char *from, const char *to) {
    char a[4096], b[4096], both[8192];
    if (!inside(to, b, sizeof b)) return;
    if (!inside(from, a, sizeof a)) a[0] = 0;
    size_t la = strlen(a), lb = strlen(b);
    memcpy(both, a, la + 1);
    memcpy(both + la + 1, b, lb);
    pthread_mutex_lock(&lock);
    record(op, 0, 0xFFFF, 0, both, (uint32_t)(la + 1 + lb));
    pthread_mutex_unlock(&lock);
}

int link(const char *from, const char *to) {
    int done = real_link(from, to);
    if (done == 0) named(OP_LINK, from, to);
    return done;
}

int rename(const char *from, const char *to) {
    int done = real_rename(from, to);
    if (done == 0) named(OP_RENAME, from, to);
    return done;
}

int msync(void *addr, size_t length, int flags) {
    int done = real_msync(addr, length, flags);
    if (done == 0 && log_fd >= 0) {
        pthread_mutex_lock(&lock);
        record(OP_MSYNC, 0, 0xFFFF, (uint64_t)length, NULL, 0);
        pthread_mutex_unlock(&lock);
    }
    return done;
}
