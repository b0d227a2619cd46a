/* limits.h — per-request resource limits of `k3 serve`.
 *
 * - serve_json_budget(): a linear pre-scan of a request body that refuses,
 *   before jansson builds anything, documents whose tree would cost far more
 *   memory than their bytes (an 8 MiB body of [{},{},...] is 2.8M objects,
 *   ~600 MB as a jansson tree): caps on nesting depth, containers and values.
 * - serve_job_prefill_expired() / serve_job_timeout_body(): --timeout during
 *   prompt processing, checked between prefill chunks; the job ends with 504
 *   (or an SSE error event for a stream).
 * - serve_job_unread_over(): backpressure; a stream whose client has not
 *   taken this many bytes is not stepped until it reads.
 * - serve_limits_json(): the limits as a JSON object (for /health).
 *
 * All but the last are pure functions of their arguments. */
#ifndef K3_SERVE_LIMITS_H
#define K3_SERVE_LIMITS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "serve/request.h"
#include "serve/sched.h"
#include "serve/server.h"

#define SERVE_JSON_MAX_DEPTH 64
#define SERVE_JSON_MAX_CONTAINERS 100000 /* objects + arrays */
#define SERVE_JSON_MAX_VALUES 500000     /* every value, containers included */
/* Bytes of a /tokenize or /detokenize reply; more is 400 reply_too_large. */
#define SERVE_MAX_REPLY (32 << 20)

typedef struct {
    int depth;         /* deepest nesting seen */
    size_t containers; /* objects + arrays */
    size_t values;     /* all values */
} serve_json_count;

/* Scan body[0..len) (any bytes; invalid JSON is left for the parser to
 * report). 0, or -1 + err (400 request_too_complex naming the cap) as soon
 * as a cap is passed. *count (may be NULL) gets what was counted. */
int serve_json_budget(const char *body, size_t len, serve_json_count *count, serve_err *err);

/* 1 once the job's --timeout deadline has passed (or, in test mode, once
 * the request's k3_test_prefill_deadline_tokens prompt tokens were fed:
 * a counted deadline that does not depend on the machine's speed). */
int serve_job_prefill_expired(const serve_job *j, double now);
/* A request ends in error e: its renderer's ERROR event (the error document
 * in the API's shape, or its stream's error events); a non-stream request
 * takes e's status. */
void serve_job_error_body(serve_job *j, const serve_err *e, k3_buf *b);
/* The response for a job whose prompt was not processed in time: sets
 * j->status (504) for a non-stream request and appends the body (or the SSE
 * error event and [DONE]) to b. */
void serve_job_timeout_body(serve_job *j, double timeout_s, k3_buf *b);

/* 1 if the job's connection has left more than max_unread bytes untaken. */
int serve_job_unread_over(serve_job *j, size_t max_unread);

/* {"ctx_size":..,"max_tokens":..,"max_body":..,"timeout_s":..,...};
 * ctx_size: the effective one (--ctx-size or the model's). */
json_t *serve_limits_json(const serve_opts *o, int ctx_size);

#endif
