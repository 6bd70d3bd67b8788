# syntax=docker/dockerfile:1
# One image for every batchgate service; the command picks what a container runs:
#   serve ingest | serve scheduler | serve results | serve executor | envoy | migrate | simulate | up
# compose.yaml runs one service per container; `docker run -p 8080:8080 IMAGE` runs the whole
# embedded stack (`up`: SQLite in the data volume, the simulated upstream).

ARG PYTHON_VERSION=3.11
# The base of every stage: the official image unless overridden (a mirror, a hardened copy;
# `make test-image` builds on a Debian bookworm base made locally, where no registry is reachable).
ARG BASE_IMAGE=python:${PYTHON_VERSION}-slim-bookworm

# The web panel's third-party browser code, from gateway/ui/package-lock.json (checked by npm).
# Debian's npm on the same base, so the build needs no image besides BASE_IMAGE.
FROM ${BASE_IMAGE} AS panel
RUN apt-get update \
 && apt-get install -y --no-install-recommends npm \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /ui
COPY gateway/ui/package.json gateway/ui/package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund

FROM ${BASE_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/batchgate
WORKDIR /src
COPY pyproject.toml README.md ./
COPY batchgate ./batchgate
COPY services ./services
COPY gateway ./gateway
COPY --from=panel /ui/node_modules/papaparse ./gateway/ui/node_modules/papaparse
# A plain (non-editable) install: the venv alone is the application, Envoy's binary included.
RUN /opt/batchgate/bin/pip install . \
 && /opt/batchgate/bin/batchgate --help > /dev/null

FROM ${BASE_IMAGE} AS runtime
# compose mounts named volumes on certs/ and ca/: a new volume takes the ownership of the
# image's directory, so the unprivileged user can write the certificates there.
RUN groupadd --system --gid 10001 batchgate \
 && useradd --system --uid 10001 --gid batchgate --home-dir /var/lib/batchgate --create-home \
      --shell /usr/sbin/nologin batchgate \
 && install -d -o batchgate -g batchgate -m 0700 /var/lib/batchgate/certs /var/lib/batchgate/ca
COPY --from=build /opt/batchgate /opt/batchgate
ENV PATH=/opt/batchgate/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    BATCHGATE_HOST=0.0.0.0 \
    BATCHGATE_DATA_DIR=/var/lib/batchgate \
    BATCHGATE_PUBLIC_BASE_URL=http://localhost:8080
USER 10001:10001
WORKDIR /var/lib/batchgate
EXPOSE 8080 50051 50052 50053 50054 8099
ENTRYPOINT ["batchgate"]
CMD ["up"]
