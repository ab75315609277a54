"""The files a Bash tool use changed: what its command line and its output say, and nothing guessed.

Agents write files through Bash as often as through Edit and Write (`cat > f <<EOF`, `sed -i`,
a generator, `git apply`), and a session's "changed:" line, its search index line and recall
must name those files. What memory asserts must be true, so a file counts only when the command
line writes it or a tool's output says in its own words that it wrote it. The outputs here were
printed by the real tools: run in the test (git, GNU patch, unzip), recorded in the django
sessions of shared/bench/replay (Django's makemigrations, pip, the test runner) or from a
scratch run (black, isort, wget).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from memory_anchor.worker.pipeline.compress import local
from memory_anchor.worker.pipeline.compress.shell_files import files_command_wrote, files_in_command, files_output_says_written


@pytest.mark.parametrize(
    "command,read,modified",
    [
        # a heredoc's body is text: its `rm` and `>` are no commands
        ("cat > notes/plan.md <<'EOF'\n# Plan\nrm -rf build/old.py\necho x > foo.txt\nEOF", [], ["notes/plan.md"]),
        ("cat <<EOF > setup.cfg\n[flake8]\nmax-line-length = 100\nEOF\ngit add setup.cfg", [], ["setup.cfg"]),
        ("cat >> .env <<-END\n\tDEBUG=1\n\tEND\ncat .env", [".env"], [".env"]),
        ("python - <<EOF\nopen('out.txt', 'w').write('x')\nEOF", [], []),  # what a script opens is not guessed
        ("grep -c x <<< 'a.txt b.txt'", [], []),
        ("echo 'done' &> logs/run.log", [], ["logs/run.log"]),
        ("npm test 2>&1 | tee -a logs/test.log", [], ["logs/test.log"]),
        # the script of sed and perl is no file, even when it has slashes
        ("sed -i -e 's/old/new/g' src/config.py", [], ["src/config.py"]),
        ("perl -pi -e 's/foo/bar/' lib/a.pm lib/b.pm", [], ["lib/a.pm", "lib/b.pm"]),
        ("perl scripts/report.pl data/in.csv", ["scripts/report.pl", "data/in.csv"], []),
        # cp/mv: the target, into a folder named with its slash; a bare name may be either, so not said
        ("cp a.txt backup/", ["a.txt"], ["backup/a.txt"]),
        ("cp a.txt backup", ["a.txt"], []),
        ("mv -f build/app.js dist/app.js", [], ["build/app.js", "dist/app.js"]),
        ("curl -sSL https://example.com/x.tar.gz -o vendor/x.tar.gz", [], ["vendor/x.tar.gz"]),
        ("dd if=/dev/zero of=disk.img bs=1M count=1", [], ["disk.img"]),
        ("patch src/app.py fix.diff", ["fix.diff"], ["src/app.py"]),
        # git: a branch name looks like a path and is none
        ("git checkout -b fix/cart-total", [], []),
        ("git checkout feature/login", [], []),
        ("git checkout main -- src/app.py docs", [], ["src/app.py"]),
        ("git checkout src/app.py", [], ["src/app.py"]),
        ("git restore --source release/1.2 src/app.py", [], ["src/app.py"]),
        # paths after `cd` are where it went, relative to the session's directory when inside it
        ("cd src && sed -i 's/a/b/' app.py", [], ["src/app.py"]),
        ("cd /repo/web && touch package.json && cd .. && rm notes.txt", [], ["web/package.json", "notes.txt"]),
        ("cd /elsewhere && touch x.txt", [], ["/elsewhere/x.txt"]),
        ("cd \"$TMPDIR\" && touch x.txt", [], []),  # where it went is not in the line: no file named
    ],
)
def test_files_a_command_line_reads_and_writes(command: str, read: list[str], modified: list[str]) -> None:
    got_read, got_modified = files_in_command(command, cwd="/repo")
    assert got_read == read
    assert sorted(got_modified) == sorted(modified)


# Recorded in shared/bench/replay/django (session e312296a…): Django's makemigrations, run by the
# agent's reproduce.py, wrote migrations/0001_initial.py; then `migrate` printed what it applied.
MAKEMIGRATIONS = """Migrations for '__main__':
  migrations/0001_initial.py
    - Create model Plateforme
    - Create model Produit
Operations to perform:
  Apply all migrations: auth, contenttypes
Running migrations:
  Applying contenttypes.0001_initial... OK
  Applying auth.0001_initial... OK
Traceback (most recent call last):
  File "/home/dev/django/django/db/backends/utils.py", line 84, in _execute
"""
# Recorded there too: pip building psycopg2 writes its egg-info in a temporary folder; Django's test
# runner and an agent's script print lines that start like a claim and name no file.
PIP = """  Downloading psycopg2-2.9.9.tar.gz (384 kB)
    running egg_info
    writing /tmp/pip-pip-egg-info-z04n1vzq/psycopg2.egg-info/PKG-INFO
    writing manifest file '/tmp/pip-pip-egg-info-z04n1vzq/psycopg2.egg-info/SOURCES.txt'
"""
NOT_CLAIMS = """Creating test database for alias 'default'...
 Creating tables...
Saving a file...
Generated static URL: /static/test.css
Saving parent object after setting on child leads to data loss for parents with non-numeric primary key.
"""


def test_djangos_makemigrations_output_names_the_migration_it_wrote() -> None:
    assert files_output_says_written(MAKEMIGRATIONS) == ["migrations/0001_initial.py"]
    assert files_command_wrote("python reproduce.py", MAKEMIGRATIONS, cwd="/home/dev/django") == [
        "migrations/0001_initial.py"
    ]
    assert files_command_wrote("cd tests && python reproduce.py", MAKEMIGRATIONS, cwd="/home/dev/django") == [
        "tests/migrations/0001_initial.py"
    ]


def test_lines_that_only_look_like_claims_name_no_file() -> None:
    assert files_output_says_written(NOT_CLAIMS) == []
    # pip's lower-case "writing" is no claim we read, and its files are outside the project anyway
    assert files_command_wrote("pip install psycopg2", PIP, cwd="/home/dev/django") == []


def test_a_claim_outside_the_sessions_directory_is_not_the_projects() -> None:
    output = "Wrote /tmp/build/report.json\nWrote /repo/out/report.json\nWriting 1,204 bytes to docs/index.html"
    assert files_output_says_written(output) == ["/tmp/build/report.json", "/repo/out/report.json", "docs/index.html"]
    assert files_command_wrote("make report", output, cwd="/repo") == ["out/report.json", "docs/index.html"]


def test_the_text_a_command_shows_is_no_claim() -> None:
    """`cat` of a script that prints "Created x" shows the script, it does not create x."""
    output = "patching file src/app.py\nCreated build/out.txt\n"
    assert files_command_wrote("cat notes.txt", output, cwd="/repo") == []
    assert files_command_wrote("git show HEAD~1 | head -50", output, cwd="/repo") == []
    assert files_command_wrote("make", output, cwd="/repo") == ["src/app.py", "build/out.txt"]


# Printed by black 26.10.1, isort 9.0.2 and GNU Wget, run on a scratch project for this test (recorded, as
# they are not dependencies here); the generator lines are Thor's layout (Rails, Yeoman print the same).
BLACK = "reformatted /repo/src/app.py\n\nAll done! ✨ 🍰 ✨\n1 file reformatted, 1 file left unchanged.\n"
ISORT = "Fixing /repo/src/app.py\n"
WGET = "Length: 2 [application/javascript]\nSaving to: ‘vendor/x.js’\n\n     0K   100%  373K=0s\n"
GENERATOR = ("      invoke  active_record\n      create    db/migrate/20240101_create_users.rb\n"
             "      create    app/models/user.rb\n   identical  app/models/base.rb\n")  # fmt: skip


def test_formatter_download_and_generator_wordings() -> None:
    assert files_command_wrote("black src", BLACK, cwd="/repo") == ["src/app.py"]
    assert files_command_wrote("isort src", ISORT, cwd="/repo") == ["src/app.py"]
    assert files_command_wrote("wget -O vendor/x.js http://127.0.0.1:8765/x.js", WGET, cwd="/repo") == ["vendor/x.js"]
    # "identical": the generator left that file as it was
    assert files_output_says_written(GENERATOR) == ["db/migrate/20240101_create_users.rb", "app/models/user.rb"]


def _run(args: list[str], cwd, stdin: str | None = None) -> str:
    done = subprocess.run(args, cwd=cwd, input=stdin, capture_output=True, text=True, check=False)
    return done.stdout + done.stderr


def _repo_with_a_change(tmp_path):
    """A git work tree with two files, and a patch (made by git) that changes both."""
    env_args = ["-c", "user.email=t@example.com", "-c", "user.name=t"]
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("def total(cart):\n    return sum(cart)\n")
    (repo / "README.md").write_text("# Shop\n")
    _run(["git", "init", "-q"], repo)
    _run(["git", *env_args, "add", "."], repo)
    _run(["git", *env_args, "commit", "-qm", "start"], repo)
    (repo / "src" / "app.py").write_text("def total(cart):\n    return round(sum(cart), 2)\n")
    (repo / "README.md").write_text("# Shop\n\nTotals are rounded.\n")
    patch = _run(["git", "diff"], repo)
    _run(["git", "checkout", "-q", "--", "."], repo)
    return repo, patch


def test_git_apply_verbose_names_the_files_it_patched(tmp_path) -> None:
    repo, patch = _repo_with_a_change(tmp_path)
    (repo / "fix.patch").write_text(patch)
    output = _run(["git", "apply", "-v", "fix.patch"], repo)
    assert "round(sum(cart), 2)" in (repo / "src" / "app.py").read_text()  # it did change them
    assert sorted(files_command_wrote("git apply -v fix.patch", output, cwd=str(repo))) == ["README.md", "src/app.py"]
    # without -v git apply prints nothing: the patch file is all the line names, and it is read, not changed
    assert files_in_command("git apply fix.patch", cwd=str(repo)) == ([], [])


def test_a_patch_fed_to_git_apply_through_a_heredoc_names_its_files_when_it_applied(tmp_path) -> None:
    """Agents often apply a diff with `git apply <<'EOF'`: git prints nothing when it applies (all or nothing)."""
    repo, patch = _repo_with_a_change(tmp_path)
    command = f"git apply <<'EOF'\n{patch}EOF"
    output = _run(["bash", "-c", command], repo)  # the command as the Bash tool runs it
    assert output == "" and "round(sum(cart), 2)" in (repo / "src" / "app.py").read_text()
    assert sorted(files_command_wrote(command, output, cwd=str(repo))) == ["README.md", "src/app.py"]
    again = _run(["bash", "-c", command], repo)  # applied already: git refuses the whole patch
    assert again.startswith("error:")
    assert files_command_wrote(command, again, cwd=str(repo)) == []
    checked = _run(["bash", "-c", command.replace("git apply", "git apply --check -R")], repo)
    assert checked == "" and files_command_wrote(command.replace("git apply", "git apply --check"), "", str(repo)) == []


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch is not installed")
def test_gnu_patch_names_the_files_it_patched_and_not_those_whose_hunks_all_failed(tmp_path) -> None:
    repo, patch = _repo_with_a_change(tmp_path)
    output = _run(["patch", "-p1"], repo, stdin=patch)
    assert sorted(files_command_wrote("patch -p1 < fix.diff", output, cwd=str(repo))) == ["README.md", "src/app.py"]
    (repo / "src" / "app.py").write_text("something else entirely\n")  # the hunk no longer applies
    _run(["git", "checkout", "-q", "--", "README.md"], repo)
    output = _run(["patch", "-p1", "--forward", "--no-backup-if-mismatch", "-r", "-"], repo, stdin=patch)
    assert "FAILED" in output
    assert files_command_wrote("patch -p1 < fix.diff", output, cwd=str(repo)) == ["README.md"]


@pytest.mark.skipif(shutil.which("unzip") is None or shutil.which("zip") is None, reason="zip/unzip not installed")
def test_unzip_names_what_it_inflated(tmp_path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "data.json").write_text('{"a": 1}\n' * 50)
    _run(["zip", "-qr", "pkg.zip", "pkg"], tmp_path)
    shutil.rmtree(tmp_path / "pkg")
    output = _run(["unzip", "pkg.zip"], tmp_path)
    assert files_command_wrote("unzip pkg.zip", output, cwd=str(tmp_path)) == ["pkg/data.json"]


def test_the_bash_observation_keeps_what_the_command_wrote_as_files_modified() -> None:
    """As the hook posts it (Claude Code's Bash tool_response shape): the command line's file and the
    output's migration, both placed in the session's directory, go where a session's changed files come from."""
    draft = local.compress_tool_use({
        "session_id": "s1", "cwd": "/home/dev/django", "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": {"command": "cat > reproduce.py <<'EOF'\nimport django\nEOF\npython reproduce.py"},
        "tool_response": {"stdout": MAKEMIGRATIONS, "stderr": "", "interrupted": False, "isImage": False},
    })  # fmt: skip
    assert draft.files_modified == ["reproduce.py", "migrations/0001_initial.py"]
    assert draft.files_read == ["reproduce.py"]
