# One image for both workloads: `accelscore agent` (DaemonSet) and `accelscore scorer` (Deployment).
# For machines with a Docker daemon: `make image-docker` (docker build -t $(IMAGE) .). The image CI builds and
# tests is `make image` (scripts/build-image: mmdebstrap + umoci, no daemon; same Python 3.11 on bookworm, same
# pinned deploy/constraints.txt, same user and entrypoint); this file is not built by CI.
FROM python:3.11.14-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/accelscore
WORKDIR /src
COPY deploy/constraints.txt deploy/constraints.txt
RUN /opt/accelscore/bin/pip install --constraint deploy/constraints.txt --requirement deploy/constraints.txt
COPY pyproject.toml README.md ./
COPY accelscore accelscore
RUN /opt/accelscore/bin/pip install --constraint deploy/constraints.txt --no-deps . \
 && /opt/accelscore/bin/pip check

FROM python:3.11.14-slim-bookworm
ENV PATH=/opt/accelscore/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/accelscore /opt/accelscore
# Non-root, numeric so Kubernetes can verify runAsNonRoot without a passwd lookup.
USER 65532:65532
# 9747 agent /metrics, 9748 scorer /metrics, 9749 scorer gRPC (docs/configuration.md).
EXPOSE 9747 9748 9749
ENTRYPOINT ["accelscore"]
CMD ["--help"]
