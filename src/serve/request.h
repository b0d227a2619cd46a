/* request.h — parse and validate an OpenAI request body into a C struct.
 *
 * The HTTP layer hands the raw body of POST /v1/chat/completions or
 * /v1/completions to serve_req_parse(). It checks every field the server
 * honours (type, range, UTF-8) and fills a serve_req; on the first problem it
 * fills a serve_err with the HTTP status and an OpenAI-style error naming the
 * offending field ("messages[1].content", "max_tokens", ...). A field of
 * OpenAI's API that k3 does not implement is refused by name (request_openai.c);
 * other unknown fields (vendor extensions) are ignored. The parsed JSON document stays alive in
 * serve_req.root so the chat renderer receives the client's values unchanged (chat.md §2.4 caveat).
 *
 * Pure function of its input: no model, no I/O, safe to fuzz
 * (fuzz/fuzz_http_request.c). */
#ifndef K3_SERVE_REQUEST_H
#define K3_SERVE_REQUEST_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "gen/sampler.h"

typedef enum { SERVE_CHAT = 0, SERVE_COMPLETION = 1 } serve_kind;

#define SERVE_MAX_STOP 4 /* OpenAI allows up to 4 stop sequences */
#define SERVE_MAX_N 8    /* chat choices per request (n); each is a sequence of its own */

/* An OpenAI-style error: status is the HTTP code, the rest goes into
 * {"error":{"message","type","param","code"}} (param/code may be empty). */
typedef struct {
    int status;
    char message[512];
    char type[48];
    char param[96];
    char code[48];
} serve_err;

/* What the server accepts from this process's configuration. */
typedef struct {
    const char *model_name;     /* the served model id; NULL accepts any "model" */
    int max_tokens_cap;         /* requests asking for more are clamped to this */
    int test_mode;              /* 1: honour the k3_test_force_* extension fields */
    const char *const *aliases; /* more accepted model ids */
    int n_aliases;
    int vocab; /* the model's vocabulary size (logit_bias ids); 0 = not checked here */
} serve_limits;

/* 1 if `model` is the served model or one of its aliases (or no name is set). */
int serve_model_known(const serve_limits *lim, const char *model);

typedef struct {
    serve_kind kind;
    json_t *root; /* the whole request document (owned reference) */

    /* Chat: borrowed from root, validated. */
    json_t *messages;             /* non-empty array of message objects */
    json_t *tools;                /* array or NULL */
    json_t *tool_choice;          /* "auto"/"none"/"required"/object or NULL */
    json_t *response_format;      /* object or NULL */
    int thinking;                 /* 1 (default) or 0: thinking / chat_template_kwargs.thinking */
    const char *reasoning_effort; /* "low"/"high"/"max" or NULL (renderer default) */

    /* Completion: the prompt text (borrowed from root). */
    const char *prompt;
    size_t prompt_len;

    /* Sampling. */
    double temperature;        /* default 1.0; 0 = greedy */
    double top_p;              /* default 1.0 */
    int top_k;                 /* default 0 = off */
    double min_p;              /* default 0 = off */
    double repetition_penalty; /* default 1.0 = off */
    int n;                     /* choices (chat; 1 elsewhere) */
    int has_seed;
    uint64_t seed;
    double presence_penalty;   /* -2..2, default 0 */
    double frequency_penalty;  /* -2..2, default 0 */
    k3_logit_bias *logit_bias; /* owned, n_logit_bias entries (request_openai.c) */
    int n_logit_bias;

    int max_tokens; /* after clamping to the cap; the cap if the client gave none */
    const char *stop[SERVE_MAX_STOP]; /* borrowed from root */
    int n_stop;

    int stream;
    int include_usage; /* stream_options.include_usage */
    int logprobs;      /* chat: logprobs true; completions: logprobs >= 1 */
    int top_logprobs;  /* 0..20 */

    /* Speculative decoding: -1 the server's setting (--spec), 0 off, 1 on. */
    int speculative;

    /* Prompt-cache scope beyond the API key (vLLM's cache_salt): borrowed, or NULL. */
    const char *cache_salt;
    size_t cache_salt_len;

    /* Test mode only: force the generated token ids (k3_test_force_tokens,
     * an array of ids) or the text whose tokenization is forced
     * (k3_test_force_text). Both still go through decode/parse/serialize. */
    json_t *force_tokens;
    const char *force_text;
    size_t force_text_len;
    /* Test mode only (k3_test_prefill_deadline_tokens): the --timeout
     * deadline counts as passed once this many prompt tokens were fed. */
    int has_test_deadline_tokens;
    long long test_deadline_tokens;
} serve_req;

/* Parse body[0..len). Returns 0 and fills *req (free with serve_req_free), or
 * -1 and fills *err (status 400/404/413...). */
int serve_req_parse(const char *body, size_t len, serve_kind kind, const serve_limits *lim,
                    serve_req *req, serve_err *err);
/* The same for a request already read as JSON (the Anthropic and Responses
 * routes build the chat request as a tree): takes root, kept in req->root
 * (freed with it, also on error). */
int serve_req_from_json(json_t *root, serve_kind kind, const serve_limits *lim, serve_req *req,
                        serve_err *err);
void serve_req_free(serve_req *req);

/* request_openai.c: logit_bias, presence / frequency penalties, and the
 * refusal of OpenAI fields k3 does not implement (n > 1, best_of, echo,
 * suffix, audio, ...). 0, or -1 with *err naming the field. */
int serve_req_parse_openai(serve_req *q, const serve_limits *lim, serve_err *err);

/* Fill an error; returns -1 so `return serve_err_set(...)` works. */
int serve_err_set(serve_err *err, int status, const char *type, const char *param, const char *code,
                  const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The error as a JSON document (malloc'd string; a fixed server_error body
 * if it cannot be built; NULL only if even that allocation fails). */
char *serve_err_json(const serve_err *err);
/* The same error in Anthropic's shape: {"type":"error","error":{type, message}}. */
char *serve_anthropic_err_json(const serve_err *e);
/* That fixed body (malloc'd; NULL only when out of memory). */
char *serve_err_fallback_json(void);

/* 1 if s[0..len) is well-formed UTF-8 (no surrogates, no overlongs). */
int serve_utf8_valid(const char *s, size_t len);

#endif
