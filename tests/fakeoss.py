"""A small in-memory stand-in for OSS that alibabacloud-oss-v2 can talk to.

It serves plain HTTP on 127.0.0.1 (random port). Because the endpoint is an IP address, the SDK
switches to path-style addressing (`/<bucket>/<key>`) by itself (_resolve_address_style in
alibabacloud_oss_v2/_client.py), so no DNS tricks are needed. Signatures are not checked.

Supported: PutObject, GetObject, HeadObject, DeleteObject, CopyObject, ListObjectsV2 (prefix,
delimiter, max-keys, continuation-token, encoding-type=url), InitiateMultipartUpload, UploadPart,
UploadPartCopy, CompleteMultipartUpload, AbortMultipartUpload, ListMultipartUploads (paged),
GetBucketLifecycle. Every object carries an ETag and x-oss-hash-crc64ecma computed like OSS does.
`x-oss-forbid-overwrite: true` on PutObject, CopyObject,
InitiateMultipartUpload and CompleteMultipartUpload is honoured atomically (409 FileAlreadyExists), as OSS does
in a bucket without versioning (OSS ignores the header once versioning is enabled or suspended; the fake has no
versioning).

Test hooks:
- `fail_next(n, status=503, method=None, op=None, key=None, prefix=None)`: the next n matching requests get
  an error response (after their body is read, like a real server hiccup); `prefix` matches a listing's
  `prefix` parameter.
- `corrupt_copies(key_substring)`: CopyObject/UploadPartCopy of a matching key stores damaged
  bytes of the same size, so only a checksum can tell.
- `set_lifecycle(bucket, rules)`: what GetBucketLifecycle returns (dicts with id, prefix, days and optional
  status); without it the bucket has none (404 NoSuchLifecycle).
- `log`: every request as a `Request(method, op, bucket, key, bytes, status)`.

Use it as a context manager (`with FakeOss() as server: ...`, then `server.client()` for an SDK
client), or through the `fake_oss` fixture below (`pytest_plugins = ["tests.fakeoss"]` in the top
conftest, or a module-level fixture wrapping `FakeOss()` as the pipeline and teardown tests do).
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import parse_qs, quote, unquote, urlsplit
from xml.etree import ElementTree as ET
from xml.sax.saxutils import escape

import alibabacloud_oss_v2 as oss
import pytest
from alibabacloud_oss_v2.crc import Crc64


def crc64(data: bytes) -> str:
    c = Crc64(0)
    c.update(data)
    return str(c.sum64())


@dataclass
class StoredObject:
    data: bytes
    etag: str  # quoted, as OSS sends it
    object_type: str = "Normal"
    content_type: str = "application/octet-stream"
    last_modified: float = field(default_factory=time.time)

    @property
    def crc64(self) -> str:
        return crc64(self.data)


@dataclass
class Upload:
    bucket: str
    key: str
    parts: dict[int, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class Request:
    method: str
    op: str
    bucket: str | None
    key: str | None
    bytes: int
    status: int


@dataclass
class _Failure:
    remaining: int
    status: int
    method: str | None
    op: str | None
    key: str | None
    prefix: str | None = None

    def matches(self, method: str, op: str, key: str | None, prefix: str | None) -> bool:
        return ((self.method is None or self.method == method)
                and (self.op is None or self.op == op)
                and (self.key is None or (key is not None and self.key in key))
                and (self.prefix is None or self.prefix == prefix))


def _md5_etag(data: bytes) -> str:
    return '"' + hashlib.md5(data).hexdigest().upper() + '"'


def _http_date(ts: float) -> str:
    return email.utils.formatdate(ts, usegmt=True)


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(ts))


def _error_xml(code: str, message: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{escape(message)}'
            f"</Message><RequestId>fake</RequestId><HostId>fakeoss</HostId></Error>").encode()


class FakeOss:
    """An in-memory OSS on 127.0.0.1; buckets spring into existence on first use."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], StoredObject] = {}
        self.uploads: dict[str, Upload] = {}
        self.log: list[Request] = []
        self._failures: list[_Failure] = []
        self._corrupt: list[str] = []
        self.lifecycle: dict[str, list[dict]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Self:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        # A short poll interval so stop() (which waits for the next poll) does not add half a second per test.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fakeoss", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def client(self, *, max_attempts: int = 3) -> oss.Client:
        """An SDK client for this server: dummy keys, and retries without back-off so tests stay fast."""
        cfg = oss.config.load_default()
        cfg.region = "cn-hangzhou"
        cfg.endpoint = self.endpoint
        cfg.credentials_provider = oss.credentials.StaticCredentialsProvider("fake-id", "fake-secret")
        cfg.retryer = oss.retry.StandardRetryer(max_attempts=max_attempts,
                                                backoff_delayer=oss.retry.FixedDelayBackoff(0))
        return oss.Client(cfg)

    # ------------------------------------------------------------------ test hooks
    def fail_next(self, n: int, *, status: int = 503, method: str | None = None, op: str | None = None,
                  key: str | None = None, prefix: str | None = None) -> None:
        with self._lock:
            self._failures.append(_Failure(remaining=n, status=status, method=method, op=op, key=key, prefix=prefix))

    def set_lifecycle(self, bucket: str, rules: list[dict]) -> None:
        with self._lock:
            self.lifecycle[bucket] = list(rules)

    def corrupt_copies(self, key_substring: str) -> None:
        with self._lock:
            self._corrupt.append(key_substring)

    def put(self, bucket: str, key: str, data: bytes) -> None:
        """Seed an object directly (no HTTP, not logged)."""
        with self._lock:
            self.objects[(bucket, key)] = StoredObject(data=data, etag=_md5_etag(data))

    def get(self, bucket: str, key: str) -> bytes | None:
        with self._lock:
            o = self.objects.get((bucket, key))
            return None if o is None else o.data

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        with self._lock:
            return sorted(k for b, k in self.objects if b == bucket and k.startswith(prefix))

    def requests(self, *, op: str | None = None, method: str | None = None) -> list[Request]:
        with self._lock:
            return [r for r in self.log if (op is None or r.op == op) and (method is None or r.method == method)]

    def clear_log(self) -> None:
        with self._lock:
            self.log.clear()

    # ------------------------------------------------------------------ internals
    def _take_failure(self, method: str, op: str, key: str | None, prefix: str | None = None) -> int | None:
        with self._lock:
            for f in self._failures:
                if f.remaining > 0 and f.matches(method, op, key, prefix):
                    f.remaining -= 1
                    return f.status
        return None

    def _damaged(self, key: str, data: bytes) -> bytes:
        with self._lock:
            hit = any(s in key for s in self._corrupt)
        if not hit or not data:
            return data
        return bytes([data[0] ^ 0xFF]) + data[1:]


def _op_name(method: str, key: str | None, query: dict[str, str], headers) -> str:
    copy_source = headers.get("x-oss-copy-source")
    if key is None or key == "":
        if method == "GET" and "lifecycle" in query:
            return "GetBucketLifecycle"
        if method == "GET" and "uploads" in query:
            return "ListMultipartUploads"
        if method == "GET":
            return "ListObjectsV2" if query.get("list-type") == "2" else "ListObjects"
        return f"Bucket{method.title()}"
    if method == "PUT":
        if "partNumber" in query and "uploadId" in query:
            return "UploadPartCopy" if copy_source else "UploadPart"
        return "CopyObject" if copy_source else "PutObject"
    if method == "POST":
        if "uploads" in query:
            return "InitiateMultipartUpload"
        if "uploadId" in query:
            return "CompleteMultipartUpload"
        return "PostObject"
    if method == "DELETE":
        return "AbortMultipartUpload" if "uploadId" in query else "DeleteObject"
    if method == "HEAD":
        return "HeadObject"
    if method == "GET":
        return "ListParts" if "uploadId" in query else "GetObject"
    return method


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so the SDK's requests session can keep connections alive; every response sets Content-Length.
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes; without TCP_NODELAY each response waits on a delayed ACK.
    disable_nagle_algorithm = True
    fake: FakeOss

    def log_message(self, format, *args) -> None:
        pass  # the request log is kept in FakeOss.log instead of stderr

    # -- plumbing --------------------------------------------------------------
    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
              content_length: int | None = None) -> None:
        # Log before answering: once the client has its response the test may read the log at once.
        op, bucket, key, size = self._request_info
        with self.fake._lock:
            self.fake.log.append(Request(method=self.command, op=op, bucket=bucket, key=key, bytes=size,
                                         status=status))
        self.send_response(status)
        self.send_header("x-oss-request-id", uuid.uuid4().hex)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body) if content_length is None else content_length))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, code: str, message: str) -> int:
        body = _error_xml(code, message)
        if self.command == "HEAD":
            # HEAD responses carry no body; OSS puts the error document base64-encoded in x-oss-err.
            self._send(status, headers={"x-oss-err": base64.b64encode(body).decode()}, content_length=0)
        else:
            self._send(status, body, {"Content-Type": "application/xml"})
        return status

    @property
    def _forbid_overwrite(self) -> bool:
        return (self.headers.get("x-oss-forbid-overwrite") or "").lower() == "true"

    def _exists_error(self) -> int:
        return self._error(409, "FileAlreadyExists", "The object you specified already exists and can not be overwritten.")

    def _store(self, bucket: str, key: str, o: StoredObject) -> bool:
        """Store `o` unless forbid-overwrite is set and the key exists; check and write under one lock."""
        with self.fake._lock:
            if self._forbid_overwrite and (bucket, key) in self.fake.objects:
                return False
            self.fake.objects[(bucket, key)] = o
            return True

    def _xml(self, body: str, headers: dict[str, str] | None = None) -> int:
        data = ('<?xml version="1.0" encoding="UTF-8"?>\n' + body).encode()
        self._send(200, data, {"Content-Type": "application/xml", **(headers or {})})
        return 200

    def _object_headers(self, o: StoredObject) -> dict[str, str]:
        return {
            "ETag": o.etag,
            "x-oss-hash-crc64ecma": o.crc64,
            "x-oss-object-type": o.object_type,
            "x-oss-storage-class": "Standard",
            "Last-Modified": _http_date(o.last_modified),
            "Content-Type": o.content_type,
        }

    def _dispatch(self) -> None:
        fake = self.fake
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        path = url.path.lstrip("/")
        bucket, _, raw_key = path.partition("/")
        key = unquote(raw_key) if raw_key else None
        body = self._read_body()
        op = _op_name(self.command, key, query, self.headers)
        self._request_info = (op, bucket or None, key, len(body))
        status = fake._take_failure(self.command, op, key, query.get("prefix"))
        if status is not None:
            self._error(status, "ServiceUnavailable" if status == 503 else "InternalError", "injected failure")
        else:
            self._handle(op, bucket, key, query, body)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _dispatch

    # -- operations ------------------------------------------------------------
    def _handle(self, op: str, bucket: str, key: str | None, query: dict[str, str], body: bytes) -> int:
        fake = self.fake
        if op == "ListObjectsV2":
            return self._list_v2(bucket, query)
        if op == "GetBucketLifecycle":
            return self._lifecycle(bucket)
        if op == "ListMultipartUploads":
            return self._list_uploads(bucket, query)
        if op == "PutObject":
            o = StoredObject(data=body, etag=_md5_etag(body),
                             content_type=self.headers.get("Content-Type") or "application/octet-stream")
            if not self._store(bucket, key, o):
                return self._exists_error()
            self._send(200, headers={"ETag": o.etag, "x-oss-hash-crc64ecma": o.crc64,
                                     "Content-MD5": base64.b64encode(hashlib.md5(body).digest()).decode()})
            return 200
        if op in ("GetObject", "HeadObject"):
            with fake._lock:
                o = fake.objects.get((bucket, key))
            if o is None:
                return self._error(404, "NoSuchKey", "The specified key does not exist.")
            self._send(200, o.data, self._object_headers(o), content_length=len(o.data))
            return 200
        if op == "DeleteObject":
            with fake._lock:
                fake.objects.pop((bucket, key), None)
            self._send(204)
            return 204
        if op in ("CopyObject", "UploadPartCopy"):
            return self._copy(op, bucket, key, query)
        if op == "InitiateMultipartUpload":
            with fake._lock:
                exists = (bucket, key) in fake.objects
            if exists and self._forbid_overwrite:
                return self._exists_error()
            upload_id = uuid.uuid4().hex
            with fake._lock:
                fake.uploads[upload_id] = Upload(bucket=bucket, key=key)
            return self._xml(f"<InitiateMultipartUploadResult><Bucket>{bucket}</Bucket><Key>{escape(key)}</Key>"
                             f"<UploadId>{upload_id}</UploadId></InitiateMultipartUploadResult>")
        if op == "UploadPart":
            with fake._lock:
                upload = fake.uploads.get(query["uploadId"])
                if upload is not None:
                    upload.parts[int(query["partNumber"])] = body
            if upload is None:
                return self._error(404, "NoSuchUpload", "The specified upload does not exist.")
            self._send(200, headers={"ETag": _md5_etag(body), "x-oss-hash-crc64ecma": crc64(body)})
            return 200
        if op == "CompleteMultipartUpload":
            return self._complete(bucket, key, query["uploadId"], body)
        if op == "AbortMultipartUpload":
            with fake._lock:
                fake.uploads.pop(query["uploadId"], None)
            self._send(204)
            return 204
        return self._error(501, "NotImplemented", f"fakeoss does not implement {op}")

    def _copy(self, op: str, bucket: str, key: str, query: dict[str, str]) -> int:
        fake = self.fake
        source = unquote(self.headers["x-oss-copy-source"]).lstrip("/")
        src_bucket, _, src_key = source.partition("/")
        src_key = src_key.split("?versionId=")[0]
        with fake._lock:
            src = fake.objects.get((src_bucket, src_key))
        if src is None:
            return self._error(404, "NoSuchKey", "The specified source key does not exist.")
        data = src.data
        if op == "UploadPartCopy":
            rng = self.headers.get("x-oss-copy-source-range")
            if rng:
                start, end = rng.removeprefix("bytes=").split("-")
                data = data[int(start):int(end) + 1]
            data = fake._damaged(key, data)
            with fake._lock:
                upload = fake.uploads.get(query["uploadId"])
                if upload is not None:
                    upload.parts[int(query["partNumber"])] = data
            if upload is None:
                return self._error(404, "NoSuchUpload", "The specified upload does not exist.")
            return self._xml(f"<CopyPartResult><LastModified>{_iso(time.time())}</LastModified>"
                             f"<ETag>{_md5_etag(data)}</ETag></CopyPartResult>")
        data = fake._damaged(key, data)
        o = StoredObject(data=data, etag=src.etag if data == src.data else _md5_etag(data),
                         object_type=src.object_type, content_type=src.content_type)
        if not self._store(bucket, key, o):
            return self._exists_error()
        return self._xml(f"<CopyObjectResult><LastModified>{_iso(o.last_modified)}</LastModified>"
                         f"<ETag>{o.etag}</ETag></CopyObjectResult>", {"x-oss-hash-crc64ecma": o.crc64})

    def _complete(self, bucket: str, key: str, upload_id: str, body: bytes) -> int:
        fake = self.fake
        with fake._lock:
            upload = fake.uploads.pop(upload_id, None)
        if upload is None:
            return self._error(404, "NoSuchUpload", "The specified upload does not exist.")
        numbers = [int(p.findtext("PartNumber")) for p in ET.fromstring(body).iter("Part")]
        if numbers != sorted(numbers) or any(n not in upload.parts for n in numbers):
            return self._error(400, "InvalidPart", "One or more of the specified parts could not be found.")
        data = b"".join(upload.parts[n] for n in numbers)
        digest = hashlib.md5(b"".join(hashlib.md5(upload.parts[n]).digest() for n in numbers)).hexdigest()
        o = StoredObject(data=data, etag=f'"{digest.upper()}-{len(numbers)}"', object_type="Multipart")
        if not self._store(bucket, key, o):
            return self._exists_error()
        return self._xml(f"<CompleteMultipartUploadResult><Bucket>{bucket}</Bucket><Key>{quote(key)}</Key>"
                         f"<ETag>{o.etag}</ETag><EncodingType>url</EncodingType></CompleteMultipartUploadResult>",
                         {"x-oss-hash-crc64ecma": o.crc64})

    def _lifecycle(self, bucket: str) -> int:
        with self.fake._lock:
            rules = self.fake.lifecycle.get(bucket)
        if not rules:
            return self._error(404, "NoSuchLifecycle", "No Row found in Lifecycle Table.")
        body = "".join(
            f"<Rule><ID>{escape(r['id'])}</ID><Prefix>{escape(r.get('prefix', ''))}</Prefix>"
            f"<Status>{r.get('status', 'Enabled')}</Status><Expiration><Days>{r['days']}</Days></Expiration></Rule>"
            for r in rules)
        return self._xml(f"<LifecycleConfiguration>{body}</LifecycleConfiguration>")

    def _list_v2(self, bucket: str, query: dict[str, str]) -> int:
        fake = self.fake
        prefix = query.get("prefix", "")
        delimiter = query.get("delimiter", "")
        max_keys = int(query.get("max-keys") or 100)
        after = query.get("continuation-token") or query.get("start-after") or ""
        url_encode = query.get("encoding-type") == "url"
        enc = (lambda s: quote(s, safe="/")) if url_encode else escape
        with fake._lock:
            items = sorted((k, o) for (b, k), o in fake.objects.items() if b == bucket and k.startswith(prefix))
        contents, prefixes, last, truncated = [], [], "", False
        for k, o in items:
            if k <= after:
                continue
            common = None
            if delimiter and delimiter in k[len(prefix):]:
                common = prefix + k[len(prefix):].split(delimiter)[0] + delimiter
                if common in prefixes:  # keys of one common prefix are contiguous: fold them in
                    last = k
                    continue
            if len(contents) + len(prefixes) >= max_keys:
                truncated = True
                break
            if common is not None:
                prefixes.append(common)
                last = k
                continue
            contents.append(f"<Contents><Key>{enc(k)}</Key><LastModified>{_iso(o.last_modified)}</LastModified>"
                            f"<ETag>{o.etag}</ETag><Type>{o.object_type}</Type><Size>{len(o.data)}</Size>"
                            f"<StorageClass>Standard</StorageClass></Contents>")
            last = k
        body = (f"<ListBucketResult><Name>{bucket}</Name><Prefix>{enc(prefix)}</Prefix><MaxKeys>{max_keys}</MaxKeys>"
                f"<Delimiter>{enc(delimiter)}</Delimiter><IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"
                + (f"<NextContinuationToken>{enc(last)}</NextContinuationToken>" if truncated else "")
                + ("<EncodingType>url</EncodingType>" if url_encode else "")
                + f"<KeyCount>{len(contents) + len(prefixes)}</KeyCount>"
                + "".join(contents)
                + "".join(f"<CommonPrefixes><Prefix>{enc(p)}</Prefix></CommonPrefixes>" for p in prefixes)
                + "</ListBucketResult>")
        return self._xml(body)

    def _list_uploads(self, bucket: str, query: dict[str, str]) -> int:
        """Incomplete uploads in (key, upload id) order, paged by key-marker/upload-id-marker as OSS does."""
        max_uploads = int(query.get("max-uploads") or 1000)
        after = (query.get("key-marker") or "", query.get("upload-id-marker") or "")
        enc = (lambda s: quote(s, safe="/")) if query.get("encoding-type") == "url" else escape
        with self.fake._lock:
            pending = sorted((u.key, uid) for uid, u in self.fake.uploads.items() if u.bucket == bucket)
        pending = [p for p in pending if p > after]
        page, truncated = pending[:max_uploads], len(pending) > max_uploads
        body = (f"<ListMultipartUploadsResult><Bucket>{bucket}</Bucket><MaxUploads>{max_uploads}</MaxUploads>"
                f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"
                + (f"<NextKeyMarker>{enc(page[-1][0])}</NextKeyMarker><NextUploadIdMarker>{page[-1][1]}"
                   "</NextUploadIdMarker>" if truncated else "")
                + ("<EncodingType>url</EncodingType>" if query.get("encoding-type") == "url" else "")
                + "".join(f"<Upload><Key>{enc(k)}</Key><UploadId>{uid}</UploadId>"
                          f"<Initiated>2026-12-01T00:00:00.000Z</Initiated></Upload>" for k, uid in page)
                + "</ListMultipartUploadsResult>")
        return self._xml(body)


@pytest.fixture
def fake_oss():
    """A running FakeOss, stopped after the test."""
    with FakeOss() as server:
        yield server
