"""The shell reader's runner: the simple commands a text runs, in order, with their words expanded (compound
commands' reserved words, case patterns, function definitions and calls, redirections left out, and what the shell's
own commands change), and the limits on how much of a text is read."""

from __future__ import annotations

from dataclasses import dataclass

from .expand import _assigned_value, _assignment, _expand, _Scope
from .lex import _lex, _Token

MAX_TEXT = 1 << 20  # characters read of one text
MAX_COMMANDS = 5000  # simple commands of one text, functions' calls included
MAX_DEPTH = 8  # `sh -c` inside `sh -c` ..., and function calls inside function calls
# Reserved words that open or continue a compound command: what follows is a command of its own.
_OPENING = frozenset({"if", "then", "else", "elif", "while", "until", "do", "!", "{", "time"})
_CLOSING = frozenset({"fi", "done", "}", "esac"})
_REDIRECTIONS = frozenset({"<<-", ">>", "<<", "<&", ">&", "<>", ">|", "<", ">"})
_SEPARATORS = frozenset({"&&", "||", ";", "&", "|", "\n", ";;"})


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



@dataclass(frozen=True)
class Script:
    """What a text runs, in order, and the variables it leaves set."""

    commands: tuple[Simple, ...]
    variables: tuple[tuple[str, str | None], ...]
    text: str


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
