/* chat_render.h — internal to the chat renderer (chat.c, chat_args.c): the
 * segment writer and XTML tag primitives of chat.md §2.1, defined in
 * chat_render.c. */
#ifndef K3_TEXT_CHAT_RENDER_H
#define K3_TEXT_CHAT_RENDER_H

#include "text/chat.h"
#include "text/pyjson.h"

typedef struct {
    const k3_xtml *x;
    k3_chat_segs *out;
    const k3_chat_opts *opts;
    const json_t *last_assistant; /* most recent assistant message (for tool names) */
    int tool_index;               /* tool messages since that assistant message */
} k3_render;

typedef struct {
    const char *key;
    const char *val;
    size_t len;
} k3_attr;

/* A text segment (dropped when empty) / a control token segment. */
void k3_r_text(k3_render *r, const char *s, size_t n);
void k3_r_ctrl(k3_render *r, k3_xtml_ctrl c);
/* A control segment with literal text (the image placeholder). */
void k3_r_ctrl_text(k3_render *r, const char *s, size_t n);
/* open_tag(tag, attrs), close_tag(tag), end of message (chat.md §2.1). */
void k3_r_open(k3_render *r, k3_xtml_tag tag, const k3_attr *attrs, size_t nattrs);
void k3_r_close(k3_render *r, k3_xtml_tag tag);
void k3_r_end_message(k3_render *r);

/* The tools section of an assistant message (chat.md §2.5.1). path names
 * the message in errors ("messages[3]"). */
int k3_r_tool_calls(k3_render *r, const json_t *calls, const char *path);

#endif
