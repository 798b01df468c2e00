/*
 * test_checkpoint.c — safetensors, .npy and .npz: round trips of every
 * dtype (rank 0, empty, views, large), zero-copy loading and the mapping's
 * lifetime, hand-built files NumPy and the safetensors reference write
 * (big-endian, Fortran order, header versions, zip64), every hostile-file
 * case (RLX_E_IO naming the file, never a crash) and bad arguments.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "tensor/checkpoint.h"

static char dir[64];

static const char *tmp(const char *name)
{
    static char buf[4][256];
    static int k;
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/rlx-test-ckpt-XXXXXX");
        if (!mkdtemp(dir))
            test_fail(__FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
    }
    char *b = buf[k++ % 4];
    snprintf(b, 256, "%s/%s", dir, name);
    return b;
}

static void put_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n)
        test_fail(__FILE__, __LINE__, "cannot write %s", path);
    if (f)
        fclose(f);
}

static unsigned char *get_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *p = NULL;
    *n = 0;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        p = malloc((size_t)len + 1);
        rewind(f);
        if (p && fread(p, 1, (size_t)len, f) == (size_t)len)
            *n = (size_t)len;
    }
    if (f)
        fclose(f);
    return p;
}

/* A safetensors file of header text followed by data bytes. */
static void put_st(const char *path, const char *header, const void *data, size_t n)
{
    size_t hl = strlen(header);
    unsigned char *b = malloc(8 + hl + n + 1);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    if (n)
        memcpy(b + 8 + hl, data, n);
    put_file(path, b, 8 + hl + n);
    free(b);
}

static const rlx_dtype DTYPES[] = {RLX_BOOL, RLX_I32, RLX_I64, RLX_F32, RLX_F64, RLX_F16,
                                   RLX_BF16, RLX_I8,  RLX_U8,  RLX_I16, RLX_U32};
#define NDT (int)(sizeof DTYPES / sizeof *DTYPES)
#define SET_MAX (NDT * 5)

/* Tensors of every dtype (bf16 only when npy is false: NumPy has none) and
 * a few shapes, with a view among them. */
static int make_set(rlx_tensor **ts, const char **names, char nb[][32], bool npy)
{
    static const int64_t shapes[][3] = {{0}, {5, 7, 11}, {3, 0, 2}, {1}};
    static const int ranks[] = {0, 3, 3, 1};
    int n = 0;
    for (int d = 0; d < NDT; d++) {
        if (npy && DTYPES[d] == RLX_BF16)
            continue;
        for (int s = 0; s < 4; s++) {
            double lo = DTYPES[d] == RLX_BOOL ? 0 : -100, hi = DTYPES[d] == RLX_BOOL ? 2 : 100;
            ts[n] = trand(DTYPES[d], ranks[s], shapes[s], lo, hi);
            snprintf(nb[n], 32, "%s/%d", rlx_dtype_name(DTYPES[d]), s);
            names[n] = nb[n];
            n++;
        }
        rlx_tensor *m = trand(DTYPES[d], 2, (int64_t[]){4, 6}, 0, 2);
        ts[n] = rlx_transpose(m, 0, NULL); /* a non-contiguous view */
        snprintf(nb[n], 32, "%s/view", rlx_dtype_name(DTYPES[d]));
        names[n] = nb[n];
        n++;
    }
    return n;
}

static void expect_same_tensor(rlx_tensor *got, rlx_tensor *want, const char *what)
{
    if (!got) {
        test_fail(__FILE__, __LINE__, "%s: missing (%s)", what, rlx_last_error());
        return;
    }
    CHECK_EQ_INT(rlx_dtype_of(got), rlx_dtype_of(want));
    EXPECT_SAME(got, want, 0);
}

static void check_checkpoint(rlx_checkpoint *c, int n, const char *const *names, rlx_tensor *const *ts)
{
    if (!c) {
        test_fail(__FILE__, __LINE__, "load failed: %s", rlx_last_error());
        return;
    }
    CHECK_EQ_INT(rlx_checkpoint_count(c), n);
    for (int i = 0; i < n; i++) {
        const char *nm = rlx_checkpoint_name(c, i);
        CHECK(nm && !strcmp(nm, names[i])); /* file order is the saved order */
        expect_same_tensor(rlx_checkpoint_get(c, names[i]), ts[i], names[i]);
    }
}

TEST(roundtrip_safetensors_every_dtype)
{
    rlx_tensor *ts[SET_MAX];
    const char *names[SET_MAX];
    char nb[SET_MAX][32];
    int n = make_set(ts, names, nb, false);
    CHECK_EQ_INT(rlx_save_safetensors(tmp("all.safetensors"), n, names, ts), RLX_OK);
    rlx_checkpoint *c = rlx_load_safetensors(tmp("all.safetensors"));
    check_checkpoint(c, n, names, ts);
    rlx_checkpoint_free(c);
}

TEST(roundtrip_npz_every_dtype)
{
    rlx_tensor *ts[SET_MAX];
    const char *names[SET_MAX];
    char nb[SET_MAX][32];
    int n = make_set(ts, names, nb, true);
    CHECK_EQ_INT(rlx_save_npz(tmp("all.npz"), n, names, ts), RLX_OK);
    rlx_checkpoint *c = rlx_load_npz(tmp("all.npz"));
    check_checkpoint(c, n, names, ts);
    rlx_checkpoint_free(c);
    ck_zip64_always = true; /* the zip64 writer and reader with a small file */
    CHECK_EQ_INT(rlx_save_npz(tmp("all64.npz"), n, names, ts), RLX_OK);
    ck_zip64_always = false;
    c = rlx_load_npz(tmp("all64.npz"));
    check_checkpoint(c, n, names, ts);
    rlx_checkpoint_free(c);
    size_t len;
    unsigned char *b = get_file(tmp("all64.npz"), &len);
    CHECK(b && len > 98 && b[len - 22 - 20] == 0x50 && b[len - 22 - 19] == 0x4b && b[len - 22 - 18] == 6 &&
          b[len - 22 - 17] == 7); /* the zip64 locator */
    free(b);
    c = rlx_load_npz(tmp("empty.npz"));
    CHECK(c == NULL);
    CHECK_EQ_INT(rlx_save_npz(tmp("empty.npz"), 0, NULL, NULL), RLX_OK);
    c = rlx_load_npz(tmp("empty.npz"));
    CHECK(c && rlx_checkpoint_count(c) == 0);
    rlx_checkpoint_free(c);
}

TEST(roundtrip_npy_every_dtype)
{
    rlx_tensor *ts[SET_MAX];
    const char *names[SET_MAX];
    char nb[SET_MAX][32];
    int n = make_set(ts, names, nb, true);
    for (int i = 0; i < n; i++) {
        CHECK_EQ_INT(rlx_save_npy(tmp("one.npy"), ts[i]), RLX_OK);
        expect_same_tensor(rlx_load_npy(tmp("one.npy")), ts[i], names[i]);
    }
    size_t len;
    unsigned char *b = get_file(tmp("one.npy"), &len);
    CHECK(b && len >= 64 && !memcmp(b, "\x93NUMPY\x01\x00", 8) && (b[8] + 10) % 64 == 0);
    free(b);
}

TEST(roundtrip_large)
{
    int64_t shape[2] = {256, 1024};
    rlx_tensor *t[2] = {trand(RLX_F64, 2, shape, -1, 1), trand(RLX_I32, 2, shape, -1000, 1000)};
    const char *names[2] = {"w", "idx"};
    CHECK_EQ_INT(rlx_save_safetensors(tmp("big.safetensors"), 2, names, t), RLX_OK);
    rlx_checkpoint *c = rlx_load_safetensors(tmp("big.safetensors"));
    check_checkpoint(c, 2, names, t);
    rlx_checkpoint_free(c);
    CHECK_EQ_INT(rlx_save_npz(tmp("big.npz"), 2, names, t), RLX_OK);
    c = rlx_load_npz(tmp("big.npz"));
    check_checkpoint(c, 2, names, t);
    rlx_checkpoint_free(c);
}

/* Whether p lies in a mapping of a file whose path ends with name. */
static bool mapped_from(const void *p, const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char *path = strchr(line, '/');
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && path && (uintptr_t)p >= lo && (uintptr_t)p < hi) {
            path[strcspn(path, "\n")] = 0;
            size_t a = strlen(path), b = strlen(name);
            found = a >= b && !strcmp(path + a - b, name);
        }
    }
    if (f)
        fclose(f);
    return found;
}

TEST(zero_copy_outlives_checkpoint)
{
    rlx_tensor *t[3] = {trand(RLX_F32, 2, (int64_t[]){64, 64}, -1, 1), trand(RLX_F64, 1, (int64_t[]){9}, -1, 1),
                        trand(RLX_BOOL, 1, (int64_t[]){5}, 0, 2)};
    const char *names[3] = {"a", "b", "c"};
    CHECK_EQ_INT(rlx_save_safetensors(tmp("zc.safetensors"), 3, names, t), RLX_OK);
    rlx_checkpoint *c = rlx_load_safetensors(tmp("zc.safetensors"));
    rlx_scope_begin(); /* the handles below are released by the scope's end */
    rlx_tensor *a = c ? rlx_checkpoint_get(c, "a") : NULL;
    rlx_scope_begin();
    rlx_tensor *b = c ? rlx_checkpoint_get(c, "b") : NULL;
    rlx_checkpoint_free(c);
    CHECK(a && b && rlx_is_realized(a));
    const void *pa = a ? rlx_data(a) : NULL;
    CHECK(pa && mapped_from(pa, "zc.safetensors"));
    CHECK(b && mapped_from(rlx_data(b), "zc.safetensors"));
    CHECK_EQ_INT(rlx_storage_bytes(a), 64 * 64 * 4);
    EXPECT_SAME(rlx_add(a, a), rlx_mul_s(t[0], 2), 0); /* computes over the mapping */
    rlx_scope_end();
    CHECK(pa && mapped_from(pa, "zc.safetensors")); /* a still holds it */
    rlx_scope_end();
    CHECK(!pa || !mapped_from(pa, "zc.safetensors")); /* last reference gone: unmapped */
    /* .npy (64-byte aligned data) and stored .npz are zero-copy too */
    CHECK_EQ_INT(rlx_save_npy(tmp("zc.npy"), t[0]), RLX_OK);
    rlx_tensor *n = rlx_load_npy(tmp("zc.npy"));
    CHECK(n && mapped_from(rlx_data(n), "zc.npy"));
}

TEST(misaligned_data_is_copied)
{
    /* a 2-byte bool, then an f32 at data offset 2: not 4-byte aligned */
    unsigned char data[2 + 8] = {1, 0};
    float v[2] = {1.5f, -2.25f};
    memcpy(data + 2, v, 8);
    char h[256];
    int hl = snprintf(h, sizeof h, "%s", "{\"m\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]},"
                                         "\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[2,10]}}");
    while (hl % 8)
        h[hl++] = ' ';
    h[hl] = 0;
    put_st(tmp("mis.safetensors"), h, data, sizeof data);
    rlx_checkpoint *c = rlx_load_safetensors(tmp("mis.safetensors"));
    rlx_tensor *x = c ? rlx_checkpoint_get(c, "x") : NULL;
    rlx_tensor *m = c ? rlx_checkpoint_get(c, "m") : NULL;
    CHECK(x && m);
    if (x && m) {
        EXPECT(x, RLX_F32, 1, ((int64_t[]){2}), ((double[]){1.5, -2.25}), 0);
        EXPECT(m, RLX_BOOL, 1, ((int64_t[]){2}), ((double[]){1, 0}), 0);
        CHECK(((uintptr_t)rlx_data(x) & 3) == 0 && !mapped_from(rlx_data(x), "mis.safetensors"));
        CHECK(mapped_from(rlx_data(m), "mis.safetensors"));
    }
    rlx_checkpoint_free(c);
    /* bool bytes other than 0/1 read as true, in a copy */
    unsigned char bb[2] = {7, 0};
    put_st(tmp("bool.safetensors"), "{\"m\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]}}", bb, 2);
    c = rlx_load_safetensors(tmp("bool.safetensors"));
    m = c ? rlx_checkpoint_get(c, "m") : NULL;
    CHECK(m != NULL);
    if (m) {
        EXPECT(m, RLX_BOOL, 1, ((int64_t[]){2}), ((double[]){1, 0}), 0);
        CHECK(((const unsigned char *)rlx_data(m))[0] == 1);
    }
    rlx_checkpoint_free(c);
}

/* A .npy image: header text (the dict) padded to 64, then the data bytes. */
static void put_npy(const char *path, int major, const char *dict, const void *data, size_t n)
{
    unsigned char b[1024];
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t total = (pre + dl + 1 + 63) / 64 * 64, hl = total - pre;
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    for (size_t i = 0; i < pre - 8; i++)
        b[8 + i] = (unsigned char)(hl >> (8 * i));
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', hl - dl - 1);
    b[total - 1] = '\n';
    memcpy(b + total, data, n);
    put_file(path, b, total + n);
}

TEST(npy_variants)
{
    /* big-endian f8 and i4 */
    unsigned char be[16] = {0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0xc0, 0x04, 0, 0, 0, 0, 0, 0}; /* 1.5, -2.5 */
    put_npy(tmp("be.npy"), 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", be, 16);
    rlx_tensor *t = rlx_load_npy(tmp("be.npy"));
    CHECK(t != NULL);
    if (t)
        EXPECT(t, RLX_F64, 1, ((int64_t[]){2}), ((double[]){1.5, -2.5}), 0);
    unsigned char bi[8] = {0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe};
    put_npy(tmp("bi.npy"), 2, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", bi, 8);
    t = rlx_load_npy(tmp("bi.npy"));
    CHECK(t != NULL);
    if (t)
        EXPECT(t, RLX_I32, 1, ((int64_t[]){2}), ((double[]){258, -2}), 0);
    /* Fortran order [2, 3]: memory holds columns */
    int64_t f[6] = {1, 4, 2, 5, 3, 6};
    put_npy(tmp("f.npy"), 3, "{\"descr\": \"<i8\", \"fortran_order\": True, \"shape\": (2, 3)}", f, sizeof f);
    t = rlx_load_npy(tmp("f.npy"));
    CHECK(t != NULL);
    if (t)
        EXPECT(t, RLX_I64, 2, ((int64_t[]){2, 3}), ((double[]){1, 2, 3, 4, 5, 6}), 0);
    /* rank 0, '|b1', '<f4' */
    unsigned char one = 1;
    put_npy(tmp("b.npy"), 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (), }", &one, 1);
    t = rlx_load_npy(tmp("b.npy"));
    CHECK(t != NULL);
    if (t)
        EXPECT(t, RLX_BOOL, 0, NULL, ((double[]){1}), 0);
}

/* n elements of dt: every bit pattern of a 1- or 2-byte type (NaN
 * payloads, -0, subnormals, infinities of f16 and bf16), random words of a
 * wider one; written byte by byte, little-endian. */
static unsigned char *patterns(rlx_dtype dt, int64_t *n)
{
    size_t size = ir_dtype_size(dt);
    *n = size == 1 ? 256 : 65536;
    unsigned char *b = malloc((size_t)*n * size);
    uint64_t x = test_seed | 1;
    for (int64_t i = 0; i < *n; i++) {
        uint64_t v = (uint64_t)i;
        if (size > 2) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            v = i < 4 ? (uint64_t[]){0, 1, 0x80000000u, 0xffffffffu}[i] : x;
        }
        for (size_t k = 0; k < size; k++)
            b[(size_t)i * size + k] = (unsigned char)(v >> (8 * k));
    }
    return b;
}

static const rlx_dtype NARROW[] = {RLX_F16, RLX_BF16, RLX_I8, RLX_U8, RLX_I16, RLX_U32};
#define NNARROW (int)(sizeof NARROW / sizeof *NARROW)

static void expect_bytes(rlx_tensor *t, rlx_dtype dt, const unsigned char *b, int64_t n, const char *what)
{
    const void *p = t ? rlx_data(t) : NULL;
    if (!p || rlx_dtype_of(t) != dt || rlx_numel(t) != n || memcmp(p, b, (size_t)n * ir_dtype_size(dt)))
        test_fail(__FILE__, __LINE__, "%s %s: the bytes changed (%s)", what, rlx_dtype_name(dt),
                  t ? "" : rlx_last_error());
}

TEST(roundtrip_narrow_bit_exact)
{
    rlx_tensor *ts[NNARROW];
    unsigned char *bytes[NNARROW];
    int64_t count[NNARROW];
    const char *names[NNARROW];
    for (int i = 0; i < NNARROW; i++) {
        bytes[i] = patterns(NARROW[i], &count[i]);
        ts[i] = rlx_from_data(NARROW[i], 1, &count[i], bytes[i]);
        names[i] = rlx_dtype_name(NARROW[i]);
    }
    CHECK_EQ_INT(rlx_save_safetensors(tmp("narrow.safetensors"), NNARROW, names, ts), RLX_OK);
    rlx_checkpoint *c = rlx_load_safetensors(tmp("narrow.safetensors"));
    CHECK(c != NULL);
    for (int i = 0; c && i < NNARROW; i++) {
        rlx_tensor *t = rlx_checkpoint_get(c, names[i]);
        expect_bytes(t, NARROW[i], bytes[i], count[i], "safetensors");
        CHECK(t && mapped_from(rlx_data(t), "narrow.safetensors")); /* aligned: read in place */
    }
    rlx_checkpoint_free(c);
    /* bf16 has no NumPy descr: the others through .npz and .npy */
    const char *nn[NNARROW];
    rlx_tensor *nt[NNARROW];
    int k = 0;
    for (int i = 0; i < NNARROW; i++)
        if (NARROW[i] != RLX_BF16) {
            nn[k] = names[i];
            nt[k++] = ts[i];
        }
    CHECK_EQ_INT(rlx_save_npz(tmp("narrow.npz"), k, nn, nt), RLX_OK);
    c = rlx_load_npz(tmp("narrow.npz"));
    CHECK(c != NULL);
    for (int i = 0; c && i < NNARROW; i++)
        if (NARROW[i] != RLX_BF16)
            expect_bytes(rlx_checkpoint_get(c, names[i]), NARROW[i], bytes[i], count[i], "npz");
    rlx_checkpoint_free(c);
    for (int i = 0; i < NNARROW; i++) {
        if (NARROW[i] == RLX_BF16)
            continue;
        CHECK_EQ_INT(rlx_save_npy(tmp("narrow.npy"), ts[i]), RLX_OK);
        rlx_tensor *t = rlx_load_npy(tmp("narrow.npy"));
        expect_bytes(t, NARROW[i], bytes[i], count[i], "npy");
        CHECK(t && mapped_from(rlx_data(t), "narrow.npy"));
    }
    for (int i = 0; i < NNARROW; i++)
        free(bytes[i]);
}

/* Files written the way NumPy and the safetensors reference write them:
 * values known from the bit patterns, not from librlx. */
TEST(narrow_files_by_hand)
{
    unsigned char d[28] = {
        0x00, 0x3c, 0x00, 0xc0, 0x00, 0x7c, 0x01, 0x00, /* F16 1, -2, inf, 2^-24 */
        0x80, 0x3f, 0x20, 0xc0, 0x01, 0x00,             /* BF16 1, -2.5, 2^-133 */
        0x00, 0x80,                                     /* I16 -32768 */
        0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x80, /* U32 4294967295, 2147483648 */
        0xff, 0x80,                                     /* I8 -1, -128 */
        0xff, 0x80};                                    /* U8 255, 128 */
    char h[512];
    int hl = snprintf(h, sizeof h, "%s",
                      "{\"h\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[8,14]},"
                      "\"s\":{\"dtype\":\"I16\",\"shape\":[],\"data_offsets\":[14,16]},"
                      "\"u\":{\"dtype\":\"U32\",\"shape\":[2],\"data_offsets\":[16,24]},"
                      "\"c\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[24,26]},"
                      "\"d\":{\"dtype\":\"U8\",\"shape\":[2,1],\"data_offsets\":[26,28]}}");
    while (hl % 8)
        h[hl++] = ' ';
    h[hl] = 0;
    put_st(tmp("hand.safetensors"), h, d, sizeof d);
    rlx_checkpoint *c = rlx_load_safetensors(tmp("hand.safetensors"));
    CHECK(c && rlx_checkpoint_count(c) == 6);
    if (c) {
        EXPECT(rlx_checkpoint_get(c, "h"), RLX_F16, 1, ((int64_t[]){4}), ((double[]){1, -2, INFINITY, 0x1p-24}), 0);
        EXPECT(rlx_checkpoint_get(c, "b"), RLX_BF16, 1, ((int64_t[]){3}), ((double[]){1, -2.5, 0x1p-133}), 0);
        EXPECT(rlx_checkpoint_get(c, "s"), RLX_I16, 0, NULL, ((double[]){-32768}), 0);
        EXPECT(rlx_checkpoint_get(c, "u"), RLX_U32, 1, ((int64_t[]){2}), ((double[]){4294967295.0, 2147483648.0}), 0);
        EXPECT(rlx_checkpoint_get(c, "c"), RLX_I8, 1, ((int64_t[]){2}), ((double[]){-1, -128}), 0);
        EXPECT(rlx_checkpoint_get(c, "d"), RLX_U8, 2, ((int64_t[]){2, 1}), ((double[]){255, 128}), 0);
    }
    rlx_checkpoint_free(c);
    /* .npy: little- and big-endian 2- and 4-byte types, '|' 1-byte ones */
    static const struct {
        const char *descr;
        rlx_dtype dt;
        unsigned char data[8];
        size_t n;
        double want[2];
    } npy[] = {
        {"<f2", RLX_F16, {0x00, 0x3c, 0x00, 0xc0}, 4, {1, -2}},
        {">f2", RLX_F16, {0x3c, 0x00, 0xfc, 0x00}, 4, {1, -INFINITY}},
        {"|i1", RLX_I8, {0x7f, 0x80}, 2, {127, -128}},
        {"|u1", RLX_U8, {0xff, 0x00}, 2, {255, 0}},
        {"<i2", RLX_I16, {0xfe, 0xff, 0xff, 0x7f}, 4, {-2, 32767}},
        {">i2", RLX_I16, {0xff, 0xfe, 0x80, 0x00}, 4, {-2, -32768}},
        {"<u4", RLX_U32, {0xfe, 0xff, 0xff, 0xff, 1, 0, 0, 0}, 8, {4294967294.0, 1}},
        {">u4", RLX_U32, {0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 1}, 8, {4294967294.0, 1}},
    };
    for (size_t i = 0; i < sizeof npy / sizeof *npy; i++) {
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (2,), }", npy[i].descr);
        put_npy(tmp("hand.npy"), 1, dict, npy[i].data, npy[i].n);
        rlx_tensor *t = rlx_load_npy(tmp("hand.npy"));
        if (!t)
            test_fail(__FILE__, __LINE__, "%s: %s", npy[i].descr, rlx_last_error());
        else
            EXPECT(t, npy[i].dt, 1, ((int64_t[]){2}), npy[i].want, 0);
    }
    /* what rlx_save_npy writes is NumPy's descr for each type */
    static const struct {
        rlx_dtype dt;
        const char *descr;
    } out[] = {{RLX_F16, "'<f2'"}, {RLX_I8, "'|i1'"}, {RLX_U8, "'|u1'"}, {RLX_I16, "'<i2'"}, {RLX_U32, "'<u4'"}};
    for (size_t i = 0; i < sizeof out / sizeof *out; i++) {
        CHECK_EQ_INT(rlx_save_npy(tmp("descr.npy"), rlx_zeros(out[i].dt, 1, (int64_t[]){3})), RLX_OK);
        size_t len;
        unsigned char *b = get_file(tmp("descr.npy"), &len);
        if (!b || len < 64 || !memmem(b, 64, out[i].descr, strlen(out[i].descr)))
            test_fail(__FILE__, __LINE__, "%s: the header lacks %s", rlx_dtype_name(out[i].dt), out[i].descr);
        free(b);
    }
}

/* st is RLX_E_DTYPE and the message starts with fn and names a and b. */
static void expect_dtype_error(rlx_status st, const char *fn, const char *a, const char *b)
{
    const char *m = rlx_last_error();
    if (st != RLX_E_DTYPE || rlx_last_status() != RLX_E_DTYPE || strncmp(m, fn, strlen(fn)) || !strstr(m, a) ||
        !strstr(m, b))
        test_fail(__FILE__, __LINE__, "%s: status %d '%s', expected RLX_E_DTYPE naming %s and %s", fn, (int)st, m, a,
                  b);
    rlx_clear_error();
}

/* bf16 has no .npy descr: both NumPy savers refuse it before writing. */
TEST(bf16_refused_by_numpy_formats)
{
    rlx_tensor *b = trand(RLX_BF16, 1, (int64_t[]){3}, -1, 1), *f = trand(RLX_F32, 1, (int64_t[]){3}, -1, 1);
    expect_dtype_error(rlx_save_npy(tmp("bf.npy"), b), "rlx_save_npy", "bf16", "safetensors");
    CHECK(access(tmp("bf.npy"), F_OK) != 0);
    rlx_tensor *two[2] = {f, b};
    const char *names[2] = {"f", "b"};
    CHECK_EQ_INT(rlx_save_npz(tmp("bf.npz"), 1, names, two), RLX_OK);
    size_t before, after;
    unsigned char *old = get_file(tmp("bf.npz"), &before);
    expect_dtype_error(rlx_save_npz(tmp("bf.npz"), 2, names, two), "rlx_save_npz", "tensors[1]", "bf16");
    unsigned char *now = get_file(tmp("bf.npz"), &after);
    CHECK(old && now && before == after && !memcmp(old, now, before)); /* the old file stays whole */
    free(old);
    free(now);
    /* a bf16 view, unrealized, is refused the same way; cast to f32 it saves */
    rlx_tensor *v = rlx_mul_s(rlx_flip(b, 0), 2);
    expect_dtype_error(rlx_save_npy(tmp("bf.npy"), v), "rlx_save_npy", "t is bf16", "descr");
    CHECK_EQ_INT(rlx_save_npy(tmp("bf.npy"), rlx_cast(v, RLX_F32)), RLX_OK);
    EXPECT_SAME(rlx_load_npy(tmp("bf.npy")), rlx_cast(v, RLX_F32), 0);
}

typedef struct {
    const char *what;
    const char *header; /* safetensors header text */
    size_t data;        /* data bytes after it (zeros) */
    rlx_status want;
} st_case;

static const st_case ST_CASES[] = {
    {"not JSON", "{abc", 0, RLX_E_IO},
    {"not an object", "[1, 2]", 0, RLX_E_IO},
    {"trailing garbage", "{} x", 0, RLX_E_IO},
    {"deep nesting", "{\"__metadata__\":[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]}", 0, RLX_E_IO},
    {"huge number", "{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}", 4, RLX_E_IO},
    {"fraction", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, RLX_E_IO},
    {"overflowing shape", "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", 8,
     RLX_E_IO},
    {"negative dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, RLX_E_IO},
    {"rank 9", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, RLX_E_IO},
    {"wrong dtype name", "{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, RLX_E_IO},
    {"dtype not a string", "{\"a\":{\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, RLX_E_IO},
    {"dtype librlx lacks", "{\"a\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, RLX_E_UNSUPPORTED},
    {"fp8 librlx lacks", "{\"a\":{\"dtype\":\"F8_E5M2\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, RLX_E_UNSUPPORTED},
    {"dtype in lower case", "{\"a\":{\"dtype\":\"f16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, RLX_E_IO},
    {"numpy descr as dtype", "{\"a\":{\"dtype\":\"<f2\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, RLX_E_IO},
    {"bf16 span of f32", "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, RLX_E_IO},
    {"f16 span of f32", "{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, RLX_E_IO},
    {"i8 span short", "{\"a\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, RLX_E_IO},
    {"u32 span of u8", "{\"a\":{\"dtype\":\"U32\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4, RLX_E_IO},
    {"i16 overflowing shape", "{\"a\":{\"dtype\":\"I16\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,2]}}",
     2, RLX_E_IO},
    {"offsets past the data", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, RLX_E_IO},
    {"offsets reversed", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4, RLX_E_IO},
    {"offsets not the size", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, RLX_E_IO},
    {"offsets negative", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 8, RLX_E_IO},
    {"offsets one number", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, RLX_E_IO},
    {"overlap", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, RLX_E_IO},
    {"gap", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
            "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, RLX_E_IO},
    {"data after the tensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 12, RLX_E_IO},
    {"duplicate name", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, RLX_E_IO},
    {"duplicate field", "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, RLX_E_IO},
    {"missing field", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, RLX_E_IO},
    {"unknown field", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4, RLX_E_IO},
    {"entry not an object", "{\"a\":[1]}", 0, RLX_E_IO},
    {"escaped NUL", "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, RLX_E_IO},
    {"lone surrogate", "{\"\\ud800\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, RLX_E_IO},
    {"bad escape", "{\"\\q\":1}", 0, RLX_E_IO},
    {"invalid UTF-8", "{\"\xc3\x28\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, RLX_E_IO},
    {"control character", "{\"a\tb\":1}", 0, RLX_E_IO},
    {"unterminated string", "{\"abc", 0, RLX_E_IO},
    {"metadata not strings", "{\"__metadata__\":{\"k\":1}}", 0, RLX_E_IO},
    {"metadata not an object", "{\"__metadata__\":\"x\"}", 0, RLX_E_IO},
    {"leading zero", "{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", 4, RLX_E_IO},
    {"missing colon", "{\"a\" 1}", 0, RLX_E_IO},
    {"missing comma", "{\"a\":1 \"b\":2}", 0, RLX_E_IO},
    {"empty header", "", 0, RLX_E_IO},
};

static void check_io_error(rlx_status st, const char *fn, const char *path, const char *what)
{
    if (rlx_last_status() != st || !strstr(rlx_last_error(), fn) || !strstr(rlx_last_error(), path))
        test_fail(__FILE__, __LINE__, "%s: status %d '%s', expected %d naming %s and the file", what,
                  (int)rlx_last_status(), rlx_last_error(), (int)st, fn);
}

TEST(hostile_safetensors)
{
    unsigned char zeros[64] = {0};
    const char *path = tmp("bad.safetensors");
    for (size_t i = 0; i < sizeof ST_CASES / sizeof *ST_CASES; i++) {
        put_st(path, ST_CASES[i].header, zeros, ST_CASES[i].data);
        rlx_clear_error();
        rlx_checkpoint *c = rlx_load_safetensors(path);
        CHECK(c == NULL);
        rlx_checkpoint_free(c);
        check_io_error(ST_CASES[i].want, "rlx_load_safetensors", path, ST_CASES[i].what);
    }
    /* a valid header parses (the cases above fail for their own reason) */
    put_st(path, "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           zeros, 4);
    rlx_checkpoint *c = rlx_load_safetensors(path);
    CHECK(c && rlx_checkpoint_count(c) == 1);
    rlx_checkpoint_free(c);
    /* the length field: short file, past the end, empty, raw NUL in the header */
    put_file(path, "\x10\0\0", 3);
    CHECK(!rlx_load_safetensors(path));
    check_io_error(RLX_E_IO, "rlx_load_safetensors", path, "short file");
    put_file(path, "\xff\xff\xff\xff\0\0\0\0{}", 10);
    CHECK(!rlx_load_safetensors(path));
    check_io_error(RLX_E_IO, "rlx_load_safetensors", path, "length past the end");
    CHECK(strstr(rlx_last_error(), "past the end"));
    put_file(path, "\xff\xff\xff\xff\xff\xff\xff\xff{}", 10);
    CHECK(!rlx_load_safetensors(path));
    check_io_error(RLX_E_IO, "rlx_load_safetensors", path, "huge length");
    put_file(path, "", 0);
    CHECK(!rlx_load_safetensors(path));
    check_io_error(RLX_E_IO, "rlx_load_safetensors", path, "empty file");
    put_file(path, "\x04\0\0\0\0\0\0\0{\0}\n", 12);
    CHECK(!rlx_load_safetensors(path));
    check_io_error(RLX_E_IO, "rlx_load_safetensors", path, "NUL byte");
    /* every truncation of a valid file */
    rlx_tensor *t[2] = {trand(RLX_F32, 1, (int64_t[]){3}, 0, 1), trand(RLX_I64, 1, (int64_t[]){2}, 0, 9)};
    const char *names[2] = {"x", "y"};
    CHECK_EQ_INT(rlx_save_safetensors(tmp("ok.safetensors"), 2, names, t), RLX_OK);
    size_t len;
    unsigned char *b = get_file(tmp("ok.safetensors"), &len);
    for (size_t cut = 0; b && cut < len; cut++) {
        put_file(path, b, cut);
        CHECK(!rlx_load_safetensors(path));
        check_io_error(RLX_E_IO, "rlx_load_safetensors", path, "truncated");
    }
    free(b);
    CHECK(!rlx_load_safetensors(tmp("missing.safetensors")));
    check_io_error(RLX_E_IO, "rlx_load_safetensors", "missing.safetensors", "no such file");
    CHECK(strstr(rlx_last_error(), strerror(ENOENT)));
    CHECK(!rlx_load_safetensors(dir));
    check_io_error(RLX_E_IO, "rlx_load_safetensors", dir, "a directory");
}

typedef struct {
    const char *what;
    int major;
    const char *dict;
    size_t data;
    rlx_status want;
} npy_case;

static const npy_case NPY_CASES[] = {
    {"descr unknown", 1, "{'descr': '<U4', 'fortran_order': False, 'shape': (1,), }", 16, RLX_E_IO},
    {"descr librlx lacks", 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }", 2, RLX_E_UNSUPPORTED},
    {"u8 descr librlx lacks", 1, "{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }", 8, RLX_E_UNSUPPORTED},
    {"bfloat16 by name", 1, "{'descr': 'bfloat16', 'fortran_order': False, 'shape': (1,), }", 2, RLX_E_IO},
    {"void descr", 1, "{'descr': '|V2', 'fortran_order': False, 'shape': (1,), }", 2, RLX_E_IO},
    {"f3 descr", 1, "{'descr': '<f3', 'fortran_order': False, 'shape': (1,), }", 3, RLX_E_IO},
    {"i1 data short", 1, "{'descr': '>i1', 'fortran_order': False, 'shape': (2,), }", 1, RLX_E_IO},
    {"f2 data short", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", 4, RLX_E_IO},
    {"u4 data of f2", 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (2,), }", 4, RLX_E_IO},
    {"structured descr", 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", 4, RLX_E_IO},
    {"rank 9", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4, RLX_E_IO},
    {"overflowing shape", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", 8,
     RLX_E_IO},
    {"huge dim", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }", 8, RLX_E_IO},
    {"negative dim", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 4, RLX_E_IO},
    {"data short", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 8, RLX_E_IO},
    {"data long", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 8, RLX_E_IO},
    {"missing key", 1, "{'descr': '<f4', 'shape': (1,), }", 4, RLX_E_IO},
    {"unknown key", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4, RLX_E_IO},
    {"repeated key", 1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4, RLX_E_IO},
    {"not a dict", 1, "[1]", 4, RLX_E_IO},
    {"fortran_order not a bool", 1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }", 4, RLX_E_IO},
    {"unterminated", 1, "{'descr': '<f4", 0, RLX_E_IO},
    {"bytes after the dict", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x", 4, RLX_E_IO},
    {"version 9", 9, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4, RLX_E_IO},
};

static void expect_npy_error(const char *path, rlx_status want, const char *what)
{
    rlx_clear_error();
    rlx_tensor *t = rlx_load_npy(path);
    CHECK(t == NULL);
    check_io_error(want, "rlx_load_npy", path, what);
}

TEST(hostile_npy)
{
    unsigned char zeros[64] = {0};
    const char *path = tmp("bad.npy");
    for (size_t i = 0; i < sizeof NPY_CASES / sizeof *NPY_CASES; i++) {
        put_npy(path, NPY_CASES[i].major == 9 ? 1 : NPY_CASES[i].major, NPY_CASES[i].dict, zeros, NPY_CASES[i].data);
        if (NPY_CASES[i].major == 9) {
            size_t len;
            unsigned char *b = get_file(path, &len);
            if (b) {
                b[6] = 9;
                put_file(path, b, len);
            }
            free(b);
        }
        expect_npy_error(path, NPY_CASES[i].want, NPY_CASES[i].what);
    }
    put_file(path, "\x93NUMPX\x01\x00\x10\x00{}", 12);
    CHECK_NULL_ERR(rlx_load_npy(path), RLX_E_IO, "rlx_load_npy");
    put_file(path, "\x93NUMPY\x01\x00\xff\xff{}", 12);
    expect_npy_error(path, RLX_E_IO, "header length past the end");
    put_file(path, "\x93NUMPY\x02\x00\xff\xff\xff", 11); /* found by fuzz_checkpoint: shorter than a 2.0 header */
    expect_npy_error(path, RLX_E_IO, "short 2.0 header");
    put_file(path, "\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14);
    CHECK_NULL_ERR(rlx_load_npy(path), RLX_E_IO, "rlx_load_npy");
    rlx_tensor *t = trand(RLX_F64, 2, (int64_t[]){2, 3}, 0, 1);
    CHECK_EQ_INT(rlx_save_npy(tmp("ok.npy"), t), RLX_OK);
    size_t len;
    unsigned char *b = get_file(tmp("ok.npy"), &len);
    for (size_t cut = 0; b && cut < len; cut++) {
        put_file(path, b, cut);
        CHECK_NULL_ERR(rlx_load_npy(path), RLX_E_IO, "rlx_load_npy");
    }
    free(b);
}

static void expect_npz_error(const char *path, const unsigned char *b, size_t len, const char *what)
{
    put_file(path, b, len);
    rlx_clear_error();
    rlx_checkpoint *c = rlx_load_npz(path);
    CHECK(c == NULL);
    rlx_checkpoint_free(c);
    check_io_error(RLX_E_IO, "rlx_load_npz", path, what);
}

TEST(hostile_npz)
{
    rlx_tensor *t[2] = {trand(RLX_F32, 1, (int64_t[]){3}, 0, 1), trand(RLX_I64, 1, (int64_t[]){2}, 0, 9)};
    const char *names[2] = {"x", "y"};
    CHECK_EQ_INT(rlx_save_npz(tmp("ok.npz"), 2, names, t), RLX_OK);
    size_t len;
    unsigned char *b = get_file(tmp("ok.npz"), &len);
    const char *path = tmp("bad.npz");
    if (!b)
        return;
    for (size_t cut = 0; cut < len; cut++)
        expect_npz_error(path, b, cut, "truncated");
    b[30 + 5 + 70] ^= 1; /* a data byte of x.npy: the CRC catches it */
    expect_npz_error(path, b, len, "CRC mismatch");
    CHECK(strstr(rlx_last_error(), "CRC"));
    b[30 + 5 + 70] ^= 1;
    b[8] = 12; /* method in the local header only: the central one counts */
    rlx_checkpoint *c = rlx_load_npz(tmp("ok.npz"));
    CHECK(c != NULL);
    rlx_checkpoint_free(c);
    b[8] = 0;
    size_t cd = len - 22 - 2 * (46 + 5);
    b[cd + 10] = 12; /* central method 12 (bzip2) */
    expect_npz_error(path, b, len, "method");
    b[cd + 10] = 8; /* DEFLATE over stored bytes: not a valid stream */
    expect_npz_error(path, b, len, "deflate");
    b[cd + 10] = 0;
    b[cd + 46 + 2] = 'p'; /* x.npp: not a .npy member (local name differs too) */
    expect_npz_error(path, b, len, "not npy");
    b[cd + 46 + 2] = 'n';
    b[cd + 42] = 0xf0; /* local header offset out of range */
    expect_npz_error(path, b, len, "offset");
    b[cd + 42] = 0;
    b[cd + 8] = 1; /* encrypted */
    expect_npz_error(path, b, len, "encrypted");
    b[cd + 8] = 0;
    b[len - 22 + 10] = 200; /* entry count larger than the directory */
    expect_npz_error(path, b, len, "count");
    b[len - 22 + 10] = 2;
    b[len - 22 + 4] = 1; /* multi-disk */
    expect_npz_error(path, b, len, "multi-disk");
    b[len - 22 + 4] = 0;
    b[len - 22 + 10] = b[len - 22 + 11] = b[len - 22 + 8] = b[len - 22 + 9] = 0xff; /* zip64 without a locator */
    expect_npz_error(path, b, len, "zip64 missing");
    free(b);
    expect_npz_error(path, (const unsigned char *)"PK\3\4 not a zip file at all, no directory record", 48, "no EOCD");
    /* a duplicate name: two members x.npy */
    const char *dup[2] = {"x", "z"};
    CHECK_EQ_INT(rlx_save_npz(tmp("dup.npz"), 2, dup, t), RLX_OK);
    b = get_file(tmp("dup.npz"), &len);
    if (b) {
        for (size_t i = 0; i + 5 <= len; i++)
            if (!memcmp(b + i, "z.npy", 5))
                b[i] = 'x';
        expect_npz_error(path, b, len, "duplicate");
        CHECK(strstr(rlx_last_error(), "duplicate"));
    }
    free(b);
}

TEST(bad_arguments)
{
    rlx_tensor *t = trand(RLX_F32, 1, (int64_t[]){3}, 0, 1);
    rlx_tensor *ts[2] = {t, t};
    const char *names[2] = {"a", "b"}, *same[2] = {"a", "a"}, *empty[1] = {""}, *null[1] = {NULL};
    const char *meta[1] = {"__metadata__"}, *bad8[1] = {"\xff"};
    const char *p = tmp("args.safetensors");
    CHECK_ERR(rlx_save_safetensors(NULL, 1, names, ts), RLX_E_ARG, "rlx_save_safetensors");
    CHECK_ERR(rlx_save_safetensors("", 1, names, ts), RLX_E_ARG, "rlx_save_safetensors");
    CHECK_ERR(rlx_save_safetensors(p, -1, names, ts), RLX_E_ARG, "rlx_save_safetensors");
    CHECK_ERR(rlx_save_safetensors(p, 1, NULL, ts), RLX_E_ARG, "rlx_save_safetensors");
    CHECK_ERR(rlx_save_safetensors(p, 1, names, NULL), RLX_E_ARG, "rlx_save_safetensors");
    CHECK_ERR(rlx_save_safetensors(p, 2, same, ts), RLX_E_ARG, "rlx_save_safetensors");
    CHECK_ERR(rlx_save_safetensors(p, 1, empty, ts), RLX_E_ARG, "rlx_save_safetensors");
    CHECK_ERR(rlx_save_safetensors(p, 1, null, ts), RLX_E_ARG, "rlx_save_safetensors");
    CHECK_ERR(rlx_save_safetensors(p, 1, meta, ts), RLX_E_ARG, "rlx_save_safetensors");
    CHECK_ERR(rlx_save_safetensors(p, 1, bad8, ts), RLX_E_ARG, "rlx_save_safetensors");
    CHECK_ERR(rlx_save_safetensors(p, 1, names, (rlx_tensor *[]){NULL}), RLX_E_ARG, "rlx_save_safetensors");
    rlx_clear_error();
    CHECK_EQ_INT(rlx_save_safetensors("/nonexistent-dir/x.safetensors", 1, names, ts), RLX_E_IO);
    CHECK(strstr(rlx_last_error(), strerror(ENOENT)) && strstr(rlx_last_error(), "/nonexistent-dir/x.safetensors"));
    CHECK_ERR(rlx_save_npz(NULL, 1, names, ts), RLX_E_ARG, "rlx_save_npz");
    CHECK_ERR(rlx_save_npz(p, -3, names, ts), RLX_E_ARG, "rlx_save_npz");
    CHECK_ERR(rlx_save_npz(p, 2, same, ts), RLX_E_ARG, "rlx_save_npz");
    CHECK_ERR(rlx_save_npz(p, 1, empty, ts), RLX_E_ARG, "rlx_save_npz");
    CHECK_ERR(rlx_save_npz(p, 1, bad8, ts), RLX_E_ARG, "rlx_save_npz");
    CHECK_ERR(rlx_save_npz("/nonexistent-dir/x.npz", 1, names, ts), RLX_E_IO, "rlx_save_npz");
    CHECK_ERR(rlx_save_npy(NULL, t), RLX_E_ARG, "rlx_save_npy");
    CHECK_ERR(rlx_save_npy(p, NULL), RLX_E_ARG, "rlx_save_npy");
    CHECK_ERR(rlx_save_npy("/nonexistent-dir/x.npy", t), RLX_E_IO, "rlx_save_npy");
    CHECK_NULL_ERR(rlx_load_npy(NULL), RLX_E_ARG, "rlx_load_npy");
    CHECK_NULL_ERR(rlx_load_npy("/nonexistent-dir/x.npy"), RLX_E_IO, "rlx_load_npy");
    rlx_clear_error();
    CHECK(!rlx_load_safetensors(NULL) && rlx_last_status() == RLX_E_ARG);
    rlx_clear_error();
    CHECK(!rlx_load_npz("") && rlx_last_status() == RLX_E_ARG);
    /* an unrealizable tensor fails the save, and the old file stays whole */
    CHECK_EQ_INT(rlx_save_safetensors(p, 1, names, ts), RLX_OK);
    rlx_tensor *in = rlx_input("x", RLX_F32, 1, (int64_t[]){3});
    CHECK_ERR(rlx_save_safetensors(p, 1, names, &in), RLX_E_ARG, "rlx_save_safetensors");
    rlx_checkpoint *c = rlx_load_safetensors(p);
    check_checkpoint(c, 1, names, ts);
    /* the checkpoint object */
    CHECK_EQ_INT(rlx_checkpoint_count(NULL), -1);
    CHECK_ERR(rlx_checkpoint_name(NULL, 0), RLX_E_ARG, "rlx_checkpoint_name");
    CHECK_ERR(rlx_checkpoint_name(c, 1), RLX_E_ARG, "rlx_checkpoint_name");
    CHECK_ERR(rlx_checkpoint_name(c, -1), RLX_E_ARG, "rlx_checkpoint_name");
    CHECK_NULL_ERR(rlx_checkpoint_get(c, "nope"), RLX_E_ARG, "rlx_checkpoint_get");
    CHECK_NULL_ERR(rlx_checkpoint_get(c, NULL), RLX_E_ARG, "rlx_checkpoint_get");
    CHECK_NULL_ERR(rlx_checkpoint_get(NULL, "a"), RLX_E_ARG, "rlx_checkpoint_get");
    rlx_checkpoint_free(c);
    rlx_checkpoint_free(NULL);
    /* no temporary file is left behind */
    char cmd[200];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q tmp-", dir);
    CHECK(system(cmd) != 0);
}

static int load_workload(void)
{
    rlx_checkpoint *c = rlx_load_safetensors(tmp("all.safetensors"));
    rlx_checkpoint *z = c ? rlx_load_npz(tmp("all.npz")) : NULL;
    int ok = z && rlx_checkpoint_count(c) == SET_MAX && rlx_checkpoint_count(z) == SET_MAX - 5; /* no bf16 */
    rlx_checkpoint_free(c);
    rlx_checkpoint_free(z);
    return ok;
}

TEST(load_allocation_failures) { ALLOC_WALK(load_workload, 5); }

TEST(cleanup)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (dir[0] && system(cmd) != 0)
        test_fail(__FILE__, __LINE__, "cannot remove %s", dir);
}

TEST_MAIN(T(roundtrip_safetensors_every_dtype), T(roundtrip_npz_every_dtype), T(roundtrip_npy_every_dtype),
          T(roundtrip_narrow_bit_exact), T(narrow_files_by_hand), T(bf16_refused_by_numpy_formats),
          T(roundtrip_large), T(zero_copy_outlives_checkpoint), T(misaligned_data_is_copied), T(npy_variants),
          T(hostile_safetensors), T(hostile_npy), T(hostile_npz), T(bad_arguments), T(load_allocation_failures),
          T(cleanup))
