"""Side by side over an emulated internet path: ``gitops apply --yes`` against node-screeps-api's token-mode
``code.set``, each a whole process, through ``bench/netem.py`` in front of the stand-in in official-server mode.

The server is the stand-in as the official server looks to a client (``bench/official_standin.py``: token auth, a
branch list without modules, no word on compressed bodies, so that gitops' ``compress: auto`` must probe once per
ledger). The path: by default RTT 80 ms, 20 Mbit/s up, 100 Mbit/s down, TCP slow start, the handshake's round trip
(``--rtt-ms``, ``--up-mbit``, ``--down-mbit``). The repository: 2,000 modules, 4.58 MB of varied JavaScript that
compresses about as real bot code does (printed). Scenarios, each side once per round in rotating order, each run
checked on the server afterwards (the branch holds exactly the repository's modules):

- first deploy: an account whose ``default`` holds only ``main: ""``; gitops with a new state folder;
- no-op, ledger kept / fresh ledger: the same code again (the peer uploads it again);
- 20 changed: 20 modules changed, gitops with the kept state folder;
- three servers (``--servers 3``): the first deploy to three stand-ins behind three paths, against gitops' first
  deploy to one (the ratio shown is gitops-three / gitops-one; the goal is at most 1.3x).

Before the figures it checks the proxy itself: a tiny request on a new and on a kept connection, and a 4.7 MB upload
and download, against what the path's arithmetic says they should take.

``--tls`` (issue 40): the official server is ``https://``. The stand-in then serves TLS itself, behind the path, with a
certificate from an authority made for the run (trustme), which both sides trust (gitops through ``SSL_CERT_FILE``,
node through ``NODE_EXTRA_CA_CERTS``); the proxy carries the TLS bytes, so every handshake round trip is paid on the
path. The check of the proxy then counts them: a tiny request on a new connection takes three round trips (TCP,
TLS 1.3, the request), and the version both sides negotiate is printed.
"""

from __future__ import annotations

import argparse
import json
import random
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import certifi
import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench_peer import PEER_PREFIX, BenchError, install_peer, measure  # noqa: E402
from netem import Link, proxy  # noqa: E402
from official_standin import token_of  # noqa: E402
from proc_usage import Usage, clean_env, compile_gitops  # noqa: E402

from gitops.edges.bodies import COMPRESS_LEVEL  # noqa: E402

GITOPS = str(Path(sys.executable).with_name("gitops"))
PEER_SCRIPT = ROOT / "bench" / "peer" / "deploy_token.js"
BRANCH = "default"
CHANGED = 20
SCENARIOS = ("first deploy", "no-op, ledger kept", "no-op, fresh ledger", "20 changed")

_WORDS = [
    *("creep", "room", "spawn", "energy", "target", "source", "controller", "structure", "extension", "tower"),
    *("container", "storage", "link", "terminal", "harvest", "upgrade", "build", "repair", "transfer", "withdraw"),
    *("moveTo", "memory", "role", "task", "queue", "path", "cost", "matrix", "body", "part", "hits"),
]


def make_repo(root: Path, modules: int, total_bytes: int, seed: int = 23) -> None:
    """``modules`` files of varied JavaScript, ``total_bytes`` in all, committed; a manifest is written per run."""
    rng = random.Random(seed)
    size = total_bytes // modules

    def line() -> str:
        # Idioms of bot code with names from a small vocabulary: it deflates about as real Screeps code does (the
        # engine's own JavaScript: 4.8x at zlib level 1, 5.9x at level 4; this: 4.5x and 5.5x).
        a, b, c = rng.choice(_WORDS), rng.choice(_WORDS), rng.choice(_WORDS)
        n = rng.randrange(1, 60)
        return rng.choice(
            (
                f"    if ({a}.{b}({c.upper()}) > {n}) {{\n        {a}.{c}({b});\n    }}\n",
                f"    const {a} = Game.{b}s[{c}.memory.{a}Id] || {c}.pos.findClosestByRange(FIND_{b.upper()}S);\n",
                f"    // {a} the {b} before the {c} runs out\n",
                f"    {c}.memory.{a} = {{ {b}: {n}, time: Game.time }};\n",
                f"    for (const {a} of {c}.room.find(FIND_{b.upper()}S)) {{\n"
                f"        if ({a}.hits < {a}.hitsMax) {c}.repair({a});\n    }}\n",
                f"    return {a}.{b}({c}) === OK;\n",
            )
        )

    src = root / "src"
    for i in range(modules - 1):
        text = [f"// module {i}\nmodule.exports.run = function ({rng.choice(_WORDS)}) {{\n"]
        length = len(text[0])
        while (more := line()) and length + len(more) <= size - 3:  # whole statements: every module parses
            text.append(more)
            length += len(more)
        body = _padded("".join(text), size - 3) + "};\n"
        path = src / f"group{i % 40:02d}" / f"module{i:04d}.js"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    (src / "main.js").write_text("module.exports.loop = function () {};\n", encoding="utf-8")
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "bench"], cwd=root, check=True)


def _padded(text: str, size: int) -> str:
    """``text`` (whole lines, at most ``size`` characters) filled to ``size`` with a comment line, so that each
    module keeps the size the benchmarks were measured with."""
    left = size - len(text)
    return text + ("//" + "." * (left - 3) + "\n" if left >= 3 else " " * left)


def expected_modules(src: Path) -> dict[str, str]:
    return {p.relative_to(src).as_posix().removesuffix(".js"): p.read_text(encoding="utf-8") for p in src.rglob("*.js")}


def write_manifest(repo: Path, urls: list[str], tokens: list[str]) -> None:
    servers = "".join(f"  s{n}:\n    url: {url}\n    token_env: BENCH_TOKEN_{n}\n" for n, url in enumerate(urls))
    branches = "".join(f"  - server: s{n}\n    branch: {BRANCH}\n    root: src\n" for n in range(len(urls)))
    (repo / "gitops.yaml").write_text(f"version: 1\nservers:\n{servers}branches:\n{branches}", encoding="utf-8")


@dataclass
class Service:
    """One official-mode stand-in (its own process) and its URL on loopback."""

    proc: subprocess.Popen[str]
    url: str
    #: What the bench's own requests trust (the run's authority over TLS).
    verify: ssl.SSLContext | bool = True

    def reset(self, user: int) -> None:
        """Make the user's ``default`` hold only ``main: ""`` (the fresh account of a first deploy)."""
        headers = {"X-Token": token_of(user)}
        with httpx.Client(base_url=self.url, headers=headers, timeout=30, verify=self.verify) as http:
            answer = http.post("/api/user/code", json={"branch": BRANCH, "modules": {"main": ""}})
            if answer.json().get("ok") != 1:
                raise BenchError(f"could not reset u{user}: {answer.text[:200]}")

    def held(self, user: int) -> dict[str, object]:
        headers = {"X-Token": token_of(user)}
        with httpx.Client(base_url=self.url, headers=headers, timeout=60, verify=self.verify) as http:
            data = http.get("/api/user/code", params={"branch": BRANCH}).json()
        modules = data.get("modules")
        if not isinstance(modules, dict):
            raise BenchError(f"u{user}: the server answered {str(data)[:200]}")
        return modules


@dataclass(frozen=True)
class Authority:
    """The run's certificate authority (``ca_pem``), the stand-in's certificate for 127.0.0.1 (``server_pem``), and
    the trust store gitops is given (``bundle_pem``): certifi's public authorities and the run's, so that gitops loads
    as many as it does on a player's machine (node adds the run's to its own built-in store)."""

    ca_pem: Path
    server_pem: Path
    bundle_pem: Path

    @classmethod
    def make(cls, folder: Path) -> Authority:
        import trustme  # a test dependency, needed only by a --tls run

        ca = trustme.CA()
        made = cls(folder / "authority.pem", folder / "standin.pem", folder / "bundle.pem")
        ca.cert_pem.write_to_path(str(made.ca_pem))
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(made.server_pem))
        public = Path(certifi.where()).read_text(encoding="ascii")
        made.bundle_pem.write_text(public + "\n" + ca.cert_pem.bytes().decode("ascii"), encoding="ascii")
        return made

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_pem))

    def env(self) -> dict[str, str]:
        """What makes both sides trust it: httpx's variable and node's."""
        return {"SSL_CERT_FILE": str(self.bundle_pem), "NODE_EXTRA_CA_CERTS": str(self.ca_pem)}


@contextmanager
def services(tmp: Path, count: int, users: int, tls: Authority | None = None) -> Iterator[list[Service]]:
    started: list[Service] = []
    extra = [str(tls.server_pem)] if tls is not None else []
    scheme = "https" if tls is not None else "http"
    try:
        for n in range(count):
            proc = subprocess.Popen(
                [
                    *(sys.executable, str(ROOT / "bench" / "official_standin.py")),
                    *(str(tmp / f"standin{n}"), str(users), *extra),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            if not url.startswith(f"{scheme}://127.0.0.1:"):
                proc.kill()
                raise BenchError(f"the stand-in did not start (said {url!r})")
            started.append(Service(proc, url, tls.context() if tls is not None else True))
        yield started
    finally:
        for service in started:
            assert service.proc.stdin is not None
            service.proc.stdin.close()
            try:
                service.proc.wait(10)
            except subprocess.TimeoutExpired:
                service.proc.kill()
                service.proc.wait()


def _tls_version_of(tell: Callable[[str], None]) -> Callable[[str, dict[str, object]], None]:
    """An httpcore trace hook that tells the TLS version of the connection once its handshake is done."""

    def trace(event: str, info: dict[str, object]) -> None:
        stream = info.get("return_value")
        if event == "connection.start_tls.complete" and hasattr(stream, "get_extra_info"):
            tls = stream.get_extra_info("ssl_object")
            if tls is not None:
                tell(tls.version())

    return trace


def check_proxy(service: Service, link: Link) -> list[str]:
    """The proxy measured against the path's arithmetic: lines to print with the figures."""
    versions: list[str] = []
    body = json.dumps({"branch": BRANCH, "modules": {"main": "x" * 4_700_000}}).encode()
    lines = []
    tls = service.url.startswith("https://")
    trips = 3 if tls else 2  # TCP's, TLS 1.3's and the request's
    with proxy(service.url, link) as url:
        with httpx.Client(base_url=url, timeout=60, verify=service.verify) as http:
            started = time.perf_counter()
            answer = http.get("/api/version", extensions={"trace": _tls_version_of(versions.append)})
            new = time.perf_counter() - started
            started = time.perf_counter()
            http.get("/api/version")
            kept = time.perf_counter() - started
            answer.raise_for_status()
        headers = {"X-Token": token_of(0), "Content-Type": "application/json", "Accept-Encoding": "identity"}
        with httpx.Client(base_url=url, headers=headers, timeout=60, verify=service.verify) as http:
            http.get("/api/version")
            started = time.perf_counter()
            http.post("/api/user/code", content=body)
            up = time.perf_counter() - started
            started = time.perf_counter()
            down_bytes = len(http.get("/api/user/code", params={"branch": BRANCH}).content)
            down = time.perf_counter() - started
    service.reset(0)
    lines.append(f"path: {link.describe()}, TCP slow start from 10 segments, a round trip per new connection")
    if tls:
        lines.append(f"  TLS: served by the stand-in behind the path, negotiated {', '.join(versions) or 'nothing?'}")
    handshakes = "TCP, TLS and the request" if tls else "TCP and the request"
    lines.append(
        f"  tiny request, new connection:  {new * 1000:6.0f} ms ({trips} round trips, {handshakes}: "
        f"{trips * link.rtt * 1000:.0f} ms)"
    )
    lines.append(f"  tiny request, kept connection: {kept * 1000:6.0f} ms (1 round trip: {link.rtt * 1000:.0f} ms)")
    lines.append(
        f"  4.7 MB upload:   {up:5.2f} s (on the wire alone {len(body) / link.up:.2f} s, plus slow start, a round trip"
        " and the server's work)"
    )
    lines.append(f"  4.7 MB download: {down:5.2f} s (on the wire alone {down_bytes / link.down:.2f} s, plus the same)")
    return lines


@dataclass
class Sides:
    repo: Path
    urls: list[str]
    one_url: str
    base_env: dict[str, str]
    gitops_script: str
    tmp: Path
    counter: int = 0

    def fresh_state(self) -> Path:
        self.counter += 1
        return self.tmp / f"state-{self.counter}"

    def gitops(self, state: Path, users: list[int], urls: list[str], what: str) -> Usage:
        write_manifest(self.repo, urls, [token_of(u) for u in users])
        env = {**self.base_env, "NO_COLOR": "1"}
        for n, user in enumerate(users):
            env[f"BENCH_TOKEN_{n}"] = token_of(user)
        argv = [self.gitops_script, "apply", "--yes", "--state-dir", str(state)]
        return measure(argv, env, self.repo, f"gitops ({what})")

    def peer(self, user: int, what: str) -> Usage:
        argv, env = peer_command(self.base_env, self.one_url, user, self.repo)
        return measure(argv, env, self.repo, f"peer ({what})")


def peer_command(base_env: dict[str, str], url: str, user: int, repo: Path) -> tuple[list[str], dict[str, str]]:
    """The peer's run (node-screeps-api's ``code.set`` of the whole repository, token mode) and its environment."""
    env = {
        **base_env,
        "NODE_PATH": str(PEER_PREFIX / "node_modules"),
        "SCREEPS_URL": url,
        "SCREEPS_TOKEN": token_of(user),
    }
    return ["node", str(PEER_SCRIPT), str(repo / "src"), BRANCH], env


def change_modules(src: Path, round_no: int) -> None:
    for i in range(CHANGED):
        path = src / f"group{i % 40:02d}" / f"module{i:04d}.js"
        path.write_text(path.read_text("utf-8") + f"// change {round_no}\n", "utf-8")


def run_round(sides: Sides, svc: list[Service], round_no: int, three: bool) -> dict[str, dict[str, Usage]]:
    """One round: every scenario, both sides (order rotating), each checked on the server."""
    gitops_user, peer_user = 2 * round_no + 1, 2 * round_no + 2
    out: dict[str, dict[str, Usage]] = {}
    order = ["gitops", "peer"] if round_no % 2 == 0 else ["peer", "gitops"]
    kept = sides.fresh_state()
    expected = expected_modules(sides.repo / "src")
    for scenario in SCENARIOS:
        if scenario == "20 changed":
            change_modules(sides.repo / "src", round_no)
            expected = expected_modules(sides.repo / "src")
        if scenario == "first deploy":
            svc[0].reset(gitops_user)
            svc[0].reset(peer_user)
        results: dict[str, Usage] = {}
        for side in order:
            if side == "peer":
                results[side] = sides.peer(peer_user, scenario)
                held = svc[0].held(peer_user)
            else:
                state = sides.fresh_state() if scenario == "no-op, fresh ledger" else kept
                results[side] = sides.gitops(state, [gitops_user], [sides.one_url], scenario)
                held = svc[0].held(gitops_user)
            if held != expected:
                raise BenchError(f"{side} ({scenario}): the server does not hold the repository's modules")
        out[scenario] = results
    if three:
        for service in svc:
            service.reset(gitops_user)
        subprocess.run(["git", "checkout", "-q", "--", "."], cwd=sides.repo, check=True)
        one = sides.gitops(sides.fresh_state(), [gitops_user], [sides.one_url], "three servers: one")
        for service in svc:
            service.reset(gitops_user)
        all_three = sides.gitops(sides.fresh_state(), [gitops_user] * len(sides.urls), sides.urls, "three servers")
        expected = expected_modules(sides.repo / "src")
        for service in svc:
            if service.held(gitops_user) != expected:
                raise BenchError("three servers: a server does not hold the repository's modules")
        out["three servers"] = {"gitops": all_three, "peer": one}
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=sides.repo, check=True)
    return out


def summarise(rounds: list[dict[str, dict[str, Usage]]]) -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, float]] = {}
    for scenario in rounds[0]:
        runs = [r[scenario] for r in rounds]
        row: dict[str, float] = {}
        for figure in ("wall", "cpu", "rss_mb"):
            mine = [getattr(run["gitops"], figure) for run in runs]
            theirs = [getattr(run["peer"], figure) for run in runs]
            row[f"gitops_{figure}"] = round(statistics.median(mine), 3)
            row[f"peer_{figure}"] = round(statistics.median(theirs), 3)
            row[f"ratio_{figure}"] = round(statistics.median(m / t for m, t in zip(mine, theirs, strict=True)), 3)
        rows[scenario] = row
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--modules", type=int, default=2000)
    parser.add_argument("--total-mb", type=float, default=4.58)
    parser.add_argument("--rtt-ms", type=float, default=80)
    parser.add_argument("--up-mbit", type=float, default=20)
    parser.add_argument("--down-mbit", type=float, default=100)
    parser.add_argument("--servers", type=int, default=3, help="servers of the multi-server case (1: leave it out)")
    parser.add_argument("--gitops", default=GITOPS, help="the gitops script measured")
    parser.add_argument("--tls", action="store_true", help="the stand-in behind TLS (https://), as the official server")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        install_peer()
        compile_gitops()
        rows, checks, ratio = run(args)
    except BenchError as exc:
        raise SystemExit(f"bench_network: {exc}") from None
    if args.json:
        print(json.dumps({"rows": rows, "proxy": checks, "compression": ratio}, indent=2))
        return
    print("\n".join(checks))
    level = COMPRESS_LEVEL
    print(f"repository: {args.modules} modules, {args.total_mb} MB; zlib level {level} makes it {ratio:.1f}x smaller")
    over = "https (TLS 1.3)" if args.tls else "http"
    print(f"gitops apply --yes vs node-screeps-api code.set (token) over {over}, {args.rounds} paired rounds (medians)")
    print(f"{'scenario':22} {'wall x':>7} {'CPU x':>6} {'mem x':>6} | {'gitops s':>8} {'peer s':>7}")
    for name, r in rows.items():
        label = name if name != "three servers" else "three servers (vs one)"
        print(
            f"{label:22} {r['ratio_wall']:7.2f} {r['ratio_cpu']:6.2f} {r['ratio_rss_mb']:6.2f} | "
            f"{r['gitops_wall']:8.3f} {r['peer_wall']:7.3f}"
        )


def run(args: argparse.Namespace) -> tuple[dict[str, dict[str, float]], list[str], float]:
    link = Link.of(args.rtt_ms, args.up_mbit, args.down_mbit)
    rounds_total = args.warmup + args.rounds
    with tempfile.TemporaryDirectory(prefix="gitops-bench-net-") as tmp_name, ExitStack() as stack:
        tmp = Path(tmp_name)
        repo = tmp / "repo"
        repo.mkdir()
        make_repo(repo, args.modules, int(args.total_mb * 1e6))
        raw = json.dumps(expected_modules(repo / "src")).encode()
        ratio = len(raw) / len(zlib.compress(raw, COMPRESS_LEVEL))
        count = max(1, args.servers)
        authority = Authority.make(tmp) if args.tls else None
        svc = stack.enter_context(services(tmp, count, 2 * rounds_total + 3, authority))
        checks = check_proxy(svc[0], link)
        urls = [stack.enter_context(proxy(s.url, link)) for s in svc]
        env = {**clean_env(), **(authority.env() if authority is not None else {})}
        sides = Sides(repo, urls, urls[0], env, args.gitops, tmp)
        rounds = []
        for n in range(rounds_total):
            result = run_round(sides, svc, n, args.servers > 1)
            if n >= args.warmup:
                rounds.append(result)
        return summarise(rounds), checks, ratio


if __name__ == "__main__":
    main()
