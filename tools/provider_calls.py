#!/usr/bin/env python3
"""Walk terraform-provider-alicloud's Go source from each resource's Create/Read/Update/Delete (and each data
source's Read) through the functions they call, and record every cloud API action reached, the call path that
reaches it, and whether every run takes it or only some branch. Output: tests/data/alicloud_provider_calls.json,
which tools/ram_policy.py turns into docs/ram-policy.json.

    python tools/provider_calls.py \
      --tf-src /work/.mirror/aliyun+terraform-provider-alicloud/repo \
      --cs-sdk-src /work/.mirror/alibabacloud-go+cs-20151215/repo

There is no Go parser here, so the walk works on the text: comments and string literals are masked, function
bodies are found by brace matching, and a call is followed when its target is known — a package function, or a
method whose receiver's type the function states (`s` of `func (s *VpcServiceV2)`, `v := VpcService{client}`,
`v := NewXxx(...)`, a parameter, a closure parameter, a struct field). An action is:
- `client.RpcPost("Vpc", "2016-04-28", action, ...)` (and RpcGet, RpcPostWithEndpoint) with `action` the string
  last assigned before the call;
- `client.RoaGet("CS", "2015-12-15", path, ...)` (RoaPost/Put/Delete/Patch): the API whose method and path the
  product's Go SDK declares (alibabacloud-go/cs-20151215 `client/client.go`, `Action` + `Pathname` + `Method`);
  `Roa*WithApiName` and tea `DoRequest(WithAction)` name the action themselves;
- a method call on an SDK client (`*roaCS.Client`, `*ecs.Client` of alibaba-cloud-sdk-go/services/ecs, ...): the
  method's name is the API's (the SDKs generate one method per API); OSS's Go SDK spells some APIs otherwise
  (OSS_SDK);
- `client.Do("Oss", xmlParam("PUT", "2019-05-17", "PutBucketAcl", ...))`, and OSS's raw
  `ossClient.Conn.Do("GET", bucket, "", params)` with `params["policy"]`: GetBucketPolicy.
A call is on a branch when an `if`/`else`/`switch case`/`for range` (of the caller or any function on the path)
encloses it; the conditions are recorded. Early returns are not branches (a Read that stops at a deleted
resource is not the run a policy is for). `tests/test_provider_calls.py` holds the walker to small Go programs and,
where the mirrors are present, the recorded file to a fresh walk.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.gotext import (  # noqa: E402
    ALIYUN_VAR,
    Edge,
    Func,
    Package,
    call_arg,
    conditional_regions,
    explain_flag,
    parse,
    qualify,
    string_value,
)

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "data" / "alicloud_provider_calls.json"
SCHEMA = REPO / "tests" / "data" / "alicloud_provider_schema.json"
# The provider's data sources and read-only resources this program calls (the schema file holds the managed
# resources): Pulumi token -> Terraform name, by the bridge's naming rule (docs/facts-provider.md).
DATA_SOURCES = {
    "alicloud:cs/getKubernetesAddons:getKubernetesAddons": "alicloud_cs_kubernetes_addons",
    "alicloud:cs/getClusterCredential:getClusterCredential": "alicloud_cs_cluster_credential",
    "alicloud:cs/getRegistryEnterpriseInstances:getRegistryEnterpriseInstances": "alicloud_cr_ee_instances",
    "alicloud:dns/getAlidnsDomains:getAlidnsDomains": "alicloud_alidns_domains",
    "alicloud:index/getAccount:getAccount": "alicloud_account",
    "alicloud:index/getZones:getZones": "alicloud_zones",
    "alicloud:ram/getRoles:getRoles": "alicloud_ram_roles",
    "alicloud:oss/getBuckets:getBuckets": "alicloud_oss_buckets",
    "alicloud:oss/getBucketObjects:getBucketObjects": "alicloud_oss_bucket_objects",
}
READ_ONLY = {  # read with Resource.get: only the Read runs
    "alicloud:eflo/nodeGroup:NodeGroup": "alicloud_eflo_node_group",
    "alicloud:eflo/node:Node": "alicloud_eflo_node",
}
# API product code of the provider's RPC/ROA calls -> RAM code. Source: each product's "RAM authorization" page of
# its API reference; cas -> yundun-cert (https://help.aliyun.com/zh/ssl-certificate/developer-reference/api-cas-2020-04-07-ram),
# eflo-controller -> eflo (https://api.aliyun.com/document/eflo-controller/2022-12-15/ram), BssOpenApi -> bssapi
# (https://www.alibabacloud.com/help/doc-detail/91860.html); the others are taken as the product's code
# (docs/uncertain-facts.md).
RAM_CODES = {"Vpc": "vpc", "Alb": "alb", "cas": "yundun-cert", "cr": "cr", "Ram": "ram", "Ecs": "ecs", "CS": "cs",
             "Alidns": "alidns", "Oss": "oss", "Sts": "sts", "eflo-controller": "eflo", "eflo": "eflo",
             "BssOpenApi": "bssapi", "Slb": "slb", "ResourceManager": "resourcemanager", "Kms": "kms",
             "Sls": "log", "cs": "cs"}
# Go SDK package (import path) -> RAM code: a method call on a client of one of these packages is that API.
SDK_PACKAGES = {
    "github.com/alibabacloud-go/cs-20151215/v8/client": "cs",
    "github.com/aliyun/alibaba-cloud-sdk-go/services/ecs": "ecs",
    "github.com/aliyun/alibaba-cloud-sdk-go/services/vpc": "vpc",
    "github.com/aliyun/alibaba-cloud-sdk-go/services/cs": "cs",
    "github.com/aliyun/alibaba-cloud-sdk-go/services/cr_ee": "cr",
    "github.com/aliyun/alibaba-cloud-sdk-go/services/alidns": "alidns",
    "github.com/aliyun/alibaba-cloud-sdk-go/services/ram": "ram",
    "github.com/aliyun/alibaba-cloud-sdk-go/services/sts": "sts",
    "github.com/aliyun/alibaba-cloud-sdk-go/services/slb": "slb",
    "github.com/aliyun/alibaba-cloud-sdk-go/services/ess": "ess",
    "github.com/aliyun/aliyun-oss-go-sdk/oss": "oss",
    "github.com/denverdino/aliyungo/cs": "cs",
}
# Methods of SDK clients that are no API (client plumbing).
SDK_PLUMBING = {"ProcessCommonRequest", "DoAction", "DoActionWithSigner", "Init", "InitWithOptions", "GetConfig",
                "Bucket", "GetEndpoint", "DoRequest", "DoRequestWithAction", "CallApi", "Execute",
                "SetUserAgent", "AppendUserAgent", "Shutdown", "SetConnectTimeout", "SetReadTimeout", "SetHttpProxy",
                "SetHttpsProxy", "SetEndpoint", "SetSecureTransport", "SetSourceIp", "SetTransport"}
# aliyun-oss-go-sdk method -> RAM action(s), where the RAM action is not the method's name with `Set` read as `Put`
# and `CORS`/`ACL` as `Cors`/`Acl` (oss/client.go, oss/bucket.go). RAM actions: the "Permissions" table of each OSS
# API page, e.g. PutBucketTags -> oss:PutBucketTagging (https://www.alibabacloud.com/help/doc-detail/117800.html),
# PutBucketTransferAcceleration -> oss:PutBucketTransferAcceleration
# (https://help.aliyun.com/en/oss/developer-reference/putbuckettransferacceleration); CreateBucket is PutBucket,
# IsBucketExist lists buckets, a multi-object delete of versions needs both deletes (DeleteMultipleObjects).
OSS_SDK = {"CreateBucket": ["PutBucket"], "IsBucketExist": ["ListBuckets"],
           "DeleteObjectVersions": ["DeleteObject", "DeleteObjectVersion"], "DeleteObjects": ["DeleteObject"],
           "SetBucketTransferAcc": ["PutBucketTransferAcceleration"],
           "GetBucketTransferAcc": ["GetBucketTransferAcceleration"],
           # aliyun/aliyun-oss-go-sdk oss/bucket.go: PutObjectFromFile sends PutObject (DoPutObject); IsObjectExist
           # sends GetObjectMeta and GetObjectDetailedMeta HeadObject, which both need oss:GetObject (OSS's
           # HeadObject and GetObjectMeta pages: "you must have the oss:GetObject permission").
           "PutObjectFromFile": ["PutObject"], "IsObjectExist": ["GetObject"],
           "GetObjectDetailedMeta": ["GetObject"], "GetObjectMeta": ["GetObject"]}
ROA_VERBS = {"RoaGet": "GET", "RoaPost": "POST", "RoaPut": "PUT", "RoaDelete": "DELETE", "RoaPatch": "PATCH"}
PHASES = ("create", "read", "update", "delete")
GO_KEYWORDS = {"if", "for", "switch", "func", "return", "go", "defer", "select", "case", "make", "new", "len",
               "append", "cap", "copy", "delete", "panic", "recover", "string", "int", "bool", "float64", "int64",
               "map", "interface", "error", "byte", "rune", "uint", "int32", "float32", "struct", "range"}


def roa_path(path: str) -> str:
    """A ROA path with its parameters as {}: "/clusters/%s/nodepools" -> "/clusters/{}/nodepools"."""
    return re.sub(r"%[a-z]", "{}", path.split("?")[0]).rstrip("/")


class Walker:
    def __init__(self, pkg: Package, roa_apis: dict[tuple[str, str, str], str]):
        self.pkg = pkg
        self.roa_apis = roa_apis  # (RAM code, method, path) -> API
        # connectivity/endpoint.go's host constants (`OpenAckService = "cs.aliyuncs.com"`): a tea common client's
        # product is its host's first label
        self.endpoints = dict(re.findall(r'^\s*(\w+)\s*=\s*"([\w.-]+\.aliyuncs\.com)"',
                                         pkg.files.get("connectivity/endpoint.go", ""), re.M))
        self.unresolved: set[str] = set()
        self._edges: dict[str, list[Edge]] = {}

    # -- types of the names a function uses -------------------------------------------------------------------
    def _var_type(self, f: Func, var: str, offset: int) -> str | None:
        t = self._var_type_raw(f, var, offset)
        return re.sub(r"^\*?connectivity\.", "", t) if t else t

    def _var_type_raw(self, f: Func, var: str, offset: int) -> str | None:
        if var == ALIYUN_VAR:
            return "AliyunClient"
        if var == f.recv_var:
            return f.recv
        if var in f.params:
            return f.params[var]
        masked = f.masked[:offset]
        found = None
        pats = [
            (rf"\b{var}\s*:?=\s*&?(\w+)\{{", lambda m: m.group(1)),
            (rf"\bvar\s+{var}\s+(\*?[\w.]+)", lambda m: m.group(1)),
            (rf"\b{var}(?:\s*,\s*\w+)?\s*:?=\s*New(\w+)\(", lambda m: m.group(1) if m.group(1) in self.pkg.fields
                else self._result(f"New{m.group(1)}")),
            (rf"\b{var}\s*:?=\s*{ALIYUN_VAR}\s*$", lambda m: "AliyunClient"),
            (rf"\b{var}(?:\s*,\s*\w+)?\s*:?=\s*(\w+)\.NewClient\w*\(", lambda m: qualify(
                f"*{m.group(1)}.Client", self.pkg.imports.get(f.file, {})) if m.group(1) in self.pkg.imports.get(
                f.file, {}) else None),
            (rf"\b{var}\s*:?=\s*(\w+)\.client\s*$", lambda m: self._field_type(f, m.group(1), "client", offset)),
            (rf"\bfunc\((?:[^()]*,\s*)?{var}\s+(\*?[\w.]+)[,)]", lambda m: m.group(1)),
            (rf"\b{var}(?:\s*,\s*\w+)?\s*:?=\s*(\w+(?:\.\w+)*)\.(\w+)\(",
             lambda m: self._call_result(f, m.group(1), m.group(2), m.start())),
            # A type assertion: `bucket, _ := raw.(*oss.Bucket)` (the value a WithOssClient closure returned).
            (rf"\b{var}(?:\s*,\s*\w+)?\s*:?=\s*\w+\.\((\*?)(\w+)\.(\w+)\)", lambda m: qualify(
                f"{m.group(1)}{m.group(2)}.{m.group(3)}", self.pkg.imports.get(f.file, {}))
                if m.group(2) in self.pkg.imports.get(f.file, {}) else None),
        ]
        best = -1
        for pat, typ in pats:
            for m in re.finditer(pat, masked, re.M):
                if m.start() > best:
                    t = typ(m)
                    if t:
                        best, found = m.start(), t
        return found

    def _result(self, fn: str) -> str | None:
        g = self.pkg.funcs.get(fn)
        return g.results[0] if g and g.results else None

    def _field_type(self, f: Func, var: str, fld: str, offset: int) -> str | None:
        t = self._var_type(f, var, offset) if var != "meta" else None
        t = (t or "").lstrip("*").split(".")[-1]
        return self.pkg.fields.get(t, {}).get(fld)

    def _call_result(self, f: Func, recv_expr: str, method: str, offset: int) -> str | None:
        t = self._expr_type(f, recv_expr, offset)
        if not t:
            return None
        base = t.lstrip("*")
        if "." in base:  # an SDK type: the OSS client's Bucket() gives a *oss.Bucket
            if method == "Bucket":
                return base.rsplit(".", 1)[0] + ".Bucket"
            return None
        g = self.pkg.funcs.get(f"{base}.{method}")
        return g.results[0] if g and g.results else None

    def _expr_type(self, f: Func, expr: str, offset: int) -> str | None:
        parts = expr.split(".")
        t = self._var_type(f, parts[0], offset)
        for fld in parts[1:]:
            base = (t or "").lstrip("*").split(".")[-1]
            t = self.pkg.fields.get(base, {}).get(fld)
        return re.sub(r"^\*?connectivity\.", "", t) if t else t

    def _sdk_code(self, f: Func, typ: str) -> str | None:
        """The RAM code of an SDK client type (`*ecs.Client`, `*roaCS.Client`) as `f`'s file imports it."""
        m = re.fullmatch(r"\*?(.+)\.(Client|Bucket)", typ or "")
        if not m:
            return None
        path = m.group(1) if "/" in m.group(1) else self.pkg.imports.get(f.file, {}).get(m.group(1))
        return SDK_PACKAGES.get(path or "")

    # -- edges -----------------------------------------------------------------------------------------------
    def edges(self, key: str) -> list[Edge]:
        if key not in self._edges:
            self._edges[key] = self._scan(self.pkg.funcs[key])
        return self._edges[key]

    def _conds(self, f: Func, blocks, offset: int) -> tuple[str, ...]:
        return tuple(explain_flag(f, blocks, c, s) for s, e, c in blocks if s < offset < e)

    def _scan(self, f: Func) -> list[Edge]:
        out: list[Edge] = []
        blocks = conditional_regions(f.masked, f.text)
        body = f.masked.find("{\n")

        def add(kind, target, off):
            out.append(Edge(kind, target, off, self._conds(f, blocks, off)))

        for m in re.finditer(r"(?<![\w.])((?:\w+\.)*)(\w+)\s*\(", f.masked[body:]):
            off = body + m.start(2)
            chain, name = m.group(1).rstrip("."), m.group(2)
            paren = body + m.end() - 1
            if not chain:
                if name in self.pkg.funcs and name not in GO_KEYWORDS:
                    add("call", name, off)
                continue
            if name == "Do" and chain.endswith(".Conn"):  # OSS's raw request: a method on a bucket sub-resource
                code = self._sdk_code(f, self._expr_type(f, chain[:-len(".Conn")], off) or "")
                verb = string_value(f, call_arg(f, paren, 0), off)
                sub = re.findall(r'\bparams\["(\w+)"\]\s*=', f.text[:off])
                if code == "oss" and verb in ("GET", "PUT", "DELETE") and sub:
                    add("action", f"oss:{verb.capitalize()}Bucket{sub[-1].capitalize()}", off)
                else:
                    self.unresolved.add(f"{f.key}: {chain}.Do")
                continue
            recv_type = self._expr_type(f, chain, off)
            base = (recv_type or "").lstrip("*")
            if name in ("DoRequest", "DoRequestWithAction"):  # a tea common client names the action itself
                a = self._tea_action(f, chain, name, paren, off)
                if a:
                    add("action", a, off)
                else:
                    self.unresolved.add(f"{f.key}: {chain}.{name}")
                continue
            if base == "AliyunClient":
                action = self._client_action(f, name, paren, off)
                if action:
                    for a in action:
                        add("action", a, off)
                    continue
            if base == "AliyunClient" and re.match(r"(New|With|load|get|format|init|set)[A-Z]?", name):
                continue  # client plumbing: builds a client for an endpoint, calls no API of the resource
            if base and "." not in base:
                if f"{base}.{name}" in self.pkg.funcs:
                    add("call", f"{base}.{name}", off)
                continue
            if base and "." in base:
                code = self._sdk_code(f, base)
                if code and name not in SDK_PLUMBING and name[0].isupper():
                    api = re.sub(r"(WithOptions|WithContext|WithChan|WithCallback)$", "", name)
                    if code == "oss":
                        for a in OSS_SDK.get(api, [re.sub(r"^Set", "Put", api).replace("CORS", "Cors")
                                                   .replace("ACL", "Acl")]):
                            add("action", f"oss:{a}", off)
                    else:
                        add("action", f"{code}:{api}", off)
                elif not code and base.endswith(".Client") and name[0].isupper() and name not in SDK_PLUMBING:
                    self.unresolved.add(f"{f.key}: {chain}.{name} on {base} (no RAM code for the package)")
                elif code and name in ("ProcessCommonRequest", "DoAction"):
                    # a common request: the API is the `ApiName` last set on the request passed
                    req = call_arg(f, paren, 0)
                    api = None
                    for am in re.finditer(rf'\b{re.escape(req)}\.ApiName\s*=\s*"(\w+)"', f.text[:off]):
                        api = am.group(1)
                    if api:
                        add("action", f"{code}:{api}", off)
                    else:
                        self.unresolved.add(f"{f.key}: {name}({req})")
                continue
            # an unknown receiver: a method defined on one type only
            owners = self.pkg.methods.get(name, [])
            if not owners and not recv_type and re.match(r"(Describe|Create|Delete|Modify|Update|List|Get|Put|Tag|"
                                                         r"Untag|UnTag|Attach|Detach|Install|Upgrade)[A-Z]", name) \
                    and chain.split(".")[0] not in ("d", "request", "response", "object", "resp") \
                    and chain not in self.pkg.imports.get(f.file, {}) and not name.startswith("GetAction"):
                self.unresolved.add(f"{f.key}: {chain}.{name} (receiver type unknown)")
            if chain.split(".")[0] not in ("d", "request", "response", "err", "fmt", "strings", "time", "json",
                                             "tea", "util", "log", "strconv", "schema", "resource", "retry",
                                             "dara", "os") and len(owners) >= 1:
                key = f"{chain}.{name}"
                if len(owners) == 1:
                    add("call", f"{owners[0]}.{name}", off)
                else:
                    self.unresolved.add(f"{f.key}: {key} ({', '.join(sorted(owners))})")
        # method values passed as functions (`s.DescribeAlbListAsynJobs` without a call)
        for m in re.finditer(r"(?<![\w.])(\w+)\.(\w+)\b(?!\s*\()", f.masked[body:]):
            t = self._var_type(f, m.group(1), body + m.start())
            base = (t or "").lstrip("*")
            if base and f"{base}.{m.group(2)}" in self.pkg.funcs:
                add("call", f"{base}.{m.group(2)}", body + m.start(2))
        # package functions passed as values (`Run(d, meta, resourceXRead)`)
        for m in re.finditer(r"(?<=[(,])\s*(\w+)\s*(?=[,)])", f.masked[body:]):
            g = self.pkg.funcs.get(m.group(1))
            if g and not g.recv and m.group(1) not in GO_KEYWORDS:
                add("call", m.group(1), body + m.start(1))
        out.sort(key=lambda e: e.offset)
        return out

    def _client_action(self, f: Func, name: str, paren: int, off: int) -> list[str] | None:
        if name in ("RpcPost", "RpcGet", "RpcPostWithEndpoint"):
            product = string_value(f, call_arg(f, paren, 0), off)
            api = string_value(f, call_arg(f, paren, 2), off)
            if not (product and api):
                self.unresolved.add(f"{f.key}: {name} with an action not known as a string")
                return None
            return [f"{RAM_CODES.get(product, product)}:{api}"]
        if name in ROA_VERBS:
            product = string_value(f, call_arg(f, paren, 0), off)
            path = string_value(f, call_arg(f, paren, 2), off)
            code = RAM_CODES.get(product, product)
            api = self.roa_apis.get((code, ROA_VERBS[name], roa_path(path or "")))
            if not api:
                self.unresolved.add(f"{f.key}: {name} {product} {path}")
                return None
            return [f"{code}:{api}"]
        if name.endswith("WithApiName") and name.replace("WithApiName", "") in ROA_VERBS:
            product = string_value(f, call_arg(f, paren, 0), off)
            api = string_value(f, call_arg(f, paren, 2), off)
            return [f"{RAM_CODES.get(product, product)}:{api}"] if product and api else None
        if name == "Do":
            product = string_value(f, call_arg(f, paren, 0), off)
            params = call_arg(f, paren, 1)
            m = re.search(r'\w*[pP]aram\("\w+",\s*"[0-9-]+",\s*"(\w+)"', params)
            if product and m:
                return [f"{RAM_CODES.get(product, product)}:{m.group(1)}"]
        return None

    def _tea_action(self, f: Func, var: str, name: str, paren: int, off: int) -> str | None:
        """`conn.DoRequest(StringPointer(action), ...)` on a client from `NewTeaCommonClient(connectivity.X)`."""
        made = re.findall(rf"\b{var}(?:\s*,\s*\w+)?\s*:?=\s*.*New(?:Tea|TeaRoa)CommonClient\(connectivity\.(\w+)\)",
                          f.masked[:off])
        if not made:
            return None
        host = self.endpoints.get(made[-1], "")
        code = host.split(".")[0] if host else None
        api = string_value(f, call_arg(f, paren, 0), off)
        return f"{RAM_CODES.get(code, code)}:{api}" if code and api else None

    # -- the walk --------------------------------------------------------------------------------------------
    def walk(self, entry: str) -> dict[str, dict]:
        """action -> {always, path, when, source} for everything reachable from function `entry`. A path that no
        condition guards wins over a guarded one; among those, the shortest (then first in the source)."""
        found: dict[str, dict] = {}
        for unconditional in (True, False):
            seen = {entry: ([entry], ())}
            queue = deque([entry])
            while queue:
                key = queue.popleft()
                path, conds = seen[key]
                f = self.pkg.funcs[key]
                for e in self.edges(key):
                    if unconditional and e.conds:
                        continue
                    allc = conds + tuple(f"{key}: {c}" for c in e.conds)
                    if e.kind == "call":
                        if e.target not in seen:
                            seen[e.target] = (path + [e.target], allc)
                            queue.append(e.target)
                    elif e.target not in found:
                        line = f.line + f.text.count("\n", 0, e.offset)
                        found[e.target] = {"always": not allc, "path": path, "when": list(allc),
                                           "source": f"alicloud/{f.file}:{line}"}
        return found


def roa_apis_from_sdk(client_go: str, code: str) -> dict[tuple[str, str, str], str]:
    """(RAM code, method, path) -> API from a Go SDK's client.go (`Action:`, `Pathname:`, `Method:` per API)."""
    out = {}
    for m in re.finditer(r'Action:\s*dara\.String\("(\w+)"\),.*?Pathname:\s*dara\.String\((.*?)\),\s*\n\s*'
                         r'Method:\s*dara\.String\("(\w+)"\)', client_go, re.S):
        path = re.sub(r'"\s*\+\s*dara\.PercentEncode\([^)]*\)\)\s*\+\s*"', "{}", m.group(2))
        path = re.sub(r'"\s*\+\s*dara\.PercentEncode\([^)]*\)\)\s*$', "{}\"", path)
        path = path.strip('"').rstrip("/")
        out.setdefault((code, m.group(3), path), m.group(1))
    return out


def entries(pkg: Package) -> dict[str, dict[str, str]]:
    """Pulumi token -> {phase: entry function} for the schema file's resources, DATA_SOURCES and READ_ONLY."""
    schema = json.loads(SCHEMA.read_text())["resources"]
    out: dict[str, dict[str, str]] = {}
    todo = {t: (r["factory"], PHASES) for t, r in schema.items() if t.startswith("alicloud:")}
    todo |= {t: (pkg.factories[tf], ("read",)) for t, tf in {**DATA_SOURCES, **READ_ONLY}.items()}
    for token, (factory, phases) in sorted(todo.items()):
        f = pkg.funcs[factory]
        fns = {}
        for phase in phases:
            m = re.search(rf"\b{phase.capitalize()}(?:Context)?:\s*(\w+),", f.masked)
            if m:
                fns[phase] = m.group(1)
        out[token] = fns
    return out


def derive(tf_src: Path, cs_sdk: str) -> tuple[dict, Walker]:
    files = {str(p.relative_to(tf_src / "alicloud")): p.read_text() for p in (tf_src / "alicloud").rglob("*.go")
             if not p.name.endswith("_test.go")}
    pkg = parse(files)
    walker = Walker(pkg, roa_apis_from_sdk(cs_sdk, "cs"))
    out = {}
    for token, fns in entries(pkg).items():
        out[token] = {phase: {"entry": fn, "actions": dict(sorted(walker.walk(fn).items()))}
                      for phase, fn in fns.items()}
    return out, walker


def _checkout(git_dir: Path, commit: str, what: str, into: Path) -> None:
    git = git_dir / ".git" if (git_dir / ".git").exists() else git_dir
    subprocess.run(f"git --git-dir={git} archive {commit} {what} | tar -x -C {into}", shell=True, check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tf-src", type=Path, required=True, help="git dir of aliyun/terraform-provider-alicloud")
    ap.add_argument("--cs-sdk-src", type=Path, required=True, help="git dir of alibabacloud-go/cs-20151215")
    ap.add_argument("--cs-sdk-ref", default="1331d11", help="commit of the cs SDK whose client.go maps ROA paths")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    commit = json.loads(SCHEMA.read_text())["commit"]
    with tempfile.TemporaryDirectory() as tmp:
        _checkout(args.tf_src, commit, "alicloud", Path(tmp))
        git = args.cs_sdk_src / ".git" if (args.cs_sdk_src / ".git").exists() else args.cs_sdk_src
        sdk_commit = subprocess.run(["git", f"--git-dir={git}", "rev-parse", args.cs_sdk_ref], capture_output=True,
                                    text=True, check=True).stdout.strip()
        cs_sdk = subprocess.run(["git", f"--git-dir={git}", "show", f"{sdk_commit}:client/client.go"],
                                capture_output=True, text=True, check=True).stdout
        calls, walker = derive(Path(tmp), cs_sdk)
    doc = {"about": "Cloud API actions the provider's Create/Read/Update/Delete reach, per Pulumi type; generated by "
                    "tools/provider_calls.py (docs/facts-provider.md).",
           "provider_commit": commit, "cs_sdk_commit": sdk_commit,
           "generated_by": "python tools/provider_calls.py --tf-src <terraform-provider-alicloud git dir> "
                           "--cs-sdk-src <alibabacloud-go/cs-20151215 git dir>",
           "types": calls}
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    for u in sorted(walker.unresolved):
        print("unresolved:", u, file=sys.stderr)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
