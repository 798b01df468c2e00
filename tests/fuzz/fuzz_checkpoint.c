/*
 * fuzz_checkpoint.c — libFuzzer target for the checkpoint readers
 * (src/tensor/json.c, safetensors.c, npy.c, npz.c): the bytes are a file.
 * A reader must never crash, read outside the mapping or leak; it either
 * fails with a recorded error (RLX_E_IO, RLX_E_UNSUPPORTED, RLX_E_NOMEM)
 * or gives tensors that realize and survive a save and reload unchanged.
 *
 * The first byte picks the reader: 0 the JSON parser alone, 1 safetensors,
 * 2 .npy, 3 .npz (the rest of the bytes are the file).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "tensor/json.h"

static char path[64], path2[64];

static void remove_files(void)
{
    unlink(path);
    unlink(path2);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    snprintf(path, sizeof path, "/tmp/rlx-fuzz-ckpt-%ld", (long)getpid());
    snprintf(path2, sizeof path2, "/tmp/rlx-fuzz-ckpt-%ld.out", (long)getpid());
    atexit(remove_files);
    return 0;
}

static void fuzz_json(const uint8_t *p, size_t n)
{
    char err[128];
    int nomem;
    json_doc *doc;
    const json_value *v = json_parse((const char *)p, n, 8, &doc, err, sizeof err, &nomem);
    FUZZ_ASSERT(v || err[0], "json_parse failed without a message");
    json_free(doc);
}

static bool failed_cleanly(void)
{
    rlx_status st = rlx_last_status();
    return (st == RLX_E_IO || st == RLX_E_UNSUPPORTED || st == RLX_E_NOMEM) && strstr(rlx_last_error(), path);
}

/* Every tensor realizes, and saving then loading gives the same bytes, in
 * both formats that hold several tensors: a name the format rejects (not
 * UTF-8 in an .npz, "__metadata__" in safetensors) is RLX_E_ARG, and a
 * bf16 tensor, which has no .npy descr, makes rlx_save_npz RLX_E_DTYPE. */
static void check_roundtrip(rlx_checkpoint *c)
{
    int n = rlx_checkpoint_count(c);
    FUZZ_ASSERT(n >= 0, "count %d", n);
    if (n > 64)
        return;
    const char *names[64];
    rlx_tensor *ts[64];
    bool bf16 = false;
    rlx_scope_begin();
    for (int i = 0; i < n; i++) {
        names[i] = rlx_checkpoint_name(c, i);
        ts[i] = rlx_checkpoint_get(c, names[i]);
        FUZZ_ASSERT(names[i] && ts[i] && rlx_data(ts[i]), "tensor %d of %d", i, n);
        bf16 = bf16 || rlx_dtype_of(ts[i]) == RLX_BF16;
    }
    for (int fmt = 1; fmt <= 3; fmt += 2) {
        rlx_clear_error();
        rlx_status st = fmt == 1 ? rlx_save_safetensors(path2, n, names, ts) : rlx_save_npz(path2, n, names, ts);
        FUZZ_ASSERT(st == RLX_OK || st == RLX_E_ARG || (st == RLX_E_DTYPE && fmt == 3 && bf16), "save %d: %d", fmt,
                    (int)st);
        FUZZ_ASSERT(!(fmt == 3 && bf16 && st == RLX_OK), "rlx_save_npz wrote a bf16 tensor");
        if (st != RLX_OK)
            continue;
        rlx_checkpoint *d = fmt == 1 ? rlx_load_safetensors(path2) : rlx_load_npz(path2);
        FUZZ_ASSERT(d && rlx_checkpoint_count(d) == n, "reload");
        for (int i = 0; i < n; i++) {
            rlx_tensor *t = rlx_checkpoint_get(d, names[i]);
            size_t bytes = (size_t)rlx_numel(ts[i]) * ir_dtype_size(rlx_dtype_of(ts[i]));
            FUZZ_ASSERT(t && rlx_dtype_of(t) == rlx_dtype_of(ts[i]) && rlx_numel(t) == rlx_numel(ts[i]) &&
                            !memcmp(rlx_data(t), rlx_data(ts[i]), bytes), "tensor %s changed", names[i]);
        }
        rlx_checkpoint_free(d);
    }
    rlx_scope_end();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data[0] % 4;
    if (mode == 0) {
        fuzz_json(data + 1, size - 1);
        return 0;
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data + 1, 1, size - 1, f) != size - 1)
        abort();
    fclose(f);
    long live = ir_live_nodes();
    rlx_clear_error();
    if (mode == 2) {
        rlx_tensor *t = rlx_load_npy(path);
        FUZZ_ASSERT(t || failed_cleanly(), "npy failed without a clean error");
        if (t) {
            FUZZ_ASSERT(rlx_data(t) != NULL, "npy tensor does not realize");
            FUZZ_ASSERT(rlx_save_npy(path2, t) == RLX_OK, "npy save");
            rlx_release(t);
        }
    } else {
        rlx_checkpoint *c = mode == 1 ? rlx_load_safetensors(path) : rlx_load_npz(path);
        FUZZ_ASSERT(c || failed_cleanly(), "load failed without a clean error");
        if (c)
            check_roundtrip(c);
        rlx_checkpoint_free(c);
    }
    FUZZ_ASSERT(ir_live_nodes() == live, "%ld nodes leaked", ir_live_nodes() - live);
    return 0;
}
