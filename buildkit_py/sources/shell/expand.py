"""The shell reader's expansion: variables, positional parameters and functions as a text sets them (the scope),
and the fields a word expands to in it, defaults and "$@" included; assignments' names and values."""

from __future__ import annotations

from .lex import ShellSyntaxError, _Token, _word


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
