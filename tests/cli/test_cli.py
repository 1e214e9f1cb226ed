"""The CLI's own rules, run in-process through ``gitops.cli.run``: environment switches, credentials that cannot be
sent, and that every failure is one ``Error:`` line with a hint and no secret."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from gitops.cli import _short_lived, run
from gitops.edges.clock import ManualClock
from gitops.standin.testing import ALICE, ALICE_EMAIL, ALICE_PASSWORD, StandIn
from tests.factories import make_repo, write_manifest
from tests.project import Project, one_branch_project


@pytest.fixture
def project(
    tmp_path: Path, standin: StandIn, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Project:
    return one_branch_project(tmp_path, standin, capsys, monkeypatch)


# --- credentials that cannot travel in a header ------------------------------------------------------------


@pytest.mark.parametrize(
    ("token", "problem"),
    [
        ("canaryCR0123456789\rabcdef0123456789", "contains a line break (carriage return or newline)"),
        (
            "canaryUML0123456789\u00fcabcdef012345",
            "contains a non-ASCII character (only letters, digits and ASCII punctuation can be sent)",
        ),
    ],
)
@pytest.mark.parametrize("command", ["plan", "apply"])
def test_a_token_that_cannot_be_sent_stops_with_exit_7_and_is_never_shown(
    project: Project, standin: StandIn, monkeypatch: pytest.MonkeyPatch, token: str, problem: str, command: str
) -> None:
    monkeypatch.setenv("SCREEPS_TOKEN", token)
    result = project.gitops(command, *(["--yes"] if command == "apply" else []))
    assert result.code == 7
    assert result.err == (
        f"Error: the token for server 'local' in the environment variable SCREEPS_TOKEN {problem}; it is not used.\n"
        "Copy the token again from the account settings (Account, Auth tokens) and set it without quotes, spaces or "
        "line endings (a file written on Windows ends its lines with a carriage return).\n"
    )
    for part in (token[:12], token[-12:], repr(token)[1:-1], repr(token.encode())[2:-1]):
        assert part not in result.out + result.err
    assert standin.count("GET /api/user/code") == standin.count("GET /api/user/branches") == 0


# --- odd numbers from the server -----------------------------------------------------------------------------


def test_a_429_asking_for_an_absurd_wait_is_exit_3_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "bot", {"src/main.js": "module.exports.loop = () => {};\n"})
    manifest = write_manifest(repo)
    monkeypatch.setenv("SCREEPS_TOKEN", "tok-absurd-wait-0123456789abcdef")

    def server(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/user/branches":
            return httpx.Response(200, json={"ok": 1, "list": [{"branch": "main"}]})
        return httpx.Response(429, text="Rate limit exceeded, retry after 99999999999999999999999ms")

    code = run(
        ["plan", "-m", str(manifest), "--state-dir", str(tmp_path / "state"), "--max-wait", "inf"],
        clock=ManualClock(1_800_000_000.0),
        transport=httpx.MockTransport(server),
    )
    err = capsys.readouterr().err
    assert code == 3
    assert err.startswith(
        "Error: server 'local' refused GET /api/user/code: rate limited by the limit of 60 per hour for "
        "GET /api/user/code; it resets at 2027-01-16 08:00:00 UTC or later (the server asked for a wait of more "
        "than a day, longer than --max-wait (more than a day)).\n"
    )
    assert "Traceback" not in err


# --- NO_COLOR and GITOPS_DEBUG: any non-empty value, never a click boolean ---------------------------------


def test_no_color_takes_any_non_empty_value(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    # no-color.org: "when present and not an empty string", whatever the value.
    for value in ("x", "true", "0", ""):
        monkeypatch.setenv("NO_COLOR", value)
        result = project.plan("--refresh=never")
        assert result.code == 2, result.err


def at_terminal(project: Project, env: dict[str, str]) -> tuple[int, str]:
    """``gitops plan --refresh=never`` with stdout on a pseudo-terminal (where colour is on by default)."""
    primary, secondary = pty.openpty()
    argv = [sys.executable, "-m", "gitops", "plan", "--refresh=never", "-m", str(project.root / "gitops.yaml")]
    argv += ["--state-dir", str(project.state_dir)]
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "GITOPS_DEBUG")}
    with subprocess.Popen(
        argv, stdout=secondary, stderr=subprocess.PIPE, env={**base, "TERM": "xterm", **env}, cwd=project.root
    ) as proc:
        os.close(secondary)
        output = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the command closed its end
                break
            if not chunk:
                break
            output += chunk
        os.close(primary)
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) in (0, 2), err
    return proc.returncode, output.decode("utf-8", "replace")


def test_no_color_x_turns_colour_off_at_a_terminal(project: Project) -> None:
    assert "\x1b[" in at_terminal(project, {})[1]
    code, out = at_terminal(project, {"NO_COLOR": "x"})
    assert code == 2
    assert "local/main: create" in out
    assert "\x1b[" not in out


@pytest.mark.parametrize("value", ["x", "1", "true", "yes"])
def test_gitops_debug_takes_any_value_that_means_on(
    project: Project, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("GITOPS_DEBUG", value)
    result = project.plan()
    assert result.code == 2, result.err
    assert "debug: GET " in result.err
    assert "/api/user/branches -> 200" in result.err


@pytest.mark.parametrize("value", ["", "0", "false", "no", "off", "OFF"])
def test_gitops_debug_off(project: Project, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("GITOPS_DEBUG", value)
    result = project.plan()
    assert result.code == 2, result.err
    assert "debug:" not in result.err


def test_gitops_debug_x_shows_the_traceback_of_an_internal_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "bot", {"src/main.js": "module.exports.loop = () => {};\n"})
    manifest = write_manifest(repo)
    monkeypatch.setenv("SCREEPS_TOKEN", "tok-internal-error-0123456789abcd")
    monkeypatch.setenv("GITOPS_DEBUG", "x")

    def broken(request: httpx.Request) -> httpx.Response:
        raise RuntimeError(f"a bug that quotes {request.headers['X-Token']}")

    code = run(
        ["plan", "-m", str(manifest), "--state-dir", str(tmp_path / "state")],
        clock=ManualClock(1_800_000_000.0),
        transport=httpx.MockTransport(broken),
    )
    err = capsys.readouterr().err
    assert code == 70
    assert "Traceback (most recent call last):" in err  # --debug's traceback, redacted
    assert "tok-internal-error-0123456789abcd" not in err
    last = err[err.rindex("\nError: ") + 1 :]
    # The innermost frame of the package: the head start's claim, in front of the test's transport (issue 47).
    assert last.startswith("Error: internal error (RuntimeError in gitops/edges/service/transport.py line ")
    assert last.endswith(").\nThis is a bug in screeps-gitops; run again with --debug and report the output.\n")
    assert "a bug that quotes" not in last


# --- password logins need screepsmod-auth's sign-in --------------------------------------------------------


def test_a_password_login_without_a_sign_in_is_exit_7(
    project: Project, standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stand-in has no /api/auth/signin. HTTP Basic is no fallback: a real private server takes it only on
    # POST /api/user/code, so nothing could be planned with it.
    servers = {"local": {"url": standin.url, "username_env": "U", "password_env": "P"}}
    project.manifest([{"branch": "main", "root": "src"}], servers=servers)
    monkeypatch.setenv("U", ALICE_EMAIL)
    monkeypatch.setenv("P", ALICE_PASSWORD)
    for command in (["plan"], ["apply", "--yes"]):
        result = project.gitops(*command)
        assert result.code == 7
        assert result.err == (
            "Error: server 'local' has no /api/auth/signin (404), so the user name and password from the "
            "environment variables U and P cannot be used: a password login needs screepsmod-auth's sign-in.\n"
            "Install screepsmod-auth on the private server (see gitops help private-server); on an official server use "
            "a persistent token (token_env) instead.\n"
        )
    assert standin.count("GET /api/user/code") == standin.count("POST /api/user/code") == 0


def test_a_command_in_its_own_process_ends_with_all_its_output_and_its_exit_code(project: Project) -> None:
    """Short commands end with ``os._exit`` once their output is flushed (``gitops.cli._end_now``): what they
    printed reaches the pipe whole, on both streams, and the exit code is the command's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITOPS_") or k == "GITOPS_CACHE_DIR"}

    def gitops(*args: str) -> subprocess.CompletedProcess[bytes]:
        argv = [sys.executable, "-m", "gitops", *args]
        return subprocess.run(argv, check=False, capture_output=True, env={**env, "NO_COLOR": "1"}, timeout=60)

    schema = gitops("schema")
    assert schema.returncode == 0, schema.stderr
    assert schema.stdout == (Path(__file__).resolve().parents[2] / "schemas/gitops.schema.json").read_bytes()
    manifest = str(project.root / "gitops.yaml")
    plan = gitops("plan", "--refresh=never", "-m", manifest, "--state-dir", str(project.state_dir))
    assert plan.returncode == 2, plan.stderr
    assert plan.stdout.decode().startswith("Plan from working tree, manifest ")
    assert plan.stdout.decode().endswith(
        "(1 branch(es) not checked on the server). 1 new branch(es) get their modules by clone-branch, not an upload.\n"
    )
    (project.root / "gitops.yaml").write_text("version: 1\nservers: {}\nbranches: []\nsurprise: 1\n")
    bad = gitops("validate", "-m", manifest)
    assert bad.returncode == 5
    assert bad.stderr.decode().startswith("Error: ")
    assert "surprise" in bad.stderr.decode()


@pytest.mark.parametrize(
    ("argv", "short"),
    [
        (["apply", "--yes"], True),
        (["--debug", "plan", "--json"], True),
        (["serve", "--port", "0"], False),
        (["watch", "--server", "home"], False),
        (["--debug", "watch"], False),
    ],
)
def test_only_commands_that_end_on_their_own_run_without_the_cycle_collector(argv: list[str], short: bool) -> None:
    """``gitops.cli.main`` turns the cycle collector off and ends with ``os._exit`` for short commands only: a
    watch runs for hours, and the garbage cycles of its retried errors must be collected."""
    assert _short_lived(argv) is short


def test_bare_gitops_prints_the_help_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert run([]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("Usage: gitops [OPTIONS] COMMAND [ARGS]...")
    assert "plan" in out
    assert err == ""


def test_a_mistyped_command_gets_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["plna"]) == 4
    assert "No such command 'plna'. Did you mean 'plan'?" in capsys.readouterr().err
    assert run(["zzzzzz"]) == 4
    assert "Did you mean" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("word", "ours"),
    [("deploy", "apply"), ("sync", "apply"), ("upload", "apply"), ("diff", "plan"), ("logs", "console")],
)
def test_another_tools_word_is_answered_with_ours(capsys: pytest.CaptureFixture[str], word: str, ours: str) -> None:
    # Terraform, Argo CD, kubectl and the screeps-api CLI: 'deploy' is not 'demo', nor 'diff' 'drift'.
    assert run([word]) == 4
    err = capsys.readouterr().err
    assert f"Error: No such command '{word}'. Did you mean '{ours}'?" in err
    assert f"here it is 'gitops {ours}'" in err


def test_debug_is_taken_after_the_command_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["validate", "--debug", "-m", str(tmp_path / "none.yaml")]) == 5
    err = capsys.readouterr().err
    assert "No such option" not in err
    assert "not found" in err


def test_the_tool_is_also_installed_as_screeps_gitops() -> None:
    from importlib.metadata import entry_points

    scripts = {ep.name: ep.value for ep in entry_points(group="console_scripts")}
    assert scripts["screeps-gitops"] == scripts["gitops"] == "gitops.cli:main"


def test_apply_json_is_one_document_on_stdout(project: Project) -> None:
    import json

    result = project.apply("--yes", "--json")
    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert document["format_version"] == 1
    assert document["applied"] is True
    assert [o["status"] for o in document["outcomes"]] == ["done"] * len(document["outcomes"])
    assert document["outcomes"]
    assert document["plan"]["has_changes"] is True
    assert "Applied:" in result.err  # the person's lines go to stderr


def test_with_json_an_error_is_a_json_object_on_stdout_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert run(["plan", "--json", "-m", str(tmp_path / "missing.yaml")]) == 5
    out, err = capsys.readouterr()
    assert err.startswith("Error: manifest ")
    document = json.loads(out)
    assert document["format_version"] == 1
    assert document["error"]["exit_code"] == 5
    assert "not found" in document["error"]["message"]
    assert run(["plan", "-m", str(tmp_path / "missing.yaml")]) == 5
    assert capsys.readouterr().out == ""  # without --json, stdout stays empty


def test_shell_completion_offers_the_manifests_servers_and_branches(tmp_path: Path) -> None:
    (tmp_path / "gitops.yaml").write_text(
        "version: 1\nservers:\n  alpha: {url: 'http://127.0.0.1:1', token_env: T}\n"
        "  beta: {url: 'http://127.0.0.1:2', token_env: T}\n"
        "branches:\n  - {server: alpha, branch: main, root: src}\n  - {server: beta, branch: sim, root: src}\n",
        encoding="utf-8",
    )

    def complete(words: str) -> list[str]:
        env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(len(words.split(" ")) - 1)}
        env["_GITOPS_COMPLETE"] = "bash_complete"
        done = subprocess.run(
            [sys.executable, "-m", "gitops"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return [line.split(",", 1)[1] for line in done.stdout.splitlines() if "," in line]

    assert complete("gitops plan --server ") == ["alpha", "beta"]
    assert complete("gitops apply --branch s") == ["sim"]
    assert complete("gitops apply --branch b") == ["beta/sim"]
    assert complete("gitops pl") == ["plan"]


def test_shared_options_have_one_metavar_and_no_color_is_taken_by_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import re

    from gitops.cli import COMMANDS

    expected = {"--branch": "NAME", "--state-dir": "DIR", "--max-wait": "SECONDS", "--ref": "REF", "--manifest": "FILE"}
    seen: dict[str, set[str]] = {}
    for command in COMMANDS:
        capsys.readouterr()
        assert run([command, "--help"]) == 0
        for option, metavar in re.findall(
            r"^\s+(?:-\w, )?(--[\w-]+) ([A-Z]+|\[[^\]]+\])(?:\s|$)", capsys.readouterr().out, re.M
        ):
            seen.setdefault(option, set()).add(metavar)
    for option, metavar in expected.items():
        assert seen.get(option, {metavar}) == {metavar}, option
    assert seen["--server"] <= {"NAME", "URL"}  # init's --server is an address, the others' a manifest key
    capsys.readouterr()
    # --no-color means something only where colour is drawn, and is accepted after any command all the same.
    assert run(["schema", "--no-color"]) == 0


def test_apply_into_a_closed_pipe_still_deploys_and_says_so(project: Project, standin: StandIn) -> None:
    """Issue 41: ``gitops apply --yes | head -1`` exited 1 with no message, whether or not the deploy happened
    (click exits at the first write into a closed pipe). Here the reader is gone before the first write: the apply
    runs to its end, says on standard error that standard output was closed, prints the rest there, and exits with
    the apply's own code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITOPS_") or k == "GITOPS_CACHE_DIR"}
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "gitops",
                "apply",
                "--yes",
                "-m",
                str(project.root / "gitops.yaml"),
                "--state-dir",
                str(project.state_dir),
            ],
            check=False,
            stdout=write_end,
            stderr=subprocess.PIPE,
            env={**env, "NO_COLOR": "1"},
            timeout=60,
        )
    finally:
        os.close(write_end)
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert "standard output was closed" in err
    assert "Applied: 1 branch(es) changed" in err
    assert standin.branch_modules(ALICE, "main") is not None


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["apply", "-auto-approve"], "here it is --yes"),
        (["apply", "--auto-approve"], "here it is --yes"),
        (["plan", "-out=plan.json"], "--out FILE (gitops plan --out plan.json"),
        (["plan", "-o", "json"], "--format json, or --json"),
        (["plan", "--dry-run"], "a plan is the dry run"),
        (["plan", "-chdir=deploy"], "-m/--manifest"),
    ],
)
def test_flags_from_other_deploy_tools_get_the_flag_to_use(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41: Terraform's and kubectl's habits got a bare "No such option"."""
    assert run(argv) == 4
    err = capsys.readouterr().err
    assert "No such option" in err
    assert "is another tool's flag" in err
    assert says in err
    assert "Traceback" not in err


def test_an_unknown_flag_of_no_other_tool_keeps_the_plain_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["plan", "--frobnicate"]) == 4
    err = capsys.readouterr().err
    assert "No such option '--frobnicate'" in err
    assert "another tool" not in err
