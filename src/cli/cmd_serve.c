/* cmd_serve.c — `k3 serve`: command-line options → serve_run (src/serve/). */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "gen/builtin.h"
#include "gen/gen_opts.h"
#include "gen/spec.h"
#include "kernels/kernels.h"
#include "model/plan.h"
#include "serve/guard.h"
#include "serve/server.h"

static void serve_usage(FILE *f) {
    fprintf(
        f, "usage: k3 serve [DIR | --model DIR] [--host ADDR] [--port N] [options]\n"
           "\n"
           "HTTP server for OpenAI, Anthropic and llama.cpp clients. Stops cleanly on\n"
           "SIGINT/SIGTERM. Endpoints (the /v1 prefix is optional on each):\n"
           "  GET  /                           chat page for a browser\n"
           "  POST /v1/chat/completions        OpenAI Chat Completions (stream, tools)\n"
           "  POST /v1/completions             OpenAI legacy completions\n"
           "  POST /v1/responses               OpenAI Responses API\n"
           "  POST /v1/messages                Anthropic Messages API\n"
           "  POST /v1/messages/count_tokens   Anthropic token count\n"
           "  GET  /v1/models, /v1/models/ID   served model ids and context length\n"
           "  POST /tokenize, /detokenize      text <-> token ids\n"
           "  GET  /props                      llama-server style settings\n"
           "  GET  /health                     liveness (and counters, with the key)\n"
           "  GET  /metrics                    Prometheus text (see docs/serve.md)\n"
           "Options (llama-server / vLLM spellings in brackets):\n"
           "  DIR, --model DIR     checkpoint directory (default: the built-in random model)\n"
           "                       [-m DIR]\n"
           "  --served-model-name ID  model id clients send (default: the directory name);\n"
           "                       repeat for aliases (the first is reported); --name = same\n"
           "                       [--alias, -a]\n"
           "  --host ADDR          bind address or host name (default 127.0.0.1)\n"
           "  --ctx-size N         context length per request: prompt + reply tokens (default:\n"
           "                       config.json max_position_embeddings); longer prompts get 400.\n"
           "                       At most 1048576; checked at start: one sequence's state and\n"
           "                       MLA latents at N must fit in RAM and in --cache-mb\n"
           "                       [-c, --max-model-len]\n"
           "  --cache-type f32|bf16 the MLA latent cache's element (default f32, exact); bf16\n"
           "                       halves its bytes per token (K3: 27.6 KB, not 55 KB, over\n"
           "                       its 24 MLA layers) at ~1e-3 of the logit scale; see\n"
           "                       docs/performance.md\n"
           "  --cors-origin ORIGIN allow browser pages from ORIGIN (repeatable, or comma-\n"
           "                       separated; '*' = any). Default: no cross-origin access\n"
           "  --port N             TCP port (default 8000; 0 = any free port, printed)\n"
           "  --api-key KEY        require 'Authorization: Bearer KEY' (or x-api-key: KEY);\n"
           "                       repeat for several keys, each its own scope (default:\n"
           "                       env K3_API_KEY; no authentication if unset)\n"
           "  --api-key-file FILE  more keys, one per line ('#' comments, blank lines skipped)\n"
           "  --responses-mb N     Responses store budget in MiB (previous_response_id,\n"
           "                       GET /v1/responses/ID); default 1/64 of RAM, 16..1024;\n"
           "                       0 = keep nothing. Scoped like the prompt cache\n"
           "  --max-body BYTES     request body limit, larger gets 413 (default 8388608)\n"
           "  --max-tokens N       per-request max_tokens cap and default (default 4096)\n"
           "  --timeout SEC        per-request time limit, the prompt included: a prompt not\n"
           "                       done in time gets 504, a generation is cut (default 600)\n"
           "  --shutdown-grace SEC in-flight requests get this long on shutdown (default 10)\n"
           "  --parallel N         requests holding a sequence at once (default 64); more wait\n"
           "                       [-np, --max-num-seqs]\n"
           "  --max-queue N        requests waiting for a slot; more get 429 (default 256)\n"
           "  --max-batch N        sequences per batched step (default: --parallel)\n"
           "  --max-step-tokens N  tokens per batched step, decodes + prompt chunks (default 512)\n"
           "  --prefill-chunk N    prompt tokens of one request per step (default 64, max 512)\n"
           "  --batch-window-ms N  an idle server that gets a request waits up to N ms after\n"
           "                       it for more, so a burst of requests starts in one step\n"
           "                       (default 10; 0 = start at once; max 1000)\n"
           "  --cache-mb N         prompt-cache memory budget in MiB (default 1024; 0 = off).\n"
           "                       Snapshots are taken after the system prompt, each message\n"
           "                       and the whole prompt, scoped by API key + cache_salt. At\n"
           "                       K3's real size one snapshot costs ~465 MB (434 MB: the\n"
           "                       recurrent state of the 69 KDA layers; 31 MB conv tails)\n"
           "                       + ~55 KB per cached token (24 MLA layers' latents), so\n"
           "                       give K3 --cache-mb 8192 or more; see docs/serve.md\n"
           "  --state-reserve-mb N sequence state blocks (one per live sequence and per\n"
           "                       snapshot) kept faulted in while the server is idle, so a\n"
           "                       burst of requests does not wait on page faults (default:\n"
           "                       256 or two blocks, whichever is more, at most --cache-mb;\n"
           "                       0 = none). At K3's real size a block is ~465 MB: give\n"
           "                       4096 to keep 8 ready\n"
           "  --spec ngram|off     speculative decoding: drafts from each request's own\n"
           "                       context, verified in the batched step (default ngram);\n"
           "                       a request's \"speculative\": false/true overrides it\n"
           "  --spec-max K         drafts per step at most, 1..16 (default 8)\n"
           "  --spec-cost c1,..,cK the cost of verifying 1..K drafts in plain steps (k3\n"
           "                       bench --verify-cost K measures it; default: the model's\n"
           "                       estimate); no more than K drafts are sent\n"
           "  --threads N          OpenMP threads for the model (default: all cores) [-t]\n"
           "  --act-int8           int8 activations for quantized decode (AVX-512 VNNI;\n"
           "                       faster, lossy, off by default)\n"
           "  --test-mode          accept k3_test_force_tokens / k3_test_force_text request\n"
           "                       fields (tests only: forces the generated tokens)\n");
    fprintf(f, "Limits (one client must not hold the server):\n"
               "  --allowed-host NAME  accept this Host header besides loopback names\n"
               "                       (repeatable or comma-separated; '*' = any). A loopback\n"
               "                       --host otherwise answers loopback names only\n"
               "  --max-connections N  connections open at once (default 512, min 8); the\n"
               "                       last eighth is kept for new addresses (see below)\n"
               "  --max-conn-per-ip N  connections one address may hold (default 128; 0 = no\n"
               "                       limit; raise it behind a reverse proxy)\n"
               "  --idle-timeout SEC   close a connection idle or not reading this long\n"
               "                       (default 15; 0 = never)\n"
               "  --max-unread BYTES   stream bytes a client may leave unread before its\n"
               "                       generation pauses (default 1048576)\n"
               "  --header-timeout SEC a request's headers must be complete this long after\n"
               "                       the connection opened or the last reply ended, bytes\n"
               "                       trickling in or not (default 20; 0 = none)\n"
               "  --body-timeout SEC   a request body must be complete this long after its\n"
               "                       headers, plus 1 s per --min-body-rate bytes received\n"
               "                       (default 30; 0 = none)\n"
               "  --min-body-rate B    bytes per second a body must average (default 4096;\n"
               "                       0 = --body-timeout is a hard limit). Near the\n"
               "                       connection cap, the connections still receiving a\n"
               "                       request of the address holding most are shed\n");
}

/* Parse an integer option value in [lo, hi]; -1 + message on error. */
static int int_arg(const char *opt, const char *v, long long lo, long long hi, long long *out) {
    char *end;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || x < lo || x > hi) {
        fprintf(stderr, "k3 serve: %s expects an integer in [%lld, %lld], got '%s'\n", opt, lo, hi,
                v);
        return -1;
    }
    *out = x;
    return 0;
}

#define MAX_NAMES 16

typedef struct {
    const char *model;
    const char *names[MAX_NAMES]; /* --served-model-name / --name, in order */
    int n_names;
    const char *origins[MAX_NAMES];
    int n_origins;
    const char *hosts[MAX_NAMES]; /* --allowed-host */
    int n_hosts;
    char **keys; /* --api-key, --api-key-file (malloc'd) */
    int n_keys;
    int threads;
    int cache_type;     /* --cache-type: K3_CACHE_F32 or K3_CACHE_BF16 */
    int spec, spec_max; /* --spec ngram|off, --spec-max */
    int has_spec_cost;  /* --spec-cost given: its table */
    double spec_cost[K3_DRAFT_MAX + 1];
} model_args;

/* Append a repeatable option's value; a comma-separated list adds each item. */
static int add_values(const char *opt, char *v, const char **list, int *n) {
    for (char *save = NULL, *t = strtok_r(v, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ') t++;
        if (!*t) continue;
        if (*n == MAX_NAMES) {
            fprintf(stderr, "k3 serve: at most %d %s values\n", MAX_NAMES, opt);
            return -1;
        }
        list[(*n)++] = t;
    }
    return 0;
}

/* One option (with its value in v, may be NULL). Returns 1 if it took the
 * value, 0 if it is a flag, -1 on error. */
static int parse_opt(const char *a, char *v, serve_opts *o, model_args *m) {
    long long x = 0;
    static const char *const with_value[] = {"--model",
                                             "--name",
                                             "--host",
                                             "--api-key",
                                             "--api-key-file",
                                             "--responses-mb",
                                             "--port",
                                             "--max-body",
                                             "--max-tokens",
                                             "--timeout",
                                             "--shutdown-grace",
                                             "--parallel",
                                             "--prefill-chunk",
                                             "--batch-window-ms",
                                             "--cache-mb",
                                             "--state-reserve-mb",
                                             "--threads",
                                             "--spec",
                                             "--spec-max",
                                             "--spec-cost",
                                             "--max-queue",
                                             "--max-batch",
                                             "--max-step-tokens",
                                             "--served-model-name",
                                             "--ctx-size",
                                             "--cache-type",
                                             "--cors-origin",
                                             "--allowed-host",
                                             "--max-conn-per-ip",
                                             "--idle-timeout",
                                             "--max-unread",
                                             "--header-timeout",
                                             "--body-timeout",
                                             "--min-body-rate",
                                             "--max-connections"};
    if (!strcmp(a, "--test-mode")) return o->test_mode = 1, 0;
    if (!strcmp(a, "--act-int8")) return k3_act_int8_set(1), 0;
    int known = 0;
    for (size_t i = 0; i < sizeof with_value / sizeof *with_value; i++)
        known |= !strcmp(a, with_value[i]);
    if (!known) {
        fprintf(stderr, "k3 serve: unknown option '%s' (see k3 serve --help)\n", a);
        return -1;
    }
    if (!v) {
        fprintf(stderr, "k3 serve: %s needs a value\n", a);
        return -1;
    }
    if (!strcmp(a, "--model"))
        m->model = v;
    else if (!strcmp(a, "--name") || !strcmp(a, "--served-model-name")) {
        if (add_values(a, v, m->names, &m->n_names)) return -1;
    } else if (!strcmp(a, "--cors-origin")) {
        if (add_values(a, v, m->origins, &m->n_origins)) return -1;
    } else if (!strcmp(a, "--ctx-size")) {
        if (int_arg(a, v, 0, K3_CTX_MAX, &x)) return -1;
        o->ctx_size = (int)x;
    } else if (!strcmp(a, "--cache-type")) {
        if (k3_cache_type_parse(v, &m->cache_type)) {
            fprintf(stderr, "k3 serve: %s\n", k3_errmsg());
            return -1;
        }
    } else if (!strcmp(a, "--host"))
        o->host = v;
    else if (!strcmp(a, "--api-key")) {
        if (!*v) {
            fprintf(stderr, "k3 serve: --api-key is empty (omit it to run without "
                            "authentication)\n");
            return -1;
        }
        m->keys = k3_xrealloc(m->keys, (size_t)(m->n_keys + 1) * sizeof *m->keys);
        m->keys[m->n_keys++] = k3_xstrdup(v);
    } else if (!strcmp(a, "--api-key-file")) {
        char msg[512];
        if (serve_keys_load(v, &m->keys, &m->n_keys, msg, sizeof msg)) {
            fprintf(stderr, "k3 serve: --api-key-file %s\n", msg);
            return -1;
        }
    } else if (!strcmp(a, "--responses-mb")) {
        if (int_arg(a, v, 0, 1 << 24, &x)) return -1;
        o->responses_budget = (size_t)x << 20;
    } else if (!strcmp(a, "--allowed-host")) {
        if (add_values(a, v, m->hosts, &m->n_hosts)) return -1;
    } else if (!strcmp(a, "--max-conn-per-ip")) {
        if (int_arg(a, v, 0, 1 << 20, &x)) return -1;
        o->max_conn_per_ip = (int)x;
    } else if (!strcmp(a, "--idle-timeout")) {
        if (int_arg(a, v, 0, 1 << 20, &x)) return -1;
        o->idle_timeout_s = (double)x;
    } else if (!strcmp(a, "--max-connections")) {
        if (int_arg(a, v, 8, 1 << 16, &x)) return -1;
        o->max_connections = (int)x;
    } else if (!strcmp(a, "--header-timeout")) {
        if (int_arg(a, v, 0, 1 << 20, &x)) return -1;
        o->header_timeout_s = (double)x;
    } else if (!strcmp(a, "--body-timeout")) {
        if (int_arg(a, v, 0, 1 << 20, &x)) return -1;
        o->body_timeout_s = (double)x;
    } else if (!strcmp(a, "--min-body-rate")) {
        if (int_arg(a, v, 0, 1ll << 40, &x)) return -1;
        o->min_body_rate = (size_t)x;
    } else if (!strcmp(a, "--max-unread")) {
        if (int_arg(a, v, 4096, 1ll << 40, &x)) return -1;
        o->max_unread = (size_t)x;
    } else if (!strcmp(a, "--port")) {
        if (int_arg(a, v, 0, 65535, &x)) return -1;
        o->port = (int)x;
    } else if (!strcmp(a, "--max-body")) {
        if (int_arg(a, v, 1, 1ll << 40, &x)) return -1;
        o->max_body = (size_t)x;
    } else if (!strcmp(a, "--max-tokens")) {
        if (int_arg(a, v, 1, 1 << 30, &x)) return -1;
        o->max_tokens_cap = (int)x;
    } else if (!strcmp(a, "--timeout")) {
        if (int_arg(a, v, 0, 1 << 30, &x)) return -1;
        o->timeout_s = (double)x;
    } else if (!strcmp(a, "--shutdown-grace")) {
        if (int_arg(a, v, 0, 1 << 20, &x)) return -1;
        o->shutdown_grace_s = (double)x;
    } else if (!strcmp(a, "--parallel")) {
        if (int_arg(a, v, 1, 4096, &x)) return -1;
        o->max_active = (int)x;
    } else if (!strcmp(a, "--max-queue")) {
        if (int_arg(a, v, 1, 1 << 20, &x)) return -1;
        o->max_queue = (int)x;
    } else if (!strcmp(a, "--max-batch")) {
        if (int_arg(a, v, 1, 4096, &x)) return -1;
        o->max_batch = (int)x;
    } else if (!strcmp(a, "--max-step-tokens")) {
        if (int_arg(a, v, 1, 1 << 20, &x)) return -1;
        o->max_step_tokens = (int)x;
    } else if (!strcmp(a, "--prefill-chunk")) {
        if (int_arg(a, v, 1, 512, &x)) return -1;
        o->prefill_chunk = (int)x;
    } else if (!strcmp(a, "--batch-window-ms")) {
        if (int_arg(a, v, 0, 1000, &x)) return -1;
        o->batch_window_s = (double)x / 1000;
    } else if (!strcmp(a, "--cache-mb")) {
        if (int_arg(a, v, 0, 1 << 24, &x)) return -1;
        o->cache_budget = (size_t)x << 20;
    } else if (!strcmp(a, "--state-reserve-mb")) {
        if (int_arg(a, v, 0, 1 << 24, &x)) return -1;
        o->state_reserve = (size_t)x << 20;
    } else if (!strcmp(a, "--threads")) {
        if (int_arg(a, v, 0, 4096, &x)) return -1;
        m->threads = (int)x;
    } else if (!strcmp(a, "--spec")) {
        if (strcmp(v, "ngram") && strcmp(v, "off")) {
            fprintf(stderr, "k3 serve: --spec takes ngram or off, got '%s'\n", v);
            return -1;
        }
        m->spec = !strcmp(v, "ngram");
    } else if (!strcmp(a, "--spec-max")) {
        if (int_arg(a, v, 1, 16, &x)) return -1;
        m->spec_max = (int)x;
    } else if (!strcmp(a, "--spec-cost")) {
        if (k3_spec_cost_parse(v, m->spec_cost)) {
            fprintf(stderr, "k3 serve: %s\n", k3_errmsg());
            return -1;
        }
        m->has_spec_cost = 1;
    } else {
        fprintf(stderr, "k3 serve: unknown option '%s' (see k3 serve --help)\n", a);
        return -1;
    }
    return 1;
}

static void free_keys(model_args *m) {
    for (int i = 0; i < m->n_keys; i++) free(m->keys[i]);
    free(m->keys);
}

/* K3_API_KEY when no key was given on the command line; set but empty is
 * refused like --api-key "" rather than meaning "no authentication". */
static int env_keys(model_args *m) {
    const char *env = getenv("K3_API_KEY");
    if (!env) return 0;
    if (!*env) {
        fprintf(stderr, "k3 serve: K3_API_KEY is set but empty (unset it to run without "
                        "authentication)\n");
        return -1;
    }
    if (m->n_keys) return 0;
    m->keys = k3_xmalloc(sizeof *m->keys);
    m->keys[m->n_keys++] = k3_xstrdup(env);
    return 0;
}

/* llama-server's and vLLM's spellings of k3's own options. */
static const char *canonical(const char *a) {
    static const char *const alias[][2] = {
        {"-m", "--model"},
        {"-c", "--ctx-size"},
        {"--max-model-len", "--ctx-size"},
        {"-t", "--threads"},
        {"-np", "--parallel"},
        {"--max-num-seqs", "--parallel"},
        {"--alias", "--served-model-name"},
        {"-a", "--served-model-name"},
    };
    for (size_t i = 0; i < sizeof alias / sizeof *alias; i++)
        if (!strcmp(a, alias[i][0])) return alias[i][1];
    return a;
}

/* A bare argument is the model directory (`k3 serve DIR`, as `vllm serve
 * DIR` and `llama-server MODEL`); only one, and not beside --model. */
static int positional_model(const char *a, model_args *m) {
    if (m->model) {
        fprintf(stderr, "k3 serve: unexpected argument '%s' (the model is already '%s')\n", a,
                m->model);
        return -1;
    }
    m->model = a;
    return 0;
}

int cmd_serve(int argc, char **argv) {
    serve_opts o;
    serve_opts_default(&o);
    model_args m = {.spec = 1, .spec_max = K3_GEN_SPEC_MAX};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            serve_usage(stdout);
            return 0;
        }
        if (argv[i][0] != '-' || !argv[i][1]) {
            if (positional_model(argv[i], &m)) return free_keys(&m), 2;
            continue;
        }
        int took = parse_opt(canonical(argv[i]), i + 1 < argc ? argv[i + 1] : NULL, &o, &m);
        if (took < 0) return free_keys(&m), 2;
        i += took;
    }
    if (env_keys(&m)) return free_keys(&m), 2;
    o.api_keys = (const char *const *)m.keys;
    o.n_api_keys = m.n_keys;
    char *builtin = NULL;
    if (!m.model) {
        int created = 0;
        builtin = k3_builtin_model(&created);
        if (!builtin) k3_die("built-in model: %s", k3_errmsg());
        m.model = builtin;
        if (!m.n_names) m.names[m.n_names++] = "k3-builtin-tiny";
    }
    o.aliases = m.n_names > 1 ? m.names + 1 : NULL;
    o.n_aliases = m.n_names > 1 ? m.n_names - 1 : 0;
    o.cors_origins = m.origins;
    o.n_cors_origins = m.n_origins;
    o.allowed_hosts = m.hosts;
    o.n_allowed_hosts = m.n_hosts;
    serve_engine e;
    if (serve_engine_open(&e, m.model, m.n_names ? m.names[0] : NULL, m.threads, m.cache_type)) {
        fprintf(stderr, "k3 serve: %s\n", k3_errmsg());
        free(builtin);
        free_keys(&m);
        return 1;
    }
    e.spec_max = m.spec ? m.spec_max : 0;
    /* The model's cost of a verify item alone. In a batch the rows share the
     * weight reads with the other jobs' items, so a draft costs less there
     * than this says: the choice errs toward plain steps, never toward drafts
     * that lose. */
    if (!m.has_spec_cost) k3_spec_cost_default(e.model, m.spec_cost);
    e.spec_cost = m.spec_cost;
    if (o.ctx_size > 0 && k3_seq_plan_check(e.model, o.ctx_size, o.cache_budget, 0)) {
        fprintf(stderr, "k3 serve: %s\n", k3_errmsg());
        serve_engine_close(&e);
        free(builtin);
        return 1;
    }
    int rc = serve_run(&e, &o);
    if (rc) fprintf(stderr, "k3 serve: %s\n", k3_errmsg());
    serve_engine_close(&e);
    free(builtin);
    free_keys(&m);
    return rc ? 1 : 0;
}
