"""The `judge` command line: one parser, a subcommand per module of `judge.cli`."""

from __future__ import annotations

import argparse
import codecs
import contextlib
import importlib
import re
import signal
import sys
import threading
import traceback
from collections.abc import Sequence

from judge.errors import JudgeError
from judge.signals import Terminated, quiet_after_stop, raise_on_sigterm
from judge.version import __version__

# Every command, in the order `judge --help` lists them; each is the module judge.cli.<name>.
COMMANDS = (
    "ir",
    "eval",
    "experiment",
    "merge",
    "demo",
    "compare",
    "agreement",
    "annotate",
    "estimate",
    "align",
    "plan",
    "probe",
    "metrics",
    "cache",
    "testset",
    "view",
    "runs",
    "traces",
    "monitor",
)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of the `judge` command.

    Args:
        command: register only this command (the one being run): the others' modules
            are not imported, so `judge ir` on a small file starts in a few tens of ms.
    """
    parser = argparse.ArgumentParser(
        prog="judge",
        description="Measure the quality of retrieval-augmented generation (RAG) systems.",
    )
    parser.add_argument("--version", action="version", version=f"judge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # Each command module is imported here, not at the top: `judge ir` stays light.
    for name in (command,) if command in COMMANDS else COMMANDS:
        importlib.import_module(f"judge.cli.{name}").add_parser(sub)
    return parser


EXIT_USAGE = 2  # a usage, input, configuration, output or cache error: one line says what
EXIT_INTERNAL = 70  # a bug in judge (sysexits' EX_SOFTWARE): the traceback is printed
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it
EXIT_TERMINATED = 143  # SIGTERM (128 + SIGTERM): what `timeout` and CI cancels send


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `judge` console script; returns the exit code."""
    kept = _never_unencodable()
    try:
        return _main(argv)
    finally:
        _restore(kept)


def _main(argv: Sequence[str] | None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    # The command is the first argument (options before it are judge's own: --help,
    # --version, which need every command).
    parser = build_parser(given[0] if given else None)
    args = parser.parse_args(given)
    if not hasattr(args, "func"):
        parser.print_help()
        return EXIT_USAGE
    in_main_thread = threading.current_thread() is threading.main_thread()
    if in_main_thread:
        previous = raise_on_sigterm()
        interrupt = signal.getsignal(signal.SIGINT)
    try:
        return int(args.func(args))
    except JudgeError as exc:
        from judge.cli.words import cli_words  # the message in flags, not keyword arguments
        from judge.formatting import terminal_text  # user text in it: a name, an app's error

        print(f"judge: error: {terminal_text(cli_words(str(exc)))}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `judge ir ... | head` is fine
        return 0
    except OSError as exc:  # the file system said no (a file missing, a disk full...)
        from judge.formatting import terminal_text

        where = f"{exc.filename}: " if exc.filename else ""
        print(f"judge: error: {terminal_text(f'{where}{exc.strerror or exc}')}", file=sys.stderr)
        return EXIT_USAGE
    except Terminated:
        _stopping(in_main_thread)
        quiet_after_stop()
        print("judge: terminated (SIGTERM)", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        _stopping(in_main_thread)
        quiet_after_stop()
        print("judge: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception:
        traceback.print_exc()
        print(
            f"judge: internal error (exit {EXIT_INTERNAL}): this is a bug in judge "
            f"{__version__}, not in your data or setup; please report it with the command "
            "you ran and the traceback above",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)
            if interrupt is not None:  # (None: not set from Python; left as it is)
                signal.signal(signal.SIGINT, interrupt)


def _stopping(in_main_thread: bool) -> None:
    """Ignore Ctrl-C and SIGTERM while judge says it stopped: the run has already unwound,
    and a second signal there (users press Ctrl-C again) would end in a traceback after
    judge's one-line message."""
    if in_main_thread:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


# What stdout and stderr write for a character their encoding lacks (a latin-1 or ASCII
# locale, a Windows pipe in cp1252): judge's own symbols as ASCII of the same width where
# there is one, anything else as JSON's escape of it. Never an error: a result that was
# computed, written and gated must not end in exit 70 because a terminal lacks a character.
UNENCODABLE = "judge-terminal"
_LOOKALIKES = {
    "\u2013": "-",  # en dash: an undefined value in a table (formatting.MISSING)
    "\u2014": "-",
    "\u0394": "d",  # Delta: a difference (B - A) in judge compare's table
    "\u2191": "^",  # up and down arrows: the sign of a difference
    "\u2193": "v",
    "\u2192": "->",
    "\u2026": "...",  # a text cut short
}
_JSON = re.compile(r"\s*[\[{]")


def _escape_unencodable(error: UnicodeError) -> tuple[str, int]:
    """The codec error handler UNENCODABLE.

    In text that is JSON (a write starting with `{` or `[`: `--format json`), every
    character is written as JSON's escape of it (a surrogate pair above U+FFFF), so the
    output parses to the same values; in other text the symbols of `_LOOKALIKES` are written
    in ASCII (the columns of a table keep their width) and the rest as the same escape,
    which `judge.formatting.terminal_text` uses for control characters.
    """
    if not isinstance(error, UnicodeEncodeError):
        raise error
    json = _JSON.match(error.object) is not None
    out = []
    for char in error.object[error.start : error.end]:
        code = ord(char)
        if not json and char in _LOOKALIKES:
            out.append(_LOOKALIKES[char])
        elif code > 0xFFFF:
            high, low = divmod(code - 0x10000, 0x400)
            out.append(f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out), error.end


codecs.register_error(UNENCODABLE, _escape_unencodable)


def _never_unencodable() -> list[tuple[object, str | None]]:
    """Set stdout's and stderr's error handler to UNENCODABLE (the encoding is kept: a UTF-8
    stream writes every character but a lone surrogate); returns what to restore."""
    kept = []
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None:  # not a text file (a StringIO, which writes every character)
            continue
        try:
            errors = stream.errors
            reconfigure(errors=UNENCODABLE)
        except (ValueError, OSError, AttributeError):  # closed, or its pipe gone
            continue
        kept.append((stream, errors))
    return kept


def _restore(kept: list[tuple[object, str | None]]) -> None:
    """Put back the error handlers `_never_unencodable` replaced (main is called in-process
    by tests and by Python programs, whose streams it leaves as it found them)."""
    for stream, errors in kept:
        # (ValueError: closed, as an app may close sys.stdout; OSError: its pipe gone)
        with contextlib.suppress(ValueError, OSError):
            stream.reconfigure(errors=errors)  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())
