"""Code sets: the modules of one branch, as the repository or the server holds them.

A module is either text (a JavaScript source) or binary (for example WebAssembly), which travels on the wire as
``{"binary": "<base64>"}``. This module is pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import orjson

#: Characters a module name must not start with: the server silently drops such modules.
DROPPED_NAME_PREFIXES = ("$", ".", "/", "\\")

#: How the private server stores the characters a database key cannot hold, in the order it translates them back
#: (``@screeps/backend`` ``utils.translateModulesFromDb``). A name that holds such a marker reads back changed.
SERVER_NAME_ESCAPES = (("$DOT$", "."), ("$SLASH$", "/"), ("$BACKSLASH$", "\\"))

WireModule = str | dict[str, str]


@dataclass(frozen=True, slots=True)
class Module:
    """One module. Exactly one of ``text`` and ``binary`` is set."""

    name: str
    text: str | None = None
    binary: bytes | None = None
    digest: str = field(init=False, compare=False)
    #: Bytes of content: UTF-8 length for text, raw length for binary (found with the digest, which encodes it).
    size: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if (self.text is None) == (self.binary is None):
            raise ValueError("a module is either text or binary")
        content = self.text if self.text is not None else self.binary
        assert content is not None
        digest, size = _DIGESTS.facts(content)
        object.__setattr__(self, "digest", digest)
        object.__setattr__(self, "size", size)

    @property
    def is_binary(self) -> bool:
        return self.binary is not None

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as one tuple, its digest and size kept (not found again): the local read's child process hands
        # its modules back more cheaply than as the dataclass's own state, field by field.
        return (_restored_module, (self.name, self.text, self.binary, self.digest, self.size))

    def wire(self) -> WireModule:
        """The module's value in the code endpoint's ``modules`` map."""
        if self.text is not None:
            return self.text
        assert self.binary is not None
        return {"binary": base64.b64encode(self.binary).decode("ascii")}


def _restored_module(name: str, text: str | None, binary: bytes | None, digest: str, size: int) -> Module:
    """A pickled :class:`Module` again, as it was (its digest and size not computed again)."""
    module = _new_module(Module)
    _set_name(module, name)
    _set_text(module, text)
    _set_binary(module, binary)
    _set_digest(module, digest)
    _set_size(module, size)
    return module


# A frozen Module's fields, set through its slots' own setters (its __setattr__ refuses): cheaper than
# object.__setattr__ for every module a pickled set brings back.
_new_module = object.__new__
_set_name, _set_text, _set_binary, _set_digest, _set_size = (
    Module.__dict__[name].__set__ for name in ("name", "text", "binary", "digest", "size")
)


def content_digest(content: str | bytes) -> str:
    """The digest of a module's content: SHA-256 over a kind marker (``t`` text, ``b`` binary) and the bytes."""
    return content_facts(content)[0]


def content_facts(content: str | bytes) -> tuple[str, int]:
    """The digest of a module's content (:func:`content_digest`) and its size in bytes (UTF-8 for text)."""
    h = hashlib.sha256()
    if isinstance(content, str):
        data = content.encode("utf-8", "surrogatepass")
        h.update(b"t\0")
    else:
        data = content
        h.update(b"b\0")
    h.update(data)
    return h.hexdigest(), len(data)


class _DigestMemo:
    """The digests of the contents this process has hashed, so that each content is hashed once.

    One run meets the same texts several times: read from the repository, in the server's answer, in the upload
    and in the records made of it (hashing megabytes each time is not free). A text met again is usually the
    same string object, whose hash Python keeps, so finding it costs next to nothing; an equal text from
    elsewhere (the server's answer) costs one comparison. A text and bytes never compare equal, so both kinds
    share the table. The contents kept referenced are bounded (:attr:`LIMIT` characters or bytes, the oldest
    dropped first) for long runs such as ``gitops watch``. A result is always what :func:`content_facts` gives.
    """

    LIMIT = 64 * 1024 * 1024

    def __init__(self) -> None:
        self._memo: OrderedDict[str | bytes, tuple[str, int]] = OrderedDict()
        self._size = 0
        # Contents whose facts were found elsewhere (the local read's child process), by identity: remembering them
        # must not cost hashing their text as a key, which a run that uploads nothing would never need.
        self._found: OrderedDict[int, tuple[str | bytes, tuple[str, int]]] = OrderedDict()
        self._found_size = 0
        # A plan reads the local code in a second thread while this one parses the server's answer.
        self._lock = threading.Lock()

    def facts(self, content: str | bytes) -> tuple[str, int]:
        """:func:`content_facts` of ``content``: the digest and the size in bytes."""
        with self._lock:
            found = self._found.get(id(content))
            if found is not None and found[0] is content:
                return found[1]
            known = self._memo.get(content)
        if known is not None:
            return known
        facts = content_facts(content)
        if len(content) <= self.LIMIT:
            with self._lock:
                if content not in self._memo:
                    self._memo[content] = facts
                    self._size += len(content)
                    while self._size > self.LIMIT:
                        old, _ = self._memo.popitem(last=False)
                        self._size -= len(old)
        return facts

    def found(self, content: str | bytes, facts: tuple[str, int]) -> None:
        """Keep ``facts`` for this very object ``content``; they must be :func:`content_facts` of it (found by a
        child process of this run that hashed the same content)."""
        if len(content) <= self.LIMIT:
            with self._lock:
                if id(content) not in self._found:
                    self._found[id(content)] = (content, facts)  # referenced: the id is not reused while kept
                    self._found_size += len(content)
                    while self._found_size > self.LIMIT:
                        _, (old, _) = self._found.popitem(last=False)
                        self._found_size -= len(old)


_DIGESTS = _DigestMemo()


def set_digest(named: Iterable[tuple[str, str]]) -> str:
    """:attr:`CodeSet.digest` from each module's name and content digest, in name order."""
    h = hashlib.sha256()
    for name, digest in named:
        h.update(name.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
        h.update(digest.encode("ascii"))
        h.update(b"\n")
    return h.hexdigest()


def text_facts(text: str) -> tuple[str, int]:
    """A text module's digest and size, as :class:`Module` finds them (through this process's memo)."""
    return _DIGESTS.facts(text)


def remember_digests(modules: Iterable[Module]) -> None:
    """Let this process know the digests of modules made in another one (the local read's child process), so that
    meeting their texts again (the upload's record) costs no hashing."""
    for module in modules:
        content = module.text if module.text is not None else module.binary
        assert content is not None
        _DIGESTS.found(content, (module.digest, module.size))


def module_from_wire(name: str, value: Any, *, strict: bool = False) -> Module:
    """A module from the server's JSON. Raises ``ValueError`` with a short reason for anything else.

    A binary module's base64 is read as the server and the game read it (:func:`node_base64`); ``strict`` (for
    what this tool wrote itself, such as a saved plan's upload) accepts only the standard alphabet, padded or not.
    """
    if isinstance(value, str):
        return Module(name, text=value)
    if isinstance(value, dict) and set(value) == {"binary"} and isinstance(value["binary"], str):
        if not strict:
            return Module(name, binary=node_base64(value["binary"]))
        encoded = value["binary"]
        try:
            return Module(name, binary=base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True))
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"module {name!r} has invalid base64 in 'binary'") from exc
    raise ValueError(f"module {name!r} is neither a string nor {{'binary': base64}}")


#: What Node's base64 decoder skips: every character outside both alphabets (white space, line breaks, '!', ...).
_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/\-_]")


def node_base64(text: str) -> bytes:
    """The bytes Node's ``Buffer.from(text, 'base64')`` reads, which is how the server and the game read a binary
    module: the standard and the URL-safe alphabet alike, white space and line breaks (and any other character
    outside both alphabets) skipped, padding optional, decoding stopped at the first ``=``, and a last lone
    character (which holds no whole byte) dropped. The private server stores any such text as it was sent (it
    checks nothing), so the tool and the stand-in read it the same way instead of refusing it."""
    data = _NOT_BASE64.sub("", text.split("=", 1)[0]).translate(_URL_SAFE)
    data = data[: len(data) - (len(data) % 4 == 1)]
    try:
        return base64.b64decode(data + "=" * (-len(data) % 4), validate=True)
    except (binascii.Error, ValueError):  # pragma: no cover - only alphabet characters, never 4n+1 of them, are left
        return b""


_URL_SAFE = str.maketrans("-_", "+/")


@dataclass(frozen=True)
class CodeSet:
    """The modules of one branch, by name."""

    modules: Mapping[str, Module]

    @classmethod
    def of(cls, modules: list[Module] | tuple[Module, ...]) -> CodeSet:
        return cls({m.name: m for m in modules})

    @classmethod
    def from_wire(cls, modules: Any, *, strict: bool = False) -> CodeSet:
        """Parse a ``modules`` map from the server; ``ValueError`` if it is not one (``strict``: see
        :func:`module_from_wire`)."""
        if not isinstance(modules, dict):
            raise ValueError("'modules' is not an object")
        return cls({str(name): module_from_wire(str(name), value, strict=strict) for name, value in modules.items()})

    def __iter__(self) -> Iterator[Module]:
        return iter(self.modules[name] for name in sorted(self.modules))

    def __len__(self) -> int:
        return len(self.modules)

    def __contains__(self, name: object) -> bool:
        return name in self.modules

    def names(self) -> list[str]:
        return sorted(self.modules)

    def wire(self) -> dict[str, WireModule]:
        """The ``modules`` map to upload (sorted by name, so the JSON is stable)."""
        return {m.name: m.wire() for m in self}

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as columns (names, texts, binaries, digests, sizes) and the facts already found of the whole set:
        # the local read's child hands 2,000 modules back without a reduce call and a tuple per module.
        modules = list(self.modules.values())
        columns = (
            [m.name for m in modules],
            [m.text for m in modules],
            [m.binary for m in modules],
            [m.digest for m in modules],
            [m.size for m in modules],
        )
        known = {key: value for key, value in self.__dict__.items() if key != "modules"}  # the cached properties
        return (_restored_set, (*columns, known))

    @cached_property
    def digest(self) -> str:
        """A hash of the whole set (names and contents); equal sets have equal digests (computed once per set)."""
        return set_digest((m.name, m.digest) for m in self)

    @property
    def total_size(self) -> int:
        return sum(m.size for m in self.modules.values())

    def server_length(self) -> int:
        """``JSON.stringify(modules).length`` as the server computes it (UTF-16 code units): what
        :func:`code_length` says of :meth:`wire`, computed once per set."""
        return self._json_lengths[0]

    def upload_body_length(self, branch: str) -> int:
        """Bytes of the body that uploads this set to ``branch``: what :func:`upload_body_length` says of
        :meth:`wire`, from the same encoding as :meth:`server_length` (the body is the modules' JSON inside an
        envelope that names the branch)."""
        return len(upload_body(branch, {})) - len(b"{}") + self._json_lengths[1]

    @cached_property
    def _json_lengths(self) -> tuple[int, int]:
        """The compact JSON of :meth:`wire`: its length in UTF-16 units as the server counts it, and in bytes as
        the client sends it. One encoding of the ~5 MB for both; kept with the set (a pickled set keeps it, so
        the local read's child process computes it for the plan)."""
        encoded = request_body(self.wire())
        return _utf16_length(encoded), len(encoded)


def _restored_set(
    names: list[str],
    texts: list[str | None],
    binaries: list[bytes | None],
    digests: list[str],
    sizes: list[int],
    known: dict[str, Any],
) -> CodeSet:
    """A pickled :class:`CodeSet` again, as it was: its modules in their order, their facts and the set's own
    (:attr:`CodeSet.digest`, the JSON lengths) not computed again."""
    modules = {
        name: _restored_module(name, text, binary, digest, size)
        for name, text, binary, digest, size in zip(names, texts, binaries, digests, sizes, strict=True)
    }
    code = CodeSet(modules)
    code.__dict__.update(known)
    return code


def code_length(wire_modules: Mapping[str, Any]) -> int:
    """UTF-16 length of the compact JSON of a modules map, matching JavaScript's ``JSON.stringify(x).length``."""
    return _utf16_length(request_body(wire_modules))


def _utf16_length(encoded: bytes) -> int:
    """The UTF-16 length of JSON that :func:`request_body` wrote (orjson writes the same compact JSON as
    ``json.dumps(ensure_ascii=False)``, as UTF-8, much faster; a lone surrogate is written as its six-character
    escape, as ``JSON.stringify`` writes it since Node 12)."""
    if encoded.isascii():
        return len(encoded)
    # JavaScript strings are UTF-16: characters outside the BMP count twice.
    return len(encoded.decode("utf-8").encode("utf-16-le")) // 2


#: A surrogate that is not half of a pair, as JavaScript would see it once the text is UTF-16.
_LONE_SURROGATE = re.compile("[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")


def request_body(body: Any) -> bytes:
    """A request's JSON body as the tool sends it: compact UTF-8 (orjson, for speed). A module holding
    a lone surrogate, which UTF-8 cannot carry, is written with the standard library and the surrogate as its
    ``\\uXXXX`` escape (as JavaScript's ``JSON.stringify`` writes it), so that the server reads it back the same."""
    try:
        return orjson.dumps(body)
    except TypeError:  # orjson.JSONEncodeError: a lone surrogate
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def upload_body(branch: str, wire_modules: Mapping[str, Any]) -> bytes:
    """The body of ``POST /api/user/code`` that uploads ``wire_modules`` to ``branch``, byte for byte as the client
    sends it."""
    return request_body({"branch": branch, "modules": dict(wire_modules)})


def upload_body_length(branch: str, wire_modules: Mapping[str, Any]) -> int:
    """Bytes of the body of ``POST /api/user/code`` that uploads ``wire_modules`` to ``branch`` (the 8 MiB limit)."""
    return len(upload_body(branch, wire_modules))


def dropped_name_reason(name: str) -> str | None:
    """Why the server would drop a module of this name, or ``None`` if it keeps it (the stand-in drops the same).

    The empty name is kept: the private server drops a name whose first character is one of
    :data:`DROPPED_NAME_PREFIXES` (``@screeps/backend`` ``utils.translateModulesToDb``), and ``""`` has none.
    """
    if name.startswith(DROPPED_NAME_PREFIXES):
        return f"the name starts with {name[0]!r}, and the server silently drops such modules"
    return None


def refused_name_reason(name: str) -> str | None:
    """Why a module of this name cannot be deployed as it is, or ``None``.

    The server drops the name (:func:`dropped_name_reason`), or stores it with a marker of its own escaping in it
    and reads it back as another name (``a$DOT$b`` comes back as ``a.b``), so a plan would never find it there.
    """
    if not name:
        return "the name is empty, and no file or require can name such a module"
    if not name.isascii() and _LONE_SURROGATE.search(name):
        # Only a code set file can bring one (JSON's escapes); the build refuses a file name that is not UTF-8.
        return "the name is not UTF-8 text (it holds a lone surrogate), and module names travel as UTF-8"
    reason = dropped_name_reason(name)
    if reason is not None:
        return reason
    found = [(marker, char) for marker, char in SERVER_NAME_ESCAPES if marker in name]
    if not found:
        return None
    read_back = name
    for marker, char in SERVER_NAME_ESCAPES:
        read_back = read_back.replace(marker, char)
    markers = " and ".join(repr(marker) for marker, _ in found)
    chars = " and ".join(repr(char) for _, char in found)
    forms = "the server's stored form" + ("s" if len(found) > 1 else "")
    return (
        f"the name contains {markers}, {forms} of {chars}, so the server would return it as {read_back!r} and no "
        "plan would ever match"
    )
