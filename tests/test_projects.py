"""How a directory's project is named: by its git root's path on one machine; by the
repository's `origin` remote on a team database, where every developer's clone sits elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_anchor.core.projects import BY_REMOTE, project_for_cwd, relative_once, remote_name, without_root


def clone(root: Path, origin: str | None) -> Path:
    """A repository's files as git leaves them (no git process needed to read them)."""
    (root / ".git").mkdir(parents=True)
    (root / "src").mkdir()
    config = '[core]\n\trepositoryformatversion = 0\n[remote "upstream"]\n\turl = git@elsewhere.example:fork/app.git\n'
    if origin is not None:
        config += f'[remote "origin"]\n\turl = {origin}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n'
    (root / ".git" / "config").write_text(config + '[branch "main"]\n\tremote = origin\n')
    return root


@pytest.mark.parametrize("origin", [
    "git@github.com:Acme/App.git",
    "https://alice:ghp_token@GitHub.com/Acme/App",
    "ssh://git@github.com:22/Acme/App.git",
    "https://github.com/Acme/App.git/",
])  # fmt: skip
def test_every_form_of_one_remote_names_the_same_project(tmp_path, origin):
    root = clone(tmp_path / "repo", origin)
    assert remote_name(str(root)) == "github.com/Acme/App"


def test_two_clones_in_different_directories_are_one_project_by_remote_and_two_by_path(tmp_path):
    alice = clone(tmp_path / "home" / "alice" / "src" / "app", "git@github.com:Acme/App.git")
    bob = clone(tmp_path / "Users" / "bob" / "work" / "app-main", "https://github.com/Acme/App")
    assert project_for_cwd(str(alice / "src"), BY_REMOTE) == project_for_cwd(str(bob), BY_REMOTE) == "github.com/Acme/App"
    assert project_for_cwd(str(alice / "src")) == str(alice.resolve())
    assert project_for_cwd(str(bob)) == str(bob.resolve())


def test_a_repository_without_origin_or_a_plain_directory_keeps_its_path(tmp_path):
    local = clone(tmp_path / "local", origin=None)
    plain = tmp_path / "plain"
    plain.mkdir()
    assert project_for_cwd(str(local), BY_REMOTE) == str(local.resolve())
    assert project_for_cwd(str(plain), BY_REMOTE) == str(plain.resolve())
    assert project_for_cwd("", BY_REMOTE) == ""


def test_a_worktree_reads_its_main_repositorys_remote(tmp_path):
    main = clone(tmp_path / "app", "git@gitlab.example:group/sub/app.git")
    git_dir = main / ".git" / "worktrees" / "feature"
    git_dir.mkdir(parents=True)
    (git_dir / "commondir").write_text("../..\n")
    worktree = tmp_path / "app-feature"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {git_dir}\n")
    assert project_for_cwd(str(worktree), BY_REMOTE) == "gitlab.example/group/sub/app"


def test_a_local_path_remote_is_named_by_that_path(tmp_path):
    root = clone(tmp_path / "repo", "/srv/git/app.git")
    assert remote_name(str(root)) == "/srv/git/app"


def test_a_windows_folder_is_one_project_whichever_case_its_drive_letter_comes_in():
    # Transcripts made on Windows, read here: the VS Code extension reports `c:\…`, a terminal `C:\…`.
    from_editor = project_for_cwd("c:\\Users\\fabien\\dev\\dashboard")
    from_terminal = project_for_cwd("C:\\Users\\fabien\\dev\\dashboard\\")
    assert from_editor == from_terminal == "C:\\Users\\fabien\\dev\\dashboard"
    assert project_for_cwd("\\\\server\\share\\app") == "\\\\server\\share\\app"  # a UNC path has no drive letter


def test_a_windows_projects_files_are_named_inside_it_in_any_case_and_with_either_separator():
    project = "C:\\Users\\fabien\\dev\\dashboard"
    changed = ["c:\\Users\\fabien\\dev\\dashboard\\.devcontainer\\setup.sh", "C:/Users/fabien/dev/dashboard/src/main.ts",
               "C:\\Users\\fabien\\.claude\\plans\\next.md", "C:\\Users\\fabien\\dev\\dashboard2\\notes.md"]
    assert relative_once(changed, project) == [".devcontainer\\setup.sh", "src/main.ts", changed[2], changed[3]]
    said = "Edited c:\\users\\fabien\\dev\\dashboard\\src\\main.ts, not C:\\Users\\fabien\\dev\\dashboard2\\notes.md"
    assert without_root(said, project) == "Edited src\\main.ts, not C:\\Users\\fabien\\dev\\dashboard2\\notes.md"
    assert without_root("Edited /home/me/shop/app/cart.py", "/home/me/shop") == "Edited app/cart.py"
