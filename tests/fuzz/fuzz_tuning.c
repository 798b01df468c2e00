/*
 * fuzz_tuning.c — the tuning-file parser (src/passes/knobs.c): any bytes
 * either parse or are refused with a message naming the line, never a
 * crash, leak or read past the input. Parsed entries must be valid (known
 * class, bucket and knob; value in the knob's range) and survive a round
 * trip: written in the file format and parsed again, the same entries.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/knobs.h"

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "fuzz check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                          \
        }                                                                     \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy, so ASan sees any read past the end */
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    knob_entry *e = NULL;
    int n = -1;
    char msg[256] = "";
    rlx_status st = knobs_parse(text, size, &e, &n, msg, sizeof msg);
    free(text);
    if (st != RLX_OK) {
        CHECK(e == NULL && n == 0);
        CHECK(msg[0] != 0 && memchr(msg, 0, sizeof msg));
        return 0;
    }
    CHECK(n >= 0 && (n == 0 || e));
    size_t cap = 64 + (size_t)n * 96, len = 0;
    char *out = malloc(cap);
    CHECK(out);
    len += (size_t)snprintf(out, cap, "rlx-tuning 1\n");
    for (int i = 0; i < n; i++) {
        CHECK(e[i].cls >= 0 && e[i].cls < KCLASS_COUNT);
        CHECK(e[i].bucket >= KBUCKET_ANY && e[i].bucket < KBUCKET_COUNT);
        CHECK(e[i].id >= 0 && e[i].id < KNOB_COUNT);
        CHECK(e[i].value >= knob_table[e[i].id].lo && e[i].value <= knob_table[e[i].id].hi);
        len += (size_t)snprintf(out + len, cap - len, "%s %s %s=%ld\n", knob_class_names[e[i].cls],
                                e[i].bucket == KBUCKET_ANY ? "any" : knob_bucket_names[e[i].bucket],
                                knob_table[e[i].id].name, e[i].value);
        CHECK(len < cap);
    }
    knob_entry *back = NULL;
    int nb = -1;
    CHECK(knobs_parse(out, len, &back, &nb, msg, sizeof msg) == RLX_OK);
    CHECK(nb == n);
    for (int i = 0; i < n; i++)
        CHECK(back[i].cls == e[i].cls && back[i].bucket == e[i].bucket && back[i].id == e[i].id &&
              back[i].value == e[i].value);
    free(back);
    free(out);
    free(e);
    return 0;
}
