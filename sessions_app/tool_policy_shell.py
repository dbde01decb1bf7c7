"""A Bash tool's command as the simple commands it runs, for the tool policy (sessions_app/tool_policy.py).

The command is parsed with tree-sitter's Bash grammar (``tree-sitter-bash``), not split on spaces, so
that no spelling of a command hides it from a rule: every simple command is found, wherever it stands
(after ``;``, ``&&``, ``||``, ``|``, ``&``, inside ``$( )``, backticks, ``<( )``, subshells, ``{ }``,
functions, loops, conditions, ``case``, an unquoted here-document), and each is given as its words:

- quotes and backslashes removed (``r''m``, ``\\rm``, ``"rm"``, ``$'\\x72m'`` are ``rm``), line
  continuations joined, words separated by one space whatever the blanks between them;
- the command's name reduced to its last path part (``/bin/rm``, ``./rm``, ``$DIR/rm`` are ``rm``);
- the command a wrapper runs given as a command of its own: ``sudo``, ``doas``, ``env X=1``, ``nohup``,
  ``nice``, ``timeout 5``, ``time``, ``command``, ``exec``, ``xargs``, ``find -exec ... ;``,
  ``bash -c '...'`` (and ``sh``, ``zsh``, ``dash``, ``ksh``), ``eval``, ``watch``, ``su -c``, and so on.

What the server cannot know is a ``HOLE``: any text at all. A ``$VAR``, ``${...}``, ``$(...)``,
backtick or ``$((...))`` in a word is a hole in that word; a command name that is not plain text (a
variable, a glob such as ``/bin/r?``) is a hole; a command that cannot be parsed, a shell reading its
commands from standard input (``curl x | sh``) or a string built at run time (``bash -c "$X"``) is
one command that is a single hole. A rule's glob matches a word list with holes when some text in
the holes would make it match (tool_policy_glob.py); glob characters in an argument (``rm *.py``)
are matched as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import tree_sitter_bash
from tree_sitter import Language, Node, Parser


class _Hole:
    """Any text (a value the server cannot know)."""

    def __repr__(self) -> str:
        return "HOLE"


HOLE = _Hole()
Segment = str | _Hole
Word = tuple[Segment, ...]

BASH = Language(tree_sitter_bash.language())
MAX_DEPTH = 6  # bash -c 'sudo env bash -c "..."': deeper than this is one hole
MAX_CHARS = 1_000_000  # longer than this is not parsed: one hole
GLOB_CHARS = frozenset("*?[")
EXPANSIONS = frozenset(
    {"simple_expansion", "expansion", "command_substitution", "process_substitution", "arithmetic_expansion"}
)
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "fish", "rbash", "busybox-sh"})
# Shell options whose value is the next word (bash -o pipefail -c '...', bash -O extglob ...).
SHELL_OPTIONS_WITH_VALUE = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
CONTINUATION = re.compile(r"(?<!\\)((?:\\\\)*)\\\n")


@dataclass(frozen=True)
class Wrapper:
    """A program that runs the command in its arguments: which of its options take the next word
    as their value, and how many plain words come before the command (timeout's duration)."""

    options_with_value: frozenset[str] = frozenset()
    positionals: int = 0
    assignments: bool = False  # env: NAME=VALUE words before the command
    appends_hole: bool = False  # xargs: more arguments come from standard input


WRAPPERS: dict[str, Wrapper] = {
    "sudo": Wrapper(frozenset({"-u", "-g", "-h", "-p", "-r", "-t", "-C", "-D", "-T", "-U", "-c", "-R"})),
    "doas": Wrapper(frozenset({"-u", "-C"})),
    "env": Wrapper(frozenset({"-u", "-C", "--unset", "--chdir", "-P", "--split-string"}), assignments=True),
    "nohup": Wrapper(),
    "time": Wrapper(frozenset({"-f", "-o", "--format", "--output"})),
    "command": Wrapper(),
    "builtin": Wrapper(),
    "exec": Wrapper(frozenset({"-a"})),
    "coproc": Wrapper(),
    "nice": Wrapper(frozenset({"-n", "--adjustment"})),
    "ionice": Wrapper(frozenset({"-c", "-n", "--class", "--classdata"})),
    "setsid": Wrapper(),
    "unbuffer": Wrapper(),
    "stdbuf": Wrapper(frozenset({"-i", "-o", "-e", "--input", "--output", "--error"})),
    "timeout": Wrapper(frozenset({"-s", "-k", "--signal", "--kill-after"}), positionals=1),
    "chroot": Wrapper(frozenset({"--userspec", "--groups"}), positionals=1),
    "taskset": Wrapper(positionals=1),
    "flock": Wrapper(frozenset({"-w", "-E", "--timeout", "--conflict-exit-code"}), positionals=1),
    "strace": Wrapper(frozenset({"-e", "-o", "-p", "-s", "-u", "-E", "-a", "-b", "-I", "-O", "-P", "-S", "-X"})),
    "ltrace": Wrapper(frozenset({"-e", "-o", "-p", "-s", "-u", "-a", "-n"})),
    "busybox": Wrapper(),
    "caffeinate": Wrapper(frozenset({"-t", "-w"})),
    "xargs": Wrapper(
        frozenset(
            {"-a", "-d", "-E", "-e", "-I", "-i", "-L", "-l", "-n", "-P", "-s", "--arg-file", "--delimiter"}
            | {"--eof", "--replace", "--max-lines", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"}
        ),
        appends_hole=True,
    ),
}
# Options that take their value glued on (-n5, -I{}) are one word and need nothing here.


@dataclass
class Commands:
    """The simple commands of a command line, each as its words."""

    found: list[list[Word]] = field(default_factory=list)

    def unknown(self) -> None:
        self.found.append([(HOLE,)])


def shell_commands(command: str) -> list[list[Word]]:
    """Every simple command ``command`` runs (see the module's docstring); at least one."""
    out = Commands()
    try:
        _parse_into(command, out, depth=0)
    except (RecursionError, ValueError, UnicodeError):  # never a 500, never "allowed"
        out.unknown()
    if not out.found:  # empty, or only comments: the text itself, matched as written
        out.found.append([(command.strip(),)])
    return out.found


def word_text(word: Word) -> str:
    return "".join(s for s in word if isinstance(s, str))


def _parse_into(text: str, out: Commands, *, depth: int) -> None:
    if depth > MAX_DEPTH or len(text) > MAX_CHARS:
        out.unknown()
        return
    _walk_program(text, out, depth)
    # Bash joins a backslash-newline before it reads words (--forc\<newline>e is --force); the grammar
    # does not. Both readings are kept: the joined one cannot hide a command the other finds (a
    # comment ending in a backslash still ends at its newline).
    joined = CONTINUATION.sub(r"\1", text)
    if joined != text:
        _walk_program(joined, out, depth)


def _walk_program(text: str, out: Commands, depth: int) -> None:
    tree = Parser(BASH).parse(text.encode("utf-8", "surrogatepass"))
    if tree.root_node.has_error:
        out.unknown()
        return
    _walk(tree.root_node, out, depth)


def _walk(root: Node, out: Commands, depth: int) -> None:
    """Every command node, in order (a stack, not recursion: a command may nest thousands deep)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "command":
            _command(node, out, depth)
        elif node.type == "heredoc_redirect":
            _heredoc(node, out)
        stack.extend(reversed(node.children))


def _heredoc(node: Node, out: Commands) -> None:
    """An unquoted here-document expands ``$( )`` (parsed, found by _walk) and backticks (not parsed)."""
    start = next((c for c in node.children if c.type == "heredoc_start"), None)
    delimiter = _text(start) if start is not None else ""
    if any(q in delimiter for q in "'\"\\"):
        return  # <<'EOF': the body is data
    body = next((c for c in node.children if c.type == "heredoc_body"), None)
    if body is not None and "`" in _text(body):
        out.unknown()


def _command(node: Node, out: Commands, depth: int) -> None:
    name = node.child_by_field_name("name")
    if name is None:
        return  # only assignments (X=1): nothing runs, and a $( ) in them is found by _walk
    words = [_command_name(name)] + [_word(arg) for arg in node.children_by_field_name("argument")]
    _add(words, out, depth)


def _add(words: list[Word], out: Commands, depth: int) -> None:
    out.found.append(words)
    if not words or HOLE in words[0]:
        return
    if depth > MAX_DEPTH * 4:  # sudo sudo sudo ...: what the last one runs is not looked for
        out.unknown()
        return
    name = word_text(words[0])
    args = words[1:]
    if name in SHELLS:
        _shell(args, out, depth)
    elif name == "eval":
        _string(args, out, depth)
    elif name == "watch":
        _watch(args, out, depth)
    elif name == "su":
        _su(args, out, depth)
    elif name == "find":
        _find(args, out, depth)
    elif name == "env" and _split_string(args, out, depth):
        return
    elif name in WRAPPERS:
        inner = _unwrap(WRAPPERS[name], args)
        if inner:
            inner[0] = _basename(inner[0])
            _add(inner, out, depth + 1)


def _unwrap(wrapper: Wrapper, args: list[Word]) -> list[Word]:
    """The command a wrapper runs (its words), or [] when it runs none."""
    index, positionals = 0, wrapper.positionals
    while index < len(args):
        word = args[index]
        text = word_text(word) if HOLE not in word else None
        if text is None:
            break  # a value we cannot read: take it as the command (a hole: matches any rule)
        if text == "--":
            index += 1
            break
        if text.startswith("-") and len(text) > 1:
            index += 2 if text in wrapper.options_with_value else 1
            continue
        if wrapper.assignments and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", text):
            index += 1
            continue
        if positionals:
            positionals -= 1
            index += 1
            continue
        break
    inner = list(args[index:])
    if inner and wrapper.appends_hole:
        inner.append((HOLE,))
    return inner


def _shell(args: list[Word], out: Commands, depth: int) -> None:
    """``bash -c 'string'`` runs the string; ``bash`` with no script reads commands from its input."""
    index = 0
    while index < len(args):
        word = args[index]
        if HOLE in word:
            out.unknown()
            return
        text = word_text(word)
        if text in SHELL_OPTIONS_WITH_VALUE:
            index += 2
            continue
        if text.startswith(("-", "+")) and not text.startswith("--") and "c" in text[1:]:
            script = args[index + 1] if index + 1 < len(args) else None
            if script is None or HOLE in script:
                out.unknown()
            else:
                _parse_into(word_text(script), out, depth=depth + 1)
            return
        if text.startswith(("-", "+")):
            if text.lstrip("-+").startswith("s") or text == "-":  # bash -s: commands from the input
                out.unknown()
                return
            index += 1
            continue
        return  # a script file: run as written
    out.unknown()  # no -c and no script: the commands come from standard input


def _string(args: list[Word], out: Commands, depth: int) -> None:
    """eval: its words joined by spaces are a command line."""
    if any(HOLE in word for word in args):
        out.unknown()
    elif args:
        _parse_into(" ".join(word_text(w) for w in args), out, depth=depth + 1)


def _watch(args: list[Word], out: Commands, depth: int) -> None:
    inner = _unwrap(Wrapper(frozenset({"-n", "-d", "--interval", "--differences", "-q"})), args)
    _string(inner, out, depth)


def _su(args: list[Word], out: Commands, depth: int) -> None:
    for index, word in enumerate(args):
        if word_text(word) in ("-c", "--command") or word_text(word).startswith("--command="):
            value = word_text(word).partition("=")[2]
            if value:
                _parse_into(value, out, depth=depth + 1)
            elif index + 1 < len(args):
                _string([args[index + 1]], out, depth)
            return


def _find(args: list[Word], out: Commands, depth: int) -> None:
    """find ... -exec cmd {} ; (and -execdir, -ok, -okdir): cmd with the file names as holes."""
    index = 0
    while index < len(args):
        if word_text(args[index]) in ("-exec", "-execdir", "-ok", "-okdir"):
            end = index + 1
            while end < len(args) and word_text(args[end]) not in (";", "+"):
                end += 1
            inner = [(HOLE,) if word_text(w) == "{}" else w for w in args[index + 1 : end]]
            if inner:
                inner[0] = _basename(inner[0])
                _add(inner, out, depth + 1)
            index = end
        index += 1


def _split_string(args: list[Word], out: Commands, depth: int) -> bool:
    """env -S 'rm -rf /' splits its string into a command."""
    for index, word in enumerate(args):
        text = word_text(word)
        if text in ("-S", "--split-string") and index + 1 < len(args):
            _string([args[index + 1]], out, depth)
            return True
        if text.startswith("--split-string=") or (text.startswith("-S") and len(text) > 2):
            _parse_into(text.split("=", 1)[1] if text.startswith("--") else text[2:], out, depth=depth + 1)
            return True
    return False


def _command_name(node: Node) -> Word:
    """The name's word, reduced to its last path part; a glob in it (``/bin/r?``) is a hole."""
    inner = node.children[0] if node.children else node
    return _basename(_word(inner, name=True))


def _basename(word: Word) -> Word:
    for index in range(len(word) - 1, -1, -1):
        segment = word[index]
        if isinstance(segment, str) and "/" in segment:
            tail = segment.rsplit("/", 1)[1]
            return ((tail,) if tail else ()) + word[index + 1 :] or ("",)
    return word


def _word(node: Node, *, name: bool = False) -> Word:
    """One word with its quotes and escapes removed; expansions are holes."""
    kind = node.type
    if kind == "word":
        return _unquoted(_text(node), name=name)
    if kind == "number":
        return (_text(node),)
    if kind == "raw_string":
        return (_text(node)[1:-1],)
    if kind == "ansi_c_string":
        return _ansi_c(_text(node)[2:-1])
    if kind in ("string", "translated_string"):
        return _double_quoted(node)
    if kind == "concatenation":
        return _joined(_word(child, name=name) for child in node.children)
    return (HOLE,)  # an expansion, a brace expression, anything else: not known before it runs


def _double_quoted(node: Node) -> Word:
    parts: list[Word] = []
    for child in node.children:
        if child.type == "string_content":
            parts.append((re.sub(r'\\([$`"\\\n])', lambda m: "" if m[1] == "\n" else m[1], _text(child)),))
        elif child.type in EXPANSIONS or child.type not in ('"', '$"'):
            parts.append((HOLE,))
    return _joined(parts)


def _unquoted(text: str, *, name: bool) -> Word:
    parts: list[Segment] = []
    literal: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            if text[index + 1] != "\n":
                literal.append(text[index + 1])
            index += 2
            continue
        if name and char in GLOB_CHARS:
            parts.append("".join(literal))
            literal = []
            parts.append(HOLE)
        else:
            literal.append(char)
        index += 1
    parts.append("".join(literal))
    return _joined([tuple(parts)])


ANSI_C = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.DOTALL)
ANSI_C_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _ansi_c(body: str) -> Word:
    def decode(match: re.Match) -> str:
        code = match[1]
        if code[0] in "xuU":
            return chr(min(int(code[1:], 16), 0x10FFFF))
        if code[0].isdigit():
            return chr(int(code, 8) & 0xFF)
        if code[0] == "c":
            return chr(ord(code[1]) & 0x1F)
        return ANSI_C_SIMPLE.get(code, code)

    return (ANSI_C.sub(decode, body),)


def _joined(parts) -> Word:
    """Adjacent texts merged, empty texts and repeated holes dropped."""
    merged: list[Segment] = []
    for part in parts:
        for segment in part:
            if isinstance(segment, str):
                if not segment:
                    continue
                if merged and isinstance(merged[-1], str):
                    merged[-1] += segment
                    continue
            elif merged and merged[-1] is HOLE:
                continue
            merged.append(segment)
    return tuple(merged) or ("",)


def _text(node: Node) -> str:
    return node.text.decode("utf-8", "surrogatepass") if node.text is not None else ""
