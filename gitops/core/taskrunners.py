"""What a gulpfile or Gruntfile does to a bot's code, read from its text (never run): the pure half of
``gitops init`` for task runners, used by :mod:`gitops.core.layout`.

The rule is the bot's own upload, not the tools' defaults: the folder grunt-screeps' ``src`` or gulp-screeps'
``gulp.src(...)`` uploads is the root, the steps of the task that uploads (less the upload) or the task that writes
that folder is the build, and a package script is the build only when it runs exactly that task. A large grunt bot
whose ``test`` script runs ``grunt test`` (mocha and a private server) is never built by ``npm run test``; a gulp
bot whose ``ci-config`` script writes a credentials file is never built by it either.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

#: A string literal in a configuration's JavaScript ('x', "x" or `x`), its text as group 1.
STRING = r"""['"`]([^'"`\n]+)['"`]"""
#: Names of tasks and package scripts that build, best first.
BUILD_NAMES = ("build", "compile", "bundle", "dist", "rollup", "webpack", "esbuild")

#: grunt plugins that only check, watch or clean: a Gruntfile loading only these (and grunt-screeps) uploads the
#: sources as they are.
_GRUNT_NOT_WRITING = (
    "grunt-screeps",
    "grunt-contrib-watch",
    "grunt-contrib-jshint",
    "grunt-eslint",
    "grunt-contrib-clean",
)
_UPLOAD_WORDS = re.compile(r"gulp-screeps|grunt-screeps|\bscreeps\s*\(")
_GULP_TASK = re.compile(r"\bgulp\.task(?P<call>\()\s*" + STRING)
#: Script names that upload or watch: never the build, whatever they run.
_NOT_A_BUILD = re.compile(r"deploy|upload|push|watch", re.IGNORECASE)


def relative_folder(path: str) -> str | None:
    """A configuration's output folder as a root (``./dist`` -> ``dist``), or ``None`` for one that is absolute,
    leads out of the repository, or is built from an expression."""
    path = path.strip()
    if not path or "${" in path or path.startswith(("/", "~")) or re.match(r"[A-Za-z]:", path) or "\\" in path:
        return None
    folder = posixpath.normpath(path)
    if folder == ".." or folder.startswith("../"):
        return None
    return folder


def block_after(text: str, key: str) -> str | None:
    """The text of the object literal that ``key: {`` opens in ``text`` (to its matching brace), or ``None``."""
    found = re.search(rf"\b{key}\s*:\s*\{{", text)
    if found is None:
        return None
    depth = 0
    for k in range(found.end() - 1, len(text)):
        if text[k] == "{":
            depth += 1
        elif text[k] == "}":
            depth -= 1
            if depth == 0:
                return text[found.end() : k]
    return text[found.end() :]


@dataclass(frozen=True)
class Pipeline:
    """What a gulp or grunt file does to the code, read from its text."""

    tool: str  # "gulp" or "grunt"
    file: str
    #: The folder it writes, ``None`` when it cannot be read.
    output: str | None
    #: The task (or tasks, space-separated) that writes it, ``None`` for the default task.
    task: str | None
    #: The build's task may also upload (gulp-screeps, grunt-screeps).
    uploads: bool
    #: The task is the writing plugins' own tasks, not one the file registers.
    task_guessed: bool = False
    #: The build is the steps of this task, the one that uploads, less the upload.
    from_upload_task: str | None = None
    #: The glob the upload reads under the output folder (``*.js`` for ``dist/*.js``), when it says.
    upload_glob: str | None = None


def glob_folder(glob: str) -> str:
    """The folder a glob reads from: ``dist/*.js`` -> ``dist``, ``*.js`` -> ``.``."""
    parts: list[str] = []
    for part in glob.split("/"):
        if any(c in part for c in "*?[{"):
            break
        parts.append(part)
    else:
        parts = parts[:-1]  # a file: its folder
    return posixpath.normpath("/".join(parts)) if parts else "."


def _folder_of_dest(value: str) -> str | None:
    folder = posixpath.dirname(value) if value.endswith(".js") else value
    return relative_folder(folder or ".")


def _below(glob: str, folder: str) -> str | None:
    """``glob`` relative to ``folder`` (``dist/*.js`` under ``dist``: ``*.js``), or ``None``."""
    normal = posixpath.normpath(glob)
    return normal[len(folder) + 1 :] if normal.startswith(folder + "/") else None


def _call_end(text: str, start: int) -> int:
    """The index after the parenthesis that closes the one at ``start`` (the text's end when none does)."""
    depth = 0
    for k in range(start, len(text)):
        if text[k] == "(":
            depth += 1
        elif text[k] == ")":
            depth -= 1
            if depth == 0:
                return k + 1
    return len(text)


def _gulp_tasks(text: str) -> dict[str, str]:
    """Each ``gulp.task('name', ...)`` with the text of its call."""
    return {m.group(2): text[m.start() : _call_end(text, m.start("call"))] for m in _GULP_TASK.finditer(text)}


def gulp_pipeline(name: str, text: str) -> Pipeline | None:
    """A gulpfile that writes an output folder (``gulp.dest('dist')``, or a pipe whose output cannot be read);
    ``None`` for one that only uploads (gulp-screeps reading the sources) or does nothing to the code. The task is
    a build-named one, else the one whose pipe writes the folder gulp-screeps uploads (without uploading)."""
    uploads = bool(_UPLOAD_WORDS.search(text))
    dests = re.findall(r"\bdest\s*\(\s*([^)]*)\)", text)
    if not dests and (uploads or ".pipe(" not in text):
        return None
    upload = re.search(r"\bsrc\s*\(\s*" + STRING + r"[^)]*\)\s*\.pipe\(\s*screeps\s*\(", text)
    upload_folder = relative_folder(glob_folder(upload.group(1))) if upload else None
    output = None
    for value in dests:
        literal = re.fullmatch(STRING, value.strip())
        if literal is not None:
            output = _folder_of_dest(literal.group(1))
            if output is not None and (upload_folder is None or output == upload_folder):
                break
    tasks = _gulp_tasks(text)
    names = [*tasks, *re.findall(r"\bexports\.([\w$]+)\s*=", text)]
    task = next((t for t in BUILD_NAMES if t in names), None)
    if task is None and output is not None:
        # The bot's own upload reads output/: the task whose pipe writes it, and does not upload, builds it.
        writes = re.compile(r"\bdest\s*\(\s*" + STRING)
        task = next(
            (
                t
                for t, body in tasks.items()
                if not re.search(r"\bscreeps\s*\(", body)
                and any(_folder_of_dest(v) == output for v in writes.findall(body))
            ),
            None,
        )
    glob = _below(upload.group(1), output) if upload and output else None
    return Pipeline("gulp", name, output, task, uploads and task is None, upload_glob=glob)


def _registered(text: str) -> dict[str, list[str]]:
    """grunt's ``registerTask('name', [steps])``: name -> steps."""
    found = re.findall(
        r"registerTask\(\s*['\"`]([\w:-]+)['\"`]\s*,\s*(?:['\"`][^'\"`]*['\"`]\s*,\s*)?(\[[^\]]*\])", text
    )
    return {task: re.findall(STRING, steps) for task, steps in found}


def _uploads(steps: list[str]) -> bool:
    return any(s.split(":")[0] == "screeps" for s in steps)


def grunt_pipeline(name: str, text: str, folders: frozenset[str]) -> Pipeline | None:
    """A Gruntfile whose tasks write an output folder (a copy task's ``dest``, or grunt-screeps' ``src`` reading a
    folder that the repository does not hold yet); ``None`` for one that uploads the sources as they are.

    The build is a build-named task that does not upload; else the steps of the task that uploads (``default``,
    ``deploy``) before its ``screeps`` step: what the bot's own deploy runs to write the folder it uploads."""
    uploads = bool(_UPLOAD_WORDS.search(text))
    screeps = block_after(text, "screeps") or ""
    upload_src = re.search(r"\bsrc\s*:\s*\[\s*" + STRING, screeps) or re.search(r"\bsrc\s*:\s*" + STRING, screeps)
    upload_folder = relative_folder(glob_folder(upload_src.group(1))) if upload_src else None
    dests = [d for d in (_folder_of_dest(v) for v in re.findall(r"\bdest\s*:\s*" + STRING, text)) if d]
    plugins = re.findall(r"loadNpmTasks\(\s*" + STRING, text)
    writing = [p for p in plugins if p not in _GRUNT_NOT_WRITING]
    built_folder = upload_folder not in (None, ".") and upload_folder not in folders
    if not dests and not writing and not built_folder:
        return None  # grunt-screeps reading the sources as they are
    if upload_folder is not None and upload_folder != "." and (upload_folder in dests or built_folder or not dests):
        output: str | None = upload_folder  # what the old deploy uploaded is what the build wrote
    else:
        output = dests[0] if dests else None
    glob = _below(upload_src.group(1), output) if upload_src and output else None
    registered = _registered(text)
    without_upload = [t for t, steps in registered.items() if not _uploads(steps)]
    task = next((t for t in (*BUILD_NAMES, "default") if t in without_upload), None)
    if task is None:
        deploy = next((t for t in ("default", "deploy", *registered) if _uploads(registered.get(t, []))), None)
        before = [s for s in registered.get(deploy, []) if s.split(":")[0] != "screeps"] if deploy else []
        if deploy is not None and before:
            same = next((t for t in without_upload if registered[t] == before), None)
            return Pipeline(
                "grunt", name, output, same or " ".join(before), False, from_upload_task=deploy, upload_glob=glob
            )
    guessed = False
    if task is None and writing:
        # No task of its own: the writing plugins' tasks, by grunt's names (grunt-contrib-copy runs as 'copy').
        names = [re.sub(r"^grunt-(contrib-)?", "", p).replace("-", "_") for p in writing]
        task = " ".join(n for n in names if re.search(rf"\b{re.escape(n)}\s*:\s*\{{", text)) or None
        guessed = task is not None
    # A registered task without 'screeps' or the plugins' own tasks only write: only the default task may upload.
    return Pipeline("grunt", name, output, task, uploads and task is None, task_guessed=guessed, upload_glob=glob)


def script_running_task(scripts: Mapping[str, str], tool: str, task: str | None) -> str | None:
    """The package script whose command is ``tool`` running exactly ``task`` (``gulp copy``, ``npx grunt build``;
    ``gulp`` alone for the default task), best-named first; ``None`` when no script does. A script running the tool
    with another task (``grunt test``, ``gulp ci-config``) is not the build, however it is named."""
    wanted = task.split() if task else []
    fitting = []
    for name, command in scripts.items():
        if _NOT_A_BUILD.search(name):
            continue
        for part in re.split(r"&&|\|\||;", command):
            try:
                words = shlex.split(part)
            except ValueError:
                continue
            if words[:1] == ["npx"]:
                words = words[1:]
            if words[:1] == [tool] and [w for w in words[1:] if not w.startswith("-")] == wanted:
                fitting.append(name)
                break
    order = {name: k for k, name in enumerate(BUILD_NAMES)}
    fitting.sort(key=lambda n: (order.get(n, len(order)), len(n), n))
    return fitting[0] if fitting else None
