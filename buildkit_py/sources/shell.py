"""Shell text as a POSIX shell reads it, as far as a reader that runs nothing can: the one reader of every command a
repository writes (a Dockerfile's shell form and `sh -c` text, shell scripts, Makefile recipes, README blocks, job
configs' commands). Quoting and escapes, line continuations, comments, `&&` / `||` / `;` / `|` / `&` lists, subshells and
braces, redirections (their targets left out), here-documents (their bodies skipped), `VAR=value` and `export` earlier in
the same text, `$VAR`, `${VAR}`, `${VAR:-default}` and the other defaults, the positional parameters and `"$@"`, and
functions defined earlier and called later. What only running could tell (`$(...)`, backquotes, a variable nobody set)
is a word whose value is unknown (None), never a guess.

Every simple command keeps where its words are in the text it came from, so a caller can rewrite one word of a script
and keep the rest of it as written."""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_TEXT = 1 << 20  # characters read of one text
MAX_COMMANDS = 5000  # simple commands of one text, functions' calls included
MAX_DEPTH = 8  # `sh -c` inside `sh -c` ..., and function calls inside function calls
# Reserved words that open or continue a compound command: what follows is a command of its own.
_OPENING = frozenset({"if", "then", "else", "elif", "while", "until", "do", "!", "{", "time"})
_CLOSING = frozenset({"fi", "done", "}", "esac"})
_OPERATORS = ("&&", "||", ";;", "<<-", ">>", "<<", "<&", ">&", "<>", ">|", "&", "|", ";", "<", ">", "(", ")", "\n")
_REDIRECTIONS = frozenset({"<<-", ">>", "<<", "<&", ">&", "<>", ">|", "<", ">"})
_SEPARATORS = frozenset({"&&", "||", ";", "&", "|", "\n", ";;"})


class ShellSyntaxError(ValueError):
    """Text no shell would run as written; `line` is where, 1-based within the text."""

    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line
        self.message = message


@dataclass(frozen=True)
class Word:
    """One word of a simple command after expansion: its value (None: only running could tell it), where its source
    word stands in the text (start, end offsets) and the source word as written."""

    value: str | None
    start: int
    end: int
    raw: str


@dataclass(frozen=True)
class Simple:
    """A simple command: its words (assignments before the command name are in `env`), where it starts, the
    operator that ends it, and whether it runs only under a condition (inside if/while/case, or after || )."""

    words: tuple[Word, ...]
    line: int
    env: tuple[tuple[str, str | None], ...] = ()
    ends: str = "\n"
    conditional: bool = False
    function: str | None = None  # the function whose body it is, where it ran through a call

    @property
    def values(self) -> list[str | None]:
        return [w.value for w in self.words]

    @property
    def start(self) -> int:
        return self.words[0].start if self.words else 0

    @property
    def end(self) -> int:
        return self.words[-1].end if self.words else 0


@dataclass
class _Token:
    kind: str  # "word" | "op"
    text: str  # the operator, or the word as written
    start: int
    end: int
    line: int
    parts: list = field(default_factory=list)  # a word's parts: (kind, text) with kind lit | sq | dq | param | unknown


@dataclass(frozen=True)
class Script:
    """What a text runs, in order, and the variables it leaves set."""

    commands: tuple[Simple, ...]
    variables: tuple[tuple[str, str | None], ...]
    text: str


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


class _Scope:
    """Variables, positional parameters and functions as a text sets them, while it is read in order."""

    def __init__(self, variables: dict[str, str | None], args: list[str | None] | None, name: str):
        self.variables = dict(variables)
        self.args = args  # None: unknown (what the job passes)
        self.name = name
        self.functions: dict[str, list[_Token]] = {}

    def param(self, expression: str) -> list[str | None] | str | None:
        """A parameter's value: a string, None (unknown), or a list for "$@"."""
        if expression in ("@", "*"):
            return list(self.args) if self.args is not None else None
        if expression == "#":
            return str(len(self.args)) if self.args is not None else None
        if expression == "0":
            return self.name
        if expression.isdigit():
            index = int(expression)
            if self.args is None:
                return None
            return self.args[index - 1] if index <= len(self.args) else ""
        if expression in ("?", "$", "!", "-"):
            return None
        return self.lookup(expression)

    def lookup(self, expression: str) -> str | None:
        """${NAME}, ${NAME:-default} and the other forms with a default; a variable the text never set is what the
        job's environment gives (unknown), unless the text says what to use when it is unset."""
        name, operator, default = _split_parameter(expression)
        if name is None:
            return None
        if name.isdigit() or name in ("@", "*"):
            found = self.param(name)
            if isinstance(found, list):
                found = " ".join(v for v in found if v is not None) if None not in found else None
            if found is None:
                return None
            value: str | None = found
            unset = name.isdigit() and self.args is not None and int(name) > len(self.args)
        else:
            unset = name not in self.variables
            value = self.variables.get(name)
            if value is None and not unset:
                return None  # set to what only running tells
        if operator is None:
            return None if unset and not name.isdigit() else value
        if operator == "other":
            return None  # ${VAR#pattern} and the like: what running gives
        empty = unset or value == ""
        if operator in (":-", ":="):
            return self._expand_default(default) if empty else value
        if operator in ("-", "="):
            return self._expand_default(default) if unset else value
        if operator == ":+":
            return "" if empty else self._expand_default(default)
        if operator == "+":
            return "" if unset else self._expand_default(default)
        return value  # ${VAR:?message}: the value, or the shell stops

    def _expand_default(self, text: str) -> str | None:
        try:
            word, _, _ = _word('"' + text.replace('"', '\\"') + '"', 0, 1)
        except ShellSyntaxError:
            return None
        if word is None:
            return ""
        values = _expand(word, self)
        return " ".join(v for v in values if v is not None) if values and None not in values else (None if values else "")


def _split_parameter(expression: str) -> tuple[str | None, str | None, str]:
    if expression.startswith("#"):
        return None, None, ""  # ${#VAR}: a length
    j = 0
    while j < len(expression) and (expression[j].isalnum() or expression[j] == "_"):
        j += 1
    if j == 0:
        return (expression, None, "") if expression in ("@", "*") else (None, None, "")
    name, rest = expression[:j], expression[j:]
    if not rest:
        return name, None, ""
    for operator in (":-", ":=", ":+", ":?", "-", "=", "+", "?"):
        if rest.startswith(operator):
            return name, operator, rest[len(operator):]
    return name, "other", rest


def _expand(token: _Token, scope: _Scope) -> list[str | None]:
    """The fields a word expands to: field splitting of unquoted expansions, "$@" as one field per argument."""
    fields: list[str | None] = []
    current: str | None = ""
    has_field = False
    if all((k == "dq" and not t) or (k == "qparam" and t == "@") for k, t in token.parts) and \
            any(k == "qparam" for k, _ in token.parts):
        spread = scope.param("@")
        return list(spread) if isinstance(spread, list) else [None]  # "$@": as many fields as arguments, none for none
    for kind, text in token.parts:
        if kind in ("lit", "sq", "dq"):
            if current is not None:
                current += text
            has_field = True
        elif kind == "unknown":
            current, has_field = None, True
        elif kind in ("param", "qparam"):
            value = scope.param(text) if text in ("@", "*") or text.isdigit() or text in "#?$!-" else scope.lookup(text)
            if isinstance(value, list):
                if kind == "qparam" and text == "@":  # "$@": each argument a field of its own
                    if not value:
                        continue
                    if current:
                        value = [current + (value[0] or "")] + value[1:] if value[0] is not None else [None, *value[1:]]
                    fields += value[:-1]
                    current, has_field = value[-1], True
                    continue
                value = " ".join(v for v in value if v is not None) if None not in value else None
            if value is None:
                current, has_field = None, True
            elif kind == "qparam":
                if current is not None:
                    current += value
                has_field = True
            else:
                pieces = value.split()
                if not pieces:
                    continue
                if current is not None:
                    pieces[0] = current + pieces[0]
                elif pieces:
                    pieces[0] = None  # type: ignore[call-overload]
                fields += pieces[:-1]
                current, has_field = pieces[-1], True
    if has_field:
        fields.append(current)
    return fields


_ASSIGNMENT_NAME = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789"


def _assignment(token: _Token) -> str | None:
    """The variable a word assigns (NAME=...), else None."""
    if not token.parts or token.parts[0][0] != "lit":
        return None
    name, equals, _ = token.parts[0][1].partition("=")
    if not equals or not name or name[0].isdigit() or any(c not in _ASSIGNMENT_NAME for c in name):
        return None
    return name


def _assigned_value(token: _Token, scope: _Scope) -> str | None:
    head = token.parts[0][1].partition("=")[2]
    rest = _Token("word", token.text, token.start, token.end, token.line, [("lit", head), *token.parts[1:]])
    # an assignment is not field-split: its value is the whole expansion
    values = _expand(_Token("word", "", 0, 0, 0, [("dq", "")] + [(("qparam" if k == "param" else k), t)
                                                              for k, t in rest.parts]), scope)
    return values[0] if len(values) == 1 else (None if None in values else " ".join(v or "" for v in values))


def read(text: str, *, variables: dict[str, str | None] | None = None, args: list[str | None] | None = None,
         name: str = "sh") -> Script:
    """The simple commands a shell would run for `text`, in order, each with its words expanded where the text
    itself tells their value. args: the positional parameters ($1 ...; None where the job gives them). Raises
    ShellSyntaxError for text no shell would run (an open quote, an open substitution)."""
    text = text[:MAX_TEXT]
    scope = _Scope(variables or {}, args, name)
    commands: list[Simple] = []
    _run(_lex(text), scope, commands, depth=0, function=None)
    return Script(tuple(commands), tuple(scope.variables.items()), text)


def _statements(tokens: list[_Token]) -> list[tuple[list[_Token], str]]:
    """The token list cut at separators: (tokens of one simple command, the operator after it)."""
    out: list[tuple[list[_Token], str]] = []
    current: list[_Token] = []
    for token in tokens:
        if token.kind == "op" and token.text in _SEPARATORS:
            out.append((current, token.text))
            current = []
        elif token.kind == "op" and token.text in ("(", ")"):
            if current and token.text == "(" and current[-1].kind == "word" and len(current) == 1:
                current.append(token)  # name ( ) { ...: a function definition
                continue
            if current and current[-1].kind == "op" and current[-1].text == "(":
                current.append(token)
                continue
            out.append((current, ";"))
            current = []
        else:
            current.append(token)
    out.append((current, "\n"))
    return out


def _run(tokens: list[_Token], scope: _Scope, commands: list[Simple], *, depth: int, function: str | None) -> None:
    conditional = 0  # nesting of if/while/until/case
    in_case = 0
    after_or = False
    statements = _statements(tokens)
    k = 0
    while k < len(statements):
        words, ends = statements[k]
        k += 1
        if len(commands) >= MAX_COMMANDS:
            return
        # reserved words that open or close compound commands
        while words and words[0].kind == "word" and words[0].text in _OPENING | _CLOSING | {"case", "for", "in", "esac"}:
            head = words[0].text
            if head in ("if", "while", "until"):
                conditional += 1
            elif head in ("fi", "done") and conditional:
                conditional -= 1
            elif head == "case":
                in_case += 1
                conditional += 1
                words = []
                break
            elif head == "esac":
                in_case = max(0, in_case - 1)
                conditional = max(0, conditional - 1)
            elif head == "for":
                words = []  # for NAME in WORDS: the loop variable's values are not followed
                break
            words = words[1:]
        if in_case and words and any(t.kind == "op" and t.text == ")" for t in words):
            cut = next(i for i, t in enumerate(words) if t.kind == "op" and t.text == ")")
            words = words[cut + 1:]  # a case pattern: PATTERN) command
        if not words:
            after_or = ends == "||"
            continue
        # a function definition: NAME ( ) { body }  (its body runs where it is called)
        if (len(words) >= 3 and words[0].kind == "word" and words[1].kind == "op" and words[1].text == "("
                and words[2].kind == "op" and words[2].text == ")") or (words[0].text == "function" and len(words) >= 2):
            fname = words[1].text if words[0].text == "function" else words[0].text
            scope.functions[fname], k = _function_body(words[(2 if words[0].text == "function" else 3):], statements, k)
            continue
        redirect_free = _without_redirections(words)
        env: list[tuple[str, str | None]] = []
        i = 0
        while i < len(redirect_free) and _assignment(redirect_free[i]) is not None:
            env.append((_assignment(redirect_free[i]), _assigned_value(redirect_free[i], scope)))  # type: ignore[arg-type]
            i += 1
        rest_tokens = redirect_free[i:]
        if not rest_tokens:
            scope.variables.update(env)  # NAME=value alone: the shell's own variable
            after_or = ends == "||"
            continue
        expanded: list[Word] = []
        for t in rest_tokens:
            for value in _expand(t, scope):
                expanded.append(Word(value, t.start, t.end, t.text))
        if not expanded:
            continue
        head = expanded[0].value
        _builtin(head, expanded, rest_tokens, scope)
        simple = Simple(tuple(expanded), rest_tokens[0].line, tuple(env), ends, bool(conditional) or after_or, function)
        if head in scope.functions and depth < MAX_DEPTH and function != head:
            inner = _Scope(scope.variables, [w.value for w in expanded[1:]], scope.name)
            inner.functions = scope.functions
            _run(scope.functions[head], inner, commands, depth=depth + 1, function=head)
            scope.variables.update(inner.variables)
        else:
            commands.append(simple)
        if head == "exit" and not simple.conditional:
            return
        after_or = ends == "||"



def _function_body(rest: list[_Token], statements: list, k: int) -> tuple[list[_Token], int]:
    """A function's body: the tokens between its braces, REST first and then statements from index K on, as far
    as the closing brace; and the index of the first statement after it."""
    body: list[_Token] = []
    opened = 0
    pending = [rest]
    while True:
        for t in pending.pop(0):
            if t.kind == "word" and t.text == "{":
                opened += 1
                if opened == 1:
                    continue
            if t.kind == "word" and t.text == "}":
                opened -= 1
                if opened == 0:
                    break
            body.append(t)
        else:
            if opened > 0 and k < len(statements):
                body.append(_Token("op", ";", 0, 0, 0))
                pending.append(statements[k][0])
                k += 1
                continue
        return body, k


def _without_redirections(words: list[_Token]) -> list[_Token]:
    """A statement's words without its redirections (`> file`, `2>&1`: the descriptor belongs to the redirection)."""
    kept: list[_Token] = []
    skip = False
    for t in words:
        if skip:
            skip = False
            continue
        if t.kind == "op" and t.text in _REDIRECTIONS:
            skip = True
            if kept and kept[-1].kind == "word" and kept[-1].text.isdigit() and kept[-1].end == t.start:
                kept.pop()
            continue
        if t.kind == "word":
            kept.append(t)
    return kept


def _builtin(head: str | None, expanded: list[Word], tokens: list[_Token], scope: _Scope) -> None:
    """What the shell's own commands change in the scope: variables set or unset, the positional arguments."""
    if head in ("export", "readonly", "local", "declare", "typeset"):
        for t in tokens[1:]:
            assigned = _assignment(t)
            if assigned is not None:
                scope.variables[assigned] = _assigned_value(t, scope)
    elif head == "unset":
        for w in expanded[1:]:
            scope.variables.pop(w.value or "", None)
    elif head == "set" and len(expanded) > 1 and expanded[1].value == "--":
        scope.args = [w.value for w in expanded[2:]]
    elif head == "shift" and scope.args is not None:
        count = int(expanded[1].value) if len(expanded) > 1 and (expanded[1].value or "").isdigit() else 1
        scope.args = scope.args[count:]


def text_of(words: list[str]) -> str:
    """Words as one shell line that gives them back."""
    import shlex

    return shlex.join(words)
