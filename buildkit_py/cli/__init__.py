"""Command line: parses arguments, calls the API, prints results. No logic of its own: the parser (parser), the
commands (commands) and what they print (output).

Options may stand anywhere before `--`; only what follows `--` goes to the trainer.
"""

from __future__ import annotations

import os
import sys

from ..errors import BuildkitError, show, terminal_line

INTERNAL_ERROR = 70  # EX_SOFTWARE: a bug of ours, not the user's input

__all__ = ["INTERNAL_ERROR", "VERSION", "autopackage_main", "build_parser", "main", "parse"]


def __getattr__(name: str):
    """The parser and the flag tables it is built from load with the first command that parses: `--version` needs
    neither; what it prints loads with it (the warm process's client, cli.warm, needs none of them)."""
    if name in ("build_parser", "parse"):
        from . import parser

        return getattr(parser, name)
    if name == "VERSION":
        from .output import VERSION

        return VERSION
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def autopackage_main(argv: list[str] | None = None) -> int:
    """The `autopackage` console script: `buildkit-py autopackage`."""
    return main(["autopackage", *(sys.argv[1:] if argv is None else argv)])


def _report(exc: BaseException, debug: bool) -> None:
    if not debug:
        return
    import traceback  # --debug's only

    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:  # __context__ too: `from None` hides it, --debug shows it
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    for i, item in enumerate(chain):
        print(("" if i == 0 else "caused by: ") + "".join(traceback.format_exception(item, chain=False)).rstrip(),
              file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--version" in argv and set(argv) <= {"--version", "--debug"}:  # argparse's answer, without building the parser
        from .output import VERSION

        print(VERSION)
        return 0
    from .parser import parse

    args = parse(argv)
    debug = getattr(args, "debug", False)
    try:
        code = args.func(args)
        sys.stdout.flush()
        return code
    except BuildkitError as exc:
        print(terminal_line(f"buildkit-py: error: {exc}"), file=sys.stderr)
        _report(exc, debug)
        return exc.exit_code
    except KeyboardInterrupt:
        print("buildkit-py: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`resolve --json | head`): end quietly, as a killed pipeline member would.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:
        where = f" {show(exc.filename)}:" if exc.filename else ""
        print(f"buildkit-py: error:{where} {exc.strerror or exc}", file=sys.stderr)
        _report(exc, debug)
        return 1
    except Exception as exc:  # a bug of ours: say so in one line; --debug shows where
        print(terminal_line(f"buildkit-py: internal error: {type(exc).__name__}: {show(str(exc))} ")
              + "(run again with --debug for the traceback, and please report it)", file=sys.stderr)
        _report(exc, debug)
        return INTERNAL_ERROR

