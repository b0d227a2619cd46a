/* printer.h — shows a generation stream to the user: generated text goes
 * through the output channel parser (text/channels.h) so structural markers
 * never appear, and reasoning is told apart from the answer.
 *
 * On a terminal reasoning is dimmed, and control characters a random model
 * may emit (ESC, BEL...) are shown as U+FFFD instead of driving the
 * terminal. Otherwise the text is written as is, with a "[thinking]" line
 * before reasoning and an "[answer]" line before the answer that follows
 * it; tool calls are printed as "[tool call] name arguments".
 *
 * Structure comes from control-token ids only (channels.h): marker
 * spellings in the model's text are printed as text. The CLI declares no
 * tools, but a tools section the model opens with real control tokens is
 * still listed (it is only shown, never executed or sent to a client). */
#ifndef K3_GEN_PRINTER_H
#define K3_GEN_PRINTER_H

#include <stdint.h>
#include <stdio.h>

#include "text/channels.h"

typedef struct k3_printer k3_printer;

/* tty: 1 for terminal formatting. initial: the channel the prompt left open. */
k3_printer *k3_printer_new(FILE *out, int tty, const k3_xtml *x, k3_chan_state initial);
/* Show text of ordinary tokens (marker spellings in it are text). */
void k3_printer_push(k3_printer *p, const char *text, size_t len);
/* A control token (<|open|>, <|close|>, <|sep|>). */
void k3_printer_push_ctrl(k3_printer *p, k3_xtml_ctrl ctrl);
/* A piece from the k3_generate callback: id is a control token's id when
 * text is that token alone (see generate.h), else text is ordinary text. */
void k3_printer_emit(k3_printer *p, int32_t id, const char *text, size_t len);
/* End of the stream: flush held text, reset the terminal colour, end the line. */
void k3_printer_finish(k3_printer *p);
void k3_printer_free(k3_printer *p);
/* The output channel the stream is in now (to close the message in a chat). */
k3_chan_state k3_printer_state(const k3_printer *p);
/* Bytes of reasoning / content shown so far. */
size_t k3_printer_reasoning_bytes(const k3_printer *p);
size_t k3_printer_content_bytes(const k3_printer *p);

/* "[k3] WHAT (N): id,id,...\n" to f (the --verbose id lines of generate and
 * chat) in ONE write: under mpirun the ranks share stderr, and a line
 * written number by number could be cut by another rank's output. */
void k3_print_ids(FILE *f, const char *what, const int32_t *ids, size_t n);

#endif
