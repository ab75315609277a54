"""memory_anchor/worker/codebase: a memory's files against real git repositories made here with the real `git`.

Each test builds a small history (commits, renames, deletions, rewrites, branches) and checks
what `CodeRecorder` keeps when a record is written and what `FreshnessChecker` says of it later.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from memory_anchor.schemas.codebase import CodeRef
from tests.conftest import wait_for
from tests.gitrepo import GitRepo
from memory_anchor.worker.codebase import git
from memory_anchor.worker.codebase.freshness import FreshnessChecker, mark, repo_for
from memory_anchor.worker.codebase.refs import CodeRecorder, paths_in_text, stored_refs, to_data

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture(autouse=True)
def fresh_repo_cache():
    git._repos.clear()
    yield
    git._repos.clear()


def make_project(tmp_path) -> GitRepo:
    return GitRepo(tmp_path / "shop")


CART = "def total(items):\n    return sum(i.price for i in items)\n"
FIXED = "def total(items):\n    return sum(i.price * i.quantity for i in items)\n"


def observation(files_modified=(), files_read=()):
    return {"kind": "observation", "data": {"files_modified": list(files_modified), "files_read": list(files_read)}}


def edit_payload(root, path, old, new):
    return {"tool_name": "Edit", "cwd": str(root),
            "tool_input": {"file_path": str(root / path), "old_string": old, "new_string": new}}  # fmt: skip


def test_head_and_blob_ids_are_gits_own_without_a_process(tmp_path):
    p = make_project(tmp_path)
    p.write("app/cart.py", CART)
    sha = p.commit("cart")
    repo = git.find_repo(str(p.root / "app"))
    assert repo is not None and repo.root == str(p.root.resolve())
    assert git.head(repo) == sha
    assert git.blob_id(CART.encode()) == p.git("hash-object", "app/cart.py").strip()
    p.git("pack-refs", "--all")  # the branch's commit now only in packed-refs
    assert git.head(repo) == sha


def test_a_worktree_reads_its_own_head(tmp_path):
    p = make_project(tmp_path)
    p.write("a.txt", "one\n")
    p.commit("one")
    p.git("worktree", "add", "-q", "-b", "side", str(tmp_path / "side"))
    (tmp_path / "side" / "a.txt").write_text("two\n")
    subprocess.run(["git", "-C", str(tmp_path / "side"), "commit", "-qam", "two"], check=True)
    side = git.find_repo(str(tmp_path / "side"))
    assert git.head(side) == subprocess.run(["git", "-C", str(tmp_path / "side"), "rev-parse", "HEAD"],
                                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    assert git.head(side) != git.head(git.find_repo(str(p.root)))


def test_an_edit_keeps_the_file_blob_head_and_what_it_put_in(tmp_path):
    p = make_project(tmp_path)
    p.write("app/cart.py", CART)
    head = p.commit("cart")
    p.write("app/cart.py", FIXED)  # the Edit has happened when the drain sees it
    repo = repo_for(str(p.root))
    payload = edit_payload(p.root, "app/cart.py", "i.price", "i.price * i.quantity for i in items")
    refs, code_head = CodeRecorder().refs_for(observation(["app/cart.py"]), repo, payload=payload, cwd=str(p.root))
    assert code_head == head
    assert [(r.path, r.blob, r.head) for r in refs] == [("app/cart.py", git.blob_id(FIXED.encode()), head)]
    assert refs[0].inserted == "i.price * i.quantity for i in items"
    record = {"id": "r1", "kind": "observation", "data": to_data(refs, code_head)}
    assert stored_refs(record) == refs


def test_unchanged_changed_and_superseded(tmp_path):
    p = make_project(tmp_path)
    p.write("app/cart.py", FIXED)
    p.write("README.md", "shop\n")
    p.commit("fixed total")
    repo = repo_for(str(p.root))
    payload = edit_payload(p.root, "app/cart.py", "i.price", "i.price * i.quantity for i in items")
    recorder, checker = CodeRecorder(), FreshnessChecker()
    edit = {"id": "e", "kind": "observation", "data": to_data(*recorder.refs_for(observation(["app/cart.py"]), repo, payload=payload))}
    read = {"id": "r", "kind": "observation", "data": to_data(*recorder.refs_for(observation(files_read=["README.md"]), repo))}
    assert checker.check_record(edit, repo).state == "fresh"
    assert mark(checker.check_record(edit, repo)) == ""

    p.write("README.md", "shop\n\nRun it with make.\n")
    p.commit("docs one")
    p.write("README.md", "shop\n\nRun it with make run.\n")
    p.commit("docs two")
    changed = checker.check_record(read, repo)
    assert (changed.state, changed.commits, changed.detail) == ("changed", 2, "README.md changed since, 2 commits")
    p.write("README.md", "shop\n\nRun it with make start.\n")
    assert checker.check_record(read, repo).detail == "README.md changed since, 2 commits"  # not yet committed

    p.write("app/cart.py", FIXED + "\n\ndef count(items):\n    return len(items)\n")
    p.commit("count")
    assert checker.check_record(edit, repo).state == "changed"  # the fix is still there
    p.write("app/cart.py", "def total(items):\n    return sum(map(line_total, items))\n")
    p.commit("rewrite total")
    gone = checker.check_record(edit, repo)
    assert (gone.state, gone.detail) == ("superseded", "the edit to app/cart.py is no longer in the file")
    assert mark(gone) == " (superseded: the edit to app/cart.py is no longer in the file)"


def test_deleted_and_moved_by_a_rename_git_follows(tmp_path):
    p = make_project(tmp_path)
    p.write("config/settings.toml", "[db]\nurl = 'sqlite:///shop.db'\npool = 5\n")
    p.write("docs/guide.md", "# Guide\n\nHow the shop works, at length.\n" * 5)
    p.commit("start")
    repo = repo_for(str(p.root))
    recorder, checker = CodeRecorder(), FreshnessChecker()
    fact_cfg = {"id": "f1", "kind": "fact", "text": "The database settings live in config/settings.toml"}
    fact_doc = {"id": "f2", "kind": "fact", "text": "The guide is docs/guide.md."}
    for fact in (fact_cfg, fact_doc):
        fact["data"] = to_data(*recorder.refs_for(fact, repo))
    assert [r.path for r in stored_refs(fact_doc)] == ["docs/guide.md"]

    p.git("rm", "-q", "config/settings.toml")
    p.write("pyproject.toml", "[project]\nname = 'shop'\nversion = '2.0'\ndependencies = ['sqlalchemy']\n")
    p.commit("settings move into pyproject")
    (p.root / "handbook").mkdir()
    p.git("mv", "docs/guide.md", "handbook/guide.md")
    p.commit("docs become the handbook")
    p.write("handbook/guide.md", (p.root / "handbook/guide.md").read_text() + "More.\n")
    p.commit("edit the handbook")

    gone = checker.check_record(fact_cfg, repo)
    assert (gone.state, gone.detail, gone.commits) == ("deleted", "config/settings.toml deleted since", 1)
    moved = checker.check_record(fact_doc, repo)
    assert (moved.state, moved.new_path, moved.detail) == ("moved", "handbook/guide.md", "docs/guide.md moved to handbook/guide.md")


def test_changes_on_another_branch_count_only_what_reached_head(tmp_path):
    p = make_project(tmp_path)
    p.write("app/cart.py", CART)
    p.commit("cart")
    repo = repo_for(str(p.root))
    read = {"id": "r", "kind": "observation"}
    read["data"] = to_data(*CodeRecorder().refs_for(observation(files_read=["app/cart.py"]), repo))
    p.git("checkout", "-q", "-b", "feature")
    p.write("app/cart.py", FIXED)
    p.commit("fix on a branch")
    checker = FreshnessChecker()
    assert checker.check_record(read, repo).detail == "app/cart.py changed since, 1 commit"
    p.git("checkout", "-q", "main")
    assert checker.check_record(read, repo).state == "fresh"


def test_outside_git_or_without_git_nothing_is_marked(tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("hello there, notes\n")
    assert repo_for(str(plain)) is None
    assert CodeRecorder().refs_for(observation(files_read=["notes.txt"]), None) == ([], None)
    assert FreshnessChecker().check([CodeRef(path="notes.txt", blob="0" * 40)], None).state == "unknown"

    p = make_project(tmp_path)
    p.write("a.py", "print('a long enough line')\n")
    p.commit("a")
    repo = repo_for(str(p.root))
    record = {"id": "r", "kind": "observation", "data": to_data(*CodeRecorder().refs_for(observation(files_read=["a.py"]), repo))}
    (p.root / "a.py").unlink()
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
    assert FreshnessChecker().check_record(record, repo).state == "unknown"
    assert FreshnessChecker().check_records([record], repo) == {}


def test_a_record_from_before_keeps_no_refs_and_is_unknown(tmp_path):
    p = make_project(tmp_path)
    p.write("a.py", "x = 1\n")
    p.commit("a")
    assert FreshnessChecker().check_record({"id": "old", "kind": "summary", "data": {}}, repo_for(str(p.root))).state == "unknown"


def test_paths_in_prose():
    text = ("The config lives in config/settings.toml, see docs/guide.md. Version 1.2.3 at https://x.io/a.py; "
            "run ./manage.py or tests/unit")  # fmt: skip
    assert paths_in_text(text) == ["config/settings.toml", "docs/guide.md", "./manage.py", "tests/unit"]


def test_history_is_asked_once_per_base_and_head(tmp_path):
    p = make_project(tmp_path)
    for n in range(3):
        p.write(f"f{n}.py", f"value = {n} and some text\n")
    p.commit("files")
    repo = repo_for(str(p.root))
    recorder = CodeRecorder()
    records = [{"id": f"r{n}", "kind": "observation"} for n in range(3)]
    for n, r in enumerate(records):
        r["data"] = to_data(*recorder.refs_for(observation(files_read=[f"f{n}.py"]), repo))
    for n in range(3):
        p.write(f"f{n}.py", f"value = {n + 10} and some text\n")
    p.commit("change all")
    checker = FreshnessChecker()
    first = checker.check_records(records, repo)
    assert {k: v.state for k, v in first.items()} == {"r0": "changed", "r1": "changed", "r2": "changed"}
    assert checker.history.calls == 1
    checker.check_records(records, repo)
    assert checker.history.calls == 1


def test_an_unknown_base_commit_is_changed_without_a_count(tmp_path):
    p = make_project(tmp_path)
    p.write("a.py", "x = 'a long value'\n")
    p.commit("a")
    repo = repo_for(str(p.root))
    ref = CodeRef(path="a.py", blob=git.blob_id(b"x = 'an old value'\n"), head="f" * 40)
    found = FreshnessChecker().check([ref], repo)
    assert (found.state, found.commits, found.detail) == ("changed", None, "a.py changed since")
    assert os.path.exists(p.root / "a.py")


def test_a_commit_between_sessions_is_asked_of_git_before_the_next_briefing(tmp_path):
    """`Codebase.warm` (the worker runs it every few seconds) asks the history a check will need once
    HEAD moved, so the SessionStart after a commit starts no git process."""
    from memory_anchor.worker.codebase.service import Codebase

    p = make_project(tmp_path)
    p.write("app/cart.py", CART)
    p.commit("cart")
    codebase = Codebase()
    record = {"id": "r", "kind": "observation", "data": codebase.record_data(observation(files_read=["app/cart.py"]),
                                                                            project=str(p.root), cwd=str(p.root))}  # fmt: skip
    assert codebase.warm() == 1 and codebase.history.calls == 0  # HEAD is where the record was made: nothing to ask
    p.write("app/cart.py", FIXED)
    p.commit("fix")
    assert codebase.warm() == 1 and codebase.history.calls == 1
    assert codebase.warm() == 0  # HEAD has not moved since
    assert codebase.check([record], project=str(p.root))["r"].detail == "app/cart.py changed since, 1 commit"
    assert codebase.history.calls == 1


def test_a_move_found_by_a_read_that_outlasted_its_wait_is_reported_on_the_next_warm(tmp_path, monkeypatch):
    """On a busy machine the watch may stop waiting for a read of HEAD that then finishes: the move
    it found is still reported, so the commit's effects on memory are recorded (steps_done.py)."""
    import threading

    from memory_anchor.worker.codebase import service
    from memory_anchor.worker.codebase.bounded import Bounded

    p = make_project(tmp_path)
    p.write("app/cart.py", CART)
    p.commit("cart")
    codebase = service.Codebase()
    codebase.record_data(observation(files_read=["app/cart.py"]), project=str(p.root), cwd=str(p.root))
    read_done, real_head = threading.Event(), service.head

    def slow_head(repo):
        read_done.wait(5)
        return real_head(repo)

    codebase.reads = Bounded(timeout=0.05)
    monkeypatch.setattr(service, "head", slow_head)
    assert codebase.warm() == 0  # the read is still going when the watch stops waiting
    read_done.set()
    wait_for(lambda: not codebase.reads.stuck(str(p.root)), timeout=10, what="the slow read finished")
    assert codebase.warm() == 1
    assert codebase.warm() == 0  # reported once


def test_an_edit_keeps_the_lines_it_changed_not_the_lines_around_them(tmp_path):
    """Claude's Edit repeats unchanged lines to anchor itself; a later change of those is not a change of the fix."""
    from memory_anchor.worker.codebase.refs import edit_texts

    old = "def total(items):\n    return sum(item.price for item in items)\n# the cart's total\n"
    new = "def total(items):\n    return sum(item.price * item.quantity for item in items)\n# the cart's total\n"
    assert edit_texts("Edit", {"old_string": old, "new_string": new}) == ["return sum(item.price * item.quantity for item in items)"]
    assert edit_texts("Edit", {"old_string": "x = 1\n", "new_string": ""}) == []  # a deletion put nothing in
    assert edit_texts("Write", {"content": "a whole new file, long enough"}) == []
    assert edit_texts("MultiEdit", {"edits": [{"old_string": "a", "new_string": "timeout = 30  # seconds"}]}) == ["timeout = 30 # seconds"]

    p = make_project(tmp_path)
    p.write("app/cart.py", new)
    p.commit("fixed")
    repo = repo_for(str(p.root))
    payload = {"tool_name": "Edit", "tool_input": {"file_path": str(p.root / "app/cart.py"), "old_string": old, "new_string": new}}
    record = {"id": "e", "kind": "observation"}
    record["data"] = to_data(*CodeRecorder().refs_for(observation(["app/cart.py"]), repo, payload=payload))
    p.write("app/cart.py", new.replace("def total(items):", "def total(items: list) -> float:").replace("# the cart's", "# The cart's"))
    p.commit("types")
    assert FreshnessChecker().check_record(record, repo).state == "changed"  # the fix is still there


def test_a_project_that_becomes_a_repository_is_seen_without_a_restart(tmp_path):
    plain = tmp_path / "shop"
    plain.mkdir()
    (plain / "a.py").write_text("print('a long enough line')\n")
    assert git.find_repo(str(plain)) is None
    GitRepo(plain).commit("first")
    assert git.find_repo(str(plain)).root == str(plain.resolve())
