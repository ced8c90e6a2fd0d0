"""A Dockerfile's instructions as BuildKit's parser reads them (moby/buildkit frontend/dockerfile/parser): parser
directives at the top, the escape character, continuation lines with comments and blank lines inside, heredocs.
The one reader of Dockerfile text: the fast path (is the last layer the code?), inference (what does a training
Dockerfile run?) and --with-launcher (which lines are the final stage's command?) see the instructions the builder
sees, and so cannot be told one thing by a file that builds another."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..errors import ConfigError, show
from ..patterns import lazy_pattern

DIRECTIVES = ("syntax", "escape", "check")  # any other `# key=value` ends the directives, as a plain comment does
_DIRECTIVE = lazy_pattern(r"([a-zA-Z][a-zA-Z0-9]*)[\t\n\f\r ]*=[\t\n\f\r ]*(.+?)[\t\n\f\r ]*\Z", re.S)
_HEREDOC = lazy_pattern(r"([0-9]*)<<(-?)[\t\n\f\r ]*([^<]*)\Z", re.S)
_HEREDOC_KEYWORDS = frozenset({"ADD", "COPY", "RUN"})
_KEYWORD_SPACE = lazy_pattern(r"[\t\v\f\r ]+")  # what separates the keyword from its arguments


@dataclass(frozen=True)
class Heredoc:
    """A heredoc of an instruction: its terminator, whether `<<-` drops leading tabs, and its body."""

    name: str  # the terminator, unquoted
    chomp: bool  # <<-: leading tabs are dropped from the terminator line (and the body)
    content: str  # the body lines as written, line endings included


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction as BuildKit's parser reads it: its lines, keyword, arguments and heredocs."""

    line: int  # where it starts (1-based)
    end: int  # its last line, heredoc bodies included
    keyword: str  # upper case
    arguments: str  # after the keyword, flags included, continuation lines joined as BuildKit joins them
    text_lines: tuple[int, ...]  # the lines its text comes from: not the comments or blank lines inside it, nor heredocs
    heredocs: tuple[Heredoc, ...] = ()
    open: bool = False  # the file ends inside its continuation: its last text line ends in the escape character


@dataclass(frozen=True)
class Dockerfile:
    """A Dockerfile read as BuildKit reads it: its escape character, instructions and lines."""

    escape: str  # `\` or a `# escape=` directive's backtick
    instructions: tuple[Instruction, ...]
    lines: tuple[str, ...]  # the text split as BuildKit splits it (on \n), line endings kept

    def continuation(self, line: str) -> tuple[str, bool]:
        """A line without its continuation (the escape character and the blanks after it), and whether it had one."""
        return _continuation(self.escape, line)


def _is_space(ch: str) -> bool:
    """Go's unicode.IsSpace, which BuildKit trims with (Python's str.isspace also takes \\x1c-\\x1f)."""
    return ch in "\t\n\v\f\r \x85\xa0" or (ch > "\xff" and ch.isspace())


def _lstrip(text: str) -> str:
    i = 0
    while i < len(text) and _is_space(text[i]):
        i += 1
    return text[i:]


def _strip(text: str) -> str:
    text = _lstrip(text)
    j = len(text)
    while j and _is_space(text[j - 1]):
        j -= 1
    return text[:j]


# BuildKit's rule for a continuation: the escape character, then only blanks, and not itself escaped by the
# character before it; one pattern per escape character the directive allows.
_CONTINUED = {e: lazy_pattern(rf"([^{re.escape(e)}]){re.escape(e)}[ \t]*\Z|\A{re.escape(e)}[ \t]*\Z") for e in "\\`"}
_LINE = lazy_pattern(r"[^\n]*\n|[^\n]+\Z")  # as BuildKit splits: on \n alone


def _continuation(escape: str, line: str) -> tuple[str, bool]:
    joined, count = _CONTINUED[escape].subn(r"\1", line, count=1)
    return joined, bool(count)


def _is_comment(line: str) -> bool:
    return _lstrip(line).startswith("#")


def _without_newline(line: str) -> str:
    return line.rstrip("\r\n")


class _Directives:
    """Parser directives: `# key=value` lines before anything else (a blank line, another comment or an instruction
    ends them); each at most once; escape is ` or \\."""

    def __init__(self) -> None:
        self.done = False
        self.seen: set[str] = set()
        self.escape = "\\"

    def read(self, line: str) -> None:
        if self.done:
            return
        found = _DIRECTIVE.match(_lstrip(line[1:])) if line.startswith("#") else None
        key = found.group(1).lower() if found else None
        if found is None or key not in DIRECTIVES:
            self.done = True
            return
        if key in self.seen:
            raise _Refused(f"only one {key} parser directive can be used")
        self.seen.add(key)
        if key == "escape":
            if found.group(2) not in ("`", "\\"):
                raise _Refused(f"the escape directive's value {show(found.group(2))} is not ` or \\")
            self.escape = found.group(2)


def read(text: str) -> Dockerfile:
    """The Dockerfile's instructions as BuildKit reads them; ConfigError (naming the line) where BuildKit refuses the
    text for what this reader follows (directives, heredocs)."""
    dockerfile, refused = _read(text)
    if refused is not None:
        raise refused
    return dockerfile


def instructions(text: str) -> tuple[Instruction, ...]:
    """The instructions of a Dockerfile read for what it tells (inference, the fast path): one that BuildKit would
    refuse is read up to where it goes wrong, and its build says why."""
    return _read(text)[0].instructions


class _Refused(Exception):
    """Where BuildKit's parser refuses the text: the message, without the line."""


def _read(text: str) -> tuple[Dockerfile, ConfigError | None]:
    lines = _LINE.findall(text.removeprefix("\ufeff"))
    directives = _Directives()
    found: list[Instruction] = []
    i = start = 0
    try:
        while i < len(lines):
            first = _lstrip(_without_newline(lines[i]))
            i += 1
            start = i
            directives.read(first)
            if _is_comment(first):
                continue
            joined, continued = _continuation(directives.escape, first)
            if not continued and not joined:
                continue  # a blank line
            parts, text_lines = [joined], [i]
            while continued and i < len(lines):
                raw = _without_newline(lines[i])
                i += 1
                directives.read(raw)
                if _is_comment(raw) or not _lstrip(raw):
                    continue  # comments and blank lines inside a continuation are dropped
                joined, continued = _continuation(directives.escape, raw)
                parts.append(joined)
                text_lines.append(i)
            whole = "".join(parts)
            split = _KEYWORD_SPACE.split(_strip(whole), maxsplit=1)
            keyword, arguments = split[0].upper(), _strip(split[1]) if len(split) > 1 else ""
            heredocs: list[Heredoc] = []
            if "<<" in whole and _may_hold_heredocs(keyword, arguments, directives.escape):
                for name, chomp in _heredocs_of(whole):
                    body: list[str] = []
                    while True:
                        if i >= len(lines):
                            raise _Refused(f"the heredoc {show(name)} is never terminated (a line {show(name)} ends it)")
                        raw = lines[i]
                        i += 1
                        candidate = _without_newline(raw)
                        if (candidate.lstrip("\t") if chomp else candidate) == name:
                            break
                        body.append(raw)
                    heredocs.append(Heredoc(name, chomp, "".join(body)))
            found.append(Instruction(start, i, keyword, arguments, tuple(text_lines), tuple(heredocs), continued))
    except _Refused as exc:
        refused: ConfigError | None = ConfigError(f"line {start}: {exc}")
    else:
        refused = None
    return Dockerfile(directives.escape, tuple(found), tuple(lines)), refused


def _may_hold_heredocs(keyword: str, arguments: str, escape: str) -> bool:
    """RUN, COPY, ADD (also after ONBUILD) in shell form: BuildKit reads heredocs of no other instruction."""
    if keyword == "ONBUILD":
        split = _KEYWORD_SPACE.split(arguments, maxsplit=1)
        keyword, arguments = split[0].upper(), split[1] if len(split) > 1 else ""
    return keyword in _HEREDOC_KEYWORDS and exec_form(_without_flags(arguments, escape)) is None


def _without_flags(arguments: str, escape: str) -> str:
    """The arguments after the leading `--flag` words (`RUN --mount=... [...]` is still exec form)."""
    i, n = 0, len(arguments)
    while True:
        while i < n and _is_space(arguments[i]):
            i += 1
        if not arguments.startswith("--", i):
            return arguments[i:]
        quote = ""
        while i < n and (quote or not _is_space(arguments[i])):
            ch = arguments[i]
            if quote and ch == quote:
                quote = ""
            elif not quote and ch in "'\"":
                quote = ch
            elif ch == escape:
                i += 1
            i += 1
        if i >= n:
            return ""


class _Unlexed(Exception):
    """The shell lexer gives up on a line (an unterminated quote or ${): BuildKit then finds no heredoc in it."""


def _line_words(line: str) -> list[str]:
    """The words of an instruction line as BuildKit's lexer splits them to look for heredocs: quotes and escapes kept,
    whitespace inside quotes (or escaped) joins, `<<` with the blanks after it stays in its word."""
    words: list[str] = []
    word: list[str] = []
    i, n = 0, len(line)

    def close() -> None:
        if word:
            words.append("".join(word))
            word.clear()

    while i < n:
        ch = line[i]
        if ch in "'\"":
            end = _group_end(line, i)
            word.append(line[i:end])
            i = end
        elif ch == "$" and line.startswith("${", i):
            end = _group_end(line, i)
            for piece in line[i:end]:  # an unset variable's text is split like any text
                if _is_space(piece):
                    close()
                else:
                    word.append(piece)
            i = end
        elif ch == "\\":
            word.append(line[i:i + 2])
            i += 2
        elif line.startswith("<<", i):
            j = i + 2
            while j < n and line[j] in " \t\n":
                j += 1
            word.append(line[i:j])
            i = j
        elif _is_space(ch):
            close()
            i += 1
        else:
            word.append(ch)
            i += 1
    close()
    return words


def _group_end(text: str, i: int) -> int:
    """Where the quote or ${...} opened at i ends (after its closing character): the ${ and quotes nested in it
    counted on a stack, so a line of ten thousand nested ${ costs no recursion."""
    closing: list[str] = []
    j = i
    while True:
        if j >= len(text):
            raise _Unlexed
        top = closing[-1] if closing else None
        ch = text[j]
        if top is not None and ch == top:
            closing.pop()
            j += 1
            if not closing:
                return j
        elif top == "'":
            j += 1  # nothing is special inside single quotes
        elif ch == "\\" and top is not None:
            j += 2
        elif text.startswith("${", j):
            if j + 2 >= len(text) or text[j + 2] in "{}:":
                raise _Unlexed  # BuildKit: "bad substitution"
            closing.append("}")
            j += 2
        elif ch in "'\"" and top != '"':
            closing.append(ch)
            j += 1
        else:
            j += 1


def _unquoted(word: str) -> list[str]:
    """A heredoc's name as the lexer reads it: quotes removed, escapes resolved; more than one word is no name."""
    words: list[str] = []
    current: list[str] | None = None
    i, n = 0, len(word)
    while i < n:
        ch = word[i]
        if _is_space(ch):
            if current is not None:
                words.append("".join(current))
            current = None
            i += 1
            continue
        current = current if current is not None else []
        if ch == "'":
            end = word.find("'", i + 1)
            if end < 0:
                raise _Unlexed
            current.append(word[i + 1:end])
            i = end + 1
        elif ch == '"':
            end = _group_end(word, i)
            inner = word[i + 1:end - 1]
            current.append(re.sub(r'\\([\\"$])', r"\1", inner))
            i = end
        elif ch == "\\":
            current.append(word[i + 1:i + 2])
            i += 2
        else:
            current.append(ch)
            i += 1
    if current is not None:
        words.append("".join(current))
    return words


def _heredocs_of(line: str) -> list[tuple[str, bool]]:
    """(name, chomp) of each heredoc the line opens, in order: `<<EOF`, `<<-EOF`, `<<"EOF"`, several on a line."""
    try:
        words = _line_words(line)
    except _Unlexed:
        return []
    found: list[tuple[str, bool]] = []
    for word in words:
        match = _HEREDOC.match(word)
        if not match or not match.group(3):
            continue
        try:
            names = _unquoted(match.group(3))
        except _Unlexed:
            raise _Refused(f"the heredoc {show(word)} has an unterminated quote") from None
        if len(names) == 1:
            found.append((names[0], match.group(2) == "-"))
    return found


def exec_form(arguments: str) -> list[str] | None:
    """The words of an exec-form argument list (`["python", "-m", "x"]`); None for anything else."""
    if not _lstrip(arguments).startswith("["):
        return None
    try:
        words = json.loads(arguments)
    except (ValueError, RecursionError):  # not JSON, or arrays nested thousands deep: not an exec form either
        return None
    return words if isinstance(words, list) and all(isinstance(w, str) for w in words) else None
