# ferry's container image: the ferry server and the ferryctl operator CLI.
#
#   docker build -f deploy/docker/ferry.Dockerfile -t ferry:0.1.0 .   (from the repository root)
#
# Stage 1 builds with the project's own toolchain (tools/setup: Debian 12's
# Bazel and -dev libraries; no network access beyond Debian's archive).
# Stage 2 is Debian 12 slim with only the shared libraries the binaries link
# (`ldd`), as a non-root user. tests/deploy/test_image.py checks the runtime
# list against `ldd` of the built binaries, package by package: keep the two
# in step when a dependency changes (the test prints the expected list).
FROM debian:12 AS build
WORKDIR /src
COPY . .
RUN tools/setup \
 && bazel build --config=release --noshow_progress //server:ferry //clients/ferryctl:ferryctl \
 && install -D -m 0755 bazel-bin/server/ferry /out/ferry \
 && install -D -m 0755 bazel-bin/clients/ferryctl/ferryctl /out/ferryctl \
 && bazel shutdown

FROM debian:12-slim
# ca-certificates: the trust roots for Kafka over SSL/SASL_SSL and for
# processors[].tls without a ca_file. Everything else: the runtime libraries.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates \
      libabsl20220623 \
      libc-ares2 \
      libc6 \
      libcivetweb1 \
      libgcc-s1 \
      libgrpc++1.51 \
      libgrpc29 \
      liblz4-1 \
      libprometheus-cpp-core1.0 \
      libprometheus-cpp-pull1.0 \
      libprotobuf32 \
      librdkafka++1 \
      librdkafka1 \
      libre2-9 \
      libsasl2-2 \
      libssl3 \
      libstdc++6 \
      libtcmalloc-minimal4 \
      libyaml-cpp0.7 \
      libzstd1 \
      zlib1g \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --gid 10001 ferry \
 && useradd --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin ferry
COPY --from=build /out/ferry /out/ferryctl /usr/local/bin/
# Numeric, so Kubernetes' runAsNonRoot can verify it (k8s/base uses 10001 too).
USER 10001:10001
# server.listen (gRPC: health, reflection, Control) and server.metrics_listen.
EXPOSE 7070 9464
# ferry handles SIGTERM itself (drain, commit, leave the group, exit 0) and
# runs fine as PID 1: it blocks the signal and sigwait()s for it.
ENTRYPOINT ["/usr/local/bin/ferry"]
# Where k8s/base mounts the ConfigMap. `docker run IMAGE --print_default_config`
# shows a starting point.
CMD ["--config=/etc/ferry/config/ferry.yaml"]
