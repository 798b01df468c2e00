/*
 * cg_disk.c — the persistent kernel cache (see cg_disk.h for the format).
 * Trust: the directory must belong to the effective user and be writable
 * by nobody else, since what it holds is loaded as machine code; any
 * other directory disables the cache. Nothing here prints, except under
 * RLX_DEBUG.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen_llvm/cg.h"
#include "codegen_llvm/cg_disk.h"

enum { FORMAT = 1 };
static const char MAGIC[8] = {'R', 'L', 'X', 'K', 'O', 'B', 'J', '1'};
/* larger files are not kernels of ours: refuse before allocating */
#define MAX_FILE ((size_t)1 << 30)

static struct {
    pthread_mutex_t lock;
    bool explicit_dir; /* set by cg_disk_set_dir, else from the environment */
    char want[PATH_MAX];
    int state; /* 0 unresolved, 1 usable (dir), -1 disabled */
    char dir[PATH_MAX];
    atomic_ullong loads, rejects, stores, store_failures;
    atomic_ulong tmp_seq;
} D = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct {
    atomic_int debug;
    void (*_Atomic default_dir)(char *out, size_t cap);
} Cfg; /* handed down by cg_configure */

void cg_disk_configure(int debug, void (*default_dir)(char *out, size_t cap))
{
    atomic_store(&Cfg.debug, debug);
    atomic_store(&Cfg.default_dir, default_dir);
}

static int debug_level(void) { return atomic_load(&Cfg.debug); }

/* ----------------------------------------------------------- hashing */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t cg_disk_hash64(const void *p, size_t n, uint64_t seed)
{
    const uint8_t *b = p;
    uint64_t h = mix64(seed ^ (0x9e3779b97f4a7c15ull * (n + 1)));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = mix64(h ^ w) + 0x632be59bd9b4e019ull;
    }
    uint64_t t = 0;
    for (size_t k = 0; i + k < n; k++)
        t |= (uint64_t)b[i + k] << (8 * k);
    return mix64(h ^ t ^ (uint64_t)n);
}

/* ------------------------------------------------------- file format */

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

/* over key and object together: the two hashes chained */
static uint64_t checksum(const void *key, size_t nkey, const void *obj, size_t nobj)
{
    return cg_disk_hash64(obj, nobj, cg_disk_hash64(key, nkey, 0x5243484bull));
}

void cg_disk_format(uint8_t *out, const void *key, size_t nkey, const void *obj, size_t nobj)
{
    memcpy(out, MAGIC, 8);
    put32(out + 8, FORMAT);
    put32(out + 12, CG_DISK_HEADER);
    put64(out + 16, nkey);
    put64(out + 24, nobj);
    put64(out + 32, checksum(key, nkey, obj, nobj));
    memcpy(out + CG_DISK_HEADER, key, nkey);
    memcpy(out + CG_DISK_HEADER + nkey, obj, nobj);
}

bool cg_disk_parse(const uint8_t *buf, size_t n, const void *key, size_t nkey, const uint8_t **obj, size_t *nobj)
{
    if (!buf || n < CG_DISK_HEADER || memcmp(buf, MAGIC, 8) != 0 || get32(buf + 8) != FORMAT ||
        get32(buf + 12) != CG_DISK_HEADER)
        return false;
    uint64_t kl = get64(buf + 16), ol = get64(buf + 24);
    size_t room = n - CG_DISK_HEADER;
    /* exact sizes, compared without overflow: no trailing bytes either */
    if (kl != nkey || kl > room || ol != room - kl || ol == 0)
        return false;
    const uint8_t *k = buf + CG_DISK_HEADER, *o = k + kl;
    if (memcmp(k, key, nkey) != 0 || get64(buf + 32) != checksum(k, kl, o, ol))
        return false;
    *obj = o;
    *nobj = ol;
    return true;
}

/* ------------------------------------------------------- the directory */

rlx_status cg_disk_set_dir(const char *path)
{
    if (path && strlen(path) >= sizeof D.want - 64)
        return RLX_E_ARG;
    pthread_mutex_lock(&D.lock);
    D.explicit_dir = path != NULL;
    snprintf(D.want, sizeof D.want, "%s", path ? path : "");
    D.state = 0;
    pthread_mutex_unlock(&D.lock);
    return RLX_OK;
}

/* mkdir -p with 0700 for each directory it creates */
static bool make_dirs(char *p)
{
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, 0700) != 0 && errno != EEXIST) {
            *s = '/';
            return false;
        }
        *s = '/';
    }
    return mkdir(p, 0700) == 0 || errno == EEXIST;
}

/* The configured directory, or "" when the cache is off. Under D.lock. */
static void wanted_dir(char *out, size_t cap)
{
    void (*dflt)(char *, size_t) = atomic_load(&Cfg.default_dir);
    if (D.explicit_dir)
        snprintf(out, cap, "%s", D.want);
    else if (dflt)
        dflt(out, cap);
    else
        out[0] = 0; /* not configured: off */
}

void cg_disk_get_dir(char *out, size_t cap)
{
    pthread_mutex_lock(&D.lock);
    wanted_dir(out, cap);
    pthread_mutex_unlock(&D.lock);
}

static void resolve(void)
{
    char p[PATH_MAX];
    wanted_dir(p, sizeof p);
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/')
        p[--len] = 0;
    D.state = -1;
    if (!len || len >= sizeof D.dir - 64)
        return;
    struct stat sb;
    if (!make_dirs(p) || stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        if (debug_level())
            fprintf(stderr, "rlx: disk cache off: cannot create directory %s\n", p);
        return;
    }
    if (sb.st_uid != geteuid() || (sb.st_mode & 022)) {
        if (debug_level())
            fprintf(stderr, "rlx: disk cache off: %s is not private to this user\n", p);
        return;
    }
    snprintf(D.dir, sizeof D.dir, "%s", p);
    D.state = 1;
}

/* Copies the usable directory to out; false when the cache is off. */
static bool get_dir(char *out, size_t cap)
{
    pthread_mutex_lock(&D.lock);
    if (D.state == 0)
        resolve();
    bool ok = D.state == 1;
    if (ok)
        snprintf(out, cap, "%s", D.dir);
    pthread_mutex_unlock(&D.lock);
    return ok;
}

bool cg_disk_enabled(void)
{
    char d[PATH_MAX];
    return get_dir(d, sizeof d);
}

static int file_path(char *out, size_t cap, const char *dir, cg_hash128 h)
{
    return snprintf(out, cap, "%s/%016llx%016llx.rlxk", dir, (unsigned long long)h.hi, (unsigned long long)h.lo);
}

/* ------------------------------------------------------ load and store */

bool cg_disk_load(cg_hash128 h, const void *key, size_t nkey, uint8_t **file, const uint8_t **obj, size_t *nobj)
{
    char dir[PATH_MAX], path[PATH_MAX + 64];
    if (!get_dir(dir, sizeof dir))
        return false;
    file_path(path, sizeof path, dir, h);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return false; /* a plain miss */
    uint8_t *buf = NULL;
    struct stat sb;
    bool ok = false;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= CG_DISK_HEADER &&
        (uint64_t)sb.st_size <= MAX_FILE && (buf = ir_alloc((size_t)sb.st_size))) {
        size_t n = (size_t)sb.st_size, got = 0;
        while (got < n) {
            ssize_t r = read(fd, buf + got, n - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        ok = got == n && cg_disk_parse(buf, n, key, nkey, obj, nobj);
    }
    close(fd);
    if (!ok) {
        ir_free(buf);
        atomic_fetch_add(&D.rejects, 1);
        if (debug_level())
            fprintf(stderr, "rlx: disk cache: ignoring invalid %s\n", path);
        return false;
    }
    atomic_fetch_add(&D.loads, 1);
    *file = buf;
    return true;
}

static bool write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

void cg_disk_store(cg_hash128 h, const void *key, size_t nkey, const void *obj, size_t nobj)
{
    char dir[PATH_MAX], path[PATH_MAX + 64], tmp[PATH_MAX + 128];
    if (!get_dir(dir, sizeof dir))
        return;
    bool ok = false;
    uint8_t *img = NULL;
    int fd = -1;
    size_t total = CG_DISK_HEADER + nkey + nobj;
    /* past RLIMIT_FSIZE a write raises SIGXFSZ, which kills a process
     * that has not ignored it: never try */
    struct rlimit rl;
    if (total > MAX_FILE || nobj == 0 ||
        (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && total > rl.rlim_cur))
        goto done;
    if (!(img = ir_alloc(total)))
        goto done;
    cg_disk_format(img, key, nkey, obj, nobj);
    file_path(path, sizeof path, dir, h);
    for (int tries = 0; fd < 0 && tries < 8; tries++) {
        snprintf(tmp, sizeof tmp, "%s/.%016llx%016llx.%ld.%lu.tmp", dir, (unsigned long long)h.hi,
                 (unsigned long long)h.lo, (long)getpid(), (unsigned long)atomic_fetch_add(&D.tmp_seq, 1));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0)
        goto done;
    ok = write_all(fd, img, total);
    ok = (close(fd) == 0) && ok;
    if (ok)
        ok = rename(tmp, path) == 0;
    if (!ok)
        unlink(tmp);
done:
    ir_free(img);
    atomic_fetch_add(ok ? &D.stores : &D.store_failures, 1);
    if (!ok && debug_level())
        fprintf(stderr, "rlx: disk cache: could not store a kernel in %s\n", dir);
}

void cg_disk_counters(cg_disk_counts *out)
{
    out->loads = atomic_load(&D.loads);
    out->rejects = atomic_load(&D.rejects);
    out->stores = atomic_load(&D.stores);
    out->store_failures = atomic_load(&D.store_failures);
}
