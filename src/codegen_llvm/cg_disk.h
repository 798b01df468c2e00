/*
 * cg_disk.h — the persistent kernel cache: one object file per kernel in
 * a directory (RLX_CACHE_DIR, rlx_set_option "cache_dir"; default
 * $XDG_CACHE_HOME/rlx or ~/.cache/rlx; empty disables it). Plain POSIX C,
 * no LLVM: cg_jit.c decides what a key is and what the object means.
 *
 * A file is <32 hex digits of the key's 128-bit hash>.rlxk:
 *   magic "RLXKOBJ1" | u32 format | u32 header size | u64 key length |
 *   u64 object length | u64 checksum of key and object | key | object
 * (integers little-endian). The key stored is the build identity of librlx
 * (cg_disk.c) followed by the caller's key. The full key is stored and
 * compared, so a hash collision or a file of another build is a miss, as is any file that is truncated,
 * padded or corrupt. Files are written to a temporary name in the same
 * directory (O_EXCL, mode 0600) and renamed over the old one, so a reader
 * never sees half a file. Every failure (no directory, unwritable, disk
 * full, file size limit) is silent: the cache just does not help.
 */
#ifndef RLX_CG_DISK_H
#define RLX_CG_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t lo, hi;
} cg_hash128;

enum { CG_DISK_HEADER = 40 };

/* A 64-bit hash of n bytes (not cryptographic: keys are compared). */
uint64_t cg_disk_hash64(const void *p, size_t n, uint64_t seed);

/* The object inside a cache file image buf[0..n) whose key must be
 * key[0..nkey): true with *obj, *nobj pointing into buf; false for any
 * image that is not exactly a valid file for this key. Never reads
 * outside buf. */
bool cg_disk_parse(const uint8_t *buf, size_t n, const void *key, size_t nkey, const uint8_t **obj,
                   size_t *nobj);

/* Writes the image of (key, obj) to out, which has room for
 * CG_DISK_HEADER + nkey + nobj bytes. */
void cg_disk_format(uint8_t *out, const void *key, size_t nkey, const void *obj, size_t nobj);

/* Reads the file of hash h and validates it against key (after the
 * build identity): true with a
 * image in *file (free it with ir_free) and the object inside it. */
bool cg_disk_load(cg_hash128 h, const void *key, size_t nkey, uint8_t **file, const uint8_t **obj, size_t *nobj);

/* Stores obj under (h, key), replacing any file there; best effort. */
void cg_disk_store(cg_hash128 h, const void *key, size_t nkey, const void *obj, size_t nobj);

/* Whether a cache directory is configured and usable (resolves it, and
 * creates it 0700, on the first call after a change). */
bool cg_disk_enabled(void);
/* The debug level and the default directory's resolver (cg_configure). */
void cg_disk_configure(int debug, void (*default_dir)(char *out, size_t cap));

#endif
