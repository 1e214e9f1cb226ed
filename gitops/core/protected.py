"""The paths ``gitops pull`` must never write, whatever the server's module names say. Pure.

A pull turns names chosen by whoever controls the server's code (a leaked token, a shared account) into files of the
repository. A file there can run: the manifest's ``build:``, ``package.json``'s scripts, a bundler's config, a
workflow under ``.github``, an ``.envrc``, an editor's task file; a ``.gitignore`` can hide the rest. So pull
writes a module only to a path that is none of these, judged as the file systems players use would open it
(:func:`refusal` lists the rules), and never two paths that one file system would take for one file
(:func:`collisions`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

#: Code points that HFS+ ignores in names, as Git lists them (``utf8.c``, ``is_hfs_dotgit``): ``.g\u200cit`` is
#: ``.git`` on a Mac.
HFS_IGNORED = frozenset(
    "\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u206a\u206b\u206c\u206d\u206e\u206f\ufeff"
)

#: File names (case-insensitive) that configure, build or run a project: never written by a pull.
PROTECTED_NAMES = frozenset(
    {
        "gitops.yaml",
        "gitops.yml",
        "package.json",
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "pnpm-workspace.yaml",
        "bun.lockb",
        "deno.json",
        "deno.jsonc",
        "tsconfig.json",
        "jsconfig.json",
        "gruntfile.js",
        "gruntfile.cjs",
        "gruntfile.coffee",
        "gulpfile.js",
        "gulpfile.cjs",
        "gulpfile.mjs",
        "makefile",
        "gnumakefile",
        "justfile",
        "taskfile.yml",
        "taskfile.yaml",
        "dockerfile",
        "cargo.toml",
        "cargo.lock",
        "build.rs",
        "screeps.toml",
        "screeps.json",
        "screeps.yaml",
        "screeps.yml",
        "credentials.json",
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "action.yml",
        "action.yaml",
    }
)

#: Names (case-insensitive, before the first dot) of files that a tool finds and runs by that name, whatever their
#: suffixes (``gulpfile.js``, ``gulpfile.babel.js``, ``gulpfile.ts``): task runners (gulp, grunt, jake, broccoli,
#: webpack's ``webpackfile``), CI's own runners (danger, Jenkins), other ecosystems' build files that a Screeps
#: repository also holds (Rake, Bundler, Vagrant, Procfile), and ``build``: a ``build.js``/``build.mjs``/``build.ts``
#: is the build script that ``package.json`` runs (``node build.js``), ``build.rs`` Cargo's, ``build.gradle``,
#: ``build.zig`` and ``build.sh`` their tools'. A module of the same name is rare; pull says why it is not written.
RUN_BY_NAME = frozenset(
    {
        "gulpfile",
        "gruntfile",
        "jakefile",
        "brocfile",
        "webpackfile",
        "dangerfile",
        "jenkinsfile",
        "build",
        "rakefile",
        "gemfile",
        "vagrantfile",
        "procfile",
    }
)

#: Suffixes (case-insensitive) of files that configure or run something: a binary module's file never has one
#: (a text module's file ends in one of the branch's module suffixes, ``.js``, anyway).
PROTECTED_SUFFIXES = (
    ".json",
    ".jsonc",
    ".yaml",
    ".yml",
    ".toml",
    ".ini",
    ".cfg",
    ".conf",
    ".lock",
    ".sh",
    ".bash",
    ".zsh",
    ".fish",
    ".ps1",
    ".bat",
    ".cmd",
    ".exe",
    ".py",
    ".rb",
    ".pl",
    ".mk",
    ".env",
    ".service",
)

_DEVICE = re.compile(r"(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³]|conin\$|conout\$)(\..*)?")
_SHORT_DOTGIT = re.compile(r"git~[0-9]+")
_WINDOWS_REFUSED = re.compile(r'[<>:"|?*]')
#: Deeper than any bot's folders; far below what a file system refuses (a 1,500-level name is refused here).
MAX_DEPTH = 32
#: Below Linux's PATH_MAX (4,096) with room for the repository's own path in front.
MAX_PATH_BYTES = 1024
_CONFIG = re.compile(r".+\.(?:config|conf)\.[a-z0-9]+")


def comparable(part: str) -> str:
    """A name as a case-insensitive, normalising file system compares it: NFC, HFS's ignored code points dropped,
    Windows' trailing dots and spaces dropped, case folded."""
    kept = "".join(ch for ch in unicodedata.normalize("NFC", part) if ch not in HFS_IGNORED)
    return kept.rstrip(". ").casefold()


def refusal(
    path: str, *, binary: bool, manifest_names: frozenset[str] = frozenset(), run_by_name: frozenset[str] = RUN_BY_NAME
) -> str | None:
    """Why a pull must not write ``path`` (``/`` separators, relative to the repository or the branch's root), or
    ``None``. ``manifest_names`` are further file names (case-insensitive) to protect, e.g. the manifest's own.
    The text completes "it would be written to PATH, but ...".

    * every part of the path is checked as Git's own ``verify_path`` checks it (``read-cache.c``, ``path.c``): after
      dropping the code points that HFS+ ignores (U+200C and friends) and the trailing dots and spaces that Windows
      drops, a part may not start with ``.`` (no dot-file or dot-folder at all, which covers ``.git``, ``.github``,
      ``.gitignore``, ``.envrc``, ``.vscode`` and the credentials file ``.screeps.yaml``), may not be NTFS's short name
      of such a folder (``GIT~1``), a Windows device name (``CON``, ``NUL``, ``COM1``, ...) or hold a character Windows
      refuses (``<>:"|?*``);
    * the file's name may not be one of the files that configure or run a build, case-insensitively
      (:data:`PROTECTED_NAMES`, any ``*.config.*``, the manifest itself), nor one that a build tool, task runner or test
      runner finds and runs *by its name* whatever its suffix (:data:`RUN_BY_NAME`: ``gulpfile.babel.js``,
      ``Gruntfile.ts``, ``build.js``, ``Dangerfile``; and any ``*.conf.*``, the test runners' spelling:
      ``karma.conf.js``, ``protractor.conf.js``, ``wdio.conf.ts``), nor, for a binary module, carry a suffix of a
      configuration or script file (:data:`PROTECTED_SUFFIXES`);
    * the path may not be deeper than :data:`MAX_DEPTH` folders or longer than :data:`MAX_PATH_BYTES`.

    ``run_by_name`` replaces :data:`RUN_BY_NAME`: a pull into a repository that nothing builds (no ``package.json``,
    no ``build:``), as ``gitops init --pull`` adopting a flat bot, passes it without ``build``, so that a module
    named ``build`` is written as ``build.js``: no tool there runs it.
    """
    parts = path.split("/")
    if len(parts) - 1 > MAX_DEPTH:
        return f"that is {len(parts) - 1} folders deep (at most {MAX_DEPTH})"
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        return f"that path is longer than {MAX_PATH_BYTES} bytes"
    for part in parts:
        seen = comparable(part)
        if seen.startswith("."):
            return f"{part!r} is a dot-file or dot-folder (such as .git, .github or .envrc), which pull never writes"
        if _SHORT_DOTGIT.fullmatch(seen):
            return f"{part!r} is the short (8.3) name Windows gives to .git"
        if _DEVICE.fullmatch(seen):
            return f"{part!r} is a Windows device name"
        if _WINDOWS_REFUSED.search(part) or part != part.rstrip(". "):
            return f'{part!r} is not a name Windows keeps as it is (one of <>:"|?*, or a trailing dot or space)'
    name = comparable(parts[-1])
    if (
        name in PROTECTED_NAMES
        or name in manifest_names
        or _CONFIG.fullmatch(name)
        or name.split(".", 1)[0] in run_by_name
    ):
        return f"{parts[-1]!r} configures or runs the project's build, which pull never writes"
    if binary and name.endswith(PROTECTED_SUFFIXES):
        return f"{parts[-1]!r} has the suffix of a configuration or script file, which a binary module never gets"
    return None


def collisions(paths: Iterable[str], existing: Iterable[str] = ()) -> list[tuple[str, str]]:
    """Pairs of different paths that a case-insensitive or Unicode-normalising file system (macOS, Windows) opens
    as one file: two of ``paths``, or one of ``paths`` and another spelling in ``existing`` (files already there).
    Checked on every host, since the repository is also cloned onto such file systems."""
    seen: dict[str, str] = {}
    found: list[tuple[str, str]] = []
    for path in existing:
        seen.setdefault("/".join(comparable(p) for p in path.split("/")), path)
    wanted: dict[str, str] = {}
    for path in sorted(paths):
        key = "/".join(comparable(p) for p in path.split("/"))
        other = wanted.get(key)
        if other is not None and other != path:
            found.append((other, path))
            continue
        wanted[key] = path
        there = seen.get(key)
        if there is not None and there != path:
            found.append((there, path))
    return found
