/* webui.c — serves the chat page (webui.html) at GET /.
 *
 * The page is one self-contained file (HTML, CSS and script inline; no
 * external scripts, fonts or requests beyond this server's API), kept as a
 * real HTML file in the repository and assembled into the binary with
 * .incbin, so it is edited as HTML and never re-escaped into a C string. */
#include "serve/webui.h"

#include <string.h>

/* The path is relative to the repository root, where the build runs; the
 * Makefile makes webui.o depend on the file. NUL-terminated. */
__asm__(".section .rodata\n"
        ".global k3_webui_page\n"
        ".type k3_webui_page, @object\n"
        "k3_webui_page:\n"
        ".incbin \"src/serve/webui.html\"\n"
        ".byte 0\n"
        ".size k3_webui_page, . - k3_webui_page\n"
        ".previous\n");
extern const char k3_webui_page[];

/* The page runs its own inline script and style and talks only to this
 * server; nothing may frame it or load anything from elsewhere. */
static const char CSP[] = "default-src 'none'; script-src 'unsafe-inline'; "
                          "style-src 'unsafe-inline'; connect-src 'self'; img-src data:; "
                          "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

enum MHD_Result serve_handle_webui(serve_conn *c) {
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(k3_webui_page), (void *)k3_webui_page, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "Content-Security-Policy", CSP);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    c->status = 200;
    enum MHD_Result ok = MHD_queue_response(c->conn, 200, r);
    MHD_destroy_response(r);
    return ok;
}
