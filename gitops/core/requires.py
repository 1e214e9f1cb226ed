"""The require check: every literal ``require('name')`` in a branch's JavaScript must name a module it holds.

A require of a missing module throws in game every tick, and nothing in the upload would say so; checking before the
upload turns that into a refusal with the file and line. The check follows how the game resolves a name
(``@screeps/engine``, ``src/game/game.js``, ``requireFn``): it removes one leading ``./`` and looks the rest up among
the branch's module names, as they are; nothing is resolved relative to the requiring module's folder
(``require('./util')`` in ``role/harvester`` loads module ``util``) and ``../`` is not resolved at all. ``lodash``
is always there (the require cache starts with it). Only a call that surely runs when the module loads refuses the
branch; the others are warnings (:func:`scan_requires` says which, and what the scan cannot see). Pure: no I/O.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: Modules the game provides to every player (its require cache starts with lodash).
GAME_MODULES = frozenset({"lodash"})

#: Node.js built-in modules (and their subpaths), as Node 20 names them.
NODE_BUILTINS = frozenset(
    {
        "assert", "assert/strict", "async_hooks", "buffer", "child_process", "cluster", "console", "constants",
        "crypto", "dgram", "diagnostics_channel", "dns", "dns/promises", "domain", "events", "fs", "fs/promises",
        "http", "http2", "https", "inspector", "module", "net", "os", "path", "path/posix", "path/win32",
        "perf_hooks", "process", "punycode", "querystring", "readline", "readline/promises", "repl", "stream",
        "stream/consumers", "stream/promises", "stream/web", "string_decoder", "sys", "timers", "timers/promises",
        "tls", "trace_events", "tty", "url", "util", "util/types", "v8", "vm", "wasi", "worker_threads", "zlib",
    }
)  # fmt: skip

_TOKEN = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
    | (?P<string>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|`(?:[^`\\]|\\.)*`)
    | (?P<name>[A-Za-z_$][\w$]*)
    | (?P<number>\.?\d[\w.]*)
    | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_REGEX = re.compile(r"/(?:[^/\\\n\[]|\\.|\[(?:[^\]\\\n]|\\.)*\])+/[A-Za-z]*")
#: After these keywords a ``/`` starts a regular expression, not a division.
_BEFORE_REGEX_WORDS = frozenset(
    {"return", "typeof", "case", "do", "else", "in", "of", "new", "delete", "void", "throw", "instanceof", "yield"}
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "b": "\b", "f": "\f", "v": "\v"}


@dataclass(frozen=True)
class RequireCall:
    """One literal ``require('name')``: its 1-based line and the name as written."""

    line: int
    name: str
    #: Written inside a ``try { ... }`` block: a missing module is caught by the code itself.
    guarded: bool = False
    #: Written inside braces (a function, a block, an object): it may never run.
    nested: bool = False


def _literal(token: str) -> str | None:
    """The value of a string literal (simple escapes only), or ``None`` for a template literal with ``${}``."""
    body = token[1:-1]
    if token[0] == "`" and "${" in body:
        return None
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body, flags=re.DOTALL)


def scan_requires(text: str) -> list[RequireCall]:
    """The literal ``require(...)`` calls in JavaScript ``text``, in order.

    What the scan sees: calls ``require(<one string literal>)`` (``'...'``, ``"..."``, or a template literal without
    ``${}``), outside comments, strings and regular expression literals, and not a property (``x.require(...)``). A call
    written inside the braces of a ``try`` block is *guarded*: the code catches what the game throws for a missing
    module (``try { require('config_local') } catch (e) {}``, an optional extension point), so a missing guarded module
    is a warning, not a refusal. A function declared inside a ``try`` block and called elsewhere counts as guarded too:
    the scan reads text, not control flow. A call inside any other braces (a function's body, an ``if`` block, an
    object) is *nested*: it runs only when that code runs, which may be never (a path not taken, a feature switched
    off), so a missing nested module is a warning too, with its file and line. Only a call outside every brace, which
    runs when the module is loaded, refuses the branch: there the game surely throws.

    Its limits, on purpose: ``require(name)`` with a variable or an expression is not checked (list optional names in
    ``requires.ignore``, or set ``requires.check: false``); a regular expression literal is told from a division by the
    token before it, as most tokenizers guess; a template literal is skipped whole, ``${}`` included. Node's built-in
    modules (``fs``, ``node:path``) are not reported: bundles reference them in guarded branches that never run in game.
    """
    if "require" not in text:
        return []  # bundled output: nothing to scan
    calls: list[RequireCall] = []
    significant: list[tuple[str, str, int]] = []  # the last few (kind, text, start) outside spaces and comments
    braces: list[bool] = []  # one entry per open '{': whether it opens a try block
    in_try = 0  # how many open braces are try blocks
    pos, end = 0, len(text)
    while pos < end:
        if text[pos] == "/" and _regex_allowed(significant[-1] if significant else None):
            found = _REGEX.match(text, pos)
            if found is not None:
                significant = [*significant[-3:], ("regex", found.group(), pos)]
                pos = found.end()
                continue
        match = _TOKEN.match(text, pos)
        if match is None:  # pragma: no cover - the last alternative matches any character
            break
        pos = match.end()
        kind = match.lastgroup or "punct"
        if kind in ("space", "comment"):
            continue
        if kind == "punct" and match.group() == "{":
            opens_try = bool(significant) and significant[-1][:2] == ("name", "try")
            braces.append(opens_try)
            in_try += opens_try
        elif kind == "punct" and match.group() == "}" and braces:
            in_try -= braces.pop()
        significant = [*significant[-3:], (kind, match.group(), match.start())]
        if kind == "punct" and match.group() == ")" and len(significant) == 4:
            first, paren, literal, _ = significant
            before = _previous_significant(text, first[2])
            if (
                first[:2] == ("name", "require")
                and paren[1] == "("
                and literal[0] == "string"
                and before not in (".", "?.")
            ):
                name = _literal(literal[1])
                if name is not None:
                    line = text.count("\n", 0, first[2]) + 1
                    calls.append(RequireCall(line, name, guarded=in_try > 0, nested=bool(braces)))
    return calls


def _previous_significant(text: str, start: int) -> str:
    """The character before ``start``, skipping spaces (enough to tell ``x.require`` from ``require``)."""
    k = start - 1
    while k >= 0 and text[k].isspace():
        k -= 1
    if k >= 1 and text[k - 1 : k + 1] == "?.":
        return "?."
    return text[k] if k >= 0 else ""


def _regex_allowed(previous: tuple[str, str, int] | None) -> bool:
    if previous is None:
        return True
    kind, value, _ = previous
    if kind in ("number", "string", "regex"):
        return False
    if kind == "name":
        return value in _BEFORE_REGEX_WORDS
    return value not in (")", "]", "}")


@dataclass(frozen=True)
class MissingRequire:
    """A require naming a module the branch will not hold; ``guarded`` when the code catches its failure."""

    file: str
    line: int
    written: str
    module: str
    hint: str | None
    guarded: bool = False
    nested: bool = False

    @property
    def at_load(self) -> bool:
        """Outside every brace and every try: the game runs it when it loads the module, and surely throws."""
        return not (self.guarded or self.nested)

    def describe(self) -> str:
        shown = f"require({self.written!r})"
        target = f"module {self.module!r}" if self.module != self.written else "a module"
        where = " inside a try block" if self.guarded else " inside a function or block" if self.nested else ""
        text = f"{self.file}:{self.line}: {shown}{where} names {target} the branch will not hold"
        return f"{text}; {self.hint}" if self.hint else text


def resolve(written: str) -> str:
    """The module name the game looks up for ``require(written)``: one leading ``./`` removed."""
    return written[2:] if written.startswith("./") else written


#: Characters that players' upload scripts use between a folder and a file when they flatten folders.
_JOINERS = re.compile(r"[/._\-]")


def nearest_module(module: str, names: Iterable[str]) -> str | None:
    """The module of ``names`` that ``module`` most likely means: one that differs only in the characters between
    its parts (``actions_build`` for ``actions/build``) or in case, else the closest by spelling; ``None`` when
    nothing is close."""
    held = sorted(set(names))
    shape = _JOINERS.sub("/", module).casefold()
    same_shape = [n for n in held if _JOINERS.sub("/", n).casefold() == shape and n != module]
    if same_shape:
        return same_shape[0]
    close = difflib.get_close_matches(module, held, n=1, cutoff=0.8)
    return close[0] if close else None


def _hint(
    written: str, module: str, requiring: str, names: set[str], separator: str, left_out: Mapping[str, str]
) -> str | None:
    if module in left_out:
        return left_out[module]
    binary = f"{module}.wasm"  # require('engine') of engine.wasm: named by its stem only with strip_suffixes
    by_stem = f"add '.wasm' to naming.strip_suffixes to name it {module!r}, or write require({binary!r})"
    if binary in names:
        return f"the branch has {binary!r}; {by_stem}"
    if binary in left_out:
        return f"{left_out[binary]}, and {by_stem}"
    other = module.replace("/", separator) if separator != "/" else module.replace(".", "/")
    if other != module and other in names:
        return (
            f"the branch has {other!r} (naming.separator is {separator!r}); write require({other!r}), or change "
            "naming.separator"
        )
    for suffix in (".js", ".cjs", ".wasm"):
        if module.endswith(suffix) and module[: -len(suffix)] in names:
            return f"module names have no {suffix} here; write require({module[: -len(suffix)]!r})"
    if written.startswith("./") or written.startswith("../"):
        folder = requiring.rsplit(separator, 1)[0] if separator in requiring else ""
        tail = written.rsplit("/", maxsplit=1)[-1]
        candidates = sorted(n for n in names if n == tail or n.endswith(separator + tail))
        near = f"; did you mean require({candidates[0]!r})?" if candidates else ""
        where = f" (not from {folder!r}, the folder of {requiring!r})" if folder else ""
        return (
            "the game's require takes module names, not paths: it drops one leading './' and looks the rest up from "
            f"the branch's top{where}{near}"
        )
    near_name = nearest_module(module, names)
    if near_name is not None:
        return f"did you mean require({near_name!r})? The branch holds that module"
    return None


def check_requires(
    sources: Iterable[tuple[str, str, str]],
    names: Iterable[str],
    *,
    ignore: Iterable[str] = (),
    separator: str = "/",
    left_out: Mapping[str, str] | None = None,
) -> list[MissingRequire]:
    """Every literal require in ``sources`` (module name, file shown in messages, JavaScript text) that names a
    module not in ``names``, nor in ``ignore``, the game's own modules or Node's built-ins; guarded ones too
    (``MissingRequire.guarded``), which :func:`summarise` reports as warnings. ``left_out`` maps the modules that
    files under the root would make but include or exclude leave out to the hint that says so."""
    held = set(names)
    allowed = held | set(ignore) | GAME_MODULES
    missing: list[MissingRequire] = []
    for requiring, file, text in sources:
        for call in scan_requires(text):
            module = resolve(call.name)
            if module in allowed or call.name in allowed or module in NODE_BUILTINS or module.startswith("node:"):
                continue
            hint = _hint(call.name, module, requiring, held, separator, left_out or {})
            missing.append(
                MissingRequire(file, call.line, call.name, module, hint, guarded=call.guarded, nested=call.nested)
            )
    return missing


def summarise(missing: list[MissingRequire], label: str) -> list[str]:
    """One problem per missing require that runs at load, then how to allow one on purpose (guarded and nested ones
    are left to :func:`guarded_warnings`)."""
    refused = [m for m in missing if m.at_load]
    if not refused:
        return []
    lines = [f"{label}: {m.describe()}" for m in refused]
    lines.append(
        f'{label}: the game would throw "Unknown module" at each of these requires when it runs; add the missing '
        "modules or fix the names, or list optional and dynamic ones under the branch's requires.ignore "
        "(requires: {check: false} turns the check off)"
    )
    return lines


def guarded_warnings(missing: list[MissingRequire], label: str) -> list[str]:
    """One warning per missing require that may never run or whose failure the code catches (inside a try block, a
    function or a block): the branch is not refused; listing the name under ``requires.ignore`` silences it."""
    warnings: list[str] = []
    for m in missing:
        if m.guarded:
            why = "the code catches the error"
        elif m.nested:
            why = 'if that code runs, the game throws "Unknown module" there'
        else:
            continue
        warnings.append(f"{label}: {m.describe()} ({why}; list {m.module!r} under requires.ignore to silence this)")
    return warnings


__all__ = [
    "GAME_MODULES",
    "NODE_BUILTINS",
    "MissingRequire",
    "RequireCall",
    "check_requires",
    "guarded_warnings",
    "nearest_module",
    "resolve",
    "scan_requires",
    "summarise",
]
