"""The shell reader's lexer: text cut into tokens (operators, and words with their parts: literal, quoted, a
parameter, or what only running tells), comments, line continuations and here-document bodies dropped, and the error
for text no shell would run."""

from __future__ import annotations

from dataclasses import dataclass, field

_OPERATORS = ("&&", "||", ";;", "<<-", ">>", "<<", "<&", ">&", "<>", ">|", "&", "|", ";", "<", ">", "(", ")", "\n")


class ShellSyntaxError(ValueError):
    """Text no shell would run as written; `line` is where, 1-based within the text."""

    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line
        self.message = message



@dataclass
class _Token:
    """A token of shell text: a word (with its parts) or an operator, with its offsets and line."""

    kind: str  # "word" | "op"
    text: str  # the operator, or the word as written
    start: int
    end: int
    line: int
    parts: list = field(default_factory=list)  # a word's parts: (kind, text) with kind lit | sq | dq | param | unknown



def _lex(text: str) -> list[_Token]:
    """Tokens: words with their parts, operators; comments, line continuations and here-document bodies dropped."""
    tokens: list[_Token] = []
    i, n, line = 0, len(text), 1
    pending_heredocs: list[tuple[str, bool]] = []
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] == "\n":
            i, line = i + 2, line + 1
            continue
        if c in " \t\r":
            i += 1
            continue
        if c == "#" and (not tokens or tokens[-1].end < i or tokens[-1].kind == "op"):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c == "\n":
            tokens.append(_Token("op", "\n", i, i + 1, line))
            i, line = i + 1, line + 1
            if pending_heredocs:
                i, line = _skip_heredocs(text, i, line, pending_heredocs)
                pending_heredocs = []
            continue
        op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
        if op is not None and op != "\n":
            tokens.append(_Token("op", op, i, i + len(op), line))
            i += len(op)
            if op in ("<<", "<<-"):
                while i < n and text[i] in " \t":
                    i += 1
                word, i, line = _word(text, i, line)
                if word is None:
                    raise ShellSyntaxError(line, "a here-document needs a delimiter word after <<")
                delimiter = "".join(t for _, t in word.parts)
                pending_heredocs.append((delimiter, op == "<<-"))
                tokens.append(word)
            continue
        word, i, line = _word(text, i, line)
        if word is not None:
            tokens.append(word)
    return tokens


def _skip_heredocs(text: str, i: int, line: int, heredocs: list[tuple[str, bool]]) -> tuple[int, int]:
    for delimiter, strip_tabs in heredocs:
        while i < len(text):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            body_line = text[i:end]
            i, line = end + 1, line + 1
            if (body_line.lstrip("\t") if strip_tabs else body_line) == delimiter:
                break
    return min(i, len(text)), line


def _word(text: str, i: int, line: int) -> tuple[_Token | None, int, int]:
    """One word from i: its parts and where it ends."""
    start, start_line, n = i, line, len(text)
    parts: list[tuple[str, str]] = []
    while i < n:
        c = text[i]
        if c in " \t\r\n" or any(text.startswith(o, i) for o in _OPERATORS if o != "\n"):
            break
        if c == "\\":
            if i + 1 < n and text[i + 1] == "\n":
                i, line = i + 2, line + 1
                continue
            parts.append(("sq", text[i + 1:i + 2]))
            i += 2
        elif c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise ShellSyntaxError(start_line, "a single quote is not closed")
            parts.append(("sq", text[i + 1:end]))
            line += text.count("\n", i, end)
            i = end + 1
        elif c == '"':
            i, line = _double_quoted(text, i + 1, line, parts, start_line)
        elif c == "$":
            i = _dollar(text, i, parts, quoted=False, line=start_line)
        elif c == "`":
            end = _closing_backquote(text, i + 1, start_line)
            line += text.count("\n", i, end)
            parts.append(("unknown", text[i:end + 1]))
            i = end + 1
        else:
            j = i
            while j < n and text[j] not in " \t\r\n\\'\"$`" and not any(text.startswith(o, j) for o in _OPERATORS):
                j += 1
            parts.append(("lit", text[i:j]))
            i = j
    if i == start:
        return None, i, line
    return _Token("word", text[start:i], start, i, start_line, parts), i, line


def _closing_backquote(text: str, i: int, line: int) -> int:
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "`":
            return i
        i += 1
    raise ShellSyntaxError(line, "a backquote is not closed")


def _double_quoted(text: str, i: int, line: int, parts: list, start_line: int) -> tuple[int, int]:
    buffer: list[str] = []

    def flush() -> None:
        if buffer:
            parts.append(("dq", "".join(buffer)))
            buffer.clear()

    parts.append(("dq", ""))  # "" is a word of its own, though empty
    while i < len(text):
        c = text[i]
        if c == '"':
            flush()
            return i + 1, line
        if c == "\\" and i + 1 < len(text):
            following = text[i + 1]
            if following == "\n":
                i, line = i + 2, line + 1
                continue
            buffer.append(following if following in '$`"\\' else c + following)
            i += 2
        elif c == "$":
            flush()
            i = _dollar(text, i, parts, quoted=True, line=start_line)
        elif c == "`":
            flush()
            end = _closing_backquote(text, i + 1, start_line)
            parts.append(("unknown", text[i:end + 1]))
            line += text.count("\n", i, end)
            i = end + 1
        else:
            if c == "\n":
                line += 1
            buffer.append(c)
            i += 1
    raise ShellSyntaxError(start_line, "a double quote is not closed")


def _matching(text: str, i: int, opening: str, closing: str, line: int) -> int:
    """The index of the bracket closing the one before i, quotes inside respected."""
    depth = 1
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise ShellSyntaxError(line, "a single quote is not closed")
            i = end + 1
            continue
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ShellSyntaxError(line, f"{opening} is not closed by {closing}")


def _dollar(text: str, i: int, parts: list, *, quoted: bool, line: int) -> int:
    """A parameter expansion, command substitution or arithmetic at i (a `$`)."""
    kind = "qparam" if quoted else "param"
    nxt = text[i + 1:i + 2]
    if text.startswith("$((", i):
        end = _matching(text, i + 3, "(", ")", line)
        end = text.find(")", end + 1) if text[end + 1:end + 2] == ")" else end
        parts.append(("unknown", text[i:end + 1]))
        return end + 1
    if nxt == "(":
        end = _matching(text, i + 2, "(", ")", line)
        parts.append(("unknown", text[i:end + 1]))
        return end + 1
    if nxt == "{":
        end = _matching(text, i + 2, "{", "}", line)
        parts.append((kind, text[i + 2:end]))
        return end + 1
    if nxt and (nxt.isalpha() or nxt == "_"):
        j = i + 1
        while j < len(text) and (text[j].isalnum() or text[j] == "_"):
            j += 1
        parts.append((kind, text[i + 1:j]))
        return j
    if nxt and (nxt.isdigit() or nxt in "@*#?$!-"):
        parts.append((kind, nxt))
        return i + 2
    parts.append(("lit" if not quoted else "dq", "$"))
    return i + 1
