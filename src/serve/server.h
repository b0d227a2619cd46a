/* server.h — `k3 serve`: the OpenAI-compatible HTTP server.
 *
 *   serve_engine e; serve_engine_open(&e, dir, NULL, 0, K3_CACHE_F32);
 *   serve_opts o; serve_opts_default(&o); o.port = 8000;
 *   serve_run(&e, &o);   // until SIGINT/SIGTERM
 *
 * Endpoints: POST /v1/chat/completions, POST /v1/completions,
 * GET /v1/models, GET /health (never waits for generation; also the
 * scheduler and prompt-cache counters), /tokenize, /detokenize, /props,
 * /metrics; every /v1 route also without the prefix. See docs/serve.md. */
#ifndef K3_SERVE_SERVER_H
#define K3_SERVE_SERVER_H

#include <stddef.h>

#include "serve/engine.h"

typedef struct {
    const char *host;            /* bind address, default 127.0.0.1 */
    int port;                    /* 0: any free port (printed at start) */
    const char *const *api_keys; /* --api-key / --api-key-file; none: no authentication */
    int n_api_keys;
    size_t responses_budget; /* Responses store bytes; SIZE_MAX: sized to the machine */
    size_t max_body;         /* request bytes; larger bodies get 413 */
    int max_tokens_cap;      /* per-request max_tokens ceiling (and default) */
    double timeout_s;        /* per-request generation time limit; idle connection limit */
    double shutdown_grace_s; /* on SIGINT/SIGTERM, in-flight requests get this long */
    int test_mode;           /* honour k3_test_force_* request fields */
    int max_active;          /* requests generating at once */
    int prefill_chunk;       /* prompt tokens per scheduler round */
    double batch_window_s;   /* an idle server waits this long for a burst's other requests */
    size_t cache_budget;     /* prompt-cache bytes */
    size_t state_reserve;    /* state blocks kept faulted in; SIZE_MAX: the default (sched.h) */
    int max_connections;
    int max_queue;              /* requests waiting for a slot; more get 429 */
    int max_batch;              /* sequences per batched step (0 = max_active) */
    int max_step_tokens;        /* tokens per batched step */
    const char *const *aliases; /* more model ids accepted (--served-model-name) */
    int n_aliases;
    const char *const *cors_origins; /* --cors-origin values ("*" = any); none: no CORS */
    int n_cors_origins;
    int ctx_size; /* prompt + generated tokens per request; 0: the model's (or unlimited) */
    /* hardening: limits on what one client may cost */
    const char *const *allowed_hosts; /* --allowed-host: Host names accepted besides loopback */
    int n_allowed_hosts;
    int max_conn_per_ip;   /* connections one client address may hold (0: no limit) */
    double idle_timeout_s; /* a connection idle (or not reading) this long is closed (0: none) */
    size_t max_unread;     /* stream bytes a client may leave unread before generation pauses */
    /* request deadlines independent of activity (serve/conns.h; 0: none) */
    double header_timeout_s; /* headers complete within this of the connection / last reply */
    double body_timeout_s;   /* a body within this, plus 1 s per min_body_rate bytes */
    size_t min_body_rate;
} serve_opts;

void serve_opts_default(serve_opts *o);

/* Serve until SIGINT or SIGTERM. Prints "k3 serve: listening on
 * http://HOST:PORT" to stderr once accepting. Returns 0 after a clean
 * shutdown, -1 + k3_errmsg if the server could not start. */
int serve_run(serve_engine *e, const serve_opts *o);

#endif
