"""The Agent Skill: SKILL.md validity, `gptoss-doctor skill package`, and scripts/lookup.py over real HTTP."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import skills_ref
from click.testing import CliRunner
from skills_ref.parser import parse_frontmatter

from service.api.identity import SERVICE_HEADER
from service.cli import main
from service.config import DEFAULT_PORT
from service.models import LookupResponse
from service.skill_package import REFERENCE_DOCS, InvalidSkill, build_package, validate_package

REPO_ROOT = Path(__file__).resolve().parent.parent
SKILL_NAME = "gpt-oss-vllm-troubleshooting"
LOOKUP_SCRIPT = REPO_ROOT / "skill" / "scripts" / "lookup.py"
EXPECTED_FILES = {
    "SKILL.md",
    "references/known-issues.md",
    "references/model-updates.md",
    "references/tool-calling-setup.md",
    "scripts/lookup.py",
}


# --- SKILL.md -------------------------------------------------------------------------------------


def test_skill_md_frontmatter_follows_the_spec() -> None:
    metadata, body = parse_frontmatter((REPO_ROOT / "skill" / "SKILL.md").read_text(encoding="utf-8"))
    assert metadata["name"] == SKILL_NAME
    assert 1 <= len(metadata["description"]) <= 1024
    for needle in ("HarmonyError", "tool call", "vLLM", "LangChain"):
        assert needle in metadata["description"]
    assert len(body.splitlines()) < 500
    assert "scripts/lookup.py" in body
    assert "references/known-issues.md" in body


# --- packaging ------------------------------------------------------------------------------------


def _agentskills() -> str:
    found = shutil.which("agentskills") or str(Path(sys.executable).parent / "agentskills")
    assert Path(found).exists(), "the skills-ref CLI (agentskills) is not installed"
    return found


def test_package_command_writes_a_valid_folder_and_zip(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    result = CliRunner().invoke(main, ["skill", "package", "--out", str(out)])
    assert result.exit_code == 0, result.output
    folder, archive = out / SKILL_NAME, out / f"{SKILL_NAME}.zip"
    assert sorted(p.name for p in out.iterdir()) == [SKILL_NAME, f"{SKILL_NAME}.zip"]

    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert files == EXPECTED_FILES
    for doc in REFERENCE_DOCS:
        assert (folder / "references" / doc).read_bytes() == (REPO_ROOT / "reference" / doc).read_bytes()
    assert (folder / "SKILL.md").read_bytes() == (REPO_ROOT / "skill" / "SKILL.md").read_bytes()
    assert os.access(folder / "scripts" / "lookup.py", os.X_OK)

    assert skills_ref.validate(folder) == []
    cli = subprocess.run([_agentskills(), "validate", str(folder)], capture_output=True, text=True, check=False)
    assert cli.returncode == 0, cli.stderr

    with zipfile.ZipFile(archive) as zf:
        names = zf.namelist()
        assert {name.split("/", 1)[0] for name in names} == {SKILL_NAME}
        assert f"{SKILL_NAME}/" in names
        assert {n.removeprefix(f"{SKILL_NAME}/") for n in names if not n.endswith("/")} == EXPECTED_FILES
        assert zf.read(f"{SKILL_NAME}/SKILL.md") == (folder / "SKILL.md").read_bytes()
        assert zf.testzip() is None


def test_zip_extracts_to_a_valid_skill(tmp_path: Path) -> None:
    package = build_package(REPO_ROOT, tmp_path / "out")
    with zipfile.ZipFile(package.archive) as zf:
        zf.extractall(tmp_path / "unzipped")
    assert skills_ref.validate(tmp_path / "unzipped" / SKILL_NAME) == []


def test_packaging_again_replaces_the_previous_package(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    build_package(REPO_ROOT, out)
    (out / SKILL_NAME / "stale.txt").write_text("left over")
    build_package(REPO_ROOT, out)
    assert not (out / SKILL_NAME / "stale.txt").exists()
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []  # no build leftovers


def _docs_copy(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    shutil.copytree(REPO_ROOT / "skill", docs / "skill")
    shutil.copytree(REPO_ROOT / "reference", docs / "reference")
    return docs


def _set_frontmatter(docs: Path, old: str, new: str) -> None:
    skill_md = docs / "skill" / "SKILL.md"
    text = skill_md.read_text(encoding="utf-8")
    assert old in text
    skill_md.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (f"name: {SKILL_NAME}", "name: Bad--Name", "consecutive hyphens"),
        (f"name: {SKILL_NAME}", "name: -gpt-oss", "start or end with a hyphen"),
        ("description: Diagnoses", "summary: Diagnoses", "description"),
        ("license: Apache-2.0", "license: Apache-2.0\nauthor: someone", "Unexpected fields"),
    ],
)
def test_invalid_skill_is_refused_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old: str, new: str, message: str
) -> None:
    docs = _docs_copy(tmp_path)
    _set_frontmatter(docs, old, new)
    monkeypatch.setenv("GPTOSS_DOCTOR_DOCS_DIR", str(docs))
    out = tmp_path / "new" / "dist"
    result = CliRunner().invoke(main, ["skill", "package", "--out", str(out)])
    assert result.exit_code != 0
    assert "not valid, nothing was written" in result.output
    assert message in result.output
    assert not (tmp_path / "new").exists()


def test_refusal_leaves_an_existing_output_folder_untouched(tmp_path: Path) -> None:
    docs = _docs_copy(tmp_path)
    out = tmp_path / "dist"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    _set_frontmatter(docs, f"name: {SKILL_NAME}", "name: BadName")
    with pytest.raises(InvalidSkill, match="must be lowercase"):
        build_package(docs, out)
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


def test_body_over_500_lines_is_refused(tmp_path: Path) -> None:
    docs = _docs_copy(tmp_path)
    skill_md = docs / "skill" / "SKILL.md"
    skill_md.write_text(skill_md.read_text(encoding="utf-8") + "\nfiller\n" * 500, encoding="utf-8")
    with pytest.raises(InvalidSkill, match="keep it under 500"):
        build_package(docs, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_missing_reference_doc_is_refused(tmp_path: Path) -> None:
    docs = _docs_copy(tmp_path)
    (docs / "reference" / "model-updates.md").unlink()
    with pytest.raises(InvalidSkill, match="missing skill sources"):
        build_package(docs, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_links_must_stay_inside_the_package(tmp_path: Path) -> None:
    folder = tmp_path / SKILL_NAME
    (folder / "references").mkdir(parents=True)
    (folder / "references" / "known-issues.md").write_text("# x\n")
    (folder / "SKILL.md").write_text(
        f"---\nname: {SKILL_NAME}\ndescription: test\n---\n"
        "[ok](references/known-issues.md#x) [gone](references/missing.md) [deep](references/a/b.md)\n"
    )
    problems = validate_package(folder)
    assert any("references/missing.md" in p for p in problems)
    assert any("one level deep" in p for p in problems)
    assert not any("known-issues.md" in p for p in problems)


# --- scripts/lookup.py against a real local HTTP server --------------------------------------------

ANSWER: dict[str, Any] = {
    "diagnosis": {
        "problem": "references/known-issues.md#unexpected-token-200002-while-expecting-start-token-200006",
        "title": "Unexpected token 200002 while expecting start token 200006",
        "kind": "error",
        "summary": "The model wrote <|return|> where the parser expected the next message to start.",
        "confidence": "high",
        "why": "the input quotes its error string",
        "verdict": {
            "status": "no-release",
            "text": "No release has a fix (open PR vllm-project/vllm#56216): use the workaround.",
            "open_prs": ["vllm-project/vllm#56216"],
        },
        "actions": [
            {
                "kind": "avoid",
                "target": "ignore_eos",
                "text": "Don't send ignore_eos to gpt-oss.",
                "sources": ["references/known-issues.md#unexpected-token-200002-while-expecting-start-token-200006"],
            }
        ],
        "sources": ["references/known-issues.md#unexpected-token-200002-while-expecting-start-token-200006"],
    },
    "query": {
        "signatures": ["openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"],
        "normalized": "openai_harmony.harmonyerror: unexpected token <n> while expecting start token <n>",
    },
    "analysis": {
        "origin": {
            "side": "server",
            "component": "harmony-parser",
            "explanation": "Raised by openai-harmony in vLLM's serving layer while parsing model output.",
        },
        "category": "harmony-token",
        "tokens": [
            {"id": 200002, "text": "<|return|>", "special": True},
            {"id": 200006, "text": "<|start|>", "special": True},
        ],
        "versions": {"vllm": "0.27.1"},
        "flags": ["ignore_eos=true"],
        "reproduction": None,
    },
    "issues": [
        {
            "id": "vllm-project/vllm#50690",
            "repo": "vllm-project/vllm",
            "number": 50690,
            "kind": "issue",
            "title": "[Bug]: gpt-oss chat completions return 500 when ignore_eos=true",
            "url": "https://github.com/vllm-project/vllm/issues/50690",
            "state": "open",
            "score": 0.94,
            "confidence": "high",
            "why": ["exact signature match"],
            "fixed_by": ["vllm-project/vllm#56216"],
        }
    ],
    "no_confident_match": False,
    "fixes": [
        {
            "summary": "Do not send ignore_eos to gpt-oss.",
            "steps": ["Remove ignore_eos from the request or the benchmark client."],
            "sources": ["references/known-issues.md#unexpected-token-200002-while-expecting-start-token-200006"],
            "confirmed": False,
        }
    ],
    "advice": [
        {
            "summary": "ignore_eos runs generation past <|return|>.",
            "flags": [{"flag": "ignore_eos", "action": "avoid"}],
            "sources": ["vllm-project/guidellm#979"],
        }
    ],
    "index": {"documents": 700, "issues": 629, "built_at": "2026-11-22T02:00:00Z", "github_synced_at": None},
    "degraded": False,
}


class _Handler(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]]
    mode: str

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        self.server.requests.append(  # type: ignore[attr-defined]
            {
                "path": self.path,
                "body": body,
                "auth": self.headers.get("Authorization"),
                "type": self.headers.get("Content-Type"),
            }
        )
        mode = self.server.mode  # type: ignore[attr-defined]
        if mode == "ok":
            self._send(200, "application/json", LookupResponse.model_validate(ANSWER).model_dump(mode="json"))
        elif mode == "invalid":
            self._send(
                422,
                "application/problem+json",
                {
                    "type": "about:blank",
                    "title": "Invalid request",
                    "status": 422,
                    "detail": "error: must not be blank",
                },
            )
        elif mode == "unauthorized":
            self._send(
                401,
                "application/problem+json",
                {
                    "type": "about:blank",
                    "title": "Unauthorized",
                    "status": 401,
                    "detail": "Bearer token required",
                },
            )
        elif mode == "impostor":  # another program on the port answering JSON, without the identity header
            self._send(200, "application/json", LookupResponse.model_validate(ANSWER).model_dump(mode="json"))
        else:
            self.send_response(502)
            self.send_header("Content-Type", "text/html")
            self.send_header(SERVICE_HEADER, "test")
            self.end_headers()
            self.wfile.write(b"<html>Bad Gateway</html>")

    def _send(self, status: int, content_type: str, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if self.server.mode != "impostor":  # type: ignore[attr-defined]
            self.send_header(SERVICE_HEADER, "test")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (base class signature)
        pass


@pytest.fixture
def lookup_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.requests = []  # type: ignore[attr-defined]
    server.mode = "ok"  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _run(
    args: list[str], *, url: str, stdin: str | None = None, token: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPTOSS_DOCTOR_")}
    env["GPTOSS_DOCTOR_URL"] = url
    if token:
        env["GPTOSS_DOCTOR_READ_TOKEN"] = token
    return subprocess.run(
        [sys.executable, str(LOOKUP_SCRIPT), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )


def _url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_the_fixture_answer_matches_the_service_contract() -> None:
    LookupResponse.model_validate(ANSWER)


def test_lookup_prints_a_compact_answer(lookup_server: ThreadingHTTPServer) -> None:
    error = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
    result = _run([error], url=_url(lookup_server))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    lines = out.splitlines()
    assert lines[0] == "Diagnosis: Unexpected token 200002 while expecting start token 200006 (high confidence)"
    assert "Status: No release has a fix (open PR vllm-project/vllm#56216): use the workaround." in lines
    assert "  1. [avoid ignore_eos] Don't send ignore_eos to gpt-oss." in lines
    section = "references/known-issues.md#unexpected-token-200002-while-expecting-start-token-200006"
    assert f"     sources: {section}" in lines
    assert "Origin: server / harmony-parser" in out
    assert "200002='<|return|>'" in out
    assert "vllm-project/vllm#50690 [open, high]" in out
    assert "https://github.com/vllm-project/vllm/issues/50690" in out
    assert "Do not send ignore_eos to gpt-oss." not in out, "the evidence stays in --json"
    assert len(lines) <= 20
    [request] = lookup_server.requests  # type: ignore[attr-defined]
    assert request["path"] == "/lookup"
    assert request["type"] == "application/json"
    assert request["body"] == {"error": error, "top_k": 5}
    assert request["auth"] is None


def test_lookup_without_a_diagnosis_shows_the_closest_fixes(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("skill_lookup", LOOKUP_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = module.render({**ANSWER, "diagnosis": None})
    assert out.splitlines()[0] == "No known problem in the references matches; the closest issues follow."
    assert "Fix: Do not send ignore_eos to gpt-oss." in out
    assert "  * Remove ignore_eos from the request or the benchmark client." in out


def test_lookup_passes_on_the_note_about_synced_text(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("skill_lookup", LOOKUP_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from indexer.trust import UNTRUSTED_NOTE

    assert "Note:" not in module.render(ANSWER)  # every issue curated: nothing to say
    out = module.render({**ANSWER, "untrusted_text": UNTRUSTED_NOTE})
    assert f"Note: {UNTRUSTED_NOTE}" in out.splitlines()


def test_lookup_passes_on_the_scope_note_first(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("skill_lookup", LOOKUP_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    note = "The input is about Qwen, with no gpt-oss or Harmony sign."
    out = module.render({**ANSWER, "diagnosis": None, "no_confident_match": True, "scope_note": note})
    assert out.splitlines()[0] == f"Outside what this tool covers: {note}"
    assert "No confident match" not in out
    assert "Outside what" not in module.render(ANSWER)


def test_lookup_reads_stdin_sends_top_k_and_the_token(lookup_server: ThreadingHTTPServer) -> None:
    log = "INFO starting\nERROR openai_harmony.HarmonyError: unexpected tokens remaining in message header\n"
    result = _run(["--top-k", "3", "-"], url=_url(lookup_server), stdin=log, token="s3cret")
    assert result.returncode == 0, result.stderr
    [request] = lookup_server.requests  # type: ignore[attr-defined]
    assert request["body"] == {"error": log, "top_k": 3}
    assert request["auth"] == "Bearer s3cret"


def test_lookup_json_prints_the_raw_answer(lookup_server: ThreadingHTTPServer) -> None:
    result = _run(["--json", "HarmonyError"], url=_url(lookup_server))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == LookupResponse.model_validate(ANSWER).model_dump(mode="json")


def test_lookup_explains_a_problem_json_refusal(lookup_server: ThreadingHTTPServer) -> None:
    lookup_server.mode = "invalid"  # type: ignore[attr-defined]
    result = _run(["   x"], url=_url(lookup_server))
    assert result.returncode == 1
    assert "Invalid request (422): error: must not be blank" in result.stderr
    assert result.stdout == ""


def test_lookup_hints_at_the_token_on_401(lookup_server: ThreadingHTTPServer) -> None:
    lookup_server.mode = "unauthorized"  # type: ignore[attr-defined]
    result = _run(["x"], url=_url(lookup_server))
    assert result.returncode == 1
    assert "Unauthorized (401): Bearer token required" in result.stderr
    assert "GPTOSS_DOCTOR_READ_TOKEN" in result.stderr


def test_lookup_reports_a_non_json_error_body(lookup_server: ThreadingHTTPServer) -> None:
    lookup_server.mode = "gateway"  # type: ignore[attr-defined]
    result = _run(["x"], url=_url(lookup_server))
    assert result.returncode == 1
    assert "HTTP 502 [text/html]: <html>Bad Gateway</html>" in result.stderr


def test_lookup_on_a_closed_port_says_unreachable_and_exits_2() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = _run(["HarmonyError"], url=f"http://127.0.0.1:{port}")
    assert result.returncode == 2
    assert "unreachable" in result.stderr
    assert "references/known-issues.md" in result.stderr
    assert result.stdout == ""


def test_lookup_refuses_empty_input_without_calling_the_service(lookup_server: ThreadingHTTPServer) -> None:
    result = _run(["-"], url=_url(lookup_server), stdin="  \n")
    assert result.returncode == 1
    assert "nothing to look up" in result.stderr
    assert lookup_server.requests == []  # type: ignore[attr-defined]


def test_lookup_script_uses_only_the_standard_library() -> None:
    tree = ast.parse(LOOKUP_SCRIPT.read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {
        node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported - set(sys.stdlib_module_names) == set()
    # And it runs with no site-packages at all (-S: no site, -I: isolated).
    result = subprocess.run(
        [sys.executable, "-S", "-I", str(LOOKUP_SCRIPT), "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "GPTOSS_DOCTOR_URL" in result.stdout


# --- which program answers, and logs over the limit -------------------------------------------------


def _script_constants() -> dict[str, Any]:
    tree = ast.parse(LOOKUP_SCRIPT.read_text(encoding="utf-8"))
    return {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
    }


def test_script_defaults_follow_the_service() -> None:
    from service.config import Settings

    constants = _script_constants()
    assert constants["DEFAULT_URL"] == f"http://127.0.0.1:{DEFAULT_PORT}"
    assert constants["SERVICE_HEADER"] == SERVICE_HEADER
    assert constants["MAX_BODY_BYTES"] == Settings.model_fields["max_body_bytes"].default


class _OtherServer(BaseHTTPRequestHandler):
    """Another program on the port: vLLM's JSON 404 for paths it does not serve."""

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        data = b'{"detail":"Not Found"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (base class signature)
        pass


def test_another_program_on_the_port_counts_as_unreachable() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OtherServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        result = _run(["HarmonyError"], url=_url(server))
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 2, result.stderr
    assert "not gptoss-doctor" in result.stderr
    assert "references/known-issues.md" in result.stderr


def test_a_json_answer_without_the_identity_header_counts_as_unreachable(lookup_server: ThreadingHTTPServer) -> None:
    lookup_server.mode = "impostor"  # type: ignore[attr-defined]
    result = _run(["HarmonyError"], url=_url(lookup_server))
    assert result.returncode == 2, result.stderr
    assert "references/known-issues.md" in result.stderr
    assert result.stdout == ""


def test_a_log_over_the_limit_is_sent_as_its_tail(lookup_server: ThreadingHTTPServer) -> None:
    lines = [f'INFO 12:00:{i % 60:02d} request {i} "quoted" ok' for i in range(80_000)]
    lines.append("ERROR openai_harmony.HarmonyError: unexpected tokens remaining in message header")
    log = "\n".join(lines) + "\n"
    limit = _script_constants()["MAX_BODY_BYTES"]
    assert len(log.encode()) > 3 * limit
    result = _run(["-"], url=_url(lookup_server), stdin=log)
    assert result.returncode == 0, result.stderr
    assert "sending its last" in result.stderr
    [request] = lookup_server.requests  # type: ignore[attr-defined]
    sent = request["body"]["error"]
    assert len(json.dumps(request["body"]).encode()) <= limit
    assert len(sent) > limit // 2  # trimmed to the limit, not far below it
    assert log.endswith(sent) and sent.startswith("INFO")  # the tail, starting at a whole line

