# memworker: worker, beat and the operator CLI in one image.
#
#   docker build -t memworker .
#   docker run --rm memworker --help
#   docker build --target langgraph -t memworker-langgraph .   # the deep-agent example server
#
# Two stages: the first builds wheels for memworker and every dependency (with a compiler for
# any that ship only sources), the second installs them into a slim image without build tools.

FROM python:3.11-slim AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY worker ./worker
COPY schedules ./schedules
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# The compose `langgraph` profile's server (target `langgraph`): the deep-agent example under
# `langgraph dev`, the in-memory server. Built only when that target is asked for.
FROM build AS langgraph-wheels
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[examples,openai,anthropic]"

FROM python:3.11-slim AS langgraph
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MEMWORKER_DATA_DIR=/var/lib/memworker \
    LANGGRAPH_CLI_NO_ANALYTICS=1
COPY --from=langgraph-wheels /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels "memworker[examples,openai,anthropic]" \
    && rm -rf /wheels
RUN useradd --system --uid 10001 --user-group --create-home memworker \
    && mkdir -p /var/lib/memworker /srv/agent \
    && chown memworker:memworker /var/lib/memworker /srv/agent
COPY --chown=memworker:memworker examples /srv/agent/examples
USER memworker
# langgraph.json's paths are relative to the directory the server runs in (its state too).
WORKDIR /srv/agent
EXPOSE 2024
ENTRYPOINT ["langgraph", "dev", "--host", "0.0.0.0", "--port", "2024", "--no-browser", \
            "--no-reload", "--config", "examples/deep_agent/langgraph.json"]

# The default target: worker, beat and the operator CLI.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MEMWORKER_DATA_DIR=/var/lib/memworker
# tzdata: schedules name IANA time zones, and the slim image ships no zone database.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tzdata \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels memworker \
    && rm -rf /wheels
# Never run as root: a fixed uid so volume permissions are predictable.
RUN useradd --system --uid 10001 --user-group --create-home memworker \
    && mkdir -p /var/lib/memworker \
    && chown memworker:memworker /var/lib/memworker
USER memworker
WORKDIR /var/lib/memworker
ENTRYPOINT ["memworker"]
CMD ["worker"]
