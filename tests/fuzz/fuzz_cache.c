/*
 * fuzz_cache.c — libFuzzer target for the disk kernel cache's reader
 * (src/codegen_llvm/cg_disk.c): the bytes are a cache file. The reader
 * must never crash, read outside the image or leak, and must accept a
 * file only if it is exactly a valid image for the key asked for; loading
 * through the file system must agree with parsing the bytes. Objects are
 * only validated here, never linked.
 *
 * The first byte picks the mode:
 *   0  the bytes as a file, for a fixed key;
 *   1  the bytes as a file, for the key the file itself names (so only
 *      the sizes and the checksum guard it);
 *   2  a valid image built from the bytes (key length, key, object), then
 *      damaged by (position, xor) pairs and a cut taken from its tail:
 *      accepted exactly when the damage changed nothing.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen_llvm/cg.h"
#include "codegen_llvm/cg_disk.h"

#define FUZZ_CHECK(cond)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "fuzz check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                  \
        }                                                                             \
    } while (0)

static char dir[64];
static const cg_hash128 H = {0x0123456789abcdefull, 0xfedcba9876543210ull};

static void remove_dir(void) { rmdir(dir); }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    snprintf(dir, sizeof dir, "/tmp/rlx-fuzz-cache-XXXXXX");
    if (!mkdtemp(dir) || cg_disk_set_dir(dir) != RLX_OK)
        abort();
    /* keys as given: cg_disk_load then compares exactly what cg_disk_parse does */
    cg_disk_set_identity_for_tests("");
    atexit(remove_dir);
    return 0;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* parse, and the same bytes through a file and cg_disk_load */
static int parse_both(const uint8_t *img, size_t n, const void *key, size_t nkey)
{
    const uint8_t *obj = NULL;
    size_t nobj = 0;
    int ok = cg_disk_parse(img, n, key, nkey, &obj, &nobj);
    if (ok)
        FUZZ_CHECK(obj >= img + CG_DISK_HEADER + nkey && obj + nobj == img + n && nobj > 0);
    char path[128];
    snprintf(path, sizeof path, "%s/%016llx%016llx.rlxk", dir, (unsigned long long)H.hi, (unsigned long long)H.lo);
    FILE *f = fopen(path, "wb");
    if (f) {
        size_t w = fwrite(img, 1, n, f);
        fclose(f);
        uint8_t *file = NULL;
        const uint8_t *o2;
        size_t n2;
        if (w == n) {
            int ok2 = cg_disk_load(H, key, nkey, &file, &o2, &n2);
            FUZZ_CHECK(ok2 == ok);
            if (ok2)
                FUZZ_CHECK(n2 == nobj && memcmp(o2, obj, nobj) == 0);
            free(file);
        }
        unlink(path);
    }
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0] % 3;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    static const char fixed[] = "rlx kernel object\ncodegen 1\nfuzz key\0\1\2\3\4\5\6\7";
    if (mode == 0) {
        parse_both(p, n, fixed, sizeof fixed);
    } else if (mode == 1) {
        if (n >= CG_DISK_HEADER) {
            uint64_t kl = le64(p + 16);
            if (kl <= n - CG_DISK_HEADER)
                parse_both(p, n, p + CG_DISK_HEADER, (size_t)kl);
        }
        parse_both(p, n, "", 0);
    } else {
        /* [nkey][nmut][cut: 2 bytes][nmut x (pos: 2 bytes, xor)] then key and object */
        if (n < 4)
            return 0;
        size_t nkey = p[0], nmut = p[1] % 5, cut = (size_t)p[2] << 8 | p[3];
        p += 4, n -= 4;
        if (n < 3 * nmut)
            return 0;
        const uint8_t *mut = p;
        p += 3 * nmut, n -= 3 * nmut;
        if (nkey > n)
            nkey = n;
        const uint8_t *key = p, *obj = p + nkey;
        size_t nobj = n - nkey, total = CG_DISK_HEADER + nkey + nobj;
        uint8_t *good = malloc(total), *img = malloc(total);
        FUZZ_CHECK(good && img);
        cg_disk_format(good, key, nkey, obj, nobj);
        memcpy(img, good, total);
        for (size_t i = 0; i < nmut; i++)
            img[((size_t)mut[3 * i] << 8 | mut[3 * i + 1]) % total] ^= mut[3 * i + 2];
        size_t len = cut && cut < total ? total - cut : total;
        int same = len == total && memcmp(img, good, total) == 0;
        int ok = parse_both(img, len, key, nkey);
        /* accepted exactly when undamaged (an empty object is never valid) */
        FUZZ_CHECK(ok == (same && nobj > 0));
        free(good);
        free(img);
    }
    return 0;
}
