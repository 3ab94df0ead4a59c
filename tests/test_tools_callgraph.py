"""tools/callgraph.py on a small package written here: the mechanism (which calls it follows, what it
counts along the deepest chain), not today's numbers of draftbench (docs/architecture.md has those)."""

from __future__ import annotations

import textwrap

from callgraph import Package, deepest, main

FILES = {
    "__init__.py": "",
    "cli.py": """
        from .runner import Runner
        from . import report

        def main():
            Runner().run()
            report.show()
        """,
    "runner.py": """
        from . import util
        from .server import Server

        class Runner:
            def __init__(self, server: Server | None = None):
                self.server = server or Server()

            def run(self):
                util.helper(self)

            def back(self):
                self.server.send()
        """,
    "util.py": """
        def helper(runner: "Runner"):
            from .runner import Runner
            typed: Runner = runner
            typed.back()
        """,
    "server.py": """
        from .http import stream

        class Base:
            def send(self):
                stream()

        class Server(Base):
            pass
        """,
    "http.py": """
        def stream():
            return 1

        def unused():
            stream()
        """,
    "report.py": """
        def show():
            return lines()

        def lines():
            return []
        """,
}


def write_package(tmp_path):
    root = tmp_path / "pkg"
    root.mkdir()
    for name, text in FILES.items():
        (root / name).write_text(textwrap.dedent(text))
    return root


def test_the_deepest_chain_to_the_target_counts_files_and_returns(tmp_path):
    package = Package(write_package(tmp_path))
    walk = deepest(package, "pkg.cli.main", "pkg.http.stream")
    # a class call enters its __init__ only when it has one; a method on self, on an annotated local, on a
    # self attribute of a known class, and one inherited from a base class are all followed
    assert walk.chain == ("pkg.cli.main", "pkg.runner.Runner.run", "pkg.util.helper", "pkg.runner.Runner.back",
                          "pkg.server.Base.send", "pkg.http.stream")
    assert walk.files_entered == 5                  # cli, runner, util, server, http
    assert walk.returns == 1                        # runner → util → runner: back in a file already left
    assert walk.target == "pkg.http.stream"


def test_without_a_way_to_the_target_the_deepest_chain_at_all_is_counted(tmp_path):
    package = Package(write_package(tmp_path))
    walk = deepest(package, "pkg.report.show", "pkg.http.stream")
    assert walk.target is None and walk.chain == ("pkg.report.show", "pkg.report.lines")
    assert (walk.files_entered, walk.returns) == (1, 0)


def test_the_command_prints_one_line_per_start(tmp_path, capsys):
    root = write_package(tmp_path)
    assert main(["pkg.cli.main", "pkg.report.show", "--to", "pkg.http.stream", "--package", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("pkg.cli.main to pkg.http.stream: 5 files entered, 1 returns to a file already left, "
                        "6 functions deep; 5 files on any chain")
    assert lines[1].startswith("pkg.report.show (pkg.http.stream not reached")


def test_attributes_set_together_and_either_branch_of_a_conditional_are_followed(tmp_path):
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "loop.py").write_text(textwrap.dedent("""
        from .step import Step

        class Loop:
            def __init__(self, step: Step, other: Step | None):
                self.step, self.count = step, 0
                self.other = other if other is not None else Step()

            def run(self):
                self.step.go()
                self.other.go()
        """))
    (root / "step.py").write_text("class Step:\n    def go(self):\n        return 1\n")
    package = Package(root)
    assert package.callees("pkg.loop.Loop.run") == ["pkg.step.Step.go"]
    assert package.attribute_types("pkg.loop.Loop") == {"step": "pkg.step.Step", "other": "pkg.step.Step"}


def test_a_route_climbs_back_to_the_caller_that_leads_on_and_counts_that_return(tmp_path):
    from callgraph import route
    package = Package(write_package(tmp_path))
    walk = route(package, "pkg.cli.main", ["pkg.http.stream", "pkg.report.lines"])
    # down to the request, back up to main (its file again: a return), down to the report
    assert walk.chain[-3:] == ("pkg.cli.main", "pkg.report.show", "pkg.report.lines")
    assert walk.files_entered == 6 and walk.returns == 2          # runner → util → runner, then back to cli
    assert main(["pkg.cli.main", "--via", "pkg.http.stream", "--to", "pkg.report.lines", "--package",
                 str(tmp_path / "pkg")]) == 0
