/* rstore.h — the Responses API store: what previous_response_id,
 * item_reference, GET/DELETE /v1/responses/{id} and .../input_items read.
 *
 *   serve_rstore *s = serve_rstore_new(64 << 20);
 *   char id[SERVE_RSTORE_ID_MAX];
 *   serve_rstore_new_id(id);                        // "resp_" + 32 hex digits
 *   serve_rstore_put(s, scope, scope_len, id, response_json, messages_json, input_json);
 *   char *msgs = serve_rstore_get(s, scope, scope_len, id, SERVE_RS_MESSAGES);
 *
 * Scopes: every entry belongs to the scope of the request that made it (the
 * credential plus cache_salt, serve_scope_key() in guard.h — the prompt
 * cache's scope). A lookup from another scope finds nothing, exactly as for an
 * id that never existed. Ids carry 128 bits from getrandom(2).
 *
 * Memory: entries are kept as three JSON texts (the response object, the
 * conversation as chat messages, the input items), never as JSON trees, and
 * every byte an entry holds (texts, id, scope, bookkeeping) is charged to the
 * byte budget. When an entry does not fit, entries are evicted from the scope
 * that holds the most bytes, least recently used first, so a client that
 * floods the store evicts its own responses before anyone else's (max-min
 * fair shares). An entry larger than the whole budget is not kept.
 * Thread safe (one mutex). */
#ifndef K3_SERVE_RSTORE_H
#define K3_SERVE_RSTORE_H

#include <jansson.h>
#include <stddef.h>

#include "base/buf.h"

#define SERVE_RSTORE_ID_MAX 48 /* "resp_" + 32 hex + NUL, with room */

typedef struct serve_rstore serve_rstore;

typedef enum { SERVE_RS_RESPONSE, SERVE_RS_MESSAGES, SERVE_RS_INPUT } serve_rs_part;

typedef struct {
    size_t bytes, budget; /* charged bytes now, the budget */
    long long entries, scopes, evictions, refused;
} serve_rstore_stats;

/* The default budget: 1/64 of the machine's memory, within [16 MiB, 1 GiB]. */
size_t serve_rstore_default_budget(void);
/* budget: bytes; 0 keeps nothing (every lookup answers unknown). */
serve_rstore *serve_rstore_new(size_t budget);
void serve_rstore_free(serve_rstore *s);

/* A fresh id "resp_" + 32 lower-case hex digits (128 random bits). 0, or -1
 * when the OS's random source failed. */
int serve_rstore_new_id(char id[SERVE_RSTORE_ID_MAX]);
/* The 32 hex digits of an id such as "resp_<hex>" or "msg_<hex>_3": a
 * pointer into id, or NULL if it has none. */
const char *serve_rstore_id_hex(const char *id);

/* Keep response id (the texts are copied) in scope. 0, or -1 when it is
 * larger than the budget (nothing kept). */
int serve_rstore_put(serve_rstore *s, const char *scope, size_t scope_len, const char *id,
                     const char *response, const char *messages, const char *input);
/* A copy (free()) of one part of response id, or NULL: unknown, evicted,
 * deleted or another scope's. Marks the entry recently used. */
char *serve_rstore_get(serve_rstore *s, const char *scope, size_t scope_len, const char *id,
                       serve_rs_part part);
/* The stored item item_id (an output or input item of the response its hex
 * digits name), as a new JSON reference, or NULL as for serve_rstore_get. */
json_t *serve_rstore_item(serve_rstore *s, const char *scope, size_t scope_len,
                          const char *item_id);
/* Forget response id. 0, or -1 when unknown in scope. */
int serve_rstore_delete(serve_rstore *s, const char *scope, size_t scope_len, const char *id);

void serve_rstore_stats_get(serve_rstore *s, serve_rstore_stats *st);
/* The store's gauges and counters in the Prometheus text format. */
void serve_rstore_metrics(serve_rstore *s, const char *model, k3_buf *out);

#endif
