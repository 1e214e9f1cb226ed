"""``apply`` and the apply use case on their own: a fake writer (the writer protocol, no HTTP) fails at each step,
stale plans are told apart, kept modules are filled, nothing is written blind, and the budget is rechecked with the
downloads the checks need. No server, no subprocess."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from gitops.app.applying import ApplyReport, check_downloads, run_apply
from gitops.app.options import Options
from gitops.app.session import Session
from gitops.config.manifest import ActiveName, load_manifest
from gitops.core.apply import Outcome, apply_plan, verify_plan
from gitops.core.codeset import CodeSet, Module, WireModule
from gitops.core.endpoints import ACTIVATE, CLONE, DOWNLOAD, UPLOAD
from gitops.core.plan import BranchPlan, Payload, Plan, RemoteSeen, Seen, Step
from gitops.core.remote import BranchInfo, RemoteReader, RemoteWriter
from gitops.edges.clock import ManualClock
from gitops.errors import (
    ApplyError,
    AuthError,
    BudgetError,
    ExitCode,
    GitopsError,
    PlanFileError,
    ServiceError,
    StateFolderError,
    UsageError,
)
from tests.factories import write_manifest

SERVER_CODE = CodeSet.of([Module("main", text="// on the server"), Module("blob", binary=b"\0\1\2")])


class FakeServer:
    """One account in memory, implementing :class:`RemoteWriter`; the ``fail_at``-th write (from 1) raises
    ``error``. ``calls`` records every call in order."""

    def __init__(
        self, branches: Mapping[str, CodeSet] | None = None, *, fail_at: int = 0, error: GitopsError | None = None
    ) -> None:
        self.branches: dict[str, CodeSet] = dict(branches or {})
        self.fail_at = fail_at
        self.error = error or ServiceError("server 'local' answered 500 Internal Server Error.")
        self.calls: list[tuple[str, ...]] = []
        self.writes = 0

    def list_branches(self) -> list[BranchInfo]:
        self.calls.append(("list",))
        return [BranchInfo(name) for name in self.branches]

    def get_code(self, branch: str) -> CodeSet | None:
        self.calls.append(("get", branch))
        return self.branches.get(branch)

    def _write(self, *call: str) -> None:
        self.writes += 1
        if self.writes == self.fail_at:
            raise self.error
        self.calls.append(call)

    def upload_code(self, branch: str, modules: Mapping[str, WireModule], *, resend_if_lost: bool = True) -> None:
        self._write("upload", branch)
        self.branches[branch] = CodeSet.from_wire(dict(modules))

    def clone_branch(
        self, new_name: str, source: str | None = None, modules: Mapping[str, WireModule] | None = None
    ) -> None:
        self._write("clone", new_name)
        self.branches[new_name] = CodeSet.from_wire(dict(modules)) if modules else CodeSet.of([Module("main", text="")])

    def set_active_branch(self, branch: str, which: ActiveName) -> None:
        self._write("activate", branch, which)


def branch_plan(
    branch: str,
    *,
    create: bool = False,
    upload: bool = True,
    activate: tuple[ActiveName, ...] = (),
    how: Seen = "download",
    seen: CodeSet | None = SERVER_CODE,
) -> BranchPlan:
    steps = []
    if create:
        steps.append(Step(kind="clone-branch", request=CLONE))
    if upload:
        steps.append(Step(kind="upload", request=UPLOAD))
    steps.extend(Step(kind="activate", request=ACTIVATE, which=w) for w in activate)
    exists = None if how == "unknown" else not create
    return BranchPlan(
        server="local",
        branch=branch,
        action="create" if create else "update" if upload else "activate" if activate else "none",
        remote=RemoteSeen(
            how=how,
            learnt_at=None if how == "unknown" else 1.0,
            exists=exists,
            digest=seen.digest if seen is not None and exists else None,
            verified=how == "download",
            basis="download" if how == "download" else "unknown" if how == "unknown" else "ledger",
        ),
        modules=[],
        unchanged=0,
        activate=list(activate),
        module_count=1,
        upload_length=10,
        upload_digest=None,
        steps=steps,
    )


def make_plan(branches: list[BranchPlan], payloads: list[Payload] | None = None) -> Plan:
    if payloads is None:
        payloads = [
            Payload(server=b.server, branch=b.branch, modules={"main": "// new"})
            for b in branches
            if any(s.kind == "upload" for s in b.steps)
        ]
    return Plan(
        created_at=1.0,
        manifest_path="gitops.yaml",
        manifest_digest="0" * 64,
        source={"kind": "worktree"},
        refresh="auto",
        branches=branches,
        budget=[],
        payloads=payloads,
    )


def three_step_plan() -> Plan:
    """clone + upload + activate of 'new', then an upload of 'main': four steps."""
    return make_plan([branch_plan("new", create=True, activate=("world",), seen=None), branch_plan("main")])


# --- apply_plan: the steps, and what a failure reports -------------------------------------------------------------


def test_every_step_runs_in_order_and_is_reported_done() -> None:
    server = FakeServer({"main": SERVER_CODE})
    plan = three_step_plan()
    seen: list[Outcome] = []
    uploads = verify_plan(plan, {"local": server}, saved=False)
    outcomes = apply_plan(plan, {"local": server}, uploads, progress=seen.append)
    assert server.calls == [("clone", "new"), ("upload", "new"), ("activate", "new", "world"), ("upload", "main")]
    assert [o.status for o in outcomes] == ["done"] * 4
    assert seen == outcomes
    assert outcomes[0].line() == "done    local/new: clone-branch (POST /api/user/clone-branch)"


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_a_failure_at_step_k_lists_done_failed_and_not_run(k: int) -> None:
    server = FakeServer({"main": SERVER_CODE}, fail_at=k)
    plan = three_step_plan()
    seen: list[Outcome] = []
    with pytest.raises(ApplyError) as caught:
        apply_plan(plan, {"local": server}, verify_plan(plan, {"local": server}, saved=False), progress=seen.append)
    error = caught.value
    assert error.exit_code == ExitCode.FAILURE
    assert error.message.startswith(f"apply stopped at step {k} of 4 (")
    marks = [line.split()[0] for line in error.message.splitlines()[2:]]
    assert marks == ["done"] * (k - 1) + ["FAILED"] + ["not"] * (4 - k)
    assert "FAILED " in error.message
    assert "500 Internal Server Error" in error.message
    assert [o.status for o in seen] == ["done"] * (k - 1)  # progress sees only what was done
    assert len(server.calls) == k - 1  # nothing after the failure was attempted
    assert error.hint is not None
    assert "plans afresh and converges" in error.hint


@pytest.mark.parametrize(
    ("cause", "code"),
    [
        (BudgetError("rate limited", hint="Wait."), ExitCode.BUDGET),
        (AuthError("the token was refused", hint="Check it."), ExitCode.CREDENTIALS),
    ],
)
def test_budget_and_credential_failures_carry_their_exit_code(cause: GitopsError, code: ExitCode) -> None:
    server = FakeServer({"main": SERVER_CODE}, fail_at=2, error=cause)
    plan = three_step_plan()
    with pytest.raises(ApplyError) as caught:
        apply_plan(plan, {"local": server}, verify_plan(plan, {"local": server}, saved=False))
    assert caught.value.exit_code == code
    assert caught.value.__cause__ is cause
    assert caught.value.hint is not None
    assert caught.value.hint.startswith(f"{cause.hint}\n")


# --- verify_plan: stale plans, kept modules, never blind ------------------------------------------------------------


def test_a_stale_saved_plan_is_a_plan_file_error() -> None:
    server = FakeServer({"main": CodeSet.of([Module("main", text="// changed since")])})
    plan = make_plan([branch_plan("main")])
    with pytest.raises(PlanFileError) as caught:
        verify_plan(plan, {"local": server}, saved=True)
    assert caught.value.exit_code == ExitCode.PLAN_FILE
    assert "plan is stale" in caught.value.message
    assert "local/main: the branch's modules changed on the server after the plan was made" in caught.value.message
    assert server.writes == 0


def test_a_branch_deleted_since_the_saved_plan_makes_it_stale() -> None:
    plan = make_plan([branch_plan("main")])
    with pytest.raises(PlanFileError, match="local/main: the branch no longer exists on the server"):
        verify_plan(plan, {"local": FakeServer({})}, saved=True)


def test_a_branch_created_since_the_saved_plan_makes_it_stale() -> None:
    plan = make_plan([branch_plan("main", create=True, seen=None)])
    with pytest.raises(PlanFileError, match="local/main: the branch was created on the server after the plan"):
        verify_plan(plan, {"local": FakeServer({"main": SERVER_CODE})}, saved=True)


def test_a_saved_plan_whose_upload_is_not_what_it_shows_is_refused() -> None:
    """The server holds what the plan saw, but the payload's 'main' differs from it while the plan shows no change
    to 'main' (the file was edited): the download that checks staleness catches it, before any write."""
    server = FakeServer({"main": SERVER_CODE})
    plan = make_plan([branch_plan("main")])
    with pytest.raises(PlanFileError) as caught:
        verify_plan(plan, {"local": server}, saved=True)
    assert caught.value.message.startswith("plan file was edited after it was made")
    assert "local/main: module 'main' is shown as unchanged, but differs from the server's" in caught.value.message
    assert server.writes == 0


def test_an_unsaved_plan_that_went_stale_is_a_service_error() -> None:
    """A fresh plan checks only branches whose kept modules it must download; a change there is the server moving
    under the run (exit 1, run again), not a stale file (exit 8)."""
    server = FakeServer({"main": CodeSet.of([Module("main", text="// changed since")])})
    payload = Payload(server="local", branch="main", modules={"main": "// new"}, missing_kept=["blob"])
    plan = make_plan([branch_plan("main")], [payload])
    with pytest.raises(ServiceError) as caught:
        verify_plan(plan, {"local": server}, saved=False)
    assert not isinstance(caught.value, PlanFileError)
    assert caught.value.exit_code == ExitCode.FAILURE
    assert "the server changed while the plan was being made" in caught.value.message


def test_an_unsaved_plan_without_kept_modules_reads_nothing() -> None:
    server = FakeServer({"main": SERVER_CODE})
    plan = make_plan([branch_plan("main")])
    assert verify_plan(plan, {"local": server}, saved=False) == {("local", "main"): {"main": "// new"}}
    assert server.calls == []


def test_kept_modules_are_filled_from_the_download() -> None:
    server = FakeServer({"main": SERVER_CODE})
    payload = Payload(server="local", branch="main", modules={"main": "// new"}, missing_kept=["blob", "gone"])
    plan = make_plan([branch_plan("main")], [payload])
    uploads = verify_plan(plan, {"local": server}, saved=False)
    # 'gone' is no longer on the server: nothing to keep of it.
    assert uploads == {("local", "main"): {"blob": {"binary": "AAEC"}, "main": "// new"}}
    assert server.calls == [("get", "main")]


@pytest.mark.parametrize(("saved", "error"), [(True, PlanFileError), (False, UsageError)])
def test_nothing_is_written_blind(saved: bool, error: type[GitopsError]) -> None:
    server = FakeServer({"main": SERVER_CODE})
    plan = make_plan([branch_plan("main", create=True, how="unknown", seen=None)])
    with pytest.raises(error, match="without any knowledge of it on the server"):
        verify_plan(plan, {"local": server}, saved=saved)
    assert server.calls == []


# --- the use case: budget recheck, confirmation, one report ---------------------------------------------------------


class FakeSession(Session):
    """A real session (manifest, ledger files, budget) whose servers are :class:`FakeServer` s."""

    def __init__(self, folder: Path, server: FakeServer, clock: ManualClock, state_dir: Path | None = None) -> None:
        manifest = write_manifest(folder, servers={"local": {"url": "http://127.0.0.1:9", "token_env": "TOKEN"}})
        options = Options(
            manifest=manifest,
            env={"TOKEN": "t" * 32},
            refresh="never",  # no token query: there is no server
            state_dir=state_dir or folder / "state",
            clock=clock,
        )
        super().__init__(load_manifest(manifest), options)
        self.server = server
        self.saves = 0

    def reader(self, server: str) -> RemoteReader:
        return self.server

    def writer(self, server: str) -> RemoteWriter:
        return self.server

    def save(self, server: str | None = None) -> None:
        self.saves += 1
        super().save()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def session(tmp_path: Path, clock: ManualClock) -> Iterator[FakeSession]:
    s = FakeSession(tmp_path, FakeServer({"main": SERVER_CODE}), clock)
    try:
        yield s
    finally:
        s.close()


def downloads_left(s: FakeSession, left: int) -> None:
    """What the ledger learnt from the last download's headers: ``left`` of 60 remain this hour."""
    ledger = s.ledger("local")
    ledger.record_sent(DOWNLOAD)
    reset = str(int(s.options.clock.now()) + 600)
    headers = {"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": str(left), "X-RateLimit-Reset": reset}
    ledger.record_response(DOWNLOAD, 200, headers)


def kept_plan() -> Plan:
    payload = Payload(server="local", branch="main", modules={"main": "// new"}, missing_kept=["blob"])
    return make_plan([branch_plan("main")], [payload])


def test_check_downloads_counts_saved_plans_and_kept_modules() -> None:
    plain = make_plan([branch_plan("main")])
    assert check_downloads(plain, saved=False) == {}
    assert check_downloads(plain, saved=True) == {"local": {DOWNLOAD: 1}}
    assert check_downloads(kept_plan(), saved=False) == {"local": {DOWNLOAD: 1}}
    assert check_downloads(kept_plan(), saved=True) == {"local": {DOWNLOAD: 1}}  # one download serves both


@pytest.mark.parametrize(("plan", "saved"), [(kept_plan(), False), (make_plan([branch_plan("main")]), True)])
def test_the_check_download_that_does_not_fit_refuses_before_any_request(
    session: FakeSession, plan: Plan, saved: bool
) -> None:
    downloads_left(session, 0)
    with pytest.raises(BudgetError) as caught:
        run_apply(session, plan, saved=saved)
    assert caught.value.exit_code == ExitCode.BUDGET
    assert "the plan needs 1 x GET /api/user/code but 0 of 60 per hour remain" in caught.value.message
    assert "local" in caught.value.unlock_links
    assert session.server.calls == []


def test_the_same_plan_applies_when_the_download_fits(session: FakeSession) -> None:
    downloads_left(session, 1)
    seen: list[Outcome] = []
    report = run_apply(session, kept_plan(), saved=False, progress=seen.append)
    assert session.server.calls == [("get", "main"), ("upload", "main")]
    assert "blob" in session.server.branches["main"]
    assert report.applied
    assert not report.cancelled
    assert report.outcomes == seen
    assert report.lines() == [
        "done    local/main: upload (POST /api/user/code)",
        "Applied: 1 branch(es) changed with 1 upload(s); the servers now hold what the plan holds.",
    ]
    # One save after the verification download, one per step: what a kill -9 can lose is the step in progress.
    assert session.saves == 2


def test_a_declined_confirmation_writes_nothing(session: FakeSession) -> None:
    report = run_apply(session, make_plan([branch_plan("main")]), saved=False, confirm=lambda: False)
    assert report.cancelled
    assert not report.applied
    assert report.lines() == []
    assert session.server.calls == []


def test_a_plan_without_changes_has_nothing_to_apply(session: FakeSession) -> None:
    report = run_apply(session, make_plan([branch_plan("main", upload=False)]), saved=False)
    assert report == ApplyReport(report.plan)
    assert report.lines() == ["Nothing to apply."]
    assert session.server.calls == []


def test_a_failed_step_is_saved_in_the_ledger_up_to_the_step_before(session: FakeSession) -> None:
    session.server.fail_at = 2
    plan = make_plan([branch_plan("main"), branch_plan("other", create=True, upload=False, seen=None)])
    with pytest.raises(ApplyError):
        run_apply(session, plan, saved=False)
    assert session.saves == 2  # after the (empty) verification, after the upload; the failed clone is not a step


def test_a_ledger_that_cannot_be_written_refuses_the_apply_before_any_write(tmp_path: Path, clock: ManualClock) -> None:
    # Issue 46: a deploy the state folder cannot record (its ledger, the code kept for rollback) is not made; reading
    # without it stays a warning (plan, status), but apply refuses before its first write.
    (tmp_path / "file").write_text("not a folder", encoding="utf-8")
    server = FakeServer({"main": SERVER_CODE})
    s = FakeSession(tmp_path, server, clock, state_dir=tmp_path / "file" / "state")
    try:
        downloads_left(s, 5)  # the ledger learnt something: there is something to save
        with pytest.raises(StateFolderError, match=r"the state folder cannot be written: .*Not a directory") as refused:
            run_apply(s, make_plan([branch_plan("main")]), saved=False)
        assert refused.value.exit_code == ExitCode.FAILURE
        assert "nothing was sent" in refused.value.message
        assert server.writes == 0
        locked, read, *_ = s.warnings()  # what reading said, once each
        assert "cannot be locked (Not a directory); a run at the same time" in locked
        assert "cannot be read (Not a directory); starting without it" in read
    finally:
        s.close()
