"""Shell text as a POSIX shell reads it, as far as a reader that runs nothing can: the one reader of every command a
repository writes (a Dockerfile's shell form and `sh -c` text, shell scripts, Makefile recipes, README blocks, job
configs' commands). Quoting and escapes, line continuations, comments, `&&` / `||` / `;` / `|` / `&` lists, subshells and
braces, redirections (their targets left out), here-documents (their bodies skipped), `VAR=value` and `export` earlier in
the same text, `$VAR`, `${VAR}`, `${VAR:-default}` and the other defaults, the positional parameters and `"$@"`, and
functions defined earlier and called later. What only running could tell (`$(...)`, backquotes, a variable nobody set)
is a word whose value is unknown (None), never a guess.

Every simple command keeps where its words are in the text it came from, so a caller can rewrite one word of a script
and keep the rest of it as written.

The reader in three steps: `lex` cuts the text into tokens and words, `expand` gives a word its values in the scope the
text has set so far, and `run` follows the commands in order (compound commands, functions, builtins)."""

from .lex import ShellSyntaxError
from .run import MAX_COMMANDS, MAX_DEPTH, MAX_TEXT, Script, Simple, Word, read, text_of

__all__ = ["MAX_COMMANDS", "MAX_DEPTH", "MAX_TEXT", "Script", "ShellSyntaxError", "Simple", "Word", "read", "text_of"]
