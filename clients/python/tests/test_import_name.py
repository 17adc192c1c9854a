"""The SDK imports as ``ferry_worker`` even when an unrelated ``ferry`` is installed.

PyPI's ``ferry`` and ``ferry-sync`` distributions both ship a top-level
``ferry`` package; the SDK (distribution ``ferry-worker``) must neither be
hidden by one nor import one. Each check runs in a fresh interpreter of the
venv (the installed ``ferry-worker``, not this test's sys.path), with an
impostor ``ferry`` first on the path that fails loudly if anything imports it.
"""

import importlib.metadata
import pathlib
import subprocess
import sys
import textwrap

SRC = pathlib.Path(__file__).resolve().parent.parent / "src"

IMPOSTOR = textwrap.dedent(
    """
    # An unrelated distribution's `ferry` package (as `pip install ferry` ships).
    raise ImportError("the unrelated `ferry` package was imported")
    """
)


def run_with_impostor(tmp_path, code):
    impostor = tmp_path / "site" / "ferry"
    impostor.mkdir(parents=True)
    (impostor / "__init__.py").write_text(IMPOSTOR)
    prelude = f"import sys\nsys.path.insert(0, {str(tmp_path / 'site')!r})\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_sdk_imports_past_an_unrelated_ferry_package(tmp_path):
    result = run_with_impostor(
        tmp_path,
        """
        try:
            import ferry
        except ImportError as e:
            assert "unrelated" in str(e), e   # the impostor is really first on the path
        else:
            raise AssertionError("the impostor ferry was not on the path")
        sys.modules.pop("ferry", None)

        import ferry_worker
        import ferry_worker.aio
        import ferry_worker.examples.worker
        from ferry_worker.v1 import processor_pb2, processor_pb2_grpc

        assert ferry_worker.ok().status == ferry_worker.Status.OK
        assert ferry_worker.Event is processor_pb2.Event
        assert processor_pb2.Event.DESCRIPTOR.full_name == "ferry.v1.Event"  # wire names unchanged
        assert callable(ferry_worker.Worker) and callable(ferry_worker.aio.Worker)
        assert "ferry" not in sys.modules, "the SDK imported a top-level `ferry`"
        print(ferry_worker.__file__)
        """,
    )
    assert result.returncode == 0, result.stderr
    # The installed ferry-worker (editable: this checkout's src), not a copy.
    assert pathlib.Path(result.stdout.strip()).resolve() == SRC / "ferry_worker" / "__init__.py"


def test_examples_run_as_modules_past_an_unrelated_ferry_package(tmp_path):
    result = run_with_impostor(
        tmp_path,
        """
        import runpy
        sys.argv = ["worker", "--help"]
        try:
            runpy.run_module("ferry_worker.examples.worker", run_name="__main__")
        except SystemExit as e:
            assert e.code == 0, e.code
        assert "ferry" not in sys.modules
        """,
    )
    assert result.returncode == 0, result.stderr
    assert "--listen" in result.stdout


def test_distribution_name_matches_the_import_name():
    dist = importlib.metadata.distribution("ferry-worker")
    assert dist.metadata["Name"] == "ferry-worker"
    top_level = {
        line.split("/")[0] for line in (dist.read_text("top_level.txt") or "").split()
    }
    # Editable installs may not list top_level.txt; then the source tree decides.
    assert top_level <= {"ferry_worker"}, top_level
    assert (SRC / "ferry_worker" / "__init__.py").is_file()
    assert not (SRC / "ferry").exists(), "a top-level `ferry` package is back in src/"
