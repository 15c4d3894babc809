// CLibEdit: Debian's libedit (libedit-dev, BSD) through its readline-compatible callback interface, so that the
// caller polls stdin beside its own fds and feeds the editor one key at a time. libedit's state is global: one
// editor per process (LineEditor owns it).
#ifndef CLIBEDIT_H
#define CLIBEDIT_H

/// What one `cle_feed` did.
typedef enum {
    CLE_PENDING = 0,    ///< the line is still being typed
    CLE_LINE = 1,       ///< Enter: `cle_take_line` has the line
    CLE_END = 2,        ///< Ctrl-D on an empty line, or stdin ended
    CLE_INTERRUPT = 3,  ///< Ctrl-C: the line was dropped and the prompt drawn afresh
} cle_result;

/// The completer: called on Tab with the word at the cursor and the line before that word; it answers by calling
/// `cle_add_candidate` once per candidate.
typedef void (*cle_completer)(const char *word, const char *before, void *context);

/// Sets libedit up on stdin/stdout (a terminal): Ctrl-C as a key (the terminal's ISIG off while editing), Tab
/// through `completer`, the history loaded from `history_path` (may be NULL) and kept to `history_limit` lines.
/// Returns 0, or -1 when libedit could not start.
int cle_open(const char *history_path, int history_limit, cle_completer completer, void *context);
/// Shows `prompt` and starts editing a line (raw mode until the line ends).
void cle_begin_line(const char *prompt);
/// Reads what stdin has (call when poll says it is readable) and returns what it made of it.
cle_result cle_feed(void);
/// The line `cle_feed` finished (malloc'd, the caller frees), or NULL.
char *cle_take_line(void);
/// While a line is being edited: erases the prompt and the line, writes `text` and a newline, and redraws the
/// prompt and the line with the cursor where it was.
void cle_print_above(const char *text);
/// `text` and a newline on stdout, flushed: no editor state is touched (any thread, when no line is edited).
void cle_print_line(const char *text);
/// Replaces the prompt; redrawn at once when a line is being edited.
void cle_set_prompt(const char *prompt);
/// One candidate for the completion under way (only inside the completer).
void cle_add_candidate(const char *candidate);
/// Adds `line` to the history and writes the history file (when there is one): 0, or -1 when the write failed.
int cle_history_add(const char *line);
/// Ends a line being edited without a result (the terminal back to how it was, the cursor on a new row).
void cle_end_line(void);
/// Ends a line being edited and tears libedit down.
void cle_close(void);

#endif
