# The Space's base image from python:3.11-slim, for a host with a registry. Build it from the WMRL
# checkout's root (wmrl is not on PyPI yet), with the tag server/Dockerfile names:
#   docker build -f environments/wmrl_code/server/base.Dockerfile -t wmrl-openenv-base:local .
# `wmrl export openenv-image` builds the same base offline from this host's files.
# Agent scripts run under bubblewrap, which needs unprivileged user namespaces on the host;
# without them every run is an infrastructure failure, reported as such, never a score.
FROM python:3.11-slim

RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap curl \
    && rm -rf /var/lib/apt/lists/*
COPY . /src/wmrl
RUN python -m venv /opt/wmrl-space \
    && /opt/wmrl-space/bin/pip install --no-cache-dir "/src/wmrl[openenv]" \
    && WMRL_HOME=/opt/wmrl-home /opt/wmrl-space/bin/python -c \
       "from wmrl_envs.sandbox.runtime import ensure_runtime; from wmrl_envs.tasks.builtin import ensure_suite; ensure_runtime(); ensure_suite('mle'); ensure_suite('dsbench')" \
    && rm -rf /src/wmrl
ENV PATH=/opt/wmrl-space/bin:$PATH WMRL_SEED_HOME=/opt/wmrl-home
