// libedit's readline-compatible callback interface (<editline/readline.h>), kept to what LineEditor needs. The
// state is libedit's own and global, so it is here too: one editor per process, driven from one thread.
#include "CLibEdit.h"
#include "CBlueZSocket.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <editline/readline.h>
#include <dlfcn.h>

// libedit is loaded with dlopen when the first editor opens, not at process start: only `mirror shell` edits lines,
// and every other command keeps to the libraries the README's `ldd` line lists. Debian's libedit2 soname.
#define CLE_LIBRARY "libedit.so.2"
#define CLE_SYMBOLS(X) \
    X(rl_outstream) X(rl_instream) X(rl_readline_name) X(rl_catch_signals) X(rl_initialize) X(rl_parse_and_bind) \
    X(rl_add_defun) X(rl_attempted_completion_function) X(rl_basic_word_break_characters) \
    X(rl_completer_word_break_characters) X(rl_attempted_completion_over) X(rl_completion_matches) \
    X(rl_line_buffer) X(rl_point) X(rl_insert_text) X(rl_delete_text) X(rl_forced_update_display) X(rl_set_prompt) \
    X(rl_callback_handler_install) X(rl_callback_handler_remove) X(rl_callback_read_char) \
    X(stifle_history) X(read_history) X(write_history) X(add_history)
#define CLE_FIELD(name) __typeof__(&name) name;
static struct { CLE_SYMBOLS(CLE_FIELD) } lib;
static int lib_loaded;  // 1 once every symbol is resolved

// Loads libedit and resolves what this file uses; 0 when it is there, -1 when not.
static int load_libedit(void) {
    if (lib_loaded) return 0;
    void *handle = dlopen(CLE_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) return -1;
#define CLE_RESOLVE(name) if ((lib.name = (__typeof__(lib.name))dlsym(handle, #name)) == NULL) return -1;
    CLE_SYMBOLS(CLE_RESOLVE)
#undef CLE_RESOLVE
    lib_loaded = 1;
    return 0;
}

// From here on each libedit name is its resolved address (the names as readline.h declares them).
#define rl_outstream (*lib.rl_outstream)
#define rl_instream (*lib.rl_instream)
#define rl_readline_name (*lib.rl_readline_name)
#define rl_catch_signals (*lib.rl_catch_signals)
#define rl_initialize (*lib.rl_initialize)
#define rl_parse_and_bind (*lib.rl_parse_and_bind)
#define rl_add_defun (*lib.rl_add_defun)
#define rl_attempted_completion_function (*lib.rl_attempted_completion_function)
#define rl_basic_word_break_characters (*lib.rl_basic_word_break_characters)
#define rl_completer_word_break_characters (*lib.rl_completer_word_break_characters)
#define rl_attempted_completion_over (*lib.rl_attempted_completion_over)
#define rl_completion_matches (*lib.rl_completion_matches)
#define rl_line_buffer (*lib.rl_line_buffer)
#define rl_point (*lib.rl_point)
#define rl_insert_text (*lib.rl_insert_text)
#define rl_delete_text (*lib.rl_delete_text)
#define rl_forced_update_display (*lib.rl_forced_update_display)
#define rl_set_prompt (*lib.rl_set_prompt)
#define rl_callback_handler_install (*lib.rl_callback_handler_install)
#define rl_callback_handler_remove (*lib.rl_callback_handler_remove)
#define rl_callback_read_char (*lib.rl_callback_read_char)
#define stifle_history (*lib.stifle_history)
#define read_history (*lib.read_history)
#define write_history (*lib.write_history)
#define add_history (*lib.add_history)

static char *prompt_text;          // the prompt as last set (libedit copies it too)
static char *history_file;         // NULL: the history is not kept
static int editing;                // a line is on the screen (between cle_begin_line and its end)
static char *finished_line;        // the line Enter finished, until cle_take_line
static int ended, interrupted;     // what the last key did
static cle_completer completer_fn;
static void *completer_context;
static char **candidates;          // the candidates of the completion under way
static size_t candidate_count, candidate_capacity, candidate_next;
static int redraw_from = -1;       // a unique completion was inserted: redraw, the cursor was this many columns in

static void on_line(char *line) {
    editing = 0;
    if (line == NULL) {  // Ctrl-D on an empty line: the next output starts on a row of its own
        ended = 1;
        fputs("\r\n", rl_outstream);
        fflush(rl_outstream);
        return;
    }
    free(finished_line);
    finished_line = line;
}

// Ctrl-C, a key while ISIG is off: cle_feed drops the line once libedit has returned.
static int on_interrupt(int count, int key) {
    (void)count; (void)key;
    interrupted = 1;
    return 0;
}

static int columns_before_cursor(void);
static void erase_editing_area(FILE *out, int columns);

static char *next_candidate(const char *text, int state) {
    (void)text;
    if (state == 0) candidate_next = 0;
    if (candidate_next >= candidate_count) return NULL;
    return strdup(candidates[candidate_next++]);
}

static void clear_candidates(void) {
    for (size_t i = 0; i < candidate_count; i++) free(candidates[i]);
    candidate_count = 0;
}

// Tab: the Swift completer names the candidates; libedit completes their common prefix or lists them. Never
// libedit's file-name completion.
static char **attempt_completion(const char *text, int start, int end) {
    (void)end;
    rl_attempted_completion_over = 1;
    clear_candidates();
    if (completer_fn == NULL) return NULL;
    char *before = strndup(rl_line_buffer, (size_t)start);
    completer_fn(text, before ? before : "", completer_context);
    free(before);
    if (candidate_count == 0) return NULL;
    if (candidate_count == 1) {
        // One candidate: inserted here with its space, since libedit's own path rings the bell even when the
        // completion is unique; cle_feed redraws the line.
        redraw_from = columns_before_cursor();
        rl_insert_text(candidates[0] + strlen(text));
        rl_insert_text(" ");
        clear_candidates();
        return NULL;
    }
    char **matches = rl_completion_matches(text, next_candidate);
    clear_candidates();
    return matches;
}

void cle_add_candidate(const char *candidate) {
    if (candidate_count == candidate_capacity) {
        size_t capacity = candidate_capacity ? candidate_capacity * 2 : 16;
        char **grown = realloc(candidates, capacity * sizeof *grown);
        if (grown == NULL) return;
        candidates = grown;
        candidate_capacity = capacity;
    }
    char *copy = strdup(candidate);
    if (copy) candidates[candidate_count++] = copy;
}

int cle_open(const char *history_path, int history_limit, cle_completer completer, void *context) {
    if (load_libedit() != 0) return -1;
    rl_instream = stdin;
    rl_outstream = stdout;
    rl_readline_name = "mirror";
    rl_catch_signals = 0;  // the process's own signal handling stays in charge (SIGINT while a command runs)
    if (rl_initialize() != 0) return -1;
    // Ctrl-C reaches the editor as a key while a line is edited (ISIG off in libedit's edit mode only).
    rl_parse_and_bind("setty -d -isig");
    rl_add_defun("mirror-interrupt", on_interrupt, 3);
    completer_fn = completer;
    completer_context = context;
    rl_attempted_completion_function = attempt_completion;
    rl_basic_word_break_characters = " \t\n";
    rl_completer_word_break_characters = (char *)" \t\n";
    if (history_limit > 0) stifle_history(history_limit);
    free(history_file);
    history_file = history_path ? strdup(history_path) : NULL;
    if (history_file) read_history(history_file);  // a missing or empty file is an empty history
    return 0;
}

void cle_begin_line(const char *prompt) {
    free(prompt_text);
    prompt_text = strdup(prompt);
    ended = interrupted = 0;
    editing = 1;
    rl_callback_handler_install(prompt, on_line);
}

cle_result cle_feed(void) {
    ended = interrupted = 0;
    rl_callback_read_char();
    if (redraw_from >= 0) {
        erase_editing_area(rl_outstream, redraw_from);
        redraw_from = -1;
        rl_forced_update_display();
        fflush(rl_outstream);
    }
    if (ended) return CLE_END;
    if (finished_line) return CLE_LINE;
    if (interrupted) {
        // "^C" where the line was, then the handler installed afresh: libedit empties its line (read_prepare's
        // ch_reset) and draws the prompt on the next row. (rl_delete_text cannot delete up to the line's end.)
        fputs("^C\r\n", rl_outstream);
        rl_callback_handler_remove();
        rl_callback_handler_install(prompt_text ? prompt_text : "", on_line);
        editing = 1;
        return CLE_INTERRUPT;
    }
    return CLE_PENDING;
}

char *cle_take_line(void) {
    char *line = finished_line;
    finished_line = NULL;
    return line;
}

// The columns the prompt and the line take before the cursor: UTF-8 lead bytes, one column each.
static int columns_before_cursor(void) {
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)(prompt_text ? prompt_text : ""); *p; p++)
        if ((*p & 0xC0) != 0x80) n++;
    for (int i = 0; i < rl_point && rl_line_buffer && rl_line_buffer[i]; i++)
        if (((unsigned char)rl_line_buffer[i] & 0xC0) != 0x80) n++;
    return n;
}

// Back to the prompt's first row, then erase to the end of the screen (VT100 CUU and ED).
static void erase_editing_area(FILE *out, int columns) {
    int cols = cbz_terminal_columns(fileno(out));
    if (cols <= 0) cols = 80;
    int up = columns / cols;
    fputc('\r', out);
    if (up > 0) fprintf(out, "\033[%dA", up);
    fputs("\033[J", out);
}

void cle_print_above(const char *text) {
    FILE *out = rl_outstream;
    if (!editing) {
        cle_print_line(text);
        return;
    }
    erase_editing_area(out, columns_before_cursor());
    // The terminal is raw while editing: every newline goes out as CR LF.
    for (const char *p = text; *p; p++) {
        if (*p == '\n') fputc('\r', out);
        fputc(*p, out);
    }
    fputs("\r\n", out);
    rl_forced_update_display();  // the prompt and the line again, the cursor where it was
    fflush(out);
}

void cle_print_line(const char *text) {
    fputs(text, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

void cle_set_prompt(const char *prompt) {
    if (editing) erase_editing_area(rl_outstream, columns_before_cursor());  // measured with the old prompt
    free(prompt_text);
    prompt_text = strdup(prompt);
    rl_set_prompt(prompt);
    if (editing) {
        rl_forced_update_display();
        fflush(rl_outstream);
    }
}

int cle_history_add(const char *line) {
    add_history(line);
    if (history_file == NULL) return 0;
    return write_history(history_file) == 0 ? 0 : -1;
}

void cle_end_line(void) {
    if (!editing) return;
    rl_callback_handler_remove();
    fputs("\r\n", rl_outstream);
    fflush(rl_outstream);
    editing = 0;
}

void cle_close(void) {
    cle_end_line();
    free(finished_line);
    finished_line = NULL;
    clear_candidates();
    free(history_file);
    history_file = NULL;
    completer_fn = NULL;
}
