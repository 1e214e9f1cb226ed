"""What a build command does, read from its text: whether it watches (and so never ends), whether it installs the
project's packages itself, and which command installs them from a lockfile.

Pure: the caller gives the command and the package scripts (``package.json``'s ``scripts``) and the names of the
files beside it; :mod:`gitops.edges.build` runs what this decides, and ``gitops init`` (:mod:`gitops.core.layout`)
leaves out the scripts that watch.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Mapping, Sequence

#: Programs whose short options cluster (``rollup -cw`` is ``-c -w``) and for which ``-w`` means watch.
_SHORT_W_WATCHES = frozenset(
    {
        "rollup",
        "webpack",
        "webpack-cli",
        "tsc",
        "babel",
        "vite",
        "swc",
        "tsup",
        "coffee",
        "microbundle",
        "ncc",
        "rspack",
        "parcel",
        "spack",
        "sass",
        "lessc",
        "elm-make",
        "wasm-pack",
        "rescript",
        "tsc-alias",
    }
)
#: Programs that only ever watch (a build that runs one never ends).
_WATCHERS = frozenset(
    {
        "watchify",
        "nodemon",
        "chokidar",
        "onchange",
        "npm-watch",
        "tsc-watch",
        "watch",
        "webpack-dev-server",
        "live-server",
    }
)
#: Words that run a package script: ``npm run NAME``, ``yarn NAME``, ``pnpm NAME``, ``bun run NAME``.
_RUNNERS = ("npm", "yarn", "pnpm", "bun")
#: What runs a package's program without a script (the program is the next word).
_EXECS = frozenset({"npx", "pnpx", "bunx", "exec", "dlx", "cross-env", "env", "nice", "time", "dotenv"})
#: The shell's separators between commands.
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", "\n"})
#: npm's own subcommands (``npm ci``), which are not scripts.
_NPM_COMMANDS = frozenset(
    {"ci", "install", "i", "add", "exec", "x", "test", "t", "start", "stop", "restart", "rebuild", "prune", "link"}
)
#: How deep ``npm run`` inside a script is followed.
_DEPTH = 4

#: Lockfiles, the package manager each belongs to, in the order they are looked for in one folder.
LOCKFILES = ("package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb", "bun.lock")


def _segments(command: str) -> list[list[str]]:
    """The simple commands of a shell command line, each as its words (a line that does not split, as the shell
    would not run it either, is taken word by word on white space)."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        words = command.split()
    segments: list[list[str]] = [[]]
    for word in words:
        if word in _SEPARATORS or (word and set(word) <= set("&|;()")):
            segments.append([])
        else:
            segments[-1].append(word)
    return [s for s in segments if s]


def _program(words: Sequence[str]) -> tuple[str, list[str]]:
    """The program a simple command runs and its arguments, past variable assignments, ``npx`` and the like, and
    a path (``node_modules/.bin/rollup`` is ``rollup``)."""
    rest = list(words)
    while rest:
        word = rest[0]
        name = word.rsplit("/", 1)[-1]
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word) or name in _EXECS:
            rest.pop(0)
            continue
        if name in ("node", "deno") and len(rest) > 1 and "node_modules/.bin/" in rest[1]:
            rest.pop(0)
            continue
        return name, rest[1:]
    return "", []


def _script_of(program: str, args: Sequence[str]) -> str | None:
    """The package script a runner is asked to run (``npm run build``, ``yarn build``, ``pnpm run build``), or
    ``None``."""
    if program not in _RUNNERS:
        return None
    positional = [a for a in args if not a.startswith("-")]
    if not positional:
        return None
    first = positional[0]
    if first in ("run", "run-script"):
        return positional[1] if len(positional) > 1 else None
    if program == "npm":
        return "start" if first == "start" else None  # npm runs only `run NAME` and a few lifecycle names
    if first in _NPM_COMMANDS or first in ("install", "add", "remove", "upgrade", "dlx", "exec", "create"):
        return None
    return first


def _flag_watches(program: str, arg: str) -> bool:
    if arg == "--watch" or (arg.startswith("--watch=") and arg.split("=", 1)[1].lower() not in ("false", "0", "no")):
        return True
    if arg in ("--watchAll", "--watch-all"):
        return True
    return program in _SHORT_W_WATCHES and re.fullmatch(r"-[A-Za-z]+", arg) is not None and "w" in arg[1:]


def watch_flag(command: str | Sequence[str], scripts: Mapping[str, str], depth: int = 0) -> str | None:
    """What makes ``command`` watch for changes instead of building once (a build that watches never ends), or
    ``None``: ``"rollup -cw"`` → ``"-cw (rollup)"``, ``"npm run build"`` whose script is ``rollup -c -w`` →
    ``"-w (rollup, in the package script 'build')"``. ``scripts`` are the package's scripts (``package.json``),
    followed ``npm run`` by ``npm run`` a few levels deep."""
    segments = [list(command)] if not isinstance(command, str) else _segments(command)
    for words in segments:
        found = _segment_watches(words, scripts, depth)
        if found is not None:
            return found
    return None


def _segment_watches(words: Sequence[str], scripts: Mapping[str, str], depth: int) -> str | None:
    program, args = _program(words)
    if program in _WATCHERS:
        return f"{program} (a program that watches)"
    if program in _RUNNERS:
        if args and args[0] in ("exec", "dlx", "x"):
            return _segment_watches(args[1:], scripts, depth)
        script = _script_of(program, args)
        if script is None:
            return None
        if script in scripts:
            inner = watch_flag(scripts[script], scripts, depth + 1) if depth < _DEPTH else None
            if inner is None or "in the package script" in inner:
                return inner
            return f"{inner[:-1]}, in the package script {script!r})"
        if program != "npm":  # yarn, pnpm and bun run a package's program of that name when no script has it
            return _segment_watches(args[args.index(script) :], scripts, depth)
        if re.search(r"(^|[:_-])watch($|[:_-])", script):
            return f"{script} (a script named for watching)"
        return None
    for arg in args:
        if _flag_watches(program, arg):
            return f"{arg} ({program})"
    if program in ("gulp", "grunt", "parcel", "webpack", "microbundle", "ng", "vite") and "watch" in args:
        return f"watch ({program})"
    return None


def installs_itself(command: str | Sequence[str]) -> bool:
    """Whether the build command installs the packages itself (``npm ci && npm run build``): then no install is
    run before it."""
    segments = [list(command)] if not isinstance(command, str) else _segments(command)
    for words in segments:
        program, args = _program(words)
        positional = [a for a in args if not a.startswith("-")]
        first = positional[0] if positional else None
        if program == "npm" and first in ("ci", "install", "i", "clean-install", "install-clean", "isntall"):
            return True
        if program in ("yarn", "pnpm", "bun") and (first is None or first in ("install", "i")):
            return True
    return False


#: Programs that run on Node.js packages (besides those of the package's own dependencies).
_NODE_PROGRAMS = frozenset(
    {"npm", "npx", "yarn", "pnpm", "pnpx", "bun", "bunx", "node", "corepack", "tsc", "grunt", "gulp"}
    | _SHORT_W_WATCHES
    | {"esbuild", "cross-env"}
)


def runs_node(command: str | Sequence[str], dependencies: Collection[str]) -> bool:
    """Whether a build command runs Node.js tooling: a package manager, ``node``, a well-known bundler or compiler,
    or a program named as one of ``dependencies`` (package.json's, by name). A ``cargo build`` or ``make`` beside a
    package.json of tooling does not: no install runs before it."""
    names = {name.rsplit("/", 1)[-1] for name in dependencies}
    segments = [list(command)] if not isinstance(command, str) else _segments(command)
    for words in segments:
        first = words[0].rsplit("/", 1)[-1] if words else ""
        program, _ = _program(words)
        if {first, program} & (_NODE_PROGRAMS | names) or "node_modules/" in " ".join(words[:2]):
            return True
    return False


def install_argv(lockfile: str | None, *, yarn_berry: bool) -> list[str]:
    """The command that installs a project's packages from ``lockfile`` (its name), exactly as the lockfile says:
    ``npm ci``, ``yarn install --frozen-lockfile`` (``--immutable`` for Yarn 2 and later, ``yarn_berry``),
    ``pnpm install --frozen-lockfile``, ``bun install --frozen-lockfile``; without a lockfile ``npm install
    --no-package-lock`` (what the registry holds today, and nothing written beside package.json)."""
    quiet = ["--no-audit", "--no-fund"]
    if lockfile in ("package-lock.json", "npm-shrinkwrap.json"):
        return ["npm", "ci", *quiet]
    if lockfile == "yarn.lock":
        return ["yarn", "install", "--immutable"] if yarn_berry else ["yarn", "install", "--frozen-lockfile"]
    if lockfile == "pnpm-lock.yaml":
        return ["pnpm", "install", "--frozen-lockfile"]
    if lockfile in ("bun.lockb", "bun.lock"):
        return ["bun", "install", "--frozen-lockfile"]
    return ["npm", "install", "--no-package-lock", *quiet]


def dependencies(package: Mapping[str, object]) -> set[str]:
    """The packages a ``package.json`` (parsed) names to install."""
    names: set[str] = set()
    for key in ("dependencies", "devDependencies", "optionalDependencies"):
        value = package.get(key)
        if isinstance(value, dict):
            names |= {name for name in value if isinstance(name, str)}
    return names
