/* plan.c — a sequence's memory at a given context (plan.h): the KDA state
 * block plus the MLA latent caches in the chosen element type (--cache-type),
 * and the checks `k3 serve`, `generate` and `chat` run on --ctx-size before
 * they accept input. */
#include "model/plan.h"

#include "base/err.h"
#include "base/mem.h"
#include "model/model.h"

#include <string.h>

uint64_t k3_seq_plan_bytes(const k3_model *m, int64_t ctx) {
    const k3_config *c = m->c;
    uint64_t cap = 0;
    if (ctx > 0)
        for (cap = 64; (int64_t)cap < ctx; cap *= 2) {
        }
    uint64_t per_token =
        k3_cache_elem_bytes(m) *
        (uint64_t)(c->kv_lora_rank + (c->qk_rope_head_dim ? c->qk_rope_head_dim : 1));
    uint64_t bytes = k3_model_state_bytes(m);
    for (int i = m->layer0; i < m->layer1; i++)
        if (!m->L[i].is_kda) bytes += cap * per_token;
    return bytes;
}

int k3_seq_plan_check(const k3_model *m, int64_t ctx, uint64_t cache_budget, uint64_t avail) {
    if (ctx < 1 || ctx > K3_CTX_MAX)
        return k3_seterr("--ctx-size %lld is outside 1..%d", (long long)ctx, K3_CTX_MAX);
    uint64_t need = k3_seq_plan_bytes(m, ctx);
    const double mib = 1.0 / (1 << 20);
    const char *bf16 = m->cache_bf16 ? "" : ", or halve the latents with --cache-type bf16";
    if (!avail) avail = k3_proc_field("/proc/meminfo", "MemAvailable:") * 1024;
    if (avail && need > avail)
        return k3_seterr("one sequence at --ctx-size %lld needs %.0f MiB (state %.0f MiB + MLA "
                         "latents), more than the %.0f MiB of RAM available; lower --ctx-size%s",
                         (long long)ctx, need * mib, k3_model_state_bytes(m) * mib, avail * mib,
                         bf16);
    if (cache_budget && need > cache_budget)
        return k3_seterr("one sequence at --ctx-size %lld needs %.0f MiB, more than --cache-mb "
                         "%.0f can keep; raise --cache-mb, lower --ctx-size, or turn the prompt "
                         "cache off with --cache-mb 0%s",
                         (long long)ctx, need * mib, cache_budget * mib, bf16);
    return 0;
}
