/* lineedit.h — how `k3 chat` reads its turns.
 *
 * On a terminal: line editing and history through libedit (arrows, Ctrl-A/E,
 * Ctrl-R...), the history kept in ~/.k3_history (K3_HISTORY=FILE elsewhere,
 * K3_HISTORY= empty for none). Otherwise plain lines from stdin. Either way a
 * message may span lines: a line ending in a backslash continues on the next
 * one, and a line that is exactly three double quotes (""") opens a block
 * that runs to the next such line. A Ctrl-C at the prompt prints a hint and
 * asks again. */
#ifndef K3_CLI_LINEEDIT_H
#define K3_CLI_LINEEDIT_H

#include <signal.h>

typedef struct cli_lines cli_lines;

/* interactive: stdin is a terminal (libedit, prompts). interrupted: the
 * flag the SIGINT handler sets (cleared here when a Ctrl-C came at the prompt). */
cli_lines *cli_lines_open(int interactive, volatile sig_atomic_t *interrupted);
/* The next message (without the final newline; lines of a multi-line message
 * joined with '\n'), valid until the next call; NULL at end of input. */
const char *cli_lines_next(cli_lines *l);
/* Saves the history (interactive only) and frees. */
void cli_lines_close(cli_lines *l);

#endif
