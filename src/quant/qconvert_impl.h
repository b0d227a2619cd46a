/* qconvert_impl.h — what quant/qconvert.c (conversion) and quant/qverify.c
 * (checking its output against the input) share: the plan's jobs and the
 * functions that produce a job's rows (qjob.c). Private to src/quant. */
#ifndef K3_QUANT_QCONVERT_IMPL_H
#define K3_QUANT_QCONVERT_IMPL_H

#include "io/config.h"
#include "io/safetensors.h"
#include "io/st_stream.h"
#include "quant/qconvert.h"

#include <jansson.h>
#include <stdint.h>

enum { J_LIN, J_RAW, J_F32 };
enum { X_PLAIN, X_CAT, X_EMBQ, X_UNEMB, X_EXPERTS };

/* One output module: a Linear built row by row from input tensors (J_LIN),
 * input bytes copied back to back (J_RAW), or a small f32 vector (J_F32). */
typedef struct {
    int kind, xf;
    char module[256];
    int nd;
    int64_t shape[3], rows, cols; /* logical f32 shape; rows = product of all but the last */
    k3_dtype keep_dt;             /* dtype when not quantized */
    int bits, group, mx;          /* bits 0 = stored as keep_dt */
    int nsrc;
    const k3_tensor **src, **src2; /* experts: per-expert weight (or packed) / MXFP4 scales */
    int64_t nope, vd;              /* MLA */
    float *vals;                   /* J_F32 */
    int out[3], nout;              /* output tensors: weight [, scales [, biases]] */
} qjob;

typedef struct {
    const k3_qconv_opts *o;
    k3_config cfg;
    k3_st *st;
    uint8_t *used;
    json_t *quant;
    k3_sts *w;
    qjob *j;
    int nj, capj;
    k3_qconv_stats *stats;
} qc;

/* The functions below are in qjob.c, a leaf both files use. */
/* Elements [i0, i0+n) of a float tensor as f32. */
void k3_qc_span_f32(const k3_tensor *t, int64_t i0, int64_t n, float *o);
/* Rows [r0, r0+n) of a Linear job as f32 (from the mapped input). */
void k3_qc_job_rows(const qjob *j, int64_t r0, int64_t n, float *o);
/* n values as dtype dt (F32/F16/BF16), as an unquantized Linear is stored. */
void k3_qc_store(const float *f, int64_t n, k3_dtype dt, uint8_t *out);
/* Quantize n rows of a job with bits > 0: codes, scales (+ biases for affine). */
int k3_qc_quantize(const qjob *j, const float *f, int64_t n, uint8_t *codes, uint8_t *sc,
                   uint8_t *bi);
/* Drop every input page from this process (they stay in the page cache). */
void k3_qc_drop_inputs(const k3_st *st);
/* Check the written output against the plan and the input (quant/qverify.c). */
int k3_qc_verify(qc *q, int full_sums);

#endif
