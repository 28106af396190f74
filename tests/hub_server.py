"""A small fake of the Hugging Face Hub on 127.0.0.1, for the tests.

It speaks the part of the Hub's HTTP API that huggingface_hub uses to push and pull models:

    GET  /api/models/ORG/NAME[/revision/REV]        model info (sha, siblings; ?blobs=true for sizes)
    GET  /api/models/ORG/NAME/tree/REV[/PATH]       tree listing (?recursive=true)
    GET  /api/models/ORG/NAME/refs                  branches and tags
    POST /api/repos/create                          create a repo (409 if it exists)
    POST /api/models/ORG/NAME/branch/BRANCH         create a branch (409 if it exists)
    POST /api/models/ORG/NAME/preupload/REV         upload modes: always "regular" (no LFS, no Xet)
    POST /api/models/ORG/NAME/commit/REV            one commit from an ndjson body
    POST /api/validate-yaml                         model card metadata check
    GET  /api/whoami-v2                             who the token belongs to
    GET  /api/agent-harnesses                       an empty registry (huggingface_hub's user agent)
    HEAD/GET /ORG/NAME/resolve/REV/PATH             file metadata and content, with X-Repo-Commit,
                                                    ETag and, for LFS-tracked files, X-Linked-Etag
                                                    and X-Linked-Size

Errors carry the X-Error-Code header (RepoNotFound, RevisionNotFound, EntryNotFound) that
huggingface_hub turns into its typed exceptions. Private repos answer 401 to requests without a
bearer token (any token is accepted). Every request is recorded in ``FakeHub.log``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

# Suffixes that the Hub's default .gitattributes stores with git-lfs.
LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".h5", ".msgpack", ".npz",
                ".npy", ".onnx", ".zip", ".tar", ".gz")
GITATTRIBUTES = "".join(f"*{s} filter=lfs diff=lfs merge=lfs -text\n" for s in LFS_SUFFIXES).encode()
_COMMIT = re.compile(r"[0-9a-f]{40}")


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a blob with this content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_lfs(path: str) -> bool:
    return path.endswith(LFS_SUFFIXES)


def lfs_pointer(data: bytes) -> bytes:
    return (f"version https://git-lfs.github.com/spec/v1\noid sha256:{hashlib.sha256(data).hexdigest()}\n"
            f"size {len(data)}\n").encode()


class HubError(Exception):
    """An HTTP error answer: status, X-Error-Code and a message."""

    def __init__(self, status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.code, self.headers = status, code, headers or {}


@dataclass
class Commit:
    oid: str
    title: str
    parent: str | None
    files: dict[str, bytes]
    date: str


@dataclass
class Repo:
    repo_id: str
    private: bool = False
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    created: str = ""


class FakeHub:
    """The state of the fake Hub: repos, their commits and branches, and a log of requests."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.log: list[tuple[str, str, str | None]] = []  # (method, path, authorization header)
        self.lock = threading.RLock()
        self._counter = 0

    # -- helpers for tests -------------------------------------------------------------------------

    def create_repo(self, repo_id: str, *, private: bool = False) -> Repo:
        """A repo with the initial commit the Hub makes (a .gitattributes file)."""
        with self.lock:
            if repo_id in self.repos:
                raise HubError(409, f"You already created this model repo: {repo_id}")
            repo = Repo(repo_id, private=private, created=_now())
            self.repos[repo_id] = repo
            self._add_commit(repo, "main", "initial commit", {".gitattributes": GITATTRIBUTES}, set())
            return repo

    def commit(self, repo_id: str, files: dict[str, bytes], *, branch: str = "main", title: str = "test commit",
               deleted: tuple[str, ...] = ()) -> str:
        """Commit ``files`` (path -> content) to ``branch`` of ``repo_id``, creating the repo if needed."""
        with self.lock:
            repo = self.repos.get(repo_id) or self.create_repo(repo_id)
            return self._add_commit(repo, branch, title, files, set(deleted))

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        """The files of ``repo_id`` at ``revision`` (a branch, tag or commit id)."""
        return dict(self._resolve(self.repos[repo_id], revision).files)

    def history(self, repo_id: str, branch: str = "main") -> list[str]:
        """Commit ids of ``branch``, newest first."""
        repo = self.repos[repo_id]
        out, oid = [], repo.branches.get(branch)
        while oid is not None:
            out.append(oid)
            oid = repo.commits[oid].parent
        return out

    def requested(self, method: str | None = None) -> list[str]:
        """Paths requested so far (optionally only those of one HTTP method)."""
        return [path for m, path, _ in self.log if method is None or m == method]

    # -- internals ----------------------------------------------------------------------------------

    def _add_commit(self, repo: Repo, branch: str, title: str, files: dict[str, bytes], deleted: set[str]) -> str:
        parent = repo.branches.get(branch)
        content = dict(repo.commits[parent].files) if parent else {}
        for path in deleted:
            content.pop(path, None)
            for key in [k for k in content if k.startswith(path.rstrip("/") + "/")]:
                content.pop(key)
        content.update(files)
        self._counter += 1
        digest = hashlib.sha1()
        digest.update(f"{repo.repo_id}\n{parent}\n{title}\n{self._counter}\n".encode())
        for path in sorted(content):
            digest.update(f"{path}\0{hashlib.sha256(content[path]).hexdigest()}\n".encode())
        oid = digest.hexdigest()
        repo.commits[oid] = Commit(oid, title, parent, content, _now())
        repo.branches[branch] = oid
        return oid

    def _repo(self, repo_id: str, authorization: str | None) -> Repo:
        repo = self.repos.get(repo_id)
        if repo is None or (repo.private and not (authorization or "").startswith("Bearer ")):
            status = 401 if repo is not None else 404  # the Hub hides private repos behind 401
            raise HubError(status, "Repository not found", "RepoNotFound")
        return repo

    def _resolve(self, repo: Repo, revision: str) -> Commit:
        oid = repo.branches.get(revision) or repo.tags.get(revision)
        if oid is None and _COMMIT.fullmatch(revision) and revision in repo.commits:
            oid = revision
        if oid is None:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return repo.commits[oid]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())


# -- the HTTP layer ---------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub: FakeHub  # set on the subclass made by HubServer
    base_url: str

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_POST(self) -> None:
        self._dispatch("POST")

    # -- plumbing ---------------------------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/")[1:]]
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        auth = self.headers.get("Authorization")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with self.hub.lock:
            self.hub.log.append((method, unquote(url.path), auth))
        try:
            with self.hub.lock:
                answer = self._route(method, parts, query, body, auth)
        except HubError as exc:
            headers = {"X-Error-Message": str(exc), **exc.headers}
            if exc.code:
                headers["X-Error-Code"] = exc.code
            self._send(exc.status, json.dumps({"error": str(exc)}).encode(), "application/json", headers, method)
            return
        except Exception as exc:  # a bug in the fake: answer 400 so that clients do not retry
            self._send(400, json.dumps({"error": f"fake hub failed: {exc!r}"}).encode(), "application/json", {},
                       method)
            return
        status, payload, headers = answer
        if isinstance(payload, bytes):
            self._send(status, payload, headers.pop("Content-Type", "application/octet-stream"), headers, method)
        else:
            self._send(status, json.dumps(payload).encode(), "application/json", headers, method)

    def _send(self, status: int, data: bytes, content_type: str, headers: dict[str, str], method: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", headers.pop("Content-Length", str(len(data))))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(data)

    def _route(self, method: str, parts: list[str], query: dict[str, str], body: bytes, auth: str | None):
        hub = self.hub
        if parts[:2] == ["api", "repos"] and parts[2:] == ["create"] and method == "POST":
            return self._create_repo(json.loads(body or b"{}"))
        if parts[:2] == ["api", "validate-yaml"] and method == "POST":
            return _validate_yaml(json.loads(body or b"{}"))
        if parts[:2] == ["api", "agent-harnesses"] and method == "GET":  # read by huggingface_hub's user agent
            return 200, {"standardEnvVars": [], "harnesses": {}}, {}
        if parts[:2] == ["api", "whoami-v2"] and method == "GET":
            if not auth:
                raise HubError(401, "Invalid credentials in Authorization header")
            return 200, {"type": "user", "name": "tester", "auth": {"type": "access_token"}}, {}
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            repo = hub._repo(f"{parts[2]}/{parts[3]}", auth)
            rest = parts[4:]
            if not rest and method == "GET":
                return 200, self._model_info(repo, "main", query), {}
            if rest[:1] == ["revision"] and len(rest) == 2 and method == "GET":
                return 200, self._model_info(repo, rest[1], query), {}
            if rest[:1] == ["tree"] and len(rest) >= 2 and method == "GET":
                return 200, self._tree(repo, rest[1], "/".join(rest[2:]), query), {}
            if rest == ["refs"] and method == "GET":
                return 200, self._refs(repo), {}
            if rest[:1] == ["branch"] and len(rest) == 2 and method == "POST":
                return self._create_branch(repo, rest[1], json.loads(body or b"{}"))
            if rest[:1] == ["preupload"] and len(rest) == 2 and method == "POST":
                return 200, self._preupload(repo, rest[1], json.loads(body or b"{}")), {}
            if rest[:1] == ["commit"] and len(rest) == 2 and method == "POST":
                return self._commit(repo, rest[1], body, query)
        if len(parts) >= 5 and parts[2] == "resolve" and parts[0] not in ("api", "datasets", "spaces"):
            if method in ("GET", "HEAD"):
                return self._resolve_file(f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:]), auth)
        raise HubError(404, f"Sorry, we can't find the page you are looking for: /{'/'.join(parts)}")

    # -- endpoints --------------------------------------------------------------------------------

    def _create_repo(self, payload: dict) -> tuple[int, dict, dict]:
        if payload.get("type", "model") != "model":
            raise HubError(400, "this fake Hub holds model repos only")
        name, org = payload.get("name"), payload.get("organization") or "tester"
        if not name:
            raise HubError(400, "repo name is required")
        repo_id = f"{org}/{name}"
        private = payload.get("visibility") == "private" or bool(payload.get("private"))
        url = f"{self.base_url}/{repo_id}"
        if repo_id in self.hub.repos:  # the Hub's 409 answer names the existing repo's url
            return 409, {"error": "You already created this model repo", "url": url}, {}
        self.hub.create_repo(repo_id, private=private)
        return 200, {"url": url, "name": repo_id, "id": repo_id}, {}

    def _model_info(self, repo: Repo, revision: str, query: dict[str, str]) -> dict:
        commit = self.hub._resolve(repo, revision)
        blobs = query.get("blobs", "").lower() in ("1", "true")
        siblings = []
        for path in sorted(commit.files):
            entry: dict[str, Any] = {"rfilename": path}
            if blobs:
                data = commit.files[path]
                entry.update(size=len(data), blobId=git_blob_sha1(lfs_pointer(data) if is_lfs(path) else data))
                if is_lfs(path):
                    entry["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                                    "pointerSize": len(lfs_pointer(data))}
            siblings.append(entry)
        card = _front_matter(commit.files.get("README.md", b"").decode("utf-8", "replace"))
        info = {
            "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24], "id": repo.repo_id, "modelId": repo.repo_id,
            "author": repo.repo_id.split("/")[0], "sha": commit.oid, "lastModified": commit.date,
            "createdAt": repo.created, "private": repo.private, "disabled": False, "gated": False, "downloads": 0,
            "likes": 0, "tags": list(card.get("tags") or []) if isinstance(card, dict) else [], "siblings": siblings,
        }
        if isinstance(card, dict) and card:
            info["cardData"] = card
            if isinstance(card.get("library_name"), str):
                info["library_name"] = card["library_name"]
        return info

    def _tree(self, repo: Repo, revision: str, prefix: str, query: dict[str, str]) -> list[dict]:
        commit = self.hub._resolve(repo, revision)
        recursive = query.get("recursive", "").lower() in ("1", "true")
        base = prefix.rstrip("/") + "/" if prefix else ""
        entries: dict[str, dict] = {}
        for path in sorted(commit.files):
            if not path.startswith(base):
                continue
            rest = path[len(base):]
            if "/" in rest and not recursive:
                folder = base + rest.split("/")[0]
                entries.setdefault(folder, {"type": "directory", "oid": hashlib.sha1(folder.encode()).hexdigest(),
                                            "size": 0, "path": folder})
                continue
            if recursive:  # the folders above a file are listed too
                pieces = rest.split("/")[:-1]
                for i in range(len(pieces)):
                    folder = base + "/".join(pieces[: i + 1])
                    entries.setdefault(folder, {"type": "directory",
                                                "oid": hashlib.sha1(folder.encode()).hexdigest(), "size": 0,
                                                "path": folder})
            data = commit.files[path]
            entry: dict[str, Any] = {"type": "file", "size": len(data), "path": path,
                                     "oid": git_blob_sha1(lfs_pointer(data) if is_lfs(path) else data)}
            if is_lfs(path):
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                                "pointerSize": len(lfs_pointer(data))}
            entries[path] = entry
        if base and not entries:
            raise HubError(404, f"{prefix} does not exist at {revision}", "EntryNotFound")
        return list(entries.values())

    def _refs(self, repo: Repo) -> dict:
        def ref(kind: str, name: str, oid: str) -> dict:
            return {"name": name, "ref": f"refs/{kind}/{name}", "targetCommit": oid}

        return {"branches": [ref("heads", n, o) for n, o in sorted(repo.branches.items())],
                "tags": [ref("tags", n, o) for n, o in sorted(repo.tags.items())], "converts": []}

    def _create_branch(self, repo: Repo, branch: str, payload: dict) -> tuple[int, dict, dict]:
        if branch in repo.branches:
            raise HubError(409, f"Reference refs/heads/{branch} already exists")
        start = self.hub._resolve(repo, payload.get("startingPoint") or "main")
        repo.branches[branch] = start.oid
        return 200, {}, {}

    def _preupload(self, repo: Repo, revision: str, payload: dict) -> dict:
        try:
            existing = self.hub._resolve(repo, revision).files
        except HubError:
            existing = {}  # a branch about to be created by the commit
        files = []
        for item in payload.get("files", []):
            path = item["path"]
            answer = {"path": path, "uploadMode": "regular", "shouldIgnore": False}
            if path in existing:
                answer["oid"] = git_blob_sha1(existing[path])
            files.append(answer)
        return {"files": files, "commitOid": repo.branches.get(revision)}

    def _commit(self, repo: Repo, revision: str, body: bytes, query: dict[str, str]) -> tuple[int, dict, dict]:
        if query.get("create_pr"):
            raise HubError(400, "this fake Hub does not open pull requests")
        if revision not in repo.branches:
            if _COMMIT.fullmatch(revision) and revision in repo.commits:
                raise HubError(400, f"Invalid rev id: {revision} is a commit, not a branch")
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        header: dict = {}
        files: dict[str, bytes] = {}
        deleted: list[str] = []
        for line in body.splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            key, value = item.get("key"), item.get("value") or {}
            if key == "header":
                header = value
            elif key == "file":
                if value.get("encoding") != "base64":
                    raise HubError(400, f"unsupported encoding {value.get('encoding')!r}")
                files[value["path"]] = base64.b64decode(value["content"])
            elif key in ("deletedFile", "deletedFolder"):
                deleted.append(value["path"])
            elif key == "lfsFile":
                raise HubError(400, "this fake Hub takes regular uploads only (preupload never asks for LFS)")
            else:
                raise HubError(400, f"unknown commit operation {key!r}")
        if not header.get("summary"):
            raise HubError(400, "the commit needs a summary")
        parent = header.get("parentCommit")
        if parent and parent != repo.branches[revision]:
            raise HubError(412, "A commit has happened since the parent commit. Please pull and retry.")
        oid = self.hub._add_commit(repo, revision, header["summary"], files, set(deleted))
        return 200, {"success": True, "commitOid": oid, "commitUrl": f"{self.base_url}/{repo.repo_id}/commit/{oid}",
                     "hookOutput": "", "pullRequestUrl": None}, {}

    def _resolve_file(self, repo_id: str, revision: str, path: str, auth: str | None):
        repo = self.hub._repo(repo_id, auth)
        commit = self.hub._resolve(repo, revision)
        if path not in commit.files:
            raise HubError(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": commit.oid})
        data = commit.files[path]
        headers = {"X-Repo-Commit": commit.oid, "Accept-Ranges": "bytes"}
        if is_lfs(path):
            sha = hashlib.sha256(data).hexdigest()
            headers.update({"ETag": f'"{sha}"', "X-Linked-Etag": f'"{sha}"', "X-Linked-Size": str(len(data))})
        else:
            headers["ETag"] = f'"{git_blob_sha1(data)}"'
        status = 200
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or "")
        if match:
            start = int(match.group(1))
            stop = int(match.group(2)) + 1 if match.group(2) else len(data)
            headers["Content-Range"] = f"bytes {start}-{stop - 1}/{len(data)}"
            data, status = data[start:stop], 206
        return status, data, headers


def _front_matter(text: str) -> Any:
    """The YAML metadata block at the top of a model card ({} if none)."""
    match = re.match(r"---\s*\n(.*?)\n---\s*(\n|$)", text, re.S)
    if not match:
        return {}
    return yaml.safe_load(match.group(1)) or {}


def _validate_yaml(payload: dict) -> tuple[int, dict, dict]:
    """Check a card's metadata the way the Hub does for the keys genzoo writes."""
    try:
        meta = _front_matter(payload.get("content") or "")
    except yaml.YAMLError as exc:
        return 400, {"errors": [{"message": f"invalid YAML: {exc}"}], "warnings": []}, {}
    if not meta:
        return 200, {"errors": [], "warnings": [{"message": "empty or missing yaml metadata in repo card"}]}, {}
    errors = []
    if not isinstance(meta, dict):
        errors.append("metadata must be a mapping")
    else:
        for key in ("license", "license_name", "license_link", "library_name", "pipeline_tag"):
            if key in meta and not isinstance(meta[key], str):
                errors.append(f'"{key}" must be a string')
        for key in ("tags", "datasets", "metrics"):
            if key in meta and not (isinstance(meta[key], list) and all(isinstance(v, str) for v in meta[key])):
                errors.append(f'"{key}" must be a list of strings')
        if meta.get("license") == "other" and "license_name" not in meta:
            errors.append('"license_name" is required when "license" is "other"')
    if errors:
        return 400, {"errors": [{"message": m} for m in errors], "warnings": []}, {}
    return 200, {"errors": [], "warnings": []}, {}


class HubServer:
    """Runs a FakeHub over HTTP on 127.0.0.1 in a background thread (use as a context manager)."""

    def __init__(self, hub: FakeHub | None = None) -> None:
        self.hub = hub or FakeHub()
        handler = type("Handler", (_Handler,), {"hub": self.hub, "base_url": ""})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        handler.base_url = self.url
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-hub", daemon=True)

    def start(self) -> "HubServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "HubServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
