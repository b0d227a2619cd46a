/* cache_type.c — the spelling of the MLA latent cache's element type
 * (`--cache-type f32|bf16`, k3.h). A leaf, so the option parsers (and their
 * fuzz targets) take it without the rest of the model. */
#include "base/err.h"
#include "k3.h"

#include <string.h>

int k3_cache_type_parse(const char *s, int *type) {
    if (s && !strcmp(s, "f32")) return *type = K3_CACHE_F32, 0;
    if (s && !strcmp(s, "bf16")) return *type = K3_CACHE_BF16, 0;
    return k3_seterr("--cache-type expects f32 or bf16, got '%s'", s ? s : "");
}
