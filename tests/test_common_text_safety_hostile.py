"""Hostile text and safe sharing: any string JSON allows renders (lone surrogates are replaced
visibly), bidi overrides and ESC are neutralised in the HTML pages, CSV cells cannot run as
formulas, path redaction holds for spaced, Windows, UNC, ``file://`` and ``~user`` paths
(property-based), and a password in ``bench.py --url`` is never printed nor stored."""

from __future__ import annotations

import base64
import csv
import http.server
import json
import re
import threading
from pathlib import Path
from typing import ClassVar

import pytest
from draftbench.backends.http.server_url import parse_server_url
from draftbench.common.errors import UsageError
from draftbench.common.text_safety import without_lone_surrogates
from draftbench.report import render_report
from draftbench.results.file import load_results, save_results
from draftbench.share.export import export, results_table
from draftbench.share.export.csv_export import field_text
from draftbench.share.redact_paths import redact_path_text
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import run_cli
from share_data import box_a

HOSTILE = "\ud800 \u202e evil\x1b[31m \u2066x"       # a lone surrogate, a bidi override, ESC, an isolate


def hostile_file(tmp_path: Path, name: str = "hostile.json") -> Path:
    """A results file whose draft labels are spreadsheet formulas with hostile text, and whose name holds a
    lone surrogate, written as JSON escapes, as a hand-edited or foreign file would."""
    good = tmp_path / "good.json"
    save_results(box_a(), good)
    data = json.loads(good.read_text())
    for i, row in enumerate(data["results"]):
        if row.get("draft"):
            row["draft"] = f"=cmd|' /C calc'!A{i}{HOSTILE}"
            row["candidate"]["label"] = row["draft"]
    data["name"] = "qwen\udfff"
    path = tmp_path / name
    path.write_text(json.dumps(data))          # ensure_ascii: the surrogates are \ud800 escapes, valid JSON
    return path


def no_traceback(proc) -> None:
    assert "Traceback" not in proc.stderr and "This is a bug" not in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------- any string renders

def test_lone_surrogates_are_replaced_visibly_on_load(tmp_path):
    results = load_results(hostile_file(tmp_path))
    assert results.name == "qwen\ufffd"
    assert all(r.draft.endswith("\ufffd \u202e evil\x1b[31m \u2066x") for r in results.results if r.draft)
    assert without_lone_surrogates({"k\udc00": ["a", "\ud800b"]}) == {"k\ufffd": ["a", "\ufffdb"]}
    plain = {"a": ["b", 1]}
    assert without_lone_surrogates(plain) is plain       # nothing to replace: nothing copied


@pytest.mark.parametrize("args", [
    ["--chart-only", "--chart", "{tmp}/r.html"],
    ["--redact-paths", "--output", "{tmp}/shared.json"],
    ["--export", "csv", "--output", "{tmp}/e.csv"],
    ["--export", "md"],
    ["--export", "json", "--output", "{tmp}/e.json"],
    ["--compare", "{tmp}/good.json", "--chart", "{tmp}/cmp.html"],
])
def test_every_output_of_a_file_with_hostile_text_works(tmp_path, args):
    path = hostile_file(tmp_path)
    argv = [a.format(tmp=tmp_path) for a in args]
    if argv[0] == "--compare":
        argv.insert(1, str(path))
    else:
        argv = ["--results", str(path), *argv]
    proc = run_cli("sweep.py", *argv, timeout=300)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\u202e" not in proc.stdout


def test_a_resumed_sweep_rewrites_a_hostile_file_as_valid_utf8(tmp_path):
    path = hostile_file(tmp_path)
    save_results(load_results(path), path)       # what a resume does first
    text = path.read_bytes().decode("utf-8")      # strict: no surrogates left
    assert "\ufffd" in text and json.loads(text)["name"] == "qwen\ufffd"


def _scripts_without_plotly(page: str) -> list[str]:
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", page, re.S)
    return [s for s in scripts if "newPlot" in s]       # the figures; plotly.js itself is a library


def test_bidi_controls_and_esc_are_neutralised_in_the_report(tmp_path):
    page = render_report(load_results(hostile_file(tmp_path)), cdn=True)
    for raw in ("\x1b", "\u202e", "\u2066", "\ud800"):
        assert raw not in page
    # Plotly decodes its figures' JSON in the browser: an escaped control would come back to life there
    for script in _scripts_without_plotly(page):
        assert not re.search(r"(?<!\\)\\u(202[a-eA-E]|206[6-9]|001[bB])", script)
    assert "\\u202e evil\\x1b[31m" in page       # shown, visibly


# ---------------------------------------------------------------------------- CSV cells never run

@pytest.mark.parametrize("cell", ["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"])
def test_csv_cells_a_spreadsheet_would_run_are_neutralised(cell):
    assert field_text(cell) == "'" + cell
    assert field_text(-1.5) == "-1.5" and field_text("plain") == "plain"     # numbers stay numbers


def test_the_csv_export_has_no_formula_cells(tmp_path):
    results = load_results(hostile_file(tmp_path))
    text = export(results_table(results, "x"), "csv")
    assert "'=cmd|" in text
    for line in text.splitlines()[1:]:
        for cell in next(csv.reader([line])):
            assert not cell.startswith(("=", "+", "@", "\t", "\r")) and not re.match(r"-[^\d]", cell)


# ---------------------------------------------------------------------------- path redaction, property-based

_word = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{1,7}", fullmatch=True)
_spaced = st.lists(_word, min_size=1, max_size=3).map(" ".join)
_file = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,8}\.gguf", fullmatch=True)
_before = st.sampled_from(["", "loading ", "failed to open ", "model: ", '"', "(", "--lora=", "x\n"])
_after = st.sampled_from(["", " not found", ": error", '"', ")", "\n", ", next", "; then"])


def _forms(user: str, folders: list[str], name: str) -> list[str]:
    posix = "/".join(folders)
    win = "\\".join(folders)
    nospace = user.replace(" ", "")
    return [f"/home/{user}/{posix}/{name}", f"/Users/{user}/{posix}/{name}", f"C:\\Users\\{user}\\{win}\\{name}",
            f"C:/Users/{user}/{posix}/{name}", f"\\\\fileserver\\{user}\\{win}\\{name}",
            f"//fileserver/{user}/{posix}/{name}", f"file:///home/{user}/{posix}/{name}",
            f"file:///C:/Users/{user}/{posix}/{name}", f"file://fileserver/{user}/{posix}/{name}",
            f"~{nospace}/{posix}/{name}"]


@settings(max_examples=150, deadline=None)
@given(user=_spaced, folders=st.lists(_spaced, min_size=1, max_size=3), name=_file, before=_before, after=_after)
def test_redaction_keeps_the_file_name_and_drops_every_folder(user, folders, name, before, after):
    for path in _forms("U" + user, ["F" + f for f in folders], name):
        out = redact_path_text(before + path + after)
        assert out == before + name + after, (path, out)


@settings(max_examples=100, deadline=None)
@given(user=_spaced)
def test_a_bare_home_becomes_tilde(user):
    for home in (f"/home/U{user}", f"/Users/U{user}", f"C:\\Users\\U{user}", f"~U{user.replace(' ', '')}"):
        assert redact_path_text(home) == "~"


@settings(max_examples=100, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_redaction_never_fails_and_is_stable(text):
    once = redact_path_text(text)
    assert redact_path_text(once) == once


@pytest.mark.parametrize("text", ["speed-up ~2x, acceptance 75%", "http://127.0.0.1:8080/v1", "GET /health",
                                  "Qwen/Qwen2.5-0.5B-Instruct", "results/box.logs/001-7B.log", "cost ~50% less"])
def test_text_without_local_paths_is_left_alone(text):
    assert redact_path_text(text) == text


def test_a_long_line_is_redacted_in_linear_time():
    line = "/home/alex/" + "word " * 20_000 + "end"      # no catastrophic backtracking on prose
    assert "alex" not in redact_path_text(line)


# ---------------------------------------------------------------------------- credentials in a URL

@pytest.mark.parametrize("url, base, auth", [
    ("http://user:s3cret@127.0.0.1:8080/v1", "http://127.0.0.1:8080", ("user", "s3cret")),
    ("https://a%40b:p%3Ass@host.example/llm/", "https://host.example/llm", ("a@b", "p:ss")),
    ("localhost:8080", "http://localhost:8080", None),
    ("http://[::1]:9000", "http://[::1]:9000", None),
])
def test_addresses_are_split_from_their_credentials(url, base, auth):
    parsed = parse_server_url(url)
    assert (parsed.base, parsed.auth) == (base, auth)
    assert "s3cret" not in str(parsed)


@pytest.mark.parametrize("url, why", [
    ("http://127.0.0.1:99999", "the port must be a number from 1 to 65535, not '99999'"),
    ("file:///etc/passwd", "the scheme must be http or https, not file"),
    ("http://127.0.0.1:0", "not 0"), ("http://", "names no host"), ("ftp://h", "not ftp"),
    ("http://h/?q=1", "query or fragment"), ("http://a b", "is not a host name"), ("", "is empty"),
    ("http://u:s3cret@h:70000", "not '70000'"),
])
def test_bad_addresses_are_one_clear_line(url, why):
    with pytest.raises(UsageError) as err:
        parse_server_url(url)
    assert why in err.value.message and "s3cret" not in err.value.message


class _NeedsBasicAuth(http.server.BaseHTTPRequestHandler):
    expected = "Basic " + base64.b64encode(b"user:s3cret").decode()
    seen: ClassVar[list] = []

    def _ok(self) -> bool:
        self.seen.append(self.headers.get("Authorization"))
        if self.headers.get("Authorization") != self.expected:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return False
        return True

    def do_GET(self):
        if self._ok():
            body = b'{"data": []}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self._ok():
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'
                         b'data: {"choices":[{"delta":{},"finish_reason":"stop"}],'
                         b'"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\ndata: [DONE]\n\n')

    def log_message(self, *a):
        pass


def test_a_password_in_the_url_is_used_but_never_printed_nor_stored(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NeedsBasicAuth)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        out = tmp_path / "bench.json"
        proc = run_cli("bench.py", "--url", f"http://user:s3cret@127.0.0.1:{port}", "--backend", "openai",
                       "--prompt", "hi", "--max-tokens", "4", "--warmup", "0", "--json", str(out), timeout=300)
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _NeedsBasicAuth.seen and all(h == _NeedsBasicAuth.expected for h in _NeedsBasicAuth.seen)
    assert "s3cret" not in proc.stdout + proc.stderr and "user:" not in proc.stdout
    stored = out.read_text()
    assert "s3cret" not in stored and json.loads(stored)["servers"][0]["url"] == f"http://127.0.0.1:{port}"


def test_credentials_and_an_api_key_together_are_refused():
    proc = run_cli("bench.py", "--url", "http://u:s3cret@127.0.0.1:9", "--api-key", "k", "--prompt", "hi", timeout=120)
    assert proc.returncode == 2 and "both would be the request's Authorization header" in proc.stderr
    assert "s3cret" not in proc.stderr
