/* limits.c — per-request resource limits of `k3 serve` (limits.h). */
#include "serve/limits.h"

#include <string.h>

static int too_complex(serve_err *err, const char *what, size_t n, size_t cap) {
    return serve_err_set(err, 400, NULL, NULL, "request_too_complex",
                         "The request body has %s%zu %s; the limit is %zu.",
                         n > cap ? "more than " : "", cap, what, cap);
}

int serve_json_budget(const char *body, size_t len, serve_json_count *count, serve_err *err) {
    serve_json_count c = {0};
    int depth = 0, in_str = 0, esc = 0, in_tok = 0, rc = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)body[i];
        if (in_str) {
            if (esc)
                esc = 0;
            else if (ch == '\\')
                esc = 1;
            else if (ch == '"')
                in_str = 0;
            continue;
        }
        int tok = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= 'A' && ch <= 'Z') || ch == '.' || ch == '+' || ch == '-';
        if (tok && !in_tok) c.values++; /* a number or a literal */
        in_tok = tok;
        if (ch == '"') {
            in_str = 1;
            c.values++; /* strings and keys both cost a node */
        } else if (ch == '{' || ch == '[') {
            c.values++;
            c.containers++;
            if (++depth > c.depth) c.depth = depth;
        } else if ((ch == '}' || ch == ']') && depth > 0) {
            depth--;
        }
        if (c.depth > SERVE_JSON_MAX_DEPTH) {
            rc = serve_err_set(err, 400, NULL, NULL, "request_too_complex",
                               "The request body nests deeper than %d levels.",
                               SERVE_JSON_MAX_DEPTH);
            break;
        }
        if (c.containers > SERVE_JSON_MAX_CONTAINERS) {
            rc = too_complex(err, "objects and arrays", c.containers, SERVE_JSON_MAX_CONTAINERS);
            break;
        }
        if (c.values > SERVE_JSON_MAX_VALUES) {
            rc = too_complex(err, "JSON values", c.values, SERVE_JSON_MAX_VALUES);
            break;
        }
    }
    if (count) *count = c;
    return rc;
}

int serve_job_prefill_expired(const serve_job *j, double now) {
    if (j->req.has_test_deadline_tokens && j->n_prefilled >= j->req.test_deadline_tokens) return 1;
    return j->deadline > 0 && now > j->deadline;
}

void serve_job_error_body(serve_job *j, const serve_err *e, k3_buf *b) {
    if (!j->req.stream) j->status = e->status;
    serve_ev ev = {.kind = SERVE_EV_ERROR, .err = e};
    serve_render_emit(&j->render, &ev, b);
}

void serve_job_timeout_body(serve_job *j, double timeout_s, k3_buf *b) {
    serve_err e;
    serve_err_set(&e, 504, "server_error", NULL, "timeout",
                  "The prompt was not processed within the server's time limit (--timeout %g s): "
                  "%lld of %lld prompt tokens were done.",
                  timeout_s, (long long)(j->n_fed), (long long)j->n_prompt);
    serve_job_error_body(j, &e, b);
}

int serve_job_unread_over(serve_job *j, size_t max_unread) {
    if (!max_unread) return 0;
    pthread_mutex_lock(&j->mu);
    int over = j->out_len > max_unread;
    pthread_mutex_unlock(&j->mu);
    return over;
}

json_t *serve_limits_json(const serve_opts *o, int ctx_size) {
    json_t *l = json_pack("{s:i,s:i,s:I,s:f,s:f,s:i,s:i,s:I,s:i,s:i,s:i}", "ctx_size", ctx_size,
                          "max_tokens", o->max_tokens_cap, "max_body", (json_int_t)o->max_body,
                          "timeout_s", o->timeout_s, "idle_timeout_s", o->idle_timeout_s,
                          "max_connections", o->max_connections, "max_conn_per_ip",
                          o->max_conn_per_ip, "max_unread", (json_int_t)o->max_unread,
                          "max_json_depth", SERVE_JSON_MAX_DEPTH, "max_json_containers",
                          SERVE_JSON_MAX_CONTAINERS, "max_json_values", SERVE_JSON_MAX_VALUES);
    json_object_set_new(l, "header_timeout_s", json_real(o->header_timeout_s));
    json_object_set_new(l, "body_timeout_s", json_real(o->body_timeout_s));
    json_object_set_new(l, "min_body_rate", json_integer((json_int_t)o->min_body_rate));
    json_object_set_new(l, "max_reply", json_integer(SERVE_MAX_REPLY));
    return l;
}
