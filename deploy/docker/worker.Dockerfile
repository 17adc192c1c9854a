# The example worker's container image (clients/cpp/examples/example_worker,
# the processor k8s/base deploys until you put yours in its place).
#
#   docker build -f deploy/docker/worker.Dockerfile -t ferry-worker:0.1.0 .   (from the repository root)
#
# Same layout as ferry.Dockerfile: build with tools/setup + Bazel, run on
# Debian 12 slim with only the libraries `ldd` names (tests/deploy checks the
# list), as a non-root user.
FROM debian:12 AS build
WORKDIR /src
COPY . .
RUN tools/setup --build-only \
 && bazel build --config=release --noshow_progress //clients/cpp/examples:example_worker \
 && install -D -m 0755 bazel-bin/clients/cpp/examples/example_worker /out/example_worker \
 && bazel shutdown

FROM debian:12-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libabsl20220623 \
      libc-ares2 \
      libc6 \
      libgcc-s1 \
      libgrpc++1.51 \
      libgrpc29 \
      libprotobuf32 \
      libre2-9 \
      libssl3 \
      libstdc++6 \
      libtcmalloc-minimal4 \
      zlib1g \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --gid 10001 worker \
 && useradd --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin worker
COPY --from=build /out/example_worker /usr/local/bin/
USER 10001:10001
EXPOSE 50051
# SIGTERM: the worker stops taking streams and finishes its handlers (5 s).
ENTRYPOINT ["/usr/local/bin/example_worker"]
CMD ["--listen=0.0.0.0:50051"]
