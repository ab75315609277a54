"""Two developers share one memory: their workers on one team database, their clones of one
repository in different directories. What Alice's session settles is in Bob's next briefing,
through the real hooks; what is raw capture (her prompts) stays hers."""

from __future__ import annotations

import json

import pytest

from tests.conftest import start_worker, wait_for, worker_env
from tests.postgres import init_team_database, member_url
from tests.test_hooks import base_payload, hook_env, run_hook
from tests.test_projects import clone

RULE = "From now on we always run the linter with --strict before committing."
PRIVATE = "what does the ZEBRA-42 flag in the billing code do?"
OUTCOME = ("Fixed the flaky checkout test. Root cause: the cart cache was not cleared between tests. "
           "Next step: add a cache-reset fixture.")


@pytest.fixture
def two_developers(tmp_path, postgres_cluster):
    """Alice's and Bob's workers on one team database, each as their own member role."""
    name = init_team_database(postgres_cluster)
    workers = {}
    try:
        for developer in ("alice", "bob"):
            data = tmp_path / developer / "data"
            url = member_url(postgres_cluster, name, developer)
            workers[developer] = start_worker(data, env=worker_env(data, MEMORY_ANCHOR_STORAGE_URL=url))
        yield workers
    finally:
        for worker in workers.values():
            worker.stop()
        postgres_cluster.drop_database(name)


def briefing(worker, session_id: str, cwd: str) -> str:
    """What SessionStart injects for this developer, read through the real hook."""
    result = run_hook("SessionStart", base_payload("SessionStart", session_id, cwd, source="startup"),
                      hook_env(worker.data_dir))  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"] if result.stdout.strip() else ""


def test_a_rule_alice_states_is_in_bobs_briefing_from_his_own_clone(tmp_path, two_developers):
    alice_clone = clone(tmp_path / "alice" / "src" / "shop", "git@github.com:Acme/Shop.git")
    bob_clone = clone(tmp_path / "bob" / "work" / "shop-main", "https://github.com/Acme/Shop.git")
    alice, bob = two_developers["alice"], two_developers["bob"]
    for worker in (alice, bob):  # each worker tells its hooks to name projects by remote
        assert json.loads((worker.data_dir / "worker.json").read_text())["project_names"] == "remote"

    env = hook_env(alice.data_dir)
    briefing(alice, "alice-1", str(alice_clone))
    for prompt in (PRIVATE, RULE):
        payload = base_payload("UserPromptSubmit", "alice-1", str(alice_clone / "src"), prompt=prompt)
        assert run_hook("UserPromptSubmit", payload, env).returncode == 0
    stop = base_payload("Stop", "alice-1", str(alice_clone), stop_hook_active=False,
                        last_assistant_message=OUTCOME)  # fmt: skip
    assert run_hook("Stop", stop, env).returncode == 0

    # The outcome's step and its root cause are written one after the other (the fact after its
    # duplicate check), so Bob's briefing waits for both.
    def settled() -> bool:
        context = briefing(bob, "bob-1", str(bob_clone))
        return "cache-reset" in context and "the cart cache was not cleared" in context

    wait_for(settled, timeout=60, what="Alice's session outcome and its root cause in Bob's briefing")
    context = briefing(bob, "bob-2", str(bob_clone))
    assert "github.com/Acme/Shop" in context
    assert "--strict" in context  # her rule
    assert "the cart cache was not cleared" in context  # her session's root cause
    assert "ZEBRA-42" not in context  # her prompt is raw capture: private to her, not quoted by her summary

    # Alice sees her own prompt; Bob, asking the store directly, does not.
    def timeline(worker) -> str:
        return json.dumps(worker.get("/api/v1/timeline?project=github.com/Acme/Shop&limit=50")["results"])

    wait_for(lambda: "ZEBRA-42" in timeline(alice), timeout=60, what="Alice's prompt in her timeline")
    assert "--strict" in timeline(bob) and "ZEBRA-42" not in timeline(bob)
