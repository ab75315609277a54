"""The files a shell command read and changed, from what its command line and its output say.

Agents write files through Bash as often as through Edit and Write, so a session's changed
files must include what its commands wrote. Two witnesses, and only these:

- the command line: redirections (`> f`, `>> f`, `&> f`, `cat > f <<EOF`), the programs
  that write their operands (`tee`, `touch`, `sed -i`, `perl -i`, `cp`/`mv` targets,
  `curl -o`, `dd of=`, `git mv|rm|checkout|restore`), read relative to the directory the
  line `cd`s into. A heredoc's body is text, never commands, except the diff fed to
  `git apply <<'EOF'`: once git took it (it applies all or nothing, and says "error:" when
  not), the files it names changed;
- the output, where a tool says in so many words that it wrote a file: GNU patch's
  "patching file X", `git apply -v`'s "Applied patch X cleanly.", Django's "Migrations for
  'app':" block, a generator's "create  X", black's "reformatted X", isort's "Fixing X",
  unzip's "inflating: X" and the general "Created/Wrote/Generated/Saved X" at a line's start.

What a program might do is never guessed: `python script.py` that opens a file, a database a
test run creates, `git status` or `git diff` (they show the work tree's changes since the last
commit, not which of them this command or session made) name no changed file here.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterable

MAX_FILES = 20

_READ_PROGRAMS = {
    "cat", "less", "more", "head", "tail", "wc", "grep", "egrep", "rg", "ag", "sed", "awk",
    "diff", "cmp", "file", "stat", "bat", "python", "python3", "node", "ruby", "bash", "sh",
    "source", ".", "pytest", "jq", "yq", "md5sum", "sha256sum", "nl", "sort", "uniq", "cut", "perl",
}  # fmt: skip
_MODIFY_PROGRAMS = {"touch", "rm", "tee", "chmod", "chown", "truncate", "shred", "unlink"}
_PATTERN_FIRST = {"grep", "egrep", "fgrep", "rg", "ag", "sed", "awk", "jq", "perl"}
_PREFIXES = {"sudo", "time", "nice", "env", "command", "exec", "nohup", "xargs"}
_KNOWN_FILES = {"Makefile", "Dockerfile", "README", "LICENSE", "Gemfile", "Procfile", "Justfile"}
_PATHLIKE = re.compile(r"^[\w@~./+-][\w@~./+,-]*$")
_WRITE_REDIRECTS = {">", ">>", ">|", "&>", "&>>"}
# `<<EOF` and `<<<word`: the word after them is a delimiter or a string, no file.
_TEXT_REDIRECTS = {"<<", "<<-", "<<<"}
_HEREDOC = re.compile(r"<<-?[ \t]*(['\"]?)([A-Za-z_][\w.-]*)\1")


def is_path(token: str) -> bool:
    """Whether a word of a command or an output is a file path (`src/app.py`, `Makefile`), not a flag, URL or word."""
    if not token or len(token) > 300 or token.startswith("-") or "://" in token:
        return False
    if token.startswith("/dev/") or token in {".", "..", "/", "~"}:
        return False
    if not _PATHLIKE.match(token):
        return False
    name = token.rstrip("/").rsplit("/", 1)[-1]
    return "/" in token or name in _KNOWN_FILES or bool(re.search(r"\.[A-Za-z0-9]{1,8}$", name))


def heredocs(command: str) -> tuple[str, list[tuple[str, str]]]:
    """(the command line without its heredocs' bodies, [(the line that opens a heredoc, its body)]).

    `cat > f <<'EOF'` keeps its first line; the body is text, never commands."""
    if "<<" not in command:
        return command, []
    out: list[str] = []
    bodies: list[tuple[str, str]] = []
    pending: list[tuple[str, bool, str]] = []  # delimiters still to close, in order: (word, tabs stripped, opener)
    body: list[str] = []
    for line in command.split("\n"):
        if pending:
            delimiter, strip_tabs, opener = pending[0]
            if (line.lstrip("\t") if strip_tabs else line).rstrip() == delimiter:
                pending.pop(0)
                bodies.append((opener, "\n".join(body)))
                body = []
            else:
                body.append(line)
            continue
        out.append(line)
        for match in _HEREDOC.finditer(line):
            if not line[match.start() :].startswith("<<<"):
                pending.append((match.group(2), line[match.start() : match.start() + 3] == "<<-", line))
    return "\n".join(out), bodies


def _split_shell(command: str) -> list[list[str]]:
    """The simple commands of a command line, as token lists (quotes removed)."""
    # A line break ends a command as `;` does (a quoted one stays in its word); `\` before it joins lines.
    command = heredocs(command)[0].replace("\\\n", " ")
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>\n")
        lexer.whitespace = " \t\r"
        lexer.whitespace_split = True
        lexer.commenters = ""
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: fall back to whitespace
        tokens = command.split()
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token and set(token) <= set(";&|()\n"):
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


class _Place:
    """Where a command line's relative paths are: the session's directory, then wherever `cd` went.

    Paths stay as the command names them while it has not left the session's directory; after a
    `cd` they are joined to where it went (relative to the session's directory when inside it).
    After a `cd` to a place a command line cannot tell (`cd "$DIR"`, `cd -`, `cd ~`), a relative
    path names no known file and is left out."""

    def __init__(self, cwd: str = "") -> None:
        self.cwd = cwd.rstrip("/") if cwd.startswith("/") else ""
        self.here: str | None = ""  # relative to cwd ("" = cwd itself), absolute, or None (unknown)

    def cd(self, args: list[str]) -> None:
        target = next((a for a in args if not a.startswith("-") or a == "-"), "~")
        if target in ("-", "~") or target.startswith(("~", "$")) or "$" in target or "`" in target:
            self.here = None
        elif self.here is not None:
            self.here = self._resolve(target)

    def path(self, path: str) -> str | None:
        if path.startswith("/"):
            return self._inside(posixpath.normpath(path))
        if self.here is None:
            return None
        return self._resolve(path) if self.here else path

    def _resolve(self, path: str) -> str:
        joined = posixpath.normpath(posixpath.join(self.here or "", path))
        if not joined.startswith("/") and joined.startswith(".."):
            joined = posixpath.normpath(posixpath.join(self.cwd, joined)) if self.cwd else joined
        return self._inside(joined)

    def _inside(self, path: str) -> str:
        """An absolute path inside the session's directory, relative to it; any other path as it is."""
        if self.cwd and path == self.cwd:
            return ""
        if self.cwd and path.startswith(self.cwd + "/"):
            return path[len(self.cwd) + 1 :]
        return "" if path == "." else path


def unique(items: Iterable[str], limit: int = MAX_FILES) -> list[str]:
    """The first `limit` distinct non-empty items, in order (reading no further than needed)."""
    seen: dict[str, None] = {}
    for item in items:
        if item and item not in seen:
            seen[item] = None
        if len(seen) >= limit:
            break
    return list(seen)


def files_in_command(command: str, cwd: str = "") -> tuple[list[str], list[str]]:
    """(files read, files modified) that a shell command line names; `cwd`: the directory it ran in."""
    read: list[str] = []
    modified: list[str] = []
    place = _Place(cwd)
    for tokens in _split_shell(command)[:30]:
        args: list[str] = []
        redirect = None
        for token in tokens:
            if token in _WRITE_REDIRECTS or token == "<" or token in _TEXT_REDIRECTS:
                redirect = token
                continue
            if redirect:
                if redirect not in _TEXT_REDIRECTS and (
                    is_path(token) or (token and "/" not in token and not token.startswith(("&", "-")))
                ):
                    (read if redirect == "<" else modified).append(place.path(token) or "")
                redirect = None
                continue
            args.append(token)
        while args and (args[0] in _PREFIXES or re.match(r"^[A-Za-z_]\w*=", args[0])):
            args = args[1:]
        if not args:
            continue
        program = args[0].rsplit("/", 1)[-1]
        rest = args[1:]
        if program in ("cd", "pushd"):
            place.cd(rest)
            continue
        got_read, got_modified = _operands(program, rest)
        read += [place.path(p) or "" for p in got_read]
        modified += [place.path(p) or "" for p in got_modified]
    return unique(read), unique(modified)


def _operands(program: str, rest: list[str]) -> tuple[list[str], list[str]]:
    """(read, modified) among one simple command's arguments, by what its program does with them."""
    if program in _PATTERN_FIRST:
        rest = _without_script(program, rest)
    paths = [a for a in rest if is_path(a)]
    in_place = any(re.match(r"^-[a-zA-Z]*i", a) or a.startswith("--in-place") for a in rest)
    if program == "git" and rest[:1] and rest[0] in ("mv", "rm", "restore"):
        return [], [p for p in paths if not _option_value(rest, p, ("--source", "-s"))]
    if program == "git" and rest[:1] and rest[0] == "checkout":
        return [], _checked_out(rest[1:])
    if program in ("sed", "perl") and in_place:
        return [], paths
    if program in ("mv", "cp", "rsync", "install", "ln"):
        operands = [a for a in rest if not a.startswith("-")]
        if len(operands) < 2:
            return [], []
        sources, target = operands[:-1], operands[-1]
        targets = [target + posixpath.basename(s.rstrip("/")) for s in sources] if target.endswith("/") else [target]
        written = [t for t in targets if is_path(t)]  # `cp a.txt backup`: a folder or a file? not said
        moved = [s for s in sources if is_path(s)]
        return ([], moved + written) if program == "mv" else (moved, written)
    if program == "patch":  # `patch [options] [original [patchfile]]`: what it changed is in its output
        return paths[1:], paths[:1]
    if program in ("curl", "wget"):
        flag = ("-o", "--output") if program == "curl" else ("-O", "--output-document")
        written = [rest[i + 1] for i, a in enumerate(rest[:-1]) if a in flag]
        written += [a.split("=", 1)[1] for a in rest if a.startswith(flag[1] + "=")]
        return [], [w for w in written if is_path(w) or "/" not in w and w != "-"]
    if program == "dd":
        return ([a[3:] for a in rest if a.startswith("if=") and is_path(a[3:])],
                [a[3:] for a in rest if a.startswith("of=") and is_path(a[3:])])  # fmt: skip
    if program in _MODIFY_PROGRAMS:
        return [], paths
    if program in _READ_PROGRAMS:
        return paths, []
    return [], []


_SCRIPT_FLAGS = {"-e", "-f", "--regexp", "--expression", "--file"}  # the next argument is a pattern or script


def _option_value(args: list[str], value: str, options: tuple[str, ...]) -> bool:
    """Whether `value` is the value of one of `options` in `args` (`--source main`)."""
    return any(a in options and args[i + 1 : i + 2] == [value] for i, a in enumerate(args))


def _checked_out(args: list[str]) -> list[str]:
    """The files `git checkout` restores: those after `--`; without it, only names with a file extension
    (`git checkout feature/login` and `git checkout -b fix/cart` switch branches, which look like paths)."""
    if "--" in args:
        return [a for a in args[args.index("--") + 1 :] if is_path(a)]
    if any(a in ("-b", "-B", "--orphan") for a in args):
        return []
    return [a for a in args if is_path(a) and re.search(r"\.[A-Za-z][A-Za-z0-9]{0,7}$", a.rsplit("/", 1)[-1])]


def _without_script(program: str, rest: list[str]) -> list[str]:
    """`grep PATTERN FILE`, `sed -e SCRIPT FILE`, `perl -pi -e CODE FILE`: the arguments without the
    pattern or script, which may look like a path (`s/old/new/`) and is none."""
    out: list[str] = []
    skip = given = False
    for arg in rest:
        if skip:
            skip = False
        elif arg in _SCRIPT_FLAGS or (program == "perl" and re.fullmatch(r"-[a-zA-Z]*e", arg)):  # perl -pe CODE
            skip = given = True
            out.append(arg)
        else:
            out.append(arg)
    if given or program == "perl":  # perl's first operand is its script, a file it reads
        return out
    operands = [i for i, a in enumerate(out) if not a.startswith("-")]
    return out[: operands[0]] + out[operands[0] + 1 :] if operands else out


# --- what an output says was written ------------------------------------------------

_QUOTED = r"['\"`‘“]?(?P<path>[^\s'\"`’”]+?)['\"`’”]?"
# One line, one claim: the tool's own words that it wrote this file (case as the tools print it).
_WROTE_LINE = re.compile(
    r"^\s*(?:"
    r"patching file"  # GNU patch
    r"|Applied patch(?: to)?"  # git apply -v
    r"|reformatted"  # black
    r"|Fixing"  # isort
    r"|(?:create|force|remove)(?=\s{2})"  # Rails/Thor and Yeoman generators: "      create  app/models/user.rb"
    r"|(?:inflating|extracting):"  # unzip
    r"|(?:\[\w+\]\s+)?(?:Created|Creating|Wrote|Writing|Generated|Generating|Saved|Saving|Rewrote|Deleted|Removed)"
    r"(?:\s+(?:new\s+)?file)?(?:\s+\d[\d,]*\s+bytes)?(?:\s+to)?:?"
    r")\s+" + _QUOTED + r"(?:\s|[.:,]?$|\.{3})"
)
_ALL_HUNKS_FAILED = re.compile(r"^(\d+) out of \1 hunks? FAILED")  # GNU patch left that file as it was
_MIGRATIONS_FOR = re.compile(r"^Migrations for '[^']+':\s*$")  # Django's makemigrations, then one indented line a file
_MIGRATION_FILE = re.compile(r"^\s+(\S+\.py)\s*$")


def files_output_says_written(output: str, limit: int = MAX_FILES) -> list[str]:
    """The files a command's output says, in the words of the tool that wrote them, it created or changed."""
    found: list[str] = []
    lines = output.splitlines()
    for index, line in enumerate(lines[:5000]):
        match = _WROTE_LINE.match(line)
        if match and is_path(match.group("path").rstrip(".:,")) and not _patch_failed(lines, index):
            found.append(match.group("path").rstrip(".:,"))
        elif _MIGRATIONS_FOR.match(line):
            for following in lines[index + 1 : index + 50]:
                file = _MIGRATION_FILE.match(following)
                if file:
                    found.append(file.group(1))
                elif not following.startswith("    "):  # the operations under each file are indented deeper
                    break
        if len(found) >= limit:
            break
    return unique(found, limit)


def _patch_failed(lines: list[str], index: int) -> bool:
    """Whether the "patching file X" at `index` is followed, before the next file, by all its hunks failing."""
    if not lines[index].lstrip().startswith("patching file"):
        return False
    for line in lines[index + 1 : index + 200]:
        if line.lstrip().startswith("patching file"):
            return False
        if _ALL_HUNKS_FAILED.match(line.strip()):
            return True
    return False


# Commands that show files, so a line of their output is the file's text, not a tool's claim.
_SHOWING = {"cat", "less", "more", "head", "tail", "grep", "egrep", "fgrep", "rg", "ag", "bat", "nl", "jq", "yq",
            "echo", "printf", "diff", "sed", "awk", "sort", "uniq", "cut", "wc", "ls", "find", "tree"}  # fmt: skip
_GIT_SHOWING = {"show", "log", "diff", "blame", "grep", "cat-file", "status"}


def only_shows(command: str) -> bool:
    """Whether every command of the line shows files or their changes (`cat`, `grep`, `git diff`) and writes none."""
    programs = [[t for t in tokens if not re.match(r"^[A-Za-z_]\w*=", t)] for tokens in _split_shell(command)[:30]]
    programs = [p for p in programs if p and p[0] not in _PREFIXES]
    shows = [p[0].rsplit("/", 1)[-1] in _SHOWING or p[0] in ("cd", "pushd") or (p[0] == "git" and p[1:2] and p[1] in _GIT_SHOWING)
             for p in programs]  # fmt: skip
    return bool(programs) and all(shows) and not any(t in _WRITE_REDIRECTS for p in programs for t in p)


_PATCHED_FILE = re.compile(r"^\+\+\+ (?:b/)?(\S+)")
_REMOVED_FILE = re.compile(r"^--- (?:a/)?(\S+)")
_APPLY = re.compile(r"(?:^|[;&|(]\s*)git\s+apply\b(?![^\n]*--(?:check|stat|numstat|summary)\b)")


def files_a_heredoc_patch_changed(command: str, output: str) -> list[str]:
    """The files of a patch fed to `git apply` through a heredoc (`git apply <<'EOF'` and the diff), when it
    applied: git applies all of a patch or nothing, and says "error:" when it did not (`--check` and `--stat`
    change nothing). A deleted file is named by its `--- a/` line."""
    if re.search(r"(?m)^error:", output):
        return []
    found: list[str] = []
    for opener, body in heredocs(command)[1]:
        if not _APPLY.search(opener):
            continue
        removed = None
        for line in body.splitlines():
            if match := _REMOVED_FILE.match(line):
                removed = match.group(1)
            elif match := _PATCHED_FILE.match(line):
                found.append(removed if match.group(1) == "/dev/null" and removed else match.group(1))
    return unique([f for f in found if f != "/dev/null" and is_path(f)])


def files_command_wrote(command: str, output: str, cwd: str = "") -> list[str]:
    """The files a finished command's output says it wrote, placed where the command ran (after its `cd`s).

    Files outside the session's directory (a package manager's temporary build folder, say) are
    not the project's and are left out; so is what a command that only shows files printed (the
    text of a file, a log), which is no tool's claim."""
    if only_shows(command):
        return []
    place = _Place(cwd)
    for tokens in _split_shell(command)[:30]:
        args = [t for t in tokens if not re.match(r"^[A-Za-z_]\w*=", t)]
        if args and args[0] in ("cd", "pushd"):
            place.cd(args[1:])
    said = files_output_says_written(output)
    if place.here == "":  # a patch names files from the repository's top, which a `cd` may have left
        said += files_a_heredoc_patch_changed(command, output)
    placed = (place.path(p) for p in said)
    return unique([p for p in placed if p and not (cwd and p.startswith("/"))])  # placed: inside is relative
