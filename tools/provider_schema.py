"""Extract the Terraform schema of the alicloud resources this program uses from the provider's own Go source.

pulumi-alicloud is a bridge over aliyun/terraform-provider-alicloud: every input a Pulumi program sets is checked
against (and sent as) the Terraform schema of the resource behind it. This script reads that schema straight
from the Go source, so tests/test_provider_schema.py can check every recorded input offline against the rules
the provider applies at `pulumi preview`/`up`: unknown or missing attributes, enum and range validators,
ConflictsWith/ExactlyOneOf, and list-versus-object nesting.

    python tools/provider_schema.py \\
        --tf-src /work/.mirror/aliyun+terraform-provider-alicloud/repo --tf-ref release/v2 \\
        --pulumi-src /work/.mirror/pulumi+pulumi-alicloud/repo --pulumi-ref master \\
        --out tests/data/alicloud_provider_schema.json

`--tf-src` is a git directory (bare or not; read at `--tf-ref`) or a plain checkout (no `--tf-ref`).
`--pulumi-src` is optional: pulumi-alicloud's bridge-metadata.json supplies the Terraform-to-Pulumi property
renames; without it the bridge's default naming rule (camelCase, lists pluralised) is applied.

The parser is a small Go tokenizer plus a composite-literal reader, not a Go compiler: anything it cannot read
as a literal (a helper it cannot resolve, a custom validator, a constant from another package) is written under
"unparsed" with its source text instead of being guessed.

Longer than 500 lines because the Go tokenizer, the schema-literal reader and the bridge's name rules are one
pipeline used only by this generator; nothing else imports them.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Pulumi type token -> Terraform resource name, for the resources this program creates. From pulumi-alicloud's
# provider/resources.go (explicit `Tok:` entries) and, for the tokens it computes (`MustComputeTokens` with the
# module table), the computed name; `--pulumi-src` cross-checks them against bridge-metadata.json's renames.
RESOURCES: dict[str, str] = {
    "alicloud:alb/loadBalancer:LoadBalancer": "alicloud_alb_load_balancer",
    "alicloud:cas/serviceCertificate:ServiceCertificate": "alicloud_ssl_certificates_service_certificate",
    "alicloud:cr/namespace:Namespace": "alicloud_cr_namespace",
    "alicloud:cr/repo:Repo": "alicloud_cr_repo",
    "alicloud:cs/autoscalingConfig:AutoscalingConfig": "alicloud_cs_autoscaling_config",
    "alicloud:cs/kubernetesAddon:KubernetesAddon": "alicloud_cs_kubernetes_addon",
    "alicloud:cs/managedKubernetes:ManagedKubernetes": "alicloud_cs_managed_kubernetes",
    "alicloud:cs/nodePool:NodePool": "alicloud_cs_kubernetes_node_pool",
    "alicloud:cs/registryEnterpriseNamespace:RegistryEnterpriseNamespace": "alicloud_cr_ee_namespace",
    "alicloud:cs/registryEnterpriseRepo:RegistryEnterpriseRepo": "alicloud_cr_ee_repo",
    "alicloud:dns/alidnsRecord:AlidnsRecord": "alicloud_alidns_record",
    "alicloud:ecs/ecsDisk:EcsDisk": "alicloud_ecs_disk",
    "alicloud:ecs/eipAddress:EipAddress": "alicloud_eip_address",
    "alicloud:ecs/eipAssociation:EipAssociation": "alicloud_eip_association",
    "alicloud:ecs/securityGroupRule:SecurityGroupRule": "alicloud_security_group_rule",
    "alicloud:oss/bucket:Bucket": "alicloud_oss_bucket",
    "alicloud:oss/bucketAcl:BucketAcl": "alicloud_oss_bucket_acl",
    "alicloud:oss/bucketLogging:BucketLogging": "alicloud_oss_bucket_logging",
    "alicloud:oss/bucketObject:BucketObject": "alicloud_oss_bucket_object",
    "alicloud:oss/bucketPolicy:BucketPolicy": "alicloud_oss_bucket_policy",
    "alicloud:oss/bucketPublicAccessBlock:BucketPublicAccessBlock": "alicloud_oss_bucket_public_access_block",
    "alicloud:ram/policy:Policy": "alicloud_ram_policy",
    "alicloud:ram/role:Role": "alicloud_ram_role",
    "alicloud:ram/rolePolicyAttachment:RolePolicyAttachment": "alicloud_ram_role_policy_attachment",
    "alicloud:vpc/natGateway:NatGateway": "alicloud_nat_gateway",
    "alicloud:vpc/network:Network": "alicloud_vpc",
    "alicloud:vpc/snatEntry:SnatEntry": "alicloud_snat_entry",
    "alicloud:vpc/switch:Switch": "alicloud_vswitch",
}
PROVIDER_TOKEN = "pulumi:providers:alicloud"
OUT_DEFAULT = Path(__file__).resolve().parent.parent / "tests" / "data" / "alicloud_provider_schema.json"
BRIDGE_METADATA = "provider/cmd/pulumi-resource-alicloud/bridge-metadata.json"


# --------------------------------------------------------------------------------------------- reading sources

class Source:
    """The provider source, either a git directory read at a ref or a plain checkout."""

    def __init__(self, path: Path, ref: str | None):
        self.path, self.ref = path, ref
        self.git = ref is not None
        self._files: dict[str, str] = {}

    def _git(self, *args: str) -> str:
        return subprocess.run(["git", "--git-dir", str(self._git_dir()), *args], check=True,
                              capture_output=True, text=True).stdout

    def _git_dir(self) -> Path:
        return self.path / ".git" if (self.path / ".git").exists() else self.path

    def commit(self) -> str | None:
        return self._git("rev-parse", f"{self.ref}^{{commit}}").strip() if self.git else None

    def describe(self) -> str | None:
        if not self.git:
            return None
        try:
            return self._git("describe", "--tags", self.ref).strip()
        except subprocess.CalledProcessError:
            return None

    def read(self, rel: str) -> str:
        if rel not in self._files:
            self._files[rel] = self._git("show", f"{self.ref}:{rel}") if self.git else (self.path / rel).read_text()
        return self._files[rel]

    def exists(self, rel: str) -> bool:
        try:
            self.read(rel)
            return True
        except (subprocess.CalledProcessError, FileNotFoundError):
            return False

    def grep(self, pattern: str, under: str = "alicloud") -> list[str]:
        """Files under `under` whose text matches the extended regex `pattern`."""
        if self.git:
            out = subprocess.run(["git", "--git-dir", str(self._git_dir()), "grep", "-l", "-E", pattern, self.ref,
                                  "--", f"{under}/*.go"], capture_output=True, text=True).stdout
            return [line.split(":", 1)[1] for line in out.splitlines()]
        out = subprocess.run(["grep", "-rlE", pattern, "--include=*.go", under], cwd=self.path,
                             capture_output=True, text=True).stdout
        return out.splitlines()


# ------------------------------------------------------------------------------------------------- Go tokens

_TOKEN = re.compile(r"""
    (?P<ws>\s+) | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<raw>`[^`]*`) | (?P<str>"(?:\\.|[^"\\\n])*") | (?P<rune>'(?:\\.|[^'\\])+')
  | (?P<num>\d[\w.]*) | (?P<ident>[A-Za-z_]\w*)
  | (?P<op>&&|\|\||==|!=|<=|>=|:=|\.\.\.|<-|[-+*/%&|^<>=!:;,.(){}\[\]])
""", re.S | re.X)
_CLOSE = {"(": ")", "[": "]", "{": "}"}


@dataclass
class Tok:
    kind: str
    text: str


@dataclass
class Group:
    open: str
    items: list = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.open + " ".join(_text(i) for i in self.items) + _CLOSE[self.open]


def _text(node) -> str:
    return node.text


def tokenize(src: str) -> list[Tok]:
    out, pos = [], 0
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if not m:
            raise ValueError(f"cannot tokenize Go source at {src[pos:pos + 40]!r}")
        pos = m.end()
        if m.lastgroup not in ("ws", "comment"):
            out.append(Tok(m.lastgroup, m.group()))
    return out


def nest(tokens: list[Tok]) -> list:
    """Tokens with every bracket pair folded into a Group."""
    root: list = []
    stack: list[tuple[Group | None, list]] = [(None, root)]
    for t in tokens:
        if t.kind == "op" and t.text in _CLOSE:
            g = Group(t.text)
            stack[-1][1].append(g)
            stack.append((g, g.items))
        elif t.kind == "op" and t.text in _CLOSE.values():
            g, _ = stack.pop()
            if g is None or _CLOSE[g.open] != t.text:
                raise ValueError(f"unbalanced {t.text!r}")
        else:
            stack[-1][1].append(t)
    if len(stack) != 1:
        raise ValueError("unbalanced brackets at end of file")
    return root


def split(items: list, sep: str = ",") -> list[list]:
    parts, cur = [], []
    for i in items:
        if isinstance(i, Tok) and i.kind == "op" and i.text == sep:
            parts.append(cur)
            cur = []
        else:
            cur.append(i)
    if cur:
        parts.append(cur)
    return parts


def _is(node, kind: str, text: str | None = None) -> bool:
    return isinstance(node, Tok) and node.kind == kind and (text is None or node.text == text)


def go_string(tok: Tok) -> str:
    if tok.kind == "raw":
        return tok.text[1:-1]
    return json.loads(tok.text) if "\\x" not in tok.text else tok.text[1:-1].encode().decode("unicode_escape")


# --------------------------------------------------------------------------------------- expression reading

@dataclass
class Lit:
    """A composite literal `T{...}`: `pairs` for keyed elements, `values` for unkeyed ones."""
    type: str
    pairs: list[tuple[str, list]]
    values: list[list]
    text: str


def qualified(items: list) -> str | None:
    """`a.b.c` as a string if `items` is exactly a (possibly qualified) identifier."""
    if not items or len(items) % 2 == 0:
        return None
    for n, i in enumerate(items):
        if (n % 2 == 0 and not _is(i, "ident")) or (n % 2 == 1 and not _is(i, "op", ".")):
            return None
    return "".join(i.text for i in items)


def as_literal(items: list) -> Lit | None:
    if not items or not isinstance(items[-1], Group) or items[-1].open != "{":
        return None
    head = items[:-1]
    if head and _is(head[0], "op", "&"):
        head = head[1:]
    if any(_is(i, "ident", "func") for i in head):
        return None
    type_ = "".join(_text(i) for i in head)
    pairs, values = [], []
    for elem in split(items[-1].items):
        if len(elem) >= 2 and _is(elem[1], "op", ":") and (elem[0].kind in ("ident", "str") if isinstance(elem[0], Tok) else False):
            key = go_string(elem[0]) if elem[0].kind == "str" else elem[0].text
            pairs.append((key, elem[2:]))
        else:
            values.append(elem)
    return Lit(type_, pairs, values, " ".join(_text(i) for i in items))


def as_call(items: list) -> tuple[str, list[list]] | None:
    if len(items) >= 2 and isinstance(items[-1], Group) and items[-1].open == "(":
        name = qualified(items[:-1])
        if name:
            return name, split(items[-1].items)
    return None


def src_text(items: list) -> str:
    return " ".join(_text(i) for i in items)


# ---------------------------------------------------------------------------------------------- the package

class Package:
    """Function and constant look-ups in the provider's `alicloud` Go package, parsed lazily."""

    def __init__(self, source: Source, deps: dict[str, tuple[Source, str]] | None = None):
        self.source = source
        self.deps = deps or {}  # import alias -> (source of the dependency at its go.mod version, its folder)
        self._trees: dict[str, list] = {}

    def tree(self, rel: str) -> list:
        if rel not in self._trees:
            self._trees[rel] = nest(tokenize(self.source.read(rel)))
        return self._trees[rel]

    def func_body(self, name: str) -> list | None:
        """The body items of the package-level `func name(...) ... {...}`."""
        for rel in self.source.grep(rf"^func {re.escape(name)}\("):
            items = self.tree(rel)
            for n in range(len(items) - 2):
                if _is(items[n], "ident", "func") and _is(items[n + 1], "ident", name) \
                        and isinstance(items[n + 2], Group) and items[n + 2].open == "(":
                    for m in range(n + 3, len(items)):
                        if isinstance(items[m], Group) and items[m].open == "{":
                            return items[m].items
        return None

    def returned_literal(self, func: str) -> Lit | None:
        """The composite literal a helper like `tagsSchema()` returns, if its body is a single `return T{...}`."""
        body = self.func_body(func)
        if body is None:
            return None
        stmts = [s for s in _statements(body)]
        if len(stmts) == 1 and stmts[0] and _is(stmts[0][0], "ident", "return"):
            return as_literal(stmts[0][1:])
        return None

    def constant(self, name: str) -> str | int | None:
        """A constant's value: `[const] Name [Type] = "..."` (or an integer) in this package, or, for `pkg.Name`,
        in a dependency given with --go-module."""
        source, under, base = self.source, "alicloud", name
        if "." in name:
            alias, base = name.split(".", 1)
            if alias not in self.deps:
                return None  # another package's constant we were not given the source of
            source, under = self.deps[alias]
        rx = rf"^\s*(?:const\s+)?{re.escape(base)}(?:\s+\w+)?\s*=\s*(\"(?:\\.|[^\"\\])*\"|\d+)\s*(?://.*)?$"
        for rel in source.grep(rf"^[[:space:]]*(const[[:space:]]+)?{base}([[:space:]]+[[:alnum:]_]+)?[[:space:]]*=", under):
            m = re.search(rx, source.read(rel), re.M)
            if m:
                return json.loads(m.group(1))
        return None


def _statements(body: list) -> list[list]:
    """A block's statements, split at `return` and `;` (newlines are gone after tokenizing): enough to tell a
    one-statement helper like `tagsSchema()` from anything more complicated."""
    stmts, cur = [], []
    for i in body:
        if _is(i, "ident", "return") and cur:
            stmts.append(cur)
            cur = []
        if _is(i, "op", ";"):
            stmts.append(cur)
            cur = []
            continue
        cur.append(i)
    if cur:
        stmts.append(cur)
    return stmts


# ------------------------------------------------------------------------------------------ schema reading

_TYPES = {"schema.TypeString": "string", "schema.TypeInt": "int", "schema.TypeBool": "bool",
          "schema.TypeFloat": "float", "schema.TypeList": "list", "schema.TypeSet": "set", "schema.TypeMap": "map"}
_FLAGS = {"Required": "required", "Optional": "optional", "Computed": "computed", "ForceNew": "force_new",
          "Sensitive": "sensitive"}
_PATH_LISTS = {"ConflictsWith": "conflicts_with", "ExactlyOneOf": "exactly_one_of", "AtLeastOneOf": "at_least_one_of",
               "RequiredWith": "required_with"}
_IGNORED = {"Description", "Set", "StateFunc", "DiffSuppressOnRefresh", "ConfigMode", "InputDefault", "ComputedWhen"}


class Reader:
    def __init__(self, pkg: Package):
        self.pkg = pkg

    # -- values
    def scalar(self, items: list) -> tuple[bool, Any]:
        """(ok, value) for a string (or a concatenation of strings), number, bool, nil or resolvable constant."""
        parts = split(items, "+")
        if len(parts) > 1:
            vals = [self.scalar(p) for p in parts]
            if all(ok and isinstance(v, str) for ok, v in vals):
                return True, "".join(v for _, v in vals)
            return False, None
        if len(items) == 1 and isinstance(items[0], Tok):
            t = items[0]
            if t.kind in ("str", "raw"):
                return True, go_string(t)
            if t.kind == "num":
                try:
                    return True, int(t.text, 0)
                except ValueError:
                    try:
                        return True, float(t.text)
                    except ValueError:
                        return False, None
            if t.kind == "ident" and t.text in ("true", "false"):
                return True, t.text == "true"
            if t.kind == "ident" and t.text == "nil":
                return True, None
        call = as_call(items)
        if call and call[0] in ("string", "int", "int64", "float64") and len(call[1]) == 1:
            return self.scalar(call[1][0])
        if len(items) == 2 and _is(items[0], "op", "-") and _is(items[1], "num"):
            ok, v = self.scalar(items[1:])
            return ok, -v if ok else None
        name = qualified(items)
        if name and name not in ("true", "false", "nil"):
            value = self.pkg.constant(name)
            if value is not None:
                return True, value
        return False, None

    def slice_values(self, items: list) -> tuple[bool, list]:
        lit = as_literal(items)
        if lit is None or not lit.type.startswith("[]") or lit.pairs:
            call = as_call(items)
            if call and call[0] == "strings.Fields" and len(call[1]) == 1:
                ok, v = self.scalar(call[1][0])
                return (True, v.split()) if ok else (False, [])
            return False, []
        vals = [self.scalar(v) for v in lit.values]
        return all(ok for ok, _ in vals), [v for _, v in vals]

    # -- validators
    def validator(self, items: list) -> dict:
        raw = {"kind": "unparsed", "text": src_text(items)}
        call = as_call(items)
        if call is None:
            name = qualified(items)
            if name in ("validation.StringIsJSON",):
                return {"kind": "json"}
            if name in ("ValidateNullableBool",):
                return {"kind": "nullable_bool"}
            if name in ("validation.IsRFC3339Time",):
                return {"kind": "rfc3339"}
            return raw
        name, args = call
        base = name.split(".")[-1]
        if base == "StringInSlice" and args:
            ok, values = self.slice_values(args[0])
            ok2, ignore_case = self.scalar(args[1]) if len(args) > 1 else (True, False)
            if ok and ok2:
                return {"kind": "enum", "values": values, "ignore_case": bool(ignore_case)}
            return raw
        if base == "IntInSlice" and args:
            ok, values = self.slice_values(args[0])
            return {"kind": "int_enum", "values": values} if ok else raw
        if base in ("IntBetween", "FloatBetween", "StringLenBetween", "ValidateNullableIntBetween") and len(args) == 2:
            (ok1, lo), (ok2, hi) = self.scalar(args[0]), self.scalar(args[1])
            kind = {"IntBetween": "int_between", "FloatBetween": "float_between", "StringLenBetween": "len_between",
                    "ValidateNullableIntBetween": "nullable_int_between"}[base]
            return {"kind": kind, "min": lo, "max": hi} if ok1 and ok2 else raw
        if base in ("IntAtLeast", "IntAtMost", "FloatAtLeast", "FloatAtMost", "StringLenAtLeast") and len(args) == 1:
            ok, v = self.scalar(args[0])
            kind = {"IntAtLeast": ("int_between", "min"), "IntAtMost": ("int_between", "max"),
                    "FloatAtLeast": ("float_between", "min"), "FloatAtMost": ("float_between", "max"),
                    "StringLenAtLeast": ("len_between", "min")}[base]
            return {"kind": kind[0], kind[1]: v} if ok else raw
        if base in ("StringMatch", "StringDoesNotMatch") and args:
            rx = as_call(args[0])
            if rx and rx[0] == "regexp.MustCompile" and len(rx[1]) == 1:
                ok, pattern = self.scalar(rx[1][0])
                ok2, msg = self.scalar(args[1]) if len(args) > 1 else (True, "")
                if ok and ok2:
                    return {"kind": "regex" if base == "StringMatch" else "not_regex", "pattern": pattern,
                            "message": msg}
            return raw
        if base in ("Any", "All") and name.startswith("validation."):
            inner = [self.validator(a) for a in args]
            return {"kind": base.lower(), "of": inner}
        if base == "ValidateFunc" or base == "ToDiagFunc":
            return self.validator(args[0]) if args else raw
        return raw

    # -- schema
    def schema(self, items: list) -> dict:
        lit = as_literal(items)
        if lit is None:
            call = as_call(items)
            if call and not call[1]:
                lit = self.pkg.returned_literal(call[0])
                if lit is None:
                    return {"unparsed": {"schema": src_text(items)}}
                return {**self.schema_fields(lit), "helper": call[0]}
            return {"unparsed": {"schema": src_text(items)}}
        return self.schema_fields(lit)

    def schema_fields(self, lit: Lit) -> dict:
        out: dict[str, Any] = {}
        unparsed: dict[str, str] = {}
        for key, value in lit.pairs:
            text = src_text(value)
            if key == "Type":
                t = _TYPES.get(qualified(value) or "")
                if t:
                    out["type"] = t
                else:
                    unparsed[key] = text
            elif key in _FLAGS:
                ok, v = self.scalar(value)
                if ok and isinstance(v, bool):
                    if v:
                        out[_FLAGS[key]] = True
                else:
                    unparsed[key] = text
            elif key in ("MaxItems", "MinItems"):
                ok, v = self.scalar(value)
                if ok and isinstance(v, int):
                    out["max_items" if key == "MaxItems" else "min_items"] = v
                else:
                    unparsed[key] = text
            elif key in _PATH_LISTS:
                ok, v = self.slice_values(value)
                if ok:
                    out[_PATH_LISTS[key]] = v
                else:
                    unparsed[key] = text
            elif key in ("Deprecated", "Removed"):
                ok, v = self.scalar(value)
                if ok:
                    out[key.lower()] = v
                else:
                    unparsed[key] = text
            elif key == "Default":
                ok, v = self.scalar(value)
                if ok:
                    out["default"] = v
                else:
                    unparsed[key] = text
            elif key in ("ValidateFunc", "ValidateDiagFunc"):
                out["validate"] = self.validator(value)
            elif key == "DefaultFunc":
                out["default_func"] = text
            elif key == "DiffSuppressFunc":
                out["diff_suppress"] = qualified(value) or "inline func"
            elif key == "Elem":
                out["elem"] = self.elem(value)
            elif key in _IGNORED:
                continue
            else:
                unparsed[key] = text
        if unparsed:
            out["unparsed"] = unparsed
        return out

    def elem(self, items: list) -> dict:
        lit = as_literal(items)
        if lit and lit.type == "schema.Resource":
            return {"block": self.resource_schema(lit)}
        if lit and lit.type == "schema.Schema":
            return self.schema_fields(lit)
        t = _TYPES.get(qualified(items) or "")
        if t:  # `Elem: schema.TypeString` (a provider bug the SDK tolerates): the element type still reads
            return {"type": t}
        return {"unparsed": {"Elem": src_text(items)}}

    def resource_schema(self, lit: Lit) -> dict:
        for key, value in lit.pairs:
            if key == "Schema":
                return self.schema_map(value)
        return {}

    def schema_map(self, items: list) -> dict:
        lit = as_literal(items)
        if lit is None:
            call = as_call(items)
            if call and not call[1]:
                lit = self.pkg.returned_literal(call[0])
            if lit is None:
                return {"__unparsed__": {"unparsed": {"Schema": src_text(items)}}}
        attrs = {}
        for name, value in lit.pairs:
            attrs[name] = self.schema(value)
        for value in lit.values:
            attrs.setdefault("__unparsed__", {"unparsed": {}})["unparsed"][f"elem{len(attrs)}"] = src_text(value)
        return dict(sorted(attrs.items()))

    def returned(self, func: str, type_: str) -> Lit | None:
        """The first `&type_{...}` literal at the top level of a package function's body (`return &T{...}` or
        `p := &T{...}`)."""
        body = self.pkg.func_body(func) or []
        want = tokenize(type_)
        for n in range(len(body) - len(want) - 1):
            if _is(body[n], "op", "&") and all(_is(body[n + 1 + k], t.kind, t.text) for k, t in enumerate(want)):
                lit = as_literal(body[n:n + len(want) + 2])
                if lit and lit.type == type_:
                    return lit
        return None

    def resource(self, factory: str) -> dict:
        lit = self.returned(factory, "schema.Resource")
        if lit is None:
            raise SystemExit(f"func {factory}() does not return a &schema.Resource literal")
        res: dict[str, Any] = {"factory": factory}
        for key, value in lit.pairs:
            if key in ("Deprecated", "DeprecationMessage"):
                ok, message = self.scalar(value)
                res["deprecated"] = message if ok else {"unparsed": src_text(value)}
            elif key == "CustomizeDiff":
                res["customize_diff"] = src_text(value)
        res["attributes"] = self.resource_schema(lit)
        return res

    def provider(self) -> dict:
        lit = self.returned("Provider", "schema.Provider")
        if lit is None:
            raise SystemExit("func Provider() does not return a &schema.Provider literal")
        return {"factory": "Provider", "attributes": self.resource_schema(lit)}


def resource_factories(source: Source) -> dict[str, str]:
    """TF resource name -> factory function, from provider.go's ResourcesMap."""
    text = source.read("alicloud/provider.go")
    return dict(re.findall(r'^\s*"(alicloud_\w+)":\s*(\w+)\(\),', text, re.M))


# ----------------------------------------------------------------------------------------- Pulumi names

_IRREGULAR_PLURALS = {"policy": "policies", "entry": "entries", "property": "properties", "category": "categories",
                      "child": "children", "address": "addresses", "status": "statuses", "alias": "aliases"}


def camel(tf_name: str) -> str:
    head, *rest = tf_name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def pluralize(word: str) -> str:
    """The bridge pluralises list/set attributes that are not MaxItems-1 blocks (`spot_price_limit` ->
    `spotPriceLimits`); names already plural are kept. A small inflector for the words this provider uses."""
    last = re.split(r"_", word)[-1]
    if last in _IRREGULAR_PLURALS:
        return word[: -len(last)] + _IRREGULAR_PLURALS[last]
    if last.endswith("s") or last in ("data", "info", "metadata"):
        return word
    if re.search(r"[^aeiou]y$", last):
        return word[:-1] + "ies"
    if re.search(r"(x|ch|sh)$", last):
        return word + "es"
    return word + "s"


def pulumi_name(name: str, attr: dict) -> str:
    flat = attr.get("max_items") == 1
    if attr.get("type") in ("list", "set") and not flat:
        return camel(pluralize(name))
    return camel(name)


def bridge_renames(source: Source | None) -> tuple[dict, dict]:
    """(token -> TF name, token -> {pulumi name: tf name}) from pulumi-alicloud's bridge-metadata.json."""
    if source is None:
        return {}, {}
    meta = json.loads(source.read(BRIDGE_METADATA))["renames"]
    return meta["resources"], meta["renamedProperties"]


def name_attributes(attrs: dict, renamed: dict[str, str]) -> None:
    """Give every attribute (nested too) its Pulumi name; a bridge rename (pulumi -> tf) wins over the rule."""
    by_tf = {tf: p for p, tf in renamed.items()}
    for name, attr in attrs.items():
        if name == "__unparsed__":
            continue
        attr["pulumi"] = by_tf.get(name, pulumi_name(name, attr))
        block = attr.get("elem", {}).get("block")
        if block:
            name_attributes(block, renamed)


def nested_renames(token: str, all_renames: dict[str, dict]) -> dict[str, str]:
    """Renames of a resource's own properties and of its nested types (tokens `mod/ResourceField:...`)."""
    mod, _, name = token.split(":", 1)[1].partition("/")
    res_name = name.split(":")[1]
    out: dict[str, str] = {}
    for tok, props in all_renames.items():
        m = re.match(r"alicloud:([^/]+)/([^:]+):", tok)
        if m and m.group(1) == mod and (tok == token or m.group(2).startswith(res_name[0].upper() + res_name[1:])):
            out.update(props)
    return out


# ------------------------------------------------------------------------------------------------ main

def count_unparsed(node: Any) -> int:
    if isinstance(node, dict):
        return (1 if "unparsed" in node else 0) + (0 if node.get("kind") != "unparsed" else 1) + \
            sum(count_unparsed(v) for k, v in node.items() if k != "unparsed")
    if isinstance(node, list):
        return sum(count_unparsed(v) for v in node)
    return 0


def go_dependencies(tf: Source, specs: list[str]) -> tuple[dict[str, tuple[Source, str]], dict[str, str]]:
    """`IMPORT_PATH=GIT_DIR` specs -> ({import alias: (source at the go.mod version, folder)}, {import: version})."""
    required = dict(re.findall(r"^\s*(?:require\s+)?([\w.\-/]+\.[\w.\-/]+)\s+(v[\w.+\-]+)", tf.read("go.mod"), re.M))
    deps, versions = {}, {}
    for spec in specs:
        import_path, _, path = spec.partition("=")
        module = max((m for m in required if import_path == m or import_path.startswith(m + "/")), key=len, default=None)
        if module is None:
            raise SystemExit(f"--go-module {import_path}: not required by the provider's go.mod")
        version = required[module]
        deps[import_path.rsplit("/", 1)[-1]] = (Source(Path(path), version.replace("+incompatible", "")),
                                                import_path[len(module) + 1:] or ".")
        versions[import_path] = version
    return deps, versions


def build(tf: Source, pulumi: Source | None, pulumi_ref: str | None, command: str,
          go_modules: list[str] | None = None) -> dict:
    factories = resource_factories(tf)
    token_renames, prop_renames = bridge_renames(pulumi)
    deps, dep_versions = go_dependencies(tf, go_modules or [])
    reader = Reader(Package(tf, deps))
    resources: dict[str, Any] = {}
    for token, tf_name in sorted(RESOURCES.items()):
        known = token_renames.get(token)
        if known and known != tf_name:
            raise SystemExit(f"{token}: this script maps it to {tf_name}, bridge-metadata.json to {known}")
        if tf_name not in factories:
            raise SystemExit(f"{tf_name} is not in the provider's ResourcesMap at this ref")
        res = reader.resource(factories[tf_name])
        name_attributes(res["attributes"], nested_renames(token, prop_renames))
        resources[token] = {"tf_name": tf_name, **res}
    provider = reader.provider()
    name_attributes(provider["attributes"], {})
    resources[PROVIDER_TOKEN] = {"tf_name": "provider", **provider}

    version = None
    for changelog in ("CHANGELOG-v2.md", "CHANGELOG.md"):
        if tf.exists(changelog):
            version = tf.read(changelog).splitlines()[0].lstrip("# ").strip()
            break
    return {
        "provider": "aliyun/terraform-provider-alicloud",
        "ref": tf.ref,
        "commit": tf.commit(),
        "describe": tf.describe(),
        "changelog_head": version,
        "bridge_metadata": {"repo": "pulumi/pulumi-alicloud", "ref": pulumi_ref,
                            "commit": pulumi.commit() if pulumi else None} if pulumi else None,
        "go_modules": dep_versions,
        "generated_by": command,
        "unparsed_count": count_unparsed(resources),
        "resources": resources,
    }


def dump(data: dict) -> str:
    """JSON with one line per attribute: small, and a provider upgrade reads as a per-attribute diff."""
    j = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
    lines = ["{"]
    lines += [f" {j(k)}: {j(v)}," for k, v in data.items() if k != "resources"]
    lines.append(' "resources": {')
    resources = list(data["resources"].items())
    for n, (token, res) in enumerate(resources):
        lines.append(f"  {j(token)}: {{")
        lines += [f"   {j(k)}: {j(v)}," for k, v in res.items() if k != "attributes"]
        lines.append('   "attributes": {')
        attrs = list(res["attributes"].items())
        lines += [f"    {j(k)}: {j(v)}" + ("," if m < len(attrs) - 1 else "") for m, (k, v) in enumerate(attrs)]
        lines.append("   }")
        lines.append("  }" + ("," if n < len(resources) - 1 else ""))
    lines += [" }", "}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tf-src", type=Path, required=True, help="terraform-provider-alicloud git dir or checkout")
    p.add_argument("--tf-ref", help="git ref to read (omit for a plain checkout)")
    p.add_argument("--pulumi-src", type=Path, help="pulumi-alicloud git dir or checkout (for property renames)")
    p.add_argument("--pulumi-ref", help="git ref of --pulumi-src")
    p.add_argument("--go-module", action="append", default=[], metavar="IMPORT_PATH=GIT_DIR",
                   help="source of a Go dependency whose constants the schema uses (read at the go.mod version), "
                        "e.g. github.com/aliyun/aliyun-oss-go-sdk/oss=/path/to/aliyun-oss-go-sdk")
    p.add_argument("--out", type=Path, default=OUT_DEFAULT)
    args = p.parse_args(argv)
    tf = Source(args.tf_src, args.tf_ref)
    pulumi = Source(args.pulumi_src, args.pulumi_ref) if args.pulumi_src else None
    command = "python tools/provider_schema.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    data = build(tf, pulumi, args.pulumi_ref, command, args.go_module)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dump(data))
    print(f"{args.out}: {len(data['resources'])} resources from {data['provider']}@{data['commit'] or 'worktree'}"
          f" ({data['unparsed_count']} unparsed entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
