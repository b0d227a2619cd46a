/* qjob.c — what conversion (qconvert.c) and its check (qverify.c) both do
 * with a planned job: materialize its rows as f32 from the mapped input,
 * store them as an unquantized dtype or quantize them, and drop the input
 * pages afterwards. A leaf of the two, so neither calls the other back. */
#include "quant/qconvert_impl.h"

#include "quant/checkpoint.h"
#include "quant/dtype.h"
#include "quant/quantize.h"

#include <string.h>

/* Elements [i0, i0+n) of a float tensor as f32. */
void k3_qc_span_f32(const k3_tensor *t, int64_t i0, int64_t n, float *o) {
    if (t->dtype == K3_DT_F32) {
        memcpy(o, t->data + 4 * i0, sizeof(float) * (size_t)n);
        return;
    }
    for (int64_t i = 0; i < n; i++) o[i] = k3_tensor_f32_at(t, i0 + i);
}

/* Drop every input page from this process (they stay in the page cache).
 * Called after each chunk: whole maps rather than the consumed ranges, since
 * the kernel maps neighbouring cached pages on a fault (fault-around), which
 * would otherwise stay resident until the end. The mapping is read-only, so a
 * dropped page still needed is simply read again. */
void k3_qc_drop_inputs(const k3_st *st) {
    k3_st_drop_pages(st);
}

/* Rows [r0, r0+n) of a Linear job as f32. */
void k3_qc_job_rows(const qjob *j, int64_t r0, int64_t n, float *o) {
    const int64_t C = j->cols;
    for (int64_t r = r0; r < r0 + n; r++, o += C) {
        switch (j->xf) {
        case X_PLAIN:
            k3_qc_span_f32(j->src[0], r * C, C, o);
            break;
        case X_CAT: {
            int64_t rr = r;
            int i = 0;
            while (rr >= j->src[i]->shape[0]) rr -= j->src[i++]->shape[0];
            k3_qc_span_f32(j->src[i], rr * C, C, o);
            break;
        }
        case X_EMBQ: { /* [H, r, nope]: row (h, jj) = column jj of the first nope rows of block h */
            int64_t R = j->shape[1], h = r / R, jj = r % R;
            for (int64_t i = 0; i < C; i++)
                o[i] = k3_tensor_f32_at(j->src[0], (h * (j->nope + j->vd) + i) * R + jj);
            break;
        }
        case X_UNEMB: { /* [H, vd, r] */
            int64_t h = r / j->vd, v = r % j->vd;
            k3_qc_span_f32(j->src[0], (h * (j->nope + j->vd) + j->nope + v) * C, C, o);
            break;
        }
        default: { /* X_EXPERTS */
            int64_t R = j->shape[1], e = r / R, rr = r % R;
            const k3_tensor *pk = j->src[e], *sc = j->src2[e];
            if (sc) {
                k3_wmat w = k3_wmat_mxfp4(R, C, pk->data, sc->data);
                k3_wmat_row(&w, rr, 0, C, o);
            } else {
                k3_qc_span_f32(pk, rr * C, C, o);
            }
        }
        }
    }
}

void k3_qc_store(const float *f, int64_t n, k3_dtype dt, uint8_t *out) {
    for (int64_t i = 0; i < n; i++) {
        if (dt == K3_DT_F32) {
            memcpy(out + 4 * i, &f[i], 4);
        } else {
            uint16_t h = dt == K3_DT_F16 ? k3_f32_to_f16(f[i]) : k3_f32_to_bf16(f[i]);
            memcpy(out + 2 * i, &h, 2);
        }
    }
}

int k3_qc_quantize(const qjob *j, const float *f, int64_t n, uint8_t *codes, uint8_t *sc,
                   uint8_t *bi) {
    return j->mx ? k3_quantize_mxfp4(f, n, j->cols, codes, sc)
                 : k3_quantize_affine(f, n, j->cols, j->bits, j->group, K3_W_BF16, codes, sc, bi);
}
