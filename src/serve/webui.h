/* webui.h — the chat page answered at GET / (src/serve/webui.html, built
 * into the binary). */
#ifndef K3_SERVE_WEBUI_H
#define K3_SERVE_WEBUI_H

#include "serve/http_internal.h"

/* GET /: the page, open to all (it asks for the API key itself when the
 * server has one, and sends it as a Bearer token). */
enum MHD_Result serve_handle_webui(serve_conn *c);

#endif
