"""The manifest's globs are matched with wcmatch's own regular expressions (``gitops.core.globs.matcher``, issue 23):
the answer must be the library matcher's for every glob and path, hidden files, braces and globstars included."""

from __future__ import annotations

import itertools

from wcmatch import glob as wcglob

from gitops.core.globs import glob_flags, matcher

GLOBS = [
    "**/*.js", "*.js", "src/**", "**/*.{js,wasm}", "lib/*.js", "**/.hidden/*", "a/**/b/*.map", "**", "**/*",
    "x?.js", "[ab]*.js", "**/node_modules/**", "!x.js", "a//b.js", "**/*.js.map", "{a,b}/**/*.js",
]  # fmt: skip
PATHS = [
    "a.js", "src/a.js", "src/.h/a.js", ".a.js", "a/b/c.js", "a/b/c.js.map", "x1.js", "b.wasm", "lib/x.js",
    "lib/y/x.js", "a/x/b/q.map", "node_modules/p/i.js", "é/ü.js", "a b/c.js", "a.js/", "!x.js", "a//b.js",
    "b/q/r.js", "src/a.js\n", ".hidden/x", "src/.hidden/x",
]  # fmt: skip


def test_the_matcher_answers_as_the_library_for_every_glob_pair_and_path() -> None:
    checked = 0
    for size in (1, 2):
        for globs in itertools.combinations(GLOBS, size):
            library = wcglob.compile(list(globs), flags=glob_flags())
            ours = matcher(list(globs))
            for path in PATHS:
                assert ours(path) == bool(library.match(path)), (globs, path)
                checked += 1
    assert checked == (len(GLOBS) + len(GLOBS) * (len(GLOBS) - 1) // 2) * len(PATHS)


def test_no_glob_matches_nothing() -> None:
    assert not matcher([])("a.js")
