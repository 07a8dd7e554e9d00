"""Go source as text, for tools/provider_calls.py: comments and literals masked, functions and their bodies found
by brace matching, struct fields, imports and parameter types indexed, and the conditions (`if`/`else`/`case`/
`for range`, guards that return) that enclose each offset of a body. There is no Go parser in this project;
tests/test_provider_calls.py holds these functions to small Go programs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


def mask(text: str) -> str:
    """`text` with comments and the insides of string and rune literals blanked (same length, newlines kept), so
    that braces and calls are found in code only."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out[i:j] = [ch if ch == "\n" else " " for ch in text[i:j]]
            i = j
        elif c in "\"'`":
            j = i + 1
            while j < n and text[j] != c:
                if c != "`" and text[j] == "\\":
                    j += 1
                j += 1
            out[i + 1:j] = [ch if ch == "\n" else " " for ch in text[i + 1:j]]
            i = j + 1
        else:
            i += 1
    return "".join(out)


def close_brace(masked: str, start: int) -> int:
    """Offset just past the `}` that closes the `{` at `start`."""
    depth = 0
    for j in range(start, len(masked)):
        if masked[j] == "{":
            depth += 1
        elif masked[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    raise ValueError(f"unbalanced brace at {start}")


@dataclass
class Func:
    name: str
    recv: str | None  # receiver type, without *
    recv_var: str | None
    file: str
    line: int
    text: str  # the function, source text
    masked: str
    params: dict[str, str] = field(default_factory=dict)  # name -> type
    results: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.recv}.{self.name}" if self.recv else self.name


@dataclass
class Package:
    funcs: dict[str, Func]  # key -> Func
    methods: dict[str, list[str]]  # method name -> receiver types
    fields: dict[str, dict[str, str]]  # struct type -> field -> type
    imports: dict[str, dict[str, str]]  # file -> alias -> import path
    factories: dict[str, str]  # Terraform name -> factory function (provider.go)
    files: dict[str, str]  # path -> source


def split_params(sig: str) -> dict[str, str]:
    """`d *schema.ResourceData, meta interface{}` -> {d: *schema.ResourceData, meta: interface{}} (`a, b T` too)."""
    out: dict[str, str] = {}
    pending: list[str] = []
    depth, cur, parts = 0, "", []
    for ch in sig:
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for part in (p.strip() for p in parts):
        m = re.fullmatch(r"(\w+)\s+(.+)", part, re.S)
        if m:
            for name in pending + [m.group(1)]:
                out[name] = m.group(2).strip()
            pending = []
        elif re.fullmatch(r"\w+", part):
            pending.append(part)
    return out


def go_imports(text: str) -> dict[str, str]:
    out = {}
    block = re.search(r"^import \((.*?)^\)", text, re.S | re.M)
    lines = block.group(1).splitlines() if block else re.findall(r"^import (.*)$", text, re.M)
    for line in lines:
        m = re.match(r'\s*(?:(\w+)\s+)?"([^"]+)"', line)
        if m:
            out[m.group(1) or m.group(2).rstrip("/").split("/")[-1]] = m.group(2)
    return out


ALIYUN = "meta.(*connectivity.AliyunClient)"
ALIYUN_VAR = "aliyunClient_" + "_" * (len(ALIYUN) - len("aliyunClient_"))  # same length, offsets kept


def qualify(typ: str, imports: dict[str, str]) -> str:
    """`*roaCS.Client` -> `*github.com/alibabacloud-go/cs-20151215/v8/client.Client` by the file's imports, so a type
    named in one file is known in another; `connectivity.AliyunClient` -> `AliyunClient`."""
    m = re.fullmatch(r"(\*?)(\w+)\.(\w+)", typ)
    if not m:
        return typ
    if m.group(2) == "connectivity":
        return m.group(3)
    path = imports.get(m.group(2))
    return f"{m.group(1)}{path}.{m.group(3)}" if path else typ


def parse(files: dict[str, str]) -> Package:
    """Index the functions, methods, struct fields and imports of `files` (path -> Go source)."""
    funcs: dict[str, Func] = {}
    methods: dict[str, list[str]] = {}
    fields: dict[str, dict[str, str]] = {}
    imports: dict[str, dict[str, str]] = {}
    factories: dict[str, str] = {}
    for path in sorted(files):
        text = files[path]
        masked = mask(text).replace(ALIYUN, ALIYUN_VAR)
        imports[path] = imp = go_imports(text)
        for m in re.finditer(r"^type (\w+) struct \{", masked, re.M):
            body = masked[m.end() - 1:close_brace(masked, m.end() - 1)]
            fields[m.group(1)] = {f.group(1): qualify(f.group(2), imp)
                                  for f in re.finditer(r"^\s*(\w+)\s+(\*?[\w.]+)\s*$", body, re.M)}
        for m in re.finditer(r"^func (?:\((\w+)\s+\*?(\w+)\)\s*)?(\w+)\(", masked, re.M):
            # the parameter list closes at the matching ')'; the body opens at the first '{' that ends a line
            depth, j = 1, m.end()
            while depth:
                depth += {"(": 1, ")": -1}.get(masked[j], 0)
                j += 1
            body_open = masked.find("{\n", j)
            if body_open < 0:
                continue
            end = close_brace(masked, body_open)
            results = masked[j:body_open].strip().strip("()")
            f = Func(name=m.group(3), recv=m.group(2), recv_var=m.group(1), file=path,
                     line=text.count("\n", 0, m.start()) + 1, text=text[m.start():end], masked=masked[m.start():end],
                     params={k: qualify(v, imp) for k, v in split_params(masked[m.end():j - 1]).items()},
                     results=[qualify(r.strip(), imp) for r in results.split(",") if r.strip()])
            funcs.setdefault(f.key, f)
            if f.recv:
                methods.setdefault(f.name, []).append(f.recv)
        if path.endswith("provider.go"):
            for fm in re.finditer(r'"(alicloud_\w+)":\s*(\w+)\(\)', text):
                factories.setdefault(fm.group(1), fm.group(2))
    return Package(funcs, methods, fields, imports, factories, files)


@dataclass(frozen=True)
class Edge:
    kind: str  # "call" or "action"
    target: str  # function key, or RAM action
    offset: int  # in the function's text
    conds: tuple[str, ...]


def header_start(masked: str, brace: int) -> int:
    """Where the statement whose block opens at `brace` begins: the line start outside any parentheses."""
    depth = 0
    for j in range(brace - 1, -1, -1):
        ch = masked[j]
        if ch in ")]":
            depth += 1
        elif ch in "([":
            depth -= 1
        elif ch == "\n" and depth <= 0:
            return j + 1
    return 0


def conditional_regions(masked: str, text: str | None = None) -> list[tuple[int, int, str]]:
    """(start, end, condition) of each conditional region of a function body: `if`/`else` blocks, `for` loops with
    a clause or range (a bare `for {` is a retry loop, not a branch), and `case`/`default` clauses. Conditions
    are given as `text` spells them (whitespace folded)."""
    text = text if text is not None else masked
    out = []
    for m in re.finditer(r"\{", masked):
        line_start = header_start(masked, m.start())
        if not re.match(r"\s*(\}\s*)?(if|else|for|switch|select)\b", masked[line_start:m.start()]):
            continue
        head = masked[line_start:m.start()]
        if head.count("(") != head.count(")"):  # the brace opens a func literal inside the header
            continue
        header = re.sub(r"\s+", " ", text[line_start:m.start()]).strip()
        header = re.sub(r"^\}\s*", "", header)
        if re.match(r"(if|else if)\b", header):
            cond = re.sub(r"^(else )?if\s+", "", header)
            cond = cond.split(";")[-1].strip()
            end = close_brace(masked, m.start())
            out.append((m.start(), end, cond))
            # a guard: `if <cond> { ...; return }` with no else makes the rest of the enclosing block run only when
            # not <cond>. Counted where it reads the resource's data or diff (`d.`): a return on an error or on an
            # API state is not a choice of the program's settings.
            last = masked[m.start() + 1:end - 1].rstrip().rsplit("\n", 1)[-1].strip()
            if header.startswith("if") and last.startswith("return") and "d." in cond \
                    and not re.match(r"\s*else\b", masked[end:end + 10]):
                out.append((end, enclosing_end(masked, line_start), f"not ({cond})"))
        elif header == "else":
            # the if this else belongs to: the header of the block closed just before
            prev = masked.rfind("}", 0, m.start())
            opener = opening_brace(masked, prev)
            pl = header_start(masked, opener)
            ph = re.sub(r"^\}?\s*(else )?if\s+", "", re.sub(r"\s+", " ", text[pl:opener]).strip()).split(";")[-1].strip()
            out.append((m.start(), close_brace(masked, m.start()), f"not ({ph})"))
        elif re.match(r"for\s+\S", header):
            out.append((m.start(), close_brace(masked, m.start()), header))
        elif re.match(r"(switch|select)\b", header):
            end = close_brace(masked, m.start())
            sw = header
            cases = list(re.finditer(r"^\s*(case\s[^\n]*|default):", masked[m.start():end], re.M))
            for k, c in enumerate(cases):
                cs = m.start() + c.start()
                ce = m.start() + cases[k + 1].start() if k + 1 < len(cases) else end
                label = re.sub(r"\s+", " ", text[cs:cs + len(c.group(0))]).strip().rstrip(":")
                out.append((cs, ce, f"{sw}: {label}"))
    return out


def explain_flag(f: Func, blocks, cond: str, at: int) -> str:
    """A condition that is a flag (`if update {`), told by the changes that set it: the generated Update functions
    set `update = true` under `d.HasChange("x")` for each input the call sends."""
    m = re.fullmatch(r"!?(\w+)", cond)
    if not m or m.group(1) in ("ok", "true", "false"):
        return cond
    flag = m.group(1)
    reset = max((r.end() for r in re.finditer(rf"\b{flag}\s*:?=\s*false\b|\bvar {flag} bool\b", f.masked[:at])),
                default=0)
    fields: list[str] = []
    for r in re.finditer(rf"\b{flag}\s*=\s*true\b", f.masked[reset:at]):
        pos = reset + r.start()
        for s, e, c in blocks:
            if s < pos < e and "HasChange" in c:
                fields += [x for x in re.findall(r'"([\w.]+)"', c) if x not in fields]
                fields = list(dict.fromkeys(fields))
    if not fields:
        return cond
    shown = ", ".join(fields[:6]) + (f", ... ({len(fields)} inputs)" if len(fields) > 6 else "")
    return f"{cond} (set by a change of {shown})"


def enclosing_end(masked: str, pos: int) -> int:
    """The end of the innermost block that contains `pos`."""
    depth = 0
    for j in range(pos - 1, -1, -1):
        if masked[j] == "}":
            depth += 1
        elif masked[j] == "{":
            if depth == 0:
                return close_brace(masked, j)
            depth -= 1
    return len(masked)


def opening_brace(masked: str, close: int) -> int:
    depth = 0
    for j in range(close, -1, -1):
        if masked[j] == "}":
            depth += 1
        elif masked[j] == "{":
            depth -= 1
            if depth == 0:
                return j
    return 0


def literal_before(f: Func, var: str, offset: int) -> str | None:
    """The string (or fmt.Sprintf format) last assigned to `var` before `offset` in `f`."""
    found = None
    for m in re.finditer(rf'\b{var}\s*:?=\s*(?:fmt\.Sprintf\()?"([^"]*)"', f.text[:offset]):
        found = m.group(1)
    return found


def call_arg(f: Func, start: int, n: int) -> str:
    """The n-th argument (source text) of the call whose '(' is at `start`."""
    depth, cur, args, j = 0, start, [], start
    while j < len(f.masked):
        ch = f.masked[j]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append(f.text[cur + 1:j])
                break
        elif ch == "," and depth == 1:
            args.append(f.text[cur + 1:j])
            cur = j
        j += 1
    return args[n].strip() if n < len(args) else ""


def string_value(f: Func, expr: str, offset: int) -> str | None:
    """A string argument: a literal, `StringPointer(x)`/`tea.String(x)`, or a variable's last literal."""
    expr = re.sub(r"^(?:StringPointer|String|tea\.String|dara\.String)\((.*)\)$", r"\1", expr.strip())
    if m := re.fullmatch(r'(?:fmt\.Sprintf\()?"([^"]*)".*', expr, re.S):
        return m.group(1)
    if re.fullmatch(r"\w+", expr):
        return literal_before(f, expr, offset)
    return None
