/* bench_json.h — the JSON lines `k3 bench --json` prints, built with jansson
 * so that any bytes in a path or name still give valid JSON. */
#ifndef K3_CLI_BENCH_JSON_H
#define K3_CLI_BENCH_JSON_H

#include <jansson.h>

/* A JSON string of any bytes (a path from the command line): bytes that are
 * not UTF-8 become the text \xHH (base/utf8safe.h); quotes, backslashes and
 * control characters are escaped by jansson when printed. */
json_t *k3_bench_json_text(const char *bytes);
/* A number rounded to `decimals` places (an integer for 0); null when not
 * finite (JSON has no NaN or infinity). */
json_t *k3_bench_json_num(double v, int decimals);
/* A number to 6 significant digits; null when not finite. */
json_t *k3_bench_json_real(double v);
/* Print o compactly as one line on stdout, flush, and free it. */
void k3_bench_json_print(json_t *o);

#endif
