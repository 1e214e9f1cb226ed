"""What each endpoint does, once the request is authenticated, in scope and within its rate limits.

The answers follow the real server (``{"ok": 1, ...}``, and HTTP 200 ``{"error": "..."}`` for logical errors, with
the real server's messages where it has one). ``docs/serve.md`` lists every answer.
"""

from __future__ import annotations

import base64
import gzip
import json
import random
import re
from collections.abc import Callable
from importlib import resources
from typing import Any

from gitops import __version__
from gitops.core.codeset import code_length, dropped_name_reason, module_from_wire, request_body
from gitops.core.endpoints import MAX_BRANCHES, MAX_CODE_LENGTH
from gitops.standin.accounts import Account, fingerprint
from gitops.standin.endpoints import SEGMENT_COUNT
from gitops.standin.parts import StandInParts
from gitops.standin.store import ActiveName, dump_json, dump_modules, new_id
from gitops.standin.wire import HTML_TYPE, Reject, Request, Response, dump, ok

Handler = Callable[[Request], Response]

#: Longest branch name the real server accepts in ``clone-branch``.
MAX_BRANCH_NAME = 30
MAX_MEMORY_LENGTH = 1024 * 1024
MAX_SEGMENT_LENGTH = 100 * 1024
MAX_EXPRESSION_LENGTH = 1024
DEFAULT_SHARD = "shard0"

_ROOM = re.compile(r"[WE](\d{1,3})[NS](\d{1,3})")
_SHARD = re.compile(r"[A-Za-z0-9_-]{1,30}")
# What JavaScript's parseInt(text) reads: leading white space, a sign, then hexadecimal digits after 0x or decimal ones.
_JS_INT = re.compile(r"[\s\ufeff]*([+-]?)(?:0[xX]([0-9a-fA-F]+)|([0-9]+))")
# JavaScript's \d is ASCII only (Python's also matches other scripts' digits, such as the Arabic-Indic ٣).
_TUTORIAL = re.compile(r"tutorial-[0-9]")
_ACTIVE_NAMES: tuple[ActiveName, ...] = ("activeWorld", "activeSim")


def check_selector(branch: str) -> str:
    """A branch name or an active-branch selector; the selector ``$`` alone is refused.

    The real server reads ``$X`` as "the branch whose flag X is true" (``$activeWorld``, ``$activeSim``; any other
    flag matches no branch), so ``$``, an empty flag name, matches every branch of the account: an upload to ``$``
    overwrites all of them. The stand-in refuses it rather than copy that.
    """
    if branch == "$":
        raise Reject(
            "invalid params: branch '$' is neither a branch name nor a selector such as $activeWorld (the real"
            " server would write every branch of the account)"
        )
    return branch


def json_length(value: Any) -> int:
    """``JSON.stringify(value).length`` in JavaScript: compact JSON, non-ASCII text as itself, in UTF-16 units."""
    return js_length(request_body(value).decode("utf-8"))


def branch_name(value: Any, effect: str) -> str | None:
    """A ``branch`` field that is text (``None`` when missing or null); an object or array is refused.

    The real server puts the field into a database query as it is, so ``{"$ne": "x"}`` is an operator that matches
    every branch; ``effect`` says what the request would then do there.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        raise Reject(
            "invalid params: 'branch' must be a branch name, not an object or array (the real server reads"
            f" {json.dumps(value)[:60]} as a database query and would {effect})"
        )
    raise Reject("invalid params: 'branch' must be a string")


def js_parse_int(value: Any) -> int | None:
    """JavaScript's ``parseInt(String(value))``, or ``None`` for ``NaN`` (and for more than 21 digits)."""
    found = _JS_INT.match(_js_string(value))
    if found is None:
        return None
    sign, hexadecimal, decimal = found.groups()
    digits = (hexadecimal or decimal).lstrip("0") or "0"
    if len(digits) > 21:
        return None
    number = int(digits, 16) if hexadecimal else int(digits)
    return -number if sign == "-" else number


def js_length(text: str) -> int:
    """``text.length`` in JavaScript (UTF-16 code units)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _js_string(value: Any) -> str:
    """``String(value)`` in JavaScript for a JSON value (as far as parseInt can tell the difference)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and abs(value) > 2**53:
        # A JSON number is a double there: 12345678901234567890123 is "1.2345678901234568e+22", parseInt reads 1.
        value = float(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    if isinstance(value, list):
        return ",".join("" if item is None else _js_string(item) for item in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


def parse_segment(value: Any) -> int | None:
    """A memory-segment number as the private server reads it, or ``None`` if it is not one from 0 to 99.

    The server takes ``parseInt(segment)``: the leading integer of the text, so ``"5,6"`` (the list form that
    node-screeps-api's CLI sends for several segments) reads segment 5, ``"7abc"`` reads 7 and ``"0x1f"`` reads 31.
    """
    number = js_parse_int(value)
    return number if number is not None and 0 <= number < SEGMENT_COUNT else None


def check_modules(raw: Any, field: str) -> dict[str, Any]:
    """The modules map the server keeps: each value checked, names the server drops left out, ``main`` added."""
    if not isinstance(raw, dict):
        raise Reject(f"invalid params: '{field}' must be an object that maps module names to source text")
    kept: dict[str, Any] = {}
    for name, value in raw.items():
        # Text needs no check; a binary module must be {"binary": <text>}, whose text is read as Node reads base64
        # (white space, line breaks and the URL-safe alphabet included) and kept as it was sent, as the real server
        # keeps it.
        if not isinstance(value, str):
            try:
                module_from_wire(name, value)
            except ValueError as exc:
                raise Reject(f"invalid module: {exc}") from None
        if dropped_name_reason(name) is None:
            kept[name] = value
    kept.setdefault("main", "")
    return kept


class Handlers:
    """The endpoint handlers of one stand-in app."""

    def __init__(self, app: StandInParts) -> None:
        self.app = app
        self.store = app.store
        self.page = resources.files("gitops.standin").joinpath("page.html").read_bytes()
        #: Whether ``GET /api/user/branches`` carries each branch's modules, as the private server's does. Tests set
        #: it to False to answer as a list without them would (names, flags and ``timestamp`` only).
        self.list_modules = True
        #: The world's objects by room (tests set them: :meth:`gitops.standin.testing.StandIn.set_colony`), and its
        #: game time: what the colony reads of ``rehearse --from-server`` find.
        self.room_objects_by_room: dict[str, list[dict[str, Any]]] = {}
        self.world_time = 1000

    def routes(self) -> dict[str, Handler]:
        return {
            "GET /api/version": self.version,
            "GET /api/auth/me": self.me,
            "GET /api/user/name": self.name,
            "GET /api/user/find": self.find_user,
            "GET /api/auth/query-token": self.query_token,
            "POST /api/auth/noratelimit": self.noratelimit,
            "GET /a": self.page_html,
            "GET /a/index.html": self.page_html,
            "GET /api/user/code": self.get_code,
            "POST /api/user/code": self.post_code,
            "GET /api/user/branches": self.branches,
            "POST /api/user/clone-branch": self.clone_branch,
            "POST /api/user/set-active-branch": self.set_active_branch,
            "POST /api/user/delete-branch": self.delete_branch,
            "GET /api/user/memory": self.get_memory,
            "POST /api/user/memory": self.post_memory,
            "GET /api/user/memory-segment": self.get_segment,
            "POST /api/user/memory-segment": self.post_segment,
            "POST /api/user/console": self.console,
            "GET /api/game/room-terrain": self.room_terrain,
            "GET /api/game/room-objects": self.room_objects,
            "GET /api/game/time": self.game_time,
            "GET /api/user/overview": self.overview,
            "POST /api/game/map-stats": self.map_stats,
            "GET /api/game/market/orders-index": self.orders_index,
            "GET /api/game/market/orders": self.orders,
            "GET /api/game/market/my-orders": self.my_orders,
            "GET /api/game/market/stats": self.market_stats,
            "GET /api/game/user/money-history": self.money_history,
        }

    def _now_ms(self) -> int:
        return int(self.app.clock.now() * 1000)

    # -- service, tokens and the no-rate-limit page ---------------------------------------------------------

    def version(self, req: Request) -> Response:
        return ok(
            protocol=14,
            useNativeAuth=False,
            users=len(self.app.accounts.users),
            serverData={"shards": [DEFAULT_SHARD]},
            standin=True,
            # It runs no code: its console is empty ticks, or (testing only) what the control routes' rules say.
            # A client's verify: reads this to say "unknown" rather than judge an empty console healthy.
            runsCode=False,
            console="simulated" if self.app.testing else "empty",
            packageVersion=__version__,
        )

    def me(self, req: Request) -> Response:
        user = req.user
        return ok(_id=user.user_id, username=user.username, email=user.email, cpu=100, gcl=0, badge=None)

    def name(self, req: Request) -> Response:
        # What node-screeps-api's me() asks first when its token is restricted (the official server's endpoint).
        return ok(username=req.user.username)

    def find_user(self, req: Request) -> Response:
        # node-screeps-api's me() asks this second, with the name from /api/user/name; public fields only.
        wanted = req.query.get("username")
        found = self.app.accounts.user(wanted) if wanted else None
        if found is None and req.query.get("id"):
            found = next((a for a in self.app.accounts.users if a.user_id == req.query.get("id")), None)
        if found is None:
            raise Reject("user not found")
        return ok(user={"_id": found.user_id, "username": found.username, "badge": None, "gcl": 0})

    def _token_state(self, value: Any) -> tuple[Any, float | None]:
        if not isinstance(value, str) or not value:
            raise Reject("invalid params: give the token as 'token'")
        token = self.app.accounts.token(value)
        if token is None:
            raise Reject("token not found")
        return token, self.app.limiter.unlimited_until(fingerprint(value))

    def query_token(self, req: Request) -> Response:
        token, until = self._token_state(req.query.get("token"))
        now = self.app.clock.now()
        account = self.app.accounts.user(token.username)
        assert account is not None
        return ok(
            _id=account.user_id,
            user=account.username,
            token=token.scope(),
            unlimitedUntil=None if until is None else int(until * 1000),
            unlimitedSeconds=0 if until is None else max(0, int(until - now)),
        )

    def noratelimit(self, req: Request) -> Response:
        token, _ = self._token_state(req.json_object().get("token"))
        until = self.app.limiter.grant(token.fingerprint)
        return ok(unlimitedUntil=int(until * 1000))

    def page_html(self, req: Request) -> Response:
        # No X-Frame-Options: the page must work inside a frame (the interface document, section 4.3).
        return Response(200, self.page, HTML_TYPE, [(b"cache-control", b"no-store")])

    # -- code and branches ----------------------------------------------------------------------------------

    def get_code(self, req: Request) -> Response:
        selector = check_selector(req.query.get("branch") or "$activeWorld")
        branch = self.store.branch(req.user.username, selector)
        if branch is None:
            raise Reject("no code")
        # The stored map is already JSON: splice it in rather than decode and encode it again.
        body = b"".join((b'{"ok":1,"branch":', dump(branch.name), b',"modules":', branch.modules_json, b"}"))
        return Response(200, body)

    def post_code(self, req: Request) -> Response:
        data = req.json_object()
        raw = data.get("modules")
        if not isinstance(raw, dict):
            raise Reject("invalid params: 'modules' must be an object that maps module names to source text")
        # JSON.stringify(modules).length never exceeds the body's size in bytes, so only a large body can be over.
        if len(req.body) > MAX_CODE_LENGTH and code_length(raw) > MAX_CODE_LENGTH:
            raise Reject("code length exceeds 5 MB limit")
        branch = branch_name(data.get("branch"), "overwrite the code of every branch it matches") or "$activeWorld"
        check_selector(branch)
        modules = check_modules(raw, "modules")
        stamp = self.store.put_code(req.user.username, branch, dump_modules(modules), self._now_ms())
        if stamp is None:
            raise Reject("branch does not exist")
        # The branch's new modification time, as GET /api/user/branches lists it (the private server answers its
        # clock a moment after the write instead: a client must not expect the two to be equal there).
        return ok(timestamp=stamp)

    def branches(self, req: Request) -> Response:
        # The private server first creates 'default' when the user has none (it may have been deleted).
        self.store.ensure_default(req.user.username, self._now_ms())
        return Response(200, b'{"ok":1,"list":' + self.branch_list(req.user) + b"}")

    def branch_list(self, account: Account) -> bytes:
        """The ``list`` of ``GET /api/user/branches`` as JSON: each branch as the private server lists it, with its
        whole modules map (spliced in as stored) and its modification time in epoch milliseconds."""
        entries = []
        for b in self.store.branches(account.username):
            head = dump(
                {
                    "_id": b.id,
                    "user": account.user_id,
                    "branch": b.name,
                    "activeWorld": b.active_world,
                    "activeSim": b.active_sim,
                    "timestamp": b.timestamp,
                }
            )
            entries.append(head[:-1] + b',"modules":' + b.modules_json + b"}" if self.list_modules else head)
        return b"[" + b",".join(entries) + b"]"

    def clone_branch(self, req: Request) -> Response:
        data = req.json_object()
        source = data.get("branch")
        # The real server counts the name's length in UTF-16 units (an emoji is 2).
        if source and (not isinstance(source, str) or js_length(source) > MAX_BRANCH_NAME):
            raise Reject("invalid branch name")
        new_name = data.get("newName")
        if not isinstance(new_name, str) or not new_name:
            raise Reject("invalid params: 'newName' must be the name of the branch to create")
        if js_length(new_name) > MAX_BRANCH_NAME or new_name.startswith("$"):
            raise Reject("invalid branch name")
        # As the private server: without a source branch (missing, "" or unknown) the new branch gets
        # defaultModules, with the names an upload drops left out and main added; it checks no 5 MB rule here (the
        # 8 MiB body limit bounds them). A 'tutorial-N' name does not count against the branch limit.
        defaults = data.get("defaultModules")
        modules = check_modules(defaults, "defaultModules") if defaults else {"main": ""}
        limit = None if _TUTORIAL.fullmatch(new_name) else MAX_BRANCHES
        stamp = self.store.clone_branch(
            req.user.username, source or None, new_name, dump_modules(modules), self._now_ms(), limit
        )
        if stamp is None:
            raise Reject("too many branches")
        return ok(timestamp=stamp)

    def set_active_branch(self, req: Request) -> Response:
        data = req.json_object()
        which = data.get("activeName")
        if which not in _ACTIVE_NAMES:
            raise Reject("invalid params")
        branch = branch_name(data.get("branch"), f"set {which} on every branch it matches")
        if branch == "$":
            check_selector(branch)
        if branch is None or not self.store.set_active(req.user.username, branch, which):
            raise Reject("no branch")
        return ok()

    def delete_branch(self, req: Request) -> Response:
        branch = branch_name(req.json_object().get("branch"), "delete every inactive branch it matches")
        if branch is None:
            raise Reject("invalid params: 'branch' must be a string")
        # Like the real server: an active branch is kept, and the answer is the same either way.
        self.store.delete_branch(req.user.username, branch)
        return ok(timestamp=self._now_ms())

    # -- memory and segments --------------------------------------------------------------------------------

    @staticmethod
    def _shard(value: Any) -> str:
        if value is None or value == "":
            return DEFAULT_SHARD
        if not isinstance(value, str) or not _SHARD.fullmatch(value):
            raise Reject("invalid params: 'shard' must be a shard name such as shard0")
        return value

    def get_memory(self, req: Request) -> Response:
        memory: Any = self.store.memory(req.user.username, self._shard(req.query.get("shard")))
        path = req.query.get("path")
        if path:
            for part in path.split("."):
                if memory is _MISSING or memory is None:
                    # JavaScript throws on a property of undefined; the real server answers this text as data.
                    return ok(data="Incorrect memory path")
                if isinstance(memory, dict):
                    memory = memory.get(part, _MISSING)
                elif isinstance(memory, list) and part.isdigit() and int(part) < len(memory):
                    memory = memory[int(part)]
                else:
                    memory = _MISSING
        if memory is _MISSING:
            return ok()  # JSON.stringify leaves out an undefined 'data'
        packed = gzip.compress(dump_json(memory).encode("ascii"), mtime=0)
        return ok(data="gz:" + base64.b64encode(packed).decode("ascii"))

    def post_memory(self, req: Request) -> Response:
        data = req.json_object()
        shard = self._shard(data.get("shard"))
        path = data.get("path")
        if path is not None and not isinstance(path, str):
            raise Reject("invalid params: 'path' must be a string such as 'creeps.harvester1'")
        has_value = "value" in data
        value = data.get("value")
        if has_value and json_length(value) > MAX_MEMORY_LENGTH:
            raise Reject("memory size is too large")
        user = req.user.username
        if not path:
            # The real server empties Memory and copies the value's keys into it.
            self.store.set_memory(user, shard, value if isinstance(value, dict) else {})
            return ok(result={"ok": 1, "n": 1})
        memory: Any = self.store.memory(user, shard)
        if not isinstance(memory, dict):
            memory = {}
        node = memory
        *parents, last = path.split(".")
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                # The real server queues `Memory['a']['b'] = value` and answers ok; in the tick, a path through
                # undefined throws and one through a number or text changes nothing. Either way: nothing changes.
                return ok(result={"ok": 1, "n": 1})
            node = child
        if has_value:
            node[last] = value
        else:
            node.pop(last, None)
        self.store.set_memory(user, shard, memory)
        return ok(result={"ok": 1, "n": 1})

    def get_segment(self, req: Request) -> Response:
        segment = parse_segment(req.query.get("segment"))
        if segment is None:
            raise Reject("invalid segment ID")
        shard = self._shard(req.query.get("shard"))
        data = self.store.segment(req.user.username, shard, segment)
        # The private server answers {"ok":1} for a segment never written: its 'data' is undefined, which
        # JSON.stringify leaves out (and python screepsapi then reads the missing key as "no data").
        return ok() if data is None else ok(data=data)

    def post_segment(self, req: Request) -> Response:
        data = req.json_object()
        segment = parse_segment(data.get("segment"))
        if segment is None:
            raise Reject("invalid segment ID")
        text = data.get("data")
        if not isinstance(text, str):
            raise Reject("invalid params: 'data' must be a string")
        if js_length(text) > MAX_SEGMENT_LENGTH:
            raise Reject("length limit exceeded")
        self.store.set_segment(req.user.username, self._shard(data.get("shard")), segment, text)
        return ok()

    def console(self, req: Request) -> Response:
        data = req.json_object()
        # The real server measures JSON.stringify(expression).length and stores any JSON value (a number, true, null
        # and an object too: the game's runtime evaluates its text); only a missing one fails there, on `.length`.
        if "expression" not in data:
            raise Reject("TypeError: Cannot read properties of undefined (reading 'length')")
        expression = data["expression"]
        self._shard(data.get("shard"))
        if json_length(expression) > MAX_EXPRESSION_LENGTH:
            raise Reject("expression size is too large")
        entry = {"_id": new_id(), "user": req.user.user_id, "expression": expression}
        return ok(result={"ok": 1, "n": 1}, ops=[entry], insertedCount=1)

    # -- game and market ------------------------------------------------------------------------------------

    def room_terrain(self, req: Request) -> Response:
        room = req.query.get("room", "")
        if not _ROOM.fullmatch(room):
            raise Reject("invalid room")
        terrain = _terrain(room)
        if req.query.get("encoded") not in (None, "", "0", "false"):
            return ok(terrain=[{"_id": room, "room": room, "terrain": terrain, "type": "terrain"}])
        names = {"1": "wall", "2": "swamp"}
        tiles = [
            {"room": room, "x": i % 50, "y": i // 50, "type": names[t]} for i, t in enumerate(terrain) if t in names
        ]
        return ok(terrain=tiles)

    def room_objects(self, req: Request) -> Response:
        # The official server's (node-screeps-api roomObjects): every object of the room, and the users they name.
        room = req.query.get("room", "")
        if not _ROOM.fullmatch(room):
            raise Reject("invalid room")
        return ok(objects=self.room_objects_by_room.get(room, []), users={})

    def game_time(self, req: Request) -> Response:
        return ok(time=self.world_time)

    def overview(self, req: Request) -> Response:
        # Both servers list the rooms whose controller the user owns, highest level first; the stand-in keeps no
        # statistics (the private server's are empty too).
        owned = [
            (o.get("level") or 0, room)
            for room, objects in self.room_objects_by_room.items()
            for o in objects
            if o.get("type") == "controller" and o.get("user") == req.user.user_id
        ]
        rooms = [room for _, room in sorted(owned, key=lambda pair: -pair[0])]
        return ok(rooms=rooms, stats={}, statsMax=None, totals={}, gametimes=[])

    def map_stats(self, req: Request) -> Response:
        data = req.json_object()
        rooms = data.get("rooms")
        if not isinstance(rooms, list) or len(rooms) > 1000 or not all(isinstance(r, str) for r in rooms):
            raise Reject("invalid params: 'rooms' must be a list of room names")
        stat = data.get("statName")
        if not isinstance(stat, str) or not stat:
            raise Reject("invalid params: 'statName' must be a string such as 'owner0'")
        self._shard(data.get("shard"))
        stats = {r: {"status": "normal", "novice": None, "openTime": None} for r in rooms if _ROOM.fullmatch(r)}
        return ok(stats=stats, users={})

    def orders_index(self, req: Request) -> Response:
        return ok(list=[{"_id": "energy", "count": 0}])

    def orders(self, req: Request) -> Response:
        return ok(list=[])

    def my_orders(self, req: Request) -> Response:
        return ok(list=[])

    def market_stats(self, req: Request) -> Response:
        return ok(stats=[])

    def money_history(self, req: Request) -> Response:
        # parseInt(page) || 0, as the private server reads it.
        page = js_parse_int(req.query.get("page", "")) or 0
        return ok(page=page, list=[], hasMore=False)


_MISSING: Any = object()


def _terrain(room: str) -> str:
    """A fixed made-up terrain for a room: 2,500 digits (0 plain, 1 wall, 2 swamp), walls round the edge with exits."""
    rng = random.Random(room)
    tiles = []
    for y in range(50):
        for x in range(50):
            edge = x in (0, 49) or y in (0, 49)
            exit_gap = 20 <= (y if x in (0, 49) else x) <= 29
            if edge:
                tiles.append("0" if exit_gap else "1")
            else:
                roll = rng.random()
                tiles.append("1" if roll < 0.2 else "2" if roll < 0.3 else "0")
    return "".join(tiles)
