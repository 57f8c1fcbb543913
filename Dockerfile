# Container images of the products gateway.
#
#   docker build --build-arg GATEWAY_COMMIT="$(git rev-parse --short=12 HEAD)" \
#     -t products-gateway:0.1.0 .                            # the gateway (the default target)
#   docker run --rm -p 8080:8080 products-gateway:0.1.0     # embedded catalog
#   docker build --target demo-upstream -t products-gateway-demo-upstream:0.1.0 .
#
# Two images from one build: the production image holds the gateway and the
# static backtracer only; `demo-upstream` holds the TLS test upstream
# `mock-upstream` (and openssl, for the compose demo's certificate job),
# which deploy/compose.yaml runs. docs/container.md tells their sizes, the
# hardening, how to read a crash backtrace and how CI checks the image.
#
# Build stage: the official Swift image on Debian 12 (bookworm), the same
# distribution as the runtime stages, so the libevent, OpenSSL, hiredis and
# libyaml the binaries were linked against are the ones they find at run
# time. The tag matches the toolchain the project is developed and tested
# with (Swift 6.3); the manifest itself asks for tools 6.1 or later.

# ================================
# Build
# ================================
FROM swift:6.3-bookworm AS build

# The C libraries the package links (Package.swift: CLibevent, COpenSSL,
# CHiredis, CLibYAML), and binutils, which splits the debug
# information off (deploy/stage-binaries). pkg-config comes with the Swift
# image. Not pinned: the -dev packages must match whatever bookworm's
# current runtime libraries are (installed unpinned in the runtime stage,
# for their security updates).
# hadolint ignore=DL3008
RUN export DEBIAN_FRONTEND=noninteractive \
    && apt-get update \
    && apt-get install -y --no-install-recommends \
        libevent-dev libssl-dev libhiredis-dev libyaml-dev binutils \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /build

# Resolve dependencies first, as a layer of its own: it is rebuilt only when
# the manifest changes, not on every source edit. Only Package.swift is
# copied: Package.resolved is not tracked by this project (see .gitignore and
# .dockerignore), so the image resolves from the manifest's version ranges.
COPY Package.swift ./
RUN swift package resolve

# Then the sources, and the two release binaries with the Swift standard
# library linked in statically (libevent, OpenSSL, hiredis and libyaml stay
# dynamic system libraries, installed in the runtime stages below),
# stripped of all but their function names (which crash backtraces show),
# their full debug information split off into /staging/debug
# (deploy/stage-binaries says how; CI runs the same script).
# - Tests/ is copied although no test is built: SwiftPM refuses a manifest
#   whose test targets have no folder.
# - openapi/ is needed at build time: the gateway embeds
#   openapi/openapi.yaml (through the symbolic link
#   Sources/GatewayService/Resources/openapi.yaml) to serve it verbatim.
# - Plugins/ holds BuildCommit, which writes the commit `--version` prints:
#   from the file BUILD_COMMIT, written here from the GATEWAY_COMMIT build
#   argument, since the build context has no .git (`unknown` without it).
COPY Sources ./Sources
COPY Tests ./Tests
COPY Plugins ./Plugins
COPY openapi ./openapi
COPY deploy/stage-binaries ./deploy/stage-binaries
ARG GATEWAY_COMMIT=unknown
RUN printf '%s\n' "$GATEWAY_COMMIT" > BUILD_COMMIT \
    && deploy/stage-binaries /staging

# ================================
# Runtime base: the libraries and the user both images share
# ================================
FROM debian:bookworm-slim AS runtime

# Runtime libraries only:
# - libevent-2.1-7 (libevent), libevent-openssl-2.1-7 and
#   libevent-pthreads-2.1-7: the package links event, event_openssl and
#   event_pthreads (Sources/CLibevent/module.modulemap), so all three must be
#   present or the binary does not start;
# - libssl3: OpenSSL 3 for the upstream TLS connections;
# - libhiredis0.14: the shared tier's Redis client (Sources/CHiredis), loaded
#   whether or not GATEWAY_REDIS_URL is set;
# - libyaml-0-2: the YAML parser that reads the embedded OpenAPI
#   description for rpc.discover (Sources/CLibYAML);
# - ca-certificates: the system trust store the upstream certificate is
#   verified against (unless ONSIDE_CA_FILE names another);
# - tzdata: time zones for log timestamps.
# libstdc++6 and libgcc-s1, which the binaries also load, are part of the
# base image already (apt needs them). Checked with ldd on a release build, and by CI
# (.ci/image), which runs the image. Versions are not pinned: the bookworm
# security updates of these libraries should be picked up on every rebuild.
# hadolint ignore=DL3008
RUN export DEBIAN_FRONTEND=noninteractive \
    && apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates \
        libevent-2.1-7 \
        libevent-openssl-2.1-7 \
        libevent-pthreads-2.1-7 \
        libssl3 \
        libhiredis0.14 \
        libyaml-0-2 \
        tzdata \
    && rm -rf /var/lib/apt/lists/*

# A fixed numeric, non-root user: Kubernetes' runAsNonRoot can check a
# numeric UID (deploy/kubernetes/deployment.yaml runs as 10001 too).
RUN groupadd --system --gid 10001 gateway \
    && useradd --system --uid 10001 --gid 10001 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin gateway

WORKDIR /app

# ================================
# The demo upstream (deploy/compose.yaml; never production)
# ================================
FROM runtime AS demo-upstream

# openssl makes the compose demo's CA and server certificate (its `certs`
# job runs this image), so the demo needs no other image.
# hadolint ignore=DL3008
RUN export DEBIAN_FRONTEND=noninteractive \
    && apt-get update \
    && apt-get install -y --no-install-recommends openssl \
    && rm -rf /var/lib/apt/lists/*

COPY --from=build --chown=root:root /staging/upstream /app

USER 10001:10001
EXPOSE 8443
ENTRYPOINT ["/app/mock-upstream"]
CMD ["--listen", "0.0.0.0:8443", "--cert-file", "/certs/server.pem", "--key-file", "/certs/server-key.pem"]

# ================================
# Run: the gateway (the last stage, so the default target)
# ================================
FROM runtime AS gateway

COPY --from=build --chown=root:root /staging/gateway /app

# The binaries are owned by root and read-only for the gateway user; the
# process writes nothing to disk (the root filesystem may be read-only).
#
# GLIBC_TUNABLES: each thread's malloc cache keeps up to 64 freed blocks of
# each small size (glibc's default is 7). A loop with 32 calls in flight
# frees a call's objects in bursts larger than 7, and the overflow went
# through malloc's slower bins: with 64, a cache miss costs 2 % less CPU
# (bench/ab, static build: 0.982, 0.976, 0.981, 0.980). It holds at most
# 64 x 64 sizes of up to 1 KiB, ~2 MiB per thread that allocates (README,
# Memory). bench/ runs the gateway with this same line.
#
# GATEWAY_ADMIN_LISTEN: /healthz, /readyz and /metrics also on port 9464,
# outside GATEWAY_MAX_CONNECTIONS, for the probes and the scrape (CONTRACT,
# configuration; a gateway without the variable ignores it).
#
# SWIFT_BACKTRACE: on a crash, the static backtracer prints every thread's
# symbolicated backtrace to standard error (sanitize=yes leaves out memory
# contents), then the process dies as it would have.
ENV PATH="/app:${PATH}" \
    GATEWAY_LISTEN=0.0.0.0:8080 \
    GATEWAY_ADMIN_LISTEN=0.0.0.0:9464 \
    GLIBC_TUNABLES=glibc.malloc.tcache_count=64 \
    LOG_FORMAT=json \
    SWIFT_BACKTRACE=enable=yes,sanitize=yes,threads=all,images=all,interactive=no,swift-backtrace=/app/swift-backtrace-static

USER 10001:10001
EXPOSE 8080 9464

# Probes: no HEALTHCHECK instruction. The image has no curl or wget (nothing
# beyond the runtime libraries is installed) and the binary has no health
# subcommand, so the orchestrator probes over HTTP instead:
#   liveness   GET /healthz  -> 200 while the process serves
#   readiness  GET /readyz   -> 200 ready, 503 while starting or draining
# on port 9464 (and 8080).
# deploy/kubernetes/deployment.yaml and deploy/compose.yaml document them.

# SIGTERM (docker stop, Kubernetes) starts the graceful drain: /readyz turns
# 503, calls in flight finish within GATEWAY_SHUTDOWN_GRACE_MS, exit 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/app/products-gateway"]
CMD ["serve"]
