/* qverify.c — the check `k3 quantize` runs on its output (see qconvert.h, "Check").
 *
 * The output is read back with pread through the writer's own layout (no
 * mapping, so the check's memory is a few rows whatever the model size): shard
 * sizes and header bytes (and, for check_only, SHA-256 digests of every shard
 * and tensor against the manifest), then every planned tensor against the input: sampled Linear
 * rows rebuilt from the input and re-quantized must equal the stored bytes. */
#include "base/err.h"
#include "base/mem.h"
#include "quant/qconvert_impl.h"
#include "quant/quantize.h"

#include <stdlib.h>
#include <string.h>

enum { SAMPLE_HASHED = 6, RAW_WINDOW = 4096 };

static uint64_t mix(uint64_t x) { /* splitmix64 */
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static const char *const part_name[3] = {"weight", "scales", "biases"};

/* Output tensor k of job j at byte off must hold want[0..n). */
static int expect(qc *q, const qjob *j, int k, uint64_t off, const uint8_t *want, size_t n,
                  uint8_t *buf, const char *where, int64_t at) {
    if (k3_sts_read(q->w, j->out[k], off, buf, n)) return -1;
    q->stats->bytes_checked += n;
    if (!memcmp(buf, want, n)) return 0;
    size_t i = 0;
    while (buf[i] == want[i]) i++;
    return k3_seterr("%s: language_model.%s%s%s: %s %lld differs from the input%s (byte %zu of it: "
                     "%02x, expected %02x); the output is wrong",
                     q->o->out, j->module, j->kind == J_LIN ? "." : "",
                     j->kind == J_LIN ? part_name[k] : "", where, (long long)at,
                     j->kind == J_LIN ? " re-quantized" : "", i, buf[i], want[i]);
}

static int check_linear(qc *q, const qjob *j, uint64_t seed) {
    const int64_t C = j->cols;
    size_t cb = j->bits ? (j->mx ? (size_t)C / 2 : k3_affine_row_bytes(C, j->bits))
                        : (size_t)C * k3_dtype_size(j->keep_dt);
    size_t sb = !j->bits ? 0
                : j->mx  ? (size_t)C / 32
                         : k3_affine_scale_row_bytes(C, j->group, K3_W_BF16);
    int64_t nexp = j->xf == X_EXPERTS ? j->shape[0] : 0, R = nexp ? j->shape[1] : j->rows;
    float *f = k3_xmalloc(sizeof(float) * (size_t)C);
    uint8_t *want = k3_xmalloc(cb + 2 * sb), *got = k3_xmalloc(cb);
    int rc = 0;
    for (int64_t s = 0; !rc && s < 2 + SAMPLE_HASHED + nexp; s++) {
        int64_t r = s == 0   ? 0
                    : s == 1 ? j->rows - 1
                    : s < 2 + SAMPLE_HASHED
                        ? (int64_t)(mix(seed + (uint64_t)s) % (uint64_t)j->rows)
                        : (s - 2 - SAMPLE_HASHED) * R +
                              (int64_t)(mix(seed ^ (uint64_t)s << 32) % (uint64_t)R);
        k3_qc_job_rows(j, r, 1, f);
        if (!j->bits) {
            k3_qc_store(f, C, j->keep_dt, want);
            rc = expect(q, j, 0, (uint64_t)r * cb, want, cb, got, "row", r);
        } else {
            rc = k3_qc_quantize(j, f, 1, want, want + cb, j->mx ? NULL : want + cb + sb);
            if (!rc) rc = expect(q, j, 0, (uint64_t)r * cb, want, cb, got, "row", r);
            if (!rc) rc = expect(q, j, 1, (uint64_t)r * sb, want + cb, sb, got, "row", r);
            if (!rc && !j->mx)
                rc = expect(q, j, 2, (uint64_t)r * sb, want + cb + sb, sb, got, "row", r);
        }
        q->stats->rows_checked++;
    }
    free(f);
    free(want);
    free(got);
    return rc;
}

/* Raw copies: srcs back to back in output tensor k; small ones whole, others
 * at their start, middle and end. */
static int check_raw(qc *q, const qjob *j, int k, const k3_tensor **srcs) {
    uint8_t *buf = k3_xmalloc(3 * RAW_WINDOW);
    uint64_t base = 0;
    int rc = 0;
    for (int i = 0; !rc && i < j->nsrc; i++) {
        const k3_tensor *t = srcs[i];
        if (t->bytes <= 3 * RAW_WINDOW) {
            rc = expect(q, j, k, base, t->data, t->bytes, buf, "byte range at", (int64_t)base);
        } else {
            size_t at[3] = {0, (t->bytes - RAW_WINDOW) / 2, t->bytes - RAW_WINDOW};
            for (int w = 0; !rc && w < 3; w++)
                rc = expect(q, j, k, base + at[w], t->data + at[w], RAW_WINDOW, buf,
                            "byte range at", (int64_t)(base + at[w]));
        }
        base += t->bytes;
    }
    free(buf);
    return rc;
}

int k3_qc_verify(qc *q, int full_sums) {
    if (k3_sts_verify(q->w, full_sums)) return -1;
    for (int i = 0; i < q->nj; i++) {
        const qjob *j = &q->j[i];
        int rc = 0;
        if (!j->nout) continue;
        if (j->kind == J_LIN) {
            rc = check_linear(q, j, mix((uint64_t)i));
        } else if (j->kind == J_RAW) {
            rc = check_raw(q, j, 0, j->src);
            if (!rc && j->src2) rc = check_raw(q, j, 1, j->src2);
        } else {
            size_t n = k3_sts_tensor_bytes(q->w, j->out[0]);
            uint8_t *buf = k3_xmalloc(n);
            rc = expect(q, j, 0, 0, (const uint8_t *)j->vals, n, buf, "byte range at", 0);
            free(buf);
        }
        k3_qc_drop_inputs(q->st);
        if (rc) return -1;
        q->stats->tensors_checked += j->nout;
    }
    return 0;
}
