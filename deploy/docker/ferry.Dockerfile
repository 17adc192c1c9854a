# ferry's container image: the ferry server and the ferryctl operator CLI.
#
#   docker build -f deploy/docker/ferry.Dockerfile -t ferry:0.1.0 .   (from the repository root)
#
# Stage 1 builds with the project's own toolchain (tools/setup: Debian 12's
# Bazel and -dev libraries, and the pinned librdkafka, whose source
# tools/build_librdkafka fetches from npm; no other network access).
# Stage 2 is Debian 12 slim with only the shared libraries the binaries link
# (`ldd`), as a non-root user; librdkafka is linked statically, so only its
# dependencies are here. tests/deploy/test_image.py checks the runtime
# list against `ldd` of the built binaries, package by package: keep the two
# in step when a dependency changes (the test prints the expected list).
FROM debian:12 AS build
WORKDIR /src
COPY . .
RUN tools/setup --build-only \
 && bazel build --config=release --noshow_progress //server:ferry //clients/ferryctl:ferryctl \
 && install -D -m 0755 bazel-bin/server/ferry /out/ferry \
 && install -D -m 0755 bazel-bin/clients/ferryctl/ferryctl /out/ferryctl \
 && bazel shutdown

FROM debian:12-slim
# ca-certificates: the trust roots for Kafka over SSL/SASL_SSL and for
# processors[].tls without a ca_file. Everything else: the runtime libraries
# (libcurl4 and most of the rest: librdkafka's HTTP client, for OIDC tokens).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates \
      libabsl20220623 \
      libbrotli1 \
      libc-ares2 \
      libc6 \
      libcivetweb1 \
      libcom-err2 \
      libcurl4 \
      libffi8 \
      libgcc-s1 \
      libgmp10 \
      libgnutls30 \
      libgrpc++1.51 \
      libgrpc29 \
      libgssapi-krb5-2 \
      libhogweed6 \
      libidn2-0 \
      libk5crypto3 \
      libkeyutils1 \
      libkrb5-3 \
      libkrb5support0 \
      libldap-2.5-0 \
      liblz4-1 \
      libnettle8 \
      libnghttp2-14 \
      libp11-kit0 \
      libprometheus-cpp-core1.0 \
      libprometheus-cpp-pull1.0 \
      libprotobuf32 \
      libpsl5 \
      libre2-9 \
      librtmp1 \
      libsasl2-2 \
      libssh2-1 \
      libssl3 \
      libstdc++6 \
      libtasn1-6 \
      libtcmalloc-minimal4 \
      libunistring2 \
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
